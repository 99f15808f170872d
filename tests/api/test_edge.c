/* test_edge.c - the HTTP edge, over raw sockets where curl would not misbehave: every method
 * on every route (the routing table itself) passes the same key check and rate limit; a
 * request with ambiguous framing is refused, its connection closed, and what it smuggled
 * never runs; a slowloris neither starves probes from another address nor keeps a dripping
 * head alive past --header-timeout; oversized heads and heads without Host are answered
 * problem+json. EDGE_TESTS start their own daemons; EDGE_SHARED_TESTS use the main one. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <dirent.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "../../server/auth.h"
#include "../../server/mhdwrap.h"
#include "../../server/resources.h"
#include "check.h"
#include "suites.h"

static int daemon_port(void)
{
    const char *b = strrchr(api_get_base(), ':');
    return b ? atoi(b + 1) : 0;
}

/* A TCP connection to the daemon from the loopback address src ("127.0.0.x"), blocking
 * unless nonblock; -1 on failure. */
static int dial(const char *src, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    if (src) {
        inet_pton(AF_INET, src, &sa.sin_addr);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            return -1;
        }
    }
    sa.sin_port = htons((unsigned short)daemon_port());
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read from fd until the peer closes or timeout seconds pass; returns the bytes read (out
 * NUL-terminated) and *closed = 1 when the daemon closed the connection. */
static size_t read_until_close(int fd, char *out, size_t cap, double timeout, int *closed)
{
    size_t n = 0;
    *closed = 0;
    double end = tl_now() + timeout;
    while (n + 1 < cap) {
        int left = (int)((end - tl_now()) * 1000);
        if (left <= 0)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, left) <= 0)
            break;
        ssize_t k = recv(fd, out + n, cap - 1 - n, 0);
        if (k <= 0) {
            *closed = k == 0 || errno == ECONNRESET;
            break;
        }
        n += (size_t)k;
    }
    out[n] = '\0';
    return n;
}

/* Send req on a fresh connection and collect everything until close (at most timeout s). */
static size_t exchange(const char *req, size_t len, char *out, size_t cap, double timeout,
                       int *closed)
{
    int fd = dial(NULL, 0);
    out[0] = '\0';
    *closed = 0;
    if (fd < 0)
        return 0;
    size_t sent = 0;
    while (sent < len) {
        ssize_t k = send(fd, req + sent, len - sent, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        sent += (size_t)k;
    }
    size_t n = read_until_close(fd, out, cap, timeout, closed);
    close(fd);
    return n;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The status of the first response in raw, 0 if none. */
static int status_of(const char *raw)
{
    return strncmp(raw, "HTTP/1.", 7) == 0 ? atoi(raw + 9) : 0;
}

static int raw_is_problem(const char *raw, int status, const char *code)
{
    char want[64];
    snprintf(want, sizeof want, "\"code\":\"%s\"", code);
    return status_of(raw) == status &&
           strstr(raw, "\r\nContent-Type: application/problem+json") != NULL &&
           strstr(raw, want) != NULL;
}

/* ---------------------------------------------------------------- keys on every method */

#define READ_TOKEN "reader-token-1"
static const char KEYS[] =
    "8ed7a3cb498a69b97157eb5c685b8831eabdc118fce9a4c75425920ab3ddf6e0 read reader\n";

static const char *const METHODS[] = {"GET",   "HEAD",    "POST",  "PUT", "DELETE",
                                      "PATCH", "OPTIONS", "TRACE", "FOO"};
#define NMETHODS (sizeof METHODS / sizeof METHODS[0])

/* A path per route of the routing table (an id for prefix routes), and paths no route has. */
static size_t edge_paths(char paths[][64], size_t cap, int *open)
{
    size_t n = 0;
    for (const route *r = ROUTES; r->method && n < cap; r++, n++) {
        snprintf(paths[n], 64, "%s%s%s", r->path, r->prefix ? "x1" : "",
                 r->suffix ? r->suffix : "");
        open[n] = r->scope == SCOPE_NONE;
    }
    const char *unrouted[] = {"/nothing", "/v1/clients/a/b", "/v1/rounds/", "/v1"};
    for (size_t i = 0; i < sizeof unrouted / sizeof unrouted[0] && n < cap; i++, n++) {
        snprintf(paths[n], 64, "%s", unrouted[i]);
        open[n] = 0;
    }
    return n;
}

/* Before: HEAD answered 200 with the ETag (404 for unknown clients) without a key and
 * outside the rate limit; OPTIONS, unknown methods and unrouted paths answered 405/404
 * without a key and without counting. Now every route x every method: 401 without a key
 * (open paths aside), and 429 once the key's bucket is empty; but OPTIONS on a routed path,
 * a CORS preflight, which never carries a key: 204 with Allow (issue 37). */
static void every_method_on_every_route_needs_the_key(void)
{
    char dir[64], keys[96];
    snprintf(dir, sizeof dir, "/tmp/dpb-edge-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return;
    snprintf(keys, sizeof keys, "%s/keys", dir);
    FILE *f = fopen(keys, "w");
    if (f) {
        fputs(KEYS, f);
        fclose(f);
    }
    /* one request per 100 s: the bucket stays empty for the whole test once spent */
    const char *extra[] = {"--api-keys", keys, "--rate-limit", "0.01", NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st == 0) {
        static char paths[64][64];
        int open[64];
        size_t np = edge_paths(paths, 64, open);
        int checked = 0;
        for (int pass = 0; pass < 2; pass++) {
            api_set_header(pass ? "Authorization: Bearer " READ_TOKEN : NULL);
            if (pass) { /* spend the one token */
                api_reply r;
                api_get("/v1/summary", &r);
                CHECK(r.status == 200);
                api_reply_free(&r);
            }
            for (size_t p = 0; p < np; p++)
                for (size_t m = 0; m < NMETHODS; m++) {
                    api_reply r;
                    api_call(METHODS[m], paths[p], NULL, NULL, 0, &r);
                    int want = pass ? 429 : 401;
                    /* OPTIONS on a routed path: 204 without a key and outside the rate
                     * limit (a browser's preflight never carries a key) */
                    if (strcmp(METHODS[m], "OPTIONS") == 0 && p < np - 4)
                        CHECKF(r.status == 204 && r.body_len == 0, "OPTIONS %s: %ld", paths[p],
                               r.status);
                    else if (open[p])
                        CHECKF(r.status != 401 && r.status != 429, "%s %s: %ld", METHODS[m],
                               paths[p], r.status);
                    else if (strcmp(METHODS[m], "HEAD") == 0)
                        CHECKF(r.status == want && r.body_len == 0, "HEAD %s: %ld (%zu bytes)",
                               paths[p], r.status, r.body_len);
                    else
                        CHECKF(is_problem(&r, want, pass ? "rate_limited" : "unauthorized", NULL),
                               "%s %s: %ld %s", METHODS[m], paths[p], r.status, r.body);
                    checked++;
                    api_reply_free(&r);
                }
        }
        CHECKF(checked >= 2 * 17 * 9, "only %d requests", checked);
        api_set_header(NULL);
        st = api_daemon_stop();
        CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
    }
    unlink(keys);
    rmdir(dir);
}

/* ---------------------------------------------------------------- framing */

#define SMUGGLED_BODY(id)                                                                          \
    "{\"round_id\":\"" id "\",\"event\":{\"class_name\":\"GaussianDpEvent\","                      \
    "\"noise_multiplier\":5},\"participants\":[\"smug-client\"]}"

/* Before: Content-Length + Transfer-Encoding: chunked with a body that ends early answered
 * 400 and then ran the POST /v1/rounds that followed on the same connection. Now each
 * ambiguous framing is answered 400 invalid_framing, once, and the connection is closed:
 * the smuggled round never exists. */
static void smuggled_request_is_never_executed(void)
{
    api_reply r;
    static const char client[] = "{\"budget\":{\"epsilon\":100,\"delta\":1e-5}}";
    api_call("PUT", "/v1/clients/smug-client", "application/json", client, strlen(client), &r);
    CHECKF(r.status == 201 || r.status == 200, "%ld %s", r.status, r.body);
    api_reply_free(&r);
    /* the framing of the first request; the smuggled round's id */
    /* the framing of the first request: headers before and after a Content-Length that
     * covers the rest of the bytes (cl 1) or none (cl 0); the smuggled round's id */
    static const struct {
        const char *before;
        int cl;
        const char *after, *body, *round;
    } cases[] = {
        {"", 1, "Transfer-Encoding: chunked\r\n", "0\r\n\r\n", "smuggled-1"},
        {"Transfer-Encoding: chunked\r\n", 1, "", "0\r\n\r\n", "smuggled-2"},
        {"Content-Length: 2\r\n", 1, "", "{}", "smuggled-3"},
        {"Transfer-Encoding: chunked\r\n", 0, "Transfer-Encoding: chunked\r\n", "0\r\n\r\n",
         "smuggled-4"},
        {"Transfer-Encoding: gzip, chunked\r\n", 0, "", "0\r\n\r\n", "smuggled-5"},
        {"Transfer-Encoding: identity\r\n", 0, "", "", "smuggled-6"},
        /* libmicrohttpd reads these as no Transfer-Encoding at all, a proxy may not */
        {"Transfer-Encoding : chunked\r\n", 0, "", "0\r\n\r\n", "smuggled-7"},
        {"Transfer-Encoding:\r\n chunked\r\n", 0, "", "0\r\n\r\n", "smuggled-8"},
        {"X-Pad: 1\r\n", 0, "Transfer-Encoding: x\r\n\tchunked\r\n", "0\r\n\r\n", "smuggled-9"},
        /* names that are not tokens: a proxy may strip or map the odd byte (RFC 9110 5.6.2) */
        {"\vTransfer-Encoding: chunked\r\n", 1, "", "0\r\n\r\n", "smuggled-10"},
        {"Transfer\x01Encoding: chunked\r\n", 1, "", "0\r\n\r\n", "smuggled-11"},
        {"\xc3\x84: 1\r\n", 1, "", "{}", "smuggled-12"},
        {"X(y): 1\r\n", 1, "", "{}", "smuggled-13"},
        {"X\x7fY: 1\r\n", 1, "", "{}", "smuggled-14"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[256], second[512], first[256], req[1024], out[4096];
        snprintf(body, sizeof body,
                 "{\"round_id\":\"%s\",\"event\":{\"class_name\":\"GaussianDpEvent\","
                 "\"noise_multiplier\":5},\"participants\":[\"smug-client\"]}",
                 cases[i].round);
        snprintf(second, sizeof second,
                 "POST /v1/rounds HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
        char cl[48] = "";
        if (cases[i].cl)
            snprintf(cl, sizeof cl, "Content-Length: %zu\r\n",
                     strlen(cases[i].body) + strlen(second));
        snprintf(first, sizeof first, "%s%s%s", cases[i].before, cl, cases[i].after);
        int n = snprintf(req, sizeof req,
                         "POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "%s\r\n%s%s",
                         first, cases[i].body, second);
        int closed;
        exchange(req, (size_t)n, out, sizeof out, 3.0, &closed);
        CHECKF(raw_is_problem(out, 400, "invalid_framing"), "case %zu: %.300s", i, out);
        CHECKF(count_of(out, "HTTP/1.1 ") == 1 && closed, "case %zu: %d answers, closed %d", i,
               count_of(out, "HTTP/1.1 "), closed);
        char path[64];
        snprintf(path, sizeof path, "/v1/rounds/%s", cases[i].round);
        api_get(path, &r);
        CHECKF(r.status == 404, "case %zu: the smuggled round %s exists (%ld)", i, cases[i].round,
               r.status);
        api_reply_free(&r);
    }
    /* a well-framed pipeline on one connection still works: both answered */
    char req[1024], out[8192];
    int n = snprintf(req, sizeof req,
                     "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                     "POST /v1/rounds HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(SMUGGLED_BODY("pipelined-1")), SMUGGLED_BODY("pipelined-1"));
    int closed;
    exchange(req, (size_t)n, out, sizeof out, 3.0, &closed);
    CHECKF(count_of(out, "HTTP/1.1 200") == 2, "a pipeline: %.400s", out);
    api_get("/v1/rounds/pipelined-1", &r);
    CHECK(r.status == 200);
    api_reply_free(&r);
}

/* Before: libmicrohttpd answered a 100 KB header with its HTML 431 page, and took an
 * HTTP/1.1 request without Host. Now both are problem+json. */
static void oversized_and_hostless_heads_are_problems(void)
{
    size_t big = 100 * 1024;
    char *req = malloc(big + 256);
    static char out[8192];
    int closed;
    if (req == NULL)
        return;
    for (size_t size = 17 * 1024; size <= big; size = big) {
        int n = snprintf(req, 256, "GET /v1/summary HTTP/1.1\r\nHost: x\r\nX-Big: ");
        memset(req + n, 'a', size);
        memcpy(req + n + size, "\r\n\r\n", 4);
        exchange(req, (size_t)n + size + 4, out, sizeof out, 3.0, &closed);
        CHECKF(raw_is_problem(out, 431, "headers_too_large"), "%zu-byte header: %.300s", size, out);
        if (size == big)
            break;
    }
    free(req);
    static const char hostless[] = "GET /v1/summary HTTP/1.1\r\n\r\n";
    exchange(hostless, sizeof hostless - 1, out, sizeof out, 3.0, &closed);
    CHECKF(raw_is_problem(out, 400, "bad_request"), "no Host: %.300s", out);
    static const char twohosts[] = "GET /v1/summary HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
    exchange(twohosts, sizeof twohosts - 1, out, sizeof out, 3.0, &closed);
    CHECKF(raw_is_problem(out, 400, "bad_request"), "two Hosts: %.300s", out);
    /* HTTP/1.0 needs no Host */
    static const char old[] = "GET /healthz HTTP/1.0\r\n\r\n";
    exchange(old, sizeof old - 1, out, sizeof out, 3.0, &closed);
    CHECKF(status_of(out) == 200, "HTTP/1.0: %.300s", out);
}

/* raw is exactly one HTTP/1.1 answer, with this status, Connection: close and a
 * problem+json body of exactly Content-Length bytes whose status and code are these. */
static int raw_is_one_problem(const char *raw, size_t n, int status, const char *code)
{
    const char *end = strstr(raw, "\r\n\r\n");
    const char *cl = strstr(raw, "\r\nContent-Length: ");
    if (!raw_is_problem(raw, status, code) || end == NULL || cl == NULL || cl > end ||
        count_of(raw, "\nHTTP/1.") != 0 || strstr(raw, "\r\nConnection: close\r\n") == NULL)
        return 0;
    const char *body = end + 4;
    if ((size_t)strtoul(cl + 18, NULL, 10) != n - (size_t)(body - raw))
        return 0;
    json_error_t e;
    json_t *j = json_loads(body, 0, &e);
    const char *detail = json_string_value(json_object_get(j, "detail"));
    int ok = j && json_integer_value(json_object_get(j, "status")) == status &&
             strcmp(json_string_value(json_object_get(j, "code")) ?: "", code) == 0 && detail &&
             strlen(detail) > 20;
    json_decref(j);
    return ok;
}

/* Before: libmicrohttpd refused some malformed requests itself, before the service saw a
 * request, with its own HTML pages (and the head of the Content-Length refusals twice).
 * Now every refusal of every kind it makes is one problem+json answer, the connection
 * closed, and the service goes on serving. The kinds: request and header lines it cannot
 * parse, versions other than 1.x, Content-Length that is not a number or not a 64-bit one,
 * broken chunked encoding and chunk sizes beyond 64 bits, and heads or request lines that
 * outgrow its memory for a connection, by length or by the number of headers. */
static void library_refusals_are_problems(void)
{
    struct {
        const char *head; /* the request, before any filler */
        size_t fill;      /* bytes of 'a' appended, then tail */
        const char *tail;
        int status;
        const char *code;
    } cases[] = {
        {"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 0, "", 505, "http_version_not_supported"},
        {"GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 0, "", 505, "http_version_not_supported"},
        {"GET /healthz HTTP/0.9\r\nHost: x\r\n\r\n", 0, "", 505, "http_version_not_supported"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 0, "", 400, "bad_request"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\n\x01\x02\r\n\r\n", 0, "", 400, "bad_request"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: x1\r\n\r\n", 0, "", 400,
         "invalid_framing"},
        {"POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 0, "", 400,
         "invalid_framing"},
        {"POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Length: 1.5\r\n\r\n{}", 0, "", 400,
         "invalid_framing"},
        /* a malformed length followed by a body: the answer must still arrive whole */
        {"POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Length: 12ab\r\n\r\n", 20000, "", 400,
         "invalid_framing"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0,
         "", 413, "body_too_large"},
        {"POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n", 0,
         "", 413, "body_too_large"},
        {"POST /v1/delta HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n", 0,
         "", 400, "invalid_framing"},
        {"POST /v1/delta HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx", 0, "",
         400, "invalid_framing"},
        {"POST /v1/delta HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         "FFFFFFFFFFFFFFFFFFFFFF\r\n",
         0, "", 413, "body_too_large"},
        /* heads beyond the connection's memory: a long URL, a long header, many headers */
        {"GET /", 200000, " HTTP/1.1\r\nHost: x\r\n\r\n", 431, "headers_too_large"},
        {"GET /healthz?q=", 40000, " HTTP/1.1\r\nHost: x\r\n\r\n", 431, "headers_too_large"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 40000, "\r\n\r\n", 431,
         "headers_too_large"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 300000, "\r\n\r\n", 431,
         "headers_too_large"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", 1500000, "\r\n\r\n", 431,
         "headers_too_large"},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\n", 0, NULL, 431, "headers_too_large"},
    };
    size_t cap = 1600000;
    char *req = malloc(cap);
    static char out[8192];
    if (req == NULL)
        return;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].head);
        memcpy(req, cases[i].head, n);
        if (cases[i].tail == NULL) { /* 3000 short headers: 15 KB, but 3000 parsed headers */
            for (int k = 0; k < 3000; k++)
                n += (size_t)snprintf(req + n, cap - n, "A%d: b\r\n", k % 10);
            memcpy(req + n, "\r\n", 2);
            n += 2;
        } else {
            memset(req + n, 'a', cases[i].fill);
            n += cases[i].fill;
            memcpy(req + n, cases[i].tail, strlen(cases[i].tail));
            n += strlen(cases[i].tail);
        }
        int closed;
        size_t got = exchange(req, n, out, sizeof out, 5.0, &closed);
        CHECKF(raw_is_one_problem(out, got, cases[i].status, cases[i].code) && closed,
               "case %zu (%.40s...): want one %d %s and the connection closed, got %.400s", i,
               cases[i].head, cases[i].status, cases[i].code, out);
    }
    free(req);
    /* behind answered requests on a kept-alive connection: theirs first, then the refusal
     * (the one libmicrohttpd's head would double is written to the socket directly) */
    static const char *const behind[] = {
        "POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof behind / sizeof behind[0]; i++) {
        char pipe[512];
        int n = snprintf(pipe, sizeof pipe,
                         "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                         "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n%s",
                         behind[i]);
        int closed;
        exchange(pipe, (size_t)n, out, sizeof out, 5.0, &closed);
        /* answers follow each other directly (a body ends without a newline) */
        const char *last = strstr(out, i == 0 ? "HTTP/1.1 400 " : "HTTP/1.1 505 ");
        const char *second = strstr(out + 1, "HTTP/1.1 200 OK");
        CHECKF(status_of(out) == 200 && count_of(out, "HTTP/1.1 200 OK") == 2 && last && second &&
                   second < last && strstr(last, "application/problem+json") && closed,
               "pipelined #%zu: %.600s", i, out);
    }
    api_reply r;
    api_get("/healthz", &r);
    CHECKF(r.status == 200, "the service still serves after the refusals: %ld", r.status);
    api_reply_free(&r);
}

/* The same mapping when libmicrohttpd is built without its messages (every body ""): by
 * status alone, every refusal still gets a code of the right class and a sentence. */
static void library_refusal_codes_without_messages(void)
{
    static const struct {
        unsigned status;
        problem_code code;
    } want[] = {{400, PB_BAD_REQUEST},       {413, PB_BODY_TOO_LARGE}, {414, PB_HEADERS_TOO_LARGE},
                {431, PB_HEADERS_TOO_LARGE}, {505, PB_HTTP_VERSION},   {500, PB_INTERNAL},
                {418, PB_BAD_REQUEST},       {503, PB_INTERNAL}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        problem p = {0};
        mhdwrap_problem(want[i].status, "", 16384, &p);
        CHECKF(p.code == want[i].code && strlen(p.detail) > 20, "%u: %s (%s)", want[i].status,
               problem_code_name(p.code), p.detail);
        CHECKF(!mhdwrap_doubles_head(want[i].status, ""), "%u without a body", want[i].status);
    }
    problem p = {0};
    mhdwrap_problem(431, NULL, 4096, &p);
    CHECKF(strstr(p.detail, "4096") != NULL, "the limit in the sentence: %s", p.detail);
}

/* ---------------------------------------------------------------- slowloris */

#define ATTACKERS 400
#define DRIP_LINE "X-Drip: 1\r\n"

/* Before: connections that each send a header line now and then hold their slot forever
 * (every byte restarts --conn-timeout), so enough of them from one address starve every
 * other client, probes included. Now: at most --max-connections-per-ip from one address,
 * and a head that is not complete --header-timeout after the connection is cut. */
static void slowloris_neither_starves_probes_nor_lives_on(void)
{
    /* fewer connections than the attack: before the per-address cap it filled them all */
    const char *extra[] = {"--max-connections", "300", "--max-connections-per-ip", "50",
                           "--header-timeout",  "2",   "--no-request-log",         NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st != 0)
        return;
    static int fds[ATTACKERS];
    int opened = 0;
    for (int i = 0; i < ATTACKERS; i++) {
        fds[i] = dial("127.0.0.1", 1);
        opened += fds[i] >= 0;
    }
    CHECKF(opened >= ATTACKERS / 2, "only %d attacking connections opened", opened);
    /* one dripping head from its own address, to time the head deadline */
    int drip = dial("127.0.0.3", 0);
    CHECK(drip >= 0);
    double t0 = tl_now(), drip_closed_at = 0.0;
    int probes = 0, answered = 0;
    double worst = 0.0;
    for (int tick = 0; tick < 12; tick++) { /* 12 x 0.5 s */
        for (int i = 0; i < ATTACKERS; i++) {
            /* a refused or cut connection comes straight back, as an attacker's would */
            char b[64];
            ssize_t k = fds[i] >= 0 ? recv(fds[i], b, sizeof b, MSG_DONTWAIT) : 0;
            int fresh = 0;
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN)) {
                if (fds[i] >= 0)
                    close(fds[i]);
                fds[i] = dial("127.0.0.1", 1);
                fresh = 1;
            }
            const char *line = tick && !fresh ? DRIP_LINE : "GET /healthz HTTP/1.1\r\n";
            if (fds[i] >= 0)
                send(fds[i], line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (drip >= 0 && drip_closed_at == 0.0) {
            const char *line = tick ? DRIP_LINE : "GET /healthz HTTP/1.1\r\nHost: x\r\n";
            send(drip, line, strlen(line), MSG_NOSIGNAL);
            char b[64];
            ssize_t k = recv(drip, b, sizeof b, MSG_DONTWAIT);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                drip_closed_at = tl_now() - t0;
        }
        /* a probe from another loopback address, as a kubelet's would come */
        int p = dial("127.0.0.2", 0);
        double ps = tl_now();
        if (p >= 0) {
            static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                        "Connection: close\r\n\r\n";
            char out[2048];
            int closed;
            send(p, probe, sizeof probe - 1, MSG_NOSIGNAL);
            read_until_close(p, out, sizeof out, 0.45, &closed);
            close(p);
            answered += status_of(out) == 200;
            if (tl_now() - ps > worst)
                worst = tl_now() - ps;
        }
        probes++;
        double next = t0 + 0.5 * (tick + 1);
        while (tl_now() < next) {
            struct timespec ts = {0, 20000000L};
            nanosleep(&ts, NULL);
        }
    }
    CHECKF(answered == probes, "%d of %d probes answered during the attack (slowest %.3f s)",
           answered, probes, worst);
    CHECKF(drip_closed_at > 1.5 && drip_closed_at < 4.0,
           "a head dripping for %.1f s: closed at %.2f s (--header-timeout 2)", tl_now() - t0,
           drip_closed_at);
    for (int i = 0; i < ATTACKERS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (drip >= 0)
        close(drip);
    /* the cut heads are counted (asked from another address: 127.0.0.1 may still be full) */
    static char out[1 << 18];
    int m = dial("127.0.0.2", 0), closed;
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (m >= 0 && send(m, get, sizeof get - 1, MSG_NOSIGNAL) > 0)
        read_until_close(m, out, sizeof out, 3.0, &closed);
    else
        out[0] = '\0';
    if (m >= 0)
        close(m);
    const char *ht = strstr(out, "\ndpbudget_http_head_timeouts_total ");
    CHECKF(ht && atoll(ht + 35) >= 1, "head timeouts counted: %.60s", ht ? ht : "(absent)");
    st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
}

/* The head deadline judges the client, not the server: a complete head that waits unread
 * because the connection's thread is busy with another request (here a PLD computation of
 * seconds on the only thread) is answered once the thread is free, not cut off. */
static void a_busy_server_does_not_cut_a_prompt_client(void)
{
    const char *extra[] = {"--threads", "1", "--header-timeout", "1", "--no-ledger", NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st != 0)
        return;
    int b = dial(NULL, 0), a = dial(NULL, 0); /* both accepted while the thread is idle */
    struct timespec ts = {0, 200000000L};
    nanosleep(&ts, NULL);
    static const char slow[] =
        "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"event\":{\"class_name\":"
        "\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":{\"class_name\":"
        "\"GaussianDpEvent\",\"noise_multiplier\":1}},\"count\":1000},\"epsilon\":1,"
        "\"accountant\":\"pld\",\"value_discretization_interval\":2e-6}";
    char req[1024], out[4096];
    int n = snprintf(req, sizeof req,
                     "POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(slow), slow);
    double t0 = tl_now();
    CHECK(a >= 0 && b >= 0 && send(a, req, (size_t)n, MSG_NOSIGNAL) == n);
    nanosleep(&ts, NULL);
    static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    CHECK(send(b, probe, sizeof probe - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof probe - 1));
    int closed;
    read_until_close(b, out, sizeof out, 20.0, &closed);
    double waited = tl_now() - t0;
    CHECKF(status_of(out) == 200, "a prompt request behind a %.1f s computation: %.200s", waited,
           out[0] ? out : "(cut off without an answer)");
    read_until_close(a, out, sizeof out, 20.0, &closed);
    CHECKF(status_of(out) == 200, "the computation: %.200s", out);
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
}

/* A pld round near its client's budget computes PLDs (here about a second) and then waits for
 * its log sync: on the only HTTP worker that would keep a probe on another connection
 * waiting. Ledger writes run on their own lane, so the probe is answered first. */
static void a_long_pld_round_does_not_hold_probes(void)
{
    /* the kept compositions off: the round composes from scratch (the slow path) */
    const char *extra[] = {"--threads", "1", "--pld-kept-memory", "0", NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st != 0)
        return;
#define SG(sigma)                                                                                  \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":50,\"event\":{\"class_name\":"              \
    "\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":{\"class_name\":"           \
    "\"GaussianDpEvent\",\"noise_multiplier\":" sigma "}}}"
    static const char *const sigmas[] = {"0.80", "0.81", "0.82", "0.83", "0.84",
                                         "0.85", "0.86", "0.87", "0.88"};
    static const char far[] =
        "{\"budget\":{\"epsilon\":1000,\"delta\":1e-5},\"accounting\":\"pld\"}",
                      near[] =
                          "{\"budget\":{\"epsilon\":1.9,\"delta\":1e-5},\"accounting\":\"pld\"}";
    api_reply r;
    api_call("PUT", "/v1/clients/slow", "application/json", far, sizeof far - 1, &r);
    CHECKF(r.status == 201, "PUT: %ld %.200s", r.status, r.body);
    api_reply_free(&r);
    /* a history of distinct events, cheap while the rdp bound decides */
    for (int k = 0; k < 8; k++) {
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"round_id\":\"hist-%d\",\"participants\":[\"slow\"],\"event\":" SG("%s") "}", k,
                 sigmas[k]);
        api_call("POST", "/v1/rounds", "application/json", body, strlen(body), &r);
        CHECKF(r.status == 200, "round %d: %ld %.200s", k, r.status, r.body);
        api_reply_free(&r);
    }
    /* a budget below the rdp bound: the next round needs the PLD of nine events */
    api_call("PUT", "/v1/clients/slow", "application/json", near, sizeof near - 1, &r);
    CHECKF(r.status == 200, "PUT: %ld %.200s", r.status, r.body);
    api_reply_free(&r);
    int a = dial(NULL, 0), b = dial(NULL, 0);
    char body[1024], req[2048], out[8192];
    int bn =
        snprintf(body, sizeof body,
                 "{\"round_id\":\"long\",\"participants\":[\"slow\"],\"event\":" SG("0.95") "}");
    int n = snprintf(req, sizeof req,
                     "POST /v1/rounds HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Connection: close\r\nContent-Length: %d\r\n\r\n%s",
                     bn, body);
    CHECK(a >= 0 && b >= 0 && send(a, req, (size_t)n, MSG_NOSIGNAL) == n);
    struct timespec ts = {0, 50000000L};
    nanosleep(&ts, NULL); /* the round is computing */
    static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    CHECK(send(b, probe, sizeof probe - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof probe - 1));
    int closed;
    read_until_close(b, out, sizeof out, 30.0, &closed);
    CHECKF(status_of(out) == 200, "the probe: %.200s", out);
    /* the round is still running (its answer has not come): the probe did not wait for it */
    struct pollfd pf = {a, POLLIN, 0};
    CHECKF(poll(&pf, 1, 0) == 0, "the round answered before the probe");
    read_until_close(a, out, sizeof out, 60.0, &closed);
    CHECKF(status_of(out) == 200, "the round: %.200s", out);
#undef SG
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
}

/* Eligibility computes for its caller (a PLD per probed count: here up to the ledger's 1 s
 * deadline each) on a lane of its own, of one thread fewer than the CPUs: nine such requests
 * at once (more than the ledger writes' eight threads) leave the writes' lane free, so a
 * round sent after them is answered while none of them has been. On main they ran on the
 * writes' lane, and the round waited for the first of them to end. */
static void eligibility_floods_leave_the_writes_lane(void)
{
    const char *extra[] = {"--pld-kept-memory", "0", "--ledger-deadline", "1", NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st != 0)
        return;
    static const char near[] =
        "{\"budget\":{\"epsilon\":1.5,\"delta\":1e-5},\"accounting\":\"pld\"}";
    api_reply r;
    api_call("PUT", "/v1/clients/near", "application/json", near, sizeof near - 1, &r);
    CHECKF(r.status == 201, "PUT: %ld %.200s", r.status, r.body);
    api_reply_free(&r);
    for (int k = 0; k < 40; k++) { /* a DP-SGD history: the rdp bound no longer decides */
        char body[512];
        snprintf(body, sizeof body,
                 "{\"round_id\":\"h-%d\",\"participants\":[\"near\"],\"policy\":"
                 "\"admit_eligible\",\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":"
                 "10,\"event\":{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":"
                 "0.01,\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1.1}}}}",
                 k);
        api_call("POST", "/v1/rounds", "application/json", body, strlen(body), &r);
        api_reply_free(&r);
    }
    enum { K = 9 };
    int fd[K];
    char req[2048], out[8192];
    for (int k = 0; k < K; k++) { /* a fresh event each: PLDs to compute */
        char body[512];
        int bn =
            snprintf(body, sizeof body,
                     "{\"clients\":[\"near\"],\"max_rounds\":1000000,\"event\":{\"class_name\":"
                     "\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":{"
                     "\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1.0%d}}}",
                     k + 1);
        int n = snprintf(req, sizeof req,
                         "POST /v1/eligibility HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         "application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
                         bn, body);
        fd[k] = dial(NULL, 0);
        CHECK(fd[k] >= 0 && send(fd[k], req, (size_t)n, MSG_NOSIGNAL) == n);
    }
    struct timespec ts = {0, 100000000L};
    nanosleep(&ts, NULL); /* the eligibility requests are computing, or waiting for a thread */
    static const char round[] = "{\"round_id\":\"quick\",\"participants\":[\"other\"],"
                                "\"event\":{\"class_name\":\"GaussianDpEvent\","
                                "\"noise_multiplier\":50}}";
    api_call("POST", "/v1/rounds", "application/json", round, sizeof round - 1, &r);
    CHECKF(r.status == 200, "the round: %ld %.200s", r.status, r.body);
    api_reply_free(&r);
    int answered = 0;
    for (int k = 0; k < K; k++) {
        struct pollfd pf = {fd[k], POLLIN, 0};
        answered += fd[k] >= 0 && poll(&pf, 1, 0) > 0;
    }
    CHECKF(answered == 0, "%d eligibility requests were answered before the round", answered);
    for (int k = 0; k < K; k++) {
        int closed;
        if (fd[k] < 0)
            continue;
        read_until_close(fd[k], out, sizeof out, 60.0, &closed);
        CHECKF(status_of(out) == 200 || status_of(out) == 503 || status_of(out) == 422,
               "eligibility %d: %.200s", k, out);
        close(fd[k]);
    }
    st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
}

/* The CPUs thread tid may run on (sched_getaffinity), or -1. */
static int thread_cpus(const char *tid)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity((pid_t)atoi(tid), sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

/* The nice value and CPU ticks (user + system) of the daemon's threads named name, summed
 * over them, from /proc/PID/task/TID/stat; *threads: how many; *cpus (if not NULL): the most
 * CPUs one of them may run on (-1: none found). */
static void lane_threads(int pid, const char *name, int *threads, long *nice, long *ticks,
                         int *cpus)
{
    if (cpus != NULL)
        *cpus = -1;
    *threads = 0;
    *nice = -100;
    *ticks = 0;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", pid);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[128], buf[1024];
        snprintf(path, sizeof path, "%s/%.20s/stat", dir, de->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        const char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
        if (lp == NULL || rp == NULL || (size_t)(rp - lp - 1) != strlen(name) ||
            strncmp(lp + 1, name, strlen(name)) != 0)
            continue;
        /* after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt
         * cmajflt utime stime cutime cstime priority nice */
        long ut = 0, st = 0, ni = 0;
        if (sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld %*d %*d %*d %ld",
                   &ut, &st, &ni) != 3)
            continue;
        (*threads)++;
        *nice = ni;
        *ticks += ut + st;
        int c = cpus != NULL ? thread_cpus(de->d_name) : -1;
        if (cpus != NULL && c > *cpus)
            *cpus = c;
    }
    closedir(d);
}

/* The lanes whose work the caller's input sizes (the compute pool, eligibility, ledger writes
 * with a body over 64 KiB) run 10 nice steps below the lanes of the probes' kind (ledger
 * reads, small writes), and off one of the daemon's CPUs when it has two or more (cpuprio.h),
 * so that on a busy machine a probe, a read or a small round gets a CPU first; the large
 * writes run on their own lane, whose threads spend the CPU
 * of three 10,000-client registrations. On main every ledger lane ran at the HTTP workers'
 * nice and had no name, and the large writes ran on the small writes' lane; before cpuprio.h
 * every lane ran on every CPU. */
static void hostile_capable_lanes_run_below_the_others(void)
{
    const char *extra[] = {"--max-bulk-body", "4194304", NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st != 0)
        return;
    int pid = api_daemon_pid(), n = 0;
    long base = 0, nice = 0, ticks = 0;
    /* a pool's threads name themselves and set their nice value once they run: on a loaded
     * machine some may not have run yet when the daemon answers; wait for them (up to 10 s) */
    static const char *const all[] = {"dpb-write", "dpb-read", "dpb-compute", "dpb-eligibility",
                                      "dpb-write-large"};
    for (int tries = 0; tries < 100; tries++) {
        int ready = 1;
        for (size_t i = 0; i < sizeof all / sizeof all[0] && ready; i++) {
            lane_threads(pid, all[i], &n, &nice, &ticks, NULL);
            ready = n >= (i < 2 ? 8 : 1) && (i < 2 || nice != base);
            if (i == 0)
                base = nice;
        }
        if (ready)
            break;
        usleep(100000);
    }
    lane_threads(pid, "dpb-write", &n, &base, &ticks, NULL);
    CHECKF(n == 8, "%d small-write threads", n);
    char self[32];
    snprintf(self, sizeof self, "%d", pid);
    int cpus = thread_cpus(self); /* the daemon's main thread: the process's CPUs */
    int lane_cpus = -1;
    CHECKF(cpus >= 1, "the daemon's CPUs: %d", cpus);
    lane_threads(pid, "dpb-read", &n, &nice, &ticks, &lane_cpus);
    CHECKF(n == 8 && nice == base, "%d read threads at nice %ld (writes: %ld)", n, nice, base);
    CHECKF(lane_cpus == cpus, "read threads on %d CPUs of %d", lane_cpus, cpus);
    lane_threads(pid, "dpb-write", &n, &nice, &ticks, &lane_cpus);
    CHECKF(lane_cpus == cpus, "small-write threads on %d CPUs of %d", lane_cpus, cpus);
    static const char *const low[] = {"dpb-compute", "dpb-eligibility", "dpb-write-large"};
    for (size_t i = 0; i < sizeof low / sizeof low[0]; i++) {
        lane_threads(pid, low[i], &n, &nice, &ticks, &lane_cpus);
        CHECKF(n >= 1 && nice == (base + 10 > 19 ? 19 : base + 10),
               "%d %s threads at nice %ld (the small writes' at %ld)", n, low[i], nice, base);
        CHECKF(lane_cpus == (cpus > 1 ? cpus - 1 : cpus), "%s threads on %d CPUs of %d", low[i],
               lane_cpus, cpus);
    }
    long before = 0;
    lane_threads(pid, "dpb-write-large", &n, &nice, &before, NULL);
    enum { N = 10000 };
    size_t cap = (size_t)N * 80 + 64;
    char *body = malloc(cap);
    CHECK(body != NULL);
    for (int b = 0; body && b < 3; b++) {
        size_t len = (size_t)snprintf(body, cap, "{\"clients\":[");
        for (int i = 0; i < N; i++)
            len += (size_t)snprintf(
                body + len, cap - len,
                "%s{\"id\":\"lane-%d-%05d\",\"budget\":{\"epsilon\":1,\"delta\":1e-5}}",
                i ? "," : "", b, i);
        len += (size_t)snprintf(body + len, cap - len, "]}");
        api_reply r;
        api_call("POST", "/v1/clients:batch", "application/json", body, len, &r);
        CHECKF(r.status == 200, "batch %d: %ld %.200s", b, r.status, r.body);
        api_reply_free(&r);
    }
    lane_threads(pid, "dpb-write-large", &n, &nice, &ticks, NULL);
    CHECKF(ticks > before, "the large writes' threads spent %ld CPU ticks, %ld before", ticks,
           before);
    /* three reservations of the 30,000 clients (bodies over 64 KiB), then their releases,
     * whose bodies are small but whose work is the reservation's: the large writes' lane too
     * (on main, and before the release route's small test, they ran on the writes' lane) */
    for (int k = 0; body && k < 3; k++) {
        size_t len = (size_t)snprintf(body, cap,
                                      "{\"round_id\":\"lane-big-%d\",\"phase\":\"reserve\","
                                      "\"event\":{\"class_name\":\"GaussianDpEvent\","
                                      "\"noise_multiplier\":100},\"participants\":[",
                                      k);
        for (int i = 0; i < 3 * N; i++)
            len += (size_t)snprintf(body + len, cap - len, "%s\"lane-%d-%05d\"", i ? "," : "",
                                    i / N, i % N);
        len += (size_t)snprintf(body + len, cap - len, "]}");
        api_reply r;
        api_call("POST", "/v1/rounds", "application/json", body, len, &r);
        CHECKF(r.status == 200, "reserve %d: %ld %.200s", k, r.status, r.body);
        api_reply_free(&r);
    }
    free(body);
    lane_threads(pid, "dpb-write-large", &n, &nice, &before, NULL);
    for (int k = 0; k < 3; k++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/rounds/lane-big-%d/release", k);
        api_reply r;
        api_call("POST", path, "application/json", "{}", 2, &r);
        CHECKF(r.status == 200, "release %d: %ld %.200s", k, r.status, r.body);
        api_reply_free(&r);
    }
    lane_threads(pid, "dpb-write-large", &n, &nice, &ticks, NULL);
    CHECKF(ticks > before, "the large writes' threads spent %ld CPU ticks releasing, %ld before",
           ticks, before);
    st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
}

/* The new limits are options like the others: flags, DPBUDGET_* and config lines. */
static void edge_limits_are_options(void)
{
    const char *env[] = {"DPBUDGET_MAX_HEADER_BYTES=2048", NULL};
    int st = api_daemon_start(NULL, env, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st == 0) {
        static char req[4096], out[4096];
        for (size_t size = 1500; size <= 3000; size += 1500) {
            int n = snprintf(req, 128, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
            memset(req + n, 'a', size);
            memcpy(req + n + size, "\r\n\r\n", 4);
            int closed;
            exchange(req, (size_t)n + size + 4, out, sizeof out, 2.0, &closed);
            CHECKF(size < 2048 ? status_of(out) == 200
                               : raw_is_problem(out, 431, "headers_too_large"),
                   "%zu-byte header with DPBUDGET_MAX_HEADER_BYTES=2048: %.200s", size, out);
        }
        st = api_daemon_stop();
        CHECKF(st == 0, "dpbudgetd did not exit 0 (%d)", st);
    }
    static const char *const bad[][3] = {{"--header-timeout", "0", NULL},
                                         {"--max-header-bytes", "100", NULL},
                                         {"--max-connections-per-ip", "x", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = api_daemon_start(bad[i], NULL, "http");
        CHECKF(st == 1002, "%s %s: %d, want exit status 2", bad[i][0], bad[i][1], st);
        if (st == 0)
            api_daemon_stop();
    }
}

const tl_test EDGE_SHARED_TESTS[] = {
    TL_T(smuggled_request_is_never_executed),
    TL_T(oversized_and_hostless_heads_are_problems),
    TL_T(library_refusals_are_problems),
    TL_T(library_refusal_codes_without_messages),
};
const size_t EDGE_SHARED_NTESTS = sizeof EDGE_SHARED_TESTS / sizeof EDGE_SHARED_TESTS[0];

const tl_test EDGE_TESTS[] = {
    TL_T(every_method_on_every_route_needs_the_key),
    TL_T(slowloris_neither_starves_probes_nor_lives_on),
    TL_T(a_busy_server_does_not_cut_a_prompt_client),
    TL_T(a_long_pld_round_does_not_hold_probes),
    TL_T(eligibility_floods_leave_the_writes_lane),
    TL_T(hostile_capable_lanes_run_below_the_others),
    TL_T(edge_limits_are_options),
};
const size_t EDGE_NTESTS = sizeof EDGE_TESTS / sizeof EDGE_TESTS[0];
