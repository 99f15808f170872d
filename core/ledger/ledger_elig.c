/*
 * ledger_elig.c - layer 1 (verbs): eligibility: which clients a round of an event would
 * admit, and how many more rounds each can afford, a page of candidates at a time. A read:
 * the page's candidates are copied under the read lock (budgets, and the charged and held
 * events as references into the spend engine), the lock is released, and every admission
 * test runs on the copies (afford.h), under the request's deadline and cost cap. The event
 * is registered in the spend engine only (never interned in the ledger): nothing is taken
 * or kept under the write lock. Calls ledger_txn.h's read path, ledger_mem.h and afford.h.
 */
#include "ledger_txn.h"
#include "ledger_mem.h"
#include "afford.h"

/* 1 if the counts a[0..n) hold the same entries as b[0..n) (in any order; each list's
 * events distinct). Linear in n (lg_count_positions); out of memory: 0 (computed afresh). */
static int same_counts(const lcount *a, const lcount *b, uint32_t n)
{
    uint32_t stack[16], *pos = n <= 16 ? stack : malloc(n * sizeof *pos);
    int same = pos != NULL && lg_count_positions(b, n, a, n, pos) == 0;
    for (uint32_t i = 0; same && i < n; i++)
        same = pos[i] != UINT32_MAX && b[pos[i]].count == a[i].count;
    if (pos != stack)
        free(pos);
    return same;
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

/* One candidate of the page, copied under the read lock. */
typedef struct {
    afford_history h;
    size_t off;    /* its terms in the page's array */
    long same;     /* an earlier candidate whose answer it shares, or -1 */
    int want_held; /* held reservations: its spend with them is computed off the lock */
} ecand;

typedef struct {
    uint64_t h;
    long pos; /* the first client with this history */
    size_t item;
} ememo;

/* The page of candidates (ids[offset...] or the label's members from client position
 * offset), at most q->limit: their ids and figures into items, their copies into cand (terms
 * into *terms, each referenced), the relations they use into need; *n, and the page's total
 * and next offset into *pg. Under the read lock. DPB_OK or DPB_ENOMEM. */
static dpb_status copy_page(ledger *l, const ledger_elig_req *q, ledger_elig_item *items,
                            ecand *cand, spend_term **terms, size_t *nterms, int need[2], size_t *n,
                            ledger_elig_page *pg)
{
    size_t k = 0, cap_t = 0, nt = 0, scap = 16;
    while (scap < 2 * q->limit)
        scap *= 2;
    ememo *memo = malloc(scap * sizeof *memo);
    if (memo == NULL)
        return DPB_ENOMEM;
    for (size_t i = 0; i < scap; i++)
        memo[i].pos = -2;
    long unknown = -1; /* the first candidate to be created with the default budget */
    dpb_status st = DPB_OK;
    pg->total = q->ids ? q->n : 0;
    pg->more = 0;
    size_t last = q->offset; /* the position after the page's last candidate */
    size_t end = q->ids ? q->n : l->ncl;
    for (size_t i = q->offset; i < end && st == DPB_OK; i++) {
        if (!q->ids && !lg_has_label(&l->cl[i], q->label))
            continue;
        if (k == q->limit) { /* one more exists */
            pg->more = 1;
            break;
        }
        long p = q->ids ? lg_find_client(l, q->ids[i]) : (long)i;
        ledger_elig_item *it = &items[k];
        ecand *e = &cand[k];
        snprintf(it->id, sizeof it->id, "%s", q->ids ? q->ids[i] : l->cl[i].id);
        *e = (ecand){.off = nt, .same = -1};
        last = i + 1;
        k++;
        if (p < 0 && !l->opt.default_budget) {
            it->mode = -1;
            it->reason = LEDGER_UNKNOWN_CLIENT;
            it->spent = it->remaining = it->delta = NAN;
            e->same = -2; /* answered */
            continue;
        }
        if (p < 0) { /* created with the default budget by its first round */
            it->mode = LEDGER_RDP;
            it->delta = l->opt.default_delta;
            it->spent = 0.0;
            it->remaining = l->opt.default_epsilon;
            e->h = (afford_history){LEDGER_RDP,
                                    l->opt.default_epsilon,
                                    l->opt.default_delta,
                                    DP_REL_ADD_OR_REMOVE,
                                    0,
                                    0,
                                    0.0,
                                    NULL,
                                    0};
            need[DP_REL_ADD_OR_REMOVE] = 1;
            if (unknown >= 0)
                e->same = unknown;
            else
                unknown = (long)k - 1;
            continue;
        }
        const lclient *c = &l->cl[p];
        it->mode = c->mode;
        it->delta = c->delta;
        it->spent = c->spent;
        it->remaining = c->spent < c->eps ? c->eps - c->spent : 0.0;
        need[c->rel] = 1;
        e->h = (afford_history){c->mode,  c->eps, c->delta, (dp_relation)c->rel, c->uncertified, 1,
                                c->spent, NULL,   0};
        e->want_held = c->nrv > 0;
        uint64_t h = history_hash(c) ^ c->rel;
        size_t s = (size_t)h & (scap - 1);
        while (memo[s].pos != -2 && !(memo[s].h == h && same_history(&l->cl[memo[s].pos], c)))
            s = (s + 1) & (scap - 1);
        if (memo[s].pos != -2) {
            e->same = (long)memo[s].item;
            continue;
        }
        memo[s] = (ememo){h, p, k - 1};
        /* the charged events, then the held reservations merged in (lg_spend_held's
         * multiset), each referenced: a withdrawn charge could drop one meanwhile */
        if (lg_grow((void **)terms, &cap_t, nt + c->nev + c->nrv, sizeof **terms) != 0) {
            st = DPB_ENOMEM;
            break;
        }
        spend_term *t = *terms;
        for (uint32_t j = 0; j < c->nev; j++)
            t[nt++] = (spend_term){l->evs[c->ev[j].ev].se, c->ev[j].count};
        for (uint32_t j = 0; j < c->nrv; j++) {
            spend_event *se = l->evs[c->rv[j].ev].se;
            size_t x = e->off;
            while (x < nt && t[x].ev != se)
                x++;
            if (x < nt)
                t[x].count += c->rv[j].count;
            else
                t[nt++] = (spend_term){se, c->rv[j].count};
        }
        for (size_t j = e->off; j < nt; j++)
            spend_event_ref(l->sp, t[j].ev);
        e->h.m = nt - e->off;
    }
    if (!q->ids) { /* the label's members: how many in all */
        for (size_t i = 0; i < l->ncl; i++)
            pg->total += lg_has_label(&l->cl[i], q->label);
        for (size_t i = last; i < l->ncl && !pg->more; i++)
            pg->more = lg_has_label(&l->cl[i], q->label);
    } else {
        pg->more = last < q->n;
    }
    pg->next = last;
    free(memo);
    *nterms = nt;
    *n = k;
    return st;
}

/* Every candidate's answer, computed on the copies without any lock. */
static dpb_status answer_page(ledger *l, const ledger_elig_req *q, spend_event *const x[2],
                              ledger_elig_item *items, ecand *cand, spend_term *terms, size_t n,
                              dpb_error *err)
{
    /* the request's deadline, else the ledger's own (ledger_set_compute_limits) */
    dpb_cancel own = {l->compute_deadline > 0.0 ? dpb_cancel_now() + l->compute_deadline : 0.0,
                      NULL};
    afford_budget b = {q->cancel                   ? q->cancel
                       : l->compute_deadline > 0.0 ? &own
                                                   : NULL,
                       q->max_pld_evals ? q->max_pld_evals : l->max_pld_evals, 0};
    for (size_t i = 0; i < n; i++) {
        ledger_elig_item *it = &items[i];
        ecand *e = &cand[i];
        if (e->same == -2)
            continue;
        if (e->same >= 0) { /* the same history: the same answer */
            const ledger_elig_item *m = &items[e->same];
            it->eligible = m->eligible;
            it->reason = m->reason;
            it->rounds = m->rounds;
            it->capped = m->capped;
            if (e->want_held) {
                it->spent = m->spent;
                it->remaining = m->remaining;
            }
            continue;
        }
        e->h.t = terms + e->off;
        afford_result r;
        dpb_status st =
            afford_rounds(l->sp, &e->h, x[e->h.rel], q->max_rounds, e->want_held, &b, &r);
        if (st == DPB_ECANCELLED)
            return dpb_fail(err, st, NULL,
                            "the eligibility computation was stopped at its deadline after %zu "
                            "of %zu candidates",
                            i, n);
        if (st == DPB_ECOST)
            return dpb_fail(err, st, "limit",
                            "the page needs more than %llu PLD evaluations (at candidate %zu of "
                            "%zu): ask for fewer candidates (limit) or a smaller max_rounds",
                            (unsigned long long)q->max_pld_evals, i, n);
        if (st != DPB_OK)
            return dpb_fail(err, st, NULL, "the eligibility could not be computed");
        it->reason = r.reason;
        it->eligible = r.reason == LEDGER_OK;
        it->rounds = r.rounds;
        it->capped = r.capped;
        if (e->want_held) { /* held reservations count as spent */
            it->spent = r.held;
            it->remaining = r.held < e->h.eps ? e->h.eps - r.held : 0.0;
        }
    }
    return DPB_OK;
}

dpb_status ledger_eligibility(ledger *l, const ledger_elig_req *q, ledger_elig_item **out,
                              size_t *nout, ledger_elig_page *pg, dpb_error *err)
{
    *out = NULL;
    *nout = 0;
    memset(pg, 0, sizeof *pg);
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
    if (q->limit < 1 || q->limit > LEDGER_ELIG_PAGE_MAX)
        return dpb_fail(err, DPB_EINVAL, "limit", "limit is 1 to %d", LEDGER_ELIG_PAGE_MAX);
    if (q->ids ? q->n == 0 || q->n > LEDGER_MAX_PARTICIPANTS : q->label == NULL)
        return dpb_fail(err, DPB_EINVAL, "clients", "between 1 and %d client ids, or a label",
                        LEDGER_MAX_PARTICIPANTS);
    if (q->ids && q->offset > q->n)
        return dpb_fail(err, DPB_EINVAL, "cursor", "the cursor is past the list of clients");
    if (lg_read_begin(l, err) != DPB_OK)
        return DPB_EUNAVAILABLE;
    unsigned char *eb = NULL;
    size_t elen = 0, ecap = 0, n = 0, nt = 0;
    dpb_status st = dp_event_encode(q->event, &eb, &elen, &ecap);
    if (st != DPB_OK) {
        free(eb);
        return dpb_fail(err, st, "event", "the event cannot be accounted");
    }
    ledger_elig_item *items = calloc(q->limit, sizeof *items);
    ecand *cand = calloc(q->limit, sizeof *cand);
    spend_term *terms = NULL;
    spend_event *x[2] = {NULL, NULL};
    int need[2] = {0, 0};
    if (items == NULL || cand == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
        goto out;
    }
    lg_rdlock_durable(l);
    st = copy_page(l, q, items, cand, &terms, &nt, need, &n, pg);
    pthread_rwlock_unlock(&l->lock);
    if (st != DPB_OK) {
        dpb_fail(err, st, NULL, "out of memory");
        goto out;
    }
    /* the event, registered for the relations the page uses (its RDP curve computed here,
     * off the lock, when no round or name brought it in) */
    for (int r = 0; r < 2 && st == DPB_OK; r++)
        if (need[r] && (st = spend_event_get(l->sp, eb, elen, (dp_relation)r, &x[r])) != DPB_OK)
            dpb_fail(err, st, "event", "the event could not be prepared");
    if (st == DPB_OK)
        st = answer_page(l, q, x, items, cand, terms, n, err);
out:
    for (size_t i = 0; i < nt; i++)
        spend_event_put(l->sp, terms[i].ev);
    spend_event_put(l->sp, x[0]);
    spend_event_put(l->sp, x[1]);
    free(terms);
    free(cand);
    free(eb);
    if (st != DPB_OK) {
        free(items);
        memset(pg, 0, sizeof *pg);
        return st;
    }
    *out = items;
    *nout = n;
    return DPB_OK;
}
