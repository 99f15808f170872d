"""Exceptions: one class per problem `code` the daemon answers, in a hierarchy by status.

Every error the daemon answers is RFC 9457 problem+json with a stable `code`; the client
raises the class registered for that code (else the class of its HTTP status, else
ApiError). Each carries `status`, `code`, `detail`, `field` and the whole `problem`.
Errors without an HTTP answer (connection refused or reset, timeouts) are TransportError.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Type

if TYPE_CHECKING:
    from .models import Round

__all__ = [
    "DpbudgetError", "TransportError", "Timeout", "ApiError", "BadRequest", "InvalidId",
    "Unauthorized", "Forbidden", "NotFound", "MethodNotAllowed", "Conflict",
    "ReservationExpired", "ReservationReleased", "PayloadTooLarge", "UnsupportedMediaType",
    "Unprocessable", "NotCovered", "Infeasible", "Unsupported", "Uncertifiable",
    "ComputeDeadlineExceeded", "UnknownEventName", "RateLimited", "HeadersTooLarge",
    "ServerError", "Unavailable", "Overloaded", "ReadOnly", "NotDurable", "LedgerUnavailable",
    "OutOfMemory",
    "RoundRefused", "OverBudget", "error_from_problem",
]


class DpbudgetError(Exception):
    """Base of every error this library raises."""


class TransportError(DpbudgetError):
    """No HTTP answer: the connection failed (after the retries allowed, for idempotent
    calls). For a round the request may or may not have reached the daemon: retry with the
    same round id (`round_id` is set) and the daemon replays or applies it exactly once."""

    def __init__(self, message: str, round_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.round_id = round_id


class Timeout(TransportError):
    """No answer within the timeout. Never retried automatically (a computation that ran
    out of time would run out again); a round may be retried with the same round id."""


class ApiError(DpbudgetError):
    """An error answer (4xx/5xx) of the daemon."""

    status = 0

    def __init__(self, status: int, code: str, detail: str, field: Optional[str] = None,
                 problem: Optional[Dict[str, Any]] = None,
                 headers: Optional[Dict[str, str]] = None,
                 round_id: Optional[str] = None) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.problem = problem if problem is not None else {}
        self.headers = headers if headers is not None else {}
        self.round_id = round_id
        where = " (field %s)" % field if field else ""
        super().__init__("%d %s: %s%s" % (status, code, detail, where))

    @property
    def request_id(self) -> Optional[str]:
        """The daemon's X-Request-Id of the failed request (for its log)."""
        return self.headers.get("x-request-id")


class BadRequest(ApiError):
    """400: malformed request or a value outside its domain; `field` names it."""


class InvalidId(BadRequest):
    """400 invalid_id: an id breaks the rule 1-128 of [A-Za-z0-9._~:@+-], first alphanumeric."""


class Unauthorized(ApiError):
    """401: no valid API key."""


class Forbidden(ApiError):
    """403: the key lacks the scope the operation needs."""


class NotReservationOwner(Forbidden):
    """403 not_reservation_owner: another API key holds the reservation (Round.reserved_by);
    only it or an admin key may commit or release it."""


class NotFound(ApiError):
    """404: no such client, round, event or path."""


class MethodNotAllowed(ApiError):
    """405."""


class Conflict(ApiError):
    """409: a round id reused with another body, an immutable field changed, or an event
    name taken by another event."""


class ReservationExpired(Conflict):
    """409 reservation_expired: the reservation expired before the commit (released)."""


class ReservationReleased(Conflict):
    """409 reservation_released: the round was released before the commit."""


class ReservationQuotaExceeded(Conflict):
    """409 reservation_quota_exceeded: the reservation would take the API key past the
    daemon's --max-reserved-per-key; commit or release held reservations first."""


class PayloadTooLarge(ApiError):
    """413: the body exceeds the daemon's --max-body (--max-bulk-body for lists of clients)."""


class UnsupportedMediaType(ApiError):
    """415."""


class Unprocessable(ApiError):
    """422: well formed, but no certified answer exists."""


class NotCovered(Unprocessable):
    """422 not_covered: a theorem's conditions fail (`problem["conditions"]`)."""


class Infeasible(Unprocessable):
    """422 infeasible: no value reaches the target (`problem["best_achievable"]`)."""


class Unsupported(Unprocessable):
    """422 unsupported: the event, relation and accountant do not go together."""


class Uncertifiable(Unprocessable):
    """422 uncertifiable: the mechanism cannot be certified at all."""


class ComputeDeadlineExceeded(Unprocessable):
    """422 compute_deadline_exceeded: ask for less work."""


class UnknownEventName(Unprocessable):
    """422 unknown_event_name: no event is registered under that name."""


class RateLimited(ApiError):
    """429: the key is over the daemon's --rate-limit; `retry_after` in seconds."""

    @property
    def retry_after(self) -> Optional[float]:
        return _retry_after(self.headers)


class HeadersTooLarge(ApiError):
    """431."""


class ServerError(ApiError):
    """500: numerical_failure or internal; nothing was changed."""


class Unavailable(ApiError):
    """503: retry later (the client already retried as far as it was allowed)."""

    @property
    def retry_after(self) -> Optional[float]:
        return _retry_after(self.headers)


class Overloaded(Unavailable):
    """503 overloaded: every place for computations is taken."""


class ReadOnly(Unavailable):
    """503 read_only: the ledger stopped accepting writes (I/O failure; or --no-ledger)."""


class NotDurable(Unavailable):
    """503 not_durable: the change could not be made durable and was not applied."""


class LedgerUnavailable(Unavailable):
    """503 ledger_unavailable: the ledger's PostgreSQL database (dpbudgetd --ledger-url)
    could not be reached; nothing was acknowledged. Retried after Retry-After like every 503
    (a round with its round id, on any replica: charged once)."""


class OutOfMemory(Unavailable):
    """503 out_of_memory."""


class RoundRefused(DpbudgetError):
    """Raised by Round.raise_for_refused(): some participants were refused. `round` is the
    answer, `refused` its refusals."""

    def __init__(self, round_: Round, message: Optional[str] = None) -> None:
        self.round = round_
        self.refused = list(round_.refused)
        reasons: Dict[str, int] = {}
        for r in self.refused:
            reasons[r.reason] = reasons.get(r.reason, 0) + 1
        summary = ", ".join("%d %s" % (n, k) for k, n in sorted(reasons.items()))
        super().__init__(message or "round %s: %d of %d participants refused (%s)" % (
            round_.round_id, len(self.refused), round_.participants, summary))


class OverBudget(RoundRefused):
    """RoundRefused where at least one participant could not afford the round."""


_BY_CODE: Dict[str, Type[ApiError]] = {
    "invalid_id": InvalidId,
    "conflict": Conflict,
    "reservation_expired": ReservationExpired,
    "reservation_released": ReservationReleased,
    "reservation_quota_exceeded": ReservationQuotaExceeded,
    "not_reservation_owner": NotReservationOwner,
    "not_covered": NotCovered,
    "infeasible": Infeasible,
    "unsupported": Unsupported,
    "uncertifiable": Uncertifiable,
    "compute_deadline_exceeded": ComputeDeadlineExceeded,
    "unknown_event_name": UnknownEventName,
    "overloaded": Overloaded,
    "read_only": ReadOnly,
    "not_durable": NotDurable,
    "ledger_unavailable": LedgerUnavailable,
    "out_of_memory": OutOfMemory,
}

_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: Unprocessable,
    429: RateLimited,
    431: HeadersTooLarge,
    500: ServerError,
    503: Unavailable,
}


def _retry_after(headers: Mapping[str, str]) -> Optional[float]:
    v = headers.get("retry-after")
    try:
        return max(0.0, float(v)) if v is not None else None
    except ValueError:
        return None


def error_from_problem(status: int, problem: Any, headers: Optional[Dict[str, str]] = None,
                       round_id: Optional[str] = None) -> ApiError:
    """The exception for an error answer: by `code`, else by status, else ApiError. A code
    whose class belongs to another status (a proxy's answer, say) falls back to the status."""
    if not isinstance(problem, dict):
        problem = {}
    code = problem.get("code") if isinstance(problem.get("code"), str) else None
    detail = problem.get("detail") if isinstance(problem.get("detail"), str) else None
    field = problem.get("field") if isinstance(problem.get("field"), str) else None
    cls = _BY_CODE.get(code) if code is not None else None
    base = _BY_STATUS.get(status)
    if cls is None or (base is not None and not issubclass(cls, base)):
        cls = base
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    if code is None:
        code = "http_%d" % status
    if detail is None:
        detail = problem.get("title") if isinstance(problem.get("title"), str) else \
            "HTTP %d without a problem+json body" % status
    return cls(status, code, detail, field, problem, headers, round_id)
