/*
 * refine.c - the background worker of refine.h.
 */
#include "refine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct refiner {
    refine_step_fn step;
    void *ctx;
    double poll;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on stop */
    int stop;          /* read atomically by the step's computations */
};

static int stopping(refiner *r)
{
    return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
}

static void *refine_main(void *arg)
{
    refiner *r = arg;
    while (!stopping(r)) {
        if (r->step(r->ctx, &r->stop))
            continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(r->poll * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_mutex_lock(&r->mu);
        if (!stopping(r))
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

refiner *refiner_start(refine_step_fn step, void *ctx, double poll_seconds)
{
    refiner *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->step = step;
    r->ctx = ctx;
    r->poll = poll_seconds > 0.0 && poll_seconds < 10.0 ? poll_seconds : 0.05;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->th, NULL, refine_main, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        free(r);
        return NULL;
    }
    return r;
}

void refiner_stop(refiner *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
