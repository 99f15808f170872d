/* test_auth.c - API keys and scopes (the whole matrix), the refusal to listen openly without
 * keys, --open-compute and the precedence of flags, environment and config file, the rate
 * limit (429 + Retry-After), request ids, /metrics, and a TLS round trip. Each test starts
 * its own dpbudgetd (after the main suite's daemon has stopped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "suites.h"

/* sha256sum of the tokens (printf %s TOKEN | sha256sum) */
#define READ_TOKEN "reader-token-1"
#define CHARGE_TOKEN "charger-token-2"
#define ADMIN_TOKEN "admin-token-3"
static const char KEYS[] =
    "# test keys\n"
    "8ed7a3cb498a69b97157eb5c685b8831eabdc118fce9a4c75425920ab3ddf6e0 read reader\n"
    "3724537f9776403ca218466987cb9d052ea7ece12d75ee3458cecf64e37530c8 charge coordinator\n"
    "f35ed2a6db1c26fdf985d8cc196d86a0afa41d351caf7314ecc50503fe948e38 admin operator\n";

static char dir[64], keys_path[128];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/dpb-auth-XXXXXX");
    if (mkdtemp(dir) == NULL)
        dir[0] = '\0';
    snprintf(keys_path, sizeof keys_path, "%s/keys", dir);
    write_file(keys_path, KEYS);
}

static void teardown(void)
{
    char p[192];
    const char *files[] = {"keys", "config", "cert.pem", "key.pem", NULL};
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
    api_set_header(NULL);
    api_set_header2(NULL);
    api_set_ca(NULL);
}

static void as(const char *token)
{
    char h[128];
    if (token) {
        snprintf(h, sizeof h, "Authorization: Bearer %s", token);
        api_set_header(h);
    } else {
        api_set_header(NULL);
    }
}

static int start(const char *const *extra, const char *const *env)
{
    int st = api_daemon_start(extra, env, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    return st == 0;
}

static int stop(void)
{
    int st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 on SIGTERM (wait status %d)", st);
    return st;
}

#define EPOCH_BODY                                                                                 \
    "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":2},\"epsilon\":1}"
#define CLIENT_BODY "{\"budget\":{\"epsilon\":5,\"delta\":1e-6}}"
#define ROUND_BODY                                                                                 \
    "{\"round_id\":\"r1\",\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5},"  \
    "\"participants\":[\"c1\"]}"

typedef struct {
    const char *method, *path, *body;
    int scope; /* 0 open, 1 read, 2 charge, 3 admin */
} endpoint;

static const endpoint ENDPOINTS[] = {
    {"POST", "/v1/delta", EPOCH_BODY, 1},
    {"POST", "/v1/epsilon",
     "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":2},\"delta\":1e-5}", 1},
    {"POST", "/v1/calibrate",
     "{\"event\":{\"class_name\":\"GaussianDpEvent\"},\"solve_for\":\"noise_multiplier\","
     "\"target\":{\"epsilon\":1,\"delta\":1e-5}}",
     1},
    {"POST", "/v1/curve",
     "{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":2},\"epsilons\":[1]}", 1},
    {"POST", "/v1/proactive", "{\"procedure\":\"noise_multiplier\",\"epsilon\":1,\"delta\":1e-5}",
     1},
    {"GET", "/v1/accountants", NULL, 1},
    {"PUT", "/v1/clients/c1", CLIENT_BODY, 3},
    {"GET", "/v1/clients/c1", NULL, 1},
    {"GET", "/v1/clients", NULL, 1},
    {"POST", "/v1/rounds", ROUND_BODY, 2},
    {"GET", "/v1/rounds/r1", NULL, 1},
    {"GET", "/v1/summary", NULL, 1},
    {"GET", "/v1/history", NULL, 1},
    {"GET", "/healthz", NULL, 0},
    {"GET", "/readyz", NULL, 0},
    {"GET", "/metrics", NULL, 0},
    {"GET", "/openapi.yaml", NULL, 0},
    {"GET", "/", NULL, 0},
};

static void call(const endpoint *e, api_reply *r)
{
    api_call(e->method, e->path, e->body ? "application/json" : NULL, e->body,
             e->body ? strlen(e->body) : 0, r);
}

/* Each endpoint x {no key, wrong key, read, charge, admin}: 401 without a valid key (with
 * WWW-Authenticate), 403 with a key short of the scope, through otherwise. */
static void auth_matrix(void)
{
    setup();
    const char *extra[] = {"--api-keys", keys_path, NULL};
    if (!start(extra, NULL)) {
        teardown();
        return;
    }
    const char *tokens[] = {NULL, "not-a-key", READ_TOKEN, CHARGE_TOKEN, ADMIN_TOKEN};
    int level[] = {-1, -1, 1, 2, 3};
    /* first as admin, so the client and round exist for the reads */
    for (int pass = 0; pass < 2; pass++)
        for (size_t t = pass ? 0 : 4; t < 5; t++) {
            as(tokens[t]);
            for (size_t i = 0; i < sizeof ENDPOINTS / sizeof ENDPOINTS[0]; i++) {
                const endpoint *e = &ENDPOINTS[i];
                api_reply r;
                call(e, &r);
                int want_401 = e->scope > 0 && level[t] < 0;
                int want_403 = e->scope > 0 && level[t] >= 0 && level[t] < e->scope;
                if (want_401) {
                    CHECKF(is_problem(&r, 401, "unauthorized", NULL), "%s %s, token %s: %ld",
                           e->method, e->path, tokens[t] ? tokens[t] : "(none)", r.status);
                    CHECKF(strncmp(r.www_authenticate, "Bearer", 6) == 0,
                           "%s %s: WWW-Authenticate '%s'", e->method, e->path, r.www_authenticate);
                } else if (want_403) {
                    CHECKF(is_problem(&r, 403, "forbidden", NULL), "%s %s, token %s: %ld",
                           e->method, e->path, tokens[t], r.status);
                } else {
                    CHECKF(r.status >= 200 && r.status < 300, "%s %s, token %s: %ld %s", e->method,
                           e->path, tokens[t] ? tokens[t] : "(none)", r.status, r.body);
                }
                CHECKF(r.request_id[0] != '\0', "%s %s: no X-Request-Id", e->method, e->path);
                api_reply_free(&r);
            }
        }
    /* the denied requests are counted */
    as(NULL);
    api_reply m;
    api_get("/metrics", &m);
    CHECK(m.status == 200 && strstr(m.body, "dpbudget_http_denied_total{status=\"401\"} ") != NULL);
    CHECK(strstr(m.body, "dpbudget_http_denied_total{status=\"401\"} 0\n") == NULL);
    CHECK(strstr(m.body, "dpbudget_round_participants_total{outcome=\"admitted\"} 1\n") != NULL);
    CHECK(strstr(m.body, "dpbudget_ledger_clients{status=\"active\"} 1\n") != NULL);
    CHECK(strstr(m.body, "dpbudget_wal_fsync_seconds_count ") != NULL);
    /* POST /v1/rounds answered 200 three times: admin first, then charge and admin replays */
    CHECK(
        strstr(m.body,
               "dpbudget_http_requests_total{route=\"/v1/rounds\",method=\"POST\",status=\"200\"} "
               "3\n") != NULL);
    CHECK(strstr(m.body, "dpbudget_http_request_duration_seconds_count{route=\"/v1/delta\"") !=
          NULL);
    api_reply_free(&m);
    stop();
    teardown();
}

/* Every route that needs a key is rate limited (429 with Retry-After), not only the one the
 * test above hammers: one bucket per key, so with --rate-limit 1 the first call passes and
 * the rest of two rounds over the routes are refused. */
static void auth_rate_limit_every_route(void)
{
    setup();
    const char *extra[] = {"--api-keys", keys_path, "--rate-limit", "1", NULL};
    if (!start(extra, NULL)) {
        teardown();
        return;
    }
    as(ADMIN_TOKEN);
    size_t n = sizeof ENDPOINTS / sizeof ENDPOINTS[0];
    int limited[sizeof ENDPOINTS / sizeof ENDPOINTS[0]] = {0};
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            api_reply r;
            call(&ENDPOINTS[i], &r);
            if (ENDPOINTS[i].scope == 0) {
                CHECKF(r.status == 200, "%s %s (open): %ld", ENDPOINTS[i].method, ENDPOINTS[i].path,
                       r.status);
            } else if (r.status == 429) {
                limited[i]++;
                CHECK(is_problem(&r, 429, "rate_limited", NULL));
                CHECKF(atoi(r.retry_after) >= 1, "Retry-After '%s'", r.retry_after);
            }
            api_reply_free(&r);
        }
    for (size_t i = 0; i < n; i++)
        if (ENDPOINTS[i].scope > 0)
            CHECKF(limited[i] >= 1, "%s %s was never rate limited", ENDPOINTS[i].method,
                   ENDPOINTS[i].path);
    stop();
    teardown();
}

/* --no-ledger: every ledger route answers 503 read_only; computing and probes still work. */
static void ledger_off_answers_503(void)
{
    setup();
    const char *extra[] = {"--no-ledger", NULL};
    as(NULL);
    if (!start(extra, NULL)) {
        teardown();
        return;
    }
    for (size_t i = 0; i < sizeof ENDPOINTS / sizeof ENDPOINTS[0]; i++) {
        const endpoint *e = &ENDPOINTS[i];
        api_reply r;
        call(e, &r);
        if (strncmp(e->path, "/v1/clients", 11) == 0 || strncmp(e->path, "/v1/rounds", 10) == 0 ||
            strcmp(e->path, "/v1/summary") == 0 || strcmp(e->path, "/v1/history") == 0)
            CHECKF(is_problem(&r, 503, "read_only", NULL), "%s %s: %ld", e->method, e->path,
                   r.status);
        else
            CHECKF(r.status == 200, "%s %s: %ld %.200s", e->method, e->path, r.status, r.body);
        if (strcmp(e->path, "/readyz") == 0)
            CHECK(json_is_false(jget(r.json, "ledger")));
        api_reply_free(&r);
    }
    stop();
    teardown();
}

/* Without keys the daemon listens on loopback only; a broken key file stops it too. */
static void auth_refuses_open_listening(void)
{
    setup();
    const char *open[] = {"--listen", "0.0.0.0", NULL};
    int st = api_daemon_start(open, NULL, "http");
    CHECKF(st == 1002, "listening on 0.0.0.0 without keys: %d, want exit status 2", st);
    if (st == 0)
        api_daemon_stop();
    write_file(keys_path, "not-hex read\n");
    const char *bad[] = {"--api-keys", keys_path, NULL};
    st = api_daemon_start(bad, NULL, "http");
    CHECKF(st == 1002, "a malformed key file: %d, want exit status 2", st);
    if (st == 0)
        api_daemon_stop();
    teardown();
}

/* --open-compute opens the computations, never the ledger; environment overrides the config
 * file and the command line overrides the environment. */
static void auth_open_compute_and_precedence(void)
{
    setup();
    char cfg[160], cfg_path[128];
    snprintf(cfg_path, sizeof cfg_path, "%s/config", dir);
    snprintf(cfg, sizeof cfg, "# dpbudgetd config\napi-keys = %s\nopen-compute\n", keys_path);
    write_file(cfg_path, cfg);
    const char *extra[] = {"--config", cfg_path, NULL};
    as(NULL);
    if (start(extra, NULL)) {
        api_reply r;
        api_postf(&r, "/v1/delta", "%s", EPOCH_BODY);
        CHECKF(r.status == 200, "open compute: %ld", r.status);
        api_reply_free(&r);
        api_call("PUT", "/v1/clients/c1", "application/json", CLIENT_BODY, strlen(CLIENT_BODY), &r);
        CHECK(is_problem(&r, 401, "unauthorized", NULL));
        api_reply_free(&r);
        stop();
    }
    /* environment over the file */
    const char *env[] = {"DPBUDGET_OPEN_COMPUTE=0", NULL};
    if (start(extra, env)) {
        api_reply r;
        api_postf(&r, "/v1/delta", "%s", EPOCH_BODY);
        CHECKF(r.status == 401, "DPBUDGET_OPEN_COMPUTE=0 over the file: %ld", r.status);
        api_reply_free(&r);
        stop();
    }
    /* the command line over the environment */
    const char *extra2[] = {"--config", cfg_path, "--open-compute", NULL};
    if (start(extra2, env)) {
        api_reply r;
        api_postf(&r, "/v1/delta", "%s", EPOCH_BODY);
        CHECKF(r.status == 200, "--open-compute over DPBUDGET_OPEN_COMPUTE=0: %ld", r.status);
        api_reply_free(&r);
        stop();
    }
    teardown();
}

/* --rate-limit 5: a burst of 5, then 429 with Retry-After; request ids are echoed when sane. */
static void auth_rate_limit_and_request_ids(void)
{
    setup();
    const char *extra[] = {"--api-keys", keys_path, "--rate-limit", "5", NULL};
    if (!start(extra, NULL)) {
        teardown();
        return;
    }
    as(READ_TOKEN);
    int limited = 0, ok = 0;
    for (int i = 0; i < 12; i++) {
        api_reply r;
        api_get("/v1/accountants", &r);
        if (r.status == 429) {
            limited++;
            CHECK(is_problem(&r, 429, "rate_limited", NULL));
            CHECKF(atoi(r.retry_after) >= 1, "Retry-After '%s'", r.retry_after);
        } else {
            ok += r.status == 200;
        }
        api_reply_free(&r);
    }
    CHECKF(ok >= 5 && ok <= 7 && limited >= 5, "%d answered, %d limited", ok, limited);
    /* another key has its own bucket */
    as(ADMIN_TOKEN);
    api_reply r;
    api_get("/v1/accountants", &r);
    CHECK(r.status == 200);
    api_reply_free(&r);
    api_set_header2("X-Request-Id: trace-42.a_b");
    api_get("/v1/summary", &r);
    CHECK(r.status == 200 && strcmp(r.request_id, "trace-42.a_b") == 0);
    api_reply_free(&r);
    api_set_header2("X-Request-Id: not allowed!");
    api_get("/healthz", &r);
    CHECK(r.request_id[0] && strcmp(r.request_id, "not allowed!") != 0);
    api_reply_free(&r);
    api_set_header2(NULL);
    /* the id is in the request's log line, which reaches the log while the daemon runs
     * (request lines are written in batches, at most 50 ms late: 5 s allowed here) */
    int logged = 0;
    double until = tl_now() + 5.0;
    do {
        FILE *f = fopen(api_daemon_log(), "r");
        char line[1024];
        logged = 0;
        while (f && fgets(line, sizeof line, f))
            logged += strstr(line, "\"request_id\":\"trace-42.a_b\"") != NULL &&
                      strstr(line, "\"route\":\"/v1/summary\"") != NULL &&
                      strstr(line, "\"key\":\"operator\"") != NULL;
        if (f)
            fclose(f);
        if (logged == 0)
            nanosleep(&(struct timespec){0, 20000000}, NULL);
    } while (logged == 0 && tl_now() < until);
    CHECKF(logged == 1, "the request's log line, while the daemon runs: %d found", logged);
    stop();
    teardown();
}

/* HTTPS with a certificate generated here (openssl), trusted by the client. */
static void tls_round_trip(void)
{
    setup();
    char cmd[768], cert[128], key[128];
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
             "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1",
             key, cert);
    int rc = system(cmd);
    CHECKF(rc == 0, "openssl could not make a certificate (%d): is openssl installed?", rc);
    if (rc != 0) {
        teardown();
        return;
    }
    const char *extra[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    int st = api_daemon_start(extra, NULL, "https");
    CHECKF(st == 0, "dpbudgetd with TLS did not start (%d)", st);
    if (st == 0) {
        api_set_ca(cert);
        api_reply r;
        api_postf(&r, "/v1/delta", "%s", EPOCH_BODY);
        CHECKF(r.status == 200 && is_compute_answer(&r), "https: %ld (curl %d)", r.status,
               r.curl_code);
        api_reply_free(&r);
        /* the plain-HTTP client gets no answer from the TLS port */
        api_set_ca(NULL);
        stop();
    }
    const char *half[] = {"--tls-cert", cert, NULL};
    st = api_daemon_start(half, NULL, "https");
    CHECKF(st == 1002, "--tls-cert without --tls-key: %d, want exit status 2", st);
    if (st == 0)
        api_daemon_stop();
    teardown();
}

/* A sender that drips its body slower than --request-timeout is cut off, not answered. */
static void slow_sender_is_dropped(void)
{
    setup();
    const char *extra[] = {"--request-timeout", "1", NULL};
    if (!start(extra, NULL)) {
        teardown();
        return;
    }
    const char *b = strrchr(api_get_base(), ':');
    int port = b ? atoi(b + 1) : 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int connected = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    CHECK(connected);
    if (connected) {
        static const char head[] = "POST /v1/delta HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                   "application/json\r\nContent-Length: 100\r\n\r\n{\"ev";
        send(fd, head, sizeof head - 1, MSG_NOSIGNAL);
        struct timespec ts = {1, 600000000L};
        nanosleep(&ts, NULL);
        send(fd, "ent\":", 5, MSG_NOSIGNAL);
        nanosleep(&ts, NULL);
        send(fd, " {", 2, MSG_NOSIGNAL);
        char buf[256];
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        int e = errno;
        /* closed by the daemon (EOF or reset), not merely silent (EAGAIN after 5 s) */
        CHECKF(n == 0 || (n < 0 && e == ECONNRESET),
               "a slow sender was not dropped: %zd (%s) %.60s", n, n < 0 ? strerror(e) : "",
               n > 0 ? (buf[n] = 0, buf) : "");
    }
    if (fd >= 0)
        close(fd);
    /* and the daemon still serves */
    api_reply r;
    api_get("/healthz", &r);
    CHECK(r.status == 200);
    api_reply_free(&r);
    stop();
    teardown();
}

/* One daemon per data directory: a second one on the same directory exits 1. */
static void data_dir_is_locked(void)
{
    setup();
    char data[128];
    snprintf(data, sizeof data, "%s/data", dir);
    const char *extra[] = {"--data-dir", data, NULL};
    if (!start(extra, NULL)) {
        teardown();
        return;
    }
    /* a second process, directly: the harness's own daemon is still running */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "timeout 5 %s --port 0 --data-dir %s >/dev/null 2>&1",
             daemon_binary(), data);
    int rc = system(cmd);
    CHECKF(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 1,
           "a second dpbudgetd on the same data directory: status %d", rc);
    stop();
    snprintf(cmd, sizeof cmd, "rm -rf %s", data);
    CHECK(system(cmd) == 0);
    teardown();
}

const tl_test AUTH_TESTS[] = {
    TL_T(data_dir_is_locked),
    TL_T(slow_sender_is_dropped),
    TL_T(auth_matrix),
    TL_T(auth_refuses_open_listening),
    TL_T(auth_open_compute_and_precedence),
    TL_T(auth_rate_limit_and_request_ids),
    TL_T(auth_rate_limit_every_route),
    TL_T(ledger_off_answers_503),
    TL_T(tls_round_trip),
};
const size_t AUTH_NTESTS = sizeof AUTH_TESTS / sizeof AUTH_TESTS[0];
