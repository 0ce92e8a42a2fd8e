#!/usr/bin/env bash
# Installs the official MCP SDK clients that host/tests/all/mcp.rs drives
# against `longhand mcp`: the Python SDK (PyPI `mcp`, pinned) into a venv
# at tests/mcp/.venv, and the TypeScript SDK (npm `@modelcontextprotocol/sdk`,
# pinned by tests/mcp/package-lock.json) into tests/mcp/node_modules, along
# with the reference servers host/tests/all/mcp_client.rs drives
# (`@modelcontextprotocol/server-filesystem` and `server-everything`; their
# directory is exported as LONGHAND_MCP_SERVERS). The venv also runs the test
# servers in tests/mcp/servers.
#
# Idempotent. Needs python3 (3.10+) with venv and pip, node 20+ and npm.
# Progress goes to stderr; stdout carries only the `export` lines for the
# tests, so CI runs: eval "$(bash .ci/setup-mcp.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."

MCP_PY_VERSION=2.3.0
venv=tests/mcp/.venv

{
    # A venv cut off while it was made (no pip in it) is made again.
    if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf "$venv"
        # Debian's own python3 keeps venv (ensurepip) in a package of its own.
        if ! python3 -m venv "$venv"; then
            rm -rf "$venv"
            apt-get update && apt-get install -y python3-venv
            python3 -m venv "$venv"
        fi
    fi
    if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_PY_VERSION')" 2>/dev/null; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_PY_VERSION"
    fi
    if [ -f tests/mcp/package-lock.json ]; then
        (cd tests/mcp && npm ci --no-audit --no-fund)
    fi
} >&2

echo "export LONGHAND_MCP_PYTHON=$PWD/$venv/bin/python"
echo "export LONGHAND_MCP_NODE=$(command -v node || echo node)"
echo "export LONGHAND_MCP_SERVERS=$PWD/tests/mcp/node_modules/@modelcontextprotocol"
