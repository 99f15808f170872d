/*
 * bench_pld_ledger.c - the ledger in pld mode at federated scale: round latency as the
 * clients' histories grow, and how long reads wait meanwhile. Prints figures; asserts nothing
 * about time.
 *
 * Workload (a DP-SGD schedule): round k charges SelfComposed(PoissonSampled(q = 0.01,
 * Gaussian(sigma = 0.8 + 0.01 k)), 50) to P participants out of C pld clients (budget
 * eps = E, delta = 1e-5), a different cohort each round.
 *   1. C = 100, P = 10: the reproduction (latency of the first rounds)
 *   2. C = 1000, P = 100, up to R rounds (BENCH_PLD_ROUNDS, default 1000): p50/p99 round
 *      latency per block of rounds, sustained rounds/s, and the latency of
 *      ledger_get_summary (what GET /v1/summary and /readyz call) from a reader thread
 *      polling every 2 ms while the rounds run.   targets: p99 <= 50 ms at round 1000,
 *      >= 100 rounds/s, reads never wait for a charge's computation
 *   4. as 2 with budget eps 1.5: past the rdp bound each participant's PLD decides (the
 *      worst case: a schedule of distinct events, every charge near the budget)
 *      then eligibility of the 1,000 clients (affordable_rounds)  target < 1 s; and the kept
 *      compositions' memory per near-budget client and their cap (BENCH_PLD_KEPT_MIB)
 *   5. eligibility of BENCH_PLD_ELIG_CLIENTS pld clients (default 10000) after
 *      BENCH_PLD_ELIG_ROUNDS rounds (default 20) of a third of them, each budget then lowered
 *      to 0.97 of the client's rdp value (past the rdp bound: the PLD decides)
 *                                                    target < 10 s for 10,000
 *   3. resident memory per pld client for BENCH_PLD_MEM_CLIENTS clients (default 100000)
 *      with a few rounds each                       target <= 4 KiB a client
 * Each phase stops at its deadline (BENCH_PLD_SECONDS a phase, default 60) and says how far
 * it got.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/ledger/ledger.h"
#include "benchledger.h"
#include "benchlib.h"

static size_t kept_bytes; /* BENCH_PLD_KEPT_MIB: the kept compositions' cap (0: default) */

static ledger *open_fresh(const char *dir)
{
    rm_dir(dir);
    /* the daemon's default: the background PLD refinement on (BENCH_PLD_REFINE=0: off) */
    const char *rf = getenv("BENCH_PLD_REFINE");
    ledger_options o = {dir, NULL, 0, 0.0, 0.0, 0, 0, !(rf && strcmp(rf, "0") == 0), NULL, 0, 0, 0};
    ledger *l;
    dpb_error err = {0};
    if (ledger_open(&o, &l, &err) != DPB_OK) {
        fprintf(stderr, "bench_pld_ledger: %s\n", err.detail);
        exit(1);
    }
    if (kept_bytes)
        ledger_kept_cap(l, kept_bytes);
    return l;
}

static dp_event *dpsgd(double sigma, double q, uint64_t steps);

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bench_id *ids;

/* The kept compositions' figures: memory per client that holds one, and the cap. */
static void kept_figures(ledger *l, size_t C)
{
    ledger_kept_figures f;
    ledger_kept_stats(l, &f);
    printf(
        "   kept compositions: %zu held, %.2f MiB (peak %.2f MiB) of a cap of %.0f MiB: %.1f KiB "
        "per near-budget pld client (peak over %zu clients: %.1f KiB); %llu extended, %llu "
        "rebuilt, %llu evicted, %llu from scratch\n",
        f.entries, (double)f.bytes / 1048576.0, (double)f.peak_bytes / 1048576.0,
        (double)f.cap_bytes / 1048576.0,
        f.entries ? (double)f.bytes / 1024.0 / (double)f.entries : 0.0, C,
        (double)f.peak_bytes / 1024.0 / (double)C, (unsigned long long)f.composed,
        (unsigned long long)f.rebuilt, (unsigned long long)f.evicted,
        (unsigned long long)f.fallbacks);
}

/* Eligibility of the first n clients for the next round's event, with affordable_rounds
 * (max_rounds 1000), timed. */
static void eligibility(ledger *l, size_t n, double sigma)
{
    dp_event *ev = dpsgd(sigma, 0.01, 50);
    const char **cand = malloc(n * sizeof *cand);
    if (cand == NULL)
        exit(1);
    for (size_t i = 0; i < n; i++)
        cand[i] = ids[i];
    /* every page of the candidates (LEDGER_ELIG_PAGE_MAX each), as a caller follows them */
    ledger_elig_req q = {ev, cand, n, NULL, 1000, 0, LEDGER_ELIG_PAGE_MAX, NULL, 0};
    ledger_elig_item *it = malloc(n * sizeof *it);
    size_t ni = 0, elig = 0, near = 0;
    uint64_t rounds = 0;
    dpb_error err = {0};
    double t0 = now_s(), c0 = cpu_s();
    for (ledger_elig_page pg = {0, 1, 0}; it != NULL && pg.more; q.offset = pg.next) {
        ledger_elig_item *page = NULL;
        size_t np = 0;
        if (ledger_eligibility(l, &q, &page, &np, &pg, &err) != DPB_OK) {
            fprintf(stderr, "bench_pld_ledger: eligibility: %s\n", err.detail);
            exit(1);
        }
        memcpy(it + ni, page, np * sizeof *page);
        ni += np;
        free(page);
    }
    if (it == NULL)
        exit(1);
    double el = now_s() - t0, cpu = cpu_s() - c0;
    for (size_t i = 0; i < ni; i++) {
        elig += (size_t)it[i].eligible;
        rounds += it[i].rounds;
        near += it[i].remaining < 0.5 * (it[i].spent + it[i].remaining);
    }
    printf("   eligibility of %zu candidates (%zu past half their budget), affordable_rounds up to "
           "1000: %.3f s (%.3f s of CPU), %zu eligible, %.1f rounds affordable on average  target "
           "< %.0f s  [%s]\n",
           n, near, el, cpu, elig, ni ? (double)rounds / (double)ni : 0.0, n / 1000.0,
           el < n / 1000.0 ? "ok" : "MISSED");
    free(it);
    free(cand);
    dp_event_free(ev);
}

/* SelfComposed(PoissonSampled(q, Gaussian(sigma)), steps) */
static dp_event *dpsgd(double sigma, double q, uint64_t steps)
{
    dp_event *g = dp_event_new(DP_EV_GAUSSIAN), *s = dp_event_new(DP_EV_POISSON_SAMPLED),
             *c = dp_event_new(DP_EV_SELF_COMPOSED);
    if (g == NULL || s == NULL || c == NULL)
        exit(1);
    g->u.noise.noise_multiplier = sigma;
    s->u.sampled.sampling_probability = q;
    s->u.sampled.event = g;
    c->u.self.event = s;
    c->u.self.count = steps;
    return c;
}

typedef struct {
    ledger *l;
    atomic_int stop;
    double lat[200000];
    size_t n;
} reader;

static void *reader_main(void *arg)
{
    reader *r = arg;
    while (!atomic_load(&r->stop) && r->n < 200000) {
        ledger_summary s;
        double t0 = now_s();
        ledger_get_summary(r->l, &s);
        r->lat[r->n++] = (now_s() - t0) * 1e3;
        usleep(2000);
    }
    return NULL;
}

/* The histories of the first NTRACK clients (the rounds admitted), for the excess of their
 * kept compositions over the compute API's value. */
#define NTRACK 8
static int track_k[NTRACK][4096], track_n[NTRACK];

static void excess(ledger *l)
{
    double lo = HUGE_VAL, hi = -HUGE_VAL, scratch_s = 0.0;
    int n = 0, events = 0;
    for (int i = 0; i < NTRACK; i++) {
        ledger_client c;
        if (ledger_get_client(l, ids[i], &c) != DPB_OK || c.spent_accountant != DP_ACCT_PLD ||
            track_n[i] == 0)
            continue;
        dp_event *root = dp_event_new(DP_EV_COMPOSED);
        root->u.composed.events = calloc((size_t)track_n[i], sizeof(dp_event *));
        for (int j = 0; j < track_n[i]; j++)
            root->u.composed.events[root->u.composed.n++] =
                dpsgd(0.8 + 0.01 * track_k[i][j], 0.01, 50);
        double d = c.delta, e = HUGE_VAL, t0 = now_s();
        dp_report rep;
        dpb_status st = dp_epsilon(root, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, &d, 1, &e, &rep, NULL);
        scratch_s += now_s() - t0;
        events += track_n[i];
        if (st == DPB_OK && e > 0.0) {
            double x = c.spent / e - 1.0;
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
            n++;
        }
        dp_event_free(root);
    }
    if (n > 0)
        printf("   kept compositions against the compute API (POST /v1/epsilon, pld) on %d "
               "clients' histories: %.4f%% to %.4f%% above  target within 1%%  [%s]\n",
               n, 100.0 * lo, 100.0 * hi, hi <= 0.01 && lo >= -1e-9 ? "ok" : "MISSED");
    if (n > 0)
        printf("   the compute API's composition of one such history (%.0f events on average), "
               "what a charge near the budget cost before the kept compositions: %.3f s\n",
               (double)events / n, scratch_s / n);
}

/* Rounds 1..R over C clients, P participants each; prints latency per block; returns the
 * last full block's p99 (ms) and the rounds/s sustained. */
static void schedule(const char *dir, size_t C, size_t P, int R, int block, double eps, double secs,
                     int with_reader, int elig, double *last_p99, double *rate)
{
    ledger *l = open_fresh(dir);
    bench_make_clients(l, &ids, C, eps, LEDGER_PLD, "bench_pld_ledger");
    memset(track_n, 0, sizeof track_n);
    const char **part = malloc(P * sizeof *part);
    double *lat = malloc((size_t)R * sizeof *lat), *blk = malloc((size_t)block * sizeof *blk);
    if (part == NULL || lat == NULL || blk == NULL)
        exit(1);
    reader *rd = NULL;
    pthread_t rt;
    if (with_reader) {
        rd = calloc(1, sizeof *rd);
        if (rd == NULL)
            exit(1);
        rd->l = l;
        pthread_create(&rt, NULL, reader_main, rd);
    }
    double t_start = now_s(), deadline = t_start + secs, c_start = cpu_s();
    int k, refused = 0, admitted = 0;
    unsigned seed = 7u;
    for (k = 1; k <= R && now_s() < deadline; k++) {
        dp_event *ev = dpsgd(0.8 + 0.01 * k, 0.01, 50);
        /* a random cohort of P distinct clients (a partial Fisher-Yates over a stride) */
        size_t start = (size_t)rand_r(&seed) % C, step = 1 + (size_t)rand_r(&seed) % 7;
        while (C % step == 0 && step > 1)
            step--;
        for (size_t i = 0; i < P; i++)
            part[i] = ids[(start + i * step) % C];
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "r%d", k);
        rq.participants = part;
        rq.n = P;
        rq.event = ev;
        rq.policy = LEDGER_ADMIT_ELIGIBLE;
        ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
        ledger_round_res res;
        dpb_error err = {0};
        double t0 = now_s();
        if (ledger_round(l, &rq, &res, &err) != DPB_OK) {
            fprintf(stderr, "bench_pld_ledger: round %d failed: %s\n", k, err.detail);
            exit(1);
        }
        lat[k - 1] = (now_s() - t0) * 1e3;
        admitted += (int)res.admitted;
        for (size_t i = 0; i < res.n; i++) {
            int c = atoi(res.outcomes[i].id + 1);
            if (c < NTRACK && res.outcomes[i].admitted && track_n[c] < 4096)
                track_k[c][track_n[c]++] = k;
        }
        refused += (int)(res.n - res.admitted);
        ledger_round_res_free(&res);
        dp_event_free(ev);
        if (k % block == 0 || k <= 12) {
            int b0 = k % block == 0 ? k - block : k - 1;
            size_t nb = (size_t)(k - b0);
            memcpy(blk, lat + b0, nb * sizeof *blk);
            double p50 = bench_pct(blk, nb, 0.5), p99 = bench_pct(blk, nb, 0.99);
            printf("   rounds %4d..%-4d  p50 %8.2f ms  p99 %8.2f ms\n", b0 + 1, k, p50, p99);
            if (k % block == 0)
                *last_p99 = p99;
            fflush(stdout);
        }
    }
    k--;
    double el = now_s() - t_start, cpu = cpu_s() - c_start;
    *rate = k / el;
    printf("   %d rounds in %.1f s (%.1f s of CPU): %.1f rounds/s sustained%s; %d charges "
           "admitted, %d refused\n",
           k, el, cpu, k / el, k < R ? " (stopped at the deadline)" : "", admitted, refused);
    kept_figures(l, C);
    if (elig) {
        eligibility(l, C, 0.8 + 0.01 * (k + 1));
        kept_figures(l, C); /* rebuilt: the histories eligibility found missing */
        excess(l);
    }
    size_t mc, mb;
    ledger_memo_stats(l, &mc, &mb);
    printf("   clients with a memo of their spend's sums: %zu, %.2f MiB in all (%.2f KiB each)\n",
           mc, (double)mb / 1048576.0, mc ? (double)mb / 1024.0 / (double)mc : 0.0);
    if (rd) {
        atomic_store(&rd->stop, 1);
        pthread_join(rt, NULL);
        double mx = 0.0;
        for (size_t i = 0; i < rd->n; i++)
            mx = rd->lat[i] > mx ? rd->lat[i] : mx;
        printf("   ledger_get_summary while the rounds ran: %zu reads, p50 %.3f ms, p99 %.3f ms, "
               "max %.3f ms\n",
               rd->n, bench_pct(rd->lat, rd->n, 0.5), bench_pct(rd->lat, rd->n, 0.99), mx);
        free(rd);
    }
    free(part);
    free(lat);
    free(blk);
    ledger_close_nosnapshot(l);
    if (elig) { /* recovery from the log alone, and the first reads of every spend after it */
        const char *rf = getenv("BENCH_PLD_REFINE");
        ledger_options o = {dir,  NULL, 0, 0.0, 0.0, 0, 0, !(rf && strcmp(rf, "0") == 0),
                            NULL, 0,    0, 0};
        dpb_error err = {0};
        double t0 = now_s(), c0 = cpu_s();
        if (ledger_open(&o, &l, &err) != DPB_OK) {
            fprintf(stderr, "bench_pld_ledger: %s\n", err.detail);
            exit(1);
        }
        printf("   recovery from the log alone (%d admitted charges): %.2f s (%.2f s of CPU)\n",
               admitted, now_s() - t0, cpu_s() - c0);
        kept_figures(l, C);
        ledger_close_nosnapshot(l);
    }
    rm_dir(dir);
}

/* Phase 5: C clients charged R rounds of a random third each (far from the budget), their
 * budgets then lowered to 0.97 of their rdp values, then the eligibility of all. */
static void at_scale(const char *dir, size_t C, int R)
{
    ledger *l = open_fresh(dir);
    bench_make_clients(l, &ids, C, 100.0, LEDGER_PLD, "bench_pld_ledger");
    const char **part = malloc(C * sizeof *part);
    ledger_client *batch = calloc(C, sizeof *batch);
    if (part == NULL || batch == NULL)
        exit(1);
    unsigned seed = 5u;
    double t0 = now_s();
    for (int k = 1; k <= R; k++) {
        dp_event *ev = dpsgd(1.0 + 0.02 * k, 0.01, 50);
        size_t n = 0;
        for (size_t i = 0; i < C; i++)
            if (rand_r(&seed) % 3 == 0)
                part[n++] = ids[i];
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "e%d", k);
        rq.participants = part;
        rq.n = n;
        rq.event = ev;
        rq.policy = LEDGER_ADMIT_ELIGIBLE;
        ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
        ledger_round_res res;
        if (ledger_round(l, &rq, &res, NULL) != DPB_OK)
            exit(1);
        ledger_round_res_free(&res);
        dp_event_free(ev);
    }
    double t1 = now_s();
    for (size_t i = 0; i < C; i++) {
        ledger_client c;
        if (ledger_get_client(l, ids[i], &c) != DPB_OK)
            exit(1);
        batch[i] = c;
        batch[i].epsilon = c.spent > 0.0 ? 0.97 * c.spent : 1.0;
    }
    double c0 = cpu_s();
    for (size_t b = 0; b < C; b += 10000)
        if (ledger_put_clients(l, batch + b, C - b < 10000 ? C - b : 10000, NULL) != DPB_OK)
            exit(1);
    double t2 = now_s();
    printf("   %d rounds in %.1f s; budgets lowered in %.1f s (%.1f s of CPU: each client's kept "
           "composition built from its events)\n",
           R, t1 - t0, t2 - t1, cpu_s() - c0);
    kept_figures(l, C);
    eligibility(l, C, 1.0 + 0.02 * (R + 1));
    kept_figures(l, C);
    free(part);
    free(batch);
    ledger_close_nosnapshot(l);
    rm_dir(dir);
}

static void memory(const char *dir, size_t C)
{
    long r0 = rss_kib();
    ledger *l = open_fresh(dir);
    bench_make_clients(l, &ids, C, 100.0, LEDGER_PLD, "bench_pld_ledger");
    /* five rounds of 10000 participants, a different event each (distinct histories) */
    const char **part = malloc(10000 * sizeof *part);
    if (part == NULL)
        exit(1);
    for (int k = 0; k < 5; k++) {
        dp_event *ev = dpsgd(1.0 + 0.1 * k, 0.01, 50);
        for (size_t b = 0; b < C; b += 10000) {
            size_t n = C - b < 10000 ? C - b : 10000;
            for (size_t i = 0; i < n; i++)
                part[i] = ids[(b + i * 7 + (size_t)k) % C];
            ledger_round_req rq;
            memset(&rq, 0, sizeof rq);
            snprintf(rq.round_id, sizeof rq.round_id, "m%d-%zu", k, b);
            rq.participants = part;
            rq.n = n;
            rq.event = ev;
            rq.policy = LEDGER_ADMIT_ELIGIBLE;
            ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
            ledger_round_res res;
            if (ledger_round(l, &rq, &res, NULL) != DPB_OK)
                exit(1);
            ledger_round_res_free(&res);
        }
        dp_event_free(ev);
    }
    long r1 = rss_kib();
    printf("   %zu pld clients, 5 rounds each: resident %.1f MiB more, %.2f KiB a client\n", C,
           (double)(r1 - r0) / 1024.0, (double)(r1 - r0) / (double)C);
    free(part);
    ledger_close_nosnapshot(l);
    rm_dir(dir);
}

int main(int argc, char **argv)
{
    const char *build = argc > 1 ? argv[1] : "build";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bench-pld-ledger.tmp", build);
    const char *s = getenv("BENCH_PLD_SECONDS");
    double secs = s ? atof(s) : 60.0;
    s = getenv("BENCH_PLD_ROUNDS");
    int R = s ? atoi(s) : 1000;
    s = getenv("BENCH_PLD_MEM_CLIENTS");
    size_t mem_clients = s ? (size_t)atol(s) : 100000;
    s = getenv("BENCH_PLD_PHASES");
    const char *phases = s ? s : "12345";
    s = getenv("BENCH_PLD_KEPT_MIB");
    kept_bytes = s ? (size_t)atol(s) << 20 : 0;
    s = getenv("BENCH_PLD_ELIG_CLIENTS");
    size_t elig_clients = s ? (size_t)atol(s) : 10000;
    s = getenv("BENCH_PLD_ELIG_ROUNDS");
    int elig_rounds = s ? atoi(s) : 20;

    printf("== ledger, pld mode: DP-SGD schedule sigma = 0.8 + 0.01 k, 50 steps of q = 0.01 "
           "(bench_pld_ledger)\n");
    double p99 = 0.0, rate = 0.0;
    if (strchr(phases, '1')) {
        printf("1. 100 clients, 10 participants a round, budget eps 10\n");
        schedule(dir, 100, 10, 12, 100, 10.0, secs, 0, 0, &p99, &rate);
    }
    if (strchr(phases, '2')) {
        printf("2. 1000 clients, 100 participants a round, budget eps 10 (far: the rdp bound "
               "decides), up to %d rounds, a reader polling the summary\n",
               R);
        schedule(dir, 1000, 100, R, 100, 10.0, secs, 1, 0, &p99, &rate);
        printf("   p99 of the last 100 rounds %.2f ms  target <= 50  [%s]; %.1f rounds/s  target "
               ">= 100  [%s]\n",
               p99, p99 <= 50.0 ? "ok" : "MISSED", rate, rate >= 100.0 ? "ok" : "MISSED");
    }
    if (strchr(phases, '4')) {
        printf("4. the same, budget eps 1.5 (near: past the rdp bound the PLD of each "
               "participant's history decides), a reader polling the summary\n");
        schedule(dir, 1000, 100, R, 100, 1.5, secs, 1, 1, &p99, &rate);
        printf("   p99 of the last 100 rounds %.2f ms  target <= 50  [%s]; %.1f rounds/s  target "
               ">= 100  [%s]\n",
               p99, p99 <= 50.0 ? "ok" : "MISSED", rate, rate >= 100.0 ? "ok" : "MISSED");
    }
    if (strchr(phases, '5')) {
        printf("5. eligibility at scale: %zu pld clients, %d rounds of a random third of them "
               "each (distinct histories), then each budget lowered to 0.97 of its rdp value "
               "(the PLD decides), then affordable_rounds for all\n",
               elig_clients, elig_rounds);
        at_scale(dir, elig_clients, elig_rounds);
    }
    if (strchr(phases, '3')) {
        printf("3. memory\n");
        memory(dir, mem_clients);
    }
    return 0;
}
