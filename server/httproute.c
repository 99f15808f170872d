/*
 * httproute.c - the routing table at work (httproute.h): matching a path, the Allow header,
 * the scope a request needs, and the call of the route's handler.
 *
 * May call: routes.h (the table's data), codec.h (the id rule), http.h's reply helpers
 * (httpreply.c), and the handlers only through the table's pointers.
 */
#include "httproute.h"

#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "codec.h"

/* Does path match route r? For a prefix route, *param receives the one segment after it
 * (followed by the route's suffix, if any: httproute_param cuts it off). */
static int route_match(const route *r, const char *path, const char **param)
{
    if (!r->prefix)
        return strcmp(r->path, path) == 0;
    size_t n = strlen(r->path);
    if (strncmp(r->path, path, n) != 0 || path[n] == '\0')
        return 0;
    const char *slash = strchr(path + n, '/');
    if (r->suffix ? slash == NULL || slash == path + n || strcmp(slash, r->suffix) != 0
                  : slash != NULL)
        return 0;
    *param = path + n;
    return 1;
}

const char *httproute_param(const route *r, const char *param, char *buf, size_t cap)
{
    if (r->suffix == NULL)
        return param;
    size_t n = strlen(param) - strlen(r->suffix);
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), param);
    return buf;
}

/* The route of table serving method at path, or NULL; *param at a prefix route's segment. */
static const route *httproute_resolve(const route *table, const char *method, const char *path,
                                      const char **param)
{
    const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
    for (const route *r = table; r->method; r++)
        if (route_match(r, path, param) && strcmp(r->method, m) == 0)
            return r;
    return NULL;
}

/* The Allow header value for a path: every method routed there, and OPTIONS, which every
 * routed path answers (http.c) (static storage). */
static const char *allowed_methods(const route *table, const char *path)
{
    static const char *const combos[] = {"GET, HEAD, OPTIONS", "POST, OPTIONS", "PUT, OPTIONS",
                                         "GET, HEAD, PUT, OPTIONS", "GET, HEAD, POST, OPTIONS"};
    int get = 0, post = 0, put = 0;
    const char *param;
    for (const route *r = table; r->method; r++)
        if (route_match(r, path, &param)) {
            get |= strcmp(r->method, "GET") == 0;
            post |= strcmp(r->method, "POST") == 0;
            put |= strcmp(r->method, "PUT") == 0;
        }
    if (get && put)
        return combos[3];
    if (get && post)
        return combos[4];
    return get ? combos[0] : post ? combos[1] : put ? combos[2] : NULL;
}

void httproute_dispatch(const route *table, const http_request *req, http_response *resp,
                        const route *r, const char *param)
{
    problem p = {0};
    if (r) {
        char seg[300];
        param = r->prefix ? httproute_param(r, param, seg, sizeof seg) : param;
        /* the id rule, once, for every {id} segment: no handler sees another */
        if (r->prefix && !r->free_param && codec_id(param, strlen(param), "id", &p) < 0) {
            http_reply_problem(resp, &p);
            return;
        }
        http_request q = *req;
        q.param = param;
        r->handler(&q, resp);
        return;
    }
    const char *allow = allowed_methods(table, req->path);
    if (allow) {
        problem_set(&p, PB_METHOD_NOT_ALLOWED, NULL, "%s is not allowed on %s; use %s", req->method,
                    req->path, allow);
        resp->allow = allow;
    } else {
        problem_set(&p, PB_NOT_FOUND, NULL,
                    "no resource at this path; see GET /openapi.yaml for the API");
    }
    http_reply_problem(resp, &p);
}

const char *httproute_allow(const route *table, const char *path)
{
    return allowed_methods(table, path);
}

int httproute_index(const route *table, const char *method, const char *path, const route **served,
                    const char **param)
{
    const route *r = httproute_resolve(table, method, path, param);
    *served = r;
    if (r)
        return (int)(r - table);
    const char *other;
    for (int i = 0; table[i].method; i++)
        if (route_match(&table[i], path, &other))
            return i;
    return -1;
}

/* The scope route r needs: none for a compute route with --open-compute. */
static int route_scope(const route *r, int open_compute)
{
    return r->compute && open_compute ? SCOPE_NONE : r->scope;
}

int httproute_scope(const route *table, const route *r, const char *path, int open_compute)
{
    const char *param;
    if (r)
        return route_scope(r, open_compute);
    int scope = -1;
    for (r = table; r->method; r++)
        if (route_match(r, path, &param) && (scope < 0 || route_scope(r, open_compute) < scope))
            scope = route_scope(r, open_compute);
    return scope < 0 ? SCOPE_READ : scope;
}
