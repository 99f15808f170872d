/*
 * calibrate_probe.h - internal to core/dp: the probe the calibration searches with (one
 * parameter of a template set, delta evaluated at the target, compared to the target).
 * Used by calibrate.c (generic searches) and calibrate_thm41.c (Theorem 4.1's closed forms).
 */
#ifndef DP_CALIBRATE_PROBE_H
#define DP_CALIBRATE_PROBE_H

#include "account.h"

/* One calibration's search state. Every pointer is borrowed from dp_calibrate's caller:
 * tmpl is the template being solved and node its one unknown node (its field is overwritten
 * by each probe). */
typedef struct {
    dp_event *tmpl, *node;
    dp_relation rel;
    dp_accountant acct;
    const dp_options *opt;
    double eps_t, delta_t;
    dp_report *rep;
    dpb_error *err;
    dpb_status fatal; /* a failure other than "not feasible" */
} calib_probe;

/* Resets *c (caller-owned) for solving p: every double NAN, every flag 0. */
void dp_calib_init(dp_calibration *c, dp_param p);

/* delta(eps_t) of tmpl (borrowed) with its current parameter value, by acct; fills *rep and
 * err as dp_dispatch_build does. The profile built is released before returning. */
dpb_status dp_calib_eval_at(dp_event *tmpl, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, double eps_t, double *delta, dp_report *rep,
                            dpb_error *err);

/* Writes v into the field node->unknown names (integral fields truncated); DP_PARAM_NONE:
 * nothing. */
void dp_calib_set_param(dp_event *node, double v);

/* Sets the unknown to v and evaluates: 1 if the target is met at v, 0 if not (or not covered
 * there: *delta NAN), -1 on a hard failure (p->fatal and, first error wins, p->err set).
 * delta may be NULL; else it receives the delta found. */
int dp_calib_feasible(calib_probe *p, double v, double *delta);

#endif
