/*
 * store_tree.h - what the file store keeps for the log's Merkle tree (tlog.h,
 * docs/TRANSPARENCY.md), in its data directory DIR:
 *   DIR/archive/<seq>.seg  the records wal_truncate_upto cut, as they were in wal.log (wal.h)
 *   DIR/tree.nodes         the tree's kept nodes, 32 bytes each, in post-order (tlog.h): a
 *                          prefix of leaves, written after each sync, fsynced before the log
 *                          is cut; a torn end is cut back to whole leaves at start-up
 *   DIR/tree.snap          "DPBTSNP1", twice (u64 seq, SHA-256 of the snapshot's payload),
 *                          u32 crc32c: the digests of the snapshot and of the one before it
 *                          (written before a snapshot replaces the other), so a snapshot
 *                          changed on disk is refused even with its CRC recomputed
 * May call: wal.c, snapshot.c, fs.c, tlog.c, crc32c.c. Called by store_file.c.
 */
#ifndef DPB_LEDGER_STORE_TREE_H
#define DPB_LEDGER_STORE_TREE_H

#include <nettle/sha2.h>
#include <pthread.h>

#include "store.h"
#include "tlog.h"

typedef struct {
    const char *dir; /* borrowed: the store's */
    const dpb_fs *fs;
    pthread_mutex_t mu;
    dpb_tlog *t;        /* borrowed from tree_open on; NULL before */
    int fd;             /* DIR/tree.nodes, or -1 */
    uint64_t persisted; /* leaves whose nodes are in tree.nodes */
    int failed;         /* the last write failed (its leaves are written again next time) */
    int have_snap;      /* tree.snap read or written: snap_seq, snap_digest its newest slot */
    uint64_t snap_seq;
    tlog_hash snap_digest;
    /* the snapshot's SHA-256, computed as start-up reads it (ftree_snapshot_bytes) */
    struct sha256_ctx snap_sha;
} ftree;

void ftree_init(ftree *ft, const char *dir, const dpb_fs *fs);
void ftree_close(ftree *ft);

/* Records from..to of DIR/archive/ and DIR/wal.log to fn (store_ops.read_records). */
dpb_status ftree_read_records(ftree *ft, uint64_t from, uint64_t to, store_record_fn fn, void *ctx,
                              dpb_error *err);
/* store_ops.tree_open for the file store (before the log is opened). */
dpb_status ftree_open(ftree *ft, ledger_store *s, dpb_tlog *t, uint64_t upto, dpb_error *err);
/* Write the nodes of the leaves up to `leaves` (durable records) to tree.nodes; fsync it when
 * durable. DPB_OK, DPB_EIO (err filled). */
dpb_status ftree_persist(ftree *ft, uint64_t leaves, int durable, dpb_error *err);
/* The snapshot read at start-up, hashed as it is read: ftree_snapshot_begin, then
 * ftree_snapshot_bytes (snapshot_read_each's each, ctx the ftree) on every byte of its
 * payload in order, then ftree_check_snapshot with its seq, before the payload is parsed:
 * tree.snap read (DPB_ECORRUPT when damaged, or missing beside tree.nodes; written when
 * neither exists: the first start of this version); DPB_OK when tree.snap names the snapshot
 * (seq and the payload's SHA-256), else DPB_ECORRUPT. */
void ftree_snapshot_begin(ftree *ft);
void ftree_snapshot_bytes(void *ft, const void *bytes, size_t n);
dpb_status ftree_check_snapshot(ftree *ft, uint64_t seq, dpb_error *err);
/* Before a snapshot (seq, payload) replaces the current one: tree.snap names both. */
dpb_status ftree_note_snapshot(ftree *ft, uint64_t seq, const void *data, size_t len,
                               dpb_error *err);

#endif
