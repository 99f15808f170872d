"""The HTTP client: keep-alive connections (http.client), bearer tokens, TLS with a CA
file, timeouts, and retries that are safe because every call it retries is idempotent.

Retries. A call is retried only when repeating it cannot apply it twice: reads, the
stateless computations, PUTs, bulk registration (each item is a PUT) and rounds, whose
round id makes the daemon replay a repeated round instead of charging it again (the
client makes up a round id when the caller gives none, before the first attempt, and
keeps it across the attempts). Retried: connection failures (refused, reset, closed
before the answer) and the answers 429 and 503, after the answer's Retry-After when it
gives one (a Retry-After longer than `max_retry_after` is not waited for: the error is
raised at once), else after an exponential backoff with jitter. Not retried: timeouts
(Timeout; retry a round yourself with the same round id), and any other error answer.
Client.request() retries a POST only when told it is idempotent.
"""
from __future__ import annotations

import datetime
import http.client
import json
import os
import random
import re
import socket
import ssl
import threading
import time
import uuid
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)
from urllib.parse import quote, urlencode, urlsplit

from . import errors
from ._version import __version__
from .events import Event, EventLike, to_event
from .models import (BatchResult, CalibrateResult, Charge, ClientPage, ClientRecord,
                     CurveResult, DeltaResult, Eligibility, EpsilonResult, EventPage,
                     HistoryPage, LedgerHistory, NamedEvent, Round, Summary)

__all__ = ["Client", "new_round_id", "Response"]

_IDEMPOTENT_METHODS = ("GET", "HEAD", "PUT", "DELETE", "OPTIONS")
_RETRY_STATUS = (429, 503)
_LIBRARY = "dpbudget-python/" + __version__

#: A JSON value as the daemon sends it (decoded by json.loads).
JSON = Any
#: A query string's parameters (None values are left out).
Query = Mapping[str, Union[str, int, float, None]]


class _OneWrite:
    """A request's head and body in one write (http.client writes them apart: two system
    calls, and two segments the daemon reads apart), on a socket with TCP_NODELAY."""

    sock: socket.socket

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def send(self, data: Any) -> None:  # provided by http.client.HTTPConnection
        super().send(data)  # type: ignore[misc]

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        buf = getattr(self, "_buffer", None)
        if isinstance(message_body, bytes) and not encode_chunked and isinstance(buf, list):
            buf.extend((b"", b""))
            msg = b"\r\n".join(buf) + message_body
            del buf[:]
            self.send(msg)
            return
        super()._send_output(message_body, encode_chunked)  # type: ignore[misc]


class _HTTPConnection(_OneWrite, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_OneWrite, http.client.HTTPSConnection):
    pass


def _rfc3339(t: Optional[Union[str, datetime.datetime]]) -> Optional[str]:
    """An RFC 3339 string (a str as given; an aware datetime in UTC; a naive one refused)."""
    if t is None or isinstance(t, str):
        return t
    if t.tzinfo is None:
        raise ValueError("a datetime bound of the history needs a time zone (tzinfo)")
    u = t.astimezone(datetime.timezone.utc)
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (u.microsecond // 1000)


def new_round_id(prefix: str = "r") -> str:
    """A fresh round id (prefix + 32 hex digits): unique, and within the daemon's id rule."""
    return "%s-%s" % (prefix, uuid.uuid4().hex)


class Response:
    """One HTTP answer: status, headers (lower-case names), the decoded JSON body."""
    __slots__ = ("status", "headers", "body", "attempts")

    def __init__(self, status: int, headers: Dict[str, str], body: JSON, attempts: int) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.attempts = attempts


def _plain_id(s: str) -> bool:
    """True when json.dumps(s) is '"' + s + '"' (printable ASCII, no quote or backslash)."""
    return s.isascii() and s.isprintable() and '"' not in s and "\\" not in s


_encode = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # one encoder


def _encode_item(x: Any) -> str:
    if isinstance(x, str) and _plain_id(x):
        return '"' + x + '"'
    return _encode(x)


def _seg(s: Any, what: str) -> str:
    if not isinstance(s, str) or not s:
        raise ValueError("%s must be a non-empty string" % what)
    return quote(s, safe="")


def _ids(xs: Optional[Iterable[str]], what: str) -> List[str]:
    if xs is None:
        raise TypeError("%s must be a list of ids, not None" % what)
    if isinstance(xs, str):
        raise TypeError("%s must be a list of ids, not a string" % what)
    out = list(xs)
    for x in out:
        if not isinstance(x, str):
            raise TypeError("%s: %r is not a string id" % (what, x))
    return out


class Client:
    """A dpbudget daemon at `url` ("http://host:port" or "https://host:port[/prefix]").

    token: the API key (sent as Authorization: Bearer); cafile: PEM file of the CA (or
    self-signed certificate) to trust for https (default: the system's); ssl_context: a
    ready ssl.SSLContext instead; timeout: seconds for connecting and for each read;
    retries: further attempts after the first (0 = none); backoff, max_backoff: the
    exponential backoff's first and largest wait; max_retry_after: the longest
    Retry-After waited for; max_body: the daemon's --max-bulk-body (the body limit of the
    calls that carry lists of clients), used to split bulk registration and eligibility
    queries into requests that fit.

    Thread-safe: each call takes a kept-alive connection from a pool (and returns it).
    """

    def __init__(self, url: str = "http://127.0.0.1:8080", token: Optional[str] = None, *,
                 cafile: Optional[str] = None, ssl_context: Optional[ssl.SSLContext] = None,
                 timeout: float = 30.0, retries: int = 4, backoff: float = 0.05,
                 max_backoff: float = 5.0, max_retry_after: float = 60.0,
                 max_body: int = 4194304, pool_size: int = 8,
                 user_agent: Optional[str] = None) -> None:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("url must be http://host[:port] or https://host[:port], not %r" % url)
        if u.query or u.fragment:
            raise ValueError("url must not have a query or fragment: %r" % url)
        self.url = url
        self._https = u.scheme == "https"
        self._host: str = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        if token is not None and (not isinstance(token, str) or not token or
                                  any(c in token for c in "\r\n")):
            raise ValueError("token must be a non-empty string without line breaks")
        self._token = token
        self._ssl: Optional[ssl.SSLContext]
        if self._https:
            self._ssl = ssl_context or ssl.create_default_context(cafile=cafile)
        elif cafile or ssl_context:
            raise ValueError("cafile/ssl_context need an https:// url")
        else:
            self._ssl = None
        self.timeout = timeout
        self.retries = int(retries)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.max_body = int(max_body)
        self._pool: List[http.client.HTTPConnection] = []
        self._pool_size = pool_size
        self._lock = threading.Lock()
        self._ua = user_agent or _LIBRARY
        self._sleep: Callable[[float], None] = time.sleep  # tests replace it to observe waits
        self.stats: Dict[str, int] = {"requests": 0, "attempts": 0, "retries": 0, "connections": 0}

    # ---------------------------------------------------------------- connections

    def _new_conn(self) -> http.client.HTTPConnection:
        self.stats["connections"] += 1
        c: http.client.HTTPConnection
        if self._https:
            c = _HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                 context=self._ssl)
        else:
            c = _HTTPConnection(self._host, self._port, timeout=self.timeout)
        return c

    def _take(self) -> Tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._pool:
                return self._pool.pop(), True
        return self._new_conn(), False

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._pool) < self._pool_size:
                self._pool.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the kept-alive connections."""
        with self._lock:
            pool, self._pool = self._pool, []
        for c in pool:
            c.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- requests

    def _wait(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is not None:
            return retry_after
        base = min(self.max_backoff, self.backoff * float(2 ** attempt))
        return base * (0.5 + random.random() / 2)

    def request(self, method: str, path: str, body: Any = None, *,
                query: Optional[Query] = None, idempotent: Optional[bool] = None,
                headers: Optional[Mapping[str, str]] = None,
                round_id: Optional[str] = None) -> Response:
        """Send one call and return its Response; raise the ApiError of an error answer.
        `path` starts with /v1/...; `body` is JSON-encoded (bytes are sent as they are, as
        encoded JSON); `idempotent` (default: by the method; POST is not) allows the
        retries; `round_id` is set on the exceptions raised."""
        if idempotent is None:
            idempotent = method in _IDEMPOTENT_METHODS
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                path = path + "?" + urlencode(q)
        hdrs = {"Accept": "application/json", "User-Agent": self._ua}
        if self._token is not None:
            hdrs["Authorization"] = "Bearer " + self._token
        data: Optional[bytes] = None
        if isinstance(body, (bytes, bytearray)):  # already encoded JSON
            data = bytes(body)
            hdrs["Content-Type"] = "application/json"
        elif body is not None:
            data = _encode(body).encode()
            hdrs["Content-Type"] = "application/json"
        if headers:
            hdrs.update(headers)
        self.stats["requests"] += 1
        url = self._prefix + path
        attempt = 0
        while True:
            conn, reused = self._take()
            self.stats["attempts"] += 1
            try:
                conn.request(method, url, body=data, headers=hdrs)
                resp = conn.getresponse()
                raw = resp.read()
            except socket.timeout as e:
                conn.close()
                raise errors.Timeout("%s %s: no answer within %s s" % (method, path, self.timeout),
                                     round_id) from e
            except ssl.SSLCertVerificationError as e:
                conn.close()  # permanent: never retried
                raise errors.TransportError("%s %s: the daemon's certificate is not trusted: %s"
                                            % (method, path, e), round_id) from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if reused and attempt == 0 and idempotent:
                    # a kept-alive connection the daemon had closed (idle): once, at once
                    reused = False
                    attempt = -1
                elif not idempotent or attempt >= self.retries:
                    raise errors.TransportError(
                        "%s %s: %s: %s (after %d attempt%s)" % (
                            method, path, type(e).__name__, e, attempt + 1,
                            "" if attempt == 0 else "s"), round_id) from e
                else:
                    self._sleep(self._wait(attempt, None))
                attempt += 1
                self.stats["retries"] += 1
                continue
            rh = {k.lower(): v for k, v in resp.getheaders()}
            if resp.will_close:
                conn.close()
            else:
                self._give(conn)
            status = resp.status
            parsed: JSON = None
            if raw:
                ctype = rh.get("content-type", "")
                if "json" in ctype:
                    try:
                        parsed = json.loads(raw)
                    except ValueError:
                        parsed = None
                if parsed is None and status < 400:
                    raise errors.TransportError("%s %s: answer %d is not JSON (%s)" % (
                        method, path, status, ctype or "no Content-Type"), round_id)
            if status < 400:
                return Response(status, rh, parsed, attempt + 1)
            if status in _RETRY_STATUS and idempotent and attempt < self.retries:
                ra = errors._retry_after(rh)
                if ra is None or ra <= self.max_retry_after:
                    self._sleep(self._wait(attempt, ra))
                    attempt += 1
                    self.stats["retries"] += 1
                    continue
            if parsed is None and raw:
                parsed = {"detail": raw[:300].decode("utf-8", "replace")}
            raise errors.error_from_problem(status, parsed, rh, round_id)

    def _get(self, path: str, query: Optional[Query] = None) -> JSON:
        return self.request("GET", path, query=query).body

    def _post(self, path: str, body: Any, round_id: Optional[str] = None) -> Response:
        # every POST this class sends is idempotent: a computation, a read, a bulk PUT, or a
        # round call carrying its round id
        return self.request("POST", path, body, idempotent=True, round_id=round_id)

    # ---------------------------------------------------------------- compute

    @staticmethod
    def _compute_body(event: EventLike, accountant: Optional[str],
                      neighboring_relation: Optional[str],
                      value_discretization_interval: Optional[float]) -> Dict[str, Any]:
        b: Dict[str, Any] = {"event": to_event(event)}
        if accountant is not None:
            b["accountant"] = accountant
        if neighboring_relation is not None:
            b["neighboring_relation"] = neighboring_relation
        if value_discretization_interval is not None:
            b["value_discretization_interval"] = value_discretization_interval
        return b

    def delta(self, event: EventLike, epsilon: Optional[float] = None, *,
              epsilons: Optional[Sequence[float]] = None, accountant: Optional[str] = None,
              neighboring_relation: Optional[str] = None,
              value_discretization_interval: Optional[float] = None) -> DeltaResult:
        """δ(ε) of an event (one ε, or a list as `epsilons`)."""
        b = self._compute_body(event, accountant, neighboring_relation,
                               value_discretization_interval)
        if (epsilon is None) == (epsilons is None):
            raise ValueError("give exactly one of epsilon or epsilons")
        if epsilon is not None:
            b["epsilon"] = epsilon
        elif epsilons is not None:
            b["epsilons"] = list(epsilons)
        return DeltaResult.from_json(self._post("/v1/delta", b).body)

    def epsilon(self, event: EventLike, delta: Optional[float] = None, *,
                deltas: Optional[Sequence[float]] = None, accountant: Optional[str] = None,
                neighboring_relation: Optional[str] = None,
                value_discretization_interval: Optional[float] = None) -> EpsilonResult:
        """ε(δ) of an event (one δ, or a list as `deltas`)."""
        b = self._compute_body(event, accountant, neighboring_relation,
                               value_discretization_interval)
        if (delta is None) == (deltas is None):
            raise ValueError("give exactly one of delta or deltas")
        if delta is not None:
            b["delta"] = delta
        elif deltas is not None:
            b["deltas"] = list(deltas)
        return EpsilonResult.from_json(self._post("/v1/epsilon", b).body)

    def calibrate(self, event: EventLike, solve_for: str, target_epsilon: float,
                  target_delta: float, *, accountant: Optional[str] = None,
                  neighboring_relation: Optional[str] = None,
                  value_discretization_interval: Optional[float] = None,
                  dataset: Optional[Mapping[str, Any]] = None) -> CalibrateResult:
        """Solve `solve_for` (left out of the event) so the event meets (ε, δ)."""
        b = self._compute_body(event, accountant, neighboring_relation,
                               value_discretization_interval)
        b["solve_for"] = solve_for
        b["target"] = {"epsilon": target_epsilon, "delta": target_delta}
        if dataset is not None:
            b["dataset"] = dataset
        return CalibrateResult.from_json(self._post("/v1/calibrate", b).body)

    def curve(self, event: EventLike, *, epsilons: Optional[Sequence[float]] = None,
              epsilon_range: Optional[Tuple[float, float, int]] = None,
              alphas: Optional[Sequence[float]] = None, tradeoff_points: Optional[int] = None,
              accountant: Optional[str] = None, neighboring_relation: Optional[str] = None,
              value_discretization_interval: Optional[float] = None) -> CurveResult:
        """δ(ε) over `epsilons` or `epsilon_range` = (min, max, points); with `alphas` or
        `tradeoff_points`, also trade-off points."""
        b = self._compute_body(event, accountant, neighboring_relation,
                               value_discretization_interval)
        if (epsilons is None) == (epsilon_range is None):
            raise ValueError("give exactly one of epsilons or epsilon_range")
        if epsilons is not None:
            b["epsilons"] = list(epsilons)
        elif epsilon_range is not None:
            lo, hi, n = epsilon_range
            b["epsilon_range"] = {"min": lo, "max": hi, "points": n}
        if alphas is not None:
            b["alphas"] = list(alphas)
        if tradeoff_points is not None:
            b["tradeoff_points"] = tradeoff_points
        return CurveResult.from_json(self._post("/v1/curve", b).body)

    def accountants(self) -> Dict[str, Any]:
        """The daemon's catalogue of events, accountants and relations (a dict)."""
        r: Dict[str, Any] = self._get("/v1/accountants")
        return r

    # ---------------------------------------------------------------- clients

    @staticmethod
    def client_body(epsilon: float, delta: float, accounting: Optional[str] = None,
                    neighboring_relation: Optional[str] = None,
                    labels: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
        """The body of PUT /v1/clients/{id}."""
        b: Dict[str, Any] = {"budget": {"epsilon": epsilon, "delta": delta}}
        if accounting is not None:
            b["accounting"] = accounting
        if neighboring_relation is not None:
            b["neighboring_relation"] = neighboring_relation
        if labels is not None:
            b["labels"] = dict(labels)
        return b

    def put_client(self, client_id: str, epsilon: float, delta: float, *,
                   accounting: Optional[str] = None, neighboring_relation: Optional[str] = None,
                   labels: Optional[Mapping[str, str]] = None) -> ClientRecord:
        """Create or update a client's budget (durable on return)."""
        b = self.client_body(epsilon, delta, accounting, neighboring_relation, labels)
        return ClientRecord.from_json(
            self.request("PUT", "/v1/clients/" + _seg(client_id, "client id"), b).body)

    def get_client(self, client_id: str) -> ClientRecord:
        return ClientRecord.from_json(self._get("/v1/clients/" + _seg(client_id, "client id")))

    def list_clients(self, *, status: Optional[str] = None, label: Optional[str] = None,
                     sort: Optional[str] = None, order: Optional[str] = None,
                     limit: Optional[int] = None, cursor: Optional[str] = None) -> ClientPage:
        """One page of clients; `next_cursor` fetches the next (see iter_clients)."""
        return ClientPage.from_json(self._get("/v1/clients", {
            "status": status, "label": label, "sort": sort, "order": order, "limit": limit,
            "cursor": cursor}))

    def iter_clients(self, *, status: Optional[str] = None, label: Optional[str] = None,
                     sort: Optional[str] = None, order: Optional[str] = None,
                     page_size: int = 1000) -> Iterator[ClientRecord]:
        """Every client matching the filters, page after page."""
        cursor: Optional[str] = None
        while True:
            page = self.list_clients(status=status, label=label, sort=sort, order=order,
                                     limit=page_size, cursor=cursor)
            yield from page.clients
            cursor = page.next_cursor
            if not cursor:
                return

    def register_clients(self, clients: Iterable[Mapping[str, Any]], *,
                         batch_size: int = 10000) -> BatchResult:
        """Create or update many clients: POST /v1/clients:batch, split into requests of at
        most `batch_size` items and `max_body` bytes. Each item is a dict: the PUT body
        plus "id", or the flat form {"id", "epsilon", "delta", "accounting",
        "neighboring_relation", "labels"}. Idempotent (re-sending gives "unchanged"), so
        retried like a PUT. A malformed item raises BadRequest whose `field` names it by
        its index in `clients` ("clients[917].budget.epsilon"); nothing of its request
        applies, the requests before it stay applied (re-send the whole list once fixed:
        the items already applied answer "unchanged")."""
        items = [self._batch_item(c, i) for i, c in enumerate(clients)]
        total = BatchResult([], 0, 0, 0, 0)
        for start, body in self._chunks(items, batch_size, "clients"):
            try:
                r = self._post("/v1/clients:batch", body)
            except errors.ApiError as e:
                if start and e.field:  # name the item by its index in `clients`
                    e.field = re.sub(r"^clients\[(\d+)\]",
                                     lambda m: "clients[%d]" % (int(m.group(1)) + start),
                                     e.field)
                    e.args = ("%d %s: %s (field %s)" % (e.status, e.code, e.detail, e.field),)
                raise
            total.extend(BatchResult.from_json(r.body))
        return total

    @staticmethod
    def _batch_item(c: Any, i: int) -> Dict[str, Any]:
        if not isinstance(c, dict):
            raise TypeError("clients[%d]: a dict, not %r" % (i, type(c).__name__))
        if "budget" in c:
            return dict(c)
        if "epsilon" not in c or "delta" not in c or "id" not in c:
            raise ValueError("clients[%d]: needs id, and budget or epsilon and delta" % i)
        item: Dict[str, Any] = {"id": c["id"], "budget": {"epsilon": c["epsilon"], "delta": c["delta"]}}
        for k, v in c.items():  # anything else as given: the daemon names what it refuses
            if k not in ("id", "epsilon", "delta") and not (
                    v is None and k in ("accounting", "neighboring_relation", "labels")):
                item[k] = v
        return item

    def _chunks(self, items: Sequence[Any], max_items: int, key: str,
                extra: Optional[Mapping[str, Any]] = None) -> Iterator[Tuple[int, bytes]]:
        """Consecutive slices of `items` as encoded bodies (start, b'{key: [...], **extra}'),
        each of at most max_items items and within max_body bytes (one item at least).
        Each item is encoded once."""
        tail = ""
        if extra:
            tail = "," + _encode(extra)[1:-1]
        head = '{"%s":[' % key
        budget = self.max_body - len(head) - len(tail) - 2
        enc = [_encode_item(x) for x in items]
        start = 0
        while start < len(enc):
            size, end = 0, start
            while end < len(enc) and end - start < max_items:
                n = len(enc[end]) + 1
                if end > start and size + n > budget:
                    break
                size += n
                end += 1
            yield start, (head + ",".join(enc[start:end]) + "]" + tail + "}").encode()
            start = end

    # ---------------------------------------------------------------- named events

    def put_event(self, name: str, event: EventLike) -> NamedEvent:
        """Register an event once by name (names are immutable; the same event again is
        fine, another event under the name is Conflict)."""
        r = self.request("PUT", "/v1/events/" + _seg(name, "event name"),
                         {"event": to_event(event)})
        return NamedEvent.from_json(r.body, created=r.status == 201)

    def get_event(self, name: str) -> NamedEvent:
        return NamedEvent.from_json(self._get("/v1/events/" + _seg(name, "event name")))

    def list_events(self, *, limit: Optional[int] = None,
                    cursor: Optional[str] = None) -> EventPage:
        return EventPage.from_json(self._get("/v1/events", {"limit": limit, "cursor": cursor}))

    # ---------------------------------------------------------------- eligibility

    @staticmethod
    def _event_field(b: Dict[str, Any], event: Optional[EventLike],
                     event_name: Optional[str]) -> None:
        if (event is None) == (event_name is None):
            raise ValueError("give exactly one of event or event_name")
        if event is not None:
            b["event"] = to_event(event)
        else:
            b["event_name"] = event_name

    def eligibility(self, clients: Optional[Iterable[str]] = None, *,
                    event: Optional[EventLike] = None, event_name: Optional[str] = None,
                    label: Optional[str] = None, max_rounds: Optional[int] = None,
                    batch_size: int = 10000) -> Eligibility:
        """Who of `clients` (ids) or of the clients labelled `label` ("k=v") can afford
        the event now, and how many more such rounds each can afford. Charges nothing.
        A long list of ids is asked in several requests (each within max_body), and every
        answer's pages (`limit` batch_size, at most 10000) are followed to the last."""
        b: Dict[str, Any] = {"limit": batch_size}
        self._event_field(b, event, event_name)
        if max_rounds is not None:
            b["max_rounds"] = max_rounds
        if (clients is None) == (label is None):
            raise ValueError("give exactly one of clients or label")
        total = Eligibility(0, 0, [])
        if label is not None:
            b["label"] = label
            self._eligibility_pages(_encode(b).encode(), total)
            return total
        ids = _ids(clients, "clients")
        for _, body in self._chunks(ids, batch_size, "clients", b):
            self._eligibility_pages(body, total)
        return total

    def _eligibility_pages(self, body: bytes, total: Eligibility) -> None:
        """Every page of one eligibility request (an encoded body), from the first page on
        through next_cursor, added to total."""
        page = body
        while True:
            d = self._post("/v1/eligibility", page).body
            total.extend(Eligibility.from_json(d))
            cursor = d.get("next_cursor")
            if not cursor:
                return
            page = body[:-1] + b',"cursor":' + _encode(cursor).encode() + b"}"

    # ---------------------------------------------------------------- rounds

    def _round(self, phase: str, participants: Iterable[str], event: Optional[EventLike],
               event_name: Optional[str], round_id: Optional[str], policy: Optional[str],
               dry_run: bool, already_ran: bool, ttl: Optional[float]) -> Round:
        if round_id is None:
            round_id = new_round_id()
        b: Dict[str, Any] = {"round_id": round_id}
        self._event_field(b, event, event_name)
        b["participants"] = _ids(participants, "participants")
        if phase != "charge":
            b["phase"] = phase
        if policy is not None:
            b["policy"] = policy
        if dry_run:
            b["dry_run"] = True
        if already_ran:
            b["already_ran"] = True
        if ttl is not None:
            b["reservation_ttl_seconds"] = ttl
        r = self._post("/v1/rounds", b, round_id=round_id)
        return Round.from_json(r.body, r.headers.get("idempotent-replayed") == "true")

    def charge(self, participants: Iterable[str], event: Optional[EventLike] = None, *,
               event_name: Optional[str] = None, round_id: Optional[str] = None,
               policy: Optional[str] = None, dry_run: bool = False,
               already_ran: bool = False) -> Round:
        """A one-step round: admit and charge at once. `round_id` (made up when None) makes
        it safe to repeat: the daemon replays a repeated round, never charges it twice."""
        return self._round("charge", participants, event, event_name, round_id, policy,
                           dry_run, already_ran, None)

    def reserve(self, participants: Iterable[str], event: Optional[EventLike] = None, *,
                event_name: Optional[str] = None, round_id: Optional[str] = None,
                policy: Optional[str] = None, dry_run: bool = False,
                ttl: Optional[float] = None) -> Round:
        """The first phase of a two-phase round: admitted clients get a reservation (counted
        as spent by every later admission) until commit, release or `ttl` seconds."""
        return self._round("reserve", participants, event, event_name, round_id, policy,
                           dry_run, False, ttl)

    def commit(self, round_id: str, reported: Iterable[str]) -> Round:
        """Charge the reported participants of a reserved round; release the others (the
        dropouts spend nothing). Repeating the same commit replays it."""
        r = self._post("/v1/rounds/%s/commit" % _seg(round_id, "round id"),
                       {"reported": _ids(reported, "reported")}, round_id=round_id)
        return Round.from_json(r.body, r.headers.get("idempotent-replayed") == "true")

    def release(self, round_id: str) -> Round:
        """Release every reservation of a reserved round (idempotent)."""
        r = self._post("/v1/rounds/%s/release" % _seg(round_id, "round id"), {},
                       round_id=round_id)
        return Round.from_json(r.body, r.headers.get("idempotent-replayed") == "true")

    def get_round(self, round_id: str) -> Round:
        return Round.from_json(self._get("/v1/rounds/" + _seg(round_id, "round id")))

    # ---------------------------------------------------------------- history, summary

    def history(self, client_id: str, *, limit: Optional[int] = None,
                cursor: Optional[str] = None) -> HistoryPage:
        """One page of a client's charges, newest first."""
        return HistoryPage.from_json(self._get(
            "/v1/clients/%s/rounds" % _seg(client_id, "client id"),
            {"limit": limit, "cursor": cursor}))

    def iter_history(self, client_id: str, *,
                     page_size: Optional[int] = None) -> Iterator[Charge]:
        """Every charge of a client's history, newest first, page after page."""
        cursor: Optional[str] = None
        while True:
            page = self.history(client_id, limit=page_size, cursor=cursor)
            yield from page.charges
            cursor = page.next_cursor
            if not cursor:
                return

    def summary(self) -> Summary:
        return Summary.from_json(self._get("/v1/summary"))

    def ledger_history(self, resolution: str = "hour", *,
                       start: Optional[Union[str, datetime.datetime]] = None,
                       end: Optional[Union[str, datetime.datetime]] = None) -> LedgerHistory:
        """The ledger-wide series over time (GET /v1/history): one point per `resolution`
        bucket ("minute", "hour" or "day") overlapping [start, end) among those the daemon
        keeps. start and end are RFC 3339 strings or aware datetimes (None: no bound).
        (`history` is a client's charges.)"""
        return LedgerHistory.from_json(self._get("/v1/history", {
            "resolution": resolution, "from": _rfc3339(start), "to": _rfc3339(end)}))

    def healthz(self) -> Dict[str, Any]:
        r: Dict[str, Any] = self._get("/healthz")
        return r


def from_env(**kw: Any) -> Client:
    """A Client from DPBUDGET_URL, DPBUDGET_TOKEN and DPBUDGET_CAFILE (keyword arguments win)."""
    kw.setdefault("url", os.environ.get("DPBUDGET_URL", "http://127.0.0.1:8080"))
    if os.environ.get("DPBUDGET_TOKEN") and "token" not in kw:
        kw["token"] = os.environ["DPBUDGET_TOKEN"]
    if os.environ.get("DPBUDGET_CAFILE") and "cafile" not in kw:
        kw["cafile"] = os.environ["DPBUDGET_CAFILE"]
    url = kw.pop("url")
    return Client(url, **kw)
