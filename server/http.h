/*
 * http.h - the HTTP layer: libmicrohttpd glue, one routing table, response helpers. Three
 * files serve it: http.c (the daemon and the request life-cycle), httproute.c (the routing
 * table at work, httproute.h) and httpreply.c (what handlers call to answer: the reply
 * helpers, http_query, http_header, http_not_modified). Handlers call httpreply.c only.
 *
 * Request life-cycle (libmicrohttpd 0.9.75): the access handler is called once with the
 * headers, then with each piece of the body, then once more with none; the body is
 * collected in a capped buffer owned by the per-request context, which the completion
 * callback frees. A body whose Content-Length exceeds the cap is answered 413 at the
 * headers; a chunked body that outgrows it is discarded and answered 413 at its end.
 *
 * Before routing, the head is checked (edge.h: size, framing, Host, %00) and must have
 * arrived within --header-timeout. Then every request, whatever its method or path, passes
 * the same API-key check and rate limit: HEAD is GET without a body; a method no route takes
 * (405) and a path no route matches (404) need a valid key too when keys are configured,
 * unless the path is one of the open ones. A path's {id} segment obeys the id rule
 * (codec.h) before any handler sees it. OPTIONS on a routed path needs no key (a browser's
 * preflight never carries one): 204 with Allow, and with CORS on (cors.h) the
 * Access-Control-* answer for an allowed Origin.
 *
 * Caching (docs/API.md): a GET or HEAD answered 200 or 304 with an ETag says Cache-Control:
 * private, no-cache (kept by the user's agent only, revalidated before each use with
 * If-None-Match), with Vary: Authorization when keys are configured; every other answer says
 * no-store. With CORS on, every answer says Vary: Origin.
 */
#ifndef HTTP_HTTP_H
#define HTTP_HTTP_H

#include <stddef.h>

#include <jansson.h>

#include "../core/common/cancel.h"
#include "jsonout.h"
#include "problem.h"

typedef struct {
    const char *listen_addr;  /* IPv4 or IPv6 literal */
    unsigned port;            /* 0 = ephemeral */
    unsigned threads;         /* worker threads (0 = number of CPUs) */
    size_t max_body;          /* bytes */
    size_t max_bulk_body;     /* bytes, for the routes that carry lists of clients (route.bulk) */
    unsigned conn_timeout;    /* seconds a connection may idle */
    unsigned request_timeout; /* seconds a request's body may take to arrive (slow senders) */
    unsigned max_connections;
    unsigned max_connections_per_ip; /* concurrent connections per client address (0: no cap) */
    unsigned header_timeout;         /* seconds a request head may take to arrive, whole */
    size_t max_header_bytes;         /* request line and headers, else 431 */
    void *app;                       /* handed to every handler as http_request.app */
    /* API keys (auth.h): when non-NULL with keys, every route with a scope needs a key; the
     * set may be reloaded while serving */
    struct auth_table_s *auth;
    int open_compute; /* compute routes stay open even with keys */
    int log_requests; /* one JSON log line per request on stderr */
    /* TLS (tls.h): on when tls is 1, with the credential loaded by tls_load_credentials
     * first; the GnuTLS priority string (NULL: TLS_DEFAULT_PRIORITIES) and the seconds a
     * connection has to finish its handshake and send its first request's headers */
    int tls;
    const char *tls_priorities;
    unsigned tls_handshake_timeout;
    /* Compute requests (the routes on LANE_COMPUTE whose light test does not vouch for them,
     * routes.h) run on their own pool (workpool.h), never on the HTTP workers: compute_threads
     * threads (0 = one per CPU), compute_queue more waiting; beyond that 503 overloaded
     * with Retry-After. compute_deadline: seconds a computation may run before it is
     * stopped (422 compute_deadline_exceeded). */
    unsigned compute_threads, compute_queue;
    double compute_deadline;
    /* Ledger requests (LANE_LEDGER) run with ledger_deadline as their deadline (req.cancel):
     * a handler that computes stops there (422 compute_deadline_exceeded). */
    double ledger_deadline;
    /* Bytes that answers queued to connections may hold, all together (answers of at most
     * HTTP_ANSWER_SMALL bytes are not counted); past it an answer is refused: 503
     * answer_memory_exhausted with Retry-After. 0: no budget. */
    size_t answer_memory;
    /* the routing table (routes.h), terminated by a NULL method; borrowed for the server's
     * life */
    const struct route *routes;
    /* the origins whose pages may call the API (cors.h, --cors-origin); NULL or none: CORS
     * off, no Access-Control-* header is ever sent */
    const struct cors_list_s *cors;
} http_config;

/* Answers this small are never counted nor refused (problems, probes, single entries). */
#define HTTP_ANSWER_SMALL 16384

/* A request as handlers see it: everything borrowed for the duration of the call. */
typedef struct {
    const char *method;
    const char *path;
    const char *body;
    size_t body_len;
    const char *param; /* the path segment after a prefix route ("/v1/clients/{id}") */
    void *app;         /* http_config.app */
    void *conn;        /* the connection (for http_query / http_header); may be NULL */
    /* compute and ledger-lane requests: stops the computation past its deadline (NULL:
     * never), and that deadline in seconds for messages */
    const dpb_cancel *cancel;
    double deadline_s;
    /* the body already parsed as one JSON object (borrowed; NULL: not parsed yet): a handler
     * takes a reference instead of parsing the body again */
    json_t *parsed;
    /* the request's API key (auth.h; held until the answer is sent), NULL when keys are off or
     * the route needs none */
    const struct auth_key *key;
} http_request;

/* A query-string argument or a request header (NULL when absent). */
const char *http_query(const http_request *req, const char *key);
const char *http_header(const http_request *req, const char *key);

/* What a handler produces. body is owned (malloc) and freed by the HTTP layer. */
typedef struct {
    int status;
    const char *content_type; /* static storage */
    char *body;
    size_t body_len;
    const char *allow;                    /* for 405: static storage */
    char etag[48];                        /* sent as ETag when set */
    const char *extra_name, *extra_value; /* one more header (static storage, or extra_buf) */
    char extra_buf[32];
    int close; /* send Connection: close and close the connection after the answer */
} http_response;

/* Sets etag (a strong entity-tag, quotes included) as the response's ETag; then, for a GET
 * or HEAD whose If-None-Match matches it (http_etag_match, over every If-None-Match line),
 * answers 304 without a body and returns 1; else returns 0. */
int http_not_modified(const http_request *req, http_response *resp, const char *etag);

/* 1 when the If-None-Match field value matches etag by RFC 9110 13.1.2: "*", or a list of
 * entity-tags one of which has etag's opaque tag (the weak comparison: W/ is ignored); a
 * value that is not such a list matches nothing (the field is ignored). Pure. */
int http_etag_match(const char *field, const char *etag);

typedef void (*http_handler)(const http_request *req, http_response *resp);

/* Answer JSON: serialises and takes ownership of body (steals the reference). */
void http_reply_json(http_response *resp, int status, json_t *body);

/* Answer JSON text already written (jsonout_finish): takes ownership of body; NULL (the
 * writer failed) answers 503 out_of_memory, as http_reply_json does. */
void http_reply_text(http_response *resp, int status, char *body, size_t len);

/* Answer what w wrote (jsonout.h: complete, its outermost value closed). */
void http_reply_written(http_response *resp, int status, jsonout_w *w);

/* Answer a problem+json for p (releases p->extra). */
void http_reply_problem(http_response *resp, problem *p);

/* Answer static bytes (copied). */
void http_reply_bytes(http_response *resp, int status, const char *content_type, const char *bytes,
                      size_t len);

typedef struct http_server http_server;

/* Start serving; NULL on failure (a message is printed to stderr). */
http_server *http_start(const http_config *cfg);

/* The port actually bound (useful with port 0). */
unsigned http_port(const http_server *s);

/* Stop: computations still running are stopped (503 overloaded), the ledger lanes' requests
 * finish, every connection is closed, and s is freed (after http_quiesce and a wait for
 * http_in_flight, main.c's drain, nothing is in flight any more). */
void http_stop(http_server *s);

/* Stopping in steps (main.c, at SIGTERM): http_drain_begin makes every answer carry
 * Connection: close (serving goes on); http_quiesce stops accepting connections (new ones
 * are refused by the kernel; those open are served on) and returns 0, or -1 if it cannot;
 * http_in_flight counts the requests begun and not yet answered (on any connection and
 * lane); http_stop then stops computations still running (503) and closes everything. */
void http_drain_begin(http_server *s);
int http_quiesce(http_server *s);
unsigned http_in_flight(http_server *s);

#endif
