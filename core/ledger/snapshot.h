/*
 * snapshot.h - the ledger's snapshot: one file DIR/snapshot holding the whole ledger state
 * as of a log seq, so that recovery replays only the log records after it.
 *
 * File, format 2 (little-endian, 32-byte header then the payload):
 *     magic "DPBSNAP2" | u32 format version (2) | u64 seq | u64 len | u32 crc | payload[len]
 * crc = crc32c(header bytes 0..27, then the payload): every byte of the file but the
 * checksum itself is covered, the seq included (a damaged seq would make recovery skip or
 * replay twice the log records around it). Format 1 (still read, never written) has magic
 * "DPBSNAP1", version 1 and crc = crc32c(payload) only: its seq is unchecked, so the
 * ledger checks it against the log (wal_open refuses a snapshot claiming records the log
 * lacks, or a log with a gap after the snapshot).
 * The file's size must be exactly 32 + len. The payload's meaning belongs to the ledger.
 * Written as DIR/snapshot.tmp -> write -> fsync -> close -> rename -> fsync(DIR), so
 * DIR/snapshot is always either the old or the new complete snapshot.
 */
#ifndef DPB_LEDGER_SNAPSHOT_H
#define DPB_LEDGER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"
#include "fs.h"

#define SNAPSHOT_HEADER_BYTES 32u
#define SNAPSHOT_VERSION 2u

/* Atomically replace DIR/snapshot with one holding (seq, data[0..len)) (data borrowed; may
 * be NULL when len == 0; DIR must exist). Durable when it returns DPB_OK: the caller may
 * then wal_truncate_upto(seq). Returns DPB_OK, DPB_EINVAL (NULL dir/fs, or data NULL with
 * len > 0) or DPB_EIO (the detail names the file, the step and errno; the old snapshot is
 * untouched and snapshot.tmp is removed if it can be). err may be NULL. */
dpb_status snapshot_write(const char *dir, const dpb_fs *fs, uint64_t seq, const void *data,
                          size_t len, dpb_error *err);

/* Read DIR/snapshot (DIR/snapshot.tmp, a crashed write, is ignored). Absent -> DPB_OK with
 * *data NULL, *len 0, *seq 0. Present -> DPB_OK with *seq, *len and *data, malloc'ed and
 * owned by the caller (free it; non-NULL even when *len == 0). Bad magic, version, length
 * (not exactly the file's size minus the header) or CRC -> DPB_ECORRUPT naming the file,
 * the byte offset of the field and what is wrong; read errors -> DPB_EIO; DPB_ENOMEM; DPB_EINVAL
 * for NULL arguments. On error *data is NULL. err may be NULL. */
dpb_status snapshot_read(const char *dir, const dpb_fs *fs, uint64_t *seq, void **data, size_t *len,
                         dpb_error *err);

/* snapshot_read, giving each(each_ctx, bytes, n) every byte of the payload in order, in
 * pieces, as it is read and checksummed (one pass over the file: e.g. a digest of the
 * payload computed while it is in the cache). each sees the bytes before the checksum is
 * judged: what it computes is meaningful only when DPB_OK is returned. */
typedef void (*snapshot_bytes_fn)(void *ctx, const void *bytes, size_t n);
dpb_status snapshot_read_each(const char *dir, const dpb_fs *fs, uint64_t *seq, void **data,
                              size_t *len, snapshot_bytes_fn each, void *each_ctx, dpb_error *err);

#endif
