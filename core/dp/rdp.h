/*
 * rdp.h - Renyi differential privacy (docs/MATH.md section 6): RDP curves of the Gaussian, the
 * Laplace and the Poisson-subsampled Gaussian mechanisms at a set of orders, composition by
 * addition, and the improved conversions to (eps, delta).
 *
 * Sources: Mironov 2017 (Gaussian, Laplace, Prop. 6); Mironov, Talwar, Zhang 2019 (the
 * sampled Gaussian: the integer-order binomial sum and the fractional-order series, both in
 * log space); Canonne, Kamath, Steinke 2020 Prop. 12 / Asoodeh et al. 2021 (conversion).
 * Every RDP value is an upper bound on the Renyi divergence of the add/remove pair.
 */
#ifndef DP_RDP_H
#define DP_RDP_H

#include <stddef.h>

#include "../common/status.h"

/* Google dp_accounting's default orders: 1.1, 1.2, ..., 10.9, 11, ..., 63, 128, 256, 512,
 * 1024 (156 orders). */
#define RDP_NORDERS 156
extern const double RDP_DEFAULT_ORDERS[RDP_NORDERS];

/* A curve as the ledger keeps it (dp_rdp_curve): the RDP at the RDP_NORDERS default orders,
 * then at index RDP_NORDERS the order infinity (the max divergence, the pure-DP epsilon,
 * composed additively; +inf where the event has none), which the rdp accountant's
 * conversion also takes (docs/MATH.md section 6: eps <= D_inf at every delta); then, at
 * RDP_LATE + k, the part of order k that the rdp accountant adds after the others (the
 * Poisson-sampled Gaussians' fractional orders, 0 elsewhere): the RDP at order k is
 * curve[k] + curve[RDP_LATE + k], the sums of both parts kept apart as the accountant keeps
 * them, so a ledger's sum of curves is its answer to the last bit. */
#define RDP_LATE (RDP_NORDERS + 1)
#define RDP_CURVE_LEN (RDP_LATE + RDP_NORDERS)

/* rdp[i] += count * RDP at orders[i] for each mechanism (so calls compose by addition).
 * DPB_EINVAL on a parameter outside its domain. Infinite values are +HUGE_VAL. */
dpb_status rdp_add_gaussian(double sigma, double count, const double *orders, size_t n,
                            double *rdp);
dpb_status rdp_add_laplace(double b, double count, const double *orders, size_t n, double *rdp);
dpb_status rdp_add_poisson_gaussian(double q, double sigma, double count, const double *orders,
                                    size_t n, double *rdp);

/* The RDP of the Poisson-subsampled Gaussian at one order alpha > 1 (0 <= q <= 1). */
double rdp_poisson_gaussian(double q, double sigma, double alpha);

/* Poisson sampling at rate q (0 < q < 1, add/remove) of ANY mechanism whose RDP at every
 * order a is at most xi + rho a (a (xi, rho)-zCDP event, a discrete Gaussian, compositions):
 * an upper bound on the RDP at order alpha > 1 (docs/MATH.md section 6, "Poisson sampling of
 * a zCDP mechanism"). With Q the output without the record, R with it, L = dR/dQ, P = (1 - q)
 * Q + q R: D(P||Q) at integer alpha by the binomial expansion of E_Q[(1 - q + q L)^alpha]
 * with E_Q[L^k] = e^{(k-1) D_k(R||Q)}; D(Q||P) by Taylor's theorem (E_Q[L] = 1, the second
 * derivative bounded on L >= 0, E_Q[(L - 1)^2] = e^{D_2} - 1); both also by convexity of
 * t^alpha and t^{1-alpha}; fractional alpha by the convexity of (alpha - 1) D_alpha in alpha
 * between its integer neighbours. Rounded up; +inf when it cannot be evaluated. */
double rdp_poisson_zcdp(double q, double rho, double xi, double alpha);

/* The conversion at one order a with RDP r (Canonne, Kamath, Steinke 2020 Prop. 12, as
 * dp_accounting): eps for delta; ln delta for eps (with the KL bound). Both increase in r,
 * which lets a caller skip an order whose lower bound cannot beat the best so far. */
double rdp_eps_at(double a, double r, double delta);
double rdp_log_delta_at(double a, double r, double eps);

/* ln(e^a + e^b), exact at -infinity. */
double rdp_log_add(double a, double b);

/* RDP is the relative rounding applied to every converted eps and delta. */
#define RDP_REL_ROUND 1e-12

/*
 * The smallest eps over the orders for this delta (improved conversion); *order receives
 * the order attaining it. eps is +HUGE_VAL when no order gives a finite bound. Rounded up.
 */
dpb_status rdp_epsilon(const double *orders, const double *rdp, size_t n, double delta, double *eps,
                       double *order);

/* The smallest delta over the orders for this eps (and its order). Rounded up. */
dpb_status rdp_delta(const double *orders, const double *rdp, size_t n, double eps, double *delta,
                     double *order);

/* ---- issue 16: the RDP of dp_accounting's mechanism events ----------------------------- *
 * Each function returns the RDP at one order a > 1, rounded up (a value above the exact one
 * by at most a few 1e-12 relative, plus the evaluation's absolute round-off); +HUGE_VAL
 * where the divergence is infinite. */

/* Most orders a caller may give (POST /v1/rdp). */
#define RDP_MAX_ORDERS 500
/* The largest order a caller may give (the sampled Gaussian's sums grow with it). */
#define RDP_MAX_ORDER 1e5

/* Any epsilon-DP mechanism: the RDP of binary randomized response with parameter epsilon,
 * which dominates every epsilon-DP pair (Kairouz, Oh, Viswanath 2015; RDP is preserved by
 * post-processing), capped by a eps^2/2 (Bun & Steinke 2016, Prop. 3.3) and by eps. */
double rdp_pure_dp(double eps, double a);

/* An epsilon-bounded-range mechanism (the exponential mechanism): KL <= eps/(e^eps - 1) - 1
 * - ln(eps/(e^eps - 1)) and the loss ranges over an interval of length eps, so by Hoeffding's
 * lemma RDP <= KL + (a - 1) eps^2/8 (Cesar & Rogers 2021, Section 3); the smaller of that and
 * rdp_pure_dp(eps, a). */
double rdp_bounded_range(double eps, double a);

/* k-ary randomized response with noise p (dp_accounting's two relations): replace_one, the
 * pair R(x), R(x'); replace_special, R(x) against the uniform output R(bot), both orders. */
double rdp_rr_replace_one(double p, double k, double a);
/* ln(k/p - k + 1), the loss of randomized response under replace_one (0 < p <= 1), rounded up */
double rr_loss(double p, double k);
double rdp_rr_replace_special(double p, double k, double a);

/* Repeat-and-select (Papernot & Steinke 2022): out[i] is the RDP at orders[i] of running a
 * mechanism with the RDP curve rdp[] (at the same orders) a random number K of times and
 * releasing the best run. shape = +inf: K is Poisson with mean `mean` (Theorem 6: at order
 * a, rdp[i] + mean dhat + ln(mean)/(a - 1) where the mechanism is (eps-hat, dhat)-DP with
 * e^{eps-hat} <= 1 + 1/(a - 1); eps-hat is rdp_rs_eps_hat(a), dhat[i] the caller's delta at
 * it, or, dhat NULL, the improved conversion of the curve itself); 0 <= shape < inf: K is
 * truncated negative binomial (shape 0 logarithmic, 1 geometric; Theorem 2, its gamma found
 * from the mean by bisection on the safe side). Both then made monotone in the order (RDP
 * does not decrease with it). DPB_EINVAL for mean < 1, shape < 0 or an order <= 1. */
dpb_status rdp_repeat_and_select(const double *orders, const double *rdp, size_t n, double mean,
                                 double shape, const double *dhat, double *out);

/* Theorem 6's eps-hat at order a > 1: ln(1 + 1/(a - 1)) rounded down, so that its condition
 * e^{eps-hat} <= 1 + 1/(a - 1) holds in exact arithmetic. */
double rdp_rs_eps_hat(double a);

/* delta(eps) of any eps0-DP mechanism, 0 <= eps: (e^eps0 - e^eps)_+ / (1 + e^eps0), the
 * privacy profile of binary randomized response, which dominates every eps0-DP pair
 * (Kairouz, Oh, Viswanath 2015). Rounded up. */
double rdp_pure_dp_delta(double eps0, double eps);

#endif
