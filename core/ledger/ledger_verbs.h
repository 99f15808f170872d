/*
 * ledger_verbs.h - layer 1 of core/ledger: the verbs' internals shared between verb files
 * (the public verbs are ledger.h's). Verb files (ledger_clients.c, ledger_refine.c,
 * ledger_events.c, ledger_rounds.c, ledger_resolve.c, ledger_elig.c) call ledger_txn.h and
 * the layers below it; ledger_open.c, the top, opens and closes the ledger and runs its
 * threads, which call the verbs.
 */
#ifndef DPB_LEDGER_VERBS_H
#define DPB_LEDGER_VERBS_H

#include "ledger_int.h"

/* One step of the background refinement (refine.c's step function; arg: the ledger): looks
 * at a slice of clients under the read lock, computes one PLD spend outside every lock and
 * shows it under the write lock if the client did not change meanwhile. 1 when it did work
 * (or finished a pass), 0 when idle or abandoned (stop: the refiner is stopping). */
int lg_refine_step(void *arg, const int *stop);

#endif
