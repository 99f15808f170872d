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

#endif
