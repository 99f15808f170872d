/*
 * store.h - where the ledger's log and snapshots live: the one narrow interface between the
 * ledger's semantics (ledger_*.c: admission, spends, idempotency, reservations, applied to an
 * in-memory state) and durability (docs/ARCHITECTURE.md, "Stores").
 *
 * The ledger is a deterministic state machine over a totally ordered log of records
 * (seq 1, 2, 3, ... with no gap; each record's meaning is the ledger's). A store keeps that log
 * and snapshots of the state, and nothing else. Two stores implement it:
 *   - the file store (store_file.c): DIR/wal.log and DIR/snapshot (wal.h, snapshot.h), owned
 *     by one process: the embedded ledger, the default;
 *   - the PostgreSQL store (store_pg.c): tables of one database shared by any number of
 *     replicas; every replica keeps the same state machine in memory as a cache of the
 *     shared log, catches up with it before every read and write, and appends only records
 *     computed from the whole log before them (optimistic concurrency: the seq is the
 *     table's primary key, so of two replicas appending the same seq exactly one commits,
 *     and the other learns it lost the race and recomputes on the newer state).
 *
 * Life cycle: store_*_open -> store_load_snapshot -> store_replay (recovery: calls fn for
 * every record after the snapshot) -> store_append / store_sync / store_catch_up /
 * store_snapshot from any number of threads -> store_close.
 *
 * Records appended but not yet synced are "pending". A sync makes all pending records up to
 * `upto` durable, or fails:
 *   DPB_EIO           the file store: sticky failure (wal.h); the log was cut back to
 *                     store_durable_seq(); the ledger withdraws and turns read-only.
 *   DPB_ECONFLICT     a shared store: another replica appended at one of the pending seqs
 *                     first (a lost race). Every pending record is void, nothing of them is
 *                     durable; the store's append position is back at store_durable_seq()+1.
 *                     Not sticky: the ledger withdraws the pending changes, catches up and
 *                     computes the change again.
 *   DPB_EUNAVAILABLE  a shared store could not reach the database (connection lost,
 *                     timeout, server restarting). Every pending record is dropped from the
 *                     store's queue; whether the last transaction committed is unknown, so the
 *                     ledger withdraws the pending changes and the next catch-up reads back
 *                     whatever did commit (its own records included). Not sticky: the store
 *                     reconnects by itself.
 */
#ifndef DPB_LEDGER_STORE_H
#define DPB_LEDGER_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"
#include "fs.h"
#include "tlog.h"

typedef struct ledger_store ledger_store;

/* Called once per record in log order (payload borrowed, never NULL, valid during the call).
 * A non-zero return stops: replay fails with DPB_ECORRUPT naming the record; catch-up fails
 * with DPB_ECORRUPT too (a shared log holding a record this version cannot apply). */
typedef int (*store_record_fn)(void *ctx, uint64_t seq, uint8_t type, const void *payload,
                               size_t len);

/* What a store last saw of where it keeps the log, read without waiting on it (probes). */
typedef struct {
    int answering;   /* 1: the last exchange was answered and nothing is refused */
    int refusing;    /* 1: new exchanges are refused at once (DPB_EUNAVAILABLE): the database
                      * has been silent for a while (store_pg.c: STALL_S) or let a statement
                      * reach its deadline unanswered, and has not answered since */
    double silent_s; /* how long exchanges in flight have seen no sign of life (0: none) */
} store_health;

/* The operations a store provides (the ledger calls them only through the wrappers below). */
typedef struct {
    const char *kind; /* "file" or "postgresql" */
    int shared;       /* 1: other processes append to the same log (catch up before acting) */
    dpb_status (*load_snapshot)(ledger_store *s, uint64_t *seq, void **data, size_t *len,
                                dpb_error *err);
    dpb_status (*replay)(ledger_store *s, uint64_t after_seq, store_record_fn fn,
                         store_record_fn covered, void *ctx, uint64_t *next_seq, dpb_error *err);
    dpb_status (*append)(ledger_store *s, uint8_t type, const void *payload, size_t len,
                         uint64_t *seq);
    dpb_status (*sync)(ledger_store *s, uint64_t upto);
    dpb_status (*catch_up)(ledger_store *s, uint64_t after_seq, store_record_fn fn, void *ctx,
                           uint64_t *last_seq, dpb_error *err);
    dpb_status (*snapshot)(ledger_store *s, uint64_t seq, const void *data, size_t len,
                           dpb_error *err);
    uint64_t (*durable_seq)(const ledger_store *s);
    int (*failed)(const ledger_store *s);
    dpb_status (*error)(ledger_store *s, dpb_error *err);
    void (*abandon)(ledger_store *s, const char *why);
    uint64_t (*size_bytes)(const ledger_store *s);
    void (*sync_stats)(ledger_store *s, uint64_t *count, double *seconds, uint64_t *hist);
    int (*empty)(ledger_store *s); /* 1: no snapshot and no record (a copy's target) */
    void (*health)(const ledger_store *s, store_health *h); /* NULL: always answering */
    void (*close)(ledger_store *s);
    /* The log as a Merkle tree (tlog.h, docs/TRANSPARENCY.md). read_records: fn for every
     * record with from <= seq <= to, in order (DPB_ENOTFOUND when one is missing, DPB_ECORRUPT
     * when damaged). tree_open (NULL: store_tree_open's default, which reads the records):
     * make t (empty) hold the leaves of at least every record up to upto (the snapshot's seq),
     * from what the store kept of them, and keep t (borrowed until close) to persist it. */
    dpb_status (*read_records)(ledger_store *s, uint64_t from, uint64_t to, store_record_fn fn,
                               void *ctx, dpb_error *err);
    dpb_status (*tree_open)(ledger_store *s, dpb_tlog *t, uint64_t upto, dpb_error *err);
} store_ops;

struct ledger_store {
    const store_ops *ops;
    void *impl;
};

/* The file store in DIR (created if missing; DIR/snapshot.tmp must be free for a file). */
dpb_status store_file_open(const char *dir, const dpb_fs *fs, ledger_store **out, dpb_error *err);

typedef struct {
    unsigned pool;                 /* connections at most (0: 4); one of them syncs */
    unsigned connect_timeout_s;    /* per connection attempt (0: 5) */
    unsigned statement_timeout_ms; /* per statement (0: 10000) */
} store_pg_options;

/* The PostgreSQL store at url ("postgresql://..." or "postgres://...", libpq's syntax):
 * connects, applies the schema migrations (store_pg_migrate), and fails with
 * DPB_EUNAVAILABLE (the database cannot be reached; err says why) or DPB_ECORRUPT (the
 * schema is newer than this version knows). */
dpb_status store_pg_open(const char *url, const store_pg_options *o, ledger_store **out,
                         dpb_error *err);

/* Apply the schema migrations this version knows, each once, under an advisory lock so that
 * any number of replicas starting at once apply each exactly once; *from, *to: the schema
 * version found and left (may be NULL). */
dpb_status store_pg_migrate(const char *url, const store_pg_options *o, int *from, int *to,
                            dpb_error *err);

/* conninfo (a url, key/value pairs, or anything else, e.g. a data directory) as it may be
 * shown: every password and sslpassword, in any spelling libpq reads and in any a person may
 * have meant, replaced by *** (store_pg.c says how), into out (cap bytes, NUL-terminated,
 * cut short if need be). The one way a connection string reaches a log, an error or an
 * answer. */
void store_pg_redact(const char *conninfo, char *out, size_t cap);

/* Replace in text (in place) every occurrence of conninfo's secrets, and of the pieces libpq
 * would make of them, by *** (a message of libpq's or another that may quote them). */
void store_pg_scrub(char *text, const char *conninfo);

/* 1 if s names a PostgreSQL url (what --ledger-url takes). */
int store_is_pg_url(const char *s);

/* What the store last saw (store_health), without a lock or an exchange. */
static inline void store_get_health(const ledger_store *s, store_health *h)
{
    h->answering = 1;
    h->refusing = 0;
    h->silent_s = 0.0;
    if (s->ops->health != NULL)
        s->ops->health(s, h);
}

/* The newest snapshot (absent: DPB_OK, *data NULL, *seq 0; *data malloc'ed, the caller's). */
static inline dpb_status store_load_snapshot(ledger_store *s, uint64_t *seq, void **data,
                                             size_t *len, dpb_error *err)
{
    return s->ops->load_snapshot(s, seq, data, len, err);
}

/* Recovery: fn for every record with seq > after_seq, covered (may be NULL) for those the
 * snapshot claims to hold (the file store checks them, wal_open_ex); *next_seq: the seq the next
 * append gets. */
static inline dpb_status store_replay(ledger_store *s, uint64_t after_seq, store_record_fn fn,
                                      store_record_fn covered, void *ctx, uint64_t *next_seq,
                                      dpb_error *err)
{
    return s->ops->replay(s, after_seq, fn, covered, ctx, next_seq, err);
}

/* Append one record (pending until synced); *seq: its seq. DPB_EIO: sticky failure (file);
 * DPB_ENOMEM, DPB_EINVAL as wal_append. */
static inline dpb_status store_append(ledger_store *s, uint8_t type, const void *payload,
                                      size_t len, uint64_t *seq)
{
    return s->ops->append(s, type, payload, len, seq);
}

/* Group commit: every record up to upto durable (see the top for failures). */
static inline dpb_status store_sync(ledger_store *s, uint64_t upto)
{
    return s->ops->sync(s, upto);
}

/* A shared store: call fn for every record other replicas made durable after after_seq (the
 * caller's last applied seq, with nothing pending), in order; *last_seq: the last one applied
 * (after_seq if none), and the next append gets *last_seq + 1. The file store: nothing to do
 * (*last_seq = after_seq). DPB_EUNAVAILABLE when the database cannot be reached. */
static inline dpb_status store_catch_up(ledger_store *s, uint64_t after_seq, store_record_fn fn,
                                        void *ctx, uint64_t *last_seq, dpb_error *err)
{
    return s->ops->catch_up(s, after_seq, fn, ctx, last_seq, err);
}

/* Keep a snapshot of the state as of seq (durable on DPB_OK); the file store then cuts its
 * log (wal_truncate_upto), a shared store keeps the log's records. */
static inline dpb_status store_snapshot(ledger_store *s, uint64_t seq, const void *data, size_t len,
                                        dpb_error *err)
{
    return s->ops->snapshot(s, seq, data, len, err);
}

static inline uint64_t store_durable_seq(const ledger_store *s)
{
    return s->ops->durable_seq(s);
}

/* 1 after a sticky failure (file store); a shared store is never failed for good. */
static inline int store_failed(const ledger_store *s)
{
    return s->ops->failed(s);
}

static inline dpb_status store_error(ledger_store *s, dpb_error *err)
{
    return s->ops->error(s, err);
}

static inline void store_abandon(ledger_store *s, const char *why)
{
    s->ops->abandon(s, why);
}

static inline uint64_t store_size_bytes(const ledger_store *s)
{
    return s->ops->size_bytes(s);
}

static inline void store_sync_stats(ledger_store *s, uint64_t *count, double *seconds,
                                    uint64_t *hist)
{
    s->ops->sync_stats(s, count, seconds, hist);
}

static inline int store_empty(ledger_store *s)
{
    return s->ops->empty(s);
}

static inline int store_shared(const ledger_store *s)
{
    return s->ops->shared;
}

/* Records from..to (seqs, inclusive) to fn, in order (store_ops.read_records). */
static inline dpb_status store_read_records(ledger_store *s, uint64_t from, uint64_t to,
                                            store_record_fn fn, void *ctx, dpb_error *err)
{
    return s->ops->read_records(s, from, to, fn, ctx, err);
}

/* The default tree_open: push the leaves of the records tlog_leaves(t) + 1 .. upto, read from
 * the store (every one of them: a store that keeps no hashes recomputes them). lost_ok: a
 * store holding no record at all up to upto (a ledger copied into it as one snapshot,
 * ledger_copy_to) gets LOST leaves for them (tlog.h) instead of DPB_ENOTFOUND. */
dpb_status store_tree_fill(ledger_store *s, dpb_tlog *t, uint64_t upto, int lost_ok,
                           dpb_error *err);

/* Recover the tree (store_ops.tree_open) before the replay of the records after upto. */
static inline dpb_status store_tree_open(ledger_store *s, dpb_tlog *t, uint64_t upto,
                                         dpb_error *err)
{
    if (s->ops->tree_open != NULL)
        return s->ops->tree_open(s, t, upto, err);
    return store_tree_fill(s, t, upto, 1, err);
}

static inline void store_close(ledger_store *s)
{
    if (s != NULL)
        s->ops->close(s);
}

#endif
