/*
 * edge.h - what is checked of a connection and a request head before routing (http.c).
 *
 * Head deadline: every connection is registered (libmicrohttpd's connection notifications)
 * with the time by which its request head must be complete: accept + --header-timeout for
 * the first request (--tls-handshake-timeout instead with TLS, the handshake included);
 * for later ones on a kept-alive connection, the previous answer + --conn-timeout until the
 * request line is in, then the request line + --header-timeout.
 * A reaper thread shuts down the socket of any connection past its deadline, however
 * steadily it drips bytes (libmicrohttpd's own idle timeout restarts on every byte).
 *
 * Head checks (edge_check_head), on the first call of the access handler, before any
 * authentication or routing: the size of the head (431), message framing (RFC 9112 6.3:
 * Content-Length together with Transfer-Encoding, repeated Content-Length or
 * Transfer-Encoding, a transfer coding other than chunked, a header name that is not a
 * token (RFC 9110 5.6.2) or a folded framing header: 400 and the connection closed, since
 * its next bytes cannot be trusted to start a request), Host on HTTP/1.1, and %00 in
 * the raw URL (libmicrohttpd would decode it to a NUL that silently cuts the path or a
 * query argument short, so "alice%00evil" would address "alice").
 */
#ifndef HTTP_EDGE_H
#define HTTP_EDGE_H

#include <stddef.h>

#include <microhttpd.h>

#include "problem.h"

typedef struct edge edge;

/* Start the registry and its reaper (NULL when out of memory or threads): seconds for the
 * first request's head from accept (TLS: handshake included), for a later head from its
 * request line, and for the idle wait before a later request line. */
edge *edge_start(unsigned first_timeout, unsigned header_timeout, unsigned idle_timeout);
void edge_stop(edge *e);

/* libmicrohttpd callbacks (cls: the edge). */
void edge_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
void *edge_on_uri(void *cls, const char *uri, struct MHD_Connection *c);

/* The head is complete: check it. PB_NONE, or a problem in p; *close is set when the
 * connection must be closed after the answer. */
problem_code edge_check_head(edge *e, struct MHD_Connection *c, const char *version,
                             size_t max_header_bytes, problem *p, int *close);

/* An answer was sent: the connection now idles until its next request line. */
void edge_request_done(edge *e, struct MHD_Connection *c);

#endif
