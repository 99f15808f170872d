/* suites.h - the API test suites, one per theme; main.c runs them against a live daemon. */
#ifndef DPB_API_SUITES_H
#define DPB_API_SUITES_H

#include <stdarg.h>
#include <stddef.h>

#include "../testlib.h"
#include "client.h"

extern const tl_test COMPUTE_TESTS[]; /* test_compute.c: happy paths with exact values */
extern const size_t COMPUTE_NTESTS;
extern const tl_test OPS_TESTS[]; /* test_ops.c: accountants, health, OpenAPI, index */
extern const size_t OPS_NTESTS;
extern const tl_test ERROR_TESTS[]; /* test_errors.c: every error class */
extern const size_t ERROR_NTESTS;
extern const tl_test CONTRACT_TESTS[]; /* test_contract.c: every answer's shape */
extern const size_t CONTRACT_NTESTS;
extern const tl_test ACCOUNTANT_API_TESTS[]; /* test_accountants_api.c: rdp, pld, curves */
extern const size_t ACCOUNTANT_API_NTESTS;
extern const tl_test PNSGD_API_TESTS[]; /* test_pnsgd_api.c: projected noisy SGD */
extern const size_t PNSGD_API_NTESTS;
extern const tl_test MECH_API_TESTS[]; /* test_mech_api.c: dp_accounting's mechanism events */
extern const size_t MECH_API_NTESTS;
extern const tl_test RDPGAP_API_TESTS[]; /* test_rdpgap_api.c: issue 39, rdp coverage */
extern const size_t RDPGAP_API_NTESTS;
extern const tl_test PROACTIVE_API_TESTS[]; /* test_proactive_api.c: seed 002, SGLD */
extern const size_t PROACTIVE_API_NTESTS;
extern const tl_test SAMPLING_API_TESTS[]; /* test_sampling_api.c: fixed-size, truncated
                                              sampling, tree aggregation, relations */
extern const size_t SAMPLING_API_NTESTS;
extern const tl_test NUMBER_TESTS[]; /* test_numbers.c: shortest round-trip numbers */
extern const size_t NUMBER_NTESTS;
extern const tl_test JSONIN_TESTS[]; /* test_jsonin.c: the request reader against jansson */
extern const size_t JSONIN_NTESTS;
extern const tl_test LEDGER_API_TESTS[]; /* test_ledger_api.c: clients, rounds, summary */
extern const size_t LEDGER_API_NTESTS;

extern const tl_test HISTORY_API_TESTS[]; /* test_history_api.c: GET /v1/history, times */
extern const size_t HISTORY_API_NTESTS;

extern const tl_test WORKFLOW_TESTS[]; /* test_workflow.c: bulk registration, eligibility,
                                          honest status, two-phase rounds */
extern const size_t WORKFLOW_NTESTS;

/* test_ledger_api.c: one request with its headers. body (JSON) may be NULL; inm, when not
 * NULL, is sent as If-None-Match; h (may be NULL) receives the ETag and Idempotent-Replayed
 * headers. Thread-safe. */
typedef struct {
    char etag[64];    /* the ETag header, "" when absent */
    int replayed;     /* Idempotent-Replayed: true */
    int has_replayed; /* the header was present at all */
} hx;
int api_hreq(const char *method, const char *path, const char *body, const char *inm,
             api_reply *out, hx *h);
/* 1 if the string at path is want; else 0, saying what it is on stderr. */
int api_str_is(const json_t *root, const char *path, const char *want);
/* A malloc'ed printf (aborts when out of memory), and its va_list form. */
char *api_vfmt(const char *f, va_list ap);
char *api_fmt(const char *f, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

extern const tl_test HOSTILE_TESTS[]; /* test_hostile.c: 200+ malformed requests */
extern const size_t HOSTILE_NTESTS;
extern const tl_test EDGE_SHARED_TESTS[]; /* test_edge.c: framing, head size, Host */
extern const size_t EDGE_SHARED_NTESTS;
extern const tl_test EDGE_TESTS[]; /* test_edge.c: keys on every method, slowloris (own) */
extern const size_t EDGE_NTESTS;
extern const tl_test OVERLOAD_TESTS[]; /* test_overload.c: compute saturation (own daemons) */
extern const size_t OVERLOAD_NTESTS;
extern const tl_test AUTH_TESTS[]; /* test_auth.c: keys, scopes, rate limit, TLS (own daemons) */
extern const size_t AUTH_NTESTS;
extern const tl_test OWNER_TESTS[]; /* test_owner.c: reservations' owners, the cap (own daemon) */
extern const size_t OWNER_NTESTS;
extern const tl_test ADMIN_TESTS[]; /* test_admin.c: ledger urls shown without passwords */
extern const size_t ADMIN_NTESTS;
extern const tl_test LEDGER_OWN_TESTS[]; /* test_ledger_api.c: --no-pld-refine (own daemon) */
extern const size_t LEDGER_OWN_NTESTS;
extern const tl_test LEDGER_BOUNDS_TESTS[]; /* test_ledger_bounds.c: eligibility off the lock,
                                              deadline, cost cap, pages, answer memory (own) */
extern const size_t LEDGER_BOUNDS_NTESTS;
extern const tl_test VOCAB_API_TESTS[]; /* test_vocab_api.c: limits on events entering */
extern const size_t VOCAB_API_NTESTS;
extern const tl_test VOCAB_OWN_TESTS[]; /* test_vocab_api.c: named events' limits (own) */
extern const size_t VOCAB_OWN_NTESTS;
extern const tl_test OPERATOR_TESTS[]; /* test_operator.c: key/config files, SIGHUP reload, TLS
                                          policy and deadline, --healthcheck (own daemons) */
extern const size_t OPERATOR_NTESTS;

/* main.c: start another dpbudgetd (the harness's flags plus extra; env "NAME=VALUE" strings;
 * scheme "http" or "https"): 0 when listening, 1000 + its exit status when it exited first,
 * -1 on timeout. api_daemon_stop: SIGTERM, the wait status (-1: had to SIGKILL). */
int api_daemon_start(const char *const *extra, const char *const *env, const char *scheme);
int api_daemon_stop(void);
int api_daemon_pid(void); /* the running daemon's pid (for SIGHUP), -1 when none */
/* Wait up to timeout_s for the daemon to exit by itself (after a signal the test sent): its
 * wait status, or -1 (then it is killed). */
int api_daemon_wait(double timeout_s);
const char *api_daemon_log(void);
const char *daemon_binary(void);

#endif
