"""dpbudget.flower: a Flower strategy wrapper that keeps the clients' privacy budgets in the
dpbudget ledger (Flower's message API: flwr.serverapp.strategy.Strategy, run in a ServerApp).
Needs flwr (imported here only; the rest of the package needs nothing outside the standard
library).

    dp = DifferentialPrivacyClientSideFixedClipping(FedAvg(...), noise_multiplier=4.0,
                                                    clipping_norm=1.0, num_sampled_clients=10)
    strategy = Budgeted(dp, dpbudget.Client(url), run_id="mnist-7")
    strategy.start(grid=grid, initial_arrays=arrays, num_rounds=100)

(or Budgeted(FedAvg(...), ledger, run_id=..., event=...) without a DP wrapper).

Each training round:
1. eligibility: the connected nodes are mapped to ledger ids (`client_id`, or each node's
   ClientApp answers a "query.dpbudget_id" message: see `answer_ledger_id`) and the ledger says
   who can afford the round's event; the wrapped strategy samples among those only (it sees a
   Grid whose get_node_ids() is the eligible nodes). When fewer are eligible than it needs,
   the round is skipped (nothing sent, `dpbudget-skipped` = 1 in the metrics).
2. reserve: the sampled clients' budgets are reserved under the round id `{run_id}-r{round}`
   (policy admit_eligible: a client refused by a concurrent round is not sent the round).
3. aggregate: replies with an error are dropouts; the others go to the wrapped strategy.
   When it releases an aggregate, the clients whose replies it used are charged (commit) and
   the dropouts released; when it releases none, every reservation is released.

The event charged. With one of Flower's differential-privacy wrappers in the chain
(DifferentialPrivacy{Client,Server}Side{Fixed,Adaptive}Clipping) it is derived from its
attributes. The wrapper adds Gaussian noise of standard deviation z*C/n (z: noise_multiplier,
C: clipping norm, n: num_sampled_clients) to FedAvg's average of the m replies it aggregates,
each clipped to norm C, with equal weights (the condition Flower's own accountant also
requires; replies of unequal weights make the sensitivity depend on the weights, which are
the clients' data: such an aggregate is withheld, see below). The average's L2 sensitivity
to one client:
- adjacency "add_or_remove" (the default; also covers replace-one): removing a client's
  reply or replacing its update moves the average by (x_i - x_i')/m or (x_i - avg)/m, at
  most 2C/m: the release is a Gaussian mechanism of noise multiplier z*m/(2n);
- adjacency "zero_out" (a client's update replaced by zeros, still counted; the assumption
  under which Flower calls its noise multiplier z): C/m, noise multiplier z*m/n.
That multiplier is charged to every reporting client as GaussianDpEvent (user-level; no
sampling amplification is claimed: the ledger knows who took part). The adaptive-clipping
wrappers also release a noisy count of clipped updates (one bit per client, sensitivity 1
under either adjacency, noise clipped_count_stddev): their event is ComposedDpEvent of the
update's Gaussian (from their adjusted noise_multiplier, as above) and
GaussianDpEvent(clipped_count_stddev). Andrew et al. (arXiv:1905.03871) reach the user's
multiplier by centring the bits at +-1/2 (sensitivity 1/2); Flower counts bits 0/1, so
sensitivity 1 is charged, which is larger.
The round is reserved at the event of all n replying. When fewer reply, the release is
weaker (m < n): the reservation is released, the reporters who cannot afford the weaker
event are left out of the aggregate (as dropouts; each one left out weakens it again, until
all that remain can afford it) and the event is charged in a round of its own
(`{run_id}-r{round}-m`, all or nothing). If the ledger still refuses (a concurrent round took
the budget), or the replies' weights differ, the aggregate is withheld (no arrays returned,
nobody charged, `dpbudget-withheld` = 1, logged as an error): nothing is released uncharged.
Without a DP wrapper, give `event`: what one round costs each reporting client (e.g.
events.dp_sgd(q, sigma, steps) for local DP-SGD). Evaluation rounds are not charged (as
Flower's own accountant, they release metrics only: set fraction_evaluate=0 or account them).

Restarts. Round ids depend only on run_id and the server round, so a restarted ServerApp
repeats no charge: before sampling, the wrapper reads the round from the ledger. A round
already committed, released or charged is skipped (nothing sent: its clients' data are not
used again; the ServerApp should load its own checkpoint of the arrays); a round still
reserved is run again with the reserved cohort and committed once; a reserve or commit
repeated after a lost answer is replayed by the daemon, never charged twice.

Metrics. aggregate_train's MetricRecord gains dpbudget-eligible, dpbudget-ineligible,
dpbudget-reserved, dpbudget-charged, dpbudget-released, dpbudget-noise-multiplier (of the
event charged, when Gaussian), dpbudget-skipped, dpbudget-replayed and dpbudget-withheld;
`budget_state()` gives the same and the ledger's counts of clients by status.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg, Strategy
from flwr.serverapp.strategy.dp_adaptive_clipping import DifferentialPrivacyAdaptiveBase
from flwr.serverapp.strategy.dp_fixed_clipping import DifferentialPrivacyFixedClippingBase

from . import errors, events
from .client import Client
from .events import Event, EventLike

__all__ = ["Budgeted", "answer_ledger_id", "dp_event_of", "ID_QUERY"]

log = logging.getLogger("dpbudget.flower")

#: The message type a node's ClientApp answers with its ledger id (answer_ledger_id).
ID_QUERY = "query.dpbudget_id"
_ID_KEY = "dpbudget"

NodeIds = Union[Callable[[int], Optional[str]], Mapping[int, str], None]


def answer_ledger_id(app: ClientApp, ledger_id: Callable[[Context], str]) -> None:
    """Make `app` answer the wrapper's id query with ledger_id(context) (for instance
    lambda ctx: "site-%s" % ctx.node_config["partition-id"])."""

    @app.query("dpbudget_id")
    def _answer(msg: Message, ctx: Context) -> Message:
        return Message(RecordDict({_ID_KEY: ConfigRecord({"id": ledger_id(ctx)})}),
                       reply_to=msg)


def _chain(strategy: Strategy) -> List[Strategy]:
    out = [strategy]
    while isinstance(getattr(out[-1], "strategy", None), Strategy) and len(out) < 16:
        out.append(out[-1].strategy)  # type: ignore[attr-defined]
    return out


def _dp_wrapper(strategy: Strategy) -> Optional[Strategy]:
    for s in _chain(strategy):
        if isinstance(s, (DifferentialPrivacyFixedClippingBase, DifferentialPrivacyAdaptiveBase)):
            return s
    return None


ADJACENCY = {"add_or_remove": 2.0, "zero_out": 1.0}  # the sensitivity in units of C/m


def _weights(replies: List[Message], key: Optional[str]) -> List[float]:
    """Each reply's aggregation weight (FedAvg's weighted_by_key in its MetricRecord)."""
    out = []
    for r in replies:
        w = None
        for rec in r.content.metric_records.values():
            if key is not None and key in rec:
                w = rec[key]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
            raise ValueError("a reply has no positive %r: its sensitivity is unknown" % key)
        out.append(float(w))
    return out


def dp_event_of(dp: Strategy, replies: Optional[int] = None,
                adjacency: str = "add_or_remove") -> Event:
    """The event one release of Flower's DP wrapper `dp` costs each reporting client, when
    `replies` of its num_sampled_clients replied with equal weights (None: all of them).
    See the module's documentation for the derivation."""
    if adjacency not in ADJACENCY:
        raise ValueError("adjacency must be one of %s, not %r" % (sorted(ADJACENCY), adjacency))
    z = float(getattr(dp, "noise_multiplier"))
    n = int(getattr(dp, "num_sampled_clients"))
    m = n if replies is None else replies
    z = z * (m / n) / ADJACENCY[adjacency]  # exactly z/2 (or z) when all n replied
    if isinstance(dp, DifferentialPrivacyAdaptiveBase):
        return events.composed([events.gaussian(z),
                                events.gaussian(float(dp.clipped_count_stddev))])
    return events.gaussian(z)


def _noise_multiplier(ev: Event) -> Optional[float]:
    if ev.get("class_name") == "GaussianDpEvent":
        return float(ev["noise_multiplier"])
    return None


class _EligibleGrid(Grid):
    """The ServerApp's Grid as the wrapped strategy sees it: only `allowed` nodes."""

    def __init__(self, grid: Grid, allowed: List[int]) -> None:
        self._grid = grid
        self._allowed = list(allowed)

    def set_run(self, run: Any) -> None:
        self._grid.set_run(run)

    @property
    def run(self) -> Any:
        return self._grid.run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int,
                       group_id: str, ttl: Optional[float] = None) -> Message:
        return self._grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def get_node_ids(self) -> Iterable[int]:
        return list(self._allowed)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self._grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *,
                         timeout: Optional[float] = None) -> Iterable[Message]:
        return self._grid.send_and_receive(messages, timeout=timeout)


def _needed(strategy: Strategy, available: int) -> int:
    """How many nodes the wrapped strategy's sampling waits for (FedAvg's rule), 1 when it
    does not say: fewer eligible than that and the round is skipped instead of waiting."""
    for s in _chain(strategy):
        if isinstance(s, FedAvg):
            if s.fraction_train == 0.0:
                return 0
            size = max(int(available * s.fraction_train), s.min_train_nodes)
            return max(size, s.min_available_nodes)
    return 1


class Budgeted(Strategy):
    """`strategy` with every training round admitted, reserved and charged in the ledger.

    ledger: a dpbudget.Client; run_id: names the run's rounds ({run_id}-r{round}) and its
    event ({run_id}-round): the same run_id after a restart resumes without charging a round
    twice; event: what a round costs each reporting client (default: derived from a Flower
    DP wrapper in `strategy`); adjacency: "add_or_remove" (default) or "zero_out", the
    neighbouring datasets the derived event is for (see the module's documentation);
    client_id: node id -> ledger id (a mapping or a function; None: ask each node, see
    answer_ledger_id); id_timeout: seconds to wait for the id answers; reservation_ttl: the
    reservations' lifetime in seconds (the daemon's default when None).
    """

    def __init__(self, strategy: Strategy, ledger: Client, run_id: str, *,
                 event: Optional[EventLike] = None, adjacency: str = "add_or_remove",
                 client_id: NodeIds = None, id_timeout: float = 30.0,
                 reservation_ttl: Optional[float] = None) -> None:
        super().__init__()
        self.strategy = strategy
        self.ledger = ledger
        self.run_id = run_id
        self.dp = _dp_wrapper(strategy)
        if event is None and self.dp is None:
            raise ValueError("give `event` (what one round costs a reporting client) or wrap a "
                             "Flower DP strategy, whose noise the event is derived from")
        self.adjacency = adjacency
        self.event: Event = events.to_event(event) if event is not None else dp_event_of(
            self.dp, None, adjacency)  # type: ignore[arg-type]
        self._weight_key: Optional[str] = None
        if event is None:
            inner = _chain(strategy)[-1]
            if not isinstance(inner, FedAvg):
                raise ValueError("the DP wrapper's event holds for FedAvg's average of equal "
                                 "weights: wrap a FedAvg-family strategy, or give `event`")
            self._weight_key = inner.weighted_by_key
        self.event_name = run_id + "-round"
        self._client_id = client_id
        self.id_timeout = id_timeout
        self.reservation_ttl = reservation_ttl
        self._ids: Dict[int, Optional[str]] = {}
        self._rounds: Dict[int, Dict[str, Any]] = {}
        self.state: Dict[str, float] = {}
        self._event_registered = False

    # ------------------------------------------------------------ ids

    def round_id(self, server_round: int) -> str:
        return "%s-r%d" % (self.run_id, server_round)

    def _ledger_ids(self, grid: Grid, nodes: List[int]) -> Dict[int, str]:
        unknown = [n for n in nodes if n not in self._ids]
        if unknown:
            if self._client_id is None:
                self._ask_ids(grid, unknown)
            elif callable(self._client_id):
                for n in unknown:
                    self._ids[n] = self._client_id(n)
            else:
                for n in unknown:
                    self._ids[n] = self._client_id.get(n)
        out: Dict[int, str] = {}
        seen: Set[str] = set()
        for n in nodes:
            cid = self._ids.get(n)
            if cid is not None and cid in seen:
                log.warning("node %d names ledger id %s, which another node has: never "
                            "sampled", n, cid)
            elif cid is not None:
                out[n] = cid
                seen.add(cid)
        return out

    def _ask_ids(self, grid: Grid, nodes: List[int]) -> None:
        msgs = [Message(RecordDict({_ID_KEY: ConfigRecord({})}), dst_node_id=n,
                        message_type=ID_QUERY) for n in nodes]
        for r in grid.send_and_receive(msgs, timeout=self.id_timeout):
            n = r.metadata.src_node_id
            cid = None
            if not r.has_error() and _ID_KEY in r.content.config_records:
                v = r.content.config_records[_ID_KEY].get("id")
                cid = v if isinstance(v, str) and v else None
            if cid is None:
                log.warning("node %d did not name its ledger id: never sampled", n)
            self._ids[n] = cid

    # ------------------------------------------------------------ train

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        rid = self.round_id(server_round)
        info: Dict[str, Any] = {"eligible": 0, "ineligible": 0, "reserved": 0, "skipped": 0,
                                "replayed": 0, "admitted": {}}
        self._rounds[server_round] = info
        if not self._event_registered:
            self.ledger.put_event(self.event_name, self.event)
            self._event_registered = True
        nodes = sorted(grid.get_node_ids())
        ids = self._ledger_ids(grid, nodes)
        by_id = {cid: n for n, cid in ids.items()}
        try:
            prior = self.ledger.get_round(rid)
        except errors.NotFound:
            prior = None
        if prior is not None and prior.state != "reserved":
            # done before a restart: never run (nor charge) it again
            info["replayed"] = 1
            info["skipped"] = 1
            return []
        if prior is not None:
            allowed = [by_id[c] for c in prior.admitted_ids if c in by_id]
            info["replayed"] = 1
            info["eligible"] = len(allowed)
        else:
            el = self.ledger.eligibility([ids[n] for n in nodes if n in ids],
                                         event_name=self.event_name, max_rounds=1)
            ok = set(el.eligible_ids)
            allowed = [n for n in nodes if ids.get(n) in ok]
            info["eligible"] = len(allowed)
            info["ineligible"] = len(nodes) - len(allowed)
        need = _needed(self.strategy, len(allowed))
        if len(allowed) < max(need, 1):
            info["skipped"] = 1
            log.warning("round %d: %d eligible nodes, fewer than the %d the strategy needs: "
                        "skipped", server_round, len(allowed), need)
            if prior is not None:
                self.ledger.release(rid)
            return []
        msgs = list(self.strategy.configure_train(server_round, arrays, config,
                                                  _EligibleGrid(grid, allowed)))
        cohort = [ids[m.metadata.dst_node_id] for m in msgs]
        if not cohort:  # the strategy sends nothing this round: nothing to reserve
            if prior is not None:
                self.ledger.release(rid)
            return []
        if prior is None:
            r = self.ledger.reserve(cohort, event_name=self.event_name, round_id=rid,
                                    policy="admit_eligible", ttl=self.reservation_ttl)
            if r.replayed:
                info["replayed"] = 1
        else:
            r = prior
        admitted = set(r.admitted_ids)
        info["admitted"] = {by_id[c]: c for c in admitted if c in by_id}
        info["reserved"] = len(admitted)
        return [m for m in msgs if ids[m.metadata.dst_node_id] in admitted]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> Tuple[Optional[ArrayRecord], Optional[MetricRecord]]:
        rid = self.round_id(server_round)
        info = self._rounds.pop(server_round, None)
        if info is None or not info["admitted"]:
            return None, self._metrics(None, info or {}, 0, 0, None)
        admitted: Dict[int, str] = info["admitted"]
        used = [m for m in replies
                if not m.has_error() and m.metadata.src_node_id in admitted]
        if self.dp is not None and len(set(_weights(used, self._weight_key))) > 1:
            log.error("round %d: the replies' weights differ: the DP wrapper's sensitivity is "
                      "not C/m (equal weights fail); the aggregate is withheld", server_round)
            self.ledger.release(rid)
            return None, self._metrics(None, info, 0, len(admitted), None, withheld=True)
        ev = self._event_for(used)
        if used and ev != self.event:
            # a weaker release than reserved (dropouts, unequal weights): release the
            # reservation and keep only the reporters who can afford what the release is
            self.ledger.release(rid)
            while used:
                ok = set(self.ledger.eligibility(
                    [admitted[m.metadata.src_node_id] for m in used], event=ev,
                    max_rounds=1).eligible_ids)
                keep = [m for m in used if admitted[m.metadata.src_node_id] in ok]
                if len(keep) == len(used):
                    break
                used = keep  # fewer replies: a weaker release again
                ev = self._event_for(used)
        arrays, metrics = (None, None)
        if used:
            arrays, metrics = self.strategy.aggregate_train(server_round, used)
        if arrays is None:
            # no aggregate released: nobody is charged
            self.ledger.release(rid)
            return None, self._metrics(metrics, info, 0, len(admitted), None)
        reported = [admitted[m.metadata.src_node_id] for m in used]
        if ev == self.event:
            self.ledger.commit(rid, reported)
        else:
            r = self.ledger.charge(reported, ev, round_id=rid + "-m", policy="all_or_nothing")
            if r.refused:  # a concurrent round took the budget meanwhile
                log.warning("round %d: the ledger refused the release's event (%s): the "
                            "aggregate is withheld", server_round,
                            ", ".join("%s %s" % (x.client, x.reason) for x in r.refused))
                return None, self._metrics(metrics, info, 0, len(admitted), None,
                                           withheld=True)
        return arrays, self._metrics(metrics, info, len(reported),
                                     len(admitted) - len(reported), ev)

    def _event_for(self, used: List[Message]) -> Event:
        """The event a release from the replies `used` costs each of their clients."""
        if self.dp is None or not used:
            return self.event
        return dp_event_of(self.dp, len(used), self.adjacency)

    def _metrics(self, metrics: Optional[MetricRecord], info: Dict[str, Any], charged: int,
                 released: int, ev: Optional[Event], withheld: bool = False) -> MetricRecord:
        out = MetricRecord(dict(metrics)) if metrics is not None else MetricRecord()
        state: Dict[str, float] = {
            "dpbudget-eligible": int(info.get("eligible", 0)),
            "dpbudget-ineligible": int(info.get("ineligible", 0)),
            "dpbudget-reserved": int(info.get("reserved", 0)),
            "dpbudget-charged": charged,
            "dpbudget-released": released,
            "dpbudget-skipped": int(info.get("skipped", 0)),
            "dpbudget-replayed": int(info.get("replayed", 0)),
            "dpbudget-withheld": int(withheld),
        }
        z = _noise_multiplier(ev) if ev is not None else None
        if z is not None:
            state["dpbudget-noise-multiplier"] = z
        for k, v in state.items():
            out[k] = v
        self.state = state
        return out

    def budget_state(self) -> Dict[str, Any]:
        """The last training round's figures (as in the metrics) and the ledger's summary."""
        s = self.ledger.summary()
        return dict(self.state, clients=s.clients, by_status=dict(s.by_status))

    # ------------------------------------------------------------ the rest: as wrapped

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord,
                           config: ConfigRecord, grid: Grid) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int,
                           replies: Iterable[Message]) -> Optional[MetricRecord]:
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        log.info("dpbudget: run %s, event %s, ledger %s", self.run_id, self.event,
                 self.ledger.url)
        self.strategy.summary()
