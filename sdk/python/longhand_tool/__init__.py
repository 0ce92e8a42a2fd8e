"""Write Longhand tools in Python.

A Longhand tool is a WebAssembly component that exports ``longhand:tool/tools``
(``describe`` and ``call``). This package turns plain, type-hinted Python
functions into that export::

    from dataclasses import dataclass
    from longhand_tool import tool, export, Effect

    @dataclass
    class Greet:
        name: str

    @tool(effect=Effect.READ_ONLY)
    def greet(input: Greet) -> dict:
        "Say hello to someone."
        return {"greeting": f"Hello, {input.name}!"}

    Tools = export(name="greet", version="0.1.0", description="Says hello.")

``componentize-py -w tool componentize app -o greet.wasm`` (or
``longhand tool build``) makes the component. Each handler stays a plain
function: call it from a test in ordinary CPython.

How a call ends:

- a return value is the output (dataclasses, enums, tuples are turned into
  JSON; anything else must be JSON-serialisable);
- :class:`InvalidInput`, :class:`NotFound`, :class:`AccessDenied` tell the
  model what to fix, find or ask for;
- :class:`Failed` is ``failed`` with its message as given (a traceback, a
  compiler's output);
- any other exception is ``failed`` with its type and message. A Python
  exception never traps the component.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
from typing import Any, Callable, TypeVar, get_type_hints

from .schema import SchemaError, from_json, schema_for

__all__ = [
    "AccessDenied",
    "DirRequest",
    "Effect",
    "Failed",
    "InvalidInput",
    "NotFound",
    "SchemaError",
    "ToolDef",
    "export",
    "log",
    "progress",
    "registered",
    "tool",
]

__version__ = "0.1.0"


class Effect(enum.Enum):
    """What running a tool does to the world (``longhand:tool/types.effect``).

    Longhand re-runs ``READ_ONLY`` and ``IDEMPOTENT`` calls after a crash and
    reports an interrupted ``WRITES`` call to the model as "outcome unknown";
    declare the weakest that is true.
    """

    READ_ONLY = "read-only"
    IDEMPOTENT = "idempotent"
    WRITES = "writes"


class InvalidInput(Exception):
    """The input does not fit; say which field and what was wrong."""


class NotFound(Exception):
    """The named file, key or record does not exist."""


class Failed(Exception):
    """The tool ran and could not do the job; the message reaches the model
    as written, without the exception's type in front."""


class AccessDenied(Exception):
    """The tool tried to use something it was not granted."""

    def __init__(self, resource: str, reason: str) -> None:
        super().__init__(f"{resource}: {reason}")
        self.resource = resource
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class DirRequest:
    """A directory the tool asks the operator to map in (information only)."""

    guest_path: str
    why: str
    writable: bool = False


@dataclasses.dataclass(frozen=True)
class ToolDef:
    """One registered tool: its name, description, effect, schema and handler."""

    name: str
    description: str
    effect: Effect
    schema: dict[str, Any]
    handler: Callable[..., Any]
    # The type of the single input parameter, or None when the handler takes
    # the input's fields as keyword parameters.
    input_type: Any
    params: dict[str, Any]

    def run(self, input: dict[str, Any]) -> Any:
        """Call the handler on an input object (already schema-checked)."""
        if self.input_type is not None:
            return self.handler(from_json(self.input_type, input))
        args = {k: from_json(self.params[k], v) for k, v in input.items() if k in self.params}
        return self.handler(**args)


_REGISTRY: dict[str, ToolDef] = {}

F = TypeVar("F", bound=Callable[..., Any])


def _is_record(tp: Any) -> bool:
    return (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or (
        isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")
    )


def _define(fn: Callable[..., Any], name: str | None, description: str | None, effect: Effect) -> ToolDef:
    # The function's own name: `csv_stats` is the tool `csv_stats`, the
    # name its author and the model both read (tool names allow `_`).
    tool_name = name or fn.__name__
    if not tool_name or not all(c.islower() or c.isdigit() or c in "-_" for c in tool_name):
        raise SchemaError(
            f"tool name {tool_name!r}: use lowercase letters, digits, '-' and '_' only"
        )
    if not isinstance(effect, Effect):
        raise SchemaError(f"tool {tool_name}: effect must be an Effect, not {effect!r}")
    text = description or inspect.getdoc(fn)
    if not text:
        raise SchemaError(f"tool {tool_name}: give it a docstring or description= (the model reads it)")
    hints = get_type_hints(fn, include_extras=True)
    params = [p for p in inspect.signature(fn).parameters.values()]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise SchemaError(f"tool {tool_name}: *args/**kwargs have no schema; name each field")
        if p.name not in hints:
            raise SchemaError(f"tool {tool_name}: parameter {p.name!r} needs a type hint")
    if len(params) == 1 and _is_record(hints[params[0].name]):
        input_type = hints[params[0].name]
        schema = schema_for(input_type, f"{tool_name}.input")
        fields: dict[str, Any] = {}
    else:
        input_type = None
        fields = {p.name: hints[p.name] for p in params}
        schema = {
            "type": "object",
            "properties": {k: schema_for(t, f"{tool_name}.{k}") for k, t in fields.items()},
            "additionalProperties": False,
        }
        required = [p.name for p in params if p.default is inspect.Parameter.empty]
        if required:
            schema["required"] = required
    return ToolDef(tool_name, " ".join(text.split()), effect, schema, fn, input_type, fields)


def tool(
    fn: F | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = Effect.READ_ONLY,
) -> Any:
    """Register a function as a tool of this component.

    Use as ``@tool`` or ``@tool(effect=Effect.WRITES, name="...")``. The
    function is returned unchanged. Its input is either one dataclass or
    ``TypedDict`` parameter, or keyword parameters with type hints; its
    docstring (or ``description=``) is what the model reads.
    """

    def register(f: F) -> F:
        definition = _define(f, name, description, effect)
        if definition.name in _REGISTRY and _REGISTRY[definition.name].handler is not f:
            raise SchemaError(f"two tools are named {definition.name!r}")
        _REGISTRY[definition.name] = definition
        return f

    return register(fn) if fn is not None else register


def registered() -> list[ToolDef]:
    """The tools registered so far, in the order they were defined."""
    return list(_REGISTRY.values())


def to_json(value: Any) -> str:
    """A handler's return value as JSON text."""

    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, enum.Enum):
            return plain(v.value)
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(value), ensure_ascii=False, allow_nan=False)


def outcome(name: str, input_json: str) -> tuple[str, Any]:
    """Run tool ``name`` on ``input_json``; returns ``("ok", output_json)`` or
    ``(kind, detail)`` with kind one of ``invalid-input``, ``not-found``,
    ``access-denied`` (detail ``(resource, reason)``) or ``failed``.

    The host checked the input against the schema already; this still refuses
    a name it does not know and input that is not an object.
    """
    definition = _REGISTRY.get(name)
    if definition is None:
        return "not-found", f"no tool named {name!r} in this component"
    try:
        value = json.loads(input_json)
    except ValueError as e:
        return "invalid-input", f"input is not JSON: {e}"
    if not isinstance(value, dict):
        return "invalid-input", "input must be a JSON object"
    try:
        return "ok", to_json(definition.run(value))
    except InvalidInput as e:
        return "invalid-input", str(e)
    except NotFound as e:
        return "not-found", str(e)
    except AccessDenied as e:
        return "access-denied", (e.resource, e.reason)
    except Failed as e:
        return "failed", str(e)
    except Exception as e:  # every other failure is the tool's: report, never trap
        return "failed", f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def export(
    *,
    name: str,
    version: str,
    description: str,
    dirs: list[DirRequest] | tuple[DirRequest, ...] = (),
    hosts: list[str] | tuple[str, ...] = (),
    env: list[str] | tuple[str, ...] = (),
    secrets: list[str] | tuple[str, ...] = (),
) -> type:
    """The class componentize-py exports as ``tools``: bind it to the name
    ``Tools`` at the top of the app module. ``dirs``, ``hosts``, ``env`` and
    ``secrets`` are what the tool asks the operator for (nothing is granted
    because it is asked for)."""
    from ._export import make_exports

    return make_exports(name, version, description, list(dirs), list(hosts), list(env), list(secrets))


def log(level: str, message: str) -> None:
    """A log line recorded by the host with the call (``trace``, ``debug``,
    ``info``, ``warn``, ``error``); printed to stderr outside a component."""
    from ._export import host_log

    host_log(level, message)


def progress(done: int, total: int | None, message: str) -> None:
    """Progress on a long call; printed to stderr outside a component."""
    from ._export import host_progress

    host_progress(done, total, message)


