/*
 * res_sth.c - GET /v1/log/keys, GET /v1/log/sth and charge receipts (res_sth.h): statements
 * about the ledger's Merkle tree signed with --signing-key (signer.h) over their RFC 8785
 * bytes, so that a client holds proof of what it was told.
 *
 * May call: signer.h, jcs.h, codec.h (numbers, events), res_ledger.h, http.h, core/ledger.
 */
#include "res_sth.h"

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

/* A spend in the receipt: its RFC 8785 number, or "infinite" as the answer spells +inf
 * (codec_real). */
static void put_spend(FILE *f, double x)
{
    char num[40];
    size_t k = jcs_number(x, num);
    if (k)
        fwrite(num, 1, k, f);
    else
        fputs("\"infinite\"", f);
}

char *res_receipt(const http_request *req, const ledger_round_res *r, int commit,
                  const dp_event *ev, size_t *len)
{
    const signer *sg = signer_of(req);
    uint64_t seq = commit ? r->state_seq : r->seq;
    if (sg == NULL || r->dry_run || seq == 0 || (r->reserve && !commit) || r->outcomes == NULL)
        return NULL;
    char digest[48] = "";
    if (ev && event_digest(ev, digest) != 0)
        return NULL;
    /* the canonical bytes, written member by member in RFC 8785's order (names sorted:
     * charged, event_digest, key_id, leaf_index, phase, round_id, timestamp; in each charged
     * entry client, spent_after, spent_before): no tree built, sorted or walked */
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return NULL;
    fputs("{\"charged\":[", f);
    int first = 1;
    for (size_t i = 0; i < r->n; i++) {
        const ledger_outcome *o = &r->outcomes[i];
        if (!o->admitted || (commit && !o->reported))
            continue;
        fputs(first ? "{\"client\":" : ",{\"client\":", f);
        first = 0;
        jcs_put_string(f, o->id, strlen(o->id));
        fputs(",\"spent_after\":", f);
        put_spend(f, o->spent_after);
        fputs(",\"spent_before\":", f);
        put_spend(f, o->spent_before);
        fputc('}', f);
    }
    fputc(']', f);
    if (digest[0])
        fprintf(f, ",\"event_digest\":\"%s\"", digest);
    fprintf(f, ",\"key_id\":\"%s\",\"leaf_index\":%lld,\"phase\":\"%s\",\"round_id\":",
            signer_key_id(sg), (long long)leaf_of(seq), commit ? "commit" : "charge");
    jcs_put_string(f, r->round_id, strlen(r->round_id));
    fprintf(f, ",\"timestamp\":%lld}", (long long)now_ms());
    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        return NULL;
    }
    /* the receipt answered: those bytes with the signature appended as the last member */
    char sig[SIGNER_SIG_B64];
    signer_signature(sg, buf, n, sig);
    char *out = malloc(n + sizeof ",\"signature\":\"\"" + SIGNER_SIG_B64);
    if (out == NULL) {
        free(buf);
        return NULL;
    }
    *len = (size_t)snprintf(out, n + sizeof ",\"signature\":\"\"" + SIGNER_SIG_B64,
                            "%.*s,\"signature\":\"%s\"}", (int)(n - 1), buf, sig);
    free(buf);
    return out;
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
