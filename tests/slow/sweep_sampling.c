/*
 * sweep_sampling.c - slow soundness sweep of the sampled events (make test-slow; not part
 * of make test). For 64 random one-step cases (a fixed seed; tests/ref/gen_ref_audit.py
 * --sweep -> ref_audit_sweep.h) of Poisson sampling under replace_one, fixed-size batches
 * without and with replacement, and truncated Poisson sampling under all three relations,
 * at 4 eps each, the pld answer (and rdp's, without replacement) must be at least the
 * exact hockey-stick divergence of neighbouring datasets the mechanism can meet (mpmath).
 * Prints one line per failure, the smallest ratio answer / reference per class, and the
 * closing "slow sampling: N passed, M failed".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../core/dp/account.h"
#include "../../core/dp/event.h"
#include "ref_audit_sweep.h"

static dp_event *gauss(double s)
{
    dp_event *e = dp_event_new(DP_EV_GAUSSIAN);
    e->u.noise.noise_multiplier = s;
    return e;
}

static dp_event *build(const struct ref_audit_sweep *r)
{
    dp_event *e;
    switch (r->kind) {
    case 0:
        e = dp_event_new(DP_EV_POISSON_SAMPLED);
        e->u.sampled.sampling_probability = r->q;
        e->u.sampled.event = gauss(r->sigma);
        return e;
    case 1:
    case 2:
        e = dp_event_new(r->kind == 1 ? DP_EV_SAMPLED_WITHOUT_REPLACEMENT
                                      : DP_EV_SAMPLED_WITH_REPLACEMENT);
        e->u.fixed.population = r->n;
        e->u.fixed.sample_size = r->m_or_b;
        e->u.fixed.event = gauss(r->sigma);
        return e;
    default:
        e = dp_event_new(DP_EV_TRUNCATED_GAUSSIAN);
        e->u.truncated.dataset_size = r->n;
        e->u.truncated.sampling_probability = r->q;
        e->u.truncated.batch_size = r->m_or_b;
        e->u.truncated.noise_multiplier = r->sigma;
        return e;
    }
}

int main(void)
{
    static const char *const names[] = {"poisson replace_one", "without replacement",
                                        "with replacement", "truncated"};
    double worst[4][2] = {
        {HUGE_VAL, HUGE_VAL}, {HUGE_VAL, HUGE_VAL}, {HUGE_VAL, HUGE_VAL}, {HUGE_VAL, HUGE_VAL}};
    int pass = 0, fail = 0;
    for (size_t i = 0; i < REF_AUDIT_SWEEP_COUNT; i++) {
        const struct ref_audit_sweep *r = &REF_AUDIT_SWEEP[i];
        dp_event *ev = build(r);
        for (int a = 0; a < (r->kind == 1 ? 2 : 1); a++) {
            dp_accountant acct = a == 0 ? DP_ACCT_PLD : DP_ACCT_RDP;
            dp_options opt = {1e-3, NULL}; /* every grid gives an upper bound */
            double eps = r->eps, d = NAN;
            dp_report rep;
            dpb_error err = {0};
            dpb_status st = dp_delta_ex(ev, (dp_relation)r->rel, acct, &opt, &eps, 1, &d, NULL,
                                        NULL, &rep, &err);
            if (st != DPB_OK || !(d >= r->delta)) {
                fail++;
                printf("FAIL %s rel %d %s: n %llu m/B %llu q %g sigma %g eps %g: %.17g < %.17g "
                       "(status %d %s)\n",
                       names[r->kind], r->rel, a ? "rdp" : "pld", r->n, r->m_or_b, r->q, r->sigma,
                       r->eps, d, r->delta, st, err.detail);
            } else {
                pass++;
                if (r->delta > 1e-300 && d / r->delta < worst[r->kind][a])
                    worst[r->kind][a] = d / r->delta;
            }
        }
        dp_event_free(ev);
    }
    for (int k = 0; k < 4; k++)
        for (int a = 0; a < (k == 1 ? 2 : 1); a++)
            printf("%s %s: smallest answer / realizable %.12g\n", names[k], a ? "rdp" : "pld",
                   worst[k][a]);
    printf("slow sampling: %d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
