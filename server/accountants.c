/*
 * accountants.c - GET /v1/accountants: the catalogue of the accountants and of the event
 * classes each accepts, with their fields and relations (static text; no numerics).
 *
 * May call: http.h's reply helpers and jansson; nothing else of the server.
 */
#include <stdlib.h>

#include "resources.h"

/* One catalogue entry for an event class. */
static json_t *event_entry(const char *cls, const char *fields, const char *accountants,
                           const char *description)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "class_name", cls, "fields", fields, "accountants",
                     accountants, "description", description);
}

/* The catalogue entries of the fixed-size and truncated sampling and tree-aggregation
 * classes (event kinds 21..28). */
static void sampling_entries(json_t *ev)
{
    json_array_append_new(
        ev,
        event_entry("SampledWithoutReplacementDpEvent", "source_dataset_size, sample_size, event",
                    "pld (auto; advanced joint convexity, exact for this pair), rdp (Wang, "
                    "Balle, Kasiviswanathan 2019); replace_one only",
                    "the inner Gaussian (or Composed/SelfComposed Gaussians) on a fixed-size "
                    "batch drawn without replacement; noise multipliers relative to the "
                    "clipping norm (dp_accounting's rdp takes them relative to the "
                    "replace-one sensitivity: ours at sigma is theirs at sigma/2)"));
    json_array_append_new(
        ev, event_entry("SampledWithReplacementDpEvent", "source_dataset_size, sample_size, event",
                        "pld (advanced joint convexity over the draw count); replace_one only",
                        "the inner Gaussian on sample_size draws with replacement (a record "
                        "drawn K times shifts the sum by up to 2K); dp_accounting has no "
                        "accountant for it"));
    json_array_append_new(
        ev, event_entry("SingleEpochTreeAggregationDpEvent", "noise_multiplier, step_counts",
                        "gdp_exact (auto), rdp, pld; replace_special only",
                        "one epoch of DP-FTRL tree aggregation: exactly the Gaussian mechanism "
                        "of multiplier noise_multiplier / sqrt(ceil(log2(max steps + 1)))"));
    json_array_append_new(
        ev, event_entry("TruncatedSubsampledGaussianDpEvent",
                        "dataset_size, sampling_probability, truncated_batch_size, "
                        "noise_multiplier",
                        "pld (advanced joint convexity conditioned on the others sampled); "
                        "every relation",
                        "Poisson sampling with the batch cut to truncated_batch_size, then "
                        "Gaussian noise"));
}

/* dp_accounting's mechanism events (issue 16): catalogue entries, with the relations. */
static void mech_event_entries(json_t *ev)
{
    static const struct {
        const char *cls, *fields, *accountants, *description;
    } M[] = {
        {"RandomizedResponseDpEvent", "noise_parameter, num_buckets", "rdp, pld",
         "k-ary randomized response; replace_one only (as dp_accounting)"},
        {"DiscreteGaussianDpEvent", "sigma, sensitivity, dimension", "rdp",
         "discrete Gaussian noise: rho-zCDP with rho = sensitivity^2/(2 sigma^2), any dimension"},
        {"DiscreteLaplaceDpEvent", "noise_parameter, sensitivity", "pld (exact), rdp (pure DP)",
         "discrete Laplace noise on an integer query"},
        {"ExponentialMechanismDpEvent", "epsilon", "rdp (bounded range), pld (epsilon-DP pair)",
         "the epsilon-DP exponential mechanism"},
        {"PermuteAndFlipDpEvent", "epsilon", "rdp, pld (as an epsilon-DP mechanism)",
         "the epsilon-DP permute-and-flip mechanism"},
        {"ZCDpEvent", "rho, xi", "rdp", "(xi, rho)-zCDP: RDP xi + rho alpha"},
        {"MixtureOfGaussiansDpEvent", "standard_deviation, sensitivities, sampling_probs", "pld",
         "N(0, s^2) against sum_i p_i N(c_i, s^2); add_or_remove_one only"},
        {"RepeatAndSelectDpEvent", "event, mean, shape", "rdp",
         "the inner event repeated a random number of times, the best run released "
         "(Papernot & Steinke 2022)"},
    };
    for (size_t i = 0; i < sizeof M / sizeof M[0]; i++)
        json_array_append_new(
            ev, event_entry(M[i].cls, M[i].fields, M[i].accountants, M[i].description));
}

void res_accountants(const http_request *req, http_response *resp)
{
    (void)req;
    json_t *ev = json_array();
    mech_event_entries(ev);
    json_array_append_new(ev,
                          event_entry("GaussianDpEvent", "noise_multiplier", "gdp_exact, rdp, pld",
                                      "Gaussian noise with std noise_multiplier x sensitivity"));
    json_array_append_new(ev,
                          event_entry("LaplaceDpEvent", "noise_multiplier", "rdp, pld",
                                      "Laplace noise with scale noise_multiplier x sensitivity"));
    json_array_append_new(ev, event_entry("EpsilonDeltaDpEvent", "epsilon, delta",
                                          "pld (rdp when delta = 0)",
                                          "any (epsilon, delta)-DP mechanism"));
    json_array_append_new(
        ev, event_entry("PoissonSampledDpEvent", "sampling_probability, event",
                        "rdp (Gaussian inside), pld (Gaussian or Laplace inside); under "
                        "replace_one pld with a Gaussian inside (its worst-case pair, Lebeda, "
                        "Regehr, Kamath, Steinke 2025, Prop. 13)",
                        "the inner event on a Poisson sample; add_or_remove_one and "
                        "replace_special (the same pairs), replace_one"));
    json_array_append_new(ev, event_entry("SelfComposedDpEvent", "event, count", "all",
                                          "the event run count times (e.g. epochs)"));
    json_array_append_new(
        ev, event_entry("ComposedDpEvent", "events", "all", "each listed event run once"));
    json_array_append_new(ev, event_entry("NoOpDpEvent", "", "all", "touches no data"));
    json_array_append_new(ev, event_entry("NonPrivateDpEvent", "", "all",
                                          "releases data without noise: infinite cost"));
    json_array_append_new(
        ev, event_entry("ProjectedNoisySgdDpEvent",
                        "noise, noise_std | laplace_scale | noise_schedule | online_schedule, "
                        "lipschitz, smoothness, strong_convexity, learning_rate, diameter | "
                        "interval, dataset_size, order, index",
                        "pnsgd, pld", "one pass of projected noisy SGD (seed 000)"));
    json_array_append_new(ev,
                          event_entry("ProactiveDpSgdDpEvent", "dataset_size, phases, variant",
                                      "proactive (closed form next to RDP, the smaller), rdp, pld",
                                      "a client's local DP-SGD history (seed 002); calculator at "
                                      "POST /v1/proactive"));
    json_array_append_new(
        ev, event_entry("SgldDpEvent",
                        "clipping_norm, batch_size, dataset_size, step_size, steps, sampling",
                        "as the DP-SGD it maps to (clipped only)",
                        "SGLD (seed 003): unclipped is uncertifiable (422); clipped is DP-SGD "
                        "with sigma = 2b/(n C sqrt(eta))"));
    json_array_append_new(
        ev, event_entry("ShuffledDpSgdEpochDpEvent", "noise_multiplier, rounds",
                        "shuffle_exact, thm41, pld (exact epochs, thm41's (0, delta) outside "
                        "the exact range), gdp_clt (estimate)",
                        "one epoch of DP-SGD with random shuffling: M = rounds batches (seed 004); "
                        "add_or_remove_one only"));
    sampling_entries(ev);
    json_t *ac = json_array();
    static const struct {
        const char *name, *guarantee, *description;
    } A[] = {
        {"auto", "upper_bound",
         "rdp for events holding a ZCDpEvent, DiscreteGaussianDpEvent or RepeatAndSelectDpEvent "
         "(only rdp takes them), the smaller of rdp and pld at the first point for events "
         "holding an exponential mechanism, gdp_exact for unsampled Gaussians, shuffle_exact "
         "for shuffled "
         "epochs alone (thm41 outside its range), pld otherwise; never an estimate; the answer "
         "names the accountant picked"},
        {"shuffle_exact", "upper_bound",
         "seed 004's shuffled model computed numerically with a pessimistic discretisation "
         "(docs/MATH.md section 2.1): noise_multiplier 0.5 to 1000, up to 1e7 rounds per epoch; "
         "epochs and "
         "mixtures composed as PLDs; every answer also shows Theorem 4.1's (theorem_4_1)"},
        {"gdp_exact", "upper_bound", "compositions of unsampled Gaussians are exactly mu-GDP"},
        {"rdp", "upper_bound",
         "Renyi DP at dp_accounting's default orders with the improved conversion; answers "
         "name the order that attained the bound; POST /v1/rdp returns the curve at any orders"},
        {"pld", "upper_bound",
         "pessimistic privacy-loss distributions on a grid (value_discretization_interval, "
         "default 1e-4), both directions for sampled events, composed by FFT"},
        {"thm41", "upper_bound",
         "seed 004 Theorem 4.1 (B = 0.4748): a total-variation bound, the same delta for every "
         "epsilon; refuses parameters outside M >= 3, sigma >= sqrt(3/ln M) and condition (1)"},
        {"pnsgd", "upper_bound",
         "seed 000's bounds for projected noisy SGD; passes by optimal (KOV) composition"},
        {"proactive", "upper_bound",
         "seed 002's closed form (corrected F) reported next to RDP for the same history; the "
         "smaller is certified"},
        {"gdp_clt", "estimate",
         "seed 004 Theorem 5.2 asymptotic mu-GDP: for orientation only, never enforce with it"},
    };
    for (size_t i = 0; i < sizeof A / sizeof A[0]; i++)
        json_array_append_new(ac, json_pack("{s:s, s:s, s:s}", "name", A[i].name, "guarantee",
                                            A[i].guarantee, "description", A[i].description));
    json_t *o = json_pack("{s:o, s:o, s:[s,s,s], s:{s:s, s:s, s:s}, s:[s,s,s,s]}", "events", ev,
                          "accountants", ac, "neighboring_relations", "add_or_remove_one",
                          "replace_one", "replace_special", "guarantees", "upper_bound",
                          "the true value is at most this: safe to rely on", "estimate",
                          "an approximation: never used for enforcement", "lower_bound",
                          "the true value is at least this: an attack or diagnostic", "solve_for",
                          "noise_multiplier", "rounds", "count", "sampling_probability");
    if (o) {
        json_t *more = json_pack("[s,s,s,s]", "noise_std", "laplace_scale", "dataset_size", "c1");
        json_array_extend(json_object_get(o, "solve_for"), more);
        json_decref(more);
    }
    http_reply_json(resp, o ? 200 : 500, o);
}
