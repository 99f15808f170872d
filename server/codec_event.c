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
        problem_oom(pb);
    return ev;
}

/* A new event of kind k for the object j at path once its keys passed the allowlist (NULL
 * terminated): the opening of every decoder. Owned by the caller; NULL with pb set. */
static dp_event *begin(json_t *j, const char *path, const char *const *allowed, dp_event_kind k,
                       problem *pb)
{
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    return new_event(k, pb);
}

/* The decoders' one way out after a problem: ev (owned, partly decoded) freed; NULL. */
static dp_event *discard(dp_event *ev)
{
    dp_event_free(ev);
    return NULL;
}

/* x checked to lie above lo (lo itself allowed unless lo_open) and at most hi: 0, or -1 with
 * invalid_parameter "'path.key' must RULE (got x)". */
static int check_range(double x, const char *path, const char *key, double lo, int lo_open,
                       double hi, const char *rule, problem *pb)
{
    if ((lo_open ? x > lo : x >= lo) && x <= hi)
        return 0;
    char f[96], num[DPB_NUM_MAX];
    codec_join(f, sizeof f, path, key);
    problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must %s (got %s)", f, rule, dpb_num_str(x, num));
    return -1;
}

/* The required number path.key checked as check_range does, into *out: 0, or -1 with pb set
 * (*out may then hold the refused value). */
static int ranged(json_t *j, const char *path, const char *key, double lo, int lo_open, double hi,
                  const char *rule, double *out, problem *pb)
{
    if (codec_number(j, path, key, 1, out, pb) < 0)
        return -1;
    return check_range(*out, path, key, lo, lo_open, hi, rule, pb);
}

/* A positive finite number field (required; >= 0 where allow_zero), with a clear message. */
static int positive(json_t *j, const char *path, const char *key, double *out, int allow_zero,
                    problem *pb)
{
    return ranged(j, path, key, 0.0, !allow_zero, HUGE_VAL, allow_zero ? "be >= 0" : "be > 0", out,
                  pb);
}

/* The string path.key as the index of its name in names (NULL-terminated) into *out: 1; 0 when
 * absent and not required (*out left alone); -1 with pb set, an unknown name answered
 * "'f' must be \"a\", \"b\" or \"c\"". */
static int choice(json_t *j, const char *path, const char *key, int required,
                  const char *const *names, int *out, problem *pb)
{
    const char *s;
    int r = codec_string(j, path, key, required, &s, pb);
    if (r <= 0)
        return r;
    int n = 0;
    for (; names[n]; n++)
        if (strcmp(s, names[n]) == 0) {
            *out = n;
            return 1;
        }
    char f[96], list[160] = "";
    for (int i = 0; i < n; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s\"%s\"",
                 i == 0       ? ""
                 : i == n - 1 ? " or "
                              : ", ",
                 names[i]);
    }
    codec_join(f, sizeof f, path, key);
    problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' must be %s", f, list);
    return -1;
}

/* The required list path.key of min to max members (borrowed), its path into f (96 bytes);
 * NULL with pb set: missing_field, wrong_type, or too_many_values "'f' must be a list of min
 * to max WHAT". */
static json_t *list_field(json_t *j, const char *path, const char *key, size_t min, size_t max,
                          const char *what, char f[96], problem *pb)
{
    codec_join(f, 96, path, key);
    json_t *a = codec_field(j, path, key, 1, pb);
    if (a == NULL)
        return NULL;
    if (!json_is_array(a) || json_array_size(a) < min || json_array_size(a) > max) {
        problem_set(pb, json_is_array(a) ? PB_TOO_MANY_VALUES : PB_WRONG_TYPE, f,
                    "'%s' must be a list of %zu to %zu %s", f, min, max, what);
        return NULL;
    }
    return a;
}

/* A noise multiplier in (0, 1e6] ([0, 1e6] where allow_zero: no noise, not private) at
 * path.noise_multiplier into *slot: 0, or -1 with pb set. */
static int noise_multiplier(json_t *j, const char *path, double *slot, int allow_zero, problem *pb)
{
    return ranged(j, path, "noise_multiplier", 0.0, !allow_zero, 1e6,
                  allow_zero ? "be >= 0 (0: no noise) and at most 1e6"
                             : "be greater than 0 and at most 1e6",
                  slot, pb);
}

/* The same, where the multiplier may be left for the solver. */
static int decode_noise_z(json_t *j, const char *path, dp_param solve_for, dp_event *ev,
                          double *slot, int allow_zero, problem *pb)
{
    if (leave_for_solver(j, "noise_multiplier", DP_PARAM_NOISE_MULTIPLIER, solve_for, ev))
        return 0;
    return noise_multiplier(j, path, slot, allow_zero, pb);
}

/* The required nested "event" of ev (owned) decoded into *slot: ev, or NULL (ev freed) with pb
 * set. The closing of every combinator. */
static dp_event *with_child(json_t *j, const char *path, dp_param solve_for, int depth,
                            dp_event *ev, dp_event **slot, problem *pb)
{
    *slot = decode_child(j, path, solve_for, depth, pb);
    return *slot ? ev : discard(ev);
}

static dp_event *decode_shuffled(json_t *j, const char *path, dp_param solve_for, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_multiplier", "rounds", NULL};
    dp_event *ev = begin(j, path, allowed, DP_EV_SHUFFLED_EPOCH, pb);
    if (ev == NULL ||
        decode_noise_z(j, path, solve_for, ev, &ev->u.shuffled.noise_multiplier, 0, pb) < 0)
        return discard(ev);
    if (!leave_for_solver(j, "rounds", DP_PARAM_ROUNDS, solve_for, ev) &&
        codec_uint(j, path, "rounds", 1, 1, (uint64_t)INT64_MAX, &ev->u.shuffled.rounds, pb) < 0)
        return discard(ev);
    return ev;
}

static dp_event *decode_self(json_t *j, const char *path, dp_param solve_for, int depth,
                             problem *pb)
{
    static const char *const allowed[] = {"class_name", "event", "count", NULL};
    dp_event *ev = begin(j, path, allowed, DP_EV_SELF_COMPOSED, pb);
    if (ev == NULL ||
        (!leave_for_solver(j, "count", DP_PARAM_COUNT, solve_for, ev) &&
         codec_uint(j, path, "count", 1, 1, (uint64_t)MAX_EXACT_INT, &ev->u.self.count, pb) < 0))
        return discard(ev);
    return with_child(j, path, solve_for, depth, ev, &ev->u.self.event, pb);
}

static dp_event *decode_composed(json_t *j, const char *path, dp_param solve_for, int depth,
                                 problem *pb)
{
    static const char *const allowed[] = {"class_name", "events", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    char f[96];
    json_t *arr = list_field(j, path, "events", 0, 1000, "events (none: the identity)", f, pb);
    if (arr == NULL)
        return NULL;
    dp_event *ev = dp_event_new(DP_EV_COMPOSED);
    size_t n = json_array_size(arr);
    if (ev)
        ev->u.composed.events = calloc(n ? n : 1, sizeof(dp_event *));
    if (ev == NULL || ev->u.composed.events == NULL) {
        problem_oom(pb);
        return discard(ev);
    }
    for (size_t i = 0; i < n; i++) {
        char fi[96];
        snprintf(fi, sizeof fi, "%s[%zu]", f, i);
        dp_event *child = decode(json_array_get(arr, i), fi, solve_for, depth + 1, pb);
        if (child == NULL)
            return discard(ev);
        ev->u.composed.events[ev->u.composed.n++] = child;
    }
    return ev;
}

static dp_event *decode_noise_event(json_t *j, const char *path, dp_event_kind k,
                                    dp_param solve_for, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_multiplier", NULL};
    dp_event *ev = begin(j, path, allowed, k, pb);
    if (ev && decode_noise_z(j, path, solve_for, ev, &ev->u.noise.noise_multiplier, 1, pb) < 0)
        return discard(ev);
    return ev;
}

static dp_event *decode_eps_delta(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "epsilon", "delta", NULL};
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return NULL;
    double e, d;
    if (codec_number(j, path, "epsilon", 1, &e, pb) < 0 ||
        codec_number(j, path, "delta", 1, &d, pb) < 0 ||
        check_range(e, path, "epsilon", 0.0, 0, 1e4, "lie in [0, 1e4]", pb) < 0 ||
        check_range(d, path, "delta", 0.0, 0, 1.0, "lie in [0, 1]", pb) < 0)
        return NULL;
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
    dp_event *ev = begin(j, path, allowed, DP_EV_POISSON_SAMPLED, pb);
    if (ev == NULL)
        return NULL;
    if (!leave_for_solver(j, "sampling_probability", DP_PARAM_SAMPLING_PROBABILITY, solve_for,
                          ev) &&
        ranged(j, path, "sampling_probability", 0.0, 0, 1.0, "lie in [0, 1]",
               &ev->u.sampled.sampling_probability, pb) < 0)
        return discard(ev);
    return with_child(j, path, solve_for, depth, ev, &ev->u.sampled.event, pb);
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

/* The noise of a ProjectedNoisySgdDpEvent: its kind, then exactly one of its level (noise_std
 * or laplace_scale, by the kind; may be left for the solver), a noise_schedule or an
 * online_schedule. 0, or -1 with pb set. */
static int decode_pnsgd_noise(json_t *j, const char *path, dp_param solve_for, dp_event *ev,
                              problem *pb)
{
    static const char *const kinds[] = {"gaussian", "laplace", NULL};
    pnsgd_params *p = &ev->u.pnsgd;
    int kind;
    if (choice(j, path, "noise", 1, kinds, &kind, pb) < 0)
        return -1;
    p->noise = (pnsgd_noise)kind;
    char f[96];
    const char *level_key = p->noise == PNSGD_GAUSSIAN ? "noise_std" : "laplace_scale";
    const char *other_key = p->noise == PNSGD_GAUSSIAN ? "laplace_scale" : "noise_std";
    if (json_object_get(j, other_key)) {
        codec_join(f, sizeof f, path, other_key);
        problem_set(pb, PB_INVALID_PARAMETER, f, "'%s' does not go with noise \"%s\"; use '%s'", f,
                    kinds[kind], level_key);
        return -1;
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
        return -1;
    }
    if (given) {
        p->mode = PNSGD_NOISE_GIVEN;
        if (!leave_for_solver(j, level_key, DP_PARAM_NOISE_SCALE, solve_for, ev) &&
            positive(j, path, level_key, &p->noise_level, 0, pb) < 0)
            return -1;
        return 0;
    }
    p->mode = sched ? PNSGD_NOISE_SCHEDULE : PNSGD_NOISE_ONLINE;
    codec_join(f, sizeof f, path, sched ? "noise_schedule" : "online_schedule");
    return decode_schedule(sched ? sched : online, f, online != NULL, solve_for, ev, pb);
}

/* The constraint set: its diameter for Gaussian noise, the interval [a, b] for Laplace noise
 * (the other one refused). 0, or -1 with pb set. */
static int decode_pnsgd_domain(json_t *j, const char *path, pnsgd_params *p, problem *pb)
{
    char f[96];
    if (p->noise == PNSGD_GAUSSIAN) {
        if (positive(j, path, "diameter", &p->diameter, 0, pb) < 0)
            return -1;
        if (json_object_get(j, "interval")) {
            codec_join(f, sizeof f, path, "interval");
            problem_set(pb, PB_INVALID_PARAMETER, f,
                        "Gaussian noise takes the constraint set's 'diameter', not 'interval'");
            return -1;
        }
        return 0;
    }
    json_t *iv = codec_field(j, path, "interval", 1, pb);
    codec_join(f, sizeof f, path, "interval");
    if (iv == NULL)
        return -1;
    if (json_object_get(j, "diameter")) {
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "Laplace noise takes the constraint 'interval' [a, b], not 'diameter'");
        return -1;
    }
    if (!json_is_array(iv) || json_array_size(iv) != 2 || !json_is_number(json_array_get(iv, 0)) ||
        !json_is_number(json_array_get(iv, 1))) {
        problem_set(pb, PB_WRONG_TYPE, f, "'%s' must be [a, b], two numbers", f);
        return -1;
    }
    p->lo = json_number_value(json_array_get(iv, 0));
    p->hi = json_number_value(json_array_get(iv, 1));
    return 0;
}

/* The order of the updates and the index it may need. 0, or -1 with pb set. */
static int decode_pnsgd_order(json_t *j, const char *path, pnsgd_params *p, problem *pb)
{
    static const char *const orders[] = {"fixed_index", "randomly_stopped", "shuffled", NULL};
    int order;
    if (choice(j, path, "order", 1, orders, &order, pb) < 0)
        return -1;
    p->order = (pnsgd_order)order;
    int need_index = p->order == PNSGD_FIXED;
    if (codec_uint(j, path, "index", need_index, 1, (uint64_t)MAX_EXACT_INT, &p->index, pb) < 0)
        return -1;
    if (p->order == PNSGD_SHUFFLED && json_object_get(j, "index")) {
        char f[96];
        codec_join(f, sizeof f, path, "index");
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "the shuffled order has no fixed index: leave 'index' out");
        return -1;
    }
    return 0;
}

static dp_event *decode_pnsgd(json_t *j, const char *path, dp_param solve_for, problem *pb)
{
    static const char *const allowed[] = {
        "class_name",       "noise",           "noise_std", "laplace_scale",
        "noise_schedule",   "online_schedule", "lipschitz", "smoothness",
        "strong_convexity", "learning_rate",   "diameter",  "interval",
        "dataset_size",     "order",           "index",     NULL};
    dp_event *ev = begin(j, path, allowed, DP_EV_PNSGD, pb);
    if (ev == NULL)
        return NULL;
    pnsgd_params *p = &ev->u.pnsgd;
    if (decode_pnsgd_noise(j, path, solve_for, ev, pb) < 0 ||
        positive(j, path, "lipschitz", &p->lipschitz, 0, pb) < 0 ||
        positive(j, path, "smoothness", &p->smoothness, 0, pb) < 0 ||
        positive(j, path, "strong_convexity", &p->strong_convexity, 1, pb) < 0 ||
        positive(j, path, "learning_rate", &p->learning_rate, 0, pb) < 0 ||
        decode_pnsgd_domain(j, path, p, pb) < 0)
        return discard(ev);
    if (!leave_for_solver(j, "dataset_size", DP_PARAM_DATASET_SIZE, solve_for, ev) &&
        codec_uint(j, path, "dataset_size", 1, 1, (uint64_t)MAX_EXACT_INT, &p->n, pb) < 0)
        return discard(ev);
    if (decode_pnsgd_order(j, path, p, pb) < 0)
        return discard(ev);
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
        char f[96];
        codec_join(f, sizeof f, path, e.field);
        problem_set(pb, PB_INVALID_PARAMETER, f, "%s", e.detail);
        return discard(ev);
    }
    return ev;
}

static dp_event *decode_proactive(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "dataset_size", "phases", "variant", NULL};
    static const char *const phase_fields[] = {"noise_multiplier", "batch_size", "rounds", NULL};
    static const char *const variants[] = {"corrected", "paper", NULL};
    dp_event *ev = begin(j, path, allowed, DP_EV_PROACTIVE, pb);
    if (ev == NULL)
        return NULL;
    char f[96];
    uint64_t n;
    int variant = PRO_CORRECTED;
    if (codec_uint(j, path, "dataset_size", 1, 1, (uint64_t)MAX_EXACT_INT, &n, pb) < 0)
        return discard(ev);
    ev->u.proactive.dataset_size = (double)n;
    if (choice(j, path, "variant", 0, variants, &variant, pb) < 0)
        return discard(ev);
    ev->u.proactive.variant = (pro_variant)variant;
    json_t *ph = list_field(j, path, "phases", 1, 1000,
                            "phases {noise_multiplier, batch_size, rounds}", f, pb);
    if (ph == NULL)
        return discard(ev);
    size_t np = json_array_size(ph);
    ev->u.proactive.sigma = calloc(np, sizeof(double));
    ev->u.proactive.batch = calloc(np, sizeof(double));
    ev->u.proactive.rounds = calloc(np, sizeof(double));
    if (!ev->u.proactive.sigma || !ev->u.proactive.batch || !ev->u.proactive.rounds) {
        problem_oom(pb);
        return discard(ev);
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
            return discard(ev);
        }
        if (codec_only_fields(x, fi, phase_fields, pb) < 0 ||
            positive(x, fi, "noise_multiplier", &sg, 0, pb) < 0 ||
            codec_uint(x, fi, "batch_size", 1, 1, n, &b, pb) < 0 ||
            codec_uint(x, fi, "rounds", 1, 1, (uint64_t)MAX_EXACT_INT, &t, pb) < 0)
            return discard(ev);
        ev->u.proactive.sigma[i] = sg;
        ev->u.proactive.batch[i] = (double)b;
        ev->u.proactive.rounds[i] = (double)t;
    }
    return ev;
}

static dp_event *decode_sgld(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {
        "class_name", "clipping_norm", "batch_size", "dataset_size",
        "step_size",  "steps",         "sampling",   NULL};
    static const char *const samplings[] = {"poisson", "cyclic", NULL};
    dp_event *ev = begin(j, path, allowed, DP_EV_SGLD, pb);
    if (ev == NULL)
        return NULL;
    sgld_params *p = &ev->u.sgld;
    json_t *c = json_object_get(j, "clipping_norm");
    p->clipped = c != NULL && !json_is_null(c);
    if (p->clipped && positive(j, path, "clipping_norm", &p->clipping_norm, 0, pb) < 0)
        return discard(ev);
    uint64_t b, n;
    int sampling;
    if (codec_uint(j, path, "dataset_size", 1, 1, (uint64_t)MAX_EXACT_INT, &n, pb) < 0 ||
        codec_uint(j, path, "batch_size", 1, 1, n, &b, pb) < 0 ||
        positive(j, path, "step_size", &p->step_size, 0, pb) < 0 ||
        codec_uint(j, path, "steps", 1, 1, (uint64_t)MAX_EXACT_INT, &p->steps, pb) < 0)
        return discard(ev);
    p->batch_size = (double)b;
    p->dataset_size = (double)n;
    if (choice(j, path, "sampling", 1, samplings, &sampling, pb) < 0)
        return discard(ev);
    p->sampling = (sgld_sampling)sampling;
    return ev;
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
    dp_event *ev = begin(j, path, allowed, k, pb);
    if (ev == NULL ||
        codec_uint(j, path, "source_dataset_size", 1, 1, MAX_POPULATION, &ev->u.fixed.population,
                   pb) < 0 ||
        codec_uint(j, path, "sample_size", 1, 0, MAX_POPULATION, &ev->u.fixed.sample_size, pb) < 0)
        return discard(ev);
    if (ev->u.fixed.sample_size > ev->u.fixed.population) {
        char f[96];
        codec_join(f, sizeof f, path, "sample_size");
        problem_set(pb, PB_INVALID_PARAMETER, f,
                    "'%s' (%llu) must be at most source_dataset_size (%llu)", f,
                    (unsigned long long)ev->u.fixed.sample_size,
                    (unsigned long long)ev->u.fixed.population);
        return discard(ev);
    }
    return with_child(j, path, solve_for, depth, ev, &ev->u.fixed.event, pb);
}

/* One step count of a tree (sc itself when scalar, else its member i) into *out: 0, or -1 with
 * pb set naming the real field (f, or fi for a member), not codec_uint's scratch one. */
static int tree_step(json_t *sc, size_t i, int scalar, const char *f, const char *fi, uint64_t *out,
                     problem *pb)
{
    /* each element goes through codec_uint as a one-member object */
    json_t *one = json_pack("{s:O}", "v", scalar ? sc : json_array_get(sc, i));
    int r = one ? codec_uint(one, "", "v", 1, 0, (uint64_t)MAX_EXACT_INT, out, pb) : -1;
    json_decref(one);
    if (r >= 0)
        return 0;
    if (one == NULL) {
        problem_oom(pb);
    } else {
        problem_code c = pb->code;
        pb->code = PB_NONE;
        problem_set(pb, c, scalar ? f : fi,
                    "'%s' must be a whole number of steps >= 0 (or a list of them)",
                    scalar ? f : fi);
    }
    return -1;
}

/* SingleEpochTreeAggregationDpEvent: noise_multiplier and step_counts (a whole number or a
 * list of 1 to 10000 of them). */
static dp_event *decode_tree(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name", "noise_multiplier", "step_counts", NULL};
    dp_event *ev = begin(j, path, allowed, DP_EV_TREE_AGGREGATION, pb);
    if (ev == NULL)
        return NULL;
    char f[96];
    codec_join(f, sizeof f, path, "step_counts");
    if (noise_multiplier(j, path, &ev->u.tree.noise_multiplier, 0, pb) < 0)
        return discard(ev);
    json_t *sc = codec_field(j, path, "step_counts", 1, pb);
    if (sc == NULL)
        return discard(ev);
    size_t n = json_is_array(sc) ? json_array_size(sc) : 1;
    if (json_is_array(sc) && (n == 0 || n > MAX_TREE_STEPS)) {
        problem_set(pb, PB_TOO_MANY_VALUES, f, "'%s' must hold between 1 and %d step counts", f,
                    MAX_TREE_STEPS);
        return discard(ev);
    }
    ev->u.tree.scalar = !json_is_array(sc);
    ev->u.tree.steps = calloc(n, sizeof(uint64_t));
    if (ev->u.tree.steps == NULL) {
        problem_oom(pb);
        return discard(ev);
    }
    for (size_t i = 0; i < n; i++) {
        char fi[96];
        if (ev->u.tree.scalar)
            snprintf(fi, sizeof fi, "%s", path);
        else
            snprintf(fi, sizeof fi, "%s[%zu]", f, i);
        if (tree_step(sc, i, ev->u.tree.scalar, f, fi, &ev->u.tree.steps[i], pb) < 0)
            return discard(ev);
        ev->u.tree.nsteps++;
    }
    return ev;
}

/* TruncatedSubsampledGaussianDpEvent: dataset_size, sampling_probability,
 * truncated_batch_size, noise_multiplier. */
static dp_event *decode_truncated(json_t *j, const char *path, problem *pb)
{
    static const char *const allowed[] = {"class_name",           "dataset_size",
                                          "sampling_probability", "truncated_batch_size",
                                          "noise_multiplier",     NULL};
    dp_event *ev = begin(j, path, allowed, DP_EV_TRUNCATED_GAUSSIAN, pb);
    if (ev == NULL ||
        codec_uint(j, path, "dataset_size", 1, 1, MAX_POPULATION, &ev->u.truncated.dataset_size,
                   pb) < 0 ||
        ranged(j, path, "sampling_probability", 0.0, 0, 1.0, "lie in [0, 1]",
               &ev->u.truncated.sampling_probability, pb) < 0 ||
        codec_uint(j, path, "truncated_batch_size", 1, 0, (uint64_t)MAX_EXACT_INT,
                   &ev->u.truncated.batch_size, pb) < 0 ||
        noise_multiplier(j, path, &ev->u.truncated.noise_multiplier, 0, pb) < 0)
        return discard(ev);
    return ev;
}

static dp_event *decode_empty(json_t *j, const char *path, dp_event_kind k, problem *pb)
{
    static const char *const allowed[] = {"class_name", NULL};
    return begin(j, path, allowed, k, pb);
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

/* A list of 1 to 1000 numbers in [lo, hi]. */
static double *number_array(json_t *j, const char *path, const char *key, double lo, double hi,
                            size_t *n, problem *pb)
{
    char f[96];
    json_t *a = list_field(j, path, key, 1, 1000, "numbers", f, pb);
    if (a == NULL)
        return NULL;
    *n = json_array_size(a);
    double *v = malloc(*n * sizeof *v);
    if (v == NULL) {
        problem_oom(pb);
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

/* A flat mechanism event read field by field from its table row. Owned; NULL with pb set. */
static dp_event *decode_flat(json_t *j, const char *path, const codec_flat_event *fe, problem *pb)
{
    const char *allowed[5] = {"class_name", NULL, NULL, NULL, NULL};
    for (int i = 0; i < 3 && fe->f[i].key; i++)
        allowed[i + 1] = fe->f[i].key;
    dp_event *ev = begin(j, path, (const char *const *)allowed, fe->kind, pb);
    for (int i = 0; ev && i < 3 && fe->f[i].key; i++) {
        const codec_flat_field *f = &fe->f[i];
        if (f->whole) {
            json_t *v = json_object_get(j, f->key);
            uint64_t u = (uint64_t)f->dflt;
            if ((f->required || (v && !json_is_null(v))) &&
                codec_uint(j, path, f->key, 1, (uint64_t)f->lo, (uint64_t)f->hi, &u, pb) < 0)
                return discard(ev);
            memcpy((char *)ev + f->off, &u, sizeof u);
        } else {
            double x = f->dflt;
            if (bounded(j, path, f->key, f->required, f->lo, f->hi, 0, &x, pb) < 0)
                return discard(ev);
            memcpy((char *)ev + f->off, &x, sizeof x);
        }
    }
    return ev;
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
    dp_event *ev = begin(j, path, allowed, DP_EV_REPEAT_AND_SELECT, pb);
    if (ev == NULL || bounded(j, path, "mean", 1, 1.0, 1e15, 0, &ev->u.rs.mean, pb) < 0 ||
        bounded(j, path, "shape", 1, 0.0, 1e6, 1, &ev->u.rs.shape, pb) < 0)
        return discard(ev);
    return with_child(j, path, solve_for, depth, ev, &ev->u.rs.event, pb);
}

/* 1 when cls is one of these classes (*out: the event, or NULL with pb set), else 0. */
static int decode_mech(json_t *j, const char *path, const char *cls, dp_param solve_for, int depth,
                       dp_event **out, problem *pb)
{
    for (size_t i = 0; i < CODEC_NFLAT; i++)
        if (strcmp(cls, CODEC_FLAT[i].cls) == 0) {
            *out = decode_flat(j, path, &CODEC_FLAT[i], pb);
            return 1;
        }
    if (strcmp(cls, "MixtureOfGaussiansDpEvent") == 0)
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
