#!/usr/bin/env bash
# Warden beside the seed design's Python engine (the specification's design, implemented in
# Python as the seeds describe it), whole process, on the same files, with hyperfine; prints
# the times and the ratios. Absolute times on a shared machine move from run to run: compare
# the ratios, which are measured in the same run.
#
#   benches/bench-compare.sh SEED_ENGINE_DIR      (or SEED_ENGINE=DIR benches/bench-compare.sh)
#
# SEED_ENGINE_DIR holds seed_engine.py, requirements.txt, rules/builtin and workloads/. The
# engine's Python packages are installed once into a virtual environment (SEED_VENV, by default
# $TMPDIR/warden-seed-venv). RUNS (default 10) sets hyperfine's runs per command. Needs cargo,
# python3 and hyperfine (`apt-get install -y hyperfine`).
#
# What is compared:
#   1. a long realistic session (3,000 turns, 23,872 events; the built-in rules of each engine),
#      with a program that only parses each line (the parse-only floor);
#   2. the seed's 100 synthetic threshold rules on its 1,000-event trace (the same rule files);
#   3. the seed's realistic 42-event research session (start-up dominates);
#   4. loading 1,000 synthetic rules cold, with an empty trace.
set -euo pipefail

seed=${1:-${SEED_ENGINE:-}}
if [ -z "$seed" ] || [ ! -f "$seed/seed_engine.py" ]; then
  echo "usage: $0 SEED_ENGINE_DIR   (the folder of seed_engine.py; or set SEED_ENGINE)" >&2
  exit 2
fi
seed=$(cd "$seed" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-10}
for tool in cargo python3 hyperfine; do
  if ! command -v "$tool" >/dev/null; then
    hint=""
    [ "$tool" = hyperfine ] && hint=" (apt-get install -y hyperfine)"
    echo "$tool not found$hint" >&2
    exit 2
  fi
done

tmp=${TMPDIR:-/tmp}
venv=${SEED_VENV:-$tmp/warden-seed-venv}
if ! "$venv/bin/python3" -c 'import simpleeval, lupa, jinja2' 2>/dev/null; then
  echo "installing the seed engine's requirements into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$seed/requirements.txt"
fi
py=$venv/bin/python3

echo "building (release)" >&2
(cd "$repo" && cargo build --release -q --bin warden &&
  cargo build --release -q -p warden-bench --example long_session --example parse_floor)
warden=$repo/target/release/warden
examples=$repo/target/release/examples

work=$(mktemp -d "$tmp/warden-bench-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$examples/long_session" 3000 >"$work/long.jsonl"
"$py" "$seed/workloads/gen.py" --rules 100 --events 1000 --seed 1 --out "$work/synthetic" >/dev/null
"$py" "$seed/workloads/gen.py" --rules 1000 --events 1 --seed 1 --out "$work/many" >/dev/null
: >"$work/empty.jsonl"

# Runs hyperfine on the commands given, named NAME=COMMAND; keeps each one's mean wall time and
# mean CPU time (user + system), in ms, in $work/NAME. On a busy machine the CPU time is the
# steadier of the two.
compare() {
  local title=$1
  shift
  local -a names=() commands=()
  for pair in "$@"; do
    names+=("${pair%%=*}")
    commands+=("${pair#*=}")
  done
  echo "$title" >&2
  hyperfine -N -w 2 -r "$runs" --export-json "$work/run.json" "${commands[@]}" >/dev/null
  python3 - "$work/run.json" "$work" "${names[@]}" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
for name, r in zip(sys.argv[3:], results):
    with open(f"{sys.argv[2]}/{name}", "w") as f:
        f.write(f"{r['mean'] * 1000} {(r['user'] + r['system']) * 1000}\n")
PY
}

# A line of the report: label, run, and optionally the run it is compared with and what it is.
row() {
  python3 - "$work" "$@" <<'PY'
import sys
work, label, name = sys.argv[1:4]
wall, cpu = map(float, open(f"{work}/{name}").read().split())
line = f"  {label:<34} {wall:9.1f} ms {cpu:9.1f} ms"
if len(sys.argv) > 5:
    rwall, rcpu = map(float, open(f"{work}/{sys.argv[4]}").read().split())
    line += f"   {wall / rwall:6.2f}x {cpu / rcpu:6.2f}x  {sys.argv[5]}"
print(line)
PY
}

# How many times faster Warden's run is than the seed engine's.
faster() {
  python3 - "$work" "$@" <<'PY'
import sys
work, ours, theirs = sys.argv[1:4]
o = list(map(float, open(f"{work}/{ours}").read().split()))
t = list(map(float, open(f"{work}/{theirs}").read().split()))
print(f"  Warden is {t[0] / o[0]:.1f}x faster than the seed engine ({t[1] / o[1]:.1f}x in CPU time)")
PY
}

compare "long session" \
  "floor=$examples/parse_floor $work/long.jsonl" \
  "warden=$warden replay --builtin $work/long.jsonl" \
  "seed=$py $seed/seed_engine.py replay --rules $seed/rules/builtin $work/long.jsonl"
compare "synthetic rules" \
  "warden_synth=$warden replay --rules $work/synthetic/rules $work/synthetic/trace.jsonl" \
  "seed_synth=$py $seed/seed_engine.py replay --rules $work/synthetic/rules $work/synthetic/trace.jsonl"
compare "research session" \
  "warden_research=$warden replay --builtin $seed/workloads/sessions/research_session.jsonl" \
  "seed_research=$py $seed/seed_engine.py replay --rules $seed/rules/builtin $seed/workloads/sessions/research_session.jsonl"
compare "cold load" \
  "warden_load=$warden replay --rules $work/many/rules $work/empty.jsonl" \
  "seed_load=$py $seed/seed_engine.py replay --rules $work/many/rules $work/empty.jsonl"

events=$(wc -l <"$work/long.jsonl")
echo
echo "Whole process, the same files, mean of $runs runs (hyperfine): wall time, CPU time (user +"
echo "system), and the ratios of each"
echo
echo "a long realistic session: 3,000 turns, $((events)) events, each engine's built-in rules"
row "parse each line only (the floor)" floor
row "warden replay" warden floor "the floor"
row "seed engine (Python)" seed floor "the floor"
faster warden seed
echo
echo "100 synthetic threshold rules, 1,000 events (the same rule files)"
row "warden replay" warden_synth
row "seed engine (Python)" seed_synth warden_synth "Warden's time"
faster warden_synth seed_synth
echo
echo "the seed's 42-event research session (start-up dominates)"
row "warden replay" warden_research
row "seed engine (Python)" seed_research warden_research "Warden's time"
echo
echo "1,000 synthetic rules loaded cold, an empty trace"
row "warden replay" warden_load
row "seed engine (Python)" seed_load warden_load "Warden's time"
