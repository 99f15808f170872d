"""The client against real daemons: answers typed, errors mapped from the daemon's problem
codes, keep-alive, bearer tokens, TLS, and retries that never charge twice (a fault proxy
drops requests and answers between the client and the daemon)."""
import hashlib
import math
import os
import subprocess
import sys
import threading
import time
import unittest

import dpbudget
from dpbudget import errors, events
from support import Daemon, FaultProxy
from test_unit import (DPSGD, AttrsSelfComposed, GaussianDpEvent, PoissonSampledDpEvent,
                       SelfComposedDpEvent)

EV100 = events.dp_sgd(0.01, 1.0, 100)  # one round costs 1.2141452107894914 at delta 1e-5 (rdp)
ROUND_SPEND = 1.2141452107894914


def setUpModule():
    global D
    D = Daemon()


def tearDownModule():
    D.stop()


class ClientCase(unittest.TestCase):
    """A Client of the module's daemon, and fault proxies in front of it (closed after)."""

    def setUp(self):
        self.c = dpbudget.Client(D.url)
        self.proxies = []

    def tearDown(self):
        self.c.close()
        for p in self.proxies:
            p.close()

    def proxied(self, faults, **kw):
        p = FaultProxy(D.port, faults)
        self.proxies.append(p)
        c = dpbudget.Client(p.url, **kw)
        c._sleep = lambda s: None
        return c, p


class Compute(ClientCase):
    def test_epsilon_reference_value(self):
        r = self.c.epsilon(DPSGD, delta=1e-5, accountant="rdp")
        self.assertIsInstance(r, dpbudget.EpsilonResult)
        self.assertEqual((r.accountant, r.guarantee), ("rdp", "upper_bound"))
        self.assertEqual(r.epsilon, 2.101365271663975)
        self.assertEqual(r.results[0].rdp_order, 7.8)

    def test_dp_accounting_objects_give_the_same_answer(self):
        plain = SelfComposedDpEvent(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.0)), 1000)
        attrs = AttrsSelfComposed(PoissonSampledDpEvent(0.01, GaussianDpEvent(1)), 1000)
        for ev in (plain, attrs):
            self.assertEqual(self.c.epsilon(ev, delta=1e-5, accountant="rdp").epsilon,
                             2.101365271663975)

    def test_delta_calibrate_curve(self):
        d = self.c.delta(events.gaussian(1.0), epsilons=[1.0, 2.0])
        self.assertEqual(d.accountant, "gdp_exact")
        self.assertEqual([p.epsilon for p in d.results], [1.0, 2.0])
        self.assertGreater(d.results[0].delta, d.results[1].delta)
        cal = self.c.calibrate({"class_name": "GaussianDpEvent"}, "noise_multiplier", 1.0, 1e-5)
        self.assertLessEqual(cal.achieved["delta"], 1e-5)
        self.assertEqual(cal.event["noise_multiplier"], cal.value)
        cv = self.c.curve(EV100, epsilon_range=(0.5, 2.0, 4), accountant="rdp")
        self.assertEqual(len(cv.curve), 4)
        self.assertEqual(self.c.accountants()["accountants"][0]["name"], "auto")

    def test_infinite_epsilon_is_inf(self):
        r = self.c.epsilon(events.shuffled_epoch(1.0, 1140369), deltas=[0.05, 0.001],
                           accountant="thm41")
        self.assertEqual([p.epsilon for p in r.results], [0.0, math.inf])
        self.assertEqual([p.certified for p in r.results], [True, False])

    def test_errors_mapped(self):
        with self.assertRaises(errors.NotCovered) as cm:
            self.c.delta(events.shuffled_epoch(1, 1000), 1.0, accountant="thm41")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.field), (422, "not_covered", "event"))
        self.assertTrue(any(not c["holds"] for c in e.problem["conditions"]))
        self.assertTrue(e.request_id)
        with self.assertRaises(errors.BadRequest) as cm:
            self.c.delta(events.gaussian(-1), 1.0)
        self.assertEqual(cm.exception.field, "event.noise_multiplier")
        with self.assertRaises(errors.BadRequest) as cm:
            self.c.delta({"class_name": "NoSuchDpEvent"}, 1.0)
        self.assertEqual(cm.exception.code, "unknown_event")
        with self.assertRaises(errors.Unsupported):
            self.c.epsilon({"class_name": "UnsupportedDpEvent"}, 1e-5)
        with self.assertRaises(errors.Infeasible) as cm:
            self.c.calibrate(events.self_composed({"class_name": "GaussianDpEvent",
                                                   "noise_multiplier": 0.1}, None),
                             "count", 0.01, 1e-10)
        self.assertEqual(cm.exception.status, 422)


class Ledger(ClientCase):
    def test_clients_rounds_summary(self):
        a = self.c.put_client("led-alice", 2, 1e-5, labels={"site": "led"})
        self.assertEqual((a.id, a.status, a.spent.epsilon, a.budget.epsilon), ("led-alice",
                                                                               "active", 0.0, 2.0))
        self.c.put_client("led-bob", 1, 1e-5)
        r = self.c.charge(["led-alice", "led-bob", "led-carol"], EV100, policy="admit_eligible")
        self.assertEqual(r.admitted_ids, ["led-alice"])
        self.assertEqual({x.client: x.reason for x in r.refused},
                         {"led-bob": "over_budget", "led-carol": "unknown_client"})
        self.assertEqual(r.admitted[0].spent_after, ROUND_SPEND)
        self.assertFalse(r.replayed)
        with self.assertRaises(errors.OverBudget):
            r.raise_for_refused()
        self.assertEqual(self.c.get_round(r.round_id).charged, 1)
        again = self.c.charge(["led-alice", "led-bob", "led-carol"], EV100,
                              policy="admit_eligible", round_id=r.round_id)
        self.assertTrue(again.replayed)
        self.assertEqual(self.c.get_client("led-alice").rounds, 1)
        s = self.c.summary()
        self.assertGreaterEqual(s.clients, 2)
        self.assertFalse(s.read_only)

    def test_errors_mapped(self):
        with self.assertRaises(errors.NotFound) as cm:
            self.c.get_client("led-nobody")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(errors.InvalidId) as cm:
            self.c.charge(["ok", "bad id"], EV100)
        self.assertEqual(cm.exception.field, "participants[1]")
        with self.assertRaises(errors.InvalidId):
            self.c.get_client("a b")  # sent as one path segment (%20), refused by the id rule
        self.c.put_client("led-x", 8, 1e-5)
        self.c.charge(["led-x"], EV100, round_id="led-r-conflict")
        with self.assertRaises(errors.Conflict) as cm:
            self.c.charge(["led-x"], events.dp_sgd(0.01, 1.0, 50), round_id="led-r-conflict")
        self.assertEqual(cm.exception.round_id, "led-r-conflict")
        with self.assertRaises(errors.BadRequest) as cm:
            self.c.put_client("led-y", -1, 1e-5)
        self.assertEqual(cm.exception.field, "budget.epsilon")

    def test_pagination_and_keep_alive(self):
        for i in range(7):
            self.c.put_client("page-%d" % i, 4, 1e-5, labels={"grp": "page"})
        conns = self.c.stats["connections"]
        got = [r.id for r in self.c.iter_clients(label="grp=page", page_size=3)]
        self.assertEqual(got, ["page-%d" % i for i in range(7)])
        self.assertEqual(self.c.stats["connections"], conns)  # three pages, one connection


class SafeRetries(ClientCase):
    """A round whose answer is lost is retried with its round id and charged exactly once."""

    def test_lost_answer_replayed_once(self):
        self.c.put_client("rt-a", 8, 1e-5)
        self.c.put_client("rt-b", 8, 1e-5)
        c, p = self.proxied(["drop_response", "drop_response"])
        r = c.charge(["rt-a", "rt-b"], EV100)
        self.assertEqual(p.seen, 3)  # two answers lost, the third attempt heard
        self.assertEqual(c.stats["attempts"], 3)
        self.assertTrue(r.replayed)  # the daemon applied the first attempt
        for cid in ("rt-a", "rt-b"):
            rec = self.c.get_client(cid)
            self.assertEqual((rec.rounds, rec.spent.epsilon), (1, ROUND_SPEND))

    def test_lost_request_applied_once(self):
        self.c.put_client("rt-c", 8, 1e-5)
        c, p = self.proxied(["drop_request"])
        r = c.charge(["rt-c"], EV100)
        self.assertFalse(r.replayed)  # the first attempt never arrived
        self.assertEqual(r.charged, 1)
        self.assertEqual(self.c.get_client("rt-c").rounds, 1)

    def test_non_idempotent_post_not_retried(self):
        self.c.put_client("rt-d", 8, 1e-5)
        c, p = self.proxied(["drop_response"])
        body = {"round_id": "rt-raw", "event": EV100, "participants": ["rt-d"]}
        with self.assertRaises(errors.TransportError):
            c.request("POST", "/v1/rounds", body)
        self.assertEqual(c.stats["attempts"], 1)
        # the caller retries with the same id: the daemon replays it, charged once
        r = c.request("POST", "/v1/rounds", body)
        self.assertEqual(r.headers.get("idempotent-replayed"), "true")
        self.assertEqual(self.c.get_client("rt-d").rounds, 1)

    def test_timeout_not_retried_but_round_id_kept(self):
        self.c.put_client("rt-e", 8, 1e-5)
        c, p = self.proxied(["hang"], timeout=0.3)
        with self.assertRaises(errors.Timeout) as cm:
            c.charge(["rt-e"], EV100)
        rid = cm.exception.round_id
        self.assertTrue(rid and rid.startswith("r-"))
        self.assertEqual((c.stats["attempts"], self.c.get_client("rt-e").rounds), (1, 0))
        c.charge(["rt-e"], EV100, round_id=rid)
        c.charge(["rt-e"], EV100, round_id=rid)
        self.assertEqual(self.c.get_client("rt-e").rounds, 1)

    def test_idle_connection_closed_by_the_daemon(self):
        d = Daemon("--conn-timeout", "1")
        try:
            c = dpbudget.Client(d.url, retries=0)
            c.put_client("idle", 8, 1e-5)
            time.sleep(1.6)  # the daemon closes the kept-alive connection
            r = c.charge(["idle"], EV100)  # retries=0: the stale connection costs no retry
            self.assertEqual(r.charged, 1)
            self.assertEqual(c.stats["connections"], 2)
            c.close()
        finally:
            d.stop()


def sha256(s):
    return hashlib.sha256(s.encode()).hexdigest()


class AuthAndTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.tmp = tempfile.mkdtemp(prefix="dpb-sdk-auth-")
        keys = os.path.join(cls.tmp, "keys")
        with open(keys, "w") as f:
            f.write("%s admin ops\n%s read viewer\n" % (sha256("admin-token"),
                                                        sha256("read-token")))
        cls.d = Daemon("--api-keys", keys, "--rate-limit", "4", tmp=cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        import shutil
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_tokens_and_scopes(self):
        with self.assertRaises(errors.Unauthorized):
            dpbudget.Client(self.d.url, retries=0).summary()
        with self.assertRaises(errors.Unauthorized):
            dpbudget.Client(self.d.url, "wrong", retries=0).summary()
        with self.assertRaises(errors.Forbidden) as cm:
            dpbudget.Client(self.d.url, "read-token").put_client("t1", 1, 1e-5)
        self.assertEqual(cm.exception.status, 403)
        adm = dpbudget.Client(self.d.url, "admin-token")
        self.assertEqual(adm.put_client("t1", 1, 1e-5).id, "t1")

    def test_rate_limit_retry_after(self):
        c = dpbudget.Client(self.d.url, "read-token", retries=0)
        with self.assertRaises(errors.RateLimited) as cm:
            for _ in range(40):
                c.summary()
        self.assertGreaterEqual(cm.exception.retry_after, 1)
        # with retries, the client waits as told and gets through
        c = dpbudget.Client(self.d.url, "read-token", retries=3)
        waits = []
        c._sleep = lambda s: (waits.append(s), time.sleep(s))
        t0 = time.time()
        for _ in range(12):
            c.summary()
        self.assertTrue(waits and all(w >= 1 for w in waits), waits)
        self.assertGreaterEqual(time.time() - t0, sum(waits) * 0.99)

    def test_tls_with_ca_file(self):
        cert, key = os.path.join(self.tmp, "cert.pem"), os.path.join(self.tmp, "key.pem")
        rc = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                             "1", "-subj", "/CN=127.0.0.1", "-addext",
                             "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                            capture_output=True).returncode
        self.assertEqual(rc, 0, "openssl could not make a certificate")
        d = Daemon("--tls-cert", cert, "--tls-key", key, scheme="https")
        try:
            c = dpbudget.Client(d.url, cafile=cert)
            self.assertEqual(c.epsilon(DPSGD, 1e-5, accountant="rdp").epsilon, 2.101365271663975)
            c.summary()
            self.assertEqual(c.stats["connections"], 1)
            c.close()
            with self.assertRaises(errors.TransportError) as cm:
                dpbudget.Client(d.url).summary()  # the system's CAs do not know it
            self.assertIn("not trusted", str(cm.exception))
        finally:
            d.stop()


class Cli(unittest.TestCase):
    def run_cli(self, *args, url=None):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
            os.path.abspath(dpbudget.__file__))))
        env.pop("DPBUDGET_TOKEN", None)
        p = subprocess.run([sys.executable, "-m", "dpbudget", "--url", url or D.url] + list(args),
                           capture_output=True, text=True, env=env, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def test_compute_and_ledger(self):
        rc, out, _ = self.run_cli("epsilon", "--sigma", "1", "--q", "0.01", "--steps", "1000",
                                  "--delta", "1e-5", "--accountant", "rdp")
        self.assertEqual(rc, 0)
        self.assertIn("epsilon = 2.101365271663975 at delta = 1e-05 (order 7.8)", out)
        self.assertIn("(rdp, upper_bound)", out)
        rc, out, _ = self.run_cli("client", "put", "cli-a", "--epsilon", "2", "--delta", "1e-5",
                                  "--label", "site=x")
        self.assertEqual(rc, 0, out)
        self.assertIn("cli-a: active, spent epsilon 0.0 of 2.0", out)
        rc, out, _ = self.run_cli("round", "charge", "--participants", "cli-a,cli-zz",
                                  "--sigma", "1", "--q", "0.01", "--steps", "100",
                                  "--policy", "admit_eligible", "--round-id", "cli-r1",
                                  "--strict")
        self.assertEqual(rc, 4)  # cli-zz refused
        self.assertIn("refused cli-zz: unknown_client", out)
        rc, out, _ = self.run_cli("--json", "client", "get", "cli-a")
        import json
        self.assertEqual(json.loads(out)["rounds"], 1)
        rc, out, _ = self.run_cli("client", "history", "cli-a")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"cli-r1 +\d+ +charged +1\.2141452107894914 +"
                              r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

    def test_import_csv_and_errors(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("id,epsilon,delta,label.site\ncsv-1,4,1e-5,eu\ncsv-2,4,1e-5,\n")
        try:
            rc, out, err = self.run_cli("client", "import", f.name)
            self.assertEqual(rc, 0, err)
            self.assertIn("2 clients: 2 created", out)
        finally:
            os.unlink(f.name)
        for text, want in (("id,epsilon,delta,site\nx,1,1e-5,a\n", "unknown column 'site'"),
                           ("id,epsilon,delta\nx,1\n", ":2: not as many fields"),
                           ("id,epsilon,delta\nx,one,1e-5\n", ":2: epsilon and delta")):
            with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
                f.write(text)
            try:
                rc, _, err = self.run_cli("client", "import", f.name)
            finally:
                os.unlink(f.name)
            self.assertEqual(rc, 2)
            self.assertIn(want, err)
        rc, out, err = self.run_cli("client", "get", "nobody-here")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("404 not_found", err)
        rc, _, err = self.run_cli("summary", url="http://127.0.0.1:1")
        self.assertEqual(rc, 3)
        rc, _, err = self.run_cli("--retries", "0", "round", "charge", "--participants", "a",
                                  "--sigma", "1", url="http://127.0.0.1:1")
        self.assertEqual(rc, 3)
        self.assertRegex(err, r"repeat with --round-id r-[0-9a-f]{32}")
        rc, _, err = self.run_cli("delta", "--epsilon", "1")
        self.assertEqual(rc, 2)
        self.assertIn("give the event", err)


EV50 = events.dp_sgd(0.01, 1.0, 50)  # budgets (1.5, 1e-5) and (2, 1e-5) afford 6 and 17 (rdp)


class BulkAndEligibility(ClientCase):
    def test_bulk_registration(self):
        items = [{"id": "bk-%03d" % i, "epsilon": 4, "delta": 1e-5, "labels": {"grp": "bk"}}
                 for i in range(300)]
        small = dpbudget.Client(D.url, max_body=4000)  # several requests
        r = small.register_clients(items)
        self.assertGreater(small.stats["requests"], 3)
        self.assertEqual((r.created, r.updated, r.unchanged, r.conflicts), (300, 0, 0, 0))
        self.assertEqual([x.id for x in r.results], [x["id"] for x in items])
        self.assertEqual(sum(1 for _ in self.c.iter_clients(label="grp=bk")), 300)
        # idempotent; an update among them
        items[5]["epsilon"] = 5
        r = self.c.register_clients(items, batch_size=120)
        self.assertEqual((r.created, r.updated, r.unchanged), (0, 1, 299))
        self.assertEqual(self.c.get_client("bk-005").budget.epsilon, 5.0)
        # a charged client's accounting mode cannot change: that item conflicts, others apply
        self.c.charge(["bk-001"], EV50)
        r = self.c.register_clients([
            {"id": "bk-001", "epsilon": 4, "delta": 1e-5, "accounting": "pld"},
            {"id": "bk-new", "budget": {"epsilon": 4, "delta": 1e-5}}])
        self.assertEqual([x.result for x in r.results], ["conflict", "created"])
        self.assertEqual((r.conflicted[0].code, r.conflicts), ("conflict", 1))
        self.assertEqual(self.c.get_client("bk-001").accounting, "rdp")
        # a malformed item: named by its index in the whole list, nothing of its request applied
        bad = [{"id": "bk-m%d" % i, "epsilon": 4, "delta": 1e-5} for i in range(40)]
        bad[33]["delta"] = 2
        with self.assertRaises(errors.BadRequest) as cm:
            small.register_clients(bad)
        self.assertEqual(cm.exception.field, "clients[33].budget.delta")
        with self.assertRaises(errors.NotFound):
            self.c.get_client("bk-m33")
        # a key the daemon does not know is sent, and refused, not dropped
        with self.assertRaises(errors.BadRequest) as cm:
            self.c.register_clients([{"id": "bk-u", "epsilon": 4, "delta": 1e-5, "lables": {}}])
        self.assertEqual((cm.exception.code, cm.exception.field),
                         ("unknown_field", "clients[0].lables"))

    def test_eligibility_agrees_with_admission(self):
        """affordable_rounds k: k rounds are admitted one after the other, the next refused;
        eligible now = admitted now."""
        self.c.register_clients([{"id": "el-a", "epsilon": 1.5, "delta": 1e-5},
                                 {"id": "el-b", "epsilon": 2, "delta": 1e-5},
                                 {"id": "el-c", "epsilon": 1, "delta": 1e-5}])
        el = self.c.eligibility(["el-a", "el-b", "el-c", "el-nobody"], event=EV50)
        got = {x.client: (x.eligible, x.affordable_rounds, x.reason) for x in el.clients}
        # the daemon names each candidate `client` (as rounds do) and `id` (as before)
        self.assertEqual([x.client for x in el.clients],
                         ["el-a", "el-b", "el-c", "el-nobody"])
        self.assertEqual([x.id for x in el.clients], [x.client for x in el.clients])
        self.assertEqual(self.c.request("POST", "/v1/eligibility", {
            "event": EV50, "clients": ["el-a"]}, idempotent=True).body["clients"][0]["client"],
            "el-a")
        self.assertEqual(got["el-a"], (True, 6, None))
        self.assertEqual(got["el-b"], (True, 17, None))
        self.assertEqual(got["el-c"][:2], (False, 0))
        self.assertEqual(got["el-nobody"], (False, 0, "unknown_client"))
        self.assertEqual((el.eligible, el.ineligible), (2, 2))
        for k in range(6):
            r = self.c.charge(["el-a", "el-b", "el-c"], EV50, policy="admit_eligible")
            self.assertEqual(r.admitted_ids, ["el-a", "el-b"], k)
            el = self.c.eligibility(["el-a", "el-b"], event=EV50)
            self.assertEqual([x.affordable_rounds for x in el.clients], [5 - k, 16 - k])
        self.assertEqual(el.eligible_ids, ["el-b"])
        r = self.c.charge(["el-a", "el-b"], EV50, policy="admit_eligible")
        self.assertEqual((r.admitted_ids, r.refused_ids), (["el-b"], ["el-a"]))
        # the client that cannot afford its event again is shown exhausted (honest status)
        self.assertEqual(self.c.get_client("el-a").status, "exhausted")

    def test_eligibility_split_and_by_label(self):
        self.c.register_clients([{"id": "es-%03d" % i, "epsilon": 4, "delta": 1e-5,
                                  "labels": {"grp": "es"}} for i in range(250)])
        ids = ["es-%03d" % i for i in range(250)]
        small = dpbudget.Client(D.url, max_body=1200)
        el = small.eligibility(ids, event=EV50, max_rounds=3)
        self.assertGreater(small.stats["requests"], 2)
        self.assertEqual([x.id for x in el.clients], ids)
        self.assertTrue(all(x.affordable_rounds == 3 and x.affordable_rounds_capped
                            for x in el.clients))
        by_label = self.c.eligibility(label="grp=es", event=EV50, max_rounds=3)
        self.assertEqual(sorted(x.id for x in by_label.clients), ids)
        with self.assertRaises(errors.BadRequest):
            self.c.eligibility(label="no equals sign", event=EV50)


class TwoPhase(ClientCase):
    """Reservations: dropouts are not charged, commits and reserves retried after a lost
    answer are applied once, reservations count as spent until committed or released."""

    def test_dropouts_not_charged(self):
        ids = ["tp-a", "tp-b", "tp-c", "tp-d"]
        self.c.register_clients([{"id": x, "epsilon": 8, "delta": 1e-5} for x in ids])
        r = self.c.reserve(ids, EV100, round_id="tp-r1")
        self.assertEqual((r.phase, r.state, r.admitted_ids), ("reserve", "reserved", ids))
        self.assertTrue(r.expires_at and r.expires_at.endswith("Z"))
        # the reservation counts as spent: one round fewer is affordable while it is held
        held = self.c.eligibility(ids, event=EV100).clients[0].affordable_rounds
        self.assertEqual(self.c.get_client("tp-a").rounds, 0)
        c = self.c.commit("tp-r1", ["tp-a", "tp-c"])
        self.assertEqual(c.state, "committed")
        after = {x.id: x.affordable_rounds for x in self.c.eligibility(ids, event=EV100).clients}
        self.assertEqual(after["tp-a"], held)  # charged: the reservation became the charge
        self.assertEqual(after["tp-b"], held + 1)  # dropped out: released
        for x, n in (("tp-a", 1), ("tp-b", 0), ("tp-c", 1), ("tp-d", 0)):
            rec = self.c.get_client(x)
            self.assertEqual(rec.rounds, n, x)
            self.assertEqual(rec.spent.epsilon, ROUND_SPEND if n else 0.0, x)
        got = self.c.get_round("tp-r1")
        self.assertEqual((got.state, sorted(got.reported)), ("committed", ["tp-a", "tp-c"]))

    def test_lost_answers_of_reserve_and_commit_applied_once(self):
        ids = ["tq-a", "tq-b"]
        self.c.register_clients([{"id": x, "epsilon": 8, "delta": 1e-5} for x in ids])
        c, p = self.proxied(["drop_response"])
        r = c.reserve(ids, EV100)
        self.assertTrue(r.replayed)
        self.assertEqual((c.stats["attempts"], r.state), (2, "reserved"))
        c.close()  # the next call on a new connection, whose answer is lost too
        p.faults.append("drop_response")
        done = c.commit(r.round_id, ["tq-a"])
        self.assertTrue(done.replayed)
        self.assertEqual(c.stats["attempts"], 4)
        self.assertEqual([self.c.get_client(x).rounds for x in ids], [1, 0])
        # the same commit again: replayed; another body: conflict
        self.assertTrue(self.c.commit(r.round_id, ["tq-a"]).replayed)
        with self.assertRaises(errors.Conflict):
            self.c.commit(r.round_id, ids)
        self.assertEqual([self.c.get_client(x).rounds for x in ids], [1, 0])

    def test_commit_checks_and_release(self):
        self.c.register_clients([{"id": "tr-a", "epsilon": 8, "delta": 1e-5}])
        r = self.c.reserve(["tr-a"], EV100)
        with self.assertRaises(errors.BadRequest) as cm:
            self.c.commit(r.round_id, ["tr-a", "tr-stranger"])
        self.assertIn("tr-stranger", cm.exception.detail)
        rel = self.c.release(r.round_id)
        self.assertEqual(rel.state, "released")
        self.assertEqual(self.c.release(r.round_id).state, "released")  # idempotent
        with self.assertRaises(errors.ReservationReleased):
            self.c.commit(r.round_id, ["tr-a"])
        self.assertEqual(self.c.get_client("tr-a").rounds, 0)
        with self.assertRaises(errors.NotFound):
            self.c.commit("tr-no-such-round", [])

    def test_expiry(self):
        self.c.register_clients([{"id": "ts-a", "epsilon": 8, "delta": 1e-5}])
        before = self.c.eligibility(["ts-a"], event=EV100).clients[0].affordable_rounds
        r = self.c.reserve(["ts-a"], EV100, ttl=1)
        self.assertEqual(self.c.eligibility(["ts-a"], event=EV100).clients[0].affordable_rounds,
                         before - 1)
        time.sleep(1.6)
        with self.assertRaises(errors.ReservationExpired):
            self.c.commit(r.round_id, ["ts-a"])
        self.assertEqual(self.c.eligibility(["ts-a"], event=EV100).clients[0].affordable_rounds,
                         before)
        self.assertEqual(self.c.get_client("ts-a").rounds, 0)

    def test_reservations_never_overspend(self):
        """A budget that affords 6 rounds: 6 reservations held, the 7th refused; a release
        frees one place."""
        self.c.register_clients([{"id": "tt-a", "epsilon": 1.5, "delta": 1e-5}])
        rounds = [self.c.reserve(["tt-a"], EV50) for _ in range(7)]
        self.assertEqual([len(r.admitted) for r in rounds], [1] * 6 + [0])
        self.assertEqual(rounds[6].refused[0].reason, "over_budget")
        self.assertEqual(self.c.eligibility(["tt-a"], event=EV50).eligible, 0)
        self.c.release(rounds[0].round_id)
        self.assertEqual(len(self.c.reserve(["tt-a"], EV50).admitted), 1)



class Concurrency(ClientCase):
    def test_threads_share_a_client_and_never_overspend(self):
        """12 threads on one Client reserve the same client (budget for 6 such rounds) at
        once: exactly 6 reservations are admitted; the pool served them all."""
        self.c.register_clients([{"id": "cc-a", "epsilon": 1.5, "delta": 1e-5}])
        results, errs = [], []

        def one():
            try:
                results.append(self.c.reserve(["cc-a"], EV50))
            except Exception as e:  # noqa: BLE001 - reported below
                errs.append(e)
        threads = [threading.Thread(target=one) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(errs, [])
        self.assertEqual(sorted(len(r.admitted) for r in results), [0] * 6 + [1] * 6)
        self.assertEqual(len({r.round_id for r in results}), 12)
        self.assertLessEqual(self.c.stats["connections"], 12)
        self.assertEqual(self.c.eligibility(["cc-a"], event=EV50).eligible, 0)


class HistoryAndNamedEvents(ClientCase):
    def test_named_events(self):
        a = self.c.put_event("ne-dpsgd", EV50)
        self.assertTrue(a.created)
        self.assertFalse(self.c.put_event("ne-dpsgd", EV50).created)  # the same: fine
        with self.assertRaises(errors.Conflict):
            self.c.put_event("ne-dpsgd", EV100)  # names are immutable
        self.assertEqual(self.c.get_event("ne-dpsgd").event, events.to_event(EV50))
        self.assertIn("ne-dpsgd", [e.name for e in self.c.list_events().events])
        self.c.register_clients([{"id": "ne-a", "epsilon": 1.5, "delta": 1e-5}])
        el = self.c.eligibility(["ne-a"], event_name="ne-dpsgd")
        self.assertEqual(el.clients[0].affordable_rounds, 6)
        r = self.c.charge(["ne-a"], event_name="ne-dpsgd")
        self.assertEqual(r.charged, 1)
        with self.assertRaises(errors.UnknownEventName):
            self.c.charge(["ne-a"], event_name="ne-nothing")

    def test_history(self):
        self.c.register_clients([{"id": "hi-a", "epsilon": 8, "delta": 1e-5}])
        ids = ["hi-r%d" % i for i in range(5)]
        for rid in ids[:4]:
            self.c.charge(["hi-a"], EV100, round_id=rid)
        r = self.c.reserve(["hi-a"], EV100, round_id=ids[4])
        self.c.release(r.round_id)
        page = self.c.history("hi-a", limit=2)
        self.assertEqual(len(page.charges), 2)
        self.assertTrue(page.next_cursor)
        allc = list(self.c.iter_history("hi-a", page_size=2))
        charged = [x.round_id for x in allc if x.state == "charged"]
        self.assertEqual(charged, ids[3::-1])  # newest first
        self.assertEqual([x.state for x in allc if x.round_id == ids[4]], ["released"])
        seqs = [x.seq for x in allc]
        self.assertEqual(seqs, sorted(seqs, reverse=True))
        self.assertEqual(allc[1].spent_after, self.c.get_client("hi-a").spent.epsilon)
        self.assertEqual([a["charged"] for a in page.aggregate], [4])
        self.assertTrue(page.complete)
        # each entry's time: RFC 3339 in UTC with ms, newest first, within the test's run
        times = [x.time for x in allc]
        for t in times:
            self.assertRegex(t, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(times[1:], sorted(times[1:], reverse=True))  # the charges' records

    def test_ledger_history(self):
        import datetime
        before = self.c.ledger_history("minute")
        self.c.register_clients([{"id": "lh-a", "epsilon": 8, "delta": 1e-5}])
        self.c.charge(["lh-a", "lh-nobody"], EV100, policy="admit_eligible")
        h = self.c.ledger_history("minute")
        self.assertEqual(h.resolution, "minute")
        self.assertEqual(sum(p.rounds for p in h.points), sum(p.rounds for p in before.points) + 1)
        self.assertEqual(sum(p.charges for p in h.points),
                         sum(p.charges for p in before.points) + 1)
        self.assertEqual(h.points[-1].by_status, self.c.summary().by_status)
        self.assertGreaterEqual(h.points[-1].refusals.get("unknown_client", 0), 1)
        self.assertEqual(set(h.retention), {"minute", "hour", "day"})
        self.assertEqual(h.end, h.retention["minute"]["to"])
        # bounds as aware datetimes: a window before any record has no point
        old = self.c.ledger_history("day", start=datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc),
                                    end="2001-01-02T00:00:00Z")
        self.assertEqual(old.points, [])
        self.assertIsNone(old.start)
        with self.assertRaises(ValueError):
            self.c.ledger_history(start=datetime.datetime(2001, 1, 1))
        with self.assertRaises(errors.BadRequest) as e:
            self.c.ledger_history("week")
        self.assertEqual(e.exception.code, "invalid_parameter")
