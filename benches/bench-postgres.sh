#!/usr/bin/env bash
# The store under a tick, SQLite beside PostgreSQL, on this machine: starts a throw-away
# PostgreSQL cluster on a free loopback port (.ci/pg-test-cluster.sh), runs
# `cargo bench --bench store` against it (release build), and removes the cluster.
# Give WARDEN_BENCH_POSTGRES_URL to measure against a server of your own instead.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${WARDEN_BENCH_POSTGRES_URL:-}" ]; then
    port=54401
    while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
    dir=$(mktemp -d /tmp/warden-bench-pg.XXXXXX)
    trap '.ci/pg-test-cluster.sh stop "$dir"; rm -rf "$dir"' EXIT
    WARDEN_BENCH_POSTGRES_URL=$(.ci/pg-test-cluster.sh start "$dir" "$port")
    export WARDEN_BENCH_POSTGRES_URL
fi
cargo bench -j "${CARGO_BUILD_JOBS:-2}" --bench store
