/*
 * daemonlog.h - the daemon's own log lines on stderr (start-up, signals, the ledger's
 * snapshot failures): one JSON object per line, "ts" first (reqlog_time). The request log
 * is another writer (reqlog.h).
 */
#ifndef HTTP_DAEMONLOG_H
#define HTTP_DAEMONLOG_H

#include <stdint.h>

#include <jansson.h>

#include "../core/ledger/ledger.h"

/* {"ts":..,"level":..,"msg":..,"detail":..}, the detail escaped (cut short, on a whole
 * UTF-8 character, past about 2 KB), written with one write(2) so that it never interleaves
 * with the request threads' lines. All three strings are borrowed. */
void daemonlog_line(const char *level, const char *msg, const char *detail);

/* Writes o compactly, in its keys' order, as one line; fallback (borrowed) when o is NULL or
 * cannot be written. Steals the reference to o. */
void daemonlog_json(json_t *o, const char *fallback);

/* Logs the ledger's snapshot failures newer than *seen (one line for them all, with the last
 * one's detail) and advances *seen. */
void daemonlog_snapshot_failures(ledger *l, uint64_t *seen);

/* The stop begins on signal sig: served on for grace_s (0 after SIGINT), then what is in
 * flight is given up to deadline_s (main.c, drain). */
void daemonlog_stopping(int sig, double grace_s, double deadline_s);

#endif
