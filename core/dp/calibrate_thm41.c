/*
 * calibrate_thm41.c - calibration by seed 004 Theorem 4.1 (docs/MATH.md section 2): the exact
 * integer M, the U-shaped noise_multiplier interval, the number of epochs, each from the
 * closed forms of shuffle.h and verified with the probe. Called by calibrate.c; calls
 * calibrate_probe.h and shuffle.h only.
 */
#include "calibrate_thm41.h"

#include <math.h>

#include "shuffle.h"

/* A chain SelfComposed^k(ShuffledEpoch): E identical epochs. Returns the leaf and the
 * product of the known counts (the unknown count excluded). */
static dp_event *epoch_chain(dp_event *ev, double *known_epochs)
{
    *known_epochs = 1.0;
    while (ev->kind == DP_EV_SELF_COMPOSED) {
        if (ev->unknown != DP_PARAM_COUNT)
            *known_epochs *= (double)ev->u.self.count;
        ev = ev->u.self.event;
    }
    return ev->kind == DP_EV_SHUFFLED_EPOCH ? ev : NULL;
}

dpb_status dp_calib_thm41(calib_probe *p, dp_calibration *c)
{
    double epochs, d;
    dp_event *leaf = epoch_chain(p->tmpl, &epochs);
    dp_event *node = p->node;
    if (leaf == NULL)
        return dpb_fail(p->err, DPB_EUNSUPPORTED, "event",
                        "thm41 calibration handles one epoch or a self-composition of "
                        "identical epochs, not a composition of different ones");
    if (!(epochs >= 1.0 && epochs < 1e18))
        return dpb_fail(p->err, DPB_EINVAL, "count", "the number of epochs is out of range");
    double delta_target = p->delta_t;

    if (node->unknown == DP_PARAM_ROUNDS) {
        double sigma = leaf->u.shuffled.noise_multiplier;
        double de = dp_tv_per_epoch(delta_target, (uint64_t)epochs);
        c->per_epoch_delta = de;
        c->rounds_eq3 = dp_thm41_rounds_eq3(sigma, de);
        c->rounds_eq4 = dp_thm41_rounds_eq4(sigma);
        c->regime_delta_max = dp_thm41_regime_delta_max(sigma);
        uint64_t M;
        dpb_status st = dp_thm41_min_rounds(sigma, de, &M, NULL);
        if (st == DPB_EINFEASIBLE) {
            c->has_best = dp_calib_feasible(p, (double)DP_THM41_MAX_ROUNDS, &c->best_delta) >= 0;
            c->best_at = (double)DP_THM41_MAX_ROUNDS;
            return dpb_fail(p->err, st, "rounds",
                            "no number of rounds up to 2^63 - 1 meets delta %.6g with Theorem 4.1",
                            delta_target);
        }
        if (st != DPB_OK)
            return dpb_fail(p->err, st, "event", "noise_multiplier must be a positive number");
        /* The per-epoch split is rounded: step up until the whole tree verifies, then down
         * while it still does, so M is the smallest integer that meets the target. */
        int f = 0;
        for (int i = 0; i < 64 && (f = dp_calib_feasible(p, (double)M, &d)) == 0; i++)
            M += 1 + M / 1000000000000ULL;
        if (f != 1)
            return dpb_fail(p->err, DPB_ENUMERIC, "rounds", "could not verify the solved rounds");
        for (int i = 0; i < 64 && M > 3 && dp_calib_feasible(p, (double)(M - 1), &d) == 1; i++)
            M--;
        c->value = (double)M;
        c->tolerance = 0.0;
    } else if (node->unknown == DP_PARAM_NOISE_MULTIPLIER) {
        uint64_t M = leaf->u.shuffled.rounds;
        double de = dp_tv_per_epoch(delta_target, (uint64_t)epochs);
        c->per_epoch_delta = de;
        double smax;
        if (de < 1.0 / 3.0 && dp_thm41_regime_sigma_max(de, &smax) == DPB_OK)
            c->regime_sigma_max = smax;
        double lo, hi, bd, bs;
        dpb_status st = dp_thm41_sigma_interval(M, de, &lo, &hi, &bd, &bs);
        if (st == DPB_EINFEASIBLE) {
            if (bd < HUGE_VAL) {
                c->has_best = dp_calib_feasible(p, bs, &c->best_delta) >= 0;
                c->best_at = bs;
                return dpb_fail(p->err, st, "noise_multiplier",
                                "no noise_multiplier reaches delta %.6g at M = %llu with "
                                "Theorem 4.1; the smallest certified delta is %.6g at "
                                "noise_multiplier %.6g: use more rounds",
                                delta_target, (unsigned long long)M, c->best_delta, bs);
            }
            return dpb_fail(p->err, st, "rounds",
                            "Theorem 4.1 certifies nothing at M = %llu for any "
                            "noise_multiplier: use more rounds",
                            (unsigned long long)M);
        }
        if (st != DPB_OK)
            return dpb_fail(p->err, st, "rounds", "rounds must be >= 1");
        if (dp_calib_feasible(p, hi, &d) != 1 || dp_calib_feasible(p, lo, &d) != 1)
            return dpb_fail(p->err, DPB_ENUMERIC, "noise_multiplier",
                            "could not verify the interval");
        c->value = lo;
        c->has_interval = 1;
        c->lo = lo;
        c->hi = hi;
        c->tolerance = 1e-12;
    } else if (node->unknown == DP_PARAM_COUNT) {
        dp_thm41 e;
        if (dp_thm41_eval(leaf->u.shuffled.noise_multiplier, leaf->u.shuffled.rounds, &e) !=
            DPB_OK) {
            node->u.self.count = 1;
            return dp_calib_eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &d, p->rep, p->err);
        }
        c->per_epoch_delta = e.delta;
        /* (1 - d)^{epochs x} >= 1 - target  <=>  x <= ln(1 - target) / (epochs ln(1 - d)) */
        double x = floor(log1p(-delta_target) / (epochs * log1p(-e.delta)));
        if (x > 9007199254740992.0)
            x = 9007199254740992.0;
        for (; x >= 1.0 && dp_calib_feasible(p, x, &d) != 1; x -= 1.0)
            ;
        if (x < 1.0) {
            c->has_best = dp_calib_feasible(p, 1.0, &c->best_delta) >= 0;
            c->best_at = 1.0;
            return dpb_fail(p->err, DPB_EINFEASIBLE, "count",
                            "even one epoch exceeds delta %.6g: Theorem 4.1 gives %.6g per "
                            "epoch",
                            delta_target, e.delta);
        }
        c->value = x;
        c->tolerance = 0.0;
    } else {
        return dpb_fail(p->err, DPB_EUNSUPPORTED, "solve_for",
                        "this parameter cannot be solved for with thm41");
    }
    dp_calib_set_param(node, c->value);
    return dp_calib_eval_at(p->tmpl, p->rel, p->acct, p->opt, p->eps_t, &c->achieved_delta, p->rep,
                            p->err);
}

void dp_calib_thm41_alongside(dp_event *tmpl, dp_relation rel, double eps_t, double delta_t,
                              dp_calibration *out)
{
    double epochs;
    int nunk;
    dp_event *node = dp_event_find_unknown(tmpl, &nunk);
    if (epoch_chain(tmpl, &epochs) == NULL || node == NULL)
        return;
    dp_calibration c;
    dp_calib_init(&c, node->unknown);
    dp_report scratch = {0};
    dpb_error e = {0};
    calib_probe q = {tmpl, node, rel, DP_ACCT_THM41, NULL, eps_t, delta_t, &scratch, &e, DPB_OK};
    dpb_status st = dp_calib_thm41(&q, &c);
    if (st == DPB_OK)
        out->thm41_value = c.value;
    else if (st == DPB_EINFEASIBLE || st == DPB_ENOTCOVERED)
        out->thm41_value = HUGE_VAL;
}
