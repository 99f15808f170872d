/*
 * codec.h - strict JSON <-> core conversion. Every decoder rejects unknown fields, wrong
 * types and out-of-domain values with a problem naming the field (a dotted path such as
 * "event.event.rounds"); nothing is defaulted silently. Encoders never emit NaN or
 * infinities (jansson cannot): an infinite value is the string "infinite".
 *
 * Three files implement it, calling downward only: codec_event.c (codec_event) and
 * codec_encode.c (the encoders and report writers) -> codec.c (parsing, the field readers,
 * the request schemas and the flat events' table; codec_field.h holds what they share).
 */
#ifndef HTTP_CODEC_H
#define HTTP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/dp/account.h"
#include "../core/dp/event.h"
#include "../core/dp/report.h"
#include "../core/ledger/ledger.h"
#include "jsonout.h"
#include "problem.h"

/* Deepest event nesting accepted. */
#define CODEC_MAX_DEPTH 32

/* Parse a request body that must be one JSON object. Returns a new reference or NULL with
 * pb set (malformed_json, duplicate_key, number_out_of_range, wrong_type). */
json_t *codec_parse_object(const char *buf, size_t len, problem *pb);

/* 0 if every key of obj is in the NULL-terminated list allowed; else unknown_field. */
int codec_only_fields(json_t *obj, const char *path, const char *const *allowed, problem *pb);

/* Field readers. path is the object's path ("" for the root). Each returns 1 if the field
 * was present and valid, 0 if absent (missing_field is set when required), -1 on error. */
int codec_number(json_t *obj, const char *path, const char *key, int required, double *out,
                 problem *pb);
int codec_uint(json_t *obj, const char *path, const char *key, int required, uint64_t min,
               uint64_t max, uint64_t *out, problem *pb);
int codec_string(json_t *obj, const char *path, const char *key, int required, const char **out,
                 problem *pb);
int codec_bool(json_t *obj, const char *path, const char *key, int required, int *out, problem *pb);

/* A number or a list of numbers under `one` or `many` (exactly one of them must be given).
 * Writes a malloc'ed array to *vals (caller frees) and its length; *scalar = 1 when the
 * single form was used. */
int codec_number_list(json_t *obj, const char *one, const char *many, size_t max_n, double **vals,
                      size_t *n, int *scalar, problem *pb);
/* The same, where a value may also be the string "infinite" (+inf): epsilon queries. */
int codec_number_list_inf(json_t *obj, const char *one, const char *many, size_t max_n,
                          double **vals, size_t *n, int *scalar, problem *pb);

/* The optional "neighboring_relation" and "accountant" fields. */
int codec_relation_accountant(json_t *obj, dp_relation *rel, dp_accountant *acct, problem *pb);

/* The optional "value_discretization_interval" (the PLD grid) into opt. */
int codec_options(json_t *obj, dp_options *opt, problem *pb);

/* Decode an event. solve_for: the one parameter that may be left out (or null) for
 * calibration, DP_PARAM_NONE otherwise. Returns an owned tree or NULL with pb set. */
dp_event *codec_event(json_t *j, const char *path, dp_param solve_for, problem *pb);

/* Encoders (new references). */
json_t *codec_encode_event(const dp_event *ev);

/* The top-level fields each request body accepts (NULL-terminated): the one schema the
 * handlers and the fuzz target share. */
extern const char *const CODEC_DELTA_FIELDS[];
extern const char *const CODEC_EPSILON_FIELDS[];
extern const char *const CODEC_CALIBRATE_FIELDS[];
extern const char *const CODEC_CURVE_FIELDS[];
extern const char *const CODEC_RDP_FIELDS[];
extern const char *const CODEC_PROACTIVE_FIELDS[];
extern const char *const CODEC_ROUND_FIELDS[];

/* The fields every compute request shares: only the allowed ones, the relation and the
 * accountant, the options. 0, or -1 with pb set. */
int codec_compute_common(json_t *j, const char *const *allowed, dp_relation *rel,
                         dp_accountant *acct, dp_options *opt, problem *pb);

/* The optional {"clipping_norm": C, "max_noise_per_round": r} of a calibration: 1 when
 * given (both positive), 0 when absent, -1 with pb set. */
int codec_dataset(json_t *j, double *clip, double *ratio, problem *pb);
/* Identifiers (client ids, round ids): the ledger's one rule (LEDGER_ID_RULE, ledger.h),
 * checked once where an id enters: a path segment (httproute_dispatch) or a body field. 0 if s
 * (len bytes) is a valid id, else -1 with invalid_id naming field. */
int codec_id(const char *s, size_t len, const char *field, problem *pb);

json_t *codec_real(double x); /* "infinite" for +inf */
json_t *codec_uint_json(uint64_t v);
/* The same, written into an answer being written (jsonout.h) rather than a tree. */
void codec_write_real(jsonout_w *w, double x);
void codec_write_uint(jsonout_w *w, uint64_t v);
/* Adds accountant, guarantee, reference, valid, conditions, warnings to obj. */
void codec_put_report(json_t *obj, const dp_report *rep);
json_t *codec_conditions(const dp_report *rep);
/* codec_put_report's members, written into the object being written. */
void codec_write_report(jsonout_w *w, const dp_report *rep);

#endif
