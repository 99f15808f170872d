/*
 * res_clients.c - the clients resource: PUT /v1/clients/{id}, POST /v1/clients:batch,
 * GET /v1/clients/{id}, GET /v1/clients (filtered, sorted, paginated) and GET
 * /v1/clients/{id}/rounds (a client's history). Decode (strict) -> core/ledger -> encode
 * through jsonout; reads carry an ETag and honour If-None-Match. Calls res_ledger (shared
 * helpers), codec, jsonout, http and core/ledger.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ledger/ledger.h"
#include "codec.h"
#include "jsonout.h"
#include "res_ledger.h"
#include "resources.h"

/* The labels ("k=v" lines) as an object's value. */
static void write_labels(jsonout_w *w, const char *labels)
{
    jsonout_open(w, '{');
    for (const char *p = labels; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq) {
            char k[64];
            snprintf(k, sizeof k, "%.*s", (int)(eq - p), p);
            jsonout_key(w, k);
            jsonout_strn(w, eq + 1, len - (size_t)(eq - p) - 1);
        }
        p += len + (e ? 1 : 0);
    }
    jsonout_close(w, '}');
}

/* A client as it is answered, written straight into the answer (jsonout.h): a GET of one
 * client builds no tree. */
static void write_client(jsonout_w *w, const ledger_client *c)
{
    jsonout_open(w, '{');
    lr_put_str(w, "id", c->id);
    jsonout_key(w, "budget");
    jsonout_open(w, '{');
    lr_put_real(w, "epsilon", c->epsilon);
    lr_put_real(w, "delta", c->delta);
    jsonout_close(w, '}');
    lr_put_str(w, "accounting", ledger_mode_name(c->mode));
    lr_put_str(w, "guarantee_kind", ledger_guarantee_name(c->guarantee));
    lr_put_str(w, "guarantee_reference", ledger_guarantee_reference(c->mode));
    lr_put_str(w, "neighboring_relation", dp_relation_name(c->relation));
    jsonout_key(w, "labels");
    write_labels(w, c->labels);
    jsonout_key(w, "spent");
    jsonout_open(w, '{');
    lr_put_real(w, "epsilon", c->spent);
    lr_put_real(w, "delta", c->delta);
    lr_put_real(w, "delta_total_variation", c->delta_tv);
    /* the accountant whose value for the client's composition the spend is */
    if (c->spent_accountant > 0)
        lr_put_str(w, "accountant", dp_accountant_name((dp_accountant)c->spent_accountant));
    jsonout_close(w, '}');
    jsonout_key(w, "remaining");
    jsonout_open(w, '{');
    lr_put_real(w, "epsilon", c->remaining);
    jsonout_close(w, '}');
    jsonout_key(w, "rounds");
    jsonout_int(w, (long long)c->rounds);
    lr_put_str(w, "status", ledger_status_name(c->status));
    jsonout_key(w, "version");
    jsonout_int(w, (long long)c->version);
    jsonout_close(w, '}');
}

/* Answer one client. */
static void reply_client(http_response *resp, int status, const ledger_client *c)
{
    jsonout_w w;
    jsonout_init(&w);
    write_client(&w, c);
    http_reply_written(resp, status, &w);
}

/* {"k": "v", ...} -> "k=v\n" lines sorted by key (jansson iterates in insertion order). */
static int decode_labels(json_t *o, char *out, size_t cap, problem *pb)
{
    out[0] = '\0';
    if (o == NULL)
        return 0;
    if (!json_is_object(o) || json_object_size(o) > 16) {
        problem_set(pb, PB_WRONG_TYPE, "labels",
                    "labels must be an object of at most 16 string values");
        return -1;
    }
    const char *keys[16];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        size_t kl = strlen(k);
        int ok = kl >= 1 && kl <= 32 && json_is_string(v) && json_string_length(v) <= 64;
        for (size_t i = 0; ok && i < kl; i++)
            ok = lr_label_char_ok((unsigned char)k[i], 1);
        const char *s = ok ? json_string_value(v) : "";
        for (size_t i = 0; ok && s[i]; i++)
            ok = lr_label_char_ok((unsigned char)s[i], 0);
        if (!ok) {
            problem_set(pb, PB_INVALID_PARAMETER, "labels",
                        "label keys are 1-32 of [A-Za-z0-9_.-], values strings of at most 64 "
                        "printable characters");
            return -1;
        }
        keys[n++] = k;
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    /* the lines must fit the stored field: measure first, never write past cap */
    size_t need = 1;
    for (size_t i = 0; i < n; i++)
        need += strlen(keys[i]) + 2 + strlen(json_string_value(json_object_get(o, keys[i])));
    if (need > cap) {
        problem_set(pb, PB_INVALID_PARAMETER, "labels",
                    "the labels take %zu bytes as key=value lines; at most %zu fit: use fewer "
                    "or shorter labels",
                    need - 1, cap - 1);
        return -1;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(out + len, cap - len, "%s=%s\n", keys[i],
                         json_string_value(json_object_get(o, keys[i])));
        if (w < 0 || (size_t)w >= cap - len)
            break; /* cannot happen after the measurement above */
        len += (size_t)w;
    }
    return 0;
}

/* path + "." + key (or key alone at the top level): a problem's field name. */
static const char *field_name(char *buf, size_t n, const char *path, const char *key)
{
    snprintf(buf, n, "%s%s%s", path, path[0] ? "." : "", key);
    return buf;
}

/* The PUT /v1/clients/{id} body at j (fields named under path: "" or "clients[17]") into in
 * (the id is the caller's); 0, or -1 with the problem recorded. */
static int decode_client(json_t *j, const char *path, const char *const *allowed, ledger_client *in,
                         problem *pb)
{
    static const char *const budget_fields[] = {"epsilon", "delta", NULL};
    char f[96], bpath[96];
    const char *acc = "rdp", *rel = "add_or_remove_one";
    if (codec_only_fields(j, path, allowed, pb) < 0)
        return -1;
    json_t *b = json_object_get(j, "budget");
    field_name(bpath, sizeof bpath, path, "budget");
    if (b == NULL) {
        problem_set(pb, PB_MISSING_FIELD, bpath,
                    "'%s' is required: {\"epsilon\": ..., \"delta\": ...}", bpath);
        return -1;
    }
    if (!json_is_object(b)) {
        problem_set(pb, PB_WRONG_TYPE, bpath, "'%s' must be an object", bpath);
        return -1;
    }
    if (codec_only_fields(b, bpath, budget_fields, pb) < 0 ||
        codec_number(b, bpath, "epsilon", 1, &in->epsilon, pb) < 0 ||
        codec_number(b, bpath, "delta", 1, &in->delta, pb) < 0 ||
        codec_string(j, path, "accounting", 0, &acc, pb) < 0 ||
        codec_string(j, path, "neighboring_relation", 0, &rel, pb) < 0 ||
        decode_labels(json_object_get(j, "labels"), in->labels, sizeof in->labels, pb) < 0)
        return -1;
    if (!(isfinite(in->epsilon) && in->epsilon >= 0.0)) {
        field_name(f, sizeof f, bpath, "epsilon");
        problem_set(pb, PB_INVALID_PARAMETER, f, "%s must be a finite number >= 0", f);
        return -1;
    }
    if (!(in->delta > 0.0 && in->delta < 1.0)) {
        field_name(f, sizeof f, bpath, "delta");
        problem_set(pb, PB_INVALID_PARAMETER, f, "%s must lie strictly between 0 and 1", f);
        return -1;
    }
    if (ledger_mode_parse(acc, &in->mode) != 0) {
        problem_set(pb, PB_INVALID_PARAMETER, field_name(f, sizeof f, path, "accounting"),
                    "accounting must be \"rdp\" (RDP composition) or \"pld\" "
                    "(privacy-loss distributions, tighter), both for rounds whose privacy "
                    "parameters and participation are fixed in advance, or \"rdp_filter\" or "
                    "\"gdp_filter\" (privacy filters: valid when they are chosen from earlier "
                    "outputs)");
        return -1;
    }
    /* the ledger keeps one interned event per relation for add_or_remove_one and
     * replace_one; replace_special (a compute-only relation) is refused here */
    if (dp_relation_parse(rel, &in->relation) != 0 || in->relation == DP_REL_REPLACE_SPECIAL) {
        problem_set(pb, PB_INVALID_PARAMETER, field_name(f, sizeof f, path, "neighboring_relation"),
                    "a client's neighboring_relation must be \"add_or_remove_one\" or "
                    "\"replace_one\" (replace_special is taken by the compute endpoints only)");
        return -1;
    }
    return 0;
}

/* A client's ETag: its version, and whether its spend is the background refinement's PLD
 * value (which keeps the version: see ledger_client.version). */
static void client_etag(const ledger_client *c, char *buf, size_t n)
{
    snprintf(buf, n, "\"c%llu%s\"", (unsigned long long)c->version,
             c->spent_accountant == DP_ACCT_PLD ? "p" : "");
}

void res_client_put(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {"budget", "accounting", "neighboring_relation", "labels",
                                          NULL};
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    ledger_client in;
    memset(&in, 0, sizeof in);
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    /* req->param passed the id rule in httproute_dispatch */
    snprintf(in.id, sizeof in.id, "%s", req->param);
    if (j == NULL || decode_client(j, "", allowed, &in, &pb) < 0)
        goto fail;
    ledger_client out;
    int created = 0;
    dpb_error err = {0};
    if (ledger_put_client(lr_ledger(req), &in, &created, &out, &err) != DPB_OK) {
        lr_reply_error(resp, &pb, &err);
        json_decref(j);
        return;
    }
    client_etag(&out, resp->etag, sizeof resp->etag);
    reply_client(resp, created ? 201 : 200, &out);
    json_decref(j);
    return;
fail:
    http_reply_problem(resp, &pb);
    json_decref(j);
}

#define BATCH_MAX 10000

/* One item of a batch at path (its id, then the body of PUT /v1/clients/{id}) into c: 0, or -1
 * with pb set, naming the field under path. */
static int decode_item(json_t *it, const char *path, ledger_client *c, problem *pb)
{
    static const char *const allowed[] = {"id",     "budget", "accounting", "neighboring_relation",
                                          "labels", NULL};
    char f[48];
    const char *id;
    if (!json_is_object(it)) {
        problem_set(pb, PB_WRONG_TYPE, path, "'%s' must be an object", path);
        return -1;
    }
    field_name(f, sizeof f, path, "id");
    if (codec_string(it, path, "id", 1, &id, pb) < 0 ||
        codec_id(id, json_string_length(json_object_get(it, "id")), f, pb) < 0)
        return -1;
    snprintf(c->id, sizeof c->id, "%s", id);
    if (decode_client(it, path, allowed, c, pb) < 0) {
        if (strcmp(pb->field, "labels") == 0) /* decode_labels names the field alone */
            snprintf(pb->field, sizeof pb->field, "%s.labels", path);
        return -1;
    }
    return 0;
}

/* The clients of a POST /v1/clients:batch body j, each decoded (the first malformed one is the
 * problem, naming its index): a calloc'ed array of *n (owned by the caller), or NULL with pb
 * set. */
static ledger_client *decode_batch(json_t *j, size_t *n, problem *pb)
{
    static const char *const top[] = {"clients", NULL};
    if (codec_only_fields(j, "", top, pb) < 0)
        return NULL;
    json_t *arr = json_object_get(j, "clients");
    if (arr == NULL) {
        problem_set(pb, PB_MISSING_FIELD, "clients",
                    "'clients' is required: a list of 1 to %d clients, each the body of PUT "
                    "/v1/clients/{id} with its \"id\"",
                    BATCH_MAX);
        return NULL;
    }
    *n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (!json_is_array(arr) || *n == 0 || *n > BATCH_MAX) {
        problem_set(pb,
                    !json_is_array(arr) ? PB_WRONG_TYPE
                    : *n == 0           ? PB_INVALID_PARAMETER
                                        : PB_TOO_MANY_VALUES,
                    "clients",
                    "'clients' must be a list of 1 to %d clients (send more in several "
                    "batches)",
                    BATCH_MAX);
        return NULL;
    }
    ledger_client *in = calloc(*n, sizeof *in);
    if (in == NULL) {
        problem_oom(pb);
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        char path[32];
        snprintf(path, sizeof path, "clients[%zu]", i);
        if (decode_item(json_array_get(arr, i), path, &in[i], pb) < 0) {
            free(in);
            return NULL;
        }
    }
    return in;
}

/* The batch's answer: each client's result (n of them, in the request's order), then the
 * counts by result. */
static void reply_batch(http_response *resp, const ledger_client *in, const ledger_put_outcome *out,
                        size_t n)
{
    static const char *const names[] = {"created", "updated", "unchanged", "conflict"};
    size_t count[4] = {0, 0, 0, 0};
    json_t *res = json_array();
    for (size_t i = 0; i < n; i++) {
        const ledger_put_outcome *o = &out[i];
        int conflict = o->result == LEDGER_PUT_CONFLICT;
        count[o->result]++;
        json_array_append_new(res,
                              json_pack("{s:s, s:s, s:o, s:o, s:o, s:I}", "id", in[i].id, "result",
                                        names[o->result], "code",
                                        conflict ? json_string("conflict") : json_null(), "field",
                                        conflict ? json_string(o->field) : json_null(), "detail",
                                        conflict ? json_string(o->detail) : json_null(), "version",
                                        (json_int_t)o->version));
    }
    http_reply_json(resp, 200,
                    json_pack("{s:o, s:I, s:I, s:I, s:I}", "results", res, "created",
                              (json_int_t)count[0], "updated", (json_int_t)count[1], "unchanged",
                              (json_int_t)count[2], "conflicts", (json_int_t)count[3]));
}

/* POST /v1/clients:batch: every item decoded first (a malformed one is the answer, naming its
 * index, and nothing is applied), then all applied with one sync, each with its result. */
void res_clients_batch(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    size_t n = 0;
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    ledger_client *in = j ? decode_batch(j, &n, &pb) : NULL;
    ledger_put_outcome *out = in ? calloc(n, sizeof *out) : NULL;
    dpb_error err = {0};
    if (in && out == NULL)
        problem_oom(&pb);
    if (out == NULL)
        http_reply_problem(resp, &pb);
    else if (ledger_put_clients_each(lr_ledger(req), in, n, out, &err) != DPB_OK)
        lr_reply_error(resp, &pb, &err);
    else
        reply_batch(resp, in, out, n);
    free(in);
    free(out);
    json_decref(j);
}

void res_client_get(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    ledger_client c;
    if (!lr_found(resp, ledger_get_client(lr_ledger(req), req->param, &c), "id", "client",
                  req->param, ": create it with PUT /v1/clients/{id}"))
        return;
    char etag[48];
    client_etag(&c, etag, sizeof etag);
    if (lr_not_modified(req, resp, etag))
        return;
    reply_client(resp, 200, &c);
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
}

/* The query argument name as the index of its value among names (NULL-terminated) into *out,
 * left alone when the argument is absent: 0, or -1 with invalid_parameter "NAME must RULE". */
static int query_choice(const http_request *req, const char *name, const char *const *names,
                        const char *rule, int *out, problem *pb)
{
    const char *s = http_query(req, name);
    if (s == NULL)
        return 0;
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    problem_set(pb, PB_INVALID_PARAMETER, name, "%s must be %s", name, rule);
    return -1;
}

void res_clients_list(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    ledger_query q = {-1, NULL, LEDGER_SORT_ID, 0, 0, 100};
    static const char *const statuses[] = {"active", "exhausted", "uncertified", NULL};
    static const char *const sorts[] = {"id", "spent", "remaining", NULL};
    static const char *const orders[] = {"asc", "desc", NULL};
    int sort = LEDGER_SORT_ID; /* the names' indexes are the ledger_status and ledger_sort values */
    if (query_choice(req, "status", statuses, "active, exhausted or uncertified", &q.status, &pb) <
        0)
        goto fail;
    q.label = http_query(req, "label");
    if (q.label && !lr_label_filter_ok(q.label)) {
        problem_set(&pb, PB_INVALID_PARAMETER, "label",
                    "label filters are key=value, the key 1-32 of [A-Za-z0-9_.-], the value at "
                    "most 64 bytes of printable UTF-8 (the rule of the labels themselves)");
        goto fail;
    }
    if (query_choice(req, "sort", sorts, "id, spent or remaining", &sort, &pb) < 0 ||
        query_choice(req, "order", orders, "asc or desc", &q.descending, &pb) < 0)
        goto fail;
    q.sort = (ledger_sort)sort;
    if (lr_page_args(req, &q.limit, &q.offset, &pb) < 0)
        goto fail;
    ledger_client *page = calloc(q.limit, sizeof *page);
    if (page == NULL) {
        problem_oom(&pb);
        goto fail;
    }
    size_t n = 0, total = 0;
    uint64_t version = 0;
    dpb_status st = ledger_list(lr_ledger(req), &q, page, &n, &total, &version);
    if (st != DPB_OK) {
        free(page);
        if (st == DPB_EUNAVAILABLE) {
            lr_reply_unavailable(resp, &pb, NULL);
            return;
        }
        problem_oom(&pb);
        goto fail;
    }
    char etag[48];
    snprintf(etag, sizeof etag, "\"l%llx\"", (unsigned long long)version);
    if (lr_not_modified(req, resp, etag)) {
        free(page);
        return;
    }
    jsonout_w w; /* the page written straight into the answer: no tree per client */
    jsonout_init(&w);
    jsonout_open(&w, '{');
    jsonout_key(&w, "clients");
    jsonout_open(&w, '[');
    for (size_t i = 0; i < n; i++)
        write_client(&w, &page[i]);
    free(page);
    jsonout_close(&w, ']');
    jsonout_key(&w, "total");
    jsonout_int(&w, (long long)total);
    jsonout_key(&w, "next_cursor");
    char buf[32];
    const char *next = lr_next_cursor(buf, q.offset, n, total);
    if (next)
        jsonout_str(&w, next);
    else
        jsonout_null(&w);
    jsonout_close(&w, '}');
    http_reply_written(resp, 200, &w);
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
    return;
fail:
    http_reply_problem(resp, &pb);
}

/* GET /v1/clients/{id}/rounds: the client's newest rounds (a bounded history), newest
 * first, and its complete aggregate of events. */
void res_client_history(const http_request *req, http_response *resp)
{
    static const char *const state_names[] = {"charged", "reserved", "released"};
    size_t limit, offset;
    if (lr_page_start(req, resp, &limit, &offset))
        return;
    problem pb = {0};
    ledger_history h;
    dpb_status st = ledger_client_history(lr_ledger(req), req->param, offset, limit, &h);
    if (lr_unavailable(resp, st))
        return;
    if (st != DPB_OK) {
        problem_set(&pb, st == DPB_ENOTFOUND ? PB_NOT_FOUND : PB_OUT_OF_MEMORY,
                    st == DPB_ENOTFOUND ? "id" : NULL, "%s",
                    st == DPB_ENOTFOUND ? "no such client: create it with PUT /v1/clients/{id}"
                                        : "out of memory");
        http_reply_problem(resp, &pb);
        return;
    }
    json_t *items = json_array(), *agg = json_array();
    for (size_t i = 0; i < h.n; i++) {
        const ledger_hist_item *it = &h.items[i];
        char t[32];
        lr_time_str(it->time_ms, t); /* "": a record before times were kept */
        json_array_append_new(
            items, json_pack("{s:s, s:I, s:s, s:o, s:o}", "round_id", it->round_id, "seq",
                             (json_int_t)it->seq, "state", state_names[it->state], "spent_after",
                             isnan(it->spent_after) ? json_null() : codec_real(it->spent_after),
                             "time", t[0] ? json_string(t) : json_null()));
    }
    for (size_t i = 0; i < h.nagg; i++)
        json_array_append_new(agg, json_pack("{s:o, s:I, s:I}", "event",
                                             codec_encode_event(h.agg[i].event), "charged",
                                             (json_int_t)h.agg[i].count, "reserved",
                                             (json_int_t)h.agg[i].reserved));
    json_t *o = json_pack("{s:s, s:o, s:I, s:b, s:I, s:o}", "client", req->param, "charges", items,
                          "total", (json_int_t)h.total, "complete", h.complete, "history_limit",
                          (json_int_t)LEDGER_HISTORY, "aggregate", agg);
    lr_set_next_cursor(o, offset, h.n, h.total);
    ledger_history_free(&h);
    lr_mark_read_only(req, resp);
    http_reply_json(resp, 200, o);
}
