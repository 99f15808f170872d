"""Checking the ledger's transparency log without trusting the daemon (docs/TRANSPARENCY.md).

Everything here is written from the RFCs, not from the daemon's code:

* ``canonical_json``: RFC 8785 (JSON Canonicalization Scheme), the bytes signatures cover;
* ``verify_signed``: an Ed25519 (RFC 8032) signature of a tree head or receipt over the
  canonical JSON of the object without its ``signature`` member (needs the ``cryptography``
  package: ``pip install dpbudget[audit]``);
* ``leaf_hash``, ``verify_inclusion``, ``verify_consistency``: RFC 9162 section 2.1 Merkle
  tree hashing and proofs (standard-library hashlib);
* ``event_digest``: the digest a receipt carries for its event, SHA-256 of the event's
  canonical JSON;
* ``entry_round_id``: which round a log entry (a ROUND or COMMIT record) belongs to.

Each check raises ``VerificationError`` saying what failed, or returns normally.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["VerificationError", "canonical_json", "key_id_of", "pinned_keys", "verify_signed",
           "leaf_hash", "verify_inclusion", "verify_consistency", "event_digest",
           "entry_round_id", "entry_seq", "REC_ROUND", "REC_COMMIT", "REC_TIMED"]

# log record types (docs/LEDGER.md, core/ledger/ledger_record.h) a receipt's leaf may hold
REC_ROUND = 3
REC_COMMIT = 5
REC_TIMED = 0x80


class VerificationError(Exception):
    """A signature, proof, digest or log entry does not check out."""


# ---------------------------------------------------------------- RFC 8785

def _es_number(x: float) -> str:
    """ECMAScript's Number.prototype.toString (ECMA-262 7.1.12.1), as RFC 8785 3.2.2.3 asks."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError("RFC 8785 has no form for NaN or an infinity")
    if x == 0:
        return "0"  # -0 too
    sign = "-" if x < 0 else ""
    r = repr(abs(x))  # the shortest digits that read back to x, the closest ones on a tie
    mant, _, exp = r.partition("e")
    ip, _, fp = mant.partition(".")
    digits = ip + fp
    n = len(ip) + (int(exp) if exp else 0)  # x = 0.digits * 10^n
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        return sign + s + "0" * (n - k)
    if 0 < n <= 21:
        return sign + s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + s
    e = n - 1
    es = ("+" if e >= 0 else "-") + str(abs(e))
    return sign + (s if k == 1 else s[0] + "." + s[1:]) + "e" + es


def _canon(v: Any, out: List[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, int):
        if abs(v) > 2 ** 53 - 1:
            raise ValueError("an integer past 2^53 - 1 is not exact as a double (RFC 8785)")
        out.append(_es_number(float(v)))
    elif isinstance(v, float):
        out.append(_es_number(v))
    elif isinstance(v, str):
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(",")
            _canon(x, out)
        out.append("]")
    elif isinstance(v, dict):
        out.append("{")
        # RFC 8785 3.2.3: names sorted by their UTF-16 code units
        for i, key in enumerate(sorted(v, key=lambda s: str(s).encode("utf-16-be"))):
            if not isinstance(key, str):
                raise TypeError("object names must be strings")
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _canon(v[key], out)
        out.append("}")
    else:
        raise TypeError("not a JSON value: %r" % type(v).__name__)


def canonical_json(v: Any) -> bytes:
    """The RFC 8785 canonical form of a JSON value (as json.loads gives it), UTF-8."""
    out: List[str] = []
    _canon(v, out)
    return "".join(out).encode("utf-8")


def event_digest(event: Mapping[str, Any]) -> str:
    """A receipt's event_digest: base64 SHA-256 of the event's canonical JSON (the event as
    the daemon writes it back, e.g. GET /v1/events/{name}'s "event")."""
    return base64.b64encode(hashlib.sha256(canonical_json(event)).digest()).decode()


# ---------------------------------------------------------------- Ed25519 (RFC 8032)

def key_id_of(public_key: bytes) -> str:
    """key_id: lowercase hex SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(public_key).hexdigest()


def pinned_keys(keys_answer: Mapping[str, Any]) -> Dict[str, bytes]:
    """{key_id: raw public key} from GET /v1/log/keys' answer, each key_id checked against
    its key."""
    out: Dict[str, bytes] = {}
    for k in keys_answer.get("keys") or []:
        raw = base64.b64decode(k["public_key"], validate=True)
        if len(raw) != 32:
            raise VerificationError("key %s is not 32 bytes" % k.get("key_id"))
        if key_id_of(raw) != k.get("key_id"):
            raise VerificationError("key_id %s is not the SHA-256 of its key" % k.get("key_id"))
        out[k["key_id"]] = raw
    return out


def verify_signed(obj: Mapping[str, Any], keys: Mapping[str, bytes]) -> None:
    """Check a signed tree head or receipt: its key_id names one of keys, and its signature
    is that key's Ed25519 signature of the canonical JSON of obj without "signature"."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    kid = obj.get("key_id")
    sig = obj.get("signature")
    if not isinstance(kid, str) or not isinstance(sig, str):
        raise VerificationError("no key_id or signature: nothing signed")
    if kid not in keys:
        raise VerificationError("signed by key %s, which is not one of the pinned keys" % kid)
    body = {k: v for k, v in obj.items() if k != "signature"}
    try:
        raw = base64.b64decode(sig, validate=True)
        Ed25519PublicKey.from_public_bytes(keys[kid]).verify(raw, canonical_json(body))
    except (InvalidSignature, ValueError) as e:
        raise VerificationError("bad signature by key %s" % kid) from e


# ---------------------------------------------------------------- RFC 9162 2.1

def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def leaf_hash(entry: bytes) -> bytes:
    """RFC 9162 2.1.1: SHA-256(0x00 || entry)."""
    return hashlib.sha256(b"\x00" + entry).digest()


def verify_inclusion(leaf: bytes, index: int, size: int, path: Sequence[bytes],
                     root: bytes) -> None:
    """RFC 9162 2.1.3.2: leaf (its leaf hash) is leaf number index of the tree of size leaves
    whose root is root."""
    if index >= size:
        raise VerificationError("leaf %d is not below tree size %d" % (index, size))
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise VerificationError("inclusion proof too long")
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0 or r != root:
        raise VerificationError("leaf %d is not in the tree of size %d with that root"
                                % (index, size))


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes,
                       proof: Sequence[bytes]) -> None:
    """RFC 9162 2.1.4.2: the tree of size second (second_root) extends the tree of size first
    (first_root): nothing in the first was changed or dropped."""
    if first > second:
        raise VerificationError("tree size went down from %d to %d: a rollback"
                                % (first, second))
    if first == second:
        if proof or first_root != second_root:
            raise VerificationError("two different roots for tree size %d: a fork" % first)
        return
    if first == 0:
        return  # the empty tree is a prefix of every tree
    p = list(proof)
    if first & (first - 1) == 0:
        p.insert(0, first_root)
    if not p:
        raise VerificationError("empty consistency proof")
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = p[0]
    for c in p[1:]:
        if sn == 0:
            raise VerificationError("consistency proof too long")
        if fn & 1 or fn == sn:
            fr = _node(c, fr)
            sr = _node(c, sr)
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            sr = _node(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0 or fr != first_root or sr != second_root:
        raise VerificationError("the tree of size %d does not extend the saved tree of size %d"
                                " (rollback or fork)" % (second, first))


# ---------------------------------------------------------------- log entries

def entry_round_id(entry: bytes) -> Optional[str]:
    """The round id of a ROUND or COMMIT record's entry (type u8 | seq u64 LE | payload whose
    first field is the round id, u32 LE length + bytes); None for any other record. A timed
    record (type | REC_TIMED, every record since the ledger keeps times) has its time, u64 LE
    milliseconds, before that payload."""
    if len(entry) < 9:
        return None
    kind, at = entry[0], 9
    if kind & REC_TIMED:
        kind, at = kind & ~REC_TIMED, 17
    if kind not in (REC_ROUND, REC_COMMIT) or len(entry) < at + 4:
        return None
    (n,) = struct.unpack_from("<I", entry, at)
    if at + 4 + n > len(entry):
        return None
    return entry[at + 4:at + 4 + n].decode("utf-8", "replace")


def entry_seq(entry: bytes) -> int:
    """The record's sequence number (leaf index + 1)."""
    if len(entry) < 9:
        raise VerificationError("log entry shorter than its head")
    seq: int = struct.unpack_from("<Q", entry, 1)[0]
    return seq
