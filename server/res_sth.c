/*
 * res_sth.c - GET /v1/log/keys, GET /v1/log/sth and charge receipts (res_sth.h): statements
 * about the ledger's Merkle tree signed with --signing-key (signer.h) over their RFC 8785
 * bytes, so that a client holds proof of what it was told.
 *
 * May call: signer.h, jcs.h, codec.h (numbers, events), res_ledger.h, http.h, core/ledger.
 */
#include "res_sth.h"

#include <math.h>
#include <stdio.h>
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

/* A spend in the receipt into out (JCS_SPEND_MAX bytes): its RFC 8785 number, or "infinite"
 * as the answer spells +inf (codec_real); from the text the answer wrote for it when memo
 * has it (the same digits), else found here. Returns the length. */
#define JCS_SPEND_MAX 40
static size_t put_spend(char *out, double x, const jsonout_memo *memo)
{
    const char *t = memo && isfinite(x) ? jsonout_memo_get(memo, x) : NULL;
    size_t k = t ? jcs_number_text(t, out) : 0;
    if (k == 0)
        k = jcs_number(x, out);
    if (k == 0) {
        memcpy(out, "\"infinite\"", 10);
        k = 10;
    }
    return k;
}

int res_receipt_due(const http_request *req, const ledger_round_res *r, int commit)
{
    uint64_t seq = commit ? r->state_seq : r->seq;
    return signer_of(req) && !r->dry_run && seq != 0 && (commit || !r->reserve) &&
           r->outcomes != NULL;
}

/* One charged client's member of the receipt, {"client":..,"spent_after":..,
 * "spent_before":..} with its leading comma unless first, into w. */
static void put_charged(jsonout_w *w, const ledger_outcome *o, int first, const jsonout_memo *memo)
{
    size_t idn = strlen(o->id), need = JCS_STRING_MAX(idn) + 2 * JCS_SPEND_MAX + 48;
    char buf[1024], *b = need <= sizeof buf ? buf : malloc(need);
    if (b == NULL) {
        w->fail = 1;
        return;
    }
    memcpy(b, ",{\"client\":", 11);
    size_t from = first ? 1 : 0, k = 11; /* the comma but before the first */
    k += jcs_string(o->id, idn, b + k);
    memcpy(b + k, ",\"spent_after\":", 15);
    k += 15;
    k += put_spend(b + k, o->spent_after, memo);
    memcpy(b + k, ",\"spent_before\":", 16);
    k += 16;
    k += put_spend(b + k, o->spent_before, memo);
    b[k++] = '}';
    jsonout_raw(w, b + from, k - from);
    if (b != buf)
        free(b);
}

int res_receipt_write(const http_request *req, const ledger_round_res *r, int commit,
                      const dp_event *ev, const jsonout_memo *memo, jsonout_w *w)
{
    const signer *sg = signer_of(req);
    uint64_t seq = commit ? r->state_seq : r->seq;
    char digest[48] = "";
    if (ev && event_digest(ev, digest) != 0) {
        w->fail = 1;
        return -1;
    }
    /* the canonical bytes, written member by member in RFC 8785's order (names sorted:
     * charged, event_digest, key_id, leaf_index, phase, round_id, timestamp; in each charged
     * entry client, spent_after, spent_before) straight into the answer: no tree built,
     * sorted or walked, no copy */
    size_t at = jsonout_raw_begin(w);
    jsonout_raw(w, "{\"charged\":[", 12);
    int first = 1;
    for (size_t i = 0; i < r->n; i++) {
        const ledger_outcome *o = &r->outcomes[i];
        if (!o->admitted || (commit && !o->reported))
            continue;
        put_charged(w, o, first, memo);
        first = 0;
    }
    size_t idn = strlen(r->round_id);
    size_t need = 256 + JCS_STRING_MAX(idn) + 64;
    char stack[1024], *tail = need <= sizeof stack ? stack : malloc(need);
    if (tail == NULL) {
        w->fail = 1;
        return -1;
    }
    int k = snprintf(tail, 256,
                     "]%s%s%s,\"key_id\":\"%s\",\"leaf_index\":%lld,\"phase\":\"%s\",\"round_id\":",
                     digest[0] ? ",\"event_digest\":\"" : "", digest, digest[0] ? "\"" : "",
                     signer_key_id(sg), (long long)leaf_of(seq), commit ? "commit" : "charge");
    size_t n = (size_t)k + jcs_string(r->round_id, idn, tail + k);
    n += (size_t)snprintf(tail + n, 64, ",\"timestamp\":%lld}", (long long)now_ms());
    jsonout_raw(w, tail, n);
    if (tail != stack)
        free(tail);
    if (w->fail)
        return -1;
    /* signed: those bytes (the last '}' included); answered: with the signature appended as
     * the last member */
    char sig[SIGNER_SIG_B64];
    signer_signature(sg, w->buf + at, w->len - at, sig);
    jsonout_raw_drop(w, 1); /* the '}' */
    char end[SIGNER_SIG_B64 + 20];
    jsonout_raw(w, end, (size_t)snprintf(end, sizeof end, ",\"signature\":\"%s\"}", sig));
    return w->fail ? -1 : 0;
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
