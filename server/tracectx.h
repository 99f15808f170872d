/*
 * tracectx.h - the W3C Trace Context (level 1, https://www.w3.org/TR/trace-context/) header
 * traceparent, read strictly so that its trace id can be written in the request's log line
 * (reqlog.h). Pure: no I/O.
 *
 * "VERSION-TRACEID-PARENTID-FLAGS" in lowercase hex: version 00 is exactly 55 characters; a
 * higher version (but ff, never valid) is at least 55, its first 55 read as version 00 reads
 * them and then either its end or a '-' (what follows is that version's own and not read).
 * A trace id or parent id of zeros only is invalid. An invalid header is ignored, as the
 * specification says: the request is served as if it had none, never refused.
 */
#ifndef HTTP_TRACECTX_H
#define HTTP_TRACECTX_H

typedef struct {
    char trace_id[33];  /* 32 lowercase hex digits */
    char parent_id[17]; /* 16 lowercase hex digits */
} tracectx;

/* 1 when v (may be NULL) is a valid traceparent, with its ids in *out; else 0 (*out empty
 * strings). */
int tracectx_parse(const char *v, tracectx *out);

#endif
