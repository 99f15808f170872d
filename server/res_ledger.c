/*
 * res_ledger.c - the helpers the ledger's resource files share (res_ledger.h): the ledger of
 * a request, the answers to its failures, conditional reads, pagination, label filters, lists
 * of client ids and the event of a request. Calls http, problem, codec, jsonout and
 * core/ledger; never the resource files.
 */
#include "res_ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "codec.h"

ledger *lr_ledger(const http_request *req)
{
    const app_state *a = req->app;
    return a ? a->ledger : NULL;
}

/* 503 ledger_unavailable (http_reply_problem adds Retry-After): the database of --ledger-url
 * cannot be reached. Nothing of the request was acknowledged and no stale state is shown. */
void lr_reply_unavailable(http_response *resp, problem *pb, const char *detail)
{
    problem_set(pb, PB_LEDGER_UNAVAILABLE, NULL,
                "the ledger's database cannot be reached (%s): nothing was acknowledged; retry "
                "after " PROBLEM_LEDGER_RETRY_AFTER " s, here or on another replica, with the "
                "same round id (retries are idempotent)",
                detail && detail[0] ? detail : "connection lost");
    http_reply_problem(resp, pb);
}

/* 1 (answered 503) if st says the database could not be reached. */
int lr_unavailable(http_response *resp, dpb_status st)
{
    if (st != DPB_EUNAVAILABLE)
        return 0;
    problem pb = {0};
    lr_reply_unavailable(resp, &pb, NULL);
    return 1;
}

/* Problems of the ledger's statuses (the compute table does not know them). */
void lr_reply_error(http_response *resp, problem *pb, const dpb_error *err)
{
    problem_code c;
    switch (err->status) {
    case DPB_EUNAVAILABLE:
        lr_reply_unavailable(resp, pb, err->detail);
        return;
    case DPB_ECONFLICT:
        c = PB_CONFLICT;
        break;
    case DPB_EREADONLY:
        c = PB_READ_ONLY;
        break;
    case DPB_EIO:
        c = PB_NOT_DURABLE;
        break;
    case DPB_ENOTFOUND:
        c = PB_NOT_FOUND;
        break;
    case DPB_EFORBIDDEN:
        c = PB_NOT_RESERVATION_OWNER;
        break;
    case DPB_EQUOTA:
        c = PB_RESERVATION_QUOTA;
        break;
    case DPB_ELIMIT: /* the named events' limits (an event's own: lr_event_fits, before) */
        c = strcmp(err->field, "name") == 0 ? PB_NAMED_EVENTS_LIMIT
                                            : problem_from_status(err->status);
        break;
    default:
        c = problem_from_status(err->status);
    }
    problem_set(pb, c, err->field, "%s", err->detail[0] ? err->detail : dpb_strstatus(err->status));
    http_reply_problem(resp, pb);
}

/* Every read of a ledger that went read-only after an I/O failure says so: what it shows is
 * what is durable, and changes are refused until a restart. */
void lr_mark_read_only(const http_request *req, http_response *resp)
{
    ledger *l = lr_ledger(req);
    if (l && ledger_read_only(l)) {
        resp->extra_name = "Ledger-Read-Only";
        resp->extra_value = "true";
    }
}

int lr_found(http_response *resp, dpb_status st, const char *field, const char *noun,
             const char *id, const char *hint)
{
    if (lr_unavailable(resp, st))
        return 0;
    if (st == DPB_OK)
        return 1;
    problem pb = {0};
    problem_set(&pb, PB_NOT_FOUND, field, "no %s '%.128s'%s", noun, id, hint);
    http_reply_problem(resp, &pb);
    return 0;
}

int lr_not_modified(const http_request *req, http_response *resp, const char *etag)
{
    lr_mark_read_only(req, resp);
    return http_not_modified(req, resp, etag);
}

int lr_no_ledger(const http_request *req, http_response *resp)
{
    ledger *l = lr_ledger(req);
    problem pb = {0};
    if (l) {
        /* a silent database: answered at once, not after a wait on it behind the lock
         * (the store probes it once a second and lets calls through once it answers) */
        ledger_health h;
        ledger_get_health(l, &h);
        if (!h.refusing)
            return 0;
        char why[128];
        snprintf(why, sizeof why, "it has not answered for %.0f s", h.silent_s);
        lr_reply_unavailable(resp, &pb, h.silent_s > 0.0 ? why : "it left a statement unanswered");
        return 1;
    }
    problem_set(&pb, PB_READ_ONLY, NULL, "this daemon runs without a ledger (--no-ledger)");
    http_reply_problem(resp, &pb);
    return 1;
}

/* ---- clients ----------------------------------------------------------------------------------
 */
void lr_put_real(jsonout_w *w, const char *key, double x)
{
    jsonout_key(w, key);
    codec_write_real(w, x);
}

void lr_put_int(jsonout_w *w, const char *key, long long v)
{
    jsonout_key(w, key);
    jsonout_int(w, v);
}

void lr_put_str(jsonout_w *w, const char *key, const char *s)
{
    jsonout_key(w, key);
    jsonout_str(w, s);
}

int lr_label_char_ok(unsigned char ch, int key)
{
    if (key)
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_' || ch == '-' || ch == '.';
    return ch >= 0x20 && ch != 0x7f;
}

/* A label filter "key=value" obeys the labels' own rule (decode_labels): anything else could
 * match nothing by accident or alias another label. */
int lr_label_filter_ok(const char *f)
{
    const char *eq = strchr(f, '=');
    if (eq == NULL || eq == f || eq - f > 32 || strlen(eq + 1) > 64)
        return 0;
    for (const char *p = f; p < eq; p++)
        if (!lr_label_char_ok((unsigned char)*p, 1))
            return 0;
    const unsigned char *v = (const unsigned char *)eq + 1;
    for (size_t n = strlen((const char *)v), i = 0; i < n;) {
        size_t k = utf8_seq_len(v + i, n - i);
        if (k == 0 || !lr_label_char_ok(v[i], 0))
            return 0;
        i += k;
    }
    return 1;
}

/* Parse an unsigned decimal query argument in [lo, hi]; -1 when malformed. */
static long long query_uint(const char *s, long long lo, long long hi)
{
    if (s == NULL || *s == '\0' || strlen(s) > 18)
        return -1;
    long long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v >= lo && v <= hi ? v : -1;
}

/* The cursor ("next_cursor") of the page of n from offset of total after this one into buf,
 * or NULL when this page is the last. */
const char *lr_next_cursor(char buf[32], size_t offset, size_t n, size_t total)
{
    snprintf(buf, 32, "o%zu", offset + n);
    return offset + n < total ? buf : NULL;
}

void lr_set_next_cursor(json_t *o, size_t offset, size_t n, size_t total)
{
    char buf[32];
    const char *next = lr_next_cursor(buf, offset, n, total);
    json_object_set_new(o, "next_cursor", next ? json_string(next) : json_null());
}

/* limit and cursor ("o" + position) of a paginated list; -1 with the problem recorded. */
int lr_page_args(const http_request *req, size_t *limit, size_t *offset, problem *pb)
{
    const char *s;
    if ((s = http_query(req, "limit"))) {
        long long v = query_uint(s, 1, 1000);
        if (v < 0) {
            problem_set(pb, PB_INVALID_PARAMETER, "limit", "limit must be 1 to 1000");
            return -1;
        }
        *limit = (size_t)v;
    }
    if ((s = http_query(req, "cursor"))) {
        long long v = s[0] == 'o' ? query_uint(s + 1, 0, 1LL << 40) : -1;
        if (v < 0) {
            problem_set(pb, PB_INVALID_PARAMETER, "cursor",
                        "cursor must be a next_cursor value from an earlier page");
            return -1;
        }
        *offset = (size_t)v;
    }
    return 0;
}
void lr_release(lr_owned *o)
{
    free(o->ids);
    dp_event_free(o->ev);
    json_decref(o->body);
}

int lr_page_start(const http_request *req, http_response *resp, size_t *limit, size_t *offset)
{
    *limit = 100;
    *offset = 0;
    if (lr_no_ledger(req, resp))
        return 1;
    problem pb = {0};
    if (lr_page_args(req, limit, offset, &pb) == 0)
        return 0;
    http_reply_problem(resp, &pb);
    return 1;
}

int lr_decode_ids(json_t *arr, const char *name, const char ***ids, size_t *n, problem *pb)
{
    *ids = NULL;
    *n = 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0 ||
        json_array_size(arr) > LEDGER_MAX_PARTICIPANTS) {
        problem_set(pb,
                    !json_is_array(arr)         ? PB_WRONG_TYPE
                    : json_array_size(arr) == 0 ? PB_INVALID_PARAMETER
                                                : PB_TOO_MANY_VALUES,
                    name, "'%s' must be a list of 1 to %d client ids", name,
                    LEDGER_MAX_PARTICIPANTS);
        return -1;
    }
    size_t m = json_array_size(arr);
    const char **v = calloc(m, sizeof *v);
    if (v == NULL)
        return problem_oom(pb);
    for (size_t i = 0; i < m; i++) {
        json_t *x = json_array_get(arr, i);
        char f[48];
        snprintf(f, sizeof f, "%s[%zu]", name, i);
        if (!json_is_string(x)) {
            problem_set(pb, PB_WRONG_TYPE, f, "'%s' must be a client id string", f);
            free(v);
            return -1;
        }
        if (codec_id(json_string_value(x), json_string_length(x), f, pb) < 0) {
            free(v);
            return -1;
        }
        v[i] = json_string_value(x);
    }
    *ids = v;
    *n = m;
    return 0;
}

int lr_event_fits(const dp_event *ev, problem *pb)
{
    dpb_error err = {0};
    ledger_event_fit f = ledger_event_check(ev, &err);
    if (f == LEDGER_EVENT_FITS)
        return 0;
    problem_set(pb, f == LEDGER_EVENT_TOO_LARGE ? PB_EVENT_TOO_LARGE : PB_EVENT_TOO_COMPLEX,
                "event", "%s", err.detail);
    return -1;
}

/* The request's event: "event" (an Event) or "event_name" (a registered one), exactly one;
 * NULL with the problem recorded. */
dp_event *lr_event_or_name(const http_request *req, json_t *j, problem *pb)
{
    json_t *ev = json_object_get(j, "event"), *nm = json_object_get(j, "event_name");
    if (ev && nm) {
        problem_set(pb, PB_INVALID_PARAMETER, "event_name",
                    "give either 'event' or 'event_name' (a name registered with PUT "
                    "/v1/events/{name}), not both");
        return NULL;
    }
    if (nm == NULL) { /* an inline event: within the ledger's limits (a named one was) */
        dp_event *out = codec_event(ev, "event", DP_PARAM_NONE, pb);
        if (out && lr_event_fits(out, pb) < 0) {
            dp_event_free(out);
            return NULL;
        }
        return out;
    }
    if (!json_is_string(nm)) {
        problem_set(pb, PB_WRONG_TYPE, "event_name", "'event_name' must be a string");
        return NULL;
    }
    const char *name = json_string_value(nm);
    if (codec_id(name, json_string_length(nm), "event_name", pb) < 0)
        return NULL;
    dp_event *out = NULL;
    uint64_t seq;
    dpb_status st = ledger_get_event(lr_ledger(req), name, &out, &seq);
    if (st == DPB_EUNAVAILABLE) {
        problem_set(pb, PB_LEDGER_UNAVAILABLE, "event_name",
                    "the ledger's database cannot be reached to look up the event '%s': "
                    "nothing was acknowledged; retry after " PROBLEM_LEDGER_RETRY_AFTER " s",
                    name);
        return NULL;
    }
    if (st != DPB_OK || out == NULL) {
        problem_set(pb, PB_UNKNOWN_EVENT_NAME, "event_name",
                    "no event is registered as '%s': register it with PUT /v1/events/%s", name,
                    name);
        return NULL;
    }
    return out;
}

/* ---- times ------------------------------------------------------------------------------------
 */

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar (Howard Hinnant's
 * days_from_civil), and back. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

void lr_time_str(uint64_t ms, char out[32])
{
    out[0] = '\0';
    if (ms == 0)
        return;
    int64_t days = (int64_t)(ms / 86400000u), y;
    unsigned m, d, in_day = (unsigned)(ms % 86400000u);
    civil_from_days(days, &y, &m, &d);
    snprintf(out, 32, "%04lld-%02u-%02uT%02u:%02u:%02u.%03uZ", (long long)y, m, d,
             in_day / 3600000u, in_day / 60000u % 60u, in_day / 1000u % 60u, in_day % 1000u);
}

void lr_put_time(jsonout_w *w, const char *key, uint64_t ms)
{
    char t[32];
    lr_time_str(ms, t);
    jsonout_key(w, key);
    if (t[0])
        jsonout_str(w, t);
    else
        jsonout_null(w);
}

/* n decimal digits at *p into *v (p advanced): 0, or -1. */
static int digits(const char **p, int n, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return -1;
        *v = *v * 10 + (unsigned)(**p - '0');
    }
    return 0;
}

int lr_parse_time(const char *s, uint64_t *ms)
{
    static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    unsigned y, mo, d, h, mi, sec, frac = 0, oh = 0, om = 0;
    const char *p = s;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
        digits(&p, 2, &d) || (*p != 'T' && *p != 't') || (p++, digits(&p, 2, &h)) || *p++ != ':' ||
        digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &sec))
        return -1;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; *p >= '0' && *p <= '9'; p++, n++)
            if (n < 3)
                frac = frac * 10 + (unsigned)(*p - '0');
        if (n == 0)
            return -1;
        for (; n < 3; n++)
            frac *= 10;
    }
    int sign = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        sign = *p++ == '+' ? 1 : -1;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59)
            return -1;
    } else {
        return -1;
    }
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
        (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 60)
        return -1;
    if (sec == 60) /* a leap second: the ledger's clock (POSIX) repeats 59 */
        sec = 59;
    int64_t t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    t -= sign * (int64_t)(oh * 3600 + om * 60);
    if (t < 0)
        return -1;
    *ms = (uint64_t)t * 1000u + frac;
    return 0;
}
