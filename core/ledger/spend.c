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
 * account), fnv.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

dpb_status spend_event_ready(spend_engine *g, spend_event *e)
{
    if (atomic_load_explicit(&e->ready, memory_order_acquire))
        return DPB_OK;
    /* decode and classify outside the lock (an RDP curve takes a while); should two threads
     * do it at once, the first to publish wins and the other's work is dropped */
    dp_event *ev = NULL;
    spend_class c;
    double *rdp = NULL;
    char why[200];
    dpb_status st = dp_event_decode(e->bytes, e->nbytes, &ev, NULL);
    if (st != DPB_OK)
        return st == DPB_ENOMEM ? st : DPB_ECORRUPT;
    classify(ev, e->rel, &c, &rdp, why);
    pthread_mutex_lock(&g->mu);
    if (!atomic_load_explicit(&e->ready, memory_order_relaxed)) {
        e->ev = ev;
        e->rdp = rdp;
        memcpy(e->why, why, sizeof e->why);
        e->cls = c;
        e->cls.why = e->why;
        ev = NULL;
        rdp = NULL;
        g->classified++;
        atomic_store_explicit(&e->ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&g->mu);
    dp_event_free(ev);
    free(rdp);
    return DPB_OK;
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
    pthread_mutex_unlock(&g->mu);
    s->rdp_summed = atomic_load(&g->rdp_summed);
}
