/*
 * spend_eval.c - the spend of a multiset of charged events per accounting mode (spend.h):
 * rdp (the improved conversion of the summed RDP curves, less the total-variation part),
 * the rdp and gdp filters' levels, and pld (the rdp value when it is within the budget, else
 * the smaller of it and the pessimistic PLD value); the background refinement, the
 * prefetch of PLD values on several threads, and the accountant a stored spend is.
 *
 * May call: spend_cache.c (keys, PLD values), spend_kept.c (kept compositions), dp/ (rdp,
 * normal, account), common/cancel.
 * Called by the ledger and by spend_memo.c; never calls spend_memo.c or spend.c.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/cancel.h"
#include "../dp/normal.h"
#include "ledger.h"
#include "spend_int.h"

/* The rdp_filter's orders (ledger.h), defined here beside the filter level that reads them. */
const double LEDGER_FILTER_ORDERS[LEDGER_FILTER_NORDERS] = {
    1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 63, 128, 256, 512, 1024};
/* their positions in RDP_DEFAULT_ORDERS (checked by the unit tests) */
const unsigned char LEDGER_FILTER_ORDER_INDEX[LEDGER_FILTER_NORDERS] = {
    4, 9, 14, 19, 29, 39, 49, 69, 89, 100, 104, 108, 112, 120, 128, 136, 151, 152, 153, 154, 155};

/* rdp conversion constants for one delta (spend_rdp_convert) */
struct conv {
    double delta;
    double l1[RDP_NORDERS], q[RDP_NORDERS];
    int valid;
};

/* best, the least eps over the finite orders of the summed curves r, with the order
 * infinity's sum (eps <= D_inf at every delta, as dp_rdp_lazy takes it) when smaller; 0 when
 * <= 0, else rounded up. */
static double with_order_infinity(const double *r, double best)
{
    double dinf = dp_round_up(r[RDP_NORDERS], RDP_REL_ROUND);
    if (isfinite(dinf) && dinf < best)
        best = dinf;
    return best <= 0.0 ? 0.0 : dp_round_up(best, RDP_REL_ROUND);
}

/* min over orders of rdp_eps_at(a, r, delta), bit for bit the same arithmetic, with the
 * per-order logarithms computed once per delta: eps = (r + log1p(-1/a)) - log(delta a)/(a-1),
 * and 0 where delta^2 + expm1(-r) > 0 (only possible for r < 2 delta^2). Rounded up. */
double spend_rdp_convert(const double *r, double delta)
{
    /* the constants for the last 4 deltas this thread converted at (no lock, no copy) */
    static _Thread_local struct conv cvs[4];
    static _Thread_local unsigned next;
    struct conv *cv = NULL;
    for (unsigned i = 0; i < 4 && cv == NULL; i++)
        if (cvs[i].valid && cvs[i].delta == delta)
            cv = &cvs[i];
    if (cv == NULL) {
        cv = &cvs[next++ % 4];
        for (size_t k = 0; k < RDP_NORDERS; k++) {
            double a = RDP_DEFAULT_ORDERS[k];
            cv->l1[k] = log1p(-1.0 / a);
            cv->q[k] = log(delta * a) / (a - 1.0);
        }
        cv->delta = delta;
        cv->valid = 1;
    }
    const double *l1 = cv->l1, *q = cv->q;
    double best = HUGE_VAL;
    for (size_t k = 0; k < RDP_NORDERS; k++) {
        double a = RDP_DEFAULT_ORDERS[k], rk = r[k] + r[RDP_LATE + k], e;
        if (isinf(rk))
            e = HUGE_VAL;
        else if (rk < 2.0 * delta * delta + 1e-300 && delta * delta + expm1(-rk) > 0.0)
            e = 0.0;
        else if (a > 1.01)
            e = rk + l1[k] - q[k];
        else
            e = HUGE_VAL;
        if (e < best)
            best = e;
    }
    return with_order_infinity(r, best);
}

/* The rdp_filter's level (docs/FILTERS.md): min over the k committed orders a of the improved
 * conversion eps_a(r_a, delta / k) = r_a + log1p(-1/a) - log(a delta / k) / (a - 1) (the
 * union bound gives each order delta / k), and the order infinity's sum S_inf itself (the
 * privacy loss never exceeds it, so it needs no share of delta: the proof in
 * docs/FILTERS.md, third fact), and nothing else: no total-variation shortcut, no other
 * order. A round is admitted
 * iff the level after it is <= eps, i.e. iff some order still has r_a <= B_a or S_inf <= eps.
 * Rounded up. */
double spend_filter_level(const double *r, double delta)
{
    double dk = delta / (double)LEDGER_FILTER_NORDERS, best = HUGE_VAL;
    for (size_t i = 0; i < LEDGER_FILTER_NORDERS; i++) {
        size_t k = LEDGER_FILTER_ORDER_INDEX[i];
        double a = LEDGER_FILTER_ORDERS[i], rk = r[k] + r[RDP_LATE + k];
        if (!isfinite(rk))
            continue;
        double e = rk + log1p(-1.0 / a) - log(dk * a) / (a - 1.0);
        if (e < best)
            best = e;
    }
    return with_order_infinity(r, best);
}

/* The rdp accountant's eps of the composition at delta: +inf when an event has no RDP curve. */
static double rdp_of(const spend_term *t, size_t m, double delta)
{
    double r[RDP_CURVE_LEN] = {0};
    for (size_t i = 0; i < m; i++) {
        const spend_class *c = &t[i].ev->cls;
        if (c->kind != SPEND_RDP)
            return HUGE_VAL;
        spend_add_curve(r, c->rdp, t[i].count);
    }
    return m == 0 ? 0.0 : spend_rdp_convert(r, delta < 1.0 ? delta : 0.999999999);
}

static int cmp_term(const void *a, const void *b)
{
    uint32_t x = ((const spend_term *)a)->ev->sid, y = ((const spend_term *)b)->ev->sid;
    return x < y ? -1 : x > y;
}

void spend_eval(spend_engine *g, int mode, double eps, double delta, dp_relation rel, spend_term *t,
                size_t m, spend_result *out)
{
    spend_eval_x(g, mode, eps, delta, rel, t, m, NULL, 0, out);
}

void spend_eval_x(spend_engine *g, int mode, double eps, double delta, dp_relation rel,
                  spend_term *t, size_t m, const spend_event *x, uint64_t nx, spend_result *out)
{
    memset(out, 0, sizeof *out);
    out->accountant = -1;
    out->spent = HUGE_VAL;
    for (size_t i = 0; i < m; i++)
        if (t[i].ev->cls.kind == SPEND_UNCERTIFIABLE) {
            out->uncertified = 1;
            return;
        }
    /* the registration order: a client's history reads in the order its events first came */
    qsort(t, m, sizeof *t, cmp_term);
    if (mode == LEDGER_RDP) {
        double r[RDP_CURVE_LEN] = {0}, tv = 0.0;
        int any_rdp = 0;
        for (size_t i = 0; i < m; i++) {
            const spend_class *v = &t[i].ev->cls;
            if (v->kind == SPEND_RDP) {
                any_rdp = 1;
                spend_add_curve(r, v->rdp, t[i].count);
            } else if (v->kind == SPEND_TV) {
                tv += (double)t[i].count * v->tvlog;
            } else {
                out->unsupported = 1;
                return;
            }
        }
        out->dtv = tv < 0.0 ? dp_round_up(-expm1(tv), 1e-14) : 0.0;
        double d = delta - out->dtv;
        if (!(d > 0.0))
            return;
        out->accountant = out->dtv > 0.0 ? -1 : DP_ACCT_RDP;
        out->spent = any_rdp ? spend_rdp_convert(r, d < 1.0 ? d : 0.999999999) : 0.0;
        return;
    }
    if (mode == LEDGER_RDP_FILTER || mode == LEDGER_GDP_FILTER) {
        double r[RDP_CURVE_LEN] = {0}, mu2 = 0.0;
        for (size_t i = 0; i < m; i++) {
            const spend_class *v = &t[i].ev->cls;
            double cnt = (double)t[i].count;
            if (mode == LEDGER_RDP_FILTER ? v->kind != SPEND_RDP : !v->gdp_ok) {
                out->unsupported = 1;
                return;
            }
            if (mode == LEDGER_GDP_FILTER)
                mu2 += cnt * v->mu2;
            else
                spend_add_curve(r, v->rdp, t[i].count);
        }
        if (mode == LEDGER_RDP_FILTER) {
            out->spent = m == 0 ? 0.0 : spend_filter_level(r, delta);
            return;
        }
        double e = HUGE_VAL;
        if (mu2 == 0.0)
            e = 0.0;
        else if (isfinite(mu2) &&
                 dp_gdp_epsilon(sqrt(dp_round_up(mu2, 1e-12)), delta, &e) != DPB_OK)
            e = HUGE_VAL;
        out->spent = e;
        return;
    }
    /* pld: the rdp accountant's value decides when it is within the budget; the PLD is
     * computed only when it is not (near or past the budget), and the smaller is the spend */
    if (m == 0) {
        out->spent = 0.0;
        out->accountant = DP_ACCT_PLD;
        return;
    }
    atomic_fetch_add(&g->rdp_summed, 1);
    spend_pld_decide(g, eps, delta, rel, t, m, rdp_of(t, m, delta),
                     spend_cache_key(delta, rel, t, m), x, nx, out);
}

/* A pld client's spend (out zeroed but for accountant -1, spent +inf) from the rdp value r of
 * the sorted terms t[0..m) (m > 0) whose cache key is key. */
/* spend_decide_only's flag, per thread; and whether this thread computes ahead of a round
 * (the prefetch, the refinement): then a composition is never a client's own history */
static _Thread_local int decide_only, ahead;

void spend_decide_only(int on)
{
    decide_only = on;
}

void spend_pld_decide(spend_engine *g, double eps, double delta, dp_relation rel,
                      const spend_term *t, size_t m, double r, uint64_t key, const spend_event *x,
                      uint64_t nx, spend_result *out)
{
    double p;
    if (r <= eps) {
        out->spent = r;
        out->accountant = DP_ACCT_RDP;
        /* the PLD value when the cache holds it (spend_refine put it there) or the same
         * composition is kept (another client's, or the client's own, computed for its
         * status's test: then kept as its history, which its next charge and eligibility's
         * probes extend): never computed here, so a round within budget costs what an rdp
         * round does */
        if ((spend_cache_get(&g->cache, key, delta, rel, t, m, &p, 0) ||
             spend_kept_peek(&g->kept, t, m, delta, rel, x == NULL && !ahead, &p)) &&
            p < r) {
            out->spent = p;
            out->accountant = DP_ACCT_PLD;
            out->pld_computed = 1;
        }
        return;
    }
    /* the compute API's value when the cache holds it (spend_refine's), else the kept
     * composition's (one composition from the client's kept one), else from scratch */
    int adm;
    if (spend_cache_get(&g->cache, key, delta, rel, t, m, &p, 0))
        ;
    else if (decide_only && spend_kept_admits(&g->kept, t, m, eps, delta, rel, x, nx, &adm))
        p = adm ? eps : HUGE_VAL; /* eps bounds the value when admitted; +inf always does */
    else if (!spend_kept_eps(&g->kept, t, m, delta, rel, x, nx, x == NULL && !ahead, &p))
        p = spend_pld_of(&g->cache, key, t, m, delta, rel);
    out->pld_computed = 1;
    if (p <= r) {
        out->spent = p;
        out->accountant = DP_ACCT_PLD;
    } else if (isfinite(r)) {
        out->spent = r;
        out->accountant = DP_ACCT_RDP;
    } else {
        out->spent = HUGE_VAL; /* nothing certified: spend infinite, named by neither */
    }
}

void spend_refine(spend_engine *g, double eps, double delta, dp_relation rel, spend_term *t,
                  size_t m, const int *stop, spend_result *out)
{
    dpb_cancel cn = {0.0, stop};
    const dpb_cancel *prev = dpb_cancel_enter(&cn);
    ahead = 1;
    spend_eval(g, LEDGER_PLD, eps, delta, rel, t, m, out);
    ahead = 0;
    double r = out->spent;
    if (out->accountant == DP_ACCT_RDP && !out->pld_computed) { /* within budget: r decided */
        double p = spend_pld_of(&g->cache, spend_cache_key(delta, rel, t, m), t, m, delta, rel);
        out->pld_computed = 1;
        if (p < r) {
            out->spent = p;
            out->accountant = DP_ACCT_PLD;
        }
    }
    if (dpb_cancelled()) { /* abandoned: no answer (pld_of kept nothing) */
        out->accountant = -1;
        out->spent = HUGE_VAL;
        out->pld_computed = 0;
    }
    dpb_cancel_leave(prev);
}

typedef struct {
    spend_engine *g;
    spend_candidate *c;
    const size_t *need;
    size_t n;
    atomic_size_t next;
} prefetch_job;

static void *prefetch_main(void *arg)
{
    prefetch_job *j = arg;
    ahead = 1; /* reset by spend_prefetch for the caller's thread */
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n)
            return NULL;
        spend_candidate *c = &j->c[j->need[i]];
        spend_result r;
        if (!c->rdp_known) {
            spend_eval(j->g, LEDGER_PLD, c->eps, c->delta, c->rel, c->t, c->m, &r);
            continue;
        }
        /* spend_eval's pld branch with the rdp value given (a memo covered the terms, so
         * every one has an RDP curve: none is uncertifiable); the terms are sorted */
        memset(&r, 0, sizeof r);
        r.accountant = -1;
        r.spent = HUGE_VAL;
        spend_pld_decide(j->g, c->eps, c->delta, c->rel, c->t, c->m, c->rdp,
                         spend_cache_key(c->delta, c->rel, c->t, c->m), NULL, 0, &r);
    }
}

void spend_prefetch(spend_engine *g, spend_candidate *c, size_t n)
{
    size_t *need = malloc((n ? n : 1) * sizeof *need), nn = 0;
    if (need == NULL)
        return;
    for (size_t i = 0; i < n; i++) { /* the cheap test spend_eval makes first */
        qsort(c[i].t, c[i].m, sizeof *c[i].t, cmp_term);
        if (c[i].m == 0 || isnan(c[i].rdp))
            c[i].rdp_known = 0;
        if (!c[i].rdp_known)
            atomic_fetch_add(&g->rdp_summed, 1);
        if (!((c[i].rdp_known ? c[i].rdp : rdp_of(c[i].t, c[i].m, c[i].delta)) <= c[i].eps))
            need[nn++] = i;
    }
    prefetch_job j = {g, c, need, nn, 0};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    size_t extra = nn > 1 ? nn - 1 : 0;
    if (extra > SPEND_PREFETCH_THREADS)
        extra = SPEND_PREFETCH_THREADS;
    if (ncpu > 0 && extra > (size_t)ncpu - 1)
        extra = (size_t)ncpu - 1;
    pthread_t th[SPEND_PREFETCH_THREADS];
    size_t started = 0;
    for (; started < extra; started++)
        if (pthread_create(&th[started], NULL, prefetch_main, &j) != 0)
            break;
    prefetch_main(&j); /* the caller's thread works too */
    ahead = 0;
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(need);
}

int spend_accountant_of(spend_engine *g, int mode, double eps, double delta, spend_term *t,
                        size_t m, double spent)
{
    (void)g;
    (void)eps;
    for (size_t i = 0; i < m; i++)
        if (t[i].ev->cls.kind == SPEND_UNCERTIFIABLE)
            return -1;
    if (mode == LEDGER_RDP) {
        for (size_t i = 0; i < m; i++)
            if (t[i].ev->cls.kind != SPEND_RDP)
                return -1; /* a total-variation part (or nothing certified) */
        return DP_ACCT_RDP;
    }
    if (mode != LEDGER_PLD || !isfinite(spent))
        return -1;
    qsort(t, m, sizeof *t, cmp_term);
    return m > 0 && rdp_of(t, m, delta) == spent ? DP_ACCT_RDP : DP_ACCT_PLD;
}
