#!/usr/bin/env python3
"""bench_receipts.py DPBUDGETD - the cost of signed receipts (issue 36): durable one-step
rounds of 100 participants per second, against a daemon without --signing-key and one with
it (every answer then carries an Ed25519-signed receipt over RFC 8785 bytes), in the same
run. Each daemon: a fresh data directory, 1,000 clients, THREADS keep-alive connections
sending rounds with fresh round ids (100 participants drawn from the clients, a Gaussian
event with a large noise so nobody runs out). The two daemons are loaded in turns, WINDOWS
windows of SECONDS each (without first in even windows, with first in odd ones), and each
side's figure is its median window, so that a slow moment of a shared machine does not land
on one side only. Printed too: the median of the windows' own ratios (each window's two
runs back to back, so both meet the same load), and the daemon's CPU time per round (all
the rounds it answered in the window, warm-up included, against its CPU time then), which
the machine's other load disturbs far less than rounds per second. Target: with receipts
at least 90% of without.

Prints figures only; timings are never asserted. Exits 1 if an answer is not 200, or
(with the key) carries no receipt.
Environment: BENCH_RECEIPTS_SECONDS (default 2), BENCH_RECEIPTS_WINDOWS (default 6),
BENCH_RECEIPTS_THREADS (default 8)."""
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))

import support  # noqa: E402

CLIENTS = 1000
PARTICIPANTS = 100
EVENT = {"class_name": "GaussianDpEvent", "noise_multiplier": 1000.0}


def register(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"clients": [{"id": "c%04d" % i, "budget": {"epsilon": 1e6, "delta": 1e-5}}
                                   for i in range(CLIENTS)]})
    conn.request("POST", "/v1/clients:batch", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    conn.close()
    if r.status != 200:
        sys.exit("bench_receipts: registration answered %d" % r.status)


def load(port, tag, seconds, threads, want_receipt):
    """Rounds answered per second over seconds (after a 0.5 s warm-up), and all the rounds
    answered (the warm-up's too)."""
    counts = [0] * threads
    total = [0] * threads
    errors = []
    start = time.monotonic()
    t0, t1 = start + 0.5, start + 0.5 + seconds

    def worker(k):
        rnd = random.Random(k)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        n = 0
        while True:
            now = time.monotonic()
            if now >= t1:
                break
            ids = rnd.sample(range(CLIENTS), PARTICIPANTS)
            body = json.dumps({"round_id": "%s-%d-%d" % (tag, k, n), "event": EVENT,
                               "participants": ["c%04d" % i for i in ids]})
            conn.request("POST", "/v1/rounds", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            n += 1
            total[k] += 1
            if r.status != 200 or (want_receipt and b'"receipt"' not in data):
                errors.append("%d %s" % (r.status, data[:200]))
                break
            if now >= t0:
                counts[k] += 1
        conn.close()

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        sys.exit("bench_receipts: %s" % errors[0])
    return sum(counts) / seconds, sum(total)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bench_receipts.py DPBUDGETD")
    support.DAEMON = os.path.abspath(sys.argv[1])
    seconds = float(os.environ.get("BENCH_RECEIPTS_SECONDS", "2"))
    windows = int(os.environ.get("BENCH_RECEIPTS_WINDOWS", "6"))
    threads = int(os.environ.get("BENCH_RECEIPTS_THREADS", "8"))
    tmp = tempfile.mkdtemp(prefix="dpb-bench-receipts-")
    key = os.path.join(tmp, "log.key")
    subprocess.run([support.DAEMON, "keygen", key], check=True, stdout=subprocess.DEVNULL)
    print("== signed receipts: durable rounds of %d participants, %d connections; two daemons "
          "(fresh data directories, without and with --signing-key) loaded in turns, %d "
          "windows of %g s each" % (PARTICIPANTS, threads, windows, seconds))
    daemons = {}
    rates = {False: [], True: []}
    cpus = {False: [], True: []}
    try:
        for signed in (False, True):
            daemons[signed] = support.Daemon(*(["--signing-key", key] if signed else []))
            register(daemons[signed].port)
        for w in range(windows):
            for signed in ((False, True) if w % 2 == 0 else (True, False)):
                d = daemons[signed]
                c0 = d.cpu_seconds()
                rate, answered = load(d.port, "w%d" % w, seconds, threads, signed)
                c1 = d.cpu_seconds()
                rates[signed].append(rate)
                if c0 is not None and c1 is not None and answered > 0:
                    cpus[signed].append((c1 - c0) / answered * 1e6)
    finally:
        for d in daemons.values():
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    for signed in (False, True):
        print("   %-14s median %6.0f rounds/s (windows: %s)%s" % (
            "with receipts" if signed else "without", med[signed],
            " ".join("%.0f" % r for r in rates[signed]),
            "; daemon CPU %.0f us per round" % statistics.median(cpus[signed])
            if cpus[signed] else ""))
    ratio = med[True] / med[False] if med[False] else 0.0
    pairs = [a / b for a, b in zip(rates[True], rates[False]) if b > 0]
    line = "   with / without: %.1f%% of the rounds/s (target >= 90%%)" % (100.0 * ratio)
    if pairs:
        line += "; median of the windows' ratios %.1f%%" % (100.0 * statistics.median(pairs))
    if cpus[False] and cpus[True]:
        line += "; CPU per round %.1f%% of with's" % (
            100.0 * statistics.median(cpus[False]) / statistics.median(cpus[True]))
    print(line)


if __name__ == "__main__":
    main()
