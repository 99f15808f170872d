/* auth.c - API keys (see auth.h). */
#include "auth.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nettle/memops.h>
#include <nettle/sha2.h>

#include "textfile.h"

/* The largest key file read: far above any real one (about 100 bytes a key). */
#define KEYFILE_CAP ((size_t)4 << 20)

struct auth_key {
    unsigned char hash[SHA256_DIGEST_SIZE];
    int scopes;
    char name[64];
    char owner[64]; /* auth_owner */
    auth_keyset *set;
    /* the token bucket, lock-free: the time at which it will be full again (atomic; GCRA,
     * an equivalent form of the bucket: tokens = burst - (full_at - now) * rate, capped at
     * burst when full_at <= now; taking one token moves full_at on by 1/rate) */
    double full_at;
};

struct auth_keyset {
    unsigned long refs; /* atomic: the table's reference and every request's */
    size_t n;
    auth_key *keys;    /* freed when refs reaches 0 (the set itself stays: auth_find) */
    auth_keyset *next; /* the table's list of every set it has published */
};

static int hexval(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* A comma list of scopes, each known and none empty; NULL, or what is wrong. */
static const char *parse_scopes(const char *s, int *out)
{
    *out = 0;
    for (const char *p = s;;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == 4 && strncmp(p, "read", 4) == 0)
            *out |= SCOPE_READ;
        else if (n == 6 && strncmp(p, "charge", 6) == 0)
            *out |= SCOPE_CHARGE | SCOPE_READ;
        else if (n == 5 && strncmp(p, "admin", 5) == 0)
            *out |= SCOPE_ADMIN | SCOPE_CHARGE | SCOPE_READ;
        else
            return n == 0 ? "an empty scope in the list" : "an unknown scope";
        if (c == NULL)
            return NULL;
        p = c + 1;
    }
}

static int name_char(int c)
{
    return isalnum(c) || c == '.' || c == '_' || c == '-' || c == '@' || c == ':' || c == '+';
}

/* Parse one line (comment already cut) into k; NULL when blank (*blank = 1) or parsed, else
 * what is wrong. */
static const char *parse_line(char *line, auth_key *k, int *blank)
{
    char *save = NULL;
    char *hash = strtok_r(line, " \t", &save);
    *blank = hash == NULL;
    if (hash == NULL)
        return NULL;
    char *scopes = strtok_r(NULL, " \t", &save);
    char *name = strtok_r(NULL, " \t", &save);
    char *more = strtok_r(NULL, " \t", &save);
    if (strlen(hash) != 2 * SHA256_DIGEST_SIZE)
        return "the hash is not 64 hex digits (sha256 of the token)";
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        int hi = hexval(hash[2 * i]), lo = hexval(hash[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return "the hash is not 64 hex digits (sha256 of the token)";
        k->hash[i] = (unsigned char)(hi * 16 + lo);
    }
    if (scopes == NULL)
        return "no scopes after the hash (read, charge or admin)";
    const char *why = parse_scopes(scopes, &k->scopes);
    if (why)
        return why;
    if (name) {
        size_t n = strlen(name);
        if (n >= sizeof k->name)
            return "the name is longer than 63 characters";
        for (size_t i = 0; i < n; i++)
            if (!name_char((unsigned char)name[i]))
                return "the name may hold only letters, digits and . _ - @ : +";
    }
    if (more)
        return "more than three fields (a '#' starts a comment)";
    snprintf(k->name, sizeof k->name, "%s", name ? name : "key");
    if (name) {
        snprintf(k->owner, sizeof k->owner, "%s", name);
    } else { /* a fingerprint: 64 bits of the SHA-256 of the stored hash, never the token */
        struct sha256_ctx c;
        unsigned char fp[SHA256_DIGEST_SIZE];
        sha256_init(&c);
        sha256_update(&c, sizeof k->hash, k->hash);
        sha256_digest(&c, sizeof fp, fp);
        k->owner[0] = '#';
        for (int i = 0; i < 8; i++)
            snprintf(k->owner + 1 + 2 * i, 3, "%02x", fp[i]);
    }
    return NULL;
}

/* Drops a reference; the last one frees the keys. The set's own few bytes stay, on the
 * table's list until auth_free: auth_find may still read the count of a set it loaded just
 * as a reload retired it, and sees 0 there instead of freed memory. */
static void set_unref(auth_keyset *s)
{
    if (s == NULL || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    free(s->keys);
    s->keys = NULL;
}

/* Parse a whole key file into a new set (refs 1), or NULL with a message. */
static auth_keyset *load_set(const char *path, char *err, size_t errlen)
{
    textfile f;
    if (textfile_read(&f, path, KEYFILE_CAP, err, errlen) != 0)
        return NULL;
    auth_keyset *s = NULL;
    if (textfile_lines(&f, path, err, errlen) != 0)
        goto fail;
    s = calloc(1, sizeof *s);
    if (s == NULL || (s->keys = calloc(f.n ? f.n : 1, sizeof *s->keys)) == NULL) {
        snprintf(err, errlen, "cannot read %s: out of memory", path);
        goto fail;
    }
    const char *why = NULL;
    size_t lineno = 0;
    for (size_t i = 0; i < f.n && why == NULL; i++) {
        lineno = i + 1;
        char *hashmark = strchr(f.line[i], '#');
        if (hashmark)
            *hashmark = '\0';
        auth_key *k = &s->keys[s->n];
        int blank = 0;
        why = parse_line(f.line[i], k, &blank);
        if (why || blank)
            continue;
        for (size_t j = 0; j < s->n && why == NULL; j++)
            if (memcmp(s->keys[j].hash, k->hash, sizeof k->hash) == 0)
                why = "this hash is already on an earlier line (one line per key)";
        if (why == NULL)
            s->n++;
    }
    if (why)
        snprintf(err, errlen,
                 "%s line %zu: %s; expected '<64 hex digits of sha256(token)> "
                 "<read|charge|admin,...> [name]'",
                 path, lineno, why);
    else if (s->n == 0)
        snprintf(err, errlen, "the API key file %s holds no key", path);
    if (why || s->n == 0)
        goto fail;
    textfile_release(&f);
    s->refs = 1;
    for (size_t i = 0; i < s->n; i++) {
        s->keys[i].set = s;
        s->keys[i].full_at = 0.0; /* full on first use */
    }
    return s;
fail:
    if (s)
        free(s->keys);
    free(s);
    textfile_release(&f);
    return NULL;
}

void auth_init(auth_table *t, double rate, double burst)
{
    memset(t, 0, sizeof *t);
    t->rate = rate;
    t->burst = burst;
    pthread_mutex_init(&t->lock, NULL);
}

int auth_reload(auth_table *t, const char *path, size_t *nkeys, char *err, size_t errlen)
{
    auth_keyset *s = load_set(path, err, errlen);
    if (s == NULL)
        return -1;
    pthread_mutex_lock(&t->lock);
    auth_keyset *old = t->set;
    /* a key kept across the reload keeps its bucket (a reload is no way around the limit) */
    for (size_t i = 0; old && i < s->n; i++)
        for (size_t j = 0; j < old->n; j++)
            if (memcmp(s->keys[i].hash, old->keys[j].hash, sizeof s->keys[i].hash) == 0) {
                double f;
                __atomic_load(&old->keys[j].full_at, &f, __ATOMIC_ACQUIRE);
                __atomic_store(&s->keys[i].full_at, &f, __ATOMIC_RELEASE);
            }
    s->next = t->published;
    t->published = s;
    __atomic_store_n(&t->set, s, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&t->lock);
    set_unref(old);
    if (nkeys)
        *nkeys = s->n;
    return 0;
}

void auth_free(auth_table *t)
{
    set_unref(t->set);
    t->set = NULL;
    while (t->published) {
        auth_keyset *s = t->published;
        t->published = s->next;
        free(s->keys); /* NULL unless a request still held it: none may at this point */
        free(s);
    }
    pthread_mutex_destroy(&t->lock);
}

int auth_enabled(const auth_table *t)
{
    return t != NULL && __atomic_load_n(&t->set, __ATOMIC_ACQUIRE) != NULL;
}

const auth_key *auth_find(auth_table *t, const char *authorization)
{
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *tok = authorization + 7;
    while (*tok == ' ')
        tok++;
    size_t n = strlen(tok);
    while (n > 0 && isspace((unsigned char)tok[n - 1]))
        n--;
    if (n == 0 || n > 4096)
        return NULL;
    unsigned char h[SHA256_DIGEST_SIZE];
    struct sha256_ctx sc;
    sha256_init(&sc);
    sha256_update(&sc, n, (const uint8_t *)tok);
    sha256_digest(&sc, sizeof h, h);
    /* a reference on the current set, without a lock: one only while the count is not 0.
     * A set is current while the table holds its reference, so the count is 0 only once
     * a reload has retired the set and its last request has ended; then t->set has moved
     * on, and it is read again. A set's count stays readable after that (set_unref). */
    auth_keyset *s;
    for (;;) {
        s = __atomic_load_n(&t->set, __ATOMIC_ACQUIRE);
        if (s == NULL)
            return NULL;
        unsigned long r = __atomic_load_n(&s->refs, __ATOMIC_RELAXED);
        while (r != 0 && !__atomic_compare_exchange_n(&s->refs, &r, r + 1, 1, __ATOMIC_ACQ_REL,
                                                      __ATOMIC_RELAXED))
            ;
        if (r != 0)
            break;
    }
    const auth_key *found = NULL;
    for (size_t i = 0; i < s->n; i++) {
        /* no early exit: every key is compared, and the match selected without a branch */
        uintptr_t m = (uintptr_t)0 - (uintptr_t)(memeql_sec(h, s->keys[i].hash, sizeof h) != 0);
        found = (const auth_key *)(((uintptr_t)found & ~m) | ((uintptr_t)&s->keys[i] & m));
    }
    if (found == NULL)
        set_unref(s);
    return found;
}

void auth_key_release(const auth_key *k)
{
    if (k)
        set_unref(k->set);
}

int auth_allows(const auth_key *k, int scope)
{
    return scope == SCOPE_NONE || (k != NULL && (k->scopes & scope) != 0);
}

const char *auth_name(const auth_key *k)
{
    return k ? k->name : "";
}

const char *auth_owner(const auth_key *k)
{
    return k ? k->owner : "";
}

int auth_take(const auth_table *t, const auth_key *k, double now, double *retry_after)
{
    if (t->rate <= 0.0 || k == NULL)
        return 1;
    auth_key *m = (auth_key *)k;
    double period = 1.0 / t->rate, slack = (t->burst - 1.0) * period;
    double full_at, next;
    __atomic_load(&m->full_at, &full_at, __ATOMIC_ACQUIRE);
    for (;;) {
        double from = full_at > now ? full_at : now; /* a full bucket holds burst tokens */
        if (from - now > slack) {                    /* fewer than one token left */
            *retry_after = from - now - slack;
            return 0;
        }
        next = from + period;
        if (__atomic_compare_exchange(&m->full_at, &full_at, &next, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE))
            return 1;
    }
}
