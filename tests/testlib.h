/*
 * testlib.h - a tiny test harness shared by the unit and API tests.
 *
 * A test is a void function; CHECK* macros record failures without stopping the test.
 * TEST_MAIN runs the listed tests and prints one line per failure and the closing line
 * "<suite>: N passed, M failed" (N, M count tests) that tests/run.sh sums up.
 */
#ifndef DPB_TESTLIB_H
#define DPB_TESTLIB_H

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* splitmix64: the next pseudo-random 64 bits from *state (any seed; every bit pattern is
 * reachable), for tests that draw from a fixed seed so that a failure is reproducible. */
static inline uint64_t tl_splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Defined once, in the file that defines TESTLIB_MAIN before including this header. */
extern int tl_failed_checks;
extern const char *tl_current;
#ifdef TESTLIB_MAIN
int tl_failed_checks;
const char *tl_current;
#endif

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            tl_failed_checks++;                                                                    \
            fprintf(stderr, "FAIL %s (%s:%d): %s\n", tl_current, __FILE__, __LINE__, #cond);       \
        }                                                                                          \
    } while (0)

#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            tl_failed_checks++;                                                                    \
            fprintf(stderr, "FAIL %s (%s:%d): %s: ", tl_current, __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* |got - want| <= rel |want| (+ a tiny absolute floor for want == 0). */
#define CHECK_REL(got, want, rel)                                                                  \
    do {                                                                                           \
        double g_ = (got), w_ = (want);                                                            \
        double e_ = fabs(g_ - w_), lim_ = (rel)*fabs(w_) + 1e-300;                                 \
        CHECKF(e_ <= lim_, "%s = %.17g, want %.17g (rel err %.3g > %.3g)", #got, g_, w_,           \
               w_ != 0 ? e_ / fabs(w_) : e_, (double)(rel));                                       \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} tl_test;

#define TL_T(fn)                                                                                   \
    {                                                                                              \
#fn, fn                                                                                    \
    }

/* A fresh temporary directory /tmp/<prefix>XXXXXX into buf (a failed check and -1 if it
 * cannot be made), and the removal of such a directory with the files directly in it (1 if
 * the directory itself is gone). */
/* Seconds on the monotonic clock (deadlines and durations in tests). */
static inline double tl_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int tl_make_dir(char *buf, size_t n, const char *prefix)
{
    snprintf(buf, n, "/tmp/%sXXXXXX", prefix);
    if (mkdtemp(buf) == NULL) {
        CHECKF(0, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Remove dir and everything below it (symbolic links are removed, not followed); 1 when
 * dir itself is gone. */
static inline int tl_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
                (void)tl_remove_dir(p);
            else
                unlink(p);
        }
        closedir(d);
    }
    return rmdir(dir) == 0;
}

static inline int tl_run(const char *suite, const tl_test *tests, size_t n, int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && strstr(tests[i].name, argv[1]) == NULL)
            continue;
        const char *skip = getenv("TEST_SKIP"); /* a substring of the names to leave out */
        if (skip && *skip && strstr(tests[i].name, skip) != NULL)
            continue;
        tl_current = tests[i].name;
        int before = tl_failed_checks;
        tests[i].fn();
        if (tl_failed_checks == before) {
            passed++;
            if (getenv("TEST_VERBOSE"))
                fprintf(stderr, "ok   %s\n", tests[i].name);
        } else {
            failed++;
            fprintf(stderr, "not ok %s\n", tests[i].name);
        }
    }
    printf("%s: %d passed, %d failed\n", suite, passed, failed);
    return failed ? 1 : 0;
}

#endif
