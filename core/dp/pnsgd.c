/*
 * pnsgd.c - projected noisy SGD accounting (seed 000; docs/MATH.md section 3).
 *
 * Conservative rounding: delta grows with A and with B, so A is rounded up and b = 1 - B
 * rounded down; the final delta is rounded up by PNSGD_REL_ROUND (above the accumulated
 * floating-point error of a handful of operations).
 */
#include "pnsgd.h"

#include <float.h>
#include <math.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_sf_lambert.h>

#include "normal.h"

#define PNSGD_REL_ROUND 1e-12
#define TWO_PI 6.28318530717958647692528676655900577
/* Online products: terms summed exactly up to this many, the rest bounded by integrals. */
#define ONLINE_EXACT_TERMS 100000

static int pos(double x)
{
    return isfinite(x) && x > 0.0;
}

dpb_status pnsgd_check(const pnsgd_params *p, dpb_error *err)
{
    if (!pos(p->lipschitz))
        return dpb_fail(err, DPB_EINVAL, "lipschitz", "lipschitz must be a positive number");
    if (!pos(p->smoothness))
        return dpb_fail(err, DPB_EINVAL, "smoothness", "smoothness (beta) must be positive");
    if (!(isfinite(p->strong_convexity) && p->strong_convexity >= 0.0))
        return dpb_fail(err, DPB_EINVAL, "strong_convexity", "strong_convexity (rho) must be >= 0");
    if (!pos(p->learning_rate))
        return dpb_fail(err, DPB_EINVAL, "learning_rate", "learning_rate (eta) must be positive");
    double b = p->smoothness, r = p->strong_convexity, e = p->learning_rate;
    if (2.0 * e * b * r > b + r)
        return dpb_fail(err, DPB_EINVAL, "learning_rate",
                        "2 eta beta rho > beta + rho (%.6g > %.6g): the contraction constant "
                        "sqrt(1 - 2 eta beta rho/(beta + rho)) is undefined; lower the "
                        "learning rate",
                        2.0 * e * b * r, b + r);
    if (p->noise == PNSGD_GAUSSIAN && !pos(p->diameter))
        return dpb_fail(err, DPB_EINVAL, "diameter", "diameter of the constraint set must be > 0");
    if (p->noise == PNSGD_LAPLACE && !(isfinite(p->lo) && isfinite(p->hi) && p->lo < p->hi))
        return dpb_fail(err, DPB_EINVAL, "interval",
                        "interval [a, b] must have finite a < b (it is empty otherwise)");
    if (p->n == 0)
        return dpb_fail(err, DPB_EINVAL, "dataset_size", "dataset_size must be >= 1");
    if (p->order == PNSGD_FIXED && !(p->index >= 1 && p->index <= p->n))
        return dpb_fail(err, DPB_EINVAL, "index", "index must lie in [1, dataset_size]");
    if (p->order == PNSGD_STOPPED && p->index > p->n)
        return dpb_fail(err, DPB_EINVAL, "index", "index must lie in [1, dataset_size]");
    switch (p->mode) {
    case PNSGD_NOISE_GIVEN:
        if (!pos(p->noise_level))
            return dpb_fail(err, DPB_EINVAL,
                            p->noise == PNSGD_GAUSSIAN ? "noise_std" : "laplace_scale",
                            "the noise level must be a positive number");
        break;
    case PNSGD_NOISE_SCHEDULE:
    case PNSGD_NOISE_ONLINE:
        if (!pos(p->c1) || !(isfinite(p->c2) && p->c2 >= 0.0))
            return dpb_fail(err, DPB_EINVAL, "schedule", "c1 must be > 0 and c2 >= 0");
        if (p->mode == PNSGD_NOISE_ONLINE) {
            if (!(isfinite(p->alpha) && p->alpha > 1.0))
                return dpb_fail(err, DPB_EINVAL, "schedule.alpha",
                                "alpha must be > 1 (Theorems 5 and 6): with alpha <= 1 the "
                                "product does not converge");
            if (p->order != PNSGD_FIXED)
                return dpb_fail(err, DPB_EINVAL, "order",
                                "the online schedule is per index: order must be fixed_index");
        }
        if (p->noise == PNSGD_LAPLACE && !(1.0 / p->c1 + p->c2 > 1.0))
            return dpb_fail(err, DPB_EINVAL, "schedule",
                            "the Laplace schedule needs 1/c1 + c2 > 1 so that its logarithm "
                            "is positive");
        break;
    }
    return DPB_OK;
}

double pnsgd_contraction(const pnsgd_params *p)
{
    double b = p->smoothness, r = p->strong_convexity;
    if (r == 0.0)
        return 1.0;
    double x = 1.0 - 2.0 * p->learning_rate * b * r / (b + r);
    return x > 0.0 ? sqrt(x) : 0.0;
}

double pnsgd_theta(double eps, double r)
{
    if (!(r > 0.0))
        return 0.0;
    double d;
    if (dp_gdp_delta(r, eps, &d, NULL) != DPB_OK)
        return 1.0;
    return d;
}

double pnsgd_one_minus_theta(double eps, double r)
{
    if (!(r > 0.0))
        return 1.0;
    /* 1 - theta = Phi(u) + e^eps Q(u + r) = Phi(u) + phi(u) m(u + r), u = eps/r - r/2 */
    double u = eps / r - r / 2.0;
    double v = dp_Phi(u) + dp_npdf(u) * dp_mills(u + r);
    return v > 1.0 ? 1.0 : v;
}

/* W0 for arguments too large for GSL: Newton on w + ln w = ln x. */
static double lambert_w0(double x)
{
    gsl_sf_result r;
    if (x < 1e300 && gsl_sf_lambert_W0_e(x, &r) == GSL_SUCCESS)
        return r.val;
    double lx = log(x), w = lx - log(lx);
    for (int i = 0; i < 50; i++) {
        double dw = (w + log(w) - lx) / (1.0 + 1.0 / w);
        w -= dw;
        if (fabs(dw) < 1e-16 * w)
            break;
    }
    return w;
}

/* ln(x^a / c1 + c2) without overflow for huge x^a. */
static double log_pow_over(double x, double a, double c1, double c2)
{
    double l = a * log(x) - log(c1);
    return l > 700.0 ? l + log1p(c2 * exp(-l)) : log(exp(l) + c2);
}

double pnsgd_noise_at(const pnsgd_params *p, uint64_t j)
{
    double c = pnsgd_contraction(p), eta = p->learning_rate;
    double width = p->noise == PNSGD_GAUSSIAN ? p->diameter : p->hi - p->lo;
    double x = 0.0, a = 1.0;
    switch (p->mode) {
    case PNSGD_NOISE_GIVEN:
        return p->noise_level;
    case PNSGD_NOISE_SCHEDULE:
        x = (double)p->n;
        break;
    case PNSGD_NOISE_ONLINE:
        x = (double)j;
        a = p->alpha;
        break;
    }
    if (p->noise == PNSGD_LAPLACE) /* v = c (b-a) / (2 eta ln(x^a/C1 + C2)) */
        return c * width / (2.0 * eta * log_pow_over(x, a, p->c1, p->c2));
    /* s = c D / (2 eta sqrt(W0(x^{2a}/(2 pi C1^2) + C2))) */
    double l = 2.0 * a * log(x) - log(TWO_PI * p->c1 * p->c1);
    double arg = l > 690.0 ? HUGE_VAL : exp(l) + p->c2;
    double w = isinf(arg) ? lambert_w0(exp(fmin(l, 709.0))) : lambert_w0(arg);
    if (isinf(arg)) /* W0(e^l) for l beyond the double range: w + ln w = l */
        for (int i = 0; i < 60; i++)
            w -= (w + log(w) - l) / (1.0 + 1.0 / w);
    return c * width / (2.0 * eta * sqrt(w));
}

/* A (rounded up), b = 1 - B (rounded down) and ln B for the noise level s at eps. ln B is
 * taken from B itself when B < 1/2 (accurate there) and from log1p(-b) otherwise. */
static void a_and_b(const pnsgd_params *p, double s, double eps, double *A, double *b, double *lnB)
{
    double c = pnsgd_contraction(p), eta = p->learning_rate, L = p->lipschitz, B;
    if (p->noise == PNSGD_GAUSSIAN) {
        double r = c * p->diameter / (eta * s);
        *A = pnsgd_theta(eps, 2.0 * L / s);
        *b = dp_round_down(pnsgd_one_minus_theta(eps, r), 1e-13);
        B = pnsgd_theta(eps, r); /* rounded up */
    } else {
        double ta = eps / 2.0 - L / s;
        *A = ta < 0.0 ? dp_round_up(-expm1(ta), 1e-14) : 0.0;
        double tb = eps / 2.0 - c * (p->hi - p->lo) / (2.0 * eta * s);
        *b = tb < 0.0 ? dp_round_down(exp(tb), 1e-14) : 1.0;
        B = tb < 0.0 ? dp_round_up(-expm1(tb), 1e-14) : 0.0;
    }
    if (*A > 1.0)
        *A = 1.0;
    if (lnB)
        *lnB = B < 0.5 ? (B > 0.0 ? log(B) : -HUGE_VAL) : log1p(-*b);
}

/* (1 - B^k) / (n (1 - B)) with B = 1 - b, stable for b -> 0 and huge k. */
static double avg_power(double b, double lnB, double k, double n)
{
    if (b >= 1.0)
        return 1.0 / n; /* B = 0: only the first term */
    if (b <= 0.0)
        return k / n;
    return -expm1(k * lnB) / (n * b);
}

/* Monotone term of the online product: f(t) = ln B_t = ln(1 - b_t), continuous in t. The
 * tails to infinity are integrated after t = m e^x, which turns the slow t^{-alpha} decay into
 * an exponential one that quadrature handles well. */
typedef struct {
    const pnsgd_params *p;
    double eps, m;
} online_ctx;

static double online_b(const pnsgd_params *p, double eps, double t)
{
    if (p->noise == PNSGD_LAPLACE) {
        /* b_t = C1 e^{eps/2} / (t^alpha + C1 C2), exactly (seed 000 Thm 5) */
        double l = p->alpha * log(t);
        double denom = l > 700.0 ? HUGE_VAL : exp(l) + p->c1 * p->c2;
        double b = p->c1 * exp(eps / 2.0) / denom;
        return b > 1.0 ? 1.0 : b;
    }
    double l = 2.0 * p->alpha * log(t) - log(TWO_PI * p->c1 * p->c1);
    double w = l > 690.0 ? 0.0 : lambert_w0(exp(l) + p->c2);
    if (l > 690.0) {
        w = l - log(l);
        for (int i = 0; i < 60; i++)
            w -= (w + log(w) - l) / (1.0 + 1.0 / w);
    }
    return pnsgd_one_minus_theta(eps, 2.0 * sqrt(w));
}

static double online_f(double t, void *vctx)
{
    online_ctx *c = vctx;
    double b = online_b(c->p, c->eps, t);
    return b >= 1.0 ? -1e300 : log1p(-b);
}

/* f(m e^x) m e^x: the integrand after t = m e^x */
static double online_f_exp(double x, void *vctx)
{
    online_ctx *c = vctx;
    double t = c->m * exp(x);
    return isinf(t) ? 0.0 : online_f(t, vctx) * t;
}

/* integral of f over [from, to] (to may be +inf), with GSL's error estimate. */
static int online_integral(const pnsgd_params *p, double eps, double from, double to, double *val,
                           double *abserr)
{
    online_ctx c = {p, eps, from};
    gsl_function F = {online_f, &c}, G = {online_f_exp, &c};
    gsl_integration_workspace *w = gsl_integration_workspace_alloc(1000);
    if (w == NULL)
        return -1;
    int st = isinf(to) ? gsl_integration_qagiu(&G, 0.0, 0.0, 1e-12, 1000, w, val, abserr)
                       : gsl_integration_qags(&F, from, to, 0.0, 1e-12, 1000, w, val, abserr);
    gsl_integration_workspace_free(w);
    return st == GSL_SUCCESS || st == GSL_EROUND ? 0 : -1;
}

/* sum_{t=i+1}^{min(n, i+K)} ln B_t exactly; *last receives the last t summed. */
static double online_exact_sum(const pnsgd_params *p, double eps, uint64_t i, uint64_t n,
                               uint64_t *last)
{
    double s = 0.0;
    uint64_t t = i + 1, stop = n - i > ONLINE_EXACT_TERMS ? i + ONLINE_EXACT_TERMS : n;
    for (; t <= stop; t++) {
        double b = online_b(p, eps, (double)t);
        if (b >= 1.0)
            return -HUGE_VAL;
        s += log1p(-dp_round_down(b, 1e-13));
    }
    *last = stop;
    return s;
}

dpb_status pnsgd_delta(const pnsgd_params *p, double eps, double *delta)
{
    if (!(isfinite(eps) && eps >= 0.0))
        return DPB_EINVAL;
    if (pnsgd_check(p, NULL) != DPB_OK)
        return DPB_EINVAL;
    double A, b, n = (double)p->n, d;
    if (p->mode == PNSGD_NOISE_ONLINE) {
        uint64_t i = p->index, last = i;
        double si = pnsgd_noise_at(p, i), bi;
        a_and_b(p, si, eps, &A, &bi, NULL);
        double s = p->n > i ? online_exact_sum(p, eps, i, p->n, &last) : 0.0;
        if (last < p->n && isfinite(s)) {
            /* the terms increase with t: sum_{t=last+1}^{n} f(t) <= int_{last+1}^{n+1} f */
            double v, e;
            if (online_integral(p, eps, (double)last + 1.0, n + 1.0, &v, &e) != 0)
                return DPB_ENUMERIC;
            s += v + e;
        }
        d = A * exp(s);
    } else {
        double lnB;
        a_and_b(p, pnsgd_noise_at(p, 1), eps, &A, &b, &lnB);
        switch (p->order) {
        case PNSGD_FIXED: {
            double k = n - (double)p->index;
            d = k == 0.0 ? A : (b >= 1.0 ? 0.0 : A * exp(k * lnB));
            break;
        }
        case PNSGD_STOPPED: {
            uint64_t i = p->index ? p->index : 1; /* the worst index is the first */
            d = A * avg_power(b, lnB, n - (double)i + 1.0, n);
            break;
        }
        case PNSGD_SHUFFLED:
        default:
            d = A * avg_power(b, lnB, n, n);
            break;
        }
    }
    d = dp_round_up(d, PNSGD_REL_ROUND);
    *delta = d > 1.0 ? 1.0 : d;
    return DPB_OK;
}

double pnsgd_schedule_limit(pnsgd_noise noise, double eps, double c1)
{
    double x = (noise == PNSGD_GAUSSIAN ? 2.0 : 1.0) * c1 * exp(eps / 2.0);
    return -expm1(-x) / x;
}

dpb_status pnsgd_schedule_c1(pnsgd_noise noise, double eps, double delta_star, double *c1)
{
    if (!(delta_star > 0.0 && delta_star < 1.0) || !(isfinite(eps) && eps >= 0.0))
        return DPB_EINVAL;
    /* g(x) = (1 - e^{-x})/x decreases from 1 to 0: bisect in log x */
    double lo = 1e-12, hi = 1.0;
    while (-expm1(-hi) / hi > delta_star && hi < 1e300)
        hi *= 2.0;
    for (int i = 0; i < 400 && hi / lo - 1.0 > 1e-15; i++) {
        double mid = sqrt(lo * hi);
        if (-expm1(-mid) / mid > delta_star)
            lo = mid;
        else
            hi = mid;
    }
    /* the returned C1 reaches the target (larger C1, smaller delta*) */
    *c1 = hi / ((noise == PNSGD_GAUSSIAN ? 2.0 : 1.0) * exp(eps / 2.0));
    return DPB_OK;
}

dpb_status pnsgd_online_limit(const pnsgd_params *p, double eps, double *lower, double *upper)
{
    if (p->mode != PNSGD_NOISE_ONLINE || pnsgd_check(p, NULL) != DPB_OK ||
        !(isfinite(eps) && eps >= 0.0))
        return DPB_EINVAL;
    uint64_t i = p->index, last = i;
    double A, bi;
    a_and_b(p, pnsgd_noise_at(p, i), eps, &A, &bi, NULL);
    pnsgd_params q = *p;
    q.n = UINT64_MAX;
    double s = online_exact_sum(&q, eps, i, UINT64_MAX, &last);
    if (!isfinite(s)) {
        *lower = *upper = 0.0;
        return DPB_OK;
    }
    /* increasing terms: int_{last}^inf f <= sum_{t>last} f(t) <= int_{last+1}^inf f */
    double vl, el, vu, eu;
    if (online_integral(p, eps, (double)last, HUGE_VAL, &vl, &el) != 0 ||
        online_integral(p, eps, (double)last + 1.0, HUGE_VAL, &vu, &eu) != 0)
        return DPB_ENUMERIC;
    *lower = dp_round_down(A * exp(s + vl - el), 1e-12);
    *upper = dp_round_up(A * exp(s + vu + eu), PNSGD_REL_ROUND);
    if (*upper > 1.0)
        *upper = 1.0;
    return DPB_OK;
}

double pnsgd_kov_delta(double eps0, double delta0, uint64_t E, double eps_total)
{
    /* delta' = 1 - (1-d)^E + (1-d)^E sum_{k > k0} C(E,k) p^k (1-p)^{E-k}
     *          (1 - e^{eps' - (2k-E) eps}),  p = e^eps/(1+e^eps); every term >= 0. */
    double Ed = (double)E;
    double lq = log1p(-delta0) * Ed; /* ln (1-d)^E */
    double s = 0.0;
    if (eps0 == 0.0) {
        s = 0.0; /* (2k - E) * 0 > eps' never holds for eps' >= 0 */
    } else {
        double lp = -log1p(exp(-eps0)), l1p = -log1p(exp(eps0)); /* ln p, ln(1-p) */
        /* ln C(E,k) p^k (1-p)^{E-k}, by ratios from k = E downwards */
        double lt = Ed * lp;
        for (uint64_t k = E;; k--) {
            double x = eps_total - (2.0 * (double)k - Ed) * eps0;
            if (x >= 0.0)
                break;
            s += exp(lt) * -expm1(x);
            if (k == 0)
                break;
            lt += log((double)k / (Ed - (double)k + 1.0)) + l1p - lp;
        }
    }
    double d = -expm1(lq) + exp(lq) * s;
    d = dp_round_up(d, 1e-11);
    return d > 1.0 ? 1.0 : d;
}

dpb_status pnsgd_epochs_delta(const pnsgd_params *p, uint64_t E, double eps_total, double *delta)
{
    if (E == 0 || !(isfinite(eps_total) && eps_total >= 0.0))
        return DPB_EINVAL;
    if (E == 1)
        return pnsgd_delta(p, eps_total, delta);
    /* every per-pass eps0 gives a valid bound: take the best over a grid, then refine */
    enum { GRID = 48 };
    double best = 1.0, best_e = 0.0;
    for (int g = 0; g <= GRID; g++) {
        double e0 = eps_total > 0.0 ? eps_total * pow(1e-4, 1.0 - (double)g / GRID) : 0.0;
        if (g == 0)
            e0 = 0.0;
        double d0, d;
        dpb_status st = pnsgd_delta(p, e0, &d0);
        if (st != DPB_OK)
            return st;
        d = pnsgd_kov_delta(e0, d0, E, eps_total);
        if (d < best) {
            best = d;
            best_e = e0;
        }
    }
    /* golden-section refinement around the best grid point (log scale) */
    if (best_e > 0.0) {
        double lo = log(best_e) - log(1e4) / GRID, hi = log(best_e) + log(1e4) / GRID;
        for (int it = 0; it < 40; it++) {
            double m1 = lo + 0.382 * (hi - lo), m2 = hi - 0.382 * (hi - lo), d1, d2, x;
            pnsgd_delta(p, exp(m1), &x);
            d1 = pnsgd_kov_delta(exp(m1), x, E, eps_total);
            pnsgd_delta(p, exp(m2), &x);
            d2 = pnsgd_kov_delta(exp(m2), x, E, eps_total);
            if (d1 < best)
                best = d1;
            if (d2 < best)
                best = d2;
            if (d1 < d2)
                hi = m2;
            else
                lo = m1;
        }
    }
    *delta = best;
    return DPB_OK;
}
