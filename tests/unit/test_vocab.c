/*
 * test_vocab.c - the ledger's event vocabulary: the limits on an event that enters it
 * (ledger_event_check at every call taking one), the named events' limits, and recovery that
 * computes the profiles of the events its log touches only, never those of the vocabulary a
 * snapshot holds (counted by ledger_event_profiles, never timed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/dp/account.h"
#include "../../core/ledger/crc32c.h"
#include "../../core/ledger/ledger.h"
#include "../../core/ledger/spend.h"
#include "memstore.h"
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
 * snapshot), costs none either: its EVENT record carries the profile (LEDGER_FORMAT 6; it
 * cost that event's profile before). Before the vocabulary was read lazily, open classified
 * every event of the snapshot and the log: 31. */
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
    CHECKF(ledger_open_profiles(l) == 0, "open computed %llu profiles (the log holds one event)",
           (unsigned long long)ledger_open_profiles(l));
    ledger_client c;
    CHECK(ledger_get_client(l, "late", &c) == DPB_OK && c.spent == late_spent &&
          c.spent_accountant == DP_ACCT_RDP);
    /* the snapshot's client: its spend as stored, its accountant named at this first read */
    CHECK(ledger_get_client(l, "hist", &c) == DPB_OK && c.spent == hist_spent && c.rounds == 30 &&
          c.spent_accountant == DP_ACCT_RDP);
    /* the snapshot's and the log's events carry their profiles: none computed at all */
    CHECKF(ledger_event_profiles(l) == 0, "%llu profiles computed",
           (unsigned long long)ledger_event_profiles(l));
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

/* ---- stored profiles (spend.h, LEDGER_FORMAT 6) ---- */

/* A ledger on g (kept compositions as the daemon's default). */
static dpb_status open_log(memlog *g, ledger **l, dpb_error *err)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.snapshot_every = 1000000;
    ledger_store *s = memstore_open(g);
    *l = NULL;
    return s ? ledger_open_store(&o, s, l, err) : DPB_ENOMEM;
}

static ledger *on_log(memlog *g)
{
    dpb_error err = {0};
    ledger *l;
    dpb_status st = open_log(g, &l, &err);
    CHECKF(st == DPB_OK, "%s", err.detail);
    return l;
}

static int mech_delta; /* 1: (epsilon, delta) events may have a delta (no RDP curve) */

static dp_event *mech(uint64_t *seed)
{
    uint64_t k = tl_splitmix(seed) % 6;
    double u = (double)(tl_splitmix(seed) >> 11) * 0x1p-53;
    dp_event *e;
    if (k <= 1) { /* a Poisson-sampled Gaussian (the costly curve) */
        e = dp_event_new(DP_EV_POISSON_SAMPLED);
        e->u.sampled.sampling_probability = 0.001 + 0.05 * u;
        e->u.sampled.event = gaussian(0.8 + 3.0 * u);
    } else if (k == 2) {
        e = dp_event_new(DP_EV_LAPLACE);
        e->u.noise.noise_multiplier = 20.0 + 40.0 * u;
    } else if (k == 3) { /* pure: order infinity only; with delta, no curve (why kept) */
        e = dp_event_new(DP_EV_EPSILON_DELTA);
        e->u.epsdelta.epsilon = 0.01 + 0.02 * u;
        e->u.epsdelta.delta = tl_splitmix(seed) % 2 ? 1e-9 * mech_delta : 0.0;
    } else if (k == 4) {
        e = dp_event_new(DP_EV_SELF_COMPOSED);
        e->u.self.event = gaussian(20.0 + 10.0 * u);
        e->u.self.count = 1 + tl_splitmix(seed) % 50;
    } else {
        e = gaussian(15.0 + 30.0 * u);
    }
    if (e == NULL)
        abort();
    return e;
}

/* A random event of more than SPEND_PROFILE_MIN_BYTES: a composition of 2-4 mechanisms. */
static dp_event *random_event(uint64_t *seed)
{
    size_t n = 2 + tl_splitmix(seed) % 3;
    dp_event *c = dp_event_new(DP_EV_COMPOSED);
    if (c == NULL || (c->u.composed.events = calloc(n, sizeof(dp_event *))) == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        c->u.composed.events[c->u.composed.n++] = mech(seed);
    return c;
}

#define PR_CLIENTS 8

typedef struct {
    double spent[PR_CLIENTS], dtv[PR_CLIENTS];
    uint64_t rounds[PR_CLIENTS];
    int status[PR_CLIENTS], acct[PR_CLIENTS];
} spends;

static void read_spends(ledger *l, spends *s)
{
    for (int i = 0; i < PR_CLIENTS; i++) {
        char id[16];
        snprintf(id, sizeof id, "p%d", i);
        ledger_client c;
        CHECK(ledger_get_client(l, id, &c) == DPB_OK);
        s->spent[i] = c.spent;
        s->dtv[i] = c.delta_tv;
        s->rounds[i] = c.rounds;
        s->status[i] = (int)c.status;
        s->acct[i] = c.spent_accountant;
    }
}

/* The same spends to the last bit, accountants and statuses included; a pld client past its
 * rdp bound (accountant pld) within rel of it when rel > 0 (the live ledger's value of such a
 * client is its value at the round, a recovery's its composition computed again). */
static int same_spends(const spends *a, const spends *b, double rel)
{
    for (int i = 0; i < PR_CLIENTS; i++) {
        int loose = rel > 0 && a->acct[i] == DP_ACCT_PLD;
        int same = loose ? fabs(a->spent[i] - b->spent[i]) <= rel * fabs(a->spent[i])
                         : memcmp(&a->spent[i], &b->spent[i], sizeof(double)) == 0;
        if (!same || memcmp(&a->dtv[i], &b->dtv[i], sizeof(double)) != 0 ||
            a->rounds[i] != b->rounds[i] || (!loose && a->status[i] != b->status[i]) ||
            a->acct[i] != b->acct[i]) {
            fprintf(stderr, "  client p%d: spent %.17g against %.17g, rounds %llu against %llu\n",
                    i, a->spent[i], b->spent[i], (unsigned long long)a->rounds[i],
                    (unsigned long long)b->rounds[i]);
            return 0;
        }
    }
    return 1;
}

/* R rounds of random events (some used again) over random subsets of the clients. */
static void random_rounds(ledger *l, uint64_t *seed, int R, const char *tag)
{
    dp_event *seen[8] = {0};
    for (int r = 0; r < R; r++) {
        const char *ids[PR_CLIENTS];
        char idb[PR_CLIENTS][16];
        size_t n = 0;
        for (int i = 0; i < PR_CLIENTS; i++)
            if (tl_splitmix(seed) % 2) {
                snprintf(idb[n], sizeof idb[n], "p%d", i);
                ids[n] = idb[n];
                n++;
            }
        if (n == 0)
            continue;
        size_t slot = tl_splitmix(seed) % 8;
        int again = seen[slot] != NULL && tl_splitmix(seed) % 3 == 0;
        if (!again) {
            dp_event_free(seen[slot]);
            seen[slot] = random_event(seed);
        }
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "%s-%d", tag, r);
        rq.event = seen[slot];
        rq.participants = ids;
        rq.n = n;
        ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
        ledger_round_res res;
        dpb_error err = {0};
        CHECKF(ledger_round(l, &rq, &res, &err) == DPB_OK, "%s", err.detail);
        ledger_round_res_free(&res);
    }
    for (int i = 0; i < 8; i++)
        dp_event_free(seen[i]);
}

/* The EVENT records of g: each one's event length (decoded) into *evlen of record i; the
 * number of them. */
static size_t event_records(memlog *g, size_t *evlen)
{
    size_t n = 0;
    for (size_t i = 0; i < g->nrec; i++) {
        evlen[i] = 0;
        if (g->rec[i].type != 1 /* EVENT */ || g->rec[i].n < 5)
            continue;
        dp_event *ev = NULL;
        size_t used = 0;
        CHECK(dp_event_decode(g->rec[i].p + 5, g->rec[i].n - 5, &ev, &used) == DPB_OK);
        dp_event_free(ev);
        evlen[i] = 5 + used;
        n++;
    }
    return n;
}

/* Recovery after a crash trusts the profiles its records carry, and they give exactly the
 * spends that computing the profiles gives: random histories of rdp, pld and filter clients
 * (compositions of Poisson-sampled Gaussians, Laplace, Gaussians, (epsilon, delta) events
 * without a curve), replayed from the log. The spends recovered with the stored profiles
 * against those recovered from the same log as an earlier version wrote it (no profile after
 * the event: still read, every profile computed) and with profiles of another version
 * (dropped, computed again): the same to the last bit. A damaged profile is refused (the log
 * is damaged). Against the live ledger's spends before the crash: the same (pld values past
 * the rdp bound within 1e-6: there the live value is read from the client's kept composition,
 * extended round by round, and the recovered one from the kept composition rebuilt at once,
 * up to 1.6e-7 apart, with or without stored profiles). Then a snapshot holds the profiles: a crash
 * after one more round of the snapshot's clients computes none (their histories' events come from
 * the snapshot). Counted by ledger_open_profiles. On main: one profile per event the log's clients
 * hold. */
static void vocab_crash_recovery_trusts_stored_profiles(void)
{
    uint64_t seed = 3434;
    for (int trial = 0; trial < 3; trial++) {
        memlog g;
        memlog_init(&g);
        ledger *a = on_log(&g);
        if (a == NULL) {
            memlog_free(&g);
            return;
        }
        for (int i = 0; i < PR_CLIENTS; i++) {
            ledger_client in, out;
            memset(&in, 0, sizeof in);
            snprintf(in.id, sizeof in.id, "p%d", i);
            in.epsilon = i < 2 ? 0.8 : 4.0 + (double)i; /* two near their budget */
            in.delta = 1e-6;
            in.mode = (ledger_mode)(i % 3); /* rdp, pld, rdp_filter */
            int created;
            CHECK(ledger_put_client(a, &in, &created, &out, NULL) == DPB_OK);
        }
        random_rounds(a, &seed, 25, "r");
        spends before, after, trusted;
        read_spends(a, &before);
        ledger_close_nosnapshot(a); /* as killed: everything in the log */

        ledger *b = on_log(&g);
        if (b != NULL) {
            CHECKF(ledger_open_profiles(b) == 0, "trial %d: open computed %llu profiles", trial,
                   (unsigned long long)ledger_open_profiles(b));
            read_spends(b, &after);
            CHECK(same_spends(&before, &after, 1e-6));
            trusted = after;
            ledger_close_nosnapshot(b);
        }

        /* the records' bytes are edited below at the event's offsets: without their times */
        CHECK(memlog_strip_times(&g) == g.nrec);
        size_t *evlen = calloc(g.nrec + 1, sizeof *evlen);
        size_t *full = calloc(g.nrec + 1, sizeof *full);
        unsigned char **keep = calloc(g.nrec + 1, sizeof *keep);
        if (evlen == NULL || full == NULL || keep == NULL)
            abort();
        size_t nrec = g.nrec, nev = event_records(&g, evlen);
        CHECK(nev > 5);
        for (size_t i = 0; i < g.nrec; i++)
            if (evlen[i]) {
                /* each carries its profile, flagged in its relation byte */
                CHECK(g.rec[i].n > evlen[i] + 4 && (g.rec[i].p[4] & 0x80) != 0);
                full[i] = g.rec[i].n;
                keep[i] = malloc(full[i]);
                memcpy(keep[i], g.rec[i].p, full[i]);
            }
        /* as an earlier version wrote it: the record ends at the event, no flag */
        for (size_t i = 0; i < g.nrec; i++)
            if (evlen[i]) {
                g.rec[i].n = evlen[i];
                g.rec[i].p[4] &= 0x7f;
            }
        b = on_log(&g);
        if (b != NULL) {
            CHECKF(ledger_open_profiles(b) > 0 && ledger_open_profiles(b) <= nev,
                   "%llu profiles computed from %zu events",
                   (unsigned long long)ledger_open_profiles(b), nev);
            read_spends(b, &after);
            CHECK(same_spends(&trusted, &after, 0.0));
            ledger_close_nosnapshot(b);
        }
        /* another profile version (its checksum right): dropped, computed again */
        for (size_t i = 0; i < g.nrec; i++)
            if (evlen[i]) {
                unsigned char *pp = g.rec[i].p + evlen[i];
                size_t pn = full[i] - evlen[i] - 4;
                g.rec[i].n = full[i];
                g.rec[i].p[4] |= 0x80;
                pp[0] ^= 0x40;
                uint32_t c = dpb_crc32c(0, pp, pn - 4);
                for (int k = 0; k < 4; k++)
                    pp[pn - 4 + (size_t)k] = (unsigned char)(c >> (8 * k));
            }
        b = on_log(&g);
        if (b != NULL) {
            CHECK(ledger_open_profiles(b) > 0);
            read_spends(b, &after);
            CHECK(same_spends(&trusted, &after, 0.0));
            ledger_close_nosnapshot(b);
        }
        /* a damaged profile (a byte of its curve or class changed, the checksum not) */
        for (size_t i = 0; i < g.nrec; i++)
            if (evlen[i])
                memcpy(g.rec[i].p, keep[i], full[i]);
        for (size_t i = g.nrec; i-- > 0;)
            if (evlen[i]) {
                g.rec[i].p[evlen[i] + 10] ^= 1;
                break;
            }
        dpb_error err = {0};
        CHECK(open_log(&g, &b, &err) == DPB_ECORRUPT && b == NULL);
        for (size_t i = 0; i < g.nrec; i++)
            if (evlen[i])
                memcpy(g.rec[i].p, keep[i], full[i]);

        /* the snapshot keeps the profiles: one more round of its clients, then a crash */
        b = on_log(&g);
        if (b != NULL) {
            ledger_close(b); /* the snapshot */
            b = on_log(&g);
        }
        if (b != NULL) {
            CHECK(ledger_open_profiles(b) == 0);
            random_rounds(b, &seed, 3, "s");
            read_spends(b, &before);
            ledger_close_nosnapshot(b);
            b = on_log(&g);
        }
        if (b != NULL) {
            CHECKF(ledger_open_profiles(b) == 0, "after the snapshot: %llu profiles computed",
                   (unsigned long long)ledger_open_profiles(b));
            read_spends(b, &after);
            CHECK(same_spends(&before, &after, 1e-6));
            ledger_close_nosnapshot(b);
        }
        for (size_t i = 0; i < nrec; i++)
            free(keep[i]);
        free(keep);
        free(full);
        free(evlen);
        memlog_free(&g);
    }
}

/* The profile numbers are those of SPEND_PROFILE_VERSION: the stored profiles of reference
 * events (a Poisson-sampled Gaussian, a Laplace, a composition with an (epsilon, delta)
 * event, a self-composed Gaussian) checksummed against the value pinned for version 1. When
 * this fails, the classification's numbers changed: a profile stored by an earlier build
 * would be trusted with other numbers. Bump SPEND_PROFILE_VERSION and pin the new value. A
 * stored profile gives the class bit for bit without classifying; another version's is
 * dropped; a short or damaged one refused. */
static void vocab_profile_version_pinned(void)
{
    spend_engine *g = spend_engine_new(0);
    if (g == NULL)
        return;
    uint64_t seed = 1;
    uint32_t crc = 0;
    mech_delta = 1;
    size_t total = 0;
    for (int i = 0; i < 12; i++) {
        dp_event *ev = random_event(&seed);
        unsigned char *b = NULL;
        size_t n = 0, cap = 0;
        CHECK(dp_event_encode(ev, &b, &n, &cap) == DPB_OK && n > SPEND_PROFILE_MIN_BYTES);
        dp_event_free(ev);
        spend_event *e = NULL, *f = NULL;
        static unsigned char p[SPEND_PROFILE_MAX], q[SPEND_PROFILE_MAX];
        CHECK(spend_event_get(g, b, n, DP_REL_ADD_OR_REMOVE, &e) == DPB_OK);
        size_t pn = e ? spend_event_profile(g, e, p) : 0;
        CHECK(pn > 0);
        crc = dpb_crc32c(crc, p, pn);
        total += pn;
        /* the same bytes under the other relation: registered apart, given p */
        CHECK(spend_event_get_lazy(g, b, n, DP_REL_REPLACE, &f) == DPB_OK);
        if (f != NULL) {
            spend_stats st0, st1;
            spend_engine_stats(g, &st0);
            CHECK(spend_event_set_profile(g, f, p, pn - 1) == -1);
            p[pn - 5] ^= 1; /* inside the checksummed bytes */
            CHECK(spend_event_set_profile(g, f, p, pn) == -1);
            p[pn - 5] ^= 1;
            CHECK(spend_event_set_profile(g, f, p, pn) == 0);
            CHECK(spend_event_ready(g, f) == DPB_OK);
            spend_engine_stats(g, &st1);
            CHECK(st1.classified == st0.classified && st1.restored == st0.restored + 1);
            CHECK(spend_event_profile(g, f, q) == pn && memcmp(p, q, pn) == 0);
            const spend_class *a = spend_event_class(e), *c = spend_event_class(f);
            CHECK(a->kind == c->kind && a->gdp_ok == c->gdp_ok && strcmp(a->why, c->why) == 0 &&
                  (a->rdp == NULL) == (c->rdp == NULL) &&
                  (a->rdp == NULL || memcmp(a->rdp, c->rdp, sizeof(double) * RDP_CURVE_LEN) == 0));
            spend_event_put(g, f);
        }
        if (e != NULL)
            spend_event_put(g, e);
        free(b);
    }
    mech_delta = 0;
    CHECKF(crc == 0xc19b09e7u && total == 25786,
           "profiles of the reference events: crc 0x%08x over %zu bytes", crc, total);
    spend_engine_free(g);
}

const tl_test VOCAB_TESTS[] = {
    TL_T(vocab_crash_recovery_trusts_stored_profiles),
    TL_T(vocab_profile_version_pinned),
    TL_T(vocab_recovery_profiles_the_log_only),
    TL_T(vocab_event_limits),
    TL_T(vocab_named_limits),
};
const size_t VOCAB_NTESTS = sizeof VOCAB_TESTS / sizeof VOCAB_TESTS[0];
