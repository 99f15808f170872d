/*
 * jcs.h - RFC 8785 (JSON Canonicalization Scheme) serialization of a jansson value: the bytes
 * that signed tree heads and receipts are signed over (signer.h). Written here because no C
 * library on the project's platforms (jansson included) produces RFC 8785 output.
 *
 *   objects: members sorted by their names' UTF-16 code units (RFC 8785 3.2.3), no spaces;
 *   strings: only '"', '\\' and the controls U+0000..U+001F escaped, as \b \t \n \f \r or
 *            \u00xx (lowercase hex); everything else as its UTF-8 bytes (3.2.2.2);
 *   numbers: ECMAScript's Number.prototype.toString (ECMA-262 7.1.12.1; RFC 8785 3.2.2.3):
 *            the shortest digits that read back to the same double, plain notation for
 *            decimal exponents in [-6, 21), otherwise d.ddde+N / d.ddde-N; -0 is "0".
 *            An integer (JSON_INTEGER) is a double to RFC 8785: one beyond +-2^53 has no
 *            exact double and is refused (past 2^53 - 1, ECMAScript's
 *            Number.MAX_SAFE_INTEGER, as the rfc8785 reference implementations do), as are NaN and
 * the infinities.
 *
 * May call: jansson only.
 */
#ifndef HTTP_JCS_H
#define HTTP_JCS_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* The canonical bytes of v (malloc'ed, NUL-terminated; *len without the NUL), or NULL when v
 * holds a number RFC 8785 cannot write (NaN, an infinity, an integer past +-(2^53 - 1)), a string
 * that is not UTF-8, or memory ran out. */
char *jcs_dumps(const json_t *v, size_t *len);

/* One double in ECMAScript's form into out (at least 32 bytes); its length, 0 for NaN or an
 * infinity (nothing written but the NUL). */
size_t jcs_number(double x, char *out);

/* The same for x's shortest round-trip text as numfmt.h's dpb_num (or jsonout_real) wrote
 * it, e.g. "1e21", "3.0", "0.001": the number's digits laid out as ECMAScript does, without
 * finding them again (for numbers an answer already wrote, res_sth.c); 0 for a text that
 * holds more than 23 digits. */
size_t jcs_number_text(const char *text, char *out);
/* Room jcs_string needs for n bytes: every byte escaped as \u00xx, and the quotes. */
#define JCS_STRING_MAX(n) (6 * (n) + 2)
/* A string's RFC 8785 form (quoted, escaped) for n bytes of UTF-8 s, written into out
 * (JCS_STRING_MAX(n) bytes, not NUL-terminated); returns its length. For a caller that
 * writes a canonical object of known members itself (a receipt, res_sth.c). */
size_t jcs_string(const char *s, size_t n, char *out);
#endif
