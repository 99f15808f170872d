/*
 * ledger_elig.c - layer 1 (verbs): eligibility: which clients a round of an event would
 * admit, and how many more rounds each can afford. Reads only (an event never seen is
 * interned as scratch under the write lock and dropped); calls ledger_txn.h's read path and
 * ledger_mem.h.
 */
#include "ledger_txn.h"
#include "ledger_mem.h"

/* 1 if the counts a[0..n) hold the same entries as b[0..n) (in any order). */
static int same_counts(const lcount *a, const lcount *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = 0;
        while (k < n && b[k].ev != a[i].ev)
            k++;
        if (k == n || b[k].count != a[i].count)
            return 0;
    }
    return 1;
}

/* Two clients whose admissions of any event agree: the same budget, mode, relation,
 * uncertified flag and the same multisets of charged and reserved events. */
static int same_history(const lclient *a, const lclient *b)
{
    if (a->eps != b->eps || a->delta != b->delta || a->mode != b->mode || a->rel != b->rel ||
        a->uncertified != b->uncertified || a->nev != b->nev || a->nrv != b->nrv ||
        (a->spent >= a->eps) != (b->spent >= b->eps))
        return 0;
    return same_counts(a->ev, b->ev, a->nev) && same_counts(a->rv, b->rv, a->nrv);
}

static uint64_t history_hash(const lclient *c)
{
    uint64_t h = fnv64(&c->eps, sizeof c->eps, 14695981039346656037ULL);
    h = fnv64(&c->delta, sizeof c->delta, h);
    unsigned char b[3] = {c->mode, c->rel, c->uncertified};
    h = fnv64(b, 3, h);
    uint64_t x = 0; /* order-free: sum of the entries' own hashes */
    for (uint32_t i = 0; i < c->nev; i++)
        x +=
            fnv64(&c->ev[i], sizeof c->ev[i].ev, fnv64(&c->ev[i].count, 8, 1469598103934665603ULL));
    for (uint32_t i = 0; i < c->nrv; i++)
        x += 31 * fnv64(&c->rv[i].ev, sizeof c->rv[i].ev,
                        fnv64(&c->rv[i].count, 8, 1469598103934665603ULL));
    return fnv64(&x, 8, h);
}

/* One client's eligibility for `ev` (its relation's interned index): the admission of one
 * round, then the number of further rounds it can afford, by doubling then bisection on the
 * same admission test, capped at max_rounds (the spend grows with the count). */
static void eligibility_of(ledger *l, const lclient *c, int known, uint32_t ev, uint64_t max_rounds,
                           ledger_elig_item *it)
{
    double after;
    it->reason = lg_admission(l, c, known, ev, 1, &after, NULL);
    it->eligible = it->reason == LEDGER_OK;
    it->rounds = 0;
    it->capped = 0;
    if (!it->eligible)
        return;
    uint64_t lo = 1, hi = 2; /* lo affordable; hi not known */
    while (hi <= max_rounds && lg_admission(l, c, known, ev, hi, &after, NULL) == LEDGER_OK) {
        lo = hi;
        hi *= 2;
    }
    if (hi > max_rounds) {
        if (lo < max_rounds &&
            lg_admission(l, c, known, ev, max_rounds, &after, NULL) == LEDGER_OK) {
            it->rounds = max_rounds;
            it->capped = 1;
            return;
        }
        if (lo == max_rounds) {
            it->rounds = lo;
            it->capped = 1;
            return;
        }
        hi = max_rounds; /* not affordable */
    }
    while (hi - lo > 1) { /* lo affordable, hi not */
        uint64_t mid = lo + (hi - lo) / 2;
        if (lg_admission(l, c, known, ev, mid, &after, NULL) == LEDGER_OK)
            lo = mid;
        else
            hi = mid;
    }
    it->rounds = lo;
}

typedef struct {
    uint64_t h;
    long pos; /* the first client with this history */
    size_t item;
} ememo;

/* The answer for every candidate, under a lock already held (read, or write with the event
 * interned but not logged). */
static dpb_status eligibility_locked(ledger *l, const ledger_elig_req *q, const uint32_t evi[2],
                                     ledger_elig_item *items, size_t n, const long *pos)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    ememo *memo = malloc(cap * sizeof *memo);
    if (memo == NULL)
        return DPB_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        memo[i].pos = -2;
    for (size_t i = 0; i < n; i++) {
        ledger_elig_item *it = &items[i];
        long p = pos[i];
        lclient tmp = {0};
        const lclient *c = p >= 0 ? &l->cl[p] : &tmp;
        it->mode = p >= 0 ? c->mode : l->opt.default_budget ? LEDGER_RDP : -1;
        if (p < 0 && !l->opt.default_budget) {
            it->reason = LEDGER_UNKNOWN_CLIENT;
            it->spent = it->remaining = it->delta = NAN;
            continue;
        }
        if (p < 0) { /* created with the default budget by its first round */
            tmp.last_ev = LEV_NONE;
            tmp.eps = l->opt.default_epsilon;
            tmp.delta = l->opt.default_delta;
        }
        it->delta = c->delta;
        it->spent = c->spent;
        it->remaining = c->spent < c->eps ? c->eps - c->spent : 0.0;
        if (c->nrv > 0) { /* held reservations count as spent */
            spend_result held;
            lg_spend_held(l, c, 0, 0, &held);
            it->spent = held.spent;
            it->remaining = it->spent < c->eps ? c->eps - it->spent : 0.0;
        }
        uint32_t ev = evi[c->rel];
        if (p < 0) {
            eligibility_of(l, c, 0, ev, q->max_rounds, it);
            continue;
        }
        uint64_t h = history_hash(c) ^ ev;
        size_t s = (size_t)h & (cap - 1);
        while (memo[s].pos != -2 && !(memo[s].h == h && same_history(&l->cl[memo[s].pos], c) &&
                                      evi[l->cl[memo[s].pos].rel] == ev))
            s = (s + 1) & (cap - 1);
        if (memo[s].pos != -2) {
            const ledger_elig_item *m = &items[memo[s].item];
            it->eligible = m->eligible;
            it->reason = m->reason;
            it->rounds = m->rounds;
            it->capped = m->capped;
            continue;
        }
        eligibility_of(l, c, 1, ev, q->max_rounds, it);
        memo[s] = (ememo){h, p, i};
    }
    free(memo);
    return DPB_OK;
}

dpb_status ledger_eligibility(ledger *l, const ledger_elig_req *q, ledger_elig_item **out,
                              size_t *nout, dpb_error *err)
{
    *out = NULL;
    *nout = 0;
    if (q->event != NULL && ledger_event_check(q->event, err) != LEDGER_EVENT_FITS) {
        pthread_rwlock_rdlock(&l->lock); /* one stored before the limits is still taken */
        int known = lg_event_known(l, q->event);
        pthread_rwlock_unlock(&l->lock);
        if (!known)
            return DPB_ELIMIT;
    }
    if (q->max_rounds < 1 || q->max_rounds > LEDGER_ELIG_MAX_ROUNDS)
        return dpb_fail(err, DPB_EINVAL, "max_rounds", "max_rounds is 1 to %d",
                        LEDGER_ELIG_MAX_ROUNDS);
    if (q->ids ? q->n == 0 || q->n > LEDGER_MAX_PARTICIPANTS : q->label == NULL)
        return dpb_fail(err, DPB_EINVAL, "clients", "between 1 and %d client ids, or a label",
                        LEDGER_MAX_PARTICIPANTS);
    if (lg_read_begin(l, err) != DPB_OK)
        return DPB_EUNAVAILABLE;
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0;
    dpb_status st = dp_event_encode(q->event, &eb, &elen, &ecap);
    if (st != DPB_OK) {
        free(eb);
        return dpb_fail(err, st, "event", "the event cannot be accounted");
    }
    ledger_elig_item *items = NULL;
    long *pos = NULL;
    size_t n = 0;
    int write_locked = 0;
    for (;;) {
        if (write_locked) {
            lg_txn t; /* never logs: the write lock for scratch events only */
            (void)lg_txn_begin(&t, l, NULL);    /* caught up by read_begin already, or as it can */
            if (lg_settle(l, l->last_seq) != 0) /* answer from durable state only */
                lg_withdraw_locked(l);
        } else {
            lg_rdlock_durable(l);
        }
        /* the candidates */
        n = q->ids ? q->n : 0;
        if (!q->ids)
            for (size_t i = 0; i < l->ncl; i++)
                n += lg_has_label(&l->cl[i], q->label);
        if (n > LEDGER_MAX_PARTICIPANTS) {
            pthread_rwlock_unlock(&l->lock);
            free(eb);
            return dpb_fail(err, DPB_ELIMIT, "label",
                            "the label selects %zu clients; at most %d are answered at once "
                            "(list their ids in several requests)",
                            n, LEDGER_MAX_PARTICIPANTS);
        }
        free(items);
        free(pos);
        items = calloc(n ? n : 1, sizeof *items);
        pos = malloc((n ? n : 1) * sizeof *pos);
        if (items == NULL || pos == NULL) {
            st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            break;
        }
        size_t k = 0;
        int need[2] = {0, 0};
        for (size_t i = 0; q->ids ? i < n : i < l->ncl; i++) {
            if (!q->ids && !lg_has_label(&l->cl[i], q->label))
                continue;
            pos[k] = q->ids ? lg_find_client(l, q->ids[i]) : (long)i;
            snprintf(items[k].id, sizeof items[k].id, "%s", q->ids ? q->ids[i] : l->cl[i].id);
            need[pos[k] >= 0 ? l->cl[pos[k]].rel : DP_REL_ADD_OR_REMOVE] = 1;
            k++;
        }
        /* the event, interned for each relation the candidates use */
        uint32_t evi[2] = {LEV_NONE, LEV_NONE};
        int missing = 0;
        for (int r = 0; r < 2; r++)
            if (need[r] && (evi[r] = lg_find_event(l, eb, elen, r)) == LEV_NONE)
                missing = 1;
        if (missing && write_locked) {
            /* intern (scratch, not logged), then answer under the write lock */
            for (int r = 0; r < 2 && st == DPB_OK; r++) {
                int fresh;
                if (need[r] && evi[r] == LEV_NONE)
                    st = lg_intern(l, eb, elen, (dp_relation)r, &evi[r], &fresh);
            }
            if (st != DPB_OK)
                dpb_fail(err, st, "event", "the event could not be prepared");
            missing = 0;
        }
        if (!missing) {
            if (st == DPB_OK && eligibility_locked(l, q, evi, items, n, pos) != DPB_OK)
                st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            if (write_locked)
                lg_drop_unlogged_events(l);
            pthread_rwlock_unlock(&l->lock);
            break;
        }
        /* an event no round or name has brought in: answered under the write lock with the
         * event taken up as scratch (as a dry run does), so that a query never makes the
         * ledger keep, or log, what it was asked about */
        pthread_rwlock_unlock(&l->lock);
        write_locked = 1;
    }
    free(eb);
    free(pos);
    if (st != DPB_OK) {
        free(items);
        return st;
    }
    *out = items;
    *nout = n;
    return DPB_OK;
}
