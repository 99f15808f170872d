/* test_stuck.c - the status stuck (ledger.h, LEDGER_STUCK; docs/LEDGER.md, "Stuck clients"): a
 * client the latest round that tested its budget refused for it, with nothing since that gave
 * it room. Set by a refusal (over_budget) in every accounting mode and for (epsilon, delta)
 * events; cleared by an admission, a policy refusal, a release, expiry or commit without it of
 * a reservation it holds, and a budget change after which the refused round's spend fits (the
 * status then agrees with a dry run of that round, on either side of the threshold); left by
 * refusals that say nothing of its budget, dry runs, eligibility queries and retries; withdrawn
 * with a round whose sync failed; the same after a restart from the log and from a snapshot, on
 * a replica of a shared log, and a snapshot of format 6 still read. Reaches into nothing
 * inside the ledger: everything through ledger.h (a shared log through memstore.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/ledger/ledger.h"
#include "memstore.h"
#include "suites.h"

static dp_event *gaussian(double s)
{
    dp_event *e = dp_event_new(DP_EV_GAUSSIAN);
    if (e != NULL)
        e->u.noise.noise_multiplier = s;
    return e;
}

static dp_event *epsdelta(double eps, double delta)
{
    dp_event *e = dp_event_new(DP_EV_EPSILON_DELTA);
    if (e != NULL) {
        e->u.epsdelta.epsilon = eps;
        e->u.epsdelta.delta = delta;
    }
    return e;
}

/* A ledger on the data directory dir, or (dir NULL) on the shared log g. */
static ledger *open_on(const char *dir, memlog *g)
{
    ledger_options o = {.dir = dir, .snapshot_every = 1000000};
    ledger *l = NULL;
    dpb_error err = {0};
    ledger_store *s = dir ? NULL : memstore_open(g);
    dpb_status st = dir ? ledger_open(&o, &l, &err)
                    : s ? ledger_open_store(&o, s, &l, &err)
                        : DPB_ENOMEM;
    CHECKF(st == DPB_OK, "%s", err.detail);
    return st == DPB_OK ? l : NULL;
}

static ledger *on_dir(const char *dir)
{
    return open_on(dir, NULL);
}

static ledger *on_log(memlog *g)
{
    return open_on(NULL, g);
}

/* A fresh directory into dir[n] and a ledger on it; NULL (the directory gone) if either
 * cannot be made. */
static ledger *fresh(char *dir, size_t n)
{
    if (tl_make_dir(dir, n, "dpb_stuck_") != 0)
        return NULL;
    ledger *l = on_dir(dir);
    if (l == NULL)
        tl_remove_dir(dir);
    return l;
}

/* Create or change client id: budget (eps, delta), mode, labels ("" none). */
static dpb_status put(ledger *l, const char *id, double eps, double delta, ledger_mode mode,
                      const char *labels)
{
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "%s", id);
    snprintf(in.labels, sizeof in.labels, "%s", labels);
    in.epsilon = eps;
    in.delta = delta;
    in.mode = mode;
    int created;
    dpb_error err = {0};
    dpb_status st = ledger_put_client(l, &in, &created, &out, &err);
    CHECKF(st == DPB_OK, "put %s: %s", id, err.detail);
    return st;
}

typedef struct {
    dpb_status st;
    uint64_t seq;
    int admitted[4];
    ledger_reason reason[4];
    double after[4];
} answer;

/* A round (reserve: a reservation held an hour) of ev (freed here) over ids[0..n). */
static answer offer(ledger *l, const char *rid, dp_event *ev, const char *const *ids, size_t n,
                    int dry, int reserve, ledger_policy policy)
{
    answer a = {0};
    ledger_round_req rq = {.policy = policy,
                           .dry_run = dry,
                           .event = ev,
                           .participants = ids,
                           .n = n,
                           .reserve = reserve,
                           .ttl_seconds = reserve ? 3600 : 0};
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    ledger_round_res res;
    dpb_error err = {0};
    a.st = ledger_round(l, &rq, &res, &err);
    if (a.st == DPB_OK) {
        a.seq = res.seq;
        for (size_t i = 0; i < n && i < 4 && res.outcomes; i++) {
            a.admitted[i] = res.outcomes[i].admitted;
            a.reason[i] = res.outcomes[i].reason;
            a.after[i] = res.outcomes[i].spent_after;
        }
        ledger_round_res_free(&res);
    }
    dp_event_free(ev);
    return a;
}

static answer one(ledger *l, const char *rid, dp_event *ev, const char *id, int dry)
{
    const char *ids[1] = {id};
    return offer(l, rid, ev, ids, 1, dry, 0, LEDGER_ADMIT_ELIGIBLE);
}

static ledger_client view(ledger *l, const char *id)
{
    ledger_client c;
    memset(&c, 0, sizeof c);
    CHECKF(ledger_get_client(l, id, &c) == DPB_OK, "client %s", id);
    return c;
}

/* Client id's status is want; stuck: on round rid, recorded at seq (0: not checked). */
static void expect(ledger *l, const char *id, ledger_status want, const char *rid, uint64_t seq,
                   int line)
{
    ledger_client c = view(l, id);
    CHECKF(c.status == want, "line %d: client %s is %s, expected %s", line, id,
           ledger_status_name(c.status), ledger_status_name(want));
    if (want == LEDGER_STUCK) {
        CHECKF(strcmp(c.stuck_round, rid) == 0, "line %d: %s stuck on '%s', expected '%s'", line,
               id, c.stuck_round, rid);
        CHECKF(seq == 0 || c.stuck_since == seq, "line %d: %s stuck since %llu, expected %llu",
               line, id, (unsigned long long)c.stuck_since, (unsigned long long)seq);
    } else {
        CHECKF(c.stuck_round[0] == '\0' && c.stuck_since == 0,
               "line %d: %s is not stuck but names round '%s'", line, id, c.stuck_round);
    }
}
#define EXPECT(l, id, want, rid, seq) expect(l, id, want, rid, seq, __LINE__)

/* The summary's counts of active and stuck clients, and the list's total for each status
 * agree with them. */
static void counts(ledger *l, uint64_t active, uint64_t stuck, int line)
{
    ledger_summary s;
    ledger_get_summary(l, &s);
    CHECKF(s.active == active && s.stuck == stuck,
           "line %d: active %llu stuck %llu, expected %llu %llu", line,
           (unsigned long long)s.active, (unsigned long long)s.stuck, (unsigned long long)active,
           (unsigned long long)stuck);
    CHECKF(s.active + s.exhausted + s.uncertified + s.stuck == s.clients,
           "line %d: the statuses do not add up to the clients", line);
    uint64_t want[LEDGER_NSTATUS] = {s.active, s.exhausted, s.uncertified, s.stuck};
    for (int st = 0; st < LEDGER_NSTATUS; st++) {
        ledger_query q = {st, NULL, LEDGER_SORT_ID, 0, 0, 1000};
        ledger_client *page = calloc(1000, sizeof *page);
        size_t n = 0, total = 0;
        uint64_t v;
        CHECK(page && ledger_list(l, &q, page, &n, &total, &v) == DPB_OK);
        CHECKF(total == want[st] && n == want[st],
               "line %d: list of %s: %zu (total %zu), summary %llu", line,
               ledger_status_name((ledger_status)st), n, total, (unsigned long long)want[st]);
        for (size_t i = 0; i < n; i++)
            CHECK(page[i].status == (ledger_status)st);
        /* by spend (the heap path) too */
        q.sort = LEDGER_SORT_SPENT;
        CHECK(ledger_list(l, &q, page, &n, &total, &v) == DPB_OK && total == want[st]);
        free(page);
    }
}
#define COUNTS(l, a, s) counts(l, a, s, __LINE__)

/* ---- the definition, rdp ---- */

/* An rdp client with epsilon 1 offered a round of G(1) (about 5 at 1e-5): stuck on it, the
 * seq its record; an affordable round clears it, the next refusal names the new round; dry
 * runs, eligibility and a retry of the same round change nothing; labels alone keep it. */
static void stuck_rdp_definition(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    put(l, "a", 1.0, 1e-5, LEDGER_RDP, "");
    put(l, "b", 1.0, 1e-5, LEDGER_RDP, "");
    EXPECT(l, "a", LEDGER_ACTIVE, "", 0);
    uint64_t v0 = view(l, "a").version;
    /* a dry run and an eligibility query of what it cannot afford: nothing changes */
    answer d = one(l, "d1", gaussian(1.0), "a", 1);
    CHECK(d.st == DPB_OK && !d.admitted[0] && d.reason[0] == LEDGER_OVER_BUDGET);
    dp_event *ev = gaussian(1.0);
    const char *ids[] = {"a"};
    ledger_elig_req q = {ev, ids, 1, NULL, 10, 0, 10, NULL, 0};
    ledger_elig_item *items = NULL;
    size_t ni = 0;
    ledger_elig_page pg;
    dpb_error err = {0};
    CHECK(ledger_eligibility(l, &q, &items, &ni, &pg, &err) == DPB_OK && ni == 1 &&
          !items[0].eligible);
    free(items);
    dp_event_free(ev);
    EXPECT(l, "a", LEDGER_ACTIVE, "", 0);
    CHECK(view(l, "a").version == v0);
    COUNTS(l, 2, 0);
    /* the round itself */
    answer r1 = one(l, "r1", gaussian(1.0), "a", 0);
    CHECK(r1.st == DPB_OK && !r1.admitted[0] && r1.reason[0] == LEDGER_OVER_BUDGET && r1.seq > 0);
    EXPECT(l, "a", LEDGER_STUCK, "r1", r1.seq);
    CHECK(view(l, "a").version > v0 && view(l, "a").spent == 0.0);
    COUNTS(l, 1, 1);
    /* a retry of r1 answers the stored round: nothing changes */
    uint64_t v1 = view(l, "a").version;
    answer again = one(l, "r1", gaussian(1.0), "a", 0);
    CHECK(again.st == DPB_OK && view(l, "a").version == v1);
    EXPECT(l, "a", LEDGER_STUCK, "r1", r1.seq);
    /* labels alone keep it; an affordable round clears it */
    put(l, "a", 1.0, 1e-5, LEDGER_RDP, "site=3\n");
    EXPECT(l, "a", LEDGER_STUCK, "r1", r1.seq);
    answer r2 = one(l, "r2", gaussian(20.0), "a", 0);
    CHECK(r2.st == DPB_OK && r2.admitted[0]);
    EXPECT(l, "a", LEDGER_ACTIVE, "", 0);
    COUNTS(l, 2, 0);
    answer r3 = one(l, "r3", gaussian(1.0), "a", 0);
    EXPECT(l, "a", LEDGER_STUCK, "r3", r3.seq);
    /* an all-or-nothing round: b cannot afford it, a could: a passed its own test (policy),
     * so it is no longer stuck; b is */
    const char *ab[] = {"a", "b"};
    put(l, "b", 0.05, 1e-5, LEDGER_RDP, "");
    answer r5 = offer(l, "r5", gaussian(20.0), ab, 2, 0, 0, LEDGER_ALL_OR_NOTHING);
    CHECK(r5.st == DPB_OK && r5.reason[0] == LEDGER_POLICY && r5.reason[1] == LEDGER_OVER_BUDGET);
    EXPECT(l, "a", LEDGER_ACTIVE, "", 0);
    EXPECT(l, "b", LEDGER_STUCK, "r5", r5.seq);
    COUNTS(l, 1, 1);
    /* a refusal that says nothing of its budget (an (epsilon, delta) event an rdp client
     * cannot account) leaves b stuck on r5 */
    put(l, "p", 100.0, 1e-5, LEDGER_PLD, "");
    const char *bp[] = {"b", "p"};
    answer r6 = offer(l, "r6", epsdelta(0.1, 1e-7), bp, 2, 0, 0, LEDGER_ADMIT_ELIGIBLE);
    CHECK(r6.st == DPB_OK && r6.reason[0] == LEDGER_UNSUPPORTED && r6.admitted[1]);
    EXPECT(l, "b", LEDGER_STUCK, "r5", r5.seq);
    ledger_close_nosnapshot(l);
    tl_remove_dir(dir);
}

/* ---- every mode, and budget changes against a dry run ---- */

/* In each accounting mode (and for an (epsilon, delta) event under pld), a client refused for
 * its budget is stuck; after a budget change it is stuck exactly when a dry run of the refused
 * round is refused again, for budgets on either side of the round's spend; a change of delta
 * or of the accounting clears it; a lower budget keeps it (exhausted once below the spend). */
static void stuck_modes_and_budget(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    static const struct {
        ledger_mode mode;
        int epsdelta;
    } cases[] = {{LEDGER_RDP, 0},
                 {LEDGER_PLD, 0},
                 {LEDGER_PLD, 1},
                 {LEDGER_RDP_FILTER, 0},
                 {LEDGER_GDP_FILTER, 0}};
    static const double factors[] = {0.5, 0.98, 1.02, 3.0, 0.9, 1.5};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char id[32], rid[32];
        snprintf(id, sizeof id, "m%zu", k);
        put(l, id, 1.0, 1e-5, cases[k].mode, "");
        snprintf(rid, sizeof rid, "m%zu-r", k);
        answer r = one(l, rid, cases[k].epsdelta ? epsdelta(3.0, 1e-7) : gaussian(1.0), id, 0);
        CHECKF(r.st == DPB_OK && r.reason[0] == LEDGER_OVER_BUDGET, "%s: reason %d", id,
               (int)r.reason[0]);
        EXPECT(l, id, LEDGER_STUCK, rid, r.seq);
        double after = r.after[0];
        CHECKF(isfinite(after) && after > 1.0, "%s: spend after %g", id, after);
        for (size_t f = 0; f < sizeof factors / sizeof factors[0]; f++) {
            double eps = after * factors[f];
            put(l, id, eps, 1e-5, cases[k].mode, "");
            char drid[48];
            snprintf(drid, sizeof drid, "%s-dry%zu", rid, f);
            answer d = one(l, drid, cases[k].epsdelta ? epsdelta(3.0, 1e-7) : gaussian(1.0), id, 1);
            ledger_client c = view(l, id);
            /* stuck exactly when the refused round would be refused again; once cleared (a
             * budget that fits), a lower one does not make it stuck again: only a round does */
            int was_cleared = f > 0 && factors[f - 1] > 1.0;
            if (was_cleared || f >= 4)
                CHECKF(c.status == LEDGER_ACTIVE, "%s at eps %g: %s", id, eps,
                       ledger_status_name(c.status));
            else
                CHECKF((c.status == LEDGER_STUCK) == !d.admitted[0],
                       "%s at eps %g (spend after %.17g): %s, a dry run %s", id, eps, after,
                       ledger_status_name(c.status), d.admitted[0] ? "admits" : "refuses");
        }
        /* stuck again, then a change of delta clears it */
        put(l, id, 1.0, 1e-5, cases[k].mode, "");
        snprintf(rid, sizeof rid, "m%zu-s", k);
        r = one(l, rid, cases[k].epsdelta ? epsdelta(3.0, 1e-7) : gaussian(1.0), id, 0);
        EXPECT(l, id, LEDGER_STUCK, rid, r.seq);
        put(l, id, 1.0, 2e-5, cases[k].mode, "");
        EXPECT(l, id, LEDGER_ACTIVE, "", 0);
    }
    /* a lower budget keeps an rdp client stuck; below its spend it is exhausted */
    put(l, "low", 1.0, 1e-5, LEDGER_RDP, "");
    answer c1 = one(l, "low-c", gaussian(20.0), "low", 0);
    CHECK(c1.st == DPB_OK && c1.admitted[0]);
    answer lr = one(l, "low-r", gaussian(1.0), "low", 0);
    EXPECT(l, "low", LEDGER_STUCK, "low-r", lr.seq);
    put(l, "low", 0.9, 1e-5, LEDGER_RDP, "");
    EXPECT(l, "low", LEDGER_STUCK, "low-r", lr.seq);
    put(l, "low", c1.after[0] * 0.5, 1e-5, LEDGER_RDP, "");
    EXPECT(l, "low", LEDGER_EXHAUSTED, "", 0);
    ledger_close_nosnapshot(l);
    tl_remove_dir(dir);
}

/* ---- reservations ---- */

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

static dpb_status release(ledger *l, const char *rid)
{
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_release(l, rid, &res, &err);
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    return st;
}

/* A reservation admits (clears); a round refused because of the budget it holds makes the
 * client stuck; committing it with the client keeps that (the spend is what was held); a
 * release, an expiry or a commit without the client frees what the refusal counted, and clears
 * it (a dry run of the refused round then admits). */
static void stuck_reservations(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    const char *hk[] = {"h", "k"};
    put(l, "h", 1.0, 1e-5, LEDGER_RDP, "");
    put(l, "k", 1.0, 1e-5, LEDGER_RDP, "");
    /* stuck, then a reservation that admits it clears it */
    answer s0 = one(l, "s0", gaussian(1.0), "h", 0);
    EXPECT(l, "h", LEDGER_STUCK, "s0", s0.seq);
    answer h1 = offer(l, "hold1", gaussian(5.0), hk, 2, 0, 1, LEDGER_ADMIT_ELIGIBLE);
    CHECK(h1.st == DPB_OK && h1.admitted[0] && h1.admitted[1]);
    EXPECT(l, "h", LEDGER_ACTIVE, "", 0);
    /* G(5) alone fits epsilon 1 (about 0.79), twice does not: refused for what is held */
    answer x1 = one(l, "x1", gaussian(5.0), "h", 0);
    CHECK(x1.st == DPB_OK && x1.reason[0] == LEDGER_OVER_BUDGET);
    EXPECT(l, "h", LEDGER_STUCK, "x1", x1.seq);
    /* a reservation refused for its budget makes a client stuck as a round does */
    const char *konly[] = {"k"};
    answer hk2 = offer(l, "hold-k", gaussian(5.0), konly, 1, 0, 1, LEDGER_ADMIT_ELIGIBLE);
    CHECK(hk2.st == DPB_OK && hk2.reason[0] == LEDGER_OVER_BUDGET);
    EXPECT(l, "k", LEDGER_STUCK, "hold-k", hk2.seq);
    /* commit without h: h's held budget is free, h is no longer stuck; k is charged what it
     * held: still stuck on hold-k */
    CHECK(commit(l, "hold1", konly, 1) == DPB_OK);
    EXPECT(l, "h", LEDGER_ACTIVE, "", 0);
    /* k is charged what it held: G(5) once more would not fit, so exhausted (it comes first) */
    EXPECT(l, "k", LEDGER_EXHAUSTED, "", 0);
    CHECK(one(l, "x1-dry", gaussian(5.0), "h", 1).admitted[0]);
    /* release */
    answer h2 = one(l, "x2-pre", gaussian(1.0), "h", 0); /* stuck, then a hold clears it */
    EXPECT(l, "h", LEDGER_STUCK, "x2-pre", h2.seq);
    const char *honly[] = {"h"};
    CHECK(offer(l, "hold2", gaussian(5.0), honly, 1, 0, 1, LEDGER_ADMIT_ELIGIBLE).admitted[0]);
    answer x2 = one(l, "x2", gaussian(5.0), "h", 0);
    EXPECT(l, "h", LEDGER_STUCK, "x2", x2.seq);
    CHECK(release(l, "hold2") == DPB_OK);
    EXPECT(l, "h", LEDGER_ACTIVE, "", 0);
    /* expiry */
    CHECK(offer(l, "hold3", gaussian(5.0), honly, 1, 0, 1, LEDGER_ADMIT_ELIGIBLE).admitted[0]);
    answer x3 = one(l, "x3", gaussian(5.0), "h", 0);
    EXPECT(l, "h", LEDGER_STUCK, "x3", x3.seq);
    CHECK(ledger_expire(l, (uint64_t)time(NULL) + 100000) >= 1); /* hold3, and hold-k */
    EXPECT(l, "h", LEDGER_ACTIVE, "", 0);
    /* commit with it: the spend is what was held, the refusal still stands */
    put(l, "c", 1.0, 1e-5, LEDGER_RDP, "");
    const char *conly[] = {"c"};
    CHECK(offer(l, "hold4", gaussian(10.0), conly, 1, 0, 1, LEDGER_ADMIT_ELIGIBLE).admitted[0]);
    answer x4 = one(l, "x4", gaussian(1.5), "c", 0);
    CHECK(x4.reason[0] == LEDGER_OVER_BUDGET);
    EXPECT(l, "c", LEDGER_STUCK, "x4", x4.seq);
    CHECK(commit(l, "hold4", conly, 1) == DPB_OK);
    EXPECT(l, "c", LEDGER_STUCK, "x4", x4.seq);
    CHECK(view(l, "c").rounds == 1);
    ledger_close_nosnapshot(l);
    tl_remove_dir(dir);
}

/* ---- restart, snapshot, replica, withdrawal ---- */

#define NSEEN 6
static const char *const SEEN[NSEEN] = {"a", "b", "c", "d", "e", "f"};

typedef struct {
    ledger_client c[NSEEN];
    ledger_summary s;
} seen;

static void look(ledger *l, seen *x)
{
    for (int i = 0; i < NSEEN; i++)
        x->c[i] = view(l, SEEN[i]);
    ledger_get_summary(l, &x->s);
}

static void same(const seen *x, const seen *y, const char *what)
{
    for (int i = 0; i < NSEEN; i++)
        CHECKF(x->c[i].status == y->c[i].status &&
                   strcmp(x->c[i].stuck_round, y->c[i].stuck_round) == 0 &&
                   x->c[i].stuck_since == y->c[i].stuck_since && x->c[i].version == y->c[i].version,
               "%s: client %s: %s on '%s' since %llu v%llu against %s on '%s' since %llu v%llu",
               what, SEEN[i], ledger_status_name(x->c[i].status), x->c[i].stuck_round,
               (unsigned long long)x->c[i].stuck_since, (unsigned long long)x->c[i].version,
               ledger_status_name(y->c[i].status), y->c[i].stuck_round,
               (unsigned long long)y->c[i].stuck_since, (unsigned long long)y->c[i].version);
    CHECKF(x->s.active == y->s.active && x->s.stuck == y->s.stuck &&
               x->s.exhausted == y->s.exhausted && x->s.version == y->s.version,
           "%s: summaries differ", what);
}

/* Six clients through refusals, admissions, a reservation, a budget raise and a policy
 * refusal: a ends stuck after a raise too small, b stuck on a reservation's refusal, c
 * cleared by a raise, d stuck (pld), e cleared by a release, f exhausted. */
static void story(ledger *l)
{
    for (int i = 0; i < NSEEN; i++)
        put(l, SEEN[i], 1.0, 1e-5, i == 3 ? LEDGER_PLD : LEDGER_RDP, "");
    answer a = one(l, "t-a", gaussian(1.0), "a", 0);
    put(l, "a", 0.5 * (1.0 + a.after[0]), 1e-5, LEDGER_RDP, "");
    const char *b[] = {"b"}, *e[] = {"e"};
    CHECK(offer(l, "t-bh", gaussian(5.0), b, 1, 0, 1, LEDGER_ADMIT_ELIGIBLE).admitted[0]);
    CHECK(offer(l, "t-b", gaussian(5.0), b, 1, 0, 1, LEDGER_ADMIT_ELIGIBLE).reason[0] ==
          LEDGER_OVER_BUDGET);
    answer c = one(l, "t-c", gaussian(1.0), "c", 0);
    put(l, "c", c.after[0] * 1.5, 1e-5, LEDGER_RDP, "");
    one(l, "t-d", gaussian(1.0), "d", 0);
    CHECK(offer(l, "t-eh", gaussian(5.0), e, 1, 0, 1, LEDGER_ADMIT_ELIGIBLE).admitted[0]);
    one(l, "t-e", gaussian(5.0), "e", 0);
    CHECK(release(l, "t-eh") == DPB_OK);
    one(l, "t-f1", gaussian(5.0), "f", 0);
    one(l, "t-f2", gaussian(1.0), "f", 0); /* refused, but f is exhausted: G(5) twice */
    EXPECT(l, "a", LEDGER_STUCK, "t-a", 0);
    EXPECT(l, "b", LEDGER_STUCK, "t-b", 0);
    EXPECT(l, "c", LEDGER_ACTIVE, "", 0);
    EXPECT(l, "d", LEDGER_STUCK, "t-d", 0);
    EXPECT(l, "e", LEDGER_ACTIVE, "", 0);
    EXPECT(l, "f", LEDGER_EXHAUSTED, "", 0);
}

/* The story's state after a restart from the log alone, from a snapshot, and again from the
 * log after the snapshot (a snapshot then more records): the same, by ledger_compare too. */
static void stuck_restart_identical(void)
{
    char dir[64];
    ledger *l = fresh(dir, sizeof dir);
    seen before, after;
    if (l == NULL)
        return;
    story(l);
    look(l, &before);
    ledger_close_nosnapshot(l);
    for (int pass = 0; pass < 2 && (l = on_dir(dir)) != NULL; pass++) {
        look(l, &after);
        same(&before, &after, pass == 0 ? "replayed from the log" : "read from the snapshot");
        COUNTS(l, 2, 3);
        if (pass == 0)
            ledger_close(l); /* writes a snapshot */
        else
            ledger_close_nosnapshot(l);
    }
    /* a snapshot, then a refusal and a raise in the log: replayed over the snapshot */
    l = on_dir(dir);
    if (l == NULL)
        goto out;
    answer r = one(l, "late", gaussian(0.3), "c", 0);
    put(l, "d", 1.0, 1e-5, LEDGER_PLD, "site=1\n");
    look(l, &before);
    ledger_close_nosnapshot(l);
    l = on_dir(dir);
    if (l != NULL) {
        look(l, &after);
        same(&before, &after, "snapshot and log");
        EXPECT(l, "c", LEDGER_STUCK, "late", r.seq);
        ledger_close_nosnapshot(l);
    }
out:
    tl_remove_dir(dir);
}

/* Replicas of one shared log see the same stuck clients (the refusals are in the rounds'
 * records); a round whose sync fails is withdrawn with the stuck state it set; a snapshot of
 * format 6 (no stuck clients) is still read, its clients not stuck. */
static void stuck_replica_withdraw_old_snapshot(void)
{
    memlog g;
    memlog_init(&g);
    ledger *a = on_log(&g), *b = NULL;
    seen x, y;
    if (a == NULL)
        goto out;
    story(a);
    b = on_log(&g);
    if (b == NULL)
        goto out;
    look(a, &x);
    look(b, &y);
    same(&x, &y, "replica");
    char why[200];
    CHECKF(ledger_compare(a, b, why, sizeof why) == 0, "%s", why);
    /* a refusal on a, seen by b */
    answer r = one(a, "rep", gaussian(0.3), "c", 0);
    EXPECT(b, "c", LEDGER_STUCK, "rep", r.seq);
    /* a failed sync: the refusal is withdrawn, c still stuck on "rep", e not stuck */
    atomic_store(&g.fail_next, DPB_EUNAVAILABLE);
    answer w = one(a, "wd", gaussian(1.0), "e", 0);
    CHECK(w.st == DPB_EUNAVAILABLE);
    EXPECT(a, "e", LEDGER_ACTIVE, "", 0);
    COUNTS(a, 1, 4);
    answer w2 = one(a, "wd", gaussian(1.0), "e", 0);
    CHECK(w2.st == DPB_OK);
    EXPECT(a, "e", LEDGER_STUCK, "wd", w2.seq);
    EXPECT(b, "e", LEDGER_STUCK, "wd", w2.seq);
    CHECKF(ledger_compare(a, b, why, sizeof why) == 0, "%s", why);
    ledger_close_nosnapshot(b);
    b = NULL;
    /* the snapshot keeps them; rewritten as format 6 (the stuck section cut off) it is read,
     * its clients not stuck */
    ledger_close(a);
    a = NULL;
    CHECK(g.snap != NULL && g.snap_len > 16 && g.snap[0] == LEDGER_FORMAT);
    b = on_log(&g);
    if (b == NULL)
        goto out;
    look(b, &y);
    EXPECT(b, "e", LEDGER_STUCK, "wd", w2.seq);
    COUNTS(b, 0, 5);
    ledger_close_nosnapshot(b);
    b = NULL;
    /* 6 clients refused for their budget (5 stuck, and f, exhausted first): 8 bytes of
     * count and 12 each at the end */
    size_t cut = 8 + 6 * 12;
    CHECK(g.snap && g.snap_len > cut && g.snap[g.snap_len - cut] == 6);
    if (g.snap && g.snap_len > cut && g.snap[g.snap_len - cut] == 6) {
        g.snap_len -= cut;
        g.snap[0] = 6;
        b = on_log(&g);
        if (b != NULL) {
            EXPECT(b, "e", LEDGER_ACTIVE, "", 0);
            COUNTS(b, 5, 0);
        }
    } else {
        CHECK(!"the snapshot does not end in its 6 refused clients");
    }
out:
    if (b)
        ledger_close_nosnapshot(b);
    if (a)
        ledger_close_nosnapshot(a);
    memlog_free(&g);
}

const tl_test STUCK_TESTS[] = {
    {"stuck_rdp_definition", stuck_rdp_definition},
    {"stuck_modes_and_budget", stuck_modes_and_budget},
    {"stuck_reservations", stuck_reservations},
    {"stuck_restart_identical", stuck_restart_identical},
    {"stuck_replica_withdraw_old_snapshot", stuck_replica_withdraw_old_snapshot},
};
const size_t STUCK_NTESTS = sizeof STUCK_TESTS / sizeof STUCK_TESTS[0];
