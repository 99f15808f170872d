/*
 * jsonin.h - the daemon's one JSON reader: request bodies parsed into jansson trees.
 *
 * jansson's lexer copies every byte of a body into a buffer one call at a time: for the
 * small bodies of the compute requests that was two microseconds, more than the accountant
 * takes to answer. The reader here goes over a body in place and builds the same tree
 * jansson builds, but only for the plain bodies requests are made of: objects and arrays
 * nested at most 64 deep, strings of ASCII bytes from space to 0x7f without escapes,
 * integers of at most 18 digits, reals that strtod reads without overflow or underflow,
 * true, false and null. Anything else (an escape, a byte below space or above 0x7f, a long
 * integer, a duplicate key, a syntax error, a body that is not an object) goes to jansson's
 * json_loadb, which decides and words the error. So the result is always exactly
 * json_loadb's with JSON_REJECT_DUPLICATES: the same tree (the same members in the same
 * order, integers and reals as jansson types them, the same doubles) or the same error.
 */
#ifndef HTTP_JSONIN_H
#define HTTP_JSONIN_H

#include <stddef.h>

#include <jansson.h>

/* The body's tree (a new reference), or NULL with the error in *e (which may be NULL), as
 * json_loadb(buf, len, JSON_REJECT_DUPLICATES, e) returns them. */
json_t *jsonin_load(const char *buf, size_t len, json_error_t *e);

/* The fast path alone: the tree of a plain body whose top level is an object, else NULL
 * (the body is not plain, or not JSON: only json_loadb may say which). For the tests. */
json_t *jsonin_plain(const char *buf, size_t len);

#endif
