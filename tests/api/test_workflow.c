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
#include <time.h>

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

static int str_is(const json_t *root, const char *path, const char *want)
{
    return api_str_is(root, path, want);
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

/* ---- bulk registration ----------------------------------------------------------------------- */

static int batch_result_is(const json_t *o, size_t i, const char *result)
{
    char path[48];
    snprintf(path, sizeof path, "results[%zu].result", i);
    const char *got = jstr(o, path);
    return got && strcmp(got, result) == 0;
}

/* Created, then unchanged on a re-send (same versions, nothing logged), then updated; the
 * stored records are those a PUT makes. */
static void batch_create_unchanged_update(void)
{
    const char *body =
        "{\"clients\":[{\"id\":\"batch_cu-a\",\"budget\":{\"epsilon\":8,\"delta\":1e-5},"
        "\"labels\":{\"cohort\":\"batch_cu\"}},{\"id\":\"batch_cu-b\",\"budget\":{\"epsilon\":8,"
        "\"delta\":1e-5},\"accounting\":\"pld\"},{\"id\":\"batch_cu-c\",\"budget\":{\"epsilon\":2,"
        "\"delta\":1e-6},\"neighboring_relation\":\"replace_one\"}]}";
    api_reply r, r2;
    req(&r, NULL, "POST", "/v1/clients:batch", "%s", body);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(jint_is(r.json, "created", 3) && jint_is(r.json, "updated", 0) &&
          jint_is(r.json, "unchanged", 0) && jint_is(r.json, "conflicts", 0));
    for (size_t i = 0; i < 3; i++)
        CHECK(batch_result_is(r.json, i, "created"));
    CHECK(str_is(r.json, "results[1].id", "batch_cu-b"));
    CHECK(json_is_null(jget(r.json, "results[0].code")) &&
          json_is_null(jget(r.json, "results[0].detail")));
    api_reply g;
    req(&g, NULL, "GET", "/v1/clients/batch_cu-b", NULL);
    CHECK(g.status == 200 && str_is(g.json, "accounting", "pld"));
    CHECK(jnum(g.json, "version") == jnum(r.json, "results[1].version"));
    api_reply_free(&g);
    req(&g, NULL, "GET", "/v1/clients/batch_cu-c", NULL);
    CHECK(g.status == 200 && str_is(g.json, "neighboring_relation", "replace_one") &&
          jnum(g.json, "budget.delta") == 1e-6);
    api_reply_free(&g);
    req(&g, NULL, "GET", "/v1/clients?label=cohort%3Dbatch_cu", NULL);
    CHECK(g.status == 200 && jint_is(g.json, "total", 1));
    api_reply_free(&g);
    /* the same batch again: unchanged, versions kept */
    req(&r2, NULL, "POST", "/v1/clients:batch", "%s", body);
    CHECKF(r2.status == 200 && jint_is(r2.json, "unchanged", 3), "%.300s", r2.body);
    for (size_t i = 0; i < 3; i++) {
        char p[40];
        snprintf(p, sizeof p, "results[%zu].version", i);
        CHECK(batch_result_is(r2.json, i, "unchanged") && jnum(r2.json, p) == jnum(r.json, p));
    }
    api_reply_free(&r2);
    /* one changed: updated, the others unchanged */
    req(&r2, NULL, "POST", "/v1/clients:batch",
        "{\"clients\":[{\"id\":\"batch_cu-a\",\"budget\":{\"epsilon\":9,\"delta\":1e-5},"
        "\"labels\":{\"cohort\":\"batch_cu\"}},{\"id\":\"batch_cu-b\",\"budget\":{\"epsilon\":8,"
        "\"delta\":1e-5},\"accounting\":\"pld\"}]}");
    CHECKF(r2.status == 200 && jint_is(r2.json, "updated", 1) && jint_is(r2.json, "unchanged", 1),
           "%.300s", r2.body);
    CHECK(batch_result_is(r2.json, 0, "updated") && batch_result_is(r2.json, 1, "unchanged"));
    CHECK(jnum(r2.json, "results[0].version") > jnum(r.json, "results[0].version"));
    api_reply_free(&r2);
    api_reply_free(&r);
    req(&g, NULL, "GET", "/v1/clients/batch_cu-a", NULL);
    CHECK(jnum(g.json, "budget.epsilon") == 9);
    api_reply_free(&g);
}

/* An item PUT would refuse (a charged client's accounting mode) gets its own "conflict";
 * the others apply. */
static void batch_conflict_item(void)
{
    mk("batch_conflict-x", 8, NULL);
    api_reply r;
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"batch_conflict-r\",\"event\":" G5
        ",\"participants\":[\"batch_conflict-x\"]}");
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/clients:batch",
        "{\"clients\":[{\"id\":\"batch_conflict-new\",\"budget\":{\"epsilon\":1,\"delta\":1e-5}},"
        "{\"id\":\"batch_conflict-x\",\"budget\":{\"epsilon\":8,\"delta\":1e-5},"
        "\"accounting\":\"pld\"}]}");
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(batch_result_is(r.json, 0, "created") && batch_result_is(r.json, 1, "conflict"));
    CHECK(str_is(r.json, "results[1].code", "conflict") &&
          str_is(r.json, "results[1].field", "accounting") &&
          json_is_string(jget(r.json, "results[1].detail")));
    CHECK(jint_is(r.json, "created", 1) && jint_is(r.json, "conflicts", 1));
    api_reply_free(&r);
    api_reply g;
    req(&g, NULL, "GET", "/v1/clients/batch_conflict-x", NULL);
    CHECK(str_is(g.json, "accounting", "rdp"));
    api_reply_free(&g);
    req(&g, NULL, "GET", "/v1/clients/batch_conflict-new", NULL);
    CHECK(g.status == 200);
    api_reply_free(&g);
}

/* A malformed item anywhere: 400 naming it, and nothing applied (not even the items before
 * it). */
static void batch_malformed_applies_nothing(void)
{
    static const struct {
        const char *items, *code, *field;
    } cases[] = {
        {"{\"id\":\"batch_bad-0\",\"budget\":{\"epsilon\":-1,\"delta\":1e-5}}", "invalid_parameter",
         "clients[1].budget.epsilon"},
        {"{\"id\":\"batch_bad-0\",\"budget\":{\"epsilon\":1,\"delta\":1}}", "invalid_parameter",
         "clients[1].budget.delta"},
        {"{\"id\":\"batch/bad\",\"budget\":{\"epsilon\":1,\"delta\":1e-5}}", "invalid_id",
         "clients[1].id"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5}}", "missing_field", "clients[1].id"},
        {"{\"id\":\"batch_bad-1\"}", "missing_field", "clients[1].budget"},
        {"{\"id\":\"batch_bad-1\",\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"x\":1}",
         "unknown_field", "clients[1].x"},
        {"{\"id\":\"batch_bad-1\",\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"accounting\":\"x\"}",
         "invalid_parameter", "clients[1].accounting"},
        {"{\"id\":\"batch_bad-1\",\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":{\"k\":1}}",
         "invalid_parameter", "clients[1].labels"},
        {"7", "wrong_type", "clients[1]"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        api_reply r;
        req(&r, NULL, "POST", "/v1/clients:batch",
            "{\"clients\":[{\"id\":\"batch_bad-first\",\"budget\":{\"epsilon\":1,\"delta\":1e-5}},"
            "%s]}",
            cases[k].items);
        CHECKF(is_problem(&r, 400, cases[k].code, cases[k].field), "case %zu: %ld %.300s", k,
               r.status, r.body);
        api_reply_free(&r);
        req(&r, NULL, "GET", "/v1/clients/batch_bad-first", NULL);
        CHECKF(r.status == 404, "case %zu: the first item was applied", k);
        api_reply_free(&r);
    }
    api_reply r;
    req(&r, NULL, "POST", "/v1/clients:batch", "{\"clients\":[]}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "clients"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/clients:batch", "{\"clients\":{}}");
    CHECK(is_problem(&r, 400, "wrong_type", "clients"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/clients:batch", "{}");
    CHECK(is_problem(&r, 400, "missing_field", "clients"));
    api_reply_free(&r);
    /* 10001 items (empty objects fit the test daemon's body limit): refused by count */
    size_t n = 10001, len = 0;
    char *b = malloc(16 + 3 * n);
    if (b == NULL)
        return;
    len += (size_t)sprintf(b, "{\"clients\":[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(b + len, "%s{}", i ? "," : "");
    sprintf(b + len, "]}");
    req(&r, NULL, "POST", "/v1/clients:batch", "%s", b);
    CHECKF(is_problem(&r, 400, "too_many_values", "clients"), "%ld %.200s", r.status, r.body);
    api_reply_free(&r);
    free(b);
    api_get("/v1/clients:batch", &r);
    CHECK(r.status == 405 && strcmp(r.allow, "POST, OPTIONS") == 0);
    api_reply_free(&r);
}

/* ---- eligibility ----------------------------------------------------------------------------- */

/* affordable_rounds of id in an eligibility answer (-1 when absent) */
static long long affordable(const json_t *o, const char *id, const char **reason, int *capped)
{
    size_t i;
    json_t *c;
    json_array_foreach(jget(o, "clients"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "id")), id) != 0)
            continue;
        if (reason)
            *reason = json_is_string(json_object_get(c, "reason"))
                          ? json_string_value(json_object_get(c, "reason"))
                          : NULL;
        if (capped)
            *capped = json_is_true(json_object_get(c, "affordable_rounds_capped"));
        return (long long)json_integer_value(json_object_get(c, "affordable_rounds"));
    }
    return -1;
}

/* The affordable rounds are exactly the rounds a client is then admitted to, one by one;
 * the cap, refusals, unknown clients, the label selector; nothing changes. */
static void eligibility_matches_rounds(void)
{
    mk("elig-a", 3, "{\"cohort\":\"elig\"}");
    mk("elig-b", 0.5, "{\"cohort\":\"elig\"}");
    mk("elig-twin", 3, NULL); /* the same history as elig-a: the same answer */
    api_reply r;
    req(&r, NULL, "POST", "/v1/eligibility",
        "{\"event\":" G5 ",\"clients\":[\"elig-a\",\"elig-b\",\"elig-nobody\",\"elig-twin\"]}");
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    const char *why = "?";
    int capped = 1;
    long long k = affordable(r.json, "elig-a", &why, &capped);
    CHECKF(k >= 3 && k < 1000 && why == NULL && !capped, "elig-a: %lld", k);
    CHECK(affordable(r.json, "elig-twin", NULL, NULL) == k);
    CHECK(affordable(r.json, "elig-b", &why, NULL) == 0 && why && strcmp(why, "over_budget") == 0);
    CHECK(affordable(r.json, "elig-nobody", &why, NULL) == 0 && why &&
          strcmp(why, "unknown_client") == 0);
    CHECK(jint_is(r.json, "eligible", 2) && jint_is(r.json, "ineligible", 2));
    CHECK(json_is_null(jget(r.json, "clients[2].spent")));
    /* each candidate is named "client", as the admissions and refusals of a round are, and
     * "id" as well (the name eligibility gave it before) */
    size_t ci;
    json_t *cj;
    json_array_foreach(jget(r.json, "clients"), ci, cj)
    {
        CHECKF(json_is_string(json_object_get(cj, "client")) &&
                   json_equal(json_object_get(cj, "client"), json_object_get(cj, "id")),
               "clients[%zu] %.200s", ci, r.body);
    }

    CHECK(jnum(r.json, "clients[0].spent.epsilon") == 0 &&
          jnum(r.json, "clients[0].remaining.epsilon") == 3);
    CHECK(jint_is(r.json, "max_rounds", 1000));
    api_reply_free(&r);
    /* a cap below it */
    req(&r, NULL, "POST", "/v1/eligibility",
        "{\"event\":" G5 ",\"clients\":[\"elig-a\"],\"max_rounds\":2}");
    CHECK(r.status == 200 && affordable(r.json, "elig-a", NULL, &capped) == 2 && capped);
    api_reply_free(&r);
    /* nothing was charged or changed */
    req(&r, NULL, "GET", "/v1/clients/elig-a", NULL);
    CHECK(jint_is(r.json, "rounds", 0));
    api_reply_free(&r);
    /* charged one by one: admitted exactly k times; the count falls by one each time */
    long long admitted = 0;
    for (long long i = 0; i < k + 2 && i < 60; i++) {
        req(&r, NULL, "POST", "/v1/rounds",
            "{\"round_id\":\"elig-r%lld\",\"event\":" G5 ",\"participants\":[\"elig-a\"]}", i);
        int ok = r.status == 200 && json_integer_value(jget(r.json, "charged")) == 1;
        api_reply_free(&r);
        if (!ok)
            break;
        admitted++;
        if (admitted == 1 || admitted == k) {
            req(&r, NULL, "POST", "/v1/eligibility", "{\"event\":" G5 ",\"clients\":[\"elig-a\"]}");
            long long left = affordable(r.json, "elig-a", &why, NULL);
            CHECKF(left == k - admitted, "after %lld: %lld left of %lld", admitted, left, k);
            if (admitted == k)
                CHECK(why && strcmp(why, "over_budget") == 0);
            api_reply_free(&r);
        }
    }
    CHECKF(admitted == k, "admitted %lld, eligibility said %lld", admitted, k);
    /* the label selector: both members, in registration order */
    req(&r, NULL, "POST", "/v1/eligibility", "{\"event\":" G5 ",\"label\":\"cohort=elig\"}");
    CHECKF(r.status == 200 && json_array_size(jget(r.json, "clients")) == 2, "%.300s", r.body);
    CHECK(str_is(r.json, "clients[0].id", "elig-a") && str_is(r.json, "clients[1].id", "elig-b"));
    api_reply_free(&r);
    /* an event never charged (answered as a scratch event): nothing kept either */
    req(&r, NULL, "POST", "/v1/eligibility",
        "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":20.25},"
        "\"label\":\"cohort=elig\"}");
    CHECK(r.status == 200 && json_array_size(jget(r.json, "clients")) == 2);
    CHECK(affordable(r.json, "elig-b", NULL, NULL) > 0);
    api_reply_free(&r);
}

static void eligibility_errors(void)
{
    static const struct {
        const char *body, *code, *field;
    } cases[] = {
        {"{\"event\":" G5 "}", "missing_field", "clients"},
        {"{\"event\":" G5 ",\"clients\":[\"a\"],\"label\":\"k=v\"}", "invalid_parameter",
         "clients"},
        {"{\"event\":" G5 ",\"clients\":[]}", "invalid_parameter", "clients"},
        {"{\"event\":" G5 ",\"clients\":[\"a/b\"]}", "invalid_id", "clients[0]"},
        {"{\"event\":" G5 ",\"clients\":[3]}", "wrong_type", "clients[0]"},
        {"{\"event\":" G5 ",\"label\":\"novalue\"}", "invalid_parameter", "label"},
        {"{\"event\":" G5 ",\"clients\":[\"a\"],\"max_rounds\":0}", "invalid_parameter",
         "max_rounds"},
        {"{\"event\":" G5 ",\"clients\":[\"a\"],\"max_rounds\":1000001}", "invalid_parameter",
         "max_rounds"},
        {"{\"clients\":[\"a\"]}", "missing_field", "event"},
        {"{\"event\":" G5 ",\"clients\":[\"a\"],\"charge\":true}", "unknown_field", "charge"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        api_reply r;
        req(&r, NULL, "POST", "/v1/eligibility", "%s", cases[k].body);
        CHECKF(is_problem(&r, 400, cases[k].code, cases[k].field), "case %zu: %ld %.300s", k,
               r.status, r.body);
        api_reply_free(&r);
    }
}

/* ---- two-phase rounds ------------------------------------------------------------------------ */

static long long client_rounds_of(const char *id, double *spent)
{
    api_reply r;
    char path[200];
    snprintf(path, sizeof path, "/v1/clients/%s", id);
    req(&r, NULL, "GET", path, NULL);
    long long n = r.status == 200 ? (long long)jnum(r.json, "rounds") : -1;
    if (spent)
        *spent = jnum(r.json, "spent.epsilon");
    api_reply_free(&r);
    return n;
}

/* Reserve, and the reservation counts in every admission; commit with dropouts: the
 * reported clients are charged, the others released; replay and conflicts. */
static void reserve_commit_dropouts(void)
{
    mk("two_commit-a", 1, NULL); /* one round of G5 (~0.79) fits, two do not */
    mk("two_commit-b", 1, NULL);
    mk("two_commit-c", 1, NULL);
    api_reply r;
    hx h;
    const char *body = "{\"round_id\":\"two_commit-r\",\"event\":" G5
                       ",\"participants\":[\"two_commit-a\",\"two_commit-b\",\"two_commit-c\"],"
                       "\"phase\":\"reserve\",\"reservation_ttl_seconds\":600}";
    req(&r, NULL, "POST", "/v1/rounds", "%s", body);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(str_is(r.json, "phase", "reserve") && str_is(r.json, "state", "reserved"));
    CHECK(jint_is(r.json, "charged", 0) && jint_is(r.json, "reserved", 3));
    const char *exp = jstr(r.json, "expires_at");
    CHECKF(exp && strlen(exp) == 20 && exp[10] == 'T' && exp[19] == 'Z', "expires_at %s",
           exp ? exp : "(none)");
    api_reply_free(&r);
    /* the same request again: the stored answer */
    req(&r, &h, "POST", "/v1/rounds", "%s", body);
    CHECK(r.status == 200 && h.replayed && str_is(r.json, "state", "reserved"));
    api_reply_free(&r);
    /* nothing is charged yet, but held: a concurrent round cannot spend it */
    CHECK(client_rounds_of("two_commit-a", NULL) == 0);
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"two_commit-other\",\"event\":" G5 ",\"participants\":[\"two_commit-a\"]}");
    CHECKF(r.status == 200 && jint_is(r.json, "charged", 0) &&
               str_is(r.json, "refused[0].reason", "over_budget"),
           "%.300s", r.body);
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/eligibility", "{\"event\":" G5 ",\"clients\":[\"two_commit-a\"]}");
    CHECK(jint_is(r.json, "eligible", 0) && jnum(r.json, "clients[0].spent.epsilon") > 0.7);
    api_reply_free(&r);
    /* a client that was not admitted cannot report */
    req(&r, NULL, "POST", "/v1/rounds/two_commit-r/commit", "{\"reported\":[\"two_commit-zz\"]}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "reported[0]"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/two_commit-r/commit",
        "{\"reported\":[\"two_commit-a\",\"two_commit-a\"]}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "reported[1]"));
    api_reply_free(&r);
    /* b dropped out: a and c charged, b released */
    req(&r, &h, "POST", "/v1/rounds/two_commit-r/commit",
        "{\"reported\":[\"two_commit-c\",\"two_commit-a\"]}");
    CHECKF(r.status == 200 && !h.replayed, "%ld %.300s", r.status, r.body);
    CHECK(str_is(r.json, "state", "committed") && jint_is(r.json, "charged", 2) &&
          jint_is(r.json, "reserved", 0));
    CHECK(json_array_size(jget(r.json, "reported")) == 2);
    api_reply_free(&r);
    double sa, sb;
    CHECK(client_rounds_of("two_commit-a", &sa) == 1 && sa > 0.7);
    CHECK(client_rounds_of("two_commit-b", &sb) == 0 && sb == 0.0);
    CHECK(client_rounds_of("two_commit-c", NULL) == 1);
    /* b can afford a round again; a cannot */
    req(&r, NULL, "POST", "/v1/eligibility",
        "{\"event\":" G5 ",\"clients\":[\"two_commit-a\",\"two_commit-b\"]}");
    CHECK(affordable(r.json, "two_commit-a", NULL, NULL) == 0 &&
          affordable(r.json, "two_commit-b", NULL, NULL) == 1);
    api_reply_free(&r);
    /* the same commit (in any order) is replayed; another list is a conflict */
    req(&r, &h, "POST", "/v1/rounds/two_commit-r/commit",
        "{\"reported\":[\"two_commit-a\",\"two_commit-c\"]}");
    CHECK(r.status == 200 && h.replayed && jint_is(r.json, "charged", 2));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/two_commit-r/commit", "{\"reported\":[\"two_commit-a\"]}");
    CHECK(is_problem(&r, 409, "conflict", "round_id"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/two_commit-r/release", "{}");
    CHECK(is_problem(&r, 409, "conflict", "round_id"));
    api_reply_free(&r);
    CHECK(client_rounds_of("two_commit-a", NULL) == 1);
    req(&r, NULL, "GET", "/v1/rounds/two_commit-r", NULL);
    CHECK(r.status == 200 && str_is(r.json, "state", "committed") && jint_is(r.json, "charged", 2));
    api_reply_free(&r);
}

/* Release: every held budget back, idempotent; a released round cannot be committed. */
static void reserve_release(void)
{
    mk("two_rel-a", 1, NULL);
    api_reply r;
    hx h;
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"two_rel-r\",\"event\":" G5
        ",\"participants\":[\"two_rel-a\"],\"phase\":\"reserve\"}");
    CHECK(r.status == 200 && str_is(r.json, "state", "reserved"));
    api_reply_free(&r);
    req(&r, &h, "POST", "/v1/rounds/two_rel-r/release", "{}");
    CHECK(r.status == 200 && !h.replayed && str_is(r.json, "state", "released") &&
          jint_is(r.json, "charged", 0));
    api_reply_free(&r);
    req(&r, &h, "POST", "/v1/rounds/two_rel-r/release", "{}");
    CHECK(r.status == 200 && h.replayed && str_is(r.json, "state", "released"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/two_rel-r/commit", "{\"reported\":[]}");
    CHECK(is_problem(&r, 409, "reservation_released", "round_id"));
    api_reply_free(&r);
    double sp;
    CHECK(client_rounds_of("two_rel-a", &sp) == 0 && sp == 0.0);
    /* the budget is free again: a one-step round is charged */
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"two_rel-after\",\"event\":" G5 ",\"participants\":[\"two_rel-a\"]}");
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1) && str_is(r.json, "phase", "charge") &&
          str_is(r.json, "state", "charged"));
    api_reply_free(&r);
    /* a one-step round has nothing to commit or release */
    req(&r, NULL, "POST", "/v1/rounds/two_rel-after/commit", "{\"reported\":[]}");
    CHECK(is_problem(&r, 409, "conflict", "round_id"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/two_rel-after/release", "{}");
    CHECK(is_problem(&r, 409, "conflict", "round_id"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/two_rel-nothing/release", "{}");
    CHECK(is_problem(&r, 404, "not_found", "round_id"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/two_rel-nothing/commit", "{\"reported\":[]}");
    CHECK(is_problem(&r, 404, "not_found", "round_id"));
    api_reply_free(&r);
    api_get("/v1/rounds/two_rel-r/commit", &r);
    CHECK(r.status == 405 && strcmp(r.allow, "POST, OPTIONS") == 0);
    api_reply_free(&r);
}

/* A reservation expires: the ledger releases it (state "expired") and a commit is refused
 * reservation_expired; the budget is free again. */
static void reserve_expires(void)
{
    mk("two_exp-a", 1, NULL);
    api_reply r;
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"two_exp-r\",\"event\":" G5
        ",\"participants\":[\"two_exp-a\"],\"phase\":\"reserve\",\"reservation_ttl_seconds\":1}");
    CHECK(r.status == 200 && str_is(r.json, "state", "reserved"));
    api_reply_free(&r);
    /* the sweep runs every second: expired within 1 + 1 s (waited for at most 5 s) */
    int expired = 0;
    for (int k = 0; k < 50 && !expired; k++) {
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
        req(&r, NULL, "GET", "/v1/rounds/two_exp-r", NULL);
        const char *st = jstr(r.json, "state");
        expired = st && strcmp(st, "expired") == 0;
        api_reply_free(&r);
    }
    CHECK(expired);
    req(&r, NULL, "POST", "/v1/rounds/two_exp-r/commit", "{\"reported\":[\"two_exp-a\"]}");
    CHECK(is_problem(&r, 409, "reservation_expired", "round_id"));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/eligibility", "{\"event\":" G5 ",\"clients\":[\"two_exp-a\"]}");
    CHECK(jint_is(r.json, "eligible", 1) && jnum(r.json, "clients[0].spent.epsilon") == 0.0);
    api_reply_free(&r);
    CHECK(client_rounds_of("two_exp-a", NULL) == 0);
}

static void reserve_errors(void)
{
    static const struct {
        const char *path, *body, *code, *field;
        long status;
    } cases[] = {
        {"/v1/rounds",
         "{\"round_id\":\"two_err-1\",\"event\":" G5 ",\"participants\":[\"x\"],\"phase\":\"x\"}",
         "invalid_parameter", "phase", 400},
        {"/v1/rounds",
         "{\"round_id\":\"two_err-2\",\"event\":" G5 ",\"participants\":[\"x\"],\"phase\":"
         "\"reserve\",\"reservation_ttl_seconds\":0}",
         "invalid_parameter", "reservation_ttl_seconds", 400},
        {"/v1/rounds",
         "{\"round_id\":\"two_err-3\",\"event\":" G5 ",\"participants\":[\"x\"],\"phase\":"
         "\"reserve\",\"reservation_ttl_seconds\":86401}",
         "invalid_parameter", "reservation_ttl_seconds", 400},
        {"/v1/rounds",
         "{\"round_id\":\"two_err-4\",\"event\":" G5 ",\"participants\":[\"x\"],"
         "\"reservation_ttl_seconds\":60}",
         "invalid_parameter", "reservation_ttl_seconds", 400},
        {"/v1/rounds",
         "{\"round_id\":\"two_err-5\",\"event\":" G5 ",\"participants\":[\"x\"],\"phase\":"
         "\"reserve\",\"already_ran\":true}",
         "invalid_parameter", "already_ran", 400},
        {"/v1/rounds/two_err-r/commit", "{}", "missing_field", "reported", 400},
        {"/v1/rounds/two_err-r/commit", "{\"reported\":[\"a\"],\"x\":1}", "unknown_field", "x",
         400},
        {"/v1/rounds/two_err-r/commit", "{\"reported\":\"a\"}", "wrong_type", "reported", 400},
        {"/v1/rounds/two_err-r/commit", "{\"reported\":[\"a/b\"]}", "invalid_id", "reported[0]",
         400},
        {"/v1/rounds/two_err-r/release", "{\"all\":true}", "unknown_field", "all", 400},
        {"/v1/rounds/-bad/release", "{}", "invalid_id", "id", 400},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        api_reply r;
        req(&r, NULL, "POST", cases[k].path, "%s", cases[k].body);
        CHECKF(is_problem(&r, (int)cases[k].status, cases[k].code, cases[k].field),
               "case %zu: %ld %.300s", k, r.status, r.body);
        api_reply_free(&r);
    }
    /* "phase": "charge" spelled out is the same request as without it (one-step rounds keep
     * their idempotency hash) */
    mk("two_err-c", 8, NULL);
    api_reply r;
    hx h;
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"two_err-same\",\"event\":" G5 ",\"participants\":[\"two_err-c\"]}");
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    api_reply_free(&r);
    req(&r, &h, "POST", "/v1/rounds",
        "{\"round_id\":\"two_err-same\",\"event\":" G5
        ",\"participants\":[\"two_err-c\"],\"phase\":\"charge\"}");
    CHECK(r.status == 200 && h.replayed);
    api_reply_free(&r);
    /* the same id as a reservation is another request */
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"two_err-same\",\"event\":" G5
        ",\"participants\":[\"two_err-c\"],\"phase\":\"reserve\"}");
    CHECK(is_problem(&r, 409, "conflict", "round_id"));
    api_reply_free(&r);
}

/* ---- named events ---------------------------------------------------------------------------- */

static void named_events(void)
{
    api_reply r;
    req(&r, NULL, "PUT", "/v1/events/named-g5", "{\"event\":" G5 "}");
    CHECKF(r.status == 201, "%ld %.300s", r.status, r.body);
    CHECK(str_is(r.json, "name", "named-g5") &&
          str_is(r.json, "event.class_name", "GaussianDpEvent") && jnum(r.json, "created_seq") > 0);
    double seq = jnum(r.json, "created_seq");
    api_reply_free(&r);
    /* the same event again: 200, the same record; another event: 409 (names are immutable) */
    req(&r, NULL, "PUT", "/v1/events/named-g5",
        "{\"event\":{\"noise_multiplier\":5.0,\"class_name\":\"GaussianDpEvent\"}}");
    CHECK(r.status == 200 && jnum(r.json, "created_seq") == seq);
    api_reply_free(&r);
    req(&r, NULL, "PUT", "/v1/events/named-g5",
        "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":6}}");
    CHECK(is_problem(&r, 409, "conflict", "name"));
    api_reply_free(&r);
    req(&r, NULL, "GET", "/v1/events/named-g5", NULL);
    CHECK(r.status == 200 && jnum(r.json, "event.noise_multiplier") == 5 &&
          jnum(r.json, "created_seq") == seq);
    api_reply_free(&r);
    req(&r, NULL, "GET", "/v1/events/named-none", NULL);
    CHECK(is_problem(&r, 404, "not_found", "name"));
    api_reply_free(&r);
    req(&r, NULL, "PUT", "/v1/events/named-b", "{\"event\":" HEAVY "}");
    CHECK(r.status == 201);
    api_reply_free(&r);
    /* the list, a page of one at a time, in name order */
    req(&r, NULL, "GET", "/v1/events?limit=1", NULL);
    CHECKF(r.status == 200 && json_array_size(jget(r.json, "events")) == 1 &&
               json_is_string(jget(r.json, "next_cursor")) && jnum(r.json, "total") >= 2,
           "%.300s", r.body);
    api_reply_free(&r);
    req(&r, NULL, "GET", "/v1/events?limit=1000", NULL);
    size_t i;
    json_t *e;
    int seen = 0;
    const char *prev = "";
    json_array_foreach(jget(r.json, "events"), i, e)
    {
        const char *nm = json_string_value(json_object_get(e, "name"));
        CHECK(nm && strcmp(prev, nm) < 0);
        prev = nm ? nm : prev;
        seen += nm && strncmp(nm, "named-", 6) == 0;
    }
    CHECK(seen == 2 && json_is_null(jget(r.json, "next_cursor")));
    api_reply_free(&r);
    req(&r, NULL, "GET", "/v1/events?cursor=x", NULL);
    CHECK(is_problem(&r, 400, "invalid_parameter", "cursor"));
    api_reply_free(&r);
    /* a round by name is the round of the event: the same spend as spelled out */
    mk("named-c1", 8, NULL);
    mk("named-c2", 8, NULL);
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"named-r1\",\"event_name\":\"named-g5\",\"participants\":[\"named-c1\"]}");
    CHECKF(r.status == 200 && jint_is(r.json, "charged", 1), "%.300s", r.body);
    double s1 = jnum(r.json, "admitted[0].spent_after");
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"named-r2\",\"event\":" G5 ",\"participants\":[\"named-c2\"]}");
    CHECK(r.status == 200 && jnum(r.json, "admitted[0].spent_after") == s1);
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/eligibility",
        "{\"event_name\":\"named-g5\",\"clients\":[\"named-c1\",\"named-c2\"]}");
    CHECK(r.status == 200 && jint_is(r.json, "eligible", 2) &&
          jnum(r.json, "clients[0].affordable_rounds") ==
              jnum(r.json, "clients[1].affordable_rounds"));
    api_reply_free(&r);
    static const struct {
        const char *path, *body, *code, *field;
        long status;
    } bad[] = {
        {"/v1/rounds",
         "{\"round_id\":\"named-x\",\"event_name\":\"named-none\",\"participants\":[\"named-c1\"]}",
         "unknown_event_name", "event_name", 422},
        {"/v1/rounds",
         "{\"round_id\":\"named-x\",\"event\":" G5
         ",\"event_name\":\"named-g5\",\"participants\":[\"named-c1\"]}",
         "invalid_parameter", "event_name", 400},
        {"/v1/eligibility", "{\"event_name\":7,\"clients\":[\"named-c1\"]}", "wrong_type",
         "event_name", 400},
        {"/v1/eligibility", "{\"event_name\":\"no/such\",\"clients\":[\"named-c1\"]}", "invalid_id",
         "event_name", 400},
        {"/v1/eligibility", "{\"event_name\":\"named-none\",\"clients\":[\"named-c1\"]}",
         "unknown_event_name", "event_name", 422},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        req(&r, NULL, "POST", bad[k].path, "%s", bad[k].body);
        CHECKF(is_problem(&r, (int)bad[k].status, bad[k].code, bad[k].field), "case %zu: %.300s", k,
               r.body);
        api_reply_free(&r);
    }
    req(&r, NULL, "PUT", "/v1/events/named-bad", "{\"event\":{\"class_name\":\"NoSuchEvent\"}}");
    CHECK(r.status == 400);
    api_reply_free(&r);
    req(&r, NULL, "PUT", "/v1/events/named-bad", "{\"event\":" G5 ",\"x\":1}");
    CHECK(is_problem(&r, 400, "unknown_field", "x"));
    api_reply_free(&r);
}

/* ---- charge history -------------------------------------------------------------------------- */

static void charge_history(void)
{
    mk("hist-a", 100, NULL);
    api_reply r;
    for (int k = 1; k <= 3; k++) {
        req(&r, NULL, "POST", "/v1/rounds",
            "{\"round_id\":\"hist-r%d\",\"event\":" G5 ",\"participants\":[\"hist-a\"]}", k);
        CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
        api_reply_free(&r);
    }
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"hist-res1\",\"event\":" G5
        ",\"participants\":[\"hist-a\"],\"phase\":\"reserve\"}");
    CHECK(r.status == 200);
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds/hist-res1/commit", "{\"reported\":[]}");
    CHECK(r.status == 200 && jint_is(r.json, "charged", 0));
    api_reply_free(&r);
    req(&r, NULL, "POST", "/v1/rounds",
        "{\"round_id\":\"hist-res2\",\"event\":" HEAVY
        ",\"participants\":[\"hist-a\"],\"phase\":\"reserve\"}");
    CHECK(r.status == 200);
    api_reply_free(&r);
    req(&r, NULL, "GET", "/v1/clients/hist-a/rounds", NULL);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    static const char *const want[][2] = {{"hist-res2", "reserved"},
                                          {"hist-res1", "released"},
                                          {"hist-r3", "charged"},
                                          {"hist-r2", "charged"},
                                          {"hist-r1", "charged"}};
    CHECK(json_array_size(jget(r.json, "charges")) == 5 && jint_is(r.json, "total", 5));
    for (size_t i = 0; i < 5; i++) {
        char p1[40], p2[40];
        snprintf(p1, sizeof p1, "charges[%zu].round_id", i);
        snprintf(p2, sizeof p2, "charges[%zu].state", i);
        CHECK(str_is(r.json, p1, want[i][0]) && str_is(r.json, p2, want[i][1]));
    }
    CHECK(jnum(r.json, "charges[0].seq") > jnum(r.json, "charges[1].seq"));
    CHECK(json_is_true(jget(r.json, "complete")) && json_is_null(jget(r.json, "next_cursor")));
    /* the aggregate: G5 charged 3 times (the released reservation charged nothing), HEAVY
     * held once */
    CHECK(
        json_array_size(jget(r.json, "aggregate")) == 2 &&
        jint_is(r.json, "aggregate[0].charged", 3) && jint_is(r.json, "aggregate[0].reserved", 0) &&
        jint_is(r.json, "aggregate[1].charged", 0) && jint_is(r.json, "aggregate[1].reserved", 1));
    api_reply_free(&r);
    /* pages */
    req(&r, NULL, "GET", "/v1/clients/hist-a/rounds?limit=2", NULL);
    CHECK(json_array_size(jget(r.json, "charges")) == 2 && str_is(r.json, "next_cursor", "o2"));
    api_reply_free(&r);
    req(&r, NULL, "GET", "/v1/clients/hist-a/rounds?limit=2&cursor=o4", NULL);
    CHECK(json_array_size(jget(r.json, "charges")) == 1 &&
          str_is(r.json, "charges[0].round_id", "hist-r1") &&
          json_is_null(jget(r.json, "next_cursor")));
    api_reply_free(&r);
    /* past the bound: the newest kept, "complete": false; the record still counts them all */
    int h = 0;
    for (int k = 4; k < 24; k++) {
        req(&r, NULL, "POST", "/v1/rounds",
            "{\"round_id\":\"hist-r%d\",\"event\":" G5 ",\"participants\":[\"hist-a\"]}", k);
        api_reply_free(&r);
    }
    req(&r, NULL, "GET", "/v1/clients/hist-a/rounds?limit=1000", NULL);
    h = (int)json_array_size(jget(r.json, "charges"));
    CHECKF((double)h == jnum(r.json, "history_limit") && h >= 8, "%d kept", h);
    CHECK(json_is_false(jget(r.json, "complete")) &&
          str_is(r.json, "charges[0].round_id", "hist-r23"));
    CHECK(jint_is(r.json, "aggregate[0].charged", 23));
    api_reply_free(&r);
    CHECK(client_rounds_of("hist-a", NULL) == 23);
    req(&r, NULL, "GET", "/v1/clients/hist-nobody/rounds", NULL);
    CHECK(is_problem(&r, 404, "not_found", "id"));
    api_reply_free(&r);
    req(&r, NULL, "GET", "/v1/clients/hist-a/rounds?limit=0", NULL);
    CHECK(is_problem(&r, 400, "invalid_parameter", "limit"));
    api_reply_free(&r);
}

const tl_test WORKFLOW_TESTS[] = {
    TL_T(status_heavy_run_shows_exhausted),
    TL_T(batch_create_unchanged_update),
    TL_T(batch_conflict_item),
    TL_T(batch_malformed_applies_nothing),
    TL_T(eligibility_matches_rounds),
    TL_T(eligibility_errors),
    TL_T(reserve_commit_dropouts),
    TL_T(reserve_release),
    TL_T(reserve_expires),
    TL_T(reserve_errors),
    TL_T(named_events),
    TL_T(charge_history),
};
const size_t WORKFLOW_NTESTS = sizeof WORKFLOW_TESTS / sizeof WORKFLOW_TESTS[0];
