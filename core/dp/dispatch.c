/*
 * dispatch.c - choosing an accountant and building its profile: resolves "auto" from the
 * event's leaves, checks the options, and hands the event to the accountants' walks
 * (profile.h). Called by the queries (account.c) and the calibration (calibrate_probe.c);
 * calls profile.h, shuffle_exact.h and common/ only.
 */
#include "dispatch.h"

#include <string.h>

#include "shuffle_exact.h"

/* ---- choosing an accountant ------------------------------------------------------------ */

enum {
    HAS_SHUFFLED = 1,
    HAS_GAUSSIAN = 2,
    HAS_OTHER = 4,
    HAS_PNSGD = 8,
    HAS_PROACTIVE = 16,
    HAS_SHUFFLED_BEYOND = 32, /* a shuffled epoch outside the exact accountant's range */
    HAS_RDP_ONLY = 64         /* zCDP, discrete Gaussian, repeat-and-select: rdp only */
};

static int leaf_kinds(const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_SHUFFLED_EPOCH:
        /* a parameter left for the solver is solved within the exact accountant's range */
        return shx_in_range(
                   ev->unknown == DP_PARAM_NOISE_MULTIPLIER ? 1.0 : ev->u.shuffled.noise_multiplier,
                   ev->unknown == DP_PARAM_ROUNDS ? 1 : ev->u.shuffled.rounds)
                   ? HAS_SHUFFLED
                   : HAS_SHUFFLED | HAS_SHUFFLED_BEYOND;
    case DP_EV_GAUSSIAN:
        return HAS_GAUSSIAN;
    case DP_EV_NO_OP:
    case DP_EV_NON_PRIVATE:
        return 0;
    case DP_EV_SELF_COMPOSED:
        return leaf_kinds(ev->u.self.event);
    case DP_EV_COMPOSED: {
        int k = 0;
        for (size_t i = 0; i < ev->u.composed.n; i++)
            k |= leaf_kinds(ev->u.composed.events[i]);
        return k;
    }
    case DP_EV_PNSGD:
        return HAS_PNSGD;
    case DP_EV_PROACTIVE:
        return HAS_PROACTIVE;
    case DP_EV_SGLD:
        return ev->u.sgld.sampling == SGLD_CYCLIC ? HAS_GAUSSIAN : HAS_OTHER;
    case DP_EV_TREE_AGGREGATION: /* exactly a Gaussian mechanism */
        return HAS_GAUSSIAN;
    case DP_EV_POISSON_SAMPLED: /* a zCDP or discrete Gaussian inside: rdp only (issue 39) */
        return HAS_OTHER | (leaf_kinds(ev->u.sampled.event) & HAS_RDP_ONLY);
    case DP_EV_LAPLACE:
    case DP_EV_EPSILON_DELTA:
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_TRUNCATED_GAUSSIAN:
        break;
    case DP_EV_ZCDP:
    case DP_EV_DISCRETE_GAUSSIAN:
        return HAS_RDP_ONLY;
    case DP_EV_REPEAT_AND_SELECT:
        return HAS_RDP_ONLY | leaf_kinds(ev->u.rs.event);
    default:
        break;
    }
    return HAS_OTHER;
}

static int has_composed(const dp_event *ev)
{
    while (ev->kind == DP_EV_SELF_COMPOSED)
        ev = ev->u.self.event;
    return ev->kind == DP_EV_COMPOSED;
}

/* auto: gdp_exact for unsampled Gaussians (exact), shuffle_exact for shuffled epochs alone
 * (thm41 when one is outside the exact accountant's range), pnsgd for passes of one PNSGD
 * run, pld for everything else (it represents every event this service knows). */
dp_accountant dp_dispatch_auto(const dp_event *ev)
{
    int k = leaf_kinds(ev);
    if (k & HAS_RDP_ONLY)
        return DP_ACCT_RDP;
    if (k == HAS_GAUSSIAN || k == 0)
        return DP_ACCT_GDP_EXACT;
    if (k == HAS_SHUFFLED)
        return DP_ACCT_SHUFFLE_EXACT;
    if (k == (HAS_SHUFFLED | HAS_SHUFFLED_BEYOND))
        return DP_ACCT_THM41;
    if (k == HAS_PNSGD && !has_composed(ev))
        return DP_ACCT_PNSGD;
    if (k == HAS_PROACTIVE && ev->kind == DP_EV_PROACTIVE)
        return DP_ACCT_PROACTIVE;
    return DP_ACCT_PLD;
}

/* The computation was stopped by the caller's cancellation (dp_options.cancel). */
dpb_status dp_dispatch_cancelled(dpb_error *err)
{
    return dpb_fail(err, DPB_ECANCELLED, NULL,
                    "the computation was stopped before it finished: it ran past the deadline "
                    "set for it");
}

dpb_status dp_dispatch_build(const dp_event *ev, dp_relation rel, dp_accountant acct,
                             const dp_options *opt, const pld_ctx *pc, dp_profile *pr,
                             dp_report *rep, dpb_error *err)
{
    memset(rep, 0, sizeof *rep);
    dp_profile_clear(pr);
    if (ev == NULL)
        return dpb_fail(err, DPB_EINVAL, "event", "an event is required");
    if (opt && opt->pld_h != 0.0 && !(opt->pld_h >= 1e-6 && opt->pld_h <= 0.1))
        return dpb_fail(err, DPB_EINVAL, "value_discretization_interval",
                        "value_discretization_interval must lie in [1e-6, 0.1]");
    if (acct == DP_ACCT_AUTO)
        acct = dp_dispatch_auto(ev);
    if (dpb_cancelled())
        return dp_dispatch_cancelled(err);
    dpb_status st = dp_profile_build(ev, rel, acct, opt, pc, pr, rep, err);
    if (st != DPB_OK)
        dp_profile_release(pr);
    return st == DPB_ECANCELLED ? dp_dispatch_cancelled(err) : st;
}
