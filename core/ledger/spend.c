/*
 * spend.c - the spend engine's life cycle, its event registry (spend.h: events held by
 * content, decoded and classified once, ids never reused) and its figures. The spends
 * themselves are computed in spend_eval.c and spend_memo.c, the PLD values cached in
 * spend_cache.c (spend_int.h draws how these files call each other).
 *
 * Locks: one mutex for the registry, one for the cache (spend_cache.c), one for the kept
 * compositions (spend_kept.c); none is held while an accountant runs.
 *
 * May call: spend_cache.c and spend_kept.c (their set-up, release and figures), dp/ (event,
 * account), fnv.h, crc32c.h (the stored profiles' checksum).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "fnv.h"
#include "spend_int.h"

spend_engine *spend_engine_new(size_t cache_bytes)
{
    spend_engine *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->reg_cap = 256;
    g->reg = calloc(g->reg_cap, sizeof *g->reg);
    if (g->reg == NULL ||
        spend_cache_init(&g->cache, cache_bytes ? cache_bytes : SPEND_CACHE_BYTES) != 0) {
        free(g->reg);
        free(g);
        return NULL;
    }
    if (spend_kept_init(&g->kept, SPEND_KEPT_BYTES) != 0) {
        spend_cache_release(&g->cache);
        free(g->reg);
        free(g);
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    return g;
}

static void event_free(spend_event *e)
{
    dp_event_free(atomic_load(&e->ev));
    free(e->bytes);
    free(e->rdp);
    free(e->pend_rdp);
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
    spend_kept_release(&g->kept);
    spend_cache_release(&g->cache);
    free(g->reg);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* ---- the registry -------------------------------------------------------------------------- */

/* The class of the decoded event ev for rel into *c, its RDP curve into *rdp (owned; NULL
 * when it has none) and its reason into why (c->why points there). */
static void classify(const dp_event *ev, dp_relation rel, spend_class *c, double **rdp,
                     char why[200])
{
    dpb_error err = {0}, eg = {0};
    memset(c, 0, sizeof *c);
    why[0] = '\0';
    c->why = why;
    c->gdp_ok = dp_gdp_mu2_of(ev, rel, &c->mu2, &eg) == DPB_OK && c->mu2 >= 0.0;
    *rdp = malloc(RDP_CURVE_LEN * sizeof **rdp);
    dpb_status st = *rdp ? dp_rdp_curve(ev, rel, *rdp, &err) : DPB_ENOMEM;
    if (st == DPB_OK) {
        c->kind = SPEND_RDP;
        c->rdp = *rdp;
        return;
    }
    free(*rdp);
    *rdp = NULL;
    if (st == DPB_EUNCERTIFIABLE) {
        c->kind = SPEND_UNCERTIFIABLE;
        snprintf(why, 200, "%s", err.detail);
        return;
    }
    dpb_error e2 = {0};
    st = dp_tv_log1m_of(ev, rel, &c->tvlog, &e2);
    if (st == DPB_OK) {
        c->kind = SPEND_TV;
        return;
    }
    if (st == DPB_ENOTCOVERED) {
        c->kind = SPEND_NOT_COVERED;
        snprintf(why, 200, "%s", e2.detail);
        return;
    }
    c->kind = SPEND_PLD_ONLY;
    snprintf(why, 200, "%s", err.detail);
}

/* Publish e's class c (its curve rdp and reason why: taken) and decoded tree ev (NULL: decoded
 * at its first use) unless another thread did first (the losing copies are left to the caller
 * to free: *ev, *rdp set to NULL when taken). Under g->mu. */
static void publish(spend_event *e, dp_event **ev, const spend_class *c, double **rdp,
                    const char why[200])
{
    if (atomic_load_explicit(&e->ready, memory_order_relaxed))
        return;
    dp_event *none = NULL;
    if (*ev != NULL && atomic_compare_exchange_strong(&e->ev, &none, *ev))
        *ev = NULL;
    e->rdp = *rdp;
    memcpy(e->why, why, sizeof e->why);
    e->cls = *c;
    e->cls.rdp = e->rdp;
    e->cls.why = e->why;
    *rdp = NULL;
    atomic_store_explicit(&e->ready, 1, memory_order_release);
}

dpb_status spend_event_ready(spend_engine *g, spend_event *e)
{
    if (atomic_load_explicit(&e->ready, memory_order_acquire))
        return DPB_OK;
    /* decode and classify outside the lock (an RDP curve takes a while); should two threads
     * do it at once, the first to publish wins and the other's work is dropped. A stored
     * profile (spend_event_set_profile) replaces both: the tree is decoded at its first
     * use, if any (spend_event_tree). */
    dp_event *ev = NULL;
    spend_class c;
    double *rdp = NULL;
    char why[200];
    pthread_mutex_lock(&g->mu); /* a stored profile: nothing decoded (spend_event_tree) */
    if (e->has_pend && !atomic_load_explicit(&e->ready, memory_order_relaxed)) {
        e->has_pend = 0;
        rdp = e->pend_rdp;
        e->pend_rdp = NULL;
        publish(e, &ev, &e->pend, &rdp, e->pend_why);
        g->restored++;
    }
    int done = atomic_load_explicit(&e->ready, memory_order_relaxed);
    pthread_mutex_unlock(&g->mu);
    if (done)
        return DPB_OK;
    dpb_status st = dp_event_decode(e->bytes, e->nbytes, &ev, NULL);
    if (st != DPB_OK)
        return st == DPB_ENOMEM ? st : DPB_ECORRUPT;
    classify(ev, e->rel, &c, &rdp, why);
    pthread_mutex_lock(&g->mu);
    if (!atomic_load_explicit(&e->ready, memory_order_relaxed))
        g->classified++;
    publish(e, &ev, &c, &rdp, why);
    pthread_mutex_unlock(&g->mu);
    dp_event_free(ev);
    free(rdp);
    return DPB_OK;
}

/* ---- stored profiles (spend.h) --------------------------------------------------------------- */

static unsigned char *put_le(unsigned char *o, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        o[i] = (unsigned char)(v >> (8 * i));
    return o + bytes;
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static unsigned char *put_f64(unsigned char *o, double x)
{
    uint64_t v;
    memcpy(&v, &x, sizeof v);
    return put_le(o, v, 8);
}

static double get_f64(const unsigned char *p)
{
    uint64_t v = get_le(p, 8);
    double x;
    memcpy(&x, &v, sizeof x);
    return x;
}

/* The profile of class c (curve rdp when SPEND_RDP) into out: its length. */
static size_t profile_write(const spend_class *c, const double *rdp, const char *why,
                            unsigned char *out)
{
    size_t wl = strnlen(why, 199);
    unsigned char *o = put_le(out, SPEND_PROFILE_VERSION, 4);
    o = put_le(o, (uint64_t)c->kind, 1);
    o = put_le(o, (uint64_t)(c->gdp_ok != 0), 1);
    o = put_f64(o, c->mu2);
    o = put_f64(o, c->tvlog);
    o = put_le(o, wl, 1);
    memcpy(o, why, wl);
    o += wl;
    size_t nc = c->kind == SPEND_RDP ? RDP_CURVE_LEN : 0;
    o = put_le(o, nc, 2);
    for (size_t k = 0; k < nc; k++)
        o = put_f64(o, rdp[k]);
    size_t n = (size_t)(o - out);
    put_le(o, dpb_crc32c(0, out, n), 4);
    return n + 4;
}

size_t spend_event_profile(spend_engine *g, const spend_event *e, unsigned char *out)
{
    if (e->nbytes <= SPEND_PROFILE_MIN_BYTES)
        return 0;
    if (atomic_load_explicit(&e->ready, memory_order_acquire))
        return profile_write(&e->cls, e->rdp, e->why, out);
    /* a stored profile not used yet (spend_event_ready may take it meanwhile) */
    size_t n = 0;
    pthread_mutex_lock(&g->mu);
    if (atomic_load_explicit(&e->ready, memory_order_relaxed))
        n = profile_write(&e->cls, e->rdp, e->why, out);
    else if (e->has_pend)
        n = profile_write(&e->pend, e->pend_rdp, e->pend_why, out);
    pthread_mutex_unlock(&g->mu);
    return n;
}

int spend_event_set_profile(spend_engine *g, spend_event *e, const unsigned char *p, size_t n)
{
    enum { HEAD = 4 + 1 + 1 + 8 + 8 + 1 };
    if (n < HEAD + 2 + 4 || get_le(p + n - 4, 4) != dpb_crc32c(0, p, n - 4))
        return -1;
    if (get_le(p, 4) != SPEND_PROFILE_VERSION)
        return 1; /* another version's numbers: classified again at the first use */
    spend_class c;
    memset(&c, 0, sizeof c);
    c.kind = (int)p[4];
    c.gdp_ok = p[5];
    c.mu2 = get_f64(p + 6);
    c.tvlog = get_f64(p + 14);
    size_t wl = p[22];
    if (wl > 199 || HEAD + wl + 2 + 4 > n || c.kind > SPEND_NOT_COVERED || c.gdp_ok > 1 ||
        isnan(c.mu2) || isnan(c.tvlog))
        return -1;
    const unsigned char *q = p + HEAD + wl;
    size_t nc = (size_t)get_le(q, 2);
    if (nc != (c.kind == SPEND_RDP ? (size_t)RDP_CURVE_LEN : 0) || HEAD + wl + 2 + 8 * nc + 4 != n)
        return -1;
    double *rdp = nc ? malloc(nc * sizeof *rdp) : NULL;
    if (nc && rdp == NULL)
        return 0; /* out of memory: classified at the first use */
    for (size_t k = 0; k < nc; k++)
        if (isnan(rdp[k] = get_f64(q + 2 + 8 * k))) {
            free(rdp);
            return -1;
        }
    pthread_mutex_lock(&g->mu);
    if (!atomic_load_explicit(&e->ready, memory_order_relaxed)) {
        free(e->pend_rdp);
        e->pend = c;
        e->pend_rdp = rdp;
        memcpy(e->pend_why, p + HEAD, wl);
        e->pend_why[wl] = '\0';
        e->pend.rdp = NULL;
        e->pend.why = NULL;
        e->has_pend = 1;
        rdp = NULL;
    }
    pthread_mutex_unlock(&g->mu);
    free(rdp);
    return 0;
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

dpb_status spend_event_get_lazy(spend_engine *g, const unsigned char *bytes, size_t n,
                                dp_relation rel, spend_event **out)
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
    /* the bytes must decode (checked now, the tree freed: spend_event_ready decodes again) */
    dp_event *ev = NULL;
    dpb_status st = dp_event_decode(bytes, n, &ev, NULL);
    dp_event_free(ev);
    if (st != DPB_OK)
        return st == DPB_ENOMEM ? st : DPB_ECORRUPT;
    e = calloc(1, sizeof *e);
    if (e == NULL)
        return DPB_ENOMEM;
    e->bytes = malloc(n ? n : 1);
    if (e->bytes == NULL) {
        free(e);
        return DPB_ENOMEM;
    }
    memcpy(e->bytes, bytes, n);
    e->nbytes = n;
    e->hash = h;
    e->rel = rel;
    /* until spend_event_ready: an event nothing certifies (never read as a curve) */
    e->cls.kind = SPEND_NOT_COVERED;
    snprintf(e->why, sizeof e->why, "the event's profile could not be computed (out of memory)");
    e->cls.why = e->why;
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

dpb_status spend_event_get(spend_engine *g, const unsigned char *bytes, size_t n, dp_relation rel,
                           spend_event **out)
{
    dpb_status st = spend_event_get_lazy(g, bytes, n, rel, out);
    if (st == DPB_OK && (st = spend_event_ready(g, *out)) != DPB_OK) {
        spend_event_put(g, *out);
        *out = NULL;
    }
    return st;
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

void spend_engine_kept_cap(spend_engine *g, size_t bytes)
{
    spend_kept_set_cap(&g->kept, bytes);
}

int spend_event_is_ready(const spend_event *e)
{
    return atomic_load_explicit(&((spend_event *)e)->ready, memory_order_acquire);
}

const unsigned char *spend_event_bytes(const spend_event *e, size_t *n)
{
    *n = e->nbytes;
    return e->bytes;
}

void spend_engine_stats(spend_engine *g, spend_stats *s)
{
    spend_cache_stats(&g->cache, s);
    spend_kept_stats(&g->kept, s);
    pthread_mutex_lock(&g->mu);
    s->classified = g->classified;
    s->restored = g->restored;
    pthread_mutex_unlock(&g->mu);
    s->rdp_summed = atomic_load(&g->rdp_summed);
}
