/* edge.c - head deadlines and head checks (see edge.h). */
#include "edge.h"

#include "../core/ledger/ledger.h"
#include "metrics.h"
#include "../core/common/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

/* One connection, from accept to close, linked in the registry (under the lock: only
 * connections opening and closing take it). deadline is the one field the reaper shares
 * with the connection's own thread: an atomic, so no request takes the lock; answered and
 * the URL flags belong to that thread alone (a connection is served by one thread). */
typedef struct conn {
    struct conn *prev, *next;
    int fd;
    double deadline;   /* atomic: the head must be complete by then; 0: no head is awaited */
    int answered;      /* requests answered on this connection */
    int nul_in_url;    /* the raw request line held %00 */
    int slash_in_path; /* the raw path (before '?') held %2F: libmicrohttpd decodes it into a
                        * '/', which would move an id's segment boundary */
} conn;

static double deadline_of(conn *c)
{
    double d;
    __atomic_load(&c->deadline, &d, __ATOMIC_ACQUIRE);
    return d;
}

static void set_deadline(conn *c, double d)
{
    __atomic_store(&c->deadline, &d, __ATOMIC_RELEASE);
}

struct edge {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t reaper;
    int stopping;
    conn *head;
    double first_timeout, header_timeout, idle_timeout;
};

static void *reaper_main(void *arg)
{
    edge *e = arg;
    pthread_mutex_lock(&e->lock);
    while (!e->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 200000000L; /* 0.2 s: a deadline is kept to within that */
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&e->wake, &e->lock, &until);
        double now = dpb_mono_s();
        /* under the lock: libmicrohttpd reports a connection closed (and waits for this
         * lock) before it closes the socket, so every fd here is still the connection's */
        for (conn *c = e->head; c; c = c->next) {
            double d = deadline_of(c);
            if (!(d > 0.0 && now > d))
                continue;
            /* bytes the client sent that no thread has read yet: the server is behind (its
             * thread busy), not the client; libmicrohttpd reads whatever arrives as soon as
             * it can, so a client cannot keep bytes waiting here to stay alive */
            int unread = 0;
            if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0)
                continue;
            /* only if the deadline is still the one that passed: a head completed (deadline
             * 0) or a new request's deadline set meanwhile wins */
            double none = 0.0;
            if (!__atomic_compare_exchange(&c->deadline, &d, &none, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE))
                continue;
            shutdown(c->fd, SHUT_RDWR);
            metrics_head_timeout();
        }
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

edge *edge_start(unsigned first_timeout, unsigned header_timeout, unsigned idle_timeout)
{
    edge *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    e->first_timeout = first_timeout;
    e->header_timeout = header_timeout;
    e->idle_timeout = idle_timeout;
    if (pthread_create(&e->reaper, NULL, reaper_main, e) != 0) {
        pthread_cond_destroy(&e->wake);
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
    }
    return e;
}

void edge_stop(edge *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->lock);
    e->stopping = 1;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->reaper, NULL);
    /* libmicrohttpd has reported every connection closed by now (http_stop stops it first) */
    while (e->head) {
        conn *c = e->head;
        e->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void edge_on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    edge *e = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn *c = calloc(1, sizeof *c);
        if (c == NULL || fd == NULL) {
            free(c); /* unregistered: libmicrohttpd's own timeouts still apply */
            *socket_context = NULL;
            return;
        }
        c->fd = fd->connect_fd;
        c->deadline = dpb_mono_s() + e->first_timeout;
        pthread_mutex_lock(&e->lock);
        c->next = e->head;
        if (e->head)
            e->head->prev = c;
        e->head = c;
        pthread_mutex_unlock(&e->lock);
        *socket_context = c;
        return;
    }
    conn *c = *socket_context;
    if (c == NULL)
        return;
    pthread_mutex_lock(&e->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        e->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&e->lock);
    free(c);
    *socket_context = NULL;
}

static conn *conn_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

void *edge_on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
    edge *e = cls;
    conn *c = conn_of(mc);
    if (c == NULL)
        return NULL;
    int nul = 0, slash = 0, in_path = 1;
    for (const char *p = uri; *p && !nul; p++) {
        if (*p == '?')
            in_path = 0;
        else if (*p == '%') {
            nul = p[1] == '0' && p[2] == '0';
            slash |= in_path && p[1] == '2' && (p[2] == 'F' || p[2] == 'f');
        }
    }
    c->nul_in_url = nul;
    c->slash_in_path = slash;
    if (c->answered > 0) /* a kept-alive connection: this request's head starts now */
        set_deadline(c, dpb_mono_s() + e->header_timeout);
    return NULL; /* the request's context is made by the access handler */
}

void edge_request_done(edge *e, struct MHD_Connection *mc)
{
    conn *c = conn_of(mc);
    if (c == NULL)
        return;
    c->answered++;
    set_deadline(c, dpb_mono_s() + e->idle_timeout);
}

/* What the head says about its framing and Host. */
typedef struct {
    int content_length, transfer_encoding, host;
    int te_chunked; /* the one Transfer-Encoding is exactly "chunked" */
    int bad_name;   /* a name that is not a token, or a folded framing header (below) */
} head_facts;

/* A field name is a token (RFC 9110 5.1, 5.6.2): one or more letters, digits and
 * !#$%&'*+-.^_`|~ (ASCII only, whatever the locale). */
static int token_name(const char *k, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)k[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL)))
            return 0;
    }
    return 1;
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t key_size, const char *value, size_t value_size)
{
    head_facts *f = cls;
    (void)kind;
    /* libmicrohttpd 0.9.75 takes any bytes before the colon as the name, whitespace and
     * control characters included ("\vTransfer-Encoding", "Transfer-Encoding "), and
     * appends a folded continuation line (obs-fold) to the name, not the value:
     * "Transfer-Encoding:" + " chunked" becomes a header "Transfer-Encodingchunked". A
     * proxy in front may read such a name as Transfer-Encoding or Content-Length (RFC 9112
     * 5.1, 5.2): refuse every name that is not a token, and those folds, rather than
     * disagree with it. */
    if (!token_name(key, key_size) ||
        (key_size > 14 && strncasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH, 14) == 0) ||
        (key_size > 17 && strncasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING, 17) == 0))
        f->bad_name++;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        f->content_length++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        f->host++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->transfer_encoding++;
        f->te_chunked = value_size == 7 && strncasecmp(value, "chunked", 7) == 0;
    }
    return MHD_YES;
}

problem_code edge_check_head(edge *e, struct MHD_Connection *mc, const char *version,
                             size_t max_header_bytes, problem *p, int *close)
{
    (void)e; /* the connection's own fields: no lock */
    conn *c = conn_of(mc);
    *close = 0;
    if (c)
        set_deadline(c, 0.0); /* the head is in: the body and the answer have their own limits */
    const union MHD_ConnectionInfo *hs =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (hs && hs->header_size > max_header_bytes) {
        *close = 1;
        problem_set(p, PB_HEADERS_TOO_LARGE, NULL,
                    "the request line and headers take %zu bytes; at most %zu are accepted",
                    hs->header_size, max_header_bytes);
        return p->code;
    }
    head_facts f = {0, 0, 0, 0, 0};
    MHD_get_connection_values_n(mc, MHD_HEADER_KIND, count_header, &f);
    int http10 = version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
    if (f.bad_name) {
        problem_set(p, PB_INVALID_FRAMING, NULL,
                    "a header name is empty or holds a character other than letters, digits "
                    "and !#$%%&'*+-.^_`|~ (whitespace before its colon, say), or a "
                    "Content-Length or Transfer-Encoding header continues on a folded line "
                    "(RFC 9110 section 5.6.2, RFC 9112 sections 5.1 and 5.2): send each header "
                    "on one line as 'Name: value'; the connection is closed");
    } else if (f.transfer_encoding && f.content_length) {
        problem_set(p, PB_INVALID_FRAMING, NULL,
                    "the request has both Content-Length and Transfer-Encoding: send one "
                    "(RFC 9112 section 6.3); the connection is closed");
    } else if (f.content_length > 1 || f.transfer_encoding > 1) {
        problem_set(p, PB_INVALID_FRAMING, NULL,
                    "the request repeats %s: send it once; the connection is closed",
                    f.content_length > 1 ? "Content-Length" : "Transfer-Encoding");
    } else if (f.transfer_encoding && (!f.te_chunked || http10)) {
        problem_set(p, PB_INVALID_FRAMING, NULL,
                    http10 ? "Transfer-Encoding is not defined for HTTP/1.0: send Content-Length; "
                             "the connection is closed"
                           : "the only transfer coding accepted is 'Transfer-Encoding: chunked'; "
                             "the connection is closed");
    }
    if (p->code != PB_NONE) {
        *close = 1;
        return p->code;
    }
    int nul = 0, slash = 0;
    if (c) {
        nul = c->nul_in_url;
        slash = c->slash_in_path;
        c->nul_in_url = c->slash_in_path = 0;
    }
    if (nul)
        problem_set(p, PB_BAD_REQUEST, NULL,
                    "the URL contains %%00 (a NUL byte): no path segment or query value may "
                    "hold one");
    else if (slash)
        problem_set(p, PB_INVALID_ID, "id",
                    "the path contains %%2F (an encoded '/'), which no id or other path segment "
                    "may hold: ids are " LEDGER_ID_RULE);
    else if (!http10 && f.host != 1)
        problem_set(p, PB_BAD_REQUEST, NULL,
                    f.host ? "the request has more than one Host header"
                           : "an HTTP/1.1 request needs a Host header");
    return p->code;
}
