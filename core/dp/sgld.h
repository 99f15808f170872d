/*
 * sgld.h - stochastic gradient Langevin dynamics (seed 003; docs/MATH.md section 5).
 *
 * Theorem IV.1 of seed 003 is an impossibility result: SGLD's iterates between the first
 * steps and convergence cannot be certified (eps, delta)-DP for any eps. Policy: unclipped
 * SGLD is refused as uncertifiable (and a ledger charge with it makes the spend infinite).
 * With gradients clipped to norm C, batch b of n, step eta and temperature 1, SGLD is DP-SGD
 * with noise multiplier sigma = 2b/(n C sqrt(eta)): one Gaussian per step under Poisson
 * sampling (rate b/n), or one per epoch under cyclic sampling.
 */
#ifndef DP_SGLD_H
#define DP_SGLD_H

#include <stdint.h>

#include "../common/status.h"

typedef enum { SGLD_POISSON = 0, SGLD_CYCLIC = 1 } sgld_sampling;

typedef struct {
    int clipped;          /* gradients clipped to clipping_norm */
    double clipping_norm; /* C > 0 when clipped */
    double batch_size;    /* b, 1 <= b <= n */
    double dataset_size;  /* n */
    double step_size;     /* eta > 0 */
    uint64_t steps;       /* T */
    sgld_sampling sampling;
} sgld_params;

/* The noise multiplier of clipped SGLD: 2b/(n C sqrt(eta)). DPB_EINVAL on a bad domain. */
dpb_status sgld_noise_multiplier(const sgld_params *p, double *sigma);

/* Renyi divergence of order nu > 1 between N(m1, s1^2) and N(m2, s2^2), the corrected form
 * of seed 003's eq. (20): ln(s2/s1) + ln(s2^2/S)/(2(nu-1)) + nu (m1-m2)^2/(2S),
 * S = nu s2^2 + (1-nu) s1^2; +inf when S <= 0. */
double sgld_gauss_renyi(double nu, double m1, double s1, double m2, double s2);

#endif
