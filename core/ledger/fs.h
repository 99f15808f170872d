/*
 * fs.h - the one small file-I/O interface of the ledger's persistence layer (docs/ARCHITECTURE.md,
 * "core/ledger"). The write-ahead log and the snapshot code do every open, write, read,
 * sync, rename and truncate through a dpb_fs, so that tests can count calls and inject
 * EIO, ENOSPC, short writes and crashes without touching the real disk's behaviour.
 *
 * Every operation follows the POSIX call it is named after: it returns -1 (or, for write
 * and pread, a negative count) and sets errno on failure. ctx is passed back unchanged
 * as the first argument of each call.
 */
#ifndef DPB_LEDGER_FS_H
#define DPB_LEDGER_FS_H

#include <stddef.h>
#include <sys/types.h>

#include "../common/status.h"

typedef struct dpb_fs {
    int (*open)(void *ctx, const char *path, int flags, int mode);  /* -1 + errno */
    ssize_t (*write)(void *ctx, int fd, const void *buf, size_t n); /* may be short */
    ssize_t (*pread)(void *ctx, int fd, void *buf, size_t n, off_t off);
    int (*fdatasync)(void *ctx, int fd);
    int (*fsync)(void *ctx, int fd);
    int (*close)(void *ctx, int fd);
    int (*rename)(void *ctx, const char *from, const char *to);
    int (*unlink)(void *ctx, const char *path);
    int (*ftruncate)(void *ctx, int fd, off_t len);
    int (*fstat_size)(void *ctx, int fd, off_t *size);
    void *ctx;
} dpb_fs;

/* The real file system: the POSIX calls, each retried on EINTR except close (on Linux the
 * descriptor is gone after an interrupted close; its -1/EINTR is passed up). open adds
 * O_CLOEXEC. write and pread may be short, as write(2) and pread(2) are. Returns a
 * pointer to a static const table (borrowed; never freed). */
const dpb_fs *dpb_fs_posix(void);

/* ---- helpers shared by the log and the snapshot (thin loops over a dpb_fs) ---- */

/* Write all n bytes of buf to fd, retrying short writes. Returns 0, or -1 with errno set
 * (a write that makes no progress counts as ENOSPC). On -1 an unknown prefix of buf may
 * have reached the file. */
int dpb_fs_write_all(const dpb_fs *fs, int fd, const void *buf, size_t n);

/* Read up to n bytes at off, retrying short reads until n bytes or end of file. Returns
 * the number of bytes read (< n only at end of file), or -1 with errno set. */
ssize_t dpb_fs_pread_full(const dpb_fs *fs, int fd, void *buf, size_t n, off_t off);

/* fsync the directory dir (open O_RDONLY|O_DIRECTORY, fsync, close), which makes a
 * create or rename inside it durable. Returns 0, or -1 with errno set (the errno of the
 * first failing step; the descriptor is closed either way). */
int dpb_fs_fsync_dir(const dpb_fs *fs, const char *dir);

/* Thread-safe strerror: the message for errnum written into buf (n bytes); returns buf. */
const char *dpb_fs_strerror(int errnum, char *buf, size_t n);

/* dir + "/" + name, malloc'ed (owned by the caller: free it); NULL if out of memory. The
 * log and the snapshot name their files with it. */
char *dpb_fs_join_path(const char *dir, const char *name);

/* Record a failed I/O step in err (may be NULL; first error wins) as DPB_EIO with the
 * detail "PATH: WHAT failed: <strerror(errnum)>", and return DPB_EIO. path and what are
 * borrowed (copied into err). */
dpb_status dpb_fs_io_fail(dpb_error *err, const char *path, const char *what, int errnum);

/* ---- fault injection (tests) ----
 *
 * A dpb_fs_fault wraps another dpb_fs (the "inner" one, usually dpb_fs_posix()) and
 * passes every call through to it, counting the calls of each kind. One kind of
 * operation is armed: the calls of that kind are numbered 0, 1, 2, ... in the order they
 * reach the wrapper, and after `countdown` calls of that kind went through, call number
 * `countdown` fails with errno = err (EIO, ENOSPC, ...) without reaching the inner fs.
 * Later calls of that kind go through again, unless DPB_FS_FAULT_STICKY is set.
 *
 * DPB_FS_FAULT_SHORT (write only): call number `countdown` instead writes the first half
 * of its buffer (n / 2 bytes, really written through the inner fs) and reports that short
 * count, and call number countdown + 1 fails with err: a torn write followed by a failure
 * to write the rest, as a full disk does. (If n / 2 == 0 the call simply fails.)
 *
 * DPB_FS_FAULT_STICKY: once the fault has fired, every later call of the armed kind fails
 * with err too (a disk that stays broken).
 *
 * DPB_FS_FAULT_CRASH: once the fault has fired, every later call of every kind fails with
 * err, except close, which still closes the descriptor and returns 0 (nothing reaches the
 * disk after the "crash": what is in the files is what a restart would find, apart from
 * the page cache, which a test cannot drop).
 *
 * A negative countdown never fires: the wrapper then only counts (a "counting fs").
 * The wrapper is thread-safe (atomic counters); the inner fs must be too.
 */
typedef enum {
    DPB_FS_OPEN = 0,
    DPB_FS_WRITE,
    DPB_FS_PREAD,
    DPB_FS_FDATASYNC,
    DPB_FS_FSYNC,
    DPB_FS_CLOSE,
    DPB_FS_RENAME,
    DPB_FS_UNLINK,
    DPB_FS_FTRUNCATE,
    DPB_FS_FSTAT_SIZE,
    DPB_FS_NOPS
} dpb_fs_op;

enum { DPB_FS_FAULT_SHORT = 1u << 0, DPB_FS_FAULT_STICKY = 1u << 1, DPB_FS_FAULT_CRASH = 1u << 2 };

typedef struct dpb_fs_fault dpb_fs_fault;

/* A new fault wrapper around inner (borrowed: must outlive the wrapper) arming operation
 * kind op as described above. Returns NULL if out of memory or op is out of range. Owned
 * by the caller: free with dpb_fs_fault_free. */
dpb_fs_fault *dpb_fs_fault_new(const dpb_fs *inner, dpb_fs_op op, long countdown, int err,
                               unsigned flags);

/* The dpb_fs to hand to the log or the snapshot code (borrowed from f: valid until
 * dpb_fs_fault_free(f)). */
const dpb_fs *dpb_fs_fault_fs(const dpb_fs_fault *f);

/* How many calls of kind op reached the wrapper so far (passed through or failed). */
unsigned long dpb_fs_fault_calls(const dpb_fs_fault *f, dpb_fs_op op);

/* How many calls the wrapper failed or shortened on purpose so far. */
unsigned long dpb_fs_fault_fired(const dpb_fs_fault *f);

/* Free f (NULL is fine). Nothing may use dpb_fs_fault_fs(f) afterwards. */
void dpb_fs_fault_free(dpb_fs_fault *f);

#endif
