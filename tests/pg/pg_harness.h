/*
 * pg_harness.h - a real PostgreSQL for the tests (tests/pg/pgtmp.sh does the work).
 *
 * `sh tests/pg/pgtmp.sh with CMD` (how tests/run.sh runs the PostgreSQL suites) starts a
 * server in a temporary directory for CMD and stops it afterwards, passing it in
 * DPB_TEST_PG_URL and DPB_TEST_PG_DIR. A test binary run by hand without them starts its own
 * server on the first pgh_up() and stops it at exit.
 *
 *   if (!pgh_up()) return;                       skip: no PostgreSQL binaries (noted once)
 *   char url[512]; pgh_fresh_db("t_x", url, sizeof url);   an empty ledger of its own
 *   pgh_ctl("stop"), pgh_ctl("kill"), pgh_ctl("restart")   the server goes down / up
 *   pgh_sql(url, "SELECT ...", out, n)                     one statement, the first value
 */
#ifndef DPB_PG_HARNESS_H
#define DPB_PG_HARNESS_H

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char pgh_dir_[256];
static char pgh_url_[512];
static int pgh_state_; /* 0 unknown, 1 up, -1 absent or failed */
static int pgh_own_;

static inline const char *pgh_script(void)
{
    const char *s = getenv("DPB_PGTMP");
    return s != NULL ? s : "tests/pg/pgtmp.sh";
}

/* sh pgtmp.sh CMD DIR; 0 ok, 77 absent, else a failure */
static inline int pgh_run(const char *cmd, const char *dir, char *out, size_t n)
{
    char line[1024];
    snprintf(line, sizeof line, "sh '%s' %s '%s'", pgh_script(), cmd, dir);
    FILE *f = popen(line, "r");
    if (f == NULL)
        return -1;
    if (out != NULL && n > 0) {
        out[0] = '\0';
        if (fgets(out, (int)n, f) != NULL)
            out[strcspn(out, "\n")] = '\0';
    }
    char sink[256];
    while (fgets(sink, sizeof sink, f) != NULL)
        ;
    int rc = pclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static inline void pgh_atexit_(void)
{
    if (pgh_own_) {
        pgh_run("kill", pgh_dir_, NULL, 0);
        char line[600];
        snprintf(line, sizeof line, "rm -rf '%s'", pgh_dir_);
        if (system(line) != 0)
            fprintf(stderr, "pg_harness: could not remove %s\n", pgh_dir_);
    }
}

/* 1 if a server is up (started on first use), 0 if the tests must skip. */
static inline int pgh_up(void)
{
    if (pgh_state_ != 0)
        return pgh_state_ > 0;
    const char *u = getenv("DPB_TEST_PG_URL"), *d = getenv("DPB_TEST_PG_DIR");
    if (u != NULL && d != NULL) {
        snprintf(pgh_url_, sizeof pgh_url_, "%s", u);
        snprintf(pgh_dir_, sizeof pgh_dir_, "%s", d);
        pgh_state_ = 1;
        return 1;
    }
    snprintf(pgh_dir_, sizeof pgh_dir_, "/tmp/dpb-pg.XXXXXX");
    if (mkdtemp(pgh_dir_) == NULL) {
        pgh_state_ = -1;
        return 0;
    }
    int rc = pgh_run("start", pgh_dir_, pgh_url_, sizeof pgh_url_);
    pgh_own_ = 1;
    atexit(pgh_atexit_);
    if (rc == 77) {
        fprintf(stderr, "pg_harness: PostgreSQL binaries absent: the PostgreSQL tests skip\n");
        pgh_state_ = -1;
        return 0;
    }
    if (rc != 0) {
        fprintf(stderr, "pg_harness: pgtmp.sh start failed (exit %d)\n", rc);
        pgh_state_ = -1;
        return 0;
    }
    pgh_state_ = 1;
    return 1;
}

static inline const char *pgh_url(void)
{
    return pgh_url_;
}

/* "stop", "kill" or "restart" the server; 0 on success */
static inline int pgh_ctl(const char *cmd)
{
    return pgh_run(cmd, pgh_dir_, NULL, 0);
}

/* url of the ledger called name on the server, with an optional password in it: a schema of
 * the database postgres, made the connection's search_path (a schema is made and dropped
 * in a moment; a database per test would cost a copy of template1 in the WAL, which the
 * crash tests' recovery then replays) */
static inline void pgh_db_url(const char *name, const char *password, char *url, size_t n)
{
    const char *host = strchr(pgh_url_, '@');
    snprintf(url, n, "postgresql://postgres%s%s%.*s/postgres?options=-csearch_path%%3D%s",
             password != NULL ? ":" : "", password != NULL ? password : "",
             host != NULL ? (int)(strrchr(host, '/') - host) : 0, host != NULL ? host : "", name);
}

static inline void pgh_quiet_(void *arg, const char *msg)
{
    (void)arg, (void)msg;
}

/* One statement on url; its first value (if any) into out. 0 on success, else -1 and the
 * server's message on stderr. */
static inline int pgh_sql(const char *url, const char *sql, char *out, size_t n)
{
    PGconn *c = PQconnectdb(url);
    int rc = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PQsetNoticeProcessor(c, pgh_quiet_, NULL);
        PGresult *r = PQexec(c, sql);
        ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
            rc = 0;
            if (out != NULL && n > 0)
                snprintf(out, n, "%s",
                         s == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
        } else {
            fprintf(stderr, "pg_harness: %s: %s", sql, PQresultErrorMessage(r));
        }
        PQclear(r);
    } else {
        fprintf(stderr, "pg_harness: %s", PQerrorMessage(c));
    }
    PQfinish(c);
    return rc;
}

/* A new empty ledger name (a schema; dropped first if a previous run left it); its url in
 * url. */
static inline int pgh_fresh_db(const char *name, char *url, size_t n)
{
    char sql[256];
    snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", name);
    if (pgh_sql(pgh_url_, sql, NULL, 0) != 0)
        return -1;
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", name);
    if (pgh_sql(pgh_url_, sql, NULL, 0) != 0)
        return -1;
    pgh_db_url(name, NULL, url, n);
    return 0;
}

#endif
