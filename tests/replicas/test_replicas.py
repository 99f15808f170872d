#!/usr/bin/env python3
"""test_replicas.py DPBUDGETD - several dpbudgetd replicas on one real PostgreSQL.

Starts a PostgreSQL of the Debian packages in a temporary directory (tests/pg/pgtmp.sh: as an
unprivileged user when run as root, fsync on) and real dpbudgetd processes with --ledger-url
on it, and checks what the replicated ledger promises (docs/OPERATIONS.md, "Running
replicated"):
- migrations: three replicas started at once on an empty database migrate it exactly once
  (each schema version recorded once; `dpbudgetd migrate` then has nothing to do);
- no overspend: overlapping cohorts charged concurrently on three replicas, with both
  admission policies; afterwards every client has spent at most its budget and was charged
  exactly as many rounds as the budget allows (the count a lone client reaches charged one
  round at a time), and every admission answered is one charged round;
- a replica killed with SIGKILL while rounds are in flight: every round left unanswered is
  retried with the same id on another replica and is charged exactly once;
- PostgreSQL stopped (fast shutdown, then again with an immediate one: a crash of the
  server) while rounds are in flight: the replicas answer 503 ledger_unavailable
  with Retry-After on ledger reads, writes and /readyz, /healthz stays 200; started again,
  the replicas answer by themselves (no restart), every acknowledged round is there and the
  unanswered ones, retried with their ids, are charged exactly once;
- moving between backends: copy-ledger file -> PostgreSQL -> file, compare-ledgers agrees,
  a non-empty target is refused, a difference is found and named;
- the url's password is never printed (start-up errors, migrate).
Every exchange is appended to $DPB_CONTRACT_LOG when set (tests/contract/validate.mjs checks
them against openapi.yaml, the 503 ledger_unavailable answers included).
Closing line `replicas: N passed, M failed`; exit 1 if any check failed. Every process is
killed on exit, every request and wait has a deadline, the whole suite has one too.
"""
import atexit
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PGTMP = os.environ.get("DPB_PGTMP", os.path.join(ROOT, "tests", "pg", "pgtmp.sh"))
PG_BIN = "/usr/lib/postgresql/15/bin"
os.environ.setdefault("DPBUDGET_SHUTDOWN_GRACE", "0")  # SIGTERM stops at once: no balancer
SUITE_DEADLINE_S = 300
G5 = {"class_name": "GaussianDpEvent", "noise_multiplier": 5}

passed = 0
failed = 0
procs = []  # every dpbudgetd started (killed at exit)
pg_dirs = []  # every PostgreSQL started (stopped at exit)
tmp_root = None


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + what, flush=True)
    return bool(ok)


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    for d in pg_dirs:
        subprocess.run(["sh", PGTMP, "kill", d], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
    if tmp_root:
        shutil.rmtree(tmp_root, ignore_errors=True)


def on_signal(signum, _frame):
    cleanup()
    os._exit(128 + signum)


# ------------------------------------------------------------------------- PostgreSQL


def pg(cmd, d):
    """pgtmp.sh CMD DIR: its stdout (the url for start), or None after saying why."""
    try:
        r = subprocess.run(["sh", PGTMP, cmd, d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=90)
    except subprocess.TimeoutExpired:
        print("pgtmp.sh %s timed out" % cmd)
        return None
    if r.returncode != 0:
        print("pgtmp.sh %s %s failed: %s" % (cmd, d, r.stderr.decode(errors="replace")))
        return None
    if cmd == "start" and d not in pg_dirs:
        pg_dirs.append(d)
    return r.stdout.decode().strip()


def psql(url, sql):
    r = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-t", "-A", "-v",
                        "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if r.returncode != 0:
        print("psql: %s: %s" % (sql, r.stderr.decode(errors="replace").strip()))
        return None
    return r.stdout.decode().strip()


def with_db(url, db):
    """The url of database db on url's server."""
    base, _, rest = url.rpartition("/")
    q = ("?" + rest.split("?", 1)[1]) if "?" in rest else ""
    return "%s/%s%s" % (base, db, q)


def new_db(url, db):
    psql(url, "CREATE DATABASE %s" % db)
    return with_db(url, db)


# ------------------------------------------------------------------------- replicas


class Replica:
    def __init__(self, binary, url, name, via_env=False, extra=()):
        self.name = name
        self.dir = os.path.join(tmp_root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port_file = os.path.join(self.dir, "port")
        self.log = os.path.join(self.dir, "log")
        args = [binary, "--listen", "127.0.0.1", "--port", "0", "--port-file", self.port_file,
                "--threads", "2", "--no-request-log", "--ledger-pool", "3"] + list(extra)
        env = dict(os.environ)
        env.pop("DPBUDGET_DATA_DIR", None)
        if via_env:
            env["DPBUDGET_LEDGER_URL"] = url
        else:
            args += ["--ledger-url", url]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        procs.append(self.proc)
        self.port = None

    def wait_listening(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            try:
                with open(self.port_file) as f:
                    p = int(f.read().strip() or 0)
                if p:
                    self.port = p
                    return True
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        print("%s did not listen: %s" % (self.name, self.log_text()[-2000:]))
        return False

    def log_text(self):
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                # past --shutdown-deadline (20 s by default) what is in flight is given up:
                # the daemon exits by then, however loaded the machine
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                return -9
        return self.proc.returncode


CONTRACT_LOG = os.environ.get("DPB_CONTRACT_LOG")
log_lock = threading.Lock()


def record(method, path, data, status, headers, raw):
    """One exchange in the contract log (the API suites' format, tests/api/client.c)."""
    if not CONTRACT_LOG:
        return
    line = json.dumps({
        "kind": "exchange", "method": method, "path": path,
        "request_content_type": "application/json" if data is not None else None,
        "request_body": data.decode() if data is not None else None, "status": status,
        "content_type": headers.get("content-type", ""), "allow": headers.get("allow", ""),
        "retry_after": headers.get("retry-after", ""),
        "www_authenticate": headers.get("www-authenticate", ""),
        "body": raw.decode("utf-8", "replace")}, ensure_ascii=True)
    with log_lock, open(CONTRACT_LOG, "a", encoding="ascii") as f:
        f.write(line + "\n")


class Conn:
    """One keep-alive connection to a replica (one per thread)."""

    def __init__(self, port, timeout=30):
        self.port = port
        self.timeout = timeout
        self.c = None

    def req(self, method, path, body=None):
        """(status, json or None, headers dict); raises OSError/HTTPException when the
        connection fails (no answer)."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                h = {"Content-Type": "application/json"} if data is not None else {}
                self.c.request(method, path, body=data, headers=h)
                r = self.c.getresponse()
                raw = r.read()
                hd = {k.lower(): v for k, v in r.getheaders()}
                record(method, path, data, r.status, hd, raw)
                try:
                    j = json.loads(raw) if raw else None
                except ValueError:
                    j = None
                return r.status, j, hd
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError) as e:
                self.close()
                # a kept-alive connection closed by the server before the request: once more
                # (only when nothing of the request can have been acted on: not for POSTs)
                if attempt == 1 or method == "POST":
                    raise e
        raise OSError("unreachable")

    def close(self):
        if self.c is not None:
            self.c.close()
        self.c = None


def one(port, method, path, body=None, timeout=30):
    c = Conn(port, timeout)
    try:
        return c.req(method, path, body)
    finally:
        c.close()


def wait_ready(port, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            st, _, _ = one(port, "GET", "/readyz", timeout=5)
            if st == 200:
                return True
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.1)
    return False


def put_clients(port, ids, eps, delta=1e-5, mode="rdp"):
    body = {"clients": [{"id": i, "budget": {"epsilon": eps, "delta": delta}, "accounting": mode}
                        for i in ids]}
    st, j, _ = one(port, "POST", "/v1/clients:batch", body)
    return check(st == 200 and j and j.get("conflicts") == 0,
                 "clients:batch of %d clients: %s %s" % (len(ids), st, str(j)[:300]))


def round_body(rid, ids, policy="admit_eligible", event=None):
    return {"round_id": rid, "participants": ids, "event": event or G5, "policy": policy}


def admitted_ids(j):
    return [a["client"] for a in (j or {}).get("admitted", [])]


# ------------------------------------------------------------------------- the tests


def test_migrate_at_once(binary, url):
    """Three replicas started at the same moment on an empty database."""
    db = new_db(url, "migrate_once")
    rs = [Replica(binary, db, "mig%d" % i, via_env=(i == 1)) for i in range(3)]
    ok = all(r.wait_listening() for r in rs)
    check(ok, "three replicas started at once on an empty database all listen")
    for r in rs:
        if r.port:
            check(wait_ready(r.port, 20), "%s is ready" % r.name)
    dup = psql(db, "SELECT count(*) - count(DISTINCT version) FROM dpbudget_schema")
    n = psql(db, "SELECT count(*) FROM dpbudget_schema")
    check(dup == "0" and n not in (None, "0"),
          "dpbudget_schema records each version once (rows %s, duplicates %s)" % (n, dup))
    out = subprocess.run([binary, "migrate", "--ledger-url", db], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=60)
    text = out.stdout.decode()
    m = re.search(r"schema version (\d+) -> (\d+)", text)
    check(out.returncode == 0 and m and m.group(1) == m.group(2) and "nothing to do" in text,
          "dpbudgetd migrate after the replicas: nothing to do (%s %s)"
          % (text.strip(), out.stderr.decode().strip()))
    # the same writes through any replica: a client put on one is read on the others
    if all(r.port for r in rs):
        st, _, _ = one(rs[0].port, "PUT", "/v1/clients/mig-a",
                       {"budget": {"epsilon": 1, "delta": 1e-5}})
        seen = [one(r.port, "GET", "/v1/clients/mig-a")[0] for r in rs]
        check(st == 201 and seen == [200, 200, 200],
              "a client put on one replica is read on every replica (%s %s)" % (st, seen))
    for r in rs:
        check(r.stop() == 0, "%s stops with status 0 on SIGTERM" % r.name)


def test_no_overspend(binary, url, reps):
    """Overlapping cohorts on three replicas at once, both policies."""
    ids = ["ov-%02d" % i for i in range(24)]
    if not put_clients(reps[0].port, ids + ["ov-control"], 3.0):
        return
    # what the budget allows: a lone client charged one round at a time
    k = 0
    for i in range(100):
        st, j, _ = one(reps[i % 3].port, "POST", "/v1/rounds",
                       round_body("ov-control-%d" % i, ["ov-control"]))
        if st != 200 or not admitted_ids(j):
            break
        k += 1
    check(2 <= k < 100, "the control client takes a few rounds of its budget (%d)" % k)
    answers = []  # (round id, admitted ids)
    errors = []
    lock = threading.Lock()

    def worker(t):
        rnd = random.Random(t)
        c = Conn(reps[t % 3].port)
        for i in range(18):
            cohort = rnd.sample(ids, 12)
            pol = "all_or_nothing" if (t + i) % 3 == 0 else "admit_eligible"
            rid = "ov-%d-%d" % (t, i)
            try:
                st, j, _ = c.req("POST", "/v1/rounds", round_body(rid, cohort, pol))
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    errors.append("%s: %s" % (rid, e))
                continue
            with lock:
                if st == 200:
                    answers.append((rid, admitted_ids(j)))
                else:
                    errors.append("%s: %s %s" % (rid, st, str(j)[:200]))
        c.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    check(not any(t.is_alive() for t in threads), "the concurrent rounds end within 120 s")
    check(not errors, "every concurrent round is answered 200 (conflicts between replicas "
          "are retried inside): %s" % errors[:5])
    # then one round at a time for each client until refused: whatever the concurrent
    # rounds left of its budget
    for cid in ids:
        for i in range(k + 1):
            st, j, _ = one(reps[i % 3].port, "POST", "/v1/rounds",
                           round_body("ov-sweep-%s-%d" % (cid, i), [cid]))
            if st != 200:
                errors.append("sweep %s: %s" % (cid, st))
                break
            if not admitted_ids(j):
                break
            answers.append(("ov-sweep-%s-%d" % (cid, i), [cid]))
    counts = {cid: 0 for cid in ids}
    for _, adm in answers:
        for a in adm:
            counts[a] += 1
    bad = []
    for n, cid in enumerate(ids):
        st, j, _ = one(reps[n % 3].port, "GET", "/v1/clients/" + cid)
        if st != 200:
            bad.append("%s: GET %s" % (cid, st))
            continue
        spent, rounds = j["spent"]["epsilon"], j["rounds"]
        if not (isinstance(spent, (int, float)) and spent <= 3.0):
            bad.append("%s spent %s > 3" % (cid, spent))
        if rounds != k:
            bad.append("%s charged %d rounds, the budget allows %d" % (cid, rounds, k))
        if rounds != counts[cid]:
            bad.append("%s charged %d rounds, %d admissions answered" % (cid, rounds, counts[cid]))
    print("  no overspend: %d rounds answered, each client charged %d rounds (its budget's "
          "worth)" % (len(answers), k))
    check(not bad, "no overspend across replicas: every client within budget, charged exactly "
          "what its budget allows, once per admission answered (%d rounds): %s"
          % (len(answers), bad[:5]))


def test_kill_replica(binary, url, reps):
    """SIGKILL a replica while rounds are in flight; retry the unanswered on another."""
    ids = ["kr-%d" % i for i in range(8)]
    if not put_clients(reps[0].port, ids, 100000.0):
        return
    victim = Replica(binary, url, "victim")
    if not check(victim.wait_listening() and wait_ready(victim.port, 20),
                 "a fourth replica starts"):
        return
    sent, answered, unanswered = [], [], []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(t):
        c = Conn(victim.port, timeout=10)
        for i in range(2000):
            if stop.is_set():
                break
            rid = "kr-%d-%d" % (t, i)
            body = round_body(rid, ids)
            with lock:
                sent.append(rid)
            try:
                st, j, _ = c.req("POST", "/v1/rounds", body)
                with lock:
                    (answered if st == 200 else unanswered).append(rid)
            except (OSError, http.client.HTTPException):
                with lock:
                    unanswered.append(rid)
                break
        c.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.6)
    victim.kill()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    check(answered and unanswered, "rounds were answered before the SIGKILL and some were cut "
          "(%d answered, %d unanswered)" % (len(answered), len(unanswered)))
    replayed = 0
    for n, rid in enumerate(unanswered):
        st, j, h = one(reps[n % 3].port, "POST", "/v1/rounds", round_body(rid, ids))
        if not check(st == 200 and sorted(admitted_ids(j)) == sorted(ids),
                     "the unanswered round %s retried on another replica is answered: %s %s"
                     % (rid, st, str(j)[:200])):
            continue
        replayed += h.get("idempotent-replayed") == "true"
    missing = [rid for rid in sent if one(reps[0].port, "GET", "/v1/rounds/" + rid)[0] != 200]
    check(not missing, "every round sent exists after the retries: %s" % missing[:5])
    bad = []
    for cid in ids:
        st, j, _ = one(reps[1].port, "GET", "/v1/clients/" + cid)
        if st != 200 or j["rounds"] != len(sent):
            bad.append("%s: %s rounds for %d round ids" % (cid, j and j.get("rounds"), len(sent)))
    print("  SIGKILL: %d rounds sent, %d answered, %d cut and retried elsewhere (%d of them "
          "replays of rounds the killed replica had committed)"
          % (len(sent), len(answered), len(unanswered), replayed))
    check(not bad, "each round charged exactly once (%d rounds, %d of the retries were "
          "replays of rounds the killed replica had committed): %s" % (len(sent), replayed, bad))


def test_database_down(binary, url, reps, pg_dir, how="stop"):
    """Stop PostgreSQL while rounds are in flight (how: "stop", a fast shutdown, or "kill",
    an immediate one: a crash for the server, recovered from its WAL), check 503s, start it
    again."""
    pre = "dd" if how == "stop" else "dk"
    ids = ["%s-%d" % (pre, i) for i in range(6)]
    if not put_clients(reps[0].port, ids, 100000.0):
        return
    acked, cut = [], []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(t):
        c = Conn(reps[t % 3].port, timeout=30)
        for i in range(5000):
            if stop.is_set():
                break
            rid = "%s-%d-%d" % (pre, t, i)
            try:
                st, j, h = c.req("POST", "/v1/rounds", round_body(rid, ids))
            except (OSError, http.client.HTTPException):
                with lock:
                    cut.append((rid, "no answer"))
                continue
            with lock:
                if st == 200:
                    acked.append(rid)
                else:
                    cut.append((rid, (st, (j or {}).get("code"), h.get("retry-after"))))
            if st != 200:
                time.sleep(0.05)
        c.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    pg(how, pg_dir)
    time.sleep(0.5)
    # while it is down: every ledger route 503 ledger_unavailable with Retry-After
    for r in reps:
        for method, path, body in (("POST", "/v1/rounds", round_body(pre + "-down-" + r.name, ids)),
                                   ("GET", "/v1/clients/%s-0" % pre, None),
                                   ("GET", "/v1/summary", None),
                                   ("GET", "/v1/clients?limit=5", None),
                                   ("PUT", "/v1/clients/%s-new" % pre,
                                    {"budget": {"epsilon": 1, "delta": 1e-5}}),
                                   ("GET", "/readyz", None)):
            st, j, h = one(r.port, method, path, body)
            check(st == 503 and (j or {}).get("code") == "ledger_unavailable"
                  and h.get("retry-after") == "1",
                  "%s %s %s with the database down (%s): 503 ledger_unavailable, Retry-After: 1 "
                  "(got %s %s %s)" % (r.name, method, path, how, st, (j or {}).get("code"),
                                      h.get("retry-after")))
        st, j, _ = one(r.port, "GET", "/healthz")
        check(st == 200, "%s /healthz stays 200 with the database down (got %s)" % (r.name, st))
        st, _, _ = one(r.port, "GET", "/metrics")
    stop.set()
    for t in threads:
        t.join(timeout=60)
    bad = [c for c in cut if c[1] != "no answer" and c[1] != (503, "ledger_unavailable", "1")]
    check(not bad, "rounds refused while the database went down are 503 ledger_unavailable "
          "with Retry-After (%d of them): %s" % (len(cut), bad[:3]))
    st, _, _ = one(reps[0].port, "GET", "/metrics")
    text = one_text(reps[0].port, "/metrics")
    m = re.search(r"^dpbudget_ledger_unavailable_total (\d+)$", text, re.M)
    check(m and int(m.group(1)) > 0 and 'dpbudget_ledger_backend_info{backend="postgresql"} 1'
          in text, "/metrics counts the 503 ledger_unavailable answers and names the backend")
    if pg("restart", pg_dir) is None:
        check(False, "PostgreSQL starts again")
        return
    t0 = time.time()
    ready = [wait_ready(r.port, 30) for r in reps]
    t_ready = time.time() - t0
    check(all(ready), "every replica is ready again by itself after the database is back "
          "(%.1f s; %s)" % (time.time() - t0, ready))
    missing = [rid for rid in acked if one(reps[2].port, "GET", "/v1/rounds/" + rid)[0] != 200]
    check(acked and not missing, "every round acknowledged before the stop is there (%d): "
          "missing %s" % (len(acked), missing[:5]))
    retried = [rid for rid, _ in cut] + [pre + "-down-" + r.name for r in reps]
    late = 0  # 503s after /readyz said 200 (a pooled connection found dead on its first use)
    for n, rid in enumerate(retried):
        for attempt in range(25):  # as a client does: retry 503 ledger_unavailable (bounded)
            st, j, _ = one(reps[n % 3].port, "POST", "/v1/rounds", round_body(rid, ids))
            if st != 503 or (j or {}).get("code") != "ledger_unavailable":
                break
            late += 1
            time.sleep(0.2)
        check(st == 200, "the refused round %s retried after the database is back: %s" % (rid, st))
    check(late <= 3 * 4, "after the database is back, at most one 503 per pooled connection "
          "(%d)" % late)
    total = len(set(acked) | set(retried))
    bad = []
    for cid in ids:
        st, j, _ = one(reps[0].port, "GET", "/v1/clients/" + cid)
        if st != 200 or j["rounds"] != total:
            bad.append("%s: %s rounds for %d round ids" % (cid, j and j.get("rounds"), total))
    print("  outage (%s): %d rounds acknowledged, %d refused or cut and retried, ready again after "
          "%.1f s, %d 503s after readiness" % (how, len(acked), len(retried), t_ready, late))
    check(not bad, "after the outage each round is charged exactly once: %s" % bad)


def test_database_frozen(binary, url, pg_dir):
    """Issue 34: PostgreSQL frozen (SIGSTOP: it stops answering, its connections stay open)
    while ledger requests are in flight. /healthz never waits on the database or the ledger,
    /readyz answers at once from what the store last saw (503 once it has seen the silence),
    and the ledger requests are bounded in number and time: new ones are answered 503
    ledger_unavailable with Retry-After at once, the ones already waiting within the
    statement deadline (statement timeout 10 s + connect timeout 5 s)."""
    db = new_db(url, "frozen")
    r = Replica(binary, db, "frozen")  # --threads 2: two HTTP workers to starve
    if not check(r.wait_listening() and wait_ready(r.port, 20), "a replica for the freeze is up"):
        return
    ids = ["fz-%d" % i for i in range(4)]
    if not put_clients(r.port, ids, 1000.0):
        return
    if not check(pg("freeze", pg_dir) is not None, "PostgreSQL frozen (SIGSTOP)"):
        return
    t_freeze = time.time()
    results, lock = [], threading.Lock()

    def ledger_req(k):
        c = Conn(r.port, timeout=40)
        t0 = time.time()
        try:
            if k % 2 == 0:
                st, j, h = c.req("GET", "/v1/clients/fz-%d" % (k % 4))
            else:
                st, j, h = c.req("POST", "/v1/rounds", round_body("fz-r%d" % k, ids))
            out = (k, st, (j or {}).get("code"), h.get("retry-after"), time.time() - t0)
        except (OSError, http.client.HTTPException) as e:
            out = (k, None, str(e), None, time.time() - t0)
        with lock:
            results.append(out)
        c.close()

    threads = []
    for k in range(12):  # a burst at the freeze, and more while it lasts
        threads.append(threading.Thread(target=ledger_req, args=(k,)))
        threads[-1].start()
        time.sleep(0.1)
    slow, ready_503_at, worst = [], None, 0.0
    end = time.time() + 8
    while time.time() < end:
        for path in ("/healthz", "/readyz"):
            t0 = time.time()
            try:
                st, j, _ = one(r.port, "GET", path, timeout=1.0)
            except (OSError, http.client.HTTPException):
                st = None
            dt = time.time() - t0
            worst = max(worst, dt)
            if st is None or dt > 1.0 or (path == "/healthz" and st != 200):
                slow.append((path, st, round(dt, 2)))
            if path == "/readyz" and st == 503 and ready_503_at is None:
                ready_503_at = time.time() - t_freeze
        time.sleep(0.2)
    check(not slow, "PostgreSQL frozen, ledger requests stuck: /healthz 200 and /readyz answer "
          "within 1 s every time (%s)" % slow[:5])
    check(ready_503_at is not None and ready_503_at < 6.0,
          "/readyz says 503 within 6 s of the freeze (%s)" % ready_503_at)
    t0 = time.time()
    try:
        st, j, h = one(r.port, "GET", "/v1/clients/fz-1", timeout=5)
    except (OSError, http.client.HTTPException):
        st, j, h = None, None, {}
    dt = time.time() - t0
    check(st == 503 and (j or {}).get("code") == "ledger_unavailable" and h.get("retry-after")
          and dt < 1.0, "a new ledger request is answered 503 ledger_unavailable with "
          "Retry-After at once (%s %s %s in %.2f s)" % (st, (j or {}).get("code"),
                                                        h.get("retry-after"), dt))
    for t in threads:
        t.join(timeout=max(1.0, t_freeze + 30 - time.time()))
    late = [x for x in results if x[1] is None or x[4] > 20.0 or
            (x[1] != 200 and (x[1], x[2]) != (503, "ledger_unavailable"))]
    check(len(results) == 12 and not late,
          "every ledger request caught by the freeze is answered (200, or 503 ledger_unavailable) "
          "within the statement deadline, not held (%d answered; %s)" % (len(results), late[:4]))
    pg("thaw", pg_dir)
    check(wait_ready(r.port, 20), "ready again by itself once PostgreSQL answers")
    st, j, _ = one(r.port, "POST", "/v1/rounds", round_body("fz-after", ids))
    check(st == 200, "a round is charged after the thaw (%s %s)" % (st, str(j)[:200]))
    print("  freeze: probes answered in at most %.3f s; /readyz 503 after %.1f s; stuck "
          "requests answered in at most %.1f s" % (worst, ready_503_at or -1,
                                                  max([x[4] for x in results] or [0])))
    check(r.stop() == 0, "the replica stops with status 0")


def one_text(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path)
        return c.getresponse().read().decode()
    finally:
        c.close()


def run_cmd(argv):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return r.returncode, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def test_copy_between_backends(binary, url):
    """file -> PostgreSQL -> file, compared at each step."""
    d1 = os.path.join(tmp_root, "file1")
    d2 = os.path.join(tmp_root, "file2")
    port_file = os.path.join(tmp_root, "file1.port")
    with open(os.path.join(tmp_root, "file1.log"), "wb") as log:
        p = subprocess.Popen([binary, "--listen", "127.0.0.1", "--port", "0", "--port-file",
                              port_file, "--data-dir", d1, "--no-request-log"],
                             stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    end = time.time() + 20
    port = None
    while time.time() < end and port is None:
        try:
            port = int(open(port_file).read().strip() or 0) or None
        except (OSError, ValueError):
            time.sleep(0.02)
    if not check(port, "a file-backed daemon starts"):
        return
    put_clients(port, ["cp-%d" % i for i in range(5)], 5.0)
    one(port, "PUT", "/v1/clients/cp-pld", {"budget": {"epsilon": 4, "delta": 1e-5},
                                             "accounting": "pld", "labels": {"site": "x"}})
    one(port, "PUT", "/v1/events/cp-step", {"event": G5})
    for i in range(4):
        one(port, "POST", "/v1/rounds", round_body("cp-r%d" % i, ["cp-%d" % j for j in range(i + 2)]
                                                   + ["cp-pld"]))
    b = round_body("cp-two", ["cp-0", "cp-1"])
    b["phase"] = "reserve"
    one(port, "POST", "/v1/rounds", b)
    p.terminate()
    p.wait(timeout=10)
    db = new_db(url, "copy_target")
    rc, out = run_cmd([binary, "copy-ledger", "--from", d1, "--to", db])
    check(rc == 0, "copy-ledger file -> PostgreSQL: exit 0 (%s)" % out.strip())
    rc, out = run_cmd([binary, "compare-ledgers", d1, db])
    check(rc == 0 and "same" in out, "compare-ledgers file PostgreSQL: same (%d %s)"
          % (rc, out.strip()))
    rc, out = run_cmd([binary, "copy-ledger", "--from", d1, "--to", db])
    check(rc == 1 and "not empty" in out,
          "copy-ledger into a non-empty database is refused (%d %s)" % (rc, out.strip()))
    rc, out = run_cmd([binary, "copy-ledger", "--from", db, "--to", d2])
    check(rc == 0, "copy-ledger PostgreSQL -> file: exit 0 (%s)" % out.strip())
    rc, out = run_cmd([binary, "compare-ledgers", d1, d2])
    check(rc == 0, "compare-ledgers file file (after the round trip): same (%d %s)"
          % (rc, out.strip()))
    # a replica on the copy answers as the file daemon did
    r = Replica(binary, db, "oncopy")
    if r.wait_listening() and wait_ready(r.port, 20):
        st, j, _ = one(r.port, "GET", "/v1/clients/cp-1")
        check(st == 200 and j["rounds"] == 4, "a replica on the copied database shows the "
              "client's rounds (%s %s)" % (st, j and j.get("rounds")))
        st, j, _ = one(r.port, "POST", "/v1/rounds", round_body("cp-more", ["cp-0"]))
        check(st == 200, "a round on the copy (%s)" % st)
    r.stop()
    rc, out = run_cmd([binary, "compare-ledgers", d1, db])
    check(rc == 1 and "different: " in out and len(out.split("different: ", 1)[1].strip()) > 5,
          "compare-ledgers names the first difference, exit 1 "
          "(%d %s)" % (rc, out.strip()))
    rc, out = run_cmd([binary, "compare-ledgers", d1, os.path.join(tmp_root, "nonexistent")])
    check(rc == 2, "compare-ledgers with a missing directory: exit 2 (%d %s)" % (rc, out.strip()))


def test_password_hidden(binary, url):
    """The url's password is never printed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    secret = "Sekr1tPassw0rd"
    bad = "postgresql://dpb:%s@127.0.0.1:%d/dpb" % (secret, closed)
    r = subprocess.run([binary, "--listen", "127.0.0.1", "--port", "0", "--ledger-url", bad],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    text = (r.stdout + r.stderr).decode(errors="replace")
    check(r.returncode == 1 and secret not in text and "***" in text,
          "an unreachable database at start: exit 1, the password not printed (%d %s)"
          % (r.returncode, text.strip()[:300]))
    r = subprocess.run([binary, "--ledger-url", bad, "--data-dir", "/tmp/x"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 2 and secret not in (r.stdout + r.stderr).decode(),
          "--ledger-url with --data-dir: exit 2, no password shown")
    m = re.match(r"^postgresql://([^@/]*)@(.*)$", url)
    if m:
        with_pw = "postgresql://%s:%s@%s" % (m.group(1).split(":")[0], secret, m.group(2))
        r = subprocess.run([binary, "migrate", "--ledger-url", with_pw], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        text = (r.stdout + r.stderr).decode(errors="replace")
        check(secret not in text and "***" in text,
              "dpbudgetd migrate does not print the password (%s)" % text.strip()[:300])


def test_password_spellings(binary, url):
    """Issue 34: the listening line printed the password when it held '?', '#' or '/', or was
    given as %70assword=; key/value conninfo strings and mistyped options printed it too.
    The server trusts every local connection, so each url below connects (its password
    ignored) and the daemon reaches its listening line."""
    m = re.match(r"^postgresql://([^@/:]*)@([^/]*)/(.*)$", url)
    if not check(m, "the test url has the form postgresql://USER@HOST/DB (%s)" % url):
        return
    user, host = m.group(1), m.group(2)
    db = new_db(url, "pwspell")
    dbname = db.rsplit("/", 1)[1]
    secret = "xLeakQ"
    for form in ["postgresql://%s:Pw?%s@%s/%s" % (user, secret, host, dbname),
                 "postgresql://%s:Pw#%s@%s/%s" % (user, secret, host, dbname),
                 "postgresql://%s@%s/%s?%%70assword=%s" % (user, host, dbname, secret),
                 "postgresql://%s@%s/%s?sslmode=disable&pass%%77ord=%s" % (user, host, dbname,
                                                                         secret)]:
        r = Replica(binary, form, "pw%d" % len(procs))
        up = r.wait_listening()
        r.stop()
        text = r.log_text()
        check(up and "listening" in text and secret not in text and "***" in text,
              "the listening line hides the password of %s (%s)" % (form, text.strip()[:400]))
    host_only, _, port = host.rpartition(":")
    for argv in [[binary, "--ledger-url", "host=%s port=%s password=%s dbname=%s"
                  % (host_only, port, secret, dbname)],
                 [binary, "--ledger-url=postgresql://%s:%s@%s/%s" % (user, secret, host, dbname)],
                 [binary, "postgresql://%s:%s@%s/%s" % (user, secret, host, dbname)],
                 [binary, "migrate", "--ledger-url", "postgresql://%s:Pw/%s@%s/%s"
                  % (user, secret, host, dbname)],
                 # a url given without its option, or mistyped and so taken for a directory
                 [binary, "migrate", "postgresql://%s:%s@%s/%s" % (user, secret, host, dbname)],
                 [binary, "--port", "0", "--data-dir", "postgresq://u:%s@h/d" % secret],
                 [binary, "copy-ledger", "--from", "postgresq://u:%s@h/d" % secret, "--to",
                  os.path.join(tmp_root, "pw-copy")]]:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        text = (r.stdout + r.stderr).decode(errors="replace")
        check(r.returncode != 0 and secret not in text,
              "%s: refused without printing the password (%d %s)"
              % (" ".join(argv[1:]), r.returncode, text.strip()[:300]))


def main(argv):
    global tmp_root
    if len(argv) != 2:
        print("usage: test_replicas.py PATH/TO/dpbudgetd", file=sys.stderr)
        return 2
    binary = os.path.abspath(argv[1])
    atexit.register(cleanup)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    signal.signal(signal.SIGALRM, lambda *_: (print("FAIL the suite ran past %d s"
                                                     % SUITE_DEADLINE_S), on_signal(14, None)))
    signal.alarm(SUITE_DEADLINE_S)
    if not os.path.exists(os.path.join(PG_BIN, "initdb")):
        check(False, "PostgreSQL 15 is installed (%s/initdb; make deps installs it)" % PG_BIN)
        print("replicas: %d passed, %d failed" % (passed, failed))
        return 1
    tmp_root = tempfile.mkdtemp(prefix="dpb-replicas-")
    os.chmod(tmp_root, 0o755)
    pg_dir = os.path.join(tmp_root, "pg")
    url = pg("start", pg_dir)
    if check(url and url.startswith("postgres"), "PostgreSQL starts (%s)" % url):
        test_password_hidden(binary, url)
        test_password_spellings(binary, url)
        test_migrate_at_once(binary, url)
        db = new_db(url, "replicated")
        reps = [Replica(binary, db, "r%d" % i) for i in range(3)]
        if check(all(r.wait_listening() and wait_ready(r.port, 20) for r in reps),
                 "three replicas on one database are ready"):
            test_no_overspend(binary, db, reps)
            test_kill_replica(binary, db, reps)
            test_database_down(binary, db, reps, pg_dir, "stop")
            test_database_down(binary, db, reps, pg_dir, "kill")
            for r in reps:
                check(r.stop() == 0, "%s stops with status 0 on SIGTERM" % r.name)
        test_database_frozen(binary, url, pg_dir)
        test_copy_between_backends(binary, url)
    print("replicas: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
