/* test_shared.c - the ledger on a shared store (store.h): several ledgers on one log, as
 * replicas on one database, through the in-memory store of memstore.h. Overlapping cohorts
 * charged on both, alternately and concurrently, never overspend; a lost race is computed
 * again and charged once; what one acknowledged the other reads, and a round id retried on
 * the other is replayed, not charged again; an unreachable database withdraws the change
 * without turning read-only (and a commit whose answer was lost is found by the retry);
 * reservations expire once whichever replica sweeps; snapshots of a shared log. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../core/ledger/ledger.h"
#include "memstore.h"
#include "suites.h"

static ledger *on_log(memlog *g, uint64_t snapshot_every)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.default_budget = 0;
    o.snapshot_every = snapshot_every ? snapshot_every : 1000000;
    ledger *l = NULL;
    dpb_error err = {0};
    ledger_store *s = memstore_open(g);
    CHECK(s != NULL);
    dpb_status st = s ? ledger_open_store(&o, s, &l, &err) : DPB_ENOMEM;
    CHECKF(st == DPB_OK, "%s", err.detail);
    return st == DPB_OK ? l : NULL;
}

static dpb_status put(ledger *l, const char *id, double eps)
{
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "%s", id);
    in.epsilon = eps;
    in.delta = 1e-5;
    int created;
    dpb_error err = {0};
    return ledger_put_client(l, &in, &created, &out, &err);
}

static dp_event *gaussian(double s)
{
    dp_event *e = dp_event_new(DP_EV_GAUSSIAN);
    if (e != NULL)
        e->u.noise.noise_multiplier = s;
    return e;
}

/* A round (or a reservation, ttl > 0) of a Gaussian of sigma over ids; *admitted and
 * *replayed from the answer (may be NULL). */
static dpb_status round_of(ledger *l, const char *rid, double sigma, const char *const *ids,
                           size_t n, uint64_t ttl, size_t *admitted, int *replayed, dpb_error *err)
{
    dp_event *ev = gaussian(sigma);
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    rq.reserve = ttl > 0;
    rq.ttl_seconds = ttl;
    char key[200];
    snprintf(key, sizeof key, "%s|%.17g", rid, sigma);
    ledger_hash128(key, strlen(key), rq.body_hash);
    ledger_round_res res;
    dpb_error local = {0};
    dpb_status st = ledger_round(l, &rq, &res, err ? err : &local);
    if (admitted)
        *admitted = st == DPB_OK && !res.replayed ? res.admitted : 0;
    if (replayed)
        *replayed = st == DPB_OK && res.replayed;
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    dp_event_free(ev);
    return st;
}

static uint64_t rounds_of(ledger *l, const char *id)
{
    ledger_client c;
    return ledger_get_client(l, id, &c) == DPB_OK ? c.rounds : UINT64_MAX;
}

static void same_state(ledger *a, ledger *b)
{
    char why[300] = "";
    CHECKF(ledger_compare(a, b, why, sizeof why) == 0, "%s", why);
}

static const char *const CLIENTS[] = {"c0", "c1", "c2", "c3", "c4", "c5"};

/* Every client within its budget, its rounds the admissions the ledgers answered. */
static void no_overspend(ledger *l, size_t admitted)
{
    uint64_t total = 0;
    for (size_t i = 0; i < 6; i++) {
        ledger_client c;
        CHECK(ledger_get_client(l, CLIENTS[i], &c) == DPB_OK);
        CHECKF(c.spent <= c.epsilon, "%s spent %.17g of %.17g", c.id, c.spent, c.epsilon);
        total += c.rounds;
    }
    CHECKF(total == admitted, "clients charged %llu times, rounds admitted %zu",
           (unsigned long long)total, admitted);
}

static void shared_alternate_no_overspend(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g, 0), *b = on_log(&g, 0);
    if (a && b) {
        for (size_t i = 0; i < 6; i++)
            CHECK(put(i % 2 ? b : a, CLIENTS[i], 3.0) == DPB_OK);
        size_t admitted = 0, refused = 0;
        for (int r = 0; r < 40; r++) {
            char rid[32];
            snprintf(rid, sizeof rid, "alt-%d", r);
            size_t got = 0;
            /* overlapping cohorts of 3, alternately on a and b */
            CHECK(round_of(r % 2 ? b : a, rid, 8.0, CLIENTS + r % 4, 3, 0, &got, NULL, NULL) ==
                  DPB_OK);
            admitted += got;
            refused += 3 - got;
        }
        CHECK(refused > 0); /* the budgets ran out */
        no_overspend(a, admitted);
        no_overspend(b, admitted);
        same_state(a, b);
    }
    ledger_close(a);
    ledger_close(b);
    memlog_free(&g);
}

typedef struct {
    ledger *l;
    int id;
    size_t admitted;
    int failures;
} runner;

static void *run_rounds(void *arg)
{
    runner *r = arg;
    for (int k = 0; k < 30; k++) {
        char rid[32];
        snprintf(rid, sizeof rid, "con-%d-%d", r->id, k);
        size_t got = 0;
        dpb_error err = {0};
        if (round_of(r->l, rid, 8.0, CLIENTS + (k + r->id) % 4, 3, 0, &got, NULL, &err) != DPB_OK)
            r->failures++;
        r->admitted += got;
    }
    return NULL;
}

static void shared_concurrent_no_overspend(void)
{
    memlog g;
    memlog_init(&g);
    ledger *l[3] = {on_log(&g, 0), on_log(&g, 0), on_log(&g, 0)};
    if (l[0] && l[1] && l[2]) {
        for (size_t i = 0; i < 6; i++)
            CHECK(put(l[i % 3], CLIENTS[i], 3.0) == DPB_OK);
        atomic_store(&g.sync_sleep_us, 200); /* wide windows: races happen */
        runner r[6];
        pthread_t t[6];
        for (int i = 0; i < 6; i++) { /* two threads on each ledger */
            r[i] = (runner){l[i % 3], i, 0, 0};
            pthread_create(&t[i], NULL, run_rounds, &r[i]);
        }
        size_t admitted = 0;
        for (int i = 0; i < 6; i++) {
            pthread_join(t[i], NULL);
            admitted += r[i].admitted;
            CHECKF(r[i].failures == 0, "runner %d: %d rounds failed", i, r[i].failures);
        }
        atomic_store(&g.sync_sleep_us, 0);
        if (getenv("TEST_VERBOSE"))
            fprintf(stderr, "     %zu admissions, %llu lost races retried\n", admitted,
                    (unsigned long long)g.conflicts);
        for (int i = 0; i < 3; i++) {
            no_overspend(l[i], admitted);
            CHECK(!ledger_read_only(l[i]));
        }
        same_state(l[0], l[1]);
        same_state(l[0], l[2]);
        /* a replica started now replays the same log to the same state */
        ledger *late = on_log(&g, 0);
        if (late)
            same_state(l[0], late);
        ledger_close(late);
    }
    for (int i = 0; i < 3; i++)
        ledger_close(l[i]);
    memlog_free(&g);
}

/* The hook: b charges the client first, while a's round waits for its sync. */
static void b_charges(void *ctx)
{
    const char *ids[] = {"solo"};
    size_t got = 0;
    CHECK(round_of(ctx, "from-b", 8.0, ids, 1, 0, &got, NULL, NULL) == DPB_OK && got == 1);
}

static void shared_lost_race_recomputed_once(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g, 0), *b = on_log(&g, 0);
    if (a && b) {
        /* a budget for one round of sigma 8 and not two */
        const char *ids[] = {"solo"};
        CHECK(put(a, "probe", 100.0) == DPB_OK);
        const char *probe[] = {"probe"};
        CHECK(round_of(a, "p1", 8.0, probe, 1, 0, NULL, NULL, NULL) == DPB_OK);
        ledger_client pc;
        CHECK(ledger_get_client(a, "probe", &pc) == DPB_OK);
        double one = pc.spent;
        CHECK(round_of(a, "p2", 8.0, probe, 1, 0, NULL, NULL, NULL) == DPB_OK);
        CHECK(ledger_get_client(a, "probe", &pc) == DPB_OK);
        CHECK(put(a, "solo", (one + pc.spent) / 2) == DPB_OK);
        /* a computes its round on a state without b's charge; b's lands first */
        g.before_ctx = b;
        g.before_sync = b_charges;
        size_t got = 9;
        dpb_error err = {0};
        CHECKF(round_of(a, "from-a", 8.0, ids, 1, 0, &got, NULL, &err) == DPB_OK, "%s", err.detail);
        CHECK(got == 0); /* computed again after catching up: over budget now */
        CHECK(g.conflicts == 1);
        CHECK(rounds_of(a, "solo") == 1 && rounds_of(b, "solo") == 1);
        CHECK(!ledger_read_only(a));
        ledger_round_res res;
        CHECK(ledger_get_round(b, "from-a", &res) == DPB_OK && res.admitted == 0);
        ledger_round_res_free(&res);
        same_state(a, b);
    }
    ledger_close(a);
    ledger_close(b);
    memlog_free(&g);
}

static void shared_read_and_replay_across(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g, 0), *b = on_log(&g, 0);
    if (a && b) {
        const char *ids[] = {"x", "y"};
        CHECK(put(a, "x", 10.0) == DPB_OK && put(b, "y", 10.0) == DPB_OK);
        size_t got = 0;
        CHECK(round_of(a, "r1", 6.0, ids, 2, 0, &got, NULL, NULL) == DPB_OK && got == 2);
        /* acknowledged on a: read on b at once */
        ledger_round_res res;
        CHECK(ledger_get_round(b, "r1", &res) == DPB_OK && res.admitted == 2);
        ledger_round_res_free(&res);
        CHECK(rounds_of(b, "x") == 1 && rounds_of(b, "y") == 1);
        ledger_summary s;
        ledger_get_summary(b, &s);
        CHECK(s.rounds == 1 && s.clients == 2 && !s.unavailable);
        /* the same round id retried on b: replayed, not charged again */
        int replayed = 0;
        CHECK(round_of(b, "r1", 6.0, ids, 2, 0, &got, &replayed, NULL) == DPB_OK && replayed);
        CHECK(rounds_of(a, "x") == 1 && rounds_of(b, "x") == 1);
        /* with another body: the id's conflict, not a race */
        dpb_error err = {0};
        CHECK(round_of(b, "r1", 7.0, ids, 2, 0, &got, NULL, &err) == DPB_ECONFLICT);
        same_state(a, b);
    }
    ledger_close(a);
    ledger_close(b);
    memlog_free(&g);
}

static void shared_unavailable_withdraws(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g, 0), *b = on_log(&g, 0);
    if (a && b) {
        const char *ids[] = {"u"};
        CHECK(put(a, "u", 10.0) == DPB_OK);
        /* the database unreachable at the sync: refused, withdrawn, not read-only */
        atomic_store(&g.fail_next, DPB_EUNAVAILABLE);
        dpb_error err = {0};
        CHECK(round_of(a, "u1", 6.0, ids, 1, 0, NULL, NULL, &err) == DPB_EUNAVAILABLE);
        CHECKF(strstr(err.detail, "cannot be reached") != NULL, "%s", err.detail);
        CHECK(!ledger_read_only(a));
        CHECK(rounds_of(a, "u") == 0 && rounds_of(b, "u") == 0);
        ledger_round_res res;
        CHECK(ledger_get_round(a, "u1", &res) == DPB_ENOTFOUND);
        /* the retry works */
        size_t got = 0;
        CHECK(round_of(a, "u1", 6.0, ids, 1, 0, &got, NULL, NULL) == DPB_OK && got == 1);
        CHECK(rounds_of(b, "u") == 1);
        /* committed, but the answer lost: the retry with the same id finds it */
        atomic_store(&g.lose_answer, 1);
        memset(&err, 0, sizeof err);
        CHECK(round_of(a, "u2", 6.0, ids, 1, 0, NULL, NULL, &err) == DPB_EUNAVAILABLE);
        int replayed = 0;
        CHECK(round_of(a, "u2", 6.0, ids, 1, 0, &got, &replayed, NULL) == DPB_OK && replayed);
        CHECK(rounds_of(a, "u") == 2 && rounds_of(b, "u") == 2);
        /* catching up impossible: reads and writes answer unavailable, nothing stale */
        atomic_store(&g.catch_up_fails, 1);
        ledger_client c;
        CHECK(ledger_get_client(b, "u", &c) == DPB_EUNAVAILABLE);
        ledger_summary s;
        ledger_get_summary(b, &s);
        CHECK(s.unavailable == 1);
        memset(&err, 0, sizeof err);
        CHECK(put(b, "v", 1.0) == DPB_EUNAVAILABLE);
        atomic_store(&g.catch_up_fails, 0);
        CHECK(put(b, "v", 1.0) == DPB_OK);
        CHECK(!ledger_read_only(a) && !ledger_read_only(b));
        same_state(a, b);
    }
    ledger_close(a);
    ledger_close(b);
    memlog_free(&g);
}

static void shared_expiry_once(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g, 0), *b = on_log(&g, 0);
    if (a && b) {
        const char *ids[] = {"e1", "e2"};
        CHECK(put(a, "e1", 10.0) == DPB_OK && put(a, "e2", 10.0) == DPB_OK);
        size_t got = 0;
        CHECK(round_of(a, "res", 6.0, ids, 2, 1, &got, NULL, NULL) == DPB_OK && got == 2);
        uint64_t later = (uint64_t)time(NULL) + 10;
        /* both sweep: the reservation expires once */
        size_t n = ledger_expire(b, later) + ledger_expire(a, later);
        CHECK(n == 1);
        ledger_round_res res;
        CHECK(ledger_get_round(a, "res", &res) == DPB_OK && res.state == LEDGER_EXPIRED);
        ledger_round_res_free(&res);
        CHECK(ledger_get_round(b, "res", &res) == DPB_OK && res.state == LEDGER_EXPIRED);
        ledger_round_res_free(&res);
        same_state(a, b);
    }
    ledger_close(a);
    ledger_close(b);
    memlog_free(&g);
}

static void shared_snapshot_keeps_log(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g, 5);
    if (a) {
        const char *ids[] = {"s"};
        CHECK(put(a, "s", 50.0) == DPB_OK);
        for (int r = 0; r < 12; r++) {
            char rid[16];
            snprintf(rid, sizeof rid, "s%d", r);
            CHECK(round_of(a, rid, 20.0, ids, 1, 0, NULL, NULL, NULL) == DPB_OK);
        }
        ledger_close(a); /* a final snapshot at least */
        CHECK(g.snapshots >= 1 && g.snap_seq > 0 && g.nrec > g.snap_seq - 1);
        a = on_log(&g, 5); /* the snapshot and the records after it */
        CHECK(a != NULL && rounds_of(a, "s") == 12);
        ledger *b = on_log(&g, 5);
        if (a && b)
            same_state(a, b);
        ledger_close(b);
    }
    ledger_close(a);
    memlog_free(&g);
}

/* ---- moving between stores: ledger_copy_to, ledger_compare ---- */

static void rm_dir(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/wal.log", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/snapshot", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/snapshot.tmp", dir);
    unlink(p);
    rmdir(dir);
}

static ledger *on_dir(const char *dir)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.snapshot_every = 1000000;
    ledger *l = NULL;
    dpb_error err = {0};
    CHECKF(ledger_open(&o, &l, &err) == DPB_OK, "%s", err.detail);
    return l;
}

/* Clients, one-step rounds, a reservation held, one committed, a named event. */
static void fill(ledger *l)
{
    const char *ids[] = {"m1", "m2", "m3"};
    for (int i = 0; i < 3; i++)
        CHECK(put(l, ids[i], 5.0 + i) == DPB_OK);
    for (int r = 0; r < 5; r++) {
        char rid[16];
        snprintf(rid, sizeof rid, "mv%d", r);
        CHECK(round_of(l, rid, 7.0 + r, ids + r % 2, 2, 0, NULL, NULL, NULL) == DPB_OK);
    }
    CHECK(round_of(l, "held", 9.0, ids, 3, 600, NULL, NULL, NULL) == DPB_OK);
    CHECK(round_of(l, "done", 9.5, ids, 3, 600, NULL, NULL, NULL) == DPB_OK);
    const char *rep[] = {"m1"};
    unsigned char h[16] = {1};
    ledger_round_res res;
    dpb_error err = {0};
    CHECKF(ledger_commit(l, "done", rep, 1, h, &res, &err) == DPB_OK, "%s", err.detail);
    ledger_round_res_free(&res);
    dp_event *ev = gaussian(3.0);
    int created;
    uint64_t seq;
    CHECK(ledger_put_event(l, "g3", ev, &created, &seq, &err) == DPB_OK && created);
    dp_event_free(ev);
}

static void copy_and_check(ledger *from, const char *dir)
{
    dpb_error err = {0};
    CHECKF(ledger_copy_to(from, dir, &err) == DPB_OK, "%s", err.detail);
    ledger *to = on_dir(dir);
    if (to == NULL)
        return;
    same_state(from, to);
    /* the copy goes on from the source's seq */
    const char *ids[] = {"m3"};
    size_t got = 0;
    CHECK(round_of(to, "after", 8.0, ids, 1, 0, &got, NULL, NULL) == DPB_OK && got == 1);
    char why[300];
    CHECK(ledger_compare(from, to, why, sizeof why) == 1 && strstr(why, "rounds") != NULL);
    ledger_close(to);
    to = on_dir(dir); /* and recovers */
    CHECK(to != NULL && rounds_of(to, "m3") == rounds_of(from, "m3") + 1);
    ledger_close(to);
    /* a store that holds a ledger is never overwritten */
    memset(&err, 0, sizeof err);
    CHECK(ledger_copy_to(from, dir, &err) == DPB_ECONFLICT);
}

static void shared_copy_file_to_file(void)
{
    char a[] = "/tmp/dpb-copy-a-XXXXXX", b[] = "/tmp/dpb-copy-b-XXXXXX";
    if (mkdtemp(a) == NULL || mkdtemp(b) == NULL) {
        CHECK(0);
        return;
    }
    ledger *l = on_dir(a);
    if (l) {
        fill(l);
        copy_and_check(l, b);
        /* through a close and a snapshot, the same */
        ledger_close(l);
        l = on_dir(a);
        ledger *c = on_dir(b);
        char why[300];
        if (l && c)
            CHECK(ledger_compare(l, c, why, sizeof why) == 1); /* the copy has one more round */
        ledger_close(c);
    }
    ledger_close(l);
    rm_dir(a);
    rm_dir(b);
}

static void shared_copy_shared_to_file(void)
{
    char b[] = "/tmp/dpb-copy-m-XXXXXX";
    if (mkdtemp(b) == NULL) {
        CHECK(0);
        return;
    }
    memlog g;
    memlog_init(&g);
    ledger *l = on_log(&g, 0), *m = on_log(&g, 0);
    if (l && m) {
        fill(l);
        copy_and_check(m, b); /* from the replica that did not write: it catches up first */
    }
    ledger_close(l);
    ledger_close(m);
    memlog_free(&g);
    rm_dir(b);
}

const tl_test SHARED_TESTS[] = {
    TL_T(shared_copy_file_to_file),         TL_T(shared_copy_shared_to_file),
    TL_T(shared_alternate_no_overspend),    TL_T(shared_concurrent_no_overspend),
    TL_T(shared_lost_race_recomputed_once), TL_T(shared_read_and_replay_across),
    TL_T(shared_unavailable_withdraws),     TL_T(shared_expiry_once),
    TL_T(shared_snapshot_keeps_log),
};
const size_t SHARED_NTESTS = sizeof SHARED_TESTS / sizeof SHARED_TESTS[0];
