"""Typed answers. Every class keeps the whole JSON answer in `raw`, so a field this
version does not model is still at hand. Infinite numbers ("infinite" on the wire) are
math.inf here; "-infinite" is -math.inf."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["real", "Condition", "Report", "DeltaPoint", "DeltaResult", "EpsilonPoint",
           "EpsilonResult", "CalibrateResult", "CurvePoint", "TradeoffPoint", "CurveResult",
           "Budget", "Spend", "ClientRecord", "ClientPage", "Admission", "Refusal", "Round",
           "BatchItem", "BatchResult", "EligibilityEntry", "Eligibility", "Charge",
           "HistoryPage", "NamedEvent", "EventPage", "Summary", "HistoryPoint", "LedgerHistory"]


def real(v: Any) -> Any:
    """A number of an answer: "infinite" is inf, "-infinite" -inf, None stays None."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v
    if v == "infinite":
        return math.inf
    if v == "-infinite":
        return -math.inf
    return v


def _reals(d: Any) -> Dict[str, Any]:
    """The dict with "infinite" read as inf (the same dict when it holds no string)."""
    if not isinstance(d, dict):
        return {}
    for v in d.values():
        if isinstance(v, str):
            return {k: real(x) for k, x in d.items()}
    return d


@dataclass
class Condition:
    name: str
    statement: str
    holds: bool
    lhs: Any
    rhs: Any

    @classmethod
    def from_json(cls, d: Any) -> Condition:
        return cls(d.get("name"), d.get("statement"), d.get("holds"), real(d.get("lhs")),
                   real(d.get("rhs")))


@dataclass
class Report:
    """What every computation answer says about itself: who computed it and how far it
    can be trusted (`guarantee`: upper_bound, estimate or lower_bound)."""
    accountant: str
    guarantee: str
    reference: str
    valid: bool
    neighboring_relation: str
    conditions: List[Condition]
    warnings: List[str]
    value_discretization_interval: Optional[float]
    raw: Dict[str, Any] = field(repr=False)

    @staticmethod
    def _common(d: Any) -> Dict[str, Any]:
        return dict(accountant=d.get("accountant"), guarantee=d.get("guarantee"),
                    reference=d.get("reference"), valid=d.get("valid"),
                    neighboring_relation=d.get("neighboring_relation"),
                    conditions=[Condition.from_json(c) for c in d.get("conditions") or []],
                    warnings=list(d.get("warnings") or []),
                    value_discretization_interval=d.get("value_discretization_interval"),
                    raw=d)


@dataclass
class DeltaPoint:
    epsilon: float
    delta: float
    ln_delta: float
    rdp_order: Optional[float] = None


@dataclass
class DeltaResult(Report):
    results: List[DeltaPoint] = field(default_factory=list)

    @property
    def delta(self) -> Optional[float]:
        """δ of the first (or only) ε asked."""
        return self.results[0].delta if self.results else None

    @classmethod
    def from_json(cls, d: Any) -> DeltaResult:
        pts = [DeltaPoint(real(r.get("epsilon")), real(r.get("delta")), real(r.get("ln_delta")),
                          r.get("rdp_order")) for r in d.get("results") or []]
        return cls(results=pts, **cls._common(d))


@dataclass
class EpsilonPoint:
    delta: float
    epsilon: float
    certified: bool
    rdp_order: Optional[float] = None


@dataclass
class EpsilonResult(Report):
    results: List[EpsilonPoint] = field(default_factory=list)

    @property
    def epsilon(self) -> Optional[float]:
        """ε of the first (or only) δ asked (inf when not certified)."""
        return self.results[0].epsilon if self.results else None

    @classmethod
    def from_json(cls, d: Any) -> EpsilonResult:
        pts = [EpsilonPoint(real(r.get("delta")), real(r.get("epsilon")), r.get("certified"),
                            r.get("rdp_order")) for r in d.get("results") or []]
        return cls(results=pts, **cls._common(d))


@dataclass
class CalibrateResult(Report):
    solve_for: str = ""
    value: float = 0.0
    tolerance: Optional[float] = None
    interval: Optional[Dict[str, float]] = None
    target: Dict[str, float] = field(default_factory=dict)
    achieved: Dict[str, float] = field(default_factory=dict)
    event: Dict[str, Any] = field(default_factory=dict)
    details: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Any) -> CalibrateResult:
        iv = d.get("interval")
        return cls(solve_for=d.get("solve_for"), value=d.get("value"), tolerance=d.get("tolerance"),
                   interval=_reals(iv) if iv is not None else None, target=_reals(d.get("target")),
                   achieved=_reals(d.get("achieved")), event=d.get("event") or {},
                   details=d.get("details") or {}, **cls._common(d))


@dataclass
class CurvePoint:
    epsilon: float
    delta: float


@dataclass
class TradeoffPoint:
    alpha: float
    beta: float


@dataclass
class CurveResult(Report):
    curve: List[CurvePoint] = field(default_factory=list)
    tradeoff: List[TradeoffPoint] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Any) -> CurveResult:
        return cls(curve=[CurvePoint(real(p.get("epsilon")), real(p.get("delta")))
                          for p in d.get("curve") or []],
                   tradeoff=[TradeoffPoint(p.get("alpha"), p.get("beta"))
                             for p in d.get("tradeoff") or []], **cls._common(d))


@dataclass
class Budget:
    epsilon: float
    delta: float


@dataclass
class Spend:
    """ε used at the budget's δ (an upper bound; inf when uncertified)."""
    epsilon: float
    delta: float
    delta_total_variation: float = 0.0


@dataclass
class ClientRecord:
    id: str
    budget: Budget
    accounting: str
    guarantee_kind: str
    neighboring_relation: str
    labels: Dict[str, str]
    spent: Spend
    remaining_epsilon: float
    rounds: int
    status: str
    version: int
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Any) -> ClientRecord:
        b: Any = d.get("budget") or {}
        s: Any = d.get("spent") or {}
        return cls(id=d.get("id"), budget=Budget(b.get("epsilon"), b.get("delta")),
                   accounting=d.get("accounting"), guarantee_kind=d.get("guarantee_kind"),
                   neighboring_relation=d.get("neighboring_relation"),
                   labels=dict(d.get("labels") or {}),
                   spent=Spend(real(s.get("epsilon")), s.get("delta"),
                               s.get("delta_total_variation", 0.0)),
                   remaining_epsilon=real((d.get("remaining") or {}).get("epsilon")),
                   rounds=d.get("rounds"), status=d.get("status"), version=d.get("version"), raw=d)


@dataclass
class ClientPage:
    clients: List[ClientRecord]
    total: int
    next_cursor: Optional[str]

    @classmethod
    def from_json(cls, d: Any) -> ClientPage:
        return cls([ClientRecord.from_json(c) for c in d.get("clients") or []], d.get("total"),
                   d.get("next_cursor"))


@dataclass
class Admission:
    client: str
    spent_before: float
    spent_after: float
    reason: str
    accounting: Optional[str] = None
    guarantee_kind: Optional[str] = None


@dataclass
class Refusal:
    client: str
    reason: str
    spent_before: Optional[float] = None
    would_spend: Optional[float] = None


@dataclass
class Round:
    """A round's answer. `phase` is "charge" (one step) or "reserve"; `state` is "charged"
    (one step), or for a reservation "reserved", "committed", "released" or "expired";
    `reserved` counts the clients a reservation holds now, `reported` the ids a commit
    charged. `replayed` says the daemon answered a repeated round id (or a repeated commit
    or release) from its store: nothing was applied again. `reserved_by` names the API key
    that holds a reservation (None without keys): only it or an admin key resolves it."""
    round_id: str
    policy: str
    dry_run: bool
    already_ran: bool
    participants: int
    charged: int
    admitted: List[Admission]
    refused: List[Refusal]
    phase: str = "charge"
    state: Optional[str] = None
    expires_at: Optional[str] = None
    reported: Optional[List[str]] = None
    reserved: int = 0
    reserved_by: Optional[str] = None
    summarized: bool = False
    replayed: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def admitted_ids(self) -> List[str]:
        return [a.client for a in self.admitted]

    @property
    def refused_ids(self) -> List[str]:
        return [r.client for r in self.refused]

    def raise_for_refused(self) -> Round:
        """Raise OverBudget (someone could not afford it) or RoundRefused (other reasons)
        when any participant was refused; return self otherwise."""
        from .errors import OverBudget, RoundRefused
        if not self.refused:
            return self
        if any(r.reason in ("over_budget", "exhausted") for r in self.refused):
            raise OverBudget(self)
        raise RoundRefused(self)

    @classmethod
    def from_json(cls, d: Any, replayed: bool = False) -> Round:
        adm = [Admission(a.get("client"), real(a.get("spent_before")), real(a.get("spent_after")),
                         a.get("reason"), a.get("accounting"), a.get("guarantee_kind"))
               for a in d.get("admitted") or []]
        ref = [Refusal(r.get("client"), r.get("reason"), real(r.get("spent_before")),
                       real(r.get("would_spend"))) for r in d.get("refused") or []]
        rep = d.get("reported")
        if isinstance(rep, list):
            rep = [x if isinstance(x, str) else x.get("client") for x in rep]
        return cls(round_id=d.get("round_id"), policy=d.get("policy"), dry_run=d.get("dry_run"),
                   already_ran=d.get("already_ran"), participants=d.get("participants"),
                   charged=d.get("charged"), admitted=adm, refused=ref,
                   phase=d.get("phase") or "charge", state=d.get("state"),
                   expires_at=d.get("expires_at"), reported=rep, reserved=d.get("reserved") or 0,
                   reserved_by=d.get("reserved_by"), summarized=bool(d.get("summarized")),
                   replayed=replayed, raw=d)


@dataclass
class BatchItem:
    id: str
    result: str  # created, updated, unchanged, conflict
    code: Optional[str] = None
    detail: Optional[str] = None
    version: Optional[int] = None
    field: Optional[str] = None


@dataclass
class BatchResult:
    """Per-item results of a bulk registration (several requests when it was split)."""
    results: List[BatchItem]
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    conflicts: int = 0

    @property
    def conflicted(self) -> List[BatchItem]:
        return [r for r in self.results if r.result == "conflict"]

    @classmethod
    def from_json(cls, d: Any) -> BatchResult:
        return cls([BatchItem(r.get("id"), r.get("result"), r.get("code"), r.get("detail"),
                              r.get("version"), r.get("field")) for r in d.get("results") or []],
                   d.get("created", 0), d.get("updated", 0), d.get("unchanged", 0),
                   d.get("conflicts", 0))

    def extend(self, other: BatchResult) -> None:
        self.results.extend(other.results)
        self.created += other.created
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.conflicts += other.conflicts


@dataclass
class EligibilityEntry:
    """One candidate of an eligibility answer. `client` is its id (the daemon's answers name
    it so, as round answers do); `id` is the same, the name of earlier versions."""
    client: str
    eligible: bool
    affordable_rounds: Optional[int] = None
    affordable_rounds_capped: bool = False
    spent: Dict[str, Any] = field(default_factory=dict)
    remaining: Dict[str, Any] = field(default_factory=dict)
    reason: Optional[str] = None
    accounting: Optional[str] = None

    @property
    def id(self) -> str:
        """The same as `client` (kept for code written against earlier versions)."""
        return self.client


@dataclass
class Eligibility:
    """Who can afford the event now: `affordable_rounds` is how many more such rounds each
    can afford (counting reservations held), up to `max_rounds` (then `capped`)."""
    eligible: int
    ineligible: int
    clients: List[EligibilityEntry]
    max_rounds: Optional[int] = None

    @property
    def eligible_ids(self) -> List[str]:
        return [c.client for c in self.clients if c.eligible]

    @classmethod
    def from_json(cls, d: Any) -> Eligibility:
        return cls(d.get("eligible", 0), d.get("ineligible", 0),
                   [EligibilityEntry(c.get("client", c.get("id")), c.get("eligible"), c.get("affordable_rounds"),
                                     bool(c.get("affordable_rounds_capped")),
                                     _reals(c.get("spent")), _reals(c.get("remaining")),
                                     c.get("reason"), c.get("accounting"))
                    for c in d.get("clients") or []], d.get("max_rounds"))

    def extend(self, other: Eligibility) -> None:
        self.eligible += other.eligible
        self.ineligible += other.ineligible
        self.clients.extend(other.clients)
        self.max_rounds = other.max_rounds


@dataclass
class Charge:
    """One round of a client's history: its state ("charged", "reserved", "released"), the
    client's spend after it (None when not charged) and when it took that state (RFC 3339 in
    UTC with milliseconds, "2026-11-29T11:02:03.456Z"; None for a round the ledger logged
    before it kept times)."""
    round_id: str
    seq: Optional[int]
    state: str
    spent_after: Optional[float] = None
    time: Optional[str] = None


@dataclass
class HistoryPage:
    """A page of a client's last rounds, newest first. The daemon keeps the last
    `history_limit` rounds of each client (`complete` is False once older ones were
    dropped); `aggregate` always has every event charged, with counts."""
    charges: List[Charge]
    next_cursor: Optional[str]
    complete: bool = True
    total: Optional[int] = None
    history_limit: Optional[int] = None
    aggregate: List[Dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Any) -> HistoryPage:
        return cls([Charge(c.get("round_id"), c.get("seq"), c.get("state"),
                           real(c.get("spent_after")), c.get("time"))
                    for c in d.get("charges") or []], d.get("next_cursor"),
                   bool(d.get("complete", True)), d.get("total"), d.get("history_limit"),
                   list(d.get("aggregate") or []))


@dataclass
class NamedEvent:
    name: str
    event: Dict[str, Any]
    created_seq: Optional[int] = None
    created: bool = False  # PUT answered 201

    @classmethod
    def from_json(cls, d: Any, created: bool = False) -> NamedEvent:
        return cls(d.get("name"), d.get("event"), d.get("created_seq"), created)


@dataclass
class EventPage:
    events: List[NamedEvent]
    next_cursor: Optional[str]
    total: Optional[int] = None

    @classmethod
    def from_json(cls, d: Any) -> EventPage:
        return cls([NamedEvent.from_json(e) for e in d.get("events") or []], d.get("next_cursor"),
                   d.get("total"))


@dataclass
class Summary:
    clients: int
    by_status: Dict[str, int]
    rounds: int
    spent_fraction_histogram: List[Dict[str, Any]]
    read_only: bool
    log_bytes: int
    version: int
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Any) -> Summary:
        return cls(d.get("clients"), dict(d.get("by_status") or {}), d.get("rounds"),
                   [_reals(b) for b in d.get("spent_fraction_histogram") or []],
                   bool(d.get("read_only")), d.get("log_bytes"), d.get("version"), d)


@dataclass
class HistoryPoint:
    """One bucket of the ledger-wide series: from `start` (RFC 3339) for one resolution's
    width, the rounds stored, the clients charged, the sum of their charges' epsilon
    increases, the clients refused by reason, and the clients by status at its end."""
    start: str
    rounds: int
    charges: int
    epsilon_spent: float
    refusals: Dict[str, int]
    by_status: Dict[str, int]

    @classmethod
    def from_json(cls, d: Any) -> HistoryPoint:
        return cls(d.get("start"), d.get("rounds"), d.get("charges"), d.get("epsilon_spent"),
                   dict(d.get("refusals") or {}), dict(d.get("by_status") or {}))


@dataclass
class LedgerHistory:
    """GET /v1/history: the points of one resolution, oldest first, with their bounds
    (`start`/`end`: None when there is no point), what each resolution keeps, and the time
    of the ledger's last record."""
    resolution: str
    start: Optional[str]
    end: Optional[str]
    points: List[HistoryPoint]
    retention: Dict[str, Dict[str, Any]]
    last_record_time: Optional[str]
    epsilon_spent_is: Optional[str]  # "sum_of_upper_bound_increases": no guarantee of anything
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Any) -> LedgerHistory:
        return cls(d.get("resolution"), d.get("from"), d.get("to"),
                   [HistoryPoint.from_json(p) for p in d.get("points") or []],
                   dict(d.get("retention") or {}), d.get("last_record_time"),
                   d.get("epsilon_spent_is"), d)
