/*
 * ledger_refine.c - layer 1 (verbs): the background refinement of pld spends, one step at a
 * time (refine.c runs the thread). Reads and changes the state through ledger_mem.h under
 * the ledger's lock; logs nothing.
 */
#include "ledger_verbs.h"
#include "ledger_mem.h"

#include "../common/clock.h"

/* ---- Background refinement (pld_refine) ---------------------------------------------------
 * A pld client within its budget shows its rdp value r. A background thread (refine.c), at
 * normal priority but giving way to every change (a change stops its computation, and it
 * starts one only after REFINE_QUIET_NS without changes: so it never holds a lock or a CPU
 * a round needs for long, which a low-priority thread holding a lock would), scans the clients in
 * slices under the read lock for such a state not settled yet, copies its terms (holding references
 * to its events), computes the PLD value p through the spend engine (its cache, the same code a
 * charge uses) outside every lock, and under the write lock, briefly, shows min(p, r) naming the
 * accountant if the client's budget and multiset are still exactly the copied ones: a charge
 * meanwhile is never overwritten. Nothing is logged: the refined value is a function of the logged
 * state, recomputed after a restart, so the client's version (which the log's replay must number
 * the same) is kept; the accountant changes with it, and (version, accountant) is the client's
 * ETag. Lists and the summary change too: their ETag (view_tag) mixes in the refinements applied
 * since open and a value new at every open, as a snapshot may hold refined values. */

static int refine_wanted(const ledger *l, const lclient *c)
{
    return c->mode == LEDGER_PLD && !c->uncertified && c->nev > 0 &&
           lg_spend_accountant(l, c) == DP_ACCT_RDP && c->refined != c->version + 1;
}

/* 1 if c still has exactly the budget and the terms o[0..m) (in its own order). */
static int refine_same(const ledger *l, const lclient *c, double eps, double delta, uint8_t rel,
                       const spend_term *o, size_t m)
{
    if (c->mode != LEDGER_PLD || c->uncertified || lg_spend_accountant(l, c) != DP_ACCT_RDP ||
        c->eps != eps || c->delta != delta || c->rel != rel || c->nev != m)
        return 0;
    for (size_t i = 0; i < m; i++)
        if (l->evs[c->ev[i].ev].se != o[i].ev || c->ev[i].count != o[i].count)
            return 0;
    return 1;
}

#define REFINE_SLICE 1024 /* clients looked at per hold of the read lock */

#define REFINE_QUIET_NS 100000000u /* 100 ms without a change before a computation starts */

int lg_refine_step(void *arg, const int *stop)
{
    ledger *l = arg;
    if (dpb_mono_ns() - __atomic_load_n(&l->rf_last_change, __ATOMIC_ACQUIRE) < REFINE_QUIET_NS)
        return 0; /* changes are under way: wait for a quiet moment */
    char *id = NULL;
    spend_term *o = NULL, *t = NULL;
    size_t m = 0;
    double eps = 0.0, delta = 0.0;
    uint8_t rel = 0;
    pthread_rwlock_rdlock(&l->lock);
    if (l->rf_next == 0) { /* a new pass, unless nothing changed since a pass found nothing */
        if (l->version == l->rf_idle_version) {
            pthread_rwlock_unlock(&l->lock);
            return 0;
        }
        l->rf_pass_version = l->version;
        l->rf_pass_found = 0;
    }
    for (size_t k = 0; k < REFINE_SLICE && l->rf_next < l->ncl && id == NULL; k++) {
        const lclient *c = &l->cl[l->rf_next++];
        if (!refine_wanted(l, c))
            continue;
        m = c->nev;
        id = lg_xstrdup(c->id);
        o = malloc(m * sizeof *o);
        t = malloc(m * sizeof *t);
        if (id == NULL || o == NULL || t == NULL) {
            free(id);
            free(o);
            free(t);
            pthread_rwlock_unlock(&l->lock);
            return 0; /* out of memory: try again later */
        }
        for (size_t i = 0; i < m; i++) {
            o[i] = t[i] = (spend_term){lg_ev_se(l, c->ev[i].ev), c->ev[i].count};
            spend_event_ref(l->sp, o[i].ev); /* a withdrawn charge could drop it meanwhile */
        }
        eps = c->eps;
        delta = c->delta;
        rel = c->rel;
        l->rf_pass_found++;
    }
    if (id == NULL && l->rf_next >= l->ncl) { /* the pass is over */
        l->rf_next = 0;
        if (l->rf_pass_found == 0)
            l->rf_idle_version = l->rf_pass_version;
    }
    pthread_rwlock_unlock(&l->lock);
    if (id == NULL)
        return 1;
    spend_result r;
    atomic_store(&l->refining, 1);
    __atomic_store_n(&l->rf_yield, 0, __ATOMIC_RELEASE);
    int busy = 0;
    if (dpb_mono_ns() - __atomic_load_n(&l->rf_last_change, __ATOMIC_ACQUIRE) < REFINE_QUIET_NS)
        busy = 1; /* a change started while the terms were copied */
    else
        spend_refine(l->sp, eps, delta, (dp_relation)rel, t, m, &l->rf_yield, &r);
    if (__atomic_load_n(&l->rf_yield, __ATOMIC_ACQUIRE) || __atomic_load_n(stop, __ATOMIC_ACQUIRE))
        busy = 1; /* abandoned: a change (or the close) stopped it */
    if (busy) {
        __atomic_fetch_add(&l->refine_abandoned, 1, __ATOMIC_RELAXED);
        if (l->rf_next > 0)
            l->rf_next--; /* this client again, at the next quiet moment */
    } else {
        lg_wrlock(l);
        long pos = lg_find_client(l, id);
        lclient *c = pos >= 0 ? &l->cl[pos] : NULL;
        if (c && refine_same(l, c, eps, delta, rel, o, m)) {
            c->refined = c->version + 1;
            if (r.accountant == DP_ACCT_PLD && r.spent < c->spent) {
                lg_counters(l, c, -1);
                c->spent = r.spent;
                c->sacct = DP_ACCT_PLD;
                lg_counters(l, c, +1);
                l->refines++;
            }
        } else {
            l->refine_stale++;
        }
        lg_wrunlock(l);
    }
    atomic_store(&l->refining, 0);
    for (size_t i = 0; i < m; i++)
        spend_event_put(l->sp, o[i].ev);
    free(id);
    free(o);
    free(t);
    return !busy;
}
