/*
 * jsonout.h - the daemon's one JSON writer: a jansson tree written compactly, straight into
 * one malloc'd buffer that becomes the response body (no intermediate copy).
 *
 * Byte for byte what json_dumps(JSON_COMPACT) writes (keys in insertion order, the same
 * string escapes, integers as integers, a real always with a '.' or an exponent), except
 * that a real is written in the shortest form that reads back to the same double
 * (core/common/numfmt.h): 0.05, not 0.050000000000000003. A real -0 is written 0.0.
 */
#ifndef HTTP_JSONOUT_H
#define HTTP_JSONOUT_H

#include <stddef.h>

#include <jansson.h>

/* The compact text of j in a new buffer (owned by the caller, free()), NUL-terminated, its
 * length in *len; NULL when out of memory or j holds a value JSON cannot (a non-finite real,
 * nesting beyond 2048 levels). Borrows j. */
char *jsonout_dump(const json_t *j, size_t *len);

/* The shortest round-trip text of a JSON real into out (at least 34 bytes): as dpb_num, with
 * ".0" appended to a whole number so that it stays a real. Returns the length. */
size_t jsonout_real(double x, char *out);

/* A JSON text written straight into its buffer, without building a tree first: for the
 * answers every request of a kind sends (a thm41 delta), where the tree's allocations and
 * its walk cost more than the computation. The same bytes jsonout_dump would write for the
 * tree with the same members in the same order. Usage: jsonout_open(w, '{'),
 * jsonout_key(w, "name"), a value, ..., jsonout_close(w, '}'), then jsonout_finish. Any
 * failure (out of memory, a non-finite real given to jsonout_realv, nesting beyond
 * JSONOUT_DEPTH) is remembered and reported by jsonout_finish. */
#define JSONOUT_DEPTH 32
typedef struct jsonout_memo jsonout_memo;
typedef struct {
    char *buf;
    size_t len, cap;
    int fail;
    jsonout_memo *reals; /* NULL, or where every real written is remembered (below) */
    int depth, after_key;
    unsigned char first[JSONOUT_DEPTH]; /* nothing written yet at this level */
} jsonout_w;

void jsonout_init(jsonout_w *w);
void jsonout_open(jsonout_w *w, char bracket);   /* '{' or '[', as a value */
void jsonout_close(jsonout_w *w, char bracket);  /* '}' or ']' */
void jsonout_key(jsonout_w *w, const char *key); /* in an object: the next member's name */
void jsonout_str(jsonout_w *w, const char *s);
void jsonout_strn(jsonout_w *w, const char *s, size_t n); /* n bytes of s */
void jsonout_int(jsonout_w *w, long long v);
void jsonout_null(jsonout_w *w);
void jsonout_bool(jsonout_w *w, int b);
void jsonout_realv(jsonout_w *w, double x); /* as a jansson real (finite) */
/* A value already in JSON text (n bytes, borrowed, trusted to be one valid JSON value): a
 * number's text jsonout_real wrote and the caller kept. */
void jsonout_rawv(jsonout_w *w, const char *text, size_t n);
void jsonout_tree(jsonout_w *w, const json_t *j); /* a tree as a value (borrowed) */
/* Every member of object j (borrowed), as members of the object being written. */
void jsonout_members(jsonout_w *w, const json_t *j);
/* Room for n more bytes at once (a text whose size is known ahead: one allocation rather
 * than a doubling series of them). */
void jsonout_reserve(jsonout_w *w, size_t n);
/* A value the caller writes itself in pieces (trusted to make one valid JSON value), e.g. a
 * signed receipt that must be bytes it signed: returns the offset in w->buf of its first
 * byte; jsonout_raw appends n bytes of s to it. */
size_t jsonout_raw_begin(jsonout_w *w);
void jsonout_raw(jsonout_w *w, const char *s, size_t n);
void jsonout_raw_drop(jsonout_w *w, size_t n); /* takes back its last n bytes */

/* The reals a writer wrote, with their text (jsonout_real's), for a second writing of the
 * same numbers in another form (a signed receipt's RFC 8785 text, res_sth.c) that then needs
 * not find their shortest digits again: set w->reals and every real written through w is
 * remembered (up to the room asked for; past it, no more). Keyed by the double's bits. */
jsonout_memo *jsonout_memo_new(size_t room); /* NULL when out of memory */
void jsonout_memo_free(jsonout_memo *m);
/* The text written for x, or NULL (never written through a writer holding m). */
const char *jsonout_memo_get(const jsonout_memo *m, double x);

/* The text (owned by the caller, NUL-terminated) and its length, or NULL after a failure
 * (the buffer is then freed). */
char *jsonout_finish(jsonout_w *w, size_t *len);

#endif
