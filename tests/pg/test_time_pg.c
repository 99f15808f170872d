/*
 * test_time_pg.c - time in the ledger on the PostgreSQL store (pg_harness.h): every record
 * the database keeps carries its time in its payload (type | 128, u64 ms first), monotone
 * along the log though the replicas' clocks disagree; a replica replaying the shared log and
 * a ledger opened from the database's snapshot show the same series and the same charge
 * times as the writers; a log rewritten as the version before times wrote it still opens,
 * its times unknown. Part of pg_tests (test_store_pg.c runs it).
 */
#include "../testlib.h"

#include "../../core/ledger/ledger.h"
#include "pg_harness.h"

void test_time_on_pg(void);

#define T0 1767225600000ull /* 2026-01-01T00:00:00Z */

static uint64_t clock_of(void *ctx)
{
    return *(uint64_t *)ctx;
}

static ledger *open_pg(const char *url)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.ledger_url = url;
    o.default_budget = 1;
    o.default_epsilon = 20.0;
    o.default_delta = 1e-5;
    ledger *l = NULL;
    dpb_error e = {0};
    CHECKF(ledger_open(&o, &l, &e) == DPB_OK, "%s", e.detail);
    return l;
}

/* A one-step round (ttl 0) or a reservation over ids[0..n) of G(4). */
static dpb_status go(ledger *l, const char *rid, const char *const *ids, size_t n, uint64_t ttl)
{
    dp_event *ev = dp_event_new(DP_EV_GAUSSIAN);
    if (ev == NULL)
        return DPB_ENOMEM;
    ev->u.noise.noise_multiplier = 4.0;
    ledger_round_req q;
    memset(&q, 0, sizeof q);
    snprintf(q.round_id, sizeof q.round_id, "%s", rid);
    q.policy = LEDGER_ADMIT_ELIGIBLE;
    q.event = ev;
    q.participants = ids;
    q.n = n;
    q.reserve = ttl > 0;
    q.ttl_seconds = ttl;
    ledger_hash128(rid, strlen(rid), q.body_hash);
    ledger_round_res r;
    dpb_error e = {0};
    dpb_status st = ledger_round(l, &q, &r, &e);
    if (st == DPB_OK)
        ledger_round_res_free(&r);
    dp_event_free(ev);
    return st;
}

static uint64_t newest_time(ledger *l, const char *id)
{
    ledger_history h;
    if (ledger_client_history(l, id, 0, 1, &h) != DPB_OK)
        return UINT64_MAX;
    uint64_t t = h.n ? h.items[0].time_ms : UINT64_MAX;
    ledger_history_free(&h);
    return t;
}

/* 1 when a and b show the same series at every resolution. */
static int same(ledger *a, ledger *b)
{
    int ok = 1;
    for (int r = 0; r < LEDGER_NRES; r++) {
        ledger_series x, y;
        CHECK(ledger_get_series(a, (ledger_resolution)r, 0, UINT64_MAX, &x) == DPB_OK);
        CHECK(ledger_get_series(b, (ledger_resolution)r, 0, UINT64_MAX, &y) == DPB_OK);
        int eq = x.n == y.n && x.from_ms == y.from_ms &&
                 (x.n == 0 || memcmp(x.points, y.points, x.n * sizeof *x.points) == 0);
        CHECKF(eq, "resolution %d: %zu points against %zu", r, x.n, y.n);
        ok &= eq;
        ledger_series_free(&x);
        ledger_series_free(&y);
    }
    return ok;
}

void test_time_on_pg(void)
{
    if (!pgh_up())
        return;
    char url[512];
    if (pgh_fresh_db("t_time", url, sizeof url) != 0) {
        CHECKF(0, "cannot create database t_time");
        return;
    }
    static const char *const ABC[] = {"a", "b", "c"};
    uint64_t ca = T0, cb = T0 - 3600000; /* b's clock an hour behind */
    ledger *a = open_pg(url), *b = open_pg(url);
    if (a && b) {
        ledger_set_clock(a, clock_of, &ca);
        ledger_set_clock(b, clock_of, &cb);
        for (int k = 0; k < 12; k++) { /* alternately, 20 minutes apart */
            char rid[32];
            snprintf(rid, sizeof rid, "t%d", k);
            ca += 1200000;
            cb += 1200000;
            CHECK(go(k % 2 ? b : a, rid, ABC, 3, 0) == DPB_OK);
        }
        CHECK(go(a, "h", ABC, 3, 3600) == DPB_OK);
        unsigned char h[16];
        ledger_hash128("h", 1, h);
        ledger_round_res r;
        dpb_error e = {0};
        static const char *const A[] = {"a"};
        CHECK(ledger_commit(b, "h", A, 1, h, &r, &e) == DPB_OK);
        ledger_round_res_free(&r);
        /* b's clock is behind: its records take the time of the one before */
        CHECK(newest_time(a, "a") == ca && newest_time(b, "a") == ca);
        CHECK(newest_time(b, "b") == ca); /* h: released for b by b's commit, at a's time */
        same(a, b);
        ledger_series s;
        CHECK(ledger_get_series(a, LEDGER_HOUR, 0, UINT64_MAX, &s) == DPB_OK);
        uint64_t rounds = 0, charges = 0;
        for (size_t i = 0; i < s.n; i++)
            rounds += s.points[i].rounds, charges += s.points[i].charges;
        CHECK(s.n == 5 && rounds == 13 && charges == 12 * 3 + 1);
        ledger_series_free(&s);
    }
    /* in the database: every record timed, times monotone along seq */
    char out[64];
    CHECK(pgh_sql(url, "SELECT count(*) FROM t_time.dpbudget_log WHERE type < 128", out,
                  sizeof out) == 0 &&
          strcmp(out, "0") == 0);
    CHECK(pgh_sql(url,
                  "SELECT count(*) FROM (SELECT seq, (SELECT sum(get_byte(payload, i)::numeric * "
                  "256::numeric ^ i) FROM generate_series(0, 7) i) AS t FROM t_time.dpbudget_log) "
                  "x WHERE t < "
                  "1767225600000"
                  " OR t < (SELECT coalesce(max(y.t), 0) FROM "
                  "(SELECT seq, (SELECT sum(get_byte(payload, i)::numeric * 256::numeric ^ i) "
                  "FROM generate_series(0, 7) i) AS t FROM t_time.dpbudget_log) y WHERE y.seq < "
                  "x.seq)",
                  out, sizeof out) == 0 &&
          strcmp(out, "0") == 0);
    ledger *c = a ? open_pg(url) : NULL; /* replays the whole log */
    if (c) {
        same(a, c);
        ledger_close_nosnapshot(c);
    }
    if (b)
        ledger_close(b);
    if (a)
        ledger_close(a); /* a snapshot in the database */
    ledger *d = open_pg(url);
    if (d) {
        CHECK(newest_time(d, "a") == ca);
        ledger_series s;
        CHECK(ledger_get_series(d, LEDGER_MINUTE, 0, UINT64_MAX, &s) == DPB_OK && s.n > 0);
        ledger_series_free(&s);
        ledger_close_nosnapshot(d);
    }
    /* the log as the version before times wrote it, and no snapshot */
    CHECK(pgh_sql(url,
                  "UPDATE t_time.dpbudget_log SET type = type - 128, payload = substring(payload "
                  "from 9), leaf = NULL WHERE type >= 128",
                  NULL, 0) == 0);
    CHECK(pgh_sql(url, "DELETE FROM t_time.dpbudget_snapshot", NULL, 0) == 0);
    CHECK(pgh_sql(url, "DELETE FROM t_time.dpbudget_tree", NULL, 0) == 0); /* no tree either */
    ledger *o = open_pg(url);
    if (o) {
        CHECK(newest_time(o, "a") == 0 && ledger_last_time(o) == 0);
        ledger_series s;
        CHECK(ledger_get_series(o, LEDGER_DAY, 0, UINT64_MAX, &s) == DPB_OK && s.n == 0);
        ledger_series_free(&s);
        ledger_client cl;
        CHECK(ledger_get_client(o, "a", &cl) == DPB_OK && cl.rounds == 13);
        ledger_close_nosnapshot(o);
    }
}
