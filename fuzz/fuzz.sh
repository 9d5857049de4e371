#!/usr/bin/env bash
# Runs Warden's fuzz targets (fuzz/fuzz_targets/) with cargo-fuzz on stable Rust.
#
#   fuzz/fuzz.sh TARGET [SECONDS]    one target, for SECONDS (default 300)
#   fuzz/fuzz.sh all [SECONDS]       every target in turn, SECONDS each
#   fuzz/fuzz.sh list                the targets
#
# Each run starts from the target's corpus in the repository (fuzz/corpus/TARGET/) and writes
# what it finds into a scratch corpus (fuzz/work/TARGET/, not committed). At the end the two are
# merged into a minimal corpus (libFuzzer's -merge: the fewest inputs that keep the coverage),
# and its smallest files, up to 200 KB in all, become fuzz/corpus/TARGET/ again, which
# `cargo test` replays (tests/fuzz_corpus.rs); the whole corpus stays under 2 MB. A crash or hang is written to fuzz/artifacts/TARGET/; fix it, then copy
# it into fuzz/corpus/TARGET/ under a name that says what it was, so CI replays it for ever.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). Nightly is not needed: RUSTC_BOOTSTRAP=1 lets
# stable rustc take cargo-fuzz's flags. The machine is shared: one job, at most 2 GiB, 10 s per
# input. CARGO_TARGET_DIR and CARGO_BUILD_JOBS are honoured (default: fuzz/target, 2 jobs).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"
export RUSTC_BOOTSTRAP=1
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
target_dir="${CARGO_TARGET_DIR:-$root/fuzz/target}"
triple="x86_64-unknown-linux-gnu"
# Address Sanitizer also watches the C code inside (SQLite, Lua); FUZZ_SANITIZER=none is faster.
sanitizer="${FUZZ_SANITIZER:-address}"
max_file=4096
budget=$((200 * 1000))

targets() { ls "$root/fuzz/fuzz_targets" | sed -n 's/\.rs$//p'; }

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
    exit 2
fi

run() {
    local t="$1" secs="$2"
    local bin="$target_dir/$triple/release/$t"
    local corpus="$root/fuzz/corpus/$t" work="$root/fuzz/work/$t"
    local artifacts="$root/fuzz/artifacts/$t" logs="$root/fuzz/work/logs/$t"
    mkdir -p "$corpus" "$work" "$artifacts" "$logs"
    # Optimised, with debug assertions (overflow checks) on: -O alone turns them off.
    cargo fuzz build -O -a -s "$sanitizer" --target-dir "$target_dir" "$t"
    echo "fuzzing $t for ${secs}s (log: fuzz/work/logs/$t/fuzz-0.log)"
    local status=0
    # -jobs=1 runs the fuzzer in a child that writes fuzz-0.log in the current folder.
    # A shell command is judged within a hook: any input up to 100 KB in a second at most, and
    # no single allocation of 64 MB (its peak is measured by crates/warden-shell/tests/bounds.rs).
    local limits=(-rss_limit_mb=2048 -timeout=10 -max_len="$max_file")
    if [ "$t" = shell_command ]; then
        limits=(-rss_limit_mb=2048 -timeout=1 -malloc_limit_mb=64 -max_len=102400)
    fi
    (cd "$logs" && "$bin" -jobs=1 -max_total_time="$secs" "${limits[@]}" \
        -artifact_prefix="$artifacts/" "$work" "$corpus") || status=$?
    tail -n 3 "$logs/fuzz-0.log" || true
    # Merge what was found into a minimal corpus, and keep its small files in the repository.
    local merged="$root/fuzz/work/merged-$t"
    rm -rf "$merged" && mkdir -p "$merged"
    "$bin" -merge=1 -rss_limit_mb=2048 -timeout=10 "$merged" "$corpus" "$work" >"$logs/merge.log" 2>&1 || true
    if [ -n "$(ls -A "$merged")" ]; then
        find "$corpus" -maxdepth 1 -type f -name '[0-9a-f]*' -regextype posix-extended \
            -regex '.*/[0-9a-f]{40}' -delete
        # The smallest first, until the target's budget is spent.
        local spent=0 size f
        while read -r size f; do
            spent=$((spent + size))
            [ "$spent" -gt "$budget" ] && break
            cp "$f" "$corpus/"
        done < <(find "$merged" -maxdepth 1 -type f -printf '%s %p\n' | sort -n)
        # A named input (a past crash) is kept under its name only.
        for f in "$corpus"/*; do
            case "$(basename "$f")" in
                *[!0-9a-f]*) rm -f "$corpus/$(sha1sum <"$f" | cut -c1-40)" ;;
            esac
        done
    fi
    rm -rf "$merged"
    echo "$t: corpus $(ls "$corpus" | wc -l) files, $(du -sh "$corpus" | cut -f1)"
    if ls "$artifacts"/* >/dev/null 2>&1; then
        echo "$t: FOUND INPUTS in fuzz/artifacts/$t:" && ls "$artifacts"
    fi
    return "$status"
}

case "${1:-}" in
    list) targets ;;
    all)
        failed=0
        for t in $(targets); do run "$t" "${2:-300}" || failed=1; done
        exit "$failed"
        ;;
    "" | -h | --help)
        sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
    *)
        targets | grep -qx "$1" || { echo "no fuzz target named $1 (fuzz/fuzz.sh list)" >&2; exit 2; }
        run "$1" "${2:-300}"
        ;;
esac
