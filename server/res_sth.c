/*
 * res_sth.c - GET /v1/log/keys, GET /v1/log/sth and charge receipts (res_sth.h): statements
 * about the ledger's Merkle tree signed with --signing-key (signer.h) over their RFC 8785
 * bytes, so that a client holds proof of what it was told.
 *
 * May call: signer.h, jcs.h, codec.h (numbers, events), res_ledger.h, http.h, core/ledger.
 */
#include "res_sth.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "codec.h"
#include "jcs.h"
#include "res_ledger.h"
#include "resources.h"
#include "signer.h"

/* The wall clock in ms since the epoch (what a tree head's or receipt's timestamp says). */
static json_int_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const signer *signer_of(const http_request *req)
{
    const app_state *app = req->app;
    return app ? app->signer : NULL;
}

/* The leaf of the record seq (docs/TRANSPARENCY.md: leaf i is the record seq i + 1). */
static json_int_t leaf_of(uint64_t seq)
{
    return (json_int_t)tlog_leaf_index(seq);
}

/* The event's digest (res_receipt) into b64, 0; -1 (out of memory). */
static int event_digest(const dp_event *ev, char b64[48])
{
    json_t *j = codec_encode_event(ev);
    size_t len;
    char *canon = j ? jcs_dumps(j, &len) : NULL;
    json_decref(j);
    if (canon == NULL)
        return -1;
    unsigned char h[32];
    signer_sha256(canon, len, h);
    free(canon);
    signer_base64(h, sizeof h, b64);
    return 0;
}

json_t *res_receipt(const http_request *req, const ledger_round_res *r, int commit,
                    const dp_event *ev)
{
    const signer *sg = signer_of(req);
    uint64_t seq = commit ? r->state_seq : r->seq;
    if (sg == NULL || r->dry_run || seq == 0 || (r->reserve && !commit) || r->outcomes == NULL)
        return NULL;
    json_t *charged = json_array();
    for (size_t i = 0; charged && i < r->n; i++) {
        const ledger_outcome *o = &r->outcomes[i];
        if (!o->admitted || (commit && !o->reported))
            continue;
        json_t *c = json_object(); /* built directly: a receipt may list 100,000 */
        json_object_set_new(c, "client", json_string_nocheck(o->id));
        json_object_set_new(c, "spent_before", codec_real(o->spent_before));
        json_object_set_new(c, "spent_after", codec_real(o->spent_after));
        json_array_append_new(charged, c);
    }
    json_t *o = json_pack("{s:s, s:s, s:o, s:I, s:I}", "round_id", r->round_id, "phase",
                          commit ? "commit" : "charge", "charged", charged, "leaf_index",
                          leaf_of(seq), "timestamp", now_ms());
    char b64[48];
    if (o && ev && event_digest(ev, b64) == 0)
        json_object_set_new(o, "event_digest", json_string(b64));
    if (o && signer_sign(sg, o) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void res_log_keys(const http_request *req, http_response *resp)
{
    http_reply_json(resp, 200, signer_keys_json(signer_of(req)));
}

void res_log_sth(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    const signer *sg = signer_of(req);
    if (sg == NULL) {
        problem_set(&pb, PB_SIGNING_OFF, NULL,
                    "this daemon runs without --signing-key: it signs no tree head and no "
                    "receipt; start it with --signing-key FILE (dpbudgetd keygen FILE makes one)");
        http_reply_problem(resp, &pb);
        return;
    }
    uint64_t size;
    unsigned char root[32];
    char b64[48];
    ledger_log_head(lr_ledger(req), &size, root);
    signer_base64(root, sizeof root, b64);
    json_t *o = json_pack("{s:I, s:s, s:I}", "tree_size", (json_int_t)size, "root_hash", b64,
                          "timestamp", now_ms());
    if (o == NULL || signer_sign(sg, o) != 0) {
        json_decref(o);
        problem_oom(&pb);
        http_reply_problem(resp, &pb);
        return;
    }
    http_reply_json(resp, 200, o);
}
