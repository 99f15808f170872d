#!/bin/sh
# replicas.sh - the ledger on PostgreSQL (--ledger-url): rounds of 100 participants with 1,
# 2 and 3 replicas on one local PostgreSQL (tests/pg/pgtmp.sh: fsync on), the durable
# rounds/s in total at saturation and the latency at a paced 50 rounds/s; then GET
# /v1/summary and list pages with 1,000,000 clients in the database (registered with
# clients:batch). Targets (issue 17): >= 500 rounds/s in total, p99 < 20 ms at 50 rounds/s,
# reads p99 < 10 ms at 1M clients. Prints figures only, never asserts them; skipped with a
# note when the PostgreSQL binaries are absent. The load generator, the replicas and
# PostgreSQL share this machine's CPUs: the figures are for the whole set.
#
# usage (from the repo root, as the Makefile does): sh bench/replicas.sh BUILD_DIR
# BENCH_REPLICAS_SECONDS (default 5) per measurement, BENCH_REPLICAS_CLIENTS (default 1000000)
set -u
BUILD=${1:-build}
DAEMON=$BUILD/dpbudgetd
BIN=$BUILD/bench/bench_replicas
SECONDS_EACH=${BENCH_REPLICAS_SECONDS:-5}
CLIENTS=${BENCH_REPLICAS_CLIENTS:-1000000}
PGTMP=tests/pg/pgtmp.sh
PSQL=
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/psql" ] && PSQL=$d/psql && break
done

echo "== replicated ledger: dpbudgetd --ledger-url on a local PostgreSQL (bench_replicas)"
for f in "$DAEMON" "$BIN"; do
    if [ ! -x "$f" ]; then
        echo "replicas.sh: $f is missing (make $f)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpb-bench-pg.XXXXXX") || exit 1
chmod 755 "$tmp"
pids=
pg_started=0
cleanup() {
    for p in $pids; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in $pids; do
        i=0
        while kill -0 "$p" 2>/dev/null && [ "$i" -lt 100 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    pids=
    [ "$pg_started" = 1 ] && sh "$PGTMP" stop "$tmp/pg" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

url=$(sh "$PGTMP" start "$tmp/pg" 2>"$tmp/pg.err")
rc=$?
if [ "$rc" -eq 77 ] || [ -z "$PSQL" ]; then
    echo "   skipped: no PostgreSQL server binaries (scripts/deps.sh installs postgresql)"
    exit 0
fi
if [ "$rc" -ne 0 ]; then
    echo "replicas.sh: PostgreSQL did not start:" >&2
    cat "$tmp/pg.err" >&2
    exit 1
fi
pg_started=1
echo "   PostgreSQL $("$PSQL" -X -t -A -d "$url" -c 'SHOW server_version') at $url (fsync on)"

fail=0
# start N replicas on database DB; sets PORTS (comma list)
start_replicas() {
    n=$1
    db=$2
    PORTS=
    i=1
    while [ "$i" -le "$n" ]; do
        rm -f "$tmp/port.$db.$i"
        "$DAEMON" --listen 127.0.0.1 --port 0 --port-file "$tmp/port.$db.$i" --no-request-log \
            --ledger-url "${url%/*}/$db" 2>"$tmp/daemon.$db.$i.err" &
        pids="$pids $!"
        i=$((i + 1))
    done
    i=1
    while [ "$i" -le "$n" ]; do
        w=0
        while [ ! -s "$tmp/port.$db.$i" ] && [ "$w" -lt 600 ]; do
            sleep 0.1
            w=$((w + 1))
        done
        if [ ! -s "$tmp/port.$db.$i" ]; then
            echo "replicas.sh: replica $i on $db did not start:" >&2
            cat "$tmp/daemon.$db.$i.err" >&2
            exit 1
        fi
        p=$(tr -d ' \r\n' <"$tmp/port.$db.$i")
        PORTS=${PORTS:+$PORTS,}$p
        i=$((i + 1))
    done
}

stop_replicas() {
    for p in $pids; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in $pids; do
        wait "$p" 2>/dev/null
    done
    pids=
}

for n in 1 2 3; do
    db=bench_r$n
    "$PSQL" -X -q -d "$url" -c "CREATE DATABASE $db" || exit 1
    start_replicas "$n" "$db"
    first=${PORTS%%,*}
    echo
    echo "== $n replica(s): rounds of 100 participants out of 10,000 registered clients"
    "$BIN" setup "$first" 10000 || fail=1
    # saturation: 8 connections per replica, each posting back to back
    "$BIN" saturate "$PORTS" "$SECONDS_EACH" $((8 * n)) 10000 || fail=1
    "$BIN" paced "$PORTS" "$SECONDS_EACH" 50 10000 || fail=1
    rows=$("$PSQL" -X -t -A -d "${url%/*}/$db" -c \
        "SELECT count(*) || ' records, ' || pg_size_pretty(pg_total_relation_size('dpbudget_log')) FROM dpbudget_log")
    echo "   the shared log: $rows"
    stop_replicas
done

echo
echo "== reads with $CLIENTS clients in the database (one replica)"
db=bench_reads
"$PSQL" -X -q -d "$url" -c "CREATE DATABASE $db" || exit 1
start_replicas 1 "$db"
"$BIN" setup "$PORTS" "$CLIENTS" || fail=1
"$BIN" reads "$PORTS" 300 || fail=1
stop_replicas
echo "   a replica starting on it (newest snapshot + the records after it):"
t0=$(date +%s.%N)
start_replicas 1 "$db"
t1=$(date +%s.%N)
echo "   listening after $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s"
"$BIN" reads "$PORTS" 100 || fail=1
stop_replicas
exit "$fail"
