/*
 * res_summary.c - the ledger as a whole: GET /v1/summary (counts, the spent-fraction
 * histogram, read-only state, log size) and GET /readyz (whether this replica takes
 * traffic). Calls res_ledger (shared helpers), jsonout, http and core/ledger.
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
    jsonout_key(&w, "by_status");
    jsonout_open(&w, '{');
    lr_put_int(&w, "active", (long long)s.active);
    lr_put_int(&w, "exhausted", (long long)s.exhausted);
    lr_put_int(&w, "uncertified", (long long)s.uncertified);
    lr_put_int(&w, "stuck", (long long)s.stuck);
    jsonout_close(&w, '}');
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
