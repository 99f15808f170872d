/*
 * store_file.c - the file store (store.h): the embedded ledger's log and snapshot in one data
 * directory, DIR/wal.log (wal.h) and DIR/snapshot (snapshot.h), owned by one process.
 *
 * A thin wrapper: the wal's group commit, sticky failure and recovery rules are the store's.
 * Nobody else appends to the log, so there is never anything to catch up with.
 *
 * The log's Merkle tree (store_tree.h): records cut from the log are archived, the tree's
 * nodes kept in DIR/tree.nodes and the snapshot's digest in DIR/tree.snap.
 *
 * May call: wal.c, snapshot.c, fs.c, store_tree.c. Called by the ledger through store.h.
 */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "snapshot.h"
#include "store_tree.h"
#include "wal.h"

typedef struct {
    char *dir;
    const dpb_fs *fs;
    wal *w; /* NULL until store_replay opened it */
    ftree tree;
} file_store;

static file_store *fst(const ledger_store *s)
{
    return s->impl;
}

static dpb_status f_load_snapshot(ledger_store *s, uint64_t *seq, void **data, size_t *len,
                                  dpb_error *err)
{
    ftree *ft = &fst(s)->tree;
    ftree_snapshot_begin(ft); /* its digest, in the same pass as its checksum */
    dpb_status st =
        snapshot_read_each(fst(s)->dir, fst(s)->fs, seq, data, len, ftree_snapshot_bytes, ft, err);
    if (st == DPB_OK && *data != NULL) {
        st = ftree_check_snapshot(ft, *seq, err);
        if (st != DPB_OK) {
            free(*data);
            *data = NULL;
        }
    }
    return st;
}

static dpb_status f_replay(ledger_store *s, uint64_t after_seq, store_record_fn fn,
                           store_record_fn covered, void *ctx, uint64_t *next_seq, dpb_error *err)
{
    file_store *f = fst(s);
    if (f->w != NULL)
        return dpb_fail(err, DPB_EINVAL, NULL, "the file store's log is open already");
    dpb_status st = wal_open_ex(f->dir, f->fs, after_seq, fn, covered, ctx, &f->w, next_seq, err);
    if (st == DPB_OK) {
        char *a = dpb_fs_join_path(f->dir, "archive");
        st = a != NULL ? wal_set_archive(f->w, a) : DPB_ENOMEM;
        free(a);
        if (st != DPB_OK)
            st = dpb_fail(err, st, NULL, "out of memory");
    }
    return st;
}

static dpb_status f_append(ledger_store *s, uint8_t type, const void *payload, size_t len,
                           uint64_t *seq)
{
    return wal_append(fst(s)->w, type, payload, len, seq);
}

static dpb_status f_sync(ledger_store *s, uint64_t upto)
{
    dpb_status st = wal_sync(fst(s)->w, upto);
    if (st == DPB_OK) /* not fsynced: the log is durable, and the tree is made again from it */
        (void)ftree_persist(&fst(s)->tree, wal_durable_seq(fst(s)->w), 0, NULL);
    return st;
}

static dpb_status f_catch_up(ledger_store *s, uint64_t after_seq, store_record_fn fn, void *ctx,
                             uint64_t *last_seq, dpb_error *err)
{
    (void)s;
    (void)fn;
    (void)ctx;
    (void)err;
    *last_seq = after_seq; /* the log is this process's alone */
    return DPB_OK;
}

static dpb_status f_snapshot(ledger_store *s, uint64_t seq, const void *data, size_t len,
                             dpb_error *err)
{
    file_store *f = fst(s);
    /* the tree's nodes durable before the log is cut; the snapshot's digest before it is
     * written (docs/TRANSPARENCY.md) */
    dpb_status st = ftree_persist(&f->tree, seq, 1, err);
    if (st == DPB_OK)
        st = ftree_note_snapshot(&f->tree, seq, data, len, err);
    if (st == DPB_OK)
        st = snapshot_write(f->dir, f->fs, seq, data, len, err);
    if (st == DPB_OK && f->w != NULL)
        st = wal_truncate_upto(f->w, seq);
    return st;
}

static uint64_t f_durable_seq(const ledger_store *s)
{
    return fst(s)->w ? wal_durable_seq(fst(s)->w) : 0;
}

static int f_failed(const ledger_store *s)
{
    return fst(s)->w != NULL && wal_failed(fst(s)->w);
}

static dpb_status f_error(ledger_store *s, dpb_error *err)
{
    if (fst(s)->w == NULL) {
        dpb_error_clear(err);
        return DPB_OK;
    }
    return wal_error(fst(s)->w, err);
}

static void f_abandon(ledger_store *s, const char *why)
{
    if (fst(s)->w != NULL)
        wal_abandon(fst(s)->w, why);
}

static uint64_t f_size_bytes(const ledger_store *s)
{
    return fst(s)->w ? wal_size_bytes(fst(s)->w) : 0;
}

static void f_sync_stats(ledger_store *s, uint64_t *count, double *seconds, uint64_t *hist)
{
    if (fst(s)->w != NULL)
        wal_sync_stats(fst(s)->w, count, seconds, hist);
}

/* No snapshot and no record in the log (an absent or empty wal.log). */
static int f_empty(ledger_store *s)
{
    file_store *f = fst(s);
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/snapshot", f->dir);
    if (lstat(path, &sb) == 0)
        return 0;
    if (f->w != NULL)
        return wal_size_bytes(f->w) == 0 && wal_durable_seq(f->w) == 0;
    snprintf(path, sizeof path, "%s/wal.log", f->dir);
    return lstat(path, &sb) != 0 || sb.st_size == 0;
}

static dpb_status f_read_records(ledger_store *s, uint64_t from, uint64_t to, store_record_fn fn,
                                 void *ctx, dpb_error *err)
{
    return ftree_read_records(&fst(s)->tree, from, to, fn, ctx, err);
}

static dpb_status f_tree_open(ledger_store *s, dpb_tlog *t, uint64_t upto, dpb_error *err)
{
    return ftree_open(&fst(s)->tree, s, t, upto, err);
}

static void f_close(ledger_store *s)
{
    file_store *f = fst(s);
    wal_close(f->w);
    ftree_close(&f->tree);
    free(f->dir);
    free(f);
    free(s);
}

static const store_ops FILE_OPS = {
    .kind = "file",
    .shared = 0,
    .load_snapshot = f_load_snapshot,
    .replay = f_replay,
    .append = f_append,
    .sync = f_sync,
    .catch_up = f_catch_up,
    .snapshot = f_snapshot,
    .durable_seq = f_durable_seq,
    .failed = f_failed,
    .error = f_error,
    .abandon = f_abandon,
    .size_bytes = f_size_bytes,
    .sync_stats = f_sync_stats,
    .empty = f_empty,
    .close = f_close,
    .read_records = f_read_records,
    .tree_open = f_tree_open,
};

dpb_status store_file_open(const char *dir, const dpb_fs *fs, ledger_store **out, dpb_error *err)
{
    *out = NULL;
    if (dir == NULL)
        return dpb_fail(err, DPB_EINVAL, "data_dir", "no data directory given");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return dpb_fail(err, DPB_EIO, "data_dir", "cannot create the data directory %s: %s", dir,
                        strerror(errno));
    /* snapshot.tmp must be free for a file: else no snapshot could ever be written and the
     * log would grow without bound (a leftover regular file is simply overwritten) */
    struct stat tsb;
    char tmp_path[4096];
    snprintf(tmp_path, sizeof tmp_path, "%s/snapshot.tmp", dir);
    if (lstat(tmp_path, &tsb) == 0 && !S_ISREG(tsb.st_mode))
        return dpb_fail(err, DPB_EIO, "data_dir",
                        "%s is not a regular file (a directory or link is where the daemon "
                        "writes its snapshots): remove it",
                        tmp_path);
    ledger_store *s = calloc(1, sizeof *s);
    file_store *f = calloc(1, sizeof *f);
    char *d = malloc(strlen(dir) + 1);
    if (s == NULL || f == NULL || d == NULL) {
        free(s);
        free(f);
        free(d);
        return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
    }
    memcpy(d, dir, strlen(dir) + 1);
    f->dir = d;
    f->fs = fs ? fs : dpb_fs_posix();
    ftree_init(&f->tree, f->dir, f->fs);
    s->ops = &FILE_OPS;
    s->impl = f;
    *out = s;
    return DPB_OK;
}
