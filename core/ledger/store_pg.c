/*
 * store_pg.c - the PostgreSQL store (store.h): the ledger's log and snapshots in tables of one
 * database shared by any number of replicas.
 *
 * Schema (version SCHEMA_VERSION, applied by store_pg_migrate):
 *     dpbudget_schema(version int PRIMARY KEY, applied_at timestamptz)  one row per migration
 *     dpbudget_log(seq bigint PRIMARY KEY, type smallint, payload bytea)  the log, seq 1, 2, ...
 *     dpbudget_snapshot(seq bigint PRIMARY KEY, payload bytea)           the newest 2 kept
 * and, from version 2, the log's Merkle tree (tlog.h, docs/TRANSPARENCY.md):
 *     dpbudget_log.leaf bytea     the record's leaf hash, written with it (NULL: a row of an
 *                                 earlier version); a payload whose hash differs is refused
 *     dpbudget_tree(first_leaf bigint PRIMARY KEY, nodes bytea)   the tree's kept nodes of
 *                                 leaves [first_leaf, first_leaf + TREE_CHUNK), post-order,
 *                                 written with snapshots, so start-up never rehashes the log
 * The log is kept whole (snapshots only shorten start-up; pruning is left for later).
 *
 * SQL relied on (portable: PostgreSQL >= 9.5 and engines speaking its protocol): bigint,
 * smallint, bytea with binary parameters and results, a PRIMARY KEY's unique violation
 * (SQLSTATE 23505) as the arbiter of two replicas appending the same seq, single-statement
 * and BEGIN/COMMIT transactions at READ COMMITTED, INSERT ... ON CONFLICT DO NOTHING,
 * ORDER BY / LIMIT / OFFSET, pg_advisory_xact_lock (migrations only), CREATE TABLE IF NOT
 * EXISTS, SET statement_timeout, pg_total_relation_size (the size figure only). No
 * triggers, no stored procedures, no SERIALIZABLE.
 *
 * Invariants (all under mu):
 *  P1 The queue holds the pending records, seqs durable+1, durable+2, ..., next_seq-1 in
 *     order (after a reset it is empty and next_seq == durable+1).
 *  P2 durable only grows: the highest seq known committed (by this process or, seen by a
 *     catch-up, by another replica).
 *  P3 At most one thread flushes (syncing); it flushes a prefix of the queue in ONE
 *     transaction, so the prefix commits whole or not at all. The queue is cleared, and
 *     next_seq moved, only while no flush is in flight (a failed flush clears it itself;
 *     abandon waits), so a seq in flight is never handed out twice by this process.
 *  P4 Every clearing of the queue bumps gen and records (durable at that moment, why) in
 *     fails[]. A waiter remembers gen when it starts: once gen moved, its records were
 *     dropped unless its upto was already durable then (seqs <= durable are never reused,
 *     seqs after it are). Its answer never claims a dropped record durable.
 * Connections: one for the flusher (flush_conn, used only by the thread holding syncing),
 * at most pool-1 more for catch-ups, snapshots, the probe and the rest (waited for with a
 * timeout). A connection that failed or timed out is closed; the next use reconnects
 * (bounded by connect_timeout), so the store is never failed for good. What the store last
 * saw of the database (pg_health) is kept without a lock for probes; a database gone silent
 * is asked only by the store's probe thread until it answers (every other exchange is
 * refused at once). And this file is the one place a connection string is shown from
 * (store_pg_redact, store_pg_scrub: libpq's reading of it, and what a person meant).
 *
 * May call: libpq, wal.h (only the sync-latency tally, wal_sync_tally, shared with the file
 * store's figures), common/clock. Called by the ledger through store.h.
 */
#include "store.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../common/clock.h"
#include "wal.h"

#define SCHEMA_VERSION 2
/* leaves per row of dpbudget_tree (a power of two) */
#define TREE_CHUNK 4096u
/* pg_advisory_xact_lock's key for migrations: "dpbudget" in ASCII */
#define MIGRATE_LOCK_KEY "7237970109966541940"
/* rows per INSERT statement (3 parameters each; the protocol allows 65535) */
#define ROWS_PER_STMT 1000
/* rows per SELECT page of a replay or catch-up */
#define ROWS_PER_PAGE 1000
/* how many failures a waiter can fall behind and still learn its exact answer (P4) */
#define FAIL_RING 16
/* how old the size figure may get before a catch-up refreshes it */
#define SIZE_REFRESH_S 10

/* PostgreSQL's type oids (pg_type.h) for binary parameters */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT2 21

typedef struct {
    uint64_t seq;
    uint8_t type;
    size_t len;
    unsigned char *payload; /* owned */
    tlog_hash leaf;         /* its leaf hash (dpbudget_log.leaf) */
} pending;

typedef struct {
    uint64_t durable; /* durable when the queue was cleared */
    dpb_status why;   /* DPB_ECONFLICT or DPB_EUNAVAILABLE */
} fail_note;

/* What the store last saw of its database, kept without a lock for probes (store.h,
 * store_health) and for refusing new exchanges at once while the database is silent:
 *  - an exchange is a connection attempt or a statement, from its start to its answer, its
 *    failure or its client-side deadline (statement timeout + connect timeout);
 *  - progress_ns is the database's last sign of life: an exchange ended, bytes moved, or one
 *    started while none was in flight. With exchanges in flight and no sign of life for
 *    STALL_S, the database is silent (frozen, partitioned, out of resources);
 *  - timed_out: an exchange reached its deadline unanswered, and none was answered since.
 * While silent or timed out, new exchanges are refused at once (DPB_EUNAVAILABLE) but the
 * probe's (the store's own thread, prober_main: one SELECT 1 a second when nothing else
 * showed life), so that no caller waits out a deadline the probe already waits out for it. */
#define STALL_S 3.0

typedef struct {
    atomic_int inflight;
    atomic_llong progress_ns;
    atomic_int answered; /* the last exchange that ended was answered (1 before any) */
    atomic_int timed_out;
} pg_health;

typedef struct {
    pg_health *health; /* the store's (NULL: a one-off connection, migrate) */
    char *url;         /* as given, the password included: only for libpq */
    char *safe_url;    /* the url without its password: for messages */
    unsigned connect_timeout_s;
    unsigned statement_timeout_ms;
} pg_cfg;

typedef struct {
    pg_cfg cfg;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pending *q; /* P1 */
    size_t qn, qcap;
    uint64_t next_seq;
    uint64_t durable;
    atomic_uint_fast64_t durable_pub;
    int syncing;
    PGconn *flush_conn; /* the flusher's (only the thread holding syncing touches it) */
    uint64_t gen;       /* P4 */
    fail_note fails[FAIL_RING];
    dpb_error last_err;   /* the newest failure's detail (error()) */
    wal_sync_tally syncs; /* commit latency of the flushes */

    /* the pool of the other connections */
    pthread_mutex_t pmu;
    pthread_cond_t pcv;
    PGconn **idle;
    unsigned nidle;
    unsigned nopen; /* idle + lent + being opened */
    unsigned max_open;

    atomic_uint_fast64_t size_pub;
    atomic_llong size_at; /* dpb_mono_s() seconds of the last refresh (0: never) */

    pg_health health;
    pthread_t prober;
    int prober_started;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    int stopping;

    dpb_tlog *tree; /* the ledger's, from tree_open on (borrowed): chunks kept with snapshots */
    uint64_t tree_chunks; /* dpbudget_tree rows known to be there (from 0) */
} pg_store;

/* ---- small helpers ---- */

static void put_be64(unsigned char *b, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        b[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static uint64_t get_be64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

int store_is_pg_url(const char *s)
{
    return s != NULL &&
           (strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0);
}

/* ---- showing a connection string: no secret, whatever its spelling ----------------------
 *
 * libpq takes a url (scheme://user:password@host/db?key=value&...) or key/value pairs
 * (host=... password=...). Its own reading decides what is a password, but a password a
 * person meant can straddle what libpq reads (an unencoded '/', '@' or '#' in it ends or
 * splits the userinfo; the rest is then read as a host, a port or a database name, and
 * libpq's errors echo those). So what is hidden is a superset of libpq's reading:
 *  - a url: everything from the first ':' after "//" to the LAST '@' of the string (the
 *    userinfo as libpq reads it, up to the first '@' or '/', and whatever a stray '@', '/',
 *    '?' or '#' would have made of the rest of a password), and the value of every query
 *    parameter whose key, percent-decoded and in any case, is password or sslpassword;
 *  - key/value pairs: parsed by libpq itself (PQconninfoParse) and written back with the
 *    secret keys' values as ***; a dbname holding a url or pairs is shown by the same rules;
 *    a string libpq cannot parse is shown only when it holds no "pass" and no '%'.
 * A url over-hidden (an '@' in a query value) shows less than it could, never more. */

/* 1 if the key s[0..n) is, percent-decoded and in any case, password or sslpassword. */
static int secret_key(const char *s, size_t n)
{
    char k[16];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        char ch = s[i];
        if (ch == '%' && i + 2 < n && sscanf(s + i + 1, "%2x", &v) == 1) {
            ch = (char)v;
            i += 2;
        }
        if (o + 1 >= sizeof k)
            return 0;
        k[o++] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    }
    k[o] = '\0';
    return strcmp(k, "password") == 0 || strcmp(k, "sslpassword") == 0;
}

/* A url's hidden userinfo: [*from, *to), or 0 when it has none (no ':' before a last '@'). */
static int url_secret_span(const char *url, size_t *from, size_t *to)
{
    const char *p = strstr(url, "://");
    if (p == NULL)
        return 0;
    const char *start = p + 3, *last_at = strrchr(start, '@');
    if (last_at == NULL)
        return 0;
    const char *colon = memchr(start, ':', (size_t)(last_at - start));
    if (colon == NULL || colon + 1 == last_at)
        return 0; /* no password, or an empty one: nothing to hide */
    *from = (size_t)(colon + 1 - url);
    *to = (size_t)(last_at - url);
    return 1;
}

/* Appends s[0..n) to out (cap bytes, *o used), cut short at the end (NUL kept). */
static void put_n(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *o + 1 < cap; i++)
        out[(*o)++] = s[i];
    out[*o] = '\0';
}

static void redact_any(const char *s, char *out, size_t cap, int depth);

/* A url: the userinfo's password and the secret parameters' values as ***. */
static void redact_url(const char *url, char *out, size_t cap)
{
    size_t o = 0, n = strlen(url), from = 0, to = 0, i = 0;
    if (url_secret_span(url, &from, &to)) {
        put_n(out, cap, &o, url, from);
        put_n(out, cap, &o, "***", 3);
        i = to;
    }
    while (i < n) {
        if (url[i] == '?' || url[i] == '&') {
            size_t k = i + 1, kend = k;
            while (kend < n && url[kend] != '=' && url[kend] != '&')
                kend++;
            if (kend < n && url[kend] == '=' && secret_key(url + k, kend - k)) {
                put_n(out, cap, &o, url + i, kend + 1 - i);
                put_n(out, cap, &o, "***", 3);
                for (i = kend + 1; i < n && url[i] != '&';)
                    i++;
                continue;
            }
        }
        put_n(out, cap, &o, url + i, 1);
        i++;
    }
}

/* key/value pairs as libpq parses them, written back (values quoted as libpq reads them). */
static void redact_pairs(const char *s, char *out, size_t cap, int depth)
{
    size_t o = 0;
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(s, &errmsg);
    PQfreemem(errmsg); /* libpq's message may quote a token of the string: never shown */
    if (opts == NULL) {
        int plain = strchr(s, '%') == NULL;
        for (const char *p = s; plain && *p; p++)
            if (strncasecmp(p, "pass", 4) == 0)
                plain = 0;
        put_n(out, cap, &o, plain ? s : "(a connection string libpq cannot parse: not shown)",
              strlen(plain ? s : "(a connection string libpq cannot parse: not shown)"));
        return;
    }
    for (PQconninfoOption *k = opts; k->keyword != NULL; k++) {
        if (k->val == NULL)
            continue;
        if (o > 0)
            put_n(out, cap, &o, " ", 1);
        put_n(out, cap, &o, k->keyword, strlen(k->keyword));
        put_n(out, cap, &o, "=", 1);
        if (secret_key(k->keyword, strlen(k->keyword))) {
            put_n(out, cap, &o, "***", 3);
            continue;
        }
        char inner[1024];
        const char *v = k->val;
        if (depth == 0 && (strstr(v, "://") != NULL || strchr(v, '=') != NULL)) {
            redact_any(v, inner, sizeof inner, depth + 1);
            v = inner;
        }
        int quote = v[0] == '\0' || strpbrk(v, " \t\n\r\f\v'\\") != NULL;
        if (quote)
            put_n(out, cap, &o, "'", 1);
        for (const char *p = v; *p; p++) {
            if (*p == '\'' || *p == '\\')
                put_n(out, cap, &o, "\\", 1);
            put_n(out, cap, &o, p, 1);
        }
        if (quote)
            put_n(out, cap, &o, "'", 1);
    }
    PQconninfoFree(opts);
}

static void redact_any(const char *s, char *out, size_t cap, int depth)
{
    out[0] = '\0';
    if (strstr(s, "://") != NULL)
        redact_url(s, out, cap);
    else if (strchr(s, '=') != NULL)
        redact_pairs(s, out, cap, depth);
    else {
        size_t o = 0;
        put_n(out, cap, &o, s, strlen(s)); /* a path, or a word: nothing of libpq's */
    }
}

void store_pg_redact(const char *conninfo, char *out, size_t cap)
{
    if (cap == 0)
        return;
    redact_any(conninfo != NULL ? conninfo : "", out, cap, 0);
}

/* Replace in text (in place) every occurrence of s[0..n) by "***" (a fragment shorter than 3
 * bytes: as many '*'), text shrinking or keeping its length. */
static void scrub_n(char *text, const char *s, size_t n)
{
    if (n == 0)
        return;
    size_t r = n < 3 ? n : 3;
    for (char *p = text; *p != '\0';) {
        if (strncmp(p, s, n) != 0) {
            p++;
            continue;
        }
        memset(p, '*', r);
        memmove(p + r, p + n, strlen(p + n) + 1);
        p += r;
    }
}

/* s[0..n) scrubbed as it is, percent-decoded, and each of its pieces between the characters
 * that end a url's parts (what libpq makes of a password it splits: a host, a port, a
 * database name, a parameter) that is at least 3 bytes long. */
static void scrub_fragment(char *text, const char *s, size_t n)
{
    char dec[512];
    size_t d = 0;
    for (size_t i = 0; i < n && d + 1 < sizeof dec; i++) {
        unsigned v;
        if (s[i] == '%' && i + 2 < n && sscanf(s + i + 1, "%2x", &v) == 1) {
            dec[d++] = (char)v;
            i += 2;
        } else {
            dec[d++] = s[i];
        }
    }
    dec[d] = '\0';
    scrub_n(text, s, n);
    scrub_n(text, dec, d);
    for (const char *src = s, *end = s + n; src < end;) {
        size_t k = strcspn(src, "/@:?&=,#%");
        if (src + k > end)
            k = (size_t)(end - src);
        if (k >= 3) {
            scrub_n(text, src, k);
        } else if (k > 0) { /* short: only where libpq quotes it whole ("pa" as a port) */
            char q[8];
            snprintf(q, sizeof q, "\"%.*s\"", (int)k, src);
            scrub_n(text, q, k + 2);
        }
        src += k + 1;
    }
}

void store_pg_scrub(char *text, const char *conninfo)
{
    if (text == NULL || conninfo == NULL)
        return;
    size_t from = 0, to = 0, n = strlen(conninfo);
    if (strstr(conninfo, "://") != NULL) {
        if (url_secret_span(conninfo, &from, &to))
            scrub_fragment(text, conninfo + from, to - from);
        for (size_t i = to; i < n; i++) {
            if (conninfo[i] != '?' && conninfo[i] != '&')
                continue;
            size_t k = i + 1, kend = k;
            while (kend < n && conninfo[kend] != '=' && conninfo[kend] != '&')
                kend++;
            if (kend < n && conninfo[kend] == '=' && secret_key(conninfo + k, kend - k)) {
                size_t v = kend + 1, vend = v;
                while (vend < n && conninfo[vend] != '&')
                    vend++;
                scrub_fragment(text, conninfo + v, vend - v);
            }
        }
        return;
    }
    /* key/value pairs: libpq's own values of the secret keys, and leniently (a string libpq
     * cannot parse, whose errors quote its tokens) every token after a secret key's '=' up
     * to the next token holding '=' */
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &errmsg);
    PQfreemem(errmsg);
    for (PQconninfoOption *k = opts; k != NULL && k->keyword != NULL; k++) {
        if (k->val != NULL && secret_key(k->keyword, strlen(k->keyword)))
            scrub_fragment(text, k->val, strlen(k->val));
        else if (k->val != NULL && strstr(k->val, "://") != NULL)
            store_pg_scrub(text, k->val);
    }
    PQconninfoFree(opts);
    for (size_t i = 0; i < n; i++) {
        size_t kend = i;
        while (kend < n && conninfo[kend] != '=' && conninfo[kend] != ' ')
            kend++;
        size_t eq = kend;
        while (eq < n && conninfo[eq] == ' ')
            eq++;
        if (eq >= n || conninfo[eq] != '=' || !secret_key(conninfo + i, kend - i)) {
            while (i < n && conninfo[i] != ' ')
                i++;
            continue;
        }
        size_t v = eq + 1;
        while (v < n && conninfo[v] == ' ')
            v++;
        size_t vend = v;
        for (;;) { /* tokens up to the next one holding '=' */
            size_t t = vend;
            while (t < n && conninfo[t] == ' ')
                t++;
            size_t tend = t;
            while (tend < n && conninfo[tend] != ' ')
                tend++;
            if (t >= n || (vend > v && memchr(conninfo + t, '=', tend - t) != NULL))
                break;
            if (tend - t > 0) {
                char tok[512];
                size_t m = tend - t < sizeof tok ? tend - t : sizeof tok - 1;
                memcpy(tok, conninfo + t, m);
                tok[m] = '\0';
                char *q = tok;
                size_t ql = m;
                while (ql > 0 && (q[0] == '\'' || q[0] == '\\'))
                    q++, ql--;
                while (ql > 0 && (q[ql - 1] == '\'' || q[ql - 1] == '\\'))
                    ql--;
                scrub_fragment(text, q, ql);
            }
            vend = tend;
        }
        i = vend;
    }
}

static dpb_status cfg_init(pg_cfg *c, const char *url, const store_pg_options *o, dpb_error *err)
{
    memset(c, 0, sizeof *c);
    if (!store_is_pg_url(url))
        return dpb_fail(err, DPB_EINVAL, "ledger_url",
                        "not a PostgreSQL url (postgresql://user@host:port/database)");
    c->connect_timeout_s = o != NULL && o->connect_timeout_s > 0 ? o->connect_timeout_s : 5;
    c->statement_timeout_ms =
        o != NULL && o->statement_timeout_ms > 0 ? o->statement_timeout_ms : 10000;
    c->url = dup_str(url);
    size_t cap = strlen(url) + 64;
    c->safe_url = malloc(cap);
    if (c->safe_url != NULL)
        store_pg_redact(url, c->safe_url, cap);
    if (c->url == NULL || c->safe_url == NULL) {
        free(c->url);
        free(c->safe_url);
        return dpb_fail(err, DPB_ENOMEM, NULL, "no memory for the ledger url");
    }
    return DPB_OK;
}

static void cfg_release(pg_cfg *c)
{
    free(c->url);
    free(c->safe_url);
}

/* libpq's message without its trailing newline, into buf, without any part of c's secrets
 * (libpq's errors may quote a token of the connection string: a host or port made of a
 * password's piece, a malformed parameter). */
static const char *msg_of(const pg_cfg *c, const char *m, char *buf, size_t n)
{
    /* scrubbed whole before it is cut to buf: a secret cut in two would not be found */
    char *whole = dup_str(m != NULL && m[0] != '\0' ? m : "no message");
    if (whole != NULL)
        store_pg_scrub(whole, c->url);
    snprintf(buf, n, "%s", whole != NULL ? whole : "(no memory for the message)");
    free(whole);
    size_t l = strlen(buf);
    while (l > 0 && (buf[l - 1] == '\n' || buf[l - 1] == ' '))
        buf[--l] = '\0';
    /* one line: newlines and tabs become spaces, runs of spaces one */
    size_t o = 0;
    for (size_t i = 0; buf[i] != '\0'; i++) {
        char ch = buf[i] == '\n' || buf[i] == '\t' ? ' ' : buf[i];
        if (ch == ' ' && o > 0 && buf[o - 1] == ' ')
            continue;
        buf[o++] = ch;
    }
    buf[o] = '\0';
    return buf;
}

/* ---- exchanges: what the store saw of the database (pg_health) ---- */

/* 1 on the probe's thread: its exchanges are never refused. */
static _Thread_local int probing;

static long long now_ns(void)
{
    return (long long)dpb_mono_ns();
}

/* 1 when new exchanges are refused (silent for STALL_S, or timed out and not answered since);
 * *silent_s: how long exchanges have waited without a sign of life (0: none waiting). */
static int health_refusing(pg_health *h, double *silent_s)
{
    double silent = 0.0;
    if (atomic_load(&h->inflight) > 0)
        silent = (double)(now_ns() - atomic_load(&h->progress_ns)) / 1e9;
    if (silent_s != NULL)
        *silent_s = silent > 0.0 ? silent : 0.0;
    return silent > STALL_S || atomic_load(&h->timed_out);
}

/* The start of an exchange: 0, or -1 (refused at once, why says so). */
static int ex_begin(const pg_cfg *c, char *why, size_t whyn)
{
    pg_health *h = c->health;
    if (h == NULL)
        return 0;
    double silent = 0.0;
    if (!probing && health_refusing(h, &silent)) {
        if (atomic_load(&h->timed_out))
            snprintf(why, whyn,
                     "the database did not answer within the statement timeout and has not "
                     "answered since (probed every second): not asked again until it does");
        else
            snprintf(why, whyn,
                     "the database has not answered for %.1f s (probed every second): not asked "
                     "again until it does",
                     silent);
        return -1;
    }
    if (atomic_fetch_add(&h->inflight, 1) == 0)
        atomic_store(&h->progress_ns, now_ns());
    return 0;
}

/* Bytes moved: the database is alive. */
static void ex_progress(const pg_cfg *c)
{
    if (c->health != NULL)
        atomic_store(&c->health->progress_ns, now_ns());
}

/* The end of an exchange begun: answered (1), failed (0: refused, reset...) or timed out (-1). */
static void ex_end(const pg_cfg *c, int outcome)
{
    pg_health *h = c->health;
    if (h == NULL)
        return;
    if (outcome >= 0)
        atomic_store(&h->progress_ns, now_ns());
    atomic_store(&h->answered, outcome > 0);
    if (outcome > 0)
        atomic_store(&h->timed_out, 0);
    else if (outcome < 0)
        atomic_store(&h->timed_out, 1);
    atomic_fetch_sub(&h->inflight, 1);
}

/* ---- one connection ---- */

/* The server's notices and warnings ("relation already exists, skipping", "terminating
 * connection due to ...") are not the daemon's to print: failures reach err. */
static void no_notice(void *arg, const char *msg)
{
    (void)arg, (void)msg;
}

static PGconn *pg_connect(const pg_cfg *c, dpb_error *err)
{
    char ct[16];
    snprintf(ct, sizeof ct, "%u", c->connect_timeout_s);
    /* dbname (the url) first: the keywords after it override what the url says */
    const char *const keys[] = {"dbname",
                                "connect_timeout",
                                "keepalives",
                                "keepalives_idle",
                                "keepalives_interval",
                                "keepalives_count",
                                "application_name",
                                NULL};
    const char *const vals[] = {c->url, ct, "1", "10", "5", "3", "dpbudgetd", NULL};
    char m[256];
    if (ex_begin(c, m, sizeof m) != 0) {
        dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL at %s: %s", c->safe_url, m);
        return NULL;
    }
    double t0 = dpb_mono_s();
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    int ok = conn != NULL && PQstatus(conn) == CONNECTION_OK;
    /* a connection that failed only at its timeout: the database is silent, not refusing */
    ex_end(c, ok ? 1 : dpb_mono_s() - t0 >= (double)c->connect_timeout_s - 0.25 ? -1 : 0);
    if (conn == NULL) {
        dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL at %s: no memory to connect",
                 c->safe_url);
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL at %s: cannot connect: %s",
                 c->safe_url, msg_of(c, PQerrorMessage(conn), m, sizeof m));
        PQfinish(conn);
        return NULL;
    }
    PQsetNoticeProcessor(conn, no_notice, NULL);
    if (PQsetnonblocking(conn, 1) != 0) {
        dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL at %s: %s", c->safe_url,
                 msg_of(c, PQerrorMessage(conn), m, sizeof m));
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

/* Wait until sock is ready for ev or the deadline (seconds, dpb_mono_s) passes:
 * 1 ready, 0 timed out, -1 error. */
static int wait_sock(int sock, short ev, double deadline)
{
    for (;;) {
        double left = deadline - dpb_mono_s();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = sock, .events = ev, .revents = 0};
        int r = poll(&p, 1, (int)(left * 1000.0) + 1);
        if (r > 0)
            return 1;
        if (r == 0)
            continue;
        if (errno != EINTR)
            return -1;
    }
}

/*
 * Run one statement with binary parameters (n of them; types may be NULL) and results in
 * resfmt (1 binary), bounded on the client side too: the server's statement_timeout cannot
 * help when the server stops answering, so the whole exchange must end within the statement
 * timeout plus the connect timeout. NULL: the connection failed or timed out (*why says
 * which, and *late whether it was the deadline); otherwise the last result of the statement
 * (the caller PQclears it).
 */
static PGresult *run_exchange(PGconn *conn, const pg_cfg *c, const char *sql, int n,
                              const Oid *types, const char *const *vals, const int *lens,
                              const int *fmts, int resfmt, char *why, size_t whyn, int *late)
{
    double deadline =
        dpb_mono_s() + (double)c->statement_timeout_ms / 1000.0 + c->connect_timeout_s;
    char m[256];
    if (!PQsendQueryParams(conn, sql, n, types, vals, lens, fmts, resfmt)) {
        snprintf(why, whyn, "%s", msg_of(c, PQerrorMessage(conn), m, sizeof m));
        return NULL;
    }
    int sock = PQsocket(conn);
    for (;;) {
        int f = PQflush(conn);
        if (f == 0)
            break;
        int w = f < 0 ? -1 : wait_sock(sock, POLLIN | POLLOUT, deadline);
        *late = w == 0;
        if (w <= 0) {
            snprintf(why, whyn, "%s",
                     w == 0 ? "no answer within the statement timeout"
                            : msg_of(c, PQerrorMessage(conn), m, sizeof m));
            return NULL;
        }
        if (!PQconsumeInput(conn)) {
            snprintf(why, whyn, "%s", msg_of(c, PQerrorMessage(conn), m, sizeof m));
            return NULL;
        }
        ex_progress(c);
    }
    PGresult *keep = NULL;
    for (;;) {
        while (PQisBusy(conn)) {
            int w = wait_sock(sock, POLLIN, deadline);
            *late = w == 0;
            if (w > 0)
                ex_progress(c);
            if (w <= 0 || !PQconsumeInput(conn)) {
                snprintf(why, whyn, "%s",
                         w == 0 ? "no answer within the statement timeout"
                                : msg_of(c, PQerrorMessage(conn), m, sizeof m));
                PQclear(keep);
                return NULL;
            }
        }
        PGresult *r = PQgetResult(conn);
        if (r == NULL)
            break;
        /* keep the first error, else the last result */
        if (keep != NULL && PQresultStatus(keep) == PGRES_FATAL_ERROR) {
            PQclear(r);
        } else {
            PQclear(keep);
            keep = r;
        }
    }
    if (keep == NULL)
        snprintf(why, whyn, "%s", msg_of(c, PQerrorMessage(conn), m, sizeof m));
    return keep;
}

/* run_exchange as one exchange (pg_health): refused at once while the database is silent. */
static PGresult *run(PGconn *conn, const pg_cfg *c, const char *sql, int n, const Oid *types,
                     const char *const *vals, const int *lens, const int *fmts, int resfmt,
                     char *why, size_t whyn)
{
    if (ex_begin(c, why, whyn) != 0)
        return NULL;
    int late = 0;
    PGresult *r = run_exchange(conn, c, sql, n, types, vals, lens, fmts, resfmt, why, whyn, &late);
    ex_end(c, r != NULL ? 1 : late ? -1 : 0);
    return r;
}

static int sqlstate_is(const PGresult *r, const char *code)
{
    const char *s = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return s != NULL && strcmp(s, code) == 0;
}

/*
 * The status of a statement's result r (NULL: see why): DPB_OK; DPB_ECONFLICT for a unique
 * violation (23505: another replica has this seq), a serialization failure (40001) or a
 * deadlock (40P01): the change is computed again; DPB_EUNAVAILABLE for anything else (the
 * connection failed, timed out, the server shuts down, is in recovery or out of space...):
 * *reset then says the connection must be closed (its state is unknown). err gets what
 * failed (the step, the server's message and SQLSTATE).
 */
static dpb_status judge(PGconn *conn, const PGresult *r, ExecStatusType want, const pg_cfg *c,
                        const char *step, const char *why, int *reset, dpb_error *err)
{
    if (r != NULL && PQresultStatus(r) == want)
        return DPB_OK;
    char m[200];
    if (r == NULL) {
        *reset = 1;
        return dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL at %s: %s: %s",
                        c->safe_url, step, why);
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    msg_of(c,
           PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) != NULL
               ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
               : PQresultErrorMessage(r),
           m, sizeof m);
    if (sqlstate_is(r, "23505") || sqlstate_is(r, "40001") || sqlstate_is(r, "40P01")) {
        *reset = PQstatus(conn) != CONNECTION_OK;
        return dpb_fail(err, DPB_ECONFLICT, NULL, "PostgreSQL at %s: %s: %s (SQLSTATE %s)",
                        c->safe_url, step, m, state);
    }
    *reset = 1;
    return dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url", "PostgreSQL at %s: %s: %s (SQLSTATE %s)",
                    c->safe_url, step, m, state != NULL ? state : "none");
}

/* A statement without parameters whose result is checked against want. */
static dpb_status exec0(PGconn *conn, const pg_cfg *c, const char *sql, ExecStatusType want,
                        const char *step, int *reset, dpb_error *err)
{
    char why[256];
    PGresult *r = run(conn, c, sql, 0, NULL, NULL, NULL, NULL, 0, why, sizeof why);
    dpb_status st = judge(conn, r, want, c, step, why, reset, err);
    PQclear(r);
    return st;
}

/* 1 if an idle connection can take a statement: a server that restarted or ended the
 * session meanwhile has sent its last words (an error or warning, handled as a notice while
 * idle) and closed the socket, which two non-blocking reads notice now (the first takes the
 * words, the second the end), rather than the next statement failing with it. */
static int conn_alive(PGconn *conn)
{
    for (int i = 0; i < 2; i++) {
        if (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE ||
            !PQconsumeInput(conn) || PQisBusy(conn))
            return 0;
    }
    return PQstatus(conn) == CONNECTION_OK;
}

/* A new connection with the statement timeout set. */
static PGconn *open_conn(const pg_cfg *c, dpb_error *err)
{
    PGconn *conn = pg_connect(c, err);
    if (conn == NULL)
        return NULL;
    /* the statement timeout; and a commit acknowledged only once durable on the server:
     * synchronous_commit = off (a server or url default) would acknowledge commits a crash
     * then loses, so it becomes on (local and the remote_* levels are kept) */
    char sql[224];
    int reset = 0;
    snprintf(sql, sizeof sql,
             "SELECT set_config('statement_timeout', '%u', false), CASE WHEN "
             "current_setting('synchronous_commit') = 'off' THEN "
             "set_config('synchronous_commit', 'on', false) END",
             c->statement_timeout_ms);
    if (exec0(conn, c, sql, PGRES_TUPLES_OK, "setting statement_timeout", &reset, err) != DPB_OK) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

/* ---- migrations ---- */

/* Migration v is the statements MIGRATIONS[v - 1] (NULL-terminated), applied in the
 * transaction holding the advisory lock. Append only: a released migration never changes. */
static const char *const MIGRATIONS[SCHEMA_VERSION][4] = {
    /* 1: the log and the snapshots */
    {"CREATE TABLE dpbudget_log (seq bigint PRIMARY KEY CHECK (seq > 0), "
     "type smallint NOT NULL, payload bytea NOT NULL)",
     "CREATE TABLE dpbudget_snapshot (seq bigint PRIMARY KEY CHECK (seq >= 0), "
     "payload bytea NOT NULL)",
     NULL},
    /* 2: the log's Merkle tree */
    {"ALTER TABLE dpbudget_log ADD COLUMN leaf bytea",
     "CREATE TABLE dpbudget_tree (first_leaf bigint PRIMARY KEY CHECK (first_leaf >= 0), "
     "nodes bytea NOT NULL)",
     NULL},
};

static dpb_status migrate_on(PGconn *conn, const pg_cfg *c, int *from, int *to, dpb_error *err)
{
    int reset = 0, found = 0;
    char why[256];
    dpb_status st = exec0(conn, c, "BEGIN", PGRES_COMMAND_OK, "migration: BEGIN", &reset, err);
    if (st != DPB_OK)
        return st;
    /* several replicas starting at once: each waits here for the one migrating */
    st = exec0(conn, c, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")", PGRES_TUPLES_OK,
               "migration: pg_advisory_xact_lock", &reset, err);
    if (st == DPB_OK)
        st = exec0(conn, c,
                   "CREATE TABLE IF NOT EXISTS dpbudget_schema (version int PRIMARY KEY, "
                   "applied_at timestamptz NOT NULL DEFAULT now())",
                   PGRES_COMMAND_OK, "migration: creating dpbudget_schema", &reset, err);
    if (st == DPB_OK) {
        PGresult *r = run(conn, c, "SELECT coalesce(max(version), 0) FROM dpbudget_schema", 0, NULL,
                          NULL, NULL, NULL, 0, why, sizeof why);
        st = judge(conn, r, PGRES_TUPLES_OK, c, "migration: reading dpbudget_schema", why, &reset,
                   err);
        if (st == DPB_OK)
            found = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    if (st == DPB_OK && found > SCHEMA_VERSION)
        st = dpb_fail(err, DPB_ECORRUPT, "ledger_url",
                      "PostgreSQL at %s: the ledger schema is version %d, this dpbudgetd knows "
                      "versions up to %d: run a newer dpbudgetd (or use another database)",
                      c->safe_url, found, SCHEMA_VERSION);
    for (int v = found + 1; st == DPB_OK && v <= SCHEMA_VERSION; v++) {
        char step[64], sql[96];
        snprintf(step, sizeof step, "migration %d", v);
        for (int k = 0; st == DPB_OK && MIGRATIONS[v - 1][k] != NULL; k++)
            st = exec0(conn, c, MIGRATIONS[v - 1][k], PGRES_COMMAND_OK, step, &reset, err);
        snprintf(sql, sizeof sql, "INSERT INTO dpbudget_schema (version) VALUES (%d)", v);
        if (st == DPB_OK)
            st = exec0(conn, c, sql, PGRES_COMMAND_OK, step, &reset, err);
    }
    if (st == DPB_OK)
        st = exec0(conn, c, "COMMIT", PGRES_COMMAND_OK, "migration: COMMIT", &reset, err);
    else if (!reset)
        (void)exec0(conn, c, "ROLLBACK", PGRES_COMMAND_OK, "migration: ROLLBACK", &reset, NULL);
    if (st == DPB_OK) {
        if (from != NULL)
            *from = found;
        if (to != NULL)
            *to = found > SCHEMA_VERSION ? found : SCHEMA_VERSION;
    }
    return st;
}

dpb_status store_pg_migrate(const char *url, const store_pg_options *o, int *from, int *to,
                            dpb_error *err)
{
    pg_cfg c;
    dpb_status st = cfg_init(&c, url, o, err);
    if (st != DPB_OK)
        return st;
    PGconn *conn = open_conn(&c, err);
    if (conn == NULL) {
        st = err != NULL && err->status != DPB_OK ? err->status : DPB_EUNAVAILABLE;
    } else {
        st = migrate_on(conn, &c, from, to, err);
        PQfinish(conn);
    }
    cfg_release(&c);
    return st;
}

/* ---- the pool (every connection but the flusher's) ---- */

/* A new connection for a place already counted in nopen (the pool's mutex not held); if
 * it cannot be opened, the place is given back and a waiter woken. NULL then (err says why). */
static PGconn *pool_open(pg_store *p, dpb_error *err)
{
    PGconn *conn = open_conn(&p->cfg, err);
    if (conn == NULL) {
        pthread_mutex_lock(&p->pmu);
        p->nopen--;
        pthread_cond_signal(&p->pcv);
        pthread_mutex_unlock(&p->pmu);
    }
    return conn;
}

static PGconn *pool_get(pg_store *p, dpb_error *err)
{
    double deadline = dpb_mono_s() + (double)p->cfg.statement_timeout_ms / 1000.0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double left = deadline - dpb_mono_s();
    ts.tv_sec += (time_t)left;
    ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->pmu);
    for (;;) {
        if (p->nidle > 0) {
            PGconn *conn = p->idle[--p->nidle];
            pthread_mutex_unlock(&p->pmu);
            if (conn_alive(conn))
                return conn;
            PQfinish(conn); /* dead while idle: open another in its place */
            return pool_open(p, err);
        }
        if (p->nopen < p->max_open) {
            p->nopen++;
            pthread_mutex_unlock(&p->pmu);
            return pool_open(p, err);
        }
        if (pthread_cond_timedwait(&p->pcv, &p->pmu, &ts) != 0 && p->nidle == 0 &&
            p->nopen >= p->max_open) {
            pthread_mutex_unlock(&p->pmu);
            dpb_fail(err, DPB_EUNAVAILABLE, "ledger_url",
                     "PostgreSQL at %s: all %u connections of the pool stayed busy for %u ms",
                     p->cfg.safe_url, p->max_open, p->cfg.statement_timeout_ms);
            return NULL;
        }
    }
}

/* Give conn back; bad (1: its state is unknown) closes it. */
static void pool_put(pg_store *p, PGconn *conn, int bad)
{
    if (bad || PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE) {
        PQfinish(conn);
        conn = NULL;
    }
    pthread_mutex_lock(&p->pmu);
    if (conn == NULL)
        p->nopen--;
    else
        p->idle[p->nidle++] = conn;
    pthread_cond_signal(&p->pcv);
    pthread_mutex_unlock(&p->pmu);
}

/* ---- the store's operations ---- */

static pg_store *impl(const ledger_store *s)
{
    return (pg_store *)s->impl;
}

static void note_error_locked(pg_store *p, const dpb_error *e)
{
    p->last_err = *e;
}

static void note_error(pg_store *p, const dpb_error *e)
{
    pthread_mutex_lock(&p->mu);
    note_error_locked(p, e);
    pthread_mutex_unlock(&p->mu);
}

/* A pooled connection (*conn), or the store's error noted and returned (*err filled). */
static dpb_status pool_get_or_fail(pg_store *p, PGconn **conn, dpb_error *err)
{
    dpb_error e = {0};
    *conn = pool_get(p, &e);
    if (*conn != NULL)
        return DPB_OK;
    note_error(p, &e);
    return dpb_fail(err, e.status, e.field, "%s", e.detail);
}

static void refresh_size(pg_store *p, PGconn *conn)
{
    char why[128];
    PGresult *r = run(conn, &p->cfg,
                      "SELECT pg_total_relation_size('dpbudget_log') + "
                      "pg_total_relation_size('dpbudget_snapshot')",
                      0, NULL, NULL, NULL, NULL, 0, why, sizeof why);
    if (r != NULL && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        atomic_store(&p->size_pub, strtoull(PQgetvalue(r, 0, 0), NULL, 10));
        atomic_store(&p->size_at, (long long)dpb_mono_s());
    }
    PQclear(r);
}

static dpb_status pg_load_snapshot(ledger_store *s, uint64_t *seq, void **data, size_t *len,
                                   dpb_error *err)
{
    pg_store *p = impl(s);
    *seq = 0;
    *data = NULL;
    *len = 0;
    dpb_error e = {0};
    PGconn *conn = NULL;
    dpb_status got = pool_get_or_fail(p, &conn, err);
    if (got != DPB_OK)
        return got;
    char why[256];
    int reset = 0;
    PGresult *r =
        run(conn, &p->cfg, "SELECT seq, payload FROM dpbudget_snapshot ORDER BY seq DESC LIMIT 1",
            0, NULL, NULL, NULL, NULL, 1, why, sizeof why);
    dpb_status st =
        judge(conn, r, PGRES_TUPLES_OK, &p->cfg, "reading the newest snapshot", why, &reset, &e);
    if (st == DPB_OK && PQntuples(r) == 1) {
        if (PQgetlength(r, 0, 0) != 8) {
            st = dpb_fail(&e, DPB_ECORRUPT, "ledger_url",
                          "PostgreSQL at %s: dpbudget_snapshot.seq is not a bigint",
                          p->cfg.safe_url);
        } else {
            size_t n = (size_t)PQgetlength(r, 0, 1);
            void *d = malloc(n > 0 ? n : 1);
            if (d == NULL) {
                st = dpb_fail(&e, DPB_ENOMEM, NULL, "no memory for a %zu-byte snapshot", n);
            } else {
                memcpy(d, PQgetvalue(r, 0, 1), n);
                *seq = get_be64((const unsigned char *)PQgetvalue(r, 0, 0));
                *data = d;
                *len = n;
            }
        }
    }
    PQclear(r);
    pool_put(p, conn, reset);
    if (st != DPB_OK) {
        note_error(p, &e);
        return dpb_fail(err, e.status, e.field, "%s", e.detail);
    }
    return DPB_OK;
}

/*
 * fn for every record with seq > after_seq, in pages, checking that they follow each other
 * with no gap (a gap is damage: DPB_ECORRUPT); *last: the last seq seen (after_seq if none).
 * Then, with nothing pending, durable and the append position move up to it.
 */
/* Row i of a log page (seq, type, payload, leaf) is the record its leaf column says. */
static int leaf_holds(const PGresult *r, int i, uint64_t seq, uint8_t type)
{
    tlog_hash h;
    tlog_leaf_hash(type, seq, PQgetvalue(r, i, 2), (size_t)PQgetlength(r, i, 2), h);
    return PQgetlength(r, i, 3) == TLOG_HASH_BYTES &&
           memcmp(PQgetvalue(r, i, 3), h, TLOG_HASH_BYTES) == 0;
}

static dpb_status read_log(pg_store *p, uint64_t after_seq, uint64_t upto, store_record_fn fn,
                           void *ctx, uint64_t *last, const char *what, dpb_error *err)
{
    dpb_error e = {0};
    PGconn *conn = NULL;
    dpb_status got = pool_get_or_fail(p, &conn, err);
    if (got != DPB_OK)
        return got;
    uint64_t at = after_seq;
    dpb_status st = DPB_OK;
    int reset = 0;
    for (;;) {
        unsigned char after_b[8], upto_b[8];
        put_be64(after_b, at);
        put_be64(upto_b, upto > INT64_MAX ? INT64_MAX : upto);
        const Oid types[2] = {OID_INT8, OID_INT8};
        const char *vals[2] = {(const char *)after_b, (const char *)upto_b};
        const int lens[2] = {8, 8}, fmts[2] = {1, 1};
        char why[256], sql[160];
        snprintf(sql, sizeof sql,
                 "SELECT seq, type, payload, leaf FROM dpbudget_log WHERE seq > $1 AND seq <= $2 "
                 "ORDER BY seq LIMIT %d",
                 ROWS_PER_PAGE);
        PGresult *r = run(conn, &p->cfg, sql, 2, types, vals, lens, fmts, 1, why, sizeof why);
        st = judge(conn, r, PGRES_TUPLES_OK, &p->cfg, what, why, &reset, &e);
        int rows = st == DPB_OK ? PQntuples(r) : 0;
        for (int i = 0; i < rows && st == DPB_OK; i++) {
            if (PQgetlength(r, i, 0) != 8 || PQgetlength(r, i, 1) != 2) {
                st = dpb_fail(&e, DPB_ECORRUPT, "ledger_url",
                              "PostgreSQL at %s: dpbudget_log has columns of unexpected types",
                              p->cfg.safe_url);
                break;
            }
            uint64_t seq = get_be64((const unsigned char *)PQgetvalue(r, i, 0));
            const unsigned char *tb = (const unsigned char *)PQgetvalue(r, i, 1);
            unsigned type = (unsigned)tb[0] << 8 | tb[1];
            if (seq != at + 1) {
                st = dpb_fail(&e, DPB_ECORRUPT, "ledger_url",
                              "PostgreSQL at %s: dpbudget_log has no record %llu (the next "
                              "one is %llu): the log has a gap",
                              p->cfg.safe_url, (unsigned long long)(at + 1),
                              (unsigned long long)seq);
                break;
            }
            if (type > 255) {
                st = dpb_fail(&e, DPB_ECORRUPT, "ledger_url",
                              "PostgreSQL at %s: dpbudget_log record %llu has type %u",
                              p->cfg.safe_url, (unsigned long long)seq, type);
                break;
            }
            if (!PQgetisnull(r, i, 3) && !leaf_holds(r, i, seq, (uint8_t)type)) {
                st = dpb_fail(&e, DPB_ECORRUPT, "ledger_url",
                              "PostgreSQL at %s: dpbudget_log record seq %llu (%s, leaf %llu) is "
                              "not the record the ledger logged: its hash differs from its leaf "
                              "column (the row was changed after it was written); refusing it",
                              p->cfg.safe_url, (unsigned long long)seq,
                              tlog_kind_name((uint8_t)type),
                              (unsigned long long)tlog_leaf_index(seq));
                break;
            }
            if (fn != NULL && fn(ctx, seq, (uint8_t)type, PQgetvalue(r, i, 2),
                                 (size_t)PQgetlength(r, i, 2)) != 0) {
                if (upto != UINT64_MAX) { /* a reader's callback stopped it */
                    st = DPB_ECANCELLED;
                    break;
                }
                st = dpb_fail(&e, DPB_ECORRUPT, "ledger_url",
                              "PostgreSQL at %s: dpbudget_log record %llu (type %u) cannot be "
                              "applied",
                              p->cfg.safe_url, (unsigned long long)seq, type);
                break;
            }
            at = seq;
        }
        PQclear(r);
        if (st != DPB_OK || rows < ROWS_PER_PAGE || at >= upto)
            break;
    }
    if (st == DPB_OK && atomic_load(&p->size_at) + SIZE_REFRESH_S < (long long)dpb_mono_s())
        refresh_size(p, conn);
    pool_put(p, conn, reset);
    if (st == DPB_ECANCELLED)
        return st;
    if (st != DPB_OK) {
        note_error(p, &e);
        return dpb_fail(err, e.status, e.field, "%s", e.detail);
    }
    if (upto != UINT64_MAX) { /* a range read (read_records): records up to upto, no more */
        *last = at;
        if (at < upto)
            return dpb_fail(err, DPB_ENOTFOUND, "ledger_url",
                            "PostgreSQL at %s: dpbudget_log has no record %llu", p->cfg.safe_url,
                            (unsigned long long)(at + 1));
        return DPB_OK;
    }
    /* With records of ours pending (a caller breaking catch-up's contract), the seqs read
     * may be other replicas' records at our pending seqs: durable must not claim them (P2),
     * the flush will learn of the conflict. */
    pthread_mutex_lock(&p->mu);
    if (p->qn == 0 && !p->syncing && at > p->durable) {
        p->durable = at;
        atomic_store(&p->durable_pub, at);
        p->next_seq = at + 1;
    }
    pthread_mutex_unlock(&p->mu);
    *last = at;
    return DPB_OK;
}

/* covered is not called: the snapshot and the log are rows of one database written by
 * committed transactions, with no separate file pair to cross-check (the file store's
 * covered check guards against a snapshot file and a log file from different histories). */
static dpb_status pg_replay(ledger_store *s, uint64_t after_seq, store_record_fn fn,
                            store_record_fn covered, void *ctx, uint64_t *next_seq, dpb_error *err)
{
    (void)covered;
    uint64_t last = after_seq;
    dpb_status st =
        read_log(impl(s), after_seq, UINT64_MAX, fn, ctx, &last, "replaying dpbudget_log", err);
    if (st == DPB_OK)
        *next_seq = last + 1;
    return st;
}

static dpb_status pg_catch_up(ledger_store *s, uint64_t after_seq, store_record_fn fn, void *ctx,
                              uint64_t *last_seq, dpb_error *err)
{
    uint64_t last = after_seq;
    dpb_status st = read_log(impl(s), after_seq, UINT64_MAX, fn, ctx, &last,
                             "catching up with dpbudget_log", err);
    if (st == DPB_OK)
        *last_seq = last;
    return st;
}

/* Records from..to (store_ops.read_records): the log's rows are kept for good. */
static dpb_status pg_read_records(ledger_store *s, uint64_t from, uint64_t to, store_record_fn fn,
                                  void *ctx, dpb_error *err)
{
    uint64_t last;
    if (from == 0 || from > to)
        return DPB_OK;
    return read_log(impl(s), from - 1, to, fn, ctx, &last, "reading dpbudget_log", err);
}

static dpb_status pg_append(ledger_store *s, uint8_t type, const void *payload, size_t len,
                            uint64_t *seq)
{
    pg_store *p = impl(s);
    if (len > WAL_MAX_PAYLOAD || (payload == NULL && len > 0))
        return DPB_EINVAL;
    unsigned char *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL)
        return DPB_ENOMEM;
    if (len > 0)
        memcpy(copy, payload, len);
    pthread_mutex_lock(&p->mu);
    if (p->qn == p->qcap) {
        size_t ncap = p->qcap > 0 ? 2 * p->qcap : 64;
        pending *nq = realloc(p->q, ncap * sizeof *nq);
        if (nq == NULL) {
            pthread_mutex_unlock(&p->mu);
            free(copy);
            return DPB_ENOMEM;
        }
        p->q = nq;
        p->qcap = ncap;
    }
    pending *e = &p->q[p->qn++];
    e->seq = p->next_seq++;
    e->type = type;
    e->len = len;
    e->payload = copy;
    tlog_leaf_hash(type, e->seq, copy, len, e->leaf);
    if (seq != NULL)
        *seq = e->seq;
    pthread_mutex_unlock(&p->mu);
    return DPB_OK;
}

/* Drop every pending record (P3: no flush in flight), the append position back to durable+1,
 * and tell the waiters why (P4). */
static void clear_queue_locked(pg_store *p, dpb_status why)
{
    for (size_t i = 0; i < p->qn; i++)
        free(p->q[i].payload);
    p->qn = 0;
    p->next_seq = p->durable + 1;
    p->gen++;
    p->fails[p->gen % FAIL_RING] = (fail_note){.durable = p->durable, .why = why};
    pthread_cond_broadcast(&p->cv);
}

/* INSERT the n records batch[] in ONE transaction on conn (the flusher's). */
static dpb_status insert_batch(pg_store *p, PGconn *conn, const pending *batch, size_t n,
                               int *reset, dpb_error *err)
{
    size_t chunk = n < ROWS_PER_STMT ? n : ROWS_PER_STMT;
    size_t np = 4 * chunk;
    char *sql = malloc(64 + chunk * 40);
    Oid *types = malloc(np * sizeof *types);
    const char **vals = malloc(np * sizeof *vals);
    int *lens = malloc(np * sizeof *lens);
    int *fmts = malloc(np * sizeof *fmts);
    unsigned char *ints = malloc(chunk * 10);
    dpb_status st = DPB_OK;
    if (sql == NULL || types == NULL || vals == NULL || lens == NULL || fmts == NULL ||
        ints == NULL) {
        st = dpb_fail(err, DPB_ENOMEM, NULL, "no memory to write %zu records", n);
        goto out;
    }
    /* one statement is a transaction by itself; more need BEGIN ... COMMIT */
    int txn = n > ROWS_PER_STMT;
    if (txn) {
        st = exec0(conn, &p->cfg, "BEGIN", PGRES_COMMAND_OK, "BEGIN", reset, err);
        if (st != DPB_OK)
            goto out;
    }
    for (size_t at = 0; at < n && st == DPB_OK; at += chunk) {
        size_t rows = n - at < chunk ? n - at : chunk;
        size_t o =
            (size_t)sprintf(sql, "INSERT INTO dpbudget_log (seq, type, payload, leaf) VALUES ");
        for (size_t i = 0; i < rows; i++) {
            const pending *e = &batch[at + i];
            size_t k = 4 * i;
            o += (size_t)sprintf(sql + o, "%s($%zu,$%zu,$%zu,$%zu)", i > 0 ? "," : "", k + 1, k + 2,
                                 k + 3, k + 4);
            put_be64(ints + 10 * i, e->seq);
            ints[10 * i + 8] = 0;
            ints[10 * i + 9] = e->type;
            types[k] = OID_INT8;
            vals[k] = (const char *)(ints + 10 * i);
            lens[k] = 8;
            types[k + 1] = OID_INT2;
            vals[k + 1] = (const char *)(ints + 10 * i + 8);
            lens[k + 1] = 2;
            types[k + 2] = OID_BYTEA;
            vals[k + 2] = (const char *)e->payload;
            lens[k + 2] = (int)e->len;
            types[k + 3] = OID_BYTEA;
            vals[k + 3] = (const char *)e->leaf;
            lens[k + 3] = TLOG_HASH_BYTES;
            fmts[k] = fmts[k + 1] = fmts[k + 2] = fmts[k + 3] = 1;
        }
        char why[256], step[96];
        snprintf(step, sizeof step, "appending records %llu..%llu",
                 (unsigned long long)batch[at].seq, (unsigned long long)batch[at + rows - 1].seq);
        PGresult *r =
            run(conn, &p->cfg, sql, (int)(4 * rows), types, vals, lens, fmts, 0, why, sizeof why);
        st = judge(conn, r, PGRES_COMMAND_OK, &p->cfg, step, why, reset, err);
        PQclear(r);
    }
    if (txn && st == DPB_OK)
        st = exec0(conn, &p->cfg, "COMMIT", PGRES_COMMAND_OK, "COMMIT", reset, err);
    else if (txn && !*reset)
        (void)exec0(conn, &p->cfg, "ROLLBACK", PGRES_COMMAND_OK, "ROLLBACK", reset, NULL);
out:
    free(sql);
    free(types);
    free(vals);
    free(lens);
    free(fmts);
    free(ints);
    return st;
}

static dpb_status pg_sync(ledger_store *s, uint64_t upto)
{
    pg_store *p = impl(s);
    dpb_status st = DPB_OK;
    pthread_mutex_lock(&p->mu);
    uint64_t gen0 = p->gen;
    if (upto > p->next_seq - 1)
        upto = p->next_seq - 1;
    for (;;) {
        if (p->gen != gen0) {
            /* the queue was cleared since: done only if upto was durable by then (P4) */
            if (p->gen - gen0 > FAIL_RING) {
                st = DPB_EUNAVAILABLE;
            } else {
                const fail_note *f = &p->fails[(gen0 + 1) % FAIL_RING];
                st = upto <= f->durable ? DPB_OK : f->why;
            }
            break;
        }
        if (p->durable >= upto)
            break;
        if (p->syncing) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        if (p->qn == 0)
            break; /* nothing pending (P1: cannot happen with durable < upto) */
        /* Become the flusher of everything queued so far (P3). */
        p->syncing = 1;
        size_t n = p->qn;
        pending *batch = malloc(n * sizeof *batch);
        if (batch == NULL) {
            p->syncing = 0;
            st = DPB_ENOMEM;
            pthread_cond_broadcast(&p->cv);
            break;
        }
        memcpy(batch, p->q, n * sizeof *batch); /* payloads stay owned by the queue */
        PGconn *conn = p->flush_conn;
        p->flush_conn = NULL;
        pthread_mutex_unlock(&p->mu);

        dpb_error e = {0};
        int reset = 0;
        double t0 = dpb_mono_s();
        if (conn != NULL && !conn_alive(conn)) {
            PQfinish(conn);
            conn = NULL;
        }
        if (conn == NULL)
            conn = open_conn(&p->cfg, &e);
        dpb_status fst =
            conn == NULL ? DPB_EUNAVAILABLE : insert_batch(p, conn, batch, n, &reset, &e);
        double dt = dpb_mono_s() - t0;
        if (conn != NULL && (reset || PQstatus(conn) != CONNECTION_OK ||
                             PQtransactionStatus(conn) != PQTRANS_IDLE)) {
            PQfinish(conn);
            conn = NULL;
        }
        uint64_t target = batch[n - 1].seq;
        free(batch);

        pthread_mutex_lock(&p->mu);
        p->flush_conn = conn;
        p->syncing = 0;
        if (fst == DPB_OK) {
            wal_sync_tally_add(&p->syncs, dt);
            for (size_t i = 0; i < n; i++)
                free(p->q[i].payload);
            memmove(p->q, p->q + n, (p->qn - n) * sizeof *p->q);
            p->qn -= n;
            if (target > p->durable) {
                p->durable = target;
                atomic_store(&p->durable_pub, target);
            }
            pthread_cond_broadcast(&p->cv);
        } else {
            if (fst == DPB_ENOMEM)
                fst = DPB_EUNAVAILABLE; /* nothing sent; the records are dropped all the same */
            note_error_locked(p, &e);
            clear_queue_locked(p, fst);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return st;
}

/* ---- the log's tree ---- */

/* Bytes of the kept nodes of one dpbudget_tree row starting at leaf f. */
static size_t chunk_bytes(uint64_t f)
{
    return (size_t)(TLOG_NODE_POS(f + TREE_CHUNK) - TLOG_NODE_POS(f)) * TLOG_HASH_BYTES;
}

/* store_ops.tree_open: the rows of dpbudget_tree in order, then the leaves after them up to
 * upto from the log (their payloads hashed, each checked against its leaf column). */
static dpb_status pg_tree_open(ledger_store *s, dpb_tlog *t, uint64_t upto, dpb_error *err)
{
    pg_store *p = impl(s);
    p->tree = t;
    dpb_error e = {0};
    PGconn *conn = NULL;
    dpb_status got = pool_get_or_fail(p, &conn, err);
    if (got != DPB_OK)
        return got;
    dpb_status st = DPB_OK;
    int reset = 0, more = 1;
    while (st == DPB_OK && more) {
        unsigned char from_b[8];
        put_be64(from_b, tlog_leaves(t));
        const Oid types[1] = {OID_INT8};
        const char *vals[1] = {(const char *)from_b};
        const int lens[1] = {8}, fmts[1] = {1};
        char why[256];
        PGresult *r = run(conn, &p->cfg,
                          "SELECT first_leaf, nodes FROM dpbudget_tree WHERE first_leaf >= $1 "
                          "ORDER BY first_leaf LIMIT 16",
                          1, types, vals, lens, fmts, 1, why, sizeof why);
        st = judge(conn, r, PGRES_TUPLES_OK, &p->cfg, "reading dpbudget_tree", why, &reset, &e);
        int rows = st == DPB_OK ? PQntuples(r) : 0;
        more = rows == 16;
        for (int i = 0; i < rows && st == DPB_OK; i++) {
            uint64_t f = get_be64((const unsigned char *)PQgetvalue(r, i, 0));
            if (f != tlog_leaves(t) || f % TREE_CHUNK != 0) {
                more = 0; /* a gap: the rest comes from the log */
                break;
            }
            if ((size_t)PQgetlength(r, i, 1) != chunk_bytes(f)) {
                st = dpb_fail(&e, DPB_ECORRUPT, "ledger_url",
                              "PostgreSQL at %s: dpbudget_tree row %llu has %d bytes, not %zu",
                              p->cfg.safe_url, (unsigned long long)f, PQgetlength(r, i, 1),
                              chunk_bytes(f));
                break;
            }
            if (tlog_append_nodes(t, (const unsigned char *)PQgetvalue(r, i, 1), TREE_CHUNK) !=
                DPB_OK)
                st = dpb_fail(&e, DPB_ENOMEM, NULL, "out of memory reading the log's tree");
        }
        PQclear(r);
    }
    /* a ledger copied in as one snapshot (ledger_copy_to) has no rows before it: LOST leaves */
    uint64_t first = 0;
    if (st == DPB_OK && tlog_leaves(t) == 0 && upto > 0) {
        char why[256];
        PGresult *r = run(conn, &p->cfg, "SELECT coalesce(min(seq), 0) FROM dpbudget_log", 0, NULL,
                          NULL, NULL, NULL, 0, why, sizeof why);
        st = judge(conn, r, PGRES_TUPLES_OK, &p->cfg, "reading dpbudget_log", why, &reset, &e);
        if (st == DPB_OK)
            first = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    }
    pool_put(p, conn, reset);
    if (st != DPB_OK) {
        note_error(p, &e);
        return dpb_fail(err, e.status, e.field, "%s", e.detail);
    }
    uint64_t lost = 0;
    if (tlog_leaves(t) == 0 && upto > 0)
        lost = first == 0 || first > upto + 1 ? upto : first - 1;
    for (uint64_t seq = 1; seq <= lost; seq++)
        if (tlog_push_record(t, seq, TLOG_TYPE_LOST, NULL, 0) != DPB_OK)
            return dpb_fail(err, DPB_ENOMEM, NULL, "out of memory building the log's tree");
    tlog_commit(t, tlog_leaves(t));
    p->tree_chunks = tlog_leaves(t) / TREE_CHUNK;
    return store_tree_fill(s, t, upto, 0, err);
}

/* In the snapshot's transaction: the rows of dpbudget_tree for every complete chunk of
 * leaves up to seq not stored yet (identical on every replica: ON CONFLICT DO NOTHING).
 * *chunks: the rows there after a commit. */
static dpb_status put_tree_chunks(pg_store *p, PGconn *conn, uint64_t seq, uint64_t *chunks,
                                  int *reset, dpb_error *e)
{
    *chunks = p->tree_chunks;
    if (p->tree == NULL)
        return DPB_OK;
    uint64_t have = tlog_leaves(p->tree);
    uint64_t upto = seq < have ? seq : have;
    unsigned char *buf = NULL;
    dpb_status st = DPB_OK;
    for (uint64_t c = p->tree_chunks; st == DPB_OK && (c + 1) * TREE_CHUNK <= upto; c++) {
        uint64_t f = c * TREE_CHUNK;
        if (buf == NULL && (buf = malloc(chunk_bytes(0) + 2 * TREE_CHUNK)) == NULL)
            return dpb_fail(e, DPB_ENOMEM, NULL, "out of memory");
        if (tlog_nodes(p->tree, f, f + TREE_CHUNK, buf) != DPB_OK)
            break;
        unsigned char f_b[8];
        put_be64(f_b, f);
        const Oid types[2] = {OID_INT8, OID_BYTEA};
        const char *vals[2] = {(const char *)f_b, (const char *)buf};
        const int lens[2] = {8, (int)chunk_bytes(f)}, fmts[2] = {1, 1};
        char why[256];
        PGresult *r = run(conn, &p->cfg,
                          "INSERT INTO dpbudget_tree (first_leaf, nodes) VALUES ($1, $2) "
                          "ON CONFLICT (first_leaf) DO NOTHING",
                          2, types, vals, lens, fmts, 0, why, sizeof why);
        st = judge(conn, r, PGRES_COMMAND_OK, &p->cfg, "snapshot: INSERT into dpbudget_tree", why,
                   reset, e);
        PQclear(r);
        if (st == DPB_OK)
            *chunks = c + 1;
    }
    free(buf);
    return st;
}

static dpb_status pg_snapshot(ledger_store *s, uint64_t seq, const void *data, size_t len,
                              dpb_error *err)
{
    pg_store *p = impl(s);
    if (data == NULL && len > 0)
        return dpb_fail(err, DPB_EINVAL, NULL, "snapshot data is NULL");
    if (len > 0x7fffffff)
        return dpb_fail(err, DPB_ELIMIT, NULL, "a %zu-byte snapshot is past one bytea value", len);
    dpb_error e = {0};
    PGconn *conn = NULL;
    dpb_status got = pool_get_or_fail(p, &conn, err);
    if (got != DPB_OK)
        return got;
    int reset = 0;
    dpb_status st = exec0(conn, &p->cfg, "BEGIN", PGRES_COMMAND_OK, "snapshot: BEGIN", &reset, &e);
    if (st == DPB_OK) {
        unsigned char seq_b[8];
        put_be64(seq_b, seq);
        const Oid types[2] = {OID_INT8, OID_BYTEA};
        const char *vals[2] = {(const char *)seq_b, data != NULL ? data : ""};
        const int lens[2] = {8, (int)len}, fmts[2] = {1, 1};
        char why[256];
        PGresult *r = run(conn, &p->cfg,
                          "INSERT INTO dpbudget_snapshot (seq, payload) VALUES ($1, $2) "
                          "ON CONFLICT (seq) DO NOTHING",
                          2, types, vals, lens, fmts, 0, why, sizeof why);
        st = judge(conn, r, PGRES_COMMAND_OK, &p->cfg, "snapshot: INSERT", why, &reset, &e);
        PQclear(r);
    }
    uint64_t chunks = p->tree_chunks;
    if (st == DPB_OK)
        st = put_tree_chunks(p, conn, seq, &chunks, &reset, &e);
    /* keep the newest 2 */
    if (st == DPB_OK)
        st = exec0(conn, &p->cfg,
                   "DELETE FROM dpbudget_snapshot WHERE seq < (SELECT seq FROM dpbudget_snapshot "
                   "ORDER BY seq DESC LIMIT 1 OFFSET 1)",
                   PGRES_COMMAND_OK, "snapshot: DELETE of older snapshots", &reset, &e);
    if (st == DPB_OK)
        st = exec0(conn, &p->cfg, "COMMIT", PGRES_COMMAND_OK, "snapshot: COMMIT", &reset, &e);
    else if (!reset)
        (void)exec0(conn, &p->cfg, "ROLLBACK", PGRES_COMMAND_OK, "snapshot: ROLLBACK", &reset,
                    NULL);
    if (st == DPB_OK) {
        p->tree_chunks = chunks;
        refresh_size(p, conn);
    }
    pool_put(p, conn, reset);
    if (st != DPB_OK) {
        note_error(p, &e);
        return dpb_fail(err, e.status, e.field, "%s", e.detail);
    }
    return DPB_OK;
}

static uint64_t pg_durable_seq(const ledger_store *s)
{
    return atomic_load(&impl(s)->durable_pub);
}

static int pg_failed(const ledger_store *s)
{
    (void)s;
    return 0; /* never failed for good: the next use reconnects */
}

/* The newest failure (DPB_OK and an empty detail if none happened). */
static dpb_status pg_error(ledger_store *s, dpb_error *err)
{
    pg_store *p = impl(s);
    pthread_mutex_lock(&p->mu);
    *err = p->last_err;
    pthread_mutex_unlock(&p->mu);
    return err->status;
}

static void pg_abandon(ledger_store *s, const char *why)
{
    pg_store *p = impl(s);
    pthread_mutex_lock(&p->mu);
    while (p->syncing)
        pthread_cond_wait(&p->cv, &p->mu);
    dpb_error e = {0};
    dpb_fail(&e, DPB_EUNAVAILABLE, NULL, "pending records abandoned: %s", why);
    note_error_locked(p, &e);
    clear_queue_locked(p, DPB_EUNAVAILABLE);
    pthread_mutex_unlock(&p->mu);
}

static uint64_t pg_size_bytes(const ledger_store *s)
{
    return atomic_load(&impl(s)->size_pub);
}

static void pg_sync_stats(ledger_store *s, uint64_t *count, double *seconds, uint64_t *hist)
{
    pg_store *p = impl(s);
    pthread_mutex_lock(&p->mu);
    wal_sync_tally_get(&p->syncs, count, seconds, hist);
    pthread_mutex_unlock(&p->mu);
}

/* 1 if the database holds no snapshot and no record; 0 otherwise, and when it cannot be
 * asked (error() then says why). */
static int pg_empty(ledger_store *s)
{
    pg_store *p = impl(s);
    dpb_error e = {0};
    PGconn *conn = pool_get(p, &e);
    if (conn == NULL) {
        note_error(p, &e);
        return 0;
    }
    char why[256];
    int reset = 0, empty = 0;
    PGresult *r = run(conn, &p->cfg,
                      "SELECT NOT EXISTS (SELECT 1 FROM dpbudget_log) AND "
                      "NOT EXISTS (SELECT 1 FROM dpbudget_snapshot)",
                      0, NULL, NULL, NULL, NULL, 0, why, sizeof why);
    if (judge(conn, r, PGRES_TUPLES_OK, &p->cfg, "checking that the ledger is empty", why, &reset,
              &e) == DPB_OK)
        empty = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    else
        note_error(p, &e);
    PQclear(r);
    pool_put(p, conn, reset);
    return empty;
}

/* The probe: once a second, when nothing showed the database's life in the last second
 * (pg_health), one SELECT 1 on a pool connection, never refused: it finds a database gone
 * silent while the store is idle, and the one that answers again. */
static void *prober_main(void *arg)
{
    pg_store *p = arg;
    probing = 1;
    pthread_mutex_lock(&p->stop_mu);
    while (!p->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&p->stop_cv, &p->stop_mu, &until);
        if (p->stopping)
            break;
        pthread_mutex_unlock(&p->stop_mu);
        pg_health *h = &p->health;
        if (now_ns() - atomic_load(&h->progress_ns) >= 1000000000LL || atomic_load(&h->timed_out) ||
            !atomic_load(&h->answered)) {
            dpb_error e = {0};
            PGconn *conn = pool_get(p, &e);
            if (conn != NULL) {
                int reset = 0;
                (void)exec0(conn, &p->cfg, "SELECT 1", PGRES_TUPLES_OK, "probing", &reset, &e);
                pool_put(p, conn, reset);
            }
        }
        pthread_mutex_lock(&p->stop_mu);
    }
    pthread_mutex_unlock(&p->stop_mu);
    return NULL;
}

static void pg_health_of(const ledger_store *s, store_health *out)
{
    pg_store *p = impl(s);
    out->refusing = health_refusing(&p->health, &out->silent_s);
    out->answering = atomic_load(&p->health.answered) && !out->refusing;
}

static void pg_close(ledger_store *s)
{
    pg_store *p = impl(s);
    if (p->prober_started) {
        pthread_mutex_lock(&p->stop_mu);
        p->stopping = 1;
        pthread_cond_broadcast(&p->stop_cv);
        pthread_mutex_unlock(&p->stop_mu);
        pthread_join(p->prober, NULL);
    }
    /* best effort, as wal_close: a clean shutdown writes what was appended */
    pthread_mutex_lock(&p->mu);
    int any = p->qn > 0;
    pthread_mutex_unlock(&p->mu);
    if (any)
        (void)pg_sync(s, UINT64_MAX);
    for (size_t i = 0; i < p->qn; i++)
        free(p->q[i].payload);
    free(p->q);
    if (p->flush_conn != NULL)
        PQfinish(p->flush_conn);
    for (unsigned i = 0; i < p->nidle; i++)
        PQfinish(p->idle[i]);
    free(p->idle);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->pmu);
    pthread_cond_destroy(&p->pcv);
    pthread_mutex_destroy(&p->stop_mu);
    pthread_cond_destroy(&p->stop_cv);
    cfg_release(&p->cfg);
    free(p);
    free(s);
}

static const store_ops PG_OPS = {
    .kind = "postgresql",
    .shared = 1,
    .load_snapshot = pg_load_snapshot,
    .replay = pg_replay,
    .append = pg_append,
    .sync = pg_sync,
    .catch_up = pg_catch_up,
    .snapshot = pg_snapshot,
    .durable_seq = pg_durable_seq,
    .failed = pg_failed,
    .error = pg_error,
    .abandon = pg_abandon,
    .size_bytes = pg_size_bytes,
    .sync_stats = pg_sync_stats,
    .empty = pg_empty,
    .health = pg_health_of,
    .close = pg_close,
    .read_records = pg_read_records,
    .tree_open = pg_tree_open,
};

dpb_status store_pg_open(const char *url, const store_pg_options *o, ledger_store **out,
                         dpb_error *err)
{
    if (out == NULL)
        return dpb_fail(err, DPB_EINVAL, NULL, "store_pg_open: out is NULL");
    *out = NULL;
    pg_store *p = calloc(1, sizeof *p);
    ledger_store *s = calloc(1, sizeof *s);
    if (p == NULL || s == NULL) {
        free(p);
        free(s);
        return dpb_fail(err, DPB_ENOMEM, NULL, "no memory for the PostgreSQL store");
    }
    dpb_status st = cfg_init(&p->cfg, url, o, err);
    if (st != DPB_OK) {
        free(p);
        free(s);
        return st;
    }
    unsigned pool = o != NULL && o->pool > 0 ? o->pool : 4;
    p->max_open = pool > 1 ? pool - 1 : 1; /* one more is the flusher's */
    p->idle = calloc(p->max_open, sizeof *p->idle);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_mutex_init(&p->pmu, NULL);
    pthread_cond_init(&p->pcv, NULL);
    pthread_mutex_init(&p->stop_mu, NULL);
    pthread_cond_init(&p->stop_cv, NULL);
    atomic_init(&p->health.inflight, 0);
    atomic_init(&p->health.progress_ns, now_ns());
    atomic_init(&p->health.answered, 1);
    atomic_init(&p->health.timed_out, 0);
    p->cfg.health = &p->health;
    p->next_seq = 1;
    s->ops = &PG_OPS;
    s->impl = p;
    if (p->idle == NULL) {
        dpb_fail(err, DPB_ENOMEM, NULL, "no memory for the PostgreSQL store");
        pg_close(s);
        return DPB_ENOMEM;
    }
    dpb_error e = {0};
    PGconn *conn = open_conn(&p->cfg, &e);
    if (conn == NULL) {
        st = e.status;
    } else {
        p->nopen = 1;
        st = migrate_on(conn, &p->cfg, NULL, NULL, &e);
        if (st == DPB_OK) {
            /* fsync = off: nothing the server acknowledges survives its crash */
            char why[128];
            PGresult *r = run(conn, &p->cfg, "SELECT current_setting('fsync')", 0, NULL, NULL, NULL,
                              NULL, 0, why, sizeof why);
            int reset = 0;
            st = judge(conn, r, PGRES_TUPLES_OK, &p->cfg, "reading fsync", why, &reset, &e);
            if (st == DPB_OK && strcmp(PQgetvalue(r, 0, 0), "on") != 0)
                st = dpb_fail(&e, DPB_EUNSUPPORTED, "ledger_url",
                              "PostgreSQL at %s runs with fsync = %s: a commit it acknowledges "
                              "can be lost in a crash, so the ledger refuses it (set fsync = on)",
                              p->cfg.safe_url, PQgetvalue(r, 0, 0));
            PQclear(r);
        }
        if (st == DPB_OK && PQserverVersion(conn) < 90500)
            st = dpb_fail(&e, DPB_EUNSUPPORTED, "ledger_url",
                          "PostgreSQL at %s is version %d: the ledger needs 9.5 or newer "
                          "(INSERT ... ON CONFLICT)",
                          p->cfg.safe_url, PQserverVersion(conn));
        if (st == DPB_OK)
            refresh_size(p, conn);
        pool_put(p, conn, st != DPB_OK);
    }
    if (st != DPB_OK) {
        dpb_fail(err, st, e.field, "%s", e.detail);
        pg_close(s);
        return st;
    }
    p->prober_started = pthread_create(&p->prober, NULL, prober_main, p) == 0;
    *out = s;
    return DPB_OK;
}
