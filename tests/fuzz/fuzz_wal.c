/*
 * fuzz_wal.c - libFuzzer target: log replay (core/ledger/wal.h), the snapshot loader
 * (snapshot.h) and ledger recovery (ledger.h: snapshot + replay), on an in-memory dpb_fs so
 * that no input touches the disk (fs.h has only the POSIX table and a fault wrapper around
 * another fs, so a small in-memory one lives here).
 *
 * For each input:
 *  1. The bytes are DIR/wal.log; wal_open replays them (after_seq 0, the first record's seq
 *     and that + 3) with a callback that checks what wal.h promises: seqs after_seq + 1,
 *     + 2, ... in order, payload non-NULL and at most WAL_MAX_PAYLOAD (every byte read).
 *     On DPB_OK: next_seq matches, the file was cut to wal_size_bytes, and the recovered
 *     log takes an append and recovers again with one more record.
 *  2. The bytes are DIR/snapshot; snapshot_read loads them. On DPB_OK the payload is the
 *     file minus its header, and snapshot_write + snapshot_read give it back.
 *  3. Ledger recovery. The CRCs are a wall no mutation gets through, so the ledger gets the
 *     bytes with each complete record's CRC recomputed (nothing else changed): that is how
 *     the record decoder (ledger_record.c: apply_record) sees fuzzed payloads. If the
 *     input starts with the snapshot magic it is also given as DIR/snapshot (length and CRC
 *     fixed) with no log, which reaches the snapshot payload parser (ledger_snapfmt.c:
 *     lg_load_snapshot). A recovered ledger is closed (which writes a snapshot and truncates
 *     the log) and must recover again to the same clients and summary.
 * DPB_ECORRUPT, DPB_EIO, ... are expected outcomes; crashes, UB, leaks and broken
 * invariants (abort) are not. The accountants' answers are memoised (memo.c, linked with
 * --wrap): recomputing them for the same events was most of each input's time.
 */
#include <errno.h>
#include <fcntl.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/ledger/crc32c.h"
#include "../../core/ledger/fs.h"
#include "../../core/ledger/ledger.h"
#include "../../core/ledger/snapshot.h"
#include "../../core/ledger/wal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void invariant_failed(const char *what, const dpb_error *err)
{
    fprintf(stderr, "fuzz_wal: invariant violated: %s\n", what);
    if (err != NULL && err->status != DPB_OK)
        fprintf(stderr, "  status %s: %s\n", dpb_strstatus(err->status), err->detail);
    abort();
}

/* ---- an in-memory dpb_fs ----------------------------------------------------------------
 * Files are nodes referenced by names and by descriptors (POSIX semantics: an unlinked or
 * renamed-over file stays readable through its open descriptors). One directory, DIR, can
 * be opened (O_DIRECTORY) for fsync. Files are capped at MEMFS_MAX_FILE (ENOSPC). */

#define MEMFS_NAMES 8
#define MEMFS_FDS 16
#define MEMFS_FD_BASE 100
#define MEMFS_MAX_FILE ((size_t)64 << 20)

typedef struct {
    unsigned char *b;
    size_t n, cap;
    int refs;
} mnode;

typedef struct {
    char *name; /* NULL: free slot */
    mnode *node;
} mname;

typedef struct {
    int used, is_dir, append;
    mnode *node;
    size_t pos;
} mfd;

typedef struct {
    const char *dir;
    mname names[MEMFS_NAMES];
    mfd fds[MEMFS_FDS];
} memfs;

static void node_unref(mnode *nd)
{
    if (nd != NULL && --nd->refs == 0) {
        free(nd->b);
        free(nd);
    }
}

static mname *name_find(memfs *m, const char *path)
{
    for (int i = 0; i < MEMFS_NAMES; i++)
        if (m->names[i].name != NULL && strcmp(m->names[i].name, path) == 0)
            return &m->names[i];
    return NULL;
}

static mname *name_free_slot(memfs *m)
{
    for (int i = 0; i < MEMFS_NAMES; i++)
        if (m->names[i].name == NULL)
            return &m->names[i];
    return NULL;
}

static void name_drop(mname *e)
{
    free(e->name);
    e->name = NULL;
    node_unref(e->node);
    e->node = NULL;
}

static mfd *fd_get(memfs *m, int fd)
{
    int i = fd - MEMFS_FD_BASE;
    if (i < 0 || i >= MEMFS_FDS || !m->fds[i].used)
        return NULL;
    return &m->fds[i];
}

static int node_reserve(mnode *nd, size_t need)
{
    if (need > MEMFS_MAX_FILE) {
        errno = ENOSPC;
        return -1;
    }
    if (need <= nd->cap)
        return 0;
    size_t cap = nd->cap ? nd->cap : 256;
    while (cap < need)
        cap *= 2;
    unsigned char *b = realloc(nd->b, cap);
    if (b == NULL) {
        errno = ENOMEM;
        return -1;
    }
    nd->b = b;
    nd->cap = cap;
    return 0;
}

/* Create (or replace) the file path with the given bytes. Returns 0 or -1. */
static int memfs_put(memfs *m, const char *path, const void *data, size_t n)
{
    mname *e = name_find(m, path);
    if (e != NULL)
        name_drop(e);
    e = name_free_slot(m);
    mnode *nd = calloc(1, sizeof *nd);
    char *s = strdup(path);
    if (e == NULL || nd == NULL || s == NULL || node_reserve(nd, n ? n : 1) != 0) {
        if (nd != NULL)
            free(nd->b);
        free(nd);
        free(s);
        return -1;
    }
    if (n > 0)
        memcpy(nd->b, data, n);
    nd->n = n;
    nd->refs = 1;
    e->name = s;
    e->node = nd;
    return 0;
}

/* The current contents of path, or NULL (borrowed). */
static const mnode *memfs_get(memfs *m, const char *path)
{
    mname *e = name_find(m, path);
    return e ? e->node : NULL;
}

/* Drop every name and descriptor (a fresh, empty DIR). */
static void memfs_reset(memfs *m)
{
    for (int i = 0; i < MEMFS_FDS; i++)
        if (m->fds[i].used) {
            node_unref(m->fds[i].node);
            memset(&m->fds[i], 0, sizeof m->fds[i]);
        }
    for (int i = 0; i < MEMFS_NAMES; i++)
        if (m->names[i].name != NULL)
            name_drop(&m->names[i]);
}

static int m_open(void *ctx, const char *path, int flags, int mode)
{
    memfs *m = ctx;
    (void)mode;
    int slot = -1;
    for (int i = 0; i < MEMFS_FDS && slot < 0; i++)
        if (!m->fds[i].used)
            slot = i;
    if (slot < 0) {
        errno = EMFILE;
        return -1;
    }
    mfd *f = &m->fds[slot];
    if (flags & O_DIRECTORY) {
        if (strcmp(path, m->dir) != 0) {
            errno = ENOENT;
            return -1;
        }
        memset(f, 0, sizeof *f);
        f->used = f->is_dir = 1;
        return MEMFS_FD_BASE + slot;
    }
    mname *e = name_find(m, path);
    if (e == NULL) {
        if (!(flags & O_CREAT)) {
            errno = ENOENT;
            return -1;
        }
        if (memfs_put(m, path, NULL, 0) != 0) {
            errno = ENOMEM;
            return -1;
        }
        e = name_find(m, path);
    } else if (flags & O_TRUNC) {
        e->node->n = 0;
    }
    memset(f, 0, sizeof *f);
    f->used = 1;
    f->append = (flags & O_APPEND) != 0;
    f->node = e->node;
    e->node->refs++;
    return MEMFS_FD_BASE + slot;
}

static ssize_t m_write(void *ctx, int fd, const void *buf, size_t n)
{
    mfd *f = fd_get(ctx, fd);
    if (f == NULL || f->is_dir) {
        errno = EBADF;
        return -1;
    }
    mnode *nd = f->node;
    size_t off = f->append ? nd->n : f->pos;
    if (node_reserve(nd, off + n) != 0)
        return -1;
    if (off > nd->n)
        memset(nd->b + nd->n, 0, off - nd->n);
    memcpy(nd->b + off, buf, n);
    if (off + n > nd->n)
        nd->n = off + n;
    f->pos = off + n;
    return (ssize_t)n;
}

static ssize_t m_pread(void *ctx, int fd, void *buf, size_t n, off_t off)
{
    mfd *f = fd_get(ctx, fd);
    if (f == NULL || f->is_dir || off < 0) {
        errno = f == NULL ? EBADF : EINVAL;
        return -1;
    }
    const mnode *nd = f->node;
    if ((uint64_t)off >= nd->n)
        return 0;
    size_t k = nd->n - (size_t)off;
    if (k > n)
        k = n;
    memcpy(buf, nd->b + off, k);
    return (ssize_t)k;
}

static int m_sync(void *ctx, int fd)
{
    if (fd_get(ctx, fd) == NULL) {
        errno = EBADF;
        return -1;
    }
    return 0;
}

static int m_close(void *ctx, int fd)
{
    mfd *f = fd_get(ctx, fd);
    if (f == NULL) {
        errno = EBADF;
        return -1;
    }
    node_unref(f->node);
    memset(f, 0, sizeof *f);
    return 0;
}

static int m_rename(void *ctx, const char *from, const char *to)
{
    memfs *m = ctx;
    mname *src = name_find(m, from);
    if (src == NULL) {
        errno = ENOENT;
        return -1;
    }
    if (strcmp(from, to) == 0)
        return 0;
    mname *dst = name_find(m, to);
    if (dst != NULL) {
        node_unref(dst->node);
        dst->node = src->node;
        src->node = NULL;
        free(src->name);
        src->name = NULL;
        return 0;
    }
    char *s = strdup(to);
    if (s == NULL) {
        errno = ENOMEM;
        return -1;
    }
    free(src->name);
    src->name = s;
    return 0;
}

static int m_unlink(void *ctx, const char *path)
{
    mname *e = name_find(ctx, path);
    if (e == NULL) {
        errno = ENOENT;
        return -1;
    }
    name_drop(e);
    return 0;
}

static int m_ftruncate(void *ctx, int fd, off_t len)
{
    mfd *f = fd_get(ctx, fd);
    if (f == NULL || f->is_dir || len < 0) {
        errno = f == NULL ? EBADF : EINVAL;
        return -1;
    }
    mnode *nd = f->node;
    if ((size_t)len > nd->n) {
        if (node_reserve(nd, (size_t)len) != 0)
            return -1;
        memset(nd->b + nd->n, 0, (size_t)len - nd->n);
    }
    nd->n = (size_t)len;
    return 0;
}

static int m_fstat_size(void *ctx, int fd, off_t *size)
{
    mfd *f = fd_get(ctx, fd);
    if (f == NULL || f->is_dir) {
        errno = EBADF;
        return -1;
    }
    *size = (off_t)f->node->n;
    return 0;
}

/* ---- state shared by all inputs ------------------------------------------------------- */

static memfs the_fs;
static dpb_fs the_dpb_fs = {.open = m_open,
                            .write = m_write,
                            .pread = m_pread,
                            .fdatasync = m_sync,
                            .fsync = m_sync,
                            .close = m_close,
                            .rename = m_rename,
                            .unlink = m_unlink,
                            .ftruncate = m_ftruncate,
                            .fstat_size = m_fstat_size,
                            .ctx = &the_fs};
static char dir[64];      /* a real, empty directory: ledger_open mkdirs it (EEXIST) */
static char wal_path[96]; /* dir/wal.log */
static char snap_path[96];

static void remove_dir(void)
{
    (void)rmdir(dir); /* fails harmlessly while another run uses it or if it is not empty */
}

static void init_once(void)
{
    gsl_set_error_handler_off(); /* as main() does */
    /* One fixed name, so that runs killed by a crash leave at most this empty directory. */
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dpb-fuzz-wal", tmp && tmp[0] && strlen(tmp) < 40 ? tmp : "/tmp");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        perror("fuzz_wal: mkdir");
        abort();
    }
    atexit(remove_dir);
    snprintf(wal_path, sizeof wal_path, "%s/wal.log", dir);
    snprintf(snap_path, sizeof snap_path, "%s/snapshot", dir);
    the_fs.dir = dir;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* ---- 1. the log alone ------------------------------------------------------------------ */

typedef struct {
    uint64_t after, last, count;
} replay_check;

static int check_record(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    replay_check *c = ctx;
    (void)type;
    if (payload == NULL)
        invariant_failed("replay: NULL payload", NULL);
    if (len > WAL_MAX_PAYLOAD)
        invariant_failed("replay: payload longer than WAL_MAX_PAYLOAD", NULL);
    if (seq != (c->count == 0 ? c->after + 1 : c->last + 1))
        invariant_failed("replay: seqs not consecutive from after_seq + 1", NULL);
    volatile unsigned char sink = 0;
    const unsigned char *p = payload;
    for (size_t i = 0; i < len; i++) /* ASan: every byte of the payload is readable */
        sink ^= p[i];
    (void)sink;
    c->last = seq;
    c->count++;
    return 0;
}

static void wal_once(const uint8_t *data, size_t size, uint64_t after)
{
    memfs_reset(&the_fs);
    if (memfs_put(&the_fs, wal_path, data, size) != 0)
        return;
    replay_check c = {after, 0, 0};
    wal *w = NULL;
    uint64_t next = 0;
    dpb_error err = {0};
    dpb_status st = wal_open(dir, &the_dpb_fs, after, check_record, &c, &w, &next, &err);
    if (st != DPB_OK) {
        if (w != NULL)
            invariant_failed("wal_open failed but returned a wal", &err);
        if (st != DPB_ECORRUPT && st != DPB_ENOMEM && st != DPB_EIO)
            invariant_failed("wal_open failed with an unexpected status", &err);
        return;
    }
    if (next != (c.count ? c.last + 1 : after + 1))
        invariant_failed("wal_open: next_seq is not the seq after the last record", NULL);
    const mnode *f = memfs_get(&the_fs, wal_path);
    if (f == NULL || f->n != wal_size_bytes(w) || f->n > size)
        invariant_failed("wal_open: the file is not cut to the recovered records", NULL);
    if ((c.count == 0) != (f->n == 0) && after == 0)
        invariant_failed("wal_open: records replayed but the log is empty (or not)", NULL);

    /* The recovered log takes an append and recovers again with exactly one more record. */
    uint64_t seq = 0;
    static const char extra[] = "fuzz";
    if (wal_append(w, 200, extra, sizeof extra, &seq) != DPB_OK || seq != next ||
        wal_sync(w, seq) != DPB_OK)
        invariant_failed("append to a recovered log failed", NULL);
    wal_close(w);
    replay_check c2 = {after, 0, 0};
    w = NULL;
    uint64_t next2 = 0;
    dpb_error err2 = {0};
    if (wal_open(dir, &the_dpb_fs, after, check_record, &c2, &w, &next2, &err2) != DPB_OK)
        invariant_failed("a recovered log plus one append does not recover", &err2);
    if (c2.count != c.count + 1 || c2.last != seq || next2 != seq + 1)
        invariant_failed("the second recovery is not the first plus the appended record", NULL);
    wal_close(w);
}

/* ---- 2. the snapshot file alone ------------------------------------------------------- */

static void snapshot_once(const uint8_t *data, size_t size)
{
    memfs_reset(&the_fs);
    if (memfs_put(&the_fs, snap_path, data, size) != 0)
        return;
    uint64_t seq = 0;
    void *p = NULL;
    size_t len = 0;
    dpb_error err = {0};
    dpb_status st = snapshot_read(dir, &the_dpb_fs, &seq, &p, &len, &err);
    if (st != DPB_OK) {
        if (p != NULL)
            invariant_failed("snapshot_read failed but returned data", &err);
        return;
    }
    if (p == NULL || size < SNAPSHOT_HEADER_BYTES || len != size - SNAPSHOT_HEADER_BYTES ||
        memcmp(p, data + SNAPSHOT_HEADER_BYTES, len) != 0)
        invariant_failed("snapshot_read: the payload is not the file minus its header", NULL);
    /* write it back and read it again */
    if (snapshot_write(dir, &the_dpb_fs, seq, p, len, &err) != DPB_OK)
        invariant_failed("snapshot_write of a payload just read failed", &err);
    uint64_t seq2 = 0;
    void *p2 = NULL;
    size_t len2 = 0;
    if (snapshot_read(dir, &the_dpb_fs, &seq2, &p2, &len2, &err) != DPB_OK || seq2 != seq ||
        len2 != len || memcmp(p, p2, len) != 0)
        invariant_failed("snapshot_write + snapshot_read does not give the payload back", &err);
    free(p);
    free(p2);
}

/* ---- 3. ledger recovery ---------------------------------------------------------------- */

#define LIST_MAX 64

typedef struct {
    ledger_summary sum;
    size_t n, total;
    ledger_client cl[LIST_MAX];
} ledger_view;

static void view_of(ledger *l, ledger_view *v)
{
    memset(v, 0, sizeof *v);
    ledger_get_summary(l, &v->sum);
    ledger_query q = {-1, NULL, LEDGER_SORT_ID, 0, 0, LIST_MAX};
    uint64_t version = 0;
    if (ledger_list(l, &q, v->cl, &v->n, &v->total, &version) != DPB_OK)
        invariant_failed("ledger_list failed on a recovered ledger", NULL);
    if (v->n > LIST_MAX || v->n > v->total || v->total != v->sum.clients)
        invariant_failed("ledger_list and ledger_get_summary disagree", NULL);
}

/* Equal as stored: doubles compared bit for bit (NaN payloads included). */
static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void compare_views(const ledger_view *a, const ledger_view *b)
{
    const ledger_summary *s = &a->sum, *t = &b->sum;
    if (s->clients != t->clients || s->active != t->active || s->exhausted != t->exhausted ||
        s->uncertified != t->uncertified || s->stuck != t->stuck || s->rounds != t->rounds ||
        s->version != t->version || memcmp(s->spend_hist, t->spend_hist, sizeof s->spend_hist) != 0)
        invariant_failed("ledger summary differs after close (snapshot) and recovery", NULL);
    if (a->n != b->n || a->total != b->total)
        invariant_failed("client list differs after close (snapshot) and recovery", NULL);
    for (size_t i = 0; i < a->n; i++) {
        const ledger_client *x = &a->cl[i], *y = &b->cl[i];
        if (strcmp(x->id, y->id) != 0 || !same_double(x->epsilon, y->epsilon) ||
            !same_double(x->delta, y->delta) || x->mode != y->mode || x->relation != y->relation ||
            strcmp(x->labels, y->labels) != 0 || !same_double(x->spent, y->spent) ||
            !same_double(x->remaining, y->remaining) || !same_double(x->delta_tv, y->delta_tv) ||
            x->rounds != y->rounds || x->version != y->version || x->status != y->status ||
            x->stuck_since != y->stuck_since || strcmp(x->stuck_round, y->stuck_round) != 0) {
            fprintf(stderr, "client '%s': spent %.17g vs %.17g, rounds %llu vs %llu\n", x->id,
                    x->spent, y->spent, (unsigned long long)x->rounds,
                    (unsigned long long)y->rounds);
            invariant_failed("a client differs after close (snapshot) and recovery", NULL);
        }
    }
}

/* Recover a ledger from what the_fs holds; if it recovers, close it (snapshot + truncated
 * log) and recover again: the same ledger must come back. */
static void ledger_recover(void)
{
    ledger_options o = {0};
    o.dir = dir;
    o.fs = &the_dpb_fs;
    ledger *l = NULL;
    dpb_error err = {0};
    if (ledger_open(&o, &l, &err) != DPB_OK)
        return;
    static ledger_view v1, v2;
    view_of(l, &v1);
    ledger_close(l);
    l = NULL;
    dpb_error err2 = {0};
    if (ledger_open(&o, &l, &err2) != DPB_OK)
        invariant_failed("a ledger that recovered and closed does not recover again", &err2);
    view_of(l, &v2);
    compare_views(&v1, &v2);
    ledger_close_nosnapshot(l);
}

/* The input with the CRC of each complete record recomputed, so that the payloads reach the
 * ledger's record decoder. Returns a malloc'ed copy or NULL. */
static unsigned char *fix_wal_crcs(const uint8_t *data, size_t size)
{
    unsigned char *b = malloc(size ? size : 1);
    if (b == NULL)
        return NULL;
    memcpy(b, data, size);
    size_t off = 0;
    while (size - off >= WAL_HEADER_BYTES) {
        uint32_t len = le32(b + off);
        if (len > WAL_MAX_PAYLOAD || size - off - WAL_HEADER_BYTES < len)
            break;
        uint32_t crc = dpb_crc32c(0, b + off + 8, 9);
        crc = dpb_crc32c(crc, b + off + WAL_HEADER_BYTES, len);
        put_le(b + off + 4, crc, 4);
        off += WAL_HEADER_BYTES + len;
    }
    return b;
}

static void ledger_from_wal(const uint8_t *data, size_t size)
{
    unsigned char *fixed = fix_wal_crcs(data, size);
    if (fixed == NULL)
        return;
    memfs_reset(&the_fs);
    if (memfs_put(&the_fs, wal_path, fixed, size) == 0)
        ledger_recover();
    free(fixed);
}

static void ledger_from_snapshot(const uint8_t *data, size_t size)
{
    int v1 = size >= SNAPSHOT_HEADER_BYTES && memcmp(data, "DPBSNAP1", 8) == 0;
    if (size < SNAPSHOT_HEADER_BYTES || (!v1 && memcmp(data, "DPBSNAP2", 8) != 0))
        return;
    unsigned char *b = malloc(size);
    if (b == NULL)
        return;
    memcpy(b, data, size);
    size_t n = size - SNAPSHOT_HEADER_BYTES;
    put_le(b + 8, v1 ? 1u : SNAPSHOT_VERSION, 4);
    put_le(b + 20, n, 8);
    /* format 1: the payload's checksum; format 2: the header's first 28 bytes too */
    uint32_t crc = v1 ? 0 : dpb_crc32c(0, b, 28);
    put_le(b + 28, dpb_crc32c(crc, b + SNAPSHOT_HEADER_BYTES, n), 4);
    memfs_reset(&the_fs);
    if (memfs_put(&the_fs, snap_path, b, size) == 0)
        ledger_recover();
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int initialised;
    if (!initialised) {
        init_once();
        initialised = 1;
    }
    wal_once(data, size, 0);
    if (size >= WAL_HEADER_BYTES) {
        uint64_t s0 = le64(data + 8);
        if (s0 >= 1 && s0 < ((uint64_t)1 << 40)) {
            wal_once(data, size, s0);
            wal_once(data, size, s0 + 3);
        }
    }
    snapshot_once(data, size);
    ledger_from_wal(data, size);
    ledger_from_snapshot(data, size);
    memfs_reset(&the_fs);
    return 0;
}
