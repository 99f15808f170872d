/*
 * httpreply.c - what a handler calls to answer (http.h): JSON, written JSON, problem+json,
 * static bytes, 304 Not Modified, and the request's query arguments and headers.
 *
 * May call: jsonout.h, problem.h, metrics.h (a ledger found unreachable is counted), and
 * libmicrohttpd's lookups; never the transport (http.c) or a handler.
 */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "metrics.h"

void http_reply_json(http_response *resp, int status, json_t *body)
{
    size_t n = 0;
    char *s = body ? jsonout_dump(body, &n) : NULL;
    json_decref(body);
    http_reply_text(resp, status, s, n);
}

void http_reply_written(http_response *resp, int status, jsonout_w *w)
{
    size_t n = 0;
    char *s = jsonout_finish(w, &n);
    http_reply_text(resp, status, s, n);
}

void http_reply_text(http_response *resp, int status, char *s, size_t n)
{
    if (s == NULL) {
        static const char oom[] = "{\"type\":\"urn:dpbudget:problem:out_of_memory\",\"title\":"
                                  "\"Out of memory\",\"status\":503,\"code\":\"out_of_memory\","
                                  "\"detail\":\"out of memory: retry later\"}";
        http_reply_bytes(resp, 503, "application/problem+json", oom, sizeof oom - 1);
        return;
    }
    free(resp->body);
    resp->status = status;
    resp->content_type = status >= 400 ? "application/problem+json" : "application/json";
    resp->body = s; /* the one buffer: libmicrohttpd sends and frees it */
    resp->body_len = n;
}

void http_reply_problem(http_response *resp, problem *p)
{
    /* a failure path that recorded no problem is an internal error, answered as one (500,
     * the body saying so), never a 200 holding a problem document */
    if (p->code == PB_NONE)
        p->code = PB_INTERNAL;
    problem_code c = p->code;
    http_reply_json(resp, problem_http_status(c), problem_to_json(p));
    if (c == PB_LEDGER_UNAVAILABLE) { /* whichever route found the database unreachable */
        resp->extra_name = "Retry-After";
        resp->extra_value = PROBLEM_LEDGER_RETRY_AFTER;
        metrics_ledger_unavailable();
    }
}

void http_reply_bytes(http_response *resp, int status, const char *content_type, const char *bytes,
                      size_t len)
{
    free(resp->body);
    resp->body = malloc(len ? len : 1);
    resp->status = status;
    resp->content_type = content_type;
    resp->body_len = resp->body ? len : 0;
    if (resp->body)
        memcpy(resp->body, bytes, len);
    else
        resp->status = 503;
}

const char *http_query(const http_request *req, const char *key)
{
    return req->conn ? MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key) : NULL;
}

const char *http_header(const http_request *req, const char *key)
{
    return req->conn ? MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, key) : NULL;
}

int http_not_modified(const http_request *req, http_response *resp, const char *etag)
{
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
    const char *inm = http_header(req, "If-None-Match");
    if (inm && strcmp(inm, etag) == 0) {
        free(resp->body);
        resp->body = NULL;
        resp->body_len = 0;
        resp->status = 304;
        resp->content_type = "application/json";
        return 1;
    }
    return 0;
}
