/*
 * shuffle_exact.h - the exact accountant for one epoch of shuffled DP-SGD in seed 004's
 * model (Appendix B; docs/MATH.md section 2.1): under P0, x ~ N(0, I_M); under P1 one uniformly
 * placed coordinate has mean 1/sigma. The likelihood ratio is L = (Y + S)/M with Y the last
 * coordinate's lognormal factor and S the sum of the other M - 1, so
 *
 *   delta_10(eps) = E_P0[(L - e^eps)+]   = (1/M)     E[C(M e^eps  - S)],  C(K) = E[(Y - K)+]
 *   delta_01(eps) = E_P0[(1 - e^eps L)+] = (e^eps/M) E[P(M e^-eps - S)],  P(K) = E[(K - Y)+]
 *
 * with C and P in closed form. S is replaced by a variable that dominates it in convex
 * order, so every delta computed is an upper bound for the model (Blackwell):
 *   - each of the M - 1 factors is truncated at Ymax (the event that one exceeds it is
 *     bounded in closed form and added) and discretised on a grid of step h by splitting
 *     each bin's mass onto its two end nodes keeping its mean (a mean-preserving spread);
 *   - the sum's law is one FFT raised to the power M - 1, read on a window [B, T]; the
 *     mass outside the window is bounded by Chernoff bounds computed from the discrete
 *     law (its own moment generating function) and added with the worst value there;
 *   - E[C(K - S)] and E[P(K - S)] for every K on the grid come from two convolutions;
 *     between grid nodes the pessimistic node is used (C decreases, P increases in K);
 *   - the FFT round-off is estimated and added, so no delta is reported below it.
 */
#ifndef DP_SHUFFLE_EXACT_H
#define DP_SHUFFLE_EXACT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"

/* Limits of the method: rounds up to 1e7, noise multiplier from 0.5 (below, the factors'
 * tails need grids too coarse to be useful). */
#define SHX_MAX_ROUNDS 10000000ULL
#define SHX_MIN_SIGMA 0.5
#define SHX_MAX_SIGMA 1000.0
/* Largest window of the sum (grid points); the grid step grows to fit (still sound). */
#define SHX_MAX_WINDOW ((size_t)1 << 21)

typedef struct shx_model shx_model;

/* 1 if (sigma, rounds) is within the method's range above. */
int shx_in_range(double sigma, uint64_t rounds);

/* What the discretisation is, for reports and tests. */
typedef struct {
    double h;         /* grid step of the factors and the sum */
    double ymax;      /* truncation of the M - 1 factors */
    double window_lo; /* the sum's window [window_lo, window_hi] */
    double window_hi;
    size_t points;   /* window length */
    double outside;  /* Chernoff bound on the sum's mass outside the window */
    double roundoff; /* estimated FFT round-off per grid point of the sum's law */
    size_t bytes;    /* memory held by the model */
} shx_info;

/*
 * Build (or take from the cache) the model for (sigma, rounds). h_scale >= 1 coarsens, < 1
 * refines the default grid (0: 1). Returns a reference to release with shx_release.
 * DPB_EINVAL outside SHX_MIN_SIGMA..SHX_MAX_SIGMA or 1..SHX_MAX_ROUNDS, or h_scale not in
 * [1/64, 64]; DPB_ENOMEM.
 */
dpb_status shx_acquire(double sigma, uint64_t rounds, double h_scale, shx_model **out);
void shx_release(shx_model *m);

/* Upper bounds on delta_10 and delta_01 at eps >= 0 (finite or +inf). */
double shx_delta10(const shx_model *m, double eps);
double shx_delta01(const shx_model *m, double eps);
/* max of the two: the model's delta(eps) for add-or-remove; made non-increasing in eps
 * (the least of the bounds at eps and at smaller eps, all valid since delta decreases). */
double shx_delta(const shx_model *m, double eps);

void shx_get_info(const shx_model *m, shx_info *info);

/* 1 if the model for (sigma, rounds, h_scale) is in the cache now (shx_acquire would not
 * build it), else 0. */
int shx_cached(double sigma, uint64_t rounds, double h_scale);

/* Drop every cached model not in use (tests, memory pressure). */
void shx_cache_clear(void);

#endif
