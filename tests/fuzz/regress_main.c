/*
 * regress_main.c - replay fuzz inputs without libFuzzer: links with one fuzz target and
 * calls its LLVMFuzzerTestOneInput on every file named on the command line and on every
 * file in every directory named there (not recursive; names starting with '.' and README
 * files are skipped). Each input runs in a child process, so one crash (abort, sanitizer
 * report, signal) is reported with its file name and the others still run.
 *
 *   fuzz_regress_request tests/fuzz/corpus/request tests/fuzz/crashes
 *
 * Prints one line per failing input and the closing line "fuzzregress: N passed, M failed"
 * (the tests/run.sh convention). Exit 0 if none failed, else 1.
 * FUZZ_REGRESS_INPROCESS=1 runs the inputs in this process (for a debugger).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int passed, failed, inprocess;

static int read_file(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t cap = 4096, n = 0;
    uint8_t *b = malloc(cap);
    while (b != NULL) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        uint8_t *nb = realloc(b, cap * 2);
        if (nb == NULL) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int bad = b == NULL || ferror(f);
    if (fclose(f) != 0)
        bad = 1;
    if (bad) {
        free(b);
        return -1;
    }
    *data = b;
    *size = n;
    return 0;
}

static void run_one(const char *path)
{
    uint8_t *data = NULL;
    size_t size = 0;
    if (read_file(path, &data, &size) != 0) {
        printf("FAIL %s: cannot read: %s\n", path, strerror(errno));
        failed++;
        return;
    }
    if (inprocess) {
        LLVMFuzzerTestOneInput(data, size);
        free(data);
        passed++;
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        printf("FAIL %s: fork: %s\n", path, strerror(errno));
        failed++;
        free(data);
        return;
    }
    if (pid == 0) {
        LLVMFuzzerTestOneInput(data, size);
        free(data);
        exit(0); /* exit, not _exit: LeakSanitizer checks at exit */
    }
    free(data);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        passed++;
    } else {
        if (WIFSIGNALED(st))
            printf("FAIL %s: killed by signal %d\n", path, WTERMSIG(st));
        else
            printf("FAIL %s: exit status %d\n", path, WEXITSTATUS(st));
        failed++;
    }
}

static int skip_name(const char *name)
{
    return name[0] == '.' || strncmp(name, "README", 6) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL) {
        printf("FAIL %s: cannot open: %s\n", path, strerror(errno));
        failed++;
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (skip_name(e->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (nn == NULL)
                break;
            names = nn;
            cap = ncap;
        }
        size_t len = strlen(path) + 1 + strlen(e->d_name) + 1;
        names[n] = malloc(len);
        if (names[n] == NULL)
            break;
        snprintf(names[n], len, "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str); /* a stable order for the log */
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        if (stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode))
            run_one(names[i]);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    const char *ip = getenv("FUZZ_REGRESS_INPROCESS");
    inprocess = ip != NULL && strcmp(ip, "1") == 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            printf("FAIL %s: %s\n", argv[i], strerror(errno));
            failed++;
        } else if (S_ISDIR(sb.st_mode)) {
            run_dir(argv[i]);
        } else {
            run_one(argv[i]);
        }
    }
    printf("fuzzregress: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
