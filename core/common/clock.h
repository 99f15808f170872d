/*
 * clock.h - the one monotonic clock of the project (CLOCK_MONOTONIC): deadlines, latencies,
 * timeouts and rate limits all read it here, so that every "now" compares with every other.
 * Wall-clock time (log lines, Date headers) is not this clock's business.
 */
#ifndef DPB_CLOCK_H
#define DPB_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in seconds (about 1 ns resolution for the first months of uptime). */
double dpb_mono_s(void);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t dpb_mono_ns(void);

#endif
