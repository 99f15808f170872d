/*
 * test_accountants_api.c - the standard accountants over HTTP (issue 3): auto picks and
 * names its accountant, RDP/PLD/exact-GDP values against docs/MATH.md section 6, curves,
 * calibration of sigma / count / sampling rate, refusals; and the contract file naming
 * every route and problem code the server has.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../server/problem.h"
#include "../../server/resources.h"
#include "check.h"
#include "suites.h"

#define POISSON_RUN                                                                                \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":1000,\"event\":{\"class_name\":"            \
    "\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":{\"class_name\":"           \
    "\"GaussianDpEvent\",\"noise_multiplier\":1}}}"
#define GAUSS_100                                                                                  \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":100,\"event\":{\"class_name\":"             \
    "\"GaussianDpEvent\",\"noise_multiplier\":10}}"

static int is(const json_t *o, const char *path, const char *want)
{
    const char *s = jstr(o, path);
    return s && strcmp(s, want) == 0;
}

static void rdp_and_pld_reference_values(void)
{
    api_reply r;
    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":1e-5,\"accountant\":\"rdp\"}",
              POISSON_RUN);
    CHECK(is_compute_answer(&r));
    CHECK(is(r.json, "accountant", "rdp") && is(r.json, "guarantee", "upper_bound"));
    CHECK_REL(jnum(r.json, "epsilon"), 2.10137, 5e-6);
    CHECK(jnum(r.json, "results[0].rdp_order") == 7.8);
    api_reply_free(&r);

    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":1e-5,\"accountant\":\"pld\"}",
              POISSON_RUN);
    CHECK(is_compute_answer(&r));
    CHECK(is(r.json, "accountant", "pld"));
    CHECK_REL(jnum(r.json, "epsilon"), 1.82824, 1e-3);
    CHECK(jnum(r.json, "epsilon") >= 1.8181);
    CHECK(jnum(r.json, "value_discretization_interval") == 1e-4);
    CHECK(jget(r.json, "results[0].rdp_order") == NULL);
    api_reply_free(&r);

    /* auto on a sampled event is pld, and says so */
    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":1e-5}", POISSON_RUN);
    CHECK(is(r.json, "accountant", "pld"));
    api_reply_free(&r);
}

static void auto_is_exact_for_gaussians(void)
{
    api_reply r;
    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":1e-5}", GAUSS_100);
    CHECK(is_compute_answer(&r));
    CHECK(is(r.json, "accountant", "gdp_exact") && is(r.json, "guarantee", "upper_bound"));
    CHECK_REL(jnum(r.json, "epsilon"), 4.37718, 2e-6);
    api_reply_free(&r);
    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":1e-5,\"accountant\":\"rdp\"}", GAUSS_100);
    CHECK_REL(jnum(r.json, "epsilon"), 4.72851, 2e-6);
    api_reply_free(&r);
    /* replace_one halves the noise multiplier: sigma 20 replace == sigma 10 add/remove */
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":100,\"event\":{"
              "\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":20}},\"delta\":1e-5,"
              "\"neighboring_relation\":\"replace_one\"}");
    CHECK(is(r.json, "neighboring_relation", "replace_one"));
    CHECK_REL(jnum(r.json, "epsilon"), 4.37718, 2e-6);
    api_reply_free(&r);
}

static void mixed_events_and_edges(void)
{
    api_reply r;
    /* an epoch of shuffled DP-SGD, a Laplace release and an (eps, delta) step, together */
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[{\"class_name\":"
              "\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1,\"rounds\":1140369},{"
              "\"class_name\":\"LaplaceDpEvent\",\"noise_multiplier\":2},{\"class_name\":"
              "\"EpsilonDeltaDpEvent\",\"epsilon\":0.5,\"delta\":1e-6},{\"class_name\":"
              "\"NoOpDpEvent\"}]},\"epsilons\":[0,1,3]}");
    CHECK(is_compute_answer(&r));
    CHECK(is(r.json, "accountant", "pld"));
    CHECK(jnum(r.json, "results[0].delta") >= jnum(r.json, "results[1].delta"));
    CHECK(jnum(r.json, "results[1].delta") >= jnum(r.json, "results[2].delta"));
    /* the epoch is accounted with its exact model (shuffle_exact's total variation, about
     * 4.9e-4), not Theorem 4.1's 0.00999999916502 at every epsilon */
    api_reply e;
    api_postf(&e, "/v1/delta",
              "{\"accountant\":\"shuffle_exact\",\"event\":{\"class_name\":"
              "\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1,\"rounds\":1140369},"
              "\"epsilon\":0}");
    CHECK(is_compute_answer(&e));
    double tv = jnum(e.json, "delta");
    CHECKF(tv > 4.8e-4 && tv < 5e-4, "tv %g", tv);
    CHECKF(jnum(r.json, "results[0].delta") >= tv, "%g < %g", jnum(r.json, "results[0].delta"), tv);
    CHECK(jnum(r.json, "results[2].delta") < 1e-3);
    api_reply_free(&e);
    api_reply_free(&r);
    /* NonPrivate: infinite epsilon, delta 1 */
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"NonPrivateDpEvent\"},\"delta\":0.5,\"accountant\":"
              "\"rdp\"}");
    CHECK(is(r.json, "epsilon", "infinite") && json_is_false(jget(r.json, "results[0].certified")));
    api_reply_free(&r);
    /* a grid the PLD cannot hold */
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":0.001},"
              "\"epsilon\":1,\"accountant\":\"pld\",\"value_discretization_interval\":1e-6}");
    CHECK(is_problem(&r, 400, "limit_exceeded", "value_discretization_interval"));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1},"
              "\"epsilon\":1,\"value_discretization_interval\":0.5}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "value_discretization_interval"));
    api_reply_free(&r);
    /* Poisson sampling under replace_one has no RDP curve here: refused, not converted
     * (pld answers it, test_sampling_api.c) */
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.1,"
              "\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1}},"
              "\"epsilon\":1,\"neighboring_relation\":\"replace_one\",\"accountant\":\"rdp\"}");
    CHECK(is_problem(&r, 422, "unsupported", "neighboring_relation"));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":1.5,"
              "\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1}},"
              "\"epsilon\":1}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "event.sampling_probability"));
    api_reply_free(&r);
}

static void curve_and_tradeoff(void)
{
    api_reply r;
    api_postf(&r, "/v1/curve",
              "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1},"
              "\"epsilon_range\":{\"min\":0,\"max\":4,\"points\":41},\"tradeoff_points\":11}");
    CHECK(is_compute_answer(&r));
    CHECK(json_array_size(jget(r.json, "curve")) == 41);
    CHECK(json_array_size(jget(r.json, "tradeoff")) == 11);
    /* 1-GDP: f(alpha) = Phi(Phi^{-1}(1 - alpha) - 1); at alpha = 0.5: Phi(-1) */
    CHECK_REL(jnum(r.json, "tradeoff[5].beta"), 0.15865525393145705, 1e-12);
    CHECK(jnum(r.json, "tradeoff[0].beta") == 1.0 && jnum(r.json, "tradeoff[10].beta") == 0.0);
    double prev = 2.0;
    for (size_t i = 0; i < 41; i++) {
        char path[32];
        snprintf(path, sizeof path, "curve[%zu].delta", i);
        CHECK(jnum(r.json, path) <= prev);
        prev = jnum(r.json, path);
    }
    api_reply_free(&r);
    /* the PLD envelope lies below the exact G_mu curve (a valid lower bound on it) */
    api_postf(&r, "/v1/curve",
              "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1},"
              "\"epsilons\":[0,1],\"alphas\":[0.1,0.5],\"accountant\":\"pld\"}");
    CHECK(is_compute_answer(&r));
    CHECK(jnum(r.json, "tradeoff[1].beta") <= 0.15865525393145705);
    CHECK(jnum(r.json, "tradeoff[1].beta") > 0.155);
    api_reply_free(&r);
    api_postf(&r, "/v1/curve",
              "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1},"
              "\"epsilons\":[0],\"epsilon_range\":{\"min\":0,\"max\":1,\"points\":2}}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "epsilons"));
    api_reply_free(&r);
    api_postf(&r, "/v1/curve",
              "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":1}}");
    CHECK(is_problem(&r, 400, "missing_field", "epsilons"));
    api_reply_free(&r);
}

static void calibrate_standard(void)
{
    api_reply r;
    /* sigma for the reference run to eps = 1 with PLD; fed back it meets the target */
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":1000,\"event\":{"
              "\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":"
              "{\"class_name\":\"GaussianDpEvent\"}}},\"solve_for\":\"noise_multiplier\","
              "\"target\":{\"epsilon\":1,\"delta\":1e-5},\"accountant\":\"pld\"}");
    CHECK(is_compute_answer(&r));
    double sigma = jnum(r.json, "value");
    CHECK(jnum(r.json, "tolerance") == 1e-4);
    CHECK(jnum(r.json, "achieved.delta") <= 1e-5);
    CHECK(jnum(r.json, "event.event.event.noise_multiplier") == sigma);
    api_reply_free(&r);
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":1000,\"event\":{"
              "\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":"
              "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":%.17g}}},\"delta\":1e-5,"
              "\"accountant\":\"pld\"}",
              sigma);
    CHECK(jnum(r.json, "epsilon") <= 1.0);
    api_reply_free(&r);
    /* sampling probability, largest rate */
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":1000,\"event\":{"
              "\"class_name\":\"PoissonSampledDpEvent\",\"event\":{\"class_name\":"
              "\"GaussianDpEvent\",\"noise_multiplier\":1}}},\"solve_for\":"
              "\"sampling_probability\",\"target\":{\"epsilon\":2,\"delta\":1e-5},"
              "\"accountant\":\"rdp\"}");
    CHECK(is_compute_answer(&r));
    CHECK(jnum(r.json, "value") > 0.005 && jnum(r.json, "value") < 0.02);
    api_reply_free(&r);
    /* count with the exact accountant: the largest number of sigma = 10 releases */
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"event\":{\"class_name\":"
              "\"GaussianDpEvent\",\"noise_multiplier\":10}},\"solve_for\":\"count\","
              "\"target\":{\"epsilon\":4.37718,\"delta\":1e-5}}");
    CHECK(is_compute_answer(&r));
    CHECK(is(r.json, "accountant", "gdp_exact"));
    CHECK(jint_is(r.json, "value", 100));
    api_reply_free(&r);
    /* rounds of a shuffled epoch composed with a Gaussian step, by pld (exact epochs) */
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[{\"class_name\":"
              "\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":2},{\"class_name\":"
              "\"GaussianDpEvent\",\"noise_multiplier\":5}]},\"solve_for\":\"rounds\","
              "\"target\":{\"epsilon\":1,\"delta\":1e-6},\"accountant\":\"pld\"}");
    CHECK(is_compute_answer(&r));
    json_t *v = jget(r.json, "value");
    CHECK(json_is_integer(v) && json_integer_value(v) >= 2);
    CHECK(jnum(r.json, "achieved.delta") <= 1e-6);
    long long m = json_is_integer(v) ? (long long)json_integer_value(v) : 2;
    api_reply_free(&r);
    /* and the least such: one round fewer overshoots */
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[{\"class_name\":"
              "\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":2,\"rounds\":%lld},{"
              "\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}]},\"epsilon\":1,"
              "\"accountant\":\"pld\"}",
              m - 1);
    CHECK(is_compute_answer(&r));
    CHECKF(jnum(r.json, "delta") > 1e-6, "delta at %lld rounds: %g", m - 1, jnum(r.json, "delta"));
    api_reply_free(&r);
}

/* openapi.yaml (as served) names every route of the routing table and every problem code of
 * the problem table: the contract cannot drift from the code silently. */
static void openapi_names_every_route_and_code(void)
{
    api_reply r;
    api_get("/openapi.yaml", &r);
    CHECK(r.status == 200);
    for (const route *rt = ROUTES; rt->method; rt++) {
        char needle[96];
        /* a prefix route "/v1/x/" is documented as "/v1/x/{id}", with its suffix */
        if (rt->suffix)
            snprintf(needle, sizeof needle, "\n  %s{id}%s:\n", rt->path, rt->suffix);
        else
            snprintf(needle, sizeof needle, rt->prefix ? "\n  %s{" : "\n  %s:\n", rt->path);
        CHECKF(strstr(r.body, needle) != NULL, "openapi.yaml has no path %s", rt->path);
    }
    for (int c = 1; c < PB_COUNT_; c++)
        CHECKF(strstr(r.body, problem_code_name((problem_code)c)) != NULL,
               "openapi.yaml does not mention the problem code %s",
               problem_code_name((problem_code)c));
    api_reply_free(&r);
}

/* Pure DP at delta = 0 (issue 39): Laplace of scale 1 and 2 composed answer 1.5 with pld
 * (before: "infinite"), and delta is 0 there. */
static void pld_pure_dp_at_delta_zero(void)
{
    const char *ev = "{\"class_name\":\"ComposedDpEvent\",\"events\":[{\"class_name\":"
                     "\"LaplaceDpEvent\",\"noise_multiplier\":1},{\"class_name\":"
                     "\"LaplaceDpEvent\",\"noise_multiplier\":2}]}";
    api_reply r;
    api_postf(&r, "/v1/epsilon", "{\"event\":%s,\"delta\":0,\"accountant\":\"pld\"}", ev);
    CHECKF(is_compute_answer(&r), "%.300s", r.body);
    double e = jnum(r.json, "epsilon");
    CHECKF(e >= 1.5 && e <= 1.5 * (1.0 + 1e-12), "%.300s", r.body);
    api_reply_free(&r);
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":1.5000001,\"accountant\":\"pld\"}", ev);
    CHECKF(is_compute_answer(&r) && jnum(r.json, "delta") == 0.0, "%.300s", r.body);
    api_reply_free(&r);
}

const tl_test ACCOUNTANT_API_TESTS[] = {
    TL_T(rdp_and_pld_reference_values), TL_T(auto_is_exact_for_gaussians),
    TL_T(mixed_events_and_edges),       TL_T(curve_and_tradeoff),
    TL_T(calibrate_standard),           TL_T(openapi_names_every_route_and_code),
    TL_T(pld_pure_dp_at_delta_zero),
};
const size_t ACCOUNTANT_API_NTESTS = sizeof ACCOUNTANT_API_TESTS / sizeof ACCOUNTANT_API_TESTS[0];
