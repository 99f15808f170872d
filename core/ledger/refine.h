/*
 * refine.h - a background worker: it calls step until step reports nothing left to do, then
 * waits a poll interval (or until stopped) and asks again. It runs at normal priority (a
 * thread at a lower one would hold the ledger's locks while preempted, making rounds and
 * reads wait for it); the step itself gives way to the ledger's changes. The ledger uses it to
 * replace a pld client's rdp spend by its PLD value while the machine has time (ledger_refine.c,
 * "Background refinement").
 */
#ifndef LEDGER_REFINE_H
#define LEDGER_REFINE_H

typedef struct refiner refiner;

/* One unit of work; 1 if there may be more right away, 0 if idle. *stop (read atomically)
 * is set when the refiner is being stopped: a long computation checks it and gives up. */
typedef int (*refine_step_fn)(void *ctx, const int *stop);

/* NULL when the thread cannot be started (then nothing is refined). */
refiner *refiner_start(refine_step_fn step, void *ctx, double poll_seconds);

/* Stop promptly (a step in flight sees *stop), join and free. NULL: nothing. */
void refiner_stop(refiner *r);

#endif
