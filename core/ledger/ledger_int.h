/*
 * ledger_int.h - the ledger's shared type definitions, the bottom of core/ledger's layers
 * (never included outside core/ledger/ledger_*.c): the in-memory state (struct ledger, its
 * clients, rounds, events, named events, undo entries, indexes) and the byte writer and
 * reader that records and snapshots are made of. Only types and inline byte helpers live
 * here; the functions are declared by the layer headers, top to bottom:
 *   (verbs: ledger.h, ledger_verbs.h) -> ledger_txn.h -> ledger_record.h -> ledger_mem.h
 *   -> spend.h, store.h.
 * ledger_open.c (the top: open, close, the threads) calls the verbs. A file includes the
 * header of its own layer and of the layers below it, never above.
 */
#ifndef DPB_LEDGER_INT_H
#define DPB_LEDGER_INT_H

#include "ledger.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../dp/normal.h"
#include "../dp/rdp.h"
#include "fnv.h"
#include "refine.h"
#include "snapshot.h" /* SNAPSHOT_HEADER_BYTES: offsets in the file store's messages */
#include "spend.h"
#include "store.h"
#include "tlog.h"

enum {
    EV_RDP = SPEND_RDP,
    EV_TV = SPEND_TV,
    EV_UNCERTIFIABLE = SPEND_UNCERTIFIABLE,
    EV_PLD_ONLY = SPEND_PLD_ONLY,
    EV_NOT_COVERED = SPEND_NOT_COVERED
};
#define LEV_NONE UINT32_MAX
#define LG_SACCT_UNNAMED (-2)

/* An event of the vocabulary: its content lives in the spend engine (se), registered
 * without computing anything (recovery reads the whole vocabulary, most of which no spend
 * will need again): lg_ev_se readies it (decoded, classified) at its first use. */
typedef struct {
    const unsigned char *bytes; /* the encoded event (se's, borrowed) */
    size_t nbytes;
    uint64_t hash;
    dp_relation rel;
    spend_event *se; /* the same event in the spend engine (a reference) */
} lev;

typedef struct {
    uint32_t ev;
    uint64_t count;
} lcount;

typedef struct {
    char *id;
    double eps, delta;
    uint8_t mode, rel, uncertified, dirty; /* dirty: recompute after replay */
    int8_t sacct;     /* the accountant the spend is (dp_accountant), -1; LG_SACCT_UNNAMED:
                       * recovered, named at its first read (lg_spend_accountant) */
    uint8_t stuck;    /* one more of last_ev would take the spend past eps (honest status:
                       * exhausted; the status LEDGER_STUCK is stuck_rd) */
    uint32_t last_ev; /* the event of the last round charged (LEV_NONE: none) */
    /* 1 + the position of the round whose refusal for its budget makes it LEDGER_STUCK
     * (ledger.h, ledger_apply.c), 0: none; in what was padding */
    uint32_t stuck_rd;
    char *labels; /* NULL or "k=v\n..." */
    double spent, dtv;
    uint64_t rounds, version;
    uint64_t seq;     /* log seq of the last change (0: recovered, durable) */
    uint64_t refined; /* version + 1 when the background refinement settled this state */
    uint32_t nev;
    /* that round's spend_after rounded down (a budget change keeps the client stuck only
     * while it is above the new eps); in what was padding */
    float stuck_after;
    lcount *ev;
    spend_memo *memo; /* spend.c's memo of ev (spend_eval_more): NULL, or made and changed
                       * only by lg_recompute, freed by lg_memo_drop (both: write lock) */
    uint32_t nrv;     /* reserved events (two-phase rounds), counted in every admission */
    lcount *rv;
    uint32_t *hist; /* the last LEDGER_HISTORY rounds that charged or reserved it (positions),
                     * a ring: entry k at hist[k % LEDGER_HISTORY] (NULL until the first) */
    uint32_t hseen; /* entries ever pushed */
} lclient;

/* One change applied in memory whose log record (seq) may not be durable yet: what it takes
 * to withdraw it (see "Durability" below). */
enum {
    U_EVENT = 1,
    U_CLIENT_NEW = 2,
    U_CLIENT_SET = 3,
    U_CHARGE = 4,
    U_ROUND = 5,
    U_RESV = 6,   /* a reservation change of a client: held count +-1, perhaps a charge */
    U_RSTATE = 7, /* a two-phase round's state as it was (commit, release) */
    U_NAME = 8,   /* a named event, new */
    U_OFFER = 9   /* a client's stuck state, as it was (a round's refusal changed it) */
};
/* What a reservation change did to a client's held count of its event (lundo.rv_op). */
enum { LG_RV_NONE = 0, LG_RV_UP = 1, LG_RV_NEW = 2, LG_RV_DOWN = 3, LG_RV_GONE = 4 };
typedef struct {
    uint64_t seq;      /* the record the change waits for */
    uint64_t lversion; /* the ledger's version before the change */
    uint8_t kind;
    uint32_t pos; /* event, client or round position */
    /* U_CLIENT_SET and U_CHARGE: the client as it was */
    uint8_t mode, rel, uncertified, ev_new, stuck;
    int8_t sacct;
    uint32_t ev, last_ev;
    double eps, delta, spent, dtv;
    uint64_t rounds, version, cseq;
    char *labels; /* U_CLIENT_SET: the old labels (owned) */
    /* U_RESV: what the change did to the client's held counts (rv_op, an LG_RV_* of the
     * entry at rv_at; LG_RV_GONE: the entry (ev, rv_old) removed, the last moved into its
     * place) and whether it charged ev (charged; ev_new: a new entry of c->ev, the last) */
    uint8_t rv_op, charged;
    uint32_t rv_at;
    uint64_t rv_old;
    uint8_t hpushed; /* U_CHARGE, U_RESV: a history entry was pushed over hold */
    uint32_t hold;
    uint8_t rstate; /* U_RSTATE: the old state and its record */
    uint64_t rstate_seq, rstate_time;
    uint32_t stuck_rd; /* every client change: its stuck state as it was */
    float stuck_after;
} lundo;

typedef struct {
    const char *id; /* the client's id, or owned (unknown clients) */
    uint8_t owned, admitted, reason, reported;
    int8_t acct; /* the accountant `after` is; -1: not known (recovered from the log) */
    /* the client's honest status after this outcome's reservation is taken (reserving) or
     * given back (releasing), computed before the write lock from the client as stamped: 1 +
     * its stuck flag; 0 not known (computed under the lock). Used once, then 0 again. */
    uint8_t pre_stuck;
    double before, after;
} lout;

typedef struct {
    char *id;
    unsigned char hash[16];
    uint8_t policy, already_ran;
    uint8_t phase, state; /* phase: 0 one step, 1 reserve; state: ledger_round_state */
    uint64_t seq;
    uint64_t state_seq;      /* the record of the commit or release (0: none) */
    uint64_t expires_at;     /* reserve: unix seconds */
    unsigned char chash[16]; /* the commit's body hash */
    uint32_t ev[2];          /* reserve: the event interned per relation (LEV_NONE: none) */
    uint32_t n, admitted, reported;
    lout *out;         /* NULL once summarized (never while reserved) */
    const char *owner; /* reserve: its owner's name in the owner table (l->ow), or NULL */
    uint64_t time_ms, state_time_ms; /* the times of its record and of its commit or release
                                      * (ms since the epoch; 0: unknown, or none yet) */
} lrnd;

/* An owner of reservations (ledger_round_req.owner): its name (the rounds point at it) and
 * the client-reservations it holds now (the admitted clients of its reserved rounds).
 * Entries are never removed (as many as distinct owners ever recorded). */
typedef struct {
    char *name;
    uint64_t held;
} lowner;

/* One resolution of the ledger-wide series (ledger_series.c): a ring of buckets, bucket k
 * (start k * width) at b[k % LEDGER_SERIES_KEEP[r]]; the buckets [max(first, cur - keep + 1),
 * cur] are held (any: 1 once a timed record came). */
typedef struct {
    uint64_t first, cur;
    int any;
    ledger_point *b;
} lring;

typedef struct {
    char *name;
    unsigned char *bytes; /* the encoded event */
    size_t nbytes;
    uint64_t seq; /* its record */
} lname;

/* open-addressing index of strings or hashes -> position (UINT32_MAX = empty) */
typedef struct {
    uint32_t *slot;
    size_t cap; /* power of two */
} lindex;

struct ledger {
    ledger_options opt;
    char *dir; /* the file store's data directory (messages), or NULL */
    pthread_rwlock_t lock;
    /* The writers' lock (lg_wrlock): a change holds it from its start to its end, and the
     * write side of `lock` with it, except in the gaps a large change leaves readers once its
     * records are appended (lg_let_readers, when gaps is 1: a transaction's apply). Whatever
     * must see no change half applied (a snapshot, a copy, a comparison) holds it too
     * (lg_rdlock_whole). Order: wmu, then lock. */
    pthread_mutex_t wmu;
    int gaps;
    void (*gap_hook)(void *ctx); /* tests: called in each gap, the write side given back */
    void *gap_ctx;
    ledger_store *st; /* the log and snapshots (store.h) */
    int shared;       /* store_shared(st): other replicas append to the same log */
    /* a shared store: a failed sync (DPB_ECONFLICT, DPB_EUNAVAILABLE) voided every pending
     * record; void_gen counts such failures (bumped under the lock, read or write), done_gen
     * those withdrawn in memory (under the write lock), void_status the latest one's status */
    atomic_uint_fast64_t void_gen;
    uint64_t done_gen;
    atomic_int void_status;
    uint64_t last_seq, snap_seq, records_since_snap, version;
    atomic_int read_only; /* read without the lock (ledger_read_only) */
    /* changes not known durable yet, in log order (under the write lock) */
    lundo *undo;
    size_t nundo, cap_undo;
    /* undo entries pruned under the write lock in a batch (lg_prune_undo), whose memory is
     * freed after the lock is released (lg_bury): a list pushed and taken atomically */
    _Atomic(struct lgrave *) grave;
    /* undo entries holding memory freed under the write lock (ledger_locked_frees) */
    atomic_uint_fast64_t locked_frees;
    /* events: [0, nevs_logged) are in the log; the rest are a round's scratch, dropped
     * before the lock is released */
    lev *evs;
    size_t nevs, cap_evs, nevs_logged;
    uint8_t *cover_bad; /* during open: clients whose covered log record the snapshot lacks */
    /* the log as a Merkle tree (tlog.h): a leaf pushed per record appended, replayed or
     * caught up; cut back with withdrawn records. tree_bad: during open, the seq of a record
     * whose leaf differs from the one the store kept for it (0: none), tree_bad_type its type */
    dpb_tlog *tree;
    uint64_t tree_bad;
    uint8_t tree_bad_type;
    lindex ev_index;
    /* clients */
    lclient *cl;
    size_t ncl, cap_cl;
    lindex cl_index;
    /* the clients in id order (list pages), brought up to date by the next list (under
     * id_mu, with the read lock held: the clients stay put): by_id[0, nby_id) are the
     * positions [0, nby_id) sorted by id, rank[pos] the place of pos in it; a withdrawn new
     * client empties it (under the write lock) */
    pthread_mutex_t id_mu;
    uint32_t *by_id, *rank;
    size_t nby_id, cap_by_id;
    /* rounds */
    lrnd *rd;
    size_t nrd, cap_rd;
    lindex rd_index;
    size_t kept_outcomes, oldest_kept; /* outcome entries in memory; first round with them */
    /* named events */
    lname *nm;
    size_t nnm, cap_nm;
    size_t nm_bytes;             /* the sum of their nbytes */
    size_t max_nm, max_nm_bytes; /* new names' limits (ledger_set_named_limits; 0: default) */
    lindex nm_index;
    /* owners of reservations (write lock; kept by lg_store_round and lg_resolve_round, summed
     * again by lg_owner_recount after recovery and a withdrawal) */
    lowner *ow;
    size_t now, cap_ow;
    lindex ow_index;
    size_t nreserved; /* rounds reserved now (the expiry sweep looks for that many) */
    /* counters */
    uint64_t by_status[LEDGER_NSTATUS], hist[11];
    /* time (ledger_series.c): the time of the last record applied, and of the record being
     * applied now (0: unknown, a record before LEDGER_FORMAT 5); the series' rings; stale: a
     * replay changed clients whose statuses are not recomputed yet; mute: a snapshot is being
     * loaded (its series holds its rounds already) */
    uint64_t last_time, rec_time;
    /* the clients a replay marked dirty (positions; a client once), left out of the status
     * counters until recomputed: so a bucket closing mid-replay recomputes those alone
     * (dirty_lost: the list could not grow, all clients are scanned) */
    uint32_t *dirty;
    size_t ndirty, cap_dirty;
    int dirty_lost;
    uint64_t (*clock_ms)(void *ctx); /* ledger_set_clock (NULL: CLOCK_REALTIME) */
    void *clock_ctx;
    lring series[LEDGER_NRES];
    int series_stale, series_mute;
    /* snapshots */
    pthread_t snap_thread;
    pthread_mutex_t snap_mu;
    pthread_cond_t snap_cv;
    int snap_wanted, snap_stop, snap_running, has_thread;
    /* the snapshot thread's outcomes (under snap_mu): snapshots written, failed, and the last
     * failure's detail ("" once a snapshot succeeds again) */
    uint64_t snap_done, snap_failed;
    char snap_err[320];
    spend_engine *sp; /* spends: events by content, the PLD value cache */
    /* the profiles recovery computed (ledger_open_profiles), and the thread that then
     * computes, off the lock, those of the events the clients hold (warm_main) */
    uint64_t open_profiles;
    /* clients' spends evaluated under the write lock of a change that ended with
     * lg_txn_end (ledger_locked_spends; lg_spends_here) */
    atomic_uint_fast64_t locked_spends;
    pthread_t warm_thread;
    int has_warm;
    atomic_int warm_stop;
    /* the clients' memos (lclient.memo): their bytes (at most the cap, LEDGER_MEMO_BYTES by
     * default), how many clients have one, and where the next memo to free is looked for
     * when the bytes are over (write lock) */
    size_t memo_bytes, memo_n, memo_next;
    /* background refinement (refine_step): its thread, scan cursor, and what views show */
    refiner *rf;
    size_t rf_next;
    uint64_t rf_pass_version, rf_idle_version, rf_pass_found;
    uint64_t refines, boot;    /* refinements applied since open; a value new at every open */
    uint64_t refine_stale;     /* refinements discarded: the client changed meanwhile */
    uint64_t refine_abandoned; /* computations stopped by a change (refine_yield) */
    atomic_int refining;       /* the refinement is computing a PLD */
    int rf_yield;              /* atomic: set by every change; the refinement's computation stops */
    uint64_t rf_last_change;   /* atomic: monotonic ns of the latest change's start */
    /* ledger_set_compute_limits: the deadline and cost cap of the spends computed before a
     * change's lock (ledger_prefetch.c) */
    double compute_deadline;
    uint64_t max_pld_evals;
};

/* An index's comparison: 1 if the entry at pos has key. */
typedef int (*lindex_eq)(const ledger *l, uint32_t pos, const void *key);

typedef struct {
    const unsigned char *bytes;
    size_t n;
    dp_relation rel;
} evkey;

/* Grow *p (elements of elem bytes, *cap of them) to hold at least need: doubling from 16,
 * never p = realloc(p). 0, or -1 out of memory (*p and *cap unchanged). Defined in
 * ledger_index.c; declared here for the byte writer below. */
int lg_grow(void **p, size_t *cap, size_t need, size_t elem);

/* ---- byte writer / reader for records and snapshots -------------------------------------- */

typedef struct {
    unsigned char *b;
    size_t n, cap;
    int oom;
} bw;

static inline void bw_put(bw *w, const void *p, size_t n)
{
    if (w->oom || n == 0)
        return;
    if (lg_grow((void **)&w->b, &w->cap, w->n + n, 1) != 0) {
        w->oom = 1;
        return;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static inline void bw_u8(bw *w, unsigned v)
{
    unsigned char c = (unsigned char)v;
    bw_put(w, &c, 1);
}
static inline void bw_u32(bw *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    bw_put(w, b, 4);
}
static inline void bw_u64(bw *w, uint64_t v)
{
    bw_u32(w, (uint32_t)v);
    bw_u32(w, (uint32_t)(v >> 32));
}
static inline void bw_f64(bw *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    bw_u64(w, v);
}
static inline void bw_str(bw *w, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    bw_u32(w, (uint32_t)n);
    bw_put(w, s, n);
}

typedef struct {
    const unsigned char *p;
    size_t n, at;
    int bad;
} br;

static inline const unsigned char *br_take(br *r, size_t n)
{
    if (r->bad || r->n - r->at < n) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *q = r->p + r->at;
    r->at += n;
    return q;
}
static inline unsigned br_u8(br *r)
{
    const unsigned char *q = br_take(r, 1);
    return q ? *q : 0;
}
static inline uint32_t br_u32(br *r)
{
    const unsigned char *q = br_take(r, 4);
    return q ? (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24
             : 0;
}
static inline uint64_t br_u64(br *r)
{
    uint64_t lo = br_u32(r);
    return lo | (uint64_t)br_u32(r) << 32;
}
static inline double br_f64(br *r)
{
    uint64_t v = br_u64(r);
    double d;
    memcpy(&d, &v, 8);
    return d;
}
/* A string of at most max bytes into a fresh allocation (NULL on error). */
static inline char *br_str(br *r, size_t max)
{
    uint32_t n = br_u32(r);
    if (r->bad || n > max) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *q = br_take(r, n);
    char *s = q ? malloc(n + 1) : NULL;
    if (s == NULL) {
        r->bad = 1;
        return NULL;
    }
    memcpy(s, q, n);
    s[n] = '\0';
    return s;
}

#endif
