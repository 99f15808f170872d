/*
 * jcs.c - RFC 8785 canonical JSON of a jansson value (jcs.h). The text goes to an
 * open_memstream buffer; numbers are ECMAScript's Number.prototype.toString.
 *
 * May call: jansson, core/common/numfmt.h (the shortest digits of a double).
 */
#include "jcs.h"

#include "../core/common/numfmt.h"

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
    /* the shortest digits that read back to x (numfmt.h: the closest such, as the standard
     * asks), in plain or exponent form */
    char e[DPB_NUM_MAX];
    dpb_num(x, e);
    return jcs_number_text(e, out);
}

size_t jcs_number_text(const char *e, char *out)
{
    /* e: [-]ddd[.ddd][e[+-]XX]: its digits without leading or trailing zeros, and n, the
     * decimal exponent of the point before them (x = 0.digits * 10^n) */
    const char *p = e;
    int neg = *p == '-';
    if (neg)
        p++;
    char dig[24];
    int nd = 0, n = 0, point = 0;
    for (; *p && *p != 'e'; p++) {
        if (*p == '.') {
            point = 1;
        } else if (nd == 0 && *p == '0') {
            n -= point; /* a leading zero after the point */
        } else if (nd == (int)sizeof dig) {
            return 0; /* not the text of a double */
        } else {
            dig[nd++] = *p;
            n += !point;
        }
    }
    if (*p == 'e')
        n += atoi(p + 1);
    while (nd > 0 && dig[nd - 1] == '0')
        nd--;
    if (nd == 0) { /* zero, -0 too (ECMA-262 7.1.12.1 step 2) */
        memcpy(out, "0", 2);
        return 1;
    }
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

/* RFC 8785 3.2.3: names compared as arrays of UTF-16 code units. UTF-8's byte order is the
 * code points' order, which is UTF-16's but for code points past U+FFFF (surrogates,
 * 0xD800..0xDFFF) against U+E000..U+FFFF: the bytes decide unless one of the first bytes that
 * differ starts such a character (0xEE and up). */
static int cmp_utf16(const void *a, const void *b)
{
    const unsigned char *x = *(const unsigned char *const *)a;
    const unsigned char *y = *(const unsigned char *const *)b;
    size_t d = 0;
    while (x[d] && x[d] == y[d])
        d++;
    if (x[d] < 0xEE && y[d] < 0xEE)
        return (int)x[d] - (int)y[d];
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

size_t jcs_string(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, run = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        memcpy(out + o, s + run, i - run); /* RFC 8785 3.2.2.2: the runs as they are */
        o += i - run;
        run = i + 1;
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\b' ? "\\b"
                          : c == '\t' ? "\\t"
                          : c == '\n' ? "\\n"
                          : c == '\f' ? "\\f"
                          : c == '\r' ? "\\r"
                                      : NULL;
        if (esc) {
            memcpy(out + o, esc, 2);
            o += 2;
        } else {
            memcpy(out + o, "\\u00", 4);
            out[o + 4] = hex[c >> 4];
            out[o + 5] = hex[c & 15];
            o += 6;
        }
    }
    memcpy(out + o, s + run, n - run);
    o += n - run;
    out[o++] = '"';
    return o;
}

/* A string's RFC 8785 form written to f: 0, or -1 (out of memory). */
static int put_string(FILE *f, const char *s, size_t n)
{
    char buf[JCS_STRING_MAX(256)], *b = n <= 256 ? buf : malloc(JCS_STRING_MAX(n));
    if (b == NULL)
        return -1;
    fwrite(b, 1, jcs_string(s, n, b), f);
    if (b != buf)
        free(b);
    return 0;
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
        const char *few[16]; /* most objects: no allocation */
        const char **keys = n <= 16 ? few : malloc(n * sizeof *keys);
        if (keys == NULL)
            return -1;
        const char *key;
        json_t *x;
        json_object_foreach((json_t *)v, key, x) keys[k++] = key;
        qsort(keys, n, sizeof *keys, cmp_utf16);
        putc_unlocked('{', f);
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (i)
                putc_unlocked(',', f);
            rc = put_string(f, keys[i], strlen(keys[i]));
            putc_unlocked(':', f);
            if (rc == 0)
                rc = put_value(f, json_object_get(v, keys[i]), depth + 1);
        }
        if (keys != few)
            free(keys);
        putc_unlocked('}', f);
        return rc;
    }
    case JSON_ARRAY: {
        putc_unlocked('[', f);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                putc_unlocked(',', f);
            if (put_value(f, json_array_get(v, i), depth + 1) != 0)
                return -1;
        }
        putc_unlocked(']', f);
        return 0;
    }
    case JSON_STRING:
        return put_string(f, json_string_value(v), json_string_length(v));
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        if (i > SAFE_INT || i < -SAFE_INT)
            return -1;
        fwrite(num, 1, jcs_number((double)i, num), f);
        return 0;
    }
    case JSON_REAL:
        size_t k = jcs_number(json_real_value(v), num);
        if (k == 0)
            return -1;
        fwrite(num, 1, k, f);
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
