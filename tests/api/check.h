/*
 * check.h - JSON look-ups and shape checks shared by the API tests.
 *
 * The is_* predicates return 1 when the reply has the expected shape, else print every
 * reason to stderr (prefixed with the current test) and return 0: use them inside CHECK so
 * the failure also names the calling line.
 */
#ifndef DPB_API_CHECK_H
#define DPB_API_CHECK_H

#include <jansson.h>

#include "client.h"

/* A shuffled DP-SGD epoch as JSON text. */
#define EPOCH(sigma, rounds)                                                                       \
    "{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":" #sigma                   \
    ",\"rounds\":" #rounds "}"
/* The seed 004 Table 1 epoch: sigma = 1, M = 1140369 (delta 0.01 at epsilon 0). */
#define EPOCH_1 EPOCH(1, 1140369)
/* mpmath: Theorem 4.1 delta of EPOCH_1. */
#define DELTA_EPOCH_1 0.0099999991650212578

/* The value at a path such as "results[1].epsilon" or "details.min_dataset_size" (borrowed,
 * NULL when absent). */
json_t *jget(const json_t *root, const char *path);
/* The number at path, NAN when absent or not a number. */
double jnum(const json_t *root, const char *path);
/* The string at path, NULL when absent or not a string. */
const char *jstr(const json_t *root, const char *path);
/* 1 if the value at path is an integer equal to want. */
int jint_is(const json_t *root, const char *path, long long want);

/* 1 if every number in j is finite and no value is null (a NaN encodes as null). */
int all_finite(const json_t *j);

/* A 200 application/json compute answer with the report contract (accountant, guarantee,
 * valid, conditions, warnings) and only finite numbers. */
int is_compute_answer(const api_reply *r);

/* A problem+json answer with this status and code; field is checked when not NULL. */
int is_problem(const api_reply *r, int status, const char *code, const char *field);

/* The condition called name in the array at path, or NULL. */
json_t *find_condition(const json_t *root, const char *path, const char *name);

#endif
