/* test_ledger.c - the ledger on the error path: a change whose log record is not durable is
 * never shown, replayed or kept (a failed fdatasync or write withdraws it, for every request
 * that shared the failed sync, and the ledger turns read-only), events interned by dry runs
 * and mixed-relation rounds are logged in replayable order, bulk puts are all or nothing,
 * and the snapshot: every byte checksummed (v2), v1 still read, and start-up refuses any
 * disagreement between snapshot and log (every bit of the header flipped, bytes of the body
 * flipped). Each test works in its own mkdtemp directory under /tmp and removes it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../core/ledger/crc32c.h"
#include "../../core/ledger/fs.h"
#include "../../core/ledger/ledger.h"
#include "../../core/ledger/snapshot.h"
#include "suites.h"

/* ---- a file system whose fdatasync and write can be broken at run time ---- */

typedef struct {
    atomic_int sync_fails;   /* 1: every fdatasync fails with EIO */
    atomic_long writes_left; /* >= 0: that many more writes succeed, then ENOSPC */
    atomic_int slow_sync;    /* 1: fdatasync sleeps 2 ms first (to form sync groups) */
} switch_ctx;

static switch_ctx the_switch;

static ssize_t sw_write(void *c, int fd, const void *b, size_t n)
{
    switch_ctx *s = c;
    if (atomic_load(&s->writes_left) >= 0 && atomic_fetch_sub(&s->writes_left, 1) <= 0) {
        atomic_store(&s->writes_left, 0);
        errno = ENOSPC;
        return -1;
    }
    return dpb_fs_posix()->write(NULL, fd, b, n);
}
static int sw_fdatasync(void *c, int fd)
{
    switch_ctx *s = c;
    (void)fd;
    if (atomic_load(&s->slow_sync)) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&s->sync_fails)) {
        errno = EIO;
        return -1;
    }
    return 0; /* the data reaches the page cache; the tests do not cut the power */
}
static int sw_fsync(void *c, int fd)
{
    (void)c;
    (void)fd;
    return 0;
}

/* The real file system (whose calls ignore ctx) with these write and syncs. */
static dpb_fs switch_fs;

static void switch_reset(void)
{
    switch_fs = *dpb_fs_posix();
    switch_fs.write = sw_write;
    switch_fs.fdatasync = sw_fdatasync;
    switch_fs.fsync = sw_fsync;
    switch_fs.ctx = &the_switch;
    atomic_store(&the_switch.sync_fails, 0);
    atomic_store(&the_switch.writes_left, -1);
    atomic_store(&the_switch.slow_sync, 0);
}

/* ---- helpers ---- */

static int make_dir(char *buf, size_t n)
{
    return tl_make_dir(buf, n, "dpb_ledger_");
}

static void remove_dir(const char *dir)
{
    tl_remove_dir(dir);
}

static ledger *open_ledger(const char *dir, const dpb_fs *fs, int default_budget,
                           uint64_t snapshot_every, dpb_error *err)
{
    ledger_options o = {dir, fs, default_budget, 10.0, 1e-5, snapshot_every, 0, 0, NULL, 0, 0, 0};
    ledger *l = NULL;
    memset(err, 0, sizeof *err);
    if (ledger_open(&o, &l, err) != DPB_OK)
        return NULL;
    return l;
}

/* A new directory (into dir) and a ledger on it over fs (the switch reset); NULL (after a
 * failed check, the directory removed) if either cannot be made. */
static ledger *fresh(char *dir, size_t n, const dpb_fs *fs, int default_budget)
{
    if (make_dir(dir, n) != 0)
        return NULL;
    switch_reset();
    dpb_error err;
    ledger *l = open_ledger(dir, fs, default_budget, 1000000, &err);
    CHECKF(l != NULL, "%s", err.detail);
    if (l == NULL)
        remove_dir(dir);
    return l;
}

static dp_event *gaussian(double s)
{
    dp_event *e = dp_event_new(DP_EV_GAUSSIAN);
    if (e != NULL)
        e->u.noise.noise_multiplier = s;
    return e;
}

static dpb_status put(ledger *l, const char *id, dp_relation rel)
{
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "%s", id);
    in.epsilon = 10.0;
    in.delta = 1e-5;
    in.relation = rel;
    int created;
    dpb_error err = {0};
    return ledger_put_client(l, &in, &created, &out, &err);
}

/* One round of event ev over ids; the body hash is that of the round id and sigma. */
static dpb_status round_of(ledger *l, const char *rid, double sigma, const char *const *ids,
                           size_t n, int dry, int *replayed)
{
    dp_event *ev = gaussian(sigma);
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.dry_run = dry;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    char key[200];
    snprintf(key, sizeof key, "%s|%.17g", rid, sigma);
    ledger_hash128(key, strlen(key), rq.body_hash);
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_round(l, &rq, &res, &err);
    if (replayed)
        *replayed = st == DPB_OK && res.replayed;
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    dp_event_free(ev);
    return st;
}

/* ledger_put_clients of two clients (a, b) with budget (eps, 1e-5); b in mode b_mode. */
static dpb_status put_two(ledger *l, const char *a, const char *b, double eps, ledger_mode b_mode)
{
    ledger_client batch[2];
    memset(batch, 0, sizeof batch);
    snprintf(batch[0].id, sizeof batch[0].id, "%s", a);
    snprintf(batch[1].id, sizeof batch[1].id, "%s", b);
    batch[0].epsilon = batch[1].epsilon = eps;
    batch[0].delta = batch[1].delta = 1e-5;
    batch[1].mode = b_mode;
    dpb_error err = {0};
    return ledger_put_clients(l, batch, 2, &err);
}

static uint64_t rounds_of(ledger *l, const char *id)
{
    ledger_client c;
    return ledger_get_client(l, id, &c) == DPB_OK ? c.rounds : UINT64_MAX;
}

static int round_exists(ledger *l, const char *rid)
{
    ledger_round_res r;
    if (ledger_get_round(l, rid, &r) != DPB_OK)
        return 0;
    ledger_round_res_free(&r);
    return 1;
}

/* ---- the honest status ---- */

/* A client whose last charged event no longer fits is exhausted (spent still below epsilon),
 * and stays so across a restart from the snapshot (format 2 keeps the last event) and from
 * the log alone. */
static void ledger_status_last_event(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, NULL, 0);
    if (l == NULL)
        return;
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "s");
    in.epsilon = 1.0; /* one Gaussian of sigma 5 is ~0.79 at 1e-5, two ~1.1 */
    in.delta = 1e-5;
    int created;
    dpb_error err = {0};
    CHECK(ledger_put_client(l, &in, &created, &out, &err) == DPB_OK);
    CHECK(out.status == LEDGER_ACTIVE);
    const char *ids[] = {"s"};
    CHECK(round_of(l, "s-r1", 5.0, ids, 1, 0, NULL) == DPB_OK);
    ledger_client c;
    CHECK(ledger_get_client(l, "s", &c) == DPB_OK);
    CHECK(c.spent < 1.0 && c.rounds == 1 && c.status == LEDGER_EXHAUSTED);
    ledger_summary sm;
    ledger_get_summary(l, &sm);
    CHECK(sm.exhausted == 1 && sm.active == 0);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0)
            ledger_close(l); /* a snapshot */
        else
            ledger_close_nosnapshot(l);
        l = open_ledger(dir, NULL, 0, 1000000, &err);
        CHECKF(l != NULL, "%s", err.detail);
        if (l == NULL)
            break;
        CHECK(ledger_get_client(l, "s", &c) == DPB_OK && c.status == LEDGER_EXHAUSTED);
        ledger_get_summary(l, &sm);
        CHECK(sm.exhausted == 1 && sm.active == (pass == 0 ? 0 : 1));
        if (pass == 0) {
            /* then, in the log only: a budget between the spends after two and three such
             * rounds (measured on a probe client), active, and a second charge: exhausted */
            in.epsilon = 100.0;
            snprintf(in.id, sizeof in.id, "probe");
            CHECK(ledger_put_client(l, &in, &created, &out, &err) == DPB_OK);
            const char *probe[] = {"probe"};
            CHECK(round_of(l, "p-r1", 5.0, probe, 1, 0, NULL) == DPB_OK);
            CHECK(round_of(l, "p-r2", 5.0, probe, 1, 0, NULL) == DPB_OK);
            ledger_client p2, p3;
            CHECK(ledger_get_client(l, "probe", &p2) == DPB_OK);
            CHECK(round_of(l, "p-r3", 5.0, probe, 1, 0, NULL) == DPB_OK);
            CHECK(ledger_get_client(l, "probe", &p3) == DPB_OK);
            snprintf(in.id, sizeof in.id, "s");
            in.epsilon = 0.5 * (p2.spent + p3.spent);
            CHECK(ledger_put_client(l, &in, &created, &out, &err) == DPB_OK);
            CHECK(out.status == LEDGER_ACTIVE);
            CHECK(round_of(l, "s-r2", 5.0, ids, 1, 0, NULL) == DPB_OK);
            CHECK(ledger_get_client(l, "s", &c) == DPB_OK);
            CHECK(c.rounds == 2 && c.spent < in.epsilon && c.status == LEDGER_EXHAUSTED);
        }
    }
    ledger_close_nosnapshot(l);
    remove_dir(dir);
}

/* ---- memory never ahead of the log ---- */

/* A round whose fdatasync fails is answered DPB_EIO and is gone: not readable, not
 * replayable, not charged; a retry is refused (read-only); a round durable before the
 * failure is still replayed; the summary says read-only; a restart agrees. */
static void ledger_failed_sync_withdraws(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
    if (l == NULL)
        return;
    dpb_error err;
    const char *ab[] = {"alice", "bob"}, *a[] = {"alice"};
    CHECK(put(l, "alice", DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put(l, "bob", DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(round_of(l, "r1", 3.0, ab, 2, 0, NULL) == DPB_OK);
    ledger_client before;
    CHECK(ledger_get_client(l, "alice", &before) == DPB_OK && before.rounds == 1);

    atomic_store(&the_switch.sync_fails, 1);
    CHECK(round_of(l, "r2", 2.0, a, 1, 0, NULL) == DPB_EIO);
    atomic_store(&the_switch.sync_fails, 0); /* the disk "recovers": still read-only */
    CHECK(!round_exists(l, "r2"));
    ledger_client after;
    CHECK(ledger_get_client(l, "alice", &after) == DPB_OK);
    CHECK(after.rounds == 1 && after.spent == before.spent && after.version == before.version);
    int replayed = 0;
    CHECK(round_of(l, "r2", 2.0, a, 1, 0, &replayed) == DPB_EREADONLY);
    CHECK(!round_exists(l, "r2"));
    CHECK(round_of(l, "r1", 3.0, ab, 2, 0, &replayed) == DPB_OK && replayed);
    CHECK(put(l, "carol", DP_REL_ADD_OR_REMOVE) == DPB_EREADONLY);
    ledger_client c;
    CHECK(ledger_get_client(l, "carol", &c) == DPB_ENOTFOUND);
    ledger_summary s;
    ledger_get_summary(l, &s);
    CHECK(s.read_only == 1 && s.rounds == 1 && s.clients == 2);
    CHECK(ledger_read_only(l));
    /* a dry run is still answered, from durable state */
    CHECK(round_of(l, "r3", 2.0, a, 1, 1, NULL) == DPB_OK);
    ledger_close(l);

    l = open_ledger(dir, NULL, 0, 1000000, &err);
    CHECKF(l != NULL, "%s", err.detail);
    if (l) {
        CHECK(rounds_of(l, "alice") == 1 && round_exists(l, "r1") && !round_exists(l, "r2"));
        ledger_get_summary(l, &s);
        CHECK(s.read_only == 0 && s.rounds == 1 && s.clients == 2);
        ledger_close(l);
    }
    switch_reset();
    remove_dir(dir);
}

/* A reservation of G(sigma) over ids with ttl seconds (the body hash: id and sigma). */
static dpb_status reserve_of(ledger *l, const char *rid, double sigma, const char *const *ids,
                             size_t n, uint64_t ttl)
{
    dp_event *ev = gaussian(sigma);
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    rq.reserve = 1;
    rq.ttl_seconds = ttl;
    char key[200];
    snprintf(key, sizeof key, "reserve|%s|%.17g", rid, sigma);
    ledger_hash128(key, strlen(key), rq.body_hash);
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_round(l, &rq, &res, &err);
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    dp_event_free(ev);
    return st;
}

static ledger_round_state state_of(ledger *l, const char *rid)
{
    ledger_round_res r;
    if (ledger_get_round(l, rid, &r) != DPB_OK)
        return (ledger_round_state)-1;
    ledger_round_state s = r.state;
    ledger_round_res_free(&r);
    return s;
}

/* A commit, a release and an expiry whose fdatasync fails are withdrawn whole: the round is
 * still reserved and holds the budget, no client was charged or released, in memory and
 * after a restart; the expiry sweep releases it once the ledger is back. */
static void ledger_failed_sync_withdraws_resolution(void)
{
    for (int kind = 0; kind < 3; kind++) {
        char dir[64];
        ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
        if (l == NULL)
            return;
        const char *ab[] = {"alice", "bob"};
        CHECK(put(l, "alice", DP_REL_ADD_OR_REMOVE) == DPB_OK);
        CHECK(put(l, "bob", DP_REL_ADD_OR_REMOVE) == DPB_OK);
        CHECK(reserve_of(l, "res", 3.0, ab, 2, 3600) == DPB_OK);
        ledger_client a0, b0;
        CHECK(ledger_get_client(l, "alice", &a0) == DPB_OK && a0.rounds == 0);
        CHECK(ledger_get_client(l, "bob", &b0) == DPB_OK);
        atomic_store(&the_switch.sync_fails, 1);
        ledger_round_res res;
        dpb_error err = {0};
        unsigned char h[16] = {1};
        const char *rep[] = {"alice"};
        if (kind == 0)
            CHECK(ledger_commit(l, "res", rep, 1, h, &res, &err) == DPB_EIO);
        else if (kind == 1)
            CHECK(ledger_release(l, "res", &res, &err) == DPB_EIO);
        else
            CHECK(ledger_expire(l, (uint64_t)time(NULL) + 7200) == 0);
        atomic_store(&the_switch.sync_fails, 0);
        CHECKF(state_of(l, "res") == LEDGER_RESERVED, "kind %d: state %d", kind,
               (int)state_of(l, "res"));
        ledger_client a1, b1;
        CHECK(ledger_get_client(l, "alice", &a1) == DPB_OK && a1.rounds == 0 &&
              a1.version == a0.version);
        CHECK(ledger_get_client(l, "bob", &b1) == DPB_OK && b1.version == b0.version);
        ledger_close(l);
        l = open_ledger(dir, NULL, 0, 1000000, &err);
        CHECKF(l != NULL, "%s", err.detail);
        if (l) {
            CHECK(state_of(l, "res") == LEDGER_RESERVED && rounds_of(l, "alice") == 0);
            /* the ledger works again: the sweep releases it (time moved past its ttl) */
            CHECK(ledger_expire(l, (uint64_t)time(NULL) + 7200) == 1);
            CHECK(state_of(l, "res") == LEDGER_EXPIRED);
            ledger_close(l);
        }
        switch_reset();
        remove_dir(dir);
    }
}

/* A large change (more participants than the ledger applies between two gaps for readers,
 * 2,048) has its records made durable before it is applied: when that sync fails the change
 * is withdrawn whole before anything of it is shown, and the ledger turns read-only, as for
 * a small one. A reservation of 3,000 clients whose sync fails; then, on another ledger, the
 * release of such a reservation. In memory and after a restart nothing of the failed change
 * is there. */
static void ledger_failed_sync_withdraws_large(void)
{
    enum { N = 3000 };
    char(*names)[16] = malloc(N * sizeof *names);
    const char **ids = malloc(N * sizeof *ids);
    ledger_client *in = calloc(N, sizeof *in);
    if (names == NULL || ids == NULL || in == NULL)
        goto out;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "L%05d", i);
        ids[i] = names[i];
        snprintf(in[i].id, sizeof in[i].id, "%s", names[i]);
        in[i].epsilon = 100.0;
        in[i].delta = 1e-5;
    }
    for (int kind = 0; kind < 2; kind++) {
        char dir[64];
        ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
        if (l == NULL)
            break;
        dpb_error err = {0};
        CHECKF(ledger_put_clients(l, in, N, &err) == DPB_OK, "%s", err.detail);
        if (kind == 1)
            CHECK(reserve_of(l, "big", 3.0, ids, N, 3600) == DPB_OK);
        ledger_client c0;
        CHECK(ledger_get_client(l, ids[N - 1], &c0) == DPB_OK);
        atomic_store(&the_switch.sync_fails, 1);
        if (kind == 0) {
            CHECK(reserve_of(l, "big", 3.0, ids, N, 3600) == DPB_EIO);
        } else {
            ledger_round_res res;
            CHECK(ledger_release(l, "big", &res, &err) == DPB_EIO);
        }
        atomic_store(&the_switch.sync_fails, 0);
        CHECK(ledger_read_only(l));
        ledger_client c1;
        CHECK(ledger_get_client(l, ids[N - 1], &c1) == DPB_OK && c1.version == c0.version);
        CHECK(kind == 0 ? !round_exists(l, "big") : state_of(l, "big") == LEDGER_RESERVED);
        ledger_close(l);
        l = open_ledger(dir, NULL, 0, 1000000, &err);
        CHECKF(l != NULL, "%s", err.detail);
        if (l) {
            CHECK(kind == 0 ? !round_exists(l, "big") : state_of(l, "big") == LEDGER_RESERVED);
            ledger_close(l);
        }
        switch_reset();
        remove_dir(dir);
    }
out:
    free(in);
    free(ids);
    free(names);
}

/* A write that fails in the middle of a round (after its new event and its new client were
 * logged and applied): all of it is withdrawn; so is a client update whose write fails. */
static void ledger_failed_write_withdraws(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, &switch_fs, 1);
    if (l == NULL)
        return;
    dpb_error err;
    const char *a[] = {"alice"}, *ad[] = {"alice", "dave"};
    CHECK(round_of(l, "r1", 3.0, a, 1, 0, NULL) == DPB_OK); /* creates alice */
    ledger_summary s0, s;
    ledger_get_summary(l, &s0);
    atomic_store(&the_switch.writes_left, 2); /* EVENT and CLIENT(dave) pass, ROUND fails */
    CHECK(round_of(l, "r2", 2.5, ad, 2, 0, NULL) == DPB_EIO);
    ledger_client c;
    CHECK(ledger_get_client(l, "dave", &c) == DPB_ENOTFOUND);
    CHECK(rounds_of(l, "alice") == 1 && !round_exists(l, "r2"));
    ledger_get_summary(l, &s);
    CHECK(s.read_only && s.clients == s0.clients && s.rounds == s0.rounds &&
          s.version == s0.version && s.active == s0.active);
    ledger_close(l);
    switch_reset();
    l = open_ledger(dir, NULL, 1, 1000000, &err);
    CHECKF(l != NULL, "%s", err.detail);
    if (l) {
        CHECK(ledger_get_client(l, "dave", &c) == DPB_ENOTFOUND && rounds_of(l, "alice") == 1);
        /* the event's index is free again: a new round with it logs it and replays */
        CHECK(round_of(l, "r2", 2.5, ad, 2, 0, NULL) == DPB_OK);
        ledger_close_nosnapshot(l);
        l = open_ledger(dir, NULL, 1, 1000000, &err);
        CHECKF(l != NULL, "%s", err.detail);
        if (l) {
            CHECK(rounds_of(l, "dave") == 1 && rounds_of(l, "alice") == 2);
            ledger_close(l);
        }
    }
    /* a client update whose write fails: the old budget stays */
    l = open_ledger(dir, &switch_fs, 1, 1000000, &err);
    if (l) {
        ledger_client in, out;
        memset(&in, 0, sizeof in);
        snprintf(in.id, sizeof in.id, "alice");
        in.epsilon = 99.0;
        in.delta = 1e-6;
        int created;
        atomic_store(&the_switch.sync_fails, 1);
        CHECK(ledger_put_client(l, &in, &created, &out, &err) == DPB_EIO);
        CHECK(ledger_get_client(l, "alice", &c) == DPB_OK && c.epsilon == 10.0);
        ledger_close(l);
    }
    switch_reset();
    remove_dir(dir);
}

typedef struct {
    ledger *l;
    int t;
    int acked[64];
    int refused[64];
    int n;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    char id[16], rid[32];
    snprintf(id, sizeof id, "c%d", w->t);
    const char *ids[] = {id};
    for (int i = 0; i < 64; i++) {
        snprintf(rid, sizeof rid, "t%d-%d", w->t, i);
        dpb_status st = round_of(w->l, rid, 20.0, ids, 1, 0, NULL);
        w->acked[i] = st == DPB_OK;
        w->refused[i] = st == DPB_EIO || st == DPB_EREADONLY;
        w->n = i + 1;
        if (st != DPB_OK)
            break;
    }
    return NULL;
}

/* Eight threads share group commits; the sync fails mid-way: every request that shared it
 * is withdrawn, every acknowledged one stays, in memory and after a restart. */
static void ledger_failed_group_commit(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, &switch_fs, 1);
    if (l == NULL)
        return;
    dpb_error err;
    atomic_store(&the_switch.slow_sync, 1);
    worker w[8];
    pthread_t th[8];
    for (int t = 0; t < 8; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].l = l;
        w[t].t = t;
        pthread_create(&th[t], NULL, work, &w[t]);
    }
    struct timespec ts = {0, 30000000};
    nanosleep(&ts, NULL);
    atomic_store(&the_switch.sync_fails, 1);
    for (int t = 0; t < 8; t++)
        pthread_join(th[t], NULL);
    atomic_store(&the_switch.sync_fails, 0);
    uint64_t acked_total = 0;
    int withdrawn_eio = 0;
    for (int pass = 0; pass < 2 && l != NULL; pass++) {
        for (int t = 0; t < 8; t++) {
            char id[16], rid[32];
            snprintf(id, sizeof id, "c%d", t);
            uint64_t acked = 0;
            for (int i = 0; i < w[t].n; i++) {
                snprintf(rid, sizeof rid, "t%d-%d", t, i);
                CHECKF(round_exists(l, rid) == w[t].acked[i], "pass %d round %s acked %d", pass,
                       rid, w[t].acked[i]);
                CHECK(w[t].acked[i] || w[t].refused[i]);
                acked += (uint64_t)w[t].acked[i];
            }
            uint64_t r = rounds_of(l, id);
            CHECKF(r == acked || (acked == 0 && r == UINT64_MAX),
                   "pass %d %s: %llu rounds, %llu acked", pass, id, (unsigned long long)r,
                   (unsigned long long)acked);
            if (pass == 0) {
                acked_total += acked;
                withdrawn_eio += !w[t].acked[w[t].n - 1];
            }
        }
        ledger_summary s;
        ledger_get_summary(l, &s);
        CHECK(s.rounds == acked_total);
        ledger_close(l);
        l = pass == 0 ? open_ledger(dir, NULL, 1, 1000000, &err) : NULL;
        CHECKF(pass == 1 || l != NULL, "%s", err.detail);
    }
    CHECK(withdrawn_eio == 8);
    switch_reset();
    remove_dir(dir);
}

/* Close l without a snapshot (recovery then replays the log alone) and open dir again. */
static ledger *restart(ledger *l, const char *dir)
{
    dpb_error err;
    ledger_close_nosnapshot(l);
    l = open_ledger(dir, NULL, 0, 1000000, &err);
    CHECKF(l != NULL, "restart: %s", err.detail);
    return l;
}

/* A dry run with a new event, then a real round with it, then a round with a new event for
 * clients of both relations (replace_one first): all replay after a restart. */
static void ledger_events_logged_in_order(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, NULL, 0);
    if (l == NULL)
        return;
    const char *a[] = {"alice"}, *ra[] = {"rita", "alice"};
    CHECK(put(l, "alice", DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put(l, "rita", DP_REL_REPLACE) == DPB_OK);
    CHECK(round_of(l, "dry", 4.0, a, 1, 1, NULL) == DPB_OK);
    CHECK(round_of(l, "r1", 4.0, a, 1, 0, NULL) == DPB_OK);
    CHECK(round_of(l, "r2", 5.0, ra, 2, 0, NULL) == DPB_OK);
    l = restart(l, dir);
    if (l) {
        CHECK(rounds_of(l, "alice") == 2 && rounds_of(l, "rita") == 1);
        CHECK(!round_exists(l, "dry"));
        ledger_close(l);
    }
    remove_dir(dir);
}

/* ledger_put_clients is all or nothing: a conflicting entry leaves no earlier entry behind,
 * in memory or in the log. */
static void ledger_put_clients_all_or_none(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, NULL, 0);
    if (l == NULL)
        return;
    const char *a[] = {"alice"};
    CHECK(put(l, "alice", DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(round_of(l, "r1", 4.0, a, 1, 0, NULL) == DPB_OK);
    /* alice was charged: her mode cannot change */
    CHECK(put_two(l, "xavier", "alice", 1.0, LEDGER_PLD) == DPB_ECONFLICT);
    ledger_client c;
    CHECK(ledger_get_client(l, "xavier", &c) == DPB_ENOTFOUND);
    CHECK(put(l, "yves", DP_REL_ADD_OR_REMOVE) == DPB_OK);
    l = restart(l, dir);
    if (l) {
        CHECK(ledger_get_client(l, "xavier", &c) == DPB_ENOTFOUND);
        CHECK(ledger_get_client(l, "yves", &c) == DPB_OK);
        ledger_close(l);
    }
    remove_dir(dir);
}

/* ---- every write and every sync failing in turn (the fault-injecting fs) ---- */

#define SWEEP_IDS 8
static const char *const sweep_ids[SWEEP_IDS] = {"ann", "ben", "cat", "dan",
                                                 "eve", "fay", "gus", "hal"};

typedef struct {
    int found;
    ledger_client c;
} seen_client;

/* What the ledger shows of the sweep's clients and rounds. */
static void observe(ledger *l, seen_client cl[SWEEP_IDS], int rd[8])
{
    for (int i = 0; i < SWEEP_IDS; i++)
        cl[i].found = ledger_get_client(l, sweep_ids[i], &cl[i].c) == DPB_OK;
    for (int i = 0; i < 8; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "s%d", i);
        rd[i] = round_exists(l, rid);
    }
}

/* A fixed script of changes (clients, rounds creating clients, mixed relations, a dry run,
 * a bulk put); the k-th call of kind op fails (sticky), for every k until none fails. After
 * each run: what was acknowledged is shown, what was refused is not, and memory equals
 * what a restart recovers. */
static void ledger_fault_sweep(void)
{
    static const struct {
        dpb_fs_op op;
        int err;
        unsigned flags;
    } kinds[] = {{DPB_FS_FDATASYNC, EIO, DPB_FS_FAULT_STICKY},
                 {DPB_FS_WRITE, ENOSPC, DPB_FS_FAULT_STICKY},
                 {DPB_FS_WRITE, ENOSPC, DPB_FS_FAULT_SHORT | DPB_FS_FAULT_STICKY}};
    char dir[64];
    for (size_t kind = 0; kind < sizeof kinds / sizeof kinds[0]; kind++) {
        int fired_last = 1;
        for (long k = 0; k < 64 && fired_last; k++) {
            if (make_dir(dir, sizeof dir) != 0)
                return;
            switch_reset(); /* inner fs: the real one, without the cost of syncs */
            dpb_fs_fault *f =
                dpb_fs_fault_new(&switch_fs, kinds[kind].op, k, kinds[kind].err, kinds[kind].flags);
            dpb_error err;
            ledger *l = f ? open_ledger(dir, dpb_fs_fault_fs(f), 1, 1000000, &err) : NULL;
            CHECKF(l != NULL, "open: %s", f ? err.detail : "no fault fs");
            if (l == NULL) {
                dpb_fs_fault_free(f);
                remove_dir(dir);
                return;
            }
            int acked[8] = {0};
            const char *r0[] = {"ann", "ben"}, *r1[] = {"ann", "cat", "dan"},
                       *r2[] = {"eve", "ann"}, *r3[] = {"fay", "ben", "gus"};
            put(l, "ann", DP_REL_ADD_OR_REMOVE);
            put(l, "eve", DP_REL_REPLACE);
            acked[0] = round_of(l, "s0", 9.0, r0, 2, 0, NULL) == DPB_OK;
            round_of(l, "dry", 8.0, r1, 3, 1, NULL);
            acked[1] = round_of(l, "s1", 8.0, r1, 3, 0, NULL) == DPB_OK;
            acked[2] = round_of(l, "s2", 7.0, r2, 2, 0, NULL) == DPB_OK;
            int bulk = put_two(l, "hal", "ben", 50.0, LEDGER_RDP) == DPB_OK;
            acked[3] = round_of(l, "s3", 9.0, r3, 3, 0, NULL) == DPB_OK;
            acked[4] = round_of(l, "s1", 8.0, r1, 3, 0, NULL) == DPB_OK; /* a replay */
            fired_last = dpb_fs_fault_fired(f) > 0;
            seen_client mem[SWEEP_IDS], disk[SWEEP_IDS];
            int mrd[8], drd[8];
            observe(l, mem, mrd);
            for (int i = 0; i < 4; i++)
                CHECKF(mrd[i] == acked[i], "op %d k %ld: round s%d shown %d, acked %d",
                       (int)kinds[kind].op, k, i, mrd[i], acked[i]);
            CHECKF(acked[4] == acked[1], "op %d k %ld: replay of s1 %d, s1 acked %d",
                   (int)kinds[kind].op, k, acked[4], acked[1]);
            CHECKF(!bulk || (mem[7].found && mem[7].c.epsilon == 50.0), "op %d k %ld: bulk",
                   (int)kinds[kind].op, k);
            CHECKF(bulk || !mem[7].found, "op %d k %ld: refused bulk put shows hal",
                   (int)kinds[kind].op, k);
            ledger_close(l);
            dpb_fs_fault_free(f);
            l = open_ledger(dir, NULL, 1, 1000000, &err);
            CHECKF(l != NULL, "op %d k %ld: restart: %s", (int)kinds[kind].op, k, err.detail);
            if (l) {
                observe(l, disk, drd);
                for (int i = 0; i < 8; i++)
                    CHECKF(drd[i] == mrd[i], "op %d k %ld: round s%d %d in memory, %d on disk",
                           (int)kinds[kind].op, k, i, mrd[i], drd[i]);
                for (int i = 0; i < SWEEP_IDS; i++) {
                    int same = mem[i].found == disk[i].found &&
                               (!mem[i].found || (mem[i].c.rounds == disk[i].c.rounds &&
                                                  mem[i].c.spent == disk[i].c.spent &&
                                                  mem[i].c.epsilon == disk[i].c.epsilon &&
                                                  mem[i].c.relation == disk[i].c.relation));
                    CHECKF(same, "op %d k %ld: client %s differs between memory and disk",
                           (int)kinds[kind].op, k, sweep_ids[i]);
                }
                ledger_close(l);
            }
            remove_dir(dir);
        }
        CHECKF(!fired_last, "op %d: the script was not run to the end without a fault",
               (int)kinds[kind].op);
    }
}

/* ---- snapshot and log: every byte checked, any disagreement refused ---- */

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(sz > 0 ? (size_t)sz : 1);
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

/* Write b over path in place (same size: no truncation, which makes ext4 flush on close). */
static int spit(const char *path, const unsigned char *b, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0)
        return -1;
    int ok = pwrite(fd, b, n, 0) == (ssize_t)n && ftruncate(fd, (off_t)n) == 0;
    return close(fd) == 0 && ok ? 0 : -1;
}

#define FLIP_ROUNDS 20

/* dir holds a snapshot (rounds f0..f9) and a log after it (f10..f19). */
static int build_flip_dir(const char *dir)
{
    dpb_error err;
    switch_reset();
    ledger *l = open_ledger(dir, &switch_fs, 0, 1000000, &err);
    if (l == NULL)
        return -1;
    const char *ids[] = {"alice", "bob", "carol"};
    put(l, "alice", DP_REL_ADD_OR_REMOVE);
    put(l, "bob", DP_REL_REPLACE);
    put(l, "carol", DP_REL_ADD_OR_REMOVE);
    char rid[16];
    for (int i = 0; i < FLIP_ROUNDS / 2; i++) {
        snprintf(rid, sizeof rid, "f%d", i);
        round_of(l, rid, 30.0 + i % 3, ids, 1 + (size_t)(i % 3), 0, NULL);
    }
    ledger_close(l); /* final snapshot, log emptied */
    l = open_ledger(dir, &switch_fs, 0, 1000000, &err);
    if (l == NULL)
        return -1;
    for (int i = FLIP_ROUNDS / 2; i < FLIP_ROUNDS; i++) {
        snprintf(rid, sizeof rid, "f%d", i);
        round_of(l, rid, 30.0 + i % 3, ids, 1 + (size_t)(i % 3), 0, NULL);
    }
    ledger_close_nosnapshot(l);
    return 0;
}

/* Start-up on dir: 1 if it recovered every round f0..f19 with the right charges, 0 if it
 * refused naming a file and a byte offset, -1 (and a failed check) otherwise. */
static int recover_all_or_refuse(const char *dir, const char *what, size_t at)
{
    dpb_error err;
    ledger *l = open_ledger(dir, &switch_fs, 0, 1000000, &err);
    if (l == NULL) {
        int named =
            err.status == DPB_ECORRUPT && strstr(err.detail, dir) != NULL &&
            (strstr(err.detail, "/snapshot") != NULL || strstr(err.detail, "/wal.log") != NULL) &&
            strstr(err.detail, "offset") != NULL;
        CHECKF(named, "%s %zu: refused without naming the file and offset: %s", what, at,
               err.detail);
        return named ? 0 : -1;
    }
    int ok = 1;
    char rid[16];
    for (int i = 0; i < FLIP_ROUNDS; i++) {
        snprintf(rid, sizeof rid, "f%d", i);
        ok &= round_exists(l, rid);
    }
    ok &= rounds_of(l, "alice") == FLIP_ROUNDS && rounds_of(l, "bob") == 13 &&
          rounds_of(l, "carol") == 6;
    ledger_summary s;
    ledger_get_summary(l, &s);
    ok &= s.rounds == FLIP_ROUNDS;
    ledger_close_nosnapshot(l);
    CHECKF(ok, "%s %zu: started but lost or changed acknowledged rounds", what, at);
    return ok ? 1 : -1;
}

/* Rewrite a format 2 snapshot as format 1 (payload-only checksum, unchecked seq). */
static void to_v1(unsigned char *b, size_t n)
{
    memcpy(b, "DPBSNAP1", 8);
    b[8] = 1;
    uint32_t crc = dpb_crc32c(0, b + SNAPSHOT_HEADER_BYTES, n - SNAPSHOT_HEADER_BYTES);
    for (int i = 0; i < 4; i++)
        b[28 + i] = (unsigned char)(crc >> (8 * i));
}

/* Every bit of the snapshot header, in both formats, and a bit of every byte of its body:
 * start-up recovers everything or refuses naming the file and offset, never drops rounds
 * (before: a flipped seq bit made start-up skip or cut log records). */
static void ledger_snapshot_bit_flips(void)
{
    char dir[64], snap[96], wal[96];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    snprintf(snap, sizeof snap, "%s/snapshot", dir);
    snprintf(wal, sizeof wal, "%s/wal.log", dir);
    size_t sn = 0, wn = 0;
    unsigned char *s0 = NULL, *w0 = NULL, *b = NULL;
    CHECK(build_flip_dir(dir) == 0);
    s0 = slurp(snap, &sn);
    w0 = slurp(wal, &wn);
    CHECK(s0 != NULL && w0 != NULL && sn > SNAPSHOT_HEADER_BYTES && wn > 0);
    if (s0 == NULL || w0 == NULL || sn <= SNAPSHOT_HEADER_BYTES)
        goto out;
    CHECK(memcmp(s0, "DPBSNAP2", 8) == 0);
    CHECK(recover_all_or_refuse(dir, "intact", 0) == 1);
    b = malloc(sn);
    if (b == NULL)
        goto out;
    for (int v = 2; v >= 1; v--) {
        unsigned char *base = malloc(sn);
        if (base == NULL)
            break;
        memcpy(base, s0, sn);
        if (v == 1)
            to_v1(base, sn);
        memcpy(b, base, sn);
        CHECK(spit(snap, b, sn) == 0 && spit(wal, w0, wn) == 0);
        CHECK(recover_all_or_refuse(dir, v == 1 ? "v1 intact" : "v2 intact", 0) == 1);
        int refused = 0;
        for (size_t bit = 0; bit < 8 * SNAPSHOT_HEADER_BYTES; bit++) {
            memcpy(b, base, sn);
            b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
            if (spit(snap, b, sn) != 0 || spit(wal, w0, wn) != 0)
                break;
            refused +=
                recover_all_or_refuse(dir, v == 1 ? "v1 header bit" : "v2 header bit", bit) == 0;
        }
        if (v == 2) /* every byte is checksummed: every flip is seen */
            CHECKF(refused == 8 * SNAPSHOT_HEADER_BYTES, "v2: %d header flips refused", refused);
        for (size_t at = SNAPSHOT_HEADER_BYTES; at < sn; at++) {
            memcpy(b, base, sn);
            b[at] ^= (unsigned char)(1u << (at % 8));
            if (spit(snap, b, sn) != 0 || spit(wal, w0, wn) != 0)
                break;
            CHECKF(recover_all_or_refuse(dir, "body byte", at) == 0,
                   "format %d: body byte %zu flipped and accepted", v, at);
        }
        free(base);
    }
out:
    free(s0);
    free(w0);
    free(b);
    switch_reset();
    remove_dir(dir);
}

/* A round stored under the hash of an earlier version (numbers as spelled) is replayed for a
 * request whose new hash differs but whose legacy hash matches; without a matching legacy
 * hash the same id with another body is still a conflict. */
static void ledger_legacy_hash_replays(void)
{
    char dir[256];
    ledger *l = fresh(dir, sizeof dir, NULL, 1);
    CHECK(l != NULL);
    if (l == NULL)
        return;
    const char *ids[] = {"ann"};
    int replayed = 0;
    CHECK(round_of(l, "r-old", 2.0, ids, 1, 0, &replayed) == DPB_OK && !replayed);
    dp_event *ev = gaussian(2.0);
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", "r-old");
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.event = ev;
    rq.participants = ids;
    rq.n = 1;
    const char *newkey = "canonical spelling";
    ledger_hash128(newkey, strlen(newkey), rq.body_hash);
    ledger_round_res res;
    dpb_error err = {0};
    CHECK(ledger_round(l, &rq, &res, &err) == DPB_ECONFLICT); /* no legacy hash given */
    char oldkey[200];
    snprintf(oldkey, sizeof oldkey, "%s|%.17g", "r-old", 2.0); /* what round_of stored */
    ledger_hash128(oldkey, strlen(oldkey), rq.legacy_hash);
    dpb_error err2 = {0};
    dpb_status st = ledger_round(l, &rq, &res, &err2);
    CHECK(st == DPB_OK && res.replayed);
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    CHECK(rounds_of(l, "ann") == 1);
    const char *other = "another body";
    ledger_hash128(other, strlen(other), rq.legacy_hash);
    dpb_error err3 = {0};
    CHECK(ledger_round(l, &rq, &res, &err3) == DPB_ECONFLICT);
    dp_event_free(ev);
    ledger_close(l);
    remove_dir(dir);
}

/* ---- privacy filters (docs/FILTERS.md) ---- */

#include "../../core/dp/account.h"
#include "../../core/dp/rdp.h"
#include "ref_filters.h"

static dpb_status put_mode(ledger *l, const char *id, double eps, double delta, ledger_mode m,
                           dp_relation rel)
{
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "%s", id);
    in.epsilon = eps;
    in.delta = delta;
    in.mode = m;
    in.relation = rel;
    int created;
    dpb_error err = {0};
    return ledger_put_client(l, &in, &created, &out, &err);
}

/* One admit_eligible round of ev (borrowed) over ids; the answer in *res (caller frees). */
static dpb_status charge(ledger *l, const char *rid, const dp_event *ev, const char *const *ids,
                         size_t n, int already_ran, ledger_round_res *res)
{
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.already_ran = already_ran;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    dpb_error err = {0};
    return ledger_round(l, &rq, res, &err);
}

static dp_event *sampled_steps(double q, double sigma, uint64_t steps)
{
    dp_event *sc = dp_event_new(DP_EV_SELF_COMPOSED), *ps = dp_event_new(DP_EV_POISSON_SAMPLED);
    if (sc == NULL || ps == NULL) {
        dp_event_free(sc);
        dp_event_free(ps);
        return NULL;
    }
    ps->u.sampled.sampling_probability = q;
    ps->u.sampled.event = gaussian(sigma);
    sc->u.self.event = ps;
    sc->u.self.count = steps;
    return sc;
}

static const ledger_outcome *outcome(const ledger_round_res *r, const char *id)
{
    for (size_t i = 0; r->outcomes && i < r->n; i++)
        if (strcmp(r->outcomes[i].id, id) == 0)
            return &r->outcomes[i];
    return NULL;
}

/* The rdp_filter's orders are committed in advance and are default orders (their RDP is the
 * one the ledger keeps). */
static void filter_orders_committed(void)
{
    for (size_t i = 0; i < LEDGER_FILTER_NORDERS; i++)
        CHECKF(RDP_DEFAULT_ORDERS[LEDGER_FILTER_ORDER_INDEX[i]] == LEDGER_FILTER_ORDERS[i],
               "order %zu", i);
    ledger_mode m;
    const char *names[] = {"rdp", "pld", "rdp_filter", "gdp_filter"};
    for (int i = 0; i < 4; i++)
        CHECK(ledger_mode_parse(names[i], &m) == 0 && (int)m == i &&
              strcmp(ledger_mode_name(m), names[i]) == 0);
    CHECK(ledger_mode_parse("filter", &m) != 0);
}

/* Unsampled Gaussians at a fixed sigma: the rdp_filter, fixed-sequence rdp and the gdp_filter
 * admit exactly the rounds mpmath computes (tests/ref/gen_ref_filters.py), then halt. */
static void filter_halts_at_references(void)
{
    size_t ncase = sizeof REF_FILTER_CASES / sizeof REF_FILTER_CASES[0];
    for (size_t k = 0; k < ncase; k++) {
        const ref_filter_case *c = &REF_FILTER_CASES[k];
        char dir[64];
        ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
        if (l == NULL)
            return;
        dp_relation rel = c->replace ? DP_REL_REPLACE : DP_REL_ADD_OR_REMOVE;
        const char *ids[] = {"f", "r", "g"};
        const ledger_mode modes[] = {LEDGER_RDP_FILTER, LEDGER_RDP, LEDGER_GDP_FILTER};
        const long want[] = {c->rdp_filter, c->rdp_fixed, c->gdp_filter};
        for (int i = 0; i < 3; i++)
            CHECK(put_mode(l, ids[i], c->eps, c->delta, modes[i], rel) == DPB_OK);
        dp_event *ev = gaussian(c->sigma);
        long limit = c->gdp_filter + 3; /* the gdp_filter admits the most */
        for (long t = 0; t < limit; t++) {
            char rid[32];
            snprintf(rid, sizeof rid, "r%ld", t);
            ledger_round_res res;
            if (charge(l, rid, ev, ids, 3, 0, &res) != DPB_OK) {
                CHECKF(0, "case %zu round %ld failed", k, t);
                break;
            }
            size_t adm = res.admitted;
            for (int i = 0; i < 3; i++) {
                const ledger_outcome *o = outcome(&res, ids[i]);
                CHECK(o != NULL && o->mode == (int)modes[i]);
                if (o && o->admitted)
                    CHECK(o->guarantee ==
                          (i == 1 ? LEDGER_FIXED_SEQUENCE : LEDGER_ADAPTIVE_FILTER));
                else if (o)
                    CHECK(o->reason == LEDGER_OVER_BUDGET);
            }
            ledger_round_res_free(&res);
            if (adm == 0)
                break;
        }
        dp_event_free(ev);
        for (int i = 0; i < 3; i++) {
            ledger_client cl;
            CHECK(ledger_get_client(l, ids[i], &cl) == DPB_OK);
            CHECKF((long)cl.rounds == want[i],
                   "sigma %g eps %g delta %g %s: %llu rounds, mpmath says %ld", c->sigma, c->eps,
                   c->delta, ids[i], (unsigned long long)cl.rounds, want[i]);
            CHECK(cl.spent <= c->eps);
            CHECK(cl.guarantee == (i == 1 ? LEDGER_FIXED_SEQUENCE : LEDGER_ADAPTIVE_FILTER));
        }
        ledger_close(l);
        remove_dir(dir);
    }
}

/* Properties over a DP-SGD schedule (rounds of 50 Poisson-sampled steps) and a mixed sequence:
 * a charge never lowers the spend; the halt point never decreases as the budget grows; with
 * the events fixed, the rdp_filter admits no more rounds than fixed-sequence rdp. */
static void filter_properties(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
    if (l == NULL)
        return;
    static const double eps[] = {0.25, 0.5, 1, 1.5, 2, 3, 4};
    enum { NE = sizeof eps / sizeof eps[0] };
    char names[2 * NE][16];
    const char *ids[2 * NE];
    for (int i = 0; i < 2 * NE; i++) {
        snprintf(names[i], sizeof names[i], "%s%d", i < NE ? "f" : "r", i % NE);
        ids[i] = names[i];
        CHECK(put_mode(l, ids[i], eps[i % NE], 1e-5, i < NE ? LEDGER_RDP_FILTER : LEDGER_RDP,
                       DP_REL_ADD_OR_REMOVE) == DPB_OK);
    }
    dp_event *ev = sampled_steps(0.01, 1.0, 50);
    for (int t = 0; t < 400; t++) {
        char rid[32];
        snprintf(rid, sizeof rid, "p%d", t);
        ledger_round_res res;
        if (charge(l, rid, ev, ids, 2 * NE, 0, &res) != DPB_OK)
            break;
        for (size_t i = 0; i < res.n; i++)
            if (res.outcomes[i].admitted)
                CHECK(res.outcomes[i].spent_after >= res.outcomes[i].spent_before);
        size_t adm = res.admitted;
        ledger_round_res_free(&res);
        if (adm == 0)
            break;
    }
    dp_event_free(ev);
    uint64_t prev_f = 0, prev_r = 0;
    for (int i = 0; i < NE; i++) {
        uint64_t f = rounds_of(l, ids[i]), r = rounds_of(l, ids[NE + i]);
        CHECKF(f <= r, "eps %g: rdp_filter %llu > rdp %llu", eps[i], (unsigned long long)f,
               (unsigned long long)r);
        CHECKF(f >= prev_f && r >= prev_r, "eps %g: halt point decreased", eps[i]);
        prev_f = f;
        prev_r = r;
    }
    CHECK(prev_f > 0);
    /* a mixed sequence: never a lower spend after a charge, for either filter */
    CHECK(put_mode(l, "mg", 3.0, 1e-5, LEDGER_GDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put_mode(l, "mf", 3.0, 1e-5, LEDGER_RDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    const char *mix[] = {"mg", "mf"};
    static const double sig[] = {3, 10, 0, 7, 25, 4};
    for (int t = 0; t < 60; t++) {
        double s = sig[t % 6];
        dp_event *e = s > 0 ? gaussian(s) : dp_event_new(DP_EV_NO_OP);
        char rid[32];
        snprintf(rid, sizeof rid, "m%d", t);
        ledger_client before[2], after[2];
        for (int i = 0; i < 2; i++)
            CHECK(ledger_get_client(l, mix[i], &before[i]) == DPB_OK);
        ledger_round_res res;
        if (e && charge(l, rid, e, mix, 2, 0, &res) == DPB_OK)
            ledger_round_res_free(&res);
        for (int i = 0; i < 2; i++) {
            CHECK(ledger_get_client(l, mix[i], &after[i]) == DPB_OK);
            CHECK(after[i].spent >= before[i].spent && after[i].spent <= 3.0);
        }
        dp_event_free(e);
    }
    ledger_close(l);
    remove_dir(dir);
}

/* The filters' conditions computed here from their theorems, independently of the ledger's
 * code: rdp_filter, some committed order a has sum r_a <= B_a; gdp_filter, sum mu^2 <= mu*^2
 * (mu* by mpmath). slack > 0 asks for the condition to fail by that much instead. */
static int rdp_filter_fits(const double *sum, double eps, double delta, double slack)
{
    for (size_t i = 0; i < LEDGER_FILTER_NORDERS; i++) {
        double a = LEDGER_FILTER_ORDERS[i];
        double b = eps - log1p(-1.0 / a) + log(a * delta / LEDGER_FILTER_NORDERS) / (a - 1.0);
        if (slack == 0.0 ? sum[i] <= b : sum[i] <= b + slack * fabs(b))
            return 1;
    }
    return 0;
}

/* A coordinator that adapts: each round's sigma is chosen from the previous answers (the
 * spends shown and a simulated model output that depends on them). Each filter client is
 * charged only while its theorem's condition holds for the realised sequence, every refusal
 * is one the condition forces (the charge would break it at every order), smaller charges
 * are still admitted after a refusal, and a restart (log replay, then a snapshot) recovers
 * the same clients. */
static void filter_adaptive_rounds(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
    if (l == NULL)
        return;
    const double eps = 2.0, delta = 1e-5, mu_star = 0.50155168916965662; /* mpmath */
    CHECK(put_mode(l, "fa", eps, delta, LEDGER_RDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put_mode(l, "ga", eps, delta, LEDGER_GDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    double rsum[LEDGER_FILTER_NORDERS] = {0}, mu2 = 0.0;
    unsigned long long y = 88172645463325252ULL; /* the "model output" */
    int refused_f = 0, refused_g = 0, admitted_after_refusal = 0;
    double last_spent = 0.0;
    int last_refused = 0, last_tiny = 0;
    for (int t = 0; t < 1000; t++) {
        /* adaptive: sigma from the last answer's spend and the output so far */
        y ^= y << 13;
        y ^= y >> 7;
        y ^= y << 17;
        y += (unsigned long long)(last_spent * 1e6);
        double sigma = 6.0 + (double)(y % 1000) / 20.0; /* 6 .. 56 */
        if (last_spent > 0.8 * eps)
            sigma *= 2.0; /* near the end: smaller charges */
        int tiny = last_refused && !last_tiny;
        if (tiny)
            sigma = 1000.0 + (double)(y % 1000); /* refused: try a much smaller charge */
        last_tiny = tiny;
        dp_event *ev = gaussian(sigma);
        char rid[32];
        snprintf(rid, sizeof rid, "a%d", t);
        const char *both[] = {"fa", "ga"};
        ledger_round_res res;
        if (ev == NULL || charge(l, rid, ev, both, 2, 0, &res) != DPB_OK) {
            CHECKF(0, "round %d failed", t);
            dp_event_free(ev);
            break;
        }
        dp_event_free(ev);
        const ledger_outcome *of = outcome(&res, "fa"), *og = outcome(&res, "ga");
        double step[LEDGER_FILTER_NORDERS];
        for (size_t i = 0; i < LEDGER_FILTER_NORDERS; i++)
            step[i] = rsum[i] + LEDGER_FILTER_ORDERS[i] / (2.0 * sigma * sigma);
        if (of && of->admitted) {
            memcpy(rsum, step, sizeof rsum);
            CHECKF(rdp_filter_fits(rsum, eps, delta, 0.0), "round %d: rdp_filter past its bound",
                   t);
            admitted_after_refusal += refused_f > 0;
        } else if (of) {
            refused_f++;
            CHECK(of->reason == LEDGER_OVER_BUDGET);
            CHECKF(!rdp_filter_fits(step, eps, delta, -1e-9), "round %d: refused though it fits",
                   t);
        }
        double g2 = mu2 + 1.0 / (sigma * sigma);
        if (og && og->admitted) {
            mu2 = g2;
            CHECKF(mu2 <= mu_star * mu_star * (1 + 1e-12), "round %d: gdp_filter past mu*", t);
        } else if (og) {
            refused_g++;
            CHECKF(g2 > mu_star * mu_star * (1 - 1e-9), "round %d: gdp refused though it fits", t);
        }
        last_spent = of ? of->spent_after : 0.0;
        last_refused = of && !of->admitted;
        ledger_round_res_free(&res);
    }
    CHECKF(refused_f > 0 && refused_g > 0 && admitted_after_refusal > 0, "%d %d %d", refused_f,
           refused_g, admitted_after_refusal);
    ledger_client f0, g0, f1, g1;
    CHECK(ledger_get_client(l, "fa", &f0) == DPB_OK && ledger_get_client(l, "ga", &g0) == DPB_OK);
    CHECK(f0.spent <= eps && g0.spent <= eps && f0.guarantee == LEDGER_ADAPTIVE_FILTER &&
          g0.guarantee == LEDGER_ADAPTIVE_FILTER);
    for (int pass = 0; pass < 2 && l != NULL; pass++) {
        if (pass == 0) {
            l = restart(l, dir); /* the log replayed */
        } else {
            ledger_close(l); /* a snapshot written, then read */
            dpb_error err;
            l = open_ledger(dir, NULL, 0, 1000000, &err);
        }
        if (l == NULL)
            break;
        CHECK(ledger_get_client(l, "fa", &f1) == DPB_OK &&
              ledger_get_client(l, "ga", &g1) == DPB_OK);
        CHECK(f1.mode == LEDGER_RDP_FILTER && g1.mode == LEDGER_GDP_FILTER);
        CHECK(f1.spent == f0.spent && g1.spent == g0.spent && f1.rounds == f0.rounds &&
              g1.rounds == g0.rounds && f1.guarantee == LEDGER_ADAPTIVE_FILTER);
    }
    if (l)
        ledger_close(l);
    remove_dir(dir);
}

/* What a filter refuses and keeps: events it cannot account (alone: the whole round is
 * DPB_EUNSUPPORTED and nothing is stored; mixed: the filter client is refused), a budget
 * change once charged, and a round recorded past the budget voids the guarantee. */
static void filter_rules(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
    if (l == NULL)
        return;
    CHECK(put_mode(l, "f", 1.0, 1e-5, LEDGER_RDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put_mode(l, "g", 1.0, 1e-5, LEDGER_GDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put_mode(l, "r", 1.0, 1e-5, LEDGER_RDP, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    dp_event *epoch = dp_event_new(DP_EV_SHUFFLED_EPOCH);
    if (epoch) {
        epoch->u.shuffled.noise_multiplier = 1.0;
        epoch->u.shuffled.rounds = 1140369;
    }
    ledger_round_res res;
    const char *f[] = {"f"}, *fr[] = {"f", "r"}, *g[] = {"g"}, *all[] = {"f", "g", "r"};
    CHECK(charge(l, "e1", epoch, f, 1, 0, &res) == DPB_EUNSUPPORTED);
    CHECK(charge(l, "e1", epoch, f, 1, 1, &res) == DPB_EUNSUPPORTED); /* already_ran too */
    CHECK(!round_exists(l, "e1"));
    if (charge(l, "e2", epoch, fr, 2, 0, &res) == DPB_OK) {
        CHECK(outcome(&res, "f")->reason == LEDGER_FILTER_UNSUPPORTED);
        CHECK(outcome(&res, "r")->reason == LEDGER_OVER_BUDGET); /* accounted: its TV is 0.01 */
        ledger_round_res_free(&res);
    } else {
        CHECK(0);
    }
    dp_event_free(epoch);
    dp_event *ps = sampled_steps(0.01, 1.0, 10), *ga = gaussian(10.0);
    CHECK(charge(l, "s1", ps, g, 1, 0, &res) == DPB_EUNSUPPORTED);
    CHECK(charge(l, "g1", ga, all, 3, 0, &res) == DPB_OK);
    if (res.outcomes)
        for (size_t i = 0; i < res.n; i++)
            CHECK(res.outcomes[i].admitted);
    ledger_round_res_free(&res);
    /* the budget of a charged filter client is fixed; its labels are not */
    CHECK(put_mode(l, "f", 2.0, 1e-5, LEDGER_RDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_ECONFLICT);
    CHECK(put_mode(l, "g", 1.0, 1e-6, LEDGER_GDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_ECONFLICT);
    CHECK(put_mode(l, "f", 1.0, 1e-5, LEDGER_RDP_FILTER, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put_mode(l, "r", 2.0, 1e-5, LEDGER_RDP, DP_REL_ADD_OR_REMOVE) == DPB_OK);
    CHECK(put_two(l, "x", "f", 5.0, LEDGER_RDP_FILTER) == DPB_ECONFLICT);
    /* a round recorded after the fact past the budget: the filter's guarantee is void */
    dp_event *big = gaussian(0.5);
    CHECK(charge(l, "late", big, f, 1, 1, &res) == DPB_OK);
    if (res.outcomes) {
        CHECK(res.outcomes[0].reason == LEDGER_RECORDED);
        CHECK(res.outcomes[0].guarantee == LEDGER_NO_GUARANTEE);
    }
    ledger_round_res_free(&res);
    ledger_client c;
    CHECK(ledger_get_client(l, "f", &c) == DPB_OK && c.guarantee == LEDGER_NO_GUARANTEE &&
          c.spent > c.epsilon);
    CHECK(ledger_get_client(l, "r", &c) == DPB_OK && c.guarantee == LEDGER_FIXED_SEQUENCE);
    dp_event_free(big);
    dp_event_free(ps);
    dp_event_free(ga);
    ledger_close(l);
    remove_dir(dir);
}

/* docs/LEDGER.md's table (make schedule-table): rounds of 50 Poisson-sampled steps (q = 0.01,
 * sigma = 1) a client gets at delta = 1e-5. rdp and rdp_filter through the ledger; pld by its
 * halt condition, the spend the ledger computes (the PLD of the client's multiset) at n and
 * n + 1 rounds. */
static const double README_EPS[3] = {1, 4, 8};
static const uint64_t README_RDP[3] = {0, 77, 272}, README_PLD[3] = {5, 91, 311},
                      README_RDP_FILTER[3] = {0, 55, 214};

static double pld_spend(const dp_event *round, uint64_t n)
{
    dp_event *root = dp_event_new(DP_EV_COMPOSED), *sc = dp_event_new(DP_EV_SELF_COMPOSED);
    double e = NAN, d = 1e-5;
    if (root && sc && (root->u.composed.events = calloc(1, sizeof(dp_event *))) != NULL) {
        sc->u.self.event = (dp_event *)round; /* borrowed: detached before free */
        sc->u.self.count = n;
        root->u.composed.events[root->u.composed.n++] = sc;
        sc = NULL;
        dp_report rep;
        if (dp_epsilon_ex(root, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, NULL, &d, 1, &e, NULL, &rep,
                          NULL) != DPB_OK)
            e = NAN;
        root->u.composed.events[0]->u.self.event = NULL;
    }
    dp_event_free(sc);
    dp_event_free(root);
    return e;
}

static void filter_schedule_table(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir, &switch_fs, 0);
    if (l == NULL)
        return;
    const char *ids[6] = {"r1", "r4", "r8", "f1", "f4", "f8"};
    for (int i = 0; i < 6; i++)
        CHECK(put_mode(l, ids[i], README_EPS[i % 3], 1e-5, i < 3 ? LEDGER_RDP : LEDGER_RDP_FILTER,
                       DP_REL_ADD_OR_REMOVE) == DPB_OK);
    dp_event *ev = sampled_steps(0.01, 1.0, 50);
    for (int t = 0; t < 400; t++) {
        char rid[32];
        snprintf(rid, sizeof rid, "s%d", t);
        ledger_round_res res;
        if (charge(l, rid, ev, ids, 6, 0, &res) != DPB_OK)
            break;
        size_t adm = res.admitted;
        ledger_round_res_free(&res);
        if (adm == 0)
            break;
    }
    for (int i = 0; i < 3; i++) {
        CHECKF(rounds_of(l, ids[i]) == README_RDP[i], "rdp eps %g: %llu", README_EPS[i],
               (unsigned long long)rounds_of(l, ids[i]));
        CHECKF(rounds_of(l, ids[3 + i]) == README_RDP_FILTER[i], "rdp_filter eps %g: %llu",
               README_EPS[i], (unsigned long long)rounds_of(l, ids[3 + i]));
        if (ev == NULL)
            continue;
        double at = pld_spend(ev, README_PLD[i]), past = pld_spend(ev, README_PLD[i] + 1);
        CHECKF(at <= README_EPS[i] && past > README_EPS[i], "pld eps %g: %.17g at %llu, %.17g",
               README_EPS[i], at, (unsigned long long)README_PLD[i], past);
    }
    dp_event_free(ev);
    ledger_close(l);
    remove_dir(dir);
}

/* ---- list pages: every order, offset, limit and filter against a full sort -------------- */

static const ledger_sort *list_sort_key;
static int list_sort_desc;

static int list_ref_cmp(const void *a, const void *b)
{
    const ledger_client *x = a, *y = b;
    int c = 0;
    if (*list_sort_key == LEDGER_SORT_SPENT)
        c = x->spent < y->spent ? -1 : x->spent > y->spent;
    else if (*list_sort_key == LEDGER_SORT_REMAINING)
        c = x->remaining < y->remaining ? -1 : x->remaining > y->remaining;
    if (c == 0)
        c = strcmp(x->id, y->id);
    return list_sort_desc ? -c : c;
}

static void ledger_list_pages_match_sort(void)
{
    char dir[256];
    ledger *l = fresh(dir, sizeof dir, NULL, 0);
    if (l == NULL)
        return;
    enum { N = 300 };
    const char *ids[N];
    char names[N][16];
    unsigned x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        snprintf(names[i], sizeof names[i], "c%05u", (x >> 8) % 100000u);
        ids[i] = names[i];
        ledger_client in, out;
        memset(&in, 0, sizeof in);
        snprintf(in.id, sizeof in.id, "%s", names[i]);
        in.epsilon = 0.5 + (double)(i % 7); /* equal spends, different budgets: ties by id */
        in.delta = 1e-5;
        snprintf(in.labels, sizeof in.labels, "g=%d\n", i % 3);
        int created;
        dpb_error err = {0};
        CHECKF(ledger_put_client(l, &in, &created, &out, &err) == DPB_OK, "%s", err.detail);
    }
    dp_event *ev = gaussian(2.0);
    for (int r = 0; r < 12 && ev; r++) { /* different spends: clients in a few rounds each */
        const char *part[N];
        size_t n = 0;
        for (int i = 0; i < N; i++)
            if ((i * 7 + r) % (1 + i % 5) == 0)
                part[n++] = ids[i];
        char rid[32];
        snprintf(rid, sizeof rid, "r%d", r);
        ledger_round_res res;
        CHECK(charge(l, rid, ev, part, n, 0, &res) == DPB_OK);
        ledger_round_res_free(&res);
    }
    if (ev) { /* a held reservation: statuses count it (the status totals must too) */
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "held");
        rq.policy = LEDGER_ADMIT_ELIGIBLE;
        rq.event = ev;
        rq.participants = ids;
        rq.n = 40;
        rq.reserve = 1;
        rq.ttl_seconds = 600;
        ledger_hash128("held", 4, rq.body_hash);
        ledger_round_res res;
        dpb_error err = {0};
        CHECKF(ledger_round(l, &rq, &res, &err) == DPB_OK, "%s", err.detail);
        ledger_round_res_free(&res);
    }
    dp_event_free(ev);
    ledger_client *all = malloc(N * sizeof *all), *page = malloc(N * sizeof *page),
                  *ref = malloc(N * sizeof *ref);
    if (all == NULL || page == NULL || ref == NULL)
        goto out;
    ledger_query qa = {-1, NULL, LEDGER_SORT_ID, 0, 0, N};
    size_t na, total;
    uint64_t v;
    CHECK(ledger_list(l, &qa, all, &na, &total, &v) == DPB_OK && total <= N);
    const ledger_sort keys[3] = {LEDGER_SORT_ID, LEDGER_SORT_SPENT, LEDGER_SORT_REMAINING};
    const char *labels[3] = {NULL, "g=1", "g=9"};
    size_t checked = 0;
    for (int k = 0; k < 3; k++)
        for (int desc = 0; desc < 2; desc++)
            for (int f = 0; f < 3; f++)
                for (int st = -1; st <= 1; st++) {
                    size_t m = 0; /* the reference: filter, sort */
                    for (size_t i = 0; i < na; i++) {
                        if (st >= 0 && all[i].status != (ledger_status)st)
                            continue;
                        if (labels[f] &&
                            !(labels[f][2] == '1' && strstr(all[i].labels, "g=1\n") != NULL))
                            continue;
                        ref[m++] = all[i];
                    }
                    list_sort_key = &keys[k];
                    list_sort_desc = desc;
                    qsort(ref, m, sizeof *ref, list_ref_cmp);
                    const size_t offs[4] = {0, 1, 37, m > 3 ? m - 3 : 0};
                    const size_t lims[3] = {1, 10, 1000};
                    for (int o = 0; o < 4; o++)
                        for (int li = 0; li < 3; li++) {
                            ledger_query q = {st,   labels[f], keys[k],
                                              desc, offs[o],   lims[li] < N ? lims[li] : N};
                            size_t n, t;
                            CHECK(ledger_list(l, &q, page, &n, &t, &v) == DPB_OK);
                            size_t want = offs[o] >= m ? 0 : m - offs[o];
                            if (want > q.limit)
                                want = q.limit;
                            CHECKF(t == m && n == want,
                                   "sort %d desc %d label %d status %d: "
                                   "total %zu of %zu, page %zu of %zu",
                                   k, desc, f, st, t, m, n, want);
                            for (size_t i = 0; i < n && i < want; i++)
                                CHECKF(strcmp(page[i].id, ref[offs[o] + i].id) == 0,
                                       "sort %d desc %d offset %zu: entry %zu is %s, not %s", k,
                                       desc, offs[o], i, page[i].id, ref[offs[o] + i].id);
                            checked++;
                        }
                }
    CHECK(checked == 3 * 2 * 3 * 3 * 12);
out:
    free(all);
    free(page);
    free(ref);
    ledger_close(l);
    remove_dir(dir);
}

/* A background snapshot that fails (here its rename, once; ENOSPC) loses nothing and stops
 * nothing: it is counted with its reason, the ledger stays writable, the next snapshot
 * succeeds and clears the reason, and a restart recovers every acknowledged round. */
static void ledger_snapshot_failure_counted(void)
{
    char dir[64];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    switch_reset();
    dpb_fs_fault *f = dpb_fs_fault_new(&switch_fs, DPB_FS_RENAME, 0, ENOSPC, 0);
    dpb_error err;
    ledger *l = f ? open_ledger(dir, dpb_fs_fault_fs(f), 1, 4, &err) : NULL;
    CHECKF(l != NULL, "open: %s", f ? err.detail : "no fault fs");
    if (l == NULL) {
        dpb_fs_fault_free(f);
        remove_dir(dir);
        return;
    }
    const char *ids[] = {"ann", "ben"};
    int acked = 0;
    ledger_snapshot_info si = {0};
    char rid[16];
    /* rounds until the first snapshot has failed (a snapshot every 4 records) */
    double deadline = tl_now() + 20.0;
    for (int k = 0; k < 200 && si.failed == 0 && tl_now() < deadline; k++) {
        snprintf(rid, sizeof rid, "a%d", k);
        acked += round_of(l, rid, 50.0, ids, 2, 0, NULL) == DPB_OK;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
        ledger_snapshot_stats(l, &si);
    }
    CHECKF(si.failed == 1 && strstr(si.last_error, "rename") != NULL &&
               strstr(si.last_error, "snapshot") != NULL,
           "after the failed rename: %llu failed, last error '%s'", (unsigned long long)si.failed,
           si.last_error);
    CHECK(!ledger_read_only(l));
    /* the fault fired once: the next snapshots succeed and clear the reason */
    uint64_t written = si.written;
    for (int k = 0; k < 200 && si.written == written && tl_now() < deadline; k++) {
        snprintf(rid, sizeof rid, "b%d", k);
        acked += round_of(l, rid, 50.0, ids, 2, 0, NULL) == DPB_OK;
        nanosleep(&(struct timespec){0, 5000000}, NULL);
        ledger_snapshot_stats(l, &si);
    }
    CHECKF(si.written > written && si.failed == 1 && si.last_error[0] == '\0',
           "after a good snapshot: %llu written, %llu failed, last error '%s'",
           (unsigned long long)si.written, (unsigned long long)si.failed, si.last_error);
    ledger_summary s;
    ledger_get_summary(l, &s);
    CHECKF((int)s.rounds == acked, "%llu rounds, %d acknowledged", (unsigned long long)s.rounds,
           acked);
    ledger_close_nosnapshot(l);
    dpb_fs_fault_free(f);
    l = open_ledger(dir, NULL, 1, 4, &err);
    CHECKF(l != NULL, "reopen: %s", err.detail);
    if (l != NULL) {
        ledger_get_summary(l, &s);
        CHECKF((int)s.rounds == acked, "after a restart: %llu rounds, %d acknowledged",
               (unsigned long long)s.rounds, acked);
        ledger_close_nosnapshot(l);
    }
    remove_dir(dir);
}

const tl_test LEDGER_TESTS[] = {
    TL_T(ledger_snapshot_failure_counted),
    TL_T(ledger_list_pages_match_sort),
    TL_T(ledger_status_last_event),
    TL_T(ledger_failed_sync_withdraws_resolution),
    TL_T(ledger_failed_sync_withdraws),
    TL_T(ledger_failed_sync_withdraws_large),
    TL_T(ledger_failed_write_withdraws),
    TL_T(ledger_failed_group_commit),
    TL_T(ledger_events_logged_in_order),
    TL_T(ledger_put_clients_all_or_none),
    TL_T(ledger_fault_sweep),
    TL_T(ledger_snapshot_bit_flips),
    TL_T(ledger_legacy_hash_replays),
    TL_T(filter_orders_committed),
    TL_T(filter_halts_at_references),
    TL_T(filter_properties),
    TL_T(filter_adaptive_rounds),
    TL_T(filter_rules),
    TL_T(filter_schedule_table),
};
const size_t LEDGER_NTESTS = sizeof LEDGER_TESTS / sizeof LEDGER_TESTS[0];
