/*
 * test_stuck_api.c - issue 37's stuck clients over HTTP: 40 rdp clients with epsilon 1 offered
 * rounds none of them can afford showed "active, 0 %" (only /v1/eligibility told); now their
 * record says stuck with the round, GET /v1/clients?status=stuck lists them, /v1/summary's
 * by_status and the dpbudget_ledger_clients gauge count them; an admission, a budget raise
 * and a release clear it; a dry run sets nothing.
 *
 * Every id starts with "stuck_api-" and its clients carry the label pool=stuck_api-N: the
 * tests share the suite's daemon (no --default-budget); counts are compared before and after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "suites.h"

/* a Gaussian with sigma 1: about 5 at delta 1e-5, past a budget of 1; sigma 5: about 0.79 */
#define G1 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1}"
#define G5 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}"
#define G20 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":20}"
#define N 40

/* method path with body (NULL: none) */
static void send(api_reply *r, const char *method, const char *path, const char *body)
{
    api_hreq(method, path, body, NULL, r, NULL);
}

/* POST /v1/rounds: round rid of event over the ids (a JSON list's inside), admit_eligible,
 * with the members of extra ("": none) */
static void post_round(api_reply *r, const char *rid, const char *event, const char *ids,
                       const char *extra)
{
    char *body = api_fmt("{\"round_id\":\"%s\",\"event\":%s,\"participants\":[%s],"
                         "\"policy\":\"admit_eligible\"%s}",
                         rid, event, ids, extra);
    send(r, "POST", "/v1/rounds", body);
    free(body);
}

/* by_status.stuck of /v1/summary and the gauge's status="stuck" line (-1: absent) */
static void stuck_counts(long long *summary, long long *metric)
{
    api_reply r;
    send(&r, "GET", "/v1/summary", NULL);
    json_t *v = json_object_get(json_object_get(r.json, "by_status"), "stuck");
    *summary = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    CHECKF(v != NULL, "/v1/summary has no by_status.stuck: %.300s", r.body);
    api_reply_free(&r);
    api_get("/metrics", &r);
    static const char key[] = "dpbudget_ledger_clients{status=\"stuck\"} ";
    const char *p = r.body ? strstr(r.body, key) : NULL;
    *metric = p ? atoll(p + strlen(key)) : -1;
    CHECKF(p != NULL, "/metrics has no %s", key);
    api_reply_free(&r);
}

/* The client's status, and its stuck_round ("" when absent) into round[cap]; *since its
 * stuck_since (0 when absent). */
static const char *status_of(const char *id, char *round, size_t cap, long long *since)
{
    static char st[32];
    api_reply r;
    char *path = api_fmt("/v1/clients/%s", id);
    send(&r, "GET", path, NULL);
    free(path);
    const char *s = r.status == 200 ? jstr(r.json, "status") : NULL;
    const char *rd = r.status == 200 ? jstr(r.json, "stuck_round") : NULL;
    json_t *sn = json_object_get(r.json, "stuck_since");
    snprintf(st, sizeof st, "%s", s ? s : "?");
    snprintf(round, cap, "%s", rd ? rd : "");
    *since = json_is_integer(sn) ? (long long)json_integer_value(sn) : 0;
    api_reply_free(&r);
    return st;
}

/* how many a round's answer admitted */
static size_t admitted(const api_reply *r)
{
    return json_array_size(json_object_get(r->json, "admitted"));
}

/* "stuck_api-<tag>-0", ... as a JSON list of n ids */
static char *ids_json(const char *tag, int from, int n)
{
    size_t cap = (size_t)n * 48 + 4, at = 0;
    char *s = malloc(cap);
    if (s == NULL)
        abort();
    for (int i = from; i < from + n; i++)
        at += (size_t)snprintf(s + at, cap - at, "%s\"stuck_api-%s-%d\"", i > from ? "," : "", tag,
                               i);
    return s;
}

/* The issue's scenario: 40 rdp clients with epsilon 1 (and 5 with 100) registered in one
 * batch, offered two rounds of G(1): the 40 are refused over_budget and show stuck, named by
 * the latest round; the list by status (and by status with their label) gives exactly them,
 * the summary and the gauge count 40 more; eligibility agrees (none eligible); the 5 stay
 * active. Then an affordable round clears 10 of them, a budget raise one more. */
static void stuck_api_issue_scenario(void)
{
    long long s0, m0, s1, m1;
    stuck_counts(&s0, &m0);
    /* one batch: the 40 poor and the 5 rich */
    size_t cap = 160 * (N + 5) + 64, at = 0;
    char *batch = malloc(cap);
    if (batch == NULL)
        abort();
    at += (size_t)snprintf(batch, cap, "{\"clients\":[");
    for (int i = 0; i < N + 5; i++)
        at += (size_t)snprintf(batch + at, cap - at,
                               "%s{\"id\":\"stuck_api-c-%d\",\"budget\":{\"epsilon\":%d,"
                               "\"delta\":1e-5},\"labels\":{\"pool\":\"stuck_api-1\"}}",
                               i ? "," : "", i, i < N ? 1 : 100);
    snprintf(batch + at, cap - at, "]}");
    api_reply r;
    send(&r, "POST", "/v1/clients:batch", batch);
    CHECKF(r.status == 200, "batch: %ld %.300s", r.status, r.body);
    api_reply_free(&r);
    free(batch);
    char *all = ids_json("c", 0, N + 5);
    /* a dry run of what they cannot afford: nothing set */
    post_round(&r, "stuck_api-dry", G1, all, ",\"dry_run\":true");
    CHECKF(r.status == 200 && admitted(&r) == 5, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    char round[160];
    long long since1 = 0, since2 = 0;
    CHECK(strcmp(status_of("stuck_api-c-0", round, sizeof round, &since1), "active") == 0);
    stuck_counts(&s1, &m1);
    CHECKF(s1 == s0 && m1 == m0, "a dry run made clients stuck: %lld -> %lld", s0, s1);
    /* two rounds of G(1) */
    for (int k = 1; k <= 2; k++) {
        post_round(&r, k == 1 ? "stuck_api-r1" : "stuck_api-r2", G1, all, "");
        CHECKF(r.status == 200 && admitted(&r) == 5, "round %d: %ld %.300s", k, r.status, r.body);
        api_reply_free(&r);
        CHECK(strcmp(status_of("stuck_api-c-7", round, sizeof round, k == 1 ? &since1 : &since2),
                     "stuck") == 0);
        CHECKF(strcmp(round, k == 1 ? "stuck_api-r1" : "stuck_api-r2") == 0, "stuck on %s", round);
    }
    CHECKF(since1 > 0 && since2 > since1, "stuck_since %lld then %lld", since1, since2);
    CHECK(strcmp(status_of("stuck_api-c-42", round, sizeof round, &since1), "active") == 0 &&
          round[0] == '\0');
    stuck_counts(&s1, &m1);
    CHECKF(s1 == s0 + N && m1 == m0 + N, "summary %lld -> %lld, gauge %lld -> %lld (expected +%d)",
           s0, s1, m0, m1, N);
    /* the list: by status, and by status and label */
    send(&r, "GET", "/v1/clients?status=stuck&label=pool%3Dstuck_api-1&limit=1000", NULL);
    CHECKF(r.status == 200 && jint_is(r.json, "total", N), "%ld %.300s", r.status, r.body);
    json_t *cl = json_object_get(r.json, "clients");
    CHECK(json_array_size(cl) == N);
    for (size_t i = 0; i < json_array_size(cl); i++) {
        json_t *c = json_array_get(cl, i);
        CHECK(api_str_is(c, "status", "stuck") && api_str_is(c, "stuck_round", "stuck_api-r2"));
        CHECK(jnum(c, "spent.epsilon") == 0.0 && jnum(c, "remaining.epsilon") == 1.0);
    }
    api_reply_free(&r);
    send(&r, "GET", "/v1/clients?status=stuck&limit=1000", NULL);
    CHECKF(r.status == 200 && jint_is(r.json, "total", s1), "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    send(&r, "GET", "/v1/clients?status=stuck&sort=spent&label=pool%3Dstuck_api-1", NULL);
    CHECKF(r.status == 200 && jint_is(r.json, "total", N), "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    /* eligibility says the same of them */
    char *poor = ids_json("c", 0, N);
    char *el = api_fmt("{\"event\":" G1 ",\"clients\":[%s]}", poor);
    send(&r, "POST", "/v1/eligibility", el);
    free(el);
    CHECKF(r.status == 200 && jint_is(r.json, "eligible", 0), "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    free(poor);
    /* an affordable round for ten of them clears those ten */
    char *ten = ids_json("c", 0, 10);
    post_round(&r, "stuck_api-r3", G20, ten, "");
    CHECKF(r.status == 200 && admitted(&r) == 10, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    free(ten);
    CHECK(strcmp(status_of("stuck_api-c-3", round, sizeof round, &since1), "active") == 0);
    /* a budget raise past what r2 would have cost clears one more */
    send(&r, "PUT", "/v1/clients/stuck_api-c-20",
         "{\"budget\":{\"epsilon\":50,\"delta\":1e-5},\"labels\":{\"pool\":\"stuck_api-1\"}}");
    CHECKF(r.status == 200 && api_str_is(r.json, "status", "active"), "%ld %.300s", r.status,
           r.body);
    api_reply_free(&r);
    /* a raise too small keeps another stuck */
    send(&r, "PUT", "/v1/clients/stuck_api-c-21",
         "{\"budget\":{\"epsilon\":1.5,\"delta\":1e-5},\"labels\":{\"pool\":\"stuck_api-1\"}}");
    CHECKF(r.status == 200 && api_str_is(r.json, "status", "stuck") &&
               api_str_is(r.json, "stuck_round", "stuck_api-r2"),
           "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    stuck_counts(&s1, &m1);
    CHECKF(s1 == s0 + N - 11 && m1 == s1, "summary %lld, gauge %lld (expected %lld)", s1, m1,
           s0 + N - 11);
    free(all);
}

/* A client's ETag changes when a refusal makes it stuck (a cached record is not revalidated
 * as "active"); a reservation admits (clears), a round refused for what it holds sets it, the
 * release clears it; the status filter names the new status in its 400. */
static void stuck_api_etag_reservation(void)
{
    api_reply r;
    hx h;
    send(&r, "PUT", "/v1/clients/stuck_api-e", "{\"budget\":{\"epsilon\":1,\"delta\":1e-5}}");
    CHECK(r.status == 201 || r.status == 200);
    api_reply_free(&r);
    api_hreq("GET", "/v1/clients/stuck_api-e", NULL, NULL, &r, &h);
    CHECK(r.status == 200 && h.etag[0]);
    api_reply_free(&r);
    char etag[64];
    snprintf(etag, sizeof etag, "%s", h.etag);
    post_round(&r, "stuck_api-e1", G1, "\"stuck_api-e\"", "");
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    api_hreq("GET", "/v1/clients/stuck_api-e", NULL, etag, &r, &h);
    CHECKF(r.status == 200 && api_str_is(r.json, "status", "stuck"), "%ld %.300s", r.status,
           r.body);
    api_reply_free(&r);
    /* a reservation admits it: active; a round refused for what it holds: stuck; released:
     * active */
    post_round(&r, "stuck_api-e2", G5, "\"stuck_api-e\"",
               ",\"phase\":\"reserve\",\"reservation_ttl_seconds\":600");
    CHECKF(r.status == 200 && admitted(&r) == 1, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    char round[160];
    long long since;
    CHECK(strcmp(status_of("stuck_api-e", round, sizeof round, &since), "active") == 0);
    post_round(&r, "stuck_api-e3", G5, "\"stuck_api-e\"", "");
    CHECKF(r.status == 200 && admitted(&r) == 0, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    CHECK(strcmp(status_of("stuck_api-e", round, sizeof round, &since), "stuck") == 0 &&
          strcmp(round, "stuck_api-e3") == 0);
    send(&r, "POST", "/v1/rounds/stuck_api-e2/release", "{}");
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    CHECK(strcmp(status_of("stuck_api-e", round, sizeof round, &since), "active") == 0 &&
          round[0] == '\0' && since == 0);
    send(&r, "GET", "/v1/clients?status=stalled", NULL);
    CHECKF(r.status == 400 && r.body && strstr(r.body, "stuck"), "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
}

const tl_test STUCK_API_TESTS[] = {
    TL_T(stuck_api_issue_scenario),
    TL_T(stuck_api_etag_reservation),
};
const size_t STUCK_API_NTESTS = sizeof STUCK_API_TESTS / sizeof STUCK_API_TESTS[0];
