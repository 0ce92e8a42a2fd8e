#!/usr/bin/env bash
# LangGraph baseline for docs/benchmarks.md ("Session and brain").
#
#   host/benches/langgraph/run.sh                    # 200 and 1000 steps, 3 runs each, in $TMPDIR
#   TMPDIR=/dev/shm host/benches/langgraph/run.sh    # checkpoints on tmpfs
#   host/benches/langgraph/run.sh --versions         # set up the venv, print versions
#   LONGHAND_BENCH_QUICK=1 host/benches/langgraph/run.sh
#
# Creates a venv beside this script (.venv, ignored by git) and installs the
# pinned requirements into it from PyPI on first use (again only when
# requirements.txt changes). CI never runs this.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${LONGHAND_LANGGRAPH_VENV:-$here/.venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip >&2
fi
stamp="$venv/.longhand-requirements"
if ! cmp -s "$here/requirements.txt" "$stamp"; then
    if ! "$venv/bin/pip" install --quiet --requirement "$here/requirements.txt" >&2; then
        echo "pip install failed; see above" >&2
        exit 1
    fi
    cp "$here/requirements.txt" "$stamp"
fi
exec "$venv/bin/python" "$here/bench.py" "$@"
