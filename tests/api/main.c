/*
 * main.c - the API suite: start a real dpbudgetd on an ephemeral port, run every API test
 * against it over HTTP, stop it with SIGTERM (the last test: it must exit 0), and print
 * the closing "api: N passed, M failed".
 *
 *   api_tests [DPBUDGETD] [FILTER]
 *
 * The daemon is argv[1] when that is an executable, else $DPBUDGETD (then argv[1], if
 * any, is the filter). FILTER keeps the tests whose name contains it.
 *
 * With DPB_API_PG=1 the ledger's suites (clients, rounds, policies, accountants, dry runs,
 * idempotency, two-phase rounds, bulk registration, ETags, summary, lists, named events,
 * history) run again, "apipg", against a daemon whose ledger is in the PostgreSQL database
 * DPB_TEST_PG_URL (tests/pg/pgtmp.sh with ... provides one): the same semantics on both
 * backends. Without a url (no PostgreSQL binaries) they are skipped with a note.
 */
#define TESTLIB_MAIN
#include "suites.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "client.h"

static pid_t daemon_pid = -1;
static const char *pg_url; /* the ledger's database (DPB_API_PG), or NULL: --data-dir */
static char tmpdir[64];
static char port_path[128];
static char log_path[128];
static char data_path[128];

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Copy the daemon's log to stderr (it is kept in a file to keep the test output short). */
static void dump_log(void)
{
    FILE *f = fopen(log_path, "r");
    if (f == NULL)
        return;
    char line[512];
    fprintf(stderr, "---- dpbudgetd log ----\n");
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fprintf(stderr, "-----------------------\n");
    fclose(f);
}

static const char *daemon_bin;
static int have_tmpdir;
static void cleanup_tmpdir(void);
static int stop_daemon(void);

/* Start the daemon (with extra arguments and environment, NULL-terminated lists, either may
 * be NULL) and wait up to 5 s for its port file: 0 when listening, the exit status + 1000
 * when it exited first, -1 otherwise. */
static int start_daemon_ex(const char *bin, const char *const *extra, const char *const *env,
                           const char *scheme)
{
    /* one harness daemon at a time: a filtered run skips the test that stops the shared
     * one before the suites that start their own, which left it running after the run */
    if (daemon_pid > 0)
        (void)stop_daemon();
    if (have_tmpdir)
        cleanup_tmpdir();
    have_tmpdir = 1;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpb-api-XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        perror("api_tests: mkdtemp");
        return -1;
    }
    snprintf(port_path, sizeof port_path, "%s/port", tmpdir);
    snprintf(log_path, sizeof log_path, "%s/daemon.log", tmpdir);
    snprintf(data_path, sizeof data_path, "%s/data", tmpdir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("api_tests: fork");
        return -1;
    }
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        const char *args[64] = {bin,       "--listen",        "127.0.0.1", "--port",
                                "0",       "--port-file",     port_path,   "--max-body",
                                "65536",   "--threads",       "2",         "--data-dir",
                                data_path, "--max-bulk-body", "131072"};
        size_t na = 15;
        if (pg_url) {
            args[11] = "--ledger-url";
            args[12] = pg_url;
        }
        for (size_t i = 0; extra && extra[i] && na + 1 < 64; i++)
            args[na++] = extra[i];
        args[na] = NULL;
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(bin, (char *const *)args);
        fprintf(stderr, "api_tests: cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    daemon_pid = pid;
    for (int waited = 0; waited <= 5000; waited += 10) {
        FILE *f = fopen(port_path, "r");
        unsigned port = 0;
        if (f) {
            int ok = fscanf(f, "%u", &port) == 1;
            fclose(f);
            if (ok && port > 0 && port < 65536) {
                char base[64];
                snprintf(base, sizeof base, "%s://127.0.0.1:%u", scheme, port);
                api_set_base(base);
                return 0;
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            daemon_pid = -1;
            if (extra == NULL) {
                fprintf(stderr, "api_tests: %s exited before listening (status %d)\n", bin, st);
                dump_log();
            }
            return WIFEXITED(st) ? 1000 + WEXITSTATUS(st) : -1;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "api_tests: %s wrote no port file within 5 s\n", bin);
    dump_log();
    return -1;
}

/* SIGTERM, then wait up to 5 s (SIGKILL after that). Returns the wait status or -1. */
/* The end of the daemon's log on stderr (after it did not exit cleanly: the reason). */
static void show_log_tail(int st)
{
    FILE *f = fopen(log_path, "r");
    if (f == NULL)
        return;
    char buf[4096];
    long at = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    (void)fseek(f, at > (long)sizeof buf - 1 ? at - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "api_tests: dpbudgetd's wait status %d; the end of its log:\n%s\n", st, buf);
}

static int stop_daemon(void)
{
    if (daemon_pid <= 0)
        return -1;
    pid_t pid = daemon_pid;
    daemon_pid = -1;
    kill(pid, SIGTERM);
    int st = 0;
    for (int waited = 0; waited < 5000; waited += 10) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (st != 0)
                show_log_tail(st);
            return st;
        }
        if (w < 0 && errno != EINTR)
            return -1;
        sleep_ms(10);
    }
    fprintf(stderr, "api_tests: dpbudgetd ignored SIGTERM for 5 s: SIGKILL\n");
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return -1;
}

static int start_daemon(const char *bin)
{
    return start_daemon_ex(bin, NULL, NULL, "http");
}

int api_daemon_start(const char *const *extra, const char *const *env, const char *scheme)
{
    return start_daemon_ex(daemon_bin, extra, env, scheme ? scheme : "http");
}

int api_daemon_stop(void)
{
    return stop_daemon();
}

int api_daemon_wait(double timeout_s)
{
    if (daemon_pid <= 0)
        return -1;
    pid_t pid = daemon_pid;
    int st = 0;
    for (double waited = 0.0; waited < timeout_s; waited += 0.01) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            daemon_pid = -1;
            return st;
        }
        if (w < 0 && errno != EINTR)
            break;
        sleep_ms(10);
    }
    (void)stop_daemon(); /* it did not exit: SIGTERM again, then SIGKILL */
    return -1;
}

int api_daemon_pid(void)
{
    return (int)daemon_pid;
}

const char *daemon_binary(void)
{
    return daemon_bin;
}

const char *api_daemon_log(void)
{
    return log_path;
}

/* The daemon's directory, whatever it left there (port file, log, ledger, LOCK). */
static void cleanup_tmpdir(void)
{
    have_tmpdir = 0;
    if (tmpdir[0])
        (void)tl_remove_dir(tmpdir);
}

static int daemon_started;

static void daemon_starts(void)
{
    CHECKF(daemon_started, "dpbudgetd did not start (see above)");
}

/* Last: SIGTERM stops the daemon gracefully with exit status 0. */
static void daemon_exits_cleanly_on_sigterm(void)
{
    int st = stop_daemon();
    CHECKF(st != -1, "dpbudgetd did not stop within 5 s");
    if (st != -1) {
        CHECKF(WIFEXITED(st), "dpbudgetd ended by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dpbudgetd exit status %d",
               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        dump_log();
}

static int is_executable(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

int main(int argc, char **argv)
{
    const char *bin = NULL, *filter = NULL;
    if (argc > 1 && is_executable(argv[1])) {
        bin = argv[1];
        filter = argc > 2 ? argv[2] : NULL;
    } else {
        bin = getenv("DPBUDGETD");
        filter = argc > 1 ? argv[1] : NULL;
    }
    char *run_argv[] = {argv[0], (char *)filter, NULL};
    int run_argc = filter ? 2 : 1;
    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "usage: %s DPBUDGETD [FILTER]   (or set DPBUDGETD)\n", argv[0]);
        static const tl_test none[] = {TL_T(daemon_starts)};
        return tl_run("api", none, 1, 1, run_argv);
    }
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "api_tests: curl_global_init failed\n");
        return 1;
    }
    daemon_bin = bin;
    /* the daemons stop at once on SIGTERM unless a test asks for a grace (test_overload.c) */
    setenv("DPBUDGET_SHUTDOWN_GRACE", "0", 0);
    const char *pg = getenv("DPB_API_PG");
    const char *name = "api";
    if (pg && strcmp(pg, "1") == 0) {
        name = "apipg";
        pg_url = getenv("DPB_TEST_PG_URL");
        if (pg_url == NULL || pg_url[0] == '\0') {
            fprintf(stderr, "api_tests: DPB_API_PG=1 without DPB_TEST_PG_URL (no PostgreSQL "
                            "binaries: scripts/deps.sh installs them): the ledger suites on "
                            "PostgreSQL are skipped\n");
            printf("apipg: 0 passed, 0 failed\n");
            curl_global_cleanup();
            return 0;
        }
    }
    daemon_started = start_daemon(bin) == 0;
    int rc;
    if (!daemon_started) {
        stop_daemon();
        static const tl_test none[] = {TL_T(daemon_starts)};
        rc = tl_run(name, none, 1, 1, run_argv);
    } else if (pg_url) {
        static tl_test all[128];
        size_t n = 0;
        const struct {
            const tl_test *t;
            size_t n;
        } suites[] = {{LEDGER_API_TESTS, LEDGER_API_NTESTS},   {WORKFLOW_TESTS, WORKFLOW_NTESTS},
                      {VOCAB_API_TESTS, VOCAB_API_NTESTS},     {LOG_API_TESTS, LOG_API_NTESTS},
                      {HISTORY_API_TESTS, HISTORY_API_NTESTS}, {STUCK_API_TESTS, STUCK_API_NTESTS}};
        for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++)
            for (size_t i = 0; i < suites[s].n && n + 1 < sizeof all / sizeof all[0]; i++)
                all[n++] = suites[s].t[i];
        all[n++] = (tl_test)TL_T(daemon_exits_cleanly_on_sigterm);
        /* then receipts on the database's ledger (own daemon, the same url) */
        for (size_t i = 0; i < SIGN_PG_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = SIGN_PG_TESTS[i];
        rc = tl_run(name, all, n, run_argc, run_argv);
        stop_daemon();
    } else {
        static tl_test all[256];
        size_t n = 0;
        const struct {
            const tl_test *t;
            size_t n;
        } suites[] = {
            {COMPUTE_TESTS, COMPUTE_NTESTS},
            {OPS_TESTS, OPS_NTESTS},
            {ERROR_TESTS, ERROR_NTESTS},
            {CONTRACT_TESTS, CONTRACT_NTESTS},
            {ACCOUNTANT_API_TESTS, ACCOUNTANT_API_NTESTS},
            {PNSGD_API_TESTS, PNSGD_API_NTESTS},
            {PROACTIVE_API_TESTS, PROACTIVE_API_NTESTS},
            {MECH_API_TESTS, MECH_API_NTESTS},
            {RDPGAP_API_TESTS, RDPGAP_API_NTESTS},
            {LEDGER_API_TESTS, LEDGER_API_NTESTS},
            {SAMPLING_API_TESTS, SAMPLING_API_NTESTS},
            {WORKFLOW_TESTS, WORKFLOW_NTESTS},
            {VOCAB_API_TESTS, VOCAB_API_NTESTS},
            {STUCK_API_TESTS, STUCK_API_NTESTS},
            {NUMBER_TESTS, NUMBER_NTESTS},
            {JSONIN_TESTS, JSONIN_NTESTS},
            {HOSTILE_TESTS, HOSTILE_NTESTS},
            {EDGE_SHARED_TESTS, EDGE_SHARED_NTESTS},
            {ADMIN_TESTS, ADMIN_NTESTS},
            {CONV_TESTS, CONV_NTESTS},
            {LOG_API_TESTS, LOG_API_NTESTS},
            {HISTORY_API_TESTS, HISTORY_API_NTESTS},
        };
        for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++)
            for (size_t i = 0; i < suites[s].n && n + 1 < sizeof all / sizeof all[0]; i++)
                all[n++] = suites[s].t[i];
        all[n++] = (tl_test)TL_T(daemon_exits_cleanly_on_sigterm);
        /* then the suites that start their own daemons (ledger options, auth, TLS) */
        for (size_t i = 0; i < LEDGER_OWN_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = LEDGER_OWN_TESTS[i];
        for (size_t i = 0; i < VOCAB_OWN_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = VOCAB_OWN_TESTS[i];
        for (size_t i = 0; i < AUTH_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = AUTH_TESTS[i];
        for (size_t i = 0; i < OWNER_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = OWNER_TESTS[i];
        for (size_t i = 0; i < OPERATOR_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = OPERATOR_TESTS[i];
        for (size_t i = 0; i < EDGE_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = EDGE_TESTS[i];
        for (size_t i = 0; i < OVERLOAD_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = OVERLOAD_TESTS[i];
        for (size_t i = 0; i < LEDGER_BOUNDS_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = LEDGER_BOUNDS_TESTS[i];
        for (size_t i = 0; i < CONV_OWN_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = CONV_OWN_TESTS[i];
        for (size_t i = 0; i < SIGN_NTESTS && n + 1 < sizeof all / sizeof all[0]; i++)
            all[n++] = SIGN_TESTS[i];
        rc = tl_run("api", all, n, run_argc, run_argv);
        stop_daemon(); /* when the filter skipped the last test */
    }
    cleanup_tmpdir();
    curl_global_cleanup();
    return rc;
}
