#!/usr/bin/env python3
"""A federated training loop that keeps its clients' privacy budgets in dpbudget.

    python3 examples/federated_loop.py --url http://127.0.0.1:8080 \
        --clients 1000 --rounds 200 --per-round 100 --dropout 0.1

Each round it
  1. asks which clients can afford the round now (eligibility: charges nothing),
  2. samples the cohort from those,
  3. reserves the round's budget for the cohort (two-phase round: the reservation counts
     as spent for every other round, so concurrent coordinators never overspend),
  4. "trains" (here: each client drops out with probability --dropout),
  5. commits the round with the clients that reported: they are charged, the dropouts'
     reservations are released (a dropout spends nothing).
Before the first round it registers the whole population in bulk and the round's event
once by name; at the end it prints a report. With --check it also audits the ledger: every
client was charged exactly for the rounds it reported in, and every cohort the
eligibility query offered was admitted whole.

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
        delta=1e-5, sigma=1.0, q=0.01, steps=50, seed=1, run_id=None, check=False, log=None):
    """The loop; returns a report (a dict). `client` is a dpbudget.Client."""
    rng = random.Random(seed)
    run_id = run_id or "fl-%d-%d" % (os.getpid(), int(time.time() * 1000))
    pool = "%s" % run_id
    ids = ["%s-c%05d" % (run_id, i) for i in range(clients)]
    t0 = time.perf_counter()

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
    done = admitted_total = reported_total = dropped_total = 0
    stopped = None
    for t in range(rounds):
        # eligibility: who can afford one more round of this event (max_rounds=1: a yes/no)
        el = client.eligibility(label="pool=" + pool, max_rounds=1, **ev)
        eligible = el.eligible_ids
        if len(eligible) < per_round:
            stopped = "round %d: only %d clients can afford a round, %d needed" % (
                t, len(eligible), per_round)
            break
        cohort = rng.sample(eligible, per_round)
        round_id = "%s-r%05d" % (run_id, t)
        # reserve: all_or_nothing (the default): the cohort is admitted whole or not at all
        r = client.reserve(cohort, round_id=round_id, **ev)
        if r.refused:
            # cannot happen while eligibility and admission agree (one coordinator)
            client.release(round_id)
            raise RuntimeError("round %s: eligible clients refused: %s" % (
                round_id, [(x.client, x.reason) for x in r.refused[:5]]))
        # training: each admitted client reports its update, or drops out
        reported = [cid for cid in r.admitted_ids if rng.random() >= dropout]
        c = client.commit(round_id, reported)
        for cid in reported:
            reported_in[cid] += 1
        done += 1
        admitted_total += len(r.admitted)
        reported_total += len(reported)
        dropped_total += len(r.admitted) - len(reported)
        if log and (t + 1) % max(1, rounds // 10) == 0:
            log("round %d: %d eligible, %d admitted, %d reported (state %s)" % (
                t + 1, len(eligible), len(r.admitted), len(reported), c.state))
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
        "requests": client.stats["requests"], "retries": client.stats["retries"],
        "event_by_name": "event_name" in ev,
        "ledger": {"clients": summary.clients, "by_status": summary.by_status,
                   "rounds": summary.rounds},
    }
    if check:
        report["check"] = audit(client, ids, reported_in, ev, pool)
    return report


def audit(client, ids, reported_in, ev, pool):
    """The ledger agrees with the loop: each client charged for exactly the rounds it
    reported in (dropouts never), and eligibility agrees with what a round admits."""
    problems = []
    recs = {r.id: r for r in client.iter_clients(label="pool=" + pool)}
    for cid in ids:
        rec = recs.get(cid)
        if rec is None:
            problems.append("%s: not in the ledger" % cid)
        elif rec.rounds != reported_in[cid]:
            problems.append("%s: ledger %d rounds, reported in %d" % (cid, rec.rounds,
                                                                     reported_in[cid]))
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
    p.add_argument("--run-id", help="prefix of the ids (default: fresh)")
    p.add_argument("--check", action="store_true", help="audit the ledger at the end")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    a = p.parse_args(argv)
    with dpbudget.Client(a.url, a.token, cafile=a.cafile) as c:
        rep = run(c, clients=a.clients, rounds=a.rounds, per_round=a.per_round,
                  dropout=a.dropout, epsilon=a.epsilon, delta=a.delta, sigma=a.sigma, q=a.q,
                  steps=a.steps, seed=a.seed, run_id=a.run_id, check=a.check,
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
