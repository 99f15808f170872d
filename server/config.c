/*
 * config.c - the daemon's options (config.h): their names, ranges and messages, and the three
 * places they come from (command line, environment, --config file).
 *
 * May call: textfile.h (the --config file), tls.h (the priority string's check), admin.h (a
 * url without its password, for messages), store.h (what a PostgreSQL url is), cors.h (the
 * origins of --cors-origin).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dp/pld.h"
#include "../core/ledger/store.h"
#include "admin.h"
#include "cors.h"
#include "textfile.h"
#include "tls.h"

/* The largest config file read (far above real ones; over it: refused). */
#define CONFIG_CAP ((size_t)1 << 20)

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

/* A real number in [lo, hi] (what: the message's words for it) or exit with a message. */
static double parse_real(const char *opt, const char *v, double lo, double hi, const char *what)
{
    char *end;
    double x = strtod(v, &end);
    if (*end != '\0' || end == v || !(x >= lo && x <= hi)) {
        fprintf(stderr, "dpbudgetd: %s needs %s, got '%s'\n", opt, what, v);
        exit(2);
    }
    return x;
}

/* The options that take a whole number: its range, the field it sets and its default (that
 * of --help; 0 for ledger-pool and snapshot-every: the ledger's own, 4 and 100000). */
typedef enum { NUM_UINT, NUM_SIZE, NUM_ULONG, NUM_U64 } num_kind;
#define AT(field) offsetof(config_settings, field)
static const struct {
    const char *name;
    unsigned long lo, hi;
    size_t at;
    num_kind kind;
    unsigned long def;
} NUMERIC[] = {
    {"port", 0, 65535, AT(cfg.port), NUM_UINT, 8080},
    {"threads", 0, 256, AT(cfg.threads), NUM_UINT, 0},
    {"max-body", 64, 64UL * 1024 * 1024, AT(cfg.max_body), NUM_SIZE, 65536},
    {"max-bulk-body", 64, 256UL * 1024 * 1024, AT(cfg.max_bulk_body), NUM_SIZE, 4194304},
    {"conn-timeout", 1, 3600, AT(cfg.conn_timeout), NUM_UINT, 30},
    {"request-timeout", 1, 3600, AT(cfg.request_timeout), NUM_UINT, 60},
    {"compute-threads", 0, 256, AT(cfg.compute_threads), NUM_UINT, 0},
    {"compute-queue", 0, 100000, AT(cfg.compute_queue), NUM_UINT, 16},
    {"max-connections", 1, 100000, AT(cfg.max_connections), NUM_UINT, 1024},
    {"max-connections-per-ip", 0, 100000, AT(cfg.max_connections_per_ip), NUM_UINT, 256},
    {"header-timeout", 1, 3600, AT(cfg.header_timeout), NUM_UINT, 5},
    {"max-header-bytes", 1024, 65536, AT(cfg.max_header_bytes), NUM_SIZE, 16384},
    {"ledger-pool", 2, 1000, AT(lo.pg_pool), NUM_UINT, 0},
    {"snapshot-every", 1, 1000000000UL, AT(lo.snapshot_every), NUM_U64, 0},
    {"reservation-ttl", 1, LEDGER_TTL_MAX, AT(reservation_ttl), NUM_ULONG, 3600},
    {"max-reserved-per-key", 0, 1000000000UL, AT(lo.max_reserved_per_owner), NUM_U64, 0},
    {"pld-plan-memory", 0, 65536, AT(pld_plan_mib), NUM_ULONG, PLD_PLAN_MEMORY_DEFAULT >> 20},
    {"pld-kept-memory", 0, 1048576, AT(pld_kept_mib), NUM_ULONG, LEDGER_KEPT_MIB_DEFAULT},
    {"ledger-max-pld-evals", 1, 100000000UL, AT(ledger_max_pld_evals), NUM_U64, 10000},
    {"answer-memory", 1, 1048576, AT(answer_memory_mib), NUM_SIZE, 256},
    {"tls-handshake-timeout", 1, 3600, AT(cfg.tls_handshake_timeout), NUM_UINT, 5},
    {"max-named-events", 1, 10000000, AT(max_named_events), NUM_SIZE, LEDGER_NAMED_EVENTS_DEFAULT},
    {"max-named-event-bytes", 1024, 17179869184UL, AT(max_named_bytes), NUM_SIZE,
     (unsigned long)LEDGER_NAMED_BYTES_DEFAULT},
};
#undef AT
#define NNUMERIC (sizeof NUMERIC / sizeof NUMERIC[0])

/* Sets NUMERIC[i]'s field of st to x. */
static void set_numeric(config_settings *st, size_t i, unsigned long x)
{
    char *field = (char *)st + NUMERIC[i].at;
    switch (NUMERIC[i].kind) {
    case NUM_UINT:
        *(unsigned *)(void *)field = (unsigned)x;
        break;
    case NUM_SIZE:
        *(size_t *)(void *)field = x;
        break;
    case NUM_ULONG:
        *(unsigned long *)(void *)field = x;
        break;
    case NUM_U64:
        *(uint64_t *)(void *)field = x;
        break;
    }
}

void config_defaults(config_settings *st)
{
    *st = (config_settings){.cfg = {.listen_addr = "127.0.0.1",
                                    .log_requests = 1,
                                    .compute_deadline = 30.0,
                                    .ledger_deadline = 30.0},
                            .lo = {.dir = "dpbudget-data", .pld_refine = 1},
                            .use_ledger = 1,
                            .shutdown_grace = 5.0,
                            .shutdown_deadline = 20.0};
    for (size_t i = 0; i < NNUMERIC; i++)
        set_numeric(st, i, NUMERIC[i].def);
}

/* Sets the whole-number option name from v: 1, or 0 when name is not one of them. */
static int apply_numeric(config_settings *st, const char *opt, const char *name, const char *v)
{
    for (size_t i = 0; i < NNUMERIC; i++)
        if (strcmp(name, NUMERIC[i].name) == 0) {
            set_numeric(st, i, parse_num(opt, v, NUMERIC[i].lo, NUMERIC[i].hi));
            return 1;
        }
    return 0;
}

/* The options that take a value, and the switches (no value). */
static const char *const VALUED[] = {"listen",
                                     "port",
                                     "port-file",
                                     "threads",
                                     "max-body",
                                     "max-bulk-body",
                                     "conn-timeout",
                                     "max-connections",
                                     "data-dir",
                                     "default-budget",
                                     "snapshot-every",
                                     "reservation-ttl",
                                     "max-reserved-per-key",
                                     "api-keys",
                                     "rate-limit",
                                     "tls-cert",
                                     "tls-key",
                                     "request-timeout",
                                     "tls-priorities",
                                     "tls-handshake-timeout",
                                     "header-timeout",
                                     "max-connections-per-ip",
                                     "max-header-bytes",
                                     "compute-threads",
                                     "compute-queue",
                                     "compute-deadline",
                                     "ledger-url",
                                     "ledger-pool",
                                     "pld-plan-memory",
                                     "pld-kept-memory",
                                     "shutdown-grace",
                                     "shutdown-deadline",
                                     "ledger-deadline",
                                     "ledger-max-pld-evals",
                                     "answer-memory",
                                     "max-named-events",
                                     "max-named-event-bytes",
                                     "cors-origin",
                                     "signing-key",
                                     NULL};
static const char *const SWITCHES[] = {"no-ledger", "open-compute", "no-request-log",
                                       "no-pld-refine", NULL};

static int listed(const char *const *names, const char *n)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], n) == 0)
            return 1;
    return 0;
}

/* A switch: 1 or 0 (true/false, yes/no, on/off; none given is 1), else exit 2. */
static void apply_switch(config_settings *st, const char *opt, const char *name, const char *v)
{
    int on = v == NULL || strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 ||
             strcmp(v, "on") == 0;
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
    else if (strcmp(name, "no-pld-refine") == 0)
        st->lo.pld_refine = !on;
    else
        st->cfg.log_requests = !on;
}

/* --ledger-url: empty (an orchestrator's unset variable) is the embedded ledger; anything
 * else must be a PostgreSQL url, else exit 2 (the url shown without its password). */
static void apply_ledger_url(config_settings *st, const char *opt, const char *v)
{
    if (v[0] == '\0') {
        st->lo.ledger_url = NULL;
        return;
    }
    if (!store_is_pg_url(v)) {
        char shown[512];
        admin_redact_url(v, shown, sizeof shown);
        fprintf(stderr,
                "dpbudgetd: %s needs a PostgreSQL url, postgresql://USER@HOST[:PORT]/DB "
                "(or postgres://...), got '%s'\n",
                opt, shown);
        exit(2);
    }
    st->lo.ledger_url = v;
}

/* --default-budget EPS,DELTA, else exit 2. */
static void apply_default_budget(config_settings *st, const char *opt, const char *v)
{
    char *end;
    st->lo.default_epsilon = strtod(v, &end);
    if (*end == ',')
        st->lo.default_delta = strtod(end + 1, &end);
    if (*end != '\0' || !(st->lo.default_epsilon >= 0.0) || !(st->lo.default_delta > 0.0) ||
        !(st->lo.default_delta < 1.0) || st->lo.default_epsilon > 1e6) {
        fprintf(stderr, "dpbudgetd: %s needs EPS,DELTA with EPS >= 0 and 0 < DELTA < 1, got '%s'\n",
                opt, v);
        exit(2);
    }
    st->lo.default_budget = 1;
}

/* --cors-origin ORIGIN[,ORIGIN...]: repeatable, each adding to the list; a place of higher
 * precedence (the environment over the file, the command line over both) replaces what a
 * lower one gave. A value that is not a serialized origin exits 2. */
static void apply_cors(config_settings *st, const char *opt, const char *v, const char *where)
{
    int level = strcmp(where, "command line") == 0 ? 2 : strncmp(where, "DPBUDGET_", 9) == 0;
    if (level > st->cors_level) {
        st->cors.n = 0;
        st->cors_level = level;
    }
    char err[512];
    if (cors_add(&st->cors, v, err, sizeof err) != 0) {
        fprintf(stderr, "dpbudgetd: %s: %s\n", opt, err);
        exit(2);
    }
    st->cfg.cors = &st->cors;
}

/* The valued options that are not whole numbers: 1, or 0 when name is none of them. */
static int apply_other(config_settings *st, const char *opt, const char *name, const char *v,
                       const char *where)
{
    if (strcmp(name, "listen") == 0)
        st->cfg.listen_addr = v;
    else if (strcmp(name, "port-file") == 0)
        st->port_file = v;
    else if (strcmp(name, "compute-deadline") == 0)
        st->cfg.compute_deadline = parse_real(opt, v, 0.01, 3600.0, "seconds in [0.01, 3600]");
    else if (strcmp(name, "shutdown-grace") == 0)
        st->shutdown_grace = parse_real(opt, v, 0.0, 3600.0, "seconds in [0, 3600]");
    else if (strcmp(name, "shutdown-deadline") == 0)
        st->shutdown_deadline = parse_real(opt, v, 0.0, 3600.0, "seconds in [0, 3600]");
    else if (strcmp(name, "ledger-deadline") == 0)
        st->cfg.ledger_deadline = parse_real(opt, v, 0.001, 3600.0, "seconds in [0.001, 3600]");
    else if (strcmp(name, "rate-limit") == 0)
        st->rate = parse_real(opt, v, 0.0, 1e6, "requests per second in [0, 1e6]");
    else if (strcmp(name, "data-dir") == 0) {
        st->lo.dir = v;
        snprintf(st->data_dir_from, sizeof st->data_dir_from, "%s", where);
    } else if (strcmp(name, "ledger-url") == 0)
        apply_ledger_url(st, opt, v);
    else if (strcmp(name, "default-budget") == 0)
        apply_default_budget(st, opt, v);
    else if (strcmp(name, "api-keys") == 0)
        st->api_keys = v;
    else if (strcmp(name, "cors-origin") == 0)
        apply_cors(st, opt, v, where);
    else if (strcmp(name, "tls-cert") == 0)
        st->tls_cert = v;
    else if (strcmp(name, "tls-key") == 0)
        st->tls_key = v;
    else if (strcmp(name, "signing-key") == 0)
        st->signing_key = v;
    else if (strcmp(name, "tls-priorities") == 0) {
        char err[160];
        if (tls_check_priorities(v, err, sizeof err) != 0) {
            fprintf(stderr, "dpbudgetd: %s: %s\n", opt, err);
            exit(2);
        }
        st->cfg.tls_priorities = v;
    } else
        return 0;
    return 1;
}

/* Apply one option (name without dashes); where says where it came from, for messages.
 * Strings are kept by pointer: the caller keeps them alive. Exits 2 on a bad value. */
static void apply(config_settings *st, const char *name, const char *v, const char *where)
{
    char opt[96];
    snprintf(opt, sizeof opt, "--%s (%s)", name, where);
    if (listed(SWITCHES, name)) {
        apply_switch(st, opt, name, v);
        return;
    }
    if (v == NULL) {
        fprintf(stderr, "dpbudgetd: %s needs a value (see --help)\n", opt);
        exit(2);
    }
    if (!apply_numeric(st, opt, name, v) && !apply_other(st, opt, name, v, where)) {
        fprintf(stderr, "dpbudgetd: unknown option '%s' (%s; see --help)\n", name, where);
        exit(2);
    }
}

/* The config file, read whole; its lines stay in place until main returns (options point
 * into them). */
static textfile config_text;

/* --config FILE: 'name = value' or 'name' lines; '#' comments (to the end of the line). The
 * file is read whole (no line is split, however long); any fault exits 2 naming the line. */
static void apply_file(config_settings *st, const char *path)
{
    char err[512];
    if (textfile_read(&config_text, path, CONFIG_CAP, err, sizeof err) != 0 ||
        textfile_lines(&config_text, path, err, sizeof err) != 0) {
        fprintf(stderr, "dpbudgetd: --config: %s\n", err);
        exit(2);
    }
    for (size_t n = 1; n <= config_text.n; n++) {
        char *line = config_text.line[n - 1];
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
        while (e > name && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (val) {
            while (*val == ' ' || *val == '\t')
                val++;
            e = val + strlen(val);
            while (e > val && (e[-1] == ' ' || e[-1] == '\t'))
                *--e = '\0';
        }
        if (*name == '\0' && val == NULL)
            continue;
        if (!listed(VALUED, name) && !listed(SWITCHES, name)) {
            fprintf(stderr, "dpbudgetd: %s line %zu: unknown option '%s'\n", path, n, name);
            exit(2);
        }
        char where[64];
        snprintf(where, sizeof where, "config line %zu", n);
        apply(st, name, val, where);
    }
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
static void apply_env(config_settings *st, int argc, char **argv)
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

int config_load(config_settings *st, const char *path, int argc, char **argv)
{
    if (path)
        apply_file(st, path);
    apply_env(st, argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (strcmp(a, "--healthcheck") == 0)
            continue;
        if (strncmp(a, "--", 2) != 0 || (!listed(VALUED, a + 2) && !listed(SWITCHES, a + 2))) {
            char shown[512]; /* a url typed without its option, or as --ledger-url=URL */
            admin_redact_url(a, shown, sizeof shown);
            fprintf(stderr, "dpbudgetd: unknown option '%s' (see --help)\n", shown);
            return 2;
        }
        if (listed(SWITCHES, a + 2)) {
            apply(st, a + 2, NULL, "command line");
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "dpbudgetd: %s needs a value (see --help)\n", a);
            return 2;
        }
        apply(st, a + 2, argv[++i], "command line");
    }
    return 0;
}

void config_release(void)
{
    textfile_release(&config_text);
}
