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
    "  --help               print this help and exit\n"
    "  --version            print the version and exit\n"
    "\n"
    "The API is described by openapi.yaml, also served at GET /openapi.yaml.\n";

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
