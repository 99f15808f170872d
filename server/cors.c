/*
 * cors.c - the origins --cors-origin allows (cors.h): their syntax and the exact match of a
 * request's Origin header.
 *
 * May call: nothing but the C library.
 */
#include "cors.h"

#include <stdio.h>
#include <string.h>

/* The host part h (n bytes) of an origin: a name of [a-z0-9.-] (no empty label at either
 * end), or an IPv6 literal in brackets of [0-9a-f:.]. */
static int host_ok(const char *h, size_t n)
{
    if (n == 0 || n > 253 + 2)
        return 0;
    if (h[0] == '[') {
        if (n < 4 || h[n - 1] != ']')
            return 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (!strchr("0123456789abcdef:.", h[i]) || h[i] == '\0')
                return 0;
        return 1;
    }
    if (n > 253 || h[0] == '.' || h[0] == '-' || h[n - 1] == '.' || h[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return 0;
        if (c == '.' && h[i + 1] == '.')
            return 0;
    }
    return 1;
}

int cors_origin_check(const char *s, size_t n, char *err, size_t errlen)
{
    const char *why = NULL;
    size_t skip = n >= 7 && memcmp(s, "http://", 7) == 0    ? 7
                  : n >= 8 && memcmp(s, "https://", 8) == 0 ? 8
                                                            : 0;
    if (skip == 0) {
        why = "must start with http:// or https:// (lowercase)";
    } else {
        const char *h = s + skip, *end = s + n;
        /* the port's colon: after the brackets of an IPv6 literal */
        const char *scan = h < end && *h == '[' ? memchr(h, ']', (size_t)(end - h)) : h;
        const char *colon = scan ? memchr(scan, ':', (size_t)(end - scan)) : NULL;
        const char *hend = colon ? colon : end;
        if (memchr(h, '/', (size_t)(end - h)) || memchr(h, '@', (size_t)(end - h)))
            why = "is scheme://host[:port] only: no path, no trailing '/', no user";
        else if (!host_ok(h, (size_t)(hend - h)))
            why = "needs a host of lowercase letters, digits, '-' and '.' (or [IPv6])";
        else if (colon) {
            size_t d = (size_t)(end - colon - 1);
            unsigned long port = 0;
            int ok = d >= 1 && d <= 5 && colon[1] != '0';
            for (size_t i = 0; ok && i < d; i++) {
                ok = colon[1 + i] >= '0' && colon[1 + i] <= '9';
                port = port * 10 + (unsigned long)(colon[1 + i] - '0');
            }
            if (!ok || port > 65535)
                why = "has a port that is not a number from 1 to 65535";
        }
    }
    if (why == NULL && n >= CORS_ORIGIN_MAX)
        why = "is too long";
    if (why == NULL)
        return 0;
    snprintf(err, errlen,
             "'%.*s' is not an origin as browsers send it: it %s (e.g. https://dash.example.org "
             "or http://127.0.0.1:3000)",
             (int)(n > 300 ? 300 : n), s, why);
    return -1;
}

int cors_add(cors_list *l, const char *value, char *err, size_t errlen)
{
    const char *p = value;
    int any = 0;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        size_t n = strcspn(p, " ,\t");
        if (cors_origin_check(p, n, err, errlen) != 0)
            return -1;
        char one[CORS_ORIGIN_MAX];
        memcpy(one, p, n); /* n < CORS_ORIGIN_MAX: cors_origin_check */
        one[n] = '\0';
        any = 1;
        if (!cors_allows(l, one)) { /* a repeated origin takes no second place */
            if (l->n >= CORS_MAX_ORIGINS) {
                snprintf(err, errlen, "at most %d origins are allowed", CORS_MAX_ORIGINS);
                return -1;
            }
            memcpy(l->origin[l->n++], one, n + 1);
        }
        p += n;
    }
    if (!any) {
        snprintf(err, errlen, "needs an origin such as https://dash.example.org");
        return -1;
    }
    return 0;
}

int cors_allows(const cors_list *l, const char *origin)
{
    if (l == NULL || origin == NULL)
        return 0;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->origin[i], origin) == 0)
            return 1;
    return 0;
}
