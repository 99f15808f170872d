/*
 * profile_rdp.c - the rdp accountant: its tree walk (the sum of the leaves' RDP curves at the
 * orders, and the order infinity, pure DP, where every mechanism has one), the builder, and
 * the conversion to (eps, delta) with the fractional orders of Poisson-sampled Gaussians
 * evaluated lazily. It calls profile_common.c and the numerics (rdp.c, sampling.c, ...);
 * profile.c calls it.
 */
#include "profile_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"
#include "normal.h"
#include "sampling.h"
#include "shuffle.h"

static const char REF_RDP[] = "Renyi DP (Mironov 2017; Mironov, Talwar, Zhang 2019) at "
                              "dp_accounting's default orders, converted by Canonne, Kamath, "
                              "Steinke 2020 Prop. 12; and the order infinity (pure DP, "
                              "composed additively) when every mechanism has one";
static const char REF_RDP_ED[] =
    "Renyi DP (Mironov 2017; Mironov, Talwar, Zhang 2019) at dp_accounting's default orders, "
    "converted by Canonne, Kamath, Steinke 2020 Prop. 12, composed with the (epsilon, delta) "
    "events (delta > 0): the smaller of basic composition (Dwork & Roth 2014, Thm. 3.16: the "
    "curve's epsilon at delta - sum delta_i, plus sum epsilon_i) and each event as "
    "randomized response failing with probability delta_i (Kairouz, Oh, Viswanath 2015: its "
    "RDP added to the curve; with eta = 1 - prod(1 - delta_i), delta = (1 - eta) delta' + "
    "eta)";

/* ---- rdp ------------------------------------------------------------------------------------ */

/* Record a Poisson-sampled Gaussian: its integer orders now, its fractional ones later. */
static dpb_status rdp_add_pg(dp_profile *pr, double q, double sigma, double mult, dpb_error *err)
{
    if (!(sigma > 0.0) || !isfinite(sigma))
        return dpb_fail(err, DPB_EINVAL, "event", "noise_multiplier must be positive");
    for (size_t i = 0; i < pr->norders; i++) {
        double a = pr->orders[i];
        if (a == floor(a))
            pr->rdp[i] += mult * rdp_poisson_gaussian(q, sigma, a);
    }
    for (size_t k = 0; k < pr->npg; k++)
        if (pr->pg[k].q == q && pr->pg[k].sigma == sigma) {
            pr->pg[k].mult += mult;
            return DPB_OK;
        }
    struct dp_pg_leaf *n = realloc(pr->pg, (pr->npg + 1) * sizeof *n);
    if (n == NULL)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    pr->pg = n;
    pr->pg[pr->npg++] = (struct dp_pg_leaf){q, sigma, mult};
    return DPB_OK;
}

/* Record an (eps, delta) event with delta > 0, mult times: it has no RDP curve, and is
 * composed with the curve at conversion (dp_rdp_lazy). One entry per leaf met (they are
 * few); the list doubles as it grows. */
static dpb_status rdp_add_ed(dp_profile *pr, double eps, double delta, double mult, dpb_error *err)
{
    if ((pr->ned & (pr->ned - 1)) == 0) { /* 0, 1, 2, 4, ...: full */
        struct dp_ed_leaf *n = realloc(pr->ed, (pr->ned ? 2 * pr->ned : 1) * sizeof *n);
        if (n == NULL)
            return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        pr->ed = n;
    }
    pr->ed[pr->ned++] = (struct dp_ed_leaf){eps, delta, mult};
    return DPB_OK;
}

/* A mechanism with infinite privacy loss: infinite RDP at every order. */
static dpb_status rdp_infinite(dp_profile *pr, dp_report *rep, const char *warning)
{
    dp_report_warn(rep, warning);
    pr->rdp_inf = HUGE_VAL;
    for (size_t i = 0; i < pr->norders; i++)
        pr->rdp[i] = HUGE_VAL;
    return DPB_OK;
}

static dpb_status rdp_noiseless(dp_profile *pr, dp_report *rep)
{
    return rdp_infinite(pr, rep, dp_warn_noiseless);
}

static dpb_status walk_rdp_mech(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr,
                                dp_report *rep, dpb_error *err);

static double mech_max_divergence(const dp_event *ev, dp_relation rel);

/* The order infinity (max divergence) of a leaf times mult, added into pr->rdp_inf: D_inf of a
 * Laplace of scale b is 1/b, of an (eps, 0) event eps, of a mechanism event its own
 * (mech_max_divergence); every other leaf has none here (+inf). */
static void rdp_add_inf(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr)
{
    if (ev->kind == DP_EV_LAPLACE) {
        double b = dp_sens1(ev->u.noise.noise_multiplier, rel);
        if (b > 0.0)
            pr->rdp_inf += mult / b;
    } else if (ev->kind == DP_EV_EPSILON_DELTA && ev->u.epsdelta.delta == 0.0) {
        pr->rdp_inf += mult * ev->u.epsdelta.epsilon;
    } else if (ev->kind >= DP_EV_RANDOMIZED_RESPONSE && ev->kind <= DP_EV_LAST_MECH) {
        pr->rdp_inf += mult * mech_max_divergence(ev, rel);
    } else if (ev->kind != DP_EV_SELF_COMPOSED && ev->kind != DP_EV_COMPOSED &&
               ev->kind != DP_EV_NO_OP && ev->kind != DP_EV_SGLD && ev->kind != DP_EV_PROACTIVE) {
        pr->rdp_inf = HUGE_VAL;
    }
}

/* Sampling without replacement (replace_one only) of a Gaussian nest, times mult, into pr's
 * curve (Wang, Balle, Kasiviswanathan 2019). */
static dpb_status rdp_swor(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr,
                           dpb_error *err)
{
    double s;
    const dp_event *in = ev->u.fixed.event;
    if (rel != DP_REL_REPLACE)
        return dp_refuse_relation(err, "SampledWithoutReplacementDpEvent", "replace_one");
    dpb_status st = dp_inner_sigma(in, "SampledWithoutReplacementDpEvent", &s, err);
    if (st != DPB_OK)
        return st;
    uint64_t n = ev->u.fixed.population, m = ev->u.fixed.sample_size;
    if (n == 0 || m > n || n > SMP_MAX_POPULATION)
        return dpb_fail(err, DPB_EINVAL, "event", "sample_size must lie in [0, %llu]",
                        (unsigned long long)n);
    if (m == 0)
        return DPB_OK;
    /* Wang, Balle, Kasiviswanathan 2019 take the multiplier relative to the replace-one
     * sensitivity, which is twice the clipping norm: sigma / 2 */
    st = smp_rdp_without_replacement_add((double)m / (double)n, s / 2.0, mult, pr->orders,
                                         pr->norders, pr->rdp);
    return st == DPB_OK ? st : dpb_fail(err, st, "event", "a parameter is out of range");
}

/* The precision sum count / sigma_i^2 of a nest of Composed/SelfComposed Gaussians (and
 * no-ops) into *prec (+inf when one has no noise, 0 when none releases anything): their
 * joint output on one sample is one Gaussian mechanism of multiplier prec^{-1/2}, since the
 * shift of the record whitened by the noise has squared norm at most prec and the Renyi
 * divergences of the sampled pair grow with it. 0 when ev is not such a nest. */
static int gauss_nest(const dp_event *ev, double *prec)
{
    double p = 0.0, s;
    switch (ev->kind) {
    case DP_EV_GAUSSIAN:
        s = ev->u.noise.noise_multiplier;
        *prec = s > 0.0 ? 1.0 / (s * s) : HUGE_VAL;
        return 1;
    case DP_EV_NO_OP:
        *prec = 0.0;
        return 1;
    case DP_EV_SELF_COMPOSED:
        if (!gauss_nest(ev->u.self.event, &p))
            return 0;
        *prec = ev->u.self.count == 0 ? 0.0 : p * (double)ev->u.self.count;
        return 1;
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            double pi;
            if (!gauss_nest(ev->u.composed.events[i], &pi))
                return 0;
            p += pi;
        }
        *prec = p;
        return 1;
    default:
        return 0;
    }
}

/* (rho, xi) of a nest of Composed/SelfComposed zCDP, discrete Gaussian, Gaussian and no-op
 * events under an add/remove-like relation: its RDP is at most xi + rho alpha at every order
 * (each leaf's, summed). 1 with *noiseless set when one has no noise; 0 when ev is not such
 * a nest. */
static int zcdp_nest(const dp_event *ev, dp_relation rel, double *rho, double *xi, int *noiseless)
{
    double r = 0.0, x = 0.0, s, d;
    switch (ev->kind) {
    case DP_EV_ZCDP:
        r = ev->u.zcdp.rho, x = ev->u.zcdp.xi;
        break;
    case DP_EV_GAUSSIAN:
        s = ev->u.noise.noise_multiplier;
        if (s == 0.0)
            *noiseless = 1;
        else
            r = 1.0 / (2.0 * s * s);
        break;
    case DP_EV_DISCRETE_GAUSSIAN:
        s = ev->u.dgauss.sigma, d = ev->u.dgauss.sensitivity * dp_sens_scale(rel);
        if (s == 0.0)
            *noiseless = 1;
        else
            r = d * d / (2.0 * s * s);
        break;
    case DP_EV_NO_OP:
        break;
    case DP_EV_SELF_COMPOSED:
        if (!zcdp_nest(ev->u.self.event, rel, &r, &x, noiseless))
            return 0;
        r *= (double)ev->u.self.count, x *= (double)ev->u.self.count;
        break;
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            double ri = 0.0, xi2 = 0.0;
            if (!zcdp_nest(ev->u.composed.events[i], rel, &ri, &xi2, noiseless))
                return 0;
            r += ri, x += xi2;
        }
        break;
    default:
        return 0;
    }
    *rho = dp_round_up(r, 1e-15), *xi = dp_round_up(x, 1e-15);
    return 1;
}

/* A leaf ev, mult times, into w->pr's curve and its order infinity. */
static dpb_status rdp_leaf(const dp_walk_state *w, const dp_event *ev, double mult)
{
    const double *o = w->pr->orders;
    const size_t no = w->pr->norders;
    double *rdp = w->pr->rdp;
    rdp_add_inf(ev, w->rel, mult, w->pr);
    switch (ev->kind) {
    case DP_EV_NON_PRIVATE:
        return rdp_infinite(w->pr, w->rep, dp_warn_nonprivate);
    case DP_EV_GAUSSIAN:
        if (ev->u.noise.noise_multiplier == 0.0)
            return rdp_noiseless(w->pr, w->rep);
        return rdp_add_gaussian(dp_sens1(ev->u.noise.noise_multiplier, w->rel), mult, o, no, rdp);
    case DP_EV_LAPLACE:
        if (ev->u.noise.noise_multiplier == 0.0)
            return rdp_noiseless(w->pr, w->rep);
        return rdp_add_laplace(dp_sens1(ev->u.noise.noise_multiplier, w->rel), mult, o, no, rdp);
    case DP_EV_EPSILON_DELTA:
        if (ev->u.epsdelta.delta == 0.0) {
            /* pure eps-DP is eps^2/2-zCDP (Bun & Steinke 2016): RDP <= min(eps, a eps^2/2) */
            double e = ev->u.epsdelta.epsilon;
            for (size_t i = 0; i < no; i++) {
                double r = o[i] * e * e / 2.0;
                rdp[i] += mult * (r < e ? r : e);
            }
            return DPB_OK;
        }
        return rdp_add_ed(w->pr, ev->u.epsdelta.epsilon, ev->u.epsdelta.delta, mult, w->err);
    case DP_EV_POISSON_SAMPLED: {
        const dp_event *in = ev->u.sampled.event;
        double q = ev->u.sampled.sampling_probability;
        if (!dp_add_remove_like(w->rel))
            return dpb_fail(w->err, DPB_EUNSUPPORTED, "neighboring_relation",
                            "the rdp accountant takes Poisson sampling under add_or_remove_one "
                            "or replace_special; under replace_one use pld");
        double prec;
        if (in->kind == DP_EV_NO_OP || q == 0.0)
            return DPB_OK;
        if (gauss_nest(in, &prec)) {
            /* one Gaussian, or a composition of them on the same sample: the one Gaussian
             * of multiplier prec^{-1/2} (as dp_accounting's effective noise multiplier) */
            double s = in->kind == DP_EV_GAUSSIAN ? in->u.noise.noise_multiplier : 1.0 / sqrt(prec);
            if (prec == 0.0)
                return DPB_OK;
            if (isinf(prec) || !(s > 0.0))
                return rdp_noiseless(w->pr, w->rep);
            if (q == 1.0)
                return rdp_add_gaussian(s, mult, o, no, rdp);
            return rdp_add_pg(w->pr, q, s, mult, w->err);
        }
        double rho, xi;
        int noiseless = 0;
        if (zcdp_nest(in, w->rel, &rho, &xi, &noiseless)) {
            /* zCDP and discrete Gaussian events: any mechanism with that RDP curve, by the
             * general bound (rdp_poisson_zcdp), not as a Gaussian */
            if (noiseless)
                return rdp_noiseless(w->pr, w->rep);
            for (size_t i = 0; i < no; i++)
                rdp[i] += mult * rdp_poisson_zcdp(q, rho, xi, o[i]);
            return DPB_OK;
        }
        return dpb_fail(w->err, DPB_EUNSUPPORTED, "event",
                        "the rdp accountant takes Poisson sampling of GaussianDpEvents, "
                        "ZCDpEvents and DiscreteGaussianDpEvents (one, or a composition of "
                        "them) only; use pld for a sampled LaplaceDpEvent");
    }
    case DP_EV_SHUFFLED_EPOCH:
        return dpb_fail(w->err, DPB_EUNSUPPORTED, "accountant",
                        "Theorem 4.1's (0, delta) guarantee for a shuffled epoch has no RDP "
                        "curve; use thm41 or pld");
    case DP_EV_PNSGD:
        return dpb_fail(w->err, DPB_EUNSUPPORTED, "accountant",
                        "projected noisy SGD's guarantees (seed 000) are (epsilon, delta) "
                        "profiles with no RDP curve (seed 001's (epsilon, delta) -> RDP step is "
                        "invalid); use pnsgd or pld");
    case DP_EV_TREE_AGGREGATION: {
        double s;
        dpb_status st = dp_tree_sigma(ev, w->rel, &s, w->err);
        if (st != DPB_OK || s == 0.0)
            return st;
        /* the Gaussian's curve at the effective multiplier (sensitivity 1 under zero-out) */
        return rdp_add_gaussian(s, mult, o, no, rdp);
    }
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        return rdp_swor(ev, w->rel, mult, w->pr, w->err);
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_TRUNCATED_GAUSSIAN:
        return dpb_fail(w->err, DPB_EUNSUPPORTED, "accountant",
                        "%s has no RDP curve here; use pld (the default)", dp_kind_name(ev->kind));
    default:
        return walk_rdp_mech(ev, w->rel, mult, w->pr, w->rep, w->err);
    }
    return dp_unsupported(w->err, dp_kind_name(ev->kind), "rdp");
}

/* The RDP curve of the tree times mult, added into pr (its orders set). */
static dpb_status dp_walk_rdp(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr,
                              dp_report *rep, dpb_error *err)
{
    dp_walk_state w = {.rel = rel, .rep = rep, .err = err, .pr = pr};
    return dp_walk_tree(&w, ev, mult, rdp_leaf);
}

/* The order infinity (the max divergence, the pure-DP epsilon) of a mechanism event, rounded
 * up; +inf where it has none (zCDP with rho > 0, Gaussians, mixtures, repeat-and-select). */
static double mech_max_divergence(const dp_event *ev, dp_relation rel)
{
    switch (ev->kind) {
    case DP_EV_RANDOMIZED_RESPONSE: {
        double p = ev->u.rr.noise_parameter, k = (double)ev->u.rr.num_buckets;
        if (k == 1.0 || p == 1.0)
            return 0.0;
        if (p == 0.0 || rel == DP_REL_ADD_OR_REMOVE)
            return HUGE_VAL;
        if (dp_rr_replace_one(rel))
            return rr_loss(p, k);
        double l1 = log1p((k - 1.0) * (1.0 - p)), l2 = -log(p);
        return dp_round_up(l1 > l2 ? l1 : l2, 1e-15);
    }
    case DP_EV_DISCRETE_LAPLACE: {
        double d = (double)ev->u.dlap.sensitivity * dp_sens_scale(rel);
        if (d == 0.0)
            return 0.0;
        return ev->u.dlap.noise_parameter == 0.0
                   ? HUGE_VAL
                   : dp_round_up(ev->u.dlap.noise_parameter * d, 1e-15);
    }
    case DP_EV_EXPONENTIAL:
    case DP_EV_PERMUTE_AND_FLIP:
        return ev->u.pure.epsilon;
    case DP_EV_ZCDP:
        return ev->u.zcdp.rho == 0.0 ? ev->u.zcdp.xi : HUGE_VAL;
    default:
        return HUGE_VAL;
    }
}

/* *out: a fresh rdp profile at the orders o[0..no) (borrowed) holding the curve of ev (its
 * fractional orders marked for lazy evaluation); NULL on failure (err says why). */
static dpb_status rdp_sub_profile(const dp_event *ev, dp_relation rel, const double *o, size_t no,
                                  dp_report *rep, dpb_error *err, dp_profile **out)
{
    dp_profile *sub = calloc(1, sizeof *sub);
    *out = NULL;
    if (sub == NULL)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    sub->acct = DP_ACCT_RDP;
    sub->orders = o;
    sub->norders = no;
    dpb_status st = dp_walk_rdp(ev, rel, 1.0, sub, rep, err);
    if (st == DPB_OK && sub->ned > 0)
        st = dpb_fail(err, DPB_EUNSUPPORTED, "event",
                      "RepeatAndSelectDpEvent needs the RDP curve of the event it repeats "
                      "(Papernot & Steinke); an (epsilon, delta) event with delta > 0 has none");
    if (st != DPB_OK) {
        dp_profile_release(sub);
        free(sub);
        return st;
    }
    for (size_t i = 0; i < no; i++)
        sub->rdp_done[i] = sub->npg == 0 || o[i] == floor(o[i]);
    *out = sub;
    return DPB_OK;
}

static void rdp_sub_free(dp_profile *sub)
{
    if (sub != NULL) {
        dp_profile_release(sub);
        free(sub);
    }
}

/* Theorem 6 of Papernot & Steinke (Poisson repetitions) needs the inner mechanism's
 * (eps-hat, delta-hat)-DP guarantee at eps-hat = rdp_rs_eps_hat(a) for each order a: any
 * valid one serves, so dhat[i] is the least of (1) the improved conversion of its curve at
 * the caller's orders and (2) at the default orders (the curve is known at every order, and
 * a caller's single order alone converts poorly), each with the order infinity; (3) the
 * profile of randomized response for its pure-DP epsilon D_inf (Kairouz, Oh, Viswanath
 * 2015), continuous where (1) and (2) jump from delta 0 at eps-hat >= D_inf; (4) the exact
 * Gaussian profile (Balle & Wang 2018) when it is a nest of Gaussians (one Gaussian). */
static dpb_status rs_delta_hat(const dp_event *in, dp_relation rel, dp_profile *sub, double *dhat,
                               dp_report *rep, dpb_error *err)
{
    const double *o = sub->orders;
    size_t no = sub->norders;
    dp_profile *dflt = NULL;
    dpb_status st = o == RDP_DEFAULT_ORDERS ? DPB_OK
                                            : rdp_sub_profile(in, rel, RDP_DEFAULT_ORDERS,
                                                              RDP_NORDERS, rep, err, &dflt);
    if (st != DPB_OK)
        return st;
    double s, dinf = dp_round_up(sub->rdp_inf, RDP_REL_ROUND), ord;
    double mu = dp_inner_sigma(in, "RepeatAndSelectDpEvent", &s, NULL) == DPB_OK
                    ? 1.0 / dp_sens1(s, rel)
                    : 0.0;
    for (size_t i = 0; i < no; i++) {
        double eh = rdp_rs_eps_hat(o[i]), d = dp_rdp_lazy(sub, 0, eh, &ord), v, lv;
        if (dflt != NULL && (v = dp_rdp_lazy(dflt, 0, eh, &ord)) < d)
            d = v;
        if (isfinite(dinf) && (v = rdp_pure_dp_delta(dinf, eh)) < d)
            d = v;
        if (mu > 0.0 && isfinite(mu) && dp_gdp_delta(mu, eh, &v, &lv) == DPB_OK && v < d)
            d = v;
        dhat[i] = d;
        dp_report_condition(rep, "repeat_select_poisson_eps_hat",
                            "Papernot & Steinke 2022 Theorem 6: eps-hat <= ln(1 + 1/(alpha - 1)) "
                            "at each order alpha (delta-hat taken at eps-hat)",
                            eh <= log1p(1.0 / (o[i] - 1.0)), eh, log1p(1.0 / (o[i] - 1.0)));
    }
    rdp_sub_free(dflt);
    return DPB_OK;
}

static dpb_status walk_rdp_mech(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr,
                                dp_report *rep, dpb_error *err)
{
    const double *o = pr->orders;
    const size_t no = pr->norders;
    double *rdp = pr->rdp;
    switch (ev->kind) {
    case DP_EV_RANDOMIZED_RESPONSE: {
        if (rel == DP_REL_ADD_OR_REMOVE)
            return dp_rr_relation(err);
        double p = ev->u.rr.noise_parameter, k = (double)ev->u.rr.num_buckets;
        if (p == 0.0 && k > 1.0)
            return rdp_noiseless(pr, rep);
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * (dp_rr_replace_one(rel) ? rdp_rr_replace_one(p, k, o[i])
                                                     : rdp_rr_replace_special(p, k, o[i]));
        return DPB_OK;
    }
    case DP_EV_DISCRETE_GAUSSIAN: {
        /* rho-zCDP with rho = Delta^2/(2 sigma^2) (Canonne, Kamath, Steinke 2020, Prop. 5, for
         * an integer shift; coordinates add, so any dimension) */
        double s = ev->u.dgauss.sigma, d = ev->u.dgauss.sensitivity * dp_sens_scale(rel);
        if (s == 0.0)
            return rdp_noiseless(pr, rep);
        double rho = dp_round_up(d * d / (2.0 * s * s), 1e-15);
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * dp_round_up(rho * o[i], 1e-15);
        return DPB_OK;
    }
    case DP_EV_DISCRETE_LAPLACE: {
        /* (a Delta)-DP: the loss a(|z - Delta| - |z|) lies in [-a Delta, a Delta] */
        double a = ev->u.dlap.noise_parameter,
               d = (double)ev->u.dlap.sensitivity * dp_sens_scale(rel);
        if (d == 0.0)
            return DPB_OK;
        if (a == 0.0)
            return rdp_noiseless(pr, rep);
        double e = dp_round_up(a * d, 1e-15);
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * rdp_pure_dp(e, o[i]);
        return DPB_OK;
    }
    case DP_EV_EXPONENTIAL:
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * rdp_bounded_range(ev->u.pure.epsilon, o[i]);
        return DPB_OK;
    case DP_EV_PERMUTE_AND_FLIP:
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * rdp_pure_dp(ev->u.pure.epsilon, o[i]);
        return DPB_OK;
    case DP_EV_ZCDP:
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * dp_round_up(ev->u.zcdp.xi + ev->u.zcdp.rho * o[i], 1e-15);
        return DPB_OK;
    case DP_EV_MIXTURE_GAUSSIANS:
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "a MixtureOfGaussiansDpEvent is accounted with pld (as dp_accounting "
                        "does); rdp has no bound for it here");
    case DP_EV_REPEAT_AND_SELECT: {
        /* the inner event's whole curve at the same orders, then Papernot & Steinke */
        dp_profile *sub;
        dpb_status st = rdp_sub_profile(ev->u.rs.event, rel, o, no, rep, err, &sub);
        if (st != DPB_OK)
            return st;
        double *one = malloc(no * sizeof *one), *out = malloc(no * sizeof *out),
               *dh = isinf(ev->u.rs.shape) ? malloc(no * sizeof *dh) : NULL;
        if (one == NULL || out == NULL || (isinf(ev->u.rs.shape) && dh == NULL)) {
            st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        } else {
            for (size_t i = 0; i < no; i++)
                one[i] = dp_profile_rdp_order(sub, i);
            if (dh != NULL)
                st = rs_delta_hat(ev->u.rs.event, rel, sub, dh, rep, err);
            if (st == DPB_OK &&
                rdp_repeat_and_select(o, one, no, ev->u.rs.mean, ev->u.rs.shape, dh, out) != DPB_OK)
                st = dpb_fail(err, DPB_EINVAL, "event",
                              "RepeatAndSelectDpEvent needs mean >= 1 and shape >= 0");
            else if (st == DPB_OK)
                for (size_t i = 0; i < no; i++)
                    rdp[i] += mult * out[i];
        }
        free(one);
        free(out);
        free(dh);
        rdp_sub_free(sub);
        return st;
    }
    default:
        break;
    }
    return dp_unsupported(err, dp_kind_name(ev->kind), "rdp");
}

dpb_status dp_profile_build_rdp(const dp_event *ev, dp_relation rel, const double *orders, size_t n,
                                dp_profile *pr, dp_report *rep, dpb_error *err)
{
    dp_profile_clear(pr);
    pr->acct = DP_ACCT_RDP;
    rep->accountant = dp_accountant_name(DP_ACCT_RDP);
    rep->guarantee = DP_UPPER_BOUND;
    rep->reference = REF_RDP;
    if (orders) {
        if (n == 0 || n > RDP_MAX_ORDERS)
            return dpb_fail(err, DPB_ELIMIT, "orders", "between 1 and %d orders", RDP_MAX_ORDERS);
        for (size_t i = 0; i < n; i++)
            if (!(orders[i] > 1.0 && orders[i] <= RDP_MAX_ORDER))
                return dpb_fail(err, DPB_EINVAL, "orders",
                                "each order must be a number greater than 1 and at most %g",
                                RDP_MAX_ORDER);
        pr->orders = orders;
        pr->norders = n;
    } else {
        pr->orders = RDP_DEFAULT_ORDERS;
        pr->norders = RDP_NORDERS;
    }
    memset(pr->rdp, 0, pr->norders * sizeof pr->rdp[0]); /* the walk adds into them */
    dpb_status st = dp_walk_rdp(ev, rel, 1.0, pr, rep, err);
    if (pr->ned > 0)
        rep->reference = REF_RDP_ED;
    for (size_t i = 0; i < pr->norders; i++)
        pr->rdp_done[i] = pr->npg == 0 || pr->orders[i] == floor(pr->orders[i]);
    return st;
}

/* The RDP of the whole profile at order index i, completing it on first use. */
static double rdp_at(dp_profile *pr, size_t i)
{
    double early, late;
    dp_profile_rdp_parts(pr, i, &early, &late);
    return pr->rdp[i];
}

/* The deferred orders are summed apart (from 0, in the order the walk met the sampled
 * Gaussians) and added to the rest once: the ledger keeps the two sums of its curves apart
 * the same way (rdp.h, RDP_LATE), which makes its spend this accountant's answer bit for
 * bit. */
void dp_profile_rdp_parts(dp_profile *pr, size_t i, double *early, double *late)
{
    *early = pr->rdp[i];
    *late = 0.0;
    if (pr->rdp_done[i])
        return;
    double acc = 0.0;
    for (size_t k = 0; k < pr->npg; k++)
        acc += pr->pg[k].mult * rdp_poisson_gaussian(pr->pg[k].q, pr->pg[k].sigma, pr->orders[i]);
    *late = acc;
    pr->rdp[i] += acc;
    pr->rdp_done[i] = 1;
}

double dp_profile_rdp_order(dp_profile *pr, size_t i)
{
    return rdp_at(pr, i);
}

/* The RDP of the (eps, delta) events' eps parts at order a: each is, by Kairouz, Oh,
 * Viswanath 2015 (Theorem 2.1 there), a post-processing of eps-randomized response run
 * with probability 1 - delta (and of an output revealing the record with probability delta),
 * so its eps part has randomized response's RDP (rdp_pure_dp). */
static double ed_rdp(const dp_profile *pr, double a)
{
    double r = 0.0;
    for (size_t k = 0; k < pr->ned; k++)
        r += pr->ed[k].mult * rdp_pure_dp(pr->ed[k].eps, a);
    return r;
}

/* The conversion minimised over the orders of the curve (plus, with_ed, the (eps, delta)
 * events' eps parts): want_eps = 1 gives eps for x = delta, 0 gives ln delta for x = eps, not
 * rounded. Complete orders first; an incomplete (fractional) order a is evaluated only if its
 * lower bound beats the best so far: RDP is non-decreasing in the order, so the total at the
 * largest integer order below a (0 below 2) bounds it from below, and both conversions
 * increase with the RDP. Skipping never changes the minimum. */
static double lazy_min(dp_profile *pr, int with_ed, int want_eps, double x, double *order)
{
    double best = HUGE_VAL, best_order = pr->orders[0];
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < pr->norders; i++) {
            double a = pr->orders[i], v;
            if (pass == 0) {
                if (!pr->rdp_done[i])
                    continue;
                v = pr->rdp[i];
            } else {
                if (pr->rdp_done[i])
                    continue;
                double lb = 0.0;
                for (size_t j = i; j-- > 0;)
                    if (pr->rdp_done[j] && pr->orders[j] <= a) {
                        lb = pr->rdp[j] + (with_ed ? ed_rdp(pr, pr->orders[j]) : 0.0);
                        break;
                    }
                double bound = want_eps ? rdp_eps_at(a, lb, x) : rdp_log_delta_at(a, lb, x);
                if (bound >= best)
                    continue;
                v = rdp_at(pr, i);
            }
            if (with_ed)
                v += ed_rdp(pr, a);
            double c = want_eps ? rdp_eps_at(a, v, x) : rdp_log_delta_at(a, v, x);
            if (c < best) {
                best = c;
                best_order = a;
            }
        }
    *order = best_order;
    return best;
}

/* With (eps_i, delta_i) events (delta_i > 0, k_i times each) in the composition, the smaller
 * of two bounds (docs/MATH.md section 6): (A) basic composition (Dwork & Roth 2014, Theorem
 * 3.16) of the curve's conversion at delta - sum k_i delta_i with the events' sum k_i eps_i;
 * (B) each event as randomized response with a delta_i failure (Kairouz, Oh, Viswanath
 * 2015): with eta = 1 - prod (1 - delta_i)^{k_i}, the chance that some event fails, the
 * pair is a mixture (1 - eta) (no failure) + eta (a failure), so by joint convexity of the
 * hockey-stick divergence delta <= (1 - eta) delta'(eps) + eta, delta' from the curve plus
 * the responses' RDP: converted at (delta - eta) / (1 - eta) (as dp_accounting's
 * RdpAccountant). Each sum is rounded up, each delta left to the conversion rounded down.
 * want_eps: eps for x = delta; else delta for x = eps. Rounded up. */
static double ed_convert(dp_profile *pr, int want_eps, double x, double *order)
{
    double se = 0.0, sd = 0.0, l1m = 0.0, oa = pr->orders[0], ob = oa;
    for (size_t k = 0; k < pr->ned; k++) {
        se += pr->ed[k].mult * pr->ed[k].eps;
        sd += pr->ed[k].mult * pr->ed[k].delta;
        l1m += pr->ed[k].mult * log1p(-pr->ed[k].delta);
    }
    se = dp_round_up(se, 1e-14);
    sd = dp_round_up(sd, 1e-14);
    double eta = dp_round_up(-expm1(l1m), 1e-14);
    if (want_eps) {
        double da = dp_round_down(x - sd, 1e-15),
               db = dp_round_down((x - eta) / (1.0 - eta), 1e-15);
        double ea = da > 0.0 ? lazy_min(pr, 0, 1, da, &oa) + se : HUGE_VAL;
        double eb = db > 0.0 ? lazy_min(pr, 1, 1, db, &ob) : HUGE_VAL;
        double e = ea < eb ? ea : eb;
        *order = ea < eb ? oa : ob;
        return !(e > 0.0) ? 0.0 : dp_round_up(e, RDP_REL_ROUND);
    }
    double ra = x >= se ? exp(lazy_min(pr, 0, 0, x - se, &oa)) : 1.0;
    double rb = exp(lazy_min(pr, 1, 0, x, &ob));
    double d = dp_round_up(ra + sd, RDP_REL_ROUND),
           db = dp_round_up((1.0 - eta) * rb + eta, RDP_REL_ROUND);
    *order = d < db ? oa : ob;
    d = d < db ? d : db;
    return d > 1.0 ? 1.0 : d;
}

/* The conversion minimised over the orders: want_eps = 1 gives eps for x = delta, 0 gives
 * delta for x = eps (lazy_min), and the order infinity. Rounded up. */
double dp_rdp_lazy(dp_profile *pr, int want_eps, double x, double *order)
{
    if (pr->ned > 0)
        return ed_convert(pr, want_eps, x, order);
    double best_order, best = lazy_min(pr, 0, want_eps, x, &best_order);
    /* the order infinity (pure DP composed additively): eps <= D_inf at every delta, and
     * delta = 0 from eps >= D_inf on */
    double dinf = dp_round_up(pr->rdp_inf, RDP_REL_ROUND);
    if (isfinite(dinf) && (want_eps ? dinf < best : x >= dinf)) {
        best = want_eps ? dinf : -HUGE_VAL;
        best_order = HUGE_VAL;
    }
    *order = best_order;
    if (want_eps)
        return best <= 0.0 ? 0.0 : dp_round_up(best, RDP_REL_ROUND);
    double d = dp_round_up(exp(best), RDP_REL_ROUND);
    return d > 1.0 ? 1.0 : d;
}
