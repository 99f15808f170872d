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
#include <strings.h>

#include <microhttpd.h>

#include "metrics.h"
#include "mhdwrap.h" /* MHD_RESULT, the server's one spelling of it (a type: no call) */

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

/* One entity-tag of an If-None-Match list at *p (after optional whitespace): 1 with its
 * opaque tag (quotes included) at *tag, *len bytes, and *p past it; 0 when what is there is
 * not one (RFC 9110 8.8.3: [W/] DQUOTE *etagc DQUOTE). */
static int next_etag(const char **p, const char **tag, size_t *len)
{
    const char *s = *p;
    if (s[0] == 'W' && s[1] == '/')
        s += 2; /* weak: the weak comparison If-None-Match uses ignores it */
    if (*s != '"')
        return 0;
    const char *e = s + 1;
    /* etagc: %x21 / %x23-7E / obs-text */
    while (*e && *e != '"' && (unsigned char)*e >= 0x21 && *e != 0x7f)
        e++;
    if (*e != '"')
        return 0;
    *tag = s;
    *len = (size_t)(e + 1 - s);
    *p = e + 1;
    return 1;
}

int http_etag_match(const char *field, const char *etag)
{
    if (field == NULL)
        return 0;
    const char *p = field;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '*') { /* any current representation: the resource has one */
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        return *p == '\0';
    }
    size_t elen = strlen(etag);
    int match = 0;
    for (;;) { /* #entity-tag: elements separated by commas, empty ones allowed */
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '\0')
            return match;
        const char *tag;
        size_t len;
        if (!next_etag(&p, &tag, &len))
            return 0; /* not a list of entity-tags: the field is ignored */
        match |= len == elen && memcmp(tag, etag, len) == 0;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ',' && *p != '\0')
            return 0;
    }
}

/* MHD_get_connection_values' callback: does any If-None-Match field line match? */
typedef struct {
    const char *etag;
    int match;
} inm_scan;

static MHD_RESULT inm_line(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    inm_scan *s = cls;
    if (key && value && strcasecmp(key, "If-None-Match") == 0 && http_etag_match(value, s->etag))
        s->match = 1;
    return MHD_YES;
}

int http_not_modified(const http_request *req, http_response *resp, const char *etag)
{
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
    /* every If-None-Match line counts (a list may be split over several, RFC 9110 5.3);
     * only GET and HEAD are answered 304 (13.1.2) */
    inm_scan scan = {etag, 0};
    if (req->conn && req->method &&
        (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0))
        MHD_get_connection_values(req->conn, MHD_HEADER_KIND, inm_line, &scan);
    if (scan.match) {
        free(resp->body);
        resp->body = NULL;
        resp->body_len = 0;
        resp->status = 304;
        resp->content_type = "application/json";
        return 1;
    }
    return 0;
}
