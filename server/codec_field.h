/*
 * codec_field.h - the codec's own field helpers, shared by its files (codec.c defines them;
 * codec_event.c calls them). Not for the handlers: they use codec.h.
 */
#ifndef HTTP_CODEC_FIELD_H
#define HTTP_CODEC_FIELD_H

#include <stddef.h>

#include <jansson.h>

#include "../core/dp/event.h"
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

/* One field of a flat mechanism event (no nested event): a real in [lo, hi] or a whole number
 * in [lo, hi], stored at off within the dp_event (a double or a uint64_t). An optional field
 * that is absent (a whole number also when null) keeps dflt; an optional whole number that is
 * 0 is encoded null. */
typedef struct {
    const char *key;
    int whole; /* 1: a whole number (a uint64_t slot); 0: a real (a double slot) */
    int required;
    double lo, hi, dflt;
    size_t off;
} codec_flat_field;

/* A flat mechanism event: its class, its kind and its fields, in the order they are read,
 * listed and encoded (the key after the last is NULL). */
typedef struct {
    const char *cls;
    dp_event_kind kind;
    codec_flat_field f[3];
} codec_flat_event;

/* The flat mechanism events (codec.c): the one schema the decoder (codec_event.c) and the
 * encoder (codec_encode.c) read. */
extern const codec_flat_event CODEC_FLAT[];
extern const size_t CODEC_NFLAT;

#endif
