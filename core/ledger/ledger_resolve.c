/*
 * ledger_resolve.c - layer 1 (verbs): the second phase of two-phase rounds (commit, release,
 * expiry of reservations whose time is up) and reading a stored round. Each change is one
 * write transaction (ledger_txn.h), its clients' new spends computed before it (ledger_txn.h,
 * "spends before the lock").
 */
#include "ledger_txn.h"
#include "ledger_record.h"
#include "ledger_mem.h"

/* The honest statuses a release will leave (the admitted clients of a reservation that it
 * gives back: all of them for a release, those not reported for a commit), computed before
 * the write lock, RESOLVE_SLICE outcomes per hold of the read lock, each with its client's
 * position and version then; under the write lock an outcome whose client is as it was takes
 * its status from here (lg_reserve_change), the others compute theirs there. */
#define RESOLVE_SLICE 512

typedef struct {
    uint32_t n;     /* the round's outcomes when computed (0: nothing computed) */
    long *pos;      /* n: the client's position (held outcomes; -1: none), also a hint for the
                     * resolution (lg_resolve_round checks it) */
    uint64_t *ver;  /* n: its version then */
    double *spent;  /* n: and its spend (a refinement lowers it, keeping the version) */
    uint8_t *stuck; /* n: 1 + its stuck flag after the release; 0: not known */
} resolve_pre;

/* The positions resolve_stuck_before found for the outcomes of the round at rp (checked where
 * used), or NULL. */
static const long *pre_hint(const ledger *l, long rp, const resolve_pre *p)
{
    return p != NULL && p->n != 0 && p->n == l->rd[rp].n ? p->pos : NULL;
}

/* Log and apply the release of the reservation at rp (expired: by the ledger, its time up;
 * rs: what was computed before the lock, or NULL). Caller holds the write lock after begin. */
static dpb_status release_locked(lg_txn *t, long rp, int expired, const resolve_pre *rs)
{
    ledger *l = t->l;
    dpb_status st = lg_txn_reserve(t, 1 + (size_t)l->rd[rp].admitted);
    if (st != DPB_OK)
        return st;
    bw w = {0};
    lg_release_record(&w, l->rd[rp].id, expired);
    if ((st = lg_txn_log(t, REC_RELEASE, &w)) != DPB_OK ||
        (l->rd[rp].admitted > LG_GAP_EVERY && (st = lg_txn_sync_early(t)) != DPB_OK))
        return st;
    if (lg_resolve_round(l, rp, t->seq, expired ? LEDGER_EXPIRED : LEDGER_RELEASED, NULL, NULL, 0,
                         pre_hint(l, rp, rs)) != 0)
        return lg_txn_abandon(t, DPB_ENOMEM);
    return DPB_OK;
}

/* The answer of a commit or release of round_id (logged_seq: the commit's record, or 0),
 * built under the read lock once the change is durable rather than under the write lock: a
 * resolved round changes no more (its outcomes may be summarized meanwhile, as the answer
 * then says). */
static void view_after(ledger *l, const char *round_id, uint64_t logged_seq, ledger_round_res *res)
{
    pthread_rwlock_rdlock(&l->lock);
    long rp = lg_find_round(l, round_id);
    if (rp >= 0) {
        lg_round_view(l, &l->rd[rp], res);
        res->logged_seq = logged_seq;
    }
    pthread_rwlock_unlock(&l->lock);
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

/* DPB_OK if who may commit or release round r (ledger_caller): no caller or key to check,
 * an admin, a round without an owner, or its owner; else DPB_EFORBIDDEN naming the owner (a
 * key's name or fingerprint, never a secret). */
static dpb_status owner_check(const lrnd *r, const ledger_caller *who, const char *what,
                              dpb_error *err)
{
    if (who == NULL || who->key == NULL || who->admin || r->owner == NULL ||
        strcmp(r->owner, who->key) == 0)
        return DPB_OK;
    return dpb_fail(err, DPB_EFORBIDDEN, "round_id",
                    "round '%s' was reserved by the key '%s': only that key or an admin key may "
                    "%s it",
                    r->id, r->owner, what);
}

/* The commit's own checks, before any lock (so that a bad list never holds the write lock
 * nor touches the reservation): every reported id valid, none listed twice (an
 * open-addressing set of the ids: linear in n). DPB_OK, DPB_EINVAL (field "reported[i]"),
 * DPB_ENOMEM. */
static dpb_status reported_ok(const char *const *reported, size_t n, dpb_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!lg_valid_id(reported[i]))
            return dpb_fail(err, DPB_EINVAL, "reported", "reported[%zu] is not a valid client id",
                            i);
    lg_idtab seen;
    if (lg_idtab_init(&seen, reported, sizeof *reported, n) != 0)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    dpb_status st = DPB_OK;
    for (size_t i = 0; i < n && st == DPB_OK; i++)
        if (lg_idtab_add(&seen, (uint32_t)i) != UINT32_MAX) {
            char f[40];
            snprintf(f, sizeof f, "reported[%zu]", i);
            st = dpb_fail(err, DPB_EINVAL, f, "'%s' is listed twice", reported[i]);
        }
    lg_idtab_free(&seen);
    return st;
}

/* The reported ids (distinct: reported_ok) as indices of round r's admitted outcomes, into
 * idx[0..n) (an open-addressing index of them: linear in r's size and n). DPB_OK, DPB_EINVAL
 * (not admitted), DPB_ENOMEM. */
static dpb_status reported_indices(const lrnd *r, const char *round_id, const char *const *reported,
                                   size_t n, uint32_t *idx, dpb_error *err)
{
    lg_idtab adm; /* the admitted outcomes, by id */
    if (lg_idtab_init(&adm, r->n ? &r->out[0].id : NULL, sizeof *r->out, r->n) != 0)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    for (uint32_t i = 0; i < r->n; i++)
        if (r->out[i].admitted)
            (void)lg_idtab_add(&adm, i);
    dpb_status st = DPB_OK;
    for (size_t i = 0; i < n && st == DPB_OK; i++) {
        uint32_t k = lg_idtab_find(&adm, reported[i]);
        if (k == UINT32_MAX) {
            char f[40];
            snprintf(f, sizeof f, "reported[%zu]", i);
            st = dpb_fail(err, DPB_EINVAL, f,
                          "'%s' was not admitted to round '%s': only its admitted clients can "
                          "report",
                          reported[i], round_id);
        } else {
            idx[i] = k;
        }
    }
    lg_idtab_free(&adm);
    return st;
}

/* A commit's list checked against its round under the read lock (reads go on meanwhile), so
 * that a list naming a client the reservation did not admit is answered without the write
 * lock: the round's admitted outcomes never change while it is reserved. */
typedef struct {
    const char *round_id;
    const char *const *reported;
    size_t n;
    const ledger_caller *who;
    uint32_t *idx; /* n: the indices found */
    dpb_error *err;
    dpb_status st; /* DPB_OK, or reported_indices' refusal */
    int checked;   /* idx holds the indices of this round's outcomes */
} commit_check;

static dpb_status check_reported(const ledger *l, long pos, void *arg)
{
    commit_check *c = arg;
    const lrnd *r = &l->rd[pos];
    /* only a live reservation the caller may commit; everything else is answered under the
     * write lock as before (replays, conflicts, expiry, ownership) */
    if (!r->phase || r->state != LEDGER_RESERVED || r->out == NULL ||
        r->expires_at <= (uint64_t)time(NULL) || owner_check(r, c->who, "commit", NULL) != DPB_OK)
        return DPB_OK;
    c->st = reported_indices(r, c->round_id, c->reported, c->n, c->idx, c->err);
    c->checked = c->st == DPB_OK;
    return DPB_OK;
}

/* 1 if idx[0..n) (found under the read lock) still names r's admitted outcomes of the
 * reported ids: a check linear in n, instead of indexing r again. */
static int indices_hold(const lrnd *r, const char *const *reported, size_t n, const uint32_t *idx)
{
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= r->n || !r->out[idx[i]].admitted || strcmp(r->out[idx[i]].id, reported[i]))
            return 0;
    return 1;
}

/* The spends resolving reservation round_id will need (commit: reported[0..n) charged, the
 * other admitted clients released; release: all released), copied under the read lock and
 * computed with no lock held into p. DPB_OK (also when there is nothing to compute),
 * DPB_ECANCELLED or DPB_ECOST. */
static dpb_status resolve_prefetch(ledger *l, const char *round_id, int commit,
                                   const char *const *reported, size_t n, lg_prefetch *p,
                                   dpb_error *err)
{
    lg_idtab rep = {0}; /* commit: the reported ids */
    if (commit && lg_idtab_init(&rep, reported, sizeof *reported, n) != 0)
        return DPB_OK; /* computed under the lock, as it can */
    for (size_t i = 0; commit && i < n; i++)
        (void)lg_idtab_add(&rep, (uint32_t)i);
    pthread_rwlock_rdlock(&l->lock);
    long rp = lg_find_round(l, round_id);
    const lrnd *r = rp >= 0 ? &l->rd[rp] : NULL;
    lg_change *ch = r && r->state == LEDGER_RESERVED && r->out ? malloc(r->n * sizeof *ch) : NULL;
    size_t m = 0;
    for (uint32_t i = 0; ch && i < r->n; i++) {
        if (!r->out[i].admitted)
            continue;
        long pos = lg_find_client(l, r->out[i].id);
        if (pos < 0 || r->ev[l->cl[pos].rel] == LEV_NONE)
            continue;
        int charge = commit && lg_idtab_find(&rep, r->out[i].id) != UINT32_MAX;
        ch[m++] = (lg_change){pos, r->ev[l->cl[pos].rel], charge, -1, 0, 0.0, 0.0};
    }
    if (m)
        (void)lg_prefetch_copy(l, ch, m, p); /* out of memory: computed under the lock */
    pthread_rwlock_unlock(&l->lock);
    free(ch);
    lg_idtab_free(&rep);
    return lg_prefetch_run(l, p, NULL, err);
}

static void resolve_pre_free(resolve_pre *p)
{
    free(p->pos);
    free(p->ver);
    free(p->spent);
    free(p->stuck);
    memset(p, 0, sizeof *p);
}

static void resolve_stuck_before(ledger *l, const char *round_id, const lg_idtab *rep,
                                 resolve_pre *p)
{
    for (uint32_t at = 0;;) {
        pthread_rwlock_rdlock(&l->lock);
        long rp = lg_find_round(l, round_id);
        const lrnd *r = rp >= 0 ? &l->rd[rp] : NULL;
        if (r == NULL || r->state != LEDGER_RESERVED || r->out == NULL ||
            (at > 0 && r->n != p->n)) {
            pthread_rwlock_unlock(&l->lock);
            resolve_pre_free(p);
            return;
        }
        if (at == 0) {
            p->n = r->n;
            p->pos = malloc((r->n + 1) * sizeof *p->pos);
            p->ver = malloc((r->n + 1) * sizeof *p->ver);
            p->spent = malloc((r->n + 1) * sizeof *p->spent);
            p->stuck = calloc(r->n + 1, 1);
            if (p->pos == NULL || p->ver == NULL || p->spent == NULL || p->stuck == NULL) {
                pthread_rwlock_unlock(&l->lock);
                resolve_pre_free(p);
                return;
            }
        }
        uint32_t end = at + RESOLVE_SLICE < r->n ? at + RESOLVE_SLICE : r->n;
        for (; at < end; at++) {
            const lout *o = &r->out[at];
            long pos = o->admitted ? lg_find_client(l, o->id) : -1;
            uint32_t ev = pos >= 0 ? r->ev[l->cl[pos].rel] : LEV_NONE;
            p->pos[at] = ev == LEV_NONE ? -1 : pos; /* a hint for the resolution */
            p->stuck[at] = 0;
            p->ver[at] = ev == LEV_NONE ? 0 : l->cl[pos].version;
            p->spent[at] = ev == LEV_NONE ? 0.0 : l->cl[pos].spent;
            if (ev == LEV_NONE || (rep && lg_idtab_find(rep, o->id) != UINT32_MAX))
                continue; /* not held, or charged by the commit (computed under the lock) */
            int stuck = lg_stuck_after_hold(l, &l->cl[pos], lg_ev_se(l, ev), -1);
            p->stuck[at] = stuck >= 0 ? (uint8_t)(stuck + 1) : 0;
        }
        int done = at >= r->n;
        pthread_rwlock_unlock(&l->lock);
        if (done)
            return;
    }
}

/* Under the write lock, just before the reservation at rp is resolved: the statuses
 * computed before it given to the outcomes whose client is as it was. */
static void resolve_pre_apply(ledger *l, long rp, const resolve_pre *p)
{
    lrnd *r = &l->rd[rp];
    if (p->n == 0 || r->n != p->n || r->out == NULL)
        return;
    for (uint32_t i = 0; i < r->n; i++) {
        long pos = p->pos[i];
        r->out[i].pre_stuck = 0;
        if (pos >= 0 && (size_t)pos < l->ncl && l->cl[pos].version == p->ver[i] &&
            l->cl[pos].spent == p->spent[i] && strcmp(l->cl[pos].id, r->out[i].id) == 0)
            r->out[i].pre_stuck = p->stuck[i];
    }
}

static dpb_status commit_once(ledger *l, const char *round_id, const char *const *reported,
                              size_t n, const unsigned char hash[16], const ledger_caller *who,
                              const lg_prefetch *pre, const resolve_pre *rs, ledger_round_res *res,
                              dpb_error *err)
{
    memset(res, 0, sizeof *res);
    if (!lg_valid_id(round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    if (n > LEDGER_MAX_PARTICIPANTS)
        return dpb_fail(err, DPB_EINVAL, "reported", "at most %d reported clients",
                        LEDGER_MAX_PARTICIPANTS);
    dpb_status vs = reported_ok(reported, n, err);
    if (vs != DPB_OK)
        return vs;
    uint32_t *idx = malloc((n ? n : 1) * sizeof *idx);
    if (idx == NULL)
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    commit_check cc = {round_id, reported, n, who, idx, err, DPB_OK, 0};
    /* a shared store's read catches up under the write lock with a round trip to the
     * database: there the check runs once, under the write lock (linear all the same) */
    if (!l->shared)
        vs = lg_read_one(l, lg_find_round, round_id, lg_seq_round_state, check_reported, &cc);
    if (cc.st != DPB_OK) { /* refused under the read lock: the reservation untouched */
        free(idx);
        return cc.st;
    }
    (void)vs; /* not found, or unreachable: answered under the write lock, as it can */
    lg_txn t;
    int view = 0, replayed = 0; /* the answer, built after the lock */
    uint64_t logged = 0;
    dpb_status st = lg_txn_begin(&t, l, err);
    if (st != DPB_OK)
        goto out;
    long rp = lg_find_durable_locked(l, lg_find_round, round_id, lg_seq_round_state);
    if (rp < 0) {
        st = dpb_fail(err, DPB_ENOTFOUND, "round_id", "no round '%s'", round_id);
        goto out;
    }
    if ((st = owner_check(&l->rd[rp], who, "commit", err)) != DPB_OK)
        goto out;
    if (l->rd[rp].phase && l->rd[rp].state == LEDGER_COMMITTED &&
        memcmp(l->rd[rp].chash, hash, 16) == 0) {
        view = 1; /* replayed (after the lock) */
        replayed = 1;
        goto out;
    }
    if (l->rd[rp].phase && l->rd[rp].state == LEDGER_RESERVED &&
        l->rd[rp].expires_at <= (uint64_t)time(NULL) && !lg_ledger_ro(l)) {
        resolve_pre_apply(l, rp, rs);
        if ((st = release_locked(&t, rp, 1, rs)) != DPB_OK)
            goto out;
    }
    const lrnd *r = &l->rd[rp];
    if (!r->phase || r->state != LEDGER_RESERVED) {
        view = 1; /* the caller tells expired from released (a resolved round: as it is now) */
        st = not_reserved(r, "commit", err);
        goto out;
    }
    if (pre && !lg_prefetch_current(l, pre)) { /* a client changed since: compute again */
        st = LEDGER_STALE;
        goto out;
    }
    if ((st = lg_txn_writable(&t)) != DPB_OK)
        goto out;
    if (!(cc.checked && indices_hold(r, reported, n, idx)) &&
        (st = reported_indices(r, round_id, reported, n, idx, err)) != DPB_OK)
        goto out;
    if ((st = lg_txn_reserve(&t, 1 + (size_t)r->admitted)) != DPB_OK)
        goto out;
    bw w = {0};
    lg_commit_record(&w, round_id, hash, idx, n);
    if ((st = lg_txn_log(&t, REC_COMMIT, &w)) != DPB_OK ||
        (r->admitted > LG_GAP_EVERY && (st = lg_txn_sync_early(&t)) != DPB_OK))
        goto out;
    resolve_pre_apply(l, rp, rs);
    if (lg_resolve_round(l, rp, t.seq, LEDGER_COMMITTED, hash, idx, (uint32_t)n,
                         pre_hint(l, rp, rs)) != 0) {
        st = lg_txn_abandon(&t, DPB_ENOMEM);
        goto out;
    }
    view = 1;
    logged = t.seq;
out:
    free(idx);
    if (st != DPB_OK && st != DPB_ECONFLICT)
        t.wait = 0; /* only an answer, or the release of an expired reservation, commits */
    int wait = t.wait;
    dpb_status cs = lg_txn_end(&t, st);
    if (wait && cs != st)
        ledger_round_res_free(res);
    if (view && cs == st) {
        view_after(l, round_id, logged, res);
        res->replayed = replayed;
    }
    return cs;
}

dpb_status ledger_commit_as(ledger *l, const char *round_id, const char *const *reported, size_t n,
                            const unsigned char hash[16], const ledger_caller *who,
                            ledger_round_res *res, dpb_error *err)
{
    memset(res, 0, sizeof *res); /* every answer, a refusal before commit_once's too */
    /* a list with a duplicate is refused before any lock or spend (linear); commit_once
     * checks the round id and the length first, as it answers them */
    dpb_status st = lg_valid_id(round_id) && n <= LEDGER_MAX_PARTICIPANTS
                        ? reported_ok(reported, n, err)
                        : DPB_OK;
    if (st != DPB_OK)
        return st;
    st = LEDGER_STALE;
    lg_refine_yield(l);
    for (int tries = 0; st == LEDGER_STALE; tries++) {
        lg_prefetch p = {0};
        if (n <= LEDGER_MAX_PARTICIPANTS &&
            (st = resolve_prefetch(l, round_id, 1, reported, n, &p, err)) != DPB_OK) {
            lg_prefetch_free(l, &p);
            return st;
        }
        const lg_prefetch *pre = tries + 1 < LG_PREFETCH_TRIES ? &p : NULL;
        resolve_pre rs = {0};
        lg_idtab rep;
        if (n <= LEDGER_MAX_PARTICIPANTS &&
            lg_idtab_init(&rep, reported, sizeof *reported, n) == 0) {
            for (size_t i = 0; i < n; i++)
                (void)lg_idtab_add(&rep, (uint32_t)i);
            resolve_stuck_before(l, round_id, &rep, &rs);
            lg_idtab_free(&rep);
        }
        RETRY_RACES(st, commit_once(l, round_id, reported, n, hash, who, pre, &rs, res, err), err);
        resolve_pre_free(&rs);
        lg_prefetch_free(l, &p);
    }
    return st;
}

dpb_status ledger_commit(ledger *l, const char *round_id, const char *const *reported, size_t n,
                         const unsigned char hash[16], ledger_round_res *res, dpb_error *err)
{
    return ledger_commit_as(l, round_id, reported, n, hash, NULL, res, err);
}

static dpb_status release_once(ledger *l, const char *round_id, const ledger_caller *who,
                               const lg_prefetch *pre, const resolve_pre *rs, ledger_round_res *res,
                               dpb_error *err)
{
    memset(res, 0, sizeof *res);
    if (!lg_valid_id(round_id))
        return dpb_fail(err, DPB_EINVAL, "round_id", "a round id is " LEDGER_ID_RULE);
    lg_txn t;
    int view = 0, replayed = 0; /* the answer, built after the lock */
    dpb_status st = lg_txn_begin(&t, l, err);
    long rp =
        st == DPB_OK ? lg_find_durable_locked(l, lg_find_round, round_id, lg_seq_round_state) : -1;
    if (st != DPB_OK) {
        /* the database cannot be reached: answered as such */
    } else if (rp < 0) {
        st = dpb_fail(err, DPB_ENOTFOUND, "round_id", "no round '%s'", round_id);
    } else if ((st = owner_check(&l->rd[rp], who, "release", err)) != DPB_OK) {
        /* another key's reservation: nothing changes */
    } else if (!l->rd[rp].phase || l->rd[rp].state == LEDGER_COMMITTED) {
        view = 1; /* (built after the lock: a resolved round changes no more) */
        st = not_reserved(&l->rd[rp], "release", err);
    } else if (l->rd[rp].state != LEDGER_RESERVED) {
        view = replayed = 1; /* released or expired already: idempotent */
    } else if (pre && !lg_prefetch_current(l, pre)) {
        st = LEDGER_STALE; /* a client changed since: compute again */
    } else if ((st = lg_txn_writable(&t)) == DPB_OK) {
        int expired = l->rd[rp].expires_at <= (uint64_t)time(NULL);
        resolve_pre_apply(l, rp, rs);
        st = release_locked(&t, rp, expired, rs);
        view = st == DPB_OK;
    }
    int wait = t.wait;
    st = lg_txn_end(&t, st);
    if (wait && st != DPB_OK)
        ledger_round_res_free(res);
    if (view && (st == DPB_OK || !wait)) {
        view_after(l, round_id, 0, res);
        res->replayed = replayed;
    }
    return st;
}

dpb_status ledger_release_as(ledger *l, const char *round_id, const ledger_caller *who,
                             ledger_round_res *res, dpb_error *err)
{
    memset(res, 0, sizeof *res); /* a refusal before release_once is answered too */
    dpb_status st = LEDGER_STALE;
    lg_refine_yield(l);
    for (int tries = 0; st == LEDGER_STALE; tries++) {
        lg_prefetch p = {0};
        if ((st = resolve_prefetch(l, round_id, 0, NULL, 0, &p, err)) != DPB_OK) {
            lg_prefetch_free(l, &p);
            return st;
        }
        const lg_prefetch *pre = tries + 1 < LG_PREFETCH_TRIES ? &p : NULL;
        resolve_pre rs = {0};
        resolve_stuck_before(l, round_id, NULL, &rs);
        RETRY_RACES(st, release_once(l, round_id, who, pre, &rs, res, err), err);
        resolve_pre_free(&rs);
        lg_prefetch_free(l, &p);
    }
    return st;
}

dpb_status ledger_release(ledger *l, const char *round_id, ledger_round_res *res, dpb_error *err)
{
    return ledger_release_as(l, round_id, NULL, res, err);
}

/* Release round id if it is still a reservation whose time is up: DPB_OK (*done 1 if this
 * call released it), LEDGER_RACE, or a failure. */
static dpb_status expire_once(ledger *l, const char *id, uint64_t now, const lg_prefetch *pre,
                              const resolve_pre *rs, int *done)
{
    dpb_error err = {0};
    *done = 0;
    lg_txn t;
    dpb_status st = lg_txn_begin(&t, l, &err);
    long rp = st != DPB_OK || lg_ledger_ro(l)
                  ? -1
                  : lg_find_durable_locked(l, lg_find_round, id, lg_seq_round_state);
    if (rp >= 0 && l->rd[rp].state == LEDGER_RESERVED && l->rd[rp].expires_at <= now) {
        if (pre && !lg_prefetch_current(l, pre)) {
            st = LEDGER_STALE;
        } else {
            resolve_pre_apply(l, rp, rs);
            st = release_locked(&t, rp, 1, NULL);
        }
    }
    int wait = t.wait;
    st = lg_txn_end_nosnap(&t, st);
    if (wait && st == DPB_OK)
        *done = 1;
    return st;
}

size_t ledger_expire(ledger *l, uint64_t now)
{
    enum { BATCH = 256 };
    char *ids[BATCH];
    size_t k = 0, done = 0;
    if (lg_read_begin(l, NULL) != DPB_OK)
        return 0; /* a shared store's database cannot be reached: the next sweep */
    pthread_rwlock_rdlock(&l->lock);
    /* newest first (a reservation lives a day at most: they are among the last rounds), and
     * the scan ends once it has seen every reserved round: none, nothing scanned */
    size_t seen = 0;
    for (size_t i = l->nrd; i-- > 0 && k < BATCH && seen < l->nreserved;) {
        if (l->rd[i].state != LEDGER_RESERVED)
            continue;
        seen++;
        if (l->rd[i].expires_at <= now && (ids[k] = lg_xstrdup(l->rd[i].id)) != NULL)
            k++;
    }
    pthread_rwlock_unlock(&l->lock);
    for (size_t i = 0; i < k; i++) {
        /* another replica expiring it first is a lost race: run again, it is released */
        int one = 0;
        dpb_status st = LEDGER_STALE;
        for (int tries = 0; st == LEDGER_STALE; tries++) {
            lg_prefetch p = {0};
            /* past the ledger's deadline or cost cap: released anyway (its time is up),
             * computing under the lock what was not computed before it */
            int ok = resolve_prefetch(l, ids[i], 0, NULL, 0, &p, NULL) == DPB_OK;
            const lg_prefetch *pre = ok && tries + 1 < LG_PREFETCH_TRIES ? &p : NULL;
            resolve_pre rs = {0};
            resolve_stuck_before(l, ids[i], NULL, &rs);
            RETRY_RACES(st, expire_once(l, ids[i], now, pre, &rs, &one), NULL);
            resolve_pre_free(&rs);
            lg_prefetch_free(l, &p);
        }
        done += (size_t)one;
        free(ids[i]);
    }
    if (done)
        lg_maybe_snapshot(l);
    return done;
}

static dpb_status show_round(const ledger *l, long pos, void *res)
{
    lg_round_view(l, &l->rd[pos], res);
    return DPB_OK;
}

dpb_status ledger_get_round(ledger *l, const char *round_id, ledger_round_res *res)
{
    return lg_read_one(l, lg_find_round, round_id, lg_seq_round_state, show_round, res);
}

long ledger_round_size_now(ledger *l, const char *round_id)
{
    if (pthread_rwlock_tryrdlock(&l->lock) != 0)
        return -2;
    long pos = lg_find_round(l, round_id);
    long n = pos < 0 ? -1 : (long)l->rd[pos].n;
    pthread_rwlock_unlock(&l->lock);
    return n;
}
