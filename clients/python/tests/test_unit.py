"""Tests that need no daemon: event conversion, the error mapping, request splitting, the
retry policy against a scripted stub server, Python 3.9 syntax."""
import ast
import collections
import http.server
import json
import math
import os
import threading
import unittest

import dpbudget
from dpbudget import errors, events

# ---------------------------------------------------------------- stand-ins for dp_accounting
# Small classes with dp_accounting's class names and attributes (dp_event.py), without
# importing it: plain classes (conversion by the FIELDS table) and attrs-like ones (fields
# read from __attrs_attrs__, as with the real attrs classes).


class GaussianDpEvent:
    def __init__(self, noise_multiplier):
        self.noise_multiplier = noise_multiplier


class PoissonSampledDpEvent:
    def __init__(self, sampling_probability, event):
        self.sampling_probability = sampling_probability
        self.event = event


class SelfComposedDpEvent:
    def __init__(self, event, count):
        self.event = event
        self.count = count


class ComposedDpEvent:
    def __init__(self, events):
        self.events = events


class NoOpDpEvent:
    pass


class DiscreteGaussianDpEvent:
    def __init__(self, sigma, sensitivity=1.0, dimension=None):
        self.sigma = sigma
        self.sensitivity = sensitivity
        self.dimension = dimension


_Attr = collections.namedtuple("_Attr", "name")


def attrs_like(name, fields):
    """A class as attrs makes it: __attrs_attrs__ lists the fields, in order."""
    def init(self, *args):
        for f, v in zip(fields, args):
            setattr(self, f, v)
    return type(name, (), {"__init__": init, "__attrs_attrs__": tuple(_Attr(f) for f in fields)})


LaplaceDpEvent = attrs_like("LaplaceDpEvent", ("noise_multiplier",))
EpsilonDeltaDpEvent = attrs_like("EpsilonDeltaDpEvent", ("epsilon", "delta"))
AttrsSelfComposed = attrs_like("SelfComposedDpEvent", ("event", "count"))


class FakeNumpyScalar:
    """What a numpy scalar offers: item() and shape ()."""
    shape = ()

    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


DPSGD = {"class_name": "SelfComposedDpEvent", "count": 1000, "event": {
    "class_name": "PoissonSampledDpEvent", "sampling_probability": 0.01,
    "event": {"class_name": "GaussianDpEvent", "noise_multiplier": 1.0}}}


class Events(unittest.TestCase):
    def test_plain_stand_ins(self):
        ev = SelfComposedDpEvent(PoissonSampledDpEvent(0.01, GaussianDpEvent(1.0)), 1000)
        self.assertEqual(events.to_event(ev), DPSGD)
        self.assertEqual(events.dp_sgd(0.01, 1.0, 1000), DPSGD)

    def test_attrs_like(self):
        ev = AttrsSelfComposed(ComposedDpEvent([LaplaceDpEvent(2), EpsilonDeltaDpEvent(1.0, 1e-6),
                                                NoOpDpEvent()]), 3)
        self.assertEqual(events.to_event(ev), {
            "class_name": "SelfComposedDpEvent", "count": 3, "event": {
                "class_name": "ComposedDpEvent", "events": [
                    {"class_name": "LaplaceDpEvent", "noise_multiplier": 2},
                    {"class_name": "EpsilonDeltaDpEvent", "epsilon": 1.0, "delta": 1e-6},
                    {"class_name": "NoOpDpEvent"}]}})

    def test_named_tuple_form(self):
        nt = collections.namedtuple("_GaussianDpEventNamedTupleWrapper",
                                    "module_name class_name noise_multiplier")
        inner = nt("dp_accounting.dp_event", "GaussianDpEvent", 2.5)
        self.assertEqual(events.to_event(inner), {"class_name": "GaussianDpEvent",
                                                  "noise_multiplier": 2.5})
        self.assertEqual(events.to_event(PoissonSampledDpEvent(0.5, inner))["event"],
                         {"class_name": "GaussianDpEvent", "noise_multiplier": 2.5})

    def test_dicts_with_objects_and_numpy_scalars(self):
        d = {"class_name": "PoissonSampledDpEvent", "sampling_probability": FakeNumpyScalar(0.25),
             "event": GaussianDpEvent(FakeNumpyScalar(3.0))}
        self.assertEqual(events.to_event(d), {
            "class_name": "PoissonSampledDpEvent", "sampling_probability": 0.25,
            "event": {"class_name": "GaussianDpEvent", "noise_multiplier": 3.0}})

    def test_none_fields_left_out(self):
        self.assertEqual(events.to_event(DiscreteGaussianDpEvent(1.5)), {
            "class_name": "DiscreteGaussianDpEvent", "sigma": 1.5, "sensitivity": 1.0})

    def test_refusals(self):
        with self.assertRaises(ValueError):
            events.to_event(GaussianDpEvent(float("nan")))
        with self.assertRaises(ValueError):
            events.to_event(GaussianDpEvent(-math.inf))
        # +inf is the daemon's "infinite" (a Gaussian of infinite noise is then refused by the
        # daemon with 400 wrong_type; RepeatAndSelectDpEvent's Poisson shape is accepted)
        self.assertEqual(events.to_event(GaussianDpEvent(math.inf))["noise_multiplier"],
                         "infinite")
        self.assertEqual(events.to_event({"class_name": "RepeatAndSelectDpEvent", "mean": 2.0,
                                          "shape": math.inf,
                                          "event": GaussianDpEvent(1.0)})["shape"], "infinite")
        with self.assertRaises(TypeError):
            events.to_event(object())
        with self.assertRaises(ValueError):
            events.to_event({"noise_multiplier": 1})
        g = GaussianDpEvent(1.0)
        del g.noise_multiplier
        with self.assertRaises(ValueError):
            events.to_event(g)
        deep = GaussianDpEvent(1.0)
        for _ in range(40):
            deep = SelfComposedDpEvent(deep, 2)
        with self.assertRaises(ValueError):
            events.to_event(deep)

    def test_input_not_modified(self):
        d = json.loads(json.dumps(DPSGD))
        out = events.to_event(d)
        out["event"]["sampling_probability"] = 0.5
        self.assertEqual(d, DPSGD)


class ErrorMapping(unittest.TestCase):
    def test_by_code(self):
        cases = [(422, "not_covered", errors.NotCovered), (409, "conflict", errors.Conflict),
                 (409, "reservation_expired", errors.ReservationExpired),
                 (503, "overloaded", errors.Overloaded), (503, "read_only", errors.ReadOnly),
                 (503, "not_durable", errors.NotDurable), (400, "invalid_id", errors.InvalidId),
                 (503, "ledger_unavailable", errors.LedgerUnavailable),
                 (422, "unknown_event_name", errors.UnknownEventName),
                 (400, "unknown_field", errors.BadRequest), (404, "not_found", errors.NotFound),
                 (429, "rate_limited", errors.RateLimited),
                 (401, "unauthorized", errors.Unauthorized), (403, "forbidden", errors.Forbidden),
                 (413, "body_too_large", errors.PayloadTooLarge),
                 (500, "internal", errors.ServerError)]
        for status, code, cls in cases:
            e = errors.error_from_problem(status, {"code": code, "detail": "d", "field": "f"},
                                          {"retry-after": "2"})
            self.assertIs(type(e), cls, code)
            self.assertEqual((e.status, e.code, e.detail, e.field), (status, code, "d", "f"))
            self.assertIsInstance(e, errors.ApiError)

    def test_fallbacks(self):
        e = errors.error_from_problem(422, {"code": "some_new_code", "detail": "x"})
        self.assertIs(type(e), errors.Unprocessable)
        e = errors.error_from_problem(502, None)  # a proxy's HTML page
        self.assertIs(type(e), errors.ServerError)
        self.assertEqual(e.code, "http_502")
        e = errors.error_from_problem(400, {"code": "overloaded"})  # code and status disagree
        self.assertIs(type(e), errors.BadRequest)
        e = errors.error_from_problem(418, {"code": "teapot", "detail": "x"})
        self.assertIs(type(e), errors.ApiError)

    def test_retry_after(self):
        e = errors.error_from_problem(429, {"code": "rate_limited"}, {"retry-after": "3"})
        self.assertEqual(e.retry_after, 3.0)

    def test_round_refused(self):
        r = dpbudget.Round.from_json({"round_id": "r1", "participants": 2, "charged": 0,
                                      "admitted": [], "refused": [
                                          {"client": "a", "reason": "over_budget"},
                                          {"client": "b", "reason": "all_or_nothing"}]})
        with self.assertRaises(errors.OverBudget) as cm:
            r.raise_for_refused()
        self.assertIn("1 all_or_nothing, 1 over_budget", str(cm.exception))
        r.refused = r.refused[1:]
        with self.assertRaises(errors.RoundRefused):
            r.raise_for_refused()


class Splitting(unittest.TestCase):
    def test_chunks_fit_max_body(self):
        c = dpbudget.Client("http://127.0.0.1:1", max_body=2000)
        items = [{"id": "client-%05d" % i, "budget": {"epsilon": 8.0, "delta": 1e-5}}
                 for i in range(500)]
        chunks = [(s, json.loads(b)) for s, b in c._chunks(items, 10000, "clients")]
        self.assertEqual(sum((b["clients"] for _, b in chunks), []), items)
        self.assertEqual([s for s, _ in chunks][:2], [0, len(chunks[0][1]["clients"])])
        for _, b in c._chunks(items, 10000, "clients"):
            self.assertLessEqual(len(b), 2000)
        self.assertEqual([len(json.loads(b)["clients"]) for _, b in
                          c._chunks(items, 7, "clients")][:3], [7, 7, 7])
        # ids, with the other members of the body; odd strings encoded as JSON
        ids = ["a%d" % i for i in range(300)] + ['q"uote', "back\\slash", "caf\u00e9"]
        bodies = [json.loads(b) for _, b in c._chunks(ids, 10000, "clients",
                                                       {"event_name": "e", "max_rounds": 1})]
        self.assertEqual(sum((b["clients"] for b in bodies), []), ids)
        self.assertTrue(all(b["event_name"] == "e" and b["max_rounds"] == 1 for b in bodies))

    def test_arguments_checked_before_sending(self):
        c = dpbudget.Client("http://127.0.0.1:1", retries=0)
        with self.assertRaises(TypeError):
            c.charge("alice", DPSGD)  # a string is not a list of ids
        with self.assertRaises(ValueError):
            c.charge(["a"])  # no event
        with self.assertRaises(ValueError):
            c.delta(DPSGD)
        with self.assertRaises(ValueError):
            dpbudget.Client("ftp://x")
        with self.assertRaises(ValueError):
            dpbudget.Client("http://127.0.0.1", token="a\nb")

    def test_round_ids(self):
        a, b = dpbudget.new_round_id(), dpbudget.new_round_id()
        self.assertNotEqual(a, b)
        import re
        self.assertRegex(a, r"^[A-Za-z0-9][A-Za-z0-9._~:@+-]{0,127}$")
        self.assertIsNone(re.search("/", a))


class Stub(http.server.BaseHTTPRequestHandler):
    """Answers from the scripted list `script` of (status, headers, body); records requests."""
    protocol_version = "HTTP/1.1"
    script = []
    seen = []

    def log_message(self, *a):
        pass

    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        Stub.seen.append((self.command, self.path, body, dict(self.headers)))
        status, hdrs, out = Stub.script.pop(0) if Stub.script else (200, {}, {"ok": True})
        data = json.dumps(out).encode()
        self.send_response(status)
        ctype = "application/problem+json" if status >= 400 else "application/json"
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _answer


class StubCase(unittest.TestCase):
    """A scripted stub server for the test class (no daemon; waits recorded, not slept)."""

    @classmethod
    def setUpClass(cls):
        cls.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()
        cls.url = "http://127.0.0.1:%d" % cls.srv.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def client(self, **kw):
        c = dpbudget.Client(self.url, token="tok", **kw)
        self.waits = []
        c._sleep = self.waits.append
        Stub.seen = []
        return c


class Retries(StubCase):
    """The retry policy against a scripted server."""

    def test_retry_after_honoured(self):
        c = self.client(retries=3, backoff=0.01)
        Stub.script = [(503, {"Retry-After": "2"}, {"code": "overloaded", "detail": "busy"}),
                       (429, {"Retry-After": "1"}, {"code": "rate_limited", "detail": "slow"}),
                       (200, {}, {"summary": 1})]
        self.assertEqual(c.request("GET", "/v1/x").body, {"summary": 1})
        self.assertEqual(self.waits, [2.0, 1.0])
        self.assertEqual(len(Stub.seen), 3)
        self.assertEqual(Stub.seen[0][3].get("Authorization"), "Bearer tok")

    def test_backoff_grows_and_gives_up(self):
        c = self.client(retries=3, backoff=0.1, max_backoff=0.3)
        Stub.script = [(503, {}, {"code": "overloaded", "detail": "busy"})] * 4
        with self.assertRaises(errors.Overloaded):
            c.request("GET", "/v1/x")
        self.assertEqual(len(self.waits), 3)
        self.assertTrue(0.05 <= self.waits[0] <= 0.1 and 0.1 <= self.waits[1] <= 0.2 and
                        0.15 <= self.waits[2] <= 0.3, self.waits)

    def test_long_retry_after_not_waited(self):
        c = self.client(retries=3, max_retry_after=5)
        Stub.script = [(429, {"Retry-After": "30"}, {"code": "rate_limited", "detail": "x"})]
        with self.assertRaises(errors.RateLimited) as cm:
            c.request("GET", "/v1/x")
        self.assertEqual((self.waits, cm.exception.retry_after), ([], 30.0))

    def test_post_retried_only_when_idempotent(self):
        c = self.client(retries=3)
        Stub.script = [(503, {}, {"code": "overloaded", "detail": "busy"})]
        with self.assertRaises(errors.Overloaded):
            c.request("POST", "/v1/x", {"a": 1})
        self.assertEqual(len(Stub.seen), 1)
        # a round is idempotent by its round id: retried, with the same id each time
        Stub.script = [(503, {}, {"code": "not_durable", "detail": "disk"}),
                       (200, {}, {"round_id": "x", "participants": 1, "charged": 1,
                                  "admitted": [], "refused": []})]
        Stub.seen = []
        c.charge(["a"], DPSGD)
        ids = [json.loads(b)["round_id"] for _, _, b, _ in Stub.seen]
        self.assertEqual(len(ids), 2)
        self.assertEqual(ids[0], ids[1])

    def test_other_errors_not_retried(self):
        c = self.client(retries=3)
        for st, code in ((400, "unknown_field"), (409, "conflict"), (500, "internal")):
            Stub.script = [(st, {}, {"code": code, "detail": "no", "field": "x"})]
            Stub.seen = []
            with self.assertRaises(errors.ApiError) as cm:
                c.request("GET", "/v1/x")
            self.assertEqual((cm.exception.code, len(Stub.seen)), (code, 1))

    def test_connection_refused_retried_then_raised(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        c = dpbudget.Client("http://127.0.0.1:%d" % port, retries=2, backoff=0.01)
        waits = []
        c._sleep = waits.append
        with self.assertRaises(errors.TransportError) as cm:
            c.charge(["a"], DPSGD, round_id="r-fixed")
        self.assertEqual((len(waits), cm.exception.round_id), (2, "r-fixed"))
        self.assertIn("3 attempts", str(cm.exception))


class BulkSplitting(StubCase):
    """register_clients and eligibility split their lists to fit max_body (stub server)."""

    def test_batch_split_and_error_named_by_global_index(self):
        c = self.client(max_body=1500)
        items = [{"id": "c%04d" % i, "epsilon": 8, "delta": 1e-5} for i in range(60)]
        ok = {"results": [], "created": 0, "updated": 0, "unchanged": 0, "conflicts": 0}
        Stub.script = [(200, {}, ok), (400, {}, {"code": "number_out_of_range", "detail": "no",
                                                "field": "clients[3].budget.epsilon"})]
        with self.assertRaises(errors.BadRequest) as cm:
            c.register_clients(items)
        first = json.loads(Stub.seen[0][2])["clients"]
        self.assertLess(len(first), 60)
        self.assertLessEqual(len(Stub.seen[0][2]), 1500)
        self.assertEqual(cm.exception.field, "clients[%d].budget.epsilon" % (len(first) + 3))
        self.assertEqual(first[0], {"id": "c0000", "budget": {"epsilon": 8, "delta": 1e-5}})

    def test_eligibility_split_and_merged(self):
        c = self.client(max_body=600)
        ids = ["client-%04d" % i for i in range(100)]
        def answer(chunk):
            return (200, {}, {"eligible": len(chunk), "ineligible": 0, "clients": [
                {"id": x, "eligible": True, "affordable_rounds": 1} for x in chunk]})
        Stub.script = [answer(["x"])] * 50  # one eligible per request
        el = c.eligibility(ids, event_name="ev")
        sent = [json.loads(b)["clients"] for _, _, b, _ in Stub.seen]
        self.assertGreater(len(sent), 1)
        self.assertEqual(sum(sent, []), ids)
        self.assertTrue(all(json.loads(b)["event_name"] == "ev" for _, _, b, _ in Stub.seen))
        self.assertEqual(el.eligible, len(sent))

    def test_eligibility_follows_cursors(self):
        c = self.client()
        def page(ids, nxt):
            return (200, {}, {"eligible": len(ids), "ineligible": 0, "total": 5,
                              "next_cursor": nxt, "clients": [
                                  {"id": x, "eligible": True, "affordable_rounds": 1}
                                  for x in ids]})
        Stub.script = [page(["a", "b"], "o2"), page(["c", "d"], "o4"), page(["e"], None)]
        el = c.eligibility(label="k=v", event_name="ev", batch_size=2)
        sent = [json.loads(b) for _, _, b, _ in Stub.seen]
        self.assertEqual([x.id for x in el.clients], ["a", "b", "c", "d", "e"])
        self.assertEqual([b.get("cursor") for b in sent], [None, "o2", "o4"])
        self.assertTrue(all(b["limit"] == 2 and b["label"] == "k=v" for b in sent))


class Stuck(unittest.TestCase):
    """The status stuck: a record names the round that refused it; every status the
    daemon's openapi.yaml lists for a client is in STATUSES."""

    def test_record(self):
        base = {"id": "c", "budget": {"epsilon": 1, "delta": 1e-5}, "spent": {"epsilon": 0},
                "remaining": {"epsilon": 1}, "rounds": 0, "version": 3}
        c = dpbudget.ClientRecord.from_json(dict(base, status="stuck", stuck_round="r9",
                                                 stuck_since=41))
        self.assertEqual((c.status, c.stuck, c.stuck_round, c.stuck_since),
                         ("stuck", True, "r9", 41))
        c = dpbudget.ClientRecord.from_json(dict(base, status="active"))
        self.assertEqual((c.stuck, c.stuck_round, c.stuck_since), (False, None, None))

    def test_statuses_match_openapi(self):
        here = os.path.dirname(os.path.abspath(__file__))
        spec = os.path.join(here, "..", "..", "..", "openapi.yaml")
        if not os.path.exists(spec):
            self.skipTest("openapi.yaml is not beside the package")
        with open(spec) as f:
            text = f.read()
        enums = [line.split("enum: [", 1)[1].split("]", 1)[0]
                 for line in text.splitlines() if "enum: [active, " in line]
        self.assertGreaterEqual(len(enums), 3)  # the record and both list filters
        for e in enums:
            self.assertEqual(tuple(x.strip() for x in e.split(",")), dpbudget.STATUSES)


class Python39(unittest.TestCase):
    def test_syntax(self):
        """Every module parses as Python 3.9 (the oldest version the package supports)."""
        root = os.path.dirname(os.path.abspath(dpbudget.__file__))
        for name in sorted(os.listdir(root)):
            if name.endswith(".py"):
                with open(os.path.join(root, name)) as f:
                    ast.parse(f.read(), name, feature_version=(3, 9))


class Names(unittest.TestCase):
    """An eligibility candidate is named `client`, as round admissions and refusals are; `id`
    stays readable (the daemon sends both; an older daemon sends `id` only)."""

    def test_client_and_id(self):
        for item in ({"client": "ana", "id": "ana", "eligible": True},
                     {"id": "ana", "eligible": True}):
            el = dpbudget.Eligibility.from_json({"eligible": 1, "ineligible": 0,
                                                  "clients": [item]})
            self.assertEqual(el.clients[0].client, "ana")
            self.assertEqual(el.clients[0].id, "ana")
            self.assertEqual(el.eligible_ids, ["ana"])
        r = dpbudget.Round.from_json({"round_id": "r", "admitted": [{"client": "ana"}],
                                      "refused": [{"client": "ben", "reason": "over_budget"}]})
        self.assertEqual((r.admitted[0].client, r.refused[0].client), ("ana", "ben"))
