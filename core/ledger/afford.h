/*
 * afford.h - affordability: whether one more round of an event would be admitted for a
 * client, and how many further such rounds it can afford, computed from a copy of the
 * client's history and budget (no ledger, no lock). The ledger's eligibility copies what it
 * needs under its read lock and calls this after releasing it, so that nothing expensive (a
 * PLD, an RDP curve) runs under the ledger's lock; a faster engine (kept per-client PLDs)
 * may replace the internals behind the same contract.
 *
 * The admission test is the ledger's (lg_admission in ledger_spendof.c): the spend of the
 * history with k more of the event (spend.h: spend_eval_more, the same bits as a round's
 * admission computes), compared with the budget's eps; the count is found by doubling then
 * bisection on it, capped at max_rounds (the spend grows with the count).
 *
 * May call: spend.h, ../common/cancel.h.
 */
#ifndef LEDGER_AFFORD_H
#define LEDGER_AFFORD_H

#include <stdint.h>

#include "../common/cancel.h"
#include "ledger.h"
#include "spend.h"

/* A copy of one client as admission sees it. */
typedef struct {
    int mode;          /* ledger_mode */
    double eps, delta; /* the budget */
    dp_relation rel;
    int uncertified; /* charged an uncertifiable event: infinite spend */
    int known;       /* 0: a client a round would create with the default budget */
    double spent;    /* the charged spend (a known client's exhausted test) */
    /* the charged events with the held reservations merged in (distinct events; references
     * held by the caller for the call) */
    const spend_term *t;
    size_t m;
} afford_history;

/* What one request may spend on its computations, across the calls it makes. */
typedef struct {
    const dpb_cancel *cancel; /* deadline and stop flag (NULL: none) */
    uint64_t max_pld_evals;   /* admission tests that evaluate a PLD, at most (0: no cap) */
    uint64_t pld_evals;       /* such tests made so far (updated) */
} afford_budget;

typedef struct {
    ledger_reason reason; /* of one more round: LEDGER_OK when admitted */
    uint64_t rounds;      /* further rounds affordable (0 when not admitted) */
    int capped;           /* rounds == max_rounds and perhaps more */
    double held;          /* the spend of the history as it is (with want_held), else NAN */
} afford_result;

/* The admission of one round of x (its class says whether any accountant covers it) for h,
 * then the number of further rounds affordable, 1..max_rounds, into *out; with want_held
 * also the spend of h as it is. DPB_OK; DPB_ECANCELLED when b->cancel fired (out
 * incomplete: nothing a caller may show); DPB_ECOST when the test would evaluate more than
 * b->max_pld_evals PLDs in all (out incomplete). */
dpb_status afford_rounds(spend_engine *g, const afford_history *h, spend_event *x,
                         uint64_t max_rounds, int want_held, afford_budget *b, afford_result *out);

#endif
