/* benchhttp.h - the minimal HTTP/1.1 client the load benchmarks share: keep-alive
 * connections to a loopback daemon, one request at a time, Content-Length bodies. */
#ifndef DPB_BENCHHTTP_H
#define DPB_BENCHHTTP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline void sleep_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

/* Case-insensitive strstr. */
static inline const char *find_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    return NULL;
}

/* 127.0.0.1:port */
static inline struct sockaddr_in bench_loopback(unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* A connected socket (TCP_NODELAY; a request that hangs 120 s is a failure), or -1. */
static inline int bench_dial(const struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {120, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (const struct sockaddr *)a, sizeof *a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request on *fd (dialled to a when -1; closed and reset to -1 on an error or when the
 * server closes). The status, or -1; buf (cap bytes) holds the answer, NUL-terminated. */
static inline int bench_request(int *fd, const struct sockaddr_in *a, const char *method,
                                const char *path, const char *body, char *buf, size_t cap)
{
    if (*fd < 0 && (*fd = bench_dial(a)) < 0)
        return -1;
    size_t blen = body ? strlen(body) : 0;
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, blen);
    if (send(*fd, head, (size_t)hn, MSG_NOSIGNAL) != hn)
        goto fail;
    for (size_t at = 0; at < blen;) {
        ssize_t n = send(*fd, body + at, blen - at, MSG_NOSIGNAL);
        if (n <= 0)
            goto fail;
        at += (size_t)n;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(*fd, buf + len, cap - 1 - len, 0);
        if (n <= 0)
            goto fail;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end == NULL)
            continue;
        const char *cl = find_ci(buf, "\r\nContent-Length:");
        size_t want = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
        if (len >= (size_t)(end + 4 - buf) + want)
            break;
        if (len >= cap - 1)
            goto fail;
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        goto fail;
    if (find_ci(buf, "\r\nConnection: close") != NULL) {
        close(*fd);
        *fd = -1;
    }
    return status;
fail:
    close(*fd);
    *fd = -1;
    return -1;
}

#endif
