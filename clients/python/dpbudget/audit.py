"""`dpbudget audit`: one client checks what the ledger told it, without trusting the daemon
(docs/TRANSPARENCY.md, "Auditing as a client").

What a client keeps:

* its receipts: a directory of JSON files, one per charge, each ``{"receipt": {...},
  "event": {...}}`` (the event is optional: a commit's client may not have it at hand) as
  ``save_receipt`` writes them (``<round_id>.<phase>.json``);
* a state file: the log's pinned public keys and the last tree head it checked
  (``{"keys": {key_id: base64}, "sth": {...}}``), written by ``audit`` after every run
  that found nothing wrong.

``audit`` then checks, and says which check failed:

1. the latest signed tree head (GET /v1/log/sth) is signed by a pinned key (keys are pinned
   on the first run from GET /v1/log/keys, or from a file given out of band);
2. it extends the tree head saved before: a consistency proof (RFC 9162 2.1.4); a smaller
   tree, or another root at the same size, is a rollback or a fork;
3. each receipt is signed by a pinned key, its leaf is below the tree size, the log entry at
   that leaf is the receipt's round's ROUND or COMMIT record, and the entry is in the tree
   (an inclusion proof, 2.1.3); a saved event matches the receipt's event_digest;
4. the client's spend: its receipts, in log order, chain (each charge starts where the last
   ended), the last one ends at the spend the ledger shows now, and the compute API
   recomputes it from the saved events (the client's accountant, its delta and neighboring
   relation; rdp must agree to 1e-9 relative; pld to 1e-3; a privacy filter's level is not
   a composition epsilon: not recomputed).
"""
from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .client import Client
from .transparency import (VerificationError, entry_round_id, entry_seq, event_digest, leaf_hash,
                           pinned_keys, verify_consistency, verify_inclusion, verify_signed)

__all__ = ["AuditReport", "audit", "save_receipt", "load_receipts"]


@dataclass
class AuditReport:
    """What `audit` found: ``failures`` (empty: everything checked out) and ``notes``."""
    tree_size: int = 0
    receipts: int = 0
    failures: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    spent: Optional[float] = None
    recomputed: Optional[float] = None

    @property
    def ok(self) -> bool:
        return not self.failures


def save_receipt(directory: str, receipt: Dict[str, Any],
                 event: Optional[Dict[str, Any]] = None) -> str:
    """Keep a receipt (and the event it charged, when known) in directory; its path."""
    os.makedirs(directory, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", "%s.%s" % (receipt.get("round_id"),
                                                       receipt.get("phase")))
    path = os.path.join(directory, name + ".json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"receipt": receipt, "event": event} if event is not None
                  else {"receipt": receipt}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load_receipts(path: str) -> List[Tuple[str, Dict[str, Any], Optional[Dict[str, Any]]]]:
    """(file, receipt, event or None) of a directory of saved receipts, or of one file."""
    files = ([os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".json")]
             if os.path.isdir(path) else [path])
    out: List[Tuple[str, Dict[str, Any], Optional[Dict[str, Any]]]] = []
    for fn in files:
        with open(fn) as f:
            d = json.load(f)
        if not isinstance(d, dict) or not isinstance(d.get("receipt"), dict):
            raise ValueError("%s: not a saved receipt ({\"receipt\": {...}})" % fn)
        ev = d.get("event")
        out.append((fn, d["receipt"], ev if isinstance(ev, dict) else None))
    return out


def _b64(s: Any) -> bytes:
    if not isinstance(s, str):
        raise VerificationError("a hash is not a base64 string")
    return base64.b64decode(s, validate=True)


def _int(d: Dict[str, Any], k: str) -> int:
    v = d.get(k)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise VerificationError("%s is not a whole number" % k)
    return v


def _check_heads(c: Client, keys: Dict[str, bytes], saved: Optional[Dict[str, Any]],
                 rep: AuditReport) -> Optional[Dict[str, Any]]:
    """The latest tree head, checked against the saved one; None after a failure."""
    latest = c.log_sth()
    try:
        verify_signed(latest, keys)
    except VerificationError as e:
        rep.failures.append("latest tree head: %s" % e)
        return None
    rep.tree_size = _int(latest, "tree_size")
    if saved is None:
        rep.notes.append("no tree head saved before: this one (size %d) is saved for the next "
                         "audit" % rep.tree_size)
        return latest
    try:
        verify_signed(saved, keys)
        first, second = _int(saved, "tree_size"), rep.tree_size
        proof: List[bytes] = []
        if 0 < first < second:
            proof = [_b64(h) for h in c.log_consistency(first, second).get("proof") or []]
        verify_consistency(first, second, _b64(saved.get("root_hash")),
                           _b64(latest.get("root_hash")), proof)
    except VerificationError as e:
        rep.failures.append("consistency with the saved tree head (size %s): %s"
                            % (saved.get("tree_size"), e))
        return None
    return latest


def _check_receipt(c: Client, keys: Dict[str, bytes], latest: Dict[str, Any], fn: str,
                   r: Dict[str, Any], ev: Optional[Dict[str, Any]], rep: AuditReport) -> bool:
    try:
        verify_signed(r, keys)
        i, n = _int(r, "leaf_index"), _int(latest, "tree_size")
        if i >= n:
            raise VerificationError("its leaf %d is beyond the latest tree (size %d): the "
                                    "charge was dropped, or the ledger rolled back" % (i, n))
        ents = [e for e in c.log_entries(i, i + 1).get("entries") or []
                if e.get("leaf_index") == i]
        if not ents:
            raise VerificationError("the log has no entry %d" % i)
        entry = _b64(ents[0].get("entry"))
        if entry_seq(entry) != i + 1 or entry_round_id(entry) != r.get("round_id"):
            raise VerificationError("log entry %d is not round %s's charge record"
                                    % (i, r.get("round_id")))
        path = [_b64(h) for h in c.log_inclusion(i, n).get("audit_path") or []]
        verify_inclusion(leaf_hash(entry), i, n, path, _b64(latest.get("root_hash")))
        if ev is not None and r.get("event_digest") is not None \
                and event_digest(ev) != r.get("event_digest"):
            raise VerificationError("the saved event is not the one the receipt charged")
    except VerificationError as e:
        rep.failures.append("%s: %s" % (os.path.basename(fn), e))
        return False
    return True


def _check_spend(c: Client, client_id: str,
                 mine: List[Tuple[Dict[str, Any], Dict[str, Any], Optional[Dict[str, Any]]]],
                 rep: AuditReport) -> None:
    """mine: (receipt, the client's charged item, event) in log order."""
    rec = c.get_client(client_id).raw
    spent = rec.get("spent") or {}
    rep.spent = spent.get("epsilon") if isinstance(spent.get("epsilon"), (int, float)) else None
    last = 0.0
    for r, item, _ in mine:
        before = item.get("spent_before")
        if isinstance(before, (int, float)) and abs(before - last) > 1e-9 * max(1.0, abs(last)):
            rep.failures.append("round %s starts at spend %r, the receipts before end at %r: a "
                                "charge the client holds no receipt for" % (r.get("round_id"),
                                                                          before, last))
        after = item.get("spent_after")
        last = float(after) if isinstance(after, (int, float)) else float("inf")
    if rep.spent is not None and abs(rep.spent - last) > 1e-9 * max(1.0, abs(last)):
        rep.failures.append("the ledger shows spend %r now, the receipts end at %r"
                            % (rep.spent, last))
    mode = rec.get("accounting")
    events = [ev for _, _, ev in mine]
    if mode not in ("rdp", "pld"):
        rep.notes.append("accounting %s: its spend is a filter's level, not recomputed" % mode)
        return
    if any(ev is None for ev in events) or not events:
        rep.notes.append("spend not recomputed: not every receipt has its event saved")
        return
    delta = (rec.get("budget") or {}).get("delta")
    body: Dict[str, Any] = {"event": {"class_name": "ComposedDpEvent", "events": events},
                            "delta": delta, "accountant": mode,
                            "neighboring_relation": rec.get("neighboring_relation")}
    ans = c.request("POST", "/v1/epsilon", body, idempotent=True).body
    eps = ans.get("epsilon") if isinstance(ans, dict) else None
    rep.recomputed = float(eps) if isinstance(eps, (int, float)) else None
    tol = 1e-9 if mode == "rdp" else 1e-3
    if rep.recomputed is None or abs(rep.recomputed - last) > tol * max(1.0, abs(last)):
        rep.failures.append("the compute API gives epsilon %r for the client's events (%s), the "
                            "receipts say %r" % (rep.recomputed, mode, last))


def audit(c: Client, client_id: str, receipts_path: str, state_path: str,
          keys_path: Optional[str] = None) -> AuditReport:
    """Run the checks of this module's docstring; the state file is updated only when
    nothing failed."""
    rep = AuditReport()
    state: Dict[str, Any] = {}
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
    if state.get("keys"):
        keys = {k: base64.b64decode(v) for k, v in state["keys"].items()}
    elif keys_path:
        with open(keys_path) as f:
            keys = pinned_keys(json.load(f))
    else:
        keys = pinned_keys(c.log_keys())
        rep.notes.append("keys pinned on first use from GET /v1/log/keys: compare their "
                         "key_ids with the operator's out of band")
    if not keys:
        rep.failures.append("no signing keys: the daemon runs without --signing-key")
        return rep
    latest = _check_heads(c, keys, state.get("sth"), rep)
    if latest is None:
        return rep
    mine: List[Tuple[Dict[str, Any], Dict[str, Any], Optional[Dict[str, Any]]]] = []
    for fn, r, ev in load_receipts(receipts_path):
        rep.receipts += 1
        if not _check_receipt(c, keys, latest, fn, r, ev, rep):
            continue
        for item in r.get("charged") or []:
            if isinstance(item, dict) and item.get("client") == client_id:
                mine.append((r, item, ev))
    mine.sort(key=lambda t: int(t[0].get("leaf_index") or 0))
    if not rep.failures:
        _check_spend(c, client_id, mine, rep)
    if not rep.failures:
        state = {"keys": {k: base64.b64encode(v).decode() for k, v in keys.items()},
                 "sth": latest}
        tmp = state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, state_path)
    return rep
