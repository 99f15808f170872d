/*
 * ledger_prefetch.c - layer 2 (transaction): the spends a change will compute, computed
 * before its write lock (ledger_txn.h, "spends before the lock"). A change that moves a pld
 * client's counts or budget makes lg_recompute evaluate the client's spend and whether one
 * more of its last event fits; past the rdp bound those are PLD compositions, from
 * milliseconds to seconds each. They are copied here under the read lock (the client's terms
 * as they will be, its version stamped), computed into the spend engine's cache with no lock
 * held, under the ledger's deadline and cost cap; under the write lock the change checks the
 * stamps and, when a client changed meanwhile, goes round again instead of computing under
 * the lock. Calls ledger_mem.h (state, a lock held by the caller) and spend.h.
 */
#include "ledger_txn.h"
#include "ledger_mem.h"

/* The counts c[0..n) with `add` more of ev (removed at 0), into out (room for n + 1). */
static size_t with_count(const lcount *c, uint32_t n, uint32_t ev, int add, lcount *out)
{
    size_t m = 0;
    int seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        lcount x = c[i];
        if (x.ev == ev) {
            seen = 1;
            x.count = add < 0 && x.count < (uint64_t)-add ? 0 : x.count + (uint64_t)(int64_t)add;
        }
        if (x.count > 0)
            out[m++] = x;
    }
    if (!seen && add > 0 && ev != LEV_NONE)
        out[m++] = (lcount){ev, (uint64_t)add};
    return m;
}

/* Append one candidate: the counts a[0..na) and b[0..nb) merged (as lg_spend_held merges
 * them), with `more` of xev, for the budget (eps, delta) and relation rel. 0, or -1 out of
 * memory. */
static int add_candidate(ledger *l, lg_prefetch *p, const lcount *a, size_t na, const lcount *b,
                         size_t nb, uint32_t xev, double eps, double delta, int rel)
{
    size_t need = p->nt + na + nb + 1;
    if (lg_grow((void **)&p->t, &p->cap_t, need, sizeof *p->t) != 0 ||
        lg_grow((void **)&p->c, &p->cap_c, p->nc + 1, sizeof *p->c) != 0)
        return -1;
    size_t off = p->nt;
    /* the counts merged by event in time linear in the history (lg_merge_counts: a client's
     * history may hold thousands of distinct events), then as spend terms */
    lcount *ms = malloc(need * sizeof *ms);
    if (ms == NULL)
        return -1;
    uint32_t k = (uint32_t)na;
    const lcount one = {xev, 1};
    if (na)
        memcpy(ms, a, na * sizeof *ms);
    if (lg_merge_counts(ms, &k, b, (uint32_t)nb) != 0 ||
        (xev != LEV_NONE && lg_merge_counts(ms, &k, &one, 1) != 0)) {
        free(ms);
        return -1;
    }
    for (uint32_t i = 0; i < k; i++) {
        spend_event *se = l->evs[ms[i].ev].se;
        spend_event_ref(l->sp, se);
        p->t[p->nt++] = (spend_term){se, ms[i].count};
    }
    free(ms);
    if (p->nt == off)
        return 0;
    p->c[p->nc++] = (lg_pre_cand){eps, delta, rel, off, p->nt - off};
    return 0;
}

int lg_prefetch_copy(ledger *l, const lg_change *ch, size_t n, lg_prefetch *p)
{
    for (size_t i = 0; i < n; i++) {
        if (ch[i].pos < 0 || (size_t)ch[i].pos >= l->ncl)
            continue;
        const lclient *c = &l->cl[ch[i].pos];
        if (c->mode != LEDGER_PLD || c->uncertified)
            continue; /* only a pld client's spend may need a PLD */
        if (lg_grow((void **)&p->stamp, &p->cap_s, p->ns + 1, sizeof *p->stamp) != 0)
            return -1;
        p->stamp[p->ns++] = (lg_pre_stamp){ch[i].pos, c->version};
        double eps = ch[i].budget ? ch[i].eps : c->eps;
        double delta = ch[i].budget ? ch[i].delta : c->delta;
        lcount *ev = malloc((c->nev + 1) * sizeof *ev), *rv = malloc((c->nrv + 1) * sizeof *rv);
        int bad = ev == NULL || rv == NULL;
        if (!bad) {
            size_t nev = with_count(c->ev, c->nev, ch[i].ev, ch[i].charge, ev);
            size_t nrv = with_count(c->rv, c->nrv, ch[i].ev, ch[i].hold, rv);
            uint32_t last = ch[i].charge > 0 ? ch[i].ev : c->last_ev;
            /* its spend (the charged events), then one more of its last event with the held
             * ones (the honest status): what lg_recompute evaluates */
            bad = add_candidate(l, p, ev, nev, NULL, 0, LEV_NONE, eps, delta, c->rel) != 0 ||
                  (last != LEV_NONE &&
                   add_candidate(l, p, ev, nev, rv, nrv, last, eps, delta, c->rel) != 0);
        }
        free(ev);
        free(rv);
        if (bad)
            return -1;
    }
    return 0;
}

dpb_status lg_prefetch_run(ledger *l, lg_prefetch *p, const dpb_cancel *cancel, dpb_error *err)
{
    dpb_cancel own = {0};
    if (cancel == NULL && l->compute_deadline > 0.0) {
        own.deadline = dpb_cancel_now() + l->compute_deadline;
        cancel = &own;
    }
    const dpb_cancel *prev = dpb_cancel_enter(cancel);
    uint64_t evals = 0;
    dpb_status st = DPB_OK;
    for (size_t i = 0; i < p->nc && st == DPB_OK; i++) {
        const lg_pre_cand *c = &p->c[i];
        spend_result r;
        spend_eval(l->sp, LEDGER_PLD, c->eps, c->delta, (dp_relation)c->rel, p->t + c->off, c->m,
                   &r);
        if (dpb_cancelled())
            st = dpb_fail(err, DPB_ECANCELLED, NULL,
                          "the spends this change needs were still being computed at the "
                          "ledger's deadline (%zu of %zu): nothing was changed",
                          i, p->nc);
        else if (r.pld_computed && ++evals > l->max_pld_evals && l->max_pld_evals > 0)
            st = dpb_fail(err, DPB_ECOST, NULL,
                          "this change needs more than %llu PLD evaluations: nothing was "
                          "changed; change fewer clients at once",
                          (unsigned long long)l->max_pld_evals);
    }
    dpb_cancel_leave(prev);
    return st;
}

int lg_prefetch_stamp(const ledger *l, long pos, lg_prefetch *p)
{
    if (lg_grow((void **)&p->stamp, &p->cap_s, p->ns + 1, sizeof *p->stamp) != 0)
        return -1;
    p->stamp[p->ns++] = (lg_pre_stamp){pos, l->cl[pos].version};
    return 0;
}

int lg_prefetch_current(const ledger *l, const lg_prefetch *p)
{
    for (size_t i = 0; i < p->ns; i++)
        if ((size_t)p->stamp[i].pos >= l->ncl ||
            l->cl[p->stamp[i].pos].version != p->stamp[i].version)
            return 0;
    return 1;
}

void lg_prefetch_free(ledger *l, lg_prefetch *p)
{
    for (size_t i = 0; i < p->nt; i++)
        spend_event_put(l->sp, p->t[i].ev);
    free(p->t);
    free(p->c);
    free(p->stamp);
    memset(p, 0, sizeof *p);
}

void ledger_set_compute_limits(ledger *l, double deadline_s, uint64_t max_pld_evals)
{
    l->compute_deadline = deadline_s;
    l->max_pld_evals = max_pld_evals;
}
