/*
 * test_history_api.c - time in the API: GET /v1/history (the ledger-wide series: its shape,
 * its counts against what a round answered, its statuses against GET /v1/summary's, its
 * windows, its ETag and HEAD, and a 400 invalid_parameter for every bad value) and the time
 * of each entry of GET /v1/clients/{id}/rounds. Runs on the shared daemon (its clock is the
 * wall clock: the year-long series are the unit tests', tests/unit/test_time.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "suites.h"

#define G5 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}"

/* ms since the epoch of a time the API wrote ("2026-11-29T11:02:03.456Z"), or 0. */
static uint64_t api_time_ms(const char *s)
{
    int y, mo, d, h, mi, se, ms;
    char z;
    if (s == NULL || strlen(s) != 24 ||
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &se, &ms, &z) != 8 ||
        z != 'Z')
        return 0;
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    time_t t = timegm(&tm);
    return t < 0 ? 0 : (uint64_t)t * 1000u + (uint64_t)ms;
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* The sums over every point of a series. */
typedef struct {
    long long rounds, charges, unknown, over;
    double eps;
    size_t n;
} sums;

static void sum_points(const json_t *j, sums *s)
{
    memset(s, 0, sizeof *s);
    json_t *pts = jget(j, "points");
    s->n = json_array_size(pts);
    for (size_t i = 0; i < s->n; i++) {
        json_t *p = json_array_get(pts, i);
        s->rounds += (long long)jnum(p, "rounds");
        s->charges += (long long)jnum(p, "charges");
        s->eps += jnum(p, "epsilon_spent");
        json_t *u = jget(p, "refusals.unknown_client");
        s->unknown += u ? (long long)json_integer_value(u) : 0;
    }
}

/* GET path: 200 with the History shape (every point's start a bucket's, in order). */
static json_t *get_history(const char *path, char etag[64])
{
    api_reply r;
    hx h;
    api_hreq("GET", path, NULL, NULL, &r, &h);
    CHECKF(r.status == 200 && r.json, "GET %s: %ld %.300s", path, r.status, r.body);
    if (etag)
        snprintf(etag, 64, "%s", h.etag);
    json_t *j = r.json ? json_incref(r.json) : NULL;
    api_reply_free(&r);
    if (j == NULL)
        return NULL;
    const char *res = jstr(j, "resolution");
    uint64_t w = res && strcmp(res, "minute") == 0 ? 60000u
                 : res && strcmp(res, "day") == 0  ? 86400000u
                                                   : 3600000u;
    json_t *pts = jget(j, "points");
    CHECK(json_is_array(pts));
    uint64_t prev = 0;
    for (size_t i = 0; i < json_array_size(pts); i++) {
        json_t *p = json_array_get(pts, i);
        uint64_t t = api_time_ms(jstr(p, "start"));
        CHECKF(t > 0 && t % w == 0 && (i == 0 || t == prev + w), "point %zu start %s", i,
               jstr(p, "start"));
        prev = t;
        CHECK(json_is_object(jget(p, "refusals")) && json_is_object(jget(p, "by_status")));
        CHECK(jnum(p, "epsilon_spent") >= 0.0);
    }
    if (json_array_size(pts) > 0) {
        CHECK(api_time_ms(jstr(j, "from")) == api_time_ms(jstr(json_array_get(pts, 0), "start")));
        CHECK(api_time_ms(jstr(j, "to")) == prev + w);
    } else {
        CHECK(json_is_null(jget(j, "from")) && json_is_null(jget(j, "to")));
    }
    CHECK(api_str_is(j, "epsilon_spent_is", "sum_of_upper_bound_increases"));
    static const char *const R[] = {"minute", "hour", "day"};
    static const long long W[] = {60, 3600, 86400};
    for (int i = 0; i < 3; i++) {
        char k[64];
        snprintf(k, sizeof k, "retention.%s.bucket_seconds", R[i]);
        CHECK(jint_is(j, k, W[i]));
        snprintf(k, sizeof k, "retention.%s.buckets", R[i]);
        CHECK(jnum(j, k) >= 1);
    }
    return j;
}

/* A round over a new client (50 epsilon) and an unknown one: the series over every
 * resolution gains exactly that round, its charge, its refusal and its epsilon; the newest
 * bucket's statuses are the summary's (the same keys); the client's history shows the
 * round's time, between the request's start and end. */
static void history_counts_a_round(void)
{
    json_t *before[3];
    static const char *const P[] = {"/v1/history?resolution=minute", "/v1/history",
                                    "/v1/history?resolution=day"};
    api_reply r;
    api_hreq("PUT", "/v1/clients/history_counts_a_round-c",
             "{\"budget\":{\"epsilon\":50,\"delta\":1e-5}}", NULL, &r, NULL);
    CHECKF(r.status == 201 || r.status == 200, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    for (int i = 0; i < 3; i++)
        before[i] = get_history(P[i], NULL);
    uint64_t t0 = now_ms();
    api_hreq("POST", "/v1/rounds",
             "{\"round_id\":\"history_counts_a_round-r\",\"event\":" G5
             ",\"policy\":\"admit_eligible\",\"participants\":[\"history_counts_a_round-c\","
             "\"history_counts_a_round-x\"]}",
             NULL, &r, NULL);
    uint64_t t1 = now_ms();
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    double inc = jnum(r.json, "admitted[0].spent_after") - jnum(r.json, "admitted[0].spent_before");
    CHECK(inc > 0.5 && inc < 1.0);
    api_reply_free(&r);
    for (int i = 0; i < 3; i++) {
        json_t *after = get_history(P[i], NULL);
        sums a, b;
        sum_points(before[i], &b);
        sum_points(after, &a);
        CHECKF(a.rounds == b.rounds + 1 && a.charges == b.charges + 1 && a.unknown == b.unknown + 1,
               "%s: rounds %lld -> %lld, charges %lld -> %lld, unknown %lld -> %lld", P[i],
               b.rounds, a.rounds, b.charges, a.charges, b.unknown, a.unknown);
        CHECK_REL(a.eps - b.eps, inc, 1e-9);
        /* the newest bucket holds the round, and its statuses are the summary's */
        json_t *pts = jget(after, "points");
        json_t *last = json_array_get(pts, json_array_size(pts) - 1);
        uint64_t start = api_time_ms(jstr(last, "start"));
        CHECK(start <= t1 && api_time_ms(jstr(after, "to")) > t0);
        api_get("/v1/summary", &r);
        CHECK(r.status == 200 && json_equal(jget(r.json, "by_status"), jget(last, "by_status")));
        api_reply_free(&r);
        uint64_t lr = api_time_ms(jstr(after, "last_record_time"));
        CHECKF(lr >= t0 && lr <= t1, "last_record_time %s", jstr(after, "last_record_time"));
        json_decref(after);
        json_decref(before[i]);
    }
    api_get("/v1/clients/history_counts_a_round-c/rounds", &r);
    CHECK(r.status == 200);
    const char *t = jstr(r.json, "charges[0].time");
    uint64_t ms = api_time_ms(t);
    CHECKF(ms >= t0 && ms <= t1, "time %s not within the request [%llu, %llu]", t ? t : "null",
           (unsigned long long)t0, (unsigned long long)t1);
    api_reply_free(&r);
}

/* Windows: from and to pick the buckets overlapping [from, to), bounds in any offset; a
 * window with no bucket answers no points and null bounds. */
static void history_windows(void)
{
    json_t *all = get_history("/v1/history?resolution=minute", NULL);
    if (all == NULL)
        return;
    size_t n = json_array_size(jget(all, "points"));
    CHECK(n >= 1);
    const char *to = jstr(all, "to");
    char path[256];
    snprintf(path, sizeof path, "/v1/history?resolution=minute&from=%s", to ? to : "");
    json_t *none = get_history(path, NULL);
    CHECK(none && json_array_size(jget(none, "points")) == 0);
    json_decref(none);
    json_t *old = get_history("/v1/history?resolution=day&from=2000-01-01T00:00:00Z&to=2000-01-02T"
                              "00:00:00%2B01:00",
                              NULL);
    CHECK(old && json_array_size(jget(old, "points")) == 0 && json_is_null(jget(old, "from")));
    json_decref(old);
    /* the newest minute alone: from one ms before its end (+00:00 spelled out) */
    uint64_t end = api_time_ms(to);
    if (end) {
        time_t s = (time_t)((end - 1) / 1000);
        struct tm tm;
        gmtime_r(&s, &tm);
        char from[64];
        strftime(from, sizeof from, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(path, sizeof path, "/v1/history?resolution=minute&from=%s.%03u%%2B00:00", from,
                 (unsigned)((end - 1) % 1000));
        json_t *one = get_history(path, NULL);
        CHECKF(one && json_array_size(jget(one, "points")) == 1, "%s", path);
        json_decref(one);
    }
    json_decref(all);
}

/* ETag and HEAD as on GET /v1/summary: If-None-Match with the current tag is 304, a change
 * makes it 200; HEAD answers the same status and tag without a body. */
static void history_etag_head(void)
{
    char tag[64];
    json_t *j = get_history("/v1/history?resolution=hour", tag);
    json_decref(j);
    CHECK(tag[0] == '"');
    api_reply r;
    hx h;
    api_hreq("GET", "/v1/history?resolution=hour", NULL, tag, &r, &h);
    CHECK(r.status == 304 && r.body_len == 0);
    api_reply_free(&r);
    api_hreq("GET", "/v1/history?resolution=day", NULL, tag, &r, &h);
    CHECK(r.status == 200); /* another resolution, another representation */
    api_reply_free(&r);
    api_call("HEAD", "/v1/history?resolution=hour", NULL, NULL, 0, &r);
    CHECK(r.status == 200 && r.body_len == 0);
    api_reply_free(&r);
    api_call("HEAD", "/v1/history?resolution=week", NULL, NULL, 0, &r);
    CHECK(r.status == 400 && r.body_len == 0);
    api_reply_free(&r);
    api_hreq("PUT", "/v1/clients/history_etag_head-c",
             "{\"budget\":{\"epsilon\":1,\"delta\":1e-5}}", NULL, &r, NULL);
    CHECK(r.status == 201 || r.status == 200);
    api_reply_free(&r);
    api_hreq("GET", "/v1/history?resolution=hour", NULL, tag, &r, &h);
    CHECK(r.status == 200 && strcmp(h.etag, tag) != 0);
    api_reply_free(&r);
}

/* Every bad value: 400 invalid_parameter naming the parameter. */
static void history_bad_parameters(void)
{
    static const struct {
        const char *query, *field;
    } bad[] = {
        {"resolution=week", "resolution"},
        {"resolution=", "resolution"},
        {"resolution=Hour", "resolution"},
        {"from=yesterday", "from"},
        {"from=2026-11-29", "from"},
        {"from=2026-11-29T11:00:00", "from"}, /* no offset */
        {"from=2026-13-01T00:00:00Z", "from"},
        {"from=2026-02-29T00:00:00Z", "from"}, /* not a leap year */
        {"from=2026-11-29T24:00:00Z", "from"},
        {"from=2026-11-29T11:00:00.Z", "from"},
        {"from=1969-12-31T23:59:59Z", "from"},
        {"to=2026-11-29T11:00:00Zjunk", "to"},
        {"to=2026-11-29T11:00:00%2B25:00", "to"},
        {"from=2026-11-29T12:00:00Z&to=2026-11-29T11:00:00Z", "to"},
        {"from=2026-11-29T12:00:00Z&to=2026-11-29T12:00:00Z", "to"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/history?%s", bad[i].query);
        api_reply r;
        api_get(path, &r);
        CHECKF(is_problem(&r, 400, "invalid_parameter", bad[i].field), "%s: %ld %.300s", path,
               r.status, r.body);
        api_reply_free(&r);
    }
    /* and the good spellings of the same */
    static const char *const good[] = {"from=2026-02-28T23:59:59.999999Z",
                                       "from=2024-02-29t00:00:00z", "to=2030-01-01T00:00:60Z",
                                       "from=1970-01-01T00:00:00Z"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/history?%s", good[i]);
        api_reply r;
        api_get(path, &r);
        CHECKF(r.status == 200, "%s: %ld %.300s", path, r.status, r.body);
        api_reply_free(&r);
    }
}

const tl_test HISTORY_API_TESTS[] = {
    TL_T(history_counts_a_round),
    TL_T(history_windows),
    TL_T(history_etag_head),
    TL_T(history_bad_parameters),
};
const size_t HISTORY_API_NTESTS = sizeof HISTORY_API_TESTS / sizeof HISTORY_API_TESTS[0];
