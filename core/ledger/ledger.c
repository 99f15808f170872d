/*
 * ledger.c - budgets, rounds and their durability.
 *
 * Invariants (under the lock):
 *   - every client's spend fields are those computed from its event counts (recomputed on
 *     each change; recovered clients are recomputed once after replay);
 *   - the order of records in the log is the order in which changes were applied;
 *   - status and spend-bucket counters equal the sums over clients;
 *   - an interned event's index never changes and is logged (EVENT record) before any
 *     record that refers to it.
 * Log records: EVENT(idx, relation, encoded event), CLIENT(id, budget, mode, relation,
 * labels), ROUND(id, hash, policy, already_ran, event idx, outcomes), RESERVE(a ROUND's
 * fields, expires_at: the admitted clients' budget held, not charged), COMMIT(round id,
 * commit hash, indices of the reported outcomes), RELEASE(round id, expired flag). Snapshot:
 * the whole state in one payload (format LEDGER_FORMAT).
 */
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

enum {
    REC_EVENT = 1,
    REC_CLIENT = 2,
    REC_ROUND = 3,
    REC_RESERVE = 4,
    REC_COMMIT = 5,
    REC_RELEASE = 6,
    REC_NAME = 7
};
enum {
    EV_RDP = SPEND_RDP,
    EV_TV = SPEND_TV,
    EV_UNCERTIFIABLE = SPEND_UNCERTIFIABLE,
    EV_PLD_ONLY = SPEND_PLD_ONLY,
    EV_NOT_COVERED = SPEND_NOT_COVERED
};
#define LEV_NONE UINT32_MAX

typedef struct {
    dp_event *ev;
    unsigned char *bytes;
    size_t nbytes;
    uint64_t hash;
    dp_relation rel;
    int kind;
    double *rdp; /* RDP_NORDERS, kind EV_RDP */
    double tvlog;
    double mu2; /* gdp_ok: mu^2 of a composition of unsampled Gaussians (gdp_filter) */
    int gdp_ok;
    char why[200];   /* for EV_PLD_ONLY / EV_NOT_COVERED */
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
    int8_t sacct;                          /* the accountant the spend is (dp_accountant), -1 */
    uint8_t stuck;    /* one more of last_ev would take the spend past eps (honest status) */
    uint32_t last_ev; /* the event of the last round charged (LEV_NONE: none) */
    char *labels;     /* NULL or "k=v\n..." */
    double spent, dtv;
    uint64_t rounds, version;
    uint64_t seq;     /* log seq of the last change (0: recovered, durable) */
    uint64_t refined; /* version + 1 when the background refinement settled this state */
    uint32_t nev;
    lcount *ev;
    uint32_t nrv; /* reserved events (two-phase rounds), counted in every admission */
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
    U_CSNAP = 6,  /* a client's events and reservations as they were (reservation changes) */
    U_RSTATE = 7, /* a two-phase round's state as it was (commit, release) */
    U_NAME = 8    /* a named event, new */
};
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
    char *labels;      /* U_CLIENT_SET: the old labels (owned) */
    lcount *sev, *srv; /* U_CSNAP: the old events and reservations (owned) */
    uint32_t snev, snrv;
    uint8_t hpushed; /* U_CHARGE, U_CSNAP: a history entry was pushed over hold */
    uint32_t hold;
    uint8_t rstate; /* U_RSTATE: the old state and its record */
    uint64_t rstate_seq;
} lundo;

typedef struct {
    const char *id; /* the client's id, or owned (unknown clients) */
    uint8_t owned, admitted, reason, reported;
    int8_t acct; /* the accountant `after` is; -1: not known (recovered from the log) */
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
    lout *out; /* NULL once summarized (never while reserved) */
} lrnd;

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
    /* events: [0, nevs_logged) are in the log; the rest are a round's scratch, dropped
     * before the lock is released */
    lev *evs;
    size_t nevs, cap_evs, nevs_logged;
    uint8_t *cover_bad; /* during open: clients whose covered log record the snapshot lacks */
    lindex ev_index;
    /* clients */
    lclient *cl;
    size_t ncl, cap_cl;
    lindex cl_index;
    /* rounds */
    lrnd *rd;
    size_t nrd, cap_rd;
    lindex rd_index;
    size_t kept_outcomes, oldest_kept; /* outcome entries in memory; first round with them */
    /* named events */
    lname *nm;
    size_t nnm, cap_nm;
    lindex nm_index;
    /* counters */
    uint64_t by_status[3], hist[11];
    /* snapshots */
    pthread_t snap_thread;
    pthread_mutex_t snap_mu;
    pthread_cond_t snap_cv;
    int snap_wanted, snap_stop, snap_running, has_thread;
    spend_engine *sp; /* spends: events by content, the PLD value cache */
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
};

/* ---- small utilities ------------------------------------------------------------------------- */

void ledger_hash128(const void *buf, size_t n, unsigned char out[16])
{
    uint64_t a = fnv64(buf, n, 14695981039346656037ULL);
    uint64_t b = fnv64(buf, n, 0x84222325cbf29ce4ULL ^ (uint64_t)n);
    for (int i = 0; i < 8; i++) {
        out[i] = (unsigned char)(a >> (8 * i));
        out[8 + i] = (unsigned char)(b >> (8 * i));
    }
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Grow an array (never p = realloc(p)). */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (np == NULL)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int index_init(lindex *x, size_t cap)
{
    x->slot = malloc(cap * sizeof *x->slot);
    if (x->slot == NULL)
        return -1;
    memset(x->slot, 0xff, cap * sizeof *x->slot);
    x->cap = cap;
    return 0;
}

static uint64_t str_hash(const char *s)
{
    return fnv64(s, strlen(s), 14695981039346656037ULL);
}

/* Find: returns the slot position for key (hash h) using eq(pos) to compare. */
typedef int (*lindex_eq)(const ledger *l, uint32_t pos, const void *key);

static size_t index_find(const ledger *l, const lindex *x, uint64_t h, lindex_eq eq,
                         const void *key)
{
    size_t m = x->cap - 1, i = (size_t)h & m;
    while (x->slot[i] != UINT32_MAX && !eq(l, x->slot[i], key))
        i = (i + 1) & m;
    return i;
}

static int index_insert(ledger *l, lindex *x, size_t count,
                        uint64_t (*hash_of)(const ledger *, uint32_t), uint32_t pos)
{
    if ((count + 1) * 2 > x->cap) {
        lindex nx;
        if (index_init(&nx, x->cap * 2) != 0)
            return -1;
        for (size_t i = 0; i < x->cap; i++)
            if (x->slot[i] != UINT32_MAX) {
                size_t j = (size_t)hash_of(l, x->slot[i]) & (nx.cap - 1);
                while (nx.slot[j] != UINT32_MAX)
                    j = (j + 1) & (nx.cap - 1);
                nx.slot[j] = x->slot[i];
            }
        free(x->slot);
        *x = nx;
    }
    size_t j = (size_t)hash_of(l, pos) & (x->cap - 1);
    while (x->slot[j] != UINT32_MAX)
        j = (j + 1) & (x->cap - 1);
    x->slot[j] = pos;
    return 0;
}

/* Remove position pos (present, hashing to h) from x: linear probing with backward shift, so
 * every other key stays reachable from its home slot. */
static void index_delete(lindex *x, uint64_t h, uint32_t pos,
                         uint64_t (*hash_of)(const ledger *, uint32_t), const ledger *l)
{
    size_t m = x->cap - 1, i = (size_t)h & m;
    while (x->slot[i] != pos) {
        if (x->slot[i] == UINT32_MAX)
            return;
        i = (i + 1) & m;
    }
    x->slot[i] = UINT32_MAX;
    for (size_t j = (i + 1) & m; x->slot[j] != UINT32_MAX; j = (j + 1) & m) {
        size_t k = (size_t)hash_of(l, x->slot[j]) & m;
        /* the entry at j may move to the hole at i unless its home k lies in (i, j] */
        int stays = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (!stays) {
            x->slot[i] = x->slot[j];
            x->slot[j] = UINT32_MAX;
            i = j;
        }
    }
}

static int cl_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->cl[pos].id, key) == 0;
}
static uint64_t cl_hash(const ledger *l, uint32_t pos)
{
    return str_hash(l->cl[pos].id);
}
static int rd_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->rd[pos].id, key) == 0;
}
static uint64_t rd_hash(const ledger *l, uint32_t pos)
{
    return str_hash(l->rd[pos].id);
}

typedef struct {
    const unsigned char *bytes;
    size_t n;
    dp_relation rel;
} evkey;

static int ev_eq(const ledger *l, uint32_t pos, const void *key)
{
    const evkey *k = key;
    const lev *e = &l->evs[pos];
    return e->rel == k->rel && e->nbytes == k->n && memcmp(e->bytes, k->bytes, k->n) == 0;
}
static uint64_t ev_hash(const ledger *l, uint32_t pos)
{
    return l->evs[pos].hash;
}

static int nm_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->nm[pos].name, key) == 0;
}
static uint64_t nm_hash(const ledger *l, uint32_t pos)
{
    return str_hash(l->nm[pos].name);
}

static long find_name(const ledger *l, const char *name)
{
    size_t i = index_find(l, &l->nm_index, str_hash(name), nm_eq, name);
    return l->nm_index.slot[i] == UINT32_MAX ? -1 : (long)l->nm_index.slot[i];
}

static long find_client(const ledger *l, const char *id)
{
    size_t i = index_find(l, &l->cl_index, str_hash(id), cl_eq, id);
    return l->cl_index.slot[i] == UINT32_MAX ? -1 : (long)l->cl_index.slot[i];
}

static long find_round(const ledger *l, const char *id)
{
    size_t i = index_find(l, &l->rd_index, str_hash(id), rd_eq, id);
    return l->rd_index.slot[i] == UINT32_MAX ? -1 : (long)l->rd_index.slot[i];
}

/* ---- byte writer / reader for records and snapshots -------------------------------------- */

typedef struct {
    unsigned char *b;
    size_t n, cap;
    int oom;
} bw;

static void bw_put(bw *w, const void *p, size_t n)
{
    if (w->oom || n == 0)
        return;
    if (grow((void **)&w->b, &w->cap, w->n + n, 1) != 0) {
        w->oom = 1;
        return;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void bw_u8(bw *w, unsigned v)
{
    unsigned char c = (unsigned char)v;
    bw_put(w, &c, 1);
}
static void bw_u32(bw *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    bw_put(w, b, 4);
}
static void bw_u64(bw *w, uint64_t v)
{
    bw_u32(w, (uint32_t)v);
    bw_u32(w, (uint32_t)(v >> 32));
}
static void bw_f64(bw *w, double d)
{
    uint64_t v;
    memcpy(&v, &d, 8);
    bw_u64(w, v);
}
static void bw_str(bw *w, const char *s)
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

static const unsigned char *br_take(br *r, size_t n)
{
    if (r->bad || r->n - r->at < n) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *q = r->p + r->at;
    r->at += n;
    return q;
}
static unsigned br_u8(br *r)
{
    const unsigned char *q = br_take(r, 1);
    return q ? *q : 0;
}
static uint32_t br_u32(br *r)
{
    const unsigned char *q = br_take(r, 4);
    return q ? (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24
             : 0;
}
static uint64_t br_u64(br *r)
{
    uint64_t lo = br_u32(r);
    return lo | (uint64_t)br_u32(r) << 32;
}
static double br_f64(br *r)
{
    uint64_t v = br_u64(r);
    double d;
    memcpy(&d, &v, 8);
    return d;
}
/* A string of at most max bytes into a fresh allocation (NULL on error). */
static char *br_str(br *r, size_t max)
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

/* ---- events ---------------------------------------------------------------------------------- */

/* The event's classification, from the spend engine (which computed it once for all). */
static dpb_status classify(lev *e)
{
    const spend_class *c = spend_event_class(e->se);
    e->kind = c->kind;
    e->tvlog = c->tvlog;
    e->mu2 = c->mu2;
    e->gdp_ok = c->gdp_ok;
    snprintf(e->why, sizeof e->why, "%s", c->why);
    if (c->rdp != NULL) {
        e->rdp = malloc(RDP_NORDERS * sizeof *e->rdp);
        if (e->rdp == NULL)
            return DPB_ENOMEM;
        memcpy(e->rdp, c->rdp, RDP_NORDERS * sizeof *e->rdp);
    }
    return DPB_OK;
}

/* Intern (ev, rel); *idx receives its index and *fresh whether it is new (to be logged).
 * ev is borrowed; the ledger keeps a decoded copy. */
static dpb_status intern(ledger *l, const unsigned char *bytes, size_t n, dp_relation rel,
                         uint32_t *idx, int *fresh)
{
    evkey k = {bytes, n, rel};
    uint64_t h = fnv64(bytes, n, 14695981039346656037ULL ^ (uint64_t)rel);
    size_t s = index_find(l, &l->ev_index, h, ev_eq, &k);
    *fresh = 0;
    if (l->ev_index.slot[s] != UINT32_MAX) {
        *idx = l->ev_index.slot[s];
        return DPB_OK;
    }
    if (grow((void **)&l->evs, &l->cap_evs, l->nevs + 1, sizeof *l->evs) != 0)
        return DPB_ENOMEM;
    lev *e = &l->evs[l->nevs];
    memset(e, 0, sizeof *e);
    dpb_status st = spend_event_get(l->sp, bytes, n, rel, &e->se);
    if (st != DPB_OK)
        return st;
    e->bytes = malloc(n ? n : 1);
    if (e->bytes == NULL || dp_event_decode(bytes, n, &e->ev, NULL) != DPB_OK) {
        spend_event_put(l->sp, e->se);
        free(e->bytes);
        return e->bytes ? DPB_ECORRUPT : DPB_ENOMEM;
    }
    memcpy(e->bytes, bytes, n);
    e->nbytes = n;
    e->hash = h;
    e->rel = rel;
    *idx = (uint32_t)l->nevs;
    if (classify(e) != DPB_OK ||
        index_insert(l, &l->ev_index, l->nevs, ev_hash, (uint32_t)l->nevs) != 0) {
        spend_event_put(l->sp, e->se);
        dp_event_free(e->ev);
        free(e->bytes);
        free(e->rdp);
        return DPB_ENOMEM;
    }
    l->nevs++;
    *fresh = 1;
    return DPB_OK;
}

/* ---- spend (spend.c computes it) ------------------------------------------------------------ */

const double LEDGER_FILTER_ORDERS[LEDGER_FILTER_NORDERS] = {
    1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 63, 128, 256, 512, 1024};
/* their positions in RDP_DEFAULT_ORDERS (checked by the unit tests) */
const unsigned char LEDGER_FILTER_ORDER_INDEX[LEDGER_FILTER_NORDERS] = {
    4, 9, 14, 19, 29, 39, 49, 69, 89, 100, 104, 108, 112, 120, 128, 136, 151, 152, 153, 154, 155};

/* The client's spend with `extra` more of event `xev` (extra 0: as it is), and the
 * accountant it is. */
static void spend_full(ledger *l, const lclient *c, uint32_t xev, uint64_t extra, spend_result *out)
{
    if (c->uncertified) {
        memset(out, 0, sizeof *out);
        out->uncertified = 1;
        out->accountant = -1;
        out->spent = HUGE_VAL;
        return;
    }
    size_t n = c->nev, m = n;
    spend_term stack[8], *t = n + 1 <= 8 ? stack : malloc((n + 1) * sizeof *t);
    if (t == NULL) {
        memset(out, 0, sizeof *out);
        out->accountant = -1;
        out->spent = HUGE_VAL;
        return;
    }
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        t[i] = (spend_term){l->evs[c->ev[i].ev].se, c->ev[i].count};
        if (c->ev[i].ev == xev && extra) {
            t[i].count += extra;
            found = 1;
        }
    }
    if (extra && !found)
        t[m++] = (spend_term){l->evs[xev].se, extra};
    spend_eval(l->sp, c->mode, c->eps, c->delta, (dp_relation)c->rel, t, m, out);
    if (t != stack)
        free(t);
}

/* The honest status (ledger.h): exhausted when the spend reached the budget, or when the
 * event of the client's last charged round would not be admitted again now. */
/* The spend that admission sees: the charged events and the held reservations, with `extra`
 * more of xev. Reservations enter as pending counts in the same multiset (spend_of). */
static void spend_held(ledger *l, const lclient *c, uint32_t xev, uint64_t extra, spend_result *out)
{
    if (c->nrv == 0) {
        spend_full(l, c, xev, extra, out);
        return;
    }
    lclient t = *c;
    lcount stack[8], *ms = c->nev + c->nrv <= 8 ? stack : malloc((c->nev + c->nrv) * sizeof *ms);
    if (ms == NULL) {
        memset(out, 0, sizeof *out);
        out->accountant = -1;
        out->spent = HUGE_VAL; /* refuses: never admits on a spend it could not compute */
        return;
    }
    uint32_t m = c->nev;
    if (m)
        memcpy(ms, c->ev, m * sizeof *ms);
    for (uint32_t i = 0; i < c->nrv; i++) {
        uint32_t k = 0;
        while (k < m && ms[k].ev != c->rv[i].ev)
            k++;
        if (k == m)
            ms[m++] = c->rv[i];
        else
            ms[k].count += c->rv[i].count;
    }
    t.ev = ms;
    t.nev = m;
    spend_full(l, &t, xev, extra, out);
    if (ms != stack)
        free(ms);
}

static ledger_status status_of(const lclient *c)
{
    if (c->uncertified)
        return LEDGER_UNCERTIFIED;
    return c->spent >= c->eps || c->stuck ? LEDGER_EXHAUSTED : LEDGER_ACTIVE;
}

static int bucket_of(const lclient *c)
{
    if (!(c->spent < c->eps) || !(c->eps > 0.0))
        return 10;
    double f = 10.0 * c->spent / c->eps; /* < 10 here; never cast a value out of int range */
    return !(f >= 0.0) ? 0 : f >= 9.0 ? 9 : (int)f;
}

/* Unaccount / account a client in the counters around a change. */
static void counters(ledger *l, const lclient *c, int sign)
{
    l->by_status[status_of(c)] += (uint64_t)sign;
    l->hist[bucket_of(c)] += (uint64_t)sign;
}

static void recompute(ledger *l, lclient *c)
{
    spend_result r;
    spend_full(l, c, 0, 0, &r);
    c->spent = r.spent;
    c->dtv = r.dtv;
    c->sacct = (int8_t)r.accountant;
    if (r.uncertified)
        c->uncertified = 1;
    c->stuck = 0;
    if (c->last_ev != LEV_NONE && !c->uncertified && c->spent < c->eps) {
        spend_result more;
        spend_held(l, c, c->last_ev, 1, &more);
        c->stuck = !(more.spent <= c->eps);
    }
}

/* The accountant of a spend recovered from a snapshot (which stores the value only). */
static void name_spend(ledger *l, lclient *c)
{
    spend_term stack[8], *t = c->nev <= 8 ? stack : malloc(c->nev * sizeof *t);
    c->sacct = -1;
    if (t == NULL || c->uncertified) {
        if (t != stack)
            free(t);
        return;
    }
    for (uint32_t i = 0; i < c->nev; i++)
        t[i] = (spend_term){l->evs[c->ev[i].ev].se, c->ev[i].count};
    c->sacct = (int8_t)spend_accountant_of(l->sp, c->mode, c->eps, c->delta, t, c->nev, c->spent);
    if (t != stack)
        free(t);
}

static int add_count(lclient *c, uint32_t ev, uint64_t k)
{
    for (uint32_t i = 0; i < c->nev; i++)
        if (c->ev[i].ev == ev) {
            c->ev[i].count += k;
            return 0;
        }
    lcount *n = realloc(c->ev, (c->nev + 1) * sizeof *n);
    if (n == NULL)
        return -1;
    c->ev = n;
    c->ev[c->nev++] = (lcount){ev, k};
    return 0;
}

/* The history ring, allocated before anything changes (pushing cannot fail then). */
static int hist_ready(lclient *c)
{
    if (c->hist == NULL)
        c->hist = calloc(LEDGER_HISTORY, sizeof *c->hist);
    return c->hist ? 0 : -1;
}

/* Push round position rpos (hist_ready done); *old: the entry it overwrote. */
static void hist_push(lclient *c, uint32_t rpos, uint32_t *old)
{
    uint32_t *slot = &c->hist[c->hseen % LEDGER_HISTORY];
    if (old)
        *old = *slot;
    *slot = rpos;
    c->hseen++;
}

static void hist_pop(lclient *c, uint32_t old)
{
    if (c->hist && c->hseen > 0) {
        c->hseen--;
        c->hist[c->hseen % LEDGER_HISTORY] = old;
    }
}

/* ---- durability: memory never ahead of the log ----------------------------------------------
 *
 * A change is applied in memory under the write lock right after its record is appended, so
 * that the next round's admission already counts it (no overspend between appends and the
 * group commit). It is shown to nobody before its record is durable: every read, the
 * idempotent replay, dry runs and snapshots first settle() the seq of what they would show
 * (wait for, or run, the group commit), and every change whose record may not be durable yet
 * has an entry in l->undo saying how to take it back. When a write or a sync fails, the log
 * is cut back to its durable seq (wal.c) and withdraw_locked() undoes, newest first, every
 * change after it, for all the requests that shared the failed sync: memory then holds
 * exactly what the log holds, and the ledger is read-only until restart. */

static int ledger_ro(ledger *l)
{
    return atomic_load(&l->read_only) || (l->st != NULL && store_failed(l->st));
}

/* Room for k more undo entries, taken before anything is logged (pushing cannot fail). */
static int reserve_undo(ledger *l, size_t k)
{
    return grow((void **)&l->undo, &l->cap_undo, l->nundo + k, sizeof *l->undo);
}

/* An undo entry of a change (seq, kind) to the client at pos, holding what every change of a
 * client may alter (kind-specific fields are the caller's). */
static lundo client_undo(const ledger *l, uint64_t seq, uint8_t kind, long pos)
{
    lundo u = {0};
    u.seq = seq;
    u.lversion = l->version;
    u.kind = kind;
    u.pos = (uint32_t)pos;
    if (pos >= 0) {
        const lclient *c = &l->cl[pos];
        u.uncertified = c->uncertified;
        u.sacct = c->sacct;
        u.stuck = c->stuck;
        u.last_ev = c->last_ev;
        u.spent = c->spent;
        u.dtv = c->dtv;
        u.rounds = c->rounds;
        u.version = c->version;
        u.cseq = c->seq;
    }
    return u;
}

static void push_undo(ledger *l, const lundo *u)
{
    l->undo[l->nundo++] = *u; /* reserved */
}

/* Forget the entries whose records are durable now (they can no longer be withdrawn). */
static void prune_undo(ledger *l)
{
    uint64_t d = store_durable_seq(l->st);
    size_t k = 0;
    for (; k < l->nundo && l->undo[k].seq <= d; k++) {
        free(l->undo[k].labels);
        free(l->undo[k].sev);
        free(l->undo[k].srv);
    }
    if (k > 0) {
        memmove(l->undo, l->undo + k, (l->nundo - k) * sizeof *l->undo);
        l->nundo -= k;
    }
    if (l->nundo == 0 && l->cap_undo > 4096) { /* after a huge round: give the memory back */
        free(l->undo);
        l->undo = NULL;
        l->cap_undo = 0;
    }
}

/* Drop the newest interned event (not referenced by any client or round). */
static void drop_last_event(ledger *l)
{
    lev *e = &l->evs[l->nevs - 1];
    index_delete(&l->ev_index, e->hash, (uint32_t)(l->nevs - 1), ev_hash, l);
    dp_event_free(e->ev);
    free(e->bytes);
    free(e->rdp);
    spend_event_put(l->sp, e->se);
    l->nevs--;
}

/* Drop the events interned by a round that are not in the log (a dry run, a refused or
 * failed round): their indices must stay free for the next logged event. */
static void drop_unlogged_events(ledger *l)
{
    while (l->nevs > l->nevs_logged)
        drop_last_event(l);
}

static void recount(ledger *l)
{
    memset(l->by_status, 0, sizeof l->by_status);
    memset(l->hist, 0, sizeof l->hist);
    for (size_t i = 0; i < l->ncl; i++)
        counters(l, &l->cl[i], +1);
}

/* What client_undo kept of a client, back. */
static void undo_scalars(lclient *c, const lundo *u)
{
    if (u->hpushed)
        hist_pop(c, u->hold);
    c->uncertified = u->uncertified;
    c->sacct = u->sacct;
    c->stuck = u->stuck;
    c->last_ev = u->last_ev;
    c->spent = u->spent;
    c->dtv = u->dtv;
    c->rounds = u->rounds;
    c->version = u->version;
    c->seq = u->cseq;
}

static void undo_one(ledger *l, lundo *u)
{
    switch (u->kind) {
    case U_EVENT:
        drop_last_event(l);
        l->nevs_logged--;
        break;
    case U_CLIENT_NEW: {
        lclient *c = &l->cl[u->pos];
        index_delete(&l->cl_index, str_hash(c->id), u->pos, cl_hash, l);
        free(c->id);
        free(c->labels);
        free(c->ev);
        free(c->rv);
        free(c->hist);
        l->ncl--;
        break;
    }
    case U_CLIENT_SET:
    case U_CHARGE: {
        lclient *c = &l->cl[u->pos];
        if (u->kind == U_CLIENT_SET) {
            c->eps = u->eps;
            c->delta = u->delta;
            c->mode = u->mode;
            c->rel = u->rel;
            free(c->labels);
            c->labels = u->labels;
            u->labels = NULL;
        } else if (u->ev_new) {
            c->nev--; /* the charge appended it: it is the last one */
        } else {
            for (uint32_t i = 0; i < c->nev; i++)
                if (c->ev[i].ev == u->ev)
                    c->ev[i].count--;
        }
        undo_scalars(c, u);
        break;
    }
    case U_CSNAP: {
        lclient *c = &l->cl[u->pos];
        free(c->ev);
        free(c->rv);
        c->ev = u->sev;
        c->nev = u->snev;
        c->rv = u->srv;
        c->nrv = u->snrv;
        u->sev = u->srv = NULL;
        undo_scalars(c, u);
        break;
    }
    case U_RSTATE: {
        lrnd *r = &l->rd[u->pos];
        r->state = u->rstate;
        r->state_seq = u->rstate_seq;
        r->reported = 0; /* only a commit reports, and only from the reserved state */
        memset(r->chash, 0, 16);
        for (uint32_t i = 0; r->out && i < r->n; i++)
            r->out[i].reported = 0;
        break;
    }
    case U_NAME: {
        lname *nm = &l->nm[u->pos];
        index_delete(&l->nm_index, str_hash(nm->name), u->pos, nm_hash, l);
        free(nm->name);
        free(nm->bytes);
        l->nnm--;
        break;
    }
    case U_ROUND: {
        lrnd *r = &l->rd[u->pos];
        index_delete(&l->rd_index, str_hash(r->id), u->pos, rd_hash, l);
        if (r->out) {
            for (uint32_t i = 0; i < r->n; i++)
                if (r->out[i].owned)
                    free((char *)r->out[i].id);
            free(r->out);
            l->kept_outcomes -= r->n;
        }
        free(r->id);
        l->nrd--;
        if (l->oldest_kept > l->nrd)
            l->oldest_kept = l->nrd;
        break;
    }
    }
    l->version = u->lversion;
    free(u->labels);
    free(u->sev);
    free(u->srv);
}

/* After the log failed (a file store: for good) or a shared store's sync voided the pending
 * records: take back every change whose record is not durable (the log holds exactly the
 * durable seq), newest first; a failed log turns the ledger read-only, a shared store's lost
 * race or unreachable database does not (the next write catches up and computes again).
 * Idempotent. Caller holds the write lock. */
static void withdraw_locked(ledger *l)
{
    int failed = store_failed(l->st);
    uint64_t g = atomic_load(&l->void_gen);
    if (!failed && g == l->done_gen)
        return;
    uint64_t d = store_durable_seq(l->st);
    drop_unlogged_events(l);
    while (l->nundo > 0 && l->undo[l->nundo - 1].seq > d)
        undo_one(l, &l->undo[--l->nundo]);
    if (l->last_seq > d)
        l->last_seq = d;
    l->done_gen = g;
    if (failed)
        atomic_store(&l->read_only, 1);
    recount(l);
}

static void withdraw(ledger *l)
{
    pthread_rwlock_wrlock(&l->lock);
    withdraw_locked(l);
    pthread_rwlock_unlock(&l->lock);
}

/* A shared store's sync failed with st: every pending record is void. Caller holds the lock
 * (read or write), so no change is appended before a writer withdraws them. */
static void voided(ledger *l, dpb_status st)
{
    atomic_store(&l->void_status, (int)st);
    atomic_fetch_add(&l->void_gen, 1);
}

/* 0 once every record up to seq is durable, -1 if the log failed first or a shared store
 * voided the pending records (the caller then withdraws and looks again). Waits for, or runs,
 * the group commit; a lock is held (read or write: no change can be appended under a read
 * lock, so what it covers stays put). */
static int settle(ledger *l, uint64_t seq)
{
    if (l->shared && atomic_load(&l->void_gen) != l->done_gen)
        return -1; /* voided, not withdrawn yet: nothing pending may be shown */
    if (seq <= store_durable_seq(l->st))
        return 0;
    dpb_status st = store_sync(l->st, seq);
    if (st == DPB_OK)
        return 0;
    if (l->shared && !store_failed(l->st))
        voided(l, st);
    return -1;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A change is starting: the background refinement gives way (its computation stops, and it
 * waits for a quiet moment before the next), so it never takes CPU or locks from changes. */
static void refine_yield(ledger *l)
{
    __atomic_store_n(&l->rf_yield, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&l->rf_last_change, mono_ns(), __ATOMIC_RELEASE);
}

/* ---- a shared store: catching up, lost races, an unreachable database -----------------------
 *
 * Every replica applies the same log with the same code, so their states agree at every seq.
 * Before a write (and a read) a replica with nothing pending applies the records the others
 * made durable since its last one (catch_up_locked). A change it appends at seq s is computed
 * from the state at s - 1; the store commits it only if nobody else holds s (the seq is the
 * primary key), else the sync fails with DPB_ECONFLICT: the change is withdrawn (with all
 * others pending, void too), and the public call runs again on the caught-up state
 * (RETRY_RACES), never surfacing the race. LEDGER_RACE is that internal outcome: never
 * returned to callers (a DPB_ECONFLICT they see is a conflict of ids or bodies). */

#define LEDGER_RACE ((dpb_status)1000)
#define RACE_TRIES 50

static dpb_status unavailable_error(dpb_error *err, const char *why)
{
    return dpb_fail(err, DPB_EUNAVAILABLE, NULL,
                    "the ledger's database cannot be reached (%s): nothing was charged by this "
                    "request unless a retry with the same round id finds it; retry",
                    why && why[0] ? why : "connection lost");
}

/* The pending changes were voided by a failed sync of a shared store (and withdrawn): a lost
 * race is computed again, an unreachable database answered. */
static dpb_status lost(ledger *l, dpb_error *err)
{
    dpb_status st = (dpb_status)atomic_load(&l->void_status);
    if (st == DPB_ECONFLICT)
        return LEDGER_RACE;
    dpb_error why = {0};
    store_error(l->st, &why);
    return unavailable_error(err, why.detail);
}

/* Jittered backoff before try attempt + 1: 0.1 ms doubling up to 20 ms, times 0.5..1.5. */
static void race_backoff(unsigned attempt)
{
    static _Thread_local uint64_t x;
    if (x == 0)
        x = mono_ns() | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double us = 100.0 * (double)(1u << (attempt < 8 ? attempt : 8));
    if (us > 20000.0)
        us = 20000.0;
    us *= 0.5 + (double)(x >> 11) / 9007199254740992.0;
    struct timespec ts = {0, (long)(us * 1000.0)};
    nanosleep(&ts, NULL);
}

static dpb_status races_exhausted(dpb_error *err)
{
    return dpb_fail(err, DPB_EUNAVAILABLE, NULL,
                    "the ledger lost %d races in a row to other replicas writing the same "
                    "log: nothing was charged by this request; retry",
                    RACE_TRIES);
}

/* st = call, run again (err cleared, after a backoff) while it lost a race, RACE_TRIES times
 * at most. */
#define RETRY_RACES(st, call, err)                                                                 \
    do {                                                                                           \
        for (unsigned try_ = 0;; try_++) {                                                         \
            (st) = (call);                                                                         \
            if ((st) != LEDGER_RACE)                                                               \
                break;                                                                             \
            dpb_error_clear(err);                                                                  \
            if (try_ + 1 >= RACE_TRIES) {                                                          \
                (st) = races_exhausted(err);                                                       \
                break;                                                                             \
            }                                                                                      \
            race_backoff(try_);                                                                    \
        }                                                                                          \
    } while (0)

static int apply_record(ledger *l, uint8_t type, const unsigned char *p, size_t n);
static int replay_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len);

/* After records were applied by replay or catch-up: they are in the log (their events too),
 * the clients they touched get their spends recomputed, the counters are summed again. */
static void after_apply(ledger *l)
{
    l->nevs_logged = l->nevs;
    for (size_t i = 0; i < l->ncl; i++)
        if (l->cl[i].dirty) {
            recompute(l, &l->cl[i]);
            l->cl[i].dirty = 0;
        }
    recount(l);
}

/* A shared store, nothing pending: apply the records other replicas made durable. Caller
 * holds the write lock. */
static dpb_status catch_up_locked(ledger *l, dpb_error *err)
{
    if (!l->shared || l->nundo > 0 || ledger_ro(l))
        return DPB_OK;
    uint64_t before = l->last_seq, last = l->last_seq;
    dpb_error why = {0};
    dpb_status st = store_catch_up(l->st, l->last_seq, replay_fn, l, &last, &why);
    if (l->last_seq != before)
        after_apply(l);
    if (st == DPB_OK)
        return DPB_OK;
    if (st == DPB_EUNAVAILABLE)
        return unavailable_error(err, why.detail);
    atomic_store(&l->read_only, 1);
    return dpb_fail(err, st, NULL,
                    "the shared ledger log holds a record this version cannot apply (%s): the "
                    "ledger is read-only; upgrade this replica",
                    why.detail[0] ? why.detail : dpb_strstatus(st));
}

/* Before a read: a shared store's newer records applied first (reads are linearizable across
 * replicas); DPB_EUNAVAILABLE when its database cannot be reached. */
static dpb_status read_begin(ledger *l, dpb_error *err)
{
    if (!l->shared)
        return DPB_OK;
    pthread_rwlock_wrlock(&l->lock);
    withdraw_locked(l);
    prune_undo(l);
    dpb_status st = catch_up_locked(l, err);
    pthread_rwlock_unlock(&l->lock);
    return st;
}

/* The start of every change, under the write lock: withdraw after a failure someone else
 * saw, forget what became durable, catch up with a shared log. */
static dpb_status begin_write(ledger *l, dpb_error *err)
{
    refine_yield(l);
    withdraw_locked(l);
    prune_undo(l);
    return catch_up_locked(l, err);
}

/* The generation a change appended now belongs to (commit's argument). Caller holds the
 * write lock. */
static uint64_t cur_gen(ledger *l)
{
    return atomic_load(&l->void_gen);
}

static dpb_status readonly_error(dpb_error *err)
{
    return dpb_fail(err, DPB_EREADONLY, NULL,
                    "the ledger is read-only after an I/O failure (it answers reads with what "
                    "is durable); fix the disk and restart it");
}

/* The change whose last record is seq, appended and applied in generation gen: acknowledge
 * it once durable; if the log fails first, every change not durable (this one and those
 * sharing its sync) is withdrawn. Called without the lock. */
static dpb_status commit(ledger *l, uint64_t seq, uint64_t gen, dpb_error *err)
{
    int ok;
    if (l->shared) { /* under the read lock: see voided() */
        pthread_rwlock_rdlock(&l->lock);
        ok = atomic_load(&l->void_gen) == gen && settle(l, seq) == 0;
        pthread_rwlock_unlock(&l->lock);
    } else {
        ok = settle(l, seq) == 0;
    }
    if (ok) {
        /* forget what is durable now, if nobody else holds the lock (else the next write
         * does): an idle ledger keeps no undo entries */
        if (pthread_rwlock_trywrlock(&l->lock) == 0) {
            prune_undo(l);
            pthread_rwlock_unlock(&l->lock);
        }
        return DPB_OK;
    }
    withdraw(l);
    if (!store_failed(l->st))
        return lost(l, err);
    dpb_error why = {0};
    store_error(l->st, &why);
    return dpb_fail(err, DPB_EIO, NULL,
                    "the ledger could not make its log durable (%s): the change is withdrawn, "
                    "not applied, and the ledger is read-only until restarted",
                    why.detail[0] ? why.detail : "I/O error");
}

/* ---- clients --------------------------------------------------------------------------------- */

static const char *const MODE_NAMES[LEDGER_NMODES] = {"rdp", "pld", "rdp_filter", "gdp_filter"};

const char *ledger_mode_name(ledger_mode m)
{
    return (unsigned)m < LEDGER_NMODES ? MODE_NAMES[m] : "unknown";
}

int ledger_mode_parse(const char *s, ledger_mode *m)
{
    for (int i = 0; i < LEDGER_NMODES; i++)
        if (strcmp(s, MODE_NAMES[i]) == 0) {
            *m = (ledger_mode)i;
            return 0;
        }
    return -1;
}

int ledger_mode_is_filter(ledger_mode m)
{
    return m == LEDGER_RDP_FILTER || m == LEDGER_GDP_FILTER;
}

const char *ledger_guarantee_name(ledger_guarantee g)
{
    static const char *const names[] = {"fixed_sequence_composition", "adaptive_filter", "none"};
    return (unsigned)g < 3 ? names[g] : "unknown";
}

const char *ledger_guarantee_reference(ledger_mode m)
{
    switch (m) {
    case LEDGER_RDP:
        return "RDP composition (Mironov 2017, Proposition 1) with the improved conversion "
               "(Canonne, Kamath, Steinke 2020): valid when every round's event and the client's "
               "participation are fixed independently of earlier outputs";
    case LEDGER_PLD:
        return "composition of pessimistic privacy-loss distributions (Koskela et al. 2020; "
               "Doroshenko et al. 2022): valid when every round's event and the client's "
               "participation are fixed independently of earlier outputs";
    case LEDGER_RDP_FILTER:
        return "Renyi filters (Feldman & Zrnic 2021) at 21 orders committed in advance, delta "
               "split over the orders by a union bound, each with the improved conversion "
               "(Canonne, Kamath, Steinke 2020): (epsilon, delta)-DP for the budget under fully "
               "adaptive choices (docs/FILTERS.md)";
    case LEDGER_GDP_FILTER:
        return "Gaussian-DP filter (Smith & Thakurta 2022, fully adaptive composition for GDP): "
               "the summed mu^2 stays within the mu-GDP that meets the budget, (epsilon, "
               "delta)-DP under fully adaptive choices (docs/FILTERS.md)";
    }
    return "unknown";
}

ledger_guarantee ledger_guarantee_of(ledger_mode m, double spent, double eps, int uncertified)
{
    if (!ledger_mode_is_filter(m))
        return LEDGER_FIXED_SEQUENCE;
    return !uncertified && spent <= eps ? LEDGER_ADAPTIVE_FILTER : LEDGER_NO_GUARANTEE;
}

static void view_of(const lclient *c, ledger_client *v)
{
    memset(v, 0, sizeof *v);
    snprintf(v->id, sizeof v->id, "%s", c->id);
    v->epsilon = c->eps;
    v->delta = c->delta;
    v->mode = (ledger_mode)c->mode;
    v->relation = (dp_relation)c->rel;
    snprintf(v->labels, sizeof v->labels, "%s", c->labels ? c->labels : "");
    v->spent = c->spent;
    v->remaining = c->spent < c->eps ? c->eps - c->spent : 0.0;
    v->delta_tv = c->dtv;
    v->rounds = c->rounds;
    v->version = c->version;
    v->status = status_of(c);
    v->guarantee = ledger_guarantee_of(v->mode, c->spent, c->eps, c->uncertified);
    v->spent_accountant = c->sacct;
}

/* Insert or update a client in memory (no logging). */
static dpb_status apply_client(ledger *l, const char *id, double eps, double delta, int mode,
                               int rel, const char *labels, long *pos_out)
{
    long pos = find_client(l, id);
    if (pos < 0) {
        if (grow((void **)&l->cl, &l->cap_cl, l->ncl + 1, sizeof *l->cl) != 0)
            return DPB_ENOMEM;
        lclient *c = &l->cl[l->ncl];
        memset(c, 0, sizeof *c);
        c->last_ev = LEV_NONE;
        c->id = xstrdup(id);
        if (c->id == NULL)
            return DPB_ENOMEM;
        if (index_insert(l, &l->cl_index, l->ncl, cl_hash, (uint32_t)l->ncl) != 0) {
            free(c->id);
            return DPB_ENOMEM;
        }
        pos = (long)l->ncl++;
    } else {
        counters(l, &l->cl[pos], -1);
    }
    lclient *c = &l->cl[pos];
    c->eps = eps;
    c->delta = delta;
    c->mode = (uint8_t)mode;
    c->rel = (uint8_t)rel;
    free(c->labels);
    c->labels = labels && labels[0] ? xstrdup(labels) : NULL;
    c->version = ++l->version;
    recompute(l, c);
    counters(l, c, +1);
    if (pos_out)
        *pos_out = pos;
    return DPB_OK;
}

static void client_record(bw *w, const char *id, double eps, double delta, int mode, int rel,
                          const char *labels)
{
    bw_str(w, id);
    bw_f64(w, eps);
    bw_f64(w, delta);
    bw_u8(w, (unsigned)mode);
    bw_u8(w, (unsigned)rel);
    bw_str(w, labels);
}

/* Apply a client change whose record (seq) was just appended, keeping what it takes to
 * withdraw it (an undo entry must be reserved). Caller holds the write lock. */
static dpb_status apply_logged_client(ledger *l, uint64_t seq, const char *id, double eps,
                                      double delta, int mode, int rel, const char *labels,
                                      long *pos_out)
{
    long pos = find_client(l, id);
    lundo u = client_undo(l, seq, pos < 0 ? U_CLIENT_NEW : U_CLIENT_SET, pos);
    if (pos >= 0) {
        lclient *c = &l->cl[pos];
        u.eps = c->eps;
        u.delta = c->delta;
        u.mode = c->mode;
        u.rel = c->rel;
        u.labels = c->labels; /* taken over: apply_client sets fresh labels */
        c->labels = NULL;
    }
    dpb_status st = apply_client(l, id, eps, delta, mode, rel, labels, &pos);
    if (st != DPB_OK) {
        if (u.kind == U_CLIENT_SET) {
            free(l->cl[pos].labels);
            l->cl[pos].labels = u.labels;
        }
        return st;
    }
    u.pos = (uint32_t)pos;
    push_undo(l, &u);
    l->cl[pos].seq = seq;
    if (pos_out)
        *pos_out = pos;
    return DPB_OK;
}

/* An appended record that cannot be applied (out of memory): give up on everything not
 * durable, so the log never holds what memory does not. Caller holds the write lock. */
static dpb_status abandon(ledger *l, dpb_status st, dpb_error *err)
{
    store_abandon(l->st, "applying a logged change (out of memory)");
    if (l->shared) { /* the store dropped the pending records: memory follows, read-only */
        atomic_store(&l->read_only, 1);
        voided(l, DPB_ENOMEM);
    }
    withdraw_locked(l);
    return dpb_fail(err, st, NULL,
                    "out of memory applying a change: it is withdrawn and the ledger is "
                    "read-only until restarted");
}

/* Append a record. On failure the caller withdraws (the ledger turns read-only). Caller
 * holds the write lock. */
static dpb_status log_record(ledger *l, int type, const bw *w, dpb_error *err)
{
    if (w->oom)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    uint64_t seq;
    dpb_status st = store_append(l->st, (uint8_t)type, w->b, w->n, &seq);
    if (st == DPB_OK && seq != l->last_seq + 1) { /* the store lost count: trust nothing */
        store_abandon(l->st, "a record appended out of sequence");
        atomic_store(&l->read_only, 1);
        return dpb_fail(err, DPB_EIO, NULL,
                        "the ledger's store appended seq %llu after %llu: the change is "
                        "withdrawn and the ledger is read-only until restarted",
                        (unsigned long long)seq, (unsigned long long)l->last_seq);
    }
    if (st != DPB_OK) {
        dpb_error why = {0};
        store_error(l->st, &why);
        return dpb_fail(err, DPB_EIO, NULL,
                        "the ledger could not write its log (%s): the change is withdrawn, not "
                        "applied, and the ledger is read-only until restarted",
                        why.detail[0] ? why.detail : dpb_strstatus(st));
    }
    l->last_seq = seq;
    l->records_since_snap++;
    return DPB_OK;
}

static void maybe_snapshot(ledger *l)
{
    uint64_t every = l->opt.snapshot_every ? l->opt.snapshot_every : 100000;
    if (l->records_since_snap < every || !l->has_thread)
        return;
    pthread_mutex_lock(&l->snap_mu);
    l->snap_wanted = 1;
    pthread_cond_signal(&l->snap_cv);
    pthread_mutex_unlock(&l->snap_mu);
}

int ledger_id_valid(const char *id, size_t len)
{
    if (id == NULL || len == 0 || len > LEDGER_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        int alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || c == '\0' || strchr("._~:@+-", c) == NULL))
            return 0;
    }
    return 1;
}

static int valid_id(const char *id)
{
    return ledger_id_valid(id, strlen(id));
}

/* A filter's target (eps, delta) is fixed before its first charge: one raised after seeing
 * outputs voids the guarantee, and one lowered is not what the filter ran against. */
static const char FILTER_BUDGET_FIXED[] =
    "the budget of a privacy-filter client that was charged cannot change: the filter's "
    "guarantee is for the (epsilon, delta) fixed before its first charge (register a new client "
    "for a new budget)";

static int filter_budget_changes(const lclient *c, const ledger_client *in)
{
    return c->rounds > 0 && ledger_mode_is_filter((ledger_mode)c->mode) &&
           (c->eps != in->epsilon || c->delta != in->delta);
}

static const char MODE_FIXED[] = "the accounting mode and neighbouring relation of a client "
                                 "that was charged cannot change";

/* 1 when ledger_put_client must refuse in for the stored client c (DPB_ECONFLICT): *field
 * and *why say why. */
static int client_conflict(const lclient *c, const ledger_client *in, const char **field,
                           const char **why)
{
    if (c->rounds > 0 && (c->mode != in->mode || c->rel != in->relation)) {
        *field = "accounting";
        *why = MODE_FIXED;
        return 1;
    }
    if (filter_budget_changes(c, in)) {
        *field = "budget";
        *why = FILTER_BUDGET_FIXED;
        return 1;
    }
    return 0;
}

/* Log the client record of in and apply it (an undo entry reserved); *pos receives its
 * position. On failure everything not durable is withdrawn. Caller holds the write lock. */
static dpb_status log_client(ledger *l, const ledger_client *in, long *pos, dpb_error *err)
{
    bw w = {0};
    client_record(&w, in->id, in->epsilon, in->delta, in->mode, in->relation, in->labels);
    dpb_status st = log_record(l, REC_CLIENT, &w, err);
    free(w.b);
    if (st != DPB_OK) {
        withdraw_locked(l);
        return st;
    }
    st = apply_logged_client(l, l->last_seq, in->id, in->epsilon, in->delta, in->mode, in->relation,
                             in->labels, pos);
    return st == DPB_OK ? DPB_OK : abandon(l, st, err);
}

static dpb_status put_client_once(ledger *l, const ledger_client *in, int *created,
                                  ledger_client *out, dpb_error *err);

dpb_status ledger_put_client(ledger *l, const ledger_client *in, int *created, ledger_client *out,
                             dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, put_client_once(l, in, created, out, err), err);
    return st;
}

static dpb_status put_client_once(ledger *l, const ledger_client *in, int *created,
                                  ledger_client *out, dpb_error *err)
{
    if (!valid_id(in->id))
        return dpb_fail(err, DPB_EINVAL, "id", "a client id is " LEDGER_ID_RULE);
    if (!(isfinite(in->epsilon) && in->epsilon >= 0.0) || !(in->delta > 0.0 && in->delta < 1.0))
        return dpb_fail(err, DPB_EINVAL, "budget",
                        "a budget needs epsilon >= 0 (finite) and 0 < delta < 1");
    if ((unsigned)in->mode >= LEDGER_NMODES || (unsigned)in->relation > 1)
        return dpb_fail(err, DPB_EINVAL, "accounting", "unknown accounting mode or relation");
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = begin_write(l, err);
    uint64_t seq = 0, gen = cur_gen(l);
    if (st != DPB_OK)
        goto out;
    if (ledger_ro(l)) {
        st = readonly_error(err);
        goto out;
    }
    long pos = find_client(l, in->id);
    const char *field, *why;
    if (pos >= 0 && client_conflict(&l->cl[pos], in, &field, &why)) {
        st = dpb_fail(err, DPB_ECONFLICT, field, "%s", why);
        goto out;
    }
    if (reserve_undo(l, 1) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    *created = pos < 0;
    st = log_client(l, in, &pos, err);
    seq = l->last_seq;
    if (st == DPB_OK)
        view_of(&l->cl[pos], out);
out:
    pthread_rwlock_unlock(&l->lock);
    if (st == DPB_OK) {
        st = commit(l, seq, gen, err);
        maybe_snapshot(l);
    }
    return st;
}

static dpb_status put_clients_once(ledger *l, const ledger_client *in, size_t n, dpb_error *err);

dpb_status ledger_put_clients(ledger *l, const ledger_client *in, size_t n, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, put_clients_once(l, in, n, err), err);
    return st;
}

static dpb_status put_clients_once(ledger *l, const ledger_client *in, size_t n, dpb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!valid_id(in[i].id) || !(isfinite(in[i].epsilon) && in[i].epsilon >= 0.0) ||
            !(in[i].delta > 0.0 && in[i].delta < 1.0) || (unsigned)in[i].mode >= LEDGER_NMODES ||
            (unsigned)in[i].relation > 1)
            return dpb_fail(err, DPB_EINVAL, "clients", "entry %zu: invalid id or budget", i);
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = begin_write(l, err);
    uint64_t gen = cur_gen(l);
    if (st == DPB_OK && ledger_ro(l))
        st = readonly_error(err);
    /* all or none: every entry is checked before the first one is logged (the batch itself
     * never charges, so an earlier entry cannot make a later one conflict) */
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        long pos = find_client(l, in[i].id);
        const char *field, *why;
        if (pos >= 0 && client_conflict(&l->cl[pos], &in[i], &field, &why))
            st = dpb_fail(err, DPB_ECONFLICT, field, "entry %zu: %s", i, why);
    }
    if (st == DPB_OK && reserve_undo(l, n) != 0)
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        long pos;
        st = log_client(l, &in[i], &pos, err);
    }
    uint64_t seq = l->last_seq;
    pthread_rwlock_unlock(&l->lock);
    if (st == DPB_OK) {
        st = commit(l, seq, gen, err);
        maybe_snapshot(l);
    }
    return st;
}

/* 1 if entry in is valid on its own (the checks of ledger_put_client before the lock). */
static int client_entry_ok(const ledger_client *in)
{
    return valid_id(in->id) && isfinite(in->epsilon) && in->epsilon >= 0.0 && in->delta > 0.0 &&
           in->delta < 1.0 && (unsigned)in->mode < LEDGER_NMODES && (unsigned)in->relation <= 1;
}

/* 1 if client c already is as in asks (budget, mode, relation, labels). */
static int client_same(const lclient *c, const ledger_client *in)
{
    return c->eps == in->epsilon && c->delta == in->delta && c->mode == in->mode &&
           c->rel == in->relation && strcmp(c->labels ? c->labels : "", in->labels) == 0;
}

static dpb_status put_clients_each_once(ledger *l, const ledger_client *in, size_t n,
                                        ledger_put_outcome *out, dpb_error *err);

dpb_status ledger_put_clients_each(ledger *l, const ledger_client *in, size_t n,
                                   ledger_put_outcome *out, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, put_clients_each_once(l, in, n, out, err), err);
    return st;
}

static dpb_status put_clients_each_once(ledger *l, const ledger_client *in, size_t n,
                                        ledger_put_outcome *out, dpb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!client_entry_ok(&in[i]))
            return dpb_fail(err, DPB_EINVAL, "clients",
                            "clients[%zu]: invalid id, budget, accounting or relation", i);
    memset(out, 0, n * sizeof *out);
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = begin_write(l, err);
    uint64_t gen = cur_gen(l);
    if (st == DPB_OK && ledger_ro(l))
        st = readonly_error(err);
    if (st == DPB_OK && reserve_undo(l, n) != 0)
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    uint64_t seq = 0;
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        ledger_put_outcome *o = &out[i];
        long pos = find_client(l, in[i].id);
        const char *field, *why;
        if (pos >= 0 && client_conflict(&l->cl[pos], &in[i], &field, &why)) {
            o->result = LEDGER_PUT_CONFLICT;
            snprintf(o->field, sizeof o->field, "%s", field);
            snprintf(o->detail, sizeof o->detail, "%s", why);
        } else if (pos >= 0 && client_same(&l->cl[pos], &in[i])) {
            o->result = LEDGER_PUT_UNCHANGED;
            /* shown only once durable: wait for the change that made it so */
            if (l->cl[pos].seq > seq)
                seq = l->cl[pos].seq;
        } else {
            o->result = pos < 0 ? LEDGER_PUT_CREATED : LEDGER_PUT_UPDATED;
            if ((st = log_client(l, &in[i], &pos, err)) != DPB_OK)
                break;
            seq = l->last_seq;
        }
        o->version = pos >= 0 ? l->cl[pos].version : 0;
    }
    pthread_rwlock_unlock(&l->lock);
    if (st == DPB_OK && seq > 0) {
        st = commit(l, seq, gen, err);
        maybe_snapshot(l);
    }
    return st;
}

dpb_status ledger_get_client(ledger *l, const char *id, ledger_client *out)
{
    if (read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        long pos = find_client(l, id);
        if (pos >= 0 && settle(l, l->cl[pos].seq) != 0) {
            pthread_rwlock_unlock(&l->lock);
            withdraw(l); /* then look again: only what is durable is shown */
            continue;
        }
        if (pos >= 0)
            view_of(&l->cl[pos], out);
        pthread_rwlock_unlock(&l->lock);
        return pos >= 0 ? DPB_OK : DPB_ENOTFOUND;
    }
}

/* Take the read lock on a state whose every change is durable. */
static void rdlock_durable(ledger *l)
{
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        if (settle(l, l->last_seq) == 0)
            return;
        pthread_rwlock_unlock(&l->lock);
        withdraw(l);
    }
}

int ledger_read_only(ledger *l)
{
    return ledger_ro(l);
}

static int has_label(const lclient *c, const char *kv)
{
    if (c->labels == NULL)
        return 0;
    size_t n = strlen(kv);
    for (const char *p = c->labels; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, kv, n) == 0)
            return 1;
        p += len + (e ? 1 : 0);
    }
    return 0;
}

static const ledger *sort_ledger;
static ledger_sort sort_key;
static int sort_desc;

static int cmp_clients(const void *a, const void *b)
{
    const lclient *x = &sort_ledger->cl[*(const uint32_t *)a];
    const lclient *y = &sort_ledger->cl[*(const uint32_t *)b];
    int c = 0;
    if (sort_key == LEDGER_SORT_SPENT)
        c = x->spent < y->spent ? -1 : x->spent > y->spent;
    else if (sort_key == LEDGER_SORT_REMAINING) {
        double rx = x->spent < x->eps ? x->eps - x->spent : 0.0;
        double ry = y->spent < y->eps ? y->eps - y->spent : 0.0;
        c = rx < ry ? -1 : rx > ry;
    }
    if (c == 0)
        c = strcmp(x->id, y->id);
    return sort_desc ? -c : c;
}

/* ---- Background refinement (pld_refine) ---------------------------------------------------
 * A pld client within its budget shows its rdp value r. A background thread (refine.c), at
 * normal priority but giving way to every change (a change stops its computation, and it
 * starts one only after REFINE_QUIET_NS without changes: so it never holds a lock or a CPU
 * a round needs for long, which a low-priority thread holding a lock would), scans the clients in
 * slices under the read lock for such a state not settled yet, copies its terms (holding references
 * to its events), computes the PLD value p through the spend engine (its cache, the same code a
 * charge uses) outside every lock, and under the write lock, briefly, shows min(p, r) naming the
 * accountant if the client's budget and multiset are still exactly the copied ones: a charge
 * meanwhile is never overwritten. Nothing is logged: the refined value is a function of the logged
 * state, recomputed after a restart, so the client's version (which the log's replay must number
 * the same) is kept; the accountant changes with it, and (version, accountant) is the client's
 * ETag. Lists and the summary change too: their ETag (view_tag) mixes in the refinements applied
 * since open and a value new at every open, as a snapshot may hold refined values. */

static uint64_t view_tag(const ledger *l)
{
    uint64_t v[3] = {l->version, l->refines, l->boot};
    return fnv64(v, sizeof v, 14695981039346656037ULL);
}

static int refine_wanted(const lclient *c)
{
    return c->mode == LEDGER_PLD && !c->uncertified && c->sacct == DP_ACCT_RDP && c->nev > 0 &&
           c->refined != c->version + 1;
}

/* 1 if c still has exactly the budget and the terms o[0..m) (in its own order). */
static int refine_same(const ledger *l, const lclient *c, double eps, double delta, uint8_t rel,
                       const spend_term *o, size_t m)
{
    if (c->mode != LEDGER_PLD || c->uncertified || c->sacct != DP_ACCT_RDP || c->eps != eps ||
        c->delta != delta || c->rel != rel || c->nev != m)
        return 0;
    for (size_t i = 0; i < m; i++)
        if (l->evs[c->ev[i].ev].se != o[i].ev || c->ev[i].count != o[i].count)
            return 0;
    return 1;
}

#define REFINE_SLICE 1024 /* clients looked at per hold of the read lock */

#define REFINE_QUIET_NS 100000000u /* 100 ms without a change before a computation starts */

static int refine_step(void *arg, const int *stop)
{
    ledger *l = arg;
    if (mono_ns() - __atomic_load_n(&l->rf_last_change, __ATOMIC_ACQUIRE) < REFINE_QUIET_NS)
        return 0; /* changes are under way: wait for a quiet moment */
    char *id = NULL;
    spend_term *o = NULL, *t = NULL;
    size_t m = 0;
    double eps = 0.0, delta = 0.0;
    uint8_t rel = 0;
    pthread_rwlock_rdlock(&l->lock);
    if (l->rf_next == 0) { /* a new pass, unless nothing changed since a pass found nothing */
        if (l->version == l->rf_idle_version) {
            pthread_rwlock_unlock(&l->lock);
            return 0;
        }
        l->rf_pass_version = l->version;
        l->rf_pass_found = 0;
    }
    for (size_t k = 0; k < REFINE_SLICE && l->rf_next < l->ncl && id == NULL; k++) {
        const lclient *c = &l->cl[l->rf_next++];
        if (!refine_wanted(c))
            continue;
        m = c->nev;
        id = xstrdup(c->id);
        o = malloc(m * sizeof *o);
        t = malloc(m * sizeof *t);
        if (id == NULL || o == NULL || t == NULL) {
            free(id);
            free(o);
            free(t);
            pthread_rwlock_unlock(&l->lock);
            return 0; /* out of memory: try again later */
        }
        for (size_t i = 0; i < m; i++) {
            o[i] = t[i] = (spend_term){l->evs[c->ev[i].ev].se, c->ev[i].count};
            spend_event_ref(l->sp, o[i].ev); /* a withdrawn charge could drop it meanwhile */
        }
        eps = c->eps;
        delta = c->delta;
        rel = c->rel;
        l->rf_pass_found++;
    }
    if (id == NULL && l->rf_next >= l->ncl) { /* the pass is over */
        l->rf_next = 0;
        if (l->rf_pass_found == 0)
            l->rf_idle_version = l->rf_pass_version;
    }
    pthread_rwlock_unlock(&l->lock);
    if (id == NULL)
        return 1;
    spend_result r;
    atomic_store(&l->refining, 1);
    __atomic_store_n(&l->rf_yield, 0, __ATOMIC_RELEASE);
    int busy = 0;
    if (mono_ns() - __atomic_load_n(&l->rf_last_change, __ATOMIC_ACQUIRE) < REFINE_QUIET_NS)
        busy = 1; /* a change started while the terms were copied */
    else
        spend_refine(l->sp, eps, delta, (dp_relation)rel, t, m, &l->rf_yield, &r);
    if (__atomic_load_n(&l->rf_yield, __ATOMIC_ACQUIRE) || __atomic_load_n(stop, __ATOMIC_ACQUIRE))
        busy = 1; /* abandoned: a change (or the close) stopped it */
    if (busy) {
        __atomic_fetch_add(&l->refine_abandoned, 1, __ATOMIC_RELAXED);
        if (l->rf_next > 0)
            l->rf_next--; /* this client again, at the next quiet moment */
    } else {
        pthread_rwlock_wrlock(&l->lock);
        long pos = find_client(l, id);
        lclient *c = pos >= 0 ? &l->cl[pos] : NULL;
        if (c && refine_same(l, c, eps, delta, rel, o, m)) {
            c->refined = c->version + 1;
            if (r.accountant == DP_ACCT_PLD && r.spent < c->spent) {
                counters(l, c, -1);
                c->spent = r.spent;
                c->sacct = DP_ACCT_PLD;
                counters(l, c, +1);
                l->refines++;
            }
        } else {
            l->refine_stale++;
        }
        pthread_rwlock_unlock(&l->lock);
    }
    atomic_store(&l->refining, 0);
    for (size_t i = 0; i < m; i++)
        spend_event_put(l->sp, o[i].ev);
    free(id);
    free(o);
    free(t);
    return !busy;
}

/* ---- end of background refinement ---------------------------------------------------------- */

static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER; /* qsort has no context argument */

dpb_status ledger_list(ledger *l, const ledger_query *q, ledger_client *out, size_t *n,
                       size_t *total, uint64_t *version)
{
    if (read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    rdlock_durable(l);
    uint32_t *idx = malloc((l->ncl ? l->ncl : 1) * sizeof *idx);
    if (idx == NULL) {
        pthread_rwlock_unlock(&l->lock);
        return DPB_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < l->ncl; i++) {
        const lclient *c = &l->cl[i];
        if (q->status >= 0 && status_of(c) != (ledger_status)q->status)
            continue;
        if (q->label && !has_label(c, q->label))
            continue;
        idx[m++] = (uint32_t)i;
    }
    pthread_mutex_lock(&sort_mu);
    sort_ledger = l;
    sort_key = q->sort;
    sort_desc = q->descending;
    qsort(idx, m, sizeof *idx, cmp_clients);
    pthread_mutex_unlock(&sort_mu);
    *n = 0;
    for (size_t i = q->offset; i < m && *n < q->limit; i++)
        view_of(&l->cl[idx[i]], &out[(*n)++]);
    *total = m;
    *version = view_tag(l);
    free(idx);
    pthread_rwlock_unlock(&l->lock);
    return DPB_OK;
}

/* ---- rounds ---------------------------------------------------------------------------------- */

const char *ledger_reason_name(ledger_reason r)
{
    static const char *const names[] = {"admitted",          "over_budget", "unknown_client",
                                        "uncertifiable",     "unsupported", "all_or_nothing",
                                        "duplicate",         "exhausted",   "recorded_past_budget",
                                        "filter_unsupported"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}

const char *ledger_round_state_name(ledger_round_state s)
{
    static const char *const names[] = {"charged", "reserved", "committed", "released", "expired"};
    return (unsigned)s < 5 ? names[s] : "unknown";
}

const char *ledger_status_name(ledger_status s)
{
    static const char *const names[] = {"active", "exhausted", "uncertified"};
    return (unsigned)s < 3 ? names[s] : "unknown";
}

/* Drop the per-client answers of the oldest rounds beyond the memory budget. */
static void evict_outcomes(ledger *l)
{
    size_t keep = l->opt.keep_outcomes ? l->opt.keep_outcomes : 4000000;
    while (l->kept_outcomes > keep && l->oldest_kept < l->nrd) {
        lrnd *r = &l->rd[l->oldest_kept++];
        if (r->out == NULL || r->state == LEDGER_RESERVED) /* its commit needs them */
            continue;
        for (uint32_t i = 0; i < r->n; i++)
            if (r->out[i].owned)
                free((char *)r->out[i].id);
        free(r->out);
        r->out = NULL;
        l->kept_outcomes -= r->n;
    }
}

static void outcome_guarantee(const ledger *l, ledger_outcome *o, int creating);

static void res_of(const ledger *l, const lrnd *r, ledger_round_res *res)
{
    memset(res, 0, sizeof *res);
    snprintf(res->round_id, sizeof res->round_id, "%s", r->id);
    res->policy = (ledger_policy)r->policy;
    res->already_ran = r->already_ran;
    res->seq = r->seq;
    res->n = r->n;
    res->admitted = r->admitted;
    res->reserve = r->phase;
    res->state = (ledger_round_state)r->state;
    res->expires_at = r->expires_at;
    res->reported = r->reported;
    if (r->out == NULL) {
        res->summarized = 1;
        return;
    }
    res->outcomes = calloc(r->n ? r->n : 1, sizeof *res->outcomes);
    if (res->outcomes == NULL) {
        res->summarized = 1;
        return;
    }
    for (uint32_t i = 0; i < r->n; i++) {
        ledger_outcome *o = &res->outcomes[i];
        snprintf(o->id, sizeof o->id, "%s", r->out[i].id);
        o->admitted = r->out[i].admitted;
        o->reason = (ledger_reason)r->out[i].reason;
        o->spent_before = r->out[i].before;
        o->spent_after = r->out[i].after;
        o->after_accountant = r->out[i].acct;
        o->reported = r->out[i].reported;
        outcome_guarantee(l, o, 0);
    }
}

void ledger_round_res_free(ledger_round_res *r)
{
    free(r->outcomes);
    r->outcomes = NULL;
}

/* Add d (+1 or -1) to the client's reserved count of ev, dropping an entry that reaches 0;
 * -1 when out of memory (nothing changed). */
static int rv_adjust(lclient *c, uint32_t ev, int d)
{
    for (uint32_t i = 0; i < c->nrv; i++)
        if (c->rv[i].ev == ev) {
            if (d < 0 && c->rv[i].count <= (uint64_t)-d) {
                c->rv[i] = c->rv[--c->nrv];
                return 0;
            }
            c->rv[i].count = (uint64_t)((int64_t)c->rv[i].count + d);
            return 0;
        }
    if (d < 0)
        return 0; /* nothing held: nothing to release */
    lcount *n = realloc(c->rv, (c->nrv + 1) * sizeof *n);
    if (n == NULL)
        return -1;
    c->rv = n;
    c->rv[c->nrv++] = (lcount){ev, (uint64_t)d};
    return 0;
}

static lcount *copy_counts(const lcount *a, uint32_t n, int *oom)
{
    if (n == 0)
        return NULL;
    lcount *c = malloc(n * sizeof *c);
    if (c == NULL)
        *oom = 1;
    else
        memcpy(c, a, n * sizeof *c);
    return c;
}

/* A reservation change of the client at pos, applied in memory: held count of ev += hold
 * (+1 reserve, -1 release), and `charge` more of ev charged (a commit). With seq != 0 (live,
 * an undo entry reserved) the client's events and reservations are kept to withdraw it;
 * during replay (seq 0) the client is only marked for recomputation. -1 when out of memory. */
static int reserve_change(ledger *l, uint64_t seq, long pos, uint32_t ev, int hold, int charge,
                          long rpos)
{
    lclient *c = &l->cl[pos];
    lundo u = {0};
    if (rpos >= 0 && hist_ready(c) != 0)
        return -1;
    if (seq) {
        int oom = 0;
        u = client_undo(l, seq, U_CSNAP, pos);
        u.sev = copy_counts(c->ev, c->nev, &oom);
        u.snev = c->nev;
        u.srv = copy_counts(c->rv, c->nrv, &oom);
        u.snrv = c->nrv;
        if (oom) {
            free(u.sev);
            free(u.srv);
            return -1;
        }
        counters(l, c, -1);
    }
    int bad = rv_adjust(c, ev, hold) != 0 || (charge && add_count(c, ev, 1) != 0);
    if (bad && seq) { /* put back exactly what was */
        free(c->ev);
        free(c->rv);
        c->ev = u.sev;
        c->nev = u.snev;
        c->rv = u.srv;
        c->nrv = u.snrv;
        counters(l, c, +1);
        return -1;
    }
    if (charge) {
        c->rounds++;
        c->last_ev = ev;
        if (l->evs[ev].kind == EV_UNCERTIFIABLE)
            c->uncertified = 1;
    }
    if (rpos >= 0) {
        hist_push(c, (uint32_t)rpos, &u.hold);
        u.hpushed = 1;
    }
    c->version = ++l->version;
    if (!seq) {
        c->dirty = 1;
        return bad ? -1 : 0;
    }
    push_undo(l, &u);
    c->seq = seq;
    recompute(l, c);
    counters(l, c, +1);
    return 0;
}

/* Store a round in memory; takes ownership of out. When apply (a live round: undo entries for
 * the round and each admitted client are reserved), charges every admitted client the
 * round's event interned for its own relation (evi[rel]) and recomputes its spend. */
static dpb_status store_round(ledger *l, const char *id, const unsigned char hash[16], int policy,
                              int already_ran, uint64_t seq, const uint32_t evi[2], lout *out,
                              uint32_t n, int apply, uint64_t expires_at)
{
    if (grow((void **)&l->rd, &l->cap_rd, l->nrd + 1, sizeof *l->rd) != 0)
        return DPB_ENOMEM;
    lrnd *r = &l->rd[l->nrd];
    memset(r, 0, sizeof *r);
    r->id = xstrdup(id);
    if (r->id == NULL)
        return DPB_ENOMEM;
    memcpy(r->hash, hash, 16);
    r->policy = (uint8_t)policy;
    r->already_ran = (uint8_t)already_ran;
    r->seq = seq;
    r->n = n;
    r->out = out;
    r->ev[0] = r->ev[1] = LEV_NONE;
    if (expires_at) { /* a reservation */
        r->phase = 1;
        r->state = LEDGER_RESERVED;
        r->expires_at = expires_at;
        if (evi) {
            r->ev[0] = evi[0];
            r->ev[1] = evi[1];
        }
    }
    if (index_insert(l, &l->rd_index, l->nrd, rd_hash, (uint32_t)l->nrd) != 0) {
        free(r->id);
        return DPB_ENOMEM;
    }
    if (apply) {
        lundo u = {0};
        u.seq = seq;
        u.lversion = l->version;
        u.kind = U_ROUND;
        u.pos = (uint32_t)l->nrd;
        push_undo(l, &u);
    }
    l->nrd++;
    for (uint32_t i = 0; i < n; i++) {
        if (!out[i].admitted)
            continue;
        r->admitted++;
        if (!apply)
            continue;
        long pos = find_client(l, out[i].id);
        if (pos < 0)
            continue;
        lclient *c = &l->cl[pos];
        uint32_t ev = evi[c->rel];
        if (expires_at) { /* hold it: counted by every admission until committed or released */
            if (reserve_change(l, seq, pos, ev, 1, 0, (long)l->nrd - 1) != 0)
                return DPB_ENOMEM; /* the caller abandons the round (withdrawn as a whole) */
            continue;
        }
        lundo u = client_undo(l, seq, U_CHARGE, pos);
        u.ev = ev;
        u.ev_new = 1;
        for (uint32_t k = 0; k < c->nev; k++)
            if (c->ev[k].ev == ev)
                u.ev_new = 0;
        counters(l, c, -1);
        if (hist_ready(c) != 0 || add_count(c, ev, 1) != 0) {
            counters(l, c, +1);
            return DPB_ENOMEM; /* the caller abandons the round (withdrawn as a whole) */
        }
        hist_push(c, (uint32_t)(l->nrd - 1), &u.hold);
        u.hpushed = 1;
        push_undo(l, &u);
        c->seq = seq;
        c->rounds++;
        c->last_ev = ev;
        if (l->evs[ev].kind == EV_UNCERTIFIABLE)
            c->uncertified = 1;
        recompute(l, c); /* the same multiset the admission evaluated: a cache hit */
        c->version = ++l->version;
        counters(l, c, +1);
    }
    l->kept_outcomes += n;
    evict_outcomes(l);
    return DPB_OK;
}

/* Resolve the reservation at rp (reserved): commit it (charge the admitted outcomes at
 * idx[0..m), release the others) or release it (state LEDGER_RELEASED or LEDGER_EXPIRED).
 * Live (seq: its record, appended; undo entries reserved for the round and each admitted
 * client) or replayed (seq 0). 0, or -1 on a bad index or out of memory (the caller then
 * abandons: everything not durable is withdrawn). */
static int resolve_round(ledger *l, long rp, uint64_t seq, int state, const unsigned char *chash,
                         const uint32_t *idx, uint32_t m)
{
    lrnd *r = &l->rd[rp];
    if (r->out == NULL)
        return -1;
    if (seq) {
        lundo u = {0};
        u.seq = seq;
        u.lversion = l->version;
        u.kind = U_RSTATE;
        u.pos = (uint32_t)rp;
        u.rstate = r->state;
        u.rstate_seq = r->state_seq;
        push_undo(l, &u);
    }
    for (uint32_t i = 0; i < m; i++) {
        if (idx[i] >= r->n || !r->out[idx[i]].admitted || r->out[idx[i]].reported) {
            for (uint32_t k = 0; k < r->n; k++)
                r->out[k].reported = 0;
            return -1;
        }
        r->out[idx[i]].reported = 1;
    }
    for (uint32_t i = 0; i < r->n; i++) {
        if (!r->out[i].admitted)
            continue;
        long pos = find_client(l, r->out[i].id);
        if (pos < 0)
            continue;
        uint32_t ev = r->ev[l->cl[pos].rel];
        if (ev == LEV_NONE)
            continue;
        int charge = state == LEDGER_COMMITTED && r->out[i].reported;
        if (reserve_change(l, seq, pos, ev, -1, charge, -1) != 0)
            return -1;
    }
    r->state = (uint8_t)state;
    r->state_seq = seq ? seq : l->last_seq;
    r->reported = m;
    if (chash)
        memcpy(r->chash, chash, 16);
    return 0;
}

static void round_record(bw *w, const char *id, const unsigned char hash[16], int policy,
                         int already_ran, uint32_t ev, const lout *out, uint32_t n)
{
    bw_str(w, id);
    bw_put(w, hash, 16);
    bw_u8(w, (unsigned)policy);
    bw_u8(w, (unsigned)already_ran);
    bw_u32(w, ev);
    bw_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
        bw_str(w, out[i].id);
        bw_u8(w, out[i].admitted);
        bw_u8(w, out[i].reason);
        bw_f64(w, out[i].before);
        bw_f64(w, out[i].after);
    }
}

/* Log the interned events not in the log yet, in index order (replay checks it), each with
 * its undo entry (reserved by the caller). On failure the caller withdraws. Caller holds the
 * write lock. */
static dpb_status log_new_events(ledger *l, dpb_error *err)
{
    while (l->nevs_logged < l->nevs) {
        uint32_t idx = (uint32_t)l->nevs_logged;
        bw w = {0};
        bw_u32(&w, idx);
        bw_u8(&w, (unsigned)l->evs[idx].rel);
        bw_put(&w, l->evs[idx].bytes, l->evs[idx].nbytes);
        dpb_status st = log_record(l, REC_EVENT, &w, err);
        free(w.b);
        if (st != DPB_OK)
            return st;
        lundo u = {0};
        u.seq = l->last_seq;
        u.lversion = l->version;
        u.kind = U_EVENT;
        u.pos = idx;
        push_undo(l, &u);
        l->nevs_logged++;
    }
    return DPB_OK;
}

/* Why client id's accounting mode cannot account the event v. */
static void unsupported_why(char *why, size_t cap, const char *id, ledger_mode mode, const lev *v)
{
    if (mode == LEDGER_GDP_FILTER)
        snprintf(why, cap,
                 "client '%.128s' uses gdp_filter accounting, which accounts compositions of "
                 "unsampled Gaussian mechanisms only (use rdp_filter for sampled events)",
                 id);
    else if (mode == LEDGER_RDP_FILTER)
        snprintf(
            why, cap,
            "client '%.128s' uses rdp_filter accounting: a privacy filter needs the event's "
            "RDP curve, and this event has none (shuffled epochs' total-variation bound, "
            "(epsilon, delta) events with delta > 0 and PNSGD passes cannot be filtered)%s%.150s",
            id, v->why[0] ? ": " : "", v->why);
    else
        snprintf(why, cap,
                 "client '%.128s' uses %s accounting, which cannot account this event%s%.200s", id,
                 ledger_mode_name(mode), v->why[0] ? ": " : "", v->why);
}

/* The admission test of `extra` more rounds of event xev for client c (a stored client, or a
 * new one with the default budget), counting its held reservations; *after receives the
 * spend they would leave. LEDGER_OK when admitted. */
static ledger_reason admission(ledger *l, const lclient *c, int known, uint32_t xev, uint64_t extra,
                               double *after, int8_t *acct)
{
    const lev *v = &l->evs[xev];
    spend_result sr;
    spend_held(l, c, xev, extra, &sr);
    *after = sr.spent;
    if (acct)
        *acct = (int8_t)sr.accountant;
    if (v->kind == EV_UNCERTIFIABLE || sr.uncertified)
        return LEDGER_UNCERTIFIABLE;
    if (sr.unsupported && ledger_mode_is_filter((ledger_mode)c->mode))
        return LEDGER_FILTER_UNSUPPORTED;
    if (sr.unsupported || v->kind == EV_NOT_COVERED ||
        (c->mode == LEDGER_RDP && v->kind == EV_PLD_ONLY))
        return LEDGER_UNSUPPORTED;
    if (known && c->spent >= c->eps && !(*after <= c->eps))
        return LEDGER_EXHAUSTED_ALREADY;
    return *after <= c->eps ? LEDGER_OK : LEDGER_OVER_BUDGET;
}

/* The accounting mode and, for an admitted charge, the guarantee of an outcome. */
static void outcome_guarantee(const ledger *l, ledger_outcome *o, int creating)
{
    long pos = find_client(l, o->id);
    o->mode = pos >= 0 ? l->cl[pos].mode : creating && l->opt.default_budget ? LEDGER_RDP : -1;
    double eps = pos >= 0 ? l->cl[pos].eps : l->opt.default_epsilon;
    o->guarantee = o->mode < 0 ? LEDGER_NO_GUARANTEE
                               : ledger_guarantee_of((ledger_mode)o->mode, o->spent_after, eps, 0);
}

/* ---- the spends a round needs, computed before its lock ---------------------------------------
 *
 * A pld client's spend may need its PLD (spend.c: when the rdp bound is past the budget),
 * which takes from milliseconds to seconds. It is computed here, before the round takes the
 * write lock, from a copy of each participant's counts taken under the read lock, and kept in
 * spend.c's cache by content; the admission under the write lock then evaluates the same
 * multiset and finds it. Should a participant's counts have changed in between (a concurrent
 * round charged it), the admission computes its own value: still exact, only slower. The
 * round's event is registered in spend.c here too (its RDP curve), and held until the round
 * ends so that intern() finds it. */
static void prefetch_spends(ledger *l, const ledger_round_req *req, spend_event *pre[2])
{
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0, nt = 0, cap_t = 0, ns = 0;
    struct pclient {
        double eps, delta;
        uint8_t rel;
        size_t off, m;
    } *sn = malloc(req->n * sizeof *sn);
    spend_term *t = NULL;
    int rels[2] = {0, 0}, ok = 1;
    if (sn == NULL || dp_event_encode(req->event, &eb, &elen, &ecap) != DPB_OK) {
        free(sn);
        free(eb);
        return;
    }
    pthread_rwlock_rdlock(&l->lock);
    if (find_round(l, req->round_id) >= 0)
        ok = 0; /* a retry: answered from the stored round */
    for (size_t i = 0; i < req->n && ok; i++) {
        long pos = find_client(l, req->participants[i]);
        if (pos < 0) {
            rels[DP_REL_ADD_OR_REMOVE] = 1; /* a default client would be created so */
            continue;
        }
        const lclient *c = &l->cl[pos];
        rels[c->rel] = 1;
        if (c->mode != LEDGER_PLD || c->uncertified)
            continue;
        if (grow((void **)&t, &cap_t, nt + c->nev + c->nrv + 1, sizeof *t) != 0) {
            ok = 0;
            break;
        }
        /* the charged events and the held reservations: the multiset admission composes */
        size_t off = nt;
        for (uint32_t k = 0; k < c->nev + c->nrv; k++) {
            const lcount *e = k < c->nev ? &c->ev[k] : &c->rv[k - c->nev];
            spend_event *se = l->evs[e->ev].se;
            size_t j = off;
            while (j < nt && t[j].ev != se)
                j++;
            if (j < nt) {
                t[j].count += e->count;
                continue;
            }
            spend_event_ref(l->sp, se); /* a withdrawn charge could drop it meanwhile */
            t[nt++] = (spend_term){se, e->count};
        }
        sn[ns] = (struct pclient){c->eps, c->delta, c->rel, off, nt - off};
        nt++; /* room for the round's event */
        ns++;
    }
    pthread_rwlock_unlock(&l->lock);
    for (int r = 0; r < 2 && ok; r++)
        if (rels[r] && spend_event_get(l->sp, eb, elen, (dp_relation)r, &pre[r]) != DPB_OK)
            pre[r] = NULL;
    /* each candidate: the client's terms with the round's event once more (its admission),
     * and twice more (its status after the charge: whether one more still fits) */
    spend_candidate *cand = ok ? malloc((2 * ns + 1) * sizeof *cand) : NULL;
    spend_term *w = cand ? malloc((2 * nt + 1) * sizeof *w) : NULL;
    size_t nc = 0;
    for (size_t i = 0; w && i < ns; i++) {
        for (uint64_t more = 1; more <= 2; more++) {
            spend_term *ct = t + sn[i].off, *cw = w + (more - 1) * nt + sn[i].off; /* m + 1 */
            size_t m = sn[i].m, k;
            spend_event *x = pre[sn[i].rel];
            if (x == NULL)
                continue;
            if (m)
                memcpy(cw, ct, m * sizeof *cw);
            for (k = 0; k < m && cw[k].ev != x; k++)
                ;
            if (k < m)
                cw[k].count += more;
            else
                cw[m++] = (spend_term){x, more};
            cand[nc++] = (spend_candidate){sn[i].eps, sn[i].delta, (dp_relation)sn[i].rel, cw, m};
        }
    }
    if (w)
        spend_prefetch(l->sp, cand, nc);
    free(w);
    free(cand);
    for (size_t i = 0; i < ns; i++)
        for (size_t k = 0; k < sn[i].m; k++)
            spend_event_put(l->sp, t[sn[i].off + k].ev);
    free(t);
    free(sn);
    free(eb);
}

static dpb_status round_apply(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                              dpb_error *err);

dpb_status ledger_round(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                        dpb_error *err)
{
    spend_event *pre[2] = {NULL, NULL};
    refine_yield(l); /* before the prefetch's computations */
    if (req->event != NULL && req->n > 0 && req->n <= LEDGER_MAX_PARTICIPANTS)
        prefetch_spends(l, req, pre);
    dpb_status st;
    RETRY_RACES(st, round_apply(l, req, res, err), err);
    spend_event_put(l->sp, pre[0]);
    spend_event_put(l->sp, pre[1]);
    return st;
}

static dpb_status round_apply(ledger *l, const ledger_round_req *req, ledger_round_res *res,
                              dpb_error *err)
{
    memset(res, 0, sizeof *res);
    if (!valid_id(req->round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    if (req->n == 0 || req->n > LEDGER_MAX_PARTICIPANTS)
        return dpb_fail(err, DPB_EINVAL, "participants", "between 1 and %d participants",
                        LEDGER_MAX_PARTICIPANTS);
    for (size_t i = 0; i < req->n; i++)
        if (!valid_id(req->participants[i]))
            return dpb_fail(err, DPB_EINVAL, "participants",
                            "participant %zu is not a valid client id", i);
    if (req->reserve &&
        (req->already_ran || req->ttl_seconds < 1 || req->ttl_seconds > LEDGER_TTL_MAX))
        return dpb_fail(err, DPB_EINVAL,
                        req->already_ran ? "already_ran" : "reservation_ttl_seconds",
                        req->already_ran ? "a round that already ran is recorded in one step, not "
                                           "reserved"
                                         : "a reservation is held 1 to %d seconds",
                        LEDGER_TTL_MAX);
    unsigned char *ebytes = NULL;
    size_t elen = 0, ecap = 0;
    dpb_status st = dp_event_encode(req->event, &ebytes, &elen, &ecap);
    if (st != DPB_OK) {
        free(ebytes);
        return dpb_fail(err, st, "event", "the event cannot be recorded");
    }
    lout *out = calloc(req->n, sizeof *out);
    if (out == NULL) {
        free(ebytes);
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    }
    uint64_t seq = 0;
    uint32_t *seen = NULL;
    char why[400] = "";
    pthread_rwlock_wrlock(&l->lock);
    if ((st = begin_write(l, err)) != DPB_OK)
        goto fail;
    uint64_t gen = cur_gen(l);
    long rpos = find_round(l, req->round_id);
    /* A stored round is answered (replayed, or a conflict) only once it is durable: one whose
     * record a failure cut away is withdrawn first, and then this is a new round (refused
     * below if the ledger is read-only). A round durable before a failure is still
     * replayed. */
    while (rpos >= 0 && !req->dry_run && settle(l, l->rd[rpos].seq) != 0) {
        withdraw_locked(l);
        rpos = find_round(l, req->round_id);
    }
    /* A dry run answers from durable state only. */
    if (req->dry_run && settle(l, l->last_seq) != 0)
        withdraw_locked(l);
    if (rpos >= 0 && !req->dry_run) {
        static const unsigned char none[16];
        int same = memcmp(l->rd[rpos].hash, req->body_hash, 16) == 0 ||
                   (memcmp(req->legacy_hash, none, 16) != 0 &&
                    memcmp(l->rd[rpos].hash, req->legacy_hash, 16) == 0);
        if (!same) {
            st = dpb_fail(err, DPB_ECONFLICT, "round_id",
                          "round id '%s' was already used with a different request body",
                          req->round_id);
        } else {
            res_of(l, &l->rd[rpos], res);
            res->replayed = 1;
            st = DPB_OK;
        }
        pthread_rwlock_unlock(&l->lock);
        free(ebytes);
        free(out);
        return st;
    }
    if (ledger_ro(l) && !req->dry_run) {
        pthread_rwlock_unlock(&l->lock);
        free(ebytes);
        free(out);
        return readonly_error(err);
    }
    /* The relation is the client's: intern per relation actually used (at most two). */
    uint32_t evi[2] = {0, 0};
    int have[2] = {0, 0}, fresh[2] = {0, 0};
    size_t refused = 0;
    /* duplicates: an open-addressing set of participant indices */
    size_t scap = 16;
    while (scap < 2 * req->n)
        scap *= 2;
    seen = malloc(scap * sizeof *seen);
    if (seen == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    memset(seen, 0xff, scap * sizeof *seen);
    for (size_t i = 0; i < req->n; i++) {
        lout *o = &out[i];
        o->id = req->participants[i];
        o->acct = -1;
        long pos = find_client(l, o->id);
        size_t h = (size_t)str_hash(o->id) & (scap - 1);
        while (seen[h] != UINT32_MAX && strcmp(req->participants[seen[h]], o->id) != 0)
            h = (h + 1) & (scap - 1);
        if (seen[h] != UINT32_MAX) {
            o->reason = LEDGER_DUPLICATE;
            o->before = o->after = pos >= 0 ? l->cl[pos].spent : NAN;
            refused++;
            continue;
        }
        seen[h] = (uint32_t)i;
        if (pos < 0 && !l->opt.default_budget) {
            o->reason = LEDGER_UNKNOWN_CLIENT;
            o->before = o->after = NAN;
            refused++;
            continue;
        }
        int rel = pos >= 0 ? l->cl[pos].rel : DP_REL_ADD_OR_REMOVE;
        if (!have[rel]) {
            st = intern(l, ebytes, elen, (dp_relation)rel, &evi[rel], &fresh[rel]);
            if (st != DPB_OK) {
                dpb_fail(err, st, "event", "the event could not be prepared");
                goto fail;
            }
            have[rel] = 1;
        }
        const lev *v = &l->evs[evi[rel]];
        lclient tmp = {0}, *c;
        if (pos >= 0) {
            c = &l->cl[pos];
        } else { /* a client to be created with the default budget */
            tmp.id = (char *)o->id;
            tmp.last_ev = LEV_NONE;
            tmp.eps = l->opt.default_epsilon;
            tmp.delta = l->opt.default_delta;
            c = &tmp;
        }
        o->before = pos >= 0 ? c->spent : 0.0;
        o->reason = (uint8_t)admission(l, c, pos >= 0, evi[rel], 1, &o->after, &o->acct);
        /* After the fact, every known participant is recorded, even past its budget (an
         * uncertifiable round makes the spend infinite); unsupported events still are not. */
        if (req->already_ran && o->reason != LEDGER_OK && o->reason != LEDGER_UNSUPPORTED &&
            o->reason != LEDGER_FILTER_UNSUPPORTED && o->reason != LEDGER_UNKNOWN_CLIENT)
            o->reason = LEDGER_RECORDED;
        o->admitted = o->reason == LEDGER_OK || o->reason == LEDGER_RECORDED;
        if (!o->admitted)
            refused++;
        if ((o->reason == LEDGER_UNSUPPORTED || o->reason == LEDGER_FILTER_UNSUPPORTED) &&
            why[0] == '\0')
            unsupported_why(why, sizeof why, o->id, (ledger_mode)c->mode, v);
    }
    free(seen);
    seen = NULL;
    /* an event that no participant's accounting can account is a bad request, not a round:
     * nothing is stored, and the answer says why */
    size_t nunsup = 0;
    for (size_t i = 0; i < req->n; i++)
        nunsup += out[i].reason == LEDGER_UNSUPPORTED || out[i].reason == LEDGER_FILTER_UNSUPPORTED;
    if (nunsup == req->n) {
        st = dpb_fail(err, DPB_EUNSUPPORTED, "event", "%s", why);
        goto fail;
    }
    /* all_or_nothing voids the round, except after the fact: a round that ran is recorded
     * for every known participant */
    if (req->policy == LEDGER_ALL_OR_NOTHING && refused > 0 && !req->already_ran)
        for (size_t i = 0; i < req->n; i++)
            if (out[i].admitted) {
                out[i].admitted = 0;
                out[i].reason = LEDGER_POLICY;
            }
    /* The answer, from `out` (ids borrowed from the request). */
    snprintf(res->round_id, sizeof res->round_id, "%s", req->round_id);
    res->policy = req->policy;
    res->dry_run = req->dry_run;
    res->already_ran = req->already_ran;
    res->n = req->n;
    res->outcomes = calloc(req->n, sizeof *res->outcomes);
    if (res->outcomes == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < req->n; i++) {
        ledger_outcome *o = &res->outcomes[i];
        snprintf(o->id, sizeof o->id, "%s", out[i].id);
        o->admitted = out[i].admitted;
        o->reason = out[i].admitted && out[i].reason == LEDGER_OK ? LEDGER_OK : out[i].reason;
        o->spent_before = out[i].before;
        o->spent_after = out[i].after;
        o->after_accountant = out[i].acct;
        outcome_guarantee(l, o, 1);
        res->admitted += (size_t)out[i].admitted;
    }
    res->reserve = req->reserve;
    res->state = req->reserve ? LEDGER_RESERVED : LEDGER_CHARGED;
    if (req->dry_run) {
        drop_unlogged_events(l); /* a dry run leaves nothing behind, not even an event */
        pthread_rwlock_unlock(&l->lock);
        free(ebytes);
        free(out);
        return DPB_OK;
    }
    /* Room to withdraw everything this round changes, before anything is logged: its new
     * events, its new clients, its charges and the round itself. */
    size_t changes = (l->nevs - l->nevs_logged) + 1;
    for (size_t i = 0; i < req->n; i++)
        if (out[i].admitted)
            changes += find_client(l, out[i].id) < 0 ? 2 : 1; /* created, charged */
    if (reserve_undo(l, changes) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    /* Log: new events (in index order: replay checks it), new clients, the round; each
     * applied as it is logged. */
    (void)fresh;
    if ((st = log_new_events(l, err)) != DPB_OK)
        goto fail_io;
    for (size_t i = 0; i < req->n; i++)
        if (out[i].admitted && find_client(l, out[i].id) < 0) {
            bw w = {0};
            client_record(&w, out[i].id, l->opt.default_epsilon, l->opt.default_delta, LEDGER_RDP,
                          DP_REL_ADD_OR_REMOVE, NULL);
            st = log_record(l, REC_CLIENT, &w, err);
            free(w.b);
            if (st != DPB_OK)
                goto fail_io;
            st = apply_logged_client(l, l->last_seq, out[i].id, l->opt.default_epsilon,
                                     l->opt.default_delta, LEDGER_RDP, DP_REL_ADD_OR_REMOVE, NULL,
                                     NULL);
            if (st != DPB_OK) {
                abandon(l, st, err);
                goto fail;
            }
        }
    /* outcome ids must outlive the request: point at the clients' ids, or own a copy */
    for (size_t i = 0; i < req->n; i++) {
        long pos = find_client(l, out[i].id);
        if (pos >= 0) {
            out[i].id = l->cl[pos].id;
        } else {
            out[i].id = xstrdup(out[i].id);
            out[i].owned = 1;
            if (out[i].id == NULL) {
                out[i].owned = 0;
                st = abandon(l, DPB_ENOMEM, err);
                goto fail;
            }
        }
    }
    uint32_t ev_used = have[0] ? evi[0] : evi[1];
    uint64_t expires = req->reserve ? (uint64_t)time(NULL) + req->ttl_seconds : 0;
    const uint32_t evs[2] = {have[0] ? evi[0] : LEV_NONE, have[1] ? evi[1] : LEV_NONE};
    bw w = {0};
    round_record(&w, req->round_id, req->body_hash, req->policy, req->already_ran, ev_used, out,
                 (uint32_t)req->n);
    if (req->reserve)
        bw_u64(&w, expires);
    st = log_record(l, req->reserve ? REC_RESERVE : REC_ROUND, &w, err);
    free(w.b);
    if (st != DPB_OK)
        goto fail_io;
    seq = l->last_seq;
    res->seq = seq;
    res->reserve = req->reserve;
    res->state = req->reserve ? LEDGER_RESERVED : LEDGER_CHARGED;
    res->expires_at = expires;
    size_t nrd = l->nrd;
    st = store_round(l, req->round_id, req->body_hash, req->policy, req->already_ran, seq, evs, out,
                     (uint32_t)req->n, 1, expires);
    if (l->nrd > nrd)
        out = NULL; /* taken over by the stored round (withdrawn with it on failure) */
    if (st != DPB_OK) {
        abandon(l, st, err);
        goto fail;
    }
    pthread_rwlock_unlock(&l->lock);
    free(ebytes);
    st = commit(l, seq, gen, err);
    maybe_snapshot(l);
    if (st != DPB_OK)
        ledger_round_res_free(res);
    return st;
fail_io:
    withdraw_locked(l); /* the log failed: everything not durable goes, this round's too */
fail:
    drop_unlogged_events(l);
    pthread_rwlock_unlock(&l->lock);
    free(seen);
    free(ebytes);
    for (size_t i = 0; out && i < req->n; i++)
        if (out[i].owned)
            free((char *)out[i].id);
    free(out);
    ledger_round_res_free(res);
    return st;
}

/* ---- two-phase rounds: commit, release, expiry ----------------------------------------------- */

/* The position of stored round id once durable, with its last state change (one whose
 * record a failure cut away is withdrawn first), or -1. Caller holds the write lock. */
static long durable_round(ledger *l, const char *id)
{
    long rp = find_round(l, id);
    while (rp >= 0 && settle(l, l->rd[rp].seq > l->rd[rp].state_seq ? l->rd[rp].seq
                                                                    : l->rd[rp].state_seq) != 0) {
        withdraw_locked(l);
        rp = find_round(l, id);
    }
    return rp;
}

/* Log and apply the release of the reservation at rp (expired: by the ledger, its time up);
 * *seq receives its record. Caller holds the write lock after begin_write. */
static dpb_status release_locked(ledger *l, long rp, int expired, uint64_t *seq, dpb_error *err)
{
    if (reserve_undo(l, 1 + (size_t)l->rd[rp].admitted) != 0)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    bw w = {0};
    bw_str(&w, l->rd[rp].id);
    bw_u8(&w, (unsigned)expired);
    dpb_status st = log_record(l, REC_RELEASE, &w, err);
    free(w.b);
    if (st != DPB_OK) {
        withdraw_locked(l);
        return st;
    }
    *seq = l->last_seq;
    if (resolve_round(l, rp, *seq, expired ? LEDGER_EXPIRED : LEDGER_RELEASED, NULL, NULL, 0) != 0)
        return abandon(l, DPB_ENOMEM, err);
    return DPB_OK;
}

/* Why a round that is not reserved cannot be committed or released (DPB_ECONFLICT). */
static dpb_status not_reserved(const lrnd *r, const char *what, dpb_error *err)
{
    if (!r->phase)
        return dpb_fail(err, DPB_ECONFLICT, "round_id",
                        "round '%s' was charged in one step (its request had no \"phase\": "
                        "\"reserve\"): there is nothing to %s",
                        r->id, what);
    if (r->state == LEDGER_COMMITTED)
        return dpb_fail(err, DPB_ECONFLICT, "round_id", "round '%s' was already committed%s", r->id,
                        strcmp(what, "commit") == 0 ? " with another list of reported clients"
                                                    : ": its charges stand");
    if (r->state == LEDGER_EXPIRED)
        return dpb_fail(err, DPB_ECONFLICT, "round_id",
                        "the reservation of round '%s' expired (its reservation_ttl_seconds "
                        "passed) and its clients' budget was released: reserve a new round",
                        r->id);
    return dpb_fail(err, DPB_ECONFLICT, "round_id",
                    "the reservation of round '%s' was released: reserve a new round", r->id);
}

/* After a commit or release: acknowledge once its record (seq, 0: none) is durable. */
static dpb_status finish_resolve(ledger *l, uint64_t seq, uint64_t gen, dpb_status st,
                                 ledger_round_res *res, dpb_error *err)
{
    if (seq == 0)
        return st;
    dpb_status cs = commit(l, seq, gen, err);
    maybe_snapshot(l);
    if (cs != DPB_OK) {
        ledger_round_res_free(res);
        return cs;
    }
    return st;
}

static dpb_status commit_once(ledger *l, const char *round_id, const char *const *reported,
                              size_t n, const unsigned char hash[16], ledger_round_res *res,
                              dpb_error *err);

dpb_status ledger_commit(ledger *l, const char *round_id, const char *const *reported, size_t n,
                         const unsigned char hash[16], ledger_round_res *res, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, commit_once(l, round_id, reported, n, hash, res, err), err);
    return st;
}

static dpb_status commit_once(ledger *l, const char *round_id, const char *const *reported,
                              size_t n, const unsigned char hash[16], ledger_round_res *res,
                              dpb_error *err)
{
    memset(res, 0, sizeof *res);
    if (!valid_id(round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    if (n > LEDGER_MAX_PARTICIPANTS)
        return dpb_fail(err, DPB_EINVAL, "reported", "at most %d reported clients",
                        LEDGER_MAX_PARTICIPANTS);
    uint32_t *idx = NULL, *slot = NULL;
    uint64_t seq = 0;
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = begin_write(l, err);
    uint64_t gen = cur_gen(l);
    if (st != DPB_OK)
        goto out;
    long rp = durable_round(l, round_id);
    if (rp < 0) {
        st = dpb_fail(err, DPB_ENOTFOUND, "round_id", "no round '%s'", round_id);
        goto out;
    }
    if (l->rd[rp].phase && l->rd[rp].state == LEDGER_COMMITTED &&
        memcmp(l->rd[rp].chash, hash, 16) == 0) {
        res_of(l, &l->rd[rp], res);
        res->replayed = 1;
        goto out;
    }
    if (l->rd[rp].phase && l->rd[rp].state == LEDGER_RESERVED &&
        l->rd[rp].expires_at <= (uint64_t)time(NULL) && !ledger_ro(l) &&
        (st = release_locked(l, rp, 1, &seq, err)) != DPB_OK)
        goto out;
    const lrnd *r = &l->rd[rp];
    if (!r->phase || r->state != LEDGER_RESERVED) {
        res_of(l, r, res); /* the caller tells expired from released */
        st = not_reserved(r, "commit", err);
        goto out;
    }
    if (ledger_ro(l)) {
        st = readonly_error(err);
        goto out;
    }
    /* the reported ids, as indices of admitted outcomes (an open-addressing index of them) */
    size_t cap = 16;
    while (cap < 2 * (size_t)r->n)
        cap *= 2;
    idx = malloc((n ? n : 1) * sizeof *idx);
    slot = malloc(cap * sizeof *slot);
    if (idx == NULL || slot == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    memset(slot, 0xff, cap * sizeof *slot);
    for (uint32_t i = 0; i < r->n; i++)
        if (r->out[i].admitted) {
            size_t h = (size_t)str_hash(r->out[i].id) & (cap - 1);
            while (slot[h] != UINT32_MAX)
                h = (h + 1) & (cap - 1);
            slot[h] = i;
        }
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)str_hash(reported[i]) & (cap - 1);
        while (slot[h] != UINT32_MAX && strcmp(r->out[slot[h]].id, reported[i]) != 0)
            h = (h + 1) & (cap - 1);
        char f[40];
        snprintf(f, sizeof f, "reported[%zu]", i);
        if (slot[h] == UINT32_MAX) {
            st = dpb_fail(err, DPB_EINVAL, f,
                          "'%s' was not admitted to round '%s': only its admitted clients can "
                          "report",
                          reported[i], round_id);
            goto out;
        }
        for (size_t k = 0; k < i; k++)
            if (idx[k] == slot[h]) {
                st = dpb_fail(err, DPB_EINVAL, f, "'%s' is listed twice", reported[i]);
                goto out;
            }
        idx[i] = slot[h];
    }
    if (reserve_undo(l, 1 + (size_t)r->admitted) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    bw w = {0};
    bw_str(&w, round_id);
    bw_put(&w, hash, 16);
    bw_u32(&w, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        bw_u32(&w, idx[i]);
    st = log_record(l, REC_COMMIT, &w, err);
    free(w.b);
    if (st != DPB_OK) {
        withdraw_locked(l);
        goto out;
    }
    seq = l->last_seq;
    if (resolve_round(l, rp, seq, LEDGER_COMMITTED, hash, idx, (uint32_t)n) != 0) {
        st = abandon(l, DPB_ENOMEM, err);
        seq = 0;
        goto out;
    }
    res_of(l, &l->rd[rp], res);
out:
    pthread_rwlock_unlock(&l->lock);
    free(idx);
    free(slot);
    return finish_resolve(l, st == DPB_OK || st == DPB_ECONFLICT ? seq : 0, gen, st, res, err);
}

static dpb_status release_once(ledger *l, const char *round_id, ledger_round_res *res,
                               dpb_error *err);

dpb_status ledger_release(ledger *l, const char *round_id, ledger_round_res *res, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, release_once(l, round_id, res, err), err);
    return st;
}

static dpb_status release_once(ledger *l, const char *round_id, ledger_round_res *res,
                               dpb_error *err)
{
    memset(res, 0, sizeof *res);
    if (!valid_id(round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    uint64_t seq = 0;
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = begin_write(l, err);
    uint64_t gen = cur_gen(l);
    long rp = st == DPB_OK ? durable_round(l, round_id) : -1;
    if (st != DPB_OK) {
        /* the database cannot be reached: answered as such */
    } else if (rp < 0) {
        st = dpb_fail(err, DPB_ENOTFOUND, "round_id", "no round '%s'", round_id);
    } else if (!l->rd[rp].phase || l->rd[rp].state == LEDGER_COMMITTED) {
        res_of(l, &l->rd[rp], res);
        st = not_reserved(&l->rd[rp], "release", err);
    } else if (l->rd[rp].state != LEDGER_RESERVED) {
        res_of(l, &l->rd[rp], res); /* released or expired already: idempotent */
        res->replayed = 1;
    } else if (ledger_ro(l)) {
        st = readonly_error(err);
    } else {
        int expired = l->rd[rp].expires_at <= (uint64_t)time(NULL);
        st = release_locked(l, rp, expired, &seq, err);
        if (st == DPB_OK)
            res_of(l, &l->rd[rp], res);
        else
            seq = 0;
    }
    pthread_rwlock_unlock(&l->lock);
    return finish_resolve(l, seq, gen, st, res, err);
}

/* Release round id if it is still a reservation whose time is up: DPB_OK (*done 1 if this
 * call released it), LEDGER_RACE, or a failure. */
static dpb_status expire_once(ledger *l, const char *id, uint64_t now, int *done)
{
    uint64_t seq = 0;
    dpb_error err = {0};
    *done = 0;
    pthread_rwlock_wrlock(&l->lock);
    dpb_status st = begin_write(l, &err);
    uint64_t gen = cur_gen(l);
    long rp = st != DPB_OK || ledger_ro(l) ? -1 : durable_round(l, id);
    if (rp >= 0 && l->rd[rp].state == LEDGER_RESERVED && l->rd[rp].expires_at <= now &&
        (st = release_locked(l, rp, 1, &seq, &err)) != DPB_OK)
        seq = 0;
    pthread_rwlock_unlock(&l->lock);
    if (seq && (st = commit(l, seq, gen, &err)) == DPB_OK)
        *done = 1;
    return st;
}

size_t ledger_expire(ledger *l, uint64_t now)
{
    enum { BATCH = 256 };
    char *ids[BATCH];
    size_t k = 0, done = 0;
    if (read_begin(l, NULL) != DPB_OK)
        return 0; /* a shared store's database cannot be reached: the next sweep */
    pthread_rwlock_rdlock(&l->lock);
    for (size_t i = 0; i < l->nrd && k < BATCH; i++)
        if (l->rd[i].state == LEDGER_RESERVED && l->rd[i].expires_at <= now &&
            (ids[k] = xstrdup(l->rd[i].id)) != NULL)
            k++;
    pthread_rwlock_unlock(&l->lock);
    for (size_t i = 0; i < k; i++) {
        /* another replica expiring it first is a lost race: run again, it is released */
        int one = 0;
        dpb_status st;
        RETRY_RACES(st, expire_once(l, ids[i], now, &one), NULL);
        (void)st;
        done += (size_t)one;
        free(ids[i]);
    }
    if (done)
        maybe_snapshot(l);
    return done;
}

/* ---- named events ---------------------------------------------------------------------------- */

/* Store a named event in memory (bytes copied). -1 when out of memory. */
static int apply_name(ledger *l, const char *name, const unsigned char *bytes, size_t n,
                      uint64_t seq)
{
    if (grow((void **)&l->nm, &l->cap_nm, l->nnm + 1, sizeof *l->nm) != 0)
        return -1;
    lname *e = &l->nm[l->nnm];
    e->name = xstrdup(name);
    e->bytes = malloc(n ? n : 1);
    if (e->name == NULL || e->bytes == NULL ||
        index_insert(l, &l->nm_index, l->nnm, nm_hash, (uint32_t)l->nnm) != 0) {
        free(e->name);
        free(e->bytes);
        return -1;
    }
    memcpy(e->bytes, bytes, n);
    e->nbytes = n;
    e->seq = seq;
    l->nnm++;
    return 0;
}

static dpb_status put_event_once(ledger *l, const char *name, const dp_event *ev, int *created,
                                 uint64_t *seq_out, dpb_error *err);

dpb_status ledger_put_event(ledger *l, const char *name, const dp_event *ev, int *created,
                            uint64_t *seq_out, dpb_error *err)
{
    dpb_status st;
    RETRY_RACES(st, put_event_once(l, name, ev, created, seq_out, err), err);
    return st;
}

static dpb_status put_event_once(ledger *l, const char *name, const dp_event *ev, int *created,
                                 uint64_t *seq_out, dpb_error *err)
{
    *created = 0;
    if (!valid_id(name))
        return dpb_fail(err, DPB_EINVAL, "name", "an event name is " LEDGER_ID_RULE);
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0;
    dpb_status st = dp_event_encode(ev, &eb, &elen, &ecap);
    if (st != DPB_OK) {
        free(eb);
        return dpb_fail(err, st, "event", "the event cannot be recorded");
    }
    uint64_t seq = 0;
    pthread_rwlock_wrlock(&l->lock);
    st = begin_write(l, err);
    uint64_t gen = cur_gen(l);
    if (st != DPB_OK)
        goto out;
    long pos = find_name(l, name);
    while (pos >= 0 && settle(l, l->nm[pos].seq) != 0) { /* shown only once durable */
        withdraw_locked(l);
        pos = find_name(l, name);
    }
    if (pos >= 0) {
        const lname *e = &l->nm[pos];
        if (e->nbytes == elen && memcmp(e->bytes, eb, elen) == 0)
            *seq_out = e->seq;
        else
            st = dpb_fail(err, DPB_ECONFLICT, "name",
                          "the name '%s' is taken by another event (names are immutable: "
                          "register this event under another name)",
                          name);
        goto out;
    }
    if (ledger_ro(l)) {
        st = readonly_error(err);
        goto out;
    }
    /* the event in the vocabulary for both relations (logged first), then the name */
    for (int rel = 0; rel < 2 && st == DPB_OK; rel++) {
        uint32_t idx;
        int fresh;
        st = intern(l, eb, elen, (dp_relation)rel, &idx, &fresh);
        if (st != DPB_OK)
            dpb_fail(err, st, "event", "the event could not be prepared");
    }
    if (st == DPB_OK && reserve_undo(l, l->nevs - l->nevs_logged + 1) != 0)
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    if (st != DPB_OK) {
        drop_unlogged_events(l);
        goto out;
    }
    if ((st = log_new_events(l, err)) != DPB_OK) {
        withdraw_locked(l);
        goto out;
    }
    bw w = {0};
    bw_str(&w, name);
    bw_put(&w, eb, elen);
    st = log_record(l, REC_NAME, &w, err);
    free(w.b);
    if (st != DPB_OK) {
        withdraw_locked(l);
        goto out;
    }
    seq = l->last_seq;
    if (apply_name(l, name, eb, elen, seq) != 0) {
        st = abandon(l, DPB_ENOMEM, err);
        seq = 0;
        goto out;
    }
    lundo u = {0};
    u.seq = seq;
    u.lversion = l->version;
    u.kind = U_NAME;
    u.pos = (uint32_t)(l->nnm - 1);
    push_undo(l, &u);
    *created = 1;
    *seq_out = seq;
out:
    pthread_rwlock_unlock(&l->lock);
    free(eb);
    if (st == DPB_OK && seq) {
        st = commit(l, seq, gen, err);
        maybe_snapshot(l);
    }
    return st;
}

dpb_status ledger_get_event(ledger *l, const char *name, dp_event **out, uint64_t *seq)
{
    *out = NULL;
    if (read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        long pos = find_name(l, name);
        if (pos >= 0 && settle(l, l->nm[pos].seq) != 0) {
            pthread_rwlock_unlock(&l->lock);
            withdraw(l);
            continue;
        }
        dpb_status st = DPB_ENOTFOUND;
        if (pos >= 0) {
            *seq = l->nm[pos].seq;
            st = dp_event_decode(l->nm[pos].bytes, l->nm[pos].nbytes, out, NULL);
        }
        pthread_rwlock_unlock(&l->lock);
        return st;
    }
}

static const ledger *name_sort_ledger;
static int cmp_names(const void *a, const void *b)
{
    return strcmp(name_sort_ledger->nm[*(const uint32_t *)a].name,
                  name_sort_ledger->nm[*(const uint32_t *)b].name);
}

dpb_status ledger_list_events(ledger *l, size_t offset, size_t limit, char ***names, size_t *n,
                              size_t *total)
{
    *names = NULL;
    *n = 0;
    if (read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    rdlock_durable(l);
    size_t m = l->nnm;
    uint32_t *idx = malloc((m ? m : 1) * sizeof *idx);
    char **out = calloc(limit ? limit : 1, sizeof *out);
    dpb_status st = idx && out ? DPB_OK : DPB_ENOMEM;
    if (st == DPB_OK) {
        for (size_t i = 0; i < m; i++)
            idx[i] = (uint32_t)i;
        pthread_mutex_lock(&sort_mu);
        name_sort_ledger = l;
        qsort(idx, m, sizeof *idx, cmp_names);
        pthread_mutex_unlock(&sort_mu);
        for (size_t i = offset; i < m && *n < limit; i++)
            if ((out[(*n)++] = xstrdup(l->nm[idx[i]].name)) == NULL)
                st = DPB_ENOMEM;
    }
    *total = m;
    pthread_rwlock_unlock(&l->lock);
    free(idx);
    if (st != DPB_OK) {
        for (size_t i = 0; out && i < *n; i++)
            free(out[i]);
        free(out);
        *n = 0;
        return st;
    }
    *names = out;
    return DPB_OK;
}

/* ---- charge history -------------------------------------------------------------------------- */

dpb_status ledger_client_history(ledger *l, const char *id, size_t offset, size_t limit,
                                 ledger_history *h)
{
    memset(h, 0, sizeof *h);
    if (read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    rdlock_durable(l);
    long pos = find_client(l, id);
    if (pos < 0) {
        pthread_rwlock_unlock(&l->lock);
        return DPB_ENOTFOUND;
    }
    const lclient *c = &l->cl[pos];
    size_t kept = c->hseen < LEDGER_HISTORY ? c->hseen : LEDGER_HISTORY;
    h->total = kept;
    h->complete = c->hseen <= LEDGER_HISTORY;
    h->items = calloc(limit ? limit : 1, sizeof *h->items);
    h->agg = calloc((size_t)c->nev + c->nrv + 1, sizeof *h->agg);
    dpb_status st = h->items && h->agg ? DPB_OK : DPB_ENOMEM;
    for (size_t k = offset; st == DPB_OK && k < kept && h->n < limit; k++) {
        /* newest first: entry hseen - 1 - k */
        const lrnd *r = &l->rd[c->hist[(c->hseen - 1 - k) % LEDGER_HISTORY]];
        ledger_hist_item *it = &h->items[h->n++];
        snprintf(it->round_id, sizeof it->round_id, "%s", r->id);
        it->seq = r->seq;
        it->spent_after = NAN;
        const lout *o = NULL;
        for (uint32_t i = 0; r->out && i < r->n && o == NULL; i++)
            if (r->out[i].id == c->id) /* a known client's outcome points at its id */
                o = &r->out[i];
        if (o)
            it->spent_after = o->after;
        if (!r->phase || (r->state == LEDGER_COMMITTED && o && o->reported))
            it->state = LEDGER_H_CHARGED;
        else if (r->state == LEDGER_RESERVED)
            it->state = LEDGER_H_RESERVED;
        else
            it->state = LEDGER_H_RELEASED;
    }
    /* the aggregate: every distinct event, charged and reserved counts */
    for (uint32_t i = 0; st == DPB_OK && i < c->nev + c->nrv; i++) {
        const lcount *e = i < c->nev ? &c->ev[i] : &c->rv[i - c->nev];
        ledger_agg_item *a = NULL;
        /* a reserved event that is also charged shares its entry (agg[j] is ev[j]) */
        for (uint32_t j = 0; i >= c->nev && j < c->nev && a == NULL; j++)
            if (c->ev[j].ev == e->ev)
                a = &h->agg[j];
        if (a == NULL) {
            a = &h->agg[h->nagg];
            if (dp_event_decode(l->evs[e->ev].bytes, l->evs[e->ev].nbytes, &a->event, NULL) !=
                DPB_OK) {
                st = DPB_ENOMEM;
                break;
            }
            h->nagg++;
        }
        if (i < c->nev)
            a->count += e->count;
        else
            a->reserved += e->count;
    }
    pthread_rwlock_unlock(&l->lock);
    if (st != DPB_OK)
        ledger_history_free(h);
    return st;
}

void ledger_history_free(ledger_history *h)
{
    for (size_t i = 0; h->agg && i < h->nagg; i++)
        dp_event_free(h->agg[i].event);
    free(h->agg);
    free(h->items);
    memset(h, 0, sizeof *h);
}

/* ---- eligibility ----------------------------------------------------------------------------- */

/* Two clients whose admissions of any event agree: the same budget, mode, relation,
 * uncertified flag and the same multisets of charged and reserved events. */
static int same_history(const lclient *a, const lclient *b)
{
    if (a->eps != b->eps || a->delta != b->delta || a->mode != b->mode || a->rel != b->rel ||
        a->uncertified != b->uncertified || a->nev != b->nev || a->nrv != b->nrv ||
        (a->spent >= a->eps) != (b->spent >= b->eps))
        return 0;
    for (uint32_t i = 0; i < a->nev; i++) {
        uint32_t k = 0;
        while (k < b->nev && b->ev[k].ev != a->ev[i].ev)
            k++;
        if (k == b->nev || b->ev[k].count != a->ev[i].count)
            return 0;
    }
    for (uint32_t i = 0; i < a->nrv; i++) {
        uint32_t k = 0;
        while (k < b->nrv && b->rv[k].ev != a->rv[i].ev)
            k++;
        if (k == b->nrv || b->rv[k].count != a->rv[i].count)
            return 0;
    }
    return 1;
}

static uint64_t history_hash(const lclient *c)
{
    uint64_t h = fnv64(&c->eps, sizeof c->eps, 14695981039346656037ULL);
    h = fnv64(&c->delta, sizeof c->delta, h);
    unsigned char b[3] = {c->mode, c->rel, c->uncertified};
    h = fnv64(b, 3, h);
    uint64_t x = 0; /* order-free: sum of the entries' own hashes */
    for (uint32_t i = 0; i < c->nev; i++)
        x +=
            fnv64(&c->ev[i], sizeof c->ev[i].ev, fnv64(&c->ev[i].count, 8, 1469598103934665603ULL));
    for (uint32_t i = 0; i < c->nrv; i++)
        x += 31 * fnv64(&c->rv[i].ev, sizeof c->rv[i].ev,
                        fnv64(&c->rv[i].count, 8, 1469598103934665603ULL));
    return fnv64(&x, 8, h);
}

/* One client's eligibility for `ev` (its relation's interned index): the admission of one
 * round, then the number of further rounds it can afford, by doubling then bisection on the
 * same admission test, capped at max_rounds (the spend grows with the count). */
static void eligibility_of(ledger *l, const lclient *c, int known, uint32_t ev, uint64_t max_rounds,
                           ledger_elig_item *it)
{
    double after;
    it->reason = admission(l, c, known, ev, 1, &after, NULL);
    it->eligible = it->reason == LEDGER_OK;
    it->rounds = 0;
    it->capped = 0;
    if (!it->eligible)
        return;
    uint64_t lo = 1, hi = 2; /* lo affordable; hi not known */
    while (hi <= max_rounds && admission(l, c, known, ev, hi, &after, NULL) == LEDGER_OK) {
        lo = hi;
        hi *= 2;
    }
    if (hi > max_rounds) {
        if (lo < max_rounds && admission(l, c, known, ev, max_rounds, &after, NULL) == LEDGER_OK) {
            it->rounds = max_rounds;
            it->capped = 1;
            return;
        }
        if (lo == max_rounds) {
            it->rounds = lo;
            it->capped = 1;
            return;
        }
        hi = max_rounds; /* not affordable */
    }
    while (hi - lo > 1) { /* lo affordable, hi not */
        uint64_t mid = lo + (hi - lo) / 2;
        if (admission(l, c, known, ev, mid, &after, NULL) == LEDGER_OK)
            lo = mid;
        else
            hi = mid;
    }
    it->rounds = lo;
}

/* The event's index for relation rel if interned, else UINT32_MAX. */
static uint32_t find_event(const ledger *l, const unsigned char *bytes, size_t n, int rel)
{
    evkey k = {bytes, n, (dp_relation)rel};
    uint64_t h = fnv64(bytes, n, 14695981039346656037ULL ^ (uint64_t)rel);
    size_t s = index_find(l, &l->ev_index, h, ev_eq, &k);
    return l->ev_index.slot[s];
}

typedef struct {
    uint64_t h;
    long pos; /* the first client with this history */
    size_t item;
} ememo;

/* The answer for every candidate, under a lock already held (read, or write with the event
 * interned but not logged). */
static dpb_status eligibility_locked(ledger *l, const ledger_elig_req *q, const uint32_t evi[2],
                                     ledger_elig_item *items, size_t n, const long *pos)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    ememo *memo = malloc(cap * sizeof *memo);
    if (memo == NULL)
        return DPB_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        memo[i].pos = -2;
    for (size_t i = 0; i < n; i++) {
        ledger_elig_item *it = &items[i];
        long p = pos[i];
        lclient tmp = {0};
        const lclient *c = p >= 0 ? &l->cl[p] : &tmp;
        it->mode = p >= 0 ? c->mode : l->opt.default_budget ? LEDGER_RDP : -1;
        if (p < 0 && !l->opt.default_budget) {
            it->reason = LEDGER_UNKNOWN_CLIENT;
            it->spent = it->remaining = it->delta = NAN;
            continue;
        }
        if (p < 0) { /* created with the default budget by its first round */
            tmp.last_ev = LEV_NONE;
            tmp.eps = l->opt.default_epsilon;
            tmp.delta = l->opt.default_delta;
        }
        it->delta = c->delta;
        it->spent = c->spent;
        it->remaining = c->spent < c->eps ? c->eps - c->spent : 0.0;
        if (c->nrv > 0) { /* held reservations count as spent */
            spend_result held;
            spend_held(l, c, 0, 0, &held);
            it->spent = held.spent;
            it->remaining = it->spent < c->eps ? c->eps - it->spent : 0.0;
        }
        uint32_t ev = evi[c->rel];
        if (p < 0) {
            eligibility_of(l, c, 0, ev, q->max_rounds, it);
            continue;
        }
        uint64_t h = history_hash(c) ^ ev;
        size_t s = (size_t)h & (cap - 1);
        while (memo[s].pos != -2 && !(memo[s].h == h && same_history(&l->cl[memo[s].pos], c) &&
                                      evi[l->cl[memo[s].pos].rel] == ev))
            s = (s + 1) & (cap - 1);
        if (memo[s].pos != -2) {
            const ledger_elig_item *m = &items[memo[s].item];
            it->eligible = m->eligible;
            it->reason = m->reason;
            it->rounds = m->rounds;
            it->capped = m->capped;
            continue;
        }
        eligibility_of(l, c, 1, ev, q->max_rounds, it);
        memo[s] = (ememo){h, p, i};
    }
    free(memo);
    return DPB_OK;
}

dpb_status ledger_eligibility(ledger *l, const ledger_elig_req *q, ledger_elig_item **out,
                              size_t *nout, dpb_error *err)
{
    *out = NULL;
    *nout = 0;
    if (q->max_rounds < 1 || q->max_rounds > LEDGER_ELIG_MAX_ROUNDS)
        return dpb_fail(err, DPB_EINVAL, "max_rounds", "max_rounds is 1 to %d",
                        LEDGER_ELIG_MAX_ROUNDS);
    if (q->ids ? q->n == 0 || q->n > LEDGER_MAX_PARTICIPANTS : q->label == NULL)
        return dpb_fail(err, DPB_EINVAL, "clients", "between 1 and %d client ids, or a label",
                        LEDGER_MAX_PARTICIPANTS);
    if (read_begin(l, err) != DPB_OK)
        return DPB_EUNAVAILABLE;
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0;
    dpb_status st = dp_event_encode(q->event, &eb, &elen, &ecap);
    if (st != DPB_OK) {
        free(eb);
        return dpb_fail(err, st, "event", "the event cannot be accounted");
    }
    ledger_elig_item *items = NULL;
    long *pos = NULL;
    size_t n = 0;
    int write_locked = 0;
    for (;;) {
        if (write_locked) {
            pthread_rwlock_wrlock(&l->lock);
            (void)begin_write(l, NULL);      /* caught up by read_begin already, or as it can */
            if (settle(l, l->last_seq) != 0) /* answer from durable state only */
                withdraw_locked(l);
        } else {
            rdlock_durable(l);
        }
        /* the candidates */
        n = q->ids ? q->n : 0;
        if (!q->ids)
            for (size_t i = 0; i < l->ncl; i++)
                n += has_label(&l->cl[i], q->label);
        if (n > LEDGER_MAX_PARTICIPANTS) {
            pthread_rwlock_unlock(&l->lock);
            free(eb);
            return dpb_fail(err, DPB_ELIMIT, "label",
                            "the label selects %zu clients; at most %d are answered at once "
                            "(list their ids in several requests)",
                            n, LEDGER_MAX_PARTICIPANTS);
        }
        free(items);
        free(pos);
        items = calloc(n ? n : 1, sizeof *items);
        pos = malloc((n ? n : 1) * sizeof *pos);
        if (items == NULL || pos == NULL) {
            st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            break;
        }
        size_t k = 0;
        int need[2] = {0, 0};
        for (size_t i = 0; q->ids ? i < n : i < l->ncl; i++) {
            if (!q->ids && !has_label(&l->cl[i], q->label))
                continue;
            pos[k] = q->ids ? find_client(l, q->ids[i]) : (long)i;
            snprintf(items[k].id, sizeof items[k].id, "%s", q->ids ? q->ids[i] : l->cl[i].id);
            need[pos[k] >= 0 ? l->cl[pos[k]].rel : DP_REL_ADD_OR_REMOVE] = 1;
            k++;
        }
        /* the event, interned for each relation the candidates use */
        uint32_t evi[2] = {LEV_NONE, LEV_NONE};
        int missing = 0;
        for (int r = 0; r < 2; r++)
            if (need[r] && (evi[r] = find_event(l, eb, elen, r)) == LEV_NONE)
                missing = 1;
        if (missing && write_locked) {
            /* intern (scratch, not logged), then answer under the write lock */
            for (int r = 0; r < 2 && st == DPB_OK; r++) {
                int fresh;
                if (need[r] && evi[r] == LEV_NONE)
                    st = intern(l, eb, elen, (dp_relation)r, &evi[r], &fresh);
            }
            if (st != DPB_OK)
                dpb_fail(err, st, "event", "the event could not be prepared");
            missing = 0;
        }
        if (!missing) {
            if (st == DPB_OK && eligibility_locked(l, q, evi, items, n, pos) != DPB_OK)
                st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            if (write_locked)
                drop_unlogged_events(l);
            pthread_rwlock_unlock(&l->lock);
            break;
        }
        /* an event no round or name has brought in: answered under the write lock with the
         * event taken up as scratch (as a dry run does), so that a query never makes the
         * ledger keep, or log, what it was asked about */
        pthread_rwlock_unlock(&l->lock);
        write_locked = 1;
    }
    free(eb);
    free(pos);
    if (st != DPB_OK) {
        free(items);
        return st;
    }
    *out = items;
    *nout = n;
    return DPB_OK;
}

dpb_status ledger_get_round(ledger *l, const char *round_id, ledger_round_res *res)
{
    if (read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        long pos = find_round(l, round_id);
        if (pos >= 0 &&
            settle(l, l->rd[pos].seq > l->rd[pos].state_seq ? l->rd[pos].seq
                                                            : l->rd[pos].state_seq) != 0) {
            pthread_rwlock_unlock(&l->lock);
            withdraw(l);
            continue;
        }
        if (pos >= 0)
            res_of(l, &l->rd[pos], res);
        pthread_rwlock_unlock(&l->lock);
        return pos >= 0 ? DPB_OK : DPB_ENOTFOUND;
    }
}

void ledger_get_summary(ledger *l, ledger_summary *s)
{
    int unavailable = read_begin(l, NULL) != DPB_OK;
    rdlock_durable(l);
    memset(s, 0, sizeof *s);
    s->unavailable = unavailable;
    s->clients = l->ncl;
    s->active = l->by_status[LEDGER_ACTIVE];
    s->exhausted = l->by_status[LEDGER_EXHAUSTED];
    s->uncertified = l->by_status[LEDGER_UNCERTIFIED];
    s->rounds = l->nrd;
    s->version = l->version;
    s->view = view_tag(l);
    s->refined = l->refines;
    s->refine_stale = l->refine_stale;
    s->refine_abandoned = __atomic_load_n(&l->refine_abandoned, __ATOMIC_RELAXED);
    s->refining = atomic_load(&l->refining);
    memcpy(s->spend_hist, l->hist, sizeof s->spend_hist);
    s->read_only = ledger_ro(l);
    s->log_bytes = store_size_bytes(l->st);
    store_sync_stats(l->st, &s->sync_count, &s->sync_seconds, s->sync_hist);
    pthread_rwlock_unlock(&l->lock);
}

/* ---- recovery: replay and snapshots ------------------------------------------------------- */

typedef struct {
    ledger *l;
    uint8_t *dirty; /* not used: clients are recomputed wholesale after replay */
} replay_ctx;

static int apply_record(ledger *l, uint8_t type, const unsigned char *p, size_t n)
{
    br r = {p, n, 0, 0};
    switch (type) {
    case REC_EVENT: {
        uint32_t idx = br_u32(&r);
        unsigned rel = br_u8(&r);
        if (r.bad || rel > 1 || idx != l->nevs)
            return -1;
        uint32_t got;
        int fresh;
        if (intern(l, p + r.at, n - r.at, (dp_relation)rel, &got, &fresh) != DPB_OK || !fresh ||
            got != idx)
            return -1;
        return 0;
    }
    case REC_CLIENT: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        double eps = br_f64(&r), delta = br_f64(&r);
        unsigned mode = br_u8(&r), rel = br_u8(&r);
        char *labels = br_str(&r, LEDGER_LABELS_MAX);
        int bad = r.bad || mode >= LEDGER_NMODES || rel > 1 ||
                  apply_client(l, id, eps, delta, (int)mode, (int)rel, labels, NULL) != DPB_OK;
        free(id);
        free(labels);
        return bad ? -1 : 0;
    }
    case REC_ROUND:
    case REC_RESERVE: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        const unsigned char *h = br_take(&r, 16);
        unsigned policy = br_u8(&r), ran = br_u8(&r);
        uint32_t ev = br_u32(&r), cnt = br_u32(&r);
        uint64_t expires = 0;
        /* a round id is stored once: a second record of it means the snapshot and the log
         * overlap (a wrong snapshot seq) */
        if (r.bad || ev >= l->nevs || cnt > LEDGER_MAX_PARTICIPANTS ||
            (id != NULL && find_round(l, id) >= 0)) {
            free(id);
            return -1;
        }
        lout *out = calloc(cnt ? cnt : 1, sizeof *out);
        if (out == NULL) {
            free(id);
            return -1;
        }
        for (uint32_t i = 0; i < cnt && !r.bad; i++) {
            char *pid = br_str(&r, LEDGER_ID_MAX);
            out[i].admitted = (uint8_t)br_u8(&r);
            out[i].reason = (uint8_t)br_u8(&r);
            out[i].before = br_f64(&r);
            out[i].after = br_f64(&r);
            out[i].acct = -1;
            long pos = pid ? find_client(l, pid) : -1;
            if (pos >= 0) {
                out[i].id = l->cl[pos].id;
                free(pid);
            } else {
                out[i].id = pid;
                out[i].owned = 1;
            }
        }
        if (type == REC_RESERVE) {
            expires = br_u64(&r);
            if (expires == 0)
                r.bad = 1;
        }
        int bad = r.bad || (type == REC_RESERVE && r.at != r.n);
        unsigned char hash[16] = {0};
        uint32_t evs2[2] = {ev, ev};
        if (expires)
            evs2[0] = evs2[1] = LEV_NONE;
        if (!bad) {
            memcpy(hash, h, 16);
            /* charges go to each client's own interned event (same bytes, its relation) */
            for (uint32_t i = 0; i < cnt; i++) {
                long pos = find_client(l, out[i].id);
                if (pos < 0 || !out[i].admitted)
                    continue;
                lclient *c = &l->cl[pos];
                uint32_t evc = ev;
                if (l->evs[ev].rel != c->rel) {
                    int fresh;
                    if (intern(l, l->evs[ev].bytes, l->evs[ev].nbytes, (dp_relation)c->rel, &evc,
                               &fresh) != DPB_OK)
                        bad = 1;
                }
                if (expires) { /* a reservation: held, not charged */
                    evs2[c->rel] = evc;
                    bad |= reserve_change(l, 0, pos, evc, 1, 0, (long)l->nrd) != 0;
                    continue;
                }
                if (add_count(c, evc, 1) != 0 || hist_ready(c) != 0)
                    bad = 1;
                else
                    hist_push(c, (uint32_t)l->nrd, NULL);
                c->rounds++;
                c->last_ev = evc;
                if (isinf(out[i].after) && l->evs[evc].kind == EV_UNCERTIFIABLE)
                    c->uncertified = 1;
                c->version = ++l->version;
                c->dirty = 1;
            }
        }
        if (bad || store_round(l, id, hash, (int)policy, (int)ran, l->last_seq, evs2, out, cnt, 0,
                               expires) != DPB_OK) {
            for (uint32_t i = 0; i < cnt; i++)
                if (out[i].owned)
                    free((char *)out[i].id);
            free(out);
            free(id);
            return -1;
        }
        free(id);
        return 0;
    }
    case REC_NAME: {
        char *name = br_str(&r, LEDGER_ID_MAX);
        dp_event *ev = NULL;
        int bad = r.bad || name == NULL || find_name(l, name) >= 0 ||
                  dp_event_decode(p + r.at, n - r.at, &ev, NULL) != DPB_OK ||
                  apply_name(l, name, p + r.at, n - r.at, l->last_seq) != 0;
        dp_event_free(ev);
        free(name);
        return bad ? -1 : 0;
    }
    case REC_COMMIT:
    case REC_RELEASE: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        long rp = id ? find_round(l, id) : -1;
        free(id);
        if (rp < 0 || l->rd[rp].state != LEDGER_RESERVED || l->rd[rp].out == NULL)
            return -1;
        if (type == REC_RELEASE) {
            unsigned why = br_u8(&r);
            if (r.bad || r.at != r.n || why > 1)
                return -1;
            return resolve_round(l, rp, 0, why ? LEDGER_EXPIRED : LEDGER_RELEASED, NULL, NULL, 0);
        }
        const unsigned char *h = br_take(&r, 16);
        uint32_t m = br_u32(&r);
        if (r.bad || m > l->rd[rp].n || (size_t)m * 4 != r.n - r.at)
            return -1;
        uint32_t *idx = malloc((m ? m : 1) * sizeof *idx);
        if (idx == NULL)
            return -1;
        for (uint32_t i = 0; i < m; i++)
            idx[i] = br_u32(&r);
        int rc = resolve_round(l, rp, 0, LEDGER_COMMITTED, h, idx, m);
        free(idx);
        return rc;
    }
    }
    return -1;
}

static int replay_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    ledger *l = ctx;
    l->last_seq = seq;
    l->records_since_snap++;
    return apply_record(l, type, payload, len);
}

/* A log record the snapshot claims to hold (seq <= the snapshot's seq: a crash came between
 * the snapshot and the log's truncation). It is skipped, but only once the snapshot is seen
 * to hold it: the same event at the same index, the round with the same id and seq, a client
 * whose last such record is what the snapshot holds (checked after the scan, cover_bad).
 * Anything else means the snapshot's seq is wrong (format 1 does not checksum it). */
static int covered_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    ledger *l = ctx;
    const unsigned char *p = payload;
    br r = {p, len, 0, 0};
    switch (type) {
    case REC_EVENT: {
        uint32_t idx = br_u32(&r);
        unsigned rel = br_u8(&r);
        if (r.bad || idx >= l->nevs)
            return -1;
        const lev *e = &l->evs[idx];
        return e->rel == rel && e->nbytes == len - r.at &&
                       memcmp(e->bytes, p + r.at, e->nbytes) == 0
                   ? 0
                   : -1;
    }
    case REC_CLIENT: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        double eps = br_f64(&r), delta = br_f64(&r);
        unsigned mode = br_u8(&r), rel = br_u8(&r);
        char *labels = br_str(&r, LEDGER_LABELS_MAX);
        long pos = !r.bad && id ? find_client(l, id) : -1;
        int rc = -1;
        if (pos >= 0 &&
            (l->cover_bad != NULL || (l->cover_bad = calloc(l->ncl ? l->ncl : 1, 1)) != NULL)) {
            const lclient *c = &l->cl[pos];
            l->cover_bad[pos] =
                !(c->eps == eps && c->delta == delta && c->mode == mode && c->rel == rel &&
                  strcmp(c->labels ? c->labels : "", labels ? labels : "") == 0);
            rc = 0;
        }
        free(id);
        free(labels);
        return rc;
    }
    case REC_ROUND:
    case REC_RESERVE: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        long pos = id ? find_round(l, id) : -1;
        free(id);
        return pos >= 0 && l->rd[pos].seq == seq ? 0 : -1;
    }
    case REC_COMMIT:
    case REC_RELEASE: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        long pos = id ? find_round(l, id) : -1;
        free(id);
        return pos >= 0 && l->rd[pos].state_seq == seq ? 0 : -1;
    }
    case REC_NAME: {
        char *name = br_str(&r, LEDGER_ID_MAX);
        long pos = name ? find_name(l, name) : -1;
        free(name);
        return pos >= 0 && l->nm[pos].seq == seq && l->nm[pos].nbytes == len - r.at &&
                       memcmp(l->nm[pos].bytes, p + r.at, len - r.at) == 0
                   ? 0
                   : -1;
    }
    }
    return -1;
}

/* The whole state as one payload. Caller holds at least the read lock. */
static dpb_status serialize(ledger *l, bw *w)
{
    bw_u32(w, LEDGER_FORMAT);
    bw_u64(w, l->version);
    bw_u64(w, l->nevs);
    for (size_t i = 0; i < l->nevs; i++) {
        bw_u8(w, (unsigned)l->evs[i].rel);
        bw_u32(w, (uint32_t)l->evs[i].nbytes);
        bw_put(w, l->evs[i].bytes, l->evs[i].nbytes);
    }
    bw_u64(w, l->ncl);
    for (size_t i = 0; i < l->ncl; i++) {
        const lclient *c = &l->cl[i];
        client_record(w, c->id, c->eps, c->delta, c->mode, c->rel, c->labels);
        bw_u8(w, c->uncertified);
        bw_u64(w, c->rounds);
        bw_u64(w, c->version);
        bw_f64(w, c->spent);
        bw_f64(w, c->dtv);
        bw_u32(w, c->nev);
        for (uint32_t k = 0; k < c->nev; k++) {
            bw_u32(w, c->ev[k].ev);
            bw_u64(w, c->ev[k].count);
        }
        bw_u32(w, c->last_ev); /* format 2 */
        bw_u8(w, c->stuck);
        bw_u32(w, c->nrv); /* format 3 */
        for (uint32_t k = 0; k < c->nrv; k++) {
            bw_u32(w, c->rv[k].ev);
            bw_u64(w, c->rv[k].count);
        }
        bw_u32(w, c->hseen); /* format 3: the history ring */
        for (uint32_t k = 0; c->hseen && k < LEDGER_HISTORY; k++)
            bw_u32(w, c->hist ? c->hist[k] : 0);
    }
    bw_u64(w, l->nrd);
    for (size_t i = 0; i < l->nrd; i++) {
        const lrnd *r = &l->rd[i];
        bw_str(w, r->id);
        bw_put(w, r->hash, 16);
        bw_u8(w, r->policy);
        bw_u8(w, r->already_ran);
        bw_u64(w, r->seq);
        bw_u32(w, r->n);
        bw_u32(w, r->admitted);
        bw_u8(w, r->phase); /* format 3 */
        bw_u8(w, r->state);
        bw_u64(w, r->state_seq);
        bw_u64(w, r->expires_at);
        bw_put(w, r->chash, 16);
        bw_u32(w, r->ev[0]);
        bw_u32(w, r->ev[1]);
        bw_u32(w, r->reported);
        bw_u8(w, r->out != NULL);
        if (r->out)
            for (uint32_t k = 0; k < r->n; k++) {
                bw_str(w, r->out[k].id);
                bw_u8(w, r->out[k].admitted);
                bw_u8(w, r->out[k].reason);
                bw_f64(w, r->out[k].before);
                bw_f64(w, r->out[k].after);
                bw_u8(w, r->out[k].reported); /* format 3 */
            }
    }
    bw_u64(w, l->nnm); /* format 3: the named events */
    for (size_t i = 0; i < l->nnm; i++) {
        bw_str(w, l->nm[i].name);
        bw_u64(w, l->nm[i].seq);
        bw_u32(w, (uint32_t)l->nm[i].nbytes);
        bw_put(w, l->nm[i].bytes, l->nm[i].nbytes);
    }
    return w->oom ? DPB_ENOMEM : DPB_OK;
}

/* Load a snapshot's payload; on failure r->at is where it went wrong. */
static int load_snapshot(ledger *l, br *r)
{
    uint32_t format = br_u32(r);
    if (format < 1 || format > LEDGER_FORMAT)
        return -1;
    l->version = br_u64(r);
    uint64_t ne = br_u64(r);
    for (uint64_t i = 0; i < ne && !r->bad; i++) {
        unsigned rel = br_u8(r);
        uint32_t len = br_u32(r);
        const unsigned char *b = br_take(r, len);
        uint32_t idx;
        int fresh;
        if (r->bad || rel > 1 || intern(l, b, len, (dp_relation)rel, &idx, &fresh) != DPB_OK ||
            idx != i)
            return -1;
    }
    uint64_t nc = br_u64(r);
    for (uint64_t i = 0; i < nc && !r->bad; i++) {
        char *id = br_str(r, LEDGER_ID_MAX);
        double eps = br_f64(r), delta = br_f64(r);
        unsigned mode = br_u8(r), rel = br_u8(r);
        char *labels = br_str(r, LEDGER_LABELS_MAX);
        if (r->bad || mode >= LEDGER_NMODES || rel > 1) {
            free(id);
            free(labels);
            return -1;
        }
        if (grow((void **)&l->cl, &l->cap_cl, l->ncl + 1, sizeof *l->cl) != 0) {
            free(id);
            free(labels);
            return -1;
        }
        lclient *c = &l->cl[l->ncl];
        memset(c, 0, sizeof *c);
        c->id = id;
        c->labels = labels && labels[0] ? labels : NULL;
        if (c->labels == NULL)
            free(labels);
        c->eps = eps;
        c->delta = delta;
        c->mode = (uint8_t)mode;
        c->rel = (uint8_t)rel;
        c->uncertified = (uint8_t)br_u8(r);
        c->rounds = br_u64(r);
        c->version = br_u64(r);
        c->spent = br_f64(r);
        c->dtv = br_f64(r);
        c->nev = br_u32(r);
        if (r->bad || c->nev > ne) {
            free(c->id);
            free(c->labels);
            return -1;
        }
        c->ev = c->nev ? malloc(c->nev * sizeof *c->ev) : NULL;
        for (uint32_t k = 0; c->ev && k < c->nev; k++) {
            c->ev[k].ev = br_u32(r);
            c->ev[k].count = br_u64(r);
            if (c->ev[k].ev >= ne)
                r->bad = 1;
        }
        /* format 1 did not keep the last charged event: the status then follows the spend
         * alone until the client's next charge */
        c->last_ev = format >= 2 ? br_u32(r) : LEV_NONE;
        c->stuck = format >= 2 ? (uint8_t)br_u8(r) : 0;
        if ((c->last_ev != LEV_NONE && c->last_ev >= ne) || c->stuck > 1)
            r->bad = 1;
        c->nrv = format >= 3 ? br_u32(r) : 0;
        if (c->nrv > ne)
            r->bad = 1;
        c->rv = !r->bad && c->nrv ? malloc(c->nrv * sizeof *c->rv) : NULL;
        if (c->nrv && c->rv == NULL)
            r->bad = 1;
        for (uint32_t k = 0; c->rv && k < c->nrv; k++) {
            c->rv[k].ev = br_u32(r);
            c->rv[k].count = br_u64(r);
            if (c->rv[k].ev >= ne || c->rv[k].count == 0)
                r->bad = 1;
        }
        c->hseen = format >= 3 ? br_u32(r) : 0;
        if (c->hseen && !r->bad && hist_ready(c) != 0)
            r->bad = 1;
        for (uint32_t k = 0; c->hseen && c->hist && k < LEDGER_HISTORY; k++)
            c->hist[k] = br_u32(r); /* checked against the rounds below */
        /* a spend is >= 0 (+inf when uncertified); anything else is damage */
        if (!(c->spent >= 0.0) || !(c->dtv >= 0.0 && c->dtv <= 1.0))
            r->bad = 1;
        if ((c->nev && c->ev == NULL) || r->bad ||
            index_insert(l, &l->cl_index, l->ncl, cl_hash, (uint32_t)l->ncl) != 0) {
            /* not yet counted in l->ncl: release what this entry holds */
            free(c->id);
            free(c->labels);
            free(c->ev);
            free(c->rv);
            free(c->hist);
            c->id = c->labels = NULL;
            c->ev = c->rv = NULL;
            c->hist = NULL;
            return -1;
        }
        l->ncl++;
        counters(l, c, +1);
    }
    uint64_t nr = br_u64(r);
    for (uint64_t i = 0; i < nr && !r->bad; i++) {
        char *id = br_str(r, LEDGER_ID_MAX);
        const unsigned char *h = br_take(r, 16);
        unsigned policy = br_u8(r), ran = br_u8(r);
        uint64_t seq = br_u64(r);
        uint32_t cnt = br_u32(r), adm = br_u32(r);
        struct {
            unsigned phase, state;
            uint64_t state_seq, expires_at;
            unsigned char chash[16];
            uint32_t ev[2], reported;
        } x = {0, LEDGER_CHARGED, 0, 0, {0}, {LEV_NONE, LEV_NONE}, 0};
        if (format >= 3) {
            x.phase = br_u8(r);
            x.state = br_u8(r);
            x.state_seq = br_u64(r);
            x.expires_at = br_u64(r);
            const unsigned char *ch = br_take(r, 16);
            if (ch)
                memcpy(x.chash, ch, 16);
            x.ev[0] = br_u32(r);
            x.ev[1] = br_u32(r);
            x.reported = br_u32(r);
        }
        unsigned has = br_u8(r);
        /* a reserved round keeps its answers (its commit needs them) */
        if (r->bad || cnt > LEDGER_MAX_PARTICIPANTS || x.phase > 1 || x.state > LEDGER_EXPIRED ||
            (x.phase == 0) != (x.state == LEDGER_CHARGED) || (x.phase && x.expires_at == 0) ||
            (x.ev[0] != LEV_NONE && x.ev[0] >= ne) || (x.ev[1] != LEV_NONE && x.ev[1] >= ne) ||
            (x.state == LEDGER_RESERVED && !has)) {
            free(id);
            return -1;
        }
        lout *out = NULL;
        if (has) {
            out = calloc(cnt ? cnt : 1, sizeof *out);
            if (out == NULL) {
                free(id);
                return -1;
            }
            for (uint32_t k = 0; k < cnt && !r->bad; k++) {
                char *pid = br_str(r, LEDGER_ID_MAX);
                out[k].admitted = (uint8_t)br_u8(r);
                out[k].reason = (uint8_t)br_u8(r);
                out[k].before = br_f64(r);
                out[k].after = br_f64(r);
                out[k].acct = -1;
                out[k].reported = format >= 3 ? (uint8_t)br_u8(r) : 0;
                long pos = pid ? find_client(l, pid) : -1;
                if (pos >= 0) {
                    out[k].id = l->cl[pos].id;
                    free(pid);
                } else {
                    out[k].id = pid;
                    out[k].owned = 1;
                }
            }
        }
        unsigned char hash[16] = {0};
        if (h)
            memcpy(hash, h, 16);
        if (r->bad || store_round(l, id, hash, (int)policy, (int)ran, seq, 0, out, has ? cnt : 0, 0,
                                  x.phase ? x.expires_at : 0) != DPB_OK) {
            /* the outcomes were not taken over by a stored round: release them */
            for (uint32_t k = 0; out && k < cnt; k++)
                if (out[k].owned)
                    free((char *)out[k].id);
            free(out);
            free(id);
            return -1;
        }
        lrnd *rr = &l->rd[l->nrd - 1];
        rr->n = cnt;
        rr->admitted = adm;
        if (format >= 3) {
            rr->phase = (uint8_t)x.phase;
            rr->state = (uint8_t)x.state;
            rr->state_seq = x.state_seq;
            memcpy(rr->chash, x.chash, 16);
            rr->ev[0] = x.ev[0];
            rr->ev[1] = x.ev[1];
            rr->reported = x.reported;
        }
        free(id);
    }
    for (size_t i = 0; i < l->ncl && !r->bad; i++) /* history entries name stored rounds */
        for (uint32_t k = 0; k < l->cl[i].hseen && k < LEDGER_HISTORY; k++)
            if (l->cl[i].hist[k] >= l->nrd)
                r->bad = 1;
    uint64_t nn = format >= 3 ? br_u64(r) : 0;
    for (uint64_t i = 0; i < nn && !r->bad; i++) {
        char *name = br_str(r, LEDGER_ID_MAX);
        uint64_t seq = br_u64(r);
        uint32_t len = br_u32(r);
        const unsigned char *b = br_take(r, len);
        dp_event *ev = NULL;
        if (r->bad || name == NULL || find_name(l, name) >= 0 ||
            dp_event_decode(b, len, &ev, NULL) != DPB_OK || apply_name(l, name, b, len, seq) != 0)
            r->bad = 1;
        dp_event_free(ev);
        free(name);
    }
    return r->bad || r->at != r->n ? -1 : 0;
}

static dpb_status take_snapshot(ledger *l)
{
    bw w = {0};
    pthread_rwlock_rdlock(&l->lock);
    /* a snapshot holds only durable changes (and none after a failure): else a change
     * refused as not durable could come back from it */
    if (ledger_ro(l) || settle(l, l->last_seq) != 0) {
        pthread_rwlock_unlock(&l->lock);
        return DPB_EREADONLY;
    }
    uint64_t seq = l->last_seq;
    dpb_status st = serialize(l, &w);
    l->records_since_snap = 0;
    pthread_rwlock_unlock(&l->lock);
    if (st == DPB_OK) {
        dpb_error err = {0};
        st = store_snapshot(l->st, seq, w.b, w.n, &err);
        if (st == DPB_OK)
            l->snap_seq = seq;
    }
    free(w.b);
    return st;
}

static void *snapshot_main(void *arg)
{
    ledger *l = arg;
    pthread_mutex_lock(&l->snap_mu);
    for (;;) {
        /* wake at least every second: the expiry sweep of reservations */
        while (!l->snap_wanted && !l->snap_stop) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            if (pthread_cond_timedwait(&l->snap_cv, &l->snap_mu, &until) != 0) {
                pthread_mutex_unlock(&l->snap_mu);
                ledger_expire(l, (uint64_t)time(NULL));
                pthread_mutex_lock(&l->snap_mu);
            }
        }
        if (l->snap_stop)
            break;
        l->snap_wanted = 0;
        l->snap_running = 1;
        pthread_mutex_unlock(&l->snap_mu);
        take_snapshot(l); /* a failed snapshot leaves the log as it is: nothing is lost */
        pthread_mutex_lock(&l->snap_mu);
        l->snap_running = 0;
    }
    pthread_mutex_unlock(&l->snap_mu);
    return NULL;
}

dpb_status ledger_open(const ledger_options *o, ledger **out, dpb_error *err)
{
    ledger_store *s = NULL;
    dpb_status st;
    if (o->ledger_url == NULL) {
        st = store_file_open(o->dir, o->fs, &s, err);
    } else {
        store_pg_options po = {0};
        po.pool = o->pg_pool;
        st = store_pg_open(o->ledger_url, &po, &s, err);
    }
    if (st != DPB_OK)
        return st;
    return ledger_open_store(o, s, out, err);
}

dpb_status ledger_open_store(const ledger_options *o, ledger_store *s, ledger **out, dpb_error *err)
{
    ledger *l = calloc(1, sizeof *l);
    if (l == NULL) {
        store_close(s);
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    }
    l->opt = *o;
    l->st = s;
    l->shared = store_shared(s);
    const char *where = o->dir && strcmp(s->ops->kind, "file") == 0 ? o->dir : s->ops->kind;
    l->dir = xstrdup(where);
    pthread_rwlock_init(&l->lock, NULL);
    pthread_mutex_init(&l->snap_mu, NULL);
    pthread_cond_init(&l->snap_cv, NULL);
    l->sp = spend_engine_new(0);
    struct timespec bt;
    clock_gettime(CLOCK_REALTIME, &bt);
    l->boot =
        ((uint64_t)bt.tv_sec * 1000000000u + (uint64_t)bt.tv_nsec) ^ ((uint64_t)getpid() << 40);
    dpb_status st = DPB_ENOMEM;
    if (l->dir == NULL || l->sp == NULL || index_init(&l->cl_index, 1024) != 0 ||
        index_init(&l->nm_index, 64) != 0 || index_init(&l->rd_index, 1024) != 0 ||
        index_init(&l->ev_index, 64) != 0) {
        dpb_fail(err, st, NULL, "out of memory");
        goto fail;
    }
    void *snap = NULL;
    size_t snap_len = 0;
    uint64_t snap_seq = 0;
    st = store_load_snapshot(s, &snap_seq, &snap, &snap_len, err);
    if (st != DPB_OK)
        goto fail;
    br sr = {snap, snap_len, 0, 0};
    if (snap && load_snapshot(l, &sr) != 0) {
        free(snap);
        st = dpb_fail(err, DPB_ECORRUPT, "data_dir",
                      "%s/snapshot is damaged near byte offset %zu (its checksum holds but its "
                      "contents do not parse): refusing to start rather than guess",
                      l->dir, sr.at + (l->shared ? 0 : SNAPSHOT_HEADER_BYTES));
        goto fail;
    }
    free(snap);
    l->snap_seq = l->last_seq = snap_seq;
    uint64_t next;
    size_t ncl_snap = l->ncl;
    st = store_replay(s, snap_seq, replay_fn, covered_fn, l, &next, err);
    for (size_t i = 0; st == DPB_OK && l->cover_bad && i < ncl_snap; i++)
        if (l->cover_bad[i])
            st = dpb_fail(err, DPB_ECORRUPT, "data_dir",
                          "%s/wal.log holds a change of client '%s' up to seq %llu (byte offsets "
                          "before the snapshot's seq) that %s/snapshot does not hold: the "
                          "snapshot and the log disagree; refusing to start",
                          l->dir, l->cl[i].id, (unsigned long long)snap_seq, l->dir);
    free(l->cover_bad);
    l->cover_bad = NULL;
    if (st != DPB_OK)
        goto fail;
    if (next > 0)
        l->last_seq = next - 1;
    /* recompute the spend of every client the log replay touched (the snapshot's spends are
     * those computed before it was written), then the counters */
    for (size_t i = 0; i < l->ncl; i++)
        if (!l->cl[i].dirty)
            name_spend(l, &l->cl[i]);
    after_apply(l);
    if (pthread_create(&l->snap_thread, NULL, snapshot_main, l) == 0)
        l->has_thread = 1;
    if (o->pld_refine) /* after recovery: it reads the state */
        l->rf = refiner_start(refine_step, l, 0.05);
    *out = l;
    return DPB_OK;
fail:
    ledger_close_nosnapshot(l); /* never a snapshot of a state recovered halfway */
    return st;
}

/* ---- moving between stores ------------------------------------------------------------------ */

dpb_status ledger_copy_to(ledger *l, const char *to, dpb_error *err)
{
    ledger_store *s = NULL;
    dpb_status st;
    if (store_is_pg_url(to)) {
        store_pg_options po = {0};
        po.pool = 1;
        st = store_pg_open(to, &po, &s, err);
    } else {
        st = store_file_open(to, NULL, &s, err);
    }
    if (st != DPB_OK)
        return st;
    if (!store_empty(s)) {
        store_close(s);
        return dpb_fail(err, DPB_ECONFLICT, "to",
                        "%s already holds a ledger (a snapshot or log records): a copy goes into "
                        "an empty store only, nothing was written",
                        store_is_pg_url(to) ? "the database" : to);
    }
    if ((st = read_begin(l, err)) != DPB_OK) {
        store_close(s);
        return st;
    }
    bw w = {0};
    rdlock_durable(l);
    uint64_t seq = l->last_seq;
    st = serialize(l, &w);
    pthread_rwlock_unlock(&l->lock);
    if (st != DPB_OK || w.oom)
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    else
        st = store_snapshot(s, seq, w.b, w.n, err); /* the next append there gets seq + 1 */
    free(w.b);
    store_close(s);
    return st;
}

/* Compare field by field; say the first difference. */
#define DIFF(cond, ...)                                                                            \
    do {                                                                                           \
        if (cond) {                                                                                \
            snprintf(why, cap, __VA_ARGS__);                                                       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int spends_differ(double x, double y)
{
    if (x == y || (isnan(x) && isnan(y)))
        return 0;
    return !(fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y)));
}

/* Every client, round and named event of a is in b and the same; and as many of each. */
static int compare_locked(const ledger *a, const ledger *b, char *why, size_t cap)
{
    DIFF(a->ncl != b->ncl, "%zu clients against %zu", a->ncl, b->ncl);
    DIFF(a->nrd != b->nrd, "%zu rounds against %zu", a->nrd, b->nrd);
    DIFF(a->nnm != b->nnm, "%zu named events against %zu", a->nnm, b->nnm);
    for (size_t i = 0; i < a->ncl; i++) {
        const lclient *x = &a->cl[i];
        long p = find_client(b, x->id);
        DIFF(p < 0, "client '%s' is missing from the second", x->id);
        const lclient *y = &b->cl[p];
        DIFF(x->eps != y->eps || x->delta != y->delta, "client '%s': budget differs", x->id);
        DIFF(x->mode != y->mode || x->rel != y->rel, "client '%s': accounting differs", x->id);
        DIFF(strcmp(x->labels ? x->labels : "", y->labels ? y->labels : "") != 0,
             "client '%s': labels differ", x->id);
        DIFF(x->rounds != y->rounds, "client '%s': %llu rounds against %llu", x->id,
             (unsigned long long)x->rounds, (unsigned long long)y->rounds);
        DIFF(spends_differ(x->spent, y->spent) || spends_differ(x->dtv, y->dtv),
             "client '%s': spent %.17g against %.17g", x->id, x->spent, y->spent);
        DIFF(status_of(x) != status_of(y), "client '%s': status differs", x->id);
        DIFF(x->nrv != y->nrv, "client '%s': reservations differ", x->id);
    }
    for (size_t i = 0; i < a->nrd; i++) {
        const lrnd *x = &a->rd[i];
        long p = find_round(b, x->id);
        DIFF(p < 0, "round '%s' is missing from the second", x->id);
        const lrnd *y = &b->rd[p];
        DIFF(memcmp(x->hash, y->hash, 16) != 0, "round '%s': request hash differs", x->id);
        DIFF(x->policy != y->policy || x->already_ran != y->already_ran || x->phase != y->phase,
             "round '%s': kind differs", x->id);
        DIFF(x->state != y->state, "round '%s': state %s against %s", x->id,
             ledger_round_state_name((ledger_round_state)x->state),
             ledger_round_state_name((ledger_round_state)y->state));
        DIFF(x->n != y->n || x->admitted != y->admitted || x->reported != y->reported,
             "round '%s': participants, admissions or reports differ", x->id);
        DIFF(x->expires_at != y->expires_at, "round '%s': expiry differs", x->id);
        for (uint32_t k = 0; x->out && y->out && k < x->n; k++)
            DIFF(strcmp(x->out[k].id, y->out[k].id) != 0 ||
                     x->out[k].admitted != y->out[k].admitted ||
                     x->out[k].reason != y->out[k].reason ||
                     x->out[k].reported != y->out[k].reported,
                 "round '%s': the answer for '%s' differs", x->id, x->out[k].id);
    }
    for (size_t i = 0; i < a->nnm; i++) {
        const lname *x = &a->nm[i];
        long p = find_name(b, x->name);
        DIFF(p < 0, "named event '%s' is missing from the second", x->name);
        const lname *y = &b->nm[p];
        DIFF(x->nbytes != y->nbytes || memcmp(x->bytes, y->bytes, x->nbytes) != 0,
             "named event '%s' differs", x->name);
    }
    return 0;
}

int ledger_compare(ledger *a, ledger *b, char *why, size_t cap)
{
    if (cap > 0)
        why[0] = '\0';
    if (read_begin(a, NULL) != DPB_OK || read_begin(b, NULL) != DPB_OK) {
        snprintf(why, cap, "a ledger's database cannot be reached");
        return 1;
    }
    if (a == b)
        return 0;
    /* one lock order (by address) whoever compares */
    ledger *first = (uintptr_t)a < (uintptr_t)b ? a : b, *second = first == a ? b : a;
    rdlock_durable(first);
    rdlock_durable(second);
    int rc = compare_locked(a, b, why, cap);
    pthread_rwlock_unlock(&second->lock);
    pthread_rwlock_unlock(&first->lock);
    return rc;
}

static void close_ledger(ledger *l, int snapshot);

void ledger_close(ledger *l)
{
    close_ledger(l, 1);
}

void ledger_close_nosnapshot(ledger *l)
{
    close_ledger(l, 0);
}

static void close_ledger(ledger *l, int snapshot)
{
    if (l == NULL)
        return;
    refine_yield(l);     /* stops a computation under way */
    refiner_stop(l->rf); /* first: it reads the state and refers to events */
    l->rf = NULL;
    if (l->has_thread) {
        pthread_mutex_lock(&l->snap_mu);
        l->snap_stop = 1;
        pthread_cond_signal(&l->snap_cv);
        pthread_mutex_unlock(&l->snap_mu);
        pthread_join(l->snap_thread, NULL);
    }
    if (snapshot && l->st && !ledger_ro(l) && l->records_since_snap > 0)
        take_snapshot(l);
    store_close(l->st);
    for (size_t i = 0; i < l->nevs; i++) {
        dp_event_free(l->evs[i].ev);
        free(l->evs[i].bytes);
        free(l->evs[i].rdp);
    }
    free(l->evs);
    for (size_t i = 0; i < l->nrd; i++) {
        lrnd *r = &l->rd[i];
        if (r->out)
            for (uint32_t k = 0; k < r->n; k++)
                if (r->out[k].owned)
                    free((char *)r->out[k].id);
        free(r->out);
        free(r->id);
    }
    free(l->rd);
    for (size_t i = 0; i < l->ncl; i++) {
        free(l->cl[i].id);
        free(l->cl[i].labels);
        free(l->cl[i].ev);
        free(l->cl[i].rv);
        free(l->cl[i].hist);
    }
    free(l->cl);
    for (size_t i = 0; i < l->nundo; i++) {
        free(l->undo[i].labels);
        free(l->undo[i].sev);
        free(l->undo[i].srv);
    }
    free(l->undo);
    for (size_t i = 0; i < l->nnm; i++) {
        free(l->nm[i].name);
        free(l->nm[i].bytes);
    }
    free(l->nm);
    free(l->nm_index.slot);
    free(l->cl_index.slot);
    free(l->rd_index.slot);
    free(l->ev_index.slot);
    pthread_rwlock_destroy(&l->lock);
    pthread_mutex_destroy(&l->snap_mu);
    pthread_cond_destroy(&l->snap_cv);
    spend_engine_free(l->sp); /* after the events that referred to it */
    free(l->dir);
    free(l);
}
