/* metrics.c - Prometheus text exposition (see metrics.h). */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../core/ledger/wal.h"
#include "../core/common/numfmt.h"
#include "routes.h"

#define MAX_ROUTES 64
static const int STATUSES[] = {200, 201, 304, 400, 401, 403, 404, 405, 409,
                               413, 415, 422, 429, 500, 503, 204, 0 /* other */};
#define NSTATUS (sizeof STATUSES / sizeof STATUSES[0])
static const double LE[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                            0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
#define NLE (sizeof LE / sizeof LE[0])
static const char *const METHODS[] = {"GET",    "HEAD",  "POST",    "PUT",
                                      "DELETE", "PATCH", "OPTIONS", "other"};
#define NMETHOD (int)(sizeof METHODS / sizeof METHODS[0])
/* compute latency: from a closed form (microseconds) to a long FFT composition */
static const double CLE[] = {0.0001, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                             0.5,    1.0,   2.5,   5.0,  10.0,  30.0, 60.0};
#define NCLE (sizeof CLE / sizeof CLE[0])
/* the accountants by dp_accountant value (dp_accountant_name), then "unknown" */
#define NACCT 10
_Static_assert(DP_ACCT_SHUFFLE_EXACT == NACCT - 2, "one metrics slot per accountant, then unknown");
#define NREASON 10 /* ledger_reason values */

_Static_assert(sizeof(((ledger_summary *)0)->sync_hist) / sizeof(uint64_t) == WAL_SYNC_NBUCKETS,
               "ledger_summary.sync_hist must hold WAL_SYNC_NBUCKETS buckets");

/* The counters every request writes, in shards: a thread adds to its own shard, so the HTTP
 * workers never write the same cache line per request (a scrape adds the shards up). Threads
 * beyond NSHARD share shards, still exactly (the adds are atomic). Index MAX_ROUTES: requests
 * that matched no route. */
#define NSHARD 8
typedef struct {
    uint64_t requests[MAX_ROUTES + 1][NMETHOD][NSTATUS];
    uint64_t hist[MAX_ROUTES + 1][NMETHOD][NLE + 1];
    uint64_t micros[MAX_ROUTES + 1][NMETHOD]; /* latency sum in microseconds */
    uint64_t chist[NACCT][NCLE + 1], cmicros[NACCT];
} shard;
static _Alignas(64) shard shards[NSHARD];
static unsigned shards_taken;
static uint64_t admitted_total, refused_total, rounds_total, denied[3], head_timeouts;
static uint64_t refusals[NREASON];
static uint64_t compute_busy, compute_refused, compute_places;
static uint64_t ledger_unavailable_total, answer_refused_total;
static const char *ledger_backend; /* "file" or "postgresql"; NULL: no ledger */
static const route *routes;        /* the routing table the counts are by (metrics_routes) */

static void add(uint64_t *c, uint64_t v)
{
    __atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static uint64_t get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

/* This thread's shard, chosen once per thread. */
static shard *my_shard(void)
{
    static _Thread_local shard *mine;
    if (mine == NULL)
        mine = &shards[__atomic_fetch_add(&shards_taken, 1, __ATOMIC_RELAXED) % NSHARD];
    return mine;
}

/* A sharded counter's total: the same counter (at its offset within a shard) in every shard. */
static uint64_t shard_sum(const uint64_t *c)
{
    size_t off = (size_t)((const char *)c - (const char *)&shards[0]);
    uint64_t t = 0;
    for (int i = 0; i < NSHARD; i++)
        t += get((const uint64_t *)((const char *)&shards[i] + off));
    return t;
}

int metrics_method(const char *method)
{
    for (int i = 0; method && i < NMETHOD - 1; i++)
        if (strcmp(METHODS[i], method) == 0)
            return i;
    return NMETHOD - 1;
}

const char *metrics_method_name(int method)
{
    return METHODS[method >= 0 && method < NMETHOD ? method : NMETHOD - 1];
}

static size_t bucket(const double *le, size_t n, double v)
{
    for (size_t i = 0; i < n; i++)
        if (v <= le[i])
            return i;
    return n;
}

void metrics_request(int rt, int method, int status, double seconds)
{
    int r = rt >= 0 && rt < MAX_ROUTES ? rt : MAX_ROUTES;
    int m = method >= 0 && method < NMETHOD ? method : NMETHOD - 1;
    size_t s = NSTATUS - 1;
    for (size_t i = 0; i + 1 < NSTATUS; i++)
        if (STATUSES[i] == status)
            s = i;
    shard *h = my_shard();
    add(&h->requests[r][m][s], 1);
    add(&h->hist[r][m][bucket(LE, NLE, seconds)], 1);
    add(&h->micros[r][m], (uint64_t)(seconds * 1e6 + 0.5));
}

void metrics_round(const ledger_round_res *r)
{
    add(&rounds_total, 1);
    add(&admitted_total, r->admitted);
    add(&refused_total, r->n - r->admitted);
    for (size_t i = 0; r->outcomes && i < r->n; i++)
        if (!r->outcomes[i].admitted && (unsigned)r->outcomes[i].reason < NREASON)
            add(&refusals[r->outcomes[i].reason], 1);
}

static const char *acct_name(int a)
{
    return a < NACCT - 1 ? dp_accountant_name((dp_accountant)a) : "unknown";
}

void metrics_compute(const char *accountant, double seconds)
{
    int a = NACCT - 1;
    dp_accountant v;
    if (accountant && dp_accountant_parse(accountant, &v) == 0 && (int)v < NACCT - 1)
        a = (int)v;
    shard *h = my_shard();
    add(&h->chist[a][bucket(CLE, NCLE, seconds)], 1);
    add(&h->cmicros[a], (uint64_t)(seconds * 1e6 + 0.5));
}

void metrics_head_timeout(void)
{
    add(&head_timeouts, 1);
}

void metrics_compute_busy(int delta)
{
    if (delta >= 0)
        add(&compute_busy, (uint64_t)delta);
    else
        __atomic_fetch_sub(&compute_busy, (uint64_t)-delta, __ATOMIC_RELAXED);
}

void metrics_compute_refused(void)
{
    add(&compute_refused, 1);
}

void metrics_answer_refused(void)
{
    add(&answer_refused_total, 1);
}

void metrics_ledger_unavailable(void)
{
    add(&ledger_unavailable_total, 1);
}

void metrics_routes(const route *table)
{
    routes = table;
}

void metrics_ledger_backend(const char *backend)
{
    ledger_backend = backend;
}

void metrics_compute_capacity(unsigned places)
{
    __atomic_store_n(&compute_places, (uint64_t)places, __ATOMIC_RELAXED);
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

/* A histogram's cumulative buckets (n[i] counted at most le[i]; total at +Inf), its sum and
 * count, under name with the labels lab ("" for none; else `k="v",...`). */
static void put_histogram(sbuf *b, const char *name, const char *lab, const double *le,
                          const uint64_t *n, size_t nle, uint64_t total, double sum)
{
    const char *sep = lab[0] ? "," : "";
    uint64_t cum = 0;
    for (size_t i = 0; i < nle; i++) {
        cum += n[i];
        put(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, lab, sep, le[i], (unsigned long long)cum);
    }
    put(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, lab, sep, (unsigned long long)total);
    char secs[DPB_NUM_MAX];
    dpb_num_str(sum, secs);
    if (lab[0])
        put(b, "%s_sum{%s} %s\n%s_count{%s} %llu\n", name, lab, secs, name, lab,
            (unsigned long long)total);
    else
        put(b, "%s_sum %s\n%s_count %llu\n", name, secs, name, (unsigned long long)total);
}

/* One metric without labels: its HELP and TYPE lines, then its value. */
static void put_metric(sbuf *b, const char *name, const char *type, const char *help, uint64_t v)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name,
        (unsigned long long)v);
}

static void route_label(int r, int m, char *out, size_t n)
{
    if (r == MAX_ROUTES || routes == NULL || routes[r].method == NULL)
        snprintf(out, n, "route=\"unmatched\",method=\"%s\"", METHODS[m]);
    else
        snprintf(out, n, "route=\"%s%s%s\",method=\"%s\"", routes[r].path,
                 routes[r].prefix ? "{id}" : "", routes[r].suffix ? routes[r].suffix : "",
                 METHODS[m]);
}

/* The process's own figures from /proc (Linux); each is left out when unreadable. */
static void render_process(sbuf *b)
{
    double ticks = (double)sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    char st[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(st, 1, sizeof st - 1, f) : 0;
    if (f)
        fclose(f);
    st[n] = '\0';
    /* fields after the command name (which may hold spaces): state is field 3 */
    const char *p = strrchr(st, ')');
    unsigned long long utime = 0, stime = 0, start = 0;
    long rss = 0;
    int ok = p && ticks > 0 &&
             sscanf(p + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                    "%*d %llu %*u %ld",
                    &utime, &stime, &start, &rss) == 4;
    if (ok) {
        put(b,
            "# HELP process_cpu_seconds_total User and system CPU time spent, in seconds.\n"
            "# TYPE process_cpu_seconds_total counter\n"
            "process_cpu_seconds_total %.2f\n"
            "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
            "# TYPE process_resident_memory_bytes gauge\n"
            "process_resident_memory_bytes %lld\n",
            (double)(utime + stime) / ticks, (long long)rss * (long long)page);
        /* start time: boot time (btime in /proc/stat) plus the start in ticks since boot */
        FILE *ps = fopen("/proc/stat", "r");
        char line[256];
        long long btime = -1;
        while (ps && fgets(line, sizeof line, ps))
            if (sscanf(line, "btime %lld", &btime) == 1)
                break;
        if (ps)
            fclose(ps);
        if (btime >= 0)
            put(b,
                "# HELP process_start_time_seconds Start time of the process since the Unix "
                "epoch, in seconds.\n"
                "# TYPE process_start_time_seconds gauge\n"
                "process_start_time_seconds %.2f\n",
                (double)btime + (double)start / ticks);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long fds = 0;
        while (readdir(d))
            fds++;
        closedir(d);
        /* minus ".", ".." and the directory's own descriptor */
        put(b,
            "# HELP process_open_fds Number of open file descriptors.\n"
            "# TYPE process_open_fds gauge\n"
            "process_open_fds %ld\n",
            fds >= 3 ? fds - 3 : 0);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        put(b,
            "# HELP process_max_fds Maximum number of open file descriptors.\n"
            "# TYPE process_max_fds gauge\n"
            "process_max_fds %llu\n",
            (unsigned long long)rl.rlim_cur);
}

/* The request counts of route r (MAX_ROUTES: unmatched) and method m, by status. */
static void request_counts(sbuf *b, int r, int m)
{
    char lab[160];
    route_label(r, m, lab, sizeof lab);
    for (size_t s = 0; s < NSTATUS; s++) {
        uint64_t v = shard_sum(&shards[0].requests[r][m][s]);
        if (v == 0)
            continue;
        if (STATUSES[s])
            put(b, "dpbudget_http_requests_total{%s,status=\"%d\"} %llu\n", lab, STATUSES[s],
                (unsigned long long)v);
        else
            put(b, "dpbudget_http_requests_total{%s,status=\"other\"} %llu\n", lab,
                (unsigned long long)v);
    }
}

/* The latency histogram of route r and method m, when it counted any request. */
static void request_latency(sbuf *b, int r, int m)
{
    /* each bucket read once: the cumulative counts and the total agree */
    uint64_t n[NLE + 1], total = 0;
    for (size_t i = 0; i <= NLE; i++)
        total += n[i] = shard_sum(&shards[0].hist[r][m][i]);
    if (total == 0)
        return;
    char lab[160];
    route_label(r, m, lab, sizeof lab);
    put_histogram(b, "dpbudget_http_request_duration_seconds", lab, LE, n, NLE, total,
                  (double)shard_sum(&shards[0].micros[r][m]) / 1e6);
}

/* each(b, r, m) for every route of the table, then the unmatched requests, by method. */
static void each_route(sbuf *b, void (*each)(sbuf *, int, int))
{
    int nroutes = 0;
    while (routes && nroutes < MAX_ROUTES && routes[nroutes].method)
        nroutes++;
    for (int r = 0; r <= MAX_ROUTES; r++) {
        if (r >= nroutes && r != MAX_ROUTES)
            continue;
        for (int m = 0; m < NMETHOD; m++)
            each(b, r, m);
    }
}

static void render_requests(sbuf *b)
{
    put(b, "# HELP dpbudget_http_requests_total Requests answered, by route (\"unmatched\" when "
           "no route has the path), the method sent and status.\n"
           "# TYPE dpbudget_http_requests_total counter\n");
    each_route(b, request_counts);
    put(b, "# HELP dpbudget_http_request_duration_seconds Time from the last byte of the request "
           "to the response being queued.\n"
           "# TYPE dpbudget_http_request_duration_seconds histogram\n");
    each_route(b, request_latency);
}

static void render_compute(sbuf *b)
{
    put(b, "# HELP dpbudget_compute_duration_seconds Time the privacy computation took (POST "
           "/v1/delta, /v1/epsilon, /v1/calibrate, /v1/curve, /v1/proactive), by the accountant "
           "that answered.\n"
           "# TYPE dpbudget_compute_duration_seconds histogram\n");
    for (int a = 0; a < NACCT; a++) {
        uint64_t n[NCLE + 1], total = 0;
        for (size_t i = 0; i <= NCLE; i++)
            total += n[i] = shard_sum(&shards[0].chist[a][i]);
        if (total == 0)
            continue;
        char lab[64];
        snprintf(lab, sizeof lab, "accountant=\"%s\"", acct_name(a));
        put_histogram(b, "dpbudget_compute_duration_seconds", lab, CLE, n, NCLE, total,
                      (double)shard_sum(&shards[0].cmicros[a]) / 1e6);
    }
}

static void render_ledger(sbuf *b, ledger *l)
{
    ledger_summary s;
    ledger_get_summary(l, &s);
    put(b,
        "# HELP dpbudget_ledger_clients Clients in the ledger, by status.\n"
        "# TYPE dpbudget_ledger_clients gauge\n"
        "dpbudget_ledger_clients{status=\"active\"} %llu\n"
        "dpbudget_ledger_clients{status=\"exhausted\"} %llu\n"
        "dpbudget_ledger_clients{status=\"uncertified\"} %llu\n"
        "dpbudget_ledger_clients{status=\"stuck\"} %llu\n"
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
        (unsigned long long)s.uncertified, (unsigned long long)s.stuck,
        (unsigned long long)s.rounds, (unsigned long long)s.log_bytes, s.read_only);
    put(b, "# HELP dpbudget_ledger_clients_spent_fraction Clients by the fraction of their "
           "epsilon budget spent, in bins [from, to) of 0.1; the last bin (from 1) is spent to or "
           "past the budget.\n"
           "# TYPE dpbudget_ledger_clients_spent_fraction gauge\n");
    for (int i = 0; i < 11; i++) {
        char to[8] = "+Inf";
        if (i < 10)
            snprintf(to, sizeof to, "%.1f", (i + 1) / 10.0);
        put(b, "dpbudget_ledger_clients_spent_fraction{from=\"%.1f\",to=\"%s\"} %llu\n", i / 10.0,
            to, (unsigned long long)s.spend_hist[i]);
    }
    put(b, "# HELP dpbudget_wal_fsync_seconds fdatasync latency of the write-ahead log.\n"
           "# TYPE dpbudget_wal_fsync_seconds histogram\n");
    put_histogram(b, "dpbudget_wal_fsync_seconds", "", WAL_SYNC_BUCKETS, s.sync_hist,
                  WAL_SYNC_NBUCKETS - 1, s.sync_count, s.sync_seconds);
    ledger_snapshot_info si;
    ledger_snapshot_stats(l, &si);
    put_metric(b, "dpbudget_ledger_snapshots_total", "counter",
               "Ledger snapshots written in the background since start.", si.written);
    put_metric(b, "dpbudget_ledger_snapshot_failures_total", "counter",
               "Ledger snapshots that failed since start (nothing is lost, but the log grows "
               "until one succeeds; the log says why).",
               si.failed);
}

char *metrics_render(ledger *l, size_t *len)
{
    sbuf b = {malloc(16384), 0, 16384, 0};
    if (b.buf == NULL)
        return NULL;
    put(&b,
        "# HELP dpbudget_build_info The daemon's version (the value is always 1).\n"
        "# TYPE dpbudget_build_info gauge\n"
        "dpbudget_build_info{version=\"%s\"} 1\n",
        DPB_VERSION);
    render_process(&b);
    render_requests(&b);
    render_compute(&b);
    put(&b,
        "# HELP dpbudget_http_denied_total Requests refused before their handler: no valid key "
        "(401), a key without the scope (403), over the rate limit (429).\n"
        "# TYPE dpbudget_http_denied_total counter\n"
        "dpbudget_http_denied_total{status=\"401\"} %llu\n"
        "dpbudget_http_denied_total{status=\"403\"} %llu\n"
        "dpbudget_http_denied_total{status=\"429\"} %llu\n",
        (unsigned long long)get(&denied[0]), (unsigned long long)get(&denied[1]),
        (unsigned long long)get(&denied[2]));
    put_metric(&b, "dpbudget_http_head_timeouts_total", "counter",
               "Connections closed because a request head was not complete within "
               "--header-timeout (slow or stalled clients).",
               get(&head_timeouts));
    put_metric(&b, "dpbudget_compute_busy", "gauge",
               "Computations running or waiting on the compute pool.", get(&compute_busy));
    put_metric(&b, "dpbudget_compute_places", "gauge",
               "Places on the compute pool (--compute-threads + --compute-queue).",
               get(&compute_places));
    put_metric(&b, "dpbudget_compute_refused_total", "counter",
               "Computations refused with 503 overloaded (every place taken).",
               get(&compute_refused));
    put_metric(&b, "dpbudget_answer_refused_total", "counter",
               "Answers refused with 503 answer_memory_exhausted (--answer-memory held).",
               get(&answer_refused_total));
    put_metric(&b, "dpbudget_rounds_total", "counter",
               "Rounds charged since start (dry runs and replays excluded).", get(&rounds_total));
    put(&b,
        "# HELP dpbudget_round_participants_total Round participants since start (dry runs and "
        "replays excluded), by outcome.\n"
        "# TYPE dpbudget_round_participants_total counter\n"
        "dpbudget_round_participants_total{outcome=\"admitted\"} %llu\n"
        "dpbudget_round_participants_total{outcome=\"refused\"} %llu\n",
        (unsigned long long)get(&admitted_total), (unsigned long long)get(&refused_total));
    put(&b, "# HELP dpbudget_round_refusals_total Participants refused since start (dry runs and "
            "replays excluded), by reason.\n"
            "# TYPE dpbudget_round_refusals_total counter\n");
    for (int r = 1; r < NREASON; r++)
        if (r != LEDGER_RECORDED)
            put(&b, "dpbudget_round_refusals_total{reason=\"%s\"} %llu\n",
                ledger_reason_name((ledger_reason)r), (unsigned long long)get(&refusals[r]));
    if (l)
        render_ledger(&b, l);
    if (ledger_backend)
        put(&b,
            "# HELP dpbudget_ledger_backend_info Where the ledger's log lives: file (the embedded "
            "ledger, --data-dir) or postgresql (--ledger-url, shared by replicas); always 1.\n"
            "# TYPE dpbudget_ledger_backend_info gauge\n"
            "dpbudget_ledger_backend_info{backend=\"%s\"} 1\n"
            "# HELP dpbudget_ledger_unavailable_total Answers 503 ledger_unavailable: the "
            "ledger's database could not be reached.\n"
            "# TYPE dpbudget_ledger_unavailable_total counter\n"
            "dpbudget_ledger_unavailable_total %llu\n",
            ledger_backend, (unsigned long long)get(&ledger_unavailable_total));
    if (b.oom) {
        free(b.buf);
        return NULL;
    }
    *len = b.len;
    return b.buf;
}
