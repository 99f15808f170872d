/* resources.h - the handlers, one file per resource group (routes.c names them in the
 * routing table, routes.h); each calls down into http.h, never into the transport. */
#ifndef HTTP_RESOURCES_H
#define HTTP_RESOURCES_H

#include "http.h"
#include "routes.h"

/* compute.c: stateless privacy computations (accountants.c: the catalogue) */
void res_delta(const http_request *req, http_response *resp);
void res_epsilon(const http_request *req, http_response *resp);
void res_calibrate(const http_request *req, http_response *resp);
void res_curve(const http_request *req, http_response *resp);
void res_proactive(const http_request *req, http_response *resp);
void res_accountants(const http_request *req, http_response *resp);
/* POST /v1/rdp: the RDP curve of an event at given (or dp_accounting's default) orders. */
void res_rdp(const http_request *req, http_response *resp);
/* The light test of /v1/delta, /v1/epsilon, /v1/curve and /v1/calibrate (route.light,
 * routes.h): 1 when a compute request is cheap whatever its size (closed-form accountants, a
 * cached exact model): it runs on the HTTP worker instead of queueing for the compute pool.
 * The body, when it is a JSON object, is parsed once here: *parsed receives it (a new
 * reference for the caller, to hand on as http_request.parsed so the handler does not parse
 * it again), else NULL. */
int res_compute_light(const http_request *req, json_t **parsed);

/* ops.c: operations */
void res_healthz(const http_request *req, http_response *resp);
void res_metrics(const http_request *req, http_response *resp);
void res_openapi(const http_request *req, http_response *resp);

/* ui.c: the dashboard (GET /) and its embedded assets (GET /ui/{asset}) */
void res_index(const http_request *req, http_response *resp);
void res_ui_asset(const http_request *req, http_response *resp);

/* res_clients.c, res_rounds.c, res_events.c, res_eligibility.c, res_summary.c: the ledger's
 * resources (their shared helpers: res_ledger.c) */
void res_client_put(const http_request *req, http_response *resp);
void res_client_get(const http_request *req, http_response *resp);
void res_clients_list(const http_request *req, http_response *resp);
void res_clients_batch(const http_request *req, http_response *resp);
void res_round_post(const http_request *req, http_response *resp);
void res_round_get(const http_request *req, http_response *resp);
void res_eligibility(const http_request *req, http_response *resp);
void res_round_commit(const http_request *req, http_response *resp);
void res_round_release(const http_request *req, http_response *resp);
/* The small test of a round's commit and release (route.light of a LANE_LEDGER route,
 * routes.h): 1 when the stored round has at most RES_SMALL_ROUND participants, or is unknown;
 * 0 when it has more, or a change holds the ledger now (not waited for): the request then runs
 * on the large writes' lane. Never parses the body (*parsed stays NULL). */
#define RES_SMALL_ROUND 2000
int res_round_resolve_small(const http_request *req, json_t **parsed);
void res_event_put(const http_request *req, http_response *resp);
void res_event_get(const http_request *req, http_response *resp);
void res_events_list(const http_request *req, http_response *resp);
void res_client_history(const http_request *req, http_response *resp);
void res_summary(const http_request *req, http_response *resp);
/* res_log.c: the log's Merkle tree (docs/TRANSPARENCY.md) */
void res_log_inclusion(const http_request *req, http_response *resp);
void res_log_consistency(const http_request *req, http_response *resp);
void res_log_entries(const http_request *req, http_response *resp);
/* GET /v1/history: the ledger-wide series over time (ledger_get_series). */
void res_history(const http_request *req, http_response *resp);
void res_readyz(const http_request *req, http_response *resp);
/* res_sth.c: the log's signing keys and its signed tree head (docs/TRANSPARENCY.md) */
void res_log_keys(const http_request *req, http_response *resp);
void res_log_sth(const http_request *req, http_response *resp);

#endif
