/*
 * metrics.h - Prometheus metrics: requests by route, method and status, latency histograms,
 * rounds admitted and refused; the ledger's gauges and fsync latency are read at scrape
 * time. Counters are lock-free (relaxed atomics).
 */
#ifndef HTTP_METRICS_H
#define HTTP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/ledger/ledger.h"

/* One answered request: rt is an index into ROUTES, or -1 when no route matched. */
void metrics_request(int rt, int status, double seconds);

/* A round's outcome (not dry runs, not replays): participants admitted and refused. */
void metrics_round(uint64_t admitted, uint64_t refused);

/* Requests refused for authentication, authorisation or rate (by status). */
void metrics_denied(int status);

/* The exposition text (malloc'ed, NUL-terminated) or NULL when out of memory. l may be NULL. */
char *metrics_render(ledger *l, size_t *len);

#endif
