/*
 * ledger_store.c - the ledger and its store (store.h): catching up with a shared log, lost
 * races computed again, group commit, the snapshot thread, open and close, copy and compare.
 */
#include "ledger_int.h"

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
dpb_status lg_lost(ledger *l, dpb_error *err)
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
        x = lg_mono_ns() | 1;
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

/* After records were applied by replay or catch-up: they are in the log (their events too),
 * the clients they touched get their spends recomputed, the counters are summed again. */
static void after_apply(ledger *l)
{
    l->nevs_logged = l->nevs;
    for (size_t i = 0; i < l->ncl; i++)
        if (l->cl[i].dirty) {
            lg_recompute(l, &l->cl[i]);
            l->cl[i].dirty = 0;
        }
    lg_recount(l);
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
dpb_status lg_read_begin(ledger *l, dpb_error *err)
{
    if (!l->shared)
        return DPB_OK;
    pthread_rwlock_wrlock(&l->lock);
    lg_withdraw_locked(l);
    lg_prune_undo(l);
    dpb_status st = catch_up_locked(l, err);
    pthread_rwlock_unlock(&l->lock);
    return st;
}

/* The start of every change, under the write lock: withdraw after a failure someone else
 * saw, forget what became durable, catch up with a shared log. */
dpb_status lg_begin_write(ledger *l, dpb_error *err)
{
    lg_refine_yield(l);
    lg_withdraw_locked(l);
    lg_prune_undo(l);
    return catch_up_locked(l, err);
}

/* The generation a change appended now belongs to (commit's argument). Caller holds the
 * write lock. */
uint64_t lg_cur_gen(ledger *l)
{
    return atomic_load(&l->void_gen);
}

dpb_status lg_readonly_error(dpb_error *err)
{
    return dpb_fail(err, DPB_EREADONLY, NULL,
                    "the ledger is read-only after an I/O failure (it answers reads with what "
                    "is durable); fix the disk and restart it");
}

/* The change whose last record is seq, appended and applied in generation gen: acknowledge
 * it once durable; if the log fails first, every change not durable (this one and those
 * sharing its sync) is withdrawn. Called without the lock. */
dpb_status lg_commit(ledger *l, uint64_t seq, uint64_t gen, dpb_error *err)
{
    int ok;
    if (l->shared) { /* under the read lock: see lg_voided() */
        pthread_rwlock_rdlock(&l->lock);
        ok = atomic_load(&l->void_gen) == gen && lg_settle(l, seq) == 0;
        pthread_rwlock_unlock(&l->lock);
    } else {
        ok = lg_settle(l, seq) == 0;
    }
    if (ok) {
        /* forget what is durable now, if nobody else holds the lock (else the next write
         * does): an idle ledger keeps no undo entries */
        if (pthread_rwlock_trywrlock(&l->lock) == 0) {
            lg_prune_undo(l);
            pthread_rwlock_unlock(&l->lock);
        }
        return DPB_OK;
    }
    lg_withdraw(l);
    if (!store_failed(l->st))
        return lg_lost(l, err);
    dpb_error why = {0};
    store_error(l->st, &why);
    return dpb_fail(err, DPB_EIO, NULL,
                    "the ledger could not make its log durable (%s): the change is withdrawn, "
                    "not applied, and the ledger is read-only until restarted",
                    why.detail[0] ? why.detail : "I/O error");
}

static dpb_status take_snapshot(ledger *l, dpb_error *err)
{
    bw w = {0};
    pthread_rwlock_rdlock(&l->lock);
    /* a snapshot holds only durable changes (and none after a failure): else a change
     * refused as not durable could come back from it */
    if (lg_ledger_ro(l) || lg_settle(l, l->last_seq) != 0) {
        pthread_rwlock_unlock(&l->lock);
        return DPB_EREADONLY;
    }
    uint64_t seq = l->last_seq;
    dpb_status st = lg_serialize(l, &w);
    l->records_since_snap = 0;
    pthread_rwlock_unlock(&l->lock);
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
        /* a failed snapshot leaves the log as it is: nothing is lost, but the log grows (and
         * a restart replays it all) until one succeeds; counted and kept for the operator */
        dpb_error err = {0};
        dpb_status st = take_snapshot(l, &err);
        pthread_mutex_lock(&l->snap_mu);
        l->snap_running = 0;
        if (st == DPB_OK) {
            l->snap_done++;
            l->snap_err[0] = '\0';
        } else if (st != DPB_EREADONLY) { /* read-only: not a snapshot's failure */
            l->snap_failed++;
            snprintf(l->snap_err, sizeof l->snap_err, "%s",
                     err.detail[0] ? err.detail : dpb_strstatus(st));
        }
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
    l->dir = lg_xstrdup(where);
    pthread_rwlock_init(&l->lock, NULL);
    pthread_mutex_init(&l->snap_mu, NULL);
    pthread_mutex_init(&l->id_mu, NULL);
    pthread_cond_init(&l->snap_cv, NULL);
    l->sp = spend_engine_new(0);
    struct timespec bt;
    clock_gettime(CLOCK_REALTIME, &bt);
    l->boot =
        ((uint64_t)bt.tv_sec * 1000000000u + (uint64_t)bt.tv_nsec) ^ ((uint64_t)getpid() << 40);
    dpb_status st = DPB_ENOMEM;
    if (l->dir == NULL || l->sp == NULL || lg_index_init(&l->cl_index, 1024) != 0 ||
        lg_index_init(&l->nm_index, 64) != 0 || lg_index_init(&l->rd_index, 1024) != 0 ||
        lg_index_init(&l->ev_index, 64) != 0) {
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
    if (snap && lg_load_snapshot(l, &sr) != 0) {
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
    st = store_replay(s, snap_seq, lg_replay_fn, lg_covered_fn, l, &next, err);
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
            lg_name_spend(l, &l->cl[i]);
    after_apply(l);
    if (pthread_create(&l->snap_thread, NULL, snapshot_main, l) == 0)
        l->has_thread = 1;
    if (o->pld_refine) /* after recovery: it reads the state */
        l->rf = refiner_start(lg_refine_step, l, 0.05);
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
    if ((st = lg_read_begin(l, err)) != DPB_OK) {
        store_close(s);
        return st;
    }
    bw w = {0};
    lg_rdlock_durable(l);
    uint64_t seq = l->last_seq;
    st = lg_serialize(l, &w);
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
        long p = lg_find_client(b, x->id);
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
        DIFF(lg_status_of(x) != lg_status_of(y), "client '%s': status differs", x->id);
        DIFF(x->nrv != y->nrv, "client '%s': reservations differ", x->id);
    }
    for (size_t i = 0; i < a->nrd; i++) {
        const lrnd *x = &a->rd[i];
        long p = lg_find_round(b, x->id);
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
        long p = lg_find_name(b, x->name);
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
    if (lg_read_begin(a, NULL) != DPB_OK || lg_read_begin(b, NULL) != DPB_OK) {
        snprintf(why, cap, "a ledger's database cannot be reached");
        return 1;
    }
    if (a == b)
        return 0;
    /* one lock order (by address) whoever compares */
    ledger *first = (uintptr_t)a < (uintptr_t)b ? a : b, *second = first == a ? b : a;
    lg_rdlock_durable(first);
    lg_rdlock_durable(second);
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
    lg_refine_yield(l);  /* stops a computation under way */
    refiner_stop(l->rf); /* first: it reads the state and refers to events */
    l->rf = NULL;
    if (l->has_thread) {
        pthread_mutex_lock(&l->snap_mu);
        l->snap_stop = 1;
        pthread_cond_signal(&l->snap_cv);
        pthread_mutex_unlock(&l->snap_mu);
        pthread_join(l->snap_thread, NULL);
    }
    if (snapshot && l->st && !lg_ledger_ro(l) && l->records_since_snap > 0)
        take_snapshot(l, &(dpb_error){0});
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
        spend_memo_free(l->cl[i].memo);
        free(l->cl[i].rv);
        free(l->cl[i].hist);
    }
    free(l->cl);
    free(l->by_id);
    free(l->rank);
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
    pthread_mutex_destroy(&l->id_mu);
    pthread_cond_destroy(&l->snap_cv);
    spend_engine_free(l->sp); /* after the events that referred to it */
    free(l->dir);
    free(l);
}

void ledger_snapshot_stats(ledger *l, ledger_snapshot_info *out)
{
    pthread_mutex_lock(&l->snap_mu);
    out->written = l->snap_done;
    out->failed = l->snap_failed;
    snprintf(out->last_error, sizeof out->last_error, "%s", l->snap_err);
    pthread_mutex_unlock(&l->snap_mu);
}

void ledger_get_summary(ledger *l, ledger_summary *s)
{
    int unavailable = lg_read_begin(l, NULL) != DPB_OK;
    lg_rdlock_durable(l);
    memset(s, 0, sizeof *s);
    s->unavailable = unavailable;
    s->clients = l->ncl;
    s->active = l->by_status[LEDGER_ACTIVE];
    s->exhausted = l->by_status[LEDGER_EXHAUSTED];
    s->uncertified = l->by_status[LEDGER_UNCERTIFIED];
    s->rounds = l->nrd;
    s->version = l->version;
    s->view = lg_view_tag(l);
    s->refined = l->refines;
    s->refine_stale = l->refine_stale;
    s->refine_abandoned = __atomic_load_n(&l->refine_abandoned, __ATOMIC_RELAXED);
    s->refining = atomic_load(&l->refining);
    memcpy(s->spend_hist, l->hist, sizeof s->spend_hist);
    s->read_only = lg_ledger_ro(l);
    s->log_bytes = store_size_bytes(l->st);
    store_sync_stats(l->st, &s->sync_count, &s->sync_seconds, s->sync_hist);
    pthread_rwlock_unlock(&l->lock);
}
