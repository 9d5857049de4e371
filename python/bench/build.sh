#!/usr/bin/env bash
# How long `pip install ./python` takes to build the engine, from nothing: the extension built
# cold (a fresh target folder each time, as on a fresh clone) in the `wheel` profile that
# python/pyproject.toml builds with, and in plain `release` (what it built with before) as the
# baseline, one after the other in the same run, with the jobs given (2 by default, this
# project's machine). Prints both times and their ratio, and the crates that took longest in the
# wheel build (cargo's --timings report is kept under the work folder).
#
#   bash python/bench/build.sh            # WORK=/tmp/warden-build-bench JOBS=2
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${WORK:-/tmp/warden-build-bench}
jobs=${JOBS:-2}
python=${PYTHON:-python3}
mkdir -p "$work"

build() { # profile -> seconds of a cold build
    local profile=$1 target="$work/target-$1"
    rm -rf "$target"
    local start end
    start=$(date +%s.%N)
    CARGO_TARGET_DIR="$target" PYO3_PYTHON="$python" \
        cargo build -q --profile "$profile" -j "$jobs" -p warden-python --timings >"$work/$profile.log" 2>&1
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}

before=$(build release)
after=$(build wheel)
printf 'cold build of the extension, %s jobs:\n' "$jobs"
printf '  release (before): %6.1f s\n' "$before"
printf '  wheel   (now):    %6.1f s   %sx the release build\n' "$after" \
    "$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a / b }')"
"$python" - "$work/target-wheel/cargo-timings" <<'EOF'
import glob, json, re, sys
report = sorted(glob.glob(sys.argv[1] + "/cargo-timing-*.html"))[-1]
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", open(report).read(), re.S).group(1))
print(f"  the wheel build's compile time, all jobs: {sum(u['duration'] for u in units):.0f} s; the longest:")
for u in sorted(units, key=lambda u: -u["duration"])[:8]:
    print(f"    {u['duration']:6.1f} s  {u['name']} {u.get('target', '').strip()}")
print(f"  (report: {report})")
EOF
