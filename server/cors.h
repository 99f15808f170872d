/*
 * cors.h - cross-origin requests (CORS, the Fetch standard): the origins --cors-origin
 * allows, each an exact serialized origin (scheme://host[:port], as browsers send it in the
 * Origin header), and the header values the transport (http.c) sends them. Pure: no I/O.
 *
 * Off by default: with no origin configured no Access-Control-* header is ever sent, and a
 * browser page of another origin cannot read an answer. With origins, an answer to a request
 * whose Origin is one of them carries Access-Control-Allow-Origin: that origin (never "*",
 * never credentials mode: the API key travels in the Authorization header the page sets) and
 * every answer carries Vary: Origin.
 */
#ifndef HTTP_CORS_H
#define HTTP_CORS_H

#include <stddef.h>

#define CORS_MAX_ORIGINS 16
#define CORS_ORIGIN_MAX 272 /* "https://" + a 253-byte host + ":65535", and its NUL */

typedef struct cors_list_s {
    size_t n;
    char origin[CORS_MAX_ORIGINS][CORS_ORIGIN_MAX];
} cors_list;

/* What a preflight is told (Access-Control-Allow-Headers, -Max-Age in seconds: Chromium's own
 * cap) and what an answer lets the page read besides the CORS-safelisted headers
 * (Access-Control-Expose-Headers). */
#define CORS_ALLOW_HEADERS                                                                         \
    "Authorization, Content-Type, If-None-Match, X-Request-Id, traceparent, tracestate"
#define CORS_MAX_AGE "7200"
#define CORS_EXPOSE_HEADERS                                                                        \
    "ETag, Ledger-Read-Only, Retry-After, X-Request-Id, Idempotent-Replayed, WWW-Authenticate, "   \
    "Allow"

/* 0 when s (n bytes) is a serialized origin: "http" or "https", "://", a host of lowercase
 * letters, digits, '-' and '.' (or an IPv6 literal in brackets), an optional ":PORT" (1 to
 * 65535, no leading zero), nothing else (no path, no trailing '/', no userinfo, no "*" or
 * "null"); else -1 with why (a sentence) in err. */
int cors_origin_check(const char *s, size_t n, char *err, size_t errlen);

/* Adds the origins of value (one or more, separated by commas or spaces) to l: 0, or -1 with
 * why in err (an origin not serialized, or more than CORS_MAX_ORIGINS in all). */
int cors_add(cors_list *l, const char *value, char *err, size_t errlen);

/* 1 when origin (the request's Origin header, may be NULL) is exactly one of l's (l may be
 * NULL: none). */
int cors_allows(const cors_list *l, const char *origin);

#endif
