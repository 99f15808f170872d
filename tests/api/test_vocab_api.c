/*
 * test_vocab_api.c - the limits on what enters the ledger's event vocabulary, over HTTP: an
 * event's objects and stored bytes at every call that brings one in (PUT /v1/events/{name},
 * POST /v1/rounds charging or reserving, POST /v1/eligibility), the named events' limits
 * (--max-named-events, --max-named-event-bytes: own daemons) and the bound on a page of
 * GET /v1/events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "client.h"
#include "suites.h"

/* A growing string (abort when out of memory: a test helper). */
typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *t)
{
    size_t k = strlen(t);
    if (b->n + k + 1 > b->cap) {
        b->cap = (b->n + k + 1) * 2;
        if ((b->s = realloc(b->s, b->cap)) == NULL)
            abort();
    }
    memcpy(b->s + b->n, t, k + 1);
    b->n += k;
}

/* {"class_name":"ComposedDpEvent","events":[n Gaussians]}: n + 1 event objects (sigma
 * distinct per seed, so each such event is new to the vocabulary). */
static void composed(sbuf *b, size_t n, int seed)
{
    sb_add(b, "{\"class_name\":\"ComposedDpEvent\",\"events\":[");
    for (size_t i = 0; i < n; i++) {
        char g[96];
        snprintf(g, sizeof g, "%s{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":%d.%zu}",
                 i ? "," : "", 100 + seed, i + 1);
        sb_add(b, g);
    }
    sb_add(b, "]}");
}

/* Two tree aggregation epochs of 10000 steps each (3 objects, about 160 KB stored: 8 bytes a
 * step), about 40 KB of JSON. */
static void two_trees(sbuf *b)
{
    sb_add(b, "{\"class_name\":\"ComposedDpEvent\",\"events\":[");
    for (int t = 0; t < 2; t++) {
        sb_add(b, t ? ",{" : "{");
        sb_add(b, "\"class_name\":\"SingleEpochTreeAggregationDpEvent\",\"noise_multiplier\":"
                  "5,\"step_counts\":[");
        for (int i = 0; i < 10000; i++)
            sb_add(b, i ? ",1" : "1");
        sb_add(b, "]}");
    }
    sb_add(b, "]}");
}

static void call(api_reply *r, const char *method, const char *path, const char *pre,
                 const char *event, const char *post)
{
    sbuf b = {0};
    sb_add(&b, pre);
    sb_add(&b, event);
    sb_add(&b, post);
    api_call(method, path, "application/json", b.s, b.n, r);
    free(b.s);
}

static void mk_client(const char *id)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/clients/%s", id);
    const char *body = "{\"budget\":{\"epsilon\":1000000,\"delta\":1e-5}}";
    api_reply r;
    api_call("PUT", path, "application/json", body, strlen(body), &r);
    CHECKF(r.status == 201 || r.status == 200, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
}

/* Every call that brings an event into the ledger answers one past the limits alike, and
 * stores nothing; one at the limit (1000 objects) is taken. */
static void vocab_api_event_limits(void)
{
    mk_client("vocab-c");
    sbuf many = {0}, big = {0}, fits = {0};
    composed(&many, 1000, 1); /* 1001 objects */
    two_trees(&big);
    composed(&fits, 999, 2); /* 1000 objects */
    static const struct {
        const char *method, *path, *pre, *post;
    } calls[] = {
        {"PUT", "/v1/events/vocab-named", "{\"event\":", "}"},
        {"POST", "/v1/rounds",
         "{\"round_id\":\"vocab-r1\",\"event\":", ",\"participants\":[\"vocab-c\"]}"},
        {"POST", "/v1/rounds", "{\"round_id\":\"vocab-r2\",\"event\":",
         ",\"participants\":[\"vocab-c\"],\"phase\":\"reserve\"}"},
        {"POST", "/v1/rounds", "{\"round_id\":\"vocab-r3\",\"dry_run\":true,\"event\":",
         ",\"participants\":[\"vocab-c\"]}"},
        {"POST", "/v1/eligibility", "{\"event\":", ",\"clients\":[\"vocab-c\"]}"},
    };
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
        api_reply r;
        call(&r, calls[k].method, calls[k].path, calls[k].pre, many.s, calls[k].post);
        CHECKF(is_problem(&r, 422, "event_too_complex", "event") &&
                   strstr(jstr(r.json, "detail"), "1001") != NULL,
               "%s %s: %ld %.300s", calls[k].method, calls[k].path, r.status, r.body);
        api_reply_free(&r);
        call(&r, calls[k].method, calls[k].path, calls[k].pre, big.s, calls[k].post);
        CHECKF(is_problem(&r, 413, "event_too_large", "event") &&
                   strstr(jstr(r.json, "detail"), "131072") != NULL,
               "%s %s: %ld %.300s", calls[k].method, calls[k].path, r.status, r.body);
        api_reply_free(&r);
    }
    /* nothing was stored */
    api_reply r;
    api_get("/v1/events/vocab-named", &r);
    CHECK(r.status == 404);
    api_reply_free(&r);
    api_get("/v1/rounds/vocab-r1", &r);
    CHECK(r.status == 404);
    api_reply_free(&r);
    api_get("/v1/clients/vocab-c", &r);
    CHECKF(r.status == 200 && jnum(r.json, "rounds") == 0, "%.300s", r.body);
    api_reply_free(&r);
    /* at the limit: taken, by name and in a round */
    call(&r, "PUT", "/v1/events/vocab-named", "{\"event\":", fits.s, "}");
    CHECKF(r.status == 201, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    call(&r, "POST", "/v1/rounds", "{\"round_id\":\"vocab-r1\",\"event\":", fits.s,
         ",\"participants\":[\"vocab-c\"]}");
    CHECKF(r.status == 200 && jint_is(r.json, "charged", 1), "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    free(many.s);
    free(big.s);
    free(fits.s);
}

const tl_test VOCAB_API_TESTS[] = {
    TL_T(vocab_api_event_limits),
};
const size_t VOCAB_API_NTESTS = sizeof VOCAB_API_TESTS / sizeof VOCAB_API_TESTS[0];

/* ---- own daemons: the named events' limits and the list's pages ---------------------------- */

static size_t named_total(void)
{
    api_reply r;
    api_get("/v1/events?limit=1", &r);
    size_t n = r.status == 200 ? (size_t)jnum(r.json, "total") : 0;
    api_reply_free(&r);
    return n;
}

static long put_named(const char *name, size_t gaussians, int seed)
{
    sbuf ev = {0};
    composed(&ev, gaussians, seed);
    char path[160];
    snprintf(path, sizeof path, "/v1/events/%s", name);
    api_reply r;
    call(&r, "PUT", path, "{\"event\":", ev.s, "}");
    long st = r.status;
    if (st != 201 && st != 200)
        CHECKF(is_problem(&r, 422, "named_events_limit", "name"), "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    free(ev.s);
    return st;
}

/* 24 names of 900 Gaussians each (about 60 KB of JSON apiece, 1.4 MB together): a page of
 * up to 1000 stops at 1 MiB and its cursor leads to the rest, every name once. Past
 * --max-named-events a new name is refused (422 named_events_limit), and past
 * --max-named-event-bytes too. */
static void vocab_api_named_limits_and_pages(void)
{
    /* each daemon the harness starts has a data directory of its own, empty */
    const char *plain[] = {"--max-body", "262144", NULL};
    int st = api_daemon_start(plain, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st != 0)
        return;
    for (int i = 0; i < 24; i++) {
        char name[32];
        snprintf(name, sizeof name, "vocab-page-%02d", i);
        CHECK(put_named(name, 900, i) == 201);
    }
    /* the pages */
    size_t seen = 0, pages = 0;
    char path[96] = "/v1/events?limit=1000";
    for (;;) {
        api_reply r;
        api_get(path, &r);
        CHECKF(r.status == 200, "%ld %.200s", r.status, r.body);
        if (r.status != 200) {
            api_reply_free(&r);
            break;
        }
        size_t n = json_array_size(jget(r.json, "events"));
        CHECKF(r.body_len <= (1u << 20) + 70000 && n >= 1, "a page of %zu names, %zu bytes", n,
               r.body_len);
        seen += n;
        pages++;
        const char *next = jstr(r.json, "next_cursor");
        if (next == NULL || pages > 10) {
            api_reply_free(&r);
            break;
        }
        snprintf(path, sizeof path, "/v1/events?limit=1000&cursor=%s", next);
        api_reply_free(&r);
    }
    CHECKF(seen == 24 && pages >= 2, "%zu names in %zu pages", seen, pages);
    CHECK(api_daemon_stop() == 0);
    /* the count */
    const char *limited[] = {"--max-named-events", "3", NULL};
    if ((st = api_daemon_start(limited, NULL, "http")) != 0) {
        CHECKF(0, "dpbudgetd --max-named-events did not start (%d)", st);
        return;
    }
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "vocab-count-%d", i);
        CHECK(put_named(name, 2, i) == 201);
    }
    CHECK(put_named("vocab-count-3", 2, 3) == 422);
    CHECK(put_named("vocab-count-0", 2, 0) == 200); /* the same again: answered */
    CHECK(api_daemon_stop() == 0);
    /* the bytes: 300 Gaussians take about 2.7 KB stored, two of them more than 4096 */
    const char *tight[] = {"--max-named-event-bytes", "4096", NULL};
    if ((st = api_daemon_start(tight, NULL, "http")) != 0) {
        CHECKF(0, "dpbudgetd --max-named-event-bytes did not start (%d)", st);
        return;
    }
    CHECK(put_named("vocab-bytes-1", 300, 1) == 201);
    CHECK(put_named("vocab-bytes-2", 300, 2) == 422);
    CHECK(named_total() == 1);
    CHECK(api_daemon_stop() == 0);
}

const tl_test VOCAB_OWN_TESTS[] = {
    TL_T(vocab_api_named_limits_and_pages),
};
const size_t VOCAB_OWN_NTESTS = sizeof VOCAB_OWN_TESTS / sizeof VOCAB_OWN_TESTS[0];
