/*
 * auth.h - API keys: bearer tokens with scopes, stored as SHA-256 hashes (nettle), compared
 * in constant time; a per-key token-bucket rate limit; the key set reloaded atomically.
 *
 * Key file: one key per line, "<sha256 hex of the token> <scopes> [name]", scopes a comma
 * list of read, charge, admin ("admin" implies the others, "charge" implies "read"); '#'
 * starts a comment (to the end of the line). Generate a hash with:
 *   printf %s "$TOKEN" | sha256sum
 * The file is read whole (textfile.h: no line length limit, CRLF accepted) and accepted
 * only if every line parses: 64 hex digits, known scopes, a name of 1-63 characters of
 * [A-Za-z0-9._@:+-] (it goes into the logs), nothing after the name, no hash twice, and at
 * least one key. Otherwise the whole file is refused with "PATH line N: reason".
 *
 * Reload: auth_reload parses the file into a new set and swaps it in (reloads take a lock;
 * requests do not); requests hold a reference (auth_find takes one without a lock,
 * auth_key_release drops it) so a request never sees a half set nor a freed one, and a
 * request that starts after auth_reload returned sees the new set; a failed reload leaves
 * the previous set in place. A key whose hash is in both sets keeps its rate-limit bucket.
 * A replaced set's keys are freed with its last request; its header (about 32 bytes) is
 * kept until auth_free.
 */
#ifndef HTTP_AUTH_H
#define HTTP_AUTH_H

#include <pthread.h>
#include <stddef.h>

enum { SCOPE_NONE = 0, SCOPE_READ = 1, SCOPE_CHARGE = 2, SCOPE_ADMIN = 4 };

typedef struct auth_key auth_key;
typedef struct auth_keyset auth_keyset;

typedef struct auth_table_s {
    double rate;  /* requests per second per key; 0 = unlimited */
    double burst; /* bucket size */
    /* private: the current set (refcounted; swapped under the lock, which only reloads
     * take) and every set ever published (their few bytes are kept until auth_free) */
    pthread_mutex_t lock;
    auth_keyset *set;
    auth_keyset *published;
} auth_table;

/* Initialise an empty table (no keys: auth_enabled is 0). */
void auth_init(auth_table *t, double rate, double burst);

/* Load the key file into the table, replacing the current set only when the whole file
 * parses: 0, or -1 with "PATH line N: reason" in err and the previous set untouched.
 * *nkeys (may be NULL) receives the new set's size. */
int auth_reload(auth_table *t, const char *path, size_t *nkeys, char *err, size_t errlen);

/* Release the table (no request may still hold a key). */
void auth_free(auth_table *t);

/* 1 when a key set is loaded. */
int auth_enabled(const auth_table *t);

/* The key presented in an Authorization header ("Bearer <token>"), or NULL. Every stored
 * key is compared (constant time in the token and in which key matches). A key returned
 * holds a reference to its set: give it back with auth_key_release. */
const auth_key *auth_find(auth_table *t, const char *authorization);
void auth_key_release(const auth_key *k);

/* 1 if the key carries the scope. */
int auth_allows(const auth_key *k, int scope);

/* The key's name (for logs: [A-Za-z0-9._@:+-] only). */
const char *auth_name(const auth_key *k);

/* The key's identity for what it owns (a two-phase round's reservation): its name when the
 * key file gives one (keys that share a name share what they own, as a rotated key keeps
 * its predecessor's), else '#' and 16 hex digits of the SHA-256 of its stored hash (never
 * the token; no name holds '#'). "" for NULL. */
const char *auth_owner(const auth_key *k);

/* Take one request from the key's bucket: 1 if allowed, else 0 with the seconds until the
 * next token in *retry_after. */
int auth_take(const auth_table *t, const auth_key *k, double now, double *retry_after);

#endif
