#!/usr/bin/env bash
# What Claude Code's http hook costs the server beside the same tool call through the events
# API: starts `warden serve` (release build) with the built-in rules, the guardrails and a
# database file, sends REQUESTS `PreToolUse` payloads of a Bash call to `POST /v1/claude-code`
# and REQUESTS `on_tool_call` events of the same call to `POST /v1/sessions/{id}/events`, one
# session each, on one keep-alive connection, and reports the server's CPU time per request
# (user + system, from /proc: what the client costs is not counted) and the ratio of the two.
#
#   benches/claude-http.sh [REQUESTS]
#
# WARDEN_BIN names another `warden` binary to serve with (to set two builds side by side).
set -euo pipefail
cd "$(dirname "$0")/.."

requests=${1:-2000}
jobs=${CARGO_BUILD_JOBS:-2}
warden=${WARDEN_BIN:-./target/release/warden}
[ -n "${WARDEN_BIN:-}" ] || cargo build -q --release -j "$jobs" --bin warden -p warden

work=$(mktemp -d)
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -TERM "$server"; wait "$server" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$warden" --builtin --plugins builtin:guardrails --db "$work/warden.db" \
    serve --listen 127.0.0.1:0 --no-watch > "$work/serve.out" 2> "$work/serve.err" &
server=$!
for _ in $(seq 100); do
    grep -q "listening on" "$work/serve.out" 2>/dev/null && break
    sleep 0.1
done
addr=$(grep -o '127.0.0.1:[0-9]*' "$work/serve.out" | head -1)
[ -n "$addr" ] || { cat "$work/serve.err"; echo "the server did not start"; exit 1; }

python3 - "$addr" "$server" "$requests" "$work" <<'PY'
import http.client, json, os, sys

addr, pid, n, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
host, port = addr.split(":")
tick = os.sysconf("SC_CLK_TCK")

def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

def run(path, body_of):
    conn = http.client.HTTPConnection(host, int(port))
    # A few requests first: the session exists, the rules have run once.
    for i in range(20):
        conn.request("POST", path, body_of(i), {"content-type": "application/json"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, (path, r.status)
    start = cpu()
    for i in range(n):
        conn.request("POST", path, body_of(i), {"content-type": "application/json"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, (path, r.status)
    return (cpu() - start) / n * 1000

command = "cargo test --workspace"
hook = run("/v1/claude-code", lambda i: json.dumps({
    "session_id": "bench-hook", "hook_event_name": "PreToolUse", "cwd": work,
    "permission_mode": "default", "tool_name": "Bash",
    "tool_input": {"command": command}, "tool_use_id": f"toolu_{i}"}))
events = run("/v1/sessions/bench-events/events", lambda i: json.dumps({
    "hook": "on_tool_call", "project": {"root": work},
    "tool": {"name": "Bash", "arguments": {"command": command}}}))
print(f"server CPU per request, {n} requests each (guardrails, a saved session):")
print(f"  POST /v1/sessions/{{id}}/events (on_tool_call):  {events:.3f} ms")
print(f"  POST /v1/claude-code (PreToolUse):              {hook:.3f} ms   {hook / events:.2f}x the events API")
PY
