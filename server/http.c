/*
 * http.c - the transport (http.h): libmicrohttpd's daemon, the request life-cycle (context,
 * head checks, API keys, capped body), the thread lanes a route names (the compute pool, the
 * ledger lane), sending answers, libmicrohttpd's own refusals, and the request's log line.
 *
 * May call: httproute.h (which route, its scope, its handler), httpreply.c's helpers,
 * reqlog.h, edge.h, workpool.h, auth.h, metrics.h, mhdwrap.h, tls.h, cors.h (the origins
 * allowed), tracectx.h (traceparent). It names no handler:
 * the route table says which runs and on which lane (routes.h).
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "auth.h"
#include "cors.h"
#include "edge.h"
#include "../core/common/numfmt.h"
#include "metrics.h"
#include "mhdwrap.h"
#include "reqlog.h"
#include "httproute.h"
#include "routes.h"
#include "tls.h"
#include "tracectx.h"
#include "workpool.h"
#include "../core/common/clock.h"

struct http_server {
    struct MHD_Daemon *d;
    http_config cfg;
    unsigned port;
    edge *edge;           /* head deadlines and checks */
    workpool *pool;       /* the compute requests' threads */
    workpool *lpool;      /* the ledger writes' threads (the ledger lane) */
    workpool *rpool;      /* the ledger reads' threads (the read lane) */
    workpool *epool;      /* the ledger's computing requests' threads (eligibility) */
    workpool *bpool;      /* the ledger's large writes' threads (bodies over HTTP_BULK_BODY) */
    unsigned ethreads;    /* how many */
    int active;           /* requests begun and not completed (atomic: http_in_flight) */
    MHD_socket listen_fd; /* after http_quiesce: the listening socket, closed at http_stop */
};

/* 1 once the server drains (http_drain_begin): every answer says Connection: close, so that
 * kept-alive clients open their next connection where the load balancer now sends them. */
static int draining;

/* libmicrohttpd's memory pool per connection, which holds the request head and its parsed
 * headers: twice --max-header-bytes, and at least libmicrohttpd's default (32 KiB), so that
 * any head up to the limit fits and reaches our own check and its exact 431. A head that
 * outgrows the pool is refused by libmicrohttpd itself, answered as problem+json all the
 * same (mhdwrap.h). No larger: libmicrohttpd 0.9.75 clears the whole pool between two
 * requests on a kept-alive connection, a cost paid on every request. */
static size_t connection_memory(size_t max_header_bytes)
{
    size_t m = 2 * max_header_bytes;
    return m < (size_t)32 * 1024 ? (size_t)32 * 1024 : m;
}

/* The ledger lanes (off the HTTP workers): threads and places waiting, for the writes and
 * for the reads. A request finding its lane full is answered 503 overloaded at once. */
#define HTTP_LEDGER_THREADS 8u
#define HTTP_LEDGER_QUEUE 4096u
#define HTTP_READ_THREADS 8u
#define HTTP_READ_QUEUE 1024u
#define HTTP_ELIG_QUEUE 256u /* the computing requests' lane: places waiting */
/* A ledger write whose body is larger than this (about 2,000 client ids) runs on the large
 * writes' lane: its parsing, its admission before the lock and its answer cost milliseconds to
 * a second of CPU, which the probes, reads and small writes get first (below). */
#define HTTP_BULK_BODY (64u * 1024u)
#define HTTP_BULK_THREADS 2u
#define HTTP_BULK_QUEUE 256u
/* The nice value added to the threads of the lanes whose work the caller's input sizes (the
 * compute pool, eligibility, the large writes), which also run off one CPU (cpuprio.h): on a
 * busy machine the HTTP workers (probes), the ledger's reads and its small writes get a CPU
 * before them. */
#define HTTP_LOW_NICE 10
/* A compute request handed to the pool; its connection stays suspended until it is done. */
typedef struct {
    http_request req;   /* borrows the context's body and MHD's method and path */
    http_response resp; /* filled on the pool thread, sent by the HTTP worker */
    dpb_cancel cancel;
    struct MHD_Connection *conn;
    double deadline_s;
    int ledger;          /* a ledger request on a ledger lane (not a computation) */
    const route *routes; /* the server's routing table (http_config.routes) */
    const route *rt;     /* the request's route (httproute_resolve), and its segment */
    const char *param;
} compute_job;

/* Per-request state, owned by MHD's *con_cls and freed in on_completed. */
typedef struct {
    char *buf;
    size_t len, cap;
    int answered;      /* a response was queued at the headers (401/403/429, 413, 415) */
    int too_large;     /* the body outgrew the cap: the rest is discarded, 413 at the end */
    size_t limit;      /* the largest body this request's route accepts */
    size_t declared;   /* Content-Length when it is within limit, else 0 */
    double t0;         /* when the headers arrived */
    int route;         /* index in ROUTES of the path's route (any method), -1 if none */
    const route *rt;   /* the route serving the method at the path (NULL: 404 or 405) */
    const char *param; /* rt's path segment (MHD's url) */
    int status;        /* the status sent */
    int method;        /* metrics_method() of the method sent */
    char verb[16];     /* the method sent, for the request log (letters only, cut at 15) */
    /* the key: holds a reference to its key set until on_completed */
    const auth_key *key;
    char id[72];      /* the request id: the client's X-Request-Id if sane, else generated */
    compute_job *job; /* a compute request on the pool (its connection suspended), or done */
    json_t *parsed;   /* the body parsed once (owned), handed to the handler as req.parsed */
    int preflight;    /* an OPTIONS on a routed path: 204 once read (CORS preflight or not) */
    tracectx trace;   /* the request's valid traceparent (tracectx.h), else empty ids */
} req_ctx;

/* The running server's configuration, for library_answer (one server per process; set
 * before libmicrohttpd starts, cleared after it stops). */
static const http_config *lib_cfg;
/* The connection whose request the access handler saw last on this thread, and its
 * context: a refusal libmicrohttpd raises while reading a body (broken chunked encoding)
 * comes on that thread with the request's context still alive (library_answer). */
static _Thread_local struct MHD_Connection *cur_conn;
static _Thread_local req_ctx *cur_ctx;

#define REQUEST_ID_BLOCK 1024ull

/* v in lowercase hex without leading zeros at p; returns the end (no NUL). */
static char *put_hex(char *p, unsigned long long v)
{
    char t[16];
    size_t n = 0;
    do {
        t[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    while (n)
        *p++ = t[--n];
    return p;
}

/* A request id: the client's X-Request-Id when it is 1-64 of [A-Za-z0-9._-], else a fresh
 * one (process start time, pid and a counter: unique within and across restarts). */
static void request_id(const char *given, char out[72])
{
    static unsigned long long counter;
    static unsigned long long boot;
    static unsigned pid;
    if (given) {
        size_t n = strlen(given), i = 0;
        for (; i < n; i++) {
            char ch = given[i];
            if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
                break;
        }
        if (n > 0 && n <= 64 && i == n) {
            memcpy(out, given, n + 1);
            return;
        }
    }
    if (__atomic_load_n(&boot, __ATOMIC_RELAXED) == 0) {
        __atomic_store_n(&pid, (unsigned)getpid(), __ATOMIC_RELAXED);
        __atomic_store_n(&boot, (unsigned long long)time(NULL), __ATOMIC_RELEASE);
    }
    /* each thread takes the counter's values in blocks: one shared atomic add per
     * REQUEST_ID_BLOCK requests, not per request; the pid is read once, not asked of the
     * kernel */
    static _Thread_local unsigned long long next, end;
    if (next == end) {
        next = __atomic_fetch_add(&counter, REQUEST_ID_BLOCK, __ATOMIC_RELAXED) + 1;
        end = next + REQUEST_ID_BLOCK;
    }
    unsigned long long c = next++;
    /* boot-pid-counter in hex, as "%llx-%x-%llx" writes it (at most 16+1+8+1+16 bytes) */
    char *p = put_hex(out, __atomic_load_n(&boot, __ATOMIC_ACQUIRE));
    *p++ = '-';
    p = put_hex(p, __atomic_load_n(&pid, __ATOMIC_RELAXED));
    *p++ = '-';
    p = put_hex(p, c);
    *p = '\0';
}

/* The headers every answer carries besides its Content-Type and Cache-Control (send_response,
 * write_answer). */
static const char *const EVERY_ANSWER[][2] = {{"X-Content-Type-Options", "nosniff"}};

/* The answer's Cache-Control (http.h, docs/API.md): a read's answer that has an ETag (a GET
 * or HEAD answered 200, or 304) may be kept by the user's agent and reused once revalidated;
 * nothing else is ever stored (writes, problems, computations, probes, preflights). */
static int revalidable(const http_response *resp, const req_ctx *ctx)
{
    return ctx && resp->etag[0] && (resp->status == 200 || resp->status == 304) &&
           (strcmp(ctx->verb, "GET") == 0 || strcmp(ctx->verb, "HEAD") == 0);
}

/* The CORS and caching headers of an answer (send_response): Cache-Control, Vary, and with
 * CORS on (cors.h) the Access-Control-* of an allowed Origin (on a preflight, its -Methods,
 * -Headers and -Max-Age). */
static void conventions(struct MHD_Connection *c, struct MHD_Response *r, const http_response *resp,
                        const req_ctx *ctx)
{
    const http_config *cfg = lib_cfg;
    int keep = revalidable(resp, ctx);
    MHD_add_response_header(r, "Cache-Control", keep ? "private, no-cache" : "no-store");
    const cors_list *cors = cfg && cfg->cors && cfg->cors->n ? cfg->cors : NULL;
    int by_key = keep && cfg && auth_enabled(cfg->auth);
    if (by_key || cors)
        MHD_add_response_header(r, "Vary",
                                by_key && cors ? "Authorization, Origin"
                                : by_key       ? "Authorization"
                                               : "Origin");
    const char *origin = cors ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin") : NULL;
    if (!cors_allows(cors, origin))
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    if (ctx && ctx->preflight &&
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
        MHD_add_response_header(r, "Access-Control-Allow-Methods", resp->allow);
        MHD_add_response_header(r, "Access-Control-Allow-Headers", CORS_ALLOW_HEADERS);
        MHD_add_response_header(r, "Access-Control-Max-Age", CORS_MAX_AGE);
    } else {
        MHD_add_response_header(r, "Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS);
    }
}

/* ---- the answer memory (--answer-memory) ----------------------------------------------------
 *
 * An answer is a buffer libmicrohttpd holds until the connection has taken it whole, which a
 * client that never reads delays for as long as the connection lives. Every answer over
 * HTTP_ANSWER_SMALL bytes (but those of the open routes, whose size no caller chooses) is
 * counted from the moment it is queued until libmicrohttpd frees it, against one
 * daemon-wide budget; one that would take the count past the budget is
 * refused (503 answer_memory_exhausted with Retry-After) and freed at once. */
static size_t answer_cap;  /* bytes; 0: no budget (set once by http_start) */
static size_t answer_held; /* bytes counted now (atomic) */

typedef struct {
    char *body;
    size_t n;
} held_answer;

static void answer_release(void *cls)
{
    held_answer *h = cls;
    __atomic_sub_fetch(&answer_held, h->n, __ATOMIC_RELAXED);
    free(h->body);
    free(h);
}

/* The response for resp's body (taken over), counted against the budget when large: NULL
 * when out of memory, and *refused set (body freed, nothing made) when over the budget. */
static struct MHD_Response *answer_response(http_response *resp, int counted, int *refused,
                                            size_t *held_now)
{
    *refused = 0;
    size_t n = resp->body_len;
    if (resp->body == NULL || n <= HTTP_ANSWER_SMALL || answer_cap == 0 || !counted)
        /* never MHD_create_response_from_buffer: that one is libmicrohttpd's own
         * (mhdwrap.h) */
        return MHD_create_response_from_buffer_with_free_callback(
            n, resp->body ? (void *)resp->body : (void *)"", resp->body ? free : NULL);
    size_t now = __atomic_add_fetch(&answer_held, n, __ATOMIC_RELAXED);
    held_answer *h = now <= answer_cap ? malloc(sizeof *h) : NULL;
    if (h == NULL) {
        __atomic_sub_fetch(&answer_held, n, __ATOMIC_RELAXED);
        *refused = now > answer_cap;
        *held_now = now - n;
        return NULL;
    }
    *h = (held_answer){resp->body, n};
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback_cls(n, resp->body, answer_release, h);
    if (r == NULL) {
        __atomic_sub_fetch(&answer_held, n, __ATOMIC_RELAXED);
        free(h);
    }
    return r;
}

/* The refusal of an answer of n bytes when `held` are counted already. */
static void answer_refusal(http_response *resp, size_t n, size_t held)
{
    problem p = {0};
    if (n > answer_cap)
        problem_set(&p, PB_ANSWER_MEMORY, NULL,
                    "this answer (%zu bytes) is larger than the whole --answer-memory (%zu "
                    "bytes): ask for a smaller page (limit)",
                    n, answer_cap);
    else
        problem_set(&p, PB_ANSWER_MEMORY, NULL,
                    "answers waiting to be read hold %zu of the %zu bytes of --answer-memory: "
                    "retry after 1 s, or ask for a smaller page (limit)",
                    held, answer_cap);
    int close = resp->close;
    *resp = (http_response){0};
    http_reply_problem(resp, &p);
    resp->close = close;
    resp->extra_name = "Retry-After";
    resp->extra_value = "1";
}

static MHD_RESULT send_response(struct MHD_Connection *c, http_response *resp, req_ctx *ctx)
{
    int refused;
    size_t held = 0, n = resp->body_len;
    /* the open routes' answers (probes, metrics, the OpenAPI document, the dashboard) are of
     * a size no caller chooses: never counted, never refused */
    int counted = !(ctx && ctx->rt && ctx->rt->scope == SCOPE_NONE);
    struct MHD_Response *r = answer_response(resp, counted, &refused, &held);
    if (refused) {
        free(resp->body);
        answer_refusal(resp, n, held);
        metrics_answer_refused();
        r = answer_response(resp, counted, &refused, &held); /* small: never refused */
    }
    if (ctx)
        ctx->status = resp->status;
    if (r == NULL) {
        free(resp->body);
        resp->body = NULL;
        return MHD_NO;
    }
    resp->body = NULL;
    if (resp->content_type) /* none on a 204 */
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    for (size_t i = 0; i < sizeof EVERY_ANSWER / sizeof EVERY_ANSWER[0]; i++)
        MHD_add_response_header(r, EVERY_ANSWER[i][0], EVERY_ANSWER[i][1]);
    conventions(c, r, resp, ctx);
    if (resp->allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, resp->allow);
    if (resp->etag[0])
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, resp->etag);
    if (resp->extra_name)
        MHD_add_response_header(r, resp->extra_name, resp->extra_value);
    /* libmicrohttpd closes the connection after a response saying so */
    if (resp->close || __atomic_load_n(&draining, __ATOMIC_RELAXED))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (ctx && ctx->id[0])
        MHD_add_response_header(r, "X-Request-Id", ctx->id);
    MHD_RESULT ret = MHD_queue_response(c, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

static MHD_RESULT send_problem(struct MHD_Connection *c, problem *p, req_ctx *ctx)
{
    http_response resp = {0};
    http_reply_problem(&resp, p);
    return send_response(c, &resp, ctx);
}

/* API keys: 0 when the request may proceed, else a problem is queued (401/403/429). */
static int check_key(http_server *s, struct MHD_Connection *c, req_ctx *ctx, const char *method,
                     const char *url, MHD_RESULT *ret)
{
    auth_table *t = s->cfg.auth;
    int scope = auth_enabled(t) ? httproute_scope(s->cfg.routes, ctx->rt, url, s->cfg.open_compute)
                                : SCOPE_NONE;
    if (scope == SCOPE_NONE)
        return 0;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    ctx->key = auth_find(t, h);
    problem p = {0};
    http_response resp = {0};
    double wait = 0.0;
    if (ctx->key == NULL) {
        problem_set(&p, PB_UNAUTHORIZED, NULL,
                    h ? "the API key is not valid: send 'Authorization: Bearer <token>' with a "
                        "configured key"
                      : "this endpoint needs an API key: send 'Authorization: Bearer <token>'");
        resp.extra_name = "WWW-Authenticate";
        resp.extra_value = "Bearer realm=\"dpbudget\"";
    } else if (!auth_take(t, ctx->key, dpb_mono_s(), &wait)) {
        /* before the scope: every request made with a key counts, refused ones too */
        char rate[DPB_NUM_MAX];
        problem_set(&p, PB_RATE_LIMITED, NULL,
                    "the key '%s' is over its limit of %s requests per second: retry after %.0f "
                    "s",
                    auth_name(ctx->key), dpb_num_str(t->rate, rate), ceil(wait));
        snprintf(resp.extra_buf, sizeof resp.extra_buf, "%.0f",
                 ceil(wait) < 1.0 ? 1.0 : ceil(wait));
        resp.extra_name = "Retry-After";
        resp.extra_value = resp.extra_buf;
    } else if (!auth_allows(ctx->key, scope)) {
        problem_set(&p, PB_FORBIDDEN, NULL, "the key '%s' lacks the '%s' scope %s %.100s needs",
                    auth_name(ctx->key),
                    scope == SCOPE_ADMIN    ? "admin"
                    : scope == SCOPE_CHARGE ? "charge"
                                            : "read",
                    method, url);
    } else {
        return 0;
    }
    metrics_denied(problem_http_status(p.code));
    ctx->answered = 1;
    http_reply_problem(&resp, &p);
    *ret = send_response(c, &resp, ctx);
    return 1;
}

/* The head's own checks (edge.h): 0 when the request may proceed, else a problem is queued
 * (400/431), with Connection: close when the connection's next bytes cannot be trusted. */
static int refuse_head(http_server *s, struct MHD_Connection *c, req_ctx *ctx, const char *version,
                       MHD_RESULT *ret)
{
    problem p = {0};
    http_response resp = {0};
    if (edge_check_head(s->edge, c, version, s->cfg.max_header_bytes, &p, &resp.close) == PB_NONE)
        return 0;
    ctx->answered = 1;
    http_reply_problem(&resp, &p);
    *ret = send_response(c, &resp, ctx);
    return 1;
}

/* application/json, optionally with parameters (charset=utf-8); absent is accepted. */
static int json_content_type(const char *ct)
{
    if (ct == NULL)
        return 1;
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    return strncasecmp(ct, "application/json", n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* Does this request go to the compute pool? The compute lane's routes, unless the route's
 * light test can tell cheaply that it is light (closed forms, a cached model). */
static int wants_pool(http_request *req, req_ctx *ctx)
{
    const route *r = ctx->rt;
    if (!(r && r->lane == LANE_COMPUTE))
        return 0;
    if (r->light == NULL)
        return 1;
    int light = r->light(req, &ctx->parsed);
    req->parsed = ctx->parsed; /* freed in on_completed, after the handler, wherever it ran */
    return !light;
}

/* On a pool thread: run the handler under the job's deadline and the pool's stop flag, then
 * hand the connection back to its HTTP worker (the last touch of the job). */
static void run_compute(void *arg, const int *stop)
{
    compute_job *j = arg;
    j->cancel.flag = stop;
    j->cancel.deadline = j->deadline_s > 0.0 ? dpb_cancel_now() + j->deadline_s : 0.0;
    j->req.cancel = &j->cancel;
    j->req.deadline_s = j->deadline_s;
    if (__atomic_load_n(stop, __ATOMIC_RELAXED) && !j->ledger) {
        problem p = {0};
        problem_set(&p, PB_OVERLOADED, NULL, "the server is stopping: retry on another instance");
        http_reply_problem(&j->resp, &p);
    } else {
        httproute_dispatch(j->routes, &j->req, &j->resp, j->rt, j->param);
    }
    if (!j->ledger)
        metrics_compute_busy(-1);
    MHD_resume_connection(j->conn);
}

/* The ledger lane of this request's route (route.lane, routes.h), or NULL. The ledger's
 * writes wait for the log's fdatasync and a pld round may compute PLDs first; its reads wait
 * on its lock and, with --ledger-url, on the database; an HTTP worker that did either would
 * keep every connection it serves (probes among them) waiting. */
static workpool *ledger_lane(http_server *s, const route *r, const req_ctx *ctx,
                             const http_request *req)
{
    if (r && r->lane == LANE_LEDGER) {
        if (ctx->len > HTTP_BULK_BODY)
            return s->bpool;
        if (r->light == NULL)
            return s->lpool;
        /* the route's small test (routes.h), which never waits on the ledger */
        char seg[300];
        http_request q = *req;
        q.param = r->prefix && ctx->param ? httproute_param(r, ctx->param, seg, sizeof seg) : NULL;
        json_t *parsed = NULL;
        int small = r->light(&q, &parsed);
        json_decref(parsed);
        return small ? s->lpool : s->bpool;
    }
    if (r && r->lane == LANE_LEDGER_READ)
        return s->rpool;
    if (r && r->lane == LANE_LEDGER_COMPUTE)
        return s->epool;
    return NULL;
}

/* 503 overloaded with Retry-After: every place of lane p (a ledger lane, or the compute
 * pool: what) is taken. */
static MHD_RESULT refuse_full(struct MHD_Connection *c, req_ctx *ctx, workpool *p, const char *what)
{
    unsigned busy = 0, cap = 0, after = workpool_retry_after(p);
    workpool_load(p, &busy, &cap);
    problem pb = {0};
    problem_set(&pb, PB_OVERLOADED, NULL, "all %u places %s are taken: retry after %u s", cap, what,
                after);
    http_response resp = {0};
    http_reply_problem(&resp, &pb);
    snprintf(resp.extra_buf, sizeof resp.extra_buf, "%u", after);
    resp.extra_name = "Retry-After";
    resp.extra_value = resp.extra_buf;
    return send_response(c, &resp, ctx);
}

/* Take a place on the ledger lane p and suspend the connection until the request is done;
 * 503 overloaded with Retry-After when the lane is full (a flood, or a database that does not
 * answer holding the lane's threads): the worker never waits on the ledger. */
static MHD_RESULT start_ledger(http_server *s, workpool *p, struct MHD_Connection *c, req_ctx *ctx,
                               const http_request *req)
{
    compute_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        problem pb = {0};
        problem_oom(&pb);
        return send_problem(c, &pb, ctx);
    }
    if (workpool_reserve(p) != 0) {
        free(j);
        char what[112];
        snprintf(what, sizeof what, "for ledger %s (%u running, %u waiting)",
                 p == s->lpool   ? "writes"
                 : p == s->bpool ? "writes of large bodies"
                 : p == s->rpool ? "reads"
                                 : "computations (eligibility)",
                 p == s->lpool   ? HTTP_LEDGER_THREADS
                 : p == s->bpool ? HTTP_BULK_THREADS
                 : p == s->rpool ? HTTP_READ_THREADS
                                 : s->ethreads,
                 p == s->lpool   ? HTTP_LEDGER_QUEUE
                 : p == s->bpool ? HTTP_BULK_QUEUE
                 : p == s->rpool ? HTTP_READ_QUEUE
                                 : HTTP_ELIG_QUEUE);
        return refuse_full(c, ctx, p, what);
    }
    j->req = *req;
    j->routes = s->cfg.routes;
    j->rt = ctx->rt;
    j->param = ctx->param;
    j->conn = c;
    j->ledger = 1;
    j->deadline_s = s->cfg.ledger_deadline; /* for the requests that compute (eligibility) */
    ctx->job = j;
    MHD_suspend_connection(c); /* before the push: the job's resume must follow it */
    workpool_push(p, run_compute, j);
    return MHD_YES;
}

/* Take a place on the pool and suspend the connection until the job is done, or answer 503
 * overloaded with Retry-After when every place is taken. */
static MHD_RESULT start_compute(http_server *s, struct MHD_Connection *c, req_ctx *ctx,
                                const http_request *req)
{
    compute_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        problem p = {0};
        problem_oom(&p);
        return send_problem(c, &p, ctx);
    }
    if (workpool_reserve(s->pool) != 0) {
        free(j);
        metrics_compute_refused();
        return refuse_full(c, ctx, s->pool,
                           "for computations (--compute-threads running, --compute-queue "
                           "waiting)");
    }
    j->req = *req;
    j->routes = s->cfg.routes;
    j->rt = ctx->rt;
    j->param = ctx->param;
    j->conn = c;
    j->deadline_s = s->cfg.compute_deadline;
    ctx->job = j;
    metrics_compute_busy(1);
    MHD_suspend_connection(c); /* before the push: the job's resume must follow it */
    workpool_push(s->pool, run_compute, j);
    return MHD_YES;
}

/* The largest body a request to route r may carry (r may be NULL). */
static size_t body_limit(const http_config *cfg, const route *r)
{
    if (r && r->bulk && cfg->max_bulk_body > cfg->max_body)
        return cfg->max_bulk_body;
    return cfg->max_body;
}

/* MHD_get_connection_values' callback: counts the traceparent field lines. */
static MHD_RESULT count_traceparent(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    (void)value;
    if (key && strcasecmp(key, "traceparent") == 0)
        ++*(int *)cls;
    return MHD_YES;
}

/* The request's traceparent (tracectx.h) into *t, when there is exactly one field line and it
 * is valid; else *t stays empty: an invalid or repeated one is ignored, never refused. */
static void read_traceparent(struct MHD_Connection *c, tracectx *t)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "traceparent");
    int lines = 0;
    if (v) /* the headers are walked only when there is one */
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_traceparent, &lines);
    (void)tracectx_parse(lines == 1 ? v : NULL, t);
}

/* OPTIONS on a path some route serves: 204 with Allow, without a key (a browser's CORS
 * preflight never carries one) and without counting against any key's rate limit; the
 * Access-Control-* headers are added for an allowed Origin (conventions). Answered once the
 * request is read (a body, if any, is discarded), so that the connection stays open. */
static MHD_RESULT answer_options(http_server *s, struct MHD_Connection *c, req_ctx *ctx,
                                 const char *url)
{
    http_response resp = {0};
    resp.status = 204;
    resp.allow = httproute_allow(s->cfg.routes, url);
    return send_response(c, &resp, ctx);
}

static MHD_RESULT on_request(void *cls, struct MHD_Connection *c, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_size, void **con_cls)
{
    http_server *s = cls;
    req_ctx *ctx = *con_cls;
    if (ctx == NULL) {
        /* First call: headers only. Decide early what we can. */
        ctx = calloc(1, sizeof *ctx);
        if (ctx == NULL)
            return MHD_NO;
        *con_cls = ctx;
        __atomic_fetch_add(&s->active, 1, __ATOMIC_ACQ_REL);
        cur_conn = c;
        cur_ctx = ctx;
        ctx->t0 = dpb_mono_s();
        ctx->route = httproute_index(s->cfg.routes, method, url, &ctx->rt, &ctx->param);
        ctx->method = metrics_method(method);
        for (size_t i = 0; method[i] && i + 1 < sizeof ctx->verb; i++)
            ctx->verb[i] = (method[i] >= 'A' && method[i] <= 'Z') ? method[i] : '?';
        request_id(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id"), ctx->id);
        read_traceparent(c, &ctx->trace);
        MHD_RESULT ret;
        if (refuse_head(s, c, ctx, version, &ret))
            return ret;
        if (strcmp(method, "OPTIONS") == 0 && ctx->route >= 0) {
            ctx->preflight = 1; /* answered once the request is read (keep-alive) */
            return MHD_YES;
        }
        if (check_key(s, c, ctx, method, url, &ret))
            return ret;
        const route *r = ctx->rt;
        ctx->limit = body_limit(&s->cfg, r);
        if (r && r->json_body) {
            problem p = {0};
            const char *cl =
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            const char *ct =
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
            unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
            if (declared <= ctx->limit)
                ctx->declared = (size_t)declared;
            if (declared > ctx->limit) {
                problem_set(&p, PB_BODY_TOO_LARGE, NULL,
                            "the body is %s bytes; at most %zu are accepted", cl, ctx->limit);
            } else if (!json_content_type(ct)) {
                problem_set(&p, PB_UNSUPPORTED_MEDIA, NULL,
                            "Content-Type is '%.80s'; send the body as application/json", ct);
            }
            if (p.code != PB_NONE) {
                ctx->answered = 1;
                return send_problem(c, &p, ctx);
            }
        }
        return MHD_YES;
    }
    cur_conn = c;
    cur_ctx = ctx;
    if (ctx->answered) {
        *upload_size = 0; /* discard */
        return MHD_YES;
    }
    if (*upload_size > 0 && s->cfg.request_timeout &&
        dpb_mono_s() - ctx->t0 > (double)s->cfg.request_timeout) {
        /* a slow sender: drop the connection rather than let it hold resources */
        ctx->status = 408;
        return MHD_NO;
    }
    if (ctx->preflight && *upload_size > 0) {
        *upload_size = 0; /* an OPTIONS body means nothing here: discarded */
        return MHD_YES;
    }
    if (*upload_size > 0) {
        /* libmicrohttpd 0.9.75 cannot queue a response while it hands us upload data: past
         * the cap, discard the rest and answer 413 on the final call. */
        if (ctx->too_large || *upload_size > ctx->limit - ctx->len) {
            ctx->too_large = 1;
            *upload_size = 0;
            return MHD_YES;
        }
        if (ctx->len + *upload_size > ctx->cap) {
            /* the declared length when there is one (within the cap): one allocation of
             * the body's size */
            size_t ncap = ctx->cap ? ctx->cap : ctx->declared ? ctx->declared : 1024;
            while (ncap < ctx->len + *upload_size)
                ncap *= 2;
            if (ncap > ctx->limit)
                ncap = ctx->limit;
            char *nb = realloc(ctx->buf, ncap);
            if (nb == NULL)
                return MHD_NO;
            ctx->buf = nb;
            ctx->cap = ncap;
        }
        memcpy(ctx->buf + ctx->len, upload, *upload_size);
        ctx->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    if (ctx->too_large) {
        problem p = {0};
        problem_set(&p, PB_BODY_TOO_LARGE, NULL, "the body exceeds %zu bytes", ctx->limit);
        return send_problem(c, &p, ctx);
    }
    /* Final call: the whole body is here. */
    if (ctx->preflight)
        return answer_options(s, c, ctx, url);
    if (ctx->job) /* called again after the pool resumed the connection */
        return send_response(c, &ctx->job->resp, ctx);
    http_request req = {
        method, url,     ctx->buf ? ctx->buf : "", ctx->len, NULL, s->cfg.app, c, NULL, 0.0,
        NULL,   ctx->key};
    if (s->pool && wants_pool(&req, ctx))
        return start_compute(s, c, ctx, &req);
    workpool *lane = ledger_lane(s, ctx->rt, ctx, &req);
    if (lane)
        return start_ledger(s, lane, c, ctx, &req);
    http_response resp = {0};
    httproute_dispatch(s->cfg.routes, &req, &resp, ctx->rt, ctx->param);
    return send_response(c, &resp, ctx);
}

/* Writes a whole answer to the connection's socket at once (plain TCP), for the refusals
 * libmicrohttpd would send with a doubled head (mhdwrap_doubles_head); 0 when it was
 * written whole. The bytes libmicrohttpd would have sent: status line, Date, the service's
 * headers, Content-Length, the body. */
static int write_answer(struct MHD_Connection *c, const http_response *resp, const char *id)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL || resp->body == NULL)
        return -1;
    char date[64], head[512];
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL ||
        strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
        return -1;
    const char *reason = MHD_get_reason_phrase_for((unsigned)resp->status);
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nConnection: close\r\nContent-Type: %s\r\n"
                     "Cache-Control: no-store\r\n",
                     resp->status, reason ? reason : "", date, resp->content_type);
    for (size_t i = 0; i < sizeof EVERY_ANSWER / sizeof EVERY_ANSWER[0] && n >= 0; i++)
        if ((size_t)n < sizeof head)
            n += snprintf(head + n, sizeof head - (size_t)n, "%s: %s\r\n", EVERY_ANSWER[i][0],
                          EVERY_ANSWER[i][1]);
    if (n >= 0 && (size_t)n < sizeof head)
        n += snprintf(head + n, sizeof head - (size_t)n,
                      "X-Request-Id: %s\r\nContent-Length: %zu\r\n\r\n", id, resp->body_len);
    if (n < 0 || (size_t)n >= sizeof head)
        return -1;
    struct iovec iov[2] = {{head, (size_t)n}, {resp->body, resp->body_len}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t w = sendmsg(ci->connect_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w != (ssize_t)((size_t)n + resp->body_len))
        return -1;
    (void)shutdown(ci->connect_fd, SHUT_WR); /* the answer is all: FIN before the close */
    return 0;
}

/* libmicrohttpd's own refusals (mhdwrap.h): the problem+json, headers, request id, count and
 * log line of any answer, and Connection: close (the library closes the connection after a
 * refusal in any case). A refusal raised while a body was being read belongs to a request
 * the handler has seen (its id, route and log line); one raised on the head, to none yet. */
static MHD_RESULT library_answer(struct MHD_Connection *c, unsigned status, const char *body)
{
    const http_config *cfg = lib_cfg;
    problem p = {0};
    mhdwrap_problem(status, body, cfg ? cfg->max_header_bytes : 0, &p);
    http_response resp = {0};
    http_reply_problem(&resp, &p);
    resp.close = 1;
    req_ctx own = {0};
    req_ctx *ctx = cur_conn == c && cur_ctx != NULL ? cur_ctx : NULL;
    if (ctx == NULL) {
        ctx = &own;
        ctx->route = -1;
        ctx->method = metrics_method(NULL);
        request_id(NULL, ctx->id);
    }
    ctx->answered = 1;
    MHD_RESULT ret;
    if (cfg && !cfg->tls && mhdwrap_doubles_head(status, body) &&
        write_answer(c, &resp, ctx->id) == 0) {
        /* written: the library closes the connection without sending anything itself */
        ctx->status = resp.status;
        free(resp.body);
        ret = MHD_NO;
    } else {
        ret = send_response(c, &resp, ctx);
    }
    if (ctx == &own) { /* no request context: counted and logged here, not in on_completed */
        metrics_request(-1, ctx->method, ctx->status, 0.0);
        if (cfg && cfg->log_requests)
            reqlog_request(ctx->id, "-", NULL, ctx->status, 0.0, auth_name(NULL), 0, NULL);
    }
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_server *s = cls;
    req_ctx *ctx = *con_cls;
    edge_request_done(s->edge, c);
    if (ctx) {
        double dt = dpb_mono_s() - ctx->t0;
        if (ctx->status)
            metrics_request(ctx->route, ctx->method, ctx->status, dt);
        const route *r = ctx->route >= 0 ? &s->cfg.routes[ctx->route] : NULL;
        /* probes and scrapes are counted, not logged (they would fill the log) */
        int quiet = r && ctx->status == 200 && r->quiet;
        if (s->cfg.log_requests && !quiet)
            reqlog_request(ctx->id, ctx->verb, r, ctx->status, dt, auth_name(ctx->key),
                           toe != MHD_REQUEST_TERMINATED_COMPLETED_OK, &ctx->trace);
        auth_key_release(ctx->key); /* the key set it belongs to may now be freed */
        if (ctx->job) {
            free(ctx->job->resp.body); /* NULL once sent */
            free(ctx->job);
        }
        json_decref(ctx->parsed);
        free(ctx->buf);
        if (cur_ctx == ctx) {
            cur_conn = NULL;
            cur_ctx = NULL;
        }
        free(ctx);
        *con_cls = NULL;
        __atomic_fetch_sub(&s->active, 1, __ATOMIC_ACQ_REL);
    }
}

/* The TLS options (tls.h): priorities, the reloadable certificate, the handshake deadline. */
static int tls_options(const http_config *cfg, struct MHD_OptionItem *opts)
{
    const char *prio = cfg->tls_priorities ? cfg->tls_priorities : TLS_DEFAULT_PRIORITIES;
    if (tls_start(opts, prio) != 0) {
        fprintf(stderr, "dpbudgetd: cannot set up TLS (no certificate loaded)\n");
        return -1;
    }
    return 0;
}

/* The lanes' threads. Those whose work the caller's input sizes (the compute pool,
 * eligibility, the large writes) are background threads (cpuprio.h): below the others'
 * priority (nice + HTTP_LOW_NICE) and off one CPU. */
static int start_pool(http_server *s)
{
    unsigned n = s->cfg.compute_threads;
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (unsigned)c : 1;
    }
    s->pool = workpool_create(n, s->cfg.compute_queue, HTTP_LOW_NICE, "dpb-compute");
    if (s->pool == NULL) {
        fprintf(stderr, "dpbudgetd: cannot start %u compute threads\n", n);
        return -1;
    }
    metrics_compute_capacity(n + s->cfg.compute_queue);
    /* the ledger lane: enough threads for writes to share the log's group commit, and a
     * queue deep enough that only a flood is refused */
    s->lpool = workpool_create(HTTP_LEDGER_THREADS, HTTP_LEDGER_QUEUE, 0, "dpb-write");
    s->bpool = s->lpool ? workpool_create(HTTP_BULK_THREADS, HTTP_BULK_QUEUE, HTTP_LOW_NICE,
                                          "dpb-write-large")
                        : NULL;
    s->rpool = s->bpool ? workpool_create(HTTP_READ_THREADS, HTTP_READ_QUEUE, 0, "dpb-read") : NULL;
    /* the ledger's computing requests: one thread fewer than the CPUs, so that a flood of
     * them (each may compute for seconds) leaves a core to every other request */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->ethreads = cpus > 2 ? (unsigned)cpus - 1 : 1;
    s->epool = s->rpool
                   ? workpool_create(s->ethreads, HTTP_ELIG_QUEUE, HTTP_LOW_NICE, "dpb-eligibility")
                   : NULL;
    if (s->epool == NULL) {
        fprintf(stderr, "dpbudgetd: cannot start %u ledger threads\n",
                HTTP_LEDGER_THREADS + HTTP_BULK_THREADS + HTTP_READ_THREADS + s->ethreads);
        workpool_free(s->rpool);
        workpool_free(s->bpool);
        workpool_free(s->lpool);
        workpool_free(s->pool);
        s->pool = s->lpool = s->bpool = s->rpool = NULL;
        return -1;
    }
    return 0;
}

http_server *http_start(const http_config *cfg)
{
    http_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->cfg = *cfg;
    s->listen_fd = MHD_INVALID_SOCKET;
    __atomic_store_n(&draining, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&answer_cap, cfg->answer_memory, __ATOMIC_RELAXED);
    /* the first head's deadline counts from accept: with TLS, the handshake's too */
    s->edge = edge_start(cfg->tls ? cfg->tls_handshake_timeout : cfg->header_timeout,
                         cfg->header_timeout, cfg->conn_timeout);
    if (s->edge == NULL) {
        fprintf(stderr, "dpbudgetd: cannot start the connection reaper: out of resources\n");
        free(s);
        return NULL;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, cfg->listen_addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)cfg->port);
    } else if (inet_pton(AF_INET6, cfg->listen_addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)cfg->port);
        flags |= MHD_USE_IPv6;
    } else {
        fprintf(stderr, "dpbudgetd: --listen '%s' is not an IPv4 or IPv6 address\n",
                cfg->listen_addr);
        edge_stop(s->edge);
        free(s);
        return NULL;
    }
    unsigned threads = cfg->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    if (mhdwrap_start(library_answer) != 0)
        fprintf(stderr, "dpbudgetd: warning: libmicrohttpd's own refusals of malformed requests "
                        "will be HTML, not problem+json (its functions cannot be interposed in "
                        "this build)\n");
    struct MHD_OptionItem tls[TLS_NOPTIONS] = {{MHD_OPTION_END, 0, NULL}};
    if (cfg->tls && tls_options(cfg, tls) != 0) {
        edge_stop(s->edge);
        free(s);
        return NULL;
    }
    if (cfg->tls)
        flags |= MHD_USE_TLS;
    lib_cfg = &s->cfg; /* before any worker thread exists */
    s->d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT, cfg->conn_timeout,
        MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        connection_memory(cfg->max_header_bytes), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        cfg->max_connections_per_ip, MHD_OPTION_NOTIFY_CONNECTION, edge_on_connection, s->edge,
        MHD_OPTION_URI_LOG_CALLBACK, edge_on_uri, s->edge, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    if (s->d == NULL) {
        fprintf(stderr, "dpbudgetd: cannot listen on %s port %u: %s\n", cfg->listen_addr, cfg->port,
                errno ? strerror(errno) : "libmicrohttpd refused to start");
        lib_cfg = NULL;
        tls_release();
        edge_stop(s->edge);
        free(s);
        return NULL;
    }
    if (start_pool(s) != 0) {
        MHD_stop_daemon(s->d);
        lib_cfg = NULL;
        tls_release();
        edge_stop(s->edge);
        free(s);
        return NULL;
    }
    if (s->cfg.log_requests)
        (void)reqlog_start(); /* else (no thread) each line is written at once */
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : cfg->port;
    return s;
}

unsigned http_port(const http_server *s)
{
    return s->port;
}

void http_drain_begin(http_server *s)
{
    (void)s;
    __atomic_store_n(&draining, 1, __ATOMIC_RELAXED);
}

int http_quiesce(http_server *s)
{
    http_drain_begin(s);
    if (s->listen_fd != MHD_INVALID_SOCKET)
        return 0;
    s->listen_fd = MHD_quiesce_daemon(s->d);
    if (s->listen_fd == MHD_INVALID_SOCKET)
        return -1;
    /* libmicrohttpd no longer accepts, but the kernel would still complete handshakes into
     * the backlog (clients then wait for nothing): on Linux, shutting the listening socket
     * down makes it refuse them at once. The descriptor is closed after the daemon stops. */
    (void)shutdown(s->listen_fd, SHUT_RDWR);
    return 0;
}

unsigned http_in_flight(http_server *s)
{
    int n = __atomic_load_n(&s->active, __ATOMIC_ACQUIRE);
    return n > 0 ? (unsigned)n : 0u;
}

void http_stop(http_server *s)
{
    if (s == NULL)
        return;
    /* the compute jobs first: they stop early and resume their connections, which libmicrohttpd
     * needs before it stops; requests that come meanwhile are refused (503) */
    workpool_stop(s->pool);
    workpool_stop(s->lpool);
    workpool_stop(s->bpool);
    workpool_stop(s->rpool);
    workpool_stop(s->epool);
    MHD_stop_daemon(s->d);
    if (s->listen_fd != MHD_INVALID_SOCKET)
        close(s->listen_fd);
    if (lib_cfg == &s->cfg)
        lib_cfg = NULL;
    if (s->cfg.log_requests)
        reqlog_stop(); /* the buffered request lines: after the last request's */
    tls_release();
    edge_stop(s->edge);
    workpool_free(s->pool);
    workpool_free(s->lpool);
    workpool_free(s->bpool);
    workpool_free(s->rpool);
    workpool_free(s->epool);
    free(s);
}
