#!/usr/bin/env bash
# A backtest's throughput beside `warden replay` of the same events in Warden's own format, in
# the same run, and its peak memory on a large history (streamed: it should not grow with the
# history's size).
#
# The history is the real Claude Code transcript of tests/data/claude-code copied COPIES times
# into one file (the same session again and again, so the rules meet the same calls). The same
# events in Warden's format come from `warden replay --from claude-code --print-trace`.
#
#   benches/backtest.sh [WARDEN_BINARY] [COPIES]   (target/release/warden, 500 copies: ~100 MB)
set -euo pipefail
cd "$(dirname "$0")/.."
warden=${1:-target/release/warden}
copies=${2:-500}
if [ ! -x "$warden" ]; then
    cargo build --release -j 2 >&2
fi
warden=$(realpath "$warden")
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
recorded=tests/data/claude-code/session.jsonl
home=$(grep -o '/tmp/\.tmp[A-Za-z0-9]*/home' "$recorded" | head -1)
(cd "$work" && "$warden" init claude-code --dir . > /dev/null)
for _ in $(seq 1 "$copies"); do cat "$recorded"; done > "$work/history.jsonl"
cd "$work"
export HOME=$home
"$warden" replay --from claude-code history.jsonl --config .warden/warden.toml --print-trace > trace.jsonl
events=$(wc -l < trace.jsonl)
mb=$(du -m history.jsonl | cut -f1)
echo "history: $copies copies of the recorded session, $mb MB, $events Warden events" >&2
hyperfine -w 1 -r 5 --export-json times.json \
    -n backtest "$warden replay --from claude-code history.jsonl --config .warden/warden.toml --summary" \
    -n replay "$warden replay trace.jsonl --config .warden/warden.toml" >&2
python3 - times.json "$events" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
n = int(sys.argv[2])
b, p = n / r["backtest"], n / r["replay"]
print(f"backtest: {b:,.0f} events/s; warden replay of the same events: {p:,.0f} events/s; {b / p:.2f} of it (median of 5)")
PY
peak=$(/usr/bin/time -f '%M' "$warden" replay --from claude-code history.jsonl --config .warden/warden.toml --summary 2>&1 >/dev/null | tail -1)
echo "backtest peak memory: $((peak / 1024)) MB for $mb MB of transcripts"
