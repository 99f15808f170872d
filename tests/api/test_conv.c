/* test_conv.c - the conventions an operator's tooling expects (issue 37): reads with an ETag
 * are revalidable (Cache-Control: private, no-cache; If-None-Match as RFC 9110 reads it, 304
 * with the same headers), everything else is no-store; OPTIONS is 204 with Allow on every
 * routed path, without a key; CORS only for the origins of --cors-origin, exactly; a valid
 * W3C traceparent's ids in the request's log line, an invalid one ignored. CONV_TESTS use the
 * main daemon (no keys, no CORS); CONV_OWN_TESTS start their own. The pure parts
 * (http_etag_match, tracectx_parse, cors_origin_check) are called directly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "../../server/auth.h"
#include "../../server/cors.h"
#include "../../server/http.h"
#include "../../server/resources.h"
#include "../../server/tracectx.h"
#include "check.h"
#include "suites.h"

/* ---------------------------------------------------------------- one exchange, all headers */

typedef struct {
    api_reply r;     /* status, body, content type, allow... (for the contract log too) */
    char head[8192]; /* every response header line, "\r\n" ended */
    size_t hn;
} cx;

static size_t cx_head(char *p, size_t size, size_t n, void *cls)
{
    cx *x = cls;
    size_t k = size * n;
    if (strncmp(p, "HTTP/", 5) == 0) /* a new response (after a 100): its headers only */
        x->hn = 0;
    if (x->hn + k < sizeof x->head) {
        memcpy(x->head + x->hn, p, k);
        x->hn += k;
        x->head[x->hn] = '\0';
    }
    return k;
}

static size_t cx_body(char *p, size_t size, size_t n, void *cls)
{
    api_reply *r = cls;
    size_t k = size * n;
    char *b = realloc(r->body, r->body_len + k + 1);
    if (b == NULL)
        return 0;
    memcpy(b + r->body_len, p, k);
    r->body = b;
    r->body_len += k;
    b[r->body_len] = '\0';
    return k;
}

/* The value of header name in x (the first line), into buf; NULL when absent. */
static const char *cx_get(const cx *x, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    for (const char *p = x->head; p && *p; p = strstr(p, "\r\n") ? strstr(p, "\r\n") + 2 : NULL) {
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1, *e = strstr(v, "\r\n");
            while (*v == ' ')
                v++;
            size_t len = e ? (size_t)(e - v) : strlen(v);
            snprintf(buf, cap, "%.*s", (int)len, v);
            return buf;
        }
    }
    return NULL;
}

/* 1 when header name is absent from x. */
static int cx_absent(const cx *x, const char *name)
{
    char b[8];
    return cx_get(x, name, b, sizeof b) == NULL;
}

/* 1 when header name of x is exactly want. */
static int cx_is(const cx *x, const char *name, const char *want)
{
    char b[512];
    const char *v = cx_get(x, name, b, sizeof b);
    if (v && strcmp(v, want) == 0)
        return 1;
    fprintf(stderr, "    %s: '%s', want '%s'\n", name, v ? v : "(absent)", want);
    return 0;
}

/* method path with the extra request headers hdrs (NULL-terminated; may be NULL) and a JSON
 * body (may be NULL); logged for the contract check as api_call does. */
static void cx_call(const char *method, const char *path, const char *const *hdrs, const char *body,
                    cx *x)
{
    memset(x, 0, sizeof *x);
    x->r.body = calloc(1, 1);
    char url[512];
    snprintf(url, sizeof url, "%s%s", api_get_base(), path);
    CURL *h = curl_easy_init();
    if (h == NULL)
        return;
    struct curl_slist *sl = NULL;
    for (size_t i = 0; hdrs && hdrs[i]; i++)
        sl = curl_slist_append(sl, hdrs[i]);
    if (body)
        sl = curl_slist_append(sl, "Content-Type: application/json");
    sl = curl_slist_append(sl, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, sl);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cx_head);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cx_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x->r);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    x->r.curl_code = (int)curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x->r.status);
    curl_easy_cleanup(h);
    curl_slist_free_all(sl);
    char b[128];
    snprintf(x->r.content_type, sizeof x->r.content_type, "%s",
             cx_get(x, "Content-Type", b, sizeof b) ? b : "");
    snprintf(x->r.allow, sizeof x->r.allow, "%s", cx_get(x, "Allow", b, sizeof b) ? b : "");
    snprintf(x->r.retry_after, sizeof x->r.retry_after, "%s",
             cx_get(x, "Retry-After", b, sizeof b) ? b : "");
    snprintf(x->r.www_authenticate, sizeof x->r.www_authenticate, "%s",
             cx_get(x, "WWW-Authenticate", b, sizeof b) ? b : "");
    api_record_exchange(method, path, body ? "application/json" : NULL, body,
                        body ? strlen(body) : 0, &x->r);
}

static void cx_free(cx *x)
{
    free(x->r.body);
    x->r.body = NULL;
}

/* ---------------------------------------------------------------- caching */

#define ROUND_BODY(id, who)                                                                        \
    "{\"round_id\":\"" id "\",\"event\":{\"class_name\":\"GaussianDpEvent\","                      \
    "\"noise_multiplier\":5},\"participants\":[\"" who "\"]}"

/* Before: every answer said Cache-Control: no-store next to its ETag, and If-None-Match was
 * compared as one string (a weak tag, a list or * answered 200 with the whole body). Now the
 * four reads with an ETag say private, no-cache, answer 304 for every form RFC 9110 makes a
 * match, with the same ETag and caching headers and no body, and 200 otherwise; writes,
 * problems, computations and probes stay no-store. */
static void reads_with_an_etag_are_revalidable(void)
{
    cx x;
    cx_call("PUT", "/v1/clients/conv-c1", NULL, "{\"budget\":{\"epsilon\":8,\"delta\":1e-5}}", &x);
    CHECKF(x.r.status == 201 || x.r.status == 200, "PUT: %ld %s", x.r.status, x.r.body);
    CHECK(cx_is(&x, "Cache-Control", "no-store")); /* a write, though it has an ETag */
    cx_free(&x);
    cx_call("POST", "/v1/rounds", NULL, ROUND_BODY("conv-r1", "conv-c1"), &x);
    CHECKF(x.r.status == 200 || x.r.status == 201, "round: %ld %s", x.r.status, x.r.body);
    CHECK(cx_is(&x, "Cache-Control", "no-store"));
    cx_free(&x);
    static const char *const reads[] = {"/v1/clients/conv-c1", "/v1/clients", "/v1/rounds/conv-r1",
                                        "/v1/summary"};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        cx_call("GET", reads[i], NULL, NULL, &x);
        char etag[64] = "";
        cx_get(&x, "ETag", etag, sizeof etag);
        CHECKF(x.r.status == 200 && etag[0] == '"', "GET %s: %ld, ETag '%s'", reads[i], x.r.status,
               etag);
        CHECKF(cx_is(&x, "Cache-Control", "private, no-cache"), "GET %s", reads[i]);
        CHECKF(cx_absent(&x, "Vary"), "GET %s: Vary without keys or CORS", reads[i]);
        cx_free(&x);
        char bare[64];
        snprintf(bare, sizeof bare, "%.*s", (int)strlen(etag) - 2, etag + 1);
        char match[][160] = {"", "", "", "", "", ""}, miss[][160] = {"", "", "", "", ""};
        snprintf(match[0], 160, "If-None-Match: %s", etag);
        snprintf(match[1], 160, "If-None-Match: W/%s", etag);
        snprintf(match[2], 160, "If-None-Match: \"zz\", %s", etag);
        snprintf(match[3], 160, "If-None-Match: W/\"zz\",W/%s , \"yy\"", etag);
        snprintf(match[4], 160, "If-None-Match: *");
        snprintf(match[5], 160, "If-None-Match: ,, %s,", etag);
        snprintf(miss[0], 160, "If-None-Match: \"zz\"");
        snprintf(miss[1], 160, "If-None-Match: %s", bare);      /* no quotes: not a tag */
        snprintf(miss[2], 160, "If-None-Match: w/%s", etag);    /* W is case-sensitive */
        snprintf(miss[3], 160, "If-None-Match: \"%sx\"", bare); /* another tag */
        snprintf(miss[4], 160, "If-None-Match: %s junk", etag); /* not a list: ignored */
        for (size_t m = 0; m < 6; m++)
            for (int head = 0; head < 2; head++) {
                const char *h[] = {match[m], NULL};
                cx_call(head ? "HEAD" : "GET", reads[i], h, NULL, &x);
                CHECKF(x.r.status == 304 && x.r.body_len == 0, "%s %s [%s]: %ld (%zu bytes)",
                       head ? "HEAD" : "GET", reads[i], match[m], x.r.status, x.r.body_len);
                CHECKF(cx_is(&x, "ETag", etag) && cx_is(&x, "Cache-Control", "private, no-cache"),
                       "304 of %s [%s]", reads[i], match[m]);
                cx_free(&x);
            }
        for (size_t m = 0; m < 5; m++) {
            const char *h[] = {miss[m], NULL};
            cx_call("GET", reads[i], h, NULL, &x);
            CHECKF(x.r.status == 200 && x.r.body_len > 0, "GET %s [%s]: %ld", reads[i], miss[m],
                   x.r.status);
            cx_free(&x);
        }
        /* a list split over two field lines is one list (RFC 9110 5.3) */
        const char *two[] = {"If-None-Match: \"zz\"", match[0], NULL};
        cx_call("GET", reads[i], two, NULL, &x);
        CHECKF(x.r.status == 304, "GET %s with two If-None-Match lines: %ld", reads[i], x.r.status);
        cx_free(&x);
    }
    /* never stored: a problem, a computation, a probe, a read without an ETag */
    const struct {
        const char *method, *path, *body;
        long status;
    } never[] = {
        {"GET", "/v1/clients/conv-nobody", NULL, 404},
        {"POST", "/v1/epsilon",
         "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1},\"delta\":1e-5}",
         200},
        {"GET", "/healthz", NULL, 200},
        {"GET", "/v1/accountants", NULL, 200},
        {"GET", "/v1/clients/conv-c1/rounds", NULL, 200},
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        const char *h[] = {"If-None-Match: *", NULL};
        cx_call(never[i].method, never[i].path, h, never[i].body, &x);
        CHECKF(x.r.status == never[i].status, "%s %s: %ld %s", never[i].method, never[i].path,
               x.r.status, x.r.body);
        CHECKF(cx_is(&x, "Cache-Control", "no-store"), "%s %s", never[i].method, never[i].path);
        cx_free(&x);
    }
}

/* Before: http_etag_match did not exist (If-None-Match was one strcmp). RFC 9110 13.1.2's
 * weak comparison over "*" or a list of entity-tags; anything else matches nothing. */
static void etag_comparison_follows_rfc9110(void)
{
    const char *e = "\"c12\"";
    const struct {
        const char *field;
        int match;
    } c[] = {
        {"\"c12\"", 1},
        {"W/\"c12\"", 1},
        {" \"c12\" ", 1},
        {"\"a\", \"c12\"", 1},
        {"\"a\",\"c12\",\"b\"", 1},
        {"*", 1},
        {" * ", 1},
        {",\"c12\"", 1},
        {"\"c12\",", 1},
        {"\"c1\"", 0},
        {"\"c123\"", 0},
        {"c12", 0},
        {"\"c12", 0},
        {"w/\"c12\"", 0},
        {"W/ \"c12\"", 0},
        {"\"c12\" \"c12\"", 0},
        {"*, \"c12\"", 0},
        {"\"a\" x, \"c12\"", 0},
        {"", 0},
        {",", 0},
        {"\"c\x01\"", 0},
        {"\"\"", 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        CHECKF(http_etag_match(c[i].field, e) == c[i].match, "If-None-Match '%s': %d, want %d",
               c[i].field, http_etag_match(c[i].field, e), c[i].match);
    CHECK(http_etag_match(NULL, e) == 0);
    CHECK(http_etag_match("\"\"", "\"\"") == 1);
    /* a hostile length is read once, without a copy */
    size_t n = 1 << 20;
    char *big = malloc(n + 8);
    if (big) {
        for (size_t i = 0; i < n; i += 4)
            memcpy(big + i, "\"x\",", 4);
        memcpy(big + n, "\"c12\"", 6);
        CHECK(http_etag_match(big, e) == 1);
        big[n + 2] = '2'; /* "c22": no match anywhere */
        CHECK(http_etag_match(big, e) == 0);
        free(big);
    }
}

/* ---------------------------------------------------------------- OPTIONS */

/* Before: OPTIONS on any path was 405 method_not_allowed (401 with keys: a browser's
 * preflight, which never carries a key, failed). Now every routed path answers 204 with
 * Allow (its methods, HEAD and OPTIONS), no body, no-store, on a kept-alive connection;
 * without CORS no Access-Control-* header, whatever the Origin; an unrouted path stays 404. */
static void options_is_204_with_allow(void)
{
    for (const route *r = ROUTES; r->method; r++) {
        char path[96];
        snprintf(path, sizeof path, "%s%s%s", r->path, r->prefix ? "x1" : "",
                 r->suffix ? r->suffix : "");
        const char *h[] = {"Origin: https://dash.example.org", "Access-Control-Request-Method: GET",
                           NULL};
        cx x;
        cx_call("OPTIONS", path, h, NULL, &x);
        char allow[96] = "";
        cx_get(&x, "Allow", allow, sizeof allow);
        CHECKF(x.r.status == 204 && x.r.body_len == 0, "OPTIONS %s: %ld %s", path, x.r.status,
               x.r.body);
        CHECKF(strstr(allow, r->method) && strstr(allow, "OPTIONS"), "OPTIONS %s: Allow '%s'", path,
               allow);
        CHECKF(cx_is(&x, "Cache-Control", "no-store"), "OPTIONS %s", path);
        CHECKF(cx_absent(&x, "Access-Control-Allow-Origin") &&
                   cx_absent(&x, "Access-Control-Allow-Methods") && cx_absent(&x, "Vary"),
               "OPTIONS %s: CORS headers without --cors-origin", path);
        CHECKF(cx_absent(&x, "Connection"), "OPTIONS %s: the connection closed", path);
        cx_free(&x);
    }
    cx x;
    cx_call("OPTIONS", "/nothing", NULL, NULL, &x);
    CHECKF(x.r.status == 404 && strstr(x.r.content_type, "problem+json"),
           "OPTIONS /nothing: %ld %s", x.r.status, x.r.content_type);
    cx_free(&x);
    /* the 405 of another method names OPTIONS too */
    cx_call("DELETE", "/v1/summary", NULL, NULL, &x);
    CHECKF(x.r.status == 405 && strcmp(x.r.allow, "GET, HEAD, OPTIONS") == 0, "DELETE: %ld '%s'",
           x.r.status, x.r.allow);
    cx_free(&x);
}

/* ---------------------------------------------------------------- traceparent */

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define PID "00f067aa0ba902b7"

/* Before: tracectx_parse did not exist. Trace Context level 1, strictly. */
static void tracectx_parse_is_strict(void)
{
    const struct {
        const char *v;
        int ok;
    } c[] = {
        {"00-" TID "-" PID "-01", 1},
        {"00-" TID "-" PID "-00", 1},
        {"00-" TID "-" PID "-ff", 1}, /* flags: any two hex digits */
        {"01-" TID "-" PID "-01", 1}, /* a later version, 55 long */
        {"cc-" TID "-" PID "-01-what-the-future-holds", 1},
        {"fe-" TID "-" PID "-09-", 1},
        {"ff-" TID "-" PID "-01", 0},  /* version ff: never valid */
        {"00-" TID "-" PID "-01-", 0}, /* version 00 is exactly 55 */
        {"00-" TID "-" PID "-01x", 0},
        {"cc-" TID "-" PID "-01x", 0}, /* later version: a '-' after the flags */
        {"00-" TID "-" PID "-1", 0},
        {"00-" TID "-" PID, 0},
        {"00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01", 0}, /* uppercase */
        {"00-" TID "-00F067AA0BA902B7-01", 0},
        {"0A-" TID "-" PID "-01", 0},
        {"00-" TID "-" PID "-0A", 0},
        {"00-00000000000000000000000000000000-" PID "-01", 0},
        {"00-" TID "-0000000000000000-01", 0},
        {"00-4bf92f3577b34da6a3ce929d0e0e473g-" PID "-01", 0}, /* non-hex */
        {"00_" TID "-" PID "-01", 0},
        {"00-" TID "_" PID "-01", 0},
        {"00-" TID "-" PID "_01", 0},
        {" 00-" TID "-" PID "-01", 0},
        {"00-" TID "-" PID "-01 ", 0},
        {"", 0},
        {"0", 0},
        {"00-" TID "-" PID "-\x01\x02", 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        tracectx t;
        int ok = tracectx_parse(c[i].v, &t);
        CHECKF(ok == c[i].ok, "traceparent '%s': %d, want %d", c[i].v, ok, c[i].ok);
        if (ok)
            CHECKF(strcmp(t.trace_id, TID) == 0 && strcmp(t.parent_id, PID) == 0, "ids of '%s'",
                   c[i].v);
        else
            CHECKF(t.trace_id[0] == '\0' && t.parent_id[0] == '\0', "ids of invalid '%s'", c[i].v);
    }
    tracectx t;
    CHECK(tracectx_parse(NULL, &t) == 0);
    /* overlong: version 00 refused, a later version read (what follows is its own) */
    char big[9000];
    snprintf(big, sizeof big, "00-" TID "-" PID "-01-");
    memset(big + strlen(big), 'a', sizeof big - 1 - strlen(big));
    big[sizeof big - 1] = '\0';
    CHECK(tracectx_parse(big, &t) == 0);
    big[0] = '4';
    big[1] = '2';
    CHECK(tracectx_parse(big, &t) == 1 && strcmp(t.trace_id, TID) == 0);
}

/* The request log line of the request whose id is id (NULL when not found within 2 s),
 * parsed. */
static json_t *log_line_of(const char *id)
{
    char want[96];
    snprintf(want, sizeof want, "\"request_id\":\"%s\"", id);
    for (int tries = 0; tries < 40; tries++) {
        FILE *f = fopen(api_daemon_log(), "r");
        char line[2048];
        while (f && fgets(line, sizeof line, f))
            if (strstr(line, want)) {
                fclose(f);
                return json_loads(line, 0, NULL);
            }
        if (f)
            fclose(f);
        usleep(50000); /* lines reach the log up to REQLOG_FLUSH_MS late */
    }
    return NULL;
}

/* Before: traceparent was ignored: no trace id in any log line. Now a valid one puts
 * "trace_id" and "parent_id" in the request's line; invalid, hostile (overlong, non-hex,
 * uppercase, zeros) or repeated ones are ignored: the request is served the same, the line
 * has no trace fields, and stays valid JSON. */
static void traceparent_ids_in_the_log_line(void)
{
    static char overlong[12000];
    snprintf(overlong, sizeof overlong, "traceparent: 00-" TID "-" PID "-01");
    memset(overlong + strlen(overlong), 'f', sizeof overlong - 1 - strlen(overlong));
    overlong[sizeof overlong - 1] = '\0';
    const struct {
        const char *h1, *h2;
        int valid;
    } c[] = {
        {"traceparent: 00-" TID "-" PID "-01", NULL, 1},
        {"traceparent: 7f-" TID "-" PID "-01-extra-fields", NULL, 1},
        {"TraceParent: 00-" TID "-" PID "-00", NULL, 1}, /* field names are case-insensitive */
        {"traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01", NULL, 0},
        {"traceparent: 00-00000000000000000000000000000000-" PID "-01", NULL, 0},
        {"traceparent: 00-" TID "-" PID "-zz", NULL, 0},
        {"traceparent: ff-" TID "-" PID "-01", NULL, 0},
        {"traceparent: 00-\"},\"x\":\"" TID "-" PID "-01", NULL, 0},
        {overlong, NULL, 0},
        {"traceparent: 00-" TID "-" PID "-01", "traceparent: 00-" TID "-" PID "-01", 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char rid[64];
        snprintf(rid, sizeof rid, "X-Request-Id: conv-trace-%zu-%d", i, (int)getpid());
        const char *h[] = {rid, c[i].h1, c[i].h2, NULL};
        cx x;
        cx_call("GET", "/v1/summary", h, NULL, &x);
        CHECKF(x.r.status == 200, "traceparent case %zu: %ld %s", i, x.r.status, x.r.body);
        cx_free(&x);
        json_t *line = log_line_of(rid + strlen("X-Request-Id: "));
        CHECKF(line != NULL, "case %zu: no log line (or not JSON) for %s", i, rid);
        if (line == NULL)
            continue;
        if (c[i].valid) {
            CHECKF(api_str_is(line, "trace_id", TID), "case %zu", i);
            CHECKF(api_str_is(line, "parent_id", PID), "case %zu", i);
        } else {
            CHECKF(json_object_get(line, "trace_id") == NULL &&
                       json_object_get(line, "parent_id") == NULL,
                   "case %zu (%.60s): trace fields from an invalid traceparent", i, c[i].h1);
        }
        json_decref(line);
    }
}

/* ---------------------------------------------------------------- CORS */

/* Before: cors.h did not exist. Origins as browsers serialize them, exactly. */
static void cors_origins_are_exact(void)
{
    const struct {
        const char *o;
        int ok;
    } c[] = {
        {"https://dash.example.org", 1},
        {"http://127.0.0.1:3000", 1},
        {"http://localhost:8080", 1},
        {"https://[::1]:8443", 1},
        {"https://a-b.c9.example", 1},
        {"https://dash.example.org/", 0},
        {"https://dash.example.org/ui", 0},
        {"https://Dash.example.org", 0},
        {"HTTPS://dash.example.org", 0},
        {"ftp://dash.example.org", 0},
        {"dash.example.org", 0},
        {"*", 0},
        {"null", 0},
        {"https://", 0},
        {"https://:443", 0},
        {"https://x.org:0", 0},
        {"https://x.org:65536", 0},
        {"https://x.org:080", 0},
        {"https://x.org:", 0},
        {"https://user@x.org", 0},
        {"https://x..org", 0},
        {"https://.x.org", 0},
        {"https://x.org.", 0},
        {"https://[::1", 0},
        {"https://x.org:443x", 0},
    };
    char err[512];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int ok = cors_origin_check(c[i].o, strlen(c[i].o), err, sizeof err) == 0;
        CHECKF(ok == c[i].ok, "origin '%s': %d, want %d (%s)", c[i].o, ok, c[i].ok, ok ? "" : err);
    }
    static cors_list l;
    memset(&l, 0, sizeof l);
    CHECK(cors_add(&l, "https://a.example, http://b.example:81 https://a.example", err,
                   sizeof err) == 0);
    CHECK(l.n == 2);
    CHECK(cors_allows(&l, "https://a.example") && cors_allows(&l, "http://b.example:81"));
    CHECK(!cors_allows(&l, "http://a.example") && !cors_allows(&l, "https://a.example:443") &&
          !cors_allows(&l, "https://a.example/") && !cors_allows(&l, "https://A.example") &&
          !cors_allows(&l, NULL) && !cors_allows(NULL, "https://a.example"));
    CHECK(cors_add(&l, " , ", err, sizeof err) != 0);
    for (int i = 0; i < CORS_MAX_ORIGINS - 2; i++) {
        char o[64];
        snprintf(o, sizeof o, "https://o%d.example", i);
        CHECK(cors_add(&l, o, err, sizeof err) == 0);
    }
    CHECK(cors_add(&l, "https://one-too-many.example", err, sizeof err) != 0);
}

#define READ_TOKEN "reader-token-1"
static const char KEYS[] =
    "8ed7a3cb498a69b97157eb5c685b8831eabdc118fce9a4c75425920ab3ddf6e0 read reader\n";
#define DASH "https://dash.example.org"

/* The keys file in a fresh directory (dir: 64 bytes, keys: 96). 0, or -1. */
static int write_keys(char *dir, char *keys)
{
    snprintf(dir, 64, "/tmp/dpb-conv-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(keys, 96, "%s/keys", dir);
    FILE *f = fopen(keys, "w");
    if (f == NULL)
        return -1;
    fputs(KEYS, f);
    fclose(f);
    return 0;
}

/* Before: no Access-Control-* header was ever sent and a preflight got 401 (keys) or 405.
 * Now with --cors-origin A --cors-origin B and keys: a preflight from A, without a key and
 * outside the rate limit, is 204 with the methods, headers and max age; a call from A gets
 * Access-Control-Allow-Origin: A and the headers a dashboard reads, errors (401, 429)
 * included; another origin (or A with a slash, another case or port) gets no
 * Access-Control-* at all; every answer says Vary: Origin, a read's also Authorization. */
static void cors_for_listed_origins_only(void)
{
    char dir[64], keys[96];
    if (write_keys(dir, keys) != 0) {
        CHECK(0);
        return;
    }
    const char *extra[] = {"--api-keys",
                           keys,
                           "--rate-limit",
                           "0.01",
                           "--cors-origin",
                           DASH,
                           "--cors-origin",
                           "http://127.0.0.1:3000",
                           NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st == 0) {
        cx x;
        for (int i = 0; i < 5; i++) { /* preflights: no key, no token of the bucket spent */
            const char *h[] = {"Origin: " DASH, "Access-Control-Request-Method: GET",
                               "Access-Control-Request-Headers: authorization, if-none-match",
                               NULL};
            cx_call("OPTIONS", "/v1/clients/c1", h, NULL, &x);
            CHECKF(x.r.status == 204, "preflight: %ld %s", x.r.status, x.r.body);
            CHECK(cx_is(&x, "Access-Control-Allow-Origin", DASH));
            CHECK(cx_is(&x, "Access-Control-Allow-Methods", "GET, HEAD, PUT, OPTIONS"));
            CHECK(cx_is(&x, "Access-Control-Allow-Headers", CORS_ALLOW_HEADERS));
            CHECK(cx_is(&x, "Access-Control-Max-Age", "7200"));
            CHECK(cx_is(&x, "Vary", "Origin"));
            CHECK(cx_absent(&x, "Access-Control-Allow-Credentials"));
            cx_free(&x);
        }
        /* the second origin, on a write's path */
        const char *h2[] = {"Origin: http://127.0.0.1:3000", "Access-Control-Request-Method: POST",
                            NULL};
        cx_call("OPTIONS", "/v1/rounds", h2, NULL, &x);
        CHECK(x.r.status == 204 &&
              cx_is(&x, "Access-Control-Allow-Origin", "http://127.0.0.1:3000"));
        CHECK(cx_is(&x, "Access-Control-Allow-Methods", "POST, OPTIONS"));
        cx_free(&x);
        /* origins that are not exactly a listed one */
        static const char *const others[] = {
            "Origin: https://evil.example.org", "Origin: " DASH "/",
            "Origin: https://DASH.example.org", "Origin: " DASH ":443", "Origin: null"};
        for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
            const char *h[] = {others[i], "Access-Control-Request-Method: GET", NULL};
            cx_call("OPTIONS", "/v1/summary", h, NULL, &x);
            CHECKF(x.r.status == 204 && strcmp(x.r.allow, "GET, HEAD, OPTIONS") == 0,
                   "%s: %ld '%s'", others[i], x.r.status, x.r.allow);
            CHECKF(cx_absent(&x, "Access-Control-Allow-Origin") &&
                       cx_absent(&x, "Access-Control-Allow-Methods") &&
                       cx_absent(&x, "Access-Control-Max-Age"),
                   "%s got CORS headers", others[i]);
            CHECK(cx_is(&x, "Vary", "Origin"));
            cx_free(&x);
        }
        /* a plain OPTIONS (no Access-Control-Request-Method): ACAO, no preflight headers */
        const char *plain[] = {"Origin: " DASH, NULL};
        cx_call("OPTIONS", "/v1/summary", plain, NULL, &x);
        CHECK(x.r.status == 204 && cx_is(&x, "Access-Control-Allow-Origin", DASH) &&
              cx_absent(&x, "Access-Control-Allow-Methods"));
        cx_free(&x);
        /* no key, from the dashboard: the 401 is readable by the page */
        cx_call("GET", "/v1/summary", plain, NULL, &x);
        CHECKF(x.r.status == 401, "no key: %ld", x.r.status);
        CHECK(cx_is(&x, "Access-Control-Allow-Origin", DASH));
        CHECK(cx_is(&x, "Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS));
        CHECK(cx_is(&x, "Cache-Control", "no-store"));
        cx_free(&x);
        /* with the key: the bucket's one token is still there after the preflights */
        const char *keyed[] = {"Origin: " DASH, "Authorization: Bearer " READ_TOKEN, NULL};
        cx_call("GET", "/v1/summary", keyed, NULL, &x);
        CHECKF(x.r.status == 200, "keyed read after 5 preflights: %ld %s", x.r.status, x.r.body);
        CHECK(cx_is(&x, "Access-Control-Allow-Origin", DASH));
        CHECK(strstr(CORS_EXPOSE_HEADERS, "ETag") && strstr(CORS_EXPOSE_HEADERS, "Retry-After") &&
              strstr(CORS_EXPOSE_HEADERS, "Ledger-Read-Only"));
        CHECK(cx_is(&x, "Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS));
        CHECK(cx_is(&x, "Cache-Control", "private, no-cache"));
        CHECK(cx_is(&x, "Vary", "Authorization, Origin"));
        cx_free(&x);
        cx_call("GET", "/v1/summary", keyed, NULL, &x); /* the bucket is empty now */
        CHECKF(x.r.status == 429, "second keyed read: %ld", x.r.status);
        CHECK(cx_is(&x, "Access-Control-Allow-Origin", DASH));
        cx_free(&x);
        const char *evil[] = {"Origin: https://evil.example.org",
                              "Authorization: Bearer " READ_TOKEN, NULL};
        cx_call("GET", "/healthz", evil, NULL, &x);
        CHECK(x.r.status == 200 && cx_absent(&x, "Access-Control-Allow-Origin") &&
              cx_absent(&x, "Access-Control-Expose-Headers") && cx_is(&x, "Vary", "Origin"));
        cx_free(&x);
        st = api_daemon_stop();
        CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
    }
    unlink(keys);
    rmdir(dir);
}

/* 1 when the daemon's log holds s. */
static int log_has(const char *s)
{
    FILE *f = fopen(api_daemon_log(), "r");
    if (f == NULL)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, s) != NULL;
    fclose(f);
    return found;
}

/* 1 when Origin o gets Access-Control-Allow-Origin from the running daemon. */
static int allowed(const char *o)
{
    char h0[160];
    snprintf(h0, sizeof h0, "Origin: %s", o);
    const char *h[] = {h0, "Access-Control-Request-Method: GET", NULL};
    cx x;
    cx_call("OPTIONS", "/healthz", h, NULL, &x);
    int a = x.r.status == 204 && !cx_absent(&x, "Access-Control-Allow-Origin");
    cx_free(&x);
    return a;
}

/* Before: --cors-origin was an unknown option. Now: the environment's list (commas), the
 * command line's replacing it, the config file's lines adding up; a bad origin exits 2
 * naming it; with keys and no CORS, a read varies on Authorization only. */
static void cors_origin_sources(void)
{
    const char *env[] = {"DPBUDGET_CORS_ORIGIN=https://a.example,https://b.example", NULL};
    int st = api_daemon_start(NULL, env, "http");
    CHECKF(st == 0, "with DPBUDGET_CORS_ORIGIN: %d", st);
    if (st == 0) {
        CHECK(allowed("https://a.example") && allowed("https://b.example"));
        CHECK(!allowed("https://c.example"));
        api_daemon_stop();
    }
    const char *cli[] = {"--cors-origin", "https://c.example", NULL};
    st = api_daemon_start(cli, env, "http");
    CHECKF(st == 0, "with both: %d", st);
    if (st == 0) {
        CHECK(allowed("https://c.example"));
        CHECK(!allowed("https://a.example") && !allowed("https://b.example"));
        api_daemon_stop();
    }
    char dir[64], keys[96], conf[128];
    if (write_keys(dir, keys) != 0) {
        CHECK(0);
        return;
    }
    snprintf(conf, sizeof conf, "%s/conf", dir);
    FILE *f = fopen(conf, "w");
    if (f) {
        fputs("cors-origin = https://d.example\ncors-origin = https://e.example:8443\n", f);
        fclose(f);
    }
    const char *withconf[] = {"--config", conf, NULL};
    st = api_daemon_start(withconf, NULL, "http");
    CHECKF(st == 0, "with a config file: %d", st);
    if (st == 0) {
        CHECK(allowed("https://d.example") && allowed("https://e.example:8443"));
        api_daemon_stop();
    }
    static const char *const bad[] = {"*", "https://x.example/", "https://X.example", "null", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *extra[] = {"--cors-origin", bad[i], NULL};
        st = api_daemon_start(extra, NULL, "http");
        CHECKF(st == 1002, "--cors-origin '%s': %d, want exit 2", bad[i], st);
        CHECKF(log_has("--cors-origin (command line)"), "--cors-origin '%s': no message", bad[i]);
        if (st == 0)
            api_daemon_stop();
    }
    const char *keyed[] = {"--api-keys", keys, NULL};
    st = api_daemon_start(keyed, NULL, "http");
    CHECKF(st == 0, "with keys: %d", st);
    if (st == 0) {
        const char *h[] = {"Authorization: Bearer " READ_TOKEN, "Origin: https://a.example", NULL};
        cx x;
        cx_call("GET", "/v1/summary", h, NULL, &x);
        CHECK(x.r.status == 200 && cx_is(&x, "Vary", "Authorization") &&
              cx_is(&x, "Cache-Control", "private, no-cache") &&
              cx_absent(&x, "Access-Control-Allow-Origin"));
        cx_free(&x);
        const char *pre[] = {"Origin: https://a.example", "Access-Control-Request-Method: GET",
                             NULL};
        cx_call("OPTIONS", "/v1/clients", pre, NULL, &x); /* no key needed, no CORS */
        CHECK(x.r.status == 204 && cx_absent(&x, "Access-Control-Allow-Origin") &&
              cx_absent(&x, "Vary"));
        cx_free(&x);
        api_daemon_stop();
    }
    unlink(conf);
    unlink(keys);
    rmdir(dir);
}

const tl_test CONV_TESTS[] = {
    TL_T(reads_with_an_etag_are_revalidable), TL_T(etag_comparison_follows_rfc9110),
    TL_T(options_is_204_with_allow),          TL_T(tracectx_parse_is_strict),
    TL_T(traceparent_ids_in_the_log_line),    TL_T(cors_origins_are_exact),
};
const size_t CONV_NTESTS = sizeof CONV_TESTS / sizeof CONV_TESTS[0];

const tl_test CONV_OWN_TESTS[] = {
    TL_T(cors_for_listed_origins_only),
    TL_T(cors_origin_sources),
};
const size_t CONV_OWN_NTESTS = sizeof CONV_OWN_TESTS / sizeof CONV_OWN_TESTS[0];
