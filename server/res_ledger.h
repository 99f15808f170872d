/*
 * res_ledger.h - what the ledger's resource files share (res_clients.c, res_rounds.c,
 * res_events.c, res_eligibility.c, res_summary.c): the ledger of a request, the answers to its
 * failures, conditional reads, pagination, label filters, lists of client ids and the event of
 * a request. Defined in res_ledger.c, which calls http, problem, codec, jsonout and
 * core/ledger, and none of the resource files: the arrows run from them to it.
 */
#ifndef HTTP_RES_LEDGER_H
#define HTTP_RES_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/ledger/ledger.h"
#include "http.h"
#include "jsonout.h"
#include "problem.h"

/* The request's ledger (borrowed), or NULL when the daemon runs without one. */
ledger *lr_ledger(const http_request *req);

/* 1, having answered 403 read_only, when the daemon runs without a ledger (--no-ledger);
 * else 0: every ledger handler starts with it. */
int lr_no_ledger(const http_request *req, http_response *resp);

/* Answer 503 ledger_unavailable (http_reply_problem adds Retry-After): the database of
 * --ledger-url cannot be reached, detail (may be NULL or "") says why. pb is the caller's. */
void lr_reply_unavailable(http_response *resp, problem *pb, const char *detail);

/* 1, having answered 503, if st says the database could not be reached; else 0. */
int lr_unavailable(http_response *resp, dpb_status st);

/* Answer the problem of a ledger verb's failure err (the ledger's statuses mapped here, the
 * others through problem_from_status). pb is the caller's. */
void lr_reply_error(http_response *resp, problem *pb, const dpb_error *err);

/* After a lookup of the id (a noun: "client") that returned st: 1 when found (st OK); else 0,
 * having answered 503 (unavailable) or 404 not_found naming field: "no NOUN 'id'HINT" (the id
 * cut at 128 bytes; hint "" or ": create it with ..."). */
int lr_found(http_response *resp, dpb_status st, const char *field, const char *noun,
             const char *id, const char *hint);

/* The opening of a paginated list: 1 when it answered (no ledger: 403; a bad limit or cursor:
 * 400); else 0 with *limit (default 100) and *offset (default 0) from the query. */
int lr_page_start(const http_request *req, http_response *resp, size_t *limit, size_t *offset);

/* A conditional read about to answer etag: marks a read-only ledger (Ledger-Read-Only: true),
 * then 1 when it answered 304 Not Modified (If-None-Match held the etag); else 0. */
int lr_not_modified(const http_request *req, http_response *resp, const char *etag);

/* The Ledger-Read-Only header on the answer when the ledger went read-only. */
void lr_mark_read_only(const http_request *req, http_response *resp);

/* A label key's (key = 1) or value's (key = 0) byte obeys the labels' rule. */
int lr_label_char_ok(unsigned char ch, int key);

/* 1 when the label filter f ("key=value") obeys the labels' own rule, else 0. */
int lr_label_filter_ok(const char *f);

/* limit and cursor ("o" + position) of a paginated list from the query (each left alone when
 * absent): 0, or -1 with the problem recorded. */
int lr_page_args(const http_request *req, size_t *limit, size_t *offset, problem *pb);

/* The cursor of the page after this one (n from offset of total) into buf, or NULL when this
 * page is the last. */
const char *lr_next_cursor(char buf[32], size_t offset, size_t n, size_t total);

/* The same as the member "next_cursor" of o (a string, or null). */
void lr_set_next_cursor(json_t *o, size_t offset, size_t n, size_t total);

/* A list of 1 to LEDGER_MAX_PARTICIPANTS client ids (field name) into *ids (malloc'ed, owned by
 * the caller, borrowing the strings of arr) and *n: 0, or -1 with the problem recorded. */
int lr_decode_ids(json_t *arr, const char *name, const char ***ids, size_t *n, problem *pb);

/* 0 when ev fits the ledger's limits on an event (ledger_event_check), else -1 with the
 * problem recorded: event_too_large (413) or event_too_complex (422), field "event". */
int lr_event_fits(const dp_event *ev, problem *pb);

/* The request's event: "event" (an Event, within lr_event_fits) or "event_name" (a
 * registered one), exactly one. Owned by the caller (dp_event_free); NULL with the problem
 * recorded. */
dp_event *lr_event_or_name(const http_request *req, json_t *j, problem *pb);

/* What a ledger request owns while it runs: its parsed body, the client ids decoded from it
 * (malloc'ed, borrowing the body's strings) and its event. Each may be NULL. */
typedef struct {
    json_t *body;
    const char **ids;
    dp_event *ev;
} lr_owned;

/* Frees what o holds (the ids before the body whose strings they borrow). */
void lr_release(lr_owned *o);

/* Members written into the object being written: key and a real ("infinite" for +inf), an
 * integer, a string. */
void lr_put_real(jsonout_w *w, const char *key, double x);
void lr_put_int(jsonout_w *w, const char *key, long long v);
void lr_put_str(jsonout_w *w, const char *key, const char *s);

/* A ledger time (ms since the Unix epoch) as RFC 3339 in UTC with milliseconds
 * ("2026-11-29T11:02:03.456Z") into out; 0 (unknown) gives "" (written as null). */
void lr_time_str(uint64_t ms, char out[32]);
/* The member key: that time, or null when unknown (0). */
void lr_put_time(jsonout_w *w, const char *key, uint64_t ms);
/* An RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS, fractions of a second, Z or +HH:MM / -HH:MM)
 * at or after 1970-01-01T00:00:00Z into *ms (fractions below a ms dropped). 0, or -1. */
int lr_parse_time(const char *s, uint64_t *ms);

#endif
