/*
 * bench_time.c - the cost of time in the ledger (LEDGER_FORMAT 5, docs/LEDGER.md "Time and
 * history"). Prints figures; asserts nothing about time.
 *
 *   1. bytes per record the time adds (the log's records counted and measured on disk)
 *   2. memory per client and per round (the structs' sizes), and of the series (its rings,
 *      and its part of a snapshot after a year of hours)
 *   3. GET /v1/history's core, ledger_get_series, at C clients (BENCH_TIME_CLIENTS, default
 *      1000000) and a year of hourly points (8784 rounds of 100 clients, one an hour, made
 *      through the test clock, fdatasync off while building): the median of 200 queries per
 *      resolution; the state is left in BUILD/bench-time-data for bench/run.sh, which times
 *      the same query over HTTP
 *   4. durable rounds of 100 participants per second on this build (bench/bench_rounds.c
 *      compares it with another build's in the same run: bench/run.sh)
 *
 *   bench_time BUILD
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/ledger/ledger_int.h" /* the structs' sizes (figure 2) */
#include "../core/ledger/ledger_mem.h" /* the series' part of a snapshot (figure 2) */
#include "benchledger.h"
#include "benchlib.h"

#define HOURS 8784 /* the hour ring: 366 days */
#define T0 1767225600000ull

static uint64_t clock_ms;
static uint64_t bench_clock(void *ctx)
{
    (void)ctx;
    return clock_ms;
}

static int nosync_fn(void *ctx, int fd)
{
    (void)ctx;
    (void)fd;
    return 0;
}

static ledger *open_dir(const char *dir, const dpb_fs *fs, int fresh)
{
    if (fresh)
        rm_dir(dir);
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.fs = fs;
    o.snapshot_every = 100000000;
    ledger *l;
    dpb_error err = {0};
    if (ledger_open(&o, &l, &err) != DPB_OK) {
        fprintf(stderr, "bench_time: %s\n", err.detail);
        exit(1);
    }
    return l;
}

static bench_id *ids;

static void round_of(ledger *l, const char *rid, const char **part, size_t n, const dp_event *ev)
{
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.participants = part;
    rq.n = n;
    rq.event = ev;
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
    ledger_round_res res;
    if (ledger_round(l, &rq, &res, NULL) != DPB_OK) {
        fprintf(stderr, "bench_time: a round failed\n");
        exit(1);
    }
    ledger_round_res_free(&res);
}

/* The records of DIR/wal.log: how many, how many timed, and their bytes (headers included). */
static void scan_log(const char *dir, size_t *n, size_t *timed, size_t *bytes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/wal.log", dir);
    FILE *f = fopen(path, "rb");
    *n = *timed = *bytes = 0;
    unsigned char h[17];
    while (f && fread(h, 1, 17, f) == 17) {
        uint32_t len =
            (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
        (*n)++;
        *timed += (h[16] & 0x80) != 0;
        *bytes += 17u + len;
        if (fseek(f, (long)len, SEEK_CUR) != 0)
            break;
    }
    if (f)
        fclose(f);
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The median wall-clock and CPU time of 200 queries of every point kept, in ms. */
static void series_query_ms(ledger *l, ledger_resolution r, size_t *points, double *wall,
                            double *cpu)
{
    enum { N = 200 };
    double t[N], c[N];
    for (int i = 0; i < N; i++) {
        ledger_series s;
        double t0 = now_s(), c0 = cpu_s();
        if (ledger_get_series(l, r, 0, UINT64_MAX, &s) != DPB_OK)
            exit(1);
        c[i] = (cpu_s() - c0) * 1e3;
        t[i] = (now_s() - t0) * 1e3;
        *points = s.n;
        ledger_series_free(&s);
    }
    *wall = bench_pct(t, N, 50);
    *cpu = bench_pct(c, N, 50);
}

int main(int argc, char **argv)
{
    const char *build = argc > 1 ? argv[1] : "build";
    char dir[256];
    snprintf(dir, sizeof dir, "%s/bench-time-data", build);
    static dpb_fs nosync;
    nosync = *dpb_fs_posix();
    nosync.fdatasync = nosync_fn;
    nosync.fsync = nosync_fn;
    dp_event *ev = dp_event_new(DP_EV_GAUSSIAN);
    if (ev == NULL)
        return 1;
    ev->u.noise.noise_multiplier = 50.0;
    const char **part = malloc(100 * sizeof *part);
    if (part == NULL)
        return 1;
    printf("bench_time: data in %s, %ld CPUs\n", dir, sysconf(_SC_NPROCESSORS_ONLN));

    /* 1: bytes per record */
    ledger *l = open_dir(dir, &nosync, 1);
    bench_make_clients(l, &ids, 1000, 1e9, LEDGER_RDP, "bench_time");
    for (int k = 0; k < 1000; k++) {
        char rid[32];
        snprintf(rid, sizeof rid, "b%d", k);
        for (int i = 0; i < 10; i++)
            part[i] = ids[(size_t)(k * 10 + i) % 1000];
        round_of(l, rid, part, 10, ev);
    }
    ledger_close_nosnapshot(l);
    free(ids);
    ids = NULL;
    size_t n, timed, bytes;
    scan_log(dir, &n, &timed, &bytes);
    printf("time in the log: 8 bytes per record (%zu of %zu records timed; 1000 clients and 1000 "
           "rounds of 10: %.1f bytes a record on average, the time %.1f%% of it)\n",
           timed, n, n ? (double)bytes / (double)n : 0.0,
           bytes ? 100.0 * 8.0 * (double)timed / (double)bytes : 0.0);

    /* 2: memory */
    printf("memory: per client 0 bytes added (a client's struct is %zu bytes, as before; its "
           "history's 16 entries point at rounds); per round %zu of the round's %zu bytes "
           "(two times); the series %zu bytes (%u + %u + %u buckets of %zu bytes), whatever "
           "the clients and the days\n",
           sizeof(lclient), 2 * sizeof(uint64_t), sizeof(lrnd), ledger_series_bytes(),
           LEDGER_SERIES_KEEP[0], LEDGER_SERIES_KEEP[1], LEDGER_SERIES_KEEP[2],
           sizeof(ledger_point));
    fflush(stdout);

    /* 3: a year of hours at C clients */
    size_t C =
        getenv("BENCH_TIME_CLIENTS") ? strtoul(getenv("BENCH_TIME_CLIENTS"), NULL, 10) : 1000000;
    if (C < 100)
        C = 100;
    double t0 = now_s();
    l = open_dir(dir, &nosync, 1);
    clock_ms = T0;
    ledger_set_clock(l, bench_clock, NULL);
    bench_make_clients(l, &ids, C, 1e9, LEDGER_RDP, "bench_time");
    for (int h = 0; h < HOURS; h++) {
        clock_ms = T0 + (uint64_t)h * 3600000u + 1000u;
        char rid[32];
        snprintf(rid, sizeof rid, "y%d", h);
        for (int i = 0; i < 100; i++)
            part[i] = ids[((size_t)h * 7919u + (size_t)i * 104729u) % C];
        round_of(l, rid, part, 100, ev);
    }
    printf("state: %zu clients, %d hourly rounds of 100 (a year of hours) built in %.1f s\n", C,
           HOURS, now_s() - t0);
    static const char *const R[] = {"minute", "hour", "day"};
    for (int r = 0; r < LEDGER_NRES; r++) {
        size_t pts = 0;
        double wall, cpu;
        series_query_ms(l, (ledger_resolution)r, &pts, &wall, &cpu);
        printf("series query (ledger_get_series, %s, every point kept): %zu points in %.3f ms "
               "of CPU, %.3f ms wall-clock (medians of 200)\n",
               R[r], pts, cpu, wall);
    }
    bw w = {0};
    pthread_rwlock_rdlock(&l->lock);
    lg_series_write(l, &w);
    pthread_rwlock_unlock(&l->lock);
    printf("the series' part of a snapshot after a year of hours: %zu bytes\n", w.n);
    free(w.b);
    ledger_close(l); /* its snapshot: run.sh opens it with dpbudgetd */
    fflush(stdout);

    /* 4: durable rounds on this build (the real disk) */
    char ddir[300];
    snprintf(ddir, sizeof ddir, "%s-durable", dir);
    l = open_dir(ddir, NULL, 1);
    free(ids);
    ids = NULL;
    bench_make_clients(l, &ids, 100000, 1e9, LEDGER_RDP, "bench_time");
    long done = 0;
    double until = now_s() + 3.0, s0 = now_s();
    while (now_s() < until) {
        char rid[32];
        snprintf(rid, sizeof rid, "d%ld", done);
        for (int i = 0; i < 100; i++)
            part[i] = ids[((size_t)done * 100u + (size_t)i) % 100000];
        round_of(l, rid, part, 100, ev);
        done++;
    }
    printf("durable rounds of 100 participants, one thread: %.0f rounds/s\n",
           (double)done / (now_s() - s0));
    ledger_close(l);
    rm_dir(ddir);
    free(ids);
    ids = NULL;
    free(part);
    dp_event_free(ev);
    return 0;
}
