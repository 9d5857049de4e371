#!/usr/bin/env bash
# Builds the `warden` binary laid out from a profile of its main paths: the release build,
# rewritten by LLVM's post-link optimizer (BOLT) so that the code a tick runs sits together.
#
# Why: a tick that resumes a waiting script runs more code than the first-level instruction
# cache holds (32 KiB: 512 lines of 64 bytes) in a build laid out by the compiler alone, whose
# hot code is interleaved with the cold code beside it. Laid out from a profile, the same tick
# runs about a quarter fewer lines, and the resume beyond an expression tick takes about 30%
# less time. The instructions are the same. (The book's performance chapter, "The eleventh
# round: a build laid out from a profile", has the figures.)
#
#   release/build.sh [--update] [--relocated BINARY]
#
# writes optimized/warden in cargo's target directory (and prints its path). Without
# `--relocated`, it links the release binary itself: seconds after `cargo build --release`.
# `--relocated BINARY` lays out BINARY instead, a `warden` already linked with its relocations
# (`RUSTFLAGS='-C link-arg=-Wl,--emit-relocs'`): CI's, whose release build is its tests'. Their
# dev-dependencies turn on features of some crates that the binary alone does not use, so a
# `cargo build` of the binary after `cargo test --release` compiles most of the workspace again.
#
# How: the release binary is linked with its relocations kept (`--emit-relocs`: BOLT moves
# code only in a binary that has them), instrumented by BOLT, run on the training workload
# below, then rewritten from the counts that run collected. The workload is `warden bench`
# and a Claude Code hook: the paths the benchmarks name, the hand-written floors included so
# that they are laid out the same way as what they are the floor of (a floor left cold would
# flatter every ratio). A path the workload does not run keeps the compiler's layout, and code
# that never ran in it moves out of the way to the end of the binary.
#
# Needs BOLT of LLVM 22: Debian's `bolt-22` (`apt-get install -y bolt-22`), or `LLVM_BOLT` and
# `MERGE_FDATA` naming an `llvm-bolt` and its `merge-fdata`; and valgrind and python3 for the
# check below (without them the binary is written unchecked). `cargo build --release` alone
# gives the compiler's layout: the same behaviour, the figures of the plain build.
set -euo pipefail
shopt -s inherit_errexit
update=false
relocated=""
while [ $# -gt 0 ]; do
    case $1 in
        --update) update=true ;;
        --relocated)
            if [ -z "${2:-}" ] || [[ $2 == -* ]]; then
                echo "release/build.sh: --relocated names a binary" >&2
                exit 2
            fi
            if [ ! -f "$2" ]; then
                echo "release/build.sh: no binary $2" >&2
                exit 2
            fi
            relocated=$(realpath "$2")
            shift
            ;;
        *)
            echo "release/build.sh: unknown argument $1 (--update, --relocated BINARY)" >&2
            exit 2
            ;;
    esac
    shift
done
cd "$(dirname "$0")/.."
baseline=release/lines.baseline

# BOLT's options differ between versions: LLVM 22's, unless LLVM_BOLT and MERGE_FDATA name
# others.
bolt=${LLVM_BOLT:-$(command -v llvm-bolt-22 || true)}
merge=${MERGE_FDATA:-$(command -v merge-fdata-22 || true)}
if [ -z "$bolt" ] || [ -z "$merge" ]; then
    echo "release/build.sh needs LLVM's BOLT (llvm-bolt and merge-fdata, of LLVM 22):" >&2
    echo "  apt-get install -y bolt-22, or set LLVM_BOLT and MERGE_FDATA" >&2
    exit 1
fi
bolt_version=$({ "$bolt" --version 2> /dev/null || true; } | sed -n 's/.*LLVM version \([0-9.]*\).*/\1/p' | head -1)
if [ -z "$bolt_version" ]; then
    echo "release/build.sh: $bolt --version names no LLVM version: is it llvm-bolt?" >&2
    exit 1
fi
checked=true
if ! command -v valgrind > /dev/null || ! command -v python3 > /dev/null; then
    if $update; then
        echo "release/build.sh --update needs valgrind and python3 to count the lines" >&2
        exit 1
    fi
    checked=false
fi
jobs=${CARGO_BUILD_JOBS:-2}
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target" ] || { echo "release/build.sh: cargo named no target directory" >&2; exit 1; }
out=$target/optimized
work=$(mktemp -d)
trap 'rm -rf "$work" "$out/warden.new"' EXIT

if [ -n "$relocated" ]; then
    command -v readelf > /dev/null || { echo "release/build.sh: readelf (binutils) is needed" >&2; exit 1; }
    if ! readelf -S "$relocated" | grep '\.rela\.text' > /dev/null; then
        echo "release/build.sh: $relocated was linked without its relocations: build it with" >&2
        echo "  RUSTFLAGS='-C link-arg=-Wl,--emit-relocs' (or leave out --relocated)" >&2
        exit 1
    fi
    cp "$relocated" "$work/warden"
else
    echo "== the release binary, with its relocations" >&2
    relocs=$(cargo rustc --release -j "$jobs" -p warden --bin warden \
        --message-format=json-render-diagnostics \
        -- -C link-arg=-Wl,--emit-relocs | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
    [ -n "$relocs" ] || { echo "release/build.sh: cargo named no binary" >&2; exit 1; }
    cp "$relocs" "$work/warden"
    # That link took the place of the plain one (`target/release/warden`); cargo puts the plain
    # one back when the file is gone.
    rm -f "$relocs"
    cargo build --release -j "$jobs" -p warden --bin warden
fi
mkdir -p "$out"

echo "== instrumented by BOLT of LLVM ${bolt_version:-(version unknown)}" >&2
# Each process writes its counts to a file of its own (`profile.PID.fdata`).
"$bolt" "$work/warden" -o "$work/instrumented" -instrument \
    -instrumentation-file="$work/profile" -instrumentation-file-append-pid \
    > "$work/instrument.log" 2>&1 || { cat "$work/instrument.log" >&2; exit 1; }

echo "== the training workload" >&2
train() {
    "$work/instrumented" "$@" > /dev/null
}
# `warden bench`, every measure of it: ticks of one rule and of a hundred, Lua conditions, a
# waiting script's resume, behaviors, modes, a long session replayed, shell commands judged,
# plugin state, durable saves, cold loads, and each one's floor. (Fewer rounds and ticks than
# its defaults: the counts it leaves are in the same proportions.)
train bench --rounds 3 --ticks 5000
# A Claude Code hook, as a process: a PreToolUse of Bash with the built-in rules and the
# guardrails, on a session the hook has seen before.
source benches/hook-fixture.sh
hook_fixture "$work/hook" training
for _ in 1 2 3 4 5; do
    train hook claude-code --config "$work/hook/warden.toml" < "$work/hook/pre.json"
done

echo "== laid out from the profile" >&2
"$merge" "$work"/profile.* > "$work/profile.fdata" 2> "$work/merge.log" ||
    { cat "$work/merge.log" >&2; exit 1; }
# Blocks ordered by the profile (ext-tsp), functions by it (cdsort), and each function's code
# that never ran split off to a cold part at the end (split-all-cold). The line tables, when
# the build has them, are kept (update-debug-sections): a backtrace still names its lines.
"$bolt" "$work/warden" -o "$out/warden.new" -data="$work/profile.fdata" \
    -reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold \
    -use-gnu-stack -update-debug-sections \
    > "$work/optimize.log" 2>&1 || { cat "$work/optimize.log" >&2; exit 1; }
# How much of the binary the profile reached, and how much of that BOLT could not rewrite (a
# function whose indirect jumps it cannot follow keeps the compiler's layout; `-v=1` names them).
grep -E 'functions in the binary .* have non-empty execution profile|functions with profile could not be optimized' \
    "$work/optimize.log" >&2 || true
"$out/warden.new" --version > /dev/null

# The checks that the layout took, before the binary takes the last one's place: a waiting
# script's resume tick (`lua-resume`) runs at least a tenth fewer 64-byte lines of code laid
# out from the profile than as the compiler laid it out (a profile that reached nothing would
# leave them about the same), and at most a tenth more than release/lines.baseline (a hot
# function BOLT could no longer rewrite, say). The lines come from callgrind's counts by
# instruction (benches/code_lines.py), which the machine's load does not move. `--update`
# writes the baseline; a commit that changes it says why on a line of its message that starts
# with "Baseline:", as for benches/instructions.sh. The layout depends on the compiler and on
# BOLT: the baseline names both, and another of either asks for a new one.
toolchain=$(rustc --version 2> /dev/null || echo "rustc unknown")
if $checked; then
    lines() {
        local n
        for n in 200 1000; do
            valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/$2.$n" \
                "$1" bench --repeat lua-resume --ticks "$n" > /dev/null 2> "$work/valgrind.log" ||
                { cat "$work/valgrind.log" >&2; exit 1; }
        done
        python3 benches/code_lines.py "$work/$2.200" "$work/$2.1000" 800
    }
    plain=$(lines "$work/warden" plain)
    optimized=$(lines "$out/warden.new" optimized)
    if ! [[ $plain =~ ^[0-9]+$ && $optimized =~ ^[0-9]+$ ]] || ((plain == 0 || optimized == 0)); then
        echo "release/build.sh: FAILED: no count of lines ($plain, $optimized): see benches/code_lines.py" >&2
        exit 1
    fi
    echo "a waiting script's resume tick runs $optimized lines of code laid out from the profile," \
        "$plain as the compiler laid it out" >&2
    if ((optimized * 10 > plain * 9)); then
        echo "release/build.sh: FAILED: not a tenth fewer lines; the profile did not take" >&2
        exit 1
    fi
    if $update; then
        {
            echo "# The 64-byte lines of code a lua-resume tick runs in the optimized build, written by"
            echo "# \`release/build.sh --update\`; a commit that changes it says why on a line that starts"
            echo "# with \"Baseline:\"."
            echo "toolchain $toolchain"
            echo "bolt $bolt_version"
            echo "lua-resume.lines $optimized"
        } > "$baseline"
        echo "wrote $baseline" >&2
    else
        recorded() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "$baseline"; }
        [ -f "$baseline" ] || { echo "no $baseline: run release/build.sh --update" >&2; exit 1; }
        if [ "$(recorded toolchain)" != "$toolchain" ] || [ "$(recorded bolt)" != "$bolt_version" ]; then
            echo "release/build.sh: $baseline was counted with $(recorded toolchain) and BOLT" \
                "$(recorded bolt); this is $toolchain and BOLT $bolt_version. Count again with" \
                "release/build.sh --update and commit it." >&2
            exit 1
        fi
        was=$(recorded lua-resume.lines)
        if ! [[ $was =~ ^[0-9]+$ ]]; then
            echo "release/build.sh: no lua-resume.lines in $baseline: run release/build.sh --update" >&2
            exit 1
        fi
        if ((optimized * 10 > was * 11)); then
            echo "release/build.sh: FAILED: more than 10% above the $was lines of $baseline" >&2
            exit 1
        elif ((optimized * 10 < was * 9)); then
            echo "(more than 10% under the $was lines of $baseline: lower it with --update)" >&2
        fi
        last=$(git log -1 --format=%H -- "$baseline" 2> /dev/null || true)
        if [ -n "$last" ] && ! git log -1 --format=%B "$last" | grep '^Baseline:' > /dev/null; then
            echo "release/build.sh: commit $last changed $baseline without a line \"Baseline: why\"" >&2
            exit 1
        fi
    fi
else
    echo "(valgrind or python3 missing: the layout's code lines are not checked)" >&2
fi
mv "$out/warden.new" "$out/warden"
echo "wrote $out/warden" >&2
echo "$out/warden"
