/*
 * bench_rounds.c - durable rounds per second, through ledger.h's oldest calls only
 * (ledger_open, ledger_put_clients, ledger_round), so that the same program builds against
 * another version's core library: bench/run.sh builds it against this build and against a
 * baseline checkout (DPB_BENCH_BASE) and runs the two in turn in the same run, to compare
 * what a change (time in the ledger, LEDGER_FORMAT 5) costs the durable path. Rounds of 100
 * participants out of 100,000 clients, THREADS threads, SECONDS seconds, fdatasync real (the
 * data directory DIR is on the disk), or with "nosync" fdatasync a no-op (the CPU's part alone).
 * Prints one line: rounds per second (wall clock), the process's CPU microseconds per round
 * (user + system: what the machine's other jobs change least) and the rounds made; asserts
 * nothing. Under valgrind --tool=callgrind --toggle-collect=ledger_round the instructions of
 * the rounds alone, divided by the rounds made, compare two builds exactly.
 *
 *   bench_rounds DIR [THREADS [SECONDS [nosync]]]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../core/ledger/ledger.h"
#include "benchlib.h"

#define POOL 100000
#define COHORT 100

static char (*ids)[16];

typedef struct {
    ledger *l;
    int thread;
    double until;
    long done;
    dp_event *ev;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    const char *part[COHORT];
    unsigned seed = 777u + (unsigned)w->thread;
    while (now_s() < w->until) {
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "t%d-%ld", w->thread, w->done);
        size_t start = (size_t)rand_r(&seed) % POOL;
        for (int i = 0; i < COHORT; i++)
            part[i] = ids[(start + (size_t)i) % POOL];
        rq.participants = part;
        rq.n = COHORT;
        rq.event = w->ev;
        rq.policy = LEDGER_ADMIT_ELIGIBLE;
        ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
        ledger_round_res res;
        if (ledger_round(w->l, &rq, &res, NULL) != DPB_OK) {
            fprintf(stderr, "bench_rounds: a round failed\n");
            exit(1);
        }
        ledger_round_res_free(&res);
        w->done++;
    }
    return NULL;
}

static double cpu_now(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

static int nosync_fn(void *ctx, int fd)
{
    (void)ctx;
    (void)fd;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_rounds DIR [THREADS [SECONDS [nosync]]]\n");
        return 2;
    }
    const char *dir = argv[1];
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    double secs = argc > 3 ? atof(argv[3]) : 3.0;
    if (threads < 1 || threads > 32 || !(secs > 0))
        return 2;
    rm_dir(dir);
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.snapshot_every = 200000;
    static dpb_fs nosync;
    if (argc > 4 && strcmp(argv[4], "nosync") == 0) {
        nosync = *dpb_fs_posix();
        nosync.fdatasync = nosync_fn;
        nosync.fsync = nosync_fn;
        o.fs = &nosync;
    }
    ledger *l;
    dpb_error err = {0};
    if (ledger_open(&o, &l, &err) != DPB_OK) {
        fprintf(stderr, "bench_rounds: %s\n", err.detail);
        return 1;
    }
    ids = malloc(POOL * sizeof *ids);
    ledger_client *batch = calloc(10000, sizeof *batch);
    if (ids == NULL || batch == NULL)
        return 1;
    for (size_t s = 0; s < POOL; s += 10000) {
        for (size_t i = 0; i < 10000; i++) {
            snprintf(ids[s + i], sizeof ids[0], "c%zu", s + i);
            memset(&batch[i], 0, sizeof batch[i]);
            snprintf(batch[i].id, sizeof batch[i].id, "%s", ids[s + i]);
            batch[i].epsilon = 1e9;
            batch[i].delta = 1e-5;
        }
        if (ledger_put_clients(l, batch, 10000, &err) != DPB_OK) {
            fprintf(stderr, "bench_rounds: %s\n", err.detail);
            return 1;
        }
    }
    free(batch);
    dp_event *ev = dp_event_new(DP_EV_GAUSSIAN);
    if (ev == NULL)
        return 1;
    ev->u.noise.noise_multiplier = 50.0;
    pthread_t t[32];
    worker w[32];
    double t0 = now_s(), c0 = cpu_now();
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){l, i, t0 + secs, 0, ev};
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    long total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += w[i].done;
    }
    double rate = (double)total / (now_s() - t0);
    double cpu_us = total ? (cpu_now() - c0) * 1e6 / (double)total : 0.0;
    printf("%.0f %.1f %ld\n", rate, cpu_us, total);
    ledger_close_nosnapshot(l);
    dp_event_free(ev);
    free(ids);
    rm_dir(dir);
    return 0;
}
