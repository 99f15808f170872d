/*
 * codec_encode.c - the codec's encoders: a dp_event tree as its dp_accounting JSON
 * (codec_encode_event), reals and counts as JSON values ("infinite" for +inf), and a report's
 * accountant, guarantee, conditions and warnings, as a tree or written into an answer
 * (jsonout). Calls jsonout, core/dp's names and the flat events' table
 * (codec.c, codec_field.h); decoding is codec.c and codec_event.c.
 */
#include "codec.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codec_field.h"

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

/* ---- issue 16: dp_accounting's mechanism events ---- */
static json_t *real_array(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, codec_real(v[i]));
    return a;
}

/* A flat mechanism event as its JSON: class_name, then the fields of its table row. */
static json_t *encode_flat(const dp_event *ev, const codec_flat_event *fe)
{
    json_t *o = json_object();
    json_object_set_new(o, "class_name", json_string(fe->cls));
    for (int i = 0; o && i < 3 && fe->f[i].key; i++) {
        const codec_flat_field *f = &fe->f[i];
        const char *at = (const char *)ev + f->off;
        json_t *v;
        if (f->whole) {
            uint64_t u;
            memcpy(&u, at, sizeof u);
            v = !f->required && u == 0 ? json_null() : codec_uint_json(u);
        } else {
            double x;
            memcpy(&x, at, sizeof x);
            v = codec_real(x);
        }
        json_object_set_new(o, f->key, v);
    }
    return o;
}

static json_t *encode_mech(const dp_event *ev)
{
    for (size_t i = 0; i < CODEC_NFLAT; i++)
        if (CODEC_FLAT[i].kind == ev->kind)
            return encode_flat(ev, &CODEC_FLAT[i]);
    switch (ev->kind) {
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
