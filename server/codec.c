/*
 * codec.c - the codec's field primitives: a request body parsed into one object, the field
 * readers (number, whole number, string, boolean, number lists, ids) that name a bad field by
 * its dotted path, and the request schemas the handlers share. Event decoding lives in
 * codec_event.c and the encoders in codec_encode.c; both call down into this file (through
 * codec.h and codec_field.h), never the other way. Calls: jsonin (parsing), problem, core's
 * numfmt and ledger id rule.
 */
#include "codec.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/common/numfmt.h"
#include "codec_field.h"
#include "jsonin.h"

#define MAX_EXACT_INT CODEC_MAX_EXACT_INT

const char *codec_join(char *buf, size_t n, const char *path, const char *key)
{
    if (path == NULL || path[0] == '\0')
        snprintf(buf, n, "%s", key);
    else
        snprintf(buf, n, "%s.%s", path, key);
    return buf;
}

json_t *codec_parse_object(const char *buf, size_t len, problem *pb)
{
    json_error_t e;
    json_t *j = jsonin_load(buf, len, &e);
    if (j == NULL) {
        switch (json_error_code(&e)) {
        case json_error_duplicate_key:
            problem_set(pb, PB_DUPLICATE_KEY, NULL,
                        "%s (line %d, column %d): every key may appear once per object", e.text,
                        e.line, e.column);
            break;
        case json_error_numeric_overflow:
            problem_set(pb, PB_NUMBER_OUT_OF_RANGE, NULL,
                        "%s (line %d, column %d): numbers must fit a 64-bit double or integer",
                        e.text, e.line, e.column);
            break;
        case json_error_null_character:
            problem_set(pb, PB_MALFORMED_JSON, NULL,
                        "a string holds U+0000 (\\u0000) at line %d, column %d: no field takes it; "
                        "remove it",
                        e.line, e.column);
            break;
        case json_error_invalid_utf8:
            problem_set(pb, PB_MALFORMED_JSON, NULL, "the body is not valid UTF-8: %s", e.text);
            break;
        default:
            problem_set(pb, PB_MALFORMED_JSON, NULL,
                        "%s at line %d, column %d (NaN and Infinity are not JSON numbers)", e.text,
                        e.line, e.column);
        }
        return NULL;
    }
    if (!json_is_object(j)) {
        problem_set(pb, PB_WRONG_TYPE, NULL, "the request body must be a JSON object");
        json_decref(j);
        return NULL;
    }
    return j;
}

int codec_id(const char *s, size_t len, const char *field, problem *pb)
{
    if (ledger_id_valid(s, len))
        return 0;
    /* show the offending id only as far as it is printable ASCII */
    char shown[48];
    size_t k = 0;
    for (size_t i = 0; s && i < len && k + 1 < sizeof shown; i++)
        shown[k++] = s[i] > 0x20 && s[i] < 0x7f ? s[i] : '?';
    shown[k] = '\0';
    problem_set(pb, PB_INVALID_ID, field, "%s '%s%s' is not a valid id: ids are " LEDGER_ID_RULE,
                field, shown, len > k ? "..." : "");
    return -1;
}

int codec_only_fields(json_t *obj, const char *path, const char *const *allowed, problem *pb)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(key, *a) == 0)
                ok = 1;
        if (!ok) {
            char f[96], list[256] = "";
            codec_join(f, sizeof f, path, key);
            for (const char *const *a = allowed; *a; a++) {
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", l ? ", " : "", *a);
            }
            problem_set(pb, PB_UNKNOWN_FIELD, f, "unknown field '%s'; allowed here: %s", f, list);
            return -1;
        }
    }
    return 0;
}

json_t *codec_field(json_t *obj, const char *path, const char *key, int required, problem *pb)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL && required) {
        char f[96];
        codec_join(f, sizeof f, path, key);
        problem_set(pb, PB_MISSING_FIELD, f, "'%s' is required", f);
    }
    return v;
}

int codec_number(json_t *obj, const char *path, const char *key, int required, double *out,
                 problem *pb)
{
    json_t *v = codec_field(obj, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    char f[96]; /* the field's path, written only for a problem */
    if (!json_is_number(v)) {
        problem_set(pb, PB_WRONG_TYPE, codec_join(f, sizeof f, path, key), "'%s' must be a number",
                    f);
        return -1;
    }
    double x = json_number_value(v);
    if (!isfinite(x)) {
        problem_set(pb, PB_NUMBER_OUT_OF_RANGE, codec_join(f, sizeof f, path, key),
                    "'%s' must be finite", f);
        return -1;
    }
    *out = x;
    return 1;
}

int codec_uint(json_t *obj, const char *path, const char *key, int required, uint64_t min,
               uint64_t max, uint64_t *out, problem *pb)
{
    json_t *v = codec_field(obj, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    char f[96]; /* the field's path, written only for a problem */
    uint64_t u;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0) {
            problem_set(pb, PB_INVALID_PARAMETER, codec_join(f, sizeof f, path, key),
                        "'%s' must be a whole number >= %llu", f, (unsigned long long)min);
            return -1;
        }
        u = (uint64_t)i;
    } else if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!(x >= 0.0 && x <= MAX_EXACT_INT) || x != floor(x)) {
            char num[DPB_NUM_MAX];
            problem_set(pb, PB_INVALID_PARAMETER, codec_join(f, sizeof f, path, key),
                        "'%s' must be a whole number between %llu and %llu (got %s)", f,
                        (unsigned long long)min, (unsigned long long)max, dpb_num_str(x, num));
            return -1;
        }
        u = (uint64_t)x;
    } else {
        problem_set(pb, PB_WRONG_TYPE, codec_join(f, sizeof f, path, key),
                    "'%s' must be a whole number", f);
        return -1;
    }
    if (u < min || u > max) {
        problem_set(pb, PB_INVALID_PARAMETER, codec_join(f, sizeof f, path, key),
                    "'%s' must be between %llu and %llu (got %llu)", f, (unsigned long long)min,
                    (unsigned long long)max, (unsigned long long)u);
        return -1;
    }
    *out = u;
    return 1;
}

/* The member path.key of obj of the JSON type t (JSON_TRUE: a boolean) into *v (borrowed): 1;
 * 0 when absent and not required; -1 with pb set (missing_field, or wrong_type "'f' must be
 * WHAT"). */
static int typed(json_t *obj, const char *path, const char *key, int required, json_type t,
                 const char *what, json_t **v, problem *pb)
{
    *v = codec_field(obj, path, key, required, pb);
    if (*v == NULL)
        return required ? -1 : 0;
    if (t == JSON_TRUE ? json_is_boolean(*v) : json_typeof(*v) == t)
        return 1;
    char f[96];
    codec_join(f, sizeof f, path, key);
    problem_set(pb, PB_WRONG_TYPE, f, "'%s' must be %s", f, what);
    return -1;
}

int codec_string(json_t *obj, const char *path, const char *key, int required, const char **out,
                 problem *pb)
{
    json_t *v;
    int r = typed(obj, path, key, required, JSON_STRING, "a string", &v, pb);
    if (r > 0)
        *out = json_string_value(v);
    return r;
}

int codec_bool(json_t *obj, const char *path, const char *key, int required, int *out, problem *pb)
{
    json_t *v;
    int r = typed(obj, path, key, required, JSON_TRUE, "true or false", &v, pb);
    if (r > 0)
        *out = json_is_true(v);
    return r;
}

int codec_number_or_inf(json_t *v, const char *f, int allow_inf, double *x, problem *pb)
{
    if (allow_inf && json_is_string(v) && strcmp(json_string_value(v), "infinite") == 0) {
        *x = HUGE_VAL;
        return 1;
    }
    if (!json_is_number(v)) {
        problem_set(pb, PB_WRONG_TYPE, f,
                    allow_inf ? "'%s' must be a number or \"infinite\"" : "'%s' must be a number",
                    f);
        return -1;
    }
    *x = json_number_value(v);
    return 1;
}

static int number_list(json_t *obj, const char *one, const char *many, size_t max_n, double **vals,
                       size_t *n, int *scalar, int allow_inf, problem *pb);

int codec_number_list_inf(json_t *obj, const char *one, const char *many, size_t max_n,
                          double **vals, size_t *n, int *scalar, problem *pb)
{
    return number_list(obj, one, many, max_n, vals, n, scalar, 1, pb);
}

int codec_number_list(json_t *obj, const char *one, const char *many, size_t max_n, double **vals,
                      size_t *n, int *scalar, problem *pb)
{
    return number_list(obj, one, many, max_n, vals, n, scalar, 0, pb);
}

static int number_list(json_t *obj, const char *one, const char *many, size_t max_n, double **vals,
                       size_t *n, int *scalar, int allow_inf, problem *pb)
{
    json_t *a = json_object_get(obj, one), *b = json_object_get(obj, many);
    *vals = NULL;
    *n = 0;
    if ((a == NULL) == (b == NULL)) {
        problem_set(pb, a ? PB_INVALID_PARAMETER : PB_MISSING_FIELD, a ? one : one,
                    "give exactly one of '%s' (a number) or '%s' (a list of numbers)", one, many);
        return -1;
    }
    if (a) {
        double x;
        if (allow_inf ? codec_number_or_inf(a, one, 1, &x, pb) < 0
                      : codec_number(obj, "", one, 1, &x, pb) < 0)
            return -1;
        *vals = malloc(sizeof(double));
        if (*vals == NULL)
            return problem_oom(pb);
        (*vals)[0] = x;
        *n = 1;
        *scalar = 1;
        return 1;
    }
    if (!json_is_array(b)) {
        problem_set(pb, PB_WRONG_TYPE, many, "'%s' must be a list of numbers", many);
        return -1;
    }
    size_t k = json_array_size(b);
    if (k == 0 || k > max_n) {
        problem_set(pb, PB_TOO_MANY_VALUES, many,
                    "'%s' must hold between 1 and %zu numbers (got %zu)", many, max_n, k);
        return -1;
    }
    double *v = malloc(k * sizeof *v);
    if (v == NULL)
        return problem_oom(pb);
    size_t i;
    json_t *e;
    json_array_foreach(b, i, e)
    {
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", many, i);
        if (codec_number_or_inf(e, f, allow_inf, &v[i], pb) < 0) {
            free(v);
            return -1;
        }
    }
    *vals = v;
    *n = k;
    *scalar = 0;
    return 1;
}

int codec_relation_accountant(json_t *obj, dp_relation *rel, dp_accountant *acct, problem *pb)
{
    const char *s;
    *rel = DP_REL_ADD_OR_REMOVE;
    *acct = DP_ACCT_AUTO;
    int r = codec_string(obj, "", "neighboring_relation", 0, &s, pb);
    if (r < 0)
        return -1;
    if (r > 0 && dp_relation_parse(s, rel) != 0) {
        problem_set(pb, PB_INVALID_PARAMETER, "neighboring_relation",
                    "neighboring_relation must be \"add_or_remove_one\", \"replace_one\" or "
                    "\"replace_special\"");
        return -1;
    }
    r = codec_string(obj, "", "accountant", 0, &s, pb);
    if (r < 0)
        return -1;
    if (r > 0 && dp_accountant_parse(s, acct) != 0) {
        problem_set(pb, PB_INVALID_PARAMETER, "accountant",
                    "accountant must be one of \"auto\", \"thm41\", \"gdp_clt\", "
                    "\"gdp_exact\", \"rdp\", \"pld\", \"pnsgd\", \"proactive\" (see GET "
                    "/v1/accountants)");
        return -1;
    }
    return 0;
}

int codec_options(json_t *obj, dp_options *opt, problem *pb)
{
    memset(opt, 0, sizeof *opt);
    int r = codec_number(obj, "", "value_discretization_interval", 0, &opt->pld_h, pb);
    if (r < 0)
        return -1;
    if (r > 0 && !(opt->pld_h >= 1e-6 && opt->pld_h <= 0.1)) {
        char num[DPB_NUM_MAX];
        problem_set(pb, PB_INVALID_PARAMETER, "value_discretization_interval",
                    "value_discretization_interval must lie in [1e-6, 0.1] (got %s)",
                    dpb_num_str(opt->pld_h, num));
        return -1;
    }
    return 0;
}

/* ---- the flat mechanism events (codec_field.h) ---- */

#define SLOT(m) offsetof(dp_event, u.m)
const codec_flat_event CODEC_FLAT[] = {
    {"RandomizedResponseDpEvent",
     DP_EV_RANDOMIZED_RESPONSE,
     {{"noise_parameter", 0, 1, 0.0, 1.0, 0.0, SLOT(rr.noise_parameter)},
      {"num_buckets", 1, 1, 1.0, MAX_EXACT_INT, 0.0, SLOT(rr.num_buckets)}}},
    {"DiscreteGaussianDpEvent",
     DP_EV_DISCRETE_GAUSSIAN,
     {{"sigma", 0, 1, 0.0, 1e6, 0.0, SLOT(dgauss.sigma)},
      {"sensitivity", 0, 0, 1e-6, 1e6, 1.0, SLOT(dgauss.sensitivity)},
      {"dimension", 1, 0, 1.0, MAX_EXACT_INT, 0.0, SLOT(dgauss.dimension)}}},
    {"DiscreteLaplaceDpEvent",
     DP_EV_DISCRETE_LAPLACE,
     {{"noise_parameter", 0, 1, 0.0, 1e6, 0.0, SLOT(dlap.noise_parameter)},
      {"sensitivity", 1, 1, 0.0, 1e6, 0.0, SLOT(dlap.sensitivity)}}},
    {"ExponentialMechanismDpEvent",
     DP_EV_EXPONENTIAL,
     {{"epsilon", 0, 1, 0.0, 1e4, 0.0, SLOT(pure.epsilon)}}},
    {"PermuteAndFlipDpEvent",
     DP_EV_PERMUTE_AND_FLIP,
     {{"epsilon", 0, 1, 0.0, 1e4, 0.0, SLOT(pure.epsilon)}}},
    {"ZCDpEvent",
     DP_EV_ZCDP,
     {{"rho", 0, 1, 0.0, 1e6, 0.0, SLOT(zcdp.rho)}, {"xi", 0, 0, 0.0, 1e6, 0.0, SLOT(zcdp.xi)}}},
};
const size_t CODEC_NFLAT = sizeof CODEC_FLAT / sizeof CODEC_FLAT[0];

/* ---- request schemas shared by the handlers (and the fuzz target) ---------------------- */

const char *const CODEC_DELTA_FIELDS[] = {"event",      "epsilon",
                                          "epsilons",   "neighboring_relation",
                                          "accountant", "value_discretization_interval",
                                          NULL};

const char *const CODEC_EPSILON_FIELDS[] = {"event",      "delta",
                                            "deltas",     "neighboring_relation",
                                            "accountant", "value_discretization_interval",
                                            NULL};

const char *const CODEC_CALIBRATE_FIELDS[] = {"event",
                                              "solve_for",
                                              "target",
                                              "neighboring_relation",
                                              "accountant",
                                              "dataset",
                                              "value_discretization_interval",
                                              NULL};

const char *const CODEC_CURVE_FIELDS[] = {"event",
                                          "epsilons",
                                          "epsilon_range",
                                          "alphas",
                                          "tradeoff_points",
                                          "neighboring_relation",
                                          "accountant",
                                          "value_discretization_interval",
                                          NULL};

const char *const CODEC_RDP_FIELDS[] = {"event", "orders", "neighboring_relation", "accountant",
                                        NULL};

const char *const CODEC_PROACTIVE_FIELDS[] = {
    "procedure", "noise_multiplier", "epsilon", "delta", "dataset_size", "epochs", "batch_size",
    "theta",     "theorem",          "variant", NULL};

const char *const CODEC_ROUND_FIELDS[] = {
    "round_id",   "event",       "participants", "policy",
    "dry_run",    "already_ran", "phase",        "reservation_ttl_seconds",
    "event_name", NULL};

int codec_compute_common(json_t *j, const char *const *allowed, dp_relation *rel,
                         dp_accountant *acct, dp_options *opt, problem *pb)
{
    if (codec_only_fields(j, "", allowed, pb) < 0 ||
        codec_relation_accountant(j, rel, acct, pb) < 0 || codec_options(j, opt, pb) < 0)
        return -1;
    return 0;
}

int codec_dataset(json_t *j, double *clip, double *ratio, problem *pb)
{
    static const char *const allowed[] = {"clipping_norm", "max_noise_per_round", NULL};
    json_t *d = json_object_get(j, "dataset");
    if (d == NULL)
        return 0;
    if (!json_is_object(d)) {
        problem_set(pb, PB_WRONG_TYPE, "dataset", "'dataset' must be an object");
        return -1;
    }
    if (codec_only_fields(d, "dataset", allowed, pb) < 0 ||
        codec_number(d, "dataset", "clipping_norm", 1, clip, pb) < 0 ||
        codec_number(d, "dataset", "max_noise_per_round", 1, ratio, pb) < 0)
        return -1;
    if (!(*clip > 0.0) || !(*ratio > 0.0)) {
        problem_set(pb, PB_INVALID_PARAMETER, "dataset",
                    "clipping_norm and max_noise_per_round must be positive");
        return -1;
    }
    return 1;
}
