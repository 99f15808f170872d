/*
 * test_store_pg.c - the PostgreSQL store (core/ledger/store_pg.c) against a real server
 * (pg_harness.h): migrations, the round trip, races between two stores, group commit,
 * snapshots, the server going away and coming back, a newer schema, passwords in messages.
 * Prints "pg: N passed, M failed"; every test skips when the PostgreSQL binaries are absent.
 */
#define TESTLIB_MAIN
#include "../testlib.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "../../core/ledger/store.h"
#include "../../core/ledger/wal.h"
#include "pg_harness.h"

static long long sql_int(const char *url, const char *sql)
{
    char out[64];
    if (pgh_sql(url, sql, out, sizeof out) != 0)
        return -1;
    return atoll(out);
}

static const store_pg_options FAST = {
    .pool = 4, .connect_timeout_s = 2, .statement_timeout_ms = 3000};

/* records seen by a replay / catch-up */
typedef struct {
    uint64_t seq[4096];
    uint8_t type[4096];
    char payload[4096][32];
    size_t len[4096];
    size_t n;
    int stop_at; /* > 0: return 1 at that seq */
} seen;

static int collect(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    seen *s = ctx;
    if (s->stop_at > 0 && (uint64_t)s->stop_at == seq)
        return 1;
    if (s->n < 4096) {
        s->seq[s->n] = seq;
        s->type[s->n] = type;
        s->len[s->n] = len;
        snprintf(s->payload[s->n], sizeof s->payload[s->n], "%.*s", (int)(len < 31 ? len : 31),
                 (const char *)payload);
        s->n++;
    }
    return 0;
}

static ledger_store *open_store(const char *url, const store_pg_options *o, uint64_t *next)
{
    ledger_store *s = NULL;
    dpb_error e = {0};
    dpb_status st = store_pg_open(url, o, &s, &e);
    CHECKF(st == DPB_OK, "store_pg_open: %s", e.detail);
    if (st != DPB_OK)
        return NULL;
    uint64_t snap = 0;
    void *data = NULL;
    size_t len = 0;
    CHECK(store_load_snapshot(s, &snap, &data, &len, &e) == DPB_OK);
    free(data);
    uint64_t nx = 0;
    CHECKF(store_replay(s, snap, NULL, NULL, NULL, &nx, &e) == DPB_OK, "%s", e.detail);
    if (next != NULL)
        *next = nx;
    return s;
}

/* A store on a fresh database db (its url into url); NULL: skip (no server) or failed. */
static ledger_store *fresh_store(const char *db, char *url, size_t n, const store_pg_options *o)
{
    if (!pgh_up())
        return NULL;
    if (pgh_fresh_db(db, url, n) != 0) {
        CHECKF(0, "cannot create database %s", db);
        return NULL;
    }
    return open_store(url, o, NULL);
}

/* ---- migrations ---- */

typedef struct {
    const char *url;
    int from, to;
    dpb_status st;
    char detail[320];
} migrator;

static void *migrate_thread(void *arg)
{
    migrator *m = arg;
    dpb_error e = {0};
    m->st = store_pg_migrate(m->url, &FAST, &m->from, &m->to, &e);
    snprintf(m->detail, sizeof m->detail, "%s", e.detail);
    return NULL;
}

static void test_migrate_concurrent_and_idempotent(void)
{
    if (!pgh_up())
        return;
    char url[512];
    CHECK(pgh_fresh_db("t_migrate", url, sizeof url) == 0);
    migrator m[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        m[i] = (migrator){.url = url, .from = -1, .to = -1};
        pthread_create(&t[i], NULL, migrate_thread, &m[i]);
    }
    int fresh = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECKF(m[i].st == DPB_OK, "migrator %d: %s", i, m[i].detail);
        CHECK(m[i].to == 2); /* 2: the log's tree (leaf column, dpbudget_tree) */
        CHECK(m[i].from == 0 || m[i].from == 2);
        fresh += m[i].from == 0;
    }
    CHECKF(fresh == 1, "%d migrators found an empty schema", fresh);
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_schema") == 2);
    /* again: nothing to do */
    migrator again = {.url = url};
    migrate_thread(&again);
    CHECK(again.st == DPB_OK && again.from == 2 && again.to == 2);
    /* and several stores opening at once on the same database */
    pthread_t o[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&o[i], NULL, migrate_thread, &m[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(o[i], NULL);
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_schema") == 2);
}

static void test_newer_schema_refused(void)
{
    if (!pgh_up())
        return;
    char url[512];
    CHECK(pgh_fresh_db("t_newer", url, sizeof url) == 0);
    dpb_error e = {0};
    CHECK(store_pg_migrate(url, &FAST, NULL, NULL, &e) == DPB_OK);
    CHECK(pgh_sql(url, "INSERT INTO dpbudget_schema (version) VALUES (99)", NULL, 0) == 0);
    ledger_store *s = NULL;
    dpb_error_clear(&e);
    CHECK(store_pg_open(url, &FAST, &s, &e) == DPB_ECORRUPT);
    CHECK(s == NULL);
    CHECKF(strstr(e.detail, "version 99") != NULL && strstr(e.detail, "newer dpbudgetd") != NULL,
           "%s", e.detail);
    dpb_error_clear(&e);
    CHECK(store_pg_migrate(url, &FAST, NULL, NULL, &e) == DPB_ECORRUPT);
}

/* ---- the log ---- */

static void test_round_trip(void)
{
    if (!pgh_up())
        return;
    char url[512];
    CHECK(pgh_fresh_db("t_round", url, sizeof url) == 0);
    uint64_t next = 0;
    ledger_store *s = open_store(url, &FAST, &next);
    if (s == NULL)
        return;
    CHECK(next == 1);
    CHECK(strcmp(s->ops->kind, "postgresql") == 0 && store_shared(s));
    CHECK(store_empty(s) == 1);
    uint64_t seq = 0;
    CHECK(store_append(s, 1, "one", 3, &seq) == DPB_OK && seq == 1);
    CHECK(store_append(s, 7, NULL, 0, &seq) == DPB_OK && seq == 2);
    CHECK(store_append(s, 255, "\0\1\2three", 8, &seq) == DPB_OK && seq == 3);
    CHECK(store_durable_seq(s) == 0);
    CHECK(store_sync(s, 2) == DPB_OK);
    CHECK(store_durable_seq(s) == 3); /* everything queued went in one transaction */
    CHECK(store_sync(s, UINT64_MAX) == DPB_OK);
    CHECK(store_empty(s) == 0);
    CHECK(store_failed(s) == 0);
    CHECK(store_append(s, 1, NULL, 1, NULL) == DPB_EINVAL);
    CHECK(store_append(s, 1, "x", (size_t)WAL_MAX_PAYLOAD + 1, NULL) == DPB_EINVAL);
    uint64_t count = 0;
    double secs = 0;
    uint64_t hist[WAL_SYNC_NBUCKETS] = {0}, total = 0;
    store_sync_stats(s, &count, &secs, hist);
    for (int b = 0; b < WAL_SYNC_NBUCKETS; b++)
        total += hist[b];
    CHECK(count == 1 && total == 1 && secs > 0);
    printf("pg: one sync of 3 records took %.2f ms\n", secs * 1e3);
    store_close(s);

    s = open_store(url, &FAST, NULL);
    if (s == NULL)
        return;
    static seen r;
    memset(&r, 0, sizeof r);
    dpb_error e = {0};
    CHECK(store_replay(s, 0, collect, NULL, &r, &next, &e) == DPB_OK);
    CHECK(next == 4 && r.n == 3);
    CHECK(r.seq[0] == 1 && r.type[0] == 1 && r.len[0] == 3 && strcmp(r.payload[0], "one") == 0);
    CHECK(r.seq[1] == 2 && r.type[1] == 7 && r.len[1] == 0);
    CHECK(r.seq[2] == 3 && r.type[2] == 255 && r.len[2] == 8);
    CHECK(store_durable_seq(s) == 3);
    CHECK(store_size_bytes(s) > 0);
    /* a record the caller cannot apply stops the replay */
    memset(&r, 0, sizeof r);
    r.stop_at = 2;
    dpb_error_clear(&e);
    CHECK(store_replay(s, 0, collect, NULL, &r, &next, &e) == DPB_ECORRUPT);
    CHECKF(strstr(e.detail, "record 2") != NULL, "%s", e.detail);
    /* the next append follows the replayed log; one thread's syncs one after the other (the
     * commit latency figure: no group commit helps) */
    enum { SEQUENTIAL = 100 };
    for (int i = 0; i < SEQUENTIAL; i++) {
        CHECK(store_append(s, 2, "four", 4, &seq) == DPB_OK && seq == 4 + (uint64_t)i);
        CHECK(store_sync(s, seq) == DPB_OK);
    }
    store_sync_stats(s, &count, &secs, hist);
    CHECK(count == SEQUENTIAL);
    uint64_t below = 0;
    int b99 = 0;
    while (b99 < WAL_SYNC_NBUCKETS - 1 && (below += hist[b99]) < SEQUENTIAL * 99 / 100)
        b99++;
    printf("pg: %d syncs of one record each: %.3f ms on average, p99 <= %g ms\n", SEQUENTIAL,
           secs * 1e3 / SEQUENTIAL, WAL_SYNC_BUCKETS[b99] * 1e3);
    store_close(s);
    CHECK(sql_int(url, "SELECT max(seq) FROM dpbudget_log") == 3 + SEQUENTIAL);
}

static void test_gap_is_corruption(void)
{
    char url[512];
    ledger_store *s = fresh_store("t_gap", url, sizeof url, &FAST);
    if (s == NULL)
        return;
    CHECK(pgh_sql(url, "INSERT INTO dpbudget_log VALUES (1, 1, 'a'), (2, 1, 'b'), (4, 1, 'd')",
                  NULL, 0) == 0);
    static seen r;
    memset(&r, 0, sizeof r);
    uint64_t last = 0;
    dpb_error e = {0};
    CHECK(store_catch_up(s, 0, collect, &r, &last, &e) == DPB_ECORRUPT);
    CHECKF(strstr(e.detail, "no record 3") != NULL, "%s", e.detail);
    CHECK(r.n == 2);
    store_close(s);
}

typedef struct {
    ledger_store *s;
    const char *tag;
    pthread_barrier_t *go;
    dpb_status st;
    uint64_t seq;
} racer;

static void *race_thread(void *arg)
{
    racer *r = arg;
    CHECK(store_append(r->s, 3, r->tag, strlen(r->tag), &r->seq) == DPB_OK);
    CHECK(store_append(r->s, 3, r->tag, strlen(r->tag), NULL) == DPB_OK);
    pthread_barrier_wait(r->go);
    r->st = store_sync(r->s, UINT64_MAX);
    return NULL;
}

static void test_two_stores_race_for_a_seq(void)
{
    if (!pgh_up())
        return;
    char url[512];
    CHECK(pgh_fresh_db("t_race", url, sizeof url) == 0);
    for (int round = 0; round < 5; round++) {
        ledger_store *a = open_store(url, &FAST, NULL);
        ledger_store *b = open_store(url, &FAST, NULL);
        if (a == NULL || b == NULL) {
            store_close(a);
            store_close(b);
            return;
        }
        uint64_t base = store_durable_seq(a);
        CHECK(store_durable_seq(b) == base);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        racer ra = {.s = a, .tag = "A", .go = &go}, rb = {.s = b, .tag = "B", .go = &go};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, race_thread, &ra);
        pthread_create(&tb, NULL, race_thread, &rb);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&go);
        CHECK(ra.seq == base + 1 && rb.seq == base + 1);
        CHECKF((ra.st == DPB_OK) + (rb.st == DPB_OK) == 1, "round %d: A %d, B %d", round, ra.st,
               rb.st);
        racer *win = ra.st == DPB_OK ? &ra : &rb, *lose = ra.st == DPB_OK ? &rb : &ra;
        CHECK(lose->st == DPB_ECONFLICT);
        CHECK(store_durable_seq(lose->s) == base);
        CHECK(store_durable_seq(win->s) == base + 2);
        dpb_error e = {0};
        CHECK(store_error(lose->s, &e) == DPB_ECONFLICT && strstr(e.detail, "23505") != NULL);
        /* the loser catches up and sees both of the winner's records, then appends after */
        static seen r;
        memset(&r, 0, sizeof r);
        uint64_t last = 0;
        CHECK(store_catch_up(lose->s, base, collect, &r, &last, &e) == DPB_OK);
        CHECK(last == base + 2 && r.n == 2);
        CHECK(r.n == 2 && strcmp(r.payload[0], win->tag) == 0 &&
              strcmp(r.payload[1], win->tag) == 0);
        uint64_t seq = 0;
        CHECK(store_append(lose->s, 4, "after", 5, &seq) == DPB_OK && seq == base + 3);
        CHECK(store_sync(lose->s, seq) == DPB_OK);
        store_close(a);
        store_close(b);
    }
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_log") == 15);
}

/* A catch-up while records of ours are pending (outside its contract) reads other replicas'
 * records but never lets them pass for ours. */
static void test_catch_up_with_pending(void)
{
    char url[512];
    ledger_store *a = fresh_store("t_pending", url, sizeof url, &FAST);
    if (a == NULL)
        return;
    ledger_store *b = open_store(url, &FAST, NULL);
    if (b == NULL) {
        store_close(a);
        return;
    }
    uint64_t seq = 0, last = 0;
    CHECK(store_append(b, 1, "B", 1, &seq) == DPB_OK && seq == 1);
    CHECK(store_append(a, 1, "A", 1, &seq) == DPB_OK && store_append(a, 1, "A", 1, &seq) == DPB_OK);
    CHECK(store_sync(a, seq) == DPB_OK);
    dpb_error e = {0};
    CHECK(store_catch_up(b, 1, NULL, NULL, &last, &e) == DPB_OK && last == 2);
    CHECK(store_durable_seq(b) == 0);
    CHECK(store_sync(b, 1) == DPB_ECONFLICT);
    CHECK(store_catch_up(b, 0, NULL, NULL, &last, &e) == DPB_OK && last == 2);
    CHECK(store_durable_seq(b) == 2);
    CHECK(store_append(b, 1, "B", 1, &seq) == DPB_OK && seq == 3);
    CHECK(store_sync(b, seq) == DPB_OK);
    store_close(a);
    store_close(b);
}

typedef struct {
    ledger_store *s;
    int id, n;
    int bad;
} writer;

static void *writer_thread(void *arg)
{
    writer *w = arg;
    for (int i = 0; i < w->n; i++) {
        char p[32];
        int len = snprintf(p, sizeof p, "w%d-%d", w->id, i);
        uint64_t seq = 0;
        if (store_append(w->s, 1, p, (size_t)len, &seq) != DPB_OK ||
            store_sync(w->s, seq) != DPB_OK || store_durable_seq(w->s) < seq)
            w->bad++;
    }
    return NULL;
}

static void test_group_commit(void)
{
    char url[512];
    ledger_store *s = fresh_store("t_group", url, sizeof url, &FAST);
    if (s == NULL)
        return;
    enum { THREADS = 8, EACH = 40 };
    writer w[THREADS];
    pthread_t t[THREADS];
    double t0 = tl_now();
    for (int i = 0; i < THREADS; i++) {
        w[i] = (writer){.s = s, .id = i, .n = EACH};
        pthread_create(&t[i], NULL, writer_thread, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].bad == 0);
    }
    double dt = tl_now() - t0;
    uint64_t count = 0, hist[WAL_SYNC_NBUCKETS];
    double secs = 0;
    store_sync_stats(s, &count, &secs, hist);
    CHECK(count >= 1 && count <= THREADS * EACH);
    printf("pg: %d appends+syncs from %d threads in %.3f s: %llu transactions, %.2f ms each\n",
           THREADS * EACH, THREADS, dt, (unsigned long long)count, secs * 1e3 / (double)count);
    CHECK(store_durable_seq(s) == THREADS * EACH);
    /* a batch past one INSERT statement's rows: BEGIN ... COMMIT */
    for (int i = 0; i < 2500; i++)
        CHECK(store_append(s, 2, "bulk", 4, NULL) == DPB_OK);
    CHECK(store_sync(s, UINT64_MAX) == DPB_OK);
    CHECK(store_durable_seq(s) == THREADS * EACH + 2500);
    store_close(s);
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_log") == THREADS * EACH + 2500);
    /* each record once, with no gap */
    CHECK(sql_int(url, "SELECT count(DISTINCT payload) FROM dpbudget_log WHERE type = 1") ==
          THREADS * EACH);
    CHECK(sql_int(url, "SELECT max(seq) FROM dpbudget_log") == THREADS * EACH + 2500);

    /* a multi-statement batch that loses the race in its middle commits nothing */
    s = open_store(url, &FAST, NULL);
    ledger_store *b = open_store(url, &FAST, NULL);
    if (s == NULL || b == NULL) {
        store_close(s);
        store_close(b);
        return;
    }
    uint64_t base = store_durable_seq(s);
    for (int i = 0; i < 1500; i++)
        CHECK(store_append(b, 2, "b", 1, NULL) == DPB_OK);
    CHECK(store_sync(b, UINT64_MAX) == DPB_OK);
    for (int i = 0; i < 2500; i++)
        CHECK(store_append(s, 2, "s", 1, NULL) == DPB_OK);
    CHECK(store_sync(s, UINT64_MAX) == DPB_ECONFLICT);
    CHECK(store_durable_seq(s) == base);
    store_close(s);
    store_close(b);
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_log WHERE payload = 's'") == 0);
}

static void test_snapshot_keeps_newest_two(void)
{
    char url[512];
    ledger_store *s = fresh_store("t_snap", url, sizeof url, &FAST);
    if (s == NULL)
        return;
    dpb_error e = {0};
    for (uint64_t i = 1; i <= 5; i++) {
        CHECK(store_append(s, 1, "r", 1, NULL) == DPB_OK);
        CHECK(store_sync(s, i) == DPB_OK);
        char p[16];
        int n = snprintf(p, sizeof p, "state%llu", (unsigned long long)i);
        CHECKF(store_snapshot(s, i, p, (size_t)n, &e) == DPB_OK, "%s", e.detail);
    }
    /* a second replica writing the same seq's snapshot: nothing changes */
    CHECK(store_snapshot(s, 5, "other", 5, &e) == DPB_OK);
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_snapshot") == 2);
    CHECK(sql_int(url, "SELECT min(seq) FROM dpbudget_snapshot") == 4);
    uint64_t seq = 0;
    void *data = NULL;
    size_t len = 0;
    CHECK(store_load_snapshot(s, &seq, &data, &len, &e) == DPB_OK);
    CHECK(seq == 5 && len == 6 && data != NULL && memcmp(data, "state5", 6) == 0);
    free(data);
    store_close(s);

    /* a copy's target: a snapshot alone (no log) is not empty, and appends follow it */
    char url2[512];
    CHECK(pgh_fresh_db("t_snap2", url2, sizeof url2) == 0);
    s = open_store(url2, &FAST, NULL);
    if (s == NULL)
        return;
    CHECK(store_empty(s) == 1);
    CHECK(store_snapshot(s, 42, "copied", 6, &e) == DPB_OK);
    CHECK(store_empty(s) == 0);
    store_close(s);
    uint64_t next = 0;
    s = open_store(url2, &FAST, &next);
    if (s == NULL)
        return;
    CHECK(next == 43);
    uint64_t aseq = 0;
    CHECK(store_append(s, 1, "x", 1, &aseq) == DPB_OK && aseq == 43);
    CHECK(store_sync(s, aseq) == DPB_OK);
    store_close(s);
}

static void test_abandon_drops_pending(void)
{
    char url[512];
    ledger_store *s = fresh_store("t_abandon", url, sizeof url, &FAST);
    if (s == NULL)
        return;
    uint64_t seq = 0;
    CHECK(store_append(s, 1, "a", 1, &seq) == DPB_OK && seq == 1);
    CHECK(store_sync(s, 1) == DPB_OK);
    CHECK(store_append(s, 1, "b", 1, &seq) == DPB_OK && seq == 2);
    store_abandon(s, "test");
    CHECK(store_sync(s, 2) == DPB_OK); /* nothing pending: seq 2 is not ours any more */
    CHECK(store_failed(s) == 0);
    CHECK(store_append(s, 1, "c", 1, &seq) == DPB_OK && seq == 2);
    CHECK(store_sync(s, 2) == DPB_OK);
    store_close(s);
    char out[16];
    CHECK(pgh_sql(url,
                  "SELECT string_agg(encode(payload, 'escape'), '' ORDER BY seq) FROM "
                  "dpbudget_log",
                  out, sizeof out) == 0);
    CHECK(strcmp(out, "ac") == 0);
}

/* ---- the pool ---- */

typedef struct {
    ledger_store *s;
    dpb_status inner;
    char detail[320];
} nest;

static int nested_catch_up(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    (void)seq, (void)type, (void)payload, (void)len;
    nest *n = ctx;
    uint64_t last = 0;
    dpb_error e = {0};
    n->inner = store_catch_up(n->s, 0, NULL, NULL, &last, &e);
    snprintf(n->detail, sizeof n->detail, "%s", e.detail);
    return 0;
}

static void test_pool_is_bounded(void)
{
    if (!pgh_up())
        return;
    char url[512];
    CHECK(pgh_fresh_db("t_pool", url, sizeof url) == 0);
    /* pool 2: the flusher's connection and one more, held by the outer catch-up */
    store_pg_options o = {.pool = 2, .connect_timeout_s = 2, .statement_timeout_ms = 300};
    ledger_store *s = open_store(url, &o, NULL);
    if (s == NULL)
        return;
    CHECK(store_append(s, 1, "a", 1, NULL) == DPB_OK);
    CHECK(store_sync(s, 1) == DPB_OK); /* the flusher's connection works beside the pool */
    nest n = {.s = s};
    uint64_t last = 0;
    dpb_error e = {0};
    double t0 = tl_now();
    CHECK(store_catch_up(s, 0, nested_catch_up, &n, &last, &e) == DPB_OK);
    double dt = tl_now() - t0;
    CHECK(n.inner == DPB_EUNAVAILABLE);
    CHECKF(strstr(n.detail, "connections of the pool stayed busy") != NULL, "%s", n.detail);
    CHECKF(dt >= 0.25 && dt < 5, "%.3f s", dt);
    /* the connection came back */
    CHECK(store_catch_up(s, 0, NULL, NULL, &last, &e) == DPB_OK && last == 1);
    CHECK(sql_int(url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                       "'dpbudgetd' AND state IS NOT NULL") <= 2);
    store_close(s);
}

/* ---- the server goes away ---- */

static void outage(const char *how, const char *dbname)
{
    char url[512];
    CHECK(pgh_fresh_db(dbname, url, sizeof url) == 0);
    char purl[512];
    pgh_db_url(dbname, "s3cr3tpw", purl, sizeof purl);
    store_pg_options o = {.pool = 3, .connect_timeout_s = 2, .statement_timeout_ms = 2000};
    ledger_store *s = open_store(purl, &o, NULL);
    if (s == NULL)
        return;
    uint64_t seq = 0, last = 0;
    CHECK(store_append(s, 1, "before", 6, &seq) == DPB_OK && store_sync(s, seq) == DPB_OK);
    CHECK(store_catch_up(s, 1, NULL, NULL, &last, NULL) == DPB_OK); /* a pool connection */
    CHECK(pgh_ctl(how) == 0);

    dpb_error e = {0};
    double t0 = tl_now();
    CHECK(store_append(s, 1, "lost", 4, &seq) == DPB_OK && seq == 2);
    CHECK(store_sync(s, seq) == DPB_EUNAVAILABLE);
    CHECK(store_durable_seq(s) == 1);
    CHECK(store_catch_up(s, 1, NULL, NULL, &last, &e) == DPB_EUNAVAILABLE);
    CHECK(store_append(s, 1, "lost", 4, &seq) == DPB_OK && seq == 2); /* reconnects: refused */
    CHECK(store_sync(s, seq) == DPB_EUNAVAILABLE);
    double dt = tl_now() - t0;
    CHECKF(dt < 2 * (o.connect_timeout_s + o.statement_timeout_ms / 1000.0), "%.2f s", dt);
    CHECK(store_failed(s) == 0);
    CHECK(store_error(s, &e) == DPB_EUNAVAILABLE);
    CHECKF(strstr(e.detail, "s3cr3tpw") == NULL && strstr(e.detail, "127.0.0.1") != NULL, "%s",
           e.detail);
    printf("pg: after %s: %s\n", how, e.detail);

    CHECK(pgh_ctl("restart") == 0);
    /* the same store instance works again, without reopening */
    dpb_error_clear(&e);
    CHECKF(store_catch_up(s, 1, NULL, NULL, &last, &e) == DPB_OK, "%s", e.detail);
    CHECK(last == 1);
    CHECK(store_append(s, 1, "after", 5, &seq) == DPB_OK && seq == 2);
    CHECK(store_sync(s, seq) == DPB_OK);
    CHECK(store_durable_seq(s) == 2);
    /* the server restarts while the store is idle: its first use after works (the pool's
     * and the flusher's idle connections are found dead and replaced) */
    CHECK(pgh_ctl(how) == 0);
    CHECK(pgh_ctl("restart") == 0);
    dpb_error_clear(&e);
    CHECKF(store_catch_up(s, 2, NULL, NULL, &last, &e) == DPB_OK, "%s", e.detail);
    CHECK(store_append(s, 1, "again", 5, &seq) == DPB_OK && seq == 3);
    CHECK(store_sync(s, seq) == DPB_OK);
    store_close(s);
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_log") == 3);
}

static void test_server_stopped_then_restarted(void)
{
    if (!pgh_up())
        return;
    outage("stop", "t_stop");
}

static void test_server_killed_then_restarted(void)
{
    if (!pgh_up())
        return;
    outage("kill", "t_kill");
}

/* A server that stops answering (a hang or a partition: no error, no closed socket) is caught
 * by the store's own deadline, not by TCP's minutes. */
static void test_server_hangs(void)
{
    char url[512];
    store_pg_options o = {.pool = 2, .connect_timeout_s = 1, .statement_timeout_ms = 500};
    ledger_store *s = fresh_store("t_hang", url, sizeof url, &o);
    if (s == NULL)
        return;
    uint64_t seq = 0, last = 0;
    CHECK(store_append(s, 1, "before", 6, &seq) == DPB_OK && store_sync(s, seq) == DPB_OK);
    CHECK(pgh_ctl("freeze") == 0);
    double t0 = tl_now();
    CHECK(store_append(s, 1, "frozen", 6, &seq) == DPB_OK && seq == 2);
    CHECK(store_sync(s, seq) == DPB_EUNAVAILABLE);
    double dt = tl_now() - t0;
    /* the statement's deadline: statement_timeout + connect_timeout */
    CHECKF(dt >= 1.0 && dt < 4.0, "%.2f s", dt);
    dpb_error e = {0};
    CHECK(store_error(s, &e) == DPB_EUNAVAILABLE);
    CHECKF(strstr(e.detail, "no answer within the statement timeout") != NULL, "%s", e.detail);
    /* issue 34: the next callers do not wait out the deadline again: refused at once until
     * the store's probe sees the database answer; what it saw is read without waiting */
    store_health h;
    store_get_health(s, &h);
    CHECKF(h.refusing && !h.answering, "refusing %d answering %d", h.refusing, h.answering);
    t0 = tl_now();
    dpb_error_clear(&e);
    CHECK(store_catch_up(s, store_durable_seq(s), NULL, NULL, &last, &e) == DPB_EUNAVAILABLE);
    CHECKF(tl_now() - t0 < 0.2, "a caller refused at once, not after %.2f s", tl_now() - t0);
    CHECKF(strstr(e.detail, "not asked again until it does") != NULL, "%s", e.detail);
    CHECK(pgh_ctl("thaw") == 0);
    /* the probe (once a second) finds it answering again */
    for (int i = 0; i < 100; i++) {
        store_get_health(s, &h);
        if (h.answering)
            break;
        usleep(50000);
    }
    CHECKF(h.answering && !h.refusing, "answering again after the thaw: %d %d", h.answering,
           h.refusing);
    /* whether the frozen INSERT committed is unknown: a catch-up reads back what did, and an
     * append at a seq taken meanwhile loses the race and is computed again */
    int done = 0;
    for (int attempt = 0; attempt < 10 && !done; attempt++) {
        dpb_error_clear(&e);
        CHECKF(store_catch_up(s, store_durable_seq(s), NULL, NULL, &last, &e) == DPB_OK, "%s",
               e.detail);
        CHECK(store_append(s, 1, "after", 5, &seq) == DPB_OK && seq == last + 1);
        dpb_status st = store_sync(s, seq);
        CHECK(st == DPB_OK || st == DPB_ECONFLICT);
        done = st == DPB_OK;
        if (!done)
            usleep(50000);
    }
    CHECK(done);
    store_close(s);
    long long n = sql_int(url, "SELECT count(*) FROM dpbudget_log");
    CHECKF(n == 2 || n == 3, "%lld", n);
    CHECK(sql_int(url, "SELECT count(*) FROM dpbudget_log WHERE payload = 'after'") == 1);
}

/* A server that would acknowledge commits a crash loses is refused (fsync = off);
 * synchronous_commit = off in the url is overridden (not observable from another session:
 * this checks only that such a url works). */
static void test_durability_settings(void)
{
    char url[512];
    ledger_store *s = fresh_store("t_durable", url, sizeof url, &FAST);
    if (s == NULL)
        return;
    store_close(s);
    CHECK(pgh_sql(url, "ALTER SYSTEM SET fsync = off", NULL, 0) == 0);
    CHECK(pgh_sql(url, "SELECT pg_reload_conf()", NULL, 0) == 0);
    usleep(300000); /* the reload is asynchronous */
    dpb_error e = {0};
    CHECK(store_pg_open(url, &FAST, &s, &e) == DPB_EUNSUPPORTED);
    CHECKF(strstr(e.detail, "fsync = off") != NULL, "%s", e.detail);
    CHECK(pgh_sql(url, "ALTER SYSTEM RESET fsync", NULL, 0) == 0);
    CHECK(pgh_sql(url, "SELECT pg_reload_conf()", NULL, 0) == 0);
    usleep(300000);
    char off[600];
    snprintf(off, sizeof off, "%s%%20-csynchronous_commit%%3Doff", url);
    char got[16];
    CHECK(pgh_sql(off, "SHOW synchronous_commit", got, sizeof got) == 0 && strcmp(got, "off") == 0);
    s = open_store(off, &FAST, NULL);
    if (s == NULL)
        return;
    uint64_t seq = 0;
    CHECK(store_append(s, 1, "x", 1, &seq) == DPB_OK && store_sync(s, seq) == DPB_OK);
    store_close(s);
}

static void test_password_never_echoed(void)
{
    if (!pgh_up())
        return;
    ledger_store *s = NULL;
    dpb_error e = {0};
    /* nothing listens on port 1 */
    CHECK(store_pg_open("postgresql://alice:hunter2pw@127.0.0.1:1/db?sslmode=disable&password="
                        "hunter3pw",
                        &FAST, &s, &e) == DPB_EUNAVAILABLE);
    CHECK(s == NULL);
    CHECKF(strstr(e.detail, "hunter") == NULL, "%s", e.detail);
    CHECKF(strstr(e.detail, "postgresql://alice:***@127.0.0.1:1/db?sslmode=disable&password=***") !=
               NULL,
           "%s", e.detail);
    /* every spelling libpq reads (and what it makes of a password it splits), through the
     * store's own messages: libpq's errors quote tokens of the string */
    static const char *const spellings[] = {
        "postgresql://alice:Pw?xLeakQ@127.0.0.1:1/db",
        "postgresql://alice:Pw#xLeakQ@127.0.0.1:1/db",
        "postgresql://alice:Pw/xLeakQ@127.0.0.1:1/db",
        "postgresql://alice:Pw@xLeakQ@127.0.0.1:1/db",
        "postgresql://alice@127.0.0.1:1/db?%70assword=xLeakQ",
        "postgresql://alice@127.0.0.1:1/db?sslmode=disable&pass%77ord=xLeakQ",
        "postgresql://alice@127.0.0.1:1/db?sslpassword=xLeakQ",
    };
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        dpb_error_clear(&e);
        dpb_status st = store_pg_open(spellings[i], &FAST, &s, &e);
        CHECKF(st != DPB_OK && strstr(e.detail, "LeakQ") == NULL, "%s: %s", spellings[i], e.detail);
        if (st == DPB_OK)
            store_close(s);
    }
    dpb_error_clear(&e);
    CHECK(store_pg_migrate("postgres://bob:pw%40x@127.0.0.1:1/db?password=hunter4", &FAST, NULL,
                           NULL, &e) == DPB_EUNAVAILABLE);
    CHECKF(strstr(e.detail, "hunter") == NULL && strstr(e.detail, "pw%40x") == NULL, "%s",
           e.detail);
    CHECK(store_is_pg_url("postgresql://h/d") && store_is_pg_url("postgres://h/d"));
    CHECK(!store_is_pg_url("/var/lib/dpbudget") && !store_is_pg_url(NULL) &&
          !store_is_pg_url("mysql://h/d"));
    dpb_error_clear(&e);
    CHECK(store_pg_open("/var/lib/dpbudget", &FAST, &s, &e) == DPB_EINVAL);
}

void test_reservation_owner_on_pg(void);  /* test_owner_pg.c */
void test_tree_on_pg(void);               /* test_tree_pg.c */
void test_tree_same_on_file_and_pg(void); /* test_tree_pg.c */
void test_tree_tamper_on_pg(void);        /* test_tree_pg.c */
void test_reservation_owner_on_pg(void);  /* test_owner_pg.c */
void test_time_on_pg(void);               /* test_time_pg.c */

int main(int argc, char **argv)
{
    static const tl_test tests[] = {
        TL_T(test_migrate_concurrent_and_idempotent),
        TL_T(test_newer_schema_refused),
        TL_T(test_round_trip),
        TL_T(test_gap_is_corruption),
        TL_T(test_two_stores_race_for_a_seq),
        TL_T(test_catch_up_with_pending),
        TL_T(test_group_commit),
        TL_T(test_snapshot_keeps_newest_two),
        TL_T(test_abandon_drops_pending),
        TL_T(test_pool_is_bounded),
        TL_T(test_server_stopped_then_restarted),
        TL_T(test_server_killed_then_restarted),
        TL_T(test_server_hangs),
        TL_T(test_durability_settings),
        TL_T(test_password_never_echoed),
        TL_T(test_reservation_owner_on_pg),
        TL_T(test_tree_on_pg),
        TL_T(test_tree_same_on_file_and_pg),
        TL_T(test_tree_tamper_on_pg),
        TL_T(test_time_on_pg),
    };
    int rc = tl_run("pg", tests, sizeof tests / sizeof tests[0], argc, argv);
    return rc;
}
