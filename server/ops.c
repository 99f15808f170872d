/* ops.c - operational resources: health, metrics, the OpenAPI document (the dashboard at /
 * is ui.c). */
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "metrics.h"
#include "resources.h"

extern const unsigned char dpb_openapi_yaml[];
extern const unsigned long dpb_openapi_yaml_len;

/* Liveness: the process answers. A ledger gone read-only after an I/O failure does not fail
 * it (readiness does): a restart cannot fix the disk, and restarting on a still-broken disk
 * loops while dropping the reads the read-only ledger still serves. It is reported in the
 * body ("ledger") and the Ledger-Read-Only header, for alerts and operators. */
void res_healthz(const http_request *req, http_response *resp)
{
    const app_state *app = req->app;
    const char *lstate = "none";
    if (app && app->ledger) {
        lstate = ledger_read_only(app->ledger) ? "read_only" : "writable";
        if (lstate[0] == 'r') {
            resp->extra_name = "Ledger-Read-Only";
            resp->extra_value = "true";
        }
    }
    http_reply_json(
        resp, 200,
        json_pack("{s:s, s:s, s:s}", "status", "ok", "version", DPB_VERSION, "ledger", lstate));
}

void res_metrics(const http_request *req, http_response *resp)
{
    const app_state *app = req->app;
    size_t len = 0;
    char *text = metrics_render(app ? app->ledger : NULL, &len);
    if (text == NULL) {
        problem p = {0};
        problem_set(&p, PB_OUT_OF_MEMORY, NULL, "out of memory rendering the metrics");
        http_reply_problem(resp, &p);
        return;
    }
    free(resp->body);
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = text;
    resp->body_len = len;
}

void res_openapi(const http_request *req, http_response *resp)
{
    (void)req;
    http_reply_bytes(resp, 200, "application/yaml", (const char *)dpb_openapi_yaml,
                     (size_t)dpb_openapi_yaml_len);
}
