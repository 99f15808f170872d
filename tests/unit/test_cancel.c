/* test_cancel.c - cooperative cancellation (cancel.h): a deadline or a flag stops the PLD,
 * shuffle_exact and calibration computations with DPB_ECANCELLED, leaves no trace (the same
 * question answered afterwards gives the same number, no half-built model is cached), and
 * without a cancellation nothing changes. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "../../core/common/cancel.h"
#include "../../core/dp/account.h"
#include "../../core/dp/shuffle_exact.h"
#include "suites.h"

static dp_event *sampled_times(double q, double sigma, uint64_t n)
{
    dp_event *g = dp_event_new(DP_EV_GAUSSIAN);
    g->u.noise.noise_multiplier = sigma;
    dp_event *p = dp_event_new(DP_EV_POISSON_SAMPLED);
    p->u.sampled.sampling_probability = q;
    p->u.sampled.event = g;
    dp_event *t = dp_event_new(DP_EV_SELF_COMPOSED);
    t->u.self.event = p;
    t->u.self.count = n;
    return t;
}

/* A deadline already past: every accountant entry point that builds a PLD stops at once. */
static void expired_deadline_stops_pld(void)
{
    dp_event *ev = sampled_times(0.01, 0.8, 1000);
    dpb_cancel c = {dpb_cancel_now() - 1.0, NULL};
    dp_options opt = {1e-4, &c};
    double e = 1.0, d = -1.0, dl = 1e-5, eps = -1.0;
    dp_report rep;
    dpb_error err = {0};
    CHECK(dp_delta_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &opt, &e, 1, &d, NULL, NULL, &rep,
                      &err) == DPB_ECANCELLED);
    CHECK(err.status == DPB_ECANCELLED && strstr(err.detail, "deadline") != NULL);
    dpb_error_clear(&err);
    CHECK(dp_epsilon_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &opt, &dl, 1, &eps, NULL, &rep,
                        &err) == DPB_ECANCELLED);
    double beta, alpha = 0.5;
    CHECK(dp_curve(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &opt, &e, 1, &d, &alpha, 1, &beta, &rep,
                   NULL) == DPB_ECANCELLED);
    /* the same question without the deadline: answered, and the scope is gone */
    opt.cancel = NULL;
    CHECK(dp_delta_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &opt, &e, 1, &d, NULL, NULL, &rep,
                      NULL) == DPB_OK);
    CHECK(d > 0.0 && d < 1.0);
    CHECK(dpb_cancelled() == 0);
    /* closed forms have no long loop to stop, but the entry point still refuses to start */
    dp_event *g = dp_event_new(DP_EV_GAUSSIAN);
    g->u.noise.noise_multiplier = 1.0;
    opt.cancel = &c;
    CHECK(dp_delta_ex(g, DP_REL_ADD_OR_REMOVE, DP_ACCT_RDP, &opt, &e, 1, &d, NULL, NULL, &rep,
                      NULL) == DPB_ECANCELLED);
    dp_event_free(g);
    dp_event_free(ev);
}

/* A calibration whose probes are cancelled fails with DPB_ECANCELLED, not infeasible. */
static void calibration_is_cancelled(void)
{
    dp_event *ev = sampled_times(0.01, 1.0, 100);
    ev->u.self.event->u.sampled.event->unknown = DP_PARAM_NOISE_MULTIPLIER;
    int flag = 1;
    dpb_cancel c = {0.0, &flag};
    dp_options opt = {1e-3, &c};
    dp_calibration cal;
    dp_report rep;
    dpb_error err = {0};
    CHECK(dp_calibrate_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &opt, 1.0, 1e-5, &cal, &rep,
                          &err) == DPB_ECANCELLED);
    CHECK(err.status == DPB_ECANCELLED);
    flag = 0;
    CHECK(dp_calibrate_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &opt, 1.0, 1e-5, &cal, &rep,
                          NULL) == DPB_OK);
    CHECK(cal.value > 0.0 && isfinite(cal.value));
    dp_event_free(ev);
}

typedef struct {
    int *flag;
    double after;
} setter;

static void *set_later(void *arg)
{
    setter *s = arg;
    struct timespec t = {0, (long)(s->after * 1e9)};
    nanosleep(&t, NULL);
    __atomic_store_n(s->flag, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* A flag set by another thread stops a long computation in the middle (a fine grid that takes
 * seconds), well before it would have ended. */
static void flag_stops_a_running_computation(void)
{
    dp_event *ev = sampled_times(0.01, 0.8, 1000);
    int flag = 0;
    dpb_cancel c = {0.0, &flag};
    dp_options opt = {3e-6, &c};
    setter s = {&flag, 0.05};
    pthread_t t;
    pthread_create(&t, NULL, set_later, &s);
    double t0 = dpb_cancel_now(), e = 1.0, d;
    dp_report rep;
    dpb_status st =
        dp_delta_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &opt, &e, 1, &d, NULL, NULL, &rep, NULL);
    double took = dpb_cancel_now() - t0;
    pthread_join(t, NULL);
    CHECKF(st == DPB_ECANCELLED, "status %d", (int)st);
    CHECKF(took < 0.5, "stopped after %.3f s (flag set at 0.05 s)", took);
    dp_event_free(ev);
}

/* shuffle_exact: a model whose build was stopped is not cached half-built. */
static void cancelled_exact_model_is_not_cached(void)
{
    shx_cache_clear();
    dp_event *ev = dp_event_new(DP_EV_SHUFFLED_EPOCH);
    ev->u.shuffled.noise_multiplier = 0.9;
    ev->u.shuffled.rounds = 4321;
    dpb_cancel c = {dpb_cancel_now() - 1.0, NULL};
    dp_options opt = {0.0, &c};
    double e = 1.0, d1 = -1, d2 = -1;
    dp_report rep;
    CHECK(dp_delta_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_SHUFFLE_EXACT, &opt, &e, 1, &d1, NULL, NULL,
                      &rep, NULL) == DPB_ECANCELLED);
    CHECK(!shx_cached(0.9, 4321, 0.0));
    CHECK(dp_delta_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_SHUFFLE_EXACT, NULL, &e, 1, &d1, NULL, NULL,
                      &rep, NULL) == DPB_OK);
    CHECK(shx_cached(0.9, 4321, 0.0));
    shx_cache_clear();
    CHECK(dp_delta_ex(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_SHUFFLE_EXACT, NULL, &e, 1, &d2, NULL, NULL,
                      &rep, NULL) == DPB_OK);
    CHECK(d1 == d2);
    dp_event_free(ev);
}

const tl_test CANCEL_TESTS[] = {
    TL_T(expired_deadline_stops_pld),
    TL_T(calibration_is_cancelled),
    TL_T(flag_stops_a_running_computation),
    TL_T(cancelled_exact_model_is_not_cached),
};
const size_t CANCEL_NTESTS = sizeof CANCEL_TESTS / sizeof CANCEL_TESTS[0];
