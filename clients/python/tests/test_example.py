"""examples/: the federated loop end to end against a real daemon (small sizes), and the
guide's code sketches (examples/README.md) checked against the library's calls."""
import ast
import inspect
import os
import re
import sys
import unittest

import dpbudget
from support import Daemon

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import federated_loop  # noqa: E402


def check_sketch(tc, src):
    """Every `dpbudget.X` and `events.X` in src exists, every call on a Client (a name
    `ledger`, an attribute `.ledger`, or a name assigned dpbudget.Client(...)) names a
    method of Client whose signature takes the arguments used, and so do the calls of
    dpbudget.flower's Budgeted and answer_ledger_id. Returns the calls checked."""
    tree = ast.parse(src)
    clients = {"ledger"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            if isinstance(f, ast.Attribute) and f.attr == "Client":
                clients.update(t.id for t in node.targets if isinstance(t, ast.Name))
    calls = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "dpbudget":
                tc.assertTrue(hasattr(dpbudget, node.attr), node.attr)
            if node.value.id == "events":
                tc.assertTrue(hasattr(dpbudget.events, node.attr), node.attr)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("Budgeted", "answer_ledger_id"):
            from dpbudget import flower  # needs flwr (clients/python/.venv)
            try:
                inspect.signature(getattr(flower, node.func.id)).bind(
                    *[None] * len(node.args), **{k.arg: None for k in node.keywords})
            except TypeError as e:
                tc.fail("%s(...) in a sketch: %s" % (node.func.id, e))
            calls += 1
            continue
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        f = node.func
        owner = f.value
        if not ((isinstance(owner, ast.Name) and owner.id in clients) or
                (isinstance(owner, ast.Attribute) and owner.attr == "ledger")):
            continue
        meth = getattr(dpbudget.Client, f.attr, None)
        tc.assertIsNotNone(meth, "Client has no method %s" % f.attr)
        args = [None] * (len(node.args) + 1)  # self + positionals
        kwargs = {k.arg: None for k in node.keywords}
        try:
            inspect.signature(meth).bind(*args, **kwargs)
        except TypeError as e:
            tc.fail("%s(...) in a sketch: %s" % (f.attr, e))
        calls += 1
    return calls


def python_blocks(path):
    with open(path) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


class Guide(unittest.TestCase):
    def test_guide_sketches_call_the_library_as_it_is(self):
        blocks = python_blocks(os.path.join(ROOT, "examples", "README.md"))
        self.assertGreaterEqual(len(blocks), 2)
        self.assertGreaterEqual(sum(check_sketch(self, b) for b in blocks), 10)

    def test_readme_sketch(self):
        # the client's sketch moved from README.md to docs/PYTHON.md (the README links to it)
        blocks = python_blocks(os.path.join(ROOT, "docs/PYTHON.md"))
        self.assertGreaterEqual(sum(check_sketch(self, b) for b in blocks), 3)


class Loop(unittest.TestCase):
    def test_small_loop_with_exhaustion(self):
        """30 clients, rounds of 8 with 25% dropouts, budgets that run out: the counts of
        affordable rounds agree with what the rounds admit (no cohort refused), each client
        is charged for exactly the rounds it reported in (dropouts never), and the loop
        stops when too few can afford a round. Once asking eligibility every round, once
        keeping the counts between refreshes."""
        d = Daemon()
        try:
            c = dpbudget.Client(d.url)
            for run_id, refresh in (("t1", 1), ("t20", 20)):
                # a round is 50 steps at sigma 1, q 0.01: a budget of (1.5, 1e-5) affords 6
                rep = federated_loop.run(c, clients=30, rounds=60, per_round=8, dropout=0.25,
                                         epsilon=1.5, delta=1e-5, run_id=run_id,
                                         refresh_every=refresh, check=True)
                chk = rep["check"]
                self.assertEqual(chk["problems"], [], run_id)
                self.assertEqual(rep["stale_refusals"], 0, run_id)
                self.assertTrue(rep["event_by_name"] or "no named events yet")
                self.assertEqual(rep["registered"]["created"], 30)
                self.assertGreater(rep["rounds_done"], 3)
                self.assertIsNotNone(rep["stopped"], "the budgets should have run out")
                self.assertEqual(rep["admitted"], rep["rounds_done"] * 8)
                self.assertEqual(rep["admitted"], rep["reported"] + rep["dropped"])
                self.assertGreater(rep["dropped"], 0)
                # the ledger charged the reported ones only: 6 rounds each at most
                recs = list(c.iter_clients(label="pool=" + run_id))
                self.assertEqual(sum(r.rounds for r in recs), rep["reported"])
                self.assertLessEqual(max(r.rounds for r in recs), 6)
                self.assertGreater(chk["ineligible_now"], 0)
                self.assertTrue(any(r.status == "exhausted" for r in recs))
                if refresh == 1:
                    self.assertEqual(rep["eligibility_queries"], rep["rounds_done"] + 1)
                else:
                    self.assertLess(rep["eligibility_queries"], rep["rounds_done"])
                # re-running the registration changes nothing
                again = c.register_clients([
                    {"id": "%s-c%05d" % (run_id, i), "epsilon": 1.5, "delta": 1e-5,
                     "labels": {"pool": run_id}} for i in range(30)])
                self.assertEqual(again.unchanged, 30)
            c.close()
        finally:
            d.stop()
