/*
 * ledger_txn.h - layer 2 of core/ledger: the write transaction and the read path (the
 * contract of ledger_txn.c). A change is, once: lock, begin (withdraw what a failure voided,
 * forget what is durable, catch up with a shared log), check writable, reserve undo room,
 * log each record and apply it (layer 4, through the verb), unlock, then commit (acknowledge
 * once durable; withdraw if the log fails first) and maybe trigger a snapshot. A verb that
 * loses its seq to another replica runs again (RETRY_RACES). Reads settle what they show.
 * Calls ledger_record.h (layer 3) and ledger_mem.h (layer 4), store.h below; never a verb.
 */
#ifndef DPB_LEDGER_TXN_H
#define DPB_LEDGER_TXN_H

#include "ledger_int.h"

/* A change lost the race for its seq to another replica sharing the log ("a shared store" in
 * ledger_txn.c): the call runs again; never returned to callers. */
#define LEDGER_RACE ((dpb_status)1000)
#define RACE_TRIES 50

/* st = call, run again (err cleared, after a backoff) while it lost a race, RACE_TRIES times
 * at most. */
#define RETRY_RACES(st, call, err)                                                                 \
    do {                                                                                           \
        for (unsigned try_ = 0;; try_++) {                                                         \
            (st) = (call);                                                                         \
            if ((st) != LEDGER_RACE)                                                               \
                break;                                                                             \
            dpb_error_clear(err);                                                                  \
            if (try_ + 1 >= RACE_TRIES) {                                                          \
                (st) = lg_races_exhausted(err);                                                    \
                break;                                                                             \
            }                                                                                      \
            lg_race_backoff(try_);                                                                 \
        }                                                                                          \
    } while (0)

/* Jittered backoff before try attempt + 1 (0.1 ms doubling up to 20 ms, times 0.5..1.5). */
void lg_race_backoff(unsigned attempt);
/* The error of RACE_TRIES lost races in a row (DPB_EUNAVAILABLE). */
dpb_status lg_races_exhausted(dpb_error *err);

/* ---- the write transaction ------------------------------------------------------------------ */

typedef struct {
    ledger *l;
    dpb_error *err;
    uint64_t gen;     /* the void generation its records belong to */
    uint64_t seq;     /* what the change waits for: its last record, or a change it shows */
    int wait;         /* 1: commit seq at the end */
    uint64_t spends0; /* lg_spends_here when the lock was taken */
} lg_txn;

/* Take the write lock and begin a change (l's lock held on return, whatever the status):
 * DPB_OK, or the status of a shared store that cannot catch up (err filled). */
dpb_status lg_txn_begin(lg_txn *t, ledger *l, dpb_error *err);
/* DPB_OK, or DPB_EREADONLY (err filled) when the ledger is read-only. */
dpb_status lg_txn_writable(lg_txn *t);
/* Room for k undo entries before anything is logged: DPB_OK, or DPB_ENOMEM (err filled). */
dpb_status lg_txn_reserve(lg_txn *t, size_t k);
/* Append the record (type, w; w->b freed): the change then waits for it. On failure every
 * change not durable is withdrawn (the ledger turns read-only) and nothing is committed. */
dpb_status lg_txn_log(lg_txn *t, int type, bw *w);
/* Append the interned events not in the log yet, in index order, each with its undo entry
 * (room reserved). Failure as lg_txn_log. */
dpb_status lg_txn_log_events(lg_txn *t);
/* A large change, its records appended and not applied yet: they are made durable now, the
 * read-write lock given back meanwhile (readers go on with the state before the change; no
 * other writer starts: the writers' lock stays held), so that readers let in during its
 * apply (lg_let_readers) never wait for its sync. On failure everything not durable is
 * withdrawn and the answer is that of a failed sync (the caller fails the change). */
dpb_status lg_txn_sync_early(lg_txn *t);
/* A logged change that cannot be applied (out of memory): everything not durable is
 * withdrawn, the ledger read-only until restarted; returns st with err filled. */
dpb_status lg_txn_abandon(lg_txn *t, dpb_status st);
/* The change also waits for seq to be durable (a change it shows). */
void lg_txn_wait(lg_txn *t, uint64_t seq);
/* Release the lock; if the change waits for a record, acknowledge it once durable and
 * trigger a snapshot when due. Returns the commit's failure, else st. */
dpb_status lg_txn_end(lg_txn *t, dpb_status st);
/* lg_txn_end without the snapshot trigger (a sweep triggers it once at its end). */
dpb_status lg_txn_end_nosnap(lg_txn *t, dpb_status st);

/* ---- pieces of a change, for the verbs that need them apart ---------------------------- */

/* Ask the snapshot thread for a snapshot if enough records were appended since the last. */
void lg_maybe_snapshot(ledger *l);
/* Serialize the durable state and store it as a snapshot (no lock held). DPB_EREADONLY when
 * the ledger is read-only or not settled (not a failure), else the store's status. */
dpb_status lg_take_snapshot(ledger *l, dpb_error *err);

/* ---- spends before the lock (ledger_prefetch.c) ------------------------------------------ */

/* A change of one stored client: its counts of ev (LEV_NONE: none) move by charge (charged)
 * and hold (held by reservations), and with budget its budget becomes (eps, delta). */
typedef struct {
    long pos;
    uint32_t ev;
    int charge, hold;
    int budget;
    double eps, delta;
} lg_change;

typedef struct {
    double eps, delta;
    int rel;
    size_t off, m; /* its terms in lg_prefetch.t */
} lg_pre_cand;

typedef struct {
    long pos;
    uint64_t version;
} lg_pre_stamp;

/* The spends some changes will need (zero-initialised before the first copy). */
typedef struct {
    spend_term *t; /* every candidate's terms, each event referenced */
    size_t nt, cap_t;
    lg_pre_cand *c;
    size_t nc, cap_c;
    lg_pre_stamp *stamp; /* the pld clients copied and their versions then */
    size_t ns, cap_s;
} lg_prefetch;

/* Under a lock (read or write): copy what lg_recompute will evaluate for each pld client
 * after its change (the spend of its charged events, and one more of its last event with
 * the held ones), stamping the client's version. 0, or -1 out of memory (what was copied
 * stays in p, to free). */
int lg_prefetch_copy(ledger *l, const lg_change *ch, size_t n, lg_prefetch *p);
/* With no lock held: compute p's spends into the spend engine's cache (those past the rdp
 * bound are PLDs) under cancel (NULL: the ledger's own deadline, ledger_set_compute_limits) and the
 * ledger's cost cap. DPB_OK, DPB_ECANCELLED or DPB_ECOST (err filled; nothing changed). */
dpb_status lg_prefetch_run(ledger *l, lg_prefetch *p, const dpb_cancel *cancel, dpb_error *err);
/* Under a lock: stamp the client at pos (its version) without copying anything. 0, or -1
 * out of memory. */
int lg_prefetch_stamp(const ledger *l, long pos, lg_prefetch *p);
/* Under the write lock: 1 when every client p copied is as it was (its version). */
int lg_prefetch_current(const ledger *l, const lg_prefetch *p);
void lg_prefetch_free(ledger *l, lg_prefetch *p);
/* A change whose stamps no longer hold goes round again (never returned to callers); its
 * LG_PREFETCH_TRIES-th attempt checks no stamps and computes what it must under the lock. */
#define LEDGER_STALE ((dpb_status)1001)
#define LG_PREFETCH_TRIES 4

/* ---- the read path -------------------------------------------------------------------------- */

/* Before a read: a shared store's newer records applied first (linearizable across
 * replicas). DPB_OK, or DPB_EUNAVAILABLE when its database cannot be reached. No lock held. */
dpb_status lg_read_begin(ledger *l, dpb_error *err);
/* Take the read lock on a state whose every change is durable. */
void lg_rdlock_durable(ledger *l);
/* The same with the writers' lock held first: no change is half applied (a large change
 * lets readers in between its participants, lg_let_readers); for what reads the ledger
 * whole (a copy, a comparison). lg_rdunlock_whole gives both back. */
void lg_rdlock_whole(ledger *l);
void lg_rdunlock_whole(ledger *l);
/* The seq a stored entry at pos is shown after (client, named event, round, round with its
 * last state change). */
uint64_t lg_seq_client(const ledger *l, long pos);
uint64_t lg_seq_name(const ledger *l, long pos);
uint64_t lg_seq_round(const ledger *l, long pos);
uint64_t lg_seq_round_state(const ledger *l, long pos);
/* A read of one stored entry: after lg_read_begin, key found once durable
 * and shown by show(l, pos, out) under the read lock. DPB_EUNAVAILABLE (a shared store's
 * database cannot be reached), DPB_ENOTFOUND, or show's status. */
dpb_status lg_read_one(ledger *l, long (*find)(const ledger *, const char *), const char *key,
                       uint64_t (*seq_of)(const ledger *, long),
                       dpb_status (*show)(const ledger *, long, void *), void *out);
/* The same under the write lock already held: what a failure cut away is withdrawn first. */
long lg_find_durable_locked(ledger *l, long (*find)(const ledger *, const char *), const char *key,
                            uint64_t (*seq_of)(const ledger *, long));

#endif
