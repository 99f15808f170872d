/*
 * sampling.h - fixed-size and truncated sampling of a Gaussian sum, and tree aggregation
 * (dp_accounting's SampledWithoutReplacementDpEvent, SampledWithReplacementDpEvent,
 * TruncatedSubsampledGaussianDpEvent and SingleEpochTreeAggregationDpEvent); docs/MATH.md
 * section 6.1 (Poisson sampling under replace-one has its exact pair: pld_leaf.c).
 *
 * Privacy profiles by advanced joint convexity (Balle, Barthe, Gaboardi 2018, Theorem 2):
 * for mu = (1 - g) mu0 + g mu1 and mu' = (1 - g) mu0 + g mu1', with e^e' = 1 + g (e^e - 1)
 * and b = e^e' / e^e,
 *   H_{e^e'}(mu || mu') = g H_{e^e}(mu1 || (1 - b) mu0 + b mu1')
 *                      <= g [(1 - b) H_{e^e}(mu1 || mu0) + b H_{e^e}(mu1 || mu1')].
 * Conditioned on the records other than the differing one, mu0 is the output without it
 * and the H terms are Gaussian: delta_G(mu_a; e) against mu0, delta_G(mu_b; e) between the
 * two neighbours, with mu = (shift in clipping norms) / sigma. A profile is a list of such
 * terms averaged with weights w (joint convexity over the conditioning):
 *   delta(e') <= extra + sum_j w_j g_j [(1 - b_j) delta_G(mu_a,j; e_j) + b_j delta_G(mu_b,j; e_j)].
 * The bound holds for both orders of the pair (the roles of the two records swap), so it
 * enters the PLD through pld_from_profile.
 */
#ifndef DP_SAMPLING_H
#define DP_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"

/* Relations as this module sees them (account.h maps its own). */
typedef enum {
    SMP_ADD_REMOVE = 0,
    SMP_REPLACE_ONE = 1,
    SMP_REPLACE_SPECIAL = 2 /* replaced by a record that contributes zero (zero-out) */
} smp_relation;

/* Alternative splittings of one mixture (with replacement: how the common part b_0 A is
 * shared among the draw counts); each gives a bound, the smallest is used. */
#define SMP_ALT 3

typedef struct {
    double w, gamma, mua, mub;
    double alt[SMP_ALT]; /* the term's g in alternative c (w g stays the same) */
} smp_term;

typedef struct {
    smp_term *t; /* owned */
    size_t n;
    double extra; /* absolute mass added to every delta (binomial tails left out) */
    int nalt;     /* alternatives held in smp_term.alt (0: none) */
} smp_profile;

/* Largest population (source_dataset_size, dataset_size) the module takes. */
#define SMP_MAX_POPULATION 1000000000ULL

/* m of n records without replacement, replace-one: (m/n) delta_G(2/sigma; e). */
dpb_status smp_without_replacement(uint64_t n, uint64_t m, double sigma, smp_profile *out);

/* m draws with replacement from n records, replace-one: the differing record is drawn K ~
 * Binomial(m, 1/n) times, a shift of at most 2K: g = P(K >= 1), terms K = k. */
dpb_status smp_with_replacement(uint64_t n, uint64_t m, double sigma, smp_profile *out);

/* Poisson sampling at rate q from n records, the batch truncated to a uniformly random
 * subset of B when larger; the others sampled N ~ Binomial(n - 1, q). */
dpb_status smp_truncated(uint64_t n, double q, uint64_t B, double sigma, smp_relation rel,
                         smp_profile *out);

/* The profile's delta at e' >= 0 (rounded up, at most 1): the smallest of its bounds. */
double smp_delta(const smp_profile *p, double eps);

/* One bound: alt = -1 the base splitting, 0 <= alt < nalt an alternative. Each
 * alternative, and the base where every term has mu_a = mu_b, is convex in e^e'. */
double smp_delta_alt(const smp_profile *p, double eps, int alt);

void smp_free(smp_profile *p);

/* RDP at order alpha > 1 of the Gaussian (noise multiplier sigma, relative to the
 * replace-one sensitivity) on a sample of a fraction q = m/n drawn without replacement,
 * replace-one: Wang, Balle, Kasiviswanathan 2019, Theorem 9 with the Gaussian's CGF
 * (their Theorem 27's terms), fractional orders by Corollary 10 (the CGF's linear
 * interpolation). The forward differences of e^{CGF} are never summed with cancellation:
 * each is the smaller of a chord bound (convexity) and a quadrature of a positive
 * integrand rounded up, so the value is an upper bound. */
double smp_rdp_without_replacement(double q, double sigma, double alpha);

/* rdp[i] += count * the same at orders[i] (orders > 1, at most 1e5), the forward
 * differences computed once for all orders. DPB_EINVAL on a bad domain. */
dpb_status smp_rdp_without_replacement_add(double q, double sigma, double count,
                                           const double *orders, size_t n, double *rdp);

/* The depth ceil(log2(max step count + 1)) of a tree-aggregation epoch: a record enters
 * that many nodes, each with independent Gaussian noise (Kairouz et al. 2021, App. D). */
unsigned smp_tree_depth(const uint64_t *steps, size_t n);

#endif
