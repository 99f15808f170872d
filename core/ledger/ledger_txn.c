/*
 * ledger_txn.c - layer 2: the write transaction (lock, begin, log, abandon, commit, retry on
 * a lost race, snapshot trigger: written once for every verb) and the read path (catching
 * up, settling what is shown). Calls ledger_record.h and ledger_mem.h, and store.h; never
 * a verb.
 */
#include "ledger_txn.h"
#include "ledger_record.h"
#include "ledger_mem.h"

#include "../common/clock.h"

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

static dpb_status unavailable_error(dpb_error *err, const char *why)
{
    return dpb_fail(err, DPB_EUNAVAILABLE, NULL,
                    "the ledger's database cannot be reached (%s): nothing was charged by this "
                    "request unless a retry with the same round id finds it; retry",
                    why && why[0] ? why : "connection lost");
}

/* The pending changes were voided by a failed sync of a shared store (and withdrawn): a lost
 * race is computed again, an unreachable database answered. */
static dpb_status lost_race_or_unavailable(ledger *l, dpb_error *err)
{
    dpb_status st = (dpb_status)atomic_load(&l->void_status);
    if (st == DPB_ECONFLICT)
        return LEDGER_RACE;
    dpb_error why = {0};
    store_error(l->st, &why);
    return unavailable_error(err, why.detail);
}

/* Jittered backoff before try attempt + 1: 0.1 ms doubling up to 20 ms, times 0.5..1.5. */
void lg_race_backoff(unsigned attempt)
{
    static _Thread_local uint64_t x;
    if (x == 0)
        x = dpb_mono_ns() | 1;
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

dpb_status lg_races_exhausted(dpb_error *err)
{
    return dpb_fail(err, DPB_EUNAVAILABLE, NULL,
                    "the ledger lost %d races in a row to other replicas writing the same "
                    "log: nothing was charged by this request; retry",
                    RACE_TRIES);
}

/* A shared store, nothing pending: apply the records other replicas made durable. Caller
 * holds the write lock. */
static dpb_status catch_up_locked(ledger *l, dpb_error *err)
{
    if (!l->shared || l->nundo > 0 || lg_ledger_ro(l))
        return DPB_OK;
    uint64_t before = l->last_seq, last = l->last_seq;
    dpb_error why = {0};
    dpb_status st = store_catch_up(l->st, l->last_seq, lg_replay_fn, l, &last, &why);
    if (l->last_seq != before)
        lg_after_apply(l);
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
dpb_status lg_read_begin(ledger *l, dpb_error *err)
{
    if (!l->shared)
        return DPB_OK;
    lg_wrlock(l);
    lg_withdraw_locked(l);
    lg_prune_undo(l);
    dpb_status st = catch_up_locked(l, err);
    lg_wrunlock(l);
    lg_bury(l);
    return st;
}

/* The start of every change, under the write lock: withdraw after a failure someone else
 * saw, forget what became durable, catch up with a shared log. */
static dpb_status begin_write(ledger *l, dpb_error *err)
{
    lg_refine_yield(l);
    lg_withdraw_locked(l);
    lg_prune_undo(l);
    return catch_up_locked(l, err);
}

static dpb_status readonly_error(dpb_error *err)
{
    return dpb_fail(err, DPB_EREADONLY, NULL,
                    "the ledger is read-only after an I/O failure (it answers reads with what "
                    "is durable); fix the disk and restart it");
}

/* 1 once seq is durable and no sync failed since generation gen; 0 if one failed (nothing
 * withdrawn yet). No lock held. */
static int settled(ledger *l, uint64_t seq, uint64_t gen)
{
    if (!l->shared)
        return lg_settle(l, seq) == 0;
    pthread_rwlock_rdlock(&l->lock); /* under the read lock: see lg_voided() */
    int ok = atomic_load(&l->void_gen) == gen && lg_settle(l, seq) == 0;
    pthread_rwlock_unlock(&l->lock);
    return ok;
}

/* The answer to a change whose records could not be made durable (withdrawn already). */
static dpb_status not_durable(ledger *l, dpb_error *err)
{
    if (!store_failed(l->st))
        return lost_race_or_unavailable(l, err);
    dpb_error why = {0};
    store_error(l->st, &why);
    return dpb_fail(err, DPB_EIO, NULL,
                    "the ledger could not make its log durable (%s): the change is withdrawn, "
                    "not applied, and the ledger is read-only until restarted",
                    why.detail[0] ? why.detail : "I/O error");
}

/* The change whose last record is seq, appended and applied in generation gen: acknowledge
 * it once durable; if the log fails first, every change not durable (this one and those
 * sharing its sync) is withdrawn. Called without the lock. */
static dpb_status commit_seq(ledger *l, uint64_t seq, uint64_t gen, dpb_error *err)
{
    int ok = settled(l, seq, gen);
    if (ok) {
        /* forget what is durable now, if nobody else holds the lock (else the next write
         * does): an idle ledger keeps no undo entries */
        if (lg_trywrlock(l) == 0) {
            lg_prune_undo(l);
            lg_wrunlock(l);
        }
        lg_bury(l); /* what this or an earlier prune set aside */
        return DPB_OK;
    }
    lg_withdraw(l);
    return not_durable(l, err);
}

/* Append a record. On failure the caller withdraws (the ledger turns read-only). Caller
 * holds the write lock. */
static dpb_status log_record(ledger *l, int type, const bw *w, dpb_error *err)
{
    if (w->oom)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    /* the record's time first (ledger_record.h: REC_TIMED), the same bytes in every store */
    uint64_t seq, t = lg_next_time(l);
    unsigned char small[2048], *b = w->n + 8 <= sizeof small ? small : malloc(w->n + 8);
    if (b == NULL)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    lg_time_prefix(b, t);
    if (w->n)
        memcpy(b + 8, w->b, w->n);
    dpb_status st = store_append(l->st, (uint8_t)(type | REC_TIMED), b, w->n + 8, &seq);
    /* the leaf hashes the bytes the store keeps: the timed type and the time with the payload */
    dpb_status tst = st == DPB_OK
                         ? tlog_push_record(l->tree, seq, (uint8_t)(type | REC_TIMED), b, w->n + 8)
                         : DPB_OK;
    if (b != small)
        free(b);
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
    if (tst != DPB_OK) {
        store_abandon(l->st, "the log's tree (out of memory)");
        atomic_store(&l->read_only, 1);
        return dpb_fail(err, DPB_ENOMEM, NULL,
                        "out of memory adding the record to the log's tree: the change is "
                        "withdrawn and the ledger is read-only until restarted");
    }
    l->last_seq = seq;
    l->records_since_snap++;
    lg_series_advance(l, t); /* before the change is applied: the closing bucket's statuses */
    l->last_time = l->rec_time = t;
    return DPB_OK;
}

/* An appended record that cannot be applied (out of memory): give up on everything not
 * durable, so the log never holds what memory does not. Caller holds the write lock. */
static dpb_status abandon(ledger *l, dpb_status st, dpb_error *err)
{
    store_abandon(l->st, "applying a logged change (out of memory)");
    if (l->shared) { /* the store dropped the pending records: memory follows, read-only */
        atomic_store(&l->read_only, 1);
        lg_voided(l, DPB_ENOMEM);
    }
    lg_withdraw_locked(l);
    return dpb_fail(err, st, NULL,
                    "out of memory applying a change: it is withdrawn and the ledger is "
                    "read-only until restarted");
}

void lg_maybe_snapshot(ledger *l)
{
    uint64_t every = l->opt.snapshot_every ? l->opt.snapshot_every : 100000;
    if (l->records_since_snap < every || !l->has_thread)
        return;
    pthread_mutex_lock(&l->snap_mu);
    l->snap_wanted = 1;
    pthread_cond_signal(&l->snap_cv);
    pthread_mutex_unlock(&l->snap_mu);
}

dpb_status lg_take_snapshot(ledger *l, dpb_error *err)
{
    bw w = {0};
    pthread_mutex_lock(&l->wmu); /* no change half applied */
    pthread_rwlock_rdlock(&l->lock);
    /* a snapshot holds only durable changes (and none after a failure): else a change
     * refused as not durable could come back from it */
    if (lg_ledger_ro(l) || lg_settle(l, l->last_seq) != 0) {
        pthread_rwlock_unlock(&l->lock);
        pthread_mutex_unlock(&l->wmu);
        return DPB_EREADONLY;
    }
    uint64_t seq = l->last_seq;
    dpb_status st = lg_serialize(l, &w);
    l->records_since_snap = 0;
    pthread_rwlock_unlock(&l->lock);
    pthread_mutex_unlock(&l->wmu);
    if (st == DPB_OK) {
        st = store_snapshot(l->st, seq, w.b, w.n, err);
        if (st == DPB_OK)
            l->snap_seq = seq;
    } else {
        dpb_fail(err, st, NULL, "the snapshot could not be serialized (%s)", dpb_strstatus(st));
    }
    free(w.b);
    return st;
}

/* The read lock on a state whose every change is durable: settled, else withdrawn and
 * looked at again; writers_held: the caller holds the writers' lock already (it withdraws
 * under the write side alone). */
static void rdlock_settled(ledger *l, int writers_held)
{
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        if (lg_settle(l, l->last_seq) == 0)
            return;
        pthread_rwlock_unlock(&l->lock);
        if (!writers_held) {
            lg_withdraw(l);
            continue;
        }
        pthread_rwlock_wrlock(&l->lock);
        lg_withdraw_locked(l);
        pthread_rwlock_unlock(&l->lock);
    }
}

void lg_rdlock_durable(ledger *l)
{
    rdlock_settled(l, 0);
}

void lg_rdlock_whole(ledger *l)
{
    pthread_mutex_lock(&l->wmu);
    rdlock_settled(l, 1);
}

void lg_rdunlock_whole(ledger *l)
{
    pthread_rwlock_unlock(&l->lock);
    pthread_mutex_unlock(&l->wmu);
}

/* ---- the write transaction ------------------------------------------------------------------ */

dpb_status lg_txn_begin(lg_txn *t, ledger *l, dpb_error *err)
{
    *t = (lg_txn){l, err, 0, 0, 0, 0};
    lg_wrlock(l);
    t->spends0 = lg_spends_here;
    dpb_status st = begin_write(l, err);
    t->gen = atomic_load(&l->void_gen); /* the generation a change appended now belongs to */
    l->gaps = 1;                        /* its apply may let readers in (lg_let_readers) */
    return st;
}

dpb_status lg_txn_writable(lg_txn *t)
{
    return lg_ledger_ro(t->l) ? readonly_error(t->err) : DPB_OK;
}

dpb_status lg_txn_reserve(lg_txn *t, size_t k)
{
    if (lg_reserve_undo(t->l, k) != 0)
        return dpb_fail(t->err, DPB_ENOMEM, NULL, "out of memory");
    return DPB_OK;
}

dpb_status lg_txn_log(lg_txn *t, int type, bw *w)
{
    dpb_status st = log_record(t->l, type, w, t->err);
    free(w->b);
    w->b = NULL;
    if (st != DPB_OK) {
        lg_withdraw_locked(t->l);
        t->wait = 0;
        return st;
    }
    t->seq = t->l->last_seq;
    t->wait = 1;
    return DPB_OK;
}

dpb_status lg_txn_log_events(lg_txn *t)
{
    ledger *l = t->l;
    while (l->nevs_logged < l->nevs) {
        uint32_t idx = (uint32_t)l->nevs_logged;
        bw w = {0};
        lg_event_record(&w, l, idx);
        dpb_status st = lg_txn_log(t, REC_EVENT, &w);
        if (st != DPB_OK)
            return st;
        lundo u = {0};
        u.seq = l->last_seq;
        u.lversion = l->version;
        u.kind = U_EVENT;
        u.pos = idx;
        lg_push_undo(l, &u);
        l->nevs_logged++;
    }
    return DPB_OK;
}

dpb_status lg_txn_sync_early(lg_txn *t)
{
    ledger *l = t->l;
    if (!l->gaps || !t->wait)
        return DPB_OK;
    pthread_rwlock_unlock(&l->lock); /* readers go on meanwhile; writers wait */
    int ok = settled(l, t->seq, t->gen);
    pthread_rwlock_wrlock(&l->lock);
    if (ok)
        return DPB_OK;
    lg_withdraw_locked(l);
    t->wait = 0;
    return not_durable(l, t->err);
}

dpb_status lg_txn_abandon(lg_txn *t, dpb_status st)
{
    t->wait = 0;
    return abandon(t->l, st, t->err);
}

void lg_txn_wait(lg_txn *t, uint64_t seq)
{
    if (!t->wait || seq > t->seq)
        t->seq = seq;
    t->wait = 1;
}

dpb_status lg_txn_end_nosnap(lg_txn *t, dpb_status st)
{
    atomic_fetch_add_explicit(&t->l->locked_spends, lg_spends_here - t->spends0,
                              memory_order_relaxed);
    lg_wrunlock(t->l);
    lg_bury(t->l); /* what begin_write's prune set aside */
    if (!t->wait)
        return st;
    dpb_status cs = commit_seq(t->l, t->seq, t->gen, t->err);
    return cs != DPB_OK ? cs : st;
}

dpb_status lg_txn_end(lg_txn *t, dpb_status st)
{
    int wait = t->wait;
    st = lg_txn_end_nosnap(t, st);
    if (wait)
        lg_maybe_snapshot(t->l);
    return st;
}

/* ---- finding what is durable -------------------------------------------------------------- */

uint64_t lg_seq_client(const ledger *l, long pos)
{
    return l->cl[pos].seq;
}

uint64_t lg_seq_name(const ledger *l, long pos)
{
    return l->nm[pos].seq;
}

uint64_t lg_seq_round(const ledger *l, long pos)
{
    return l->rd[pos].seq;
}

uint64_t lg_seq_round_state(const ledger *l, long pos)
{
    return l->rd[pos].seq > l->rd[pos].state_seq ? l->rd[pos].seq : l->rd[pos].state_seq;
}

/* Take the read lock and find key (find) once what shows it (seq_of) is durable: its
 * position or -1, the read lock held on return. */
static long lg_rdlock_find(ledger *l, long (*find)(const ledger *, const char *), const char *key,
                           uint64_t (*seq_of)(const ledger *, long))
{
    for (;;) {
        pthread_rwlock_rdlock(&l->lock);
        long pos = find(l, key);
        if (pos < 0 || lg_settle(l, seq_of(l, pos)) == 0)
            return pos;
        pthread_rwlock_unlock(&l->lock);
        lg_withdraw(l); /* then look again: only what is durable is shown */
    }
}

dpb_status lg_read_one(ledger *l, long (*find)(const ledger *, const char *), const char *key,
                       uint64_t (*seq_of)(const ledger *, long),
                       dpb_status (*show)(const ledger *, long, void *), void *out)
{
    if (lg_read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    long pos = lg_rdlock_find(l, find, key, seq_of);
    dpb_status st = pos >= 0 ? show(l, pos, out) : DPB_ENOTFOUND;
    pthread_rwlock_unlock(&l->lock);
    return st;
}

long lg_find_durable_locked(ledger *l, long (*find)(const ledger *, const char *), const char *key,
                            uint64_t (*seq_of)(const ledger *, long))
{
    long pos = find(l, key);
    while (pos >= 0 && lg_settle(l, seq_of(l, pos)) != 0) {
        lg_withdraw_locked(l);
        pos = find(l, key);
    }
    return pos;
}
