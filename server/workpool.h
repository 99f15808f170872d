/*
 * workpool.h - a bounded pool of threads for the compute requests, apart from the HTTP
 * workers, so that a computation can never hold the capacity that probes, ledger reads and
 * charges need.
 *
 * Capacity is threads running plus depth waiting; a request that finds it full is refused
 * at once (the HTTP layer answers 503 overloaded with Retry-After) instead of queueing
 * without bound. The pools of work the caller's input sizes have background threads
 * (cpuprio.h): below the HTTP workers' priority and off one CPU, so that on a busy machine the
 * short ledger requests get a CPU first.
 *
 * Admission is two steps so that the caller can suspend its connection in between: take a
 * place (workpool_reserve), then hand the job over (workpool_push, which cannot fail). A
 * job's function runs exactly once, on a pool thread; stop is the pool's stop flag (set by
 * workpool_destroy), for the job's cooperative cancellation.
 */
#ifndef HTTP_WORKPOOL_H
#define HTTP_WORKPOOL_H

typedef struct workpool workpool;

typedef void (*workpool_fn)(void *arg, const int *stop);

/* threads >= 1 running jobs, depth >= 0 more waiting, nice_incr > 0: background threads
 * with that added to their nice value (cpuprio_background), 0: as the caller's; name the threads'
 * name (at most 15 bytes: what ps, top and /proc/PID/task/TID/comm show). NULL when the threads
 * cannot be started. */
workpool *workpool_create(unsigned threads, unsigned depth, int nice_incr, const char *name);

/* Take a place: 0 when one is held for the next workpool_push, -1 when the pool is full or
 * stopping. */
int workpool_reserve(workpool *p);

/* Queue a job on a place taken by workpool_reserve. */
void workpool_push(workpool *p, workpool_fn fn, void *arg);

/* Whole seconds after which a place is likely free again (at least 1): the jobs ahead times
 * the recent mean job time, spread over the threads. */
unsigned workpool_retry_after(workpool *p);

/* Jobs running and waiting, and places in all (for metrics). */
void workpool_load(workpool *p, unsigned *busy, unsigned *capacity);

/* Set the stop flag, let every queued job run (they see the flag and return early), and join
 * the threads; from then on workpool_reserve fails and a job pushed on a place taken before
 * runs at once on the caller's thread (it sees the flag set). */
void workpool_stop(workpool *p);

/* Stop (if not stopped) and free. */
void workpool_free(workpool *p);

#endif
