/*
 * spend_kept.c - the kept compositions of the spend engine (spend_int.h): the pessimistic
 * privacy-loss distribution of a multiset of charged events, kept on a coarse grid of its
 * own (SPEND_KEPT_H) and extended by one composition per charge, in a cache of bounded
 * memory shared by all clients and threads (docs/LEDGER.md, "Kept compositions").
 *
 * Every distribution is a pessimistic pair (both directions) of the pld accountant:
 *   - an event alone: the compute API's distribution of the event (dp_pld_pair_of, on the
 *     grid SPEND_KEPT_FINE_H), moved onto the coarse grid by connect-the-dots (pld_atoms), which
 *     gives a dominating pair (docs/MATH.md section 6); its round-off bound carried as it is
 *     (connect-the-dots moves mass with non-negative weights summing to 1, so an L1 error
 *     does not grow);
 *   - a history plus k of an event: the kept distribution of the history composed with the
 *     event's k-th power (pld_compose: one transform, truncated tails to +infinity, the
 *     inputs' and the transform's round-off carried as the compute path carries them);
 *   - a history no distribution is kept for (a restart, an eviction, a withdrawn charge):
 *     composed from its events' distributions at once (pld_compose_many), lazily, when first
 *     needed.
 * Composing dominating pairs gives a dominating pair (Zhu, Dong, Wang 2022, Theorem 10), so
 * every value is an upper bound of the composition's privacy loss: its epsilon is never
 * below the compute API's answer for the same composition but by that answer's own
 * truncation and round-off terms. Its excess over it is measured (bench_pld_ledger,
 * tests/unit/test_spend_kept.c) and stated in docs/ACCOUNTING.md.
 *
 * Entries are keyed by content (relation and the multiset of (sid, count)): the same history
 * finds the same entry whatever client, replica or path made it. Entries are immutable once
 * made, reference counted, and used outside the cache's mutex; computations run outside it.
 *
 * May call: dp/ (account.h's dp_pld_pair_of, the pld.h engine), common/. Called by
 * spend_eval.c and spend.c only.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../dp/account.h"
#include "../dp/pld.h"
#include "spend_int.h"

struct kentry {
    struct kentry *next, *lru_prev, *lru_next;
    uint64_t key;
    uint8_t rel;
    uint8_t bad;      /* an event the kept path cannot take: the caller computes from scratch */
    uint8_t in_table; /* 0 once evicted (freed at its last reference) */
    uint8_t sym;      /* only d[0] is set */
    uint8_t weak;     /* prospective: made for an admission test, not used since */
    uint64_t base;    /* the key of the entry it extends (0: none): demoted when it is charged */
    unsigned refs;
    size_t bytes;
    double last_delta, last_eps; /* the last epsilon asked of it (under the mutex) */
    pld_pmf d[2];
    size_t m;
    struct {
        uint32_t sid;
        uint64_t count;
    } t[]; /* sorted by sid */
};

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The key of a multiset: a sum of its terms' hashes (order-free), and the relation. */
static uint64_t term_hash(uint32_t sid, uint64_t count)
{
    return mix64(((uint64_t)sid << 32) ^ mix64(count));
}

static uint64_t key_of(const spend_term *t, size_t m, dp_relation rel)
{
    uint64_t k = mix64(0x6b657074ULL + (uint64_t)rel);
    for (size_t i = 0; i < m; i++)
        k += term_hash(t[i].ev->sid, t[i].count);
    return k;
}

int spend_kept_init(spend_kept *k, size_t cap_bytes)
{
    memset(k, 0, sizeof *k);
    k->kb_cap = 1024;
    k->kb = calloc(k->kb_cap, sizeof *k->kb);
    if (k->kb == NULL)
        return -1;
    k->cap_bytes = cap_bytes;
    pthread_mutex_init(&k->mu, NULL);
    pthread_mutex_init(&k->single_mu, NULL);
    return 0;
}

static void kentry_free(kentry *e)
{
    pld_free(&e->d[0]);
    if (!e->sym)
        pld_free(&e->d[1]);
    free(e);
}

void spend_kept_release(spend_kept *k)
{
    for (int w = 0; w < 2; w++)
        for (kentry *e = k->lru_head[w], *n; e; e = n) {
            n = e->lru_next;
            kentry_free(e);
        }
    free(k->kb);
    pthread_mutex_destroy(&k->mu);
    pthread_mutex_destroy(&k->single_mu);
}

/* Two recency lists: prospective entries (a composition made for an admission test, not
 * yet used again: lru[0]) and the others (lru[1]); eviction takes the least recently made
 * prospective entry first, so that the tests of refused charges do not push out the
 * histories clients will extend next. When a tested composition is charged (asked for
 * itself), the history it extended goes to the far end of lru[0]: it is stale unless
 * another client has it too, or the charge is withdrawn (then it is rebuilt). */
static void lru_unlink(spend_kept *k, kentry *e)
{
    int w = !e->weak;
    if (e->lru_prev)
        e->lru_prev->lru_next = e->lru_next;
    else
        k->lru_head[w] = e->lru_next;
    if (e->lru_next)
        e->lru_next->lru_prev = e->lru_prev;
    else
        k->lru_tail[w] = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
}

static void lru_push(spend_kept *k, kentry *e)
{
    int w = !e->weak;
    e->lru_prev = NULL;
    e->lru_next = k->lru_head[w];
    if (k->lru_head[w])
        k->lru_head[w]->lru_prev = e;
    k->lru_head[w] = e;
    if (k->lru_tail[w] == NULL)
        k->lru_tail[w] = e;
}

/* The entry eviction takes next (the caller holds the mutex), or NULL. */
static kentry *lru_victim(spend_kept *k)
{
    return k->lru_tail[0] ? k->lru_tail[0] : k->lru_tail[1];
}

static int entry_is(const kentry *e, uint64_t key, dp_relation rel, const spend_term *t, size_t m)
{
    if (e->key != key || e->rel != (uint8_t)rel || e->m != m)
        return 0;
    for (size_t i = 0; i < m; i++)
        if (e->t[i].sid != t[i].ev->sid || e->t[i].count != t[i].count)
            return 0;
    return 1;
}

/* The entry of the sorted terms, referenced (kept_put gives it back), or NULL; a prospective
 * one stays so unless promote (a history asked for itself, or extended). */
static kentry *kept_get_as(spend_kept *k, uint64_t key, dp_relation rel, const spend_term *t,
                           size_t m, int promote)
{
    pthread_mutex_lock(&k->mu);
    kentry *e = k->kb[key & (k->kb_cap - 1)];
    while (e && !entry_is(e, key, rel, t, m))
        e = e->next;
    if (e) {
        e->refs++;
        lru_unlink(k, e);
        int charged = e->weak && promote; /* a tested composition charged: its base is stale */
        e->weak = e->weak && !promote;
        lru_push(k, e);
        k->hits++;
        kentry *b = charged && e->base ? k->kb[e->base & (k->kb_cap - 1)] : NULL;
        while (b && !(b->key == e->base && b->rel == e->rel && !b->weak))
            b = b->next;
        if (b) { /* the history before the charge: among the first to go (a hint: a key match) */
            lru_unlink(k, b);
            b->weak = 1;
            b->lru_next = NULL;
            b->lru_prev = k->lru_tail[0];
            if (k->lru_tail[0])
                k->lru_tail[0]->lru_next = b;
            else
                k->lru_head[0] = b;
            k->lru_tail[0] = b;
        }
    }
    pthread_mutex_unlock(&k->mu);
    return e;
}

static kentry *kept_get(spend_kept *k, uint64_t key, dp_relation rel, const spend_term *t, size_t m)
{
    return kept_get_as(k, key, rel, t, m, 1);
}

static void kept_put(spend_kept *k, kentry *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&k->mu);
    int gone = --e->refs == 0 && !e->in_table;
    pthread_mutex_unlock(&k->mu);
    if (gone)
        kentry_free(e);
}

/* Out of the table (the caller holds the mutex); freed now or at its last reference. */
static void kept_evict(spend_kept *k, kentry *e)
{
    lru_unlink(k, e);
    kentry **p = &k->kb[e->key & (k->kb_cap - 1)];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    k->bytes -= e->bytes;
    k->entries--;
    e->in_table = 0;
    if (e->refs == 0)
        kentry_free(e);
}

/* A new entry (one reference, the caller's) for the sorted terms, its distributions taken
 * over from d (sym: d[0] only); NULL when out of memory (d freed). */
static kentry *kentry_new(const spend_term *t, size_t m, dp_relation rel, pld_pmf d[2], int sym,
                          int bad)
{
    kentry *e = calloc(1, sizeof *e + m * sizeof e->t[0]);
    if (e == NULL) {
        if (!bad) {
            pld_free(&d[0]);
            if (!sym)
                pld_free(&d[1]);
        }
        return NULL;
    }
    e->key = key_of(t, m, rel);
    e->rel = (uint8_t)rel;
    e->bad = (uint8_t)bad;
    e->sym = (uint8_t)(sym || bad);
    e->refs = 1;
    e->last_delta = NAN;
    e->m = m;
    for (size_t i = 0; i < m; i++) {
        e->t[i].sid = t[i].ev->sid;
        e->t[i].count = t[i].count;
    }
    if (!bad) {
        e->d[0] = d[0];
        if (!sym)
            e->d[1] = d[1];
    }
    e->bytes = sizeof *e + m * sizeof e->t[0] +
               (bad ? 0 : (e->d[0].n + (sym ? 0 : e->d[1].n)) * sizeof(double));
    return e;
}

/* Into the table (best effort: an entry larger than a quarter of the cap is not kept), as a
 * prospective entry when weak.
 * Returns the entry to use, referenced: e, or the equal one another thread kept meanwhile
 * (then e is given back). */
static kentry *kept_insert(spend_kept *k, kentry *e, int weak)
{
    pthread_mutex_lock(&k->mu);
    kentry *x = k->kb[e->key & (k->kb_cap - 1)];
    while (x && !(x->key == e->key && x->rel == e->rel && x->m == e->m &&
                  memcmp(x->t, e->t, e->m * sizeof e->t[0]) == 0))
        x = x->next;
    if (x) {
        x->refs++;
        pthread_mutex_unlock(&k->mu);
        kept_put(k, e);
        return x;
    }
    if (e->bytes > k->cap_bytes / 4 || k->cap_bytes == 0) {
        pthread_mutex_unlock(&k->mu);
        return e; /* used once, not kept */
    }
    while (lru_victim(k) && k->bytes + e->bytes > k->cap_bytes) {
        kept_evict(k, lru_victim(k));
        k->evicted++;
    }
    e->next = k->kb[e->key & (k->kb_cap - 1)];
    k->kb[e->key & (k->kb_cap - 1)] = e;
    e->in_table = 1;
    e->weak = (uint8_t)weak;
    lru_push(k, e);
    k->bytes += e->bytes;
    k->entries++;
    if (k->bytes > k->peak_bytes)
        k->peak_bytes = k->bytes;
    pthread_mutex_unlock(&k->mu);
    return e;
}

/* The distribution f (any grid) on the kept grid by connect-the-dots, its round-off bound
 * carried. DPB_EUNSUPPORTED for what the kept path does not compose (an exact Gaussian, a
 * tilted or floored distribution). */
static dpb_status coarsen(const pld_pmf *f, pld_pmf *out)
{
    if (f->gauss_mu > 0.0 || f->tilt.theta != 0.0 || isfinite(f->floor) || f->n == 0)
        return DPB_EUNSUPPORTED;
    double *loss = malloc(f->n * sizeof *loss), *mass = malloc(f->n * sizeof *mass);
    dpb_status st = DPB_ENOMEM;
    if (loss && mass) {
        for (size_t i = 0; i < f->n; i++) {
            loss[i] = (double)(f->lo + (int64_t)i) * f->h;
            mass[i] = f->p[i] > 0.0 ? f->p[i] : 0.0;
        }
        st = pld_atoms(loss, mass, f->n, f->inf_mass, SPEND_KEPT_H, out);
        if (st == DPB_OK) {
            out->roundoff = f->roundoff; /* an L1 bound: connect-the-dots keeps it */
            out->steps = f->steps;
        }
    }
    free(loss);
    free(mass);
    return st;
}

/* A power of an event at most this large (the counts of a short search: 12 of a DP-SGD step
 * are about 15 KiB) is kept as an ordinary entry; larger ones (a long search's, up to
 * 500 KiB) as prospective ones, so that they never push out the clients' histories. */
#define KEPT_SHARED_POWER_BYTES ((size_t)64 << 10)

/* The entry of `count` of event ev alone, referenced; NULL when out of memory. The event's
 * own distribution is made under single_mu, so that the threads of a round's prefetch make
 * it once. */
static kentry *kept_single(spend_kept *k, spend_event *ev, uint64_t count)
{
    spend_term one = {ev, count};
    uint64_t key = key_of(&one, 1, ev->rel);
    /* powers (eligibility's probes): large ones prospective, first out before clients'
     * histories; small ones (a short search's, shared by every client it asks about) as
     * ordinary entries, so that each history a search rebuilds does not evict them */
    kentry *e = kept_get_as(k, key, ev->rel, &one, 1, count == 1);
    if (e)
        return e;
    pld_pmf d[2];
    memset(d, 0, sizeof d);
    int sym = 1, bad = 0;
    if (count == 1) {
        pthread_mutex_lock(&k->single_mu);
        if ((e = kept_get(k, key, ev->rel, &one, 1)) != NULL) {
            pthread_mutex_unlock(&k->single_mu);
            return e;
        }
        pld_pmf f[2];
        dpb_error err = {0};
        const dp_event *tree = spend_event_tree(ev);
        if (tree == NULL ||
            dp_pld_pair_of(tree, ev->rel, SPEND_KEPT_FINE_H, f, &sym, &err) != DPB_OK) {
            bad = 1;
        } else {
            for (int i = 0; i < (sym ? 1 : 2) && !bad; i++)
                bad = coarsen(&f[i], &d[i]) != DPB_OK;
            pld_free(&f[0]);
            if (!sym)
                pld_free(&f[1]);
            if (bad) {
                pld_free(&d[0]);
                pld_free(&d[1]);
            }
        }
        e = kentry_new(&one, 1, ev->rel, d, sym, bad);
        e = e ? kept_insert(k, e, 0) : NULL;
        pthread_mutex_unlock(&k->single_mu);
        return e;
    }
    kentry *s = kept_single(k, ev, 1);
    if (s == NULL || s->bad) {
        kept_put(k, s);
        return NULL;
    }
    sym = s->sym;
    for (int i = 0; i < (sym ? 1 : 2) && !bad; i++)
        bad = pld_self_compose(&s->d[i], count, &d[i]) != DPB_OK;
    kept_put(k, s);
    if (bad) {
        pld_free(&d[0]);
        pld_free(&d[1]);
        return NULL;
    }
    pthread_mutex_lock(&k->mu);
    k->powers++;
    pthread_mutex_unlock(&k->mu);
    e = kentry_new(&one, 1, ev->rel, d, sym, 0);
    return e ? kept_insert(k, e, e->bytes > KEPT_SHARED_POWER_BYTES) : NULL;
}

/* Histories of at most this many distinct events are rebuilt by composing their terms one
 * by one (each a charge's composition: a direct sum of a few microseconds for a DP-SGD
 * history, and the same operations as the charges that made it when each event was charged
 * once, in order); longer ones in the Fourier domain at once (pld_compose_many). */
#define KEPT_FOLD_MAX 256

/* The kept distribution of the sorted terms t[0..m) composed from its events' own (a
 * restart's, an eviction's or a withdrawal's rebuild), referenced; NULL when the kept path
 * cannot make it. */
static kentry *kept_scratch(spend_kept *k, const spend_term *t, size_t m, dp_relation rel)
{
    pld_pmf d[2];
    memset(d, 0, sizeof d);
    if (m == 0) {
        if (pld_identity(SPEND_KEPT_H, &d[0]) != DPB_OK)
            return NULL;
        kentry *e = kentry_new(t, 0, rel, d, 1, 0);
        return e ? kept_insert(k, e, 0) : NULL;
    }
    kentry **s = calloc(m, sizeof *s);
    pld_term *pt = malloc(m * sizeof *pt);
    int ok = s != NULL && pt != NULL, sym = 1, fold = m <= KEPT_FOLD_MAX;
    for (size_t i = 0; ok && i < m; i++) {
        s[i] = kept_single(k, t[i].ev, fold ? t[i].count : 1);
        ok = s[i] != NULL && !s[i]->bad;
        sym = sym && ok && s[i]->sym;
    }
    for (int dir = 0; ok && dir < (sym ? 1 : 2); dir++) {
        if (fold) { /* the terms composed one by one in sid order, as charges compose them */
            ok = pld_copy(&s[0]->d[s[0]->sym ? 0 : dir], &d[dir]) == DPB_OK;
            for (size_t i = 1; ok && i < m; i++) {
                pld_pmf next = {0};
                ok = pld_compose_fft(&d[dir], &s[i]->d[s[i]->sym ? 0 : dir], &next) == DPB_OK;
                pld_free(&d[dir]);
                d[dir] = next;
            }
            continue;
        }
        for (size_t i = 0; i < m; i++)
            pt[i] = (pld_term){&s[i]->d[s[i]->sym ? 0 : dir], t[i].count};
        ok = pld_compose_many(pt, m, &d[dir]) == DPB_OK;
    }
    for (size_t i = 0; s && i < m; i++)
        kept_put(k, s[i]);
    free(s);
    free(pt);
    if (!ok) {
        pld_free(&d[0]);
        pld_free(&d[1]);
        return NULL;
    }
    pthread_mutex_lock(&k->mu);
    k->rebuilt++;
    pthread_mutex_unlock(&k->mu);
    kentry *e = kentry_new(t, m, rel, d, sym, 0);
    return e ? kept_insert(k, e, 0) : NULL;
}

/* a composed with b, both directions; the result not yet kept (one reference). */
static kentry *kept_compose(spend_kept *k, const kentry *a, const kentry *b, const spend_term *t,
                            size_t m, dp_relation rel)
{
    pld_pmf d[2];
    memset(d, 0, sizeof d);
    int sym = a->sym && b->sym, ok = 1;
    for (int dir = 0; ok && dir < (sym ? 1 : 2); dir++)
        ok = pld_compose_fft(&a->d[a->sym ? 0 : dir], &b->d[b->sym ? 0 : dir], &d[dir]) == DPB_OK;
    if (!ok) {
        pld_free(&d[0]);
        pld_free(&d[1]);
        return NULL;
    }
    pthread_mutex_lock(&k->mu);
    k->composed++;
    pthread_mutex_unlock(&k->mu);
    return kentry_new(t, m, rel, d, sym, 0);
}

/* The pld accountant's epsilon of an entry at delta (as the compute API reads a pair). */
static double entry_eps(spend_kept *k, kentry *e, double delta)
{
    pthread_mutex_lock(&k->mu);
    int have = e->last_delta == delta;
    double v = e->last_eps;
    pthread_mutex_unlock(&k->mu);
    if (have)
        return v;
    v = pld_epsilon(&e->d[0], delta);
    if (!e->sym) {
        double v1 = pld_epsilon(&e->d[1], delta);
        if (v1 > v)
            v = v1;
    }
    pthread_mutex_lock(&k->mu);
    e->last_delta = delta;
    e->last_eps = v;
    pthread_mutex_unlock(&k->mu);
    return v;
}

/* The history t[0..m) with n fewer of term j (a term left at 0 dropped), into stack when it
 * fits (32 terms), else into a malloc'ed array: the array, *mb its terms; NULL out of memory.
 * Free it when it is not stack. */
static spend_term *terms_less(const spend_term *t, size_t m, size_t j, uint64_t n,
                              spend_term stack[32], size_t *mb)
{
    spend_term *b = m <= 32 ? stack : malloc(m * sizeof *b);
    *mb = 0;
    for (size_t i = 0; b != NULL && i < m; i++) {
        b[*mb] = t[i];
        if (i == j)
            b[*mb].count -= n;
        *mb += b[*mb].count > 0;
    }
    return b;
}

static int kept_has_less(spend_kept *k, const spend_term *t, size_t m, dp_relation rel, uint64_t d);

int spend_kept_eps(spend_kept *k, const spend_term *t, size_t m, double delta, dp_relation rel,
                   const spend_event *x, uint64_t nx, int own, double *p)
{
    pthread_mutex_lock(&k->mu);
    int off = k->cap_bytes == 0;
    pthread_mutex_unlock(&k->mu);
    if (m == 0 || off)
        return 0;
    for (size_t i = 0; i < m; i++)
        if (t[i].ev->rel != rel || t[i].count == 0)
            return 0;
    /* a charge's test leaves a prospective entry so; the history of a client asked for
     * itself (own: the charge made, its status) promotes it */
    kentry *e = kept_get_as(k, key_of(t, m, rel), rel, t, m, own);
    if (e) {
        int good = !e->bad;
        if (good)
            *p = entry_eps(k, e, delta);
        kept_put(k, e);
        return good;
    }
    /* the composition as a base and k of one event: the hint's, else one or two of the last
     * term, whichever base is kept (two: a status's test computed ahead) */
    size_t j = m;
    uint64_t kx = 0;
    for (size_t i = 0; x != NULL && nx > 0 && i < m; i++)
        if (t[i].ev == x && t[i].count >= nx) {
            j = i;
            kx = nx;
        }
    if (j == m) {
        j = m - 1;
        kx = 1;
        if (t[j].count >= 2 && !kept_has_less(k, t, m, rel, 1) && kept_has_less(k, t, m, rel, 2))
            kx = 2;
    }
    spend_term stack[32];
    size_t mb;
    spend_term *b = terms_less(t, m, j, kx, stack, &mb);
    if (b == NULL)
        return 0;
    int ok = 0;
    kentry *base = kept_get(k, key_of(b, mb, rel), rel, b, mb);
    if (base == NULL && x == NULL) { /* no charge to extend by: the history from its events */
        if (b != stack)
            free(b);
        e = kept_scratch(k, t, m, rel);
        ok = e != NULL && !e->bad;
        if (ok)
            *p = entry_eps(k, e, delta);
        kept_put(k, e);
        return ok;
    }
    if (base == NULL)
        base = kept_scratch(k, b, mb, rel);
    kentry *step = base && !base->bad ? kept_single(k, t[j].ev, kx) : NULL;
    if (base && step && !base->bad && !step->bad) {
        e = kept_compose(k, base, step, t, m, rel);
        /* a charge's composition is kept (the next round of the client starts from it); the
         * probes of an eligibility search (k > 1) are not */
        if (e && kx == 1) {
            e->base = base->key;
            e = kept_insert(k, e, 1);
        }
        if (e) {
            *p = entry_eps(k, e, delta);
            ok = 1;
        }
        kept_put(k, e);
    }
    kept_put(k, base);
    kept_put(k, step);
    if (b != stack)
        free(b);
    if (!ok) {
        pthread_mutex_lock(&k->mu);
        k->fallbacks++;
        pthread_mutex_unlock(&k->mu);
    }
    return ok;
}

int spend_kept_any(spend_kept *k)
{
    pthread_mutex_lock(&k->mu);
    int any = k->entries > 0;
    pthread_mutex_unlock(&k->mu);
    return any;
}

int spend_kept_peek(spend_kept *k, const spend_term *t, size_t m, double delta, dp_relation rel,
                    int own, double *p)
{
    if (m == 0 || !spend_kept_any(k))
        return 0;
    kentry *e = kept_get_as(k, key_of(t, m, rel), rel, t, m, own);
    int good = e != NULL && !e->bad;
    if (good)
        *p = entry_eps(k, e, delta);
    kept_put(k, e);
    return good;
}

/* 1 when the sorted terms t[0..m) less d of the last term are kept (a hint). */
static int kept_has_less(spend_kept *k, const spend_term *t, size_t m, dp_relation rel, uint64_t d)
{
    uint64_t key = key_of(t, m, rel) - term_hash(t[m - 1].ev->sid, t[m - 1].count);
    if (t[m - 1].count > d)
        key += term_hash(t[m - 1].ev->sid, t[m - 1].count - d);
    pthread_mutex_lock(&k->mu);
    kentry *e = k->kb[key & (k->kb_cap - 1)];
    while (e && !(e->key == key && e->rel == (uint8_t)rel && !e->bad))
        e = e->next;
    pthread_mutex_unlock(&k->mu);
    return e != NULL;
}

/* An upper bound on delta(eps) of the composition of b and s (one direction each, same
 * grid), without composing them: the composition's delta is a linear functional of b,
 *   delta(eps) = inf + sum_i b_i D_s(eps - a_i),  D_s(x) = sum_{l_j > x} s_j (1 - e^{x - l_j}),
 * (a_i, l_j the grid losses; a_i + l_j > eps read as pld_delta reads a point), one pass over
 * each: D_s from the suffix sums S1 = sum s_j and S2 = sum s_j e^{-l_j} over the points past
 * the threshold. Added: the inputs' round-off as pld_convolve_roundoff carries it (their
 * composition's own transform is not made, so it adds none), and this evaluation's own:
 * every term is s_j (1 - e^{x - l_j}) in [0, s_j], each computed sum of n positive terms is
 * within (n + 2) u relative, and the difference S1 - e^x S2 within 4 (n + 2) u S1, so
 * 8 (n_s + n_b + 8) u sum_i b_i S1 bounds it all. The exponentials are exp at the first point
 * of each block of EXP_BLOCK points times a table of e^{-k h} (k < EXP_BLOCK): each within
 * 3 u relative of exp at that point (two correctly rounded factors within u, the product's
 * rounding), inside the same margin (n_s + n_b + 8 >= 8). NAN when out of memory. */
#define EXP_BLOCK 64

/* e^{-k h}, k < EXP_BLOCK, into e */
static void exp_steps(double h, double e[EXP_BLOCK])
{
    for (int k = 0; k < EXP_BLOCK; k++)
        e[k] = exp(-(double)k * h);
}

static double delta_of_pair(const pld_pmf *b, const pld_pmf *s, double eps)
{
    const double u = DBL_EPSILON, h = b->h;
    double *s1 = malloc(2 * (s->n + 1) * sizeof *s1);
    if (s1 == NULL)
        return NAN;
    double *s2 = s1 + s->n + 1;
    s1[s->n] = s2[s->n] = 0.0;
    double ss = 0.0, sb = 0.0, es[EXP_BLOCK], e0 = 0.0;
    exp_steps(h, es);
    for (size_t j = s->n; j-- > 0;) {
        double m = s->p[j] > 0.0 ? s->p[j] : 0.0;
        if (j == s->n - 1 || j % EXP_BLOCK == EXP_BLOCK - 1) /* e^{-l} at the block's first */
            e0 = exp(-(double)(s->lo + (int64_t)(j - j % EXP_BLOCK)) * h);
        s1[j] = s1[j + 1] + m;
        s2[j] = s2[j + 1] + m * (e0 * es[j % EXP_BLOCK]);
        ss += m;
    }
    /* the points m h > eps: m > mt */
    int64_t mt = (int64_t)floor(eps / h);
    while ((double)mt * h > eps)
        mt--;
    while ((double)(mt + 1) * h <= eps)
        mt++;
    double sum = 0.0, mass = 0.0, x0 = 0.0;
    size_t blk = SIZE_MAX; /* the block x0 is e^{x} at the first point of */
    for (size_t i = 0; i < b->n; i++) {
        double bi = b->p[i] > 0.0 ? b->p[i] : 0.0;
        sb += bi;
        if (bi == 0.0)
            continue;
        int64_t j0 = mt + 1 - b->lo - (int64_t)i - s->lo;
        if (j0 >= (int64_t)s->n)
            continue;
        if (j0 < 0)
            j0 = 0;
        if (i / EXP_BLOCK != blk) {
            blk = i / EXP_BLOCK;
            x0 = exp(eps - (double)(b->lo + (int64_t)(blk * EXP_BLOCK)) * h);
        }
        double d = s1[j0] - (x0 * es[i % EXP_BLOCK]) * s2[j0];
        sum += bi * (d > 0.0 ? d : 0.0);
        mass += bi * s1[j0];
    }
    free(s1);
    double inf = 1.0 - (1.0 - b->inf_mass) * (1.0 - s->inf_mass);
    double rin = b->roundoff * (ss + s->roundoff) + sb * s->roundoff;
    double slack = 8.0 * (double)(s->n + b->n + 8) * u * mass;
    return (inf + sum + rin + slack) * (1.0 + 8.0 * u) + 1e-300;
}

int spend_kept_admits(spend_kept *k, const spend_term *t, size_t m, double eps, double delta,
                      dp_relation rel, const spend_event *x, uint64_t nx, int *admits)
{
    pthread_mutex_lock(&k->mu);
    int off = k->cap_bytes == 0;
    pthread_mutex_unlock(&k->mu);
    if (m == 0 || off || x == NULL || nx == 0)
        return 0;
    size_t j = m;
    for (size_t i = 0; i < m; i++) {
        if (t[i].ev->rel != rel || t[i].count == 0)
            return 0;
        if (t[i].ev == x && t[i].count >= nx)
            j = i;
    }
    if (j == m)
        return 0;
    kentry *e = kept_get_as(k, key_of(t, m, rel), rel, t, m, 0);
    if (e) { /* the composition is kept: its value decides */
        int good = !e->bad;
        if (good)
            *admits = entry_eps(k, e, delta) <= eps;
        kept_put(k, e);
        return good;
    }
    spend_term stack[32];
    size_t mb;
    spend_term *b = terms_less(t, m, j, nx, stack, &mb);
    if (b == NULL)
        return 0;
    kentry *base = kept_get(k, key_of(b, mb, rel), rel, b, mb);
    if (base == NULL)
        base = kept_scratch(k, b, mb, rel);
    kentry *step = base && !base->bad ? kept_single(k, t[j].ev, nx) : NULL;
    int ok = 0;
    if (base && step && !base->bad && !step->bad) {
        int sym = base->sym && step->sym;
        double worst = 0.0;
        for (int dir = 0; dir < (sym ? 1 : 2); dir++) {
            double d =
                delta_of_pair(&base->d[base->sym ? 0 : dir], &step->d[step->sym ? 0 : dir], eps);
            worst = d > worst || d != d ? d : worst;
        }
        ok = worst == worst;
        *admits = worst <= delta;
    }
    kept_put(k, base);
    kept_put(k, step);
    if (b != stack)
        free(b);
    return ok;
}

void spend_kept_set_cap(spend_kept *k, size_t cap_bytes)
{
    pthread_mutex_lock(&k->mu);
    k->cap_bytes = cap_bytes;
    while (lru_victim(k) && k->bytes > cap_bytes) {
        kept_evict(k, lru_victim(k));
        k->evicted++;
    }
    pthread_mutex_unlock(&k->mu);
}

void spend_kept_stats(spend_kept *k, spend_stats *s)
{
    pthread_mutex_lock(&k->mu);
    s->kept_entries = k->entries;
    s->kept_bytes = k->bytes;
    s->kept_peak_bytes = k->peak_bytes;
    s->kept_cap_bytes = k->cap_bytes;
    s->kept_composed = k->composed;
    s->kept_rebuilt = k->rebuilt;
    s->kept_evicted = k->evicted;
    s->kept_fallbacks = k->fallbacks;
    s->kept_powers = k->powers;
    pthread_mutex_unlock(&k->mu);
}
