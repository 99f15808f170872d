/*
 * pld.c - pessimistic privacy-loss distributions, composed with FFTW.
 *
 * Leaves are discretised by "connect the dots" (Doroshenko, Ghazi, Kamath, Kumar,
 * Manurangsi 2022): knots at multiples of h; each interval's mass split between its two
 * knots by linear interpolation in likelihood-ratio space. The discrete delta(eps) equals
 * the true one at the knots and lies above it between them, for every eps (also negative),
 * so the discrete pair dominates the true pair and stays an upper bound under composition.
 *
 * Invariants of a pld_pmf: n >= 1, p[i] >= 0, sum p + inf_mass >= the true total (mass is
 * only ever moved to a larger loss or added, never removed from the upper side).
 * FFTW's planner is not thread-safe: plan creation and destruction hold plan_lock;
 * fftw_execute on distinct plans runs concurrently.
 */
#include "pld.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <fftw3.h>

#include "normal.h"

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

void pld_free(pld_pmf *d)
{
    if (d == NULL)
        return;
    free(d->p);
    d->p = NULL;
    d->n = 0;
}

static dpb_status pmf_alloc(pld_pmf *d, double h, int64_t lo, size_t n)
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
    return DPB_OK;
}

dpb_status pld_copy(const pld_pmf *src, pld_pmf *dst)
{
    dpb_status st = pmf_alloc(dst, src->h, src->lo, src->n);
    if (st != DPB_OK)
        return st;
    memcpy(dst->p, src->p, src->n * sizeof *src->p);
    dst->inf_mass = src->inf_mass;
    return DPB_OK;
}

/* ---- leaves: a loss model gives S(l) = P(L > l) and F(l) = P(L <= l) under P ----------- */

typedef struct {
    int kind; /* 0 gaussian, 1 laplace, 2 sampled gaussian, 3 sampled laplace */
    int dir;
    double q, s; /* sampling rate; noise multiplier (sigma or b) */
    double lmin, lmax;
} loss_model;

/* Laplace(c, b) survival P(Y > y) and cdf P(Y <= y), each without cancellation. */
static double lap_surv(double c, double b, double y)
{
    return y >= c ? 0.5 * exp(-(y - c) / b) : 1.0 - 0.5 * exp(-(c - y) / b);
}
static double lap_cdf(double c, double b, double y)
{
    return y >= c ? 1.0 - 0.5 * exp(-(y - c) / b) : 0.5 * exp(-(c - y) / b);
}

/* Which tail of the loss law: under P or under Q, survival S(l) = P(L > l) or cdf F. */
enum { S_P = 0, F_P = 1, S_Q = 2, F_Q = 3 };

static double pick(int which, double sp, double fp, double sq, double fq)
{
    switch (which) {
    case S_P:
        return sp;
    case F_P:
        return fp;
    case S_Q:
        return sq;
    default:
        return fq;
    }
}

/* S or F of the loss L = ln(P/Q) at l, under P or Q. */
static double model_eval(const loss_model *m, double l, int which)
{
    double s = m->s, q = m->q;
    int cdf = which == F_P || which == F_Q;
    switch (m->kind) {
    case 0: { /* under P: L ~ N(m, 1/s^2), under Q: N(-m, 1/s^2), m = 1/(2 s^2) */
        double mean = 0.5 / (s * s);
        double z = (which <= F_P ? l - mean : l + mean) * s;
        return cdf ? dp_Phi(z) : dp_Q(z);
    }
    case 1: /* Laplace P = Lap(0, b), Q = Lap(1, b): atoms at +-1/b */
        if (l >= 1.0 / s)
            return cdf ? 1.0 : 0.0;
        if (l < -1.0 / s)
            return cdf ? 0.0 : 1.0;
        {
            double y = (1.0 - s * l) / 2.0, c = which <= F_P ? 0.0 : 1.0; /* L > l <=> X < y */
            return cdf ? lap_surv(c, s, y) : lap_cdf(c, s, y);
        }
    case 2:
        if (m->dir == PLD_REMOVE) { /* P = (1-q)N(0)+qN(1), Q = N(0); L > l <=> X > x */
            double a = expm1(l) + q;
            if (a <= 0.0)
                return cdf ? 0.0 : 1.0;
            double x = s * s * log(a / q) + 0.5;
            return pick(which, (1.0 - q) * dp_Q(x / s) + q * dp_Q((x - 1.0) / s),
                        (1.0 - q) * dp_Phi(x / s) + q * dp_Phi((x - 1.0) / s), dp_Q(x / s),
                        dp_Phi(x / s));
        } else { /* P = N(0), Q = (1-q)N(0)+qN(1); L > l <=> X < x */
            double a = expm1(-l) + q;
            if (a <= 0.0)
                return cdf ? 1.0 : 0.0;
            double x = s * s * log(a / q) + 0.5;
            return pick(which, dp_Phi(x / s), dp_Q(x / s),
                        (1.0 - q) * dp_Phi(x / s) + q * dp_Phi((x - 1.0) / s),
                        (1.0 - q) * dp_Q(x / s) + q * dp_Q((x - 1.0) / s));
        }
    case 3:
    default: {
        double b = s;
        if (m->dir == PLD_REMOVE) { /* P = (1-q)Lap(0)+qLap(1), Q = Lap(0); L > l <=> X > t */
            double a = expm1(l) + q;
            if (a <= 0.0)
                return cdf ? 0.0 : 1.0;
            double u = log(a / q);
            if (u >= 1.0 / b)
                return cdf ? 1.0 : 0.0;
            if (u < -1.0 / b)
                return cdf ? 0.0 : 1.0;
            double t = (1.0 + b * u) / 2.0;
            return pick(which, (1.0 - q) * lap_surv(0.0, b, t) + q * lap_surv(1.0, b, t),
                        (1.0 - q) * lap_cdf(0.0, b, t) + q * lap_cdf(1.0, b, t),
                        lap_surv(0.0, b, t), lap_cdf(0.0, b, t));
        } else { /* P = Lap(0), Q = (1-q)Lap(0)+qLap(1); L > l <=> X < t */
            double a = expm1(-l) + q;
            if (a <= 0.0)
                return cdf ? 1.0 : 0.0;
            double u = log(a / q);
            if (u > 1.0 / b)
                return cdf ? 0.0 : 1.0;
            if (u <= -1.0 / b)
                return cdf ? 1.0 : 0.0;
            double t = (1.0 + b * u) / 2.0;
            return pick(which, lap_cdf(0.0, b, t), lap_surv(0.0, b, t),
                        (1.0 - q) * lap_cdf(0.0, b, t) + q * lap_cdf(1.0, b, t),
                        (1.0 - q) * lap_surv(0.0, b, t) + q * lap_surv(1.0, b, t));
        }
    }
    }
}

/* The smallest l (to within h) with S_P(l) <= tail (upper = 1) or the largest with
 * F_P(l) <= tail (upper = 0), searching outward from 0. */
static dpb_status find_cut(const loss_model *m, int upper, double h, double *cut)
{
    double bound = upper ? m->lmax : m->lmin;
    if (isfinite(bound)) {
        *cut = bound;
        return DPB_OK;
    }
    int which = upper ? S_P : F_P;
    double sgn = upper ? 1.0 : -1.0, inner = 0.0, outer = 1.0;
    while (model_eval(m, sgn * outer, which) > PLD_TAIL) {
        inner = outer;
        outer *= 2.0;
        if (outer > h * (double)PLD_MAX_POINTS)
            return DPB_ELIMIT;
    }
    while (outer - inner > h) {
        double mid = 0.5 * (inner + outer);
        if (model_eval(m, sgn * mid, which) > PLD_TAIL)
            inner = mid;
        else
            outer = mid;
    }
    *cut = sgn * outer;
    return DPB_OK;
}

/* Mass of (a, b] under P (q = 0) or Q (q = 1), from the survival function in the upper part
 * and from the cdf in the lower part, so neither cancels. *S_a carries S(a) between calls. */
typedef struct {
    double S, F; /* at the previous knot */
} tails;

static double interval_mass(const loss_model *m, int under_q, tails *t, double b)
{
    int s = under_q ? S_Q : S_P, f = under_q ? F_Q : F_P;
    double Sb = model_eval(m, b, s), Fb, mass;
    if (t->S < 0.5) {
        mass = t->S - Sb;
        Fb = 1.0 - Sb; /* not used for masses while S < 0.5 */
    } else {
        Fb = model_eval(m, b, f);
        mass = Fb - t->F;
    }
    t->S = Sb;
    t->F = Fb;
    return mass > 0.0 ? mass : 0.0;
}

/* Split the P-mass mp (with Q-mass mq = E_Q-mass) of the loss interval (l_i, l_i + h]
 * between its two knots by linear interpolation in likelihood-ratio space ("connect the
 * dots", Doroshenko et al. 2022): the upper knot gets x_{i+1}(mp - x_i mq)/(x_{i+1} - x_i)
 * = (mp - e^{l_i} mq)/(1 - e^{-h}), the lower knot the rest. P-mass is conserved and the
 * resulting delta(eps) interpolates the true one at every knot and lies above it between
 * knots (delta is convex in e^eps), so the discrete pair dominates the true pair. */
static void split_interval(double *lower, double *upper, double li, double h, double mp,
                           double mq)
{
    double xq = mq > 0.0 ? exp(li + log(mq)) : 0.0;
    double up = (mp - xq) / -expm1(-h);
    if (!(up > 0.0))
        up = 0.0;
    if (up > mp)
        up = mp;
    *upper += up;
    *lower += mp - up;
}

static dpb_status discretise(const loss_model *m, double h, pld_pmf *out)
{
    double hi, lo;
    dpb_status st = find_cut(m, 1, h, &hi);
    if (st == DPB_OK)
        st = find_cut(m, 0, h, &lo);
    if (st != DPB_OK)
        return st;
    int64_t klo = (int64_t)floor(lo / h), khi = (int64_t)ceil(hi / h);
    if (khi < klo || (double)(khi - klo) >= (double)PLD_MAX_POINTS)
        return DPB_ELIMIT;
    st = pmf_alloc(out, h, klo, (size_t)(khi - klo + 1));
    if (st != DPB_OK)
        return st;
    double l0 = (double)klo * h;
    tails tp = {model_eval(m, l0, S_P), model_eval(m, l0, F_P)};
    tails tq = {model_eval(m, l0, S_Q), model_eval(m, l0, F_Q)};
    out->p[0] = tp.F; /* all P-mass at or below the lowest knot: rounded up onto it */
    for (size_t i = 0; i + 1 < out->n; i++) {
        double li = (double)(klo + (int64_t)i) * h;
        double mp = interval_mass(m, 0, &tp, li + h);
        double mq = interval_mass(m, 1, &tq, li + h);
        split_interval(&out->p[i], &out->p[i + 1], li, h, mp, mq);
    }
    /* Above the top knot: interpolate between it and +infinity (x = inf): the knot gets
     * x_n Q(L > l_n), infinity the rest of P(L > l_n). */
    double ln = (double)khi * h;
    double xq = tq.S > 0.0 ? exp(ln + log(tq.S)) : 0.0;
    if (xq > tp.S)
        xq = tp.S;
    out->p[out->n - 1] += xq;
    out->inf_mass = tp.S - xq;
    return DPB_OK;
}

static int bad_h(double h)
{
    return !(h >= 1e-7 && h <= 1.0);
}

dpb_status pld_gaussian(double sigma, double h, pld_pmf *out)
{
    if (!(sigma > 0.0) || !isfinite(sigma) || bad_h(h))
        return DPB_EINVAL;
    loss_model m = {0, 0, 1.0, sigma, -HUGE_VAL, HUGE_VAL};
    return discretise(&m, h, out);
}

dpb_status pld_laplace(double b, double h, pld_pmf *out)
{
    if (!(b > 0.0) || !isfinite(b) || bad_h(h))
        return DPB_EINVAL;
    loss_model m = {1, 0, 1.0, b, -1.0 / b, 1.0 / b};
    return discretise(&m, h, out);
}

dpb_status pld_sampled_gaussian(double q, double sigma, int dir, double h, pld_pmf *out)
{
    if (!(q > 0.0 && q < 1.0) || !(sigma > 0.0) || !isfinite(sigma) || bad_h(h))
        return DPB_EINVAL;
    loss_model m = {2, dir, q, sigma, -HUGE_VAL, HUGE_VAL};
    if (dir == PLD_REMOVE)
        m.lmin = log1p(-q);
    else
        m.lmax = -log1p(-q);
    return discretise(&m, h, out);
}

dpb_status pld_sampled_laplace(double q, double b, int dir, double h, pld_pmf *out)
{
    if (!(q > 0.0 && q < 1.0) || !(b > 0.0) || !isfinite(b) || bad_h(h))
        return DPB_EINVAL;
    double lo = log1p(q * expm1(-1.0 / b)), hi = log1p(q * expm1(1.0 / b));
    loss_model m = {3, dir, q, b, lo, hi};
    if (dir == PLD_ADD) {
        m.lmin = -hi;
        m.lmax = -lo;
    }
    return discretise(&m, h, out);
}

dpb_status pld_eps_delta(double eps, double delta, double h, pld_pmf *out)
{
    if (!(eps >= 0.0) || !isfinite(eps) || !(delta >= 0.0 && delta <= 1.0) || bad_h(h))
        return DPB_EINVAL;
    /* The dominating pair of (eps, delta)-DP (Kairouz et al.): under P the loss is +inf with
     * probability delta, +eps with (1-delta) e^eps/(1+e^eps), -eps with (1-delta)/(1+e^eps);
     * each atom's Q-mass is its P-mass times e^{-l}. Atoms off the grid are split between
     * their two knots as in discretise(). */
    int64_t k0 = (int64_t)floor(-eps / h), k1 = (int64_t)ceil(eps / h);
    dpb_status st = pmf_alloc(out, h, k0, (size_t)(k1 - k0 + 1));
    if (st != DPB_OK)
        return st;
    const double atom_l[2] = {-eps, eps};
    const double p_hi = 1.0 / (1.0 + exp(-eps)); /* e^eps / (1 + e^eps) */
    const double atom_p[2] = {(1.0 - delta) * (1.0 - p_hi), (1.0 - delta) * p_hi};
    for (int a = 0; a < 2; a++) {
        double l = atom_l[a], kf = floor(l / h);
        size_t i = (size_t)((int64_t)kf - k0);
        if (kf * h == l || i + 1 >= out->n) {
            out->p[(size_t)((int64_t)ceil(l / h) - k0)] += atom_p[a];
            continue;
        }
        split_interval(&out->p[i], &out->p[i + 1], kf * h, h, atom_p[a], atom_p[a] * exp(-l));
    }
    out->inf_mass = delta;
    return DPB_OK;
}

dpb_status pld_identity(double h, pld_pmf *out)
{
    if (bad_h(h))
        return DPB_EINVAL;
    dpb_status st = pmf_alloc(out, h, 0, 1);
    if (st == DPB_OK)
        out->p[0] = 1.0;
    return st;
}

dpb_status pld_non_private(double h, pld_pmf *out)
{
    if (bad_h(h))
        return DPB_EINVAL;
    dpb_status st = pmf_alloc(out, h, 0, 1);
    if (st == DPB_OK)
        out->inf_mass = 1.0;
    return st;
}

/* ---- composition ------------------------------------------------------------------------ */

/* The smallest 2^a 3^b 5^c >= n (sizes FFTW handles fastest). */
static size_t good_size(size_t n)
{
    size_t best = (size_t)1 << 62;
    for (size_t p2 = 1; p2 < 2 * n + 2; p2 *= 2)
        for (size_t p3 = p2; p3 < 2 * n + 2; p3 *= 3)
            for (size_t p5 = p3; p5 < 2 * n + 2; p5 *= 5)
                if (p5 >= n && p5 < best)
                    best = p5;
    return best;
}

/* Move tiny tails: the top bins whose total is <= PLD_TAIL to +infinity, the bottom bins
 * whose total is <= PLD_TAIL up to the first kept bin. Shrinks the array in place. */
static void trim_tails(pld_pmf *d)
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

/* Circular self-convolution power: out[j] = (a^{*count})[j mod N], input zero-padded to N. */
static dpb_status fft_power(const double *in, size_t n_in, size_t N, uint64_t count, double *out)
{
    size_t nc = N / 2 + 1;
    double *buf = fftw_malloc(N * sizeof *buf);
    fftw_complex *X = fftw_malloc(nc * sizeof *X);
    if (buf == NULL || X == NULL) {
        fftw_free(buf);
        fftw_free(X);
        return DPB_ENOMEM;
    }
    pthread_mutex_lock(&plan_lock);
    fftw_plan fwd = fftw_plan_dft_r2c_1d((int)N, buf, X, FFTW_ESTIMATE);
    fftw_plan inv = fftw_plan_dft_c2r_1d((int)N, X, buf, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    dpb_status st = DPB_OK;
    if (fwd == NULL || inv == NULL) {
        st = DPB_ENOMEM;
        goto out;
    }
    memset(buf, 0, N * sizeof *buf);
    memcpy(buf, in, n_in * sizeof *in);
    fftw_execute(fwd);
    /* <complex.h> precedes <fftw3.h>, so fftw_complex is the C99 double complex */
    if (count > 1)
        for (size_t k = 0; k < nc; k++)
            X[k] = cpow(X[k], (double)count);
    fftw_execute(inv);
    for (size_t j = 0; j < N; j++)
        out[j] = buf[j] / (double)N;
out:
    pthread_mutex_lock(&plan_lock);
    if (fwd)
        fftw_destroy_plan(fwd);
    if (inv)
        fftw_destroy_plan(inv);
    pthread_mutex_unlock(&plan_lock);
    fftw_free(buf);
    fftw_free(X);
    return st;
}

/* Linear convolution of a and b into c (length na + nb - 1): direct for small inputs, FFT
 * otherwise (the product of two transforms of the zero-padded inputs). */
static dpb_status convolve(const double *a, size_t na, const double *b, size_t nb, double *c)
{
    size_t nc = na + nb - 1;
    if ((double)na * (double)nb <= 4e6) {
        memset(c, 0, nc * sizeof *c);
        for (size_t i = 0; i < na; i++)
            for (size_t j = 0; j < nb; j++)
                c[i + j] += a[i] * b[j];
        return DPB_OK;
    }
    size_t N = good_size(nc), nf = N / 2 + 1;
    double *buf = fftw_malloc(N * sizeof *buf);
    fftw_complex *A = fftw_malloc(nf * sizeof *A), *B = fftw_malloc(nf * sizeof *B);
    dpb_status st = DPB_OK;
    fftw_plan pa = NULL, pb = NULL, inv = NULL;
    if (buf == NULL || A == NULL || B == NULL) {
        st = DPB_ENOMEM;
        goto out;
    }
    pthread_mutex_lock(&plan_lock);
    pa = fftw_plan_dft_r2c_1d((int)N, buf, A, FFTW_ESTIMATE);
    pb = fftw_plan_dft_r2c_1d((int)N, buf, B, FFTW_ESTIMATE);
    inv = fftw_plan_dft_c2r_1d((int)N, A, buf, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    if (pa == NULL || pb == NULL || inv == NULL) {
        st = DPB_ENOMEM;
        goto out;
    }
    memset(buf, 0, N * sizeof *buf);
    memcpy(buf, a, na * sizeof *a);
    fftw_execute(pa);
    memset(buf, 0, N * sizeof *buf);
    memcpy(buf, b, nb * sizeof *b);
    fftw_execute(pb);
    for (size_t k = 0; k < nf; k++)
        A[k] *= B[k];
    fftw_execute(inv);
    for (size_t j = 0; j < nc; j++)
        c[j] = buf[j] / (double)N;
out:
    pthread_mutex_lock(&plan_lock);
    if (pa)
        fftw_destroy_plan(pa);
    if (pb)
        fftw_destroy_plan(pb);
    if (inv)
        fftw_destroy_plan(inv);
    pthread_mutex_unlock(&plan_lock);
    fftw_free(buf);
    fftw_free(A);
    fftw_free(B);
    return st;
}

static void clamp_negative(double *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0.0)
            p[i] = 0.0;
}

dpb_status pld_compose(const pld_pmf *a, const pld_pmf *b, pld_pmf *out)
{
    if (a->h != b->h)
        return DPB_EINVAL;
    size_t n = a->n + b->n - 1;
    dpb_status st = pmf_alloc(out, a->h, a->lo + b->lo, n);
    if (st != DPB_OK)
        return st;
    st = convolve(a->p, a->n, b->p, b->n, out->p);
    if (st != DPB_OK) {
        pld_free(out);
        return st;
    }
    clamp_negative(out->p, n);
    out->inf_mass = 1.0 - (1.0 - a->inf_mass) * (1.0 - b->inf_mass);
    trim_tails(out);
    return DPB_OK;
}

/* ln sum_i p_i e^{t l_i} over the finite part (l_i = (lo + i) h), shifted to avoid
 * overflow. Returns -HUGE_VAL for an empty part. */
static double log_mgf(const pld_pmf *d, double t)
{
    double lmax = -HUGE_VAL;
    for (size_t i = 0; i < d->n; i++)
        if (d->p[i] > 0.0) {
            double v = t * (double)(d->lo + (int64_t)i) * d->h;
            if (v > lmax)
                lmax = v;
        }
    if (lmax == -HUGE_VAL)
        return lmax;
    double s = 0.0;
    for (size_t i = 0; i < d->n; i++)
        if (d->p[i] > 0.0)
            s += d->p[i] * exp(t * (double)(d->lo + (int64_t)i) * d->h - lmax);
    return lmax + log(s);
}

dpb_status pld_self_compose(const pld_pmf *a, uint64_t count, pld_pmf *out)
{
    if (count == 0)
        return pld_identity(a->h, out);
    if (count == 1)
        return pld_copy(a, out);
    double T = (double)count, h = a->h;
    /* Natural support of the T-fold sum, in grid indices. */
    double nat_lo = T * (double)a->lo, nat_hi = T * (double)(a->lo + (int64_t)a->n - 1);
    /* Chernoff window: P(S > U) <= exp(T K(t) - t U), P(S < V) <= exp(T K(-t) + t V). */
    double mass = 0.0, mean = 0.0, var = 0.0;
    for (size_t i = 0; i < a->n; i++) {
        double l = (double)(a->lo + (int64_t)i) * h;
        mass += a->p[i];
        mean += a->p[i] * l;
    }
    if (mass > 0.0) {
        mean /= mass;
        for (size_t i = 0; i < a->n; i++) {
            double dl = (double)(a->lo + (int64_t)i) * h - mean;
            var += a->p[i] * dl * dl;
        }
        var /= mass;
    }
    double w_lo = nat_lo, w_hi = nat_hi, bound_up = 0.0, bound_lo = 0.0;
    if (var > 0.0) {
        double ltail = log(PLD_TAIL);
        double t0 = sqrt(-2.0 * ltail / T) / sqrt(var);
        double best_u = HUGE_VAL, best_v = -HUGE_VAL;
        static const double mult[] = {0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0};
        for (size_t j = 0; j < sizeof mult / sizeof mult[0]; j++) {
            double t = t0 * mult[j];
            double u = (T * log_mgf(a, t) - ltail) / t;
            double v = (ltail - T * log_mgf(a, -t)) / t;
            if (u < best_u)
                best_u = u;
            if (v > best_v)
                best_v = v;
        }
        if (isfinite(best_u) && best_u / h < w_hi) {
            w_hi = ceil(best_u / h);
            bound_up = PLD_TAIL;
        }
        if (isfinite(best_v) && best_v / h > w_lo) {
            w_lo = floor(best_v / h);
            bound_lo = PLD_TAIL;
        }
    }
    double width = w_hi - w_lo + 1.0;
    if (!(width >= 1.0) || width > (double)PLD_MAX_POINTS)
        return DPB_ELIMIT;
    size_t n_out = (size_t)width;
    size_t N = good_size(n_out > a->n ? n_out : a->n);
    if (N > 2 * PLD_MAX_POINTS)
        return DPB_ELIMIT;
    double *circ = malloc(N * sizeof *circ);
    if (circ == NULL)
        return DPB_ENOMEM;
    dpb_status st = fft_power(a->p, a->n, N, count, circ);
    if (st == DPB_OK)
        st = pmf_alloc(out, h, (int64_t)w_lo, n_out);
    if (st != DPB_OK) {
        free(circ);
        return st;
    }
    /* composed index c sits at (c - T lo) mod N */
    int64_t base = (int64_t)w_lo - (int64_t)(T * (double)a->lo);
    for (size_t j = 0; j < n_out; j++) {
        int64_t pos = (base + (int64_t)j) % (int64_t)N;
        if (pos < 0)
            pos += (int64_t)N;
        out->p[j] = circ[pos];
    }
    free(circ);
    clamp_negative(out->p, n_out);
    /* Mass outside the window aliased into it: bounded by the Chernoff tails; the upper part
     * belongs above the window, so its bound goes to +infinity (the lower part wrapped to
     * the top of the window, which only overstates losses). */
    out->inf_mass = -expm1(T * log1p(-a->inf_mass)) + bound_up + bound_lo;
    if (out->inf_mass > 1.0)
        out->inf_mass = 1.0;
    trim_tails(out);
    return DPB_OK;
}

/* ---- delta and epsilon ------------------------------------------------------------------- */

double pld_delta(const pld_pmf *d, double eps)
{
    double s = 0.0;
    for (size_t i = d->n; i-- > 0;) {
        double l = (double)(d->lo + (int64_t)i) * d->h;
        if (l <= eps)
            break;
        s += d->p[i] * -expm1(eps - l);
    }
    double delta = dp_round_up(d->inf_mass + s, 1e-12);
    return delta > 1.0 ? 1.0 : delta;
}

double pld_epsilon(const pld_pmf *d, double delta)
{
    if (d->inf_mass > delta)
        return HUGE_VAL;
    if (pld_delta(d, 0.0) <= delta)
        return 0.0;
    /* For eps in [l_{i-1}, l_i): delta(eps) = A_i - e^eps B_i with A_i = inf + sum_{k>=i} p_k
     * and B_i = sum_{k>=i} p_k e^{-l_k}. Walk down until the root falls in the interval. */
    double A = d->inf_mass, B = 0.0, eps = 0.0;
    for (size_t i = d->n; i-- > 0;) {
        double l = (double)(d->lo + (int64_t)i) * d->h;
        if (l <= 0.0)
            break;
        A += d->p[i];
        B += d->p[i] * exp(-l);
        double lprev = l - d->h;
        if (lprev < 0.0)
            lprev = 0.0;
        if (A - exp(lprev) * B > delta) {
            eps = B > 0.0 ? log((A - delta) / B) : l;
            if (eps < lprev)
                eps = lprev;
            if (eps > l)
                eps = l;
            break;
        }
    }
    /* Round up and verify with the direct sum. */
    eps = dp_round_up(eps, 1e-12) + 1e-15;
    for (int k = 0; k < 64 && pld_delta(d, eps) > delta; k++)
        eps = eps * (1.0 + 1e-10) + 1e-12;
    return eps;
}
