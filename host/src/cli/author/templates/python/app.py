"""The `{{name}}` tool component."""

from dataclasses import dataclass

from longhand_tool import Effect, InvalidInput, export, tool


@dataclass
class Greet:
    """Who to greet."""

    name: str


@tool(effect=Effect.READ_ONLY)
def greet(input: Greet) -> dict:
    """Say hello to someone by name."""
    if not input.name.strip():
        raise InvalidInput("`name` is empty")
    return {"greeting": f"Hello, {input.name}!"}


# componentize-py exports the class bound to this name as `longhand:tool/tools`.
Tools = export(name="{{name}}", version="0.1.0", description="Says hello.")
