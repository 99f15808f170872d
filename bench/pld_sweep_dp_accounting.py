"""pld_sweep_dp_accounting.py - the reference side of bench_pld_sweep: times Google's
dp_accounting PLDAccountant on the scenarios the C bench sends, one per line on stdin:

    id relation delta grid k  kind q sigma count  (k times)

relation: "add" or "replace"; kind: "g" (Gaussian) or "l" (Laplace); q = 1: not sampled.
Answers one line per scenario on stdout: "id ok epsilon seconds" or "id err message".
dp_accounting is imported from the checkout at DP_ACCOUNTING_PATH (its python/dp_accounting
directory); it is never part of this repository.

usage: python3 bench/pld_sweep_dp_accounting.py   (stdin/stdout, driven by bench_pld_sweep)
"""
import os
import sys
import time

sys.path.insert(0, os.environ.get("DP_ACCOUNTING_PATH", "."))
from dp_accounting import dp_event as E  # noqa: E402
from dp_accounting import privacy_accountant as PA  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant as P  # noqa: E402


def leaf(kind, q, sigma, count):
    ev = E.GaussianDpEvent(sigma) if kind == "g" else E.LaplaceDpEvent(sigma)
    if q < 1.0:
        ev = E.PoissonSampledDpEvent(q, ev)
    return E.SelfComposedDpEvent(ev, count) if count > 1 else ev


def main():
    print("ready", flush=True)
    for line in sys.stdin:
        f = line.split()
        if not f:
            continue
        sid, rel, delta, grid, k = f[0], f[1], float(f[2]), float(f[3]), int(f[4])
        events = []
        for i in range(k):
            kind, q, sigma, count = f[5 + 4 * i : 9 + 4 * i]
            events.append(leaf(kind, float(q), float(sigma), int(count)))
        relation = (
            PA.NeighboringRelation.REPLACE_ONE
            if rel == "replace"
            else PA.NeighboringRelation.ADD_OR_REMOVE_ONE
        )
        try:
            t0 = time.perf_counter()
            acc = P.PLDAccountant(relation, value_discretization_interval=grid)
            acc.compose(E.ComposedDpEvent(events))
            eps = acc.get_epsilon(delta)
            dt = time.perf_counter() - t0
            print("%s ok %.17g %.6f" % (sid, eps, dt), flush=True)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            msg = " ".join(str(e).split())[:200]
            print("%s err %s: %s" % (sid, type(e).__name__, msg), flush=True)


if __name__ == "__main__":
    main()
