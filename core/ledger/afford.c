/*
 * afford.c - affordability from a copy of a client's history (afford.h): the admission test
 * and the search for the number of rounds affordable. Calls spend.h and cancel.h only.
 */
#include "afford.h"

#include <math.h>
#include <string.h>

/* The history's memo (spend.h) for this search: made by the first test (k 0), then read by
 * every probe, so that a probe's rdp value adds k curves to the history's sums instead of
 * summing the whole history again (the same bits). Per thread: afford_rounds is not
 * reentrant on a thread. */
static _Thread_local spend_memo *probe_memo;
static _Thread_local int probe_memo_made;

/* One admission test of k more of x (k 0: the history as it is), counted against the
 * budget unless uncounted. DPB_OK with *reason and *after, or the budget's refusal. */
static dpb_status admit_as(spend_engine *g, const afford_history *h, spend_event *x, uint64_t k,
                           afford_budget *b, int uncounted, ledger_reason *reason, double *after)
{
    spend_result sr;
    if (h->uncertified) {
        memset(&sr, 0, sizeof sr);
        sr.uncertified = 1;
        sr.accountant = -1;
        sr.spent = HUGE_VAL;
    } else {
        int make = k == 0 && !probe_memo_made;
        probe_memo_made |= make;
        spend_eval_more(g, probe_memo, make ? &probe_memo : NULL, h->mode, h->eps, h->delta, h->rel,
                        h->t, h->m, k ? x : NULL, k, &sr);
    }
    if (dpb_cancelled())
        return DPB_ECANCELLED; /* a PLD stopped half-way answered +inf: not an answer */
    if (sr.pld_computed && !uncounted && ++b->pld_evals > b->max_pld_evals && b->max_pld_evals > 0)
        return DPB_ECOST;
    *after = sr.spent;
    int kind = spend_event_class(x)->kind;
    if (kind == SPEND_UNCERTIFIABLE || sr.uncertified)
        *reason = LEDGER_UNCERTIFIABLE;
    else if (sr.unsupported && (h->mode == LEDGER_RDP_FILTER || h->mode == LEDGER_GDP_FILTER))
        *reason = LEDGER_FILTER_UNSUPPORTED;
    else if (sr.unsupported || kind == SPEND_NOT_COVERED ||
             (h->mode == LEDGER_RDP && kind == SPEND_PLD_ONLY))
        *reason = LEDGER_UNSUPPORTED;
    else if (h->known && h->spent >= h->eps && !(sr.spent <= h->eps))
        *reason = LEDGER_EXHAUSTED_ALREADY;
    else
        *reason = sr.spent <= h->eps ? LEDGER_OK : LEDGER_OVER_BUDGET;
    return DPB_OK;
}

static dpb_status admit(spend_engine *g, const afford_history *h, spend_event *x, uint64_t k,
                        afford_budget *b, ledger_reason *reason, double *after)
{
    return admit_as(g, h, x, k, b, 0, reason, after);
}

/* 1 when k more are admitted (into *ok), through admit. */
static dpb_status fits(spend_engine *g, const afford_history *h, spend_event *x, uint64_t k,
                       afford_budget *b, int *ok)
{
    ledger_reason r;
    double after;
    dpb_status st = admit(g, h, x, k, b, &r, &after);
    *ok = st == DPB_OK && r == LEDGER_OK;
    return st;
}

static dpb_status search(spend_engine *g, const afford_history *h, spend_event *x,
                         uint64_t max_rounds, afford_budget *b, afford_result *out)
{
    double after;
    dpb_status st = admit(g, h, x, 1, b, &out->reason, &after);
    if (st != DPB_OK || out->reason != LEDGER_OK)
        return st;
    int ok = 1;
    uint64_t lo = 1, hi = 2; /* lo affordable; hi not known */
    while (hi <= max_rounds && (st = fits(g, h, x, hi, b, &ok)) == DPB_OK && ok) {
        lo = hi;
        hi *= 2;
    }
    if (st != DPB_OK)
        return st;
    if (hi > max_rounds) {
        if (lo < max_rounds) {
            if ((st = fits(g, h, x, max_rounds, b, &ok)) != DPB_OK)
                return st;
            if (ok) {
                out->rounds = max_rounds;
                out->capped = 1;
                return DPB_OK;
            }
        } else if (lo == max_rounds) {
            out->rounds = lo;
            out->capped = 1;
            return DPB_OK;
        }
        hi = max_rounds; /* not affordable */
    }
    while (hi - lo > 1) { /* lo affordable, hi not */
        uint64_t mid = lo + (hi - lo) / 2;
        if ((st = fits(g, h, x, mid, b, &ok)) != DPB_OK)
            return st;
        if (ok)
            lo = mid;
        else
            hi = mid;
    }
    out->rounds = lo;
    return DPB_OK;
}

dpb_status afford_rounds(spend_engine *g, const afford_history *h, spend_event *x,
                         uint64_t max_rounds, int want_held, afford_budget *b, afford_result *out)
{
    *out = (afford_result){LEDGER_OK, 0, 0, NAN};
    const dpb_cancel *prev = dpb_cancel_enter(b->cancel);
    dpb_status st = DPB_OK;
    if (dpb_cancelled())
        st = DPB_ECANCELLED;
    probe_memo_made = 0;
    if (st == DPB_OK) { /* the history as it is: its memo for the probes, and what it holds
                         * (counted against the budget when asked for, as before) */
        ledger_reason r;
        double held;
        st = admit_as(g, h, x, 0, b, !want_held, &r, &held);
        if (want_held)
            out->held = held;
    }
    if (st == DPB_OK) {
        spend_decide_only(1); /* the probes ask for admissions, not values: a kept
                               * composition decides each in one pass (spend_kept) */
        st = search(g, h, x, max_rounds, b, out);
        spend_decide_only(0);
    }
    spend_memo_free(probe_memo);
    probe_memo = NULL;
    dpb_cancel_leave(prev);
    if (st == DPB_OK && out->reason != LEDGER_OK)
        out->rounds = 0;
    return st;
}
