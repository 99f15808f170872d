/*
 * compute.c - the stateless compute resources: POST /v1/delta, /v1/epsilon, /v1/calibrate,
 * /v1/curve, /v1/proactive and /v1/rdp, and their light test (route.light, routes.h). Each
 * handler has the same shape: decode (strict) -> core -> encode. No numerics here. GET
 * /v1/accountants, the catalogue, is in accountants.c.
 *
 * May call: core/dp, codec.h, jsonin.h, jsonout.h, metrics.h and http.h's reply helpers;
 * never the transport (http.c runs these handlers through the route table).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dp/account.h"
#include "../core/dp/pld.h"
#include "../core/dp/rdp.h"
#include "../core/dp/sgld.h"
#include "../core/dp/shuffle.h"
#include "../core/dp/proactive.h"
#include "../core/dp/shuffle_exact.h"
#include "codec.h"
#include "jsonin.h"
#include "metrics.h"
#include "resources.h"
#include "../core/common/numfmt.h"

/* A compute request decoded (decode_common): what it owns until compute_req_release. */
typedef struct {
    json_t *j;    /* the body, one JSON object */
    dp_event *ev; /* the event (NULL until decoded) */
    dp_relation rel;
    dp_accountant acct;
    dp_options opt; /* opt.cancel: the request's compute deadline */
    dp_report rep;  /* what the core reports of the computation */
    dpb_error err;  /* and why it refused */
} compute_req;

/* Parse the body into c (zeroed by the caller), check the top-level fields, decode relation
 * + accountant and, when want_event, the event. 0, or -1 with pb set. */
static int decode_common(const http_request *req, const char *const *allowed, int want_event,
                         compute_req *c, problem *pb)
{
    c->j =
        req->parsed ? json_incref(req->parsed) : codec_parse_object(req->body, req->body_len, pb);
    if (c->j == NULL)
        return -1;
    if (codec_compute_common(c->j, allowed, &c->rel, &c->acct, &c->opt, pb) < 0)
        return -1;
    c->opt.cancel = req->cancel; /* the request's compute deadline */
    if (want_event) {
        c->ev = codec_event(json_object_get(c->j, "event"), "event", DP_PARAM_NONE, pb);
        if (c->ev == NULL)
            return -1;
    }
    return 0;
}

static void compute_req_release(compute_req *c)
{
    dp_event_free(c->ev);
    json_decref(c->j);
}

/* malloc(bytes), or NULL with pb set to out_of_memory. */
static void *alloc_or_problem(size_t bytes, problem *pb)
{
    void *p = malloc(bytes);
    if (p == NULL)
        problem_oom(pb);
    return p;
}

/* The computations that are cheap whatever their parameters: closed forms and Renyi DP
 * (microseconds per event node). */
static int light_accountant(const char *a)
{
    static const char *const names[] = {"thm41", "gdp_clt", "gdp_exact", "rdp", NULL};
    for (int i = 0; a && names[i]; i++)
        if (strcmp(a, names[i]) == 0)
            return 1;
    return 0;
}

int res_compute_light(const http_request *req, json_t **parsed)
{
    *parsed = NULL;
    /* a large body is work to parse and to walk whatever the accountant (--max-body may be
     * raised to megabytes): the pool takes it */
    if (req->body_len > 16384)
        return 0;
    json_t *j = jsonin_load(req->body, req->body_len, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return 0; /* the handler will say what is wrong, on the pool */
    }
    const char *a = json_string_value(json_object_get(j, "accountant"));
    int light = light_accountant(a);
    if (!light && strcmp(req->path, "/v1/calibrate") != 0 &&
        (a == NULL || strcmp(a, "auto") == 0 || strcmp(a, "shuffle_exact") == 0)) {
        /* one shuffled epoch: thm41 outside the exact range, else the exact model, cheap
         * once cached */
        json_t *ev = json_object_get(j, "event");
        const char *cls = json_string_value(json_object_get(ev, "class_name"));
        json_t *sg = json_object_get(ev, "noise_multiplier"), *m = json_object_get(ev, "rounds");
        if (cls && strcmp(cls, "ShuffledDpSgdEpochDpEvent") == 0 && json_is_number(sg) &&
            json_is_integer(m) && json_integer_value(m) >= 1) {
            double sigma = json_number_value(sg);
            uint64_t rounds = (uint64_t)json_integer_value(m);
            light = !shx_in_range(sigma, rounds) || shx_cached(sigma, rounds, 0.0);
        }
    }
    *parsed = j; /* the handler's own parse, done once */
    return light;
}

/* A core error as a problem; a computation stopped at its deadline says which deadline. */
static void core_problem(const http_request *req, problem *pb, const dpb_error *err)
{
    const dpb_cancel *c = req->cancel;
    if (err->status == DPB_ECANCELLED && c && c->flag && __atomic_load_n(c->flag, __ATOMIC_RELAXED))
        problem_set(pb, PB_OVERLOADED, NULL,
                    "the server is stopping: the computation was abandoned; retry (on another "
                    "instance)");
    char secs[DPB_NUM_MAX];
    if (err->status == DPB_ECANCELLED)
        problem_set(pb, PB_COMPUTE_DEADLINE, NULL,
                    "the computation ran past the server's compute deadline (%s s) and was "
                    "stopped: ask for less work (a coarser value_discretization_interval, fewer "
                    "compositions or points)",
                    dpb_num_str(req->deadline_s, secs));
    problem_from_error(pb, err);
}

/* A refusal from core, with the conditions that were checked when there are any. */
static void reply_core_error(const http_request *req, http_response *resp, problem *pb,
                             const dpb_error *err, const dp_report *rep)
{
    core_problem(req, pb, err);
    if (rep->accountant)
        problem_extra(pb, "accountant", json_string(rep->accountant));
    if (rep->ncond > 0)
        problem_extra(pb, "conditions", codec_conditions(rep));
    http_reply_problem(resp, pb);
}

/* One result, with the accountant's per-point extras that are present. */
static json_t *result_entry(json_t *o, const dp_point_extra *x, int is_delta)
{
    if (o == NULL)
        return o;
    /* shuffle_exact: Theorem 4.1's answer to the same question, for comparison */
    if (!isnan(x->thm41))
        json_object_set_new(o, "theorem_4_1",
                            is_delta && isinf(x->thm41) ? json_string("not_covered")
                                                        : codec_real(x->thm41));
    if (!isnan(x->rdp_order))
        json_object_set_new(o, "rdp_order", codec_real(x->rdp_order));
    if (!isnan(x->limit_delta))
        json_object_set_new(o, "limit_delta", codec_real(x->limit_delta));
    if (!isnan(x->limit_lower))
        json_object_set_new(
            o, "limit_bracket",
            json_pack("[o, o]", codec_real(x->limit_lower), codec_real(x->limit_upper)));
    if (!isnan(x->closed_form))
        json_object_set_new(o, "compared",
                            json_pack("{s:o, s:o}", "proactive_closed_form",
                                      codec_real(x->closed_form), "rdp", codec_real(x->rdp_value)));
    return o;
}

/* For each SgldDpEvent in the tree, the DP-SGD it was accounted as (docs/MATH.md section 5). */
static void put_mappings(json_t *arr, const dp_event *ev)
{
    switch (ev->kind) {
    case DP_EV_SGLD: {
        dpb_status st;
        dp_event *m = dp_map_to_dpsgd(ev, &st, NULL);
        if (m) {
            double sigma = 0.0;
            sgld_noise_multiplier(&ev->u.sgld, &sigma);
            json_array_append_new(arr, json_pack("{s:s, s:o, s:o}", "from", "SgldDpEvent",
                                                 "noise_multiplier", codec_real(sigma),
                                                 "accounted_as", codec_encode_event(m)));
            dp_event_free(m);
        }
        return;
    }
    case DP_EV_SELF_COMPOSED:
        put_mappings(arr, ev->u.self.event);
        return;
    case DP_EV_POISSON_SAMPLED:
        put_mappings(arr, ev->u.sampled.event);
        return;
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++)
            put_mappings(arr, ev->u.composed.events[i]);
        return;
    default:
        return;
    }
}

/* Does the point have any of result_entry's extras? */
static int has_extras(const dp_point_extra *x)
{
    return !isnan(x->thm41) || !isnan(x->rdp_order) || !isnan(x->limit_delta) ||
           !isnan(x->limit_lower) || !isnan(x->closed_form);
}

/* result_entry's extras, written into the entry being written. */
static void write_extras(jsonout_w *w, const dp_point_extra *x, int is_delta)
{
    if (!has_extras(x))
        return;
    json_t *o = result_entry(json_object(), x, is_delta);
    if (o == NULL)
        w->fail = 1;
    else
        jsonout_members(w, o);
    json_decref(o);
}

/* The mappings when the event holds SGLD runs, written into the answer being written. */
static void write_event_notes(jsonout_w *w, const dp_event *ev)
{
    json_t *arr = json_array();
    if (arr == NULL) {
        w->fail = 1;
        return;
    }
    put_mappings(arr, ev);
    if (json_array_size(arr) > 0) {
        jsonout_key(w, "mappings");
        jsonout_tree(w, arr);
    }
    json_decref(arr);
}

/* The report plus the accountant's own parameters (the PLD grid actually used). */
static void put_report(json_t *o, const dp_report *rep, const dp_options *opt, dp_relation rel)
{
    json_object_set_new(o, "neighboring_relation", json_string(dp_relation_name(rel)));
    codec_put_report(o, rep);
    if (rep->accountant && strcmp(rep->accountant, "pld") == 0)
        json_object_set_new(o, "value_discretization_interval",
                            json_real(opt->pld_h > 0.0 ? opt->pld_h : PLD_DEFAULT_H));
}

/* put_report, written into the answer being written. */
static void write_report(jsonout_w *w, const dp_report *rep, const dp_options *opt, dp_relation rel)
{
    jsonout_key(w, "neighboring_relation");
    jsonout_str(w, dp_relation_name(rel));
    codec_write_report(w, rep);
    if (rep->accountant && strcmp(rep->accountant, "pld") == 0) {
        jsonout_key(w, "value_discretization_interval");
        jsonout_realv(w, opt->pld_h > 0.0 ? opt->pld_h : PLD_DEFAULT_H);
    }
}

/* An answer with results (delta, epsilon), written straight into its buffer (jsonout.h): no
 * tree to build, walk and free. begin_results opens it with the report and opens the
 * results; end_results closes them and adds the event's notes; reply_written closes the
 * answer and sends it. */
static void begin_results(jsonout_w *w, const dp_report *rep, const dp_options *opt,
                          dp_relation rel)
{
    jsonout_init(w);
    jsonout_open(w, '{');
    write_report(w, rep, opt, rel);
    jsonout_key(w, "results");
    jsonout_open(w, '[');
}

static void end_results(jsonout_w *w, const dp_event *ev)
{
    jsonout_close(w, ']');
    write_event_notes(w, ev);
}

static void reply_written(jsonout_w *w, http_response *resp)
{
    jsonout_close(w, '}');
    http_reply_written(resp, 200, w);
}

/* One member with a codec_real value; two of them. */
static void write_real(jsonout_w *w, const char *key, double x)
{
    jsonout_key(w, key);
    codec_write_real(w, x);
}

static void write_point(jsonout_w *w, const char *k1, double x1, const char *k2, double x2)
{
    write_real(w, k1, x1);
    write_real(w, k2, x2);
}

/* key: {k1: x1, k2: x2}, the values as codec_real's. */
static void write_pair(jsonout_w *w, const char *key, const char *k1, double x1, const char *k2,
                       double x2)
{
    jsonout_key(w, key);
    jsonout_open(w, '{');
    write_point(w, k1, x1, k2, x2);
    jsonout_close(w, '}');
}

/* The two point queries, one path: delta at given epsilons (POST /v1/delta) and epsilon at
 * given deltas (POST /v1/epsilon), each asked as one value or a list. */
typedef struct {
    const char *const *fields; /* the body's allowed top-level fields */
    const char *one, *many;    /* the input: one value, or the list ("epsilon", "epsilons") */
    const char *out;           /* the output's name */
    int is_delta;              /* delta(eps): infinity allowed in, ln_delta out */
} point_query;

static const point_query DELTA_QUERY = {CODEC_DELTA_FIELDS, "epsilon", "epsilons", "delta", 1};
static const point_query EPSILON_QUERY = {CODEC_EPSILON_FIELDS, "delta", "deltas", "epsilon", 0};

/* One result of a point query: the input and output values, then ln_delta (delta) or
 * certified (epsilon), then the accountant's extras. */
static void write_point_result(jsonout_w *w, const point_query *q, double in, double out,
                               double ln_delta, const dp_point_extra *aux)
{
    jsonout_open(w, '{');
    write_point(w, q->one, in, q->out, out);
    if (q->is_delta) {
        write_real(w, "ln_delta", ln_delta);
    } else {
        jsonout_key(w, "certified");
        jsonout_bool(w, isfinite(out));
    }
    write_extras(w, aux, q->is_delta);
    jsonout_close(w, '}');
}

static void res_points(const http_request *req, http_response *resp, const point_query *q)
{
    problem pb = {0};
    compute_req c = {0};
    double *in = NULL, *out = NULL, *ln_delta = NULL;
    dp_point_extra *aux = NULL;
    size_t n = 0;
    int scalar = 0;
    if (decode_common(req, q->fields, 1, &c, &pb) < 0 ||
        (q->is_delta
             ? codec_number_list_inf(c.j, q->one, q->many, DP_MAX_POINTS, &in, &n, &scalar, &pb)
             : codec_number_list(c.j, q->one, q->many, DP_MAX_POINTS, &in, &n, &scalar, &pb)) < 0 ||
        (out = alloc_or_problem(n * sizeof *out, &pb)) == NULL ||
        (q->is_delta && (ln_delta = alloc_or_problem(n * sizeof *ln_delta, &pb)) == NULL) ||
        (aux = alloc_or_problem(n * sizeof *aux, &pb)) == NULL) {
        http_reply_problem(resp, &pb);
        goto out;
    }
    double t0 = metrics_now();
    dpb_status st =
        q->is_delta
            ? dp_delta_ex(c.ev, c.rel, c.acct, &c.opt, in, n, out, ln_delta, aux, &c.rep, &c.err)
            : dp_epsilon_ex(c.ev, c.rel, c.acct, &c.opt, in, n, out, aux, &c.rep, &c.err);
    metrics_compute(c.rep.accountant, metrics_now() - t0);
    if (st != DPB_OK) {
        if (strcmp(c.err.field, q->one) == 0 && !scalar)
            strcpy(c.err.field, q->many);
        reply_core_error(req, resp, &pb, &c.err, &c.rep);
        goto out;
    }
    jsonout_w w;
    begin_results(&w, &c.rep, &c.opt, c.rel);
    for (size_t i = 0; i < n; i++)
        write_point_result(&w, q, in[i], out[i], ln_delta ? ln_delta[i] : 0.0, &aux[i]);
    end_results(&w, c.ev);
    if (scalar) {
        write_point(&w, q->one, in[0], q->out, out[0]);
        if (q->is_delta)
            write_real(&w, "ln_delta", ln_delta[0]);
    }
    reply_written(&w, resp);
out:
    free(in);
    free(out);
    free(ln_delta);
    free(aux);
    compute_req_release(&c);
}

void res_delta(const http_request *req, http_response *resp)
{
    res_points(req, resp, &DELTA_QUERY);
}

void res_epsilon(const http_request *req, http_response *resp)
{
    res_points(req, resp, &EPSILON_QUERY);
}

/* solve_for's names and the parameter each leaves out of the event. */
static const struct {
    const char *name;
    dp_param param;
} SOLVE_FOR[] = {
    {"noise_multiplier", DP_PARAM_NOISE_MULTIPLIER},
    {"rounds", DP_PARAM_ROUNDS},
    {"count", DP_PARAM_COUNT},
    {"sampling_probability", DP_PARAM_SAMPLING_PROBABILITY},
    {"noise_std", DP_PARAM_NOISE_SCALE},
    {"laplace_scale", DP_PARAM_NOISE_SCALE},
    {"dataset_size", DP_PARAM_DATASET_SIZE},
    {"c1", DP_PARAM_C1},
};

/* What a calibration asks, besides the event: the parameter to solve for (its name as
 * given, borrowed from the body), the target, and the dataset when there is one. */
typedef struct {
    const char *sf;
    dp_param param;
    double eps_t, delta_t;
    int has_dataset; /* codec_dataset's answer: clip and ratio are set when 1 */
    double clip, ratio;
} cal_ask;

/* The body's solve_for, target and dataset of a calibration into *q: 0, or -1 with pb set. */
static int decode_calibration(json_t *j, cal_ask *q, problem *pb)
{
    static const char *const target_fields[] = {"epsilon", "delta", NULL};
    if (codec_string(j, "", "solve_for", 1, &q->sf, pb) < 0)
        return -1;
    q->param = DP_PARAM_NONE;
    for (size_t i = 0; i < sizeof SOLVE_FOR / sizeof SOLVE_FOR[0]; i++)
        if (strcmp(q->sf, SOLVE_FOR[i].name) == 0)
            q->param = SOLVE_FOR[i].param;
    if (q->param == DP_PARAM_NONE) {
        problem_set(pb, PB_INVALID_PARAMETER, "solve_for",
                    "solve_for must be \"noise_multiplier\", \"rounds\", \"count\", "
                    "\"sampling_probability\", \"noise_std\", \"laplace_scale\", "
                    "\"dataset_size\" or \"c1\"");
        return -1;
    }
    json_t *t = json_object_get(j, "target");
    if (t == NULL) {
        problem_set(pb, PB_MISSING_FIELD, "target",
                    "'target' is required: {\"epsilon\": ..., \"delta\": ...}");
        return -1;
    }
    if (!json_is_object(t)) {
        problem_set(pb, PB_WRONG_TYPE, "target", "'target' must be an object");
        return -1;
    }
    if (codec_only_fields(t, "target", target_fields, pb) < 0 ||
        codec_number(t, "target", "epsilon", 1, &q->eps_t, pb) < 0 ||
        codec_number(t, "target", "delta", 1, &q->delta_t, pb) < 0)
        return -1;
    if ((q->has_dataset = codec_dataset(j, &q->clip, &q->ratio, pb)) < 0)
        return -1;
    return 0;
}

/* A calibration the accountant could not reach: the problem, with the best it achieved and
 * the conditions checked when there are any. */
static void reply_calibration_error(const http_request *req, http_response *resp, problem *pb,
                                    const dpb_error *err, const dp_calibration *cal,
                                    const dp_report *rep)
{
    core_problem(req, pb, err);
    if (cal->has_best) {
        json_t *best =
            json_pack("{s:o, s:s, s:o}", "delta", codec_real(cal->best_delta), "parameter",
                      dp_param_name(cal->param), "at", codec_real(cal->best_at));
        problem_extra(pb, "best_achievable", best);
    }
    if (rep->accountant)
        problem_extra(pb, "accountant", json_string(rep->accountant));
    if (rep->ncond > 0)
        problem_extra(pb, "conditions", codec_conditions(rep));
    http_reply_problem(resp, pb);
}

/* A count (rounds, count, dataset_size) as an integer, else as codec_real's. */
static void write_cal_value(jsonout_w *w, double x, int integral)
{
    if (integral)
        codec_write_uint(w, (uint64_t)x);
    else
        codec_write_real(w, x);
}

/* The calibration's "details": the closed forms and regimes that apply (NaN: absent), and
 * with a dataset the smallest N of seed 004 Table 1. */
static void write_cal_details(jsonout_w *w, const dp_calibration *cal, const dp_event *ev,
                              int integral, int has_dataset, double clip, double ratio)
{
    jsonout_key(w, "details");
    jsonout_open(w, '{');
    if (!isnan(cal->per_epoch_delta))
        write_real(w, "per_epoch_delta", cal->per_epoch_delta);
    if (!isnan(cal->rounds_eq3))
        write_real(w, "rounds_closed_form_eq3", cal->rounds_eq3);
    if (!isnan(cal->rounds_eq4))
        write_real(w, "rounds_closed_form_eq4", cal->rounds_eq4);
    if (!isnan(cal->regime_delta_max))
        write_real(w, "regime_delta_max", cal->regime_delta_max);
    if (!isnan(cal->limit_c1))
        write_real(w, "c1_for_limit", cal->limit_c1);
    if (!isnan(cal->thm41_value)) {
        jsonout_key(w, "theorem_4_1_value");
        if (isinf(cal->thm41_value))
            jsonout_str(w, "none");
        else
            write_cal_value(w, cal->thm41_value, integral);
    }
    if (!isnan(cal->regime_sigma_max))
        write_real(w, "regime_sigma_max", cal->regime_sigma_max);
    if (has_dataset > 0) {
        /* seed 004 Table 1: the smallest N with C sigma M / N <= max_noise_per_round */
        const dp_event *leaf = ev;
        while (leaf->kind == DP_EV_SELF_COMPOSED)
            leaf = leaf->u.self.event;
        if (leaf->kind == DP_EV_SHUFFLED_EPOCH) {
            jsonout_key(w, "min_dataset_size");
            codec_write_uint(w, dp_thm41_min_dataset(leaf->u.shuffled.noise_multiplier,
                                                     leaf->u.shuffled.rounds, clip, ratio));
        }
    }
    jsonout_close(w, '}');
}

void res_calibrate(const http_request *req, http_response *resp)
{
    problem pb = {0};
    compute_req c = {0};
    cal_ask q = {0};
    if (decode_common(req, CODEC_CALIBRATE_FIELDS, 0, &c, &pb) < 0 ||
        decode_calibration(c.j, &q, &pb) < 0)
        goto fail;
    /* the event is decoded once solve_for is known: it names the field left out */
    c.ev = codec_event(json_object_get(c.j, "event"), "event", q.param, &pb);
    if (c.ev == NULL)
        goto fail;

    dp_calibration cal;
    double t0 = metrics_now();
    dpb_status st =
        dp_calibrate_ex(c.ev, c.rel, c.acct, &c.opt, q.eps_t, q.delta_t, &cal, &c.rep, &c.err);
    metrics_compute(c.rep.accountant, metrics_now() - t0);
    if (st != DPB_OK) {
        reply_calibration_error(req, resp, &pb, &c.err, &cal, &c.rep);
        goto out;
    }
    jsonout_w w; /* written straight into the answer (jsonout.h) */
    jsonout_init(&w);
    jsonout_open(&w, '{');
    jsonout_key(&w, "solve_for");
    jsonout_str(&w, q.sf);
    int integral = cal.param == DP_PARAM_ROUNDS || cal.param == DP_PARAM_COUNT ||
                   cal.param == DP_PARAM_DATASET_SIZE;
    jsonout_key(&w, "value");
    write_cal_value(&w, cal.value, integral);
    if (isfinite(cal.tolerance)) { /* as json_real, which holds no NaN or infinity */
        jsonout_key(&w, "tolerance");
        jsonout_realv(&w, cal.tolerance);
    }
    if (cal.has_interval)
        write_pair(&w, "interval", "min", cal.lo, "max", cal.hi);
    write_pair(&w, "target", "epsilon", q.eps_t, "delta", q.delta_t);
    write_pair(&w, "achieved", "epsilon", q.eps_t, "delta", cal.achieved_delta);
    json_t *encoded = codec_encode_event(c.ev);
    jsonout_key(&w, "event");
    if (encoded)
        jsonout_tree(&w, encoded);
    else
        w.fail = 1;
    json_decref(encoded);
    write_report(&w, &c.rep, &c.opt, c.rel);
    write_cal_details(&w, &cal, c.ev, integral, q.has_dataset, q.clip, q.ratio);
    jsonout_close(&w, '}');
    http_reply_written(resp, 200, &w);
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    compute_req_release(&c);
}

/* The curve's epsilons: the list 'epsilons', or the grid 'epsilon_range' {min, max, points}.
 * 0 with *eps owned by the caller, or -1 with pb set. */
static int decode_curve_epsilons(json_t *j, double **eps, size_t *n, problem *pb)
{
    static const char *const range_fields[] = {"min", "max", "points", NULL};
    int scalar;
    json_t *range = json_object_get(j, "epsilon_range");
    if (range == NULL) {
        if (codec_number_list(j, "epsilons_single_unused", "epsilons", DP_MAX_POINTS, eps, n,
                              &scalar, pb) < 0) {
            pb->code = PB_NONE;
            problem_set(pb, PB_MISSING_FIELD, "epsilons",
                        "give 'epsilons' (a list) or 'epsilon_range' {min, max, points}");
            return -1;
        }
        return 0;
    }
    double lo, hi;
    uint64_t pts;
    if (json_object_get(j, "epsilons")) {
        problem_set(pb, PB_INVALID_PARAMETER, "epsilons",
                    "give either 'epsilons' or 'epsilon_range', not both");
        return -1;
    }
    if (!json_is_object(range)) {
        problem_set(pb, PB_WRONG_TYPE, "epsilon_range",
                    "'epsilon_range' must be {\"min\": ..., \"max\": ..., \"points\": ...}");
        return -1;
    }
    if (codec_only_fields(range, "epsilon_range", range_fields, pb) < 0 ||
        codec_number(range, "epsilon_range", "min", 1, &lo, pb) < 0 ||
        codec_number(range, "epsilon_range", "max", 1, &hi, pb) < 0 ||
        codec_uint(range, "epsilon_range", "points", 1, 2, DP_MAX_POINTS, &pts, pb) < 0)
        return -1;
    if (!(lo >= 0.0 && hi > lo)) {
        problem_set(pb, PB_INVALID_PARAMETER, "epsilon_range",
                    "epsilon_range needs 0 <= min < max");
        return -1;
    }
    *n = (size_t)pts;
    *eps = alloc_or_problem(*n * sizeof **eps, pb);
    if (*eps == NULL)
        return -1;
    for (size_t i = 0; i < *n; i++)
        (*eps)[i] = lo + (hi - lo) * (double)i / (double)(*n - 1);
    return 0;
}

/* The curve's trade-off alphas: the list 'alphas', or 'tradeoff_points' evenly in [0, 1], or
 * none (*na = 0). 0 with *alpha owned by the caller, or -1 with pb set. */
static int decode_curve_alphas(json_t *j, double **alpha, size_t *na, problem *pb)
{
    int scalar;
    json_t *al = json_object_get(j, "alphas");
    uint64_t tp = 0;
    int has_tp = codec_uint(j, "", "tradeoff_points", 0, 2, DP_MAX_POINTS, &tp, pb);
    if (has_tp < 0)
        return -1;
    if (al && has_tp) {
        problem_set(pb, PB_INVALID_PARAMETER, "alphas",
                    "give either 'alphas' or 'tradeoff_points', not both");
        return -1;
    }
    if (al)
        return codec_number_list(j, "alphas_single_unused", "alphas", DP_MAX_POINTS, alpha, na,
                                 &scalar, pb) < 0
                   ? -1
                   : 0;
    if (has_tp) {
        *na = (size_t)tp;
        *alpha = alloc_or_problem(*na * sizeof **alpha, pb);
        if (*alpha == NULL)
            return -1;
        for (size_t i = 0; i < *na; i++)
            (*alpha)[i] = (double)i / (double)(*na - 1);
    }
    return 0;
}

/* Theorem 4.1 beside a shuffle_exact curve: one total-variation delta for every eps, and the
 * trade-off line 1 - alpha - delta. */
static json_t *curve_thm41(const dp_event *ev, dp_relation rel)
{
    dp_report r41;
    double zero = 0.0, d41;
    if (dp_delta(ev, rel, DP_ACCT_THM41, &zero, 1, &d41, NULL, &r41, NULL) == DPB_OK)
        return json_pack("{s:o}", "delta", codec_real(d41));
    return json_pack("{s:s}", "delta", "not_covered");
}

/* A list of {k1: x1[i], k2: x2[i]}, the values as codec_real's. */
static json_t *pair_list(const char *k1, const double *x1, const char *k2, const double *x2,
                         size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(
            a, json_pack("{s:o, s:o}", k1, codec_real(x1[i]), k2, codec_real(x2[i])));
    return a;
}

/* The curve's answer: the report, the (epsilon, delta) points, Theorem 4.1 beside a
 * shuffle_exact curve, and the trade-off points when alphas were asked (na > 0). */
static json_t *curve_answer(const compute_req *c, const double *eps, const double *delta, size_t n,
                            const double *alpha, const double *beta, size_t na)
{
    json_t *o = json_object();
    put_report(o, &c->rep, &c->opt, c->rel);
    json_object_set_new(o, "curve", pair_list("epsilon", eps, "delta", delta, n));
    if (c->rep.accountant && strcmp(c->rep.accountant, "shuffle_exact") == 0)
        json_object_set_new(o, "theorem_4_1", curve_thm41(c->ev, c->rel));
    if (na)
        json_object_set_new(o, "tradeoff", pair_list("alpha", alpha, "beta", beta, na));
    return o;
}

/* POST /v1/curve: delta over an epsilon grid and trade-off points, for plotting. */
void res_curve(const http_request *req, http_response *resp)
{
    problem pb = {0};
    compute_req c = {0};
    double *eps = NULL, *delta = NULL, *alpha = NULL, *beta = NULL;
    size_t n = 0, na = 0;
    if (decode_common(req, CODEC_CURVE_FIELDS, 1, &c, &pb) < 0 ||
        decode_curve_epsilons(c.j, &eps, &n, &pb) < 0 ||
        decode_curve_alphas(c.j, &alpha, &na, &pb) < 0 ||
        (delta = alloc_or_problem(n * sizeof *delta, &pb)) == NULL ||
        (beta = alloc_or_problem((na ? na : 1) * sizeof *beta, &pb)) == NULL) {
        http_reply_problem(resp, &pb);
        goto out;
    }
    double t0 = metrics_now();
    dpb_status st =
        dp_curve(c.ev, c.rel, c.acct, &c.opt, eps, n, delta, alpha, na, beta, &c.rep, &c.err);
    metrics_compute(c.rep.accountant, metrics_now() - t0);
    if (st != DPB_OK)
        reply_core_error(req, resp, &pb, &c.err, &c.rep);
    else
        http_reply_json(resp, 200, curve_answer(&c, eps, delta, n, alpha, beta, na));
out:
    free(eps);
    free(delta);
    free(alpha);
    free(beta);
    compute_req_release(&c);
}

/* The fields of POST /v1/proactive that belong to one procedure only (the others, theta,
 * theorem and variant, apply to all or are ignored by the closed form of sigma): a field sent
 * with a procedure that does not read it is refused, not silently dropped. 0, or -1 with pb
 * set. */
static int proactive_fields_apply(json_t *j, const char *proc, problem *pb)
{
    static const struct {
        const char *field, *procs;
    } only[] = {{"epsilon", "noise_multiplier"},
                {"noise_multiplier", "plan max_rounds"},
                {"dataset_size", "plan max_rounds"},
                {"epochs", "plan"},
                {"batch_size", "max_rounds"}};
    for (size_t i = 0; i < sizeof only / sizeof only[0]; i++) {
        if (json_object_get(j, only[i].field) == NULL)
            continue;
        const char *p = strstr(only[i].procs, proc);
        size_t n = strlen(proc);
        if (p != NULL && (p[n] == ' ' || p[n] == '\0'))
            continue;
        problem_set(pb, PB_INVALID_PARAMETER, only[i].field,
                    "%s applies to procedure %s only; leave it out for \"%s\"", only[i].field,
                    only[i].procs, proc);
        return -1;
    }
    return 0;
}

/* POST /v1/proactive: seed 002's DP calculator (procedures A, B, C of docs/MATH.md section 4; D is
 * delta(eps) of a ProactiveDpSgdDpEvent through /v1/delta). */
void res_proactive(const http_request *req, http_response *resp)
{
    problem pb = {0};
    json_t *o = NULL, *j = req->parsed ? json_incref(req->parsed)
                                       : codec_parse_object(req->body, req->body_len, &pb);
    const char *proc, *vs = "corrected", *th = "B.4";
    double sigma = 0, eps = 0, delta = 0, theta = 1.0, epochs = 0;
    uint64_t N = 0, s = 0;
    if (j == NULL || codec_only_fields(j, "", CODEC_PROACTIVE_FIELDS, &pb) < 0 ||
        codec_string(j, "", "procedure", 1, &proc, &pb) < 0 ||
        codec_string(j, "", "variant", 0, &vs, &pb) < 0 ||
        codec_string(j, "", "theorem", 0, &th, &pb) < 0 ||
        codec_number(j, "", "theta", 0, &theta, &pb) < 0)
        goto fail;
    if ((strcmp(proc, "noise_multiplier") == 0 || strcmp(proc, "plan") == 0 ||
         strcmp(proc, "max_rounds") == 0) &&
        proactive_fields_apply(j, proc, &pb) < 0)
        goto fail;
    pro_variant v = PRO_CORRECTED;
    if (strcmp(vs, "paper") == 0)
        v = PRO_PAPER;
    else if (strcmp(vs, "corrected") != 0) {
        problem_set(&pb, PB_INVALID_PARAMETER, "variant",
                    "variant must be \"corrected\" (default) or \"paper\"");
        goto fail;
    }
    if (strcmp(th, "B.4") != 0 && strcmp(th, "3.1") != 0) {
        problem_set(&pb, PB_INVALID_PARAMETER, "theorem", "theorem must be \"B.4\" or \"3.1\"");
        goto fail;
    }
    if (!(theta >= 1.0 && theta <= 1e6)) {
        problem_set(&pb, PB_INVALID_PARAMETER, "theta",
                    "theta (s_max / mean batch) must lie in [1, 1e6]");
        goto fail;
    }
    dpb_error err = {0};
    dp_report rep = {0};
    if (strcmp(proc, "noise_multiplier") == 0) {
        if (codec_number(j, "", "epsilon", 1, &eps, &pb) < 0 ||
            codec_number(j, "", "delta", 1, &delta, &pb) < 0)
            goto fail;
        if (!(eps > 0.0) || !(delta > 0.0 && delta < 1.0)) {
            problem_set(&pb, PB_INVALID_PARAMETER, "epsilon", "need epsilon > 0 and 0 < delta < 1");
            goto fail;
        }
        o = json_pack("{s:s, s:o, s:s}", "procedure", "noise_multiplier", "noise_multiplier",
                      codec_real(pro_sigma_of(eps, delta)), "formula",
                      "(6) sigma = sqrt(2 (eps + ln(1/delta)) / eps), rounded up");
    } else if (strcmp(proc, "plan") == 0 || strcmp(proc, "max_rounds") == 0) {
        int plan = proc[0] == 'p';
        if (codec_number(j, "", "noise_multiplier", 1, &sigma, &pb) < 0 ||
            codec_number(j, "", "delta", 1, &delta, &pb) < 0 ||
            codec_uint(j, "", "dataset_size", 1, 1, 9007199254740992ULL, &N, &pb) < 0 ||
            (plan ? codec_number(j, "", "epochs", 1, &epochs, &pb)
                  : codec_uint(j, "", "batch_size", 1, 1, N, &s, &pb)) < 0)
            goto fail;
        if (plan) {
            pro_plan pl;
            dpb_status st = pro_plan_run(sigma, delta, (double)N, epochs * (double)N, theta, v,
                                         th[0] == '3', &pl, &err);
            if (st != DPB_OK) {
                problem_from_error(&pb, &err);
                if (pl.conditions.ncond)
                    problem_extra(&pb, "conditions", codec_conditions(&pl.conditions));
                goto fail;
            }
            rep = pl.conditions;
            o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "procedure", "plan",
                          "epsilon", codec_real(pl.eps), "gamma", codec_real(pl.gamma), "a",
                          codec_real(pl.a), "max_mean_batch_size", codec_real(pl.mean_batch),
                          "rounds_min", codec_real(pl.rounds_min), "batch_size",
                          codec_uint_json((uint64_t)pl.batch), "rounds",
                          codec_uint_json((uint64_t)pl.rounds), "epochs_actual",
                          codec_real(pl.k_actual));
        } else {
            double t_max;
            if (pro_max_rounds(sigma, delta, (double)N, (double)s, theta, v, &eps, &t_max, &rep,
                               &err) != DPB_OK) {
                problem_from_error(&pb, &err);
                if (rep.ncond)
                    problem_extra(&pb, "conditions", codec_conditions(&rep));
                goto fail;
            }
            o = json_pack("{s:s, s:o, s:o}", "procedure", "max_rounds", "epsilon", codec_real(eps),
                          "max_rounds", codec_uint_json((uint64_t)t_max));
        }
    } else {
        problem_set(&pb, PB_INVALID_PARAMETER, "procedure",
                    "procedure must be \"plan\", \"noise_multiplier\" or \"max_rounds\" (for "
                    "delta(eps) of a schedule, POST a ProactiveDpSgdDpEvent to /v1/delta)");
        goto fail;
    }
    json_object_set_new(o, "theorem", json_string(th));
    json_object_set_new(o, "variant", json_string(vs));
    json_object_set_new(o, "guarantee", json_string(v == PRO_PAPER ? "estimate" : "upper_bound"));
    json_object_set_new(o, "conditions", codec_conditions(&rep));
    json_object_set_new(
        o, "reference",
        json_string("seed 002 (proactive DP), Theorem B.4 (and 3.1 when asked), "
                    "with the corrected F of docs/MATH.md section 4 unless variant is paper"));
    if (v == PRO_PAPER)
        json_object_set_new(o, "warnings",
                            json_pack("[s]", "variant paper reproduces the paper's tables with "
                                             "its F and two-step gamma; it misses the paper's "
                                             "own Theorem B.2 by 0.1-0.7%: not a guarantee"));
    http_reply_json(resp, 200, o);
    json_decref(j);
    return;
fail:
    json_decref(o);
    http_reply_problem(resp, &pb);
    json_decref(j);
}

/* ---- POST /v1/rdp (issue 16) ---------------------------------------------------------------- */

/* The RDP request's accountant (auto or rdp) and orders (none: *orders stays NULL, the
 * default orders): 0 with *orders owned by the caller, or -1 with pb set. */
static int decode_rdp(const compute_req *c, double **orders, size_t *n, problem *pb)
{
    int scalar = 0;
    if (c->acct != DP_ACCT_AUTO && c->acct != DP_ACCT_RDP) {
        problem_set(pb, PB_UNSUPPORTED, "accountant",
                    "an RDP curve comes from the rdp accountant only (accountant \"rdp\" or "
                    "\"auto\"; got \"%s\")",
                    dp_accountant_name(c->acct));
        return -1;
    }
    if (json_object_get(c->j, "orders") == NULL)
        return 0;
    if (codec_number_list_inf(c->j, "order", "orders", RDP_MAX_ORDERS, orders, n, &scalar, pb) < 0)
        return -1;
    for (size_t i = 0; i < *n; i++)
        if (!((*orders)[i] > 1.0 && (*orders)[i] <= RDP_MAX_ORDER) && !isinf((*orders)[i])) {
            char f[48], num[DPB_NUM_MAX];
            snprintf(f, sizeof f, "orders[%zu]", i);
            problem_set(pb, PB_INVALID_PARAMETER, f,
                        "'%s' must be greater than 1 and at most %g, or \"infinite\" (the max "
                        "divergence) (got %s)",
                        f, RDP_MAX_ORDER, dpb_num_str((*orders)[i], num));
            return -1;
        }
    return 0;
}

/* The RDP answer: the report, what the bound is, the orders (NULL: the default ones) and the
 * curve's values at them. */
static json_t *rdp_answer(const compute_req *c, const double *orders, const double *curve, size_t n)
{
    json_t *o = json_object();
    put_report(o, &c->rep, &c->opt, c->rel);
    json_object_set_new(o, "bound",
                        json_string("upper bound on the Renyi divergence of order alpha between "
                                    "the outputs on neighbouring datasets, both orders of the "
                                    "pair"));
    json_t *ord = json_array(), *val = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(ord, codec_real(orders ? orders[i] : RDP_DEFAULT_ORDERS[i]));
        json_array_append_new(val, codec_real(curve[i]));
    }
    json_object_set_new(o, "orders", ord);
    json_object_set_new(o, "rdp", val);
    return o;
}

void res_rdp(const http_request *req, http_response *resp)
{
    problem pb = {0};
    compute_req c = {0};
    double *orders = NULL, *curve = NULL;
    size_t n = RDP_NORDERS;
    if (decode_common(req, CODEC_RDP_FIELDS, 1, &c, &pb) < 0 ||
        decode_rdp(&c, &orders, &n, &pb) < 0 ||
        (curve = alloc_or_problem(n * sizeof *curve, &pb)) == NULL) {
        http_reply_problem(resp, &pb);
        goto out;
    }
    double t0 = metrics_now();
    dpb_status st = dp_rdp_curve_at(c.ev, c.rel, orders, n, curve, &c.rep, &c.err);
    metrics_compute("rdp", metrics_now() - t0);
    if (st != DPB_OK)
        reply_core_error(req, resp, &pb, &c.err, &c.rep);
    else
        http_reply_json(resp, 200, rdp_answer(&c, orders, curve, n));
out:
    free(orders);
    free(curve);
    compute_req_release(&c);
}
