/*
 * config.h - the daemon's settings and where they come from: the command line, then the
 * environment (DPBUDGET_NAME), then a --config file, then the defaults of --help. Every
 * option's name, range and message lives in config.c; main.c only asks for the result.
 */
#ifndef HTTP_CONFIG_H
#define HTTP_CONFIG_H

#include "../core/ledger/ledger.h"
#include "cors.h"
#include "http.h"

/* Everything the options set. Strings are borrowed: they point into argv, the environment
 * or the --config file's text, which stays alive until config_release. */
typedef struct {
    http_config cfg;
    const char *port_file;
    ledger_options lo;
    char data_dir_from[64]; /* where --data-dir was given ("": the default) */
    int use_ledger;
    const char *api_keys, *tls_cert, *tls_key;
    double rate;
    unsigned long reservation_ttl;
    unsigned long pld_plan_mib;    /* --pld-plan-memory */
    unsigned long pld_kept_mib;    /* --pld-kept-memory */
    double shutdown_grace;         /* --shutdown-grace: seconds served on after SIGTERM */
    double shutdown_deadline;      /* --shutdown-deadline: seconds to finish what is in flight */
    uint64_t ledger_max_pld_evals; /* --ledger-max-pld-evals */
    size_t answer_memory_mib;      /* --answer-memory */
    size_t max_named_events, max_named_bytes; /* --max-named-events, --max-named-event-bytes */
    cors_list cors; /* --cors-origin (cfg.cors points here once one is given) */
    int cors_level; /* where the origins came from: 0 file, 1 environment, 2 command line */
    const char *signing_key; /* --signing-key FILE (signer.h), NULL: nothing signed */
} config_settings;

/* The defaults of --help. */
void config_defaults(config_settings *st);

/* Applies, in rising precedence, the --config file at path (NULL: none), the environment's
 * DPBUDGET_NAME for every option the command line does not give, and the command line
 * argv[1..argc-1] (--config FILE and --healthcheck are skipped: the caller has read them).
 * A bad value in the file or the environment exits 2 with a message naming where it came
 * from; a bad command line returns 2 after the message; else 0. */
int config_load(config_settings *st, const char *path, int argc, char **argv);

/* Frees the --config file's text (the strings of st that point into it die with it). */
void config_release(void);

#endif
