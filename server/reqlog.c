/*
 * reqlog.c - the request log (reqlog.h): its lines' format, the time stamp of every log line,
 * and the writer, per-thread buffers of whole lines.
 *
 * May call: numfmt.h (numbers written shortest), routes.h (a route's name: data only).
 */
#include "reqlog.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/common/numfmt.h"

typedef struct tbuf {
    pthread_mutex_t mu; /* the owner thread and the flusher */
    size_t n;
    struct tbuf *next; /* in the registry */
    char b[REQLOG_BUF];
} tbuf;

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static tbuf *reg;          /* every thread's buffer (under reg_mu) */
static atomic_int running; /* the flusher runs: lines are buffered */
static int users;          /* reqlog_start calls not yet stopped (under stop_mu) */
static pthread_t flusher;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv = PTHREAD_COND_INITIALIZER;
static int stopping;                    /* under stop_mu */
static _Thread_local tbuf *mine;        /* this thread's buffer, once it logged */
static _Thread_local unsigned mine_gen; /* the start mine belongs to */
static atomic_uint gen;                 /* bumped by every reqlog_start */

/* Writes n bytes to stderr, going on after a short write; gives up if the log is gone. */
static void write_all(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the log is gone: requests are served all the same */
        p += w;
        n -= (size_t)w;
    }
}

/* Caller holds t->mu. */
static void flush_locked(tbuf *t)
{
    if (t->n > 0)
        write_all(t->b, t->n);
    t->n = 0;
}

static void flush_all(void)
{
    pthread_mutex_lock(&reg_mu);
    for (tbuf *t = reg; t; t = t->next) {
        pthread_mutex_lock(&t->mu);
        flush_locked(t);
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_unlock(&reg_mu);
}

static void *flush_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&stop_mu);
    while (!stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += REQLOG_FLUSH_MS / 1000;
        until.tv_nsec += REQLOG_FLUSH_MS % 1000 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&stop_cv, &stop_mu, &until);
        pthread_mutex_unlock(&stop_mu);
        flush_all();
        pthread_mutex_lock(&stop_mu);
    }
    pthread_mutex_unlock(&stop_mu);
    return NULL;
}

int reqlog_start(void)
{
    pthread_mutex_lock(&stop_mu);
    if (users > 0) { /* another server of this process started it */
        users++;
        pthread_mutex_unlock(&stop_mu);
        return 0;
    }
    stopping = 0;
    atomic_fetch_add(&gen, 1);
    if (pthread_create(&flusher, NULL, flush_main, NULL) != 0) {
        pthread_mutex_unlock(&stop_mu);
        return -1;
    }
    users = 1;
    atomic_store(&running, 1);
    pthread_mutex_unlock(&stop_mu);
    return 0;
}

/* This thread's buffer, registered on first use; NULL when out of memory. */
static tbuf *my_buffer(void)
{
    unsigned g = atomic_load(&gen);
    if (mine != NULL && mine_gen == g)
        return mine;
    tbuf *t = malloc(sizeof *t);
    if (t == NULL)
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    t->n = 0;
    pthread_mutex_lock(&reg_mu);
    t->next = reg;
    reg = t;
    pthread_mutex_unlock(&reg_mu);
    mine = t;
    mine_gen = g;
    return t;
}

void reqlog_line(const char *line, size_t n)
{
    tbuf *t = atomic_load(&running) && n <= REQLOG_BUF ? my_buffer() : NULL;
    if (t == NULL) {
        write_all(line, n);
        return;
    }
    pthread_mutex_lock(&t->mu);
    if (t->n + n > REQLOG_BUF)
        flush_locked(t);
    memcpy(t->b + t->n, line, n);
    t->n += n;
    pthread_mutex_unlock(&t->mu);
}

void reqlog_stop(void)
{
    pthread_mutex_lock(&stop_mu);
    if (users == 0 || --users > 0) { /* not started, or another server still logs */
        pthread_mutex_unlock(&stop_mu);
        flush_all();
        return;
    }
    atomic_store(&running, 0);
    stopping = 1;
    pthread_cond_signal(&stop_cv);
    pthread_mutex_unlock(&stop_mu);
    pthread_join(flusher, NULL);
    flush_all();
    pthread_mutex_lock(&reg_mu);
    while (reg) {
        tbuf *t = reg;
        reg = t->next;
        pthread_mutex_destroy(&t->mu);
        free(t);
    }
    pthread_mutex_unlock(&reg_mu);
}

void reqlog_time(char *out, size_t n)
{
    /* the date and time to the second, formatted once a second per thread */
    static _Thread_local time_t sec = (time_t)-1;
    static _Thread_local char day[32];
    static _Thread_local size_t day_len;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    if (t.tv_sec != sec) {
        struct tm tm;
        gmtime_r(&t.tv_sec, &tm);
        day_len = strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
        sec = t.tv_sec;
    }
    if (n < day_len + 6) {
        if (n)
            out[0] = '\0';
        return;
    }
    memcpy(out, day, day_len);
    long ms = t.tv_nsec / 1000000L;
    char *p = out + day_len;
    p[0] = '.';
    p[1] = (char)('0' + ms / 100);
    p[2] = (char)('0' + ms / 10 % 10);
    p[3] = (char)('0' + ms % 10);
    p[4] = 'Z';
    p[5] = '\0';
}

/* A log line assembled by copies into a fixed buffer (formatting it with snprintf was a
 * tenth of a light request's own time); over: it did not fit, and is not written. */
typedef struct {
    char *p, *end;
    int over;
} line_w;

static void lw_put(line_w *w, const char *s, size_t n)
{
    if (w->over || (size_t)(w->end - w->p) < n) {
        w->over = 1;
        return;
    }
    memcpy(w->p, s, n);
    w->p += n;
}

static void lw_str(line_w *w, const char *s)
{
    lw_put(w, s, strlen(s));
}

void reqlog_request(const char *id, const char *verb, const route *r, int status, double dt,
                    const char *key, int aborted, const tracectx *trace)
{
    char ts[40], num[DPB_NUM_MAX], line[512];
    line_w w = {line, line + sizeof line, 0};
    reqlog_time(ts, sizeof ts);
    lw_str(&w, "{\"ts\":\"");
    lw_str(&w, ts);
    lw_str(&w, "\",\"level\":\"info\",\"msg\":\"request\",\"request_id\":\"");
    lw_str(&w, id);
    if (trace && trace->trace_id[0]) { /* lowercase hex only (tracectx_parse) */
        lw_str(&w, "\",\"trace_id\":\"");
        lw_str(&w, trace->trace_id);
        lw_str(&w, "\",\"parent_id\":\"");
        lw_str(&w, trace->parent_id);
    }
    lw_str(&w, "\",\"method\":\"");
    lw_str(&w, verb);
    lw_str(&w, "\",\"route\":\"");
    lw_str(&w, r ? r->path : "unmatched");
    lw_str(&w, r && r->prefix ? "{id}" : "");
    lw_str(&w, r && r->suffix ? r->suffix : "");
    lw_str(&w, "\",\"status\":");
    lw_put(&w, num, dpb_num((double)status, num));
    lw_str(&w, ",\"ms\":");
    lw_put(&w, num, dpb_num(nearbyint(dt * 1e6) / 1e3, num));
    lw_str(&w, ",\"key\":\"");
    lw_str(&w, key);
    lw_str(&w, aborted ? "\",\"aborted\":true}\n" : "\"}\n");
    if (!w.over)
        reqlog_line(line, (size_t)(w.p - line));
}
