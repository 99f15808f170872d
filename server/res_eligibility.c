/*
 * res_eligibility.c - POST /v1/eligibility: who a round of an event would admit now and how
 * many more such rounds each can afford; nothing is charged or stored. Answered a page at a
 * time (limit, cursor: at most LEDGER_ELIG_PAGE_MAX candidates), under the ledger lane's
 * deadline (--ledger-deadline) and the cost cap (--ledger-max-pld-evals). The answer is
 * written straight through jsonout (10,000 candidates: a jansson tree of them cost more than
 * the admission tests). Calls res_ledger (shared helpers), codec, jsonout, http and
 * core/ledger.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/common/numfmt.h"
#include "../core/ledger/ledger.h"
#include "app.h"
#include "codec.h"
#include "jsonout.h"
#include "res_ledger.h"
#include "resources.h"

#define ELIG_DEFAULT_ROUNDS 1000

/* The text of recent reals, direct-mapped by their bits: the candidates of one history share
 * their figures. */
typedef struct {
    uint64_t bits;
    unsigned char len, used;
    char text[38];
} realmemo;

/* A member key: a real as JSON, the shortest round-trip number (its text remembered in memo,
 * 64 slots), or "infinite". */
static void put_real(jsonout_w *w, const char *key, double x, realmemo *memo)
{
    jsonout_key(w, key);
    if (isinf(x)) {
        jsonout_str(w, "infinite");
        return;
    }
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    realmemo *m = &memo[(b ^ (b >> 29) ^ (b >> 47)) & 63];
    if (!m->used || m->bits != b) {
        m->len = (unsigned char)jsonout_real(x, m->text);
        m->bits = b;
        m->used = 1;
    }
    jsonout_rawv(w, m->text, m->len);
}

/* A candidate's id under "client", the name round answers give it, and again under "id", the
 * name eligibility answers gave it before (kept for older clients). An id an older log kept
 * (before the id rule) that is not UTF-8 is written "?". */
static void put_id(jsonout_w *w, const char *id)
{
    const char *text = id;
    json_t *j = NULL;
    if (!ledger_id_valid(id, strlen(id))) {
        j = json_string(id); /* NULL: not UTF-8 */
        if (j == NULL)
            text = "?";
    }
    jsonout_key(w, "client");
    jsonout_str(w, text);
    jsonout_key(w, "id");
    jsonout_str(w, text);
    json_decref(j);
}

/* One candidate as an object of the answer's "clients". */
static void put_item(jsonout_w *w, const ledger_elig_item *it, realmemo *memo)
{
    jsonout_open(w, '{');
    put_id(w, it->id);
    jsonout_key(w, "eligible");
    jsonout_bool(w, it->eligible);
    lr_put_int(w, "affordable_rounds", (long long)it->rounds);
    jsonout_key(w, "affordable_rounds_capped");
    jsonout_bool(w, it->capped);
    jsonout_key(w, "accounting");
    if (it->mode >= 0)
        jsonout_str(w, ledger_mode_name((ledger_mode)it->mode));
    else
        jsonout_null(w);
    if (isnan(it->spent)) {
        jsonout_key(w, "spent");
        jsonout_null(w);
        jsonout_key(w, "remaining");
        jsonout_null(w);
    } else {
        jsonout_key(w, "spent");
        jsonout_open(w, '{');
        put_real(w, "epsilon", it->spent, memo);
        put_real(w, "delta", it->delta, memo);
        jsonout_close(w, '}');
        jsonout_key(w, "remaining");
        jsonout_open(w, '{');
        put_real(w, "epsilon", it->remaining, memo);
        jsonout_close(w, '}');
    }
    jsonout_key(w, "reason");
    if (it->eligible)
        jsonout_null(w);
    else
        jsonout_str(w, ledger_reason_name(it->reason));
    jsonout_close(w, '}');
}

/* The eligibility answer (owned by the caller) and its length; NULL when out of memory. */
static char *eligibility_json(const ledger_elig_item *items, size_t n, uint64_t max_rounds,
                              const ledger_elig_page *pg, size_t *len)
{
    size_t yes = 0;
    for (size_t i = 0; i < n; i++)
        yes += (size_t)items[i].eligible;
    jsonout_w w;
    jsonout_init(&w);
    jsonout_open(&w, '{');
    lr_put_int(&w, "eligible", (long long)yes);
    lr_put_int(&w, "ineligible", (long long)(n - yes));
    lr_put_int(&w, "max_rounds", (long long)max_rounds);
    lr_put_int(&w, "total", (long long)pg->total);
    jsonout_key(&w, "next_cursor");
    char next[32];
    if (pg->more) {
        snprintf(next, sizeof next, "o%zu", pg->next);
        jsonout_str(&w, next);
    } else {
        jsonout_null(&w);
    }
    jsonout_key(&w, "clients");
    jsonout_open(&w, '[');
    realmemo *memo = calloc(64, sizeof *memo);
    if (memo == NULL)
        w.fail = 1;
    for (size_t i = 0; i < n && !w.fail; i++)
        put_item(&w, &items[i], memo);
    free(memo);
    jsonout_close(&w, ']');
    jsonout_close(&w, '}');
    return jsonout_finish(&w, len);
}

/* The POST /v1/eligibility body (own->body) into q: the listed clients into own->ids and the
 * event into own->ev (the caller releases own, even on failure). 0, or -1 with pb set. */
static int decode_eligibility(const http_request *req, lr_owned *own, ledger_elig_req *q,
                              problem *pb)
{
    json_t *j = own->body;
    static const char *const allowed[] = {"event",      "event_name", "clients", "label",
                                          "max_rounds", "limit",      "cursor",  NULL};
    uint64_t limit = LEDGER_ELIG_PAGE_DEFAULT;
    const char *cursor = NULL;
    if (codec_only_fields(j, "", allowed, pb) < 0 ||
        codec_uint(j, "", "max_rounds", 0, 1, LEDGER_ELIG_MAX_ROUNDS, &q->max_rounds, pb) < 0 ||
        codec_uint(j, "", "limit", 0, 1, LEDGER_ELIG_PAGE_MAX, &limit, pb) < 0 ||
        codec_string(j, "", "label", 0, &q->label, pb) < 0 ||
        codec_string(j, "", "cursor", 0, &cursor, pb) < 0)
        return -1;
    q->limit = (size_t)limit;
    if (cursor) { /* "o" and a position, as an earlier page's next_cursor says */
        char *end = NULL;
        unsigned long long v = cursor[0] == 'o' && cursor[1] >= '0' && cursor[1] <= '9'
                                   ? strtoull(cursor + 1, &end, 10)
                                   : 0;
        if (end == NULL || *end != '\0' || strlen(cursor) > 16) {
            problem_set(pb, PB_INVALID_PARAMETER, "cursor",
                        "cursor must be a next_cursor value from an earlier page of the same "
                        "request");
            return -1;
        }
        q->offset = (size_t)v;
    }
    json_t *cl = json_object_get(j, "clients");
    if ((cl == NULL) == (q->label == NULL)) {
        problem_set(pb, cl ? PB_INVALID_PARAMETER : PB_MISSING_FIELD, "clients",
                    "give exactly one of 'clients' (a list of 1 to %d client ids) and 'label' "
                    "(\"key=value\": every client with that label)",
                    LEDGER_MAX_PARTICIPANTS);
        return -1;
    }
    if (q->label && !lr_label_filter_ok(q->label)) {
        problem_set(pb, PB_INVALID_PARAMETER, "label",
                    "label is key=value, the key 1-32 of [A-Za-z0-9_.-], the value at most 64 "
                    "bytes of printable UTF-8 (the rule of the labels themselves)");
        return -1;
    }
    if (cl && lr_decode_ids(cl, "clients", &own->ids, &q->n, pb) < 0)
        return -1;
    q->ids = own->ids;
    q->event = own->ev = lr_event_or_name(req, j, pb);
    return own->ev ? 0 : -1;
}

/* A refusal of the computation: stopped at the deadline or by the server stopping (the
 * ledger lane's cancel), or over the cost cap; else the ledger's own error. */
static void reply_elig_error(const http_request *req, http_response *resp, problem *pb,
                             const dpb_error *err)
{
    const dpb_cancel *c = req->cancel;
    char secs[DPB_NUM_MAX];
    if (err->status == DPB_ECANCELLED && c && c->flag &&
        __atomic_load_n(c->flag, __ATOMIC_RELAXED)) {
        problem_set(pb, PB_OVERLOADED, NULL,
                    "the server is stopping: the eligibility computation was abandoned; retry "
                    "(on another instance)");
        http_reply_problem(resp, pb);
        resp->extra_name = "Retry-After";
        resp->extra_value = "1";
    } else if (err->status == DPB_ECANCELLED) {
        problem_set(pb, PB_COMPUTE_DEADLINE, NULL,
                    "%s: past the server's ledger deadline (--ledger-deadline %s s); ask for "
                    "fewer candidates per page (limit) or a smaller max_rounds",
                    err->detail, dpb_num_str(req->deadline_s, secs));
        http_reply_problem(resp, pb);
    } else if (err->status == DPB_ECOST) {
        problem_set(pb, PB_LEDGER_COST, err->field, "%s (--ledger-max-pld-evals)", err->detail);
        http_reply_problem(resp, pb);
    } else {
        lr_reply_error(resp, pb, err);
    }
}

/* The decoded request q run on the ledger and answered. */
static void run_eligibility(const http_request *req, http_response *resp, ledger_elig_req *q,
                            problem *pb)
{
    ledger_elig_item *items = NULL;
    ledger_elig_page pg;
    size_t n = 0, blen = 0;
    dpb_error err = {0};
    const app_state *app = req->app;
    q->cancel = req->cancel;
    q->max_pld_evals = app ? app->max_pld_evals : 0;
    if (ledger_eligibility(lr_ledger(req), q, &items, &n, &pg, &err) != DPB_OK) {
        reply_elig_error(req, resp, pb, &err);
        free(items);
        return;
    }
    char *body = eligibility_json(items, n, q->max_rounds, &pg, &blen);
    free(items);
    if (body == NULL) {
        problem_oom(pb);
        http_reply_problem(resp, pb);
        return;
    }
    http_reply_text(resp, 200, body, blen);
}

/* POST /v1/eligibility: who a round of the event would admit now and how many more such
 * rounds each can afford; nothing is charged or stored. */
void res_eligibility(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    lr_owned own = {codec_parse_object(req->body, req->body_len, &pb), NULL, NULL};
    ledger_elig_req q;
    memset(&q, 0, sizeof q);
    q.max_rounds = ELIG_DEFAULT_ROUNDS;
    if (own.body == NULL || decode_eligibility(req, &own, &q, &pb) < 0)
        http_reply_problem(resp, &pb);
    else
        run_eligibility(req, resp, &q, &pb);
    lr_release(&own);
}
