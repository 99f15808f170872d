/*
 * proactive.h - proactive DP (seed 002, van Dijk et al.; docs/MATH.md section 4): a closed-form
 * (eps, delta) for a client running DP-SGD locally (Algorithm 1: T rounds, round i samples
 * s_i of N records by Poisson sampling, Gaussian noise with multiplier sigma), and the "DP
 * calculator" that plans batch size and rounds for a target before training.
 *
 * K = sum s_i, k = K/N, s_bar = K/T, theta = s_max/s_bar. Theorem B.4: (eps, delta)-DP if
 *   (35) sigma >= sqrt(2(eps + ln(1/delta))/eps),
 *   (34) eps >= gamma theta^2 k s_bar/N  (i.e. T >= gamma theta^2 k^2/eps),
 *   (33) eps <= gamma h(sigma) k,
 *   (32) s_max <= N g(sigma_eps),
 * gamma the smallest root of gamma = F(sigma, eps/(gamma k)). F is the corrected Fc of
 * docs/MATH.md (the paper's (39) has sigma/(1 - sqrt a)^2 where the exact substitution gives
 * sigma/(1 - a - 2 sqrt a)); the paper's F and its two-step gamma are a named variant for
 * reproducing its tables only.
 */
#ifndef DP_PROACTIVE_H
#define DP_PROACTIVE_H

#include "../common/status.h"
#include "report.h"

typedef enum { PRO_CORRECTED = 0, PRO_PAPER = 1 } pro_variant;

/* (6): sigma(eps, delta), eps(sigma, delta) (+inf unless sigma^2 > 2), ln delta(sigma, eps).
 * Each rounded in the conservative direction (sigma and eps up, ln delta up). */
double pro_sigma_of(double eps, double delta);
double pro_eps_of(double sigma, double delta);
double pro_ln_delta_of(double sigma, double eps);

/* h(x) = (sqrt(1 + (e/x)^2) - e/x)^2 and g(x) = min{1/(e x), h(x)}. */
double pro_h(double x);
double pro_g(double x);

/* F(sigma, a) of the variant; NAN outside its domain a in (0, min(h(sigma), 3 - 2 sqrt 2))
 * (where also sigma(1-a) > 2e sqrt a). */
double pro_F(double sigma, double a, pro_variant v);

/* gamma for (sigma, eps, k): corrected, the smallest gamma with gamma >= Fc(sigma, eps/(gamma
 * k)), by bisection (rounded up); paper, the two-step gamma1 = F(sigma, eps/(2k)). *a receives
 * eps/(gamma k). DPB_ENOTCOVERED when no gamma keeps eps/(gamma k) in F's domain. */
dpb_status pro_gamma(double sigma, double eps, double k, pro_variant v, double *gamma, double *a);

/* Procedure A: plan from (sigma, delta, N, K, theta). */
typedef struct {
    double eps;           /* from (6), rounded up */
    double gamma, a;      /* gamma and a = eps/(gamma k) */
    double mean_batch;    /* the largest mean batch size by (34): N a / theta^2 */
    double rounds_min;    /* K / mean_batch (real) */
    double batch;         /* integer mean batch size, rounded down */
    double rounds;        /* integer rounds, rounded up */
    double k_actual;      /* batch * rounds / N with the integers */
    dp_report conditions; /* every condition, re-checked with the integers */
} pro_plan;

/* theorem31: also check Theorem 3.1's conditions (eps < 0.5, delta <= 1/N, N >= 10000,
 * theta <= 6.85, (7) (2/e)^2 k^2 >= 1/2 + ln(1/delta)). DPB_ENOTCOVERED names the failed
 * condition in err (plan->conditions lists them all). */
dpb_status pro_plan_run(double sigma, double delta, double N, double K, double theta, pro_variant v,
                        int theorem31, pro_plan *plan, dpb_error *err);

/* Procedure C: the most rounds for a fixed mean batch s: T_max = eps N^2/(F(sigma, theta^2
 * s/N) theta^2 s^2), rounded down, with (32), (33) and the domain checked in rep. */
dpb_status pro_max_rounds(double sigma, double delta, double N, double s, double theta,
                          pro_variant v, double *eps, double *t_max, dp_report *rep,
                          dpb_error *err);

/* A client history (Appendix E): phases of (sigma, mean batch, rounds) on N records. */
typedef struct {
    double sigma_min, s_max, s_bar, theta, K, k, N;
    double alpha;     /* theta s_max / N */
    double eps_floor; /* F(sigma_min, alpha) alpha k: below it nothing is certified */
    double eps_max;   /* the largest eps with eps/(gamma k) in F's domain ((33)) */
    int certified;    /* the history satisfies the domain, (32) and sigma_min^2 > 2 */
    pro_variant variant;
} pro_history;

dpb_status pro_history_init(const double *sigma, const double *batch, const double *rounds,
                            int nphases, double N, pro_variant v, pro_history *h, dp_report *rep,
                            dpb_error *err);

/* delta(eps) by the closed form, or +inf (-> not certified) below the floor; past eps_max the
 * value at eps_max (a valid bound, delta being non-increasing). */
double pro_history_delta(const pro_history *h, double eps);

/* eps(delta) = max(2 ln(1/delta)/(sigma_min^2 - 2), eps_floor), +inf when beyond eps_max or
 * not certified. Rounded up. */
double pro_history_eps(const pro_history *h, double delta);

#endif
