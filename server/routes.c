/* routes.c - the one routing table. Mirrored by openapi.yaml's paths. A path ending in '/'
 * with prefix 1 takes one more segment (the id), handed to the handler as req->param, and then
 * its suffix when it has one ("/v1/rounds/{id}/commit"). Each row says the thread lane its
 * requests run on (routes.h), so the transport never names a handler. The order matters: the
 * first row matching method and path serves, and metrics count by row index.
 *
 * May call: nothing (it names the handlers of resources.h for http.c to call). */
#include "auth.h"
#include "resources.h"

/* Each row: method, path, then its kind as designated initialisers (the fields not named
 * are 0 / NULL):
 * COMPUTE   a POST computation (compute.c): a JSON body, the read scope (none with
 *           --open-compute), on the compute pool unless light (NULL: none) vouches for it;
 * READ      a ledger read: the read scope, on the ledger's read lane; READ_ID at path{id}
 *           and then sfx (NULL: none);
 * WRITE     a ledger write: a JSON body with scope sc, on the ledger lane (the large
 *           writes' lane for a body over 64 KiB, or when light, if given, says it is not
 *           small), bodies up to --max-bulk-body when bulk; WRITE_ID at path{id} and then sfx;
 * LEDGER_COMPUTE  a ledger request that computes for its caller, as WRITE but on the
 *           ledger's compute lane;
 * OPEN      needs no key, on the HTTP worker (operations, the dashboard); quiet: a 200 is
 *           counted, not logged. */
/* clang-format off */
#define COMPUTE(h, l) .handler = h, .json_body = 1, .scope = SCOPE_READ, .compute = 1, \
                      .lane = LANE_COMPUTE, .light = l
#define READ(h) .handler = h, .scope = SCOPE_READ, .lane = LANE_LEDGER_READ
#define READ_ID(h, sfx) READ(h), .prefix = 1, .suffix = sfx
#define WRITE(h, sc, bulk_) .handler = h, .json_body = 1, .scope = sc, .bulk = bulk_, \
                            .lane = LANE_LEDGER
#define WRITE_ID(h, sc, sfx, bulk_) WRITE(h, sc, bulk_), .prefix = 1, .suffix = sfx
#define LEDGER_COMPUTE(h, sc, bulk_) .handler = h, .json_body = 1, .scope = sc, .bulk = bulk_, \
                                     .lane = LANE_LEDGER_COMPUTE
#define OPEN(h, q) .handler = h, .scope = SCOPE_NONE, .quiet = q

const route ROUTES[] = {
    {"POST", "/v1/delta", COMPUTE(res_delta, res_compute_light)},
    {"POST", "/v1/epsilon", COMPUTE(res_epsilon, res_compute_light)},
    {"POST", "/v1/calibrate", COMPUTE(res_calibrate, res_compute_light)},
    {"POST", "/v1/curve", COMPUTE(res_curve, res_compute_light)},
    {"POST", "/v1/rdp", COMPUTE(res_rdp, NULL)},
    {"POST", "/v1/proactive", COMPUTE(res_proactive, NULL)},
    /* a compute route (open with --open-compute) that is a cheap GET: on the worker */
    {"GET", "/v1/accountants", .handler = res_accountants, .scope = SCOPE_READ, .compute = 1},
    {"PUT", "/v1/clients/", WRITE_ID(res_client_put, SCOPE_ADMIN, NULL, 0)},
    {"GET", "/v1/clients/", READ_ID(res_client_get, NULL)},
    {"GET", "/v1/clients", READ(res_clients_list)},
    {"GET", "/v1/clients/", READ_ID(res_client_history, "/rounds")},
    {"POST", "/v1/clients:batch", WRITE(res_clients_batch, SCOPE_ADMIN, 1)},
    {"POST", "/v1/rounds", WRITE(res_round_post, SCOPE_CHARGE, 1)},
    {"GET", "/v1/rounds/", READ_ID(res_round_get, NULL)},
    /* a read, but it may compute pld candidates' PLDs: on the ledger lane too */
    {"POST", "/v1/eligibility", LEDGER_COMPUTE(res_eligibility, SCOPE_READ, 1)},
    {"PUT", "/v1/events/", WRITE_ID(res_event_put, SCOPE_ADMIN, NULL, 0)},
    {"GET", "/v1/events/", READ_ID(res_event_get, NULL)},
    {"GET", "/v1/events", READ(res_events_list)},
    /* their work is the reservation's size, not the body's: light tells (the large writes'
     * lane past RES_SMALL_ROUND participants) */
    {"POST", "/v1/rounds/", WRITE_ID(res_round_commit, SCOPE_CHARGE, "/commit", 1),
     .light = res_round_resolve_small},
    {"POST", "/v1/rounds/", WRITE_ID(res_round_release, SCOPE_CHARGE, "/release", 0),
     .light = res_round_resolve_small},
    {"GET", "/v1/summary", READ(res_summary)},
    {"GET", "/v1/log/proof/inclusion", READ(res_log_inclusion)},
    {"GET", "/v1/log/proof/consistency", READ(res_log_consistency)},
    {"GET", "/v1/log/entries", READ(res_log_entries)},
    {"GET", "/v1/history", READ(res_history)},
    {"GET", "/v1/log/keys", READ(res_log_keys)},
    {"GET", "/v1/log/sth", READ(res_log_sth)},
    {"GET", "/healthz", OPEN(res_healthz, 1)},
    {"GET", "/readyz", OPEN(res_readyz, 1)},
    /* the ledger's figures (its lock, a catch-up): on the read lane, not the worker */
    {"GET", "/metrics", OPEN(res_metrics, 1), .lane = LANE_LEDGER_READ},
    {"GET", "/openapi.yaml", OPEN(res_openapi, 0)},
    {"GET", "/", OPEN(res_index, 0)},
    /* the asset's name is not an id: ui.c checks it */
    {"GET", "/ui/", OPEN(res_ui_asset, 0), .prefix = 1, .free_param = 1},
    {NULL, NULL, .handler = NULL},
};
/* clang-format on */
