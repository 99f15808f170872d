/*
 * httproute.h - the routing table at work (httproute.c): which route serves a request, the
 * Allow header of a path, the API-key scope a request needs, and the call of the route's
 * handler, in a table the transport (http.c) is given (http_config.routes: routes.c's ROUTES,
 * handed down by main.c), so this file names no handler.
 */
#ifndef HTTP_HTTPROUTE_H
#define HTTP_HTTPROUTE_H

#include "http.h"
#include "routes.h"

/* The route of table serving method at path (borrowed from it), or NULL (404 or 405), as
 * *served; *param points into path at a prefix route's segment (its suffix included). HEAD
 * is served as GET (libmicrohttpd sends the headers, Content-Length included, without the
 * body). Returns the index in table of that route, else of the first route at this path (any
 * method), or -1: the index metrics and the request log count by. */
int httproute_index(const route *table, const char *method, const char *path, const route **served,
                    const char **param);

/* The API-key scope a request needs when keys are configured (auth.h). Every method and
 * path has one: r's when a route serves it (HEAD: GET's); for a method no route at the path
 * takes (r NULL, 405), the weakest scope of the path's routes; for a path no route matches
 * (404), a valid key of any scope (SCOPE_READ). So no method or path answers anything, not
 * even 404 or 405, without the key its path asks for, and every keyed request counts against
 * the key's rate limit. open_compute: compute routes need none (--open-compute). */
int httproute_scope(const route *table, const route *r, const char *path, int open_compute);

/* The Allow header of path: the methods routed there, HEAD with GET, and OPTIONS (static
 * storage); NULL when no route matches the path. */
const char *httproute_allow(const route *table, const char *path);

/* The segment of route r's matched path param without r's suffix, into buf (cap bytes). */
const char *httproute_param(const route *r, const char *param, char *buf, size_t cap);

/* Runs r's handler on req into resp, with req->param the segment param (as
 * httproute_index found it) without r's suffix, once it obeys the id rule (codec.h: else
 * 400 here); r NULL answers 405 with Allow when other methods are routed at the path, else
 * 404. Everything is borrowed; resp's body becomes the caller's. */
void httproute_dispatch(const route *table, const http_request *req, http_response *resp,
                        const route *r, const char *param);

#endif
