#!/usr/bin/env bash
# Starts and stops a throwaway PostgreSQL cluster for eve's Postgres tests.
#
#   eval "$(scripts/postgres.sh start)"   # prints `export EVE_TEST_DATABASE_URL=...` and `export EVE_POSTGRES_DIR=...`
#   cargo test -p eve-tests --test postgres
#   scripts/postgres.sh restart           # `pg_ctl restart -m fast` (the cluster in $EVE_POSTGRES_DIR)
#   scripts/postgres.sh restart DIR immediate   # the same after a crash-like stop (no checkpoint)
#   scripts/postgres.sh stop              # stops it and removes its directory
#
# The cluster lives in a new temporary directory owned by the `postgres` user (when run as root; as
# another user, by that user), listens on 127.0.0.1 only, on a free port, with fsync=on and
# synchronous_commit=on, and asks for a password (scram-sha-256) that `start` generates and puts in
# the URL. `stop` and `restart` take the directory as an argument or from EVE_POSTGRES_DIR.
#
# With EVE_POSTGRES_WATCH_PID set, `start` also leaves a watchdog that stops the cluster and removes
# its directory once that process has exited: the Rust tests start a cluster this way when
# EVE_TEST_DATABASE_URL is not set, so a test process that ends (or is killed) never leaves one behind.
#
# The binaries are found in PG_BIN, else in the newest /usr/lib/postgresql/*/bin, else on PATH.
set -euo pipefail

fail() {
    echo "postgres.sh: $*" >&2
    exit 1
}

find_bin() {
    if [[ -n "${PG_BIN:-}" ]]; then
        [[ -x "$PG_BIN/pg_ctl" ]] || fail "PG_BIN=$PG_BIN holds no pg_ctl"
        echo "$PG_BIN"
        return
    fi
    local newest
    newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n "$newest" && -x "$newest/pg_ctl" ]]; then
        echo "$newest"
        return
    fi
    if command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return
    fi
    fail "no PostgreSQL binaries found (looked in PG_BIN, /usr/lib/postgresql/*/bin and PATH); install PostgreSQL (e.g. apt-get install postgresql-15) or set PG_BIN"
}

# Runs a command as the cluster's owner: `postgres` when we are root (initdb refuses root).
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || fail "running as root, but there is no \`postgres\` user to own the cluster"
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

port_is_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
    local bin dir password port attempt
    bin=$(find_bin)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/eve-postgres.XXXXXXXX")
    chmod 700 "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
    password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    as_owner bash -c "umask 077; printf '%s\n' '$password' > '$dir/pwfile'"
    if ! as_owner "$bin/initdb" -D "$dir/data" -U postgres --pwfile="$dir/pwfile" -A scram-sha-256 \
        -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        rm -rf "$dir"
        fail "initdb failed (its output is above)"
    fi
    rm -f "$dir/pwfile"
    for attempt in $(seq 1 20); do
        port=$(( (RANDOM * 32768 + RANDOM) % 30000 + 20000 ))
        port_is_free "$port" || continue
        if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o \
            "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=300" \
            >/dev/null 2>&1; then
            if [[ -n "${EVE_POSTGRES_WATCH_PID:-}" ]]; then
                watch "$EVE_POSTGRES_WATCH_PID" "$dir"
            fi
            echo "export EVE_TEST_DATABASE_URL=postgres://postgres:$password@127.0.0.1:$port/postgres"
            echo "export EVE_POSTGRES_DIR=$dir"
            return
        fi
        # Another process may have taken the port between the check and the start: try another.
        grep -q "could not bind\|Address already in use" "$dir/server.log" 2>/dev/null || break
    done
    cat "$dir/server.log" >&2 2>/dev/null || true
    rm -rf "$dir"
    fail "the server did not start (its log is above)"
}

# Leaves a detached watchdog that stops the cluster in $2 once process $1 has exited.
watch() {
    local pid=$1 dir=$2 self
    self=$(readlink -f "$0")
    setsid bash -c "while kill -0 $pid 2>/dev/null; do sleep 1; done; exec bash '$self' stop '$dir'" \
        </dev/null >/dev/null 2>&1 &
}

cluster_dir() {
    local dir=${1:-${EVE_POSTGRES_DIR:-}}
    [[ -n "$dir" ]] || fail "name the cluster's directory (the EVE_POSTGRES_DIR that \`start\` printed)"
    [[ -d "$dir/data" ]] || fail "$dir holds no cluster started by this script"
    echo "$dir"
}

stop() {
    local dir bin
    dir=$(cluster_dir "${1:-}")
    bin=$(find_bin)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}

restart() {
    local dir bin mode=${2:-fast}
    dir=$(cluster_dir "${1:-}")
    bin=$(find_bin)
    [[ $mode == fast || $mode == immediate ]] || fail "restart mode must be fast or immediate, not $mode"
    as_owner "$bin/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 restart >/dev/null \
        || fail "pg_ctl restart failed; see $dir/server.log"
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    restart) restart "${2:-}" "${3:-}" ;;
    *) fail "usage: $0 start | stop [dir] | restart [dir] [fast|immediate]" ;;
esac
