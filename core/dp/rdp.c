/*
 * rdp.c - RDP of Gaussian, Laplace and Poisson-subsampled Gaussian; conversions.
 *
 * The sampled Gaussian's A_alpha = E_{mu0}[(mu/mu0)^alpha], mu0 = N(0, s^2),
 * mu = (1-q) mu0 + q N(1, s^2):
 *   integer alpha: A = sum_k C(alpha,k) (1-q)^{alpha-k} q^k exp((k^2-k)/(2 s^2)), summed in
 *   log space with a streaming log-sum-exp (terms built by their ratios);
 *   fractional alpha: the two-sided series of Mironov, Talwar, Zhang 2019 (Section 3.3),
 *   with ln erfc evaluated through erfcx so it stays finite far in the tail.
 * eps(alpha) = ln A / (alpha - 1).
 */
#include "rdp.h"

#include <float.h>
#include <math.h>

#include "normal.h"

const double RDP_DEFAULT_ORDERS[RDP_NORDERS] = {
    1.1,  1.2,  1.3,  1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0,  2.1,  2.2,  2.3,  2.4,  2.5,  2.6,
    2.7,  2.8,  2.9,  3.0, 3.1, 3.2, 3.3, 3.4, 3.5, 3.6,  3.7,  3.8,  3.9,  4.0,  4.1,  4.2,
    4.3,  4.4,  4.5,  4.6, 4.7, 4.8, 4.9, 5.0, 5.1, 5.2,  5.3,  5.4,  5.5,  5.6,  5.7,  5.8,
    5.9,  6.0,  6.1,  6.2, 6.3, 6.4, 6.5, 6.6, 6.7, 6.8,  6.9,  7.0,  7.1,  7.2,  7.3,  7.4,
    7.5,  7.6,  7.7,  7.8, 7.9, 8.0, 8.1, 8.2, 8.3, 8.4,  8.5,  8.6,  8.7,  8.8,  8.9,  9.0,
    9.1,  9.2,  9.3,  9.4, 9.5, 9.6, 9.7, 9.8, 9.9, 10.0, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6,
    10.7, 10.8, 10.9, 11,  12,  13,  14,  15,  16,  17,   18,   19,   20,   21,   22,   23,
    24,   25,   26,   27,  28,  29,  30,  31,  32,  33,   34,   35,   36,   37,   38,   39,
    40,   41,   42,   43,  44,  45,  46,  47,  48,  49,   50,   51,   52,   53,   54,   55,
    56,   57,   58,   59,  60,  61,  62,  63,  128, 256,  512,  1024};

double rdp_log_add(double a, double b)
{
    if (a == -HUGE_VAL)
        return b;
    if (b == -HUGE_VAL)
        return a;
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* ln(e^a - e^b) for a >= b. */
static double log_sub(double a, double b)
{
    if (b == -HUGE_VAL)
        return a;
    if (a <= b)
        return -HUGE_VAL;
    return a + log1p(-exp(b - a));
}

/* ln erfc(x), finite for all finite x. */
static double log_erfc(double x)
{
    if (x > 0.5)
        return log(dp_erfcx(x)) - x * x;
    return log(erfc(x));
}

/* ln(e^c - 1) for c > 0 */
static double log_expm1(double c)
{
    return c > 1.0 ? c + log1p(-exp(-c)) : log(expm1(c));
}

/* ln(A - 1) for integer alpha, summed from positive terms only: with the binomial weights
 * b_k = C(alpha,k) (1-q)^{alpha-k} q^k (which sum to 1), A - 1 = sum_{k>=2} b_k
 * (exp((k^2-k)/(2 s^2)) - 1). No cancellation, so ln A = log1p(A - 1) keeps its relative
 * accuracy when A is within 1e-15 of 1 (tiny q), where ln of the sum itself cannot. */
static double log_a_minus_1_int(double q, double sigma, int alpha)
{
    double inv_2s2 = 1.0 / (2.0 * sigma * sigma), lr0 = log(q) - log1p(-q), r0 = exp(lr0);
    /* linear space with a running scale e^m while the factors stay representable: b = b_k
     * e^{-m} by its ratio, S = (sum so far) e^{-m}; one expm1 per term */
    double m = alpha * log1p(-q) + log((double)alpha) + lr0; /* ln b_1 */
    double b = 1.0, S = 0.0;
    int k = 2;
    for (; k <= alpha; k++) {
        double c = ((double)k * k - k) * inv_2s2;
        if (c > 600.0 || b < 1e-250)
            break;
        b *= (double)(alpha - k + 1) / k * r0;
        S += b * expm1(c);
        if (S > 1e250 || b > 1e250) {
            double f = S > b ? S : b;
            m += log(f);
            S /= f;
            b /= f;
        }
    }
    double acc = S > 0.0 ? m + log(S) : -HUGE_VAL;
    if (k > alpha)
        return acc;
    /* log space for the rest */
    double lb = m + log(b);
    for (; k <= alpha; k++) {
        lb += log((double)(alpha - k + 1) / k) + lr0;
        acc = rdp_log_add(acc, lb + log_expm1(((double)k * k - k) * inv_2s2));
    }
    return acc;
}

static double log_a_int(double q, double sigma, int alpha)
{
    /* t_k = C(alpha,k) (1-q)^{alpha-k} q^k exp((k^2-k)/(2 s^2)), by the ratio
     * t_k / t_{k-1} = (alpha-k+1)/k * q/(1-q) * E^{k-1}, E = exp(1/s^2): in linear space with
     * a running scale (sum = S e^m) while E^{k-1} stays moderate, in log space after. */
    double inv_s2 = 1.0 / (sigma * sigma), lr0 = log(q) - log1p(-q);
    double r0 = exp(lr0), E = exp(inv_s2);
    double m = alpha * log1p(-q);     /* ln t_0 */
    double t = 1.0, S = 1.0, g = 1.0; /* t_k e^{-m}, the running sum e^{-m}, E^{k-1} */
    int k = 1;
    for (; k <= alpha && g < 1e100; k++) {
        t *= (double)(alpha - k + 1) / k * r0 * g;
        g *= E;
        S += t;
        if (S > 1e200) {
            m += log(S);
            t /= S;
            S = 1.0;
        }
    }
    if (k > alpha)
        return m + log(S);
    /* log space: lt = ln t_{k-1}, lm = ln(sum so far) */
    double lt = m + log(t), lm = m + log(S);
    for (; k <= alpha; k++) {
        lt += log((double)(alpha - k + 1) / k) + lr0 + (k - 1.0) * inv_s2;
        lm = lm > lt ? lm + log1p(exp(lt - lm)) : lt + log1p(exp(lm - lt));
    }
    return lm;
}

static double log_a_frac(double q, double sigma, double alpha)
{
    double la0 = -HUGE_VAL, la1 = -HUGE_VAL;
    double s2 = sigma * sigma;
    double z0 = s2 * log(1.0 / q - 1.0) + 0.5;
    double lq = log(q), l1q = log1p(-q);
    double log_coef = 0.0;   /* ln |C(alpha, i)| */
    double last = -HUGE_VAL; /* ln of the last terms' magnitude */
    int sign = 1;
    for (int i = 0; i < 100000; i++) {
        if (i > 0) {
            double r = (alpha - i + 1.0) / i;
            if (r < 0)
                sign = -sign;
            log_coef += log(fabs(r));
        }
        double j = alpha - i;
        double lt0 = log_coef + i * lq + j * l1q;
        double lt1 = log_coef + j * lq + i * l1q;
        double le0 = log(0.5) + log_erfc((i - z0) / (M_SQRT2 * sigma));
        double le1 = log(0.5) + log_erfc((z0 - j) / (M_SQRT2 * sigma));
        double ls0 = lt0 + (i * (double)i - i) / (2.0 * s2) + le0;
        double ls1 = lt1 + (j * j - j) / (2.0 * s2) + le1;
        if (sign > 0) {
            la0 = rdp_log_add(la0, ls0);
            la1 = rdp_log_add(la1, ls1);
        } else {
            la0 = log_sub(la0, ls0);
            la1 = log_sub(la1, ls1);
        }
        last = ls0 > ls1 ? ls0 : ls1;
        if (last < -30.0 && i > alpha)
            break;
    }
    /* Past i > alpha the binomial coefficients alternate in sign and the terms shrink, so the
     * truncated tail of each series is at most its last term: add both bounds, making A (and
     * the RDP) an upper bound rather than dp_accounting's slightly low truncation. */
    return rdp_log_add(rdp_log_add(la0, la1), last + M_LN2);
}

double rdp_poisson_gaussian(double q, double sigma, double alpha)
{
    if (q == 0.0)
        return 0.0;
    if (q == 1.0)
        return alpha / (2.0 * sigma * sigma);
    if (isinf(alpha))
        return HUGE_VAL;
    double la;
    if (alpha == floor(alpha) && alpha <= 1e6) {
        /* the direct sum loses ~u alpha q / ln A of relative accuracy to cancellation
         * (ln of a sum near 1 next to alpha ln(1 - q)): where that could exceed ~1e-13, sum
         * A - 1 from its positive terms instead */
        la = log_a_int(q, sigma, (int)alpha);
        if (la < 0.05 * alpha * q) {
            double lm1 = log_a_minus_1_int(q, sigma, (int)alpha);
            la = lm1 < 700.0 ? log1p(exp(lm1)) : lm1 + log1p(exp(-lm1));
        }
    } else {
        la = log_a_frac(q, sigma, alpha);
    }
    double r = la / (alpha - 1.0);
    /* the sums' rounding (a few ulps per term, in relative terms) rounded up */
    return r > 0.0 ? dp_round_up(r, 1e-12) : 0.0;
}

/* ln(e^x - 1) for x > 0 (-inf at 0) */
static double log_expm1_any(double x)
{
    if (!(x > 0.0))
        return -HUGE_VAL;
    return x > 1.0 ? x + log1p(-exp(-x)) : log(expm1(x));
}

/* (alpha - 1) D_alpha bounds at an integer order m >= 2 for rdp_poisson_zcdp: the larger of
 * the two directions, each the smaller of its bounds. */
static double zcdp_cgf_int(double q, double rho, double xi, int m)
{
    double lq = log(q), l1q = log1p(-q), a = (double)m;
    /* D(P||Q): ln A, A - 1 = sum_{k>=2} C(m,k) (1-q)^{m-k} q^k (e^{(k-1) eps(k)} - 1), all
     * terms positive (the k = 0, 1 terms have E[L^k] = 1 and the weights sum to 1) */
    double lc = 0.0, acc = -HUGE_VAL; /* ln C(m, k) */
    for (int k = 1; k <= m; k++) {
        lc += log((double)(m - k + 1) / k);
        if (k < 2)
            continue;
        double t = lc + (m - k) * l1q + k * lq + log_expm1_any((k - 1.0) * (xi + rho * k));
        acc = rdp_log_add(acc, t);
    }
    double up = acc == -HUGE_VAL ? 0.0 : (acc < 700.0 ? log1p(exp(acc)) : acc + log1p(exp(-acc)));
    /* ... and by convexity of t^m: E[(1 - q + qL)^m] <= 1 - q + q e^{(m-1) eps(m)} */
    double conv1 = rdp_log_add(l1q, lq + (a - 1.0) * (xi + rho * a));
    if (conv1 < up)
        up = conv1;
    /* D(Q||P): g(L) = (1 - q + qL)^{1-m}, g(1) = 1, E[L - 1] = 0, g'' <= m(m-1) q^2
     * (1-q)^{-(m+1)} on L >= 0: E[g] <= 1 + m(m-1) q^2 (e^{eps(2)} - 1) / (2 (1-q)^{m+1}) */
    double lt =
        log(a) + log(a - 1.0) + 2.0 * lq + log_expm1_any(xi + 2.0 * rho) - M_LN2 - (a + 1.0) * l1q;
    double down = lt < 700.0 ? log1p(exp(lt)) : lt + log1p(exp(-lt));
    /* ... and by convexity of t^{1-m}: E[g] <= 1 - q + q e^{(m-1) D_m(Q||R)} */
    if (conv1 < down)
        down = conv1;
    return up > down ? up : down;
}

double rdp_poisson_zcdp(double q, double rho, double xi, double alpha)
{
    if (!(alpha > 1.0) || !(rho >= 0.0) || !(xi >= 0.0) || !(q >= 0.0 && q <= 1.0))
        return HUGE_VAL;
    if (q == 0.0 || (rho == 0.0 && xi == 0.0))
        return 0.0;
    double eps = xi + rho * alpha;
    if (q == 1.0 || isinf(alpha) || alpha > RDP_MAX_ORDER)
        return isinf(alpha) ? HUGE_VAL : dp_round_up(eps, 1e-15);
    /* any real order: both directions by convexity */
    double k = rdp_log_add(log1p(-q), log(q) + (alpha - 1.0) * eps);
    double f = floor(alpha), c = ceil(alpha);
    if (f == alpha) {
        double v = zcdp_cgf_int(q, rho, xi, (int)alpha);
        if (v < k)
            k = v;
    } else {
        /* (a - 1) D_a is convex in a and 0 at a = 1: below the chord between f and c */
        double kf = f < 2.0 ? 0.0 : zcdp_cgf_int(q, rho, xi, (int)f);
        double kc = zcdp_cgf_int(q, rho, xi, (int)c), th = (alpha - f) / (c - f);
        double v = (1.0 - th) * kf + th * kc;
        if (v < k)
            k = v;
    }
    double r = k / (alpha - 1.0);
    if (isnan(r))
        return HUGE_VAL;
    if (r > eps) /* the convexity bound is at most eps already: only round-off is cut */
        r = eps;
    /* the sums' rounding (at most about alpha ulps relative) rounded up */
    return r > 0.0 ? dp_round_up(r, 1e-10) : 0.0;
}

static int bad_orders(const double *orders, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(orders[i] > 1.0) || !isfinite(orders[i]))
            return 1;
    return n == 0;
}

dpb_status rdp_add_gaussian(double sigma, double count, const double *orders, size_t n, double *rdp)
{
    if (!(sigma > 0.0) || !isfinite(sigma) || !(count >= 0.0) || bad_orders(orders, n))
        return DPB_EINVAL;
    for (size_t i = 0; i < n; i++)
        rdp[i] += count * orders[i] / (2.0 * sigma * sigma);
    return DPB_OK;
}

dpb_status rdp_add_laplace(double b, double count, const double *orders, size_t n, double *rdp)
{
    if (!(b > 0.0) || !isfinite(b) || !(count >= 0.0) || bad_orders(orders, n))
        return DPB_EINVAL;
    for (size_t i = 0; i < n; i++) {
        double a = orders[i];
        /* Mironov 2017 Prop. 6: 1/(a-1) ln( a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b} ),
         * in log space: the first term dominates. */
        double t1 = log(a / (2.0 * a - 1.0)) + (a - 1.0) / b;
        double t2 = log((a - 1.0) / (2.0 * a - 1.0)) - a / b;
        rdp[i] += count * rdp_log_add(t1, t2) / (a - 1.0);
    }
    return DPB_OK;
}

dpb_status rdp_add_poisson_gaussian(double q, double sigma, double count, const double *orders,
                                    size_t n, double *rdp)
{
    if (!(q >= 0.0 && q <= 1.0) || !(sigma > 0.0) || !isfinite(sigma) || !(count >= 0.0) ||
        bad_orders(orders, n))
        return DPB_EINVAL;
    if (q == 0.0 || count == 0.0)
        return DPB_OK;
    for (size_t i = 0; i < n; i++)
        rdp[i] += count * rdp_poisson_gaussian(q, sigma, orders[i]);
    return DPB_OK;
}

double rdp_eps_at(double a, double r, double delta)
{
    if (isinf(r))
        return HUGE_VAL;
    if (delta * delta + expm1(-r) > 0.0)
        return 0.0; /* delta <= sqrt(1 - e^{-KL}) already */
    if (a > 1.01)
        return r + log1p(-1.0 / a) - log(delta * a) / (a - 1.0);
    return HUGE_VAL;
}

double rdp_log_delta_at(double a, double r, double eps)
{
    double ld;
    if (isinf(r))
        return 0.0;
    ld = r == 0.0 ? -HUGE_VAL : 0.5 * log1p(-exp(-r));
    if (a > 1.01) {
        double b = (a - 1.0) * (r - eps + log1p(-1.0 / a)) - log(a);
        if (b < ld)
            ld = b;
    }
    return ld;
}

/* The smallest of at(order, rdp, x) over the n orders (the first order attaining it in
 * *best_order); +inf with orders[0] when every value is NaN. DPB_EINVAL for a negative or
 * NaN RDP value. */
static dpb_status least_over_orders(const double *orders, const double *rdp, size_t n,
                                    double (*at)(double, double, double), double x, double *best,
                                    double *best_order)
{
    *best = HUGE_VAL;
    *best_order = orders[0];
    for (size_t i = 0; i < n; i++) {
        double a = orders[i], r = rdp[i];
        if (!(r >= 0.0))
            return DPB_EINVAL;
        double v = at(a, r, x);
        if (v < *best) {
            *best = v;
            *best_order = a;
        }
    }
    return DPB_OK;
}

dpb_status rdp_epsilon(const double *orders, const double *rdp, size_t n, double delta, double *eps,
                       double *order)
{
    if (!(delta > 0.0 && delta < 1.0) || bad_orders(orders, n))
        return DPB_EINVAL;
    double best, best_order;
    if (least_over_orders(orders, rdp, n, rdp_eps_at, delta, &best, &best_order) != DPB_OK)
        return DPB_EINVAL;
    if (best < 0.0)
        best = 0.0;
    *eps = dp_round_up(best, RDP_REL_ROUND);
    *order = best_order;
    return DPB_OK;
}

dpb_status rdp_delta(const double *orders, const double *rdp, size_t n, double eps, double *delta,
                     double *order)
{
    if (!(eps >= 0.0) || !isfinite(eps) || bad_orders(orders, n))
        return DPB_EINVAL;
    double best, best_order;
    if (least_over_orders(orders, rdp, n, rdp_log_delta_at, eps, &best, &best_order) != DPB_OK)
        return DPB_EINVAL;
    double d = exp(best);
    d = dp_round_up(d, RDP_REL_ROUND);
    *delta = d > 1.0 ? 1.0 : d;
    *order = best_order;
    return DPB_OK;
}

/* ---- issue 16: the RDP of dp_accounting's mechanism events ----------------------------- */

/* ln cosh(x) for x >= 0 without cancellation: ln(1 + 2 sinh^2(x/2)), or x - ln 2 +
 * ln(1 + e^{-2x}) where cosh overflows. */
static double ln_cosh(double x)
{
    if (x > 20.0)
        return x - M_LN2 + log1p(exp(-2.0 * x));
    double sh = sinh(0.5 * x);
    return log1p(2.0 * sh * sh);
}

/* v / (a - 1) rounded up, after adding the absolute round-off bound `slack` to v; +inf
 * when the evaluation failed (NaN): never 0 for a number that could not be computed. */
static double up_over(double v, double slack, double a)
{
    double r = (v + slack) / (a - 1.0);
    if (isnan(r))
        return HUGE_VAL;
    if (!(r > 0.0))
        return 0.0;
    return dp_round_up(r, 1e-12);
}

double rdp_pure_dp(double eps, double a)
{
    if (!(eps >= 0.0) || !(a > 1.0))
        return HUGE_VAL;
    if (eps == 0.0)
        return 0.0;
    if (isinf(eps))
        return HUGE_VAL;
    /* binary randomized response: ln((e^{a eps} + e^{(1-a) eps}) / (1 + e^eps)) / (a - 1)
     * = (ln cosh((a - 1/2) eps) - ln cosh(eps/2)) / (a - 1), each ln cosh accurate to a few
     * ulps (no cancellation inside), so the difference is too for small eps */
    double t1 = ln_cosh((a - 0.5) * eps), t2 = ln_cosh(0.5 * eps);
    double slack = 8.0 * DBL_EPSILON * (fabs(t1) + fabs(t2));
    double r = up_over(t1 - t2, slack, a);
    double z = dp_round_up(a * eps * eps / 2.0, 1e-15);
    if (z < r)
        r = z;
    return r < eps ? r : eps;
}

/* eps/(e^eps - 1) - 1 - ln(eps/(e^eps - 1)) for eps > 0, without cancellation, rounded up. */
static double br_kl(double eps)
{
    /* u = eps/(e^eps - 1) - 1 = (eps - expm1(eps)) / expm1(eps) */
    double num;
    if (eps < 0.5) { /* eps - expm1(eps) = -sum_{k>=2} eps^k / k! */
        double term = eps * eps / 2.0, s = 0.0;
        for (int k = 2; k < 40 && term > 1e-300; k++) {
            s += term;
            term *= eps / (k + 1);
        }
        num = -s;
    } else {
        num = eps - expm1(eps);
    }
    double em = expm1(eps);
    double u = isinf(em) ? -1.0 : num / em, g;
    if (u == -1.0) /* eps/(e^eps - 1) underflows relative to 1: r - 1 - ln r with r = eps e^-eps */
        return dp_round_up(-1.0 - (log(eps) - eps), 1e-12);
    if (fabs(u) < 0.1) { /* u - ln(1 + u) = sum_{k>=2} (-1)^k u^k / k */
        double pw = u * u;
        g = 0.0;
        for (int k = 2; k < 60; k++) {
            g += (k % 2 == 0 ? 1.0 : -1.0) * pw / k;
            pw *= u;
        }
    } else {
        g = u - log1p(u);
    }
    return dp_round_up(g, 1e-12) + 8.0 * DBL_EPSILON * fabs(u) * fabs(u);
}

double rdp_bounded_range(double eps, double a)
{
    double p = rdp_pure_dp(eps, a); /* also the edge cases: 0 for eps = 0, inf for bad input */
    if (p == 0.0 || isinf(p))
        return p;
    double r = dp_round_up(br_kl(eps) + dp_round_up((a - 1.0) * eps * eps / 8.0, 1e-15), 1e-15);
    return r < p ? r : p;
}

/* ln(sum_i w_i e^{x_i}) for w_i >= 0, and the sum of |w_i e^{x_i}| relative scale */
static double lse3(const double *x, const double *w, int n)
{
    double m = -HUGE_VAL;
    for (int i = 0; i < n; i++)
        if (w[i] > 0.0 && x[i] > m)
            m = x[i];
    if (m == -HUGE_VAL)
        return -HUGE_VAL;
    double s = 0.0;
    for (int i = 0; i < n; i++)
        if (w[i] > 0.0)
            s += w[i] * exp(x[i] - m);
    return m + log(s);
}

double rr_loss(double p, double k)
{
    /* ln(k/p - k + 1) = ln(1 + (k - 1)(1 - p)) - ln p, finite for every p > 0 */
    return dp_round_up(log1p((k - 1.0) * (1.0 - p)) - log(p), 1e-15);
}

/* The cases both randomized-response RDPs answer alike: +inf for an order or parameter out of
 * range and at p = 0 (the output reveals the record), 0 when it carries nothing (k = 1 or
 * p = 1); NAN where the divergence itself is to be computed. */
static double rr_edge(double p, double k, double a)
{
    if (!(a > 1.0) || !(p >= 0.0 && p <= 1.0) || !(k >= 1.0))
        return HUGE_VAL;
    if (k == 1.0 || p == 1.0)
        return 0.0;
    if (p == 0.0)
        return HUGE_VAL;
    return NAN;
}

double rdp_rr_replace_one(double p, double k, double a)
{
    double edge = rr_edge(p, k, a);
    if (!isnan(edge))
        return edge;
    /* P = R(x), Q = R(x'): sum_o P^a Q^{1-a} = (p/k) e^{a L} + (1-p+p/k) e^{-a L} + (1-2/k) p,
     * L = ln(k/p - k + 1), summed in log space (the weights may underflow) */
    double L = rr_loss(p, k);
    if (isinf(a))
        return dp_round_up(L, 1e-15);
    const double x[3] = {a * L + log(p) - log(k), -a * L + log1p(-p * (1.0 - 1.0 / k)),
                         k > 2.0 ? log1p(-2.0 / k) + log(p) : -HUGE_VAL};
    const double w[3] = {1.0, 1.0, 1.0};
    double v = lse3(x, w, 3);
    double r = up_over(v, 8.0 * DBL_EPSILON * (a * L + fabs(log(p)) + log(k) + 4.0), a);
    double cap = dp_round_up(L, 1e-15); /* it is L-DP */
    return r < cap ? r : cap;
}

double rdp_rr_replace_special(double p, double k, double a)
{
    double edge = rr_edge(p, k, a);
    if (!isnan(edge))
        return edge;
    /* against the uniform output: likelihood ratios k(1-p) + p (weight 1/k) and p (1 - 1/k) */
    double l1 = log(k * (1.0 - p) + p), l2 = log(p);
    double cap = dp_round_up(l1 > -l2 ? l1 : -l2, 1e-15);
    if (isinf(a))
        return cap;
    const double w[2] = {1.0 / k, 1.0 - 1.0 / k};
    const double x1[2] = {a * l1, a * l2}, x2[2] = {(1.0 - a) * l1, (1.0 - a) * l2};
    double v1 = lse3(x1, w, 2), v2 = lse3(x2, w, 2);
    double v = v1 > v2 ? v1 : v2;
    double r = up_over(v, 8.0 * DBL_EPSILON * (a * (fabs(l1) + fabs(l2)) + 4.0), a);
    return r < cap ? r : cap;
}

/* (e^x - 1)/x and ln(x)/(x - 1), stable near 0 and 1 */
static double expm1_over_x(double x)
{
    return x == 0.0 ? 1.0 : expm1(x) / x;
}

static double logx_over_xm1(double x)
{
    return x == 1.0 ? 1.0 : log1p(x - 1.0) / (x - 1.0);
}

/* The mean of the truncated negative binomial with halting parameter gamma in (0, 1] and
 * shape eta >= 0 (Papernot & Steinke, Definition 1). */
static double tnb_mean(double gamma, double eta)
{
    if (eta == 1.0)
        return 1.0 / gamma;
    if (eta == 0.0)
        return 1.0 / (gamma * logx_over_xm1(gamma));
    return 1.0 / (gamma * expm1_over_x(eta * log(gamma)) * logx_over_xm1(gamma));
}

/* gamma for a mean: the mean decreases in gamma; the bisection keeps mean(lo) >= mean, so
 * lo <= the true gamma and ln(1/lo) >= ln(1/gamma) (the safe side), nudged down once more
 * for the evaluation's rounding. */
static double tnb_gamma(double eta, double mean)
{
    if (eta == 1.0)
        return (1.0 / mean) * (1.0 - 4.0 * DBL_EPSILON);
    double lo = 0.0, hi = 2.0 * (eta + 1.0) / mean;
    if (hi > 1.0)
        hi = 1.0;
    for (int i = 0; i < 2000 && hi > lo * (1.0 + 1e-13); i++) {
        double g = 0.5 * (lo + hi);
        if (tnb_mean(g, eta) < mean)
            hi = g;
        else
            lo = g;
    }
    return lo * (1.0 - 1e-12);
}

double rdp_rs_eps_hat(double a)
{
    /* 1/(a - 1) and log1p are each within an ulp or so: 8 ulps down is on the safe side */
    return dp_round_down(log1p(1.0 / (a - 1.0)), 8.0 * DBL_EPSILON);
}

double rdp_pure_dp_delta(double eps0, double eps)
{
    if (!(eps < eps0))
        return 0.0;
    if (isinf(eps0))
        return 1.0;
    /* (e^eps0 - e^eps) / (1 + e^eps0) = -expm1(eps - eps0) / (1 + e^-eps0) */
    double d = dp_round_up(-expm1(eps - eps0) / (1.0 + exp(-eps0)), 1e-14);
    return d < 1.0 ? d : 1.0;
}

/* RDP does not decrease with the order: a bound at a larger order holds at a smaller one. */
static void monotone_envelope(const double *orders, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (orders[j] >= orders[i] && out[j] < out[i])
                out[i] = out[j];
}

dpb_status rdp_repeat_and_select(const double *orders, const double *rdp, size_t n, double mean,
                                 double shape, const double *dhat, double *out)
{
    if (!(mean >= 1.0) || !isfinite(mean) || !(shape >= 0.0) || bad_orders(orders, n))
        return DPB_EINVAL;
    double lmean = log(mean);
    if (isinf(shape)) { /* Poisson: Theorem 6 */
        for (size_t i = 0; i < n; i++) {
            double a = orders[i], dh, o;
            if (dhat != NULL)
                dh = dhat[i];
            else if (rdp_delta(orders, rdp, n, rdp_rs_eps_hat(a), &dh, &o) != DPB_OK)
                return DPB_EINVAL;
            if (!(dh >= 0.0))
                return DPB_EINVAL;
            double v = rdp[i] + dp_round_up(mean * dh, 1e-15) + lmean / (a - 1.0);
            out[i] = isinf(rdp[i]) ? HUGE_VAL : dp_round_up(v, 1e-12);
        }
        monotone_envelope(orders, n, out);
        return DPB_OK;
    }
    /* truncated negative binomial: Theorem 2 */
    double gamma = tnb_gamma(shape, mean);
    if (!(gamma > 0.0))
        return DPB_EINVAL;
    double lg = -log(gamma), c = HUGE_VAL;
    for (size_t j = 0; j < n; j++) {
        double v = (1.0 - 1.0 / orders[j]) * rdp[j] + lg / orders[j];
        if (v < c)
            c = v;
    }
    c = dp_round_up((1.0 + shape) * c, 1e-12);
    for (size_t i = 0; i < n; i++)
        out[i] = dp_round_up(rdp[i] + lmean / (orders[i] - 1.0) + c, 1e-12);
    monotone_envelope(orders, n, out);
    return DPB_OK;
}
