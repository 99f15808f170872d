/*
 * res_log.c - the ledger's log as a Merkle tree (RFC 9162, docs/TRANSPARENCY.md):
 * GET /v1/log/proof/inclusion, GET /v1/log/proof/consistency and GET /v1/log/entries.
 * Hashes and entries are base64 (RFC 4648, with padding). Calls res_ledger (shared helpers),
 * http, problem, nettle's base64 and core/ledger (ledger.h's log functions).
 */
#include <nettle/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ledger/ledger.h"
#include "res_ledger.h"
#include "resources.h"

/* Entries one answer holds at most, and bytes of entries (at least one entry). */
#define ENTRIES_MAX 1000
#define ENTRIES_BYTES ((size_t)4 << 20)
/* The largest tree size or index taken (JSON's exact integers). */
#define LOG_INDEX_MAX (1LL << 53)

static json_t *b64(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    size_t n = na + nb;
    unsigned char *raw = malloc(n ? n : 1);
    char *out = malloc(BASE64_ENCODE_RAW_LENGTH(n) + 1);
    json_t *j = NULL;
    if (raw != NULL && out != NULL) {
        memcpy(raw, a, na);
        if (nb)
            memcpy(raw + na, b, nb);
        base64_encode_raw(out, n, raw);
        out[BASE64_ENCODE_RAW_LENGTH(n)] = '\0';
        j = json_string(out);
    }
    free(raw);
    free(out);
    return j;
}

/* The query argument key as an index in [lo, hi]: 0, or -1 having answered 400 (what) .*/
static int arg(const http_request *req, http_response *resp, const char *key, long long lo,
               long long hi, const char *what, uint64_t *out)
{
    const char *s = http_query(req, key);
    problem pb = {0};
    if (s == NULL) {
        problem_set(&pb, PB_MISSING_FIELD, key, "the query parameter %s is required: %s", key,
                    what);
        http_reply_problem(resp, &pb);
        return -1;
    }
    long long v = lr_query_uint(s, lo, hi);
    if (v < 0) {
        problem_set(&pb, PB_INVALID_PARAMETER, key, "%s must be %s (decimal digits only)", key,
                    what);
        http_reply_problem(resp, &pb);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

/* 1 having answered (no ledger, or a shared store that cannot catch up), else 0. */
static int log_start(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return 1;
    dpb_error err = {0};
    if (ledger_log_catch_up(lr_ledger(req), &err) != DPB_OK) {
        problem pb = {0};
        lr_reply_unavailable(resp, &pb, err.detail);
        return 1;
    }
    return 0;
}

static void reply_bad(http_response *resp, const dpb_error *err)
{
    problem pb = {0};
    problem_set(&pb,
                err->status == DPB_ECORRUPT ? PB_LOG_TAMPERED
                : err->status == DPB_EINVAL ? PB_INVALID_PARAMETER
                                            : problem_from_status(err->status),
                err->field[0] ? err->field : NULL, "%s", err->detail);
    http_reply_problem(resp, &pb);
}

static json_t *hashes(const tlog_hash *h, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++)
        json_array_append_new(a, b64(h[i], TLOG_HASH_BYTES, NULL, 0));
    return a;
}

void res_log_inclusion(const http_request *req, http_response *resp)
{
    uint64_t leaf, size;
    if (log_start(req, resp) ||
        arg(req, resp, "leaf_index", 0, LOG_INDEX_MAX, "a leaf index, 0 to tree_size - 1", &leaf) !=
            0 ||
        arg(req, resp, "tree_size", 1, LOG_INDEX_MAX, "a tree size, 1 to the log's current size",
            &size) != 0)
        return;
    tlog_hash path[TLOG_MAX_PROOF];
    size_t n;
    dpb_error err = {0};
    if (ledger_log_inclusion(lr_ledger(req), leaf, size, path, &n, &err) != DPB_OK) {
        reply_bad(resp, &err);
        return;
    }
    json_t *o = json_pack("{s:I, s:I, s:o}", "leaf_index", (json_int_t)leaf, "tree_size",
                          (json_int_t)size, "audit_path", hashes(path, n));
    lr_mark_read_only(req, resp);
    http_reply_json(resp, 200, o);
}

void res_log_consistency(const http_request *req, http_response *resp)
{
    uint64_t first, second;
    if (log_start(req, resp) ||
        arg(req, resp, "first", 1, LOG_INDEX_MAX, "a tree size, 1 to second", &first) != 0 ||
        arg(req, resp, "second", 1, LOG_INDEX_MAX, "a tree size, first to the log's current size",
            &second) != 0)
        return;
    tlog_hash proof[TLOG_MAX_PROOF];
    size_t n;
    dpb_error err = {0};
    if (ledger_log_consistency(lr_ledger(req), first, second, proof, &n, &err) != DPB_OK) {
        reply_bad(resp, &err);
        return;
    }
    json_t *o = json_pack("{s:I, s:I, s:o}", "first", (json_int_t)first, "second",
                          (json_int_t)second, "proof", hashes(proof, n));
    lr_mark_read_only(req, resp);
    http_reply_json(resp, 200, o);
}

typedef struct {
    json_t *arr;
    size_t n, bytes;
    int oom;
} entries_out;

static int entry_out(void *ctx, uint64_t leaf, const unsigned char head[9], const void *payload,
                     size_t len)
{
    entries_out *e = ctx;
    if (e->n > 0 && (e->n >= ENTRIES_MAX || e->bytes + 9 + len > ENTRIES_BYTES))
        return 1; /* the page is full: the client goes on from the last one it got */
    json_t *item = json_pack("{s:I, s:o}", "leaf_index", (json_int_t)leaf, "entry",
                             b64(head, 9, payload, len));
    if (item == NULL || json_array_append_new(e->arr, item) != 0) {
        e->oom = 1;
        return 1;
    }
    e->n++;
    e->bytes += 9 + len;
    return 0;
}

void res_log_entries(const http_request *req, http_response *resp)
{
    uint64_t start, end;
    if (log_start(req, resp) ||
        arg(req, resp, "start", 0, LOG_INDEX_MAX, "a leaf index, 0 to end - 1", &start) != 0 ||
        arg(req, resp, "end", 1, LOG_INDEX_MAX, "a leaf index past start, at most the log's size",
            &end) != 0)
        return;
    entries_out e = {json_array(), 0, 0, 0};
    dpb_error err = {0};
    dpb_status st =
        e.arr ? ledger_log_entries(lr_ledger(req), start, end, entry_out, &e, &err) : DPB_ENOMEM;
    if (st == DPB_OK && (e.oom || e.arr == NULL))
        st = dpb_fail(&err, DPB_ENOMEM, NULL, "out of memory");
    if (st != DPB_OK) {
        json_decref(e.arr);
        if (st == DPB_EUNAVAILABLE) {
            problem pb = {0};
            lr_reply_unavailable(resp, &pb, err.detail);
            return;
        }
        reply_bad(resp, &err);
        return;
    }
    lr_mark_read_only(req, resp);
    http_reply_json(resp, 200, json_pack("{s:o}", "entries", e.arr));
}
