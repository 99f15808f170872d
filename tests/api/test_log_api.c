/*
 * test_log_api.c - the ledger's log as a Merkle tree over HTTP: GET /v1/log/entries,
 * /v1/log/proof/inclusion and /v1/log/proof/consistency, checked with RFC 9162 written in the
 * test (tests/tlog_ref.h), never the daemon's code: the entries hashed give the roots, and the
 * proofs the daemon serves verify against them; a page holds at most 1000 entries; every bad
 * parameter is a 400 naming it. The daemon is shared: the log's current size is whatever the
 * other tests left, found from a 400's detail.
 */
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tlog_ref.h"
#include "check.h"
#include "suites.h"

/* base64 text into out (cap bytes): the length, or -1. */
static long unb64(const char *s, unsigned char *out, size_t cap)
{
    struct base64_decode_ctx c;
    base64_decode_init(&c);
    size_t n = cap;
    if (s == NULL || BASE64_DECODE_LENGTH(strlen(s)) > cap ||
        !base64_decode_update(&c, &n, out, strlen(s), s) || !base64_decode_final(&c))
        return -1;
    return (long)n;
}

/* The log's current size: the number a 400 for a second tree past it names. */
static uint64_t log_size(void)
{
    api_reply r;
    api_get("/v1/log/proof/consistency?first=1&second=999999999999", &r);
    const char *d = r.json ? jstr(r.json, "detail") : NULL;
    const char *at = d ? strstr(d, "current size ") : NULL;
    uint64_t n = at ? strtoull(at + 13, NULL, 10) : 0;
    CHECKF(r.status == 400 && at != NULL, "%ld %.200s", r.status, r.body);
    api_reply_free(&r);
    return n;
}

static void put_clients(const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char path[96];
        snprintf(path, sizeof path, "/v1/clients/%s-%d", prefix, i);
        const char *b = "{\"budget\":{\"epsilon\":3,\"delta\":1e-5}}";
        api_reply r;
        api_call("PUT", path, "application/json", b, strlen(b), &r);
        CHECKF(r.status == 200 || r.status == 201, "%ld %.200s", r.status, r.body);
        api_reply_free(&r);
    }
}

/* Leaf hashes of entries [0, n) into lh, read in pages; the count read. */
static uint64_t read_leaves(uint64_t n, h32 *lh)
{
    uint64_t at = 0;
    static unsigned char buf[1 << 22];
    while (at < n) {
        char path[96];
        snprintf(path, sizeof path, "/v1/log/entries?start=%llu&end=%llu", (unsigned long long)at,
                 (unsigned long long)n);
        api_reply r;
        api_get(path, &r);
        json_t *es = r.json ? json_object_get(r.json, "entries") : NULL;
        size_t k = json_array_size(es);
        CHECKF(r.status == 200 && k > 0, "%ld %.200s", r.status, r.body);
        for (size_t i = 0; i < k; i++) {
            json_t *e = json_array_get(es, i);
            long len = unb64(jstr(e, "entry"), buf, sizeof buf);
            if (!jint_is(e, "leaf_index", (long long)at) || len < 9) {
                CHECKF(0, "entry %llu: %.200s", (unsigned long long)at, r.body);
                api_reply_free(&r);
                return at;
            }
            ref_leaf_of_entry(buf, buf + 9, (size_t)len - 9, lh[at++]);
        }
        api_reply_free(&r);
        if (k == 0)
            break;
    }
    return at;
}

/* The hashes of the array at key of r into p (*n of them). */
static int hashes_of(const api_reply *r, const char *key, h32 *p, size_t *n)
{
    json_t *a = r->json ? json_object_get(r->json, key) : NULL;
    *n = 0;
    if (!json_is_array(a) || json_array_size(a) > 128)
        return 0;
    for (size_t i = 0; i < json_array_size(a); i++) {
        unsigned char b[48];
        if (unb64(json_string_value(json_array_get(a, i)), b, sizeof b) != 32)
            return 0;
        memcpy(p[(*n)++], b, 32);
    }
    return 1;
}

static void log_proofs_verify(void)
{
    put_clients("logproof", 40);
    uint64_t n = log_size();
    CHECK(n >= 40);
    h32 *lh = calloc(n + 1, sizeof *lh);
    if (read_leaves(n, lh) != n) {
        free(lh);
        return;
    }
    uint64_t sizes[] = {1, 2, 3, n / 2 + 1, n - 1, n};
    h32 root[6];
    for (int i = 0; i < 6; i++)
        ref_mth(lh, 0, sizes[i], root[i]);
    h32 p[128];
    size_t k;
    int bad = 0, runs = 0;
    for (int i = 0; i < 6; i++) {
        uint64_t leaves[] = {0, sizes[i] - 1, sizes[i] / 2, sizes[i] / 3};
        for (int j = 0; j < 4; j++) {
            char path[128];
            snprintf(path, sizeof path, "/v1/log/proof/inclusion?leaf_index=%llu&tree_size=%llu",
                     (unsigned long long)leaves[j], (unsigned long long)sizes[i]);
            api_reply r;
            api_get(path, &r);
            int ok = r.status == 200 && jint_is(r.json, "leaf_index", (long long)leaves[j]) &&
                     jint_is(r.json, "tree_size", (long long)sizes[i]) &&
                     hashes_of(&r, "audit_path", p, &k) &&
                     ref_verify_inclusion(leaves[j], sizes[i], lh[leaves[j]], (const h32 *)p, k,
                                          root[i]);
            CHECKF(ok, "%s: %ld %.200s", path, r.status, r.body);
            bad += !ok;
            runs++;
            api_reply_free(&r);
        }
        for (int j = 0; j <= i; j++) {
            char path[128];
            snprintf(path, sizeof path, "/v1/log/proof/consistency?first=%llu&second=%llu",
                     (unsigned long long)sizes[j], (unsigned long long)sizes[i]);
            api_reply r;
            api_get(path, &r);
            int ok =
                r.status == 200 && jint_is(r.json, "first", (long long)sizes[j]) &&
                jint_is(r.json, "second", (long long)sizes[i]) && hashes_of(&r, "proof", p, &k) &&
                ref_verify_consistency(sizes[j], sizes[i], root[j], root[i], (const h32 *)p, k);
            CHECKF(ok, "%s: %ld %.200s", path, r.status, r.body);
            bad += !ok;
            runs++;
            api_reply_free(&r);
        }
    }
    CHECKF(bad == 0, "%d of %d proofs failed", bad, runs);
    free(lh);
}

/* More than a page asked: 1000 entries come, from start. HEAD answers as GET without a body. */
static void log_entries_page(void)
{
    char body[64 * 1024];
    size_t o = (size_t)snprintf(body, sizeof body, "{\"clients\":[");
    for (int i = 0; i < 1001; i++)
        o += (size_t)snprintf(body + o, sizeof body - o,
                              "%s{\"id\":\"logpage-%d\",\"budget\":{\"epsilon\":3,\"delta\":1e-5}}",
                              i ? "," : "", i);
    snprintf(body + o, sizeof body - o, "]}");
    api_reply r;
    api_call("POST", "/v1/clients:batch", "application/json", body, strlen(body), &r);
    CHECKF(r.status == 200, "%ld %.200s", r.status, r.body);
    api_reply_free(&r);
    uint64_t n = log_size();
    char path[96];
    snprintf(path, sizeof path, "/v1/log/entries?start=%llu&end=%llu",
             (unsigned long long)(n - 1001), (unsigned long long)n);
    api_get(path, &r);
    json_t *es = r.json ? json_object_get(r.json, "entries") : NULL;
    CHECKF(r.status == 200 && json_array_size(es) == 1000 &&
               jint_is(json_array_get(es, 999), "leaf_index", (long long)(n - 2)),
           "%ld %zu entries", r.status, json_array_size(es));
    api_reply_free(&r);
    api_call("HEAD", path, NULL, NULL, 0, &r);
    CHECKF(r.status == 200 && r.body_len == 0, "HEAD: %ld", r.status);
    api_reply_free(&r);
}

static void log_bad_parameters(void)
{
    put_clients("logbad", 2);
    uint64_t n = log_size();
    char big[64];
    snprintf(big, sizeof big, "%llu", (unsigned long long)(n + 1));
    const struct {
        const char *path;
        const char *code, *field;
    } cases[] = {
        {"/v1/log/proof/inclusion?tree_size=2", "missing_field", "leaf_index"},
        {"/v1/log/proof/inclusion?leaf_index=0", "missing_field", "tree_size"},
        {"/v1/log/proof/inclusion?leaf_index=abc&tree_size=2", "invalid_parameter", "leaf_index"},
        {"/v1/log/proof/inclusion?leaf_index=-1&tree_size=2", "invalid_parameter", "leaf_index"},
        {"/v1/log/proof/inclusion?leaf_index=NaN&tree_size=2", "invalid_parameter", "leaf_index"},
        {"/v1/log/proof/inclusion?leaf_index=1e3&tree_size=2000", "invalid_parameter",
         "leaf_index"},
        {"/v1/log/proof/inclusion?leaf_index=&tree_size=2", "invalid_parameter", "leaf_index"},
        {"/v1/log/proof/inclusion?leaf_index=0&tree_size=0", "invalid_parameter", "tree_size"},
        {"/v1/log/proof/inclusion?leaf_index=2&tree_size=2", "invalid_parameter", "leaf_index"},
        {"/v1/log/proof/inclusion?leaf_index=0&tree_size=99999999999999999999", "invalid_parameter",
         "tree_size"},
        {"/v1/log/proof/consistency?first=0&second=2", "invalid_parameter", "first"},
        {"/v1/log/proof/consistency?first=3&second=2", "invalid_parameter", "first"},
        {"/v1/log/proof/consistency?first=1", "missing_field", "second"},
        {"/v1/log/proof/consistency?first=1&second=2.0", "invalid_parameter", "second"},
        {"/v1/log/entries?start=1&end=1", "invalid_parameter", "start"},
        {"/v1/log/entries?start=0", "missing_field", "end"},
        {"/v1/log/entries?start=+1&end=2", "invalid_parameter", "start"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        api_reply r;
        api_get(cases[i].path, &r);
        CHECKF(is_problem(&r, 400, cases[i].code, cases[i].field), "%s: %ld %.200s", cases[i].path,
               r.status, r.body);
        api_reply_free(&r);
    }
    /* past the current size */
    const char *pre[] = {
        "/v1/log/proof/inclusion?leaf_index=0&tree_size=",
        "/v1/log/proof/consistency?first=1&second=", "/v1/log/entries?start=0&end="};
    const char *field[] = {"tree_size", "second", "end"};
    for (int i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s%s", pre[i], big);
        api_reply r;
        api_get(path, &r);
        CHECKF(is_problem(&r, 400, "invalid_parameter", field[i]), "%s: %ld %.200s", path, r.status,
               r.body);
        api_reply_free(&r);
    }
}

const tl_test LOG_API_TESTS[] = {
    {"log_proofs_verify", log_proofs_verify},
    {"log_entries_page", log_entries_page},
    {"log_bad_parameters", log_bad_parameters},
};
const size_t LOG_API_NTESTS = sizeof LOG_API_TESTS / sizeof LOG_API_TESTS[0];
