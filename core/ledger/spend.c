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

static void classify(spend_event *e)
{
    dpb_error err = {0}, eg = {0};
    spend_class *c = &e->cls;
    c->why = e->why;
    c->gdp_ok = dp_gdp_mu2_of(e->ev, e->rel, &c->mu2, &eg) == DPB_OK && c->mu2 >= 0.0;
    e->rdp = malloc(RDP_CURVE_LEN * sizeof *e->rdp);
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

void spend_engine_kept_cap(spend_engine *g, size_t bytes)
{
    spend_kept_set_cap(&g->kept, bytes);
}

void spend_engine_stats(spend_engine *g, spend_stats *s)
{
    spend_cache_stats(&g->cache, s);
    spend_kept_stats(&g->kept, s);
}
