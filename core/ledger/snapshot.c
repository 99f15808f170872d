/*
 * snapshot.c - snapshot files (snapshot.h). May call: fs.c, crc32c.c. Called by
 * store_file.c.
 *
 * Durability protocol of snapshot_write (docs/ARCHITECTURE.md, "Snapshots"):
 *   1. open DIR/snapshot.tmp (O_CREAT | O_TRUNC: a leftover of a crash is overwritten)
 *   2. write header + payload, retrying short writes
 *   3. fsync snapshot.tmp      -> its bytes are on disk
 *   4. close snapshot.tmp      (checked: NFS reports write-back errors here)
 *   5. rename over DIR/snapshot -> atomic switch from the old snapshot to the new one
 *   6. fsync DIR               -> the switch itself is durable
 * A crash before 5 leaves the old snapshot in place (and a stale snapshot.tmp that
 * snapshot_read ignores and the next write overwrites); a crash after 5 leaves either
 * snapshot, both complete. Only after 6 may the log drop the records the snapshot covers.
 */
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

#define SNAP_NAME "snapshot"
#define SNAP_TMP_NAME "snapshot.tmp"
static const char snap_magic_v1[8] = {'D', 'P', 'B', 'S', 'N', 'A', 'P', '1'};
static const char snap_magic[8] = {'D', 'P', 'B', 'S', 'N', 'A', 'P', '2'};
#define CRC_AT 28u /* byte offset of the checksum in the header */

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

dpb_status snapshot_write(const char *dir, const dpb_fs *fs, uint64_t seq, const void *data,
                          size_t len, dpb_error *err)
{
    dpb_status st = DPB_OK;
    char *path = NULL, *tmp = NULL;
    int fd = -1;
    int tmp_exists = 0;

    if (dir == NULL || fs == NULL || (data == NULL && len > 0))
        return dpb_fail(err, DPB_EINVAL, NULL, "snapshot_write: NULL argument");
    path = dpb_fs_join_path(dir, SNAP_NAME);
    tmp = dpb_fs_join_path(dir, SNAP_TMP_NAME);
    if (path == NULL || tmp == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "snapshot_write: out of memory");
        goto out;
    }

    unsigned char hdr[SNAPSHOT_HEADER_BYTES];
    memcpy(hdr, snap_magic, sizeof snap_magic);
    put_le(hdr + 8, SNAPSHOT_VERSION, 4);
    put_le(hdr + 12, seq, 8);
    put_le(hdr + 20, (uint64_t)len, 8);
    /* v2: the checksum covers every other byte of the file, the header's seq included */
    uint32_t crc = dpb_crc32c(0, hdr, CRC_AT);
    put_le(hdr + CRC_AT, dpb_crc32c(crc, data, len), 4);

    fd = fs->open(fs->ctx, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        st = dpb_fs_io_fail(err, tmp, "open", errno);
        goto out;
    }
    tmp_exists = 1;
    if (dpb_fs_write_all(fs, fd, hdr, sizeof hdr) != 0 ||
        (len > 0 && dpb_fs_write_all(fs, fd, data, len) != 0)) {
        st = dpb_fs_io_fail(err, tmp, "write", errno);
        goto out;
    }
    if (fs->fsync(fs->ctx, fd) != 0) {
        st = dpb_fs_io_fail(err, tmp, "fsync", errno);
        goto out;
    }
    int rc = fs->close(fs->ctx, fd);
    fd = -1;
    if (rc != 0) {
        st = dpb_fs_io_fail(err, tmp, "close", errno);
        goto out;
    }
    if (fs->rename(fs->ctx, tmp, path) != 0) {
        st = dpb_fs_io_fail(err, path, "rename of " SNAP_TMP_NAME, errno);
        goto out;
    }
    tmp_exists = 0;
    if (dpb_fs_fsync_dir(fs, dir) != 0) {
        st = dpb_fs_io_fail(err, dir, "fsync of the directory", errno);
        goto out;
    }

out:
    if (fd >= 0)
        (void)fs->close(fs->ctx, fd); /* already failing: the tmp file is discarded */
    if (tmp_exists)
        (void)fs->unlink(fs->ctx, tmp); /* best effort: readers ignore it anyway */
    free(path);
    free(tmp);
    return st;
}

dpb_status snapshot_read(const char *dir, const dpb_fs *fs, uint64_t *seq, void **data, size_t *len,
                         dpb_error *err)
{
    return snapshot_read_each(dir, fs, seq, data, len, NULL, NULL, err);
}

/* The payload is read in pieces of this many bytes, each checksummed (and given to each)
 * while it is in the cache: one pass over the file's bytes. */
#define READ_PIECE ((size_t)1 << 20)

dpb_status snapshot_read_each(const char *dir, const dpb_fs *fs, uint64_t *seq, void **data,
                              size_t *len, snapshot_bytes_fn each, void *each_ctx, dpb_error *err)
{
    dpb_status st = DPB_OK;
    char *path = NULL;
    unsigned char *buf = NULL;
    int fd = -1;

    if (data != NULL)
        *data = NULL;
    if (len != NULL)
        *len = 0;
    if (seq != NULL)
        *seq = 0;
    if (dir == NULL || fs == NULL || seq == NULL || data == NULL || len == NULL)
        return dpb_fail(err, DPB_EINVAL, NULL, "snapshot_read: NULL argument");
    path = dpb_fs_join_path(dir, SNAP_NAME);
    if (path == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "snapshot_read: out of memory");
        goto out;
    }
    fd = fs->open(fs->ctx, path, O_RDONLY, 0);
    if (fd < 0) {
        if (errno != ENOENT)
            st = dpb_fs_io_fail(err, path, "open", errno);
        goto out; /* absent: DPB_OK, nothing */
    }
    off_t fsize;
    if (fs->fstat_size(fs->ctx, fd, &fsize) != 0) {
        st = dpb_fs_io_fail(err, path, "fstat", errno);
        goto out;
    }
    unsigned char hdr[SNAPSHOT_HEADER_BYTES];
    ssize_t got = dpb_fs_pread_full(fs, fd, hdr, sizeof hdr, 0);
    if (got < 0) {
        st = dpb_fs_io_fail(err, path, "read", errno);
        goto out;
    }
    if ((size_t)got < sizeof hdr) {
        st = dpb_fail(err, DPB_ECORRUPT, NULL,
                      "%s: truncated snapshot (%lld bytes, the header alone is %u)", path,
                      (long long)got, SNAPSHOT_HEADER_BYTES);
        goto out;
    }
    int v1 = memcmp(hdr, snap_magic_v1, sizeof snap_magic_v1) == 0;
    if (!v1 && memcmp(hdr, snap_magic, sizeof snap_magic) != 0) {
        st = dpb_fail(err, DPB_ECORRUPT, NULL,
                      "%s: not a dpbudget snapshot (bad magic at byte offset 0); refusing to "
                      "start rather than guess",
                      path);
        goto out;
    }
    uint64_t version = get_le(hdr + 8, 4);
    if (version != (v1 ? 1u : SNAPSHOT_VERSION)) {
        st = dpb_fail(err, DPB_ECORRUPT, NULL,
                      "%s: snapshot format version %" PRIu64
                      " at byte offset 8 does not match its magic (format %u)",
                      path, version, v1 ? 1u : SNAPSHOT_VERSION);
        goto out;
    }
    uint64_t s = get_le(hdr + 12, 8);
    uint64_t n = get_le(hdr + 20, 8);
    uint32_t crc = (uint32_t)get_le(hdr + 28, 4);
    uint64_t body = (uint64_t)fsize - SNAPSHOT_HEADER_BYTES;
    if (n != body || n > (uint64_t)SIZE_MAX - 1) {
        st = dpb_fail(err, DPB_ECORRUPT, NULL,
                      "%s: payload length %" PRIu64 " (byte offset 20) but the file holds %" PRIu64
                      " bytes after the header",
                      path, n, body);
        goto out;
    }
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "%s: out of memory for %" PRIu64 " bytes", path, n);
        goto out;
    }
    uint32_t want = v1 ? 0 : dpb_crc32c(0, hdr, CRC_AT);
    for (size_t at = 0; at < (size_t)n;) {
        size_t k = (size_t)n - at < READ_PIECE ? (size_t)n - at : READ_PIECE;
        got = dpb_fs_pread_full(fs, fd, buf + at, k, (off_t)(SNAPSHOT_HEADER_BYTES + at));
        if (got < 0) {
            st = dpb_fs_io_fail(err, path, "read", errno);
            goto out;
        }
        if ((size_t)got != k) {
            st = dpb_fail(err, DPB_ECORRUPT, NULL, "%s: snapshot shorter than its header says",
                          path);
            goto out;
        }
        want = dpb_crc32c(want, buf + at, k);
        if (each != NULL)
            each(each_ctx, buf + at, k);
        at += k;
    }
    if (want != crc) {
        st = dpb_fail(err, DPB_ECORRUPT, NULL,
                      "%s: snapshot checksum (byte offset 28) does not match %s (byte offsets "
                      "%s to %" PRIu64 "): damaged; refusing to start rather than guess",
                      path, v1 ? "the payload" : "the header and the payload", v1 ? "32" : "0",
                      n + SNAPSHOT_HEADER_BYTES);
        goto out;
    }
    *seq = s;
    *data = buf;
    *len = (size_t)n;
    buf = NULL;

out:
    if (fd >= 0)
        (void)fs->close(fs->ctx, fd); /* read-only: nothing to lose */
    free(buf);
    free(path);
    return st;
}
