/*
 * bench_core.c - throughput of the core privacy computations, no HTTP involved.
 *
 * Measures (each for about 0.5 s of wall time, CLOCK_MONOTONIC):
 *   thm41_eval      dp_thm41_eval over rotating (sigma, M)          target < 1 us
 *   thm41_rounds    dp_thm41_min_rounds (exact M) over (sigma, delta) target < 100 us
 *   thm41_sigma     dp_thm41_sigma_interval over (M, delta)          informational
 *   baseline        one exp() + log() pair per iteration, for ratios
 * Prints one figure per line. "[ok]" / "[MISSED]" are informational only: the exit status
 * is 0 unless a core call returns an error status (then 1).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../core/dp/account.h"
#include "../core/dp/shuffle.h"

#define BENCH_SECONDS 0.5
#define NPTS 1024 /* size of each rotating input table (a power of two) */

/* Results are summed into this so the compiler cannot drop the work. */
static volatile double sink;

static double now_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("clock_gettime");
        return 0.0;
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A small deterministic generator (xorshift64*) for the input tables: uniform in [0, 1). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static double urand(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545f4914f6cdd1dULL) >> 11) * 0x1.0p-53;
}

/* Log-uniform in [lo, hi]. */
static double log_uniform(double lo, double hi)
{
    return exp(log(lo) + (log(hi) - log(lo)) * urand());
}

/* Outcome counts of one measured loop. */
typedef struct {
    uint64_t iters;
    uint64_t ok;          /* DPB_OK */
    uint64_t uncertified; /* DPB_ENOTCOVERED or DPB_EINFEASIBLE: a valid answer */
    uint64_t errors;      /* anything else */
    dpb_status first_error;
    double seconds;
} run_stats;

static void count_status(run_stats *rs, dpb_status st)
{
    if (st == DPB_OK) {
        rs->ok++;
    } else if (st == DPB_ENOTCOVERED || st == DPB_EINFEASIBLE) {
        rs->uncertified++;
    } else {
        if (rs->errors == 0)
            rs->first_error = st;
        rs->errors++;
    }
}

static double sigma_tab[NPTS];
static uint64_t rounds_tab[NPTS];
static double delta_tab[NPTS];
static double sigma2_tab[NPTS];
static double x_tab[NPTS];

static void fill_tables(void)
{
    for (int i = 0; i < NPTS; i++) {
        sigma_tab[i] = 0.6 + 2.4 * urand();               /* thm41_eval sigma */
        rounds_tab[i] = (uint64_t)log_uniform(1e4, 1e12); /* thm41_eval / interval M */
        delta_tab[i] = log_uniform(1e-5, 1e-2);           /* solves' delta */
        sigma2_tab[i] = 0.5 + 1.5 * urand();              /* min_rounds sigma */
        x_tab[i] = 0.1 + 9.9 * urand();                   /* baseline input */
    }
}

/* Each benchmark runs batches of `batch` iterations until BENCH_SECONDS have passed. */
static run_stats bench_eval(void)
{
    run_stats rs = {0};
    const unsigned batch = 4096;
    unsigned k = 0;
    double t0 = now_s(), t1 = t0;
    do {
        double acc = 0.0;
        for (unsigned j = 0; j < batch; j++, k++) {
            dp_thm41 e;
            unsigned i = k & (NPTS - 1);
            dpb_status st = dp_thm41_eval(sigma_tab[i], rounds_tab[i], &e);
            count_status(&rs, st);
            if (e.sigma_ok && e.rounds_ok)
                acc += e.delta;
            acc += e.sigma_min;
        }
        sink += acc;
        rs.iters += batch;
        t1 = now_s();
    } while (t1 - t0 < BENCH_SECONDS);
    rs.seconds = t1 - t0;
    return rs;
}

static run_stats bench_min_rounds(void)
{
    run_stats rs = {0};
    const unsigned batch = 64;
    unsigned k = 0;
    double t0 = now_s(), t1 = t0;
    do {
        double acc = 0.0;
        for (unsigned j = 0; j < batch; j++, k++) {
            unsigned i = k & (NPTS - 1);
            uint64_t m = 0;
            dpb_status st = dp_thm41_min_rounds(sigma2_tab[i], delta_tab[i], &m, NULL);
            count_status(&rs, st);
            acc += (double)m;
        }
        sink += acc;
        rs.iters += batch;
        t1 = now_s();
    } while (t1 - t0 < BENCH_SECONDS);
    rs.seconds = t1 - t0;
    return rs;
}

static run_stats bench_sigma_interval(void)
{
    run_stats rs = {0};
    const unsigned batch = 16;
    unsigned k = 0;
    double t0 = now_s(), t1 = t0;
    do {
        double acc = 0.0;
        for (unsigned j = 0; j < batch; j++, k++) {
            unsigned i = k & (NPTS - 1);
            double lo = 0.0, hi = 0.0, bd = 0.0, bs = 0.0;
            dpb_status st =
                dp_thm41_sigma_interval(rounds_tab[i], delta_tab[i], &lo, &hi, &bd, &bs);
            count_status(&rs, st);
            if (st == DPB_OK)
                acc += lo + hi;
            acc += bs;
        }
        sink += acc;
        rs.iters += batch;
        t1 = now_s();
    } while (t1 - t0 < BENCH_SECONDS);
    rs.seconds = t1 - t0;
    return rs;
}

static run_stats bench_baseline(void)
{
    run_stats rs = {0};
    const unsigned batch = 4096;
    unsigned k = 0;
    double t0 = now_s(), t1 = t0;
    do {
        double acc = 0.0;
        for (unsigned j = 0; j < batch; j++, k++) {
            unsigned i = k & (NPTS - 1);
            acc += exp(-x_tab[i]) + log(x_tab[i]);
        }
        sink += acc;
        rs.iters += batch;
        rs.ok += batch;
        t1 = now_s();
    } while (t1 - t0 < BENCH_SECONDS);
    rs.seconds = t1 - t0;
    return rs;
}

/* ns per iteration of a run (0 if it did not run). */
static double ns_per_op(const run_stats *rs)
{
    return rs->iters ? rs->seconds * 1e9 / (double)rs->iters : 0.0;
}

/* Prints one figure; target_ns <= 0 means "no target"; outcomes: also print the status
 * counts. Returns 1 on any error status. */
static int report(const char *name, const run_stats *rs, double target_ns, const char *unit,
                  int outcomes)
{
    double ns = ns_per_op(rs);
    double per_s = rs->seconds > 0.0 ? (double)rs->iters / rs->seconds : 0.0;
    double scale = 1.0;
    if (unit[0] == 'u')
        scale = 1e3;
    printf("%s: %.3g %s/op (", name, ns / scale, unit);
    if (per_s >= 1e6)
        printf("%.3g M/s)", per_s / 1e6);
    else if (per_s >= 1e3)
        printf("%.3g k/s)", per_s / 1e3);
    else
        printf("%.3g /s)", per_s);
    if (target_ns > 0.0)
        printf("  target < %g %s  [%s]", target_ns / scale, unit, ns < target_ns ? "ok" : "MISSED");
    if (!outcomes) {
        printf("  (%llu iters)\n", (unsigned long long)rs->iters);
        return 0;
    }
    printf("  (%llu iters, %llu certified, %llu not covered/infeasible",
           (unsigned long long)rs->iters, (unsigned long long)rs->ok,
           (unsigned long long)rs->uncertified);
    if (rs->errors)
        printf(", %llu ERRORS, first: %s", (unsigned long long)rs->errors,
               dpb_strstatus(rs->first_error));
    printf(")\n");
    return rs->errors ? 1 : 0;
}

/* ---- issue 3: the standard accountants on the reference run (docs/MATH.md section 6) ---- */

static dp_event *reference_run(dp_event **gauss_out)
{
    dp_event *g = dp_event_new(DP_EV_GAUSSIAN);
    dp_event *p = dp_event_new(DP_EV_POISSON_SAMPLED);
    dp_event *t = dp_event_new(DP_EV_SELF_COMPOSED);
    if (g == NULL || p == NULL || t == NULL)
        exit(1);
    g->u.noise.noise_multiplier = 1.0;
    p->u.sampled.sampling_probability = 0.01;
    p->u.sampled.event = g;
    t->u.self.event = p;
    t->u.self.count = 1000;
    if (gauss_out)
        *gauss_out = g;
    return t;
}

/* Mean seconds per call of one accountant's eps(1e-5), repeated for at least `secs`. */
static double time_epsilon(dp_accountant a, double secs, double *eps_out)
{
    dp_event *ev = reference_run(NULL);
    double delta = 1e-5, eps = 0.0;
    int n = 0;
    double t0 = now_s(), t1;
    do {
        dp_report rep;
        if (dp_epsilon(ev, DP_REL_ADD_OR_REMOVE, a, &delta, 1, &eps, &rep, NULL) != DPB_OK)
            exit(1);
        sink += eps;
        n++;
        t1 = now_s();
    } while (t1 - t0 < secs);
    dp_event_free(ev);
    *eps_out = eps;
    return (t1 - t0) / n;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static void bench_accountants(void)
{
    double eps;
    long rss0 = peak_rss_kib();
    double t = time_epsilon(DP_ACCT_RDP, BENCH_SECONDS, &eps);
    printf("rdp_epsilon (q=0.01, sigma=1, T=1000, delta=1e-5): %.3g us/op, eps %.6f  "
           "target < 100 us  [%s]\n",
           t * 1e6, eps, t < 100e-6 ? "ok" : "MISSED");
    t = time_epsilon(DP_ACCT_PLD, BENCH_SECONDS, &eps);
    long rss1 = peak_rss_kib();
    printf("pld_epsilon (same run, grid 1e-4): %.3g ms/op, eps %.6f, peak RSS %ld KiB (%+ld KiB "
           "over the process before)  target < 50 ms  [%s]\n",
           t * 1e3, eps, rss1, rss1 - rss0, t < 50e-3 ? "ok" : "MISSED");
    /* sigma calibration to eps = 1 with PLD */
    int n = 0;
    double t0 = now_s(), t1, sigma = 0.0;
    do {
        dp_event *g;
        dp_event *ev = reference_run(&g);
        g->unknown = DP_PARAM_NOISE_MULTIPLIER;
        dp_calibration c;
        dp_report rep;
        if (dp_calibrate(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_PLD, 1.0, 1e-5, &c, &rep, NULL) !=
            DPB_OK)
            exit(1);
        sigma = c.value;
        dp_event_free(ev);
        n++;
        t1 = now_s();
    } while (t1 - t0 < 2.0 * BENCH_SECONDS);
    t = (t1 - t0) / n;
    printf("pld_calibrate_sigma (same run to eps=1, delta=1e-5): %.3g ms/op, sigma %.6f  "
           "target < 1000 ms  [%s]\n",
           t * 1e3, sigma, t < 1.0 ? "ok" : "MISSED");
}

int main(void)
{
    int bad = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    fill_tables();
    printf("bench_core: %ld online CPUs, %.1f s per figure, %d rotating inputs\n", ncpu,
           BENCH_SECONDS, NPTS);
    if (fflush(stdout) != 0)
        return 1;

    run_stats base = bench_baseline();
    bad |= report("baseline_exp_log", &base, 0.0, "ns", 0);

    run_stats ev = bench_eval();
    bad |= report("thm41_eval", &ev, 1000.0, "ns", 1);
    double base_ns = ns_per_op(&base);
    if (base_ns > 0.0)
        printf("thm41_eval / baseline_exp_log: %.1fx\n", ns_per_op(&ev) / base_ns);
    fflush(stdout);

    run_stats mr = bench_min_rounds();
    bad |= report("thm41_min_rounds", &mr, 100e3, "us", 1);
    fflush(stdout);

    run_stats si = bench_sigma_interval();
    bad |= report("thm41_sigma_interval", &si, 0.0, "us", 1);
    fflush(stdout);

    bench_accountants();

    printf("(sink %g)\n", (double)sink);
    if (fflush(stdout) != 0)
        return 1;
    return bad ? 1 : 0;
}
