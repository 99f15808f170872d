/*
 * ledger_open.c - layer 0, the top (above the verbs): the ledger's life: open (snapshot and
 * log replayed through ledger_record.h), the snapshot thread (which also sweeps expired
 * reservations through ledger_expire) and the refinement thread, close, copy to another
 * store, compare, and the summary. Calls the verbs (ledger.h, ledger_verbs.h) and every
 * layer below.
 */
#include "ledger_verbs.h"
#include "ledger_txn.h"
#include "ledger_record.h"
#include "ledger_mem.h"

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
        dpb_status st = lg_take_snapshot(l, &err);
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

/* After recovery (which computes no profile for the vocabulary the snapshot holds): the
 * profiles of the events the clients hold, computed here, off the lock, so that the first
 * round or read of a client after a restart does not compute them under it. A slice of
 * clients at a time under the read lock takes references to the events not yet readied;
 * they are readied with no lock held. Stops at close (warm_stop). */
static void *warm_main(void *arg)
{
    ledger *l = arg;
    enum { SLICE = 64, BATCH = 256 };
    size_t next = 0;
    while (!atomic_load(&l->warm_stop)) {
        spend_event *batch[BATCH];
        size_t nb = 0;
        int full = 0;
        pthread_rwlock_rdlock(&l->lock);
        size_t end = next + SLICE < l->ncl ? next + SLICE : l->ncl;
        while (next < end && !full) {
            const lclient *c = &l->cl[next];
            for (uint32_t i = 0; i < c->nev + c->nrv && !full; i++) {
                uint32_t x = i < c->nev ? c->ev[i].ev : c->rv[i - c->nev].ev;
                spend_event *se = l->evs[x].se;
                if (!spend_event_is_ready(se)) {
                    spend_event_ref(l->sp, se);
                    batch[nb++] = se;
                    full = nb == BATCH; /* the rest of this client: next time */
                }
            }
            if (!full)
                next++;
        }
        int done = next >= l->ncl;
        pthread_rwlock_unlock(&l->lock);
        int progress = 0;
        for (size_t k = 0; k < nb; k++) {
            if (!atomic_load(&l->warm_stop) && spend_event_ready(l->sp, batch[k]) == DPB_OK)
                progress = 1;
            spend_event_put(l->sp, batch[k]);
        }
        if (full && !progress)
            next++; /* out of memory: this client's events are readied at their use */
        if (done)
            break;
    }
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
    pthread_mutex_init(&l->wmu, NULL);
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
        lg_index_init(&l->ev_index, 64) != 0 || lg_series_init(l) != 0) {
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
    l->tree = tlog_new();
    st = l->tree == NULL ? dpb_fail(err, DPB_ENOMEM, NULL, "out of memory")
                         : store_tree_open(s, l->tree, snap_seq, err);
    if (st != DPB_OK)
        goto fail;
    st = store_replay(s, snap_seq, lg_replay_fn, lg_covered_fn, l, &next, err);
    if (l->tree_bad != 0) { /* the store's message names an offset: name the record */
        dpb_error_clear(err);
        st = lg_tree_refusal(l, err);
    }
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
    if (tlog_leaves(l->tree) > l->last_seq) { /* the tree kept records the log lost */
        st = dpb_fail(err, DPB_ECORRUPT, "data_dir",
                      "the log ends at seq %llu but the log's tree holds %llu records: record "
                      "seq %llu and after were removed from the log; refusing to start",
                      (unsigned long long)l->last_seq, (unsigned long long)tlog_leaves(l->tree),
                      (unsigned long long)(l->last_seq + 1));
        goto fail;
    }
    tlog_commit(l->tree, l->last_seq);
    /* recompute the spend of every client the log replay touched (the snapshot's spends are
     * those computed before it was written; their accountants are named at their first read:
     * nothing is computed here for the vocabulary the snapshot holds), then the counters */
    for (size_t i = 0; i < l->ncl; i++)
        if (!l->cl[i].dirty)
            l->cl[i].sacct = LG_SACCT_UNNAMED;
    lg_after_apply(l);
    lg_owner_recount(l); /* the snapshot's rounds were stored reserved, then given their state */
    l->open_profiles = ledger_event_profiles(l);
    if (pthread_create(&l->snap_thread, NULL, snapshot_main, l) == 0)
        l->has_thread = 1;
    if (pthread_create(&l->warm_thread, NULL, warm_main, l) == 0)
        l->has_warm = 1;
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
    lg_rdlock_whole(l);
    uint64_t seq = l->last_seq;
    st = lg_serialize(l, &w);
    lg_rdunlock_whole(l);
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

/* 1 if the counts x[0..n) of ledger a are those y[0..n) of b: each entry's event (by its
 * bytes and relation: the two may have interned their vocabularies in another order) with the
 * same count, in any order. */
static int same_counts(const ledger *a, const lcount *x, const ledger *b, const lcount *y,
                       uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const lev *ex = &a->evs[x[i].ev];
        int found = 0;
        for (uint32_t k = 0; k < n && !found; k++) {
            const lev *ey = &b->evs[y[k].ev];
            found = y[k].count == x[i].count && ey->rel == ex->rel && ey->nbytes == ex->nbytes &&
                    memcmp(ey->bytes, ex->bytes, ex->nbytes) == 0;
        }
        if (!found)
            return 0;
    }
    return 1;
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
        DIFF(x->nrv != y->nrv || !same_counts(a, x->rv, b, y->rv, x->nrv),
             "client '%s': reservations differ", x->id);
        DIFF(x->nev != y->nev || !same_counts(a, x->ev, b, y->ev, x->nev),
             "client '%s': charged events differ", x->id);
        DIFF((x->stuck_rd == 0) != (y->stuck_rd == 0) ||
                 (x->stuck_rd &&
                  (strcmp(a->rd[x->stuck_rd - 1].id, b->rd[y->stuck_rd - 1].id) != 0 ||
                   x->stuck_after != y->stuck_after)),
             "client '%s': stuck state differs", x->id);
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
        DIFF(strcmp(x->owner ? x->owner : "", y->owner ? y->owner : "") != 0,
             "round '%s': owner differs", x->id);
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
    lg_rdlock_whole(first);
    lg_rdlock_whole(second);
    int rc = compare_locked(a, b, why, cap);
    lg_rdunlock_whole(second);
    lg_rdunlock_whole(first);
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
    if (l->has_warm) { /* likewise */
        atomic_store(&l->warm_stop, 1);
        pthread_join(l->warm_thread, NULL);
        l->has_warm = 0;
    }
    if (l->has_thread) {
        pthread_mutex_lock(&l->snap_mu);
        l->snap_stop = 1;
        pthread_cond_signal(&l->snap_cv);
        pthread_mutex_unlock(&l->snap_mu);
        pthread_join(l->snap_thread, NULL);
    }
    if (snapshot && l->st && !lg_ledger_ro(l) && l->records_since_snap > 0)
        lg_take_snapshot(l, &(dpb_error){0});
    store_close(l->st);
    free(l->evs); /* their references go with the spend engine */
    for (size_t i = 0; i < l->nrd; i++) {
        lg_outcomes_free(l->rd[i].out, l->rd[i].n);
        free(l->rd[i].id);
    }
    free(l->rd);
    for (size_t i = 0; i < l->ncl; i++) {
        lg_client_release(&l->cl[i]);
        spend_memo_free(l->cl[i].memo);
    }
    free(l->cl);
    free(l->by_id);
    free(l->rank);
    lg_bury(l);
    for (size_t i = 0; i < l->nundo; i++)
        lg_undo_release(&l->undo[i]);
    free(l->undo);
    for (size_t i = 0; i < l->nnm; i++) {
        free(l->nm[i].name);
        free(l->nm[i].bytes);
    }
    free(l->nm);
    free(l->nm_index.slot);
    for (size_t i = 0; i < l->now; i++)
        free(l->ow[i].name);
    free(l->ow);
    free(l->ow_index.slot);
    free(l->cl_index.slot);
    free(l->rd_index.slot);
    free(l->ev_index.slot);
    pthread_rwlock_destroy(&l->lock);
    pthread_mutex_destroy(&l->wmu);
    pthread_mutex_destroy(&l->snap_mu);
    pthread_mutex_destroy(&l->id_mu);
    pthread_cond_destroy(&l->snap_cv);
    spend_engine_free(l->sp); /* after the events that referred to it */
    tlog_free(l->tree);       /* after the store that persisted it */
    lg_series_free(l);
    free(l->dirty);
    free(l->dir);
    free(l);
}

uint64_t ledger_open_profiles(ledger *l)
{
    return l->open_profiles;
}

void ledger_snapshot_stats(ledger *l, ledger_snapshot_info *out)
{
    pthread_mutex_lock(&l->snap_mu);
    out->written = l->snap_done;
    out->failed = l->snap_failed;
    snprintf(out->last_error, sizeof out->last_error, "%s", l->snap_err);
    pthread_mutex_unlock(&l->snap_mu);
}

void ledger_get_health(ledger *l, ledger_health *h)
{
    store_health sh;
    store_get_health(l->st, &sh);
    h->reachable = sh.answering;
    h->refusing = sh.refusing;
    h->silent_s = sh.silent_s;
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
    s->stuck = l->by_status[LEDGER_STUCK];
    memcpy(s->by_status, l->by_status, sizeof s->by_status);
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

dpb_status ledger_get_series(ledger *l, ledger_resolution res, uint64_t from_ms, uint64_t to_ms,
                             ledger_series *out)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)res >= LEDGER_NRES)
        return DPB_EINVAL;
    if (lg_read_begin(l, NULL) != DPB_OK)
        return DPB_EUNAVAILABLE;
    /* room for every bucket the ring holds, taken before the lock */
    out->points = malloc(LEDGER_SERIES_KEEP[res] * sizeof *out->points);
    if (out->points == NULL)
        return DPB_ENOMEM;
    lg_rdlock_durable(l);
    lg_series_get(l, res, from_ms, to_ms, out);
    out->view = lg_view_tag(l);
    pthread_rwlock_unlock(&l->lock);
    return DPB_OK;
}

uint64_t ledger_last_time(ledger *l)
{
    pthread_rwlock_rdlock(&l->lock);
    uint64_t t = l->last_time;
    pthread_rwlock_unlock(&l->lock);
    return t;
}

void ledger_set_clock(ledger *l, uint64_t (*fn)(void *ctx), void *ctx)
{
    lg_wrlock(l);
    l->clock_ms = fn;
    l->clock_ctx = ctx;
    lg_wrunlock(l);
}
