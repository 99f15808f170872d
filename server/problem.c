/* problem.c - the status-to-HTTP table and problem+json bodies. */
#include "problem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int http;
    const char *code;
    const char *title;
} TABLE[PB_COUNT_] = {
    [PB_NONE] = {200, "ok", "OK"},
    [PB_MALFORMED_JSON] = {400, "malformed_json", "The request body is not valid JSON"},
    [PB_DUPLICATE_KEY] = {400, "duplicate_key", "A JSON object repeats a key"},
    [PB_NUMBER_OUT_OF_RANGE] = {400, "number_out_of_range", "A number is out of range"},
    [PB_UNKNOWN_FIELD] = {400, "unknown_field", "The request has a field this API does not define"},
    [PB_MISSING_FIELD] = {400, "missing_field", "A required field is missing"},
    [PB_WRONG_TYPE] = {400, "wrong_type", "A field has the wrong type"},
    [PB_INVALID_PARAMETER] = {400, "invalid_parameter", "A parameter is outside its domain"},
    [PB_TOO_MANY_VALUES] = {400, "too_many_values", "A list is longer than allowed"},
    [PB_UNKNOWN_EVENT] = {400, "unknown_event", "Unknown event class"},
    [PB_NOT_COVERED] = {422, "not_covered",
                        "The bound's conditions do not hold: nothing is certified"},
    [PB_INFEASIBLE] = {422, "infeasible", "No parameter value reaches the target"},
    [PB_UNSUPPORTED] = {422, "unsupported", "This combination is not supported"},
    [PB_NOT_FOUND] = {404, "not_found", "No such resource"},
    [PB_METHOD_NOT_ALLOWED] = {405, "method_not_allowed", "Method not allowed on this resource"},
    [PB_BODY_TOO_LARGE] = {413, "body_too_large", "The request body is too large"},
    [PB_UNSUPPORTED_MEDIA] = {415, "unsupported_media_type", "The body must be application/json"},
    [PB_NUMERICAL_FAILURE] = {500, "numerical_failure", "A numerical routine failed"},
    [PB_INTERNAL] = {500, "internal", "Internal error"},
    [PB_OUT_OF_MEMORY] = {503, "out_of_memory", "Out of memory: retry later"},
    [PB_UNCERTIFIABLE] = {422, "uncertifiable",
                          "This mechanism cannot be certified differentially private"},
    [PB_CONFLICT] = {409, "conflict", "Conflict with the stored state"},
    [PB_READ_ONLY] = {503, "read_only", "The ledger is read-only"},
    [PB_NOT_DURABLE] = {503, "not_durable", "The change could not be made durable"},
    [PB_LIMIT_EXCEEDED] = {400, "limit_exceeded", "The computation would exceed a size limit"},
    [PB_UNAUTHORIZED] = {401, "unauthorized", "A valid API key is required"},
    [PB_FORBIDDEN] = {403, "forbidden", "The API key lacks the scope this request needs"},
    [PB_RATE_LIMITED] = {429, "rate_limited", "Too many requests for this API key"},
    [PB_INVALID_ID] = {400, "invalid_id", "An identifier breaks the id rule"},
    [PB_INVALID_FRAMING] = {400, "invalid_framing",
                            "The request's length is ambiguous: the connection is closed"},
    [PB_BAD_REQUEST] = {400, "bad_request", "The request is not valid HTTP/1.1"},
    [PB_HEADERS_TOO_LARGE] = {431, "headers_too_large", "The request head is too large"},
    [PB_OVERLOADED] = {503, "overloaded",
                       "The server is at capacity for computations: retry later"},
    [PB_COMPUTE_DEADLINE] = {422, "compute_deadline_exceeded",
                             "The computation ran past its deadline and was stopped"},
    [PB_RESERVATION_EXPIRED] = {409, "reservation_expired",
                                "The round's reservation expired and its budget was released"},
    [PB_RESERVATION_RELEASED] = {409, "reservation_released",
                                 "The round's reservation was released"},
    [PB_UNKNOWN_EVENT_NAME] = {422, "unknown_event_name", "No event is registered under this name"},
    [PB_LEDGER_UNAVAILABLE] = {503, "ledger_unavailable",
                               "The ledger's database cannot be reached: retry later"},
    [PB_HTTP_VERSION] = {505, "http_version_not_supported",
                         "This HTTP version is not supported: use HTTP/1.1"},
    [PB_SHUTTING_DOWN] = {503, "shutting_down",
                          "The daemon is stopping: send new requests to another replica"},
    [PB_NOT_RESERVATION_OWNER] = {403, "not_reservation_owner",
                                  "Another API key holds this reservation"},
    [PB_RESERVATION_QUOTA] = {409, "reservation_quota_exceeded",
                              "The API key holds as many client-reservations as allowed"},
    [PB_LEDGER_COST] = {422, "ledger_cost_exceeded",
                        "The request would compute more than the ledger allows one request"},
    [PB_ANSWER_MEMORY] = {503, "answer_memory_exhausted",
                          "Answers waiting to be read hold the server's answer memory: retry "
                          "later"},
    [PB_EVENT_TOO_LARGE] = {413, "event_too_large", "The event is too large for the ledger"},
    [PB_EVENT_TOO_COMPLEX] = {422, "event_too_complex",
                              "The event holds too many event objects for the ledger"},
    [PB_NAMED_EVENTS_LIMIT] = {422, "named_events_limit",
                               "The ledger holds as many named events as it may"},
    [PB_LOG_TAMPERED] = {500, "log_tampered",
                         "A logged record is not the one the ledger wrote (changed in its store)"},
    [PB_SIGNING_OFF] = {404, "signing_off", "The daemon signs nothing: it runs without a key"},
};

int problem_http_status(problem_code c)
{
    return (unsigned)c < PB_COUNT_ ? TABLE[c].http : 500;
}

const char *problem_code_name(problem_code c)
{
    return (unsigned)c < PB_COUNT_ ? TABLE[c].code : "internal";
}

const char *problem_title(problem_code c)
{
    return (unsigned)c < PB_COUNT_ ? TABLE[c].title : "Internal error";
}

problem_code problem_from_status(dpb_status s)
{
    switch (s) {
    case DPB_OK:
        return PB_NONE;
    case DPB_EINVAL:
        return PB_INVALID_PARAMETER;
    case DPB_ENOTCOVERED:
        return PB_NOT_COVERED;
    case DPB_EINFEASIBLE:
        return PB_INFEASIBLE;
    case DPB_EUNSUPPORTED:
        return PB_UNSUPPORTED;
    case DPB_ENOMEM:
        return PB_OUT_OF_MEMORY;
    case DPB_ENUMERIC:
        return PB_NUMERICAL_FAILURE;
    case DPB_ELIMIT:
        return PB_LIMIT_EXCEEDED;
    case DPB_EUNCERTIFIABLE:
        return PB_UNCERTIFIABLE;
    case DPB_ECANCELLED:
        return PB_COMPUTE_DEADLINE;
    case DPB_EUNAVAILABLE:
        return PB_LEDGER_UNAVAILABLE;
    case DPB_ECOST:
        return PB_LEDGER_COST;
    case DPB_EIO:
    case DPB_EREADONLY:
    case DPB_ECORRUPT:
    case DPB_ENOTFOUND:
    case DPB_ECONFLICT:
    case DPB_EBUDGET:
    case DPB_EFORBIDDEN:
    case DPB_EQUOTA:
        return PB_INTERNAL; /* mapped by the ledger resources themselves */
    }
    return PB_INTERNAL;
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), 0 if none: no overlong
 * forms, no surrogates, nothing above U+10FFFF. */
size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
                 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* Make s valid UTF-8 without control characters, in place: whatever a detail echoes (a
 * path, a header, an id) and wherever the buffer cut it, the answer stays JSON. */
static void printable_utf8(char *s)
{
    unsigned char *u = (unsigned char *)s;
    for (size_t n = strlen(s), i = 0; i < n;) {
        size_t k = utf8_seq_len(u + i, n - i);
        if (k == 0 || u[i] < 0x20 || u[i] == 0x7f) {
            u[i++] = '?';
            continue;
        }
        i += k;
    }
}

void problem_set(problem *p, problem_code c, const char *field, const char *fmt, ...)
{
    if (p->code != PB_NONE)
        return;
    p->code = c;
    snprintf(p->field, sizeof p->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->detail, sizeof p->detail, fmt, ap);
    va_end(ap);
    printable_utf8(p->field);
    printable_utf8(p->detail);
}

int problem_oom(problem *p)
{
    problem_set(p, PB_OUT_OF_MEMORY, NULL, "out of memory");
    return -1;
}

void problem_from_error(problem *p, const dpb_error *err)
{
    if (err->status == DPB_OK) { /* a computation failed without saying why: a defect */
        problem_set(p, PB_INTERNAL, err->field,
                    "the computation stopped without stating a reason (a defect of the service; "
                    "please report the request)");
        return;
    }
    problem_set(p, problem_from_status(err->status), err->field, "%s",
                err->detail[0] ? err->detail : dpb_strstatus(err->status));
}

void problem_extra(problem *p, const char *key, json_t *value)
{
    if (p->extra == NULL)
        p->extra = json_object();
    if (p->extra == NULL) {
        json_decref(value);
        return;
    }
    json_object_set_new(p->extra, key, value);
}

json_t *problem_to_json(problem *p)
{
    problem_code c = p->code == PB_NONE ? PB_INTERNAL : p->code;
    char type[96];
    snprintf(type, sizeof type, "urn:dpbudget:problem:%s", problem_code_name(c));
    json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title", problem_title(c),
                          "status", problem_http_status(c), "code", problem_code_name(c), "detail",
                          p->detail[0] ? p->detail : problem_title(c));
    if (o && p->field[0])
        json_object_set_new(o, "field", json_string(p->field));
    if (o && p->extra)
        json_object_update(o, p->extra);
    json_decref(p->extra);
    p->extra = NULL;
    return o;
}
