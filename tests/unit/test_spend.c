/* test_spend.c - the spends of pld clients (core/ledger/spend.c): each client's spend is the
 * compute entry point's answer (dp_epsilon_ex) for its own composition with the accountant
 * the spend names (the same event repeated, a schedule of events, mixed cohorts); no round is
 * admitted past the budget and none refused within it, over random schedules; evicting
 * cached PLD values changes no answer; and reads are answered while a round computes a long
 * PLD. Each ledger test works in its own mkdtemp directory under /tmp and removes it. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/dp/rdp.h"
#include "../../core/ledger/fs.h"
#include "../../core/ledger/ledger.h"
#include "../../core/ledger/spend.h"
#include "suites.h"

/* SelfComposed(PoissonSampled(q, Gaussian(sigma)), steps) */
static dp_event *sgd(double sigma, double q, uint64_t steps)
{
    dp_event *g = dp_event_new(DP_EV_GAUSSIAN), *s = dp_event_new(DP_EV_POISSON_SAMPLED),
             *c = dp_event_new(DP_EV_SELF_COMPOSED);
    if (g == NULL || s == NULL || c == NULL) {
        dp_event_free(g);
        dp_event_free(s);
        dp_event_free(c);
        return NULL;
    }
    g->u.noise.noise_multiplier = sigma;
    s->u.sampled.sampling_probability = q;
    s->u.sampled.event = g;
    c->u.self.event = s;
    c->u.self.count = steps;
    return c;
}

/* eps at delta of Composed(SelfComposed(evs[i], counts[i]) for counts[i] > 0, in i order) by
 * the compute entry point with accountant acct. */
static double eps_of(dp_event *const *evs, const uint64_t *counts, size_t n, double delta,
                     dp_accountant acct)
{
    dp_event *root = dp_event_new(DP_EV_COMPOSED);
    double e = NAN;
    if (root == NULL || (root->u.composed.events = calloc(n ? n : 1, sizeof(dp_event *))) == NULL) {
        dp_event_free(root);
        return e;
    }
    for (size_t i = 0; i < n; i++) {
        if (counts[i] == 0)
            continue;
        dp_event *sc = dp_event_new(DP_EV_SELF_COMPOSED);
        if (sc == NULL)
            break;
        sc->u.self.event = evs[i]; /* borrowed: detached before free */
        sc->u.self.count = counts[i];
        root->u.composed.events[root->u.composed.n++] = sc;
    }
    dp_report rep;
    double d = delta;
    if (dp_epsilon_ex(root, DP_REL_ADD_OR_REMOVE, acct, NULL, &d, 1, &e, NULL, &rep, NULL) !=
        DPB_OK)
        e = NAN;
    for (size_t i = 0; i < root->u.composed.n; i++)
        root->u.composed.events[i]->u.self.event = NULL;
    dp_event_free(root);
    return e;
}

static int nosync(void *ctx, int fd)
{
    (void)ctx;
    (void)fd;
    return 0; /* the tests do not cut the power */
}

static dpb_fs fast_fs;

/* refine: ledger_options.pld_refine (the background refinement) */
static ledger *open_fresh_ex(char *dir, size_t n, int refine)
{
    if (tl_make_dir(dir, n, "dpb_spend_") != 0)
        return NULL;
    fast_fs = *dpb_fs_posix();
    fast_fs.fdatasync = nosync;
    fast_fs.fsync = nosync;
    ledger_options o = {dir, &fast_fs, 0, 0.0, 0.0, 1000000, 0, refine, NULL, 0, 0, 0};
    ledger *l = NULL;
    dpb_error err = {0};
    CHECKF(ledger_open(&o, &l, &err) == DPB_OK, "%s", err.detail);
    if (l == NULL)
        tl_remove_dir(dir);
    return l;
}

/* The end of a ledger test: its events, its ledger (NULL: none) and its directory go. */
static void finish(ledger *l, const char *dir, dp_event **ev, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dp_event_free(ev[i]);
    if (l)
        ledger_close(l);
    tl_remove_dir(dir);
}

/* The ledger in dir again (no refinement: what a restart recomputes by itself). */
static ledger *reopen(const char *dir)
{
    ledger_options o = {dir, &fast_fs, 0, 0.0, 0.0, 1000000, 0, 0, NULL, 0, 0, 0};
    dpb_error err = {0};
    ledger *l = NULL;
    CHECKF(ledger_open(&o, &l, &err) == DPB_OK, "%s", err.detail);
    return l;
}

static ledger *open_fresh(char *dir, size_t n)
{
    return open_fresh_ex(dir, n, 0);
}

static void put_client(ledger *l, const char *id, double eps, double delta, ledger_mode mode)
{
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "%s", id);
    in.epsilon = eps;
    in.delta = delta;
    in.mode = mode;
    int created;
    dpb_error err = {0};
    CHECKF(ledger_put_client(l, &in, &created, &out, &err) == DPB_OK, "put %s: %s", id, err.detail);
}

static void put_pld(ledger *l, const char *id, double eps, double delta)
{
    put_client(l, id, eps, delta, LEDGER_PLD);
}

/* n Gaussians, noise multipliers s0, s0 + step, ...: 0, or -1 when one could not be made */
static int gaussians(dp_event **ev, int n, double s0, double step)
{
    int ok = 1;
    for (int i = 0; i < n; i++)
        if ((ev[i] = dp_event_new(DP_EV_GAUSSIAN)) != NULL)
            ev[i]->u.noise.noise_multiplier = s0 + step * i;
        else
            ok = 0;
    return ok ? 0 : -1;
}

/* One admit_eligible round; res filled (the caller frees it). */
static dpb_status charge(ledger *l, const char *rid, const dp_event *ev, const char *const *ids,
                         size_t n, ledger_round_res *res)
{
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    dpb_error err = {0};
    dpb_status st = ledger_round(l, &rq, res, &err);
    CHECKF(st == DPB_OK, "round %s: %s", rid, err.detail);
    return st;
}

/* A pld value read from a kept composition (docs/ACCOUNTING.md, "Kept compositions") lies
 * in [want (1 - KEPT_BELOW), want (1 + KEPT_EXCESS)] around the compute API's want: never
 * below it but by the compute path's own truncation and round-off (far under 1e-9 of
 * epsilon), and above it by at most the stated excess. */
#define KEPT_BELOW 1e-9
#define KEPT_EXCESS 0.01
static int kept_close(double got, double want)
{
    return got >= want * (1.0 - KEPT_BELOW) && got <= want * (1.0 + KEPT_EXCESS);
}

/* The client's spend is dp_epsilon_ex's answer, with the accountant it names, for its
 * composition (counts over evs, in the order the ledger first met the events; a pld value
 * from a kept composition: within kept_close of it); the rule: rdp while the rdp bound is
 * within the budget (or the PLD when the cache or the background refinement has it, and it
 * is smaller), else the smaller of pld and rdp. */
static void check_client(ledger *l, const char *id, dp_event *const *evs, const uint64_t *counts,
                         size_t n)
{
    ledger_client c;
    CHECK(ledger_get_client(l, id, &c) == DPB_OK);
    double r = eps_of(evs, counts, n, c.delta, DP_ACCT_RDP);
    CHECKF(c.spent_accountant == DP_ACCT_RDP || c.spent_accountant == DP_ACCT_PLD,
           "%s: accountant %d", id, c.spent_accountant);
    double want = eps_of(evs, counts, n, c.delta, (dp_accountant)c.spent_accountant);
    CHECKF(c.spent == want || (c.spent_accountant == DP_ACCT_PLD && kept_close(c.spent, want)),
           "%s: spent %.17g, %s says %.17g", id, c.spent,
           dp_accountant_name((dp_accountant)c.spent_accountant), want);
    if (c.spent_accountant == DP_ACCT_RDP) {
        CHECKF(r <= c.epsilon ||
                   !(eps_of(evs, counts, n, c.delta, DP_ACCT_PLD) * (1.0 + KEPT_EXCESS) < r),
               "%s: named rdp %.17g past the budget %g though the PLD is smaller", id, r,
               c.epsilon);
    } else {
        CHECKF(c.spent <= r, "%s: named pld %.17g with rdp %.17g, budget %g", id, c.spent, r,
               c.epsilon);
    }
}

/* The same event repeated, a schedule, and mixed cohorts: each client's spend in both
 * regimes (rdp within the budget, the PLD near it). */
static void spend_pld_matches_compute(void)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    enum { NEV = 3 };
    dp_event *ev[NEV] = {sgd(1.0, 0.02, 20), sgd(1.3, 0.02, 20), sgd(2.0, 0.05, 10)};
    for (int i = 0; i < NEV; i++)
        if (ev[i] == NULL)
            goto out;
    /* far: rdp decides; near: budgets between the pld and rdp values of their histories */
    const char *ids[] = {"far", "same", "sched", "cohort"};
    uint64_t cnt[4][NEV] = {{0}};
    uint64_t same3[NEV] = {3, 0, 0}, sched[NEV] = {1, 1, 1};
    double eps_same = 0.5 * (eps_of(ev, same3, NEV, 1e-5, DP_ACCT_PLD) +
                             eps_of(ev, same3, NEV, 1e-5, DP_ACCT_RDP));
    double eps_sched = 0.5 * (eps_of(ev, sched, NEV, 1e-5, DP_ACCT_PLD) +
                              eps_of(ev, sched, NEV, 1e-5, DP_ACCT_RDP));
    put_pld(l, "far", 100.0, 1e-5);
    put_pld(l, "same", eps_same, 1e-5);
    put_pld(l, "sched", eps_sched, 1e-5);
    put_pld(l, "cohort", eps_sched, 1e-5);
    /* rounds: (event, participants) */
    const struct {
        int ev;
        int who[4];
    } plan[] = {{0, {1, 1, 1, 1}}, {1, {1, 0, 1, 0}}, {0, {1, 1, 0, 1}},
                {2, {0, 0, 1, 1}}, {0, {1, 1, 0, 0}}, {2, {1, 0, 0, 0}}};
    for (size_t k = 0; k < sizeof plan / sizeof plan[0]; k++) {
        const char *p[4];
        size_t n = 0;
        for (int i = 0; i < 4; i++)
            if (plan[k].who[i])
                p[n++] = ids[i];
        char rid[32];
        snprintf(rid, sizeof rid, "r%zu", k);
        ledger_round_res res;
        if (charge(l, rid, ev[plan[k].ev], p, n, &res) != DPB_OK)
            goto out;
        for (size_t j = 0; j < res.n; j++)
            for (int i = 0; i < 4; i++)
                if (res.outcomes[j].admitted && strcmp(res.outcomes[j].id, ids[i]) == 0) {
                    cnt[i][plan[k].ev]++;
                    CHECK(res.outcomes[j].after_accountant == DP_ACCT_RDP ||
                          res.outcomes[j].after_accountant == DP_ACCT_PLD);
                }
        ledger_round_res_free(&res);
    }
    for (int i = 0; i < 4; i++)
        check_client(l, ids[i], ev, cnt[i], NEV);
    /* both regimes were exercised */
    ledger_client c;
    CHECK(ledger_get_client(l, "far", &c) == DPB_OK && c.spent_accountant == DP_ACCT_RDP);
    CHECK(ledger_get_client(l, "same", &c) == DPB_OK && c.spent_accountant == DP_ACCT_PLD);
    /* and they survive a restart (a snapshot holds values only: the name is derived) */
    ledger_close(l);
    l = reopen(dir);
    for (int i = 0; l && i < 4; i++)
        check_client(l, ids[i], ev, cnt[i], NEV);
out:
    finish(l, dir, ev, NEV);
}

/* Long histories, where the ledger's spends go through the clients' memos: a schedule of 36
 * distinct events with an old event charged again now and then, to rdp and pld clients far
 * from, near and at their budgets. Each client's spend is the compute entry point's answer
 * for its composition, during the schedule, at its end, and after a restart. */
static void spend_memo_matches_compute(void)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    enum { NEV = 36, NC = 4 };
    dp_event *ev[NEV] = {NULL};
    if (gaussians(ev, NEV, 4.0, 0.25) != 0)
        goto out;
    uint64_t all[NEV], cnt[NC][NEV] = {{0}};
    for (int i = 0; i < NEV; i++)
        all[i] = 1 + (i == 0 ? (NEV - 1) / 9 : 0); /* event 0 again every 9th round */
    double p = eps_of(ev, all, NEV, 1e-5, DP_ACCT_PLD), r = eps_of(ev, all, NEV, 1e-5, DP_ACCT_RDP);
    CHECKF(p < r, "pld %.17g, rdp %.17g", p, r);
    const char *ids[NC] = {"rdp", "far", "near", "tight"};
    for (int i = 0; i < NC; i++)
        put_client(l, ids[i],
                   i == 2   ? 0.5 * (p + r)
                   : i == 3 ? 0.8 * p
                            : 100.0,
                   1e-5, i == 0 ? LEDGER_RDP : LEDGER_PLD);
    int rounds = 0, refused = 0;
    for (int k = 0; k < NEV; k++)
        for (int again = 0; again < (k % 9 == 8 ? 2 : 1); again++) {
            int e = again ? 0 : k;
            char rid[32];
            snprintf(rid, sizeof rid, "r%d", rounds++);
            ledger_round_res res;
            if (charge(l, rid, ev[e], ids, NC, &res) != DPB_OK)
                goto out;
            for (size_t j = 0; j < res.n; j++)
                for (int i = 0; i < NC; i++)
                    if (strcmp(res.outcomes[j].id, ids[i]) == 0) {
                        const ledger_outcome *o = &res.outcomes[j];
                        /* the admission's value: its composition's, by the accountant named */
                        cnt[i][e]++;
                        double want = eps_of(ev, cnt[i], NEV, 1e-5, o->after_accountant);
                        CHECKF(o->spent_after == want || (o->after_accountant == DP_ACCT_PLD &&
                                                          kept_close(o->spent_after, want)),
                               "%s round %d: after %.17g, %s says %.17g", ids[i], rounds,
                               o->spent_after, dp_accountant_name(o->after_accountant), want);
                        if (!o->admitted) {
                            cnt[i][e]--;
                            refused++;
                        }
                        CHECKF(i == 3 || o->admitted, "%s refused round %d", ids[i], rounds);
                    }
            ledger_round_res_free(&res);
            if (k == 20 || k == 30)
                for (int i = 0; i < NC; i++)
                    check_client(l, ids[i], ev, cnt[i], NEV);
        }
    CHECKF(refused > 0, "the tight client was refused %d rounds", refused);
    for (int i = 0; i < NC; i++)
        check_client(l, ids[i], ev, cnt[i], NEV);
    ledger_close(l);
    l = reopen(dir);
    for (int i = 0; l && i < NC; i++)
        check_client(l, ids[i], ev, cnt[i], NEV);
out:
    finish(l, dir, ev, NEV);
}

/* The clients' memos together stay under ledger_options.memo_bytes: past it others are freed
 * in turn (and made again at their client's next change), and no spend changes: a ledger
 * with room for 3 memos answers what one with room for all answers, and the compute entry
 * point's value. */
static void spend_memo_cap(void)
{
    enum { NEV = 20, NC = 8 };
    char dir[2][256];
    ledger *l[2] = {NULL, NULL};
    dp_event *ev[NEV] = {NULL};
    fast_fs = *dpb_fs_posix();
    fast_fs.fdatasync = nosync;
    fast_fs.fsync = nosync;
    dir[0][0] = dir[1][0] = '\0';
    for (int w = 0; w < 2; w++) {
        if (tl_make_dir(dir[w], sizeof dir[w], "dpb_spend_") != 0)
            goto out;
        ledger_options o = {dir[w], &fast_fs,         0, 0.0, 0.0, 1000000, 0, 0, NULL,
                            0,      w ? 3 * 1900 : 0, 0};
        dpb_error err = {0};
        CHECKF(ledger_open(&o, &l[w], &err) == DPB_OK, "%s", err.detail);
        if (l[w] == NULL)
            goto out;
    }
    if (gaussians(ev, NEV, 6.0, 0.5) != 0)
        goto out;
    char idb[NC][16];
    const char *ids[NC];
    uint64_t cnt[NC][NEV] = {{0}};
    for (int c = 0; c < NC; c++) {
        snprintf(idb[c], sizeof idb[c], "m%d", c);
        ids[c] = idb[c];
        for (int w = 0; w < 2; w++)
            put_pld(l[w], ids[c], 100.0, 1e-5);
    }
    /* client c takes part in the rounds of events c .. NEV-1 (20 - c distinct events: clients
     * 0 to 4 reach 16 and get a memo), client 0 then in two more rounds of the last event */
    for (int k = 0; k < NEV + 2; k++) {
        int e = k < NEV ? k : NEV - 1;
        const char *p[NC];
        size_t n = 0;
        for (int c = 0; c < NC; c++)
            if (c <= k && !(c > 0 && k >= NEV))
                p[n++] = ids[c];
        char rid[32];
        snprintf(rid, sizeof rid, "r%d", k);
        for (int w = 0; w < 2; w++) {
            ledger_round_res res;
            if (charge(l[w], rid, ev[e], p, n, &res) != DPB_OK)
                goto out;
            CHECKF(res.admitted == n, "round %d: %zu of %zu admitted", k, res.admitted, n);
            ledger_round_res_free(&res);
        }
        for (size_t j = 0; j < n; j++)
            cnt[p[j][1] - '0'][e]++;
    }
    size_t mc[2], mb[2];
    for (int w = 0; w < 2; w++)
        ledger_memo_stats(l[w], &mc[w], &mb[w]);
    CHECKF(mc[0] == 5 && mb[0] > 0, "room for all: %zu clients with a memo, %zu bytes", mc[0],
           mb[0]);
    CHECKF(mc[1] >= 1 && mc[1] <= 3 && mb[1] <= 3 * 1900,
           "room for 3: %zu clients with a memo, %zu bytes", mc[1], mb[1]);
    for (int c = 0; c < NC; c++) {
        ledger_client a, b;
        CHECK(ledger_get_client(l[0], ids[c], &a) == DPB_OK &&
              ledger_get_client(l[1], ids[c], &b) == DPB_OK);
        CHECKF(a.spent == b.spent && a.spent_accountant == b.spent_accountant,
               "%s: %.17g with room for all, %.17g with room for 3", ids[c], a.spent, b.spent);
        check_client(l[1], ids[c], ev, cnt[c], NEV);
    }
out:
    for (int i = 0; i < NEV; i++)
        dp_event_free(ev[i]);
    for (int w = 0; w < 2; w++) {
        if (l[w])
            ledger_close(l[w]);
        tl_remove_dir(dir[w]);
    }
}

/* Random schedules: a round is admitted for a client iff the smaller certified bound of its
 * composition after the round (rdp, pld: by the compute entry point) is within its budget. */
static void spend_never_past_budget(void)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    enum { NEV = 4, NCL = 5, ROUNDS = 10 };
    const double sig[NEV] = {1.5, 2.0, 3.0, 4.0};
    dp_event *ev[NEV];
    int ok = 1;
    for (int i = 0; i < NEV; i++)
        ok &= (ev[i] = sgd(sig[i], 0.05, 8)) != NULL;
    unsigned seed = 20261124u;
    char ids[NCL][16];
    double eps[NCL];
    uint64_t cnt[NCL][NEV] = {{0}};
    int order[NEV], norder = 0, pos_of[NEV]; /* events in the order the ledger met them */
    for (int i = 0; i < NEV; i++)
        pos_of[i] = -1;
    for (int i = 0; i < NCL; i++) {
        snprintf(ids[i], sizeof ids[i], "c%d", i);
        eps[i] = 0.4 + 0.2 * (double)(rand_r(&seed) % 8);
        put_pld(l, ids[i], eps[i], 1e-5);
    }
    int admitted = 0, refused = 0, by_pld = 0;
    for (int k = 0; ok && k < ROUNDS; k++) {
        int e = rand_r(&seed) % NEV;
        const char *p[NCL];
        int who[NCL], n = 0;
        for (int i = 0; i < NCL; i++)
            if (rand_r(&seed) % 3 != 0) {
                who[n] = i;
                p[n++] = ids[i];
            }
        if (n == 0)
            continue;
        if (pos_of[e] < 0) {
            pos_of[e] = norder;
            order[norder++] = e;
        }
        char rid[32];
        snprintf(rid, sizeof rid, "p%d", k);
        ledger_round_res res;
        if (charge(l, rid, ev[e], p, (size_t)n, &res) != DPB_OK)
            break;
        for (int j = 0; j < n; j++) {
            int i = who[j];
            dp_event *oe[NEV];
            uint64_t oc[NEV];
            for (int q = 0; q < norder; q++) {
                oe[q] = ev[order[q]];
                oc[q] = cnt[i][order[q]] + (order[q] == e);
            }
            double r = eps_of(oe, oc, (size_t)norder, 1e-5, DP_ACCT_RDP);
            double b = r <= eps[i] ? r : fmin(r, eps_of(oe, oc, (size_t)norder, 1e-5, DP_ACCT_PLD));
            int adm = res.outcomes[j].admitted;
            CHECKF(adm == (b <= eps[i]), "round %d client %d: admitted %d, bound %.17g, budget %g",
                   k, i, adm, b, eps[i]);
            if (adm) {
                cnt[i][e]++;
                admitted++;
                by_pld += r > eps[i];
            } else {
                refused++;
            }
        }
        ledger_round_res_free(&res);
    }
    CHECKF(admitted > 0 && refused > 0 && by_pld > 0,
           "the schedule exercised too little: %d admitted (%d by the PLD), %d refused", admitted,
           by_pld, refused);
    for (int i = 0; i < NEV; i++)
        dp_event_free(ev[i]);
    ledger_close(l);
    tl_remove_dir(dir);
}

/* A cache too small for the working set evicts; every answer stays the one computed with
 * room for all. */
static void spend_cache_eviction(void)
{
    spend_engine *small = spend_engine_new(600), *big = spend_engine_new(0);
    enum { NEV = 3, NSETS = 6 };
    if (small && big) { /* the value cache alone (the kept compositions: test_spend_kept.c) */
        spend_engine_kept_cap(small, 0);
        spend_engine_kept_cap(big, 0);
    }
    spend_event *se[2][NEV] = {{NULL}};
    dp_event *ev[NEV] = {sgd(2.0, 0.05, 5), sgd(3.0, 0.05, 5), sgd(4.0, 0.05, 5)};
    int ok = small != NULL && big != NULL;
    for (int i = 0; ok && i < NEV; i++) {
        unsigned char *b = NULL;
        size_t n = 0, cap = 0;
        ok = ev[i] != NULL && dp_event_encode(ev[i], &b, &n, &cap) == DPB_OK &&
             spend_event_get(small, b, n, DP_REL_ADD_OR_REMOVE, &se[0][i]) == DPB_OK &&
             spend_event_get(big, b, n, DP_REL_ADD_OR_REMOVE, &se[1][i]) == DPB_OK;
        free(b);
    }
    CHECK(ok);
    const uint64_t sets[NSETS][NEV] = {{1, 0, 0}, {2, 1, 0}, {0, 3, 1},
                                       {1, 1, 1}, {4, 0, 2}, {0, 0, 5}};
    double want[NSETS];
    /* pass 0: the big cache's answers (each computed once); then both caches, other orders */
    for (int pass = 0; ok && pass < 4; pass++)
        for (int s0 = 0; s0 < NSETS; s0++) {
            int s = (s0 * (pass % 2 ? 5 : 1) + pass) % NSETS; /* a permutation */
            for (int w = pass == 0 ? 1 : 0; w < 2; w++) {
                spend_term t[NEV];
                size_t m = 0;
                for (int i = NEV - 1; i >= 0; i--) /* given out of order: spend_eval sorts */
                    if (sets[s][i])
                        t[m++] = (spend_term){se[w][i], sets[s][i]};
                spend_result r;
                /* a budget below every rdp value: the PLD is always the answer's */
                spend_eval(w ? big : small, LEDGER_PLD, 1e-3, 1e-6, DP_REL_ADD_OR_REMOVE, t, m, &r);
                CHECK(r.pld_computed && r.accountant == DP_ACCT_PLD);
                if (pass == 0)
                    want[s] = r.spent;
                else
                    CHECKF(r.spent == want[s], "set %d pass %d (%s cache): %.17g, want %.17g", s,
                           pass, w ? "big" : "small", r.spent, want[s]);
            }
        }
    spend_stats a, b;
    if (ok) {
        spend_engine_stats(small, &a);
        spend_engine_stats(big, &b);
        CHECKF(a.bytes <= a.cap_bytes && a.entries < NSETS, "small: %zu entries, %zu / %zu bytes",
               a.entries, a.bytes, a.cap_bytes);
        CHECKF(a.pld_computed > NSETS, "small: %llu computations (evictions expected)",
               (unsigned long long)a.pld_computed);
        CHECKF(b.pld_computed == NSETS && b.entries == NSETS, "big: %llu computations",
               (unsigned long long)b.pld_computed);
    }
    for (int i = 0; i < NEV; i++) {
        if (small)
            spend_event_put(small, se[0][i]);
        if (big)
            spend_event_put(big, se[1][i]);
        dp_event_free(ev[i]);
    }
    spend_engine_free(small);
    spend_engine_free(big);
}

/* Two spends are the same: every field, the value bit for bit. */
static int same_spend(const spend_result *a, const spend_result *b)
{
    return memcmp(&a->spent, &b->spent, sizeof a->spent) == 0 &&
           memcmp(&a->dtv, &b->dtv, sizeof a->dtv) == 0 && a->uncertified == b->uncertified &&
           a->unsupported == b->unsupported && a->accountant == b->accountant &&
           a->pld_computed == b->pld_computed;
}

/* spend_eval from scratch of t[0..n) with k more of x (x NULL: none), on a copy. */
static void spend_scratch(spend_engine *g, int mode, double eps, double delta, const spend_term *t,
                          size_t n, spend_event *x, uint64_t k, spend_result *out)
{
    spend_term w[64];
    size_t m = n, i;
    memcpy(w, t, n * sizeof *w);
    for (i = 0; x && i < n && w[i].ev != x; i++)
        ;
    if (x && i < n)
        w[i].count += k;
    else if (x)
        w[m++] = (spend_term){x, k};
    spend_eval(g, mode, eps, delta, DP_REL_ADD_OR_REMOVE, w, m, out);
}

/* A client's memo (spend_eval_more) answers what spend_eval answers from scratch, bit for bit,
 * along random histories in the rdp, rdp_filter and pld modes: newer events (a schedule),
 * the last event again, older events again (cohorts), withdrawn charges, the terms given in
 * another order, another delta; in pld mode also with the PLD value in the cache, and past
 * the budget. It is used: the rdp value of a composition it covers is decided by it. */
static void spend_memo_same_bits(void)
{
    enum { NEV = 44 };
    spend_engine *g = spend_engine_new(0);
    spend_event *se[NEV] = {NULL};
    dp_event *ev[NEV] = {NULL};
    int ok = g != NULL;
    for (int i = 0; ok && i < NEV; i++) { /* registered in index order: sids grow with i */
        if (i % 8 == 7) {
            ev[i] = sgd(0.9 + 0.05 * i, 0.01, 10);
        } else if ((ev[i] = dp_event_new(DP_EV_GAUSSIAN)) != NULL) {
            ev[i]->u.noise.noise_multiplier = 20.0 + 0.37 * i;
        }
        unsigned char *b = NULL;
        size_t nb = 0, cap = 0;
        ok = ev[i] != NULL && dp_event_encode(ev[i], &b, &nb, &cap) == DPB_OK &&
             spend_event_get(g, b, nb, DP_REL_ADD_OR_REMOVE, &se[i]) == DPB_OK;
        free(b);
    }
    CHECK(ok);
    static const int modes[3] = {LEDGER_RDP, LEDGER_RDP_FILTER, LEDGER_PLD};
    unsigned seed = 20261124;
    long compared = 0, decided = 0, cached = 0;
    for (int mi = 0; ok && mi < 3; mi++) {
        int mode = modes[mi];
        spend_memo *memo = NULL;
        spend_term t[NEV];
        size_t n = 0, next = 0;
        double delta = 1e-5, eps = 1e6;
        for (int step = 0; ok && step < 300; step++) {
            unsigned op = (unsigned)rand_r(&seed) % 20;
            uint64_t k = 1 + (uint64_t)(rand_r(&seed) % 3);
            size_t i = n ? (size_t)rand_r(&seed) % n : 0;
            if ((op < 8 || n == 0) && next < NEV) {
                t[n++] = (spend_term){se[next++], k}; /* a newer event */
            } else if (op < 12 && n) {
                t[n - 1].count += k; /* the last event again */
            } else if (op < 15 && n) {
                t[i].count += k;       /* an older one again */
            } else if (op < 17 && n) { /* a charge withdrawn */
                if (t[i].count > 1) {
                    t[i].count--;
                } else {
                    memmove(t + i, t + i + 1, (n - i - 1) * sizeof *t);
                    n--;
                }
            } else if (op < 19 && n > 1) { /* the same terms in another order */
                spend_term s = t[i];
                t[i] = t[0];
                t[0] = s;
            } else {
                delta = delta == 1e-5 ? 1e-6 : 1e-5;
            }
            spend_result a, b;
            spend_eval_more(g, NULL, &memo, mode, eps, delta, DP_REL_ADD_OR_REMOVE, t, n, NULL, 0,
                            &a);
            spend_scratch(g, mode, eps, delta, t, n, NULL, 0, &b);
            CHECKF(same_spend(&a, &b), "mode %d step %d (n %zu): %.17g, from scratch %.17g", mode,
                   step, n, a.spent, b.spent);
            CHECKF((n >= SPEND_MEMO_MIN) == (spend_memo_bytes(memo) > 0),
                   "mode %d step %d: %zu terms, memo of %zu bytes", mode, step, n,
                   spend_memo_bytes(memo));
            compared++;
            /* the compositions of the next round: a newer event, the last, an older one */
            spend_event *xs[3] = {next < NEV ? se[next] : NULL, n ? t[n - 1].ev : NULL,
                                  n ? t[i].ev : NULL};
            for (int xi = 0; xi < 3; xi++) {
                if (xs[xi] == NULL)
                    continue;
                spend_eval_more(g, memo, NULL, mode, eps, delta, DP_REL_ADD_OR_REMOVE, t, n, xs[xi],
                                k, &a);
                spend_scratch(g, mode, eps, delta, t, n, xs[xi], k, &b);
                CHECKF(same_spend(&a, &b), "mode %d step %d, x %d: %.17g, from scratch %.17g", mode,
                       step, xi, a.spent, b.spent);
                compared++;
                if (mode != LEDGER_PLD)
                    continue;
                /* the prefetch's test: decided by the memo exactly when it covers it */
                spend_result r;
                spend_scratch(g, LEDGER_RDP, eps, delta, t, n, xs[xi], k, &r);
                int within = spend_rdp_within(g, memo, r.spent, delta, DP_REL_ADD_OR_REMOVE, t, n,
                                              xs[xi], k),
                    below = spend_rdp_within(g, memo, nextafter(r.spent, 0.0), delta,
                                             DP_REL_ADD_OR_REMOVE, t, n, xs[xi], k);
                CHECKF(!below, "step %d: within a budget below its rdp value %.17g", step, r.spent);
                if (n >= SPEND_MEMO_MIN && xi < 2)
                    CHECKF(within, "step %d, x %d: a covered composition not decided", step, xi);
                decided += within;
            }
            /* pld: the PLD value in the cache (spend_refine puts it there) is the answer's,
             * within the budget and past it */
            if (mode == LEDGER_PLD && n >= SPEND_MEMO_MIN && step % 60 == 59) {
                spend_term w[NEV];
                memcpy(w, t, n * sizeof *w);
                spend_refine(g, eps, delta, DP_REL_ADD_OR_REMOVE, w, n, NULL, &a);
                for (int past = 0; past < 2; past++) {
                    double e = past ? 1e-3 : eps;
                    spend_eval_more(g, memo, NULL, mode, e, delta, DP_REL_ADD_OR_REMOVE, t, n, NULL,
                                    0, &a);
                    spend_scratch(g, mode, e, delta, t, n, NULL, 0, &b);
                    CHECKF(same_spend(&a, &b) && a.accountant == DP_ACCT_PLD,
                           "step %d (past %d): %.17g (%d), from scratch %.17g (%d)", step, past,
                           a.spent, a.accountant, b.spent, b.accountant);
                    cached++;
                }
            }
        }
        spend_memo_free(memo);
    }
    CHECKF(compared > 2000 && decided > 100 && cached >= 4,
           "%ld compared, %ld decided by the memo, %ld from the cache", compared, decided, cached);
    for (int i = 0; i < NEV; i++) {
        if (g)
            spend_event_put(g, se[i]);
        dp_event_free(ev[i]);
    }
    spend_engine_free(g);
}

typedef struct {
    ledger *l;
    atomic_int done; /* the change returned */
    double t0, round_s;
    double eps; /* long_put: the budget it sets */
} long_charge;

static void *long_round(void *arg)
{
    long_charge *lc = arg;
    dp_event *ev = sgd(0.95, 0.01, 50);
    const char *p[] = {"slow"};
    ledger_round_res res;
    if (ev && charge(lc->l, "long", ev, p, 1, &res) == DPB_OK)
        ledger_round_res_free(&res);
    lc->round_s = tl_now() - lc->t0;
    atomic_store(&lc->done, 1);
    dp_event_free(ev);
    return NULL;
}

static void *long_put(void *arg)
{
    long_charge *lc = arg;
    put_pld(lc->l, "slow", lc->eps, 1e-5);
    lc->round_s = tl_now() - lc->t0;
    atomic_store(&lc->done, 1);
    return NULL;
}

/* A change (run by `change` on its own thread) that needs a long PLD computation for client
 * "slow", whose history has 40 distinct events: summaries, clients and lists are read
 * meanwhile, and the first read must not wait for the change's end. `lower`: the budget is
 * first lowered below the rdp bound (so that the change's spend needs the PLD); else the
 * change itself is given lc->eps = 0.9 of the spend. */
static void reads_during_long_change(void *(*change)(void *), int lower, const char *what)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    ledger_kept_cap(l, 0); /* the PLD from scratch: the long computation these tests need */
    put_pld(l, "slow", 1000.0, 1e-5);
    put_pld(l, "other", 1000.0, 1e-5);
    /* a history of 40 distinct events (cheap while the rdp bound decides; its PLD takes long
     * enough, also on a fast machine, for the reads to show whether they wait: 24 events of
     * 50 steps took 0.09 s once the PLD accountant reused its work across requests) */
    const char *p[] = {"slow", "other"};
    for (int k = 0; k < 40; k++) {
        dp_event *ev = sgd(0.6 + 0.01 * k, 0.01, 200);
        char rid[16];
        snprintf(rid, sizeof rid, "h%d", k);
        ledger_round_res res;
        if (ev && charge(l, rid, ev, p, 2, &res) == DPB_OK)
            ledger_round_res_free(&res);
        dp_event_free(ev);
    }
    ledger_client c;
    CHECK(ledger_get_client(l, "slow", &c) == DPB_OK);
    if (lower) /* a budget below the rdp bound: the next round needs the PLD of 41 events */
        put_pld(l, "slow", 0.9 * c.spent, 1e-5);
    long_charge lc = {l, 0, tl_now(), 0.0, 0.9 * c.spent};
    pthread_t t;
    pthread_create(&t, NULL, change, &lc);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);                            /* the change has started */
    double deadline = tl_now() + 60.0, first = -1.0; /* the first read's end, from the start */
    int reads = 0;
    while (!atomic_load(&lc.done) && tl_now() < deadline) {
        ledger_summary s;
        ledger_client o;
        ledger_client page[4];
        size_t n, total;
        uint64_t v;
        ledger_query q = {-1, NULL, LEDGER_SORT_ID, 0, 0, 4};
        ledger_get_summary(l, &s);
        ledger_get_client(l, "other", &o);
        ledger_list(l, &q, page, &n, &total, &v);
        if (!atomic_load(&lc.done) && reads++ == 0)
            first = tl_now() - lc.t0;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    pthread_join(t, NULL);
    /* with the PLD computed under the write lock, the first read would end with the lock's
     * release, at the change's end */
    printf("# the long %s took %.3f s\n", what, lc.round_s);
    CHECKF(lc.round_s > 0.1, "the %s took %.3f s: too short to show anything", what, lc.round_s);
    CHECKF(reads > 0 && first < 0.5 * lc.round_s,
           "%d reads during the %.3f s %s, the first answered at %.3f s", reads, lc.round_s, what,
           first);
    if (!lower) { /* the PUT's spend is the PLD's, below the rdp bound it replaced */
        ledger_client after;
        CHECK(ledger_get_client(l, "slow", &after) == DPB_OK);
        CHECKF(after.epsilon == lc.eps && after.spent <= c.spent,
               "after the PUT: budget %.17g (want %.17g), spent %.17g (rdp %.17g)", after.epsilon,
               lc.eps, after.spent, c.spent);
    }
    ledger_close(l);
    tl_remove_dir(dir);
}

/* A round whose participant needs a long PLD computation (computed before the round's write
 * lock). */
static void spend_reads_during_long_charge(void)
{
    reads_during_long_change(long_round, 1, "round");
}

/* A PUT lowering a pld client's budget below its rdp bound: its re-evaluation needs the PLD
 * of its history, computed before the PUT's write lock. */
static void spend_reads_during_long_put(void)
{
    reads_during_long_change(long_put, 0, "PUT");
}

/* One reservation (phase reserve, an hour) of ev for ids; DPB_OK or the failure. */
static dpb_status reserve(ledger *l, const char *rid, const dp_event *ev, const char *const *ids,
                          size_t n)
{
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    rq.reserve = 1;
    rq.ttl_seconds = 3600;
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_round(l, &rq, &res, &err);
    CHECKF(st == DPB_OK && res.admitted == n, "reserve %s: %s", rid, err.detail);
    if (st == DPB_OK)
        ledger_round_res_free(&res);
    return st;
}

static void *long_commit(void *arg)
{
    long_charge *lc = arg;
    const char *p[] = {"slow"};
    unsigned char h[16];
    ledger_hash128("c1", 2, h);
    ledger_round_res res;
    dpb_error err = {0};
    lc->t0 = tl_now();
    if (ledger_commit(lc->l, "r1", p, 1, h, &res, &err) == DPB_OK)
        ledger_round_res_free(&res);
    lc->round_s = tl_now() - lc->t0;
    atomic_store(&lc->done, 1);
    return NULL;
}

/* A commit whose client's new status needs a PLD no admission computed (two reservations
 * of two events held, the first committed): computed before the
 * commit's write lock (ledger_prefetch.c), so reads go on meanwhile; computed under it, the
 * first read would end with the commit. */
static void spend_reads_during_long_commit(void)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    ledger_kept_cap(l, 0); /* the PLD from scratch: the long computation this test needs */
    put_pld(l, "slow", 1000.0, 1e-5);
    put_pld(l, "other", 1000.0, 1e-5);
    const char *p[] = {"slow", "other"};
    for (int k = 0; k < 40; k++) { /* 40 distinct events: a PLD long enough to show */
        dp_event *ev = sgd(0.6 + 0.01 * k, 0.01, 200);
        char rid[16];
        snprintf(rid, sizeof rid, "h%d", k);
        ledger_round_res res;
        if (ev && charge(l, rid, ev, p, 2, &res) == DPB_OK)
            ledger_round_res_free(&res);
        dp_event_free(ev);
    }
    ledger_client c;
    CHECK(ledger_get_client(l, "slow", &c) == DPB_OK);
    put_pld(l, "slow", 0.95 * c.spent, 1e-5); /* below the rdp bound: PLDs decide */
    /* small events: r1 of one, r2 of another (the commit's new status, history + 2 of the
     * first + 1 of the second, is a multiset no admission evaluated) */
    dp_event *ev = sgd(2.0, 0.01, 10), *ev2 = sgd(2.5, 0.01, 10);
    if (ev == NULL || ev2 == NULL || reserve(l, "r1", ev, p, 1) != DPB_OK ||
        reserve(l, "r2", ev2, p, 1) != DPB_OK) {
        dp_event_free(ev);
        dp_event_free(ev2);
        ledger_close(l);
        tl_remove_dir(dir);
        return;
    }
    long_charge lc = {l, 0, tl_now(), 0.0, 0.0};
    pthread_t t;
    pthread_create(&t, NULL, long_commit, &lc);
    nanosleep(&(struct timespec){0, 20000000}, NULL); /* the commit has started */
    double deadline = tl_now() + 60.0, first = -1.0;
    int reads = 0;
    while (!atomic_load(&lc.done) && tl_now() < deadline) {
        ledger_client o;
        ledger_get_client(l, "other", &o);
        if (!atomic_load(&lc.done) && reads++ == 0)
            first = tl_now() - lc.t0;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    pthread_join(t, NULL);
    printf("# the long commit took %.3f s\n", lc.round_s);
    CHECKF(lc.round_s > 0.1, "the commit took %.3f s: too short to show anything", lc.round_s);
    CHECKF(reads > 0 && first < 0.5 * lc.round_s,
           "%d reads during the %.3f s commit, the first answered at %.3f s", reads, lc.round_s,
           first);
    ledger_client after;
    CHECK(ledger_get_client(l, "slow", &after) == DPB_OK && after.rounds == c.rounds + 1);
    dp_event_free(ev);
    dp_event_free(ev2);
    ledger_close(l);
    tl_remove_dir(dir);
}

/* A pld client's state as one read of a list (its entry and the view, under one lock). */
static int read_with_view(ledger *l, const char *id, ledger_client *c, uint64_t *view)
{
    ledger_client page[8];
    size_t n = 0, total = 0;
    ledger_query q = {-1, NULL, LEDGER_SORT_ID, 0, 0, 8};
    if (ledger_list(l, &q, page, &n, &total, view) != DPB_OK)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(page[i].id, id) == 0) {
            *c = page[i];
            return 0;
        }
    return -1;
}

/* With pld_refine, a pld client far from its budget comes to show the PLD value of its
 * composition (dp_epsilon_ex with the pld accountant), naming pld, its version kept (the
 * log's) while the views' ETag changes; without it, it stays rdp (spend_pld_matches_compute). */
static void spend_refine_shows_pld(void)
{
    char dir[256];
    ledger *l = open_fresh_ex(dir, sizeof dir, 1);
    if (l == NULL)
        return;
    enum { NEV = 3 };
    dp_event *ev[NEV] = {sgd(1.0, 0.02, 20), sgd(1.3, 0.02, 20), sgd(2.0, 0.05, 10)};
    uint64_t cnt[NEV] = {2, 1, 1};
    for (int i = 0; i < NEV; i++)
        if (ev[i] == NULL)
            goto out;
    put_pld(l, "far", 100.0, 1e-5);
    const char *p[] = {"far"};
    const int plan[] = {0, 1, 0, 2};
    for (size_t k = 0; k < 4; k++) {
        char rid[16];
        snprintf(rid, sizeof rid, "f%zu", k);
        ledger_round_res res;
        if (charge(l, rid, ev[plan[k]], p, 1, &res) != DPB_OK)
            goto out;
        ledger_round_res_free(&res);
    }
    double r = eps_of(ev, cnt, NEV, 1e-5, DP_ACCT_RDP),
           want = eps_of(ev, cnt, NEV, 1e-5, DP_ACCT_PLD);
    CHECKF(want < r && r < 100.0, "pld %.17g, rdp %.17g", want, r);
    ledger_client c0, c;
    uint64_t view0 = 0, view = 0;
    CHECK(read_with_view(l, "far", &c0, &view0) == 0);
    double deadline = tl_now() + 60.0;
    int polls = 0;
    while (read_with_view(l, "far", &c, &view) == 0 && c.spent_accountant != DP_ACCT_PLD &&
           tl_now() < deadline && polls++ < 60000)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    CHECKF(c.spent_accountant == DP_ACCT_PLD, "not refined within 60 s (accountant %d)",
           c.spent_accountant);
    CHECKF(c.spent == want, "refined spend %.17g, dp_epsilon_ex pld says %.17g", c.spent, want);
    CHECK(c.version == c0.version && c.rounds == 4);
    if (c0.spent_accountant == DP_ACCT_RDP) /* read before the refinement: the view changed */
        CHECK(view != view0 && c0.spent == r);
    check_client(l, "far", ev, cnt, NEV);
    ledger_summary sm;
    ledger_get_summary(l, &sm);
    CHECK(sm.refined >= 1 && sm.view == view);
    /* and a restart recomputes it (a snapshot keeps the value; the name is derived) */
    ledger_close(l);
    l = reopen(dir);
    if (l) {
        CHECK(ledger_get_client(l, "far", &c) == DPB_OK && c.version == c0.version);
        check_client(l, "far", ev, cnt, NEV);
    }
out:
    finish(l, dir, ev, NEV);
}

/* A charge while the refinement computes a PLD: the stale value is never shown; every read
 * is the rdp or the pld value of the client's current composition. (The charge stops the
 * computation, or, when it has just finished, the unchanged-client check discards it.) */
static void spend_refine_never_stale(void)
{
    char dir[256];
    ledger *l = open_fresh_ex(dir, sizeof dir, 1);
    if (l == NULL)
        return;
    enum { NEV = 16 };
    dp_event *ev[NEV] = {0};
    uint64_t cnt[NEV] = {0};
    for (int k = 0; k < NEV; k++)
        if ((ev[k] = sgd(0.8 + 0.01 * k, 0.01, 50)) == NULL)
            goto out;
    put_pld(l, "slow", 1000.0, 1e-5);
    const char *p[] = {"slow"};
    int k = 0;
    ledger_summary sm = {0};
    /* a history of 7 distinct events: its PLD takes a while */
    for (; k < 7; k++) {
        char rid[16];
        snprintf(rid, sizeof rid, "s%d", k);
        ledger_round_res res;
        if (charge(l, rid, ev[k], p, 1, &res) != DPB_OK)
            goto out;
        ledger_round_res_free(&res);
        cnt[k] = 1;
    }
    /* up to 4 tries: one more event (a state to refine), wait until the refinement computes,
     * then charge one more */
    for (int tries = 0; tries < 4 && k + 1 < NEV && sm.refine_stale + sm.refine_abandoned == 0;
         tries++, k++) {
        char rid0[16];
        snprintf(rid0, sizeof rid0, "s%d", k);
        ledger_round_res res0;
        if (charge(l, rid0, ev[k], p, 1, &res0) != DPB_OK)
            goto out;
        ledger_round_res_free(&res0);
        cnt[k++] = 1;
        double deadline = tl_now() + 30.0;
        for (int polls = 0; polls < 30000 && tl_now() < deadline; polls++) {
            ledger_get_summary(l, &sm);
            if (sm.refining)
                break;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        CHECKF(sm.refining, "the refinement did not start within 30 s");
        char rid[16];
        snprintf(rid, sizeof rid, "s%d", k);
        ledger_round_res res;
        if (charge(l, rid, ev[k], p, 1, &res) != DPB_OK)
            goto out;
        ledger_round_res_free(&res);
        cnt[k] = 1;
        double r = eps_of(ev, cnt, NEV, 1e-5, DP_ACCT_RDP),
               want = eps_of(ev, cnt, NEV, 1e-5, DP_ACCT_PLD);
        /* every read until the refinement of this composition is its rdp or pld value */
        ledger_client c = {0};
        deadline = tl_now() + 60.0;
        for (int polls = 0; polls < 60000 && tl_now() < deadline; polls++) {
            CHECK(ledger_get_client(l, "slow", &c) == DPB_OK);
            int ok = (c.spent_accountant == DP_ACCT_RDP && c.spent == r) ||
                     (c.spent_accountant == DP_ACCT_PLD && c.spent == want);
            CHECKF(ok, "try %d: spent %.17g (%d): rdp %.17g, pld %.17g of the composition", tries,
                   c.spent, c.spent_accountant, r, want);
            if (!ok || c.spent_accountant == DP_ACCT_PLD)
                break;
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        CHECKF(c.spent_accountant == DP_ACCT_PLD, "try %d: not refined within 60 s", tries);
        ledger_get_summary(l, &sm);
    }
    CHECKF(sm.refine_stale + sm.refine_abandoned >= 1,
           "no refinement was overtaken by a charge in 4 tries");
out:
    finish(l, dir, ev, NEV);
}

/* ---- kept compositions (core/ledger/spend_kept.c) ------------------------------------------ */

/* The compute API's pld and rdp values of a count vector over ev, remembered (the property
 * test asks for the same histories again). */
typedef struct {
    uint64_t cnt[8];
    double p, r;
} known_value;
static known_value known[512];
static size_t nknown;

static void scratch_values(dp_event *const *ev, const uint64_t *cnt, size_t n, double *p, double *r)
{
    for (size_t i = 0; i < nknown; i++)
        if (memcmp(known[i].cnt, cnt, n * sizeof *cnt) == 0) {
            *p = known[i].p;
            *r = known[i].r;
            return;
        }
    *p = eps_of(ev, cnt, n, 1e-5, DP_ACCT_PLD);
    *r = eps_of(ev, cnt, n, 1e-5, DP_ACCT_RDP);
    if (nknown < sizeof known / sizeof known[0]) {
        memset(known[nknown].cnt, 0, sizeof known[nknown].cnt);
        memcpy(known[nknown].cnt, cnt, n * sizeof *cnt);
        known[nknown].p = *p;
        known[nknown++].r = *r;
    }
}

/* check_client's test for histories whose events the ledger met in another order than ev's:
 * an rdp value is the same sum in another order (within 1e-12), a pld value kept_close. */
static double kept_excess_max, kept_excess_min = HUGE_VAL; /* relative, pld values seen */

static void kept_check_client(ledger *l, const char *id, dp_event *const *ev, const uint64_t *cnt,
                              size_t n)
{
    ledger_client c;
    CHECK(ledger_get_client(l, id, &c) == DPB_OK);
    double p, r;
    scratch_values(ev, cnt, n, &p, &r);
    if (c.spent_accountant == DP_ACCT_RDP) {
        CHECKF(fabs(c.spent - r) <= 1e-12 * r && (r <= c.epsilon || !(p * (1.0 + KEPT_EXCESS) < r)),
               "%s: rdp %.17g, from scratch rdp %.17g pld %.17g", id, c.spent, r, p);
        return;
    }
    CHECKF(c.spent_accountant == DP_ACCT_PLD && kept_close(c.spent, p) &&
               c.spent <= r * (1.0 + 1e-12),
           "%s: %d %.17g, from scratch pld %.17g rdp %.17g", id, c.spent_accountant, c.spent, p, r);
    if (c.spent_accountant == DP_ACCT_PLD && p > 0.0) {
        kept_excess_max = fmax(kept_excess_max, c.spent / p - 1.0);
        kept_excess_min = fmin(kept_excess_min, c.spent / p - 1.0);
    }
}

/* Random histories of pld clients near their budgets: rounds of new and repeated events,
 * reservations released (withdrawn charges), restarts and evictions of the kept
 * compositions. Every admission agrees with the compute API's from-scratch values of the same
 * history: never admitted when min(pld, rdp) from scratch passes the budget by more than the
 * round-off (KEPT_BELOW), never refused when it is within the budget by more than the stated
 * excess (KEPT_EXCESS); every stored spend as check_client says. */
static void spend_kept_random_histories(void)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    enum { NEV = 8, NC = 5, OPS = 36 };
    dp_event *ev[NEV] = {NULL};
    int ok = 1;
    for (int i = 0; i < NEV; i += 2) { /* Poisson-sampled Gaussians and Gaussians */
        ok = ok && (ev[i] = sgd(0.9 + 0.1 * i, 0.05, 10)) != NULL &&
             gaussians(&ev[i + 1], 1, 3.0 + 0.5 * i, 0.0) == 0;
    }
    if (!ok)
        goto out;
    nknown = 0;
    uint64_t cnt[NC][NEV] = {{0}}, one[NEV];
    for (int i = 0; i < NEV; i++)
        one[i] = 1;
    double p3, r3;
    scratch_values(ev, one, NEV, &p3, &r3);
    CHECKF(p3 < r3, "pld %.17g, rdp %.17g", p3, r3);
    const char *ids[NC] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < NC; i++) /* budgets around what 6 to 12 rounds spend */
        put_pld(l, ids[i], p3 * (0.8 + 0.2 * i), 1e-5);
    unsigned seed = 38u;
    int admitted = 0, refused = 0, band = 0, restarts = 0, evictions = 0, withdrawn = 0;
    for (int op = 0; op < OPS && l != NULL; op++) {
        int what = rand_r(&seed) % 10, e = rand_r(&seed) % NEV;
        if (what == 0) { /* a restart: every kept composition rebuilt when next needed */
            ledger_close(l);
            l = reopen(dir);
            restarts++;
            for (int i = 0; l && i < NC; i++)
                kept_check_client(l, ids[i], ev, cnt[i], NEV);
            continue;
        }
        if (what == 1) { /* an eviction of all of them */
            ledger_kept_cap(l, 1);
            ledger_kept_cap(l, SPEND_KEPT_BYTES);
            evictions++;
            continue;
        }
        const char *part[NC];
        int pi[NC], n = 0;
        for (int i = 0; i < NC; i++)
            if (rand_r(&seed) % 10 < 7) {
                pi[n] = i;
                part[n++] = ids[i];
            }
        if (n == 0)
            continue;
        char rid[16];
        snprintf(rid, sizeof rid, "k%d", op);
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
        rq.policy = LEDGER_ADMIT_ELIGIBLE;
        rq.event = ev[e];
        rq.participants = part;
        rq.n = (size_t)n;
        rq.reserve = what == 2 || what == 3; /* then released: a withdrawn charge */
        rq.ttl_seconds = rq.reserve ? 60 : 0;
        ledger_hash128(rid, strlen(rid), rq.body_hash);
        ledger_round_res res;
        dpb_error err = {0};
        if (ledger_round(l, &rq, &res, &err) != DPB_OK) {
            CHECKF(0, "round %s: %s", rid, err.detail);
            break;
        }
        for (size_t j = 0; j < res.n; j++) {
            const ledger_outcome *o = &res.outcomes[j];
            int i = pi[j];
            cnt[i][e]++;
            double p, r;
            scratch_values(ev, cnt[i], NEV, &p, &r);
            double best = p < r ? p : r, eps = p3 * (0.8 + 0.2 * i);
            if (o->admitted) {
                admitted++;
                CHECKF(best <= eps * (1.0 + KEPT_BELOW),
                       "%s op %d: admitted, from scratch pld %.17g rdp %.17g past %.17g", ids[i],
                       op, p, r, eps);
            } else {
                refused++;
                CHECKF(o->reason == LEDGER_OVER_BUDGET || o->reason == LEDGER_EXHAUSTED_ALREADY,
                       "%s op %d: refused for %d", ids[i], op, (int)o->reason);
                CHECKF(!(best * (1.0 + KEPT_EXCESS) <= eps),
                       "%s op %d: refused, from scratch pld %.17g rdp %.17g within %.17g", ids[i],
                       op, p, r, eps);
                band += best <= eps;
            }
            if (!o->admitted || rq.reserve)
                cnt[i][e]--;
        }
        ledger_round_res_free(&res);
        if (rq.reserve) {
            ledger_round_res rel;
            CHECKF(ledger_release(l, rid, &rel, &err) == DPB_OK, "release %s: %s", rid, err.detail);
            ledger_round_res_free(&rel);
            withdrawn++;
        }
        for (int i = 0; i < NC; i++)
            kept_check_client(l, ids[i], ev, cnt[i], NEV);
    }
    printf("# kept: %d admitted, %d refused (%d within the excess band), %d restarts, %d "
           "evictions, %d reservations released; pld spends %.4f%% to %.4f%% above the compute "
           "API's\n",
           admitted, refused, band, restarts, evictions, withdrawn, 100.0 * kept_excess_min,
           100.0 * kept_excess_max);
    CHECKF(admitted > 20 && refused > 5 && restarts > 0 && evictions > 0 && withdrawn > 0,
           "the schedule must exercise every path");
out:
    finish(l, dir, ev, NEV);
}

/* ev[0..n) registered in g for add-or-remove into se (references): 1, or 0 when one could
 * not be made (ev[i] NULL, or g NULL). */
static int register_all(spend_engine *g, dp_event *const *ev, spend_event **se, int n)
{
    int ok = g != NULL;
    for (int i = 0; ok && i < n; i++) {
        unsigned char *b = NULL;
        size_t len = 0, cap = 0;
        ok = ev[i] != NULL && dp_event_encode(ev[i], &b, &len, &cap) == DPB_OK &&
             spend_event_get(g, b, len, DP_REL_ADD_OR_REMOVE, &se[i]) == DPB_OK;
        free(b);
    }
    return ok;
}

/* The end of an engine test: the events' references, the events and the engine go. */
static void engine_done(spend_engine *g, dp_event **ev, spend_event **se, int n)
{
    for (int i = 0; i < n; i++) {
        if (se[i])
            spend_event_put(g, se[i]);
        dp_event_free(ev[i]);
    }
    spend_engine_free(g);
}

/* An engine's kept compositions: a history extended charge by charge and the same history
 * rebuilt after an eviction give the same value to the round-off; admission tests decided
 * without a composition (spend_decide_only: eligibility's probes) agree with the values
 * except within 1e-9 of the budget; k more of an event agree with k charges of it. */
static void spend_kept_decide_agrees(void)
{
    spend_engine *g = spend_engine_new(0);
    enum { NEV = 4 };
    dp_event *ev[NEV] = {sgd(1.0, 0.05, 10), sgd(1.3, 0.05, 10), sgd(0.8, 0.02, 20),
                         sgd(2.0, 0.1, 5)};
    spend_event *se[NEV] = {NULL};
    int ok = register_all(g, ev, se, NEV);
    CHECK(ok);
    unsigned seed = 3838u;
    spend_term t[NEV];
    size_t m = 0;
    for (int step = 0; ok && step < 24; step++) {
        int e = rand_r(&seed) % NEV;
        uint64_t k = 1 + (uint64_t)(rand_r(&seed) % 6);
        spend_result v, d, c;
        /* the value of k more of e (a budget below every rdp value: the PLD decides) */
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t, m, se[e], k,
                        &v);
        CHECKF(v.accountant == DP_ACCT_PLD && isfinite(v.spent), "step %d: %d %.17g", step,
               v.accountant, v.spent);
        for (int side = 0; side < 2; side++) {
            double eps = v.spent * (side ? 1.0 + 1e-6 : 1.0 - 1e-6);
            spend_decide_only(1);
            spend_eval_more(g, NULL, NULL, LEDGER_PLD, eps, 1e-5, DP_REL_ADD_OR_REMOVE, t, m, se[e],
                            k, &d);
            spend_decide_only(0);
            CHECKF((d.spent <= eps) == side, "step %d: %s at %.17g decided %s (value %.17g)", step,
                   side ? "within" : "past", eps, d.spent <= eps ? "admits" : "refuses", v.spent);
        }
        /* the same composition charged one at a time: the same value to the round-off */
        spend_term w[NEV];
        size_t mw = m;
        memcpy(w, t, m * sizeof *t);
        for (uint64_t j = 0; j < k; j++) {
            spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, w, mw,
                            se[e], 1, &c);
            size_t q = 0;
            while (q < mw && w[q].ev != se[e])
                q++;
            if (q == mw)
                w[mw++] = (spend_term){se[e], 0};
            w[q].count++;
        }
        CHECKF(fabs(c.spent - v.spent) <= 1e-6 * v.spent,
               "step %d: %.17g charged one by one, "
               "%.17g at once",
               step, c.spent, v.spent);
        /* the history itself rebuilt after an eviction */
        spend_result a, b;
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, w, mw, NULL, 0,
                        &a);
        spend_engine_kept_cap(g, 1);
        spend_engine_kept_cap(g, SPEND_KEPT_BYTES);
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, w, mw, NULL, 0,
                        &b);
        CHECKF(fabs(a.spent - b.spent) <= 1e-6 * a.spent, "step %d: %.17g kept, %.17g rebuilt",
               step, a.spent, b.spent);
        if (a.spent > 3.0) { /* start again: the histories stay short */
            m = 0;
            continue;
        }
        memcpy(t, w, mw * sizeof *w);
        m = mw;
    }
    spend_stats st;
    if (g) {
        spend_engine_stats(g, &st);
        CHECKF(st.kept_composed > 0 && st.kept_rebuilt > 0 && st.kept_fallbacks == 0,
               "%llu composed, %llu rebuilt, %llu from scratch",
               (unsigned long long)st.kept_composed, (unsigned long long)st.kept_rebuilt,
               (unsigned long long)st.kept_fallbacks);
    }
    for (int i = 0; i < NEV; i++) {
        if (se[i])
            spend_event_put(g, se[i]);
        dp_event_free(ev[i]);
    }
    spend_engine_free(g);
}

/* An engine with two Poisson-sampled Gaussian steps registered (ev, se), or NULL (then
 * nothing to free). */
static spend_engine *two_events(dp_event *ev[2], spend_event *se[2])
{
    spend_engine *g = spend_engine_new(0);
    ev[0] = sgd(1.0, 0.05, 10);
    ev[1] = sgd(1.2, 0.05, 10);
    se[0] = se[1] = NULL;
    int ok = register_all(g, ev, se, 2);
    CHECK(ok);
    if (!ok) {
        engine_done(g, ev, se, 2);
        return NULL;
    }
    return g;
}

/* A client's history composed ahead for a test (a prospective entry, the first evicted) and
 * then read as the client's own spend while its rdp bound still decides it (the status's
 * test past the rdp bound, the charge within it) is kept as a history: lowering the cap by
 * one byte evicts the stale base, not it, and asking for it again past the rdp bound
 * composes and rebuilds nothing. (Before, it stayed prospective: evicted first, and
 * eligibility rebuilt it.) */
static void spend_kept_status_history_kept(void)
{
    dp_event *ev[2];
    spend_event *se[2];
    spend_engine *g = two_events(ev, se);
    if (g) {
        spend_term t[2] = {{se[0], 4}, {se[1], 0}}, w[2] = {{se[0], 4}, {se[1], 1}};
        spend_result a, b, c;
        /* t and one more of se[1], composed (past the rdp bound), as a test leaves it */
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t, 1, se[1], 1,
                        &a);
        /* the same composition as the client's own spend, the rdp bound within the budget */
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 100.0, 1e-5, DP_REL_ADD_OR_REMOVE, w, 2, NULL, 0,
                        &b);
        spend_stats s0, s1;
        spend_engine_stats(g, &s0);
        spend_engine_kept_cap(g, s0.kept_bytes - 1);
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, w, 2, NULL, 0,
                        &c);
        spend_engine_stats(g, &s1);
        CHECKF(a.accountant == DP_ACCT_PLD && b.accountant == DP_ACCT_PLD && c.spent == a.spent &&
                   s1.kept_evicted > s0.kept_evicted && s1.kept_composed == s0.kept_composed &&
                   s1.kept_rebuilt == s0.kept_rebuilt,
               "%d %d %.17g %.17g: %llu evicted, %llu composed, %llu rebuilt", a.accountant,
               b.accountant, a.spent, c.spent,
               (unsigned long long)(s1.kept_evicted - s0.kept_evicted),
               (unsigned long long)(s1.kept_composed - s0.kept_composed),
               (unsigned long long)(s1.kept_rebuilt - s0.kept_rebuilt));
    }
    if (g)
        engine_done(g, ev, se, 2);
}

/* A small power of an event (a short eligibility search's probe, shared by every client it
 * asks about) is kept as an ordinary entry: lowering the cap by one byte evicts another
 * entry, and the same probe again makes no power (kept_powers stays). Before, powers were
 * prospective, the first evicted: each history a search rebuilt pushed one out, made again
 * for the next client (10,000 clients: 8 evictions a client, half the search's time). */
static void spend_kept_small_power_kept(void)
{
    dp_event *ev[2];
    spend_event *se[2];
    spend_engine *g = two_events(ev, se);
    if (g) {
        spend_term t[1] = {{se[0], 3}};
        spend_result a, b;
        spend_stats s0, s1, s2;
        spend_decide_only(1); /* a probe: 5 more of se[1], past the rdp bound */
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t, 1, se[1], 5,
                        &a);
        spend_engine_stats(g, &s0);
        spend_engine_kept_cap(g, s0.kept_bytes - 1);
        spend_engine_stats(g, &s1);
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t, 1, se[1], 5,
                        &b);
        spend_decide_only(0);
        spend_engine_stats(g, &s2);
        CHECKF(s0.kept_powers >= 1 && s1.kept_evicted > s0.kept_evicted &&
                   s2.kept_powers == s0.kept_powers && (a.spent <= 1e-3) == (b.spent <= 1e-3),
               "%llu powers, %llu evicted, %llu powers after", (unsigned long long)s0.kept_powers,
               (unsigned long long)(s1.kept_evicted - s0.kept_evicted),
               (unsigned long long)s2.kept_powers);
    }
    if (g)
        engine_done(g, ev, se, 2);
}

/* A history rebuilt after an eviction is composed term by term, as its charges composed it:
 * five events charged once each, in order, then every kept composition evicted, give the
 * same value bit for bit (before, the rebuild composed them at once in the Fourier domain:
 * the same within round-off, not the same bits). */
static void spend_kept_rebuild_as_charged(void)
{
    spend_engine *g = spend_engine_new(0);
    enum { NE = 5 };
    dp_event *ev[NE] = {NULL};
    spend_event *se[NE] = {NULL};
    for (int i = 0; i < NE; i++)
        ev[i] = sgd(0.9 + 0.1 * i, 0.05, 10);
    int ok = register_all(g, ev, se, NE);
    CHECK(ok);
    if (ok) {
        spend_term t[NE];
        spend_result a, b;
        for (int i = 0; i < NE; i++) { /* the charge of se[i], then the history itself */
            spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t,
                            (size_t)i, se[i], 1, &a);
            t[i] = (spend_term){se[i], 1};
        }
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t, NE, NULL, 0,
                        &a);
        spend_engine_kept_cap(g, 1);
        spend_engine_kept_cap(g, SPEND_KEPT_BYTES);
        spend_stats s0, s1;
        spend_engine_stats(g, &s0);
        spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t, NE, NULL, 0,
                        &b);
        spend_engine_stats(g, &s1);
        CHECKF(a.accountant == DP_ACCT_PLD && a.spent == b.spent &&
                   s1.kept_rebuilt == s0.kept_rebuilt + 1,
               "charged %.17g, rebuilt %.17g (%llu rebuilt)", a.spent, b.spent,
               (unsigned long long)(s1.kept_rebuilt - s0.kept_rebuilt));
    }
    engine_done(g, ev, se, NE);
}

/* One round of ev for every id (admit eligible); the number admitted, -1 on failure. */
static int round_all(ledger *l, const char *rid, dp_event *ev, const char **ids, size_t n)
{
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.policy = LEDGER_ADMIT_ELIGIBLE;
    rq.event = ev;
    rq.participants = ids;
    rq.n = n;
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    ledger_round_res res;
    dpb_error err = {0};
    if (ledger_round(l, &rq, &res, &err) != DPB_OK) {
        CHECKF(0, "round %s: %s", rid, err.detail);
        return -1;
    }
    int admitted = (int)res.admitted;
    ledger_round_res_free(&res);
    return admitted;
}

/* A round of pld clients past their rdp bound, each with a memo (20 distinct events): the
 * prefetch takes the rdp values the memos give under the read lock, so no history's RDP
 * curves are summed in full (ledger_kept_figures.rdp_summed stays), while the PLD decides
 * (compositions extended or rebuilt: the clients share one history). Before, the prefetch summed
 * each participant's history twice. */
static void spend_round_sums_no_history(void)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    enum { NR = 20, NC = 4 };
    dp_event *ev[NR + 1] = {NULL};
    if (l == NULL)
        return;
    const char *ids[NC] = {"m0", "m1", "m2", "m3"};
    for (int i = 0; i < NC; i++)
        put_pld(l, ids[i], 100.0, 1e-5);
    int ok = 1;
    for (int k = 0; ok && k <= NR; k++)
        ok = (ev[k] = sgd(1.0 + 0.05 * k, 0.05, 10)) != NULL;
    for (int k = 0; ok && k < NR; k++) {
        char rid[16];
        snprintf(rid, sizeof rid, "m%d", k);
        ok = round_all(l, rid, ev[k], ids, NC) == NC;
    }
    CHECK(ok);
    for (int i = 0; ok && i < NC; i++) { /* budgets just above the spends: the PLD decides */
        ledger_client c;
        CHECK(ledger_get_client(l, ids[i], &c) == DPB_OK);
        put_pld(l, ids[i], c.spent * (1.002 + 0.004 * i), 1e-5);
    }
    ledger_kept_figures f0, f1;
    ledger_kept_stats(l, &f0);
    int admitted = ok ? round_all(l, "past", ev[NR], ids, NC) : -1;
    ledger_kept_stats(l, &f1);
    CHECKF(admitted >= 0 && f1.rdp_summed == f0.rdp_summed &&
               f1.composed + f1.rebuilt > f0.composed + f0.rebuilt,
           "%d admitted: %llu histories summed in full, %llu compositions", admitted,
           (unsigned long long)(f1.rdp_summed - f0.rdp_summed),
           (unsigned long long)(f1.composed + f1.rebuilt - f0.composed - f0.rebuilt));
    finish(l, dir, ev, NR + 1);
}

/* ---- issue 39: the rdp spend takes the order infinity, as POST /v1/epsilon does --------- */

/* A leaf for the issue-39 tests: Laplace, pure (eps, 0), Gaussian, one step of a
 * Poisson-sampled Gaussian (q 0.01) or exponential mechanism (k 0 to 4), with parameter x. */
static dp_event *leaf39(int k, double x)
{
    if (k == 3) {
        dp_event *c = sgd(x, 0.01, 1), *s = c ? c->u.self.event : NULL;
        if (c)
            c->u.self.event = NULL;
        dp_event_free(c);
        return s;
    }
    static const dp_event_kind kinds[] = {DP_EV_LAPLACE, DP_EV_EPSILON_DELTA, DP_EV_GAUSSIAN,
                                          DP_EV_GAUSSIAN, DP_EV_EXPONENTIAL};
    dp_event *e = dp_event_new(kinds[k]);
    if (e == NULL)
        return NULL;
    if (k == 0 || k == 2)
        e->u.noise.noise_multiplier = x;
    else if (k == 1)
        e->u.epsdelta.epsilon = x, e->u.epsdelta.delta = 0.0;
    else
        e->u.pure.epsilon = x;
    return e;
}

/* One Laplace of scale 10 is 0.1-DP: an rdp client's spend is POST /v1/epsilon's 0.1 (not
 * the finite orders' 0.10282), a budget of 0.101 admits it, and so does an rdp_filter budget
 * of 0.101 (the order infinity needs no share of delta). Then random compositions of pure,
 * Gaussian and Poisson-sampled Gaussian events: every rdp and pld client's spend is the compute
 * API's rdp answer, bit for bit, during the rounds and after a restart. */
static void spend_rdp_order_infinity(void)
{
    char dir[256];
    ledger *l = open_fresh(dir, sizeof dir);
    if (l == NULL)
        return;
    enum { NEV = 12, NC = 4, NR = 40 };
    dp_event *ev[NEV] = {NULL};
    const double par[NEV] = {10, 0.3, 2, 0.05, 4, 0.7, 1.5, 25, 0.2, 6, 0.01, 3};
    const int kind[NEV] = {0, 1, 0, 1, 4, 2, 3, 0, 4, 2, 1, 3};
    for (int i = 0; i < NEV; i++)
        if ((ev[i] = leaf39(kind[i], par[i])) == NULL)
            goto out;
    put_client(l, "lap", 0.101, 1e-5, LEDGER_RDP);
    put_client(l, "lapf", 0.101, 1e-5, LEDGER_RDP_FILTER);
    const char *two[] = {"lap", "lapf"};
    ledger_round_res res;
    if (charge(l, "lap10", ev[0], two, 2, &res) != DPB_OK)
        goto out;
    CHECKF(res.n == 2 && res.outcomes[0].admitted && res.outcomes[1].admitted,
           "Laplace(10) refused at a budget of 0.101");
    ledger_round_res_free(&res);
    ledger_client c;
    uint64_t one[NEV] = {1};
    double want = eps_of(ev, one, NEV, 1e-5, DP_ACCT_RDP);
    CHECKF(want >= 0.1 && want <= 0.1 * (1 + 1e-11), "/v1/epsilon rdp of Laplace(10): %.17g", want);
    CHECK(ledger_get_client(l, "lap", &c) == DPB_OK);
    CHECKF(c.spent == want, "rdp spend %.17g, /v1/epsilon %.17g", c.spent, want);
    CHECK(ledger_get_client(l, "lapf", &c) == DPB_OK);
    CHECKF(c.spent >= 0.1 && c.spent == want, "filter level %.17g", c.spent);

    const char *ids[NC] = {"r1", "r2", "p1", "p2"};
    uint64_t cnt[NC][NEV] = {{0}};
    int order[NEV], seen[NEV] = {0}, nseen = 0; /* the events in the order first charged */
    for (int i = 0; i < NC; i++)
        put_client(l, ids[i], 1e6, i % 2 ? 1e-3 : 1e-6, i < 2 ? LEDGER_RDP : LEDGER_PLD);
    order[nseen++] = 0, seen[0] = 1; /* registered by the first round */
    uint64_t rng = 39;
    for (int k = 0; k < NR; k++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int e = (int)((rng >> 33) % NEV);
        const char *p[NC];
        size_t n = 0;
        for (int i = 0; i < NC; i++)
            if ((rng >> (20 + i)) & 1)
                p[n++] = ids[i];
        if (n == 0)
            p[n++] = ids[0];
        char rid[32];
        snprintf(rid, sizeof rid, "mix%d", k);
        if (charge(l, rid, ev[e], p, n, &res) != DPB_OK)
            goto out;
        ledger_round_res_free(&res);
        if (!seen[e])
            order[nseen++] = e, seen[e] = 1;
        for (size_t j = 0; j < n; j++)
            for (int i = 0; i < NC; i++)
                if (strcmp(p[j], ids[i]) == 0)
                    cnt[i][e]++;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; l && i < NC; i++) {
            dp_event *evs[NEV];
            uint64_t cs[NEV];
            for (int j = 0; j < nseen; j++)
                evs[j] = ev[order[j]], cs[j] = cnt[i][order[j]];
            CHECK(ledger_get_client(l, ids[i], &c) == DPB_OK);
            double r = eps_of(evs, cs, (size_t)nseen, c.delta, DP_ACCT_RDP);
            if (i < 2)
                CHECKF(c.spent == r, "%s: rdp spend %.17g, /v1/epsilon rdp %.17g", ids[i], c.spent,
                       r);
            else
                CHECKF(c.spent <= r, "%s: pld spend %.17g above rdp %.17g", ids[i], c.spent, r);
        }
        if (pass == 0) {
            ledger_close(l);
            l = reopen(dir);
        }
    }
out:
    finish(l, dir, ev, NEV);
}

const tl_test SPEND_TESTS[] = {
    TL_T(spend_pld_matches_compute),      TL_T(spend_never_past_budget),
    TL_T(spend_cache_eviction),           TL_T(spend_reads_during_long_charge),
    TL_T(spend_reads_during_long_put),    TL_T(spend_refine_shows_pld),
    TL_T(spend_refine_never_stale),       TL_T(spend_memo_same_bits),
    TL_T(spend_memo_matches_compute),     TL_T(spend_memo_cap),
    TL_T(spend_reads_during_long_commit), TL_T(spend_rdp_order_infinity),
    TL_T(spend_kept_random_histories),    TL_T(spend_kept_decide_agrees),
    TL_T(spend_kept_status_history_kept), TL_T(spend_round_sums_no_history),
    TL_T(spend_kept_small_power_kept),    TL_T(spend_kept_rebuild_as_charged),
};
const size_t SPEND_NTESTS = sizeof SPEND_TESTS / sizeof SPEND_TESTS[0];
