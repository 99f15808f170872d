/*
 * profile_pld_leaf.c - the pld accountant's leaves (profile_pld.h): sampled mechanisms bounded
 * by advanced joint convexity, the exact shuffled epoch (shuffle_exact.h), and dp_accounting's
 * mechanism events, each as a pair of PLDs (remove, add). It calls profile_common.c and the
 * pld_*.c files (leaves only, no composition); profile_pld.c and profile.c call it.
 */
#include "profile_pld.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "normal.h"
#include "sampling.h"
#include "shuffle.h"
#include "shuffle_exact.h"

/* The advanced-joint-convexity profile of a sampled leaf (sampling.h). */
static dpb_status sampled_profile(const dp_event *ev, dp_relation rel, smp_profile *pf,
                                  dpb_error *err)
{
    double s;
    dpb_status st;
    const char *cls = dp_kind_name(ev->kind);
    switch (ev->kind) {
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
        if (rel != DP_REL_REPLACE)
            return dp_refuse_relation(err, cls, "replace_one");
        if ((st = dp_inner_sigma(ev->u.fixed.event, cls, &s, err)) != DPB_OK)
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

/* The leaves below evaluate a profile at every grid point (thousands) where it is convex in
 * x = e^eps: at every STRIDE-th point only, joined by chords in x, which lie above it. A memo
 * of nb values at each knot k H (k = 0, 1, ...), grown on demand, NAN until computed. */
typedef struct {
    size_t n, nb; /* knots held; values a knot */
    double *v;    /* v[k nb + j] (owned) */
} knot_memo;

/* The slot of value j at knot k, the memo grown to hold it; NULL when out of memory. */
static double *knot_slot(knot_memo *c, size_t k, size_t j)
{
    if (k >= c->n) {
        size_t n = c->n ? c->n : 256;
        while (n <= k)
            n *= 2;
        double *v = realloc(c->v, n * c->nb * sizeof *v);
        if (v == NULL)
            return NULL;
        for (size_t i = c->n * c->nb; i < n * c->nb; i++)
            v[i] = NAN;
        c->v = v;
        c->n = n;
    }
    return &c->v[k * c->nb + j];
}

/* Where eps lies on the chord from knot kf H to (kf + 1) H, in x = e^eps (in [0, 1] when it
 * lies between them). */
static double chord_t(double eps, double kf, double H)
{
    double xa = exp(kf * H), xb = exp((kf + 1.0) * H);
    return (exp(eps) - xa) / (xb - xa);
}

/* The PLD's leaf evaluates the profile at every grid point. Where every term has mu_a =
 * mu_b, each term is g H_{1 + (x - 1)/g}(B || A) with x = e^e', the hockey-stick of a fixed
 * pair at an order affine in x, hence convex in x (as is their weighted sum): each of the
 * profile's bounds (smp_delta_alt) is evaluated at every SMP_STRIDE-th grid point only and
 * joined by chords in x, which lie above it; the smallest chord is taken. Otherwise
 * (split terms) every point is evaluated. */
#define SMP_STRIDE 16
#define SMP_NB (1 + SMP_ALT)

typedef struct {
    const smp_profile *pf;
    double H;     /* SMP_STRIDE grid steps; 0: no chords */
    knot_memo kn; /* each bound at k H: value 1 + alt (SMP_NB a knot) */
} smp_memo;

static double smp_memo_at(smp_memo *c, size_t k, int alt)
{
    double *slot = knot_slot(&c->kn, k, (size_t)(1 + alt));
    if (slot == NULL)
        return 1.0; /* nothing known: the worst value */
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
    double t = chord_t(eps, kf, c->H);
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
                            "Barthe, Gaboardi 2018, Theorem 2) over Gaussian components: an upper "
                            "bound, which may be looser than the pair dp_accounting uses";

/* ---- pld ------------------------------------------------------------------------------------ */

void dp_pld_pair_free(dp_pld_pair *p)
{
    pld_free(&p->d[0]);
    if (!p->symmetric)
        pld_free(&p->d[1]);
}

dpb_status dp_pld_status(dpb_status st, dpb_error *err, double h)
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

const char dp_warn_shx[] = "shuffled epochs: seed 004's model (Appendix B: one uniformly placed "
                           "shifted coordinate among M Gaussians) computed numerically with a "
                           "pessimistic discretisation; every delta is an upper bound for that "
                           "model";

void dp_shx_conditions(dp_report *rep, const dp_event *ev)
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

dpb_status dp_shx_range_error(const dp_event *ev, dp_relation rel, dpb_error *err)
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

dpb_status dp_shx_status(dpb_status st, dpb_error *err)
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
    double H;     /* SHX_STRIDE grid steps */
    knot_memo kn; /* delta_10 (value 0) and delta_01 (value 1) at k H */
} shx_memo;

static double memo_at(shx_memo *c, int dir, size_t k)
{
    double *slot = knot_slot(&c->kn, k, (size_t)dir);
    if (slot == NULL)
        return 1.0; /* nothing known: the worst value */
    if (isnan(*slot))
        *slot = dir ? shx_delta01(c->m, (double)k * c->H) : shx_delta10(c->m, (double)k * c->H);
    return *slot;
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
    double t = chord_t(eps, kf, c->H);
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
dpb_status dp_shx_pld_pair(double sigma, uint64_t M, double h, dp_pld_pair *out, dp_report *rep,
                           dpb_error *err)
{
    shx_model *m;
    dpb_status st = shx_acquire(sigma, M, 0.0, &m);
    if (st != DPB_OK)
        return dp_shx_status(st, err);
    out->symmetric = 0;
    shx_memo memo = {m, SHX_STRIDE * h, {0, 2, NULL}};
    st = pld_from_pair_profile(shx10_fn, shx01_fn, &memo, h, &out->d[PLD_REMOVE]);
    if (st == DPB_OK) {
        st = pld_from_pair_profile(shx01_fn, shx10_fn, &memo, h, &out->d[PLD_ADD]);
        if (st != DPB_OK)
            pld_free(&out->d[PLD_REMOVE]);
    }
    free(memo.kn.v);
    shx_release(m);
    if (st == DPB_OK)
        dp_report_warn(rep, dp_warn_shx);
    return st == DPB_OK ? st : dp_pld_status(st, err, h);
}

/* A sampled leaf from its profile (symmetric: the bound holds for both orders). */
dpb_status dp_pld_sampled_leaf(const dp_event *ev, dp_relation rel, double h, dp_pld_pair *out,
                               dp_report *rep, dpb_error *err)
{
    smp_profile pf;
    dpb_status st = sampled_profile(ev, rel, &pf, err);
    if (st != DPB_OK)
        return st;
    out->symmetric = 1;
    int convex = 1;
    for (size_t i = 0; i < pf.n; i++)
        if (pf.t[i].mua != pf.t[i].mub)
            convex = 0;
    smp_memo memo = {&pf, convex ? SMP_STRIDE * h : 0.0, {0, SMP_NB, NULL}};
    if (pf.n == 0 && pf.extra == 0.0)
        st = pld_identity(h, &out->d[0]);
    else
        st = pld_from_profile(smp_profile_fn, &memo, h, &out->d[0]);
    free(memo.kn.v);
    smp_free(&pf);
    if (st == DPB_OK)
        dp_report_warn(rep, W_AJC);
    return dp_pld_status(st, err, h);
}

/* ---- pld: dp_accounting's mechanism events (issue 16) ------------------------------------- */

static dpb_status pld_one(dpb_status st, dp_pld_pair *out, dpb_error *err, double h)
{
    out->symmetric = 1;
    return dp_pld_status(st, err, h);
}

/* The discrete Laplace mechanism DLap(a) of sensitivity d >= 1 (symmetric), into out.
 * P = DLap(a) at 0, Q at Delta: the loss a(|z - Delta| - |z|) is a Delta for z <= 0 (mass
 * 1/(1 + e^-a)), -a Delta for z >= Delta (mass e^{-a Delta}/(1 + e^-a)) and a(Delta - 2z)
 * with mass tanh(a/2) e^{-a z} between; symmetric (z -> Delta - z). */
static dpb_status dlap_leaf(double a, double d, double h, dp_pld_pair *out, dpb_error *err)
{
    size_t n = (size_t)d + 1, m = 0;
    double *loss = malloc(n * sizeof *loss), *mass = malloc(n * sizeof *mass);
    if (loss == NULL || mass == NULL) {
        free(loss);
        free(mass);
        return dp_pld_status(DPB_ENOMEM, err, h);
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

dpb_status dp_walk_pld_mech(const dp_event *ev, dp_relation rel, double h, dp_pld_pair *out,
                            dp_report *rep, dpb_error *err)
{
    switch (ev->kind) {
    case DP_EV_RANDOMIZED_RESPONSE: {
        if (rel == DP_REL_ADD_OR_REMOVE)
            return dp_rr_relation(err);
        double p = ev->u.rr.noise_parameter, k = (double)ev->u.rr.num_buckets;
        if (k == 1.0 || p == 1.0)
            return pld_one(pld_identity(h, &out->d[0]), out, err, h);
        if (p == 0.0) {
            dp_report_warn(rep, dp_warn_noiseless);
            return pld_one(pld_non_private(h, &out->d[0]), out, err, h);
        }
        if (!dp_rr_replace_one(rel)) {
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
            return dp_pld_status(st, err, h);
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
        double d = (double)ev->u.dlap.sensitivity * dp_sens_scale(rel);
        if (d == 0.0)
            return pld_one(pld_identity(h, &out->d[0]), out, err, h);
        if (a == 0.0) {
            dp_report_warn(rep, dp_warn_noiseless);
            return pld_one(pld_non_private(h, &out->d[0]), out, err, h);
        }
        return dlap_leaf(a, d, h, out, err);
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
            dp_report_warn(rep, dp_warn_noiseless);
            return pld_one(pld_non_private(h, &out->d[0]), out, err, h);
        }
        /* the probabilities as a distribution (the codec lets their sum be 1 within 1e-9) */
        double sum = 0.0, *w = malloc(ev->u.mog.n * sizeof *w);
        if (w == NULL)
            return dp_pld_status(DPB_ENOMEM, err, h);
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
            return dp_pld_status(st, err, h);
        }
        return DPB_OK;
    }
    case DP_EV_ZCDP:
    case DP_EV_DISCRETE_GAUSSIAN:
    case DP_EV_REPEAT_AND_SELECT:
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "%s is accounted with rdp only (as dp_accounting does): use the rdp "
                        "accountant, or auto",
                        dp_kind_name(ev->kind));
    default:
        break;
    }
    return dp_unsupported(err, dp_kind_name(ev->kind), "pld");
}

/* ---- pure DP: the largest privacy loss (pld's answer at delta = 0) ------------------------- */

/* x rounded up past its rounding error (k ulps of a libm result or an operation). */
static double up_ulps(double x, int k)
{
    for (int i = 0; i < k && isfinite(x) && x > 0.0; i++)
        x = nextafter(x, HUGE_VAL);
    return x;
}

/* The essential supremum of one leaf's loss in each direction (remove, add), exactly or
 * rounded up; +HUGE_VAL where it is unbounded or not known here. */
static void leaf_max_loss(const dp_event *ev, dp_relation rel, double m[2])
{
    m[0] = m[1] = HUGE_VAL;
    switch (ev->kind) {
    case DP_EV_NO_OP:
        m[0] = m[1] = 0.0;
        return;
    case DP_EV_LAPLACE: {
        double b = dp_sens1(ev->u.noise.noise_multiplier, rel);
        if (b > 0.0)
            m[0] = m[1] = up_ulps(1.0 / b, 1);
        return;
    }
    case DP_EV_EPSILON_DELTA:
        if (ev->u.epsdelta.delta == 0.0)
            m[0] = m[1] = ev->u.epsdelta.epsilon;
        return;
    case DP_EV_EXPONENTIAL:
    case DP_EV_PERMUTE_AND_FLIP:
        m[0] = m[1] = ev->u.pure.epsilon;
        return;
    case DP_EV_RANDOMIZED_RESPONSE: {
        double p = ev->u.rr.noise_parameter, k = (double)ev->u.rr.num_buckets;
        if (rel == DP_REL_ADD_OR_REMOVE || p == 0.0)
            return;
        if (k == 1.0 || p == 1.0) {
            m[0] = m[1] = 0.0;
        } else if (dp_rr_replace_one(rel)) {
            m[0] = m[1] = up_ulps(rr_loss(p, k), 4);
        } else { /* against the uniform output: the atoms of dp_walk_pld_mech */
            m[0] = up_ulps(log1p((k - 1.0) * (1.0 - p)), 4);
            m[1] = up_ulps(-log(p), 4);
        }
        return;
    }
    case DP_EV_DISCRETE_LAPLACE: {
        double a = ev->u.dlap.noise_parameter;
        double d = (double)ev->u.dlap.sensitivity * dp_sens_scale(rel);
        if (d == 0.0)
            m[0] = m[1] = 0.0;
        else if (a > 0.0)
            m[0] = m[1] = up_ulps(a * d, 1);
        return;
    }
    case DP_EV_POISSON_SAMPLED: {
        const dp_event *in = ev->u.sampled.event;
        double q = ev->u.sampled.sampling_probability;
        if (q == 0.0 || in->kind == DP_EV_NO_OP) {
            m[0] = m[1] = 0.0;
        } else if (q == 1.0 && rel != DP_REL_REPLACE) {
            dp_pld_max_loss(in, rel, m);
        } else if (in->kind == DP_EV_LAPLACE && rel != DP_REL_REPLACE &&
                   in->u.noise.noise_multiplier > 0.0) {
            /* remove: ln(1 - q + q e^{1/b}); add: -ln(1 - q + q e^{-1/b}) (pld_sampled_laplace) */
            double b = in->u.noise.noise_multiplier;
            m[0] = up_ulps(log1p(q * expm1(1.0 / b)), 6);
            m[1] = up_ulps(-log1p(q * expm1(-1.0 / b)), 6);
        }
        return;
    }
    default:
        return;
    }
}

void dp_pld_max_loss(const dp_event *ev, dp_relation rel, double m[2])
{
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED: {
        double c = (double)ev->u.self.count;
        if (c == 0.0) {
            m[0] = m[1] = 0.0;
            return;
        }
        dp_pld_max_loss(ev->u.self.event, rel, m);
        for (int d = 0; d < 2; d++)
            m[d] = up_ulps(m[d] * c, 1);
        return;
    }
    case DP_EV_COMPOSED:
        m[0] = m[1] = 0.0;
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            double t[2];
            dp_pld_max_loss(ev->u.composed.events[i], rel, t);
            for (int d = 0; d < 2; d++)
                m[d] = up_ulps(m[d] + t[d], 1);
        }
        return;
    default:
        leaf_max_loss(ev, rel, m);
        return;
    }
}
