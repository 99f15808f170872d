/*
 * test_pnsgd_api.c - projected noisy SGD (seed 000) over HTTP: Theorem 3's limit and its
 * O(1/n) approach, the online bracket, epochs, curves, calibration, and the domain
 * refusals the issue names (alpha <= 1, non-positive eta, L, noise, n; [a, b] empty;
 * eps < 0; 2 eta beta rho > beta + rho).
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "suites.h"

#define THM3(n)                                                                                    \
    "{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"laplace\",\"noise_schedule\":{"      \
    "\"c1\":1e5,\"c2\":2},\"lipschitz\":10,\"smoothness\":0.5,\"strong_convexity\":0,"             \
    "\"learning_rate\":0.1,\"interval\":[0,1],\"dataset_size\":" n ",\"order\":\"shuffled\"}"
#define GAUSS_PASS                                                                                 \
    "{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\",\"noise_std\":5,"         \
    "\"lipschitz\":1,\"smoothness\":1,\"strong_convexity\":0,\"learning_rate\":0.1,"               \
    "\"diameter\":1,\"dataset_size\":1000,\"order\":\"shuffled\"}"

static void pnsgd_schedule_limit_and_rate(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":1}", THM3("1000000000000"));
    CHECK(is_compute_answer(&r));
    CHECK(jstr(r.json, "accountant") && strcmp(jstr(r.json, "accountant"), "pnsgd") == 0);
    double d = jnum(r.json, "delta"), lim = jnum(r.json, "results[0].limit_delta");
    CHECK_REL(lim, 6.0653065971263342e-06, 1e-13);
    CHECK_REL(1e12 * (d - lim), 2.0 * exp(-0.5), 1e-5); /* n (delta - delta*) -> 2 e^{-1/2} */
    api_reply_free(&r);
}

static void pnsgd_online_bracket(void)
{
    api_reply r;
    api_postf(
        &r, "/v1/delta",
        "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"laplace\","
        "\"online_schedule\":{\"alpha\":1.5,\"c1\":100,\"c2\":100},\"lipschitz\":10,"
        "\"smoothness\":0.5,\"strong_convexity\":0,\"learning_rate\":0.01,\"interval\":[0,"
        "1],\"dataset_size\":1000000,\"order\":\"fixed_index\",\"index\":100},\"epsilon\":1}");
    CHECK(is_compute_answer(&r));
    double lo = jnum(r.json, "results[0].limit_bracket[0]");
    double hi = jnum(r.json, "results[0].limit_bracket[1]");
    CHECK(lo <= 1.5470401313177423e-08 && 1.5470401313177423e-08 <= hi);
    CHECK(jnum(r.json, "delta") >= 2.1513313149945726e-08);
    api_reply_free(&r);
}

static void pnsgd_epochs_curve_and_pld(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":10,\"event\":%s},"
              "\"epsilons\":[1,2]}",
              GAUSS_PASS);
    CHECK(is_compute_answer(&r));
    double kov = jnum(r.json, "results[0].delta");
    api_reply_free(&r);
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":10,\"event\":%s},"
              "\"epsilons\":[1,2],\"accountant\":\"pld\"}",
              GAUSS_PASS);
    CHECK(is_compute_answer(&r));
    CHECK(jnum(r.json, "results[0].delta") <= kov);
    api_reply_free(&r);
    /* mixed with a Gaussian release: auto picks pld */
    api_postf(&r, "/v1/epsilon",
              "{\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[%s,{\"class_name\":"
              "\"GaussianDpEvent\",\"noise_multiplier\":3}]},\"delta\":1e-5}",
              GAUSS_PASS);
    CHECK(is_compute_answer(&r));
    CHECK(jstr(r.json, "accountant") && strcmp(jstr(r.json, "accountant"), "pld") == 0);
    api_reply_free(&r);
    api_postf(&r, "/v1/curve",
              "{\"event\":%s,\"epsilon_range\":{\"min\":0,\"max\":3,\"points\":7},"
              "\"tradeoff_points\":5}",
              GAUSS_PASS);
    CHECK(is_compute_answer(&r));
    CHECK(json_array_size(jget(r.json, "curve")) == 7);
    api_reply_free(&r);
    /* no RDP curve for PNSGD: refused with the reason */
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":1,\"accountant\":\"rdp\"}", GAUSS_PASS);
    CHECK(is_problem(&r, 422, "unsupported", "accountant"));
    api_reply_free(&r);
}

static void pnsgd_calibration(void)
{
    api_reply r;
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\","
              "\"lipschitz\":1,\"smoothness\":1,\"strong_convexity\":0,\"learning_rate\":0.1,"
              "\"diameter\":1,\"dataset_size\":10000,\"order\":\"shuffled\"},\"solve_for\":"
              "\"noise_std\",\"target\":{\"epsilon\":1,\"delta\":1e-5}}");
    CHECK(is_compute_answer(&r));
    CHECK(jstr(r.json, "solve_for") && strcmp(jstr(r.json, "solve_for"), "noise_std") == 0);
    CHECK(jnum(r.json, "achieved.delta") <= 1e-5);
    CHECK(jnum(r.json, "event.noise_std") == jnum(r.json, "value"));
    api_reply_free(&r);
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\","
              "\"noise_std\":3,\"lipschitz\":1,\"smoothness\":1,\"strong_convexity\":0,"
              "\"learning_rate\":0.1,\"diameter\":1,\"order\":\"shuffled\"},\"solve_for\":"
              "\"dataset_size\",\"target\":{\"epsilon\":1,\"delta\":1e-5}}");
    CHECK(is_compute_answer(&r));
    long long n = (long long)jnum(r.json, "value");
    CHECK(jnum(r.json, "achieved.delta") <= 1e-5);
    api_reply_free(&r);
    /* the smallest: one record fewer misses the target */
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\","
              "\"noise_std\":3,\"lipschitz\":1,\"smoothness\":1,\"strong_convexity\":0,"
              "\"learning_rate\":0.1,\"diameter\":1,\"dataset_size\":%lld,\"order\":"
              "\"shuffled\"},\"epsilon\":1}",
              n - 1);
    CHECK(jnum(r.json, "delta") > 1e-5);
    api_reply_free(&r);
    api_postf(&r, "/v1/calibrate",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"laplace\","
              "\"noise_schedule\":{\"c2\":2},\"lipschitz\":10,\"smoothness\":0.5,"
              "\"strong_convexity\":0,\"learning_rate\":0.1,\"interval\":[0,1],\"dataset_size\":"
              "100000000,\"order\":\"shuffled\"},\"solve_for\":\"c1\",\"target\":{\"epsilon\":1,"
              "\"delta\":1e-5}}");
    CHECK(is_compute_answer(&r));
    CHECK(jnum(r.json, "achieved.delta") <= 1e-5);
    /* the limit's C1: delta* = 1e-5 at eps = 1 (mpmath: 60653.0659712633...) */
    CHECK_REL(jnum(r.json, "details.c1_for_limit"), 60653.065971263342, 1e-9);
    api_reply_free(&r);
}

static void pnsgd_refusals(void)
{
    static const struct {
        const char *patch, *field;
    } c[] = {
        {"\"learning_rate\":0", "event.learning_rate"},
        {"\"learning_rate\":-1", "event.learning_rate"},
        {"\"lipschitz\":0", "event.lipschitz"},
        {"\"noise_std\":0", "event.noise_std"},
        {"\"dataset_size\":0", "event.dataset_size"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        /* later duplicates are refused by the parser, so build the event field by field */
        char ev[600];
        const char *base[] = {"\"noise_std\":5",        "\"lipschitz\":1",       "\"smoothness\":1",
                              "\"strong_convexity\":0", "\"learning_rate\":0.1", "\"diameter\":1",
                              "\"dataset_size\":1000"};
        strcpy(ev, "{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\","
                   "\"order\":\"shuffled\"");
        for (size_t k = 0; k < sizeof base / sizeof base[0]; k++) {
            size_t klen = strchr(base[k], ':') - base[k];
            strcat(ev, ",");
            strcat(ev, strncmp(base[k], c[i].patch, klen + 1) == 0 ? c[i].patch : base[k]);
        }
        strcat(ev, "}");
        api_reply r;
        api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":1}", ev);
        CHECKF(is_problem(&r, 400, "invalid_parameter", c[i].field), "case %zu", i);
        api_reply_free(&r);
    }
    api_reply r;
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"laplace\","
              "\"laplace_scale\":1,\"lipschitz\":1,\"smoothness\":1,\"strong_convexity\":0,"
              "\"learning_rate\":0.1,\"interval\":[1,1],\"dataset_size\":10,\"order\":"
              "\"shuffled\"},\"epsilon\":1}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "event.interval"));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"laplace\","
              "\"online_schedule\":{\"alpha\":1,\"c1\":100,\"c2\":100},\"lipschitz\":10,"
              "\"smoothness\":0.5,\"strong_convexity\":0,\"learning_rate\":0.01,\"interval\":[0,"
              "1],\"dataset_size\":1000,\"order\":\"fixed_index\",\"index\":100},\"epsilon\":1}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "event.schedule.alpha"));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\","
              "\"noise_std\":5,\"lipschitz\":1,\"smoothness\":10,\"strong_convexity\":10,"
              "\"learning_rate\":5,\"diameter\":1,\"dataset_size\":10,\"order\":\"shuffled\"},"
              "\"epsilon\":1}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "event.learning_rate"));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":-1}", GAUSS_PASS);
    CHECK(is_problem(&r, 400, "invalid_parameter", "epsilon"));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\","
              "\"noise_std\":5,\"laplace_scale\":1,\"lipschitz\":1,\"smoothness\":1,"
              "\"strong_convexity\":0,\"learning_rate\":0.1,\"diameter\":1,\"dataset_size\":10,"
              "\"order\":\"shuffled\"},\"epsilon\":1}");
    CHECK(is_problem(&r, 400, "invalid_parameter", "event.laplace_scale"));
    api_reply_free(&r);
}

const tl_test PNSGD_API_TESTS[] = {
    TL_T(pnsgd_schedule_limit_and_rate),
    TL_T(pnsgd_online_bracket),
    TL_T(pnsgd_epochs_curve_and_pld),
    TL_T(pnsgd_calibration),
    TL_T(pnsgd_refusals),
};
const size_t PNSGD_API_NTESTS = sizeof PNSGD_API_TESTS / sizeof PNSGD_API_TESTS[0];
