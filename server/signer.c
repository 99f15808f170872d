/*
 * signer.c - the log's Ed25519 keys: the key file, `dpbudgetd keygen`, and signing JSON
 * objects over their RFC 8785 bytes (signer.h).
 *
 * May call: jcs.h, textfile.h, nettle (eddsa, sha2, base64).
 */
#include "signer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <nettle/base64.h>
#include <nettle/eddsa.h>
#include <nettle/sha2.h>

#include "jcs.h"
#include "textfile.h"

typedef struct {
    uint8_t pub[ED25519_KEY_SIZE];
    char id[SIGNER_KEY_ID_LEN + 1];
} signer_key;

struct signer {
    uint8_t secret[ED25519_KEY_SIZE]; /* keys[0]'s private key */
    signer_key keys[SIGNER_KEYS_MAX];
    size_t n;
};

#define KEYFILE_CAP ((size_t)1 << 16)

void signer_sha256(const void *in, size_t n, uint8_t out[32])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, n, in);
    sha256_digest(&c, SHA256_DIGEST_SIZE, out);
}

void signer_base64(const uint8_t *in, size_t n, char *out)
{
    base64_encode_raw(out, n, in);
    out[BASE64_ENCODE_RAW_LENGTH(n)] = '\0';
}

/* Exactly 32 bytes from base64 text s: 0, or -1. */
static int decode_key(const char *s, uint8_t out[ED25519_KEY_SIZE])
{
    struct base64_decode_ctx d;
    uint8_t buf[BASE64_DECODE_LENGTH(64)];
    size_t len = strlen(s), got = sizeof buf;
    if (len != 44)
        return -1;
    base64_decode_init(&d);
    if (!base64_decode_update(&d, &got, buf, len, s) || !base64_decode_final(&d) ||
        got != ED25519_KEY_SIZE)
        return -1;
    memcpy(out, buf, ED25519_KEY_SIZE);
    memset(buf, 0, sizeof buf);
    return 0;
}

static void key_id_of(const uint8_t pub[ED25519_KEY_SIZE], char id[SIGNER_KEY_ID_LEN + 1])
{
    uint8_t h[32];
    signer_sha256(pub, ED25519_KEY_SIZE, h);
    for (int i = 0; i < 32; i++)
        snprintf(id + 2 * i, 3, "%02x", h[i]);
}

/* One key line ("ed25519-secret B64" / "ed25519-public B64") added to s. 0, or -1 with
 * the reason in why. */
static int add_line(signer *s, char *line, const char **why)
{
    char *sp = strpbrk(line, " \t");
    if (sp == NULL) {
        *why = "a key line is 'ed25519-secret BASE64' or 'ed25519-public BASE64'";
        return -1;
    }
    *sp++ = '\0';
    sp += strspn(sp, " \t");
    char *end = sp + strcspn(sp, " \t");
    if (*(end + strspn(end, " \t")) != '\0') {
        *why = "one key per line: text after the key";
        return -1;
    }
    *end = '\0';
    int secret = strcmp(line, "ed25519-secret") == 0;
    if (!secret && strcmp(line, "ed25519-public") != 0) {
        *why = "unknown key kind: a key line starts with ed25519-secret or ed25519-public";
        return -1;
    }
    if (s->n == 0 && !secret) {
        *why = "the first key must be an ed25519-secret line: it signs (public lines list "
               "retired keys after it)";
        return -1;
    }
    if (s->n == SIGNER_KEYS_MAX) {
        *why = "more than 64 keys";
        return -1;
    }
    uint8_t raw[ED25519_KEY_SIZE];
    if (decode_key(sp, raw) != 0) {
        *why = "the key is not 32 bytes in base64 (44 characters)";
        return -1;
    }
    signer_key *k = &s->keys[s->n];
    if (secret) {
        ed25519_sha512_public_key(k->pub, raw);
        if (s->n == 0)
            memcpy(s->secret, raw, sizeof raw);
        memset(raw, 0, sizeof raw);
    } else {
        memcpy(k->pub, raw, sizeof raw);
    }
    key_id_of(k->pub, k->id);
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i].id, k->id) == 0) {
            *why = "the same key twice";
            return -1;
        }
    s->n++;
    return 0;
}

int signer_load(const char *path, signer **out, char *err, size_t errlen)
{
    *out = NULL;
    textfile f = {0};
    if (textfile_read(&f, path, KEYFILE_CAP, err, errlen) != 0 ||
        textfile_lines(&f, path, err, errlen) != 0) {
        textfile_release(&f);
        return -1;
    }
    signer *s = calloc(1, sizeof *s);
    int rc = 0;
    if (s == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < f.n; i++) {
        char *line = f.line[i];
        line += strspn(line, " \t");
        if (*line == '\0' || *line == '#')
            continue;
        const char *why = NULL;
        if (add_line(s, line, &why) != 0) {
            snprintf(err, errlen, "%s line %zu: %s", path, i + 1, why);
            rc = -1;
        }
    }
    if (rc == 0 && s->n == 0) {
        snprintf(err, errlen,
                 "%s holds no key: make one with 'dpbudgetd keygen FILE' (a line "
                 "'ed25519-secret BASE64')",
                 path);
        rc = -1;
    }
    explicit_bzero(f.buf, f.len); /* the secret's text */
    textfile_release(&f);
    if (rc != 0) {
        signer_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void signer_free(signer *s)
{
    if (s == NULL)
        return;
    explicit_bzero(s->secret, sizeof s->secret);
    free(s);
}

const char *signer_key_id(const signer *s)
{
    return s->keys[0].id;
}

json_t *signer_keys_json(const signer *s)
{
    json_t *a = json_array();
    for (size_t i = 0; a && s && i < s->n; i++) {
        char b64[64];
        signer_base64(s->keys[i].pub, ED25519_KEY_SIZE, b64);
        if (json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:b}", "key_id", s->keys[i].id,
                                               "public_key", b64, "algorithm", "ed25519", "signing",
                                               i == 0)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a ? json_pack("{s:o}", "keys", a) : NULL;
}

/* The RFC 8785 bytes of o without its "signature" member (malloc'ed), or NULL. */
static char *signed_bytes(const json_t *o, size_t *len)
{
    json_t *c = json_copy((json_t *)o);
    if (c == NULL)
        return NULL;
    json_object_del(c, "signature");
    char *b = jcs_dumps(c, len);
    json_decref(c);
    return b;
}

int signer_sign(const signer *s, json_t *o)
{
    json_object_del(o, "signature");
    if (json_object_set_new(o, "key_id", json_string(s->keys[0].id)) != 0)
        return -1;
    size_t len;
    char *b = jcs_dumps(o, &len);
    if (b == NULL)
        return -1;
    char b64[SIGNER_SIG_B64];
    signer_signature(s, b, len, b64);
    free(b);
    return json_object_set_new(o, "signature", json_string(b64)) == 0 ? 0 : -1;
}

void signer_signature(const signer *s, const void *msg, size_t n, char b64[SIGNER_SIG_B64])
{
    uint8_t sig[ED25519_SIGNATURE_SIZE];
    ed25519_sha512_sign(s->keys[0].pub, s->secret, n, msg, sig);
    signer_base64(sig, sizeof sig, b64);
}

int signer_verify(const signer *s, const json_t *o)
{
    const char *id = json_string_value(json_object_get(o, "key_id"));
    const char *sig64 = json_string_value(json_object_get(o, "signature"));
    if (id == NULL || sig64 == NULL || strlen(sig64) != 88)
        return 0;
    const signer_key *k = NULL;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i].id, id) == 0)
            k = &s->keys[i];
    uint8_t sig[BASE64_DECODE_LENGTH(88)];
    size_t got = sizeof sig;
    struct base64_decode_ctx d;
    base64_decode_init(&d);
    if (k == NULL || !base64_decode_update(&d, &got, sig, 88, sig64) || !base64_decode_final(&d) ||
        got != ED25519_SIGNATURE_SIZE)
        return 0;
    size_t len;
    char *b = signed_bytes(o, &len);
    int ok = b && ed25519_sha512_verify(k->pub, len, (const uint8_t *)b, sig);
    free(b);
    return ok;
}

/* Writes all n bytes of b to fd: 0, or -1 (errno). */
static int write_all(int fd, const char *b, size_t n)
{
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int signer_keygen_main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: dpbudgetd keygen FILE\n"
                        "  make an Ed25519 signing key for --signing-key in FILE (created with "
                        "mode 0600;\n  an existing FILE is never overwritten); prints its "
                        "key_id\n");
        return 2;
    }
    const char *path = argv[1];
    uint8_t secret[ED25519_KEY_SIZE], pub[ED25519_KEY_SIZE];
    if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret) {
        fprintf(stderr, "dpbudgetd keygen: no randomness from the kernel: %s\n", strerror(errno));
        return 1;
    }
    ed25519_sha512_public_key(pub, secret);
    char id[SIGNER_KEY_ID_LEN + 1], b64[64], text[256];
    key_id_of(pub, id);
    signer_base64(secret, sizeof secret, b64);
    explicit_bzero(secret, sizeof secret);
    int n = snprintf(text, sizeof text,
                     "# dpbudget log signing key (Ed25519, RFC 8032): keep it secret\n"
                     "# key_id %s\n"
                     "ed25519-secret %s\n",
                     id, b64);
    explicit_bzero(b64, sizeof b64);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = 0;
    if (fd < 0) {
        fprintf(stderr, "dpbudgetd keygen: cannot create %s: %s%s\n", path, strerror(errno),
                errno == EEXIST ? " (an existing key file is never overwritten)" : "");
        rc = 1;
    } else if (write_all(fd, text, (size_t)n) != 0 || fsync(fd) != 0) {
        fprintf(stderr, "dpbudgetd keygen: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    if (fd >= 0 && close(fd) != 0 && rc == 0) {
        fprintf(stderr, "dpbudgetd keygen: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    }
    if (rc != 0 && fd >= 0)
        unlink(path);
    explicit_bzero(text, sizeof text);
    if (rc == 0)
        printf("%s\n", id);
    return rc;
}
