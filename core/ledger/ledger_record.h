/*
 * ledger_record.h - layer 3 of core/ledger: the log's records and the snapshot's payload,
 * encoded and replayed (the contract of ledger_record.c and ledger_snapfmt.c). Encoding
 * writes bytes only; replay decodes a record or a snapshot and applies it through
 * ledger_mem.h (layer 4), below it. Nothing here appends to the log, takes the lock or
 * settles a seq: the write transaction (ledger_txn.h) above does.
 *
 * Log records (the payload after wal.c's or store_pg.c's framing), little-endian:
 *   EVENT(idx u32, relation u8, encoded event; since LEDGER_FORMAT 6, when bit 7 of the
 *         relation byte (EVENT_PROFILED) is set, the event's stored profile (spend.h) follows
 *         the event, then its length u32: found from the end, the event not decoded)
 *   CLIENT(id, epsilon f64, delta f64, mode u8, relation u8, labels)
 *   ROUND(id, hash[16], policy u8, already_ran u8, event idx u32, n u32,
 *         n x (client id, admitted u8, reason u8, before f64, after f64))
 *   RESERVE(a ROUND's fields, expires_at u64: the admitted clients' budget held, owner: the
 *           key that reserved it, "" none; records before LEDGER_FORMAT 4 end before it)
 *   COMMIT(round id, commit hash[16], m u32, m x reported outcome index u32)
 *   RELEASE(round id, expired u8)
 *   NAME(name, encoded event)
 * Strings are u32 length + bytes. Snapshot: the whole state in one payload (LEDGER_FORMAT).
 *
 * Time (LEDGER_FORMAT 5): a record written since carries type | REC_TIMED and its payload
 * starts with u64 time (ms since the Unix epoch, the wall clock when it was made, max with
 * the record before it: monotone in seq order; ledger_series.c), then the payload above.
 * Records of type 1..7 (written before) have no time: replayed the same, their time unknown
 * (0). The time is in the bytes every store keeps (the file store's and PostgreSQL's alike)
 * and in what a record's checksum or hash covers. The snapshot (format 5) adds, after the
 * named events, its own time, the last record's, every round's two times and the series;
 * format 6 then the events' profiles and format 7 the stuck clients (ledger_snapfmt.c).
 */
#ifndef DPB_LEDGER_RECORD_H
#define DPB_LEDGER_RECORD_H

#include "ledger_int.h"

enum {
    REC_EVENT = 1,
    REC_CLIENT = 2,
    REC_ROUND = 3,
    REC_RESERVE = 4,
    REC_COMMIT = 5,
    REC_RELEASE = 6,
    REC_NAME = 7
};
/* The flag of a timed record's type (LEDGER_FORMAT 5), and its time's 8 bytes. */
#define REC_TIMED 0x80u
static inline void lg_time_prefix(unsigned char b[8], uint64_t t)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(t >> (8 * i));
}

/* Bit 7 of an EVENT record's relation byte: a stored profile follows the event. */
#define EVENT_PROFILED 0x80u

/* ---- ledger_record.c: encoding (each appends one record's payload to w; w->oom on
 * failure, the caller checks it before logging) ------------------------------------------- */

/* CLIENT (also the head of a client in the snapshot). */
void lg_client_record(bw *w, const char *id, double eps, double delta, int mode, int rel,
                      const char *labels);
/* EVENT: the interned event idx. A lock is held. */
void lg_event_record(bw *w, const ledger *l, uint32_t idx);
/* ROUND, or RESERVE once the caller appends expires_at: out[0..n) borrowed. */
void lg_round_record(bw *w, const char *id, const unsigned char hash[16], int policy,
                     int already_ran, uint32_t ev, const lout *out, uint32_t n);
/* COMMIT of round id: the reported outcome indices idx[0..m). */
void lg_commit_record(bw *w, const char *id, const unsigned char hash[16], const uint32_t *idx,
                      size_t m);
/* RELEASE of round id (expired: by the ledger, its time up). */
void lg_release_record(bw *w, const char *id, int expired);
/* NAME: the named event's encoded bytes eb[0..n). */
void lg_name_record(bw *w, const char *name, const unsigned char *eb, size_t n);

/* ---- ledger_record.c: replay ------------------------------------------------------------ */

/* store.h's replay callback (ctx: the ledger): the record seq applied to the state, the
 * clients it touches marked dirty (lg_after_apply recomputes them). 0, or -1 when it does not
 * decode or apply (a damaged log, or one from a newer version). Write lock (or a ledger being
 * opened). */
int lg_replay_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len);
/* store.h's callback for a record the snapshot claims to hold (seq <= its seq): 0 when the
 * snapshot is seen to hold it (clients: checked after the scan, l->cover_bad), else -1. */
int lg_covered_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len);
/* The refusal of a record whose hash differs from its leaf in the log's tree (l->tree_bad):
 * DPB_ECORRUPT naming its seq and kind. */
dpb_status lg_tree_refusal(ledger *l, dpb_error *err);
/* After records were replayed or caught up: all interned events are logged, the dirty
 * clients' spends recomputed, the counters summed again. Write lock. */
void lg_after_apply(ledger *l);
/* One outcome read from a record or a snapshot into *o: its id points at the stored client's
 * (or is an owned copy); with_reported: the snapshot's reported flag follows. */
void lg_read_outcome(ledger *l, br *r, lout *o, int with_reported);
/* Restore a named event (bytes checked to decode) whose record is seq. 0, or -1 (a name
 * already stored, bytes that do not decode, out of memory). Write lock. */
int lg_restore_name(ledger *l, const char *name, const unsigned char *b, size_t n, uint64_t seq);

/* ---- ledger_snapfmt.c: the snapshot's payload ------------------------------------------- */

/* The whole state as one payload, appended to w. DPB_OK, DPB_ENOMEM. A lock is held. */
dpb_status lg_serialize(ledger *l, bw *w);
/* Load a snapshot's payload into an empty ledger being opened. 0, or -1 with r->at where it
 * went wrong. */
int lg_load_snapshot(ledger *l, br *r);

#endif
