/*
 * cpuprio.h - where and at which priority the daemon's background threads run.
 *
 * Prompt threads (the HTTP workers, the ledger's reads and small writes) answer requests that
 * cost microseconds to a millisecond: probes, a client's budget, a round. Background threads
 * (the computations, eligibility, the large writes) run work the caller's input sizes, for
 * milliseconds to seconds.
 *
 * A higher nice value alone does not keep a background thread from delaying a prompt one on
 * a machine whose CPUs it fills: Linux's scheduler (EEVDF, 6.6 and later) lets a thread that
 * slept while others ran catch up on its share first, and a prompt thread woken behind it
 * then waits for the next tick (4 ms at HZ=250) though its nice value is lower. Measured under
 * bench_hostile.py, a client GET waited up to 4 ms so, one request in a hundred.
 *
 * So background threads also leave one CPU to the prompt ones: they run on the CPUs the
 * process may use less one, when it may use two or more. Their work may then use every CPU
 * but one (the eligibility lane had one thread fewer than the CPUs already). This reserves a
 * CPU only where the process has a set of its own (a machine, a cpuset, taskset); under a
 * CPU quota alone (a container's cpu limit) the set is the whole machine's and the nice value
 * does what it can.
 *
 * Nothing here is an error: a kernel or sandbox that refuses leaves the thread as it was.
 */
#ifndef HTTP_CPUPRIO_H
#define HTTP_CPUPRIO_H

/* The calling thread becomes background: nice_incr (> 0) added to its nice value (Linux:
 * per thread), and its CPUs those of the process less one when there are two or more. */
void cpuprio_background(int nice_incr);

#endif
