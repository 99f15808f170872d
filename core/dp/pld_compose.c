/*
 * pld_compose.c - composition: two distributions (pld_compose) and many at once in the
 * Fourier domain (pld_compose_many), plain, in long double, or through an exponential tilt
 * (docs/MATH.md section 6), as the caller's pld_ctx says; and pld_side, which runs one
 * direction of a composition on a second thread. It calls pld_transform.c (the transforms),
 * pld_window.c (the Chernoff windows), pld_fft.c (sizes, work blocks, pld_convolve),
 * pld_leaf.c (pld_identity) and pld.c.
 */
#include "pld_int.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"
#include "pld_fft.h"
#include "pld_transform.h"
#include "pld_window.h"

static void clamp_negative(double *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0.0)
            p[i] = 0.0;
}

/* c = a * b (length na + nb - 1) summed directly, the longer input in the inner loop, four
 * products at a time: the same products and sums as pld_convolve's direct branch in another
 * order (c_j still sums at most min(na, nb) products, so pld_convolve_roundoff_n(a, b, 0)
 * bounds it; no fused multiply-add: -std=c11 keeps contraction off). x86-64 builds also get
 * an AVX2 clone, chosen at load time (4.5 us for 1300 x 30 points against 16 us before). */
typedef double v4d __attribute__((vector_size(32)));
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                             \
    !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx2", "default")))
#endif
static void
convolve_direct_by_rows(const double *restrict a, size_t na, const double *restrict b, size_t nb,
                        double *restrict c)
{
    if (na < nb) {
        const double *x = a;
        size_t nx = na;
        a = b;
        na = nb;
        b = x;
        nb = nx;
    }
    memset(c, 0, (na + nb - 1) * sizeof *c);
    for (size_t j = 0; j < nb; j++) {
        double bj = b[j];
        v4d bb = {bj, bj, bj, bj};
        double *cj = c + j;
        size_t i = 0;
        for (; i + 4 <= na; i += 4) {
            v4d av, cv;
            memcpy(&av, a + i, sizeof av);
            memcpy(&cv, cj + i, sizeof cv);
            cv += bb * av;
            memcpy(cj + i, &cv, sizeof cv);
        }
        for (; i < na; i++)
            cj[i] += bj * a[i];
    }
}

/* pld_compose: summed directly or by FFT as pld_convolve picks by size, or (by_cost) as the
 * operations count: directly where they are fewer than three transforms', else by FFT on the
 * ladder's sizes with the cached plans */
static dpb_status compose_two(const pld_pmf *a, const pld_pmf *b, pld_pmf *out, int by_cost)
{
    if (a->h != b->h || a->gauss_mu > 0.0 || b->gauss_mu > 0.0)
        return DPB_EINVAL;
    size_t n = a->n + b->n - 1, N = 0;
    dpb_status st = pld_pmf_alloc(out, a->h, a->lo + b->lo, n);
    if (st != DPB_OK)
        return st;
    double nl = (double)pld_ladder_size(n);
    if (!by_cost)
        st = pld_convolve(a->p, a->n, b->p, b->n, out->p);
    else if ((double)a->n * (double)b->n > 8.0 * nl * log2(nl))
        st = pld_convolve_ladder(a->p, a->n, b->p, b->n, out->p, &N);
    else
        convolve_direct_by_rows(a->p, a->n, b->p, b->n, out->p);
    if (st != DPB_OK) {
        pld_free(out);
        return st;
    }
    clamp_negative(out->p, n); /* each clamped value only moves closer to the exact one */
    out->roundoff = by_cost ? pld_convolve_roundoff_n(a, b, N) : pld_convolve_roundoff(a, b);
    if (!(out->roundoff <= 1.0))
        out->roundoff = 1.0;
    out->inf_mass = 1.0 - (1.0 - a->inf_mass) * (1.0 - b->inf_mass);
    out->steps = a->steps + b->steps;
    pld_trim_tails(out);
    return DPB_OK;
}

dpb_status pld_compose(const pld_pmf *a, const pld_pmf *b, pld_pmf *out)
{
    return compose_two(a, b, out, 0);
}

dpb_status pld_compose_fft(const pld_pmf *a, const pld_pmf *b, pld_pmf *out)
{
    return compose_two(a, b, out, 1);
}

/* ---- the tilted composition (pld_ctx.tilt; docs/MATH.md section 6) -- -------------------------
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
    const dpb_cancel *prev = dpb_cancel_enter(s->cancel);
    s->fn(s->arg);
    dpb_cancel_leave(prev);
    return NULL;
}

void pld_side_run(pld_side *s, void (*fn)(void *), void *arg)
{
    s->fn = fn;
    s->arg = arg;
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
    pld_golden gc = {rough, k, 1.0, 0.0, 0.0, log(delta), 0.0, 1};
    double th = 0.0, aim = pld_golden_min(&gc, &th);
    if (isfinite(aim) && th > 0.0) {
        double d = 1e-3 * th, f0 = pld_term_F(rough, k, th);
        double var =
            (pld_term_F(rough, k, th + d) - 2.0 * f0 + pld_term_F(rough, k, th - d)) / (d * d);
        double pre = th * (1.0 + th) * sqrt(2.0 * M_PI * var);
        if (pre > 1.0 && isfinite(pre)) {
            gc.ltail = log(delta) + log(pre);
            double a2 = pld_golden_min(&gc, &th);
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
    pld_golden gc = {win, k, 0.0, 0.0, 0.0, 0.0, aim, 0};
    double th = 0.0, ltail = log(TILT_TAIL);
    double gmin = pld_golden_min(&gc, &th);
    int ok = th > 0x1p-11 && isfinite(th) && isfinite(gmin);
    if (ok) {
        /* slack > 0: a smaller theta whose Chernoff exponent at aim is slack above the least:
         * the bound there grows by e^slack (from about 1e-10 of delta), the tilted law's upper
         * tail, which sets the window, shrinks (G is convex: bisect left of the minimum) */
        double lo = th / 16.0, hi = th;
        for (int it = 0; it < (slack > 0.0 ? 30 : 0); it++) {
            double mid = 0.5 * (lo + hi), g = pld_golden_eval(&gc, log(mid));
            if (g > gmin + slack)
                lo = mid;
            else
                hi = mid;
        }
        th = hi;
        double f0 = pld_term_F(win, k, th);
        /* the window's levels in full steps: they set the transform's size */
        pld_golden up = {win, k, 1.0, th, f0, ltail, 0.0, 0},
                   dn = {win, k, -1.0, th, f0, ltail, 0.0, 0};
        *ut = pld_golden_min(&up, NULL);
        *vt = -pld_golden_min(&dn, NULL);
        *theta = th;
        ok = isfinite(f0);
    }
    return ok;
}

/* The terms' composed index range [*nat_lo, *nat_hi] and the log of its finite mass
 * (*log_fin, and *log_fin_err a bound on its rounding). 0 where the tilt does not apply: an
 * input composed already (its errors would be tilted too) or with no finite mass. */
static int tilt_natural(const pld_term *terms, size_t k, double *nat_lo, double *nat_hi,
                        double *log_fin, double *log_fin_err)
{
    const double u = DBL_EPSILON;
    *nat_lo = *nat_hi = *log_fin = *log_fin_err = 0.0;
    for (size_t i = 0; i < k; i++) {
        const pld_pmf *d = terms[i].d;
        double c = (double)terms[i].count, lf = log1p(-(d->inf_mass < 1.0 ? d->inf_mass : 1.0));
        if (d->roundoff != 0.0 || d->tilt.theta != 0.0 || !(lf > -HUGE_VAL))
            return 0;
        *nat_lo += c * (double)d->lo;
        *nat_hi += c * (double)(d->lo + (int64_t)d->n - 1);
        *log_fin += c * lf;
        *log_fin_err += 4.0 * u * (c * fabs(lf) + 1.0);
    }
    return 1;
}

/* A tilted composition whose finite mass (but PLD_TAIL, bound_up) lies at or below the floor
 * cut h: all of it onto the floor, one point, no round-off. */
static dpb_status tilt_all_below(const pld_term *terms, size_t k, double h, double cut,
                                 double log_fin, double log_fin_err, double bound_up, pld_pmf *out)
{
    dpb_status st = pld_pmf_alloc(out, h, (int64_t)cut, 1);
    if (st == DPB_OK) {
        double fin = exp(log_fin + log_fin_err);
        out->p[0] = fin < 1.0 ? fin : 1.0;
        out->inf_mass = fmin(1.0, -expm1(log_fin) + bound_up);
        out->floor = cut * h;
        out->steps = terms_steps(terms, k);
    }
    return st;
}

/* pld_compose_many through a tilt at.aim kept above l0 = at.floor; *done = 0 (and nothing
 * computed) where it does not apply. win: the terms' copies for window searches (pld_coarse_make),
 * for the tilt and its window; the direct estimate takes rough ones. */
static dpb_status compose_tilted_in(const pld_term *terms, const pld_term *win, size_t k,
                                    pld_tilt_at at, pld_pmf *out, int *done)
{
    *done = 0;
    if (!isfinite(at.floor)) { /* direct: the floor and aim from rough copies */
        pld_coarse_set cs;
        pld_coarse_make(terms, k, 1, 1, &cs);
        int ok = tilt_estimate(cs.use, k, at.delta, &at);
        pld_coarse_free(&cs, k);
        if (!ok)
            return DPB_OK;
    }
    double l0 = at.floor, aim = at.aim > l0 ? at.aim : l0;
    const double u = DBL_EPSILON;
    double h = terms[0].d->h, nat_lo, nat_hi, log_fin, log_fin_err;
    if (!tilt_natural(terms, k, &nat_lo, &nat_hi, &log_fin, &log_fin_err))
        return DPB_OK;
    double ltail = log(PLD_TAIL), upl = pld_chernoff_level(terms, k, 1, ltail);
    if (!(nat_hi > nat_lo) || !isfinite(upl) || !(l0 > 0.0))
        return DPB_OK;
    double top = ceil(upl / h) < nat_hi ? ceil(upl / h) : nat_hi;
    double bound_up = ceil(upl / h) < nat_hi ? PLD_TAIL : 0.0;
    double cut = floor(l0 / h), theta = 0.0, ut = NAN, vt = NAN;
    if (!(cut > nat_lo))
        return DPB_OK;
    if (cut >= top) { /* all the finite mass (but PLD_TAIL) is at or below l0: onto it */
        *done = 1;
        return tilt_all_below(terms, k, h, cut, log_fin, log_fin_err, bound_up, out);
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
    size_t N = pld_ladder_size((size_t)(span + 1.0)), n_out = (size_t)(hi - cut + 1.0);
    /* the tilts' lm_i, their rounding rho_i (the exponent theta l - lm_i: theta l rounded
     * twice, the difference once; exp and the product within 2 u), the untilting's kap */
    double *lm = malloc(k * sizeof *lm), F = 0.0, Fabs = 0.0, lrho = 0.0;
    if (lm == NULL)
        return DPB_ENOMEM;
    for (size_t i = 0; i < k; i++) {
        const pld_pmf *d = terms[i].d;
        double c = (double)terms[i].count;
        lm[i] = pld_log_mgf(d, theta);
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
    double *buf = pld_scratch_get(N * sizeof *buf, &held);
    pld_fft_err fe = {1.0, 1.0};
    dpb_status st =
        buf == NULL ? DPB_ENOMEM : pld_transform_double(terms, k, N, buf, theta, lm, &fe);
    free(lm);
    if (st != DPB_OK || (st = pld_pmf_alloc(out, h, (int64_t)cut, n_out)) != DPB_OK)
        goto fail;
    /* scale: 1 / ((1 - kap)(1 - rho)), and the product's own rounding */
    double scale = (1.0 + 2.0 * u) / ((1.0 - kap) * (1.0 - rho_all));
    int64_t pos = pld_circular_pos(terms, k, (int64_t)cut, N);
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
    /* a_m = err_m e^{F - theta m h} scale (1 + kap): the weight as pld_tilt_roundoff sums it, the
     * geometric sums' own rounding inside the last factor */
    out->tilt = (pld_tilt_err){theta,      F,     scale * (1.0 + 8.0 * kap + 1e-12) * (1.0 + 1e-6),
                               fe.ept,     fe.e2, (int64_t)cut,
                               (int64_t)hi};
    out->roundoff = pld_tilt_roundoff(&out->tilt, h, -HUGE_VAL);
    out->floor = cut * h;
    out->steps = terms_steps(terms, k);
    pld_trim_tails(out);
fail:
    pld_scratch_put(buf, held);
    return st;
}

static dpb_status compose_tilted(const pld_term *terms, size_t k, pld_tilt_at at, pld_pmf *out,
                                 int *done)
{
    *done = 0;
    if (!isfinite(at.floor) && !pld_tilt_direct(terms_steps(terms, k), at.delta))
        return DPB_OK; /* direct, and the double bound will do */
    pld_coarse_set cs;
    pld_coarse_make(terms, k, 1, 0, &cs);
    dpb_status st = compose_tilted_in(terms, cs.use, k, at, out, done);
    pld_coarse_free(&cs, k);
    return st;
}

/*
 * All terms at once in the Fourier domain: one forward FFT per term on the final size N,
 * the product of the powers, one inverse FFT (in double, or in long double inside
 * cx->ext). The composed index c sits at position
 * (c - sum_i count_i lo_i) mod N (a term wider than N is folded modulo N first, which the
 * circular product does anyway). The window [w_lo, w_hi] is the Chernoff window of the
 * whole composition; mass outside it aliases into it: the part from above (at most
 * PLD_TAIL) goes to +infinity, the part from below lands higher than it belongs, which only
 * overstates losses (its bound is added to +infinity too, as the per-piece code did).
 */
dpb_status pld_compose_many_ctx(const pld_ctx *cx, const pld_term *terms, size_t k, pld_pmf *out)
{
    if (k == 0)
        return DPB_EINVAL;
    for (size_t i = 0; i < k; i++)
        if (terms[i].d->h != terms[0].d->h || terms[i].count == 0 || terms[i].d->gauss_mu > 0.0)
            return DPB_EINVAL;
    static const pld_ctx plain = {{NAN, NAN, 0.0}, 0};
    if (cx == NULL)
        cx = &plain;
    if (isfinite(cx->tilt.floor) || cx->tilt.delta > 0.0) {
        int done;
        dpb_status st = compose_tilted(terms, k, cx->tilt, out, &done);
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
        double u = pld_chernoff_level(terms, k, 1, ltail),
               v = pld_chernoff_level(terms, k, 0, ltail);
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
    size_t N = pld_ladder_size(n_out);
    if (N > 2 * PLD_MAX_POINTS)
        return DPB_ELIMIT;
    size_t held = 0;
    double *buf = pld_scratch_get(N * sizeof *buf, &held);
    if (buf == NULL)
        return DPB_ENOMEM;
    pld_fft_err fe = {1.0, 1.0};
    dpb_status st = cx->ext ? pld_transform_ext(terms, k, N, buf, &fe)
                            : pld_transform_double(terms, k, N, buf, 0.0, NULL, &fe);
    if (st != DPB_OK || (st = pld_pmf_alloc(out, h, (int64_t)w_lo, n_out)) != DPB_OK)
        goto fail;
    out->roundoff = expm1(log1p(pld_window_roundoff(fe, n_out)) + log_in) * (1.0 + 1e-6);
    if (!(out->roundoff <= 1.0)) /* also NaN: certify nothing rather than something */
        out->roundoff = 1.0;
    int64_t pos = pld_circular_pos(terms, k, (int64_t)w_lo, N);
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
    pld_trim_tails(out);
fail:
    pld_scratch_put(buf, held);
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

dpb_status pld_compose_many(const pld_term *terms, size_t k, pld_pmf *out)
{
    return pld_compose_many_ctx(NULL, terms, k, out);
}
