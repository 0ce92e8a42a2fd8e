"""Drive `longhand mcp` with the official MCP Python SDK client.

Usage: client.py LONGHAND_BINARY stdio|http

Builds an agent directory (fs granted a workspace read-write, http granted
one loopback port and a secret for it, fs__glob held for approval), starts
the server itself (stdio: as the SDK's subprocess; http: `--http
127.0.0.1:0`, address read from stderr) and checks: initialize and
version, the tool list with schemas and annotations, calls, a bad argument
as an isError result, an unknown tool as a protocol error, a read outside
the grant refused without leaking the file, a secret added by the host and
never shown to the client, a long call cancelled (the sandbox drops its
connection) with the server serving on, and 8 calls in flight at once.

Everything stays on 127.0.0.1. Exits non-zero naming the first failed
expectation; prints `ok: <transport> <n> checks` on success.
"""

import asyncio
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

WAIT = 30.0  # seconds to wait for an event that should come at once
CHECKS = 0
TOKEN = "tok-" + secrets.token_hex(12)


class Failed(Exception):
    pass


def expect(cond, what):
    global CHECKS
    if not cond:
        raise Failed(what)
    CHECKS += 1


class SlowServer:
    """A loopback HTTP server the sandboxed http tool talks to.

    `/hang/...` never answers: it waits for the client to close the
    connection and counts the close. `/echo` answers at once with the
    request's Authorization header as its body (and keeps it in `auth`).
    Any other path is answered (body: the path) once `release` is set.
    `seen` records every request's path.
    """

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.cond = threading.Condition()
        self.seen = []
        self.closed = 0
        self.release = threading.Event()
        self.auth = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            path = head.split(b" ")[1].decode()
            with self.cond:
                self.seen.append(path)
                self.cond.notify_all()
            if path.startswith("/hang"):
                while conn.recv(4096):
                    pass
                with self.cond:
                    self.closed += 1
                    self.cond.notify_all()
                return
            if path.startswith("/echo"):
                lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")[1:]
                headers = dict(line.split(": ", 1) for line in lines if ": " in line)
                self.auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
                body = self.auth.encode()
            else:
                self.release.wait()
                body = path.encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )

    def wait_for(self, predicate):
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self), timeout=WAIT)


def make_agent(root: Path, port: int) -> Path:
    agent = root / "agent"
    (agent / "ws").mkdir(parents=True)
    (agent / "ws" / "hello.txt").write_text("hello from the workspace\n")
    for i in range(8):
        (agent / "ws" / f"file-{i}.txt").write_text(f"content {i}\n")
    (agent / "agent.toml").write_text(
        f"""name = "mcp-test"
instructions = "unused: MCP clients call the tools directly"

[model]
provider = "replay"
model = "none"
cassette = "unused.json"

[approve]
fs__glob = "always"

[[tools]]
component = "fs"
dirs = ["ws:/workspace:rw"]

[[tools]]
component = "http"
allow_hosts = ["127.0.0.1:{port}"]
secrets = ["MCP_TEST_TOKEN@127.0.0.1:{port}"]
timeout = "120s"
"""
    )
    return agent


async def checks(client: Client, root: Path, slow: SlowServer):
    expect(client.protocol_version == "2025-11-25", f"negotiated {client.protocol_version}")
    info = client.session.initialize_result.server_info
    expect(info.name == "longhand", f"server name {info.name}")
    with warnings.catch_warnings():
        # Deprecated only for 2026-07-28 connections; this one is 2025-11-25.
        warnings.simplefilter("ignore")
        await client.send_ping()

    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ["fs__read", "fs__write", "fs__edit", "fs__list", "http__get", "http__fetch"]:
        expect(name in tools, f"{name} listed (got {sorted(tools)})")
    expect("fs__glob" not in tools, "fs__glob (held for approval) is not served")
    read = tools["fs__read"]
    expect(read.input_schema.get("type") == "object", "fs__read schema is an object")
    expect("path" in read.input_schema.get("properties", {}), "fs__read schema has path")
    expect("path" in read.input_schema.get("required", []), "fs__read requires path")

    def hints(name):
        a = tools[name].annotations
        expect(a is not None, f"{name} has annotations")
        return (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)

    expect(hints("fs__read") == (True, False, True, False), f"fs__read hints {hints('fs__read')}")
    expect(hints("fs__write") == (False, True, True, False), f"fs__write hints {hints('fs__write')}")
    expect(hints("fs__edit") == (False, True, False, False), f"fs__edit hints {hints('fs__edit')}")
    expect(hints("http__get") == (True, False, True, True), f"http__get hints {hints('http__get')}")
    expect(hints("http__fetch") == (False, True, False, True), f"http__fetch hints")

    # A call, its text and structured output.
    r = await client.call_tool("fs__read", {"path": "hello.txt"})
    expect(not r.is_error, f"fs__read failed: {r.content}")
    expect(r.structured_content["content"] == "hello from the workspace\n", "read content")
    expect(json.loads(r.content[0].text) == r.structured_content, "text is the JSON output")
    r = await client.call_tool("fs__write", {"path": "out.txt", "content": "written over MCP"})
    expect(not r.is_error, f"fs__write failed: {r.content}")
    written = (root / "agent" / "ws" / "out.txt").read_text()
    expect(written == "written over MCP", f"file on disk: {written!r}")

    # A bad argument: a result the model reads, not a protocol error.
    r = await client.call_tool("fs__read", {"paht": 1})
    expect(r.is_error, "bad argument is an error result")
    expect("invalid input" in r.content[0].text and "path" in r.content[0].text, r.content[0].text)

    # An unknown tool: a protocol error.
    try:
        await client.call_tool("fs__nope", {})
        expect(False, "unknown tool raised")
    except MCPError as e:
        expect(e.error.code == -32602, f"unknown tool code {e.error.code}")

    # A denied capability: nothing of the file, nor where it is, comes back.
    canary = "CANARY-" + secrets.token_hex(8)
    (root / "outside").mkdir()
    secret_file = root / "outside" / "secret.txt"
    secret_file.write_text(canary)
    for path in ["/workspace/../outside/secret.txt", str(secret_file), "../outside/secret.txt"]:
        r = await client.call_tool("fs__read", {"path": path})
        expect(r.is_error, f"reading {path} outside the grant is an error")
        dump = r.model_dump_json()
        expect(canary not in dump, f"canary leaked reading {path}")
        expect(str(root) not in dump.replace(str(secret_file), ""), f"host path leaked: {dump}")
    # A secret: the host adds it to the request, the client never sees it.
    r = await client.call_tool("http__get", {"url": f"http://127.0.0.1:{slow.port}/echo"})
    expect(not r.is_error, f"echo call: {r.content}")
    expect(slow.auth == f"Bearer {TOKEN}", f"the host added the secret (server saw {slow.auth!r})")
    expect(TOKEN not in r.model_dump_json(), "the secret reached the MCP client")
    r = await client.call_tool("http__get", {"url": "http://127.0.0.2:9/"})
    expect(r.is_error and "denied" in r.content[0].text, f"ungranted host: {r.content[0].text}")

    # Cancellation: a call that would hang for 120 s is cancelled once the
    # sandbox has connected; the sandbox then drops its connection.
    call = asyncio.create_task(
        client.call_tool("http__get", {"url": f"http://127.0.0.1:{slow.port}/hang/1"})
    )
    got = await asyncio.to_thread(slow.wait_for, lambda s: "/hang/1" in s.seen)
    expect(got, "the slow call reached the loopback server")
    call.cancel()
    try:
        await call
    except asyncio.CancelledError:
        pass
    closed = await asyncio.to_thread(slow.wait_for, lambda s: s.closed >= 1)
    expect(closed, "cancelling stopped the call (its connection was closed)")
    r = await client.call_tool("fs__read", {"path": "hello.txt"})
    expect(not r.is_error, "the server serves on after a cancellation")

    # Concurrency: 8 calls in flight at once (the server sees all 8 before
    # any is answered), each answered with its own result.
    calls = [
        asyncio.create_task(
            client.call_tool("http__get", {"url": f"http://127.0.0.1:{slow.port}/c/{i}"})
        )
        for i in range(8)
    ]
    got = await asyncio.to_thread(
        slow.wait_for, lambda s: sum(p.startswith("/c/") for p in s.seen) == 8
    )
    expect(got, f"8 calls in flight at once (saw {slow.seen})")
    slow.release.set()
    results = await asyncio.gather(*calls)
    for i, r in enumerate(results):
        expect(not r.is_error, f"concurrent call {i}: {r.content}")
        body = r.structured_content.get("body")
        expect(body == f"/c/{i}", f"concurrent call {i} got {body!r}")
    reads = await asyncio.gather(
        *[client.call_tool("fs__read", {"path": f"file-{i}.txt"}) for i in range(8)]
    )
    for i, r in enumerate(reads):
        expect(r.structured_content["content"] == f"content {i}\n", f"concurrent read {i}")


async def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("stdio", "http"):
        sys.exit("usage: client.py LONGHAND_BINARY stdio|http")
    binary, transport = sys.argv[1], sys.argv[2]
    slow = SlowServer()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        agent = make_agent(root, slow.port)
        # The Rust test passes a home whose compile cache is already warm.
        home = os.environ.get("LONGHAND_HOME") or str(root / "home")
        env = {
            "LONGHAND_HOME": home,
            "PATH": os.environ.get("PATH", ""),
            "MCP_TEST_TOKEN": TOKEN,
        }
        if transport == "stdio":
            server = StdioServerParameters(
                command=binary, args=["mcp", "--stdio", "--agent", str(agent)], env=env
            )
            async with Client(server) as client:
                await checks(client, root, slow)
        else:
            proc = subprocess.Popen(
                [binary, "mcp", "--http", "127.0.0.1:0", "--agent", str(agent)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                url = None
                for line in proc.stderr:
                    sys.stderr.write(line)
                    m = re.search(r"at (http://\S+/mcp)", line)
                    if m:
                        url = m.group(1)
                        break
                expect(url is not None, "the HTTP server printed its address")
                threading.Thread(
                    target=lambda: [sys.stderr.write(l) for l in proc.stderr], daemon=True
                ).start()
                async with Client(url) as client:
                    await checks(client, root, slow)
            finally:
                proc.terminate()
                proc.wait(timeout=WAIT)
    print(f"ok: {transport} {CHECKS} checks")


def first_failure(error):
    """The `Failed` in `error`, also inside the SDK's exception groups."""
    if isinstance(error, Failed):
        return error
    for inner in getattr(error, "exceptions", ()):
        found = first_failure(inner)
        if found:
            return found
    return None


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as e:
        failed = first_failure(e)
        if failed is None:
            raise
        print(f"FAILED: {failed}", file=sys.stderr)
        sys.exit(1)
