/*
 * store_tree.c - the file store's part of the log's Merkle tree (store_tree.h): the archive
 * of cut records read back, DIR/tree.nodes (the kept nodes, so start-up never rehashes the
 * log) and DIR/tree.snap (the snapshot's digest); and store_tree_fill, the default
 * tree_open of a store that keeps no hashes.
 *
 * May call: wal.c, fs.c, tlog.c, crc32c.c. Called by store_file.c (and store.h's inline).
 */
#include "store_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "wal.h"

#define NODES_NAME "tree.nodes"
#define SNAP_NAME "tree.snap"
#define SNAP_MAGIC "DPBTSNP1"
#define SNAP_BYTES (8u + 2u * (8u + TLOG_HASH_BYTES) + 4u)
/* tree.nodes is read this many leaves at a time (their nodes: about 1 MiB) */
#define PIECE_LEAVES ((uint64_t)1 << 14)

/* ---- the default: hash every record ------------------------------------------------------ */

typedef struct {
    dpb_tlog *t;
    dpb_status st;
} fill_ctx;

static int fill_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    fill_ctx *c = ctx;
    c->st = tlog_push_record(c->t, seq, type, payload, len);
    return c->st != DPB_OK;
}

dpb_status store_tree_fill(ledger_store *s, dpb_tlog *t, uint64_t upto, int lost_ok, dpb_error *err)
{
    uint64_t have = tlog_leaves(t);
    if (upto <= have)
        return DPB_OK;
    fill_ctx c = {t, DPB_OK};
    dpb_status st = store_read_records(s, have + 1, upto, fill_fn, &c, err);
    if (st == DPB_ENOTFOUND && lost_ok && have == 0 && tlog_leaves(t) == 0) {
        dpb_error_clear(err); /* a copied ledger: its records before the snapshot are elsewhere */
        for (uint64_t seq = 1; seq <= upto; seq++)
            if (tlog_push_record(t, seq, TLOG_TYPE_LOST, NULL, 0) != DPB_OK)
                return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory building the log's tree");
        st = DPB_OK;
    }
    if (st == DPB_OK && c.st != DPB_OK)
        st = dpb_fail(err, c.st, NULL, "out of memory building the log's tree");
    tlog_commit(t, upto);
    return st;
}

/* ---- reading the archive and the log ----------------------------------------------------- */

void ftree_init(ftree *ft, const char *dir, const dpb_fs *fs)
{
    memset(ft, 0, sizeof *ft);
    ft->dir = dir;
    ft->fs = fs;
    ft->fd = -1;
    pthread_mutex_init(&ft->mu, NULL);
}

void ftree_close(ftree *ft)
{
    if (ft->fd >= 0)
        (void)ft->fs->close(ft->fs->ctx, ft->fd);
    ft->fd = -1;
    pthread_mutex_destroy(&ft->mu);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The first seqs of DIR/archive's segments, sorted (*n of them; *out malloc'ed or NULL). */
static dpb_status list_segments(const char *dir, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/archive", dir);
    DIR *d = opendir(path);
    if (d == NULL)
        return errno == ENOENT ? DPB_OK : DPB_EIO;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strlen(e->d_name) != 24 || strcmp(e->d_name + 20, ".seg") != 0)
            continue;
        uint64_t s0 = strtoull(e->d_name, &end, 10);
        if (end != e->d_name + 20)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            uint64_t *nv = realloc(*out, cap * sizeof *nv);
            if (nv == NULL) {
                closedir(d);
                return DPB_ENOMEM;
            }
            *out = nv;
        }
        (*out)[(*n)++] = s0;
    }
    closedir(d);
    if (*n > 1) /* (none: *out is still NULL) */
        qsort(*out, *n, sizeof **out, cmp_u64);
    return DPB_OK;
}

typedef struct {
    uint64_t next; /* the seq expected next */
    store_record_fn fn;
    void *ctx;
    int refused; /* fn returned non-zero */
} read_ctx;

static int read_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    read_ctx *c = ctx;
    if (seq != c->next)
        return seq < c->next ? 0 : 1; /* already given; a gap stops the file */
    if (c->fn(c->ctx, seq, type, payload, len) != 0) {
        c->refused = 1;
        return 1;
    }
    c->next++;
    return 0;
}

static dpb_status read_once(ftree *ft, uint64_t from, uint64_t to, read_ctx *c, dpb_error *err)
{
    uint64_t *seg;
    size_t nseg;
    dpb_status st = list_segments(ft->dir, &seg, &nseg);
    if (st != DPB_OK)
        return dpb_fail(err, st, NULL, "%s/archive cannot be listed", ft->dir);
    char path[4096];
    for (size_t i = 0; i < nseg && c->next <= to && st == DPB_OK; i++) {
        if (seg[i] > c->next || (i + 1 < nseg && seg[i + 1] <= c->next))
            continue; /* the segment holding c->next starts at or before it */
        snprintf(path, sizeof path, "%s/archive/%020" PRIu64 ".seg", ft->dir, seg[i]);
        uint64_t last;
        st = wal_read_file(ft->fs, path, c->next, to, read_fn, c, &last, err);
        if (st == DPB_ECANCELLED && !c->refused)
            st = DPB_OK;
    }
    free(seg);
    if (st == DPB_OK && c->next <= to) {
        snprintf(path, sizeof path, "%s/wal.log", ft->dir);
        uint64_t last;
        st = wal_read_file(ft->fs, path, c->next, to, read_fn, c, &last, err);
        if ((st == DPB_ECANCELLED && !c->refused) || st == DPB_ENOTFOUND)
            st = DPB_OK;
    }
    (void)from;
    return st;
}

dpb_status ftree_read_records(ftree *ft, uint64_t from, uint64_t to, store_record_fn fn, void *ctx,
                              dpb_error *err)
{
    read_ctx c = {from, fn, ctx, 0};
    dpb_status st = DPB_OK;
    /* twice: a truncation may move records from wal.log to a new segment meanwhile */
    for (int attempt = 0; attempt < 2 && c.next <= to && st == DPB_OK; attempt++)
        st = read_once(ft, from, to, &c, err);
    if (st == DPB_ECANCELLED)
        return dpb_fail(err, DPB_ECANCELLED, NULL, "stopped by the caller at seq %" PRIu64, c.next);
    if (st == DPB_OK && c.next <= to)
        return dpb_fail(err, DPB_ENOTFOUND, NULL,
                        "the log's record seq %" PRIu64
                        " is in neither %s/archive nor %s/wal.log (removed, or damaged there)",
                        c.next, ft->dir, ft->dir);
    return st;
}

/* ---- tree.nodes ---------------------------------------------------------------------------- */

static int path_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &sb) == 0;
}

/* The first seq in DIR/wal.log (0: none). */
static uint64_t first_logged(ftree *ft)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/wal.log", ft->dir);
    int fd = ft->fs->open(ft->fs->ctx, path, O_RDONLY, 0);
    if (fd < 0)
        return 0;
    unsigned char h[WAL_HEADER_BYTES];
    uint64_t s0 = 0;
    if (dpb_fs_pread_full(ft->fs, fd, h, sizeof h, 0) == (ssize_t)sizeof h)
        for (int i = 7; i >= 0; i--)
            s0 = s0 << 8 | h[8 + i];
    (void)ft->fs->close(ft->fs->ctx, fd);
    return s0;
}

dpb_status ftree_open(ftree *ft, ledger_store *s, dpb_tlog *t, uint64_t upto, dpb_error *err)
{
    char path[4096], apath[4096];
    snprintf(path, sizeof path, "%s/" NODES_NAME, ft->dir);
    snprintf(apath, sizeof apath, "%s/archive", ft->dir);
    /* an earlier version's data directory: records cut before this version are gone */
    int legacy = !path_exists(ft->dir, NODES_NAME) && !path_exists(ft->dir, "archive");
    if (mkdir(apath, 0700) != 0 && errno != EEXIST)
        return dpb_fs_io_fail(err, apath, "mkdir", errno);
    int fd = ft->fs->open(ft->fs->ctx, path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        return dpb_fs_io_fail(err, path, "open", errno);
    ft->fd = fd;
    ft->t = t;
    off_t size;
    if (ft->fs->fstat_size(ft->fs->ctx, fd, &size) != 0)
        return dpb_fs_io_fail(err, path, "fstat", errno);
    uint64_t nodes = (uint64_t)size / TLOG_HASH_BYTES, n = nodes / 2;
    while (n > 0 && TLOG_NODE_POS(n) > nodes) /* the whole leaves it holds */
        n--;
    while (TLOG_NODE_POS(n + 1) <= nodes)
        n++;
    if (n > 0) { /* in pieces of PIECE_LEAVES leaves, through one buffer kept in the cache;
                  * a piece from leaf a holds 2 k - popcount(a + k) + popcount(a) nodes */
        unsigned char *buf = malloc((size_t)(2 * PIECE_LEAVES + 64) * TLOG_HASH_BYTES);
        if (buf == NULL)
            return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory reading %s", path);
        dpb_status st = DPB_OK;
        for (uint64_t at = 0; at < n && st == DPB_OK;) {
            uint64_t k = n - at < PIECE_LEAVES ? n - at : PIECE_LEAVES;
            uint64_t a = TLOG_NODE_POS(at), b = TLOG_NODE_POS(at + k);
            size_t bytes = (size_t)(b - a) * TLOG_HASH_BYTES;
            ssize_t got = dpb_fs_pread_full(ft->fs, fd, buf, bytes, (off_t)(a * TLOG_HASH_BYTES));
            st = got == (ssize_t)bytes ? tlog_append_nodes(t, buf, k) : DPB_EIO;
            at += k;
        }
        free(buf);
        if (st != DPB_OK)
            return dpb_fail(err, st, NULL, "%s cannot be read", path);
    }
    if ((uint64_t)size != TLOG_NODE_POS(n) * TLOG_HASH_BYTES &&
        ft->fs->ftruncate(ft->fs->ctx, fd, (off_t)(TLOG_NODE_POS(n) * TLOG_HASH_BYTES)) != 0)
        return dpb_fs_io_fail(err, path, "ftruncate (a torn end)", errno);
    ft->persisted = n;
    if (legacy && upto > 0) {
        uint64_t s0 = first_logged(ft);
        uint64_t lost = s0 == 0 || s0 > upto ? upto : s0 - 1;
        for (uint64_t seq = 1; seq <= lost; seq++)
            if (tlog_push_record(t, seq, TLOG_TYPE_LOST, NULL, 0) != DPB_OK)
                return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory building the log's tree");
        tlog_commit(t, lost);
    }
    dpb_status st = store_tree_fill(s, t, upto, 0, err);
    if (st == DPB_ENOTFOUND && err != NULL) {
        char why[sizeof err->detail];
        snprintf(why, sizeof why, "%s", err->detail);
        dpb_error_clear(err);
        return dpb_fail(err, DPB_ECORRUPT, "data_dir",
                        "%s holds the tree of %" PRIu64 " records but the snapshot covers %" PRIu64
                        " and the records between are missing: %s; refusing to start",
                        path, n, upto, why);
    }
    if (st != DPB_OK)
        return st;
    return ftree_persist(ft, tlog_leaves(t), 1, err);
}

dpb_status ftree_persist(ftree *ft, uint64_t leaves, int durable, dpb_error *err)
{
    char path[4096];
    dpb_status st = DPB_OK;
    pthread_mutex_lock(&ft->mu);
    if (ft->t == NULL || ft->fd < 0)
        goto out;
    ft->failed = 0; /* after a failed write: the same offsets are written again */
    uint64_t have = tlog_leaves(ft->t);
    if (leaves > have)
        leaves = have;
    if (leaves > ft->persisted) {
        uint64_t a = TLOG_NODE_POS(ft->persisted), b = TLOG_NODE_POS(leaves);
        size_t bytes = (size_t)(b - a) * TLOG_HASH_BYTES;
        unsigned char *buf = malloc(bytes);
        if (buf == NULL) {
            st = dpb_fail(err, DPB_ENOMEM, NULL, "out of memory");
            goto out;
        }
        if (tlog_nodes(ft->t, ft->persisted, leaves, buf) != DPB_OK) { /* never: durable */
            free(buf);
            goto out;
        }
        size_t done = 0;
        while (done < bytes) {
            ssize_t k =
                pwrite(ft->fd, buf + done, bytes - done, (off_t)(a * TLOG_HASH_BYTES + done));
            if (k <= 0) {
                if (k < 0 && errno == EINTR)
                    continue;
                break;
            }
            done += (size_t)k;
        }
        free(buf);
        if (done < bytes) {
            ft->failed = 1;
            snprintf(path, sizeof path, "%s/" NODES_NAME, ft->dir);
            st = dpb_fs_io_fail(err, path, "write", errno ? errno : ENOSPC);
            goto out;
        }
        ft->persisted = leaves;
    }
    if (durable && ft->fs->fsync(ft->fs->ctx, ft->fd) != 0) {
        ft->failed = 1;
        snprintf(path, sizeof path, "%s/" NODES_NAME, ft->dir);
        st = dpb_fs_io_fail(err, path, "fsync", errno);
    }
out:
    pthread_mutex_unlock(&ft->mu);
    return st;
}

/* ---- tree.snap ----------------------------------------------------------------------------- */

static void digest_of(const void *data, size_t len, tlog_hash out)
{
    struct sha256_ctx c;
    sha256_init(&c);
    if (len > 0)
        sha256_update(&c, len, data);
    sha256_digest(&c, TLOG_HASH_BYTES, out);
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Write tree.snap naming (seq, d) and (pseq, pd): tmp, fsync, rename, fsync DIR. */
static dpb_status write_snap(ftree *ft, uint64_t seq, const tlog_hash d, uint64_t pseq,
                             const tlog_hash pd, dpb_error *err)
{
    unsigned char b[SNAP_BYTES];
    memcpy(b, SNAP_MAGIC, 8);
    put64(b + 8, seq);
    memcpy(b + 16, d, TLOG_HASH_BYTES);
    put64(b + 48, pseq);
    memcpy(b + 56, pd, TLOG_HASH_BYTES);
    uint32_t crc = dpb_crc32c(0, b, SNAP_BYTES - 4);
    for (int i = 0; i < 4; i++)
        b[SNAP_BYTES - 4 + i] = (unsigned char)(crc >> (8 * i));
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/" SNAP_NAME ".tmp", ft->dir);
    snprintf(path, sizeof path, "%s/" SNAP_NAME, ft->dir);
    int fd = ft->fs->open(ft->fs->ctx, tmp, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return dpb_fs_io_fail(err, tmp, "open (the snapshot's digest)", errno);
    if (dpb_fs_write_all(ft->fs, fd, b, sizeof b) != 0 || ft->fs->fsync(ft->fs->ctx, fd) != 0) {
        int e = errno;
        (void)ft->fs->close(ft->fs->ctx, fd);
        (void)ft->fs->unlink(ft->fs->ctx, tmp);
        return dpb_fs_io_fail(err, tmp, "write (the snapshot's digest)", e);
    }
    (void)ft->fs->close(ft->fs->ctx, fd);
    if (ft->fs->rename(ft->fs->ctx, tmp, path) != 0)
        return dpb_fs_io_fail(err, path, "rename (the snapshot's digest)", errno);
    if (dpb_fs_fsync_dir(ft->fs, ft->dir) != 0)
        return dpb_fs_io_fail(err, ft->dir, "fsync of the directory (the snapshot's digest)",
                              errno);
    ft->have_snap = 1;
    ft->snap_seq = seq;
    memcpy(ft->snap_digest, d, TLOG_HASH_BYTES);
    return DPB_OK;
}

/* The verdict on a snapshot (seq, digest d) against tree.snap's bytes b. */
static dpb_status compare_slots(ftree *ft, uint64_t seq, const tlog_hash d, const unsigned char *b,
                                dpb_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/" SNAP_NAME, ft->dir);
    int same_payload = 0;
    for (int slot = 0; slot < 2; slot++) {
        const unsigned char *p = b + 8 + slot * (8 + TLOG_HASH_BYTES);
        if (memcmp(p + 8, d, TLOG_HASH_BYTES) != 0)
            continue;
        same_payload = 1;
        if (get64(p) == seq) {
            ft->have_snap = 1;
            ft->snap_seq = seq;
            memcpy(ft->snap_digest, d, TLOG_HASH_BYTES);
            return DPB_OK;
        }
    }
    if (same_payload) /* the header's seq, at byte offset 12 (snapshot.h) */
        return dpb_fail(err, DPB_ECORRUPT, "data_dir",
                        "%s/snapshot: the seq at byte offset 12 reads %" PRIu64
                        ", not the seq the ledger wrote with this payload (%s names it): "
                        "changed after it was written; refusing to start",
                        ft->dir, seq, path);
    return dpb_fail(err, DPB_ECORRUPT, "data_dir",
                    "%s/snapshot (seq %" PRIu64 "): its payload (byte offset 32 on) is not the "
                    "one the ledger wrote: its SHA-256 differs from the one %s kept (changed "
                    "after it was written, its checksum recomputed); refusing to start",
                    ft->dir, seq, path);
}

void ftree_snapshot_begin(ftree *ft)
{
    sha256_init(&ft->snap_sha);
}

void ftree_snapshot_bytes(void *ft, const void *bytes, size_t n)
{
    sha256_update(&((ftree *)ft)->snap_sha, n, bytes);
}

dpb_status ftree_check_snapshot(ftree *ft, uint64_t seq, dpb_error *err)
{
    tlog_hash d;
    sha256_digest(&ft->snap_sha, TLOG_HASH_BYTES, d);
    char path[4096];
    snprintf(path, sizeof path, "%s/" SNAP_NAME, ft->dir);
    int fd = ft->fs->open(ft->fs->ctx, path, O_RDONLY, 0);
    if (fd < 0) {
        if (errno != ENOENT)
            return dpb_fs_io_fail(err, path, "open", errno);
        if (path_exists(ft->dir, NODES_NAME))
            return dpb_fail(err, DPB_ECORRUPT, "data_dir",
                            "%s is missing (it holds the digest of %s/snapshot, seq %" PRIu64
                            "): the snapshot cannot be trusted; refusing to start",
                            path, ft->dir, seq);
        return write_snap(ft, seq, d, seq, d, err); /* the first start of this version */
    }
    unsigned char b[SNAP_BYTES];
    ssize_t got = dpb_fs_pread_full(ft->fs, fd, b, SNAP_BYTES, 0);
    (void)ft->fs->close(ft->fs->ctx, fd);
    uint32_t crc = 0;
    for (int i = 3; i >= 0; i--)
        crc = crc << 8 | b[SNAP_BYTES - 4 + i];
    if (got != (ssize_t)SNAP_BYTES || memcmp(b, SNAP_MAGIC, 8) != 0 ||
        crc != dpb_crc32c(0, b, SNAP_BYTES - 4))
        return dpb_fail(err, DPB_ECORRUPT, "data_dir", "%s is damaged; refusing to start", path);
    return compare_slots(ft, seq, d, b, err);
}

dpb_status ftree_note_snapshot(ftree *ft, uint64_t seq, const void *data, size_t len,
                               dpb_error *err)
{
    tlog_hash d;
    digest_of(data, len, d);
    pthread_mutex_lock(&ft->mu);
    dpb_status st = ft->have_snap ? write_snap(ft, seq, d, ft->snap_seq, ft->snap_digest, err)
                                  : write_snap(ft, seq, d, seq, d, err);
    pthread_mutex_unlock(&ft->mu);
    return st;
}
