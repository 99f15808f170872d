"""Signed tree heads, receipts and `dpbudget audit` (issue 36), checked by implementations
independent of the daemon: RFC 8785 against the rfc8785 package, Ed25519 by cryptography,
Merkle proofs against a tree written here from RFC 9162 (MTH, PATH, PROOF), and the audit
against real daemons: a clean run, a forged receipt, and a rollback (the daemon restarted on
an older copy of its data directory)."""
import base64
import hashlib
import io
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import unittest

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

import dpbudget
from dpbudget import cli
from dpbudget.audit import save_receipt
from dpbudget.transparency import (VerificationError, canonical_json, event_digest, leaf_hash,
                                   pinned_keys, verify_consistency, verify_inclusion,
                                   verify_signed)
import support
from support import Daemon

G2 = {"class_name": "GaussianDpEvent", "noise_multiplier": 2}
G3 = {"class_name": "GaussianDpEvent", "noise_multiplier": 3}


# ---------------------------------------------------------------- RFC 9162, from the RFC

def _h(b):
    return hashlib.sha256(b).digest()


def mth(leaves):
    """2.1.1: the Merkle Tree Hash of a list of entries."""
    n = len(leaves)
    if n == 0:
        return _h(b"")
    if n == 1:
        return _h(b"\x00" + leaves[0])
    k = 1
    while k * 2 < n:
        k *= 2
    return _h(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def path(m, leaves):
    """2.1.3.1: PATH(m, D[n])."""
    n = len(leaves)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return path(m, leaves[:k]) + [mth(leaves[k:])]
    return path(m - k, leaves[k:]) + [mth(leaves[:k])]


def subproof(m, leaves, b):
    """2.1.4.1: SUBPROOF(m, D[n], b)."""
    n = len(leaves)
    if m == n:
        return [] if b else [mth(leaves)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return subproof(m, leaves[:k], b) + [mth(leaves[k:])]
    return subproof(m - k, leaves[k:], False) + [mth(leaves[:k])]


class MerkleProofs(unittest.TestCase):
    def test_every_inclusion_and_consistency_up_to_40(self):
        leaves = [b"entry %d" % i for i in range(40)]
        for n in range(1, 41):
            root = mth(leaves[:n])
            for m in range(n):
                verify_inclusion(leaf_hash(leaves[m]), m, n, path(m, leaves[:n]), root)
            for m in range(1, n + 1):
                verify_consistency(m, n, mth(leaves[:m]), root,
                                   subproof(m, leaves[:n], True) if m < n else [])

    def test_wrong_proofs_are_caught(self):
        leaves = [b"e%d" % i for i in range(13)]
        root = mth(leaves)
        p = path(5, leaves)
        with self.assertRaises(VerificationError):
            verify_inclusion(leaf_hash(b"forged"), 5, 13, p, root)
        with self.assertRaises(VerificationError):
            verify_inclusion(leaf_hash(leaves[5]), 6, 13, p, root)
        with self.assertRaises(VerificationError):
            verify_inclusion(leaf_hash(leaves[5]), 5, 13, p[:-1], root)
        other = list(leaves)
        other[2] = b"rewritten"
        with self.assertRaises(VerificationError):  # a rewritten record: a fork
            verify_consistency(7, 13, mth(leaves[:7]), mth(other), subproof(7, other, True))
        with self.assertRaises(VerificationError):  # a rollback
            verify_consistency(13, 7, root, mth(leaves[:7]), [])


class CanonicalJson(unittest.TestCase):
    def test_against_the_rfc8785_package(self):
        rnd = random.Random(36)
        for _ in range(20000):
            x = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
            if x != x or x in (float("inf"), float("-inf")):
                continue
            self.assertEqual(canonical_json(x), rfc8785.dumps(x), x)
        o = {"\u20ac": 1, "\r": [None, True, False], "\ufb33": "a\x1fb\x7f\"\\",
             "1": 0.1, "\U0001f600": -0.0, "\u0080": 1e21, "\u00f6": {"z": 1, "a": 2}}
        self.assertEqual(canonical_json(o), rfc8785.dumps(o))

    def test_event_digest(self):
        self.assertEqual(event_digest(G2), "XlGvEn2Dd56zgkl/YlEl3I+c8riBGLOPLyNHZH6U670=")


# ---------------------------------------------------------------- against real daemons

def keygen(tmp):
    key = os.path.join(tmp, "log.key")
    out = subprocess.run([support.DAEMON, "keygen", key], capture_output=True, text=True,
                         check=True)
    return key, out.stdout.strip()


def make_clients(c, *ids):
    for i in ids:
        c.put_client(i, 10.0, 1e-5)


def verify_independently(keys, obj):
    """cryptography's Ed25519 over canonical bytes computed here (rfc8785 package)."""
    raw = {k["key_id"]: base64.b64decode(k["public_key"]) for k in keys["keys"]}
    body = {k: v for k, v in obj.items() if k != "signature"}
    Ed25519PublicKey.from_public_bytes(raw[obj["key_id"]]).verify(
        base64.b64decode(obj["signature"]), rfc8785.dumps(body))


class Receipts(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dpb-sign-")
        self.key, self.key_id = keygen(self.tmp)
        self.d = Daemon("--signing-key", self.key)
        self.c = dpbudget.Client(self.d.url)

    def tearDown(self):
        self.c.close()
        self.d.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_receipts_and_tree_head_verify_independently(self):
        keys = self.c.log_keys()
        self.assertEqual(keys["keys"][0]["key_id"], self.key_id)
        self.assertEqual(hashlib.sha256(base64.b64decode(keys["keys"][0]["public_key"]))
                         .hexdigest(), self.key_id)
        make_clients(self.c, "p-1", "p-2")
        r = self.c.charge(["p-1", "p-2"], G2, round_id="t1")
        self.assertIsNotNone(r.receipt)
        verify_independently(keys, r.receipt)
        verify_signed(r.receipt, pinned_keys(keys))
        self.assertEqual(r.receipt["event_digest"], event_digest(G2))
        self.assertEqual([x["client"] for x in r.receipt["charged"]], ["p-1", "p-2"])
        self.assertEqual(r.receipt["charged"][0]["spent_after"], r.admitted[0].spent_after)
        forged = dict(r.receipt, charged=[dict(r.receipt["charged"][0], spent_after=0.0)])
        with self.assertRaises(VerificationError):
            verify_signed(forged, pinned_keys(keys))
        self.c.reserve(["p-1", "p-2"], G3, round_id="t2")
        cm = self.c.commit("t2", ["p-2"])
        verify_independently(keys, cm.receipt)
        self.assertEqual(cm.receipt["phase"], "commit")
        self.assertEqual(cm.receipt["event_digest"], event_digest(G3))
        sth = self.c.log_sth()
        verify_independently(keys, sth)
        self.assertGreater(sth["tree_size"], cm.receipt["leaf_index"])

    def audit(self, state, receipts):
        out, err = io.StringIO(), io.StringIO()
        rc = cli.main(["--url", self.d.url, "--json", "audit", "p-1", "--receipts", receipts,
                       "--state", state], out, err)
        return rc, json.loads(out.getvalue() or "{}")

    def test_audit_catches_a_forged_receipt_and_a_rollback(self):
        make_clients(self.c, "p-1", "p-2")
        rdir = os.path.join(self.tmp, "receipts")
        state = os.path.join(self.tmp, "state.json")
        r = self.c.charge(["p-1", "p-2"], G2, round_id="a1")
        save_receipt(rdir, r.receipt, G2)
        rc, rep = self.audit(state, rdir)
        self.assertEqual(rc, 0, rep)
        self.assertAlmostEqual(rep["recomputed"], r.admitted[0].spent_after, delta=1e-12)
        # a backup of the data directory, then more charges, and a second audit
        self.d.stop(keep=True)
        backup = os.path.join(self.tmp, "backup")
        shutil.copytree(self.d.path("data"), backup)
        self.d = Daemon("--signing-key", self.key, tmp=self.d.tmp)
        self.c = dpbudget.Client(self.d.url)
        r = self.c.charge(["p-1"], G3, round_id="a2")
        save_receipt(rdir, r.receipt, G3)
        rc, rep = self.audit(state, rdir)
        self.assertEqual(rc, 0, rep)
        # a forged receipt: a smaller spend, signature kept
        forged = dict(r.receipt, charged=[dict(r.receipt["charged"][0], spent_after=0.5)])
        fdir = os.path.join(self.tmp, "forged")
        save_receipt(fdir, forged, G3)
        rc, rep = self.audit(state, fdir)
        self.assertEqual(rc, 5)
        self.assertIn("bad signature", " ".join(rep["failures"]))
        # the rollback: the daemon restarted on the older copy, the same key
        self.d.stop(keep=True)
        shutil.rmtree(self.d.path("data"))
        shutil.copytree(backup, self.d.path("data"))
        self.d = Daemon("--signing-key", self.key, tmp=self.d.tmp)
        self.c = dpbudget.Client(self.d.url)
        rc, rep = self.audit(state, rdir)
        self.assertEqual(rc, 5)
        self.assertRegex(" ".join(rep["failures"]), "rollback")


if __name__ == "__main__":
    unittest.main()
