/*
 * daemonlog.c - the daemon's own JSON log lines (daemonlog.h).
 *
 * May call: reqlog.h (reqlog_time, the one format of "ts"), the ledger's snapshot counters.
 */
#include "daemonlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reqlog.h"

/* One JSON log line: {"ts":..,"level":..,"msg":..,"detail":..}, the detail escaped, written
 * with one write so that it never interleaves with the request threads' lines (stderr is
 * unbuffered: piecewise writes could be split by another thread's line). */
void daemonlog_line(const char *level, const char *msg, const char *detail)
{
    char ts[40], line[2048];
    reqlog_time(ts, sizeof ts);
    int n =
        snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\",\"detail\":\"",
                 ts, level, msg);
    size_t at = n > 0 && (size_t)n < sizeof line ? (size_t)n : 0;
    const size_t room = sizeof line - 4; /* the closing "}\n and the NUL */
    const size_t head = at;
    const unsigned char *c = (const unsigned char *)detail;
    for (; *c && at + 6 <= room; c++) {
        if (*c == '"' || *c == '\\') {
            line[at++] = '\\';
            line[at++] = (char)*c;
        } else if (*c < 0x20) {
            at += (size_t)snprintf(line + at, 7, "\\u%04x", *c);
        } else {
            line[at++] = (char)*c;
        }
    }
    if (*c) { /* cut short: do not leave half a UTF-8 sequence behind */
        while (at > head && ((unsigned char)line[at - 1] & 0xC0) == 0x80)
            at--;
        if (at > head && (unsigned char)line[at - 1] >= 0xC0)
            at--;
    }
    memcpy(line + at, "\"}\n", 3);
    at += 3;
    ssize_t w = write(STDERR_FILENO, line, at);
    (void)w; /* nowhere to report a failed log write */
}

/* Logs the ledger's snapshot failures newer than *seen (one line for them, with the last
 * one's detail). */
void daemonlog_snapshot_failures(ledger *l, uint64_t *seen)
{
    ledger_snapshot_info si;
    ledger_snapshot_stats(l, &si);
    if (si.failed <= *seen)
        return;
    char detail[400];
    snprintf(detail, sizeof detail, "%llu failed since start; the last: %s",
             (unsigned long long)si.failed, si.last_error);
    daemonlog_line(
        "error",
        "ledger snapshot failed: nothing is lost (every change is in the log), but the log "
        "grows and a restart replays it until a snapshot succeeds; free space or fix the "
        "store",
        detail);
    *seen = si.failed;
}

void daemonlog_json(json_t *o, const char *fallback)
{
    char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    fprintf(stderr, "%s\n", line ? line : fallback);
    free(line);
    json_decref(o);
}

void daemonlog_stopping(int sig, double grace_s, double deadline_s)
{
    char ts[40];
    reqlog_time(ts, sizeof ts);
    fprintf(stderr,
            "{\"ts\":\"%s\",\"level\":\"info\",\"msg\":\"stopping\",\"signal\":%d,"
            "\"grace_s\":%.3g,\"deadline_s\":%.3g}\n",
            ts, sig, grace_s, deadline_s);
}
