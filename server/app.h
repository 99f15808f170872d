/* app.h - what the handlers share: the ledger (NULL with --no-ledger), and whether the
 * daemon is stopping (main.c sets it at SIGTERM; /readyz then answers 503 shutting_down). */
#ifndef HTTP_APP_H
#define HTTP_APP_H

#include "../core/ledger/ledger.h"
#include "signer.h"

typedef struct {
    ledger *ledger;
    unsigned long reservation_ttl; /* default reservation_ttl_seconds (--reservation-ttl) */
    int stopping; /* 1 from the stop signal on (read and written with __atomic builtins) */
    uint64_t max_pld_evals; /* an eligibility page's cost cap (--ledger-max-pld-evals) */
    const signer *signer;   /* --signing-key's keys (NULL: tree heads and receipts unsigned) */
} app_state;

#endif
