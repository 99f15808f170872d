/* fs.c - the POSIX dpb_fs, the helper loops over a dpb_fs (and the path and error helpers
 * the log and the snapshot share), and the fault-injecting wrapper used by the persistence
 * tests. Calls only libc and common/status. */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the real file system ---- */

/* r = call, again while it fails with EINTR. */
#define RETRY_EINTR(r, call)                                                                       \
    do {                                                                                           \
        (r) = (call);                                                                              \
    } while ((r) < 0 && errno == EINTR)

static int posix_open(void *ctx, const char *path, int flags, int mode)
{
    (void)ctx;
    int fd;
    RETRY_EINTR(fd, open(path, flags | O_CLOEXEC, (mode_t)mode));
    return fd;
}

static ssize_t posix_write(void *ctx, int fd, const void *buf, size_t n)
{
    (void)ctx;
    ssize_t r;
    RETRY_EINTR(r, write(fd, buf, n));
    return r;
}

static ssize_t posix_pread(void *ctx, int fd, void *buf, size_t n, off_t off)
{
    (void)ctx;
    ssize_t r;
    RETRY_EINTR(r, pread(fd, buf, n, off));
    return r;
}

static int posix_fdatasync(void *ctx, int fd)
{
    (void)ctx;
    int r;
    RETRY_EINTR(r, fdatasync(fd));
    return r;
}

static int posix_fsync(void *ctx, int fd)
{
    (void)ctx;
    int r;
    RETRY_EINTR(r, fsync(fd));
    return r;
}

static int posix_close(void *ctx, int fd)
{
    (void)ctx;
    return close(fd); /* never retried: the descriptor may already be reused */
}

static int posix_rename(void *ctx, const char *from, const char *to)
{
    (void)ctx;
    int r;
    RETRY_EINTR(r, rename(from, to));
    return r;
}

static int posix_unlink(void *ctx, const char *path)
{
    (void)ctx;
    int r;
    RETRY_EINTR(r, unlink(path));
    return r;
}

static int posix_ftruncate(void *ctx, int fd, off_t len)
{
    (void)ctx;
    int r;
    RETRY_EINTR(r, ftruncate(fd, len));
    return r;
}

static int posix_fstat_size(void *ctx, int fd, off_t *size)
{
    (void)ctx;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    *size = st.st_size;
    return 0;
}

static const dpb_fs posix_fs = {
    posix_open,   posix_write,  posix_pread,     posix_fdatasync,  posix_fsync, posix_close,
    posix_rename, posix_unlink, posix_ftruncate, posix_fstat_size, NULL,
};

const dpb_fs *dpb_fs_posix(void)
{
    return &posix_fs;
}

/* ---- helpers ---- */

int dpb_fs_write_all(const dpb_fs *fs, int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = fs->write(fs->ctx, fd, p, n);
        if (w < 0)
            return -1;
        if (w == 0) {
            errno = ENOSPC;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

ssize_t dpb_fs_pread_full(const dpb_fs *fs, int fd, void *buf, size_t n, off_t off)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = fs->pread(fs->ctx, fd, p + got, n - got, off + (off_t)got);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int dpb_fs_fsync_dir(const dpb_fs *fs, const char *dir)
{
    int fd = fs->open(fs->ctx, dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return -1;
    int rc = fs->fsync(fs->ctx, fd);
    int saved = errno;
    if (fs->close(fs->ctx, fd) != 0 && rc == 0)
        return -1;
    errno = saved;
    return rc == 0 ? 0 : -1;
}

char *dpb_fs_join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

dpb_status dpb_fs_io_fail(dpb_error *err, const char *path, const char *what, int errnum)
{
    char eb[128];
    return dpb_fail(err, DPB_EIO, NULL, "%s: %s failed: %s", path, what,
                    dpb_fs_strerror(errnum, eb, sizeof eb));
}

const char *dpb_fs_strerror(int errnum, char *buf, size_t n)
{
    if (n == 0)
        return buf;
    /* XSI strerror_r (this tree builds with _POSIX_C_SOURCE=200809L, no _GNU_SOURCE). */
    if (strerror_r(errnum, buf, n) != 0)
        snprintf(buf, n, "errno %d", errnum);
    return buf;
}

/* ---- fault injection ---- */

struct dpb_fs_fault {
    dpb_fs fs; /* first: its ctx points back at this struct */
    const dpb_fs *inner;
    dpb_fs_op op;
    long countdown;
    int err;
    unsigned flags;
    atomic_ulong calls[DPB_FS_NOPS];
    atomic_ulong fired;
    atomic_int crashed;
};

/* What a call of kind op does: pass through, fail, or (writes) write half. */
enum { PASS, FAIL, HALF };

static int fault_decide(struct dpb_fs_fault *f, dpb_fs_op op)
{
    unsigned long k = atomic_fetch_add(&f->calls[op], 1);
    if (atomic_load(&f->crashed) && op != DPB_FS_CLOSE)
        return FAIL;
    if (op != f->op || f->countdown < 0)
        return PASS;
    unsigned long c = (unsigned long)f->countdown;
    int act = PASS;
    if ((f->flags & DPB_FS_FAULT_SHORT) && op == DPB_FS_WRITE) {
        if (k == c)
            act = HALF;
        else if (k == c + 1 || (k > c + 1 && (f->flags & DPB_FS_FAULT_STICKY)))
            act = FAIL;
    } else if (k == c || (k > c && (f->flags & DPB_FS_FAULT_STICKY))) {
        act = FAIL;
    }
    if (act != PASS) {
        atomic_fetch_add(&f->fired, 1);
        if ((f->flags & DPB_FS_FAULT_CRASH) && act == FAIL)
            atomic_store(&f->crashed, 1);
    }
    return act;
}

#define FAULT_SELF(ctx) ((struct dpb_fs_fault *)(ctx))
#define INNER(f) ((f)->inner)

/* 1 (errno set to the injected error) when a call of kind op is to fail; 0: pass it on. */
static int fault_fails(struct dpb_fs_fault *f, dpb_fs_op op)
{
    if (fault_decide(f, op) == PASS)
        return 0;
    errno = f->err;
    return 1;
}

static int fault_open(void *ctx, const char *path, int flags, int mode)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_OPEN) ? -1 : INNER(f)->open(INNER(f)->ctx, path, flags, mode);
}

static ssize_t fault_write(void *ctx, int fd, const void *buf, size_t n)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    int act = fault_decide(f, DPB_FS_WRITE);
    if (act == HALF && n / 2 > 0)
        return INNER(f)->write(INNER(f)->ctx, fd, buf, n / 2);
    if (act != PASS) {
        errno = f->err;
        return -1;
    }
    return INNER(f)->write(INNER(f)->ctx, fd, buf, n);
}

static ssize_t fault_pread(void *ctx, int fd, void *buf, size_t n, off_t off)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_PREAD) ? -1 : INNER(f)->pread(INNER(f)->ctx, fd, buf, n, off);
}

static int fault_fdatasync(void *ctx, int fd)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_FDATASYNC) ? -1 : INNER(f)->fdatasync(INNER(f)->ctx, fd);
}

static int fault_fsync(void *ctx, int fd)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_FSYNC) ? -1 : INNER(f)->fsync(INNER(f)->ctx, fd);
}

static int fault_close(void *ctx, int fd)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    int act = fault_decide(f, DPB_FS_CLOSE);
    /* The descriptor goes away whatever is injected (as on Linux, where a close that
     * reports EIO has still released it). */
    int r = INNER(f)->close(INNER(f)->ctx, fd);
    if (act != PASS) {
        errno = f->err;
        return -1;
    }
    if (atomic_load(&f->crashed))
        return 0; /* after the "crash", closing still works */
    return r;
}

static int fault_rename(void *ctx, const char *from, const char *to)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_RENAME) ? -1 : INNER(f)->rename(INNER(f)->ctx, from, to);
}

static int fault_unlink(void *ctx, const char *path)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_UNLINK) ? -1 : INNER(f)->unlink(INNER(f)->ctx, path);
}

static int fault_ftruncate(void *ctx, int fd, off_t len)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_FTRUNCATE) ? -1 : INNER(f)->ftruncate(INNER(f)->ctx, fd, len);
}

static int fault_fstat_size(void *ctx, int fd, off_t *size)
{
    struct dpb_fs_fault *f = FAULT_SELF(ctx);
    return fault_fails(f, DPB_FS_FSTAT_SIZE) ? -1 : INNER(f)->fstat_size(INNER(f)->ctx, fd, size);
}

dpb_fs_fault *dpb_fs_fault_new(const dpb_fs *inner, dpb_fs_op op, long countdown, int err,
                               unsigned flags)
{
    if (inner == NULL || (int)op < 0 || op >= DPB_FS_NOPS)
        return NULL;
    struct dpb_fs_fault *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->fs.open = fault_open;
    f->fs.write = fault_write;
    f->fs.pread = fault_pread;
    f->fs.fdatasync = fault_fdatasync;
    f->fs.fsync = fault_fsync;
    f->fs.close = fault_close;
    f->fs.rename = fault_rename;
    f->fs.unlink = fault_unlink;
    f->fs.ftruncate = fault_ftruncate;
    f->fs.fstat_size = fault_fstat_size;
    f->fs.ctx = f;
    f->inner = inner;
    f->op = op;
    f->countdown = countdown;
    f->err = err;
    f->flags = flags;
    for (int i = 0; i < DPB_FS_NOPS; i++)
        atomic_init(&f->calls[i], 0);
    atomic_init(&f->fired, 0);
    atomic_init(&f->crashed, 0);
    return f;
}

const dpb_fs *dpb_fs_fault_fs(const dpb_fs_fault *f)
{
    return &f->fs;
}

unsigned long dpb_fs_fault_calls(const dpb_fs_fault *f, dpb_fs_op op)
{
    if ((int)op < 0 || op >= DPB_FS_NOPS)
        return 0;
    return atomic_load(&((struct dpb_fs_fault *)f)->calls[op]);
}

unsigned long dpb_fs_fault_fired(const dpb_fs_fault *f)
{
    return atomic_load(&((struct dpb_fs_fault *)f)->fired);
}

void dpb_fs_fault_free(dpb_fs_fault *f)
{
    free(f);
}
