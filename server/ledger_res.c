/*
 * ledger_res.c - the budget ledger's resources: PUT/GET /v1/clients/{id}, GET /v1/clients,
 * POST /v1/rounds, GET /v1/rounds/{id}, GET /v1/summary, GET /readyz. Decode (strict) ->
 * core/ledger -> encode; reads carry an ETag and honour If-None-Match.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/ledger/ledger.h"
#include "app.h"
#include "codec.h"
#include "jsonout.h"
#include "metrics.h"
#include "resources.h"

static ledger *the_ledger(const http_request *req)
{
    const app_state *a = req->app;
    return a ? a->ledger : NULL;
}

/* 503 ledger_unavailable (http_reply_problem adds Retry-After): the database of --ledger-url
 * cannot be reached. Nothing of the request was acknowledged and no stale state is shown. */
static void reply_unavailable(http_response *resp, problem *pb, const char *detail)
{
    problem_set(pb, PB_LEDGER_UNAVAILABLE, NULL,
                "the ledger's database cannot be reached (%s): nothing was acknowledged; retry "
                "after " PROBLEM_LEDGER_RETRY_AFTER " s, here or on another replica, with the "
                "same round id (retries are idempotent)",
                detail && detail[0] ? detail : "connection lost");
    http_reply_problem(resp, pb);
}

/* 1 (answered 503) if st says the database could not be reached. */
static int unavailable(http_response *resp, dpb_status st)
{
    if (st != DPB_EUNAVAILABLE)
        return 0;
    problem pb = {0};
    reply_unavailable(resp, &pb, NULL);
    return 1;
}

/* Problems of the ledger's statuses (the compute table does not know them). */
static void reply_ledger_error(http_response *resp, problem *pb, const dpb_error *err)
{
    problem_code c;
    switch (err->status) {
    case DPB_EUNAVAILABLE:
        reply_unavailable(resp, pb, err->detail);
        return;
    case DPB_ECONFLICT:
        c = PB_CONFLICT;
        break;
    case DPB_EREADONLY:
        c = PB_READ_ONLY;
        break;
    case DPB_EIO:
        c = PB_NOT_DURABLE;
        break;
    case DPB_ENOTFOUND:
        c = PB_NOT_FOUND;
        break;
    default:
        c = problem_from_status(err->status);
    }
    problem_set(pb, c, err->field, "%s", err->detail[0] ? err->detail : dpb_strstatus(err->status));
    http_reply_problem(resp, pb);
}

/* Every read of a ledger that went read-only after an I/O failure says so: what it shows is
 * what is durable, and changes are refused until a restart. */
static void mark_read_only(const http_request *req, http_response *resp)
{
    ledger *l = the_ledger(req);
    if (l && ledger_read_only(l)) {
        resp->extra_name = "Ledger-Read-Only";
        resp->extra_value = "true";
    }
}

static int no_ledger(const http_request *req, http_response *resp)
{
    if (the_ledger(req))
        return 0;
    problem pb = {0};
    problem_set(&pb, PB_READ_ONLY, NULL, "this daemon runs without a ledger (--no-ledger)");
    http_reply_problem(resp, &pb);
    return 1;
}

/* ---- clients ----------------------------------------------------------------------------------
 */

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

static void write_real(jsonout_w *w, const char *key, double x)
{
    jsonout_key(w, key);
    codec_write_real(w, x);
}

static void write_int(jsonout_w *w, const char *key, long long v)
{
    jsonout_key(w, key);
    jsonout_int(w, v);
}

static void write_string(jsonout_w *w, const char *key, const char *s)
{
    jsonout_key(w, key);
    jsonout_str(w, s);
}

/* A client as it is answered, written straight into the answer (jsonout.h): a GET of one
 * client builds no tree. */
static void write_client(jsonout_w *w, const ledger_client *c)
{
    jsonout_open(w, '{');
    write_string(w, "id", c->id);
    jsonout_key(w, "budget");
    jsonout_open(w, '{');
    write_real(w, "epsilon", c->epsilon);
    write_real(w, "delta", c->delta);
    jsonout_close(w, '}');
    write_string(w, "accounting", ledger_mode_name(c->mode));
    write_string(w, "guarantee_kind", ledger_guarantee_name(c->guarantee));
    write_string(w, "guarantee_reference", ledger_guarantee_reference(c->mode));
    write_string(w, "neighboring_relation", dp_relation_name(c->relation));
    jsonout_key(w, "labels");
    write_labels(w, c->labels);
    jsonout_key(w, "spent");
    jsonout_open(w, '{');
    write_real(w, "epsilon", c->spent);
    write_real(w, "delta", c->delta);
    write_real(w, "delta_total_variation", c->delta_tv);
    /* the accountant whose value for the client's composition the spend is */
    if (c->spent_accountant > 0)
        write_string(w, "accountant", dp_accountant_name((dp_accountant)c->spent_accountant));
    jsonout_close(w, '}');
    jsonout_key(w, "remaining");
    jsonout_open(w, '{');
    write_real(w, "epsilon", c->remaining);
    jsonout_close(w, '}');
    jsonout_key(w, "rounds");
    jsonout_int(w, (long long)c->rounds);
    write_string(w, "status", ledger_status_name(c->status));
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

static int label_char_ok(unsigned char ch, int key)
{
    if (key)
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '_' || ch == '-' || ch == '.';
    return ch >= 0x20 && ch != 0x7f;
}

/* A label filter "key=value" obeys the labels' own rule (decode_labels): anything else could
 * match nothing by accident or alias another label. */
static int label_filter_ok(const char *f)
{
    const char *eq = strchr(f, '=');
    if (eq == NULL || eq == f || eq - f > 32 || strlen(eq + 1) > 64)
        return 0;
    for (const char *p = f; p < eq; p++)
        if (!label_char_ok((unsigned char)*p, 1))
            return 0;
    const unsigned char *v = (const unsigned char *)eq + 1;
    for (size_t n = strlen((const char *)v), i = 0; i < n;) {
        size_t k = utf8_seq_len(v + i, n - i);
        if (k == 0 || !label_char_ok(v[i], 0))
            return 0;
        i += k;
    }
    return 1;
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
            ok = label_char_ok((unsigned char)k[i], 1);
        const char *s = ok ? json_string_value(v) : "";
        for (size_t i = 0; ok && s[i]; i++)
            ok = label_char_ok((unsigned char)s[i], 0);
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
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    ledger_client in;
    memset(&in, 0, sizeof in);
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    /* req->param passed the id rule in http_dispatch */
    snprintf(in.id, sizeof in.id, "%s", req->param);
    if (j == NULL || decode_client(j, "", allowed, &in, &pb) < 0)
        goto fail;
    ledger_client out;
    int created = 0;
    dpb_error err = {0};
    if (ledger_put_client(the_ledger(req), &in, &created, &out, &err) != DPB_OK) {
        reply_ledger_error(resp, &pb, &err);
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

/* POST /v1/clients:batch: every item decoded first (a malformed one is the answer, naming its
 * index, and nothing is applied), then all applied with one sync, each with its result. */
void res_clients_batch(const http_request *req, http_response *resp)
{
    static const char *const top[] = {"clients", NULL};
    static const char *const allowed[] = {"id",     "budget", "accounting", "neighboring_relation",
                                          "labels", NULL};
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    ledger_client *in = NULL;
    ledger_put_outcome *out = NULL;
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    if (j == NULL || codec_only_fields(j, "", top, &pb) < 0)
        goto fail;
    json_t *arr = json_object_get(j, "clients");
    if (arr == NULL) {
        problem_set(&pb, PB_MISSING_FIELD, "clients",
                    "'clients' is required: a list of 1 to %d clients, each the body of PUT "
                    "/v1/clients/{id} with its \"id\"",
                    BATCH_MAX);
        goto fail;
    }
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (!json_is_array(arr) || n == 0 || n > BATCH_MAX) {
        problem_set(&pb,
                    !json_is_array(arr) ? PB_WRONG_TYPE
                    : n == 0            ? PB_INVALID_PARAMETER
                                        : PB_TOO_MANY_VALUES,
                    "clients",
                    "'clients' must be a list of 1 to %d clients (send more in several "
                    "batches)",
                    BATCH_MAX);
        goto fail;
    }
    in = calloc(n, sizeof *in);
    out = calloc(n, sizeof *out);
    if (in == NULL || out == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(arr, i);
        char path[32], f[48];
        snprintf(path, sizeof path, "clients[%zu]", i);
        if (!json_is_object(it)) {
            problem_set(&pb, PB_WRONG_TYPE, path, "'%s' must be an object", path);
            goto fail;
        }
        const char *id;
        field_name(f, sizeof f, path, "id");
        if (codec_string(it, path, "id", 1, &id, &pb) < 0 ||
            codec_id(id, json_string_length(json_object_get(it, "id")), f, &pb) < 0)
            goto fail;
        snprintf(in[i].id, sizeof in[i].id, "%s", id);
        if (decode_client(it, path, allowed, &in[i], &pb) < 0) {
            if (strcmp(pb.field, "labels") == 0) /* decode_labels names the field alone */
                snprintf(pb.field, sizeof pb.field, "%s.labels", path);
            goto fail;
        }
    }
    dpb_error err = {0};
    if (ledger_put_clients_each(the_ledger(req), in, n, out, &err) != DPB_OK) {
        reply_ledger_error(resp, &pb, &err);
        goto out;
    }
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
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    free(in);
    free(out);
    json_decref(j);
}

void res_client_get(const http_request *req, http_response *resp)
{
    if (no_ledger(req, resp))
        return;
    ledger_client c;
    dpb_status st = ledger_get_client(the_ledger(req), req->param, &c);
    if (unavailable(resp, st))
        return;
    if (st != DPB_OK) {
        problem pb = {0};
        problem_set(&pb, PB_NOT_FOUND, "id",
                    "no client '%.128s': create it with PUT /v1/clients/{id}", req->param);
        http_reply_problem(resp, &pb);
        return;
    }
    char etag[48];
    client_etag(&c, etag, sizeof etag);
    mark_read_only(req, resp);
    if (http_not_modified(req, resp, etag))
        return;
    reply_client(resp, 200, &c);
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
}

/* Parse an unsigned decimal query argument in [lo, hi]; -1 when malformed. */
static long long query_uint(const char *s, long long lo, long long hi)
{
    if (s == NULL || *s == '\0' || strlen(s) > 18)
        return -1;
    long long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v >= lo && v <= hi ? v : -1;
}

/* "next_cursor" of a page of n from offset of total: the next position, or null. */
/* The cursor of the page after this one into buf, or NULL when this page is the last. */
static const char *next_cursor(char buf[32], size_t offset, size_t n, size_t total)
{
    snprintf(buf, 32, "o%zu", offset + n);
    return offset + n < total ? buf : NULL;
}

static void set_next_cursor(json_t *o, size_t offset, size_t n, size_t total)
{
    char buf[32];
    const char *next = next_cursor(buf, offset, n, total);
    json_object_set_new(o, "next_cursor", next ? json_string(next) : json_null());
}

/* limit and cursor ("o" + position) of a paginated list; -1 with the problem recorded. */
static int page_args(const http_request *req, size_t *limit, size_t *offset, problem *pb)
{
    const char *s;
    if ((s = http_query(req, "limit"))) {
        long long v = query_uint(s, 1, 1000);
        if (v < 0) {
            problem_set(pb, PB_INVALID_PARAMETER, "limit", "limit must be 1 to 1000");
            return -1;
        }
        *limit = (size_t)v;
    }
    if ((s = http_query(req, "cursor"))) {
        long long v = s[0] == 'o' ? query_uint(s + 1, 0, 1LL << 40) : -1;
        if (v < 0) {
            problem_set(pb, PB_INVALID_PARAMETER, "cursor",
                        "cursor must be a next_cursor value from an earlier page");
            return -1;
        }
        *offset = (size_t)v;
    }
    return 0;
}

void res_clients_list(const http_request *req, http_response *resp)
{
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    ledger_query q = {-1, NULL, LEDGER_SORT_ID, 0, 0, 100};
    const char *s;
    if ((s = http_query(req, "status"))) {
        if (strcmp(s, "active") == 0)
            q.status = LEDGER_ACTIVE;
        else if (strcmp(s, "exhausted") == 0)
            q.status = LEDGER_EXHAUSTED;
        else if (strcmp(s, "uncertified") == 0)
            q.status = LEDGER_UNCERTIFIED;
        else {
            problem_set(&pb, PB_INVALID_PARAMETER, "status",
                        "status must be active, exhausted or uncertified");
            goto fail;
        }
    }
    q.label = http_query(req, "label");
    if (q.label && !label_filter_ok(q.label)) {
        problem_set(&pb, PB_INVALID_PARAMETER, "label",
                    "label filters are key=value, the key 1-32 of [A-Za-z0-9_.-], the value at "
                    "most 64 bytes of printable UTF-8 (the rule of the labels themselves)");
        goto fail;
    }
    if ((s = http_query(req, "sort"))) {
        if (strcmp(s, "id") == 0)
            q.sort = LEDGER_SORT_ID;
        else if (strcmp(s, "spent") == 0)
            q.sort = LEDGER_SORT_SPENT;
        else if (strcmp(s, "remaining") == 0)
            q.sort = LEDGER_SORT_REMAINING;
        else {
            problem_set(&pb, PB_INVALID_PARAMETER, "sort", "sort must be id, spent or remaining");
            goto fail;
        }
    }
    if ((s = http_query(req, "order"))) {
        if (strcmp(s, "asc") != 0 && strcmp(s, "desc") != 0) {
            problem_set(&pb, PB_INVALID_PARAMETER, "order", "order must be asc or desc");
            goto fail;
        }
        q.descending = s[0] == 'd';
    }
    if (page_args(req, &q.limit, &q.offset, &pb) < 0)
        goto fail;
    ledger_client *page = calloc(q.limit, sizeof *page);
    if (page == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    size_t n = 0, total = 0;
    uint64_t version = 0;
    dpb_status st = ledger_list(the_ledger(req), &q, page, &n, &total, &version);
    if (st != DPB_OK) {
        free(page);
        if (st == DPB_EUNAVAILABLE) {
            reply_unavailable(resp, &pb, NULL);
            return;
        }
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    char etag[48];
    snprintf(etag, sizeof etag, "\"l%llx\"", (unsigned long long)version);
    mark_read_only(req, resp);
    if (http_not_modified(req, resp, etag)) {
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
    const char *next = next_cursor(buf, q.offset, n, total);
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

/* ---- rounds -----------------------------------------------------------------------------------
 */

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

/* A list of 1 to LEDGER_MAX_PARTICIPANTS client ids (field name) into *ids (malloc'ed,
 * borrowing the strings of arr): 0, or -1 with the problem recorded. */
static int decode_ids(json_t *arr, const char *name, const char ***ids, size_t *n, problem *pb)
{
    *ids = NULL;
    *n = 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0 ||
        json_array_size(arr) > LEDGER_MAX_PARTICIPANTS) {
        problem_set(pb,
                    !json_is_array(arr)         ? PB_WRONG_TYPE
                    : json_array_size(arr) == 0 ? PB_INVALID_PARAMETER
                                                : PB_TOO_MANY_VALUES,
                    name, "'%s' must be a list of 1 to %d client ids", name,
                    LEDGER_MAX_PARTICIPANTS);
        return -1;
    }
    size_t m = json_array_size(arr);
    const char **v = calloc(m, sizeof *v);
    if (v == NULL) {
        problem_set(pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < m; i++) {
        json_t *x = json_array_get(arr, i);
        char f[48];
        snprintf(f, sizeof f, "%s[%zu]", name, i);
        if (!json_is_string(x)) {
            problem_set(pb, PB_WRONG_TYPE, f, "'%s' must be a client id string", f);
            free(v);
            return -1;
        }
        if (codec_id(json_string_value(x), json_string_length(x), f, pb) < 0) {
            free(v);
            return -1;
        }
        v[i] = json_string_value(x);
    }
    *ids = v;
    *n = m;
    return 0;
}

/* The request's event: "event" (an Event) or "event_name" (a registered one), exactly one;
 * NULL with the problem recorded. */
static dp_event *event_or_name(const http_request *req, json_t *j, problem *pb)
{
    json_t *ev = json_object_get(j, "event"), *nm = json_object_get(j, "event_name");
    if (ev && nm) {
        problem_set(pb, PB_INVALID_PARAMETER, "event_name",
                    "give either 'event' or 'event_name' (a name registered with PUT "
                    "/v1/events/{name}), not both");
        return NULL;
    }
    if (nm == NULL)
        return codec_event(ev, "event", DP_PARAM_NONE, pb);
    if (!json_is_string(nm)) {
        problem_set(pb, PB_WRONG_TYPE, "event_name", "'event_name' must be a string");
        return NULL;
    }
    const char *name = json_string_value(nm);
    if (codec_id(name, json_string_length(nm), "event_name", pb) < 0)
        return NULL;
    dp_event *out = NULL;
    uint64_t seq;
    dpb_status st = ledger_get_event(the_ledger(req), name, &out, &seq);
    if (st == DPB_EUNAVAILABLE) {
        problem_set(pb, PB_LEDGER_UNAVAILABLE, "event_name",
                    "the ledger's database cannot be reached to look up the event '%s': "
                    "nothing was acknowledged; retry after " PROBLEM_LEDGER_RETRY_AFTER " s",
                    name);
        return NULL;
    }
    if (st != DPB_OK || out == NULL) {
        problem_set(pb, PB_UNKNOWN_EVENT_NAME, "event_name",
                    "no event is registered as '%s': register it with PUT /v1/events/%s", name,
                    name);
        return NULL;
    }
    return out;
}

void res_round_post(const http_request *req, http_response *resp)
{
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    dp_event *ev = NULL;
    const char **ids = NULL;
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    const char *rid, *pol = "all_or_nothing", *phase = "charge";
    ledger_round_req rq;
    memset(&rq, 0, sizeof rq);
    const app_state *app = req->app;
    if (j == NULL || codec_only_fields(j, "", CODEC_ROUND_FIELDS, &pb) < 0 ||
        codec_string(j, "", "round_id", 1, &rid, &pb) < 0 ||
        codec_string(j, "", "policy", 0, &pol, &pb) < 0 ||
        codec_bool(j, "", "dry_run", 0, &rq.dry_run, &pb) < 0 ||
        codec_bool(j, "", "already_ran", 0, &rq.already_ran, &pb) < 0 ||
        codec_string(j, "", "phase", 0, &phase, &pb) < 0)
        goto fail;
    if (codec_id(rid, strlen(rid), "round_id", &pb) < 0)
        goto fail;
    if (strcmp(phase, "charge") != 0 && strcmp(phase, "reserve") != 0) {
        problem_set(&pb, PB_INVALID_PARAMETER, "phase",
                    "phase must be \"charge\" (admit and charge at once) or \"reserve\" (hold "
                    "the admitted clients' budget until POST /v1/rounds/{id}/commit or /release)");
        goto fail;
    }
    rq.reserve = phase[0] == 'r';
    rq.ttl_seconds = app && app->reservation_ttl ? app->reservation_ttl : 3600;
    if (codec_uint(j, "", "reservation_ttl_seconds", 0, 1, LEDGER_TTL_MAX, &rq.ttl_seconds, &pb) <
        0)
        goto fail;
    if (json_object_get(j, "reservation_ttl_seconds") && !rq.reserve) {
        problem_set(&pb, PB_INVALID_PARAMETER, "reservation_ttl_seconds",
                    "reservation_ttl_seconds applies to \"phase\": \"reserve\" only");
        goto fail;
    }
    if (rq.reserve && rq.already_ran) {
        problem_set(&pb, PB_INVALID_PARAMETER, "already_ran",
                    "a round that already ran is recorded in one step (already_ran), not "
                    "reserved: leave out \"phase\": \"reserve\"");
        goto fail;
    }
    snprintf(rq.round_id, sizeof rq.round_id, "%s", rid);
    if (strcmp(pol, "all_or_nothing") == 0)
        rq.policy = LEDGER_ALL_OR_NOTHING;
    else if (strcmp(pol, "admit_eligible") == 0)
        rq.policy = LEDGER_ADMIT_ELIGIBLE;
    else {
        problem_set(&pb, PB_INVALID_PARAMETER, "policy",
                    "policy must be \"all_or_nothing\" or \"admit_eligible\"");
        goto fail;
    }
    json_t *pa = json_object_get(j, "participants");
    if (pa == NULL) {
        problem_set(&pb, PB_MISSING_FIELD, "participants",
                    "'participants' is required: a list of client ids");
        goto fail;
    }
    if (decode_ids(pa, "participants", &ids, &rq.n, &pb) < 0)
        goto fail;
    rq.participants = ids;
    ev = event_or_name(req, j, &pb);
    if (ev == NULL)
        goto fail;
    rq.event = ev;
    /* idempotency: the hash of the canonical request (sorted keys, compact, numbers in one
     * spelling per value, defaults made explicit so that writing a default out does not
     * change the request) */
    json_object_set_new(j, "policy", json_string(pol));
    json_object_set_new(j, "dry_run", json_boolean(rq.dry_run));
    json_object_set_new(j, "already_ran", json_boolean(rq.already_ran));
    /* a one-step round's hash is what it was before two-phase rounds existed: "phase":
     * "charge" spelled out is the default, left out; a reservation spells out its ttl */
    if (rq.reserve) {
        json_object_set_new(j, "reservation_ttl_seconds", json_integer((json_int_t)rq.ttl_seconds));
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
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    ledger_hash128(canon, strlen(canon), rq.body_hash);
    ledger_hash128(legacy, strlen(legacy), rq.legacy_hash);
    free(canon);
    free(legacy);
    ledger_round_res res;
    dpb_error err = {0};
    if (ledger_round(the_ledger(req), &rq, &res, &err) != DPB_OK) {
        reply_ledger_error(resp, &pb, &err);
        goto out;
    }
    if (res.replayed) {
        resp->extra_name = "Idempotent-Replayed";
        resp->extra_value = "true";
    } else if (!res.dry_run) {
        metrics_round(&res);
    }
    http_reply_json(resp, 200, round_json(&res));
    ledger_round_res_free(&res);
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    free(ids);
    dp_event_free(ev);
    json_decref(j);
}

#define ELIG_DEFAULT_ROUNDS 1000

typedef struct {
    char *b;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *s, const char *p, size_t n)
{
    if (s->oom)
        return;
    if (s->n + n + 1 > s->cap) {
        size_t nc = s->cap ? s->cap : 4096;
        while (nc < s->n + n + 1)
            nc *= 2;
        char *nb = realloc(s->b, nc);
        if (nb == NULL) {
            s->oom = 1;
            return;
        }
        s->b = nb;
        s->cap = nc;
    }
    memcpy(s->b + s->n, p, n);
    s->n += n;
    s->b[s->n] = '\0';
}

static void sb_str(sbuf *s, const char *p)
{
    sb_put(s, p, strlen(p));
}

/* A Real as JSON: the shortest round-trip number, or "infinite". Candidates of one history
 * share their figures: the text of recent values is kept (direct-mapped by the bits). */
typedef struct {
    uint64_t bits;
    unsigned char len, used;
    char text[38];
} realmemo;

static void sb_real(sbuf *s, double x, realmemo *memo)
{
    if (isinf(x)) {
        sb_str(s, "\"infinite\"");
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
    sb_put(s, m->text, m->len);
}

static void sb_uint(sbuf *s, uint64_t v)
{
    char t[24];
    size_t k = sizeof t;
    do
        t[--k] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    sb_put(s, t + k, sizeof t - k);
}

/* A client id as a JSON string: ids obeying the id rule need no escaping; an id an older
 * log kept (before the rule) goes through the JSON writer. */
static void sb_id(sbuf *s, const char *id)
{
    if (ledger_id_valid(id, strlen(id))) {
        sb_put(s, "\"", 1);
        sb_str(s, id);
        sb_put(s, "\"", 1);
        return;
    }
    json_t *j = json_string(id);
    size_t n = 0;
    char *t = j ? jsonout_dump(j, &n) : NULL;
    json_decref(j);
    sb_str(s, t ? t : "\"?\"");
    free(t);
}

/* The eligibility answer, written directly (10,000 candidates: a jansson tree of them cost
 * more than the admission tests). NULL when out of memory. */
static char *eligibility_json(const ledger_elig_item *items, size_t n, uint64_t max_rounds,
                              size_t *len)
{
    sbuf s = {0};
    char t[160];
    size_t yes = 0;
    for (size_t i = 0; i < n; i++)
        yes += (size_t)items[i].eligible;
    snprintf(t, sizeof t, "{\"eligible\":%zu,\"ineligible\":%zu,\"max_rounds\":%llu,\"clients\":[",
             yes, n - yes, (unsigned long long)max_rounds);
    sb_str(&s, t);
    realmemo *memo = calloc(64, sizeof *memo);
    if (memo == NULL)
        s.oom = 1;
    for (size_t i = 0; i < n && !s.oom; i++) {
        const ledger_elig_item *it = &items[i];
        sb_str(&s, i ? ",{\"id\":" : "{\"id\":");
        sb_id(&s, it->id);
        sb_str(&s, it->eligible ? ",\"eligible\":true" : ",\"eligible\":false");
        sb_str(&s, ",\"affordable_rounds\":");
        sb_uint(&s, it->rounds);
        sb_str(&s, it->capped ? ",\"affordable_rounds_capped\":true,\"accounting\":"
                              : ",\"affordable_rounds_capped\":false,\"accounting\":");
        if (it->mode >= 0) {
            sb_put(&s, "\"", 1);
            sb_str(&s, ledger_mode_name((ledger_mode)it->mode));
            sb_put(&s, "\"", 1);
        } else {
            sb_str(&s, "null");
        }
        if (isnan(it->spent)) {
            sb_str(&s, ",\"spent\":null,\"remaining\":null");
        } else {
            sb_str(&s, ",\"spent\":{\"epsilon\":");
            sb_real(&s, it->spent, memo);
            sb_str(&s, ",\"delta\":");
            sb_real(&s, it->delta, memo);
            sb_str(&s, "},\"remaining\":{\"epsilon\":");
            sb_real(&s, it->remaining, memo);
            sb_str(&s, "}");
        }
        if (it->eligible) {
            sb_str(&s, ",\"reason\":null}");
        } else {
            sb_str(&s, ",\"reason\":\"");
            sb_str(&s, ledger_reason_name(it->reason));
            sb_str(&s, "\"}");
        }
    }
    sb_str(&s, "]}");
    free(memo);
    if (s.oom) {
        free(s.b);
        return NULL;
    }
    *len = s.n;
    return s.b;
}

/* POST /v1/eligibility: who a round of the event would admit now and how many more such
 * rounds each can afford; nothing is charged or stored. */
void res_eligibility(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {"event", "event_name", "clients",
                                          "label", "max_rounds", NULL};
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    dp_event *ev = NULL;
    const char **ids = NULL;
    ledger_elig_item *items = NULL;
    size_t n = 0;
    ledger_elig_req q;
    memset(&q, 0, sizeof q);
    q.max_rounds = ELIG_DEFAULT_ROUNDS;
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    if (j == NULL || codec_only_fields(j, "", allowed, &pb) < 0 ||
        codec_uint(j, "", "max_rounds", 0, 1, LEDGER_ELIG_MAX_ROUNDS, &q.max_rounds, &pb) < 0 ||
        codec_string(j, "", "label", 0, &q.label, &pb) < 0)
        goto fail;
    json_t *cl = json_object_get(j, "clients");
    if ((cl == NULL) == (q.label == NULL)) {
        problem_set(&pb, cl ? PB_INVALID_PARAMETER : PB_MISSING_FIELD, "clients",
                    "give exactly one of 'clients' (a list of 1 to %d client ids) and 'label' "
                    "(\"key=value\": every client with that label)",
                    LEDGER_MAX_PARTICIPANTS);
        goto fail;
    }
    if (q.label && !label_filter_ok(q.label)) {
        problem_set(&pb, PB_INVALID_PARAMETER, "label",
                    "label is key=value, the key 1-32 of [A-Za-z0-9_.-], the value at most 64 "
                    "bytes of printable UTF-8 (the rule of the labels themselves)");
        goto fail;
    }
    if (cl && decode_ids(cl, "clients", &ids, &q.n, &pb) < 0)
        goto fail;
    q.ids = ids;
    ev = event_or_name(req, j, &pb);
    if (ev == NULL)
        goto fail;
    q.event = ev;
    dpb_error err = {0};
    size_t blen = 0;
    if (ledger_eligibility(the_ledger(req), &q, &items, &n, &err) != DPB_OK) {
        reply_ledger_error(resp, &pb, &err);
        goto out;
    }
    char *body = eligibility_json(items, n, q.max_rounds, &blen);
    if (body == NULL) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
    }
    free(resp->body);
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = body;
    resp->body_len = blen;
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    free(items);
    free(ids);
    dp_event_free(ev);
    json_decref(j);
}

/* The answer of a commit or release (st its status; res released here): the round, or the
 * problem; a reservation no longer held has its own codes. */
static void reply_resolved(http_response *resp, ledger_round_res *res, const dpb_error *err,
                           dpb_status st)
{
    problem pb = {0};
    if (st == DPB_OK) {
        if (res->replayed) {
            resp->extra_name = "Idempotent-Replayed";
            resp->extra_value = "true";
        }
        http_reply_json(resp, 200, round_json(res));
    } else if (st == DPB_ECONFLICT && res->reserve &&
               (res->state == LEDGER_EXPIRED || res->state == LEDGER_RELEASED)) {
        problem_set(&pb,
                    res->state == LEDGER_EXPIRED ? PB_RESERVATION_EXPIRED : PB_RESERVATION_RELEASED,
                    err->field, "%s", err->detail);
        http_reply_problem(resp, &pb);
    } else {
        reply_ledger_error(resp, &pb, err);
    }
    ledger_round_res_free(res);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* POST /v1/rounds/{id}/commit {"reported": [...]}: charge the reported clients of a
 * reservation, release the others. */
void res_round_commit(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {"reported", NULL};
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    const char **ids = NULL;
    size_t n = 0;
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    if (j == NULL || codec_only_fields(j, "", allowed, &pb) < 0)
        goto fail;
    json_t *rp = json_object_get(j, "reported");
    if (rp == NULL) {
        problem_set(&pb, PB_MISSING_FIELD, "reported",
                    "'reported' is required: the admitted clients whose updates were used (the "
                    "others are released; [] releases all)");
        goto fail;
    }
    if (!(json_is_array(rp) && json_array_size(rp) == 0) &&
        decode_ids(rp, "reported", &ids, &n, &pb) < 0)
        goto fail;
    /* idempotency: the hash of the sorted set (order does not matter) */
    const char **sorted = calloc(n ? n : 1, sizeof *sorted);
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(ids[i]) + 1;
    char *canon = malloc(len);
    if (sorted == NULL || canon == NULL) {
        free(sorted);
        free(canon);
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        goto fail;
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
    unsigned char hash[16];
    ledger_hash128(canon, at, hash);
    free(sorted);
    free(canon);
    ledger_round_res res;
    dpb_error err = {0};
    dpb_status st = ledger_commit(the_ledger(req), req->param, ids, n, hash, &res, &err);
    reply_resolved(resp, &res, &err, st);
    goto out;
fail:
    http_reply_problem(resp, &pb);
out:
    free(ids);
    json_decref(j);
}

/* POST /v1/rounds/{id}/release {}: release a reservation. */
void res_round_release(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {NULL};
    if (no_ledger(req, resp))
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
    dpb_status st = ledger_release(the_ledger(req), req->param, &res, &err);
    reply_resolved(resp, &res, &err, st);
}

/* ---- named events ----------------------------------------------------------------------- */

static json_t *named_event_json(const char *name, const dp_event *ev, uint64_t seq)
{
    return json_pack("{s:s, s:o, s:I}", "name", name, "event", codec_encode_event(ev),
                     "created_seq", (json_int_t)seq);
}

/* PUT /v1/events/{name} {"event": Event}: register an event under a name (immutable). */
void res_event_put(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {"event", NULL};
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    dp_event *ev = NULL;
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    if (j == NULL || codec_only_fields(j, "", allowed, &pb) < 0 ||
        (ev = codec_event(json_object_get(j, "event"), "event", DP_PARAM_NONE, &pb)) == NULL) {
        http_reply_problem(resp, &pb);
        json_decref(j);
        return;
    }
    int created = 0;
    uint64_t seq = 0;
    dpb_error err = {0};
    if (ledger_put_event(the_ledger(req), req->param, ev, &created, &seq, &err) != DPB_OK)
        reply_ledger_error(resp, &pb, &err);
    else
        http_reply_json(resp, created ? 201 : 200, named_event_json(req->param, ev, seq));
    dp_event_free(ev);
    json_decref(j);
}

void res_event_get(const http_request *req, http_response *resp)
{
    if (no_ledger(req, resp))
        return;
    dp_event *ev = NULL;
    uint64_t seq = 0;
    dpb_status st = ledger_get_event(the_ledger(req), req->param, &ev, &seq);
    if (unavailable(resp, st))
        return;
    if (st != DPB_OK || ev == NULL) {
        problem pb = {0};
        problem_set(&pb, PB_NOT_FOUND, "name",
                    "no event '%.128s': register it with PUT /v1/events/{name}", req->param);
        http_reply_problem(resp, &pb);
        return;
    }
    mark_read_only(req, resp);
    http_reply_json(resp, 200, named_event_json(req->param, ev, seq));
    dp_event_free(ev);
}

void res_events_list(const http_request *req, http_response *resp)
{
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    size_t limit = 100, offset = 0;
    if (page_args(req, &limit, &offset, &pb) < 0) {
        http_reply_problem(resp, &pb);
        return;
    }
    char **names = NULL;
    size_t n = 0, total = 0;
    dpb_status st = ledger_list_events(the_ledger(req), offset, limit, &names, &n, &total);
    if (unavailable(resp, st))
        return;
    if (st != DPB_OK) {
        problem_set(&pb, PB_OUT_OF_MEMORY, NULL, "out of memory");
        http_reply_problem(resp, &pb);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        dp_event *ev = NULL;
        uint64_t seq = 0;
        if (ledger_get_event(the_ledger(req), names[i], &ev, &seq) == DPB_OK && ev)
            json_array_append_new(arr, named_event_json(names[i], ev, seq));
        dp_event_free(ev);
        free(names[i]);
    }
    free(names);
    json_t *o = json_pack("{s:o, s:I}", "events", arr, "total", (json_int_t)total);
    set_next_cursor(o, offset, n, total);
    mark_read_only(req, resp);
    http_reply_json(resp, 200, o);
}

/* GET /v1/clients/{id}/rounds: the client's newest rounds (a bounded history), newest
 * first, and its complete aggregate of events. */
void res_client_history(const http_request *req, http_response *resp)
{
    static const char *const state_names[] = {"charged", "reserved", "released"};
    if (no_ledger(req, resp))
        return;
    problem pb = {0};
    size_t limit = 100, offset = 0;
    if (page_args(req, &limit, &offset, &pb) < 0) {
        http_reply_problem(resp, &pb);
        return;
    }
    ledger_history h;
    dpb_status st = ledger_client_history(the_ledger(req), req->param, offset, limit, &h);
    if (unavailable(resp, st))
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
        json_array_append_new(
            items, json_pack("{s:s, s:I, s:s, s:o}", "round_id", it->round_id, "seq",
                             (json_int_t)it->seq, "state", state_names[it->state], "spent_after",
                             isnan(it->spent_after) ? json_null() : codec_real(it->spent_after)));
    }
    for (size_t i = 0; i < h.nagg; i++)
        json_array_append_new(agg, json_pack("{s:o, s:I, s:I}", "event",
                                             codec_encode_event(h.agg[i].event), "charged",
                                             (json_int_t)h.agg[i].count, "reserved",
                                             (json_int_t)h.agg[i].reserved));
    json_t *o = json_pack("{s:s, s:o, s:I, s:b, s:I, s:o}", "client", req->param, "charges", items,
                          "total", (json_int_t)h.total, "complete", h.complete, "history_limit",
                          (json_int_t)LEDGER_HISTORY, "aggregate", agg);
    set_next_cursor(o, offset, h.n, h.total);
    ledger_history_free(&h);
    mark_read_only(req, resp);
    http_reply_json(resp, 200, o);
}

void res_round_get(const http_request *req, http_response *resp)
{
    if (no_ledger(req, resp))
        return;
    ledger_round_res r;
    dpb_status st = ledger_get_round(the_ledger(req), req->param, &r);
    if (unavailable(resp, st))
        return;
    if (st != DPB_OK) {
        problem pb = {0};
        problem_set(&pb, PB_NOT_FOUND, "round_id", "no round '%.128s'", req->param);
        http_reply_problem(resp, &pb);
        return;
    }
    char etag[48];
    snprintf(etag, sizeof etag, "\"r%llu\"", (unsigned long long)r.seq);
    mark_read_only(req, resp);
    if (!http_not_modified(req, resp, etag)) {
        http_reply_json(resp, 200, round_json(&r));
        snprintf(resp->etag, sizeof resp->etag, "%s", etag);
    }
    ledger_round_res_free(&r);
}

void res_summary(const http_request *req, http_response *resp)
{
    if (no_ledger(req, resp))
        return;
    ledger_summary s;
    ledger_get_summary(the_ledger(req), &s);
    if (s.unavailable) { /* what it holds may be behind the other replicas: not shown */
        problem pb = {0};
        reply_unavailable(resp, &pb, NULL);
        return;
    }
    char etag[48];
    snprintf(etag, sizeof etag, "\"s%llx-%d\"", (unsigned long long)s.view, s.read_only);
    mark_read_only(req, resp);
    if (http_not_modified(req, resp, etag))
        return;
    jsonout_w w; /* written straight into the answer (jsonout.h) */
    jsonout_init(&w);
    jsonout_open(&w, '{');
    write_int(&w, "clients", (long long)s.clients);
    jsonout_key(&w, "by_status");
    jsonout_open(&w, '{');
    write_int(&w, "active", (long long)s.active);
    write_int(&w, "exhausted", (long long)s.exhausted);
    write_int(&w, "uncertified", (long long)s.uncertified);
    jsonout_close(&w, '}');
    write_int(&w, "rounds", (long long)s.rounds);
    jsonout_key(&w, "spent_fraction_histogram");
    jsonout_open(&w, '[');
    for (int i = 0; i < 11; i++) {
        jsonout_open(&w, '{');
        write_real(&w, "from", i / 10.0);
        if (i < 10)
            write_real(&w, "to", (i + 1) / 10.0);
        else
            write_string(&w, "to", "infinite");
        write_int(&w, "clients", (long long)s.spend_hist[i]);
        jsonout_close(&w, '}');
    }
    jsonout_close(&w, ']');
    jsonout_key(&w, "read_only");
    jsonout_bool(&w, s.read_only);
    write_int(&w, "log_bytes", (long long)s.log_bytes);
    write_int(&w, "version", (long long)s.version);
    jsonout_close(&w, '}');
    http_reply_written(resp, 200, &w);
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
}

void res_readyz(const http_request *req, http_response *resp)
{
    ledger *l = the_ledger(req);
    ledger_summary s = {0};
    if (l)
        ledger_get_summary(l, &s);
    if (s.unavailable) {
        problem pb = {0};
        problem_set(&pb, PB_LEDGER_UNAVAILABLE, NULL,
                    "the ledger's database cannot be reached: this replica takes no traffic "
                    "until it can, and reconnects by itself (no restart needed)");
        http_reply_problem(resp, &pb);
        return;
    }
    if (s.read_only) {
        problem pb = {0};
        problem_set(&pb, PB_READ_ONLY, NULL,
                    "the ledger is read-only after an I/O failure (reads show what is "
                    "durable; changes are refused): fix the disk, then restart the daemon");
        http_reply_problem(resp, &pb);
        mark_read_only(req, resp);
        return;
    }
    http_reply_json(resp, 200, json_pack("{s:s, s:b}", "status", "ready", "ledger", l != NULL));
}
