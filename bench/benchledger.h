/* benchledger.h - what the ledger benchmarks share: registering n clients "c0".."c{n-1}"
 * in batches, their ids kept for the rounds that name them. */
#ifndef DPB_BENCHLEDGER_H
#define DPB_BENCHLEDGER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ledger/ledger.h"

typedef char bench_id[16];

/* Clients c0..c{n-1} with budget (eps, 1e-5) in accounting mode, put in batches of 10,000;
 * *ids (grown, or allocated when NULL) holds their ids. Exits 1, naming who, on failure. */
static inline void bench_make_clients(ledger *l, bench_id **ids, size_t n, double eps,
                                      ledger_mode mode, const char *who)
{
    enum { BATCH = 10000 };
    bench_id *grown = realloc(*ids, n * sizeof *grown);
    ledger_client *batch = calloc(BATCH, sizeof *batch);
    if (grown == NULL || batch == NULL) {
        fprintf(stderr, "%s: out of memory\n", who);
        exit(1);
    }
    *ids = grown;
    for (size_t start = 0; start < n; start += BATCH) {
        size_t m = n - start < BATCH ? n - start : BATCH;
        for (size_t i = 0; i < m; i++) {
            snprintf(grown[start + i], sizeof grown[0], "c%zu", start + i);
            memset(&batch[i], 0, sizeof batch[i]);
            snprintf(batch[i].id, sizeof batch[i].id, "%s", grown[start + i]);
            batch[i].epsilon = eps;
            batch[i].delta = 1e-5;
            batch[i].mode = mode;
        }
        dpb_error err = {0};
        if (ledger_put_clients(l, batch, m, &err) != DPB_OK) {
            fprintf(stderr, "%s: %s\n", who, err.detail);
            exit(1);
        }
    }
    free(batch);
}

#endif
