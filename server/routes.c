/* routes.c - the one routing table. Mirrored by openapi.yaml's paths. A path ending in '/'
 * with prefix 1 takes one more segment (the id), handed to the handler as req->param, and then
 * its suffix when it has one ("/v1/rounds/{id}/commit"). Each row says the thread lane its
 * requests run on (routes.h), so the transport never names a handler. The order matters: the
 * first row matching method and path serves, and metrics count by row index.
 *
 * May call: nothing (it names the handlers of resources.h for http.c to call). */
#include "auth.h"
#include "resources.h"

/* The kinds of row, each as designated initialisers (the fields not named are 0 / NULL):
 * COMPUTE   a POST computation (compute.c): a JSON body, the read scope (none with
 *           --open-compute), on the compute pool unless light (NULL: none) vouches for it;
 * READ      a ledger read: GET with the read scope, on the HTTP worker; READ_ID at path{id}
 *           and then sfx (NULL: none);
 * WRITE     a ledger write: a JSON body with the given scope, on the ledger lane, bodies up
 *           to --max-bulk-body when bulk; WRITE_ID at path{id} and then sfx;
 * OPEN      needs no key, on the HTTP worker (operations, the dashboard); quiet: a 200 is
 *           counted, not logged. */
/* clang-format off */
#define COMPUTE(p, h, l) {.method = "POST", .path = p, .handler = h, .json_body = 1, \
                          .scope = SCOPE_READ, .compute = 1, .lane = LANE_COMPUTE, .light = l}
#define READ(p, h) {.method = "GET", .path = p, .handler = h, .scope = SCOPE_READ}
#define READ_ID(p, h, sfx) {.method = "GET", .path = p, .handler = h, .prefix = 1, \
                            .scope = SCOPE_READ, .suffix = sfx}
#define WRITE(m, p, h, sc, b) {.method = m, .path = p, .handler = h, .json_body = 1, .scope = sc, \
                               .bulk = b, .lane = LANE_LEDGER}
#define WRITE_ID(m, p, h, sc, sfx, b) {.method = m, .path = p, .handler = h, .json_body = 1, \
                                       .prefix = 1, .scope = sc, .suffix = sfx, .bulk = b, \
                                       .lane = LANE_LEDGER}
#define OPEN(p, h, q) {.method = "GET", .path = p, .handler = h, .scope = SCOPE_NONE, .quiet = q}

const route ROUTES[] = {
    COMPUTE("/v1/delta", res_delta, res_compute_light),
    COMPUTE("/v1/epsilon", res_epsilon, res_compute_light),
    COMPUTE("/v1/calibrate", res_calibrate, res_compute_light),
    COMPUTE("/v1/curve", res_curve, res_compute_light),
    COMPUTE("/v1/rdp", res_rdp, NULL),
    COMPUTE("/v1/proactive", res_proactive, NULL),
    /* a compute route (open with --open-compute) that is a cheap GET: on the worker */
    {.method = "GET", .path = "/v1/accountants", .handler = res_accountants,
     .scope = SCOPE_READ, .compute = 1},
    WRITE_ID("PUT", "/v1/clients/", res_client_put, SCOPE_ADMIN, NULL, 0),
    READ_ID("/v1/clients/", res_client_get, NULL),
    READ("/v1/clients", res_clients_list),
    READ_ID("/v1/clients/", res_client_history, "/rounds"),
    WRITE("POST", "/v1/clients:batch", res_clients_batch, SCOPE_ADMIN, 1),
    WRITE("POST", "/v1/rounds", res_round_post, SCOPE_CHARGE, 1),
    READ_ID("/v1/rounds/", res_round_get, NULL),
    /* a read, but it may compute pld candidates' PLDs: on the ledger lane too */
    WRITE("POST", "/v1/eligibility", res_eligibility, SCOPE_READ, 1),
    WRITE_ID("PUT", "/v1/events/", res_event_put, SCOPE_ADMIN, NULL, 0),
    READ_ID("/v1/events/", res_event_get, NULL),
    READ("/v1/events", res_events_list),
    WRITE_ID("POST", "/v1/rounds/", res_round_commit, SCOPE_CHARGE, "/commit", 1),
    WRITE_ID("POST", "/v1/rounds/", res_round_release, SCOPE_CHARGE, "/release", 0),
    READ("/v1/summary", res_summary),
    OPEN("/healthz", res_healthz, 1),
    OPEN("/readyz", res_readyz, 1),
    OPEN("/metrics", res_metrics, 1),
    OPEN("/openapi.yaml", res_openapi, 0),
    OPEN("/", res_index, 0),
    /* the asset's name is not an id: ui.c checks it */
    {.method = "GET", .path = "/ui/", .handler = res_ui_asset, .prefix = 1,
     .scope = SCOPE_NONE, .free_param = 1},
    {.method = NULL},
};
/* clang-format on */
