/*
 * bench_http.c - closed-loop HTTP/1.1 load generator (plain sockets + epoll, no libcurl).
 *
 *   bench_http HOST PORT METHOD PATH BODYFILE CONNECTIONS SECONDS [THREADS]
 *
 * Opens CONNECTIONS keep-alive connections to HOST:PORT (IPv4), spread over THREADS threads
 * (default 1), each thread with its own epoll loop. Every connection sends the request,
 * reads the full response (Content-Length or chunked body) and sends the next one at once.
 * The first 0.5 s are warm-up; the next SECONDS are measured: completed requests, req/s and
 * latency percentiles (write of the request to the end of its response). non-2xx and
 * errors (connect failures, resets, early close, malformed responses) are counted over the
 * whole run, warm-up included. A connection that fails is closed and reopened after 10 ms.
 *
 * Exit status: 0, or 1 if no 2xx response completed in the measured window, any non-2xx
 * was seen, or the arguments / setup are bad. Timings are printed, never asserted.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WARMUP_NS 500000000ULL         /* 0.5 s excluded from the figures */
#define RETRY_NS 10000000ULL           /* reconnect delay after a failed connection */
#define MAX_RESP (8u * 1024u * 1024u)  /* largest response accepted (bytes) */
#define MAX_BODY (64u * 1024u * 1024u) /* largest request body file */
#define MAX_EVENTS 128
#define SNIPPET 200

enum { ST_IDLE = 0, ST_CONNECTING, ST_WRITING, ST_READING };

typedef struct {
    int fd;
    int state;
    uint32_t mask; /* events currently registered with epoll */
    size_t woff;   /* bytes of the request written */
    char *rbuf;
    size_t rlen, rcap;
    uint64_t t_req;    /* when the request's first byte was written */
    uint64_t retry_at; /* ST_IDLE: when to reconnect */
} conn;

/* Shared, read-only after main() sets it up. */
typedef struct {
    struct sockaddr_in addr;
    const char *req;
    size_t req_len;
    int head;        /* HEAD request: responses carry no body */
    uint64_t t_warm; /* measured window [t_warm, t_end) */
    uint64_t t_end;
} config;

typedef struct {
    pthread_t tid;
    const config *cfg;
    int nconns;
    conn *conns;
    int ep;
    /* latencies (ns) of requests completed in the measured window */
    uint64_t *lat;
    size_t nlat, caplat;
    uint64_t done;   /* responses completed in the window */
    uint64_t ok;     /* of which 2xx */
    uint64_t warm;   /* responses completed during warm-up */
    uint64_t non2xx; /* whole run */
    uint64_t err_connect, err_io, err_closed, err_proto, err_other;
    uint64_t reconnects;  /* server closed after a complete response (Connection: close) */
    uint64_t lat_dropped; /* latencies not stored (out of memory) */
    int first_status;     /* first non-2xx status, with a snippet of its response */
    char first_snip[SNIPPET + 1];
} worker;

static uint64_t now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- response parsing */

/* Offset just past the first "\r\n\r\n" in b[0, len), or 0 if none. */
static size_t find_hdr_end(const char *b, size_t len)
{
    for (size_t i = 0; i + 3 < len; i++)
        if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n')
            return i + 4;
    return 0;
}

/* Offset of the next "\r\n" at or after from, or (size_t)-1 if none. */
static size_t find_crlf(const char *b, size_t len, size_t from)
{
    for (size_t i = from; i + 1 < len; i++)
        if (b[i] == '\r' && b[i + 1] == '\n')
            return i;
    return (size_t)-1;
}

/* Does the header value [v, v+n) contain token (case-insensitive substring)? */
static int value_has(const char *v, size_t n, const char *token)
{
    size_t t = strlen(token);
    for (size_t i = 0; i + t <= n; i++)
        if (strncasecmp(v + i, token, t) == 0)
            return 1;
    return 0;
}

/*
 * Chunked body starting at b[pos]. Returns the offset just past the message, 0 when more
 * data is needed, -1 when malformed. Chunk extensions and trailers are skipped.
 */
static long parse_chunked(const char *b, size_t len, size_t pos)
{
    for (int guard = 0; guard < 1000000; guard++) {
        size_t eol = find_crlf(b, len, pos);
        if (eol == (size_t)-1)
            return len - pos > 32 ? -1 : 0; /* a size line is never that long */
        uint64_t size = 0;
        size_t i = pos, ndig = 0;
        for (; i < eol; i++, ndig++) {
            char ch = b[i];
            int d;
            if (ch >= '0' && ch <= '9')
                d = ch - '0';
            else if (ch >= 'a' && ch <= 'f')
                d = ch - 'a' + 10;
            else if (ch >= 'A' && ch <= 'F')
                d = ch - 'A' + 10;
            else
                break;
            size = size * 16 + (uint64_t)d;
            if (size > MAX_RESP)
                return -1;
        }
        if (ndig == 0 || (i < eol && b[i] != ';' && b[i] != ' '))
            return -1;
        pos = eol + 2;
        if (size == 0) {
            /* trailers: lines until an empty one */
            for (int t = 0; t < 1000; t++) {
                size_t e = find_crlf(b, len, pos);
                if (e == (size_t)-1)
                    return 0;
                if (e == pos)
                    return (long)(e + 2);
                pos = e + 2;
            }
            return -1;
        }
        if (len < pos + size + 2)
            return 0;
        if (b[pos + size] != '\r' || b[pos + size + 1] != '\n')
            return -1;
        pos += size + 2;
    }
    return -1;
}

/*
 * One HTTP/1.x response at the start of b[0, len). Returns the total length of the
 * message when complete (setting *status and *keep_alive), 0 when more data is needed,
 * -1 when it is malformed or cannot be framed on a keep-alive connection.
 */
static long parse_response(const char *b, size_t len, int head, int *status, int *keep_alive)
{
    size_t hend = find_hdr_end(b, len);
    if (hend == 0)
        return len > 64 * 1024 ? -1 : 0; /* headers never that long */
    /* status line: HTTP/1.x SSS ... */
    if (hend < 14 || strncmp(b, "HTTP/1.", 7) != 0 || (b[7] != '0' && b[7] != '1') || b[8] != ' ')
        return -1;
    int minor = b[7] - '0';
    int code = 0;
    for (int i = 9; i < 12; i++) {
        if (b[i] < '0' || b[i] > '9')
            return -1;
        code = code * 10 + (b[i] - '0');
    }
    if (b[12] != ' ' && b[12] != '\r')
        return -1;

    int ka = minor >= 1, chunked = 0, have_cl = 0;
    uint64_t cl = 0;
    size_t pos = find_crlf(b, hend, 0) + 2;
    while (pos < hend - 2) {
        size_t eol = find_crlf(b, hend, pos);
        if (eol == (size_t)-1)
            return -1;
        const char *colon = memchr(b + pos, ':', eol - pos);
        if (colon == NULL)
            return -1;
        size_t nlen = (size_t)(colon - (b + pos));
        const char *v = colon + 1;
        size_t vlen = (size_t)(b + eol - v);
        while (vlen > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vlen--;
        }
        while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
            vlen--;
        if (nlen == 14 && strncasecmp(b + pos, "Content-Length", 14) == 0) {
            uint64_t x = 0;
            if (vlen == 0)
                return -1;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return -1;
                x = x * 10 + (uint64_t)(v[i] - '0');
                if (x > MAX_RESP)
                    return -1;
            }
            if (have_cl && x != cl)
                return -1;
            have_cl = 1;
            cl = x;
        } else if (nlen == 17 && strncasecmp(b + pos, "Transfer-Encoding", 17) == 0) {
            if (value_has(v, vlen, "chunked"))
                chunked = 1;
            else
                return -1; /* gzip etc. without chunked: unframed */
        } else if (nlen == 10 && strncasecmp(b + pos, "Connection", 10) == 0) {
            if (value_has(v, vlen, "close"))
                ka = 0;
            else if (value_has(v, vlen, "keep-alive"))
                ka = 1;
        }
        pos = eol + 2;
    }
    if (code < 200)
        return -1; /* we send no Expect: a 1xx is unexpected */
    *status = code;
    *keep_alive = ka;
    if (head || code == 204 || code == 304)
        return (long)hend;
    if (chunked)
        return parse_chunked(b, len, hend);
    if (!have_cl)
        return -1; /* body delimited by close: not usable for a keep-alive benchmark */
    if (len < hend + cl)
        return 0;
    return (long)(hend + cl);
}

/* ---------------------------------------------------------------- connections */

enum { E_CONNECT, E_IO, E_CLOSED, E_PROTO, E_OTHER };

static void conn_close(conn *c)
{
    if (c->fd >= 0)
        close(c->fd); /* also removes it from the epoll set */
    c->fd = -1;
    c->state = ST_IDLE;
    c->mask = 0;
    c->rlen = 0;
}

static void conn_fail(worker *w, conn *c, int kind)
{
    switch (kind) {
    case E_CONNECT:
        w->err_connect++;
        break;
    case E_IO:
        w->err_io++;
        break;
    case E_CLOSED:
        w->err_closed++;
        break;
    case E_PROTO:
        w->err_proto++;
        break;
    default:
        w->err_other++;
        break;
    }
    conn_close(c);
    c->retry_at = now_ns() + RETRY_NS;
}

/* Register interest in `mask`; returns 0, or -1 (the caller fails the connection). */
static int conn_watch(worker *w, conn *c, uint32_t mask)
{
    if (c->mask == mask)
        return 0;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = mask;
    ev.data.ptr = c;
    int op = c->mask == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
    if (epoll_ctl(w->ep, op, c->fd, &ev) != 0)
        return -1;
    c->mask = mask;
    return 0;
}

static void conn_open(worker *w, conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        conn_fail(w, c, E_CONNECT);
        return;
    }
    c->fd = fd;
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        conn_fail(w, c, E_OTHER);
        return;
    }
    const struct sockaddr *sa = (const struct sockaddr *)&w->cfg->addr;
    if (connect(fd, sa, sizeof w->cfg->addr) != 0 && errno != EINPROGRESS) {
        conn_fail(w, c, E_CONNECT);
        return;
    }
    c->state = ST_CONNECTING;
    if (conn_watch(w, c, EPOLLOUT) != 0)
        conn_fail(w, c, E_OTHER);
}

static void try_write(worker *w, conn *c)
{
    const config *cfg = w->cfg;
    for (int guard = 0; c->woff < cfg->req_len && guard < 10000; guard++) {
        ssize_t n = send(c->fd, cfg->req + c->woff, cfg->req_len - c->woff, MSG_NOSIGNAL);
        if (n > 0) {
            c->woff += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (conn_watch(w, c, EPOLLOUT) != 0)
                conn_fail(w, c, E_OTHER);
            return;
        } else {
            conn_fail(w, c, E_IO);
            return;
        }
    }
    if (c->woff < cfg->req_len) {
        conn_fail(w, c, E_IO); /* no progress */
        return;
    }
    c->state = ST_READING;
    if (conn_watch(w, c, EPOLLIN) != 0)
        conn_fail(w, c, E_OTHER);
}

static void start_request(worker *w, conn *c)
{
    c->woff = 0;
    c->rlen = 0;
    c->t_req = now_ns();
    c->state = ST_WRITING;
    try_write(w, c);
}

static void record(worker *w, uint64_t lat)
{
    if (w->nlat == w->caplat) {
        size_t ncap = w->caplat ? w->caplat * 2 : 4096;
        uint64_t *tmp = realloc(w->lat, ncap * sizeof *tmp);
        if (tmp == NULL) {
            w->lat_dropped++;
            return;
        }
        w->lat = tmp;
        w->caplat = ncap;
    }
    w->lat[w->nlat++] = lat;
}

/* A complete response of msg_len bytes is in c->rbuf. */
static void complete(worker *w, conn *c, long msg_len, int status, int keep_alive)
{
    uint64_t t = now_ns();
    const config *cfg = w->cfg;
    int ok = status >= 200 && status < 300;
    if (!ok) {
        if (w->non2xx == 0) {
            size_t n = c->rlen < SNIPPET ? c->rlen : SNIPPET;
            w->first_status = status;
            for (size_t i = 0; i < n; i++) {
                char ch = c->rbuf[i];
                w->first_snip[i] = (ch == '\r' || ch == '\n' || ch == '\t') ? ' ' : ch;
            }
            w->first_snip[n] = '\0';
        }
        w->non2xx++;
    }
    if (t >= cfg->t_warm && t < cfg->t_end) {
        w->done++;
        if (ok)
            w->ok++;
        record(w, t - c->t_req);
    } else if (t < cfg->t_warm) {
        w->warm++;
    }
    if ((size_t)msg_len != c->rlen) {
        conn_fail(w, c, E_PROTO); /* bytes beyond the response: nothing was pipelined */
        return;
    }
    c->rlen = 0;
    if (!keep_alive) {
        w->reconnects++;
        conn_close(c);
        c->retry_at = t; /* reopen at once */
        return;
    }
    start_request(w, c);
}

static void try_read(worker *w, conn *c)
{
    for (int guard = 0; guard < 100000; guard++) {
        if (c->rlen == c->rcap) {
            if (c->rcap >= MAX_RESP) {
                conn_fail(w, c, E_PROTO);
                return;
            }
            size_t ncap = c->rcap * 2;
            char *tmp = realloc(c->rbuf, ncap);
            if (tmp == NULL) {
                conn_fail(w, c, E_OTHER);
                return;
            }
            c->rbuf = tmp;
            c->rcap = ncap;
        }
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
        if (n > 0) {
            c->rlen += (size_t)n;
            int status = 0, ka = 0;
            long m = parse_response(c->rbuf, c->rlen, w->cfg->head, &status, &ka);
            if (m < 0) {
                conn_fail(w, c, E_PROTO);
                return;
            }
            if (m > 0) {
                complete(w, c, m, status, ka);
                return;
            }
        } else if (n == 0) {
            conn_fail(w, c, E_CLOSED); /* closed before the response was complete */
            return;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            conn_fail(w, c, E_IO);
            return;
        }
    }
}

static void handle(worker *w, conn *c, uint32_t ev)
{
    if (c->state == ST_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            conn_fail(w, c, E_CONNECT);
            return;
        }
        if (ev & (EPOLLERR | EPOLLHUP)) {
            conn_fail(w, c, E_CONNECT);
            return;
        }
        start_request(w, c);
    } else if (c->state == ST_WRITING) {
        if (ev & (EPOLLERR | EPOLLHUP)) {
            conn_fail(w, c, E_IO);
            return;
        }
        try_write(w, c);
    } else if (c->state == ST_READING) {
        /* read first: a HUP may follow a complete response */
        try_read(w, c);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const config *cfg = w->cfg;
    struct epoll_event evs[MAX_EVENTS];

    for (int i = 0; i < w->nconns; i++) {
        conn *c = &w->conns[i];
        c->fd = -1;
        c->state = ST_IDLE;
        c->retry_at = 0;
    }
    for (;;) {
        uint64_t t = now_ns();
        if (t >= cfg->t_end)
            break;
        for (int i = 0; i < w->nconns; i++) {
            conn *c = &w->conns[i];
            if (c->state == ST_IDLE && c->retry_at <= t)
                conn_open(w, c);
        }
        uint64_t left_ms = (cfg->t_end - t) / 1000000ULL + 1;
        int timeout = left_ms < 10 ? (int)left_ms : 10;
        int n = epoll_wait(w->ep, evs, MAX_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("bench_http: epoll_wait");
            w->err_other++;
            break;
        }
        for (int i = 0; i < n; i++)
            handle(w, evs[i].data.ptr, evs[i].events);
    }
    for (int i = 0; i < w->nconns; i++)
        conn_close(&w->conns[i]);
    return NULL;
}

/* ---------------------------------------------------------------- setup and report */

static void usage(void)
{
    fprintf(stderr, "usage: bench_http HOST PORT METHOD PATH BODYFILE CONNECTIONS SECONDS "
                    "[THREADS]\n  BODYFILE may be - for no body\n");
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Reads the whole file at path; returns 0 and a malloc'd buffer, or -1. */
static int read_file(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        fclose(f);
        return -1;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_BODY) {
                fprintf(stderr, "bench_http: %s: body too large\n", path);
                free(buf);
                fclose(f);
                return -1;
            }
            char *tmp = realloc(buf, cap * 2);
            if (tmp == NULL) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = tmp;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        perror(path);
        free(buf);
        return -1;
    }
    *data = buf;
    *len = n;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0, n), in ms. */
static double pct_ms(const uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    size_t k = (size_t)(p * (double)n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return (double)v[k - 1] / 1e6;
}

int main(int argc, char **argv)
{
    if (argc != 8 && argc != 9) {
        usage();
        return 1;
    }
    const char *host = argv[1], *method = argv[3], *path = argv[4], *bodyfile = argv[5];
    long port, nconns, nthreads = 1;
    if (parse_long(argv[2], 1, 65535, &port) != 0) {
        fprintf(stderr, "bench_http: bad PORT '%s'\n", argv[2]);
        return 1;
    }
    if (parse_long(argv[6], 1, 100000, &nconns) != 0) {
        fprintf(stderr, "bench_http: bad CONNECTIONS '%s'\n", argv[6]);
        return 1;
    }
    char *end;
    errno = 0;
    double seconds = strtod(argv[7], &end);
    if (errno != 0 || end == argv[7] || *end != '\0' || !(seconds > 0.0 && seconds <= 86400.0)) {
        fprintf(stderr, "bench_http: bad SECONDS '%s'\n", argv[7]);
        return 1;
    }
    if (argc == 9 && parse_long(argv[8], 1, 1024, &nthreads) != 0) {
        fprintf(stderr, "bench_http: bad THREADS '%s'\n", argv[8]);
        return 1;
    }
    if (nthreads > nconns)
        nthreads = nconns;
    if (method[0] == '\0' || strpbrk(method, " \r\n") || path[0] != '/' || strpbrk(path, " \r\n")) {
        fprintf(stderr, "bench_http: bad METHOD or PATH\n");
        return 1;
    }

    config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.addr.sin_family = AF_INET;
    cfg.addr.sin_port = htons((uint16_t)port);
    {
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        int rc = getaddrinfo(host, NULL, &hints, &res);
        if (rc != 0 || res == NULL) {
            fprintf(stderr, "bench_http: %s: %s\n", host, gai_strerror(rc));
            return 1;
        }
        cfg.addr.sin_addr = ((const struct sockaddr_in *)res->ai_addr)->sin_addr;
        freeaddrinfo(res);
    }

    char *body = NULL;
    size_t body_len = 0;
    int has_body = strcmp(bodyfile, "-") != 0;
    if (has_body && read_file(bodyfile, &body, &body_len) != 0)
        return 1;
    cfg.head = strcmp(method, "HEAD") == 0;

    /* the request, built once */
    char hdr[1024];
    int hl;
    if (has_body)
        hl = snprintf(hdr, sizeof hdr,
                      "%s %s HTTP/1.1\r\nHost: %s:%ld\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: keep-alive\r\n\r\n",
                      method, path, host, port, body_len);
    else if (strcmp(method, "GET") == 0 || cfg.head)
        hl = snprintf(hdr, sizeof hdr,
                      "%s %s HTTP/1.1\r\nHost: %s:%ld\r\nConnection: keep-alive\r\n\r\n", method,
                      path, host, port);
    else
        hl = snprintf(hdr, sizeof hdr,
                      "%s %s HTTP/1.1\r\nHost: %s:%ld\r\nContent-Length: 0\r\n"
                      "Connection: keep-alive\r\n\r\n",
                      method, path, host, port);
    if (hl < 0 || (size_t)hl >= sizeof hdr) {
        fprintf(stderr, "bench_http: request line too long\n");
        free(body);
        return 1;
    }
    char *req = malloc((size_t)hl + body_len + 1);
    if (req == NULL) {
        perror("bench_http: malloc");
        free(body);
        return 1;
    }
    memcpy(req, hdr, (size_t)hl);
    if (body_len)
        memcpy(req + hl, body, body_len);
    free(body);
    cfg.req = req;
    cfg.req_len = (size_t)hl + body_len;

    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        perror("bench_http: signal");
        free(req);
        return 1;
    }

    worker *ws = calloc((size_t)nthreads, sizeof *ws);
    conn *cs = calloc((size_t)nconns, sizeof *cs);
    int rc = 1;
    if (ws != NULL)
        for (long i = 0; i < nthreads; i++)
            ws[i].ep = -1;
    if (ws == NULL || cs == NULL) {
        perror("bench_http: calloc");
        goto out;
    }
    for (long i = 0; i < nconns; i++) {
        cs[i].fd = -1;
        cs[i].rcap = 16384;
        cs[i].rbuf = malloc(cs[i].rcap);
        if (cs[i].rbuf == NULL) {
            perror("bench_http: malloc");
            goto out;
        }
    }
    long started = 0;
    uint64_t t0 = now_ns();
    cfg.t_warm = t0 + WARMUP_NS;
    cfg.t_end = cfg.t_warm + (uint64_t)(seconds * 1e9);
    {
        long off = 0;
        for (long i = 0; i < nthreads; i++) {
            worker *w = &ws[i];
            w->cfg = &cfg;
            w->nconns = (int)(nconns / nthreads + (i < nconns % nthreads ? 1 : 0));
            w->conns = cs + off;
            off += w->nconns;
            w->ep = epoll_create1(EPOLL_CLOEXEC);
            if (w->ep < 0) {
                perror("bench_http: epoll_create1");
                goto out;
            }
        }
    }
    int setup_failed = 0;
    for (; started < nthreads; started++) {
        int e = pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]);
        if (e != 0) {
            fprintf(stderr, "bench_http: pthread_create: %s\n", strerror(e));
            setup_failed = 1;
            break;
        }
    }
    /* the threads stop by themselves at t_end */
    for (long i = 0; i < started; i++) {
        int e = pthread_join(ws[i].tid, NULL);
        if (e != 0) {
            fprintf(stderr, "bench_http: pthread_join: %s\n", strerror(e));
            setup_failed = 1;
        }
    }
    if (setup_failed)
        goto out;

    /* merge */
    uint64_t done = 0, ok = 0, warm = 0, non2xx = 0, reconnects = 0, dropped = 0;
    uint64_t e_conn = 0, e_io = 0, e_closed = 0, e_proto = 0, e_other = 0;
    size_t nlat = 0;
    const worker *first_bad = NULL;
    for (long i = 0; i < nthreads; i++) {
        const worker *w = &ws[i];
        done += w->done;
        ok += w->ok;
        warm += w->warm;
        non2xx += w->non2xx;
        reconnects += w->reconnects;
        dropped += w->lat_dropped;
        e_conn += w->err_connect;
        e_io += w->err_io;
        e_closed += w->err_closed;
        e_proto += w->err_proto;
        e_other += w->err_other;
        nlat += w->nlat;
        if (first_bad == NULL && w->non2xx > 0)
            first_bad = w;
    }
    uint64_t errors = e_conn + e_io + e_closed + e_proto + e_other;
    uint64_t *all = malloc((nlat ? nlat : 1) * sizeof *all);
    if (all == NULL) {
        perror("bench_http: malloc");
        goto out;
    }
    {
        size_t k = 0;
        for (long i = 0; i < nthreads; i++) {
            if (ws[i].nlat)
                memcpy(all + k, ws[i].lat, ws[i].nlat * sizeof *all);
            k += ws[i].nlat;
        }
    }
    qsort(all, nlat, sizeof *all, cmp_u64);
    printf("http: %s %s, %ld conns, %ld threads, %.1f s, %llu req, %.0f req/s, p50 %.3g ms, "
           "p90 %.3g ms, p99 %.3g ms, max %.3g ms, non2xx %llu, errors %llu\n",
           method, path, nconns, nthreads, seconds, (unsigned long long)done,
           (double)done / seconds, pct_ms(all, nlat, 0.50), pct_ms(all, nlat, 0.90),
           pct_ms(all, nlat, 0.99), nlat ? (double)all[nlat - 1] / 1e6 : 0.0,
           (unsigned long long)non2xx, (unsigned long long)errors);
    printf("  detail: %llu 2xx in window, %llu during warm-up; errors: connect %llu, io/reset "
           "%llu, early close %llu, protocol %llu, other %llu; server-closed reconnects %llu",
           (unsigned long long)ok, (unsigned long long)warm, (unsigned long long)e_conn,
           (unsigned long long)e_io, (unsigned long long)e_closed, (unsigned long long)e_proto,
           (unsigned long long)e_other, (unsigned long long)reconnects);
    if (dropped)
        printf("; %llu latencies dropped (out of memory)", (unsigned long long)dropped);
    printf("\n");
    if (first_bad != NULL)
        printf("  first non-2xx: %d: %s\n", first_bad->first_status, first_bad->first_snip);
    free(all);
    if (ok == 0)
        fprintf(stderr, "bench_http: no 2xx response completed in the measured window\n");
    if (non2xx > 0)
        fprintf(stderr, "bench_http: %llu non-2xx responses\n", (unsigned long long)non2xx);
    rc = (ok == 0 || non2xx > 0) ? 1 : 0;
    if (fflush(stdout) != 0)
        rc = 1;

out:
    if (ws != NULL) {
        for (long i = 0; i < nthreads; i++) {
            if (ws[i].ep >= 0)
                close(ws[i].ep);
            free(ws[i].lat);
        }
    }
    if (cs != NULL)
        for (long i = 0; i < nconns; i++)
            free(cs[i].rbuf);
    free(ws);
    free(cs);
    free(req);
    return rc;
}
