/* test_ref_accountants.c - the standard accountants against independent mpmath values
 * (tests/ref/gen_ref_accountants.py -> ref_accountants.h): RDP of the Poisson-subsampled
 * Gaussian at single orders and through dp_accounting's conversions, Laplace RDP, Gaussian DP
 * compositions, and exact privacy profiles of compositions that every PLD answer must stay
 * above (and near). */
#include <math.h>
#include <stdint.h>

#include "../../core/dp/account.h"
#include "../../core/dp/event.h"
#include "../../core/dp/normal.h"
#include "../../core/dp/rdp.h"
#include "ref_accountants.h"
#include "suites.h"

static dp_event *self(dp_event *in, uint64_t count)
{
    dp_event *e = dp_event_new(DP_EV_SELF_COMPOSED);
    e->u.self.event = in;
    e->u.self.count = count;
    return e;
}

static dp_event *noise(dp_event_kind k, double s)
{
    dp_event *e = dp_event_new(k);
    e->u.noise.noise_multiplier = s;
    return e;
}

/* SelfComposed(PoissonSampled(q, Gaussian(sigma)), T); q = 1 drops the sampling */
static dp_event *dpsgd(double q, double sigma, uint64_t T)
{
    dp_event *g = noise(DP_EV_GAUSSIAN, sigma);
    if (q < 1.0) {
        dp_event *p = dp_event_new(DP_EV_POISSON_SAMPLED);
        p->u.sampled.sampling_probability = q;
        p->u.sampled.event = g;
        g = p;
    }
    return self(g, T);
}

/* Single orders: never below the exact value, and close to it. Integer orders sum A - 1
 * from positive terms (relative accuracy even at q = 1e-6, where A - 1 ~ 1e-14); fractional
 * orders add a bound on the series' tail (up to ~3e-12 absolute in the RDP, pessimistic). */
static void rdp_sampled_gaussian_orders(void)
{
    for (size_t i = 0; i < REF_RDP_SGM_COUNT; i++) {
        const struct ref_rdp_sgm *r = &REF_RDP_SGM[i];
        double v = rdp_poisson_gaussian(r->q, r->sigma, r->alpha);
        CHECKF(v >= r->rdp * (1.0 - 1e-12) - 1e-17, "q %g sigma %g alpha %g: %.17g < %.17g", r->q,
               r->sigma, r->alpha, v, r->rdp);
        int integral = r->alpha == floor(r->alpha);
        CHECKF(v <= r->rdp * (1.0 + (integral ? 1e-11 : 1e-8)) + (integral ? 0.0 : 3e-12),
               "q %g sigma %g alpha %g: %.17g > %.17g", r->q, r->sigma, r->alpha, v, r->rdp);
    }
}

/* dp_accounting's conversions over its default orders, with the exact RDP: eps(delta) and
 * delta(eps) agree to ~1e-9 and never fall below. */
static void rdp_conversions(void)
{
    dp_report rep;
    for (size_t i = 0; i < REF_RDP_SGM_EPS_COUNT; i++) {
        const struct ref_rdp_sgm_eps *r = &REF_RDP_SGM_EPS[i];
        dp_event *ev = dpsgd(r->q, r->sigma, r->T);
        double e;
        CHECK(dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_RDP, &r->delta, 1, &e, &rep, NULL) ==
              DPB_OK);
        CHECKF(e >= r->eps * (1.0 - 1e-12) && e <= r->eps * (1.0 + 1e-9),
               "q %g sigma %g T %llu: eps %.17g, exact %.17g", r->q, r->sigma, r->T, e, r->eps);
        dp_event_free(ev);
    }
    for (size_t i = 0; i < REF_RDP_SGM_DELTA_COUNT; i++) {
        const struct ref_rdp_sgm_delta *r = &REF_RDP_SGM_DELTA[i];
        dp_event *ev = dpsgd(r->q, r->sigma, r->T);
        double d;
        CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_RDP, &r->eps, 1, &d, NULL, &rep, NULL) ==
              DPB_OK);
        CHECKF(d >= r->delta * (1.0 - 1e-12) && d <= r->delta * (1.0 + 1e-8),
               "q %g sigma %g T %llu eps %g: delta %.17g, exact %.17g", r->q, r->sigma, r->T,
               r->eps, d, r->delta);
        dp_event_free(ev);
    }
}

static void rdp_laplace(void)
{
    for (size_t i = 0; i < REF_RDP_LAPLACE_COUNT; i++) {
        const struct ref_rdp_laplace *r = &REF_RDP_LAPLACE[i];
        double v = 0.0;
        CHECK(rdp_add_laplace(r->b, 1.0, &r->alpha, 1, &v) == DPB_OK);
        CHECKF(v >= r->rdp * (1.0 - 1e-13) && v <= r->rdp * (1.0 + 1e-12),
               "b %g alpha %g: %.17g vs %.17g", r->b, r->alpha, v, r->rdp);
    }
}

static void gaussian_dp_compositions(void)
{
    for (size_t i = 0; i < REF_GDP_COMP_DELTA_COUNT; i++) {
        const struct ref_gdp_comp_delta *r = &REF_GDP_COMP_DELTA[i];
        double d, ld;
        CHECK(dp_gdp_delta(r->mu, r->eps, &d, &ld) == DPB_OK);
        CHECKF(d >= r->delta && d <= r->delta * (1.0 + 1e-13), "mu %g eps %g: %.17g vs %.17g",
               r->mu, r->eps, d, r->delta);
    }
    for (size_t i = 0; i < REF_GDP_COMP_EPS_COUNT; i++) {
        const struct ref_gdp_comp_eps *r = &REF_GDP_COMP_EPS[i];
        double e;
        CHECK(dp_gdp_epsilon(r->mu, r->delta, &e) == DPB_OK);
        CHECKF(e >= r->eps && e <= r->eps * (1.0 + 1e-12), "mu %g delta %g: %.17g vs %.17g", r->mu,
               r->delta, e, r->eps);
    }
}

/* PLD answers are upper bounds on the exact profiles, within the grid's pessimism. */
static void pld_above_exact_profiles(void)
{
    dp_report rep;
    for (size_t i = 0; i < REF_EXACT_SGM_COUNT; i++) {
        const struct ref_exact_sgm *r = &REF_EXACT_SGM[i];
        dp_event *ev = dpsgd(r->q, r->sigma, r->T);
        double d;
        CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &r->eps, 1, &d, NULL, &rep, NULL) ==
              DPB_OK);
        CHECKF(d >= r->delta && d <= r->delta * 1.002 + 1e-12,
               "q %g sigma %g T %llu eps %g: pld %.17g, exact %.17g", r->q, r->sigma, r->T, r->eps,
               d, r->delta);
        dp_event_free(ev);
    }
    for (size_t i = 0; i < REF_EXACT_LAPLACE_COUNT; i++) {
        const struct ref_exact_laplace *r = &REF_EXACT_LAPLACE[i];
        dp_event *ev = self(noise(DP_EV_LAPLACE, r->b), r->T);
        double d;
        CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &r->eps, 1, &d, NULL, &rep, NULL) ==
              DPB_OK);
        CHECKF(d >= r->delta && d <= r->delta * 1.002 + 1e-4,
               "b %g T %llu eps %g: pld %.17g, exact %.17g", r->b, r->T, r->eps, d, r->delta);
        dp_event_free(ev);
    }
    for (size_t i = 0; i < REF_KOV_COMP_COUNT; i++) {
        const struct ref_kov_comp *r = &REF_KOV_COMP[i];
        dp_event *ed = dp_event_new(DP_EV_EPSILON_DELTA);
        ed->u.epsdelta.epsilon = r->eps0;
        ed->u.epsdelta.delta = r->delta0;
        dp_event *ev = self(ed, r->k);
        double d;
        CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &r->eps, 1, &d, NULL, &rep, NULL) ==
              DPB_OK);
        CHECKF(d >= r->delta && d <= r->delta * 1.002 + 1e-12,
               "eps0 %g delta0 %g k %llu eps %g: pld %.17g, exact %.17g", r->eps0, r->delta0, r->k,
               r->eps, d, r->delta);
        dp_event_free(ev);
    }
}

const tl_test REF_ACCOUNTANT_TESTS[] = {
    TL_T(rdp_sampled_gaussian_orders), TL_T(rdp_conversions),          TL_T(rdp_laplace),
    TL_T(gaussian_dp_compositions),    TL_T(pld_above_exact_profiles),
};
const size_t REF_ACCOUNTANT_NTESTS = sizeof REF_ACCOUNTANT_TESTS / sizeof REF_ACCOUNTANT_TESTS[0];
