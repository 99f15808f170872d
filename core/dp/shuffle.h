/*
 * shuffle.h - DP-SGD with random shuffling, one epoch of M rounds with noise multiplier
 * sigma (seed 004, van Dijk & Ertan; docs/MATH.md section 2).
 *
 * Theorem 4.1 bounds the trade-off function by f(a) >= 1 - a - delta, a total-variation
 * bound: (0, delta)-DP, the same delta for every eps >= 0. It is proved for the add/remove
 * (zero-out) relation with sensitivity 1. E epochs compose exactly as
 * f_{0,d1} (x) f_{0,d2} = f_{0, 1-(1-d1)(1-d2)}.
 *
 * Conventions (docs/MATH.md section 0): `rounds` is the paper's M, `be_const` its B.
 */
#ifndef DP_SHUFFLE_H
#define DP_SHUFFLE_H

#include <stdint.h>

#include "../common/status.h"

/* Shevtsova's proven upper bound for the Berry-Esseen constant (the paper's B). The lower
 * value 0.4097 would make the bound unsound. */
#define DP_THM41_BE_CONST 0.4748

/* Relative rounding applied to every Theorem 4.1 delta: larger than the floating-point
 * error of the sum of six positive terms, so the reported value is never below the
 * exact one. */
#define DP_THM41_REL_ROUND 1e-13

/* The largest M the solvers consider (and the API accepts): 2^63 - 1. */
#define DP_THM41_MAX_ROUNDS ((uint64_t)INT64_MAX)

typedef struct {
    /* inputs */
    double sigma;
    uint64_t rounds;
    /* preconditions, checked first (docs/MATH.md section 2) */
    int rounds_ok;    /* M >= 3 (T6's denominator changes sign near M = 2.3) */
    int sigma_ok;     /* sigma >= sqrt(3 / ln M), i.e. sigma^2 ln M >= 3 */
    double sigma_min; /* sqrt(3 / ln M) (0 when M < 3) */
    /* the bound, set only when both preconditions hold */
    double mu;      /* sqrt((e^t - 1)/(M - 1)), t = 1/sigma^2 */
    double coef;    /* e^t (1 + 4 e^{-3t}) / (1 - e^{-t})^2 */
    double term[6]; /* T1..T6 */
    double delta;   /* T1 + ... + T6, rounded up by DP_THM41_REL_ROUND */
    /* validity condition (1): delta + B coef mu <= 1/2 - Phi(-(e^t - 1)/2) */
    double cond_lhs, cond_rhs;
    int cond_ok;
    int valid; /* rounds_ok && sigma_ok && cond_ok */
} dp_thm41;

/*
 * Evaluate Theorem 4.1 of seed 004 for noise multiplier sigma and M = rounds.
 * Returns DPB_EINVAL if sigma is not a finite positive number or rounds == 0;
 * DPB_ENOTCOVERED if a precondition or condition (1) fails (out says which; delta is set
 * only when the preconditions hold); DPB_OK when the theorem certifies out->delta.
 */
dpb_status dp_thm41_eval(double sigma, uint64_t rounds, dp_thm41 *out);

/* Closed form (3): the two-term approximation's M for per-epoch delta, as a real number
 * (docs/MATH.md section 2). Not a guarantee; used for orientation and reported next to the
 * exact solve. Returns +inf on overflow, NaN on a domain error. */
double dp_thm41_rounds_eq3(double sigma, double delta);

/* Closed form (4): the M that condition (1) alone requires, as a real number. */
double dp_thm41_rounds_eq4(double sigma);

/*
 * The smallest M such that Theorem 4.1 is valid at (sigma, M) and its delta <= delta.
 * Exact integer bisection on uint64 (feasibility only improves with M). On success *rounds
 * is that M and *at (may be NULL) the evaluation there. DPB_EINFEASIBLE if no M up to
 * DP_THM41_MAX_ROUNDS works; DPB_EINVAL on a domain error (delta must be in (0, 1)).
 */
dpb_status dp_thm41_min_rounds(double sigma, double delta, uint64_t *rounds, dp_thm41 *at);

/*
 * The set of sigma for which Theorem 4.1 is valid at M = rounds with delta <= delta: an
 * interval [lo, hi] (the bound is U-shaped in sigma) or empty. On success lo and hi are
 * verified feasible (lo rounded up, hi rounded down, relative tolerance 1e-12).
 * Whether feasible or not, *best_delta is the smallest delta the theorem certifies at this
 * M over sigma and *best_sigma the sigma attaining it (*best_delta = +inf when condition
 * (1) fails for every sigma). Returns DPB_OK or DPB_EINFEASIBLE (or DPB_EINVAL).
 */
dpb_status dp_thm41_sigma_interval(uint64_t rounds, double delta, double *lo, double *hi,
                                   double *best_delta, double *best_sigma);

/*
 * The regime in which (3) implies (4) (seed 004 section 4.1): delta <= delta_max(sigma) =
 * (2/3)(1/2 - Phi(-(e^t - 1)/2)). "sigma = 1 allows delta <= 0.20".
 */
double dp_thm41_regime_delta_max(double sigma);

/* The largest sigma with delta_max(sigma) >= delta ("delta = 0.01 allows sigma <= 3.71"),
 * rounded down. DPB_EINVAL unless 0 < delta < 1/3. */
dpb_status dp_thm41_regime_sigma_max(double delta, double *sigma);

/* Minimum dataset size N with C sigma M / N <= ratio (seed 004 Table 1 uses C = 1,
 * ratio = 0.1): ceil(C sigma M / ratio). Returns +inf-as-UINT64_MAX on overflow. */
uint64_t dp_thm41_min_dataset(double sigma, uint64_t rounds, double clip, double ratio);

/*
 * The asymptotic Gaussian-DP coefficient of seed 004 Theorem 5.2 for one epoch:
 * mu = sqrt((e^t - 1)/(M - 1)). An ESTIMATE only: Theorem 5.2 has unspecified o(1)
 * sequences, and as an (eps, delta) profile this is anti-conservative. DPB_EINVAL unless
 * sigma > 0 finite and M >= 2.
 */
dpb_status dp_thm52_mu(double sigma, uint64_t rounds, double *mu);

/* E-fold f_{0,delta} composition helpers. A running sum s = sum_i ln(1 - delta_i). */
double dp_tv_log1m(double delta);                      /* ln(1 - delta) */
double dp_tv_delta_of_sum(double s);                   /* -expm1(s), rounded up */
double dp_tv_per_epoch(double delta, uint64_t epochs); /* 1 - (1 - delta)^{1/E}, rounded down */

#endif
