/*
 * spend_int.h - the inside of the spend engine (spend.h), shared by its four files and by
 * nothing else. Each file holds one concern, and the calls run one way (an arrow: "may call"):
 *
 *   spend_memo.c  -> spend_eval.c, spend_cache.c,  a client's memo (spend_eval_more,
 *                    spend_kept.c
 *                                                  spend_rdp_within)
 *   spend_eval.c  -> spend_cache.c                 the spend per mode (spend_eval,
 *                                                  spend_refine, spend_prefetch,
 *                                                  spend_accountant_of)
 *   spend.c       -> spend_cache.c, spend_kept.c   the engine's life cycle, the event
 *                                                  registry, the figures
 *   spend_eval.c  -> spend_kept.c                  (the pld decision reads kept compositions)
 *   spend_cache.c                                  the cache of PLD values and its key;
 *                                                  computing a PLD value
 *   spend_kept.c                                   the kept compositions of pld histories
 *
 * spend.c is called by none of the other three: they read the registered events' fields
 * below (sid, ev, cls), which never change once set: cls is set once, by spend_event_ready,
 * before any caller builds a term of the event (spend.h); ev (the decoded tree, which only
 * the PLD paths read) through spend_event_tree.
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
    atomic_int ready; /* cls, rdp and why are set (spend_event_ready); never unset */
    /* the decoded tree: set by spend_event_ready when it classifies, or at its first use
     * (spend_event_tree: an event readied from a stored profile is not decoded until a PLD
     * needs it); never unset */
    _Atomic(dp_event *) ev;
    spend_class cls;
    double *rdp;
    char why[200];
    /* a stored profile (spend_event_set_profile) spend_event_ready uses, until then */
    int has_pend;
    spend_class pend;
    double *pend_rdp;
    char pend_why[200];
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

/* The grid step of kept compositions: 50 times the compute API's, so that a charge's
 * composition is one transform of about 4,000 points; the excess this costs is stated in
 * docs/ACCOUNTING.md (measured: about 0.002% of epsilon per distinct event composed). */
#define SPEND_KEPT_H 5e-3
/* The grid an event's own distribution is computed on before it is moved onto SPEND_KEPT_H
 * (2.5 times the compute API's: a new event costs a third of the time, and the excess grows
 * from 0.19% to 0.21% of epsilon over 100 events, measured) */
#define SPEND_KEPT_FINE_H 2.5e-4

/* The kept compositions (spend_kept.c), one set per engine, under their own mutex; entries
 * are used outside it (referenced). single_mu: held while an event's own distribution is
 * made, so that concurrent callers make it once. */
typedef struct kentry kentry;
typedef struct {
    pthread_mutex_t mu, single_mu;
    kentry **kb; /* hash buckets, kb_cap of them (a power of 2) */
    size_t kb_cap;
    kentry *lru_head[2], *lru_tail[2]; /* prospective entries, the others: most recent first */
    size_t entries, bytes, peak_bytes, cap_bytes; /* cap_bytes 0: none kept */
    uint64_t hits, composed, rebuilt, evicted, fallbacks;
    uint64_t powers; /* powers of an event made (spend_stats.kept_powers) */
} spend_kept;

struct spend_engine {
    pthread_mutex_t mu; /* the registry */
    spend_event **reg;
    size_t reg_cap, reg_n;
    uint32_t next_sid;
    uint64_t classified;      /* events decoded and classified (spend_event_ready), under mu */
    uint64_t restored;        /* events readied from a stored profile, under mu */
    atomic_ullong rdp_summed; /* spend_stats.rdp_summed */
    spend_cache cache;
    spend_kept kept;
};

/* r += count times the RDP curve v: every sum of curves in the engine is a left fold of this
 * one step, so a fold kept and continued (the clients' memos) gives the same bits as one
 * done whole. */
static inline void spend_add_curve(double *r, const double *v, uint64_t count)
{
    double cnt = (double)count;
    for (size_t k = 0; k < RDP_CURVE_LEN; k++)
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

/* ---- spend_kept.c ---- */

/* Set up an empty set of kept compositions of at most cap_bytes (0: none is kept, and
 * spend_kept_eps always answers 0). 0, or -1 when out of memory. */
int spend_kept_init(spend_kept *k, size_t cap_bytes);
void spend_kept_release(spend_kept *k);
/* A new cap (0: none kept): past it the least recently used are evicted at once. */
void spend_kept_set_cap(spend_kept *k, size_t cap_bytes);

/* 1 and *p, the pld accountant's epsilon at delta (an upper bound, rounded up; +inf when it
 * certifies nothing) of the sorted terms t[0..m) (m > 0, every event of relation rel), read
 * from the kept composition of t, or of t less nx of event x (the hint: a charge's x and
 * count; x NULL: less one of the last term) extended by nx of x, or of a base rebuilt from
 * its events; a composition of one more of an event (nx 1, or no hint) is kept, as a
 * prospective entry unless own (t is a client's own history, asked for itself: the charge
 * made, its spend recomputed), which also marks the history it extended stale. 0 when the
 * kept path cannot answer (an event it does not compose, out of memory): the caller
 * computes the value from scratch. Any thread, any number at once. */
int spend_kept_eps(spend_kept *k, const spend_term *t, size_t m, double delta, dp_relation rel,
                   const spend_event *x, uint64_t nx, int own, double *p);

/* 1 and *admits: whether the sorted terms t[0..m), holding nx of x more than a history,
 * have a pld epsilon at most eps at delta, decided from the history's kept composition and
 * x's nx-th power without composing them (a linear functional, one pass over each: an
 * upper bound on delta(eps) carrying the inputs' round-off, not a transform's), or from the
 * composition's kept value. 0 when the kept path cannot decide it. Any thread. */
int spend_kept_admits(spend_kept *k, const spend_term *t, size_t m, double eps, double delta,
                      dp_relation rel, const spend_event *x, uint64_t nx, int *admits);

/* 1 when some composition is kept (a hint), and spend_kept_eps of an exactly kept
 * composition only (nothing computed): 0 when it is not kept. own: t is a client's own
 * history asked for itself, promoted as spend_kept_eps's own (else its recency unchanged). */
int spend_kept_any(spend_kept *k);
int spend_kept_peek(spend_kept *k, const spend_term *t, size_t m, double delta, dp_relation rel,
                    int own, double *p);

/* The kept compositions' figures into s's kept_* fields. */
void spend_kept_stats(spend_kept *k, spend_stats *s);

/* ---- spend_eval.c ---- */

/* spend_eval with the hint of spend_pld_decide: t holds nx of x more than the client's
 * history (x NULL: no hint). */
void spend_eval_x(spend_engine *g, int mode, double eps, double delta, dp_relation rel,
                  spend_term *t, size_t m, const spend_event *x, uint64_t nx, spend_result *out);

/* The rdp accountant's conversion of the summed RDP curves r (RDP_CURVE_LEN values) at delta
 * (0 < delta < 1): min over orders of rdp_eps_at and the order infinity, rounded up; 0 when
 * it is <= 0. The same arithmetic as dp_rdp_lazy, so the same bits as POST /v1/epsilon. */
double spend_rdp_convert(const double *r, double delta);

/* The rdp_filter's level of the summed RDP curves r at delta (docs/FILTERS.md), rounded up. */
double spend_filter_level(const double *r, double delta);

/* A pld client's spend into out (zeroed by the caller but for accountant -1, spent +inf)
 * from the rdp value r of the sorted terms t[0..m) (m > 0) whose cache key is key: r when
 * r <= eps (or the cached PLD value when it is smaller), else min(PLD, r) with the PLD the
 * cached value of the compute API, or the kept composition's (spend_kept_eps, hint x and
 * nx: t holds nx of x more than the client's history; x NULL: none), or computed through
 * the cache. */
void spend_pld_decide(spend_engine *g, double eps, double delta, dp_relation rel,
                      const spend_term *t, size_t m, double r, uint64_t key, const spend_event *x,
                      uint64_t nx, spend_result *out);

/* The event's decoded tree (for a PLD), decoded here at its first use when
 * spend_event_ready did not (a stored profile): the first to publish wins. NULL when it
 * cannot be decoded now (out of memory): the caller certifies nothing with it. */
static inline const dp_event *spend_event_tree(spend_event *e)
{
    dp_event *t = atomic_load_explicit(&e->ev, memory_order_acquire);
    if (t != NULL)
        return t;
    if (dp_event_decode(e->bytes, e->nbytes, &t, NULL) != DPB_OK)
        return NULL;
    dp_event *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(&e->ev, &none, t, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        dp_event_free(t);
        return none; /* another thread's */
    }
    return t;
}

#endif
