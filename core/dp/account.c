/*
 * account.c - accountant dispatch: resolve "auto", build a profile (profile.c), answer
 * delta(eps), eps(delta), curves, and calibrations that never overshoot.
 */
#include "account.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "normal.h"
#include "profile.h"
#include "shuffle.h"
#include "shuffle_exact.h"

static const char *const REL_NAMES[] = {"add_or_remove_one", "replace_one", "replace_special"};
#define N_REL (sizeof REL_NAMES / sizeof REL_NAMES[0])
static const char *const ACCT_NAMES[] = {"auto", "thm41", "gdp_clt",   "gdp_exact",    "rdp",
                                         "pld",  "pnsgd", "proactive", "shuffle_exact"};
#define N_ACCT (sizeof ACCT_NAMES / sizeof ACCT_NAMES[0])

const char *dp_relation_name(dp_relation r)
{
    return (unsigned)r < N_REL ? REL_NAMES[r] : "unknown";
}

int dp_relation_parse(const char *s, dp_relation *r)
{
    for (unsigned i = 0; i < N_REL; i++)
        if (strcmp(s, REL_NAMES[i]) == 0) {
            *r = (dp_relation)i;
            return 0;
        }
    return -1;
}

const char *dp_accountant_name(dp_accountant a)
{
    return (unsigned)a < N_ACCT ? ACCT_NAMES[a] : "unknown";
}

int dp_accountant_parse(const char *s, dp_accountant *a)
{
    for (unsigned i = 0; i < N_ACCT; i++)
        if (strcmp(s, ACCT_NAMES[i]) == 0) {
            *a = (dp_accountant)i;
            return 0;
        }
    return -1;
}

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
    case DP_EV_LAPLACE:
    case DP_EV_EPSILON_DELTA:
    case DP_EV_POISSON_SAMPLED:
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
static dp_accountant resolve_auto(const dp_event *ev)
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
static dpb_status cancelled(dpb_error *err)
{
    return dpb_fail(err, DPB_ECANCELLED, NULL,
                    "the computation was stopped before it finished: it ran past the deadline "
                    "set for it");
}

static dpb_status build(const dp_event *ev, dp_relation rel, dp_accountant acct,
                        const dp_options *opt, dp_profile *pr, dp_report *rep, dpb_error *err)
{
    memset(rep, 0, sizeof *rep);
    dp_profile_clear(pr);
    if (ev == NULL)
        return dpb_fail(err, DPB_EINVAL, "event", "an event is required");
    if (opt && opt->pld_h != 0.0 && !(opt->pld_h >= 1e-6 && opt->pld_h <= 0.1))
        return dpb_fail(err, DPB_EINVAL, "value_discretization_interval",
                        "value_discretization_interval must lie in [1e-6, 0.1]");
    if (acct == DP_ACCT_AUTO)
        acct = resolve_auto(ev);
    if (dpb_cancelled())
        return cancelled(err);
    dpb_status st = dp_profile_build(ev, rel, acct, opt, pr, rep, err);
    if (st != DPB_OK)
        dp_profile_release(pr);
    return st == DPB_ECANCELLED ? cancelled(err) : st;
}

/* Queries: delta in [0, 1] (0: the epsilon at which delta vanishes, +inf when none does; 1:
 * epsilon 0), epsilon in [0, +inf] (+inf: the mass at infinite loss), as dp_accounting. */
static dpb_status check_points(const double *v, size_t n, int is_delta, dpb_error *err)
{
    const char *field = is_delta ? "delta" : "epsilon";
    if (n == 0 || n > DP_MAX_POINTS)
        return dpb_fail(err, DPB_ELIMIT, field, "between 1 and %d values may be asked for",
                        DP_MAX_POINTS);
    for (size_t i = 0; i < n; i++) {
        if (is_delta ? !(v[i] >= 0.0 && v[i] <= 1.0) : !(v[i] >= 0.0))
            return dpb_fail(err, DPB_EINVAL, field,
                            is_delta ? "delta must lie in [0, 1]"
                                     : "epsilon must be a number >= 0 (or \"infinite\")");
    }
    return DPB_OK;
}

/* delta at eps = +inf for a built profile: the mass at infinite loss. */
static double delta_at_infinity(dp_profile *pr)
{
    switch (pr->acct) {
    case DP_ACCT_GDP_EXACT:
    case DP_ACCT_GDP_CLT:
        return isinf(pr->mu) ? 1.0 : 0.0;
    case DP_ACCT_RDP:
        for (size_t i = 0; i < pr->norders; i++)
            if (!isinf(dp_profile_rdp_order(pr, i)))
                return 0.0;
        return 1.0;
    case DP_ACCT_PLD: {
        double d = pr->dir[0].inf_mass + pr->dir[0].roundoff;
        if (!pr->symmetric && pr->dir[1].inf_mass + pr->dir[1].roundoff > d)
            d = pr->dir[1].inf_mass + pr->dir[1].roundoff;
        return d > 1.0 ? 1.0 : d;
    }
    default:
        /* the others bound delta by a value that does not fall with eps past some point:
         * their largest-eps answer, as an upper bound */
        {
            double d = dp_profile_delta(pr, 1e300, NULL, NULL);
            return d >= 0.0 && d <= 1.0 ? d : 1.0;
        }
    }
}

static void no_extras(dp_point_extra *x)
{
    if (x)
        *x = (dp_point_extra){NAN, NAN, NAN, NAN, NAN, NAN, NAN};
}

static double delta_point(dp_profile *pr, double eps, double *ln_delta, dp_point_extra *aux)
{
    if (!isinf(eps))
        return dp_profile_delta(pr, eps, ln_delta, aux);
    no_extras(aux);
    double d = delta_at_infinity(pr);
    if (ln_delta)
        *ln_delta = log(d);
    return d;
}

static double epsilon_point(dp_profile *pr, double delta, dp_point_extra *aux)
{
    if (delta > 0.0 && delta < 1.0)
        return dp_profile_epsilon(pr, delta, aux);
    no_extras(aux);
    if (delta >= 1.0)
        return 0.0; /* every mechanism is (0, 1)-DP */
    /* delta = 0: the smallest eps with delta(eps) = 0 */
    if (pr->acct == DP_ACCT_GDP_EXACT || pr->acct == DP_ACCT_GDP_CLT)
        return pr->mu == 0.0 ? 0.0 : HUGE_VAL;
    if (pr->acct == DP_ACCT_RDP) {
        /* as dp_accounting: 0 when every order's RDP is 0; else the order infinity's epsilon
         * (pure DP composed), not certified without one */
        for (size_t i = 0; i < pr->norders; i++)
            if (dp_profile_rdp_order(pr, i) != 0.0)
                return dp_profile_epsilon(pr, 0.0, NULL);
        return 0.0;
    }
    if (pr->acct == DP_ACCT_PLD)
        return dp_profile_epsilon(pr, 0.0, NULL);
    return HUGE_VAL;
}

/* ---- auto: the tighter of rdp and pld (issue 16) ------------------------------------------ */

static int tree_has(const dp_event *ev, dp_event_kind k)
{
    if (ev == NULL)
        return 0;
    if (ev->kind == k)
        return 1;
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        return tree_has(ev->u.self.event, k);
    case DP_EV_POISSON_SAMPLED:
        return tree_has(ev->u.sampled.event, k);
    case DP_EV_REPEAT_AND_SELECT:
        return tree_has(ev->u.rs.event, k);
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        return tree_has(ev->u.fixed.event, k);
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++)
            if (tree_has(ev->u.composed.events[i], k))
                return 1;
        return 0;
    default:
        return 0;
    }
}

static const char W_AUTO_BOTH[] = "auto: the event holds an exponential mechanism, whose "
                                  "bounded-range RDP can be tighter than the epsilon-DP PLD in "
                                  "compositions: both were computed and the accountant with "
                                  "the smaller answer at the first point is used for every "
                                  "point";

/* auto for an event where neither rdp nor pld is always the tighter (an exponential mechanism
 * inside: rdp's bounded-range bound against pld's epsilon-DP pair): build both, keep the one
 * with the smaller answer at the first point (want_eps: eps at delta x0, else delta at eps
 * x0). Other events: the usual resolution. */
static dpb_status build_query(const dp_event *ev, dp_relation rel, dp_accountant acct,
                              const dp_options *opt, int want_eps, double x0, dp_profile *pr,
                              dp_report *rep, dpb_error *err)
{
    if (acct != DP_ACCT_AUTO || ev == NULL || resolve_auto(ev) != DP_ACCT_PLD ||
        !tree_has(ev, DP_EV_EXPONENTIAL))
        return build(ev, rel, acct, opt, pr, rep, err);
    dp_profile r;
    dp_report rr;
    dpb_error er = {0};
    if (build(ev, rel, DP_ACCT_RDP, opt, &r, &rr, &er) != DPB_OK)
        return build(ev, rel, DP_ACCT_PLD, opt, pr, rep, err);
    dpb_status st = build(ev, rel, DP_ACCT_PLD, opt, pr, rep, err);
    if (st == DPB_ECANCELLED) {
        dp_profile_release(&r);
        return st;
    }
    int use_rdp = st != DPB_OK;
    if (!use_rdp) {
        double vr = want_eps ? epsilon_point(&r, x0, NULL) : delta_point(&r, x0, NULL, NULL);
        double vp = want_eps ? epsilon_point(pr, x0, NULL) : delta_point(pr, x0, NULL, NULL);
        use_rdp = vr < vp;
    }
    if (use_rdp) {
        if (st == DPB_OK)
            dp_profile_release(pr);
        *pr = r;
        *rep = rr;
    } else {
        dp_profile_release(&r);
    }
    dp_report_warn(rep, W_AUTO_BOTH);
    return DPB_OK;
}

/* ---- queries ----------------------------------------------------------------------------- */

/* A pld profile's FFT round-off bound at eps (the larger direction's; a tilted profile's falls
 * with eps, others' is the same everywhere); 0 for other accountants. */
static double pld_roundoff_eps(const dp_profile *pr, double eps)
{
    if (pr->acct != DP_ACCT_PLD)
        return 0.0;
    double r = pld_roundoff_at(&pr->dir[0], eps);
    if (!pr->symmetric && pld_roundoff_at(&pr->dir[1], eps) > r)
        r = pld_roundoff_at(&pr->dir[1], eps);
    return r;
}

/* ... and its largest value (at -infinity: pld_pmf.roundoff). */
static double pld_roundoff(const dp_profile *pr)
{
    return pld_roundoff_eps(pr, -HUGE_VAL);
}

/* The round-off bound is added to every pld delta: where it exceeds this share of a delta
 * asked for (epsilon at delta) or answered (delta at epsilon), the profile is built again,
 * tilted toward the losses the query reads (pld_tilt_enter: the bound there falls with the
 * Chernoff bound, to 1e-19 and below) or where that does not apply with long double
 * transforms (pld_extended_enter, a bound ~2000 times smaller), so that small deltas are not
 * answered "infinite" or loosened by the double arithmetic's bound. The same rule both ways
 * keeps epsilon(delta(eps)) = eps. */
#define PLD_ROUNDOFF_SHARE 1e-4

/* ... unless leaving the bound out would lower that epsilon by at most this share of it
 * (0.08%): a rebuild costing one to four times the first build (in long double four to
 * eight) would then tighten the answer by less than that, and the double answer, round-off bound
 * included, stays within 0.1% of what the same grid gives without any round-off bound (what
 * dp_accounting reports: it bounds none). At 1e-4 (0.01%), compositions at deltas of 1e-7 to 1e-12
 * were rebuilt for 0.02-0.08% and took two to four times dp_accounting's time. Both ways the point
 * is a pair (eps, delta) of an answer; its epsilon without the bound r is the profile's epsilon at
 * delta + r (delta_pmf(e) + r <= delta + r), so a delta query and the epsilon query at its
 * answer decide alike: epsilon(delta(eps)) = eps still holds. */
#define PLD_ROUNDOFF_EPS_SHARE 8e-4

/* Whether an answer eps lies at or below a tilted profile's floor (plus 4 grid steps): there
 * the profile is loose (the mass below the floor sits on it), so the floor was estimated too
 * high. */
static int below_floor(const dp_profile *pr, double eps)
{
    if (pr->acct != DP_ACCT_PLD)
        return 0;
    for (int d = 0; d < (pr->symmetric ? 1 : 2); d++)
        if (isfinite(pr->dir[d].floor) && !(eps > pr->dir[d].floor + 4.0 * pr->dir[d].h))
            return 1;
    return 0;
}

/* Whether a delta query's double profile is composed again tilted because an epsilon query
 * at its answer would be tilted at once (pld_tilt_direct), so that the two agree. */
static int tilt_direct(const dp_profile *pr, double delta)
{
    if (pr->acct != DP_ACCT_PLD || isfinite(pr->dir[0].floor) ||
        (!pr->symmetric && isfinite(pr->dir[1].floor)))
        return 0;
    double steps = pr->dir[0].steps;
    if (!pr->symmetric && pr->dir[1].steps > steps)
        steps = pr->dir[1].steps;
    return pld_tilt_direct(steps, delta);
}

static int roundoff_loose(dp_profile *pr, double eps, double delta)
{
    double r = pld_roundoff_eps(pr, eps);
    if (!(r > PLD_ROUNDOFF_SHARE * delta))
        return 0;
    if (!(delta > 0.0) || !(delta + r < 1.0) || !isfinite(eps) || !(eps > 0.0))
        return 1;
    double e0 = dp_profile_epsilon(pr, delta + r, NULL);
    return !(eps - e0 <= PLD_ROUNDOFF_EPS_SHARE * eps);
}

/* The rebuild's composition is tilted (pld.h: pld_tilt_enter) at the losses the query reads:
 * with r the first profile's round-off bound and eps_1 its epsilon, the answer at delta lies
 * above eps_1(delta + 2 r) (the exact distribution's delta is at least the first one's less
 * 2 r), the floor, and near eps_1(delta + r) (the first profile's without its bound), the aim;
 * a delta query at eps reads eps (the aim) and its answer delta_1(eps) lies at most r above the
 * exact one (the floor eps_1(delta_1 + r)). Both are rounded down, to a multiple of 1/16 less
 * half of one (from 1 up) or to 2^(k/16) for an integer k less half of one (below 1), so that
 * a delta query at eps and the epsilon query at its answer tilt alike and eps(delta(eps)) =
 * eps still holds. */
#define PLD_TILT_STEP 0.0625

static double tilt_round(double x)
{
    double l0 = x >= 1.0 ? PLD_TILT_STEP * floor(x / PLD_TILT_STEP - 0.5)
                         : exp2(PLD_TILT_STEP * floor(log2(x) / PLD_TILT_STEP - 0.5));
    return isfinite(l0) && l0 > 0.0 ? l0 : NAN;
}

/* The tilt for a query at the points x (eps, want_eps = 0, whose first answers are y; or
 * deltas): the smallest floor and aim over the points. */
static pld_tilt_at tilt_for(dp_profile *pr, int want_eps, const double *x, const double *y,
                            size_t n)
{
    double fl = HUGE_VAL, aim = HUGE_VAL, r = pld_roundoff(pr);
    for (size_t i = 0; i < n; i++) {
        double d = want_eps ? x[i] + r : y[i], f, a;
        if (!(x[i] > 0.0) || !(d + r < 1.0))
            continue;
        f = dp_profile_epsilon(pr, d + r, NULL);
        a = want_eps ? dp_profile_epsilon(pr, d, NULL) : x[i];
        fl = f < fl ? f : fl;
        aim = a < aim ? a : aim;
    }
    return (pld_tilt_at){tilt_round(fl), tilt_round(aim), 0.0};
}

/* Build the profile again in place of *pr, tilted by at, in extended precision if ext (else as
 * the caller computes). Returns 1 if it did (the answers must be computed again), 0 if the
 * rebuild failed (the first profile stays). */
static int rebuild(const dp_event *ev, dp_relation rel, dp_accountant acct, const dp_options *opt,
                   int want_eps, double x0, int ext, pld_tilt_at at, dp_profile *pr, dp_report *rep)
{
    dp_profile p2;
    dp_report r2;
    dpb_error e2 = {0};
    int prev = ext ? pld_extended_enter(1) : 0;
    pld_tilt_at prev_tilt = pld_tilt_enter(at);
    dpb_status st = build_query(ev, rel, acct, opt, want_eps, x0, &p2, &r2, &e2);
    pld_tilt_leave(prev_tilt);
    if (ext)
        pld_extended_leave(prev);
    if (st != DPB_OK)
        return 0;
    dp_profile_release(pr);
    *pr = p2;
    *rep = r2;
    return 1;
}

/* Build the profile again with the round-off made small (when it is a pld profile): tilted
 * (tilt_for), or in long double where the tilt does not apply. */
static int rebuild_extended(const dp_event *ev, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, int want_eps, double x0, pld_tilt_at at,
                            dp_profile *pr, dp_report *rep)
{
    return pld_roundoff(pr) != 0.0 && rebuild(ev, rel, acct, opt, want_eps, x0, 1, at, pr, rep);
}

static dpb_status delta_run(const dp_event *ev, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, const double *eps, size_t n, double *delta,
                            double *ln_delta, dp_point_extra *aux, dp_report *rep, dpb_error *err)
{
    dpb_status st = check_points(eps, n, 0, err);
    if (st != DPB_OK) {
        memset(rep, 0, sizeof *rep);
        return st;
    }
    dp_profile pr;
    if ((st = build_query(ev, rel, acct, opt, 0, eps[0], &pr, rep, err)) != DPB_OK)
        return st;
    for (int pass = 0; pass < 2; pass++) {
        int loose = 0;
        for (size_t i = 0; i < n && !dpb_cancelled(); i++) {
            delta[i] =
                delta_point(&pr, eps[i], ln_delta ? &ln_delta[i] : NULL, aux ? &aux[i] : NULL);
            loose = loose || roundoff_loose(&pr, eps[i], delta[i]);
        }
        if (n == 1 && pld_roundoff(&pr) > 0.0 && tilt_direct(&pr, delta[0]))
            loose = 1;
        if (pass > 0 || !loose || dpb_cancelled() ||
            !rebuild_extended(ev, rel, acct, opt, 0, eps[0], tilt_for(&pr, 0, eps, delta, n), &pr,
                              rep))
            break;
    }
    dp_profile_release(&pr);
    return dpb_cancelled() ? cancelled(err) : DPB_OK;
}

dpb_status dp_delta_ex(const dp_event *ev, dp_relation rel, dp_accountant acct,
                       const dp_options *opt, const double *eps, size_t n, double *delta,
                       double *ln_delta, dp_point_extra *aux, dp_report *rep, dpb_error *err)
{
    const dpb_cancel *prev = dpb_cancel_enter(opt ? opt->cancel : NULL);
    dpb_status st = delta_run(ev, rel, acct, opt, eps, n, delta, ln_delta, aux, rep, err);
    dpb_cancel_leave(prev);
    return st;
}

dpb_status dp_delta(const dp_event *ev, dp_relation rel, dp_accountant acct, const double *eps,
                    size_t n, double *delta, double *ln_delta, dp_report *rep, dpb_error *err)
{
    return dp_delta_ex(ev, rel, acct, NULL, eps, n, delta, ln_delta, NULL, rep, err);
}

static dpb_status epsilon_run(const dp_event *ev, dp_relation rel, dp_accountant acct,
                              const dp_options *opt, const double *delta, size_t n, double *eps,
                              dp_point_extra *aux, dp_report *rep, dpb_error *err)
{
    dpb_status st = check_points(delta, n, 1, err);
    if (st != DPB_OK) {
        memset(rep, 0, sizeof *rep);
        return st;
    }
    dp_profile pr;
    /* one point: compositions whose double bound would be loose at it are tilted at once
     * (pld.h, direct); an answer at the estimated floor builds again without */
    pld_tilt_at prev = pld_tilt_enter((pld_tilt_at){NAN, NAN, n == 1 ? delta[0] : 0.0});
    st = build_query(ev, rel, acct, opt, 1, delta[0], &pr, rep, err);
    pld_tilt_leave(prev);
    if (st != DPB_OK)
        return st;
    for (int pass = 0; pass < 2; pass++) {
        int loose = 0, low = 0;
        for (size_t i = 0; i < n && !dpb_cancelled(); i++) {
            eps[i] = epsilon_point(&pr, delta[i], aux ? &aux[i] : NULL);
            low = low || below_floor(&pr, eps[i]);
            loose = loose || (delta[i] > 0.0 && roundoff_loose(&pr, eps[i], delta[i]));
        }
        if (pass == 0 && low && !dpb_cancelled() &&
            rebuild(ev, rel, acct, opt, 1, delta[0], 0, (pld_tilt_at){NAN, NAN, 0.0}, &pr, rep)) {
            pass = -1; /* the answers again, from the double profile */
            continue;
        }
        if (pass > 0 || !loose || dpb_cancelled() ||
            !rebuild_extended(ev, rel, acct, opt, 1, delta[0], tilt_for(&pr, 1, delta, NULL, n),
                              &pr, rep))
            break;
    }
    dp_profile_release(&pr);
    return dpb_cancelled() ? cancelled(err) : DPB_OK;
}

dpb_status dp_epsilon_ex(const dp_event *ev, dp_relation rel, dp_accountant acct,
                         const dp_options *opt, const double *delta, size_t n, double *eps,
                         dp_point_extra *aux, dp_report *rep, dpb_error *err)
{
    const dpb_cancel *prev = dpb_cancel_enter(opt ? opt->cancel : NULL);
    dpb_status st = epsilon_run(ev, rel, acct, opt, delta, n, eps, aux, rep, err);
    dpb_cancel_leave(prev);
    return st;
}

dpb_status dp_epsilon(const dp_event *ev, dp_relation rel, dp_accountant acct, const double *delta,
                      size_t n, double *eps, dp_report *rep, dpb_error *err)
{
    return dp_epsilon_ex(ev, rel, acct, NULL, delta, n, eps, NULL, rep, err);
}

/* delta at any real eps for a pld profile (the larger of the two directions). */
static double pld_max_delta(const dp_profile *pr, double eps)
{
    double d = pld_delta(&pr->dir[0], eps);
    if (!pr->symmetric) {
        double d1 = pld_delta(&pr->dir[1], eps);
        if (d1 > d)
            d = d1;
    }
    return d;
}

static dpb_status curve_run(const dp_event *ev, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, const double *eps, size_t n_eps, double *delta,
                            const double *alpha, size_t n_alpha, double *beta, dp_report *rep,
                            dpb_error *err)
{
    dpb_status st = check_points(eps, n_eps, 0, err);
    for (size_t i = 0; st == DPB_OK && i < n_eps; i++)
        if (isinf(eps[i]))
            st = dpb_fail(err, DPB_EINVAL, "epsilon", "a curve's epsilons must be finite");
    for (size_t j = 0; st == DPB_OK && j < n_alpha; j++)
        if (!(alpha[j] >= 0.0 && alpha[j] <= 1.0))
            st = dpb_fail(err, DPB_EINVAL, "alphas", "each alpha must lie in [0, 1]");
    if (st == DPB_OK && n_alpha > DP_MAX_POINTS)
        st = dpb_fail(err, DPB_ELIMIT, "alphas", "at most %d alphas", DP_MAX_POINTS);
    if (st != DPB_OK) {
        memset(rep, 0, sizeof *rep);
        return st;
    }
    dp_profile pr;
    if ((st = build(ev, rel, acct, opt, &pr, rep, err)) != DPB_OK)
        return st;
    for (size_t i = 0; i < n_eps && !dpb_cancelled(); i++)
        delta[i] = dp_profile_delta(&pr, eps[i], NULL, NULL);
    if (n_alpha > 0) {
        if (pr.acct == DP_ACCT_GDP_EXACT || pr.acct == DP_ACCT_GDP_CLT) {
            /* f = G_mu exactly: Phi(Phi^{-1}(1 - alpha) - mu) */
            for (size_t j = 0; j < n_alpha; j++)
                beta[j] = isinf(pr.mu) ? 0.0 : dp_Phi(-dp_Phi_inv(alpha[j]) - pr.mu);
        } else if (pr.acct == DP_ACCT_THM41) {
            for (size_t j = 0; j < n_alpha; j++) {
                double b = 1.0 - alpha[j] - pr.tv_delta;
                beta[j] = b > 0.0 ? b : 0.0;
            }
        } else {
            /* Envelope of the supporting lines 1 - delta(e) - e^e alpha over an eps grid up to
             * where delta vanishes (each line lies below the true trade-off curve). The PLD's
             * hockey-stick curve holds for every real eps, so its grid also covers eps < 0
             * (the lines tangent beyond the curve's fixed point); rdp's conversion is used
             * for eps >= 0 only. */
            enum { GRID = 400 };
            double emax = dp_profile_epsilon(&pr, 1e-12, NULL);
            if (!isfinite(emax) || emax > 50.0)
                emax = 50.0;
            int pld_like = pr.acct == DP_ACCT_PLD || pr.use_pld;
            double emin = pld_like || pr.shx ? -emax : 0.0;
            for (size_t j = 0; j < n_alpha; j++)
                beta[j] = 0.0;
            for (int g = 0; g <= GRID && !dpb_cancelled(); g++) {
                double e = emin + (emax - emin) * g / GRID;
                /* eps < 0: the PLD's own curve; for shuffle_exact's one epoch (the larger of
                 * both orders at each eps >= 0) delta_PQ(e) = 1 - e^e + e^e delta_QP(-e) */
                double d = e >= 0.0   ? dp_profile_delta(&pr, e, NULL, NULL)
                           : pld_like ? pld_max_delta(&pr, e)
                                      : -expm1(e) + exp(e) * dp_profile_delta(&pr, -e, NULL, NULL);
                for (size_t j = 0; j < n_alpha; j++) {
                    double b = 1.0 - d - exp(e) * alpha[j];
                    if (b > beta[j])
                        beta[j] = b;
                }
            }
        }
    }
    dp_profile_release(&pr);
    return dpb_cancelled() ? cancelled(err) : DPB_OK;
}

dpb_status dp_curve(const dp_event *ev, dp_relation rel, dp_accountant acct, const dp_options *opt,
                    const double *eps, size_t n_eps, double *delta, const double *alpha,
                    size_t n_alpha, double *beta, dp_report *rep, dpb_error *err)
{
    const dpb_cancel *prev = dpb_cancel_enter(opt ? opt->cancel : NULL);
    dpb_status st =
        curve_run(ev, rel, acct, opt, eps, n_eps, delta, alpha, n_alpha, beta, rep, err);
    dpb_cancel_leave(prev);
    return st;
}

/* ---- calibration ------------------------------------------------------------------------- */

static void calibration_init(dp_calibration *c, dp_param p)
{
    memset(c, 0, sizeof *c);
    c->param = p;
    c->value = c->lo = c->hi = c->achieved_delta = NAN;
    c->best_delta = c->best_at = NAN;
    c->per_epoch_delta = c->rounds_eq3 = c->rounds_eq4 = NAN;
    c->regime_delta_max = c->regime_sigma_max = NAN;
    c->limit_c1 = NAN;
    c->thm41_value = NAN;
}

/* delta(eps_target) of the template with its current parameter value. */
static dpb_status eval_at(dp_event *tmpl, dp_relation rel, dp_accountant acct,
                          const dp_options *opt, double eps_t, double *delta, dp_report *rep,
                          dpb_error *err)
{
    dp_profile pr;
    dpb_status st = build(tmpl, rel, acct, opt, &pr, rep, err);
    if (st != DPB_OK)
        return st;
    *delta = dp_profile_delta(&pr, eps_t, NULL, NULL);
    dp_profile_release(&pr);
    return DPB_OK;
}

/* Access to the unknown field of the node. */
static void set_param(dp_event *node, double v)
{
    switch (node->unknown) {
    case DP_PARAM_NOISE_MULTIPLIER:
        if (node->kind == DP_EV_SHUFFLED_EPOCH)
            node->u.shuffled.noise_multiplier = v;
        else
            node->u.noise.noise_multiplier = v;
        break;
    case DP_PARAM_ROUNDS:
        node->u.shuffled.rounds = (uint64_t)v;
        break;
    case DP_PARAM_COUNT:
        node->u.self.count = (uint64_t)v;
        break;
    case DP_PARAM_SAMPLING_PROBABILITY:
        node->u.sampled.sampling_probability = v;
        break;
    case DP_PARAM_NOISE_SCALE:
        node->u.pnsgd.noise_level = v;
        break;
    case DP_PARAM_DATASET_SIZE:
        node->u.pnsgd.n = (uint64_t)v;
        break;
    case DP_PARAM_C1:
        node->u.pnsgd.c1 = v;
        break;
    case DP_PARAM_NONE:
        break;
    }
}

typedef struct {
    dp_event *tmpl, *node;
    dp_relation rel;
    dp_accountant acct;
    const dp_options *opt;
    double eps_t, delta_t;
    dp_report *rep;
    dpb_error *err;
    dpb_status fatal; /* a failure other than "not feasible" */
} probe;

/* 1 if the target is met at v, 0 if not (or not covered there), -1 on a hard failure. */
static int feasible(probe *p, double v, double *delta)
{
    set_param(p->node, v);
    dp_report scratch;
    dpb_error e = {0};
    double d;
    dpb_status st = eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &d, &scratch, &e);
    if (st == DPB_ENOTCOVERED || st == DPB_ELIMIT) {
        /* nothing certified at this value: for the solver, not feasible, and no delta */
        if (delta)
            *delta = NAN;
        return 0;
    }
    if (st != DPB_OK) {
        p->fatal = st;
        if (p->err && p->err->status == DPB_OK)
            *p->err = e;
        return -1;
    }
    if (delta)
        *delta = d;
    return d <= p->delta_t;
}

/* "gives delta D > T" or, when nothing was certified there, says so (never a stale delta). */
static const char *gives(double d, double target, char buf[96])
{
    if (isnan(d))
        snprintf(buf, 96, "certifies nothing (the accountant's conditions or size limits fail)");
    else
        snprintf(buf, 96, "gives delta %.6g > %.6g", d, target);
    return buf;
}

/* The smallest integer in [1, top] that meets the target, when delta does not increase with
 * the parameter: doubling to bracket it, then bisection. 1 with c->value set; 0 when even
 * top does not (c->best_* set, *d its delta); -1 on a hard failure. */
static int smallest_feasible_int(probe *p, double top, dp_calibration *c, double *d)
{
    double lo = 0.0, hi = 1.0;
    int f;
    while ((f = feasible(p, hi, d)) == 0 && hi < top) {
        lo = hi;
        hi = hi * 2.0 < top ? hi * 2.0 : top;
    }
    if (f <= 0) {
        if (f == 0) {
            c->has_best = 1;
            c->best_at = hi;
            c->best_delta = *d;
        }
        return f;
    }
    while (hi - lo > 1.0) {
        double mid = floor((lo + hi) / 2.0);
        if ((f = feasible(p, mid, d)) < 0)
            return -1;
        if (f)
            hi = mid;
        else
            lo = mid;
    }
    c->value = hi;
    c->tolerance = 0.0;
    return 1;
}

/* Generic calibration by bracketing and bisection, using monotonicity in the parameter:
 * delta(eps_t) is non-increasing in noise, non-decreasing in count and sampling rate. */
static dpb_status calibrate_generic(probe *p, dp_calibration *c)
{
    dp_param prm = p->node->unknown;
    char msg[96];
    double tol = p->acct == DP_ACCT_PLD || p->acct == DP_ACCT_SHUFFLE_EXACT ? 1e-4 : 1e-9;
    double d;
    int f;
    if (prm == DP_PARAM_NOISE_MULTIPLIER || prm == DP_PARAM_NOISE_SCALE || prm == DP_PARAM_C1) {
        /* smallest feasible noise (or C1: more noise) in [1e-4, 1e6], bracketed from 1 */
        double lo, hi = 1.0;
        while ((f = feasible(p, hi, &d)) == 0 && hi < 1e6)
            hi *= 4.0;
        if (f < 0)
            return p->fatal;
        if (f == 0) {
            c->has_best = 1;
            c->best_at = hi;
            c->best_delta = d;
            return dpb_fail(p->err, DPB_EINFEASIBLE, "noise_multiplier",
                            "even noise_multiplier %g %s at epsilon %g", hi,
                            gives(d, p->delta_t, msg), p->eps_t);
        }
        for (lo = hi / 2.0;; lo /= 2.0) {
            if ((f = feasible(p, lo, &d)) < 0)
                return p->fatal;
            if (f == 0 || lo < 1e-4)
                break;
            hi = lo;
        }
        if (f == 1) {
            hi = lo;
        } else {
            while (hi / lo - 1.0 > tol) {
                double mid = sqrt(lo * hi);
                if ((f = feasible(p, mid, &d)) < 0)
                    return p->fatal;
                if (f)
                    hi = mid;
                else
                    lo = mid;
            }
        }
        c->value = hi;
        c->tolerance = tol;
    } else if (prm == DP_PARAM_ROUNDS) {
        /* smallest feasible M in [1, SHX_MAX_ROUNDS]: the model's delta does not increase
         * with M (more rounds only hide the record better) */
        f = smallest_feasible_int(p, (double)SHX_MAX_ROUNDS, c, &d);
        if (f < 0)
            return p->fatal;
        if (f == 0)
            return dpb_fail(p->err, DPB_EINFEASIBLE, "rounds",
                            "even %g rounds per epoch: %s at epsilon %g "
                            "(the exact accountant's limit; thm41 covers more rounds)",
                            c->best_at, gives(d, p->delta_t, msg), p->eps_t);
    } else if (prm == DP_PARAM_DATASET_SIZE) {
        /* smallest feasible n in [1, 2^53]: delta decreases with n at a fixed noise */
        const pnsgd_params *pn = &p->node->u.pnsgd;
        if (pn->mode != PNSGD_NOISE_GIVEN || pn->order == PNSGD_FIXED)
            return dpb_fail(p->err, DPB_EUNSUPPORTED, "solve_for",
                            "dataset_size is solved for a given noise level with the shuffled "
                            "or randomly stopped order (where delta decreases with n)");
        f = smallest_feasible_int(p, 9007199254740992.0, c, &d);
        if (f < 0)
            return p->fatal;
        if (f == 0)
            return dpb_fail(p->err, DPB_EINFEASIBLE, "dataset_size", "even %g records: %s",
                            c->best_at, gives(d, p->delta_t, msg));
    } else if (prm == DP_PARAM_COUNT) {
        /* largest feasible count in [1, 2^53] */
        if ((f = feasible(p, 1.0, &d)) < 0)
            return p->fatal;
        if (f == 0) {
            c->has_best = 1;
            c->best_at = 1.0;
            c->best_delta = d;
            return dpb_fail(p->err, DPB_EINFEASIBLE, "count", "even one run %s at epsilon %g",
                            gives(d, p->delta_t, msg), p->eps_t);
        }
        double lo = 1.0, hi = 2.0;
        while ((f = feasible(p, hi, &d)) == 1 && hi < 9007199254740992.0) {
            lo = hi;
            hi *= 2.0;
        }
        if (f < 0)
            return p->fatal;
        if (f == 1)
            lo = hi;
        else
            while (hi - lo > 1.0) {
                double mid = floor((lo + hi) / 2.0);
                if ((f = feasible(p, mid, &d)) < 0)
                    return p->fatal;
                if (f)
                    lo = mid;
                else
                    hi = mid;
            }
        c->value = lo;
        c->tolerance = 0.0;
    } else if (prm == DP_PARAM_SAMPLING_PROBABILITY) {
        /* largest feasible rate in (0, 1] */
        if ((f = feasible(p, 1.0, &d)) < 0)
            return p->fatal;
        double lo = 1e-12, hi = 1.0;
        if (f == 0) {
            if ((f = feasible(p, lo, &d)) < 0)
                return p->fatal;
            if (f == 0) {
                c->has_best = 1;
                c->best_at = lo;
                c->best_delta = d;
                return dpb_fail(p->err, DPB_EINFEASIBLE, "sampling_probability",
                                "even sampling_probability %g %s", lo, gives(d, p->delta_t, msg));
            }
            while (hi / lo - 1.0 > tol) {
                double mid = sqrt(lo * hi);
                if ((f = feasible(p, mid, &d)) < 0)
                    return p->fatal;
                if (f)
                    lo = mid;
                else
                    hi = mid;
            }
        } else {
            lo = 1.0;
        }
        c->value = lo;
        c->tolerance = lo == 1.0 ? 0.0 : tol;
    } else {
        return dpb_fail(p->err, DPB_EUNSUPPORTED, "solve_for",
                        "%s can be solved for with the thm41 accountant only", dp_param_name(prm));
    }
    /* verify the returned value, and report its conditions */
    set_param(p->node, c->value);
    dpb_status st =
        eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &c->achieved_delta, p->rep, p->err);
    if (st != DPB_OK)
        return st;
    if (!(c->achieved_delta <= p->delta_t))
        return dpb_fail(p->err, DPB_ENUMERIC, dp_param_name(prm),
                        "could not verify the solved value");
    return DPB_OK;
}

/* ---- thm41: exact integer M, the U-shaped sigma interval, epochs ------------------------- */

/* A chain SelfComposed^k(ShuffledEpoch): E identical epochs. Returns the leaf and the
 * product of the known counts (the unknown count excluded). */
static dp_event *epoch_chain(dp_event *ev, double *known_epochs)
{
    *known_epochs = 1.0;
    while (ev->kind == DP_EV_SELF_COMPOSED) {
        if (ev->unknown != DP_PARAM_COUNT)
            *known_epochs *= (double)ev->u.self.count;
        ev = ev->u.self.event;
    }
    return ev->kind == DP_EV_SHUFFLED_EPOCH ? ev : NULL;
}

static dpb_status calibrate_thm41(probe *p, dp_calibration *c)
{
    double epochs, d;
    dp_event *leaf = epoch_chain(p->tmpl, &epochs);
    dp_event *node = p->node;
    if (leaf == NULL)
        return dpb_fail(p->err, DPB_EUNSUPPORTED, "event",
                        "thm41 calibration handles one epoch or a self-composition of "
                        "identical epochs, not a composition of different ones");
    if (!(epochs >= 1.0 && epochs < 1e18))
        return dpb_fail(p->err, DPB_EINVAL, "count", "the number of epochs is out of range");
    double delta_target = p->delta_t;

    if (node->unknown == DP_PARAM_ROUNDS) {
        double sigma = leaf->u.shuffled.noise_multiplier;
        double de = dp_tv_per_epoch(delta_target, (uint64_t)epochs);
        c->per_epoch_delta = de;
        c->rounds_eq3 = dp_thm41_rounds_eq3(sigma, de);
        c->rounds_eq4 = dp_thm41_rounds_eq4(sigma);
        c->regime_delta_max = dp_thm41_regime_delta_max(sigma);
        uint64_t M;
        dpb_status st = dp_thm41_min_rounds(sigma, de, &M, NULL);
        if (st == DPB_EINFEASIBLE) {
            c->has_best = feasible(p, (double)DP_THM41_MAX_ROUNDS, &c->best_delta) >= 0;
            c->best_at = (double)DP_THM41_MAX_ROUNDS;
            return dpb_fail(p->err, st, "rounds",
                            "no number of rounds up to 2^63 - 1 meets delta %.6g with Theorem 4.1",
                            delta_target);
        }
        if (st != DPB_OK)
            return dpb_fail(p->err, st, "event", "noise_multiplier must be a positive number");
        /* The per-epoch split is rounded: step up until the whole tree verifies, then down
         * while it still does, so M is the smallest integer that meets the target. */
        int f = 0;
        for (int i = 0; i < 64 && (f = feasible(p, (double)M, &d)) == 0; i++)
            M += 1 + M / 1000000000000ULL;
        if (f != 1)
            return dpb_fail(p->err, DPB_ENUMERIC, "rounds", "could not verify the solved rounds");
        for (int i = 0; i < 64 && M > 3 && feasible(p, (double)(M - 1), &d) == 1; i++)
            M--;
        c->value = (double)M;
        c->tolerance = 0.0;
    } else if (node->unknown == DP_PARAM_NOISE_MULTIPLIER) {
        uint64_t M = leaf->u.shuffled.rounds;
        double de = dp_tv_per_epoch(delta_target, (uint64_t)epochs);
        c->per_epoch_delta = de;
        double smax;
        if (de < 1.0 / 3.0 && dp_thm41_regime_sigma_max(de, &smax) == DPB_OK)
            c->regime_sigma_max = smax;
        double lo, hi, bd, bs;
        dpb_status st = dp_thm41_sigma_interval(M, de, &lo, &hi, &bd, &bs);
        if (st == DPB_EINFEASIBLE) {
            if (bd < HUGE_VAL) {
                c->has_best = feasible(p, bs, &c->best_delta) >= 0;
                c->best_at = bs;
                return dpb_fail(p->err, st, "noise_multiplier",
                                "no noise_multiplier reaches delta %.6g at M = %llu with "
                                "Theorem 4.1; the smallest certified delta is %.6g at "
                                "noise_multiplier %.6g: use more rounds",
                                delta_target, (unsigned long long)M, c->best_delta, bs);
            }
            return dpb_fail(p->err, st, "rounds",
                            "Theorem 4.1 certifies nothing at M = %llu for any "
                            "noise_multiplier: use more rounds",
                            (unsigned long long)M);
        }
        if (st != DPB_OK)
            return dpb_fail(p->err, st, "rounds", "rounds must be >= 1");
        if (feasible(p, hi, &d) != 1 || feasible(p, lo, &d) != 1)
            return dpb_fail(p->err, DPB_ENUMERIC, "noise_multiplier",
                            "could not verify the interval");
        c->value = lo;
        c->has_interval = 1;
        c->lo = lo;
        c->hi = hi;
        c->tolerance = 1e-12;
    } else if (node->unknown == DP_PARAM_COUNT) {
        dp_thm41 e;
        if (dp_thm41_eval(leaf->u.shuffled.noise_multiplier, leaf->u.shuffled.rounds, &e) !=
            DPB_OK) {
            node->u.self.count = 1;
            return eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &d, p->rep, p->err);
        }
        c->per_epoch_delta = e.delta;
        /* (1 - d)^{epochs x} >= 1 - target  <=>  x <= ln(1 - target) / (epochs ln(1 - d)) */
        double x = floor(log1p(-delta_target) / (epochs * log1p(-e.delta)));
        if (x > 9007199254740992.0)
            x = 9007199254740992.0;
        for (; x >= 1.0 && feasible(p, x, &d) != 1; x -= 1.0)
            ;
        if (x < 1.0) {
            c->has_best = feasible(p, 1.0, &c->best_delta) >= 0;
            c->best_at = 1.0;
            return dpb_fail(p->err, DPB_EINFEASIBLE, "count",
                            "even one epoch exceeds delta %.6g: Theorem 4.1 gives %.6g per "
                            "epoch",
                            delta_target, e.delta);
        }
        c->value = x;
        c->tolerance = 0.0;
    } else {
        return dpb_fail(p->err, DPB_EUNSUPPORTED, "solve_for",
                        "this parameter cannot be solved for with thm41");
    }
    set_param(node, c->value);
    return eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &c->achieved_delta, p->rep, p->err);
}

/* What Theorem 4.1 answers to the same calibration, for comparison (+inf: it certifies
 * nothing; NAN: the theorem does not solve this question). Leaves the template as found. */
static void thm41_alongside(dp_event *tmpl, dp_relation rel, double eps_t, double delta_t,
                            dp_calibration *out)
{
    double epochs;
    int nunk;
    dp_event *node = dp_event_find_unknown(tmpl, &nunk);
    if (epoch_chain(tmpl, &epochs) == NULL || node == NULL)
        return;
    dp_calibration c;
    calibration_init(&c, node->unknown);
    dp_report scratch = {0};
    dpb_error e = {0};
    probe q = {tmpl, node, rel, DP_ACCT_THM41, NULL, eps_t, delta_t, &scratch, &e, DPB_OK};
    dpb_status st = calibrate_thm41(&q, &c);
    if (st == DPB_OK)
        out->thm41_value = c.value;
    else if (st == DPB_EINFEASIBLE || st == DPB_ENOTCOVERED)
        out->thm41_value = HUGE_VAL;
}

static dpb_status calibrate_run(dp_event *tmpl, dp_relation rel, dp_accountant acct,
                                const dp_options *opt, double eps_target, double delta_target,
                                dp_calibration *out, dp_report *rep, dpb_error *err)
{
    int nunk;
    dp_event *node = tmpl ? dp_event_find_unknown(tmpl, &nunk) : NULL;
    calibration_init(out, node ? node->unknown : DP_PARAM_NONE);
    memset(rep, 0, sizeof *rep);
    if (node == NULL || nunk != 1)
        return dpb_fail(err, DPB_EINVAL, "solve_for",
                        "exactly one event field must be left for the solver");
    if (!(isfinite(eps_target) && eps_target >= 0.0))
        return dpb_fail(err, DPB_EINVAL, "target.epsilon", "epsilon must be finite and >= 0");
    if (!(delta_target > 0.0 && delta_target < 1.0))
        return dpb_fail(err, DPB_EINVAL, "target.delta", "delta must lie strictly in (0, 1)");
    if (acct == DP_ACCT_AUTO)
        acct = resolve_auto(tmpl);
    rep->accountant = dp_accountant_name(acct);
    if (acct == DP_ACCT_GDP_CLT)
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "calibration uses certified accountants only; gdp_clt is an estimate");
    probe p = {tmpl, node, rel, acct, opt, eps_target, delta_target, rep, err, DPB_OK};
    if (acct == DP_ACCT_THM41) {
        dpb_status st = calibrate_thm41(&p, out);
        if (out->has_best && isnan(out->best_delta))
            out->has_best = 0; /* nothing certified there: no delta to report */
        return st;
    }
    if (node->unknown == DP_PARAM_ROUNDS && acct != DP_ACCT_SHUFFLE_EXACT && acct != DP_ACCT_PLD)
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "rounds of a shuffled epoch are solved with the shuffle_exact, pld or "
                        "thm41 accountants");
    if (acct == DP_ACCT_SHUFFLE_EXACT)
        thm41_alongside(tmpl, rel, eps_target, delta_target, out);
    if (node->unknown == DP_PARAM_C1 && node->u.pnsgd.mode == PNSGD_NOISE_SCHEDULE &&
        node->u.pnsgd.order == PNSGD_SHUFFLED) {
        double c1;
        if (pnsgd_schedule_c1(node->u.pnsgd.noise, eps_target, delta_target, &c1) == DPB_OK)
            out->limit_c1 = c1;
    }
    dpb_status st = calibrate_generic(&p, out);
    /* a "best achievable" point where nothing was certified has no delta to report */
    if (out->has_best && isnan(out->best_delta))
        out->has_best = 0;
    if (st == DPB_OK && acct == DP_ACCT_SHUFFLE_EXACT &&
        node->unknown == DP_PARAM_NOISE_MULTIPLIER) {
        /* the model's delta does not increase with sigma: every larger sigma meets it too */
        out->has_interval = 1;
        out->lo = out->value;
        out->hi = HUGE_VAL;
    }
    return st;
}

dpb_status dp_calibrate_ex(dp_event *tmpl, dp_relation rel, dp_accountant acct,
                           const dp_options *opt, double eps_target, double delta_target,
                           dp_calibration *out, dp_report *rep, dpb_error *err)
{
    const dpb_cancel *prev = dpb_cancel_enter(opt ? opt->cancel : NULL);
    dpb_status st = calibrate_run(tmpl, rel, acct, opt, eps_target, delta_target, out, rep, err);
    dpb_cancel_leave(prev);
    return st;
}

dpb_status dp_calibrate(dp_event *tmpl, dp_relation rel, dp_accountant acct, double eps_target,
                        double delta_target, dp_calibration *out, dp_report *rep, dpb_error *err)
{
    return dp_calibrate_ex(tmpl, rel, acct, NULL, eps_target, delta_target, out, rep, err);
}

/* ---- ledger hooks --------------------------------------------------------------------------- */

dpb_status dp_rdp_curve(const dp_event *ev, dp_relation rel, double *curve, dpb_error *err)
{
    dp_profile pr;
    dp_report rep;
    dpb_status st = build(ev, rel, DP_ACCT_RDP, NULL, &pr, &rep, err);
    if (st != DPB_OK)
        return st;
    for (size_t i = 0; i < RDP_NORDERS; i++)
        curve[i] = dp_profile_rdp_order(&pr, i);
    dp_profile_release(&pr);
    return DPB_OK;
}

dpb_status dp_gdp_mu2_of(const dp_event *ev, dp_relation rel, double *mu2, dpb_error *err)
{
    dp_profile pr;
    dp_report rep;
    dpb_status st = build(ev, rel, DP_ACCT_GDP_EXACT, NULL, &pr, &rep, err);
    if (st != DPB_OK)
        return st;
    *mu2 = pr.mu2;
    dp_profile_release(&pr);
    return DPB_OK;
}

dpb_status dp_tv_log1m_of(const dp_event *ev, dp_relation rel, double *s, dpb_error *err)
{
    dp_profile pr;
    dp_report rep;
    dpb_status st = build(ev, rel, DP_ACCT_THM41, NULL, &pr, &rep, err);
    if (st != DPB_OK)
        return st;
    *s = log1p(-pr.tv_delta);
    dp_profile_release(&pr);
    return DPB_OK;
}

/* ---- POST /v1/rdp (issue 16) ---------------------------------------------------------------- */

dpb_status dp_rdp_curve_at(const dp_event *ev, dp_relation rel, const double *orders, size_t n,
                           double *curve, dp_report *rep, dpb_error *err)
{
    memset(rep, 0, sizeof *rep);
    if (ev == NULL)
        return dpb_fail(err, DPB_EINVAL, "event", "an event is required");
    dp_profile pr;
    dpb_status st = dp_profile_build_rdp(ev, rel, orders, n, &pr, rep, err);
    if (st == DPB_OK)
        for (size_t i = 0; i < pr.norders; i++)
            curve[i] = dp_profile_rdp_order(&pr, i);
    dp_profile_release(&pr);
    return st;
}
