#!/usr/bin/env python3
"""check_tlog.py DPBUDGETD - the ledger's log as a Merkle tree, checked from outside over HTTP
with RFC 9162 section 2.1 written here (hashlib only; never the daemon's code).

A daemon on a fresh data directory (--snapshot-every 40, so most records end in archive/)
logs about 300 records (clients, named events, rounds), is restarted half way, and then:
- every entry is fetched (GET /v1/log/entries, in pages) and its leaf hash computed; the entry
  of leaf i is type | seq i + 1 (u64 LE) | payload;
- for every tree size n up to the log's size, the root is computed from the leaves by the
  definition (MTH), and inclusion proofs (first, last, middle and a random leaf) and
  consistency proofs (from 1, n - 1, the middle, a random size and the largest power of two
  not above n) fetched and verified with the algorithms of 2.1.3.2 and 2.1.4.2;
- a proof with one byte changed, or checked against another leaf or root, does not verify
  (the verifier can fail);
- the tree size before the restart is consistent with the one after.
Prints `FAIL ...` per failed check and one closing line `tlog: N passed, M failed`.
"""
import base64
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + what)
    return ok


# ---- RFC 9162 2.1 -------------------------------------------------------------------------

def sha(b):
    return hashlib.sha256(b).digest()


def leaf_hash(entry):
    return sha(b"\x00" + entry)


def node(l, r):
    return sha(b"\x01" + l + r)


def mth(leaves):
    n = len(leaves)
    if n == 0:
        return sha(b"")
    if n == 1:
        return leaves[0]
    k = 1
    while k * 2 < n:
        k *= 2
    return node(mth(leaves[:k]), mth(leaves[k:]))


def verify_inclusion(index, size, lh, path, root):
    """2.1.3.2"""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, lh
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node(p, r)
            if not fn & 1:
                while fn != 0 and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(first, second, first_hash, second_hash, proof):
    """2.1.4.2"""
    if first == second:
        return not proof and first_hash == second_hash
    if first > second or first == 0 or not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, first_hash)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node(c, fr)
            sr = node(c, sr)
            if not fn & 1:
                while fn != 0 and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_hash and sr == second_hash


# ---- the daemon ------------------------------------------------------------------------------

class Daemon:
    def __init__(self, binary, data):
        self.binary, self.data, self.proc, self.port = binary, data, None, None

    def start(self):
        pf = os.path.join(self.data + ".port")
        if os.path.exists(pf):
            os.unlink(pf)
        self.proc = subprocess.Popen([self.binary, "--data-dir", self.data, "--port", "0",
                                      "--port-file", pf, "--snapshot-every", "40",
                                      "--shutdown-grace", "0"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(pf) and open(pf).read().strip():
                self.port = int(open(pf).read().strip())
                return
            time.sleep(0.05)
        raise SystemExit("tlog: dpbudgetd did not start")

    def stop(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
            self.proc = None

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data,
                                     method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def log_size(d):
    st, body = d.call("GET", "/v1/log/proof/consistency?first=1&second=999999999999")
    detail = body.get("detail", "") if isinstance(body, dict) else ""
    check(st == 400 and "current size " in detail, "the size from a 400: %s %s" % (st, body))
    return int(detail.split("current size ")[1].split()[0])


def make_records(d, start, count):
    g = {"class_name": "GaussianDpEvent", "noise_multiplier": 40}
    for i in range(start, start + count):
        if i % 10 == 3:
            st, _ = d.call("PUT", "/v1/events/ev%d" % i, {"event": dict(g, noise_multiplier=40 + i)})
        elif i % 10 == 7:
            st, _ = d.call("POST", "/v1/rounds", {"round_id": "r%d" % i, "event": dict(g, noise_multiplier=50 + i),
                                                  "participants": ["c%d" % (i - 1), "c%d" % (i - 2)]})
        else:
            st, _ = d.call("PUT", "/v1/clients/c%d" % i, {"budget": {"epsilon": 4, "delta": 1e-5}})
        check(st in (200, 201), "record %d: %s" % (i, st))


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/dpbudgetd"
    tmp = tempfile.mkdtemp(prefix="dpb-tlog-")
    d = Daemon(binary, os.path.join(tmp, "data"))
    rng = random.Random(36)
    try:
        d.start()
        make_records(d, 0, 140)
        size0 = log_size(d)
        d.stop()
        d.start()
        make_records(d, 140, 120)
        n = log_size(d)
        check(n > size0 >= 140, "sizes %d then %d" % (size0, n))
        leaves = []
        while len(leaves) < n:
            st, body = d.call("GET", "/v1/log/entries?start=%d&end=%d" % (len(leaves), n))
            if not check(st == 200 and body["entries"], "entries from %d: %s" % (len(leaves), st)):
                break
            for e in body["entries"]:
                raw = base64.b64decode(e["entry"])
                i = len(leaves)
                check(e["leaf_index"] == i and int.from_bytes(raw[1:9], "little") == i + 1,
                      "entry %d names leaf %s seq %d" % (i, e["leaf_index"], int.from_bytes(raw[1:9], "little")))
                leaves.append(leaf_hash(raw))
        roots = [mth(leaves[:k]) for k in range(n + 1)]
        archived = len(os.listdir(os.path.join(d.data, "archive")))
        check(archived >= 2, "archive segments: %d" % archived)
        for size in range(1, n + 1):
            for m in sorted({0, size - 1, size // 2, rng.randrange(size)}):
                st, body = d.call("GET", "/v1/log/proof/inclusion?leaf_index=%d&tree_size=%d" % (m, size))
                path = [base64.b64decode(h) for h in body.get("audit_path", [])] if st == 200 else []
                check(st == 200 and verify_inclusion(m, size, leaves[m], path, roots[size]),
                      "inclusion of %d in %d: %s" % (m, size, st))
                if path and size > 1:
                    bad = [bytes([path[0][0] ^ 1]) + path[0][1:]] + path[1:]
                    check(not verify_inclusion(m, size, leaves[m], bad, roots[size]),
                          "a changed audit path verifies (%d in %d)" % (m, size))
                    other = (m + 1) % size
                    check(leaves[other] == leaves[m] or
                          not verify_inclusion(m, size, leaves[other], path, roots[size]),
                          "another leaf's path verifies (%d in %d)" % (m, size))
            p2 = 1 << (size.bit_length() - 1)
            for first in sorted({1, max(1, size - 1), max(1, size // 2), 1 + rng.randrange(size), p2}):
                st, body = d.call("GET", "/v1/log/proof/consistency?first=%d&second=%d" % (first, size))
                proof = [base64.b64decode(h) for h in body.get("proof", [])] if st == 200 else []
                check(st == 200 and verify_consistency(first, size, roots[first], roots[size], proof),
                      "consistency %d -> %d: %s" % (first, size, st))
                if first < size:
                    check(not verify_consistency(first, size, roots[first], roots[size - 1] if size - 1 != first
                                                 else sha(b"x"), proof) or roots[size - 1] == roots[size],
                          "a consistency proof verifies against another root (%d -> %d)" % (first, size))
        st, body = d.call("GET", "/v1/log/proof/consistency?first=%d&second=%d" % (size0, n))
        proof = [base64.b64decode(h) for h in body.get("proof", [])] if st == 200 else []
        check(st == 200 and verify_consistency(size0, n, roots[size0], roots[n], proof),
              "the tree before the restart (%d) is a prefix of the one after (%d)" % (size0, n))
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("tlog: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
