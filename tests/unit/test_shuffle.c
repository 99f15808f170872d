/* test_shuffle.c - seed 004 Theorem 4.1 and its inversions against mpmath values, the
 * paper's Table 1 and in-text numbers, condition boundaries and monotonicity. */
#include <math.h>
#include <stdint.h>

#include "../../core/dp/normal.h"
#include "../../core/dp/shuffle.h"
#include "ref_values.h"
#include "suites.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void thm41_terms_match_reference(void)
{
    for (size_t i = 0; i < N(REF_THM41_TERMS); i++) {
        const struct ref_thm41_terms *r = &REF_THM41_TERMS[i];
        dp_thm41 e;
        dpb_status st = dp_thm41_eval(r->sigma, r->M, &e);
        CHECK((e.rounds_ok && e.sigma_ok) == r->domain_ok);
        if (!r->domain_ok) {
            CHECK(st == DPB_ENOTCOVERED);
            continue;
        }
        const double want[6] = {r->t1, r->t2, r->t3, r->t4, r->t5, r->t6};
        for (int k = 0; k < 6; k++)
            CHECK_REL(e.term[k], want[k], 1e-13);
        CHECK_REL(e.mu, r->mu, 1e-14);
        CHECK_REL(e.coef, r->coef, 1e-14);
    }
}

/* The reported delta is rounded up: never below the exact value, within 1e-12 of it. */
static void thm41_delta_and_validity_match_reference(void)
{
    for (size_t i = 0; i < N(REF_THM41); i++) {
        const struct ref_thm41 *r = &REF_THM41[i];
        dp_thm41 e;
        dpb_status st = dp_thm41_eval(r->sigma, r->M, &e);
        if (!e.sigma_ok) {
            CHECK(!r->valid && st == DPB_ENOTCOVERED);
            continue;
        }
        CHECK(e.delta >= r->delta);
        CHECK_REL(e.delta, r->delta, 1e-12);
        CHECK(e.cond_lhs >= r->lhs);
        CHECK(e.cond_rhs <= r->rhs);
        CHECK_REL(e.cond_lhs, r->lhs, 1e-12);
        CHECK_REL(e.cond_rhs, r->rhs, 1e-12);
        CHECKF(e.valid == r->valid, "sigma %g M %llu", r->sigma, r->M);
        CHECK((st == DPB_OK) == r->valid);
    }
}

static void thm41_preconditions_at_their_boundaries(void)
{
    dp_thm41 e;
    CHECK(dp_thm41_eval(1.0, 0, &e) == DPB_EINVAL);
    CHECK(dp_thm41_eval(0.0, 100, &e) == DPB_EINVAL);
    CHECK(dp_thm41_eval(-1.0, 100, &e) == DPB_EINVAL);
    CHECK(dp_thm41_eval(NAN, 100, &e) == DPB_EINVAL);
    CHECK(dp_thm41_eval(INFINITY, 100, &e) == DPB_EINVAL);
    CHECK(dp_thm41_eval(10.0, 2, &e) == DPB_ENOTCOVERED && !e.rounds_ok);
    CHECK(dp_thm41_eval(10.0, 1, &e) == DPB_ENOTCOVERED && !e.rounds_ok);
    dp_thm41_eval(10.0, 3, &e);
    CHECK(e.rounds_ok && e.sigma_ok);
    /* sigma exactly at, just below and just above sqrt(3 / ln M) for M = 1e6 */
    uint64_t M = 1000000;
    double smin = sqrt(3.0 / log((double)M));
    double below = nextafter(smin * (1 - 1e-12), 0), above = smin * (1 + 1e-12);
    dp_thm41_eval(below, M, &e);
    CHECK(!e.sigma_ok);
    CHECK(e.delta == 0.0); /* no number outside the preconditions */
    dp_thm41_eval(above, M, &e);
    CHECK(e.sigma_ok);
    CHECK_REL(e.sigma_min, smin, 1e-15);
    /* Condition (1) boundary in M at sigma = 1: (4) is the M that (1) needs, up to the
     * small terms; (1) fails well below and holds well above it. */
    double m4 = dp_thm41_rounds_eq4(1.0);
    CHECK(dp_thm41_eval(1.0, (uint64_t)(m4 * 0.9), &e) == DPB_ENOTCOVERED && !e.cond_ok);
    CHECK(dp_thm41_eval(1.0, (uint64_t)(m4 * 1.2), &e) == DPB_OK && e.cond_ok);
    /* find the exact boundary by bisection and check both sides */
    uint64_t lo = (uint64_t)(m4 * 0.9), hi = (uint64_t)(m4 * 1.2);
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        dp_thm41_eval(1.0, mid, &e);
        if (e.cond_ok)
            hi = mid;
        else
            lo = mid;
    }
    dp_thm41_eval(1.0, lo, &e);
    CHECK(!e.cond_ok && e.cond_lhs > e.cond_rhs);
    dp_thm41_eval(1.0, hi, &e);
    CHECK(e.cond_ok && e.cond_lhs <= e.cond_rhs);
}

static void thm41_monotone_in_rounds(void)
{
    const double sigmas[] = {0.5, 0.75, 1.0, 1.5, 2.0, 4.0};
    for (size_t i = 0; i < N(sigmas); i++) {
        double prev = HUGE_VAL, prev_lhs = HUGE_VAL;
        for (double m = 3; m < 1.8e19; m *= 1.37) {
            dp_thm41 e;
            dp_thm41_eval(sigmas[i], (uint64_t)m, &e);
            if (!e.sigma_ok)
                continue;
            CHECK(e.delta <= prev);
            CHECK(e.cond_lhs <= prev_lhs);
            prev = e.delta;
            prev_lhs = e.cond_lhs;
        }
    }
}

static void check_m_solve(const struct ref_m_solve *r)
{
    uint64_t M = 0;
    dp_thm41 at;
    CHECK(dp_thm41_min_rounds(r->sigma, r->delta_target, &M, &at) == DPB_OK);
    CHECKF(M == r->m_exact, "%s sigma %g: M %llu, want %llu", r->what, r->sigma,
           (unsigned long long)M, r->m_exact);
    CHECK(at.valid && at.delta <= r->delta_target);
    dp_thm41 before;
    dpb_status st = dp_thm41_eval(r->sigma, M - 1, &before);
    CHECK(st != DPB_OK || before.delta > r->delta_target); /* smallest */
    CHECK_REL(dp_thm41_rounds_eq3(r->sigma, r->delta_target), r->m_closed3, 1e-12);
    CHECK_REL(dp_thm41_rounds_eq4(r->sigma), r->m_closed4, 1e-12);
}

/* Seed 004 Table 1: M at delta = 0.01 (closed form (3), exact solve) and Min N. */
static void thm41_reproduces_table1(void)
{
    const double paper_m[] = {1.57e9, 3.72e6, 1.14e6, 3.23e6, 1.49e7};
    const double paper_n[] = {7.87e9, 2.79e7, 1.14e7, 4.85e7, 2.98e8};
    for (size_t i = 0; i < N(REF_TABLE1); i++) {
        const struct ref_m_solve *r = &REF_TABLE1[i];
        check_m_solve(r);
        uint64_t M;
        dp_thm41_min_rounds(r->sigma, 0.01, &M, NULL);
        /* the paper prints three significant digits */
        CHECK(fabs((double)M - paper_m[i]) <= 0.005 * paper_m[i]);
        CHECK(fabs(dp_thm41_rounds_eq3(r->sigma, 0.01) - paper_m[i]) <= 0.005 * paper_m[i]);
        uint64_t n = dp_thm41_min_dataset(r->sigma, M, 1.0, 0.1);
        CHECK(n == r->min_n);
        CHECK(fabs((double)n - paper_n[i]) <= 0.005 * paper_n[i]);
        /* (3) is a two-term approximation: its ceiling falls short of the exact solve */
        CHECK(r->m_closed3_ceil < r->m_exact);
    }
    uint64_t M;
    dp_thm41_min_rounds(1.0, 0.01, &M, NULL);
    CHECK(M == 1140369);
}

/* In-text numbers: delta = 1e-4 -> M ~ 1.14e10; per-epoch 1/400 -> M ~ 1.82e7 (the paper's
 * "E = 4"); the exact E = 4 splits of a total delta. */
static void thm41_reproduces_in_text_numbers(void)
{
    for (size_t i = 0; i < N(REF_M_SOLVE_EXTRA); i++)
        check_m_solve(&REF_M_SOLVE_EXTRA[i]);
    uint64_t M;
    dp_thm41_min_rounds(1.0, 1e-4, &M, NULL);
    CHECK(fabs((double)M - 1.14e10) <= 0.005 * 1.14e10);
    dp_thm41_min_rounds(1.0, 1.0 / 400, &M, NULL);
    CHECK(fabs((double)M - 1.82e7) <= 0.005 * 1.82e7);
    /* regime: delta = 0.01 allows sigma <= 3.71; sigma = 1 allows delta <= 0.20 */
    for (size_t i = 0; i < N(REF_DELTA_MAX); i++)
        CHECK_REL(dp_thm41_regime_delta_max(REF_DELTA_MAX[i].sigma), REF_DELTA_MAX[i].delta_max,
                  1e-14);
    for (size_t i = 0; i < N(REF_SIGMA_MAX); i++) {
        double s;
        CHECK(dp_thm41_regime_sigma_max(REF_SIGMA_MAX[i].delta, &s) == DPB_OK);
        CHECK_REL(s, REF_SIGMA_MAX[i].sigma_max, 1e-12);
        CHECK(dp_thm41_regime_delta_max(s) >= REF_SIGMA_MAX[i].delta);
    }
    CHECK(fabs(dp_thm41_regime_delta_max(1.0) - 0.20) < 0.005);
    double s;
    dp_thm41_regime_sigma_max(0.01, &s);
    CHECK(fabs(s - 3.71) < 0.005);
    CHECK(dp_thm41_regime_sigma_max(0.4, &s) == DPB_EINVAL);
    CHECK(dp_thm41_regime_sigma_max(0.0, &s) == DPB_EINVAL);
}

static void thm41_min_rounds_domain_and_extremes(void)
{
    uint64_t M;
    CHECK(dp_thm41_min_rounds(1.0, 0.0, &M, NULL) == DPB_EINVAL);
    CHECK(dp_thm41_min_rounds(1.0, 1.0, &M, NULL) == DPB_EINVAL);
    CHECK(dp_thm41_min_rounds(1.0, NAN, &M, NULL) == DPB_EINVAL);
    CHECK(dp_thm41_min_rounds(0.0, 0.1, &M, NULL) == DPB_EINVAL);
    /* sigma so small that sqrt(3/ln M) needs M beyond 2^64 */
    CHECK(dp_thm41_min_rounds(0.2, 0.5, &M, NULL) == DPB_EINFEASIBLE);
    /* a delta so small that even 2^64 - 1 rounds are not enough */
    CHECK(dp_thm41_min_rounds(1.0, 1e-12, &M, NULL) == DPB_EINFEASIBLE);
    /* very large but representable answers: M near 1e17 */
    CHECK(dp_thm41_min_rounds(1.0, 4e-8, &M, NULL) == DPB_OK);
    dp_thm41 e;
    CHECK(dp_thm41_eval(1.0, M, &e) == DPB_OK && e.delta <= 4e-8);
    CHECK(dp_thm41_eval(1.0, M - 1, &e) != DPB_OK || e.delta > 4e-8);
}

/* Property: for many (sigma, delta) the solve is feasible at M and infeasible at M - 1. */
static void thm41_min_rounds_is_smallest(void)
{
    for (double sigma = 0.45; sigma < 6.0; sigma *= 1.31)
        for (double delta = 0.3; delta > 1e-7; delta /= 6.7) {
            uint64_t M;
            if (dp_thm41_min_rounds(sigma, delta, &M, NULL) != DPB_OK)
                continue;
            dp_thm41 e;
            CHECK(dp_thm41_eval(sigma, M, &e) == DPB_OK && e.delta <= delta);
            if (M > 3)
                CHECKF(dp_thm41_eval(sigma, M - 1, &e) != DPB_OK || e.delta > delta,
                       "sigma %g delta %g M %llu", sigma, delta, (unsigned long long)M);
        }
}

static void thm41_sigma_interval_matches_reference(void)
{
    for (size_t i = 0; i < N(REF_SIGMA_INTERVAL); i++) {
        const struct ref_sigma_interval *r = &REF_SIGMA_INTERVAL[i];
        double lo, hi, bd, bs;
        dpb_status st = dp_thm41_sigma_interval(r->M, r->delta_target, &lo, &hi, &bd, &bs);
        CHECK_REL(bd, r->min_delta, 1e-9);
        CHECK(bd >= r->min_delta * (1 - 1e-15));
        CHECK_REL(bs, r->argmin_sigma, 1e-4); /* a flat minimum: sigma is soft */
        if (!r->feasible) {
            CHECK(st == DPB_EINFEASIBLE);
            continue;
        }
        CHECK(st == DPB_OK);
        CHECK_REL(lo, r->sigma_lo, 1e-11);
        CHECK_REL(hi, r->sigma_hi, 1e-11);
        dp_thm41 e;
        CHECK(dp_thm41_eval(lo, r->M, &e) == DPB_OK && e.delta <= r->delta_target);
        CHECK(dp_thm41_eval(hi, r->M, &e) == DPB_OK && e.delta <= r->delta_target);
        CHECK(dp_thm41_eval(lo * (1 - 1e-9), r->M, &e) != DPB_OK || e.delta > r->delta_target);
        CHECK(dp_thm41_eval(hi * (1 + 1e-9), r->M, &e) != DPB_OK || e.delta > r->delta_target);
    }
    double lo, hi, bd, bs;
    CHECK(dp_thm41_sigma_interval(2, 0.1, &lo, &hi, &bd, &bs) == DPB_EINFEASIBLE);
    CHECK(isinf(bd));
    CHECK(dp_thm41_sigma_interval(100, 0.0, &lo, &hi, &bd, &bs) == DPB_EINVAL);
}

static void thm52_estimate_matches_reference(void)
{
    for (size_t i = 0; i < N(REF_GDP_ASYM); i++) {
        const struct ref_gdp_asym *r = &REF_GDP_ASYM[i];
        double mu;
        CHECK(dp_thm52_mu(r->sigma, r->M, &mu) == DPB_OK);
        CHECK_REL(mu * sqrt((double)r->E), r->mu_e, 1e-14);
        double d, ld;
        dp_gdp_delta(r->mu_e, 1.0, &d, &ld);
        CHECK_REL(ld, r->ln_delta_eps1, 1e-12);
    }
    double mu;
    CHECK(dp_thm52_mu(1.0, 1, &mu) == DPB_EINVAL);
    CHECK(dp_thm52_mu(0.0, 10, &mu) == DPB_EINVAL);
}

/* f_{0,d}^{(x)E} = f_{0, 1-(1-d)^E}: the per-epoch split composes back to at most the
 * target. */
static void tv_composition_round_trips(void)
{
    const double targets[] = {0.5, 0.01, 1e-4, 1e-9};
    const uint64_t epochs[] = {1, 2, 4, 100, 1000000};
    for (size_t i = 0; i < N(targets); i++)
        for (size_t j = 0; j < N(epochs); j++) {
            double d = dp_tv_per_epoch(targets[i], epochs[j]);
            double total = dp_tv_delta_of_sum((double)epochs[j] * dp_tv_log1m(d));
            CHECK(total <= targets[i]);
            CHECK_REL(total, targets[i], 1e-9);
        }
    CHECK_REL(dp_tv_delta_of_sum(4 * dp_tv_log1m(0.01)), 1 - pow(0.99, 4), 1e-13);
}

const tl_test SHUFFLE_TESTS[] = {
    TL_T(thm41_terms_match_reference),
    TL_T(thm41_delta_and_validity_match_reference),
    TL_T(thm41_preconditions_at_their_boundaries),
    TL_T(thm41_monotone_in_rounds),
    TL_T(thm41_reproduces_table1),
    TL_T(thm41_reproduces_in_text_numbers),
    TL_T(thm41_min_rounds_domain_and_extremes),
    TL_T(thm41_min_rounds_is_smallest),
    TL_T(thm41_sigma_interval_matches_reference),
    TL_T(thm52_estimate_matches_reference),
    TL_T(tv_composition_round_trips),
};
const size_t SHUFFLE_NTESTS = N(SHUFFLE_TESTS);
