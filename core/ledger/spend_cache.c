/*
 * spend_cache.c - the cache of PLD values of the spend engine (spend_int.h): its key (a
 * left fold over a sorted multiset), lookups, best-effort insertion with LRU eviction under
 * a byte cap, and the computation of a value it misses (the pld accountant through
 * dp_epsilon_ex, the same entry point as the compute API).
 *
 * May call: dp/ (event, account), common/cancel, fnv.h. Called by spend.c (life cycle,
 * figures), spend_eval.c and spend_memo.c; calls none of them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"
#include "../dp/account.h"
#include "fnv.h"
#include "spend_int.h"

int spend_cache_init(spend_cache *ch, size_t cap_bytes)
{
    ch->cb_cap = 4096;
    ch->cb = calloc(ch->cb_cap, sizeof *ch->cb);
    if (ch->cb == NULL)
        return -1;
    ch->st.cap_bytes = cap_bytes;
    pthread_mutex_init(&ch->mu, NULL);
    return 0;
}

void spend_cache_release(spend_cache *ch)
{
    for (centry *c = ch->lru_head, *n; c; c = n) {
        n = c->lru_next;
        free(c);
    }
    free(ch->cb);
    pthread_mutex_destroy(&ch->mu);
}

uint64_t spend_key_start(double delta, dp_relation rel)
{
    uint64_t k = fnv64(&delta, sizeof delta, 14695981039346656037ULL);
    unsigned char r = (unsigned char)rel;
    return fnv64(&r, 1, k);
}

uint64_t spend_key_term(uint64_t k, uint32_t sid, uint64_t count)
{
    k = fnv64(&sid, sizeof sid, k);
    return fnv64(&count, sizeof count, k);
}

uint64_t spend_cache_key(double delta, dp_relation rel, const spend_term *t, size_t m)
{
    uint64_t k = spend_key_start(delta, rel);
    for (size_t i = 0; i < m; i++)
        k = spend_key_term(k, t[i].ev->sid, t[i].count);
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

static void lru_unlink(spend_cache *ch, centry *c)
{
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else
        ch->lru_head = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else
        ch->lru_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
}

static void lru_push(spend_cache *ch, centry *c)
{
    c->lru_prev = NULL;
    c->lru_next = ch->lru_head;
    if (ch->lru_head)
        ch->lru_head->lru_prev = c;
    ch->lru_head = c;
    if (ch->lru_tail == NULL)
        ch->lru_tail = c;
}

int spend_cache_get(spend_cache *ch, uint64_t key, double delta, dp_relation rel,
                    const spend_term *t, size_t m, double *pld, int count_miss)
{
    pthread_mutex_lock(&ch->mu);
    for (centry *c = ch->cb[key & (ch->cb_cap - 1)]; c; c = c->next)
        if (centry_is(c, key, delta, rel, t, m)) {
            lru_unlink(ch, c);
            lru_push(ch, c);
            *pld = c->pld;
            ch->st.hits++;
            pthread_mutex_unlock(&ch->mu);
            return 1;
        }
    ch->st.misses += count_miss ? 1 : 0;
    pthread_mutex_unlock(&ch->mu);
    return 0;
}

static void cache_evict_tail(spend_cache *ch)
{
    centry *c = ch->lru_tail;
    lru_unlink(ch, c);
    centry **p = &ch->cb[c->key & (ch->cb_cap - 1)];
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    ch->st.bytes -= c->bytes;
    ch->st.entries--;
    free(c);
}

/* Best effort: a value not kept is computed again when asked for. */
static void cache_put(spend_cache *ch, uint64_t key, double delta, dp_relation rel,
                      const spend_term *t, size_t m, double pld)
{
    size_t bytes = sizeof(centry) + m * sizeof(((centry *)0)->t[0]);
    if (bytes > ch->st.cap_bytes / 4)
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
    pthread_mutex_lock(&ch->mu);
    for (centry *x = ch->cb[key & (ch->cb_cap - 1)]; x; x = x->next)
        if (centry_is(x, key, delta, rel, t, m)) { /* computed meanwhile by another */
            pthread_mutex_unlock(&ch->mu);
            free(c);
            return;
        }
    while (ch->lru_tail && ch->st.bytes + bytes > ch->st.cap_bytes)
        cache_evict_tail(ch);
    c->next = ch->cb[key & (ch->cb_cap - 1)];
    ch->cb[key & (ch->cb_cap - 1)] = c;
    lru_push(ch, c);
    ch->st.bytes += bytes;
    ch->st.entries++;
    pthread_mutex_unlock(&ch->mu);
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
            const dp_event *tree = spend_event_tree(t[i].ev);
            dp_event *sc = tree ? dp_event_new(DP_EV_SELF_COMPOSED) : NULL;
            if (sc == NULL)
                break;                           /* nothing certified: +inf */
            sc->u.self.event = (dp_event *)tree; /* borrowed: detached before free */
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
double spend_pld_of(spend_cache *ch, uint64_t key, const spend_term *t, size_t m, double delta,
                    dp_relation rel)
{
    double p;
    if (spend_cache_get(ch, key, delta, rel, t, m, &p, 1))
        return p;
    p = pld_compute(t, m, delta, rel);
    if (dpb_cancelled())
        return HUGE_VAL; /* abandoned (spend_refine's caller closing): nothing kept */
    pthread_mutex_lock(&ch->mu);
    ch->st.pld_computed++;
    pthread_mutex_unlock(&ch->mu);
    cache_put(ch, key, delta, rel, t, m, p);
    return p;
}

int spend_cache_has_key(spend_cache *ch, uint64_t key)
{
    int found = 0;
    pthread_mutex_lock(&ch->mu);
    for (centry *c = ch->cb[key & (ch->cb_cap - 1)]; c && !found; c = c->next)
        found = c->key == key;
    pthread_mutex_unlock(&ch->mu);
    return found;
}

void spend_cache_stats(spend_cache *ch, spend_stats *s)
{
    pthread_mutex_lock(&ch->mu);
    *s = ch->st;
    pthread_mutex_unlock(&ch->mu);
}
