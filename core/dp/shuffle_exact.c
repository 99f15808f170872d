/*
 * shuffle_exact.c - certified delta(eps) for one epoch of seed 004's shuffled model
 * (docs/MATH.md section 2.1). See shuffle_exact.h for the method; the notation here:
 *
 *   Y = exp(s Z - s^2/2), s = 1/sigma (mean 1), z(x) = (ln x + s^2/2)/s, so
 *   P(Y > x) = Q(z), E[Y; Y > x] = Q(z - s), E[Y^2; Y > x] = e^{s^2} Q(z - 2s);
 *   n = M - 1 other factors, each restricted to Y <= Ymax (a sub-probability measure),
 *   discretised on nodes j h (j = 0..KY) by a mean-preserving split of each bin;
 *   the n-fold convolution read on the window nodes (o + i) h, i < N.
 *
 * Bounds added to the window's sums (f10(s) = C(K - s) is increasing with slope <= 1,
 * f01(s) = P(b - s) is decreasing and <= b; both >= 0):
 *   - a factor above Ymax (union bound over the n factors):
 *       E[f10(S); some Y_j > Ymax] <= n (Ct(K) + n p),  Ct(K) = E[(Y - K)+; Y > Ymax],
 *       E[f01(S); some Y_j > Ymax] <= n p (b - Ymax)+,  p = P(Y > Ymax);
 *   - the sum outside the window [B, T], by Chernoff bounds on the discrete law:
 *       above: f10 <= f10(T) + (s - T), E[(S - T)+] <= e^{-lT} m(l)^n / (e l);
 *       below: f10 <= f10(B);  f01 <= P(b) below, f01 <= f01(T) above;
 *   - FFT round-off: an estimate per grid point of the law times the sum of f over the
 *     window, plus the convolutions' own error, so no delta is reported below it.
 */
#include "shuffle_exact.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <fftw3.h>

#include "../common/cancel.h"
#include "normal.h"
#include "pld.h"

#define U DBL_EPSILON
/* nodes per block in the moment generating function's upper bound */
#define BLOCK 64
/* nodes below this are taken one by one */
#define EXACT_NODES 1024
/* the truncation's crude tail allowance, in delta */
#define YTAIL 1e-13
/* delta_01 is summed directly when b has at most this many nodes below it */
#define DIRECT_NODES 512

struct shx_model {
    /* key */
    double sigma, h_scale;
    uint64_t rounds;
    /* the factor */
    double s, t;    /* 1/sigma, 1/sigma^2 */
    double h, ymax; /* grid step, truncation (a node) */
    double p_tail;  /* P(Y > Ymax) */
    double e1_tail; /* E[Y; Y > Ymax] */
    double n;       /* M - 1 */
    /* the sum on the window */
    int64_t o;                    /* first window node */
    size_t N;                     /* window nodes */
    int64_t k0;                   /* floor(M/h) - o */
    double ptot;                  /* total mass on the window (after clamping) */
    double B, T;                  /* first and last window node */
    double below, above, above_x; /* Chernoff: P(S < B), P(S > T), E[(S - T)+] */
    double e_pt;                  /* round-off estimate per point of the law */
    double e_2;                   /* round-off estimate of the law's error in 2-norm */
    double conv_err;              /* round-off of the convolution (absolute, in the sums) */
    double ccut;                  /* the kernel's cut-off value (added to the sums) */
    double *gC;                   /* gC[k - k0] = sum_i p_i C((k - i) h), k0 <= k < kend */
    int64_t kend;
    double *gP;   /* gP[k] = sum_i p_i P((k + 1 - i) h), 0 <= k <= k0 */
    double *plow; /* the law's first nlow window points, for exact sums near B */
    size_t nlow;
    size_t bytes;
    /* cache */
    int refs;
    uint64_t stamp;
    struct shx_model *next;
};

/* ---- the lognormal factor -------------------------------------------------------------- */

static double zof(const shx_model *m, double x)
{
    return (log(x) + m->t / 2.0) / m->s;
}

/* C(K) = E[(Y - K)+] */
static double call(const shx_model *m, double K)
{
    if (K <= 0.0)
        return 1.0 - K;
    if (isinf(K))
        return 0.0;
    double z = zof(m, K);
    if (z - m->s > 0.0) {
        double d = dp_mills(z - m->s) - dp_mills(z);
        return d > 0.0 ? dp_npdf(z - m->s) * d : 0.0;
    }
    double v = dp_Q(z - m->s) - K * dp_Q(z);
    return v > 0.0 ? v : 0.0;
}

/* P(K) = E[(K - Y)+] */
static double put(const shx_model *m, double K)
{
    if (K <= 0.0)
        return 0.0;
    double z = zof(m, K);
    if (z < 0.0) {
        double d = dp_mills(-z) - dp_mills(m->s - z);
        return d > 0.0 ? dp_npdf(z - m->s) * d : 0.0;
    }
    double v = K * dp_Phi(z) - dp_Phi(z - m->s);
    return v > 0.0 ? v : 0.0;
}

/* I(x) = int_x^inf C(u) du = E[((Y - x)+)^2] / 2 (for round-off estimates only) */
static double call_int(const shx_model *m, double x)
{
    if (x <= 0.0)
        return (expm1(m->t) + (1.0 - x) * (1.0 - x)) / 2.0;
    double z = zof(m, x);
    double v = exp(m->t) * dp_Q(z - 2.0 * m->s) - 2.0 * x * dp_Q(z - m->s) + x * x * dp_Q(z);
    return v > 0.0 ? v / 2.0 : call(m, x) * x; /* crude when the form cancels */
}

/* J(x) = int_0^x P(u) du = E[((x - Y)+)^2] / 2 (for round-off estimates only) */
static double put_int(const shx_model *m, double x)
{
    if (x <= 0.0)
        return 0.0;
    double z = zof(m, x);
    double v = x * x * dp_Phi(z) - 2.0 * x * dp_Phi(z - m->s) + exp(m->t) * dp_Phi(z - 2.0 * m->s);
    return v > 0.0 ? v / 2.0 : put(m, x) * x;
}

/* An upper bound on sum_i C(K - s_i)^2 over the window (C(K - s) increases in s):
 * (1/h) int_{K-T-h}^{K-B} C(u)^2 du + C(K - T)^2, with C(u) = 1 - u for u <= 0 and
 * C(u)^2 <= C(0) C(u) = C(u) for u > 0. */
static double call_sq_sum(const shx_model *m, double K)
{
    double a = K - m->T - m->h, b = K - m->B, v = 0.0;
    if (a < 0.0) {
        double bb = b < 0.0 ? b : 0.0;
        v += (pow(1.0 - a, 3.0) - pow(1.0 - bb, 3.0)) / 3.0;
    }
    if (b > 0.0)
        v += call_int(m, a > 0.0 ? a : 0.0);
    double c = call(m, K - m->T);
    return v / m->h + c * c;
}

/* mass and first moment of Y on (a, b] */
static void bin_moments(const shx_model *m, double a, double b, double *mass, double *mom)
{
    double za = a > 0.0 ? zof(m, a) : -HUGE_VAL, zb = zof(m, b);
    if (za > 0.0) {
        *mass = dp_Q(za) - dp_Q(zb);
        *mom = dp_Q(za - m->s) - dp_Q(zb - m->s);
    } else {
        *mass = dp_Phi(zb) - (a > 0.0 ? dp_Phi(za) : 0.0);
        *mom = dp_Phi(zb - m->s) - (a > 0.0 ? dp_Phi(za - m->s) : 0.0);
    }
    if (*mass < 0.0)
        *mass = 0.0;
    if (*mom < 0.0)
        *mom = 0.0;
}

/* ---- Chernoff bounds on the discrete sum ------------------------------------------------ */

typedef struct {
    size_t nb;
    double *lw;        /* ln of each block's mass */
    double *ylo, *yhi; /* each block's smallest and largest node */
} blocks;

/* ln E[e^{l Y~}] bounded above: each block's mass at its worst node */
static double log_mgf(const blocks *bl, double l)
{
    double mx = -HUGE_VAL;
    for (size_t b = 0; b < bl->nb; b++) {
        double v = bl->lw[b] + l * (l > 0.0 ? bl->yhi[b] : bl->ylo[b]);
        if (v > mx)
            mx = v;
    }
    if (!isfinite(mx))
        return mx;
    double s = 0.0;
    for (size_t b = 0; b < bl->nb; b++)
        s += exp(bl->lw[b] + l * (l > 0.0 ? bl->yhi[b] : bl->ylo[b]) - mx);
    return mx + log(s);
}

/* kind 0: ln P(S > x) <= -l x + n ln m(l); kind 1: ln E[(S - x)+] <= that - 1 - ln l;
 * kind 2: ln P(S < x) <= l x + n ln m(-l). Minimised over l > 0 by golden section in ln l
 * (each objective is quasi-convex in l). */
static double chernoff_obj(const blocks *bl, double n, double x, int kind, double l)
{
    if (kind == 2)
        return l * x + n * log_mgf(bl, -l);
    double v = -l * x + n * log_mgf(bl, l);
    return kind == 1 ? v - 1.0 - log(l) : v;
}

static double chernoff(const blocks *bl, double n, double x, int kind, double lmax)
{
    double a = log(1e-12), b = log(lmax);
    const double g = 0.6180339887498949;
    double c = b - g * (b - a), d = a + g * (b - a);
    double fc = chernoff_obj(bl, n, x, kind, exp(c)), fd = chernoff_obj(bl, n, x, kind, exp(d));
    for (int it = 0; it < 48; it++) {
        if (fc < fd) {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = chernoff_obj(bl, n, x, kind, exp(c));
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = chernoff_obj(bl, n, x, kind, exp(d));
        }
    }
    double best = fc < fd ? fc : fd;
    double v = exp(best);
    if (kind != 1 && v > 1.0)
        v = 1.0;
    return v;
}

/* ---- building -------------------------------------------------------------------------- */

static size_t pow2_at_least(size_t n)
{
    size_t N = 1;
    while (N < n)
        N <<= 1;
    return N;
}

/* The n-fold convolution of y (nodes 0..ny-1), read on window nodes o..o+N-1 (aliased
 * modulo N), by one FFT power. Writes the round-off estimate per point to *err. */
static dpb_status sum_law(const double *y, size_t ny, double n, int64_t o, size_t N, double *out,
                          double *err, double *err2)
{
    size_t nc = N / 2 + 1;
    double *buf = fftw_malloc(N * sizeof *buf);
    fftw_complex *X = fftw_malloc(nc * sizeof *X);
    fftw_plan fwd = NULL, inv = NULL;
    dpb_status st = DPB_ENOMEM;
    if (buf == NULL || X == NULL)
        goto out;
    pld_fftw_lock();
    fwd = fftw_plan_dft_r2c_1d((int)N, buf, X, FFTW_ESTIMATE);
    inv = fftw_plan_dft_c2r_1d((int)N, X, buf, FFTW_ESTIMATE);
    pld_fftw_unlock();
    if (fwd == NULL || inv == NULL)
        goto out;
    memset(buf, 0, N * sizeof *buf);
    memcpy(buf, y, ny * sizeof *y);
    fftw_execute(fwd);
    uint64_t on = (uint64_t)o % (uint64_t)N;
    double acc = 0.0, acc2 = 0.0;
    for (size_t k = 0; k < nc; k++) {
        double a = cabs(X[k]);
        double w = (k == 0 || 2 * k == N) ? 1.0 : 2.0; /* the half spectrum stands for both */
        if (a == 0.0) {
            X[k] = 0.0;
            continue;
        }
        double la = log(a);
        if (n * la < -745.0 && (n - 1.0) * la < -745.0) {
            X[k] = 0.0; /* underflows: |X_k|^n < 1e-323 */
            continue;
        }
        acc += w * (n * exp((n - 1.0) * la) + exp(n * la));
        acc2 += w * exp(2.0 * (n - 1.0) * la);
        /* phase: n arg + 2 pi (k o mod N) / N, the second in exact integer arithmetic */
        double ph = fmod(n * carg(X[k]), 2.0 * M_PI);
        uint64_t ko = ((uint64_t)k * on) % (uint64_t)N; /* both < 2^22 */
        ph += 2.0 * M_PI * (double)ko / (double)N;
        X[k] = exp(n * la) * cexp(I * ph);
    }
    fftw_execute(inv);
    double neg = 0.0;
    for (size_t j = 0; j < N; j++) {
        out[j] = buf[j] / (double)N;
        if (-out[j] > neg)
            neg = -out[j];
    }
    double lg = log2((double)N) + 1.0;
    double e = pld_fft_eta(N) * acc / (double)N;
    *err = e > 2.0 * neg ? e : 2.0 * neg;
    /* the 2-norm of the error (normwise FFT stability; each transform component is off
     * by at most ~lg u since the input sums to <= 1, and the power multiplies that by
     * n |phi|^{n-1}; the power itself is good to ~n u relative) */
    double p2 = 0.0;
    for (size_t j = 0; j < N; j++)
        p2 += out[j] * out[j];
    *err2 = U * ((4.0 * lg + 2.0 * n) * sqrt(p2) + 2.0 * lg * n * sqrt(acc2 / (double)N));
    st = DPB_OK;
out:
    pld_fftw_lock();
    if (fwd)
        fftw_destroy_plan(fwd);
    if (inv)
        fftw_destroy_plan(inv);
    pld_fftw_unlock();
    fftw_free(buf);
    fftw_free(X);
    return st;
}

/* The grid and window of the sum's law for m (sigma, rounds and their derived fields set):
 * the factor truncated at ymax (the smallest 8 * 2^(k/4) whose crude tail term (n/M)(E[Y; Y >
 * Ymax] + n P(Y > Ymax)) is <= YTAIL, the terms added per query usually far smaller, capped so
 * the factor takes at most a quarter of the window), the step h widened until the window of
 * +-14 standard deviations fits SHX_MAX_WINDOW. Sets m->h, ymax, p_tail, e1_tail, o, N, B and
 * T; returns KY, the factor's last node (ymax = KY h). */
static size_t place_window(shx_model *m, double h_scale)
{
    double n = m->n, v = expm1(m->t), sdy = sqrt(v);
    double h = 0.02 * (sdy < 1.0 ? sdy : 1.0) * h_scale;
    size_t N = 0, KY = 0;
    double ymax = 0.0, Bv = 0.0, Tv = 0.0;
    for (int pass = 0; pass < 4; pass++) {
        ymax = 8.0;
        double cap = (double)(SHX_MAX_WINDOW / 4) * h;
        for (;;) {
            double z = zof(m, ymax);
            double tail = n / (n + 1.0) * (dp_Q(z - m->s) + n * dp_Q(z));
            if (tail <= YTAIL || ymax >= cap)
                break;
            ymax *= 1.189207115002721; /* 2^(1/4) */
        }
        if (ymax > cap)
            ymax = cap;
        KY = (size_t)ceil(ymax / h);
        ymax = (double)KY * h;
        double sd = sqrt(n * v);
        Bv = n - 14.0 * sd - 2.0;
        if (Bv < 0.0)
            Bv = 0.0;
        Tv = n + 14.0 * sd + 0.5 * ymax + 2.0;
        double need = ceil((Tv - floor(Bv / h) * h) / h) + 1.0;
        if (need <= (double)SHX_MAX_WINDOW)
            break;
        h *= need / (double)SHX_MAX_WINDOW * 1.01;
    }
    m->h = h;
    m->ymax = ymax;
    {
        double z = zof(m, ymax);
        m->p_tail = dp_Q(z);
        m->e1_tail = dp_Q(z - m->s);
    }
    m->o = (int64_t)floor(Bv / h);
    N = pow2_at_least((size_t)ceil((Tv - (double)m->o * h) / h) + 1);
    if (N > SHX_MAX_WINDOW)
        N = SHX_MAX_WINDOW;
    if (N < KY + 1)
        N = pow2_at_least(KY + 1);
    m->N = N;
    m->B = (double)m->o * h;
    m->T = (double)(m->o + (int64_t)N - 1) * h;
    return KY;
}

/* The factor's discrete law on the nodes 0..KY (y: KY + 1 zeroed doubles, caller-owned):
 * each bin's mass split between its two ends so that the mean is kept. */
static void factor_law(const shx_model *m, size_t KY, double *y)
{
    double h = m->h;
    for (size_t j = 0; j < KY; j++) {
        double a = (double)j * h, mass, mom;
        bin_moments(m, a, a + h, &mass, &mom);
        double hi = (mom - a * mass) / h;
        if (hi < 0.0)
            hi = 0.0;
        if (hi > mass)
            hi = mass;
        y[j] += mass - hi;
        y[j + 1] += hi;
    }
}

/* The Chernoff bounds on the mass outside the window (m->below, above, above_x), from blocks
 * of the factor's law y (KY + 1 nodes) for its moment generating function. bl is the
 * caller's (zeroed; its arrays are the caller's to free, also on failure). DPB_ENOMEM or
 * DPB_OK. */
static dpb_status window_tails(shx_model *m, const double *y, size_t KY, blocks *bl)
{
    double h = m->h, n = m->n, ymax = m->ymax;
    size_t fine = KY + 1 < EXACT_NODES ? KY + 1 : EXACT_NODES;
    bl->nb = fine + (KY + 1 - fine + BLOCK - 1) / BLOCK;
    bl->lw = malloc(bl->nb * sizeof *bl->lw);
    bl->ylo = malloc(bl->nb * sizeof *bl->ylo);
    bl->yhi = malloc(bl->nb * sizeof *bl->yhi);
    if (bl->lw == NULL || bl->ylo == NULL || bl->yhi == NULL)
        return DPB_ENOMEM;
    for (size_t b = 0; b < bl->nb; b++) {
        size_t j0 = b < fine ? b : fine + (b - fine) * BLOCK;
        size_t j1 = b < fine ? b + 1 : j0 + BLOCK;
        if (j1 > KY + 1)
            j1 = KY + 1;
        double w = 0.0;
        for (size_t j = j0; j < j1; j++)
            w += y[j];
        bl->lw[b] = w > 0.0 ? log(w * (1.0 + 1e-12)) : -HUGE_VAL;
        bl->ylo[b] = (double)j0 * h;
        bl->yhi[b] = (double)(j1 - 1) * h;
    }
    double lmax = 700.0 / (ymax > 1.0 ? ymax : 1.0);
    m->below = m->o > 0 ? chernoff(bl, n, m->B, 2, lmax) : 0.0;
    m->above = chernoff(bl, n, m->T, 0, lmax);
    m->above_x = chernoff(bl, n, m->T, 1, lmax);
    return DPB_OK;
}

/* The kernel c[j] = C(j h) for j < nk (c[0] = 0). C is convex and decreasing: beyond x = 64
 * it is evaluated every 16th node and linearly interpolated (the chord lies above C:
 * pessimistic); once below 1e-25 it is dropped and 1e-25 added to every sum instead (C
 * decreasing bounds what is dropped; m->ccut keeps the value). */
static void call_kernel(shx_model *m, double *ker, size_t nk)
{
    double h = m->h;
    ker[0] = 0.0;
    m->ccut = 0.0;
    size_t j = 1;
    while (j < nk) {
        double x = (double)j * h;
        if (x <= 64.0) {
            ker[j] = call(m, x);
            j++;
            continue;
        }
        size_t j2 = j + 15 < nk ? j + 15 : nk - 1;
        double a = ker[j - 1], b = call(m, (double)j2 * h);
        for (size_t q = j; q <= j2; q++)
            ker[q] = a + (b - a) * (double)(q - (j - 1)) / (double)(j2 - (j - 1));
        j = j2 + 1;
        if (b < 1e-25) {
            m->ccut = b;
            for (; j < nk; j++)
                ker[j] = 0.0;
        }
    }
}

/* The tables gC (k0..kend-1) and gP (0..np-1) from the sum's law p and its convolution conv
 * with the kernel, and plow, p's first nodes (m->gC, gP allocated by the caller; plow
 * allocated here, owned by m). DPB_ENOMEM or DPB_OK. */
static dpb_status fill_tables(shx_model *m, const double *p, const double *conv, size_t np)
{
    double h = m->h;
    size_t N = m->N;
    /* gC[k] = sum_{i >= k} p_i (1 + (i - k) h) + conv[k], running sums from the top:
     * S0(k) = sum_{i >= k} p_i, T(k) = sum_{i >= k} p_i (i - k) = T(k+1) + S0(k+1) */
    double S0 = 0.0, Tk = 0.0;
    for (int64_t k = (int64_t)N - 1; k >= m->k0; k--) {
        Tk += S0;
        S0 += p[k];
        if (k < m->kend) {
            double g = S0 + h * Tk + conv[k];
            m->gC[k - m->k0] = g > 0.0 ? g : 0.0;
        }
    }
    for (int64_t k = (int64_t)N; k < m->kend; k++) {
        double g = conv[k];
        m->gC[k - m->k0] = g > 0.0 ? g : 0.0;
    }
    m->nlow = np < DIRECT_NODES + 1 ? np : DIRECT_NODES + 1;
    m->plow = malloc(m->nlow * sizeof *m->plow);
    if (m->plow == NULL)
        return DPB_ENOMEM;
    memcpy(m->plow, p, m->nlow * sizeof *p);
    /* gP[k] = sum_{i <= k} p_i ((k + 1 - i) h - 1) + conv[k + 1]; with Pre(k) = sum_{i <= k}
     * p_i and A(k) = sum_{i <= k} p_i (k + 1 - i) = A(k-1) + Pre(k) */
    double pre = 0.0, A = 0.0;
    for (size_t k = 0; k < np; k++) {
        pre += p[k];
        A += pre;
        double g = h * A - pre + conv[k + 1];
        m->gP[k] = g > 0.0 ? g : 0.0;
    }
    m->bytes += ((size_t)(m->kend - m->k0) + np + m->nlow) * sizeof(double);
    return DPB_OK;
}

static dpb_status build(double sigma, uint64_t rounds, double h_scale, shx_model **out)
{
    shx_model *m = calloc(1, sizeof *m);
    if (m == NULL)
        return DPB_ENOMEM;
    m->sigma = sigma;
    m->rounds = rounds;
    m->h_scale = h_scale;
    m->s = 1.0 / sigma;
    m->t = m->s * m->s;
    m->n = (double)(rounds - 1);
    m->bytes = sizeof *m;
    *out = m;
    if (rounds == 1)
        return DPB_OK; /* the Gaussian mechanism: closed form */

    double n = m->n;
    double *y = NULL, *p = NULL, *ker = NULL, *conv = NULL;
    blocks bl = {0};
    dpb_status st = DPB_ENOMEM;
    size_t KY = place_window(m, h_scale), N = m->N;
    double h = m->h;

    /* the factor's discrete law */
    y = calloc(KY + 1, sizeof *y);
    p = fftw_malloc(N * sizeof *p);
    if (y == NULL || p == NULL)
        goto fail;
    factor_law(m, KY, y);
    if (window_tails(m, y, KY, &bl) != DPB_OK)
        goto fail;

    if (dpb_cancelled()) {
        st = DPB_ECANCELLED;
        goto fail;
    }
    st = sum_law(y, KY + 1, n, m->o, N, p, &m->e_pt, &m->e_2);
    if (st != DPB_OK)
        goto fail;
    st = DPB_ENOMEM;
    m->ptot = 0.0;
    for (size_t i = 0; i < N; i++) {
        if (p[i] < 0.0)
            p[i] = 0.0;
        m->ptot += p[i];
    }

    /* Both sums split at the kink of C and P. For i >= k the argument of C is <= 0, where
     * C(x) = 1 - x: that part is exact by running sums. For i < k it is a convolution with
     * the kernel c[j] = C(j h), j >= 1, whose values are <= 1 (so the FFT's absolute error
     * is ~ u). P(x) = x - 1 + C(x) for x > 0 (put-call parity), P = 0 for x <= 0. */
    m->k0 = (int64_t)floor((double)rounds / h) - m->o;
    m->kend = (int64_t)N - 1 + (int64_t)N / 2;
    size_t nk = (size_t)m->kend; /* kernel indices 0..kend-1, c[0] = 0 */
    size_t np = (size_t)(m->k0 + 1);
    ker = malloc(nk * sizeof *ker);
    conv = malloc((N + nk - 1) * sizeof *conv);
    m->gC = malloc((size_t)(m->kend - m->k0) * sizeof *m->gC);
    m->gP = malloc(np * sizeof *m->gP);
    if (ker == NULL || conv == NULL || m->gC == NULL || m->gP == NULL)
        goto fail;
    call_kernel(m, ker, nk);
    if (dpb_cancelled()) {
        st = DPB_ECANCELLED;
        goto fail;
    }
    st = pld_convolve(p, N, ker, nk, conv);
    if (st != DPB_OK)
        goto fail;
    st = DPB_ENOMEM;
    m->conv_err = 8.0 * U * (log2((double)(N + nk)) + 1.0) * m->ptot * (nk > 1 ? ker[1] : 1.0);
    if (fill_tables(m, p, conv, np) != DPB_OK)
        goto fail;
    st = DPB_OK;
fail:
    free(y);
    fftw_free(p);
    free(ker);
    free(conv);
    free(bl.lw);
    free(bl.ylo);
    free(bl.yhi);
    if (st != DPB_OK) {
        free(m->gC);
        free(m->gP);
        free(m->plow);
        free(m);
        *out = NULL;
    }
    return st;
}

static void destroy(shx_model *m)
{
    if (m == NULL)
        return;
    free(m->gC);
    free(m->gP);
    free(m->plow);
    free(m);
}

/* ---- queries --------------------------------------------------------------------------- */

/* An upper bound on E[(S + Y - K)+] over the truncated factors' measure: the window's sum
 * (chord between grid nodes: the sum is convex in K), the mass outside it, the round-off.
 * Below the grid's first K (= M) the sum's slope in K is >= -ptot. */
static double g10(const shx_model *m, double K)
{
    double h = m->h, main, extra = 0.0;
    double u = K / h - (double)m->o;
    if (u < (double)m->k0) {
        extra = m->ptot * ((double)(m->o + m->k0) * h - K);
        u = (double)m->k0;
        K = (double)(m->o + m->k0) * h;
    }
    double kf = floor(u), fr = u - kf;
    if (kf + 1.0 < (double)m->kend) {
        int64_t k = (int64_t)kf - m->k0;
        main = (1.0 - fr) * m->gC[k] + fr * m->gC[k + 1];
    } else {
        main = m->ptot * call(m, K - m->T);
    }
    double outside = (call(m, K - m->T) * m->above + m->above_x) + call(m, K - m->B) * m->below;
    double sumf = (call_int(m, K - m->T - h) - call_int(m, K - m->B)) / h + call(m, K - m->T);
    double floor_ = fmin(m->e_pt * sumf, m->e_2 * sqrt(call_sq_sum(m, K))) + m->conv_err + m->ccut;
    return main + extra + outside + floor_;
}

/* E[(Y - x)+; Y > Ymax] */
static double call_tail(const shx_model *m, double x)
{
    double v = x <= m->ymax ? m->e1_tail - x * m->p_tail : call(m, x);
    return v > 0.0 ? v : 0.0;
}

double shx_delta10(const shx_model *m, double eps)
{
    if (m->rounds == 1) {
        double d, ld;
        dp_gdp_delta(m->s, eps, &d, &ld);
        return d;
    }
    double M = (double)m->rounds, K = M * exp(eps), n = m->n, p = m->p_tail;
    if (!(eps >= 0.0) || isinf(K))
        return isinf(K) ? 0.0 : 1.0;
    /* some factor j above Ymax (union bound over j): (Y_j + R + Y - K)+ is at most
     *   (a) (Y_j - K)+ + (R + Y):               n (Ct(K) + n p), or
     *   (b) (Y_j - c)+ + (R + Y - (K - c))+, c >= Ymax: n (C(c) + p E[(R + Y - K + c)+]),
     * R the other n - 1 factors, untruncated: their truncated part is bounded by the model
     * (one more truncated factor only adds, its mass 1 - p is divided out) and the rest by
     * (a) once more. The smaller of (a) and (b) is used. */
    double ta = n * (call_tail(m, K) + n * p), g = g10(m, K);
    /* (b) holds with any split point c >= Ymax in place of Ymax: try c = Ymax 2^k, when (a)
     * is not already negligible next to the rest */
    double tb = HUGE_VAL;
    int tries = ta > 1e-6 * g ? 24 : 0;
    for (double c = m->ymax; c <= 2.0 * K && tries-- > 0; c *= 2.0) {
        double x = K - c;
        double inner = g10(m, x) / (1.0 - p) + (n - 1.0) * (call_tail(m, x) + (n - 1.0) * p);
        double v = n * (call(m, c) + p * inner);
        if (v < tb)
            tb = v;
    }
    double d = (g + (ta < tb ? ta : tb)) / M;
    d = dp_round_up(d, 1e-9);
    return d > 1.0 ? 1.0 : d;
}

/* An upper bound on E[P(b - S)] over the truncated factors' measure (b <= M). */
static double g01(const shx_model *m, double b)
{
    double h = m->h, main = 0.0;
    double u = b / h - (double)m->o;
    if (u > 0.0 && u <= (double)DIRECT_NODES && (size_t)u < m->nlow) {
        /* few points below b: the sum itself (the chord is loose where G grows fast) */
        for (size_t i = 0; i <= (size_t)u; i++)
            main += m->plow[i] * put(m, b - (double)(m->o + (int64_t)i) * h);
    } else if (u > 0.0) {
        /* G(b) = sum_i p_i P(b - s_i) is convex in b; gP[k] = G((o + k + 1) h), G(o h) = 0 */
        double kf = floor(u), fr = u - kf;
        if (kf > (double)m->k0) {
            kf = (double)m->k0;
            fr = 1.0;
        }
        int64_t k = (int64_t)kf;
        double lo = k == 0 ? 0.0 : m->gP[k - 1];
        main = (1.0 - fr) * lo + fr * m->gP[k];
    }
    double outside = put(m, b) * m->below + put(m, b - m->T) * m->above;
    double sumf = put_int(m, b - m->B + h) / h + put(m, b - m->B);
    double x = b - m->B + h,
           sq = x > 0.0 ? (x * put_int(m, x)) / h + put(m, b - m->B) * put(m, b - m->B) : 0.0;
    double floor_ = fmin(m->e_pt * sumf, m->e_2 * sqrt(sq)) + m->conv_err + m->ccut;
    return main + outside + floor_;
}

double shx_delta01(const shx_model *m, double eps)
{
    if (m->rounds == 1)
        return shx_delta10(m, eps); /* the Gaussian mechanism is symmetric */
    if (!(eps >= 0.0))
        return 1.0;
    double M = (double)m->rounds, b = M * exp(-eps), ee = exp(eps), n = m->n, p = m->p_tail;
    if (isinf(ee))
        return 0.0;
    /* some factor j above Ymax: then S >= Ymax + R (R: the other n - 1, untruncated) and P
     * increases, so P(b - S) <= P(b - Ymax - R). Either (a) P(y) <= y+, or (b) R's truncated
     * part is bounded by the model through P(x - r) <= P(x - r - y) + y (one more factor,
     * slope <= 1, its mass 1 - p divided out) and the rest by P(x - Ymax) <= (x - Ymax)+.
     * The smaller is used. */
    double over = b - m->ymax;
    double ta = over > 0.0 ? n * p * over : 0.0;
    double tb = 0.0;
    if (over > 0.0) {
        double o2 = over - m->ymax;
        tb = n * p * ((g01(m, over) + 1.0) / (1.0 - p) + (o2 > 0.0 ? (n - 1.0) * p * o2 : 0.0));
    }
    double d = ee / M * (g01(m, b) + (ta < tb ? ta : tb));
    d = dp_round_up(d, 1e-9);
    return d > 1.0 ? 1.0 : d;
}

double shx_delta(const shx_model *m, double eps)
{
    double best = 1.0;
    for (int j = 0; j < 12; j++) {
        double e = j == 11 ? 0.0 : ldexp(eps, -j);
        double a = shx_delta10(m, e), b = shx_delta01(m, e), d = a > b ? a : b;
        if (d < best)
            best = d;
        if (e == 0.0)
            break;
    }
    return best;
}

int shx_in_range(double sigma, uint64_t rounds)
{
    return sigma >= SHX_MIN_SIGMA && sigma <= SHX_MAX_SIGMA && rounds >= 1 &&
           rounds <= SHX_MAX_ROUNDS;
}

void shx_get_info(const shx_model *m, shx_info *info)
{
    memset(info, 0, sizeof *info);
    info->h = m->h;
    info->ymax = m->ymax;
    info->window_lo = m->B;
    info->window_hi = m->T;
    info->points = m->N;
    info->outside = m->below + m->above;
    info->roundoff = m->e_pt;
    info->bytes = m->bytes;
}

/* ---- cache ----------------------------------------------------------------------------- */

#define CACHE_MAX_ENTRIES 16
#define CACHE_MAX_BYTES ((size_t)256 << 20)

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static shx_model *cache_head;
static uint64_t cache_clock;

/* Drop unreferenced entries, least recently used first, until within the limits (or,
 * with all = 1, every unreferenced entry). Caller holds cache_lock. */
static void evict(int all)
{
    for (;;) {
        size_t count = 0, bytes = 0;
        shx_model **victim = NULL;
        for (shx_model **pp = &cache_head; *pp; pp = &(*pp)->next) {
            count++;
            bytes += (*pp)->bytes;
            if ((*pp)->refs == 0 && (victim == NULL || (*pp)->stamp < (*victim)->stamp))
                victim = pp;
        }
        if (victim == NULL || (!all && count <= CACHE_MAX_ENTRIES && bytes <= CACHE_MAX_BYTES))
            return;
        shx_model *v = *victim;
        *victim = v->next;
        destroy(v);
    }
}

/* The cached model for (sigma, rounds, h_scale) with a reference taken and its stamp
 * renewed, or NULL. The caller holds cache_lock. */
static shx_model *cache_take(double sigma, uint64_t rounds, double h_scale)
{
    for (shx_model *m = cache_head; m; m = m->next)
        if (m->sigma == sigma && m->rounds == rounds && m->h_scale == h_scale) {
            m->refs++;
            m->stamp = ++cache_clock;
            return m;
        }
    return NULL;
}

dpb_status shx_acquire(double sigma, uint64_t rounds, double h_scale, shx_model **out)
{
    *out = NULL;
    if (h_scale == 0.0)
        h_scale = 1.0;
    if (!shx_in_range(sigma, rounds) || !(h_scale >= 1.0 / 64.0 && h_scale <= 64.0))
        return DPB_EINVAL;
    pthread_mutex_lock(&cache_lock);
    *out = cache_take(sigma, rounds, h_scale);
    pthread_mutex_unlock(&cache_lock);
    if (*out)
        return DPB_OK;
    shx_model *m;
    dpb_status st = build(sigma, rounds, h_scale, &m);
    if (st != DPB_OK)
        return st;
    pthread_mutex_lock(&cache_lock);
    shx_model *theirs = cache_take(sigma, rounds, h_scale);
    if (theirs) {
        /* another thread built it meanwhile: use theirs */
        pthread_mutex_unlock(&cache_lock);
        destroy(m);
        *out = theirs;
        return DPB_OK;
    }
    m->refs = 1;
    m->stamp = ++cache_clock;
    m->next = cache_head;
    cache_head = m;
    evict(0);
    pthread_mutex_unlock(&cache_lock);
    *out = m;
    return DPB_OK;
}

int shx_cached(double sigma, uint64_t rounds, double h_scale)
{
    if (h_scale == 0.0)
        h_scale = 1.0;
    int found = 0;
    pthread_mutex_lock(&cache_lock);
    for (shx_model *m = cache_head; m && !found; m = m->next)
        found = m->sigma == sigma && m->rounds == rounds && m->h_scale == h_scale;
    pthread_mutex_unlock(&cache_lock);
    return found;
}

void shx_release(shx_model *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&cache_lock);
    m->refs--;
    evict(0);
    pthread_mutex_unlock(&cache_lock);
}

void shx_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    evict(1);
    pthread_mutex_unlock(&cache_lock);
}
