#!/usr/bin/env bash
# Sessions survive an upgrade: OLD (a `longhand` binary of an earlier
# release) starts two sessions that pause — one waiting for an approval,
# one at its step limit — and NEW approves, raises and resumes them to the
# end, on the same data directory. Offline (`--script`).
#
#   .ci/upgrade.sh OLD_BINARY NEW_BINARY
#
# Not run by .ci/run (it needs a binary of an earlier release); the result
# of the last run is in docs/benchmarks.md ("The brain as its own crate").
set -euo pipefail
old=$(realpath "$1")
new=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LONGHAND_HOME="$work/home"
say() { printf '== %s\n' "$*"; }

agent() { # NAME LIMITS APPROVE RESPONSES_JSON
    mkdir -p "$work/$1/work"
    cat > "$work/$1/agent.toml" <<TOML
name = "$1"
instructions = "Do exactly what the script says."
goal = "Follow the script."

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"

[limits]
$2

[approve]
$3

[[tools]]
component = "fs"
only = ["read", "write", "stat"]
dirs = ["work:/w:rw"]
TOML
    printf '{"responses": %s}' "$4" > "$work/$1/script.json"
}
turn() { # ID TOOL ARGS_JSON
    printf '{"text":"working","tool_calls":[{"id":"%s","name":"%s","arguments":%s}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":1}}' \
        "$1" "$2" "$(printf '%s' "$3" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')"
}
done_turn='{"text":"done","stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":1}}'

agent approving "max_steps = 20" 'fs__write = "writes"' \
    "[$(turn c1 fs__write '{"path":"/w/a.txt","content":"written after the upgrade"}'),$done_turn]"
agent limited "max_steps = 2" "" \
    "[$(turn s1 fs__stat '{"path":"/w"}'),$(turn s2 fs__stat '{"path":"/w"}'),$(turn s3 fs__stat '{"path":"/w"}'),$done_turn]"

session_of() { python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["session"])'; }
status_of() { "$new" sessions --json | python3 -c "
import json,sys
for line in sys.stdin:
    s=json.loads(line)
    if s.get('id')=='$1': print(s.get('status')); break"; }

say "old release: $("$old" --version)"
a=$("$old" run "$work/approving" --script "$work/approving/script.json" --detach --json | session_of)
b=$("$old" run "$work/limited" --script "$work/limited/script.json" --detach --json | session_of)
# Run both until they pause, with the old release's worker.
"$old" worker --until-idle >/dev/null 2>&1 || true
say "paused by the old release: $a $(status_of "$a"), $b $(status_of "$b")"

say "new release: $("$new" --version)"
request=$("$new" approvals --json | python3 -c "
import json,sys
for line in sys.stdin:
    r=json.loads(line)
    if r['session']=='$a': print(r['request']); break")
"$new" approve "$a" "$request" >/dev/null
"$new" resume "$a" >/dev/null
"$new" resume "$b" --raise max_steps=10 >/dev/null
sa=$(status_of "$a"); sb=$(status_of "$b")
say "after the upgrade: $a $sa, $b $sb"
test "$(cat "$work/approving/work/a.txt")" = "written after the upgrade"
test "$sa" = finished && test "$sb" = finished
say "ok: both sessions finished on the new release"
