/*
 * profile.c - build a privacy profile from an event tree, one tree walk per accountant.
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
#include "profile.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"
#include "normal.h"
#include "sampling.h"
#include "shuffle.h"
#include "shuffle_exact.h"

static double pnsgd_profile_fn(void *ctx, double eps);

static const char W_TV[] = "Theorem 4.1 bounds total variation only: delta is the same for "
                           "every epsilon >= 0, and no finite epsilon is certified for a "
                           "delta below it";
static const char W_ESTIMATE[] = "asymptotic approximation (M -> infinity with sigma fixed) "
                                 "with no finite-M error bound; it can be far below the true "
                                 "delta: never enforce a budget with it";
static const char W_PNSGD[] = "projected noisy SGD (seed 000): the bound holds for every "
                              "epsilon >= 0 and either neighbour order; a schedule's limit "
                              "delta* is a limit as n grows, not a bound at this n";
static const char W_PNSGD_EPOCHS[] = "epochs composed optimally (Kairouz, Oh, Viswanath) from "
                                     "the best per-epoch (epsilon, delta) point; the pld "
                                     "accountant composes the whole profile and can be "
                                     "tighter";
static const char W_NONPRIVATE[] = "the event contains a NonPrivateDpEvent: its privacy loss "
                                   "is infinite";
static const char W_NOISELESS[] = "the event contains a mechanism without noise (noise 0): its "
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
static dpb_status thm41_leaf(const dp_event *ev, dp_relation rel, double *delta, dp_report *rep,
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
                           "SGLD needs clipping_norm > 0, step_size > 0 and 1 <= batch_size <= "
                           "dataset_size");
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

static dpb_status unsupported(dpb_error *err, const char *what, const char *acct)
{
    return dpb_fail(err, DPB_EUNSUPPORTED, "accountant", "%s cannot be accounted with %s%s", what,
                    acct, "; GET /v1/accountants lists which accountant takes which event");
}

static const char *kind_name(dp_event_kind k)
{
    switch (k) {
    case DP_EV_SHUFFLED_EPOCH:
        return "ShuffledDpSgdEpochDpEvent";
    case DP_EV_SELF_COMPOSED:
        return "SelfComposedDpEvent";
    case DP_EV_COMPOSED:
        return "ComposedDpEvent";
    case DP_EV_GAUSSIAN:
        return "GaussianDpEvent";
    case DP_EV_LAPLACE:
        return "LaplaceDpEvent";
    case DP_EV_EPSILON_DELTA:
        return "EpsilonDeltaDpEvent";
    case DP_EV_POISSON_SAMPLED:
        return "PoissonSampledDpEvent";
    case DP_EV_NO_OP:
        return "NoOpDpEvent";
    case DP_EV_PNSGD:
        return "ProjectedNoisySgdDpEvent";
    case DP_EV_PROACTIVE:
        return "ProactiveDpSgdDpEvent";
    case DP_EV_SGLD:
        return "SgldDpEvent";
    case DP_EV_NON_PRIVATE:
        return "NonPrivateDpEvent";
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
        return "SampledWithReplacementDpEvent";
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        return "SampledWithoutReplacementDpEvent";
    case DP_EV_TREE_AGGREGATION:
        return "SingleEpochTreeAggregationDpEvent";
    case DP_EV_TRUNCATED_GAUSSIAN:
        return "TruncatedSubsampledGaussianDpEvent";
    case DP_EV_RANDOMIZED_RESPONSE:
        return "RandomizedResponseDpEvent";
    case DP_EV_DISCRETE_GAUSSIAN:
        return "DiscreteGaussianDpEvent";
    case DP_EV_DISCRETE_LAPLACE:
        return "DiscreteLaplaceDpEvent";
    case DP_EV_EXPONENTIAL:
        return "ExponentialMechanismDpEvent";
    case DP_EV_PERMUTE_AND_FLIP:
        return "PermuteAndFlipDpEvent";
    case DP_EV_ZCDP:
        return "ZCDpEvent";
    case DP_EV_MIXTURE_GAUSSIANS:
        return "MixtureOfGaussiansDpEvent";
    case DP_EV_REPEAT_AND_SELECT:
        return "RepeatAndSelectDpEvent";
    }
    return "event";
}

/* The noise multiplier in sensitivity-1 units for the relation. */
static double sens1(double s, dp_relation rel)
{
    return rel == DP_REL_REPLACE ? s / 2.0 : s;
}

/* ---- fixed-size and truncated sampling, tree aggregation (sampling.h) ------------------- */

/* add_or_remove_one and replace_special (zero-out) give the same pairs for sums and Poisson
 * sampling (dp_accounting: "results in the same privacy loss distribution"). */
static int add_remove_like(dp_relation rel)
{
    return rel == DP_REL_ADD_OR_REMOVE || rel == DP_REL_REPLACE_SPECIAL;
}

static dpb_status refuse_relation(dpb_error *err, const char *cls, const char *takes)
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

static dpb_status inner_sigma(const dp_event *ev, const char *cls, double *sigma, dpb_error *err)
{
    *sigma = effective_sigma(ev);
    if (*sigma > 0.0 && isfinite(*sigma))
        return DPB_OK;
    return dpb_fail(err, DPB_EUNSUPPORTED, "event",
                    "the event inside a %s must be a GaussianDpEvent (or Composed/SelfComposed "
                    "events of GaussianDpEvents), as in dp_accounting; got a %s",
                    cls, kind_name(ev->kind));
}

/* Kairouz et al. 2021 App. D: a record enters depth nodes of independent N(0, sigma^2)
 * noise, each with sensitivity 1 under zero-out: exactly a Gaussian mechanism with
 * multiplier sigma / sqrt(depth) (0: depth 0, no node sees the record). */
static dpb_status tree_sigma(const dp_event *ev, dp_relation rel, double *sigma, dpb_error *err)
{
    if (rel != DP_REL_REPLACE_SPECIAL)
        return refuse_relation(err, "SingleEpochTreeAggregationDpEvent", "replace_special");
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

/* The advanced-joint-convexity profile of a sampled leaf (sampling.h). */
static dpb_status sampled_profile(const dp_event *ev, dp_relation rel, smp_profile *pf,
                                  dpb_error *err)
{
    double s;
    dpb_status st;
    const char *cls = kind_name(ev->kind);
    switch (ev->kind) {
    case DP_EV_POISSON_SAMPLED:
        if ((st = inner_sigma(ev->u.sampled.event, cls, &s, err)) != DPB_OK)
            return st;
        st = smp_poisson_replace(ev->u.sampled.sampling_probability, s, pf);
        break;
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
        if (rel != DP_REL_REPLACE)
            return refuse_relation(err, cls, "replace_one");
        if ((st = inner_sigma(ev->u.fixed.event, cls, &s, err)) != DPB_OK)
            return st;
        st = ev->kind == DP_EV_SAMPLED_WITHOUT_REPLACEMENT
                 ? smp_without_replacement(ev->u.fixed.population, ev->u.fixed.sample_size, s, pf)
                 : smp_with_replacement(ev->u.fixed.population, ev->u.fixed.sample_size, s, pf);
        break;
    case DP_EV_TRUNCATED_GAUSSIAN:
        st = smp_truncated(ev->u.truncated.dataset_size, ev->u.truncated.sampling_probability,
                           ev->u.truncated.batch_size, ev->u.truncated.noise_multiplier,
                           rel == DP_REL_REPLACE           ? SMP_REPLACE_ONE
                           : rel == DP_REL_REPLACE_SPECIAL ? SMP_REPLACE_SPECIAL
                                                           : SMP_ADD_REMOVE,
                           pf);
        break;
    default:
        return dpb_fail(err, DPB_EINVAL, "event", "not a sampled event");
    }
    if (st == DPB_EINVAL)
        return dpb_fail(err, st, "event",
                        "%s: a parameter is outside its domain (sizes at most 1e9, sample size "
                        "at most the dataset size, noise_multiplier > 0)",
                        cls);
    if (st != DPB_OK)
        return dpb_fail(err, st, NULL, "out of memory");
    return DPB_OK;
}

/* The PLD's leaf evaluates the profile at every grid point. Where every term has mu_a =
 * mu_b, each term is g H_{1 + (x - 1)/g}(B || A) with x = e^e', the hockey-stick of a fixed
 * pair at an order affine in x, hence convex in x (as is their weighted sum): each of the
 * profile's bounds (smp_delta_alt) is evaluated at every SMP_STRIDE-th grid point only and
 * joined by chords in x, which lie above it; the smallest chord is taken. Otherwise
 * (replace-one's split terms, the triangle bound) every point is evaluated. */
#define SMP_STRIDE 16
#define SMP_NB (1 + SMP_ALT)

typedef struct {
    const smp_profile *pf;
    double H; /* SMP_STRIDE grid steps; 0: no chords */
    size_t n;
    double *v; /* memo of each bound at k H: v[k SMP_NB + 1 + alt] (NAN: not yet) */
} smp_memo;

static double smp_memo_at(smp_memo *c, size_t k, int alt)
{
    if (k >= c->n) {
        size_t n = c->n ? c->n : 256;
        while (n <= k)
            n *= 2;
        double *v = realloc(c->v, n * SMP_NB * sizeof *v);
        if (v == NULL)
            return 1.0; /* nothing known: the worst value */
        for (size_t i = c->n * SMP_NB; i < n * SMP_NB; i++)
            v[i] = NAN;
        c->v = v;
        c->n = n;
    }
    double *slot = &c->v[k * SMP_NB + (size_t)(1 + alt)];
    if (isnan(*slot))
        *slot = smp_delta_alt(c->pf, (double)k * c->H, alt);
    return *slot;
}

static double smp_profile_fn(void *ctx, double eps)
{
    smp_memo *c = ctx;
    double kf = c->H > 0.0 ? floor(eps / c->H) : -1.0;
    if (!(kf >= 0.0 && kf < 1e7))
        return smp_delta(c->pf, eps);
    size_t k = (size_t)kf;
    double xa = exp(kf * c->H), xb = exp((kf + 1.0) * c->H), t = (exp(eps) - xa) / (xb - xa);
    if (!(t >= 0.0 && t <= 1.0))
        return smp_delta(c->pf, eps);
    double best = 1.0;
    for (int alt = -1; alt < c->pf->nalt; alt++) {
        double a = smp_memo_at(c, k, alt);
        double v = eps == kf * c->H ? a : (1.0 - t) * a + t * smp_memo_at(c, k + 1, alt);
        if (v < best)
            best = v;
    }
    return best;
}

static const char W_AJC[] = "sampled mechanism bounded by advanced joint convexity (Balle, "
                            "Barthe, Gaboardi 2018, Theorem 2) over Gaussian components (Poisson "
                            "under replace_one also by the triangle inequality through the "
                            "add/remove pairs): an upper bound, which may be looser than the "
                            "pair dp_accounting uses";

/* ---- thm41 and the Gaussian-DP walks (scalar accumulators) --------------------------------- */

static dpb_status walk_scalar(const dp_event *ev, dp_relation rel, dp_accountant acct, double mult,
                              double *acc, dp_report *rep, dpb_error *err)
{
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        return walk_scalar(ev->u.self.event, rel, acct, mult * (double)ev->u.self.count, acc, rep,
                           err);
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            dpb_status st = walk_scalar(ev->u.composed.events[i], rel, acct, mult, acc, rep, err);
            if (st != DPB_OK)
                return st;
        }
        return DPB_OK;
    case DP_EV_NO_OP:
        return DPB_OK;
    case DP_EV_NON_PRIVATE:
        dp_report_warn(rep, W_NONPRIVATE);
        *acc = acct == DP_ACCT_THM41 ? -HUGE_VAL : HUGE_VAL;
        return DPB_OK;
    case DP_EV_SHUFFLED_EPOCH:
        if (acct == DP_ACCT_THM41) {
            double d;
            dpb_status st = thm41_leaf(ev, rel, &d, rep, err);
            if (st == DPB_OK)
                *acc += mult * log1p(-d);
            return st;
        }
        if (acct == DP_ACCT_GDP_CLT) {
            double mu;
            if (rel != DP_REL_ADD_OR_REMOVE)
                return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                                "seed 004 is proved for add_or_remove_one only");
            if (dp_thm52_mu(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds, &mu) != DPB_OK)
                return dpb_fail(err, DPB_EINVAL, "event",
                                "the Theorem 5.2 approximation needs noise_multiplier >= 0.04 "
                                "and rounds >= 2");
            *acc += mult * mu * mu;
            return DPB_OK;
        }
        break;
    case DP_EV_GAUSSIAN:
        if (acct == DP_ACCT_GDP_EXACT) {
            double s = sens1(ev->u.noise.noise_multiplier, rel);
            if (s == 0.0)
                dp_report_warn(rep, W_NOISELESS);
            *acc += s == 0.0 ? HUGE_VAL : mult / (s * s);
            return DPB_OK;
        }
        break;
    case DP_EV_SGLD:
    case DP_EV_PROACTIVE: {
        dpb_status st;
        dp_event *m = dp_map_to_dpsgd(ev, &st, err);
        if (m == NULL)
            return st;
        st = walk_scalar(m, rel, acct, mult, acc, rep, err);
        dp_event_free(m);
        return st;
    }
    case DP_EV_TREE_AGGREGATION:
        if (acct == DP_ACCT_GDP_EXACT) {
            double s;
            dpb_status st = tree_sigma(ev, rel, &s, err);
            if (st == DPB_OK && s > 0.0)
                *acc += mult / (s * s);
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
    return unsupported(err, kind_name(ev->kind), dp_accountant_name(acct));
}

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
    return rdp_infinite(pr, rep, W_NOISELESS);
}

static dpb_status walk_rdp_mech(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr,
                                dp_report *rep, dpb_error *err);

static double mech_max_divergence(const dp_event *ev, dp_relation rel);

static dpb_status walk_rdp(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr,
                           dp_report *rep, dpb_error *err)
{
    const double *o = pr->orders;
    const size_t no = pr->norders;
    double *rdp = pr->rdp;
    /* the order infinity: D_inf of a Laplace of scale b is 1/b, of an (eps, 0) event eps;
     * every other leaf has none here */
    if (ev->kind == DP_EV_LAPLACE) {
        double b = sens1(ev->u.noise.noise_multiplier, rel);
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
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        return walk_rdp(ev->u.self.event, rel, mult * (double)ev->u.self.count, pr, rep, err);
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            dpb_status st = walk_rdp(ev->u.composed.events[i], rel, mult, pr, rep, err);
            if (st != DPB_OK)
                return st;
        }
        return DPB_OK;
    case DP_EV_NO_OP:
        return DPB_OK;
    case DP_EV_NON_PRIVATE:
        return rdp_infinite(pr, rep, W_NONPRIVATE);
    case DP_EV_GAUSSIAN:
        if (ev->u.noise.noise_multiplier == 0.0)
            return rdp_noiseless(pr, rep);
        return rdp_add_gaussian(sens1(ev->u.noise.noise_multiplier, rel), mult, o, no, rdp);
    case DP_EV_LAPLACE:
        if (ev->u.noise.noise_multiplier == 0.0)
            return rdp_noiseless(pr, rep);
        return rdp_add_laplace(sens1(ev->u.noise.noise_multiplier, rel), mult, o, no, rdp);
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
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "an (epsilon, delta) event with delta > 0 has no RDP curve; use the pld "
                        "accountant, which composes it exactly");
    case DP_EV_POISSON_SAMPLED: {
        const dp_event *in = ev->u.sampled.event;
        double q = ev->u.sampled.sampling_probability;
        if (!add_remove_like(rel))
            return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                            "the rdp accountant takes Poisson sampling under add_or_remove_one "
                            "or replace_special; under replace_one use pld");
        if (in->kind == DP_EV_NO_OP || q == 0.0)
            return DPB_OK;
        if (in->kind == DP_EV_GAUSSIAN) {
            if (in->u.noise.noise_multiplier == 0.0)
                return rdp_noiseless(pr, rep);
            if (q == 1.0)
                return rdp_add_gaussian(in->u.noise.noise_multiplier, mult, o, no, rdp);
            return rdp_add_pg(pr, q, in->u.noise.noise_multiplier, mult, err);
        }
        return dpb_fail(err, DPB_EUNSUPPORTED, "event",
                        "the rdp accountant takes Poisson sampling of a GaussianDpEvent only; "
                        "use pld for a sampled LaplaceDpEvent");
    }
    case DP_EV_SHUFFLED_EPOCH:
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "Theorem 4.1's (0, delta) guarantee for a shuffled epoch has no RDP "
                        "curve; use thm41 or pld");
    case DP_EV_SGLD:
    case DP_EV_PROACTIVE: {
        dpb_status st;
        dp_event *m = dp_map_to_dpsgd(ev, &st, err);
        if (m == NULL)
            return st;
        st = walk_rdp(m, rel, mult, pr, rep, err);
        dp_event_free(m);
        return st;
    }
    case DP_EV_PNSGD:
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "projected noisy SGD's guarantees (seed 000) are (epsilon, delta) "
                        "profiles with no RDP curve (seed 001's (epsilon, delta) -> RDP step is "
                        "invalid); use pnsgd or pld");
    case DP_EV_TREE_AGGREGATION: {
        double s;
        dpb_status st = tree_sigma(ev, rel, &s, err);
        if (st != DPB_OK || s == 0.0)
            return st;
        /* the Gaussian's curve at the effective multiplier (sensitivity 1 under zero-out) */
        return rdp_add_gaussian(s, mult, o, no, rdp);
    }
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT: {
        double s;
        const dp_event *in = ev->u.fixed.event;
        if (rel != DP_REL_REPLACE)
            return refuse_relation(err, "SampledWithoutReplacementDpEvent", "replace_one");
        dpb_status st = inner_sigma(in, "SampledWithoutReplacementDpEvent", &s, err);
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
        st = smp_rdp_without_replacement_add((double)m / (double)n, s / 2.0, mult, o, no, rdp);
        return st == DPB_OK ? st : dpb_fail(err, st, "event", "a parameter is out of range");
    }
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_TRUNCATED_GAUSSIAN:
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "%s has no RDP curve here; use pld (the default)", kind_name(ev->kind));
    default:
        return walk_rdp_mech(ev, rel, mult, pr, rep, err);
    }
    return unsupported(err, kind_name(ev->kind), "rdp");
}

/* ---- rdp: dp_accounting's mechanism events (issue 16) ------------------------------------ */

/* The integer sensitivity of a discrete mechanism for the relation: replace-one moves a sum
 * by twice what add-or-remove does, as for the Gaussian and Laplace noise multipliers. */
static double sens_scale(dp_relation rel)
{
    return rel == DP_REL_REPLACE ? 2.0 : 1.0;
}

static dpb_status rr_relation(dpb_error *err)
{
    return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                    "randomized response is defined for replace_one (and replace_special), not "
                    "add_or_remove_one, as in dp_accounting");
}

/* Randomized response's pair: replace_one is R(x) against R(x'); any other relation but
 * add_or_remove_one (replace_special, as dp_accounting defines it) is R(x) against the
 * uniform output R(bot). */
static int rr_replace_one(dp_relation rel)
{
    return rel == DP_REL_REPLACE;
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
        if (rr_replace_one(rel))
            return rr_loss(p, k);
        double l1 = log1p((k - 1.0) * (1.0 - p)), l2 = -log(p);
        return dp_round_up(l1 > l2 ? l1 : l2, 1e-15);
    }
    case DP_EV_DISCRETE_LAPLACE: {
        double d = (double)ev->u.dlap.sensitivity * sens_scale(rel);
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

static dpb_status walk_rdp_mech(const dp_event *ev, dp_relation rel, double mult, dp_profile *pr,
                                dp_report *rep, dpb_error *err)
{
    const double *o = pr->orders;
    const size_t no = pr->norders;
    double *rdp = pr->rdp;
    switch (ev->kind) {
    case DP_EV_RANDOMIZED_RESPONSE: {
        if (rel == DP_REL_ADD_OR_REMOVE)
            return rr_relation(err);
        double p = ev->u.rr.noise_parameter, k = (double)ev->u.rr.num_buckets;
        if (p == 0.0 && k > 1.0)
            return rdp_noiseless(pr, rep);
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * (rr_replace_one(rel) ? rdp_rr_replace_one(p, k, o[i])
                                                  : rdp_rr_replace_special(p, k, o[i]));
        return DPB_OK;
    }
    case DP_EV_DISCRETE_GAUSSIAN: {
        /* rho-zCDP with rho = Delta^2/(2 sigma^2) (Canonne, Kamath, Steinke 2020, Prop. 5, for
         * an integer shift; coordinates add, so any dimension) */
        double s = ev->u.dgauss.sigma, d = ev->u.dgauss.sensitivity * sens_scale(rel);
        if (s == 0.0)
            return rdp_noiseless(pr, rep);
        double rho = dp_round_up(d * d / (2.0 * s * s), 1e-15);
        for (size_t i = 0; i < no; i++)
            rdp[i] += mult * dp_round_up(rho * o[i], 1e-15);
        return DPB_OK;
    }
    case DP_EV_DISCRETE_LAPLACE: {
        /* (a Delta)-DP: the loss a(|z - Delta| - |z|) lies in [-a Delta, a Delta] */
        double a = ev->u.dlap.noise_parameter, d = (double)ev->u.dlap.sensitivity * sens_scale(rel);
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
        dp_profile *sub = calloc(1, sizeof *sub);
        if (sub == NULL)
            return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        sub->acct = DP_ACCT_RDP;
        sub->orders = o;
        sub->norders = no;
        dpb_status st = walk_rdp(ev->u.rs.event, rel, 1.0, sub, rep, err);
        if (st == DPB_OK) {
            double *one = malloc(no * sizeof *one), *out = malloc(no * sizeof *out);
            if (one == NULL || out == NULL) {
                st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            } else {
                for (size_t i = 0; i < no; i++) {
                    sub->rdp_done[i] = sub->npg == 0 || o[i] == floor(o[i]);
                    one[i] = dp_profile_rdp_order(sub, i);
                }
                if (rdp_repeat_and_select(o, one, no, ev->u.rs.mean, ev->u.rs.shape, out) != DPB_OK)
                    st = dpb_fail(err, DPB_EINVAL, "event",
                                  "RepeatAndSelectDpEvent needs mean >= 1 and shape >= 0");
                else
                    for (size_t i = 0; i < no; i++)
                        rdp[i] += mult * out[i];
            }
            free(one);
            free(out);
        }
        dp_profile_release(sub);
        free(sub);
        return st;
    }
    default:
        break;
    }
    return unsupported(err, kind_name(ev->kind), "rdp");
}

/* ---- pld ------------------------------------------------------------------------------------ */

/* A pair of directions; when symmetric only d[0] is set. */
typedef struct {
    pld_pmf d[2];
    int symmetric;
} pair;

static void pair_free(pair *p)
{
    pld_free(&p->d[0]);
    if (!p->symmetric)
        pld_free(&p->d[1]);
}

static dpb_status pld_status(dpb_status st, dpb_error *err, double h)
{
    if (st == DPB_ELIMIT)
        return dpb_fail(err, st, "value_discretization_interval",
                        "the privacy-loss distribution needs more than %zu grid points at "
                        "value_discretization_interval %g: use a coarser interval",
                        PLD_MAX_POINTS, h);
    if (st == DPB_ENOMEM)
        return dpb_fail(err, st, NULL, "out of memory building the privacy-loss distribution");
    if (st == DPB_ECANCELLED)
        return st; /* the caller words it (account.c) */
    if (st != DPB_OK)
        return dpb_fail(err, st, "event", "a parameter is outside its domain");
    return st;
}

/* ---- shuffled epochs, exact (shuffle_exact.h) ----------------------------------------- */

static const char W_SHX[] = "shuffled epochs: seed 004's model (Appendix B: one uniformly placed "
                            "shifted coordinate among M Gaussians) computed numerically with a "
                            "pessimistic discretisation; every delta is an upper bound for that "
                            "model";

static void shx_conditions(dp_report *rep, const dp_event *ev)
{
    double sg = ev->u.shuffled.noise_multiplier, M = (double)ev->u.shuffled.rounds;
    dp_report_condition(rep, "exact_sigma_at_least_0_5",
                        "noise_multiplier >= 0.5 (the exact shuffled accountant's range)",
                        sg >= SHX_MIN_SIGMA, sg, SHX_MIN_SIGMA);
    dp_report_condition(rep, "exact_sigma_at_most_1000", "noise_multiplier <= 1000",
                        sg <= SHX_MAX_SIGMA, sg, SHX_MAX_SIGMA);
    dp_report_condition(rep, "exact_rounds_at_most_1e7", "1 <= M <= 1e7 rounds per epoch",
                        M >= 1.0 && M <= (double)SHX_MAX_ROUNDS, M, (double)SHX_MAX_ROUNDS);
}

static dpb_status shx_range_error(const dp_event *ev, dp_relation rel, dpb_error *err)
{
    if (rel != DP_REL_ADD_OR_REMOVE)
        return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                        "seed 004's model of shuffled DP-SGD is for the add_or_remove_one "
                        "(zero-out) relation only; replace_one is not covered");
    if (!(ev->u.shuffled.noise_multiplier >= SHX_MIN_SIGMA &&
          ev->u.shuffled.noise_multiplier <= SHX_MAX_SIGMA))
        return dpb_fail(err, DPB_ENOTCOVERED, "noise_multiplier",
                        "the exact shuffled accountant covers noise_multiplier %g to %g; got "
                        "%.6g (thm41 may apply)",
                        SHX_MIN_SIGMA, SHX_MAX_SIGMA, ev->u.shuffled.noise_multiplier);
    return dpb_fail(err, DPB_ENOTCOVERED, "rounds",
                    "the exact shuffled accountant covers 1 to %llu rounds per epoch; got %llu "
                    "(thm41 covers more)",
                    (unsigned long long)SHX_MAX_ROUNDS, (unsigned long long)ev->u.shuffled.rounds);
}

static dpb_status shx_status(dpb_status st, dpb_error *err)
{
    if (st == DPB_ENOMEM)
        return dpb_fail(err, st, NULL, "out of memory computing the shuffled epoch");
    if (st == DPB_ECANCELLED)
        return st; /* the caller words it (account.c) */
    return dpb_fail(err, st, "event", "the shuffled epoch's parameters are outside the range");
}

/* The PLD's leaf needs delta at every grid point (thousands): delta is evaluated at every
 * SHX_STRIDE-th point only and joined by chords in x = e^eps, which lie above it because
 * delta(x) = E[(L - x)+] is convex in x. */
#define SHX_STRIDE 16

typedef struct {
    shx_model *m;
    double H; /* SHX_STRIDE grid steps */
    size_t n;
    double *v[2]; /* memo of delta_10, delta_01 at k H (NAN: not yet) */
} shx_memo;

static double memo_at(shx_memo *c, int dir, size_t k)
{
    if (k >= c->n) {
        size_t n = c->n ? c->n : 256;
        while (n <= k)
            n *= 2;
        for (int d = 0; d < 2; d++) {
            double *v = realloc(c->v[d], n * sizeof *v);
            if (v == NULL)
                return 1.0; /* nothing known: the worst value */
            for (size_t i = c->n; i < n; i++)
                v[i] = NAN;
            c->v[d] = v;
        }
        c->n = n;
    }
    if (isnan(c->v[dir][k]))
        c->v[dir][k] =
            dir ? shx_delta01(c->m, (double)k * c->H) : shx_delta10(c->m, (double)k * c->H);
    return c->v[dir][k];
}

static double memo_delta(shx_memo *c, int dir, double eps)
{
    double kf = floor(eps / c->H);
    if (!(kf >= 0.0 && kf < 1e7))
        return dir ? shx_delta01(c->m, eps) : shx_delta10(c->m, eps);
    size_t k = (size_t)kf;
    double a = memo_at(c, dir, k);
    if (eps == kf * c->H)
        return a;
    double b = memo_at(c, dir, k + 1);
    double xa = exp(kf * c->H), xb = exp((kf + 1.0) * c->H), t = (exp(eps) - xa) / (xb - xa);
    if (!(t >= 0.0 && t <= 1.0))
        return dir ? shx_delta01(c->m, eps) : shx_delta10(c->m, eps);
    return (1.0 - t) * a + t * b;
}

static double shx10_fn(void *ctx, double eps)
{
    return memo_delta(ctx, 0, eps);
}

static double shx01_fn(void *ctx, double eps)
{
    return memo_delta(ctx, 1, eps);
}

/* Both directions of one epoch's PLD: remove (P = with the record: the shifted model, P1)
 * from delta_10, add from delta_01. */
static dpb_status shx_pld_pair(double sigma, uint64_t M, double h, pair *out, dp_report *rep,
                               dpb_error *err)
{
    shx_model *m;
    dpb_status st = shx_acquire(sigma, M, 0.0, &m);
    if (st != DPB_OK)
        return shx_status(st, err);
    out->symmetric = 0;
    shx_memo memo = {m, SHX_STRIDE * h, 0, {NULL, NULL}};
    st = pld_from_pair_profile(shx10_fn, shx01_fn, &memo, h, &out->d[PLD_REMOVE]);
    if (st == DPB_OK) {
        st = pld_from_pair_profile(shx01_fn, shx10_fn, &memo, h, &out->d[PLD_ADD]);
        if (st != DPB_OK)
            pld_free(&out->d[PLD_REMOVE]);
    }
    free(memo.v[0]);
    free(memo.v[1]);
    shx_release(m);
    if (st == DPB_OK)
        dp_report_warn(rep, W_SHX);
    return st == DPB_OK ? st : pld_status(st, err, h);
}

static dpb_status compose_terms(const dp_event *ev, dp_relation rel, double h, int strict,
                                pair *out, dp_report *rep, dpb_error *err);
static dpb_status walk_pld_mech(const dp_event *ev, dp_relation rel, double h, pair *out,
                                dp_report *rep, dpb_error *err);

/* A sampled leaf from its profile (symmetric: the bound holds for both orders). */
static dpb_status sampled_leaf(const dp_event *ev, dp_relation rel, double h, pair *out,
                               dp_report *rep, dpb_error *err)
{
    smp_profile pf;
    dpb_status st = sampled_profile(ev, rel, &pf, err);
    if (st != DPB_OK)
        return st;
    out->symmetric = 1;
    int convex = pf.tri_q == 0.0;
    for (size_t i = 0; i < pf.n; i++)
        if (pf.t[i].mua != pf.t[i].mub)
            convex = 0;
    smp_memo memo = {&pf, convex ? SMP_STRIDE * h : 0.0, 0, NULL};
    if (pf.n == 0 && pf.extra == 0.0)
        st = pld_identity(h, &out->d[0]);
    else
        st = pld_from_profile(smp_profile_fn, &memo, h, &out->d[0]);
    free(memo.v);
    smp_free(&pf);
    if (st == DPB_OK)
        dp_report_warn(rep, W_AJC);
    return pld_status(st, err, h);
}

/* One direction of a Poisson-sampled leaf (run on its own thread, pld_side, beside the other). */
typedef struct {
    int gauss;
    double q, s;
    int dir;
    double h;
    pld_pmf *out;
    dpb_status st;
} sampled_job;

static void sampled_job_run(void *p)
{
    sampled_job *j = p;
    j->st = j->gauss ? pld_sampled_gaussian(j->q, j->s, j->dir, j->h, j->out)
                     : pld_sampled_laplace(j->q, j->s, j->dir, j->h, j->out);
}

static dpb_status walk_pld(const dp_event *ev, dp_relation rel, double h, int strict, pair *out,
                           dp_report *rep, dpb_error *err)
{
    memset(out, 0, sizeof *out);
    out->symmetric = 1;
    if (dpb_cancelled())
        return DPB_ECANCELLED;
    dpb_status st;
    switch (ev->kind) {
    case DP_EV_NO_OP:
        return pld_status(pld_identity(h, &out->d[0]), err, h);
    case DP_EV_NON_PRIVATE:
        dp_report_warn(rep, W_NONPRIVATE);
        return pld_status(pld_non_private(h, &out->d[0]), err, h);
    case DP_EV_GAUSSIAN:
    case DP_EV_LAPLACE:
        if (ev->u.noise.noise_multiplier == 0.0) {
            dp_report_warn(rep, W_NOISELESS);
            return pld_status(pld_non_private(h, &out->d[0]), err, h);
        }
        if (ev->kind == DP_EV_GAUSSIAN)
            return pld_status(pld_gaussian(sens1(ev->u.noise.noise_multiplier, rel), h, &out->d[0]),
                              err, h);
        return pld_status(pld_laplace(sens1(ev->u.noise.noise_multiplier, rel), h, &out->d[0]), err,
                          h);
    case DP_EV_EPSILON_DELTA:
        return pld_status(
            pld_eps_delta(ev->u.epsdelta.epsilon, ev->u.epsdelta.delta, h, &out->d[0]), err, h);
    case DP_EV_SHUFFLED_EPOCH: {
        double sg = ev->u.shuffled.noise_multiplier;
        uint64_t M = ev->u.shuffled.rounds;
        if (rel == DP_REL_ADD_OR_REMOVE && shx_in_range(sg, M)) {
            shx_conditions(rep, ev);
            return shx_pld_pair(sg, M, h, out, rep, err);
        }
        if (strict) {
            if (rel == DP_REL_ADD_OR_REMOVE)
                shx_conditions(rep, ev);
            return shx_range_error(ev, rel, err);
        }
        double d;
        st = thm41_leaf(ev, rel, &d, rep, err);
        if (st != DPB_OK)
            return st;
        return pld_status(pld_eps_delta(0.0, d, h, &out->d[0]), err, h);
    }
    case DP_EV_SGLD:
    case DP_EV_PROACTIVE: {
        dp_event *m = dp_map_to_dpsgd(ev, &st, err);
        if (m == NULL)
            return st;
        st = walk_pld(m, rel, h, strict, out, rep, err);
        dp_event_free(m);
        return st;
    }
    case DP_EV_PNSGD: {
        dpb_error e = {0};
        if (pnsgd_check(&ev->u.pnsgd, &e) != DPB_OK)
            return dpb_fail(err, DPB_EINVAL, e.field, "%s", e.detail);
        dp_report_warn(rep, W_PNSGD);
        /* the seed 000 bound holds for both orders of the pair: a symmetric profile */
        return pld_status(pld_from_profile(pnsgd_profile_fn, (void *)&ev->u.pnsgd, h, &out->d[0]),
                          err, h);
    }
    case DP_EV_POISSON_SAMPLED: {
        const dp_event *in = ev->u.sampled.event;
        double q = ev->u.sampled.sampling_probability;
        if (in->kind == DP_EV_NO_OP || q == 0.0)
            return pld_status(pld_identity(h, &out->d[0]), err, h);
        if (rel == DP_REL_REPLACE) {
            if (in->kind == DP_EV_LAPLACE)
                return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                                "Poisson sampling of a LaplaceDpEvent is accounted for "
                                "add_or_remove_one or replace_special (as in dp_accounting)");
            return sampled_leaf(ev, rel, h, out, rep, err);
        }
        if (q == 1.0)
            return walk_pld(in, rel, h, strict, out, rep, err);
        if (in->kind != DP_EV_GAUSSIAN && in->kind != DP_EV_LAPLACE)
            return dpb_fail(err, DPB_EUNSUPPORTED, "event",
                            "Poisson sampling is accounted for a GaussianDpEvent or a "
                            "LaplaceDpEvent inside it, not a %s",
                            kind_name(in->kind));
        double s = in->u.noise.noise_multiplier;
        if (s == 0.0) { /* a sampled record released without noise */
            dp_report_warn(rep, W_NOISELESS);
            return pld_status(pld_non_private(h, &out->d[0]), err, h);
        }
        out->symmetric = 0;
        /* the two directions side by side (pld_side) */
        sampled_job job[2];
        for (int dir = 0; dir < 2; dir++)
            job[dir] = (sampled_job){in->kind == DP_EV_GAUSSIAN, q, s, dir, h, &out->d[dir], 0};
        pld_side side = {0};
        pld_side_run(&side, sampled_job_run, &job[1]);
        sampled_job_run(&job[0]);
        pld_side_join(&side);
        for (int dir = 0; dir < 2; dir++)
            if (job[dir].st != DPB_OK) {
                if (job[1 - dir].st == DPB_OK)
                    pld_free(&out->d[1 - dir]);
                return pld_status(job[dir].st, err, h);
            }
        return DPB_OK;
    }
    case DP_EV_SELF_COMPOSED:
    case DP_EV_COMPOSED:
        return compose_terms(ev, rel, h, strict, out, rep, err);
    case DP_EV_TREE_AGGREGATION: {
        double s;
        if ((st = tree_sigma(ev, rel, &s, err)) != DPB_OK)
            return st;
        return pld_status(s == 0.0 ? pld_identity(h, &out->d[0]) : pld_gaussian(s, h, &out->d[0]),
                          err, h);
    }
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_TRUNCATED_GAUSSIAN:
        return sampled_leaf(ev, rel, h, out, rep, err);
    default:
        return walk_pld_mech(ev, rel, h, out, rep, err);
    }
    return unsupported(err, kind_name(ev->kind), "pld");
}

/* ---- pld: dp_accounting's mechanism events (issue 16) ------------------------------------- */

static dpb_status pld_one(dpb_status st, pair *out, dpb_error *err, double h)
{
    out->symmetric = 1;
    return pld_status(st, err, h);
}

static dpb_status walk_pld_mech(const dp_event *ev, dp_relation rel, double h, pair *out,
                                dp_report *rep, dpb_error *err)
{
    switch (ev->kind) {
    case DP_EV_RANDOMIZED_RESPONSE: {
        if (rel == DP_REL_ADD_OR_REMOVE)
            return rr_relation(err);
        double p = ev->u.rr.noise_parameter, k = (double)ev->u.rr.num_buckets;
        if (k == 1.0 || p == 1.0)
            return pld_one(pld_identity(h, &out->d[0]), out, err, h);
        if (p == 0.0) {
            dp_report_warn(rep, W_NOISELESS);
            return pld_one(pld_non_private(h, &out->d[0]), out, err, h);
        }
        if (!rr_replace_one(rel)) {
            /* against the uniform output: remove (P = R(x)) has the loss ln(k(1-p) + p) with
             * mass 1 - p + p/k and ln p with (k - 1)p/k; add (P = R(bot)) has their negatives
             * with masses 1/k and (k - 1)/k */
            double l1 = log1p((k - 1.0) * (1.0 - p)), l2 = log(p);
            const double lr[2] = {l1, l2}, mr[2] = {1.0 - p + p / k, (k - 1.0) * p / k};
            const double la[2] = {-l1, -l2}, ma[2] = {1.0 / k, (k - 1.0) / k};
            out->symmetric = 0;
            dpb_status st = pld_atoms(lr, mr, 2, 0.0, h, &out->d[PLD_REMOVE]);
            if (st == DPB_OK && (st = pld_atoms(la, ma, 2, 0.0, h, &out->d[PLD_ADD])) != DPB_OK)
                pld_free(&out->d[PLD_REMOVE]);
            if (st != DPB_OK)
                out->symmetric = 1;
            return pld_status(st, err, h);
        }
        /* R(x) against R(x'): loss +L on x (mass 1 - p + p/k), -L on x' (p/k), 0 elsewhere;
         * the pair is symmetric */
        double L = rr_loss(p, k);
        const double loss[3] = {L, -L, 0.0};
        const double mass[3] = {1.0 - p + p / k, p / k, (k - 2.0) * p / k};
        return pld_one(pld_atoms(loss, mass, 3, 0.0, h, &out->d[0]), out, err, h);
    }
    case DP_EV_DISCRETE_LAPLACE: {
        double a = ev->u.dlap.noise_parameter;
        double d = (double)ev->u.dlap.sensitivity * sens_scale(rel);
        if (d == 0.0)
            return pld_one(pld_identity(h, &out->d[0]), out, err, h);
        if (a == 0.0) {
            dp_report_warn(rep, W_NOISELESS);
            return pld_one(pld_non_private(h, &out->d[0]), out, err, h);
        }
        /* P = DLap(a) at 0, Q at Delta: the loss a(|z - Delta| - |z|) is a Delta for z <= 0
         * (mass 1/(1 + e^-a)), -a Delta for z >= Delta (mass e^{-a Delta}/(1 + e^-a)) and
         * a(Delta - 2z) with mass tanh(a/2) e^{-a z} between; symmetric (z -> Delta - z) */
        size_t n = (size_t)d + 1, m = 0;
        double *loss = malloc(n * sizeof *loss), *mass = malloc(n * sizeof *mass);
        if (loss == NULL || mass == NULL) {
            free(loss);
            free(mass);
            return pld_status(DPB_ENOMEM, err, h);
        }
        double th = tanh(a / 2.0), l1e = log1p(exp(-a));
        loss[m] = a * d;
        mass[m++] = exp(-l1e);
        loss[m] = -a * d;
        mass[m++] = exp(-a * d - l1e);
        for (double z = 1.0; z < d; z += 1.0) {
            loss[m] = a * (d - 2.0 * z);
            mass[m++] = th * exp(-a * z);
        }
        dpb_status st = pld_atoms(loss, mass, m, 0.0, h, &out->d[0]);
        free(loss);
        free(mass);
        return pld_one(st, out, err, h);
    }
    case DP_EV_EXPONENTIAL:
    case DP_EV_PERMUTE_AND_FLIP:
        /* epsilon-DP: the dominating pair of pure epsilon-DP (as dp_accounting does for the
         * exponential mechanism) */
        if (ev->u.pure.epsilon == 0.0)
            return pld_one(pld_identity(h, &out->d[0]), out, err, h);
        return pld_one(pld_eps_delta(ev->u.pure.epsilon, 0.0, h, &out->d[0]), out, err, h);
    case DP_EV_MIXTURE_GAUSSIANS: {
        if (rel == DP_REL_REPLACE)
            return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                            "a MixtureOfGaussiansDpEvent is accounted for add_or_remove_one (and "
                            "replace_special), as dp_accounting does, not replace_one");
        int shift = 0;
        for (size_t i = 0; i < ev->u.mog.n; i++)
            if (ev->u.mog.c[i] > 0.0 && ev->u.mog.p[i] > 0.0)
                shift = 1;
        if (!shift)
            return pld_one(pld_identity(h, &out->d[0]), out, err, h);
        if (ev->u.mog.sigma == 0.0) {
            dp_report_warn(rep, W_NOISELESS);
            return pld_one(pld_non_private(h, &out->d[0]), out, err, h);
        }
        /* the probabilities as a distribution (the codec lets their sum be 1 within 1e-9) */
        double sum = 0.0, *w = malloc(ev->u.mog.n * sizeof *w);
        if (w == NULL)
            return pld_status(DPB_ENOMEM, err, h);
        for (size_t i = 0; i < ev->u.mog.n; i++)
            sum += ev->u.mog.p[i];
        for (size_t i = 0; i < ev->u.mog.n; i++)
            w[i] = ev->u.mog.p[i] / sum;
        out->symmetric = 0;
        dpb_status st = DPB_OK;
        for (int dir = 0; dir < 2 && st == DPB_OK; dir++) {
            st = pld_mixture_gaussian(ev->u.mog.sigma, ev->u.mog.c, w, ev->u.mog.n, dir, h,
                                      &out->d[dir]);
            if (st != DPB_OK && dir == 1)
                pld_free(&out->d[0]);
        }
        free(w);
        if (st != DPB_OK) {
            out->symmetric = 1;
            return pld_status(st, err, h);
        }
        return DPB_OK;
    }
    case DP_EV_ZCDP:
    case DP_EV_DISCRETE_GAUSSIAN:
    case DP_EV_REPEAT_AND_SELECT:
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "%s is accounted with rdp only (as dp_accounting does): use the rdp "
                        "accountant, or auto",
                        kind_name(ev->kind));
    default:
        break;
    }
    return unsupported(err, kind_name(ev->kind), "pld");
}

/*
 * Compositions are flattened into terms (a leaf pair and how often it occurs) and composed
 * all at once in the Fourier domain (pld_compose_many): one FFT per distinct leaf on one
 * size, from the Chernoff window of the whole composition. Unsampled Gaussians are not
 * discretised one by one: Gaussian mechanisms of multipliers sigma_i compose exactly to the
 * Gaussian mechanism of multiplier (sum_i count_i / sigma_i^2)^{-1/2} (their privacy losses
 * are N(mu_i^2/2, mu_i^2), whose convolution is N(mu^2/2, mu^2)), so they enter as that one
 * leaf (dp_accounting does the same within a self-composition), which is tighter than
 * composing their discretisations and never below the exact value.
 */
typedef struct {
    pair leaf;
    uint64_t count;
    int kind;    /* the Poisson-sampled leaf's inner kind (for merging equal leaves), or 0 */
    double q, s; /* its rate and multiplier */
} pld_item;

typedef struct {
    pld_item *it;
    size_t n, cap;
    size_t points;    /* grid points held by the items */
    double gauss_mu2; /* sum of count / sigma^2 over the unsampled Gaussians */
} pld_items;

/* Leaves held at once before they are composed: past this many grid points (128 MiB) the
 * items so far are composed into one, so a composition of many distinct mechanisms needs
 * bounded memory. */
#define PLD_TERMS_POINTS ((size_t)1 << 24)

static void items_free(pld_items *L)
{
    for (size_t i = 0; i < L->n; i++)
        pair_free(&L->it[i].leaf);
    free(L->it);
    L->it = NULL;
    L->n = L->cap = L->points = 0;
}

static dpb_status items_push(pld_items *L, pld_item *x)
{
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 8;
        pld_item *v = realloc(L->it, cap * sizeof *v);
        if (v == NULL)
            return DPB_ENOMEM;
        L->it = v;
        L->cap = cap;
    }
    L->it[L->n++] = *x;
    L->points += x->leaf.d[0].n + (x->leaf.symmetric ? 0 : x->leaf.d[1].n);
    return DPB_OK;
}

/* One direction of a composition (run on its own thread, pld_side, beside the other). */
typedef struct {
    const pld_term *t;
    size_t n;
    pld_pmf *out;
    dpb_status st;
} dir_job;

static void dir_job_run(void *p)
{
    dir_job *j = p;
    j->st = pld_compose_many(j->t, j->n, j->out);
}

/* Compositions nested in this thread's current one (a composed event inside a leaf): only the
 * outermost is tilted (pld_tilt_enter), the others are pieces read at every loss. */
static _Thread_local int compose_depth;

/* Compose the items of L (at least one) into out; L's items are consumed (freed) either way.
 * top: the outermost composition's result (not a piece of it). */
static dpb_status compose_items(pld_items *L, double h, int top, pair *out, dpb_error *err)
{
    dpb_status st = DPB_OK;
    memset(out, 0, sizeof *out);
    out->symmetric = 1;
    for (size_t i = 0; i < L->n; i++)
        if (!L->it[i].leaf.symmetric)
            out->symmetric = 0;
    if (L->n == 1 && L->it[0].count == 1) { /* one leaf once: it is the answer */
        *out = L->it[0].leaf;
        L->n = 0;
        items_free(L);
        return DPB_OK;
    }
    int ndir = out->symmetric ? 1 : 2;
    dir_job job[2];
    pld_term *t = malloc(2 * L->n * sizeof *t);
    if (t == NULL) {
        items_free(L);
        return pld_status(DPB_ENOMEM, err, h);
    }
    uint64_t most = 0;
    for (int dir = 0; dir < ndir; dir++) {
        for (size_t i = 0; i < L->n; i++) {
            t[dir * L->n + i] =
                (pld_term){&L->it[i].leaf.d[L->it[i].leaf.symmetric ? 0 : dir], L->it[i].count};
            most = L->it[i].count > most ? L->it[i].count : most;
        }
        job[dir] = (dir_job){t + dir * L->n, L->n, &out->d[dir], DPB_OK};
    }
    pld_tilt_at saved = pld_tilt_enter((pld_tilt_at){NAN, NAN, 0.0});
    if (top)
        pld_tilt_leave(saved);
    /* the directions side by side where each is more than a few dozen microseconds of work
     * (a thread costs about that) */
    pld_side side = {0};
    int apart = ndir == 2 && (L->points >= 8192 || most >= 16);
    if (apart)
        pld_side_run(&side, dir_job_run, &job[1]);
    dir_job_run(&job[0]);
    if (apart)
        pld_side_join(&side);
    else if (ndir == 2 && job[0].st == DPB_OK)
        dir_job_run(&job[1]);
    pld_tilt_leave(saved);
    free(t);
    items_free(L);
    for (int dir = 0; dir < ndir; dir++)
        if (job[dir].st != DPB_OK)
            st = job[dir].st;
    if (st != DPB_OK) {
        for (int dir = 0; dir < ndir; dir++)
            if (job[dir].st == DPB_OK && out->d[dir].p != NULL)
                pld_free(&out->d[dir]);
        memset(out, 0, sizeof *out);
        return pld_status(st, err, h);
    }
    return DPB_OK;
}

static dpb_status count_overflow(dpb_error *err)
{
    return dpb_fail(err, DPB_ELIMIT, "count",
                    "the composition repeats a mechanism more than 2^63 times");
}

static dpb_status collect_terms(const dp_event *ev, dp_relation rel, double h, int strict,
                                uint64_t mult, pld_items *L, dp_report *rep, dpb_error *err)
{
    if (dpb_cancelled())
        return DPB_ECANCELLED;
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED: {
        uint64_t m;
        if (ev->u.self.count == 0)
            return DPB_OK;
        if (__builtin_mul_overflow(mult, ev->u.self.count, &m) || m > ((uint64_t)1 << 63))
            return count_overflow(err);
        return collect_terms(ev->u.self.event, rel, h, strict, m, L, rep, err);
    }
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            dpb_status st =
                collect_terms(ev->u.composed.events[i], rel, h, strict, mult, L, rep, err);
            if (st != DPB_OK)
                return st;
        }
        return DPB_OK;
    case DP_EV_NO_OP:
        return DPB_OK;
    case DP_EV_GAUSSIAN: {
        double s = sens1(ev->u.noise.noise_multiplier, rel);
        if (s == 0.0)
            break; /* no noise: a leaf with all its loss at +infinity */
        if (!(s > 0.0) || !isfinite(s))
            return pld_status(DPB_EINVAL, err, h);
        L->gauss_mu2 += (double)mult / (s * s);
        return DPB_OK;
    }
    case DP_EV_TREE_AGGREGATION: { /* exactly a Gaussian mechanism */
        double s;
        dpb_status st = tree_sigma(ev, rel, &s, err);
        if (st == DPB_OK && s > 0.0)
            L->gauss_mu2 += (double)mult / (s * s);
        return st;
    }
    case DP_EV_SGLD:
    case DP_EV_PROACTIVE: {
        dpb_status st;
        dp_event *m = dp_map_to_dpsgd(ev, &st, err);
        if (m == NULL)
            return st;
        st = collect_terms(m, rel, h, strict, mult, L, rep, err);
        dp_event_free(m);
        return st;
    }
    case DP_EV_POISSON_SAMPLED: {
        const dp_event *in = ev->u.sampled.event;
        double q = ev->u.sampled.sampling_probability;
        if (add_remove_like(rel) && q == 1.0)
            return collect_terms(in, rel, h, strict, mult, L, rep, err);
        /* an equal sampled leaf met before: count it again */
        if (add_remove_like(rel) && q > 0.0 && q < 1.0 &&
            (in->kind == DP_EV_GAUSSIAN || in->kind == DP_EV_LAPLACE))
            for (size_t i = 0; i < L->n; i++)
                if (L->it[i].kind == (int)in->kind && L->it[i].q == q &&
                    L->it[i].s == in->u.noise.noise_multiplier) {
                    if (__builtin_add_overflow(L->it[i].count, mult, &L->it[i].count) ||
                        L->it[i].count > ((uint64_t)1 << 63))
                        return count_overflow(err);
                    return DPB_OK;
                }
        break;
    }
    default:
        break;
    }
    /* a leaf */
    pld_item x = {.count = mult};
    dpb_status st = walk_pld(ev, rel, h, strict, &x.leaf, rep, err);
    if (st != DPB_OK)
        return st;
    if (ev->kind == DP_EV_POISSON_SAMPLED && !x.leaf.symmetric) {
        x.kind = (int)ev->u.sampled.event->kind;
        x.q = ev->u.sampled.sampling_probability;
        x.s = ev->u.sampled.event->u.noise.noise_multiplier;
    }
    if (x.leaf.symmetric && x.leaf.d[0].n == 1 && x.leaf.d[0].lo == 0 && x.leaf.d[0].p[0] == 1.0 &&
        x.leaf.d[0].inf_mass == 0.0) { /* the identity: nothing to compose */
        pair_free(&x.leaf);
        return DPB_OK;
    }
    st = items_push(L, &x);
    if (st != DPB_OK) {
        pair_free(&x.leaf);
        return pld_status(st, err, h);
    }
    if (L->points > PLD_TERMS_POINTS && L->n > 1) {
        pld_item merged = {.count = 1};
        if ((st = compose_items(L, h, 0, &merged.leaf, err)) != DPB_OK)
            return st;
        if ((st = items_push(L, &merged)) != DPB_OK) {
            pair_free(&merged.leaf);
            return pld_status(st, err, h);
        }
    }
    return DPB_OK;
}

static dpb_status compose_terms(const dp_event *ev, dp_relation rel, double h, int strict,
                                pair *out, dp_report *rep, dpb_error *err)
{
    pld_items L = {0};
    compose_depth++;
    dpb_status st = collect_terms(ev, rel, h, strict, 1, &L, rep, err);
    compose_depth--;
    if (st == DPB_OK && L.gauss_mu2 > 0.0 && L.n == 0 && compose_depth == 0 &&
        isfinite(L.gauss_mu2)) {
        /* Gaussian mechanisms only, and the answer itself (not a piece of a larger
         * composition): their law exactly, answered in closed form (pld_gaussian_exact) */
        items_free(&L);
        memset(out, 0, sizeof *out);
        out->symmetric = 1;
        return pld_status(pld_gaussian_exact(sqrt(L.gauss_mu2), h, &out->d[0]), err, h);
    }
    if (st == DPB_OK && L.gauss_mu2 > 0.0) {
        pld_item g = {.count = 1};
        g.leaf.symmetric = 1;
        st = pld_gaussian(1.0 / sqrt(L.gauss_mu2), h, &g.leaf.d[0]);
        if (st == DPB_OK && (st = items_push(&L, &g)) != DPB_OK)
            pld_free(&g.leaf.d[0]);
        if (st != DPB_OK)
            st = pld_status(st, err, h);
    }
    if (st != DPB_OK) {
        items_free(&L);
        return st;
    }
    if (L.n == 0) {
        items_free(&L);
        memset(out, 0, sizeof *out);
        out->symmetric = 1;
        return pld_status(pld_identity(h, &out->d[0]), err, h);
    }
    return compose_items(&L, h, compose_depth == 0, out, err);
}

/* A requested grid too fine for the composition (more than PLD_MAX_POINTS points) is
 * coarsened by factors of 2, at most PLD_COARSEN times and never past 0.1, rather than
 * refused: every grid gives an upper bound, a coarser one a less tight one. The answer says
 * so (condition pld_grid: lhs the grid used, rhs the one requested). */
#define PLD_COARSEN 4
static const char W_COARSE[] = "the requested value_discretization_interval needs more than 2^23 "
                               "grid points for this composition: the answer is computed on a "
                               "coarser grid (condition pld_grid: lhs the grid used, rhs the one "
                               "requested); it is still an upper bound, a less tight one";

static dpb_status walk_pld_adaptive(const dp_event *ev, dp_relation rel, double h, int strict,
                                    pair *out, dp_report *rep, dpb_error *err)
{
    double hh = h;
    for (int i = 0;; i++) {
        dpb_status st = walk_pld(ev, rel, hh, strict, out, rep, err);
        if (st == DPB_ELIMIT && i < PLD_COARSEN && 2.0 * hh <= 0.1) {
            hh *= 2.0;
            continue;
        }
        if (st == DPB_OK && hh != h) {
            dp_report_condition(rep, "pld_grid",
                                "value_discretization_interval used (lhs), coarsened from the "
                                "requested one (rhs) so the distribution fits 2^23 grid points",
                                1, hh, h);
            dp_report_warn(rep, W_COARSE);
        }
        return st;
    }
}

/* ---- pnsgd -------------------------------------------------------------------------------- */

static double pnsgd_profile_fn(void *ctx, double eps)
{
    double d;
    return pnsgd_delta(ctx, eps, &d) == DPB_OK ? d : 1.0;
}

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
    dp_report_warn(rep, W_PNSGD);
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
    st = dp_profile_build(ev, rel, DP_ACCT_RDP, NULL, sub, &scratch, err);
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
static const char REF_RDP[] = "Renyi DP (Mironov 2017; Mironov, Talwar, Zhang 2019) at "
                              "dp_accounting's default orders, converted by Canonne, Kamath, "
                              "Steinke 2020 Prop. 12; and the order infinity (pure DP, "
                              "composed additively) when every mechanism has one";
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
    if (walk_scalar(ev, rel, DP_ACCT_THM41, 1.0, &acc, &scratch, &e) != DPB_OK)
        return HUGE_VAL;
    return acc == -HUGE_VAL ? 1.0 : dp_tv_delta_of_sum(acc);
}

static dpb_status shx_build(const dp_event *ev, dp_relation rel, const dp_options *opt,
                            dp_profile *pr, dp_report *rep, dpb_error *err)
{
    pr->thm41_tv = thm41_for(ev, rel);
    if (ev->kind != DP_EV_SHUFFLED_EPOCH) {
        /* epochs and mixtures: pessimistic PLDs with the exact epoch as the leaf */
        double h = opt && opt->pld_h > 0.0 ? opt->pld_h : PLD_DEFAULT_H;
        pair p;
        dpb_status st = walk_pld_adaptive(ev, rel, h, 1, &p, rep, err);
        if (st != DPB_OK)
            return st;
        pr->dir[0] = p.d[0];
        pr->dir[1] = p.d[1];
        pr->symmetric = p.symmetric;
        pr->use_pld = 1;
        return DPB_OK;
    }
    if (rel != DP_REL_ADD_OR_REMOVE)
        return shx_range_error(ev, rel, err);
    shx_conditions(rep, ev);
    if (!shx_in_range(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds))
        return shx_range_error(ev, rel, err);
    dpb_status st =
        shx_acquire(ev->u.shuffled.noise_multiplier, ev->u.shuffled.rounds, 0.0, &pr->shx);
    if (st != DPB_OK)
        return shx_status(st, err);
    dp_report_warn(rep, W_SHX);
    return DPB_OK;
}

void dp_profile_clear(dp_profile *pr)
{
    memset(pr, 0, offsetof(dp_profile, rdp));
    pr->rdp_inf = 0.0;
    memset((char *)pr + offsetof(dp_profile, npg), 0, sizeof *pr - offsetof(dp_profile, npg));
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
    dpb_status st = walk_rdp(ev, rel, 1.0, pr, rep, err);
    for (size_t i = 0; i < pr->norders; i++)
        pr->rdp_done[i] = pr->npg == 0 || pr->orders[i] == floor(pr->orders[i]);
    return st;
}

dpb_status dp_profile_build(const dp_event *ev, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, dp_profile *pr, dp_report *rep, dpb_error *err)
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
        st = walk_scalar(ev, rel, acct, 1.0, &acc, rep, err);
        pr->tv_delta = acc == -HUGE_VAL ? 1.0 : dp_tv_delta_of_sum(acc);
        return st;
    case DP_ACCT_GDP_CLT:
    case DP_ACCT_GDP_EXACT:
        rep->reference = acct == DP_ACCT_GDP_CLT ? REF_GDP_CLT : REF_GDP_EXACT;
        if (acct == DP_ACCT_GDP_CLT)
            dp_report_warn(rep, W_ESTIMATE);
        st = walk_scalar(ev, rel, acct, 1.0, &acc, rep, err);
        pr->mu2 = acc;
        pr->mu = sqrt(acc);
        return st;
    case DP_ACCT_RDP:
        rep->reference = REF_RDP;
        return dp_profile_build_rdp(ev, rel, NULL, 0, pr, rep, err);
    case DP_ACCT_PLD: {
        rep->reference = REF_PLD;
        double h = opt && opt->pld_h > 0.0 ? opt->pld_h : PLD_DEFAULT_H;
        pair p;
        st = walk_pld_adaptive(ev, rel, h, acct == DP_ACCT_SHUFFLE_EXACT, &p, rep, err);
        if (st == DPB_OK) {
            pr->dir[0] = p.d[0];
            pr->dir[1] = p.d[1];
            pr->symmetric = p.symmetric;
        }
        return st;
    }
    case DP_ACCT_SHUFFLE_EXACT:
        rep->reference = REF_SHX;
        return shx_build(ev, rel, opt, pr, rep, err);
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

/* The RDP of the whole profile at order index i, completing it on first use. */
static double rdp_at(dp_profile *pr, size_t i)
{
    if (!pr->rdp_done[i]) {
        for (size_t k = 0; k < pr->npg; k++)
            pr->rdp[i] +=
                pr->pg[k].mult * rdp_poisson_gaussian(pr->pg[k].q, pr->pg[k].sigma, pr->orders[i]);
        pr->rdp_done[i] = 1;
    }
    return pr->rdp[i];
}

double dp_profile_rdp_order(dp_profile *pr, size_t i)
{
    return rdp_at(pr, i);
}

/* The conversion minimised over the orders: want_eps = 1 gives eps for x = delta, 0 gives
 * delta for x = eps. Complete orders first; an incomplete (fractional) order a is evaluated
 * only if its lower bound beats the best so far: RDP is non-decreasing in the order, so the
 * total at the largest integer order below a (0 below 2) bounds it from below, and both
 * conversions increase with the RDP. Skipping never changes the minimum. Rounded up. */
static double rdp_lazy(dp_profile *pr, int want_eps, double x, double *order)
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
                        lb = pr->rdp[j];
                        break;
                    }
                double bound = want_eps ? rdp_eps_at(a, lb, x) : rdp_log_delta_at(a, lb, x);
                if (bound >= best)
                    continue;
                v = rdp_at(pr, i);
            }
            double c = want_eps ? rdp_eps_at(a, v, x) : rdp_log_delta_at(a, v, x);
            if (c < best) {
                best = c;
                best_order = a;
            }
        }
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
        d = rdp_lazy(pr, 0, eps, &order);
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
        e = rdp_lazy(pr, 1, delta, &order);
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
        return e;
    case DP_ACCT_AUTO:
        break;
    }
    return e;
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
