/*
 * pld_leaf.c - the leaves: mechanisms discretised into privacy-loss distributions.
 *
 * Leaves are discretised by "connect the dots" (Doroshenko, Ghazi, Kamath, Kumar,
 * Manurangsi 2022): knots at multiples of h; each interval's mass split between its two
 * knots by linear interpolation in likelihood-ratio space. The discrete delta(eps) equals
 * the true one at the knots and lies above it between them, for every eps (also negative),
 * so the discrete pair dominates the true pair and stays an upper bound under composition.
 * Here: the Gaussian and Laplace mechanisms, Poisson-sampled (kept across requests), the
 * mixture of Gaussians, (eps, delta), atoms, and mechanisms known by a privacy profile.
 * It calls pld.c (pld_int.h) and normal.c; no other pld_*.c file.
 */
#include "pld_int.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"
#include "normal.h"

/* ---- leaves: a loss model gives S(l) = P(L > l) and F(l) = P(L <= l) under P ----------- */

typedef struct {
    int kind; /* 0 gaussian, 1 laplace, 2 sampled gaussian, 3 sampled laplace, 4 mixture,
               * 5 sampled gaussian under replace-one (the antipodal pair) */
    int dir;
    double q, s; /* sampling rate; noise multiplier (sigma or b) */
    double lmin, lmax;
    const double *c, *w; /* mixture: sensitivities and probabilities (kind 4) */
    size_t nc;
    const double *lw; /* mixture: ln w_i (-inf for w_i = 0) */
    double *hint;     /* mixture: the last level solved, {y, x} (the grid is walked in order) */
} loss_model;

static void mixture_eval2(const loss_model *m, double l, int cdf, double *vp, double *vq);
static void replace_eval2(const loss_model *m, double l, int cdf, double *vp, double *vq);
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
    case 5:
        replace_eval2(m, l, cdf, vp, vq);
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
    st = pld_pmf_alloc(out, h, klo, (size_t)(khi - klo + 1));
    if (st != DPB_OK)
        return st;
    double l0 = (double)klo * h;
    tails t;
    model_eval2(m, l0, 0, &t.Sp, &t.Sq);
    model_eval2(m, l0, 1, &t.Fp, &t.Fq);
    out->p[0] = t.Fp; /* all P-mass at or below the lowest knot: rounded up onto it */
    /* x_i = e^{l_i} and 1 - e^{-h} enter the split rounded down (the upper knot's share
     * (mp - x_i mq)/(1 - e^{-h}) rounded up): exp(h) rounded to nearest is up to 4e-17 above
     * e^h at h = 1e-4, which compounded over 255 steps of the recursion had moved mass down
     * (optimistic: a Poisson-sampled leaf's delta(0) 4e-15 below the exact value) */
    double eh = exp(h) * (1.0 - 4.0 * DBL_EPSILON), xi = 0.0,
           omh = -expm1(-h) * (1.0 - 2.0 * DBL_EPSILON);
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
            /* x_i = e^{l_i} by recursion, recomputed every 256 knots (each below e^{l_i}) */
            xi = (i & 255) == 0 || !(xi > 0.0)
                     ? (li < 700.0 ? exp(li) * (1.0 - 2.0 * DBL_EPSILON) : HUGE_VAL)
                     : xi * eh;
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

/* ---- Poisson sampling of a Gaussian under replace-one ----------------------------------------
 * The pair P = (1-q)N(0,s^2) + qN(-1,s^2), Q = (1-q)N(0,s^2) + qN(1,s^2): a worst-case pair of
 * the Poisson-sampled Gaussian mechanism under substitution (Lebeda, Regehr, Kamath, Steinke,
 * SaTML 2025, Proposition 13; dp_accounting's REPLACE pair). Its loss L(x) = ln(P(x)/Q(x)) is
 * odd and decreasing in x, so L > l <=> X < x_l, where (with u = e^{x/s^2}, c = q e^{-1/(2s^2)}
 * / (1-q), 1 + c/u = e^l (1 + c u)) x_l = s^2 (asinh(-a sinh(l/2)) - l/2), a = 1/c; the pair
 * is symmetric (x -> -x swaps P and Q), so one direction serves both. */

/* asinh(e^ly) without overflow: asinh(y) = ln(2y) + O(y^-2) past y = e^20. */
static double asinh_exp(double ly)
{
    return ly > 20.0 ? ly + M_LN2 : asinh(exp(ly));
}

/* ln sinh(t), t > 0. */
static double log_sinh(double t)
{
    return t < 20.0 ? log(sinh(t)) : t - M_LN2 + log1p(-exp(-2.0 * t));
}

static double replace_x(const loss_model *m, double l)
{
    double s2 = m->s * m->s;
    if (l == 0.0)
        return 0.0;
    double la = 0.5 / s2 + log1p(-m->q) - log(m->q); /* ln a */
    double w = asinh_exp(la + log_sinh(0.5 * fabs(l)));
    return s2 * ((l > 0.0 ? -w : w) - 0.5 * l);
}

static void replace_eval2(const loss_model *m, double l, int cdf, double *vp, double *vq)
{
    double s = m->s, q = m->q, x = replace_x(m, l);
    /* S(l) = P(X < x_l): Phi; F(l) = P(X >= x_l): Q (each tail without cancellation) */
    double z0 = x / s, zp = (x + 1.0) / s, zq = (x - 1.0) / s;
    if (cdf) {
        *vp = (1.0 - q) * dp_Q(z0) + q * dp_Q(zp);
        *vq = (1.0 - q) * dp_Q(z0) + q * dp_Q(zq);
    } else {
        *vp = (1.0 - q) * dp_Phi(z0) + q * dp_Phi(zp);
        *vq = (1.0 - q) * dp_Phi(z0) + q * dp_Phi(zq);
    }
}

dpb_status pld_sampled_gaussian_replace(double q, double sigma, double h, pld_pmf *out)
{
    if (!(q > 0.0 && q < 1.0) || !(sigma > 0.0) || !isfinite(sigma) || bad_h(h))
        return DPB_EINVAL;
    loss_model m = {5, PLD_REMOVE, q, sigma, -HUGE_VAL, HUGE_VAL, NULL, NULL, 0, NULL, NULL};
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

/* A leaf of one point at loss 0 holding p0, inf at +infinity, and gauss_mu mu. */
static dpb_status one_point(double h, double p0, double inf, double mu, pld_pmf *out)
{
    if (bad_h(h))
        return DPB_EINVAL;
    dpb_status st = pld_pmf_alloc(out, h, 0, 1);
    if (st == DPB_OK) {
        out->p[0] = p0;
        out->inf_mass = inf;
        out->gauss_mu = mu;
    }
    return st;
}

dpb_status pld_gaussian_exact(double mu, double h, pld_pmf *out)
{
    if (!(mu > 0.0) || !isfinite(mu))
        return DPB_EINVAL;
    return one_point(h, 0.0, 0.0, mu, out);
}

dpb_status pld_identity(double h, pld_pmf *out)
{
    return one_point(h, 1.0, 0.0, 0.0, out);
}

dpb_status pld_non_private(double h, pld_pmf *out)
{
    return one_point(h, 0.0, 1.0, 0.0, out);
}

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
    st = pld_pmf_alloc(out, h, -K, n);
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
    pld_trim_tails(out);
    st = DPB_OK;
out:
    free(g);
    free(x);
    free(hull);
    return st;
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
    dpb_status st = pld_pmf_alloc(out, h, k0, (size_t)((int64_t)kh - k0 + 1));
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
