#!/usr/bin/env python3
"""A federated training loop that keeps its clients' privacy budgets in dpbudget.

    python3 examples/federated_loop.py --url http://127.0.0.1:8080 \
        --clients 1000 --rounds 200 --per-round 100 --dropout 0.1

It registers the whole population in bulk and the round's event once by name, then asks
which clients can afford the round and how many more such rounds each can afford
(eligibility: charges nothing). Each round it
  1. samples the cohort from the clients known to afford a round (the eligibility
     answer, less the rounds charged since; asked again every --refresh-every rounds and
     whenever too few are left),
  2. reserves the round's budget for the cohort (two-phase round: the reservation counts
     as spent for every other round, so concurrent coordinators never overspend),
  3. "trains" (here: each client drops out with probability --dropout),
  4. commits the round with the clients that reported: they are charged, the dropouts'
     reservations are released (a dropout spends nothing).
The daemon decides every admission: counts gone stale (another coordinator spent the
budget meanwhile) cost a refused reservation and a fresh eligibility query, never an
overspend. At the end it prints a report. With --check it also audits the ledger: every
client was charged exactly for the rounds it reported in, and eligibility agrees with what
a round then admits.

The privacy event of one round for a participating client is its local DP-SGD:
--steps steps of Poisson sampling at --q with noise multiplier --sigma.
"""
import argparse
import json
import os
import random
import sys
import time

try:
    import dpbudget
except ImportError:  # run from a checkout: the package is in clients/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "clients", "python"))
    import dpbudget

from dpbudget import events


def run(client, *, clients=1000, rounds=200, per_round=100, dropout=0.1, epsilon=8.0,
        delta=1e-5, sigma=1.0, q=0.01, steps=50, seed=1, run_id=None, refresh_every=50,
        check=False, log=None):
    """The loop; returns a report (a dict). `client` is a dpbudget.Client. The eligibility
    query is asked every `refresh_every` rounds (1: every round) and whenever fewer than
    `per_round` clients are known to afford a round."""
    rng = random.Random(seed)
    run_id = run_id or "fl-%d-%d" % (os.getpid(), int(time.time() * 1000))
    pool = "%s" % run_id
    ids = ["%s-c%05d" % (run_id, i) for i in range(clients)]
    t0 = time.perf_counter()
    req0, retries0 = client.stats["requests"], client.stats["retries"]

    # 1. the population, in bulk (idempotent: re-running registers nothing twice)
    reg = client.register_clients([{"id": cid, "epsilon": epsilon, "delta": delta,
                                    "labels": {"pool": pool}} for cid in ids])
    # 2. the round's event, once by name; rounds and eligibility then name it
    event_name = "%s-dpsgd" % run_id
    event = events.dp_sgd(q, sigma, steps)
    try:
        client.put_event(event_name, event)
        ev = {"event_name": event_name}
    except dpbudget.NotFound:  # a daemon without named events: send the event itself
        ev = {"event": event}
    t_reg = time.perf_counter()

    reported_in = {cid: 0 for cid in ids}  # rounds each client reported in (= charged)
    afford = {}  # id -> further rounds it can afford: the last eligibility, less charges since
    queries = [0]

    def refresh():
        # who can afford this event now, and how many more rounds each (reservations held
        # count as spent); up to max_rounds (default 1000), beyond which the count is a floor
        el = client.eligibility(label="pool=" + pool, **ev)
        queries[0] += 1
        afford.clear()
        afford.update((e.id, e.affordable_rounds) for e in el.clients if e.eligible)

    done = admitted_total = reported_total = dropped_total = stale = 0
    stopped = None
    t = 0
    while t < rounds:
        fresh = refresh_every and t % refresh_every == 0 or not afford
        if fresh:
            refresh()  # also picks up budget changes and other coordinators' rounds
        candidates = [cid for cid, k in afford.items() if k > 0]
        if len(candidates) < per_round:
            if not fresh:
                refresh()
            candidates = [cid for cid, k in afford.items() if k > 0]
            if len(candidates) < per_round:
                stopped = "round %d: only %d clients can afford a round, %d needed" % (
                    t, len(candidates), per_round)
                break
        cohort = rng.sample(candidates, per_round)
        round_id = "%s-r%05d-%d" % (run_id, t, stale)
        # reserve: all_or_nothing (the default): the cohort is admitted whole or not at all
        r = client.reserve(cohort, round_id=round_id, **ev)
        if r.refused:
            # the counts were stale (another coordinator spent meanwhile): nothing is held
            # under all_or_nothing; ask again and sample again
            stale += 1
            if stale > 3:
                raise RuntimeError("round %d: refused after fresh eligibility: %s" % (
                    t, [(x.client, x.reason) for x in r.refused[:5]]))
            afford.clear()
            continue
        # training: each admitted client reports its update, or drops out
        reported = [cid for cid in r.admitted_ids if rng.random() >= dropout]
        c = client.commit(round_id, reported)
        for cid in reported:
            reported_in[cid] += 1
            afford[cid] -= 1  # one round of this event charged
        done += 1
        t += 1
        admitted_total += len(r.admitted)
        reported_total += len(reported)
        dropped_total += len(r.admitted) - len(reported)
        if log and t % max(1, rounds // 10) == 0:
            log("round %d: %d candidates, %d admitted, %d reported (%s)" % (
                t, len(candidates), len(r.admitted), len(reported), c.state))
    t_end = time.perf_counter()

    summary = client.summary()
    report = {
        "run_id": run_id, "clients": clients, "rounds_asked": rounds, "rounds_done": done,
        "per_round": per_round, "dropout": dropout, "registered": {
            "created": reg.created, "updated": reg.updated, "unchanged": reg.unchanged,
            "conflicts": reg.conflicts},
        "admitted": admitted_total, "reported": reported_total, "dropped": dropped_total,
        "stopped": stopped, "registration_seconds": round(t_reg - t0, 4),
        "loop_seconds": round(t_end - t_reg, 4),
        "rounds_per_second": round(done / (t_end - t_reg), 1) if done and t_end > t_reg else None,
        "requests": client.stats["requests"] - req0,
        "retries": client.stats["retries"] - retries0,
        "event_by_name": "event_name" in ev, "eligibility_queries": queries[0],
        "stale_refusals": stale,
        "ledger": {"clients": summary.clients, "by_status": summary.by_status,
                   "rounds": summary.rounds},
    }
    if check:
        report["check"] = audit(client, ids, reported_in, ev, pool)
    return report


def audit(client, ids, reported_in, ev, pool):
    """The ledger agrees with the loop: each client charged for exactly the rounds it
    reported in (dropouts never; its record and its charge history), and eligibility agrees
    with what a round admits."""
    problems = []
    recs = {r.id: r for r in client.iter_clients(label="pool=" + pool)}
    for cid in ids:
        rec = recs.get(cid)
        if rec is None:
            problems.append("%s: not in the ledger" % cid)
        elif rec.rounds != reported_in[cid]:
            problems.append("%s: ledger %d rounds, reported in %d" % (cid, rec.rounds,
                                                                     reported_in[cid]))
    # the charge history of a few clients: the rounds they reported in, as charged
    for cid in ids[:5]:
        page = client.history(cid, limit=100)
        charged = sum(1 for x in page.charges if x.state == "charged")
        if page.complete and charged != reported_in[cid]:
            problems.append("%s: history shows %d charged rounds, reported in %d" % (
                cid, charged, reported_in[cid]))
    el = client.eligibility(label="pool=" + pool, max_rounds=1, **ev)
    yes = [e.id for e in el.clients if e.eligible]
    no = [e.id for e in el.clients if not e.eligible]
    # a dry run of one round each: the eligible are admitted, the others refused
    for cid in yes[:3] + no[:3]:
        r = client.charge([cid], dry_run=True, **ev)
        if (cid in r.admitted_ids) != (cid in yes):
            problems.append("%s: eligibility says %s, a round %s" % (
                cid, cid in yes, "admits" if r.admitted else "refuses"))
    return {"clients_checked": len(ids), "eligible_now": len(yes), "ineligible_now": len(no),
            "problems": problems}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("DPBUDGET_URL", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("DPBUDGET_TOKEN"))
    p.add_argument("--cafile", default=os.environ.get("DPBUDGET_CAFILE"))
    p.add_argument("--clients", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--per-round", type=int, default=100)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--epsilon", type=float, default=8.0, help="each client's budget epsilon")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--q", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--refresh-every", type=int, default=50,
                   help="ask eligibility every N rounds (1: every round; default 50)")
    p.add_argument("--run-id", help="prefix of the ids (default: fresh)")
    p.add_argument("--check", action="store_true", help="audit the ledger at the end")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    a = p.parse_args(argv)
    with dpbudget.Client(a.url, a.token, cafile=a.cafile) as c:
        rep = run(c, clients=a.clients, rounds=a.rounds, per_round=a.per_round,
                  dropout=a.dropout, epsilon=a.epsilon, delta=a.delta, sigma=a.sigma, q=a.q,
                  steps=a.steps, seed=a.seed, run_id=a.run_id,
                  refresh_every=a.refresh_every, check=a.check,
                  log=None if a.json else lambda s: print(s, file=sys.stderr))
    if a.json:
        print(json.dumps(rep))
    else:
        print("%d clients registered in %.2f s; %d of %d rounds in %.2f s (%s rounds/s)" % (
            rep["clients"], rep["registration_seconds"], rep["rounds_done"], rep["rounds_asked"],
            rep["loop_seconds"], rep["rounds_per_second"]))
        print("%d admitted, %d reported (charged), %d dropped out (released)" % (
            rep["admitted"], rep["reported"], rep["dropped"]))
        if rep["stopped"]:
            print("stopped: " + rep["stopped"])
        print("ledger: %s" % json.dumps(rep["ledger"]))
        if a.check:
            print("check: %d problems" % len(rep["check"]["problems"]))
            for x in rep["check"]["problems"][:20]:
                print("  " + x)
    return 1 if a.check and rep["check"]["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
