/*
 * test_ledger_api.c - the budget ledger over HTTP: PUT/GET /v1/clients/{id}, GET
 * /v1/clients, POST /v1/rounds, GET /v1/rounds/{id}, GET /v1/summary, GET /readyz.
 *
 * Every test uses its own client and round ids (prefixed with the test's name): all tests
 * share one daemon, which runs without --default-budget (unknown clients are refused).
 * client.h neither sends If-None-Match nor shows ETag or Idempotent-Replayed, so this file
 * has its own small libcurl call (hreq) that does; it fills an api_reply like client.c.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "check.h"
#include "suites.h"

/* ---- events ---------------------------------------------------------------------------------- */

/* 100 steps of the Poisson-sampled Gaussian (q = 0.01, sigma = 1): ~1.2141 at delta 1e-5. */
#define SG_STEP                                                                                    \
    "{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":{"          \
    "\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1}}"
#define SG_STEPS(count)                                                                            \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":" #count ",\"event\":" SG_STEP "}"
#define E100 SG_STEPS(100)
#define E200 SG_STEPS(200)
/* the rdp epsilon of E100 at delta 1e-5 (this build's /v1/epsilon) */
#define EPS_E100 1.2141452107893538
/* a Gaussian with sigma 5: ~0.79 for one round at delta 1e-5, growing slowly */
#define G5 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}"
/* unclipped SGLD: not certifiable */
#define SGLD                                                                                       \
    "{\"class_name\":\"SgldDpEvent\",\"batch_size\":64,\"dataset_size\":60000,\"step_size\":1e-4," \
    "\"steps\":10,\"sampling\":\"poisson\"}"

#define BUDGET(eps, delta) "{\"budget\":{\"epsilon\":" #eps ",\"delta\":" #delta "}}"

/* ---- where the daemon listens ---------------------------------------------------------------- */

/* client.c keeps the base URL to itself: find it the way main.c did, from the daemon (our
 * child) and its --listen / --port-file arguments. $DPB_API_BASE overrides. */
static char base_url[160] = "http://127.0.0.1:8080";
static pthread_once_t base_once = PTHREAD_ONCE_INIT;

static void find_base(void)
{
    const char *env = getenv("DPB_API_BASE");
    if (env && env[0]) {
        snprintf(base_url, sizeof base_url, "%s", env);
        return;
    }
    DIR *d = opendir("/proc");
    if (d == NULL)
        return;
    long me = (long)getpid();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[300], buf[2048];
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *rp = strrchr(buf, ')');
        long ppid = -1;
        if (rp == NULL || sscanf(rp + 1, " %*c %ld", &ppid) != 1 || ppid != me)
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        f = fopen(path, "r");
        if (f == NULL)
            continue;
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *host = "127.0.0.1", *port_file = NULL;
        for (size_t i = 0; i < n;) {
            const char *arg = buf + i, *next = arg + strlen(arg) + 1;
            if (next < buf + n && strcmp(arg, "--listen") == 0)
                host = next;
            if (next < buf + n && strcmp(arg, "--port-file") == 0)
                port_file = next;
            i += strlen(arg) + 1;
        }
        unsigned port = 0;
        f = port_file ? fopen(port_file, "r") : NULL;
        if (f) {
            if (fscanf(f, "%u", &port) != 1)
                port = 0;
            fclose(f);
        }
        if (port > 0 && port < 65536) {
            snprintf(base_url, sizeof base_url, "http://%s:%u", host, port);
            break;
        }
    }
    closedir(d);
}

static int own_daemon; /* a test's own daemon (api_daemon_start): api_get_base() */

static const char *api_base_url(void)
{
    pthread_once(&base_once, find_base);
    return own_daemon ? api_get_base() : base_url;
}

/* ---- a libcurl call with headers ------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} gbuf;

static size_t hx_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    gbuf *g = userdata;
    size_t n = size * nmemb;
    if (g->len + n + 1 > g->cap) {
        size_t ncap = g->cap ? g->cap : 4096;
        while (ncap < g->len + n + 1)
            ncap *= 2;
        char *nb = realloc(g->buf, ncap);
        if (nb == NULL) {
            g->oom = 1;
            return 0;
        }
        g->buf = nb;
        g->cap = ncap;
    }
    memcpy(g->buf + g->len, data, n);
    g->len += n;
    g->buf[g->len] = '\0';
    return n;
}

typedef struct {
    api_reply *r;
    hx *h;
} hx_ctx;

/* The value of header line `line` (n bytes) if its name is `name`, into dst; 1 if taken. */
static int hx_take(const char *line, size_t n, const char *name, char *dst, size_t dst_n)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return 0;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= dst_n)
        len = dst_n - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
    return 1;
}

static size_t hx_header(char *data, size_t size, size_t nmemb, void *userdata)
{
    hx_ctx *c = userdata;
    size_t n = size * nmemb;
    char v[64];
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        c->r->content_type[0] = '\0';
        memset(c->h, 0, sizeof *c->h);
    }
    hx_take(data, n, "Content-Type", c->r->content_type, sizeof c->r->content_type);
    hx_take(data, n, "ETag", c->h->etag, sizeof c->h->etag);
    if (hx_take(data, n, "Idempotent-Replayed", v, sizeof v)) {
        c->h->has_replayed = 1;
        c->h->replayed = strcmp(v, "true") == 0;
    }
    return n;
}

static int is_json_ct(const char *ct)
{
    return strncasecmp(ct, "application/json", 16) == 0 ||
           strncasecmp(ct, "application/problem+json", 24) == 0;
}

/* One request: body (JSON) may be NULL; inm, when not NULL, is sent as If-None-Match. Fills
 * out (release with api_reply_free) and h (may be NULL). Thread-safe (own easy handle). */
static int hreq(const char *method, const char *path, const char *body, const char *inm,
                api_reply *out, hx *h)
{
    return api_hreq(method, path, body, inm, out, h);
}

int api_hreq(const char *method, const char *path, const char *body, const char *inm,
             api_reply *out, hx *h)
{
    hx local;
    if (h == NULL)
        h = &local;
    memset(out, 0, sizeof *out);
    memset(h, 0, sizeof *h);
    gbuf g = {0};
    hx_ctx ctx = {out, h};
    char url[600], inm_h[160];
    snprintf(url, sizeof url, "%s%s", api_base_url(), path);
    CURL *c = curl_easy_init();
    if (c == NULL) {
        out->body = calloc(1, 1);
        return -1;
    }
    struct curl_slist *hd = curl_slist_append(NULL, "Expect:");
    hd = curl_slist_append(hd, body ? "Content-Type: application/json" : "Content-Type:");
    if (inm) {
        snprintf(inm_h, sizeof inm_h, "If-None-Match: %s", inm);
        hd = curl_slist_append(hd, inm_h);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hx_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, hx_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &ctx);
    if (strcmp(method, "GET") != 0) {
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? strlen(body) : 0));
    }
    CURLcode rc = curl_easy_perform(c);
    out->curl_code = (int)rc;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hd);
    out->body = g.buf ? g.buf : calloc(1, 1);
    out->body_len = g.len;
    if (g.len > 0 && is_json_ct(out->content_type))
        out->json = json_loadb(out->body, out->body_len, 0, NULL);
    api_record_exchange(method, path, body ? "application/json" : NULL, body,
                        body ? strlen(body) : 0, out);
    return rc == CURLE_OK && !g.oom ? 0 : -1;
}

char *api_vfmt(const char *f, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, f, aq);
    va_end(aq);
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (s == NULL)
        abort();
    vsnprintf(s, (size_t)n + 1, f, ap);
    return s;
}

char *api_fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = api_vfmt(f, ap);
    va_end(ap);
    return s;
}

static int put_client(const char *id, const char *body, api_reply *out, hx *h)
{
    char path[320];
    snprintf(path, sizeof path, "/v1/clients/%s", id);
    return hreq("PUT", path, body, NULL, out, h);
}

static int get_client(const char *id, const char *inm, api_reply *out, hx *h)
{
    char path[320];
    snprintf(path, sizeof path, "/v1/clients/%s", id);
    return hreq("GET", path, NULL, inm, out, h);
}

/* PUT a client and check it was accepted (201 or 200). */
static void mk_client(const char *id, const char *body)
{
    api_reply r;
    put_client(id, body, &r, NULL);
    CHECKF(r.status == 201 || r.status == 200, "PUT %s %s: %ld %.300s", id, body, r.status, r.body);
    api_reply_free(&r);
}

/* POST /v1/rounds with a printf-formatted body. */
static int post_round(api_reply *out, hx *h, const char *f, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int post_round(api_reply *out, hx *h, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *body = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (body == NULL)
        abort();
    va_start(ap, f);
    vsnprintf(body, (size_t)n + 1, f, ap);
    va_end(ap);
    int rc = hreq("POST", "/v1/rounds", body, NULL, out, h);
    free(body);
    return rc;
}

/* A Real: a number, or "infinite"/"-infinite"; NAN otherwise (null, absent). */
static double jreal(const json_t *root, const char *path)
{
    json_t *v = jget(root, path);
    if (json_is_number(v))
        return json_number_value(v);
    const char *s = json_string_value(v);
    if (s && strcmp(s, "infinite") == 0)
        return HUGE_VAL;
    if (s && strcmp(s, "-infinite") == 0)
        return -HUGE_VAL;
    return NAN;
}

static int str_is(const json_t *root, const char *path, const char *want)
{
    const char *s = jstr(root, path);
    if (s && strcmp(s, want) == 0)
        return 1;
    fprintf(stderr, "  %s: %s is '%s', want '%s'\n", tl_current, path, s ? s : "(none)", want);
    return 0;
}

int api_str_is(const json_t *root, const char *path, const char *want)
{
    return str_is(root, path, want);
}

/* The entry of `client` in the round answer's array `which` ("admitted" or "refused"). */
static json_t *entry(const json_t *round, const char *which, const char *client)
{
    json_t *a = json_object_get(round, which), *e;
    size_t i;
    json_array_foreach(a, i, e)
    {
        const char *c = json_string_value(json_object_get(e, "client"));
        if (c && strcmp(c, client) == 0)
            return e;
    }
    return NULL;
}

/* The reason of client's refusal, or "" when it is not refused. */
static const char *refusal(const json_t *round, const char *client)
{
    const char *s = json_string_value(json_object_get(entry(round, "refused", client), "reason"));
    return s ? s : "";
}

/* epsilon(delta) of an event by POST /v1/epsilon with this accountant. */
static double eps_of(const char *accountant, const char *event, double delta)
{
    api_reply r;
    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":%.17g,\"accountant\":\"%s\"}", event,
              delta, accountant);
    CHECKF(r.status == 200, "/v1/epsilon %s: %ld %.300s", accountant, r.status, r.body);
    double e = jnum(r.json, "epsilon");
    api_reply_free(&r);
    return e;
}

/* A client's field (a Real) by GET. */
static double client_num(const char *id, const char *path)
{
    api_reply r;
    get_client(id, NULL, &r, NULL);
    CHECKF(r.status == 200, "GET client %s: %ld", id, r.status);
    double v = jreal(r.json, path);
    api_reply_free(&r);
    return v;
}

static long long client_rounds(const char *id)
{
    double v = client_num(id, "rounds");
    return isnan(v) ? -1 : (long long)v;
}

/* Exact equality is expected (the same core code computes both); a difference within 1e-12
 * relative is accepted but printed (NOTE) so it can be reported. */
static void same_value(const char *what, double got, double want)
{
    if (got != want)
        fprintf(stderr, "  NOTE %s: %s = %.17g differs from %.17g (rel %.3g)\n", tl_current, what,
                got, want, want != 0 ? fabs(got - want) / fabs(want) : fabs(got - want));
    CHECK_REL(got, want, 1e-12);
}

/* A pld spend near the budget read from a kept composition (docs/ACCOUNTING.md, "Kept
 * compositions"): never below the compute API's want but by its round-off (1e-9 of it),
 * above it by at most the stated excess, 1%. */
static void kept_value(const char *what, double got, double want)
{
    CHECKF(got >= want * (1.0 - 1e-9) && got <= want * 1.01,
           "%s: %s = %.17g, the compute API's %.17g", tl_current, what, got, want);
}

/* ---- 1. clients: create, update, read, ETags ------------------------------------------------- */

static void ledger_client_put_get_etag(void)
{
    const char *id = "ledger_client_put_get_etag-c1";
    api_reply r;
    hx h;
    put_client(id,
               "{\"budget\":{\"epsilon\":2,\"delta\":1e-5},\"labels\":{\"tier\":\"gold\",\"site\":"
               "\"eu-1\"}}",
               &r, &h);
    CHECKF(r.status == 201, "status %ld: %.300s", r.status, r.body);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECKF(h.etag[0] == '"' && strlen(h.etag) > 2, "ETag '%s'", h.etag);
    CHECK(str_is(r.json, "id", id));
    CHECK(jnum(r.json, "budget.epsilon") == 2.0 && jnum(r.json, "budget.delta") == 1e-5);
    CHECK(str_is(r.json, "accounting", "rdp"));
    CHECK(str_is(r.json, "neighboring_relation", "add_or_remove_one"));
    CHECK(str_is(r.json, "labels.site", "eu-1") && str_is(r.json, "labels.tier", "gold"));
    CHECK(json_object_size(jget(r.json, "labels")) == 2);
    CHECK(jnum(r.json, "spent.epsilon") == 0.0);
    CHECK(jnum(r.json, "spent.delta") == 1e-5);
    CHECK(jnum(r.json, "spent.delta_total_variation") == 0.0);
    CHECK(jnum(r.json, "remaining.epsilon") == 2.0);
    CHECK(jint_is(r.json, "rounds", 0));
    CHECK(str_is(r.json, "status", "active"));
    CHECK(json_is_integer(jget(r.json, "version")));
    long long v1 = (long long)jnum(r.json, "version");
    char etag1[64];
    snprintf(etag1, sizeof etag1, "%s", h.etag);
    api_reply_free(&r);

    /* update: 200, the version grows, the ETag changes */
    put_client(id,
               "{\"budget\":{\"epsilon\":3,\"delta\":1e-5},\"labels\":{\"site\":\"eu-1\",\"tier\":"
               "\"gold\"}}",
               &r, &h);
    CHECKF(r.status == 200, "status %ld: %.300s", r.status, r.body);
    CHECK(jnum(r.json, "budget.epsilon") == 3.0 && jnum(r.json, "remaining.epsilon") == 3.0);
    long long v2 = (long long)jnum(r.json, "version");
    CHECKF(v2 > v1, "version %lld after %lld", v2, v1);
    CHECKF(h.etag[0] && strcmp(h.etag, etag1) != 0, "ETag '%s' after '%s'", h.etag, etag1);
    char etag2[64];
    snprintf(etag2, sizeof etag2, "%s", h.etag);
    char *put_body = api_fmt("%s", r.body);
    api_reply_free(&r);

    /* GET: the same representation and ETag */
    get_client(id, NULL, &r, &h);
    CHECK(r.status == 200);
    CHECKF(strcmp(r.body, put_body) == 0, "GET %s\n  PUT %s", r.body, put_body);
    CHECKF(strcmp(h.etag, etag2) == 0, "GET ETag '%s', PUT ETag '%s'", h.etag, etag2);
    api_reply_free(&r);
    free(put_body);

    /* If-None-Match: the current ETag -> 304 without a body; another value -> 200 */
    get_client(id, etag2, &r, &h);
    CHECKF(r.status == 304, "status %ld", r.status);
    CHECKF(r.body_len == 0, "304 with %zu body bytes", r.body_len);
    api_reply_free(&r);
    get_client(id, "\"c999999999\"", &r, &h);
    CHECK(r.status == 200 && r.body_len > 0);
    api_reply_free(&r);
    get_client(id, etag1, &r, &h);
    CHECK(r.status == 200);
    api_reply_free(&r);

    /* a change: the old ETag gives 200 and the new one */
    put_client(id, "{\"budget\":{\"epsilon\":3,\"delta\":1e-5},\"labels\":{\"site\":\"us-2\"}}", &r,
               &h);
    CHECK(r.status == 200);
    CHECK(str_is(r.json, "labels.site", "us-2") && json_object_size(jget(r.json, "labels")) == 1);
    char etag3[64];
    snprintf(etag3, sizeof etag3, "%s", h.etag);
    api_reply_free(&r);
    get_client(id, etag2, &r, &h);
    CHECKF(r.status == 200, "status %ld", r.status);
    CHECKF(strcmp(h.etag, etag3) == 0 && strcmp(h.etag, etag2) != 0, "ETag '%s'", h.etag);
    CHECK(str_is(r.json, "labels.site", "us-2"));
    api_reply_free(&r);
    get_client(id, etag3, &r, &h);
    CHECK(r.status == 304);
    api_reply_free(&r);

    /* the other accounting mode and relation are echoed */
    put_client("ledger_client_put_get_etag-c2",
               "{\"budget\":{\"epsilon\":0.5,\"delta\":1e-6},\"accounting\":\"pld\","
               "\"neighboring_relation\":\"replace_one\"}",
               &r, &h);
    CHECK(r.status == 201);
    CHECK(str_is(r.json, "accounting", "pld"));
    CHECK(str_is(r.json, "neighboring_relation", "replace_one"));
    CHECK(json_is_object(jget(r.json, "labels")) && json_object_size(jget(r.json, "labels")) == 0);
    api_reply_free(&r);
    /* mode and relation may change while nothing was charged */
    put_client("ledger_client_put_get_etag-c2", BUDGET(0.5, 1e-6), &r, &h);
    CHECK(r.status == 200);
    CHECK(str_is(r.json, "accounting", "rdp"));
    CHECK(str_is(r.json, "neighboring_relation", "add_or_remove_one"));
    api_reply_free(&r);
}

/* ---- 1b. PUT validation ---------------------------------------------------------------------- */

typedef struct {
    const char *body;
    const char *code;
    const char *field; /* exact */
} put_case;

static void ledger_client_put_validation(void)
{
    const char *id = "ledger_client_put_validation-c";
    char long_value[80], many[1200];
    memset(long_value, 'x', 65);
    long_value[65] = '\0';
    char *too_long = api_fmt(
        "{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":{\"k\":\"%s\"}}", long_value);
    size_t n = (size_t)snprintf(many, sizeof many,
                                "{\"budget\":{\"epsilon\":1,\"delta\":1e-5},"
                                "\"labels\":{");
    for (int i = 0; i < 17; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "%s\"k%d\":\"v\"", i ? "," : "", i);
    snprintf(many + n, sizeof many - n, "}}");
    const put_case c[] = {
        {"{", "malformed_json", NULL},
        {"[]", "wrong_type", NULL},
        {"{}", "missing_field", "budget"},
        {"{\"labels\":{}}", "missing_field", "budget"},
        {"{\"budget\":1}", "wrong_type", "budget"},
        {"{\"budget\":{\"delta\":1e-5}}", "missing_field", "budget.epsilon"},
        {"{\"budget\":{\"epsilon\":1}}", "missing_field", "budget.delta"},
        {"{\"budget\":{\"epsilon\":\"1\",\"delta\":1e-5}}", "wrong_type", "budget.epsilon"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5,\"x\":1}}", "unknown_field", "budget.x"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"colour\":\"red\"}", "unknown_field",
         "colour"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":{\"a b\":\"x\"}}",
         "invalid_parameter", "labels"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":{\"\":\"x\"}}", "invalid_parameter",
         "labels"},
        {too_long, "invalid_parameter", "labels"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":{\"a\":1}}", "invalid_parameter",
         "labels"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":{\"a\":\"x\\ny\"}}",
         "invalid_parameter", "labels"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"labels\":[\"a\"]}", "wrong_type", "labels"},
        {many, "wrong_type", "labels"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"accounting\":\"gdp\"}", "invalid_parameter",
         "accounting"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"accounting\":1}", "wrong_type",
         "accounting"},
        {"{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"neighboring_relation\":\"swap\"}",
         "invalid_parameter", "neighboring_relation"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        api_reply r;
        put_client(id, c[i].body, &r, NULL);
        CHECKF(is_problem(&r, 400, c[i].code, c[i].field), "case %zu: %.200s", i, c[i].body);
        api_reply_free(&r);
    }
    free(too_long);
    /* out-of-domain budgets: 400 invalid_parameter naming the budget (the field is "budget",
     * not "budget.epsilon" / "budget.delta") */
    static const char *const domain[] = {
        "{\"budget\":{\"epsilon\":-1,\"delta\":1e-5}}",
        "{\"budget\":{\"epsilon\":-1e-300,"
        "\"delta\":1e-5}}",
        "{\"budget\":{\"epsilon\":1,\"delta\":0}}",
        "{\"budget\":{\"epsilon\":1,\"delta\":1}}",
        "{\"budget\":{\"epsilon\":1,\"delta\":-1e-5}}",
    };
    for (size_t i = 0; i < sizeof domain / sizeof domain[0]; i++) {
        api_reply r;
        put_client(id, domain[i], &r, NULL);
        CHECKF(is_problem(&r, 400, "invalid_parameter", NULL), "%s", domain[i]);
        const char *f = jstr(r.json, "field");
        CHECKF(f && strncmp(f, "budget", 6) == 0, "field '%s' for %s", f ? f : "(none)", domain[i]);
        api_reply_free(&r);
    }
    /* nothing was created by the refused requests */
    api_reply r;
    get_client(id, NULL, &r, NULL);
    CHECK(is_problem(&r, 404, "not_found", "id"));
    api_reply_free(&r);
    get_client("ledger_client_put_validation-nobody", NULL, &r, NULL);
    CHECK(is_problem(&r, 404, "not_found", "id"));
    api_reply_free(&r);

    /* ids (the one id rule): 128 characters are accepted, 129 are not; spaces are refused */
    char id128[140], id129[140];
    memset(id128, 'i', 128);
    id128[128] = '\0';
    memset(id129, 'j', 129);
    id129[129] = '\0';
    put_client(id129, BUDGET(1, 1e-5), &r, NULL);
    CHECK(is_problem(&r, 400, "invalid_id", "id"));
    api_reply_free(&r);
    put_client(id128, BUDGET(1, 1e-5), &r, NULL);
    CHECKF(r.status == 201, "128-character id: %ld %.200s", r.status, r.body);
    CHECK(str_is(r.json, "id", id128));
    api_reply_free(&r);
    put_client("ledger_client_put_validation%20sp", BUDGET(1, 1e-5), &r, NULL);
    CHECK(is_problem(&r, 400, "invalid_id", "id"));
    api_reply_free(&r);

    /* boundaries that are valid: epsilon 0, a 64-character label value, 16 labels */
    char ok_value[80];
    memset(ok_value, 'y', 64);
    ok_value[64] = '\0';
    char *ok64 =
        api_fmt("{\"budget\":{\"epsilon\":0,\"delta\":1e-5},\"labels\":{\"k\":\"%s\"}}", ok_value);
    put_client("ledger_client_put_validation-ok", ok64, &r, NULL);
    CHECKF(r.status == 201, "%ld %.300s", r.status, r.body);
    CHECK(str_is(r.json, "labels.k", ok_value));
    /* epsilon 0: spent 0 >= 0, the client is exhausted from the start */
    CHECK(str_is(r.json, "status", "exhausted"));
    CHECK(jnum(r.json, "remaining.epsilon") == 0.0);
    api_reply_free(&r);
    free(ok64);
}

/* ---- 2. a round's spend is the accountant's epsilon ------------------------------------------ */

static void ledger_round_spend_matches_epsilon(void)
{
    const char *id = "ledger_round_spend_matches_epsilon-c";
    mk_client(id, BUDGET(10, 1e-5));
    double e1 = eps_of("rdp", E100, 1e-5), e2 = eps_of("rdp", E200, 1e-5);
    CHECK_REL(e1, EPS_E100, 1e-9);
    CHECK(e2 > e1 && e2 < 2 * e1);

    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_round_spend_matches_epsilon-r1\",\"event\":" E100
               ",\"participants\":[\"%s\"]}",
               id);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(str_is(r.json, "round_id", "ledger_round_spend_matches_epsilon-r1"));
    CHECK(str_is(r.json, "policy", "all_or_nothing"));
    CHECK(json_is_false(jget(r.json, "dry_run")) && json_is_false(jget(r.json, "already_ran")));
    CHECK(jint_is(r.json, "participants", 1) && jint_is(r.json, "charged", 1));
    CHECK(json_array_size(jget(r.json, "admitted")) == 1);
    CHECK(json_array_size(jget(r.json, "refused")) == 0);
    CHECK(str_is(r.json, "admitted[0].client", id));
    CHECK(str_is(r.json, "admitted[0].reason", "admitted"));
    CHECK(jnum(r.json, "admitted[0].spent_before") == 0.0);
    same_value("spent_after of round 1 vs /v1/epsilon count 100",
               jnum(r.json, "admitted[0].spent_after"), e1);
    api_reply_free(&r);

    post_round(&r, NULL,
               "{\"round_id\":\"ledger_round_spend_matches_epsilon-r2\",\"event\":" E100
               ",\"participants\":[\"%s\"]}",
               id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    same_value("spent_before of round 2", jnum(r.json, "admitted[0].spent_before"), e1);
    same_value("spent_after of round 2 vs /v1/epsilon count 200",
               jnum(r.json, "admitted[0].spent_after"), e2);
    api_reply_free(&r);

    get_client(id, NULL, &r, NULL);
    same_value("GET spent.epsilon", jnum(r.json, "spent.epsilon"), e2);
    CHECK_REL(jnum(r.json, "remaining.epsilon"), 10.0 - e2, 1e-15);
    CHECK(jint_is(r.json, "rounds", 2));
    CHECK(str_is(r.json, "status", "active"));
    api_reply_free(&r);
}

/* ---- 3. policies ----------------------------------------------------------------------------- */

static void ledger_policies(void)
{
    const char *rich1 = "ledger_policies-rich1", *rich2 = "ledger_policies-rich2",
               *poor = "ledger_policies-poor";
    mk_client(rich1, BUDGET(5, 1e-5));
    mk_client(rich2, BUDGET(5, 1e-5));
    mk_client(poor, BUDGET(0.5, 1e-5));
    double e1 = eps_of("rdp", E100, 1e-5);
    char *aon = api_fmt("{\"round_id\":\"ledger_policies-aon\",\"event\":" E100
                        ",\"participants\":[\"%s\",\"%s\",\"%s\"]}",
                        rich1, poor, rich2);
    api_reply r;
    hx h;
    hreq("POST", "/v1/rounds", aon, NULL, &r, &h);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(str_is(r.json, "policy", "all_or_nothing"));
    CHECK(jint_is(r.json, "charged", 0) && jint_is(r.json, "participants", 3));
    CHECK(json_array_size(jget(r.json, "admitted")) == 0);
    CHECK(json_array_size(jget(r.json, "refused")) == 3);
    CHECK(strcmp(refusal(r.json, poor), "over_budget") == 0);
    CHECK(strcmp(refusal(r.json, rich1), "all_or_nothing") == 0);
    CHECK(strcmp(refusal(r.json, rich2), "all_or_nothing") == 0);
    json_t *p = entry(r.json, "refused", poor);
    CHECK(jnum(p, "spent_before") == 0.0);
    same_value("would_spend of the poor client", jnum(p, "would_spend"), e1);
    CHECK(jnum(p, "would_spend") > 0.5);
    same_value("would_spend of rich1", jnum(entry(r.json, "refused", rich1), "would_spend"), e1);
    char *first = api_fmt("%s", r.body);
    api_reply_free(&r);
    CHECK(client_rounds(rich1) == 0 && client_rounds(rich2) == 0 && client_rounds(poor) == 0);
    CHECK(client_num(rich1, "spent.epsilon") == 0.0 && client_num(poor, "spent.epsilon") == 0.0);
    /* a refused round is stored like any other: the same body replays the refusal */
    hreq("POST", "/v1/rounds", aon, NULL, &r, &h);
    CHECK(r.status == 200 && h.replayed);
    CHECK(strcmp(r.body, first) == 0);
    api_reply_free(&r);
    free(aon);
    free(first);

    post_round(&r, NULL,
               "{\"round_id\":\"ledger_policies-ae\",\"event\":" E100
               ",\"participants\":[\"%s\",\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               rich1, poor, rich2);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(str_is(r.json, "policy", "admit_eligible"));
    CHECK(jint_is(r.json, "charged", 2));
    CHECK(json_array_size(jget(r.json, "admitted")) == 2);
    CHECK(json_array_size(jget(r.json, "refused")) == 1);
    CHECK(entry(r.json, "admitted", rich1) && entry(r.json, "admitted", rich2));
    same_value("rich1 spent_after", jnum(entry(r.json, "admitted", rich1), "spent_after"), e1);
    same_value("rich2 spent_after", jnum(entry(r.json, "admitted", rich2), "spent_after"), e1);
    CHECK(strcmp(refusal(r.json, poor), "over_budget") == 0);
    CHECK(jnum(entry(r.json, "refused", poor), "would_spend") > 0.5);
    api_reply_free(&r);
    CHECK(client_rounds(rich1) == 1 && client_rounds(rich2) == 1 && client_rounds(poor) == 0);
    same_value("GET rich1 spent", client_num(rich1, "spent.epsilon"), e1);
    same_value("GET rich2 spent", client_num(rich2, "spent.epsilon"), e1);
    CHECK(client_num(poor, "spent.epsilon") == 0.0);
}

/* ---- 4. exhaustion --------------------------------------------------------------------------- */

static void ledger_exhaustion(void)
{
    const char *id = "ledger_exhaustion-c";
    const double budget = 3.0;
    mk_client(id, BUDGET(3, 1e-5));
    int admitted = 0, refused = 0;
    double prev = 0.0;
    char status[40][16] = {{0}};
    for (int k = 0; k < 40 && !refused; k++) {
        api_reply r;
        post_round(&r, NULL,
                   "{\"round_id\":\"ledger_exhaustion-r%d\",\"event\":" G5
                   ",\"participants\":[\"%s\"]}",
                   k, id);
        CHECKF(r.status == 200, "round %d: %ld %.300s", k, r.status, r.body);
        if (json_array_size(jget(r.json, "admitted")) == 1) {
            admitted++;
            double after = jnum(r.json, "admitted[0].spent_after");
            CHECKF(after <= budget, "round %d: spent_after %.17g > %g", k, after, budget);
            CHECKF(after > prev, "round %d: spent_after %.17g after %.17g", k, after, prev);
            CHECK(jnum(r.json, "admitted[0].spent_before") == prev);
            prev = after;
            api_reply g;
            get_client(id, NULL, &g, NULL);
            double s = jnum(g.json, "spent.epsilon");
            CHECKF(s == after && s <= budget, "spent %.17g, round said %.17g", s, after);
            CHECK(jint_is(g.json, "rounds", admitted));
            snprintf(status[admitted - 1], sizeof status[0], "%s", jstr(g.json, "status"));
            api_reply_free(&g);
        } else {
            refused++;
            CHECK(strcmp(refusal(r.json, id), "over_budget") == 0);
            CHECK(jnum(entry(r.json, "refused", id), "spent_before") == prev);
            CHECK(jnum(entry(r.json, "refused", id), "would_spend") > budget);
        }
        api_reply_free(&r);
    }
    CHECKF(admitted >= 2 && refused == 1, "admitted %d, refused %d", admitted, refused);
    /* the honest status: "active" while one more round of the event still fits, "exhausted"
     * from the charge after which it does not (spent < epsilon there: the next round of this
     * size was refused over_budget) */
    for (int k = 0; k < admitted; k++)
        CHECKF(strcmp(status[k], k + 1 < admitted ? "active" : "exhausted") == 0,
               "status after round %d of %d: %s", k + 1, admitted, status[k]);
    api_reply g;
    get_client(id, NULL, &g, NULL);
    CHECK(jint_is(g.json, "rounds", admitted));
    CHECK(jnum(g.json, "spent.epsilon") == prev && prev < budget);
    CHECK(str_is(g.json, "status", "exhausted"));
    CHECK_REL(jnum(g.json, "remaining.epsilon"), budget - prev, 1e-15);
    api_reply_free(&g);

    /* lowering the budget below the spend: a round is then refused with reason "exhausted"
     * (spent >= epsilon); raising it back keeps it exhausted (the event still does not fit) */
    put_client(id, BUDGET(0.1, 1e-5), &g, NULL);
    CHECK(g.status == 200 && str_is(g.json, "status", "exhausted"));
    CHECK(jnum(g.json, "remaining.epsilon") == 0.0 && jnum(g.json, "spent.epsilon") == prev);
    api_reply_free(&g);
    post_round(&g, NULL,
               "{\"round_id\":\"ledger_exhaustion-after-lower\",\"event\":" G5
               ",\"participants\":[\"%s\"]}",
               id);
    CHECK(g.status == 200 && strcmp(refusal(g.json, id), "exhausted") == 0);
    api_reply_free(&g);
    put_client(id, BUDGET(3, 1e-5), &g, NULL);
    CHECK(g.status == 200 && str_is(g.json, "status", "exhausted"));
    api_reply_free(&g);
    /* a budget that fits one more round of the event makes it active again */
    put_client(id, BUDGET(6, 1e-5), &g, NULL);
    CHECK(g.status == 200 && str_is(g.json, "status", "active"));
    api_reply_free(&g);

    /* a budget equal to the exact cost of one round: admitted (spent_after <= epsilon), and
     * then exhausted (spent >= epsilon); the next round is refused "exhausted" */
    const char *ex = "ledger_exhaustion-exact";
    mk_client(ex, BUDGET(100, 1e-5));
    post_round(&g, NULL,
               "{\"round_id\":\"ledger_exhaustion-exact-probe\",\"event\":" G5
               ",\"participants\":[\"%s\"],\"dry_run\":true}",
               ex);
    double cost = jnum(g.json, "admitted[0].spent_after");
    CHECK(cost > 0.5 && cost < 1.0);
    api_reply_free(&g);
    char *b = api_fmt("{\"budget\":{\"epsilon\":%.17g,\"delta\":1e-5}}", cost);
    mk_client(ex, b);
    free(b);
    post_round(&g, NULL,
               "{\"round_id\":\"ledger_exhaustion-exact-r1\",\"event\":" G5
               ",\"participants\":[\"%s\"]}",
               ex);
    CHECKF(g.status == 200 && jint_is(g.json, "charged", 1), "%.300s", g.body);
    CHECK(jnum(g.json, "admitted[0].spent_after") == cost);
    api_reply_free(&g);
    get_client(ex, NULL, &g, NULL);
    CHECK(jnum(g.json, "spent.epsilon") == cost);
    CHECK(str_is(g.json, "status", "exhausted"));
    CHECK(jnum(g.json, "remaining.epsilon") == 0.0);
    api_reply_free(&g);
    post_round(&g, NULL,
               "{\"round_id\":\"ledger_exhaustion-exact-r2\",\"event\":" G5
               ",\"participants\":[\"%s\"]}",
               ex);
    CHECK(g.status == 200 && strcmp(refusal(g.json, ex), "exhausted") == 0);
    CHECK(jint_is(g.json, "charged", 0));
    api_reply_free(&g);
    CHECK(client_rounds(ex) == 1);
}

/* ---- 5. dry runs ----------------------------------------------------------------------------- */

static void ledger_dry_run(void)
{
    const char *id = "ledger_dry_run-c", *poor = "ledger_dry_run-poor";
    mk_client(id, BUDGET(5, 1e-5));
    mk_client(poor, BUDGET(0.5, 1e-5));
    double e1 = eps_of("rdp", E100, 1e-5);
    api_reply before, r, g;
    hx h;
    get_client(id, NULL, &before, NULL);
    hreq("POST", "/v1/rounds",
         "{\"round_id\":\"ledger_dry_run-r\",\"event\":" E100
         ",\"participants\":[\"ledger_dry_run-c\",\"ledger_dry_run-poor\"],\"policy\":"
         "\"admit_eligible\",\"dry_run\":true}",
         NULL, &r, &h);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(!h.has_replayed);
    CHECK(json_is_true(jget(r.json, "dry_run")));
    CHECK(jint_is(r.json, "charged", 0) && jint_is(r.json, "participants", 2));
    CHECK(json_array_size(jget(r.json, "admitted")) == 1);
    same_value("dry-run spent_after", jnum(entry(r.json, "admitted", id), "spent_after"), e1);
    CHECK(str_is(entry(r.json, "admitted", id), "reason", "admitted"));
    CHECK(strcmp(refusal(r.json, poor), "over_budget") == 0);
    double dry_after = jnum(entry(r.json, "admitted", id), "spent_after");
    api_reply_free(&r);
    /* nothing charged, nothing stored */
    get_client(id, NULL, &g, NULL);
    CHECKF(strcmp(g.body, before.body) == 0, "after the dry run: %s\n  before: %s", g.body,
           before.body);
    api_reply_free(&g);
    api_reply_free(&before);
    hreq("GET", "/v1/rounds/ledger_dry_run-r", NULL, NULL, &r, NULL);
    CHECK(is_problem(&r, 404, "not_found", NULL));
    api_reply_free(&r);
    /* the id is not reserved: a real round with it is a fresh round (not a replay) */
    hreq("POST", "/v1/rounds",
         "{\"round_id\":\"ledger_dry_run-r\",\"event\":" E100
         ",\"participants\":[\"ledger_dry_run-c\",\"ledger_dry_run-poor\"],\"policy\":"
         "\"admit_eligible\"}",
         NULL, &r, &h);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(!h.has_replayed);
    CHECK(json_is_false(jget(r.json, "dry_run")));
    CHECK(jint_is(r.json, "charged", 1));
    CHECK(jnum(entry(r.json, "admitted", id), "spent_after") == dry_after);
    api_reply_free(&r);
    CHECK(client_rounds(id) == 1 && client_rounds(poor) == 0);
    hreq("GET", "/v1/rounds/ledger_dry_run-r", NULL, NULL, &r, NULL);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    api_reply_free(&r);
    /* a dry run with a used id answers afresh (from the current spend), charging nothing */
    hreq("POST", "/v1/rounds",
         "{\"round_id\":\"ledger_dry_run-r\",\"event\":" E100
         ",\"participants\":[\"ledger_dry_run-c\"],\"dry_run\":true}",
         NULL, &r, &h);
    CHECK(r.status == 200 && !h.has_replayed && json_is_true(jget(r.json, "dry_run")));
    CHECK(jnum(r.json, "admitted[0].spent_before") == dry_after);
    api_reply_free(&r);
    CHECK(client_rounds(id) == 1);
}

/* ---- 6. idempotency -------------------------------------------------------------------------- */

static void ledger_idempotency(void)
{
    const char *id = "ledger_idempotency-c";
    mk_client(id, BUDGET(10, 1e-5));
    const char *body = "{\"round_id\":\"ledger_idempotency-r\",\"event\":" G5
                       ",\"participants\":[\"ledger_idempotency-c\"]}";
    api_reply r1, r2, r;
    hx h1, h2, h;
    hreq("POST", "/v1/rounds", body, NULL, &r1, &h1);
    CHECKF(r1.status == 200, "%ld %.300s", r1.status, r1.body);
    CHECK(!h1.has_replayed);
    CHECK(jint_is(r1.json, "charged", 1));
    hreq("POST", "/v1/rounds", body, NULL, &r2, &h2);
    CHECK(r2.status == 200);
    CHECKF(h2.has_replayed && h2.replayed, "Idempotent-Replayed missing on the second answer");
    CHECKF(r1.body_len == r2.body_len && memcmp(r1.body, r2.body, r1.body_len) == 0,
           "first %s\n  second %s", r1.body, r2.body);
    CHECK(client_rounds(id) == 1);
    /* the same request with other key order and spacing: the same canonical body */
    hreq("POST", "/v1/rounds",
         "{ \"participants\": [\"ledger_idempotency-c\"],\n  \"event\": {\"noise_multiplier\": "
         "5, \"class_name\": \"GaussianDpEvent\"}, \"round_id\": \"ledger_idempotency-r\" }",
         NULL, &r, &h);
    CHECK(r.status == 200 && h.replayed);
    CHECK(strcmp(r.body, r1.body) == 0);
    api_reply_free(&r);
    CHECK(client_rounds(id) == 1);
    /* the same numbers spelled otherwise: the same request (before: 409 conflict) */
    static const char *const spellings[] = {"5.0", "5e0", "0.50e1", "500E-2", "5.000"};
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        char *b = api_fmt("{\"round_id\":\"ledger_idempotency-r\",\"event\":{\"class_name\":"
                          "\"GaussianDpEvent\",\"noise_multiplier\":%s},\"participants\":["
                          "\"ledger_idempotency-c\"]}",
                          spellings[i]);
        hreq("POST", "/v1/rounds", b, NULL, &r, &h);
        CHECKF(r.status == 200 && h.replayed, "noise_multiplier %s: %ld %.200s", spellings[i],
               r.status, r.body);
        CHECK(strcmp(r.body, r1.body) == 0);
        api_reply_free(&r);
        free(b);
    }
    /* a whole-number field (count) spelled as a real, and a zero spelled -0.0 */
#define SG_ROUND                                                                                   \
    "{\"round_id\":\"ledger_idempotency-s\",\"event\":{\"class_name\":"                            \
    "\"SelfComposedDpEvent\",\"count\":%s,\"event\":{\"class_name\":"                              \
    "\"EpsilonDeltaDpEvent\",\"epsilon\":0.01,\"delta\":%s}},"                                     \
    "\"participants\":[\"ledger_idempotency-c\"]}"
    char *b0 = api_fmt(SG_ROUND, "3", "0");
    hreq("POST", "/v1/rounds", b0, NULL, &r, &h);
    CHECKF(r.status == 200 && !h.has_replayed, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    free(b0);
    static const char *const same[][2] = {
        {"3.0", "0"}, {"3", "-0.0"}, {"30e-1", "0.0"}, {"3", "-0"}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char *b = api_fmt(SG_ROUND, same[i][0], same[i][1]);
        hreq("POST", "/v1/rounds", b, NULL, &r, &h);
        CHECKF(r.status == 200 && h.replayed, "count %s delta %s: %ld %.200s", same[i][0],
               same[i][1], r.status, r.body);
        api_reply_free(&r);
        free(b);
    }
    /* values that differ, however little, still conflict */
    static const char *const differ[][2] = {{"4", "0"}, {"3", "1e-300"}, {"3.0", "5e-324"}};
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        char *b = api_fmt(SG_ROUND, differ[i][0], differ[i][1]);
        hreq("POST", "/v1/rounds", b, NULL, &r, &h);
        CHECKF(is_problem(&r, 409, "conflict", "round_id"), "count %s delta %s: %ld", differ[i][0],
               differ[i][1], r.status);
        api_reply_free(&r);
        free(b);
    }
    hreq("POST", "/v1/rounds",
         "{\"round_id\":\"ledger_idempotency-r\",\"event\":{\"class_name\":"
         "\"GaussianDpEvent\",\"noise_multiplier\":5.000000000000001},\"participants\":["
         "\"ledger_idempotency-c\"]}",
         NULL, &r, &h);
    CHECK(is_problem(&r, 409, "conflict", "round_id"));
    api_reply_free(&r);
    CHECK(client_rounds(id) == 2);
    /* the same id with another body: 409 conflict */
    static const char *const others[] = {
        "{\"round_id\":\"ledger_idempotency-r\",\"event\":" G5
        ",\"participants\":[\"ledger_idempotency-c\",\"ledger_idempotency-x\"]}",
        "{\"round_id\":\"ledger_idempotency-r\",\"event\":" E100
        ",\"participants\":[\"ledger_idempotency-c\"]}",
        "{\"round_id\":\"ledger_idempotency-r\",\"event\":" G5
        ",\"participants\":[\"ledger_idempotency-c\"],\"policy\":\"admit_eligible\"}",
        "{\"round_id\":\"ledger_idempotency-r\",\"event\":" G5
        ",\"participants\":[\"ledger_idempotency-c\"],\"already_ran\":true}",
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        hreq("POST", "/v1/rounds", others[i], NULL, &r, &h);
        CHECKF(is_problem(&r, 409, "conflict", "round_id"), "case %zu", i);
        api_reply_free(&r);
    }
    /* spelling out a default ("policy": "all_or_nothing") changes the canonical body */
    hreq("POST", "/v1/rounds",
         "{\"round_id\":\"ledger_idempotency-r\",\"event\":" G5
         ",\"participants\":[\"ledger_idempotency-c\"],\"policy\":\"all_or_nothing\"}",
         NULL, &r, &h);
    if (r.status == 409)
        fprintf(stderr,
                "  NOTE %s: the same round with the default policy spelled out is a "
                "409 conflict, not a replay\n",
                tl_current);
    CHECK(r.status == 409 || (r.status == 200 && h.replayed));
    api_reply_free(&r);
    CHECK(client_rounds(id) == 2);

    /* GET /v1/rounds/{id}: the stored answer, with an ETag */
    hreq("GET", "/v1/rounds/ledger_idempotency-r", NULL, NULL, &r, &h);
    CHECK(r.status == 200);
    CHECKF(strcmp(r.body, r1.body) == 0, "GET %s\n  POST %s", r.body, r1.body);
    CHECK(h.etag[0] != '\0');
    char etag[64];
    snprintf(etag, sizeof etag, "%s", h.etag);
    api_reply_free(&r);
    hreq("GET", "/v1/rounds/ledger_idempotency-r", NULL, etag, &r, &h);
    CHECK(r.status == 304 && r.body_len == 0);
    api_reply_free(&r);
    hreq("GET", "/v1/rounds/ledger_idempotency-nope", NULL, NULL, &r, &h);
    CHECK(is_problem(&r, 404, "not_found", "round_id"));
    api_reply_free(&r);
    api_reply_free(&r1);
    api_reply_free(&r2);
}

/* ---- 7. participants ------------------------------------------------------------------------- */

static void ledger_participants(void)
{
    const char *id = "ledger_participants-c", *ghost = "ledger_participants-ghost";
    mk_client(id, BUDGET(10, 1e-5));
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_participants-r1\",\"event\":" G5
               ",\"participants\":[\"%s\",\"%s\"]}",
               id, ghost);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(strcmp(refusal(r.json, ghost), "unknown_client") == 0);
    /* an unknown client has no spend: no figures, and never null (the schema's number or
     * "infinite") */
    CHECK(entry(r.json, "refused", ghost) != NULL);
    CHECK(jget(entry(r.json, "refused", ghost), "spent_before") == NULL);
    CHECK(jget(entry(r.json, "refused", ghost), "would_spend") == NULL);
    CHECK(json_is_number(jget(entry(r.json, "refused", id), "spent_before")));
    CHECK(strcmp(refusal(r.json, id), "all_or_nothing") == 0);
    CHECK(jint_is(r.json, "charged", 0));
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_participants-r2\",\"event\":" G5
               ",\"participants\":[\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               ghost, id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    CHECK(entry(r.json, "admitted", id) != NULL);
    CHECK(strcmp(refusal(r.json, ghost), "unknown_client") == 0);
    api_reply_free(&r);
    get_client(ghost, NULL, &r, NULL); /* not created by the round */
    CHECK(is_problem(&r, 404, "not_found", NULL));
    api_reply_free(&r);
    CHECK(client_rounds(id) == 1);

    /* a duplicate: the second listing is refused "duplicate", the client is charged once */
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_participants-r3\",\"event\":" G5
               ",\"participants\":[\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               id, id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    CHECK(json_array_size(jget(r.json, "admitted")) == 1);
    CHECK(json_array_size(jget(r.json, "refused")) == 1);
    CHECK(strcmp(refusal(r.json, id), "duplicate") == 0);
    api_reply_free(&r);
    CHECK(client_rounds(id) == 2);
    /* under all_or_nothing a duplicate is a refusal: nobody is charged */
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_participants-r4\",\"event\":" G5
               ",\"participants\":[\"%s\",\"%s\"]}",
               id, id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 0));
    CHECK(json_array_size(jget(r.json, "admitted")) == 0);
    api_reply_free(&r);
    CHECK(client_rounds(id) == 2);

    /* malformed participant lists: 400, nothing stored */
    static const struct {
        const char *body, *code, *field;
    } bad[] = {
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5 ",\"participants\":[]}", NULL,
         "participants"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5
         ",\"participants\":[\"ledger_participants-c\",3]}",
         "wrong_type", "participants[1]"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5 ",\"participants\":[null]}",
         "wrong_type", "participants[0]"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5 ",\"participants\":[\"\"]}",
         "invalid_id", "participants[0]"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5
         ",\"participants\":\"ledger_participants-c\"}",
         "wrong_type", "participants"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5 "}", "missing_field",
         "participants"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5 ",\"participants\":[\"a b\"]}",
         "invalid_id", "participants[0]"},
        {"{\"round_id\":\"ledger_participants bad\",\"event\":" G5
         ",\"participants\":[\"ledger_participants-c\"]}",
         "invalid_id", "round_id"},
        {"{\"event\":" G5 ",\"participants\":[\"ledger_participants-c\"]}", "missing_field",
         "round_id"},
        {"{\"round_id\":\"ledger_participants-bad\",\"participants\":[\"ledger_participants-c\"]}",
         NULL, "event"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5
         ",\"participants\":[\"ledger_participants-c\"],\"policy\":\"some\"}",
         "invalid_parameter", "policy"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5
         ",\"participants\":[\"ledger_participants-c\"],\"dry_run\":1}",
         "wrong_type", "dry_run"},
        {"{\"round_id\":\"ledger_participants-bad\",\"event\":" G5
         ",\"participants\":[\"ledger_participants-c\"],\"extra\":1}",
         "unknown_field", "extra"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hreq("POST", "/v1/rounds", bad[i].body, NULL, &r, NULL);
        CHECKF(is_problem(&r, 400, bad[i].code, bad[i].field), "case %zu: %s", i, bad[i].body);
        if (i == 0 && r.json &&
            strcmp(jstr(r.json, "code") ? jstr(r.json, "code") : "", "too_many_values") == 0)
            fprintf(stderr, "  NOTE %s: an empty participant list is 400 'too_many_values'\n",
                    tl_current);
        api_reply_free(&r);
    }
    hreq("GET", "/v1/rounds/ledger_participants-bad", NULL, NULL, &r, NULL);
    CHECK(is_problem(&r, 404, "not_found", NULL));
    api_reply_free(&r);
    CHECK(client_rounds(id) == 2);
}

/* A duplicate listing's entry reports the client's real spend before the round. */
static void ledger_duplicate_entry_values(void)
{
    const char *id = "ledger_duplicate_entry_values-c";
    mk_client(id, BUDGET(10, 1e-5));
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_duplicate_entry_values-r1\",\"event\":" G5
               ",\"participants\":[\"%s\"]}",
               id);
    double spent = jnum(r.json, "admitted[0].spent_after");
    CHECK(spent > 0.0);
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_duplicate_entry_values-r2\",\"event\":" G5
               ",\"participants\":[\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               id, id);
    json_t *a = entry(r.json, "admitted", id), *d = entry(r.json, "refused", id);
    CHECK(a && d && strcmp(refusal(r.json, id), "duplicate") == 0);
    CHECK(jnum(a, "spent_before") == spent);
    CHECKF(jnum(d, "spent_before") == spent,
           "the duplicate entry says spent_before %.17g, the client had spent %.17g; entry: %s",
           jnum(d, "spent_before"), spent, r.body);
    api_reply_free(&r);
}

/* ---- 8. uncertifiable events ----------------------------------------------------------------- */

static void ledger_uncertifiable(void)
{
    const char *id = "ledger_uncertifiable-c";
    mk_client(id, BUDGET(5, 1e-5));
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_uncertifiable-r1\",\"event\":" SGLD
               ",\"participants\":[\"%s\"],\"policy\":\"admit_eligible\"}",
               id);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(strcmp(refusal(r.json, id), "uncertifiable") == 0);
    CHECK(jint_is(r.json, "charged", 0));
    CHECK(jnum(entry(r.json, "refused", id), "spent_before") == 0.0);
    CHECK(isinf(jreal(entry(r.json, "refused", id), "would_spend")));
    api_reply_free(&r);
    get_client(id, NULL, &r, NULL);
    CHECK(jint_is(r.json, "rounds", 0) && jnum(r.json, "spent.epsilon") == 0.0);
    CHECK(str_is(r.json, "status", "active"));
    api_reply_free(&r);

    /* after the fact: recorded, the spend becomes infinite and the client uncertified */
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_uncertifiable-r2\",\"event\":" SGLD
               ",\"participants\":[\"%s\"],\"already_ran\":true}",
               id);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(json_is_true(jget(r.json, "already_ran")));
    CHECK(jint_is(r.json, "charged", 1));
    CHECK(str_is(r.json, "admitted[0].reason", "recorded_past_budget"));
    CHECK(str_is(r.json, "admitted[0].spent_after", "infinite"));
    api_reply_free(&r);
    get_client(id, NULL, &r, NULL);
    CHECK(str_is(r.json, "status", "uncertified"));
    CHECK(str_is(r.json, "spent.epsilon", "infinite"));
    CHECK(jnum(r.json, "remaining.epsilon") == 0.0);
    CHECK(jint_is(r.json, "rounds", 1));
    api_reply_free(&r);

    /* sticky: a harmless round is refused (reason "uncertifiable"), a new budget does not
     * help */
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_uncertifiable-r3\",\"event\":" G5
               ",\"participants\":[\"%s\"],\"policy\":\"admit_eligible\"}",
               id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 0));
    const char *why = refusal(r.json, id);
    CHECKF(strcmp(why, "uncertifiable") == 0, "reason '%s'", why);
    CHECK(isinf(jreal(entry(r.json, "refused", id), "spent_before")));
    api_reply_free(&r);
    put_client(id, BUDGET(1000, 1e-5), &r, NULL);
    CHECK(r.status == 200 && str_is(r.json, "status", "uncertified"));
    CHECK(str_is(r.json, "spent.epsilon", "infinite"));
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_uncertifiable-r4\",\"event\":" G5
               ",\"participants\":[\"%s\"]}",
               id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 0));
    api_reply_free(&r);
    CHECK(client_rounds(id) == 1);
    hreq("GET", "/v1/clients?status=uncertified&limit=1000", NULL, NULL, &r, NULL);
    int found = 0;
    json_t *c;
    size_t i;
    json_array_foreach(jget(r.json, "clients"), i, c) found +=
        strcmp(json_string_value(json_object_get(c, "id")), id) == 0;
    CHECK(found == 1);
    api_reply_free(&r);
}

/* ---- 8b. already_ran ------------------------------------------------------------------------ */

/* A round that has happened is recorded past the budget: the client ends exhausted. */
static void ledger_already_ran(void)
{
    const char *id = "ledger_already_ran-c";
    mk_client(id, BUDGET(0.5, 1e-5));
    double e1 = eps_of("rdp", E100, 1e-5);
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_already_ran-r1\",\"event\":" E100
               ",\"participants\":[\"%s\"],\"already_ran\":true}",
               id);
    CHECKF(r.status == 200 && jint_is(r.json, "charged", 1), "%.300s", r.body);
    CHECK(str_is(r.json, "admitted[0].reason", "recorded_past_budget"));
    same_value("recorded spent_after", jnum(r.json, "admitted[0].spent_after"), e1);
    api_reply_free(&r);
    get_client(id, NULL, &r, NULL);
    same_value("GET spent", jnum(r.json, "spent.epsilon"), e1);
    CHECK(str_is(r.json, "status", "exhausted"));
    CHECK(jnum(r.json, "remaining.epsilon") == 0.0 && jint_is(r.json, "rounds", 1));
    api_reply_free(&r);
    /* an affordable-looking round is now refused "exhausted" */
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_already_ran-r2\",\"event\":{\"class_name\":"
               "\"GaussianDpEvent\",\"noise_multiplier\":1000},\"participants\":[\"%s\"]}",
               id);
    CHECK(r.status == 200 && strcmp(refusal(r.json, id), "exhausted") == 0);
    api_reply_free(&r);
    CHECK(client_rounds(id) == 1);
}

/* already_ran records the round "for every known participant": an unknown one in the list
 * must not void the record of the known ones (under the default all_or_nothing policy). */
static void ledger_already_ran_with_unknown(void)
{
    const char *id = "ledger_already_ran_with_unknown-c",
               *ghost = "ledger_already_ran_with_unknown-ghost";
    mk_client(id, BUDGET(5, 1e-5));
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_already_ran_with_unknown-r\",\"event\":" G5
               ",\"participants\":[\"%s\",\"%s\"],\"already_ran\":true}",
               id, ghost);
    CHECK(r.status == 200);
    CHECK(strcmp(refusal(r.json, ghost), "unknown_client") == 0);
    CHECKF(entry(r.json, "admitted", id) != NULL && jnum(r.json, "charged") == 1.0,
           "the known participant was not recorded: %s", r.body);
    api_reply_free(&r);
    CHECKF(client_rounds(id) == 1, "rounds %lld", client_rounds(id));
}

/* ---- 9. pld accounting ----------------------------------------------------------------------- */

/* A client's spend agrees with POST /v1/epsilon, with the accountant the client's answer
 * names, on the client's composition (JSON of a ComposedDpEvent). */
static void spend_matches_compute(const char *id, const char *composition, const char *want_acct)
{
    api_reply r;
    get_client(id, NULL, &r, NULL);
    CHECKF(r.status == 200, "GET %s: %ld", id, r.status);
    const char *acct = jstr(r.json, "spent.accountant");
    double sp = jnum(r.json, "spent.epsilon"), delta = jnum(r.json, "budget.delta");
    CHECKF(acct != NULL && (want_acct == NULL || strcmp(acct, want_acct) == 0),
           "%s: spent.accountant %s, want %s", id, acct ? acct : "(none)",
           want_acct ? want_acct : "any");
    if (acct != NULL) {
        char what[200];
        snprintf(what, sizeof what, "%s spent vs /v1/epsilon %s", id, acct);
        if (strcmp(acct, "pld") == 0)
            kept_value(what, sp, eps_of(acct, composition, delta));
        else
            same_value(what, sp, eps_of(acct, composition, delta));
    }
    api_reply_free(&r);
}

#define COMPOSED2(a, b) "{\"class_name\":\"ComposedDpEvent\",\"events\":[" a "," b "]}"
#define SELF(count, ev)                                                                            \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":" #count ",\"event\":" ev "}"

static void ledger_pld_mode(void)
{
    const char *pld = "ledger_pld_mode-pld", *rdp = "ledger_pld_mode-rdp",
               *near = "ledger_pld_mode-near";
    mk_client(pld, "{\"budget\":{\"epsilon\":10,\"delta\":1e-5},\"accounting\":\"pld\"}");
    mk_client(rdp, BUDGET(10, 1e-5));
    /* E100: rdp ~1.214, pld ~0.718 at 1e-5 */
    mk_client(near, "{\"budget\":{\"epsilon\":1,\"delta\":1e-5},\"accounting\":\"pld\"}");
    double want_pld = eps_of("pld", E100, 1e-5), want_rdp = eps_of("rdp", E100, 1e-5);
    double want_pld2 = eps_of("pld", SELF(2, E100), 1e-5),
           want_rdp2 = eps_of("rdp", SELF(2, E100), 1e-5);
    CHECKF(want_rdp > 1.0 && want_pld < 1.0 && want_pld2 < 1.0, "%g %g %g", want_rdp, want_pld,
           want_pld2);
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_mode-r1\",\"event\":" E100
               ",\"participants\":[\"%s\",\"%s\",\"%s\"]}",
               pld, rdp, near);
    CHECKF(r.status == 200 && jint_is(r.json, "charged", 3), "%.300s", r.body);
    /* far from its budget a pld client is charged on the rdp bound, or on the PLD when it is
     * known: here it is, computed for `near` (the same composition) before the round's lock,
     * and kept (docs/LEDGER.md, "Kept compositions") */
    const json_t *ep = entry(r.json, "admitted", pld), *en = entry(r.json, "admitted", near);
    kept_value("pld (far) spent_after vs /v1/epsilon pld", jnum(ep, "spent_after"), want_pld);
    CHECK(str_is(ep, "spent_after_accountant", "pld"));
    same_value("rdp spent_after vs /v1/epsilon rdp",
               jnum(entry(r.json, "admitted", rdp), "spent_after"), want_rdp);
    /* near it (rdp past the budget) the PLD decides, and is the spend */
    kept_value("pld (near) spent_after vs /v1/epsilon pld", jnum(en, "spent_after"), want_pld);
    CHECK(str_is(en, "spent_after_accountant", "pld"));
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_mode-r2\",\"event\":" E100
               ",\"participants\":[\"%s\",\"%s\"]}",
               pld, near);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 2));
    kept_value("near: pld spend after two rounds",
               jnum(entry(r.json, "admitted", near), "spent_after"), want_pld2);
    api_reply_free(&r);
    spend_matches_compute(
        near, "{\"class_name\":\"ComposedDpEvent\",\"events\":[" SELF(2, E100) "]}", "pld");
    spend_matches_compute(
        pld, "{\"class_name\":\"ComposedDpEvent\",\"events\":[" SELF(2, E100) "]}", "pld");
    get_client(pld, NULL, &r, NULL);
    CHECK(str_is(r.json, "accounting", "pld") && jint_is(r.json, "rounds", 2));
    kept_value("GET pld spent", jnum(r.json, "spent.epsilon"), want_pld2);
    CHECKF(want_pld2 < want_rdp2, "%g %g", want_pld2, want_rdp2);
    api_reply_free(&r);
    /* the mode of a charged client cannot change; its budget can */
    put_client(pld, "{\"budget\":{\"epsilon\":10,\"delta\":1e-5},\"accounting\":\"rdp\"}", &r,
               NULL);
    CHECK(is_problem(&r, 409, "conflict", "accounting"));
    api_reply_free(&r);
    put_client(pld,
               "{\"budget\":{\"epsilon\":10,\"delta\":1e-5},\"accounting\":\"pld\","
               "\"neighboring_relation\":\"replace_one\"}",
               &r, NULL);
    CHECK(is_problem(&r, 409, "conflict", NULL));
    api_reply_free(&r);
    /* a budget below the rdp bound: the spend becomes the PLD's, and says so */
    put_client(pld, "{\"budget\":{\"epsilon\":1.2,\"delta\":1e-5},\"accounting\":\"pld\"}", &r,
               NULL);
    CHECK(r.status == 200 && jnum(r.json, "budget.epsilon") == 1.2);
    kept_value("pld spent after a budget change", jnum(r.json, "spent.epsilon"), want_pld2);
    CHECK(str_is(r.json, "spent.accountant", "pld"));
    api_reply_free(&r);
}

/* Schedules and mixed cohorts: each client's spend, in either regime, is the compute API's
 * answer for its own composition with the accountant it names. */
static void ledger_pld_schedule_matches_compute(void)
{
#define SGS(sigma)                                                                                 \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":50,\"event\":{\"class_name\":"              \
    "\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":{\"class_name\":"           \
    "\"GaussianDpEvent\",\"noise_multiplier\":" #sigma "}}}"
    const char *a = "ledger_pld_schedule-a", *b = "ledger_pld_schedule-b",
               *c = "ledger_pld_schedule-c";
    /* a: far (rdp decides), b and c: near (the PLD decides) */
    mk_client(a, "{\"budget\":{\"epsilon\":50,\"delta\":1e-5},\"accounting\":\"pld\"}");
    mk_client(b, "{\"budget\":{\"epsilon\":2.0,\"delta\":1e-5},\"accounting\":\"pld\"}");
    mk_client(c, "{\"budget\":{\"epsilon\":2.2,\"delta\":1e-6},\"accounting\":\"pld\"}");
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_schedule-r1\",\"event\":" SGS(
                   0.81) ",\"participants\":[\"%s\",\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               a, b, c);
    CHECKF(r.status == 200, "%.300s", r.body);
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_schedule-r2\",\"event\":" SGS(
                   0.82) ",\"participants\":[\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               a, b);
    CHECKF(r.status == 200, "%.300s", r.body);
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_schedule-r3\",\"event\":" SGS(
                   0.81) ",\"participants\":[\"%s\",\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               a, b, c);
    CHECKF(r.status == 200, "%.300s", r.body);
    api_reply_free(&r);
    /* a: rdp, or the PLD (computed for b, the same composition; or by the refinement) */
    spend_matches_compute(a, COMPOSED2(SELF(2, SGS(0.81)), SELF(1, SGS(0.82))), NULL);
    spend_matches_compute(b, COMPOSED2(SELF(2, SGS(0.81)), SELF(1, SGS(0.82))), "pld");
    spend_matches_compute(
        c, "{\"class_name\":\"ComposedDpEvent\",\"events\":[" SELF(2, SGS(0.81)) "]}", "pld");
#undef SGS
}

/* The background refinement: a pld client far from its budget, whose composition nobody
 * else has, comes to show its PLD value (POST /v1/epsilon with accountant pld on its
 * composition), naming pld; its ETag changes (If-None-Match with the old one: 200), its
 * version (the log's count of its changes) does not. */
static void ledger_pld_refined(void)
{
#define SGR(sigma)                                                                                 \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":40,\"event\":{\"class_name\":"              \
    "\"PoissonSampledDpEvent\",\"sampling_probability\":0.02,\"event\":{\"class_name\":"           \
    "\"GaussianDpEvent\",\"noise_multiplier\":" #sigma "}}}"
    const char *id = "ledger_pld_refined-far";
    mk_client(id, "{\"budget\":{\"epsilon\":50,\"delta\":1e-5},\"accounting\":\"pld\"}");
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_refined-r1\",\"event\":" SGR(
                   1.17) ",\"participants\":[\"%s\"]}",
               id);
    CHECKF(r.status == 200, "%.300s", r.body);
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_refined-r2\",\"event\":" SGR(
                   1.23) ",\"participants\":[\"%s\"]}",
               id);
    CHECKF(r.status == 200, "%.300s", r.body);
    CHECK(str_is(entry(r.json, "admitted", id), "spent_after_accountant", "rdp"));
    api_reply_free(&r);
    const char *comp = COMPOSED2(SELF(1, SGR(1.17)), SELF(1, SGR(1.23)));
    double want = eps_of("pld", comp, 1e-5), rdp = eps_of("rdp", comp, 1e-5);
    CHECKF(want < rdp, "pld %.17g, rdp %.17g", want, rdp);
    hx h0 = {0}, h = {0};
    get_client(id, NULL, &r, &h0);
    long long v0 = (long long)jnum(r.json, "version");
    int was_rdp =
        jstr(r.json, "spent.accountant") && strcmp(jstr(r.json, "spent.accountant"), "rdp") == 0;
    api_reply_free(&r);
    /* poll (every 5 ms, at most 60 s) until it names pld */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *acct = NULL;
    for (int i = 0; i < 12000; i++) {
        memset(&h, 0, sizeof h);
        get_client(id, NULL, &r, &h);
        acct = r.status == 200 ? jstr(r.json, "spent.accountant") : NULL;
        if (acct && strcmp(acct, "pld") == 0)
            break;
        api_reply_free(&r);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 60)
            break;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    CHECKF(acct && strcmp(acct, "pld") == 0, "%s: still %s after 60 s", id, acct ? acct : "(none)");
    if (acct && strcmp(acct, "pld") == 0) {
        same_value("refined spent vs /v1/epsilon pld", jnum(r.json, "spent.epsilon"), want);
        CHECK(jint_is(r.json, "version", v0));
        api_reply_free(&r);
        spend_matches_compute(id, comp, "pld");
        if (was_rdp) { /* the ETag read before the refinement is no longer current */
            CHECKF(strcmp(h.etag, h0.etag) != 0, "ETag %s before and after", h.etag);
            get_client(id, h0.etag, &r, NULL);
            CHECKF(r.status == 200, "If-None-Match %s after the refinement: %ld", h0.etag,
                   r.status);
            api_reply_free(&r);
        }
        get_client(id, h.etag, &r, NULL);
        CHECKF(r.status == 304, "If-None-Match %s: %ld", h.etag, r.status);
        api_reply_free(&r);
    }
#undef SGR
}

/* ---- 10. shuffled epochs in rdp mode --------------------------------------------------------- */

static void ledger_shuffled_epochs(void)
{
    const char *wide = "ledger_shuffled_epochs-wide", *narrow = "ledger_shuffled_epochs-narrow";
    mk_client(wide, BUDGET(1, 0.05));
    mk_client(narrow, BUDGET(1, 0.005));
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_shuffled_epochs-r0\",\"event\":" EPOCH_1
               ",\"participants\":[\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               wide, narrow);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    CHECK(jint_is(r.json, "charged", 1));
    CHECK(jnum(entry(r.json, "admitted", wide), "spent_after") == 0.0);
    CHECK(strcmp(refusal(r.json, narrow), "over_budget") == 0);
    CHECK(jnum(entry(r.json, "refused", narrow), "spent_before") == 0.0);
    CHECK(isinf(jreal(entry(r.json, "refused", narrow), "would_spend")));
    api_reply_free(&r);
    get_client(wide, NULL, &r, NULL);
    CHECK(jnum(r.json, "spent.epsilon") == 0.0 && jint_is(r.json, "rounds", 1));
    CHECK(str_is(r.json, "status", "active"));
    api_reply_free(&r);
    get_client(narrow, NULL, &r, NULL);
    CHECK(jnum(r.json, "spent.epsilon") == 0.0 && jint_is(r.json, "rounds", 0));
    api_reply_free(&r);
    /* total variation adds up: 1 - (1 - d)^k <= 0.05 for k <= 5 epochs; the sixth would
     * leave no delta for the RDP part (infinite spend) */
    int admitted = 1;
    for (int k = 1; k < 8; k++) {
        post_round(&r, NULL,
                   "{\"round_id\":\"ledger_shuffled_epochs-r%d\",\"event\":" EPOCH_1
                   ",\"participants\":[\"%s\"]}",
                   k, wide);
        if (r.status == 200 && jnum(r.json, "charged") == 1.0) {
            admitted++;
            CHECK(jnum(r.json, "admitted[0].spent_after") == 0.0);
        } else {
            CHECK(strcmp(refusal(r.json, wide), "over_budget") == 0);
            CHECK(isinf(jreal(entry(r.json, "refused", wide), "would_spend")));
            api_reply_free(&r);
            break;
        }
        api_reply_free(&r);
    }
    CHECKF(admitted == 5, "%d epochs admitted at delta 0.05, want 5", admitted);
    CHECK(client_rounds(wide) == 5);
}

/* GET reports the total-variation part of a shuffled spend right after the round. */
static void ledger_shuffled_tv_reported(void)
{
    const char *id = "ledger_shuffled_tv_reported-c";
    mk_client(id, BUDGET(1, 0.05));
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_shuffled_tv_reported-r\",\"event\":" EPOCH_1
               ",\"participants\":[\"%s\"]}",
               id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    api_reply_free(&r);
    double after_round = client_num(id, "spent.delta_total_variation");
    CHECKF(fabs(after_round - DELTA_EPOCH_1) <= 1e-9,
           "GET after the round: delta_total_variation %.17g, want ~%.17g", after_round,
           DELTA_EPOCH_1);
    /* a PUT of the same budget recomputes the spend from the events */
    mk_client(id, BUDGET(1, 0.05));
    double after_put = client_num(id, "spent.delta_total_variation");
    CHECKF(fabs(after_put - DELTA_EPOCH_1) <= 1e-9,
           "GET after a PUT: delta_total_variation %.17g, want ~%.17g", after_put, DELTA_EPOCH_1);
}

/* ---- 11. listing ----------------------------------------------------------------------------- */

#define LIST_N 14

static void ledger_list_clients(void)
{
    char ids[LIST_N][64];
    int team_a = 0;
    for (int i = 0; i < LIST_N; i++) {
        snprintf(ids[i], sizeof ids[i], "ledger_list_clients-%02d", i);
        /* team a: even i; one team-a client (i = 4) with budget 0 is exhausted */
        char *b = api_fmt("{\"budget\":{\"epsilon\":%d,\"delta\":1e-5},\"labels\":{\"team\":\"%s\","
                          "\"n\":\"%d\"}}",
                          i == 4 ? 0 : 10, i % 2 == 0 ? "a" : "b", i);
        mk_client(ids[i], b);
        free(b);
        team_a += i % 2 == 0;
    }
    /* various spends: client i gets a round of (i % 5) * 20 steps when that is not 0 */
    for (int i = 0; i < LIST_N; i++) {
        if (i % 5 == 0 || i == 4)
            continue;
        api_reply r;
        post_round(&r, NULL,
                   "{\"round_id\":\"ledger_list_clients-r%02d\",\"event\":{\"class_name\":"
                   "\"SelfComposedDpEvent\",\"count\":%d,\"event\":" SG_STEP
                   "},\"participants\":[\"%s\"]}",
                   i, (i % 5) * 20, ids[i]);
        CHECKF(r.status == 200 && jint_is(r.json, "charged", 1), "%.300s", r.body);
        api_reply_free(&r);
    }
    /* team a by spent, descending, 5 a page, following the cursor */
    int seen[LIST_N] = {0}, pages = 0, visited = 0;
    double last = HUGE_VAL;
    char cursor[64] = "";
    for (;;) {
        char path[256];
        snprintf(path, sizeof path, "/v1/clients?label=team=a&sort=spent&order=desc&limit=5%s%s",
                 cursor[0] ? "&cursor=" : "", cursor);
        api_reply r;
        hreq("GET", path, NULL, NULL, &r, NULL);
        CHECKF(r.status == 200, "%s: %ld %.300s", path, r.status, r.body);
        pages++;
        CHECK(jint_is(r.json, "total", team_a));
        json_t *arr = jget(r.json, "clients"), *c;
        size_t i;
        CHECK(json_array_size(arr) == (pages == 1 ? 5 : (size_t)(team_a - 5)));
        json_array_foreach(arr, i, c)
        {
            CHECK(str_is(c, "labels.team", "a"));
            const char *cid = json_string_value(json_object_get(c, "id"));
            int k = cid ? atoi(cid + strlen("ledger_list_clients-")) : -1;
            CHECKF(k >= 0 && k < LIST_N && strcmp(ids[k], cid) == 0, "id '%s'", cid);
            if (k >= 0 && k < LIST_N)
                seen[k]++;
            visited++;
            double s = jnum(c, "spent.epsilon");
            CHECKF(s <= last, "spent %.17g after %.17g", s, last);
            last = s;
        }
        json_t *next = jget(r.json, "next_cursor");
        if (pages == 1)
            CHECK(json_is_string(next));
        if (!json_is_string(next) || pages > 5) {
            CHECK(json_is_null(next));
            api_reply_free(&r);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", json_string_value(next));
        api_reply_free(&r);
    }
    CHECK(pages == 2 && visited == team_a);
    for (int i = 0; i < LIST_N; i++)
        CHECKF(seen[i] == (i % 2 == 0), "client %d seen %d times", i, seen[i]);

    /* status filter */
    api_reply r;
    hreq("GET", "/v1/clients?label=team=a&status=exhausted", NULL, NULL, &r, NULL);
    CHECK(r.status == 200 && jint_is(r.json, "total", 1));
    CHECK(str_is(r.json, "clients[0].id", ids[4]) &&
          str_is(r.json, "clients[0].status", "exhausted"));
    CHECK(json_is_null(jget(r.json, "next_cursor")));
    api_reply_free(&r);
    hreq("GET", "/v1/clients?label=team=a&status=active&limit=1000", NULL, NULL, &r, NULL);
    CHECK(r.status == 200 && jint_is(r.json, "total", team_a - 1));
    api_reply_free(&r);
    hreq("GET", "/v1/clients?label=team=b&sort=id", NULL, NULL, &r, NULL);
    CHECK(r.status == 200 && jint_is(r.json, "total", LIST_N - team_a));
    CHECK(str_is(r.json, "clients[0].id", ids[1]));
    api_reply_free(&r);
    /* sort by remaining, ascending: the exhausted client (remaining 0) first */
    hreq("GET", "/v1/clients?label=team=a&sort=remaining&order=asc&limit=2", NULL, NULL, &r, NULL);
    CHECK(r.status == 200 && str_is(r.json, "clients[0].id", ids[4]));
    CHECK(jnum(r.json, "clients[0].remaining.epsilon") <=
          jnum(r.json, "clients[1].remaining.epsilon"));
    api_reply_free(&r);
    hreq("GET", "/v1/clients?label=team=c", NULL, NULL, &r, NULL);
    CHECK(r.status == 200 && jint_is(r.json, "total", 0));
    CHECK(json_array_size(jget(r.json, "clients")) == 0);
    api_reply_free(&r);

    /* bad parameters */
    static const struct {
        const char *q, *field;
    } bad[] = {
        {"sort=name", "sort"},    {"sort=", "sort"},         {"order=up", "order"},
        {"limit=0", "limit"},     {"limit=1001", "limit"},   {"limit=-1", "limit"},
        {"limit=5x", "limit"},    {"cursor=abc", "cursor"},  {"cursor=o", "cursor"},
        {"cursor=o-1", "cursor"}, {"status=gone", "status"}, {"label=team", "label"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/clients?%s", bad[i].q);
        hreq("GET", path, NULL, NULL, &r, NULL);
        CHECKF(is_problem(&r, 400, "invalid_parameter", bad[i].field), "%s", path);
        api_reply_free(&r);
    }

    /* ETag / 304 on the list; a round changes it */
    hx h;
    const char *lp = "/v1/clients?label=team=a&sort=spent&order=desc&limit=5";
    hreq("GET", lp, NULL, NULL, &r, &h);
    CHECK(r.status == 200 && h.etag[0]);
    char etag[64];
    snprintf(etag, sizeof etag, "%s", h.etag);
    api_reply_free(&r);
    hreq("GET", lp, NULL, etag, &r, &h);
    CHECK(r.status == 304 && r.body_len == 0);
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_list_clients-etag\",\"event\":" G5
               ",\"participants\":[\"%s\"]}",
               ids[0]);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    api_reply_free(&r);
    hreq("GET", lp, NULL, etag, &r, &h);
    CHECKF(r.status == 200, "after a round: %ld", r.status);
    CHECK(h.etag[0] && strcmp(h.etag, etag) != 0);
    api_reply_free(&r);
}

/* ---- 12. summary ----------------------------------------------------------------------------- */

typedef struct {
    long long clients, active, exhausted, uncertified, rounds, hist[11], hist_sum;
    long long stuck;
    char etag[64];
} summ;

static void get_summary(summ *s)
{
    api_reply r;
    hx h;
    memset(s, 0, sizeof *s);
    hreq("GET", "/v1/summary", NULL, NULL, &r, &h);
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    snprintf(s->etag, sizeof s->etag, "%s", h.etag);
    s->clients = (long long)jnum(r.json, "clients");
    s->active = (long long)jnum(r.json, "by_status.active");
    s->exhausted = (long long)jnum(r.json, "by_status.exhausted");
    s->uncertified = (long long)jnum(r.json, "by_status.uncertified");
    s->stuck = (long long)jnum(r.json, "by_status.stuck");
    s->rounds = (long long)jnum(r.json, "rounds");
    json_t *hist = jget(r.json, "spent_fraction_histogram");
    CHECK(json_array_size(hist) == 11);
    for (size_t i = 0; i < 11 && i < json_array_size(hist); i++) {
        json_t *b = json_array_get(hist, i);
        s->hist[i] = (long long)jnum(b, "clients");
        s->hist_sum += s->hist[i];
        CHECK(fabs(jnum(b, "from") - (double)i / 10) < 1e-12);
        if (i < 10)
            CHECK(fabs(jnum(b, "to") - (double)(i + 1) / 10) < 1e-12);
        else
            CHECK(str_is(b, "to", "infinite"));
    }
    CHECK(json_is_false(jget(r.json, "read_only")));
    CHECK(json_is_integer(jget(r.json, "log_bytes")) && json_is_integer(jget(r.json, "version")));
    CHECKF(s->active + s->exhausted + s->uncertified + s->stuck == s->clients,
           "by_status %lld + %lld + %lld + %lld != clients %lld", s->active, s->exhausted,
           s->uncertified, s->stuck, s->clients);
    CHECKF(s->hist_sum == s->clients, "histogram sums to %lld, clients %lld", s->hist_sum,
           s->clients);
    api_reply_free(&r);
}

static void ledger_summary(void)
{
    summ s0, s1, s2, s3;
    get_summary(&s0);
    CHECK(s0.etag[0] != '\0');
    api_reply r;
    hx h;
    hreq("GET", "/v1/summary", NULL, s0.etag, &r, &h);
    CHECK(r.status == 304 && r.body_len == 0);
    api_reply_free(&r);
    /* a new client with nothing spent: active, in the first bucket */
    const char *id = "ledger_summary-c";
    mk_client(id, BUDGET(1, 1e-5));
    get_summary(&s1);
    CHECK(s1.clients == s0.clients + 1 && s1.active == s0.active + 1);
    CHECK(s1.hist[0] == s0.hist[0] + 1);
    CHECK(strcmp(s1.etag, s0.etag) != 0);
    hreq("GET", "/v1/summary", NULL, s0.etag, &r, &h);
    CHECK(r.status == 200);
    api_reply_free(&r);
    /* one round of ~0.79 on a budget of 1: bucket 7 */
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_summary-r\",\"event\":" G5 ",\"participants\":[\"%s\"]}",
               id);
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1));
    double f = jnum(r.json, "admitted[0].spent_after");
    api_reply_free(&r);
    get_summary(&s2);
    int b = (int)floor(10 * f);
    CHECK(b >= 0 && b < 10);
    if (b >= 0 && b < 10) {
        CHECK(s2.hist[0] == s1.hist[0] - 1);
        CHECK(s2.hist[b] == s1.hist[b] + 1);
    }
    CHECK(s2.rounds == s1.rounds + 1 && s2.clients == s1.clients);
    /* the honest status: spent 0.79 < 1, but a second round of the same event (~1.1) no
     * longer fits, so the client counts as exhausted already */
    CHECK(s2.exhausted == s1.exhausted + 1 && s2.active == s1.active - 1);
    /* budget below the spend: still exhausted, now in the last bucket */
    mk_client(id, BUDGET(0.5, 1e-5));
    get_summary(&s3);
    CHECK(s3.exhausted == s2.exhausted && s3.active == s2.active);
    CHECK(s3.hist[10] == s2.hist[10] + 1);
}

/* ---- 13. readiness --------------------------------------------------------------------------- */

static void ledger_readyz(void)
{
    api_reply r;
    hreq("GET", "/readyz", NULL, NULL, &r, NULL);
    CHECK(r.status == 200);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECK(str_is(r.json, "status", "ready"));
    CHECK(json_is_true(jget(r.json, "ledger")));
    api_reply_free(&r);
}

/* ---- 14. mixed relations --------------------------------------------------------------------- */

/* A round whose participants use both neighbouring relations: each is charged with its own
 * relation's curve, and the stored answer (replay, GET) equals the first one. */
static void ledger_mixed_relations(void)
{
    const char *ar = "ledger_mixed_relations-ar", *ro = "ledger_mixed_relations-ro";
    mk_client(ar, BUDGET(5, 1e-5));
    mk_client(ro, "{\"budget\":{\"epsilon\":5,\"delta\":1e-5},\"neighboring_relation\":"
                  "\"replace_one\"}");
    const char *body = "{\"round_id\":\"ledger_mixed_relations-r\",\"event\":" G5
                       ",\"participants\":[\"ledger_mixed_relations-ar\","
                       "\"ledger_mixed_relations-ro\"]}";
    api_reply r1, r2, g;
    hx h;
    hreq("POST", "/v1/rounds", body, NULL, &r1, &h);
    CHECKF(r1.status == 200 && jint_is(r1.json, "charged", 2), "%.300s", r1.body);
    double sa = jnum(entry(r1.json, "admitted", ar), "spent_after");
    double so = jnum(entry(r1.json, "admitted", ro), "spent_after");
    CHECKF(so > sa, "replace_one %.17g <= add_or_remove_one %.17g", so, sa);
    CHECK(client_rounds(ar) == 1 && client_rounds(ro) == 1);
    CHECK(client_num(ro, "spent.epsilon") == so);
    hreq("POST", "/v1/rounds", body, NULL, &r2, &h);
    CHECK(r2.status == 200 && h.replayed);
    CHECKF(strcmp(r2.body, r1.body) == 0, "replay %s\n  first %s", r2.body, r1.body);
    hreq("GET", "/v1/rounds/ledger_mixed_relations-r", NULL, NULL, &g, NULL);
    CHECKF(strcmp(g.body, r1.body) == 0, "GET %s\n  first %s", g.body, r1.body);
    api_reply_free(&r1);
    api_reply_free(&r2);
    api_reply_free(&g);
}

/* ---- 15. concurrency ------------------------------------------------------------------------- */

#define CONC_THREADS 8
#define CONC_ROUNDS 40
#define CONC_POOL 10
#define CONC_COHORT 5

typedef struct {
    int t;
    int retry;
    char *body[CONC_ROUNDS];
    char *first[CONC_ROUNDS]; /* the first answers */
    long status[CONC_ROUNDS];
    char *second[CONC_ROUNDS]; /* the answers to the retries */
    int replayed[CONC_ROUNDS];
} conc_worker;

static void *conc_main(void *arg)
{
    conc_worker *w = arg;
    for (int k = 0; k < CONC_ROUNDS; k++) {
        api_reply r;
        hx h;
        hreq("POST", "/v1/rounds", w->body[k], NULL, &r, &h);
        if (w->retry) {
            w->second[k] = r.body;
            w->replayed[k] = h.replayed && r.status == 200;
        } else {
            w->first[k] = r.body;
            w->status[k] = r.status;
        }
        r.body = NULL;
        api_reply_free(&r);
    }
    return NULL;
}

typedef struct {
    double before, after;
} conc_step;

static int cmp_step(const void *a, const void *b)
{
    const conc_step *x = a, *y = b;
    return x->before < y->before ? -1 : x->before > y->before;
}

static void ledger_concurrency(void)
{
    static conc_worker w[CONC_THREADS];
    char ids[CONC_POOL][64];
    double budget[CONC_POOL];
    for (int j = 0; j < CONC_POOL; j++) {
        snprintf(ids[j], sizeof ids[j], "ledger_concurrency-c%d", j);
        budget[j] = 1.5 + 0.25 * j; /* 2 to 5 rounds of G5 */
        char *b = api_fmt("{\"budget\":{\"epsilon\":%.17g,\"delta\":1e-5}}", budget[j]);
        mk_client(ids[j], b);
        free(b);
    }
    for (int t = 0; t < CONC_THREADS; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].t = t;
        for (int k = 0; k < CONC_ROUNDS; k++) {
            int base = t + k;
            w[t].body[k] = api_fmt("{\"round_id\":\"ledger_concurrency-t%d-k%d\",\"event\":" G5
                                   ",\"policy\":\"admit_eligible\",\"participants\":[\"%s\",\"%s\","
                                   "\"%s\",\"%s\",\"%s\"]}",
                                   t, k, ids[base % CONC_POOL], ids[(base + 2) % CONC_POOL],
                                   ids[(base + 4) % CONC_POOL], ids[(base + 6) % CONC_POOL],
                                   ids[(base + 8) % CONC_POOL]);
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        pthread_t th[CONC_THREADS];
        int started[CONC_THREADS] = {0};
        for (int t = 0; t < CONC_THREADS; t++) {
            w[t].retry = pass;
            started[t] = pthread_create(&th[t], NULL, conc_main, &w[t]) == 0;
            CHECK(started[t]);
        }
        for (int t = 0; t < CONC_THREADS; t++)
            if (started[t])
                pthread_join(th[t], NULL);
    }
    /* every answer: 200, at most the budget; collect each client's admitted steps */
    static conc_step steps[CONC_POOL][CONC_THREADS * CONC_ROUNDS];
    int nsteps[CONC_POOL] = {0}, bad_status = 0, bad_replay = 0, total_admitted = 0;
    for (int t = 0; t < CONC_THREADS; t++)
        for (int k = 0; k < CONC_ROUNDS; k++) {
            if (w[t].status[k] != 200) {
                if (bad_status++ < 3)
                    fprintf(stderr, "  %s: t%d k%d: %ld %.200s\n", tl_current, t, k, w[t].status[k],
                            w[t].first[k] ? w[t].first[k] : "");
                continue;
            }
            if (!w[t].replayed[k] || !w[t].second[k] || strcmp(w[t].first[k], w[t].second[k])) {
                if (bad_replay++ < 3)
                    fprintf(stderr, "  %s: t%d k%d replay differs:\n    %s\n    %s\n", tl_current,
                            t, k, w[t].first[k], w[t].second[k] ? w[t].second[k] : "");
            }
            json_t *j = json_loads(w[t].first[k], 0, NULL), *e;
            size_t i;
            json_array_foreach(json_object_get(j, "admitted"), i, e)
            {
                const char *c = json_string_value(json_object_get(e, "client"));
                int p = c ? atoi(c + strlen("ledger_concurrency-c")) : -1;
                if (p < 0 || p >= CONC_POOL)
                    continue;
                conc_step *s = &steps[p][nsteps[p]++];
                s->before = jnum(e, "spent_before");
                s->after = jnum(e, "spent_after");
                CHECKF(s->after <= budget[p], "client %d: spent_after %.17g > %g", p, s->after,
                       budget[p]);
                total_admitted++;
            }
            json_decref(j);
        }
    CHECKF(bad_status == 0, "%d rounds did not answer 200", bad_status);
    CHECKF(bad_replay == 0, "%d retries were not identical replays", bad_replay);
    CHECK(total_admitted > CONC_POOL);
    /* per client: rounds = admitted entries; the admitted steps form one chain from 0 (no two
     * rounds were admitted from the same state) ending at the client's spend */
    for (int p = 0; p < CONC_POOL; p++) {
        api_reply g;
        get_client(ids[p], NULL, &g, NULL);
        double spent = jnum(g.json, "spent.epsilon");
        CHECKF(spent <= budget[p], "client %d spent %.17g > %g", p, spent, budget[p]);
        CHECKF(jint_is(g.json, "rounds", nsteps[p]), "client %d", p);
        api_reply_free(&g);
        qsort(steps[p], (size_t)nsteps[p], sizeof steps[p][0], cmp_step);
        double at = 0.0;
        int chain = 1;
        for (int i = 0; i < nsteps[p]; i++) {
            chain &= steps[p][i].before == at && steps[p][i].after > at;
            at = steps[p][i].after;
        }
        CHECKF(chain, "client %d: the admitted rounds do not chain from 0", p);
        CHECKF(at == spent, "client %d: chain ends at %.17g, spent %.17g", p, at, spent);
        CHECKF(nsteps[p] >= 2, "client %d admitted only %d rounds", p, nsteps[p]);
    }
    for (int t = 0; t < CONC_THREADS; t++)
        for (int k = 0; k < CONC_ROUNDS; k++) {
            free(w[t].body[k]);
            free(w[t].first[k]);
            free(w[t].second[k]);
        }
}

/* ---- privacy filters: a coordinator that adapts ------------------------------------------- */

/* Clients in rdp_filter and gdp_filter mode say which guarantee holds; a coordinator picks each
 * round's noise from the previous answer (the spend it was shown); every admitted charge keeps
 * the filter's theorem true for the realised sequence (checked here from the sigmas sent) and
 * the clients halt before their budget; an event no filter can account is 422, a budget change
 * 409; docs/LEDGER.md's rdp_filter figure (55 rounds of 50 sampled steps at eps 4) is the
 * daemon's. */
static void ledger_filter_adaptive(void)
{
    const char *f = "ledger_filter_adaptive-f", *g = "ledger_filter_adaptive-g",
               *r = "ledger_filter_adaptive-r", *t4 = "ledger_filter_adaptive-t4";
    api_reply rp;
    put_client(f, "{\"budget\":{\"epsilon\":2,\"delta\":1e-5},\"accounting\":\"rdp_filter\"}", &rp,
               NULL);
    CHECKF(rp.status == 201 && str_is(rp.json, "accounting", "rdp_filter") &&
               str_is(rp.json, "guarantee_kind", "adaptive_filter") &&
               jstr(rp.json, "guarantee_reference") != NULL,
           "%.400s", rp.body);
    api_reply_free(&rp);
    mk_client(g, "{\"budget\":{\"epsilon\":2,\"delta\":1e-5},\"accounting\":\"gdp_filter\"}");
    mk_client(r, BUDGET(2, 1e-5));
    get_client(r, NULL, &rp, NULL);
    CHECK(str_is(rp.json, "guarantee_kind", "fixed_sequence_composition"));
    api_reply_free(&rp);
    put_client(f, "{\"budget\":{\"epsilon\":2,\"delta\":1e-5},\"accounting\":\"filter\"}", &rp,
               NULL);
    CHECK(is_problem(&rp, 400, "invalid_parameter", "accounting"));
    api_reply_free(&rp);
    /* an event a filter cannot account: 422 alone, a refusal next to an rdp client */
    post_round(&rp, NULL,
               "{\"round_id\":\"ledger_filter_adaptive-e\",\"event\":" EPOCH_1
               ",\"participants\":[\"%s\",\"%s\"]}",
               f, g);
    CHECKF(is_problem(&rp, 422, "unsupported", "event"), "%.300s", rp.body);
    api_reply_free(&rp);
    post_round(&rp, NULL,
               "{\"round_id\":\"ledger_filter_adaptive-e2\",\"event\":" EPOCH_1
               ",\"participants\":[\"%s\",\"%s\"],\"policy\":\"admit_eligible\"}",
               f, r);
    CHECKF(rp.status == 200 && strcmp(refusal(rp.json, f), "filter_unsupported") == 0, "%.300s",
           rp.body);
    api_reply_free(&rp);
    /* the adaptive coordinator; the rdp_filter's committed orders as docs/FILTERS.md lists them */
    static const double orders[] = {1.5, 2,  2.5, 3,  4,  5,  6,   8,   10,  12,  16,
                                    20,  24, 32,  40, 48, 63, 128, 256, 512, 1024};
    enum { K = sizeof orders / sizeof orders[0] };
    double sum[K] = {0}, mu2 = 0.0, shown = 0.0;
    const double mu_star = 0.50155168916965662; /* mpmath: delta_mu(2) = 1e-5 */
    int halted_f = 0, halted_g = 0;
    for (int t = 0; t < 300 && !(halted_f && halted_g); t++) {
        /* the noise from the last answer: more noise as the spend shown grows */
        double sigma = 8.0 + 8.0 * shown + (t % 3);
        post_round(&rp, NULL,
                   "{\"round_id\":\"ledger_filter_adaptive-a%d\",\"policy\":\"admit_eligible\","
                   "\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":%.17g},"
                   "\"participants\":[\"%s\",\"%s\"]}",
                   t, sigma, f, g);
        if (rp.status != 200) {
            CHECKF(0, "round %d: %ld %.300s", t, rp.status, rp.body);
            api_reply_free(&rp);
            break;
        }
        json_t *ef = entry(rp.json, "admitted", f), *eg = entry(rp.json, "admitted", g);
        if (ef) {
            CHECK(str_is(ef, "guarantee_kind", "adaptive_filter") &&
                  str_is(ef, "accounting", "rdp_filter"));
            int fits = 0;
            for (size_t i = 0; i < K; i++) {
                double a = orders[i];
                sum[i] += a / (2.0 * sigma * sigma);
                fits |= sum[i] <= 2.0 - log1p(-1.0 / a) + log(a * 1e-5 / K) / (a - 1.0);
            }
            CHECKF(fits, "round %d: the rdp_filter admitted past every order's budget", t);
            shown = jnum(ef, "spent_after");
            CHECK(shown <= 2.0);
        } else {
            halted_f = strcmp(refusal(rp.json, f), "over_budget") == 0;
        }
        if (eg) {
            CHECK(str_is(eg, "guarantee_kind", "adaptive_filter"));
            mu2 += 1.0 / (sigma * sigma);
            CHECKF(mu2 <= mu_star * mu_star * (1 + 1e-12), "round %d: past mu*", t);
        } else {
            halted_g = strcmp(refusal(rp.json, g), "over_budget") == 0;
        }
        api_reply_free(&rp);
    }
    CHECKF(halted_f && halted_g, "%d %d", halted_f, halted_g);
    CHECK(client_num(f, "spent.epsilon") <= 2.0 && client_num(g, "spent.epsilon") <= 2.0);
    /* the budget of a charged filter client is fixed */
    put_client(f, "{\"budget\":{\"epsilon\":3,\"delta\":1e-5},\"accounting\":\"rdp_filter\"}", &rp,
               NULL);
    CHECK(is_problem(&rp, 409, "conflict", "budget"));
    api_reply_free(&rp);
    /* docs/LEDGER.md: 50 Poisson-sampled steps per round, eps 4: 55 rounds under rdp_filter */
    mk_client(t4, "{\"budget\":{\"epsilon\":4,\"delta\":1e-5},\"accounting\":\"rdp_filter\"}");
    for (int t = 0; t < 60; t++) {
        post_round(&rp, NULL,
                   "{\"round_id\":\"ledger_filter_adaptive-s%d\",\"event\":" SG_STEPS(
                       50) ",\"participants\":[\"%s\"]}",
                   t, t4);
        int charged = rp.status == 200 && jnum(rp.json, "charged") == 1.0;
        api_reply_free(&rp);
        if (!charged)
            break;
    }
    CHECKF(client_rounds(t4) == 55, "%lld rounds", client_rounds(t4));
}

const tl_test LEDGER_API_TESTS[] = {
    TL_T(ledger_client_put_get_etag),
    TL_T(ledger_client_put_validation),
    TL_T(ledger_round_spend_matches_epsilon),
    TL_T(ledger_policies),
    TL_T(ledger_exhaustion),
    TL_T(ledger_dry_run),
    TL_T(ledger_idempotency),
    TL_T(ledger_participants),
    TL_T(ledger_duplicate_entry_values),
    TL_T(ledger_uncertifiable),
    TL_T(ledger_already_ran),
    TL_T(ledger_already_ran_with_unknown),
    TL_T(ledger_pld_mode),
    TL_T(ledger_pld_schedule_matches_compute),
    TL_T(ledger_shuffled_epochs),
    TL_T(ledger_shuffled_tv_reported),
    TL_T(ledger_list_clients),
    TL_T(ledger_summary),
    TL_T(ledger_readyz),
    TL_T(ledger_mixed_relations),
    TL_T(ledger_concurrency),
    TL_T(ledger_filter_adaptive),
    TL_T(ledger_pld_refined),
};
const size_t LEDGER_API_NTESTS = sizeof LEDGER_API_TESTS / sizeof LEDGER_API_TESTS[0];

/* --no-pld-refine: a pld client far from its budget keeps its rdp value (no refinement runs;
 * looked at for 1 s, longer than ledger_pld_refined's refinements take here). */
static void ledger_pld_refine_off(void)
{
    const char *extra[] = {"--no-pld-refine", NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd --no-pld-refine did not start (%d)", st);
    if (st != 0)
        return;
    own_daemon = 1;
#define SGO(sigma)                                                                                 \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":40,\"event\":{\"class_name\":"              \
    "\"PoissonSampledDpEvent\",\"sampling_probability\":0.02,\"event\":{\"class_name\":"           \
    "\"GaussianDpEvent\",\"noise_multiplier\":" #sigma "}}}"
    const char *id = "ledger_pld_refine_off-far";
    mk_client(id, "{\"budget\":{\"epsilon\":50,\"delta\":1e-5},\"accounting\":\"pld\"}");
    api_reply r;
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_refine_off-r1\",\"event\":" SGO(
                   1.19) ",\"participants\":[\"%s\"]}",
               id);
    CHECKF(r.status == 200, "%.300s", r.body);
    api_reply_free(&r);
    post_round(&r, NULL,
               "{\"round_id\":\"ledger_pld_refine_off-r2\",\"event\":" SGO(
                   1.29) ",\"participants\":[\"%s\"]}",
               id);
    CHECKF(r.status == 200, "%.300s", r.body);
    api_reply_free(&r);
    const char *comp = COMPOSED2(SELF(1, SGO(1.19)), SELF(1, SGO(1.29)));
    CHECK(eps_of("pld", comp, 1e-5) < eps_of("rdp", comp, 1e-5));
    for (int i = 0; i < 200; i++) {
        spend_matches_compute(id, comp, "rdp");
        if (tl_failed_checks)
            break;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    CHECK(api_daemon_stop() == 0);
    own_daemon = 0;
#undef SGO
}

const tl_test LEDGER_OWN_TESTS[] = {
    TL_T(ledger_pld_refine_off),
};
const size_t LEDGER_OWN_NTESTS = sizeof LEDGER_OWN_TESTS / sizeof LEDGER_OWN_TESTS[0];
