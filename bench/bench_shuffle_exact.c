/*
 * bench_shuffle_exact.c - figures for the exact shuffled accountant (issue targets):
 *   sigma = 1, M = 1e4: the whole delta(eps) curve (1000 points, cold)   target < 1 s
 *   a cached query (model from the cache, one delta)                    target < 1 ms
 *   sigma = 1, M = 1e6: build and curve, peak RSS                        target < 5 s, < 1 GiB
 * and, for orientation, M = 1e7, the baseline (Theorem 4.1 evaluated for the same epoch) and
 * what the exact model buys: rounds needed for delta = 0.01 at eps = 0, exact vs theorem.
 * Prints figures only.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include "../core/dp/account.h"
#include "../core/dp/event.h"
#include "../core/dp/shuffle.h"
#include "../core/dp/shuffle_exact.h"

static volatile double sink;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* Build (cold) and read the curve at n epsilons in [0, 2]; returns seconds. */
static double curve(double sigma, uint64_t M, int n, double *build_s)
{
    shx_cache_clear();
    double t0 = now_s();
    shx_model *m;
    if (shx_acquire(sigma, M, 0.0, &m) != DPB_OK) {
        printf("  acquire failed at sigma %g M %llu\n", sigma, (unsigned long long)M);
        return -1.0;
    }
    *build_s = now_s() - t0;
    for (int i = 0; i < n; i++)
        sink += shx_delta(m, 2.0 * i / (n - 1));
    double t = now_s() - t0;
    shx_info info;
    shx_get_info(m, &info);
    printf("  sigma %g, M %llu: grid h %.4g, window %zu points, model %zu KiB; delta(0) %.6g, "
           "delta(0.1) %.3g\n",
           sigma, (unsigned long long)M, info.h, info.points, info.bytes / 1024, shx_delta(m, 0.0),
           shx_delta(m, 0.1));
    shx_release(m);
    return t;
}

int main(void)
{
    printf("bench_shuffle_exact: exact accountant for seed 004's shuffled model\n");
    double b, t;

    t = curve(1.0, 10000, 1000, &b);
    printf("curve sigma=1 M=1e4, 1000 eps (cold: build %.3f s): %.3f s  target < 1 s  [%s]\n", b, t,
           t < 1.0 ? "ok" : "MISSED");

    /* cached: acquire (hit) + one delta + release */
    shx_model *m;
    shx_acquire(1.0, 10000, 0.0, &m);
    int iters = 0;
    double t0 = now_s();
    while (now_s() - t0 < 0.5) {
        shx_model *h;
        shx_acquire(1.0, 10000, 0.0, &h);
        sink += shx_delta(h, 0.01 * (iters % 100));
        shx_release(h);
        iters++;
    }
    double per = (now_s() - t0) / iters;
    printf("cached query sigma=1 M=1e4: %.3g us/op  target < 1000 us  [%s]\n", per * 1e6,
           per < 1e-3 ? "ok" : "MISSED");

    /* the same through the accountant API (event tree, report, theorem alongside) */
    dp_event *ev = dp_event_new(DP_EV_SHUFFLED_EPOCH);
    ev->u.shuffled.noise_multiplier = 1.0;
    ev->u.shuffled.rounds = 10000;
    double eps = 0.05, d;
    dp_report rep;
    iters = 0;
    t0 = now_s();
    while (now_s() - t0 < 0.5) {
        dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_SHUFFLE_EXACT, &eps, 1, &d, NULL, &rep, NULL);
        sink += d;
        iters++;
    }
    double per_api = (now_s() - t0) / iters;
    /* baseline: Theorem 4.1 for the same epoch, same path */
    int it2 = 0;
    t0 = now_s();
    ev->u.shuffled.rounds = 1140369;
    while (now_s() - t0 < 0.5) {
        dp_delta(ev, DP_REL_ADD_OR_REMOVE, DP_ACCT_THM41, &eps, 1, &d, NULL, &rep, NULL);
        sink += d;
        it2++;
    }
    double per_thm = (now_s() - t0) / it2;
    printf("dp_delta shuffle_exact (cached model): %.3g us/op; thm41 baseline %.3g us/op "
           "(%.1fx)\n",
           per_api * 1e6, per_thm * 1e6, per_api / per_thm);
    shx_release(m);

    long rss0 = peak_rss_mib();
    t = curve(1.0, 1000000, 1000, &b);
    long rss1 = peak_rss_mib();
    printf("sigma=1 M=1e6 build %.3f s, curve of 1000 %.3f s  target < 5 s  [%s]; peak RSS %ld "
           "MiB (before %ld)  target < 1024 MiB  [%s]\n",
           b, t, t < 5.0 ? "ok" : "MISSED", rss1, rss0, rss1 < 1024 ? "ok" : "MISSED");

    t = curve(1.0, 10000000, 1000, &b);
    printf("sigma=1 M=1e7 build %.3f s, curve of 1000 %.3f s; peak RSS %ld MiB\n", b, t,
           peak_rss_mib());
    t = curve(0.5, 100000, 1000, &b);
    printf("sigma=0.5 M=1e5 build %.3f s, curve of 1000 %.3f s\n", b, t);

    /* what it buys: the fewest rounds for delta = 0.01 at eps = 0 */
    dp_event *tm = dp_event_new(DP_EV_SHUFFLED_EPOCH);
    tm->u.shuffled.noise_multiplier = 1.0;
    tm->unknown = DP_PARAM_ROUNDS;
    dp_calibration c;
    t0 = now_s();
    dpb_status st =
        dp_calibrate(tm, DP_REL_ADD_OR_REMOVE, DP_ACCT_SHUFFLE_EXACT, 0.0, 0.01, &c, &rep, NULL);
    t = now_s() - t0;
    if (st == DPB_OK)
        printf("rounds for (0, 0.01) at sigma=1: exact %.0f, Theorem 4.1 %.0f (%.0fx fewer); "
               "calibration %.2f s\n",
               c.value, c.thm41_value, c.thm41_value / c.value, t);
    tm->u.shuffled.rounds = 0;
    t0 = now_s();
    st = dp_calibrate(tm, DP_REL_ADD_OR_REMOVE, DP_ACCT_SHUFFLE_EXACT, 1.0, 1e-6, &c, &rep, NULL);
    t = now_s() - t0;
    if (st == DPB_OK)
        printf(
            "rounds for (1, 1e-6) at sigma=1: exact %.0f, Theorem 4.1 %.3g; calibration %.2f s\n",
            c.value, c.thm41_value, t);
    dp_event_free(tm);
    dp_event_free(ev);
    printf("(sink %g)\n", (double)sink);
    return 0;
}
