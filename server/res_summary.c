/*
 * res_summary.c - the ledger as a whole: GET /v1/summary (counts, the spent-fraction
 * histogram, read-only state, log size), GET /v1/history (the same over time: the series the
 * ledger keeps) and GET /readyz (whether this replica takes traffic). Calls res_ledger (shared
 * helpers), jsonout, http and core/ledger.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ledger/ledger.h"
#include "app.h"
#include "jsonout.h"
#include "res_ledger.h"
#include "resources.h"

/* "by_status": {"<status>": clients, ...}, one member per ledger_status (the summary's and
 * every point of the series'). */
static void put_by_status(jsonout_w *w, const uint64_t by_status[LEDGER_NSTATUS])
{
    jsonout_key(w, "by_status");
    jsonout_open(w, '{');
    for (int i = 0; i < LEDGER_NSTATUS; i++)
        lr_put_int(w, ledger_status_name((ledger_status)i), (long long)by_status[i]);
    jsonout_close(w, '}');
}

void res_summary(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    ledger_summary s;
    ledger_get_summary(lr_ledger(req), &s);
    if (s.unavailable) { /* what it holds may be behind the other replicas: not shown */
        problem pb = {0};
        lr_reply_unavailable(resp, &pb, NULL);
        return;
    }
    char etag[48];
    snprintf(etag, sizeof etag, "\"s%llx-%d\"", (unsigned long long)s.view, s.read_only);
    if (lr_not_modified(req, resp, etag))
        return;
    jsonout_w w; /* written straight into the answer (jsonout.h) */
    jsonout_init(&w);
    jsonout_open(&w, '{');
    lr_put_int(&w, "clients", (long long)s.clients);
    put_by_status(&w, s.by_status);
    lr_put_int(&w, "rounds", (long long)s.rounds);
    jsonout_key(&w, "spent_fraction_histogram");
    jsonout_open(&w, '[');
    for (int i = 0; i < 11; i++) {
        jsonout_open(&w, '{');
        lr_put_real(&w, "from", i / 10.0);
        if (i < 10)
            lr_put_real(&w, "to", (i + 1) / 10.0);
        else
            lr_put_str(&w, "to", "infinite");
        lr_put_int(&w, "clients", (long long)s.spend_hist[i]);
        jsonout_close(&w, '}');
    }
    jsonout_close(&w, ']');
    jsonout_key(&w, "read_only");
    jsonout_bool(&w, s.read_only);
    lr_put_int(&w, "log_bytes", (long long)s.log_bytes);
    lr_put_int(&w, "version", (long long)s.version);
    jsonout_close(&w, '}');
    http_reply_written(resp, 200, &w);
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
}

/* Readiness from what the ledger's store last saw (ledger_get_health) and its read-only
 * flag: no lock, no exchange with the database, so it answers at once however stalled the
 * database or the ledger's callers are; and 503 from the moment the daemon is stopping
 * (the orchestrator drains it first). */
void res_readyz(const http_request *req, http_response *resp)
{
    const app_state *app = req->app;
    if (app && __atomic_load_n(&app->stopping, __ATOMIC_ACQUIRE)) {
        problem pb = {0};
        problem_set(&pb, PB_SHUTTING_DOWN, NULL,
                    "the daemon is stopping (a stop signal): it still answers during its "
                    "--shutdown-grace, then finishes what is in flight and exits; route new "
                    "traffic elsewhere");
        http_reply_problem(resp, &pb);
        return;
    }
    ledger *l = lr_ledger(req);
    ledger_health h = {1, 0, 0.0};
    int read_only = 0;
    if (l) {
        ledger_get_health(l, &h);
        read_only = ledger_read_only(l);
    }
    if (!h.reachable || h.refusing || read_only) {
        problem pb = {0};
        if (!h.reachable || h.refusing)
            problem_set(&pb, PB_LEDGER_UNAVAILABLE, NULL,
                        "the ledger's database %s: this replica takes no traffic until it "
                        "answers, and reconnects by itself (no restart needed)",
                        h.refusing ? "does not answer" : "cannot be reached");
        else
            problem_set(&pb, PB_READ_ONLY, NULL,
                        "the ledger is read-only after an I/O failure (reads show what is "
                        "durable; changes are refused): fix the disk, then restart the daemon");
        http_reply_problem(resp, &pb);
        if (h.reachable && !h.refusing)
            lr_mark_read_only(req, resp);
        return;
    }
    http_reply_json(resp, 200, json_pack("{s:s, s:b}", "status", "ready", "ledger", l != NULL));
}

/* ---- GET /v1/history ------------------------------------------------------------------------ */

/* The query's time bound name into *ms (left alone when absent): 0, or -1 with the problem. */
static int query_time(const http_request *req, const char *name, uint64_t *ms, problem *pb)
{
    const char *v = http_query(req, name);
    if (v == NULL)
        return 0;
    if (lr_parse_time(v, ms) == 0)
        return 0;
    problem_set(pb, PB_INVALID_PARAMETER, name,
                "%s must be an RFC 3339 date-time at or after 1970-01-01T00:00:00Z, such as "
                "2026-11-29T11:00:00Z or 2026-11-29T12:00:00.000+01:00",
                name);
    return -1;
}

static void put_point(jsonout_w *w, const ledger_point *p)
{
    jsonout_open(w, '{');
    lr_put_time(w, "start", p->start_ms);
    lr_put_int(w, "rounds", (long long)p->rounds);
    lr_put_int(w, "charges", (long long)p->charges);
    lr_put_real(w, "epsilon_spent", p->epsilon_spent);
    jsonout_key(w, "refusals");
    jsonout_open(w, '{');
    for (int i = 0; i < LEDGER_NREASONS; i++)
        if (p->refusals[i])
            lr_put_int(w, ledger_reason_name((ledger_reason)i), (long long)p->refusals[i]);
    jsonout_close(w, '}');
    put_by_status(w, p->by_status);
    jsonout_close(w, '}');
}

void res_history(const http_request *req, http_response *resp)
{
    if (lr_no_ledger(req, resp))
        return;
    problem pb = {0};
    ledger_resolution res = LEDGER_HOUR;
    const char *rs = http_query(req, "resolution");
    if (rs && ledger_resolution_parse(rs, &res) != 0) {
        problem_set(&pb, PB_INVALID_PARAMETER, "resolution",
                    "resolution must be minute, hour or day");
        http_reply_problem(resp, &pb);
        return;
    }
    uint64_t from = 0, to = UINT64_MAX;
    if (query_time(req, "from", &from, &pb) != 0 || query_time(req, "to", &to, &pb) != 0) {
        http_reply_problem(resp, &pb);
        return;
    }
    if (to <= from) {
        problem_set(&pb, PB_INVALID_PARAMETER, "to", "to must be after from");
        http_reply_problem(resp, &pb);
        return;
    }
    ledger *l = lr_ledger(req);
    ledger_series s;
    dpb_status st = ledger_get_series(l, res, from, to, &s);
    if (lr_unavailable(resp, st))
        return;
    if (st != DPB_OK) {
        problem_oom(&pb);
        http_reply_problem(resp, &pb);
        return;
    }
    char etag[64];
    snprintf(etag, sizeof etag, "\"h%llx-%d-%d-%llx-%llx\"", (unsigned long long)s.view,
             ledger_read_only(l), (int)res, (unsigned long long)from, (unsigned long long)to);
    if (lr_not_modified(req, resp, etag)) {
        ledger_series_free(&s);
        return;
    }
    jsonout_w w;
    jsonout_init(&w);
    jsonout_open(&w, '{');
    lr_put_str(&w, "resolution", ledger_resolution_name(res));
    /* what the points' epsilon_spent is: a load figure, no guarantee of anything */
    lr_put_str(&w, "epsilon_spent_is", "sum_of_upper_bound_increases");
    lr_put_time(&w, "from", s.from_ms);
    lr_put_time(&w, "to", s.to_ms);
    jsonout_key(&w, "points");
    jsonout_open(&w, '[');
    for (size_t i = 0; i < s.n; i++)
        put_point(&w, &s.points[i]);
    jsonout_close(&w, ']');
    jsonout_key(&w, "retention");
    jsonout_open(&w, '{');
    for (int r = 0; r < LEDGER_NRES; r++) {
        jsonout_key(&w, ledger_resolution_name((ledger_resolution)r));
        jsonout_open(&w, '{');
        lr_put_int(&w, "bucket_seconds", (long long)(LEDGER_SERIES_WIDTH_MS[r] / 1000u));
        lr_put_int(&w, "buckets", (long long)LEDGER_SERIES_KEEP[r]);
        lr_put_time(&w, "from", s.kept_from_ms[r]);
        lr_put_time(&w, "to", s.kept_to_ms[r]);
        jsonout_close(&w, '}');
    }
    jsonout_close(&w, '}');
    lr_put_time(&w, "last_record_time", s.last_time_ms);
    jsonout_close(&w, '}');
    ledger_series_free(&s);
    http_reply_written(resp, 200, &w);
    snprintf(resp->etag, sizeof resp->etag, "%s", etag);
}
