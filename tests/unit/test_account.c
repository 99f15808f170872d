/* test_account.c - accountant dispatch: guarantee labels, conditions, refusals, composition
 * and calibration (never overshoots, smallest / largest integer). */
#include <math.h>
#include <string.h>

#include "../../core/dp/account.h"
#include "../../core/dp/normal.h"
#include "../../core/dp/shuffle.h"
#include "ref_values.h"
#include "suites.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static dp_event *shuffled(double sigma, uint64_t rounds)
{
    dp_event *e = dp_event_new(DP_EV_SHUFFLED_EPOCH);
    e->u.shuffled.noise_multiplier = sigma;
    e->u.shuffled.rounds = rounds;
    return e;
}

static dp_event *self_composed(dp_event *inner, uint64_t count)
{
    dp_event *e = dp_event_new(DP_EV_SELF_COMPOSED);
    e->u.self.event = inner;
    e->u.self.count = count;
    return e;
}

static void delta_of_epochs_is_exact_tv_composition(void)
{
    dp_event *ev = self_composed(shuffled(1.0, 1140369), 4);
    double eps[3] = {0.0, 1.0, 10.0}, d[3], ld[3];
    dp_report rep;
    dpb_error err = {0};
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, eps, 3, d, ld, &rep, &err) == DPB_OK);
    dp_thm41 one;
    dp_thm41_eval(1.0, 1140369, &one);
    double want = 1.0 - pow(1.0 - one.delta, 4);
    for (int i = 0; i < 3; i++) {
        CHECK(d[i] >= want);
        CHECK_REL(d[i], want, 1e-13);
        CHECK_REL(ld[i], log(want), 1e-13);
    }
    CHECK(strcmp(rep.accountant, "thm41") == 0);
    CHECK(rep.guarantee == DP_UPPER_BOUND);
    CHECK(rep.ncond == 3 && dp_report_all_hold(&rep));
    dp_event_free(ev);
    /* Composed of the same epochs equals SelfComposed */
    dp_event *c = dp_event_new(DP_EV_COMPOSED);
    c->u.composed.n = 4;
    c->u.composed.events = calloc(4, sizeof(dp_event *));
    for (int i = 0; i < 4; i++)
        c->u.composed.events[i] = shuffled(1.0, 1140369);
    double d2;
    CHECK(dp_delta(c, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, eps, 1, &d2, NULL, &rep, &err) ==
          DPB_OK);
    CHECK_REL(d2, d[0], 1e-14);
    dp_event_free(c);
}

static void not_covered_names_the_failed_condition(void)
{
    dp_event *ev = shuffled(1.0, 1000); /* sigma_min(1000) = 0.659, (1) fails */
    double eps = 1.0, d;
    dp_report rep;
    dpb_error err = {0};
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, &err) ==
          DPB_ENOTCOVERED);
    CHECK(err.status == DPB_ENOTCOVERED && strstr(err.detail, "condition (1)") != NULL);
    CHECK(!dp_report_all_hold(&rep));
    int found = 0;
    for (int i = 0; i < rep.ncond; i++)
        if (strcmp(rep.cond[i].name, "thm41_validity") == 0 && !rep.cond[i].holds)
            found = 1;
    CHECK(found);
    ev->u.shuffled.rounds = 2;
    dpb_error_clear(&err);
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, &err) ==
          DPB_ENOTCOVERED);
    CHECK(strcmp(err.field, "rounds") == 0);
    ev->u.shuffled.rounds = 100;
    ev->u.shuffled.noise_multiplier = 0.5;
    dpb_error_clear(&err);
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, &err) ==
          DPB_ENOTCOVERED);
    CHECK(strcmp(err.field, "noise_multiplier") == 0);
    dp_event_free(ev);
}

static void refusals(void)
{
    dp_event *ev = shuffled(1.0, 1140369);
    double eps = 1.0, d;
    dp_report rep;
    dpb_error err = {0};
    CHECK(dp_delta(ev, DP_REL_REPLACE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, &err) ==
          DPB_EUNSUPPORTED);
    CHECK(strcmp(err.field, "neighboring_relation") == 0);
    eps = -1.0;
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, NULL) ==
          DPB_EINVAL);
    eps = NAN;
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, NULL) ==
          DPB_EINVAL);
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 0, &d, NULL, &rep, NULL) ==
          DPB_ELIMIT);
    double dl[2] = {-1e-300, 0.5}, e[2];
    CHECK(dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, dl, 2, e, &rep, NULL) == DPB_EINVAL);
    dl[0] = NAN;
    CHECK(dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, dl, 2, e, &rep, NULL) == DPB_EINVAL);
    dl[0] = 1.0 + 1e-15;
    CHECK(dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, dl, 2, e, &rep, NULL) == DPB_EINVAL);
    /* estimates never calibrate */
    ev->unknown = DP_PARAM_ROUNDS;
    dp_calibration cal;
    CHECK(dp_calibrate(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_GDP_CLT, 1.0, 0.01, &cal, &rep, NULL) ==
          DPB_EUNSUPPORTED);
    dp_event_free(ev);
}

static void epsilon_is_zero_or_not_certified(void)
{
    dp_event *ev = shuffled(1.0, 1140369);
    double dl[3] = {0.5, 0.0099999991650212578 * (1 + 1e-9), 0.001}, e[3];
    dp_report rep;
    CHECK(dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, dl, 3, e, &rep, NULL) == DPB_OK);
    CHECK(e[0] == 0.0 && e[1] == 0.0);
    CHECK(isinf(e[2]));
    CHECK(rep.nwarn >= 1);
    dp_event_free(ev);
}

static void gdp_clt_is_labelled_estimate(void)
{
    dp_event *ev = self_composed(shuffled(1.0, 10000), 10);
    double eps = 1.0, d, ld;
    dp_report rep;
    CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_GDP_CLT, &eps, 1, &d, &ld, &rep, NULL) ==
          DPB_OK);
    CHECK(rep.guarantee == DP_ESTIMATE && strcmp(rep.accountant, "gdp_clt") == 0);
    CHECK(rep.nwarn >= 1);
    CHECK_REL(ld, REF_GDP_ASYM[1].ln_delta_eps1, 1e-11);
    double dl = 1e-5, e;
    CHECK(dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_GDP_CLT, &dl, 1, &e, &rep, NULL) == DPB_OK);
    double back;
    dp_gdp_delta(REF_GDP_ASYM[1].mu_e, e, &back, NULL);
    CHECK(back <= 1e-5);
    CHECK_REL(back, 1e-5, 1e-9);
    dp_event_free(ev);
}

static void calibrate_rounds_for_epochs(void)
{
    /* E = 4 epochs, total delta 0.01: per-epoch 1-(0.99)^(1/4), exact M 18 105 351 */
    dp_event *leaf = shuffled(1.0, 0);
    leaf->unknown = DP_PARAM_ROUNDS;
    dp_event *ev = self_composed(leaf, 4);
    dp_calibration c;
    dp_report rep;
    dpb_error err = {0};
    CHECK(dp_calibrate(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, 0.0, 0.01, &c, &rep, &err) ==
          DPB_OK);
    CHECK(c.value == (double)REF_M_SOLVE_EXTRA[4].m_exact);
    CHECK(c.achieved_delta <= 0.01);
    CHECK_REL(c.per_epoch_delta, REF_M_SOLVE_EXTRA[4].delta_target, 2e-13);
    CHECK_REL(c.rounds_eq3, REF_M_SOLVE_EXTRA[4].m_closed3, 1e-11);
    /* one epoch, Table 1 */
    dp_event *one = shuffled(1.0, 0);
    one->unknown = DP_PARAM_ROUNDS;
    CHECK(dp_calibrate(one, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, 1.0, 0.01, &c, &rep, &err) ==
          DPB_OK);
    CHECK(c.value == 1140369.0);
    CHECK_REL(c.regime_delta_max, 0.2032457410490125, 1e-14);
    dp_event_free(one);
    dp_event_free(ev);
}

static void calibrate_sigma_interval_and_infeasible(void)
{
    dp_event *ev = shuffled(0, 1140369);
    ev->unknown = DP_PARAM_NOISE_MULTIPLIER;
    dp_calibration c;
    dp_report rep;
    dpb_error err = {0};
    CHECK(dp_calibrate(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, 0.0, 0.01, &c, &rep, &err) ==
          DPB_OK);
    CHECK(c.has_interval && c.value == c.lo);
    CHECK_REL(c.lo, REF_SIGMA_INTERVAL[0].sigma_lo, 1e-11);
    CHECK_REL(c.hi, REF_SIGMA_INTERVAL[0].sigma_hi, 1e-11);
    CHECK(c.achieved_delta <= 0.01);
    CHECK_REL(c.regime_sigma_max, 3.7133406706575247, 1e-12);
    ev->u.shuffled.rounds = 1000000;
    dpb_error_clear(&err);
    CHECK(dp_calibrate(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, 0.0, 0.01, &c, &rep, &err) ==
          DPB_EINFEASIBLE);
    CHECK(c.has_best);
    CHECK_REL(c.best_delta, REF_SIGMA_INTERVAL[2].min_delta, 1e-9);
    CHECK(strstr(err.detail, "more rounds") != NULL);
    dp_event_free(ev);
}

static void calibrate_epochs_is_largest(void)
{
    dp_event *node = self_composed(shuffled(1.0, 100000000), 0);
    node->unknown = DP_PARAM_COUNT;
    dp_calibration c;
    dp_report rep;
    CHECK(dp_calibrate(node, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, 0.0, 0.05, &c, &rep, NULL) ==
          DPB_OK);
    double eps = 0.0, d;
    node->u.self.count = (uint64_t)c.value;
    dp_delta(node, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, NULL);
    CHECK(d <= 0.05);
    node->u.self.count++;
    dp_delta(node, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, NULL);
    CHECK(d > 0.05);
    /* infeasible: one epoch already exceeds the target */
    node->u.self.event->u.shuffled.rounds = 1140369;
    CHECK(dp_calibrate(node, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, 0.0, 0.005, &c, &rep, NULL) ==
          DPB_EINFEASIBLE);
    CHECK(c.has_best && c.best_delta > 0.005 && c.best_at == 1.0);
    dp_event_free(node);
}

/* Never overshoot: whatever calibration returns meets the target when fed back. */
static void calibration_never_overshoots(void)
{
    for (double delta = 0.2; delta > 1e-6; delta /= 3.1)
        for (uint64_t E = 1; E <= 64; E *= 4) {
            dp_event *leaf = shuffled(0.9, 0);
            leaf->unknown = DP_PARAM_ROUNDS;
            dp_event *ev = self_composed(leaf, E);
            dp_calibration c;
            dp_report rep;
            if (dp_calibrate(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, 0.0, delta, &c, &rep, NULL) ==
                DPB_OK) {
                double eps = 0.0, d;
                leaf->unknown = DP_PARAM_NONE;
                leaf->u.shuffled.rounds = (uint64_t)c.value;
                CHECK(dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep,
                               NULL) == DPB_OK);
                CHECK(d <= delta);
                leaf->u.shuffled.rounds--;
                dpb_status st = dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL,
                                         &rep, NULL);
                /* smallest: decidable while one round changes delta (~1/(2M) relative) by
                 * more than the 1e-13 rounding margin; beyond ~1e12 rounds the answer is
                 * conservative by at most that margin */
                if (c.value < 1e12)
                    CHECKF(st != DPB_OK || d > delta, "delta %g E %llu M %g", delta,
                           (unsigned long long)E, c.value);
            }
            dp_event_free(ev);
        }
}

const tl_test ACCOUNT_TESTS[] = {
    TL_T(delta_of_epochs_is_exact_tv_composition),
    TL_T(not_covered_names_the_failed_condition),
    TL_T(refusals),
    TL_T(epsilon_is_zero_or_not_certified),
    TL_T(gdp_clt_is_labelled_estimate),
    TL_T(calibrate_rounds_for_epochs),
    TL_T(calibrate_sigma_interval_and_infeasible),
    TL_T(calibrate_epochs_is_largest),
    TL_T(calibration_never_overshoots),
};
const size_t ACCOUNT_NTESTS = N(ACCOUNT_TESTS);
