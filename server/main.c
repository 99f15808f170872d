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
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "../core/ledger/ledger.h"
#include "app.h"
#include "auth.h"
#include "http.h"

static const char USAGE[] =
    "Usage: dpbudgetd [OPTIONS]\n"
    "A privacy-budget service: differential-privacy accounting over HTTP/JSON.\n"
    "\n"
    "Options:\n"
    "  --listen ADDR        address to listen on, IPv4 or IPv6 (default 127.0.0.1); any\n"
    "                       address but loopback needs --api-keys\n"
    "  --port N             TCP port, 0 for an ephemeral one (default 8080)\n"
    "  --port-file PATH     write the bound port number to PATH once listening\n"
    "  --threads N          worker threads, 0 = one per CPU (default 0)\n"
    "  --max-body BYTES     largest request body accepted, else 413 (default 65536)\n"
    "  --conn-timeout SECS  close connections idle this long (default 30)\n"
    "  --request-timeout SECS  drop a request whose body takes longer than this to arrive\n"
    "                       (slow senders; default 60)\n"
    "  --max-connections N  concurrent connections (default 1024)\n"
    "  --data-dir DIR       the ledger's data directory (default ./dpbudget-data)\n"
    "  --default-budget E,D create unknown clients on first use with budget (E, D)\n"
    "                       (default: off; unknown clients are refused)\n"
    "  --snapshot-every N   log records between ledger snapshots (default 100000)\n"
    "  --no-ledger          serve the compute API only\n"
    "  --api-keys FILE      API keys: lines '<sha256 hex of token> <scopes> [name]', scopes\n"
    "                       a comma list of read, charge, admin (make one with\n"
    "                       printf %s \"$TOKEN\" | sha256sum); with keys, every endpoint but\n"
    "                       /healthz, /readyz, /metrics, /openapi.yaml and the dashboard\n"
    "                       (/ and /ui/) needs a key sent as 'Authorization: Bearer TOKEN'\n"
    "  --open-compute       leave the compute endpoints (/v1/delta, /v1/epsilon,\n"
    "                       /v1/calibrate, /v1/curve, /v1/proactive, /v1/accountants) open\n"
    "                       when keys are configured; ledger endpoints never are\n"
    "  --rate-limit RPS     requests per second per API key, 0 = unlimited (default 0);\n"
    "                       over it: 429 with Retry-After\n"
    "  --tls-cert FILE      serve HTTPS with this PEM certificate (chain) ...\n"
    "  --tls-key FILE       ... and this PEM private key (both or neither)\n"
    "  --no-request-log     do not log one JSON line per request\n"
    "  --config FILE        read options from FILE: lines 'name = value' (or 'name' for\n"
    "                       a switch), names as above without the dashes\n"
    "  --verify DIR         check a ledger data directory offline (on a copy: DIR is not\n"
    "                       modified), print its summary, exit 0 if sound, 1 if damaged\n"
    "  --help               print this help and exit\n"
    "  --version            print the version and exit\n"
    "\n"
    "Every option can also be set in the environment as DPBUDGET_NAME (e.g. DPBUDGET_PORT,\n"
    "DPBUDGET_API_KEYS, DPBUDGET_CONFIG; switches take 1 or 0). Precedence: command line,\n"
    "then environment, then --config file, then the defaults above.\n"
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

typedef struct {
    http_config cfg;
    const char *port_file;
    ledger_options lo;
    int use_ledger;
    const char *api_keys, *tls_cert, *tls_key;
    double rate;
} settings;

/* The options that take a value, and the switches (no value). */
static const char *const VALUED[] = {
    "listen",         "port",           "port-file",       "threads",
    "max-body",       "conn-timeout",   "max-connections", "data-dir",
    "default-budget", "snapshot-every", "api-keys",        "rate-limit",
    "tls-cert",       "tls-key",        "request-timeout", NULL};
static const char *const SWITCHES[] = {"no-ledger", "open-compute", "no-request-log", NULL};

static int listed(const char *const *names, const char *n)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], n) == 0)
            return 1;
    return 0;
}

/* Apply one option (name without dashes); where says where it came from, for messages.
 * Strings are kept by pointer: the caller keeps them alive. Exits 2 on a bad value. */
static void apply(settings *st, const char *name, const char *v, const char *where)
{
    char opt[96];
    snprintf(opt, sizeof opt, "--%s (%s)", name, where);
    if (listed(SWITCHES, name)) {
        int on = v == NULL || strcmp(v, "1") == 0 || strcmp(v, "true") == 0 ||
                 strcmp(v, "yes") == 0 || strcmp(v, "on") == 0;
        int off = v && (strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "no") == 0 ||
                        strcmp(v, "off") == 0);
        if (!on && !off) {
            fprintf(stderr, "dpbudgetd: %s is a switch: give 1 or 0, got '%s'\n", opt, v);
            exit(2);
        }
        if (strcmp(name, "no-ledger") == 0)
            st->use_ledger = !on;
        else if (strcmp(name, "open-compute") == 0)
            st->cfg.open_compute = on;
        else
            st->cfg.log_requests = !on;
        return;
    }
    if (v == NULL) {
        fprintf(stderr, "dpbudgetd: %s needs a value (see --help)\n", opt);
        exit(2);
    }
    if (strcmp(name, "listen") == 0)
        st->cfg.listen_addr = v;
    else if (strcmp(name, "port") == 0)
        st->cfg.port = (unsigned)parse_num(opt, v, 0, 65535);
    else if (strcmp(name, "port-file") == 0)
        st->port_file = v;
    else if (strcmp(name, "threads") == 0)
        st->cfg.threads = (unsigned)parse_num(opt, v, 0, 256);
    else if (strcmp(name, "max-body") == 0)
        st->cfg.max_body = parse_num(opt, v, 64, 64UL * 1024 * 1024);
    else if (strcmp(name, "conn-timeout") == 0)
        st->cfg.conn_timeout = (unsigned)parse_num(opt, v, 1, 3600);
    else if (strcmp(name, "request-timeout") == 0)
        st->cfg.request_timeout = (unsigned)parse_num(opt, v, 1, 3600);
    else if (strcmp(name, "max-connections") == 0)
        st->cfg.max_connections = (unsigned)parse_num(opt, v, 1, 100000);
    else if (strcmp(name, "data-dir") == 0)
        st->lo.dir = v;
    else if (strcmp(name, "snapshot-every") == 0)
        st->lo.snapshot_every = parse_num(opt, v, 1, 1000000000UL);
    else if (strcmp(name, "api-keys") == 0)
        st->api_keys = v;
    else if (strcmp(name, "tls-cert") == 0)
        st->tls_cert = v;
    else if (strcmp(name, "tls-key") == 0)
        st->tls_key = v;
    else if (strcmp(name, "rate-limit") == 0) {
        char *end;
        st->rate = strtod(v, &end);
        if (*end != '\0' || end == v || !(st->rate >= 0.0 && st->rate <= 1e6)) {
            fprintf(stderr, "dpbudgetd: %s needs requests per second in [0, 1e6], got '%s'\n", opt,
                    v);
            exit(2);
        }
    } else if (strcmp(name, "default-budget") == 0) {
        char *end;
        st->lo.default_epsilon = strtod(v, &end);
        if (*end == ',')
            st->lo.default_delta = strtod(end + 1, &end);
        if (*end != '\0' || !(st->lo.default_epsilon >= 0.0) || !(st->lo.default_delta > 0.0) ||
            !(st->lo.default_delta < 1.0) || st->lo.default_epsilon > 1e6) {
            fprintf(stderr,
                    "dpbudgetd: %s needs EPS,DELTA with EPS >= 0 and 0 < DELTA < 1, got '%s'\n",
                    opt, v);
            exit(2);
        }
        st->lo.default_budget = 1;
    } else {
        fprintf(stderr, "dpbudgetd: unknown option '%s' (%s; see --help)\n", name, where);
        exit(2);
    }
}

/* Strings read from the config file, kept until main returns. */
static char *kept[256];
static int nkept;

static const char *keep(const char *s)
{
    if (s == NULL)
        return NULL;
    if (nkept == (int)(sizeof kept / sizeof kept[0])) {
        fprintf(stderr, "dpbudgetd: too many lines in the config file\n");
        exit(2);
    }
    char *d = strdup(s);
    if (d == NULL) {
        fprintf(stderr, "dpbudgetd: out of memory reading the config file\n");
        exit(2);
    }
    return kept[nkept++] = d;
}

/* --config FILE: 'name = value' or 'name' lines; '#' comments. */
static void apply_file(settings *st, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "dpbudgetd: cannot read --config %s: %s\n", path, strerror(errno));
        exit(2);
    }
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        char *h = strchr(line, '#');
        if (h)
            *h = '\0';
        char *name = line, *val = strchr(line, '=');
        if (val)
            *val++ = '\0';
        /* trim */
        while (*name == ' ' || *name == '\t')
            name++;
        char *e = name + strlen(name);
        while (e > name && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
            *--e = '\0';
        if (val) {
            while (*val == ' ' || *val == '\t')
                val++;
            e = val + strlen(val);
            while (e > val && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
                *--e = '\0';
        }
        if (*name == '\0')
            continue;
        if (!listed(VALUED, name) && !listed(SWITCHES, name)) {
            fprintf(stderr, "dpbudgetd: %s line %d: unknown option '%s'\n", path, n, name);
            exit(2);
        }
        char where[64];
        snprintf(where, sizeof where, "config line %d", n);
        apply(st, keep(name), keep(val), where);
    }
    fclose(f);
}

/* 1 if the command line gives --name (its value then wins, and the environment's is not
 * even parsed: orchestrators inject variables such as DPBUDGET_PORT=tcp://... by name). */
static int on_command_line(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i] + 2, name) == 0)
            return 1;
    return 0;
}

/* DPBUDGET_NAME for every option not on the command line. */
static void apply_env(settings *st, int argc, char **argv)
{
    const char *const *lists[] = {VALUED, SWITCHES};
    for (int l = 0; l < 2; l++)
        for (int i = 0; lists[l][i]; i++) {
            char env[64] = "DPBUDGET_";
            size_t k = strlen(env);
            for (const char *c = lists[l][i]; *c && k + 1 < sizeof env; c++)
                env[k++] = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
            env[k] = '\0';
            const char *v = getenv(env);
            if (v && !on_command_line(argc, argv, lists[l][i]))
                apply(st, lists[l][i], v, env);
        }
}

/* 1 for 127.0.0.0/8 and ::1. */
static int is_loopback(const char *addr)
{
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
}

/* A whole PEM file (malloc'ed, NUL-terminated) or exit 2. */
static char *read_pem(const char *opt, const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (f) {
        int c;
        while ((c = fgetc(f)) != EOF && len < 1 << 20) {
            if (len + 2 > cap) {
                cap = cap ? cap * 2 : 4096;
                char *nb = realloc(buf, cap);
                if (nb == NULL)
                    break;
                buf = nb;
            }
            buf[len++] = (char)c;
        }
        fclose(f);
    }
    if (f == NULL || buf == NULL ||
        strstr(buf ? (buf[len] = '\0', buf) : "", "-----BEGIN") == NULL) {
        fprintf(stderr, "dpbudgetd: %s %s: cannot read a PEM file there\n", opt, path);
        exit(2);
    }
    return buf;
}

int main(int argc, char **argv)
{
    settings st = {{"127.0.0.1", 8080, 0, 65536, 30, 60, 1024, NULL, NULL, 0, 1, NULL, NULL},
                   NULL,
                   {"dpbudget-data", NULL, 0, 0.0, 0.0, 0, 0},
                   1,
                   NULL,
                   NULL,
                   NULL,
                   0.0};
    /* first pass: help, version, verify, and where the config file is */
    const char *config = getenv("DPBUDGET_CONFIG");
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
        if (strcmp(a, "--config") == 0 && i + 1 < argc)
            config = argv[++i];
    }
    if (config)
        apply_file(&st, config);
    apply_env(&st, argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (strncmp(a, "--", 2) != 0 || (!listed(VALUED, a + 2) && !listed(SWITCHES, a + 2))) {
            fprintf(stderr, "dpbudgetd: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (listed(SWITCHES, a + 2)) {
            apply(&st, a + 2, NULL, "command line");
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "dpbudgetd: %s needs a value (see --help)\n", a);
            return 2;
        }
        apply(&st, a + 2, argv[++i], "command line");
    }
    http_config cfg = st.cfg;
    const char *port_file = st.port_file;
    ledger_options lo = st.lo;
    int use_ledger = st.use_ledger;
    auth_table keys = {NULL, 0, st.rate, st.rate < 1.0 ? 1.0 : st.rate};
    if (st.api_keys) {
        char msg[256];
        if (auth_load(&keys, st.api_keys, msg, sizeof msg) != 0) {
            fprintf(stderr, "dpbudgetd: %s\n", msg);
            return 2;
        }
        cfg.auth = &keys;
    } else if (!is_loopback(cfg.listen_addr)) {
        fprintf(stderr,
                "dpbudgetd: refusing to listen on %s without API keys: anyone who can reach it "
                "could spend or read privacy budgets. Give --api-keys FILE, or listen on "
                "127.0.0.1\n",
                cfg.listen_addr);
        return 2;
    }
    if ((st.tls_cert == NULL) != (st.tls_key == NULL)) {
        fprintf(stderr, "dpbudgetd: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (st.tls_cert) {
        cfg.tls_cert_pem = read_pem("--tls-cert", st.tls_cert);
        cfg.tls_key_pem = read_pem("--tls-key", st.tls_key);
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
    char ts[40]; /* log line timestamps (http_log_time) */
    int lock_fd = -1;
    if (use_ledger) {
        /* one daemon per data directory: a second would interleave its log with ours */
        if (mkdir(lo.dir, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "dpbudgetd: cannot create the data directory %s: %s\n", lo.dir,
                    strerror(errno));
            return 1;
        }
        char lock_path[PATH_MAX];
        snprintf(lock_path, sizeof lock_path, "%s/LOCK", lo.dir);
        lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
            http_log_time(ts, sizeof ts);
            fprintf(stderr,
                    "{\"ts\":\"%s\",\"level\":\"error\",\"msg\":\"the data directory is in use by "
                    "another dpbudgetd (or cannot be locked)\",\"data_dir\":\"%s\",\"detail\":"
                    "\"%s\"}\n",
                    ts, lo.dir, strerror(errno));
            return 1;
        }
        dpb_error err = {0};
        if (ledger_open(&lo, &app.ledger, &err) != DPB_OK) {
            http_log_time(ts, sizeof ts);
            fprintf(stderr,
                    "{\"ts\":\"%s\",\"level\":\"error\",\"msg\":\"cannot open the ledger\","
                    "\"data_dir\":\"%s\",\"status\":\"%s\",\"detail\":\"%s\"}\n",
                    ts, lo.dir, dpb_strstatus(err.status), err.detail);
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
    http_log_time(ts, sizeof ts);
    fprintf(stderr,
            "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"listening\",\"listen\":\"%s\","
            "\"port\":%u,\"version\":\"%s\"}\n",
            ts, cfg.listen_addr, port, DPB_VERSION);
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
    http_log_time(ts, sizeof ts);
    fprintf(stderr, "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"stopping\",\"signal\":%d}\n", ts,
            sig);
    http_stop(srv); /* finishes in-flight requests: every acknowledged charge is durable */
    ledger_close(app.ledger);
    auth_free(&keys);
    if (lock_fd >= 0)
        close(lock_fd);
    free((char *)cfg.tls_cert_pem);
    free((char *)cfg.tls_key_pem);
    for (int i = 0; i < nkept; i++)
        free(kept[i]);
    return 0;
}
