/* workpool.c - the bounded compute pool (workpool.h). */
#define _GNU_SOURCE
#include "workpool.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../core/common/clock.h"
#include "cpuprio.h"

typedef struct {
    workpool_fn fn;
    void *arg;
} job;

struct workpool {
    pthread_mutex_t mu;
    pthread_cond_t more;
    job *ring;        /* capacity slots */
    unsigned cap;     /* threads + depth */
    unsigned head, n; /* queued jobs: ring[head .. head + n) */
    unsigned held;    /* places taken: queued + running + reserved */
    unsigned threads;
    int stop;      /* read by jobs without the lock (atomically) */
    double mean_s; /* moving mean of the job times */
    pthread_t *tids;
    unsigned started;
    int nice_incr;
    char name[16]; /* the threads' name */
    int joined;    /* the threads have exited (workpool_stop) */
};

static void *worker(void *arg)
{
    workpool *p = arg;
    (void)pthread_setname_np(pthread_self(), p->name);
    if (p->nice_incr > 0)
        cpuprio_background(p->nice_incr);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->n == 0 && !p->stop)
            pthread_cond_wait(&p->more, &p->mu);
        if (p->n == 0)
            break; /* stopping, nothing left */
        job j = p->ring[p->head];
        p->head = (p->head + 1) % p->cap;
        p->n--;
        pthread_mutex_unlock(&p->mu);
        double t0 = dpb_mono_s();
        j.fn(j.arg, &p->stop);
        double dt = dpb_mono_s() - t0;
        pthread_mutex_lock(&p->mu);
        p->mean_s = p->mean_s > 0.0 ? 0.8 * p->mean_s + 0.2 * dt : dt;
        p->held--;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

workpool *workpool_create(unsigned threads, unsigned depth, int nice_incr, const char *name)
{
    if (threads == 0)
        return NULL;
    workpool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->cap = threads + depth;
    p->threads = threads;
    p->nice_incr = nice_incr;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ring = calloc(p->cap, sizeof *p->ring);
    p->tids = calloc(threads, sizeof *p->tids);
    if (p->ring == NULL || p->tids == NULL) {
        free(p->ring);
        free(p->tids);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->more, NULL);
    for (; p->started < threads; p->started++)
        if (pthread_create(&p->tids[p->started], NULL, worker, p) != 0)
            break;
    if (p->started < threads) {
        workpool_free(p);
        return NULL;
    }
    return p;
}

int workpool_reserve(workpool *p)
{
    pthread_mutex_lock(&p->mu);
    int ok = !p->stop && p->held < p->cap;
    if (ok)
        p->held++;
    pthread_mutex_unlock(&p->mu);
    return ok ? 0 : -1;
}

void workpool_push(workpool *p, workpool_fn fn, void *arg)
{
    pthread_mutex_lock(&p->mu);
    if (p->stop) {
        /* stopping since the place was taken: the threads may be gone, run it here (it
         * sees the stop flag and returns at once) */
        p->held--;
        pthread_mutex_unlock(&p->mu);
        fn(arg, &p->stop);
        return;
    }
    /* held counts this job already, and held <= cap, so the ring has room */
    p->ring[(p->head + p->n) % p->cap] = (job){fn, arg};
    p->n++;
    pthread_cond_signal(&p->more);
    pthread_mutex_unlock(&p->mu);
}

unsigned workpool_retry_after(workpool *p)
{
    pthread_mutex_lock(&p->mu);
    double mean = p->mean_s > 0.0 ? p->mean_s : 1.0;
    double s = ceil(mean * (double)(p->held + 1) / (double)p->threads);
    pthread_mutex_unlock(&p->mu);
    return s < 1.0 ? 1u : s > 60.0 ? 60u : (unsigned)s;
}

void workpool_load(workpool *p, unsigned *busy, unsigned *capacity)
{
    pthread_mutex_lock(&p->mu);
    *busy = p->held;
    *capacity = p->cap;
    pthread_mutex_unlock(&p->mu);
}

void workpool_stop(workpool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    int already = p->joined;
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&p->more);
    pthread_mutex_unlock(&p->mu);
    if (already)
        return;
    for (unsigned i = 0; i < p->started; i++)
        pthread_join(p->tids[i], NULL);
    pthread_mutex_lock(&p->mu);
    p->joined = 1;
    pthread_mutex_unlock(&p->mu);
}

void workpool_free(workpool *p)
{
    if (p == NULL)
        return;
    workpool_stop(p);
    pthread_cond_destroy(&p->more);
    pthread_mutex_destroy(&p->mu);
    free(p->ring);
    free(p->tids);
    free(p);
}
