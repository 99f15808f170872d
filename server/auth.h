/*
 * auth.h - API keys: bearer tokens with scopes, stored as SHA-256 hashes, compared in
 * constant time; a per-key token-bucket rate limit.
 *
 * Key file: one key per line, "<sha256 hex of the token> <scopes> [name]", scopes a comma
 * list of read, charge, admin ("admin" implies the others, "charge" implies "read"); '#'
 * starts a comment. Generate a hash with: printf %s "$TOKEN" | sha256sum
 */
#ifndef HTTP_AUTH_H
#define HTTP_AUTH_H

#include <stddef.h>

enum { SCOPE_NONE = 0, SCOPE_READ = 1, SCOPE_CHARGE = 2, SCOPE_ADMIN = 4 };

typedef struct auth_key auth_key;

typedef struct auth_table_s {
    auth_key *keys;
    size_t n;
    double rate;  /* requests per second per key; 0 = unlimited */
    double burst; /* bucket size */
} auth_table;

/* Load a key file; 0 on success, -1 with a message in err. An empty file is an error. */
int auth_load(auth_table *t, const char *path, char *err, size_t errlen);
void auth_free(auth_table *t);

/* The key presented in an Authorization header ("Bearer <token>"), or NULL. Every stored
 * key is compared (constant time in the token and in which key matches). */
const auth_key *auth_find(const auth_table *t, const char *authorization);

/* 1 if the key carries the scope. */
int auth_allows(const auth_key *k, int scope);

/* The key's name (for logs). */
const char *auth_name(const auth_key *k);

/* Take one request from the key's bucket: 1 if allowed, else 0 with the seconds until the
 * next token in *retry_after. */
int auth_take(const auth_table *t, const auth_key *k, double now, double *retry_after);

#endif
