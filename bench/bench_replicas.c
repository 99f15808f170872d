/*
 * bench_replicas.c - the replicated ledger (--ledger-url) under load: rounds of 100
 * participants spread over the replicas' ports, and reads of a large ledger.
 *
 *   bench_replicas setup PORT CLIENTS
 *       register CLIENTS clients (ids bench-0 ...) with POST /v1/clients:batch (batches of
 *       10,000, budget eps 1e6: never exhausted); prints the time taken
 *   bench_replicas saturate PORTS SECONDS CONNS POOL
 *       CONNS connections (spread over the comma-separated PORTS) each post rounds back to
 *       back, 100 participants drawn from the first POOL clients (cohorts overlap), fresh
 *       round ids; prints the durable rounds/s in total (every 200 is a committed round) and
 *       the latency p50/p99
 *   bench_replicas paced PORTS SECONDS RATE POOL
 *       RATE rounds/s in total, paced (open loop: each replica's share on its own connection
 *       at fixed times); prints p50/p99/max of the latency
 *   bench_replicas reads PORT COUNT
 *       COUNT times each: GET /v1/summary, GET /v1/clients?limit=100 (the first page) and
 *       the page at half the clients (cursor); prints p50/p99/max
 * Exit status 1 if a request is not answered 200 or cannot be made. Timings are printed,
 * never asserted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "benchhttp.h"
#include "benchlib.h"

#define RESP_CAP (1u << 22)
#define MAX_PORTS 16
#define MAX_SAMPLES 1000000

static unsigned ports[MAX_PORTS];
static int nports;

/* One request on *fd to the replica at port (benchhttp.h). */
static int request(int *fd, unsigned port, const char *method, const char *path, const char *body,
                   char *buf)
{
    struct sockaddr_in a = bench_loopback(port);
    return bench_request(fd, &a, method, path, body, buf, RESP_CAP);
}

typedef struct {
    double *v;
    size_t n;
    pthread_mutex_t lock;
} samples;

static void add(samples *s, double x)
{
    pthread_mutex_lock(&s->lock);
    if (s->n < MAX_SAMPLES)
        s->v[s->n++] = x;
    pthread_mutex_unlock(&s->lock);
}

static double pct(samples *s, double p)
{
    return bench_pct(s->v, s->n, p);
}

static void print_lat(const char *what, samples *s)
{
    printf("   %-34s n %7zu  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms\n", what, s->n,
           pct(s, 0.5) * 1e3, pct(s, 0.99) * 1e3, pct(s, 1.0) * 1e3);
}

/* A round body: 100 of the first pool clients, a window that moves with n (overlapping
 * cohorts), id "bench-<tag>-<n>". */
static char *round_body(const char *tag, unsigned long n, unsigned long pool)
{
    char *b = malloc(8192);
    if (b == NULL)
        return NULL;
    int k = snprintf(b, 8192, "{\"round_id\":\"bench-%s-%d-%lu\",\"participants\":[", tag,
                     (int)getpid(), n);
    unsigned long start = (n * 37) % pool;
    for (unsigned long i = 0; i < 100; i++)
        k += snprintf(b + k, 8192 - (size_t)k, "%s\"bench-%lu\"", i ? "," : "", (start + i) % pool);
    snprintf(b + k, 8192 - (size_t)k,
             "],\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":50},"
             "\"policy\":\"admit_eligible\"}");
    return b;
}

/* ---- setup ---- */

static int setup(unsigned port, unsigned long clients)
{
    char *buf = malloc(RESP_CAP);
    size_t cap = 10000 * 96 + 64;
    char *body = malloc(cap);
    if (buf == NULL || body == NULL)
        return 1;
    int fd = -1, rc = 0;
    double t0 = now_s();
    for (unsigned long at = 0; at < clients && rc == 0; at += 10000) {
        size_t k = (size_t)snprintf(body, cap, "{\"clients\":[");
        for (unsigned long i = at; i < at + 10000 && i < clients; i++)
            k += (size_t)snprintf(body + k, cap - k,
                                  "%s{\"id\":\"bench-%lu\",\"budget\":{\"epsilon\":1000000,"
                                  "\"delta\":1e-5}}",
                                  i > at ? "," : "", i);
        snprintf(body + k, cap - k, "]}");
        int st = request(&fd, port, "POST", "/v1/clients:batch", body, buf);
        if (st != 200) {
            fprintf(stderr, "bench_replicas: clients:batch answered %d: %.300s\n", st, buf);
            rc = 1;
        }
    }
    double t = now_s() - t0;
    if (rc == 0)
        printf("   registered %lu clients in %.1f s (%.0f clients/s, batches of 10,000)\n", clients,
               t, (double)clients / t);
    if (fd >= 0)
        close(fd);
    free(body);
    free(buf);
    return rc;
}

/* ---- saturate and paced ---- */

typedef struct {
    int id;
    unsigned port;
    double t_end;
    double period; /* 0: back to back */
    unsigned long pool;
    unsigned long done, bad;
    samples *lat;
} driver;

static void *drive(void *arg)
{
    driver *d = arg;
    char *buf = malloc(RESP_CAP);
    if (buf == NULL) {
        d->bad++;
        return NULL;
    }
    char tag[32];
    snprintf(tag, sizeof tag, "%d-%d", d->id, (int)(now_s() * 1000) % 100000);
    int fd = -1;
    double next = now_s();
    for (unsigned long n = 0; now_s() < d->t_end; n++) {
        char *b = round_body(tag, n, d->pool);
        double t0 = now_s();
        int st = b ? request(&fd, d->port, "POST", "/v1/rounds", b, buf) : -1;
        double t1 = now_s();
        free(b);
        if (st == 200) {
            d->done++;
            add(d->lat, t1 - t0);
        } else if (d->bad++ < 3) {
            fprintf(stderr, "bench_replicas: POST /v1/rounds on port %u answered %d: %.200s\n",
                    d->port, st, st > 0 ? buf : "");
        }
        if (d->period > 0) {
            next += d->period;
            double wait = next - now_s();
            if (wait > 0)
                sleep_s(wait);
        }
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

static int run_drivers(int n, double seconds, double period, unsigned long pool, samples *lat,
                       unsigned long *done)
{
    driver *d = calloc((size_t)n, sizeof *d);
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (d == NULL || t == NULL)
        return 1;
    double t_end = now_s() + seconds;
    for (int i = 0; i < n; i++) {
        d[i] = (driver){i, ports[i % nports], t_end, period, pool, 0, 0, lat};
        pthread_create(&t[i], NULL, drive, &d[i]);
    }
    unsigned long bad = 0;
    *done = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        *done += d[i].done;
        bad += d[i].bad;
    }
    free(d);
    free(t);
    return bad ? 1 : 0;
}

/* ---- reads ---- */

static int reads(unsigned port, int count)
{
    char *buf = malloc(RESP_CAP);
    if (buf == NULL)
        return 1;
    samples s[3];
    const char *what[3] = {"GET /v1/summary", "GET /v1/clients?limit=100",
                           "GET /v1/clients (middle page)"};
    for (int i = 0; i < 3; i++) {
        s[i].v = malloc(sizeof(double) * (size_t)count);
        s[i].n = 0;
        pthread_mutex_init(&s[i].lock, NULL);
        if (s[i].v == NULL)
            return 1;
    }
    int fd = -1, bad = 0;
    /* a page in the middle of the list: the cursor at half the clients */
    char path[400] = "/v1/clients?limit=100";
    if (request(&fd, port, "GET", "/v1/summary", NULL, buf) == 200) {
        const char *c = strstr(buf, "\"clients\":");
        unsigned long n = c ? strtoul(c + 10, NULL, 10) : 0;
        snprintf(path, sizeof path, "/v1/clients?limit=100&cursor=o%lu", n / 2);
    }
    for (int i = 0; i < count; i++)
        for (int j = 0; j < 3; j++) {
            const char *p = j == 0 ? "/v1/summary" : j == 1 ? "/v1/clients?limit=100" : path;
            double t0 = now_s();
            int st = request(&fd, port, "GET", p, NULL, buf);
            double t1 = now_s();
            if (st == 200)
                add(&s[j], t1 - t0);
            else if (bad++ < 3)
                fprintf(stderr, "bench_replicas: GET %s answered %d\n", p, st);
        }
    for (int j = 0; j < 3; j++) {
        print_lat(what[j], &s[j]);
        free(s[j].v);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return bad ? 1 : 0;
}

static int parse_ports(const char *s)
{
    nports = 0;
    for (const char *p = s; *p && nports < MAX_PORTS;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v == 0 || v > 65535)
            return -1;
        ports[nports++] = (unsigned)v;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            return -1;
    }
    return nports ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "setup") == 0 && parse_ports(argv[2]) == 0)
        return setup(ports[0], strtoul(argv[3], NULL, 10));
    if (argc >= 4 && strcmp(argv[1], "reads") == 0 && parse_ports(argv[2]) == 0)
        return reads(ports[0], atoi(argv[3]));
    if (argc >= 6 && (strcmp(argv[1], "saturate") == 0 || strcmp(argv[1], "paced") == 0) &&
        parse_ports(argv[2]) == 0) {
        double seconds = atof(argv[3]);
        unsigned long pool = strtoul(argv[5], NULL, 10);
        samples lat = {malloc(sizeof(double) * MAX_SAMPLES), 0, PTHREAD_MUTEX_INITIALIZER};
        if (lat.v == NULL || pool < 100)
            return 1;
        unsigned long done = 0;
        int rc;
        if (argv[1][0] == 's') {
            int conns = atoi(argv[4]);
            rc = run_drivers(conns, seconds, 0.0, pool, &lat, &done);
            printf("   %d replica(s), %d connections: %.0f durable rounds/s in total (%lu rounds "
                   "in %.0f s)\n",
                   nports, conns, (double)done / seconds, done, seconds);
            print_lat("POST /v1/rounds (saturated)", &lat);
        } else {
            double rate = atof(argv[4]);
            rc = run_drivers(nports, seconds, (double)nports / rate, pool, &lat, &done);
            printf("   %d replica(s), paced at %.0f rounds/s in total: %lu rounds\n", nports, rate,
                   done);
            print_lat("POST /v1/rounds (paced)", &lat);
        }
        free(lat.v);
        return rc;
    }
    fprintf(stderr, "usage: bench_replicas setup PORT CLIENTS | saturate PORTS SECONDS CONNS "
                    "POOL | paced PORTS SECONDS RATE POOL | reads PORT COUNT\n");
    return 2;
}
