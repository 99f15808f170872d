/*
 * sampling.c - fixed-size, with-replacement and truncated sampling of a Gaussian sum;
 * tree aggregation (sampling.h, docs/MATH.md section 6.1).
 */
#include "sampling.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "normal.h"
#include "rdp.h"

void smp_free(smp_profile *p)
{
    free(p->t);
    p->t = NULL;
    p->n = 0;
    p->extra = 0.0;
}

static dpb_status push(smp_profile *p, double w, double gamma, double mua, double mub)
{
    smp_term *t = realloc(p->t, (p->n + 1) * sizeof *t);
    if (t == NULL)
        return DPB_ENOMEM;
    p->t = t;
    p->t[p->n++] = (smp_term){w, gamma, mua, mub, {gamma, gamma, gamma}};
    return DPB_OK;
}

static int bad_sigma(double sigma)
{
    return !(sigma > 0.0) || !isfinite(sigma);
}

dpb_status smp_without_replacement(uint64_t n, uint64_t m, double sigma, smp_profile *out)
{
    *out = (smp_profile){NULL, 0, 0.0, 0};
    if (n == 0 || m > n || n > SMP_MAX_POPULATION || bad_sigma(sigma))
        return DPB_EINVAL;
    if (m == 0)
        return DPB_OK;
    return push(out, 1.0, (double)m / (double)n, 2.0 / sigma, 2.0 / sigma);
}

dpb_status smp_with_replacement(uint64_t n, uint64_t m, double sigma, smp_profile *out)
{
    *out = (smp_profile){NULL, 0, 0.0, 0};
    if (n == 0 || m > n || n > SMP_MAX_POPULATION || bad_sigma(sigma))
        return DPB_EINVAL;
    if (m == 0)
        return DPB_OK;
    double p = 1.0 / (double)n, dm = (double)m;
    double l1p = log1p(-p), lr = log(p) - l1p;
    /* g = P(K >= 1) = 1 - (1 - p)^m, rounded up */
    double g = n == 1 ? 1.0 : -expm1(dm * l1p);
    g = g * (1.0 + 1e-14) > 1.0 ? 1.0 : g * (1.0 + 1e-14);
    /* b_k = C(m, k) p^k (1 - p)^{m - k} by its ratios from b_1 = m p (1 - p)^{m - 1} (lgamma
     * of m ~ 1e9 would cost 1e-5 of relative accuracy); terms while they matter, the rest
     * of the binomial mass bounded by a geometric series once the ratio is below 1/2 */
    double bk = n == 1 ? 1.0 : dm * p * exp((dm - 1.0) * l1p);
    for (uint64_t k = 1; k <= m; k++) {
        double dk = (double)k;
        if (k > 1)
            bk *= (dm - dk + 1.0) / dk * exp(lr);
        double b = bk * (1.0 + 1e-12);
        double r = (dm - dk) / (dk + 1.0) * exp(lr); /* b_{k+1} / b_k, decreasing in k */
        if (n > 1 && k > 1 && r < 0.5 && b < 1e-18) {
            /* the rest costs at most its mass (delta_G <= 1): sum_{j >= k} b_j <= b / (1 - r) */
            out->extra = 2.0 * b * (1.0 + 1e-12);
            break;
        }
        dpb_status st = push(out, b / g, g, 2.0 * dk / sigma, 2.0 * dk / sigma);
        if (st != DPB_OK) {
            smp_free(out);
            return st;
        }
        if (out->n >= 4096) { /* unreachable for m <= n (the mean is at most 1) */
            out->extra = 1.0;
            break;
        }
    }
    /* Alternatives: the common part b_0 A shared as c_k b_0 with c_k proportional to
     * b_k^t (t = 1/2, 1/4, 0; the base is t = 1): P = sum_k (b_k + c_k b_0) [(1 - g_k) A +
     * g_k B_k] with g_k = b_k / (b_k + c_k b_0), each term then bounded as before. A smaller
     * g_k for the rare large counts amplifies their larger shifts more. */
    double b0 = n == 1 ? 0.0 : exp(dm * l1p);
    if (b0 > 0.0 && out->n > 1) {
        const double tpow[SMP_ALT] = {0.5, 0.25, 0.0};
        for (int c = 0; c < SMP_ALT; c++) {
            double z = 0.0;
            for (size_t k = 0; k < out->n; k++)
                z += pow(out->t[k].w * g, tpow[c]);
            for (size_t k = 0; k < out->n; k++) {
                double wk = out->t[k].w * g, ck = pow(wk, tpow[c]) / z;
                double gk = wk / (wk + ck * b0);
                /* rounded up (the bound increases with g) */
                out->t[k].alt[c] = gk * (1.0 + 1e-12) > 1.0 ? 1.0 : gk * (1.0 + 1e-12);
            }
        }
        out->nalt = SMP_ALT;
    }
    return DPB_OK;
}

/* The law of N ~ Binomial(n, q) as upper bounds on masses: the pmf on a window [L, H]
 * around the mean (13 standard deviations and 10 more each side), by its ratios from the
 * mode and normalised over the window (the true pmf is that times P(window) <= 1, so these
 * are upper bounds up to the recursion's rounding, 1e-9 relative added), and Chernoff
 * bounds exp(-n KL(x || q)) on the masses left and right of the window. (GSL's binomial
 * cdf returns NaN for n ~ 1e9.) */
typedef struct {
    uint64_t L, H;
    double *w;          /* w[k - L] */
    double left, right; /* upper bounds on P(N < L), P(N > H) */
} binom_law;

static double kl_bern(double x, double q)
{
    double a = x > 0.0 ? x * log(x / q) : 0.0,
           b = x < 1.0 ? (1.0 - x) * log((1.0 - x) / (1.0 - q)) : 0.0;
    return a + b;
}

static dpb_status binom_law_init(uint64_t n, double q, binom_law *b)
{
    double dn = (double)n, mean = dn * q, sd = sqrt(dn * q * (1.0 - q));
    double lo = floor(mean - 13.0 * sd - 10.0), hi = ceil(mean + 13.0 * sd + 10.0);
    b->L = lo < 0.0 ? 0 : (uint64_t)lo;
    b->H = hi > dn ? n : (uint64_t)hi;
    size_t len = (size_t)(b->H - b->L + 1);
    b->w = malloc(len * sizeof *b->w);
    if (b->w == NULL)
        return DPB_ENOMEM;
    uint64_t mode = (uint64_t)floor((dn + 1.0) * q);
    if (mode > n)
        mode = n;
    if (mode < b->L)
        mode = b->L;
    if (mode > b->H)
        mode = b->H;
    double r = q < 1.0 ? q / (1.0 - q) : HUGE_VAL, sum = 0.0;
    if (q >= 1.0 || q <= 0.0) {
        for (size_t i = 0; i < len; i++)
            b->w[i] = (q >= 1.0 ? b->L + i == n : b->L + i == 0) ? 1.0 : 0.0;
        sum = 1.0;
    } else {
        b->w[mode - b->L] = 1.0;
        for (uint64_t k = mode; k > b->L; k--) /* w_{k-1} = w_k k / ((n - k + 1) r) */
            b->w[k - 1 - b->L] = b->w[k - b->L] * (double)k / ((dn - (double)k + 1.0) * r);
        for (uint64_t k = mode; k < b->H; k++) /* w_{k+1} = w_k (n - k) r / (k + 1) */
            b->w[k + 1 - b->L] = b->w[k - b->L] * (dn - (double)k) * r / ((double)k + 1.0);
        for (size_t i = 0; i < len; i++)
            sum += b->w[i];
    }
    for (size_t i = 0; i < len; i++)
        b->w[i] = b->w[i] / sum * (1.0 + 1e-9);
    b->left = b->L == 0 ? 0.0 : exp(-dn * kl_bern((double)b->L / dn, q)) * 1.01;
    b->right = b->H >= n ? 0.0 : exp(-dn * kl_bern((double)b->H / dn, q)) * 1.01;
    return DPB_OK;
}

/* An upper bound on P(a <= N <= b). */
static double binom_mass(const binom_law *bl, uint64_t a, uint64_t b)
{
    double m = 0.0;
    if (a < bl->L)
        m += bl->left;
    if (b > bl->H)
        m += bl->right;
    uint64_t x = a > bl->L ? a : bl->L, y = b < bl->H ? b : bl->H;
    for (uint64_t k = x; k <= y && y >= x; k++)
        m += bl->w[k - bl->L];
    return m > 1.0 ? 1.0 : m;
}

dpb_status smp_truncated(uint64_t n, double q, uint64_t B, double sigma, smp_relation rel,
                         smp_profile *out)
{
    *out = (smp_profile){NULL, 0, 0.0, 0};
    if (n == 0 || n > SMP_MAX_POPULATION || !(q >= 0.0 && q <= 1.0) || bad_sigma(sigma))
        return DPB_EINVAL;
    if (q == 0.0 || B == 0)
        return DPB_OK;
    /* the others sampled: N ~ Binomial(n - 1, q). N < B: the record is kept whenever it is
     * sampled (g = q; against the batch without it a shift of 1). N >= B: it is kept with
     * probability B/(N + 1) (g = q B/(N + 1)), and then replaces one of the others: against
     * the batch without it (B others) a shift of 2 under every relation (the zero record of
     * replace_special also takes a slot, so its batch still drops one of the others), against
     * the neighbour's batch a shift of 2, of 1 against the zero record for replace_special. */
    uint64_t others = n - 1;
    double one = 1.0 / sigma, two = 2.0 / sigma;
    double mu_small_b = rel == SMP_REPLACE_ONE ? two : one;
    double mu_big_a = two;
    double mu_big_b = rel == SMP_ADD_REMOVE ? mu_big_a : mu_small_b;
    if (B > others) /* no truncation ever */
        return push(out, 1.0, q, one, mu_small_b);
    binom_law bl;
    dpb_status st = binom_law_init(others, q, &bl);
    if (st != DPB_OK)
        return st;
    double w0 = binom_mass(&bl, 0, B - 1);
    if (w0 > 0.0 && (st = push(out, w0, q, one, mu_small_b)) != DPB_OK)
        goto fail;
    /* N >= B in bins; the bound increases with g (g decreases in N), so each bin takes the g
     * of its smallest N: the window's part in 48 geometric bins, one bin each side */
    uint64_t lo = B > bl.L ? B : bl.L, hi = bl.H;
    uint64_t edges[52];
    int ne = 0;
    edges[ne++] = B;
    if (lo > B)
        edges[ne++] = lo;
    if (hi > lo) {
        double r = pow(((double)hi + 1.0) / ((double)lo + 1.0), 1.0 / 48.0);
        for (int i = 1; i <= 48; i++) {
            double e = floor(((double)lo + 1.0) * pow(r, i) - 1.0);
            if (e > (double)edges[ne - 1] && e <= (double)hi)
                edges[ne++] = (uint64_t)e;
        }
    }
    if (hi < others && hi + 1 > edges[ne - 1])
        edges[ne++] = hi + 1;
    for (int i = 0; i < ne; i++) {
        uint64_t a = edges[i], b = i + 1 < ne ? edges[i + 1] - 1 : others;
        if (b < a)
            continue;
        double w = binom_mass(&bl, a, b);
        if (w == 0.0)
            continue;
        double g = q * (double)B / ((double)a + 1.0);
        if ((st = push(out, w, g, mu_big_a, mu_big_b)) != DPB_OK)
            goto fail;
    }
    free(bl.w);
    return DPB_OK;
fail:
    free(bl.w);
    smp_free(out);
    return st;
}

/* delta_G(mu; e), 0 where mu = 0 */
static double gdelta(double mu, double e)
{
    double d = 0.0;
    if (mu > 0.0 && dp_gdp_delta(mu, e, &d, NULL) != DPB_OK)
        d = 1.0;
    return d;
}

double smp_delta(const smp_profile *p, double eps)
{
    double d = smp_delta_alt(p, eps, -1);
    for (int c = 0; c < p->nalt; c++) {
        double a = smp_delta_alt(p, eps, c);
        if (a < d)
            d = a;
    }
    return d;
}

double smp_delta_alt(const smp_profile *p, double eps, int alt)
{
    if (!(eps >= 0.0))
        return 1.0;
    double s = 0.0;
    for (size_t j = 0; j < p->n; j++) {
        const smp_term *t = &p->t[j];
        double g = alt < 0 ? t->gamma : t->alt[alt], e, b;
        if (g >= 1.0) {
            e = eps;
            b = 1.0;
        } else {
            /* e^e = 1 + (e^e' - 1)/g: e = e' + log1p(-(1 - g) expm1(-e') / g), b = e^{e' - e} */
            double l = log1p(-(1.0 - g) * expm1(-eps) / g);
            e = eps + l;
            b = exp(-l);
        }
        double d =
            b >= 1.0 ? gdelta(t->mub, e) : (1.0 - b) * gdelta(t->mua, e) + b * gdelta(t->mub, e);
        s += t->w * t->gamma * d;
    }
    s = s * (1.0 + 1e-12) + p->extra;
    return s > 1.0 ? 1.0 : s;
}

/* ---- Wang, Balle, Kasiviswanathan 2019 ------------------------------------------------- */

/* ln |d^j/dy^j e^{c y^2}| bound: e^{c y^2} sum_k j!/(k! (j-2k)!) (2c|y|)^{j-2k} c^k (all
 * terms positive, an upper bound on the derivative's magnitude, exact for even j). */
static double log_deriv(int j, double c, double y)
{
    double ay = fabs(y), acc = -HUGE_VAL, lj = lgamma(j + 1.0);
    for (int k = 0; 2 * k <= j; k++) {
        int p = j - 2 * k;
        double lk = lgamma(k + 1.0), lp = lgamma(p + 1.0);
        double t = lj - lk - lp + k * log(c) + 8.0 * DBL_EPSILON * (fabs(lj) + fabs(lk) + fabs(lp));
        if (p > 0)
            t += p * log(2.0 * c * ay);
        acc = rdp_log_add(acc, t);
    }
    return c * y * y + acc;
}

/* An upper bound on ln of the j-th forward difference (j even, >= 2) at 0 of h(t) =
 * e^{c t (t - 1)} (the differences dp_accounting computes in floating point). Delta^j h(0)
 * = E[h^(j)(S)], S the sum of j uniforms on [0, 1]; for even j, h^(j) = e^{-c/4} D^j
 * e^{c y^2} at y = t - 1/2 is positive and convex (its second derivative is the next
 * even one), so the mean lies below the chord: (h^(j)(0) + h^(j)(j)) / 2. */
static double log_fdiff_bound(int j, double c)
{
    return -c / 4.0 + rdp_log_add(log_deriv(j, c, -0.5), log_deriv(j, c, j - 0.5)) - M_LN2;
}

/* ln C(n, k) rounded up: lgamma is good to a few ulps of its value, which at n ~ 1e5 is
 * 4e-10 of ln C(n, 2) (below it at n = 90861); 8 ulps of each term are added */
static double log_comb(double n, double k)
{
    double a = lgamma(n + 1.0), b = lgamma(k + 1.0), c = lgamma(n - k + 1.0);
    return a - b - c + 8.0 * DBL_EPSILON * (fabs(a) + fabs(b) + fabs(c));
}

/* Delta^j h(0) = E[(e^W - 1)^j], W = a Z - c, a = sqrt(2c), Z standard normal (as h(i) =
 * e^{c i^2 - c i} = E[e^{i W}]): for even j a positive integrand, summed by the trapezoid
 * rule on a fine grid over its whole support in log space (no cancellation; the rule's error
 * for this smooth, fast-decaying integrand is far below the 1e-9 it is rounded up by). */
static double log_fdiff_quad(int j, double c)
{
    double a = sqrt(2.0 * c), step = 0.02;
    double zlo = -40.0, zhi = j * a + 40.0;
    size_t n = (size_t)ceil((zhi - zlo) / step) + 1;
    double m = -HUGE_VAL;
    for (int pass = 0; pass < 2; pass++) {
        double acc = 0.0;
        for (size_t i = 0; i < n; i++) {
            double z = zlo + (double)i * step, w = expm1(a * z - c);
            double l = -0.5 * z * z - 0.5 * log(2.0 * M_PI) + j * log(fabs(w));
            if (w == 0.0)
                continue;
            if (pass == 0) {
                if (l > m)
                    m = l;
            } else {
                acc += exp(l - m);
            }
        }
        if (pass == 1) {
            double r = m + log(acc * step) + 1e-9;
            return r == r && r > -HUGE_VAL ? r : HUGE_VAL; /* nothing certified: no bound */
        }
    }
    return HUGE_VAL;
}

/* ln of an upper bound on Delta^j h(0) for even j: the smaller of the chord bound and the
 * quadrature (the latter for j <= WBK_QUAD_MAX, where the Delta terms can win). */
#define WBK_QUAD_MAX 130
static double log_fdiff(int j, double c)
{
    double b = log_fdiff_bound(j, c);
    /* the quadrature's grid spans j sqrt(2c) + 80: kept to 1e5 points (at larger c, small
     * sigma, the theorem's other branch 2 e^{(i-1) eps(i)} is the smaller anyway) */
    if (j <= WBK_QUAD_MAX && j * sqrt(2.0 * c) <= 1900.0) {
        double qd = log_fdiff_quad(j, c);
        if (qd < b)
            b = qd;
    }
    return b;
}

/* ln A_alpha for integer alpha >= 1 (A_1 = 1); lfd[j] = log_fdiff(j) for even j <= alpha + 1. */
static double wbk_log_a_int(double q, double sigma, int alpha, const double *lfd)
{
    if (alpha <= 1)
        return 0.0;
    double c = 1.0 / (2.0 * sigma * sigma), f2 = 1.0 / (sigma * sigma); /* eps(2) = 2c */
    double lq = log(q);
    double log_f2m1 = f2 + log1p(-exp(-f2));
    double s2 = fmin(M_LN2 * 2.0 + log_f2m1, f2 + M_LN2);
    double la = rdp_log_add(0.0, 2.0 * lq + log_comb(alpha, 2) + s2);
    for (int i = 3; i <= alpha; i++) {
        double cgf = (double)(i - 1) * i * c; /* (i - 1) eps(i) */
        double s = M_LN2 + cgf;
        int jl = 2 * (i / 2), jh = 2 * ((i + 1) / 2);
        double sd = 2.0 * M_LN2 + 0.5 * (lfd[jl] + lfd[jh]);
        if (sd < s)
            s = sd;
        la = rdp_log_add(la, s + i * lq + log_comb(alpha, i));
    }
    return la;
}

dpb_status smp_rdp_without_replacement_add(double q, double sigma, double count,
                                           const double *orders, size_t n, double *rdp)
{
    if (!(q >= 0.0 && q <= 1.0) || bad_sigma(sigma) || !(count >= 0.0))
        return DPB_EINVAL;
    if (q == 0.0 || count == 0.0)
        return DPB_OK;
    double amax = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!(orders[i] > 1.0) || !isfinite(orders[i]))
            return DPB_EINVAL;
        if (orders[i] > amax)
            amax = orders[i];
    }
    if (q >= 1.0) {
        for (size_t i = 0; i < n; i++)
            rdp[i] += count * orders[i] / (2.0 * sigma * sigma);
        return DPB_OK;
    }
    if (amax > 1e5)
        return DPB_EINVAL;
    int jmax = 2 * (((int)ceil(amax) + 2) / 2);
    double *lfd = malloc((size_t)(jmax + 1) * sizeof *lfd);
    if (lfd == NULL)
        return DPB_ENOMEM;
    double c = 1.0 / (2.0 * sigma * sigma);
    for (int j = 0; j <= jmax; j++)
        lfd[j] = j >= 2 && j % 2 == 0 ? log_fdiff(j, c) : HUGE_VAL;
    for (size_t i = 0; i < n; i++) {
        double alpha = orders[i], r;
        if (alpha == floor(alpha)) {
            r = wbk_log_a_int(q, sigma, (int)alpha, lfd) / (alpha - 1.0);
        } else {
            /* Corollary 10: the CGF (alpha - 1) eps(alpha) is convex in alpha, so its chord
             * between the neighbouring integers bounds it */
            double af = floor(alpha), t = alpha - af;
            double x = wbk_log_a_int(q, sigma, (int)af, lfd);
            double y = wbk_log_a_int(q, sigma, (int)af + 1, lfd);
            r = ((1.0 - t) * x + t * y) / (alpha - 1.0);
        }
        rdp[i] += count * (r > 0.0 ? dp_round_up(r, 1e-12) : 0.0);
    }
    free(lfd);
    return DPB_OK;
}

double smp_rdp_without_replacement(double q, double sigma, double alpha)
{
    double r = 0.0;
    if (isinf(alpha))
        return q == 0.0 ? 0.0 : HUGE_VAL;
    return smp_rdp_without_replacement_add(q, sigma, 1.0, &alpha, 1, &r) == DPB_OK ? r : HUGE_VAL;
}

unsigned smp_tree_depth(const uint64_t *steps, size_t n)
{
    uint64_t mx = 0;
    for (size_t i = 0; i < n; i++)
        if (steps[i] > mx)
            mx = steps[i];
    unsigned d = 0; /* ceil(log2(mx + 1)): the bits of mx */
    while (mx) {
        d++;
        mx >>= 1;
    }
    return d;
}
