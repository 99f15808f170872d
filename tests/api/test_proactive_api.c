/*
 * test_proactive_api.c - seed 002's DP calculator and histories, and seed 003's SGLD
 * policy, over HTTP, against docs/MATH.md section 4's test vectors (LIBSVM setting: sigma =
 * 19.29962, N = 1e4, delta = 1e-4, k = 5 -> eps 0.049721747, gamma 3.13103484, T_min
 * 1574.27837, s_max 31.7605837) and section 5's mapping.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "suites.h"

static int is(const json_t *o, const char *path, const char *want)
{
    const char *s = jstr(o, path);
    return s && strcmp(s, want) == 0;
}

static void proactive_plan_libsvm(void)
{
    api_reply r;
    api_postf(&r, "/v1/proactive",
              "{\"procedure\":\"plan\",\"noise_multiplier\":19.29962,\"delta\":1e-4,"
              "\"dataset_size\":10000,\"epochs\":5}");
    CHECK(r.status == 200);
    CHECK_REL(jnum(r.json, "epsilon"), 0.049721747, 1e-8);
    CHECK_REL(jnum(r.json, "gamma"), 3.13103484, 1e-8);
    CHECK_REL(jnum(r.json, "rounds_min"), 1574.27837, 1e-8);
    CHECK_REL(jnum(r.json, "max_mean_batch_size"), 31.7605837, 1e-8);
    /* integers: batch rounded down, rounds up, every condition re-checked and holding */
    CHECK(jint_is(r.json, "batch_size", 31) && jint_is(r.json, "rounds", 1613));
    CHECK(jstr(r.json, "guarantee") && strcmp(jstr(r.json, "guarantee"), "upper_bound") == 0);
    json_t *c = jget(r.json, "conditions");
    CHECK(json_array_size(c) == 4);
    for (size_t i = 0; i < json_array_size(c); i++)
        CHECK(json_is_true(json_object_get(json_array_get(c, i), "holds")));
    api_reply_free(&r);
    /* Theorem 3.1's extra conditions: (7) fails for k = 5 at delta 1e-4 ((2/e)^2 25 = 13.5 <
     * 0.5 + ln 1e4 = 9.7? it holds) -- and delta <= 1/N holds with equality */
    api_postf(&r, "/v1/proactive",
              "{\"procedure\":\"plan\",\"noise_multiplier\":19.29962,\"delta\":1e-4,"
              "\"dataset_size\":10000,\"epochs\":5,\"theorem\":\"3.1\"}");
    CHECK(r.status == 200);
    CHECK(json_array_size(jget(r.json, "conditions")) == 9);
    api_reply_free(&r);
    /* a setting where Theorem 3.1 does not apply: eps >= 0.5 */
    api_postf(&r, "/v1/proactive",
              "{\"procedure\":\"plan\",\"noise_multiplier\":6,\"delta\":1e-5,\"dataset_size\":"
              "60000,\"epochs\":50,\"theorem\":\"3.1\"}");
    CHECK(is_problem(&r, 422, "not_covered", "plan"));
    CHECK(find_condition(r.json, "conditions", "t31_epsilon") != NULL);
    api_reply_free(&r);
}

static void proactive_noise_and_max_rounds(void)
{
    api_reply r;
    api_postf(&r, "/v1/proactive",
              "{\"procedure\":\"noise_multiplier\",\"epsilon\":0.05,\"delta\":1e-4}");
    CHECK(r.status == 200);
    double s = jnum(r.json, "noise_multiplier");
    CHECK(s >= 19.24613247 * (1 - 1e-9));
    CHECK_REL(s, 19.24613247, 1e-9);
    api_reply_free(&r);
    api_postf(&r, "/v1/proactive",
              "{\"procedure\":\"max_rounds\",\"noise_multiplier\":19.29962,\"delta\":1e-4,"
              "\"dataset_size\":10000,\"batch_size\":31}");
    CHECK(r.status == 200);
    double t = jnum(r.json, "max_rounds");
    CHECK(t > 1574.0 && t < 1800.0); /* a batch below 31.76 allows somewhat more rounds */
    api_reply_free(&r);
    api_postf(&r, "/v1/proactive",
              "{\"procedure\":\"max_rounds\",\"noise_multiplier\":19.29962,\"delta\":1e-4,"
              "\"dataset_size\":10000,\"batch_size\":5000}");
    CHECK(is_problem(&r, 422, "not_covered", "batch_size"));
    api_reply_free(&r);
    api_postf(&r, "/v1/proactive", "{\"procedure\":\"guess\"}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "procedure"));
    api_reply_free(&r);
    api_postf(&r, "/v1/proactive",
              "{\"procedure\":\"plan\",\"noise_multiplier\":1.2,\"delta\":1e-4,\"dataset_size\":"
              "10000,\"epochs\":5}");
    CHECK(is_problem(&r, 422, "not_covered", "noise_multiplier")); /* sigma^2 <= 2 */
    api_reply_free(&r);
    /* a field of another procedure is refused, not silently dropped (found by the generated
     * contract tests: batch_size 0 with "plan" was answered 200) */
    const char *const stray[] = {
        "{\"procedure\":\"plan\",\"noise_multiplier\":19.3,\"delta\":1e-4,\"dataset_size\":"
        "10000,\"epochs\":5,\"batch_size\":0}",
        "{\"procedure\":\"noise_multiplier\",\"epsilon\":0.05,\"delta\":1e-4,\"epochs\":3}",
        "{\"procedure\":\"max_rounds\",\"noise_multiplier\":19.3,\"delta\":1e-4,"
        "\"dataset_size\":10000,\"batch_size\":31,\"epsilon\":1}",
        "{\"procedure\":\"noise_multiplier\",\"epsilon\":0.05,\"delta\":1e-4,"
        "\"noise_multiplier\":2}",
    };
    const char *const field[] = {"batch_size", "epochs", "epsilon", "noise_multiplier"};
    for (size_t i = 0; i < sizeof stray / sizeof stray[0]; i++) {
        api_postf(&r, "/v1/proactive", "%s", stray[i]);
        CHECK(is_problem(&r, 400, "invalid_parameter", field[i]));
        api_reply_free(&r);
    }
}

/* The plan fed back as a history meets its target; a batch past the planned maximum
 * breaks the closed form's condition (34). */
static void proactive_history_consistency(void)
{
    api_reply r;
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"ProactiveDpSgdDpEvent\",\"dataset_size\":10000,"
              "\"phases\":[{\"noise_multiplier\":19.29962,\"batch_size\":31,\"rounds\":1613}]},"
              "\"delta\":1e-4,\"accountant\":\"proactive\"}");
    CHECK(is_compute_answer(&r));
    CHECK(jnum(r.json, "results[0].compared.proactive_closed_form") <= 0.049721747 * (1 + 1e-8));
    CHECK(jnum(r.json, "epsilon") <= jnum(r.json, "results[0].compared.proactive_closed_form"));
    CHECK(jnum(r.json, "epsilon") <= jnum(r.json, "results[0].compared.rdp"));
    api_reply_free(&r);
    /* batch 33 > 31.76 with the same number of gradients: below the floor at this eps the
     * closed form certifies nothing (RDP still answers) */
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ProactiveDpSgdDpEvent\",\"dataset_size\":10000,"
              "\"phases\":[{\"noise_multiplier\":19.29962,\"batch_size\":33,\"rounds\":1516}]},"
              "\"epsilon\":0.0497217}");
    CHECK(is_compute_answer(&r));
    CHECK(is(r.json, "results[0].compared.proactive_closed_form", "infinite"));
    CHECK(jnum(r.json, "delta") == jnum(r.json, "results[0].compared.rdp"));
    api_reply_free(&r);
}

static void sgld_policy(void)
{
    api_reply r;
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"SgldDpEvent\",\"batch_size\":64,\"dataset_size\":"
              "60000,\"step_size\":1e-4,\"steps\":1000,\"sampling\":\"poisson\"},\"delta\":1e-5}");
    CHECK(is_problem(&r, 422, "uncertifiable", "event"));
    CHECK(strstr(jstr(r.json, "detail"), "seed 003") != NULL);
    api_reply_free(&r);
    /* clipped: sigma = 2b/(n C sqrt(eta)) = 2*64/(60000*1*0.01) = 0.21333...; the answer
     * equals the Poisson-sampled Gaussian's for that sigma */
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"SgldDpEvent\",\"clipping_norm\":1,\"batch_size\":64,"
              "\"dataset_size\":60000,\"step_size\":1e-4,\"steps\":1000,\"sampling\":"
              "\"poisson\"},\"delta\":1e-5,\"accountant\":\"rdp\"}");
    CHECK(is_compute_answer(&r));
    double sig = jnum(r.json, "mappings[0].noise_multiplier"), e1 = jnum(r.json, "epsilon");
    CHECK_REL(sig, 2.0 * 64 / (60000 * 1.0 * 0.01), 1e-15);
    CHECK(jnum(r.json, "mappings[0].accounted_as.count") == 1000.0);
    api_reply_free(&r);
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":1000,\"event\":{"
              "\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":%.17g,"
              "\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":%.17g}}},"
              "\"delta\":1e-5,\"accountant\":\"rdp\"}",
              64.0 / 60000.0, sig);
    CHECK(jnum(r.json, "epsilon") == e1);
    api_reply_free(&r);
    /* a clipping norm and step size so small that the implied multiplier overflows, or one
     * past the Gaussian's range, is a 400 naming the event, never a 200 holding an internal
     * error (found by the generated contract tests), on every endpoint that accounts it */
    const char *const paths[] = {"/v1/epsilon", "/v1/rdp", "/v1/curve"};
    const char *const tails[] = {",\"delta\":1e-5", ",\"orders\":[2,8,32],\"accountant\":\"rdp\"",
                                 ",\"epsilon_range\":{\"min\":0,\"max\":4,\"points\":5}"};
    const char *const evs[] = {
        "{\"class_name\":\"SgldDpEvent\",\"clipping_norm\":5e-324,\"batch_size\":1,"
        "\"dataset_size\":1,\"step_size\":5e-324,\"steps\":1,\"sampling\":\"poisson\"}",
        "{\"class_name\":\"RepeatAndSelectDpEvent\",\"mean\":1,\"shape\":0,\"event\":{"
        "\"class_name\":\"SgldDpEvent\",\"clipping_norm\":1e-3,\"batch_size\":1,"
        "\"dataset_size\":1,\"step_size\":1e-6,\"steps\":1,\"sampling\":\"poisson\"}}",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        for (size_t k = 0; k < sizeof evs / sizeof evs[0]; k++) {
            api_postf(&r, paths[i], "{\"event\":%s%s}", evs[k], tails[i]);
            CHECK(r.status == 400 && strcmp(jstr(r.json, "code"), "invalid_parameter") == 0);
            CHECK(strstr(jstr(r.json, "detail"), "at most 1e6") != NULL);
            api_reply_free(&r);
        }
}

const tl_test PROACTIVE_API_TESTS[] = {
    TL_T(proactive_plan_libsvm),
    TL_T(proactive_noise_and_max_rounds),
    TL_T(proactive_history_consistency),
    TL_T(sgld_policy),
};
const size_t PROACTIVE_API_NTESTS = sizeof PROACTIVE_API_TESTS / sizeof PROACTIVE_API_TESTS[0];
