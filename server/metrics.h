/*
 * metrics.h - Prometheus metrics: requests by route, method sent and status, latency
 * histograms, rounds and refusals by reason, compute latency by accountant, build info and
 * the process's CPU, memory, descriptors and start time (read from /proc at scrape time);
 * the ledger's gauges, spend distribution and fsync latency are read at scrape time too.
 * Counters are lock-free (relaxed atomics). Every label takes values from a bounded set.
 */
#ifndef HTTP_METRICS_H
#define HTTP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/common/clock.h"
#include "../core/ledger/ledger.h"

/* The label index of a request method: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, or
 * "other" for anything else (the label set stays bounded whatever clients send). */
int metrics_method(const char *method);

/* The label value of a metrics_method() index (static storage). */
const char *metrics_method_name(int method);

/* One answered request: rt is an index into ROUTES (the route at that path, whichever
 * method it routes), or -1 when no route matched (route="unmatched"); method is
 * metrics_method() of the method the client sent. */
void metrics_request(int rt, int method, int status, double seconds);

/* A round that was charged (not a dry run, not a replay): counts the round, its admitted
 * participants and its refusals by reason. */
void metrics_round(const ledger_round_res *r);

/* One privacy computation's latency, by the accountant that answered (its name from
 * dp_accountant_name; NULL or an unknown name counts as "unknown"). */
void metrics_compute(const char *accountant, double seconds);

/* Requests refused for authentication, authorisation or rate (by status). */
void metrics_denied(int status);

/* The monotonic clock in seconds, for latencies: the project's one clock (clock.h). */
static inline double metrics_now(void)
{
    return dpb_mono_s();
}

/* A connection closed because its request head was not complete by --header-timeout. */
void metrics_head_timeout(void);

/* The compute pool: a computation taken on (+1) or finished (-1); one refused with 503
 * overloaded; the pool's places (threads + queue), set once. */
void metrics_compute_busy(int delta);
void metrics_compute_refused(void);
void metrics_compute_capacity(unsigned places);

/* An answer refused with 503 answer_memory_exhausted (--answer-memory). */
void metrics_answer_refused(void);

/* An answer 503 ledger_unavailable (the ledger's database could not be reached). */
void metrics_ledger_unavailable(void);

/* The routing table (routes.h) whose rows the request counts are by, index for index
 * (metrics_request's rt), set once at start-up before serving; borrowed for the process's
 * life. Until it is set every request counts as unmatched. */
struct route;
void metrics_routes(const struct route *table);

/* The ledger's backend ("file" or "postgresql", static storage), set once at start-up. */
void metrics_ledger_backend(const char *backend);

/* The exposition text (malloc'ed, NUL-terminated) or NULL when out of memory. l may be NULL. */
char *metrics_render(ledger *l, size_t *len);

#endif
