/*
 * admin.h - dpbudgetd's offline ledger commands (docs/OPERATIONS.md, "Running replicated"):
 *   dpbudgetd migrate --ledger-url URL        apply the PostgreSQL schema migrations, exit
 *   dpbudgetd copy-ledger --from A --to B     copy a ledger into an empty store (DIR or URL)
 *   dpbudgetd compare-ledgers A B             exit 0 same, 1 different (the first
 *                                             difference printed), 2 error
 * and the one rule for showing a ledger url: its password never appears (logs, --help,
 * errors).
 */
#ifndef HTTP_ADMIN_H
#define HTTP_ADMIN_H

#include <stddef.h>

/* 1 if arg names one of the commands above. */
int admin_is_command(const char *arg);

/* Run the command argv[0] (argv[1..argc-1] its arguments): the process's exit status. */
int admin_main(int argc, char **argv);

/* url with its password (user:PASSWORD@, a password= or sslpassword= parameter in any
 * spelling, key/value pairs) replaced by "***", into out (cap bytes, always NUL-terminated):
 * store_pg_redact (store.h). A plain path is copied. */
void admin_redact_url(const char *url, char *out, size_t cap);

/* Replace, in text (NUL-terminated, in place), every occurrence of url's password by "***"
 * (a message that echoes the url, or a part of it, shows no secret). */
void admin_scrub(char *text, const char *url);

#endif
