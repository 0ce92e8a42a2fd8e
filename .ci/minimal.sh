#!/usr/bin/env bash
# The minimal build (`cargo build --no-default-features`): the tool host,
# the loop and the SQLite store, without serve, MCP, PostgreSQL,
# OpenTelemetry or the OCI publisher. It runs the offline example to its
# end, and each left-out part is refused saying which cargo feature it needs.
#
#   .ci/minimal.sh PATH-TO-LONGHAND
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: .ci/minimal.sh PATH-TO-LONGHAND}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LONGHAND_HOME="$work/home"

"$bin" --version
cp -r examples/code-audit "$work/code-audit"
rm -rf "$work/code-audit/out"
"$bin" run "$work/code-audit" | tee "$work/run.out"
grep -q "^finished:" "$work/run.out"
ls "$work"/code-audit/out/*/report.md

# A left-out part: usage error (exit 2) naming its cargo feature.
refused() {
    local feature=$1
    shift
    set +e
    "$@" >"$work/out" 2>"$work/err"
    local code=$?
    set -e
    if [[ $code != 2 ]] || ! grep -q "cargo feature \`$feature\`" "$work/err"; then
        echo "expected exit 2 naming the feature $feature from: $*; got $code:" >&2
        cat "$work/err" >&2
        exit 1
    fi
    echo "refused as expected ($feature): $(head -c 200 "$work/err")"
}
refused serve "$bin" serve --agents examples
refused mcp "$bin" mcp --stdio
refused postgres env LONGHAND_STORE=postgres://nobody@127.0.0.1:1/none "$bin" sessions
refused otel env OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 "$bin" sessions
refused oci "$bin" tool publish "$work/none.wasm" oci://127.0.0.1:5000/none:1
echo "minimal build: ok"
