#!/bin/sh
# floor.sh - dpbudgetd against its floor: the same load generator (wrk: 64 connections, 2
# threads, a few seconds per run) first against bench/floor (bare libmicrohttpd, the daemon's
# threading, an answer of the same size), then against dpbudgetd, alternating REPS times per
# request so that both see the same background load; prints each side's median req/s and p99
# and dpbudgetd's throughput as a fraction of the floor's, both as the ratio of the medians
# and as the ratio of each side's best run (the "best of N" by which the targets were set;
# it discounts runs slowed by other load). Figures only, never asserted.
# Exits non-zero when a server cannot start or answers anything but 2xx.
#
# usage (from the repo root): sh bench/floor.sh BUILD_DIR
# env: FLOOR_SECONDS (default 3), FLOOR_REPS (default 3), FLOOR_CLIENTS (default 10000)
set -u

BUILD=${1:-build}
DAEMON=$BUILD/dpbudgetd
FLOOR=$BUILD/bench/floor
SECS=${FLOOR_SECONDS:-3}
REPS=${FLOOR_REPS:-3}
CLIENTS=${FLOOR_CLIENTS:-10000}
for f in "$DAEMON" "$FLOOR"; do
    if [ ! -x "$f" ]; then
        echo "floor.sh: $f is missing (make $f)" >&2
        exit 1
    fi
done
for c in wrk curl; do
    if ! command -v "$c" >/dev/null 2>&1; then
        echo "floor.sh: $c is missing (sh scripts/deps.sh --bench)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dpb-floor.XXXXXX") || exit 1
daemon_pid=
floor_pid=

stop() { # pid: SIGTERM, then SIGKILL after 5 s
    [ -n "$1" ] || return 0
    kill -TERM "$1" 2>/dev/null
    i=0
    while kill -0 "$1" 2>/dev/null && [ "$i" -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}
cleanup() {
    stop "$floor_pid"
    stop "$daemon_pid"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_port() { # file pid: prints the port, or nothing after 5 s
    i=0
    while [ ! -s "$1" ] && [ "$i" -lt 50 ] && kill -0 "$2" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    [ -s "$1" ] && tr -d ' \r\n' <"$1"
}

"$DAEMON" --listen 127.0.0.1 --port 0 --port-file "$tmp/dport" --data-dir "$tmp/data" \
    --default-budget 1000000,0.5 2>"$tmp/daemon.log" &
daemon_pid=$!
dport=$(wait_port "$tmp/dport" "$daemon_pid")
if [ -z "$dport" ]; then
    echo "floor.sh: dpbudgetd did not start" >&2
    sed 's/^/  dpbudgetd: /' "$tmp/daemon.log" >&2
    exit 1
fi
base=http://127.0.0.1:$dport

# the ledger: CLIENTS clients, made by rounds of 2000 (unknown clients get the default budget)
python3 - "$CLIENTS" "$tmp" <<'PY'
import json, sys
n, tmp = int(sys.argv[1]), sys.argv[2]
for k, lo in enumerate(range(0, n, 2000)):
    with open("%s/round%d.json" % (tmp, k), "w") as f:
        json.dump({"round_id": "bench-fill-%d" % k,
                   "participants": ["c%05d" % i for i in range(lo, min(n, lo + 2000))],
                   "event": {"class_name": "GaussianDpEvent", "noise_multiplier": 5}}, f)
PY
for f in "$tmp"/round*.json; do
    code=$(curl -s -o "$tmp/round.out" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$f" "$base/v1/rounds")
    if [ "$code" != 200 ]; then
        echo "floor.sh: filling the ledger answered $code: $(head -c 300 "$tmp/round.out")" >&2
        exit 1
    fi
done

# the requests: name, method, path, body (empty for GET)
cat >"$tmp/cases" <<'EOF2'
delta_thm41 POST /v1/delta {"accountant":"thm41","event":{"class_name":"ShuffledDpSgdEpochDpEvent","noise_multiplier":1.0,"rounds":1140369},"epsilon":1.0}
calibrate_thm41 POST /v1/calibrate {"accountant":"thm41","event":{"class_name":"ShuffledDpSgdEpochDpEvent","noise_multiplier":1.0},"solve_for":"rounds","target":{"epsilon":0,"delta":0.01}}
client_get GET /v1/clients/c04242 -
summary GET /v1/summary -
EOF2

cpu_ticks() { # pid: user + system clock ticks so far
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
TICK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# wrk once against the server with this pid: prints "req/s p99_ms non2xx cpu_us_per_request"
# (the server's own CPU time per request: less swayed by other load than req/s), bounded
run_wrk() { # url lua pid
    t0=$(cpu_ticks "$3")
    timeout $((SECS + 20)) wrk -t2 -c64 -d"${SECS}s" --timeout 2s --latency -s "$2" "$1" \
        >"$tmp/wrk.out" 2>&1
    awk '
        /^Requests\/sec:/ { rps = $2 }
        /^ +99%/ { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
                   p99 = (u == "us") ? v / 1000 : (u == "s") ? v * 1000 : v }
        /Non-2xx or 3xx responses:/ { bad += $NF }
        / requests in / { n = $1 }
        END { printf "%s %s %d %.1f\n", (rps == "" ? 0 : rps), (p99 == "" ? "nan" : p99), bad,
                     (n > 0 ? (t1 - t0) * 1e6 / tick / n : 0) }
    ' t0="$t0" t1="$(cpu_ticks "$3")" tick="$TICK" "$tmp/wrk.out"
}

best() { # numbers on stdin: the largest
    sort -g | tail -n 1
}

median() { # numbers on stdin
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "== floor: dpbudgetd against bare libmicrohttpd (same threading, same answer size)"
echo "   wrk -t2 -c64, ${SECS} s per run, $REPS runs each side alternating; medians; $CLIENTS clients"
echo "   (ratio: of the medians; best: of each side's best run)"
printf '   %-16s %6s %12s %10s %12s %10s %6s %6s\n' request bytes floor_req/s floor_p99 dpb_req/s dpb_p99 ratio best
fail=0
while read -r name method path body; do
    lua=$tmp/$name.lua
    if [ "$body" = - ]; then
        printf 'wrk.method = "%s"\n' "$method" >"$lua"
        size=$(curl -s -o /dev/null -w '%{size_download}' "$base$path")
    else
        printf '%s' "$body" >"$tmp/$name.json"
        {
            printf 'wrk.method = "%s"\n' "$method"
            printf 'wrk.headers["Content-Type"] = "application/json"\n'
            printf 'wrk.body = [==[%s]==]\n' "$body"
        } >"$lua"
        size=$(curl -s -o /dev/null -w '%{size_download}' -X "$method" \
            -H 'Content-Type: application/json' --data-binary @"$tmp/$name.json" "$base$path")
    fi
    rm -f "$tmp/fport"
    "$FLOOR" "$size" "$tmp/fport" 2>"$tmp/floor.log" &
    floor_pid=$!
    fport=$(wait_port "$tmp/fport" "$floor_pid")
    if [ -z "$fport" ]; then
        echo "floor.sh: the floor server did not start" >&2
        cat "$tmp/floor.log" >&2
        exit 1
    fi
    : >"$tmp/f.rps"
    : >"$tmp/f.p99"
    : >"$tmp/d.rps"
    : >"$tmp/d.p99"
    : >"$tmp/f.cpu"
    : >"$tmp/d.cpu"
    r=0
    while [ "$r" -lt "$REPS" ]; do
        set -- $(run_wrk "http://127.0.0.1:$fport$path" "$lua" "$floor_pid")
        echo "$1" >>"$tmp/f.rps"
        echo "$2" >>"$tmp/f.p99"
        echo "$4" >>"$tmp/f.cpu"
        set -- $(run_wrk "$base$path" "$lua" "$daemon_pid")
        echo "$1" >>"$tmp/d.rps"
        echo "$2" >>"$tmp/d.p99"
        echo "$4" >>"$tmp/d.cpu"
        if [ "$3" -ne 0 ]; then
            echo "floor.sh: dpbudgetd answered $3 non-2xx to $method $path" >&2
            fail=1
        fi
        r=$((r + 1))
    done
    stop "$floor_pid"
    floor_pid=
    frps=$(median <"$tmp/f.rps")
    drps=$(median <"$tmp/d.rps")
    fbest=$(best <"$tmp/f.rps")
    dbest=$(best <"$tmp/d.rps")
    printf '   %-16s %6s %12.0f %8.2fms %12.0f %8.2fms %5.0f%% %5.0f%%\n' "$name" "$size" "$frps" \
        "$(median <"$tmp/f.p99")" "$drps" "$(median <"$tmp/d.p99")" \
        "$(awk -v d="$drps" -v f="$frps" 'BEGIN { print (f > 0 ? 100 * d / f : 0) }')" \
        "$(awk -v d="$dbest" -v f="$fbest" 'BEGIN { print (f > 0 ? 100 * d / f : 0) }')"
    fcpu=$(median <"$tmp/f.cpu")
    dcpu=$(median <"$tmp/d.cpu")
    echo "      runs (req/s): floor $(tr '\n' ' ' <"$tmp/f.rps")| dpbudgetd $(tr '\n' ' ' <"$tmp/d.rps")"
    echo "      server CPU per request: floor $fcpu us, dpbudgetd $dcpu us (floor/dpbudgetd" \
        "$(awk -v d="$dcpu" -v f="$fcpu" 'BEGIN { printf "%.0f%%", (d > 0 ? 100 * f / d : 0) }'))"
done <"$tmp/cases"
echo "   targets: delta_thm41 >= 60% with p99 < 5 ms; client_get and summary >= 50%"
echo "   (the load generator shares the machine's CPUs with the server: both sides alike)"
exit "$fail"
