/*
 * test_errors.c - every error class: each answer must be 4xx application/problem+json with
 * type, title, status (== the HTTP status), code and a non-empty detail, and name the
 * offending field where there is one. The daemon must stay up through the battery.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "suites.h"

typedef struct {
    const char *path;
    const char *body;
    int status;
    const char *code;
    const char *field; /* NULL: not checked */
} err_case;

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void run_cases(const err_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        api_reply r;
        api_call("POST", c[i].path, "application/json", c[i].body, strlen(c[i].body), &r);
        CHECKF(is_problem(&r, c[i].status, c[i].code, c[i].field), "case %zu: POST %s %.200s", i,
               c[i].path, c[i].body);
        api_reply_free(&r);
    }
}

/* A calibration request around a raw event and extra top-level members. */
#define CAL(event, extra)                                                                          \
    "{\"event\":" event                                                                            \
    ",\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,\"delta\":0.01}" extra "}"
#define LEAF_NO_ROUNDS "{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1}"

static void errors_malformed_json(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{", 400, "malformed_json", NULL},
        {"/v1/delta", "", 400, "malformed_json", NULL},
        {"/v1/delta", "[1,2]", 400, "wrong_type", NULL},
        {"/v1/delta", "{\"epsilon\": NaN}", 400, "malformed_json", NULL},
        {"/v1/delta", "{\"epsilon\": Infinity}", 400, "malformed_json", NULL},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":-Infinity}", 400, "malformed_json", NULL},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"accountant\":\"\xff\xfe\"}", 400,
         "malformed_json", NULL},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1}{}", 400, "malformed_json", NULL},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,}", 400, "malformed_json", NULL},
        {"/v1/epsilon", "{", 400, "malformed_json", NULL},
        {"/v1/calibrate", "{", 400, "malformed_json", NULL},
        {"/v1/calibrate", "[]", 400, "wrong_type", NULL},
    };
    run_cases(c, N_OF(c));
}

static void errors_duplicate_key(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"epsilon\":1,\"epsilon\":2}", 400, "duplicate_key", NULL},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1,"
         "\"rounds\":1140369,\"rounds\":5},\"epsilon\":1}",
         400, "duplicate_key", NULL},
    };
    run_cases(c, N_OF(c));
}

static void errors_number_out_of_range(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1e999}", 400, "number_out_of_range",
         NULL},
        {"/v1/delta", "{\"event\":" EPOCH(1, 18446744073709551616) ",\"epsilon\":1}", 400,
         "number_out_of_range", NULL},
        {"/v1/epsilon", "{\"event\":" EPOCH_1 ",\"delta\":-1e400}", 400, "number_out_of_range",
         NULL},
    };
    run_cases(c, N_OF(c));
}

static void errors_unknown_field(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"x\":1}", 400, "unknown_field", "x"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1,"
         "\"rounds\":1140369,\"x\":1},\"epsilon\":1}",
         400, "unknown_field", "event.x"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":2,\"event\":{"
         "\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1,\"rounds\":1140369,"
         "\"sampling_probability\":0.1}},\"epsilon\":1}",
         400, "unknown_field", "event.event.sampling_probability"},
        {"/v1/epsilon", "{\"event\":" EPOCH_1 ",\"delta\":0.5,\"epsilon\":1}", 400, "unknown_field",
         "epsilon"},
        {"/v1/calibrate", CAL(LEAF_NO_ROUNDS, ",\"x\":1"), 400, "unknown_field", "x"},
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,"
         "\"delta\":0.01,\"x\":1}}",
         400, "unknown_field", "target.x"},
        {"/v1/calibrate",
         CAL(LEAF_NO_ROUNDS, ",\"dataset\":{\"clipping_norm\":1,\"max_noise_per_round\":0.1,"
                             "\"x\":1}"),
         400, "unknown_field", "dataset.x"},
    };
    run_cases(c, N_OF(c));
}

static void errors_missing_field(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"epsilon\":1}", 400, "missing_field", "event"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1},"
         "\"epsilon\":1}",
         400, "missing_field", "event.rounds"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"rounds\":1140369},"
         "\"epsilon\":1}",
         400, "missing_field", "event.noise_multiplier"},
        {"/v1/delta", "{\"event\":{\"noise_multiplier\":1,\"rounds\":1140369},\"epsilon\":1}", 400,
         "missing_field", "event.class_name"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"event\":" EPOCH_1 "},\"epsilon\":1}",
         400, "missing_field", "event.count"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":2},\"epsilon\":1}", 400,
         "missing_field", "event.event"},
        {"/v1/delta", "{\"event\":{\"class_name\":\"ComposedDpEvent\"},\"epsilon\":1}", 400,
         "missing_field", "event.events"},
        /* neither epsilon nor epsilons */
        {"/v1/delta", "{\"event\":" EPOCH_1 "}", 400, "missing_field", NULL},
        {"/v1/epsilon", "{\"event\":" EPOCH_1 "}", 400, "missing_field", NULL},
    };
    run_cases(c, N_OF(c));
}

static void errors_wrong_type(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"event\":" EPOCH("1", 1140369) ",\"epsilon\":1}", 400, "wrong_type",
         "event.noise_multiplier"},
        {"/v1/delta", "{\"event\":" EPOCH(1, true) ",\"epsilon\":1}", 400, "wrong_type",
         "event.rounds"},
        {"/v1/delta", "{\"event\":" EPOCH(1, "5") ",\"epsilon\":1}", 400, "wrong_type",
         "event.rounds"},
        {"/v1/delta", "{\"event\":" EPOCH(null, 1140369) ",\"epsilon\":1}", 400, "wrong_type",
         "event.noise_multiplier"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":\"1\"}", 400, "wrong_type", "epsilon"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilons\":1}", 400, "wrong_type", "epsilons"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilons\":[1,\"a\"]}", 400, "wrong_type",
         "epsilons[1]"},
        {"/v1/delta", "{\"event\":\"ShuffledDpSgdEpochDpEvent\",\"epsilon\":1}", 400, "wrong_type",
         "event"},
        {"/v1/delta", "{\"event\":{\"class_name\":5},\"epsilon\":1}", 400, "wrong_type",
         "event.class_name"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"accountant\":5}", 400, "wrong_type",
         "accountant"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"neighboring_relation\":null}", 400,
         "wrong_type", "neighboring_relation"},
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"rounds\",\"target\":[0,0.01]}", 400,
         "wrong_type", "target"},
        {"/v1/calibrate", CAL(LEAF_NO_ROUNDS, ",\"dataset\":1"), 400, "wrong_type", "dataset"},
    };
    run_cases(c, N_OF(c));
}

static void errors_invalid_parameter(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"event\":" EPOCH(1, 1.5) ",\"epsilon\":1}", 400, "invalid_parameter",
         "event.rounds"},
        {"/v1/delta", "{\"event\":" EPOCH(1, -3) ",\"epsilon\":1}", 400, "invalid_parameter",
         "event.rounds"},
        {"/v1/delta", "{\"event\":" EPOCH(1, 0) ",\"epsilon\":1}", 400, "invalid_parameter",
         "event.rounds"},
        {"/v1/delta", "{\"event\":" EPOCH(0, 1140369) ",\"epsilon\":1}", 400, "invalid_parameter",
         "event.noise_multiplier"},
        {"/v1/delta", "{\"event\":" EPOCH(-1, 1140369) ",\"epsilon\":1}", 400, "invalid_parameter",
         "event.noise_multiplier"},
        {"/v1/delta", "{\"event\":" EPOCH(1e7, 1140369) ",\"epsilon\":1}", 400, "invalid_parameter",
         "event.noise_multiplier"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":0,\"event\":" EPOCH_1
         "},\"epsilon\":1}",
         400, "invalid_parameter", "event.count"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":-1}", 400, "invalid_parameter",
         "epsilon"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilons\":[1,-1]}", 400, "invalid_parameter",
         "epsilons"},
        /* both the scalar and the list form */
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"epsilons\":[1]}", 400,
         "invalid_parameter", NULL},
        /* delta 0 and 1 are queries (issue 16); outside [0, 1] is refused */
        {"/v1/epsilon", "{\"event\":" EPOCH_1 ",\"delta\":-0.1}", 400, "invalid_parameter",
         "delta"},
        {"/v1/epsilon", "{\"event\":" EPOCH_1 ",\"delta\":1.5}", 400, "invalid_parameter", "delta"},
        {"/v1/epsilon", "{\"event\":" EPOCH_1 ",\"deltas\":[0.5,-1e-9]}", 400, "invalid_parameter",
         "deltas"},
        {"/v1/epsilon", "{\"event\":" EPOCH_1 ",\"delta\":\"infinite\"}", 400, "wrong_type",
         "delta"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":\"inf\"}", 400, "wrong_type", "epsilon"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilons\":[1,\"-infinite\"]}", 400, "wrong_type",
         "epsilons[1]"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"neighboring_relation\":\"bogus\"}",
         400, "invalid_parameter", "neighboring_relation"},
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"accountant\":\"foo\"}", 400,
         "invalid_parameter", "accountant"},
    };
    run_cases(c, N_OF(c));
}

static void errors_too_many_values(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"event\":" EPOCH_1 ",\"epsilons\":[]}", 400, "too_many_values",
         "epsilons"},
        {"/v1/epsilon", "{\"event\":" EPOCH_1 ",\"deltas\":[]}", 400, "too_many_values", "deltas"},
        /* an empty composition is the identity (issue 16), not a refusal */
    };
    run_cases(c, N_OF(c));

    /* 1001 values: one more than allowed; 1000 is fine */
    for (int n = 1000; n <= 1001; n++) {
        size_t cap = 64 + sizeof EPOCH_1 + 2 * (size_t)n;
        char *body = malloc(cap);
        CHECK(body != NULL);
        if (body == NULL)
            return;
        size_t len = (size_t)snprintf(body, cap, "{\"event\":%s,\"epsilons\":[", EPOCH_1);
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(body + len, cap - len, i ? ",1" : "1");
        len += (size_t)snprintf(body + len, cap - len, "]}");
        api_reply r;
        api_call("POST", "/v1/delta", "application/json", body, len, &r);
        if (n == 1001)
            CHECK(is_problem(&r, 400, "too_many_values", "epsilons"));
        else
            CHECK(is_compute_answer(&r) && json_array_size(jget(r.json, "results")) == 1000);
        api_reply_free(&r);
        free(body);
    }
}

static void errors_events(void)
{
    static const err_case c[] = {
        {"/v1/delta", "{\"event\":{\"class_name\":\"FooDpEvent\"},\"epsilon\":1}", 400,
         "unknown_event", "event.class_name"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"SampledWithoutReplacementDpEvent\"},"
         "\"epsilon\":1}",
         400, "missing_field", "event.source_dataset_size"},
        /* a known event with an accountant that cannot take it */
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"LaplaceDpEvent\",\"noise_multiplier\":1},"
         "\"epsilon\":1,\"accountant\":\"thm41\"}",
         422, "unsupported", "accountant"},
        /* (issue 39: /v1/delta with rdp composes it; its curve alone has none) */
        {"/v1/rdp",
         "{\"event\":{\"class_name\":\"EpsilonDeltaDpEvent\",\"epsilon\":1,\"delta\":1e-6},"
         "\"accountant\":\"rdp\"}",
         422, "unsupported", "accountant"},
        {"/v1/delta",
         "{\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[" EPOCH_1
         ",{\"class_name\":\"UnsupportedDpEvent\"}]},\"epsilon\":1}",
         422, "unsupported", "event.events[1].class_name"},
        {"/v1/epsilon", "{\"event\":{\"class_name\":\"UnsupportedDpEvent\"},\"delta\":0.5}", 422,
         "unsupported", "event.class_name"},
    };
    run_cases(c, N_OF(c));
    /* every dp_accounting class not accounted yet is 422 unsupported, never 400 unknown */
    static const char *const dp_accounting[] = {"UnsupportedDpEvent"};
    for (size_t i = 0; i < N_OF(dp_accounting); i++) {
        api_reply r;
        api_postf(&r, "/v1/delta", "{\"event\":{\"class_name\":\"%s\"},\"epsilon\":1}",
                  dp_accounting[i]);
        CHECKF(is_problem(&r, 422, "unsupported", "event.class_name"), "%s", dp_accounting[i]);
        api_reply_free(&r);
    }
}

static void errors_relation_and_accountant(void)
{
    static const err_case c[] = {
        {"/v1/delta",
         "{\"event\":" EPOCH_1 ",\"epsilon\":1,\"neighboring_relation\":\"replace_one\"}", 422,
         "unsupported", "neighboring_relation"},
        {"/v1/epsilon",
         "{\"event\":" EPOCH_1 ",\"delta\":0.5,\"neighboring_relation\":\"replace_one\"}", 422,
         "unsupported", "neighboring_relation"},
        {"/v1/calibrate", CAL(LEAF_NO_ROUNDS, ",\"neighboring_relation\":\"replace_one\""), 422,
         "unsupported", "neighboring_relation"},
        {"/v1/calibrate", CAL(LEAF_NO_ROUNDS, ",\"accountant\":\"foo\""), 400, "invalid_parameter",
         "accountant"},
    };
    run_cases(c, N_OF(c));
}

static void errors_not_covered(void)
{
    api_reply r;
    /* condition (1) fails: too few rounds for sigma = 1 */
    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilon\":1}",
              EPOCH(1, 1000));
    CHECK(is_problem(&r, 422, "not_covered", NULL));
    CHECK(json_is_array(jget(r.json, "conditions")));
    json_t *c = find_condition(r.json, "conditions", "thm41_validity");
    CHECK(c != NULL && json_is_false(json_object_get(c, "holds")));
    CHECK(c != NULL && json_number_value(json_object_get(c, "lhs")) >
                           json_number_value(json_object_get(c, "rhs")));
    c = find_condition(r.json, "conditions", "rounds_at_least_3");
    CHECK(c != NULL && json_is_true(json_object_get(c, "holds")));
    api_reply_free(&r);

    static const err_case cases[] = {
        {"/v1/delta", "{\"accountant\":\"thm41\",\"event\":" EPOCH(1, 2) ",\"epsilon\":1}", 422,
         "not_covered", "rounds"},
        {"/v1/delta", "{\"accountant\":\"thm41\",\"event\":" EPOCH(0.3, 100) ",\"epsilon\":1}", 422,
         "not_covered", "noise_multiplier"},
        {"/v1/epsilon", "{\"accountant\":\"thm41\",\"event\":" EPOCH(1, 1000) ",\"delta\":0.5}",
         422, "not_covered", NULL},
        {"/v1/delta",
         "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":"
         "[" EPOCH_1 "," EPOCH(1, 2) "]},\"epsilon\":1}",
         422, "not_covered", NULL},
    };
    run_cases(cases, N_OF(cases));

    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilon\":1}",
              EPOCH(1, 2));
    c = find_condition(r.json, "conditions", "rounds_at_least_3");
    CHECK(c != NULL && json_is_false(json_object_get(c, "holds")));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilon\":1}",
              EPOCH(0.3, 100));
    c = find_condition(r.json, "conditions", "sigma_at_least_sqrt_3_over_ln_m");
    CHECK(c != NULL && json_is_false(json_object_get(c, "holds")));
    api_reply_free(&r);
}

static void errors_calibrate(void)
{
    static const err_case c[] = {
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"foo\",\"target\":{\"epsilon\":0,"
         "\"delta\":0.01}}",
         400, "invalid_parameter", "solve_for"},
        {"/v1/calibrate", CAL(EPOCH(1, 5), ""), 400, "invalid_parameter", "solve_for"},
        {"/v1/calibrate", CAL(LEAF_NO_ROUNDS, ",\"accountant\":\"gdp_clt\""), 422, "unsupported",
         NULL},
        {"/v1/calibrate", "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"rounds\"}", 400,
         "missing_field", "target"},
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0}}", 400,
         "missing_field", "target.delta"},
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"target\":{\"epsilon\":0,\"delta\":0.01}}", 400,
         "missing_field", "solve_for"},
        {"/v1/calibrate", "{\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,\"delta\":0.01}}",
         400, "missing_field", "event"},
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,"
         "\"delta\":0}}",
         400, "invalid_parameter", "target.delta"},
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,"
         "\"delta\":1}}",
         400, "invalid_parameter", "target.delta"},
        {"/v1/calibrate",
         "{\"event\":" LEAF_NO_ROUNDS ",\"solve_for\":\"rounds\",\"target\":{\"epsilon\":-1,"
         "\"delta\":0.01}}",
         400, "invalid_parameter", "target.epsilon"},
        /* count to solve, but no self-composition leaves it out */
        {"/v1/calibrate",
         "{\"event\":" EPOCH_1 ",\"solve_for\":\"count\",\"target\":{\"epsilon\":0,"
         "\"delta\":0.05}}",
         400, "invalid_parameter", "solve_for"},
        /* rounds left out of two epochs */
        {"/v1/calibrate",
         CAL("{\"class_name\":\"ComposedDpEvent\",\"events\":[" LEAF_NO_ROUNDS "," LEAF_NO_ROUNDS
             "]}",
             ""),
         400, "invalid_parameter", "solve_for"},
        {"/v1/calibrate",
         CAL(LEAF_NO_ROUNDS, ",\"dataset\":{\"clipping_norm\":0,\"max_noise_per_round\":0.1}"), 400,
         "invalid_parameter", "dataset"},
        /* a self-composition whose one epoch already exceeds the target */
        {"/v1/calibrate",
         "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"SelfComposedDpEvent\","
         "\"event\":" EPOCH_1 "},\"solve_for\":\"count\",\"target\":{\"epsilon\":0,"
         "\"delta\":0.001}}",
         422, "infeasible", "count"},
        {"/v1/calibrate",
         "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\","
         "\"rounds\":2},\"solve_for\":\"noise_multiplier\",\"target\":{\"epsilon\":0,"
         "\"delta\":0.01}}",
         422, "infeasible", NULL},
    };
    run_cases(c, N_OF(c));
}

/* {"event": SelfComposed^levels(EPOCH_1), "epsilon": 1} (malloc'ed). */
static char *nested_body(int levels, size_t *len)
{
    static const char open[] = "{\"class_name\":\"SelfComposedDpEvent\",\"count\":1,\"event\":";
    size_t cap = 64 + sizeof EPOCH_1 + (size_t)levels * sizeof open;
    char *b = malloc(cap);
    if (b == NULL)
        return NULL;
    size_t n = (size_t)snprintf(b, cap, "{\"accountant\":\"thm41\",\"event\":");
    for (int i = 0; i < levels; i++)
        n += (size_t)snprintf(b + n, cap - n, "%s", open);
    n += (size_t)snprintf(b + n, cap - n, "%s", EPOCH_1);
    for (int i = 0; i < levels; i++)
        n += (size_t)snprintf(b + n, cap - n, "}");
    n += (size_t)snprintf(b + n, cap - n, ",\"epsilon\":1}");
    *len = n;
    return b;
}

static void errors_nesting_depth(void)
{
    static const struct {
        int levels, status;
    } c[] = {{32, 200}, {33, 400}, {200, 400}};
    for (size_t i = 0; i < N_OF(c); i++) {
        size_t len;
        char *body = nested_body(c[i].levels, &len);
        CHECK(body != NULL);
        if (body == NULL)
            return;
        api_reply r;
        api_call("POST", "/v1/delta", "application/json", body, len, &r);
        if (c[i].status == 200) {
            CHECKF(is_compute_answer(&r), "%d levels", c[i].levels);
            CHECK_REL(jnum(r.json, "delta"), DELTA_EPOCH_1, 1e-12);
        } else {
            CHECKF(is_problem(&r, 400, "invalid_parameter", NULL), "%d levels", c[i].levels);
        }
        api_reply_free(&r);
        free(body);
    }
}

static void errors_media_type(void)
{
    static const char body[] = "{\"event\":" EPOCH_1 ",\"epsilon\":1}";
    static const char *const rejected[] = {"text/plain", "application/x-www-form-urlencoded",
                                           "application/jsonx", "multipart/form-data"};
    for (size_t i = 0; i < N_OF(rejected); i++) {
        api_reply r;
        api_call("POST", "/v1/delta", rejected[i], body, sizeof body - 1, &r);
        CHECKF(is_problem(&r, 415, "unsupported_media_type", NULL), "Content-Type %s", rejected[i]);
        api_reply_free(&r);
    }
    api_reply r;
    api_call("POST", "/v1/calibrate", "text/plain", CAL(LEAF_NO_ROUNDS, ""),
             sizeof CAL(LEAF_NO_ROUNDS, "") - 1, &r);
    CHECK(is_problem(&r, 415, "unsupported_media_type", NULL));
    api_reply_free(&r);

    /* no Content-Type at all, and JSON with parameters, are accepted */
    static const char *const accepted[] = {NULL, "application/json; charset=utf-8",
                                           "Application/JSON"};
    for (size_t i = 0; i < N_OF(accepted); i++) {
        api_call("POST", "/v1/delta", accepted[i], body, sizeof body - 1, &r);
        CHECKF(is_compute_answer(&r), "Content-Type %s", accepted[i] ? accepted[i] : "(none)");
        api_reply_free(&r);
    }
}

/* A valid /v1/delta body padded with spaces to exactly len bytes (malloc'ed). */
static char *padded_body(size_t len)
{
    static const char body[] = "{\"event\":" EPOCH_1 ",\"epsilon\":1}";
    char *b = malloc(len + 1);
    if (b == NULL)
        return NULL;
    memset(b, ' ', len);
    memcpy(b, body, sizeof body - 1);
    b[len] = '\0';
    return b;
}

static void errors_body_too_large(void)
{
    const size_t sizes[] = {65536, 65537, 200000};
    for (size_t i = 0; i < N_OF(sizes); i++) {
        char *b = padded_body(sizes[i]);
        CHECK(b != NULL);
        if (b == NULL)
            return;
        api_reply r;
        api_call("POST", "/v1/delta", "application/json", b, sizes[i], &r);
        if (sizes[i] <= 65536)
            CHECKF(is_compute_answer(&r), "%zu bytes", sizes[i]);
        else
            CHECKF(is_problem(&r, 413, "body_too_large", NULL), "%zu bytes", sizes[i]);
        api_reply_free(&r);
        free(b);
    }
}

/* The calls that carry lists of clients (a batch of 10,000, a round of many participants)
 * take bodies up to --max-bulk-body (the harness: 131072); the others stay at --max-body
 * (65536). Before, every route stopped at --max-body, so the documented 10,000-item batch
 * could not be sent with the defaults. */
static void errors_bulk_body_limit(void)
{
    static const char head[] = "{\"clients\":[{\"id\":\"bulk-limit-1\",\"budget\":"
                               "{\"epsilon\":1,\"delta\":1e-5}}]}";
    const size_t sizes[] = {100000, 131072, 131073};
    for (size_t i = 0; i < N_OF(sizes); i++) {
        char *b = malloc(sizes[i] + 1);
        CHECK(b != NULL);
        if (b == NULL)
            return;
        memset(b, ' ', sizes[i]);
        memcpy(b, head, sizeof head - 1);
        b[sizes[i]] = '\0';
        api_reply r;
        api_call("POST", "/v1/clients:batch", "application/json", b, sizes[i], &r);
        if (sizes[i] <= 131072)
            CHECKF(r.status == 200 && jnum(r.json, "created") + jnum(r.json, "unchanged") == 1.0,
                   "%zu bytes: %ld %s", sizes[i], r.status, r.body);
        else
            CHECKF(is_problem(&r, 413, "body_too_large", NULL), "%zu bytes: %ld", sizes[i],
                   r.status);
        api_reply_free(&r);
        free(b);
    }
}

static void errors_body_too_large_chunked(void)
{
    char *b = padded_body(70000);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    api_reply r;
    /* a small chunked body is fine... */
    api_call_chunked("POST", "/v1/delta", "application/json", b, 2000, &r);
    CHECK(is_compute_answer(&r));
    api_reply_free(&r);
    /* ...an oversized one is refused (the connection may be closed after the answer) */
    api_call_chunked("POST", "/v1/delta", "application/json", b, 70000, &r);
    CHECKF(r.status == 413, "status %ld (curl code %d)", r.status, r.curl_code);
    api_reply_free(&r);
    free(b);
}

static void errors_not_found(void)
{
    static const char *const paths[] = {"/nope", "/v1/nope", "/v1/delta/", "/v2/delta",
                                        "/healthz/x"};
    for (size_t i = 0; i < N_OF(paths); i++) {
        api_reply r;
        api_get(paths[i], &r);
        CHECKF(is_problem(&r, 404, "not_found", NULL), "GET %s", paths[i]);
        api_reply_free(&r);
    }
    api_reply r;
    api_postf(&r, "/v1/nope", "{}");
    CHECK(is_problem(&r, 404, "not_found", NULL));
    api_reply_free(&r);
}

static void errors_method_not_allowed(void)
{
    static const struct {
        const char *method, *path, *allow;
    } c[] = {
        {"GET", "/v1/delta", "POST, OPTIONS"},
        {"GET", "/v1/epsilon", "POST, OPTIONS"},
        {"PUT", "/v1/calibrate", "POST, OPTIONS"},
        {"DELETE", "/healthz", "GET, HEAD, OPTIONS"},
        {"POST", "/v1/accountants", "GET, HEAD, OPTIONS"},
        {"DELETE", "/openapi.yaml", "GET, HEAD, OPTIONS"},
        {"POST", "/v1/clients/x", "GET, HEAD, PUT, OPTIONS"},
        {"PUT", "/v1/rounds", "POST, OPTIONS"},
    };
    for (size_t i = 0; i < N_OF(c); i++) {
        api_reply r;
        const char *body =
            strcmp(c[i].method, "GET") == 0 || strcmp(c[i].method, "DELETE") == 0 ? NULL : "{}";
        api_call(c[i].method, c[i].path, body ? "application/json" : NULL, body,
                 body ? strlen(body) : 0, &r);
        CHECKF(is_problem(&r, 405, "method_not_allowed", NULL), "%s %s", c[i].method, c[i].path);
        CHECKF(strcmp(r.allow, c[i].allow) == 0, "%s %s: Allow '%s', want '%s'", c[i].method,
               c[i].path, r.allow, c[i].allow);
        api_reply_free(&r);
    }
}

static void errors_daemon_still_up(void)
{
    api_reply r;
    api_get("/healthz", &r);
    CHECK(r.status == 200);
    CHECK(jstr(r.json, "status") && strcmp(jstr(r.json, "status"), "ok") == 0);
    api_reply_free(&r);
    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilon\":1}", EPOCH_1);
    CHECK(is_compute_answer(&r));
    CHECK_REL(jnum(r.json, "delta"), DELTA_EPOCH_1, 1e-12);
    api_reply_free(&r);
}

const tl_test ERROR_TESTS[] = {
    TL_T(errors_malformed_json),
    TL_T(errors_duplicate_key),
    TL_T(errors_number_out_of_range),
    TL_T(errors_unknown_field),
    TL_T(errors_missing_field),
    TL_T(errors_wrong_type),
    TL_T(errors_invalid_parameter),
    TL_T(errors_too_many_values),
    TL_T(errors_events),
    TL_T(errors_relation_and_accountant),
    TL_T(errors_not_covered),
    TL_T(errors_calibrate),
    TL_T(errors_nesting_depth),
    TL_T(errors_media_type),
    TL_T(errors_body_too_large),
    TL_T(errors_body_too_large_chunked),
    TL_T(errors_bulk_body_limit),
    TL_T(errors_not_found),
    TL_T(errors_method_not_allowed),
    TL_T(errors_daemon_still_up),
};
const size_t ERROR_NTESTS = sizeof ERROR_TESTS / sizeof ERROR_TESTS[0];
