/* test_ops.c - GET /v1/accountants, /healthz (GET and HEAD), /openapi.yaml, the dashboard (/
 * and /ui/) and /metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "suites.h"

/* 1 if the array at path of o holds an object whose member key is the string want. */
static int lists(const json_t *o, const char *path, const char *key, const char *want)
{
    size_t i;
    json_t *e;
    json_array_foreach(jget(o, path), i, e)
    {
        const char *s = json_string_value(json_object_get(e, key));
        if (s && strcmp(s, want) == 0)
            return 1;
    }
    return 0;
}

static void accountants_lists_both(void)
{
    api_reply r;
    api_get("/v1/accountants", &r);
    CHECK(r.status == 200);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECK(json_is_object(r.json));
    CHECK(lists(r.json, "accountants", "name", "thm41"));
    CHECK(lists(r.json, "accountants", "name", "gdp_clt"));
    CHECK(lists(r.json, "events", "class_name", "ShuffledDpSgdEpochDpEvent"));
    CHECK(lists(r.json, "events", "class_name", "SelfComposedDpEvent"));
    CHECK(lists(r.json, "events", "class_name", "ComposedDpEvent"));
    CHECK(json_is_array(jget(r.json, "neighboring_relations")));
    CHECK(json_is_array(jget(r.json, "solve_for")));
    CHECK(all_finite(r.json));
    api_reply_free(&r);
}

static void healthz_ok(void)
{
    api_reply r;
    api_get("/healthz", &r);
    CHECK(r.status == 200);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECK(jstr(r.json, "status") && strcmp(jstr(r.json, "status"), "ok") == 0);
    api_reply_free(&r);
}

static void healthz_head(void)
{
    api_reply r;
    CHECK(api_call("HEAD", "/healthz", NULL, NULL, 0, &r) == 0);
    CHECK(r.status == 200);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECK(r.body_len == 0);
    api_reply_free(&r);
}

static void openapi_served(void)
{
    api_reply r;
    api_get("/openapi.yaml", &r);
    CHECK(r.status == 200);
    CHECKF(strncmp(r.content_type, "application/yaml", 16) == 0, "Content-Type '%s'",
           r.content_type);
    CHECKF(r.body_len >= 8 && strncmp(r.body, "openapi:", 8) == 0,
           "the body (%zu bytes) does not start with 'openapi:'", r.body_len);
    api_reply_free(&r);
}

static void index_page(void)
{
    api_reply r;
    api_get("/", &r);
    CHECK(r.status == 200);
    CHECKF(strncmp(r.content_type, "text/html", 9) == 0, "Content-Type '%s'", r.content_type);
    CHECK(r.body_len > 0 && strstr(r.body, "<html") != NULL);
    CHECK(r.json == NULL);
    /* the dashboard: its script and style come from the daemon, not from elsewhere */
    CHECK(strstr(r.body, "src=\"/ui/app.js\"") != NULL);
    CHECK(strstr(r.body, "src=\"/ui/charts.js\"") != NULL);
    CHECK(strstr(r.body, "<script>") == NULL && strstr(r.body, "https://") == NULL);
    api_reply_free(&r);
    api_get("/ui/app.js", &r);
    CHECK(r.status == 200 && strncmp(r.content_type, "text/javascript", 15) == 0);
    CHECK(strstr(r.body, "/v1/summary") != NULL);
    api_reply_free(&r);
    api_get("/ui/charts.js", &r);
    CHECK(r.status == 200 && strncmp(r.content_type, "text/javascript", 15) == 0);
    CHECK(strstr(r.body, "dpbudgetCharts") != NULL);
    api_reply_free(&r);
    api_get("/ui/app.css", &r);
    CHECK(r.status == 200 && strncmp(r.content_type, "text/css", 8) == 0);
    api_reply_free(&r);
    api_get("/ui/nothing.js", &r);
    CHECK(is_problem(&r, 404, "not_found", NULL));
    api_reply_free(&r);
}

/* The value of the exposition line that starts with series (name and labels), -1 if absent. */
static double metric(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1.0;
}

static double scrape(const char *series)
{
    api_reply m;
    api_get("/metrics", &m);
    double v = m.status == 200 ? metric(m.body, series) : -2.0;
    api_reply_free(&m);
    return v;
}

/* A request is counted under the method it was sent with: a 405 under the method refused, an
 * unmatched path under route="unmatched" with its method (unknown methods as "other"). */
static void metrics_label_the_method_sent(void)
{
    const char *del = "dpbudget_http_requests_total{route=\"/v1/summary\",method=\"DELETE\","
                      "status=\"405\"}";
    const char *get404 = "dpbudget_http_requests_total{route=\"unmatched\",method=\"GET\","
                         "status=\"404\"}";
    const char *brew = "dpbudget_http_requests_total{route=\"unmatched\",method=\"other\","
                       "status=\"404\"}";
    double d0 = scrape(del), g0 = scrape(get404), b0 = scrape(brew);
    api_reply r;
    api_call("DELETE", "/v1/summary", NULL, NULL, 0, &r);
    CHECK(r.status == 405);
    api_reply_free(&r);
    api_get("/no/such/path", &r);
    CHECK(r.status == 404);
    api_reply_free(&r);
    api_call("BREW", "/no/such/pot", NULL, NULL, 0, &r);
    CHECK(r.status == 404);
    api_reply_free(&r);
    /* a request is counted when its connection reports it complete, just after the answer
     * went out: give the last one a moment (bounded) before reading the counters */
    api_reply m;
    for (int tries = 0;; tries++) {
        api_get("/metrics", &m);
        if (metric(m.body, brew) == (b0 < 0 ? 0 : b0) + 1 || tries == 50)
            break;
        api_reply_free(&m);
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    CHECKF(metric(m.body, del) == (d0 < 0 ? 0 : d0) + 1, "DELETE 405: %g then %g", d0,
           metric(m.body, del));
    CHECKF(metric(m.body, get404) == (g0 < 0 ? 0 : g0) + 1, "GET 404: %g then %g", g0,
           metric(m.body, get404));
    CHECKF(metric(m.body, brew) == (b0 < 0 ? 0 : b0) + 1, "BREW 404: %g then %g", b0,
           metric(m.body, brew));
    CHECK(strstr(m.body, "method=\"\"") == NULL);
    CHECK(strstr(m.body, "route=\"/v1/summary\",method=\"GET\",status=\"405\"") == NULL);
    api_reply_free(&m);
}

/* Build info, process figures, rounds and refusals counters, the spend distribution, compute
 * latency by accountant and fsync buckets fine enough between 1 and 100 ms. */
static void metrics_complete(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":1}", EPOCH(1, 1000));
    CHECK(r.status == 200);
    api_reply_free(&r);
    api_reply m;
    api_get("/metrics", &m);
    const char *b = m.body;
    CHECK(metric(b, "dpbudget_build_info{version=\"" DPB_VERSION "\"}") == 1);
    CHECK(metric(b, "process_cpu_seconds_total") >= 0);
    CHECK(metric(b, "process_resident_memory_bytes") > 1e5);
    CHECK(metric(b, "process_open_fds") >= 3);
    CHECK(metric(b, "process_max_fds") >= metric(b, "process_open_fds"));
    CHECK(metric(b, "process_start_time_seconds") > 1.5e9);
    CHECK(metric(b, "dpbudget_rounds_total") >= 0);
    CHECK(metric(b, "dpbudget_round_refusals_total{reason=\"over_budget\"}") >= 0);
    CHECK(metric(b, "dpbudget_round_refusals_total{reason=\"unknown_client\"}") >= 0);
    CHECK(metric(b, "dpbudget_round_refusals_total{reason=\"filter_unsupported\"}") >= 0);
    CHECK(metric(b, "dpbudget_ledger_clients_spent_fraction{from=\"0.0\",to=\"0.1\"}") >= 0);
    CHECK(metric(b, "dpbudget_ledger_clients_spent_fraction{from=\"1.0\",to=\"+Inf\"}") >= 0);
    CHECK(metric(b, "dpbudget_compute_duration_seconds_count{accountant=\"shuffle_exact\"}") >= 1);
    int steps = 0;
    static const char *const between[] = {"0.002", "0.003", "0.005", "0.0075", "0.01",
                                          "0.015", "0.02",  "0.03",  "0.05",   "0.075"};
    for (size_t i = 0; i < sizeof between / sizeof between[0]; i++) {
        char s[96];
        snprintf(s, sizeof s, "dpbudget_wal_fsync_seconds_bucket{le=\"%s\"}", between[i]);
        steps += metric(b, s) >= 0;
    }
    CHECKF(steps == 10, "%d fsync buckets between 1 and 100 ms", steps);
    api_reply_free(&m);
}

const tl_test OPS_TESTS[] = {
    TL_T(metrics_label_the_method_sent),
    TL_T(metrics_complete),
    TL_T(accountants_lists_both),
    TL_T(healthz_ok),
    TL_T(healthz_head),
    TL_T(openapi_served),
    TL_T(index_page),
};
const size_t OPS_NTESTS = sizeof OPS_TESTS / sizeof OPS_TESTS[0];
