/*
 * ledger_state.c - the ledger's state machine: budgets, rounds and their durability (the
 * state and its invariants; how records are applied, withdrawn, replayed and snapshotted).
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
#include "ledger_int.h"

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

char *lg_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Grow an array (never p = realloc(p)). */
int lg_grow(void **p, size_t *cap, size_t need, size_t elem)
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

int lg_index_init(lindex *x, size_t cap)
{
    x->slot = malloc(cap * sizeof *x->slot);
    if (x->slot == NULL)
        return -1;
    memset(x->slot, 0xff, cap * sizeof *x->slot);
    x->cap = cap;
    return 0;
}

uint64_t lg_str_hash(const char *s)
{
    return fnv64(s, strlen(s), 14695981039346656037ULL);
}

/* Find: returns the slot position for key (hash h) using eq(pos) to compare. */
size_t lg_index_find(const ledger *l, const lindex *x, uint64_t h, lindex_eq eq, const void *key)
{
    size_t m = x->cap - 1, i = (size_t)h & m;
    while (x->slot[i] != UINT32_MAX && !eq(l, x->slot[i], key))
        i = (i + 1) & m;
    return i;
}

int lg_index_insert(ledger *l, lindex *x, size_t count,
                    uint64_t (*hash_of)(const ledger *, uint32_t), uint32_t pos)
{
    if ((count + 1) * 2 > x->cap) {
        lindex nx;
        if (lg_index_init(&nx, x->cap * 2) != 0)
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
uint64_t lg_cl_hash(const ledger *l, uint32_t pos)
{
    return lg_str_hash(l->cl[pos].id);
}
static int rd_eq(const ledger *l, uint32_t pos, const void *key)
{
    return strcmp(l->rd[pos].id, key) == 0;
}
uint64_t lg_rd_hash(const ledger *l, uint32_t pos)
{
    return lg_str_hash(l->rd[pos].id);
}

int lg_ev_eq(const ledger *l, uint32_t pos, const void *key)
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
uint64_t lg_nm_hash(const ledger *l, uint32_t pos)
{
    return lg_str_hash(l->nm[pos].name);
}

long lg_find_name(const ledger *l, const char *name)
{
    size_t i = lg_index_find(l, &l->nm_index, lg_str_hash(name), nm_eq, name);
    return l->nm_index.slot[i] == UINT32_MAX ? -1 : (long)l->nm_index.slot[i];
}

long lg_find_client(const ledger *l, const char *id)
{
    size_t i = lg_index_find(l, &l->cl_index, lg_str_hash(id), cl_eq, id);
    return l->cl_index.slot[i] == UINT32_MAX ? -1 : (long)l->cl_index.slot[i];
}

long lg_find_round(const ledger *l, const char *id)
{
    size_t i = lg_index_find(l, &l->rd_index, lg_str_hash(id), rd_eq, id);
    return l->rd_index.slot[i] == UINT32_MAX ? -1 : (long)l->rd_index.slot[i];
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
dpb_status lg_intern(ledger *l, const unsigned char *bytes, size_t n, dp_relation rel,
                     uint32_t *idx, int *fresh)
{
    evkey k = {bytes, n, rel};
    uint64_t h = fnv64(bytes, n, 14695981039346656037ULL ^ (uint64_t)rel);
    size_t s = lg_index_find(l, &l->ev_index, h, lg_ev_eq, &k);
    *fresh = 0;
    if (l->ev_index.slot[s] != UINT32_MAX) {
        *idx = l->ev_index.slot[s];
        return DPB_OK;
    }
    if (lg_grow((void **)&l->evs, &l->cap_evs, l->nevs + 1, sizeof *l->evs) != 0)
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
        lg_index_insert(l, &l->ev_index, l->nevs, ev_hash, (uint32_t)l->nevs) != 0) {
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
 * accountant it is, through the client's memo (only read; update: the memo to bring to c's
 * terms, by lg_recompute under the write lock). */
static void spend_full(ledger *l, const lclient *c, spend_memo **update, uint32_t xev,
                       uint64_t extra, spend_result *out)
{
    if (c->uncertified) {
        memset(out, 0, sizeof *out);
        out->uncertified = 1;
        out->accountant = -1;
        out->spent = HUGE_VAL;
        return;
    }
    size_t n = c->nev;
    spend_term stack[16], *t = n <= 16 ? stack : malloc(n * sizeof *t);
    if (t == NULL) {
        memset(out, 0, sizeof *out);
        out->accountant = -1;
        out->spent = HUGE_VAL;
        return;
    }
    for (size_t i = 0; i < n; i++)
        t[i] = (spend_term){l->evs[c->ev[i].ev].se, c->ev[i].count};
    spend_eval_more(l->sp, c->memo, update, c->mode, c->eps, c->delta, (dp_relation)c->rel, t, n,
                    extra ? l->evs[xev].se : NULL, extra, out);
    if (t != stack)
        free(t);
}

/* The honest status (ledger.h): exhausted when the spend reached the budget, or when the
 * event of the client's last charged round would not be admitted again now. */
/* The spend that admission sees: the charged events and the held reservations, with `extra`
 * more of xev. Reservations enter as pending counts in the same multiset (spend_of). */
void lg_spend_held(ledger *l, const lclient *c, uint32_t xev, uint64_t extra, spend_result *out)
{
    if (c->nrv == 0) {
        spend_full(l, c, NULL, xev, extra, out);
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
    t.nev = m; /* the memo (of c->ev) is only read: it covers ms when the held events are new */
    spend_full(l, &t, NULL, xev, extra, out);
    if (ms != stack)
        free(ms);
}

ledger_status lg_status_of(const lclient *c)
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
void lg_counters(ledger *l, const lclient *c, int sign)
{
    l->by_status[lg_status_of(c)] += (uint64_t)sign;
    l->hist[bucket_of(c)] += (uint64_t)sign;
}

void lg_memo_drop(ledger *l, lclient *c)
{
    l->memo_bytes -= spend_memo_bytes(c->memo);
    l->memo_n -= c->memo != NULL;
    spend_memo_free(c->memo);
    c->memo = NULL;
}

/* The client's memo brought to its terms, and the memos' bytes kept under the cap: past it
 * the other clients' memos are freed in turn, from a cursor that goes round the clients
 * (made again at their next change). */
static void memo_update(ledger *l, lclient *c, spend_result *r)
{
    size_t before = spend_memo_bytes(c->memo);
    spend_full(l, c, &c->memo, 0, 0, r);
    size_t after = spend_memo_bytes(c->memo);
    l->memo_bytes = l->memo_bytes - before + after;
    l->memo_n = l->memo_n - (before > 0) + (after > 0);
    size_t cap = l->opt.memo_bytes ? l->opt.memo_bytes : LEDGER_MEMO_BYTES;
    for (size_t seen = 0; l->memo_bytes > cap && seen < l->ncl; seen++) {
        lclient *o = &l->cl[l->memo_next++ % l->ncl];
        if (o != c)
            lg_memo_drop(l, o);
    }
}

void ledger_memo_stats(ledger *l, size_t *clients, size_t *bytes)
{
    pthread_rwlock_rdlock(&l->lock);
    *clients = l->memo_n;
    *bytes = l->memo_bytes;
    pthread_rwlock_unlock(&l->lock);
}

void lg_recompute(ledger *l, lclient *c)
{
    spend_result r;
    memo_update(l, c, &r);
    c->spent = r.spent;
    c->dtv = r.dtv;
    c->sacct = (int8_t)r.accountant;
    if (r.uncertified)
        c->uncertified = 1;
    c->stuck = 0;
    if (c->last_ev != LEV_NONE && !c->uncertified && c->spent < c->eps) {
        spend_result more;
        lg_spend_held(l, c, c->last_ev, 1, &more);
        c->stuck = !(more.spent <= c->eps);
    }
}

/* The accountant of a spend recovered from a snapshot (which stores the value only). */
void lg_name_spend(ledger *l, lclient *c)
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

int lg_add_count(lclient *c, uint32_t ev, uint64_t k)
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
int lg_hist_ready(lclient *c)
{
    if (c->hist == NULL)
        c->hist = calloc(LEDGER_HISTORY, sizeof *c->hist);
    return c->hist ? 0 : -1;
}

/* Push round position rpos (hist_ready done); *old: the entry it overwrote. */
void lg_hist_push(lclient *c, uint32_t rpos, uint32_t *old)
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
 * idempotent replay, dry runs and snapshots first lg_settle() the seq of what they would show
 * (wait for, or run, the group commit), and every change whose record may not be durable yet
 * has an entry in l->undo saying how to take it back. When a write or a sync fails, the log
 * is cut back to its durable seq (wal.c) and lg_withdraw_locked() undoes, newest first, every
 * change after it, for all the requests that shared the failed sync: memory then holds
 * exactly what the log holds, and the ledger is read-only until restart. */

int lg_ledger_ro(ledger *l)
{
    return atomic_load(&l->read_only) || (l->st != NULL && store_failed(l->st));
}

/* Room for k more undo entries, taken before anything is logged (pushing cannot fail). */
int lg_reserve_undo(ledger *l, size_t k)
{
    return lg_grow((void **)&l->undo, &l->cap_undo, l->nundo + k, sizeof *l->undo);
}

/* An undo entry of a change (seq, kind) to the client at pos, holding what every change of a
 * client may alter (kind-specific fields are the caller's). */
lundo lg_client_undo(const ledger *l, uint64_t seq, uint8_t kind, long pos)
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

void lg_push_undo(ledger *l, const lundo *u)
{
    l->undo[l->nundo++] = *u; /* reserved */
}

/* Forget the entries whose records are durable now (they can no longer be withdrawn). */
void lg_prune_undo(ledger *l)
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
void lg_drop_unlogged_events(ledger *l)
{
    while (l->nevs > l->nevs_logged)
        drop_last_event(l);
}

void lg_recount(ledger *l)
{
    memset(l->by_status, 0, sizeof l->by_status);
    memset(l->hist, 0, sizeof l->hist);
    for (size_t i = 0; i < l->ncl; i++)
        lg_counters(l, &l->cl[i], +1);
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
        index_delete(&l->cl_index, lg_str_hash(c->id), u->pos, lg_cl_hash, l);
        free(c->id);
        free(c->labels);
        free(c->ev);
        lg_memo_drop(l, c);
        free(c->rv);
        free(c->hist);
        l->ncl--;
        if (u->pos < l->nby_id)
            l->nby_id = 0; /* the id order is rebuilt by the next list */
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
        index_delete(&l->nm_index, lg_str_hash(nm->name), u->pos, lg_nm_hash, l);
        free(nm->name);
        free(nm->bytes);
        l->nnm--;
        break;
    }
    case U_ROUND: {
        lrnd *r = &l->rd[u->pos];
        index_delete(&l->rd_index, lg_str_hash(r->id), u->pos, lg_rd_hash, l);
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
void lg_withdraw_locked(ledger *l)
{
    int failed = store_failed(l->st);
    uint64_t g = atomic_load(&l->void_gen);
    if (!failed && g == l->done_gen)
        return;
    uint64_t d = store_durable_seq(l->st);
    lg_drop_unlogged_events(l);
    while (l->nundo > 0 && l->undo[l->nundo - 1].seq > d)
        undo_one(l, &l->undo[--l->nundo]);
    if (l->last_seq > d)
        l->last_seq = d;
    l->done_gen = g;
    if (failed)
        atomic_store(&l->read_only, 1);
    lg_recount(l);
}

void lg_withdraw(ledger *l)
{
    pthread_rwlock_wrlock(&l->lock);
    lg_withdraw_locked(l);
    pthread_rwlock_unlock(&l->lock);
}

/* A shared store's sync failed with st: every pending record is void. Caller holds the lock
 * (read or write), so no change is appended before a writer withdraws them. */
void lg_voided(ledger *l, dpb_status st)
{
    atomic_store(&l->void_status, (int)st);
    atomic_fetch_add(&l->void_gen, 1);
}

/* 0 once every record up to seq is durable, -1 if the log failed first or a shared store
 * voided the pending records (the caller then withdraws and looks again). Waits for, or runs,
 * the group commit; a lock is held (read or write: no change can be appended under a read
 * lock, so what it covers stays put). */
int lg_settle(ledger *l, uint64_t seq)
{
    if (l->shared && atomic_load(&l->void_gen) != l->done_gen)
        return -1; /* voided, not withdrawn yet: nothing pending may be shown */
    if (seq <= store_durable_seq(l->st))
        return 0;
    dpb_status st = store_sync(l->st, seq);
    if (st == DPB_OK)
        return 0;
    if (l->shared && !store_failed(l->st))
        lg_voided(l, st);
    return -1;
}

uint64_t lg_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A change is starting: the background refinement gives way (its computation stops, and it
 * waits for a quiet moment before the next), so it never takes CPU or locks from changes. */
void lg_refine_yield(ledger *l)
{
    __atomic_store_n(&l->rf_yield, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&l->rf_last_change, lg_mono_ns(), __ATOMIC_RELEASE);
}

/* ---- recovery: replay and snapshots ------------------------------------------------------- */

typedef struct {
    ledger *l;
    uint8_t *dirty; /* not used: clients are recomputed wholesale after replay */
} replay_ctx;

int lg_apply_record(ledger *l, uint8_t type, const unsigned char *p, size_t n)
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
        if (lg_intern(l, p + r.at, n - r.at, (dp_relation)rel, &got, &fresh) != DPB_OK || !fresh ||
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
                  lg_apply_client(l, id, eps, delta, (int)mode, (int)rel, labels, NULL) != DPB_OK;
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
            (id != NULL && lg_find_round(l, id) >= 0)) {
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
            long pos = pid ? lg_find_client(l, pid) : -1;
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
                long pos = lg_find_client(l, out[i].id);
                if (pos < 0 || !out[i].admitted)
                    continue;
                lclient *c = &l->cl[pos];
                uint32_t evc = ev;
                if (l->evs[ev].rel != c->rel) {
                    int fresh;
                    if (lg_intern(l, l->evs[ev].bytes, l->evs[ev].nbytes, (dp_relation)c->rel, &evc,
                                  &fresh) != DPB_OK)
                        bad = 1;
                }
                if (expires) { /* a reservation: held, not charged */
                    evs2[c->rel] = evc;
                    bad |= lg_reserve_change(l, 0, pos, evc, 1, 0, (long)l->nrd) != 0;
                    continue;
                }
                if (lg_add_count(c, evc, 1) != 0 || lg_hist_ready(c) != 0)
                    bad = 1;
                else
                    lg_hist_push(c, (uint32_t)l->nrd, NULL);
                c->rounds++;
                c->last_ev = evc;
                if (isinf(out[i].after) && l->evs[evc].kind == EV_UNCERTIFIABLE)
                    c->uncertified = 1;
                c->version = ++l->version;
                c->dirty = 1;
            }
        }
        if (bad || lg_store_round(l, id, hash, (int)policy, (int)ran, l->last_seq, evs2, out, cnt,
                                  0, expires) != DPB_OK) {
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
        int bad = r.bad || name == NULL || lg_find_name(l, name) >= 0 ||
                  dp_event_decode(p + r.at, n - r.at, &ev, NULL) != DPB_OK ||
                  lg_apply_name(l, name, p + r.at, n - r.at, l->last_seq) != 0;
        dp_event_free(ev);
        free(name);
        return bad ? -1 : 0;
    }
    case REC_COMMIT:
    case REC_RELEASE: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        long rp = id ? lg_find_round(l, id) : -1;
        free(id);
        if (rp < 0 || l->rd[rp].state != LEDGER_RESERVED || l->rd[rp].out == NULL)
            return -1;
        if (type == REC_RELEASE) {
            unsigned why = br_u8(&r);
            if (r.bad || r.at != r.n || why > 1)
                return -1;
            return lg_resolve_round(l, rp, 0, why ? LEDGER_EXPIRED : LEDGER_RELEASED, NULL, NULL,
                                    0);
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
        int rc = lg_resolve_round(l, rp, 0, LEDGER_COMMITTED, h, idx, m);
        free(idx);
        return rc;
    }
    }
    return -1;
}

int lg_replay_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    ledger *l = ctx;
    l->last_seq = seq;
    l->records_since_snap++;
    return lg_apply_record(l, type, payload, len);
}

/* A log record the snapshot claims to hold (seq <= the snapshot's seq: a crash came between
 * the snapshot and the log's truncation). It is skipped, but only once the snapshot is seen
 * to hold it: the same event at the same index, the round with the same id and seq, a client
 * whose last such record is what the snapshot holds (checked after the scan, cover_bad).
 * Anything else means the snapshot's seq is wrong (format 1 does not checksum it). */
int lg_covered_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
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
        long pos = !r.bad && id ? lg_find_client(l, id) : -1;
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
        long pos = id ? lg_find_round(l, id) : -1;
        free(id);
        return pos >= 0 && l->rd[pos].seq == seq ? 0 : -1;
    }
    case REC_COMMIT:
    case REC_RELEASE: {
        char *id = br_str(&r, LEDGER_ID_MAX);
        long pos = id ? lg_find_round(l, id) : -1;
        free(id);
        return pos >= 0 && l->rd[pos].state_seq == seq ? 0 : -1;
    }
    case REC_NAME: {
        char *name = br_str(&r, LEDGER_ID_MAX);
        long pos = name ? lg_find_name(l, name) : -1;
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
dpb_status lg_serialize(ledger *l, bw *w)
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
        lg_client_record(w, c->id, c->eps, c->delta, c->mode, c->rel, c->labels);
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
int lg_load_snapshot(ledger *l, br *r)
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
        if (r->bad || rel > 1 || lg_intern(l, b, len, (dp_relation)rel, &idx, &fresh) != DPB_OK ||
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
        if (lg_grow((void **)&l->cl, &l->cap_cl, l->ncl + 1, sizeof *l->cl) != 0) {
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
        if (c->hseen && !r->bad && lg_hist_ready(c) != 0)
            r->bad = 1;
        for (uint32_t k = 0; c->hseen && c->hist && k < LEDGER_HISTORY; k++)
            c->hist[k] = br_u32(r); /* checked against the rounds below */
        /* a spend is >= 0 (+inf when uncertified); anything else is damage */
        if (!(c->spent >= 0.0) || !(c->dtv >= 0.0 && c->dtv <= 1.0))
            r->bad = 1;
        if ((c->nev && c->ev == NULL) || r->bad ||
            lg_index_insert(l, &l->cl_index, l->ncl, lg_cl_hash, (uint32_t)l->ncl) != 0) {
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
        lg_counters(l, c, +1);
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
                long pos = pid ? lg_find_client(l, pid) : -1;
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
        if (r->bad || lg_store_round(l, id, hash, (int)policy, (int)ran, seq, 0, out, has ? cnt : 0,
                                     0, x.phase ? x.expires_at : 0) != DPB_OK) {
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
        if (r->bad || name == NULL || lg_find_name(l, name) >= 0 ||
            dp_event_decode(b, len, &ev, NULL) != DPB_OK ||
            lg_apply_name(l, name, b, len, seq) != 0)
            r->bad = 1;
        dp_event_free(ev);
        free(name);
    }
    return r->bad || r->at != r->n ? -1 : 0;
}
