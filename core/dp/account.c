/*
 * account.c - the accountants' facade (account.h): delta(eps), eps(delta) and curves from a
 * built profile, the pld round-off rebuilds that keep small deltas tight, and the ledger's
 * hooks. Calls dispatch.h (auto and the profile build), profile.h, pld.h and normal.h; the
 * calibration (calibrate.c) is beside it, not below.
 */
#include "account.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "normal.h"
#include "profile_int.h"

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
    case DP_ACCT_RDP: {
        /* the (eps, delta) events' failures: infinite loss with probability at most
         * 1 - prod(1 - delta_i) (Kairouz, Oh, Viswanath 2015) */
        double l1m = 0.0;
        for (size_t k = 0; k < pr->ned; k++)
            l1m += pr->ed[k].mult * log1p(-pr->ed[k].delta);
        double eta = pr->ned ? dp_round_up(-expm1(l1m), 1e-14) : 0.0;
        for (size_t i = 0; i < pr->norders; i++)
            if (!isinf(dp_profile_rdp_order(pr, i)))
                return eta < 1.0 ? eta : 1.0;
        return 1.0;
    }
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
 * x0). Other events: the usual resolution. pld compositions are computed as pc says (pld.h;
 * borrowed; NULL: in double, not tilted). */
static dpb_status build_query(const dp_event *ev, dp_relation rel, dp_accountant acct,
                              const dp_options *opt, const pld_ctx *pc, int want_eps, double x0,
                              dp_profile *pr, dp_report *rep, dpb_error *err)
{
    if (acct != DP_ACCT_AUTO || ev == NULL || dp_dispatch_auto(ev) != DP_ACCT_PLD ||
        !tree_has(ev, DP_EV_EXPONENTIAL))
        return dp_dispatch_build(ev, rel, acct, opt, pc, pr, rep, err);
    dp_profile r;
    dp_report rr;
    dpb_error er = {0};
    if (dp_dispatch_build(ev, rel, DP_ACCT_RDP, opt, pc, &r, &rr, &er) != DPB_OK)
        return dp_dispatch_build(ev, rel, DP_ACCT_PLD, opt, pc, pr, rep, err);
    dpb_status st = dp_dispatch_build(ev, rel, DP_ACCT_PLD, opt, pc, pr, rep, err);
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
 * tilted toward the losses the query reads (pld_ctx.tilt: the bound there falls with the
 * Chernoff bound, to 1e-19 and below) or where that does not apply with long double
 * transforms (pld_ctx.ext, a bound ~2000 times smaller), so that small deltas are not
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

/* The rebuild's composition is tilted (pld.h: pld_ctx.tilt) at the losses the query reads:
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
    pld_ctx pc = {at, ext};
    dpb_status st = build_query(ev, rel, acct, opt, &pc, want_eps, x0, &p2, &r2, &e2);
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
    if ((st = build_query(ev, rel, acct, opt, NULL, 0, eps[0], &pr, rep, err)) != DPB_OK)
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
    return dpb_cancelled() ? dp_dispatch_cancelled(err) : DPB_OK;
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
    pld_ctx direct = {{NAN, NAN, n == 1 ? delta[0] : 0.0}, 0};
    st = build_query(ev, rel, acct, opt, &direct, 1, delta[0], &pr, rep, err);
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
    return dpb_cancelled() ? dp_dispatch_cancelled(err) : DPB_OK;
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
    if ((st = dp_dispatch_build(ev, rel, acct, opt, NULL, &pr, rep, err)) != DPB_OK)
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
    return dpb_cancelled() ? dp_dispatch_cancelled(err) : DPB_OK;
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

/* ---- ledger hooks --------------------------------------------------------------------------- */

/* What a ledger hook reads from a built profile into out (the caller's). */
typedef void profile_reader(dp_profile *pr, void *out);

/* Builds ev's profile by acct with the default options, lets read copy what it needs into
 * out, and releases the profile. The build's status (its report is dropped). */
static dpb_status read_profile(const dp_event *ev, dp_relation rel, dp_accountant acct,
                               profile_reader *read, void *out, dpb_error *err)
{
    dp_profile pr;
    dp_report rep;
    dpb_status st = dp_dispatch_build(ev, rel, acct, NULL, NULL, &pr, &rep, err);
    if (st != DPB_OK)
        return st;
    read(&pr, out);
    dp_profile_release(&pr);
    return DPB_OK;
}

static void read_rdp_curve(dp_profile *pr, void *out)
{
    double *curve = out;
    if (pr->ned > 0) { /* no curve: dp_rdp_curve refuses */
        curve[0] = NAN;
        return;
    }
    for (size_t i = 0; i < RDP_NORDERS; i++)
        dp_profile_rdp_parts(pr, i, &curve[i], &curve[RDP_LATE + i]);
    curve[RDP_NORDERS] = pr->rdp_inf; /* the order infinity, as dp_rdp_lazy sums it */
}

static void read_mu2(dp_profile *pr, void *out)
{
    *(double *)out = pr->mu2;
}

static void read_tv_log1m(dp_profile *pr, void *out)
{
    *(double *)out = log1p(-pr->tv_delta);
}

static const char NO_CURVE_ED[] =
    "an (epsilon, delta) event with delta > 0 has no RDP curve: POST /v1/epsilon and "
    "/v1/delta with the rdp accountant compose it with the others' curve, and pld composes it "
    "exactly where it takes the other events";

dpb_status dp_rdp_curve(const dp_event *ev, dp_relation rel, double *curve, dpb_error *err)
{
    dpb_status st = read_profile(ev, rel, DP_ACCT_RDP, read_rdp_curve, curve, err);
    if (st == DPB_OK && isnan(curve[0]))
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant", "%s", NO_CURVE_ED);
    return st;
}

dpb_status dp_gdp_mu2_of(const dp_event *ev, dp_relation rel, double *mu2, dpb_error *err)
{
    return read_profile(ev, rel, DP_ACCT_GDP_EXACT, read_mu2, mu2, err);
}

dpb_status dp_tv_log1m_of(const dp_event *ev, dp_relation rel, double *s, dpb_error *err)
{
    return read_profile(ev, rel, DP_ACCT_THM41, read_tv_log1m, s, err);
}

/* ---- POST /v1/rdp (issue 16) ---------------------------------------------------------------- */

dpb_status dp_rdp_curve_at(const dp_event *ev, dp_relation rel, const double *orders, size_t n,
                           double *curve, dp_report *rep, dpb_error *err)
{
    memset(rep, 0, sizeof *rep);
    if (ev == NULL)
        return dpb_fail(err, DPB_EINVAL, "event", "an event is required");
    /* the finite orders go to the walk (at least one: order 2 when only infinity is asked);
     * the order infinity is the profile's max divergence, rounded as its conversion does */
    size_t nf = 0;
    double *fin = NULL;
    if (orders != NULL) {
        if (n == 0 || n > RDP_MAX_ORDERS)
            return dpb_fail(err, DPB_ELIMIT, "orders", "between 1 and %d orders", RDP_MAX_ORDERS);
        if ((fin = malloc(n * sizeof *fin)) == NULL)
            return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        for (size_t i = 0; i < n; i++)
            if (!(isinf(orders[i]) && orders[i] > 0.0))
                fin[nf++] = orders[i];
        if (nf == 0)
            fin[nf++] = 2.0;
    }
    dp_profile pr;
    dpb_status st = dp_profile_build_rdp(ev, rel, fin, nf, &pr, rep, err);
    if (st == DPB_OK && pr.ned > 0)
        st = dpb_fail(err, DPB_EUNSUPPORTED, "accountant", "%s", NO_CURVE_ED);
    if (st == DPB_OK) {
        double dinf = dp_round_up(pr.rdp_inf, RDP_REL_ROUND);
        for (size_t i = 0, k = 0; i < (orders ? n : pr.norders); i++)
            curve[i] = orders && isinf(orders[i]) && orders[i] > 0.0
                           ? dinf
                           : dp_profile_rdp_order(&pr, k++);
    }
    dp_profile_release(&pr);
    free(fin);
    return st;
}

dpb_status dp_pld_pair_of(const dp_event *ev, dp_relation rel, double h, pld_pmf out[2],
                          int *symmetric, dpb_error *err)
{
    dp_report rep;
    memset(&rep, 0, sizeof rep);
    dp_pld_pair p;
    memset(out, 0, 2 * sizeof *out);
    dpb_status st = dp_walk_pld_adaptive(ev, rel, h, 0, NULL, &p, &rep, err);
    if (st != DPB_OK)
        return st;
    out[0] = p.d[0];
    if (!p.symmetric)
        out[1] = p.d[1];
    *symmetric = p.symmetric;
    return DPB_OK;
}
