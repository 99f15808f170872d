/*
 * ledger_undo.c - layer 4: durability, memory never ahead of the log: the undo entries of
 * changes not yet durable, their withdrawal after a failed or voided sync, and settling a
 * seq (the group commit) before anything is shown. Calls store.h, spend.h (through
 * ledger_spendof.c) and ledger_index.c.
 */
#include "ledger_mem.h"

#include "../common/clock.h"

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
        u.stuck_rd = c->stuck_rd;
        u.stuck_after = c->stuck_after;
        u.last_ev = c->last_ev;
        u.spent = c->spent;
        u.dtv = c->dtv;
        u.rounds = c->rounds;
        u.version = c->version;
        u.cseq = c->seq;
    }
    return u;
}

void lg_undo_release(lundo *u)
{
    free(u->labels);
    u->labels = NULL;
}

void lg_push_undo(ledger *l, const lundo *u)
{
    l->undo[l->nundo++] = *u; /* reserved */
}

/* A batch of pruned undo entries, their memory freed after the lock (lg_bury). */
struct lgrave {
    struct lgrave *next;
    lundo *u; /* n entries, owned */
    size_t n;
};

static int undo_owns(const lundo *u)
{
    return u->labels != NULL;
}

/* Forget the entries whose records are durable now (they can no longer be withdrawn). A
 * batch of more than LG_PRUNE_NOW entries (after a large round) is set aside for lg_bury
 * rather than freed here, under the write lock: the whole array when every entry goes. */
void lg_prune_undo(ledger *l)
{
    uint64_t d = store_durable_seq(l->st);
    size_t k = 0;
    while (k < l->nundo && l->undo[k].seq <= d)
        k++;
    if (k == 0)
        return;
    struct lgrave *g = k > LG_PRUNE_NOW ? malloc(sizeof *g) : NULL;
    if (g != NULL && k < l->nundo) {
        g->u = malloc(k * sizeof *g->u);
        if (g->u == NULL) {
            free(g);
            g = NULL;
        } else {
            memcpy(g->u, l->undo, k * sizeof *l->undo);
        }
    } else if (g != NULL) { /* every entry: the array goes to the grave as it is */
        g->u = l->undo;
        l->undo = NULL;
        l->cap_undo = 0;
    }
    if (g != NULL) {
        g->n = k;
        g->next = atomic_load(&l->grave);
        while (!atomic_compare_exchange_weak(&l->grave, &g->next, g))
            ;
    } else {
        uint64_t owned = 0;
        for (size_t i = 0; i < k; i++) {
            owned += (uint64_t)undo_owns(&l->undo[i]);
            lg_undo_release(&l->undo[i]);
        }
        atomic_fetch_add_explicit(&l->locked_frees, owned, memory_order_relaxed);
    }
    if (l->undo != NULL) {
        memmove(l->undo, l->undo + k, (l->nundo - k) * sizeof *l->undo);
    }
    l->nundo -= k;
    if (l->nundo == 0 && l->cap_undo > 4096) { /* after a huge round: give the memory back */
        free(l->undo);
        l->undo = NULL;
        l->cap_undo = 0;
    }
}

void lg_bury(ledger *l)
{
    struct lgrave *g = atomic_exchange(&l->grave, NULL);
    while (g != NULL) {
        struct lgrave *next = g->next;
        for (size_t i = 0; i < g->n; i++)
            lg_undo_release(&g->u[i]);
        free(g->u);
        free(g);
        g = next;
    }
}

uint64_t ledger_locked_frees(ledger *l)
{
    return atomic_load_explicit(&l->locked_frees, memory_order_relaxed);
}

/* Take back one charge of ev (ev_new: it made the entry, the last one). */
static void uncount(lclient *c, uint32_t ev, int ev_new)
{
    if (ev_new) {
        c->nev--;
        return;
    }
    for (uint32_t i = 0; i < c->nev; i++)
        if (c->ev[i].ev == ev) {
            c->ev[i].count--;
            return;
        }
}

/* Take back what ledger_apply.c's rv_adjust did (recorded in u), the client's held counts
 * being as it left them: the same entries in the same order as before. Never allocates. */
static void rv_unadjust(lclient *c, const lundo *u)
{
    switch (u->rv_op) {
    case LG_RV_UP:
        c->rv[u->rv_at].count--;
        break;
    case LG_RV_DOWN:
        c->rv[u->rv_at].count++;
        break;
    case LG_RV_NEW:
        c->nrv--;
        break;
    case LG_RV_GONE: /* its room is still there: removing an entry never shrinks the array */
        if (u->rv_at < c->nrv)
            c->rv[c->nrv] = c->rv[u->rv_at];
        c->rv[u->rv_at] = (lcount){u->ev, u->rv_old};
        c->nrv++;
        break;
    }
}

void lg_resv_undo(lclient *c, const lundo *u)
{
    if (u->charged)
        uncount(c, u->ev, u->ev_new);
    rv_unadjust(c, u);
}

static void hist_pop(lclient *c, uint32_t old)
{
    if (c->hist && c->hseen > 0) {
        c->hseen--;
        c->hist[c->hseen % LEDGER_HISTORY] = old;
    }
}

/* What client_undo kept of a client, back. */
static void undo_scalars(lclient *c, const lundo *u)
{
    if (u->hpushed)
        hist_pop(c, u->hold);
    c->uncertified = u->uncertified;
    c->sacct = u->sacct;
    c->stuck = u->stuck;
    c->stuck_rd = u->stuck_rd;
    c->stuck_after = u->stuck_after;
    c->last_ev = u->last_ev;
    c->spent = u->spent;
    c->dtv = u->dtv;
    c->rounds = u->rounds;
    c->version = u->version;
    c->seq = u->cseq;
}

/* The newest client, named event or round (at pos), created by a change withdrawn now. */
static void drop_client(ledger *l, uint32_t pos)
{
    lclient *c = &l->cl[pos];
    lg_index_delete(&l->cl_index, lg_str_hash(c->id), pos, lg_cl_hash, l);
    lg_client_release(c);
    lg_memo_drop(l, c);
    l->ncl--;
    if (pos < l->nby_id)
        l->nby_id = 0; /* the id order is rebuilt by the next list */
}

static void drop_name(ledger *l, uint32_t pos)
{
    lg_index_delete(&l->nm_index, lg_str_hash(l->nm[pos].name), pos, lg_nm_hash, l);
    free(l->nm[pos].name);
    free(l->nm[pos].bytes);
    l->nm_bytes -= l->nm[pos].nbytes;
    l->nnm--;
}

static void drop_round(ledger *l, uint32_t pos)
{
    lrnd *r = &l->rd[pos];
    lg_series_round(l, r, -1);
    lg_index_delete(&l->rd_index, lg_str_hash(r->id), pos, lg_rd_hash, l);
    if (r->out) {
        lg_outcomes_free(r->out, r->n);
        l->kept_outcomes -= r->n;
    }
    free(r->id);
    l->nrd--;
    if (l->oldest_kept > l->nrd)
        l->oldest_kept = l->nrd;
}

static void undo_one(ledger *l, lundo *u)
{
    switch (u->kind) {
    case U_EVENT:
        lg_drop_last_event(l);
        l->nevs_logged--;
        break;
    case U_CLIENT_NEW:
        drop_client(l, u->pos);
        break;
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
        } else {
            uncount(c, u->ev, u->ev_new);
        }
        undo_scalars(c, u);
        break;
    }
    case U_RESV:
        lg_resv_undo(&l->cl[u->pos], u);
        undo_scalars(&l->cl[u->pos], u);
        break;
    case U_OFFER:
        undo_scalars(&l->cl[u->pos], u);
        break;
    case U_RSTATE: {
        lrnd *r = &l->rd[u->pos];
        lg_series_commit(l, r, -1);
        r->state = u->rstate;
        r->state_seq = u->rstate_seq;
        r->state_time_ms = u->rstate_time;
        r->reported = 0; /* only a commit reports, and only from the reserved state */
        memset(r->chash, 0, 16);
        for (uint32_t i = 0; r->out && i < r->n; i++)
            r->out[i].reported = 0;
        break;
    }
    case U_NAME:
        drop_name(l, u->pos);
        break;
    case U_ROUND:
        drop_round(l, u->pos);
        break;
    }
    l->version = u->lversion;
    lg_undo_release(u);
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
    tlog_cut(l->tree, d);
    l->done_gen = g;
    if (failed)
        atomic_store(&l->read_only, 1);
    lg_recount(l);
    lg_owner_recount(l);
}

void lg_withdraw(ledger *l)
{
    lg_wrlock(l);
    lg_withdraw_locked(l);
    lg_wrunlock(l);
}

void lg_wrlock(ledger *l)
{
    pthread_mutex_lock(&l->wmu);
    pthread_rwlock_wrlock(&l->lock);
}

void lg_wrunlock(ledger *l)
{
    l->gaps = 0;
    pthread_rwlock_unlock(&l->lock);
    pthread_mutex_unlock(&l->wmu);
}

int lg_trywrlock(ledger *l)
{
    if (pthread_mutex_trylock(&l->wmu) != 0)
        return -1;
    if (pthread_rwlock_trywrlock(&l->lock) != 0) {
        pthread_mutex_unlock(&l->wmu);
        return -1;
    }
    return 0;
}

void lg_let_readers(ledger *l)
{
    if (!l->gaps)
        return;
    pthread_rwlock_unlock(&l->lock);
    if (l->gap_hook != NULL)
        l->gap_hook(l->gap_ctx);
    pthread_rwlock_wrlock(&l->lock);
}

void lg_let_readers_early(ledger *l)
{
    if (!l->shared)
        lg_let_readers(l);
}

int lg_gap_open(ledger *l)
{
    if (!l->gaps || l->shared)
        return 0;
    pthread_rwlock_unlock(&l->lock);
    return 1;
}

void lg_gap_close(ledger *l, int opened)
{
    if (opened)
        pthread_rwlock_wrlock(&l->lock);
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

/* A change is starting: the background refinement gives way (its computation stops, and it
 * waits for a quiet moment before the next), so it never takes CPU or locks from changes. */
void lg_refine_yield(ledger *l)
{
    __atomic_store_n(&l->rf_yield, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&l->rf_last_change, dpb_mono_ns(), __ATOMIC_RELEASE);
}
