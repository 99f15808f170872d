/*
 * signer.h - the log's signing keys (--signing-key FILE): Ed25519 (RFC 8032) from nettle,
 * signing JSON objects over their RFC 8785 canonical bytes (jcs.h): signed tree heads and
 * receipts (res_sth.c).
 *
 * Key file (docs/TRANSPARENCY.md, "Signing keys"): text lines, '#' comments and blank lines
 * ignored, one key per line:
 *   ed25519-secret BASE64   the 32-byte private key (RFC 8032 5.1.5's seed), base64
 *   ed25519-public BASE64   a 32-byte public key, base64: a retired key, listed only
 * The first key line must be a secret one: it signs. Every other key (a secret one's public
 * half, or a public line) is listed by GET /v1/log/keys so that signatures made before a
 * rotation still verify. At most SIGNER_KEYS_MAX keys, no key twice.
 * key_id = lowercase hex SHA-256 of the raw 32-byte public key. The private key is never
 * printed, logged or answered; it is wiped when the signer is freed.
 *
 * May call: jcs.h, textfile.h, nettle.
 */
#ifndef HTTP_SIGNER_H
#define HTTP_SIGNER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SIGNER_KEYS_MAX 64
#define SIGNER_KEY_ID_LEN 64 /* hex characters */

typedef struct signer signer;

/* Reads the key file at path into *out (owned; signer_free). 0, or -1 with a message naming
 * the file and line in err (never a key's bytes). */
int signer_load(const char *path, signer **out, char *err, size_t errlen);

void signer_free(signer *s);

/* `dpbudgetd keygen FILE`: a new key (getrandom) written to FILE, created with mode 0600 and
 * never over an existing file; prints the key_id (not the key). Exit status: 0, 1 (cannot
 * create or write FILE), 2 (usage). argv[0] is "keygen". */
int signer_keygen_main(int argc, char **argv);

/* The signing key's key_id (NUL-terminated, borrowed). */
const char *signer_key_id(const signer *s);

/* {"keys": [{"key_id", "public_key" (base64), "algorithm": "ed25519", "signing": bool}]}: a
 * new reference, NULL when out of memory. s NULL: no keys. */
json_t *signer_keys_json(const signer *s);

/* Signs o in place: sets o's "key_id" to the signing key's, then "signature" to the base64
 * Ed25519 signature of the RFC 8785 canonical JSON of o without its "signature" member. 0, or
 * -1 (o holds a number RFC 8785 cannot write, or out of memory; o then has no signature). */
int signer_sign(const signer *s, json_t *o);

/* The base64 Ed25519 signature by the signing key of msg[0..n) into b64 (89 bytes): for
 * a caller that wrote the canonical bytes itself. */
#define SIGNER_SIG_B64 89
void signer_signature(const signer *s, const void *msg, size_t n, char b64[SIGNER_SIG_B64]);

/* Verifies o's "signature" against the listed key named by its "key_id" (what a client
 * does; for the tests and the daemon's own checks): 1 good, 0 not. */
int signer_verify(const signer *s, const json_t *o);

/* base64 (RFC 4648, padded) of n bytes into out (at least 4 * ((n + 2) / 3) + 1 bytes). */
void signer_base64(const uint8_t *in, size_t n, char *out);

/* SHA-256 of n bytes. */
void signer_sha256(const void *in, size_t n, uint8_t out[32]);

#endif
