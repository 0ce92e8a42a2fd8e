"""`greet`, the smallest Python tool: a test fixture that host/tests/all/componentize.rs
builds with componentize-py at test time against wit/ (world longhand:tool/tool)."""

import json

from wit_world import exports
from wit_world.imports.longhand_tool_types import (
    CapabilityRequests,
    ComponentInfo,
    Effect,
    ToolError_Failed,
    ToolSpec,
)
from componentize_py_types import Err


class Tools(exports.Tools):
    def describe(self) -> ComponentInfo:
        return ComponentInfo(
            name="greet-py",
            version="0.1.0",
            description="Says hello (Python).",
            tools=[
                ToolSpec(
                    name="greet",
                    description="Greets someone by name.",
                    input_schema=json.dumps(
                        {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        }
                    ),
                    effect=Effect.READ_ONLY,
                )
            ],
            requests=CapabilityRequests(dirs=[], hosts=[], env=[], secrets=[]),
        )

    def call(self, name: str, input: str) -> str:
        if name != "greet":
            raise Err(ToolError_Failed(f"no tool {name}"))
        who = json.loads(input)["name"]
        return json.dumps({"greeting": f"Hello, {who}!"})
