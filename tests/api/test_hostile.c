/* test_hostile.c - a battery of malformed and hostile requests across every endpoint that
 * takes a body (bad JSON, wrong types, huge and non-finite numbers, deep nesting, invalid
 * UTF-8, oversized bodies, unknown methods and paths): every answer is a 4xx
 * application/problem+json with a stable code, the daemon stays up, and the ledger is
 * unchanged (its version and log size). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "suites.h"

static const char *const PATHS[] = {"/v1/delta",     "/v1/epsilon", "/v1/calibrate", "/v1/curve",
                                    "/v1/proactive", "/v1/rounds",  "/v1/clients/x"};
#define NPATHS (sizeof PATHS / sizeof PATHS[0])

/* Bodies that no endpoint accepts (each is wrong for every schema above). */
static const char *const BODIES[] = {
    "",
    " ",
    "{",
    "}",
    "[]",
    "null",
    "true",
    "42",
    "\"event\"",
    "{\"event\":}",
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":NaN},\"epsilon\":1}",
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":Infinity},\"epsilon\":1}",
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1e999},\"epsilon\":1}",
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":-1},\"epsilon\":-1}",
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":\"1\"},\"epsilon\":\"1\"}",
    "{\"event\":{\"class_name\":\"NoSuchDpEvent\"},\"epsilon\":1,\"budget\":1,\"round_id\":1}",
    "{\"event\":1,\"event\":2}",
    "{\"epsilon\":1,\"epsilon\":1,\"budget\":{},\"budget\":{}}",
    "{\"x\":1}",
    "{\"\\u0000\":1}",
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1},\"epsilon\":1,"
    "\"round_id\":\"r\",\"participants\":\"c\",\"budget\":\"b\",\"procedure\":7}",
    "{\"a\":\"\xff\xfe\"}",
    "{\"a\":\"\xc3\x28\"}",
    "{\"a\":\"\xed\xa0\x80\"}",
    "{\"a\":1}garbage",
    "{'a':1}",
    "{\"a\":01}",
    "{\"a\":1.}",
    "{\"a\":.5}",
    "{\"a\":+1}",
    "{\"a\":0x10}",
    "{\"a\":\"\\x41\"}",
    "{\"a\":\"\\ud800\"}",
    "{\"a\":99999999999999999999999999999999999999999}",
    "{\"procedure\":\"plan\",\"noise_multiplier\":1e308,\"epsilon\":1e308,\"delta\":1e-320,"
    "\"dataset_size\":1e30,\"epochs\":-1,\"batch_size\":0}",
};
#define NBODIES (sizeof BODIES / sizeof BODIES[0])

static int ledger_version(unsigned long long *version, unsigned long long *log_bytes)
{
    api_reply r;
    api_get("/v1/summary", &r);
    int ok = r.status == 200 && r.json;
    if (ok) {
        *version = (unsigned long long)jnum(r.json, "version");
        *log_bytes = (unsigned long long)jnum(r.json, "log_bytes");
    }
    api_reply_free(&r);
    return ok;
}

static int problem_4xx(const api_reply *r)
{
    return r->status >= 400 && r->status < 500 &&
           strncmp(r->content_type, "application/problem+json", 24) == 0 && r->json &&
           jstr(r->json, "code") && jstr(r->json, "detail") &&
           (long)jnum(r->json, "status") == r->status;
}

static void hostile_battery(void)
{
    unsigned long long v0 = 0, l0 = 0, v1 = 0, l1 = 0;
    CHECK(ledger_version(&v0, &l0));
    int sent = 0;
    for (size_t p = 0; p < NPATHS; p++) {
        const char *method = strncmp(PATHS[p], "/v1/clients/", 12) == 0 ? "PUT" : "POST";
        for (size_t b = 0; b < NBODIES; b++) {
            api_reply r;
            api_call(method, PATHS[p], "application/json", BODIES[b], strlen(BODIES[b]), &r);
            sent++;
            CHECKF(problem_4xx(&r), "%s %s body #%zu: %ld %s", method, PATHS[p], b, r.status,
                   r.body);
            api_reply_free(&r);
        }
        /* deep nesting, a huge body, a wrong content type, a body in pieces */
        static char deep[40000];
        size_t n = 0;
        n += (size_t)snprintf(deep, sizeof deep, "{\"event\":");
        for (int i = 0; i < 5000; i++)
            deep[n++] = '[';
        for (int i = 0; i < 5000; i++)
            deep[n++] = ']';
        deep[n++] = '}';
        deep[n] = '\0';
        const struct {
            const char *ct;
            const char *body;
            size_t len;
            int chunked;
        } odd[] = {
            {"application/json", deep, n, 0},
            {"application/json", deep, n, 1},
            {"text/plain", "{}", 2, 0},
            {"application/x-www-form-urlencoded", "a=1", 3, 0},
            {NULL, "{", 1, 1},
        };
        for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++) {
            api_reply r;
            if (odd[k].chunked)
                api_call_chunked(method, PATHS[p], odd[k].ct, odd[k].body, odd[k].len, &r);
            else
                api_call(method, PATHS[p], odd[k].ct, odd[k].body, odd[k].len, &r);
            sent++;
            CHECKF(problem_4xx(&r), "%s %s odd #%zu: %ld %s", method, PATHS[p], k, r.status,
                   r.body);
            api_reply_free(&r);
        }
        /* over the harness's --max-body 65536, or its --max-bulk-body 131072 for a call
         * that carries lists of clients */
        size_t big = strcmp(PATHS[p], "/v1/rounds") == 0 ? 140000 : 70000;
        char *huge = malloc(big);
        if (huge) {
            memset(huge, ' ', big);
            huge[0] = '{';
            huge[big - 1] = '}';
            for (int chunked = 0; chunked < 2; chunked++) {
                api_reply r;
                if (chunked)
                    api_call_chunked(method, PATHS[p], "application/json", huge, big, &r);
                else
                    api_call(method, PATHS[p], "application/json", huge, big, &r);
                sent++;
                CHECKF(is_problem(&r, 413, "body_too_large", NULL), "%s %s huge (%s): %ld", method,
                       PATHS[p], chunked ? "chunked" : "sized", r.status);
                api_reply_free(&r);
            }
            free(huge);
        }
    }
    /* methods nobody routes (OPTIONS: every routed path answers it) and paths nobody routes */
    static const char *const METHODS[] = {"DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"};
    for (size_t m = 0; m < sizeof METHODS / sizeof METHODS[0]; m++)
        for (size_t p = 0; p < NPATHS; p++) {
            api_reply r;
            api_call(METHODS[m], PATHS[p], NULL, NULL, 0, &r);
            sent++;
            if (strcmp(METHODS[m], "OPTIONS") == 0) /* a routed path: 204 with Allow (CORS) */
                CHECKF(r.status == 204 && r.body_len == 0 && strstr(r.allow, "OPTIONS"),
                       "OPTIONS %s: %ld", PATHS[p], r.status);
            else
                CHECKF(problem_4xx(&r), "%s %s: %ld", METHODS[m], PATHS[p], r.status);
            api_reply_free(&r);
        }
    static const char *const BAD_PATHS[] = {"/v1/nothing", "/v1/clients/a/b", "/v1//delta",
                                            "/../etc/passwd", "/v1/rounds/"};
    for (size_t p = 0; p < sizeof BAD_PATHS / sizeof BAD_PATHS[0]; p++) {
        api_reply r;
        api_call("GET", BAD_PATHS[p], NULL, NULL, 0, &r);
        sent++;
        CHECKF(problem_4xx(&r), "GET %s: %ld", BAD_PATHS[p], r.status);
        api_reply_free(&r);
    }
    CHECKF(sent >= 200, "only %d hostile requests", sent);
    /* still up, and nothing was written */
    api_reply h;
    api_get("/healthz", &h);
    CHECK(h.status == 200);
    api_reply_free(&h);
    CHECK(ledger_version(&v1, &l1));
    CHECKF(v1 == v0 && l1 == l0, "the ledger changed: version %llu -> %llu, log %llu -> %llu", v0,
           v1, l0, l1);
}

/* Found by fuzzing: 16 labels of the longest keys and values (1568 bytes as key=value lines)
 * overflowed the client's 512-byte label field. Refused now, and nothing is stored. */
static void labels_that_do_not_fit_are_refused(void)
{
    char body[4096];
    size_t n = (size_t)snprintf(body, sizeof body,
                                "{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":{");
    for (int i = 0; i < 16; i++)
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s\"k%02dxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\":\"%064d\"", i ? "," : "", i,
                              0);
    snprintf(body + n, sizeof body - n, "}}");
    api_reply r;
    api_call("PUT", "/v1/clients/label-overflow", "application/json", body, strlen(body), &r);
    CHECKF(is_problem(&r, 400, "invalid_parameter", "labels"), "%ld %s", r.status, r.body);
    api_reply_free(&r);
    api_get("/v1/clients/label-overflow", &r);
    CHECK(r.status == 404);
    api_reply_free(&r);
    api_get("/healthz", &r);
    CHECK(r.status == 200);
    api_reply_free(&r);
}

static long long summary_clients(void)
{
    api_reply r;
    api_get("/v1/summary", &r);
    long long n = r.status == 200 ? (long long)jnum(r.json, "clients") : -1;
    api_reply_free(&r);
    return n;
}

/* Before: PUT /v1/clients/alice%00evil changed alice (the NUL cut the id short), and ids of
 * invalid UTF-8 (%FFx, %C0%AE%C0%AE) were stored, then answered 503 out_of_memory on every
 * read and listing, while the summary counted them. Now every id, in the path or a body, and
 * every label filter obeys one rule at the edge: 400 invalid_id (invalid_parameter for a
 * filter, bad_request for %00 anywhere in the URL), nothing stored. */
static void hostile_ids_are_refused_at_the_edge(void)
{
    static const char budget[] = "{\"budget\":{\"epsilon\":1,\"delta\":1e-5}}";
    static const char other[] = "{\"budget\":{\"epsilon\":7,\"delta\":1e-5}}";
    api_reply r;
    api_call("PUT", "/v1/clients/hid-alice", "application/json", budget, strlen(budget), &r);
    CHECK(r.status == 201 || r.status == 200);
    api_reply_free(&r);
    long long before = summary_clients();
    /* NUL aliasing: in the path, the query, with any method */
    static const char *const nul[] = {"/v1/clients/hid-alice%00evil", "/v1/clients/hid-alice%00",
                                      "/v1/rounds/r%00x", "/v1/clients?status=active%00x",
                                      "/v1/clients?label=a%3Db%00c"};
    for (size_t i = 0; i < sizeof nul / sizeof nul[0]; i++) {
        api_call(i < 2 ? "PUT" : "GET", nul[i], i < 2 ? "application/json" : NULL,
                 i < 2 ? other : NULL, i < 2 ? strlen(other) : 0, &r);
        CHECKF(is_problem(&r, 400, "bad_request", NULL), "%s: %ld %s", nul[i], r.status, r.body);
        api_reply_free(&r);
    }
    /* an encoded '/' in the path: libmicrohttpd decodes it before routing, so it moved the
     * segment boundary (was 404 for a client id, and /v1/rounds/r%2Fcommit reached the commit
     * route); in a query value it is an ordinary character */
    static const char *const slash[] = {"/v1/clients/hid-alice%2Fevil", "/v1/clients/a%2fb",
                                        "/v1/rounds/hid-r%2Fcommit", "/v1/clients%2Fhid-alice",
                                        "/v1/rounds/hid-r%2Frelease"};
    for (size_t i = 0; i < sizeof slash / sizeof slash[0]; i++) {
        int put = i < 2, post = i == 2 || i == 4;
        api_call(put    ? "PUT"
                 : post ? "POST"
                        : "GET",
                 slash[i], put || post ? "application/json" : NULL,
                 put    ? other
                 : post ? "{}"
                        : NULL,
                 put    ? strlen(other)
                 : post ? 2
                        : 0,
                 &r);
        CHECKF(is_problem(&r, 400, "invalid_id", "id"), "%s: %ld %s", slash[i], r.status, r.body);
        api_reply_free(&r);
    }
    api_get("/v1/clients?label=site%3Deu%2F1", &r);
    CHECKF(r.status == 200, "a label value with an encoded '/': %ld %s", r.status, r.body);
    api_reply_free(&r);
    api_get("/v1/clients/hid-alice", &r);
    CHECKF(r.status == 200 && jnum(r.json, "budget.epsilon") == 1.0, "alice changed: %s", r.body);
    api_reply_free(&r);
    /* ids that break the rule, in the path (PUT and GET) */
    static const char *const bad[] = {"%FFx",       "%C0%AE%C0%AE", "a%20b", "-lead",     ".hidden",
                                      "a%22b",      "a%5Cb",        "a%09b", "%E2%82%AC", "a%25b",
                                      "a%3Cscript", "a;b",          "a%2Cb", "a!b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[96];
        snprintf(path, sizeof path, "/v1/clients/%s", bad[i]);
        api_call("PUT", path, "application/json", budget, strlen(budget), &r);
        CHECKF(is_problem(&r, 400, "invalid_id", "id"), "PUT %s: %ld %s", path, r.status, r.body);
        api_reply_free(&r);
        api_get(path, &r);
        CHECKF(is_problem(&r, 400, "invalid_id", "id"), "GET %s: %ld", path, r.status);
        api_reply_free(&r);
        snprintf(path, sizeof path, "/v1/rounds/%s", bad[i]);
        api_get(path, &r);
        CHECKF(is_problem(&r, 400, "invalid_id", "id"), "GET %s: %ld", path, r.status);
        api_reply_free(&r);
    }
    /* a prefix route whose segment is no id (a dashboard asset) keeps its own answer; input
     * echoed in a detail (a path, a header) stays JSON whatever its bytes (was 503) */
    api_get("/ui/app%FF.js", &r);
    CHECKF(is_problem(&r, 404, "not_found", NULL), "GET /ui/app%%FF.js: %ld", r.status);
    api_reply_free(&r);
    api_call("DELETE", "/v1/clients/a%FF%C0", NULL, NULL, 0, &r);
    CHECKF(is_problem(&r, 405, "method_not_allowed", NULL), "DELETE /v1/clients/a%%FF: %ld",
           r.status);
    api_reply_free(&r);
    api_call("POST", "/v1/rounds", "text/\xff\xfe", "{}", 2, &r);
    CHECKF(is_problem(&r, 415, "unsupported_media_type", NULL), "Content-Type \\xff: %ld %s",
           r.status, r.body);
    api_reply_free(&r);
    /* ... and in bodies: round_id and every participant */
    static const char *const rounds[][2] = {
        {"{\"round_id\":\"r\u00ff\",\"event\":{\"class_name\":\"GaussianDpEvent\","
         "\"noise_multiplier\":5},\"participants\":[\"hid-alice\"]}",
         "round_id"},
        {"{\"round_id\":\"hid-r1\",\"event\":{\"class_name\":\"GaussianDpEvent\","
         "\"noise_multiplier\":5},\"participants\":[\"hid-alice\",\"x\\ty\"]}",
         "participants[1]"},
        {"{\"round_id\":\"hid-r2\",\"event\":{\"class_name\":\"GaussianDpEvent\","
         "\"noise_multiplier\":5},\"participants\":[\"\u00c0\u00ae\"]}",
         "participants[0]"},
        {"{\"round_id\":\"a/b\",\"event\":{\"class_name\":\"GaussianDpEvent\","
         "\"noise_multiplier\":5},\"participants\":[\"hid-alice\"]}",
         "round_id"},
    };
    for (size_t i = 0; i < sizeof rounds / sizeof rounds[0]; i++) {
        api_postf(&r, "/v1/rounds", "%s", rounds[i][0]);
        CHECKF(is_problem(&r, 400, "invalid_id", rounds[i][1]), "round #%zu: %ld %s", i, r.status,
               r.body);
        api_reply_free(&r);
    }
    /* label filters: the labels' own rule */
    static const char *const filters[] = {"a%FF=b",  "a=%FF",    "=b",     "a",
                                          "a%20b=c", "a=%C0%AE", "a=b%0Ac"};
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
        char path[96];
        snprintf(path, sizeof path, "/v1/clients?label=%s", filters[i]);
        api_get(path, &r);
        CHECKF(is_problem(&r, 400, "invalid_parameter", "label"), "%s: %ld", path, r.status);
        api_reply_free(&r);
    }
    api_get("/v1/clients?label=team=%C3%A9t%C3%A9", &r); /* valid UTF-8 is a fine value */
    CHECK(r.status == 200);
    api_reply_free(&r);
    /* nothing was stored; what real coordinators use is accepted */
    CHECKF(summary_clients() == before, "clients %lld -> %lld", before, summary_clients());
    static const char *const good[] = {"550e8400-e29b-41d4-a716-446655440000",
                                       "user+tag@example.com", "site-3:client-12", "A.b_c~d"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char path[96];
        snprintf(path, sizeof path, "/v1/clients/%s", good[i]);
        api_call("PUT", path, "application/json", budget, strlen(budget), &r);
        CHECKF(r.status == 201 || r.status == 200, "PUT %s: %ld %s", path, r.status, r.body);
        api_reply_free(&r);
    }
    /* the summary and the listing agree, and the listing answers */
    api_get("/v1/clients?limit=1000", &r);
    CHECKF(r.status == 200 && (long long)jnum(r.json, "total") == summary_clients(),
           "list %ld total %g, summary %lld", r.status, r.json ? jnum(r.json, "total") : -1.0,
           summary_clients());
    api_reply_free(&r);
}

const tl_test HOSTILE_TESTS[] = {
    TL_T(hostile_battery),
    TL_T(labels_that_do_not_fit_are_refused),
    TL_T(hostile_ids_are_refused_at_the_edge),
};
const size_t HOSTILE_NTESTS = sizeof HOSTILE_TESTS / sizeof HOSTILE_TESTS[0];
