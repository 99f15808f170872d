/*
 * test_workflow.c - a federated coordinator's workflow over HTTP (issue: the whole round
 * workflow): the honest status in the client record, /v1/summary and /metrics; bulk
 * registration (POST /v1/clients:batch); eligibility (POST /v1/eligibility).
 *
 * Every test uses its own client, label and round ids (prefixed with the test's name): all
 * tests share the suite's daemon (no --default-budget).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "suites.h"

/* one step of the Poisson-sampled Gaussian (q = 0.2, sigma = 1): the "heavy" federated round */
#define HEAVY                                                                                      \
    "{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.2,\"event\":{"           \
    "\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":0.8}}"
/* a Gaussian with sigma 5: ~0.79 for one round at delta 1e-5 */
#define G5 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}"

/* method path with a printf-formatted body (NULL: none) */
static void req(api_reply *r, hx *h, const char *method, const char *path, const char *f, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static void req(api_reply *r, hx *h, const char *method, const char *path, const char *f, ...)
{
    char *body = NULL;
    if (f) {
        va_list ap;
        va_start(ap, f);
        body = api_vfmt(f, ap);
        va_end(ap);
    }
    api_hreq(method, path, body, NULL, r, h);
    free(body);
}

static void mk(const char *id, double eps, const char *labels)
{
    api_reply r;
    char path[200];
    snprintf(path, sizeof path, "/v1/clients/%s", id);
    req(&r, NULL, "PUT", path, "{\"budget\":{\"epsilon\":%.17g,\"delta\":1e-5}%s%s}", eps,
        labels ? ",\"labels\":" : "", labels ? labels : "");
    CHECKF(r.status == 201 || r.status == 200, "PUT %s: %ld %.300s", id, r.status, r.body);
    api_reply_free(&r);
}

static char *client_status(const char *id)
{
    api_reply r;
    char path[200];
    snprintf(path, sizeof path, "/v1/clients/%s", id);
    req(&r, NULL, "GET", path, NULL);
    const char *s = r.status == 200 ? jstr(r.json, "status") : NULL;
    char *out = api_fmt("%s", s ? s : "?");
    api_reply_free(&r);
    return out;
}

/* the exhausted count of /v1/summary and of the /metrics gauge */
static void exhausted_counts(long long *summary, long long *metric)
{
    api_reply r;
    req(&r, NULL, "GET", "/v1/summary", NULL);
    *summary = (long long)jnum(r.json, "by_status.exhausted");
    api_reply_free(&r);
    api_get("/metrics", &r);
    const char *p = strstr(r.body, "dpbudget_ledger_clients{status=\"exhausted\"} ");
    *metric = p ? atoll(p + strlen("dpbudget_ledger_clients{status=\"exhausted\"} ")) : -1;
    api_reply_free(&r);
}

/* The heavy run in small: every client is refused over_budget after a few rounds
 * (spent still below epsilon) and the pool empties; before, they all still showed "active"
 * and /v1/summary and /metrics counted 0 exhausted. */
static void status_heavy_run_shows_exhausted(void)
{
    enum { N = 8 };
    long long s0, m0;
    exhausted_counts(&s0, &m0);
    char ids[N][64], plist[N * 70] = "";
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "status_heavy-c%d", i);
        mk(ids[i], 8, NULL);
        char *x = api_fmt("%s\"%s\"", i ? "," : "", ids[i]);
        strcat(plist, x);
        free(x);
    }
    int rounds = 0, empty = 0;
    for (int k = 0; k < 200 && !empty; k++) {
        api_reply r;
        req(&r, NULL, "POST", "/v1/rounds",
            "{\"round_id\":\"status_heavy-r%d\",\"event\":" HEAVY
            ",\"participants\":[%s],\"policy\":\"admit_eligible\"}",
            k, plist);
        CHECKF(r.status == 200, "round %d: %ld %.300s", k, r.status, r.body);
        empty = json_array_size(jget(r.json, "admitted")) == 0;
        if (empty) {
            for (int i = 0; i < N; i++) {
                char p1[40], p2[40];
                snprintf(p1, sizeof p1, "refused[%d].reason", i);
                snprintf(p2, sizeof p2, "refused[%d].spent_before", i);
                const char *why = jstr(r.json, p1);
                CHECKF(why && strcmp(why, "over_budget") == 0 && jnum(r.json, p2) < 8, "%.300s",
                       r.body);
            }
        }
        rounds += !empty;
        api_reply_free(&r);
    }
    CHECKF(empty && rounds > 2, "the pool emptied after %d rounds", rounds);
    for (int i = 0; i < N; i++) {
        char *st = client_status(ids[i]);
        CHECKF(strcmp(st, "exhausted") == 0, "%s: %s", ids[i], st);
        free(st);
    }
    long long s1, m1;
    exhausted_counts(&s1, &m1);
    CHECKF(s1 == s0 + N && m1 == m0 + N, "summary %lld -> %lld, metrics %lld -> %lld", s0, s1, m0,
           m1);
    api_reply r;
    req(&r, NULL, "GET", "/v1/clients?status=exhausted&limit=1000", NULL);
    size_t i;
    json_t *c;
    int seen = 0;
    json_array_foreach(jget(r.json, "clients"), i, c) seen +=
        strncmp(json_string_value(json_object_get(c, "id")), "status_heavy-", 13) == 0;
    CHECKF(seen == N, "the status filter lists %d of %d", seen, N);
    api_reply_free(&r);
}

const tl_test WORKFLOW_TESTS[] = {
    TL_T(status_heavy_run_shows_exhausted),
};
const size_t WORKFLOW_NTESTS = sizeof WORKFLOW_TESTS / sizeof WORKFLOW_TESTS[0];
