/*
 * calibrate_probe.c - the calibration's probe: set the unknown parameter of a template,
 * evaluate delta at the target epsilon with the accountant itself, and say whether the
 * target is met. Called by calibrate.c and calibrate_thm41.c; calls dispatch.h only.
 */
#include "calibrate_probe.h"

#include <math.h>
#include <string.h>

#include "dispatch.h"

void dp_calib_init(dp_calibration *c, dp_param p)
{
    memset(c, 0, sizeof *c);
    c->param = p;
    c->value = c->lo = c->hi = c->achieved_delta = NAN;
    c->best_delta = c->best_at = NAN;
    c->per_epoch_delta = c->rounds_eq3 = c->rounds_eq4 = NAN;
    c->regime_delta_max = c->regime_sigma_max = NAN;
    c->limit_c1 = NAN;
    c->thm41_value = NAN;
}

dpb_status dp_calib_eval_at(dp_event *tmpl, dp_relation rel, dp_accountant acct,
                            const dp_options *opt, double eps_t, double *delta, dp_report *rep,
                            dpb_error *err)
{
    dp_profile pr;
    dpb_status st = dp_dispatch_build(tmpl, rel, acct, opt, NULL, &pr, rep, err);
    if (st != DPB_OK)
        return st;
    *delta = dp_profile_delta(&pr, eps_t, NULL, NULL);
    dp_profile_release(&pr);
    return DPB_OK;
}

/* The unknown field of node when it holds an integer (rounds, count, dataset_size), else
 * NULL. */
static uint64_t *integer_field(dp_event *node)
{
    if (node->unknown == DP_PARAM_ROUNDS)
        return &node->u.shuffled.rounds;
    if (node->unknown == DP_PARAM_COUNT)
        return &node->u.self.count;
    return node->unknown == DP_PARAM_DATASET_SIZE ? &node->u.pnsgd.n : NULL;
}

/* The unknown field of node when it holds a real number, else NULL. */
static double *real_field(dp_event *node)
{
    switch (node->unknown) {
    case DP_PARAM_NOISE_MULTIPLIER:
        return node->kind == DP_EV_SHUFFLED_EPOCH ? &node->u.shuffled.noise_multiplier
                                                  : &node->u.noise.noise_multiplier;
    case DP_PARAM_SAMPLING_PROBABILITY:
        return &node->u.sampled.sampling_probability;
    case DP_PARAM_NOISE_SCALE:
        return &node->u.pnsgd.noise_level;
    case DP_PARAM_C1:
        return &node->u.pnsgd.c1;
    default:
        return NULL;
    }
}

void dp_calib_set_param(dp_event *node, double v)
{
    uint64_t *n = integer_field(node);
    double *x = real_field(node);
    if (n)
        *n = (uint64_t)v;
    else if (x)
        *x = v;
}

int dp_calib_feasible(calib_probe *p, double v, double *delta)
{
    dp_calib_set_param(p->node, v);
    dp_report scratch;
    dpb_error e = {0};
    double d;
    dpb_status st = dp_calib_eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &d, &scratch, &e);
    if (st == DPB_ENOTCOVERED || st == DPB_ELIMIT) {
        /* nothing certified at this value: for the solver, not feasible, and no delta */
        if (delta)
            *delta = NAN;
        return 0;
    }
    if (st != DPB_OK) {
        p->fatal = st;
        if (p->err && p->err->status == DPB_OK)
            *p->err = e;
        return -1;
    }
    if (delta)
        *delta = d;
    return d <= p->delta_t;
}
