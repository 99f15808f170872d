#!/usr/bin/env python3
"""dp_accounting_diff.py DPBUDGETD [--cases N] [--seed S] - dp_accounting (from PyPI, pinned in
clients/python/requirements-dev.txt) as a live oracle for the daemon.

Random compositions of the event classes both sides take (Gaussian, Laplace, randomized
response, Poisson-sampled Gaussian and Laplace, self-composed and composed trees, both
relations) are put to a fresh daemon over HTTP and to dp_accounting, for epsilon at two
deltas and delta at three epsilons. The same seed gives the same cases.

Two references per case:
- the floor: dp_accounting's privacy-loss distribution built with pessimistic_estimate=False
  (an optimistic discretisation: at most the exact value). An answer of the daemon below the
  floor (beyond its round-off: 1e-9 relative, and 1e-12 absolute in delta, the FFT
  composition's noise floor) is optimistic and FAILS the test.
- the peer: dp_accounting's accountant of the same name (RdpAccountant, PLDAccountant). An
  answer below the peer by more than the pair's round-off (RDP 1e-9 relative; PLD 1e-3
  relative or 1e-12 absolute: two pessimistic grids) is listed with the reason the daemon
  is tighter there (and it has passed the floor); one above it by more than 1% is listed with
  the reason for its class. Only the floor fails.

Conventions mapped: the daemon's replace_one doubles an unsampled Gaussian's or Laplace's
sensitivity (openapi.yaml, Relation), so dp_accounting gets sensitivity 2 there; dp_accounting
0.6.0's PLDAccountant ignores the count of a SelfComposedDpEvent around randomized response
(it answers the single mechanism's epsilon), so its events are composed one by one.
Run by make test with 24 cases, by make test-slow with 300. Closes with
"oracle: N passed, M failed".
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request

import dp_accounting as dpa
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant

REL = {
    "add_or_remove_one": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dpa.NeighboringRelation.REPLACE_ONE,
}
DELTAS = [1e-5, 1e-7]
EPSILONS = [0.5, 1.0, 3.0]
TOL = {"rdp": (1e-9, 0.0), "pld": (1e-3, 1e-12)}


def leaf(rng, acct, rel):
    """One random leaf both sides take, as a spec tuple."""
    kinds = ["gauss", "sg"]
    if rel == "add_or_remove_one":  # dp_accounting takes Laplace under this relation only
        kinds.append("laplace")
    if acct == "pld" and rel == "add_or_remove_one":
        kinds.append("sl")
    if rel == "replace_one":
        kinds.append("rr")
    k = rng.choice(kinds)
    if k == "gauss":
        return ("gauss", round(rng.uniform(0.5, 8.0), 3))
    if k == "laplace":
        return ("laplace", round(rng.uniform(0.5, 20.0), 3))
    if k == "rr":
        return ("rr", round(rng.uniform(0.05, 0.95), 3), rng.choice([2, 3, 10]))
    q = round(10 ** rng.uniform(-3, -0.5), 5)
    if k == "sg":
        return ("sg", q, round(rng.uniform(0.6, 4.0), 3))
    return ("sl", q, round(rng.uniform(1.0, 10.0), 3))


def composition(rng, acct, rel):
    parts = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        x = leaf(rng, acct, rel)
        n = rng.choice([1, 10, 100, 1000] if x[0] in ("sg", "sl") else [1, 2, 5, 20])
        parts.append(("self", x, n) if n > 1 else x)
    return parts[0] if len(parts) == 1 else ("comp", parts)


def to_ours(x):
    k = x[0]
    if k == "gauss":
        return {"class_name": "GaussianDpEvent", "noise_multiplier": x[1]}
    if k == "laplace":
        return {"class_name": "LaplaceDpEvent", "noise_multiplier": x[1]}
    if k == "rr":
        return {"class_name": "RandomizedResponseDpEvent", "noise_parameter": x[1],
                "num_buckets": x[2]}
    if k in ("sg", "sl"):
        inner = to_ours(("gauss" if k == "sg" else "laplace", x[2]))
        return {"class_name": "PoissonSampledDpEvent", "sampling_probability": x[1],
                "event": inner}
    if k == "self":
        return {"class_name": "SelfComposedDpEvent", "count": x[2], "event": to_ours(x[1])}
    return {"class_name": "ComposedDpEvent", "events": [to_ours(y) for y in x[1]]}


def to_dpa(x, rel):
    """dp_accounting's event for the same mechanism (sensitivity 2 for the daemon's
    replace_one Gaussian and Laplace: the noise multiplier halves)."""
    k = x[0]
    half = 2.0 if rel == "replace_one" else 1.0
    if k == "gauss":
        return dpa.GaussianDpEvent(x[1] / half)
    if k == "laplace":
        return dpa.LaplaceDpEvent(x[1] / half)
    if k == "rr":
        return dpa.RandomizedResponseDpEvent(x[1], x[2])
    if k == "sg":
        return dpa.PoissonSampledDpEvent(x[1], dpa.GaussianDpEvent(x[2]))
    if k == "sl":
        return dpa.PoissonSampledDpEvent(x[1], dpa.LaplaceDpEvent(x[2]))
    if k == "self":
        if x[1][0] == "rr":  # 0.6.0 ignores this count: composed one by one instead
            return dpa.ComposedDpEvent([to_dpa(x[1], rel)] * x[2])
        return dpa.SelfComposedDpEvent(to_dpa(x[1], rel), x[2])
    return dpa.ComposedDpEvent([to_dpa(y, rel) for y in x[1]])


def to_floor(x, rel):
    """dp_accounting's optimistic privacy-loss distribution of x: at most the exact value
    (privacy buckets rounded down: connect-the-dots has no optimistic form)."""
    k = x[0]
    vdi = 1e-4
    sens = 2.0 if rel == "replace_one" else 1.0
    if k == "gauss":
        return pldlib.from_gaussian_mechanism(x[1], sensitivity=sens, pessimistic_estimate=False,
                                              value_discretization_interval=vdi, use_connect_dots=False)
    if k == "laplace":
        return pldlib.from_laplace_mechanism(x[1], sensitivity=sens, pessimistic_estimate=False,
                                             value_discretization_interval=vdi,
                                             use_connect_dots=False)
    if k == "rr":
        return pldlib.from_randomized_response(x[1], x[2], pessimistic_estimate=False,
                                               value_discretization_interval=vdi)
    if k == "sg":
        return pldlib.from_gaussian_mechanism(x[2], pessimistic_estimate=False,
                                              value_discretization_interval=vdi,
                                              sampling_prob=x[1], neighboring_relation=REL[rel],
                                              use_connect_dots=False)
    if k == "sl":
        return pldlib.from_laplace_mechanism(x[2], pessimistic_estimate=False,
                                             value_discretization_interval=vdi, sampling_prob=x[1],
                                             use_connect_dots=False)
    if k == "self":
        return to_floor(x[1], rel).self_compose(x[2])
    out = to_floor(x[1][0], rel)
    for y in x[1][1:]:
        out = out.compose(to_floor(y, rel))
    return out


def theirs(acct, rel, x):
    if acct == "rdp":
        a = rdp_privacy_accountant.RdpAccountant(neighboring_relation=REL[rel])
    else:
        a = pld_privacy_accountant.PLDAccountant(neighboring_relation=REL[rel],
                                                 value_discretization_interval=1e-4)
    a.compose(to_dpa(x, rel))
    return ([a.get_epsilon(d) for d in DELTAS], [a.get_delta(e) for e in EPSILONS])


def floor(rel, x):
    f = to_floor(x, rel)
    return ([f.get_epsilon_for_delta(d) for d in DELTAS],
            [f.get_delta_for_epsilon(e) for e in EPSILONS])


def num(v):
    return math.inf if v == "infinite" else float(v)


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def ours(url, acct, rel, ev):
    common = {"event": ev, "accountant": acct, "neighboring_relation": rel}
    s1, e = post(url, "/v1/epsilon", dict(common, deltas=DELTAS))
    s2, d = post(url, "/v1/delta", dict(common, epsilons=EPSILONS))
    if s1 != 200 or s2 != 200:
        return None, (s1, e if s1 != 200 else d)
    for r in (e, d):
        if r.get("guarantee") != "upper_bound" or r.get("accountant") != acct:
            return None, ("not an upper bound by " + acct, r.get("guarantee"), r.get("accountant"))
    return ([num(x["epsilon"]) for x in e["results"]], [num(x["delta"]) for x in d["results"]]), None


def reason_above(acct, rel, x):
    """Why the daemon may be above dp_accounting for this class (listed, not failed)."""
    text = repr(x)
    if acct == "rdp":
        if rel == "replace_one":
            return "rdp replace_one: the sampled Gaussian's replace-one RDP bound (docs/ACCOUNTING.md)"
        return "rdp: a different order set or conversion (listed for review)"
    if "'sl'" in text:
        return "pld: the sampled Laplace's pessimistic pair on the daemon's own grid"
    if "'sg'" in text and rel == "replace_one":
        return "pld replace_one: the sampled Gaussian through the add/remove pairs (docs/ACCOUNTING.md)"
    return ("pld: pessimistic discretisation and truncation carried through every composition "
            "(each component's grid rounded up, then composed)")


def reason_below(acct, x):
    """Why the daemon may be below dp_accounting's accountant of the same name while above
    the floor: where it is tighter, and why that holds."""
    text = repr(x)
    if acct == "rdp" and ("'laplace'" in text or "'rr'" in text):
        return "rdp: pure-DP parts composed at order infinity (their max divergences add)"
    if acct == "rdp":
        return ("rdp: the sampled Gaussian's RDP at fractional orders computed exactly "
                "(dp_accounting uses an upper bound there)")
    return "pld: a different pessimistic grid (both are upper bounds)"


def start(daemon, tmp):
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "log"), "w")
    p = subprocess.Popen([daemon, "--port", "0", "--port-file", port_file, "--data-dir",
                          os.path.join(tmp, "data"), "--compute-deadline", "120"],
                         stdout=log, stderr=log)
    for _ in range(1000):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, "http://127.0.0.1:%d" % int(open(port_file).read())
        time.sleep(0.01)
    p.kill()
    raise SystemExit("daemon did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("daemon")
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=20261129)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="dpb-oracle-")
    p, url = start(os.path.abspath(a.daemon), tmp)
    passed = failed = 0
    above, below = [], []
    try:
        for i in range(a.cases):
            acct = rng.choice(["rdp", "pld"])
            rel = rng.choice(["add_or_remove_one", "add_or_remove_one", "replace_one"])
            x = composition(rng, acct, rel)
            ev = to_ours(x)
            label = f"case {i} {acct} {rel} {json.dumps(ev)}"
            try:
                ref = theirs(acct, rel, x)
                low = floor(rel, x)
            except Exception as e:  # a composition dp_accounting refuses: nothing to compare
                print(f"skip {label}: dp_accounting refuses it ({type(e).__name__}: {e})")
                continue
            got, err = ours(url, acct, rel, ev)
            if got is None:
                print(f"FAIL {label}: the daemon refused what dp_accounting answers: {str(err)[:300]}")
                failed += 1
                continue
            rel_tol, abs_tol = TOL[acct]
            bad = []
            for kind, xs, ys, ls, qs in (("epsilon", got[0], ref[0], low[0], DELTAS),
                                         ("delta", got[1], ref[1], low[1], EPSILONS)):
                for v, y, lo, q in zip(xs, ys, ls, qs):
                    if v < lo * (1 - 1e-9) - 1e-12:
                        bad.append(f"{kind} at {q}: {v!r} below the floor {lo!r} (optimistic)")
                        continue
                    if math.isinf(y):
                        continue
                    if v < y * (1 - rel_tol) - abs_tol:
                        below.append((label, kind, q, v, y, reason_below(acct, x)))
                    elif y > 0 and v > y * 1.01 and v - y > 1e-12:
                        above.append((label, kind, q, v, y, reason_above(acct, rel, x)))
            if bad:
                failed += 1
                print(f"FAIL {label}: " + "; ".join(bad))
            else:
                passed += 1
                print(f"ok {label}")
    finally:
        p.terminate()
        p.wait(timeout=30)
    for title, rows in (("below dp_accounting's accountant (above the floor)", below),
                        ("above dp_accounting's accountant by more than 1%", above)):
        if rows:
            print(f"{len(rows)} answers {title}:")
        for label, kind, q, v, y, why in rows:
            print(f"  {label[:150]} {kind} at {q}: {v:.6g} vs {y:.6g} "
                  f"({100 * (v / y - 1):+.2f}%): {why}")
    print(f"oracle: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
