#!/usr/bin/env python3
"""bench_sdk.py DPBUDGETD - the Python client library end to end against a fresh daemon
(its own ephemeral port and temporary data directory, request log off):

- the example federated loop (examples/federated_loop.py) at 1,000 clients x 200 rounds of
  100 with 10% dropouts: registration in bulk, then per round sampling from the clients
  known to afford a round, reserve and commit, with an eligibility query every 50 rounds;
  three runs and their median in rounds per second (target: >= 300), then one run asking
  eligibility every round;
- bulk registration of 100,000 clients through the library (register_clients);
- eligibility of 10,000 candidates through the library, as a yes/no (max_rounds 1) and
  with the affordable rounds counted up to 1000 (median and worst of 10 calls, client
  included: requests, the daemon's work, and decoding 10,000 typed entries).

Prints figures only; timings are never asserted. Exits 1 if a call fails.
Environment: BENCH_SDK_ROUNDS, BENCH_SDK_CLIENTS override the loop's sizes."""
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import dpbudget  # noqa: E402
import federated_loop  # noqa: E402
import support  # noqa: E402


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bench_sdk.py DPBUDGETD")
    support.DAEMON = os.path.abspath(sys.argv[1])
    rounds = int(os.environ.get("BENCH_SDK_ROUNDS", "200"))
    clients = int(os.environ.get("BENCH_SDK_CLIENTS", "1000"))
    print("== Python client library (clients/python) against dpbudgetd, Python %s" %
          sys.version.split()[0])
    d = support.Daemon()
    try:
        c = dpbudget.Client(d.url)
        rates = []
        for k in range(3):
            cpu0, d0 = time.process_time(), d.cpu_seconds()
            rep = federated_loop.run(c, clients=clients, rounds=rounds, per_round=100,
                                     dropout=0.1, epsilon=8.0, delta=1e-5,
                                     run_id="bench%d" % k, check=False)
            cpu, d1 = time.process_time() - cpu0, d.cpu_seconds()
            dcpu = d1 - d0 if d0 is not None and d1 is not None else float("nan")
            if rep["rounds_done"] != rounds:
                print("bench_sdk: the loop stopped early: %s" % rep["stopped"])
                return 1
            rates.append(rep["rounds_per_second"])
            print("example loop %d: %d clients x %d rounds of 100, 10%% dropouts: %.1f rounds/s "
                  "(%.2f s; %d eligibility queries, %d requests, %d retries; CPU: the client "
                  "%.2f s, the daemon %.2f s (registration included); registration %.3f s)" % (
                      k + 1, clients, rounds, rep["rounds_per_second"], rep["loop_seconds"],
                      rep["eligibility_queries"], rep["requests"], rep["retries"], cpu, dcpu,
                      rep["registration_seconds"]))
        med = statistics.median(rates)
        print("   median of 3: %.1f rounds/s; target >= 300 rounds/s: %s (load average %s)" % (
            med, "met" if med >= 300 else "NOT met", " ".join(
                "%.2f" % x for x in os.getloadavg())))
        c1 = dpbudget.Client(d.url)
        rep = federated_loop.run(c1, clients=clients, rounds=rounds, per_round=100, dropout=0.1,
                                 run_id="bench-every", refresh_every=1)
        print("   the same asking eligibility every round: %.1f rounds/s" %
              rep["rounds_per_second"])
        c1.close()
        items = [{"id": "bulk-%06d" % i, "epsilon": 8.0, "delta": 1e-5,
                  "labels": {"pool": "bulk"}} for i in range(100000)]
        t0 = time.perf_counter()
        r = c.register_clients(items)
        t1 = time.perf_counter()
        print("bulk registration: 100,000 clients in %.2f s (%d requests of <= %d bytes; "
              "%d created)" % (t1 - t0, len(r.results) and len(list(c._chunks(
                  items, 10000, "clients"))), c.max_body, r.created))
        cand = ["bulk-%06d" % i for i in range(10000)]
        ev = dpbudget.events.dp_sgd(0.01, 1.0, 50)
        c.put_event("bench-eligibility", ev)
        for mr in (1, 1000):
            times, cpus = [], []
            for _ in range(10):
                t0, p0 = time.perf_counter(), time.process_time()
                el = c.eligibility(cand, event_name="bench-eligibility", max_rounds=mr)
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - p0)
                if el.eligible != 10000:
                    print("bench_sdk: %d of 10,000 eligible" % el.eligible)
                    return 1
            print("eligibility of 10,000 candidates through the library, max_rounds %d: median "
                  "%.1f ms, worst %.1f ms (the client's CPU %.1f ms: encoding, decoding, typed "
                  "entries; %d requests: ids split to fit --max-body)" % (
                      mr, statistics.median(times) * 1e3, max(times) * 1e3,
                      statistics.median(cpus) * 1e3,
                      len(list(c._chunks(cand, 100000, "clients", {"event_name": "x"})))))
        c.close()
    except dpbudget.DpbudgetError as e:
        print("bench_sdk: %s" % e)
        return 1
    finally:
        d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
