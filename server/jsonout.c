/* jsonout.c - compact JSON text of a jansson tree (see jsonout.h). */
#include "jsonout.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/common/numfmt.h"

#define MAX_DEPTH 2048

typedef struct {
    char *buf;
    size_t len, cap;
    int fail;
    jsonout_memo *reals;
} out_buf;

/* jsonout_memo: open addressing on a double's bits, at most half full; one allocation. */
typedef char real_text[DPB_NUM_MAX + 2];
struct jsonout_memo {
    size_t mask, n, room;
    uint64_t *bits;
    unsigned char *used;
    real_text *text;
};

jsonout_memo *jsonout_memo_new(size_t room)
{
    size_t slots = 16;
    while (slots < 2 * room && slots < ((size_t)1 << 32))
        slots *= 2;
    size_t each = sizeof(uint64_t) + sizeof(real_text) + 1;
    jsonout_memo *m = malloc(sizeof *m + slots * each);
    if (m == NULL)
        return NULL;
    m->mask = slots - 1;
    m->n = 0;
    m->room = slots / 2;
    m->bits = (uint64_t *)(m + 1); /* then the texts, then the used flags */
    m->text = (real_text *)(m->bits + slots);
    m->used = (unsigned char *)(m->text + slots);
    memset(m->used, 0, slots);
    return m;
}

void jsonout_memo_free(jsonout_memo *m)
{
    free(m);
}

/* The slot of bits b: where it is, or the free slot where it goes. */
static size_t reals_slot(const jsonout_memo *m, uint64_t b)
{
    size_t i = (size_t)((b * 0x9E3779B97F4A7C15ULL) >> 24) & m->mask;
    while (m->used[i] && m->bits[i] != b)
        i = (i + 1) & m->mask;
    return i;
}

static void reals_put(jsonout_memo *m, double x, const char *text, size_t n)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    size_t i = reals_slot(m, b);
    if (m->used[i] || m->n == m->room)
        return;
    m->used[i] = 1;
    m->bits[i] = b;
    memcpy(m->text[i], text, n);
    m->text[i][n] = '\0';
    m->n++;
}

const char *jsonout_memo_get(const jsonout_memo *m, double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    size_t i = reals_slot(m, b);
    return m->used[i] ? m->text[i] : NULL;
}

/* The first buffer: most answers fit, and it stays below glibc's large chunks (1024 bytes
 * and up), whose allocation first consolidates the fast bins. */
#define JSONOUT_FIRST_CAP 1000

/* Room for n more bytes and a NUL: grow the buffer (reserve's slow path). */
static int grow(out_buf *o, size_t n)
{
    size_t ncap = o->cap ? o->cap : JSONOUT_FIRST_CAP;
    while (ncap - o->len <= n) {
        if (ncap > ((size_t)-1) / 2) {
            o->fail = 1;
            return -1;
        }
        ncap *= 2;
    }
    char *nb = realloc(o->buf, ncap);
    if (nb == NULL) {
        o->fail = 1;
        return -1;
    }
    o->buf = nb;
    o->cap = ncap;
    return 0;
}

/* Room for n more bytes and a NUL, else -1 (out of memory, remembered). Inline: the room is
 * almost always there. */
static inline int reserve(out_buf *o, size_t n)
{
    if (o->fail)
        return -1;
    if (o->cap - o->len > n)
        return 0;
    return grow(o, n);
}

static void put(out_buf *o, const char *s, size_t n)
{
    if (reserve(o, n) == 0) {
        memcpy(o->buf + o->len, s, n);
        o->len += n;
    }
}

static void put_char(out_buf *o, char ch)
{
    if (reserve(o, 1) == 0)
        o->buf[o->len++] = ch;
}

/* A byte JSON must escape: '"', '\\' or a control character. */
static int needs_escape(unsigned char ch)
{
    return ch < 0x20 || ch == '"' || ch == '\\';
}

/* Does the 8-byte word w hold a byte that JSON must escape ('"', '\\' or a control
 * character)? Exact for the word as a whole (the classic zero-byte tests: a borrow can only
 * start at a byte that matches). */
static int word_needs_escape(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
    uint64_t found =
        ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash);
    return (found & highs) != 0;
}

/* The length of s's longest prefix that needs no escape. */
static size_t clean_prefix(const char *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (word_needs_escape(w))
            break;
    }
    while (i < n && !needs_escape((unsigned char)s[i]))
        i++;
    return i;
}

/* The escapes from s[i] on (the bytes before it need none), then the closing quote. */
static void put_escaped(out_buf *o, const char *s, size_t i, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    /* the short escapes JSON has (from[i] is written '\\' to[i]); any other: \u00XX */
    static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
    size_t run = i; /* bytes of s[run..i) not yet written */
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!needs_escape(ch))
            continue;
        put(o, s + run, i - run);
        run = i + 1;
        const char *at = memchr(from, ch, sizeof from - 1);
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t k = 2;
        if (at) {
            esc[1] = to[at - from];
        } else {
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            k = 6;
        }
        put(o, esc, k);
    }
    put(o, s + run, n - run);
    put_char(o, '"');
}

/* A string as jansson escapes it (its strings hold valid UTF-8): '"', '\\' and the control
 * characters, the others written as they are; then the byte tail (0 for none, ':' after a
 * key). The common string, with nothing to escape, is one reserve and one copy. */
static void put_string_then(out_buf *o, const char *s, size_t n, char tail)
{
    if (reserve(o, n + 3) != 0)
        return;
    size_t clean = clean_prefix(s, n);
    char *d = o->buf + o->len;
    d[0] = '"';
    memcpy(d + 1, s, clean);
    if (clean == n) {
        d[n + 1] = '"';
        o->len += n + 2;
    } else {
        o->len += clean + 1;
        put_escaped(o, s, clean, n);
    }
    if (tail)
        put_char(o, tail);
}

static void put_string(out_buf *o, const char *s, size_t n)
{
    put_string_then(o, s, n, 0);
}

static void put_int(out_buf *o, long long v)
{
    char b[DPB_NUM_MAX];
    /* digits of |v| without overflow at the most negative value */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    size_t k = sizeof b;
    do {
        b[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        b[--k] = '-';
    put(o, b + k, sizeof b - k);
}

size_t jsonout_real(double x, char *out)
{
    size_t n = dpb_num(x, out);
    if (strpbrk(out, ".e") == NULL && isfinite(x)) {
        memcpy(out + n, ".0", 3);
        n += 2;
    }
    return n;
}

/* A finite real, remembered in o->reals when there is one. */
static void put_real(out_buf *o, double x)
{
    char b[DPB_NUM_MAX + 2];
    size_t n = jsonout_real(x, b);
    put(o, b, n);
    if (o->reals)
        reals_put(o->reals, x, b, n);
}

static void put_value(out_buf *o, const json_t *j, int depth)
{
    if (depth > MAX_DEPTH || j == NULL) {
        o->fail = 1;
        return;
    }
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *v;
        int first = 1;
        put_char(o, '{');
        json_object_foreach((json_t *)j, key, v)
        {
            if (!first)
                put_char(o, ',');
            first = 0;
            put_string_then(o, key, strlen(key), ':');
            put_value(o, v, depth + 1);
        }
        put_char(o, '}');
        break;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        put_char(o, '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                put_char(o, ',');
            put_value(o, json_array_get(j, i), depth + 1);
        }
        put_char(o, ']');
        break;
    }
    case JSON_STRING:
        put_string(o, json_string_value(j), json_string_length(j));
        break;
    case JSON_INTEGER:
        put_int(o, (long long)json_integer_value(j));
        break;
    case JSON_REAL: {
        double x = json_real_value(j);
        if (!isfinite(x)) {
            o->fail = 1;
            return;
        }
        put_real(o, x);
        break;
    }
    case JSON_TRUE:
        put(o, "true", 4);
        break;
    case JSON_FALSE:
        put(o, "false", 5);
        break;
    case JSON_NULL:
        put(o, "null", 4);
        break;
    }
}

void jsonout_init(jsonout_w *w)
{
    memset(w, 0, sizeof *w);
    w->first[0] = 1;
}

/* The buffer as out_buf, for the writers above: the same growth and failure. */
static out_buf *as_out(jsonout_w *w)
{
    _Static_assert(offsetof(jsonout_w, buf) == offsetof(out_buf, buf) &&
                       offsetof(jsonout_w, len) == offsetof(out_buf, len) &&
                       offsetof(jsonout_w, cap) == offsetof(out_buf, cap) &&
                       offsetof(jsonout_w, fail) == offsetof(out_buf, fail) &&
                       offsetof(jsonout_w, reals) == offsetof(out_buf, reals),
                   "jsonout_w starts as out_buf");
    return (out_buf *)w;
}

/* Before a value: the comma between array elements (a member's comma came with its key). */
static void before_value(jsonout_w *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (!w->first[w->depth])
        put_char(as_out(w), ',');
    w->first[w->depth] = 0;
}

void jsonout_open(jsonout_w *w, char bracket)
{
    before_value(w);
    if (w->depth + 1 >= JSONOUT_DEPTH) {
        w->fail = 1;
        return;
    }
    put_char(as_out(w), bracket);
    w->first[++w->depth] = 1;
}

void jsonout_close(jsonout_w *w, char bracket)
{
    if (w->depth == 0) {
        w->fail = 1;
        return;
    }
    w->depth--;
    put_char(as_out(w), bracket);
}

void jsonout_key(jsonout_w *w, const char *key)
{
    if (!w->first[w->depth])
        put_char(as_out(w), ',');
    w->first[w->depth] = 0;
    put_string_then(as_out(w), key, strlen(key), ':');
    w->after_key = 1;
}

void jsonout_str(jsonout_w *w, const char *s)
{
    before_value(w);
    if (s == NULL) {
        w->fail = 1;
        return;
    }
    put_string(as_out(w), s, strlen(s));
}

void jsonout_strn(jsonout_w *w, const char *s, size_t n)
{
    before_value(w);
    put_string(as_out(w), s, n);
}

void jsonout_int(jsonout_w *w, long long v)
{
    before_value(w);
    put_int(as_out(w), v);
}

void jsonout_null(jsonout_w *w)
{
    before_value(w);
    put(as_out(w), "null", 4);
}

void jsonout_bool(jsonout_w *w, int b)
{
    before_value(w);
    put(as_out(w), b ? "true" : "false", b ? 4 : 5);
}

void jsonout_realv(jsonout_w *w, double x)
{
    before_value(w);
    if (!isfinite(x)) {
        w->fail = 1;
        return;
    }
    put_real(as_out(w), x);
}

void jsonout_rawv(jsonout_w *w, const char *text, size_t n)
{
    before_value(w);
    put(as_out(w), text, n);
}

void jsonout_tree(jsonout_w *w, const json_t *j)
{
    before_value(w);
    put_value(as_out(w), j, w->depth);
}

void jsonout_members(jsonout_w *w, const json_t *j)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v)
    {
        jsonout_key(w, key);
        jsonout_tree(w, v);
    }
}

void jsonout_reserve(jsonout_w *w, size_t n)
{
    reserve(as_out(w), n);
}

size_t jsonout_raw_begin(jsonout_w *w)
{
    before_value(w);
    return w->len;
}

void jsonout_raw(jsonout_w *w, const char *s, size_t n)
{
    put(as_out(w), s, n);
}

void jsonout_raw_drop(jsonout_w *w, size_t n)
{
    if (n > w->len)
        w->fail = 1;
    else
        w->len -= n;
}

char *jsonout_finish(jsonout_w *w, size_t *len)
{
    if (w->depth != 0 || w->after_key || reserve(as_out(w), 1) != 0) {
        free(w->buf);
        w->buf = NULL;
        return NULL;
    }
    w->buf[w->len] = '\0';
    *len = w->len;
    return w->buf;
}

char *jsonout_dump(const json_t *j, size_t *len)
{
    out_buf o = {NULL, 0, 0, 0, NULL};
    put_value(&o, j, 0);
    if (reserve(&o, 1) != 0) {
        free(o.buf);
        return NULL;
    }
    o.buf[o.len] = '\0';
    *len = o.len;
    return o.buf;
}
