/*
 * calibrate.c - dp_calibrate (account.h): solve the one unknown parameter of an event for a
 * target (eps, delta), never overshooting: bracketing and bisection by monotonicity in the
 * parameter for the certified accountants, Theorem 4.1's closed forms for thm41, each result
 * verified with the accountant itself. Calls calibrate_thm41.h, calibrate_probe.h,
 * dispatch.h (auto), pnsgd.h and shuffle_exact.h; nothing calls back into it.
 */
#include "account.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibrate_probe.h"
#include "calibrate_thm41.h"
#include "dispatch.h"
#include "shuffle_exact.h"

/* "gives delta D > T" or, when nothing was certified there, says so (never a stale delta). */
static const char *gives(double d, double target, char buf[96])
{
    if (isnan(d))
        snprintf(buf, 96, "certifies nothing (the accountant's conditions or size limits fail)");
    else
        snprintf(buf, 96, "gives delta %.6g > %.6g", d, target);
    return buf;
}

/* Bisects the bracket [*lo, *hi] (the target met at one end and not at the other) until it
 * is one integer wide (integer: midpoints floor((lo + hi) / 2)) or tol wide relatively
 * (geometric midpoints sqrt(lo hi)); met_high: the target is met at *hi (more of the
 * parameter helps), else at *lo. *d receives the last probe's delta. 0, or -1 on a hard
 * failure (p->fatal set). */
static int bisect(calib_probe *p, double *lo, double *hi, int integer, double tol, int met_high,
                  double *d)
{
    while (integer ? *hi - *lo > 1.0 : *hi / *lo - 1.0 > tol) {
        double mid = integer ? floor((*lo + *hi) / 2.0) : sqrt(*lo * *hi);
        int f = dp_calib_feasible(p, mid, d);
        if (f < 0)
            return -1;
        if ((f != 0) == (met_high != 0))
            *hi = mid;
        else
            *lo = mid;
    }
    return 0;
}

/* Notes the best value tried (at, with delta d) when no value meets the target. */
static void note_best(dp_calibration *c, double at, double d)
{
    c->has_best = 1;
    c->best_at = at;
    c->best_delta = d;
}

/* The smallest integer in [1, top] that meets the target, when delta does not increase with
 * the parameter: doubling to bracket it, then bisection. 1 with c->value set; 0 when even
 * top does not (c->best_* set, *d its delta); -1 on a hard failure. */
static int smallest_feasible_int(calib_probe *p, double top, dp_calibration *c, double *d)
{
    double lo = 0.0, hi = 1.0;
    int f;
    while ((f = dp_calib_feasible(p, hi, d)) == 0 && hi < top) {
        lo = hi;
        hi = hi * 2.0 < top ? hi * 2.0 : top;
    }
    if (f <= 0) {
        if (f == 0)
            note_best(c, hi, *d);
        return f;
    }
    if (bisect(p, &lo, &hi, 1, 0.0, 1, d) < 0)
        return -1;
    c->value = hi;
    c->tolerance = 0.0;
    return 1;
}

/* Noise (noise_multiplier, noise_scale, or C1: more noise): the smallest feasible value in
 * [1e-4, 1e6], bracketed from 1, then bisected geometrically to within tol. */
static dpb_status solve_noise(calib_probe *p, dp_calibration *c, double tol)
{
    char msg[96];
    double d;
    int f;
    double lo, hi = 1.0;
    while ((f = dp_calib_feasible(p, hi, &d)) == 0 && hi < 1e6)
        hi *= 4.0;
    if (f < 0)
        return p->fatal;
    if (f == 0) {
        note_best(c, hi, d);
        return dpb_fail(p->err, DPB_EINFEASIBLE, "noise_multiplier",
                        "even noise_multiplier %g %s at epsilon %g", hi, gives(d, p->delta_t, msg),
                        p->eps_t);
    }
    for (lo = hi / 2.0;; lo /= 2.0) {
        if ((f = dp_calib_feasible(p, lo, &d)) < 0)
            return p->fatal;
        if (f == 0 || lo < 1e-4)
            break;
        hi = lo;
    }
    if (f == 1)
        hi = lo;
    else if (bisect(p, &lo, &hi, 0, tol, 1, &d) < 0)
        return p->fatal;
    c->value = hi;
    c->tolerance = tol;
    return DPB_OK;
}

/* Rounds per shuffled epoch: the smallest feasible integer. */
static dpb_status solve_rounds(calib_probe *p, dp_calibration *c)
{
    char msg[96];
    double d;
    int f;
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
    return DPB_OK;
}

/* A PNSGD run's dataset size: the smallest feasible integer. */
static dpb_status solve_dataset_size(calib_probe *p, dp_calibration *c)
{
    char msg[96];
    double d;
    int f;
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
        return dpb_fail(p->err, DPB_EINFEASIBLE, "dataset_size", "even %g records: %s", c->best_at,
                        gives(d, p->delta_t, msg));
    return DPB_OK;
}

/* A self-composition's count: the largest feasible integer. */
static dpb_status solve_count(calib_probe *p, dp_calibration *c)
{
    char msg[96];
    double d;
    int f;
    /* largest feasible count in [1, 2^53] */
    if ((f = dp_calib_feasible(p, 1.0, &d)) < 0)
        return p->fatal;
    if (f == 0) {
        note_best(c, 1.0, d);
        return dpb_fail(p->err, DPB_EINFEASIBLE, "count", "even one run %s at epsilon %g",
                        gives(d, p->delta_t, msg), p->eps_t);
    }
    double lo = 1.0, hi = 2.0;
    while ((f = dp_calib_feasible(p, hi, &d)) == 1 && hi < 9007199254740992.0) {
        lo = hi;
        hi *= 2.0;
    }
    if (f < 0)
        return p->fatal;
    if (f == 1)
        lo = hi;
    else if (bisect(p, &lo, &hi, 1, 0.0, 0, &d) < 0)
        return p->fatal;
    c->value = lo;
    c->tolerance = 0.0;
    return DPB_OK;
}

/* A sampling rate: the largest feasible value in (0, 1], bisected geometrically to within
 * tol. */
static dpb_status solve_rate(calib_probe *p, dp_calibration *c, double tol)
{
    char msg[96];
    double d;
    int f;
    /* largest feasible rate in (0, 1] */
    if ((f = dp_calib_feasible(p, 1.0, &d)) < 0)
        return p->fatal;
    double lo = 1e-12, hi = 1.0;
    if (f == 0) {
        if ((f = dp_calib_feasible(p, lo, &d)) < 0)
            return p->fatal;
        if (f == 0) {
            note_best(c, lo, d);
            return dpb_fail(p->err, DPB_EINFEASIBLE, "sampling_probability",
                            "even sampling_probability %g %s", lo, gives(d, p->delta_t, msg));
        }
        if (bisect(p, &lo, &hi, 0, tol, 0, &d) < 0)
            return p->fatal;
    } else {
        lo = 1.0;
    }
    c->value = lo;
    c->tolerance = lo == 1.0 ? 0.0 : tol;
    return DPB_OK;
}

/* Generic calibration by bracketing and bisection, using monotonicity in the parameter:
 * delta(eps_t) is non-increasing in noise, non-decreasing in count and sampling rate. */
static dpb_status calibrate_generic(calib_probe *p, dp_calibration *c)
{
    dp_param prm = p->node->unknown;
    double tol = p->acct == DP_ACCT_PLD || p->acct == DP_ACCT_SHUFFLE_EXACT ? 1e-4 : 1e-9;
    dpb_status st;
    if (prm == DP_PARAM_NOISE_MULTIPLIER || prm == DP_PARAM_NOISE_SCALE || prm == DP_PARAM_C1)
        st = solve_noise(p, c, tol);
    else if (prm == DP_PARAM_ROUNDS)
        st = solve_rounds(p, c);
    else if (prm == DP_PARAM_DATASET_SIZE)
        st = solve_dataset_size(p, c);
    else if (prm == DP_PARAM_COUNT)
        st = solve_count(p, c);
    else if (prm == DP_PARAM_SAMPLING_PROBABILITY)
        st = solve_rate(p, c, tol);
    else
        return dpb_fail(p->err, DPB_EUNSUPPORTED, "solve_for",
                        "%s can be solved for with the thm41 accountant only", dp_param_name(prm));
    if (st != DPB_OK)
        return st;
    /* verify the returned value, and report its conditions */
    dp_calib_set_param(p->node, c->value);
    st = dp_calib_eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &c->achieved_delta, p->rep,
                          p->err);
    if (st != DPB_OK)
        return st;
    if (!(c->achieved_delta <= p->delta_t))
        return dpb_fail(p->err, DPB_ENUMERIC, dp_param_name(prm),
                        "could not verify the solved value");
    return DPB_OK;
}

static dpb_status calibrate_run(dp_event *tmpl, dp_relation rel, dp_accountant acct,
                                const dp_options *opt, double eps_target, double delta_target,
                                dp_calibration *out, dp_report *rep, dpb_error *err)
{
    int nunk;
    dp_event *node = tmpl ? dp_event_find_unknown(tmpl, &nunk) : NULL;
    dp_calib_init(out, node ? node->unknown : DP_PARAM_NONE);
    memset(rep, 0, sizeof *rep);
    if (node == NULL || nunk != 1)
        return dpb_fail(err, DPB_EINVAL, "solve_for",
                        "exactly one event field must be left for the solver");
    if (!(isfinite(eps_target) && eps_target >= 0.0))
        return dpb_fail(err, DPB_EINVAL, "target.epsilon", "epsilon must be finite and >= 0");
    if (!(delta_target > 0.0 && delta_target < 1.0))
        return dpb_fail(err, DPB_EINVAL, "target.delta", "delta must lie strictly in (0, 1)");
    if (acct == DP_ACCT_AUTO)
        acct = dp_dispatch_auto(tmpl);
    rep->accountant = dp_accountant_name(acct);
    if (acct == DP_ACCT_GDP_CLT)
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "calibration uses certified accountants only; gdp_clt is an estimate");
    calib_probe p = {tmpl, node, rel, acct, opt, eps_target, delta_target, rep, err, DPB_OK};
    if (acct == DP_ACCT_THM41) {
        dpb_status st = dp_calib_thm41(&p, out);
        if (out->has_best && isnan(out->best_delta))
            out->has_best = 0; /* nothing certified there: no delta to report */
        return st;
    }
    if (node->unknown == DP_PARAM_ROUNDS && acct != DP_ACCT_SHUFFLE_EXACT && acct != DP_ACCT_PLD)
        return dpb_fail(err, DPB_EUNSUPPORTED, "accountant",
                        "rounds of a shuffled epoch are solved with the shuffle_exact, pld or "
                        "thm41 accountants");
    if (acct == DP_ACCT_SHUFFLE_EXACT)
        dp_calib_thm41_alongside(tmpl, rel, eps_target, delta_target, out);
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
