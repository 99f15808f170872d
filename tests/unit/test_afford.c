/* test_afford.c - affordability from a copy of a client's history (core/ledger/afford.h),
 * the contract eligibility computes behind off the ledger's lock: the count it answers is
 * the largest k whose spend (spend.h, the admission's own evaluation) stays within the
 * budget, found by a linear scan here; its refusal reasons are the admission's; a
 * deadline already past stops it (DPB_ECANCELLED) and a cost cap of one PLD evaluation
 * refuses a pld history past its rdp bound (DPB_ECOST). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/ledger/afford.h"
#include "suites.h"

/* The event ev registered in g for add-or-remove (a reference), or NULL. */
static spend_event *reg(spend_engine *g, dp_event *ev)
{
    unsigned char *b = NULL;
    size_t n = 0, cap = 0;
    spend_event *e = NULL;
    if (ev && dp_event_encode(ev, &b, &n, &cap) == DPB_OK)
        (void)spend_event_get(g, b, n, DP_REL_ADD_OR_REMOVE, &e);
    free(b);
    dp_event_free(ev);
    return e;
}

static dp_event *gaussian(double sigma)
{
    dp_event *g = dp_event_new(DP_EV_GAUSSIAN);
    if (g)
        g->u.noise.noise_multiplier = sigma;
    return g;
}

static dp_event *sgd_step(double sigma, double q)
{
    dp_event *s = dp_event_new(DP_EV_POISSON_SAMPLED);
    if (s == NULL)
        return NULL;
    s->u.sampled.sampling_probability = q;
    s->u.sampled.event = gaussian(sigma);
    return s;
}

/* 1 when k more of x fit h's budget by spend_eval_more (the admission's evaluation). */
static int fits(spend_engine *g, const afford_history *h, spend_event *x, uint64_t k)
{
    spend_result r;
    spend_eval_more(g, NULL, NULL, h->mode, h->eps, h->delta, h->rel, h->t, h->m, x, k, &r);
    return r.spent <= h->eps;
}

/* rdp histories of two Gaussians with random counts and budgets: the answer is the largest
 * admitted count (a linear scan), capped at max_rounds. */
static void afford_is_the_largest_admitted_count(void)
{
    spend_engine *g = spend_engine_new(0);
    spend_event *a = reg(g, gaussian(20.0)), *b = reg(g, gaussian(35.0));
    CHECK(g && a && b);
    if (!(g && a && b))
        goto out;
    srand(34);
    for (int trial = 0; trial < 40; trial++) {
        spend_term t[2] = {{a, (uint64_t)(rand() % 30)}, {b, (uint64_t)(rand() % 30)}};
        afford_history h = {
            LEDGER_RDP, 0.5 + (rand() % 40) / 10.0, 1e-5, DP_REL_ADD_OR_REMOVE, 0, 1, 0.0, t, 2};
        uint64_t max_rounds = 50 + (uint64_t)(rand() % 400);
        afford_budget bud = {NULL, 0, 0};
        afford_result r;
        CHECK(afford_rounds(g, &h, b, max_rounds, 1, &bud, &r) == DPB_OK);
        uint64_t k = 0;
        while (k < max_rounds && fits(g, &h, b, k + 1))
            k++;
        CHECKF(r.rounds == k && r.capped == (k == max_rounds) && (r.reason == LEDGER_OK) == (k > 0),
               "trial %d: %llu rounds (capped %d, reason %d), the scan %llu of at most %llu", trial,
               (unsigned long long)r.rounds, r.capped, (int)r.reason, (unsigned long long)k,
               (unsigned long long)max_rounds);
        spend_result now;
        spend_eval_more(g, NULL, NULL, h.mode, h.eps, h.delta, h.rel, t, 2, NULL, 0, &now);
        CHECK(r.held == now.spent);
    }
    /* an uncertified history refuses as the admission does */
    afford_history u = {LEDGER_RDP, 1.0, 1e-5, DP_REL_ADD_OR_REMOVE, 1, 1, HUGE_VAL, NULL, 0};
    afford_budget bud = {NULL, 0, 0};
    afford_result r;
    CHECK(afford_rounds(g, &u, a, 10, 0, &bud, &r) == DPB_OK && r.reason == LEDGER_UNCERTIFIABLE &&
          r.rounds == 0);
out:
    spend_event_put(g, a);
    spend_event_put(g, b);
    spend_engine_free(g);
}

/* A deadline already past stops the search (nothing to show); a cost cap of one PLD
 * evaluation refuses a pld history whose search needs more; without either it is answered. */
static void afford_deadline_and_cost_cap(void)
{
    spend_engine *g = spend_engine_new(0);
    spend_event *x = reg(g, sgd_step(0.8, 0.01));
    CHECK(g && x);
    if (!(g && x))
        goto out;
    spend_term t[1] = {{x, 60}};
    afford_history h = {LEDGER_PLD, 1.5, 1e-5, DP_REL_ADD_OR_REMOVE, 0, 1, 0.0, t, 1};
    afford_result r;
    dpb_cancel past = {dpb_cancel_now() - 1.0, NULL};
    afford_budget late = {&past, 0, 0};
    CHECK(afford_rounds(g, &h, x, 1000, 0, &late, &r) == DPB_ECANCELLED);
    afford_budget capped = {NULL, 1, 0};
    CHECK(afford_rounds(g, &h, x, 1000, 0, &capped, &r) == DPB_ECOST && capped.pld_evals == 2);
    afford_budget free_ = {NULL, 0, 0};
    CHECK(afford_rounds(g, &h, x, 1000, 0, &free_, &r) == DPB_OK && r.reason == LEDGER_OK &&
          r.rounds > 0 && free_.pld_evals > 1);
out:
    spend_event_put(g, x);
    spend_engine_free(g);
}

/* A pld search near the budget sums the history's RDP curves once (the memo its first test
 * makes), not once a probe: spend_stats.rdp_summed grows by one per search (it grew by the
 * number of probes before); the count it answers is still the largest admitted one. */
static void afford_probes_read_one_memo(void)
{
    spend_engine *g = spend_engine_new(0);
    enum { NH = 20 };
    spend_event *e[NH + 1] = {NULL};
    int ok = g != NULL;
    for (int i = 0; ok && i <= NH; i++)
        ok = (e[i] = reg(g, sgd_step(0.9 + 0.05 * i, 0.05))) != NULL;
    CHECK(ok);
    if (!ok)
        goto out;
    spend_term t[NH];
    for (int i = 0; i < NH; i++)
        t[i] = (spend_term){e[i], 3};
    afford_history h = {LEDGER_PLD, 0.0, 1e-5, DP_REL_ADD_OR_REMOVE, 0, 1, 0.0, t, NH};
    spend_result now;
    spend_eval_more(g, NULL, NULL, LEDGER_PLD, 1e-3, 1e-5, DP_REL_ADD_OR_REMOVE, t, NH, NULL, 0,
                    &now);
    h.eps = now.spent * 1.5; /* some tens of rounds of e[NH] more: past the rdp bound */
    spend_stats s0, s1;
    spend_engine_stats(g, &s0);
    afford_budget bud = {NULL, 0, 0};
    afford_result r;
    CHECK(afford_rounds(g, &h, e[NH], 1000, 0, &bud, &r) == DPB_OK && r.reason == LEDGER_OK);
    spend_engine_stats(g, &s1);
    CHECKF(s1.rdp_summed - s0.rdp_summed == 1 && bud.pld_evals > 3,
           "%llu full sums for %llu pld probes",
           (unsigned long long)(s1.rdp_summed - s0.rdp_summed), (unsigned long long)bud.pld_evals);
    uint64_t k = 1;
    while (k <= 1000 && fits(g, &h, e[NH], k))
        k++;
    CHECKF(r.rounds == k - 1 && k > 2, "search %llu, scan %llu", (unsigned long long)r.rounds,
           (unsigned long long)(k - 1));
out:
    for (int i = 0; i <= NH; i++)
        if (e[i])
            spend_event_put(g, e[i]);
    spend_engine_free(g);
}

const tl_test AFFORD_TESTS[] = {
    TL_T(afford_is_the_largest_admitted_count),
    TL_T(afford_deadline_and_cost_cap),
    TL_T(afford_probes_read_one_memo),
};
const size_t AFFORD_NTESTS = sizeof AFFORD_TESTS / sizeof AFFORD_TESTS[0];
