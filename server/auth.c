/* auth.c - API keys (see auth.h). */
#include "auth.h"

#include <ctype.h>
#include <stdint.h>
#include <strings.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

struct auth_key {
    unsigned char hash[32];
    int scopes;
    char name[64];
    pthread_mutex_t lock; /* the bucket */
    double tokens, last;
};

static int hexval(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static int parse_scopes(const char *s, int *out)
{
    *out = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "read") == 0)
            *out |= SCOPE_READ;
        else if (strcmp(tok, "charge") == 0)
            *out |= SCOPE_CHARGE | SCOPE_READ;
        else if (strcmp(tok, "admin") == 0)
            *out |= SCOPE_ADMIN | SCOPE_CHARGE | SCOPE_READ;
        else
            return -1;
    }
    return *out ? 0 : -1;
}

int auth_load(auth_table *t, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "cannot read the API key file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = NULL, *scopes = NULL, *name = NULL, *save = NULL;
        char *hashmark = strchr(line, '#');
        if (hashmark)
            *hashmark = '\0';
        hash = strtok_r(line, " \t\r\n", &save);
        if (hash == NULL)
            continue;
        scopes = strtok_r(NULL, " \t\r\n", &save);
        name = strtok_r(NULL, " \t\r\n", &save);
        auth_key k;
        memset(&k, 0, sizeof k);
        int ok = strlen(hash) == 64 && scopes && parse_scopes(scopes, &k.scopes) == 0;
        for (int i = 0; ok && i < 32; i++) {
            int hi = hexval(hash[2 * i]), lo = hexval(hash[2 * i + 1]);
            ok = hi >= 0 && lo >= 0;
            k.hash[i] = (unsigned char)(hi * 16 + lo);
        }
        if (!ok) {
            snprintf(err, errlen,
                     "%s line %d: expected '<64 hex digits of sha256(token)> "
                     "<read|charge|admin,...> [name]'",
                     path, lineno);
            rc = -1;
            break;
        }
        snprintf(k.name, sizeof k.name, "%s", name ? name : "key");
        auth_key *nk = realloc(t->keys, (t->n + 1) * sizeof *nk);
        if (nk == NULL) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        t->keys = nk;
        t->keys[t->n] = k;
        pthread_mutex_init(&t->keys[t->n].lock, NULL);
        t->keys[t->n].tokens = -1.0; /* full on first use */
        t->n++;
    }
    fclose(f);
    if (rc == 0 && t->n == 0) {
        snprintf(err, errlen, "the API key file %s holds no key", path);
        rc = -1;
    }
    return rc;
}

void auth_free(auth_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        pthread_mutex_destroy(&t->keys[i].lock);
    free(t->keys);
    t->keys = NULL;
    t->n = 0;
}

const auth_key *auth_find(const auth_table *t, const char *authorization)
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
    unsigned char h[32];
    sha256(tok, n, h);
    const auth_key *found = NULL;
    for (size_t i = 0; i < t->n; i++) {
        unsigned char diff = 0;
        for (int j = 0; j < 32; j++)
            diff |= (unsigned char)(h[j] ^ t->keys[i].hash[j]);
        /* no early exit: every key is compared */
        uintptr_t m = (uintptr_t)0 - (uintptr_t)(diff == 0);
        found = (const auth_key *)(((uintptr_t)found & ~m) | ((uintptr_t)&t->keys[i] & m));
    }
    return found;
}

int auth_allows(const auth_key *k, int scope)
{
    return scope == SCOPE_NONE || (k != NULL && (k->scopes & scope) != 0);
}

const char *auth_name(const auth_key *k)
{
    return k ? k->name : "";
}

int auth_take(const auth_table *t, const auth_key *k, double now, double *retry_after)
{
    if (t->rate <= 0.0 || k == NULL)
        return 1;
    auth_key *m = (auth_key *)k;
    pthread_mutex_lock(&m->lock);
    if (m->tokens < 0.0) {
        m->tokens = t->burst;
        m->last = now;
    }
    m->tokens += (now - m->last) * t->rate;
    if (m->tokens > t->burst)
        m->tokens = t->burst;
    m->last = now;
    int ok = m->tokens >= 1.0;
    if (ok)
        m->tokens -= 1.0;
    else
        *retry_after = (1.0 - m->tokens) / t->rate;
    pthread_mutex_unlock(&m->lock);
    return ok;
}
