/*
 * wal.c - the write-ahead log (wal.h). May call: fs.c (every file operation, paths and
 * error details), crc32c.c, common/clock. Called by store_file.c (and, for the sync-latency
 * tally alone, by store_pg.c).
 *
 * FILE
 *   DIR/wal.log is a sequence of records and nothing else (no file header):
 *       u32 len | u32 crc | u64 seq | u8 type | payload[len]        (little-endian)
 *   crc = dpb_crc32c(0, seq|type|payload). A record occupies 17 + len bytes; len is at most
 *   WAL_MAX_PAYLOAD. Consecutive records have consecutive seqs. DIR/wal.log.tmp exists
 *   only while wal_truncate_upto runs (or after it crashed: wal_open removes it).
 *
 * INVARIANTS (whenever the mutex is free; "size" etc. are the fields of struct wal)
 *   I1  Bytes [0, size) of the file are complete records with valid CRCs and consecutive
 *       seqs; the last one (if any) has seq next_seq - 1. Appends happen under the mutex,
 *       with one write of the whole record at offset size (O_APPEND), so no thread ever
 *       sees a half-appended record.
 *   I2  durable_off <= size and durable_seq <= next_seq - 1. Every record with seq <=
 *       durable_seq lies in [0, durable_off) and was made durable (fdatasync of the log,
 *       fsync at open, or fsync of the new file in wal_truncate_upto) after it was
 *       written. Both only grow, except that wal_truncate_upto moves durable_off down
 *       together with size when it drops the records a snapshot covers.
 *   I3  The file's length is size, except when the wal is failed: then it is durable_off
 *       if the rollback ftruncate worked, else anything >= durable_off (maybe a partial
 *       record at the end, which recovery drops as a torn tail).
 *   I4  At most one fdatasync is in flight (syncing == 1); it runs without the mutex, on
 *       the records [0, its target_off) that were complete when it started. Appends go on
 *       meanwhile. wal_truncate_upto waits until no sync is in flight before it swaps fd.
 *   I5  failed only goes 0 -> 1. Once it is 1, this handle writes nothing more to the file
 *       (only the rollback ftruncate), and every call returns DPB_EIO at once.
 *   I6  wal_sync returns DPB_OK for upto only if the wal is not failed and durable_seq >=
 *       upto: an acknowledged record is never one that a failure could cut away (the
 *       rollback cuts to durable_off, which never goes below an acknowledged record).
 *
 * STATES
 *   OPEN      appends, syncs and truncations are accepted.
 *   SYNCING   OPEN while one thread is in fdatasync without the mutex; other wal_sync
 *             callers whose records are not covered yet wait on cv, and when it finishes
 *             one of them (if still needed) becomes the next syncer.
 *   FAILED    after any failed write, fdatasync, or step of wal_truncate_upto: sticky.
 *             The detail of the first failure is kept (wal_error). Only wal_close leaves it.
 *
 * RECOVERY (wal_open) scans from offset 0. At each offset it reads a record and checks:
 * header complete, len <= WAL_MAX_PAYLOAD, payload complete, CRC, and seq == previous + 1
 * (the first record: 1 <= seq <= after_seq + 1; a first record with a good CRC and seq >
 * after_seq + 1 means records are missing between the snapshot and the log: ECORRUPT).
 * When a check fails at offset `off`, it looks for any valid record starting after off
 * (a record with a plausible length that fits in the file, a matching CRC, and a seq that
 * could continue the log: between the expected seq and the expected seq + (bytes since
 * off) / 17 + 1024). If there is one, the log is damaged before its tail: ECORRUPT naming
 * the path and offset, the file untouched. If there is none, [off, end) is a torn tail:
 * it is cut away and the cut fsynced. A log whose last valid record is below after_seq (the
 * snapshot claims records the log does not hold) is ECORRUPT too: the log is never cut on
 * the strength of the snapshot's number. Records <= after_seq are shown to the caller's
 * `covered` check (wal_open_ex), which refuses those its snapshot does not hold. The log
 * file is fsynced at the end of wal_open, so every replayed record is durable before anyone
 * acts on it.
 */
#include "wal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "../common/clock.h"
#include "crc32c.h"

#define WAL_NAME "wal.log"
#define WAL_TMP_NAME "wal.log.tmp"
/* Bytes read at a time during recovery and truncation. */
#define READ_WINDOW ((size_t)1 << 20)
/* Append buffer kept between appends; larger records use a one-off allocation. */
#define APPEND_KEEP ((size_t)1 << 20)
/* Slack of the seq window when looking for a valid record after damage. */
#define RESYNC_SEQ_SLACK 1024u

struct wal {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const dpb_fs *fs; /* borrowed */
    int fd;
    char *dir, *path, *tmp_path;
    uint64_t next_seq;    /* seq of the next append */
    uint64_t size;        /* I1: end of the complete records */
    uint64_t durable_seq; /* I2 */
    uint64_t durable_off; /* I2 */
    int syncing;          /* I4 */
    unsigned char *buf;   /* append buffer, cap bytes */
    size_t cap;
    dpb_error fail; /* detail of the first failure */
    atomic_int failed;
    _Atomic uint64_t size_pub;    /* copy of size for wal_size_bytes */
    _Atomic uint64_t durable_pub; /* copy of durable_seq for wal_durable_seq */
    wal_sync_tally syncs;         /* fdatasync latency (under mu) */
    char *archive;                /* wal_set_archive's folder, or NULL: truncation discards */
};

/* ---- little-endian encoding ---- */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* ---- reading: a window over the file ---- */

typedef struct {
    const dpb_fs *fs;
    int fd;
    uint64_t size; /* bytes that may be read */
    unsigned char *buf;
    size_t cap;
    uint64_t base; /* buf holds the file's bytes [base, base + have) */
    size_t have;
} reader;

/* Point *p at the n file bytes at off (off + n <= r->size). Returns 0, or -1 with errno
 * (ENOMEM, a read error, or EIO if the file is shorter than expected). */
static int reader_get(reader *r, uint64_t off, size_t n, const unsigned char **p)
{
    if (off >= r->base && off + n <= r->base + r->have) {
        *p = r->buf + (off - r->base);
        return 0;
    }
    size_t want = n > READ_WINDOW ? n : READ_WINDOW;
    if (want > r->size - off)
        want = (size_t)(r->size - off);
    if (want > r->cap || r->buf == NULL) {
        size_t cap = want > WAL_HEADER_BYTES ? want : WAL_HEADER_BYTES;
        unsigned char *nb = malloc(cap);
        if (nb == NULL) {
            errno = ENOMEM;
            return -1;
        }
        free(r->buf);
        r->buf = nb;
        r->cap = cap;
    }
    r->have = 0;
    ssize_t got = dpb_fs_pread_full(r->fs, r->fd, r->buf, want, (off_t)off);
    if (got < 0)
        return -1;
    if ((size_t)got < n) {
        errno = EIO; /* the file shrank under us */
        return -1;
    }
    r->base = off;
    r->have = (size_t)got;
    *p = r->buf;
    return 0;
}

typedef struct {
    uint32_t len;
    uint32_t crc;
    uint64_t seq;
    uint8_t type;
} rec_hdr;

static void decode_hdr(const unsigned char *p, rec_hdr *h)
{
    h->len = get_u32(p);
    h->crc = get_u32(p + 4);
    h->seq = get_u64(p + 8);
    h->type = p[16];
}

/* What read_record found at an offset. */
enum { REC_OK, REC_SHORT_HDR, REC_BAD_LEN, REC_SHORT, REC_BAD_CRC, REC_IOERR };

static const char *rec_what(int kind)
{
    static const char *const what[] = {
        [REC_SHORT_HDR] = "incomplete header",
        [REC_BAD_LEN] = "length over the limit",
        [REC_SHORT] = "incomplete payload",
        [REC_BAD_CRC] = "checksum mismatch",
    };
    return kind > REC_OK && kind < REC_IOERR ? what[kind] : "bad record";
}

/* Read and check the record at off (length and CRC; not seq). On REC_OK, *h is its
 * header and *payload points at its payload inside the reader's window. */
static int read_record(reader *r, uint64_t off, rec_hdr *h, const unsigned char **payload)
{
    const unsigned char *p;
    if (r->size - off < WAL_HEADER_BYTES)
        return REC_SHORT_HDR;
    if (reader_get(r, off, WAL_HEADER_BYTES, &p) != 0)
        return REC_IOERR;
    decode_hdr(p, h);
    if (h->len > WAL_MAX_PAYLOAD)
        return REC_BAD_LEN;
    if (r->size - off - WAL_HEADER_BYTES < h->len)
        return REC_SHORT;
    if (reader_get(r, off, WAL_HEADER_BYTES + (size_t)h->len, &p) != 0)
        return REC_IOERR;
    uint32_t crc = dpb_crc32c(0, p + 8, 9);
    crc = dpb_crc32c(crc, p + WAL_HEADER_BYTES, h->len);
    if (crc != h->crc)
        return REC_BAD_CRC;
    *payload = p + WAL_HEADER_BYTES;
    return REC_OK;
}

/* Look for a valid record starting after `off` whose seq could continue the log (see
 * RECOVERY above): expected seq in [lo, hi]. Returns 1 and sets *at / *seq if found, 0 if
 * none, -1 on a read error (errno). */
static int resync(reader *r, uint64_t off, uint64_t lo, uint64_t hi, uint64_t *at, uint64_t *seq)
{
    for (uint64_t p = off + 1; p + WAL_HEADER_BYTES <= r->size; p++) {
        const unsigned char *b;
        if (reader_get(r, p, WAL_HEADER_BYTES, &b) != 0)
            return -1;
        rec_hdr h;
        decode_hdr(b, &h);
        uint64_t top = hi + (p - off) / WAL_HEADER_BYTES + RESYNC_SEQ_SLACK;
        if (h.len > WAL_MAX_PAYLOAD || r->size - p - WAL_HEADER_BYTES < h.len || h.seq < lo ||
            h.seq > top)
            continue;
        const unsigned char *payload;
        int k = read_record(r, p, &h, &payload);
        if (k == REC_IOERR)
            return -1;
        if (k == REC_OK) {
            *at = p;
            *seq = h.seq;
            return 1;
        }
    }
    return 0;
}

/* Mark w failed (first failure wins for the detail) and cut the file back to the last
 * durable offset so that nothing partial or unacknowledged stays behind (I3, I5).
 * Called with the mutex held. Returns DPB_EIO. */
static dpb_status fail_locked(wal *w, const char *what, int errnum)
{
    if (!atomic_load(&w->failed)) {
        dpb_fs_io_fail(&w->fail, w->path, what, errnum);
        atomic_store(&w->failed, 1);
        if (w->fs->ftruncate(w->fs->ctx, w->fd, (off_t)w->durable_off) == 0) {
            w->size = w->durable_off;
            atomic_store(&w->size_pub, w->size);
        }
        /* else: the wal is failed anyway; recovery drops what is left as a torn tail. */
    }
    pthread_cond_broadcast(&w->cv);
    return DPB_EIO;
}

/* ---- open and recover ---- */

typedef struct {
    uint64_t valid_end; /* end of the valid prefix */
    uint64_t count;     /* records in the valid prefix */
    uint64_t last_seq;  /* seq of its last record (0 if none) */
} scan_result;

static dpb_status scan_and_replay(reader *r, const char *path, uint64_t after_seq, wal_replay_fn fn,
                                  wal_replay_fn covered, void *ctx, scan_result *res,
                                  dpb_error *err)
{
    uint64_t off = 0;
    res->count = 0;
    res->last_seq = 0;
    while (off < r->size) {
        rec_hdr h;
        const unsigned char *payload = NULL;
        int kind = read_record(r, off, &h, &payload);
        if (kind == REC_IOERR)
            return dpb_fs_io_fail(err, path, "read", errno);
        const char *why = NULL;
        char seqwhy[96];
        if (kind != REC_OK) {
            why = rec_what(kind);
        } else if (res->count == 0 && h.seq > after_seq + 1) {
            return dpb_fail(err, DPB_ECORRUPT, NULL,
                            "%s: the log starts at seq %" PRIu64 " (byte offset 0) but the "
                            "snapshot covers only up to seq %" PRIu64
                            ": records are missing; refusing to start",
                            path, h.seq, after_seq);
        } else if (h.seq == 0 || (res->count > 0 && h.seq != res->last_seq + 1)) {
            snprintf(seqwhy, sizeof seqwhy, "seq %" PRIu64 " where %" PRIu64 " was expected", h.seq,
                     res->count > 0 ? res->last_seq + 1 : after_seq + 1);
            why = seqwhy;
        }
        if (why != NULL) {
            uint64_t lo = res->count > 0 ? res->last_seq + 1 : 1;
            uint64_t hi = res->count > 0 ? res->last_seq + 1 : after_seq + 1;
            uint64_t at = 0, seq = 0;
            int found = resync(r, off, lo, hi, &at, &seq);
            if (found < 0)
                return dpb_fs_io_fail(err, path, "read", errno);
            if (found)
                return dpb_fail(err, DPB_ECORRUPT, NULL,
                                "%s: damaged record at byte offset %" PRIu64
                                " (%s), followed by a valid record (seq %" PRIu64
                                ") at byte offset %" PRIu64
                                ": damage before the tail; the file is left as it is",
                                path, off, why, seq, at);
            break; /* a torn tail: [off, size) goes */
        }
        if (h.seq <= after_seq && covered != NULL) {
            int rc = covered(ctx, h.seq, h.type, payload, h.len);
            if (rc != 0)
                return dpb_fail(err, DPB_ECORRUPT, NULL,
                                "%s: the record at byte offset %" PRIu64 " (seq %" PRIu64
                                ", type %u) is not in the snapshot that claims to cover every "
                                "record up to seq %" PRIu64
                                ": the snapshot and the log disagree; refusing to start",
                                path, off, h.seq, (unsigned)h.type, after_seq);
        }
        if (h.seq > after_seq && fn != NULL) {
            int rc = fn(ctx, h.seq, h.type, payload, h.len);
            if (rc != 0)
                return dpb_fail(err, DPB_ECORRUPT, NULL,
                                "%s: the record at byte offset %" PRIu64 " (seq %" PRIu64
                                ", type %u) was refused by replay (%d)",
                                path, off, h.seq, (unsigned)h.type, rc);
        }
        res->count++;
        res->last_seq = h.seq;
        off += WAL_HEADER_BYTES + h.len;
    }
    res->valid_end = off;
    return DPB_OK;
}

dpb_status wal_open(const char *dir, const dpb_fs *fs, uint64_t after_seq, wal_replay_fn fn,
                    void *ctx, wal **out, uint64_t *next_seq, dpb_error *err)
{
    return wal_open_ex(dir, fs, after_seq, fn, NULL, ctx, out, next_seq, err);
}

/* Free w and what it owns but its descriptor and locks (wal_open's failure path, wal_close). */
static void wal_free(wal *w)
{
    free(w->buf);
    free(w->dir);
    free(w->path);
    free(w->tmp_path);
    free(w->archive);
    free(w);
}

/* Recover the log open at w->fd (RECOVERY above): scan it, replaying through fn and showing
 * covered records to covered, refuse a log that ends below after_seq, cut a torn tail, and
 * make the file and its directory durable. On DPB_OK, *res is what the scan found (its
 * valid_end is the log's size from now on); otherwise err says why and nothing was cut. */
static dpb_status wal_recover(wal *w, uint64_t after_seq, wal_replay_fn fn, wal_replay_fn covered,
                              void *ctx, scan_result *res, dpb_error *err)
{
    const dpb_fs *fs = w->fs;
    off_t fsize;
    if (fs->fstat_size(fs->ctx, w->fd, &fsize) != 0)
        return dpb_fs_io_fail(err, w->path, "fstat", errno);
    reader r = {0};
    r.fs = fs;
    r.fd = w->fd;
    r.size = (uint64_t)fsize;
    dpb_status st = scan_and_replay(&r, w->path, after_seq, fn, covered, ctx, res, err);
    free(r.buf);
    if (st != DPB_OK)
        return st;

    uint64_t keep = res->valid_end;
    if (res->count > 0 && res->last_seq < after_seq) {
        /* The snapshot claims records the log never held durably. A snapshot covers only
         * durable records, so this is damage (or a snapshot of an older version of the
         * daemon written ahead of the log): never cut the log on the strength of it. */
        return dpb_fail(err, DPB_ECORRUPT, NULL,
                        "%s: the log ends at seq %" PRIu64 " (byte offset %" PRIu64
                        ") but the snapshot claims to cover up to seq %" PRIu64
                        ": the snapshot and the log disagree; refusing to start (the files are "
                        "left as they are)",
                        w->path, res->last_seq, res->valid_end, after_seq);
    }
    if (keep < r.size && fs->ftruncate(fs->ctx, w->fd, (off_t)keep) != 0)
        return dpb_fs_io_fail(err, w->path, "ftruncate (dropping a torn tail)", errno);
    /* Everything replayed (and the cut, if any) is durable before anyone acts on it; the
     * directory sync makes a newly created wal.log durable. */
    if (fs->fsync(fs->ctx, w->fd) != 0)
        return dpb_fs_io_fail(err, w->path, "fsync", errno);
    if (dpb_fs_fsync_dir(fs, w->dir) != 0)
        return dpb_fs_io_fail(err, w->dir, "fsync of the directory", errno);
    return DPB_OK;
}

dpb_status wal_open_ex(const char *dir, const dpb_fs *fs, uint64_t after_seq, wal_replay_fn fn,
                       wal_replay_fn covered, void *ctx, wal **out, uint64_t *next_seq,
                       dpb_error *err)
{
    dpb_status st = DPB_OK;
    wal *w = NULL;
    int locks = 0; /* 1: mutex initialised, 2: and cond */

    if (out != NULL)
        *out = NULL;
    if (dir == NULL || fs == NULL || out == NULL || next_seq == NULL)
        return dpb_fail(err, DPB_EINVAL, NULL, "wal_open: NULL argument");
    if (after_seq == UINT64_MAX)
        return dpb_fail(err, DPB_EINVAL, "after_seq", "wal_open: after_seq out of range");

    w = calloc(1, sizeof *w);
    if (w == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "wal_open: out of memory");
        goto out;
    }
    w->fd = -1;
    w->fs = fs;
    w->dir = strdup(dir);
    w->path = dpb_fs_join_path(dir, WAL_NAME);
    w->tmp_path = dpb_fs_join_path(dir, WAL_TMP_NAME);
    if (w->dir == NULL || w->path == NULL || w->tmp_path == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "wal_open: out of memory");
        goto out;
    }

    /* A leftover of a crashed wal_truncate_upto: wal.log is still the valid log. */
    if (fs->unlink(fs->ctx, w->tmp_path) != 0 && errno != ENOENT) {
        st = dpb_fs_io_fail(err, w->tmp_path, "unlink", errno);
        goto out;
    }
    w->fd = fs->open(fs->ctx, w->path, O_RDWR | O_CREAT | O_APPEND, 0644);
    if (w->fd < 0) {
        st = dpb_fs_io_fail(err, w->path, "open", errno);
        goto out;
    }
    scan_result res = {0};
    st = wal_recover(w, after_seq, fn, covered, ctx, &res, err);
    if (st != DPB_OK)
        goto out;

    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "wal_open: cannot create a mutex");
        goto out;
    }
    locks = 1;
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "wal_open: cannot create a condition variable");
        goto out;
    }
    locks = 2;

    uint64_t keep = res.valid_end;
    uint64_t last = keep > 0 ? res.last_seq : 0;
    w->next_seq = (last > after_seq ? last : after_seq) + 1;
    w->size = keep;
    w->durable_seq = w->next_seq - 1;
    w->durable_off = keep;
    atomic_init(&w->durable_pub, w->durable_seq);
    atomic_init(&w->failed, 0);
    atomic_init(&w->size_pub, keep);
    *next_seq = w->next_seq;
    *out = w;
    w = NULL;

out:
    if (w != NULL) {
        if (w->fd >= 0)
            (void)fs->close(fs->ctx, w->fd); /* read-only use so far: nothing to lose */
        if (locks >= 2)
            pthread_cond_destroy(&w->cv);
        if (locks >= 1)
            pthread_mutex_destroy(&w->mu);
        wal_free(w);
    }
    return st;
}

/* ---- append and sync ---- */

dpb_status wal_append(wal *w, uint8_t type, const void *payload, size_t len, uint64_t *seq)
{
    if (w == NULL || (payload == NULL && len > 0) || len > WAL_MAX_PAYLOAD)
        return DPB_EINVAL;
    if (atomic_load(&w->failed))
        return DPB_EIO;

    dpb_status st = DPB_OK;
    size_t need = WAL_HEADER_BYTES + len;
    unsigned char *oneoff = NULL;
    pthread_mutex_lock(&w->mu);
    if (atomic_load(&w->failed)) {
        st = DPB_EIO;
        goto out;
    }
    unsigned char *b = w->buf;
    if (need > w->cap) {
        unsigned char *nb = malloc(need);
        if (nb == NULL) {
            st = DPB_ENOMEM;
            goto out;
        }
        if (need <= APPEND_KEEP) {
            free(w->buf);
            w->buf = nb;
            w->cap = need;
        } else {
            oneoff = nb;
        }
        b = nb;
    }
    put_u32(b, (uint32_t)len);
    put_u64(b + 8, w->next_seq);
    b[16] = type;
    if (len > 0)
        memcpy(b + WAL_HEADER_BYTES, payload, len);
    put_u32(b + 4, dpb_crc32c(0, b + 8, 9 + len));

    if (dpb_fs_write_all(w->fs, w->fd, b, need) != 0) {
        st = fail_locked(w, "write", errno);
        goto out;
    }
    w->size += need;
    atomic_store(&w->size_pub, w->size);
    if (seq != NULL)
        *seq = w->next_seq;
    w->next_seq++;

out:
    pthread_mutex_unlock(&w->mu);
    free(oneoff);
    return st;
}

dpb_status wal_sync(wal *w, uint64_t upto)
{
    if (w == NULL)
        return DPB_EINVAL;
    dpb_status st = DPB_OK;
    pthread_mutex_lock(&w->mu);
    if (upto > w->next_seq - 1)
        upto = w->next_seq - 1;
    for (;;) {
        if (atomic_load(&w->failed)) {
            st = DPB_EIO;
            break;
        }
        if (w->durable_seq >= upto)
            break;
        if (w->syncing) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        /* Become the syncer for everything appended so far (I4). */
        w->syncing = 1;
        uint64_t target_seq = w->next_seq - 1;
        uint64_t target_off = w->size;
        int fd = w->fd;
        pthread_mutex_unlock(&w->mu);
        uint64_t t0 = dpb_mono_ns();
        int rc = w->fs->fdatasync(w->fs->ctx, fd);
        int e = errno;
        double dt = (double)(dpb_mono_ns() - t0) * 1e-9;
        pthread_mutex_lock(&w->mu);
        w->syncing = 0;
        wal_sync_tally_add(&w->syncs, dt);
        if (rc != 0) {
            fail_locked(w, "fdatasync", e);
        } else if (!atomic_load(&w->failed)) {
            if (target_seq > w->durable_seq) {
                w->durable_seq = target_seq;
                atomic_store(&w->durable_pub, target_seq);
            }
            if (target_off > w->durable_off)
                w->durable_off = target_off;
        }
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return st;
}

/* ---- truncation after a snapshot ---- */

/* Write the log's bytes [0, end) (whole records, the first of seq s0) as the segment
 * ARCHIVE/s0.seg (20 digits): ARCHIVE/seg.tmp, fsync, rename, fsync ARCHIVE. The same first
 * seq names the same segment, so a truncation cut short by a crash and done again replaces
 * its segment with a longer one. Mutex held; a failure fails the wal (as the truncation's own
 * steps do). */
static dpb_status archive_prefix(wal *w, reader *r, uint64_t end)
{
    const unsigned char *p;
    if (reader_get(r, 0, WAL_HEADER_BYTES, &p) != 0)
        return errno == ENOMEM ? DPB_ENOMEM : fail_locked(w, "read (archive)", errno);
    uint64_t s0 = get_u64(p + 8);
    char name[64];
    snprintf(name, sizeof name, "%020" PRIu64 ".seg", s0);
    char *tmp = dpb_fs_join_path(w->archive, "seg.tmp");
    char *path = dpb_fs_join_path(w->archive, name);
    dpb_status st = DPB_OK;
    int fd = -1;
    if (tmp == NULL || path == NULL) {
        st = DPB_ENOMEM;
        goto out;
    }
    fd = w->fs->open(w->fs->ctx, tmp, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0) {
        st = fail_locked(w, "open of the archive segment", errno);
        goto out;
    }
    for (uint64_t off = 0; off < end;) {
        size_t n = end - off < READ_WINDOW ? (size_t)(end - off) : READ_WINDOW;
        if (reader_get(r, off, n, &p) != 0) {
            st = errno == ENOMEM ? DPB_ENOMEM : fail_locked(w, "read (archive)", errno);
            goto out;
        }
        if (dpb_fs_write_all(w->fs, fd, p, n) != 0) {
            st = fail_locked(w, "write of the archive segment", errno);
            goto out;
        }
        off += n;
    }
    if (w->fs->fsync(w->fs->ctx, fd) != 0) {
        st = fail_locked(w, "fsync of the archive segment", errno);
        goto out;
    }
    (void)w->fs->close(w->fs->ctx, fd);
    fd = -1;
    if (w->fs->rename(w->fs->ctx, tmp, path) != 0) {
        st = fail_locked(w, "rename of the archive segment", errno);
        goto out;
    }
    if (dpb_fs_fsync_dir(w->fs, w->archive) != 0)
        st = fail_locked(w, "fsync of the archive folder", errno);
out:
    if (fd >= 0) {
        (void)w->fs->close(w->fs->ctx, fd);
        (void)w->fs->unlink(w->fs->ctx, tmp);
    }
    free(tmp);
    free(path);
    return st;
}

dpb_status wal_set_archive(wal *w, const char *folder)
{
    char *a = strdup(folder);
    if (a == NULL)
        return DPB_ENOMEM;
    pthread_mutex_lock(&w->mu);
    free(w->archive);
    w->archive = a;
    pthread_mutex_unlock(&w->mu);
    return DPB_OK;
}

dpb_status wal_read_file(const dpb_fs *fs, const char *path, uint64_t from, uint64_t to,
                         wal_replay_fn fn, void *ctx, uint64_t *last, dpb_error *err)
{
    *last = 0;
    int fd = fs->open(fs->ctx, path, O_RDONLY, 0);
    if (fd < 0)
        return errno == ENOENT ? DPB_ENOTFOUND : dpb_fs_io_fail(err, path, "open", errno);
    off_t fsize;
    dpb_status st = DPB_OK;
    reader r = {0};
    if (fs->fstat_size(fs->ctx, fd, &fsize) != 0) {
        st = dpb_fs_io_fail(err, path, "fstat", errno);
        goto out;
    }
    r.fs = fs;
    r.fd = fd;
    r.size = (uint64_t)fsize;
    for (uint64_t off = 0; off < r.size;) {
        rec_hdr h;
        const unsigned char *payload = NULL;
        int kind = read_record(&r, off, &h, &payload);
        if (kind == REC_IOERR) {
            st = dpb_fs_io_fail(err, path, "read", errno);
            break;
        }
        if (kind != REC_OK)
            break; /* the end of what can be read: the caller sees which seqs it got */
        if (h.seq > to)
            break;
        if (h.seq >= from && fn(ctx, h.seq, h.type, payload, h.len) != 0) {
            st = DPB_ECANCELLED;
            break;
        }
        *last = h.seq;
        off += WAL_HEADER_BYTES + h.len;
    }
out:
    free(r.buf);
    (void)fs->close(fs->ctx, fd);
    return st;
}

dpb_status wal_truncate_upto(wal *w, uint64_t upto)
{
    if (w == NULL)
        return DPB_EINVAL;
    dpb_status st = DPB_OK;
    reader r = {0};
    int nfd = -1;
    int renamed = 0;
    pthread_mutex_lock(&w->mu);
    while (w->syncing && !atomic_load(&w->failed))
        pthread_cond_wait(&w->cv, &w->mu);
    if (atomic_load(&w->failed)) {
        st = DPB_EIO;
        goto out;
    }
    if (upto >= w->next_seq) {
        st = DPB_EINVAL;
        goto out;
    }

    /* Find the first record with seq > upto (I1: the prefix is well formed). */
    r.fs = w->fs;
    r.fd = w->fd;
    r.size = w->size;
    uint64_t start = 0;
    while (start < w->size) {
        const unsigned char *p;
        if (reader_get(&r, start, WAL_HEADER_BYTES, &p) != 0) {
            st = errno == ENOMEM ? DPB_ENOMEM : fail_locked(w, "read (truncate)", errno);
            goto out;
        }
        rec_hdr h;
        decode_hdr(p, &h);
        if (h.len > WAL_MAX_PAYLOAD || w->size - start - WAL_HEADER_BYTES < h.len) {
            st = fail_locked(w, "read (truncate: the log changed under the wal)", EIO);
            goto out;
        }
        if (h.seq > upto)
            break;
        start += WAL_HEADER_BYTES + h.len;
    }

    /* Keep the records being cut in an archive segment first (wal_set_archive). */
    if (w->archive != NULL && start > 0) {
        st = archive_prefix(w, &r, start);
        if (st != DPB_OK)
            goto out;
    }

    /* Copy the rest into wal.log.tmp, make it durable, rename it over wal.log. */
    nfd = w->fs->open(w->fs->ctx, w->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (nfd < 0) {
        st = fail_locked(w, "open of " WAL_TMP_NAME, errno);
        goto out;
    }
    for (uint64_t off = start; off < w->size;) {
        size_t n = w->size - off < READ_WINDOW ? (size_t)(w->size - off) : READ_WINDOW;
        const unsigned char *p;
        if (reader_get(&r, off, n, &p) != 0) {
            st = errno == ENOMEM ? DPB_ENOMEM : fail_locked(w, "read (truncate)", errno);
            goto out;
        }
        if (dpb_fs_write_all(w->fs, nfd, p, n) != 0) {
            st = fail_locked(w, "write of " WAL_TMP_NAME, errno);
            goto out;
        }
        off += n;
    }
    if (w->fs->fsync(w->fs->ctx, nfd) != 0) {
        st = fail_locked(w, "fsync of " WAL_TMP_NAME, errno);
        goto out;
    }
    if (w->fs->rename(w->fs->ctx, w->tmp_path, w->path) != 0) {
        st = fail_locked(w, "rename of " WAL_TMP_NAME, errno);
        goto out;
    }
    renamed = 1;
    /* wal.log is the new file now, whatever happens next: switch to it. A failed close
     * of the old file loses nothing (its content is no longer the log). */
    (void)w->fs->close(w->fs->ctx, w->fd);
    w->fd = nfd;
    nfd = -1;
    w->size -= start;
    w->durable_off = w->size;
    w->durable_seq = w->next_seq - 1; /* the copied records were just fsynced */
    atomic_store(&w->durable_pub, w->durable_seq);
    atomic_store(&w->size_pub, w->size);
    if (dpb_fs_fsync_dir(w->fs, w->dir) != 0) {
        st = fail_locked(w, "fsync of the directory (truncate)", errno);
        goto out;
    }

out:
    if (nfd >= 0) {
        (void)w->fs->close(w->fs->ctx, nfd); /* never became the log */
        if (!renamed)
            (void)w->fs->unlink(w->fs->ctx, w->tmp_path); /* best effort; wal_open too */
    }
    pthread_mutex_unlock(&w->mu);
    free(r.buf);
    return st;
}

/* ---- small accessors and close ---- */

const double WAL_SYNC_BUCKETS[WAL_SYNC_NBUCKETS] = {
    1e-4, 2.5e-4, 5e-4,   1e-3, 2e-3, 3e-3, 5e-3, 7.5e-3, 1e-2, 1.5e-2,  2e-2,
    3e-2, 5e-2,   7.5e-2, 0.1,  0.25, 0.5,  1.0,  2.5,    5.0,  HUGE_VAL};

void wal_sync_tally_add(wal_sync_tally *t, double dt)
{
    t->count++;
    t->seconds += dt;
    for (int b = 0; b < WAL_SYNC_NBUCKETS; b++)
        if (dt <= WAL_SYNC_BUCKETS[b]) {
            t->hist[b]++;
            break;
        }
}

void wal_sync_tally_get(const wal_sync_tally *t, uint64_t *count, double *seconds,
                        uint64_t hist[WAL_SYNC_NBUCKETS])
{
    *count = t->count;
    *seconds = t->seconds;
    memcpy(hist, t->hist, sizeof t->hist);
}

void wal_sync_stats(wal *w, uint64_t *count, double *seconds, uint64_t hist[WAL_SYNC_NBUCKETS])
{
    pthread_mutex_lock(&w->mu);
    wal_sync_tally_get(&w->syncs, count, seconds, hist);
    pthread_mutex_unlock(&w->mu);
}

uint64_t wal_size_bytes(const wal *w)
{
    return w == NULL ? 0 : atomic_load(&((wal *)w)->size_pub);
}

void wal_abandon(wal *w, const char *why)
{
    pthread_mutex_lock(&w->mu);
    fail_locked(w, why, ENOMEM);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

uint64_t wal_durable_seq(const wal *w)
{
    return atomic_load(&((wal *)w)->durable_pub);
}

int wal_failed(const wal *w)
{
    return w == NULL ? 0 : atomic_load(&((wal *)w)->failed);
}

dpb_status wal_error(wal *w, dpb_error *err)
{
    if (err == NULL)
        return wal_failed(w) ? DPB_EIO : DPB_OK;
    dpb_error_clear(err);
    if (w == NULL)
        return DPB_OK;
    pthread_mutex_lock(&w->mu);
    if (atomic_load(&w->failed))
        *err = w->fail;
    pthread_mutex_unlock(&w->mu);
    return err->status;
}

void wal_close(wal *w)
{
    if (w == NULL)
        return;
    if (!atomic_load(&w->failed) && w->durable_seq < w->next_seq - 1)
        (void)w->fs->fdatasync(w->fs->ctx, w->fd); /* best effort: see wal.h */
    (void)w->fs->close(w->fs->ctx, w->fd);         /* nothing left to lose: see wal.h */
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    wal_free(w);
}
