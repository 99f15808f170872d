/*
 * res_rounds.c - the rounds resource: POST /v1/rounds (a one-step round or a reservation,
 * idempotent by its canonical request), POST /v1/rounds/{id}/commit and /release, GET
 * /v1/rounds/{id}. Calls res_ledger (shared helpers), codec, metrics, http and core/ledger.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/ledger/ledger.h"
#include "app.h"
#include "auth.h"
#include "codec.h"
#include "jsonout.h"
#include "metrics.h"
#include "res_ledger.h"
#include "res_sth.h"
#include "resources.h"

static json_t *round_json(const ledger_round_res *r)
{
    json_t *adm = json_array(), *ref = json_array();
    for (size_t i = 0; r->outcomes && i < r->n; i++) {
        const ledger_outcome *o = &r->outcomes[i];
        if (o->admitted) {
            json_t *x =
                json_pack("{s:s, s:o, s:o, s:s, s:s, s:s}", "client", o->id, "spent_before",
                          codec_real(o->spent_before), "spent_after", codec_real(o->spent_after),
                          "reason", ledger_reason_name(o->reason), "accounting",
                          o->mode >= 0 ? ledger_mode_name(o->mode) : "unknown", "guarantee_kind",
                          ledger_guarantee_name(o->guarantee));
            if (x && o->after_accountant > 0)
                json_object_set_new(
                    x, "spent_after_accountant",
                    json_string(dp_accountant_name((dp_accountant)o->after_accountant)));
            json_array_append_new(adm, x);
        } else {
            /* an unknown client has no spend: its refusal names no figures (never null) */
            json_t *x =
                json_pack("{s:s, s:s}", "client", o->id, "reason", ledger_reason_name(o->reason));
            if (x && !isnan(o->spent_before))
                json_object_set_new(x, "spent_before", codec_real(o->spent_before));
            if (x && !isnan(o->spent_after))
                json_object_set_new(x, "would_spend", codec_real(o->spent_after));
            json_array_append_new(ref, x);
        }
    }
    /* charged: a one-step round's admitted clients; a reservation's reported ones once
     * committed (none while reserved, released or expired) */
    size_t charged = r->dry_run                     ? 0
                     : !r->reserve                  ? r->admitted
                     : r->state == LEDGER_COMMITTED ? r->reported
                                                    : 0;
    json_t *o = json_pack(
        "{s:s, s:s, s:b, s:b, s:I, s:I, s:o, s:o, s:s, s:s}", "round_id", r->round_id, "policy",
        r->policy == LEDGER_ALL_OR_NOTHING ? "all_or_nothing" : "admit_eligible", "dry_run",
        r->dry_run, "already_ran", r->already_ran, "participants", (json_int_t)r->n, "charged",
        (json_int_t)charged, "admitted", adm, "refused", ref, "phase",
        r->reserve ? "reserve" : "charge", "state", ledger_round_state_name(r->state));
    if (o && r->reserve && !r->dry_run) {
        char t[40];
        time_t at = (time_t)r->expires_at;
        struct tm tm;
        gmtime_r(&at, &tm);
        strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_set_new(o, "expires_at", json_string(t));
        json_object_set_new(
            o, "reserved", json_integer(r->state == LEDGER_RESERVED ? (json_int_t)r->admitted : 0));
        if (r->owner[0]) /* the key that holds it: only it or an admin key commits, releases */
            json_object_set_new(o, "reserved_by", json_string(r->owner));
        if (r->state == LEDGER_COMMITTED && r->outcomes) {
            json_t *rep = json_array();
            for (size_t i = 0; i < r->n; i++)
                if (r->outcomes[i].reported)
                    json_array_append_new(rep, json_string(r->outcomes[i].id));
            json_object_set_new(o, "reported", rep);
        }
    }
    if (o && r->summarized)
        json_object_set_new(o, "summarized", json_true());
    return o;
}

/* A copy of v with every number in one spelling per value, so that requests are compared
 * by meaning: the decoders read an integer and a real of the same value alike (a number as
 * its double, a whole number from either), so an integer-valued real inside the int64 range
 * becomes that integer (4.0, 4e0 and 0.40e1 are 4; -0.0 is 0) and any other real keeps its
 * exact double (printed with 17 digits: one string per double). Distinct doubles never meet;
 * an integer beyond 2^53 and the real nearest to it stay distinct (a needless conflict at
 * worst, never a false replay). NULL when out of memory. */
static json_t *canonical_numbers(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            json_t *c = o ? canonical_numbers(x) : NULL;
            if (c == NULL || json_object_set_new(o, k, c) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    case JSON_ARRAY: {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            json_t *c = a ? canonical_numbers(x) : NULL;
            if (c == NULL || json_array_append_new(a, c) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    case JSON_REAL: {
        double d = json_real_value(v);
        if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            return json_integer((json_int_t)d); /* -0.0 too: 0 */
        return json_real(d);
    }
    default:
        return json_incref(v);
    }
}

/* The POST /v1/rounds body (own->body) into rq (its policy's name into *pol, borrowed from
 * the body): the participants into own->ids and the event into own->ev (the caller releases
 * own, even on failure). 0, or -1 with pb set. */
static int decode_round(const http_request *req, lr_owned *own, ledger_round_req *rq,
                        const char **pol, problem *pb)
{
    json_t *j = own->body;
    const char *rid, *phase = "charge";
    const app_state *app = req->app;
    if (codec_only_fields(j, "", CODEC_ROUND_FIELDS, pb) < 0 ||
        codec_string(j, "", "round_id", 1, &rid, pb) < 0 ||
        codec_string(j, "", "policy", 0, pol, pb) < 0 ||
        codec_bool(j, "", "dry_run", 0, &rq->dry_run, pb) < 0 ||
        codec_bool(j, "", "already_ran", 0, &rq->already_ran, pb) < 0 ||
        codec_string(j, "", "phase", 0, &phase, pb) < 0)
        return -1;
    if (codec_id(rid, strlen(rid), "round_id", pb) < 0)
        return -1;
    if (strcmp(phase, "charge") != 0 && strcmp(phase, "reserve") != 0) {
        problem_set(pb, PB_INVALID_PARAMETER, "phase",
                    "phase must be \"charge\" (admit and charge at once) or \"reserve\" (hold "
                    "the admitted clients' budget until POST /v1/rounds/{id}/commit or /release)");
        return -1;
    }
    rq->reserve = phase[0] == 'r';
    rq->ttl_seconds = app && app->reservation_ttl ? app->reservation_ttl : 3600;
    if (codec_uint(j, "", "reservation_ttl_seconds", 0, 1, LEDGER_TTL_MAX, &rq->ttl_seconds, pb) <
        0)
        return -1;
    if (json_object_get(j, "reservation_ttl_seconds") && !rq->reserve) {
        problem_set(pb, PB_INVALID_PARAMETER, "reservation_ttl_seconds",
                    "reservation_ttl_seconds applies to \"phase\": \"reserve\" only");
        return -1;
    }
    if (rq->reserve && rq->already_ran) {
        problem_set(pb, PB_INVALID_PARAMETER, "already_ran",
                    "a round that already ran is recorded in one step (already_ran), not "
                    "reserved: leave out \"phase\": \"reserve\"");
        return -1;
    }
    snprintf(rq->round_id, sizeof rq->round_id, "%s", rid);
    if (strcmp(*pol, "all_or_nothing") == 0)
        rq->policy = LEDGER_ALL_OR_NOTHING;
    else if (strcmp(*pol, "admit_eligible") == 0)
        rq->policy = LEDGER_ADMIT_ELIGIBLE;
    else {
        problem_set(pb, PB_INVALID_PARAMETER, "policy",
                    "policy must be \"all_or_nothing\" or \"admit_eligible\"");
        return -1;
    }
    json_t *pa = json_object_get(j, "participants");
    if (pa == NULL) {
        problem_set(pb, PB_MISSING_FIELD, "participants",
                    "'participants' is required: a list of client ids");
        return -1;
    }
    if (lr_decode_ids(pa, "participants", &own->ids, &rq->n, pb) < 0)
        return -1;
    rq->participants = own->ids;
    rq->event = own->ev = lr_event_or_name(req, j, pb);
    return own->ev ? 0 : -1;
}

/* The round's idempotency keys into rq: the hash of the canonical request (and of the
 * request as versions before 0.3 hashed it). Completes j with the defaults. 0, or -1 (out of
 * memory) with pb set. */
static int round_hashes(json_t *j, ledger_round_req *rq, const char *pol, problem *pb)
{
    /* idempotency: the hash of the canonical request (sorted keys, compact, numbers in one
     * spelling per value, defaults made explicit so that writing a default out does not
     * change the request) */
    json_object_set_new(j, "policy", json_string(pol));
    json_object_set_new(j, "dry_run", json_boolean(rq->dry_run));
    json_object_set_new(j, "already_ran", json_boolean(rq->already_ran));
    /* a one-step round's hash is what it was before two-phase rounds existed: "phase":
     * "charge" spelled out is the default, left out; a reservation spells out its ttl */
    if (rq->reserve) {
        json_object_set_new(j, "reservation_ttl_seconds",
                            json_integer((json_int_t)rq->ttl_seconds));
    } else {
        json_object_del(j, "phase");
    }
    json_t *cj = canonical_numbers(j);
    char *canon =
        cj ? json_dumps(cj, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    /* the hash versions before 0.3 stored: numbers as spelled */
    char *legacy = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(cj);
    if (canon == NULL || legacy == NULL) {
        free(canon);
        free(legacy);
        return problem_oom(pb);
    }
    ledger_hash128(canon, strlen(canon), rq->body_hash);
    ledger_hash128(legacy, strlen(legacy), rq->legacy_hash);
    free(canon);
    free(legacy);
    return 0;
}

/* The caller of a commit or release (ledger_caller): its key's identity (auth_owner) and
 * whether it is an admin key; without API keys, nobody in particular (not checked). */
static ledger_caller caller_of(const http_request *req)
{
    ledger_caller who = {NULL, 1};
    if (req->key) {
        who.key = auth_owner(req->key);
        who.admin = auth_allows(req->key, SCOPE_ADMIN);
    }
    return who;
}

/* Answer round r (200), with the signed receipt of its charge (res_receipt_write; commit:
 * of its commit) as its last member, "receipt", when the daemon signs and r charged. The
 * receipt is written straight into the answer's buffer (sized for both ahead) as it is
 * signed, and its spends reuse the digits the answer found for the same numbers. */
static void reply_round(const http_request *req, http_response *resp, const ledger_round_res *r,
                        int commit, const dp_event *ev)
{
    json_t *body = round_json(r);
    if (body == NULL || !res_receipt_due(req, r, commit)) {
        http_reply_json(resp, 200, body);
        return;
    }
    jsonout_w w;
    jsonout_init(&w);
    jsonout_reserve(&w, 256 * r->n + 2048); /* the answer and the receipt, for short ids */
    w.reals = jsonout_memo_new(2 * r->n);   /* NULL: the receipt finds its digits itself */
    jsonout_open(&w, '{');
    jsonout_members(&w, body);
    jsonout_memo *reals = w.reals;
    w.reals = NULL;
    jsonout_key(&w, "receipt");
    res_receipt_write(req, r, commit, ev, reals, &w); /* a failure fails w: 503 */
    jsonout_close(&w, '}');
    jsonout_memo_free(reals);
    json_decref(body);
    http_reply_written(resp, 200, &w);
}

/* The decoded round rq run on the ledger and answered. */
static void run_round(const http_request *req, http_response *resp, ledger_round_req *rq,
                      problem *pb)
{
    ledger_round_res res;
    dpb_error err = {0};
    /* a reservation is held by the key that made it (none without API keys) */
    rq->owner = rq->reserve && req->key ? auth_owner(req->key) : NULL;
    if (ledger_round(lr_ledger(req), rq, &res, &err) != DPB_OK) {
        lr_reply_error(resp, pb, &err);
        return;
    }
    if (res.replayed) {
        resp->extra_name = "Idempotent-Replayed";
        resp->extra_value = "true";
    } else if (!res.dry_run) {
        metrics_round(&res);
    }
    reply_round(req, resp, &res, 0, rq->event); /* a charge: with its signed receipt */
    ledger_round_res_free(&res);
}

void res_round_post(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    lr_owned own = {codec_parse_object(req->body, req->body_len, &pb), NULL, NULL};
    const char *pol = "all_or_nothing";
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    if (own.body == NULL || decode_round(req, &own, &rq, &pol, &pb) < 0 ||
        round_hashes(own.body, &rq, pol, &pb) < 0)
        http_reply_problem(resp, &pb);
    else
        run_round(req, resp, &rq, &pb);
    lr_release(&own);
}

/* The answer of a commit or release (st its status; res released here): the round (a
 * commit's with its receipt), or the problem; a reservation no longer held has its own
 * codes. */
static void reply_resolved(const http_request *req, http_response *resp, ledger_round_res *res,
                           const dpb_error *err, dpb_status st)
{
    problem pb = {0};
    if (st == DPB_OK) {
        if (res->replayed) {
            resp->extra_name = "Idempotent-Replayed";
            resp->extra_value = "true";
        }
        dp_event *ev = NULL; /* a commit's signed receipt names its event */
        size_t used;
        if (res->state == LEDGER_COMMITTED && res->event &&
            dp_event_decode(res->event, res->event_len, &ev, &used) != DPB_OK)
            ev = NULL;
        reply_round(req, resp, res, res->state == LEDGER_COMMITTED, ev);
        dp_event_free(ev);
    } else if (st == DPB_ECONFLICT && res->reserve &&
               (res->state == LEDGER_EXPIRED || res->state == LEDGER_RELEASED)) {
        problem_set(&pb,
                    res->state == LEDGER_EXPIRED ? PB_RESERVATION_EXPIRED : PB_RESERVATION_RELEASED,
                    err->field, "%s", err->detail);
        http_reply_problem(resp, &pb);
    } else {
        lr_reply_error(resp, &pb, err);
    }
    ledger_round_res_free(res);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The commit's idempotency key: the hash of the set of reported ids (sorted: their order does
 * not matter), one per line, into hash. 0, or -1 (out of memory) with pb set. */
static int reported_hash(const char **ids, size_t n, unsigned char hash[16], problem *pb)
{
    const char **sorted = calloc(n ? n : 1, sizeof *sorted);
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(ids[i]) + 1;
    char *canon = malloc(len);
    if (sorted == NULL || canon == NULL) {
        free(sorted);
        free(canon);
        return problem_oom(pb);
    }
    if (n) {
        memcpy(sorted, ids, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_str);
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(sorted[i]);
        memcpy(canon + at, sorted[i], k);
        canon[at + k] = '\n';
        at += k + 1;
    }
    canon[at] = '\0';
    ledger_hash128(canon, at, hash);
    free(sorted);
    free(canon);
    return 0;
}

/* The commit's body {"reported": [...]} into *ids (malloc'ed, borrowing j's strings; none for
 * []) and *n, and its idempotency key into hash: 0, or -1 with pb set. */
static int decode_commit(json_t *j, const char ***ids, size_t *n, unsigned char hash[16],
                         problem *pb)
{
    static const char *const allowed[] = {"reported", NULL};
    if (codec_only_fields(j, "", allowed, pb) < 0)
        return -1;
    json_t *rp = json_object_get(j, "reported");
    if (rp == NULL) {
        problem_set(pb, PB_MISSING_FIELD, "reported",
                    "'reported' is required: the admitted clients whose updates were used (the "
                    "others are released; [] releases all)");
        return -1;
    }
    if (!(json_is_array(rp) && json_array_size(rp) == 0) &&
        lr_decode_ids(rp, "reported", ids, n, pb) < 0)
        return -1;
    return reported_hash(*ids, *n, hash, pb);
}

/* POST /v1/rounds/{id}/commit {"reported": [...]}: charge the reported clients of a
 * reservation, release the others. */
void res_round_commit(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    lr_owned own = {codec_parse_object(req->body, req->body_len, &pb), NULL, NULL};
    size_t n = 0;
    unsigned char hash[16];
    if (own.body == NULL || decode_commit(own.body, &own.ids, &n, hash, &pb) < 0) {
        http_reply_problem(resp, &pb);
    } else {
        ledger_round_res res;
        dpb_error err = {0};
        ledger_caller who = caller_of(req);
        dpb_status st =
            ledger_commit_as(lr_ledger(req), req->param, own.ids, n, hash, &who, &res, &err);
        reply_resolved(req, resp, &res, &err, st);
    }
    lr_release(&own);
}

/* POST /v1/rounds/{id}/release {}: release a reservation. */
void res_round_release(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {NULL};
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    if (j == NULL || codec_only_fields(j, "", allowed, &pb) < 0) {
        http_reply_problem(resp, &pb);
        json_decref(j);
        return;
    }
    json_decref(j);
    ledger_round_res res;
    dpb_error err = {0};
    ledger_caller who = caller_of(req);
    dpb_status st = ledger_release_as(lr_ledger(req), req->param, &who, &res, &err);
    reply_resolved(req, resp, &res, &err, st);
}

int res_round_resolve_small(const http_request *req, json_t **parsed)
{
    *parsed = NULL;
    ledger *l = lr_ledger(req);
    if (l == NULL || req->param == NULL)
        return 1;
    long n = ledger_round_size_now(l, req->param);
    return n >= -1 && n <= RES_SMALL_ROUND;
}

void res_round_get(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    ledger_round_res r;
    if (!lr_found(resp, ledger_get_round(lr_ledger(req), req->param, &r), "round_id", "round",
                  req->param, ""))
        return;
    char etag[48];
    snprintf(etag, sizeof etag, "\"r%llu\"", (unsigned long long)r.seq);
    if (!lr_not_modified(req, resp, etag)) {
        http_reply_json(resp, 200, round_json(&r));
        snprintf(resp->etag, sizeof resp->etag, "%s", etag);
    }
    ledger_round_res_free(&r);
}
