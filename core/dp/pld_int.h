/*
 * pld_int.h - internal to core/dp's PLD files: the distribution itself (pld.c), which every
 * other pld_*.c file may call. pld.c calls nothing of theirs.
 *
 * Invariants of a pld_pmf: n >= 1, p[i] >= 0, sum p + inf_mass >= the true total (mass is
 * only ever moved to a larger loss or added, never removed from the upper side).
 */
#ifndef DP_PLD_INT_H
#define DP_PLD_INT_H

#include "pld.h"

/* Allocate d->p for n points (zeroed) at losses (lo + i) h and reset every other field (no
 * mass at infinity, no round-off, no tilt, no floor, one step). d's previous array is not
 * freed. DPB_ELIMIT when n is 0 or above PLD_MAX_POINTS, DPB_ENOMEM. */
dpb_status pld_pmf_alloc(pld_pmf *d, double h, int64_t lo, size_t n);

/* Move tiny tails: the top bins whose total is <= PLD_TAIL to +infinity, the bottom bins
 * whose total is <= PLD_TAIL up to the first kept bin. Shrinks d's array in place. */
void pld_trim_tails(pld_pmf *d);

/* An upper bound on d's finite mass (sum p, rounded up by n u). */
double pld_sum_mass(const pld_pmf *d);

/* A tilted composition's round-off bound over its kept points above eps (pld_tilt_err: the
 * sum of a_m over m h > eps, capped at 1; 1 for eps NaN). */
double pld_tilt_roundoff(const pld_tilt_err *t, double h, double eps);

#endif
