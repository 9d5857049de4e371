#!/usr/bin/env bash
# Load benchmark of `warden serve`: starts the server (release build) with the built-in rules
# plus 100 synthetic rules and a database file, drives it from a second process on loopback
# (crates/warden-serve/examples/load.rs: 1,000 sessions x 50 events, after a baseline of as
# many GET /v1/health requests), and reports events/s, p50/p99 latency, errors and the
# server's memory. Bounded: a fixed number of requests, and at most MAX_SECONDS.
#
#   benches/serve-load.sh [SESSIONS] [CONNECTIONS] [MAX_SECONDS]
#
# WARDEN_BIN names another `warden` binary to serve with (to set two builds side by side).
#
# The load generator runs on the same machine and shares its cores with the server.
set -euo pipefail
cd "$(dirname "$0")/.."

sessions=${1:-1000}
connections=${2:-16}
max_seconds=${3:-120}
jobs=${CARGO_BUILD_JOBS:-2}

warden=${WARDEN_BIN:-./target/release/warden}
[ -n "${WARDEN_BIN:-}" ] || cargo build -q --release -j "$jobs" --bin warden -p warden
cargo build -q --release -j "$jobs" -p warden-serve --example load

work=$(mktemp -d)
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -TERM "$server"; wait "$server" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# 100 synthetic rules, 20 on each hook the driver reports, with thresholds spread so that a
# few fire now and then as a session goes on (the driver's summary says how many fired per
# event): the threshold index, the conditions and the notifications all do real work.
mkdir -p "$work/rules"
hooks=(on_turn_start on_tool_call on_tool_complete on_tool_failure on_turn_end)
for i in $(seq 0 99); do
    hook=${hooks[$((i % 5))]}
    k=$((i / 5))
    tool=""
    case $hook in
        on_turn_start) cond="context.turn.token_usage > 0.$((80 + k))" ;;
        on_tool_call)
            if [ $((k % 2)) = 0 ]; then tool="tool = \"tool-$k\""; cond="true"
            else cond="context.history.counts.tool_calls > $((30 + k))"; fi ;;
        on_tool_complete) cond="result.count > $((8 + k))" ;;
        on_tool_failure) cond="context.history.failures[tool.name] >= $((3 + k))" ;;
        on_turn_end) cond="context.turn.number > $((6 + k))" ;;
    esac
    cat > "$work/rules/synthetic-$i.toml" <<TOML
[rule]
id = "synthetic-$i"
name = "Synthetic $i"
trigger = "$hook"
$tool
priority = $((i + 1))

[condition]
expression = "$cond"

[action]
type = "notify_self"
message = "synthetic $i at turn {{ context.turn.number }}"
deliver_at = "immediate"
TOML
done

# SERVE_TLS=1 serves over TLS (a self-signed certificate made here with openssl; the driver
# trusts it), to measure what TLS costs.
scheme=http
if [ -n "${SERVE_TLS:-}" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
        -subj /CN=load -addext subjectAltName=IP:127.0.0.1 \
        -addext basicConstraints=critical,CA:FALSE \
        -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
    SERVE_ARGS="${SERVE_ARGS:-} --tls-cert $work/cert.pem --tls-key $work/key.pem"
    export WARDEN_LOAD_CA="$work/cert.pem"
    scheme=https
fi

# SERVE_ARGS adds flags to `warden serve` (for example --ephemeral-sessions).
# shellcheck disable=SC2086
"$warden" --builtin --rules "$work/rules" --db "$work/warden.db" \
    serve --listen 127.0.0.1:0 --no-watch --max-sessions 2000 ${SERVE_ARGS:-} \
    > "$work/serve.out" 2> "$work/serve.err" &
server=$!
for _ in $(seq 100); do
    grep -q "listening on" "$work/serve.out" 2>/dev/null && break
    sleep 0.1
done
addr=$(grep -o '127.0.0.1:[0-9]*' "$work/serve.out" | head -1)
[ -n "$addr" ] || { cat "$work/serve.err"; echo "the server did not start"; exit 1; }
rss_before=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")

result=$(./target/release/examples/load "$addr" "$sessions" "$connections" "$max_seconds")

rss_peak=$(awk '/VmHWM/ {print $2}' "/proc/$server/status")
rss_after=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
metrics=$(python3 -c "import ssl, urllib.request; c = ssl.create_default_context(cafile='$work/cert.pem') if '$scheme' == 'https' else None; print(urllib.request.urlopen('$scheme://$addr/v1/metrics', context=c).read().decode())")
firings=$(printf '%s\n' "$metrics" | awk '/^warden_rule_firings_total/ {n += $2} END {print n + 0}')
tick_sum=$(printf '%s\n' "$metrics" | awk '/^warden_tick_duration_seconds_sum/ {print $2}')
tick_count=$(printf '%s\n' "$metrics" | awk '/^warden_tick_duration_seconds_count/ {print $2}')
kill -TERM "$server"
wait "$server" || true
server=""

python3 - "$result" "$rss_before" "$rss_after" "$rss_peak" "$(nproc)" "$firings" "$tick_sum" "$tick_count" "${SERVE_ARGS:-}" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
before, after, peak, cores = (int(x) for x in sys.argv[2:6])
firings, tick_sum, tick_count = int(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8])
flags = sys.argv[9] or "durable sessions in a database file"
e, h = r["events"], r["baseline_health"]
print(f"warden serve ({flags}), {r['sessions']} sessions x {r['events_per_session']} events, {r['connections']} connections, {cores} cores shared with the load generator")
print(f"  baseline GET /v1/health: {h['per_second']:>9.0f} req/s   p50 {h['p50_ms']:.3f} ms   p99 {h['p99_ms']:.3f} ms   errors {h['errors']}")
print(f"  events (POST, a tick):   {e['per_second']:>9.0f} ev/s    p50 {e['p50_ms']:.3f} ms   p99 {e['p99_ms']:.3f} ms   max {e['max_ms']:.1f} ms   errors {e['errors']}")
print(f"  events/s as a share of the health baseline: {r['events_per_second_vs_health']:.2f}")
print(f"  rules fired: {firings} ({firings / max(tick_count, 1):.2f} per event); time per tick, its save included: {tick_sum / max(tick_count, 1) * 1e6:.0f} us")
print(f"  server RSS: {before/1024:.1f} MiB idle, {after/1024:.1f} MiB after, {peak/1024:.1f} MiB peak")
print(json.dumps(r))
PY
