/*
 * res_events.c - the named events resource: PUT /v1/events/{name} (register an event under
 * a name, immutable), GET /v1/events/{name}, GET /v1/events (paginated). Calls res_ledger
 * (shared helpers), codec, http and core/ledger.
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

static json_t *named_event_json(const char *name, const dp_event *ev, uint64_t seq)
{
    return json_pack("{s:s, s:o, s:I}", "name", name, "event", codec_encode_event(ev),
                     "created_seq", (json_int_t)seq);
}

/* PUT /v1/events/{name} {"event": Event}: register an event under a name (immutable). */
void res_event_put(const http_request *req, http_response *resp)
{
    static const char *const allowed[] = {"event", NULL};
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    dp_event *ev = NULL;
    json_t *j = codec_parse_object(req->body, req->body_len, &pb);
    if (j == NULL || codec_only_fields(j, "", allowed, &pb) < 0 ||
        (ev = codec_event(json_object_get(j, "event"), "event", DP_PARAM_NONE, &pb)) == NULL ||
        lr_event_fits(ev, &pb) < 0) {
        http_reply_problem(resp, &pb);
        dp_event_free(ev);
        json_decref(j);
        return;
    }
    int created = 0;
    uint64_t seq = 0;
    dpb_error err = {0};
    if (ledger_put_event(lr_ledger(req), req->param, ev, &created, &seq, &err) != DPB_OK)
        lr_reply_error(resp, &pb, &err);
    else
        http_reply_json(resp, created ? 201 : 200, named_event_json(req->param, ev, seq));
    dp_event_free(ev);
    json_decref(j);
}

void res_event_get(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    dp_event *ev = NULL;
    uint64_t seq = 0;
    dpb_status st = ledger_get_event(lr_ledger(req), req->param, &ev, &seq);
    if (!lr_found(resp, st == DPB_OK && ev == NULL ? DPB_ENOTFOUND : st, "name", "event",
                  req->param, ": register it with PUT /v1/events/{name}"))
        return;
    lr_mark_read_only(req, resp);
    http_reply_json(resp, 200, named_event_json(req->param, ev, seq));
    dp_event_free(ev);
}

/* A page of named events holds at most this much JSON (at least one event): past it the page
 * ends early and next_cursor goes on from there, whatever the limit asked. */
#define EVENTS_PAGE_BYTES ((size_t)1 << 20)

void res_events_list(const http_request *req, http_response *resp)
{
    size_t limit, offset;
    if (lr_page_start(req, resp, &limit, &offset))
        return;
    problem pb = {0};
    char **names = NULL;
    size_t n = 0, total = 0;
    dpb_status st = ledger_list_events(lr_ledger(req), offset, limit, &names, &n, &total);
    if (lr_unavailable(resp, st))
        return;
    if (st != DPB_OK) {
        problem_oom(&pb);
        http_reply_problem(resp, &pb);
        return;
    }
    json_t *arr = json_array();
    size_t shown = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        dp_event *ev = NULL;
        uint64_t seq = 0;
        if (bytes < EVENTS_PAGE_BYTES &&
            ledger_get_event(lr_ledger(req), names[i], &ev, &seq) == DPB_OK && ev) {
            json_t *item = named_event_json(names[i], ev, seq);
            size_t b = item ? json_dumpb(item, NULL, 0, JSON_COMPACT) : 0;
            if (shown > 0 && bytes + b > EVENTS_PAGE_BYTES) {
                json_decref(item);
                bytes = EVENTS_PAGE_BYTES; /* the page is full: the rest on the next one */
            } else {
                json_array_append_new(arr, item);
                bytes += b;
                shown = i + 1;
            }
        }
        dp_event_free(ev);
        free(names[i]);
    }
    free(names);
    json_t *o = json_pack("{s:o, s:I}", "events", arr, "total", (json_int_t)total);
    lr_set_next_cursor(o, offset, shown, total);
    lr_mark_read_only(req, resp);
    http_reply_json(resp, 200, o);
}
