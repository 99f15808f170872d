/*
 * jcs.c - RFC 8785 canonical JSON of a jansson value (jcs.h). The text goes to an
 * open_memstream buffer; numbers are ECMAScript's Number.prototype.toString.
 *
 * May call: jansson only.
 */
#include "jcs.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t jcs_number(double x, char *out)
{
    out[0] = '\0';
    if (!isfinite(x))
        return 0;
    if (x == 0.0) { /* -0 too (ECMA-262 7.1.12.1 step 2) */
        memcpy(out, "0", 2);
        return 1;
    }
    /* the shortest digits s (k of them) that read back to x: %.{k-1}e is the correctly
     * rounded k-digit decimal, the closest one of that length, as the standard asks */
    char e[40];
    int k;
    for (k = 1; k <= 17; k++) {
        snprintf(e, sizeof e, "%.*e", k - 1, x);
        if (strtod(e, NULL) == x)
            break;
    }
    /* e: [-]d[.ddd]e(+|-)XX: the digits and n, the decimal exponent of the point */
    const char *p = e;
    int neg = *p == '-';
    if (neg)
        p++;
    char dig[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            dig[nd++] = *p;
    while (nd > 1 && dig[nd - 1] == '0') /* %.*e may pad with zeros when k is 17 */
        nd--;
    int n = atoi(p + 1) + 1;
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (nd <= n && n <= 21) { /* digits then n-k zeros */
        memcpy(out + o, dig, (size_t)nd);
        o += (size_t)nd;
        for (int z = nd; z < n; z++)
            out[o++] = '0';
    } else if (0 < n && n <= 21) { /* a point after n digits */
        memcpy(out + o, dig, (size_t)n);
        o += (size_t)n;
        out[o++] = '.';
        memcpy(out + o, dig + n, (size_t)(nd - n));
        o += (size_t)(nd - n);
    } else if (-6 < n && n <= 0) { /* 0.000ddd */
        out[o++] = '0';
        out[o++] = '.';
        for (int z = 0; z < -n; z++)
            out[o++] = '0';
        memcpy(out + o, dig, (size_t)nd);
        o += (size_t)nd;
    } else { /* d[.ddd]e+N or e-N */
        out[o++] = dig[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, dig + 1, (size_t)(nd - 1));
            o += (size_t)(nd - 1);
        }
        o += (size_t)snprintf(out + o, 8, "e%c%d", n - 1 < 0 ? '-' : '+', abs(n - 1));
    }
    out[o] = '\0';
    return o;
}

/* The next UTF-16 code unit of the UTF-8 string s[*i..n) (a second call gives the low
 * surrogate of a code point past U+FFFF, *pending carrying it). */
static unsigned utf16_next(const unsigned char *s, size_t n, size_t *i, unsigned *pending)
{
    if (*pending) {
        unsigned u = *pending;
        *pending = 0;
        return u;
    }
    unsigned c = s[*i];
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (*i + len > n)
        len = n - *i;
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; k < len; k++)
        cp = (cp << 6) | (s[*i + k] & 0x3F);
    *i += len;
    if (cp < 0x10000)
        return cp;
    cp -= 0x10000;
    *pending = 0xDC00 | (cp & 0x3FF);
    return 0xD800 | (cp >> 10);
}

/* RFC 8785 3.2.3: names compared as arrays of UTF-16 code units. */
static int cmp_utf16(const void *a, const void *b)
{
    const unsigned char *x = *(const unsigned char *const *)a;
    const unsigned char *y = *(const unsigned char *const *)b;
    size_t nx = strlen((const char *)x), ny = strlen((const char *)y), i = 0, j = 0;
    unsigned px = 0, py = 0;
    while ((i < nx || px) && (j < ny || py)) {
        unsigned u = utf16_next(x, nx, &i, &px), v = utf16_next(y, ny, &j, &py);
        if (u != v)
            return u < v ? -1 : 1;
    }
    int xl = i < nx || px, yl = j < ny || py;
    return xl - yl;
}

static void put_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

/* ECMAScript's Number.MAX_SAFE_INTEGER: 2^53 - 1 */
#define SAFE_INT 9007199254740991LL

/* Writes v to f: 0, or -1 for a value RFC 8785 cannot write (or out of memory). */
static int put_value(FILE *f, const json_t *v, int depth)
{
    char num[40];
    if (depth > 2048)
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(v), k = 0;
        const char **keys = malloc((n ? n : 1) * sizeof *keys);
        if (keys == NULL)
            return -1;
        const char *key;
        json_t *x;
        json_object_foreach((json_t *)v, key, x) keys[k++] = key;
        qsort(keys, n, sizeof *keys, cmp_utf16);
        fputc('{', f);
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (i)
                fputc(',', f);
            put_string(f, keys[i], strlen(keys[i]));
            fputc(':', f);
            rc = put_value(f, json_object_get(v, keys[i]), depth + 1);
        }
        free(keys);
        fputc('}', f);
        return rc;
    }
    case JSON_ARRAY: {
        fputc('[', f);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                fputc(',', f);
            if (put_value(f, json_array_get(v, i), depth + 1) != 0)
                return -1;
        }
        fputc(']', f);
        return 0;
    }
    case JSON_STRING:
        put_string(f, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        if (i > SAFE_INT || i < -SAFE_INT)
            return -1;
        jcs_number((double)i, num);
        fputs(num, f);
        return 0;
    }
    case JSON_REAL:
        if (jcs_number(json_real_value(v), num) == 0)
            return -1;
        fputs(num, f);
        return 0;
    case JSON_TRUE:
        fputs("true", f);
        return 0;
    case JSON_FALSE:
        fputs("false", f);
        return 0;
    case JSON_NULL:
        fputs("null", f);
        return 0;
    }
    return -1;
}

char *jcs_dumps(const json_t *v, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return NULL;
    int rc = put_value(f, v, 0);
    if (fclose(f) != 0 || rc != 0 || buf == NULL) {
        free(buf);
        return NULL;
    }
    if (len)
        *len = n;
    return buf;
}
