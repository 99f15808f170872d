/*
 * wal.h - the ledger's write-ahead log: one append-only file DIR/wal.log of checksummed,
 * sequence-numbered records, made durable by group commit (docs/ARCHITECTURE.md, "The write-ahead
 * log").
 *
 * Record on disk (little-endian, no padding, no file header):
 *     u32 len | u32 crc32c(seq..payload) | u64 seq | u8 type | payload[len]
 * The CRC (crc32c.h) covers the 9 bytes of seq and type and the payload. seq increases by
 * exactly 1 per record. The log's invariants, states and recovery rules are written at
 * the top of wal.c.
 *
 * Life cycle: wal_open (recovers and replays) -> wal_append / wal_sync / wal_truncate_upto
 * from any number of threads -> wal_close. After an I/O failure the wal is "failed" for
 * good: the caller turns the ledger read-only and reopens (restarts) to recover.
 */
#ifndef DPB_LEDGER_WAL_H
#define DPB_LEDGER_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"
#include "fs.h"

/* Size of a record header on disk. */
#define WAL_HEADER_BYTES 17u
/* Largest payload wal_append accepts; a longer length field on disk is damage. */
#define WAL_MAX_PAYLOAD (64u * 1024u * 1024u)

typedef struct wal wal;

/* Called by wal_open once per record with seq > after_seq, in log order. payload is
 * borrowed (valid only during the call; never NULL, even when len == 0). A non-zero return
 * stops recovery: wal_open then fails with DPB_ECORRUPT naming the record's offset. */
typedef int (*wal_replay_fn)(void *ctx, uint64_t seq, uint8_t type, const void *payload,
                             size_t len);

/* Open or create DIR/wal.log (DIR must exist) and replay, in order, every record with
 * seq > after_seq by calling fn (may be NULL: check only). after_seq is the seq the
 * caller's snapshot covers (0: none).
 *
 * Recovery rules (details at the top of wal.c):
 *  - A torn tail (an incomplete last record, or a bad CRC / bad length / non-consecutive
 *    seq with no valid record after it) is truncated away and the truncation fsynced.
 *  - Damage before the tail (a bad record followed later by a valid one) returns
 *    DPB_ECORRUPT with err->detail naming the file path and byte offset; the file is left
 *    as it is.
 *  - A log whose first record has seq > after_seq + 1 is missing records the snapshot
 *    does not cover: DPB_ECORRUPT (the file is left as it is).
 *  - Records with seq <= after_seq are skipped (covered by the snapshot) but still checked.
 *    If the log is not empty and its last record is < after_seq (the snapshot claims
 *    records the log does not hold), DPB_ECORRUPT naming the file and offset: the log is
 *    never cut on the strength of the snapshot's number.
 *  - A leftover DIR/wal.log.tmp (a crashed wal_truncate_upto) is removed.
 * On any error fn may already have been called for a prefix of the records: the caller
 * must throw away what it built. Records are replayed before the tail is truncated.
 *
 * Returns DPB_OK with *out (owned: wal_close it) and *next_seq (the seq the next append
 * gets: after_seq + 1 if the log is empty or all records are <= after_seq); DPB_EINVAL
 * (NULL arguments), DPB_ENOMEM, DPB_EIO (open/read/truncate/fsync failed, errno in the
 * detail) or DPB_ECORRUPT. err may be NULL. fs is borrowed and must outlive the wal. */
dpb_status wal_open(const char *dir, const dpb_fs *fs, uint64_t after_seq, wal_replay_fn fn,
                    void *ctx, wal **out, uint64_t *next_seq, dpb_error *err);

/* wal_open, and covered (may be NULL) is called like fn for every record with seq <=
 * after_seq, the records the caller's snapshot claims to hold: a non-zero return (the
 * snapshot does not hold it) fails with DPB_ECORRUPT naming the record's offset. */
dpb_status wal_open_ex(const char *dir, const dpb_fs *fs, uint64_t after_seq, wal_replay_fn fn,
                       wal_replay_fn covered, void *ctx, wal **out, uint64_t *next_seq,
                       dpb_error *err);

/* Append one record (one write of the whole record, retrying short writes) and return its
 * seq in *seq (may be NULL). Not durable until wal_sync. Thread-safe (internal mutex).
 * payload may be NULL when len == 0.
 * Returns DPB_OK; DPB_EINVAL (len > WAL_MAX_PAYLOAD, or payload NULL with len > 0: the wal stays
 * usable); DPB_ENOMEM (no buffer for the record: nothing written, the wal stays usable);
 * DPB_EIO if the wal is failed or the write failed. A failed write makes the wal failed
 * (sticky: every later append/sync/truncate returns DPB_EIO at once) and the file is cut
 * back with ftruncate to the last durable offset, so no partial or unacknowledged record
 * remains for a later append to follow; if that ftruncate fails too, the wal is failed
 * anyway and recovery drops the partial record as a torn tail. */
dpb_status wal_append(wal *w, uint8_t type, const void *payload, size_t len, uint64_t *seq);

/* Group commit: return once every record with seq <= upto is durable (fdatasync). upto
 * beyond the last appended record means "everything appended so far" (UINT64_MAX is the
 * idiom). Many threads may call it concurrently: one of them syncs everything appended so
 * far (without holding the mutex, so appends go on) while the others wait on a condition
 * variable; a waiter whose seq got covered returns without syncing again.
 * Returns DPB_OK, or DPB_EIO if the wal is failed or the sync failed (sticky; the file is
 * cut back to the last durable offset as for a failed append). */
dpb_status wal_sync(wal *w, uint64_t upto);

/* After a snapshot covering every record up to `upto` was made durable: start the log
 * afresh. Writes DIR/wal.log.tmp holding only the records > upto (copied from the log),
 * fsyncs it, renames it over wal.log and fsyncs DIR; the copied records are durable
 * afterwards. Thread-safe with appends and syncs (holds the mutex; waits for a sync in
 * progress). Returns DPB_OK; DPB_EINVAL if upto >= the next seq (the snapshot cannot cover
 * records not yet appended); DPB_ENOMEM; DPB_EIO if the wal is failed or any step failed
 * (the wal becomes failed: the disk is not trusted any more; wal.log.tmp is removed if it
 * can be and wal.log is either the old or the new log, both valid with the snapshot). */
dpb_status wal_truncate_upto(wal *w, uint64_t upto);

/* From now on wal_truncate_upto keeps the records it cuts: before the log is cut they are
 * written, as they were in the log (same framing), to the segment FOLDER/<first seq, 20
 * digits>.seg, fsynced and renamed into place (FOLDER must exist). DPB_OK, DPB_ENOMEM. */
dpb_status wal_set_archive(wal *w, const char *folder);

/* Read the records of a log file or archive segment at path (no wal needed; appends may go
 * on): fn for every one with from <= seq <= to, in file order, CRC-checked; stops at the first
 * record that does not read whole (the end of what is there). *last: the seq of the last
 * record read. DPB_OK, DPB_ENOTFOUND (no such file), DPB_EIO, DPB_ECANCELLED (fn returned
 * non-zero). */
dpb_status wal_read_file(const dpb_fs *fs, const char *path, uint64_t from, uint64_t to,
                         wal_replay_fn fn, void *ctx, uint64_t *last, dpb_error *err);

/* Bytes of complete records in the log file now (grows with appends, shrinks with
 * wal_truncate_upto): what the caller compares with its snapshot threshold. Lock-free. */
uint64_t wal_size_bytes(const wal *w);

/* fdatasync latency: how many, their total seconds, and a histogram whose bucket b counts
 * the syncs that took at most WAL_SYNC_BUCKETS[b] seconds (and more than the one before). */
/* 0.1 ms .. 5 s, with ten steps between 1 and 100 ms where a slowing disk shows first */
#define WAL_SYNC_NBUCKETS 21
extern const double WAL_SYNC_BUCKETS[WAL_SYNC_NBUCKETS];
void wal_sync_stats(wal *w, uint64_t *count, double *seconds, uint64_t hist[WAL_SYNC_NBUCKETS]);

/* Those three figures, kept by the log and by the PostgreSQL store (its commit latency),
 * each under its own lock: the caller of both functions below holds it. */
typedef struct {
    uint64_t count;
    double seconds;
    uint64_t hist[WAL_SYNC_NBUCKETS];
} wal_sync_tally;

/* Count one sync that took dt seconds: count + 1, seconds + dt, and its bucket + 1 (the
 * first b with dt <= WAL_SYNC_BUCKETS[b]). */
void wal_sync_tally_add(wal_sync_tally *t, double dt);

/* Copy t out: *count, *seconds and hist[0..WAL_SYNC_NBUCKETS) (caller-owned). */
void wal_sync_tally_get(const wal_sync_tally *t, uint64_t *count, double *seconds,
                        uint64_t hist[WAL_SYNC_NBUCKETS]);

/* Give up on every record not durable yet, for a caller that appended a record it then could
 * not apply (out of memory): the wal becomes failed as after an I/O error (why names the step,
 * reported with ENOMEM by wal_error) and the file is cut back to the last durable record. */
void wal_abandon(wal *w, const char *why);

/* The highest seq known durable (I2): every record up to it survives a crash, and a failure
 * cuts the log back to exactly it. Only grows. Lock-free. */
uint64_t wal_durable_seq(const wal *w);

/* 1 if the wal is failed (sticky), else 0. Lock-free. */
int wal_failed(const wal *w);

/* Copy the first I/O failure's detail (file, operation, errno text) into err (which must
 * not be NULL): DPB_EIO and the detail if the wal is failed, else DPB_OK and an empty
 * detail. Returns err->status. Thread-safe. */
dpb_status wal_error(wal *w, dpb_error *err);

/* Close the log and free w (NULL is fine). If the wal is not failed and records were
 * appended since the last sync, makes a best-effort fdatasync first (a clean shutdown is
 * durable even if the caller forgot wal_sync; its failure cannot be reported: callers
 * that need to know call wal_sync first). No other call may be in progress or follow. */
void wal_close(wal *w);

#endif
