#!/usr/bin/env bash
# The cost of one Claude Code hook process, whole process, as Claude Code pays it. Two parts.
#
# The guardrails: a PreToolUse of Bash answered with the guardrails plugin (its shell guards on
# `tool.shell`), beside the same with the string-matching guard it replaced
# (crates/warden-bench/fixtures/guardrails-strings), in the same run, for an everyday command and
# a destructive one; in instructions (valgrind) when valgrind is there.
#
# The engine: the built-in
# rules and 100 threshold rules of an operator, a session of 1 000 events saved in the
# database, and a PreToolUse payload on stdin. Measured beside a minimal Python hook that only
# parses its payload (`python3 -c 'import json,sys; json.load(sys.stdin)'`, the interpreter
# binary itself), in the same run: the ratio is what to read, not the times, on a shared
# machine. Instruction counts (valgrind) are printed too when valgrind is there: they do not
# move with the machine's load.
#
#   benches/hook.sh [WARDEN_BINARY]        (default: target/release/warden, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
warden=${1:-target/release/warden}
if [ ! -x "$warden" ]; then
    cargo build --release -j 2 >&2
fi
warden=$(realpath "$warden")
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
python=$(python3 -c 'import os,sys; print(os.path.realpath(sys.executable))')

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The guardrails, beside the guard they replaced.
mkdir -p "$work/guard/strings"
cp -r crates/warden-bench/fixtures/guardrails-strings "$work/guard/strings/guardrails"
printf 'plugins = ["builtin:guardrails"]\ndatabase = "new.db"\n' > "$work/guard/new.toml"
printf 'plugins = ["strings"]\ndatabase = "old.db"\n' > "$work/guard/old.toml"
for c in everyday destructive; do
    case $c in
        everyday) cmd='cargo test --workspace 2>&1 | tail -20' ;;
        destructive) cmd="timeout 5 sh -c 'cd / && rm -rf *'" ;;
    esac
    printf '{"session_id":"guard","hook_event_name":"PreToolUse","cwd":"/home/ada/app","tool_name":"Bash","tool_input":{"command":"%s"}}\n' "$cmd" > "$work/guard/$c.json"
done
for v in old new; do
    "$warden" hook claude-code --config "$work/guard/$v.toml" < "$work/guard/everyday.json" > /dev/null
done
hyperfine -w 5 -r 60 --export-json "$work/guard.json" -L v old,new -L c everyday,destructive \
    -n '{v} {c}' "$warden hook claude-code --config $work/guard/{v}.toml < $work/guard/{c}.json" >&2
python3 - "$work/guard.json" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
for c in ("everyday", "destructive"):
    print(f"guardrails, PreToolUse, {c} command: {r['new '+c]*1000:.2f} ms, the string-matching guard {r['old '+c]*1000:.2f} ms: {r['new '+c]/r['old '+c]:.2f}x (median)")
PY
if command -v valgrind >/dev/null; then
    for c in everyday destructive; do
        counts=""
        for v in old new; do
            n=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$warden" hook claude-code \
                --config "$work/guard/$v.toml" < "$work/guard/$c.json" 2>&1 | sed -n 's/.*Collected : //p')
            counts="$counts $n"
        done
        set -- $counts
        echo "guardrails, PreToolUse, $c command: $2 instructions, the string-matching guard $1: $(python3 -c "print(f'{$2/$1:.3f}')")x"
    done
fi
# rule DIR NAME TRIGGER: a threshold rule that fires late in a session.
rule() {
    cat > "$1/$2.toml" <<RULE
[rule]
id = "$2"
trigger = "$3"

[condition]
expression = "context.turn.token_usage > 0.${2##*-} and context.history.tool_count > 4"

[action]
type = "notify_self"
message = "$2: {{ (context.turn.token_usage * 100) | int }}% after {{ context.history.tool_count }} tool calls"
RULE
}
mkdir -p "$work/rules"
for i in $(seq -w 0 99); do
    rule "$work/rules" "threshold-$i" on_turn_start
done
cat > "$work/warden.toml" <<'CONF'
builtin = true
rules = ["rules"]
database = "warden.db"
CONF
post='{"session_id":"bench","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_response":{"stdout":"x"}}'
echo "building a session of 1000 events..." >&2
for _ in $(seq 1 1000); do
    echo "$post" | "$warden" hook claude-code --config "$work/warden.toml" > /dev/null
done
echo '{"session_id":"bench","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cargo test"}}' > "$work/pre.json"
echo '{"session_id":"bench","hook_event_name":"UserPromptSubmit","prompt":"and now the tests"}' > "$work/prompt.json"

# PreToolUse (with PostToolUse, most of a session's hooks) ticks on_tool_call, whose rules are
# the only ones it compiles. UserPromptSubmit ticks on_query_start and on_turn_start (the 100
# rules are there) and compiles every rule once, to report broken rule files once per prompt.
hyperfine -w 5 -r 100 --export-json "$work/times.json" \
    -n warden "$warden hook claude-code --config $work/warden.toml < $work/pre.json" \
    -n prompt "$warden hook claude-code --config $work/warden.toml < $work/prompt.json" \
    -n python "$python -c 'import json,sys; json.load(sys.stdin)' < $work/pre.json" >&2
python3 - "$work/times.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
w, u, p = r["warden"], r["prompt"], r["python"]
print(f"warden hook (PreToolUse): median {w['median']*1000:.1f} ms, min {w['min']*1000:.1f} ms")
print(f"warden hook (UserPromptSubmit): median {u['median']*1000:.1f} ms, min {u['min']*1000:.1f} ms")
print(f"python -c json.load: median {p['median']*1000:.1f} ms, min {p['min']*1000:.1f} ms")
print(f"warden / python: {w['median']/p['median']:.2f} (median), {w['min']/p['min']:.2f} (min); UserPromptSubmit {u['median']/p['median']:.2f} (median)")
PY
# A session's mix. The same 100 rules spread over the hooks Claude Code's events tick (20 each
# on on_turn_start, on_tool_call, on_tool_complete, on_tool_failure, on_turn_end), so that every
# event compiles some; per prompt, one UserPromptSubmit, six tool calls (PreToolUse and
# PostToolUse each) and a Stop. The median is taken over every hook process of that mix (each
# event's runs counted as often as the event comes in it).
mix="$work/mix"
mkdir -p "$mix/rules"
hooks=(on_turn_start on_tool_call on_tool_complete on_tool_failure on_turn_end)
for i in $(seq -w 0 99); do
    rule "$mix/rules" "spread-$i" "${hooks[$((10#$i % 5))]}"
done
sed 's/"bench"/"mix"/' "$work/warden.toml" > "$mix/warden.toml"
echo '{"session_id":"mix","hook_event_name":"UserPromptSubmit","prompt":"go on"}' > "$mix/prompt.json"
echo '{"session_id":"mix","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}' > "$mix/pre.json"
echo '{"session_id":"mix","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_response":{"stdout":"x"}}' > "$mix/post.json"
echo '{"session_id":"mix","hook_event_name":"Stop","stop_hook_active":false}' > "$mix/stop.json"
echo "building a session of about 1000 events of that mix..." >&2
for _ in $(seq 1 70); do
    for p in prompt pre post pre post pre post pre post pre post pre post stop; do
        "$warden" hook claude-code --config "$mix/warden.toml" < "$mix/$p.json" > /dev/null
    done
done
hyperfine -w 5 -r 60 --export-json "$work/mix.json" -L event prompt,pre,post,stop \
    -n '{event}' "$warden hook claude-code --config $mix/warden.toml < $mix/{event}.json" >&2
python3 - "$work/mix.json" <<'PY'
import json, statistics, sys
r = {x["command"]: x["times"] for x in json.load(open(sys.argv[1]))["results"]}
weights = {"prompt": 1, "pre": 6, "post": 6, "stop": 1}
pooled = [t for event, w in weights.items() for t in r[event] * w]
each = ", ".join(f"{e} {statistics.median(r[e])*1000:.1f}" for e in weights)
print(f"a session's mix (1 prompt, 6 tool calls, 1 stop): median {statistics.median(pooled)*1000:.1f} ms over every hook process (medians: {each} ms)")
PY
if command -v valgrind >/dev/null; then
    count() { local input=$1; shift; valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 < "$input" | sed -n 's/.*Collected : //p'; }
    wi=$(count "$work/pre.json" "$warden" hook claude-code --config "$work/warden.toml")
    ui=$(count "$work/prompt.json" "$warden" hook claude-code --config "$work/warden.toml")
    pi=$(count "$work/pre.json" "$python" -c 'import json,sys; json.load(sys.stdin)')
    echo "instructions: warden $wi (UserPromptSubmit $ui), python $pi, ratio $(python3 -c "print(f'{$wi/$pi:.2f}')")"
fi
