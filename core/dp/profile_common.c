/*
 * profile_common.c - what the accountants' tree walks share (profile_int.h): warnings,
 * Theorem 4.1's per-epoch leaf, the DP-SGD tree that SGLD and proactive histories stand for,
 * event names and refusals, noise multipliers per relation (sums, sampled nests, tree
 * aggregation, discrete mechanisms), seed 000's profile as a function, the structure of the
 * accumulating walks (dp_walk_tree), and the profile's life cycle (dp_profile_clear,
 * dp_profile_release). It calls the numerics (normal.c, shuffle.c, shuffle_exact.c,
 * sampling.c, pnsgd.c, event.c, pld.c) only, no walk.
 */
#include "profile_int.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "normal.h"
#include "sampling.h"
#include "shuffle.h"
#include "shuffle_exact.h"

static const char W_TV[] = "Theorem 4.1 bounds total variation only: delta is the same for "
                           "every epsilon >= 0, and no finite epsilon is certified for a "
                           "delta below it";
const char dp_warn_pnsgd[] = "projected noisy SGD (seed 000): the bound holds for every "
                             "epsilon >= 0 and either neighbour order; a schedule's limit "
                             "delta* is a limit as n grows, not a bound at this n";
const char dp_warn_nonprivate[] = "the event contains a NonPrivateDpEvent: its privacy loss "
                                  "is infinite";
const char dp_warn_noiseless[] = "the event contains a mechanism without noise (noise 0): its "
                                 "privacy loss is infinite, as for a NonPrivateDpEvent";

/* ---- shuffled epochs (Theorem 4.1) --------------------------------------------------- */

static void thm41_conditions(dp_report *rep, const dp_thm41 *e)
{
    dp_report_condition(rep, "rounds_at_least_3", "M >= 3 (rounds per epoch)", e->rounds_ok,
                        (double)e->rounds, 3.0);
    if (!e->rounds_ok)
        return;
    dp_report_condition(rep, "sigma_at_least_sqrt_3_over_ln_m",
                        "noise_multiplier >= sqrt(3 / ln M)", e->sigma_ok, e->sigma, e->sigma_min);
    if (!e->sigma_ok)
        return;
    dp_report_condition(rep, "thm41_validity",
                        "condition (1): delta + B coef mu <= 1/2 - Phi(-(e^{1/sigma^2} - 1)/2)",
                        e->cond_ok, e->cond_lhs, e->cond_rhs);
}

/* The certified per-epoch delta of a shuffled leaf, or a refusal naming the condition. */
dpb_status dp_thm41_leaf(const dp_event *ev, dp_relation rel, double *delta, dp_report *rep,
                         dpb_error *err)
{
    if (rel != DP_REL_ADD_OR_REMOVE)
        return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                        "seed 004's analysis of shuffled DP-SGD is proved for the "
                        "add_or_remove_one (zero-out) relation only; replace_one is not "
                        "covered");
    dp_thm41 e;
    dpb_status st = dp_thm41_eval(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds, &e);
    if (st == DPB_EINVAL)
        return dpb_fail(err, st, "event", "noise_multiplier must be > 0 and rounds >= 1");
    thm41_conditions(rep, &e);
    if (st != DPB_OK) {
        if (!e.rounds_ok)
            return dpb_fail(err, st, "rounds",
                            "Theorem 4.1 needs M >= 3 rounds per epoch; got %llu",
                            (unsigned long long)e.rounds);
        if (!e.sigma_ok)
            return dpb_fail(err, st, "noise_multiplier",
                            "Theorem 4.1 needs noise_multiplier >= sqrt(3/ln M) = %.6g at "
                            "M = %llu; got %.6g",
                            e.sigma_min, (unsigned long long)e.rounds, e.sigma);
        return dpb_fail(err, st, "event",
                        "Theorem 4.1's validity condition (1) fails at noise_multiplier "
                        "%.6g, M = %llu (%.6g > %.6g): more rounds per epoch are needed",
                        e.sigma, (unsigned long long)e.rounds, e.cond_lhs, e.cond_rhs);
    }
    dp_report_warn(rep, W_TV);
    *delta = e.delta;
    return DPB_OK;
}

/* ---- events that stand for DP-SGD: clipped SGLD and proactive histories ----------------- */

static dp_event *node(dp_event_kind k)
{
    return dp_event_new(k);
}

/* SelfComposed(PoissonSampled(q, Gaussian(sigma)), count), or SelfComposed(Gaussian, count)
 * when q = 1; NULL on allocation failure. */
static dp_event *dpsgd(double q, double sigma, uint64_t count)
{
    dp_event *g = node(DP_EV_GAUSSIAN), *p = q < 1.0 ? node(DP_EV_POISSON_SAMPLED) : NULL;
    dp_event *t = node(DP_EV_SELF_COMPOSED);
    if (g == NULL || t == NULL || (q < 1.0 && p == NULL)) {
        dp_event_free(g);
        dp_event_free(p);
        dp_event_free(t);
        return NULL;
    }
    g->u.noise.noise_multiplier = sigma;
    if (p) {
        p->u.sampled.sampling_probability = q;
        p->u.sampled.event = g;
    }
    t->u.self.event = p ? p : g;
    t->u.self.count = count;
    return t;
}

/* The DP-SGD tree that a clipped SGLD run or a proactive history is (owned by the caller),
 * or NULL with err set: unclipped SGLD is uncertifiable (seed 003, Theorem IV.1). */
dp_event *dp_map_to_dpsgd(const dp_event *ev, dpb_status *st, dpb_error *err)
{
    *st = DPB_OK;
    if (ev->kind == DP_EV_SGLD) {
        const sgld_params *p = &ev->u.sgld;
        double sigma;
        if (!p->clipped) {
            *st = dpb_fail(err, DPB_EUNCERTIFIABLE, "event",
                           "unclipped SGLD cannot be certified: seed 003 (Theorem IV.1) shows "
                           "its iterates between the first steps and convergence are not "
                           "(epsilon, delta)-DP for any epsilon; clip the gradients "
                           "(clipping_norm) to account it as DP-SGD");
            return NULL;
        }
        if (sgld_noise_multiplier(p, &sigma) != DPB_OK) {
            *st = dpb_fail(err, DPB_EINVAL, "event",
                           "SGLD needs clipping_norm > 0, step_size > 0, 1 <= batch_size <= "
                           "dataset_size, and the noise multiplier they imply, 2 batch_size / "
                           "(dataset_size clipping_norm sqrt(step_size)), at most 1e6 (the "
                           "Gaussian's range)");
            return NULL;
        }
        double q = p->batch_size / p->dataset_size;
        dp_event *t = p->sampling == SGLD_POISSON
                          ? dpsgd(q, sigma, p->steps)
                          : dpsgd(1.0, sigma, (uint64_t)ceil((double)p->steps * q));
        if (t == NULL)
            *st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        return t;
    }
    /* a proactive history: each phase is Poisson sampling at rate s_i/N for T_i rounds */
    dp_event *c = node(DP_EV_COMPOSED);
    int n = ev->u.proactive.nphases;
    if (c)
        c->u.composed.events = calloc((size_t)n, sizeof(dp_event *));
    if (c == NULL || c->u.composed.events == NULL) {
        dp_event_free(c);
        *st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        dp_event *t = dpsgd(ev->u.proactive.batch[i] / ev->u.proactive.dataset_size,
                            ev->u.proactive.sigma[i], (uint64_t)ev->u.proactive.rounds[i]);
        if (t == NULL) {
            dp_event_free(c);
            *st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            return NULL;
        }
        c->u.composed.events[c->u.composed.n++] = t;
    }
    return c;
}

dpb_status dp_unsupported(dpb_error *err, const char *what, const char *acct)
{
    return dpb_fail(err, DPB_EUNSUPPORTED, "accountant", "%s cannot be accounted with %s%s", what,
                    acct, "; GET /v1/accountants lists which accountant takes which event");
}

static const char *const KIND_NAMES[] = {
    [DP_EV_SHUFFLED_EPOCH] = "ShuffledDpSgdEpochDpEvent",
    [DP_EV_SELF_COMPOSED] = "SelfComposedDpEvent",
    [DP_EV_COMPOSED] = "ComposedDpEvent",
    [DP_EV_GAUSSIAN] = "GaussianDpEvent",
    [DP_EV_LAPLACE] = "LaplaceDpEvent",
    [DP_EV_EPSILON_DELTA] = "EpsilonDeltaDpEvent",
    [DP_EV_POISSON_SAMPLED] = "PoissonSampledDpEvent",
    [DP_EV_NO_OP] = "NoOpDpEvent",
    [DP_EV_PNSGD] = "ProjectedNoisySgdDpEvent",
    [DP_EV_PROACTIVE] = "ProactiveDpSgdDpEvent",
    [DP_EV_SGLD] = "SgldDpEvent",
    [DP_EV_NON_PRIVATE] = "NonPrivateDpEvent",
    [DP_EV_SAMPLED_WITH_REPLACEMENT] = "SampledWithReplacementDpEvent",
    [DP_EV_SAMPLED_WITHOUT_REPLACEMENT] = "SampledWithoutReplacementDpEvent",
    [DP_EV_TREE_AGGREGATION] = "SingleEpochTreeAggregationDpEvent",
    [DP_EV_TRUNCATED_GAUSSIAN] = "TruncatedSubsampledGaussianDpEvent",
    [DP_EV_RANDOMIZED_RESPONSE] = "RandomizedResponseDpEvent",
    [DP_EV_DISCRETE_GAUSSIAN] = "DiscreteGaussianDpEvent",
    [DP_EV_DISCRETE_LAPLACE] = "DiscreteLaplaceDpEvent",
    [DP_EV_EXPONENTIAL] = "ExponentialMechanismDpEvent",
    [DP_EV_PERMUTE_AND_FLIP] = "PermuteAndFlipDpEvent",
    [DP_EV_ZCDP] = "ZCDpEvent",
    [DP_EV_MIXTURE_GAUSSIANS] = "MixtureOfGaussiansDpEvent",
    [DP_EV_REPEAT_AND_SELECT] = "RepeatAndSelectDpEvent",
};

const char *dp_kind_name(dp_event_kind k)
{
    size_t i = (size_t)k;
    return i < sizeof KIND_NAMES / sizeof KIND_NAMES[0] && KIND_NAMES[i] != NULL ? KIND_NAMES[i]
                                                                                 : "event";
}

/* The noise multiplier in sensitivity-1 units for the relation. */
double dp_sens1(double s, dp_relation rel)
{
    return rel == DP_REL_REPLACE ? s / 2.0 : s;
}

/* ---- fixed-size and truncated sampling, tree aggregation (sampling.h) ------------------- */

/* add_or_remove_one and replace_special (zero-out) give the same pairs for sums and Poisson
 * sampling (dp_accounting: "results in the same privacy loss distribution"). */
int dp_add_remove_like(dp_relation rel)
{
    return rel == DP_REL_ADD_OR_REMOVE || rel == DP_REL_REPLACE_SPECIAL;
}

dpb_status dp_refuse_relation(dpb_error *err, const char *cls, const char *takes)
{
    return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                    "%s is accounted for the %s relation only (as dp_accounting defines it)", cls,
                    takes);
}

/* The noise multiplier of the one Gaussian mechanism a nest of Composed/SelfComposed
 * Gaussians is (sigma = (sum count / sigma_i^2)^{-1/2}: their joint output is a Gaussian
 * mechanism), or 0 when the event is not such a nest. */
static double effective_sigma(const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_GAUSSIAN:
        return ev->u.noise.noise_multiplier;
    case DP_EV_SELF_COMPOSED: {
        double s = effective_sigma(ev->u.self.event);
        return s > 0.0 && ev->u.self.count > 0 ? s / sqrt((double)ev->u.self.count) : 0.0;
    }
    case DP_EV_COMPOSED: {
        double acc = 0.0;
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            double s = effective_sigma(ev->u.composed.events[i]);
            if (!(s > 0.0))
                return 0.0;
            acc += 1.0 / (s * s);
        }
        return acc > 0.0 ? 1.0 / sqrt(acc) : 0.0;
    }
    default:
        return 0.0;
    }
}

dpb_status dp_inner_sigma(const dp_event *ev, const char *cls, double *sigma, dpb_error *err)
{
    *sigma = effective_sigma(ev);
    if (*sigma > 0.0 && isfinite(*sigma))
        return DPB_OK;
    return dpb_fail(err, DPB_EUNSUPPORTED, "event",
                    "the event inside a %s must be a GaussianDpEvent (or Composed/SelfComposed "
                    "events of GaussianDpEvents), as in dp_accounting; got a %s",
                    cls, dp_kind_name(ev->kind));
}

/* Kairouz et al. 2021 App. D: a record enters depth nodes of independent N(0, sigma^2)
 * noise, each with sensitivity 1 under zero-out: exactly a Gaussian mechanism with
 * multiplier sigma / sqrt(depth) (0: depth 0, no node sees the record). */
dpb_status dp_tree_sigma(const dp_event *ev, dp_relation rel, double *sigma, dpb_error *err)
{
    if (rel != DP_REL_REPLACE_SPECIAL)
        return dp_refuse_relation(err, "SingleEpochTreeAggregationDpEvent", "replace_special");
    unsigned d = smp_tree_depth(ev->u.tree.steps, ev->u.tree.nsteps);
    double s = ev->u.tree.noise_multiplier;
    /* a zero (or NaN) multiplier is no noise, not an event without cost: 0 below means
     * "no step, nothing released" to every caller */
    if (d > 0 && !(s > 0.0))
        return dpb_fail(err, DPB_EINVAL, "event",
                        "SingleEpochTreeAggregationDpEvent: noise_multiplier must be > 0");
    *sigma = d == 0 ? 0.0 : s / sqrt((double)d);
    return DPB_OK;
}

/* ---- rdp: dp_accounting's mechanism events (issue 16) ------------------------------------ */

/* The integer sensitivity of a discrete mechanism for the relation: replace-one moves a sum
 * by twice what add-or-remove does, as for the Gaussian and Laplace noise multipliers. */
double dp_sens_scale(dp_relation rel)
{
    return rel == DP_REL_REPLACE ? 2.0 : 1.0;
}

dpb_status dp_rr_relation(dpb_error *err)
{
    return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                    "randomized response is defined for replace_one (and replace_special), not "
                    "add_or_remove_one, as in dp_accounting");
}

/* Randomized response's pair: replace_one is R(x) against R(x'); any other relation but
 * add_or_remove_one (replace_special, as dp_accounting defines it) is R(x) against the
 * uniform output R(bot). */
int dp_rr_replace_one(dp_relation rel)
{
    return rel == DP_REL_REPLACE;
}

double dp_pnsgd_profile_fn(void *ctx, double eps)
{
    double d;
    return pnsgd_delta(ctx, eps, &d) == DPB_OK ? d : 1.0;
}

dpb_status dp_walk_tree(const dp_walk_state *w, const dp_event *ev, double mult, dp_leaf_fn leaf)
{
    dpb_status st = DPB_OK;
    dp_event *m;
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        return dp_walk_tree(w, ev->u.self.event, mult * (double)ev->u.self.count, leaf);
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n && st == DPB_OK; i++)
            st = dp_walk_tree(w, ev->u.composed.events[i], mult, leaf);
        return st;
    case DP_EV_NO_OP:
        return DPB_OK;
    case DP_EV_SGLD:
    case DP_EV_PROACTIVE:
        if ((m = dp_map_to_dpsgd(ev, &st, w->err)) != NULL) {
            st = dp_walk_tree(w, m, mult, leaf);
            dp_event_free(m);
        }
        return st;
    default:
        return leaf(w, ev, mult);
    }
}

/* ---- the profile's life cycle (profile.h) ---- */

void dp_profile_clear(dp_profile *pr)
{
    memset(pr, 0, offsetof(dp_profile, rdp));
    pr->rdp_inf = 0.0;
    memset((char *)pr + offsetof(dp_profile, npg), 0, sizeof *pr - offsetof(dp_profile, npg));
}

void dp_profile_release(dp_profile *pr)
{
    if (pr->sub) {
        dp_profile_release(pr->sub);
        free(pr->sub);
        pr->sub = NULL;
    }
    free(pr->pg);
    pr->pg = NULL;
    pr->npg = 0;
    free(pr->ed);
    pr->ed = NULL;
    pr->ned = 0;
    if (pr->shx) {
        shx_release(pr->shx);
        pr->shx = NULL;
    }
    if (pr->acct == DP_ACCT_PLD || pr->use_pld) {
        pld_free(&pr->dir[0]);
        if (!pr->symmetric)
            pld_free(&pr->dir[1]);
    }
}
