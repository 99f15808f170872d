/* routes.c - the one routing table. Mirrored by openapi.yaml's paths. A path ending in '/'
 * with prefix 1 takes one more segment (the id), handed to the handler as req->param, and then
 * its suffix when it has one ("/v1/rounds/{id}/commit"). */
#include "auth.h"
#include "resources.h"

const route ROUTES[] = {
    /* method, path, handler, JSON body, prefix, scope (with API keys), compute, free_param,
     * suffix (after the {id} segment), bulk (bodies up to --max-bulk-body) */
    {"POST", "/v1/delta", res_delta, 1, 0, SCOPE_READ, 1, 0, NULL, 0},
    {"POST", "/v1/epsilon", res_epsilon, 1, 0, SCOPE_READ, 1, 0, NULL, 0},
    {"POST", "/v1/calibrate", res_calibrate, 1, 0, SCOPE_READ, 1, 0, NULL, 0},
    {"POST", "/v1/curve", res_curve, 1, 0, SCOPE_READ, 1, 0, NULL, 0},
    {"POST", "/v1/rdp", res_rdp, 1, 0, SCOPE_READ, 1, 0, NULL, 0},
    {"POST", "/v1/proactive", res_proactive, 1, 0, SCOPE_READ, 1, 0, NULL, 0},
    {"GET", "/v1/accountants", res_accountants, 0, 0, SCOPE_READ, 1, 0, NULL, 0},
    {"PUT", "/v1/clients/", res_client_put, 1, 1, SCOPE_ADMIN, 0, 0, NULL, 0},
    {"GET", "/v1/clients/", res_client_get, 0, 1, SCOPE_READ, 0, 0, NULL, 0},
    {"GET", "/v1/clients", res_clients_list, 0, 0, SCOPE_READ, 0, 0, NULL, 0},
    {"GET", "/v1/clients/", res_client_history, 0, 1, SCOPE_READ, 0, 0, "/rounds", 0},
    {"POST", "/v1/clients:batch", res_clients_batch, 1, 0, SCOPE_ADMIN, 0, 0, NULL, 1},
    {"POST", "/v1/rounds", res_round_post, 1, 0, SCOPE_CHARGE, 0, 0, NULL, 1},
    {"GET", "/v1/rounds/", res_round_get, 0, 1, SCOPE_READ, 0, 0, NULL, 0},
    {"POST", "/v1/eligibility", res_eligibility, 1, 0, SCOPE_READ, 0, 0, NULL, 1},
    {"PUT", "/v1/events/", res_event_put, 1, 1, SCOPE_ADMIN, 0, 0, NULL, 0},
    {"GET", "/v1/events/", res_event_get, 0, 1, SCOPE_READ, 0, 0, NULL, 0},
    {"GET", "/v1/events", res_events_list, 0, 0, SCOPE_READ, 0, 0, NULL, 0},
    {"POST", "/v1/rounds/", res_round_commit, 1, 1, SCOPE_CHARGE, 0, 0, "/commit", 1},
    {"POST", "/v1/rounds/", res_round_release, 1, 1, SCOPE_CHARGE, 0, 0, "/release", 0},
    {"GET", "/v1/summary", res_summary, 0, 0, SCOPE_READ, 0, 0, NULL, 0},
    {"GET", "/healthz", res_healthz, 0, 0, SCOPE_NONE, 0, 0, NULL, 0},
    {"GET", "/readyz", res_readyz, 0, 0, SCOPE_NONE, 0, 0, NULL, 0},
    {"GET", "/metrics", res_metrics, 0, 0, SCOPE_NONE, 0, 0, NULL, 0},
    {"GET", "/openapi.yaml", res_openapi, 0, 0, SCOPE_NONE, 0, 0, NULL, 0},
    {"GET", "/", res_index, 0, 0, SCOPE_NONE, 0, 0, NULL, 0},
    {"GET", "/ui/", res_ui_asset, 0, 1, SCOPE_NONE, 0, 1, NULL, 0},
    {NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, 0},
};
