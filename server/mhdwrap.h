/*
 * mhdwrap.h - libmicrohttpd's own refusals, answered in the service's format (http.c).
 *
 * libmicrohttpd 0.9.75 refuses a few malformed requests itself, before the access handler
 * sees a request, with fixed HTML pages: an unparsable request or header line (400), a
 * request without Host that it catches first (400), a malformed Content-Length or chunked
 * body (400), a Content-Length or chunk size beyond 64 bits (413), a request line or head
 * that outgrows the connection's memory (414, 431), an HTTP version other than 1.x (505),
 * and an internal failure (500). It has no option or callback to change these answers.
 *
 * It builds each one by calling two of its own exported functions,
 * MHD_create_response_from_buffer and then MHD_queue_response, through its procedure
 * linkage table. The dynamic linker resolves those calls to the first definition in the
 * process, and the executable comes first (ELF symbol interposition, the mechanism by which
 * a program replaces malloc). So mhdwrap.c defines both:
 * - MHD_create_response_from_buffer makes the response with the library's other
 *   constructor and remembers it, per thread, with its body: only the library calls it,
 *   since the service creates its responses with MHD_create_response_from_buffer_with_
 *   free_callback;
 * - MHD_queue_response, given that remembered response, queues the service's
 *   problem+json answer in its place (the handler given to mhdwrap_start), and passes
 *   every other response to the library's own MHD_queue_response.
 * The library queues the response on the thread that created it, right after creating it.
 *
 * If the interposition is not in effect (libmicrohttpd linked statically, or built to bind
 * its own calls), mhdwrap_start says so and those refusals stay HTML; the API tests check
 * that they are problem+json.
 */
#ifndef HTTP_MHDWRAP_H
#define HTTP_MHDWRAP_H

#include <stddef.h>

#include <microhttpd.h>

#include "problem.h"

/* What libmicrohttpd's callbacks and MHD_queue_response return, before and after 0.9.70
 * (the server's one spelling of it) */
#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

/* Queues the service's answer to a refusal of libmicrohttpd's: its HTTP status and its own
 * body (HTML; "" when the library was built without messages). */
typedef MHD_RESULT (*mhdwrap_answer)(struct MHD_Connection *c, unsigned status,
                                     const char *library_body);

/* Installs the handler (process-wide). 0 when libmicrohttpd's refusals will reach it, -1
 * when the interposition is not in effect (the library's HTML pages then stay). */
int mhdwrap_start(mhdwrap_answer answer);

/* The problem answering a refusal of libmicrohttpd's, from its status and body:
 * 400 bad_request or invalid_framing, 413 body_too_large, 431 headers_too_large (for 414
 * too: the request line counts in --max-header-bytes), 505 http_version_not_supported,
 * 500 internal. max_header_bytes goes into the 431's sentence. */
void mhdwrap_problem(unsigned status, const char *library_body, size_t max_header_bytes,
                     problem *p);

/* Does libmicrohttpd 0.9.75 send the head of this refusal twice? It does for those it
 * raises while parsing the headers, a malformed (400) or oversized (413) Content-Length:
 * the state machine builds the answer's head again after the refusal has built it. Those
 * answers are written to the socket by the caller and the library told to close. */
int mhdwrap_doubles_head(unsigned status, const char *library_body);

#endif
