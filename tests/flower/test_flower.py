#!/usr/bin/env python3
"""test_flower.py DPBUDGETD - Flower end to end (the venv of scripts/deps.sh: flwr and
dp_accounting at the versions of clients/python/requirements-dev.txt).

A real daemon; 30 Flower nodes (Flower's simulation engine, ClientApps on threads:
inprocess.py); 12 rounds of 8 clients of Flower's DifferentialPrivacyClientSideFixedClipping
(noise multiplier 6) around FedAvg, wrapped by dpbudget.flower.Budgeted. Clients 2 and 3
always fail, others fail now and then (budget_app.flaky); client 1's budget is below one
round, clients 4-9 afford two or three rounds. The ServerApp is SIGKILLed twice: just before
the commit of round 4 (reserved, not committed) and just after the commit of round 7
(committed, the aggregate never returned), and restarted with the same run id each time.

The oracle is independent of the wrapper: what each ClientApp was sent and answered (its own
log), the kill schedule, and dp_accounting's RdpAccountant. Checked:
- each client's spend in the ledger equals dp_accounting's epsilon of its charged rounds, a
  round whose aggregate had m of the 8 replies being GaussianDpEvent(6*m/16) (the release's
  noise multiplier: noise 6*C/8 on the average of m updates clipped to C, which one client
  moves by up to 2C/m when removed or replaced);
- the clients charged in a round are among those that replied in the attempt that
  released it: dropouts spend nothing; a reporter left out could not afford the round;
- no client was ever sent a round it could not afford (client 1 never; the others only
  while dp_accounting says the nominal round fits their budget);
- no round is charged twice: the rounds done before a restart are never sent again, round 4
  is run again with its reserved cohort, each round id appears once in a history.
Then examples/flower_coordinator.py as a ServerApp (its lines counted: under 30), and plain
FedAvg wrapped with a given event: each reporting client charged that event.
Prints "flower: N passed, M failed"."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "tests"))

import support  # noqa: E402

import dpbudget  # noqa: E402

RUN = "fl"
NODES, ROUNDS, K, Z = 30, 12, 8, 6.0
DELTA = 1e-5
KILLS = ["before:4", "after:7", None]  # attempt 1, 2, 3
# the rounds whose aggregate each attempt released (and charged): up to the kill
CHARGED_BY = {1: range(1, 4), 2: range(4, 8), 3: range(8, ROUNDS + 1)}
ALWAYS_DROP = {2, 3}
DEADLINE_S = 120
# The ledger's rdp spend and dp_accounting's RdpAccountant (its default orders) should agree
# but for float round-off, the ledger never below (it rounds up). Measured: BELOW/ABOVE.
BELOW = 1e-12
ABOVE = 1e-9


def budget_of(pid):
    if pid == 1:
        return 0.5  # below one round (1.386 at delta 1e-5)
    if 4 <= pid <= 9:
        return 2.0  # two rounds at most
    return 30.0


passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + what)


def epsilon_of(multipliers):
    """dp_accounting's epsilon at DELTA of a composition of Gaussians."""
    from dp_accounting import dp_event as de
    from dp_accounting.rdp import rdp_privacy_accountant as rdp
    if not multipliers:
        return 0.0
    acc = rdp.RdpAccountant()
    for z in multipliers:
        acc.compose(de.GaussianDpEvent(z))
    return acc.get_epsilon(DELTA)


def run_attempt(url, attempt, kill, logpath, tmp):
    env = dict(os.environ, FL_URL=url, FL_RUN=RUN, FL_NODES=str(NODES),
               FL_ROUNDS=str(ROUNDS), FL_K=str(K), FL_Z=str(Z), FL_LOG=logpath,
               FL_ATTEMPT=str(attempt), FL_KILL=kill or "")
    out = os.path.join(tmp, "attempt%d.log" % attempt)
    with open(out, "w") as f:
        p = subprocess.run([sys.executable, os.path.join(HERE, "budget_app.py")], env=env,
                           stdout=f, stderr=subprocess.STDOUT, timeout=90)
    return p.returncode, out


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: test_flower.py DPBUDGETD")
    support.DAEMON = os.path.abspath(sys.argv[1])
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="dpb-flower-")
    logpath = os.path.join(tmp, "clients.jsonl")
    d = support.Daemon()
    try:
        c = dpbudget.Client(d.url)
        c.register_clients([{"id": "%s-c%d" % (RUN, p), "epsilon": budget_of(p),
                             "delta": DELTA, "accounting": "rdp"} for p in range(NODES)])
        for attempt, kill in enumerate(KILLS, 1):
            rc, out = run_attempt(d.url, attempt, kill, logpath, tmp)
            want = -signal.SIGKILL if kill else 0
            check(rc == want, "attempt %d ended %s, not %s (see %s)" % (attempt, rc, want, out))
            if rc != want:
                with open(out) as f:
                    print(f.read()[-3000:])
        for part in (lambda: verify(c, logpath), lambda: example(c, d.url, tmp),
                     lambda: plain_fedavg(c, d.url, tmp)):
            try:
                part()
            except Exception as e:  # a failure, counted, and the other parts still run
                check(False, "%s: %r" % (type(e).__name__, e))
        c.close()
    finally:
        d.stop()
    took = time.time() - t0
    print("flower run: %d nodes, %d rounds of %d, 3 attempts, %.1f s" % (NODES, ROUNDS, K, took))
    check(took < DEADLINE_S, "the test took %.0f s (more than %d s)" % (took, DEADLINE_S))
    print("flower: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def verify(c, logpath):
    sent = []  # (attempt, round, pid, ok)
    with open(logpath) as f:
        for line in f:
            r = json.loads(line)
            sent.append((r["attempt"], r["round"], r["pid"], r["ok"]))
    check(len(sent) > 0, "no ClientApp was sent a round")
    # restarts: rounds done before are never sent again; round 4 again with its cohort
    for a, rnd, pid, _ in sent:
        check(not (a == 2 and rnd < 4) and not (a == 3 and rnd < 8),
              "attempt %d sent round %d (done before the restart) to client %d" % (a, rnd, pid))
    r4 = {a: sorted(p for (x, rnd, p, _) in sent if x == a and rnd == 4) for a in (1, 2)}
    check(r4[1] and r4[1] == r4[2], "round 4's cohort after the restart %s, before %s" % (
        r4[2], r4[1]))
    # the reporters of each released round
    ok_by_round = {}
    for a, rnd, pid, ok in sent:
        if rnd in CHARGED_BY[a] and ok:
            ok_by_round.setdefault(rnd, set()).add(pid)
    # what the ledger charged, round by round: from the rounds themselves (their ids are
    # {run}-r{round} and, for a retried cohort, {run}-r{round}-m), not from the clients'
    # histories, which keep each client's last history_limit rounds that charged or reserved
    # it: the killed attempts' released reservations count among those and can push a
    # client's earliest charges out
    charged, per_client = charged_rounds(c, RUN, NODES, ROUNDS)
    for pid in range(NODES):
        cid = "%s-c%d" % (RUN, pid)
        hist = [h.round_id for h in c.iter_history(cid) if h.state == "charged"]
        check(len(hist) == len(set(hist)), "%s charged twice under one round id: %s"
              % (cid, hist))
    for rnd, pids in sorted(charged.items()):
        check(pids <= ok_by_round.get(rnd, set()),
              "round %d charged %s, who did not report in the attempt that released it (%s)"
              % (rnd, sorted(pids - ok_by_round.get(rnd, set())), sorted(ok_by_round.get(rnd, set()))))
    check(len(charged) >= 8, "only %d rounds charged anyone" % len(charged))
    zeff = {rnd: Z * len(pids) / (2 * K) for rnd, pids in charged.items()}
    worst = 0.0
    for pid in range(NODES):
        cid = "%s-c%d" % (RUN, pid)
        rec = c.get_client(cid)
        theirs = epsilon_of([zeff[r] for r in per_client[pid]])
        ours = rec.spent.epsilon
        if pid in ALWAYS_DROP or pid == 1:
            check(ours == 0.0 and rec.rounds == 0, "%s spent %r in %d rounds, expected nothing"
                  % (cid, ours, rec.rounds))
        check(rec.rounds == len(per_client[pid]),
              "%s: %d rounds in the ledger, %d in the rounds' answers"
              % (cid, rec.rounds, len(per_client[pid])))
        if theirs > 0:
            rel = (ours - theirs) / theirs
            worst = max(worst, abs(rel))
            check(-BELOW <= rel <= ABOVE, "%s: ledger %.12g, dp_accounting %.12g (%.1e)" % (
                cid, ours, theirs, rel))
        # never sent a round it could not afford; left out only when it could not afford it
        prior = []
        for rnd in range(1, ROUNDS + 1):
            got = any(p == pid and r == rnd for (_, r, p, _) in sent)
            if got:
                check(epsilon_of(prior + [Z / 2]) <= budget_of(pid) * (1 + ABOVE),
                      "%s was sent round %d it could not afford (spent rounds %s)" % (
                          cid, rnd, prior))
            if rnd in per_client[pid]:
                prior.append(zeff[rnd])
            elif pid in ok_by_round.get(rnd, set()) and rnd in charged:
                check(epsilon_of(prior + [zeff[rnd]]) > budget_of(pid) * (1 - ABOVE),
                      "%s reported in round %d but was not charged, though it could afford it"
                      % (cid, rnd))
    check(not any(p == 1 for (_, _, p, _) in sent), "client 1 (below one round) was sent a round")
    low = [p for p in range(4, 10) if c.eligibility(
        ["%s-c%d" % (RUN, p)], event=dpbudget.events.gaussian(Z / 2)).eligible == 0]
    check(len(low) >= 1, "no low-budget client exhausted its budget: the test proves nothing")
    print("flower: rounds charged %d; per-round noise multipliers %s; low-budget clients "
          "exhausted %s; largest relative difference to dp_accounting %.1e" % (
              len(charged), sorted(set(zeff.values())), low, worst))


def charged_rounds(c, prefix, nodes, rounds):
    """{round: {pid, ...}} and {pid: [round, ...]} of what the ledger charged in the run
    prefix's server rounds 1..rounds, read from each round's answer (GET /v1/rounds/{id}): a
    one-step round charged its admitted participants, a committed reservation its reported
    ones. A pid charged twice for one server round (its cohort round and a retry) is
    counted twice, which the callers check against."""
    per_round, per_client = {}, {pid: [] for pid in range(nodes)}
    for rnd in range(1, rounds + 1):
        for rid in ("%s-r%d" % (prefix, rnd), "%s-r%d-m" % (prefix, rnd)):
            try:
                r = c.get_round(rid)
            except dpbudget.NotFound:
                continue
            check(not r.summarized, "round %s was summarized: its outcomes are gone" % rid)
            ids = (r.admitted_ids if r.state == "charged" else
                   (r.reported or []) if r.state == "committed" else [])
            for cid in ids:
                pid = int(cid.rsplit("-c", 1)[1])
                per_round.setdefault(rnd, set()).add(pid)
                per_client[pid].append(rnd)
    for pid in per_client:
        check(len(per_client[pid]) == len(set(per_client[pid])),
              "%s-c%d charged twice for a round: %s" % (prefix, pid, per_client[pid]))
        per_client[pid].sort()
    return per_round, per_client


def example(c, url, tmp):
    """examples/flower_coordinator.py (under 30 lines) runs as a ServerApp: 3 rounds of 10 of
    20 nodes, noise multiplier 4; the ledger charges what dp_accounting says."""
    path = os.path.join(ROOT, "examples", "flower_coordinator.py")
    with open(path) as f:
        lines = f.read().rstrip("\n").count("\n") + 1
    check(lines < 30, "the example coordinator has %d lines" % lines)
    n, z, k = 20, 4.0, 10
    c.register_clients([{"id": "ex-c%d" % p, "epsilon": 20.0, "delta": DELTA}
                        for p in range(n)])
    env = dict(os.environ, FL_RUN="ex", FL_NODES=str(n), DPBUDGET_URL=url,
               DPBUDGET_RUN="ex-run", ROUNDS="3")
    out = os.path.join(tmp, "example.log")
    with open(out, "w") as f:
        rc = subprocess.run([sys.executable, os.path.join(HERE, "run_example.py")], env=env,
                            stdout=f, stderr=subprocess.STDOUT, timeout=90).returncode
    with open(out) as f:
        text = f.read()
    check(rc == 0 and "budget: {" in text, "the example ended %d: %s" % (rc, text[-2000:]))
    per_round, per_client = charged_rounds(c, "ex-run", n, 3)
    check(sorted(per_round) == [1, 2, 3] and all(len(v) <= k for v in per_round.values()),
          "the example charged rounds %s" % {r: sorted(v) for r, v in per_round.items()})
    for pid in range(n):
        rec = c.get_client("ex-c%d" % pid)
        theirs = epsilon_of([z * len(per_round[r]) / (2 * k) for r in per_client[pid]])
        check(abs(rec.spent.epsilon - theirs) <= ABOVE * max(theirs, 1e-300) and
              rec.spent.epsilon >= theirs * (1 - BELOW),
              "ex-c%d: ledger %r, dp_accounting %r" % (pid, rec.spent.epsilon, theirs))
        if pid in ALWAYS_DROP:
            check(not per_client[pid], "ex-c%d dropped out but was charged" % pid)


def plain_fedavg(c, url, tmp):
    """FedAvg without a DP wrapper, Budgeted with event=GaussianDpEvent(2) (noise the
    clients add themselves): 12 nodes, 3 rounds of 6; each reporting client is charged that
    event, whatever the others did; dropouts (2, 3, and the flaky ones) nothing."""
    n, k, z = 12, 6, 2.0
    c.register_clients([{"id": "fa-c%d" % p, "epsilon": 20.0, "delta": DELTA}
                        for p in range(n)])
    logpath = os.path.join(tmp, "fedavg.jsonl")
    env = dict(os.environ, FL_URL=url, FL_RUN="fa", FL_NODES=str(n), FL_ROUNDS="3",
               FL_K=str(k), FL_Z=str(z), FL_LOG=logpath, FL_MODE="fedavg", FL_KILL="")
    out = os.path.join(tmp, "fedavg.log")
    with open(out, "w") as f:
        rc = subprocess.run([sys.executable, os.path.join(HERE, "budget_app.py")], env=env,
                            stdout=f, stderr=subprocess.STDOUT, timeout=90).returncode
    check(rc == 0, "the FedAvg run ended %d (see %s)" % (rc, out))
    reported = {}
    with open(logpath) as f:
        for line in f:
            r = json.loads(line)
            if r["ok"]:
                reported.setdefault(r["pid"], []).append(r["round"])
    _, per_client = charged_rounds(c, "fa", n, 3)
    for pid in range(n):
        check(per_client[pid] == sorted(reported.get(pid, [])),
              "fa-c%d charged for rounds %s, reported in %s" % (
                  pid, per_client[pid], sorted(reported.get(pid, []))))
        theirs = epsilon_of([z] * len(per_client[pid]))
        ours = c.get_client("fa-c%d" % pid).spent.epsilon
        check(theirs * (1 - BELOW) <= ours <= theirs * (1 + ABOVE) or ours == theirs == 0.0,
              "fa-c%d: ledger %r, dp_accounting %r" % (pid, ours, theirs))
    check(sum(len(v) for v in per_client.values()) > 0, "the FedAvg run charged nobody")


if __name__ == "__main__":
    sys.exit(main())
