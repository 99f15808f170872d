/*
 * pld_window.c - a composition's Chernoff windows: the log-mgf of a distribution, the
 * composed F(t), coarse copies of the terms for the searches, and golden section over ln t.
 * It calls pld.c (pld_int.h) only; pld_compose.c calls it.
 */
#include "pld_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ln sum_i p_i e^{t l_i} over the finite part (l_i = (lo + i) h), shifted by the largest
 * exponent among the nonzero masses so nothing overflows and the leading term cannot
 * underflow; the powers e^{-|t| h k} are built by recursion from that end (recomputed exactly
 * every 256 steps, in four interleaved streams). -HUGE_VAL if the finite part is empty. */
double pld_log_mgf(const pld_pmf *d, double t)
{
    size_t n = d->n, lo = 0, hi = n;
    while (lo < hi && !(d->p[lo] > 0.0))
        lo++;
    while (hi > lo && !(d->p[hi - 1] > 0.0))
        hi--;
    if (lo == hi)
        return -HUGE_VAL;
    double th = t * d->h, a = fabs(th);
    int down = t > 0.0; /* the largest exponent is at the top for t > 0 */
    size_t top = down ? hi - 1 : lo, m = hi - lo;
    /* four interleaved streams (k = 4j + r), so the recursions do not wait on each other;
     * each in a variable of its own (an array's elements went through memory, and every
     * addition waited on the store before it) */
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, step = exp(-4.0 * a);
    for (size_t k0 = 0; k0 < m; k0 += 256) {
        size_t k1 = m - k0 < 256 ? m : k0 + 256;
        double w0 = exp(-a * (double)k0), w1 = exp(-a * (double)(k0 + 1));
        double w2 = exp(-a * (double)(k0 + 2)), w3 = exp(-a * (double)(k0 + 3));
        size_t k = k0;
        if (down) {
            const double *p = d->p + hi - 1;
            for (; k + 4 <= k1; k += 4) {
                s0 += p[-(ptrdiff_t)k] * w0;
                s1 += p[-(ptrdiff_t)k - 1] * w1;
                s2 += p[-(ptrdiff_t)k - 2] * w2;
                s3 += p[-(ptrdiff_t)k - 3] * w3;
                w0 *= step;
                w1 *= step;
                w2 *= step;
                w3 *= step;
            }
        } else {
            const double *p = d->p + lo;
            for (; k + 4 <= k1; k += 4) {
                s0 += p[k] * w0;
                s1 += p[k + 1] * w1;
                s2 += p[k + 2] * w2;
                s3 += p[k + 3] * w3;
                w0 *= step;
                w1 *= step;
                w2 *= step;
                w3 *= step;
            }
        }
        const double wr[3] = {w0, w1, w2};
        for (int r = 0; k < k1; k++, r++)
            s0 += d->p[down ? hi - 1 - k : lo + k] * wr[r];
    }
    double s = (s0 + s1) + (s2 + s3);
    return th * (double)(d->lo + (int64_t)top) + log(s);
}

/* The Chernoff bound on one side of the composed sum S = sum_i (count_i copies of term i):
 * for t > 0, P(S > u) <= exp(F(t) - t u) with F(t) = sum_i count_i ln E e^{t L_i}, so the
 * level u(t) = (F(t) - ln tail) / t is exceeded with probability <= tail (for the lower side
 * F(-t) and P(S < v) <= exp(F(-t) + t v)). The bound holds for every t, so any t gives a
 * valid window; t is chosen to make it narrow, by golden section in ln t over [2^-12, 2^18]
 * (the optimum can be anywhere from 1e-3 to 1e5: one sampled term with a rare large loss
 * needs a small t, a narrow one a large t). The level is quasi-convex in t: its derivative
 * has the sign of g(t) = t F'(t) - F(t) + ln tail, and g' = t F'' >= 0 (F is convex), so
 * golden section finds its minimum (17 evaluations a side). Returns +-HUGE_VAL when no
 * finite bound is found (empty finite part). */
double pld_term_F(const pld_term *terms, size_t k, double t)
{
    double F = 0.0;
    for (size_t i = 0; i < k; i++) {
        double c = pld_log_mgf(terms[i].d, t);
        if (c == -HUGE_VAL)
            continue; /* no finite mass: contributes no finite loss */
        F += (double)terms[i].count * c;
    }
    return F;
}

/* floor(a / m) and ceil(a / m) for m >= 1 */
static int64_t div_floor(int64_t a, int64_t m)
{
    return a >= 0 ? a / m : -((-a + m - 1) / m);
}

/* For the window only, term i (count c, n points) may be replaced by its masses binned m at a
 * time onto the bin's upper end (upper side: t > 0) or lower end (t < 0). That can only
 * raise every E e^{tL} (e^{tl} increases with l for t > 0, decreases for t < 0), so the
 * level stays a valid bound; it is at most c (m - 1) h wider. m = 1 + 1024 / c (at most 1024
 * points wider a term: 0.1 at the default grid, against windows of tens), and at most n / 4096
 * (a copy keeps 4096 points or more: a single 10^6-point Gaussian is summed over 4096 points,
 * 243 points wider). The searches evaluate each term 17 to 100 times a composition: with
 * 64 for 1024, leaves of 10^5-10^6 points composed tens of times took 15% of the time.
 * *cd gets the binned copy (freed by the caller) or stays empty (the term as it is). */
static void coarse_term(const pld_term *t, int upper, int rough, pld_pmf *cd)
{
    memset(cd, 0, sizeof *cd);
    uint64_t m = 1 + 1024 / t->count, cap = t->d->n / 4096;
    if (rough && m < t->d->n / 65536) /* estimates: at most 65536 points a term */
        m = t->d->n / 65536;
    if (cap < m)
        m = cap;
    if (m <= 1)
        return;
    const pld_pmf *d = t->d;
    int64_t mm = (int64_t)m, up = upper ? mm - 1 : 0;
    int64_t lo = div_floor(d->lo + up, mm), hi = div_floor(d->lo + (int64_t)d->n - 1 + up, mm);
    if (pld_pmf_alloc(cd, d->h * (double)m, lo, (size_t)(hi - lo + 1)) != DPB_OK) {
        memset(cd, 0, sizeof *cd);
        return;
    }
    /* point j goes to bin floor((d->lo + j + up) / m) - lo: walked, not divided */
    size_t b = 0;
    int64_t pos = d->lo + up - lo * mm; /* in [0, m) */
    for (size_t j = 0; j < d->n; j++) {
        cd->p[b] += d->p[j];
        if (++pos == mm) {
            pos = 0;
            b++;
        }
    }
}

/* The terms for window searches (coarse_term on each, upper or lower side; rough: at most
 * 65536 points a term, for the tilt's estimates, which bound nothing): *use points at
 * the copies where made, at the terms themselves otherwise (or when memory is short); free
 * with pld_coarse_free. */
void pld_coarse_make(const pld_term *terms_in, size_t k, int upper, int rough, pld_coarse_set *cs)
{
    cs->terms = malloc(k * sizeof *cs->terms);
    cs->cd = calloc(k, sizeof *cs->cd);
    cs->use = terms_in;
    if (cs->terms == NULL || cs->cd == NULL)
        return;
    for (size_t i = 0; i < k; i++) {
        coarse_term(&terms_in[i], upper, rough, &cs->cd[i]);
        cs->terms[i] =
            cs->cd[i].p != NULL ? (pld_term){&cs->cd[i], terms_in[i].count} : terms_in[i];
    }
    cs->use = cs->terms;
}

void pld_coarse_free(pld_coarse_set *cs, size_t k)
{
    for (size_t i = 0; cs->cd != NULL && i < k; i++)
        pld_free(&cs->cd[i]);
    free(cs->cd);
    free(cs->terms);
}

/* What pld_golden_min minimises over x = ln t: a level (F(theta0 + sg t) - f0 - ltail) / t (sg =
 * +-1: the Chernoff bound of the law tilted by theta0, whose log-mgf is F(theta0 + s) - f0),
 * or with sg = 0 the exponent F(t) - t l0 of the Chernoff bound on P(S >= l0). NaN counts as
 * +inf. */
double pld_golden_eval(const pld_golden *g, double x)
{
    double t = exp(x), v;
    if (g->sg == 0.0)
        v = pld_term_F(g->terms, g->k, t) - t * g->l0;
    else
        v = (pld_term_F(g->terms, g->k, g->theta0 + g->sg * t) - g->f0 - g->ltail) / t;
    return v == v ? v : HUGE_VAL;
}

/* The smallest value golden section finds over ln t in [2^-12, 2^18] (17 evaluations, 12 for
 * an estimate), and where (*at: that t). */
double pld_golden_min(const pld_golden *gc, double *at)
{
    double a = -12.0 * M_LN2, b = 18.0 * M_LN2;
    const double g = 0.5 * (3.0 - sqrt(5.0));
    double x1 = a + g * (b - a), x2 = b - g * (b - a);
    double f1 = pld_golden_eval(gc, x1), f2 = pld_golden_eval(gc, x2);
    double best = f1 < f2 ? f1 : f2, xb = f1 < f2 ? x1 : x2;
    for (int it = 0; it < (gc->rough ? 10 : 15); it++) {
        if (f1 < f2) {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = a + g * (b - a);
            f1 = pld_golden_eval(gc, x1);
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = b - g * (b - a);
            f2 = pld_golden_eval(gc, x2);
        }
        if (f1 < best) {
            best = f1;
            xb = x1;
        }
        if (f2 < best) {
            best = f2;
            xb = x2;
        }
    }
    if (at != NULL)
        *at = exp(xb);
    return best;
}

double pld_chernoff_level(const pld_term *terms_in, size_t k, int upper, double ltail)
{
    double sg = upper ? 1.0 : -1.0;
    pld_coarse_set cs;
    pld_coarse_make(terms_in, k, upper, 0, &cs);
    pld_golden gc = {cs.use, k, sg, 0.0, 0.0, ltail, 0.0, 0};
    double best = pld_golden_min(&gc, NULL);
    pld_coarse_free(&cs, k);
    return isfinite(best) ? sg * best : sg * HUGE_VAL;
}
