/*
 * test_compute.c - the happy paths of POST /v1/delta, /v1/epsilon and /v1/calibrate, with
 * exact values (mpmath references and seed 004 Table 1) wherever they are known.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "suites.h"

/* 1 - (1 - d)^k without cancellation. */
static double compose_tv(double d, double k)
{
    return -expm1(k * log1p(-d));
}

static double delta_of(const char *event_json)
{
    api_reply r;
    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilon\":0}", event_json);
    double d = r.status == 200 ? jnum(r.json, "delta") : NAN;
    api_reply_free(&r);
    return d;
}

static void delta_epoch_table1(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilon\":1}", EPOCH_1);
    CHECK(is_compute_answer(&r));
    const json_t *o = r.json;
    CHECK(jstr(o, "accountant") && strcmp(jstr(o, "accountant"), "thm41") == 0);
    CHECK(jstr(o, "guarantee") && strcmp(jstr(o, "guarantee"), "upper_bound") == 0);
    CHECK(jstr(o, "neighboring_relation") &&
          strcmp(jstr(o, "neighboring_relation"), "add_or_remove_one") == 0);
    CHECK(json_is_true(jget(o, "valid")));
    static const char *const names[] = {"rounds_at_least_3", "sigma_at_least_sqrt_3_over_ln_m",
                                        "thm41_validity"};
    CHECK(json_array_size(jget(o, "conditions")) == 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *c = json_array_get(jget(o, "conditions"), i);
        const char *n = json_string_value(json_object_get(c, "name"));
        CHECKF(n && strcmp(n, names[i]) == 0, "conditions[%zu].name = %s", i, n ? n : "(none)");
        CHECKF(json_is_true(json_object_get(c, "holds")), "conditions[%zu] does not hold", i);
    }
    /* condition sides as evaluated: M >= 3 and sigma >= sqrt(3 / ln M) */
    CHECK(jnum(o, "conditions[0].lhs") == 1140369.0 && jnum(o, "conditions[0].rhs") == 3.0);
    CHECK_REL(jnum(o, "conditions[1].rhs"), sqrt(3.0 / log(1140369.0)), 1e-12);
    CHECK(jnum(o, "conditions[2].lhs") <= jnum(o, "conditions[2].rhs"));

    double d = jnum(o, "delta");
    CHECK_REL(d, DELTA_EPOCH_1, 1e-12);
    CHECKF(d >= DELTA_EPOCH_1, "delta %.17g is below the exact %.17g", d, DELTA_EPOCH_1);
    CHECK_REL(jnum(o, "ln_delta"), log(d), 1e-12);
    CHECK(jnum(o, "epsilon") == 1.0);
    CHECK(json_array_size(jget(o, "results")) == 1);
    CHECK(jnum(o, "results[0].epsilon") == 1.0);
    CHECK(jnum(o, "results[0].delta") == d);
    CHECK(jnum(o, "results[0].ln_delta") == jnum(o, "ln_delta"));
    CHECK(json_array_size(jget(o, "warnings")) > 0);
    api_reply_free(&r);
}

static void delta_epsilons_list_same_delta(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilons\":[0,1,5]}",
              EPOCH_1);
    CHECK(is_compute_answer(&r));
    const json_t *o = r.json;
    CHECK(json_array_size(jget(o, "results")) == 3);
    static const double eps[] = {0, 1, 5};
    for (size_t i = 0; i < 3; i++) {
        char p[64];
        snprintf(p, sizeof p, "results[%zu].epsilon", i);
        CHECKF(jnum(o, p) == eps[i], "%s = %g", p, jnum(o, p));
        snprintf(p, sizeof p, "results[%zu].delta", i);
        CHECK_REL(jnum(o, p), DELTA_EPOCH_1, 1e-12);
        CHECKF(jnum(o, p) == jnum(o, "results[0].delta"), "%s differs from results[0]", p);
    }
    /* the list form has no top-level scalar members */
    CHECK(jget(o, "delta") == NULL);
    CHECK(jget(o, "epsilon") == NULL);
    CHECK(jget(o, "ln_delta") == NULL);
    api_reply_free(&r);
}

static void delta_self_composed_count4(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta",
              "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"SelfComposedDpEvent\","
              "\"count\":4,\"event\":%s},"
              "\"epsilon\":1}",
              EPOCH_1);
    CHECK(is_compute_answer(&r));
    double want = compose_tv(DELTA_EPOCH_1, 4);
    double d = jnum(r.json, "delta");
    CHECK_REL(d, want, 1e-12);
    CHECKF(d >= want, "delta %.17g is below the exact %.17g", d, want);
    CHECK(json_is_true(jget(r.json, "valid")));
    api_reply_free(&r);
}

static void delta_composed_equals_self_composed(void)
{
    api_reply a, b;
    api_postf(&a, "/v1/delta",
              "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":["
              "%s,%s]},\"epsilon\":1}",
              EPOCH_1, EPOCH_1);
    api_postf(&b, "/v1/delta",
              "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"SelfComposedDpEvent\","
              "\"count\":2,\"event\":%s},"
              "\"epsilon\":1}",
              EPOCH_1);
    CHECK(is_compute_answer(&a));
    CHECK(is_compute_answer(&b));
    CHECK_REL(jnum(a.json, "delta"), jnum(b.json, "delta"), 1e-14);
    CHECK_REL(jnum(a.json, "delta"), compose_tv(DELTA_EPOCH_1, 2), 1e-12);
    api_reply_free(&a);
    api_reply_free(&b);
}

static void delta_gdp_clt_estimate(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta",
              "{\"accountant\":\"gdp_clt\",\"event\":{\"class_name\":\"SelfComposedDpEvent\","
              "\"count\":10,\"event\":%s},\"epsilon\":1}",
              EPOCH(1, 10000));
    CHECK(is_compute_answer(&r));
    const json_t *o = r.json;
    CHECK(jstr(o, "accountant") && strcmp(jstr(o, "accountant"), "gdp_clt") == 0);
    CHECK(jstr(o, "guarantee") && strcmp(jstr(o, "guarantee"), "estimate") == 0);
    CHECK(json_array_size(jget(o, "warnings")) > 0);
    /* mpmath */
    CHECK_REL(jnum(o, "ln_delta"), -300.93302753714835, 1e-10);
    CHECK_REL(jnum(o, "results[0].ln_delta"), -300.93302753714835, 1e-10);
    CHECK(jnum(o, "delta") >= 0.0 && jnum(o, "delta") < 1e-100);
    api_reply_free(&r);
}

/* auto picks the exact shuffled accountant and shows Theorem 4.1's answer next to it */
static void delta_auto_is_shuffle_exact(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta", "{\"accountant\":\"auto\",\"event\":%s,\"epsilons\":[0,1]}",
              EPOCH_1);
    CHECK(is_compute_answer(&r));
    CHECK(jstr(r.json, "accountant") && strcmp(jstr(r.json, "accountant"), "shuffle_exact") == 0);
    CHECK(jstr(r.json, "guarantee") && strcmp(jstr(r.json, "guarantee"), "upper_bound") == 0);
    for (int i = 0; i < 2; i++) {
        char p[64];
        snprintf(p, sizeof p, "results[%d].theorem_4_1", i);
        CHECK_REL(jnum(r.json, p), DELTA_EPOCH_1, 1e-12);
        snprintf(p, sizeof p, "results[%d].delta", i);
        /* the exact total variation at M = 1140369 is about 5.2e-4, twenty times tighter */
        CHECKF(jnum(r.json, p) < DELTA_EPOCH_1 / 10.0, "%s = %g", p, jnum(r.json, p));
    }
    CHECK(jnum(r.json, "results[1].delta") < 1e-12);
    api_reply_free(&r);
}

static void epsilon_total_variation(void)
{
    api_reply r;
    api_postf(&r, "/v1/epsilon", "{\"accountant\":\"thm41\",\"event\":%s,\"deltas\":[0.5,0.001]}",
              EPOCH_1);
    CHECK(is_compute_answer(&r));
    const json_t *o = r.json;
    CHECK(json_array_size(jget(o, "results")) == 2);
    CHECK(json_is_number(jget(o, "results[0].epsilon")) && jnum(o, "results[0].epsilon") == 0.0);
    CHECK(json_is_true(jget(o, "results[0].certified")));
    CHECK(jnum(o, "results[0].delta") == 0.5);
    const char *inf = jstr(o, "results[1].epsilon");
    CHECKF(inf && strcmp(inf, "infinite") == 0, "results[1].epsilon is not \"infinite\"");
    CHECK(json_is_false(jget(o, "results[1].certified")));
    CHECK(jnum(o, "results[1].delta") == 0.001);
    CHECK(jget(o, "epsilon") == NULL); /* list form */
    api_reply_free(&r);
}

static void epsilon_gdp_clt_round_trip(void)
{
    api_reply r, back;
    api_postf(&r, "/v1/epsilon", "{\"accountant\":\"gdp_clt\",\"event\":%s,\"delta\":1e-5}",
              EPOCH(1, 10000));
    CHECK(is_compute_answer(&r));
    double eps = jnum(r.json, "epsilon");
    CHECKF(eps > 0.0 && isfinite(eps), "epsilon = %g", eps);
    CHECK(json_is_true(jget(r.json, "results[0].certified")));
    api_postf(&back, "/v1/delta", "{\"accountant\":\"gdp_clt\",\"event\":%s,\"epsilon\":%.17g}",
              EPOCH(1, 10000), eps);
    CHECK(is_compute_answer(&back));
    double d = jnum(back.json, "delta");
    CHECKF(d <= 1e-5, "delta(epsilon(1e-5)) = %.17g", d);
    CHECK_REL(d, 1e-5, 1e-6);
    api_reply_free(&r);
    api_reply_free(&back);
}

static void calibrate_rounds_table1(void)
{
    api_reply r;
    api_postf(&r, "/v1/calibrate",
              "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\","
              "\"noise_multiplier\":1},"
              "\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,\"delta\":0.01},"
              "\"dataset\":{\"clipping_norm\":1,\"max_noise_per_round\":0.1}}");
    CHECK(is_compute_answer(&r));
    const json_t *o = r.json;
    CHECK(jstr(o, "solve_for") && strcmp(jstr(o, "solve_for"), "rounds") == 0);
    CHECK(jint_is(o, "value", 1140369));
    CHECK(jint_is(o, "event.rounds", 1140369));
    CHECK(jnum(o, "event.noise_multiplier") == 1.0);
    CHECK(jnum(o, "achieved.delta") <= 0.01);
    CHECK_REL(jnum(o, "achieved.delta"), DELTA_EPOCH_1, 1e-12);
    CHECK(jnum(o, "target.delta") == 0.01 && jnum(o, "target.epsilon") == 0.0);
    CHECK(jint_is(o, "details.min_dataset_size", 11403690));
    CHECK_REL(jnum(o, "details.rounds_closed_form_eq3"), 1140064.1515594276, 1e-9);
    CHECK(json_array_size(jget(o, "conditions")) > 0);
    size_t i;
    json_t *c;
    json_array_foreach(jget(o, "conditions"), i, c)
        CHECKF(json_is_true(json_object_get(c, "holds")), "conditions[%zu] does not hold", i);
    CHECK(json_is_true(jget(o, "valid")));
    api_reply_free(&r);
}

static const struct {
    const char *sigma;
    long long rounds;
} TABLE1[] = {
    {"0.5", 1574557422}, {"0.75", 3716108}, {"1", 1140369}, {"1.5", 3231737}, {"2", 14889792}};

static void calibrate_rounds_table1_rows(void)
{
    for (size_t k = 0; k < sizeof TABLE1 / sizeof TABLE1[0]; k++) {
        api_reply r;
        api_postf(&r, "/v1/calibrate",
                  "{\"accountant\":\"thm41\",\"event\":{\"class_name\":"
                  "\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":"
                  "%s},\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,\"delta\":0.01}}",
                  TABLE1[k].sigma);
        CHECKF(is_compute_answer(&r), "sigma %s", TABLE1[k].sigma);
        CHECKF(jint_is(r.json, "value", TABLE1[k].rounds), "sigma %s", TABLE1[k].sigma);
        CHECKF(jnum(r.json, "achieved.delta") <= 0.01, "sigma %s", TABLE1[k].sigma);
        api_reply_free(&r);
    }
}

/* The solved rounds are the least that meet the target: one fewer does not. */
static void calibrate_rounds_is_minimal(void)
{
    for (size_t k = 0; k < sizeof TABLE1 / sizeof TABLE1[0]; k++) {
        char ev[160];
        snprintf(ev, sizeof ev,
                 "{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":%s,"
                 "\"rounds\":%lld}",
                 TABLE1[k].sigma, TABLE1[k].rounds);
        double at = delta_of(ev);
        snprintf(ev, sizeof ev,
                 "{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":%s,"
                 "\"rounds\":%lld}",
                 TABLE1[k].sigma, TABLE1[k].rounds - 1);
        double below = delta_of(ev);
        CHECKF(at <= 0.01, "sigma %s: delta(M) = %.17g", TABLE1[k].sigma, at);
        CHECKF(below > 0.01, "sigma %s: delta(M - 1) = %.17g", TABLE1[k].sigma, below);
    }
}

static void calibrate_rounds_four_epochs(void)
{
    static const char *const rounds_forms[] = {"", ",\"rounds\":null"};
    for (size_t k = 0; k < 2; k++) {
        api_reply r;
        api_postf(&r, "/v1/calibrate",
                  "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"SelfComposedDpEvent\","
                  "\"count\":4,\"event\":{"
                  "\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1%s}},"
                  "\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,\"delta\":0.01}}",
                  rounds_forms[k]);
        CHECKF(is_compute_answer(&r), "form '%s'", rounds_forms[k]);
        CHECKF(jint_is(r.json, "value", 18105351), "form '%s'", rounds_forms[k]);
        CHECKF(jint_is(r.json, "event.event.rounds", 18105351), "form '%s'", rounds_forms[k]);
        CHECKF(jint_is(r.json, "event.count", 4), "form '%s'", rounds_forms[k]);
        CHECKF(jnum(r.json, "achieved.delta") <= 0.01, "form '%s'", rounds_forms[k]);
        api_reply_free(&r);
    }
    /* and it is the least: one round fewer per epoch overshoots */
    double below = delta_of(
        "{\"class_name\":\"SelfComposedDpEvent\",\"count\":4,\"event\":" EPOCH(1, 18105350) "}");
    CHECKF(below > 0.01, "delta at 18105350 rounds = %.17g", below);
}

static void calibrate_noise_interval(void)
{
    api_reply r;
    api_postf(&r, "/v1/calibrate",
              "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\","
              "\"rounds\":1140369},"
              "\"solve_for\":\"noise_multiplier\",\"target\":{\"epsilon\":0,\"delta\":0.01}}");
    CHECK(is_compute_answer(&r));
    const json_t *o = r.json;
    double lo = jnum(o, "interval.min"), hi = jnum(o, "interval.max");
    CHECK_REL(lo, 0.9999997413817443, 1e-9);
    CHECK_REL(hi, 1.0650514317157764, 1e-9);
    CHECK(jnum(o, "value") == lo);
    CHECK(jnum(o, "event.noise_multiplier") == lo);
    CHECK(jnum(o, "achieved.delta") <= 0.01);
    CHECK_REL(jnum(o, "details.regime_sigma_max"), 3.7133406706575247, 1e-9);
    api_reply_free(&r);

    /* never overshoots: both ends of the interval meet the target */
    const double ends[] = {lo, hi};
    for (size_t k = 0; k < 2; k++) {
        api_reply d;
        api_postf(&d, "/v1/delta",
                  "{\"accountant\":\"thm41\",\"event\":{\"class_name\":"
                  "\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":"
                  "%.17g,\"rounds\":1140369},\"epsilon\":0}",
                  ends[k]);
        CHECK(is_compute_answer(&d));
        CHECKF(jnum(d.json, "delta") <= 0.01, "sigma %.17g: delta %.17g", ends[k],
               jnum(d.json, "delta"));
        api_reply_free(&d);
    }
}

static void calibrate_noise_infeasible(void)
{
    api_reply r;
    api_postf(&r, "/v1/calibrate",
              "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\","
              "\"rounds\":1000000},"
              "\"solve_for\":\"noise_multiplier\",\"target\":{\"epsilon\":0,\"delta\":0.01}}");
    CHECK(is_problem(&r, 422, "infeasible", "noise_multiplier"));
    CHECK_REL(jnum(r.json, "best_achievable.delta"), 0.010625745913144597, 1e-6);
    CHECK(jstr(r.json, "best_achievable.parameter") &&
          strcmp(jstr(r.json, "best_achievable.parameter"), "noise_multiplier") == 0);
    double at = jnum(r.json, "best_achievable.at");
    CHECKF(at > 0.0 && isfinite(at), "best_achievable.at = %g", at);
    api_reply_free(&r);

    /* Nothing certified even at the best point (the PLD grid of a Laplace mechanism of scale
     * 1e-4 would exceed its size limit, coarsened too): the answer reports no delta there,
     * neither null nor a stale value below the target. */
    api_postf(&r, "/v1/calibrate",
              "{\"accountant\":\"pld\",\"value_discretization_interval\":1e-6,\"event\":{"
              "\"class_name\":\"SelfComposedDpEvent\",\"count\":null,\"event\":{\"class_name\":"
              "\"LaplaceDpEvent\",\"noise_multiplier\":0.0001}},\"solve_for\":\"count\","
              "\"target\":{\"epsilon\":1,\"delta\":1e-5}}");
    CHECK(is_problem(&r, 422, "infeasible", "count"));
    json_t *best = jget(r.json, "best_achievable");
    CHECKF(best == NULL || (json_is_number(json_object_get(best, "delta")) &&
                            json_number_value(json_object_get(best, "delta")) > 1e-5),
           "%.300s", r.body);
    CHECKF(jstr(r.json, "detail") && strstr(jstr(r.json, "detail"), "certifies nothing"), "%.300s",
           r.body);
    api_reply_free(&r);
    /* Gaussian mechanisms alone are exact at any grid (no size limit): one run of noise 0.01
     * gives delta 1 at epsilon 1, and the answer says so. */
    api_postf(&r, "/v1/calibrate",
              "{\"accountant\":\"pld\",\"value_discretization_interval\":1e-6,\"event\":{"
              "\"class_name\":\"SelfComposedDpEvent\",\"count\":null,\"event\":{\"class_name\":"
              "\"GaussianDpEvent\",\"noise_multiplier\":0.01}},\"solve_for\":\"count\","
              "\"target\":{\"epsilon\":1,\"delta\":1e-5}}");
    CHECK(is_problem(&r, 422, "infeasible", "count"));
    CHECKF(jnum(r.json, "best_achievable.delta") == 1.0 &&
               jnum(r.json, "best_achievable.at") == 1.0,
           "%.300s", r.body);
    api_reply_free(&r);
}

static void calibrate_count(void)
{
    api_reply r;
    api_postf(
        &r, "/v1/calibrate",
        "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"event\":%s},"
        "\"solve_for\":\"count\",\"target\":{\"epsilon\":0,\"delta\":0.05}}",
        EPOCH(1, 100000000));
    CHECK(is_compute_answer(&r));
    json_t *v = jget(r.json, "value");
    CHECK(json_is_integer(v) && json_integer_value(v) >= 1);
    long long n = json_is_integer(v) ? (long long)json_integer_value(v) : 1;
    CHECK(jint_is(r.json, "event.count", n));
    CHECK(jnum(r.json, "achieved.delta") <= 0.05);
    api_reply_free(&r);

    char ev[256];
    snprintf(ev, sizeof ev, "{\"class_name\":\"SelfComposedDpEvent\",\"count\":%lld,\"event\":%s}",
             n, EPOCH(1, 100000000));
    double at = delta_of(ev);
    snprintf(ev, sizeof ev, "{\"class_name\":\"SelfComposedDpEvent\",\"count\":%lld,\"event\":%s}",
             n + 1, EPOCH(1, 100000000));
    double above = delta_of(ev);
    CHECKF(at <= 0.05, "delta at count %lld = %.17g", n, at);
    CHECKF(above > 0.05, "delta at count %lld = %.17g", n + 1, above);
}

/* The exact shuffled accountant over HTTP: listed, Theorem 4.1 beside every answer,
 * inversions that meet their targets, a trade-off curve below the exact one. */
static void shuffle_exact_answers(void)
{
    /* its computations take about a second alone; under make test's parallel suites on two
     * cores one took longer than the client's default 10 s: the values are checked here, not
     * the time (the benchmarks time them) */
    api_set_timeout(60);
    api_reply r;
    api_get("/v1/accountants", &r);
    int listed = 0;
    size_t i;
    json_t *a;
    json_array_foreach(jget(r.json, "accountants"), i, a) listed +=
        json_is_string(json_object_get(a, "name")) &&
        strcmp(json_string_value(json_object_get(a, "name")), "shuffle_exact") == 0;
    CHECK(listed == 1);
    api_reply_free(&r);

    /* M = 50 at sigma 2: Theorem 4.1 covers nothing (condition (1)); the exact model does */
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilons\":[0,1]}", EPOCH(2, 50));
    CHECK(is_compute_answer(&r));
    CHECK(jstr(r.json, "accountant") && strcmp(jstr(r.json, "accountant"), "shuffle_exact") == 0);
    CHECK(jstr(r.json, "results[0].theorem_4_1") &&
          strcmp(jstr(r.json, "results[0].theorem_4_1"), "not_covered") == 0);
    double tv = jnum(r.json, "results[0].delta"), d1 = jnum(r.json, "results[1].delta");
    CHECKF(tv > 0.02 && tv < 0.04 && d1 < 1e-10, "tv %g, delta(1) %g", tv, d1);
    api_reply_free(&r);

    /* eps(delta), and delta at that eps meets delta */
    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":1e-6}", EPOCH(2, 50));
    CHECK(is_compute_answer(&r));
    double e = jnum(r.json, "epsilon");
    CHECK(isfinite(e) && e > 0.0 && e < 1.0);
    CHECK(jstr(r.json, "results[0].theorem_4_1") &&
          strcmp(jstr(r.json, "results[0].theorem_4_1"), "infinite") == 0);
    api_reply_free(&r);
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":%.17g}", EPOCH(2, 50), e);
    CHECK(is_compute_answer(&r) && jnum(r.json, "delta") <= 1e-6);
    api_reply_free(&r);

    /* the least noise: a half-line, and Theorem 4.1's answer beside it */
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"rounds\":10},"
              "\"solve_for\":\"noise_multiplier\",\"target\":{\"epsilon\":1,\"delta\":1e-6}}");
    CHECK(is_compute_answer(&r));
    double s = jnum(r.json, "value");
    CHECK(s > 1.0 && s < 3.0 && jnum(r.json, "interval.min") == s);
    CHECK(jstr(r.json, "interval.max") && strcmp(jstr(r.json, "interval.max"), "infinite") == 0);
    CHECK(jnum(r.json, "achieved.delta") <= 1e-6);
    CHECK(jget(r.json, "details.theorem_4_1_value") != NULL);
    api_reply_free(&r);

    /* M = 1 is the Gaussian mechanism: the trade-off envelope lies on or just below G_1 */
    api_postf(&r, "/v1/curve",
              "{\"accountant\":\"shuffle_exact\",\"event\":%s,\"epsilons\":[0,1],"
              "\"alphas\":[0.1,0.5]}",
              EPOCH(1, 1));
    CHECK(is_compute_answer(&r));
    CHECK_REL(jnum(r.json, "curve[1].delta"), 0.12693673750664395, 1e-12);
    double b1 = jnum(r.json, "tradeoff[0].beta"), b5 = jnum(r.json, "tradeoff[1].beta");
    /* G_1(0.1) = Phi(Phi^{-1}(0.9) - 1), G_1(0.5) = Phi(-1) (mpmath) */
    CHECKF(b1 <= 0.61085630835463903 && b1 > 0.6, "beta(0.1) = %.17g", b1);
    CHECKF(b5 <= 0.15865525393145705 && b5 > 0.155, "beta(0.5) = %.17g", b5);
    CHECK(jstr(r.json, "theorem_4_1.delta") &&
          strcmp(jstr(r.json, "theorem_4_1.delta"), "not_covered") == 0);
    api_reply_free(&r);
    api_postf(&r, "/v1/curve", "{\"event\":%s,\"epsilons\":[0,0.1]}", EPOCH_1);
    CHECK(is_compute_answer(&r));
    CHECK_REL(jnum(r.json, "theorem_4_1.delta"), DELTA_EPOCH_1, 1e-12);
    CHECK(jnum(r.json, "curve[0].delta") < DELTA_EPOCH_1 / 10.0);
    api_reply_free(&r);
    api_set_timeout(0);
}

const tl_test COMPUTE_TESTS[] = {
    TL_T(delta_epoch_table1),
    TL_T(shuffle_exact_answers),
    TL_T(delta_epsilons_list_same_delta),
    TL_T(delta_self_composed_count4),
    TL_T(delta_composed_equals_self_composed),
    TL_T(delta_gdp_clt_estimate),
    TL_T(delta_auto_is_shuffle_exact),
    TL_T(epsilon_total_variation),
    TL_T(epsilon_gdp_clt_round_trip),
    TL_T(calibrate_rounds_table1),
    TL_T(calibrate_rounds_table1_rows),
    TL_T(calibrate_rounds_is_minimal),
    TL_T(calibrate_rounds_four_epochs),
    TL_T(calibrate_noise_interval),
    TL_T(calibrate_noise_infeasible),
    TL_T(calibrate_count),
};
const size_t COMPUTE_NTESTS = sizeof COMPUTE_TESTS / sizeof COMPUTE_TESTS[0];
