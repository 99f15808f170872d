/*
 * codec_field.h - the codec's own field helpers, shared by its files (codec.c defines them;
 * codec_event.c calls them). Not for the handlers: they use codec.h.
 */
#ifndef HTTP_CODEC_FIELD_H
#define HTTP_CODEC_FIELD_H

#include <stddef.h>

#include <jansson.h>

#include "problem.h"

/* Largest integer a double holds exactly: counts beyond it cannot be honest. */
#define CODEC_MAX_EXACT_INT 9007199254740992.0

/* The field's dotted path (path.key, or key alone when path is "" or NULL) written into buf
 * (n bytes, truncated to fit); returns buf, so that a problem's field is written only where
 * there is a problem. */
const char *codec_join(char *buf, size_t n, const char *path, const char *key);

/* obj's member key (borrowed), or NULL when absent; when absent and required, pb is set to
 * missing_field naming path.key. */
json_t *codec_field(json_t *obj, const char *path, const char *key, int required, problem *pb);

/* The number v, or +inf for the string "infinite" where allow_inf, into *x: 1, or -1 with pb
 * set to wrong_type naming the field f. */
int codec_number_or_inf(json_t *v, const char *f, int allow_inf, double *x, problem *pb);

#endif
