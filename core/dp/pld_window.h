/*
 * pld_window.h - internal to core/dp's PLD files: a composition's Chernoff windows
 * (pld_window.c): the log-mgf of a distribution, the composed F(t), coarse copies of the
 * terms for the searches, and the golden-section search over ln t. pld_window.c calls only
 * pld.c (pld_int.h).
 */
#ifndef DP_PLD_WINDOW_H
#define DP_PLD_WINDOW_H

#include "pld_int.h"

/* ln sum_i p_i e^{t l_i} over d's finite part; -HUGE_VAL if it is empty. */
double pld_log_mgf(const pld_pmf *d, double t);

/* F(t) = sum_i count_i ln E e^{t L_i} over the terms (terms with no finite mass add 0). */
double pld_term_F(const pld_term *terms, size_t k, double t);

/* The terms for window searches: copies binned onto their bins' upper (upper) or lower end,
 * which only widen the window (rough: at most 65536 points a term, for estimates that bound
 * nothing). use points at the copies where made, at the terms themselves otherwise (or when
 * memory is short). Owned: free with pld_coarse_free (k as given to pld_coarse_make). */
typedef struct {
    pld_term *terms;
    pld_pmf *cd;
    const pld_term *use;
} pld_coarse_set;
void pld_coarse_make(const pld_term *terms_in, size_t k, int upper, int rough, pld_coarse_set *cs);
void pld_coarse_free(pld_coarse_set *cs, size_t k);

/* What pld_golden_min minimises over x = ln t: a level (F(theta0 + sg t) - f0 - ltail) / t
 * (sg = +-1: the Chernoff bound of the law tilted by theta0, whose log-mgf is
 * F(theta0 + s) - f0), or with sg = 0 the exponent F(t) - t l0 of the Chernoff bound on
 * P(S >= l0). NaN counts as +inf. terms borrowed. */
typedef struct {
    const pld_term *terms;
    size_t k;
    double sg, theta0, f0, ltail, l0;
    int rough; /* an estimate: 10 steps (a bracket of 17% in t), not 15 (1.5%) */
} pld_golden;
double pld_golden_eval(const pld_golden *g, double x);

/* The smallest value golden section finds over ln t in [2^-12, 2^18], and where (*at: that t;
 * at may be NULL). */
double pld_golden_min(const pld_golden *gc, double *at);

/* The Chernoff level of the composed sum on one side (upper: P(S > u) <= e^ltail; else the
 * lower one, negated), from coarse copies; +-HUGE_VAL when no finite bound is found. */
double pld_chernoff_level(const pld_term *terms_in, size_t k, int upper, double ltail);

#endif
