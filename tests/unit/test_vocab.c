/*
 * test_vocab.c - the ledger's event vocabulary: the limits on an event that enters it
 * (ledger_event_check at every call taking one), the named events' limits, and recovery that
 * computes the profiles of the events its log touches only, never those of the vocabulary a
 * snapshot holds (counted by ledger_event_profiles, never timed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/dp/account.h"
#include "../../core/ledger/ledger.h"
#include "suites.h"

static ledger *open_dir(const char *dir)
{
    ledger_options o = {dir, NULL, 0, 0.0, 0.0, 1000000, 0, 0, NULL, 0, 0, 0};
    ledger *l = NULL;
    dpb_error err = {0};
    CHECKF(ledger_open(&o, &l, &err) == DPB_OK, "%s", err.detail);
    return l;
}

static dp_event *gaussian(double s)
{
    dp_event *e = dp_event_new(DP_EV_GAUSSIAN);
    if (e == NULL)
        abort();
    e->u.noise.noise_multiplier = s;
    return e;
}

/* A composition of n Gaussians (n + 1 event objects). */
static dp_event *composed(size_t n, double s)
{
    dp_event *c = dp_event_new(DP_EV_COMPOSED);
    if (c == NULL || (c->u.composed.events = calloc(n ? n : 1, sizeof(dp_event *))) == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        c->u.composed.events[c->u.composed.n++] = gaussian(s + (double)i * 1e-3);
    return c;
}

/* A tree aggregation epoch of `steps` step counts (one object, 8 bytes a step stored). */
static dp_event *tree(size_t steps)
{
    dp_event *e = dp_event_new(DP_EV_TREE_AGGREGATION);
    if (e == NULL || (e->u.tree.steps = calloc(steps, sizeof(uint64_t))) == NULL)
        abort();
    e->u.tree.noise_multiplier = 5.0;
    for (size_t i = 0; i < steps; i++)
        e->u.tree.steps[e->u.tree.nsteps++] = 1;
    return e;
}

static dpb_status put_client(ledger *l, const char *id)
{
    ledger_client in, out;
    memset(&in, 0, sizeof in);
    snprintf(in.id, sizeof in.id, "%s", id);
    in.epsilon = 1e6;
    in.delta = 1e-5;
    int created;
    return ledger_put_client(l, &in, &created, &out, NULL);
}

static dpb_status round_ev(ledger *l, const char *rid, const dp_event *ev, const char *id,
                           double *after, dpb_error *err)
{
    const char *ids[] = {id};
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    rq.event = ev;
    rq.participants = ids;
    rq.n = 1;
    ledger_hash128(rid, strlen(rid), rq.body_hash);
    ledger_round_res res;
    dpb_status st = ledger_round(l, &rq, &res, err);
    if (st == DPB_OK) {
        if (after)
            *after = res.outcomes ? res.outcomes[0].spent_after : -1.0;
        ledger_round_res_free(&res);
    }
    return st;
}

/* Recovery does work in proportion to its log, not to the vocabulary's history: 30 rounds of
 * distinct events charged to one client and held by the snapshot written at close cost no
 * profile at open; one more round of a new event for another client, left in the log (no
 * snapshot), costs exactly that event's profile. Before, open classified every event of the
 * snapshot and the log (and named each snapshot client's accountant from its curves): 31. */
static void vocab_recovery_profiles_the_log_only(void)
{
    char dir[256];
    if (tl_make_dir(dir, sizeof dir, "dpb_vocab_") != 0)
        return;
    ledger *l = open_dir(dir);
    if (l == NULL)
        goto out;
    CHECK(put_client(l, "hist") == DPB_OK && put_client(l, "late") == DPB_OK);
    double hist_spent = 0.0;
    for (int i = 0; i < 30; i++) {
        char rid[32];
        snprintf(rid, sizeof rid, "voc-%d", i);
        dp_event *ev = composed(3, 40.0 + i);
        CHECK(round_ev(l, rid, ev, "hist", &hist_spent, NULL) == DPB_OK);
        dp_event_free(ev);
    }
    ledger_close(l); /* a snapshot holding the 30 events */
    if ((l = open_dir(dir)) == NULL)
        goto out;
    CHECKF(ledger_open_profiles(l) == 0, "open computed %llu profiles of the snapshot's events",
           (unsigned long long)ledger_open_profiles(l));
    dp_event *ev = composed(2, 7.0);
    double late_spent = 0.0;
    CHECK(round_ev(l, "late-1", ev, "late", &late_spent, NULL) == DPB_OK);
    dp_event_free(ev);
    ledger_close_nosnapshot(l); /* as killed: the round is in the log only */
    if ((l = open_dir(dir)) == NULL)
        goto out;
    CHECKF(ledger_open_profiles(l) == 1, "open computed %llu profiles (the log holds one event)",
           (unsigned long long)ledger_open_profiles(l));
    ledger_client c;
    CHECK(ledger_get_client(l, "late", &c) == DPB_OK && c.spent == late_spent &&
          c.spent_accountant == DP_ACCT_RDP);
    /* the snapshot's client: its spend as stored, its accountant named at this first read */
    CHECK(ledger_get_client(l, "hist", &c) == DPB_OK && c.spent == hist_spent && c.rounds == 30 &&
          c.spent_accountant == DP_ACCT_RDP);
    CHECK(ledger_event_profiles(l) == 31); /* each once: at its first use, or off the lock */
    ledger_close_nosnapshot(l);
out:
    tl_remove_dir(dir);
}

/* The limits on an event, at every ledger call that takes one: 1000 objects fit and 1001 do
 * not; 131072 stored bytes fit and more do not; refused with DPB_ELIMIT naming "event",
 * nothing stored. An event already in the vocabulary (stored before the limits) still is. */
static void vocab_event_limits(void)
{
    dp_event *fits = composed(LEDGER_EVENT_NODES_MAX - 1, 3.0);
    dp_event *many = composed(LEDGER_EVENT_NODES_MAX, 3.0);
    dp_event *small = tree(16000); /* 8 bytes a step: under 131072 */
    dp_event *big = tree(16400);   /* over it */
    CHECK(dp_event_nodes(fits) == LEDGER_EVENT_NODES_MAX && dp_event_nodes(many) == 1001);
    dpb_error err = {0};
    CHECK(ledger_event_check(fits, NULL) == LEDGER_EVENT_FITS);
    CHECK(ledger_event_check(many, &err) == LEDGER_EVENT_TOO_MANY_NODES &&
          err.status == DPB_ELIMIT && strcmp(err.field, "event") == 0 &&
          strstr(err.detail, "1001") != NULL);
    CHECK(ledger_event_check(small, NULL) == LEDGER_EVENT_FITS);
    memset(&err, 0, sizeof err);
    CHECK(ledger_event_check(big, &err) == LEDGER_EVENT_TOO_LARGE && err.status == DPB_ELIMIT &&
          strstr(err.detail, "131072") != NULL);
    char dir[256];
    if (tl_make_dir(dir, sizeof dir, "dpb_vocab_") != 0)
        goto done;
    ledger *l = open_dir(dir);
    if (l != NULL) {
        CHECK(put_client(l, "c") == DPB_OK);
        int created;
        uint64_t seq;
        /* named events */
        CHECK(ledger_put_event(l, "many", many, &created, &seq, &err) == DPB_ELIMIT);
        CHECK(ledger_put_event(l, "big", big, &created, &seq, &err) == DPB_ELIMIT);
        CHECK(ledger_put_event(l, "fits", fits, &created, &seq, &err) == DPB_OK && created);
        dp_event *got = NULL;
        CHECK(ledger_get_event(l, "many", &got, &seq) != DPB_OK || got == NULL);
        dp_event_free(got);
        /* rounds, reservations, eligibility */
        CHECK(round_ev(l, "r-many", many, "c", NULL, &err) == DPB_ELIMIT);
        CHECK(round_ev(l, "r-big", big, "c", NULL, &err) == DPB_ELIMIT);
        CHECK(round_ev(l, "r-fits", fits, "c", NULL, &err) == DPB_OK);
        ledger_round_res rr;
        CHECK(ledger_get_round(l, "r-many", &rr) == DPB_ENOTFOUND);
        const char *ids[] = {"c"};
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "res-many");
        rq.event = many;
        rq.participants = ids;
        rq.n = 1;
        rq.reserve = 1;
        rq.ttl_seconds = 60;
        CHECK(ledger_round(l, &rq, &rr, &err) == DPB_ELIMIT);
        ledger_elig_req q;
        memset(&q, 0, sizeof q);
        q.event = big;
        q.ids = ids;
        q.n = 1;
        q.max_rounds = 10;
        q.limit = 1;
        ledger_elig_item *items = NULL;
        size_t ni = 0;
        ledger_elig_page pg;
        CHECK(ledger_eligibility(l, &q, &items, &ni, &pg, &err) == DPB_ELIMIT);
        free(items);
        ledger_close(l);
    }
    tl_remove_dir(dir);
done:
    dp_event_free(fits);
    dp_event_free(many);
    dp_event_free(small);
    dp_event_free(big);
}

/* The named events' limits: a new name past the count or the bytes is refused (DPB_ELIMIT,
 * field "name"); the same name and event again is still answered; names stored stay. */
static void vocab_named_limits(void)
{
    char dir[256];
    if (tl_make_dir(dir, sizeof dir, "dpb_vocab_") != 0)
        return;
    ledger *l = open_dir(dir);
    if (l == NULL)
        goto out;
    ledger_set_named_limits(l, 3, 0);
    int created;
    uint64_t seq;
    dpb_error err = {0};
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        dp_event *ev = gaussian(2.0 + i);
        CHECK(ledger_put_event(l, name, ev, &created, &seq, &err) == DPB_OK && created);
        dp_event_free(ev);
    }
    dp_event *ev = gaussian(9.0);
    CHECK(ledger_put_event(l, "n3", ev, &created, &seq, &err) == DPB_ELIMIT &&
          strcmp(err.field, "name") == 0);
    dp_event_free(ev);
    ev = gaussian(2.0);
    CHECK(ledger_put_event(l, "n0", ev, &created, &seq, &err) == DPB_OK && !created);
    dp_event_free(ev);
    /* bytes: room for one more 400-Gaussian composition, not two */
    ev = composed(400, 3.0);
    unsigned char *b = NULL;
    size_t len = 0, cap = 0;
    CHECK(dp_event_encode(ev, &b, &len, &cap) == DPB_OK && len > 1000);
    free(b);
    ledger_set_named_limits(l, 100, 300 + len * 3 / 2);
    CHECK(ledger_put_event(l, "b1", ev, &created, &seq, &err) == DPB_OK && created);
    dp_event_free(ev);
    ev = composed(400, 4.0);
    memset(&err, 0, sizeof err);
    CHECK(ledger_put_event(l, "b2", ev, &created, &seq, &err) == DPB_ELIMIT &&
          strcmp(err.field, "name") == 0);
    dp_event_free(ev);
    ledger_close(l);
    /* reopened with the defaults: all four names are there */
    if ((l = open_dir(dir)) == NULL)
        goto out;
    char **names = NULL;
    size_t n = 0, total = 0;
    CHECK(ledger_list_events(l, 0, 10, &names, &n, &total) == DPB_OK && total == 4);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    ledger_close(l);
out:
    tl_remove_dir(dir);
}

const tl_test VOCAB_TESTS[] = {
    TL_T(vocab_recovery_profiles_the_log_only),
    TL_T(vocab_event_limits),
    TL_T(vocab_named_limits),
};
const size_t VOCAB_NTESTS = sizeof VOCAB_TESTS / sizeof VOCAB_TESTS[0];
