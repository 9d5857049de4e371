#!/usr/bin/env bash
# Instruction counts of Warden's main paths, checked against a committed baseline: the
# benchmarks that can fail. Instructions (valgrind's callgrind) do not move with the machine's
# load, so this is a check, not a timed test. CI runs it (`.ci/run`).
#
# Beside the instructions, the code a tick runs: the 64-byte lines of code one repetition of
# some scenarios runs (`benches/code_lines.py`, from callgrind's counts by instruction). A
# tick whose code passes what the first-level instruction cache holds (32 KiB here) runs its
# instructions at a fraction of their speed, which no instruction count shows; the waiting
# script's resume is there (the book's performance chapter).
#
# Each in-process scenario (`warden bench --repeat SCENARIO --ticks N`) runs at two counts;
# the difference divided by the difference of the counts is what one repetition costs, with
# loading the rules and setting the scenario up left out. The Claude Code hook is counted as a
# whole process, as Claude Code pays it.
#
#   benches/instructions.sh [--update] [WARDEN_BINARY]   (default: target/release/warden)
#
# Fails when a count (of instructions or of lines) is more than 10% above
# benches/instructions.baseline. A change that
# makes a path dearer on purpose updates the baseline in the same commit (`--update` writes it)
# and says why in that commit's message, on a line that starts with `Baseline:`; the check
# looks for that line in the commit that last changed the baseline.
set -euo pipefail
# A command that fails inside `$(...)` (a valgrind run, in `per`) stops the script too.
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
baseline=benches/instructions.baseline
tolerance=10 # percent

update=false
if [ "${1:-}" = "--update" ]; then
    update=true
    shift
fi
warden=${1:-target/release/warden}
if [ ! -x "$warden" ]; then
    cargo build --release -j 2 >&2
fi
warden=$(realpath "$warden")
command -v valgrind >/dev/null || {
    echo "valgrind is needed: apt-get install -y valgrind" >&2
    exit 1
}
command -v python3 >/dev/null || {
    echo "python3 is needed (benches/code_lines.py): apt-get install -y python3" >&2
    exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# count COMMAND...: the instructions one run of COMMAND executes. With KEEP set, callgrind's
# counts by instruction are kept in that file (for code_lines.py).
count() {
    local out=/dev/null dump=no
    if [ -n "${KEEP:-}" ]; then
        out=$KEEP dump=yes
    fi
    valgrind --tool=callgrind --dump-instr="$dump" --callgrind-out-file="$out" "$@" \
        2>"$work/valgrind.log" >/dev/null ||
        { cat "$work/valgrind.log" >&2; echo "instructions.sh: $* failed" >&2; exit 1; }
    sed -n 's/.*Collected : //p' "$work/valgrind.log"
}

# The scenarios whose code is measured too: the 64-byte lines of code one repetition runs
# (benches/code_lines.py), what decides whether a tick fits the first-level instruction cache.
lines_of=(expression lua-resume runtime-resume hundred-rules)

# per SCENARIO LOW HIGH: the instructions of one repetition of SCENARIO. For a scenario of
# lines_of, the two runs' counts by instruction are kept in $work/SCENARIO.{low,high}, and the
# number of repetitions between them in $work/SCENARIO.repetitions.
per() {
    local low high keep=""
    if [[ " ${lines_of[*]} " == *" $1 "* ]]; then
        keep=$work/$1
        echo $(($3 - $2)) > "$keep.repetitions"
    fi
    low=$(KEEP=${keep:+$keep.low} count "$warden" bench --repeat "$1" --ticks "$2")
    high=$(KEEP=${keep:+$keep.high} count "$warden" bench --repeat "$1" --ticks "$3")
    echo $(((high - low) / ($3 - $2)))
}

# The Claude Code hook, whole process: a PreToolUse of Bash answered with the built-in rules
# and the guardrails, on a session the hook has seen before (its database made).
source benches/hook-fixture.sh
hook_fixture "$work/hook" instructions
"$warden" hook claude-code --config "$work/hook/warden.toml" < "$work/hook/pre.json" > /dev/null
hook() {
    count "$warden" hook claude-code --config "$work/hook/warden.toml" < "$work/hook/pre.json"
}

declare -A now
order=(floor hundred-rules expression-three-fields lua-three-fields expression lua-resume
    runtime-resume guardrails-tool-call durable-save replay-floor replay claude-code-hook)
for scenario in "${order[@]}"; do
    case $scenario in
        durable-save) now[$scenario]=$(per "$scenario" 20 120) ;;
        replay-floor | replay) now[$scenario]=$(per "$scenario" 1 2) ;;
        claude-code-hook) now[$scenario]=$(hook) ;;
        lua-*) now[$scenario]=$(per "$scenario" 200 1000) ;;
        *) now[$scenario]=$(per "$scenario" 1000 5000) ;;
    esac
done
for scenario in "${lines_of[@]}"; do
    now[$scenario.lines]=$(python3 benches/code_lines.py "$work/$scenario.low" \
        "$work/$scenario.high" "$(cat "$work/$scenario.repetitions")")
done
# What the baseline holds and the check compares: the instructions, then the code lines.
checked=("${order[@]}")
for scenario in "${lines_of[@]}"; do
    checked+=("$scenario.lines")
done
toolchain=$(rustc --version 2>/dev/null || echo "rustc unknown")

# What the figures say beside each other (ratios in instructions; the goals of the performance
# chapter are in time, and these follow them closely on one machine).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "instructions per repetition ($toolchain, valgrind $(valgrind --version | sed 's/valgrind-//')):"
for scenario in "${order[@]}"; do
    printf '  %-26s %12s\n' "$scenario" "${now[$scenario]}"
done
echo "  100-rule tick / floor:                  $(ratio "${now[hundred-rules]}" "${now[floor]}")x"
echo "  Lua condition beyond the expression:    $((now[lua-three-fields] - now[expression-three-fields])) instructions"
echo "  resume beyond the expression:           $((now[lua-resume] - now[expression])) instructions"
echo "  replay / its parse floor:               $(ratio "${now[replay]}" "${now[replay-floor]}")x"
echo "  code lines run by a tick (64 bytes each; a 32 KiB instruction cache holds 512):"
for scenario in "${lines_of[@]}"; do
    printf '    %-24s %6s  (%s KiB)\n' "$scenario" "${now[$scenario.lines]}" "$(((now[$scenario.lines] * 64 + 512) / 1024))"
done

if $update; then
    {
        echo "# Instructions per repetition of each scenario of benches/instructions.sh (the hook: per"
        echo "# process), and (SCENARIO.lines) the 64-byte lines of code a repetition runs. Written by"
        echo "# \`benches/instructions.sh --update\`; a commit that changes it says why on a line of its"
        echo "# message that starts with \"Baseline:\"."
        echo "toolchain $toolchain"
        for scenario in "${checked[@]}"; do
            echo "$scenario ${now[$scenario]}"
        done
    } > "$baseline"
    echo "wrote $baseline"
    exit 0
fi

[ -f "$baseline" ] || { echo "no $baseline: run benches/instructions.sh --update" >&2; exit 1; }
recorded_toolchain=$(sed -n 's/^toolchain //p' "$baseline")
if [ "$recorded_toolchain" != "$toolchain" ]; then
    echo "the baseline was counted with $recorded_toolchain, this is $toolchain: instruction counts" >&2
    echo "differ between compilers. Count again with benches/instructions.sh --update and commit it." >&2
    exit 1
fi
failed=0
echo "against $baseline (more than ${tolerance}% above it fails):"
for scenario in "${checked[@]}"; do
    was=$(awk -v s="$scenario" '$1 == s { print $2 }' "$baseline")
    if [ -z "$was" ]; then
        echo "  $scenario: not in the baseline; add it with --update" >&2
        failed=1
        continue
    fi
    change=$(awk -v a="${now[$scenario]}" -v b="$was" 'BEGIN { printf "%+.1f", (a - b) * 100 / b }')
    verdict=ok
    if awk -v c="$change" -v t="$tolerance" 'BEGIN { exit !(c > t) }'; then
        verdict="FAILED: more than ${tolerance}% above the baseline"
        failed=1
    elif awk -v c="$change" -v t="$tolerance" 'BEGIN { exit !(c < -t) }'; then
        verdict="cheaper: lower the baseline (--update) so the next regression shows"
    fi
    printf '  %-26s %12s  was %12s  %6s%%  %s\n' "$scenario" "${now[$scenario]}" "$was" "$change" "$verdict"
done
if git rev-parse --git-dir >/dev/null 2>&1; then
    last=$(git log -1 --format=%H -- "$baseline" 2>/dev/null || true)
    if [ -n "$last" ] && ! git log -1 --format=%B "$last" | grep -q '^Baseline:'; then
        echo "commit $last changed $baseline without a line \"Baseline: why\" in its message" >&2
        failed=1
    fi
fi
if [ "$failed" != 0 ]; then
    echo "instruction counts: FAILED (see above; a deliberate change updates the baseline with a reason)" >&2
    exit 1
fi
echo "instruction counts: within ${tolerance}% of the baseline"
