/*
 * crash_test.c - the crash test of the budget ledger (core/ledger/ledger.h, "Durability").
 *
 * A real dpbudgetd (--snapshot-every 50, so snapshots and log truncations happen all the
 * time) takes rounds from 4 threads; after a random 100-600 ms it is SIGKILLed and
 * restarted on the same data directory, 8 to 10 times. After every restart:
 *   (a) every acknowledged round (a complete 200 answer) is there, with the admitted set
 *       of its answer;
 *   (b) nothing else is there: every present round was posted by the test (a GET past
 *       each thread's last id is 404, and the summary counts exactly the rounds found);
 *   (c) every client's "rounds" equals the number of present rounds that admitted it, no
 *       spend exceeds its budget, and equal round counts give equal spends (one event);
 *   (d) the daemon was serving again within 5 s (a torn tail is dropped silently).
 * Rounds in flight at a kill (no answer) may be present or absent; once known, that must
 * not change at later restarts, and a present one counts in (c) like any other. Finally
 * SIGTERM under load must exit 0 after a final snapshot (wal.log empty), and a restart
 * must find the same state.
 *
 *   persist_tests [DPBUDGETD] [FILTER]       (or set DPBUDGETD)
 *   CRASH_SEED=N  replays the same kill delays and cohorts (the seed is printed).
 */
#define _GNU_SOURCE /* unshare, CLONE_NEWNS */
#define TESTLIB_MAIN
#include "../../core/ledger/ledger.h"
#include "../testlib.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "../api/client.h"

#define NWORKERS 4
#define NVERIFIERS 4
#define NCLIENTS 25 /* c00..c19 (big budgets), s0..s4 (small) */
#define NBIG 20
#define BIG_EPS 50.0
#define SMALL_EPS 3.0
#define BUDGET_DELTA 1e-5
#define MAX_COHORT 8
#define MAX_PER_PHASE 500 /* rounds one thread posts in one load phase, at most */
#define RESTART_LIMIT_MS 5000.0
#define START_WAIT_MS 15000.0 /* how long to wait before giving up on a start */
#define DEFAULT_SEED 20240917u
#define MAX_STARTS 16

enum { R_INFLIGHT = 0, R_ACKED, R_PRESENT, R_ABSENT };

typedef struct {
    uint32_t cohort;   /* participants (bit i: client i) */
    uint32_t admitted; /* from the answer (acknowledged) or the first GET (in flight, present) */
    uint8_t state;
    uint8_t phase; /* load phase (cycle) it was posted in */
    uint8_t v_bad; /* last verification: 0 fine, 1 inconsistent answer, 2 no answer, 3 status */
    uint8_t v_present;
    uint32_t v_admitted;
    long v_status;
} round_rec;

typedef struct {
    int id;
    round_rec *r;
    size_t n, cap;
    uint64_t rng;
    size_t acked_phase;
    /* problems seen by the thread; the main thread turns them into failed checks */
    int bad;
    char bad_what[512];
    pthread_t th;
} worker;

typedef struct {
    int id;
    pthread_t th;
} verifier;

/* ---- state shared by the tests ---- */

static const char *daemon_bin;
static const char *extra_arg[2]; /* more daemon arguments (NULL: none) */
static pid_t daemon_pid = -1;
static int starts;
static double start_ms[MAX_STARTS];
static char tmpdir[64], port_path[128], log_path[128], data_path[128];
static char base_url[64];
static uint64_t seed, main_rng;
static worker workers[NWORKERS];
static atomic_int stop_load;
static int cur_phase;
static int set_up, broken; /* broken: the daemon cannot be driven any more */
static int cycles_done;
static size_t inflight_present, inflight_absent, refusals;
static int left_snap_tmp, left_wal_tmp, torn_tails;
static double load_seconds;
static size_t acked_total;

/* ---- small helpers ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void client_name(int i, char *out, size_t n)
{
    if (i < NBIG)
        snprintf(out, n, "c%02d", i);
    else
        snprintf(out, n, "s%d", i - NBIG);
}

static int client_index(const char *id)
{
    char name[16];
    for (int i = 0; i < NCLIENTS; i++) {
        client_name(i, name, sizeof name);
        if (strcmp(name, id) == 0)
            return i;
    }
    return -1;
}

static int popcount32(uint32_t v)
{
    int n = 0;
    for (; v; v &= v - 1)
        n++;
    return n;
}

static void round_name(int w, size_t k, char *out, size_t n)
{
    snprintf(out, n, "t%d-%zu", w, k);
}

/* Copy the daemon's log (every start's stderr, one after the other) to stderr. */
static void dump_log(void)
{
    FILE *f = fopen(log_path, "r");
    if (f == NULL)
        return;
    char line[1024];
    fprintf(stderr, "---- dpbudgetd log (%s) ----\n", log_path);
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fprintf(stderr, "-----------------------\n");
    fclose(f);
}

static void log_marker(const char *fmt_what, int n)
{
    FILE *f = fopen(log_path, "a");
    if (f == NULL)
        return;
    fprintf(f, "==== crash_test: %s %d ====\n", fmt_what, n);
    fclose(f);
}

/* ---- a kept-alive libcurl connection (client.c opens one per call; the load and the
 * verification make tens of thousands of requests, which would exhaust local ports) ---- */

typedef struct {
    CURL *h;
    struct curl_slist *post_hdrs, *get_hdrs;
    char *buf;
    size_t len, cap;
    int oom;
    int read_only;          /* the answer carried Ledger-Read-Only: true */
    char content_type[128]; /* for the contract log */
} conn;

static size_t conn_on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    conn *c = ud;
    size_t n = size * nmemb;
    static const char h[] = "ledger-read-only: true";
    if (n >= sizeof h - 1 && strncasecmp(data, h, sizeof h - 1) == 0)
        c->read_only = 1;
    if (n > 13 && strncasecmp(data, "content-type:", 13) == 0) {
        size_t k = 13;
        while (k < n && data[k] == ' ')
            k++;
        size_t e = n;
        while (e > k && (data[e - 1] == '\r' || data[e - 1] == '\n'))
            e--;
        snprintf(c->content_type, sizeof c->content_type, "%.*s", (int)(e - k), data + k);
    }
    return n;
}

static size_t conn_on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    conn *c = ud;
    size_t n = size * nmemb;
    if (c->len + n + 1 > c->cap) {
        size_t ncap = c->cap ? c->cap : 4096;
        while (ncap < c->len + n + 1)
            ncap *= 2;
        char *nb = realloc(c->buf, ncap);
        if (nb == NULL) {
            c->oom = 1;
            return 0;
        }
        c->buf = nb;
        c->cap = ncap;
    }
    memcpy(c->buf + c->len, data, n);
    c->len += n;
    c->buf[c->len] = '\0';
    return n;
}

static int conn_init(conn *c)
{
    memset(c, 0, sizeof *c);
    c->h = curl_easy_init();
    if (c->h == NULL)
        return -1;
    c->post_hdrs = curl_slist_append(NULL, "Expect:");
    c->post_hdrs = curl_slist_append(c->post_hdrs, "Content-Type: application/json");
    c->get_hdrs = curl_slist_append(NULL, "Expect:");
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, conn_on_body);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, conn_on_header);
    curl_easy_setopt(c->h, CURLOPT_HEADERDATA, c);
    return c->post_hdrs && c->get_hdrs ? 0 : -1;
}

static void conn_free(conn *c)
{
    if (c->h)
        curl_easy_cleanup(c->h);
    curl_slist_free_all(c->post_hdrs);
    curl_slist_free_all(c->get_hdrs);
    free(c->buf);
    memset(c, 0, sizeof *c);
}

/* POST body (when not NULL) or GET path. 0 and *status when a complete response arrived
 * (its body in c->buf, c->len), else -1. */
static int conn_request(conn *c, const char *path, const char *body, long *status)
{
    char url[256];
    snprintf(url, sizeof url, "%s%s", base_url, path);
    c->len = 0;
    c->oom = 0;
    c->read_only = 0;
    c->content_type[0] = '\0';
    if (c->buf)
        c->buf[0] = '\0';
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    if (body) {
        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->post_hdrs);
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->get_hdrs);
        curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(c->h);
    *status = 0;
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, status);
    if (rc == CURLE_OK && !c->oom) {
        /* the contract check sees these answers too (a no-op without DPB_CONTRACT_LOG) */
        static char empty[1];
        api_reply r = {.status = *status, .body = c->buf ? c->buf : empty, .body_len = c->len};
        snprintf(r.content_type, sizeof r.content_type, "%s", c->content_type);
        api_record_exchange(body ? "POST" : "GET", path, body ? "application/json" : NULL, body,
                            body ? strlen(body) : 0, &r);
    }
    return rc == CURLE_OK && !c->oom ? 0 : -1;
}

/* ---- a round's JSON against what was posted ---- */

/* Check a Round answer for round rid with participants `cohort`: its id, participant count,
 * that admitted and refused split the cohort exactly, the charge count and the refusal
 * reasons. *admitted gets the admitted set. 0 if fine, else -1 with why. */
static int check_round_json(const char *body, size_t len, const char *rid, uint32_t cohort,
                            uint32_t *admitted, char *why, size_t whyn)
{
    json_error_t jerr;
    json_t *j = json_loadb(body, len, 0, &jerr);
    uint32_t adm = 0, ref = 0;
    int rc = -1;
    if (!json_is_object(j)) {
        snprintf(why, whyn, "not a JSON object");
        goto out;
    }
    const char *id = json_string_value(json_object_get(j, "round_id"));
    if (id == NULL || strcmp(id, rid) != 0) {
        snprintf(why, whyn, "round_id %s", id ? id : "(missing)");
        goto out;
    }
    if (json_object_get(j, "summarized") != NULL) {
        snprintf(why, whyn, "summarized (per-client answers evicted)");
        goto out;
    }
    json_t *p = json_object_get(j, "participants");
    if (!json_is_integer(p) || json_integer_value(p) != popcount32(cohort)) {
        snprintf(why, whyn, "participants is not %d", popcount32(cohort));
        goto out;
    }
    json_t *a = json_object_get(j, "admitted"), *r = json_object_get(j, "refused");
    if (!json_is_array(a) || !json_is_array(r)) {
        snprintf(why, whyn, "admitted/refused are not arrays");
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        json_t *arr = pass ? r : a;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            json_t *e = json_array_get(arr, i);
            const char *cl = json_string_value(json_object_get(e, "client"));
            const char *reason = json_string_value(json_object_get(e, "reason"));
            int k = cl ? client_index(cl) : -1;
            if (k < 0 || !(cohort & (1u << k)) || ((adm | ref) & (1u << k))) {
                snprintf(why, whyn, "%s client %s not in the cohort or listed twice",
                         pass ? "refused" : "admitted", cl ? cl : "(missing)");
                goto out;
            }
            if (reason == NULL || (pass == 0 && strcmp(reason, "admitted") != 0) ||
                (pass == 1 && strcmp(reason, "over_budget") != 0 &&
                 strcmp(reason, "exhausted") != 0)) {
                snprintf(why, whyn, "client %s has reason %s", cl, reason ? reason : "(missing)");
                goto out;
            }
            if (pass)
                ref |= 1u << k;
            else
                adm |= 1u << k;
        }
    }
    if ((adm | ref) != cohort) {
        snprintf(why, whyn, "admitted and refused do not cover the participants");
        goto out;
    }
    json_t *ch = json_object_get(j, "charged");
    if (!json_is_integer(ch) || json_integer_value(ch) != popcount32(adm)) {
        snprintf(why, whyn, "charged is not the number admitted (%d)", popcount32(adm));
        goto out;
    }
    *admitted = adm;
    rc = 0;
out:
    json_decref(j);
    return rc;
}

/* ---- the load ---- */

static int grow_rounds(worker *w)
{
    if (w->n < w->cap)
        return 0;
    size_t ncap = w->cap ? w->cap * 2 : 1024;
    round_rec *nr = realloc(w->r, ncap * sizeof *nr);
    if (nr == NULL)
        return -1;
    w->r = nr;
    w->cap = ncap;
    return 0;
}

static void worker_bad(worker *w, const char *fmt_rid, long status, const char *detail)
{
    if (w->bad++ == 0)
        snprintf(w->bad_what, sizeof w->bad_what, "round %s: status %ld: %.400s", fmt_rid, status,
                 detail);
}

/* Post rounds until told to stop or until the daemon goes away (the round then stays in
 * flight: posted, no complete answer) or a per-phase bound is reached. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    conn c;
    if (conn_init(&c) != 0) {
        worker_bad(w, "-", 0, "cannot create a curl handle");
        conn_free(&c);
        return NULL;
    }
    size_t done = 0;
    while (!atomic_load(&stop_load)) {
        if (done >= MAX_PER_PHASE) {
            sleep_ms(5);
            continue;
        }
        if (grow_rounds(w) != 0) {
            worker_bad(w, "-", 0, "out of memory");
            break;
        }
        round_rec *r = &w->r[w->n];
        memset(r, 0, sizeof *r);
        r->state = R_INFLIGHT;
        r->phase = (uint8_t)cur_phase;
        char rid[32], body[640];
        round_name(w->id, w->n, rid, sizeof rid);
        int len = snprintf(body, sizeof body,
                           "{\"round_id\":\"%s\",\"policy\":\"admit_eligible\",\"event\":"
                           "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5},"
                           "\"participants\":[",
                           rid);
        int k = 1 + (int)(tl_splitmix(&w->rng) % MAX_COHORT);
        for (int i = 0; i < k;) {
            int c_ix = (int)(tl_splitmix(&w->rng) % NCLIENTS);
            if (r->cohort & (1u << c_ix))
                continue;
            r->cohort |= 1u << c_ix;
            char name[16];
            client_name(c_ix, name, sizeof name);
            len += snprintf(body + len, sizeof body - (size_t)len, "%s\"%s\"", i ? "," : "", name);
            i++;
        }
        snprintf(body + len, sizeof body - (size_t)len, "]}");
        w->n++;
        done++;
        long status;
        if (conn_request(&c, "/v1/rounds", body, &status) != 0)
            break; /* the daemon went away: in flight */
        if (status != 200) {
            worker_bad(w, rid, status, c.buf ? c.buf : "");
            break; /* not acknowledged; whether it is there is found out after the restart */
        }
        char why[160];
        uint32_t adm = 0;
        if (check_round_json(c.buf, c.len, rid, r->cohort, &adm, why, sizeof why) != 0) {
            worker_bad(w, rid, status, why);
            break;
        }
        r->admitted = adm;
        r->state = R_ACKED;
        w->acked_phase++;
    }
    conn_free(&c);
    return NULL;
}

/* ---- the daemon ---- */

/* Start dpbudgetd on the data directory; the time until its port file appears (the ledger
 * is recovered and the server listens then) in ms, or -1 if it exited or took too long. */
static double start_daemon(void)
{
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", port_path);
    unlink(port_path);
    unlink(tmp);
    log_marker("start", starts);
    fflush(NULL);
    double t0 = now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        perror("persist_tests: fork");
        return -1;
    }
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        char *const args[] = {(char *)daemon_bin,
                              "--listen",
                              "127.0.0.1",
                              "--port",
                              "0",
                              "--port-file",
                              port_path,
                              "--data-dir",
                              data_path,
                              "--snapshot-every",
                              "50",
                              (char *)extra_arg[0],
                              (char *)extra_arg[1],
                              NULL};
        execv(daemon_bin, args);
        fprintf(stderr, "persist_tests: cannot run %s: %s\n", daemon_bin, strerror(errno));
        _exit(127);
    }
    daemon_pid = pid;
    for (;;) {
        FILE *f = fopen(port_path, "r");
        unsigned port = 0;
        if (f) {
            int ok = fscanf(f, "%u", &port) == 1;
            fclose(f);
            if (ok && port > 0 && port < 65536) {
                double ms = now_ms() - t0;
                snprintf(base_url, sizeof base_url, "http://127.0.0.1:%u", port);
                api_set_base(base_url);
                if (starts < MAX_STARTS)
                    start_ms[starts] = ms;
                starts++;
                return ms;
            }
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            daemon_pid = -1;
            fprintf(stderr, "persist_tests: dpbudgetd exited before listening (start %d, %s %d)\n",
                    starts, WIFEXITED(st) ? "exit status" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            return -1;
        }
        if (now_ms() - t0 > START_WAIT_MS) {
            fprintf(stderr, "persist_tests: dpbudgetd wrote no port file within %.0f ms\n",
                    START_WAIT_MS);
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            daemon_pid = -1;
            return -1;
        }
        sleep_ms(2);
    }
}

/* 1 if the daemon is still running; else reap it and say how it ended. */
static int daemon_alive(void)
{
    if (daemon_pid <= 0)
        return 0;
    int st;
    pid_t w = waitpid(daemon_pid, &st, WNOHANG);
    if (w == 0)
        return 1;
    fprintf(stderr, "persist_tests: dpbudgetd (pid %d) ended on its own: %s %d\n", (int)daemon_pid,
            WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st)     ? WEXITSTATUS(st)
            : WIFSIGNALED(st) ? WTERMSIG(st)
                              : -1);
    daemon_pid = -1;
    return 0;
}

/* Send sig and wait up to timeout_ms (then SIGKILL). The wait status, or -1 on timeout. */
static int stop_daemon(int sig, long timeout_ms)
{
    if (daemon_pid <= 0)
        return -1;
    pid_t pid = daemon_pid;
    daemon_pid = -1;
    kill(pid, sig);
    int st = 0;
    double t0 = now_ms();
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return st;
        if (w < 0 && errno != EINTR)
            return -1;
        if (now_ms() - t0 > (double)timeout_ms)
            break;
        sleep_ms(2);
    }
    fprintf(stderr, "persist_tests: dpbudgetd did not stop within %ld ms of signal %d: SIGKILL\n",
            timeout_ms, sig);
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return -1;
}

/* ---- verification ---- */

static atomic_int verifier_next;

/* GET every round the test ever posted (numbered across the threads' arrays and handed out
 * by an atomic counter) and note what the daemon says in the round's v_* fields. */
static void *verifier_main(void *arg)
{
    (void)arg;
    conn c;
    if (conn_init(&c) != 0) {
        conn_free(&c);
        return NULL; /* the rounds it would have checked keep v_bad = 2 */
    }
    for (;;) {
        int g = atomic_fetch_add(&verifier_next, 1);
        int wi = 0;
        size_t k = (size_t)g;
        while (wi < NWORKERS && k >= workers[wi].n)
            k -= workers[wi++].n;
        if (wi == NWORKERS)
            break;
        round_rec *r = &workers[wi].r[k];
        char rid[32], path[64], why[160];
        round_name(wi, k, rid, sizeof rid);
        snprintf(path, sizeof path, "/v1/rounds/%s", rid);
        long status = 0;
        r->v_present = 0;
        r->v_admitted = 0;
        r->v_status = 0;
        if (conn_request(&c, path, NULL, &status) != 0) {
            r->v_bad = 2;
        } else if (status == 404) {
            r->v_bad = 0;
        } else if (status != 200) {
            r->v_bad = 3;
            r->v_status = status;
        } else if (check_round_json(c.buf, c.len, rid, r->cohort, &r->v_admitted, why,
                                    sizeof why) != 0) {
            r->v_bad = 1;
            r->v_present = 1;
        } else {
            r->v_bad = 0;
            r->v_present = 1;
        }
    }
    conn_free(&c);
    return NULL;
}

/* Per-round checks of one verification print their first VREPORT_MAX failures only. */
#define VREPORT_MAX 20
static int vreported;
#define VCHECKF(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond) && vreported++ >= VREPORT_MAX)                                                 \
            tl_failed_checks++;                                                                    \
        else                                                                                       \
            CHECKF(cond, __VA_ARGS__);                                                             \
    } while (0)

static json_t *get_json(const char *path, long *status)
{
    api_reply rep;
    json_t *j = NULL;
    *status = 0;
    if (api_get(path, &rep) == 0) {
        *status = rep.status;
        j = rep.json ? json_incref(rep.json) : NULL;
    }
    api_reply_free(&rep);
    return j;
}

static double json_num(json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Check the whole ledger against what the test knows; `when` names the moment. */
static void verify(const char *when)
{
    for (int wi = 0; wi < NWORKERS; wi++)
        for (size_t k = 0; k < workers[wi].n; k++)
            workers[wi].r[k].v_bad = 2;
    atomic_store(&verifier_next, 0);
    verifier v[NVERIFIERS];
    int started = 0;
    for (int i = 0; i < NVERIFIERS; i++) {
        v[i].id = i;
        if (pthread_create(&v[i].th, NULL, verifier_main, &v[i]) == 0)
            started |= 1 << i;
    }
    CHECKF(started != 0, "%s: cannot start a verifier thread", when);
    for (int i = 0; i < NVERIFIERS; i++)
        if (started & (1 << i))
            pthread_join(v[i].th, NULL);

    uint64_t count[NCLIENTS] = {0};
    size_t present = 0;
    vreported = 0;
    for (int wi = 0; wi < NWORKERS; wi++) {
        worker *w = &workers[wi];
        for (size_t k = 0; k < w->n; k++) {
            round_rec *r = &w->r[k];
            char rid[32];
            round_name(wi, k, rid, sizeof rid);
            if (r->v_bad) {
                VCHECKF(0, "%s: GET /v1/rounds/%s: %s (status %ld)", when, rid,
                        r->v_bad == 1   ? "an answer inconsistent with the posted round"
                        : r->v_bad == 2 ? "no answer"
                                        : "unexpected status",
                        r->v_status);
                if (!r->v_present)
                    continue;
            }
            switch (r->state) {
            case R_ACKED:
                VCHECKF(r->v_present, "%s: acknowledged round %s (phase %d) is missing", when, rid,
                        r->phase);
                VCHECKF(!r->v_present || r->v_admitted == r->admitted,
                        "%s: acknowledged round %s admitted set 0x%07x, answer said 0x%07x", when,
                        rid, (unsigned)r->v_admitted, (unsigned)r->admitted);
                break;
            case R_INFLIGHT: /* first look after the kill: settle it */
                r->state = r->v_present ? R_PRESENT : R_ABSENT;
                r->admitted = r->v_admitted;
                if (r->v_present)
                    inflight_present++;
                else
                    inflight_absent++;
                break;
            case R_PRESENT:
                VCHECKF(r->v_present,
                        "%s: in-flight round %s, present after an earlier restart, "
                        "is missing now",
                        when, rid);
                VCHECKF(!r->v_present || r->v_admitted == r->admitted,
                        "%s: in-flight round %s changed its admitted set (0x%07x, was 0x%07x)",
                        when, rid, (unsigned)r->v_admitted, (unsigned)r->admitted);
                break;
            case R_ABSENT:
                VCHECKF(!r->v_present,
                        "%s: in-flight round %s, absent after an earlier restart, "
                        "is present now",
                        when, rid);
                break;
            }
            if (r->v_present) {
                present++;
                for (int i = 0; i < NCLIENTS; i++)
                    if (r->v_admitted & (1u << i))
                        count[i]++;
            }
        }
    }
    if (vreported > VREPORT_MAX)
        fprintf(stderr, "... and %d more failed checks of rounds (%s)\n", vreported - VREPORT_MAX,
                when);

    /* (b) nothing but the posted rounds: the next id of each thread is unknown, and the
     * ledger counts exactly the rounds found */
    for (int wi = 0; wi < NWORKERS; wi++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/rounds/t%d-%zu", wi, workers[wi].n);
        long status;
        json_t *j = get_json(path, &status);
        CHECKF(status == 404, "%s: GET %s (never posted): status %ld", when, path, status);
        json_decref(j);
    }
    long status;
    json_t *s = get_json("/v1/summary", &status);
    CHECKF(status == 200 && s, "%s: GET /v1/summary: status %ld", when, status);
    if (s) {
        json_t *nr = json_object_get(s, "rounds");
        CHECKF(json_is_integer(nr) && (size_t)json_integer_value(nr) == present,
               "%s: the ledger holds %" JSON_INTEGER_FORMAT " rounds, the test found %zu", when,
               json_is_integer(nr) ? json_integer_value(nr) : (json_int_t)-1, present);
        json_t *nc = json_object_get(s, "clients");
        CHECKF(json_is_integer(nc) && json_integer_value(nc) == NCLIENTS,
               "%s: the ledger holds %" JSON_INTEGER_FORMAT " clients, want %d", when,
               json_is_integer(nc) ? json_integer_value(nc) : (json_int_t)-1, NCLIENTS);
        CHECKF(json_is_false(json_object_get(s, "read_only")), "%s: the ledger is read-only", when);
        /* the series, replayed from the log after the kill: every round found in its days
         * (all timed, all within the day ring), the newest day's statuses the summary's */
        json_t *h = get_json("/v1/history?resolution=day", &status);
        CHECKF(status == 200 && h, "%s: GET /v1/history: status %ld", when, status);
        json_t *pts = h ? json_object_get(h, "points") : NULL;
        json_int_t sum = 0;
        for (size_t i = 0; i < json_array_size(pts); i++)
            sum += json_integer_value(json_object_get(json_array_get(pts, i), "rounds"));
        CHECKF(h == NULL || (size_t)sum == present,
               "%s: the series holds %" JSON_INTEGER_FORMAT " rounds, the test found %zu", when,
               sum, present);
        json_t *last = json_array_get(pts, json_array_size(pts) - 1);
        CHECKF(h == NULL || (last && json_equal(json_object_get(last, "by_status"),
                                                json_object_get(s, "by_status"))),
               "%s: the newest day's statuses are not the summary's", when);
        json_decref(h);
        json_decref(s);
    }

    /* (c) clients */
    json_t *l = get_json("/v1/clients?limit=100", &status);
    CHECKF(status == 200 && l, "%s: GET /v1/clients: status %ld", when, status);
    json_t *arr = l ? json_object_get(l, "clients") : NULL;
    CHECKF(json_array_size(arr) == NCLIENTS, "%s: %zu clients listed, want %d", when,
           json_array_size(arr), NCLIENTS);
    double spent_at[NCLIENTS];
    uint64_t rounds_at[NCLIENTS];
    int seen = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *c = json_array_get(arr, i);
        const char *id = json_string_value(json_object_get(c, "id"));
        int k = id ? client_index(id) : -1;
        CHECKF(k >= 0 && !(seen & (1 << k)), "%s: unexpected client %s", when, id ? id : "(none)");
        if (k < 0 || (seen & (1 << k)))
            continue;
        seen |= 1 << k;
        json_t *rn = json_object_get(c, "rounds");
        uint64_t rounds = json_is_integer(rn) ? (uint64_t)json_integer_value(rn) : UINT64_MAX;
        double eps = json_num(json_object_get(json_object_get(c, "budget"), "epsilon"));
        double spent = json_num(json_object_get(json_object_get(c, "spent"), "epsilon"));
        double want_eps = k < NBIG ? BIG_EPS : SMALL_EPS;
        CHECKF(rounds == count[k],
               "%s: client %s has rounds = %" PRIu64 ", but %" PRIu64 " present rounds admitted it",
               when, id, rounds, count[k]);
        CHECKF(eps == want_eps, "%s: client %s budget epsilon %.17g, want %g", when, id, eps,
               want_eps);
        CHECKF(spent >= 0 && spent <= eps * (1 + 1e-12),
               "%s: client %s spent %.17g of a budget of %.17g", when, id, spent, eps);
        CHECKF(rounds > 0 || spent == 0, "%s: client %s spent %.17g in no round", when, id, spent);
        spent_at[k] = spent;
        rounds_at[k] = rounds;
    }
    /* one event for every round: the same number of rounds is the same spend */
    for (int a = 0; a < NCLIENTS; a++)
        for (int b = a + 1; b < NCLIENTS; b++)
            if ((seen & (1 << a)) && (seen & (1 << b)) && rounds_at[a] == rounds_at[b])
                CHECKF(fabs(spent_at[a] - spent_at[b]) <= 1e-9 * (1 + spent_at[a]),
                       "%s: %" PRIu64 " rounds each, but spends %.17g and %.17g (clients %d, %d)",
                       when, rounds_at[a], spent_at[a], spent_at[b], a, b);
    json_decref(l);
}

/* ---- set-up ---- */

static int put_clients(void)
{
    for (int i = 0; i < NCLIENTS; i++) {
        char name[16], path[64], body[128];
        client_name(i, name, sizeof name);
        snprintf(path, sizeof path, "/v1/clients/%s", name);
        snprintf(body, sizeof body, "{\"budget\":{\"epsilon\":%g,\"delta\":%g}}",
                 i < NBIG ? BIG_EPS : SMALL_EPS, BUDGET_DELTA);
        api_reply rep;
        int rc = api_call("PUT", path, "application/json", body, strlen(body), &rep);
        CHECKF(rc == 0 && rep.status == 201, "PUT %s: status %ld: %s", path, rep.status,
               rep.body ? rep.body : "");
        int ok = rc == 0 && rep.status == 201;
        api_reply_free(&rep);
        if (!ok)
            return -1;
    }
    return 0;
}

static int ensure_set_up(void)
{
    if (set_up) {
        CHECKF(!broken, "not run: an earlier failure left no daemon to drive (see above)");
        return broken ? -1 : 0;
    }
    set_up = 1;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dpb-crash-XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        CHECKF(0, "mkdtemp: %s", strerror(errno));
        broken = 1;
        return -1;
    }
    snprintf(port_path, sizeof port_path, "%s/port", tmpdir);
    snprintf(log_path, sizeof log_path, "%s/daemon.log", tmpdir);
    snprintf(data_path, sizeof data_path, "%s/data", tmpdir);
    main_rng = seed;
    for (int i = 0; i < NWORKERS; i++) {
        workers[i].id = i;
        workers[i].rng = seed ^ (0x1000193ull * (uint64_t)(i + 1));
        tl_splitmix(&workers[i].rng);
    }
    double ms = start_daemon();
    CHECKF(ms >= 0, "dpbudgetd did not start on an empty data directory");
    if (ms < 0 || put_clients() != 0) {
        dump_log();
        broken = 1;
        return -1;
    }
    verify("after set-up");
    return 0;
}

/* Run the load on NWORKERS threads for delay_ms, then end the daemon with sig (the
 * threads see it go away). The wait status of the daemon, or -1. */
static int load_then_signal(long delay_ms, int sig, int *alive_at_signal)
{
    atomic_store(&stop_load, 0);
    int started = 0;
    double t0 = now_ms();
    for (int i = 0; i < NWORKERS; i++) {
        workers[i].acked_phase = 0;
        if (pthread_create(&workers[i].th, NULL, worker_main, &workers[i]) == 0)
            started |= 1 << i;
    }
    CHECKF(started == (1 << NWORKERS) - 1, "cannot start the load threads");
    sleep_ms(delay_ms);
    *alive_at_signal = daemon_alive();
    int st = *alive_at_signal ? stop_daemon(sig, 5000) : -1;
    atomic_store(&stop_load, 1);
    for (int i = 0; i < NWORKERS; i++)
        if (started & (1 << i))
            pthread_join(workers[i].th, NULL);
    load_seconds += (now_ms() - t0) / 1e3;
    for (int i = 0; i < NWORKERS; i++) {
        worker *w = &workers[i];
        acked_total += w->acked_phase;
        CHECKF(w->bad == 0, "phase %d: %d bad answers to the load, the first: %s", cur_phase,
               w->bad, w->bad_what);
        w->bad = 0;
    }
    return st;
}

static size_t count_refusals(void)
{
    size_t n = 0;
    for (int wi = 0; wi < NWORKERS; wi++)
        for (size_t k = 0; k < workers[wi].n; k++) {
            const round_rec *r = &workers[wi].r[k];
            if (r->state == R_ACKED)
                n += (size_t)popcount32(r->cohort & ~r->admitted);
        }
    return n;
}

static off_t file_size(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0 ? sb.st_size : -1;
}

/* What a crash in the middle of writing a record leaves (a write cut short by a power
 * loss; a SIGKILL cannot cut a write(2) of a regular file): a record header announcing 64
 * bytes of payload, followed by only 23 of them. Recovery must drop it silently. */
static int append_torn_tail(void)
{
    char p[256];
    snprintf(p, sizeof p, "%s/wal.log", data_path);
    int fd = open(p, O_WRONLY | O_APPEND);
    if (fd < 0)
        return -1;
    unsigned char rec[17 + 23];
    memset(rec, 0x5a, sizeof rec);
    rec[0] = 64, rec[1] = rec[2] = rec[3] = 0; /* u32 len, little-endian */
    int rc = write(fd, rec, sizeof rec) == (ssize_t)sizeof rec ? 0 : -1;
    close(fd);
    if (rc == 0)
        torn_tails++;
    return rc;
}

/* ---- the tests ---- */

/* 8-10 cycles: load, SIGKILL at a random moment, restart, verify everything. */
static void kill9_cycles_lose_no_acknowledged_round(void)
{
    if (ensure_set_up() != 0)
        return;
    int ncycles = 8 + (int)(tl_splitmix(&main_rng) % 3);
    for (int cyc = 0; cyc < ncycles; cyc++) {
        int before = tl_failed_checks;
        long delay = 100 + (long)(tl_splitmix(&main_rng) % 501);
        cur_phase = cyc + 1;
        size_t acked0 = acked_total;
        int alive;
        int st = load_then_signal(delay, SIGKILL, &alive);
        CHECKF(alive, "cycle %d: dpbudgetd died under load before the kill (seed %" PRIu64 ")",
               cyc + 1, seed);
        CHECKF(!alive || (st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL),
               "cycle %d: dpbudgetd did not end by the SIGKILL (status %d)", cyc + 1, st);
        log_marker("SIGKILL after cycle", cyc + 1);
        left_snap_tmp += file_size(data_path, "snapshot.tmp") >= 0;
        left_wal_tmp += file_size(data_path, "wal.log.tmp") >= 0;
        if (cyc % 3 == 1) {
            CHECKF(append_torn_tail() == 0, "cycle %d: cannot append a torn tail: %s", cyc + 1,
                   strerror(errno));
            log_marker("torn tail appended after cycle", cyc + 1);
        }
        double ms = start_daemon();
        CHECKF(ms >= 0, "cycle %d (seed %" PRIu64 "): dpbudgetd refused to restart after the kill",
               cyc + 1, seed);
        if (ms < 0) {
            dump_log();
            broken = 1;
            return;
        }
        CHECKF(ms <= RESTART_LIMIT_MS, "cycle %d: the restart took %.0f ms (limit %.0f)", cyc + 1,
               ms, RESTART_LIMIT_MS);
        char when[64];
        snprintf(when, sizeof when, "cycle %d (seed %" PRIu64 ")", cyc + 1, seed);
        size_t pres0 = inflight_present, abs0 = inflight_absent;
        double v0 = now_ms();
        verify(when);
        double vms = now_ms() - v0;
        if (getenv("TEST_VERBOSE"))
            fprintf(stderr,
                    "cycle %d: kill after %ld ms, %zu acknowledged, in flight %zu present / "
                    "%zu absent, restart %.1f ms, verification %.0f ms\n",
                    cyc + 1, delay, acked_total - acked0, inflight_present - pres0,
                    inflight_absent - abs0, ms, vms);
        cycles_done++;
        if (tl_failed_checks != before) {
            fprintf(stderr, "cycle %d failed (seed %" PRIu64 ", data %s)\n", cyc + 1, seed,
                    data_path);
            dump_log();
            broken = 1;
            return;
        }
    }
    refusals = count_refusals();
    CHECKF(refusals > 0, "no round refused anybody: the small budgets were never reached");
}

/* SIGTERM under load: exit 0 after a final snapshot; a restart finds the same ledger. */
static void sigterm_exits_0_and_restart_recovers(void)
{
    if (ensure_set_up() != 0)
        return;
    int before = tl_failed_checks;
    cur_phase++;
    int alive;
    long delay = 100 + (long)(tl_splitmix(&main_rng) % 301);
    int st = load_then_signal(delay, SIGTERM, &alive);
    CHECKF(alive, "dpbudgetd died under load before the SIGTERM");
    CHECKF(!alive || st != -1, "dpbudgetd did not stop within 5 s of SIGTERM");
    CHECKF(!alive || st == -1 || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
           "dpbudgetd ended with %s %d after SIGTERM", WIFEXITED(st) ? "exit status" : "signal",
           WIFEXITED(st)     ? WEXITSTATUS(st)
           : WIFSIGNALED(st) ? WTERMSIG(st)
                             : -1);
    off_t snap = file_size(data_path, "snapshot"), wal = file_size(data_path, "wal.log");
    CHECKF(snap > 0, "no snapshot after a clean shutdown (size %lld)", (long long)snap);
    CHECKF(wal == 0,
           "wal.log holds %lld bytes after a clean shutdown (want 0: the final "
           "snapshot covers it)",
           (long long)wal);
    log_marker("SIGTERM, restart", starts);
    double ms = start_daemon();
    CHECKF(ms >= 0 && ms <= RESTART_LIMIT_MS, "restart after SIGTERM: %.0f ms", ms);
    if (ms < 0) {
        dump_log();
        broken = 1;
        return;
    }
    verify("after SIGTERM and restart");
    st = stop_daemon(SIGTERM, 5000);
    CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "final SIGTERM: dpbudgetd status %d",
           st);
    if (tl_failed_checks != before)
        dump_log();

    /* the summary */
    size_t posted = 0;
    for (int wi = 0; wi < NWORKERS; wi++)
        posted += workers[wi].n;
    double mn = 1e300, mx = 0, sum = 0;
    int n = starts < MAX_STARTS ? starts : MAX_STARTS;
    for (int i = 1; i < n; i++) { /* start 0 was on an empty directory */
        mn = start_ms[i] < mn ? start_ms[i] : mn;
        mx = start_ms[i] > mx ? start_ms[i] : mx;
        sum += start_ms[i];
    }
    printf(
        "persist: seed %" PRIu64 ", %d kill cycles + SIGTERM; rounds posted %zu, "
        "acknowledged %zu (%.0f/s under load), refusals %zu; in flight at a kill or the "
        "SIGTERM: %zu present, %zu absent; restarts %d, %.1f / %.1f / %.1f ms (min / mean / max); "
        "torn tails appended %d; kills that left snapshot.tmp %d, wal.log.tmp %d\n",
        seed, cycles_done, posted, acked_total,
        load_seconds > 0 ? (double)acked_total / load_seconds : 0.0, count_refusals(),
        inflight_present, inflight_absent, n - 1, n > 1 ? mn : 0.0, n > 1 ? sum / (n - 1) : 0.0, mx,
        torn_tails, left_snap_tmp, left_wal_tmp);
}

/* ---- main ---- */

static int is_executable(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* Run the shell command cmd: its exit status, its output into out. */
static int run_capture(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run `dpbudgetd --verify dir`: exit status, output (stdout and stderr) into out. */
static int run_verify(const char *dir, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --verify '%s' 2>&1", daemon_bin, dir);
    return run_capture(cmd, out, cap);
}

/* The offline check: a sound directory, a torn tail (reported, exit 0) and damage before the
 * tail (exit 1, naming the file and offset); the directory itself is never modified. */
static void verify_command_reports_damage(void)
{
    char dir[] = "/tmp/dpb-verify-XXXXXX", wal[128], out[4096];
    CHECK(mkdtemp(dir) != NULL);
    ledger_options o = {dir, NULL, 0, 0.0, 0.0, 1000000, 0, 0, NULL, 0, 0, 0};
    ledger *l;
    CHECK(ledger_open(&o, &l, NULL) == DPB_OK);
    for (int i = 0; i < 3; i++) {
        ledger_client in, res;
        memset(&in, 0, sizeof in);
        snprintf(in.id, sizeof in.id, "v%d", i);
        in.epsilon = 1.0;
        in.delta = 1e-5;
        int created;
        CHECK(ledger_put_client(l, &in, &created, &res, NULL) == DPB_OK);
    }
    ledger_close_nosnapshot(l); /* leave the log as the only record */
    snprintf(wal, sizeof wal, "%s/wal.log", dir);
    CHECK(run_verify(dir, out, sizeof out) == 0 && strstr(out, "\"clients\":3") != NULL);
    /* a torn tail: reported, still sound, and the file untouched */
    FILE *f = fopen(wal, "ab");
    CHECK(f != NULL && fwrite("torn-write-torn-write-torn", 1, 26, f) == 26 && fclose(f) == 0);
    struct stat before, after;
    CHECK(stat(wal, &before) == 0);
    CHECK(run_verify(dir, out, sizeof out) == 0 && strstr(out, "\"torn_tail_bytes\":26") != NULL);
    CHECK(stat(wal, &after) == 0 && after.st_size == before.st_size);
    /* damage in the first of three records: refused with the path and the offset */
    f = fopen(wal, "r+b");
    int ch = f && fseek(f, 30, SEEK_SET) == 0 ? fgetc(f) : EOF;
    CHECK(ch != EOF && fseek(f, 30, SEEK_SET) == 0 && fputc(ch ^ 0x40, f) != EOF && fclose(f) == 0);
    CHECKF(run_verify(dir, out, sizeof out) == 1 && strstr(out, "offset") != NULL &&
               strstr(out, dir) != NULL,
           "output: %s", out);
    unlink(wal);
    rmdir(dir);
}

/* A flipped bit in the snapshot's header (each bit of its seq, and of every other field):
 * --verify reports the directory as damaged, naming the file and offset (before: a flipped
 * seq bit made recovery skip or cut log records and --verify called the directory sound). */
static void verify_reports_snapshot_header_damage(void)
{
    char dir[] = "/tmp/dpb-verify-XXXXXX", snap[128], wal[128], out[4096];
    CHECK(mkdtemp(dir) != NULL);
    ledger_options o = {dir, NULL, 0, 0.0, 0.0, 1000000, 0, 0, NULL, 0, 0, 0};
    ledger *l;
    for (int pass = 0; pass < 2; pass++) {
        CHECK(ledger_open(&o, &l, NULL) == DPB_OK);
        for (int i = 0; i < 3; i++) {
            ledger_client in, res;
            memset(&in, 0, sizeof in);
            snprintf(in.id, sizeof in.id, "p%dv%d", pass, i);
            in.epsilon = 1.0;
            in.delta = 1e-5;
            int created;
            CHECK(ledger_put_client(l, &in, &created, &res, NULL) == DPB_OK);
        }
        if (pass == 0)
            ledger_close(l); /* a snapshot, the log emptied */
        else
            ledger_close_nosnapshot(l); /* three records after the snapshot */
    }
    snprintf(snap, sizeof snap, "%s/snapshot", dir);
    snprintf(wal, sizeof wal, "%s/wal.log", dir);
    CHECK(run_verify(dir, out, sizeof out) == 0 && strstr(out, "\"clients\":6") != NULL);
    unsigned char hdr[32];
    FILE *f = fopen(snap, "r+b");
    CHECK(f != NULL && fread(hdr, 1, 32, f) == 32);
    struct stat before, after;
    CHECK(stat(wal, &before) == 0);
    int bits[256], nb = 0;
    for (int b = 0; b < 256; b++)
        if ((b >= 96 && b < 160) || b % 7 == 0) /* the seq, and a spread of the others */
            bits[nb++] = b;
    for (int k = 0; f != NULL && k < nb; k++) {
        int b = bits[k];
        unsigned char c = hdr[b / 8] ^ (unsigned char)(1u << (b % 8));
        CHECK(fseek(f, b / 8, SEEK_SET) == 0 && fputc(c, f) != EOF && fflush(f) == 0);
        int rc = run_verify(dir, out, sizeof out);
        CHECKF(rc == 1 && strstr(out, "offset") != NULL && strstr(out, dir) != NULL,
               "header bit %d: exit %d, output: %s", b, rc, out);
        CHECK(fseek(f, b / 8, SEEK_SET) == 0 && fputc(hdr[b / 8], f) != EOF && fflush(f) == 0);
    }
    if (f)
        fclose(f);
    CHECK(stat(wal, &after) == 0 && after.st_size == before.st_size);
    CHECK(run_verify(dir, out, sizeof out) == 0 && strstr(out, "\"clients\":6") != NULL);
    unlink(wal);
    unlink(snap);
    char lock[128];
    snprintf(lock, sizeof lock, "%s/LOCK", dir);
    unlink(lock);
    rmdir(dir);
}

/* ---- start-up on an unusable data directory: say what is wrong ---- */

/* Start dpbudgetd on data_dir (prefix: words put before it, e.g. setpriv) and let it run at
 * most 5 s: its exit status (124: still running, killed) and its output into out. */
static int run_daemon_on(const char *prefix, const char *data_dir, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s timeout 5 '%s' --port 0 --data-dir '%s' 2>&1", prefix, daemon_bin,
             data_dir);
    return run_capture(cmd, out, cap);
}

/* The daemon refuses data_dir with exit 1, naming path and want (an errno name or text),
 * and (unless busy) does not blame another daemon. */
static void refuses(const char *prefix, const char *data_dir, const char *path, const char *want,
                    int busy)
{
    char out[4096];
    int rc = run_daemon_on(prefix, data_dir, out, sizeof out);
    CHECKF(rc == 1 && strstr(out, path) != NULL && strstr(out, want) != NULL &&
               (strstr(out, "in use by another") != NULL) == busy && strstr(out, "hint") != NULL,
           "%s: exit %d, output: %s", data_dir, rc, out);
}

/* Before: four of these were reported as "in use by another dpbudgetd". */
static void startup_says_what_is_wrong(void)
{
    char dir[] = "/tmp/dpb-startup-XXXXXX", p[256], q[256];
    CHECK(mkdtemp(dir) != NULL);
    /* the data directory is a file; a component of its path is a file */
    snprintf(p, sizeof p, "%s/afile", dir);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL && fclose(f) == 0);
    refuses("", p, p, "ENOTDIR", 0);
    snprintf(q, sizeof q, "%s/afile/sub", dir);
    refuses("", q, q, "ENOTDIR", 0);
    /* a dangling symbolic link */
    snprintf(p, sizeof p, "%s/dangling", dir);
    CHECK(symlink("/nonexistent-dpb/x", p) == 0);
    refuses("", p, "/nonexistent-dpb/x", "ENOENT", 0);
    /* LOCK, wal.log, snapshot or snapshot.tmp a directory */
    static const char *const names[] = {"LOCK", "wal.log", "snapshot", "snapshot.tmp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/d%zu", dir, i);
        snprintf(q, sizeof q, "%s/%s", p, names[i]);
        CHECK(mkdir(p, 0700) == 0 && mkdir(q, 0700) == 0);
        refuses("", p, q, i == 0 ? "EISDIR" : i == 3 ? "not a regular file" : "Is a directory", 0);
    }
    /* a directory the daemon's user may not write (root ignores modes: run as nobody) */
    snprintf(p, sizeof p, "%s/ro-mode", dir);
    CHECK(mkdir(p, 0555) == 0 && chmod(p, 0555) == 0 && chmod(dir, 0755) == 0);
    if (geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0) {
        snprintf(q, sizeof q, "%s/LOCK", p);
        refuses("setpriv --reuid=65534 --regid=65534 --clear-groups", p, q, "EACCES", 0);
    }
    /* really in use */
    snprintf(p, sizeof p, "%s/busy", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execl(daemon_bin, daemon_bin, "--port", "0", "--data-dir", p, (char *)NULL);
        _exit(127);
    }
    snprintf(q, sizeof q, "%s/LOCK", p);
    for (int i = 0; i < 500 && access(q, F_OK) != 0; i++)
        sleep_ms(10);
    sleep_ms(100);
    refuses("", p, q, "another --data-dir", 1);
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    /* a read-only mount (a tmpfs in a private mount namespace, in a child) */
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        snprintf(p, sizeof p, "%s/rofs", dir);
        int fails = tl_failed_checks;
        if (mkdir(p, 0700) == 0 && unshare(CLONE_NEWNS) == 0 &&
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
            mount("tmpfs", p, "tmpfs", MS_RDONLY, "size=64k") == 0) {
            snprintf(q, sizeof q, "%s/LOCK", p);
            refuses("", p, q, "EROFS", 0);
            umount2(p, MNT_DETACH);
        } else {
            printf("  SKIP startup_says_what_is_wrong (read-only mount): %s\n", strerror(errno));
        }
        fflush(NULL);
        _exit(tl_failed_checks == fails ? 0 : 1);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    (void)tl_remove_dir(dir);
}

/* ---- a full disk: the ledger goes read-only, and says so ---- */

/* The request's status, 0 if no complete answer; *ro: Ledger-Read-Only was sent. */
static long req(conn *c, const char *path, const char *body, int *ro)
{
    long st = 0;
    if (conn_request(c, path, body, &st) != 0)
        st = 0;
    if (ro)
        *ro = c->read_only;
    return st;
}

/* Fill the file system of dir (a small tmpfs) with a file until no block is left. */
static int fill(const char *dir)
{
    char path[160];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    static char block[4096];
    for (int i = 0; i < 1 << 20; i++)
        if (write(fd, block, sizeof block) < (ssize_t)sizeof block)
            break;
    close(fd);
    return 0;
}

/* The body of full_disk_read_only, in a child process with its own mount namespace (so the
 * tmpfs vanishes with it). Returns the number of failed checks. */
static int full_disk_child(void)
{
    char dir[] = "/tmp/dpb-full-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    int fails0 = tl_failed_checks;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, "size=2m") != 0) {
        printf("  SKIP full_disk_read_only: cannot mount a tmpfs (%s): needs root\n",
               strerror(errno));
        rmdir(dir);
        return 0;
    }
    daemon_pid = -1;
    snprintf(port_path, sizeof port_path, "%s.port", dir);
    snprintf(log_path, sizeof log_path, "%s.log", dir);
    snprintf(data_path, sizeof data_path, "%s/data", dir);
    extra_arg[0] = "--default-budget";
    extra_arg[1] = "100,1e-5";
    conn c;
    char body[16384];
    int ro = 0;
    CHECK(conn_init(&c) == 0 && start_daemon() >= 0);
    const char *ok_round = "{\"round_id\":\"full-r1\",\"event\":{\"class_name\":"
                           "\"GaussianDpEvent\",\"noise_multiplier\":5},\"participants\":"
                           "[\"fa\",\"fb\"]}";
    CHECK(req(&c, "/v1/rounds", ok_round, &ro) == 200 && !ro);
    CHECK(req(&c, "/healthz", NULL, &ro) == 200 && !ro && strstr(c.buf, "\"writable\""));
    CHECK(fill(dir) == 0);
    /* a round with 200 new clients: their records fill the last free bytes, the rest fails */
    int n = snprintf(body, sizeof body,
                     "{\"round_id\":\"full-r2\",\"event\":{\"class_name\":\"GaussianDpEvent\","
                     "\"noise_multiplier\":7},\"participants\":[\"fa\"");
    for (int i = 0; i < 200; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, ",\"new-client-%03d\"", i);
    snprintf(body + n, sizeof body - (size_t)n, "]}");
    long st = req(&c, "/v1/rounds", body, &ro);
    CHECKF(st == 503 && strstr(c.buf, "not_durable"), "full disk: %ld %s", st, c.buf);
    /* nothing of it is shown, replayed or charged */
    for (int pass = 0; pass < 2; pass++) {
        st = req(&c, "/v1/rounds/full-r2", NULL, &ro);
        CHECKF(st == 404, "pass %d: GET full-r2: %ld", pass, st);
        CHECKF(req(&c, "/v1/clients/new-client-000", NULL, &ro) == 404, "pass %d: %s", pass, c.buf);
        CHECK(req(&c, "/v1/clients/fa", NULL, &ro) == 200 && strstr(c.buf, "\"rounds\":1,"));
        CHECK(pass == 1 || ro);
        CHECK(req(&c, "/v1/summary", NULL, &ro) == 200 && strstr(c.buf, "\"clients\":2,") &&
              strstr(c.buf, "\"rounds\":1,"));
        CHECK(pass == 1 || (ro && strstr(c.buf, "\"read_only\":true")));
        st = req(&c, "/v1/rounds", body, &ro);
        if (pass == 0) {
            /* the retry is refused, not replayed; a round durable before is replayed */
            CHECKF(st == 503 && strstr(c.buf, "read_only"), "retry: %ld %s", st, c.buf);
            CHECK(req(&c, "/v1/rounds", ok_round, &ro) == 200);
            /* liveness stays up (a restart cannot fix the disk), readiness goes down */
            CHECK(req(&c, "/healthz", NULL, &ro) == 200 && ro && strstr(c.buf, "\"read_only\""));
            CHECK(req(&c, "/readyz", NULL, &ro) == 503 && ro && strstr(c.buf, "read_only"));
            CHECK(stop_daemon(SIGTERM, 10000) == 0);
            CHECKF(start_daemon() >= 0, "restart on the full disk");
            CHECK(req(&c, "/readyz", NULL, &ro) == 200 && !ro);
        }
    }
    stop_daemon(SIGKILL, 5000);
    conn_free(&c);
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    unlink(port_path);
    unlink(log_path);
    return tl_failed_checks - fails0;
}

/* A real dpbudgetd whose disk fills up mid-round (a tmpfs in a private mount namespace):
 * 503 not_durable, and nothing of the round (not even the clients it created) is shown,
 * replayed or charged, before or after a restart; reads, /healthz and /readyz say the ledger
 * is read-only. */
static void full_disk_read_only(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int failed = full_disk_child();
        fflush(NULL);
        _exit(failed == 0 ? 0 : 1);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the full-disk checks failed (see above)");
}

/* ---- two-phase rounds across kill -9 and restarts ---- */

#define G5_EVENT "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}"

/* The "state" of round rid ("" when unknown), by GET. */
static const char *round_state(conn *c, const char *rid, char *out, size_t cap)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/rounds/%s", rid);
    out[0] = '\0';
    if (req(c, path, NULL, NULL) == 200) {
        const char *p = strstr(c->buf, "\"state\":\"");
        if (p)
            snprintf(out, cap, "%.*s", (int)strcspn(p + 9, "\""), p + 9);
    }
    return out;
}

/* The "rounds" of a client (-1 when unknown). */
static long client_rounds(conn *c, const char *id)
{
    char path[96];
    snprintf(path, sizeof path, "/v1/clients/%s", id);
    if (req(c, path, NULL, NULL) != 200)
        return -1;
    const char *p = strstr(c->buf, "\"rounds\":");
    return p ? atol(p + 9) : -1;
}

/* A one-step round of G5 for id: 1 if charged, 0 if refused, -1 on error. */
static int charge_one(conn *c, const char *rid, const char *id)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"round_id\":\"%s\",\"event\":" G5_EVENT ",\"participants\":[\"%s\"]}", rid, id);
    if (req(c, "/v1/rounds", body, NULL) != 200)
        return -1;
    return strstr(c->buf, "\"charged\":1") != NULL;
}

static int reservations_child(void)
{
    int fails0 = tl_failed_checks;
    char dir[64], st[32];
    snprintf(dir, sizeof dir, "/tmp/dpb-resv-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(port_path, sizeof port_path, "%s/port", dir);
    snprintf(log_path, sizeof log_path, "%s/daemon.log", dir);
    snprintf(data_path, sizeof data_path, "%s/data", dir);
    conn c;
    CHECK(conn_init(&c) == 0);
    CHECK(start_daemon() >= 0);
    /* budgets of 1: one round of G5 (~0.79) fits, two do not */
    static const char *const ids[] = {"ra", "rb", "rc", "rd", "re"};
    for (size_t i = 0; i < 5; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/clients/%s", ids[i]);
        static const char b[] = "{\"budget\":{\"epsilon\":1,\"delta\":1e-5}}";
        api_reply r;
        CHECK(api_call("PUT", path, "application/json", b, sizeof b - 1, &r) == 0 &&
              r.status == 201);
        api_reply_free(&r);
    }
    { /* a named event, used after the restarts below */
        static const char b[] = "{\"event\":" G5_EVENT "}";
        api_reply r;
        CHECK(api_call("PUT", "/v1/events/pg5", "application/json", b, sizeof b - 1, &r) == 0 &&
              r.status == 201);
        api_reply_free(&r);
    }
    CHECK(req(&c, "/v1/rounds",
              "{\"round_id\":\"long\",\"event\":" G5_EVENT
              ",\"participants\":[\"ra\",\"rb\",\"rc\"],"
              "\"phase\":\"reserve\",\"reservation_ttl_seconds\":3600}",
              NULL) == 200);
    CHECK(req(&c, "/v1/rounds",
              "{\"round_id\":\"short\",\"event\":" G5_EVENT ",\"participants\":[\"rd\"],"
              "\"phase\":\"reserve\",\"reservation_ttl_seconds\":2}",
              NULL) == 200);
    double t_short = now_ms();
    CHECK(charge_one(&c, "one-a", "ra") == 0); /* held by "long" */
    /* kill -9 with both reservations outstanding */
    stop_daemon(SIGKILL, 5000);
    CHECK(start_daemon() >= 0);
    CHECKF(strcmp(round_state(&c, "long", st, sizeof st), "reserved") == 0, "long: %s", st);
    CHECK(charge_one(&c, "one-a2", "ra") == 0); /* still held after the restart */
    CHECK(req(&c, "/v1/eligibility", "{\"event\":" G5_EVENT ",\"clients\":[\"ra\",\"re\"]}",
              NULL) == 200 &&
          strstr(c.buf, "\"eligible\":1,"));
    /* commit with a dropout, then kill -9 at once: acknowledged, so it survives */
    CHECK(req(&c, "/v1/rounds/long/commit", "{\"reported\":[\"ra\",\"rc\"]}", NULL) == 200);
    stop_daemon(SIGKILL, 5000);
    CHECK(start_daemon() >= 0);
    CHECKF(strcmp(round_state(&c, "long", st, sizeof st), "committed") == 0, "long: %s", st);
    CHECK(client_rounds(&c, "ra") == 1 && client_rounds(&c, "rb") == 0 &&
          client_rounds(&c, "rc") == 1);
    /* the history, from the log: the round is there, charged for ra, released for rb */
    CHECK(req(&c, "/v1/clients/ra/rounds", NULL, NULL) == 200 &&
          strstr(c.buf, "\"round_id\":\"long\",\"seq\":") &&
          strstr(c.buf, "\"state\":\"charged\""));
    CHECK(req(&c, "/v1/clients/rb/rounds", NULL, NULL) == 200 &&
          strstr(c.buf, "\"state\":\"released\""));
    CHECK(req(&c, "/v1/rounds/long/commit", "{\"reported\":[\"rc\",\"ra\"]}", NULL) == 200);
    CHECK(charge_one(&c, "one-b", "rb") == 1); /* rb's reservation was released */
    /* "short" expires across the restart (at most 2 s after it was made, the sweep at most
     * a second later); waited for at most 6 s */
    int expired = 0;
    while (!expired && now_ms() - t_short < 6000) {
        expired = strcmp(round_state(&c, "short", st, sizeof st), "expired") == 0;
        if (!expired)
            sleep_ms(100);
    }
    CHECKF(expired, "short: %s", st);
    CHECK(req(&c, "/v1/rounds/short/commit", "{\"reported\":[\"rd\"]}", NULL) == 409 &&
          strstr(c.buf, "reservation_expired"));
    /* a reservation outstanding across a clean stop (the final snapshot holds it) */
    CHECK(req(&c, "/v1/rounds",
              "{\"round_id\":\"snap\",\"event\":" G5_EVENT ",\"participants\":[\"re\"],"
              "\"phase\":\"reserve\"}",
              NULL) == 200);
    CHECK(stop_daemon(SIGTERM, 10000) == 0);
    CHECK(file_size(data_path, "wal.log") == 0);
    CHECK(start_daemon() >= 0);
    CHECKF(strcmp(round_state(&c, "snap", st, sizeof st), "reserved") == 0, "snap: %s", st);
    CHECKF(strcmp(round_state(&c, "short", st, sizeof st), "expired") == 0, "short: %s", st);
    CHECKF(strcmp(round_state(&c, "long", st, sizeof st), "committed") == 0, "long: %s", st);
    CHECK(charge_one(&c, "one-e", "re") == 0); /* held, from the snapshot */
    CHECK(charge_one(&c, "one-d", "rd") == 1); /* released by the expiry */
    CHECK(req(&c, "/v1/rounds/snap/release", "{}", NULL) == 200);
    stop_daemon(SIGKILL, 5000);
    CHECK(start_daemon() >= 0);
    CHECKF(strcmp(round_state(&c, "snap", st, sizeof st), "released") == 0, "snap: %s", st);
    CHECK(charge_one(&c, "one-e2", "re") == 1);
    /* the named event, from the log (kill -9 above) and the snapshot (SIGTERM above) */
    CHECK(req(&c, "/v1/events/pg5", NULL, NULL) == 200 && strstr(c.buf, "\"created_seq\""));
    CHECK(req(&c, "/v1/eligibility", "{\"event_name\":\"pg5\",\"clients\":[\"rb\"]}", NULL) == 200);
    if (tl_failed_checks != fails0)
        dump_log();
    stop_daemon(SIGKILL, 5000);
    conn_free(&c);
    (void)tl_remove_dir(dir);
    return tl_failed_checks - fails0;
}

/* Reservations are durable: after kill -9 they are still held (and counted in admissions),
 * an acknowledged commit or release stays, a reservation that expires across a restart is
 * released with a logged record, and a clean stop's snapshot keeps an outstanding one. */
static void reservations_survive_kill9_and_expire(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int failed = reservations_child();
        fflush(NULL);
        _exit(failed == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "the reservation checks failed (see above)");
}

static void daemon_given(void)
{
    CHECKF(0, "no dpbudgetd: usage: persist_tests DPBUDGETD [FILTER] (or set DPBUDGETD)");
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    setenv("DPBUDGET_SHUTDOWN_GRACE", "0", 0); /* SIGTERM stops at once (no load balancer) */
    if (argc > 1 && is_executable(argv[1])) {
        daemon_bin = argv[1];
        filter = argc > 2 ? argv[2] : NULL;
    } else {
        daemon_bin = getenv("DPBUDGETD");
        filter = argc > 1 ? argv[1] : NULL;
    }
    char *run_argv[] = {argv[0], (char *)filter, NULL};
    int run_argc = filter ? 2 : 1;
    if (daemon_bin == NULL || daemon_bin[0] == '\0') {
        static const tl_test none[] = {TL_T(daemon_given)};
        return tl_run("persist", none, 1, 1, run_argv);
    }
    const char *s = getenv("CRASH_SEED");
    seed = s && *s ? strtoull(s, NULL, 0) : DEFAULT_SEED;
    printf("persist: seed %" PRIu64 " (CRASH_SEED=%" PRIu64 " reproduces the kill delays and "
           "cohorts)\n",
           seed, seed);
    fflush(stdout);
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "persist_tests: curl_global_init failed\n");
        return 1;
    }
    static const tl_test all[] = {
        TL_T(kill9_cycles_lose_no_acknowledged_round),
        TL_T(sigterm_exits_0_and_restart_recovers),
        TL_T(verify_command_reports_damage),
        TL_T(verify_reports_snapshot_header_damage),
        TL_T(full_disk_read_only),
        TL_T(startup_says_what_is_wrong),
        TL_T(reservations_survive_kill9_and_expire),
    };
    int rc = tl_run("persist", all, sizeof all / sizeof all[0], run_argc, run_argv);
    if (daemon_pid > 0)
        stop_daemon(SIGKILL, 5000);
    if (set_up) {
        if (rc == 0)
            (void)tl_remove_dir(tmpdir);
        else
            fprintf(stderr, "persist_tests: data kept in %s\n", tmpdir);
    }
    for (int i = 0; i < NWORKERS; i++)
        free(workers[i].r);
    curl_global_cleanup();
    return rc;
}
