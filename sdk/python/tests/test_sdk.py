"""The SDK in plain CPython: schemas from hints, calls and their errors.

Run: python -m unittest discover -s sdk/python/tests
"""

import dataclasses
import enum
import json
import sys
import unittest
from pathlib import Path
from typing import Annotated, Literal, Optional, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import longhand_tool as lt  # noqa: E402
from longhand_tool import Effect, SchemaError, outcome, schema_for, tool  # noqa: E402


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Inner:
    depth: int


@dataclasses.dataclass
class Search:
    """Find lines in files."""

    pattern: Annotated[str, "a regular expression"]
    paths: list[str]
    limit: int = 10
    colour: Optional[Colour] = None
    inner: Optional[Inner] = None


class Move(TypedDict):
    src: str
    dst: str


class SchemaTests(unittest.TestCase):
    def test_a_dataclass_is_a_closed_object_with_its_required_fields(self):
        s = schema_for(Search)
        self.assertEqual(s["type"], "object")
        self.assertFalse(s["additionalProperties"])
        self.assertEqual(s["required"], ["pattern", "paths"])
        self.assertEqual(s["description"], "Find lines in files.")
        self.assertEqual(s["properties"]["pattern"], {"type": "string", "description": "a regular expression"})
        self.assertEqual(s["properties"]["paths"], {"type": "array", "items": {"type": "string"}})
        self.assertEqual(s["properties"]["limit"], {"type": "integer"})
        self.assertEqual(
            s["properties"]["colour"], {"anyOf": [{"enum": ["red", "blue"]}, {"type": "null"}]}
        )
        inner = s["properties"]["inner"]["anyOf"][0]
        self.assertEqual(inner["required"], ["depth"])

    def test_a_typeddict_uses_its_required_keys(self):
        s = schema_for(Move)
        self.assertEqual(sorted(s["required"]), ["dst", "src"])
        self.assertFalse(s["additionalProperties"])

    def test_literals_dicts_and_tuples(self):
        self.assertEqual(schema_for(Literal["a", "b"]), {"enum": ["a", "b"]})
        self.assertEqual(
            schema_for(dict[str, float]),
            {"type": "object", "additionalProperties": {"type": "number"}},
        )
        self.assertEqual(schema_for(tuple[int, ...]), {"type": "array", "items": {"type": "integer"}})

    def test_a_hint_without_a_schema_is_refused_naming_the_field(self):
        class NotData:
            pass

        @dataclasses.dataclass
        class Bad:
            thing: NotData

        with self.assertRaises(SchemaError) as e:
            schema_for(Bad)
        self.assertIn("input.thing", str(e.exception))
        with self.assertRaises(SchemaError):
            schema_for(dict[int, str])
        with self.assertRaises(SchemaError):
            schema_for(list)


class ToolTests(unittest.TestCase):
    def setUp(self):
        lt._REGISTRY.clear()

    def test_keyword_parameters_make_the_input_object(self):
        @tool(effect=Effect.IDEMPOTENT)
        def write_file(path: str, text: str, append: bool = False) -> dict:
            """Write a file."""
            return {"path": path, "bytes": len(text), "append": append}

        (d,) = lt.registered()
        self.assertEqual(d.name, "write_file", "the function's own name")
        self.assertEqual(d.effect, Effect.IDEMPOTENT)
        self.assertEqual(d.schema["required"], ["path", "text"])
        kind, out = outcome("write_file", json.dumps({"path": "a", "text": "xyz"}))
        self.assertEqual(kind, "ok")
        self.assertEqual(json.loads(out), {"path": "a", "bytes": 3, "append": False})

    def test_a_dataclass_input_is_built_and_a_dataclass_output_is_json(self):
        @dataclasses.dataclass
        class Found:
            count: int
            colour: Colour

        @tool
        def search(input: Search) -> Found:
            """Search."""
            assert isinstance(input.inner, Inner)
            return Found(count=len(input.paths) + input.inner.depth, colour=input.colour)

        kind, out = outcome(
            "search", json.dumps({"pattern": "x", "paths": ["a", "b"], "colour": "blue", "inner": {"depth": 3}})
        )
        self.assertEqual((kind, json.loads(out)), ("ok", {"count": 5, "colour": "blue"}))

    def test_every_exception_is_an_error_value_never_a_trap(self):
        @tool
        def fails(kind: str) -> str:
            """Fail as asked."""
            if kind == "invalid":
                raise lt.InvalidInput("kind: not this one")
            if kind == "missing":
                raise lt.NotFound("notes.txt")
            if kind == "denied":
                raise lt.AccessDenied("/etc", "not granted")
            if kind == "zero":
                return str(1 / 0)
            if kind == "as-is":
                raise lt.Failed("Traceback (most recent call last):\n  ...")
            raise KeyError(kind)

        self.assertEqual(outcome("fails", '{"kind": "invalid"}'), ("invalid-input", "kind: not this one"))
        self.assertEqual(outcome("fails", '{"kind": "missing"}'), ("not-found", "notes.txt"))
        self.assertEqual(outcome("fails", '{"kind": "denied"}'), ("access-denied", ("/etc", "not granted")))
        self.assertEqual(outcome("fails", '{"kind": "zero"}'), ("failed", "ZeroDivisionError: division by zero"))
        self.assertEqual(outcome("fails", '{"kind": "other"}'), ("failed", "KeyError: 'other'"))
        self.assertEqual(
            outcome("fails", '{"kind": "as-is"}'), ("failed", "Traceback (most recent call last):\n  ...")
        )
        self.assertEqual(outcome("nope", "{}")[0], "not-found")
        self.assertEqual(outcome("fails", "[1]")[0], "invalid-input")
        self.assertEqual(outcome("fails", "{")[0], "invalid-input")

    def test_an_output_that_is_not_json_fails_with_its_reason(self):
        @tool
        def odd() -> object:
            """Returns a set."""
            return {1, 2}

        kind, detail = outcome("odd", "{}")
        self.assertEqual(kind, "failed")
        self.assertIn("not JSON serializable", detail)

    def test_definitions_are_checked_when_the_module_loads(self):
        with self.assertRaises(SchemaError):

            @tool
            def no_doc(x: int) -> int:
                return x

        with self.assertRaises(SchemaError):

            @tool
            def untyped(x) -> int:  # noqa: ANN001
                """Untyped."""
                return x

        with self.assertRaises(SchemaError):

            @tool(name="Bad Name")
            def named(x: int) -> int:
                """Named."""
                return x


class HttpOutsideAComponent(unittest.TestCase):
    def test_fetch_says_it_needs_a_component_and_responses_read_back(self) -> None:
        from longhand_tool import http

        with self.assertRaises(http.HttpError) as raised:
            http.fetch("https://example.com/")
        self.assertIn("inside a component", str(raised.exception))
        r = http.Response(
            status=200,
            headers=[("content-type", "application/json")],
            body=b'{"a": [1]}',
        )
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertIsNone(r.header("x-missing"))
        self.assertEqual(r.json(), {"a": [1]})
        self.assertEqual(r.text(), '{"a": [1]}')


if __name__ == "__main__":
    unittest.main()
