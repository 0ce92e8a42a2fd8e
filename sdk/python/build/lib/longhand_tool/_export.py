"""The bridge to the bindings componentize-py generates (``wit_world``).

Only this module imports ``wit_world``, and only when a component runs:
the rest of the SDK (schemas, the registry, :func:`longhand_tool.outcome`)
works in plain CPython, which is where a tool's unit tests run.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def make_exports(
    name: str,
    version: str,
    description: str,
    dirs: list[Any],
    hosts: list[str],
    env: list[str],
    secrets: list[str],
) -> type:
    from . import Effect, outcome, registered

    class Tools:
        """``longhand:tool/tools`` over the tools registered with ``@tool``."""

        def describe(self) -> Any:
            from componentize_py_types import Err  # noqa: F401  (present in a component)
            from wit_world.imports import longhand_tool_types as t

            effects = {
                Effect.READ_ONLY: t.Effect.READ_ONLY,
                Effect.IDEMPOTENT: t.Effect.IDEMPOTENT,
                Effect.WRITES: t.Effect.WRITES,
            }
            return t.ComponentInfo(
                name=name,
                version=version,
                description=description,
                tools=[
                    t.ToolSpec(
                        name=d.name,
                        description=d.description,
                        input_schema=json.dumps(d.schema),
                        effect=effects[d.effect],
                    )
                    for d in registered()
                ],
                requests=t.CapabilityRequests(
                    dirs=[
                        t.DirRequest(
                            guest_path=d.guest_path,
                            access=t.DirAccess.READ_WRITE if d.writable else t.DirAccess.READ_ONLY,
                            why=d.why,
                        )
                        for d in dirs
                    ],
                    hosts=hosts,
                    env=env,
                    secrets=secrets,
                ),
            )

        def call(self, name: str, input: str) -> str:
            from componentize_py_types import Err
            from wit_world.imports import longhand_tool_types as t

            kind, detail = outcome(name, input)
            if kind == "ok":
                return detail
            if kind == "invalid-input":
                raise Err(t.ToolError_InvalidInput(detail))
            if kind == "not-found":
                raise Err(t.ToolError_NotFound(detail))
            if kind == "access-denied":
                resource, reason = detail
                raise Err(t.ToolError_AccessDenied(t.Denied(resource=resource, reason=reason)))
            raise Err(t.ToolError_Failed(detail))

    return Tools


_LEVELS = ("trace", "debug", "info", "warn", "error")


def _in_component() -> bool:
    try:
        import wit_world.imports.host  # noqa: F401
    except ImportError:
        return False
    return True


def host_log(level: str, message: str) -> None:
    if level not in _LEVELS:
        raise ValueError(f"log level must be one of {', '.join(_LEVELS)}, not {level!r}")
    if not _in_component():
        print(f"[{level}] {message}", file=sys.stderr)
        return
    from wit_world.imports import host

    host.log(getattr(host.LogLevel, level.upper()), message)


def host_progress(done: int, total: int | None, message: str) -> None:
    if not _in_component():
        print(f"[progress] {done}/{total if total is not None else '?'} {message}", file=sys.stderr)
        return
    from wit_world.imports import host

    host.progress(done, total, message)
