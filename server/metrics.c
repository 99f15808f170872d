/* metrics.c - Prometheus text exposition (see metrics.h). */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ledger/wal.h"
#include "resources.h"

#define MAX_ROUTES 64
static const int STATUSES[] = {200, 201, 304, 400, 401, 403, 404, 405,
                               409, 413, 415, 422, 429, 500, 503, 0 /* other */};
#define NSTATUS (sizeof STATUSES / sizeof STATUSES[0])
static const double LE[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                            0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
#define NLE (sizeof LE / sizeof LE[0])

/* index MAX_ROUTES: requests that matched no route */
static uint64_t requests[MAX_ROUTES + 1][NSTATUS];
static uint64_t hist[MAX_ROUTES + 1][NLE + 1];
static uint64_t micros[MAX_ROUTES + 1]; /* latency sum in microseconds */
static uint64_t admitted_total, refused_total, denied[3];

static void add(uint64_t *c, uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static uint64_t get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

void metrics_request(int rt, int status, double seconds)
{
    int r = rt >= 0 && rt < MAX_ROUTES ? rt : MAX_ROUTES;
    size_t s = NSTATUS - 1;
    for (size_t i = 0; i + 1 < NSTATUS; i++)
        if (STATUSES[i] == status)
            s = i;
    add(&requests[r][s], 1);
    size_t b = NLE;
    for (size_t i = 0; i < NLE; i++)
        if (seconds <= LE[i]) {
            b = i;
            break;
        }
    add(&hist[r][b], 1);
    add(&micros[r], (uint64_t)(seconds * 1e6 + 0.5));
}

void metrics_round(uint64_t admitted, uint64_t refused)
{
    add(&admitted_total, admitted);
    add(&refused_total, refused);
}

void metrics_denied(int status)
{
    add(&denied[status == 401 ? 0 : status == 403 ? 1 : 2], 1);
}

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = b->cap * 2 + (size_t)n + 1;
        char *nb = realloc(b->buf, ncap);
        if (nb == NULL) {
            b->oom = 1;
            return;
        }
        b->buf = nb;
        b->cap = ncap;
    }
}

static void route_label(int r, char *out, size_t n)
{
    if (r == MAX_ROUTES || ROUTES[r].method == NULL) {
        snprintf(out, n, "route=\"unmatched\",method=\"\"");
        return;
    }
    snprintf(out, n, "route=\"%s%s\",method=\"%s\"", ROUTES[r].path, ROUTES[r].prefix ? "{id}" : "",
             ROUTES[r].method);
}

char *metrics_render(ledger *l, size_t *len)
{
    sbuf b = {malloc(8192), 0, 8192, 0};
    if (b.buf == NULL)
        return NULL;
    int nroutes = 0;
    while (nroutes < MAX_ROUTES && ROUTES[nroutes].method)
        nroutes++;
    char lab[160];
    put(&b, "# HELP dpbudget_http_requests_total Requests answered, by route, method and status.\n"
            "# TYPE dpbudget_http_requests_total counter\n");
    for (int r = 0; r <= MAX_ROUTES; r++) {
        if (r >= nroutes && r != MAX_ROUTES)
            continue;
        route_label(r, lab, sizeof lab);
        for (size_t s = 0; s < NSTATUS; s++) {
            uint64_t v = get(&requests[r][s]);
            if (v == 0)
                continue;
            if (STATUSES[s])
                put(&b, "dpbudget_http_requests_total{%s,status=\"%d\"} %llu\n", lab, STATUSES[s],
                    (unsigned long long)v);
            else
                put(&b, "dpbudget_http_requests_total{%s,status=\"other\"} %llu\n", lab,
                    (unsigned long long)v);
        }
    }
    put(&b, "# HELP dpbudget_http_request_duration_seconds Time from the last byte of the request "
            "to the response being queued.\n"
            "# TYPE dpbudget_http_request_duration_seconds histogram\n");
    for (int r = 0; r <= MAX_ROUTES; r++) {
        if (r >= nroutes && r != MAX_ROUTES)
            continue;
        uint64_t total = 0;
        for (size_t i = 0; i <= NLE; i++)
            total += get(&hist[r][i]);
        if (total == 0)
            continue;
        route_label(r, lab, sizeof lab);
        uint64_t cum = 0;
        for (size_t i = 0; i < NLE; i++) {
            cum += get(&hist[r][i]);
            put(&b, "dpbudget_http_request_duration_seconds_bucket{%s,le=\"%g\"} %llu\n", lab,
                LE[i], (unsigned long long)cum);
        }
        put(&b, "dpbudget_http_request_duration_seconds_bucket{%s,le=\"+Inf\"} %llu\n", lab,
            (unsigned long long)total);
        put(&b, "dpbudget_http_request_duration_seconds_sum{%s} %.6f\n", lab,
            (double)get(&micros[r]) * 1e-6);
        put(&b, "dpbudget_http_request_duration_seconds_count{%s} %llu\n", lab,
            (unsigned long long)total);
    }
    put(&b,
        "# HELP dpbudget_http_denied_total Requests refused before their handler: no valid key "
        "(401), a key without the scope (403), over the rate limit (429).\n"
        "# TYPE dpbudget_http_denied_total counter\n"
        "dpbudget_http_denied_total{status=\"401\"} %llu\n"
        "dpbudget_http_denied_total{status=\"403\"} %llu\n"
        "dpbudget_http_denied_total{status=\"429\"} %llu\n",
        (unsigned long long)get(&denied[0]), (unsigned long long)get(&denied[1]),
        (unsigned long long)get(&denied[2]));
    put(&b,
        "# HELP dpbudget_round_participants_total Round participants since start (dry runs and "
        "replays excluded), by outcome.\n"
        "# TYPE dpbudget_round_participants_total counter\n"
        "dpbudget_round_participants_total{outcome=\"admitted\"} %llu\n"
        "dpbudget_round_participants_total{outcome=\"refused\"} %llu\n",
        (unsigned long long)get(&admitted_total), (unsigned long long)get(&refused_total));
    if (l) {
        ledger_summary s;
        ledger_get_summary(l, &s);
        put(&b,
            "# HELP dpbudget_ledger_clients Clients in the ledger, by status.\n"
            "# TYPE dpbudget_ledger_clients gauge\n"
            "dpbudget_ledger_clients{status=\"active\"} %llu\n"
            "dpbudget_ledger_clients{status=\"exhausted\"} %llu\n"
            "dpbudget_ledger_clients{status=\"uncertified\"} %llu\n"
            "# HELP dpbudget_ledger_rounds Rounds stored in the ledger.\n"
            "# TYPE dpbudget_ledger_rounds gauge\n"
            "dpbudget_ledger_rounds %llu\n"
            "# HELP dpbudget_ledger_log_bytes Size of the write-ahead log.\n"
            "# TYPE dpbudget_ledger_log_bytes gauge\n"
            "dpbudget_ledger_log_bytes %llu\n"
            "# HELP dpbudget_ledger_read_only 1 after an I/O failure stopped ledger writes.\n"
            "# TYPE dpbudget_ledger_read_only gauge\n"
            "dpbudget_ledger_read_only %d\n",
            (unsigned long long)s.active, (unsigned long long)s.exhausted,
            (unsigned long long)s.uncertified, (unsigned long long)s.rounds,
            (unsigned long long)s.log_bytes, s.read_only);
        put(&b, "# HELP dpbudget_wal_fsync_seconds fdatasync latency of the write-ahead log.\n"
                "# TYPE dpbudget_wal_fsync_seconds histogram\n");
        uint64_t cum = 0;
        for (int i = 0; i < WAL_SYNC_NBUCKETS - 1; i++) {
            cum += s.sync_hist[i];
            put(&b, "dpbudget_wal_fsync_seconds_bucket{le=\"%g\"} %llu\n", WAL_SYNC_BUCKETS[i],
                (unsigned long long)cum);
        }
        put(&b,
            "dpbudget_wal_fsync_seconds_bucket{le=\"+Inf\"} %llu\n"
            "dpbudget_wal_fsync_seconds_sum %.6f\n"
            "dpbudget_wal_fsync_seconds_count %llu\n",
            (unsigned long long)s.sync_count, s.sync_seconds, (unsigned long long)s.sync_count);
    }
    if (b.oom) {
        free(b.buf);
        return NULL;
    }
    *len = b.len;
    return b.buf;
}
