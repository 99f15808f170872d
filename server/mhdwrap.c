/* mhdwrap.c - libmicrohttpd's own refusals, answered in the service's format (mhdwrap.h). */
#define _GNU_SOURCE /* RTLD_NEXT, RTLD_DEFAULT */
#include "mhdwrap.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef MHD_RESULT (*queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

static mhdwrap_answer answer_fn;
static queue_fn library_queue;

/* The response the library made last on this thread, and its body: it queues it next. */
static _Thread_local struct MHD_Response *made;
static _Thread_local const char *made_body;

static queue_fn find_library_queue(void)
{
    queue_fn q = __atomic_load_n(&library_queue, __ATOMIC_ACQUIRE);
    if (q == NULL) {
        void *sym = dlsym(RTLD_NEXT, "MHD_queue_response");
        if (sym != NULL) {
            /* the object-to-function-pointer conversion dlsym requires (POSIX) */
            memcpy(&q, &sym, sizeof q);
            __atomic_store_n(&library_queue, q, __ATOMIC_RELEASE);
        }
    }
    return q;
}

/* Called only by libmicrohttpd (for its refusals): the service uses the _with_free_callback
 * constructor. The same response as the library's own function makes. */
struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
                                                     enum MHD_ResponseMemoryMode mode)
{
    void *own = NULL;
    if (mode == MHD_RESPMEM_MUST_COPY && size > 0) {
        own = malloc(size);
        if (own == NULL)
            return NULL;
        memcpy(own, buffer, size);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(
        size, own ? own : buffer, own || mode == MHD_RESPMEM_MUST_FREE ? free : NULL);
    if (r == NULL) {
        free(own);
        return NULL;
    }
    made = r;
    made_body = size > 0 ? (const char *)(own ? own : buffer) : "";
    return r;
}

MHD_RESULT MHD_queue_response(struct MHD_Connection *c, unsigned int status, struct MHD_Response *r)
{
    queue_fn q = find_library_queue();
    if (r != NULL && r == made) {
        made = NULL;
        mhdwrap_answer a = __atomic_load_n(&answer_fn, __ATOMIC_ACQUIRE);
        if (a != NULL)
            return a(c, status, made_body);
    }
    return q ? q(c, status, r) : MHD_NO;
}

int mhdwrap_start(mhdwrap_answer answer)
{
    __atomic_store_n(&answer_fn, answer, __ATOMIC_RELEASE);
    void *first = dlsym(RTLD_DEFAULT, "MHD_queue_response");
    queue_fn ours = MHD_queue_response;
    void *ours_p;
    memcpy(&ours_p, &ours, sizeof ours_p);
    return find_library_queue() != NULL && first == ours_p ? 0 : -1;
}

void mhdwrap_problem(unsigned status, const char *body, size_t max_header_bytes, problem *p)
{
    if (body == NULL)
        body = "";
    switch (status) {
    case 400:
        if (strstr(body, "chunked")) {
            problem_set(p, PB_INVALID_FRAMING, NULL,
                        "the chunked body is malformed (RFC 9112 section 7.1: each chunk is "
                        "its size in hexadecimal, CRLF, its bytes and CRLF; a size of 0 ends "
                        "the body); the connection is closed");
        } else if (strstr(body, "Content-Length")) {
            problem_set(p, PB_INVALID_FRAMING, NULL,
                        "Content-Length must be the body's length in decimal digits (RFC 9112 "
                        "section 6.2); the connection is closed");
        } else if (strstr(body, "Host")) {
            problem_set(p, PB_BAD_REQUEST, NULL,
                        "an HTTP/1.1 request needs exactly one Host header; the connection is "
                        "closed");
        } else {
            problem_set(p, PB_BAD_REQUEST, NULL,
                        "the request line or a header line is not HTTP/1.1 (RFC 9112: a "
                        "request line 'METHOD /path HTTP/1.1', then 'Name: value' lines, each "
                        "ending in CRLF, then an empty line); the connection is closed");
        }
        break;
    case 413:
        problem_set(p, PB_BODY_TOO_LARGE, NULL,
                    strstr(body, "chunk")
                        ? "a chunk's size is larger than any body this service accepts (see "
                          "--max-body); the connection is closed"
                        : "Content-Length is larger than any body this service accepts (see "
                          "--max-body); the connection is closed");
        break;
    case 414:
    case 431:
        problem_set(p, PB_HEADERS_TOO_LARGE, NULL,
                    "the request line and headers are larger than this server accepts (at "
                    "most %zu bytes, --max-header-bytes): send a shorter URL or fewer or "
                    "smaller headers; the connection is closed",
                    max_header_bytes);
        break;
    case 505:
        problem_set(p, PB_HTTP_VERSION, NULL,
                    "this service speaks HTTP/1.1 and HTTP/1.0 only: send the request as "
                    "HTTP/1.1; the connection is closed");
        break;
    default:
        if (status >= 400 && status < 500) {
            problem_set(p, PB_BAD_REQUEST, NULL,
                        "the HTTP layer refused the request (status %u): check it against "
                        "RFC 9112; the connection is closed",
                        status);
        } else {
            problem_set(p, PB_INTERNAL, NULL,
                        "the HTTP layer failed to process the request; retry, and report it "
                        "if it persists");
        }
        break;
    }
}

int mhdwrap_doubles_head(unsigned status, const char *body)
{
    return body != NULL && (status == 400 || status == 413) && strstr(body, "Content-Length");
}
