/* test_proactive.c - seed 002 (proactive DP) and seed 003 (SGLD) against 50-digit mpmath
 * values (tests/ref/gen_ref_proactive.py -> ref_proactive.h): docs/MATH.md section 4's vectors,
 * h, g, F (corrected and paper), gamma, the paper's Tables 9-11 with its variant, T_max,
 * histories next to RDP, the corrected Gaussian Renyi divergence, the SGLD mapping. */
#include <math.h>
#include <string.h>

#include "../../core/dp/account.h"
#include "../../core/dp/proactive.h"
#include "../../core/dp/sgld.h"
#include "ref_proactive.h"
#include "suites.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static double scalar(const char *what)
{
    for (size_t i = 0; i < N(REF_PROACTIVE_SCALARS); i++)
        if (strstr(REF_PROACTIVE_SCALARS[i].what, what))
            return REF_PROACTIVE_SCALARS[i].value;
    return NAN;
}

static void closed_forms_match_math_md(void)
{
    CHECK_REL(pro_sigma_of(0.05, 1e-4), 19.2461324654863, 2e-12);
    CHECK(pro_sigma_of(0.05, 1e-4) >= 19.2461324654863 * (1 - 1e-15));
    CHECK_REL(pro_eps_of(10, 1e-5), 0.234957662550413, 2e-12);
    CHECK(pro_eps_of(10, 1e-5) >= 0.234957662550413 * (1 - 1e-15));
    CHECK(isinf(pro_eps_of(1.4, 1e-5))); /* sigma^2 <= 2 */
    for (size_t i = 0; i < N(REF_PROACTIVE_HG); i++) {
        CHECK_REL(pro_h(REF_PROACTIVE_HG[i].x), REF_PROACTIVE_HG[i].h, 1e-14);
        CHECK_REL(pro_g(REF_PROACTIVE_HG[i].x), REF_PROACTIVE_HG[i].g, 1e-14);
    }
    for (size_t i = 0; i < N(REF_PROACTIVE_FC); i++) {
        const struct ref_proactive_fc *r = &REF_PROACTIVE_FC[i];
        CHECK_REL(pro_F(r->sigma, r->a, PRO_CORRECTED), r->fc, 1e-13);
        CHECK_REL(pro_F(r->sigma, r->a, PRO_PAPER), r->f_paper, 1e-13);
    }
    CHECK(isnan(pro_F(1.0, 0.1, PRO_CORRECTED))); /* a beyond h(1) = 0.0317 */
    (void)scalar;
}

static void gamma_is_the_fixed_point(void)
{
    for (size_t i = 0; i < N(REF_PROACTIVE_GAMMA); i++) {
        const struct ref_proactive_gamma *r = &REF_PROACTIVE_GAMMA[i];
        double g, a;
        CHECK(pro_gamma(r->sigma, r->eps, r->k, PRO_CORRECTED, &g, &a) == DPB_OK);
        CHECK(g >= r->gamma);
        CHECK_REL(g, r->gamma, 1e-12);
        CHECK_REL(a, r->a, 1e-12);
        CHECK(pro_gamma(r->sigma, r->eps, r->k, PRO_PAPER, &g, &a) == DPB_OK);
        CHECK_REL(g, r->gamma_paper_two_step, 1e-13);
    }
}

/* Procedure A on the LIBSVM setting; the paper variant reproduces Tables 9-11's s_max. */
static void plan_and_paper_tables(void)
{
    pro_plan pl;
    CHECK(pro_plan_run(19.29962, 1e-4, 1e4, 5e4, 1.0, PRO_CORRECTED, 0, &pl, NULL) == DPB_OK);
    CHECK_REL(pl.eps, 0.0497217470251772, 1e-11);
    CHECK_REL(pl.gamma, 3.13103483957083, 1e-11);
    CHECK_REL(pl.rounds_min, 1574.27837259288, 1e-10);
    CHECK_REL(pl.mean_batch, 31.7605836874, 1e-10);
    CHECK(pl.batch == 31.0 && pl.rounds == 1613.0);
    CHECK(dp_report_all_hold(&pl.conditions));
    for (size_t i = 0; i < N(REF_PROACTIVE_TABLES); i++) {
        const struct ref_proactive_table *r = &REF_PROACTIVE_TABLES[i];
        pro_plan p;
        /* the tables set delta = 1/N */
        CHECK(pro_plan_run(r->sigma, r->delta, r->N, r->k * r->N, r->theta, PRO_PAPER, 0, &p,
                           NULL) == DPB_OK);
        CHECK_REL(p.mean_batch, r->s_max_paper_variant, 1e-10);
        CHECK(floor(p.mean_batch) == r->s_max_paper_table);
        pro_plan c;
        CHECK(pro_plan_run(r->sigma, r->delta, r->N, r->k * r->N, r->theta, PRO_CORRECTED, 0, &c,
                           NULL) == DPB_OK);
        CHECK_REL(c.mean_batch, r->s_max_corrected, 1e-10);
    }
}

static void max_rounds_and_histories(void)
{
    for (size_t i = 0; i < N(REF_PROACTIVE_TMAX); i++) {
        const struct ref_proactive_tmax *r = &REF_PROACTIVE_TMAX[i];
        double eps, t;
        dp_report rep = {0};
        CHECK(pro_max_rounds(r->sigma, r->delta, r->N, r->s, r->theta, PRO_CORRECTED, &eps, &t,
                             &rep, NULL) == DPB_OK);
        CHECK(t == floor(r->T_max));
    }
    /* N = 1e4, delta = 1e-4; phases as in gen_ref_proactive.py */
    const double s1[] = {19.29962}, b1[] = {31}, t1[] = {1575};
    const double s2[] = {19.29962, 15}, b2[] = {31, 40}, t2[] = {1000, 800};
    const double s3[] = {10}, b3[] = {50}, t3[] = {20000};
    const double *sg[] = {s1, s2, s3}, *bt[] = {b1, b2, b3}, *tt[] = {t1, t2, t3};
    const int np[] = {1, 2, 1};
    for (size_t i = 0; i < N(REF_PROACTIVE_HISTORY); i++) {
        pro_history h;
        dp_report rep = {0};
        CHECK(pro_history_init(sg[i], bt[i], tt[i], np[i], 1e4, PRO_CORRECTED, &h, &rep, NULL) ==
              DPB_OK);
        double e = pro_history_eps(&h, 1e-4);
        CHECK(e >= REF_PROACTIVE_HISTORY[i].eps_closed);
        CHECK_REL(e, REF_PROACTIVE_HISTORY[i].eps_closed, 1e-11);
        /* the event certifies the smaller of the closed form and RDP */
        dp_event *ev = dp_event_new(DP_EV_PROACTIVE);
        ev->u.proactive.dataset_size = 1e4;
        ev->u.proactive.nphases = np[i];
        ev->u.proactive.sigma = calloc((size_t)np[i], sizeof(double));
        ev->u.proactive.batch = calloc((size_t)np[i], sizeof(double));
        ev->u.proactive.rounds = calloc((size_t)np[i], sizeof(double));
        for (int k = 0; k < np[i]; k++) {
            ev->u.proactive.sigma[k] = sg[i][k];
            ev->u.proactive.batch[k] = bt[i][k];
            ev->u.proactive.rounds[k] = tt[i][k];
        }
        double d = 1e-4, got;
        dp_point_extra x;
        CHECK(dp_epsilon_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_AUTO, NULL, &d, 1, &got, &x, &rep,
                            NULL) == DPB_OK);
        CHECK(strcmp(rep.accountant, "proactive") == 0);
        CHECK_REL(x.rdp_value, REF_PROACTIVE_HISTORY[i].eps_rdp, 1e-9);
        CHECK(x.rdp_value >= REF_PROACTIVE_HISTORY[i].eps_rdp * (1 - 1e-12));
        CHECK(got == fmin(x.closed_form, x.rdp_value));
        dp_event_free(ev);
    }
}

static void sgld_and_renyi(void)
{
    for (size_t i = 0; i < N(REF_RENYI_GAUSS); i++) {
        const struct ref_renyi_gauss *r = &REF_RENYI_GAUSS[i];
        double v = sgld_gauss_renyi(r->nu, r->m1, r->s1, r->m2, r->s2);
        if (r->infinite)
            CHECK(isinf(v));
        else {
            CHECK_REL(v, r->value, 1e-13);
            CHECK(v >= 0.0); /* the paper's eq. (20) can be negative; the corrected one not */
        }
    }
    for (size_t i = 0; i < N(REF_SGLD_SIGMA); i++) {
        const struct ref_sgld_sigma *r = &REF_SGLD_SIGMA[i];
        sgld_params p = {1, r->C, r->b, r->n, r->eta, 100, SGLD_POISSON};
        double s;
        CHECK(sgld_noise_multiplier(&p, &s) == DPB_OK);
        CHECK_REL(s, r->sigma, 1e-15);
        p.clipped = 0;
        CHECK(sgld_noise_multiplier(&p, &s) == DPB_EINVAL);
    }
    /* an implied multiplier beyond the Gaussian's range (1e6), or one that overflows (a
     * clipping norm and step size of 5e-324 make 2b/(n C sqrt(eta)) infinite), is refused */
    {
        double s = -1.0;
        sgld_params big = {1, 1e-3, 1, 1, 1e-6, 1, SGLD_POISSON}; /* 2/(1e-3 * 1e-3) = 2e6 */
        CHECK(sgld_noise_multiplier(&big, &s) == DPB_EINVAL && s == -1.0);
        sgld_params tiny = {1, 5e-324, 1, 1, 5e-324, 1, SGLD_POISSON};
        CHECK(sgld_noise_multiplier(&tiny, &s) == DPB_EINVAL && s == -1.0);
        sgld_params edge = {1, 2e-3, 1, 1, 1e-6, 1, SGLD_POISSON}; /* 2/(2e-3 * 1e-3) = 1e6 */
        CHECK(sgld_noise_multiplier(&edge, &s) == DPB_OK);
        CHECK_REL(s, 1e6, 1e-12);
    }
    /* unclipped SGLD is refused by every accountant with the uncertifiable status */
    dp_event *ev = dp_event_new(DP_EV_SGLD);
    ev->u.sgld = (sgld_params){0, 0, 64, 60000, 1e-4, 100, SGLD_POISSON};
    double d = 1e-5, e;
    dp_report rep;
    const dp_accountant a[] = {DP_ACCT_AUTO, DP_ACCT_RDP, DP_ACCT_PLD};
    for (size_t k = 0; k < N(a); k++)
        CHECK(dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, a[k], &d, 1, &e, &rep, NULL) ==
              DPB_EUNCERTIFIABLE);
    dp_event_free(ev);
}

const tl_test PROACTIVE_TESTS[] = {
    TL_T(closed_forms_match_math_md), TL_T(gamma_is_the_fixed_point), TL_T(plan_and_paper_tables),
    TL_T(max_rounds_and_histories),   TL_T(sgld_and_renyi),
};
const size_t PROACTIVE_NTESTS = N(PROACTIVE_TESTS);
