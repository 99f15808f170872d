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

#include "../common/cancel.h"
#include "normal.h"

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

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

void pld_fftw_lock(void)
{
    pthread_mutex_lock(&plan_lock);
}

void pld_fftw_unlock(void)
{
    pthread_mutex_unlock(&plan_lock);
}

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
    d->roundoff = 0.0;
    d->tilt = (pld_tilt_err){0};
    d->floor = -HUGE_VAL;
    d->steps = 1.0;
    d->gauss_mu = 0.0;
    return DPB_OK;
}

dpb_status pld_copy(const pld_pmf *src, pld_pmf *dst)
{
    dpb_status st = pmf_alloc(dst, src->h, src->lo, src->n);
    if (st != DPB_OK)
        return st;
    memcpy(dst->p, src->p, src->n * sizeof *src->p);
    dst->inf_mass = src->inf_mass;
    dst->roundoff = src->roundoff;
    dst->tilt = src->tilt;
    dst->floor = src->floor;
    dst->steps = src->steps;
    dst->gauss_mu = src->gauss_mu;
    return DPB_OK;
}

/* ---- leaves: a loss model gives S(l) = P(L > l) and F(l) = P(L <= l) under P ----------- */

typedef struct {
    int kind; /* 0 gaussian, 1 laplace, 2 sampled gaussian, 3 sampled laplace, 4 mixture */
    int dir;
    double q, s; /* sampling rate; noise multiplier (sigma or b) */
    double lmin, lmax;
    const double *c, *w; /* mixture: sensitivities and probabilities (kind 4) */
    size_t nc;
    const double *lw; /* mixture: ln w_i (-inf for w_i = 0) */
    double *hint;     /* mixture: the last level solved, {y, x} (the grid is walked in order) */
} loss_model;

static void mixture_eval2(const loss_model *m, double l, int cdf, double *vp, double *vq);
static void model_eval2(const loss_model *m, double l, int cdf, double *vp, double *vq);

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

/* Up to EVAL_BLOCK points at a time: model_eval2 over a block of the grid. */
#define EVAL_BLOCK 64

/* The Gaussian (kind 0) and sampled Gaussian (kind 2) laws at n <= EVAL_BLOCK points, stage
 * by stage: a point's value is a chain of dependent libm calls, so evaluated one point after
 * the other the processor waits on each; each stage here is a loop of independent calls it
 * overlaps. model_eval2 calls this with n = 1, so both give the same value bit for bit.
 *   kind 0: under P, L ~ N(m, 1/s^2); under Q, N(-m, 1/s^2); m = 1/(2 s^2).
 *   kind 2, remove: P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2), L > l <=> X > x;
 *           add:    P = N(0,s^2), Q = (1-q)N(0,s^2) + qN(1,s^2), L > l <=> X < x;
 *   with x = s^2 ln(a/q) + 1/2, a = e^{+-l} - 1 + q (a <= 0: L > l always (remove) or never);
 *   its two normal tails share one density: phi((x-1)/s) = phi(x/s) e^{(2x-1)/(2 s^2)}, which
 *   is phi(x/s) a/q, a product. */
static void model_eval2_many(const loss_model *m, const double *l, size_t n, int cdf, double *vp,
                             double *vq)
{
    if (m->kind != 0 && m->kind != 2) {
        for (size_t i = 0; i < n; i++)
            model_eval2(m, l[i], cdf, vp + i, vq + i);
        return;
    }
    double s = m->s, q = m->q, z0[EVAL_BLOCK], z1[EVAL_BLOCK], p0[EVAL_BLOCK], r[EVAL_BLOCK];
    if (m->kind == 0) {
        double mean = 0.5 / (s * s), *p1 = r; /* phi(z1) */
        for (size_t i = 0; i < n; i++) {
            z0[i] = (l[i] - mean) * s;
            z1[i] = (l[i] + mean) * s;
            p0[i] = dp_npdf(z0[i]);
        }
        for (size_t i = 0; i < n; i++)
            p1[i] = dp_npdf(z1[i]);
        for (size_t i = 0; i < n; i++) /* Phi(z) = Q(-z) */
            vp[i] = cdf ? dp_Q_pdf(-z0[i], p0[i]) : dp_Q_pdf(z0[i], p0[i]);
        for (size_t i = 0; i < n; i++)
            vq[i] = cdf ? dp_Q_pdf(-z1[i], p1[i]) : dp_Q_pdf(z1[i], p1[i]);
        return;
    }
    int remove = m->dir == PLD_REMOVE, upper = remove != cdf; /* the wanted event is X > x */
    for (size_t i = 0; i < n; i++) {
        double a = remove ? expm1(l[i]) + q : expm1(-l[i]) + q;
        r[i] = a > 0.0 ? a / q : 0.0;
    }
    for (size_t i = 0; i < n; i++)
        z0[i] = r[i] > 0.0 ? log(r[i]) : 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = s * s * z0[i] + 0.5;
        z0[i] = x / s;
        z1[i] = (x - 1.0) / s;
        p0[i] = dp_npdf(z0[i]);
    }
    for (size_t i = 0; i < n; i++) {
        double phi1 = p0[i] > 1e-290 ? p0[i] * r[i] : dp_npdf(z1[i]); /* p0 underflows */
        double t1 = upper ? dp_Q_pdf(z1[i], phi1) : dp_Q_pdf(-z1[i], phi1);
        double t0 = upper ? dp_Q_pdf(z0[i], p0[i]) : dp_Q_pdf(-z0[i], p0[i]);
        double mix = (1.0 - q) * t0 + q * t1;
        if (!(r[i] > 0.0)) /* a <= 0 */
            t0 = mix = (remove != cdf) ? 1.0 : 0.0;
        vp[i] = remove ? mix : t0;
        vq[i] = remove ? t0 : mix;
    }
}

/* S (cdf = 0) or F (cdf = 1) of the loss L = ln(P/Q) at l, under P (*vp) and under Q (*vq)
 * at once: both laws are built from the same normal or Laplace tails. */
static void model_eval2(const loss_model *m, double l, int cdf, double *vp, double *vq)
{
    double s = m->s, q = m->q;
    switch (m->kind) {
    case 0:
    case 2:
        model_eval2_many(m, &l, 1, cdf, vp, vq);
        return;
    case 1: /* Laplace P = Lap(0, b), Q = Lap(1, b): atoms at +-1/b */
        if (l >= 1.0 / s) {
            *vp = *vq = cdf ? 1.0 : 0.0;
        } else if (l < -1.0 / s) {
            *vp = *vq = cdf ? 0.0 : 1.0;
        } else {
            double y = (1.0 - s * l) / 2.0; /* L > l <=> X < y */
            *vp = cdf ? lap_surv(0.0, s, y) : lap_cdf(0.0, s, y);
            *vq = cdf ? lap_surv(1.0, s, y) : lap_cdf(1.0, s, y);
        }
        return;
    case 4:
        mixture_eval2(m, l, cdf, vp, vq);
        return;
    case 3:
    default: {
        double b = s;
        int remove = m->dir == PLD_REMOVE;
        double a = remove ? expm1(l) + q : expm1(-l) + q;
        if (a <= 0.0) {
            *vp = *vq = (remove != cdf) ? 1.0 : 0.0;
            return;
        }
        double u = log(a / q);
        /* remove: L > l <=> g(X) > u <=> X > t; add: L > l <=> g(X) < u <=> X < t */
        if (remove ? u >= 1.0 / b : u > 1.0 / b) {
            *vp = *vq = (remove != cdf) ? 0.0 : 1.0;
            return;
        }
        if (remove ? u < -1.0 / b : u <= -1.0 / b) {
            *vp = *vq = (remove != cdf) ? 1.0 : 0.0;
            return;
        }
        double t = (1.0 + b * u) / 2.0;
        int upper = remove != cdf;
        double t0 = upper ? lap_surv(0.0, b, t) : lap_cdf(0.0, b, t);
        double t1 = upper ? lap_surv(1.0, b, t) : lap_cdf(1.0, b, t);
        double mix = (1.0 - q) * t0 + q * t1;
        *vp = remove ? mix : t0;
        *vq = remove ? t0 : mix;
        return;
    }
    }
}

static double model_eval(const loss_model *m, double l, int which)
{
    double vp, vq;
    model_eval2(m, l, which == F_P || which == F_Q, &vp, &vq);
    return which <= F_P ? vp : vq;
}

/* The smallest l (to within h) with S_P(l) <= PLD_LEAF_TAIL (upper = 1) or the largest with
 * F_P(l) <= PLD_TAIL (upper = 0: the mass below is moved up onto the lowest knot, not to
 * +infinity), searching outward from 0. */
static dpb_status find_cut(const loss_model *m, int upper, double h, double *cut)
{
    double bound = upper ? m->lmax : m->lmin;
    if (isfinite(bound)) {
        *cut = bound;
        return DPB_OK;
    }
    int which = upper ? S_P : F_P;
    double sgn = upper ? 1.0 : -1.0, inner = 0.0, outer = 1.0;
    double tail = upper ? PLD_LEAF_TAIL : PLD_TAIL;
    while (model_eval(m, sgn * outer, which) > tail) {
        inner = outer;
        outer *= 2.0;
        if (outer > h * (double)PLD_MAX_POINTS)
            return DPB_ELIMIT;
    }
    while (outer - inner > h) {
        double mid = 0.5 * (inner + outer);
        if (model_eval(m, sgn * mid, which) > tail)
            inner = mid;
        else
            outer = mid;
    }
    *cut = sgn * outer;
    return DPB_OK;
}

/* Masses of (a, b] under P and Q, from the survival functions in the upper part and from
 * the cdfs in the lower part, so neither cancels. The struct carries the values at a. */
typedef struct {
    double Sp, Fp, Sq, Fq;
} tails;

/* The masses of (a, b] from the tails at a (*t) and at b (*b): F where a law's S(a) >= 1/2
 * (the lower part), S where S(a) < 1/2 (the upper part). needs_surv and needs_cdf say which of
 * b's values are read, so the caller evaluates only those. */
static int needs_cdf(const tails *t)
{
    return t->Sp >= 0.5 || t->Sq >= 0.5;
}
static int needs_surv(const tails *t)
{
    return t->Sp < 0.5 || t->Sq < 0.5;
}
static void interval_masses(tails *t, const tails *b, double *mp, double *mq)
{
    double Sp, Sq, Fp, Fq;
    if (!needs_surv(t)) { /* both in the lower part: the cdfs only */
        Fp = b->Fp;
        Fq = b->Fq;
        *mp = Fp - t->Fp;
        *mq = Fq - t->Fq;
        Sp = 1.0 - Fp; /* not used for masses while S >= 0.5 */
        Sq = 1.0 - Fq;
    } else {
        Sp = b->Sp;
        Sq = b->Sq;
        if (!needs_cdf(t)) {
            *mp = t->Sp - Sp;
            *mq = t->Sq - Sq;
            Fp = 1.0 - Sp; /* not used for masses while S < 0.5 */
            Fq = 1.0 - Sq;
        } else { /* one law in each part: both tails */
            Fp = b->Fp;
            Fq = b->Fq;
            *mp = t->Sp < 0.5 ? t->Sp - Sp : Fp - t->Fp;
            *mq = t->Sq < 0.5 ? t->Sq - Sq : Fq - t->Fq;
        }
    }
    if (!(*mp > 0.0))
        *mp = 0.0;
    if (!(*mq > 0.0))
        *mq = 0.0;
    *t = (tails){Sp, Fp, Sq, Fq};
}

/* Split the P-mass mp (with Q-mass mq = E_Q-mass) of the loss interval (l_i, l_i + h]
 * between its two knots by linear interpolation in likelihood-ratio space ("connect the
 * dots", Doroshenko et al. 2022): the upper knot gets x_{i+1}(mp - x_i mq)/(x_{i+1} - x_i)
 * = (mp - e^{l_i} mq)/(1 - e^{-h}), the lower knot the rest. P-mass is conserved and the
 * resulting delta(eps) interpolates the true one at every knot and lies above it between
 * knots (delta is convex in e^eps), so the discrete pair dominates the true pair. */
static void split_interval(double *lower, double *upper, double xi, double li, double omh,
                           double mp, double mq)
{
    /* x_i mq, with x_i = e^{l_i} passed in while it is representable; omh = 1 - e^{-h} */
    double xq = mq > 0.0 ? (isfinite(xi) ? xi * mq : exp(li + log(mq))) : 0.0;
    double up = (mp - xq) / omh;
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
    tails t;
    model_eval2(m, l0, 0, &t.Sp, &t.Sq);
    model_eval2(m, l0, 1, &t.Fp, &t.Fq);
    out->p[0] = t.Fp; /* all P-mass at or below the lowest knot: rounded up onto it */
    double eh = exp(h), xi = 0.0, omh = -expm1(-h);
    /* The knots' upper ends in blocks (model_eval2_many), each tail evaluated only where
     * interval_masses reads it: S above both medians, F below, both between them. */
    double lb[EVAL_BLOCK], Sp[EVAL_BLOCK] = {0}, Sq[EVAL_BLOCK] = {0}, Fp[EVAL_BLOCK] = {0},
                           Fq[EVAL_BLOCK] = {0};
    for (size_t i0 = 0; i0 + 1 < out->n; i0 += EVAL_BLOCK) {
        size_t k = out->n - 1 - i0 < EVAL_BLOCK ? out->n - 1 - i0 : EVAL_BLOCK;
        for (size_t j = 0; j < k; j++)
            lb[j] = (double)(klo + (int64_t)(i0 + j)) * h + h;
        size_t have_s = k, have_f = k; /* the tails are known from this index of the block on */
        for (size_t j = 0; j < k; j++) {
            size_t i = i0 + j;
            double li = (double)(klo + (int64_t)i) * h, mp, mq;
            if (needs_surv(&t) && have_s > j) {
                model_eval2_many(m, lb + j, k - j, 0, Sp + j, Sq + j);
                have_s = j;
            }
            if (needs_cdf(&t) && have_f > j) {
                model_eval2_many(m, lb + j, k - j, 1, Fp + j, Fq + j);
                have_f = j;
            }
            /* x_i = e^{l_i} by recursion, recomputed exactly every 256 knots */
            xi = (i & 255) == 0 || !(xi > 0.0) ? (li < 700.0 ? exp(li) : HUGE_VAL) : xi * eh;
            tails b = {Sp[j], Fp[j], Sq[j], Fq[j]};
            interval_masses(&t, &b, &mp, &mq);
            split_interval(&out->p[i], &out->p[i + 1], xi, li, omh, mp, mq);
        }
        if ((i0 / EVAL_BLOCK) % 64 == 63 && dpb_cancelled()) {
            pld_free(out);
            return DPB_ECANCELLED;
        }
    }
    /* Above the top knot: interpolate between it and +infinity (x = inf): the knot gets
     * x_n Q(L > l_n), infinity the rest of P(L > l_n). */
    double ln = (double)khi * h;
    double xq = t.Sq > 0.0 ? exp(ln + log(t.Sq)) : 0.0;
    if (xq > t.Sp)
        xq = t.Sp;
    out->p[out->n - 1] += xq;
    out->inf_mass = t.Sp - xq;
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
    loss_model m = {0, 0, 1.0, sigma, -HUGE_VAL, HUGE_VAL, NULL, NULL, 0, NULL, NULL};
    return discretise(&m, h, out);
}

dpb_status pld_laplace(double b, double h, pld_pmf *out)
{
    if (!(b > 0.0) || !isfinite(b) || bad_h(h))
        return DPB_EINVAL;
    loss_model m = {1, 0, 1.0, b, -1.0 / b, 1.0 / b, NULL, NULL, 0, NULL, NULL};
    return discretise(&m, h, out);
}

/* ---- kept leaves ----------------------------------------------------------------------------
 * A Poisson-sampled leaf costs milliseconds to tens of milliseconds to discretise, and the same
 * ones recur: a DP-SGD step in every composition of a schedule, a round's event in each of its
 * participants' spends. A leaf is a deterministic function of (kind, direction, q, noise, h),
 * so a copy of a kept one is the same distribution bit for bit. At most LEAF_SLOTS leaves of
 * LEAF_CACHE_BYTES in all are kept (least recently used out), under leaf_lock. */
#define LEAF_SLOTS 512
#define LEAF_CACHE_BYTES ((size_t)64 << 20)
static struct leaf_entry {
    int kind, dir, valid;
    double q, s, h;
    uint64_t used;
    pld_pmf d;
} leaf_cache[LEAF_SLOTS];
static size_t leaf_bytes;
static uint64_t leaf_tick;
static pthread_mutex_t leaf_lock = PTHREAD_MUTEX_INITIALIZER;

static dpb_status discretise_kept(const loss_model *m, double h, pld_pmf *out)
{
    pthread_mutex_lock(&leaf_lock);
    for (size_t i = 0; i < LEAF_SLOTS; i++) {
        struct leaf_entry *e = &leaf_cache[i];
        if (e->valid && e->kind == m->kind && e->dir == m->dir && e->q == m->q && e->s == m->s &&
            e->h == h) {
            e->used = ++leaf_tick;
            dpb_status st = pld_copy(&e->d, out);
            pthread_mutex_unlock(&leaf_lock);
            return st;
        }
    }
    pthread_mutex_unlock(&leaf_lock);
    dpb_status st = discretise(m, h, out);
    size_t bytes = out->n * sizeof *out->p;
    if (st != DPB_OK || bytes > LEAF_CACHE_BYTES / 8)
        return st;
    pld_pmf keep;
    if (pld_copy(out, &keep) != DPB_OK)
        return st; /* not kept: computed again next time */
    pthread_mutex_lock(&leaf_lock);
    for (;;) { /* room: a free slot and the bytes, evicting the least recently used */
        size_t free_slot = LEAF_SLOTS, lru = LEAF_SLOTS;
        for (size_t i = 0; i < LEAF_SLOTS; i++) {
            if (!leaf_cache[i].valid) {
                if (free_slot == LEAF_SLOTS)
                    free_slot = i;
            } else if (lru == LEAF_SLOTS || leaf_cache[i].used < leaf_cache[lru].used) {
                lru = i;
            }
        }
        if (free_slot < LEAF_SLOTS && leaf_bytes + bytes <= LEAF_CACHE_BYTES) {
            leaf_cache[free_slot] =
                (struct leaf_entry){m->kind, m->dir, 1, m->q, m->s, h, ++leaf_tick, keep};
            leaf_bytes += bytes;
            break;
        }
        if (lru == LEAF_SLOTS) { /* nothing to evict (cannot happen: bytes fit an empty cache) */
            pld_free(&keep);
            break;
        }
        leaf_bytes -= leaf_cache[lru].d.n * sizeof *leaf_cache[lru].d.p;
        pld_free(&leaf_cache[lru].d);
        leaf_cache[lru].valid = 0;
    }
    pthread_mutex_unlock(&leaf_lock);
    return st;
}

dpb_status pld_sampled_gaussian(double q, double sigma, int dir, double h, pld_pmf *out)
{
    if (!(q > 0.0 && q < 1.0) || !(sigma > 0.0) || !isfinite(sigma) || bad_h(h))
        return DPB_EINVAL;
    loss_model m = {2, dir, q, sigma, -HUGE_VAL, HUGE_VAL, NULL, NULL, 0, NULL, NULL};
    if (dir == PLD_REMOVE)
        m.lmin = log1p(-q);
    else
        m.lmax = -log1p(-q);
    return discretise_kept(&m, h, out);
}

dpb_status pld_sampled_laplace(double q, double b, int dir, double h, pld_pmf *out)
{
    if (!(q > 0.0 && q < 1.0) || !(b > 0.0) || !isfinite(b) || bad_h(h))
        return DPB_EINVAL;
    double lo = log1p(q * expm1(-1.0 / b)), hi = log1p(q * expm1(1.0 / b));
    loss_model m = {3, dir, q, b, lo, hi, NULL, NULL, 0, NULL, NULL};
    if (dir == PLD_ADD) {
        m.lmin = -hi;
        m.lmax = -lo;
    }
    return discretise_kept(&m, h, out);
}

dpb_status pld_eps_delta(double eps, double delta, double h, pld_pmf *out)
{
    if (!(eps >= 0.0) || !isfinite(eps) || !(delta >= 0.0 && delta <= 1.0) || bad_h(h))
        return DPB_EINVAL;
    /* The dominating pair of (eps, delta)-DP (Kairouz et al.): under P the loss is +inf with
     * probability delta, +eps with (1-delta) e^eps/(1+e^eps), -eps with (1-delta)/(1+e^eps);
     * each atom's Q-mass is its P-mass times e^{-l}. Atoms off the grid are split between
     * their two knots (pld_atoms). */
    const double atom_l[2] = {-eps, eps};
    const double p_hi = 1.0 / (1.0 + exp(-eps)); /* e^eps / (1 + e^eps) */
    const double atom_p[2] = {(1.0 - delta) * (1.0 - p_hi), (1.0 - delta) * p_hi};
    return pld_atoms(atom_l, atom_p, 2, delta, h, out);
}

dpb_status pld_gaussian_exact(double mu, double h, pld_pmf *out)
{
    if (!(mu > 0.0) || !isfinite(mu) || bad_h(h))
        return DPB_EINVAL;
    dpb_status st = pmf_alloc(out, h, 0, 1);
    if (st == DPB_OK)
        out->gauss_mu = mu;
    return st;
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

static void trim_tails(pld_pmf *d);

dpb_status pld_from_profile(pld_profile_fn f, void *ctx, double h, pld_pmf *out)
{
    return pld_from_pair_profile(f, f, ctx, h, out);
}

dpb_status pld_from_pair_profile(pld_profile_fn f, pld_profile_fn g_rev, void *ctx, double h,
                                 pld_pmf *out)
{
    if (bad_h(h))
        return DPB_EINVAL;
    /* the largest eps needed: where both bounds fall to the tail mass (or 0), or stop
     * falling (a bound with a numerical floor); what lies beyond goes to +infinity */
    double emax = h, prev = HUGE_VAL;
    for (;;) {
        double a = f(ctx, emax), b = g_rev(ctx, emax), v = a > b ? a : b;
        if (!(v > PLD_TAIL) || emax >= 200.0 || (emax > 1.0 && v > 0.9 * prev))
            break;
        prev = v;
        emax *= 2.0;
    }
    int64_t K = (int64_t)ceil(emax / h);
    if ((double)(2 * K + 1) > (double)PLD_MAX_POINTS)
        return DPB_ELIMIT;
    size_t n = (size_t)(2 * K + 1);
    double *g = malloc(n * sizeof *g), *x = malloc(n * sizeof *x);
    size_t *hull = malloc((n + 1) * sizeof *hull);
    dpb_status st = DPB_ENOMEM;
    if (g == NULL || x == NULL || hull == NULL)
        goto out;
    /* eps >= 0: the bound, made non-increasing */
    double run = 1.0;
    for (int64_t k = 0; k <= K; k++) {
        if ((k & 1023) == 1023 && dpb_cancelled()) {
            st = DPB_ECANCELLED;
            goto out;
        }
        double v = f(ctx, (double)k * h);
        if (!(v >= 0.0))
            v = 1.0; /* not a number: nothing is known */
        if (v < run)
            run = v;
        g[K + k] = run;
    }
    /* eps < 0 from the reverse order: delta_PQ(-e) = 1 - e^-e + e^-e delta_QP(e), with
     * delta_QP made non-increasing as well */
    run = 1.0;
    for (int64_t k = 1; k <= K; k++) {
        double e = -(double)k * h;
        if ((k & 1023) == 1023 && dpb_cancelled()) {
            st = DPB_ECANCELLED;
            goto out;
        }
        double v = g_rev == f ? g[K + k] : g_rev(ctx, (double)k * h);
        if (!(v >= 0.0))
            v = 1.0;
        if (v < run)
            run = v;
        g[K - k] = -expm1(e) + exp(e) * run;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = exp((double)((int64_t)i - K) * h);
    /* lower convex hull of (0, 1) and (x_i, g_i), i ascending (monotone chain); index n
     * stands for the point (0, 1) */
    size_t m = 0;
    hull[m++] = n;
    for (size_t i = 0; i < n; i++) {
        while (m >= 2) {
            size_t a = hull[m - 2], b = hull[m - 1];
            double xa = a == n ? 0.0 : x[a], ga = a == n ? 1.0 : g[a];
            double xb = b == n ? 0.0 : x[b], gb = b == n ? 1.0 : g[b];
            /* pop b if it lies on or above the segment a -> i */
            if ((gb - ga) * (x[i] - xa) >= (g[i] - ga) * (xb - xa))
                m--;
            else
                break;
        }
        hull[m++] = i;
    }
    st = pmf_alloc(out, h, -K, n);
    if (st != DPB_OK)
        goto out;
    /* atoms at the vertices: p_v = x_v (slope right - slope left), slope 0 after the last */
    for (size_t j = 1; j < m; j++) {
        size_t v = hull[j], u = hull[j - 1];
        double xu = u == n ? 0.0 : x[u], gu = u == n ? 1.0 : g[u];
        double sl = (g[v] - gu) / (x[v] - xu);
        double sr = 0.0;
        if (j + 1 < m)
            sr = (g[hull[j + 1]] - g[v]) / (x[hull[j + 1]] - x[v]);
        double pv = x[v] * (sr - sl);
        out->p[v] += pv > 0.0 ? pv : 0.0;
    }
    out->inf_mass = g[n - 1];
    trim_tails(out);
    st = DPB_OK;
out:
    free(g);
    free(x);
    free(hull);
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

/* A composition's transform size: good_size up to 64, above it the smallest 2^j m >= n with
 * m one of 16, 18, 20, 21, 24, 27, 30 (products of 2, 3, 5 and 7, which FFTW handles well):
 * at most 14% above n (6% on average, against about 3% for good_size), and few enough sizes
 * that their plans stay cached (see the plan cache below). */
static size_t ladder_size(size_t n)
{
    static const size_t m[] = {16, 18, 20, 21, 24, 27, 30, 32};
    if (n <= 64)
        return good_size(n);
    size_t p = 1;
    while (32 * p < n)
        p *= 2;
    for (size_t i = 0;; i++)
        if (m[i] * p >= n)
            return m[i] * p;
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

/* 8 u (log2 N + 2): a radix-2 FFT's butterfly stage adds at most about (sqrt 2 + 4) u
 * relative to the 1-norm it carries (Higham, Accuracy and Stability of Numerical
 * Algorithms, 2nd ed., section 24.1: eta = mu + gamma_4 (sqrt 2 + mu) a stage, the stages'
 * moduli product |A_L|...|A_1| all ones), so log2 N stages give < 6 u log2 N; FFTW's other
 * radices and codelets are covered by the margin (8 and the + 2). The same constant bounds
 * the normwise error ||y^ - y||_2 <= eta ||y||_2 (Higham's Theorem 24.2). */
double pld_fft_eta(size_t N)
{
    return 8.0 * DBL_EPSILON * (log2((double)(N > 1 ? N : 1)) + 2.0);
}

/* pld_convolve sums directly below this many products */
static int convolve_direct(size_t na, size_t nb)
{
    return (double)na * (double)nb <= 4e6;
}

/* Linear convolution of a and b into c (length na + nb - 1): direct for small inputs, FFT
 * otherwise (the product of two transforms of the zero-padded inputs). */
dpb_status pld_convolve(const double *a, size_t na, const double *b, size_t nb, double *c)
{
    size_t nc = na + nb - 1;
    if (convolve_direct(na, nb)) {
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
    if (dpb_cancelled()) {
        st = DPB_ECANCELLED;
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

static double sum_mass(const pld_pmf *d)
{
    double s = 0.0;
    for (size_t i = 0; i < d->n; i++)
        s += d->p[i];
    return s * (1.0 + (double)d->n * DBL_EPSILON);
}

/*
 * Round-off of c = a * b (pld_convolve), as a bound on sum_j |c^_j - c_j| (the 1-norm over
 * the output, which bounds the error of every delta(eps) = sum (1 - e^{eps - l}) p_l, the
 * weights lying in [0, 1]). sa, sb >= the inputs' 1-norms; u = DBL_EPSILON (generous: the
 * unit round-off is u / 2).
 *   - direct sums: each c_j sums at most m = min(na, nb) products, so
 *     |c^_j - c_j| <= gamma_{m+1} sum |a_i b_{j-i}| and the 1-norm <= gamma_{m+1} sa sb;
 *   - FFT of size N (eta = pld_fft_eta(N)): |A^_f - A_f| <= eta sa =: ea (componentwise),
 *     likewise eb, |A_f| <= sa, so the product's error at f is at most
 *     b = ea (sb + eb) + sa eb + 4 u (sa + ea)(sb + eb), |Z^_f| <= zmax = (sa + ea)(sb + eb);
 *     the inverse maps the spectrum's error to the output's 2-norm with the factor
 *     1/sqrt N, i.e. at most b, and adds eta ||z^||_2 <= eta zmax (normwise), the division
 *     by N u zmax; the 1-norm over the nc points read is <= sqrt(nc) times the 2-norm.
 * The inputs' own errors ra, rb add ra (sb + rb) + sa rb (||a^ * b^ - a * b||_1).
 */
static double convolve_roundoff(const pld_pmf *a, const pld_pmf *b)
{
    const double u = DBL_EPSILON;
    double sa = sum_mass(a), sb = sum_mass(b), r;
    size_t nc = a->n + b->n - 1;
    if (convolve_direct(a->n, b->n)) {
        double m = (double)(a->n < b->n ? a->n : b->n) + 1.0;
        r = m * u / (1.0 - m * u) * sa * sb;
    } else {
        double eta = pld_fft_eta(good_size(nc)), ea = eta * sa, eb = eta * sb;
        double zmax = (sa + ea) * (sb + eb);
        double bf = ea * (sb + eb) + sa * eb + 4.0 * u * zmax;
        r = sqrt((double)nc) * (bf + (eta + u) * zmax);
    }
    r += a->roundoff * (sb + b->roundoff) + sa * b->roundoff;
    return r * (1.0 + 1e-6);
}

dpb_status pld_compose(const pld_pmf *a, const pld_pmf *b, pld_pmf *out)
{
    if (a->h != b->h || a->gauss_mu > 0.0 || b->gauss_mu > 0.0)
        return DPB_EINVAL;
    size_t n = a->n + b->n - 1;
    dpb_status st = pmf_alloc(out, a->h, a->lo + b->lo, n);
    if (st != DPB_OK)
        return st;
    st = pld_convolve(a->p, a->n, b->p, b->n, out->p);
    if (st != DPB_OK) {
        pld_free(out);
        return st;
    }
    clamp_negative(out->p, n); /* each clamped value only moves closer to the exact one */
    out->roundoff = convolve_roundoff(a, b);
    if (!(out->roundoff <= 1.0))
        out->roundoff = 1.0;
    out->inf_mass = 1.0 - (1.0 - a->inf_mass) * (1.0 - b->inf_mass);
    out->steps = a->steps + b->steps;
    trim_tails(out);
    return DPB_OK;
}

/* ln sum_i p_i e^{t l_i} over the finite part (l_i = (lo + i) h), shifted by the largest
 * exponent among the nonzero masses so nothing overflows and the leading term cannot
 * underflow; the powers e^{-|t| h k} are built by recursion from that end (recomputed exactly
 * every 256 steps, in four interleaved streams). -HUGE_VAL if the finite part is empty. */
static double log_mgf(const pld_pmf *d, double t)
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
static double term_F(const pld_term *terms, size_t k, double t)
{
    double F = 0.0;
    for (size_t i = 0; i < k; i++) {
        double c = log_mgf(terms[i].d, t);
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
    if (pmf_alloc(cd, d->h * (double)m, lo, (size_t)(hi - lo + 1)) != DPB_OK) {
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
 * with coarse_free. */
typedef struct {
    pld_term *terms;
    pld_pmf *cd;
    const pld_term *use;
} coarse_set;

static void coarse_make(const pld_term *terms_in, size_t k, int upper, int rough, coarse_set *cs)
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

static void coarse_free(coarse_set *cs, size_t k)
{
    for (size_t i = 0; cs->cd != NULL && i < k; i++)
        pld_free(&cs->cd[i]);
    free(cs->cd);
    free(cs->terms);
}

/* What golden_min minimises over x = ln t: a level (F(theta0 + sg t) - f0 - ltail) / t (sg =
 * +-1: the Chernoff bound of the law tilted by theta0, whose log-mgf is F(theta0 + s) - f0),
 * or with sg = 0 the exponent F(t) - t l0 of the Chernoff bound on P(S >= l0). NaN counts as
 * +inf. */
typedef struct {
    const pld_term *terms;
    size_t k;
    double sg, theta0, f0, ltail, l0;
    int rough; /* an estimate: 10 steps (a bracket of 17% in t), not 15 (1.5%) */
} golden_ctx;

static double golden_eval(const golden_ctx *g, double x)
{
    double t = exp(x), v;
    if (g->sg == 0.0)
        v = term_F(g->terms, g->k, t) - t * g->l0;
    else
        v = (term_F(g->terms, g->k, g->theta0 + g->sg * t) - g->f0 - g->ltail) / t;
    return v == v ? v : HUGE_VAL;
}

/* The smallest value golden section finds over ln t in [2^-12, 2^18] (17 evaluations, 12 for
 * an estimate), and where (*at: that t). */
static double golden_min(const golden_ctx *gc, double *at)
{
    double a = -12.0 * M_LN2, b = 18.0 * M_LN2;
    const double g = 0.5 * (3.0 - sqrt(5.0));
    double x1 = a + g * (b - a), x2 = b - g * (b - a);
    double f1 = golden_eval(gc, x1), f2 = golden_eval(gc, x2);
    double best = f1 < f2 ? f1 : f2, xb = f1 < f2 ? x1 : x2;
    for (int it = 0; it < (gc->rough ? 10 : 15); it++) {
        if (f1 < f2) {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = a + g * (b - a);
            f1 = golden_eval(gc, x1);
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = b - g * (b - a);
            f2 = golden_eval(gc, x2);
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

static double chernoff_level(const pld_term *terms_in, size_t k, int upper, double ltail)
{
    double sg = upper ? 1.0 : -1.0;
    coarse_set cs;
    coarse_make(terms_in, k, upper, 0, &cs);
    golden_ctx gc = {cs.use, k, sg, 0.0, 0.0, ltail, 0.0, 0};
    double best = golden_min(&gc, NULL);
    coarse_free(&cs, k);
    return isfinite(best) ? sg * best : sg * HUGE_VAL;
}

/* ---- work memory, kept across compositions ---------------------------------------------------
 * A composition's transforms need 32 to 80 bytes a point of work memory. glibc maps blocks
 * that large afresh for each request, and the page faults of touching them took about 40% of
 * a small composition's time (11 Laplace steps: N = 160 000). Freed work blocks are kept
 * instead, at most SCRATCH_KEEP bytes in SCRATCH_SLOTS blocks for the whole process (a
 * larger block is freed at once; to keep a new one the smallest kept ones go), and the next
 * composition of any thread takes the smallest that fits. */
#define SCRATCH_SLOTS 8
#define SCRATCH_KEEP ((size_t)64 << 20)

static struct {
    void *p;
    size_t size;
} scratch[SCRATCH_SLOTS];
static size_t scratch_held;
static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;

/* bytes rounded up to a multiple of 64 (each array of a block keeps FFTW's SIMD alignment) */
static size_t scratch_round(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* A block of at least bytes (fftw_malloc'ed), *size its real size; NULL if out of memory. */
static void *scratch_get(size_t bytes, size_t *size)
{
    pthread_mutex_lock(&scratch_lock);
    size_t best = SCRATCH_SLOTS;
    for (size_t i = 0; i < SCRATCH_SLOTS; i++)
        if (scratch[i].p != NULL && scratch[i].size >= bytes &&
            (best == SCRATCH_SLOTS || scratch[i].size < scratch[best].size))
            best = i;
    if (best < SCRATCH_SLOTS) {
        void *p = scratch[best].p;
        *size = scratch[best].size;
        scratch[best].p = NULL;
        scratch_held -= *size;
        pthread_mutex_unlock(&scratch_lock);
        return p;
    }
    pthread_mutex_unlock(&scratch_lock);
    *size = bytes;
    return fftw_malloc(bytes);
}

/* Give a block back: kept if it fits the budget (evicting the smallest kept ones), else freed. */
static void scratch_put(void *p, size_t size)
{
    void *drop[SCRATCH_SLOTS + 1];
    size_t nd = 0;
    if (p == NULL)
        return;
    pthread_mutex_lock(&scratch_lock);
    while (size <= SCRATCH_KEEP) {
        size_t slot = SCRATCH_SLOTS, small = SCRATCH_SLOTS;
        for (size_t i = 0; i < SCRATCH_SLOTS; i++) {
            if (scratch[i].p == NULL)
                slot = slot == SCRATCH_SLOTS ? i : slot;
            else if (small == SCRATCH_SLOTS || scratch[i].size < scratch[small].size)
                small = i;
        }
        if (slot < SCRATCH_SLOTS && scratch_held + size <= SCRATCH_KEEP) {
            scratch[slot].p = p;
            scratch[slot].size = size;
            scratch_held += size;
            p = NULL;
            break;
        }
        if (small == SCRATCH_SLOTS)
            break;
        drop[nd++] = scratch[small].p;
        scratch_held -= scratch[small].size;
        scratch[small].p = NULL;
    }
    pthread_mutex_unlock(&scratch_lock);
    for (size_t i = 0; i < nd; i++)
        fftw_free(drop[i]);
    fftw_free(p);
}

/* ---- FFT plans, cached per size ------------------------------------------------------------
 * FFTW_ESTIMATE plans cost O(N) trigonometric calls to create, and a real-input (r2c) size
 * 4-20 ms from 2^16 to 2^20, as long as its transforms take up to 2^19 (measured on the 2-core
 * machine). Compositions therefore use a short ladder of sizes (ladder_size: 7 an octave, 113
 * up to 2^20 with 11.3 M points in all), so the same sizes recur across requests, and a pair
 * of plans is kept per size, created under plan_lock: at most PLAN_CACHE pairs, of sizes up
 * to PLAN_CACHE_MAX_N, holding at most plan_budget points in all (a pair holds O(N) twiddle
 * factors: 12-16 bytes a point measured, PLAN_BYTES_PER_POINT counted; the default budget
 * holds the whole ladder, about 140 MiB resident), the least recently used pair no call is
 * executing destroyed to make room; other plans are made and destroyed per call. Cached
 * plans are executed with the new-array interface on fftw_malloc'ed (so SIMD-aligned)
 * buffers, which FFTW documents as thread-safe for distinct arrays. */
#define PLAN_CACHE 192
#define PLAN_CACHE_MAX_N ((size_t)1 << 20)
#define PLAN_BYTES_PER_POINT 16

/* Up to this size the transforms are complex (c2c) of the real input: FFTW plans a new r2c
 * size in 1-6 ms (its real-data planner tries many solvers), a c2c size in 0.1-0.5 ms, and at
 * these sizes a transform runs in well under a millisecond either way, so a request whose
 * size was never planned before costs the planning, not the transform. */
#define C2C_MAX_N ((size_t)1 << 16)

typedef struct {
    size_t n; /* 0: an empty slot */
    fftw_plan fwd, inv;
    unsigned users; /* calls executing the pair now: never evicted while > 0 */
    uint64_t used;  /* when last taken (least recently used goes first) */
} plan_pair;

static plan_pair plan_cache[PLAN_CACHE];
static size_t plan_points;
static size_t plan_budget = (size_t)PLD_PLAN_MEMORY_DEFAULT / PLAN_BYTES_PER_POINT;
static uint64_t plan_tick;

void pld_plan_memory(size_t bytes)
{
    pthread_mutex_lock(&plan_lock);
    plan_budget = bytes / PLAN_BYTES_PER_POINT;
    pthread_mutex_unlock(&plan_lock);
}

/* Make room for a pair of size N (under plan_lock): evict the least recently used pairs no
 * call is using until a slot and the points are free. The free slot, or -1. */
static int plan_room(size_t N)
{
    if (N > PLAN_CACHE_MAX_N)
        return -1;
    for (;;) {
        int empty = -1, lru = -1;
        for (int i = 0; i < PLAN_CACHE; i++) {
            if (plan_cache[i].n == 0)
                empty = empty < 0 ? i : empty;
            else if (plan_cache[i].users == 0 &&
                     (lru < 0 || plan_cache[i].used < plan_cache[lru].used))
                lru = i;
        }
        if (empty >= 0 && plan_points + N <= plan_budget)
            return empty;
        if (lru < 0)
            return -1;
        fftw_destroy_plan(plan_cache[lru].fwd);
        fftw_destroy_plan(plan_cache[lru].inv);
        plan_points -= plan_cache[lru].n;
        plan_cache[lru].n = 0;
    }
}

/* The plans for size N: cached (*slot >= 0, held until plans_put) or made for this call
 * (*slot = -1); complex (out of place, forward and backward) when N <= C2C_MAX_N, real (r2c,
 * c2r) above. */
static dpb_status plans_get(size_t N, fftw_plan *fwd, fftw_plan *inv, int *slot)
{
    dpb_status st = DPB_ENOMEM;
    *slot = -1;
    pthread_mutex_lock(&plan_lock);
    for (int i = 0; i < PLAN_CACHE; i++)
        if (plan_cache[i].n == N) {
            *fwd = plan_cache[i].fwd;
            *inv = plan_cache[i].inv;
            plan_cache[i].users++;
            plan_cache[i].used = ++plan_tick;
            *slot = i;
            pthread_mutex_unlock(&plan_lock);
            return DPB_OK;
        }
    int cx = N <= C2C_MAX_N;
    double *buf = fftw_malloc(N * (cx ? sizeof(fftw_complex) : sizeof *buf));
    fftw_complex *X = fftw_malloc((cx ? N : N / 2 + 1) * sizeof *X);
    *fwd = *inv = NULL;
    if (buf != NULL && X != NULL && cx) {
        fftw_complex *in = (fftw_complex *)buf;
        *fwd = fftw_plan_dft_1d((int)N, in, X, FFTW_FORWARD, FFTW_ESTIMATE);
        *inv = fftw_plan_dft_1d((int)N, in, X, FFTW_BACKWARD, FFTW_ESTIMATE);
    } else if (buf != NULL && X != NULL) {
        *fwd = fftw_plan_dft_r2c_1d((int)N, buf, X, FFTW_ESTIMATE);
        *inv = fftw_plan_dft_c2r_1d((int)N, X, buf, FFTW_ESTIMATE);
    }
    if (*fwd != NULL && *inv != NULL) {
        st = DPB_OK;
        *slot = plan_room(N);
        if (*slot >= 0) {
            plan_cache[*slot] = (plan_pair){N, *fwd, *inv, 1, ++plan_tick};
            plan_points += N;
        }
    } else {
        if (*fwd)
            fftw_destroy_plan(*fwd);
        if (*inv)
            fftw_destroy_plan(*inv);
    }
    pthread_mutex_unlock(&plan_lock);
    fftw_free(buf);
    fftw_free(X);
    return st;
}

static void plans_put(fftw_plan fwd, fftw_plan inv, int slot)
{
    pthread_mutex_lock(&plan_lock);
    if (slot >= 0) {
        plan_cache[slot].users--;
    } else if (fwd != NULL) {
        fftw_destroy_plan(fwd);
        fftw_destroy_plan(inv);
    }
    pthread_mutex_unlock(&plan_lock);
}

/* The ladder's sizes up to PLAN_CACHE_MAX_N, smallest first, as many as the budget holds,
 * planned ahead so that no request pays the planning (4-20 ms a real-input size from 2^16 to
 * 2^20; about 0.3 s of one core for all). */
void pld_warm_plans(void)
{
    for (size_t N = 16; N <= PLAN_CACHE_MAX_N; N = ladder_size(N + 1)) {
        pthread_mutex_lock(&plan_lock);
        int room = plan_points + N <= plan_budget;
        pthread_mutex_unlock(&plan_lock);
        if (!room)
            return;
        fftw_plan fwd, inv;
        int slot;
        if (plans_get(N, &fwd, &inv, &slot) == DPB_OK)
            plans_put(fwd, inv, slot);
    }
}

static void *warm_main(void *arg)
{
    (void)arg;
    pld_warm_plans();
    return NULL;
}

void pld_warm_plans_start(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, warm_main, NULL) == 0)
        pthread_detach(t);
}

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

/* A transform's round-off: every output point's error is at most ept, the error vector's
 * 2-norm at most e2 (over all N points). */
typedef struct {
    double ept, e2;
} fft_err;

/* The bounds from the spectrum's error sums (s1: sum of w b_f, s2: of w b_f^2, sz: of w
 * |Z^_f|, w the half-spectrum weights), the output's max and 2-norm, the inverse transform's
 * eta and the arithmetic's u. */
static fft_err output_error(double s1, double s2, double sz, double pmax, double p2, double eta,
                            double u, size_t N)
{
    return (fft_err){(s1 + eta * sz) / (double)N + u * pmax,
                     sqrt(s2 / (double)N) + (eta + u) * sqrt(p2)};
}

/* The round-off bound R_fft over n_out points read: per point, or by Cauchy-Schwarz. */
static double window_roundoff(fft_err e, size_t n_out)
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
static dpb_status transform_double(const pld_term *terms, size_t k, size_t N, double *buf,
                                   double theta, const double *lm, fft_err *fe)
{
    size_t nc = N / 2 + 1;
    /* complex transforms (N <= C2C_MAX_N): the real input and output pass through cin/cout,
     * X and Y hold the whole spectrum (only its first nc values are used: it is Hermitian) */
    int cx = N <= C2C_MAX_N;
    size_t nx = cx ? N : nc;
    /* one work block: X, Y, (cin, cout), and term_rel's rel and lu, each 64-byte aligned */
    size_t bx = scratch_round(nx * sizeof(fftw_complex)),
           bn = scratch_round(N * sizeof(fftw_complex));
    size_t bd = scratch_round(nc * sizeof(double)), held = 0;
    char *work = scratch_get(2 * bx + (cx ? 2 * bn : 0) + 2 * bd, &held);
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
    if ((st = plans_get(N, &fwd, &inv, &slot)) != DPB_OK)
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
    plans_put(fwd, inv, slot);
    scratch_put(work, held);
    return st;
}

/* ---- extended precision ---------------------------------------------------------------------
 * The same composition with long double transforms and powers (x87 extended on x86-64: u =
 * LDBL_EPSILON = 2^-63, 2048 times smaller than double's), for requests whose delta the
 * double round-off bound would dominate: the bound is the same analysis with u and eta of
 * the long double arithmetic (pld_fft_eta scaled by LDBL_EPSILON / DBL_EPSILON), plus one
 * double rounding per output point. About 6 times slower per transform. Where long double
 * is double, nothing is gained and nothing is lost. */
static _Thread_local int ext_mode;

int pld_extended_enter(int on)
{
    int prev = ext_mode;
    ext_mode = on;
    return prev;
}

void pld_extended_leave(int prev)
{
    ext_mode = prev;
}

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

static dpb_status transform_ext(const pld_term *terms, size_t k, size_t N, double *out, fft_err *fe)
{
    size_t nc = N / 2 + 1;
    long double *buf = fftwl_malloc(N * sizeof *buf);
    fftwl_complex *X = fftwl_malloc(nc * sizeof *X), *Y = fftwl_malloc(nc * sizeof *Y);
    double *dz = calloc(nc, sizeof *dz);
    fftwl_plan fwd = NULL, inv = NULL;
    dpb_status st = DPB_ENOMEM;
    const double ul = LDBL_EPSILON, u = DBL_EPSILON;
    const double etal = pld_fft_eta(N) * (LDBL_EPSILON / DBL_EPSILON);
    double log_g = 0.0;
    if (buf == NULL || X == NULL || Y == NULL || dz == NULL)
        goto fail;
    pthread_mutex_lock(&plan_lock);
    fwd = fftwl_plan_dft_r2c_1d((int)N, buf, X, FFTW_ESTIMATE);
    inv = fftwl_plan_dft_c2r_1d((int)N, Y, buf, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    if (fwd == NULL || inv == NULL)
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
        fftwl_execute_dft_r2c(fwd, buf, i == 0 ? Y : X);
        uint64_t c = terms[i].count;
        double si = sum_mass(d), cd = (double)c;
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
    fftwl_execute_dft_c2r(inv, Y, buf);
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
    pthread_mutex_lock(&plan_lock);
    if (fwd)
        fftwl_destroy_plan(fwd);
    if (inv)
        fftwl_destroy_plan(inv);
    pthread_mutex_unlock(&plan_lock);
    free(dz);
    fftwl_free(buf);
    fftwl_free(X);
    fftwl_free(Y);
    return st;
}

/* Where the composed index m sits in the circular result of size N: (m - sum_i count_i lo_i)
 * mod N, in exact integer arithmetic (the sum can pass 2^53). */
static int64_t circular_pos(const pld_term *terms, size_t k, int64_t m, size_t N)
{
    __int128 acc = (__int128)m;
    for (size_t i = 0; i < k; i++)
        acc -= ((__int128)(terms[i].count % N) * (__int128)terms[i].d->lo) % (__int128)N;
    int64_t pos = (int64_t)(acc % (__int128)N);
    return pos < 0 ? pos + (int64_t)N : pos;
}

/* ---- the tilted composition (pld_tilt_enter; docs/MATH.md section 6) -------------------------
 * With M_i(theta) = sum_j p_ij e^{theta l_j} and any numbers lm_i, the terms tilted to
 * p~_ij = p_ij e^{theta l_j - lm_i} compose to p~_m = p_m e^{theta m h - F}, F = sum_i c_i lm_i,
 * exactly (a path's losses sum to its index times h). The FFT computes the tilted law with an
 * error e_m bounded as for any composition (pointwise ept, 2-norm e2), and
 * p_m = p~_m e^{F - theta m h}: the error reaches the loss m h scaled by e^{F - theta m h}, which
 * for theta the Chernoff optimum at l0 is at most about the Chernoff bound on P(S >= m h),
 * small where delta is small, instead of 1. Below l0 the scale grows without bound: that part
 * is not kept; the mass it held (the finite total less what is kept above l0) is put on l0.
 * The bound, for every eps (pld_delta): delta_true(eps) <= delta(eps) + sum_{m h > eps, m > cut}
 * a_m, a_m the error of point m after untilting (pld_tilt_err):
 *   - kept points m > cut hold p'_m = max(v_m, 0) e^{F - theta m h} scale with p_m <= p'_m + a_m,
 *     where scale covers the tilt's rounding: each tilted mass carries a relative error at
 *     most rho_i (the exponent's rounding, exp's and the product's), so the composition of the
 *     computed masses is at least prod_i (1 - rho_i)^{c_i} = 1 - rho times the exact one (all
 *     terms are positive), and the untilting weight at most kap relative;
 *   - the point cut holds r = max(0, F_fin - sum_{m > cut} p'_m) (F_fin >= the finite mass);
 *     for eps >= cut delta only reads the points above eps, and for eps < cut the true mass at
 *     or below cut, B, weighs at most w_cut = 1 - e^{eps - cut h} a unit, so
 *     delta(eps) - delta_true(eps) >= sum_{m > cut} (w_m - w_cut)(p'_m - p_m) >= -sum a_m in
 *     both cases of r (r >= F_fin - sum p'_m, and r >= 0 >= ... when F_fin < sum p'_m);
 *   - mass outside the window: above it (untilted, at most PLD_TAIL) to +infinity as usual;
 *     the circular wrap only adds mass (every tilted mass is >= 0), which only raises deltas.
 */
static _Thread_local pld_tilt_at tilt_at = {NAN, NAN, 0.0};

pld_tilt_at pld_tilt_enter(pld_tilt_at at)
{
    pld_tilt_at prev = tilt_at;
    tilt_at = at;
    return prev;
}

void pld_tilt_leave(pld_tilt_at prev)
{
    tilt_at = prev;
}

/* The sum of a_m over the kept points above eps (tilted compositions: pld_tilt_err). */
static double tilt_roundoff(const pld_tilt_err *t, double h, double eps)
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

/* How far above its least the tilt's Chernoff exponent at the aim may be (tilt_choose), where
 * the window at the least passes TILT_WIDE points: the bound grows e^5 times (from about 1e-10
 * of delta), and the windows of leaves with heavy upper tails (sigma 0.3-0.6), which the tilt
 * raises, shrink by a third to a half. */
#define TILT_SLACK 5.0
#define TILT_WIDE ((double)(1 << 19))

/* The span compose_tilted's circular window needs for the tilted law's levels ut and vt (kept
 * [cut, top], in grid indices; at most nat, the whole law's). */
static double tilt_span(double ut, double vt, double cut, double top, double h, double nat)
{
    double span = top - (isfinite(vt) && floor(vt / h) < cut ? floor(vt / h) : cut);
    if (isfinite(ut) && ceil(ut / h) - cut > span)
        span = ceil(ut / h) - cut;
    return span > nat ? nat : span; /* the whole law fits: nothing wraps */
}

/* The tilted law's mass left outside the circular window: it lands elsewhere in it, which only
 * adds mass (at most this much, tilted, at a loss l >= l0: e^{F - theta l} <= about the
 * Chernoff bound at l0 times this, untilted). */
#define TILT_TAIL 1e-10

static void *side_main(void *p)
{
    pld_side *s = p;
    tilt_at = s->tilt;
    ext_mode = s->ext;
    const dpb_cancel *prev = dpb_cancel_enter(s->cancel);
    s->fn(s->arg);
    dpb_cancel_leave(prev);
    return NULL;
}

void pld_side_run(pld_side *s, void (*fn)(void *), void *arg)
{
    s->fn = fn;
    s->arg = arg;
    s->tilt = tilt_at;
    s->ext = ext_mode;
    s->cancel = dpb_cancel_enter(NULL); /* what is installed (NULL changes nothing) */
    s->running = pthread_create(&s->thread, NULL, side_main, s) == 0;
    if (!s->running)
        fn(arg);
}

void pld_side_join(pld_side *s)
{
    if (s->running)
        pthread_join(s->thread, NULL);
    s->running = 0;
}

double pld_roundoff_at(const pld_pmf *d, double eps)
{
    return d->tilt.theta != 0.0 ? tilt_roundoff(&d->tilt, d->h, eps) : d->roundoff;
}

int pld_tilt_direct(double steps, double delta)
{
    return 3.0 * pld_fft_eta((size_t)1 << 20) * steps > 1e-3 * delta && delta > 0.0 && delta < 1.0;
}

/* The leaves a composition of the terms holds. */
static double terms_steps(const pld_term *terms, size_t k)
{
    double s = 0.0;
    for (size_t i = 0; i < k; i++)
        s += (double)terms[i].count * terms[i].d->steps;
    return s;
}

/* Direct mode (pld.h), where pld_tilt_direct holds: the floor and aim for an epsilon at
 * delta, estimated from rough copies of the terms (an estimate is all the floor and aim need).
 * The aim: the Chernoff level at delta times the saddle-point factor theta (1 + theta) sigma
 * sqrt(2 pi) (delta(eps) is about the Chernoff bound over it, sigma^2 = F''(theta)); the floor
 * 2 / theta or a tenth of it lower. Returns 0 where no floor above 0 is found. */
static int tilt_estimate(const pld_term *rough, size_t k, double delta, pld_tilt_at *at)
{
    golden_ctx gc = {rough, k, 1.0, 0.0, 0.0, log(delta), 0.0, 1};
    double th = 0.0, aim = golden_min(&gc, &th);
    if (isfinite(aim) && th > 0.0) {
        double d = 1e-3 * th, f0 = term_F(rough, k, th);
        double var = (term_F(rough, k, th + d) - 2.0 * f0 + term_F(rough, k, th - d)) / (d * d);
        double pre = th * (1.0 + th) * sqrt(2.0 * M_PI * var);
        if (pre > 1.0 && isfinite(pre)) {
            gc.ltail = log(delta) + log(pre);
            double a2 = golden_min(&gc, &th);
            aim = isfinite(a2) ? a2 : aim;
        }
    }
    if (!(isfinite(aim) && aim > 0.0 && th > 0.0))
        return 0;
    double margin = fmax(2.0 / th, 0.1 * aim);
    *at = (pld_tilt_at){aim - margin, aim, delta};
    return at->floor > 0.0;
}

/* compose_tilted's choice: theta > 0 at the Chernoff optimum for P(S >= aim) (the minimum of
 * F(t) - t aim, found on the coarse copies, which is enough: any theta gives a valid bound), and
 * the tilted law's own Chernoff window [*vt, *ut] at TILT_TAIL (for tightness only). Returns 0
 * when the optimum is at the search's lower end (l0 is not above the law's mean). */
static int tilt_choose(const pld_term *win, size_t k, double aim, double slack, double *theta,
                       double *ut, double *vt)
{
    golden_ctx gc = {win, k, 0.0, 0.0, 0.0, 0.0, aim, 0};
    double th = 0.0, ltail = log(TILT_TAIL);
    double gmin = golden_min(&gc, &th);
    int ok = th > 0x1p-11 && isfinite(th) && isfinite(gmin);
    if (ok) {
        /* slack > 0: a smaller theta whose Chernoff exponent at aim is slack above the least:
         * the bound there grows by e^slack (from about 1e-10 of delta), the tilted law's upper
         * tail, which sets the window, shrinks (G is convex: bisect left of the minimum) */
        double lo = th / 16.0, hi = th;
        for (int it = 0; it < (slack > 0.0 ? 30 : 0); it++) {
            double mid = 0.5 * (lo + hi), g = golden_eval(&gc, log(mid));
            if (g > gmin + slack)
                lo = mid;
            else
                hi = mid;
        }
        th = hi;
        double f0 = term_F(win, k, th);
        /* the window's levels in full steps: they set the transform's size */
        golden_ctx up = {win, k, 1.0, th, f0, ltail, 0.0, 0},
                   dn = {win, k, -1.0, th, f0, ltail, 0.0, 0};
        *ut = golden_min(&up, NULL);
        *vt = -golden_min(&dn, NULL);
        *theta = th;
        ok = isfinite(f0);
    }
    return ok;
}

/* pld_compose_many through a tilt at.aim kept above l0 = at.floor; *done = 0 (and nothing
 * computed) where it does not apply. win: the terms' copies for window searches (coarse_make),
 * for the tilt and its window; the direct estimate takes rough ones. */
static dpb_status compose_tilted_in(const pld_term *terms, const pld_term *win, size_t k,
                                    pld_tilt_at at, pld_pmf *out, int *done)
{
    *done = 0;
    if (!isfinite(at.floor)) { /* direct: the floor and aim from rough copies */
        coarse_set cs;
        coarse_make(terms, k, 1, 1, &cs);
        int ok = tilt_estimate(cs.use, k, at.delta, &at);
        coarse_free(&cs, k);
        if (!ok)
            return DPB_OK;
    }
    double l0 = at.floor, aim = at.aim > l0 ? at.aim : l0;
    const double u = DBL_EPSILON;
    double h = terms[0].d->h, nat_lo = 0.0, nat_hi = 0.0, log_fin = 0.0, log_fin_err = 0.0;
    for (size_t i = 0; i < k; i++) {
        const pld_pmf *d = terms[i].d;
        double c = (double)terms[i].count, lf = log1p(-(d->inf_mass < 1.0 ? d->inf_mass : 1.0));
        if (d->roundoff != 0.0 || d->tilt.theta != 0.0 || !(lf > -HUGE_VAL))
            return DPB_OK; /* composed inputs: their errors would be tilted too */
        nat_lo += c * (double)d->lo;
        nat_hi += c * (double)(d->lo + (int64_t)d->n - 1);
        log_fin += c * lf;
        log_fin_err += 4.0 * u * (c * fabs(lf) + 1.0);
    }
    double ltail = log(PLD_TAIL), upl = chernoff_level(terms, k, 1, ltail);
    if (!(nat_hi > nat_lo) || !isfinite(upl) || !(l0 > 0.0))
        return DPB_OK;
    double top = ceil(upl / h) < nat_hi ? ceil(upl / h) : nat_hi;
    double bound_up = ceil(upl / h) < nat_hi ? PLD_TAIL : 0.0;
    double cut = floor(l0 / h), theta = 0.0, ut = NAN, vt = NAN;
    if (!(cut > nat_lo))
        return DPB_OK;
    if (cut >= top) { /* all the finite mass (but PLD_TAIL) is at or below l0: onto it */
        dpb_status st = pmf_alloc(out, h, (int64_t)cut, 1);
        if (st == DPB_OK) {
            double fin = exp(log_fin + log_fin_err);
            out->p[0] = fin < 1.0 ? fin : 1.0;
            out->inf_mass = fmin(1.0, -expm1(log_fin) + bound_up);
            out->floor = cut * h;
            out->steps = terms_steps(terms, k);
        }
        *done = 1;
        return st;
    }
    if (!tilt_choose(win, k, aim, 0.0, &theta, &ut, &vt))
        return DPB_OK;
    /* kept: [cut, top]. The circular result holds N indices, [top - N + 1, top]: tilted mass
     * from above top lands N lower, below cut if N > ut - cut; tilted mass from below lands N
     * higher, above top if the window reaches down to vt (the tilted law's levels at
     * TILT_TAIL: what passes them only adds mass, and little). Where that passes
     * TILT_WIDE points, a smaller theta (TILT_SLACK) is tried, and kept if its window is
     * smaller. */
    double hi = top, span = tilt_span(ut, vt, cut, top, h, nat_hi - nat_lo);
    double th2, ut2, vt2, span2;
    if (span > TILT_WIDE && tilt_choose(win, k, aim, TILT_SLACK, &th2, &ut2, &vt2) &&
        (span2 = tilt_span(ut2, vt2, cut, top, h, nat_hi - nat_lo)) < span) {
        theta = th2;
        span = span2;
    }
    if (!(span + 1.0 <= (double)PLD_MAX_POINTS))
        return DPB_OK;
    size_t N = ladder_size((size_t)(span + 1.0)), n_out = (size_t)(hi - cut + 1.0);
    /* the tilts' lm_i, their rounding rho_i (the exponent theta l - lm_i: theta l rounded
     * twice, the difference once; exp and the product within 2 u), the untilting's kap */
    double *lm = malloc(k * sizeof *lm), F = 0.0, Fabs = 0.0, lrho = 0.0;
    if (lm == NULL)
        return DPB_ENOMEM;
    for (size_t i = 0; i < k; i++) {
        const pld_pmf *d = terms[i].d;
        double c = (double)terms[i].count;
        lm[i] = log_mgf(d, theta);
        double lmax = fmax(fabs((double)d->lo * h), fabs((double)(d->lo + (int64_t)d->n - 1) * h));
        double rho = 4.0 * u * (theta * lmax + fabs(lm[i]) + 2.0);
        F += c * lm[i];
        Fabs += c * fabs(lm[i]);
        lrho += c * log1p(-rho);
    }
    double rho_all = -expm1(lrho);
    double kap = 4.0 * u * ((double)(k + 2) * Fabs + theta * fmax(fabs(cut), fabs(hi)) * h + 4.0);
    if (!isfinite(F) || !(rho_all < 1e-3) || !(kap < 1e-3)) {
        free(lm);
        return DPB_OK;
    }
    *done = 1;
    size_t held = 0;
    double *buf = scratch_get(N * sizeof *buf, &held);
    fft_err fe = {1.0, 1.0};
    dpb_status st = buf == NULL ? DPB_ENOMEM : transform_double(terms, k, N, buf, theta, lm, &fe);
    free(lm);
    if (st != DPB_OK || (st = pmf_alloc(out, h, (int64_t)cut, n_out)) != DPB_OK)
        goto fail;
    /* scale: 1 / ((1 - kap)(1 - rho)), and the product's own rounding */
    double scale = (1.0 + 2.0 * u) / ((1.0 - kap) * (1.0 - rho_all));
    int64_t pos = circular_pos(terms, k, (int64_t)cut, N);
    double kept = 0.0;
    for (size_t j = 0; j < n_out; j++) {
        double v = buf[pos];
        if (++pos == (int64_t)N)
            pos = 0;
        if (j == 0 || !(v > 0.0))
            continue;
        out->p[j] = v * exp(F - theta * ((double)((int64_t)cut + (int64_t)j) * h)) * scale;
        kept += out->p[j];
    }
    /* the point cut: the finite mass (rounded up) less what is kept (rounded down) */
    double fin = exp(log_fin + log_fin_err);
    double rest = (fin < 1.0 ? fin : 1.0) - kept * (1.0 - (double)n_out * u);
    out->p[0] = rest > 0.0 ? rest : 0.0;
    out->inf_mass = -expm1(log_fin) + bound_up;
    if (out->inf_mass > 1.0)
        out->inf_mass = 1.0;
    /* a_m = err_m e^{F - theta m h} scale (1 + kap): the weight as tilt_roundoff sums it, the
     * geometric sums' own rounding inside the last factor */
    out->tilt = (pld_tilt_err){theta,      F,     scale * (1.0 + 8.0 * kap + 1e-12) * (1.0 + 1e-6),
                               fe.ept,     fe.e2, (int64_t)cut,
                               (int64_t)hi};
    out->roundoff = tilt_roundoff(&out->tilt, h, -HUGE_VAL);
    out->floor = cut * h;
    out->steps = terms_steps(terms, k);
    trim_tails(out);
fail:
    scratch_put(buf, held);
    return st;
}

static dpb_status compose_tilted(const pld_term *terms, size_t k, pld_tilt_at at, pld_pmf *out,
                                 int *done)
{
    *done = 0;
    if (!isfinite(at.floor) && !pld_tilt_direct(terms_steps(terms, k), at.delta))
        return DPB_OK; /* direct, and the double bound will do */
    coarse_set cs;
    coarse_make(terms, k, 1, 0, &cs);
    dpb_status st = compose_tilted_in(terms, cs.use, k, at, out, done);
    coarse_free(&cs, k);
    return st;
}

/*
 * All terms at once in the Fourier domain: one forward FFT per term on the final size N,
 * the product of the powers, one inverse FFT (in double, or in long double inside
 * pld_extended_enter(1)). The composed index c sits at position
 * (c - sum_i count_i lo_i) mod N (a term wider than N is folded modulo N first, which the
 * circular product does anyway). The window [w_lo, w_hi] is the Chernoff window of the
 * whole composition; mass outside it aliases into it: the part from above (at most
 * PLD_TAIL) goes to +infinity, the part from below lands higher than it belongs, which only
 * overstates losses (its bound is added to +infinity too, as the per-piece code did).
 */
dpb_status pld_compose_many(const pld_term *terms, size_t k, pld_pmf *out)
{
    if (k == 0)
        return DPB_EINVAL;
    for (size_t i = 0; i < k; i++)
        if (terms[i].d->h != terms[0].d->h || terms[i].count == 0 || terms[i].d->gauss_mu > 0.0)
            return DPB_EINVAL;
    if (isfinite(tilt_at.floor) || tilt_at.delta > 0.0) {
        int done;
        dpb_status st = compose_tilted(terms, k, tilt_at, out, &done);
        if (done || st != DPB_OK)
            return st;
    }
    double h = terms[0].d->h, nat_lo = 0.0, nat_hi = 0.0, log_fin = 0.0, log_in = 0.0;
    size_t nmax = 1;
    for (size_t i = 0; i < k; i++) {
        const pld_pmf *d = terms[i].d;
        double c = (double)terms[i].count;
        nat_lo += c * (double)d->lo;
        nat_hi += c * (double)(d->lo + (int64_t)d->n - 1);
        log_fin += c * log1p(-(d->inf_mass < 1.0 ? d->inf_mass : 1.0));
        log_in += c * log1p(d->roundoff);
        if (d->n > nmax)
            nmax = d->n;
    }
    double ltail = log(PLD_TAIL), w_lo = nat_lo, w_hi = nat_hi, bound_up = 0.0, bound_lo = 0.0;
    if (nat_hi > nat_lo) {
        double u = chernoff_level(terms, k, 1, ltail), v = chernoff_level(terms, k, 0, ltail);
        if (isfinite(u) && ceil(u / h) < w_hi) {
            w_hi = ceil(u / h);
            bound_up = PLD_TAIL;
        }
        if (isfinite(v) && floor(v / h) > w_lo) {
            w_lo = floor(v / h);
            bound_lo = PLD_TAIL;
        }
        if (w_hi < w_lo) /* both bounds cut through a narrow law: keep one point */
            w_hi = w_lo;
    }
    double width = w_hi - w_lo + 1.0;
    if (!(width >= 1.0) || width > (double)PLD_MAX_POINTS)
        return DPB_ELIMIT;
    size_t n_out = (size_t)width;
    size_t N = ladder_size(n_out);
    if (N > 2 * PLD_MAX_POINTS)
        return DPB_ELIMIT;
    size_t held = 0;
    double *buf = scratch_get(N * sizeof *buf, &held);
    if (buf == NULL)
        return DPB_ENOMEM;
    fft_err fe = {1.0, 1.0};
    dpb_status st = ext_mode ? transform_ext(terms, k, N, buf, &fe)
                             : transform_double(terms, k, N, buf, 0.0, NULL, &fe);
    if (st != DPB_OK || (st = pmf_alloc(out, h, (int64_t)w_lo, n_out)) != DPB_OK)
        goto fail;
    out->roundoff = expm1(log1p(window_roundoff(fe, n_out)) + log_in) * (1.0 + 1e-6);
    if (!(out->roundoff <= 1.0)) /* also NaN: certify nothing rather than something */
        out->roundoff = 1.0;
    int64_t pos = circular_pos(terms, k, (int64_t)w_lo, N);
    for (size_t j = 0; j < n_out; j++) {
        double v = buf[pos];
        out->p[j] = v > 0.0 ? v : 0.0;
        if (++pos == (int64_t)N)
            pos = 0;
    }
    out->inf_mass = -expm1(log_fin) + bound_up + bound_lo;
    out->steps = terms_steps(terms, k);
    if (out->inf_mass > 1.0)
        out->inf_mass = 1.0;
    trim_tails(out);
fail:
    scratch_put(buf, held);
    return st;
}

dpb_status pld_self_compose(const pld_pmf *a, uint64_t count, pld_pmf *out)
{
    if (count == 0)
        return pld_identity(a->h, out);
    if (count == 1)
        return pld_copy(a, out);
    pld_term t = {a, count};
    return pld_compose_many(&t, 1, out);
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
            R = tilt_roundoff(&d->tilt, d->h, lprev);
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

/* ---- issue 16: leaves of dp_accounting's mechanism events ------------------------------- */

dpb_status pld_atoms(const double *loss, const double *mass, size_t n, double inf_mass, double h,
                     pld_pmf *out)
{
    if (bad_h(h) || n == 0 || !(inf_mass >= 0.0 && inf_mass <= 1.0))
        return DPB_EINVAL;
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(loss[i]) || !(mass[i] >= 0.0))
            return DPB_EINVAL;
        if (loss[i] < lo)
            lo = loss[i];
        if (loss[i] > hi)
            hi = loss[i];
    }
    /* one knot of margin each side: the knots are placed by the losses pld_delta() evaluates,
     * (double)k * h, which may round either way from the real k h */
    double kl = floor(lo / h) - 1.0, kh = ceil((hi + 4.0 * DBL_EPSILON * fabs(hi)) / h) + 1.0;
    if (!(kh - kl < (double)PLD_MAX_POINTS))
        return DPB_ELIMIT;
    int64_t k0 = (int64_t)kl;
    dpb_status st = pmf_alloc(out, h, k0, (size_t)((int64_t)kh - k0 + 1));
    if (st != DPB_OK)
        return st;
    /* Each atom l goes to the knots k h <= l < (k + 1) h around it, split by connect-the-dots
     * (its Q-mass is its P-mass times e^-l): the upper knot gets
     * m (1 - e^{k h - l}) / (1 - e^{-h}), computed with expm1 and rounded up, so delta(eps)
     * interpolates the true one at the knots, lies above it in between, and no mass is
     * moved below its loss by the rounding of k h. */
    double omh = -expm1(-h);
    for (size_t a = 0; a < n; a++) {
        /* the caller's loss carries its own rounding (a product, a logarithm): a few ulps up */
        double l = loss[a] + 4.0 * DBL_EPSILON * fabs(loss[a]);
        if (mass[a] == 0.0)
            continue;
        int64_t k = (int64_t)floor(l / h);
        while ((double)k * h > l)
            k--;
        while ((double)(k + 1) * h <= l)
            k++;
        size_t i = (size_t)(k - k0);
        double lk = (double)k * h;
        if (lk == l) {
            out->p[i] += mass[a];
            continue;
        }
        double up = mass[a] * (-expm1(lk - l)) / omh * (1.0 + 4.0 * DBL_EPSILON);
        if (!(up <= mass[a]))
            up = mass[a];
        out->p[i + 1] += up;
        out->p[i] += mass[a] - up;
    }
    out->inf_mass = inf_mass;
    return DPB_OK;
}

/* ln M(x), M(x) = sum_i w_i exp((2 c_i x - c_i^2) / (2 s^2)), and its derivative. */
static double mix_logm(const loss_model *m, double x, double *deriv)
{
    double mx = -HUGE_VAL, s2 = m->s * m->s;
    for (size_t i = 0; i < m->nc; i++) {
        double e = m->lw[i] + (2.0 * m->c[i] * x - m->c[i] * m->c[i]) / (2.0 * s2);
        if (e > mx)
            mx = e;
    }
    double sum = 0.0, dsum = 0.0;
    for (size_t i = 0; i < m->nc; i++) {
        if (m->lw[i] == -HUGE_VAL)
            continue;
        double t = exp(m->lw[i] + (2.0 * m->c[i] * x - m->c[i] * m->c[i]) / (2.0 * s2) - mx);
        sum += t;
        dsum += t * m->c[i] / s2;
    }
    if (deriv)
        *deriv = dsum / sum;
    return mx + log(sum);
}

/* The x with ln M(x) = y (M is increasing: every c_i >= 0 and one is > 0): bracketed around
 * the last level solved (the grid is walked in order, so it is close), then Newton steps from
 * the right (ln M is convex, so they never overshoot), bisection as the safeguard. */
static double mix_solve(const loss_model *m, double y)
{
    if (m->hint[0] == y)
        return m->hint[1];
    double x0 = isnan(m->hint[1]) ? 0.0 : m->hint[1], d;
    double f0 = mix_logm(m, x0, &d) - y;
    double step = d > 0.0 ? 2.0 * fabs(f0) / d + 1e-9 * (fabs(x0) + m->s) : 1.0;
    if (!(step < 1e300))
        step = 1.0;
    double lo = x0, hi = x0;
    if (f0 > 0.0) {
        for (int i = 0; i < 2000 && mix_logm(m, lo = x0 - step, NULL) > y; i++)
            step *= 2.0;
    } else {
        for (int i = 0; i < 2000 && mix_logm(m, hi = x0 + step, NULL) < y; i++)
            step *= 2.0;
    }
    double x = hi;
    for (int it = 0; it < 200; it++) {
        double f = mix_logm(m, x, &d) - y;
        if (f > 0.0)
            hi = x;
        else
            lo = x;
        double nx = d > 0.0 ? x - f / d : 0.5 * (lo + hi);
        if (!(nx > lo && nx < hi))
            nx = 0.5 * (lo + hi);
        if (fabs(nx - x) <= 1e-15 * (fabs(x) + 1e-300) ||
            hi - lo <= 1e-15 * (fabs(lo) + fabs(hi))) {
            x = nx;
            break;
        }
        x = nx;
    }
    m->hint[0] = y;
    m->hint[1] = x;
    return x;
}

/* remove: P = sum_i w_i N(c_i, s^2), Q = N(0, s^2), L = ln M(X), L > l <=> X > x_l;
 * add:    P = N(0, s^2), Q = the mixture, L = -ln M(X), L > l <=> X < x_{-l}. */
static void mixture_eval2(const loss_model *m, double l, int cdf, double *vp, double *vq)
{
    int remove = m->dir == PLD_REMOVE;
    double y = remove ? l : -l;
    /* below the infimum of ln M (the mass at c = 0): remove, L > l always; add, never */
    if (y <= m->q) {
        *vp = *vq = (remove != cdf) ? 1.0 : 0.0;
        return;
    }
    double x = mix_solve(m, y), s = m->s;
    int upper = remove != cdf; /* the wanted event is X > x */
    double t0 = upper ? dp_Q(x / s) : dp_Phi(x / s), mix = 0.0;
    for (size_t i = 0; i < m->nc; i++)
        mix += m->w[i] * (upper ? dp_Q((x - m->c[i]) / s) : dp_Phi((x - m->c[i]) / s));
    if (mix > 1.0)
        mix = 1.0;
    *vp = remove ? mix : t0;
    *vq = remove ? t0 : mix;
}

dpb_status pld_mixture_gaussian(double sigma, const double *c, const double *w, size_t n, int dir,
                                double h, pld_pmf *out)
{
    if (!(sigma > 0.0) || !isfinite(sigma) || bad_h(h) || n == 0)
        return DPB_EINVAL;
    double w0 = 0.0, cmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!(c[i] >= 0.0) || !isfinite(c[i]) || !(w[i] >= 0.0 && w[i] <= 1.0))
            return DPB_EINVAL;
        if (c[i] == 0.0)
            w0 += w[i];
        else if (w[i] > 0.0 && c[i] > cmax)
            cmax = c[i];
    }
    if (cmax == 0.0)
        return DPB_EINVAL; /* no shift: the caller composes the identity */
    double *lw = malloc(n * sizeof *lw), hint[2] = {NAN, NAN};
    if (lw == NULL)
        return DPB_ENOMEM;
    for (size_t i = 0; i < n; i++)
        lw[i] = w[i] > 0.0 ? log(w[i]) : -HUGE_VAL;
    /* q carries ln(w0), the infimum of ln M */
    loss_model m = {4,  dir, w0 > 0.0 ? log(w0) : -HUGE_VAL, sigma, -HUGE_VAL, HUGE_VAL, c, w, n,
                    lw, hint};
    if (dir == PLD_REMOVE)
        m.lmin = m.q;
    else
        m.lmax = -m.q;
    dpb_status st = discretise(&m, h, out);
    free(lw);
    return st;
}
