/* test_reserve.c - two-phase rounds' commits and owners: a commit's list is checked before
 * the write lock (duplicates before any lock, ids the reservation did not admit under the
 * read lock), so a bad list of 100,000 ids never holds the ledger nor touches the
 * reservation; a reservation records the key that made it, only that key or an admin
 * commits or releases it; the operator's cap on what one key holds; the owner survives the
 * log, the snapshot and a replica, and records and snapshots written before owners existed
 * (RESERVE without its owner, snapshot format 3) are still read, their reservations open to
 * any caller. Reaches into ledger_int.h for the ledger's lock only. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/ledger/ledger_int.h"
#include "../../core/ledger/ledger_mem.h"
#include "../../core/ledger/ledger_txn.h"
#include "memstore.h"
#include "suites.h"

static dp_event *gaussian(double s)
{
    dp_event *e = dp_event_new(DP_EV_GAUSSIAN);
    if (e != NULL)
        e->u.noise.noise_multiplier = s;
    return e;
}

static ledger *on_dir(const char *dir, uint64_t cap)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.default_budget = 1;
    o.default_epsilon = 10.0;
    o.default_delta = 1e-5;
    o.snapshot_every = 1000000;
    o.max_reserved_per_owner = cap;
    ledger *l = NULL;
    dpb_error err = {0};
    CHECKF(ledger_open(&o, &l, &err) == DPB_OK, "%s", err.detail);
    return l;
}

static ledger *on_log(memlog *g)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.default_budget = 1;
    o.default_epsilon = 10.0;
    o.default_delta = 1e-5;
    o.snapshot_every = 1000000;
    ledger *l = NULL;
    dpb_error err = {0};
    ledger_store *s = memstore_open(g);
    dpb_status st = s ? ledger_open_store(&o, s, &l, &err) : DPB_ENOMEM;
    CHECKF(st == DPB_OK, "%s", err.detail);
    return st == DPB_OK ? l : NULL;
}

/* A round of G(sigma) over ids[0..n) (admit_eligible; all_or_nothing when sigma < 0, of
 * G(-sigma)): a reservation by owner (NULL: none) held ttl seconds, or charged in one step
 * (ttl 0); *admitted from the answer (may be NULL). */
static dpb_status round_g(ledger *l, const char *rid, const char *owner, double sigma,
                          const char *const *ids, size_t n, uint64_t ttl, size_t *admitted,
                          dpb_error *err)
{
    ledger_policy pol = sigma < 0 ? LEDGER_ALL_OR_NOTHING : LEDGER_ADMIT_ELIGIBLE;
    dp_event *ev = gaussian(fabs(sigma));
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = pol;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    rq.reserve = ttl > 0;
    rq.ttl_seconds = ttl;
    rq.owner = owner;
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    ledger_round_res res;
    dpb_error local = {0};
    dpb_status st = ledger_round(l, &rq, &res, err ? err : &local);
    if (admitted)
        *admitted = st == DPB_OK ? res.admitted : 0;
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    dp_event_free(ev);
    return st;
}

/* A reservation by owner of G(2), held ttl seconds. */
static dpb_status reserve(ledger *l, const char *rid, const char *owner, const char *const *ids,
                          size_t n, uint64_t ttl, size_t *admitted, dpb_error *err)
{
    return round_g(l, rid, owner, 2.0, ids, n, ttl, admitted, err);
}

static dpb_status commit_as(ledger *l, const char *rid, const char *key, int admin,
                            const char *const *rep, size_t n, dpb_error *err)
{
    ledger_caller who = {key, admin};
    unsigned char h[16];
    ledger_hash128(rid, strlen(rid), h);
    ledger_round_res res;
    dpb_error local = {0};
    dpb_status st = ledger_commit_as(l, rid, rep, n, h, &who, &res, err ? err : &local);
    ledger_round_res_free(&res);
    return st;
}

static dpb_status release_as(ledger *l, const char *rid, const char *key, int admin)
{
    ledger_caller who = {key, admin};
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_release_as(l, rid, &who, &res, &err);
    ledger_round_res_free(&res);
    return st;
}

/* The round's state, reported count and owner ("" none); state -1 when unknown. */
static int round_state(ledger *l, const char *rid, size_t *reported, char owner[65])
{
    ledger_round_res r;
    if (ledger_get_round(l, rid, &r) != DPB_OK)
        return -1;
    int s = (int)r.state;
    if (reported)
        *reported = r.reported;
    if (owner)
        snprintf(owner, 65, "%s", r.owner);
    ledger_round_res_free(&r);
    return s;
}

/* ---- a commit's list is checked off the write lock ---- */

typedef struct {
    ledger *l;
    const char *const *rep;
    size_t n;
    dpb_status st;
    dpb_error err;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} commit_job;

static void *commit_main(void *arg)
{
    commit_job *j = arg;
    dpb_status st = commit_as(j->l, "big", "k1", 0, j->rep, j->n, &j->err);
    pthread_mutex_lock(&j->mu);
    j->st = st;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Runs the commit of rep[0..n) on another thread while this one holds the ledger's read lock
 * (as a reader would): 1 if it was answered meanwhile (it never waited for the write lock),
 * with its status in *st and its error in *err. The wait is generous (the check takes
 * milliseconds); a commit that needs the write lock is answered only after the lock is
 * given back, and then counts as not answered. */
static int answered_under_read_lock(ledger *l, const char *const *rep, size_t n, dpb_status *st,
                                    dpb_error *err)
{
    commit_job j = {l, rep, n, DPB_OK, {0}, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    pthread_rwlock_rdlock(&l->lock);
    pthread_t th;
    if (pthread_create(&th, NULL, commit_main, &j) != 0) {
        pthread_rwlock_unlock(&l->lock);
        CHECK(!"pthread_create");
        return 0;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&j.mu);
    while (!j.done && pthread_cond_timedwait(&j.cv, &j.mu, &until) == 0)
        ;
    int early = j.done;
    pthread_mutex_unlock(&j.mu);
    pthread_rwlock_unlock(&l->lock);
    pthread_join(th, NULL);
    *st = j.st;
    *err = j.err;
    return early;
}

/* The case: a reservation of 100,000 clients committed with a list that names one
 * id twice, or one id it did not admit. Both are refused (400 invalid_parameter) while a
 * reader holds the lock, so the check never took the write lock (on main: the duplicate scan
 * ran quadratically under it); the reservation stays as it was, and the right list then
 * commits. */
static void reserve_commit_list_checked_off_the_write_lock(void)
{
    enum { N = 100000 };
    char dir[64];
    if (tl_make_dir(dir, sizeof dir, "dpb_reserve_") != 0)
        return;
    ledger *l = on_dir(dir, 0);
    char(*names)[16] = malloc((size_t)N * sizeof *names);
    const char **ids = malloc(N * sizeof *ids);
    if (l == NULL || names == NULL || ids == NULL)
        goto out;
    for (size_t i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "c%06zu", i);
        ids[i] = names[i];
    }
    size_t adm = 0;
    dpb_error err = {0};
    CHECKF(reserve(l, "big", "k1", ids, N, 3600, &adm, &err) == DPB_OK && adm == N, "%s",
           err.detail);
    dpb_status st;
    /* the first id again, last */
    ids[N - 1] = ids[0];
    CHECK(answered_under_read_lock(l, ids, N, &st, &err));
    CHECKF(st == DPB_EINVAL && strcmp(err.field, "reported[99999]") == 0 &&
               strstr(err.detail, "listed twice") != NULL,
           "%s: %s %s", dpb_strstatus(st), err.field, err.detail);
    /* one id the reservation did not admit, last */
    ids[N - 1] = "bogus";
    CHECK(answered_under_read_lock(l, ids, N, &st, &err));
    CHECKF(st == DPB_EINVAL && strcmp(err.field, "reported[99999]") == 0 &&
               strstr(err.detail, "not admitted") != NULL,
           "%s: %s %s", dpb_strstatus(st), err.field, err.detail);
    size_t rep = 1;
    CHECK(round_state(l, "big", &rep, NULL) == LEDGER_RESERVED && rep == 0);
    ledger_client c;
    CHECK(ledger_get_client(l, "c000000", &c) == DPB_OK && c.rounds == 0);
    /* the right list commits, once the lock is free */
    ids[N - 1] = names[N - 1];
    memset(&err, 0, sizeof err);
    CHECKF(commit_as(l, "big", "k1", 0, ids, N, &err) == DPB_OK, "%s", err.detail);
    CHECK(round_state(l, "big", &rep, NULL) == LEDGER_COMMITTED && rep == N);
    CHECK(ledger_get_client(l, "c099999", &c) == DPB_OK && c.rounds == 1);
out:
    free(names);
    free(ids);
    if (l)
        ledger_close(l);
    tl_remove_dir(dir);
}

/* ---- owners ---- */

static const char *const AB[] = {"a", "b"};

/* Only the owner or an admin commits or releases; a refusal changes nothing, and comes
 * before every other answer (a replay of another key's commit is refused too); a
 * reservation without an owner is anyone's; ownerless callers (no API keys) are not
 * checked. */
static void reserve_owner_matrix(void)
{
    char dir[64];
    if (tl_make_dir(dir, sizeof dir, "dpb_reserve_") != 0)
        return;
    ledger *l = on_dir(dir, 0);
    if (l == NULL) {
        tl_remove_dir(dir);
        return;
    }
    char owner[65];
    dpb_error err = {0};
    CHECK(reserve(l, "r1", "k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(round_state(l, "r1", NULL, owner) == LEDGER_RESERVED && strcmp(owner, "k1") == 0);
    CHECK(commit_as(l, "r1", "k2", 0, AB, 1, &err) == DPB_EFORBIDDEN);
    CHECKF(strcmp(err.field, "round_id") == 0 && strstr(err.detail, "'k1'") != NULL, "%s",
           err.detail);
    CHECK(release_as(l, "r1", "k2", 0) == DPB_EFORBIDDEN);
    CHECK(round_state(l, "r1", NULL, NULL) == LEDGER_RESERVED);
    CHECK(commit_as(l, "r1", "k1", 0, AB, 1, NULL) == DPB_OK);
    CHECK(commit_as(l, "r1", "k1", 0, AB, 1, NULL) == DPB_OK);         /* replayed */
    CHECK(commit_as(l, "r1", "k2", 0, AB, 1, NULL) == DPB_EFORBIDDEN); /* not even replayed */
    CHECK(commit_as(l, "r1", "k2", 1, AB, 1, NULL) == DPB_OK);         /* an admin: replayed */
    /* an admin commits or releases another key's reservation */
    CHECK(reserve(l, "r2", "k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(release_as(l, "r2", "k2", 1) == DPB_OK);
    CHECK(round_state(l, "r2", NULL, NULL) == LEDGER_RELEASED);
    CHECK(reserve(l, "r3", "k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(commit_as(l, "r3", "admin", 1, AB, 2, NULL) == DPB_OK);
    /* the owner releases its own */
    CHECK(reserve(l, "r4", "k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(release_as(l, "r4", "k1", 0) == DPB_OK);
    /* without an owner: any key; without a key: not checked */
    CHECK(reserve(l, "r5", NULL, AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(round_state(l, "r5", NULL, owner) == LEDGER_RESERVED && owner[0] == '\0');
    CHECK(commit_as(l, "r5", "k2", 0, AB, 2, NULL) == DPB_OK);
    CHECK(reserve(l, "r6", "k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(commit_as(l, "r6", NULL, 0, AB, 2, NULL) == DPB_OK);
    /* an owner that is no identity */
    memset(&err, 0, sizeof err);
    CHECK(reserve(l, "r7", "k 1", AB, 2, 3600, NULL, &err) == DPB_EINVAL &&
          strcmp(err.field, "owner") == 0);
    /* after a restart (the log) the owner still holds */
    CHECK(reserve(l, "r8", "k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    ledger_close_nosnapshot(l);
    l = on_dir(dir, 0);
    if (l) {
        CHECK(round_state(l, "r8", NULL, owner) == LEDGER_RESERVED && strcmp(owner, "k1") == 0);
        CHECK(release_as(l, "r8", "k2", 0) == DPB_EFORBIDDEN);
        ledger_close(l); /* a snapshot: and after it */
    }
    l = on_dir(dir, 0);
    if (l) {
        CHECK(round_state(l, "r8", NULL, owner) == LEDGER_RESERVED && strcmp(owner, "k1") == 0);
        CHECK(release_as(l, "r8", "k2", 0) == DPB_EFORBIDDEN);
        CHECK(release_as(l, "r8", "k1", 0) == DPB_OK);
        ledger_close(l);
    }
    tl_remove_dir(dir);
}

/* The cap on client-reservations per owner: counted per owner, freed by a commit, a release
 * and an expiry, summed again after a restart; a reservation past it is refused whole
 * (DPB_EQUOTA, nothing stored). */
static void reserve_quota_per_owner(void)
{
    char dir[64];
    if (tl_make_dir(dir, sizeof dir, "dpb_reserve_") != 0)
        return;
    ledger *l = on_dir(dir, 3);
    if (l == NULL) {
        tl_remove_dir(dir);
        return;
    }
    static const char *const CD[] = {"c", "d"}, *const E[] = {"e"};
    dpb_error err = {0};
    CHECK(reserve(l, "q1", "k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(reserve(l, "q2", "k1", CD, 2, 3600, NULL, &err) == DPB_EQUOTA);
    CHECKF(strstr(err.detail, "holds 2") != NULL && strstr(err.detail, "cap of 3") != NULL, "%s",
           err.detail);
    CHECK(round_state(l, "q2", NULL, NULL) == -1);
    CHECK(reserve(l, "q3", "k1", E, 1, 1, NULL, NULL) == DPB_OK);     /* 3: at the cap */
    CHECK(reserve(l, "q4", "k2", CD, 2, 3600, NULL, NULL) == DPB_OK); /* per key */
    CHECK(reserve(l, "q5", NULL, CD, 2, 3600, NULL, NULL) == DPB_OK); /* nobody's */
    CHECK(reserve(l, "q6", "k1", E, 1, 3600, NULL, NULL) == DPB_EQUOTA);
    /* an expiry frees what it held */
    CHECK(ledger_expire(l, (uint64_t)time(NULL) + 10) >= 1);
    CHECK(round_state(l, "q3", NULL, NULL) == LEDGER_EXPIRED);
    CHECK(reserve(l, "q6", "k1", E, 1, 3600, NULL, NULL) == DPB_OK);
    /* held across a restart: 3 */
    ledger_close(l);
    l = on_dir(dir, 3);
    if (l == NULL) {
        tl_remove_dir(dir);
        return;
    }
    CHECK(reserve(l, "q7", "k1", E, 1, 3600, NULL, NULL) == DPB_EQUOTA);
    /* a commit frees it */
    CHECK(commit_as(l, "q1", "k1", 0, AB, 1, NULL) == DPB_OK);
    CHECK(reserve(l, "q7", "k1", CD, 2, 3600, NULL, NULL) == DPB_OK);
    /* and a release */
    CHECK(release_as(l, "q7", "k1", 0) == DPB_OK);
    CHECK(reserve(l, "q8", "k1", CD, 2, 3600, NULL, NULL) == DPB_OK);
    ledger_close(l);
    tl_remove_dir(dir);
}

/* The n bytes at p of the w-byte string (u32 length + bytes) s, once: their offset, or -1. */
static long find_str(const unsigned char *p, size_t n, const char *s)
{
    size_t k = strlen(s), w = 4 + k;
    long at = -1;
    for (size_t i = 0; i + w <= n; i++)
        if (p[i] == (unsigned char)k && !p[i + 1] && !p[i + 2] && !p[i + 3] &&
            memcmp(p + i + 4, s, k) == 0) {
            if (at >= 0)
                return -1; /* twice: not the one meant */
            at = (long)i;
        }
    return at;
}

#define FIXED_MS 1795000000123ull
static uint64_t fixed_clock(void *ctx)
{
    (void)ctx;
    return FIXED_MS;
}

/* The owner on a shared log: a replica reads it from the record; a RESERVE record written
 * before owners existed (it ends at expires_at) and a snapshot of format 3 (no owner per
 * round) are still read, their reservations open to any key. */
static void reserve_owner_old_formats(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g);
    char owner[65];
    if (a == NULL)
        goto snap;
    CHECK(reserve(a, "new", "owner-k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    CHECK(reserve(a, "old", "owner-k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    /* "old" as an earlier version wrote it: the owner's 12 bytes cut off the record */
    memrec *last = &g.rec[g.nrec - 1];
    CHECK((last->type & 0x7f) == 4 /* RESERVE */ && last->n > 12 &&
          find_str(last->p, last->n, "owner-k1") == (long)(last->n - 12));
    last->n -= 12;
    ledger *b = on_log(&g);
    if (b) {
        CHECK(round_state(b, "new", NULL, owner) == LEDGER_RESERVED &&
              strcmp(owner, "owner-k1") == 0);
        CHECK(commit_as(b, "new", "k2", 0, AB, 1, NULL) == DPB_EFORBIDDEN);
        CHECK(round_state(b, "old", NULL, owner) == LEDGER_RESERVED && owner[0] == '\0');
        CHECK(commit_as(b, "old", "k2", 0, AB, 1, NULL) == DPB_OK);
        ledger_close_nosnapshot(b);
    }
    ledger_close_nosnapshot(a);
snap:
    memlog_free(&g);
    /* a snapshot of format 4 keeps the owner; rewritten as format 3 it has none */
    memlog_init(&g);
    a = on_log(&g);
    if (a == NULL)
        goto out;
    ledger_set_clock(a, fixed_clock, NULL); /* its times found and cut below */
    CHECK(reserve(a, "held", "owner-k1", AB, 2, 3600, NULL, NULL) == DPB_OK);
    ledger_close(a); /* writes the snapshot */
    CHECK(g.snap != NULL && g.snap_len > 16);
    ledger *c = on_log(&g);
    if (c) {
        CHECK(round_state(c, "held", NULL, owner) == LEDGER_RESERVED &&
              strcmp(owner, "owner-k1") == 0);
        CHECK(release_as(c, "held", "k2", 0) == DPB_EFORBIDDEN);
        ledger_close_nosnapshot(c);
    }
    long at = g.snap ? find_str(g.snap, g.snap_len, "owner-k1") : -1;
    CHECK(at > 0 && g.snap[0] == LEDGER_FORMAT);
    CHECK(memlog_snap_cut_times(&g, FIXED_MS) == 0); /* format 4 */
    if (at > 0) {
        memmove(g.snap + at, g.snap + at + 12, g.snap_len - (size_t)at - 12);
        g.snap_len -= 12; /* (formats 6 and 7, profiles and stuck clients, went with the times) */
        g.snap[0] = 3;
        ledger *d = on_log(&g);
        if (d) {
            CHECK(round_state(d, "held", NULL, owner) == LEDGER_RESERVED && owner[0] == '\0');
            CHECK(release_as(d, "held", "k2", 0) == DPB_OK);
            ledger_close_nosnapshot(d);
        }
    }
out:
    memlog_free(&g);
}

/* ---- merging a client's counts (linear: a hash once the lists are long) ---- */

/* lg_merge_counts against the nested scan it replaced, on lists short (scanned) and long
 * (hashed), overlapping in part: the same entries, in the same order (a's kept, b's new ones
 * appended in b's order), and lg_count_positions finds each. */
static void reserve_merge_counts_match_scan(void)
{
    uint64_t seed = 34;
    for (int trial = 0; trial < 40; trial++) {
        uint32_t na = (uint32_t)(tl_splitmix(&seed) % (trial < 20 ? 12 : 3000));
        uint32_t nb = (uint32_t)(tl_splitmix(&seed) % (trial < 20 ? 12 : 3000));
        lcount *a = malloc(((size_t)na + nb + 1) * sizeof *a), *b = malloc((nb + 1) * sizeof *b);
        lcount *want = malloc(((size_t)na + nb + 1) * sizeof *want);
        uint32_t *pos = malloc((nb + 1) * sizeof *pos);
        if (a == NULL || b == NULL || want == NULL || pos == NULL) {
            free(a), free(b), free(want), free(pos);
            CHECK(!"out of memory");
            return;
        }
        /* distinct events in each list: a takes even multiples of a stride, b a mix */
        for (uint32_t i = 0; i < na; i++)
            a[i] = (lcount){i * 7u + 3u, 1 + tl_splitmix(&seed) % 5};
        for (uint32_t i = 0; i < nb; i++)
            b[i] = (lcount){(i % 2 ? i * 7u + 3u : 100000u + i), 1 + tl_splitmix(&seed) % 5};
        memcpy(want, a, na * sizeof *a);
        uint32_t m = na;
        for (uint32_t i = 0; i < nb; i++) {
            uint32_t k = 0;
            while (k < m && want[k].ev != b[i].ev)
                k++;
            if (k < m)
                want[k].count += b[i].count;
            else
                want[m++] = b[i];
        }
        CHECK(lg_count_positions(a, na, b, nb, pos) == 0);
        for (uint32_t i = 0; i < nb; i++)
            CHECKF(pos[i] == UINT32_MAX ? (b[i].ev % 7 != 3 || b[i].ev >= 7u * na)
                                        : a[pos[i]].ev == b[i].ev,
                   "trial %d: b[%u] (event %u) at %u", trial, i, b[i].ev, pos[i]);
        uint32_t got = na;
        CHECK(lg_merge_counts(a, &got, b, nb) == 0);
        CHECKF(got == m && memcmp(a, want, m * sizeof *a) == 0, "trial %d: %u of %u entries", trial,
               got, m);
        free(a);
        free(b);
        free(want);
        free(pos);
    }
}

/* ---- large reservations: spends before the write lock ---- */

typedef struct {
    atomic_int stop;
    ledger *l;
    const char *const *ids;
    size_t n;
} churn_job;

/* One-step rounds of a few of the clients, over and over (a participant of a large
 * reservation changes while it is admitted before the lock). */
static void *churn_main(void *arg)
{
    churn_job *j = arg;
    for (int r = 0; !atomic_load(&j->stop); r++) {
        char rid[32];
        snprintf(rid, sizeof rid, "churn-%d", r);
        const char *two[2] = {j->ids[(size_t)r * 7 % j->n], j->ids[(size_t)r * 13 % j->n]};
        (void)round_g(j->l, rid, NULL, 3.0, two, 2, 0, NULL, NULL);
    }
    return NULL;
}

/* A large reservation, its release and a commit evaluate no client's spend under the write
 * lock (counted by ledger_locked_spends, not timed), nor free the undo entries they leave
 * there (ledger_locked_frees; on main each was freed under the lock, by the change or by the
 * next writer, whatever the change's size): the admissions, the honest statuses the
 * holds leave and the answer are computed before it, and the lock only checks that each
 * participant is as it was. Clients near their budget (so that holding or releasing changes
 * their honest status) with a history of the reserved event; the statuses afterwards are
 * those a replica computes from the log (ledger_compare), also while another thread charges
 * some of the participants meanwhile (those admitted again under the lock). On main every
 * participant's admission and two spends each of the reservation and of the release were
 * evaluated under the write lock. */
static void reserve_large_spends_before_the_lock(void)
{
    enum { N = 3000 };
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g);
    char(*names)[16] = malloc(N * sizeof *names);
    const char **ids = malloc(N * sizeof *ids);
    if (a == NULL || names == NULL || ids == NULL)
        goto out;
    uint64_t seed = 34;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "n%05d", i);
        ids[i] = names[i];
        ledger_client in, o;
        memset(&in, 0, sizeof in);
        snprintf(in.id, sizeof in.id, "%s", names[i]);
        in.epsilon = 3.0 + 6.0 * (double)(tl_splitmix(&seed) % 1000) / 1000.0;
        in.delta = 1e-5;
        int created;
        CHECK(ledger_put_client(a, &in, &created, &o, NULL) == DPB_OK);
    }
    /* a history of the reserved event G(2): some clients near their budget */
    for (int r = 0; r < 3; r++) {
        char rid[16];
        snprintf(rid, sizeof rid, "h%d", r);
        CHECK(round_g(a, rid, NULL, 2.0, ids, N, 0, NULL, NULL) == DPB_OK);
    }
    ledger_summary sm0, sm;
    ledger_get_summary(a, &sm0);
    uint64_t before = ledger_locked_spends(a), frees = ledger_locked_frees(a);
    size_t admitted = 0;
    CHECK(reserve(a, "big", NULL, ids, N, 3600, &admitted, NULL) == DPB_OK);
    CHECKF(ledger_locked_spends(a) == before, "%llu spends under the write lock (reserve)",
           (unsigned long long)(ledger_locked_spends(a) - before));
    CHECKF(admitted > N / 4 && admitted < N, "%zu admitted", admitted); /* not all */
    /* holding it leaves some with no room for one more round: exhausted (honest status) */
    ledger_get_summary(a, &sm);
    CHECKF(sm.exhausted > sm0.exhausted && sm.active > 0, "%zu exhausted (%zu before), %zu active",
           (size_t)sm.exhausted, (size_t)sm0.exhausted, (size_t)sm.active);
    before = ledger_locked_spends(a);
    CHECK(release_as(a, "big", NULL, 0) == DPB_OK);
    CHECKF(ledger_locked_spends(a) == before, "%llu spends under the write lock (release)",
           (unsigned long long)(ledger_locked_spends(a) - before));
    ledger_get_summary(a, &sm);
    CHECK(sm.exhausted == sm0.exhausted && sm.active == sm0.active);
    /* a commit: the reported clients are charged under the lock, the others not */
    CHECK(reserve(a, "big2", NULL, ids, N, 3600, &admitted, NULL) == DPB_OK);
    before = ledger_locked_spends(a);
    const char **rep = malloc(N * sizeof *rep);
    size_t nrep = 0;
    ledger_round_res rr;
    if (rep != NULL && ledger_get_round(a, "big2", &rr) == DPB_OK) {
        for (size_t i = 0; i < rr.n && nrep < 100; i++)
            if (rr.outcomes[i].admitted)
                rep[nrep++] = ids[i];
        ledger_round_res_free(&rr);
    }
    CHECK(nrep == 100 && commit_as(a, "big2", NULL, 0, rep, nrep, NULL) == DPB_OK);
    CHECKF(ledger_locked_spends(a) - before <= 2 * nrep,
           "%llu spends under the write lock "
           "(commit of %zu of %zu)",
           (unsigned long long)(ledger_locked_spends(a) - before), nrep, admitted);
    free(rep);
    /* the undo entries these changes left hold no memory (each records its change, not the
     * participant's arrays as they were), so none was freed under the write lock; a change
     * of one client whose entry holds memory (its old labels) still frees it there */
    CHECKF(ledger_locked_frees(a) == frees, "%llu undo entries freed under the write lock",
           (unsigned long long)(ledger_locked_frees(a) - frees));
    CHECK(reserve(a, "one", NULL, ids, 1, 3600, NULL, NULL) == DPB_OK);
    CHECK(release_as(a, "one", NULL, 0) == DPB_OK);
    CHECKF(ledger_locked_frees(a) == frees, "%llu undo entries of a reservation freed under it",
           (unsigned long long)(ledger_locked_frees(a) - frees));
    for (int k = 0; k < 3; k++) {
        ledger_client in, o;
        int created;
        CHECK(ledger_get_client(a, ids[0], &in) == DPB_OK);
        snprintf(in.labels, sizeof in.labels, "team=t%d\n", k);
        CHECK(ledger_put_client(a, &in, &created, &o, NULL) == DPB_OK && !created);
    }
    CHECKF(ledger_locked_frees(a) > frees, "%llu undo entries of a small change freed under it",
           (unsigned long long)(ledger_locked_frees(a) - frees));
    /* all or nothing: some cannot afford it, so nobody is admitted, nothing held */
    before = ledger_locked_spends(a);
    ledger_get_summary(a, &sm0);
    CHECK(round_g(a, "aon", NULL, -2.0, ids, N, 3600, &admitted, NULL) == DPB_OK && admitted == 0);
    ledger_get_summary(a, &sm);
    CHECK(ledger_locked_spends(a) == before && sm.exhausted == sm0.exhausted);
    /* the same while other rounds change participants meanwhile */
    churn_job j = {0, a, ids, N};
    pthread_t th;
    int started = pthread_create(&th, NULL, churn_main, &j) == 0;
    for (int k = 0; k < 4; k++) {
        char rid[16];
        snprintf(rid, sizeof rid, "big-c%d", k);
        CHECK(round_g(a, rid, NULL, k < 2 ? -2.0 : 2.0, ids, N, 3600, NULL, NULL) == DPB_OK);
        if (k % 2)
            CHECK(release_as(a, rid, NULL, 0) == DPB_OK);
    }
    atomic_store(&j.stop, 1);
    if (started)
        pthread_join(th, NULL);
    /* what a replica computes from the log under its lock: the same spends and statuses */
    ledger *b = on_log(&g);
    if (b != NULL) {
        char why[256];
        CHECKF(ledger_compare(a, b, why, sizeof why) == 0, "%s", why);
        ledger_close_nosnapshot(b);
    }
out:
    if (a != NULL)
        ledger_close_nosnapshot(a);
    free(ids);
    free(names);
    memlog_free(&g);
}

/* Reservation changes taken back (a shared store's sync fails: every pending record is void
 * and withdrawn) leave each client's held and charged counts exactly as the log has them. An
 * undo entry of a reservation change records the change (a count up or down, an entry added,
 * or removed from the middle of the client's held counts), not a copy of its arrays, so a
 * wrong undo shows here: 400 random steps over 6 clients and 3 events (reservations that hold
 * a client's second or third event, releases, commits of some of a reservation's clients,
 * one-step charges), about one in three with its sync failing; after each, a replica that
 * reads the log holds the same clients (ledger_compare: their events charged and held, with
 * their counts, spends and statuses) and rounds. */
static void reserve_withdrawn_changes_match_the_log(void)
{
    static const char *const C[] = {"w0", "w1", "w2", "w3", "w4", "w5"};
    static const double SIGMA[] = {20.0, 30.0, 50.0};
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g), *b = on_log(&g);
    char open[64][16];
    int nopen = 0, failed = 0, applied = 0, gone = 0;
    uint64_t seed = 3436;
    for (int step = 0; a != NULL && b != NULL && step < 400; step++) {
        int fail = tl_splitmix(&seed) % 3 == 0, op = (int)(tl_splitmix(&seed) % 4), k = -1;
        char rid[16];
        snprintf(rid, sizeof rid, "s%d", step);
        dpb_status st;
        if (op == 1 || op == 2)
            k = nopen > 0 ? (int)(tl_splitmix(&seed) % (uint64_t)nopen) : -1;
        if (k < 0 && (op == 1 || op == 2))
            op = 0;
        atomic_store(&g.fail_next, fail ? DPB_EUNAVAILABLE : 0);
        if (op == 0 || op == 3) { /* a reservation (op 0) or a one-step charge of a subset */
            const char *ids[6];
            size_t n = 0;
            for (int i = 0; i < 6; i++)
                if (tl_splitmix(&seed) % 2)
                    ids[n++] = C[i];
            if (n == 0)
                ids[n++] = C[tl_splitmix(&seed) % 6];
            double sigma = SIGMA[tl_splitmix(&seed) % 3];
            st = round_g(a, rid, NULL, sigma, ids, n, op == 0 ? 3600 : 0, NULL, NULL);
            if (st == DPB_OK && op == 0 && nopen < 64)
                snprintf(open[nopen++], sizeof open[0], "%s", rid);
        } else if (op == 1) {
            st = release_as(a, open[k], NULL, 0);
        } else {
            const char *rep[6];
            size_t n = 0;
            ledger_round_res rr;
            if (ledger_get_round(a, open[k], &rr) == DPB_OK) {
                for (size_t i = 0; i < rr.n; i++)
                    if (rr.outcomes[i].admitted && tl_splitmix(&seed) % 3 != 0)
                        for (int c = 0; c < 6; c++)
                            if (strcmp(C[c], rr.outcomes[i].id) == 0)
                                rep[n++] = C[c];
                ledger_round_res_free(&rr);
            }
            st = commit_as(a, open[k], NULL, 0, rep, n, NULL);
        }
        atomic_store(&g.fail_next, 0);
        if (k >= 0 && st == DPB_OK) { /* resolved: no longer open */
            memmove(open[k], open[k + 1], (size_t)(nopen - k - 1) * sizeof open[0]);
            nopen--;
            gone++;
        }
        failed += st != DPB_OK;
        applied += st == DPB_OK;
        char why[300] = "";
        CHECKF(ledger_compare(a, b, why, sizeof why) == 0, "step %d (op %d, %s): %s", step, op,
               dpb_strstatus(st), why);
        if (why[0] != '\0')
            break;
    }
    CHECKF(failed > 50 && applied > 150 && gone > 30, "%d failed, %d applied, %d resolved", failed,
           applied, gone);
    if (b != NULL)
        ledger_close_nosnapshot(b);
    if (a != NULL)
        ledger_close_nosnapshot(a);
    memlog_free(&g);
}

/* A large change lets readers in between its participants (lg_let_readers), never a
 * snapshot. Both are seen from a hook the ledger calls in each gap of its apply (the write
 * side given back, the writers' lock held). */
typedef struct {
    ledger *l;
    const char *id;
    atomic_int stop;
    atomic_long reads;
} gap_reader;

static void *gap_read_main(void *arg)
{
    gap_reader *r = arg;
    while (!atomic_load(&r->stop)) {
        ledger_client c;
        if (ledger_get_client(r->l, r->id, &c) == DPB_OK)
            atomic_fetch_add(&r->reads, 1);
    }
    return NULL;
}

typedef struct {
    ledger *l;
    gap_reader *r;
    int read_in_gap; /* the reader thread's reads went on in the gap */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go, done, in_gap; /* in_gap: the snapshot was taken within the gap */
    dpb_status st;
} gap_snap;

static void *gap_snap_main(void *arg)
{
    gap_snap *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->go)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    dpb_error err = {0};
    dpb_status st = lg_take_snapshot(g->l, &err);
    pthread_mutex_lock(&g->mu);
    g->st = st;
    g->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* In the first gap: the reader thread's reads go on (two more complete, within 5 s; none
 * expected on a shared store, whose reads catch up under the writers' lock first); then the
 * snapshot asked for, and 200 ms given to it (it waits for the end of the change instead, as
 * it must). */
static void gap_snap_hook(void *ctx)
{
    gap_snap *g = ctx;
    g->l->gap_hook = NULL; /* once */
    long before = atomic_load(&g->r->reads);
    for (int k = 0; k < 5000 && !g->l->shared && atomic_load(&g->r->reads) < before + 2; k++) {
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    g->read_in_gap = atomic_load(&g->r->reads) >= before + 2;
    pthread_mutex_lock(&g->mu);
    g->go = 1;
    pthread_cond_broadcast(&g->cv);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 200000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!g->done && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0)
        ;
    g->in_gap = g->done;
    pthread_mutex_unlock(&g->mu);
}

/* A reservation of 3 gaps' worth of clients on a (after a one-step round of them), with the
 * hook: the reader thread reads one of them throughout. Fills *gs. */
static void gap_run(ledger *a, const char *const *ids, size_t n, gap_snap *gs)
{
    CHECK(round_g(a, "before", NULL, 50.0, ids, n, 0, NULL, NULL) == DPB_OK);
    gap_reader r = {a, ids[n - 1], 0, 0};
    gs->l = a;
    gs->r = &r;
    pthread_t rt, st;
    int r_started = pthread_create(&rt, NULL, gap_read_main, &r) == 0;
    int s_started = pthread_create(&st, NULL, gap_snap_main, gs) == 0;
    pthread_rwlock_wrlock(&a->lock); /* the hook set with no change running */
    a->gap_hook = gap_snap_hook;
    a->gap_ctx = gs;
    pthread_rwlock_unlock(&a->lock);
    CHECK(round_g(a, "big", NULL, 50.0, ids, n, 3600, NULL, NULL) == DPB_OK);
    if (s_started)
        pthread_join(st, NULL);
    atomic_store(&r.stop, 1);
    if (r_started)
        pthread_join(rt, NULL);
    gs->r = NULL;
    CHECKF(gs->go && !gs->in_gap && gs->st == DPB_OK,
           "snapshot asked %d, taken within the gap %d, status %s", gs->go, gs->in_gap,
           dpb_strstatus(gs->st));
}

enum { GAP_N = 3 * LG_GAP_EVERY + 100 };

static const char **gap_ids(char (**names)[16])
{
    *names = malloc(GAP_N * sizeof **names);
    const char **ids = malloc(GAP_N * sizeof *ids);
    if (*names == NULL || ids == NULL) {
        free(ids);
        return NULL;
    }
    for (int i = 0; i < GAP_N; i++) {
        snprintf((*names)[i], sizeof(*names)[i], "g%05d", i);
        ids[i] = (*names)[i];
    }
    return ids;
}

/* Readers get in: on a ledger of its own store a client GET is answered in the middle of a
 * reservation of 3 gaps' worth of clients (on main it waited for the whole change: a
 * 100,000-client reservation held it about 100 ms). */
/* The round "big" as a reader sees it in a gap (on a ledger of its own store: a read does
 * not take the writers' lock): its state, its admitted count, its outcomes admitted and
 * reported. */
typedef struct {
    ledger *l;
    int seen, state;
    size_t admitted, counted, reported;
} gap_view;

static void gap_view_hook(void *ctx)
{
    gap_view *v = ctx;
    v->l->gap_hook = NULL; /* once */
    ledger_round_res rr;
    if (ledger_get_round(v->l, "big", &rr) != DPB_OK)
        return;
    v->seen = 1;
    v->state = (int)rr.state;
    v->admitted = rr.admitted;
    for (size_t i = 0; i < rr.n && rr.outcomes; i++) {
        v->counted += rr.outcomes[i].admitted;
        v->reported += rr.outcomes[i].reported;
    }
    ledger_round_res_free(&rr);
}

static void reserve_gaps_let_readers_in(void)
{
    char dir[64];
    if (tl_make_dir(dir, sizeof dir, "dpb_reserve_") != 0)
        return;
    char(*names)[16] = NULL;
    const char **ids = gap_ids(&names);
    ledger *a = ids ? on_dir(dir, 0) : NULL;
    if (a != NULL) {
        gap_snap gs = {0};
        pthread_mutex_init(&gs.mu, NULL);
        pthread_cond_init(&gs.cv, NULL);
        gap_run(a, ids, GAP_N, &gs);
        CHECK(gs.read_in_gap);
        /* the round as a reader sees it while a commit of it charges its clients: still
         * reserved, all its admissions counted, nothing reported yet */
        const char **rep = malloc(GAP_N * sizeof *rep);
        gap_view v = {a, 0, 0, 0, 0, 0};
        pthread_rwlock_wrlock(&a->lock);
        a->gap_hook = gap_view_hook;
        a->gap_ctx = &v;
        pthread_rwlock_unlock(&a->lock);
        size_t nrep = 0;
        for (size_t i = 0; rep != NULL && i < GAP_N; i += 2)
            rep[nrep++] = ids[i];
        CHECK(rep != NULL && commit_as(a, "big", NULL, 0, rep, nrep, NULL) == DPB_OK);
        free(rep);
        CHECKF(v.seen && v.state == LEDGER_RESERVED && v.admitted == GAP_N && v.counted == GAP_N &&
                   v.reported == 0,
               "seen %d, state %d, admitted %zu, counted %zu, reported %zu", v.seen, v.state,
               v.admitted, v.counted, v.reported);
        ledger_round_res rr;
        CHECK(ledger_get_round(a, "big", &rr) == DPB_OK && rr.state == LEDGER_COMMITTED &&
              rr.reported == nrep);
        if (rr.outcomes != NULL)
            ledger_round_res_free(&rr);
        ledger_close(a);
    }
    free(ids);
    free(names);
    tl_remove_dir(dir);
}

/* Never a snapshot: one asked for in the first gap (from another thread, as the snapshot
 * thread does) is taken only once the reservation is applied whole, so a replica recovered
 * from it (and the log after it) holds the same clients, their held counts too, as the
 * ledger that made it. Without the writers' lock in the snapshot it is taken in the gap,
 * half the clients held, and the replica differs. */
static void reserve_gaps_never_split_a_snapshot(void)
{
    memlog g;
    memlog_init(&g);
    g.keep_snaps = 1;
    char(*names)[16] = NULL;
    const char **ids = gap_ids(&names);
    ledger *a = ids ? on_log(&g) : NULL;
    if (a != NULL) {
        gap_snap gs = {0};
        pthread_mutex_init(&gs.mu, NULL);
        pthread_cond_init(&gs.cv, NULL);
        gap_run(a, ids, GAP_N, &gs);
        CHECKF(g.nsnaps == 1, "%zu snapshots", g.nsnaps);
        memlog h;
        if (g.nsnaps == 1 && memlog_clone_at(&g, 0, &h) == 0) {
            ledger *b = on_log(&h); /* that snapshot, then the log after it */
            if (b != NULL) {
                char why[256];
                CHECKF(ledger_compare(a, b, why, sizeof why) == 0, "%s", why);
                ledger_close_nosnapshot(b);
            }
            memlog_free(&h);
        }
        ledger_close_nosnapshot(a);
    }
    free(ids);
    free(names);
    memlog_free(&g);
}

const tl_test RESERVE_TESTS[] = {
    TL_T(reserve_large_spends_before_the_lock),
    TL_T(reserve_merge_counts_match_scan),
    TL_T(reserve_withdrawn_changes_match_the_log),
    TL_T(reserve_gaps_let_readers_in),
    TL_T(reserve_gaps_never_split_a_snapshot),
    TL_T(reserve_commit_list_checked_off_the_write_lock),
    TL_T(reserve_owner_matrix),
    TL_T(reserve_quota_per_owner),
    TL_T(reserve_owner_old_formats),
};
const size_t RESERVE_NTESTS = sizeof RESERVE_TESTS / sizeof RESERVE_TESTS[0];
