/*
 * compute.c - the stateless compute resources: POST /v1/delta, /v1/epsilon, /v1/calibrate
 * and GET /v1/accountants. Each handler has the same shape: decode (strict) -> core ->
 * encode. No numerics here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dp/account.h"
#include "../core/dp/shuffle.h"
#include "codec.h"
#include "resources.h"

/* Parse the body, check the top-level fields, decode relation + accountant and, when
 * want_event, the event. */
static json_t *decode_common(const http_request *req, const char *const *allowed, int want_event,
                             dp_event **ev, dp_relation *rel, dp_accountant *acct, problem *pb)
{
    json_t *j = codec_parse_object(req->body, req->body_len, pb);
    if (j == NULL)
        return NULL;
    if (codec_only_fields(j, "", allowed, pb) < 0 ||
        codec_relation_accountant(j, rel, acct, pb) < 0)
        goto fail;
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

/* A refusal from core, with the conditions that were checked when there are any. */
static void reply_core_error(http_response *resp, problem *pb, const dpb_error *err,
                             const dp_report *rep)
{
    problem_from_error(pb, err);
    if (rep->accountant)
        problem_extra(pb, "accountant", json_string(rep->accountant));
    if (rep->ncond > 0)
        problem_extra(pb, "conditions", codec_conditions(rep));
    http_reply_problem(resp, pb);
}

void res_delta(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {
        "event", "epsilon", "epsilons", "neighboring_relation", "accountant", NULL};
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    double *eps = NULL, *delta = NULL, *ln_delta = NULL;
    size_t n = 0;
    int scalar = 0;
    json_t *j = decode_common(req, allowed, 1, &ev, &rel, &acct, &pb);
    if (j == NULL ||
        codec_number_list(j, "epsilon", "epsilons", DP_MAX_POINTS, &eps, &n, &scalar, &pb) < 0) {
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
    dpb_status st = dp_delta(ev, rel, acct, eps, n, delta, ln_delta, &rep, &err);
    if (st != DPB_OK) {
        if (strcmp(err.field, "epsilon") == 0 && !scalar)
            strcpy(err.field, "epsilons");
        reply_core_error(resp, &pb, &err, &rep);
        goto out;
    }
    json_t *o = json_object();
    json_object_set_new(o, "neighboring_relation", json_string(dp_relation_name(rel)));
    codec_put_report(o, &rep);
    json_t *res = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(res,
                              json_pack("{s:o, s:o, s:o}", "epsilon", codec_real(eps[i]), "delta",
                                        codec_real(delta[i]), "ln_delta", codec_real(ln_delta[i])));
    json_object_set_new(o, "results", res);
    if (scalar) {
        json_object_set_new(o, "epsilon", codec_real(eps[0]));
        json_object_set_new(o, "delta", codec_real(delta[0]));
        json_object_set_new(o, "ln_delta", codec_real(ln_delta[0]));
    }
    http_reply_json(resp, 200, o);
out:
    free(eps);
    free(delta);
    free(ln_delta);
    dp_event_free(ev);
    json_decref(j);
}

void res_epsilon(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {"event",      "delta", "deltas", "neighboring_relation",
                                          "accountant", NULL};
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    double *dl = NULL, *eps = NULL;
    size_t n = 0;
    int scalar = 0;
    json_t *j = decode_common(req, allowed, 1, &ev, &rel, &acct, &pb);
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
    dpb_status st = dp_epsilon(ev, rel, acct, dl, n, eps, &rep, &err);
    if (st != DPB_OK) {
        if (strcmp(err.field, "delta") == 0 && !scalar)
            strcpy(err.field, "deltas");
        reply_core_error(resp, &pb, &err, &rep);
        goto out;
    }
    json_t *o = json_object();
    json_object_set_new(o, "neighboring_relation", json_string(dp_relation_name(rel)));
    codec_put_report(o, &rep);
    json_t *res = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(res,
                              json_pack("{s:o, s:o, s:b}", "delta", codec_real(dl[i]), "epsilon",
                                        codec_real(eps[i]), "certified", isfinite(eps[i])));
    json_object_set_new(o, "results", res);
    if (scalar) {
        json_object_set_new(o, "delta", codec_real(dl[0]));
        json_object_set_new(o, "epsilon", codec_real(eps[0]));
    }
    http_reply_json(resp, 200, o);
out:
    free(dl);
    free(eps);
    dp_event_free(ev);
    json_decref(j);
}

/* Optional {"clipping_norm": C, "max_noise_per_round": r} for the seed 004 dataset size. */
static int decode_dataset(json_t *j, double *clip, double *ratio, problem *pb)
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

void res_calibrate(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {
        "event", "solve_for", "target", "neighboring_relation", "accountant", "dataset", NULL};
    static const char *const target_fields[] = {"epsilon", "delta", NULL};
    problem pb = {0};
    dp_event *ev = NULL;
    dp_relation rel;
    dp_accountant acct;
    /* the event is decoded once solve_for is known: it names the field left out */
    json_t *j = decode_common(req, allowed, 0, &ev, &rel, &acct, &pb);
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
    else {
        problem_set(&pb, PB_INVALID_PARAMETER, "solve_for",
                    "solve_for must be \"noise_multiplier\", \"rounds\" or \"count\"");
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
    if ((has_dataset = decode_dataset(j, &clip, &ratio, &pb)) < 0)
        goto fail;
    ev = codec_event(json_object_get(j, "event"), "event", param, &pb);
    if (ev == NULL)
        goto fail;

    dp_calibration cal;
    dp_report rep;
    dpb_error err = {0};
    dpb_status st = dp_calibrate(ev, rel, acct, eps_t, delta_t, &cal, &rep, &err);
    if (st != DPB_OK) {
        problem_from_error(&pb, &err);
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
    json_t *o = json_object();
    json_object_set_new(o, "solve_for", json_string(dp_param_name(cal.param)));
    json_object_set_new(o, "value",
                        cal.param == DP_PARAM_NOISE_MULTIPLIER
                            ? codec_real(cal.value)
                            : codec_uint_json((uint64_t)cal.value));
    if (cal.has_interval)
        json_object_set_new(
            o, "interval",
            json_pack("{s:o, s:o}", "min", codec_real(cal.lo), "max", codec_real(cal.hi)));
    json_object_set_new(
        o, "target",
        json_pack("{s:o, s:o}", "epsilon", codec_real(eps_t), "delta", codec_real(delta_t)));
    json_object_set_new(o, "achieved",
                        json_pack("{s:o, s:o}", "epsilon", codec_real(eps_t), "delta",
                                  codec_real(cal.achieved_delta)));
    json_object_set_new(o, "event", codec_encode_event(ev));
    json_object_set_new(o, "neighboring_relation", json_string(dp_relation_name(rel)));
    codec_put_report(o, &rep);
    json_t *det = json_object();
    if (!isnan(cal.per_epoch_delta))
        json_object_set_new(det, "per_epoch_delta", codec_real(cal.per_epoch_delta));
    if (!isnan(cal.rounds_eq3))
        json_object_set_new(det, "rounds_closed_form_eq3", codec_real(cal.rounds_eq3));
    if (!isnan(cal.rounds_eq4))
        json_object_set_new(det, "rounds_closed_form_eq4", codec_real(cal.rounds_eq4));
    if (!isnan(cal.regime_delta_max))
        json_object_set_new(det, "regime_delta_max", codec_real(cal.regime_delta_max));
    if (!isnan(cal.regime_sigma_max))
        json_object_set_new(det, "regime_sigma_max", codec_real(cal.regime_sigma_max));
    if (has_dataset > 0) {
        /* seed 004 Table 1: the smallest N with C sigma M / N <= max_noise_per_round */
        const dp_event *leaf = ev;
        while (leaf->kind == DP_EV_SELF_COMPOSED)
            leaf = leaf->u.self.event;
        if (leaf->kind == DP_EV_SHUFFLED_EPOCH)
            json_object_set_new(
                det, "min_dataset_size",
                codec_uint_json(dp_thm41_min_dataset(leaf->u.shuffled.noise_multiplier,
                                                     leaf->u.shuffled.rounds, clip, ratio)));
    }
    json_object_set_new(o, "details", det);
    http_reply_json(resp, 200, o);
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    dp_event_free(ev);
    json_decref(j);
}

void res_accountants(const http_request *req, http_response *resp)
{
    (void)req;
    json_t *o = json_pack(
        "{s:[{s:s, s:[s,s], s:s}, {s:s, s:[s,s], s:s}, {s:s, s:[s], s:s}],"
        " s:[{s:s, s:s, s:[s], s:s, s:s}, {s:s, s:s, s:[s], s:s, s:s}],"
        " s:[s,s], s:{s:s, s:s, s:s}, s:[s,s,s]}",
        "events", "class_name", "ShuffledDpSgdEpochDpEvent", "fields", "noise_multiplier", "rounds",
        "description",
        "one epoch of DP-SGD with random shuffling: M = rounds batches, Gaussian noise with "
        "multiplier noise_multiplier (seed 004)",
        "class_name", "SelfComposedDpEvent", "fields", "event", "count", "description",
        "the event run count times (e.g. epochs)", "class_name", "ComposedDpEvent", "fields",
        "events", "description", "each listed event run once", "accountants", "name", "thm41",
        "guarantee", "upper_bound", "events", "ShuffledDpSgdEpochDpEvent", "reference",
        "seed 004 (van Dijk & Ertan), Theorem 4.1, B = 0.4748; exact f_{0,delta} composition",
        "description",
        "a total-variation bound: the same delta for every epsilon >= 0; refuses parameters "
        "outside M >= 3, sigma >= sqrt(3/ln M) and condition (1)",
        "name", "gdp_clt", "guarantee", "estimate", "events", "ShuffledDpSgdEpochDpEvent",
        "reference", "seed 004 Theorem 5.2 (asymptotic mu-GDP)", "description",
        "an approximation for orientation only: never enforce with it", "neighboring_relations",
        "add_or_remove_one", "replace_one", "guarantees", "upper_bound",
        "the true value is at most this: safe to rely on", "estimate",
        "an approximation: never used for enforcement", "lower_bound",
        "the true value is at least this: an attack or diagnostic", "solve_for", "noise_multiplier",
        "rounds", "count");
    http_reply_json(resp, o ? 200 : 500, o);
}
