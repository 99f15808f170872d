/*
 * test_owner_pg.c - reservations' owners on the PostgreSQL store (pg_harness.h): the owner
 * travels in the RESERVE record and the snapshot through the database, so a replica refuses
 * another key's commit and counts what each key holds against --max-reserved-per-key as the
 * replica that took the reservation does, and so does a ledger opened after both closed.
 * Part of pg_tests (test_store_pg.c runs it).
 */
#include "../testlib.h"

#include "../../core/ledger/ledger.h"
#include "pg_harness.h"

void test_reservation_owner_on_pg(void);

static ledger *on_pg(const char *url)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.ledger_url = url;
    o.default_budget = 1;
    o.default_epsilon = 10.0;
    o.default_delta = 1e-5;
    o.max_reserved_per_owner = 2;
    ledger *l = NULL;
    dpb_error e = {0};
    CHECKF(ledger_open(&o, &l, &e) == DPB_OK, "%s", e.detail);
    return l;
}

/* A reservation rid by key over ids[0..n) of G(3), one hour. */
static dpb_status hold(ledger *l, const char *rid, const char *key, const char *const *ids,
                       size_t n)
{
    dp_event *ev = dp_event_new(DP_EV_GAUSSIAN);
    if (ev == NULL)
        return DPB_ENOMEM;
    ev->u.noise.noise_multiplier = 3.0;
    ledger_round_req q;
    memset(&q, 0, sizeof q);
    snprintf(q.round_id, sizeof q.round_id, "%s", rid);
    q.policy = LEDGER_ALL_OR_NOTHING;
    q.event = ev;
    q.participants = ids;
    q.n = n;
    q.reserve = 1;
    q.ttl_seconds = 3600;
    q.owner = key;
    ledger_hash128(rid, strlen(rid), q.body_hash);
    ledger_round_res r;
    dpb_error e = {0};
    dpb_status st = ledger_round(l, &q, &r, &e);
    if (st == DPB_OK)
        ledger_round_res_free(&r);
    dp_event_free(ev);
    return st;
}

/* Release rid as key (admin: any): its status. */
static dpb_status let_go(ledger *l, const char *rid, const char *key, int admin)
{
    ledger_caller who = {key, admin};
    ledger_round_res r;
    dpb_error e = {0};
    dpb_status st = ledger_release_as(l, rid, &who, &r, &e);
    ledger_round_res_free(&r);
    return st;
}

static int owner_is(ledger *l, const char *rid, const char *want)
{
    ledger_round_res r;
    if (ledger_get_round(l, rid, &r) != DPB_OK)
        return 0;
    int same = strcmp(r.owner, want) == 0;
    ledger_round_res_free(&r);
    return same;
}

void test_reservation_owner_on_pg(void)
{
    if (!pgh_up())
        return;
    char url[512];
    if (pgh_fresh_db("t_owner", url, sizeof url) != 0) {
        CHECKF(0, "cannot create database t_owner");
        return;
    }
    static const char *const AB[] = {"a", "b"}, *const C[] = {"c"}, *const DE[] = {"d", "e"};
    ledger *a = on_pg(url), *b = on_pg(url);
    if (a && b) {
        CHECK(hold(a, "p1", "k1", AB, 2) == DPB_OK);
        /* the replica reads the owner from the record, and what k1 holds (2, the cap) */
        CHECK(owner_is(b, "p1", "k1"));
        CHECK(let_go(b, "p1", "k2", 0) == DPB_EFORBIDDEN);
        CHECK(hold(b, "p2", "k1", C, 1) == DPB_EQUOTA);
        CHECK(hold(b, "p2", "k2", C, 1) == DPB_OK);
        /* released on one replica: freed on the other */
        CHECK(let_go(a, "p1", "k1", 0) == DPB_OK);
        CHECK(hold(b, "p3", "k1", AB, 2) == DPB_OK);
    }
    if (b)
        ledger_close(b);
    if (a)
        ledger_close(a);
    /* after both closed (a snapshot in the database) */
    ledger *c = on_pg(url);
    if (c) {
        CHECK(owner_is(c, "p2", "k2"));
        CHECK(let_go(c, "p2", "k1", 0) == DPB_EFORBIDDEN);
        CHECK(owner_is(c, "p3", "k1") && hold(c, "p5", "k1", C, 1) == DPB_EQUOTA);
        CHECK(hold(c, "p4", "k2", DE, 2) == DPB_EQUOTA); /* k2 holds 1 of 2 */
        CHECK(let_go(c, "p2", "ops", 1) == DPB_OK);      /* an admin */
        CHECK(hold(c, "p4", "k2", DE, 2) == DPB_OK);
        ledger_close(c);
    }
}
