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

/* rdp[i] += count * RDP at orders[i] for each mechanism (so calls compose by addition).
 * DPB_EINVAL on a parameter outside its domain. Infinite values are +HUGE_VAL. */
dpb_status rdp_add_gaussian(double sigma, double count, const double *orders, size_t n,
                            double *rdp);
dpb_status rdp_add_laplace(double b, double count, const double *orders, size_t n, double *rdp);
dpb_status rdp_add_poisson_gaussian(double q, double sigma, double count, const double *orders,
                                    size_t n, double *rdp);

/* The RDP of the Poisson-subsampled Gaussian at one order alpha > 1 (0 <= q <= 1). */
double rdp_poisson_gaussian(double q, double sigma, double alpha);

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

#endif
