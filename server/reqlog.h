/*
 * reqlog.h - the request log: one JSON line per request (reqlog_request, called by http.c
 * when the request is done), and its writer.
 *
 * A line is added to a buffer of the calling thread (an HTTP worker) and written to stderr
 * with the buffer's other lines in one write(2) of whole lines, at most REQLOG_BUF bytes:
 * lines from several threads never interleave (a write of up to PIPE_BUF bytes to a pipe is
 * atomic, and the others append whole). A buffer is written when the next line would not
 * fit, by a flusher thread at most REQLOG_FLUSH_MS after its first line, and by reqlog_stop.
 * So one write per about ten lines under load instead of one per line; the price is that
 * lines reach the log up to REQLOG_FLUSH_MS late, slightly out of order across threads (each
 * carries its own ts), and that a kill -9 loses at most the last REQLOG_FLUSH_MS of request
 * lines (never a ledger change: the log is not the ledger).
 *
 * Thread-safe. Without reqlog_start, reqlog_line writes each line at once.
 */
#ifndef HTTP_REQLOG_H
#define HTTP_REQLOG_H

#include <stddef.h>

#include "routes.h"
#include "tracectx.h"

#define REQLOG_BUF 4096
#define REQLOG_FLUSH_MS 50

/* Starts the flusher thread. 0, or -1 (lines are then written one by one). */
int reqlog_start(void);

/* One whole line (ending in '\n'). */
void reqlog_line(const char *line, size_t n);

/* Writes every buffered line, stops the flusher and frees the buffers; call once nothing
 * calls reqlog_line any more. */
void reqlog_stop(void);

/* Now as RFC 3339 in UTC with milliseconds (2026-01-31T12:00:00.123Z), the "ts" of every
 * JSON log line (the daemon's own too, daemonlog.h); n >= 32, else out is "" or untouched
 * when n is 0. Thread-safe (formats the second once per thread). */
void reqlog_time(char *out, size_t n);

/* The line of one request: its id, method (verb), route (NULL: unmatched; borrowed), status,
 * duration dt in seconds (written as ms to the microsecond, shortest: 0.12, not 0.120), the
 * key's name, whether the client went away before the answer (aborted), and the trace id and
 * parent id of its valid traceparent (trace: NULL or empty ids: none, the fields left out)
 * as "trace_id" and "parent_id". A line that would
 * pass 512 bytes is not written. Whole lines, written in batches per worker (reqlog_line), so
 * no stdio lock is shared by the workers and lines from several threads never interleave. */
void reqlog_request(const char *id, const char *verb, const route *r, int status, double dt,
                    const char *key, int aborted, const tracectx *trace);

#endif
