"""A Streamable HTTP MCP server that wants a bearer token, for host/tests/all/mcp_client.rs.

Usage: http_bearer.py [--port N] [--token-env NAME]

Built with the official Python SDK (PyPI `mcp` 2.x, MCPServer). Listens on
127.0.0.1:N (0, the default, picks a free port), endpoint /mcp. Every HTTP
request must carry `Authorization: Bearer <token>`, the token being the
value of environment variable NAME (default TRACKER_TOKEN; the server exits
2 if it is unset or empty); anything else gets 401 before the MCP layer
sees it. Once accepting connections it prints exactly one line to stdout,
`listening http://127.0.0.1:PORT/mcp`, and flushes; logs go to stderr.

Tools:
  echo(text)        -> text                 (annotated readOnlyHint: true)
  add_issue(title)  -> "issue-N" (1, 2, ...) (no annotations: a write)
  whoami()          -> the Authorization header received, verbatim
"""

import argparse
import asyncio
import hmac
import os
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations


def build_app(token: str):
    server = MCPServer("tracker", version="1.0.0", log_level="WARNING")
    issues: list[str] = []

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Returns the text unchanged."""
        return text

    @server.tool()
    def add_issue(title: str) -> str:
        """Files an issue; returns its id."""
        issues.append(title)
        return f"issue-{len(issues)}"

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Returns the Authorization header this request carried."""
        return (ctx.headers or {}).get("authorization", "")

    app = server.streamable_http_app()
    expected = ("Bearer " + token).encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            got = b""
            for name, value in scope["headers"]:
                if name == b"authorization":
                    got = value
                    break
            if not hmac.compare_digest(got, expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain"),
                            (b"www-authenticate", b'Bearer realm="tracker"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"unauthorized\n"})
                return
        await app(scope, receive, send)

    return guarded


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token-env", default="TRACKER_TOKEN")
    args = ap.parse_args()
    token = os.environ.get(args.token_env, "")
    if not token:
        print(f"http_bearer.py: ${args.token_env} is unset or empty", file=sys.stderr)
        sys.exit(2)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]

    config = uvicorn.Config(build_app(token), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()  # raises what stopped it
            sys.exit(1)
        await asyncio.sleep(0.01)
    sys.stdout.write(f"listening http://127.0.0.1:{port}/mcp\n")
    sys.stdout.flush()
    await serving


if __name__ == "__main__":
    asyncio.run(main())
