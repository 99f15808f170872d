#!/bin/sh
# run.sh - dpbudget benchmarks: core throughput (bench_core), then HTTP load against a
# freshly started dpbudgetd (bench_http) for a delta query and a calibration request, then
# a coordinator's bulk registration and eligibility query (bench_workflow), the ledger's
# latency while the compute endpoints are saturated (bench_isolation), then
# dpbudgetd against its floor, bare libmicrohttpd (bench/floor.sh, with wrk).
# Prints figures only; timings are never asserted. Exits non-zero if a benchmark reports
# an error (e.g. a non-2xx answer) or the daemon cannot be started.
#
# usage (from the repo root, as the Makefile does): sh bench/run.sh BUILD_DIR
set -u

BUILD=${1:-build}
CORE_BIN=$BUILD/bench/bench_core
HTTP_BIN=$BUILD/bench/bench_http
ISO_BIN=$BUILD/bench/bench_isolation
FLOW_BIN=$BUILD/bench/bench_workflow
DAEMON=$BUILD/dpbudgetd

for f in "$CORE_BIN" "$HTTP_BIN" "$ISO_BIN" "$FLOW_BIN" "$DAEMON"; do
    if [ ! -x "$f" ]; then
        echo "run.sh: $f is missing (make $f)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpb-bench.XXXXXX") || exit 1
daemon_pid=
daemon_status=0

stop_daemon() {
    [ -n "$daemon_pid" ] || return 0
    if kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid" 2>/dev/null
        i=0
        while kill -0 "$daemon_pid" 2>/dev/null && [ "$i" -lt 50 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        if kill -0 "$daemon_pid" 2>/dev/null; then
            echo "run.sh: dpbudgetd did not exit 5 s after SIGTERM; sending SIGKILL" >&2
            kill -KILL "$daemon_pid" 2>/dev/null
        fi
    fi
    wait "$daemon_pid" 2>/dev/null
    daemon_status=$?
    daemon_pid=
    return 0
}

# stop the daemon; a non-zero exit status after SIGTERM is a failure
stop_checked() {
    daemon_status=0
    stop_daemon
    if [ "$daemon_status" -ne 0 ]; then
        echo "run.sh: dpbudgetd exited with status $daemon_status after SIGTERM" >&2
        fail=1
    fi
}

cleanup() {
    stop_daemon
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null || echo "?")
echo "== dpbudget benchmarks (nproc: $ncpu)"
echo "   note: the HTTP load generator runs on the same $ncpu CPU(s) as the daemon, so the"
echo "   HTTP figures measure the pair, not the daemon alone."

fail=0

echo
echo "== core: Theorem 4.1 (bench_core)"
if ! "$CORE_BIN"; then
    echo "run.sh: bench_core reported an error" >&2
    fail=1
fi

echo
# start_daemon ARGS...: dpbudgetd on 127.0.0.1 at an ephemeral port, plus ARGS; sets port
start_daemon() {
    rm -f "$tmp/port"
    "$DAEMON" --listen 127.0.0.1 --port 0 --port-file "$tmp/port" "$@" 2>"$tmp/daemon.err" &
    daemon_pid=$!
    # wait up to 5 s for the port file
    i=0
    while [ ! -s "$tmp/port" ] && [ "$i" -lt 50 ]; do
        if ! kill -0 "$daemon_pid" 2>/dev/null; then
            break
        fi
        sleep 0.1
        i=$((i + 1))
    done
    port=
    if [ -s "$tmp/port" ]; then
        port=$(tr -d ' \r\n' <"$tmp/port")
    fi
    case $port in
    '' | *[!0-9]*)
        echo "run.sh: dpbudgetd did not report a port within 5 s" >&2
        if [ -s "$tmp/daemon.err" ]; then
            sed 's/^/  dpbudgetd: /' "$tmp/daemon.err" >&2
        fi
        exit 1
        ;;
    esac
    echo "   dpbudgetd pid $daemon_pid listening on 127.0.0.1:$port"
}

echo "== http: starting $DAEMON on 127.0.0.1 (ephemeral port)"
start_daemon --data-dir "$tmp/data"

cat >"$tmp/delta.json" <<'EOF'
{"accountant": "thm41", "event": {"class_name": "ShuffledDpSgdEpochDpEvent", "noise_multiplier": 1.0, "rounds": 1140369}, "epsilon": 1.0}
EOF
cat >"$tmp/delta_exact.json" <<'EOF'
{"event": {"class_name": "ShuffledDpSgdEpochDpEvent", "noise_multiplier": 1.0, "rounds": 10000}, "epsilon": 1.0}
EOF
cat >"$tmp/calibrate.json" <<'EOF'
{"accountant": "thm41", "event": {"class_name": "ShuffledDpSgdEpochDpEvent", "noise_multiplier": 1.0}, "solve_for": "rounds", "target": {"epsilon": 0, "delta": 0.01}}
EOF

echo
echo "== http: POST /v1/delta (one epoch of shuffled DP-SGD, thm41), 64 connections, 5 s, 2 threads"
echo "   (the daemon logs one JSON line per request, as in production)"
if ! "$HTTP_BIN" 127.0.0.1 "$port" POST /v1/delta "$tmp/delta.json" 64 5 2; then
    echo "run.sh: bench_http POST /v1/delta reported an error" >&2
    fail=1
fi

echo
echo "== http: warm-up: one connection builds the exact model for M = 1e4 once (it runs on the"
echo "   compute pool; while it is built, 64 connections would mostly get 503 overloaded)"
"$HTTP_BIN" 127.0.0.1 "$port" POST /v1/delta "$tmp/delta_exact.json" 1 2 1 || true

echo
echo "== http: POST /v1/delta (the epoch at M = 1e4, shuffle_exact, model cached: answered on the"
echo "   HTTP workers), 64 connections, 5 s"
if ! "$HTTP_BIN" 127.0.0.1 "$port" POST /v1/delta "$tmp/delta_exact.json" 64 5 2; then
    echo "run.sh: bench_http POST /v1/delta (exact) reported an error" >&2
    fail=1
fi

echo
echo "== http: POST /v1/calibrate (solve for rounds, thm41), 64 connections, 3 s, 2 threads"
if ! "$HTTP_BIN" 127.0.0.1 "$port" POST /v1/calibrate "$tmp/calibrate.json" 64 3 2; then
    echo "run.sh: bench_http POST /v1/calibrate reported an error" >&2
    fail=1
fi

echo
echo "== http: stopping dpbudgetd"
stop_checked
if [ -s "$tmp/daemon.err" ]; then
    # the daemon's own lines, not its request log (one line per request sent above)
    grep -v '"msg":"request"' "$tmp/daemon.err" | sed 's/^/  dpbudgetd: /'
    echo "  dpbudgetd: $(grep -c '"msg":"request"' "$tmp/daemon.err") request log lines"
fi

echo
echo "== http: a coordinator's workflow (bench_workflow): bulk registration of 100,000 clients"
echo "   (POST /v1/clients:batch, batches of 10,000), then eligibility of 10,000 candidates"
start_daemon --data-dir "$tmp/flow-data" --no-request-log
if ! "$FLOW_BIN" 127.0.0.1 "$port" 100000 10000; then
    echo "run.sh: bench_workflow reported an error" >&2
    fail=1
fi
stop_checked

echo
echo "== http: heavy computations vs. the ledger (bench_isolation): POST /v1/rounds with 100"
echo "   participants and GET /healthz, paced at 100/s each, idle and then while 24 loaders keep"
echo "   POST /v1/delta saturated with PLD requests of about 1.5 s each (default threads: one"
echo "   per CPU for HTTP and for computations, 16 computations waiting, the rest 503)"
# one bench_isolation run against a fresh daemon whose data directory is $1
isolation() {
    start_daemon --data-dir "$1" --default-budget 1000000,0.5 --no-request-log
    if ! "$ISO_BIN" 127.0.0.1 "$port" "${BENCH_ISO_SECONDS:-5}" 24; then
        echo "run.sh: bench_isolation reported an error ($1)" >&2
        fail=1
    fi
    stop_checked
}
isolation "$tmp/iso-data"

# The same with the data directory in memory (/dev/shm: fdatasync costs nothing), which
# separates the CPU isolation from the disk: on a shared or slow disk the rounds' p99 above
# is mostly fdatasync, idle or busy.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    shm=$(mktemp -d /dev/shm/dpb-bench.XXXXXX)
    echo
    echo "== http: the same, data directory in memory (/dev/shm): CPU isolation without the disk"
    isolation "$shm/iso-data"
    rm -rf "$shm"
fi

echo
echo "== http: the ledger in pld mode at federated scale (bench_isolation pld): 1000 pld clients,"
echo "   rounds of 100 of them back to back with a per-round DP-SGD schedule (sigma = 0.8 + 0.01 k),"
echo "   /healthz and /v1/summary probed every 10 ms meanwhile"
start_daemon --data-dir "$tmp/pld-data" --no-request-log
if ! "$ISO_BIN" 127.0.0.1 "$port" "${BENCH_PLD_ROUNDS:-1000}" pld; then
    echo "run.sh: bench_isolation pld reported an error" >&2
    fail=1
fi
stop_daemon

echo
if ! sh bench/floor.sh "$BUILD"; then
    echo "run.sh: bench/floor.sh reported an error" >&2
    fail=1
fi

echo
if ! sh bench/time.sh "$BUILD"; then
    echo "run.sh: bench/time.sh reported an error" >&2
    fail=1
fi

exit "$fail"
