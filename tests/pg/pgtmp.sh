#!/bin/sh
# pgtmp.sh - a throw-away PostgreSQL server for the tests (Debian's postgresql package).
#
#   pgtmp.sh start DIR     initdb in DIR/data (trust authentication, UTF8) and start a server
#                          with fsync on (the default), listening on 127.0.0.1 at a free
#                          port and on a unix socket in DIR; prints its url,
#                          postgresql://postgres@127.0.0.1:PORT/postgres
#   pgtmp.sh url DIR       prints that url again
#   pgtmp.sh stop DIR      fast shutdown (clients are disconnected)
#   pgtmp.sh kill DIR      immediate shutdown (no checkpoint: a crash, for the server)
#   pgtmp.sh restart DIR   start the stopped or killed server again, on the same port
#   pgtmp.sh freeze DIR    SIGSTOP the server's processes (it stops answering, connections
#                          stay open: a hung server or a network partition); thaw: SIGCONT
#   pgtmp.sh with CMD ARGS start a server in a fresh temporary directory, run CMD with
#                          DPB_TEST_PG_DIR and DPB_TEST_PG_URL set, stop the server and remove
#                          the directory whatever happens (trap), exit with CMD's status
# Exit 77 (and a note on stderr) when the PostgreSQL binaries are absent: the tests then
# skip (scripts/deps.sh installs them). `with` then runs CMD without the variables.
# As root the server runs as `nobody` (postgres refuses to run as root): DIR is chowned.
set -eu

bindir() {
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

# as DIR's owner: nobody when we are root
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

pg_start() {
    dir=$1
    port=$(cat "$dir/port")
    # -k: the unix socket in DIR; max_connections for several replicas' pools at once. fsync
    # stays on, PostgreSQL's default (durability is what the tests check): not set here, so
    # that a test can turn it off with ALTER SYSTEM (a command-line setting would win)
    if ! as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 \
            -c max_connections=100 -c shared_buffers=16MB" start >/dev/null; then
        echo "pgtmp: the server in $dir did not start; its log:" >&2
        tail -n 20 "$dir/server.log" >&2 || true
        return 1
    fi
}

url() {
    echo "postgresql://postgres@127.0.0.1:$(cat "$1/port")/postgres"
}

cmd=${1:-}
[ -n "$cmd" ] || {
    echo "usage: pgtmp.sh start|url|stop|kill|restart DIR | with CMD [ARGS]" >&2
    exit 2
}
shift
if ! BIN=$(bindir); then
    echo "pgtmp: no PostgreSQL server binaries under /usr/lib/postgresql (scripts/deps.sh" \
        "installs the postgresql package): skipping" >&2
    if [ "$cmd" = with ]; then
        exec "$@"
    fi
    exit 77
fi

case $cmd in
start)
    dir=$1
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown nobody:nogroup "$dir"
    fi
    chmod 0700 "$dir"
    # --no-sync: initdb's own files need no fsync (the server runs with fsync on)
    as_owner "$BIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 \
        --no-sync >"$dir/initdb.log" 2>&1 || {
        echo "pgtmp: initdb failed:" >&2
        cat "$dir/initdb.log" >&2
        exit 1
    }
    free_port >"$dir/port"
    pg_start "$dir"
    url "$dir"
    ;;
url)
    url "$1"
    ;;
stop)
    as_owner "$BIN/pg_ctl" -D "$1/data" -m fast -w -t 30 stop >/dev/null
    ;;
kill)
    as_owner "$BIN/pg_ctl" -D "$1/data" -m immediate -w -t 30 stop >/dev/null
    ;;
restart)
    pg_start "$1"
    ;;
freeze | thaw)
    sig=STOP
    if [ "$cmd" = thaw ]; then
        sig=CONT
    fi
    pm=$(head -n 1 "$1/data/postmaster.pid")
    # the postmaster last when freezing (it would fork no new backend meanwhile), first when
    # thawing
    if [ "$sig" = CONT ]; then
        kill -CONT "$pm"
    fi
    for p in $(pgrep -P "$pm"); do
        kill -"$sig" "$p"
    done
    if [ "$sig" = STOP ]; then
        kill -STOP "$pm"
    fi
    ;;
with)
    dir=$(mktemp -d /tmp/dpb-pg.XXXXXX)
    cleanup() {
        sh "$0" thaw "$dir" >/dev/null 2>&1 || true
        as_owner "$BIN/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
        rm -rf "$dir"
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    DPB_TEST_PG_URL=$(sh "$0" start "$dir")
    DPB_TEST_PG_DIR=$dir
    export DPB_TEST_PG_URL DPB_TEST_PG_DIR
    rc=0
    "$@" || rc=$?
    exit $rc
    ;;
*)
    echo "pgtmp: unknown command $cmd" >&2
    exit 2
    ;;
esac
