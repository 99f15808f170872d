/*
 * codec_event.c - an event's JSON decoded into a dp_event tree (codec_event, codec.h): one
 * decoder per dp_accounting event class, each checking its fields' types and domains and
 * naming a bad field by its dotted path ("event.event.rounds"). Calls down into the field
 * primitives (codec.c through codec.h and codec_field.h), core/dp's event constructors and
 * checks, and problem; nothing calls back up into it but the handlers.
 */
#include "codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/common/numfmt.h"
#include "codec_field.h"

#define MAX_EXACT_INT CODEC_MAX_EXACT_INT

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
    codec_join(f, sizeof f, path, "event");
    json_t *inner = codec_field(j, path, "event", 1, pb);
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
        codec_join(f, sizeof f, path, "noise_multiplier");
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
    codec_join(f, sizeof f, path, "events");
    json_t *arr = codec_field(j, path, "events", 1, pb);
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
        codec_join(f, sizeof f, path, "epsilon");
        char num[DPB_NUM_MAX];
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must lie in [0, 1e4] (got %s)", f,
                    dpb_num_str(e, num));
        return NULL;
    }
    if (!(d >= 0.0 && d <= 1.0)) {
        codec_join(f, sizeof f, path, "delta");
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
            codec_join(f, sizeof f, path, "sampling_probability");
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
        codec_join(f, sizeof f, path, key);
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
        codec_join(f, sizeof f, path, "noise");
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be \"gaussian\" or \"laplace\"", f);
        goto fail;
    }
    const char *level_key = p->noise == PNSGD_GAUSSIAN ? "noise_std" : "laplace_scale";
    const char *other_key = p->noise == PNSGD_GAUSSIAN ? "laplace_scale" : "noise_std";
    if (json_object_get(j, other_key)) {
        codec_join(f, sizeof f, path, other_key);
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
        codec_join(f, sizeof f, path, sched ? "noise_schedule" : "online_schedule");
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
            codec_join(f, sizeof f, path, "interval");
            problem_set(pb, PB_INVALID_PARAMETER, f,
                        "Gaussian noise takes the constraint set's 'diameter', not 'interval'");
            goto fail;
        }
    } else {
        json_t *iv = codec_field(j, path, "interval", 1, pb);
        codec_join(f, sizeof f, path, "interval");
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
        codec_join(f, sizeof f, path, "order");
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "'%s' must be \"fixed_index\", \"randomly_stopped\" or \"shuffled\"", f);
        goto fail;
    }
    int need_index = p->order == PNSGD_FIXED;
    if (codec_uint(j, path, "index", need_index, 1, (uint64_t)MAX_EXACT_INT, &p->index, pb) < 0)
        goto fail;
    if (p->order == PNSGD_SHUFFLED && json_object_get(j, "index")) {
        codec_join(f, sizeof f, path, "index");
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
        codec_join(f, sizeof f, path, e.field);
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
        codec_join(f, sizeof f, path, "variant");
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be \"corrected\" or \"paper\"", f);
        goto fail;
    }
    codec_join(f, sizeof f, path, "phases");
    json_t *ph = codec_field(j, path, "phases", 1, pb);
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
        codec_join(f, sizeof f, path, "sampling");
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
        codec_join(f, sizeof f, path, "sample_size");
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
        codec_join(f, sizeof f, path, "noise_multiplier");
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
    codec_join(f, sizeof f, path, "step_counts");
    if (decode_fixed_noise(j, path, &ev->u.tree.noise_multiplier, pb) < 0)
        goto fail;
    json_t *sc = codec_field(j, path, "step_counts", 1, pb);
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
        codec_join(f, sizeof f, path, "sampling_probability");
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
    json_t *v = codec_field(j, path, key, required, pb);
    if (v == NULL)
        return required ? -1 : 0;
    char f[96], num[DPB_NUM_MAX];
    codec_join(f, sizeof f, path, key);
    double x;
    if (codec_number_or_inf(v, f, allow_inf, &x, pb) < 0)
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
    codec_join(f, sizeof f, path, key);
    json_t *a = codec_field(j, path, key, 1, pb);
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
        if (codec_number_or_inf(json_array_get(a, i), fi, 0, &v[i], pb) < 0) {
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
    codec_join(f, sizeof f, path, "sampling_probs");
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
    codec_join(f, sizeof f, path, "class_name");
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
