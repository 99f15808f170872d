/*
 * pnsgd.h - projected noisy SGD (seed 000, Sordello, Bu & Dong; docs/MATH.md section 3), accounted
 * by the contraction of the hockey-stick divergence (Asoodeh et al. 2020, Theorem 1 of seed 000).
 *
 *   theta_gamma(r) = Q(ln(gamma)/r - r/2) - gamma Q(ln(gamma)/r + r/2)   (1.3)
 *   contraction    = sqrt(1 - 2 eta beta rho / (beta + rho))              (1 when rho = 0)
 *   Gaussian, std s, K of diameter D:  A = theta_{e^eps}(2L/s), B = theta_{e^eps}(c D/(eta s))
 *   Laplace, scale v, K = [a, b]:      A = (1 - e^{eps/2 - L/v})_+,
 *                                      B = (1 - e^{eps/2 - c (b-a)/(2 eta v)})_+
 *   fixed index i:      A B^{n-i}
 *   randomly stopped:   A (1 - B^{n-i+1}) / (n (1 - B))    (worst index: i = 1)
 *   shuffled (Thm 2):   A (1 - B^n) / (n (1 - B))
 * B is close to 1: b = 1 - B is computed directly and powers as exp(k log1p(-b)).
 * Every delta is an upper bound (the theorems' own), valid for every eps >= 0.
 */
#ifndef DP_PNSGD_H
#define DP_PNSGD_H

#include <stdint.h>

#include "../common/status.h"

typedef enum { PNSGD_GAUSSIAN = 0, PNSGD_LAPLACE = 1 } pnsgd_noise;
typedef enum { PNSGD_FIXED = 0, PNSGD_STOPPED = 1, PNSGD_SHUFFLED = 2 } pnsgd_order;

/* How the noise level is set: given, or a schedule of seed 000. */
typedef enum {
    PNSGD_NOISE_GIVEN = 0,    /* noise = noise_level for every update */
    PNSGD_NOISE_SCHEDULE = 1, /* Theorems 3/4: fixed noise from n with (C1, C2) */
    PNSGD_NOISE_ONLINE = 2    /* Theorems 5/6: per-index noise with (alpha, C1, C2), fixed i */
} pnsgd_noise_mode;

typedef struct {
    pnsgd_noise noise;
    pnsgd_noise_mode mode;
    double noise_level;      /* Gaussian: absolute std s; Laplace: scale v (mode GIVEN) */
    double lipschitz;        /* L > 0 */
    double smoothness;       /* beta > 0 */
    double strong_convexity; /* rho >= 0 */
    double learning_rate;    /* eta > 0 */
    double diameter;         /* Gaussian: diameter D of K > 0 */
    double lo, hi;           /* Laplace: K = [lo, hi], lo < hi */
    uint64_t n;              /* updates (dataset size, one pass) */
    pnsgd_order order;
    uint64_t index; /* 1-based differing index (FIXED, ONLINE; STOPPED: 0 = worst) */
    double c1, c2;  /* schedules */
    double alpha;   /* online: > 1 */
} pnsgd_params;

/* Validate the parameters (domains of docs/MATH.md section 3). DPB_EINVAL names the field. */
dpb_status pnsgd_check(const pnsgd_params *p, dpb_error *err);

/* The contraction constant sqrt(1 - 2 eta beta rho/(beta + rho)). */
double pnsgd_contraction(const pnsgd_params *p);

/* theta_{e^eps}(r) (= the mu-GDP delta with mu = r) and 1 - theta, each without
 * cancellation. */
double pnsgd_theta(double eps, double r);
double pnsgd_one_minus_theta(double eps, double r);

/* The noise level used at update j (1-based): the given level, the schedule's level for
 * n, or the online level for j. */
double pnsgd_noise_at(const pnsgd_params *p, uint64_t j);

/* delta(eps) for one pass (eps >= 0). For the online mode, the finite product up to n. */
dpb_status pnsgd_delta(const pnsgd_params *p, double eps, double *delta);

/* The schedules' limits delta* (Theorems 3, 4): a limit as n -> infinity, not a bound at a
 * finite n. And the inverse: the C1 giving a target delta* (decreasing in C1). */
double pnsgd_schedule_limit(pnsgd_noise noise, double eps, double c1);
dpb_status pnsgd_schedule_c1(pnsgd_noise noise, double eps, double delta_star, double *c1);

/* Online (Theorems 5, 6): the limit of A_i prod_{t>i} B_t as n -> infinity, bracketed:
 * the product up to N computed exactly, the tail bounded by integrals of the monotone
 * terms. lower <= limit <= upper. */
dpb_status pnsgd_online_limit(const pnsgd_params *p, double eps, double *lower, double *upper);

/* Optimal composition of E runs of an (eps0, delta0)-DP mechanism (Kairouz, Oh,
 * Viswanath; docs/MATH.md section 1): delta'(eps'). Rounded up. */
double pnsgd_kov_delta(double eps0, double delta0, uint64_t E, double eps_total);

/* delta of E passes at eps_total: the KOV composition minimised over the per-pass eps0
 * (every choice is a valid bound). */
dpb_status pnsgd_epochs_delta(const pnsgd_params *p, uint64_t E, double eps_total, double *delta);

#endif
