/*
 * test_rdpgap_api.c - issue 39's rdp items over HTTP: POST /v1/rdp at the order infinity
 * ("infinite"), Poisson sampling of a composition of Gaussians (its one effective Gaussian,
 * against mpmath), repeat-and-select with Poisson repetitions at the order Papernot &
 * Steinke's Theorem 6 is stated for (the three examples, against the theorem's value
 * computed with mpmath), and an (epsilon, delta) event composed with a zCDP event.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "suites.h"

#define LAP(b) "{\"class_name\":\"LaplaceDpEvent\",\"noise_multiplier\":" b "}"
#define GAU(s) "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":" s "}"

/* The RDP of event at the one order `order` (a JSON number or "\"infinite\""). */
static double rdp_at(const char *event, const char *order)
{
    api_reply r;
    api_postf(&r, "/v1/rdp", "{\"event\":%s,\"orders\":[%s]}", event, order);
    CHECKF(r.status == 200, "%s at %s: %ld %.300s", event, order, r.status, r.body);
    double v = jnum(r.json, "rdp[0]");
    api_reply_free(&r);
    return v;
}

/* The order infinity: two Laplace mechanisms of scales 1 and 2 are 1.5-DP, their max
 * divergence; a Gaussian has none ("infinite"); the order spelled back as "infinite". */
static void rdpgap_order_infinity(void)
{
    api_reply r;
    api_postf(&r, "/v1/rdp",
              "{\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[" LAP("1") "," LAP(
                  "2") "]},\"orders\":[2,\"infinite\"]}");
    CHECKF(r.status == 200, "%ld %.300s", r.status, r.body);
    double v = jnum(r.json, "rdp[1]");
    CHECKF(v >= 1.5 && v <= 1.5 * (1 + 1e-11), "D_inf %.17g", v);
    const char *o = jstr(r.json, "orders[1]");
    CHECK(o != NULL && strcmp(o, "infinite") == 0);
    api_reply_free(&r);
    api_postf(&r, "/v1/rdp", "{\"event\":" GAU("1") ",\"orders\":[\"infinite\"]}");
    o = r.status == 200 ? jstr(r.json, "rdp[0]") : NULL;
    CHECKF(o != NULL && strcmp(o, "infinite") == 0, "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    api_postf(&r, "/v1/rdp", "{\"event\":" GAU("1") ",\"orders\":[\"-infinite\"]}");
    CHECK(is_problem(&r, 400, "wrong_type", "orders[0]"));
    api_reply_free(&r);
}

/* Poisson sampling (q 0.1) of Composed(Gaussian 1, Gaussian 2): the Gaussian of multiplier
 * (1 + 1/4)^(-1/2); mpmath's quadrature of the pair's Renyi divergence (ref_rdpgap.h). */
static void rdpgap_sampled_composition(void)
{
    static const struct {
        const char *order;
        double want;
    } W[] = {{"2", 0.024598393102702207}, {"4.5", 0.21905233022566198}, {"16", 7.543909303203443}};
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++) {
        double v = rdp_at("{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.1,"
                          "\"event\":{\"class_name\":\"ComposedDpEvent\",\"events\":[" GAU(
                              "1") "," GAU("2") "]}}",
                          W[i].order);
        CHECKF(v >= W[i].want && v <= W[i].want * (1 + 1e-9), "order %s: %.17g vs %.17g",
               W[i].order, v, W[i].want);
    }
}

/* The three examples: Laplace of scale 1/eps repeated Poisson(mean) times, at
 * a = 1 + 1/expm1(eps): Theorem 6 with the exact delta-hat (mpmath) 40.0977, 45.3854,
 * 0.0050414 (before: 2.69e9, 607.7, 0.0259), never below, within 1e-3. */
static void rdpgap_repeat_select_poisson(void)
{
    static const struct {
        const char *scale, *mean, *order;
        double want;
    } W[] = {{"1", "1e10", "1.5819767068693265", 40.097748954545779},
             {"0.5", "1000", "1.1565176427496657", 45.385350504508345},
             {"1000", "100", "1000.500083333332", 0.0050413520604337949}};
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++) {
        char ev[300];
        snprintf(ev, sizeof ev,
                 "{\"class_name\":\"RepeatAndSelectDpEvent\",\"event\":{\"class_name\":"
                 "\"LaplaceDpEvent\",\"noise_multiplier\":%s},\"mean\":%s,\"shape\":\"infinite\"}",
                 W[i].scale, W[i].mean);
        double v = rdp_at(ev, W[i].order);
        CHECKF(v >= W[i].want && v <= W[i].want * (1 + 1e-3), "mean %s: %.17g vs %.17g", W[i].mean,
               v, W[i].want);
    }
}

const tl_test RDPGAP_API_TESTS[] = {
    TL_T(rdpgap_order_infinity),
    TL_T(rdpgap_sampled_composition),
    TL_T(rdpgap_repeat_select_poisson),
};
const size_t RDPGAP_API_NTESTS = sizeof RDPGAP_API_TESTS / sizeof RDPGAP_API_TESTS[0];
