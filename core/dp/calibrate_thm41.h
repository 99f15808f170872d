/*
 * calibrate_thm41.h - internal to core/dp: the thm41 accountant's calibration (rounds, the
 * noise_multiplier interval, epochs), and its answer put beside shuffle_exact's.
 */
#ifndef DP_CALIBRATE_THM41_H
#define DP_CALIBRATE_THM41_H

#include "calibrate_probe.h"

/* Solves p's unknown with Theorem 4.1 for one epoch or SelfComposed^k of identical epochs:
 * rounds (the smallest integer M), noise_multiplier (the whole feasible interval, value = lo)
 * or count (the largest integer). Fills *c (caller-owned, dp_calib_init'ed), the solved
 * value left in the template and verified with dp_calib_eval_at; DPB_EINFEASIBLE with
 * c->best_* where no value meets the target, DPB_EUNSUPPORTED for other trees or
 * parameters. */
dpb_status dp_calib_thm41(calib_probe *p, dp_calibration *c);

/* What Theorem 4.1 answers to the same calibration, for comparison: sets out->thm41_value
 * (+inf: it certifies nothing; left NAN where the theorem does not solve this question).
 * Leaves the template's unknown changed as the search left it (the caller solves it after). */
void dp_calib_thm41_alongside(dp_event *tmpl, dp_relation rel, double eps_t, double delta_t,
                              dp_calibration *out);

#endif
