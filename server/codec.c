/* codec.c - strict JSON decoding of requests and encoding of answers. */
#include "codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/common/numfmt.h"
#include "jsonin.h"

/* Largest integer a double holds exactly: counts beyond it cannot be honest. */
#define MAX_EXACT_INT 9007199254740992.0

/* The field's dotted path (path.key) into buf; returns buf, so that a problem's field is
 * written only where there is a problem. */
static const char *join(char *buf, size_t n, const char *path, const char *key)
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
            join(f, sizeof f, path, key);
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

static json_t *field(json_t *obj, const char *path, const char *key, int required, problem *pb)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL && required) {
        char f[96];
        join(f, sizeof f, path, key);
        problem_set(pb, PB_MISSING_FIELD, f, "'%s' is required", f);
    }
    return v;
}

int codec_number(json_t *obj, const char *path, const char *key, int required, double *out,
                 problem *pb)
{
    json_t *v = field(obj, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    char f[96]; /* the field's path, written only for a problem */
    if (!json_is_number(v)) {
        problem_set(pb, PB_WRONG_TYPE, join(f, sizeof f, path, key), "'%s' must be a number", f);
        return -1;
    }
    double x = json_number_value(v);
    if (!isfinite(x)) {
        problem_set(pb, PB_NUMBER_OUT_OF_RANGE, join(f, sizeof f, path, key), "'%s' must be finite",
                    f);
        return -1;
    }
    *out = x;
    return 1;
}

int codec_uint(json_t *obj, const char *path, const char *key, int required, uint64_t min,
               uint64_t max, uint64_t *out, problem *pb)
{
    json_t *v = field(obj, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    char f[96]; /* the field's path, written only for a problem */
    uint64_t u;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0) {
            problem_set(pb, PB_INVALID_PARAMETER, join(f, sizeof f, path, key),
                        "'%s' must be a whole number >= %llu", f, (unsigned long long)min);
            return -1;
        }
        u = (uint64_t)i;
    } else if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!(x >= 0.0 && x <= MAX_EXACT_INT) || x != floor(x)) {
            char num[DPB_NUM_MAX];
            problem_set(pb, PB_INVALID_PARAMETER, join(f, sizeof f, path, key),
                        "'%s' must be a whole number between %llu and %llu (got %s)", f,
                        (unsigned long long)min, (unsigned long long)max, dpb_num_str(x, num));
            return -1;
        }
        u = (uint64_t)x;
    } else {
        problem_set(pb, PB_WRONG_TYPE, join(f, sizeof f, path, key), "'%s' must be a whole number",
                    f);
        return -1;
    }
    if (u < min || u > max) {
        problem_set(pb, PB_INVALID_PARAMETER, join(f, sizeof f, path, key),
                    "'%s' must be between %llu and %llu (got %llu)", f, (unsigned long long)min,
                    (unsigned long long)max, (unsigned long long)u);
        return -1;
    }
    *out = u;
    return 1;
}

int codec_string(json_t *obj, const char *path, const char *key, int required, const char **out,
                 problem *pb)
{
    json_t *v = field(obj, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    if (!json_is_string(v)) {
        char f[96];
        join(f, sizeof f, path, key);
        problem_set(pb, PB_WRONG_TYPE, f, "'%s' must be a string", f);
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

int codec_bool(json_t *obj, const char *path, const char *key, int required, int *out, problem *pb)
{
    json_t *v = field(obj, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    if (!json_is_boolean(v)) {
        char f[96];
        join(f, sizeof f, path, key);
        problem_set(pb, PB_WRONG_TYPE, f, "'%s' must be true or false", f);
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

/* A number, or the string "infinite" where allow_inf: 1 and *x set, -1 with pb set. */
static int number_or_infinite(json_t *v, const char *f, int allow_inf, double *x, problem *pb)
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
        if (allow_inf ? number_or_infinite(a, one, 1, &x, pb) < 0
                      : codec_number(obj, "", one, 1, &x, pb) < 0)
            return -1;
        *vals = malloc(sizeof(double));
        if (*vals == NULL) {
            problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
            return -1;
        }
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
    if (v == NULL) {
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_array_get(b, i);
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", many, i);
        if (number_or_infinite(e, f, allow_inf, &v[i], pb) < 0) {
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

/* ---- events ---------------------------------------------------------------------------- */

/* dp_accounting event classes that are known but not yet accounted here: 422 unsupported
 * (an unknown class is 400 unknown_event). */
static const char *const KNOWN_UNSUPPORTED[] = {"UnsupportedDpEvent", NULL};

/* The solved parameter may be absent or null. Returns 1 if it is (and marks the node). */
static int leave_for_solver(json_t *j, const char *key, dp_param p, dp_param solve_for,
                            dp_event *ev)
{
    json_t *v = json_object_get(j, key);
    if (solve_for == p && (v == NULL || json_is_null(v))) {
        ev->unknown = p;
        return 1;
    }
    return 0;
}

static dp_event *decode(json_t *j, const char *path, dp_param solve_for, int depth, problem *pb);

/* The required nested "event" of a combinator at path, decoded one level deeper (NULL with pb
 * set when absent or invalid). */
static dp_event *decode_child(json_t *j, const char *path, dp_param solve_for, int depth,
                              problem *pb)
{
    char f[96];
    join(f, sizeof f, path, "event");
    json_t *inner = field(j, path, "event", 1, pb);
    return inner ? decode(inner, f, solve_for, depth + 1, pb) : NULL;
}

static dp_event *new_event(dp_event_kind k, problem *pb)
{
    dp_event *ev = dp_event_new(k);
    if (ev == NULL)
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
    return ev;
}

/* A positive noise multiplier in (0, 1e6] ([0, 1e6] where allow_zero: no noise, not private);
 * may be left for the solver. */
static int decode_noise_z(json_t *j, const char *path, dp_param solve_for, dp_event *ev,
                          double *slot, int allow_zero, problem *pb)
{
    if (leave_for_solver(j, "noise_multiplier", DP_PARAM_NOISE_MULTIPLIER, solve_for, ev))
        return 0;
    double s;
    if (codec_number(j, path, "noise_multiplier", 1, &s, pb) < 0)
        return -1;
    if (!((allow_zero ? s >= 0.0 : s > 0.0) && s <= 1e6)) {
        char f[96];
        join(f, sizeof f, path, "noise_multiplier");
        char num[DPB_NUM_MAX];
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be %s and at most 1e6 (got %s)", f,
                    allow_zero ? ">= 0 (0: no noise)" : "greater than 0", dpb_num_str(s, num));
        return -1;
    }
    *slot = s;
    return 0;
}

static int decode_noise(json_t *j, const char *path, dp_param solve_for, dp_event *ev, double *slot,
                        problem *pb)
{
    return decode_noise_z(j, path, solve_for, ev, slot, 0, pb);
}

static dp_event *decode_shuffled(json_t *j, const char *path, dp_param solve_for, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_multiplier", "rounds", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = dp_event_new(DP_EV_SHUFFLED_EPOCH);
    if (ev == NULL) {
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        return NULL;
    }
    if (decode_noise(j, path, solve_for, ev, &ev->u.shuffled.noise_multiplier, pb) < 0)
        goto fail;
    if (!leave_for_solver(j, "rounds", DP_PARAM_ROUNDS, solve_for, ev) &&
        codec_uint(j, path, "rounds", 1, 1, (uint64_t)INT64_MAX, &ev->u.shuffled.rounds, pb) < 0)
        goto fail;
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

static dp_event *decode_self(json_t *j, const char *path, dp_param solve_for, int depth,
                             problem *pb)
{
    static const char *const allowed[] = {"class_name", "event", "count", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = dp_event_new(DP_EV_SELF_COMPOSED);
    if (ev == NULL) {
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        return NULL;
    }
    if (!leave_for_solver(j, "count", DP_PARAM_COUNT, solve_for, ev) &&
        codec_uint(j, path, "count", 1, 1, (uint64_t)MAX_EXACT_INT, &ev->u.self.count, pb) < 0)
        goto fail;
    ev->u.self.event = decode_child(j, path, solve_for, depth, pb);
    if (ev->u.self.event == NULL)
        goto fail;
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

static dp_event *decode_composed(json_t *j, const char *path, dp_param solve_for, int depth,
                                 problem *pb)
{
    static const char *const allowed[] = {"class_name", "events", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    char f[96];
    join(f, sizeof f, path, "events");
    json_t *arr = field(j, path, "events", 1, pb);
    if (arr == NULL)
        return NULL;
    if (!json_is_array(arr) || json_array_size(arr) > 1000) {
        problem_set(pb, json_is_array(arr) ? PB_TOO_MANY_VALUES : PB_WRONG_TYPE, f,
                    "'%s' must be a list of 0 to 1000 events (none: the identity)", f);
        return NULL;
    }
    dp_event *ev = dp_event_new(DP_EV_COMPOSED);
    size_t n = json_array_size(arr);
    if (ev)
        ev->u.composed.events = calloc(n ? n : 1, sizeof(dp_event *));
    if (ev == NULL || ev->u.composed.events == NULL) {
        dp_event_free(ev);
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        char fi[96];
        snprintf(fi, sizeof fi, "%s[%zu]", f, i);
        dp_event *child = decode(json_array_get(arr, i), fi, solve_for, depth + 1, pb);
        if (child == NULL) {
            dp_event_free(ev);
            return NULL;
        }
        ev->u.composed.events[ev->u.composed.n++] = child;
    }
    return ev;
}

static dp_event *decode_noise_event(json_t *j, const char *path, dp_event_kind k,
                                    dp_param solve_for, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_multiplier", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(k, pb);
    if (ev && decode_noise_z(j, path, solve_for, ev, &ev->u.noise.noise_multiplier, 1, pb) < 0) {
        dp_event_free(ev);
        return NULL;
    }
    return ev;
}

static dp_event *decode_eps_delta(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "epsilon", "delta", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    double e, d;
    if (codec_number(j, path, "epsilon", 1, &e, pb) < 0 ||
        codec_number(j, path, "delta", 1, &d, pb) < 0)
        return NULL;
    char f[96];
    if (!(e >= 0.0 && e <= 1e4)) {
        join(f, sizeof f, path, "epsilon");
        char num[DPB_NUM_MAX];
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must lie in [0, 1e4] (got %s)", f,
                    dpb_num_str(e, num));
        return NULL;
    }
    if (!(d >= 0.0 && d <= 1.0)) {
        join(f, sizeof f, path, "delta");
        char num[DPB_NUM_MAX];
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must lie in [0, 1] (got %s)", f,
                    dpb_num_str(d, num));
        return NULL;
    }
    dp_event *ev = new_event(DP_EV_EPSILON_DELTA, pb);
    if (ev) {
        ev->u.epsdelta.epsilon = e;
        ev->u.epsdelta.delta = d;
    }
    return ev;
}

static dp_event *decode_poisson(json_t *j, const char *path, dp_param solve_for, int depth,
                                problem *pb)
{
    static const char *const allowed[] = {"class_name", "sampling_probability", "event", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_POISSON_SAMPLED, pb);
    if (ev == NULL)
        return NULL;
    char f[96];
    if (!leave_for_solver(j, "sampling_probability", DP_PARAM_SAMPLING_PROBABILITY, solve_for,
                          ev)) {
        double q;
        if (codec_number(j, path, "sampling_probability", 1, &q, pb) < 0)
            goto fail;
        if (!(q >= 0.0 && q <= 1.0)) {
            join(f, sizeof f, path, "sampling_probability");
            char num[DPB_NUM_MAX];
            problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must lie in [0, 1] (got %s)", f,
                        dpb_num_str(q, num));
            goto fail;
        }
        ev->u.sampled.sampling_probability = q;
    }
    ev->u.sampled.event = decode_child(j, path, solve_for, depth, pb);
    if (ev->u.sampled.event == NULL)
        goto fail;
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

/* A positive finite number field (required), with a clear message. */
static int positive(json_t *j, const char *path, const char *key, double *out, int allow_zero,
                    problem *pb)
{
    if (codec_number(j, path, key, 1, out, pb) < 0)
        return -1;
    if (allow_zero ? !(*out >= 0.0) : !(*out > 0.0)) {
        char f[96];
        join(f, sizeof f, path, key);
        char num[DPB_NUM_MAX];
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be %s (got %s)", f,
                    allow_zero ? ">= 0" : "> 0", dpb_num_str(*out, num));
        return -1;
    }
    return 0;
}

/* {"c1": ..., "c2": ...[, "alpha": ...]}; c1 may be left for the solver. */
static int decode_schedule(json_t *s, const char *path, int online, dp_param solve_for,
                           dp_event *ev, problem *pb)
{
    static const char *const plain[] = {"c1", "c2", NULL};
    static const char *const with_alpha[] = {"alpha", "c1", "c2", NULL};
    if (!json_is_object(s)) {
        problem_set(pb, PB_WRONG_TYPE, path, "'%s' must be an object", path);
        return -1;
    }
    pnsgd_params *p = &ev->u.pnsgd;
    if (codec_only_fields(s, path, online ? with_alpha : plain, pb) < 0)
        return -1;
    if (!leave_for_solver(s, "c1", DP_PARAM_C1, solve_for, ev) &&
        positive(s, path, "c1", &p->c1, 0, pb) < 0)
        return -1;
    if (positive(s, path, "c2", &p->c2, 1, pb) < 0)
        return -1;
    if (online && codec_number(s, path, "alpha", 1, &p->alpha, pb) < 0)
        return -1;
    return 0;
}

static dp_event *decode_pnsgd(json_t *j, const char *path, dp_param solve_for, problem *pb)
{
    static const char *const allowed[] = {
        "class_name",       "noise",           "noise_std", "laplace_scale",
        "noise_schedule",   "online_schedule", "lipschitz", "smoothness",
        "strong_convexity", "learning_rate",   "diameter",  "interval",
        "dataset_size",     "order",           "index",     NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_PNSGD, pb);
    if (ev == NULL)
        return NULL;
    pnsgd_params *p = &ev->u.pnsgd;
    char f[96];
    const char *s;
    if (codec_string(j, path, "noise", 1, &s, pb) < 0)
        goto fail;
    if (strcmp(s, "gaussian") == 0)
        p->noise = PNSGD_GAUSSIAN;
    else if (strcmp(s, "laplace") == 0)
        p->noise = PNSGD_LAPLACE;
    else {
        join(f, sizeof f, path, "noise");
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be \"gaussian\" or \"laplace\"", f);
        goto fail;
    }
    const char *level_key = p->noise == PNSGD_GAUSSIAN ? "noise_std" : "laplace_scale";
    const char *other_key = p->noise == PNSGD_GAUSSIAN ? "laplace_scale" : "noise_std";
    if (json_object_get(j, other_key)) {
        join(f, sizeof f, path, other_key);
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' does not go with noise \"%s\"; use '%s'", f,
                    s, level_key);
        goto fail;
    }
    json_t *sched = json_object_get(j, "noise_schedule"),
           *online = json_object_get(j, "online_schedule");
    int given = json_object_get(j, level_key) != NULL ||
                (solve_for == DP_PARAM_NOISE_SCALE && !sched && !online);
    if (given + (sched != NULL) + (online != NULL) != 1) {
        problem_set(pb, PB_INVALID_PARAMETER, path,
                    "give exactly one of '%s', 'noise_schedule' {c1, c2} (seed 000 Theorems 3/4) "
                    "or 'online_schedule' {alpha, c1, c2} (Theorems 5/6)",
                    level_key);
        goto fail;
    }
    if (given) {
        p->mode = PNSGD_NOISE_GIVEN;
        if (!leave_for_solver(j, level_key, DP_PARAM_NOISE_SCALE, solve_for, ev) &&
            positive(j, path, level_key, &p->noise_level, 0, pb) < 0)
            goto fail;
    } else {
        p->mode = sched ? PNSGD_NOISE_SCHEDULE : PNSGD_NOISE_ONLINE;
        join(f, sizeof f, path, sched ? "noise_schedule" : "online_schedule");
        if (decode_schedule(sched ? sched : online, f, online != NULL, solve_for, ev, pb) < 0)
            goto fail;
    }
    if (positive(j, path, "lipschitz", &p->lipschitz, 0, pb) < 0 ||
        positive(j, path, "smoothness", &p->smoothness, 0, pb) < 0 ||
        positive(j, path, "strong_convexity", &p->strong_convexity, 1, pb) < 0 ||
        positive(j, path, "learning_rate", &p->learning_rate, 0, pb) < 0)
        goto fail;
    if (p->noise == PNSGD_GAUSSIAN) {
        if (positive(j, path, "diameter", &p->diameter, 0, pb) < 0)
            goto fail;
        if (json_object_get(j, "interval")) {
            join(f, sizeof f, path, "interval");
            problem_set(pb, PB_INVALID_PARAMETER, f,
                        "Gaussian noise takes the constraint set's 'diameter', not 'interval'");
            goto fail;
        }
    } else {
        json_t *iv = field(j, path, "interval", 1, pb);
        join(f, sizeof f, path, "interval");
        if (iv == NULL)
            goto fail;
        if (json_object_get(j, "diameter")) {
            problem_set(pb, PB_INVALID_PARAMETER, f,
                        "Laplace noise takes the constraint 'interval' [a, b], not 'diameter'");
            goto fail;
        }
        if (!json_is_array(iv) || json_array_size(iv) != 2 ||
            !json_is_number(json_array_get(iv, 0)) || !json_is_number(json_array_get(iv, 1))) {
            problem_set(pb, PB_WRONG_TYPE, f, "'%s' must be [a, b], two numbers", f);
            goto fail;
        }
        p->lo = json_number_value(json_array_get(iv, 0));
        p->hi = json_number_value(json_array_get(iv, 1));
    }
    if (!leave_for_solver(j, "dataset_size", DP_PARAM_DATASET_SIZE, solve_for, ev) &&
        codec_uint(j, path, "dataset_size", 1, 1, (uint64_t)MAX_EXACT_INT, &p->n, pb) < 0)
        goto fail;
    if (codec_string(j, path, "order", 1, &s, pb) < 0)
        goto fail;
    if (strcmp(s, "fixed_index") == 0)
        p->order = PNSGD_FIXED;
    else if (strcmp(s, "randomly_stopped") == 0)
        p->order = PNSGD_STOPPED;
    else if (strcmp(s, "shuffled") == 0)
        p->order = PNSGD_SHUFFLED;
    else {
        join(f, sizeof f, path, "order");
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "'%s' must be \"fixed_index\", \"randomly_stopped\" or \"shuffled\"", f);
        goto fail;
    }
    int need_index = p->order == PNSGD_FIXED;
    if (codec_uint(j, path, "index", need_index, 1, (uint64_t)MAX_EXACT_INT, &p->index, pb) < 0)
        goto fail;
    if (p->order == PNSGD_SHUFFLED && json_object_get(j, "index")) {
        join(f, sizeof f, path, "index");
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "the shuffled order has no fixed index: leave 'index' out");
        goto fail;
    }
    /* Domain checks with unknowns filled by harmless placeholders. */
    pnsgd_params probe = *p;
    if (ev->unknown == DP_PARAM_NOISE_SCALE)
        probe.noise_level = 1.0;
    if (ev->unknown == DP_PARAM_DATASET_SIZE)
        probe.n = probe.index ? probe.index : 1;
    if (ev->unknown == DP_PARAM_C1)
        probe.c1 = 1.0;
    dpb_error e = {0};
    if (pnsgd_check(&probe, &e) != DPB_OK) {
        join(f, sizeof f, path, e.field);
        problem_set(pb, PB_INVALID_PARAMETER, f, "%s", e.detail);
        goto fail;
    }
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

static dp_event *decode_proactive(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "dataset_size", "phases", "variant", NULL};
    static const char *const phase_fields[] = {"noise_multiplier", "batch_size", "rounds", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_PROACTIVE, pb);
    if (ev == NULL)
        return NULL;
    char f[96];
    uint64_t n;
    if (codec_uint(j, path, "dataset_size", 1, 1, (uint64_t)MAX_EXACT_INT, &n, pb) < 0)
        goto fail;
    ev->u.proactive.dataset_size = (double)n;
    const char *v = "corrected";
    if (codec_string(j, path, "variant", 0, &v, pb) < 0)
        goto fail;
    if (strcmp(v, "corrected") == 0)
        ev->u.proactive.variant = PRO_CORRECTED;
    else if (strcmp(v, "paper") == 0)
        ev->u.proactive.variant = PRO_PAPER;
    else {
        join(f, sizeof f, path, "variant");
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be \"corrected\" or \"paper\"", f);
        goto fail;
    }
    join(f, sizeof f, path, "phases");
    json_t *ph = field(j, path, "phases", 1, pb);
    if (ph == NULL)
        goto fail;
    if (!json_is_array(ph) || json_array_size(ph) == 0 || json_array_size(ph) > 1000) {
        problem_set(pb, json_is_array(ph) ? PB_TOO_MANY_VALUES : PB_WRONG_TYPE, f,
                    "'%s' must be a list of 1 to 1000 phases {noise_multiplier, batch_size, "
                    "rounds}",
                    f);
        goto fail;
    }
    size_t np = json_array_size(ph);
    ev->u.proactive.sigma = calloc(np, sizeof(double));
    ev->u.proactive.batch = calloc(np, sizeof(double));
    ev->u.proactive.rounds = calloc(np, sizeof(double));
    if (!ev->u.proactive.sigma || !ev->u.proactive.batch || !ev->u.proactive.rounds) {
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    ev->u.proactive.nphases = (int)np;
    for (size_t i = 0; i < np; i++) {
        char fi[96];
        snprintf(fi, sizeof fi, "%s[%zu]", f, i);
        json_t *x = json_array_get(ph, i);
        uint64_t b, t;
        double sg;
        if (!json_is_object(x)) {
            problem_set(pb, PB_WRONG_TYPE, fi, "'%s' must be an object", fi);
            goto fail;
        }
        if (codec_only_fields(x, fi, phase_fields, pb) < 0 ||
            positive(x, fi, "noise_multiplier", &sg, 0, pb) < 0 ||
            codec_uint(x, fi, "batch_size", 1, 1, n, &b, pb) < 0 ||
            codec_uint(x, fi, "rounds", 1, 1, (uint64_t)MAX_EXACT_INT, &t, pb) < 0)
            goto fail;
        ev->u.proactive.sigma[i] = sg;
        ev->u.proactive.batch[i] = (double)b;
        ev->u.proactive.rounds[i] = (double)t;
    }
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

static dp_event *decode_sgld(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {
        "class_name", "clipping_norm", "batch_size", "dataset_size",
        "step_size",  "steps",         "sampling",   NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_SGLD, pb);
    if (ev == NULL)
        return NULL;
    sgld_params *p = &ev->u.sgld;
    char f[96];
    json_t *c = json_object_get(j, "clipping_norm");
    p->clipped = c != NULL && !json_is_null(c);
    if (p->clipped && positive(j, path, "clipping_norm", &p->clipping_norm, 0, pb) < 0)
        goto fail;
    uint64_t b, n;
    if (codec_uint(j, path, "dataset_size", 1, 1, (uint64_t)MAX_EXACT_INT, &n, pb) < 0 ||
        codec_uint(j, path, "batch_size", 1, 1, n, &b, pb) < 0 ||
        positive(j, path, "step_size", &p->step_size, 0, pb) < 0 ||
        codec_uint(j, path, "steps", 1, 1, (uint64_t)MAX_EXACT_INT, &p->steps, pb) < 0)
        goto fail;
    p->batch_size = (double)b;
    p->dataset_size = (double)n;
    const char *s;
    if (codec_string(j, path, "sampling", 1, &s, pb) < 0)
        goto fail;
    if (strcmp(s, "poisson") == 0)
        p->sampling = SGLD_POISSON;
    else if (strcmp(s, "cyclic") == 0)
        p->sampling = SGLD_CYCLIC;
    else {
        join(f, sizeof f, path, "sampling");
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be \"poisson\" or \"cyclic\"", f);
        goto fail;
    }
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

/* ---- fixed-size and truncated sampling, tree aggregation (event kinds 21..28) ------------ */

/* Largest population (source_dataset_size, dataset_size) and step list accepted. */
#define MAX_POPULATION 1000000000ULL
#define MAX_TREE_STEPS 10000

/* SampledWithReplacementDpEvent, SampledWithoutReplacementDpEvent: dp_accounting's fields
 * source_dataset_size, sample_size (at most the dataset size) and event. */
static dp_event *decode_fixed_sample(json_t *j, const char *path, dp_event_kind k,
                                     dp_param solve_for, int depth, problem *pb)
{
    static const char *const allowed[] = {"class_name", "source_dataset_size", "sample_size",
                                          "event", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(k, pb);
    if (ev == NULL)
        return NULL;
    char f[96];
    if (codec_uint(j, path, "source_dataset_size", 1, 1, MAX_POPULATION, &ev->u.fixed.population,
                   pb) < 0 ||
        codec_uint(j, path, "sample_size", 1, 0, MAX_POPULATION, &ev->u.fixed.sample_size, pb) < 0)
        goto fail;
    if (ev->u.fixed.sample_size > ev->u.fixed.population) {
        join(f, sizeof f, path, "sample_size");
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "'%s' (%llu) must be at most source_dataset_size (%llu)", f,
                    (unsigned long long)ev->u.fixed.sample_size,
                    (unsigned long long)ev->u.fixed.population);
        goto fail;
    }
    ev->u.fixed.event = decode_child(j, path, solve_for, depth, pb);
    if (ev->u.fixed.event == NULL)
        goto fail;
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

/* A noise multiplier in (0, 1e6] that the solver cannot be asked for. */
static int decode_fixed_noise(json_t *j, const char *path, double *out, problem *pb)
{
    if (codec_number(j, path, "noise_multiplier", 1, out, pb) < 0)
        return -1;
    if (!(*out > 0.0 && *out <= 1e6)) {
        char f[96], num[DPB_NUM_MAX];
        join(f, sizeof f, path, "noise_multiplier");
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "'%s' must be greater than 0 and at most 1e6 (got %s)", f,
                    dpb_num_str(*out, num));
        return -1;
    }
    return 0;
}

/* SingleEpochTreeAggregationDpEvent: noise_multiplier and step_counts (a whole number or a
 * list of 1 to 10000 of them). */
static dp_event *decode_tree(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_multiplier", "step_counts", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_TREE_AGGREGATION, pb);
    if (ev == NULL)
        return NULL;
    char f[96];
    join(f, sizeof f, path, "step_counts");
    if (decode_fixed_noise(j, path, &ev->u.tree.noise_multiplier, pb) < 0)
        goto fail;
    json_t *sc = field(j, path, "step_counts", 1, pb);
    if (sc == NULL)
        goto fail;
    size_t n = json_is_array(sc) ? json_array_size(sc) : 1;
    if (json_is_array(sc) && (n == 0 || n > MAX_TREE_STEPS)) {
        problem_set(pb, PB_TOO_MANY_VALUES, f, "'%s' must hold between 1 and %d step counts", f,
                    MAX_TREE_STEPS);
        goto fail;
    }
    ev->u.tree.scalar = !json_is_array(sc);
    ev->u.tree.steps = calloc(n, sizeof(uint64_t));
    if (ev->u.tree.steps == NULL) {
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        /* each element goes through codec_uint as a one-member object */
        json_t *one = json_pack("{s:O}", "v", ev->u.tree.scalar ? sc : json_array_get(sc, i));
        char fi[96];
        if (ev->u.tree.scalar)
            snprintf(fi, sizeof fi, "%s", path);
        else
            snprintf(fi, sizeof fi, "%s[%zu]", f, i);
        int r =
            one ? codec_uint(one, "", "v", 1, 0, (uint64_t)MAX_EXACT_INT, &ev->u.tree.steps[i], pb)
                : -1;
        json_decref(one);
        if (r < 0) {
            if (one == NULL)
                problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
            else { /* name the real field, not the scratch one */
                problem_code c = pb->code;
                pb->code = PB_NONE;
                problem_set(pb, c, ev->u.tree.scalar ? f : fi,
                            "'%s' must be a whole number of steps >= 0 (or a list of them)",
                            ev->u.tree.scalar ? f : fi);
            }
            goto fail;
        }
        ev->u.tree.nsteps++;
    }
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

/* TruncatedSubsampledGaussianDpEvent: dataset_size, sampling_probability,
 * truncated_batch_size, noise_multiplier. */
static dp_event *decode_truncated(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name",           "dataset_size",
                                          "sampling_probability", "truncated_batch_size",
                                          "noise_multiplier",     NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_TRUNCATED_GAUSSIAN, pb);
    if (ev == NULL)
        return NULL;
    double q;
    if (codec_uint(j, path, "dataset_size", 1, 1, MAX_POPULATION, &ev->u.truncated.dataset_size,
                   pb) < 0 ||
        codec_number(j, path, "sampling_probability", 1, &q, pb) < 0)
        goto fail;
    if (!(q >= 0.0 && q <= 1.0)) {
        char f[96], num[DPB_NUM_MAX];
        join(f, sizeof f, path, "sampling_probability");
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must lie in [0, 1] (got %s)", f,
                    dpb_num_str(q, num));
        goto fail;
    }
    ev->u.truncated.sampling_probability = q;
    if (codec_uint(j, path, "truncated_batch_size", 1, 0, (uint64_t)MAX_EXACT_INT,
                   &ev->u.truncated.batch_size, pb) < 0 ||
        decode_fixed_noise(j, path, &ev->u.truncated.noise_multiplier, pb) < 0)
        goto fail;
    return ev;
fail:
    dp_event_free(ev);
    return NULL;
}

/* The JSON of kinds 21..28 (codec_encode_event). */
static json_t *encode_sampling(const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
        return json_pack("{s:s, s:o, s:o, s:o}", "class_name",
                         ev->kind == DP_EV_SAMPLED_WITH_REPLACEMENT
                             ? "SampledWithReplacementDpEvent"
                             : "SampledWithoutReplacementDpEvent",
                         "source_dataset_size", codec_uint_json(ev->u.fixed.population),
                         "sample_size", codec_uint_json(ev->u.fixed.sample_size), "event",
                         codec_encode_event(ev->u.fixed.event));
    case DP_EV_TREE_AGGREGATION: {
        json_t *sc;
        if (ev->u.tree.scalar) {
            sc = codec_uint_json(ev->u.tree.steps[0]);
        } else {
            sc = json_array();
            for (size_t i = 0; i < ev->u.tree.nsteps; i++)
                json_array_append_new(sc, codec_uint_json(ev->u.tree.steps[i]));
        }
        return json_pack("{s:s, s:o, s:o}", "class_name", "SingleEpochTreeAggregationDpEvent",
                         "noise_multiplier", codec_real(ev->u.tree.noise_multiplier), "step_counts",
                         sc);
    }
    case DP_EV_TRUNCATED_GAUSSIAN:
        return json_pack("{s:s, s:o, s:o, s:o, s:o}", "class_name",
                         "TruncatedSubsampledGaussianDpEvent", "dataset_size",
                         codec_uint_json(ev->u.truncated.dataset_size), "sampling_probability",
                         codec_real(ev->u.truncated.sampling_probability), "truncated_batch_size",
                         codec_uint_json(ev->u.truncated.batch_size), "noise_multiplier",
                         codec_real(ev->u.truncated.noise_multiplier));
    default:
        return json_null();
    }
}

static dp_event *decode_empty(json_t *j, const char *path, dp_event_kind k, problem *pb)
{
    static const char *const allowed[] = {"class_name", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    return new_event(k, pb);
}

/* ---- issue 16: dp_accounting's mechanism events ----------------------------------------- */

/* A number field in [lo, hi] (the string "infinite" too where allow_inf); absent: 0 and *out
 * left alone (required: 400 missing_field). */
static int bounded(json_t *j, const char *path, const char *key, int required, double lo, double hi,
                   int allow_inf, double *out, problem *pb)
{
    json_t *v = field(j, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    char f[96], num[DPB_NUM_MAX];
    join(f, sizeof f, path, key);
    double x;
    if (number_or_infinite(v, f, allow_inf, &x, pb) < 0)
        return -1;
    if (!(x >= lo && (x <= hi || (allow_inf && isinf(x))))) {
        problem_set(pb, isfinite(x) || allow_inf ? PB_INVALID_PARAMETER : PB_NUMBER_OUT_OF_RANGE, f,
                    "'%s' must lie in [%g, %g]%s (got %s)", f, lo, hi,
                    allow_inf ? " or be \"infinite\"" : "", dpb_num_str(x, num));
        return -1;
    }
    *out = x;
    return 1;
}

static dp_event *decode_rr(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_parameter", "num_buckets", NULL};
    double p;
    uint64_t k;
    if (codec_only_fields(j, path, allowed, pb) < 0 ||
        bounded(j, path, "noise_parameter", 1, 0.0, 1.0, 0, &p, pb) < 0 ||
        codec_uint(j, path, "num_buckets", 1, 1, (uint64_t)MAX_EXACT_INT, &k, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_RANDOMIZED_RESPONSE, pb);
    if (ev) {
        ev->u.rr.noise_parameter = p;
        ev->u.rr.num_buckets = k;
    }
    return ev;
}

static dp_event *decode_dgauss(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "sigma", "sensitivity", "dimension", NULL};
    double sigma, sens = 1.0;
    uint64_t dim = 0;
    if (codec_only_fields(j, path, allowed, pb) < 0 ||
        bounded(j, path, "sigma", 1, 0.0, 1e6, 0, &sigma, pb) < 0 ||
        bounded(j, path, "sensitivity", 0, 1e-6, 1e6, 0, &sens, pb) < 0)
        return NULL;
    json_t *d = json_object_get(j, "dimension");
    if (d && !json_is_null(d) &&
        codec_uint(j, path, "dimension", 1, 1, (uint64_t)MAX_EXACT_INT, &dim, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_DISCRETE_GAUSSIAN, pb);
    if (ev) {
        ev->u.dgauss.sigma = sigma;
        ev->u.dgauss.sensitivity = sens;
        ev->u.dgauss.dimension = dim;
    }
    return ev;
}

static dp_event *decode_dlap(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_parameter", "sensitivity", NULL};
    double a;
    uint64_t d;
    if (codec_only_fields(j, path, allowed, pb) < 0 ||
        bounded(j, path, "noise_parameter", 1, 0.0, 1e6, 0, &a, pb) < 0 ||
        codec_uint(j, path, "sensitivity", 1, 0, 1000000, &d, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_DISCRETE_LAPLACE, pb);
    if (ev) {
        ev->u.dlap.noise_parameter = a;
        ev->u.dlap.sensitivity = d;
    }
    return ev;
}

static dp_event *decode_pure(json_t *j, const char *path, dp_event_kind k, problem *pb)
{
    static const char *const allowed[] = {"class_name", "epsilon", NULL};
    double e;
    if (codec_only_fields(j, path, allowed, pb) < 0 ||
        bounded(j, path, "epsilon", 1, 0.0, 1e4, 0, &e, pb) < 0)
        return NULL;
    dp_event *ev = new_event(k, pb);
    if (ev)
        ev->u.pure.epsilon = e;
    return ev;
}

static dp_event *decode_zcdp(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "rho", "xi", NULL};
    double rho, xi = 0.0;
    if (codec_only_fields(j, path, allowed, pb) < 0 ||
        bounded(j, path, "rho", 1, 0.0, 1e6, 0, &rho, pb) < 0 ||
        bounded(j, path, "xi", 0, 0.0, 1e6, 0, &xi, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_ZCDP, pb);
    if (ev) {
        ev->u.zcdp.rho = rho;
        ev->u.zcdp.xi = xi;
    }
    return ev;
}

/* A list of 1 to 1000 numbers in [lo, hi]. */
static double *number_array(json_t *j, const char *path, const char *key, double lo, double hi,
                            size_t *n, problem *pb)
{
    char f[96];
    join(f, sizeof f, path, key);
    json_t *a = field(j, path, key, 1, pb);
    if (a == NULL)
        return NULL;
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 1000) {
        problem_set(pb, json_is_array(a) ? PB_TOO_MANY_VALUES : PB_WRONG_TYPE, f,
                    "'%s' must be a list of 1 to 1000 numbers", f);
        return NULL;
    }
    *n = json_array_size(a);
    double *v = malloc(*n * sizeof *v);
    if (v == NULL) {
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        char fi[112], num[DPB_NUM_MAX];
        snprintf(fi, sizeof fi, "%s[%zu]", f, i);
        if (number_or_infinite(json_array_get(a, i), fi, 0, &v[i], pb) < 0) {
            free(v);
            return NULL;
        }
        if (!(v[i] >= lo && v[i] <= hi)) {
            problem_set(pb, PB_INVALID_PARAMETER, fi, "'%s' must lie in [%g, %g] (got %s)", fi, lo,
                        hi, dpb_num_str(v[i], num));
            free(v);
            return NULL;
        }
    }
    return v;
}

static dp_event *decode_mog(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "standard_deviation", "sensitivities",
                                          "sampling_probs", NULL};
    double sigma;
    size_t nc = 0, np = 0;
    if (codec_only_fields(j, path, allowed, pb) < 0 ||
        bounded(j, path, "standard_deviation", 1, 0.0, 1e6, 0, &sigma, pb) < 0)
        return NULL;
    double *c = number_array(j, path, "sensitivities", 0.0, 1e6, &nc, pb);
    if (c == NULL)
        return NULL;
    double *p = number_array(j, path, "sampling_probs", 0.0, 1.0, &np, pb);
    if (p == NULL) {
        free(c);
        return NULL;
    }
    char f[96];
    join(f, sizeof f, path, "sampling_probs");
    double sum = 0.0;
    for (size_t i = 0; i < np; i++)
        sum += p[i];
    if (np != nc || !(fabs(sum - 1.0) <= 1e-9)) {
        char num[DPB_NUM_MAX];
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    np != nc ? "'%s' must have one probability per sensitivity"
                             : "'%s' must sum to 1 (within 1e-9; got %s)",
                    f, dpb_num_str(sum, num));
        free(c);
        free(p);
        return NULL;
    }
    /* kept as given (the echo and the log hold the caller's numbers); the accountant divides
     * by the sum */
    dp_event *ev = new_event(DP_EV_MIXTURE_GAUSSIANS, pb);
    if (ev == NULL) {
        free(c);
        free(p);
        return NULL;
    }
    ev->u.mog.sigma = sigma;
    ev->u.mog.n = nc;
    ev->u.mog.c = c;
    ev->u.mog.p = p;
    return ev;
}

static dp_event *decode_rs(json_t *j, const char *path, dp_param solve_for, int depth, problem *pb)
{
    static const char *const allowed[] = {"class_name", "event", "mean", "shape", NULL};
    double mean, shape;
    if (codec_only_fields(j, path, allowed, pb) < 0 ||
        bounded(j, path, "mean", 1, 1.0, 1e15, 0, &mean, pb) < 0 ||
        bounded(j, path, "shape", 1, 0.0, 1e6, 1, &shape, pb) < 0)
        return NULL;
    dp_event *ev = new_event(DP_EV_REPEAT_AND_SELECT, pb);
    if (ev == NULL)
        return NULL;
    ev->u.rs.mean = mean;
    ev->u.rs.shape = shape;
    ev->u.rs.event = decode_child(j, path, solve_for, depth, pb);
    if (ev->u.rs.event == NULL) {
        dp_event_free(ev);
        return NULL;
    }
    return ev;
}

/* 1 when cls is one of these classes (*out: the event, or NULL with pb set), else 0. */
static int decode_mech(json_t *j, const char *path, const char *cls, dp_param solve_for, int depth,
                       dp_event **out, problem *pb)
{
    if (strcmp(cls, "RandomizedResponseDpEvent") == 0)
        *out = decode_rr(j, path, pb);
    else if (strcmp(cls, "DiscreteGaussianDpEvent") == 0)
        *out = decode_dgauss(j, path, pb);
    else if (strcmp(cls, "DiscreteLaplaceDpEvent") == 0)
        *out = decode_dlap(j, path, pb);
    else if (strcmp(cls, "ExponentialMechanismDpEvent") == 0)
        *out = decode_pure(j, path, DP_EV_EXPONENTIAL, pb);
    else if (strcmp(cls, "PermuteAndFlipDpEvent") == 0)
        *out = decode_pure(j, path, DP_EV_PERMUTE_AND_FLIP, pb);
    else if (strcmp(cls, "ZCDpEvent") == 0)
        *out = decode_zcdp(j, path, pb);
    else if (strcmp(cls, "MixtureOfGaussiansDpEvent") == 0)
        *out = decode_mog(j, path, pb);
    else if (strcmp(cls, "RepeatAndSelectDpEvent") == 0)
        *out = decode_rs(j, path, solve_for, depth, pb);
    else
        return 0;
    return 1;
}

static dp_event *decode(json_t *j, const char *path, dp_param solve_for, int depth, problem *pb)
{
    if (depth > CODEC_MAX_DEPTH) {
        problem_set(pb, PB_INVALID_PARAMETER, path, "events may nest at most %d deep",
                    CODEC_MAX_DEPTH);
        return NULL;
    }
    if (!json_is_object(j)) {
        problem_set(pb, PB_WRONG_TYPE, path, "'%s' must be an event object with a class_name",
                    path);
        return NULL;
    }
    const char *cls;
    if (codec_string(j, path, "class_name", 1, &cls, pb) < 0)
        return NULL;
    if (strcmp(cls, "ShuffledDpSgdEpochDpEvent") == 0)
        return decode_shuffled(j, path, solve_for, pb);
    if (strcmp(cls, "SelfComposedDpEvent") == 0)
        return decode_self(j, path, solve_for, depth, pb);
    if (strcmp(cls, "ComposedDpEvent") == 0)
        return decode_composed(j, path, solve_for, depth, pb);
    if (strcmp(cls, "GaussianDpEvent") == 0)
        return decode_noise_event(j, path, DP_EV_GAUSSIAN, solve_for, pb);
    if (strcmp(cls, "LaplaceDpEvent") == 0)
        return decode_noise_event(j, path, DP_EV_LAPLACE, solve_for, pb);
    if (strcmp(cls, "EpsilonDeltaDpEvent") == 0)
        return decode_eps_delta(j, path, pb);
    if (strcmp(cls, "PoissonSampledDpEvent") == 0)
        return decode_poisson(j, path, solve_for, depth, pb);
    if (strcmp(cls, "NoOpDpEvent") == 0)
        return decode_empty(j, path, DP_EV_NO_OP, pb);
    if (strcmp(cls, "ProjectedNoisySgdDpEvent") == 0)
        return decode_pnsgd(j, path, solve_for, pb);
    if (strcmp(cls, "ProactiveDpSgdDpEvent") == 0)
        return decode_proactive(j, path, pb);
    if (strcmp(cls, "SgldDpEvent") == 0)
        return decode_sgld(j, path, pb);
    if (strcmp(cls, "NonPrivateDpEvent") == 0)
        return decode_empty(j, path, DP_EV_NON_PRIVATE, pb);
    /* kinds 21..28 */
    if (strcmp(cls, "SampledWithReplacementDpEvent") == 0)
        return decode_fixed_sample(j, path, DP_EV_SAMPLED_WITH_REPLACEMENT, solve_for, depth, pb);
    if (strcmp(cls, "SampledWithoutReplacementDpEvent") == 0)
        return decode_fixed_sample(j, path, DP_EV_SAMPLED_WITHOUT_REPLACEMENT, solve_for, depth,
                                   pb);
    if (strcmp(cls, "SingleEpochTreeAggregationDpEvent") == 0)
        return decode_tree(j, path, pb);
    if (strcmp(cls, "TruncatedSubsampledGaussianDpEvent") == 0)
        return decode_truncated(j, path, pb);
    dp_event *mech = NULL;
    if (decode_mech(j, path, cls, solve_for, depth, &mech, pb))
        return mech;
    char f[96];
    join(f, sizeof f, path, "class_name");
    for (const char *const *k = KNOWN_UNSUPPORTED; *k; k++)
        if (strcmp(cls, *k) == 0) {
            problem_set(pb, PB_UNSUPPORTED, f,
                        "%s is a dp_accounting event this service does not account yet; "
                        "GET /v1/accountants lists the supported ones",
                        cls);
            return NULL;
        }
    problem_set(pb, PB_UNKNOWN_EVENT, f,
                "unknown event class '%.60s'; GET /v1/accountants lists the supported ones", cls);
    return NULL;
}

dp_event *codec_event(json_t *j, const char *path, dp_param solve_for, problem *pb)
{
    if (j == NULL) {
        problem_set(pb, PB_MISSING_FIELD, path, "'%s' is required", path);
        return NULL;
    }
    dp_event *ev = decode(j, path, solve_for, 0, pb);
    if (ev == NULL || solve_for == DP_PARAM_NONE)
        return ev;
    int n;
    dp_event_find_unknown(ev, &n);
    if (n != 1) {
        problem_set(pb, PB_INVALID_PARAMETER, "solve_for",
                    n == 0 ? "leave '%s' out of the event (or set it to null): the solver "
                             "fills it in"
                           : "'%s' is left out of more than one event: leave it out of exactly "
                             "one",
                    dp_param_name(solve_for));
        dp_event_free(ev);
        return NULL;
    }
    return ev;
}

/* ---- encoders ------------------------------------------------------------------------------ */

json_t *codec_real(double x)
{
    if (isinf(x))
        return json_string(x > 0 ? "infinite" : "-infinite");
    if (isnan(x))
        return json_null();
    return json_real(x);
}

void codec_write_real(jsonout_w *w, double x)
{
    if (isinf(x))
        jsonout_str(w, x > 0 ? "infinite" : "-infinite");
    else if (isnan(x))
        jsonout_tree(w, json_null());
    else
        jsonout_realv(w, x);
}

void codec_write_uint(jsonout_w *w, uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        jsonout_int(w, (long long)v);
    else
        jsonout_realv(w, (double)v);
}

json_t *codec_uint_json(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        return json_integer((json_int_t)v);
    return json_real((double)v);
}

/* ---- issue 16: dp_accounting's mechanism events ---- */
static json_t *real_array(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, codec_real(v[i]));
    return a;
}

static json_t *encode_mech(const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_RANDOMIZED_RESPONSE:
        return json_pack("{s:s, s:o, s:o}", "class_name", "RandomizedResponseDpEvent",
                         "noise_parameter", codec_real(ev->u.rr.noise_parameter), "num_buckets",
                         codec_uint_json(ev->u.rr.num_buckets));
    case DP_EV_DISCRETE_GAUSSIAN:
        return json_pack("{s:s, s:o, s:o, s:o}", "class_name", "DiscreteGaussianDpEvent", "sigma",
                         codec_real(ev->u.dgauss.sigma), "sensitivity",
                         codec_real(ev->u.dgauss.sensitivity), "dimension",
                         ev->u.dgauss.dimension ? codec_uint_json(ev->u.dgauss.dimension)
                                                : json_null());
    case DP_EV_DISCRETE_LAPLACE:
        return json_pack("{s:s, s:o, s:o}", "class_name", "DiscreteLaplaceDpEvent",
                         "noise_parameter", codec_real(ev->u.dlap.noise_parameter), "sensitivity",
                         codec_uint_json(ev->u.dlap.sensitivity));
    case DP_EV_EXPONENTIAL:
    case DP_EV_PERMUTE_AND_FLIP:
        return json_pack("{s:s, s:o}", "class_name",
                         ev->kind == DP_EV_EXPONENTIAL ? "ExponentialMechanismDpEvent"
                                                       : "PermuteAndFlipDpEvent",
                         "epsilon", codec_real(ev->u.pure.epsilon));
    case DP_EV_ZCDP:
        return json_pack("{s:s, s:o, s:o}", "class_name", "ZCDpEvent", "rho",
                         codec_real(ev->u.zcdp.rho), "xi", codec_real(ev->u.zcdp.xi));
    case DP_EV_MIXTURE_GAUSSIANS:
        return json_pack("{s:s, s:o, s:o, s:o}", "class_name", "MixtureOfGaussiansDpEvent",
                         "standard_deviation", codec_real(ev->u.mog.sigma), "sensitivities",
                         real_array(ev->u.mog.c, ev->u.mog.n), "sampling_probs",
                         real_array(ev->u.mog.p, ev->u.mog.n));
    case DP_EV_REPEAT_AND_SELECT:
        return json_pack("{s:s, s:o, s:o, s:o}", "class_name", "RepeatAndSelectDpEvent", "event",
                         codec_encode_event(ev->u.rs.event), "mean", codec_real(ev->u.rs.mean),
                         "shape", codec_real(ev->u.rs.shape));
    default:
        return json_null();
    }
}

json_t *codec_encode_event(const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_SHUFFLED_EPOCH:
        return json_pack("{s:s, s:o, s:o}", "class_name", "ShuffledDpSgdEpochDpEvent",
                         "noise_multiplier", codec_real(ev->u.shuffled.noise_multiplier), "rounds",
                         codec_uint_json(ev->u.shuffled.rounds));
    case DP_EV_SELF_COMPOSED:
        return json_pack("{s:s, s:o, s:o}", "class_name", "SelfComposedDpEvent", "event",
                         codec_encode_event(ev->u.self.event), "count",
                         codec_uint_json(ev->u.self.count));
    case DP_EV_GAUSSIAN:
    case DP_EV_LAPLACE:
        return json_pack("{s:s, s:o}", "class_name",
                         ev->kind == DP_EV_GAUSSIAN ? "GaussianDpEvent" : "LaplaceDpEvent",
                         "noise_multiplier", codec_real(ev->u.noise.noise_multiplier));
    case DP_EV_EPSILON_DELTA:
        return json_pack("{s:s, s:o, s:o}", "class_name", "EpsilonDeltaDpEvent", "epsilon",
                         codec_real(ev->u.epsdelta.epsilon), "delta",
                         codec_real(ev->u.epsdelta.delta));
    case DP_EV_POISSON_SAMPLED:
        return json_pack("{s:s, s:o, s:o}", "class_name", "PoissonSampledDpEvent",
                         "sampling_probability", codec_real(ev->u.sampled.sampling_probability),
                         "event", codec_encode_event(ev->u.sampled.event));
    case DP_EV_NO_OP:
        return json_pack("{s:s}", "class_name", "NoOpDpEvent");
    case DP_EV_PNSGD: {
        const pnsgd_params *p = &ev->u.pnsgd;
        static const char *const orders[] = {"fixed_index", "randomly_stopped", "shuffled"};
        int gauss = p->noise == PNSGD_GAUSSIAN;
        json_t *o = json_pack(
            "{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:s}", "class_name", "ProjectedNoisySgdDpEvent",
            "noise", gauss ? "gaussian" : "laplace", "lipschitz", codec_real(p->lipschitz),
            "smoothness", codec_real(p->smoothness), "strong_convexity",
            codec_real(p->strong_convexity), "learning_rate", codec_real(p->learning_rate),
            "dataset_size", codec_uint_json(p->n), "order", orders[p->order]);
        if (o == NULL)
            return NULL;
        if (gauss)
            json_object_set_new(o, "diameter", codec_real(p->diameter));
        else
            json_object_set_new(o, "interval",
                                json_pack("[o, o]", codec_real(p->lo), codec_real(p->hi)));
        if (p->mode == PNSGD_NOISE_GIVEN)
            json_object_set_new(o, gauss ? "noise_std" : "laplace_scale",
                                codec_real(p->noise_level));
        else if (p->mode == PNSGD_NOISE_SCHEDULE)
            json_object_set_new(
                o, "noise_schedule",
                json_pack("{s:o, s:o}", "c1", codec_real(p->c1), "c2", codec_real(p->c2)));
        else
            json_object_set_new(o, "online_schedule",
                                json_pack("{s:o, s:o, s:o}", "alpha", codec_real(p->alpha), "c1",
                                          codec_real(p->c1), "c2", codec_real(p->c2)));
        if (p->index)
            json_object_set_new(o, "index", codec_uint_json(p->index));
        return o;
    }
    case DP_EV_NON_PRIVATE:
        return json_pack("{s:s}", "class_name", "NonPrivateDpEvent");
    case DP_EV_PROACTIVE: {
        json_t *ph = json_array();
        for (int i = 0; i < ev->u.proactive.nphases; i++)
            json_array_append_new(
                ph, json_pack("{s:o, s:o, s:o}", "noise_multiplier",
                              codec_real(ev->u.proactive.sigma[i]), "batch_size",
                              codec_uint_json((uint64_t)ev->u.proactive.batch[i]), "rounds",
                              codec_uint_json((uint64_t)ev->u.proactive.rounds[i])));
        return json_pack("{s:s, s:o, s:o, s:s}", "class_name", "ProactiveDpSgdDpEvent",
                         "dataset_size", codec_uint_json((uint64_t)ev->u.proactive.dataset_size),
                         "phases", ph, "variant",
                         ev->u.proactive.variant == PRO_PAPER ? "paper" : "corrected");
    }
    case DP_EV_SGLD: {
        const sgld_params *p = &ev->u.sgld;
        json_t *o =
            json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}", "class_name", "SgldDpEvent", "batch_size",
                      codec_uint_json((uint64_t)p->batch_size), "dataset_size",
                      codec_uint_json((uint64_t)p->dataset_size), "step_size",
                      codec_real(p->step_size), "steps", codec_uint_json(p->steps), "sampling",
                      p->sampling == SGLD_POISSON ? "poisson" : "cyclic");
        if (o && p->clipped)
            json_object_set_new(o, "clipping_norm", codec_real(p->clipping_norm));
        return o;
    }
    case DP_EV_COMPOSED: {
        json_t *arr = json_array();
        for (size_t i = 0; i < ev->u.composed.n; i++)
            json_array_append_new(arr, codec_encode_event(ev->u.composed.events[i]));
        return json_pack("{s:s, s:o}", "class_name", "ComposedDpEvent", "events", arr);
    }
    case DP_EV_SAMPLED_WITH_REPLACEMENT:
    case DP_EV_SAMPLED_WITHOUT_REPLACEMENT:
    case DP_EV_TREE_AGGREGATION:
    case DP_EV_TRUNCATED_GAUSSIAN:
        return encode_sampling(ev);
    default:
        return encode_mech(ev);
    }
    return json_null();
}

json_t *codec_conditions(const dp_report *rep)
{
    /* built field by field, not by json_pack (which parses its format on every call): this
     * is in every compute answer; names and statements are core's own ASCII literals */
    json_t *arr = json_array();
    for (int i = 0; i < rep->ncond; i++) {
        const dp_condition *c = &rep->cond[i];
        json_t *o = json_object();
        json_object_set_new_nocheck(o, "name", json_string_nocheck(c->name));
        json_object_set_new_nocheck(o, "statement", json_string_nocheck(c->statement));
        json_object_set_new_nocheck(o, "holds", json_boolean(c->holds));
        json_object_set_new_nocheck(o, "lhs", codec_real(c->lhs));
        json_object_set_new_nocheck(o, "rhs", codec_real(c->rhs));
        json_array_append_new(arr, o);
    }
    return arr;
}

void codec_put_report(json_t *obj, const dp_report *rep)
{
    json_object_set_new(obj, "accountant", json_string(rep->accountant ? rep->accountant : ""));
    json_object_set_new(obj, "guarantee", json_string(dp_guarantee_name(rep->guarantee)));
    json_object_set_new(obj, "reference", json_string(rep->reference ? rep->reference : ""));
    json_object_set_new(obj, "valid", json_boolean(dp_report_all_hold(rep)));
    json_object_set_new(obj, "conditions", codec_conditions(rep));
    json_t *w = json_array();
    for (int i = 0; i < rep->nwarn; i++)
        json_array_append_new(w, json_string(rep->warning[i]));
    json_object_set_new(obj, "warnings", w);
}

void codec_write_report(jsonout_w *w, const dp_report *rep)
{
    jsonout_key(w, "accountant");
    jsonout_str(w, rep->accountant ? rep->accountant : "");
    jsonout_key(w, "guarantee");
    jsonout_str(w, dp_guarantee_name(rep->guarantee));
    jsonout_key(w, "reference");
    jsonout_str(w, rep->reference ? rep->reference : "");
    jsonout_key(w, "valid");
    jsonout_bool(w, dp_report_all_hold(rep));
    jsonout_key(w, "conditions");
    jsonout_open(w, '[');
    for (int i = 0; i < rep->ncond; i++) {
        const dp_condition *c = &rep->cond[i];
        jsonout_open(w, '{');
        jsonout_key(w, "name");
        jsonout_str(w, c->name);
        jsonout_key(w, "statement");
        jsonout_str(w, c->statement);
        jsonout_key(w, "holds");
        jsonout_bool(w, c->holds);
        jsonout_key(w, "lhs");
        codec_write_real(w, c->lhs);
        jsonout_key(w, "rhs");
        codec_write_real(w, c->rhs);
        jsonout_close(w, '}');
    }
    jsonout_close(w, ']');
    jsonout_key(w, "warnings");
    jsonout_open(w, '[');
    for (int i = 0; i < rep->nwarn; i++)
        jsonout_str(w, rep->warning[i]);
    jsonout_close(w, ']');
}

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
