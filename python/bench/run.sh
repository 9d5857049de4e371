#!/usr/bin/env bash
# The Python package's benchmarks, each a ratio against a baseline measured in the same run:
#
#  1. a tick called from Python against the same tick called from Rust (python/bench/tick.py);
#  2. the ticks of a LangChain agent supervised by the middleware against the same ticks
#     outside it (python/bench/agent.py; needs LangChain, installed with the package's
#     [langchain] extra);
#  3. a Python replay of the long-session workload (23,872 events) against the seed design's
#     Python engine on the same file, whole process, interpreter start-up included for both,
#     with `warden replay` (Rust, no Python) beside them (hyperfine).
#
# Needs hyperfine (apt-get install -y hyperfine) and the shared bench folder beside the
# repository (../shared/bench, or BENCH=...). Builds the package as pip does (the `wheel` profile) into a virtual
# environment under /tmp (slow the first time: an optimized build of the engine).
#
#   bash python/bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
# shared/ sits beside the clone (or beside the folder of worktrees).
bench=${BENCH:-}
for b in "$repo/../shared/bench" "$repo/../../shared/bench"; do
    [ -n "$bench" ] || { [ -d "$b" ] && bench=$(cd "$b" && pwd); }
done
[ -n "$bench" ] || { echo "the shared bench folder was not found: set BENCH=.../shared/bench"; exit 1; }
work=${WORK:-/tmp/warden-python-bench}
mkdir -p "$work"

if [ ! -x "$work/venv/bin/python" ]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install -q maturin
fi
# agent.py's LangChain, the versions CI tests the middleware with.
"$work/venv/bin/python" -c "import langchain.agents" 2>/dev/null ||
    "$work/venv/bin/pip" install -q -c python/ci-constraints.txt langchain langchain-core \
        langgraph langgraph-prebuilt langgraph-checkpoint
if [ ! -x "$work/seed/bin/python" ]; then
    python3 -m venv "$work/seed"
    "$work/seed/bin/pip" install -q -r "$bench/seed_python/requirements.txt"
fi

rm -rf "$work/dist"
(cd python && "$work/venv/bin/maturin" build -q -o "$work/dist")
cargo build -q --release --bin warden
"$work/venv/bin/pip" install -q --force-reinstall "$work"/dist/warden_supervisor-*.whl

echo "== a tick from Python and from Rust"
"$work/venv/bin/python" python/bench/tick.py

echo
echo "== the ticks of a LangChain agent, and the same ticks outside it"
"$work/venv/bin/python" python/bench/agent.py

echo
echo "== the long session (3000 turns), replayed whole: Warden from Python, the seed engine"
python3 "$bench/long_session.py" 3000 > "$work/long3000.jsonl"
wc -l < "$work/long3000.jsonl" | xargs echo "events:"
hyperfine -N -w 2 -r 10 --export-markdown "$work/replay.md" --export-json "$work/replay.json" \
    "$work/venv/bin/python $repo/examples/python/replay.py --builtin $work/long3000.jsonl" \
    "$repo/target/release/warden replay --builtin $work/long3000.jsonl" \
    "$work/seed/bin/python $bench/seed_python/seed_engine.py replay --rules $bench/seed_python/rules/builtin $work/long3000.jsonl"
python3 - "$work/replay.json" <<'PY'
import json, sys
py, rust, seed = (r["mean"] for r in json.load(open(sys.argv[1]))["results"])
print(f"Python replay {py * 1000:.1f} ms, the seed design {seed * 1000:.1f} ms: "
      f"{seed / py:.2f} times faster (goal: 5); warden replay {rust * 1000:.1f} ms ({py / rust:.2f}x of it)")
PY
