/*
 * spend_int.h - the inside of the spend engine (spend.h), shared by its four files and by
 * nothing else. Each file holds one concern, and the calls run one way (an arrow: "may call"):
 *
 *   spend_memo.c  -> spend_eval.c, spend_cache.c   a client's memo (spend_eval_more,
 *                                                  spend_rdp_within)
 *   spend_eval.c  -> spend_cache.c                 the spend per mode (spend_eval,
 *                                                  spend_refine, spend_prefetch,
 *                                                  spend_accountant_of)
 *   spend.c       -> spend_cache.c                 the engine's life cycle, the event
 *                                                  registry, the figures
 *   spend_cache.c                                  the cache of PLD values and its key;
 *                                                  computing a PLD value
 *
 * spend.c is called by none of the other three: they read the registered events' fields
 * below (sid, ev, cls), which never change once set: ev and cls are set once, by
 * spend_event_ready, before any caller builds a term of the event (spend.h).
 */
#ifndef LEDGER_SPEND_INT_H
#define LEDGER_SPEND_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "../dp/rdp.h"
#include "spend.h"

/* A registered event (spend.c owns it; the others borrow it through the callers' terms). */
struct spend_event {
    uint32_t sid; /* registration order; never reused */
    uint32_t refs;
    uint64_t hash;
    dp_relation rel;
    unsigned char *bytes;
    size_t nbytes;
    atomic_int ready; /* ev, cls, rdp and why are set (spend_event_ready); never unset */
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

/* The cache of PLD values (spend_cache.c), one per engine, under its own mutex. */
typedef struct {
    pthread_mutex_t mu;
    centry **cb; /* hash buckets, cb_cap of them (a power of 2) */
    size_t cb_cap;
    centry *lru_head, *lru_tail; /* most recently used first */
    spend_stats st;              /* entries, bytes, cap_bytes, hits, misses, pld_computed */
} spend_cache;

struct spend_engine {
    pthread_mutex_t mu; /* the registry */
    spend_event **reg;
    size_t reg_cap, reg_n;
    uint32_t next_sid;
    uint64_t classified; /* events decoded and classified (spend_event_ready), under mu */
    spend_cache cache;
};

/* r += count times the RDP curve v: every sum of curves in the engine is a left fold of this
 * one step, so a fold kept and continued (the clients' memos) gives the same bits as one
 * done whole. */
static inline void spend_add_curve(double *r, const double *v, uint64_t count)
{
    double cnt = (double)count;
    for (size_t k = 0; k < RDP_NORDERS; k++)
        r[k] += cnt * v[k];
}

/* ---- spend_cache.c ---- */

/* Set up an empty cache of at most cap_bytes (> 0). 0, or -1 when out of memory (nothing
 * to release then). */
int spend_cache_init(spend_cache *c, size_t cap_bytes);

/* Free every entry and the buckets (no call may be in progress). */
void spend_cache_release(spend_cache *c);

/* The cache key of a sorted multiset, a left fold: spend_key_start of (delta, rel), then
 * spend_key_term once per term in sid order. spend_cache_key is the whole fold of t[0..m). */
uint64_t spend_key_start(double delta, dp_relation rel);
uint64_t spend_key_term(uint64_t k, uint32_t sid, uint64_t count);
uint64_t spend_cache_key(double delta, dp_relation rel, const spend_term *t, size_t m);

/* 1 and *pld when the cache holds the value of the sorted terms t[0..m) (key their cache
 * key) at (delta, rel), which becomes the most recently used; else 0, counted as a miss
 * when count_miss. */
int spend_cache_get(spend_cache *c, uint64_t key, double delta, dp_relation rel,
                    const spend_term *t, size_t m, double *pld, int count_miss);

/* 1 when some entry has cache key key (whatever its terms): a hint only, no hit counted. */
int spend_cache_has_key(spend_cache *c, uint64_t key);

/* The pld accountant's eps of the sorted terms t[0..m) (key their cache key) at (delta,
 * rel): cached, or computed (without the cache's lock) and kept, best effort. +inf when it
 * certifies nothing, or when the calling thread's cancellation scope fired (then nothing is
 * kept). */
double spend_pld_of(spend_cache *c, uint64_t key, const spend_term *t, size_t m, double delta,
                    dp_relation rel);

/* Copy the cache's figures into *s. */
void spend_cache_stats(spend_cache *c, spend_stats *s);

/* ---- spend_eval.c ---- */

/* The rdp accountant's conversion of the summed RDP curves r (RDP_NORDERS values) at delta
 * (0 < delta < 1): min over orders of rdp_eps_at, rounded up; 0 when it is <= 0. */
double spend_rdp_convert(const double *r, double delta);

/* The rdp_filter's level of the summed RDP curves r at delta (docs/FILTERS.md), rounded up. */
double spend_filter_level(const double *r, double delta);

/* A pld client's spend into out (zeroed by the caller but for accountant -1, spent +inf)
 * from the rdp value r of the sorted terms t[0..m) (m > 0) whose cache key is key: r when
 * r <= eps (or the cached PLD value when it is smaller), else min(PLD, r) with the PLD
 * computed through the cache. */
void spend_pld_decide(spend_engine *g, double eps, double delta, dp_relation rel,
                      const spend_term *t, size_t m, double r, uint64_t key, spend_result *out);

#endif
