/* test_overload.c - heavy computations must not starve the ledger: with the compute
 * endpoints saturated by expensive PLD requests, /healthz, a ledger read and a 100-participant
 * POST /v1/rounds are answered while every computation is still running; a full compute pool
 * answers 503 overloaded with Retry-After at once; a computation past --compute-deadline is
 * stopped (422 compute_deadline_exceeded) on every compute route. Each test starts its own
 * dpbudgetd (after the main suite's daemon has stopped). Latency bounds are generous (1 s):
 * what is asserted is the order of events, not a speed. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#include "suites.h"

/* About 1.5 s of PLD work on one core (a 3e-6 grid, 1000 compositions of a sampled
 * Gaussian); MEDIUM about 1 s, LIGHTER about 0.6 s. */
#define PLD_EVENT                                                                                  \
    "\"accountant\": \"pld\", \"value_discretization_interval\": %s, \"event\": "                  \
    "{\"class_name\": \"SelfComposedDpEvent\", \"count\": 1000, \"event\": "                       \
    "{\"class_name\": \"PoissonSampledDpEvent\", \"sampling_probability\": 0.01, \"event\": "      \
    "{\"class_name\": \"GaussianDpEvent\", \"noise_multiplier\": 0.8}}}"
#define HEAVY_H "3e-6"
#define MEDIUM_H "5e-6"
#define LIGHTER_H "1e-5"

typedef struct {
    pthread_t tid;
    const char *h;
    long status;
    char code[48];
    char retry_after[16];
    double done_at;
} heavy;

static void *heavy_run(void *arg)
{
    heavy *x = arg;
    api_reply r;
    char body[1024];
    snprintf(body, sizeof body, "{" PLD_EVENT ", \"epsilon\": 1.0}", x->h);
    api_call("POST", "/v1/delta", "application/json", body, strlen(body), &r);
    x->status = r.status;
    const char *code = json_string_value(json_object_get(r.json, "code"));
    snprintf(x->code, sizeof x->code, "%s", code ? code : "");
    snprintf(x->retry_after, sizeof x->retry_after, "%s", r.retry_after);
    x->done_at = tl_now();
    api_reply_free(&r);
    return NULL;
}

static int start(const char *const *extra)
{
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    return st == 0;
}

/* One probe: the status, and when it was answered (*done). */
static long probe(const char *method, const char *path, const char *body, double *took,
                  double *done)
{
    api_reply r;
    double t0 = tl_now();
    api_call(method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0, &r);
    *done = tl_now();
    *took = *done - t0;
    long st = r.status;
    if (st != 200)
        fprintf(stderr, "  %s %s: %ld %s\n", method, path, st, r.body);
    api_reply_free(&r);
    return st;
}

/* A round of 100 participants (clients made on first use by --default-budget). */
static char *round_body(const char *id)
{
    size_t cap = 4096;
    char *b = malloc(cap);
    if (b == NULL)
        return NULL;
    int n = snprintf(b, cap, "{\"round_id\": \"%s\", \"participants\": [", id);
    for (int i = 0; i < 100; i++)
        n += snprintf(b + n, cap - (size_t)n, "%s\"p%d\"", i ? ", " : "", i);
    snprintf(b + n, cap - (size_t)n,
             "], \"event\": {\"class_name\": \"GaussianDpEvent\", \"noise_multiplier\": 20}}");
    return b;
}

/* While every compute request is running, probes, a ledger read and a charge are answered,
 * each well before the first computation ends. */
static void check_probes_while_busy(heavy *hv, int nh, const char *round_id)
{
    const struct {
        const char *method, *path;
    } P[] = {{"GET", "/healthz"},
             {"GET", "/v1/summary"},
             {"POST", "/v1/rounds"},
             {"GET", "/readyz"},
             {"GET", "/v1/clients/p7"}};
    char *rb = round_body(round_id);
    double last_done = 0.0;
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        double took = 0, done = 0;
        int post = strcmp(P[i].method, "POST") == 0;
        long st = probe(P[i].method, P[i].path, post ? rb : NULL, &took, &done);
        CHECKF(st == 200, "%s %s while compute is saturated: %ld", P[i].method, P[i].path, st);
        CHECKF(took < 1.0, "%s %s took %.3f s while compute is saturated (want < 1 s)", P[i].method,
               P[i].path, took);
        if (done > last_done)
            last_done = done;
    }
    free(rb);
    /* the structural property: all of it was answered while the computations still ran */
    for (int i = 0; i < nh; i++) {
        pthread_join(hv[i].tid, NULL);
        if (hv[i].status == 200)
            CHECKF(hv[i].done_at > last_done,
                   "computation %d ended before the probes were answered: they waited for it", i);
    }
}

/* With the default pool (one compute thread per CPU, 16 waiting) and only two HTTP workers,
 * two concurrent expensive computations leave the probes and the ledger answering (before
 * the pool they held both workers: the probes waited for a computation to end). */
static void compute_saturation_leaves_ledger_fast(void)
{
    const char *extra[] = {"--default-budget", "1000,0.5", "--compute-deadline", "20", NULL};
    if (!start(extra))
        return;
    heavy hv[2];
    memset(hv, 0, sizeof hv);
    /* one after another, so that each finds an idle HTTP worker (before the pool each
     * worker then sat in its computation: nothing was left for the probes) */
    struct timespec gap = {0, 80 * 1000000L};
    for (int i = 0; i < 2; i++) {
        hv[i].h = MEDIUM_H;
        pthread_create(&hv[i].tid, NULL, heavy_run, &hv[i]);
        nanosleep(&gap, NULL);
    }
    check_probes_while_busy(hv, 2, "busy-1");
    for (int i = 0; i < 2; i++)
        CHECKF(hv[i].status == 200 || hv[i].status == 503 ||
                   strcmp(hv[i].code, "compute_deadline_exceeded") == 0,
               "computation %d: %ld %s", i, hv[i].status, hv[i].code);
    api_daemon_stop();
}

/* One compute thread and one place waiting: of four concurrent computations two are refused
 * at once with 503 overloaded and a Retry-After, and the ledger is served meanwhile. */
static void full_compute_pool_is_503_with_retry_after(void)
{
    const char *extra[] = {"--default-budget",
                           "1000,0.5",
                           "--compute-threads",
                           "1",
                           "--compute-queue",
                           "1",
                           "--compute-deadline",
                           "20",
                           NULL};
    if (!start(extra))
        return;
    heavy hv[4];
    memset(hv, 0, sizeof hv);
    double t0 = tl_now();
    for (int i = 0; i < 4; i++) {
        hv[i].h = LIGHTER_H;
        pthread_create(&hv[i].tid, NULL, heavy_run, &hv[i]);
    }
    struct timespec ts = {0, 150 * 1000000L};
    nanosleep(&ts, NULL);
    api_reply m;
    api_get("/metrics", &m);
    CHECKF(m.status == 200 && strstr(m.body, "\ndpbudget_compute_busy 2\n") &&
               strstr(m.body, "\ndpbudget_compute_places 2\n"),
           "/metrics while the pool is full: %ld, busy/places lines missing", m.status);
    api_reply_free(&m);
    /* a closed form does not queue for the pool: answered while it is full */
    api_reply r;
    double t1 = tl_now();
    api_postf(&r, "/v1/delta",
              "{\"accountant\": \"thm41\", \"event\": {\"class_name\": "
              "\"ShuffledDpSgdEpochDpEvent\", \"noise_multiplier\": 1.0, \"rounds\": 1140369}, "
              "\"epsilon\": 1.0}");
    CHECKF(r.status == 200 && tl_now() - t1 < 1.0, "thm41 while the pool is full: %ld in %.3f s",
           r.status, tl_now() - t1);
    api_reply_free(&r);
    check_probes_while_busy(hv, 4, "busy-2");
    int refused = 0, served = 0;
    for (int i = 0; i < 4; i++) {
        if (hv[i].status == 503) {
            refused++;
            CHECKF(strcmp(hv[i].code, "overloaded") == 0, "503 with code '%s'", hv[i].code);
            CHECKF(atoi(hv[i].retry_after) >= 1, "503 overloaded with Retry-After '%s'",
                   hv[i].retry_after);
            CHECKF(hv[i].done_at - t0 < 1.0, "the refusal took %.3f s: it must not queue",
                   hv[i].done_at - t0);
        } else {
            served += hv[i].status == 200;
        }
    }
    CHECKF(refused == 2 && served == 2, "%d refused and %d served of 4, want 2 and 2", refused,
           served);
    api_get("/metrics", &m);
    CHECKF(strstr(m.body, "\ndpbudget_compute_refused_total 2\n") &&
               strstr(m.body, "\ndpbudget_compute_busy 0\n"),
           "/metrics after the load: refused 2 and busy 0 expected");
    api_reply_free(&m);
    /* the pool frees up: the next computation is served */
    heavy again = {.h = LIGHTER_H};
    heavy_run(&again);
    CHECKF(again.status == 200, "after the load: %ld %s", again.status, again.code);
    api_daemon_stop();
}

/* A computation that runs past --compute-deadline is stopped on every compute route, and
 * answered 422 compute_deadline_exceeded well before it would have finished. */
static void computation_past_deadline_is_stopped(void)
{
    const char *extra[] = {"--compute-deadline", "0.2", NULL};
    if (!start(extra))
        return;
    static const char *const tails[][2] = {
        {"/v1/delta", "\"epsilon\": 1.0"},
        {"/v1/epsilon", "\"delta\": 1e-5"},
        {"/v1/curve", "\"epsilons\": [0.5, 1.0]"},
    };
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body, "{" PLD_EVENT ", %s}", HEAVY_H, tails[i][1]);
        api_reply r;
        double t0 = tl_now();
        api_call("POST", tails[i][0], "application/json", body, strlen(body), &r);
        double took = tl_now() - t0;
        const char *code = json_string_value(json_object_get(r.json, "code"));
        CHECKF(r.status == 422 && code && strcmp(code, "compute_deadline_exceeded") == 0,
               "%s past the deadline: %ld %s", tails[i][0], r.status, r.body);
        CHECKF(strstr(r.body, "0.2 s") != NULL, "the detail names the deadline: %s", r.body);
        /* generous (a loaded 2-core machine): an FFT, once started, runs to its end; the
         * status is the proof, the time only that the default deadline (30 s) did not act */
        CHECKF(took < 20.0, "%s: stopped after %.3f s (deadline 0.2 s)", tails[i][0], took);
        api_reply_free(&r);
    }
    /* a calibration: every probe of its search is stopped */
    api_reply r;
    double t0 = tl_now();
    api_postf(&r, "/v1/calibrate",
              "{\"accountant\": \"pld\", \"value_discretization_interval\": 3e-6, \"event\": "
              "{\"class_name\": \"SelfComposedDpEvent\", \"count\": 1000, \"event\": "
              "{\"class_name\": \"PoissonSampledDpEvent\", \"sampling_probability\": 0.01, "
              "\"event\": {\"class_name\": \"GaussianDpEvent\"}}}, \"solve_for\": "
              "\"noise_multiplier\", \"target\": {\"epsilon\": 1.0, \"delta\": 1e-5}}");
    double took = tl_now() - t0;
    const char *code = json_string_value(json_object_get(r.json, "code"));
    CHECKF(r.status == 422 && code && strcmp(code, "compute_deadline_exceeded") == 0,
           "/v1/calibrate past the deadline: %ld %s", r.status, r.body);
    CHECKF(took < 20.0, "/v1/calibrate: stopped after %.3f s (deadline 0.2 s)", took);
    api_reply_free(&r);
    /* light work is untouched by the deadline (a coarse grid: well within 0.2 s even on a
     * loaded machine) */
    api_postf(
        &r, "/v1/delta",
        "{\"accountant\": \"pld\", \"value_discretization_interval\": 0.01, \"event\": "
        "{\"class_name\": \"GaussianDpEvent\", \"noise_multiplier\": 1.0}, \"epsilon\": 1.0}");
    CHECKF(r.status == 200, "a small PLD under the deadline: %ld %s", r.status, r.body);
    api_reply_free(&r);
    api_daemon_stop();
}

/* The stop as an orchestrator expects it (issue 34: new requests were served after SIGTERM
 * while /readyz stayed 200, and the computation in flight was answered 503): at SIGTERM
 * /readyz says 503 shutting_down at once; during --shutdown-grace new requests (a new
 * connection, a ledger write among them) are still served; then new connections are refused
 * while the computation in flight is finished and answered 200; the daemon exits 0 and a
 * restart on the same data directory finds every acknowledged change. */
static void sigterm_drains_then_exits(void)
{
    char dir[] = "/tmp/dpb-drain-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        CHECK(0);
        return;
    }
    char data[64];
    snprintf(data, sizeof data, "%s/data", dir);
    const char *extra[] = {
        "--shutdown-grace", "1", "--shutdown-deadline", "60", "--data-dir", data, NULL};
    if (!start(extra)) {
        tl_remove_dir(dir);
        return;
    }
    api_reply r;
    const char *budget = "{\"budget\":{\"epsilon\":10,\"delta\":1e-5}}";
    api_call("PUT", "/v1/clients/drain-a", "application/json", budget, strlen(budget), &r);
    CHECKF(r.status == 200 || r.status == 201, "client: %ld %s", r.status, r.body);
    api_reply_free(&r);
    api_postf(&r, "/v1/rounds",
              "{\"round_id\":\"drain-r1\",\"participants\":[\"drain-a\"],\"event\":"
              "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}}");
    CHECKF(r.status == 200, "a round before the stop: %ld %s", r.status, r.body);
    api_reply_free(&r);
    heavy hv = {.h = MEDIUM_H}; /* about 1 s on an idle core: likely running past the grace */
    pthread_create(&hv.tid, NULL, heavy_run, &hv);
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    double t0 = tl_now();
    CHECK(kill(api_daemon_pid(), SIGTERM) == 0);
    nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
    api_get("/readyz", &r);
    CHECKF(r.status == 503 && api_str_is(r.json, "code", "shutting_down"),
           "/readyz at once after SIGTERM: %ld %s", r.status, r.body);
    api_reply_free(&r);
    api_postf(&r, "/v1/rounds",
              "{\"round_id\":\"drain-r2\",\"participants\":[\"drain-a\"],\"event\":"
              "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}}");
    double at = tl_now() - t0;
    CHECKF(r.status == 200, "a round during the grace (%.2f s after SIGTERM): %ld %s", at, r.status,
           r.body);
    api_reply_free(&r);
    api_get("/healthz", &r);
    CHECKF(r.status == 200, "/healthz during the grace: %ld", r.status);
    api_reply_free(&r);
    /* past the grace, while the computation runs: no new connection is accepted */
    while (tl_now() - t0 < 1.4)
        nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
    int running = hv.done_at == 0.0;
    api_get("/healthz", &r);
    if (running)
        CHECKF(r.status == 0, "a new connection after the grace: %ld (want refused)", r.status);
    api_reply_free(&r);
    pthread_join(hv.tid, NULL);
    CHECKF(hv.status == 200, "the computation in flight at SIGTERM: %ld %s (want 200)", hv.status,
           hv.code);
    int st = api_daemon_wait(30.0);
    CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    /* the ledger is whole: both rounds, the one charged during the grace included */
    const char *again[] = {"--data-dir", data, NULL};
    if (start(again)) {
        api_get("/v1/rounds/drain-r2", &r);
        CHECKF(r.status == 200, "the round of the grace after a restart: %ld", r.status);
        api_reply_free(&r);
        api_get("/v1/clients/drain-a", &r);
        CHECKF(r.status == 200 && jint_is(r.json, "rounds", 2), "the client after a restart: %s",
               r.body);
        api_reply_free(&r);
        api_daemon_stop();
    }
    tl_remove_dir(dir);
}

/* SIGINT (a person at a terminal) skips the grace; a second SIGTERM during the grace stops
 * at once: neither waits out a --shutdown-grace of 30 s. */
static void sigint_and_a_second_sigterm_skip_the_grace(void)
{
    const char *extra[] = {"--shutdown-grace", "30", NULL};
    for (int second = 0; second < 2; second++) {
        if (!start(extra))
            return;
        double t0 = tl_now();
        if (second) {
            CHECK(kill(api_daemon_pid(), SIGTERM) == 0);
            nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
            api_reply r;
            api_get("/readyz", &r);
            CHECKF(r.status == 503 && api_str_is(r.json, "code", "shutting_down"),
                   "/readyz in the grace: %ld", r.status);
            api_reply_free(&r);
        }
        CHECK(kill(api_daemon_pid(), second ? SIGTERM : SIGINT) == 0);
        int st = api_daemon_wait(10.0);
        double took = tl_now() - t0;
        CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && took < 5.0,
               "%s: exit status %d after %.2f s", second ? "a second SIGTERM" : "SIGINT", st, took);
    }
}

/* Past --shutdown-deadline the computations still running are stopped (503 overloaded, or
 * the connection closed) and the daemon exits 0: the stop is bounded. */
static void sigterm_stops_computations_past_the_deadline(void)
{
    const char *extra[] = {
        "--compute-threads", "1", "--compute-queue", "2", "--shutdown-deadline", "0.5", NULL};
    if (!start(extra))
        return;
    heavy hv[3];
    memset(hv, 0, sizeof hv);
    for (int i = 0; i < 3; i++) {
        hv[i].h = HEAVY_H;
        pthread_create(&hv[i].tid, NULL, heavy_run, &hv[i]);
    }
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    double t0 = tl_now();
    int st = api_daemon_stop();
    double took = tl_now() - t0;
    CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    CHECKF(took < 4.0, "stopping took %.3f s with computations running", took);
    for (int i = 0; i < 3; i++) {
        pthread_join(hv[i].tid, NULL);
        CHECKF(hv[i].status == 0 || hv[i].status == 200 ||
                   (hv[i].status == 503 && strcmp(hv[i].code, "overloaded") == 0),
               "computation %d at shutdown: %ld %s", i, hv[i].status, hv[i].code);
    }
}

/* The options are checked at start-up. */
static void compute_options_are_checked(void)
{
    const char *bad[][3] = {
        {"--compute-deadline", "0", NULL},
        {"--compute-deadline", "abc", NULL},
        {"--compute-threads", "-1", NULL},
        {"--compute-queue", "x", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = api_daemon_start(bad[i], NULL, "http");
        CHECKF(st == 1002, "%s %s: %d, want exit status 2", bad[i][0], bad[i][1], st);
        if (st == 0)
            api_daemon_stop();
    }
}

const tl_test OVERLOAD_TESTS[] = {
    TL_T(compute_saturation_leaves_ledger_fast),
    TL_T(full_compute_pool_is_503_with_retry_after),
    TL_T(computation_past_deadline_is_stopped),
    TL_T(sigterm_drains_then_exits),
    TL_T(sigterm_stops_computations_past_the_deadline),
    TL_T(sigint_and_a_second_sigterm_skip_the_grace),
    TL_T(compute_options_are_checked),
};
const size_t OVERLOAD_NTESTS = sizeof OVERLOAD_TESTS / sizeof OVERLOAD_TESTS[0];
