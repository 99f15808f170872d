"""Schemathesis hooks for dpbudget's generated contract tests (tests/generated/run.py).

One check replaces schemathesis's positive_data_acceptance: a request that openapi.yaml
calls valid must be answered 2xx, or refused for a reason the schema cannot state. JSON
Schema cannot say that one number is below another, that a cursor came from an earlier
page, that a computation fits the size limit, or which pairs of fields the mechanisms
accept together; those refusals are listed in DOMAIN_RULES below, each with the code and
field the daemon names. Any other refusal of a schema-valid request (a missing or unknown
field, a wrong type, a value outside an enum) means the schema and the daemon disagree,
and fails the run.
"""
import json
import re
import urllib.error
import urllib.request

import schemathesis

# (status, problem code, field regex): refusals of schema-valid requests for rules JSON
# Schema cannot express. Keep each with its reason.
DOMAIN_RULES = [
    # opaque cursors: only a next_cursor the daemon issued is one
    (400, "invalid_parameter", r"cursor"),
    # label filter values are limited in bytes of UTF-8 (JSON Schema counts characters)
    (400, "invalid_parameter", r"label"),
    # epsilon_range needs min < max; ranges of other fields relative to each other
    (400, "invalid_parameter", r"epsilon_range.*|epsilons?|deltas?"),
    # the mechanisms' own domains: PNSGD's contraction constant, a sampling probability
    # that the batch sizes imply, the phases of a proactive schedule, a value that makes
    # another field meaningless, the calibration variable that the event must leave open
    (400, "invalid_parameter", r"(event|dataset|target)(\..*)?|solve_for|batch_size|dataset_size|.*rounds|epochs|plan"),
    (400, "missing_field", r"event\.[a-z_]+"),  # the calibrated field's companions
    # a computation over the size limits (grid points, orders, phases)
    (400, "limit_exceeded", r".*"),
    (413, "body_too_large", r".*"),
    # the log's tree: a size or leaf within the log's current size, leaf_index below
    # tree_size, first <= second, start < end (relations to each other and to the log)
    (400, "invalid_parameter", r"leaf_index|tree_size|first|second|start|end"),
    # the history's window: times from the Unix epoch on (the log's times are ms since it),
    # and to after from (a relation between the two)
    (400, "invalid_parameter", r"from|to"),
]
# well-formed requests the service cannot honour: 404 an unknown resource, 409 a state
# conflict, 422 not covered / unsupported / uncertifiable / an unknown event name
ALWAYS_OK = {404, 409, 422, 429}


def _problem(response):
    return _problem_body(response.content)


def _problem_body(content):
    try:
        body = json.loads(content or b"{}")
    except ValueError:
        return None, None
    if not isinstance(body, dict):
        return None, None
    return body.get("code"), body.get("field") or ""


@schemathesis.check
def schema_valid_request_accepted(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    status = response.status_code
    if 200 <= status < 400 or status in ALWAYS_OK or status >= 500:
        return None  # 5xx: not_a_server_error's to judge
    if status in (401, 403):
        return None  # credentials, not the request's shape
    code, field = _problem(response)
    if code is None and case.method.upper() == "HEAD":
        # HEAD carries no body: the same request as GET names the problem
        req = response.request
        get = urllib.request.Request(req.url, method="GET",
                                     headers={k: v for k, v in req.headers.items()
                                              if k.lower() == "authorization"})
        try:
            urllib.request.urlopen(get, timeout=60)
        except urllib.error.HTTPError as e:
            if e.code == status:
                code, field = _problem_body(e.read())
    body = case.body if isinstance(case.body, (dict, list, str)) else None
    if status == 400 and code == "malformed_json" and "\\u0000" in json.dumps(body):
        # no string may hold U+0000 (openapi.yaml says so once: JSON Schema cannot, but for
        # a pattern on every string)
        return None
    for st, c, rx in DOMAIN_RULES:
        if st == status and c == code and re.fullmatch(rx, field or ""):
            return None
    raise AssertionError(
        f"a request openapi.yaml calls valid was refused {status} {code} (field {field!r}): "
        "the schema should state this rule, or DOMAIN_RULES should name it with its reason"
    )
