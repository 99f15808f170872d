/*
 * ui.c - the dashboard: GET / (the page) and GET /ui/{asset} (its script and style sheet),
 * embedded in the binary at build time from server/ui/ (scripts/embed.sh), so the dashboard
 * works air-gapped. Every answer carries a Content-Security-Policy that allows this origin's
 * scripts, styles and API calls only: no inline script, nothing from elsewhere.
 */
#include <string.h>

#include "problem.h"
#include "resources.h"

extern const unsigned char dpb_ui_index_html[], dpb_ui_app_js[], dpb_ui_app_css[],
    dpb_ui_charts_js[];
extern const unsigned long dpb_ui_index_html_len, dpb_ui_app_js_len, dpb_ui_app_css_len,
    dpb_ui_charts_js_len;

static const char CSP[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

static void reply_asset(http_response *resp, const char *type, const unsigned char *bytes,
                        unsigned long len)
{
    http_reply_bytes(resp, 200, type, (const char *)bytes, (size_t)len);
    resp->extra_name = "Content-Security-Policy";
    resp->extra_value = CSP;
}

void res_index(const http_request *req, http_response *resp)
{
    (void)req;
    reply_asset(resp, "text/html; charset=utf-8", dpb_ui_index_html, dpb_ui_index_html_len);
}

void res_ui_asset(const http_request *req, http_response *resp)
{
    if (strcmp(req->param, "app.js") == 0) {
        reply_asset(resp, "text/javascript; charset=utf-8", dpb_ui_app_js, dpb_ui_app_js_len);
    } else if (strcmp(req->param, "app.css") == 0) {
        reply_asset(resp, "text/css; charset=utf-8", dpb_ui_app_css, dpb_ui_app_css_len);
    } else if (strcmp(req->param, "charts.js") == 0) {
        reply_asset(resp, "text/javascript; charset=utf-8", dpb_ui_charts_js, dpb_ui_charts_js_len);
    } else {
        problem p = {0};
        problem_set(&p, PB_NOT_FOUND, NULL,
                    "no dashboard asset '%.64s': the dashboard is at GET / and its assets are "
                    "/ui/app.js, /ui/app.css and /ui/charts.js",
                    req->param);
        http_reply_problem(resp, &p);
    }
}
