/*
 * spend.h - what a client has spent: the one place that turns a multiset of charged events
 * into the spend a ledger client shows and is admitted on (docs/ARCHITECTURE.md, "The
 * ledger").
 *
 * Events are held by content (their encoding and neighbouring relation) in a registry shared
 * by the whole ledger: each distinct event is decoded and classified once (its RDP curve,
 * total-variation part, Gaussian-DP mu^2), and gets an id never reused while the engine
 * lives, so spends can be computed and cached by content, before an event has a place in
 * the ledger's log and outside the ledger's lock.
 *
 * Spend per accounting mode, for a budget (eps, delta):
 *   rdp: the improved conversion of the summed RDP curves at delta - d_tv (d_tv: the
 *     shuffled epochs' total-variation part), as the rdp accountant computes it;
 *   pld: the cheaper of two certified upper bounds that decides: the rdp accountant's value
 *     r of the composition when r <= eps (a round is admitted on it at once, whatever the
 *     PLD says), else the pld accountant's value p of the composition (the pessimistic PLD,
 *     computed only then: near or past the budget, or found in the cache, or by
 *     spend_refine), min(p, r). Past the rdp bound p is read from the client's kept
 *     composition (spend_kept.c: extended by one composition per charge, on the coarser grid
 *     SPEND_KEPT_H) unless the value cache holds the compute API's own value. The result
 *     names the accountant it is (DP_ACCT_RDP or DP_ACCT_PLD): POST /v1/epsilon with that
 *     accountant on the same composition answers the same number (rdp; pld from the cache),
 *     or, for a kept composition, a number at most its stated excess below it
 *     (docs/ACCOUNTING.md, "Kept compositions");
 *   rdp_filter, gdp_filter: the filters' levels (docs/FILTERS.md).
 * PLD values are kept in a cache keyed by the exact multiset (and mode, relation, budget), of
 * at most the bytes given to spend_engine_new: a value evicted is computed again, the same.
 *
 * Thread-safe: any call from any thread; nothing here waits for a computation but its own.
 */
#ifndef LEDGER_SPEND_H
#define LEDGER_SPEND_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"
#include "../dp/account.h"
#include "../dp/event.h"
#include "../dp/rdp.h"

/* What a single event is to the accountants of the ledger. */
enum {
    SPEND_RDP = 0,           /* has an RDP curve */
    SPEND_TV = 1,            /* a (0, d) total-variation bound (shuffled epochs) */
    SPEND_UNCERTIFIABLE = 2, /* cannot be certified (unclipped SGLD) */
    SPEND_PLD_ONLY = 3,      /* no RDP curve, but a PLD */
    SPEND_NOT_COVERED = 4    /* outside every theorem the ledger uses */
};

typedef struct {
    int kind;
    const double *rdp; /* RDP_CURVE_LEN values, kind SPEND_RDP; else NULL */
    double tvlog;      /* ln(1 - d) for SPEND_TV */
    double mu2;        /* gdp_ok: mu^2 of a composition of unsampled Gaussians */
    int gdp_ok;
    const char *why; /* for SPEND_PLD_ONLY, SPEND_NOT_COVERED, SPEND_UNCERTIFIABLE ("" else) */
} spend_class;

typedef struct spend_engine spend_engine;
typedef struct spend_event spend_event;

/* Default size of the PLD value cache (bytes). */
#define SPEND_CACHE_BYTES ((size_t)32 << 20)

/* Default cap of the kept compositions (spend_kept.c; bytes): a pld client past its rdp bound
 * holds one distribution pair, about 2 x 1,300 points of 8 bytes on the grid SPEND_KEPT_H for
 * a DP-SGD history (bench_pld_ledger prints the figure), so about 3,000 such clients fit. */
#define SPEND_KEPT_BYTES ((size_t)64 << 20) /* ledger.h: LEDGER_KEPT_MIB_DEFAULT */

/* cache_bytes 0: SPEND_CACHE_BYTES. NULL when out of memory. */
spend_engine *spend_engine_new(size_t cache_bytes);

/* The kept compositions' cap (spend_kept.c; bytes, 0: none kept, every pld value past the
 * rdp bound composed from scratch): lowering it evicts at once. */
void spend_engine_kept_cap(spend_engine *g, size_t bytes);
void spend_engine_free(spend_engine *g);

/* The registered event for (bytes, rel), registered (decoded, classified) if new; a
 * reference the caller gives back with spend_event_put. DPB_ECORRUPT if bytes do not
 * decode, DPB_ENOMEM. */
dpb_status spend_event_get(spend_engine *g, const unsigned char *bytes, size_t n, dp_relation rel,
                           spend_event **out);
/* spend_event_get without the classification (a ledger being recovered registers its whole
 * vocabulary, most of which no spend to compute will read): the bytes are checked to decode,
 * nothing else is computed until spend_event_ready. */
dpb_status spend_event_get_lazy(spend_engine *g, const unsigned char *bytes, size_t n,
                                dp_relation rel, spend_event **out);
/* Decode and classify e once (any thread; the first to finish publishes): required before
 * spend_event_class or a term of e is read. Until then e reads as SPEND_NOT_COVERED. DPB_OK,
 * DPB_ENOMEM (e stays as it was: the next call tries again). */
dpb_status spend_event_ready(spend_engine *g, spend_event *e);
int spend_event_is_ready(const spend_event *e); /* 1 after spend_event_ready succeeded */

/* ---- stored profiles: what spend_event_ready computes, kept with the event in the log and
 * the snapshot, so that recovery does not compute it again. A profile is the class's fields
 * (kind, gdp_ok, mu2, tvlog, why) and, for SPEND_RDP, the RDP curve (RDP_CURVE_LEN doubles,
 * bit for bit), little-endian, tagged with SPEND_PROFILE_VERSION and closed by a CRC-32C of
 * its bytes. A stored profile is used only when its version is this code's: a profile of
 * another version is dropped and the event classified again at its first use. Bump
 * SPEND_PROFILE_VERSION whenever a class's numbers could change (dp_rdp_curve, the GDP or
 * total-variation parts): tests/unit/test_vocab.c pins the profiles of reference events to
 * it. Events of at most SPEND_PROFILE_MIN_BYTES encoded bytes (one mechanism: a Gaussian,
 * a Laplace) are classified in microseconds and carry none. */
#define SPEND_PROFILE_VERSION 1u
#define SPEND_PROFILE_MIN_BYTES 16
#define SPEND_PROFILE_MAX (4 + 1 + 1 + 8 + 8 + 1 + 200 + 2 + 8 * RDP_CURVE_LEN + 4)
/* e's profile into out (SPEND_PROFILE_MAX bytes at most): its length, or 0 when e has none
 * to give (not classified yet and none stored, or at most SPEND_PROFILE_MIN_BYTES bytes). */
size_t spend_event_profile(spend_engine *g, const spend_event *e, unsigned char *out);
/* Give e the stored profile p[0..n) for spend_event_ready to use instead of classifying:
 * 0 when kept (or e is already classified), 1 when p is of another SPEND_PROFILE_VERSION
 * (dropped), -1 when p is damaged (its length, CRC or fields). The caller holds e to itself
 * or the ledger's write lock. */
int spend_event_set_profile(spend_engine *g, spend_event *e, const unsigned char *p, size_t n);
void spend_event_ref(spend_engine *g, spend_event *e); /* one more reference */
void spend_event_put(spend_engine *g, spend_event *e);
/* The event's encoding (borrowed: valid while a reference is held). */
const unsigned char *spend_event_bytes(const spend_event *e, size_t *n);
const spend_class *spend_event_class(const spend_event *e);

/* One term of a client's history: count charges of an event. */
typedef struct {
    spend_event *ev;
    uint64_t count;
} spend_term;

typedef struct {
    double spent;     /* eps at the budget's delta, rounded up; +inf when none is certified */
    double dtv;       /* the total-variation part (rdp mode) */
    int uncertified;  /* an uncertifiable event: infinite, for good */
    int unsupported;  /* the mode cannot account an event */
    int accountant;   /* the dp_accountant whose value spent is, or -1 (a filter's level, a
                       * total-variation part, nothing certified) */
    int pld_computed; /* the PLD was evaluated (or found in the cache) for this answer */
} spend_result;

/* The spend of the multiset t[0..m) (terms of distinct events, any order; reordered here)
 * for a client of accounting mode `mode` (a ledger_mode), budget (eps, delta) and relation. */
void spend_eval(spend_engine *g, int mode, double eps, double delta, dp_relation rel, spend_term *t,
                size_t m, spend_result *out);

/* A client's memo (below): NULL until spend_eval_more makes one. */
typedef struct spend_memo spend_memo;
void spend_memo_free(spend_memo *mm);
size_t spend_memo_bytes(const spend_memo *mm);

/* spend_eval of the terms t[0..n) (distinct events, the caller's order; not reordered) with k
 * more of event x (k 0: none), the same result bit for bit, at a cost that does not grow with
 * n when the client's memo covers the composition (then O(n) comparisons and no sum over the
 * history).
 *
 * The memo keeps, for rdp, rdp_filter and pld clients whose terms all have an RDP curve (and
 * at least SPEND_MEMO_MIN of them), what spend_eval computes as left folds in sid order: the
 * summed RDP curves and the cache key state over every term but the highest-sid one. It
 * covers a composition whose sid-sorted terms begin with exactly those: the same terms
 * with only the last one's count changed, plus events registered after them (a round's new
 * event, or the last one again), which is a client's next round in the common cases. The
 * memo is checked against t in full before each use, so it is never stale: a composition it
 * does not cover (an older event again, a withdrawn charge, held reservations, another delta)
 * is computed by spend_eval from scratch.
 *
 * memo: the client's memo (or NULL), only read: any number of callers at once. update (only
 * with k 0): NULL, or where the client's memo is kept, by a caller that has it to itself (the
 * ledger's write lock); memo is then *update, made to cover t from now on: advanced by the new
 * terms, rebuilt, or freed (*update NULL) when the client is not one a memo serves. */
#define SPEND_MEMO_MIN 16
void spend_eval_more(spend_engine *g, const spend_memo *memo, spend_memo **update, int mode,
                     double eps, double delta, dp_relation rel, const spend_term *t, size_t n,
                     spend_event *x, uint64_t k, spend_result *out);

/* Whether this thread's spend_eval_more calls with k > 0 want only the admission (spend <=
 * eps) where a pld client's kept composition decides it (eligibility's probes, the honest
 * status's test): then spent is eps when admitted and +inf when not (both upper bounds),
 * decided in one pass over the kept distribution and the event's k-th power, not a
 * composition. on 0 (the default): the value. */
void spend_decide_only(int on);

/* 1 when the memo shows, without computing any PLD, that spend_eval_more of the same pld
 * composition is decided by its rdp value within the budget eps (the prefetch's test). */
int spend_rdp_within(spend_engine *g, const spend_memo *memo, double eps, double delta,
                     dp_relation rel, const spend_term *t, size_t n, spend_event *x, uint64_t k);
/* The same composition's rdp value (spend_eval's, bit for bit) into *r when the memo covers
 * it: 1; else 0 (nothing summed). For spend_candidate.rdp. */
int spend_rdp_value(const spend_memo *memo, double delta, dp_relation rel, const spend_term *t,
                    size_t n, spend_event *x, uint64_t k, double *r);

/* The spend of a pld client (as spend_eval) with the PLD value always computed (through the
 * same cache): min(p, r) naming its accountant, also when r is within the budget. *stop
 * (read atomically; NULL: never) abandons the computation: then accountant is -1 and
 * nothing is cached. For the ledger's background refinement (off the request path). */
void spend_refine(spend_engine *g, double eps, double delta, dp_relation rel, spend_term *t,
                  size_t m, const int *stop, spend_result *out);

/* A pld client's spend to be: its budget, relation and terms (reordered by spend_prefetch). */
typedef struct {
    double eps, delta;
    dp_relation rel;
    spend_term *t;
    size_t m;
    int rdp_known; /* 1: rdp is the terms' rdp value (spend_rdp_value, under the lock that
                    * the memo needs); 0 (as a candidate made without it): summed here */
    double rdp;
} spend_candidate;

/* Most threads spend_prefetch computes PLDs on (besides the caller's, at most one per CPU). */
#define SPEND_PREFETCH_THREADS 4

/* Compute into the cache the PLD values that the spends of these pld candidates need (those
 * whose rdp value is past their budget), several at once, so that spend_eval of the same
 * candidates finds them. */
void spend_prefetch(spend_engine *g, spend_candidate *c, size_t n);

/* The accountant a stored spend (a snapshot's, computed by spend_eval for the same terms
 * and budget) is, without computing a PLD: the result's accountant field. */
int spend_accountant_of(spend_engine *g, int mode, double eps, double delta, spend_term *t,
                        size_t m, double spent);

/* Cache figures: entries and bytes held, lookups that hit, and PLD computations; the kept
 * compositions' (spend_kept.c): entries, bytes held (now, at most so far, the cap),
 * compositions extended, rebuilt from their events, evicted, and queries answered from
 * scratch instead. */
typedef struct {
    size_t entries, bytes, cap_bytes;
    uint64_t hits, misses, pld_computed;
    size_t kept_entries, kept_bytes, kept_peak_bytes, kept_cap_bytes;
    uint64_t kept_composed, kept_rebuilt, kept_evicted, kept_fallbacks;
    uint64_t classified;  /* events decoded and classified since the engine was made */
    uint64_t restored;    /* events readied from a stored profile instead */
    uint64_t rdp_summed;  /* pld spends whose history's RDP curves were summed in full (no memo
                           * covered them): what a memo saves, counted for the tests */
    uint64_t kept_powers; /* k-th powers of an event made (k > 1: eligibility's probes) */
} spend_stats;
void spend_engine_stats(spend_engine *g, spend_stats *s);

#endif
