/*
 * refine.c - the background worker of refine.h.
 */
#define _GNU_SOURCE /* SCHED_IDLE */
#include "refine.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct refiner {
    refine_step_fn step;
    void *ctx;
    double poll;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on stop */
    int stop;          /* read atomically by the step's computations */
};

/* Lowest priority for this thread only: SCHED_IDLE (allowed unprivileged on Linux), else
 * nice 19 on its thread id (setpriority acts on one thread there). Best effort. */
static void lower_priority(void)
{
#ifdef SCHED_IDLE
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) == 0)
        return;
#endif
#ifdef SYS_gettid
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#endif
}

static int stopping(refiner *r)
{
    return __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
}

static void *refine_main(void *arg)
{
    refiner *r = arg;
    lower_priority();
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
