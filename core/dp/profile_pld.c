/*
 * profile_pld.c - the pld accountant's tree walk: leaves (profile_pld_leaf.c) flattened into
 * terms and composed at once (pld_compose_many_ctx), the outermost composition as the
 * caller's pld_ctx says (tilt, extended precision), the two directions side by side
 * (pld_side), and the grid coarsened where a composition would not fit. It calls
 * profile_pld_leaf.c, profile_common.c and the pld_*.c files; profile.c calls it.
 */
#include "profile_pld.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"
#include "shuffle_exact.h"

/* How a walk composes: its grid, strictness, how deeply the current composition is nested in
 * others (0: the outermost, the answer itself, the only one tilted) and the outermost's
 * pld_ctx (borrowed). Passed down the walk; a nested composition gets a copy one deeper. */
typedef struct {
    double h;
    int strict;
    int depth;
    const pld_ctx *pc;
} pld_walk;

static dpb_status compose_terms(const dp_event *ev, dp_relation rel, const pld_walk *w,
                                dp_pld_pair *out, dp_report *rep, dpb_error *err);
static dpb_status walk_pld(const dp_event *ev, dp_relation rel, const pld_walk *w, dp_pld_pair *out,
                           dp_report *rep, dpb_error *err);

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

/* Poisson sampling of a Gaussian sum (a nest of Gaussians is one) under replace_one: the
 * worst-case pair (pld_sampled_gaussian_replace; at q = 1 the Gaussian of sensitivity 2). */
static dpb_status walk_pld_sampled_replace(const dp_event *ev, double h, dp_pld_pair *out,
                                           dp_report *rep, dpb_error *err)
{
    double q = ev->u.sampled.sampling_probability, s;
    dpb_status st = dp_inner_sigma(ev->u.sampled.event, dp_kind_name(ev->kind), &s, err);
    if (st != DPB_OK)
        return st;
    dp_report_condition(rep, "poisson_replace_one_gaussian",
                        "Poisson sampling of a Gaussian sum under replace_one: the pair "
                        "(1-q)N(0) + qN(-C) against (1-q)N(0) + qN(C) is a worst case (Lebeda, "
                        "Regehr, Kamath, Steinke 2025, Proposition 13); sampling_probability <= 1",
                        q <= 1.0, q, 1.0);
    out->symmetric = 1;
    st = q == 1.0 ? pld_gaussian(s / 2.0, h, &out->d[0])
                  : pld_sampled_gaussian_replace(q, s, h, &out->d[0]);
    return dp_pld_status(st, err, h);
}

/* A Poisson-sampled event: its two directions built side by side (pld_side) where they
 * differ (add_or_remove_one); under replace_one the symmetric worst-case pair. */
static dpb_status walk_pld_sampled(const dp_event *ev, dp_relation rel, const pld_walk *w,
                                   dp_pld_pair *out, dp_report *rep, dpb_error *err)
{
    double h = w->h;
    const dp_event *in = ev->u.sampled.event;
    double q = ev->u.sampled.sampling_probability;
    if (in->kind == DP_EV_NO_OP || q == 0.0)
        return dp_pld_status(pld_identity(h, &out->d[0]), err, h);
    if (rel == DP_REL_REPLACE) {
        if (in->kind == DP_EV_LAPLACE)
            return dpb_fail(err, DPB_EUNSUPPORTED, "neighboring_relation",
                            "Poisson sampling of a LaplaceDpEvent is accounted for "
                            "add_or_remove_one or replace_special (as in dp_accounting)");
        return walk_pld_sampled_replace(ev, h, out, rep, err);
    }
    if (q == 1.0)
        return walk_pld(in, rel, w, out, rep, err);
    if (in->kind != DP_EV_GAUSSIAN && in->kind != DP_EV_LAPLACE)
        return dpb_fail(err, DPB_EUNSUPPORTED, "event",
                        "Poisson sampling is accounted for a GaussianDpEvent or a "
                        "LaplaceDpEvent inside it, not a %s",
                        dp_kind_name(in->kind));
    double s = in->u.noise.noise_multiplier;
    if (s == 0.0) { /* a sampled record released without noise */
        dp_report_warn(rep, dp_warn_noiseless);
        return dp_pld_status(pld_non_private(h, &out->d[0]), err, h);
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
            return dp_pld_status(job[dir].st, err, h);
        }
    return DPB_OK;
}

static dpb_status walk_pld(const dp_event *ev, dp_relation rel, const pld_walk *w, dp_pld_pair *out,
                           dp_report *rep, dpb_error *err)
{
    double h = w->h;
    memset(out, 0, sizeof *out);
    out->symmetric = 1;
    if (dpb_cancelled())
        return DPB_ECANCELLED;
    dpb_status st;
    switch (ev->kind) {
    case DP_EV_NO_OP:
        return dp_pld_status(pld_identity(h, &out->d[0]), err, h);
    case DP_EV_NON_PRIVATE:
        dp_report_warn(rep, dp_warn_nonprivate);
        return dp_pld_status(pld_non_private(h, &out->d[0]), err, h);
    case DP_EV_GAUSSIAN:
    case DP_EV_LAPLACE:
        if (ev->u.noise.noise_multiplier == 0.0) {
            dp_report_warn(rep, dp_warn_noiseless);
            return dp_pld_status(pld_non_private(h, &out->d[0]), err, h);
        }
        if (ev->kind == DP_EV_GAUSSIAN)
            return dp_pld_status(
                pld_gaussian(dp_sens1(ev->u.noise.noise_multiplier, rel), h, &out->d[0]), err, h);
        return dp_pld_status(
            pld_laplace(dp_sens1(ev->u.noise.noise_multiplier, rel), h, &out->d[0]), err, h);
    case DP_EV_EPSILON_DELTA:
        return dp_pld_status(
            pld_eps_delta(ev->u.epsdelta.epsilon, ev->u.epsdelta.delta, h, &out->d[0]), err, h);
    case DP_EV_SHUFFLED_EPOCH: {
        double sg = ev->u.shuffled.noise_multiplier;
        uint64_t M = ev->u.shuffled.rounds;
        if (rel == DP_REL_ADD_OR_REMOVE && shx_in_range(sg, M)) {
            dp_shx_conditions(rep, ev);
            return dp_shx_pld_pair(sg, M, h, out, rep, err);
        }
        if (w->strict) {
            if (rel == DP_REL_ADD_OR_REMOVE)
                dp_shx_conditions(rep, ev);
            return dp_shx_range_error(ev, rel, err);
        }
        double d;
        st = dp_thm41_leaf(ev, rel, &d, rep, err);
        if (st != DPB_OK)
            return st;
        return dp_pld_status(pld_eps_delta(0.0, d, h, &out->d[0]), err, h);
    }
    case DP_EV_SGLD:
    case DP_EV_PROACTIVE: {
        dp_event *m = dp_map_to_dpsgd(ev, &st, err);
        if (m == NULL)
            return st;
        st = walk_pld(m, rel, w, out, rep, err);
        dp_event_free(m);
        return st;
    }
    case DP_EV_PNSGD: {
        dpb_error e = {0};
        if (pnsgd_check(&ev->u.pnsgd, &e) != DPB_OK)
            return dpb_fail(err, DPB_EINVAL, e.field, "%s", e.detail);
        dp_report_warn(rep, dp_warn_pnsgd);
        /* the seed 000 bound holds for both orders of the pair: a symmetric profile */
        return dp_pld_status(
            pld_from_profile(dp_pnsgd_profile_fn, (void *)&ev->u.pnsgd, h, &out->d[0]), err, h);
    }
    case DP_EV_POISSON_SAMPLED:
        return walk_pld_sampled(ev, rel, w, out, rep, err);
    case DP_EV_SELF_COMPOSED:
    case DP_EV_COMPOSED:
        return compose_terms(ev, rel, w, out, rep, err);
    case DP_EV_TREE_AGGREGATION: {
        double s;
        if ((st = dp_tree_sigma(ev, rel, &s, err)) != DPB_OK)
            return st;
        return dp_pld_status(
            s == 0.0 ? pld_identity(h, &out->d[0]) : pld_gaussian(s, h, &out->d[0]), err, h);
    }
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_TRUNCATED_GAUSSIAN:
        return dp_pld_sampled_leaf(ev, rel, h, out, rep, err);
    default:
        return dp_walk_pld_mech(ev, rel, h, out, rep, err);
    }
    return dp_unsupported(err, dp_kind_name(ev->kind), "pld");
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
    dp_pld_pair leaf;
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
        dp_pld_pair_free(&L->it[i].leaf);
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
    const pld_ctx *cx;
    const pld_term *t;
    size_t n;
    pld_pmf *out;
    dpb_status st;
} dir_job;

static void dir_job_run(void *p)
{
    dir_job *j = p;
    j->st = pld_compose_many_ctx(j->cx, j->t, j->n, j->out);
}

/* Compose the items of L (at least one) into out; L's items are consumed (freed) either way.
 * top: the outermost composition's result (not a piece of it), composed as w->pc says; the
 * others (a composed event inside a leaf) are pieces read at every loss: not tilted. */
static dpb_status compose_items(pld_items *L, const pld_walk *w, int top, dp_pld_pair *out,
                                dpb_error *err)
{
    double h = w->h;
    pld_ctx piece = {{NAN, NAN, 0.0}, w->pc->ext};
    const pld_ctx *cx = top ? w->pc : &piece;
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
        return dp_pld_status(DPB_ENOMEM, err, h);
    }
    uint64_t most = 0;
    for (int dir = 0; dir < ndir; dir++) {
        for (size_t i = 0; i < L->n; i++) {
            t[dir * L->n + i] =
                (pld_term){&L->it[i].leaf.d[L->it[i].leaf.symmetric ? 0 : dir], L->it[i].count};
            most = L->it[i].count > most ? L->it[i].count : most;
        }
        job[dir] = (dir_job){cx, t + dir * L->n, L->n, &out->d[dir], DPB_OK};
    }
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
        return dp_pld_status(st, err, h);
    }
    return DPB_OK;
}

static dpb_status count_overflow(dpb_error *err)
{
    return dpb_fail(err, DPB_ELIMIT, "count",
                    "the composition repeats a mechanism more than 2^63 times");
}

static dpb_status collect_terms(const dp_event *ev, dp_relation rel, const pld_walk *w,
                                uint64_t mult, pld_items *L, dp_report *rep, dpb_error *err)
{
    double h = w->h;
    if (dpb_cancelled())
        return DPB_ECANCELLED;
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED: {
        uint64_t m;
        if (ev->u.self.count == 0)
            return DPB_OK;
        if (__builtin_mul_overflow(mult, ev->u.self.count, &m) || m > ((uint64_t)1 << 63))
            return count_overflow(err);
        return collect_terms(ev->u.self.event, rel, w, m, L, rep, err);
    }
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++) {
            dpb_status st = collect_terms(ev->u.composed.events[i], rel, w, mult, L, rep, err);
            if (st != DPB_OK)
                return st;
        }
        return DPB_OK;
    case DP_EV_NO_OP:
        return DPB_OK;
    case DP_EV_GAUSSIAN: {
        double s = dp_sens1(ev->u.noise.noise_multiplier, rel);
        if (s == 0.0)
            break; /* no noise: a leaf with all its loss at +infinity */
        if (!(s > 0.0) || !isfinite(s))
            return dp_pld_status(DPB_EINVAL, err, h);
        L->gauss_mu2 += (double)mult / (s * s);
        return DPB_OK;
    }
    case DP_EV_TREE_AGGREGATION: { /* exactly a Gaussian mechanism */
        double s;
        dpb_status st = dp_tree_sigma(ev, rel, &s, err);
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
        st = collect_terms(m, rel, w, mult, L, rep, err);
        dp_event_free(m);
        return st;
    }
    case DP_EV_POISSON_SAMPLED: {
        const dp_event *in = ev->u.sampled.event;
        double q = ev->u.sampled.sampling_probability;
        if (dp_add_remove_like(rel) && q == 1.0)
            return collect_terms(in, rel, w, mult, L, rep, err);
        /* an equal sampled leaf met before: count it again */
        if (dp_add_remove_like(rel) && q > 0.0 && q < 1.0 &&
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
    dpb_status st = walk_pld(ev, rel, w, &x.leaf, rep, err);
    if (st != DPB_OK)
        return st;
    if (ev->kind == DP_EV_POISSON_SAMPLED && !x.leaf.symmetric) {
        x.kind = (int)ev->u.sampled.event->kind;
        x.q = ev->u.sampled.sampling_probability;
        x.s = ev->u.sampled.event->u.noise.noise_multiplier;
    }
    if (x.leaf.symmetric && x.leaf.d[0].n == 1 && x.leaf.d[0].lo == 0 && x.leaf.d[0].p[0] == 1.0 &&
        x.leaf.d[0].inf_mass == 0.0) { /* the identity: nothing to compose */
        dp_pld_pair_free(&x.leaf);
        return DPB_OK;
    }
    st = items_push(L, &x);
    if (st != DPB_OK) {
        dp_pld_pair_free(&x.leaf);
        return dp_pld_status(st, err, h);
    }
    if (L->points > PLD_TERMS_POINTS && L->n > 1) {
        pld_item merged = {.count = 1};
        if ((st = compose_items(L, w, 0, &merged.leaf, err)) != DPB_OK)
            return st;
        if ((st = items_push(L, &merged)) != DPB_OK) {
            dp_pld_pair_free(&merged.leaf);
            return dp_pld_status(st, err, h);
        }
    }
    return DPB_OK;
}

static dpb_status compose_terms(const dp_event *ev, dp_relation rel, const pld_walk *w,
                                dp_pld_pair *out, dp_report *rep, dpb_error *err)
{
    double h = w->h;
    pld_items L = {0};
    pld_walk in = *w; /* the compositions inside this one's terms are pieces of it */
    in.depth++;
    dpb_status st = collect_terms(ev, rel, &in, 1, &L, rep, err);
    if (st == DPB_OK && L.gauss_mu2 > 0.0 && L.n == 0 && w->depth == 0 && isfinite(L.gauss_mu2)) {
        /* Gaussian mechanisms only, and the answer itself (not a piece of a larger
         * composition): their law exactly, answered in closed form (pld_gaussian_exact) */
        items_free(&L);
        memset(out, 0, sizeof *out);
        out->symmetric = 1;
        return dp_pld_status(pld_gaussian_exact(sqrt(L.gauss_mu2), h, &out->d[0]), err, h);
    }
    if (st == DPB_OK && L.gauss_mu2 > 0.0) {
        pld_item g = {.count = 1};
        g.leaf.symmetric = 1;
        st = pld_gaussian(1.0 / sqrt(L.gauss_mu2), h, &g.leaf.d[0]);
        if (st == DPB_OK && (st = items_push(&L, &g)) != DPB_OK)
            pld_free(&g.leaf.d[0]);
        if (st != DPB_OK)
            st = dp_pld_status(st, err, h);
    }
    if (st != DPB_OK) {
        items_free(&L);
        return st;
    }
    if (L.n == 0) {
        items_free(&L);
        memset(out, 0, sizeof *out);
        out->symmetric = 1;
        return dp_pld_status(pld_identity(h, &out->d[0]), err, h);
    }
    return compose_items(&L, w, w->depth == 0, out, err);
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

dpb_status dp_walk_pld_adaptive(const dp_event *ev, dp_relation rel, double h, int strict,
                                const pld_ctx *pc, dp_pld_pair *out, dp_report *rep, dpb_error *err)
{
    static const pld_ctx plain = {{NAN, NAN, 0.0}, 0};
    double hh = h;
    for (int i = 0;; i++) {
        pld_walk w = {hh, strict, 0, pc != NULL ? pc : &plain};
        dpb_status st = walk_pld(ev, rel, &w, out, rep, err);
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
