/* ops.c - operational resources: health, metrics, the OpenAPI document (the dashboard at /
 * is ui.c). */
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "metrics.h"
#include "resources.h"

extern const unsigned char dpb_openapi_yaml[];
extern const unsigned long dpb_openapi_yaml_len;

void res_healthz(const http_request *req, http_response *resp)
{
    (void)req;
    http_reply_json(resp, 200, json_pack("{s:s, s:s}", "status", "ok", "version", DPB_VERSION));
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
