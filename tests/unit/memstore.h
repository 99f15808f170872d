/* memstore.h - a shared store (core/ledger/store.h) in memory, for tests: one log that any
 * number of ledgers in the process append to, as replicas do to a database, with the same
 * arbiter (a seq is taken once: a batch whose first seq is taken fails whole with
 * DPB_ECONFLICT) and switches that make the next sync fail (DPB_ECONFLICT, DPB_EUNAVAILABLE),
 * commit and then answer DPB_EUNAVAILABLE (the answer lost), or make catch-up fail. */
#ifndef DPB_TESTS_MEMSTORE_H
#define DPB_TESTS_MEMSTORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/ledger/store.h"

typedef struct {
    uint8_t type;
    unsigned char *p;
    size_t n;
} memrec;

struct memsnap {
    unsigned char *p;
    size_t n;
    uint64_t seq;
};

typedef struct memlog {
    pthread_mutex_t mu;
    memrec *rec; /* rec[i] has seq i + 1 */
    size_t nrec, cap;
    unsigned char *snap; /* the newest snapshot */
    size_t snap_len;
    uint64_t snap_seq;
    uint64_t snapshots;        /* snapshots written */
    uint64_t conflicts;        /* syncs that lost the race for their first seq */
    atomic_int fail_next;      /* DPB_ECONFLICT or DPB_EUNAVAILABLE: the next sync fails so */
    atomic_int lose_answer;    /* 1: the next sync commits, then answers DPB_EUNAVAILABLE */
    atomic_int catch_up_fails; /* 1: catch-up and replay answer DPB_EUNAVAILABLE */
    atomic_int sync_sleep_us;  /* every sync sleeps this long first (to form races) */
    /* keep_snaps: every snapshot written is also kept (snaps[0..nsnaps), oldest first) */
    int keep_snaps;
    struct memsnap *snaps;
    size_t nsnaps;
    /* called once (then cleared) at the start of the next sync, before it takes any lock */
    void (*before_sync)(void *ctx);
    void *before_ctx;
} memlog;

void memlog_init(memlog *g);
void memlog_free(memlog *g);

/* out (uninitialized): a copy of g's records with the k-th kept snapshot as its newest (what
 * a replica recovering from that snapshot and the log reads). 0, or -1 (no such snapshot). */
int memlog_clone_at(memlog *g, size_t k, memlog *out);

/* A store on g (g outlives it). */
ledger_store *memstore_open(memlog *g);

/* The log as a version before LEDGER_FORMAT 5 wrote it: every timed record (type | 0x80, its
 * u64 time first) back to its type and payload alone. Returns the records changed. */
size_t memlog_strip_times(memlog *g);
/* The snapshot as format 4 wrote it, for a snapshot taken while the ledger's clock read t
 * for its every record and for the snapshot itself: cut before its times (the u64 pair t, t
 * that starts them) and its format set to 4. 0, or -1 (no such pair). */
int memlog_snap_cut_times(memlog *g, uint64_t t);

#endif
