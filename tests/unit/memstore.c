/* memstore.c - the in-memory shared store of memstore.h. */
#include "memstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    memlog *g;
    pthread_mutex_t mu;
    memrec *pend; /* pending records: seqs durable + 1 ... */
    size_t npend, cap;
    atomic_uint_fast64_t durable;
    uint64_t next;
    int last_fail; /* the status of the last failed sync */
} memstore;

static memstore *ms(const ledger_store *s)
{
    return s->impl;
}

void memlog_init(memlog *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
}

void memlog_free(memlog *g)
{
    for (size_t i = 0; i < g->nrec; i++)
        free(g->rec[i].p);
    free(g->rec);
    free(g->snap);
    for (size_t i = 0; i < g->nsnaps; i++)
        free(g->snaps[i].p);
    free(g->snaps);
    pthread_mutex_destroy(&g->mu);
}

static void drop_pending(memstore *m)
{
    for (size_t i = 0; i < m->npend; i++)
        free(m->pend[i].p);
    m->npend = 0;
    m->next = atomic_load(&m->durable) + 1;
}

static dpb_status m_load_snapshot(ledger_store *s, uint64_t *seq, void **data, size_t *len,
                                  dpb_error *err)
{
    memlog *g = ms(s)->g;
    (void)err;
    pthread_mutex_lock(&g->mu);
    *seq = g->snap_seq;
    *len = g->snap_len;
    *data = NULL;
    if (g->snap != NULL) {
        *data = malloc(g->snap_len ? g->snap_len : 1);
        memcpy(*data, g->snap, g->snap_len);
    }
    pthread_mutex_unlock(&g->mu);
    return DPB_OK;
}

/* fn for every record after after_seq; the store's position at the log's end. */
static dpb_status apply_from(memstore *m, uint64_t after_seq, store_record_fn fn, void *ctx,
                             uint64_t *last, dpb_error *err)
{
    memlog *g = m->g;
    if (atomic_load(&g->catch_up_fails))
        return dpb_fail(err, DPB_EUNAVAILABLE, NULL, "memstore: the log cannot be reached");
    pthread_mutex_lock(&g->mu);
    uint64_t end = g->nrec;
    for (uint64_t seq = after_seq + 1; seq <= end; seq++) {
        const memrec *r = &g->rec[seq - 1];
        if (fn(ctx, seq, r->type, r->p, r->n) != 0) {
            pthread_mutex_unlock(&g->mu);
            return dpb_fail(err, DPB_ECORRUPT, NULL, "memstore: record %llu refused",
                            (unsigned long long)seq);
        }
    }
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_lock(&m->mu);
    atomic_store(&m->durable, end > after_seq ? end : after_seq);
    drop_pending(m);
    pthread_mutex_unlock(&m->mu);
    *last = end > after_seq ? end : after_seq;
    return DPB_OK;
}

/* Records from..to of the shared log (store_ops.read_records). */
static dpb_status m_read_records(ledger_store *s, uint64_t from, uint64_t to, store_record_fn fn,
                                 void *ctx, dpb_error *err)
{
    memlog *g = ms(s)->g;
    dpb_status st = DPB_OK;
    pthread_mutex_lock(&g->mu);
    for (uint64_t seq = from; seq <= to && st == DPB_OK; seq++) {
        if (seq == 0 || seq > g->nrec)
            st = dpb_fail(err, DPB_ENOTFOUND, NULL, "memstore: no record %llu",
                          (unsigned long long)seq);
        else if (fn(ctx, seq, g->rec[seq - 1].type, g->rec[seq - 1].p, g->rec[seq - 1].n) != 0)
            st = DPB_ECANCELLED;
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

static dpb_status m_replay(ledger_store *s, uint64_t after_seq, store_record_fn fn,
                           store_record_fn covered, void *ctx, uint64_t *next_seq, dpb_error *err)
{
    (void)covered;
    uint64_t last = after_seq;
    dpb_status st = apply_from(ms(s), after_seq, fn, ctx, &last, err);
    *next_seq = last + 1;
    return st;
}

static dpb_status m_catch_up(ledger_store *s, uint64_t after_seq, store_record_fn fn, void *ctx,
                             uint64_t *last_seq, dpb_error *err)
{
    *last_seq = after_seq;
    return apply_from(ms(s), after_seq, fn, ctx, last_seq, err);
}

static dpb_status m_append(ledger_store *s, uint8_t type, const void *payload, size_t len,
                           uint64_t *seq)
{
    memstore *m = ms(s);
    pthread_mutex_lock(&m->mu);
    if (m->npend == m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 16;
        memrec *np = realloc(m->pend, nc * sizeof *np);
        if (np == NULL) {
            pthread_mutex_unlock(&m->mu);
            return DPB_ENOMEM;
        }
        m->pend = np;
        m->cap = nc;
    }
    memrec *r = &m->pend[m->npend];
    r->p = malloc(len ? len : 1);
    if (r->p == NULL) {
        pthread_mutex_unlock(&m->mu);
        return DPB_ENOMEM;
    }
    memcpy(r->p, payload, len);
    r->n = len;
    r->type = type;
    m->npend++;
    *seq = m->next++;
    pthread_mutex_unlock(&m->mu);
    return DPB_OK;
}

static dpb_status m_sync(ledger_store *s, uint64_t upto)
{
    memstore *m = ms(s);
    memlog *g = m->g;
    void (*hook)(void *) = g->before_sync;
    if (hook != NULL) {
        g->before_sync = NULL;
        hook(g->before_ctx);
    }
    int us = atomic_load(&g->sync_sleep_us);
    if (us > 0) {
        struct timespec ts = {0, (long)us * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&m->mu);
    uint64_t d = atomic_load(&m->durable);
    if (upto <= d || m->npend == 0) {
        dpb_status st = upto <= d ? DPB_OK : (dpb_status)m->last_fail;
        pthread_mutex_unlock(&m->mu);
        return st;
    }
    dpb_status st = DPB_OK;
    int forced = atomic_exchange(&g->fail_next, 0);
    int lose = atomic_exchange(&g->lose_answer, 0);
    pthread_mutex_lock(&g->mu);
    if (forced != 0) {
        st = (dpb_status)forced;
    } else if (g->nrec != d) {
        st = DPB_ECONFLICT; /* seq d + 1 is taken: the whole batch fails */
        g->conflicts++;
    } else {
        if (g->nrec + m->npend > g->cap) {
            size_t nc = g->cap ? g->cap : 64;
            while (nc < g->nrec + m->npend)
                nc *= 2;
            g->rec = realloc(g->rec, nc * sizeof *g->rec);
            g->cap = nc;
        }
        for (size_t i = 0; i < m->npend; i++) {
            g->rec[g->nrec++] = m->pend[i];
            m->pend[i].p = NULL;
        }
        if (lose)
            st = DPB_EUNAVAILABLE; /* committed, but the answer was lost */
        else
            atomic_store(&m->durable, g->nrec);
    }
    pthread_mutex_unlock(&g->mu);
    if (st != DPB_OK) {
        m->last_fail = (int)st;
        drop_pending(m);
    } else {
        m->npend = 0;
        m->next = atomic_load(&m->durable) + 1;
    }
    pthread_mutex_unlock(&m->mu);
    return st;
}

static dpb_status m_snapshot(ledger_store *s, uint64_t seq, const void *data, size_t len,
                             dpb_error *err)
{
    memlog *g = ms(s)->g;
    (void)err;
    pthread_mutex_lock(&g->mu);
    if (seq > g->snap_seq || g->snap == NULL) {
        unsigned char *c = malloc(len ? len : 1);
        memcpy(c, data, len);
        free(g->snap);
        g->snap = c;
        g->snap_len = len;
        g->snap_seq = seq;
    }
    g->snapshots++;
    struct memsnap *ks = g->keep_snaps ? realloc(g->snaps, (g->nsnaps + 1) * sizeof *ks) : NULL;
    if (ks != NULL) {
        g->snaps = ks;
        ks[g->nsnaps].p = malloc(len ? len : 1);
        if (ks[g->nsnaps].p != NULL) {
            memcpy(ks[g->nsnaps].p, data, len);
            ks[g->nsnaps].n = len;
            ks[g->nsnaps++].seq = seq;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return DPB_OK;
}

int memlog_clone_at(memlog *g, size_t k, memlog *out)
{
    memlog_init(out);
    pthread_mutex_lock(&g->mu);
    int rc = k < g->nsnaps ? 0 : -1;
    out->rec = rc == 0 ? calloc(g->nrec + 1, sizeof *out->rec) : NULL;
    out->snap = rc == 0 ? malloc(g->snaps[k].n ? g->snaps[k].n : 1) : NULL;
    if (out->rec == NULL || out->snap == NULL)
        rc = -1;
    for (size_t i = 0; rc == 0 && i < g->nrec; i++) {
        out->rec[i].type = g->rec[i].type;
        out->rec[i].n = g->rec[i].n;
        out->rec[i].p = malloc(g->rec[i].n ? g->rec[i].n : 1);
        if (out->rec[i].p == NULL) {
            rc = -1;
            break;
        }
        memcpy(out->rec[i].p, g->rec[i].p, g->rec[i].n);
        out->nrec = out->cap = i + 1;
    }
    if (rc == 0) {
        memcpy(out->snap, g->snaps[k].p, g->snaps[k].n);
        out->snap_len = g->snaps[k].n;
        out->snap_seq = g->snaps[k].seq;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static uint64_t m_durable_seq(const ledger_store *s)
{
    return atomic_load(&ms(s)->durable);
}

static int m_failed(const ledger_store *s)
{
    (void)s;
    return 0;
}

static dpb_status m_error(ledger_store *s, dpb_error *err)
{
    (void)s;
    dpb_error_clear(err);
    snprintf(err->detail, sizeof err->detail, "memstore: the forced failure");
    return DPB_OK;
}

static void m_abandon(ledger_store *s, const char *why)
{
    (void)why;
    pthread_mutex_lock(&ms(s)->mu);
    drop_pending(ms(s));
    pthread_mutex_unlock(&ms(s)->mu);
}

static uint64_t m_size_bytes(const ledger_store *s)
{
    (void)s;
    return 0;
}

static void m_sync_stats(ledger_store *s, uint64_t *count, double *seconds, uint64_t *hist)
{
    (void)s;
    (void)count;
    (void)seconds;
    (void)hist;
}

static int m_empty(ledger_store *s)
{
    memlog *g = ms(s)->g;
    pthread_mutex_lock(&g->mu);
    int e = g->nrec == 0 && g->snap == NULL;
    pthread_mutex_unlock(&g->mu);
    return e;
}

static void m_close(ledger_store *s)
{
    memstore *m = ms(s);
    drop_pending(m);
    free(m->pend);
    pthread_mutex_destroy(&m->mu);
    free(m);
    free(s);
}

static const store_ops MEM_OPS = {
    .kind = "memory",
    .shared = 1,
    .load_snapshot = m_load_snapshot,
    .replay = m_replay,
    .append = m_append,
    .sync = m_sync,
    .catch_up = m_catch_up,
    .snapshot = m_snapshot,
    .durable_seq = m_durable_seq,
    .failed = m_failed,
    .error = m_error,
    .abandon = m_abandon,
    .size_bytes = m_size_bytes,
    .sync_stats = m_sync_stats,
    .empty = m_empty,
    .close = m_close,
    .read_records = m_read_records,
};

ledger_store *memstore_open(memlog *g)
{
    ledger_store *s = calloc(1, sizeof *s);
    memstore *m = calloc(1, sizeof *m);
    if (s == NULL || m == NULL) {
        free(s);
        free(m);
        return NULL;
    }
    m->g = g;
    pthread_mutex_init(&m->mu, NULL);
    m->next = 1;
    m->last_fail = DPB_ECONFLICT;
    s->ops = &MEM_OPS;
    s->impl = m;
    return s;
}

size_t memlog_strip_times(memlog *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->nrec; i++) {
        memrec *r = &g->rec[i];
        if (!(r->type & 0x80) || r->n < 8)
            continue;
        memmove(r->p, r->p + 8, r->n - 8);
        r->n -= 8;
        r->type &= 0x7f;
        n++;
    }
    return n;
}

int memlog_snap_cut_times(memlog *g, uint64_t t)
{
    unsigned char pat[16];
    for (int i = 0; i < 8; i++)
        pat[i] = pat[8 + i] = (unsigned char)(t >> (8 * i));
    for (size_t at = 4; g->snap && at + 16 <= g->snap_len; at++)
        if (memcmp(g->snap + at, pat, 16) == 0) {
            g->snap_len = at;
            g->snap[0] = 4;
            return 0;
        }
    return -1;
}
