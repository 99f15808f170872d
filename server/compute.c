/*
 * compute.c - the stateless compute resources: POST /v1/delta, /v1/epsilon, /v1/calibrate
 * and GET /v1/accountants. Each handler has the same shape: decode (strict) -> core ->
 * encode. No numerics here.
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

/* Parse the body, check the top-level fields, decode relation + accountant and, when
 * want_event, the event. */
static json_t *decode_common(const http_request *req, const char *const *allowed, int want_event,
                             dp_event **ev, dp_relation *rel, dp_accountant *acct, dp_options *opt,
                             problem *pb)
{
    memset(opt, 0, sizeof *opt);
    json_t *j =
        req->parsed ? json_incref(req->parsed) : codec_parse_object(req->body, req->body_len, pb);
    if (j == NULL)
        return NULL;
    if (codec_compute_common(j, allowed, rel, acct, opt, pb) < 0)
        goto fail;
    opt->cancel = req->cancel; /* the request's compute deadline */
    if (want_event) {
        *ev = codec_event(json_object_get(j, "event"), "event", DP_PARAM_NONE, pb);
        if (*ev == NULL)
            goto fail;
    }
    return j;
fail:
    json_decref(j);
    return NULL;
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
    if (strcmp(req->path, "/v1/delta") != 0 && strcmp(req->path, "/v1/epsilon") != 0 &&
        strcmp(req->path, "/v1/curve") != 0 && strcmp(req->path, "/v1/calibrate") != 0)
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

void res_delta(const http_request *req, http_response *resp)
{
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    dp_options opt;
    double *eps = NULL, *delta = NULL, *ln_delta = NULL;
    dp_point_extra *aux = NULL;
    size_t n = 0;
    int scalar = 0;
    json_t *j = decode_common(req, CODEC_DELTA_FIELDS, 1, &ev, &rel, &acct, &opt, &pb);
    if (j == NULL || codec_number_list_inf(j, "epsilon", "epsilons", DP_MAX_POINTS, &eps, &n,
                                           &scalar, &pb) < 0) {
        http_reply_problem(resp, &pb);
        goto out;
    }
    delta = malloc(n * sizeof *delta);
    ln_delta = malloc(n * sizeof *ln_delta);
    if (delta == NULL || ln_delta == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        http_reply_problem(resp, &pb);
        goto out;
    }
    dp_report rep;
    dpb_error err = {0};
    aux = malloc(n * sizeof *aux);
    if (aux == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        http_reply_problem(resp, &pb);
        goto out;
    }
    double t0 = metrics_now();
    dpb_status st = dp_delta_ex(ev, rel, acct, &opt, eps, n, delta, ln_delta, aux, &rep, &err);
    metrics_compute(rep.accountant, metrics_now() - t0);
    if (st != DPB_OK) {
        if (strcmp(err.field, "epsilon") == 0 && !scalar)
            strcpy(err.field, "epsilons");
        reply_core_error(req, resp, &pb, &err, &rep);
        goto out;
    }
    jsonout_w w;
    begin_results(&w, &rep, &opt, rel);
    for (size_t i = 0; i < n; i++) {
        jsonout_open(&w, '{');
        write_point(&w, "epsilon", eps[i], "delta", delta[i]);
        write_real(&w, "ln_delta", ln_delta[i]);
        write_extras(&w, &aux[i], 1);
        jsonout_close(&w, '}');
    }
    end_results(&w, ev);
    if (scalar) {
        write_point(&w, "epsilon", eps[0], "delta", delta[0]);
        write_real(&w, "ln_delta", ln_delta[0]);
    }
    reply_written(&w, resp);
out:
    free(eps);
    free(delta);
    free(ln_delta);
    free(aux);
    dp_event_free(ev);
    json_decref(j);
}

void res_epsilon(const http_request *req, http_response *resp)
{
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    dp_options opt;
    double *dl = NULL, *eps = NULL;
    dp_point_extra *aux = NULL;
    size_t n = 0;
    int scalar = 0;
    json_t *j = decode_common(req, CODEC_EPSILON_FIELDS, 1, &ev, &rel, &acct, &opt, &pb);
    if (j == NULL ||
        codec_number_list(j, "delta", "deltas", DP_MAX_POINTS, &dl, &n, &scalar, &pb) < 0) {
        http_reply_problem(resp, &pb);
        goto out;
    }
    eps = malloc(n * sizeof *eps);
    if (eps == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        http_reply_problem(resp, &pb);
        goto out;
    }
    dp_report rep;
    dpb_error err = {0};
    aux = malloc(n * sizeof *aux);
    if (aux == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        http_reply_problem(resp, &pb);
        goto out;
    }
    double t0 = metrics_now();
    dpb_status st = dp_epsilon_ex(ev, rel, acct, &opt, dl, n, eps, aux, &rep, &err);
    metrics_compute(rep.accountant, metrics_now() - t0);
    if (st != DPB_OK) {
        if (strcmp(err.field, "delta") == 0 && !scalar)
            strcpy(err.field, "deltas");
        reply_core_error(req, resp, &pb, &err, &rep);
        goto out;
    }
    jsonout_w w;
    begin_results(&w, &rep, &opt, rel);
    for (size_t i = 0; i < n; i++) {
        jsonout_open(&w, '{');
        write_point(&w, "delta", dl[i], "epsilon", eps[i]);
        jsonout_key(&w, "certified");
        jsonout_bool(&w, isfinite(eps[i]));
        write_extras(&w, &aux[i], 0);
        jsonout_close(&w, '}');
    }
    end_results(&w, ev);
    if (scalar)
        write_point(&w, "delta", dl[0], "epsilon", eps[0]);
    reply_written(&w, resp);
out:
    free(dl);
    free(eps);
    free(aux);
    dp_event_free(ev);
    json_decref(j);
}

void res_calibrate(const http_request *req, http_response *resp)
{
    static const char *const target_fields[] = {"epsilon", "delta", NULL};
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    dp_options opt;
    /* the event is decoded once solve_for is known: it names the field left out */
    json_t *j = decode_common(req, CODEC_CALIBRATE_FIELDS, 0, &ev, &rel, &acct, &opt, &pb);
    const char *sf;
    dp_param param = DP_PARAM_NONE;
    double eps_t = 0, delta_t = 0, clip = 0, ratio = 0;
    int has_dataset = 0;
    if (j == NULL || codec_string(j, "", "solve_for", 1, &sf, &pb) < 0)
        goto fail;
    if (strcmp(sf, "noise_multiplier") == 0)
        param = DP_PARAM_NOISE_MULTIPLIER;
    else if (strcmp(sf, "rounds") == 0)
        param = DP_PARAM_ROUNDS;
    else if (strcmp(sf, "count") == 0)
        param = DP_PARAM_COUNT;
    else if (strcmp(sf, "sampling_probability") == 0)
        param = DP_PARAM_SAMPLING_PROBABILITY;
    else if (strcmp(sf, "noise_std") == 0 || strcmp(sf, "laplace_scale") == 0)
        param = DP_PARAM_NOISE_SCALE;
    else if (strcmp(sf, "dataset_size") == 0)
        param = DP_PARAM_DATASET_SIZE;
    else if (strcmp(sf, "c1") == 0)
        param = DP_PARAM_C1;
    else {
        problem_set(&pb, PB_INVALID_PARAMETER, "solve_for",
                    "solve_for must be \"noise_multiplier\", \"rounds\", \"count\", "
                    "\"sampling_probability\", \"noise_std\", \"laplace_scale\", "
                    "\"dataset_size\" or \"c1\"");
        goto fail;
    }
    json_t *t = json_object_get(j, "target");
    if (t == NULL) {
        problem_set(&pb, PB_MISSING_FIELD, "target",
                    "'target' is required: {\"epsilon\": ..., \"delta\": ...}");
        goto fail;
    }
    if (!json_is_object(t)) {
        problem_set(&pb, PB_WRONG_TYPE, "target", "'target' must be an object");
        goto fail;
    }
    if (codec_only_fields(t, "target", target_fields, &pb) < 0 ||
        codec_number(t, "target", "epsilon", 1, &eps_t, &pb) < 0 ||
        codec_number(t, "target", "delta", 1, &delta_t, &pb) < 0)
        goto fail;
    if ((has_dataset = codec_dataset(j, &clip, &ratio, &pb)) < 0)
        goto fail;
    ev = codec_event(json_object_get(j, "event"), "event", param, &pb);
    if (ev == NULL)
        goto fail;

    dp_calibration cal;
    dp_report rep;
    dpb_error err = {0};
    double t0 = metrics_now();
    dpb_status st = dp_calibrate_ex(ev, rel, acct, &opt, eps_t, delta_t, &cal, &rep, &err);
    metrics_compute(rep.accountant, metrics_now() - t0);
    if (st != DPB_OK) {
        core_problem(req, &pb, &err);
        if (cal.has_best) {
            json_t *best =
                json_pack("{s:o, s:s, s:o}", "delta", codec_real(cal.best_delta), "parameter",
                          dp_param_name(cal.param), "at", codec_real(cal.best_at));
            problem_extra(&pb, "best_achievable", best);
        }
        if (rep.accountant)
            problem_extra(&pb, "accountant", json_string(rep.accountant));
        if (rep.ncond > 0)
            problem_extra(&pb, "conditions", codec_conditions(&rep));
        http_reply_problem(resp, &pb);
        goto out;
    }
    jsonout_w w; /* written straight into the answer (jsonout.h) */
    jsonout_init(&w);
    jsonout_open(&w, '{');
    jsonout_key(&w, "solve_for");
    jsonout_str(&w, sf);
    int integral = cal.param == DP_PARAM_ROUNDS || cal.param == DP_PARAM_COUNT ||
                   cal.param == DP_PARAM_DATASET_SIZE;
    jsonout_key(&w, "value");
    if (integral)
        codec_write_uint(&w, (uint64_t)cal.value);
    else
        codec_write_real(&w, cal.value);
    if (isfinite(cal.tolerance)) { /* as json_real, which holds no NaN or infinity */
        jsonout_key(&w, "tolerance");
        jsonout_realv(&w, cal.tolerance);
    }
    if (cal.has_interval)
        write_pair(&w, "interval", "min", cal.lo, "max", cal.hi);
    write_pair(&w, "target", "epsilon", eps_t, "delta", delta_t);
    write_pair(&w, "achieved", "epsilon", eps_t, "delta", cal.achieved_delta);
    json_t *encoded = codec_encode_event(ev);
    jsonout_key(&w, "event");
    if (encoded)
        jsonout_tree(&w, encoded);
    else
        w.fail = 1;
    json_decref(encoded);
    write_report(&w, &rep, &opt, rel);
    jsonout_key(&w, "details");
    jsonout_open(&w, '{');
    if (!isnan(cal.per_epoch_delta))
        write_real(&w, "per_epoch_delta", cal.per_epoch_delta);
    if (!isnan(cal.rounds_eq3))
        write_real(&w, "rounds_closed_form_eq3", cal.rounds_eq3);
    if (!isnan(cal.rounds_eq4))
        write_real(&w, "rounds_closed_form_eq4", cal.rounds_eq4);
    if (!isnan(cal.regime_delta_max))
        write_real(&w, "regime_delta_max", cal.regime_delta_max);
    if (!isnan(cal.limit_c1))
        write_real(&w, "c1_for_limit", cal.limit_c1);
    if (!isnan(cal.thm41_value)) {
        jsonout_key(&w, "theorem_4_1_value");
        if (isinf(cal.thm41_value))
            jsonout_str(&w, "none");
        else if (integral)
            codec_write_uint(&w, (uint64_t)cal.thm41_value);
        else
            codec_write_real(&w, cal.thm41_value);
    }
    if (!isnan(cal.regime_sigma_max))
        write_real(&w, "regime_sigma_max", cal.regime_sigma_max);
    if (has_dataset > 0) {
        /* seed 004 Table 1: the smallest N with C sigma M / N <= max_noise_per_round */
        const dp_event *leaf = ev;
        while (leaf->kind == DP_EV_SELF_COMPOSED)
            leaf = leaf->u.self.event;
        if (leaf->kind == DP_EV_SHUFFLED_EPOCH) {
            jsonout_key(&w, "min_dataset_size");
            codec_write_uint(&w, dp_thm41_min_dataset(leaf->u.shuffled.noise_multiplier,
                                                      leaf->u.shuffled.rounds, clip, ratio));
        }
    }
    jsonout_close(&w, '}');
    jsonout_close(&w, '}');
    http_reply_written(resp, 200, &w);
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    dp_event_free(ev);
    json_decref(j);
}

/* POST /v1/curve: delta over an epsilon grid and trade-off points, for plotting. */
void res_curve(const http_request *req, http_response *resp)
{
    static const char *const range_fields[] = {"min", "max", "points", NULL};
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    dp_options opt;
    double *eps = NULL, *delta = NULL, *alpha = NULL, *beta = NULL;
    size_t n = 0, na = 0;
    int scalar;
    json_t *j = decode_common(req, CODEC_CURVE_FIELDS, 1, &ev, &rel, &acct, &opt, &pb);
    if (j == NULL)
        goto fail;
    json_t *range = json_object_get(j, "epsilon_range");
    if (range) {
        double lo, hi;
        uint64_t pts;
        if (json_object_get(j, "epsilons")) {
            problem_set(&pb, PB_INVALID_PARAMETER, "epsilons",
                        "give either 'epsilons' or 'epsilon_range', not both");
            goto fail;
        }
        if (!json_is_object(range)) {
            problem_set(&pb, PB_WRONG_TYPE, "epsilon_range",
                        "'epsilon_range' must be {\"min\": ..., \"max\": ..., \"points\": ...}");
            goto fail;
        }
        if (codec_only_fields(range, "epsilon_range", range_fields, &pb) < 0 ||
            codec_number(range, "epsilon_range", "min", 1, &lo, &pb) < 0 ||
            codec_number(range, "epsilon_range", "max", 1, &hi, &pb) < 0 ||
            codec_uint(range, "epsilon_range", "points", 1, 2, DP_MAX_POINTS, &pts, &pb) < 0)
            goto fail;
        if (!(lo >= 0.0 && hi > lo)) {
            problem_set(&pb, PB_INVALID_PARAMETER, "epsilon_range",
                        "epsilon_range needs 0 <= min < max");
            goto fail;
        }
        n = (size_t)pts;
        eps = malloc(n * sizeof *eps);
        if (eps == NULL)
            goto oom;
        for (size_t i = 0; i < n; i++)
            eps[i] = lo + (hi - lo) * (double)i / (double)(n - 1);
    } else if (codec_number_list(j, "epsilons_single_unused", "epsilons", DP_MAX_POINTS, &eps, &n,
                                 &scalar, &pb) < 0) {
        pb.code = PB_NONE;
        problem_set(&pb, PB_MISSING_FIELD, "epsilons",
                    "give 'epsilons' (a list) or 'epsilon_range' {min, max, points}");
        goto fail;
    }
    json_t *al = json_object_get(j, "alphas");
    uint64_t tp = 0;
    int has_tp = codec_uint(j, "", "tradeoff_points", 0, 2, DP_MAX_POINTS, &tp, &pb);
    if (has_tp < 0)
        goto fail;
    if (al && has_tp) {
        problem_set(&pb, PB_INVALID_PARAMETER, "alphas",
                    "give either 'alphas' or 'tradeoff_points', not both");
        goto fail;
    }
    if (al) {
        if (codec_number_list(j, "alphas_single_unused", "alphas", DP_MAX_POINTS, &alpha, &na,
                              &scalar, &pb) < 0)
            goto fail;
    } else if (has_tp) {
        na = (size_t)tp;
        alpha = malloc(na * sizeof *alpha);
        if (alpha == NULL)
            goto oom;
        for (size_t i = 0; i < na; i++)
            alpha[i] = (double)i / (double)(na - 1);
    }
    delta = malloc(n * sizeof *delta);
    beta = malloc((na ? na : 1) * sizeof *beta);
    if (delta == NULL || beta == NULL)
        goto oom;
    dp_report rep;
    dpb_error err = {0};
    double t0 = metrics_now();
    dpb_status st = dp_curve(ev, rel, acct, &opt, eps, n, delta, alpha, na, beta, &rep, &err);
    metrics_compute(rep.accountant, metrics_now() - t0);
    if (st != DPB_OK) {
        reply_core_error(req, resp, &pb, &err, &rep);
        goto out;
    }
    json_t *o = json_object();
    put_report(o, &rep, &opt, rel);
    json_t *curve = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(curve, json_pack("{s:o, s:o}", "epsilon", codec_real(eps[i]), "delta",
                                               codec_real(delta[i])));
    json_object_set_new(o, "curve", curve);
    if (rep.accountant && strcmp(rep.accountant, "shuffle_exact") == 0) {
        /* Theorem 4.1 beside the exact curve: one total-variation delta for every eps, and the
         * trade-off line 1 - alpha - delta */
        dp_report r41;
        double zero = 0.0, d41;
        json_t *t = NULL;
        if (dp_delta(ev, rel, DP_ACCT_THM41, &zero, 1, &d41, NULL, &r41, NULL) == DPB_OK)
            t = json_pack("{s:o}", "delta", codec_real(d41));
        else
            t = json_pack("{s:s}", "delta", "not_covered");
        json_object_set_new(o, "theorem_4_1", t);
    }
    if (na) {
        json_t *tr = json_array();
        for (size_t i = 0; i < na; i++)
            json_array_append_new(tr, json_pack("{s:o, s:o}", "alpha", codec_real(alpha[i]), "beta",
                                                codec_real(beta[i])));
        json_object_set_new(o, "tradeoff", tr);
    }
    http_reply_json(resp, 200, o);
    goto out;
oom:
    problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
fail:
    http_reply_problem(resp, &pb);
out:
    free(eps);
    free(delta);
    free(alpha);
    free(beta);
    dp_event_free(ev);
    json_decref(j);
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

/* One catalogue entry for an event class. */
/* ---- POST /v1/rdp (issue 16) ---------------------------------------------------------------- */

void res_rdp(const http_request *req, http_response *resp)
{
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    dp_options opt;
    double *orders = NULL, *curve = NULL;
    size_t n = RDP_NORDERS;
    int scalar = 0;
    json_t *j = decode_common(req, CODEC_RDP_FIELDS, 1, &ev, &rel, &acct, &opt, &pb);
    if (j == NULL)
        goto fail;
    if (acct != DP_ACCT_AUTO && acct != DP_ACCT_RDP) {
        problem_set(&pb, PB_UNSUPPORTED, "accountant",
                    "an RDP curve comes from the rdp accountant only (accountant \"rdp\" or "
                    "\"auto\"; got \"%s\")",
                    dp_accountant_name(acct));
        goto fail;
    }
    if (json_object_get(j, "orders")) {
        if (codec_number_list(j, "order", "orders", RDP_MAX_ORDERS, &orders, &n, &scalar, &pb) < 0)
            goto fail;
        for (size_t i = 0; i < n; i++)
            if (!(orders[i] > 1.0 && orders[i] <= RDP_MAX_ORDER)) {
                char f[48], num[DPB_NUM_MAX];
                snprintf(f, sizeof f, "orders[%zu]", i);
                problem_set(&pb, PB_INVALID_PARAMETER, f,
                            "'%s' must be greater than 1 and at most %g (got %s)", f, RDP_MAX_ORDER,
                            dpb_num_str(orders[i], num));
                goto fail;
            }
    }
    curve = malloc(n * sizeof *curve);
    if (curve == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    dp_report rep;
    dpb_error err = {0};
    double t0 = metrics_now();
    dpb_status st = dp_rdp_curve_at(ev, rel, orders, n, curve, &rep, &err);
    metrics_compute("rdp", metrics_now() - t0);
    if (st != DPB_OK) {
        reply_core_error(req, resp, &pb, &err, &rep);
        goto out;
    }
    json_t *o = json_object();
    put_report(o, &rep, &opt, rel);
    json_object_set_new(o, "bound",
                        json_string("upper bound on the Renyi divergence of order alpha between "
                                    "the outputs on neighbouring datasets, both orders of the "
                                    "pair"));
    json_t *ord = json_array(), *val = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(ord, json_real(orders ? orders[i] : RDP_DEFAULT_ORDERS[i]));
        json_array_append_new(val, codec_real(curve[i]));
    }
    json_object_set_new(o, "orders", ord);
    json_object_set_new(o, "rdp", val);
    http_reply_json(resp, 200, o);
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    free(orders);
    free(curve);
    dp_event_free(ev);
    json_decref(j);
}

static json_t *event_entry(const char *cls, const char *fields, const char *accountants,
                           const char *description)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "class_name", cls, "fields", fields, "accountants",
                     accountants, "description", description);
}

/* The catalogue entries of the fixed-size and truncated sampling and tree-aggregation
 * classes (event kinds 21..28). */
static void sampling_entries(json_t *ev)
{
    json_array_append_new(
        ev,
        event_entry("SampledWithoutReplacementDpEvent", "source_dataset_size, sample_size, event",
                    "pld (auto; advanced joint convexity, exact for this pair), rdp (Wang, "
                    "Balle, Kasiviswanathan 2019); replace_one only",
                    "the inner Gaussian (or Composed/SelfComposed Gaussians) on a fixed-size "
                    "batch drawn without replacement; noise multipliers relative to the "
                    "clipping norm (dp_accounting's rdp takes them relative to the "
                    "replace-one sensitivity: ours at sigma is theirs at sigma/2)"));
    json_array_append_new(
        ev, event_entry("SampledWithReplacementDpEvent", "source_dataset_size, sample_size, event",
                        "pld (advanced joint convexity over the draw count); replace_one only",
                        "the inner Gaussian on sample_size draws with replacement (a record "
                        "drawn K times shifts the sum by up to 2K); dp_accounting has no "
                        "accountant for it"));
    json_array_append_new(
        ev, event_entry("SingleEpochTreeAggregationDpEvent", "noise_multiplier, step_counts",
                        "gdp_exact (auto), rdp, pld; replace_special only",
                        "one epoch of DP-FTRL tree aggregation: exactly the Gaussian mechanism "
                        "of multiplier noise_multiplier / sqrt(ceil(log2(max steps + 1)))"));
    json_array_append_new(
        ev, event_entry("TruncatedSubsampledGaussianDpEvent",
                        "dataset_size, sampling_probability, truncated_batch_size, "
                        "noise_multiplier",
                        "pld (advanced joint convexity conditioned on the others sampled); "
                        "every relation",
                        "Poisson sampling with the batch cut to truncated_batch_size, then "
                        "Gaussian noise"));
}

/* dp_accounting's mechanism events (issue 16): catalogue entries, with the relations. */
static void mech_event_entries(json_t *ev)
{
    static const struct {
        const char *cls, *fields, *accountants, *description;
    } M[] = {
        {"RandomizedResponseDpEvent", "noise_parameter, num_buckets", "rdp, pld",
         "k-ary randomized response; replace_one only (as dp_accounting)"},
        {"DiscreteGaussianDpEvent", "sigma, sensitivity, dimension", "rdp",
         "discrete Gaussian noise: rho-zCDP with rho = sensitivity^2/(2 sigma^2), any dimension"},
        {"DiscreteLaplaceDpEvent", "noise_parameter, sensitivity", "pld (exact), rdp (pure DP)",
         "discrete Laplace noise on an integer query"},
        {"ExponentialMechanismDpEvent", "epsilon", "rdp (bounded range), pld (epsilon-DP pair)",
         "the epsilon-DP exponential mechanism"},
        {"PermuteAndFlipDpEvent", "epsilon", "rdp, pld (as an epsilon-DP mechanism)",
         "the epsilon-DP permute-and-flip mechanism"},
        {"ZCDpEvent", "rho, xi", "rdp", "(xi, rho)-zCDP: RDP xi + rho alpha"},
        {"MixtureOfGaussiansDpEvent", "standard_deviation, sensitivities, sampling_probs", "pld",
         "N(0, s^2) against sum_i p_i N(c_i, s^2); add_or_remove_one only"},
        {"RepeatAndSelectDpEvent", "event, mean, shape", "rdp",
         "the inner event repeated a random number of times, the best run released "
         "(Papernot & Steinke 2022)"},
    };
    for (size_t i = 0; i < sizeof M / sizeof M[0]; i++)
        json_array_append_new(
            ev, event_entry(M[i].cls, M[i].fields, M[i].accountants, M[i].description));
}

void res_accountants(const http_request *req, http_response *resp)
{
    (void)req;
    json_t *ev = json_array();
    mech_event_entries(ev);
    json_array_append_new(ev,
                          event_entry("GaussianDpEvent", "noise_multiplier", "gdp_exact, rdp, pld",
                                      "Gaussian noise with std noise_multiplier x sensitivity"));
    json_array_append_new(ev,
                          event_entry("LaplaceDpEvent", "noise_multiplier", "rdp, pld",
                                      "Laplace noise with scale noise_multiplier x sensitivity"));
    json_array_append_new(ev, event_entry("EpsilonDeltaDpEvent", "epsilon, delta",
                                          "pld (rdp when delta = 0)",
                                          "any (epsilon, delta)-DP mechanism"));
    json_array_append_new(
        ev, event_entry("PoissonSampledDpEvent", "sampling_probability, event",
                        "rdp (Gaussian inside), pld (Gaussian or Laplace inside); under "
                        "replace_one pld with a Gaussian inside (advanced joint convexity and "
                        "the triangle inequality through the add/remove pairs)",
                        "the inner event on a Poisson sample; add_or_remove_one and "
                        "replace_special (the same pairs), replace_one"));
    json_array_append_new(ev, event_entry("SelfComposedDpEvent", "event, count", "all",
                                          "the event run count times (e.g. epochs)"));
    json_array_append_new(
        ev, event_entry("ComposedDpEvent", "events", "all", "each listed event run once"));
    json_array_append_new(ev, event_entry("NoOpDpEvent", "", "all", "touches no data"));
    json_array_append_new(ev, event_entry("NonPrivateDpEvent", "", "all",
                                          "releases data without noise: infinite cost"));
    json_array_append_new(
        ev, event_entry("ProjectedNoisySgdDpEvent",
                        "noise, noise_std | laplace_scale | noise_schedule | online_schedule, "
                        "lipschitz, smoothness, strong_convexity, learning_rate, diameter | "
                        "interval, dataset_size, order, index",
                        "pnsgd, pld", "one pass of projected noisy SGD (seed 000)"));
    json_array_append_new(ev,
                          event_entry("ProactiveDpSgdDpEvent", "dataset_size, phases, variant",
                                      "proactive (closed form next to RDP, the smaller), rdp, pld",
                                      "a client's local DP-SGD history (seed 002); calculator at "
                                      "POST /v1/proactive"));
    json_array_append_new(
        ev, event_entry("SgldDpEvent",
                        "clipping_norm, batch_size, dataset_size, step_size, steps, sampling",
                        "as the DP-SGD it maps to (clipped only)",
                        "SGLD (seed 003): unclipped is uncertifiable (422); clipped is DP-SGD "
                        "with sigma = 2b/(n C sqrt(eta))"));
    json_array_append_new(
        ev, event_entry("ShuffledDpSgdEpochDpEvent", "noise_multiplier, rounds",
                        "shuffle_exact, thm41, pld (exact epochs, thm41's (0, delta) outside "
                        "the exact range), gdp_clt (estimate)",
                        "one epoch of DP-SGD with random shuffling: M = rounds batches (seed 004); "
                        "add_or_remove_one only"));
    sampling_entries(ev);
    json_t *ac = json_array();
    static const struct {
        const char *name, *guarantee, *description;
    } A[] = {
        {"auto", "upper_bound",
         "rdp for events holding a ZCDpEvent, DiscreteGaussianDpEvent or RepeatAndSelectDpEvent "
         "(only rdp takes them), the smaller of rdp and pld at the first point for events "
         "holding an exponential mechanism, gdp_exact for unsampled Gaussians, shuffle_exact "
         "for shuffled "
         "epochs alone (thm41 outside its range), pld otherwise; never an estimate; the answer "
         "names the accountant picked"},
        {"shuffle_exact", "upper_bound",
         "seed 004's shuffled model computed numerically with a pessimistic discretisation "
         "(docs/MATH.md section 2.1): noise_multiplier 0.5 to 1000, up to 1e7 rounds per epoch; "
         "epochs and "
         "mixtures composed as PLDs; every answer also shows Theorem 4.1's (theorem_4_1)"},
        {"gdp_exact", "upper_bound", "compositions of unsampled Gaussians are exactly mu-GDP"},
        {"rdp", "upper_bound",
         "Renyi DP at dp_accounting's default orders with the improved conversion; answers "
         "name the order that attained the bound; POST /v1/rdp returns the curve at any orders"},
        {"pld", "upper_bound",
         "pessimistic privacy-loss distributions on a grid (value_discretization_interval, "
         "default 1e-4), both directions for sampled events, composed by FFT"},
        {"thm41", "upper_bound",
         "seed 004 Theorem 4.1 (B = 0.4748): a total-variation bound, the same delta for every "
         "epsilon; refuses parameters outside M >= 3, sigma >= sqrt(3/ln M) and condition (1)"},
        {"pnsgd", "upper_bound",
         "seed 000's bounds for projected noisy SGD; passes by optimal (KOV) composition"},
        {"proactive", "upper_bound",
         "seed 002's closed form (corrected F) reported next to RDP for the same history; the "
         "smaller is certified"},
        {"gdp_clt", "estimate",
         "seed 004 Theorem 5.2 asymptotic mu-GDP: for orientation only, never enforce with it"},
    };
    for (size_t i = 0; i < sizeof A / sizeof A[0]; i++)
        json_array_append_new(ac, json_pack("{s:s, s:s, s:s}", "name", A[i].name, "guarantee",
                                            A[i].guarantee, "description", A[i].description));
    json_t *o = json_pack("{s:o, s:o, s:[s,s,s], s:{s:s, s:s, s:s}, s:[s,s,s,s]}", "events", ev,
                          "accountants", ac, "neighboring_relations", "add_or_remove_one",
                          "replace_one", "replace_special", "guarantees", "upper_bound",
                          "the true value is at most this: safe to rely on", "estimate",
                          "an approximation: never used for enforcement", "lower_bound",
                          "the true value is at least this: an attack or diagnostic", "solve_for",
                          "noise_multiplier", "rounds", "count", "sampling_probability");
    if (o) {
        json_t *more = json_pack("[s,s,s,s]", "noise_std", "laplace_scale", "dataset_size", "c1");
        json_array_extend(json_object_get(o, "solve_for"), more);
        json_decref(more);
    }
    http_reply_json(resp, o ? 200 : 500, o);
}
