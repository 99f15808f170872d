/*
 * spend.c - the spend of a multiset of charged events (see spend.h): the event registry, the
 * per-mode computations, and the cache of PLD values.
 *
 * Locks: one mutex for the registry and the rdp conversion constants, one for the cache;
 * neither is held while an accountant runs.
 */
#include "spend.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/cancel.h"
#include "../dp/normal.h"
#include "../dp/rdp.h"
#include "fnv.h"
#include "ledger.h"

struct spend_event {
    uint32_t sid; /* registration order; never reused */
    uint32_t refs;
    uint64_t hash;
    dp_relation rel;
    unsigned char *bytes;
    size_t nbytes;
    dp_event *ev;
    spend_class cls;
    double *rdp;
    char why[200];
    spend_event *next; /* hash chain */
};

/* A cached PLD value: the pld accountant's eps for (relation, delta, multiset). */
typedef struct centry {
    struct centry *next, *lru_prev, *lru_next;
    uint64_t key;
    double delta;
    uint8_t rel;
    double pld; /* +inf: none certified (or the accountant failed) */
    size_t m, bytes;
    struct {
        uint32_t sid;
        uint64_t count;
    } t[]; /* sorted by sid */
} centry;

/* rdp conversion constants for one delta (rdp_convert) */
struct conv {
    double delta;
    double l1[RDP_NORDERS], q[RDP_NORDERS];
    int valid;
};

struct spend_engine {
    pthread_mutex_t mu; /* the registry */
    spend_event **reg;
    size_t reg_cap, reg_n;
    uint32_t next_sid;
    pthread_mutex_t cmu; /* the cache */
    centry **cb;
    size_t cb_cap, c_bytes, c_cap, c_n;
    centry *lru_head, *lru_tail; /* most recently used first */
    uint64_t hits, misses, plds;
};

spend_engine *spend_engine_new(size_t cache_bytes)
{
    spend_engine *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->reg_cap = 256;
    g->cb_cap = 4096;
    g->reg = calloc(g->reg_cap, sizeof *g->reg);
    g->cb = calloc(g->cb_cap, sizeof *g->cb);
    if (g->reg == NULL || g->cb == NULL) {
        free(g->reg);
        free(g->cb);
        free(g);
        return NULL;
    }
    g->c_cap = cache_bytes ? cache_bytes : SPEND_CACHE_BYTES;
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->cmu, NULL);
    return g;
}

static void event_free(spend_event *e)
{
    dp_event_free(e->ev);
    free(e->bytes);
    free(e->rdp);
    free(e);
}

void spend_engine_free(spend_engine *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->reg_cap; i++)
        for (spend_event *e = g->reg[i], *n; e; e = n) {
            n = e->next;
            event_free(e);
        }
    for (centry *c = g->lru_head, *n; c; c = n) {
        n = c->lru_next;
        free(c);
    }
    free(g->reg);
    free(g->cb);
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->cmu);
    free(g);
}

/* ---- the registry -------------------------------------------------------------------------- */

static void classify(spend_event *e)
{
    dpb_error err = {0}, eg = {0};
    spend_class *c = &e->cls;
    c->why = e->why;
    c->gdp_ok = dp_gdp_mu2_of(e->ev, e->rel, &c->mu2, &eg) == DPB_OK && c->mu2 >= 0.0;
    e->rdp = malloc(RDP_NORDERS * sizeof *e->rdp);
    dpb_status st = e->rdp ? dp_rdp_curve(e->ev, e->rel, e->rdp, &err) : DPB_ENOMEM;
    if (st == DPB_OK) {
        c->kind = SPEND_RDP;
        c->rdp = e->rdp;
        return;
    }
    free(e->rdp);
    e->rdp = NULL;
    if (st == DPB_EUNCERTIFIABLE) {
        c->kind = SPEND_UNCERTIFIABLE;
        snprintf(e->why, sizeof e->why, "%s", err.detail);
        return;
    }
    dpb_error e2 = {0};
    st = dp_tv_log1m_of(e->ev, e->rel, &c->tvlog, &e2);
    if (st == DPB_OK) {
        c->kind = SPEND_TV;
        return;
    }
    if (st == DPB_ENOTCOVERED) {
        c->kind = SPEND_NOT_COVERED;
        snprintf(e->why, sizeof e->why, "%s", e2.detail);
        return;
    }
    c->kind = SPEND_PLD_ONLY;
    snprintf(e->why, sizeof e->why, "%s", err.detail);
}

static spend_event *reg_find(spend_engine *g, uint64_t h, const unsigned char *b, size_t n,
                             dp_relation rel)
{
    for (spend_event *e = g->reg[h & (g->reg_cap - 1)]; e; e = e->next)
        if (e->hash == h && e->rel == rel && e->nbytes == n && memcmp(e->bytes, b, n) == 0)
            return e;
    return NULL;
}

static void reg_insert(spend_engine *g, spend_event *e)
{
    if (g->reg_n + 1 > g->reg_cap) { /* grow the chains (best effort) */
        size_t nc = 2 * g->reg_cap;
        spend_event **nb = calloc(nc, sizeof *nb);
        if (nb != NULL) {
            for (size_t i = 0; i < g->reg_cap; i++)
                for (spend_event *x = g->reg[i], *nx; x; x = nx) {
                    nx = x->next;
                    x->next = nb[x->hash & (nc - 1)];
                    nb[x->hash & (nc - 1)] = x;
                }
            free(g->reg);
            g->reg = nb;
            g->reg_cap = nc;
        }
    }
    size_t b = e->hash & (g->reg_cap - 1);
    e->next = g->reg[b];
    g->reg[b] = e;
    g->reg_n++;
}

dpb_status spend_event_get(spend_engine *g, const unsigned char *bytes, size_t n, dp_relation rel,
                           spend_event **out)
{
    uint64_t h = fnv64(bytes, n, 14695981039346656037ULL ^ (uint64_t)rel);
    pthread_mutex_lock(&g->mu);
    spend_event *e = reg_find(g, h, bytes, n, rel);
    if (e != NULL) {
        e->refs++;
        pthread_mutex_unlock(&g->mu);
        *out = e;
        return DPB_OK;
    }
    pthread_mutex_unlock(&g->mu);
    /* decode and classify outside the lock (an RDP curve takes a while) */
    e = calloc(1, sizeof *e);
    if (e == NULL)
        return DPB_ENOMEM;
    e->bytes = malloc(n ? n : 1);
    if (e->bytes == NULL) {
        free(e);
        return DPB_ENOMEM;
    }
    if (dp_event_decode(bytes, n, &e->ev, NULL) != DPB_OK) {
        free(e->bytes);
        free(e);
        return DPB_ECORRUPT;
    }
    memcpy(e->bytes, bytes, n);
    e->nbytes = n;
    e->hash = h;
    e->rel = rel;
    classify(e);
    pthread_mutex_lock(&g->mu);
    spend_event *won = reg_find(g, h, bytes, n, rel); /* registered meanwhile by another */
    if (won != NULL) {
        won->refs++;
        pthread_mutex_unlock(&g->mu);
        event_free(e);
        *out = won;
        return DPB_OK;
    }
    e->sid = g->next_sid++;
    e->refs = 1;
    reg_insert(g, e);
    pthread_mutex_unlock(&g->mu);
    *out = e;
    return DPB_OK;
}

void spend_event_ref(spend_engine *g, spend_event *e)
{
    pthread_mutex_lock(&g->mu);
    e->refs++;
    pthread_mutex_unlock(&g->mu);
}

/* The last reference gone, the event leaves the registry (its id is never reused, so cached
 * values naming it are never found again; they age out of the cache). */
void spend_event_put(spend_engine *g, spend_event *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    if (--e->refs > 0) {
        pthread_mutex_unlock(&g->mu);
        return;
    }
    spend_event **p = &g->reg[e->hash & (g->reg_cap - 1)];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    g->reg_n--;
    pthread_mutex_unlock(&g->mu);
    event_free(e);
}

const spend_class *spend_event_class(const spend_event *e)
{
    return &e->cls;
}

/* ---- rdp and the filters ------------------------------------------------------------------- */

/* min over orders of rdp_eps_at(a, r, delta), bit for bit the same arithmetic, with the
 * per-order logarithms computed once per delta: eps = (r + log1p(-1/a)) - log(delta a)/(a-1),
 * and 0 where delta^2 + expm1(-r) > 0 (only possible for r < 2 delta^2). Rounded up. */
static double rdp_convert(spend_engine *g, const double *r, double delta)
{
    /* the constants for the last 4 deltas this thread converted at (no lock, no copy) */
    static _Thread_local struct conv cvs[4];
    static _Thread_local unsigned next;
    (void)g;
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
        double a = RDP_DEFAULT_ORDERS[k], rk = r[k], e;
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
    return best <= 0.0 ? 0.0 : dp_round_up(best, RDP_REL_ROUND);
}

/* The rdp_filter's level (docs/FILTERS.md): min over the k committed orders a of the improved
 * conversion eps_a(r_a, delta / k) = r_a + log1p(-1/a) - log(a delta / k) / (a - 1) (the
 * union bound gives each order delta / k), and nothing else: no total-variation shortcut, no
 * other order. A round is admitted iff the level after it is <= eps, i.e. iff some order
 * still has r_a <= B_a. Rounded up. */
static double filter_level(const double *r, double delta)
{
    double dk = delta / (double)LEDGER_FILTER_NORDERS, best = HUGE_VAL;
    for (size_t i = 0; i < LEDGER_FILTER_NORDERS; i++) {
        double a = LEDGER_FILTER_ORDERS[i], rk = r[LEDGER_FILTER_ORDER_INDEX[i]];
        if (!isfinite(rk))
            continue;
        double e = rk + log1p(-1.0 / a) - log(dk * a) / (a - 1.0);
        if (e < best)
            best = e;
    }
    return best <= 0.0 ? 0.0 : dp_round_up(best, RDP_REL_ROUND);
}

/* r += count times the RDP curve v: every sum of curves in this file is a left fold of this
 * one step, so a fold kept and continued (the clients' memos) gives the same bits as one
 * done whole. */
static inline void add_curve(double *r, const double *v, uint64_t count)
{
    double cnt = (double)count;
    for (size_t k = 0; k < RDP_NORDERS; k++)
        r[k] += cnt * v[k];
}

/* The rdp accountant's eps of the composition at delta: +inf when an event has no RDP curve. */
static double rdp_of(spend_engine *g, const spend_term *t, size_t m, double delta)
{
    double r[RDP_NORDERS] = {0};
    for (size_t i = 0; i < m; i++) {
        const spend_class *c = &t[i].ev->cls;
        if (c->kind != SPEND_RDP)
            return HUGE_VAL;
        add_curve(r, c->rdp, t[i].count);
    }
    return m == 0 ? 0.0 : rdp_convert(g, r, delta < 1.0 ? delta : 0.999999999);
}

/* ---- pld, and its cache -------------------------------------------------------------------- */

/* The cache key of a sorted multiset: a left fold too (key_start, then key_term a term). */
static uint64_t key_start(double delta, dp_relation rel)
{
    uint64_t k = fnv64(&delta, sizeof delta, 14695981039346656037ULL);
    unsigned char r = (unsigned char)rel;
    return fnv64(&r, 1, k);
}

static uint64_t key_term(uint64_t k, uint32_t sid, uint64_t count)
{
    k = fnv64(&sid, sizeof sid, k);
    return fnv64(&count, sizeof count, k);
}

static uint64_t cache_key(double delta, dp_relation rel, const spend_term *t, size_t m)
{
    uint64_t k = key_start(delta, rel);
    for (size_t i = 0; i < m; i++)
        k = key_term(k, t[i].ev->sid, t[i].count);
    return k;
}

static int centry_is(const centry *c, uint64_t key, double delta, dp_relation rel,
                     const spend_term *t, size_t m)
{
    if (c->key != key || c->delta != delta || c->rel != (uint8_t)rel || c->m != m)
        return 0;
    for (size_t i = 0; i < m; i++)
        if (c->t[i].sid != t[i].ev->sid || c->t[i].count != t[i].count)
            return 0;
    return 1;
}

static void lru_unlink(spend_engine *g, centry *c)
{
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else
        g->lru_head = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else
        g->lru_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
}

static void lru_push(spend_engine *g, centry *c)
{
    c->lru_prev = NULL;
    c->lru_next = g->lru_head;
    if (g->lru_head)
        g->lru_head->lru_prev = c;
    g->lru_head = c;
    if (g->lru_tail == NULL)
        g->lru_tail = c;
}

static int cache_get(spend_engine *g, uint64_t key, double delta, dp_relation rel,
                     const spend_term *t, size_t m, double *pld, int count_miss)
{
    pthread_mutex_lock(&g->cmu);
    for (centry *c = g->cb[key & (g->cb_cap - 1)]; c; c = c->next)
        if (centry_is(c, key, delta, rel, t, m)) {
            lru_unlink(g, c);
            lru_push(g, c);
            *pld = c->pld;
            g->hits++;
            pthread_mutex_unlock(&g->cmu);
            return 1;
        }
    g->misses += count_miss ? 1 : 0;
    pthread_mutex_unlock(&g->cmu);
    return 0;
}

static void cache_evict_tail(spend_engine *g)
{
    centry *c = g->lru_tail;
    lru_unlink(g, c);
    centry **p = &g->cb[c->key & (g->cb_cap - 1)];
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    g->c_bytes -= c->bytes;
    g->c_n--;
    free(c);
}

/* Best effort: a value not kept is computed again when asked for. */
static void cache_put(spend_engine *g, uint64_t key, double delta, dp_relation rel,
                      const spend_term *t, size_t m, double pld)
{
    size_t bytes = sizeof(centry) + m * sizeof(((centry *)0)->t[0]);
    if (bytes > g->c_cap / 4)
        return;
    centry *c = malloc(bytes);
    if (c == NULL)
        return;
    c->key = key;
    c->delta = delta;
    c->rel = (uint8_t)rel;
    c->pld = pld;
    c->m = m;
    c->bytes = bytes;
    for (size_t i = 0; i < m; i++) {
        c->t[i].sid = t[i].ev->sid;
        c->t[i].count = t[i].count;
    }
    pthread_mutex_lock(&g->cmu);
    for (centry *x = g->cb[key & (g->cb_cap - 1)]; x; x = x->next)
        if (centry_is(x, key, delta, rel, t, m)) { /* computed meanwhile by another */
            pthread_mutex_unlock(&g->cmu);
            free(c);
            return;
        }
    while (g->lru_tail && g->c_bytes + bytes > g->c_cap)
        cache_evict_tail(g);
    c->next = g->cb[key & (g->cb_cap - 1)];
    g->cb[key & (g->cb_cap - 1)] = c;
    lru_push(g, c);
    g->c_bytes += bytes;
    g->c_n++;
    pthread_mutex_unlock(&g->cmu);
}

/* The pld accountant's eps of the composition at delta: the terms (in sid order) as one
 * ComposedDpEvent of SelfComposedDpEvents, through the same entry point the compute API
 * uses. +inf when it certifies nothing (or fails). */
static double pld_compute(const spend_term *t, size_t m, double delta, dp_relation rel)
{
    double result = HUGE_VAL;
    if (m == 0)
        return 0.0;
    dp_event *root = dp_event_new(DP_EV_COMPOSED);
    if (root && (root->u.composed.events = calloc(m, sizeof(dp_event *))) != NULL) {
        for (size_t i = 0; i < m; i++) {
            dp_event *sc = dp_event_new(DP_EV_SELF_COMPOSED);
            if (sc == NULL)
                break;
            sc->u.self.event = t[i].ev->ev; /* borrowed: detached before free */
            sc->u.self.count = t[i].count;
            root->u.composed.events[root->u.composed.n++] = sc;
        }
        dp_report rep;
        double dl = delta;
        if (root->u.composed.n == m && dp_epsilon_ex(root, rel, DP_ACCT_PLD, NULL, &dl, 1, &result,
                                                     NULL, &rep, NULL) != DPB_OK)
            result = HUGE_VAL;
        for (size_t i = 0; i < root->u.composed.n; i++)
            root->u.composed.events[i]->u.self.event = NULL;
    }
    dp_event_free(root);
    return result;
}

/* The pld value of the sorted terms t[0..m) whose cache key is key: cached, or computed and
 * kept. */
static double pld_of(spend_engine *g, uint64_t key, const spend_term *t, size_t m, double delta,
                     dp_relation rel)
{
    double p;
    if (cache_get(g, key, delta, rel, t, m, &p, 1))
        return p;
    p = pld_compute(t, m, delta, rel);
    if (dpb_cancelled())
        return HUGE_VAL; /* abandoned (spend_refine's caller closing): nothing kept */
    pthread_mutex_lock(&g->cmu);
    g->plds++;
    pthread_mutex_unlock(&g->cmu);
    cache_put(g, key, delta, rel, t, m, p);
    return p;
}

/* ---- the spend ----------------------------------------------------------------------------- */

static int cmp_term(const void *a, const void *b)
{
    uint32_t x = ((const spend_term *)a)->ev->sid, y = ((const spend_term *)b)->ev->sid;
    return x < y ? -1 : x > y;
}

static void pld_decide(spend_engine *g, double eps, double delta, dp_relation rel,
                       const spend_term *t, size_t m, double r, uint64_t key, spend_result *out);

void spend_eval(spend_engine *g, int mode, double eps, double delta, dp_relation rel, spend_term *t,
                size_t m, spend_result *out)
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
        double r[RDP_NORDERS] = {0}, tv = 0.0;
        int any_rdp = 0;
        for (size_t i = 0; i < m; i++) {
            const spend_class *v = &t[i].ev->cls;
            if (v->kind == SPEND_RDP) {
                any_rdp = 1;
                add_curve(r, v->rdp, t[i].count);
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
        out->spent = any_rdp ? rdp_convert(g, r, d < 1.0 ? d : 0.999999999) : 0.0;
        return;
    }
    if (mode == LEDGER_RDP_FILTER || mode == LEDGER_GDP_FILTER) {
        double r[RDP_NORDERS] = {0}, mu2 = 0.0;
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
                add_curve(r, v->rdp, t[i].count);
        }
        if (mode == LEDGER_RDP_FILTER) {
            out->spent = m == 0 ? 0.0 : filter_level(r, delta);
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
    pld_decide(g, eps, delta, rel, t, m, rdp_of(g, t, m, delta), cache_key(delta, rel, t, m), out);
}

/* A pld client's spend (out zeroed but for accountant -1, spent +inf) from the rdp value r of
 * the sorted terms t[0..m) (m > 0) whose cache key is key. */
static void pld_decide(spend_engine *g, double eps, double delta, dp_relation rel,
                       const spend_term *t, size_t m, double r, uint64_t key, spend_result *out)
{
    double p;
    if (r <= eps) {
        out->spent = r;
        out->accountant = DP_ACCT_RDP;
        /* the PLD value when the cache holds it (spend_refine put it there): never computed
         * here, so a round within budget costs what an rdp round does */
        if (cache_get(g, key, delta, rel, t, m, &p, 0) && p < r) {
            out->spent = p;
            out->accountant = DP_ACCT_PLD;
            out->pld_computed = 1;
        }
        return;
    }
    p = pld_of(g, key, t, m, delta, rel);
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
    spend_eval(g, LEDGER_PLD, eps, delta, rel, t, m, out);
    double r = out->spent;
    if (out->accountant == DP_ACCT_RDP && !out->pld_computed) { /* within budget: r decided */
        double p = pld_of(g, cache_key(delta, rel, t, m), t, m, delta, rel);
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

/* ---- a client's memo (spend.h: spend_eval_more) ------------------------------------------------
 *
 * spend_eval sums the terms' RDP curves in sid order, r[k] += count * rdp[k] from zero, and
 * hashes them in the same order (cache_key): both are left folds. The memo keeps both folds
 * over P, every term of the client but the one of the highest sid. A composition whose
 * sid-sorted terms begin with exactly P is finished from them with its few terms after P
 * (the tail): the same operations on the same values in the same order as from scratch, so
 * the same bits (the build is ISO C, -std=c11: no contraction into fused multiply-adds). */

#define MEMO_TAIL 4 /* most terms after P that a composition may have to be finished here */

struct spend_memo {
    double delta;
    uint8_t rel;
    uint32_t m, cap; /* the terms covered: P = s[0..m-1), then the last, s[m-1] */
    struct mterm {
        uint32_t sid;
        uint64_t count;
    } * s;                    /* sorted by sid */
    uint32_t *rank;           /* rank[i]: the position in s of the caller's term i */
    uint64_t hpre;            /* cache_key's state after delta, relation and P */
    double rpre[RDP_NORDERS]; /* the RDP curves of P, summed */
};

typedef struct {
    spend_term t;
    uint32_t at; /* the caller's index, or UINT32_MAX for the event added */
} mtail;

void spend_memo_free(spend_memo *mm)
{
    if (mm == NULL)
        return;
    free(mm->s);
    free(mm->rank);
    free(mm);
}

size_t spend_memo_bytes(const spend_memo *mm)
{
    return mm ? sizeof *mm + mm->cap * (sizeof *mm->s + sizeof *mm->rank) : 0;
}

/* The composition t[0..n) with k more of x (k 0: none) as P then tail[0..*nt) in sid order,
 * when the memo covers it; else 0. */
static int memo_match(const spend_memo *mm, double delta, dp_relation rel, const spend_term *t,
                      size_t n, const spend_event *x, uint64_t k, mtail tail[MEMO_TAIL], size_t *nt)
{
    if (mm == NULL || mm->delta != delta || mm->rel != (uint8_t)rel || n < mm->m)
        return 0;
    size_t m = mm->m, q = 0;
    int64_t psid = m >= 2 ? (int64_t)mm->s[m - 2].sid : -1; /* P's highest */
    for (size_t i = 0; i < m; i++) {
        uint32_t p = mm->rank[i];
        if (mm->s[p].sid != t[i].ev->sid)
            return 0;
        if (p + 1 < m) {
            if (mm->s[p].count != t[i].count)
                return 0;
        } else {
            tail[q++] = (mtail){t[i], (uint32_t)i};
        }
    }
    for (size_t i = m; i < n; i++) {
        if ((int64_t)t[i].ev->sid <= psid || q == MEMO_TAIL)
            return 0;
        tail[q++] = (mtail){t[i], (uint32_t)i};
    }
    if (k > 0) {
        size_t j = 0;
        while (j < q && tail[j].t.ev != x)
            j++;
        if (j < q) {
            tail[j].t.count += k;
        } else {
            if ((int64_t)x->sid <= psid || q == MEMO_TAIL)
                return 0;
            tail[q++] = (mtail){{(spend_event *)x, k}, UINT32_MAX};
        }
    }
    for (size_t i = 1; i < q; i++) /* a few: insertion */
        for (size_t j = i; j > 0 && tail[j - 1].t.ev->sid > tail[j].t.ev->sid; j--) {
            mtail s = tail[j];
            tail[j] = tail[j - 1];
            tail[j - 1] = s;
        }
    for (size_t i = 0; i < q; i++)
        if (tail[i].t.ev->cls.kind != SPEND_RDP || (i > 0 && tail[i - 1].t.ev == tail[i].t.ev))
            return 0;
    *nt = q;
    return 1;
}

/* The folds finished: the summed RDP curves and the cache key of P then tail[0..q). */
static uint64_t memo_finish(const spend_memo *mm, const mtail *tail, size_t q, double *r)
{
    memcpy(r, mm->rpre, sizeof mm->rpre);
    uint64_t h = mm->hpre;
    for (size_t i = 0; i < q; i++) {
        add_curve(r, tail[i].t.ev->cls.rdp, tail[i].t.count);
        h = key_term(h, tail[i].t.ev->sid, tail[i].t.count);
    }
    return h;
}

/* The sorted terms of the composition (m - 1 + q of them) into out. */
static void memo_sorted(const spend_memo *mm, const spend_term *t, const mtail *tail, size_t q,
                        spend_term *out)
{
    for (size_t i = 0; i < mm->m; i++)
        if (mm->rank[i] + 1 < mm->m)
            out[mm->rank[i]] = t[i];
    for (size_t j = 0; j < q; j++)
        out[mm->m - 1 + j] = tail[j].t;
}

static int memo_room(spend_memo *mm, size_t n)
{
    if (n <= mm->cap)
        return 0;
    size_t cap = mm->cap ? mm->cap : SPEND_MEMO_MIN;
    while (cap < n)
        cap *= 2;
    struct mterm *s = realloc(mm->s, cap * sizeof *s);
    if (s == NULL)
        return -1;
    mm->s = s;
    uint32_t *rk = realloc(mm->rank, cap * sizeof *rk);
    if (rk == NULL)
        return -1;
    mm->rank = rk;
    mm->cap = (uint32_t)cap;
    return 0;
}

/* P grows by tail[0..q-1), the last becomes tail[q-1]: the memo covers t[0..n) (n = m-1+q). */
static int memo_advance(spend_memo *mm, const mtail *tail, size_t q)
{
    if (memo_room(mm, mm->m - 1 + q) != 0)
        return -1;
    for (size_t j = 0; j + 1 < q; j++) {
        add_curve(mm->rpre, tail[j].t.ev->cls.rdp, tail[j].t.count);
        mm->hpre = key_term(mm->hpre, tail[j].t.ev->sid, tail[j].t.count);
    }
    for (size_t j = 0; j < q; j++) {
        uint32_t p = mm->m - 1 + (uint32_t)j;
        mm->s[p] = (struct mterm){tail[j].t.ev->sid, tail[j].t.count};
        mm->rank[tail[j].at] = p;
    }
    mm->m += (uint32_t)q - 1;
    return 0;
}

typedef struct {
    uint32_t sid, at;
} sidpos;

static int cmp_sidpos(const void *a, const void *b)
{
    uint32_t x = ((const sidpos *)a)->sid, y = ((const sidpos *)b)->sid;
    return x < y ? -1 : x > y;
}

/* The memo of t[0..n) from scratch, into *memo (made or reused); freed when t is not one a
 * memo serves. */
static void memo_build(spend_memo **memo, double delta, dp_relation rel, const spend_term *t,
                       size_t n)
{
    int ok = n >= SPEND_MEMO_MIN && n < UINT32_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = t[i].ev->cls.kind == SPEND_RDP;
    spend_memo *mm = *memo;
    sidpos *o = ok ? malloc(n * sizeof *o) : NULL;
    if (ok && o != NULL && mm == NULL)
        mm = calloc(1, sizeof *mm);
    if (o == NULL || mm == NULL || memo_room(mm, n) != 0) {
        free(o);
        spend_memo_free(mm);
        *memo = NULL;
        return;
    }
    for (size_t i = 0; i < n; i++)
        o[i] = (sidpos){t[i].ev->sid, (uint32_t)i};
    qsort(o, n, sizeof *o, cmp_sidpos);
    mm->delta = delta;
    mm->rel = (uint8_t)rel;
    mm->m = (uint32_t)n;
    mm->hpre = key_start(delta, rel);
    memset(mm->rpre, 0, sizeof mm->rpre);
    for (size_t j = 0; j < n; j++) {
        const spend_term *tj = &t[o[j].at];
        mm->s[j] = (struct mterm){tj->ev->sid, tj->count};
        mm->rank[o[j].at] = (uint32_t)j;
        if (j + 1 == n)
            break;
        add_curve(mm->rpre, tj->ev->cls.rdp, tj->count);
        mm->hpre = key_term(mm->hpre, tj->ev->sid, tj->count);
    }
    free(o);
    *memo = mm;
}

static int cache_has_key(spend_engine *g, uint64_t key)
{
    int found = 0;
    pthread_mutex_lock(&g->cmu);
    for (centry *c = g->cb[key & (g->cb_cap - 1)]; c && !found; c = c->next)
        found = c->key == key;
    pthread_mutex_unlock(&g->cmu);
    return found;
}

static int memo_mode(int mode)
{
    return mode == LEDGER_PLD || mode == LEDGER_RDP || mode == LEDGER_RDP_FILTER;
}

/* The spend of a composition the memo covers (spend_eval's, bit for bit). */
static void memo_eval(spend_engine *g, const spend_memo *mm, int mode, double eps, double delta,
                      dp_relation rel, const spend_term *t, const mtail *tail, size_t q,
                      spend_result *out)
{
    double r[RDP_NORDERS];
    uint64_t key = memo_finish(mm, tail, q, r);
    memset(out, 0, sizeof *out);
    out->accountant = -1;
    out->spent = HUGE_VAL;
    if (mode == LEDGER_RDP_FILTER) {
        out->spent = filter_level(r, delta);
        return;
    }
    if (mode == LEDGER_RDP && !(delta > 0.0))
        return;
    double rv = rdp_convert(g, r, delta < 1.0 ? delta : 0.999999999);
    if (mode == LEDGER_RDP) {
        out->spent = rv;
        out->accountant = DP_ACCT_RDP;
        return;
    }
    size_t m = mm->m - 1 + q;
    if (rv <= eps && !cache_has_key(g, key)) { /* pld_decide's answer, without a lookup */
        out->spent = rv;
        out->accountant = DP_ACCT_RDP;
        return;
    }
    spend_term stack[64], *s = m <= 64 ? stack : malloc(m * sizeof *s);
    if (s == NULL)
        return; /* nothing certified: refuses */
    memo_sorted(mm, t, tail, q, s);
    pld_decide(g, eps, delta, rel, s, m, rv, key, out);
    if (s != stack)
        free(s);
}

void spend_eval_more(spend_engine *g, const spend_memo *memo, spend_memo **update, int mode,
                     double eps, double delta, dp_relation rel, const spend_term *t, size_t n,
                     spend_event *x, uint64_t k, spend_result *out)
{
    mtail tail[MEMO_TAIL];
    size_t q = 0;
    if (k == 0)
        x = NULL;
    if (update != NULL)
        memo = *update;
    int hit = memo_mode(mode) && memo_match(memo, delta, rel, t, n, x, k, tail, &q);
    if (hit) {
        memo_eval(g, memo, mode, eps, delta, rel, t, tail, q, out);
    } else {
        spend_term stack[16], *w = n + 1 <= 16 ? stack : malloc((n + 1) * sizeof *w);
        if (w == NULL) {
            memset(out, 0, sizeof *out);
            out->accountant = -1;
            out->spent = HUGE_VAL; /* refuses: never admits on a spend it could not compute */
            return;
        }
        size_t m = n, i;
        if (n)
            memcpy(w, t, n * sizeof *w);
        for (i = 0; x != NULL && i < n && w[i].ev != x; i++)
            ;
        if (x != NULL && i < n)
            w[i].count += k;
        else if (x != NULL)
            w[m++] = (spend_term){x, k};
        spend_eval(g, mode, eps, delta, rel, w, m, out);
        if (w != stack)
            free(w);
    }
    if (update == NULL || x != NULL)
        return;
    if (!memo_mode(mode)) {
        spend_memo_free(*update);
        *update = NULL;
    } else if (!hit || memo_advance(*update, tail, q) != 0) {
        memo_build(update, delta, rel, t, n);
    }
}

int spend_rdp_within(spend_engine *g, const spend_memo *memo, double eps, double delta,
                     dp_relation rel, const spend_term *t, size_t n, spend_event *x, uint64_t k)
{
    mtail tail[MEMO_TAIL];
    size_t q;
    double r[RDP_NORDERS];
    if (!memo_match(memo, delta, rel, t, n, k ? x : NULL, k, tail, &q))
        return 0;
    memo_finish(memo, tail, q, r);
    return rdp_convert(g, r, delta < 1.0 ? delta : 0.999999999) <= eps;
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
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n)
            return NULL;
        spend_candidate *c = &j->c[j->need[i]];
        spend_result r;
        spend_eval(j->g, LEDGER_PLD, c->eps, c->delta, c->rel, c->t, c->m, &r);
    }
}

void spend_prefetch(spend_engine *g, spend_candidate *c, size_t n)
{
    size_t *need = malloc((n ? n : 1) * sizeof *need), nn = 0;
    if (need == NULL)
        return;
    for (size_t i = 0; i < n; i++) { /* the cheap test spend_eval makes first */
        qsort(c[i].t, c[i].m, sizeof *c[i].t, cmp_term);
        if (!(rdp_of(g, c[i].t, c[i].m, c[i].delta) <= c[i].eps))
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
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(need);
}

int spend_accountant_of(spend_engine *g, int mode, double eps, double delta, spend_term *t,
                        size_t m, double spent)
{
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
    return m > 0 && rdp_of(g, t, m, delta) == spent ? DP_ACCT_RDP : DP_ACCT_PLD;
}

void spend_engine_stats(spend_engine *g, spend_stats *s)
{
    pthread_mutex_lock(&g->cmu);
    s->entries = g->c_n;
    s->bytes = g->c_bytes;
    s->cap_bytes = g->c_cap;
    s->hits = g->hits;
    s->misses = g->misses;
    s->pld_computed = g->plds;
    pthread_mutex_unlock(&g->cmu);
}
