/*
 * bench_pld_sweep.c - the PLD accountant over a fixed-seed sweep of the regimes users meet,
 * timed side by side with Google's dp_accounting PLDAccountant when a checkout of it is
 * given (DP_ACCOUNTING_PATH: its python/dp_accounting directory; the Python side is
 * bench/pld_sweep_dp_accounting.py, run under $PYTHON with numpy, scipy, attr, mpmath and
 * absl).
 *
 * Scenarios: compositions of 1-4 mechanisms (Poisson-sampled Gaussians, Gaussians, Laplace,
 * sampled Laplace), q log-uniform in [1e-4, 1], sigma (or the Laplace scale) in [0.3, 30],
 * 1 to 100 000 steps each, delta in [1e-12, 1e-2], both relations (replace_one with
 * Gaussians only: neither accountant takes sampling or Laplace under it), grid 1e-4, eps at
 * delta. A scenario whose RDP epsilon exceeds 60 is redrawn (no one asks for such budgets,
 * and both sides would spend minutes on a grid that wide).
 *
 * Each scenario is timed on our side twice, before and after dp_accounting's run, and the
 * slower of the two is kept; the ratio is dp_accounting's time over ours. Prints the
 * distribution (p10, median, worst), the worst cases, refusals, and how our epsilon compares
 * with dp_accounting's. Figures only: nothing is asserted on times; the exit status is 1 only
 * if a scenario fails on our side where dp_accounting answers.
 *
 * usage: bench_pld_sweep [N]   N scenarios (default 300; PLD_SWEEP_N overrides);
 *        PLD_SWEEP_COMPARE   how many of them to time against dp_accounting (default 40,
 *                            spread evenly; "all" for every one);
 *        PLD_SWEEP_SECONDS   wall-clock budget for dp_accounting's side (default 240 s);
 *        PLD_SWEEP_VERBOSE   print every scenario;
 *        PLD_SWEEP_ONLY      a comma-separated list of scenario numbers: run only those
 *                            (the draw is the same; for profiling the slow ones).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/dp/account.h"
#include "../core/dp/pld.h"

#define MAXK 4
#define GRID 1e-4

typedef struct {
    char kind; /* 'g' or 'l' */
    double q, sigma;
    uint64_t count;
} comp;

typedef struct {
    int replace;
    double delta;
    int k;
    comp c[MAXK];
    /* results */
    int ok;
    double eps, t_ours;
    int ref_ok;
    double ref_eps, t_ref;
    char ref_err[128];
} scenario;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static double urand(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dULL) >> 11) * 0x1.0p-53;
}
static double logu(double lo, double hi)
{
    return exp(log(lo) + (log(hi) - log(lo)) * urand());
}

static dp_event *leaf(const comp *c)
{
    dp_event *x = dp_event_new(c->kind == 'g' ? DP_EV_GAUSSIAN : DP_EV_LAPLACE);
    x->u.noise.noise_multiplier = c->sigma;
    if (c->q < 1.0) {
        dp_event *p = dp_event_new(DP_EV_POISSON_SAMPLED);
        p->u.sampled.sampling_probability = c->q;
        p->u.sampled.event = x;
        x = p;
    }
    if (c->count > 1) {
        dp_event *t = dp_event_new(DP_EV_SELF_COMPOSED);
        t->u.self.event = x;
        t->u.self.count = c->count;
        x = t;
    }
    return x;
}

static dp_event *tree(const scenario *s)
{
    dp_event *c = dp_event_new(DP_EV_COMPOSED);
    c->u.composed.events = calloc(MAXK, sizeof(dp_event *));
    for (int i = 0; i < s->k; i++)
        c->u.composed.events[c->u.composed.n++] = leaf(&s->c[i]);
    return c;
}

static dpb_status eps_of(const scenario *s, dp_accountant a, double *eps, char *why, size_t nwhy)
{
    dp_event *ev = tree(s);
    dp_options opt = {GRID, NULL};
    dp_report rep = {0};
    dpb_error err = {0};
    dpb_status st = dp_epsilon_ex(ev, s->replace ? DP_REL_REPLACE : DP_REL_ADD_OR_REMOVE, a, &opt,
                                  &s->delta, 1, eps, NULL, &rep, &err);
    if (why)
        snprintf(why, nwhy, "%s", err.detail);
    dp_event_free(ev);
    return st;
}

static void draw(scenario *s)
{
    for (;;) {
        memset(s, 0, sizeof *s);
        s->replace = urand() < 0.15;
        s->k = urand() < 0.3 ? 1 : 2 + (int)(urand() * 3.0);
        for (int i = 0; i < s->k; i++) {
            comp *c = &s->c[i];
            double u = urand();
            c->kind = (s->replace || u < 0.8) ? 'g' : 'l';
            int sampled = !s->replace && (u < 0.6 || (u >= 0.95));
            c->q = sampled ? logu(1e-4, 1.0) : 1.0;
            c->sigma = logu(0.3, 30.0);
            c->count = (uint64_t)llround(logu(1.0, 1e5));
        }
        s->delta = logu(1e-12, 1e-2);
        double e;
        if (eps_of(s, DP_ACCT_RDP, &e, NULL, 0) == DPB_OK && e <= 60.0)
            return;
    }
}

static void describe(const scenario *s, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "%s delta %.2g:", s->replace ? "replace" : "add", s->delta);
    for (int i = 0; i < s->k && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, " %llu x %s%s(%s%.3g%s%.3g)",
                              (unsigned long long)s->c[i].count, s->c[i].q < 1.0 ? "sampled " : "",
                              s->c[i].kind == 'g' ? "gauss" : "laplace",
                              s->c[i].q < 1.0 ? "q " : "", s->c[i].q < 1.0 ? s->c[i].q : 0.0,
                              s->c[i].q < 1.0 ? ", s " : "s ", s->c[i].sigma);
}

/* ---- the dp_accounting coprocess ------------------------------------------------------ */

static pid_t ref_pid = -1;
static FILE *ref_in, *ref_out;

static int ref_start(const char *python, const char *script)
{
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0)
        return -1;
    ref_pid = fork();
    if (ref_pid < 0)
        return -1;
    if (ref_pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[1]);
        close(from[0]);
        execlp(python, python, script, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    ref_in = fdopen(to[1], "w");
    ref_out = fdopen(from[0], "r");
    char line[256];
    if (ref_out == NULL || fgets(line, sizeof line, ref_out) == NULL ||
        strncmp(line, "ready", 5) != 0)
        return -1;
    return 0;
}

static void ref_stop(void)
{
    if (ref_pid <= 0)
        return;
    if (ref_in)
        fclose(ref_in);
    if (ref_out)
        fclose(ref_out);
    kill(ref_pid, SIGTERM);
    waitpid(ref_pid, NULL, 0);
    ref_pid = -1;
}

static int ref_run(int id, scenario *s)
{
    fprintf(ref_in, "%d %s %.17g %.17g %d", id, s->replace ? "replace" : "add", s->delta, GRID,
            s->k);
    for (int i = 0; i < s->k; i++)
        fprintf(ref_in, " %c %.17g %.17g %llu", s->c[i].kind, s->c[i].q, s->c[i].sigma,
                (unsigned long long)s->c[i].count);
    fprintf(ref_in, "\n");
    fflush(ref_in);
    char line[512];
    if (fgets(line, sizeof line, ref_out) == NULL)
        return -1;
    int rid;
    char tag[8];
    if (sscanf(line, "%d %7s", &rid, tag) != 2 || rid != id)
        return -1;
    if (strcmp(tag, "ok") == 0 && sscanf(line, "%*d %*s %lf %lf", &s->ref_eps, &s->t_ref) == 2) {
        s->ref_ok = 1;
    } else {
        const char *m = strstr(line, "err ");
        snprintf(s->ref_err, sizeof s->ref_err, "%s", m ? m + 4 : line);
        s->ref_err[strcspn(s->ref_err, "\n")] = 0;
    }
    return 0;
}

/* ---- figures --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(const double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    size_t i = (size_t)floor(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* Whether i is among the comma-separated numbers of list. */
static int listed(const char *list, int i)
{
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            return 0;
        if (v == i)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static double time_ours(scenario *s, char *why, size_t nwhy)
{
    double t0 = now_s();
    s->ok = eps_of(s, DP_ACCT_PLD, &s->eps, why, nwhy) == DPB_OK;
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    const char *envn = getenv("PLD_SWEEP_N");
    int n = argc > 1 ? atoi(argv[1]) : envn ? atoi(envn) : 300;
    if (n < 1)
        n = 1;
    const char *cmpenv = getenv("PLD_SWEEP_COMPARE");
    int ncmp = cmpenv && strcmp(cmpenv, "all") == 0 ? n : cmpenv ? atoi(cmpenv) : 40;
    if (ncmp > n)
        ncmp = n;
    double budget = getenv("PLD_SWEEP_SECONDS") ? atof(getenv("PLD_SWEEP_SECONDS")) : 240.0;
    const char *dpa = getenv("DP_ACCOUNTING_PATH");
    const char *python = getenv("PYTHON") ? getenv("PYTHON") : "python3";
    const char *script = getenv("PLD_SWEEP_SCRIPT") ? getenv("PLD_SWEEP_SCRIPT")
                                                    : "bench/pld_sweep_dp_accounting.py";
    int compare = dpa != NULL && *dpa != 0;
    int verbose = getenv("PLD_SWEEP_VERBOSE") != NULL;
    if (compare && ref_start(python, script) != 0) {
        printf("dp_accounting at %s could not be started with %s (needs numpy, scipy, attr, "
               "mpmath, absl): timing our side only\n",
               dpa, python);
        ref_stop();
        compare = 0;
    } else if (!compare) {
        printf("DP_ACCOUNTING_PATH is not set: dp_accounting is not timed (set it to a "
               "checkout's python/dp_accounting directory)\n");
    }
    scenario *sc = calloc((size_t)n, sizeof *sc);
    if (sc == NULL)
        return 1;
    for (int i = 0; i < n; i++)
        draw(&sc[i]);
    printf("%d scenarios (seed fixed), grid %g, epsilon at delta; %s\n", n, GRID,
           compare ? "timed side by side with dp_accounting" : "our side only");

    /* the daemon plans its FFT sizes when it starts (pld_warm_plans_start): so does the sweep,
     * before any timing */
    double tw = now_s();
    pld_warm_plans();
    printf("FFT plans made ahead, as dpbudgetd does at start: %.0f ms\n", 1e3 * (now_s() - tw));
    double *tours = malloc((size_t)n * sizeof *tours), *ratio = malloc((size_t)n * sizeof *ratio);
    double *rel = malloc((size_t)n * sizeof *rel);
    int *rid = malloc((size_t)n * sizeof *rid);
    size_t nt = 0, nr = 0, nrel = 0;
    int fails = 0, bad = 0, ref_fail = 0, compared = 0;
    double ref_spent = 0.0, het_max = 0.0;
    char why[320];
    int stride = ncmp > 0 ? (n + ncmp - 1) / ncmp : n + 1;
    const char *only = getenv("PLD_SWEEP_ONLY");
    for (int i = 0; i < n; i++) {
        scenario *s = &sc[i];
        if (only != NULL && !listed(only, i))
            continue;
        double t1 = time_ours(s, why, sizeof why);
        int cmp_this = compare && ncmp > 0 && i % stride == 0 && ref_spent < budget;
        if (cmp_this) {
            if (ref_run(i, s) != 0) {
                printf("dp_accounting stopped answering at scenario %d: comparison ends\n", i);
                ref_stop();
                compare = 0;
                cmp_this = 0;
            } else {
                compared++;
                ref_spent += s->t_ref;
                double t2 = time_ours(s, why, sizeof why);
                if (t2 > t1)
                    t1 = t2;
            }
        }
        s->t_ours = t1;
        tours[nt++] = t1;
        if (verbose) {
            char d[400];
            describe(s, d, sizeof d);
            printf("  #%d ours %.1f ms eps %.8g", i, 1e3 * t1, s->ok ? s->eps : NAN);
            if (cmp_this)
                printf(" | dp_accounting %.1f ms eps %.8g", 1e3 * s->t_ref,
                       s->ref_ok ? s->ref_eps : NAN);
            printf(": %s\n", d);
        }
        int het = s->k >= 2;
        for (int j = 0; j < s->k; j++)
            het = het && s->c[j].kind == 'g' && s->c[j].q < 1.0;
        if (het && s->ok && t1 > het_max)
            het_max = t1;
        if (!s->ok) {
            char d[400];
            describe(s, d, sizeof d);
            printf("  refused #%d: %s: %s\n", i, d, why);
            fails++;
        }
        if (cmp_this && s->ref_ok && s->ok) {
            ratio[nr] = s->t_ref / s->t_ours;
            rid[nr++] = i;
            /* both "infinite" compare as nothing (inf - inf: NaN); both 0 as equal (0 / 0:
             * NaN, which would leave the sort below in no order) */
            if (isfinite(s->ref_eps))
                rel[nrel++] = !isfinite(s->eps)  ? HUGE_VAL
                              : s->ref_eps > 0.0 ? (s->eps - s->ref_eps) / s->ref_eps
                              : s->eps > 0.0     ? HUGE_VAL
                                                 : 0.0;
            if (s->eps > s->ref_eps * (1.0 + 1e-3))
                bad++;
        }
        if (cmp_this && !s->ref_ok) {
            ref_fail++;
            if (!s->ok)
                continue;
        }
        if (cmp_this && s->ref_ok && !s->ok)
            bad++;
    }
    ref_stop();
    qsort(tours, nt, sizeof *tours, cmp_double);
    printf("ours: %d of %d answered; time p50 %.1f ms, p90 %.1f ms, max %.1f ms\n", n - fails, n,
           1e3 * quantile(tours, nt, 0.5), 1e3 * quantile(tours, nt, 0.9),
           1e3 * (nt ? tours[nt - 1] : NAN));
    printf("heterogeneous compositions of 2-4 sampled Gaussians: slowest %.1f ms  target <= 200 "
           "ms  [%s]\n",
           1e3 * het_max, het_max <= 0.2 ? "ok" : "MISSED");
    if (nr > 0) {
        /* the worst cases first, by ratio */
        for (size_t a = 0; a < nr; a++)
            for (size_t b = a + 1; b < nr; b++)
                if (ratio[b] < ratio[a]) {
                    double t = ratio[a];
                    ratio[a] = ratio[b];
                    ratio[b] = t;
                    int u = rid[a];
                    rid[a] = rid[b];
                    rid[b] = u;
                }
        printf("speed ratio dp_accounting / ours over %zu scenarios (%d compared, %d refused by "
               "dp_accounting, %.0f s on its side): p10 %.1fx, median %.1fx, worst %.2fx  "
               "targets p10 >= 5x, median >= 20x, worst >= 1x  [%s]\n",
               nr, compared, ref_fail, ref_spent, quantile(ratio, nr, 0.1),
               quantile(ratio, nr, 0.5), ratio[0],
               quantile(ratio, nr, 0.1) >= 5.0 && quantile(ratio, nr, 0.5) >= 20.0 &&
                       ratio[0] >= 1.0
                   ? "ok"
                   : "MISSED");
        for (size_t a = 0; a < nr && a < 5; a++) {
            scenario *s = &sc[rid[a]];
            char d[400];
            describe(s, d, sizeof d);
            printf("  worst #%d: %.2fx (ours %.1f ms, dp_accounting %.1f ms; eps %.6g vs %.6g): "
                   "%s\n",
                   rid[a], ratio[a], 1e3 * s->t_ours, 1e3 * s->t_ref, s->eps, s->ref_eps, d);
        }
        qsort(rel, nrel, sizeof *rel, cmp_double); /* no NaN in it: the order is total */
        printf("epsilon, ours relative to dp_accounting's: min %+.2e, median %+.2e, max %+.2e; "
               "%d above it by more than 0.1%% or refused where it answers\n",
               rel[0], quantile(rel, nrel, 0.5), rel[nrel - 1], bad);
    }
    for (int i = 0; i < n; i++)
        if (sc[i].ref_err[0] && !sc[i].ok) {
            char d[400];
            describe(&sc[i], d, sizeof d);
            printf("  both refuse #%d: %s (dp_accounting: %.80s)\n", i, d, sc[i].ref_err);
        }
    free(sc);
    free(tours);
    free(ratio);
    free(rel);
    free(rid);
    return fails > 0 && bad > 0 ? 1 : 0;
}
