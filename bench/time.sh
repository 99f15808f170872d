#!/bin/sh
# time.sh - the cost of time in the ledger (LEDGER_FORMAT 5; docs/PERFORMANCE.md, "Time in the
# ledger"): bench_time's figures (bytes per record, memory per client and of the series, the
# series query at BENCH_TIME_CLIENTS clients and a year of hourly points), the same query over
# HTTP on that state, and durable rounds of this build against a baseline's (DPB_BENCH_BASE).
# Prints figures only; exits non-zero if a step fails. Run by bench/run.sh (make bench).
#
# usage (from the repo root): sh bench/time.sh BUILD_DIR
set -u
BUILD=${1:-build}
DAEMON=$BUILD/dpbudgetd
for f in "$BUILD/bench/bench_time" "$BUILD/bench/bench_rounds" "$DAEMON"; do
    if [ ! -x "$f" ]; then
        echo "time.sh: $f is missing (make $f)" >&2
        exit 1
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpb-time.XXXXXX") || exit 1
daemon_pid=
fail=0
cleanup() {
    if [ -n "$daemon_pid" ]; then
        kill -TERM "$daemon_pid" 2>/dev/null
        wait "$daemon_pid" 2>/dev/null
    fi
    rm -rf "$tmp" "$BUILD/bench-time-data" "$BUILD/bench-rounds-data"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_daemon ARGS...: dpbudgetd on 127.0.0.1 at an ephemeral port; sets port
start_daemon() {
    rm -f "$tmp/port"
    "$DAEMON" --listen 127.0.0.1 --port 0 --port-file "$tmp/port" "$@" 2>"$tmp/daemon.err" &
    daemon_pid=$!
    i=0
    while [ ! -s "$tmp/port" ] && [ "$i" -lt 600 ]; do
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    port=$(tr -d ' \r\n' <"$tmp/port" 2>/dev/null)
    case $port in
    '' | *[!0-9]*)
        echo "time.sh: dpbudgetd did not report a port" >&2
        sed 's/^/  dpbudgetd: /' "$tmp/daemon.err" >&2
        exit 1
        ;;
    esac
}

stop_checked() {
    kill -TERM "$daemon_pid" 2>/dev/null
    if ! wait "$daemon_pid"; then
        echo "time.sh: dpbudgetd exited with an error after SIGTERM" >&2
        fail=1
    fi
    daemon_pid=
}

echo "== time in the ledger (bench_time): bytes per record, memory, the series at"
echo "   ${BENCH_TIME_CLIENTS:-1000000} clients and a year of hourly points (docs/PERFORMANCE.md)"
if ! "$BUILD/bench/bench_time" "$BUILD"; then
    echo "time.sh: bench_time reported an error" >&2
    fail=1
else
    # the same query over HTTP, the daemon on the state bench_time left (a snapshot)
    start_daemon --data-dir "$BUILD/bench-time-data" --no-request-log
    for res in hour minute day; do
        ts=
        for i in 1 2 3 4 5 6 7 8 9 10 11; do
            ts="$ts $(curl -s -o /dev/null -w '%{time_total}' \
                "http://127.0.0.1:$port/v1/history?resolution=$res")"
        done
        bytes=$(curl -s "http://127.0.0.1:$port/v1/history?resolution=$res" | wc -c)
        med=$(echo "$ts" | tr ' ' '\n' | grep . | sort -n | sed -n 6p)
        echo "GET /v1/history?resolution=$res over HTTP: $bytes bytes in ${med} s (median of 11, curl)"
    done
    stop_checked
fi
rm -rf "$BUILD/bench-time-data"

# Durable rounds of this build against a baseline's (DPB_BENCH_BASE: a checkout of the version
# to compare with, its core library built: make in it), in turn, three times each: the same
# program (bench/bench_rounds.c) built against each library.
echo
echo "== time in the ledger: durable rounds of 100 participants, 2 threads, this build against"
echo "   DPB_BENCH_BASE (${DPB_BENCH_BASE:-unset})"
base_lib=${DPB_BENCH_BASE:+$DPB_BENCH_BASE/build/libdpcore.a}
if [ -z "${DPB_BENCH_BASE:-}" ] || [ ! -f "$base_lib" ]; then
    echo "   skipped: set DPB_BENCH_BASE to a checkout of the version to compare with (built)"
else
    mkdir -p "$tmp/base/bench"
    cp bench/bench_rounds.c bench/benchlib.h "$tmp/base/bench/"
    ln -s "$(cd "$DPB_BENCH_BASE" && pwd)/core" "$tmp/base/core"
    if ! ${CC:-cc} -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
        -o "$tmp/bench_rounds_base" "$tmp/base/bench/bench_rounds.c" "$base_lib" \
        $(pkg-config --libs gsl fftw3 fftw3l libpq) -lpthread -lm; then
        echo "time.sh: bench_rounds does not build against $base_lib" >&2
        fail=1
    else
        # compare MODE LABEL: five runs of each, in turn, 2 s each: the medians of their
        # rounds/s and CPU us per round, and the ratios
        compare() {
            : >"$tmp/old"
            : >"$tmp/new"
            for i in 1 2 3 4 5; do
                "$tmp/bench_rounds_base" "$BUILD/bench-rounds-data" 2 2 $1 >>"$tmp/old"
                "$BUILD/bench/bench_rounds" "$BUILD/bench-rounds-data" 2 2 $1 >>"$tmp/new"
            done
            ro=$(cut -d' ' -f1 "$tmp/old" | sort -n | sed -n 3p)
            rn=$(cut -d' ' -f1 "$tmp/new" | sort -n | sed -n 3p)
            co=$(cut -d' ' -f2 "$tmp/old" | sort -n | sed -n 3p)
            cn=$(cut -d' ' -f2 "$tmp/new" | sort -n | sed -n 3p)
            echo "$2: baseline $(cut -d' ' -f1 "$tmp/old" | tr '\n' ' ')rounds/s, this build" \
                "$(cut -d' ' -f1 "$tmp/new" | tr '\n' ' ')"
            awk -v ro="$ro" -v rn="$rn" -v co="$co" -v cn="$cn" -v what="$2" 'BEGIN {
                if (ro > 0 && cn > 0)
                    printf "%s: median %s against %s rounds/s (this build / baseline %.3f, target >= 0.95 [%s]); CPU per round %s against %s us (%.3f)\n",
                        what, rn, ro, rn / ro, (rn / ro >= 0.95 ? "ok" : "MISSED"), cn, co, cn / co }'
        }
        compare "" "durable (fdatasync real)"
        compare nosync "CPU only (fdatasync off)"
    fi
fi

exit "$fail"
