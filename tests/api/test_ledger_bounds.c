/* test_ledger_bounds.c - no ledger request holds the ledger hostage (issue 34): an
 * eligibility page of pld clients past their rdp bound computes its PLDs off the ledger's
 * lock (a client GET and a round are answered while it runs, also for an event the ledger
 * never saw), under --ledger-deadline (422 compute_deadline_exceeded) and
 * --ledger-max-pld-evals (422 ledger_cost_exceeded); eligibility answers come in pages
 * (limit, cursor) whose walk gives every candidate once; answers waiting to be read count
 * against --answer-memory (503 answer_memory_exhausted with Retry-After). Each test starts
 * its own dpbudgetd. What is asserted is the order of events, never a speed. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "suites.h"

/* One step of DP-SGD (a Poisson-sampled Gaussian): a pld client with epsilon 1.5 passes its
 * rdp bound after a few dozen, so the search for its affordable rounds evaluates PLDs (about
 * half a second per client on one core). */
#define SGD_EVENT(sigma)                                                                           \
    "{\"class_name\":\"PoissonSampledDpEvent\",\"sampling_probability\":0.01,\"event\":"           \
    "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":" sigma "}}"
#define NPLD 6
#define LEDGER_MAX_IDS 100000 /* participants of one round at most */

static int start(const char *const *extra)
{
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    return st == 0;
}

static long put(const char *path, const char *body)
{
    api_reply r;
    api_call("PUT", path, "application/json", body, strlen(body), &r);
    long st = r.status;
    CHECKF(st == 200 || st == 201, "PUT %s: %ld %.300s", path, st, r.body);
    api_reply_free(&r);
    return st;
}

/* NPLD pld clients "<prefix>-i" with epsilon eps and distinct deltas (distinct histories:
 * no two share an answer), and the eligibility body asking about them with the event part
 * ev ("\"event\":{...}" or "\"event_name\":\"...\""). */
static char *pld_clients(const char *prefix, double eps, const char *ev)
{
    char path[96], body[256];
    size_t cap = 4096, n = 0;
    char *q = malloc(cap);
    n += (size_t)snprintf(q + n, cap - n, "{%s,\"clients\":[", ev);
    for (int i = 0; i < NPLD; i++) {
        snprintf(path, sizeof path, "/v1/clients/%s-%d", prefix, i);
        snprintf(body, sizeof body,
                 "{\"budget\":{\"epsilon\":%g,\"delta\":%.3g},\"accounting\":\"pld\"}", eps,
                 1e-5 * (1.0 + 0.1 * i));
        put(path, body);
        n += (size_t)snprintf(q + n, cap - n, "%s\"%s-%d\"", i ? "," : "", prefix, i);
    }
    snprintf(q + n, cap - n, "]}");
    return q;
}

static int str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

typedef struct {
    pthread_t tid;
    const char *body;
    long status;
    char code[48];
    int done; /* atomic: the answer arrived */
} bg_call;

static void *bg_run(void *arg)
{
    bg_call *b = arg;
    api_reply r;
    api_call("POST", "/v1/eligibility", "application/json", b->body, strlen(b->body), &r);
    b->status = r.status;
    const char *code = jstr(r.json, "code");
    snprintf(b->code, sizeof b->code, "%s", code ? code : "");
    api_reply_free(&r);
    __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* While an eligibility page of pld clients computes its PLDs, other requests are answered:
 * client GETs (the read lock) and a round (the write lock), one after another. Before, an
 * event the ledger never saw was interned under the write lock for the whole computation
 * (every GET waited), and a known one held the read lock (every round waited). The order of
 * events is asserted: ten GETs 20 ms apart (so that the page has long started) and a round
 * after the fifth, all answered while the page still runs. */
static void check_served_meanwhile(const char *body, const char *round_id)
{
    bg_call b = {.body = body};
    pthread_create(&b.tid, NULL, bg_run, &b);
    int gets = 0, rounds = 0, round_sent = 0;
    while (!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE) && gets < 10) {
        usleep(20000);
        api_reply r;
        api_get("/v1/clients/bystander", &r);
        int early = !__atomic_load_n(&b.done, __ATOMIC_ACQUIRE); /* answered before it */
        CHECKF(r.status == 200, "GET while eligibility runs: %ld", r.status);
        gets += early && r.status == 200;
        api_reply_free(&r);
        if (gets == 5 && !round_sent) {
            char rb[512];
            snprintf(rb, sizeof rb,
                     "{\"round_id\":\"%s\",\"event\":{\"class_name\":\"GaussianDpEvent\","
                     "\"noise_multiplier\":50},\"participants\":[\"bystander\"]}",
                     round_id);
            api_call("POST", "/v1/rounds", "application/json", rb, strlen(rb), &r);
            CHECKF(r.status == 200, "round while eligibility runs: %ld %.200s", r.status, r.body);
            rounds += !__atomic_load_n(&b.done, __ATOMIC_ACQUIRE) && r.status == 200;
            round_sent = 1;
            api_reply_free(&r);
        }
    }
    pthread_join(b.tid, NULL);
    CHECKF(b.status == 200, "the eligibility page: %ld %s", b.status, b.code);
    CHECKF(gets == 10 && rounds == 1,
           "while the eligibility page computed, %d GETs and %d rounds were answered (want 10 "
           "and 1): they waited for its lock",
           gets, rounds);
}

static void eligibility_computes_off_the_lock(void)
{
    /* the kept compositions off: every PLD composed from scratch, the slow path whose lock
     * this checks (kept ones make a page fast, but an evicted or first one is this slow) */
    const char *extra[] = {"--no-pld-refine", "--pld-kept-memory", "0", NULL};
    if (!start(extra))
        return;
    api_set_timeout(120);
    put("/v1/clients/bystander", "{\"budget\":{\"epsilon\":100,\"delta\":1e-5}}");
    /* an event no round or name brought in (was: under the write lock) */
    char *fresh = pld_clients("fresh", 1.5, "\"event\":" SGD_EVENT("0.8"));
    check_served_meanwhile(fresh, "bounds-r1");
    free(fresh);
    /* a registered event (was: under the read lock; a round waited) */
    put("/v1/events/sgd-0.9", "{\"event\":" SGD_EVENT("0.9") "}");
    char *named = pld_clients("named", 1.5, "\"event_name\":\"sgd-0.9\"");
    check_served_meanwhile(named, "bounds-r2");
    free(named);
    api_set_timeout(0);
    api_daemon_stop();
}

/* A pld client with epsilon 1.5 and a round of 95 DP-SGD steps: past its rdp bound, within
 * its PLD value (it affords 102 such steps), so the round's admission needs a PLD. */
#define PLD_ROUND(id, client)                                                                      \
    "{\"round_id\":\"" id "\",\"participants\":[\"" client "\"],\"event\":"                        \
    "{\"class_name\":\"SelfComposedDpEvent\",\"count\":95,\"event\":" SGD_EVENT("0.8") "}}"

/* The round of PLD_ROUND refused with status and code, and nothing charged. Its client is
 * made here, a pld client like pld_clients' but with a delta none of theirs has: the PLDs an
 * eligibility query of theirs computed before its own limit stopped it are kept (keyed by the
 * events and the delta), and one of them could be the round's, which would then be answered
 * without computing (seen once, under two api suites at once). */
static void round_refused(const char *body, const char *client, int status, const char *code)
{
    char cpath[96];
    snprintf(cpath, sizeof cpath, "/v1/clients/%s", client);
    put(cpath, "{\"budget\":{\"epsilon\":1.5,\"delta\":1.05e-5},\"accounting\":\"pld\"}");
    api_reply r;
    api_call("POST", "/v1/rounds", "application/json", body, strlen(body), &r);
    CHECKF(is_problem(&r, status, code, NULL), "the round: %ld %.300s", r.status, r.body);
    api_reply_free(&r);
    char path[96];
    snprintf(path, sizeof path, "/v1/clients/%s", client);
    api_get(path, &r);
    CHECKF(r.status == 200 && jint_is(r.json, "rounds", 0), "%s after the refusal: %.300s", client,
           r.body);
    api_reply_free(&r);
}

/* A page that would compute past --ledger-deadline is stopped there (422
 * compute_deadline_exceeded, naming the option); past --ledger-max-pld-evals it is refused
 * (422 ledger_cost_exceeded); a page within both is answered. A round whose admission needs
 * PLDs is bound by the same two, before its lock: refused with nothing charged. */
static void eligibility_deadline_and_cost_cap(void)
{
    const char *extra[] = {"--no-pld-refine",
                           "--pld-kept-memory",
                           "0",
                           "--ledger-deadline",
                           "0.001",
                           NULL}; /* from scratch: the slow path the limits bound; 1 ms, the
                                   * least the option takes: a PLD of the round's 95 steps takes
                                   * 10-50 ms, so 50 ms let the round through now and then */
    if (!start(extra))
        return;
    api_set_timeout(120);
    char *q = pld_clients("dl", 1.5, "\"event\":" SGD_EVENT("0.8"));
    api_reply r;
    api_call("POST", "/v1/eligibility", "application/json", q, strlen(q), &r);
    CHECKF(is_problem(&r, 422, "compute_deadline_exceeded", NULL) && r.body &&
               strstr(r.body, "--ledger-deadline"),
           "past --ledger-deadline: %ld %.300s", r.status, r.body);
    api_reply_free(&r);
    round_refused(PLD_ROUND("dl-round", "dl-r"), "dl-r", 422, "compute_deadline_exceeded");
    api_daemon_stop();

    const char *capped[] = {
        "--no-pld-refine", "--pld-kept-memory", "0", "--ledger-max-pld-evals", "1", NULL};
    if (!start(capped)) {
        free(q);
        return;
    }
    free(q);
    q = pld_clients("cap", 1.5, "\"event\":" SGD_EVENT("0.8"));
    api_call("POST", "/v1/eligibility", "application/json", q, strlen(q), &r);
    CHECKF(is_problem(&r, 422, "ledger_cost_exceeded", "limit"), "past the cost cap: %ld %.300s",
           r.status, r.body);
    api_reply_free(&r);
    round_refused(PLD_ROUND("cap-round", "cap-r"), "cap-r", 422, "ledger_cost_exceeded");
    /* decided by the rdp bound (a large budget): no PLD, answered */
    free(q);
    q = pld_clients("cheap", 50, "\"event\":" SGD_EVENT("0.8"));
    api_call("POST", "/v1/eligibility", "application/json", q, strlen(q), &r);
    CHECKF(r.status == 200 && jint_is(r.json, "eligible", NPLD), "within the cap: %ld %.300s",
           r.status, r.body);
    api_reply_free(&r);
    free(q);
    api_set_timeout(0);
    api_daemon_stop();
}

/* The ids of a page's clients appended to seen (a string of "id\n" lines); the next cursor
 * (malloc'ed) or NULL. */
static char *page_ids(const api_reply *r, char *seen, size_t cap, size_t *pages)
{
    json_t *cl = jget(r->json, "clients");
    for (size_t i = 0; i < json_array_size(cl); i++) {
        const char *id = json_string_value(json_object_get(json_array_get(cl, i), "id"));
        size_t n = strlen(seen);
        snprintf(seen + n, cap - n, "%s\n", id ? id : "?");
    }
    (*pages)++;
    const char *next = jstr(r->json, "next_cursor");
    return next ? strdup(next) : NULL;
}

/* Walking the pages of a label (limit 7 of 25 members, one more registered half-way) and of
 * an id list gives every candidate exactly once, in order; a bad cursor or limit is 400. */
static void eligibility_pages_walk_every_client_once(void)
{
    const char *extra[] = {NULL};
    if (!start(extra))
        return;
    char path[64], want[4096] = "", seen[4096] = "";
    for (int i = 0; i < 25; i++) {
        snprintf(path, sizeof path, "/v1/clients/pg-%02d", i);
        put(path, "{\"budget\":{\"epsilon\":3,\"delta\":1e-5},\"labels\":{\"cohort\":\"pg\"}}");
        size_t n = strlen(want);
        snprintf(want + n, sizeof want - n, "pg-%02d\n", i);
    }
    put("/v1/clients/other", "{\"budget\":{\"epsilon\":3,\"delta\":1e-5}}");
    char *cursor = NULL;
    size_t pages = 0;
    do {
        char *body =
            api_fmt("{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\""
                    ":5},\"label\":\"cohort=pg\",\"limit\":7%s%s%s}",
                    cursor ? ",\"cursor\":\"" : "", cursor ? cursor : "", cursor ? "\"" : "");
        api_reply r;
        api_call("POST", "/v1/eligibility", "application/json", body, strlen(body), &r);
        free(body);
        free(cursor);
        cursor = NULL;
        CHECKF(r.status == 200 && json_array_size(jget(r.json, "clients")) <= 7,
               "page %zu: %ld %.300s", pages, r.status, r.body);
        if (r.status != 200) {
            api_reply_free(&r);
            break;
        }
        cursor = page_ids(&r, seen, sizeof seen, &pages);
        if (pages == 1) { /* a member registered while the pages are walked comes last */
            CHECK(jint_is(r.json, "total", 25));
            put("/v1/clients/pg-late",
                "{\"budget\":{\"epsilon\":3,\"delta\":1e-5},\"labels\":{\"cohort\":\"pg\"}}");
        }
        api_reply_free(&r);
    } while (cursor && pages < 20);
    strcat(want, "pg-late\n");
    CHECKF(strcmp(seen, want) == 0 && pages == 4, "%zu pages gave\n%swant\n%s", pages, seen, want);
    /* an id list: three pages of 4, 4 and 2, in the list's order (an unknown id answered) */
    const char *ids = "\"pg-03\",\"pg-01\",\"nobody\",\"pg-07\",\"pg-01\",\"pg-09\",\"pg-11\","
                      "\"pg-13\",\"pg-15\",\"pg-17\"";
    seen[0] = '\0';
    pages = 0;
    do {
        char *body =
            api_fmt("{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\""
                    ":5},\"clients\":[%s],\"limit\":4%s%s%s}",
                    ids, cursor ? ",\"cursor\":\"" : "", cursor ? cursor : "", cursor ? "\"" : "");
        api_reply r;
        api_call("POST", "/v1/eligibility", "application/json", body, strlen(body), &r);
        free(body);
        free(cursor);
        cursor = NULL;
        CHECKF(r.status == 200 && jint_is(r.json, "total", 10), "ids page %zu: %ld %.300s", pages,
               r.status, r.body);
        if (r.status == 200)
            cursor = page_ids(&r, seen, sizeof seen, &pages);
        api_reply_free(&r);
    } while (cursor && pages < 10);
    CHECKF(strcmp(seen,
                  "pg-03\npg-01\nnobody\npg-07\npg-01\npg-09\npg-11\npg-13\npg-15\npg-17\n") == 0 &&
               pages == 3,
           "%zu id pages gave\n%s", pages, seen);
    /* bad paging arguments */
    static const char *const bad[][2] = {
        {"\"limit\":0", "limit"},         {"\"limit\":10001", "limit"},
        {"\"cursor\":\"x12\"", "cursor"}, {"\"cursor\":\"o\"", "cursor"},
        {"\"cursor\":7", "cursor"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *body = api_fmt("{\"event\":{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\""
                             ":5},\"label\":\"cohort=pg\",%s}",
                             bad[i][0]);
        api_reply r;
        api_call("POST", "/v1/eligibility", "application/json", body, strlen(body), &r);
        CHECKF(r.status == 400 && str_eq(jstr(r.json, "field"), bad[i][1]), "%s: %ld %.200s",
               bad[i][0], r.status, r.body);
        free(body);
        api_reply_free(&r);
    }
    api_daemon_stop();
}

/* A request body naming n unknown client ids: an eligibility page of them (about 150 bytes
 * of answer each), or a dry-run round (about 45 bytes each). */
static char *unknown_ids(size_t n, int round)
{
    size_t cap = 200 + 16 * n, k = 0;
    char *b = malloc(cap);
    k +=
        (size_t)snprintf(b + k, cap - k,
                         round ? "{\"round_id\":\"dry\",\"dry_run\":true,\"event\":{\"class_name\":"
                                 "\"GaussianDpEvent\",\"noise_multiplier\":5},\"participants\":["
                               : "{\"event\":{\"class_name\":\"GaussianDpEvent\","
                                 "\"noise_multiplier\":5},\"limit\":10000,\"clients\":[");
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(b + k, cap - k, "%s\"u%zu\"", i ? "," : "", i);
    snprintf(b + k, cap - k, "]}");
    return b;
}

/* A connection that sends body to path, reads the first bytes of the answer (so it is
 * queued) and then reads no more, with a tiny receive buffer: an answer larger than the
 * kernel's socket buffers stays with the daemon. The socket, or -1. */
static int unread_answer(const char *path, const char *body)
{
    const char *base = api_get_base(); /* http://127.0.0.1:PORT */
    const char *colon = strrchr(base, ':');
    int port = colon ? atoi(colon + 1) : 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    char head[256], first[64];
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      "application/json\r\nContent-Length: %zu\r\n\r\n",
                      path, strlen(body));
    size_t bn = strlen(body), sent = 0;
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, head, (size_t)hn) == hn;
    while (ok && sent < bn) {
        ssize_t w = write(fd, body + sent, bn - sent);
        ok = w > 0;
        sent += ok ? (size_t)w : 0;
    }
    if (!ok || read(fd, first, sizeof first) < 12 || memcmp(first, "HTTP/1.1 200", 12) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Answers waiting to be read count against --answer-memory: an answer larger than all of it
 * is refused at once (smaller pages are served); one that fits is refused while another
 * connection leaves a large answer unread (503 answer_memory_exhausted, Retry-After), and
 * served once that connection is gone. Small answers and the probes are never refused. */
static void answers_count_against_the_memory_budget(void)
{
    const char *one[] = {"--answer-memory", "1", NULL};
    if (!start(one))
        return;
    char *huge = unknown_ids(9000, 0), *page = unknown_ids(3000, 0);
    api_reply r;
    api_call("POST", "/v1/eligibility", "application/json", huge, strlen(huge), &r);
    CHECKF(is_problem(&r, 503, "answer_memory_exhausted", NULL) && atoi(r.retry_after) >= 1,
           "an answer over the whole budget: %ld %.200s (Retry-After '%s')", r.status, r.body,
           r.retry_after);
    api_reply_free(&r);
    api_call("POST", "/v1/eligibility", "application/json", page, strlen(page), &r);
    CHECKF(r.status == 200 && r.body_len > 300000 && r.body_len < 1000000,
           "an answer within the budget: %ld, %zu bytes", r.status, r.body_len);
    api_reply_free(&r);
    api_daemon_stop();
    free(huge);
    free(page);

    const char *six[] = {"--answer-memory", "6", "--max-bulk-body", "4194304", NULL};
    if (!start(six))
        return;
    api_set_timeout(60);
    char *dry = unknown_ids(LEDGER_MAX_IDS, 1); /* an answer of about 4.6 MB */
    int fd = unread_answer("/v1/rounds", dry);
    CHECKF(fd >= 0, "the unread connection did not get its answer queued");
    api_call("POST", "/v1/rounds", "application/json", dry, strlen(dry), &r);
    CHECKF(is_problem(&r, 503, "answer_memory_exhausted", NULL) && atoi(r.retry_after) >= 1,
           "with a large answer left unread: %ld %.200s", r.status, r.body);
    api_reply_free(&r);
    char *small = unknown_ids(50, 0);
    api_call("POST", "/v1/eligibility", "application/json", small, strlen(small), &r);
    CHECKF(r.status == 200, "a small page with an answer left unread: %ld", r.status);
    api_reply_free(&r);
    api_get("/healthz", &r);
    CHECK(r.status == 200);
    api_reply_free(&r);
    api_get("/metrics", &r);
    CHECKF(r.body && strstr(r.body, "\ndpbudget_answer_refused_total 1\n"),
           "/metrics: dpbudget_answer_refused_total 1 expected");
    api_reply_free(&r);
    if (fd >= 0)
        close(fd);
    /* the unread answer released: served again (once the daemon notices the close) */
    long st = 0;
    for (int i = 0; i < 100 && st != 200; i++) {
        api_call("POST", "/v1/rounds", "application/json", dry, strlen(dry), &r);
        st = r.status;
        api_reply_free(&r);
        if (st != 200)
            usleep(50000);
    }
    CHECKF(st == 200, "after the unread connection closed: %ld", st);
    free(small);
    free(dry);
    api_set_timeout(0);
    api_daemon_stop();
}

const tl_test LEDGER_BOUNDS_TESTS[] = {
    TL_T(eligibility_computes_off_the_lock),
    TL_T(eligibility_deadline_and_cost_cap),
    TL_T(eligibility_pages_walk_every_client_once),
    TL_T(answers_count_against_the_memory_budget),
};
const size_t LEDGER_BOUNDS_NTESTS = sizeof LEDGER_BOUNDS_TESTS / sizeof LEDGER_BOUNDS_TESTS[0];
