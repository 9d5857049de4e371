#!/usr/bin/env bash
# Replays every session trace of the repository (tests/scenarios, tests/nodes, examples) with a
# `warden` binary, three ways (plain, --explain, --trace), and writes each output to a folder:
# run it with the binary before a change and after, then `diff -r` the two folders. A change
# that should not change behavior must leave them byte-identical.
#
#   benches/replay-snapshot.sh target/debug/warden /tmp/replay-before
set -euo pipefail
bin=$(realpath "${1:?usage: $0 WARDEN_BINARY OUT_DIR}")
out=${2:?usage: $0 WARDEN_BINARY OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(realpath "$out")

# The flags a case folder's scenario.toml asks for (a small subset of TOML: one key per line).
flags_for() {
  local dir=$1 toml=$1/scenario.toml builtin="" plugins=0
  local -a f=()
  [ -d "$dir/rules" ] && f+=(--rules "$dir/rules")
  [ -d "$dir/plugins" ] && { f+=(--plugins "$dir/plugins"); plugins=1; }
  if [ -f "$toml" ]; then
    builtin=$(sed -n 's/^builtin *= *\(true\|false\).*/\1/p' "$toml")
    for p in $(sed -n 's/^plugins *= *\[\(.*\)\]/\1/p' "$toml" | tr -d '",'); do
      f+=(--plugins "$dir/$p"); plugins=1
    done
    for c in $(sed -n 's/^capabilities *= *\[\(.*\)\]/\1/p' "$toml" | tr -d '",'); do
      f+=(--capability "$c")
    done
    local m
    m=$(sed -n 's/^modes *= *"\(.*\)"/\1/p' "$toml")
    if [ -n "$m" ]; then
      case $m in builtin:*) f+=(--modes "$m") ;; *) f+=(--modes "$dir/$m") ;; esac
    fi
  fi
  if [ "$builtin" = true ] || { [ -z "$builtin" ] && [ ! -d "$dir/rules" ] && [ $plugins = 0 ]; }; then
    f+=(--builtin)
  fi
  printf '%s\n' "${f[@]}"
}

find tests examples -name '*.jsonl' ! -name '*.expected.jsonl' ! -name '*.explain.jsonl' \
  ! -name '*.nodes.jsonl' | sort | while read -r trace; do
  dir=$(dirname "$trace")
  mapfile -t flags < <(flags_for "$dir")
  name=$(echo "$trace" | tr '/' '_')
  for mode in plain explain trace; do
    extra=()
    [ $mode = explain ] && extra=(--explain)
    [ $mode = trace ] && extra=(--trace)
    "$bin" replay "${flags[@]}" "${extra[@]}" "$trace" >"$out/$name.$mode.out" 2>"$out/$name.$mode.err.raw" \
      && echo 0 >"$out/$name.$mode.status" || echo $? >"$out/$name.$mode.status"
    # Log lines start with a timestamp, which differs from run to run.
    sed -E 's/^[0-9]{4}-[0-9-]+T[0-9:.]+Z //' "$out/$name.$mode.err.raw" >"$out/$name.$mode.err"
    rm "$out/$name.$mode.err.raw"
  done
done
echo "wrote $(find "$out" -name '*.out' | wc -l) replays to $out"
