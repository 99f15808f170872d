/*
 * pld.c - the privacy-loss distribution itself: allocation and copy, the tails' trimming,
 * and the answers read from it, delta(eps) and eps(delta), with the round-off bound of a
 * composed (or tilted) one. It calls nothing of the other pld_*.c files; they call it
 * (pld_int.h). The leaves are built in pld_leaf.c, composed in pld_compose.c.
 *
 * Invariants of a pld_pmf: n >= 1, p[i] >= 0, sum p + inf_mass >= the true total (mass is
 * only ever moved to a larger loss or added, never removed from the upper side).
 */
#include "pld_int.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "normal.h"

void pld_free(pld_pmf *d)
{
    if (d == NULL)
        return;
    free(d->p);
    d->p = NULL;
    d->n = 0;
}

dpb_status pld_pmf_alloc(pld_pmf *d, double h, int64_t lo, size_t n)
{
    if (n == 0 || n > PLD_MAX_POINTS)
        return DPB_ELIMIT;
    d->p = calloc(n, sizeof *d->p);
    if (d->p == NULL)
        return DPB_ENOMEM;
    d->h = h;
    d->lo = lo;
    d->n = n;
    d->inf_mass = 0.0;
    d->roundoff = 0.0;
    d->tilt = (pld_tilt_err){0};
    d->floor = -HUGE_VAL;
    d->steps = 1.0;
    d->gauss_mu = 0.0;
    return DPB_OK;
}

dpb_status pld_copy(const pld_pmf *src, pld_pmf *dst)
{
    dpb_status st = pld_pmf_alloc(dst, src->h, src->lo, src->n);
    if (st != DPB_OK)
        return st;
    double *p = dst->p;
    memcpy(p, src->p, src->n * sizeof *src->p);
    *dst = *src; /* every other field as it is */
    dst->p = p;
    return DPB_OK;
}

/* delta(eps) of the exact Gaussian law (pld_gaussian_exact), before rounding up: the closed
 * form for eps >= 0; below, from the pair's symmetry, delta(eps) = 1 - e^eps + e^eps
 * delta(-eps) (the hockey-stick divergence of the reversed pair, which is the same pair). */
static double gauss_exact_delta(double mu, double eps)
{
    double d = 1.0, ld;
    if (eps != eps)
        return 1.0;
    if (eps >= 0.0) {
        if (isinf(eps))
            return 0.0;
        return dp_gdp_delta(mu, eps, &d, &ld) == DPB_OK ? d : 1.0;
    }
    if (isinf(eps) || dp_gdp_delta(mu, -eps, &d, &ld) != DPB_OK)
        return 1.0;
    double v = -expm1(eps) + exp(eps) * d;
    return v < 1.0 ? v * (1.0 + 4.0 * DBL_EPSILON) : 1.0;
}

/* Move tiny tails: the top bins whose total is <= PLD_TAIL to +infinity, the bottom bins
 * whose total is <= PLD_TAIL up to the first kept bin. Shrinks the array in place. */
void pld_trim_tails(pld_pmf *d)
{
    size_t top = d->n, bot = 0;
    double cum = 0.0;
    while (top > 1 && cum + d->p[top - 1] <= PLD_TAIL)
        cum += d->p[--top];
    d->inf_mass += cum;
    cum = 0.0;
    while (bot + 1 < top && cum + d->p[bot] <= PLD_TAIL)
        cum += d->p[bot++];
    d->p[bot] += cum;
    if (bot > 0)
        memmove(d->p, d->p + bot, (top - bot) * sizeof *d->p);
    d->lo += (int64_t)bot;
    d->n = top - bot;
}

double pld_sum_mass(const pld_pmf *d)
{
    double s = 0.0;
    for (size_t i = 0; i < d->n; i++)
        s += d->p[i];
    return s * (1.0 + (double)d->n * DBL_EPSILON);
}

/* The sum of a_m over the kept points above eps (tilted compositions: pld_tilt_err). */
double pld_tilt_roundoff(const pld_tilt_err *t, double h, double eps)
{
    if (eps != eps)
        return 1.0;
    int64_t a = t->lo + 1;
    if (eps >= (double)a * h) {
        if (eps >= (double)t->hi * h)
            return 0.0;
        a = (int64_t)floor(eps / h) + 1;
        while (a > t->lo + 1 && (double)(a - 1) * h > eps)
            a--;
        while ((double)a * h <= eps)
            a++;
    }
    if (a > t->hi)
        return 0.0;
    /* sum_{m=a}^{hi} e^{x_m} and of e^{2 x_m}, x_m = logw - theta m h: geometric */
    double th = t->theta * h, cnt = (double)(t->hi - a + 1), x = t->logw - t->theta * (double)a * h;
    double s1 = exp(x) * (expm1(-th * cnt) / expm1(-th));
    double s2 = exp(2.0 * x) * (expm1(-2.0 * th * cnt) / expm1(-2.0 * th));
    double r1 = t->ept * s1, r2 = t->e2 * sqrt(s2);
    double r = (r1 < r2 ? r1 : r2) * t->scale;
    return r == r && r < 1.0 ? r : 1.0;
}

double pld_roundoff_at(const pld_pmf *d, double eps)
{
    return d->tilt.theta != 0.0 ? pld_tilt_roundoff(&d->tilt, d->h, eps) : d->roundoff;
}

/* ---- delta and epsilon ------------------------------------------------------------------- */

double pld_delta(const pld_pmf *d, double eps)
{
    if (d->gauss_mu > 0.0) {
        double v = dp_round_up(d->inf_mass + gauss_exact_delta(d->gauss_mu, eps), 1e-12);
        return v < 1.0 ? v : 1.0;
    }
    double s = 0.0;
    for (size_t i = d->n; i-- > 0;) {
        double l = (double)(d->lo + (int64_t)i) * d->h;
        if (l <= eps)
            break;
        s += d->p[i] * -expm1(eps - l);
    }
    double delta = dp_round_up(d->inf_mass + pld_roundoff_at(d, eps) + s, 1e-12);
    return delta > 1.0 ? 1.0 : delta;
}

double pld_epsilon(const pld_pmf *d, double delta)
{
    if (d->gauss_mu > 0.0) { /* the closed form's inverse, checked against pld_delta */
        double e;
        if (!(delta > d->inf_mass))
            return HUGE_VAL;
        if (pld_delta(d, 0.0) <= delta)
            return 0.0;
        if (dp_gdp_epsilon(d->gauss_mu, (delta - d->inf_mass) * (1.0 - 4.0 * DBL_EPSILON), &e) !=
            DPB_OK)
            return HUGE_VAL;
        for (int k = 0; k < 64 && pld_delta(d, e) > delta; k++)
            e = e * (1.0 + 1e-10) + 1e-12;
        return pld_delta(d, e) <= delta ? e : HUGE_VAL;
    }
    int tilted = d->tilt.theta != 0.0;
    if (d->inf_mass + (tilted ? 0.0 : d->roundoff) > delta)
        return HUGE_VAL;
    /* For eps in [l_{i-1}, l_i): delta(eps) = A_i + R_i - e^eps B_i with A_i = inf +
     * sum_{k>=i} p_k, B_i = sum_{k>=i} p_k e^{-l_k} and R_i the round-off bound (for a tilted
     * composition the same over the interval: the points above eps are the same). Walk down
     * until the root falls in the interval; where it does not above 0, the answer may be 0
     * (checked by the direct sum, which reads every point above 0: only then). */
    double A = d->inf_mass + (tilted ? 0.0 : d->roundoff), B = 0.0, eps = 0.0;
    /* e^{-l} by recursion down the grid, recomputed every 64 points: the walk only finds the
     * interval and a first value, which the direct sum then checks */
    double el = 0.0, eh = exp(d->h);
    int found = 0;
    for (size_t i = d->n, k = 0; i-- > 0; k++) {
        double l = (double)(d->lo + (int64_t)i) * d->h;
        if (l <= 0.0)
            break;
        el = (k & 63) == 0 ? exp(-l) : el * eh;
        A += d->p[i];
        B += d->p[i] * el;
        double lprev = l - d->h;
        if (lprev < 0.0)
            lprev = 0.0;
        /* e^{lprev} B (NaN where e^{-l} underflows: the closed form cannot be used there);
         * a tilted bound at lprev is at most d->roundoff (its value at the floor): it is
         * evaluated only where it could decide (each costs six exponentials) */
        double eB = lprev == 0.0 ? B : el > 0.0 ? B / (el * eh) : B > 0.0 ? HUGE_VAL : NAN;
        double R = 0.0;
        if (tilted && A + d->roundoff - eB > delta)
            R = pld_tilt_roundoff(&d->tilt, d->h, lprev);
        if (A + R - eB > delta) {
            eps = B > 0.0 ? log((A + R - delta) / B) : l;
            if (eps < lprev)
                eps = lprev;
            if (eps > l)
                eps = l;
            found = 1;
            break;
        }
    }
    if (!found && pld_delta(d, 0.0) <= delta)
        return 0.0;
    /* Round up and verify with the direct sum. */
    eps = dp_round_up(eps, 1e-12) + 1e-15;
    double dv = pld_delta(d, eps);
    for (int k = 0; k < 64 && dv > delta; k++) {
        eps = eps * (1.0 + 1e-10) + 1e-12;
        dv = pld_delta(d, eps);
    }
    if (dv > delta) {
        /* the closed form was off (masses e^{-l} below the doubles' range, or a tilted bound
         * reaching past the last point): bisect up to the top grid point, or the tilted
         * bound's, where only the mass at infinity and the round-off bound are left */
        double lo = eps, hi = (double)(d->lo + (int64_t)d->n - 1) * d->h;
        if (tilted && (double)d->tilt.hi * d->h > hi)
            hi = (double)d->tilt.hi * d->h;
        if (!(hi > lo) || pld_delta(d, hi) > delta)
            return HUGE_VAL;
        for (int k = 0; k < 200 && hi - lo > 1e-12 * hi; k++) {
            double mid = 0.5 * (lo + hi);
            if (pld_delta(d, mid) > delta)
                lo = mid;
            else
                hi = mid;
        }
        eps = hi;
    }
    return eps;
}
