/* test_time.c - time in the ledger (LEDGER_FORMAT 5): every record carries the time it was
 * made, monotone per log and the same for a replica reading it; the log and the snapshot of
 * the format before times still open, their times unknown (0), never invented; the
 * ledger-wide series (ledger_get_series) agrees with what the rounds answered and the
 * summary showed, bucket by bucket over a year of hourly points made through the test clock,
 * drops what its rings no longer keep, survives a clean restart (snapshot) and a crash (the
 * log replayed), on the file store and on a shared log, and does not count a change that was
 * withdrawn. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/ledger/ledger.h"
#include "memstore.h"
#include "suites.h"

#define T0 1767225600000ull /* 2026-01-01T00:00:00Z */
#define HOUR_MS 3600000ull
#define DAY_MS 86400000ull

typedef struct {
    uint64_t ms;
} tclock;

static uint64_t tclock_now(void *ctx)
{
    return ((tclock *)ctx)->ms;
}

static ledger *on_log(memlog *g)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.snapshot_every = 100000000;
    ledger *l = NULL;
    dpb_error err = {0};
    ledger_store *s = memstore_open(g);
    dpb_status st = s ? ledger_open_store(&o, s, &l, &err) : DPB_ENOMEM;
    CHECKF(st == DPB_OK, "%s", err.detail);
    return st == DPB_OK ? l : NULL;
}

static ledger *on_dir(const char *dir)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.snapshot_every = 100000000;
    ledger *l = NULL;
    dpb_error err = {0};
    CHECKF(ledger_open(&o, &l, &err) == DPB_OK, "%s", err.detail);
    return l;
}

static void put(ledger *l, const char *id, double eps)
{
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "%s", id);
    in.epsilon = eps;
    in.delta = 1e-5;
    int created;
    dpb_error err = {0};
    CHECKF(ledger_put_client(l, &in, &created, &out, &err) == DPB_OK, "%s", err.detail);
}

/* What a round answered, summed by the test itself. */
typedef struct {
    uint64_t rounds, charges, refusals[LEDGER_NREASONS];
    double eps;
} tally;

/* A round (ttl > 0: a reservation) of a Gaussian of sigma over ids, its answer added to *t
 * (may be NULL; a reservation adds no charge). */
static dpb_status round_of(ledger *l, const char *rid, double sigma, const char *const *ids,
                           size_t n, uint64_t ttl, tally *t)
{
    dp_event *ev = dp_event_new(DP_EV_GAUSSIAN);
    if (ev == NULL)
        return DPB_ENOMEM;
    ev->u.noise.noise_multiplier = sigma;
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    rq.reserve = ttl > 0;
    rq.ttl_seconds = ttl;
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_round(l, &rq, &res, &err);
    if (st == DPB_OK) {
        if (t) {
            t->rounds++;
            for (size_t i = 0; i < res.n && res.outcomes; i++) {
                const ledger_outcome *o = &res.outcomes[i];
                if (!o->admitted) {
                    t->refusals[o->reason]++;
                } else if (!rq.reserve) {
                    t->charges++;
                    t->eps += o->spent_after - o->spent_before;
                }
            }
        }
        ledger_round_res_free(&res);
    }
    dp_event_free(ev);
    return st;
}

static dpb_status commit(ledger *l, const char *rid, const char *const *rep, size_t n)
{
    unsigned char h[16];
    ledger_hash128(rid, strlen(rid), h);
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_commit(l, rid, rep, n, h, &res, &err);
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    return st;
}

/* The time of client id's history entry k (newest first), or UINT64_MAX. */
static uint64_t hist_time(ledger *l, const char *id, size_t k)
{
    ledger_history h;
    if (ledger_client_history(l, id, k, 1, &h) != DPB_OK)
        return UINT64_MAX;
    uint64_t t = h.n == 1 ? h.items[0].time_ms : UINT64_MAX;
    ledger_history_free(&h);
    return t;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static ledger_series series(ledger *l, ledger_resolution r)
{
    ledger_series s;
    CHECK(ledger_get_series(l, r, 0, UINT64_MAX, &s) == DPB_OK);
    return s;
}

/* 1 when a and b show the same buckets with the same contents. */
static int same_series(const ledger_series *a, const ledger_series *b, const char *what)
{
    if (a->n != b->n || a->from_ms != b->from_ms || a->to_ms != b->to_ms) {
        CHECKF(0, "%s: %zu points [%llu, %llu) against %zu [%llu, %llu)", what, a->n,
               (unsigned long long)a->from_ms, (unsigned long long)a->to_ms, b->n,
               (unsigned long long)b->from_ms, (unsigned long long)b->to_ms);
        return 0;
    }
    for (size_t i = 0; i < a->n; i++)
        if (memcmp(&a->points[i], &b->points[i], sizeof a->points[i]) != 0) {
            CHECKF(0, "%s: point %zu (start %llu) differs: rounds %llu/%llu exhausted %llu/%llu",
                   what, i, (unsigned long long)a->points[i].start_ms,
                   (unsigned long long)a->points[i].rounds, (unsigned long long)b->points[i].rounds,
                   (unsigned long long)a->points[i].by_status[LEDGER_EXHAUSTED],
                   (unsigned long long)b->points[i].by_status[LEDGER_EXHAUSTED]);
            return 0;
        }
    return 1;
}

/* ---- the records' times ---- */

/* Every record carries its time in its bytes (type | 0x80, u64 ms first); a clock going
 * back never makes a record older than the one before it; the history shows each charge's
 * time, and a replica reading the same log sees the writer's times. */
static void time_records_monotone(void)
{
    memlog g;
    memlog_init(&g);
    ledger *l = on_log(&g);
    if (l == NULL)
        goto out;
    tclock c = {T0};
    ledger_set_clock(l, tclock_now, &c);
    put(l, "a", 50.0);
    static const char *const A[] = {"a"};
    CHECK(round_of(l, "r1", 5.0, A, 1, 0, NULL) == DPB_OK);
    c.ms = T0 - HOUR_MS; /* the clock steps back an hour */
    CHECK(round_of(l, "r2", 5.0, A, 1, 0, NULL) == DPB_OK);
    c.ms = T0 + 2 * HOUR_MS + 7;
    CHECK(round_of(l, "r3", 5.0, A, 1, 0, NULL) == DPB_OK);
    uint64_t prev = 0;
    CHECK(g.nrec >= 4);
    for (size_t i = 0; i < g.nrec; i++) {
        CHECKF((g.rec[i].type & 0x80) && g.rec[i].n >= 8, "record %zu: type %u, %zu bytes", i + 1,
               g.rec[i].type, g.rec[i].n);
        uint64_t t = g.rec[i].n >= 8 ? le64(g.rec[i].p) : 0;
        CHECKF(t >= prev && t >= T0, "record %zu: time %llu after %llu", i + 1,
               (unsigned long long)t, (unsigned long long)prev);
        prev = t;
    }
    CHECK(prev == T0 + 2 * HOUR_MS + 7);
    CHECK(hist_time(l, "a", 0) == T0 + 2 * HOUR_MS + 7);
    CHECK(hist_time(l, "a", 1) == T0); /* max(clock, the record before) */
    CHECK(hist_time(l, "a", 2) == T0);
    CHECK(ledger_last_time(l) == T0 + 2 * HOUR_MS + 7);
    ledger *r = on_log(&g); /* a replica on the same log: the writer's times */
    if (r) {
        CHECK(hist_time(r, "a", 0) == T0 + 2 * HOUR_MS + 7);
        CHECK(hist_time(r, "a", 2) == T0);
        CHECK(ledger_last_time(r) == T0 + 2 * HOUR_MS + 7);
        /* its own next record is never before the last one it read, whatever its clock */
        tclock rc = {T0 - DAY_MS};
        ledger_set_clock(r, tclock_now, &rc);
        CHECK(round_of(r, "r4", 5.0, A, 1, 0, NULL) == DPB_OK);
        CHECK(hist_time(r, "a", 0) == T0 + 2 * HOUR_MS + 7);
        ledger_close_nosnapshot(r);
    }
    ledger_close_nosnapshot(l);
out:
    memlog_free(&g);
}

/* A log and a snapshot written before times (format 4) still open: the times of what they
 * hold are unknown (0: null in the API), the series has no bucket for them, and what comes
 * after carries its time. */
static void time_old_format_still_read(void)
{
    static const char *const AB[] = {"a", "b"};
    memlog g;
    memlog_init(&g);
    ledger *l = on_log(&g);
    if (l == NULL)
        goto snap;
    tclock c = {T0};
    ledger_set_clock(l, tclock_now, &c);
    put(l, "a", 50.0);
    put(l, "b", 50.0);
    CHECK(round_of(l, "r1", 5.0, AB, 2, 0, NULL) == DPB_OK);
    CHECK(round_of(l, "h1", 5.0, AB, 2, 3600, NULL) == DPB_OK);
    ledger_close_nosnapshot(l);
    CHECK(memlog_strip_times(&g) == g.nrec); /* the log as format 4 wrote it */
    l = on_log(&g);
    if (l) {
        CHECK(hist_time(l, "a", 0) == 0 && hist_time(l, "a", 1) == 0);
        CHECK(ledger_last_time(l) == 0);
        ledger_series s = series(l, LEDGER_HOUR);
        CHECK(s.n == 0 && s.from_ms == 0 && s.kept_from_ms[LEDGER_MINUTE] == 0);
        ledger_series_free(&s);
        tclock c2 = {T0 + DAY_MS};
        ledger_set_clock(l, tclock_now, &c2);
        CHECK(commit(l, "h1", AB, 1) == DPB_OK);
        CHECK(round_of(l, "r2", 5.0, AB, 2, 0, NULL) == DPB_OK);
        CHECK(hist_time(l, "a", 0) == T0 + DAY_MS);
        CHECK(hist_time(l, "a", 1) == T0 + DAY_MS); /* h1: charged by its commit, timed */
        CHECK(hist_time(l, "b", 1) == T0 + DAY_MS); /* h1: released for b by the commit */
        CHECK(hist_time(l, "a", 2) == 0);
        s = series(l, LEDGER_DAY);
        CHECK(s.n == 1 && s.points[0].start_ms == T0 + DAY_MS);
        /* r2 and the commit of h1 (a charge, no round), nothing of r1 */
        CHECK(s.n == 1 && s.points[0].rounds == 1 && s.points[0].charges == 3);
        ledger_series_free(&s);
        ledger_close_nosnapshot(l);
    }
snap:
    memlog_free(&g);
    /* a snapshot of format 4 (and its log) */
    memlog_init(&g);
    l = on_log(&g);
    if (l == NULL)
        goto out;
    ledger_set_clock(l, tclock_now, &c);
    put(l, "a", 50.0);
    put(l, "b", 50.0);
    CHECK(round_of(l, "r1", 5.0, AB, 2, 0, NULL) == DPB_OK);
    ledger_client before;
    CHECK(ledger_get_client(l, "a", &before) == DPB_OK);
    ledger_close(l); /* its snapshot */
    CHECK(g.snap != NULL && g.snap[0] == LEDGER_FORMAT);
    CHECK(memlog_snap_cut_times(&g, T0) == 0);
    memlog_strip_times(&g);
    l = on_log(&g);
    if (l) {
        ledger_client after;
        CHECK(ledger_get_client(l, "a", &after) == DPB_OK && after.spent == before.spent &&
              after.rounds == 1);
        CHECK(hist_time(l, "a", 0) == 0);
        CHECK(ledger_last_time(l) == 0);
        ledger_series s = series(l, LEDGER_MINUTE);
        CHECK(s.n == 0);
        ledger_series_free(&s);
        ledger_close_nosnapshot(l);
    }
out:
    memlog_free(&g);
}

/* ---- the series ---- */

#define NCL 10
#define YEAR_ROUNDS (365 * 4) /* one round every 6 hours for 365 days */

/* A year of rounds every 6 hours over 10 clients of growing budgets (they exhaust one after
 * another) and an unknown one: each hourly bucket holds exactly what the rounds in it
 * answered and the statuses the summary showed after its last round; the days and the
 * minutes agree, the minute ring keeps only its last day; the totals telescope to the
 * clients' spends. */
static void time_series_year(void)
{
    memlog g;
    memlog_init(&g);
    ledger *l = on_log(&g);
    if (l == NULL) {
        memlog_free(&g);
        return;
    }
    tclock c = {T0 + 5 * 60000};
    ledger_set_clock(l, tclock_now, &c);
    char ids[NCL + 1][16];
    const char *p[NCL + 1];
    for (int i = 0; i < NCL; i++) {
        snprintf(ids[i], sizeof ids[i], "c%d", i);
        put(l, ids[i], 1.0 + 1.5 * i);
        p[i] = ids[i];
    }
    p[NCL] = "ghost"; /* unknown: refused every round */
    tally *want = calloc(YEAR_ROUNDS, sizeof *want);
    uint64_t(*st)[LEDGER_NSTATUS] = calloc(YEAR_ROUNDS, sizeof *st);
    if (want == NULL || st == NULL)
        goto done;
    for (int k = 0; k < YEAR_ROUNDS; k++) {
        c.ms = T0 + (uint64_t)k * 6 * HOUR_MS + 5 * 60000 + (uint64_t)k % 7;
        char rid[32];
        snprintf(rid, sizeof rid, "y%d", k);
        CHECK(round_of(l, rid, 20.0, p, NCL + 1, 0, &want[k]) == DPB_OK);
        ledger_summary s;
        ledger_get_summary(l, &s);
        memcpy(st[k], s.by_status, sizeof st[k]);
    }
    ledger_series h = series(l, LEDGER_HOUR);
    /* every hour from the first round's to the last's: 365 days less 6 hours, plus one */
    CHECKF(h.n == (size_t)(YEAR_ROUNDS - 1) * 6 + 1, "%zu hourly points", h.n);
    CHECK(h.from_ms == T0 && h.to_ms == T0 + (uint64_t)(YEAR_ROUNDS - 1) * 6 * HOUR_MS + HOUR_MS);
    double eps_series = 0.0, eps_rounds = 0.0;
    int bad = 0;
    for (size_t i = 0; i < h.n && !bad; i++) {
        const ledger_point *q = &h.points[i];
        CHECK(q->start_ms == T0 + i * HOUR_MS);
        int k = (int)(i / 6); /* the round of this bucket (or the last one before it) */
        tally z = {0};
        const tally *w = i % 6 == 0 ? &want[k] : &z;
        bad |= q->rounds != w->rounds || q->charges != w->charges;
        for (int r = 0; r < LEDGER_NREASONS; r++)
            bad |= q->refusals[r] != w->refusals[r];
        bad |= fabs(q->epsilon_spent - w->eps) > 1e-12 * (1.0 + w->eps);
        bad |= memcmp(q->by_status, st[k], sizeof st[k]) != 0;
        uint64_t sum = 0;
        for (int s = 0; s < LEDGER_NSTATUS; s++)
            sum += q->by_status[s];
        bad |= sum != NCL;
        CHECKF(!bad,
               "hour %zu (round %d): rounds %llu charges %llu eps %.17g exhausted %llu; "
               "want %llu %llu %.17g %llu",
               i, k, (unsigned long long)q->rounds, (unsigned long long)q->charges,
               q->epsilon_spent, (unsigned long long)q->by_status[LEDGER_EXHAUSTED],
               (unsigned long long)w->rounds, (unsigned long long)w->charges, w->eps,
               (unsigned long long)st[k][LEDGER_EXHAUSTED]);
        eps_series += q->epsilon_spent;
    }
    /* they exhaust over the year: the first early, the last never */
    CHECK(st[YEAR_ROUNDS - 1][LEDGER_EXHAUSTED] > 0 && st[YEAR_ROUNDS - 1][LEDGER_ACTIVE] > 0);
    CHECK(st[0][LEDGER_EXHAUSTED] == 0);
    for (int k = 0; k < YEAR_ROUNDS; k++)
        eps_rounds += want[k].eps;
    double spent = 0.0;
    uint64_t charged = 0, charges = 0;
    for (int i = 0; i < NCL; i++) {
        ledger_client cl;
        CHECK(ledger_get_client(l, ids[i], &cl) == DPB_OK);
        spent += cl.spent;
        charged += cl.rounds;
    }
    for (size_t i = 0; i < h.n; i++)
        charges += h.points[i].charges;
    CHECK(charges == charged);
    CHECK_REL(eps_series, spent, 1e-12); /* the increases telescope to the spends */
    CHECK_REL(eps_rounds, spent, 1e-12);
    ledger_series d = series(l, LEDGER_DAY);
    CHECK(d.n == 365);
    uint64_t rounds = 0, unknown = 0;
    for (size_t i = 0; i < d.n; i++) {
        CHECK(d.points[i].rounds == 4);
        rounds += d.points[i].rounds;
        unknown += d.points[i].refusals[LEDGER_UNKNOWN_CLIENT];
        /* a day's statuses are its last hour's */
        size_t hi = i * 24 + 23 < h.n ? i * 24 + 23 : h.n - 1;
        CHECK(memcmp(d.points[i].by_status, h.points[hi].by_status, sizeof d.points[i].by_status) ==
              0);
    }
    CHECK(rounds == YEAR_ROUNDS && unknown == YEAR_ROUNDS);
    ledger_series m = series(l, LEDGER_MINUTE);
    /* the minute ring keeps its last 1440 buckets: the last day, 4 rounds in it */
    CHECK(m.n == LEDGER_SERIES_KEEP[LEDGER_MINUTE]);
    CHECK(m.to_ms == (c.ms / 60000 + 1) * 60000 && m.to_ms - m.from_ms == DAY_MS);
    uint64_t mr = 0;
    for (size_t i = 0; i < m.n; i++)
        mr += m.points[i].rounds;
    CHECK(mr == 4);
    /* a window: [from, to) picks the buckets overlapping it */
    ledger_series w;
    CHECK(ledger_get_series(l, LEDGER_DAY, T0 + 10 * DAY_MS + 1, T0 + 12 * DAY_MS, &w) == DPB_OK);
    CHECK(w.n == 2 && w.from_ms == T0 + 10 * DAY_MS && w.to_ms == T0 + 12 * DAY_MS);
    ledger_series_free(&w);
    CHECK(ledger_get_series(l, LEDGER_DAY, T0 + 400 * DAY_MS, UINT64_MAX, &w) == DPB_OK);
    CHECK(w.n == 0 && w.from_ms == 0 && w.to_ms == 0);
    ledger_series_free(&w);
    ledger_series_free(&m);
    ledger_series_free(&d);
    ledger_series_free(&h);
    /* a restart from the snapshot, and a replica replaying the whole log, show the same */
    ledger *r = on_log(&g);
    if (r) {
        for (int res = 0; res < LEDGER_NRES; res++) {
            ledger_series a = series(l, (ledger_resolution)res),
                          b = series(r, (ledger_resolution)res);
            same_series(&a, &b, "replica replaying the log");
            ledger_series_free(&a);
            ledger_series_free(&b);
        }
        ledger_close_nosnapshot(r);
    }
    ledger_series keep[LEDGER_NRES];
    for (int res = 0; res < LEDGER_NRES; res++)
        keep[res] = series(l, (ledger_resolution)res);
    ledger_close(l);
    l = on_log(&g);
    for (int res = 0; l && res < LEDGER_NRES; res++) {
        ledger_series b = series(l, (ledger_resolution)res);
        same_series(&keep[res], &b, "after the snapshot");
        ledger_series_free(&b);
    }
    for (int res = 0; res < LEDGER_NRES; res++)
        ledger_series_free(&keep[res]);
done:
    free(want);
    free(st);
    ledger_close_nosnapshot(l);
    memlog_free(&g);
}

/* Three days of rounds, reservations and commits on the file store: a crash (the log
 * replayed, no snapshot), a clean restart (the snapshot) and a snapshot with records after
 * it all give back the series the live ledger showed, statuses at each bucket's end included. */
static void time_series_restart_file(void)
{
    char dir[64];
    if (tl_make_dir(dir, sizeof dir, "dpb_time_") != 0)
        return;
    ledger *l = on_dir(dir);
    if (l == NULL) {
        tl_remove_dir(dir);
        return;
    }
    tclock c = {T0};
    ledger_set_clock(l, tclock_now, &c);
    static const char *const ALL[] = {"a", "b", "c", "d", "nobody"};
    put(l, "a", 2.0);
    put(l, "b", 4.0);
    put(l, "c", 8.0);
    put(l, "d", 30.0);
    int k = 0;
    for (; k < 3 * 48; k++) { /* every 30 minutes for 3 days */
        c.ms = T0 + (uint64_t)k * 1800000 + 17;
        char rid[32];
        snprintf(rid, sizeof rid, "f%d", k);
        if (k % 5 == 3) { /* a reservation, committed for a and d half an hour later */
            CHECK(round_of(l, rid, 4.0, ALL, 5, 7200, NULL) == DPB_OK);
            continue;
        }
        if (k % 5 == 4) {
            char hid[32];
            snprintf(hid, sizeof hid, "f%d", k - 1);
            static const char *const AD[] = {"a", "d"};
            dpb_status cs = commit(l, hid, AD, 2);
            CHECK(cs == DPB_OK || cs == DPB_EINVAL); /* a may not have been admitted */
            if (cs != DPB_OK)
                CHECK(commit(l, hid, AD + 1, 1) == DPB_OK);
        }
        CHECK(round_of(l, rid, 4.0, ALL, 5, 0, NULL) == DPB_OK);
    }
    ledger_series live[LEDGER_NRES];
    for (int r = 0; r < LEDGER_NRES; r++)
        live[r] = series(l, (ledger_resolution)r);
    CHECK(live[LEDGER_HOUR].n == 72 && live[LEDGER_DAY].n == 3);
    ledger_close_nosnapshot(l); /* a crash: the log alone */
    static const char *const why[] = {"after a crash", "after a clean stop"};
    for (int pass = 0; pass < 2; pass++) {
        l = on_dir(dir);
        for (int r = 0; l && r < LEDGER_NRES; r++) {
            ledger_series b = series(l, (ledger_resolution)r);
            same_series(&live[r], &b, why[pass]);
            ledger_series_free(&b);
        }
        if (l && pass == 0)
            ledger_close(l); /* the snapshot */
        else if (l)
            break;
    }
    /* records after the snapshot, then a crash: snapshot + log */
    if (l) {
        ledger_set_clock(l, tclock_now, &c);
        for (int j = 0; j < 10; j++, k++) {
            c.ms += 25 * 60000;
            char rid[32];
            snprintf(rid, sizeof rid, "f%d", k);
            CHECK(round_of(l, rid, 4.0, ALL, 5, 0, NULL) == DPB_OK);
        }
        for (int r = 0; r < LEDGER_NRES; r++) {
            ledger_series_free(&live[r]);
            live[r] = series(l, (ledger_resolution)r);
        }
        ledger_close_nosnapshot(l);
        l = on_dir(dir);
        for (int r = 0; l && r < LEDGER_NRES; r++) {
            ledger_series b = series(l, (ledger_resolution)r);
            same_series(&live[r], &b, "snapshot and log after a crash");
            ledger_series_free(&b);
        }
        ledger_close_nosnapshot(l);
    }
    for (int r = 0; r < LEDGER_NRES; r++)
        ledger_series_free(&live[r]);
    tl_remove_dir(dir);
}

/* A change withdrawn (a lost race on a shared log, computed again; a database that cannot be
 * reached) is not counted: the bucket holds each round once. */
static void time_series_withdrawn_not_counted(void)
{
    memlog g;
    memlog_init(&g);
    ledger *l = on_log(&g);
    if (l == NULL)
        goto out;
    tclock c = {T0};
    ledger_set_clock(l, tclock_now, &c);
    static const char *const AB[] = {"a", "b"};
    put(l, "a", 50.0);
    put(l, "b", 50.0);
    atomic_store(&g.fail_next, DPB_ECONFLICT); /* lost, computed again, charged once */
    CHECK(round_of(l, "w1", 5.0, AB, 2, 0, NULL) == DPB_OK);
    ledger_client a;
    CHECK(ledger_get_client(l, "a", &a) == DPB_OK && a.rounds == 1);
    atomic_store(&g.fail_next, DPB_EUNAVAILABLE); /* withdrawn: nothing charged */
    CHECK(round_of(l, "w2", 5.0, AB, 2, 0, NULL) == DPB_EUNAVAILABLE);
    CHECK(round_of(l, "w3", 5.0, AB, 2, 3600, NULL) == DPB_OK);
    atomic_store(&g.fail_next, DPB_EUNAVAILABLE);
    CHECK(commit(l, "w3", AB, 2) == DPB_EUNAVAILABLE); /* the commit withdrawn */
    ledger_series s = series(l, LEDGER_MINUTE);
    CHECK(s.n == 1 && s.points[0].rounds == 2 && s.points[0].charges == 2);
    ledger_series_free(&s);
    CHECK(commit(l, "w3", AB, 2) == DPB_OK);
    s = series(l, LEDGER_MINUTE);
    CHECK(s.n == 1 && s.points[0].rounds == 2 && s.points[0].charges == 4);
    CHECK(ledger_get_client(l, "a", &a) == DPB_OK && a.rounds == 2);
    CHECK(s.n == 1 && fabs(s.points[0].epsilon_spent - 2.0 * a.spent) < 1e-12);
    ledger_series_free(&s);
    ledger_close_nosnapshot(l);
out:
    memlog_free(&g);
}

const tl_test TIME_TESTS[] = {
    TL_T(time_records_monotone),    TL_T(time_old_format_still_read),        TL_T(time_series_year),
    TL_T(time_series_restart_file), TL_T(time_series_withdrawn_not_counted),
};
const size_t TIME_NTESTS = sizeof TIME_TESTS / sizeof TIME_TESTS[0];
