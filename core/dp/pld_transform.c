/*
 * pld_transform.c - one composition's transforms: each term's forward FFT (folded, optionally
 * tilted), the product of their powers by repeated squaring, one inverse FFT, and the
 * round-off bound of it all (docs/MATH.md section 6), in double or in long double (the
 * extended precision path). It calls pld_fft.c (plans, work blocks) and pld.c; its caller is
 * pld_compose.c.
 */
#include "pld_transform.h"

#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <fftw3.h>

#include "../common/cancel.h"
#include "pld_fft.h"

/* CMPLX and CMPLXL where the compiler lacks them (clang before 15 with glibc, as the fuzz
 * build uses): a complex number is laid out as an array of its real and imaginary parts
 * (C11 6.2.5p13), so they are set one by one, without C's rules for infinite parts. */
#ifndef CMPLX
static inline double complex make_complex(double re, double im)
{
    double complex z;
    double *part = (double *)&z;
    part[0] = re;
    part[1] = im;
    return z;
}
#define CMPLX(re, im) make_complex((re), (im))
#endif
#ifndef CMPLXL
static inline long double complex make_complexl(long double re, long double im)
{
    long double complex z;
    long double *part = (long double *)&z;
    part[0] = re;
    part[1] = im;
    return z;
}
#define CMPLXL(re, im) make_complexl((re), (im))
#endif

/* a b, without C's checks for infinite parts (operands here are finite, |.| <= ~1) */
static inline double complex cmul(double complex a, double complex b)
{
    double ar = creal(a), ai = cimag(a), br = creal(b), bi = cimag(b);
    return CMPLX(ar * br - ai * bi, ar * bi + ai * br);
}

/* y[f] *= x[f]^c (acc = 1) or y[f] = x[f]^c (acc = 0) for f < n, c >= 1: by repeated
 * squaring for every count (relative error at most about 2.3 u c, within the 8 u c counted
 * for the powers, as in the extended path; cpow, used above 2^16 before, took a logarithm,
 * an exponential, an atan2 and a sincos a frequency), a block of frequencies at a time so
 * the loops vectorise. */
#define POW_BLOCK 256
static void cpow_array(double complex *y, const double complex *x, size_t n, uint64_t c, int acc)
{
    double complex b[POW_BLOCK], r[POW_BLOCK];
    for (size_t f0 = 0; f0 < n; f0 += POW_BLOCK) {
        size_t m = n - f0 < POW_BLOCK ? n - f0 : POW_BLOCK;
        if (acc) { /* a block of the product already 0 stays 0 (x^c is finite): skip it */
            size_t j = 0;
            while (j < m && creal(y[f0 + j]) == 0.0 && cimag(y[f0 + j]) == 0.0)
                j++;
            if (j == m)
                continue;
        }
        memcpy(b, x + f0, m * sizeof *b);
        int first = 1;
        for (uint64_t e = c; e; e >>= 1) {
            if (e & 1) {
                if (first)
                    memcpy(r, b, m * sizeof *r);
                else
                    for (size_t j = 0; j < m; j++)
                        r[j] = cmul(r[j], b[j]);
                first = 0;
            }
            if (e > 1)
                for (size_t j = 0; j < m; j++)
                    b[j] = cmul(b[j], b[j]);
        }
        if (acc)
            for (size_t j = 0; j < m; j++)
                y[f0 + j] = cmul(y[f0 + j], r[j]);
        else
            memcpy(y + f0, r, m * sizeof *r);
    }
}

/*
 * Round-off of pld_compose_many (docs/MATH.md section 6), as a bound R on sum_j |p^_j - p_j|
 * over the window (which bounds the error of every delta(eps), its weights lying in [0, 1];
 * pld_delta adds R).
 * u = DBL_EPSILON (twice the unit round-off), eta = pld_fft_eta(N), s_i >= term i's 1-norm,
 * X_i its transform, c_i its count, a_i = |X^_i[f]|.
 *   - forward: |X^_i[f] - X_i[f]| <= e_i = (eta + (folds - 1) u) s_i componentwise (the
 *     folding of a term wider than N adds folds - 1 roundings);
 *   - powers: |x^c - y^c| <= c |x - y| max(|x|, |y|)^{c-1} and every |X_j| <= s_j <= 1, so
 *     the exact inputs' error reaches the product as at most c_i e_i (a_i + e_i)^{c_i - 1}
 *     times G = prod_j (1 + e_j)^{c_j} (the other factors' moduli, each <= 1 + e_j);
 *     computing x^c by squaring is good to about 2.3 c u relative, inside the
 *     c u (1 + pi + |ln |x||) counted 8 times (the margin of cpow's exp(c log x), used above
 *     2^16 before); the k - 1 products 4 u k |Z|;
 *     so the product's error at f is at most b_f = G sum_i [...] + 4 u k |Z^_f| (the
 *     extended path); the double path replaces G by the factors' own bounds a_j + e_j:
 *     b_f = U_f rho_f (1 + rho_f) + 4 u k |Z^_f| (term_rel: U_f = prod_j (a_j + e_j)^{c_j},
 *     rho_f = sum_i [c_i e_i / (a_i + e_i) + 8 u c_i (1 + pi + |ln a_i|)]);
 *   - inverse (1/N F*): per point, (1/N) sum_f |dZ_f| + eta (1/N) sum_f |Z^_f| + u |p^_j|
 *     (sums over the full spectrum: half-spectrum weights 2 off 0 and N/2); in 2-norm,
 *     sqrt(sum_f |dZ_f|^2 / N) + (eta + u) ||p^||_2 (normwise stability);
 *   - R_fft = min(n e_pt, sqrt(n) e_2) over the n window points (per point, or
 *     Cauchy-Schwarz), as shuffle_exact does; clamping negatives only moves values closer;
 *   - the terms' own errors r_i: ||prod a^_i - prod a_i||_1 <= prod (1 + r_i)^{c_i} - 1
 *     (masses <= 1), so R = (1 + R_fft) prod (1 + r_i)^{c_i} - 1, rounded up.
 * The floor is about eta (sum_i c_i) times the spectrum's weight over sqrt(n): ~1e-9 for
 * 1000 steps, so it matters only at very small delta or very many steps.
 */

/* The error bound at one frequency of term i (count c, forward error ei, computed modulus a)
 * before the factor G: c e (a + e)^{c-1} + 8 u c (1 + pi + |ln a|) (a + e)^{c-1} (a + e),
 * with u the arithmetic's (twice its unit round-off). */
static inline double term_error(double a, double ei, uint64_t c, double u)
{
    double cd = (double)c, ae = a + ei;
    if (ae == 0.0)
        return 0.0; /* no mass (e = 0) and no error */
    double lae = log(ae);
    double pw = c == 1 ? 1.0 : exp((cd - 1.0) * lae); /* (a + e)^{c-1} */
    if (pw == 0.0 && ae < 1.0)
        return 0.0; /* (a + e)^c underflows too: both terms are 0 */
    /* |ln a| <= |ln(a + e)| + 2 e / (a + e) when a >= (a + e) / 2 (one log fewer) */
    double la = a >= 0.5 * ae ? fabs(lae) + 2.0 * ei / ae : a > 0.0 ? fabs(log(a)) : 0.0;
    return cd * ei * pw + 8.0 * u * cd * (1.0 + M_PI + la) * pw * ae;
}

/* The double path's bound at one frequency, in two parts (docs/MATH.md section 6): *lu
 * gathers ln U = sum_i c_i ln(a_i + e_i) (the product's modulus bound: |X_i| <= a_i + e_i)
 * and *rel the relative errors sum_i [c_i e_i / (a_i + e_i) + 8 u c_i (1 + pi + |ln a_i|)]
 * (the forward error through x^c, |x^c - y^c| <= c |x - y| max(|x|, |y|)^{c-1}, and the
 * powers' own rounding), so that the product's error is at most U rel (1 + rel). */
static inline void term_rel(double a, double ei, uint64_t c, double u, double *lu, double *rel)
{
    double cd = (double)c, ae = a + ei;
    if (ae == 0.0) { /* X_i = 0 exactly: so is the product */
        *lu = -HUGE_VAL;
        return;
    }
    double lae = log(ae);
    double la = a >= 0.5 * ae ? fabs(lae) + 2.0 * ei / ae : a > 0.0 ? fabs(log(a)) : 0.0;
    *lu += cd * lae;
    *rel += cd * ei / ae + 8.0 * u * cd * (1.0 + M_PI + la);
}

/* term_rel at the value re + i im, with one logarithm and no hypot where e is below 1e-6 of
 * a = |re + i im| (the common case): ln a = ln(a^2) / 2, and ln(a + e) = ln a + log1p(e / a)
 * <= ln a + e / a, an upper bound within c (e / a)^2 / 2 <= 5e-13 c of it (the arithmetic's
 * own rounding, about c u (1 + |ln a|) in ln U, as for log(a + e), is inside the final 1e-6
 * margin). */
static inline void term_rel_z(double re, double im, double ei, uint64_t c, double u, double *lu,
                              double *rel)
{
    double s = re * re + im * im;
    if (!(s >= 0x1p-1000)) { /* tiny or 0: a^2 loses bits (or is 0) */
        term_rel(hypot(re, im), ei, c, u, lu, rel);
        return;
    }
    double a = sqrt(s), t = ei / a;
    if (!(t <= 1e-6)) {
        term_rel(a, ei, c, u, lu, rel);
        return;
    }
    double cd = (double)c, la = 0.5 * log(s);
    *lu += cd * (la + t);
    *rel += cd * ei / (a + ei) + 8.0 * u * cd * (1.0 + M_PI + fabs(la) + t);
}

/* below thr(c), (a + e)^{c-1} = exp((c - 1) ln(a + e)) underflows to 0 (its argument is
 * <= -746): such frequencies add nothing to the bound, so they are skipped first, on
 * |re| + |im| >= a (no hypot, log or exp for them; the same bound either way) */
static double skip_threshold(uint64_t c)
{
    return c > 1 ? exp(-746.0 / ((double)c - 1.0)) : 0.0;
}

/* The bounds from the spectrum's error sums (s1: sum of w b_f, s2: of w b_f^2, sz: of w
 * |Z^_f|, w the half-spectrum weights), the output's max and 2-norm, the inverse transform's
 * eta and the arithmetic's u. */
static pld_fft_err output_error(double s1, double s2, double sz, double pmax, double p2, double eta,
                                double u, size_t N)
{
    return (pld_fft_err){(s1 + eta * sz) / (double)N + u * pmax,
                         sqrt(s2 / (double)N) + (eta + u) * sqrt(p2)};
}

/* The round-off bound R_fft over n_out points read: per point, or by Cauchy-Schwarz. */
double pld_window_roundoff(pld_fft_err e, size_t n_out)
{
    double r_pt = (double)n_out * e.ept, r_2 = sqrt((double)n_out) * e.e2;
    return (r_pt < r_2 ? r_pt : r_2) * (1.0 + 1e-6);
}

/* buf[0..N) = term d folded modulo N (a term wider than N: its circular product is the
 * same; each fold adds a rounding), tilted when theta != 0: each mass times
 * e^{theta l - lm}. Returns a bound on the 1-norm of what was written. */
static double fold_term(const pld_pmf *d, double *buf, size_t N, double theta, double lm)
{
    memset(buf, 0, N * sizeof *buf);
    double s = 0.0;
    for (size_t j = 0, pos = 0; j < d->n; j++) {
        double v = d->p[j];
        if (theta != 0.0 && v > 0.0)
            v *= exp(theta * ((double)(d->lo + (int64_t)j) * d->h) - lm);
        buf[pos] += v;
        s += v;
        if (++pos == N)
            pos = 0;
    }
    return s * (1.0 + (double)d->n * DBL_EPSILON);
}

/* The transform part of pld_compose_many in double: buf[j] (j < N) gets the composed mass at
 * circular position j, *fe its round-off. With lm != NULL each term i is tilted first
 * (fold_term with theta and lm[i]); the bound is then the tilted values' (a tilted mass may
 * fall below the doubles' range: its error, at most 2^-1074 a point, is counted as the
 * term's forward error). */
dpb_status pld_transform_double(const pld_term *terms, size_t k, size_t N, double *buf,
                                double theta, const double *lm, pld_fft_err *fe)
{
    size_t nc = N / 2 + 1;
    /* complex transforms (N <= PLD_C2C_MAX_N): the real input and output pass through cin/cout,
     * X and Y hold the whole spectrum (only its first nc values are used: it is Hermitian) */
    int cx = N <= PLD_C2C_MAX_N;
    size_t nx = cx ? N : nc;
    /* one work block: X, Y, (cin, cout), and term_rel's rel and lu, each 64-byte aligned */
    size_t bx = pld_scratch_round(nx * sizeof(fftw_complex)),
           bn = pld_scratch_round(N * sizeof(fftw_complex));
    size_t bd = pld_scratch_round(nc * sizeof(double)), held = 0;
    char *work = pld_scratch_get(2 * bx + (cx ? 2 * bn : 0) + 2 * bd, &held);
    fftw_complex *X = NULL, *Y = NULL, *cin = NULL, *cout = NULL;
    double *rel = NULL, *lu = NULL;
    fftw_plan fwd = NULL, inv = NULL;
    int slot = -1;
    dpb_status st = DPB_ENOMEM;
    const double u = DBL_EPSILON, eta = pld_fft_eta(N);
    if (work == NULL)
        goto fail;
    X = (fftw_complex *)work;
    Y = (fftw_complex *)(work + bx);
    rel = (double *)(work + 2 * bx);
    lu = (double *)(work + 2 * bx + bd);
    if (cx) {
        cin = (fftw_complex *)(work + 2 * bx + 2 * bd);
        cout = (fftw_complex *)(work + 2 * bx + 2 * bd + bn);
    }
    memset(rel, 0, 2 * bd);
    if ((st = pld_plans_get(N, &fwd, &inv, &slot)) != DPB_OK)
        goto fail;
    for (size_t i = 0; i < k; i++) {
        const pld_pmf *d = terms[i].d;
        /* an FFT runs to its end once started: look before each one */
        if (dpb_cancelled()) {
            st = DPB_ECANCELLED;
            goto fail;
        }
        double si = fold_term(d, buf, N, lm ? theta : 0.0, lm ? lm[i] : 0.0);
        if (cx) {
            for (size_t j = 0; j < N; j++)
                cin[j] = buf[j];
            fftw_execute_dft(fwd, cin, i == 0 ? Y : X);
        } else {
            fftw_execute_dft_r2c(fwd, buf, i == 0 ? Y : X);
        }
        uint64_t c = terms[i].count;
        double ei = (eta + (double)((d->n - 1) / N) * u) * si;
        if (lm != NULL)
            ei += 2.0 * (double)d->n * DBL_TRUE_MIN;
        const fftw_complex *Z = i == 0 ? Y : X;
        /* below thr the term's own error c e (a + e)^{c-1} U / (a + e)^c underflows (as in
         * the extended path); leaving its factor a + e < 1 out of U only raises U */
        double thr = skip_threshold(c);
        for (size_t f = 0; f < nc; f++)
            if (fabs(creal(Z[f])) + fabs(cimag(Z[f])) + ei >= thr)
                term_rel_z(creal(Z[f]), cimag(Z[f]), ei, c, u, &lu[f], &rel[f]);
        if (i == 0 && c > 1)
            cpow_array(Y, Y, nc, c, 0);
        else if (i > 0)
            cpow_array(Y, X, nc, c, 1);
    }
    if (dpb_cancelled()) {
        st = DPB_ECANCELLED;
        goto fail;
    }
    /* four running sums of each (f mod 4), so that the additions do not wait on each other */
    double s1v[4] = {0.0, 0.0, 0.0, 0.0}, s2v[4] = {0.0, 0.0, 0.0, 0.0};
    double szv[4] = {0.0, 0.0, 0.0, 0.0};
    for (size_t f = 0; f < nc; f++) {
        /* |Y_f| by sqrt (within 1.25 u of it, inside the final margin) unless tiny */
        double re = creal(Y[f]), im = cimag(Y[f]), sq = re * re + im * im;
        double w = (f == 0 || 2 * f == N) ? 1.0 : 2.0;
        double az = sq >= 0x1p-1000 ? sqrt(sq) : hypot(re, im);
        double U = lu[f] > -746.0 ? exp(lu[f]) : 0.0; /* below, exp underflows to 0 */
        double b = U * rel[f] * (1.0 + rel[f]) + 4.0 * u * (double)k * az;
        s1v[f & 3] += w * b;
        s2v[f & 3] += w * b * b;
        szv[f & 3] += w * az;
    }
    double s1 = (s1v[0] + s1v[1]) + (s1v[2] + s1v[3]), s2 = (s2v[0] + s2v[1]) + (s2v[2] + s2v[3]);
    double sz = (szv[0] + szv[1]) + (szv[2] + szv[3]);
    if (cx) { /* the whole Hermitian spectrum; the output's real part is c2r's result */
        for (size_t f = 0; f < nc; f++)
            cin[f] = Y[f];
        for (size_t f = nc; f < N; f++)
            cin[f] = conj(Y[N - f]);
        fftw_execute_dft(inv, cin, cout);
        for (size_t j = 0; j < N; j++)
            buf[j] = creal(cout[j]);
    } else {
        fftw_execute_dft_c2r(inv, Y, buf);
    }
    double pm[4] = {0.0, 0.0, 0.0, 0.0}, q2[4] = {0.0, 0.0, 0.0, 0.0};
    for (size_t j = 0; j < N; j++)
        buf[j] /= (double)N;
    for (size_t j = 0; j < N; j++) { /* four running sums and maxima, as above */
        double v = fabs(buf[j]);
        pm[j & 3] = v > pm[j & 3] ? v : pm[j & 3];
        q2[j & 3] += v * v;
    }
    double pmax = fmax(fmax(pm[0], pm[1]), fmax(pm[2], pm[3]));
    double p2 = (q2[0] + q2[1]) + (q2[2] + q2[3]);
    *fe = output_error(s1, s2, sz, pmax, p2, eta, u, N);
fail:
    pld_plans_put(fwd, inv, slot);
    pld_scratch_put(work, held);
    return st;
}

/* ---- extended precision ---------------------------------------------------------------------
 * The same composition with long double transforms and powers (x87 extended on x86-64: u =
 * LDBL_EPSILON = 2^-63, 2048 times smaller than double's), for requests whose delta the
 * double round-off bound would dominate: the bound is the same analysis with u and eta of
 * the long double arithmetic (pld_fft_eta scaled by LDBL_EPSILON / DBL_EPSILON), plus one
 * double rounding per output point. About 6 times slower per transform. Where long double
 * is double, nothing is gained and nothing is lost. */
static inline long double complex cmull(long double complex a, long double complex b)
{
    long double ar = creall(a), ai = cimagl(a), br = creall(b), bi = cimagl(b);
    return CMPLXL(ar * br - ai * bi, ar * bi + ai * br);
}

/* y[f] *= x[f]^c (acc = 1) or y[f] = x[f]^c (acc = 0), by repeated squaring for every c (its
 * relative error, at most about 2.3 u c, is within the bound's 8 u c). */
static void cpowl_array(long double complex *y, const long double complex *x, size_t n, uint64_t c,
                        int acc)
{
    for (size_t f = 0; f < n; f++) {
        if (acc && creall(y[f]) == 0.0L && cimagl(y[f]) == 0.0L)
            continue;
        long double complex r = 1.0L, b = x[f];
        int first = 1;
        for (uint64_t e = c; e; e >>= 1) {
            if (e & 1) {
                r = first ? b : cmull(r, b);
                first = 0;
            }
            if (e > 1)
                b = cmull(b, b);
        }
        y[f] = acc ? cmull(y[f], r) : r;
    }
}

/* e^-700: the error of a power set to 0 (its exact value is smaller) */
#define POW_DROPPED 9.86e-305

/* The long double plans of size N for one call (r2c from buf to X, c2r from Y to buf; not
 * cached: long double compositions are rare), made under the planner's lock; 0 when FFTW
 * cannot plan (what was made stays in plan[] for ext_plans_drop). */
static int ext_plans_make(size_t N, long double *buf, fftwl_complex *X, fftwl_complex *Y,
                          fftwl_plan plan[2])
{
    pld_fftw_lock();
    plan[0] = fftwl_plan_dft_r2c_1d((int)N, buf, X, FFTW_ESTIMATE);
    plan[1] = fftwl_plan_dft_c2r_1d((int)N, Y, buf, FFTW_ESTIMATE);
    pld_fftw_unlock();
    return plan[0] != NULL && plan[1] != NULL;
}

/* Destroy what ext_plans_make made (NULL ones skipped), under the planner's lock. */
static void ext_plans_drop(fftwl_plan plan[2])
{
    pld_fftw_lock();
    for (int i = 0; i < 2; i++)
        if (plan[i] != NULL)
            fftwl_destroy_plan(plan[i]);
    pld_fftw_unlock();
}

dpb_status pld_transform_ext(const pld_term *terms, size_t k, size_t N, double *out,
                             pld_fft_err *fe)
{
    size_t nc = N / 2 + 1;
    long double *buf = fftwl_malloc(N * sizeof *buf);
    fftwl_complex *X = fftwl_malloc(nc * sizeof *X), *Y = fftwl_malloc(nc * sizeof *Y);
    double *dz = calloc(nc, sizeof *dz);
    fftwl_plan plan[2] = {NULL, NULL}; /* r2c, c2r: made for this call */
    dpb_status st = DPB_ENOMEM;
    const double ul = LDBL_EPSILON, u = DBL_EPSILON;
    const double etal = pld_fft_eta(N) * (LDBL_EPSILON / DBL_EPSILON);
    double log_g = 0.0;
    if (buf == NULL || X == NULL || Y == NULL || dz == NULL)
        goto fail;
    if (!ext_plans_make(N, buf, X, Y, plan))
        goto fail;
    st = DPB_OK;
    for (size_t i = 0; i < k; i++) {
        const pld_pmf *d = terms[i].d;
        if (dpb_cancelled()) {
            st = DPB_ECANCELLED;
            goto fail;
        }
        fold_term(d, out, N, 0.0, 0.0); /* in double: (folds - 1) u more, below */
        for (size_t j = 0; j < N; j++)
            buf[j] = out[j];
        fftwl_execute_dft_r2c(plan[0], buf, i == 0 ? Y : X);
        uint64_t c = terms[i].count;
        double si = pld_sum_mass(d), cd = (double)c;
        double ei = (etal + (double)((d->n - 1) / N) * u) * si;
        log_g += cd * log1p(ei + (si > 1.0 ? si - 1.0 : 0.0));
        long double complex *Z = (long double complex *)(i == 0 ? Y : X);
        /* pthr: the powers of frequencies with |re| + |im| + e below it are set to 0 (for
         * c = 1 nothing is: the term's own values are exact inputs to the product) */
        double thr = skip_threshold(c), pthr = c > 1 ? exp(-700.0 / cd) : 0.0;
        for (size_t f = 0; f < nc; f++) {
            /* the modulus rounded to double and up (2 u relative covers both roundings) */
            double re = (double)fabsl(creall(Z[f])), im = (double)fabsl(cimagl(Z[f]));
            if ((re + im) * (1.0 + 4.0 * u) + ei < pthr) {
                /* |x|^c <= (a + e)^c < e^-700: the value is set to 0 (long double has the
                 * range to carry it, at the cost of the powers), its error counted */
                Z[f] = 0.0L;
                dz[f] += POW_DROPPED;
            } else if (re + im + ei >= thr) {
                dz[f] += term_error(hypot(re, im) * (1.0 + 2.0 * u), ei, c, ul);
            }
        }
        long double complex *Yc = (long double complex *)Y;
        if (i == 0 && c > 1)
            cpowl_array(Yc, Yc, nc, c, 0);
        else if (i > 0)
            cpowl_array(Yc, (const long double complex *)X, nc, c, 1);
    }
    if (dpb_cancelled()) {
        st = DPB_ECANCELLED;
        goto fail;
    }
    double g = exp(log_g), s1 = 0.0, s2 = 0.0, sz = 0.0;
    const long double complex *Yc = (const long double complex *)Y;
    for (size_t f = 0; f < nc; f++) {
        double w = (f == 0 || 2 * f == N) ? 1.0 : 2.0;
        double az = hypot((double)creall(Yc[f]), (double)cimagl(Yc[f])) * (1.0 + 2.0 * u);
        double b = g * dz[f] + 4.0 * ul * (double)k * az;
        s1 += w * b;
        s2 += w * b * b;
        sz += w * az;
    }
    fftwl_execute_dft_c2r(plan[1], Y, buf);
    double pmax = 0.0, p2 = 0.0;
    for (size_t j = 0; j < N; j++) {
        out[j] = (double)(buf[j] / (long double)N);
        double v = fabs(out[j]);
        pmax = v > pmax ? v : pmax;
        p2 += v * v;
    }
    /* the division by N in long double and the rounding to double: (ul + u) |p| a point */
    *fe = output_error(s1, s2, sz, pmax, p2, etal, ul + u, N);
fail:
    ext_plans_drop(plan);
    free(dz);
    fftwl_free(buf);
    fftwl_free(X);
    fftwl_free(Y);
    return st;
}

/* Where the composed index m sits in the circular result of size N: (m - sum_i count_i lo_i)
 * mod N, in exact integer arithmetic (the sum can pass 2^53). */
int64_t pld_circular_pos(const pld_term *terms, size_t k, int64_t m, size_t N)
{
    __int128 acc = (__int128)m;
    for (size_t i = 0; i < k; i++)
        acc -= ((__int128)(terms[i].count % N) * (__int128)terms[i].d->lo) % (__int128)N;
    int64_t pos = (int64_t)(acc % (__int128)N);
    return pos < 0 ? pos + (int64_t)N : pos;
}
