/*
 * profile_scalar.c - the thm41, gdp_exact and gdp_clt accountants' tree walk: one scalar
 * accumulated over the tree (thm41: sum ln(1 - delta_i) of the shuffled epochs, Theorem 4.1;
 * gdp: sum mu_i^2). It calls profile_common.c; profile.c calls it.
 */
#include "profile_int.h"

#include <math.h>

#include "../common/cancel.h"
#include "normal.h"
#include "shuffle.h"

/* ---- thm41 and the Gaussian-DP walks (scalar accumulators) --------------------------------- */

/* A leaf ev, mult times, into *w->acc (w->acct's accumulator). */
static dpb_status scalar_leaf(const dp_walk_state *w, const dp_event *ev, double mult)
{
    switch (ev->kind) {
    case DP_EV_NON_PRIVATE:
        dp_report_warn(w->rep, dp_warn_nonprivate);
        *w->acc = w->acct == DP_ACCT_THM41 ? -HUGE_VAL : HUGE_VAL;
        return DPB_OK;
    case DP_EV_SHUFFLED_EPOCH:
        if (w->acct == DP_ACCT_THM41) {
            double d;
            dpb_status st = dp_thm41_leaf(ev, w->rel, &d, w->rep, w->err);
            if (st == DPB_OK)
                *w->acc += mult * log1p(-d);
            return st;
        }
        if (w->acct == DP_ACCT_GDP_CLT) {
            double mu;
            if (w->rel != DP_REL_ADD_OR_REMOVE)
                return dpb_fail(w->err, DPB_EUNSUPPORTED, "neighboring_relation",
                                "seed 004 is proved for add_or_remove_one only");
            if (dp_thm52_mu(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds, &mu) != DPB_OK)
                return dpb_fail(w->err, DPB_EINVAL, "event",
                                "the Theorem 5.2 approximation needs noise_multiplier >= 0.04 "
                                "and rounds >= 2");
            *w->acc += mult * mu * mu;
            return DPB_OK;
        }
        break;
    case DP_EV_GAUSSIAN:
        if (w->acct == DP_ACCT_GDP_EXACT) {
            double s = dp_sens1(ev->u.noise.noise_multiplier, w->rel);
            if (s == 0.0)
                dp_report_warn(w->rep, dp_warn_noiseless);
            *w->acc += s == 0.0 ? HUGE_VAL : mult / (s * s);
            return DPB_OK;
        }
        break;
    case DP_EV_TREE_AGGREGATION:
        if (w->acct == DP_ACCT_GDP_EXACT) {
            double s;
            dpb_status st = dp_tree_sigma(ev, w->rel, &s, w->err);
            if (st == DPB_OK && s > 0.0)
                *w->acc += mult / (s * s);
            return st;
        }
        break;
    case DP_EV_LAPLACE:
    case DP_EV_EPSILON_DELTA:
    case DP_EV_POISSON_SAMPLED:
    case DP_EV_PNSGD:
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_TRUNCATED_GAUSSIAN:
    default:
        break;
    }
    return dp_unsupported(w->err, dp_kind_name(ev->kind), dp_accountant_name(w->acct));
}

dpb_status dp_walk_scalar(const dp_event *ev, dp_relation rel, dp_accountant acct, double mult,
                          double *acc, dp_report *rep, dpb_error *err)
{
    dp_walk_state w = {.rel = rel, .rep = rep, .err = err, .acct = acct, .acc = acc};
    return dp_walk_tree(&w, ev, mult, scalar_leaf);
}
