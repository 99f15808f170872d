/*
 * test_contract.c - the shape of every answer: the report members of each 200 compute
 * answer, the per-endpoint result members, the scalar and list forms, and that no number
 * anywhere is NaN or infinite (an infinity is the string "infinite", never a number and
 * never null).
 */
#include <math.h>
#include <string.h>

#include "../../server/auth.h"
#include "../../server/problem.h"
#include "../../server/resources.h"
#include "check.h"
#include "client.h"
#include "suites.h"

enum { K_DELTA, K_EPSILON, K_CALIBRATE };

static const struct {
    int kind;
    const char *body;
} VALID[] = {
    {K_DELTA, "{\"event\":" EPOCH_1 ",\"epsilon\":1}"},
    {K_DELTA, "{\"event\":" EPOCH_1 ",\"epsilons\":[0,0.5,1,2,5,100]}"},
    {K_DELTA, "{\"event\":" EPOCH_1 ",\"epsilon\":0,\"accountant\":\"thm41\","
              "\"neighboring_relation\":\"add_or_remove_one\"}"},
    {K_DELTA, "{\"event\":" EPOCH_1 ",\"epsilons\":[0,0.5,1,2,5,100],\"accountant\":\"gdp_clt\"}"},
    {K_DELTA, "{\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[" EPOCH_1
              ",{\"class_name\":\"SelfComposedDpEvent\",\"count\":3,\"event\":" EPOCH(
                  2, 20000000) "}]},\"epsilon\":1}"},
    {K_DELTA, "{\"event\":" EPOCH(1e6, 9007199254740993) ",\"epsilon\":1,"
                                                         "\"accountant\":\"gdp_clt\"}"},
    {K_EPSILON, "{\"event\":" EPOCH_1 ",\"delta\":0.5}"},
    {K_EPSILON, "{\"event\":" EPOCH_1 ",\"deltas\":[0.5,0.01,0.001,1e-300]}"},
    {K_EPSILON, "{\"event\":" EPOCH_1 ",\"deltas\":[0.5,0.01,1e-10,1e-300],"
                "\"accountant\":\"gdp_clt\"}"},
    {K_CALIBRATE, "{\"accountant\":\"thm41\",\"event\":{\"class_name\":"
                  "\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1},\"solve_for\":\"rounds\","
                  "\"target\":{\"epsilon\":0,\"delta\":0.01},"
                  "\"dataset\":{\"clipping_norm\":1,\"max_noise_per_round\":0.1}}"},
    {K_CALIBRATE, "{\"accountant\":\"thm41\",\"event\":{\"class_name\":"
                  "\"ShuffledDpSgdEpochDpEvent\",\"rounds\":1140369},\"solve_for\":\"noise_"
                  "multiplier\",\"target\":{\"epsilon\":1,"
                  "\"delta\":0.01}}"},
    {K_CALIBRATE, "{\"event\":{\"class_name\":\"SelfComposedDpEvent\",\"count\":null,\"event\":"
                  "" EPOCH(1, 100000000) "},\"solve_for\":\"count\",\"target\":{\"epsilon\":0,"
                                         "\"delta\":0.05}}"},
};

static const char *const PATHS[] = {"/v1/delta", "/v1/epsilon", "/v1/calibrate"};

/* "infinite" or a finite number >= 0 */
static int is_epsilon_value(const json_t *v)
{
    if (json_is_string(v))
        return strcmp(json_string_value(v), "infinite") == 0;
    return json_is_number(v) && json_number_value(v) >= 0.0;
}

static void check_delta_results(const json_t *o, size_t k)
{
    json_t *res = jget(o, "results"), *e;
    size_t i;
    CHECKF(json_array_size(res) > 0, "request %zu", k);
    json_array_foreach(res, i, e)
    {
        json_t *d = json_object_get(e, "delta"), *ld = json_object_get(e, "ln_delta");
        CHECKF(json_is_number(json_object_get(e, "epsilon")), "request %zu results[%zu]", k, i);
        CHECKF(json_is_number(d) && json_number_value(d) >= 0.0 && json_number_value(d) <= 1.0,
               "request %zu results[%zu].delta", k, i);
        CHECKF(json_is_number(ld) && json_number_value(ld) <= 0.0,
               "request %zu results[%zu].ln_delta", k, i);
        if (json_is_number(d) && json_number_value(d) > 1e-300 && json_is_number(ld))
            CHECK_REL(json_number_value(ld), log(json_number_value(d)), 1e-9);
    }
}

static void check_epsilon_results(const json_t *o, size_t k)
{
    json_t *res = jget(o, "results"), *e;
    size_t i;
    CHECKF(json_array_size(res) > 0, "request %zu", k);
    json_array_foreach(res, i, e)
    {
        json_t *eps = json_object_get(e, "epsilon"), *cert = json_object_get(e, "certified");
        CHECKF(json_is_number(json_object_get(e, "delta")), "request %zu results[%zu]", k, i);
        CHECKF(is_epsilon_value(eps), "request %zu results[%zu].epsilon", k, i);
        CHECKF(json_is_boolean(cert), "request %zu results[%zu].certified", k, i);
        /* certified exactly when a finite epsilon is given */
        CHECKF(json_is_true(cert) == json_is_number(eps), "request %zu results[%zu]", k, i);
    }
}

static void check_calibration(const json_t *o, size_t k)
{
    const char *sf = jstr(o, "solve_for");
    CHECKF(sf != NULL, "request %zu: solve_for", k);
    json_t *v = jget(o, "value");
    CHECKF(json_is_number(v) && json_number_value(v) > 0.0, "request %zu: value", k);
    if (sf && strcmp(sf, "noise_multiplier") != 0)
        CHECKF(json_is_integer(v), "request %zu: %s must be an integer", k, sf);
    CHECKF(json_is_number(jget(o, "target.epsilon")) && json_is_number(jget(o, "target.delta")),
           "request %zu: target", k);
    CHECKF(json_is_number(jget(o, "achieved.epsilon")) && json_is_number(jget(o, "achieved.delta")),
           "request %zu: achieved", k);
    CHECKF(jnum(o, "achieved.delta") <= jnum(o, "target.delta"), "request %zu: overshoots", k);
    CHECKF(jstr(o, "event.class_name") != NULL, "request %zu: event", k);
    CHECKF(json_is_object(jget(o, "details")), "request %zu: details", k);
    if (sf && strcmp(sf, "noise_multiplier") == 0)
        CHECKF(jnum(o, "interval.min") == json_number_value(v) &&
                   jnum(o, "interval.max") >= jnum(o, "interval.min"),
               "request %zu: interval", k);
}

static void contract_compute_answers(void)
{
    for (size_t k = 0; k < sizeof VALID / sizeof VALID[0]; k++) {
        api_reply r;
        api_call("POST", PATHS[VALID[k].kind], "application/json", VALID[k].body,
                 strlen(VALID[k].body), &r);
        CHECKF(is_compute_answer(&r), "request %zu: POST %s %.200s", k, PATHS[VALID[k].kind],
               VALID[k].body);
        const json_t *o = r.json;
        CHECKF(jstr(o, "reference") && jstr(o, "reference")[0], "request %zu: reference", k);
        CHECKF(jstr(o, "neighboring_relation") &&
                   strcmp(jstr(o, "neighboring_relation"), "add_or_remove_one") == 0,
               "request %zu: neighboring_relation", k);
        const char *g = jstr(o, "guarantee");
        if (g && strcmp(g, "upper_bound") == 0) {
            /* a certified answer: its conditions were checked and all hold */
            size_t i;
            json_t *c;
            CHECKF(json_array_size(jget(o, "conditions")) > 0, "request %zu", k);
            json_array_foreach(jget(o, "conditions"), i, c)
                CHECKF(json_is_true(json_object_get(c, "holds")), "request %zu cond %zu", k, i);
            CHECKF(json_is_true(jget(o, "valid")), "request %zu: valid", k);
        }
        if (g && strcmp(g, "estimate") == 0)
            CHECKF(json_array_size(jget(o, "warnings")) > 0, "request %zu: estimate unflagged", k);
        switch (VALID[k].kind) {
        case K_DELTA:
            check_delta_results(o, k);
            break;
        case K_EPSILON:
            check_epsilon_results(o, k);
            break;
        default:
            check_calibration(o, k);
        }
        api_reply_free(&r);
    }
}

static void contract_scalar_and_list_forms(void)
{
    api_reply r;
    api_postf(&r, "/v1/epsilon", "{\"accountant\":\"thm41\",\"event\":%s,\"delta\":0.001}",
              EPOCH_1);
    CHECK(is_compute_answer(&r));
    CHECK(jnum(r.json, "delta") == 0.001);
    CHECK(jstr(r.json, "epsilon") && strcmp(jstr(r.json, "epsilon"), "infinite") == 0);
    CHECK(json_array_size(jget(r.json, "results")) == 1);
    api_reply_free(&r);

    api_postf(&r, "/v1/epsilon", "{\"accountant\":\"thm41\",\"event\":%s,\"deltas\":[0.5]}",
              EPOCH_1);
    CHECK(is_compute_answer(&r));
    CHECK(jget(r.json, "delta") == NULL && jget(r.json, "epsilon") == NULL);
    CHECK(json_array_size(jget(r.json, "results")) == 1);
    api_reply_free(&r);

    api_postf(&r, "/v1/delta", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilons\":[2]}", EPOCH_1);
    CHECK(is_compute_answer(&r));
    CHECK(jget(r.json, "delta") == NULL && jget(r.json, "ln_delta") == NULL);
    CHECK(jnum(r.json, "results[0].epsilon") == 2.0);
    api_reply_free(&r);
}

/* The gdp_clt estimate falls with epsilon and stays in [0, 1]. */
static void contract_gdp_delta_monotone(void)
{
    api_reply r;
    api_postf(&r, "/v1/delta",
              "{\"accountant\":\"gdp_clt\",\"event\":%s,\"epsilons\":[0,0.001,0.01,0.1,0.5,1,2]}",
              EPOCH(1, 10000));
    CHECK(is_compute_answer(&r));
    double prev = 1.0;
    for (size_t i = 0; i < 7; i++) {
        char p[48];
        snprintf(p, sizeof p, "results[%zu].delta", i);
        double d = jnum(r.json, p);
        CHECKF(d >= 0.0 && d <= prev, "%s = %.17g after %.17g", p, d, prev);
        prev = d;
    }
    api_reply_free(&r);
}

/* A huge epsilon: delta underflows to 0, and ln_delta must still be a number (or the
 * string "-infinite"), never null. */
static void contract_huge_epsilon_has_no_nan(void)
{
    static const char *const eps[] = {"1e100", "1e151", "1e160", "1e300"};
    for (size_t i = 0; i < sizeof eps / sizeof eps[0]; i++) {
        api_reply r;
        api_postf(&r, "/v1/delta", "{\"accountant\":\"gdp_clt\",\"event\":%s,\"epsilon\":%s}",
                  EPOCH_1, eps[i]);
        CHECKF(is_compute_answer(&r), "epsilon %s", eps[i]);
        json_t *ld = jget(r.json, "ln_delta");
        CHECKF(json_is_number(ld) ||
                   (json_is_string(ld) && strcmp(json_string_value(ld), "-infinite") == 0),
               "epsilon %s: ln_delta is %s", eps[i],
               ld == NULL         ? "absent"
               : json_is_null(ld) ? "null"
                                  : "not a number");
        CHECKF(jnum(r.json, "delta") == 0.0, "epsilon %s: delta %g", eps[i], jnum(r.json, "delta"));
        api_reply_free(&r);
    }
}

/* Refusals that checked the theorem carry the accountant and the conditions, shaped like
 * those of a 200 answer. */
static void contract_problem_conditions(void)
{
    static const char *const bodies[] = {
        "{\"accountant\":\"thm41\",\"event\":" EPOCH(1, 1000) ",\"epsilon\":1}",
        "{\"accountant\":\"thm41\",\"event\":" EPOCH(1, 2) ",\"epsilon\":1}",
        "{\"event\":" EPOCH(0.3, 100) ",\"epsilon\":1}",
    };
    for (size_t k = 0; k < sizeof bodies / sizeof bodies[0]; k++) {
        api_reply r;
        api_call("POST", "/v1/delta", "application/json", bodies[k], strlen(bodies[k]), &r);
        CHECKF(is_problem(&r, 422, "not_covered", NULL), "%s", bodies[k]);
        CHECKF(jstr(r.json, "accountant") && strcmp(jstr(r.json, "accountant"), "thm41") == 0, "%s",
               bodies[k]);
        json_t *conds = jget(r.json, "conditions"), *c;
        size_t i;
        int failing = 0;
        CHECKF(json_array_size(conds) > 0, "%s", bodies[k]);
        json_array_foreach(conds, i, c)
        {
            CHECKF(json_is_string(json_object_get(c, "name")) &&
                       json_is_string(json_object_get(c, "statement")) &&
                       json_is_boolean(json_object_get(c, "holds")) &&
                       json_is_number(json_object_get(c, "lhs")) &&
                       json_is_number(json_object_get(c, "rhs")),
                   "%s: conditions[%zu]", bodies[k], i);
            failing += json_is_false(json_object_get(c, "holds"));
        }
        CHECKF(failing >= 1, "%s: no failing condition is reported", bodies[k]);
        api_reply_free(&r);
    }
}

/* The calibrated event comes back in the request's dp_accounting form, solved. */
static void contract_calibrate_event_echo(void)
{
    api_reply r;
    api_postf(&r, "/v1/calibrate",
              "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"SelfComposedDpEvent\","
              "\"count\":4,\"event\":{"
              "\"class_name\":\"ShuffledDpSgdEpochDpEvent\",\"noise_multiplier\":1.5}},"
              "\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,\"delta\":0.02}}");
    CHECK(is_compute_answer(&r));
    const json_t *o = r.json;
    CHECK(jstr(o, "event.class_name") &&
          strcmp(jstr(o, "event.class_name"), "SelfComposedDpEvent") == 0);
    CHECK(jint_is(o, "event.count", 4));
    CHECK(jstr(o, "event.event.class_name") &&
          strcmp(jstr(o, "event.event.class_name"), "ShuffledDpSgdEpochDpEvent") == 0);
    CHECK(jnum(o, "event.event.noise_multiplier") == 1.5);
    CHECK(json_is_integer(jget(o, "event.event.rounds")) &&
          json_equal(jget(o, "event.event.rounds"), jget(o, "value")));
    CHECK(json_object_size(jget(o, "event")) == 3);
    CHECK(json_object_size(jget(o, "event.event")) == 3);
    api_reply_free(&r);
}

/* Answers the other suites do not reach, so that the contract check sees them too: 422 from
 * /v1/curve and from POST /v1/rounds (a whole-round refusal, before any client), a PNSGD
 * event refused for a missing index, and the checks before routing through libcurl. */
static void contract_more_statuses(void)
{
    api_reply r;
    api_postf(&r, "/v1/curve", "{\"accountant\":\"thm41\",\"event\":%s,\"epsilons\":[1]}",
              EPOCH(1, 10));
    CHECK(is_problem(&r, 422, "not_covered", NULL));
    api_reply_free(&r);
    api_postf(&r, "/v1/rounds",
              "{\"round_id\":\"contract-422\",\"event\":{\"class_name\":\"UnsupportedDpEvent\"},"
              "\"participants\":[\"nobody\"]}");
    CHECK(is_problem(&r, 422, "unsupported", "event.class_name"));
    api_reply_free(&r);
    /* fixed_index needs its index: refused here, and by the schema (the contract check
     * fails when a request refused for its structure is valid by the schema) */
    api_postf(&r, "/v1/delta",
              "{\"event\":{\"class_name\":\"ProjectedNoisySgdDpEvent\",\"noise\":\"gaussian\","
              "\"noise_std\":4,\"lipschitz\":1,\"smoothness\":1,\"strong_convexity\":0,"
              "\"learning_rate\":0.1,\"diameter\":1,\"dataset_size\":100,"
              "\"order\":\"fixed_index\"},\"epsilon\":1}");
    CHECK(is_problem(&r, 400, "missing_field", "event.index"));
    api_reply_free(&r);
    /* the checks before routing, on an open and on a computing operation: a head over
     * --max-header-bytes (431) and %00 in the URL (400 bad_request) */
    static char pad[20100];
    int n = snprintf(pad, sizeof pad, "X-Pad: ");
    memset(pad + n, 'a', 20000);
    pad[n + 20000] = '\0';
    api_set_header2(pad);
    api_get("/healthz", &r);
    CHECK(is_problem(&r, 431, "headers_too_large", NULL));
    api_reply_free(&r);
    api_postf(&r, "/v1/delta", "{\"event\":%s,\"epsilon\":1}", EPOCH_1);
    CHECK(is_problem(&r, 431, "headers_too_large", NULL));
    api_reply_free(&r);
    api_set_header2(NULL);
    api_get("/healthz?x=%00", &r);
    CHECK(is_problem(&r, 400, "bad_request", NULL));
    api_reply_free(&r);
}

/* The routing table and the problem table, handed to the contract check (tests/contract/
 * validate.mjs): it derives from them the security and the statuses every operation of
 * openapi.yaml must declare, so the document cannot drift from the code. */
static void contract_tables_recorded(void)
{
    json_t *routes = json_array(), *problems = json_array();
    for (const route *rt = ROUTES; rt->method; rt++) {
        const char *scope = rt->scope == SCOPE_ADMIN    ? "admin"
                            : rt->scope == SCOPE_CHARGE ? "charge"
                            : rt->scope == SCOPE_READ   ? "read"
                                                        : NULL;
        CHECKF(rt->scope == SCOPE_NONE || scope != NULL, "route %s %s: scope %d", rt->method,
               rt->path, rt->scope);
        json_array_append_new(
            routes, json_pack("{s:s, s:s++, s:b, s:o, s:b}", "method", rt->method, "path", rt->path,
                              rt->prefix ? "{id}" : "", rt->suffix ? rt->suffix : "", "json_body",
                              rt->json_body, "scope", scope ? json_string(scope) : json_null(),
                              "compute", rt->compute));
    }
    for (int c = 1; c < PB_COUNT_; c++)
        json_array_append_new(problems,
                              json_pack("{s:s, s:i}", "code", problem_code_name((problem_code)c),
                                        "status", problem_http_status((problem_code)c)));
    CHECK(json_array_size(routes) > 0 && json_array_size(problems) > 0);
    api_record(
        json_pack("{s:s, s:o, s:o}", "kind", "tables", "routes", routes, "problems", problems));
}

const tl_test CONTRACT_TESTS[] = {
    TL_T(contract_tables_recorded),    TL_T(contract_more_statuses),
    TL_T(contract_compute_answers),    TL_T(contract_scalar_and_list_forms),
    TL_T(contract_gdp_delta_monotone), TL_T(contract_huge_epsilon_has_no_nan),
    TL_T(contract_problem_conditions), TL_T(contract_calibrate_event_echo),
};
const size_t CONTRACT_NTESTS = sizeof CONTRACT_TESTS / sizeof CONTRACT_TESTS[0];
