/*
 * bench_workflow.c - a federated coordinator's calls against a running dpbudgetd (fresh data
 * directory, --max-body large enough for a batch of 10,000 clients):
 *
 *   bench_workflow HOST PORT [CLIENTS] [CANDIDATES]
 *
 * 1. bulk registration: CLIENTS (default 100,000) clients in batches of 10,000 through
 *    POST /v1/clients:batch, one keep-alive connection; prints the total time.
 * 2. histories: 20 rounds of 1,000 sampled clients (admit_eligible), so that the candidates
 *    below have different histories (counts 0..20).
 * 3. eligibility: POST /v1/eligibility for CANDIDATES (default 10,000) ids, repeated 20
 *    times; prints min, median and max (the request's whole round trip).
 *
 * Plain blocking sockets, one connection. Figures are printed, never asserted; exit 1 when
 * an answer is not what the step expects (e.g. not 200, or fewer clients created).
 */
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

#define EVENT                                                                                      \
    "{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.1,\"event\":{"           \
    "\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1.1}}"

static int fd = -1;
static char *resp;
static size_t resp_cap;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int send_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* One request; the status, and the body in resp (NUL-terminated); -1 on a transport error. */
static int call(const char *method, const char *path, const char *body, size_t blen)
{
    char head[512];
    int h = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, blen);
    if (send_all(head, (size_t)h) != 0 || send_all(body, blen) != 0)
        return -1;
    size_t len = 0, need = 0, hend = 0;
    for (;;) {
        if (len + 65536 + 1 > resp_cap) {
            size_t nc = resp_cap ? resp_cap * 2 : 1 << 20;
            char *nr = realloc(resp, nc);
            if (nr == NULL)
                return -1;
            resp = nr;
            resp_cap = nc;
        }
        ssize_t k = read(fd, resp + len, resp_cap - len - 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        len += (size_t)k;
        resp[len] = '\0';
        if (hend == 0) {
            char *e = strstr(resp, "\r\n\r\n");
            if (e == NULL)
                continue;
            hend = (size_t)(e - resp) + 4;
            char *cl = strstr(resp, "\r\nContent-Length:"); /* libmicrohttpd spells it so */
            if (cl == NULL || cl > e)
                return -1;
            need = hend + strtoul(cl + 17, NULL, 10);
        }
        if (len >= need)
            break;
    }
    int status = atoi(resp + 9);
    memmove(resp, resp + hend, len - hend);
    resp[len - hend] = '\0';
    return status;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_workflow HOST PORT [CLIENTS] [CANDIDATES]\n");
        return 2;
    }
    long clients = argc > 3 ? atol(argv[3]) : 100000, cands = argc > 4 ? atol(argv[4]) : 10000;
    if (clients < 10000 || cands < 1 || cands > clients) {
        fprintf(stderr, "bench_workflow: CLIENTS >= 10000 and 1 <= CANDIDATES <= CLIENTS\n");
        return 2;
    }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(argv[2]));
    fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("bench_workflow: connect");
        return 1;
    }
    const size_t cap = 64u * 1024u * 1024u;
    char *b = malloc(cap);
    if (b == NULL)
        return 1;
    int bad = 0;

    /* 1. bulk registration */
    double t0 = now_s(), worst = 0.0;
    for (long at = 0; at < clients && !bad; at += 10000) {
        size_t n = (size_t)sprintf(b, "{\"clients\":[");
        for (long i = at; i < at + 10000 && i < clients; i++)
            n += (size_t)sprintf(b + n,
                                 "%s{\"id\":\"bench-%07ld\",\"budget\":{\"epsilon\":8,\"delta\":"
                                 "1e-5},\"labels\":{\"cohort\":\"c%ld\"}}",
                                 i > at ? "," : "", i, i % 10);
        n += (size_t)sprintf(b + n, "]}");
        double t1 = now_s();
        int st = call("POST", "/v1/clients:batch", b, n);
        double dt = now_s() - t1;
        worst = dt > worst ? dt : worst;
        if (st != 200 || strstr(resp, "\"created\":10000") == NULL) {
            fprintf(stderr, "bench_workflow: batch at %ld: %d %.200s\n", at, st, resp ? resp : "");
            bad = 1;
        }
    }
    double reg = now_s() - t0;
    printf("   bulk registration: %ld clients in batches of 10,000: %.3f s (%.0f clients/s; "
           "slowest batch %.0f ms; target < 2 s)\n",
           clients, reg, (double)clients / reg, worst * 1e3);

    /* 2. histories: 20 rounds of 1000 sampled clients */
    unsigned seed = 12345;
    for (int r = 0; r < 20 && !bad; r++) {
        size_t n = (size_t)sprintf(b,
                                   "{\"round_id\":\"bench-round-%d\",\"event\":" EVENT
                                   ",\"policy\":\"admit_eligible\",\"participants\":[",
                                   r);
        for (int i = 0; i < 1000; i++) {
            seed = seed * 1103515245u + 12345u;
            n += (size_t)sprintf(b + n, "%s\"bench-%07ld\"", i ? "," : "",
                                 (long)((seed >> 8) % (unsigned)cands));
        }
        n += (size_t)sprintf(b + n, "]}");
        int st = call("POST", "/v1/rounds", b, n);
        if (st != 200) {
            fprintf(stderr, "bench_workflow: round %d: %d %.200s\n", r, st, resp);
            bad = 1;
        }
    }

    /* 3. eligibility for the candidates */
    /* one page of them all (limit: at most 10,000 per page) */
    size_t n = (size_t)sprintf(b, "{\"event\":" EVENT ",\"limit\":%ld,\"clients\":[",
                               cands < 10000 ? cands : 10000);
    for (long i = 0; i < cands; i++)
        n += (size_t)sprintf(b + n, "%s\"bench-%07ld\"", i ? "," : "", i);
    n += (size_t)sprintf(b + n, "]}");
    enum { REPS = 20 };
    double t[REPS];
    for (int k = 0; k < REPS && !bad; k++) {
        double t1 = now_s();
        int st = call("POST", "/v1/eligibility", b, n);
        t[k] = now_s() - t1;
        if (st != 200) {
            fprintf(stderr, "bench_workflow: eligibility: %d %.200s\n", st, resp);
            bad = 1;
        }
    }
    if (!bad) {
        qsort(t, REPS, sizeof t[0], cmp_d);
        char *e = strstr(resp, "\"eligible\":");
        printf("   eligibility: %ld candidates (histories of 0-20 rounds), %d requests: min %.1f "
               "ms, median %.1f ms, max %.1f ms (target < 20 ms; %.40s)\n",
               cands, REPS, t[0] * 1e3, t[REPS / 2] * 1e3, t[REPS - 1] * 1e3, e ? e : "");
    }
    free(b);
    free(resp);
    close(fd);
    return bad;
}
