/*
 * normal.h - standard normal tails and Gaussian differential privacy (docs/MATH.md section 1).
 *
 * All functions are pure, thread-safe and allocation-free. Accuracy targets (checked by
 * tests/unit against 40-digit mpmath values in tests/unit/ref_values.h): a few ulp for
 * erfcx, the Mills ratio, Phi and Q everywhere they are representable; 1e-14 relative for
 * Phi^{-1}; 1e-12 relative for the Gaussian-DP delta away from catastrophic parameters.
 */
#ifndef DP_NORMAL_H
#define DP_NORMAL_H

#include "../common/status.h"

/* erfcx(x) = exp(x^2) erfc(x), the scaled complementary error function. Returns +HUGE_VAL
 * where the value overflows (x < about -26.6) and NaN for NaN. */
double dp_erfcx(double x);

/* Standard normal density phi(x), with exp(-x^2/2) evaluated from an exact split of x^2. */
double dp_npdf(double x);

/* ln phi(x); finite for every finite x. */
double dp_log_npdf(double x);

/* Mills ratio m(x) = Q(x)/phi(x) = sqrt(pi/2) erfcx(x/sqrt 2). Finite for x >= -37. */
double dp_mills(double x);

/* Q(x) = 1 - Phi(x), the upper tail, without cancellation for large x. */
double dp_Q(double x);

/* Q(x) given phi = phi(x) (= phi(-x)), which a caller may have at hand: one density serves
 * Q(x) and Phi(-x) = dp_Q_pdf(-x, phi), and phi(x - d) = phi(x) e^{x d - d^2/2} is a product. */
double dp_Q_pdf(double x, double phi);

/* Phi(x), the standard normal CDF; Phi(x) = Q(-x). */
double dp_Phi(double x);

/* ln Q(x), finite far beyond underflow of Q (x up to about 1e150). */
double dp_log_Q(double x);

/* Phi^{-1}(p) for p in (0, 1): Wichura's AS241 (as implemented in GSL) refined by one
 * Newton step on the accurate Phi. Returns -HUGE_VAL / +HUGE_VAL at 0 / 1, NaN outside. */
double dp_Phi_inv(double p);

/* Q^{-1}(q) for q in (0, 1): the x with Q(x) = q, accurate for tiny q. */
double dp_Q_inv(double q);

/*
 * delta(eps) of mu-GDP, docs/MATH.md section 1:
 *   delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
 * evaluated in the overflow-free Mills form delta = phi(a) [m(-a) - m(-b)],
 * a = -eps/mu + mu/2, b = a - mu. Requires mu > 0, eps >= 0, both finite.
 * Writes delta (may underflow to 0) and ln delta (finite whenever delta > 0 exactly).
 * The value is rounded up by a bound on its floating-point error, so it never falls
 * below the true delta. Returns DPB_EINVAL on a domain error.
 */
dpb_status dp_gdp_delta(double mu, double eps, double *delta, double *ln_delta);

/*
 * The smallest eps >= 0 with delta_mu(eps) <= delta, for mu-GDP (0 < delta < 1).
 * Rounded up (the returned eps satisfies the target). Returns 0 when delta(0) <= delta.
 */
dpb_status dp_gdp_epsilon(double mu, double delta, double *eps);

/* Round x up by a relative amount rel (x >= 0): the conservative direction for a bound. */
double dp_round_up(double x, double rel);

/* Round x down by a relative amount rel (x >= 0; 0, negatives, NaN and +inf unchanged): the
 * conservative direction for a quantity a bound grows as it falls (1 - B, a cap). */
double dp_round_down(double x, double rel);

#endif
