#!/usr/bin/env python3
"""bench_flower.py DPBUDGETD - rounds per second of a Flower run with and without the ledger
(run with clients/python/.venv/bin/python: flwr from clients/python/requirements-dev.txt).

tests/flower/budget_app.py in Flower's simulation engine without Ray (inprocess.py): 30
nodes, BENCH_FLOWER_ROUNDS rounds (default 40) of 8 clients of Flower's
DifferentialPrivacyClientSideFixedClipping around FedAvg, with its dropouts; once wrapped by
dpbudget.flower.Budgeted against a fresh daemon (eligibility, reserve, commit or the weaker
release's charge, every round), once without the wrapper. Three runs each, the median of
the ServerApp's strategy.start() time (process start and Flower's import not counted).
Prints figures only; timings are never asserted."""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))

import dpbudget  # noqa: E402
import support  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_FLOWER_ROUNDS", "40"))
NODES = 30


def one(url, run, ledger, tmp):
    stats = os.path.join(tmp, "stats-%s.json" % run)
    env = dict(os.environ, FL_URL=url or "", FL_RUN=run, FL_NODES=str(NODES),
               FL_ROUNDS=str(ROUNDS), FL_K="8", FL_Z="6.0", FL_LEDGER="1" if ledger else "0",
               FL_STATS=stats)
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "flower", "budget_app.py")],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   timeout=600)
    with open(stats) as f:
        s = json.load(f)
    return s["rounds"] / s["seconds"]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bench_flower.py DPBUDGETD")
    support.DAEMON = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="dpb-bench-flower-")
    d = support.Daemon()
    try:
        c = dpbudget.Client(d.url)
        with_ledger, without = [], []
        for i in range(3):
            run = "bf%d" % i
            c.register_clients([{"id": "%s-c%d" % (run, p), "epsilon": 1e6, "delta": 1e-5}
                                for p in range(NODES)])
            with_ledger.append(one(d.url, run, True, tmp))
            without.append(one(None, run, False, tmp))
        c.close()
    finally:
        d.stop()
    print("flower: %d nodes, %d rounds of 8: %.1f rounds/s with the ledger, %.1f without "
          "(median of 3; runs %s and %s)" % (
              NODES, ROUNDS, statistics.median(with_ledger), statistics.median(without),
              ", ".join("%.1f" % x for x in with_ledger), ", ".join("%.1f" % x for x in without)))


if __name__ == "__main__":
    sys.exit(main())
