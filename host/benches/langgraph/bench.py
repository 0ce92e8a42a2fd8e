"""LangGraph baseline for the Longhand session bench (docs/benchmarks.md).

The same scripted one-tool agent as `cargo bench -p longhand-host --bench
session` part 1: a fake chat model that answers every turn with one tool call
(and with plain text after N turns), a trivial tool (the equivalent of
`json__query` with filter `.` on `{"a": 1}`), a SqliteSaver checkpointer on
disk with `durability="sync"` (each checkpoint committed before the next
step starts) and `PRAGMA synchronous=FULL`, as the Longhand store uses.

Printed per run: median wall time per step (between consecutive model
calls), the tool's own median time, the difference (framework overhead),
total / N, and the checkpoint database size (db + wal as left, and after a
`wal_checkpoint(TRUNCATE)`). Run it through run.sh, which makes the venv.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from importlib.metadata import version

TOOL_SECONDS: list[float] = []
MODEL_CALLS: list[float] = []


@tool
def query(filter: str, input: dict) -> str:
    """Run a jq filter over a JSON value (only `.` here)."""
    start = time.perf_counter()
    out = json.dumps({"results": [json.loads(json.dumps(input))], "truncated": False})
    TOOL_SECONDS.append(time.perf_counter() - start)
    return out


class ScriptedModel(BaseChatModel):
    """Answers turn k with a call `c-k` of `json__query`; text after `steps`."""

    steps: int

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kw) -> ChatResult:
        MODEL_CALLS.append(time.perf_counter())
        # Stateless, like the Rust side: the turn comes from the last result.
        last = next((m for m in reversed(messages) if isinstance(m, ToolMessage)), None)
        done = int(last.tool_call_id.split("-")[1]) if last else 0
        if done >= self.steps:
            msg = AIMessage(content="done")
        else:
            msg = AIMessage(
                content="",
                tool_calls=[
                    {
                        "id": f"c-{done + 1}",
                        "name": "query",
                        "args": {"filter": ".", "input": {"a": 1}},
                    }
                ],
            )
        msg.usage_metadata = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
        return ChatResult(generations=[ChatGeneration(message=msg)])


def build(model: ScriptedModel, saver: SqliteSaver):
    tools = [query]
    bound = model.bind_tools(tools)

    def agent(state: MessagesState):
        return {"messages": [bound.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=saver)


def size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def run(steps: int) -> dict:
    TOOL_SECONDS.clear()
    MODEL_CALLS.clear()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as d:
        path = os.path.join(d, "checkpoints.db")
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()  # journal_mode=WAL and the tables
        conn.execute("PRAGMA synchronous=FULL")
        sync = conn.execute("PRAGMA synchronous").fetchone()[0]
        graph = build(ScriptedModel(steps=steps), saver)
        config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * steps + 10}
        start = time.perf_counter()
        out = graph.invoke(
            {"messages": [("user", "query the value, again and again")]},
            config,
            durability="sync",
        )
        total = time.perf_counter() - start
        assert out["messages"][-1].content == "done", out["messages"][-1]
        as_left = size(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpointed = size(path)
        rows = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        conn.close()
    step_s = [b - a for a, b in zip(MODEL_CALLS, MODEL_CALLS[1:])]
    tool_s = statistics.median(TOOL_SECONDS)
    return {
        "steps": steps,
        "synchronous": sync,
        "step_ms_median": statistics.median(step_s) * 1e3,
        "step_ms_p90": sorted(step_s)[int(len(step_s) * 0.9)] * 1e3,
        "tool_ms_median": tool_s * 1e3,
        "overhead_ms_median": statistics.median(s - tool_s for s in step_s) * 1e3,
        "total_over_n_ms": total / steps * 1e3,
        "store_bytes_as_left": as_left,
        "store_bytes_checkpointed": checkpointed,
        "checkpoints": rows,
    }


def versions() -> str:
    return (
        f"langgraph {version('langgraph')}, langgraph-checkpoint-sqlite "
        f"{version('langgraph-checkpoint-sqlite')}, langchain-core {version('langchain-core')}, "
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}"
    )


def main() -> int:
    # `--versions`: print what is installed and stop (the Rust bench calls
    # it once, then runs one repeat at a time, interleaved with its own).
    if sys.argv[1:] == ["--versions"]:
        print(versions())
        return 0
    quick = os.environ.get("LONGHAND_BENCH_QUICK") == "1"
    quiet = os.environ.get("LONGHAND_LANGGRAPH_QUIET") == "1"
    sizes = [int(a) for a in sys.argv[1:]] or ([50, 200] if quick else [200, 1000])
    forced = os.environ.get("LONGHAND_LANGGRAPH_REPEATS")
    repeats = {s: int(forced) if forced else (1 if quick else 3) for s in sizes}
    if not quiet:
        print(versions())
        print(f"checkpoints in {os.environ.get('TMPDIR', '/tmp')}")
        print(f"{'steps':>6} {'run':>3} {'step ms':>8} {'p90 ms':>8} {'tool ms':>8} {'ovh ms':>8} "
              f"{'total/N':>8} {'store MB':>9} {'ckpt MB':>8} {'ckpts':>6}")
    summary = {}
    for s in sizes:
        runs = [run(s) for _ in range(repeats[s])]
        for i, r in enumerate(runs):
            if quiet:
                continue
            print(f"{s:>6} {i:>3} {r['step_ms_median']:>8.2f} {r['step_ms_p90']:>8.2f} "
                  f"{r['tool_ms_median']:>8.3f} {r['overhead_ms_median']:>8.2f} "
                  f"{r['total_over_n_ms']:>8.2f} {r['store_bytes_as_left'] / 1e6:>9.1f} "
                  f"{r['store_bytes_checkpointed'] / 1e6:>8.1f} {r['checkpoints']:>6}")
        summary[s] = {
            "step_ms_median": statistics.median(r["step_ms_median"] for r in runs),
            "overhead_ms_median": statistics.median(r["overhead_ms_median"] for r in runs),
            "total_over_n_ms": statistics.median(r["total_over_n_ms"] for r in runs),
            "store_bytes_as_left": runs[-1]["store_bytes_as_left"],
            "store_bytes_checkpointed": runs[-1]["store_bytes_checkpointed"],
            "checkpoints": runs[-1]["checkpoints"],
            "tool_ms_median": statistics.median(r["tool_ms_median"] for r in runs),
        }
    print("SUMMARY " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
