"""JSON Schema from Python type hints.

A tool's input schema is derived from the annotations of its handler, so the
schema the model sees and the types the handler reads cannot drift apart.
What maps to what:

- ``str``, ``int``, ``float``, ``bool``, ``None`` -> the JSON types;
- ``list[T]`` (and ``tuple[T, ...]``, ``Sequence[T]``) -> an array of ``T``;
- ``dict[str, T]`` -> an object whose values are ``T``;
- ``Optional[T]`` / ``T | None`` -> ``T`` or null;
- ``Literal["a", "b"]`` and ``enum.Enum`` subclasses -> ``enum``;
- a dataclass or a ``TypedDict`` -> an object with its fields as properties,
  the fields without a default (``TypedDict``: the required keys) required,
  and no other property allowed;
- ``Annotated[T, "text"]`` -> ``T`` with ``text`` as its description.

Anything else (``Any``, unions of several object types, a class that is not
a dataclass) is refused with :class:`SchemaError` naming the field, at import
time of the tool's module, not at its first call.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["SchemaError", "schema_for", "from_json"]

_PRIMITIVES: dict[type, str] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


class SchemaError(TypeError):
    """A type hint that has no JSON Schema here."""


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _strip_annotated(tp: Any) -> tuple[Any, str | None]:
    if get_origin(tp) is typing.Annotated:
        base, *extra = get_args(tp)
        text = next((e for e in extra if isinstance(e, str)), None)
        return base, text
    return tp, None


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    origin = get_origin(tp)
    if origin is Union or (sys.version_info >= (3, 10) and origin is types.UnionType):
        return get_args(tp)
    return None


def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls, include_extras=True)


def schema_for(tp: Any, where: str = "input") -> dict[str, Any]:
    """The JSON Schema of values of type ``tp``; ``where`` names it in errors."""
    tp, description = _strip_annotated(tp)
    schema = _schema(tp, where)
    if description:
        schema = {**schema, "description": description}
    return schema


def _schema(tp: Any, where: str) -> dict[str, Any]:
    if tp in _PRIMITIVES:
        return {"type": _PRIMITIVES[tp]}
    members = _union_args(tp)
    if members is not None:
        others = [m for m in members if m is not type(None)]
        nullable = len(others) < len(members)
        if len(others) == 1:
            inner = schema_for(others[0], where)
            return {"anyOf": [inner, {"type": "null"}]} if nullable else inner
        choices = [schema_for(m, where) for m in members]
        return {"anyOf": choices}
    origin = get_origin(tp)
    if origin is Literal:
        values = list(get_args(tp))
        for v in values:
            if not isinstance(v, (str, int, float, bool)) and v is not None:
                raise SchemaError(f"{where}: Literal values must be JSON scalars, not {v!r}")
        return {"enum": values}
    if origin in (list, Sequence, typing.List) or tp in (list,):
        args = get_args(tp)
        if not args:
            raise SchemaError(f"{where}: say what the list holds (list[str], not list)")
        return {"type": "array", "items": schema_for(args[0], f"{where}[]")}
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for(args[0], f"{where}[]")}
        return {
            "type": "array",
            "prefixItems": [schema_for(a, f"{where}[{i}]") for i, a in enumerate(args)],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in (dict, typing.Dict) or tp is dict:
        args = get_args(tp)
        if len(args) != 2 or args[0] is not str:
            raise SchemaError(f"{where}: a dict must be dict[str, T] (JSON object keys are text)")
        return {"type": "object", "additionalProperties": schema_for(args[1], f"{where}.*")}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _object(tp, where, _dataclass_required(tp))
    if _is_typeddict(tp):
        return _object(tp, where, set(tp.__required_keys__))
    raise SchemaError(
        f"{where}: no JSON Schema for {tp!r}; use str, int, float, bool, list[...], "
        "dict[str, ...], Optional[...], Literal[...], an Enum, a dataclass or a TypedDict"
    )


def _dataclass_required(cls: type) -> set[str]:
    return {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


def _object(cls: type, where: str, required: set[str]) -> dict[str, Any]:
    hints = _hints(cls)
    properties = {name: schema_for(hint, f"{where}.{name}") for name, hint in hints.items()}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    names = [n for n in hints if n in required]
    if names:
        schema["required"] = names
    doc = cls.__doc__
    if doc and not doc.startswith(cls.__name__ + "("):  # dataclasses invent a docstring
        schema["description"] = " ".join(doc.split())
    return schema


def from_json(tp: Any, value: Any) -> Any:
    """``value`` (already checked against ``schema_for(tp)`` by the host) as
    an instance of ``tp``: dataclasses and enums are built, the rest is JSON."""
    tp, _ = _strip_annotated(tp)
    if value is None:
        return None
    members = _union_args(tp)
    if members is not None:
        others = [m for m in members if m is not type(None)]
        return from_json(others[0], value) if len(others) == 1 else value
    origin = get_origin(tp)
    if origin in (list, Sequence, typing.List):
        (item,) = get_args(tp)[:1]
        return [from_json(item, v) for v in value]
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in value)
        return tuple(from_json(a, v) for a, v in zip(args, value))
    if origin in (dict, typing.Dict):
        inner = get_args(tp)[1]
        return {k: from_json(inner, v) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        return tp(**{k: from_json(hints[k], v) for k, v in value.items() if k in hints})
    if _is_typeddict(tp):
        hints = _hints(tp)
        return {k: from_json(hints[k], v) for k, v in value.items() if k in hints}
    if tp is float and isinstance(value, int):
        return float(value)
    return value
