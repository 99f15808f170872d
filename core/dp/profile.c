/*
 * profile.c - build a privacy profile from an event tree with one accountant, and query it:
 * the dispatch to the accountants' tree walks (profile_scalar.c, profile_rdp.c,
 * profile_pld.c), the shuffle_exact, pnsgd and proactive builders, delta(eps) and eps(delta).
 * It calls the walks, profile_pld_leaf.c (the exact shuffled epoch) and profile_common.c
 * (profile_int.h); none of them calls it. account.c calls it (profile.h).
 *
 *   thm41     (0, delta) per shuffled epoch (seed 004 Thm 4.1), composed exactly:
 *             s = sum ln(1 - delta_i), delta = 1 - e^s.
 *   gdp_exact unsampled Gaussians: mu^2 = sum count / sigma_i^2 (docs/MATH.md section 1).
 *   gdp_clt   shuffled epochs as mu_i-GDP, mu_i^2 = (e^{1/sigma^2} - 1)/(M - 1) (estimate).
 *   rdp       the sum of the leaves' RDP curves at the default orders.
 *   pld       pessimistic PLDs composed by FFT; a shuffled epoch enters as the (0, delta)
 *             pair of Theorem 4.1, an (eps, delta) event as its dominating pair.
 * The relation: replace_one doubles the sensitivity of Gaussian and Laplace sums (the noise
 * multiplier is halved); it is refused where no analysis for it exists here (shuffling,
 * Poisson sampling).
 */
#include "profile_pld.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"
#include "normal.h"
#include "sampling.h"
#include "shuffle.h"
#include "shuffle_exact.h"

static const char W_ESTIMATE[] = "asymptotic approximation (M -> infinity with sigma fixed) "
                                 "with no finite-M error bound; it can be far below the true "
                                 "delta: never enforce a budget with it";
static const char W_PNSGD_EPOCHS[] = "epochs composed optimally (Kairouz, Oh, Viswanath) from "
                                     "the best per-epoch (epsilon, delta) point; the pld "
                                     "accountant composes the whole profile and can be "
                                     "tighter";

/* A pass of PNSGD, or E passes of the same (a SelfComposed chain). */
static dpb_status pnsgd_chain(const dp_event *ev, dp_relation rel, dp_profile *pr, dp_report *rep,
                              dpb_error *err)
{
    double epochs = 1.0;
    while (ev->kind == DP_EV_SELF_COMPOSED) {
        epochs *= (double)ev->u.self.count;
        ev = ev->u.self.event;
    }
    if (ev->kind != DP_EV_PNSGD)
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "the pnsgd accountant takes one ProjectedNoisySgdDpEvent or a "
                        "SelfComposedDpEvent of one (epochs); use pld for mixtures");
    if (!(epochs >= 1.0 && epochs <= 1e9))
        return dpb_fail(err, DPB_EINVAL, "count", "between 1 and 1e9 epochs");
    (void)rel; /* the seed 000 bounds hold for any neighbouring pair (replace-one, L-Lipschitz) */
    dpb_error e = {0};
    if (pnsgd_check(&ev->u.pnsgd, &e) != DPB_OK)
        return dpb_fail(err, DPB_EINVAL, e.field, "%s", e.detail);
    pr->pn = &ev->u.pnsgd;
    pr->epochs = (uint64_t)epochs;
    dp_report_warn(rep, dp_warn_pnsgd);
    if (pr->epochs > 1)
        dp_report_warn(rep, W_PNSGD_EPOCHS);
    return DPB_OK;
}

/* ---- proactive ----------------------------------------------------------------------------- */

static const char W_PROACTIVE[] = "seed 002 closed form (Theorem B.4 with the corrected F, past "
                                  "phases at the smallest sigma) reported next to the RDP "
                                  "accountant's value for the same history; the smaller is "
                                  "certified";

static dpb_status proactive_build(const dp_event *ev, dp_relation rel, dp_profile *pr,
                                  dp_report *rep, dpb_error *err)
{
    if (ev->kind != DP_EV_PROACTIVE)
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "the proactive accountant takes one ProactiveDpSgdDpEvent (a whole "
                        "client history); use rdp or pld for compositions");
    if (rel != DP_REL_ADD_OR_REMOVE)
        return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                        "seed 002's analysis (Poisson sampling) is for add_or_remove_one");
    const dp_event *e = ev;
    dpb_status st = pro_history_init(
        e->u.proactive.sigma, e->u.proactive.batch, e->u.proactive.rounds, e->u.proactive.nphases,
        e->u.proactive.dataset_size, e->u.proactive.variant, &pr->pro, rep, err);
    if (st != DPB_OK)
        return st;
    dp_profile *sub = calloc(1, sizeof *sub);
    if (sub == NULL)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    dp_report scratch = {0};
    st = dp_profile_build(ev, rel, DP_ACCT_RDP, NULL, NULL, sub, &scratch, err);
    if (st != DPB_OK) {
        dp_profile_release(sub);
        free(sub);
        return st;
    }
    pr->sub = sub;
    dp_report_warn(rep, W_PROACTIVE);
    if (e->u.proactive.variant == PRO_PAPER)
        dp_report_warn(rep, "variant paper: the paper's F (its eq. (39), not the exact "
                            "substitution) and two-step gamma, for reproducing its tables; use "
                            "the corrected default for guarantees");
    return DPB_OK;
}

/* ---- build and query ------------------------------------------------------------------------ */

static const char REF_THM41[] = "seed 004 (van Dijk & Ertan), Theorem 4.1, with B = 0.4748; "
                                "epochs composed by the exact f_{0,delta} rule";
static const char REF_GDP_CLT[] = "seed 004 (van Dijk & Ertan), Theorem 5.2: asymptotic "
                                  "mu-GDP with mu = sqrt(E (e^{1/sigma^2} - 1)/(M - 1))";
static const char REF_GDP_EXACT[] = "Gaussian DP (Dong, Roth, Su 2019): a composition of "
                                    "Gaussian mechanisms is exactly mu-GDP, mu = "
                                    "sqrt(sum 1/sigma_i^2)";
static const char REF_PNSGD[] =
    "seed 000 (Sordello, Bu & Dong): Theorems 1-6 (Asoodeh et al. 2020 "
    "contraction bounds), with the corrections of docs/MATH.md section 3";
static const char REF_PROACTIVE[] =
    "seed 002 (proactive DP), Theorem B.4 with the "
    "corrected F of docs/MATH.md section 4 and Appendix E's rule for histories, next to "
    "RDP (Mironov, Talwar, Zhang 2019)";
static const char REF_PLD[] = "pessimistic privacy-loss distributions (Koskela et al. 2020; "
                              "Doroshenko et al. 2022), composed by FFT; losses rounded up";

static const char REF_SHX[] =
    "seed 004's model (Appendix B) computed numerically: "
    "docs/MATH.md section 2.1 (convex-order pessimistic discretisation, FFT, "
    "Chernoff-bounded window); epochs and mixtures composed as "
    "pessimistic privacy-loss distributions";

/* Theorem 4.1's total-variation delta for the same event (+inf where it certifies nothing),
 * shown next to the exact accountant's answers. */
static double thm41_for(const dp_event *ev, dp_relation rel)
{
    dp_report scratch = {0};
    dpb_error e = {0};
    double acc = 0.0;
    if (dp_walk_scalar(ev, rel, DP_ACCT_THM41, 1.0, &acc, &scratch, &e) != DPB_OK)
        return HUGE_VAL;
    return acc == -HUGE_VAL ? 1.0 : dp_tv_delta_of_sum(acc);
}

static dpb_status shx_build(const dp_event *ev, dp_relation rel, const dp_options *opt,
                            const pld_ctx *pc, dp_profile *pr, dp_report *rep, dpb_error *err)
{
    pr->thm41_tv = thm41_for(ev, rel);
    if (ev->kind != DP_EV_SHUFFLED_EPOCH) {
        /* epochs and mixtures: pessimistic PLDs with the exact epoch as the leaf */
        double h = opt && opt->pld_h > 0.0 ? opt->pld_h : PLD_DEFAULT_H;
        dp_pld_pair p;
        dpb_status st = dp_walk_pld_adaptive(ev, rel, h, 1, pc, &p, rep, err);
        if (st != DPB_OK)
            return st;
        pr->dir[0] = p.d[0];
        pr->dir[1] = p.d[1];
        pr->symmetric = p.symmetric;
        pr->use_pld = 1;
        return DPB_OK;
    }
    if (rel != DP_REL_ADD_OR_REMOVE)
        return dp_shx_range_error(ev, rel, err);
    dp_shx_conditions(rep, ev);
    if (!shx_in_range(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds))
        return dp_shx_range_error(ev, rel, err);
    dpb_status st =
        shx_acquire(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds, 0.0, &pr->shx);
    if (st != DPB_OK)
        return dp_shx_status(st, err);
    dp_report_warn(rep, dp_warn_shx);
    return DPB_OK;
}

dpb_status dp_profile_build(const dp_event *ev, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, const pld_ctx *pc, dp_profile *pr,
                            dp_report *rep, dpb_error *err)
{
    dp_profile_clear(pr);
    pr->acct = acct;
    rep->accountant = dp_accountant_name(acct);
    rep->guarantee = acct == DP_ACCT_GDP_CLT ? DP_ESTIMATE : DP_UPPER_BOUND;
    dpb_status st;
    double acc = 0.0;
    switch (acct) {
    case DP_ACCT_THM41:
        rep->reference = REF_THM41;
        st = dp_walk_scalar(ev, rel, acct, 1.0, &acc, rep, err);
        pr->tv_delta = acc == -HUGE_VAL ? 1.0 : dp_tv_delta_of_sum(acc);
        return st;
    case DP_ACCT_GDP_CLT:
    case DP_ACCT_GDP_EXACT:
        rep->reference = acct == DP_ACCT_GDP_CLT ? REF_GDP_CLT : REF_GDP_EXACT;
        if (acct == DP_ACCT_GDP_CLT)
            dp_report_warn(rep, W_ESTIMATE);
        st = dp_walk_scalar(ev, rel, acct, 1.0, &acc, rep, err);
        pr->mu2 = acc;
        pr->mu = sqrt(acc);
        return st;
    case DP_ACCT_RDP:
        return dp_profile_build_rdp(ev, rel, NULL, 0, pr, rep, err);
    case DP_ACCT_PLD: {
        rep->reference = REF_PLD;
        double h = opt && opt->pld_h > 0.0 ? opt->pld_h : PLD_DEFAULT_H;
        dp_pld_pair p;
        st = dp_walk_pld_adaptive(ev, rel, h, acct == DP_ACCT_SHUFFLE_EXACT, pc, &p, rep, err);
        if (st == DPB_OK) {
            pr->dir[0] = p.d[0];
            pr->dir[1] = p.d[1];
            pr->symmetric = p.symmetric;
            double m[2];
            dp_pld_max_loss(ev, rel, m);
            pr->pure_eps = m[0] > m[1] ? m[0] : m[1];
            pr->pure = isfinite(pr->pure_eps);
        }
        return st;
    }
    case DP_ACCT_SHUFFLE_EXACT:
        rep->reference = REF_SHX;
        return shx_build(ev, rel, opt, pc, pr, rep, err);
    case DP_ACCT_PNSGD:
        rep->reference = REF_PNSGD;
        return pnsgd_chain(ev, rel, pr, rep, err);
    case DP_ACCT_PROACTIVE:
        rep->reference = REF_PROACTIVE;
        return proactive_build(ev, rel, pr, rep, err);
    case DP_ACCT_AUTO:
        break;
    }
    return dpb_fail(err, DPB_EINVAL, "accountant", "no accountant resolved");
}

static void extra_clear(dp_point_extra *x)
{
    if (x)
        *x = (dp_point_extra){NAN, NAN, NAN, NAN, NAN, NAN, NAN};
}

/* pnsgd: the limits a schedule implies, for orientation next to the finite-n bound. */
static void pnsgd_extras(const dp_profile *pr, double eps, dp_point_extra *x)
{
    if (x == NULL || pr->epochs != 1)
        return;
    if (pr->pn->mode == PNSGD_NOISE_SCHEDULE && pr->pn->order == PNSGD_SHUFFLED)
        x->limit_delta = pnsgd_schedule_limit(pr->pn->noise, eps, pr->pn->c1);
    if (pr->pn->mode == PNSGD_NOISE_ONLINE)
        pnsgd_online_limit(pr->pn, eps, &x->limit_lower, &x->limit_upper);
}

double dp_profile_delta(dp_profile *pr, double eps, double *ln_delta, dp_point_extra *aux)
{
    double d = 0.0, ld = -HUGE_VAL;
    extra_clear(aux);
    switch (pr->acct) {
    case DP_ACCT_THM41:
        d = pr->tv_delta;
        ld = log(d);
        break;
    case DP_ACCT_GDP_CLT:
    case DP_ACCT_GDP_EXACT:
        if (isinf(pr->mu)) {
            d = 1.0;
            ld = 0.0;
        } else if (pr->mu > 0.0) {
            dp_gdp_delta(pr->mu, eps, &d, &ld);
        }
        break;
    case DP_ACCT_RDP: {
        double order;
        d = dp_rdp_lazy(pr, 0, eps, &order);
        ld = log(d);
        if (aux)
            aux->rdp_order = order;
        break;
    }
    case DP_ACCT_PNSGD:
        if (pnsgd_epochs_delta(pr->pn, pr->epochs, eps, &d) != DPB_OK)
            d = 1.0;
        ld = log(d);
        pnsgd_extras(pr, eps, aux);
        break;
    case DP_ACCT_PROACTIVE: {
        double c = pro_history_delta(&pr->pro, eps);
        double r = dp_profile_delta(pr->sub, eps, NULL, NULL);
        d = c < r ? c : r;
        ld = c < r
                 ? pro_ln_delta_of(pr->pro.sigma_min, eps < pr->pro.eps_max ? eps : pr->pro.eps_max)
                 : log(r);
        if (aux) {
            aux->closed_form = c;
            aux->rdp_value = r;
        }
        break;
    }
    case DP_ACCT_SHUFFLE_EXACT:
        if (aux)
            aux->thm41 = pr->thm41_tv;
        if (pr->shx) {
            d = shx_delta(pr->shx, eps);
            ld = log(d);
            break;
        }
        /* epochs and mixtures are PLDs */
        __attribute__((fallthrough));
    case DP_ACCT_PLD: {
        d = pld_delta(&pr->dir[0], eps);
        if (!pr->symmetric) {
            double d1 = pld_delta(&pr->dir[1], eps);
            if (d1 > d)
                d = d1;
        }
        /* pure DP: no loss exceeds pure_eps (the grid's round-off and tails aside) */
        if (pr->pure && eps >= pr->pure_eps)
            d = 0.0;
        ld = log(d);
        break;
    }
    case DP_ACCT_AUTO:
        break;
    }
    if (ln_delta)
        *ln_delta = ld;
    return d;
}

/* The smallest eps with delta(eps) <= delta for a profile with no closed-form inverse:
 * delta(eps) is non-increasing, so bracket and bisect; the returned eps meets the target. */
static double invert_by_bisection(dp_profile *pr, double delta)
{
    if (dp_profile_delta(pr, 0.0, NULL, NULL) <= delta)
        return 0.0;
    double lo = 0.0, hi = 1.0;
    while (dp_profile_delta(pr, hi, NULL, NULL) > delta) {
        lo = hi;
        hi *= 2.0;
        if (hi > 4096.0)
            return HUGE_VAL;
    }
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (dp_profile_delta(pr, mid, NULL, NULL) <= delta)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

double dp_profile_epsilon(dp_profile *pr, double delta, dp_point_extra *aux)
{
    double e = HUGE_VAL;
    extra_clear(aux);
    switch (pr->acct) {
    case DP_ACCT_THM41:
        return delta >= pr->tv_delta ? 0.0 : HUGE_VAL;
    case DP_ACCT_GDP_CLT:
    case DP_ACCT_GDP_EXACT:
        if (isinf(pr->mu))
            return HUGE_VAL;
        if (pr->mu == 0.0)
            return 0.0;
        return dp_gdp_epsilon(pr->mu, delta, &e) == DPB_OK ? e : HUGE_VAL;
    case DP_ACCT_RDP: {
        double order;
        e = dp_rdp_lazy(pr, 1, delta, &order);
        if (aux)
            aux->rdp_order = order;
        return e;
    }
    case DP_ACCT_PNSGD:
        return invert_by_bisection(pr, delta);
    case DP_ACCT_PROACTIVE: {
        double c = pro_history_eps(&pr->pro, delta);
        double r = dp_profile_epsilon(pr->sub, delta, NULL);
        if (aux) {
            aux->closed_form = c;
            aux->rdp_value = r;
        }
        return c < r ? c : r;
    }
    case DP_ACCT_SHUFFLE_EXACT:
        if (aux)
            aux->thm41 = delta >= pr->thm41_tv ? 0.0 : HUGE_VAL;
        if (pr->shx)
            return invert_by_bisection(pr, delta);
        /* epochs and mixtures are PLDs */
        __attribute__((fallthrough));
    case DP_ACCT_PLD:
        e = pld_epsilon(&pr->dir[0], delta);
        if (!pr->symmetric) {
            double e1 = pld_epsilon(&pr->dir[1], delta);
            if (e1 > e)
                e = e1;
        }
        /* pure DP: (pure_eps, 0)-DP, so no delta needs more (delta = 0: exactly this) */
        if (pr->pure && pr->pure_eps < e)
            e = pr->pure_eps;
        return e;
    case DP_ACCT_AUTO:
        break;
    }
    return e;
}
