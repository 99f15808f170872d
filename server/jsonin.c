/* jsonin.c - request bodies parsed into jansson trees (see jsonin.h). */
#include "jsonin.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PLAIN_DEPTH 64 /* deeper nesting goes to jansson */
#define PLAIN_REAL 64  /* longer real numbers go to jansson */
#define PLAIN_INT 18   /* integers with more digits go to jansson (10^18 < 2^63) */

typedef struct {
    const char *p, *end;
    int depth;
} reader;

static void skip_space(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Past the digits from q on (none: q itself). */
static const char *skip_digits(const char *q, const char *end)
{
    while (q < end && is_digit(*q))
        q++;
    return q;
}

/* A string of ASCII bytes from space to 0x7f without escapes, r at its opening quote: its
 * bytes in *s, *n and r past its closing quote; -1 for any other string (or none). */
static int plain_string(reader *r, const char **s, size_t *n)
{
    const char *q = r->p + 1;
    for (; q < r->end; q++) {
        unsigned char ch = (unsigned char)*q;
        if (ch == '"') {
            *s = r->p + 1;
            *n = (size_t)(q - (r->p + 1));
            r->p = q + 1;
            return 0;
        }
        if (ch < 0x20 || ch == '\\' || ch > 0x7f)
            return -1;
    }
    return -1;
}

static json_t *plain_number(reader *r)
{
    const char *s = r->p, *q = s, *end = r->end;
    int real = 0, neg = 0;
    if (q < end && *q == '-') {
        neg = 1;
        q++;
    }
    const char *d0 = q;
    if (q < end && *q == '0')
        q++;
    else if (q < end && *q >= '1' && *q <= '9')
        q = skip_digits(q, end);
    else
        return NULL;
    size_t ndig = (size_t)(q - d0);
    if (q < end && *q == '.') {
        real = 1;
        if (++q >= end || !is_digit(*q))
            return NULL;
        q = skip_digits(q, end);
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        real = 1;
        if (++q < end && (*q == '+' || *q == '-'))
            q++;
        if (q >= end || !is_digit(*q))
            return NULL;
        q = skip_digits(q, end);
    }
    if (!real) {
        if (ndig > PLAIN_INT)
            return NULL;
        long long v = 0;
        for (const char *t = d0; t < q; t++)
            v = v * 10 + (*t - '0');
        r->p = q;
        return json_integer(neg ? -v : v);
    }
    size_t n = (size_t)(q - s);
    if (n >= PLAIN_REAL)
        return NULL;
    char text[PLAIN_REAL];
    memcpy(text, s, n);
    text[n] = '\0';
    char *stop;
    errno = 0;
    double x = strtod(text, &stop);
    /* out of range either way (jansson refuses an overflow and takes an underflow), or a
     * locale whose decimal point is not '.': jansson decides */
    if (stop != text + n || errno != 0 || !isfinite(x))
        return NULL;
    r->p = q;
    return json_real(x);
}

static json_t *plain_value(reader *r);

/* r at an opening bracket: past it and the space after it; 1 when the container closes at once
 * (r past its closing bracket), else 0. */
static int opens_empty(reader *r, char close)
{
    r->p++;
    skip_space(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 1;
    }
    return 0;
}

/* After a member or an element: a comma (1, r past it and the space after it), the closing
 * bracket (0, r past it), or anything else (-1). */
static int after_item(reader *r, char close)
{
    skip_space(r);
    if (r->p < r->end && *r->p == ',') {
        r->p++;
        skip_space(r);
        return 1;
    }
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    return -1;
}

/* One member "key": value of an object being read, added to o: 0, or -1 when malformed (a
 * duplicate key included: jansson words it). */
static int object_member(reader *r, json_t *o)
{
    const char *k;
    size_t kn;
    if (r->p >= r->end || *r->p != '"' || plain_string(r, &k, &kn) != 0)
        return -1;
    skip_space(r);
    if (r->p >= r->end || *r->p != ':')
        return -1;
    r->p++;
    skip_space(r);
    json_t *v = plain_value(r);
    if (v == NULL)
        return -1;
    if (json_object_getn(o, k, kn) != NULL) { /* jansson words the duplicate */
        json_decref(v);
        return -1;
    }
    /* takes v, even on failure */
    return json_object_setn_new_nocheck(o, k, kn, v) != 0 ? -1 : 0;
}

/* One element of an array being read, appended to a: 0, or -1 when malformed. */
static int array_element(reader *r, json_t *a)
{
    json_t *v = plain_value(r);
    return v == NULL || json_array_append_new(a, v) != 0 ? -1 : 0;
}

/* The container c (a new object or array, owned; NULL when out of memory) read item by item
 * up to its closing bracket: c, or NULL (c released) when malformed. */
static json_t *plain_container(reader *r, json_t *c, char close, int (*item)(reader *, json_t *))
{
    if (c == NULL)
        return NULL;
    if (opens_empty(r, close))
        return c;
    for (;;) {
        if (item(r, c) != 0)
            break;
        int next = after_item(r, close);
        if (next == 0)
            return c;
        if (next < 0)
            break;
    }
    json_decref(c);
    return NULL;
}

static json_t *plain_object(reader *r)
{
    return plain_container(r, json_object(), '}', object_member);
}

static json_t *plain_array(reader *r)
{
    return plain_container(r, json_array(), ']', array_element);
}

static int word(reader *r, const char *w, size_t n)
{
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
        return 0;
    r->p += n;
    return 1;
}

static json_t *plain_value(reader *r)
{
    if (r->p >= r->end)
        return NULL;
    switch (*r->p) {
    case '{':
    case '[': {
        if (r->depth >= PLAIN_DEPTH)
            return NULL;
        r->depth++;
        json_t *v = *r->p == '{' ? plain_object(r) : plain_array(r);
        r->depth--;
        return v;
    }
    case '"': {
        const char *s;
        size_t n;
        return plain_string(r, &s, &n) == 0 ? json_stringn_nocheck(s, n) : NULL;
    }
    case 't':
        return word(r, "true", 4) ? json_true() : NULL;
    case 'f':
        return word(r, "false", 5) ? json_false() : NULL;
    case 'n':
        return word(r, "null", 4) ? json_null() : NULL;
    default:
        return plain_number(r);
    }
}

json_t *jsonin_plain(const char *buf, size_t len)
{
    if (buf == NULL)
        return NULL;
    reader r = {buf, buf + len, 0};
    skip_space(&r);
    if (r.p >= r.end || *r.p != '{')
        return NULL;
    json_t *j = plain_value(&r);
    if (j == NULL)
        return NULL;
    skip_space(&r);
    if (r.p != r.end) { /* more after the object: jansson words it */
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *jsonin_load(const char *buf, size_t len, json_error_t *e)
{
    json_t *j = jsonin_plain(buf, len);
    if (j != NULL)
        return j;
    return json_loadb(buf, len, JSON_REJECT_DUPLICATES, e);
}
