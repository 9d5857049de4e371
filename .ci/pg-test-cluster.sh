#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests: `start DIR PORT` creates one in DIR (which
# must not exist), listening on 127.0.0.1:PORT only (and a socket in DIR), and prints its URL;
# `stop DIR` stops it (DIR can then be removed). CI (.ci/run) and developers use it alike:
#
#     url=$(.ci/pg-test-cluster.sh start /tmp/warden-pg 54329)
#     WARDEN_TEST_POSTGRES_URL=$url cargo test
#     .ci/pg-test-cluster.sh stop /tmp/warden-pg
#
# Run as root, the server runs as the `postgres` user (PostgreSQL refuses root), which gets
# DIR. Where that user cannot write /dev/null (some sandboxes make it root's alone), the
# commands run in a private mount namespace with a /dev/null of their own; the machine's is
# left as it is. Authentication is `trust`: the cluster is reachable from this machine only,
# and lives as long as the test run.
set -euo pipefail

bindir() {
    for d in "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")" \
        /usr/lib/postgresql/*/bin; do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return
        fi
    done
    echo "initdb and pg_ctl not found (Debian: apt-get install postgresql)" >&2
    exit 1
}

# Runs "$@" as the server's user: the postgres user when we are root, else ourselves.
as_server() {
    if [ "$(id -u)" != 0 ]; then
        "$@"
        return
    fi
    local cmd
    cmd=$(printf '%q ' "$@")
    if runuser -u postgres -- sh -c ': > /dev/null' 2>/dev/null; then
        runuser -u postgres -- sh -c "$cmd"
    else
        unshare -m --propagation private sh -c \
            "mount --bind '$DIR/null' /dev/null && runuser -u postgres -- sh -c \"\$0\"" "$cmd"
    fi
}

command=${1:-}
DIR=${2:-}
[ -n "$command" ] && [ -n "$DIR" ] || { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }
BIN=$(bindir)

case "$command" in
start)
    PORT=${3:?usage: $0 start DIR PORT}
    [ ! -e "$DIR/data" ] || { echo "$DIR/data already exists" >&2; exit 1; }
    mkdir -p "$DIR"
    if [ "$(id -u)" = 0 ]; then
        [ -e "$DIR/null" ] || mknod -m 666 "$DIR/null" c 1 3
        chown postgres:postgres "$DIR"
    fi
    as_server "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
        > "$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; exit 1; }
    # fsync off: a test cluster holds nothing worth a disk flush.
    as_server "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start \
        -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
        > "$DIR/pg_ctl.log" 2>&1 || { cat "$DIR/pg_ctl.log" "$DIR/server.log" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$PORT/postgres"
    ;;
stop)
    if [ -e "$DIR/data/postmaster.pid" ]; then
        as_server "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop > /dev/null 2>&1 || true
    fi
    ;;
*)
    echo "usage: $0 start DIR PORT | stop DIR" >&2
    exit 2
    ;;
esac
