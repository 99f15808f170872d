/*
 * shuffle.c - seed 004 (DP-SGD with random shuffling): Theorem 4.1, its inversions, and
 * the asymptotic coefficient of Theorem 5.2. Formulas exactly as in docs/MATH.md section 2.
 *
 * Numerics: t = 1/sigma^2 is bounded by the precondition sigma^2 ln M >= 3 (t <= ln M / 3
 * <= 14.8 for M < 2^64), which is checked before any exponential is taken, so every
 * intermediate is finite. e^t - 1 and 1 - e^{-t} are formed with expm1; 1/2 - Phi(-k) as
 * erf(k/sqrt 2)/2.
 */
#include "shuffle.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "normal.h"

#define B DP_THM41_BE_CONST
#define SQRT_2PI 2.50662827463100050241576528481104525
#define SQRT_2EPI 4.13273135412249293846939188429985264 /* sqrt(2 e pi) */
#define SQRT2 1.41421356237309504880168872420969808

/* Largest sigma the sigma-interval search considers: beyond it T1 alone exceeds 1 for
 * every M < 2^64 (T1 ~ 10 B sigma^3 / sqrt(M)). */
#define SIGMA_SEARCH_MAX 1e4

dpb_status dp_thm41_eval(double sigma, uint64_t rounds, dp_thm41 *o)
{
    memset(o, 0, sizeof *o);
    o->sigma = sigma;
    o->rounds = rounds;
    if (!isfinite(sigma) || !(sigma > 0.0) || rounds == 0)
        return DPB_EINVAL;
    o->rounds_ok = rounds >= 3;
    if (!o->rounds_ok)
        return DPB_ENOTCOVERED;
    double M = (double)rounds;
    double lnM = log(M);
    o->sigma_min = sqrt(3.0 / lnM);
    o->sigma_ok = sigma * sigma * lnM >= 3.0;
    if (!o->sigma_ok)
        return DPB_ENOTCOVERED;

    double t = 1.0 / (sigma * sigma);
    double em1 = expm1(t);   /* e^t - 1 */
    double omt = -expm1(-t); /* 1 - e^{-t} */
    double et = exp(t);
    double mu = sqrt(em1 / (double)(rounds - 1));
    double coef = et * (1.0 + 4.0 * exp(-3.0 * t)) / (omt * omt);
    double mu2 = mu * mu;
    double sqrt_lnM = sqrt(lnM);

    o->mu = mu;
    o->coef = coef;
    o->term[0] = 2.0 * B * coef * mu;
    o->term[1] = mu / SQRT_2PI;
    o->term[2] = (1.0 / (4.0 * SQRT_2PI) + (1.0 / (2.0 * SQRT_2EPI)) * (1.0 + et / omt)) * mu2;
    o->term[3] = mu2 * mu / (4.0 * SQRT_2EPI);
    o->term[4] = mu2 * mu2 / (32.0 * SQRT_2EPI);
    o->term[5] = 4.52 / (2.88 * sqrt_lnM - 2.41 / sqrt_lnM) * pow(M, -25.0 / 24.0);
    double d = 0.0;
    for (int i = 5; i >= 0; i--) /* smallest first */
        d += o->term[i];
    o->delta = dp_round_up(d, DP_THM41_REL_ROUND);

    /* Condition (1), judged conservatively: lhs rounded up, rhs rounded down. */
    o->cond_lhs = dp_round_up(o->delta + B * coef * mu, DP_THM41_REL_ROUND);
    o->cond_rhs = dp_round_down(0.5 * erf(em1 / (2.0 * SQRT2)), DP_THM41_REL_ROUND);
    o->cond_ok = o->cond_lhs <= o->cond_rhs;
    o->valid = o->cond_ok;
    return o->valid ? DPB_OK : DPB_ENOTCOVERED;
}

/* The bracket shared by (3) and (4): c B e^{3t/2}(1+4e^{-3t})/(1-e^{-t})^{3/2} +
 * sqrt(e^t - 1)/sqrt(2 pi). */
static double eq34_bracket(double sigma, double c)
{
    double t = 1.0 / (sigma * sigma);
    double omt = -expm1(-t);
    return c * B * exp(1.5 * t) * (1.0 + 4.0 * exp(-3.0 * t)) / (omt * sqrt(omt)) +
           sqrt(expm1(t)) / SQRT_2PI;
}

double dp_thm41_rounds_eq3(double sigma, double delta)
{
    if (!isfinite(sigma) || !(sigma > 0.0) || !(delta > 0.0) || !(delta < 1.0))
        return NAN;
    double x = eq34_bracket(sigma, 2.0) / delta;
    return 1.0 + x * x;
}

double dp_thm41_rounds_eq4(double sigma)
{
    if (!isfinite(sigma) || !(sigma > 0.0))
        return NAN;
    double t = 1.0 / (sigma * sigma);
    double rhs = 0.5 * erf(expm1(t) / (2.0 * SQRT2));
    double x = eq34_bracket(sigma, 3.0) / rhs;
    return 1.0 + x * x;
}

static int feasible_rounds(double sigma, uint64_t M, double delta, dp_thm41 *ev)
{
    return dp_thm41_eval(sigma, M, ev) == DPB_OK && ev->delta <= delta;
}

dpb_status dp_thm41_min_rounds(double sigma, double delta, uint64_t *rounds, dp_thm41 *at)
{
    dp_thm41 ev;
    if (!isfinite(sigma) || !(sigma > 0.0) || !(delta > 0.0) || !(delta < 1.0))
        return DPB_EINVAL;
    /* Precondition sigma^2 ln M >= 3, i.e. M >= e^{3t}: below it nothing is covered. */
    double t3 = 3.0 / (sigma * sigma);
    if (t3 >= 44.0) /* e^44 > 1.2e19: beyond uint64 up to rounding; test the top only */
        t3 = 44.0;
    uint64_t lo = 2; /* invariant: lo is infeasible */
    double mfloor = floor(exp(t3));
    if (mfloor > 3.0 && mfloor < 1.8e19)
        lo = (uint64_t)mfloor - 1;
    const uint64_t top = DP_THM41_MAX_ROUNDS;
    uint64_t hi;
    double guess = dp_thm41_rounds_eq3(sigma, delta);
    if (!(guess < (double)top))
        hi = top;
    else
        hi = (uint64_t)guess > lo + 1 ? (uint64_t)guess : lo + 1;
    if (lo >= top)
        return DPB_EINFEASIBLE;
    /* Grow hi until feasible (invariant: hi feasible after the loop). */
    while (!feasible_rounds(sigma, hi, delta, &ev)) {
        if (hi == top)
            return DPB_EINFEASIBLE;
        lo = hi;
        hi = hi > top / 2 ? top : hi * 2;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (feasible_rounds(sigma, mid, delta, &ev))
            hi = mid;
        else
            lo = mid;
    }
    *rounds = hi;
    if (at)
        dp_thm41_eval(sigma, hi, at);
    return DPB_OK;
}

/* Merit for the sigma search: <= 1 exactly when the theorem certifies delta at (sigma, M). */
static double sigma_merit(double sigma, uint64_t M, double delta)
{
    dp_thm41 ev;
    dpb_status s = dp_thm41_eval(sigma, M, &ev);
    if (!ev.sigma_ok || s == DPB_EINVAL)
        return HUGE_VAL;
    double a = ev.delta / delta, b = ev.cond_lhs / ev.cond_rhs;
    return a > b ? a : b;
}

/* Certified delta at sigma, or +inf where the theorem does not apply. */
static double sigma_certified(double sigma, uint64_t M)
{
    dp_thm41 ev;
    return dp_thm41_eval(sigma, M, &ev) == DPB_OK ? ev.delta : HUGE_VAL;
}

/* Minimise f over ln sigma in [ln a, ln b]: a coarse log grid (robust against flat or
 * infinite stretches), then golden-section search between the best point's neighbours.
 * Returns the minimiser and writes the minimum to *fmin. */
static double minimise_log(double (*f)(double, uint64_t, double), uint64_t M, double delta,
                           double a, double b, double *fmin)
{
    enum { GRID = 240 };
    double la = log(a), lb = log(b);
    double best_u = la, best_f = HUGE_VAL;
    int best_i = 0;
    for (int i = 0; i <= GRID; i++) {
        double u = la + (lb - la) * i / GRID;
        double v = f(exp(u), M, delta);
        if (v < best_f) {
            best_f = v;
            best_u = u;
            best_i = i;
        }
    }
    if (!(best_f < HUGE_VAL)) {
        *fmin = HUGE_VAL;
        return exp(best_u);
    }
    double lo = la + (lb - la) * (best_i > 0 ? best_i - 1 : 0) / GRID;
    double hi = la + (lb - la) * (best_i < GRID ? best_i + 1 : GRID) / GRID;
    const double g = 0.38196601125010515180; /* 2 - phi */
    double x1 = lo + g * (hi - lo), x2 = hi - g * (hi - lo);
    double f1 = f(exp(x1), M, delta), f2 = f(exp(x2), M, delta);
    for (int it = 0; it < 120 && hi - lo > 1e-15 * fabs(hi) + 1e-300; it++) {
        if (f1 <= f2) {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = lo + g * (hi - lo);
            f1 = f(exp(x1), M, delta);
        } else {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = hi - g * (hi - lo);
            f2 = f(exp(x2), M, delta);
        }
    }
    double u = f1 <= f2 ? x1 : x2, v = f1 <= f2 ? f1 : f2;
    if (best_f < v) {
        u = best_u;
        v = best_f;
    }
    *fmin = v;
    return exp(u);
}

static double certified_adapter(double sigma, uint64_t M, double delta)
{
    (void)delta;
    return sigma_certified(sigma, M);
}

/* One end of the feasible sigma interval (sigma_merit <= 1) within [a, b], where the end
 * feasible_at_b names (b if set, else a) is feasible: the other end itself when it is
 * feasible too, else bisection to 1e-13 relative, returning the last feasible point. */
static double feasible_edge(double a, double b, int feasible_at_b, uint64_t rounds, double delta)
{
    double far = feasible_at_b ? a : b;
    if (sigma_merit(far, rounds, delta) <= 1.0)
        return far;
    for (int i = 0; i < 200 && b - a > 1e-13 * b; i++) {
        double m = 0.5 * (a + b);
        if ((sigma_merit(m, rounds, delta) <= 1.0) == (feasible_at_b != 0))
            b = m;
        else
            a = m;
    }
    return feasible_at_b ? b : a;
}

dpb_status dp_thm41_sigma_interval(uint64_t rounds, double delta, double *lo, double *hi,
                                   double *best_delta, double *best_sigma)
{
    if (rounds == 0 || !(delta > 0.0) || !(delta < 1.0))
        return DPB_EINVAL;
    *best_delta = HUGE_VAL;
    *best_sigma = NAN;
    if (rounds < 3)
        return DPB_EINFEASIBLE;
    double smin = sqrt(3.0 / log((double)rounds));
    while (smin * smin * log((double)rounds) < 3.0)
        smin = nextafter(smin, HUGE_VAL);
    double smax = SIGMA_SEARCH_MAX;

    double bd;
    double bs = minimise_log(certified_adapter, rounds, delta, smin, smax, &bd);
    *best_delta = bd;
    *best_sigma = bd < HUGE_VAL ? bs : NAN;

    double hmin;
    double sstar = minimise_log(sigma_merit, rounds, delta, smin, smax, &hmin);
    if (!(hmin <= 1.0))
        return DPB_EINFEASIBLE;

    /* Left end: smallest feasible sigma (returned value is feasible, i.e. rounded up). */
    *lo = feasible_edge(smin, sstar, 1, rounds, delta);
    /* Right end: largest feasible sigma (rounded down). */
    *hi = feasible_edge(sstar, smax, 0, rounds, delta);
    return DPB_OK;
}

double dp_thm41_regime_delta_max(double sigma)
{
    if (!isfinite(sigma) || !(sigma > 0.0))
        return NAN;
    double t = 1.0 / (sigma * sigma);
    double kappa = expm1(t) / 2.0; /* may be +inf for tiny sigma: erf(inf) = 1 */
    return (2.0 / 3.0) * 0.5 * erf(kappa / SQRT2);
}

dpb_status dp_thm41_regime_sigma_max(double delta, double *sigma)
{
    if (!(delta > 0.0) || !(delta < 1.0 / 3.0))
        return DPB_EINVAL;
    /* delta_max is decreasing in sigma from 1/3 to 0. */
    double a = 1e-3, b = 1e8; /* delta_max(a) >= delta > delta_max(b) for sane delta */
    if (dp_thm41_regime_delta_max(b) >= delta)
        return DPB_EINVAL;
    if (dp_thm41_regime_delta_max(a) < delta)
        return DPB_EINVAL;
    for (int i = 0; i < 300 && b - a > 1e-15 * b; i++) {
        double m = 0.5 * (a + b);
        if (dp_thm41_regime_delta_max(m) >= delta)
            a = m;
        else
            b = m;
    }
    *sigma = a;
    return DPB_OK;
}

uint64_t dp_thm41_min_dataset(double sigma, uint64_t rounds, double clip, double ratio)
{
    double x = clip * sigma * (double)rounds / ratio;
    if (!(x < 1.8e19))
        return UINT64_MAX;
    double r = nearbyint(x);
    /* x carries the rounding of ratio (0.1 is not a double): snap to an integer within
     * a relative 1e-12 of it rather than adding a spurious one. */
    if (fabs(x - r) <= 1e-12 * x)
        return (uint64_t)r;
    return (uint64_t)ceil(x);
}

dpb_status dp_thm52_mu(double sigma, uint64_t rounds, double *mu)
{
    if (!isfinite(sigma) || !(sigma > 0.0) || rounds < 2)
        return DPB_EINVAL;
    double t = 1.0 / (sigma * sigma);
    double em1 = expm1(t);
    if (!isfinite(em1))
        return DPB_EINVAL;
    *mu = sqrt(em1 / (double)(rounds - 1));
    return DPB_OK;
}

double dp_tv_log1m(double delta)
{
    return log1p(-delta);
}

double dp_tv_delta_of_sum(double s)
{
    double d = dp_round_up(-expm1(s), 1e-14);
    return d > 1.0 ? 1.0 : d;
}

double dp_tv_per_epoch(double delta, uint64_t epochs)
{
    /* Rounded down by more than dp_tv_delta_of_sum rounds up, so the composition of the
     * returned per-epoch delta stays within the total (verified by callers anyway). */
    if (epochs <= 1)
        return dp_round_down(delta, 1e-13);
    return dp_round_down(-expm1(log1p(-delta) / (double)epochs), 1e-13);
}
