/*
 * dispatch.h - internal to core/dp: which accountant answers an event, and its profile built.
 * The one way the facade (account.c) and the calibration reach the accountants' walks.
 */
#ifndef DP_DISPATCH_H
#define DP_DISPATCH_H

#include "accountant.h"
#include "profile.h"

/* auto resolved for ev (borrowed, not NULL): gdp_exact for unsampled Gaussians, shuffle_exact
 * for shuffled epochs alone (thm41 beyond its range), pnsgd for one PNSGD run, proactive for
 * one proactive event, rdp where only rdp applies, pld otherwise. Never DP_ACCT_AUTO. */
dp_accountant dp_dispatch_auto(const dp_event *ev);

/* Fails err with DPB_ECANCELLED and the sentence the API answers when dp_options.cancel
 * fired; returns DPB_ECANCELLED. */
dpb_status dp_dispatch_cancelled(dpb_error *err);

/* Builds the profile of ev (borrowed; NULL: DPB_EINVAL) for acct (auto resolved here) into
 * *pr (caller-owned storage; on DPB_OK the caller owns its contents and frees them with
 * dp_profile_release, on failure nothing is left to free). Zeroes and fills *rep. Checks
 * opt->pld_h; answers DPB_ECANCELLED when the installed cancellation fires. A pld profile's
 * outermost composition is computed as pc says (pld.h; borrowed; NULL: in double, not
 * tilted). */
dpb_status dp_dispatch_build(const dp_event *ev, dp_relation rel, dp_accountant acct,
                             const dp_options *opt, const pld_ctx *pc, dp_profile *pr,
                             dp_report *rep, dpb_error *err);

#endif
