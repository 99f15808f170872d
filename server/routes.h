/*
 * routes.h - the routing table's shape: what the transport (http.c) knows of a route. It
 * names no handler: each row carries its handler, and the thread lane it runs on, so the
 * transport never asks which handler a request is for. The rows themselves are in routes.c
 * (which may call nothing; it names the handlers of resources.h).
 */
#ifndef HTTP_ROUTES_H
#define HTTP_ROUTES_H

#include <jansson.h>

#include "http.h"

/* The thread a route's requests run on (http.c). */
typedef enum {
    /* the HTTP worker that read the request: probes, reads, anything quick */
    LANE_WORKER = 0,
    /* the compute pool (--compute-threads, --compute-queue, --compute-deadline): below the
     * workers' priority, 503 overloaded when full; unless route.light vouches for the
     * request, which then stays on the worker */
    LANE_COMPUTE,
    /* the ledger lane: the ledger's writes, which wait for the log's fdatasync (and a pld
     * round's PLDs), at the workers' priority apart from the computations; when it is full:
     * 503 overloaded with Retry-After (the worker never waits on the ledger). A large write
     * (a body over 64 KiB, or one route.light says is not small) runs on a lane of its own
     * below the workers' priority (nice + 10), as the compute lanes do */
    LANE_LEDGER,
    /* the ledger's reads: a lane of their own (not behind the writes), since a read waits on
     * the ledger's lock and, with --ledger-url, on the database (catching up); full: 503
     * overloaded. The HTTP workers never wait on the ledger: probes always answer */
    LANE_LEDGER_READ,
    /* the ledger's requests that compute for their caller (eligibility: a PLD per probed
     * count): a lane of their own of one thread fewer than the CPUs (one at least), so that a
     * flood of them leaves a core, the writes' threads and the reads' to the others; full:
     * 503 overloaded */
    LANE_LEDGER_COMPUTE,
} route_lane;

/* For a LANE_COMPUTE route: 1 when this request is cheap whatever its size (it stays on
 * the HTTP worker), else 0. For a LANE_LEDGER route: 1 when it is small (the writes' lane),
 * 0 for the large writes' lane; it runs on the HTTP worker, so it never waits on the ledger. May
 * parse the body once: *parsed receives a new reference for the caller (handed on as
 * http_request.parsed and released by the transport), or NULL. */
typedef int (*route_light_fn)(const http_request *req, json_t **parsed);

typedef struct route {
    const char *method;
    const char *path; /* ending in '/' with prefix = 1: one more path segment, the param */
    http_handler handler;
    int json_body; /* 1: the request must carry a JSON body */
    int prefix;
    int scope;            /* the API key scope it needs when keys are configured (auth.h) */
    int compute;          /* a stateless computation: open to all with --open-compute */
    int free_param;       /* 1: the prefix route's segment is not an id (its handler checks it);
                             0: it obeys the id rule, checked before the handler runs */
    const char *suffix;   /* a prefix route: what follows the segment ("/commit"), or NULL */
    int bulk;             /* 1: carries lists of clients, bodies up to --max-bulk-body */
    route_lane lane;      /* the thread it runs on */
    route_light_fn light; /* LANE_COMPUTE: which requests stay on the worker (NULL: none);
                             LANE_LEDGER: which are small (NULL: a body up to 64 KiB) */
    int quiet;            /* a 200 is counted, not logged (probes and scrapes) */
} route;

/* The routing table (routes.c), terminated by a NULL method. Only main.c names it: it hands
 * the table to the transport (http_config.routes) and to the metrics (metrics_routes), so
 * that nothing below the handlers links to the table that names them. */
extern const route ROUTES[];

#endif
