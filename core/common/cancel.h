/*
 * cancel.h - cooperative cancellation of long computations: a deadline and/or a flag set by
 * another thread, checked by the long loops of core (PLD discretisation and composition, the
 * exact shuffled model, calibration searches), which then stop with DPB_ECANCELLED.
 *
 * Core never learns why (a request's compute deadline, a server shutting down): the caller
 * puts a dpb_cancel in dp_options, and the accountants' entry points install it for the
 * calling thread for the duration of the call (dpb_cancel_enter / dpb_cancel_leave), so the
 * loops deep inside need no extra parameter. Without one installed nothing is ever
 * cancelled (the ledger's own computations, tests, tools).
 */
#ifndef DPB_CANCEL_H
#define DPB_CANCEL_H

typedef struct dpb_cancel {
    double deadline; /* CLOCK_MONOTONIC seconds (dpb_cancel_now); 0: none */
    const int *flag; /* read atomically; non-zero: stop now (NULL: none) */
} dpb_cancel;

/* CLOCK_MONOTONIC in seconds, the clock of dpb_cancel.deadline. */
double dpb_cancel_now(void);

/* Install c for the calling thread (NULL keeps what is installed); returns what to hand to
 * dpb_cancel_leave. Nested calls keep the outermost scope's verdict once it has fired. */
const dpb_cancel *dpb_cancel_enter(const dpb_cancel *c);
void dpb_cancel_leave(const dpb_cancel *prev);

/* 1 when the installed cancellation has fired (sticky until the scope is left), else 0.
 * Cheap (one clock read): call it every few thousand iterations of a long loop. */
int dpb_cancelled(void);

#endif
