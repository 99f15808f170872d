/*
 * fuzz_request.c - libFuzzer target: decoding of compute request bodies (server/codec.h).
 *
 * The input is a request body. It goes through codec_parse_object and then through the
 * decoding steps of each compute handler (server/compute.c: /v1/delta, /v1/epsilon,
 * /v1/calibrate, /v1/curve, /v1/proactive) and of POST /v1/rounds (server/res_rounds.c),
 * in the order the handlers apply them, up to the point where a handler would call core.
 * The accountants themselves are not called (too slow for fuzzing). The handlers' static
 * helpers (decode_common, decode_dataset) are mirrored here with the public functions.
 *
 * The "event" member is decoded with every dp_param as solve_for (DP_PARAM_NONE included).
 * Every event that decodes must survive two round trips, else abort() (real invariants):
 *   - JSON: codec_encode_event -> json_dumps as the server answers -> codec_parse_object
 *     -> codec_event(DP_PARAM_NONE) must decode, and re-encoding gives the same JSON;
 *     a template (solve_for) is first filled in with the placeholder values the decoder
 *     itself validates with, as the solver would fill it;
 *   - binary (the ledger's log): dp_event_encode -> dp_event_decode must decode all the
 *     bytes, and re-encoding gives the same bytes.
 * The request reader's fast path (server/jsonin.h), when it takes the body, must build the
 * tree json_loadb builds, else abort().
 * Problems (malformed JSON, unknown fields, ...) are expected outcomes.
 */
#include <gsl/gsl_errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/dp/account.h"
#include "../../core/dp/event.h"
#include "../../core/ledger/ledger.h"
#include "../../server/codec.h"
#include "../../server/jsonin.h"
#include "../../server/problem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Say what broke (to stderr: libFuzzer and the regression runner show it), then abort. */
static void invariant_failed(const char *what, const problem *pb, const char *text)
{
    fprintf(stderr, "fuzz_request: invariant violated: %s\n", what);
    if (pb != NULL && pb->code != PB_NONE)
        fprintf(stderr, "  problem %s at '%s': %s\n", problem_code_name(pb->code), pb->field,
                pb->detail);
    if (text != NULL)
        fprintf(stderr, "  JSON: %s\n", text);
    abort();
}

static void problem_release(problem *pb)
{
    json_decref(pb->extra);
    memset(pb, 0, sizeof *pb);
}

/* ---- round trips ----------------------------------------------------------------------- */

/* The event as JSON text, exactly as http_reply_json writes answers. Owned by the caller. */
static char *event_text(const dp_event *ev, json_t **enc)
{
    *enc = codec_encode_event(ev);
    if (*enc == NULL)
        invariant_failed("codec_encode_event returned NULL for a decoded event", NULL, NULL);
    char *s = json_dumps(*enc, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (s == NULL)
        invariant_failed("json_dumps failed on an encoded event (NaN or infinity?)", NULL, NULL);
    return s;
}

static void roundtrip_json(const dp_event *ev)
{
    json_t *enc = NULL, *enc2 = NULL;
    char *text = event_text(ev, &enc);
    problem pb = {0};
    json_t *j = codec_parse_object(text, strlen(text), &pb);
    if (j == NULL)
        invariant_failed("an encoded event does not parse back", &pb, text);
    dp_event *back = codec_event(j, "event", DP_PARAM_NONE, &pb);
    if (back == NULL)
        invariant_failed("an encoded event does not decode back", &pb, text);
    char *text2 = event_text(back, &enc2);
    if (!json_equal(enc, enc2))
        invariant_failed("encode(decode(encode(ev))) differs from encode(ev)", NULL, text2);
    free(text2);
    json_decref(enc2);
    dp_event_free(back);
    json_decref(j);
    free(text);
    json_decref(enc);
    problem_release(&pb);
}

static void roundtrip_binary(const dp_event *ev)
{
    unsigned char *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, c1 = 0, n2 = 0, c2 = 0, used = 0;
    if (dp_event_encode(ev, &b1, &n1, &c1) != DPB_OK)
        invariant_failed("dp_event_encode refused a decoded event", NULL, NULL);
    dp_event *back = NULL;
    if (dp_event_decode(b1, n1, &back, &used) != DPB_OK)
        invariant_failed("dp_event_decode refused what dp_event_encode wrote", NULL, NULL);
    if (used != n1)
        invariant_failed("dp_event_decode did not consume the whole encoding", NULL, NULL);
    if (dp_event_encode(back, &b2, &n2, &c2) != DPB_OK || n2 != n1 || memcmp(b1, b2, n1) != 0)
        invariant_failed("binary encode(decode(encode(ev))) differs from encode(ev)", NULL, NULL);
    dp_event_free(back);
    free(b1);
    free(b2);
}

/* Fill the template's unknown with the placeholder the decoder validated it with (codec.c:
 * decode_pnsgd's probe; any value in range elsewhere), as the solver fills in its answer
 * before res_calibrate encodes the event. */
static void fill_unknown(dp_event *ev)
{
    int n = 0;
    dp_event *u = dp_event_find_unknown(ev, &n);
    if (u == NULL || n != 1)
        invariant_failed("codec_event accepted a template without exactly one unknown", NULL, NULL);
    switch (u->unknown) {
    case DP_PARAM_NOISE_MULTIPLIER:
        if (u->kind == DP_EV_SHUFFLED_EPOCH)
            u->u.shuffled.noise_multiplier = 1.0;
        else
            u->u.noise.noise_multiplier = 1.0;
        break;
    case DP_PARAM_ROUNDS:
        u->u.shuffled.rounds = 1;
        break;
    case DP_PARAM_COUNT:
        u->u.self.count = 1;
        break;
    case DP_PARAM_SAMPLING_PROBABILITY:
        u->u.sampled.sampling_probability = 0.5;
        break;
    case DP_PARAM_NOISE_SCALE:
        u->u.pnsgd.noise_level = 1.0;
        break;
    case DP_PARAM_DATASET_SIZE:
        u->u.pnsgd.n = u->u.pnsgd.index ? u->u.pnsgd.index : 1;
        break;
    case DP_PARAM_C1:
        u->u.pnsgd.c1 = 1.0;
        break;
    case DP_PARAM_NONE:
        break;
    }
    u->unknown = DP_PARAM_NONE;
}

/* Decode body.event with every solve_for, as /v1/delta, /v1/epsilon, /v1/curve, /v1/rounds
 * (DP_PARAM_NONE) and /v1/calibrate (the others) do, and check the round trips. */
static void events(json_t *j)
{
    for (int p = DP_PARAM_NONE; p <= DP_PARAM_C1; p++) {
        problem pb = {0};
        dp_event *ev = codec_event(json_object_get(j, "event"), "event", (dp_param)p, &pb);
        if (ev != NULL) {
            if (p != DP_PARAM_NONE)
                fill_unknown(ev);
            roundtrip_json(ev);
            roundtrip_binary(ev);
            dp_event_free(ev);
        } else if (pb.code == PB_NONE) {
            invariant_failed("codec_event failed without a problem", NULL, NULL);
        }
        problem_release(&pb);
    }
}

/* ---- the handlers' decoding, up to the call into core ----------------------------------- */

/* The handlers' shared decoding without the event (decoded by events()). */
static int common(json_t *j, const char *const *allowed, problem *pb)
{
    dp_relation rel;
    dp_accountant acct;
    dp_options opt;
    return codec_compute_common(j, allowed, &rel, &acct, &opt, pb);
}

static void delta_or_epsilon(json_t *j, int is_delta)
{
    problem pb = {0};
    double *vals = NULL;
    size_t n = 0;
    int scalar = 0;
    if (common(j, is_delta ? CODEC_DELTA_FIELDS : CODEC_EPSILON_FIELDS, &pb) == 0 &&
        codec_number_list(j, is_delta ? "epsilon" : "delta", is_delta ? "epsilons" : "deltas",
                          DP_MAX_POINTS, &vals, &n, &scalar, &pb) > 0) {
        if (vals == NULL || n == 0 || n > DP_MAX_POINTS || (scalar && n != 1))
            invariant_failed("codec_number_list returned an inconsistent list", &pb, NULL);
        volatile double sink = 0.0;
        for (size_t i = 0; i < n; i++)
            sink += vals[i];
        (void)sink;
    }
    free(vals);
    problem_release(&pb);
}

static void calibrate(json_t *j)
{
    static const char *const target_fields[] = {"epsilon", "delta", NULL};
    problem pb = {0};
    const char *sf;
    double eps_t, delta_t;
    if (common(j, CODEC_CALIBRATE_FIELDS, &pb) < 0 ||
        codec_string(j, "", "solve_for", 1, &sf, &pb) < 0)
        goto out;
    json_t *t = json_object_get(j, "target");
    if (t == NULL || !json_is_object(t))
        goto out;
    if (codec_only_fields(t, "target", target_fields, &pb) < 0 ||
        codec_number(t, "target", "epsilon", 1, &eps_t, &pb) < 0 ||
        codec_number(t, "target", "delta", 1, &delta_t, &pb) < 0)
        goto out;
    double clip, ratio;
    (void)codec_dataset(j, &clip, &ratio, &pb);
out:
    problem_release(&pb);
}

static void curve(json_t *j)
{
    static const char *const range_fields[] = {"min", "max", "points", NULL};
    problem pb = {0};
    double *eps = NULL, *alpha = NULL;
    size_t n = 0, na = 0;
    int scalar;
    if (common(j, CODEC_CURVE_FIELDS, &pb) < 0)
        goto out;
    json_t *range = json_object_get(j, "epsilon_range");
    if (range) {
        double lo, hi;
        uint64_t pts;
        if (json_object_get(j, "epsilons") || !json_is_object(range))
            goto out;
        if (codec_only_fields(range, "epsilon_range", range_fields, &pb) < 0 ||
            codec_number(range, "epsilon_range", "min", 1, &lo, &pb) < 0 ||
            codec_number(range, "epsilon_range", "max", 1, &hi, &pb) < 0 ||
            codec_uint(range, "epsilon_range", "points", 1, 2, DP_MAX_POINTS, &pts, &pb) < 0)
            goto out;
        if (pts < 2 || pts > DP_MAX_POINTS)
            invariant_failed("codec_uint returned a value outside [min, max]", &pb, NULL);
    } else if (codec_number_list(j, "epsilons_single_unused", "epsilons", DP_MAX_POINTS, &eps, &n,
                                 &scalar, &pb) < 0) {
        goto out;
    }
    uint64_t tp = 0;
    int has_tp = codec_uint(j, "", "tradeoff_points", 0, 2, DP_MAX_POINTS, &tp, &pb);
    if (has_tp < 0)
        goto out;
    if (json_object_get(j, "alphas") && !has_tp)
        (void)codec_number_list(j, "alphas_single_unused", "alphas", DP_MAX_POINTS, &alpha, &na,
                                &scalar, &pb);
out:
    free(eps);
    free(alpha);
    problem_release(&pb);
}

static void proactive(json_t *j)
{
    problem pb = {0};
    const char *proc, *vs = "corrected", *th = "B.4";
    double sigma, eps, delta, theta = 1.0, epochs;
    uint64_t N = 0, s;
    if (codec_only_fields(j, "", CODEC_PROACTIVE_FIELDS, &pb) < 0 ||
        codec_string(j, "", "procedure", 1, &proc, &pb) < 0 ||
        codec_string(j, "", "variant", 0, &vs, &pb) < 0 ||
        codec_string(j, "", "theorem", 0, &th, &pb) < 0 ||
        codec_number(j, "", "theta", 0, &theta, &pb) < 0)
        goto out;
    if (strcmp(proc, "noise_multiplier") == 0) {
        if (codec_number(j, "", "epsilon", 1, &eps, &pb) < 0)
            goto out;
        (void)codec_number(j, "", "delta", 1, &delta, &pb);
    } else if (strcmp(proc, "plan") == 0 || strcmp(proc, "max_rounds") == 0) {
        int plan = proc[0] == 'p';
        if (codec_number(j, "", "noise_multiplier", 1, &sigma, &pb) < 0 ||
            codec_number(j, "", "delta", 1, &delta, &pb) < 0 ||
            codec_uint(j, "", "dataset_size", 1, 1, 9007199254740992ULL, &N, &pb) < 0)
            goto out;
        if (plan)
            (void)codec_number(j, "", "epochs", 1, &epochs, &pb);
        else
            (void)codec_uint(j, "", "batch_size", 1, 1, N, &s, &pb);
    }
out:
    problem_release(&pb);
}

/* res_rounds.c: res_round_post up to ledger_round (the event is decoded by events()). */
static void round_post(json_t *j)
{
    problem pb = {0};
    const char *rid, *pol = "all_or_nothing";
    int dry = 0, ran = 0;
    if (codec_only_fields(j, "", CODEC_ROUND_FIELDS, &pb) < 0 ||
        codec_string(j, "", "round_id", 1, &rid, &pb) < 0 ||
        codec_string(j, "", "policy", 0, &pol, &pb) < 0 ||
        codec_bool(j, "", "dry_run", 0, &dry, &pb) < 0 ||
        codec_bool(j, "", "already_ran", 0, &ran, &pb) < 0)
        goto out;
    json_t *pa = json_object_get(j, "participants");
    if (!json_is_array(pa) || json_array_size(pa) == 0 ||
        json_array_size(pa) > LEDGER_MAX_PARTICIPANTS)
        goto out;
    if (codec_id(rid, strlen(rid), "round_id", &pb) < 0)
        goto out;
    for (size_t i = 0; i < json_array_size(pa); i++) {
        json_t *v = json_array_get(pa, i);
        if (!json_is_string(v) ||
            codec_id(json_string_value(v), json_string_length(v), "participants", &pb) < 0)
            goto out;
    }
    /* the idempotency hash of the canonical request (last: it changes j) */
    json_object_set_new(j, "policy", json_string(pol));
    json_object_set_new(j, "dry_run", json_boolean(dry));
    json_object_set_new(j, "already_ran", json_boolean(ran));
    char *canon = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (canon != NULL) {
        unsigned char h[16];
        ledger_hash128(canon, strlen(canon), h);
        free(canon);
    }
out:
    problem_release(&pb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int initialised;
    if (!initialised) {
        gsl_set_error_handler_off(); /* as main() does */
        json_object_seed(0x5eed);    /* reproducible object order (messages name a key) */
        initialised = 1;
    }
    /* the request reader's fast path builds jansson's own tree, or leaves the body to it */
    json_t *fast = jsonin_plain((const char *)data, size);
    if (fast != NULL) {
        json_t *ref = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
        if (ref == NULL || !json_equal(fast, ref))
            invariant_failed("the plain reader's tree is not json_loadb's", NULL, NULL);
        json_decref(ref);
        json_decref(fast);
    }
    problem pb = {0};
    json_t *j = codec_parse_object((const char *)data, size, &pb);
    if (j == NULL) {
        if (pb.code == PB_NONE)
            invariant_failed("codec_parse_object failed without a problem", NULL, NULL);
        problem_release(&pb);
        return 0;
    }
    if (!json_is_object(j))
        invariant_failed("codec_parse_object returned a non-object", NULL, NULL);
    events(j);
    delta_or_epsilon(j, 1);
    delta_or_epsilon(j, 0);
    calibrate(j);
    curve(j);
    proactive(j);
    round_post(j);
    json_decref(j);
    problem_release(&pb);
    return 0;
}
