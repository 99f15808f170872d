/*
 * main.c - dpbudgetd: configuration from flags, start the HTTP server, wait for SIGINT or
 * SIGTERM, stop gracefully (libmicrohttpd finishes in-flight requests).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "../core/ledger/ledger.h"
#include "app.h"
#include "http.h"

static const char USAGE[] =
    "Usage: dpbudgetd [OPTIONS]\n"
    "A privacy-budget service: differential-privacy accounting over HTTP/JSON.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR        address to listen on, IPv4 or IPv6 (default 127.0.0.1)\n"
    "  --port N             TCP port, 0 for an ephemeral one (default 8080)\n"
    "  --port-file PATH     write the bound port number to PATH once listening\n"
    "  --threads N          worker threads, 0 = one per CPU (default 0)\n"
    "  --max-body BYTES     largest request body accepted, else 413 (default 65536)\n"
    "  --conn-timeout SECS  close connections idle this long (default 30)\n"
    "  --max-connections N  concurrent connections (default 1024)\n"
    "  --data-dir DIR       the ledger's data directory (default ./dpbudget-data)\n"
    "  --default-budget E,D create unknown clients on first use with budget (E, D)\n"
    "                       (default: off; unknown clients are refused)\n"
    "  --snapshot-every N   log records between ledger snapshots (default 100000)\n"
    "  --no-ledger          serve the compute API only\n"
    "  --verify DIR         check a ledger data directory offline (on a copy: DIR is not\n"
    "                       modified), print its summary, exit 0 if sound, 1 if damaged\n"
    "  --help               print this help and exit\n"
    "  --version            print the version and exit\n"
    "\n"
    "The API is described by openapi.yaml, also served at GET /openapi.yaml.\n";

/* Copy DIR/name to TMP/name if it exists. 0 on success or absence. */
static int copy_if_present(const char *dir, const char *tmp, const char *name)
{
    char from[PATH_MAX], to[PATH_MAX];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(to, sizeof to, "%s/%s", tmp, name);
    FILE *in = fopen(from, "rb");
    if (in == NULL)
        return errno == ENOENT ? 0 : -1;
    FILE *out = fopen(to, "wb");
    int rc = out ? 0 : -1;
    char buf[1 << 16];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    if (ferror(in))
        rc = -1;
    fclose(in);
    if (out && fclose(out) != 0)
        rc = -1;
    return rc;
}

/* --verify DIR: recover a copy of DIR exactly as start-up would, report, leave DIR alone. */
static int verify(const char *dir)
{
    char tmp[] = "/tmp/dpbudget-verify-XXXXXX", f[PATH_MAX];
    if (mkdtemp(tmp) == NULL) {
        fprintf(stderr, "dpbudgetd: --verify: cannot make a temporary directory: %s\n",
                strerror(errno));
        return 1;
    }
    int rc = 1;
    if (copy_if_present(dir, tmp, "wal.log") != 0 || copy_if_present(dir, tmp, "snapshot") != 0) {
        fprintf(stderr, "dpbudgetd: --verify: cannot read %s: %s\n", dir, strerror(errno));
        goto out;
    }
    ledger_options o = {tmp, NULL, 0, 0.0, 0.0, 1000000000, 0};
    ledger *l;
    dpb_error err = {0};
    if (ledger_open(&o, &l, &err) != DPB_OK) {
        /* name the original directory, not the copy */
        char *at = strstr(err.detail, tmp);
        if (at)
            fprintf(stderr, "dpbudgetd: %s is damaged: %.*s%s%s\n", dir, (int)(at - err.detail),
                    err.detail, dir, at + strlen(tmp));
        else
            fprintf(stderr, "dpbudgetd: %s is damaged: %s\n", dir, err.detail);
        goto out;
    }
    ledger_summary s;
    ledger_get_summary(l, &s);
    /* a torn tail is dropped at start-up: say how much (the copy was truncated, not DIR) */
    struct stat before, after;
    snprintf(f, sizeof f, "%s/wal.log", dir);
    long long dropped = 0;
    if (stat(f, &before) == 0) {
        snprintf(f, sizeof f, "%s/wal.log", tmp);
        if (stat(f, &after) == 0 && after.st_size < before.st_size)
            dropped = (long long)(before.st_size - after.st_size);
    }
    printf("{\"data_dir\":\"%s\",\"sound\":true,\"clients\":%llu,\"rounds\":%llu,"
           "\"active\":%llu,\"exhausted\":%llu,\"uncertified\":%llu,"
           "\"torn_tail_bytes\":%lld}\n",
           dir, (unsigned long long)s.clients, (unsigned long long)s.rounds,
           (unsigned long long)s.active, (unsigned long long)s.exhausted,
           (unsigned long long)s.uncertified, dropped);
    if (dropped)
        fprintf(stderr,
                "dpbudgetd: %s/wal.log ends in %lld bytes that are not a complete record (a write "
                "cut short, or damage to the last record): start-up drops them\n",
                dir, dropped);
    ledger_close_nosnapshot(l);
    rc = 0;
out:
    for (const char *const *n =
             (const char *const[]){"wal.log", "snapshot", "wal.log.tmp", "snapshot.tmp", NULL};
         *n; n++) {
        snprintf(f, sizeof f, "%s/%s", tmp, *n);
        unlink(f);
    }
    rmdir(tmp);
    return rc;
}

/* Parse an unsigned integer in [lo, hi] or exit with a message. */
static unsigned long parse_num(const char *opt, const char *s, unsigned long lo, unsigned long hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "dpbudgetd: %s needs a whole number between %lu and %lu, got '%s'\n", opt,
                lo, hi, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    http_config cfg = {"127.0.0.1", 8080, 0, 65536, 30, 1024, NULL};
    const char *port_file = NULL;
    ledger_options lo = {"dpbudget-data", NULL, 0, 0.0, 0.0, 0, 0};
    int use_ledger = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0) {
            printf("dpbudgetd %s\n", DPB_VERSION);
            return 0;
        }
        if (strcmp(a, "--verify") == 0 && i + 1 < argc)
            return verify(argv[i + 1]);
        if (strcmp(a, "--no-ledger") == 0) {
            use_ledger = 0;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "dpbudgetd: unknown option or missing value: '%s' (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--listen") == 0)
            cfg.listen_addr = v;
        else if (strcmp(a, "--port") == 0)
            cfg.port = (unsigned)parse_num(a, v, 0, 65535);
        else if (strcmp(a, "--port-file") == 0)
            port_file = v;
        else if (strcmp(a, "--threads") == 0)
            cfg.threads = (unsigned)parse_num(a, v, 0, 256);
        else if (strcmp(a, "--max-body") == 0)
            cfg.max_body = parse_num(a, v, 64, 64UL * 1024 * 1024);
        else if (strcmp(a, "--conn-timeout") == 0)
            cfg.conn_timeout = (unsigned)parse_num(a, v, 1, 3600);
        else if (strcmp(a, "--max-connections") == 0)
            cfg.max_connections = (unsigned)parse_num(a, v, 1, 100000);
        else if (strcmp(a, "--data-dir") == 0)
            lo.dir = v;
        else if (strcmp(a, "--snapshot-every") == 0)
            lo.snapshot_every = parse_num(a, v, 1, 1000000000UL);
        else if (strcmp(a, "--default-budget") == 0) {
            char *end;
            lo.default_epsilon = strtod(v, &end);
            if (*end == ',')
                lo.default_delta = strtod(end + 1, &end);
            if (*end != '\0' || !(lo.default_epsilon >= 0.0) || !(lo.default_delta > 0.0) ||
                !(lo.default_delta < 1.0) || lo.default_epsilon > 1e6) {
                fprintf(stderr,
                        "dpbudgetd: --default-budget needs EPS,DELTA with EPS >= 0 and "
                        "0 < DELTA < 1, got '%s'\n",
                        v);
                return 2;
            }
            lo.default_budget = 1;
        } else {
            fprintf(stderr, "dpbudgetd: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }

    gsl_set_error_handler_off();
    /* Block the stop signals in every thread; the main thread waits for them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    app_state app = {NULL};
    if (use_ledger) {
        dpb_error err = {0};
        if (ledger_open(&lo, &app.ledger, &err) != DPB_OK) {
            fprintf(stderr,
                    "{\"level\":\"error\",\"msg\":\"cannot open the ledger\",\"data_dir\":"
                    "\"%s\",\"status\":\"%s\",\"detail\":\"%s\"}\n",
                    lo.dir, dpb_strstatus(err.status), err.detail);
            return 1;
        }
    }
    cfg.app = &app;
    http_server *srv = http_start(&cfg);
    if (srv == NULL) {
        ledger_close(app.ledger);
        return 1;
    }
    unsigned port = http_port(srv);
    fprintf(stderr,
            "{\"level\":\"info\",\"msg\":\"listening\",\"listen\":\"%s\",\"port\":%u,"
            "\"version\":\"%s\"}\n",
            cfg.listen_addr, port, DPB_VERSION);
    if (port_file) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0 ||
            rename(tmp, port_file) != 0) {
            fprintf(stderr, "dpbudgetd: cannot write --port-file %s: %s\n", port_file,
                    strerror(errno));
            http_stop(srv);
            ledger_close(app.ledger);
            return 1;
        }
    }
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "{\"level\":\"info\",\"msg\":\"stopping\",\"signal\":%d}\n", sig);
    http_stop(srv); /* finishes in-flight requests: every acknowledged charge is durable */
    ledger_close(app.ledger);
    return 0;
}
