/* app.h - what the handlers share: the ledger (NULL with --no-ledger). */
#ifndef HTTP_APP_H
#define HTTP_APP_H

#include "../core/ledger/ledger.h"

typedef struct {
    ledger *ledger;
    unsigned long reservation_ttl; /* default reservation_ttl_seconds (--reservation-ttl) */
    uint64_t max_pld_evals;        /* an eligibility page's cost cap (--ledger-max-pld-evals) */
} app_state;

#endif
