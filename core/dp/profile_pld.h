/*
 * profile_pld.h - internal to core/dp's PLD walk: the leaves (profile_pld_leaf.c), which
 * profile_pld.c composes and profile.c's shuffle_exact build reads. profile_pld_leaf.c calls
 * profile_common.c and the pld_*.c files only.
 */
#ifndef DP_PROFILE_PLD_H
#define DP_PROFILE_PLD_H

#include "profile_int.h"

/* Free both directions of p (one when symmetric). */
void dp_pld_pair_free(dp_pld_pair *p);

/* st worded for the caller (in err): DPB_ELIMIT names the grid h, DPB_ENOMEM, another
 * failure a parameter's domain; DPB_OK and DPB_ECANCELLED pass as they are. */
dpb_status dp_pld_status(dpb_status st, dpb_error *err, double h);

/* The shuffled epoch's exact model (shuffle_exact.h): its conditions into rep; the refusal
 * of an epoch outside its range (DPB_EUNSUPPORTED, worded in err); st worded. */
extern const char dp_warn_shx[];
void dp_shx_conditions(dp_report *rep, const dp_event *ev);
dpb_status dp_shx_range_error(const dp_event *ev, dp_relation rel, dpb_error *err);
dpb_status dp_shx_status(dpb_status st, dpb_error *err);

/* The exact shuffled epoch (sigma, M rounds) as a pair of PLDs on the grid h (both
 * directions, owned by out). */
dpb_status dp_shx_pld_pair(double sigma, uint64_t M, double h, dp_pld_pair *out, dp_report *rep,
                           dpb_error *err);

/* A fixed-size, truncated or replace-one Poisson sampled leaf from its advanced-joint-
 * convexity profile (symmetric), into out. */
dpb_status dp_pld_sampled_leaf(const dp_event *ev, dp_relation rel, double h, dp_pld_pair *out,
                               dp_report *rep, dpb_error *err);

/* The largest privacy loss of the composition ev in each direction (m[0] remove, m[1] add):
 * the sum of its mechanisms' max divergences (pure DP composes additively, and the composed
 * loss reaches the sum where every mechanism reaches its own), rounded up; +HUGE_VAL when a
 * mechanism's loss is unbounded (Gaussian, (eps, delta > 0)) or has no closed form here. */
void dp_pld_max_loss(const dp_event *ev, dp_relation rel, double m[2]);

/* A leaf of dp_accounting's mechanism events (randomized response, discrete Laplace,
 * mixtures, zCDP, ...) into out; DPB_EUNSUPPORTED (worded) for what has no PLD here. */
dpb_status dp_walk_pld_mech(const dp_event *ev, dp_relation rel, double h, dp_pld_pair *out,
                            dp_report *rep, dpb_error *err);

#endif
