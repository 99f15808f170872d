/* test_wal.c - the ledger's persistence layer: CRC-32C vectors, write-ahead log round trip,
 * torn tails at every byte offset, bit flips (damage vs torn tail), injected EIO / ENOSPC /
 * short writes / failed fdatasync (sticky failure, nothing partial left), group commit
 * under 8 threads, snapshots (round trip, absent, corrupt, crash before rename) and log
 * truncation after a snapshot. Every test works in its own mkdtemp directory under /tmp
 * and removes it. Tests that are not about durability use a file system whose fsync and
 * fdatasync do nothing, to keep the suite fast; the others use the real one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../core/ledger/crc32c.h"
#include "../../core/ledger/fs.h"
#include "../../core/ledger/snapshot.h"
#include "../../core/ledger/wal.h"
#include "suites.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define HDR WAL_HEADER_BYTES

/* ---- temp directories and files ---- */

static int make_dir(char *buf, size_t n)
{
    return tl_make_dir(buf, n, "dpb_wal_");
}

static void remove_dir(const char *dir)
{
    CHECK(tl_remove_dir(dir));
}

static void path_in(char *buf, size_t n, const char *dir, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (f == NULL)
        return NULL;
    size_t cap = 4096;
    unsigned char *b = malloc(cap);
    size_t r;
    while (b != NULL && (r = fread(b + *n, 1, cap - *n, f)) > 0) {
        *n += r;
        if (*n == cap) {
            unsigned char *nb = realloc(b, cap * 2);
            if (nb == NULL) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    return b;
}

static int spit(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    int ok = fwrite(buf, 1, n, f) == n;
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

static int exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* ---- a file system whose syncs do nothing (for tests not about durability) ---- */

static int nosync_open(void *ctx, const char *path, int flags, int mode)
{
    (void)ctx;
    return dpb_fs_posix()->open(NULL, path, flags, mode);
}
static ssize_t nosync_write(void *ctx, int fd, const void *buf, size_t n)
{
    (void)ctx;
    return dpb_fs_posix()->write(NULL, fd, buf, n);
}
static ssize_t nosync_pread(void *ctx, int fd, void *buf, size_t n, off_t off)
{
    (void)ctx;
    return dpb_fs_posix()->pread(NULL, fd, buf, n, off);
}
static int nosync_sync(void *ctx, int fd)
{
    (void)ctx;
    (void)fd;
    return 0;
}
static int nosync_close(void *ctx, int fd)
{
    (void)ctx;
    return dpb_fs_posix()->close(NULL, fd);
}
static int nosync_rename(void *ctx, const char *from, const char *to)
{
    (void)ctx;
    return dpb_fs_posix()->rename(NULL, from, to);
}
static int nosync_unlink(void *ctx, const char *path)
{
    (void)ctx;
    return dpb_fs_posix()->unlink(NULL, path);
}
static int nosync_ftruncate(void *ctx, int fd, off_t len)
{
    (void)ctx;
    return dpb_fs_posix()->ftruncate(NULL, fd, len);
}
static int nosync_fstat_size(void *ctx, int fd, off_t *size)
{
    (void)ctx;
    return dpb_fs_posix()->fstat_size(NULL, fd, size);
}
/* Like nosync_fs, but fdatasync takes a little time and fails (EBADF) on a descriptor that
 * is not open: a sync racing with the descriptor swap of wal_truncate_upto shows up. */
static int slowsync_fdatasync(void *ctx, int fd)
{
    (void)ctx;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
    return fcntl(fd, F_GETFD) == -1 ? -1 : 0;
}
static const dpb_fs slowsync_fs = {
    nosync_open,   nosync_write,  nosync_pread,     slowsync_fdatasync, nosync_sync, nosync_close,
    nosync_rename, nosync_unlink, nosync_ftruncate, nosync_fstat_size,  NULL,
};

static const dpb_fs nosync_fs = {
    nosync_open,   nosync_write,  nosync_pread,     nosync_sync,       nosync_sync, nosync_close,
    nosync_rename, nosync_unlink, nosync_ftruncate, nosync_fstat_size, NULL,
};

/* ---- records: deterministic payloads and a replay collector ---- */

static void fill_payload(unsigned char *p, size_t len, uint64_t tag)
{
    uint64_t x = tag * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)x;
    }
}

typedef struct {
    uint64_t seq;
    uint8_t type;
    size_t len;
    unsigned char *data;
} rec;

typedef struct {
    rec *r;
    size_t n, cap;
    uint64_t refuse_seq; /* return -1 for this seq (0: never) */
} collector;

static int collect(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    collector *c = ctx;
    if (payload == NULL)
        return -2; /* the contract: never NULL */
    if (c->refuse_seq != 0 && seq == c->refuse_seq)
        return -1;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        rec *nr = realloc(c->r, cap * sizeof *nr);
        if (nr == NULL)
            return -3;
        c->r = nr;
        c->cap = cap;
    }
    rec *r = &c->r[c->n++];
    r->seq = seq;
    r->type = type;
    r->len = len;
    r->data = malloc(len ? len : 1);
    if (r->data == NULL)
        return -3;
    memcpy(r->data, payload, len);
    return 0;
}

static void collector_reset(collector *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->r[i].data);
    free(c->r);
    memset(c, 0, sizeof *c);
}

/* The standard test record number k (1-based): type k % 251, payload of size sizes[k-1]
 * filled from tag k. */
static int append_std(wal *w, uint64_t k, size_t len)
{
    unsigned char *p = malloc(len ? len : 1);
    if (p == NULL)
        return -1;
    fill_payload(p, len, k);
    uint64_t seq = 0;
    dpb_status st = wal_append(w, (uint8_t)(k % 251), len ? p : NULL, len, &seq);
    free(p);
    CHECKF(st == DPB_OK, "append %llu: %s", (unsigned long long)k, dpb_strstatus(st));
    CHECKF(seq == k, "append returned seq %llu, want %llu", (unsigned long long)seq,
           (unsigned long long)k);
    return st == DPB_OK ? 0 : -1;
}

/* Does c hold exactly the standard records first..last with these sizes? */
static int check_std(const collector *c, uint64_t first, uint64_t last, const size_t *sizes)
{
    int ok = 1;
    size_t want = last >= first ? (size_t)(last - first + 1) : 0;
    if (c->n != want) {
        CHECKF(0, "replayed %zu records, want %zu (seq %llu..%llu)", c->n, want,
               (unsigned long long)first, (unsigned long long)last);
        return 0;
    }
    for (size_t i = 0; i < c->n; i++) {
        uint64_t k = first + i;
        const rec *r = &c->r[i];
        size_t len = sizes[k - 1];
        unsigned char *p = malloc(len ? len : 1);
        if (p == NULL)
            return 0;
        fill_payload(p, len, k);
        if (r->seq != k || r->type != (uint8_t)(k % 251) || r->len != len ||
            memcmp(r->data, p, len) != 0) {
            CHECKF(0, "record %zu: seq %llu type %u len %zu, want seq %llu len %zu", i,
                   (unsigned long long)r->seq, r->type, r->len, (unsigned long long)k, len);
            ok = 0;
        }
        free(p);
        if (!ok)
            break;
    }
    return ok;
}

/* Open dir's log with fs, collecting into c (reset first). */
static dpb_status reopen(const char *dir, const dpb_fs *fs, uint64_t after, collector *c, wal **w,
                         uint64_t *next, dpb_error *err)
{
    collector_reset(c);
    dpb_error_clear(err);
    return wal_open(dir, fs, after, collect, c, w, next, err);
}

/* ---- CRC-32C ---- */

static uint32_t crc_bitwise(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void wal_crc32c_vectors(void)
{
    /* The check value, with the convention of crc32c.h: crc = 0 to start. */
    CHECK(dpb_crc32c(0, "123456789", 9) == 0xE3069283u);
    /* Empty input leaves the CRC unchanged (NULL allowed). */
    CHECK(dpb_crc32c(0, NULL, 0) == 0);
    CHECK(dpb_crc32c(0, "", 0) == 0);
    CHECK(dpb_crc32c(0xE3069283u, "x", 0) == 0xE3069283u);
    /* RFC 3720 B.4 vectors. */
    unsigned char b[32];
    memset(b, 0, sizeof b);
    CHECK(dpb_crc32c(0, b, 32) == 0x8A9136AAu);
    memset(b, 0xFF, sizeof b);
    CHECK(dpb_crc32c(0, b, 32) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)i;
    CHECK(dpb_crc32c(0, b, 32) == 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (unsigned char)(31 - i);
    CHECK(dpb_crc32c(0, b, 32) == 0x113FDB5Cu);
    /* "The quick brown fox jumps over the lazy dog" (a widely published value). */
    const char *fox = "The quick brown fox jumps over the lazy dog";
    CHECK(dpb_crc32c(0, fox, strlen(fox)) == 0x22620404u);
    /* Every table entry, against the bit-by-bit definition. */
    for (int v = 0; v < 256; v++) {
        unsigned char c = (unsigned char)v;
        CHECKF(dpb_crc32c(0, &c, 1) == crc_bitwise(&c, 1), "byte %d", v);
    }
    /* A buffer split in two at every point equals one call; random buffers match. */
    unsigned char big[1000];
    fill_payload(big, sizeof big, 7);
    uint32_t whole = dpb_crc32c(0, big, sizeof big);
    CHECK(whole == crc_bitwise(big, sizeof big));
    for (size_t cut = 0; cut <= sizeof big; cut++) {
        uint32_t two = dpb_crc32c(dpb_crc32c(0, big, cut), big + cut, sizeof big - cut);
        CHECKF(two == whole, "split at %zu", cut);
    }
    /* Both ways (the crc32 instruction where the processor has it, and the table) against
     * the bit-by-bit definition, every length to 64 at every alignment, from any start. */
    for (size_t at = 0; at < 8; at++)
        for (size_t n = 0; n <= 64; n++) {
            uint32_t want = crc_bitwise(big + at, n);
            CHECKF(dpb_crc32c(0, big + at, n) == want, "offset %zu, %zu bytes", at, n);
            CHECKF(dpb_crc32c_table(0, big + at, n) == want, "table, offset %zu, %zu bytes", at, n);
            CHECKF(dpb_crc32c(0x12345678u, big + at, n) ==
                       dpb_crc32c_table(0x12345678u, big + at, n),
                   "continued, offset %zu, %zu bytes", at, n);
        }
    printf("  [wal] crc32c: %s\n",
           dpb_crc32c_hw() ? "the crc32 instruction (SSE4.2)" : "the table");
    /* A zero-filled region is never a valid log record (zeros after a crash: torn tail):
     * the CRC of 9 zero bytes (seq 0, type 0) is not 0. */
    memset(b, 0, sizeof b);
    CHECK(dpb_crc32c(0, b, 9) != 0);
}

/* ---- round trip ---- */

static const size_t rt_sizes[] = {0, 1,    17, 100, 4000,  0, 70000, 3,  255, 256,
                                  0, 1024, 9,  0,   65536, 5, 12,    33, 0,   777};

static void wal_roundtrip_and_after_seq(void)
{
    char dir[64], path[128];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    path_in(path, sizeof path, dir, "wal.log");
    const size_t n = N(rt_sizes);
    collector c = {0};
    dpb_error err = {0};
    wal *w = NULL;
    uint64_t next = 0;

    CHECK(reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_OK);
    CHECK(next == 1 && c.n == 0 && w != NULL);
    if (w == NULL)
        goto out;
    CHECK(wal_size_bytes(w) == 0 && !wal_failed(w));
    size_t bytes = 0;
    for (uint64_t k = 1; k <= n; k++) {
        append_std(w, k, rt_sizes[k - 1]);
        bytes += HDR + rt_sizes[k - 1];
    }
    CHECK(wal_size_bytes(w) == bytes);
    CHECK(wal_sync(w, n) == DPB_OK);
    CHECK(wal_append(w, 1, NULL, 5, NULL) == DPB_EINVAL); /* NULL payload with len > 0 */
    CHECK(wal_append(w, 1, "x", (size_t)WAL_MAX_PAYLOAD + 1, NULL) == DPB_EINVAL);
    CHECK(!wal_failed(w)); /* argument errors are not I/O failures */
    wal_close(w);
    w = NULL;
    CHECK(file_size(path) == (long)bytes);

    /* Everything, in order. */
    CHECK(reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_OK);
    CHECK(check_std(&c, 1, n, rt_sizes));
    CHECK(next == n + 1);
    wal_close(w);
    w = NULL;

    /* after_seq skips the covered records; the next seq is unchanged. */
    CHECK(reopen(dir, &nosync_fs, 7, &c, &w, &next, &err) == DPB_OK);
    CHECK(check_std(&c, 8, n, rt_sizes));
    CHECK(next == n + 1);
    /* Appending after a reopen continues the sequence. */
    append_std(w, n + 1, 0);
    wal_close(w);
    w = NULL;
    CHECK(reopen(dir, &nosync_fs, n, &c, &w, &next, &err) == DPB_OK);
    CHECK(c.n == 1 && c.r[0].seq == n + 1 && c.r[0].len == 0);
    CHECK(next == n + 2);
    wal_close(w);
    w = NULL;

    /* A replay function that refuses a record aborts with ECORRUPT naming its offset. */
    collector_reset(&c);
    dpb_error_clear(&err);
    c.refuse_seq = 3;
    CHECK(wal_open(dir, &nosync_fs, 0, collect, &c, &w, &next, &err) == DPB_ECORRUPT);
    CHECK(w == NULL);
    char want[64];
    snprintf(want, sizeof want, "byte offset %zu ", 2 * HDR + rt_sizes[0] + rt_sizes[1]);
    CHECKF(strstr(err.detail, want) != NULL && strstr(err.detail, path) != NULL, "%s", err.detail);
    CHECK(file_size(path) == (long)(bytes + HDR)); /* untouched */

    /* A NULL replay function only checks. */
    dpb_error_clear(&err);
    CHECK(wal_open(dir, &nosync_fs, 0, NULL, NULL, &w, &next, &err) == DPB_OK);
    CHECK(next == n + 2);
    wal_close(w);
    w = NULL;
out:
    collector_reset(&c);
    remove_dir(dir);
}

/* ---- torn tails ---- */

static const size_t torn_sizes[] = {10, 0, 300, 7, 3, 20, 5};

static void wal_torn_tail_every_offset(void)
{
    char dir[64], path[128];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    path_in(path, sizeof path, dir, "wal.log");
    const size_t n = N(torn_sizes) - 1; /* the last size is for the append after recovery */
    collector c = {0};
    dpb_error err = {0};
    wal *w = NULL;
    uint64_t next = 0;
    unsigned char *full = NULL;
    size_t full_len = 0;
    size_t ends[16];

    CHECK(reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_OK);
    if (w == NULL)
        goto out;
    size_t off = 0;
    for (uint64_t k = 1; k <= n; k++) {
        append_std(w, k, torn_sizes[k - 1]);
        off += HDR + torn_sizes[k - 1];
        ends[k - 1] = off;
    }
    wal_close(w);
    w = NULL;
    full = slurp(path, &full_len);
    CHECK(full != NULL && full_len == off);
    if (full == NULL)
        goto out;

    /* Every cut of the file (the brief asks for the last two records; every offset of the
     * whole file costs little more), and the uncut file as a control. */
    int bad = 0;
    for (size_t cut = 0; cut <= full_len && bad < 5; cut++) {
        size_t complete = 0;
        while (complete < n && ends[complete] <= cut)
            complete++;
        size_t valid = complete ? ends[complete - 1] : 0;
        if (spit(path, full, cut) != 0) {
            CHECK(0);
            break;
        }
        dpb_status st = reopen(dir, &nosync_fs, 0, &c, &w, &next, &err);
        int ok = st == DPB_OK && check_std(&c, 1, complete, torn_sizes) && next == complete + 1 &&
                 file_size(path) == (long)valid && wal_size_bytes(w) == valid;
        if (ok)
            ok = append_std(w, complete + 1, torn_sizes[n]) == 0 &&
                 wal_sync(w, UINT64_MAX) == DPB_OK;
        wal_close(w);
        w = NULL;
        if (ok) {
            /* The record appended after recovery survives another reopen. */
            size_t sizes2[16];
            memcpy(sizes2, torn_sizes, sizeof torn_sizes);
            sizes2[complete] = torn_sizes[n];
            ok = reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_OK &&
                 check_std(&c, 1, complete + 1, sizes2) && next == complete + 2;
            wal_close(w);
            w = NULL;
        }
        if (!ok) {
            bad++;
            CHECKF(0, "cut at %zu of %zu: %s %s", cut, full_len, dpb_strstatus(st), err.detail);
        }
    }

    /* A zero-filled or 0xFF-filled tail (what some file systems show after a crash) is a
     * torn tail too. */
    for (int fillv = 0; fillv <= 0xFF; fillv += 0xFF) {
        unsigned char *b = malloc(full_len + 4096);
        if (b == NULL)
            break;
        memcpy(b, full, full_len);
        memset(b + full_len, fillv, 4096);
        CHECK(spit(path, b, full_len + 4096) == 0);
        free(b);
        CHECK(reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_OK);
        CHECKF(check_std(&c, 1, n, torn_sizes), "fill 0x%02X", fillv);
        CHECK(file_size(path) == (long)full_len);
        wal_close(w);
        w = NULL;
    }
out:
    free(full);
    collector_reset(&c);
    remove_dir(dir);
}

/* ---- bit flips: damage in the middle vs a torn tail ---- */

static const size_t flip_sizes[] = {12, 40, 25, 33, 18};

static void wal_bit_flips(void)
{
    char dir[64], path[128];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    path_in(path, sizeof path, dir, "wal.log");
    const size_t n = N(flip_sizes);
    collector c = {0};
    dpb_error err = {0};
    wal *w = NULL;
    uint64_t next = 0;
    unsigned char *base = NULL, *b = NULL, *after = NULL;
    size_t len = 0, alen = 0;
    size_t starts[8];

    CHECK(reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_OK);
    if (w == NULL)
        goto out;
    size_t off = 0;
    for (uint64_t k = 1; k <= n; k++) {
        starts[k - 1] = off;
        append_std(w, k, flip_sizes[k - 1]);
        off += HDR + flip_sizes[k - 1];
    }
    wal_close(w);
    w = NULL;
    base = slurp(path, &len);
    b = malloc(len);
    if (base == NULL || b == NULL) {
        CHECK(0);
        goto out;
    }

    /* Positions inside a record: len (low and high byte), crc, seq (low and high byte),
     * type, first and last payload byte. */
    for (int which = 0; which < 2; which++) {
        size_t idx = which == 0 ? 2 : n - 1; /* a middle record, then the last one */
        size_t rs = starts[idx];
        size_t pos[] = {0, 3, 4, 7, 8, 15, 16, 17, HDR + flip_sizes[idx] - 1};
        for (size_t i = 0; i < N(pos); i++)
            for (int bit = 0; bit < 8; bit += 7) {
                memcpy(b, base, len);
                b[rs + pos[i]] ^= (unsigned char)(1u << bit);
                CHECK(spit(path, b, len) == 0);
                dpb_status st = reopen(dir, &nosync_fs, 0, &c, &w, &next, &err);
                if (which == 0) {
                    char want[64];
                    snprintf(want, sizeof want, "byte offset %zu ", rs);
                    CHECKF(st == DPB_ECORRUPT, "middle, pos %zu bit %d: %s", pos[i], bit,
                           dpb_strstatus(st));
                    CHECKF(strstr(err.detail, path) != NULL && strstr(err.detail, want) != NULL,
                           "pos %zu bit %d: detail \"%s\"", pos[i], bit, err.detail);
                    CHECK(w == NULL);
                    /* The file is left as it is. */
                    free(after);
                    after = slurp(path, &alen);
                    CHECK(after != NULL && alen == len && memcmp(after, b, len) == 0);
                } else {
                    CHECKF(st == DPB_OK, "last, pos %zu bit %d: %s %s", pos[i], bit,
                           dpb_strstatus(st), err.detail);
                    CHECK(check_std(&c, 1, n - 1, flip_sizes));
                    CHECK(next == n);
                    CHECK(file_size(path) == (long)rs);
                }
                wal_close(w);
                w = NULL;
            }
    }

    /* A record with a good CRC but a non-consecutive seq: damage in the middle, a torn
     * tail at the end. */
    for (int which = 0; which < 2; which++) {
        size_t idx = which == 0 ? 2 : n - 1;
        size_t rs = starts[idx];
        memcpy(b, base, len);
        b[rs + 8] ^= 0x40; /* seq + 64 */
        uint32_t crc = dpb_crc32c(0, b + rs + 8, 9 + flip_sizes[idx]);
        for (int i = 0; i < 4; i++)
            b[rs + 4 + i] = (unsigned char)(crc >> (8 * i));
        CHECK(spit(path, b, len) == 0);
        dpb_status st = reopen(dir, &nosync_fs, 0, &c, &w, &next, &err);
        if (which == 0) {
            CHECKF(st == DPB_ECORRUPT && strstr(err.detail, "seq") != NULL, "%s", err.detail);
        } else {
            CHECK(st == DPB_OK && check_std(&c, 1, n - 1, flip_sizes));
            CHECK(file_size(path) == (long)rs);
        }
        wal_close(w);
        w = NULL;
    }
out:
    free(base);
    free(b);
    free(after);
    collector_reset(&c);
    remove_dir(dir);
}

/* ---- injected faults ---- */

typedef struct {
    const char *name;
    dpb_fs_op op;
    int err;
    unsigned flags;
    int ftruncate_fails; /* the rollback ftruncate fails too */
    size_t survivors;    /* records present after reopening */
} fault_case;

static void wal_fault_injection(void)
{
    /* Each case: 4 records appended and synced, 2 more appended unsynced, then the fault:
     * the 7th append's write (write faults) or the 5th fdatasync (sync faults). */
    const fault_case cases[] = {
        {"EIO on write", DPB_FS_WRITE, EIO, 0, 0, 4},
        {"ENOSPC on write", DPB_FS_WRITE, ENOSPC, 0, 0, 4},
        {"short write then ENOSPC", DPB_FS_WRITE, ENOSPC, DPB_FS_FAULT_SHORT, 0, 4},
        {"EIO on fdatasync", DPB_FS_FDATASYNC, EIO, 0, 0, 4},
        {"ENOSPC on fdatasync", DPB_FS_FDATASYNC, ENOSPC, 0, 0, 4},
        /* The rollback fails too: the 2 unsynced complete records stay, the partial 7th
         * is dropped as a torn tail by recovery. */
        {"short write, ftruncate fails", DPB_FS_WRITE, EIO, DPB_FS_FAULT_SHORT, 1, 6},
    };
    const size_t sizes[] = {100, 0, 250, 31, 64, 1000, 500, 42};
    for (size_t ci = 0; ci < N(cases); ci++) {
        const fault_case *fc = &cases[ci];
        char dir[64], path[128];
        if (make_dir(dir, sizeof dir) != 0)
            return;
        path_in(path, sizeof path, dir, "wal.log");
        long countdown = fc->op == DPB_FS_WRITE ? 6 : 4;
        dpb_fs_fault *f = dpb_fs_fault_new(dpb_fs_posix(), fc->op, countdown, fc->err, fc->flags);
        dpb_fs_fault *f2 = f && fc->ftruncate_fails
                               ? dpb_fs_fault_new(dpb_fs_fault_fs(f), DPB_FS_FTRUNCATE, 0, EIO, 0)
                               : NULL;
        const dpb_fs *fs = f2 ? dpb_fs_fault_fs(f2) : f ? dpb_fs_fault_fs(f) : NULL;
        collector c = {0};
        dpb_error err = {0};
        wal *w = NULL;
        uint64_t next = 0;
        CHECK(fs != NULL);
        if (fs == NULL || reopen(dir, fs, 0, &c, &w, &next, &err) != DPB_OK) {
            CHECKF(0, "%s: open", fc->name);
            goto next_case;
        }
        size_t synced_bytes = 0;
        for (uint64_t k = 1; k <= 4; k++) {
            append_std(w, k, sizes[k - 1]);
            CHECK(wal_sync(w, k) == DPB_OK);
            synced_bytes += HDR + sizes[k - 1];
        }
        append_std(w, 5, sizes[4]);
        append_std(w, 6, sizes[5]);
        dpb_status st;
        if (fc->op == DPB_FS_WRITE) {
            unsigned char p[500];
            fill_payload(p, sizeof p, 7);
            st = wal_append(w, 7, p, sizeof p, NULL);
        } else {
            st = wal_sync(w, 6);
        }
        CHECKF(st == DPB_EIO, "%s: the faulting call returned %s", fc->name, dpb_strstatus(st));
        CHECKF(wal_failed(w), "%s", fc->name);
        CHECKF(dpb_fs_fault_fired(f) >= 1, "%s", fc->name);
        dpb_error we;
        CHECK(wal_error(w, &we) == DPB_EIO);
        CHECKF(strstr(we.detail, path) != NULL &&
                   strstr(we.detail, fc->op == DPB_FS_WRITE ? "write" : "fdatasync") != NULL,
               "%s: detail \"%s\"", fc->name, we.detail);
        if (!fc->ftruncate_fails)
            CHECKF(file_size(path) == (long)synced_bytes, "%s: file %ld bytes, want %zu", fc->name,
                   file_size(path), synced_bytes);

        /* Sticky: later calls fail at once, without touching the file. */
        unsigned long writes = dpb_fs_fault_calls(f, DPB_FS_WRITE);
        unsigned long syncs = dpb_fs_fault_calls(f, DPB_FS_FDATASYNC);
        CHECK(wal_append(w, 1, "abc", 3, NULL) == DPB_EIO);
        CHECK(wal_sync(w, 1) == DPB_EIO); /* even for an already durable record */
        CHECK(wal_sync(w, UINT64_MAX) == DPB_EIO);
        CHECK(wal_truncate_upto(w, 2) == DPB_EIO);
        CHECKF(dpb_fs_fault_calls(f, DPB_FS_WRITE) == writes &&
                   dpb_fs_fault_calls(f, DPB_FS_FDATASYNC) == syncs,
               "%s: a failed wal touched the file", fc->name);
        wal_close(w);
        w = NULL;

        /* Reopen with the real file system: the synced records, nothing partial. */
        CHECKF(reopen(dir, dpb_fs_posix(), 0, &c, &w, &next, &err) == DPB_OK, "%s: %s", fc->name,
               err.detail);
        CHECKF(check_std(&c, 1, fc->survivors, sizes), "%s", fc->name);
        CHECK(next == fc->survivors + 1);
        /* And the log works again. */
        if (w != NULL) {
            append_std(w, fc->survivors + 1, sizes[fc->survivors]);
            CHECK(wal_sync(w, UINT64_MAX) == DPB_OK);
            wal_close(w);
            w = NULL;
            CHECK(reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_OK);
            CHECKF(check_std(&c, 1, fc->survivors + 1, sizes), "%s: after recovery", fc->name);
            wal_close(w);
            w = NULL;
        }
    next_case:
        wal_close(w);
        collector_reset(&c);
        dpb_fs_fault_free(f2);
        dpb_fs_fault_free(f);
        remove_dir(dir);
    }
}

/* A failed open (EIO on the first read) reports the path; nothing is created half-way. */
static void wal_open_faults(void)
{
    char dir[64], path[128];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    path_in(path, sizeof path, dir, "wal.log");
    wal *w = NULL;
    uint64_t next = 0;
    dpb_error err = {0};
    CHECK(wal_open(dir, &nosync_fs, 0, NULL, NULL, &w, &next, &err) == DPB_OK);
    append_std(w, 1, 10);
    wal_close(w);
    w = NULL;
    const dpb_fs_op ops[] = {DPB_FS_OPEN, DPB_FS_PREAD, DPB_FS_FSTAT_SIZE, DPB_FS_FSYNC};
    for (size_t i = 0; i < N(ops); i++) {
        dpb_fs_fault *f = dpb_fs_fault_new(dpb_fs_posix(), ops[i], 0, EIO, 0);
        if (f == NULL)
            break;
        dpb_error_clear(&err);
        CHECKF(wal_open(dir, dpb_fs_fault_fs(f), 0, NULL, NULL, &w, &next, &err) == DPB_EIO,
               "op %d", (int)ops[i]);
        CHECK(w == NULL);
        CHECKF(strstr(err.detail, dir) != NULL, "op %d: %s", (int)ops[i], err.detail);
        dpb_fs_fault_free(f);
    }
    CHECK(wal_open(NULL, &nosync_fs, 0, NULL, NULL, &w, &next, &err) == DPB_EINVAL);
    char missing[128];
    path_in(missing, sizeof missing, dir, "no/such/dir");
    dpb_error_clear(&err);
    CHECK(wal_open(missing, &nosync_fs, 0, NULL, NULL, &w, &next, &err) == DPB_EIO);
    CHECK(file_size(path) == (long)(HDR + 10));
    remove_dir(dir);
}

/* ---- group commit and throughput ---- */

enum { GC_THREADS = 8, GC_PER_THREAD = 200, GC_PAYLOAD = 1024 };

typedef struct {
    wal *w;
    int t;
    int failures;
} gc_arg;

static void *gc_worker(void *p)
{
    gc_arg *a = p;
    unsigned char buf[GC_PAYLOAD];
    for (int i = 0; i < GC_PER_THREAD; i++) {
        fill_payload(buf, sizeof buf, (uint64_t)a->t * 100000u + (uint64_t)i);
        buf[0] = (unsigned char)a->t;
        buf[1] = (unsigned char)(i & 0xFF);
        buf[2] = (unsigned char)(i >> 8);
        uint64_t seq;
        if (wal_append(a->w, (uint8_t)a->t, buf, sizeof buf, &seq) != DPB_OK ||
            wal_sync(a->w, seq) != DPB_OK)
            a->failures++;
    }
    return NULL;
}

static void wal_group_commit_and_throughput(void)
{
    char dir[64];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    dpb_fs_fault *counting = dpb_fs_fault_new(dpb_fs_posix(), DPB_FS_WRITE, -1, 0, 0);
    collector c = {0};
    dpb_error err = {0};
    wal *w = NULL;
    uint64_t next = 0;
    if (counting == NULL ||
        reopen(dir, dpb_fs_fault_fs(counting), 0, &c, &w, &next, &err) != DPB_OK) {
        CHECK(0);
        goto out;
    }

    /* One thread: every append waits for its own fdatasync. */
    enum { ONE = 100 };
    unsigned char buf[GC_PAYLOAD];
    fill_payload(buf, sizeof buf, 1);
    double t0 = tl_now();
    for (int i = 0; i < ONE; i++) {
        uint64_t seq;
        CHECK(wal_append(w, 0, buf, sizeof buf, &seq) == DPB_OK);
        CHECK(wal_sync(w, seq) == DPB_OK);
    }
    double t1 = tl_now();
    unsigned long s1 = dpb_fs_fault_calls(counting, DPB_FS_FDATASYNC);
    CHECK(s1 == ONE);
    CHECK(wal_truncate_upto(w, ONE) == DPB_OK); /* start the 8-thread run on an empty log */
    CHECK(wal_size_bytes(w) == 0);

    /* Eight threads, each syncing after every append: group commit. */
    pthread_t th[GC_THREADS];
    gc_arg args[GC_THREADS];
    int started = 0;
    double t2 = tl_now();
    for (int t = 0; t < GC_THREADS; t++) {
        args[t].w = w;
        args[t].t = t;
        args[t].failures = 0;
        if (pthread_create(&th[t], NULL, gc_worker, &args[t]) != 0)
            break;
        started++;
    }
    CHECK(started == GC_THREADS);
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        CHECK(args[t].failures == 0);
    }
    double t3 = tl_now();
    unsigned long s8 = dpb_fs_fault_calls(counting, DPB_FS_FDATASYNC) - s1;
    const int total = GC_THREADS * GC_PER_THREAD;
    CHECKF(s8 >= 1 && s8 <= (unsigned long)total, "%lu fdatasyncs", s8);
    printf("  [wal] 1 KiB append+sync: 1 thread %.0f rec/s (%d fdatasyncs, %.2f ms each); "
           "%d threads %.0f rec/s (%d records, %lu fdatasyncs, %.1f records per sync)\n",
           ONE / (t1 - t0), ONE, 1e3 * (t1 - t0) / ONE, GC_THREADS, total / (t3 - t2), total, s8,
           s8 ? (double)total / (double)s8 : 0.0);
    wal_close(w);
    w = NULL;

    /* Every record replays; each thread's records are in its own order. */
    CHECK(reopen(dir, &nosync_fs, ONE, &c, &w, &next, &err) == DPB_OK);
    CHECK(c.n == (size_t)total);
    CHECK(next == (uint64_t)(ONE + total + 1));
    int seen[GC_THREADS] = {0};
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        int t = r->data[0], k = r->data[1] | (r->data[2] << 8);
        if (r->seq != ONE + 1 + i || r->len != GC_PAYLOAD || t >= GC_THREADS || r->type != t ||
            k != seen[t]) {
            CHECKF(0, "record %zu: seq %llu thread %d index %d", i, (unsigned long long)r->seq, t,
                   k);
            break;
        }
        fill_payload(buf, sizeof buf, (uint64_t)t * 100000u + (uint64_t)k);
        if (memcmp(r->data + 3, buf + 3, GC_PAYLOAD - 3) != 0) {
            CHECKF(0, "record %zu: payload differs", i);
            break;
        }
        seen[t]++;
    }
    wal_close(w);
    w = NULL;
out:
    collector_reset(&c);
    dpb_fs_fault_free(counting);
    remove_dir(dir);
}

/* ---- snapshots ---- */

static void wal_snapshot_files(void)
{
    char dir[64], path[128], tmp[128];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    path_in(path, sizeof path, dir, "snapshot");
    path_in(tmp, sizeof tmp, dir, "snapshot.tmp");
    const dpb_fs *fs = dpb_fs_posix();
    dpb_error err = {0};
    uint64_t seq = 99;
    void *data = (void *)1;
    size_t len = 99;

    /* Absent. */
    CHECK(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_OK);
    CHECK(seq == 0 && data == NULL && len == 0);

    /* Round trip, then an empty payload. */
    enum { BIG = 100000 };
    unsigned char *big = malloc(BIG);
    if (big == NULL)
        goto out;
    fill_payload(big, BIG, 3);
    CHECK(snapshot_write(dir, fs, 42, big, BIG, &err) == DPB_OK);
    CHECK(!exists(tmp));
    CHECK(file_size(path) == (long)(SNAPSHOT_HEADER_BYTES + BIG));
    CHECK(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_OK);
    CHECK(seq == 42 && len == BIG && data != NULL && memcmp(data, big, BIG) == 0);
    free(data);
    CHECK(snapshot_write(dir, fs, 43, NULL, 0, &err) == DPB_OK);
    CHECK(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_OK);
    CHECK(seq == 43 && len == 0 && data != NULL);
    free(data);

    /* Damage: magic, version, length, crc, payload bytes; a truncated file; a short one. */
    CHECK(snapshot_write(dir, fs, 7, big, 1000, &err) == DPB_OK);
    size_t flen = 0;
    unsigned char *file = slurp(path, &flen);
    CHECK(file != NULL && flen == SNAPSHOT_HEADER_BYTES + 1000);
    if (file == NULL)
        goto out;
    const size_t pos[] = {0, 7, 8, 11, 20, 27, 28, 31, 32, 500, flen - 1};
    for (size_t i = 0; i < N(pos); i++) {
        file[pos[i]] ^= 0x10;
        CHECK(spit(path, file, flen) == 0);
        dpb_error_clear(&err);
        data = NULL;
        CHECKF(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_ECORRUPT, "byte %zu flipped",
               pos[i]);
        CHECKF(strstr(err.detail, path) != NULL, "%s", err.detail);
        CHECK(data == NULL);
        file[pos[i]] ^= 0x10;
    }
    const size_t cuts[] = {flen - 1, 10, 0};
    for (size_t i = 0; i < N(cuts); i++) {
        CHECK(spit(path, file, cuts[i]) == 0);
        dpb_error_clear(&err);
        CHECKF(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_ECORRUPT, "cut %zu", cuts[i]);
        CHECK(strstr(err.detail, path) != NULL);
    }
    /* Trailing garbage is damage too. */
    unsigned char *longer = malloc(flen + 1);
    if (longer != NULL) {
        memcpy(longer, file, flen);
        longer[flen] = 0;
        CHECK(spit(path, longer, flen + 1) == 0);
        dpb_error_clear(&err);
        CHECK(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_ECORRUPT);
        free(longer);
    }
    free(file);

    /* A crash between write and rename: a garbage snapshot.tmp next to an older snapshot.
     * The older one is read; the next write replaces both. */
    CHECK(snapshot_write(dir, fs, 5, "older", 5, &err) == DPB_OK);
    CHECK(spit(tmp, "DPBSNAP1 garbage, half written", 30) == 0);
    dpb_error_clear(&err);
    CHECK(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_OK);
    CHECK(seq == 5 && len == 5 && data != NULL && memcmp(data, "older", 5) == 0);
    free(data);
    CHECK(snapshot_write(dir, fs, 6, "newer", 5, &err) == DPB_OK);
    CHECK(!exists(tmp));
    CHECK(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_OK);
    CHECK(seq == 6 && len == 5 && data != NULL && memcmp(data, "newer", 5) == 0);
    free(data);

    /* Failures of each step of the write: DPB_EIO naming the file; the old snapshot stays
     * readable and no snapshot.tmp is left behind. */
    const dpb_fs_op ops[] = {DPB_FS_OPEN, DPB_FS_WRITE, DPB_FS_FSYNC, DPB_FS_CLOSE, DPB_FS_RENAME};
    for (size_t i = 0; i < N(ops); i++) {
        dpb_fs_fault *f = dpb_fs_fault_new(fs, ops[i], 0, ops[i] == DPB_FS_WRITE ? ENOSPC : EIO,
                                           ops[i] == DPB_FS_WRITE ? DPB_FS_FAULT_SHORT : 0);
        if (f == NULL)
            break;
        dpb_error_clear(&err);
        CHECKF(snapshot_write(dir, dpb_fs_fault_fs(f), 9, big, 5000, &err) == DPB_EIO, "op %d",
               (int)ops[i]);
        CHECKF(strstr(err.detail, dir) != NULL, "op %d: %s", (int)ops[i], err.detail);
        CHECKF(!exists(tmp), "op %d left snapshot.tmp", (int)ops[i]);
        dpb_error_clear(&err);
        CHECK(snapshot_read(dir, fs, &seq, &data, &len, &err) == DPB_OK);
        CHECK(seq == 6 && len == 5 && data != NULL && memcmp(data, "newer", 5) == 0);
        free(data);
        dpb_fs_fault_free(f);
    }
out:
    free(big);
    remove_dir(dir);
}

/* ---- truncation of the log after a snapshot ---- */

static const size_t tr_sizes[] = {5, 0, 60, 7, 300, 1, 2, 90, 14, 0, 33, 8, 21, 3};

static void wal_truncate_after_snapshot(void)
{
    char dir[64], path[128], tmp[128];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    path_in(path, sizeof path, dir, "wal.log");
    path_in(tmp, sizeof tmp, dir, "wal.log.tmp");
    const dpb_fs *fs = dpb_fs_posix();
    collector c = {0};
    dpb_error err = {0};
    wal *w = NULL;
    uint64_t next = 0, sseq = 0;
    void *snap = NULL;
    size_t slen = 0;

    CHECK(reopen(dir, fs, 0, &c, &w, &next, &err) == DPB_OK);
    if (w == NULL)
        goto out;
    for (uint64_t k = 1; k <= 10; k++)
        append_std(w, k, tr_sizes[k - 1]);
    CHECK(wal_sync(w, 10) == DPB_OK);
    /* The ledger's order: snapshot durable first, then the log drops what it covers. */
    CHECK(snapshot_write(dir, fs, 6, "state@6", 7, &err) == DPB_OK);
    CHECK(wal_truncate_upto(w, 6) == DPB_OK);
    size_t rest = 0;
    for (int k = 7; k <= 10; k++)
        rest += HDR + tr_sizes[k - 1];
    CHECK(wal_size_bytes(w) == rest && file_size(path) == (long)rest);
    CHECK(!exists(tmp));
    CHECK(wal_truncate_upto(w, 11) == DPB_EINVAL); /* not appended yet */
    CHECK(!wal_failed(w));
    append_std(w, 11, tr_sizes[10]);
    append_std(w, 12, tr_sizes[11]);
    CHECK(wal_sync(w, 12) == DPB_OK);
    wal_close(w);
    w = NULL;

    /* Recovery = snapshot + the later records. */
    CHECK(snapshot_read(dir, fs, &sseq, &snap, &slen, &err) == DPB_OK && sseq == 6);
    free(snap);
    CHECK(reopen(dir, &nosync_fs, sseq, &c, &w, &next, &err) == DPB_OK);
    CHECK(check_std(&c, 7, 12, tr_sizes));
    CHECK(next == 13);
    wal_close(w);
    w = NULL;
    /* A later snapshot seq skips more. */
    CHECK(reopen(dir, &nosync_fs, 9, &c, &w, &next, &err) == DPB_OK);
    CHECK(check_std(&c, 10, 12, tr_sizes));
    wal_close(w);
    w = NULL;
    /* Without the snapshot, records 1..6 are missing: damage, not a torn tail. */
    long before = file_size(path);
    CHECK(reopen(dir, &nosync_fs, 0, &c, &w, &next, &err) == DPB_ECORRUPT);
    CHECKF(strstr(err.detail, path) != NULL && strstr(err.detail, "seq 7") != NULL, "%s",
           err.detail);
    CHECK(w == NULL && file_size(path) == before);

    /* Truncate everything; a crashed truncation's wal.log.tmp is ignored and removed. */
    CHECK(reopen(dir, &nosync_fs, 6, &c, &w, &next, &err) == DPB_OK);
    CHECK(wal_truncate_upto(w, 12) == DPB_OK);
    CHECK(wal_size_bytes(w) == 0 && file_size(path) == 0);
    wal_close(w);
    w = NULL;
    CHECK(spit(tmp, "half a log", 10) == 0);
    CHECK(reopen(dir, &nosync_fs, 12, &c, &w, &next, &err) == DPB_OK);
    CHECK(c.n == 0 && next == 13 && !exists(tmp));
    append_std(w, 13, tr_sizes[12]);
    append_std(w, 14, tr_sizes[13]);
    wal_close(w);
    w = NULL;

    /* A snapshot that claims more than the log holds (a damaged seq, or a snapshot written
     * ahead of the log's durable part): refused, the log is never cut on its word. */
    before = file_size(path);
    CHECK(reopen(dir, &nosync_fs, 20, &c, &w, &next, &err) == DPB_ECORRUPT);
    CHECKF(strstr(err.detail, path) != NULL && strstr(err.detail, "seq 14") != NULL &&
               strstr(err.detail, "seq 20") != NULL,
           "%s", err.detail);
    CHECK(w == NULL && file_size(path) == before);
    CHECK(reopen(dir, &nosync_fs, 14, &c, &w, &next, &err) == DPB_OK);
    CHECK(c.n == 0 && next == 15);
    CHECK(wal_append(w, 1, "x", 1, &sseq) == DPB_OK && sseq == 15);
    wal_close(w);
    w = NULL;
    CHECK(reopen(dir, &nosync_fs, 14, &c, &w, &next, &err) == DPB_OK);
    CHECK(c.n == 1 && c.r[0].seq == 15 && next == 16);
    wal_close(w);
    w = NULL;

    /* A failing truncation (rename fails): DPB_EIO, sticky; the old log is intact. */
    dpb_fs_fault *f = dpb_fs_fault_new(dpb_fs_posix(), DPB_FS_RENAME, 0, EIO, 0);
    if (f != NULL) {
        CHECK(reopen(dir, dpb_fs_fault_fs(f), 14, &c, &w, &next, &err) == DPB_OK);
        CHECK(wal_append(w, 2, "yz", 2, NULL) == DPB_OK);
        CHECK(wal_sync(w, 16) == DPB_OK);
        CHECK(wal_truncate_upto(w, 15) == DPB_EIO);
        CHECK(wal_failed(w));
        CHECK(!exists(tmp));
        wal_close(w);
        w = NULL;
        CHECK(reopen(dir, &nosync_fs, 14, &c, &w, &next, &err) == DPB_OK);
        CHECK(c.n == 2 && next == 17);
        wal_close(w);
        w = NULL;
        dpb_fs_fault_free(f);
    }
out:
    collector_reset(&c);
    remove_dir(dir);
}

/* Truncations while other threads append and sync. */
enum { TC_THREADS = 4, TC_PER_THREAD = 300 };

typedef struct {
    wal *w;
    int t;
    int failures;
    _Atomic uint64_t *last_seq;
    atomic_int *done;
    atomic_int *truncs;
} tc_arg;

static void *tc_worker(void *p)
{
    tc_arg *a = p;
    unsigned char buf[64];
    for (int i = 0; i < TC_PER_THREAD; i++) {
        /* Every 100 appends, wait for the main thread to have truncated once more, so that
         * truncations surely interleave with appends and syncs. */
        while (atomic_load(a->truncs) < i / 100)
            sched_yield();
        size_t len = (size_t)(i % 50);
        fill_payload(buf, len, (uint64_t)i);
        uint64_t seq;
        if (wal_append(a->w, (uint8_t)a->t, buf, len, &seq) != DPB_OK ||
            wal_sync(a->w, seq) != DPB_OK) {
            a->failures++;
            continue;
        }
        uint64_t cur = atomic_load(a->last_seq);
        while (seq > cur && !atomic_compare_exchange_weak(a->last_seq, &cur, seq))
            ;
    }
    atomic_fetch_add(a->done, 1);
    return NULL;
}

static void wal_truncate_concurrent(void)
{
    char dir[64];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    collector c = {0};
    dpb_error err = {0};
    wal *w = NULL;
    uint64_t next = 0, upto = 0;
    _Atomic uint64_t last_seq;
    atomic_int done, truncs;
    atomic_init(&last_seq, 0);
    atomic_init(&done, 0);
    atomic_init(&truncs, 0);
    if (reopen(dir, &slowsync_fs, 0, &c, &w, &next, &err) != DPB_OK) {
        CHECK(0);
        goto out;
    }
    pthread_t th[TC_THREADS];
    tc_arg args[TC_THREADS];
    int started = 0;
    for (int t = 0; t < TC_THREADS; t++) {
        args[t] = (tc_arg){w, t, 0, &last_seq, &done, &truncs};
        if (pthread_create(&th[t], NULL, tc_worker, &args[t]) != 0)
            break;
        started++;
    }
    int truncations = 0;
    while (atomic_load(&done) < started) {
        uint64_t s = atomic_load(&last_seq);
        if (s > upto + 20) {
            CHECK(wal_truncate_upto(w, s - 10) == DPB_OK);
            upto = s - 10;
            truncations++;
            atomic_fetch_add(&truncs, 1);
        }
        sched_yield();
    }
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        CHECK(args[t].failures == 0);
    }
    CHECK(truncations > 0);
    wal_close(w);
    w = NULL;
    CHECK(reopen(dir, &nosync_fs, upto, &c, &w, &next, &err) == DPB_OK);
    const uint64_t total = TC_THREADS * TC_PER_THREAD;
    CHECKF(c.n == total - upto, "replayed %zu after %llu truncations up to %llu", c.n,
           (unsigned long long)truncations, (unsigned long long)upto);
    CHECK(c.n > 0 && c.r[0].seq == upto + 1 && next == total + 1);
    wal_close(w);
out:
    collector_reset(&c);
    remove_dir(dir);
}

/* The fault wrapper itself: countdown, short write, sticky, counting. */
static void wal_fault_fs_semantics(void)
{
    char dir[64], path[128];
    if (make_dir(dir, sizeof dir) != 0)
        return;
    path_in(path, sizeof path, dir, "f");
    dpb_fs_fault *f = dpb_fs_fault_new(dpb_fs_posix(), DPB_FS_WRITE, 2, ENOSPC,
                                       DPB_FS_FAULT_SHORT | DPB_FS_FAULT_STICKY);
    CHECK(dpb_fs_fault_new(dpb_fs_posix(), DPB_FS_NOPS, 0, EIO, 0) == NULL);
    if (f == NULL)
        goto out;
    const dpb_fs *fs = dpb_fs_fault_fs(f);
    int fd = fs->open(fs->ctx, path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(fs->write(fs->ctx, fd, "abcd", 4) == 4);
    CHECK(fs->write(fs->ctx, fd, "efgh", 4) == 4);
    CHECK(fs->write(fs->ctx, fd, "ijkl", 4) == 2); /* the short one */
    errno = 0;
    CHECK(fs->write(fs->ctx, fd, "kl", 2) == -1 && errno == ENOSPC);
    CHECK(fs->write(fs->ctx, fd, "kl", 2) == -1 && errno == ENOSPC); /* sticky */
    CHECK(fs->fsync(fs->ctx, fd) == 0);
    CHECK(fs->close(fs->ctx, fd) == 0);
    CHECK(file_size(path) == 10);
    CHECK(dpb_fs_fault_calls(f, DPB_FS_WRITE) == 5);
    CHECK(dpb_fs_fault_calls(f, DPB_FS_OPEN) == 1);
    CHECK(dpb_fs_fault_fired(f) == 3);
    dpb_fs_fault_free(f);

    /* Crash: after the fault, everything fails but close. */
    f = dpb_fs_fault_new(dpb_fs_posix(), DPB_FS_FSYNC, 0, EIO, DPB_FS_FAULT_CRASH);
    if (f == NULL)
        goto out;
    fs = dpb_fs_fault_fs(f);
    fd = fs->open(fs->ctx, path, O_WRONLY | O_APPEND, 0644);
    CHECK(fd >= 0);
    CHECK(fs->write(fs->ctx, fd, "x", 1) == 1);
    CHECK(fs->fsync(fs->ctx, fd) == -1 && errno == EIO);
    CHECK(fs->write(fs->ctx, fd, "y", 1) == -1 && errno == EIO);
    CHECK(fs->ftruncate(fs->ctx, fd, 0) == -1);
    CHECK(fs->close(fs->ctx, fd) == 0);
    CHECK(file_size(path) == 11);
    dpb_fs_fault_free(f);
out:
    remove_dir(dir);
}

const tl_test WAL_TESTS[] = {
    TL_T(wal_crc32c_vectors),
    TL_T(wal_roundtrip_and_after_seq),
    TL_T(wal_torn_tail_every_offset),
    TL_T(wal_bit_flips),
    TL_T(wal_fault_fs_semantics),
    TL_T(wal_fault_injection),
    TL_T(wal_open_faults),
    TL_T(wal_group_commit_and_throughput),
    TL_T(wal_snapshot_files),
    TL_T(wal_truncate_after_snapshot),
    TL_T(wal_truncate_concurrent),
};
const size_t WAL_NTESTS = N(WAL_TESTS);
