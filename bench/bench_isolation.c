/*
 * bench_isolation.c - do heavy computations starve the ledger? Latency of POST /v1/rounds
 * (100 participants, a fresh round id each time) and of GET /healthz, first with the daemon
 * otherwise idle, then while LOADERS threads keep the compute endpoints saturated with
 * expensive PLD requests (POST /v1/delta, about 1-2 s of work each).
 *
 *   bench_isolation HOST PORT SECONDS LOADERS
 *
 * The daemon must create clients on first use (--default-budget). The probes are paced: one
 * round and one /healthz every 10 ms, each on its own keep-alive connection; a loader sends
 * its next computation as soon as the last is answered (after a 503 overloaded it waits
 * 50 ms). Prints p50, p99 and max of each probe in each phase, the p99 ratio saturated/idle,
 * and what the loaders got (200, 503 overloaded, 422 deadline). Exit status 1 if a probe was
 * not answered 200, or the setup fails. Timings are printed, never asserted.
 *
 *   bench_isolation HOST PORT ROUNDS pld
 *
 * The pld schedule instead: 1000 clients in pld accounting (budget eps 10, delta 1e-5), then
 * ROUNDS (<= 1000) rounds back to back of 100 of them, round k charging 50 steps of the
 * Poisson-sampled Gaussian with q = 0.01 and sigma = 0.8 + 0.01 k, while GET /healthz and
 * GET /v1/summary are probed every 10 ms. Prints the rounds' latency per 100 rounds, the
 * rounds/s sustained, and the probes' p50, p99 and max (targets: p99 <= 50 ms at round 1000,
 * >= 100 rounds/s, /healthz p99 < 5 ms).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "benchhttp.h"
#include "benchlib.h"

#define MAX_SAMPLES 200000
#define RESP_CAP (1u << 20)

static struct sockaddr_in addr;

static const char HEAVY[] =
    "{\"accountant\": \"pld\", \"value_discretization_interval\": 3e-6, \"event\": "
    "{\"class_name\": \"SelfComposedDpEvent\", \"count\": 1000, \"event\": "
    "{\"class_name\": \"PoissonSampledDpEvent\", \"sampling_probability\": 0.01, \"event\": "
    "{\"class_name\": \"GaussianDpEvent\", \"noise_multiplier\": 0.8}}}, \"epsilon\": 1.0}";

/* One request on *fd to the daemon (benchhttp.h). */
static int request(int *fd, const char *method, const char *path, const char *body, char *buf)
{
    return bench_request(fd, &addr, method, path, body, buf, RESP_CAP);
}

typedef struct {
    double *v;
    size_t n;
} samples;

static void add(samples *s, double x)
{
    if (s->n < MAX_SAMPLES)
        s->v[s->n++] = x;
}

static double pct(samples *s, double p)
{
    return bench_pct(s->v, s->n, p);
}

/* ---- loaders ---- */

static volatile int loading;
static unsigned long got200, got503, got422, gotother;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void *loader(void *arg)
{
    (void)arg;
    char *buf = malloc(RESP_CAP);
    int fd = -1;
    while (buf && __atomic_load_n(&loading, __ATOMIC_RELAXED)) {
        int st = request(&fd, "POST", "/v1/delta", HEAVY, buf);
        pthread_mutex_lock(&count_lock);
        if (st == 200)
            got200++;
        else if (st == 503)
            got503++;
        else if (st == 422)
            got422++;
        else
            gotother++;
        pthread_mutex_unlock(&count_lock);
        if (st == 503 || st < 0)
            sleep_s(0.05);
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

/* ---- probes ---- */

static char *round_body(const char *phase, unsigned long n)
{
    char *b = malloc(4096);
    if (b == NULL)
        return NULL;
    int k = snprintf(b, 4096, "{\"round_id\": \"bench-%s-%lu-%d\", \"participants\": [", phase, n,
                     (int)getpid());
    for (int i = 0; i < 100; i++)
        k += snprintf(b + k, 4096 - (size_t)k, "%s\"bench-%d\"", i ? ", " : "", i);
    snprintf(b + k, 4096 - (size_t)k,
             "], \"event\": {\"class_name\": \"GaussianDpEvent\", \"noise_multiplier\": 50}}");
    return b;
}

/* Probe for seconds; 0, or -1 when a probe failed. */
static int probe_phase(const char *phase, double seconds, samples *rounds, samples *health)
{
    char *buf = malloc(RESP_CAP);
    if (buf == NULL)
        return -1;
    int fr = -1, fh = -1, bad = 0;
    unsigned long n = 0;
    double t_end = now_s() + seconds, next = now_s();
    while (now_s() < t_end) {
        char *rb = round_body(phase, n++);
        double t0 = now_s();
        int st = request(&fr, "POST", "/v1/rounds", rb, buf);
        double t1 = now_s();
        free(rb);
        if (st != 200) {
            if (bad++ < 3)
                fprintf(stderr, "bench_isolation: POST /v1/rounds answered %d: %.200s\n", st, buf);
        } else {
            add(rounds, t1 - t0);
        }
        t0 = now_s();
        st = request(&fh, "GET", "/healthz", NULL, buf);
        t1 = now_s();
        if (st != 200) {
            if (bad++ < 3)
                fprintf(stderr, "bench_isolation: GET /healthz answered %d\n", st);
        } else {
            add(health, t1 - t0);
        }
        next += 0.01;
        double wait = next - now_s();
        if (wait > 0)
            sleep_s(wait);
        else
            next = now_s();
    }
    if (fr >= 0)
        close(fr);
    if (fh >= 0)
        close(fh);
    free(buf);
    return bad ? -1 : 0;
}

static void report(const char *name, samples *idle, samples *busy)
{
    double i50 = pct(idle, 0.5) * 1e3, i99 = pct(idle, 0.99) * 1e3, imax = pct(idle, 1.0) * 1e3;
    double b50 = pct(busy, 0.5) * 1e3, b99 = pct(busy, 0.99) * 1e3, bmax = pct(busy, 1.0) * 1e3;
    printf("  %-28s idle: n %5zu  p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms\n", name, idle->n, i50,
           i99, imax);
    printf("  %-28s busy: n %5zu  p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms   p99 busy/idle "
           "%.2fx (target <= 5x and < 20 ms)\n",
           "", busy->n, b50, b99, bmax, i99 > 0 ? b99 / i99 : 0.0);
}

/* ---- the pld schedule ---- */

static volatile int pld_running = 1;
static samples pld_rounds;
static int pld_failed;

static void *pld_driver(void *arg)
{
    int nrounds = *(const int *)arg, fd = -1;
    char *buf = malloc(RESP_CAP), *body = malloc(8192);
    unsigned seed = 7u;
    if (buf == NULL || body == NULL) {
        pld_failed = 1;
        goto out;
    }
    for (int k = 1; k <= nrounds && !pld_failed; k++) {
        unsigned start = (unsigned)rand_r(&seed) % 1000u, step = 1u + (unsigned)rand_r(&seed) % 7u;
        while (1000u % step == 0 && step > 1)
            step--;
        int n = snprintf(body, 8192,
                         "{\"round_id\": \"pld-%d-%d\", \"policy\": \"admit_eligible\", "
                         "\"participants\": [",
                         k, (int)getpid());
        for (unsigned i = 0; i < 100; i++)
            n += snprintf(body + n, 8192 - (size_t)n, "%s\"pld-%u\"", i ? ", " : "",
                          (start + i * step) % 1000u);
        snprintf(body + n, 8192 - (size_t)n,
                 "], \"event\": {\"class_name\": \"SelfComposedDpEvent\", \"count\": 50, "
                 "\"event\": {\"class_name\": \"PoissonSampledDpEvent\", "
                 "\"sampling_probability\": 0.01, \"event\": {\"class_name\": "
                 "\"GaussianDpEvent\", \"noise_multiplier\": %.17g}}}}",
                 0.8 + 0.01 * k);
        double t0 = now_s();
        int st = request(&fd, "POST", "/v1/rounds", body, buf);
        add(&pld_rounds, now_s() - t0);
        if (st != 200) {
            fprintf(stderr, "bench_isolation: pld round %d answered %d: %.200s\n", k, st, buf);
            pld_failed = 1;
        }
    }
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    free(body);
    __atomic_store_n(&pld_running, 0, __ATOMIC_RELAXED);
    return NULL;
}

static int pld_schedule(int nrounds)
{
    char *buf = malloc(RESP_CAP);
    samples health = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    samples summary = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    pld_rounds.v = calloc(MAX_SAMPLES, sizeof(double));
    if (buf == NULL || health.v == NULL || summary.v == NULL || pld_rounds.v == NULL)
        return 1;
    int fd = -1, fs = -1, bad = 0;
    for (int i = 0; i < 1000 && !bad; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/clients/pld-%d", i);
        int st = request(
            &fd, "PUT", path,
            "{\"budget\": {\"epsilon\": 10, \"delta\": 1e-5}, \"accounting\": \"pld\"}", buf);
        if (st != 200 && st != 201) {
            fprintf(stderr, "bench_isolation: PUT %s answered %d: %.200s\n", path, st, buf);
            bad = 1;
        }
    }
    if (bad)
        return 1;
    pthread_t t;
    double t0 = now_s();
    if (pthread_create(&t, NULL, pld_driver, &nrounds) != 0)
        return 1;
    double next = now_s();
    while (__atomic_load_n(&pld_running, __ATOMIC_RELAXED)) {
        double a = now_s();
        int st = request(&fd, "GET", "/healthz", NULL, buf);
        double b = now_s();
        int st2 = request(&fs, "GET", "/v1/summary", NULL, buf);
        double c = now_s();
        if (st != 200 || st2 != 200) {
            if (bad++ < 3)
                fprintf(stderr, "bench_isolation: probes answered %d, %d\n", st, st2);
        } else {
            add(&health, b - a);
            add(&summary, c - b);
        }
        next += 0.01;
        double wait = next - now_s();
        if (wait > 0)
            sleep_s(wait);
        else
            next = now_s();
    }
    pthread_join(t, NULL);
    double el = now_s() - t0;
    size_t nr = pld_rounds.n;
    for (size_t b0 = 0; b0 < nr; b0 += 100) {
        samples blk = {pld_rounds.v + b0, nr - b0 < 100 ? nr - b0 : 100};
        double p50 = pct(&blk, 0.5) * 1e3, p99 = pct(&blk, 0.99) * 1e3;
        printf("  rounds %4zu..%-4zu  p50 %7.2f ms  p99 %7.2f ms%s\n", b0 + 1, b0 + blk.n, p50, p99,
               b0 + 100 >= nr ? "   (target p99 <= 50 ms at round 1000)" : "");
    }
    printf("  %zu rounds in %.1f s: %.1f rounds/s sustained (target >= 100)\n", nr, el,
           (double)nr / el);
    printf("  GET /healthz meanwhile:    n %5zu  p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms  (target "
           "p99 < 5 ms)\n",
           health.n, pct(&health, 0.5) * 1e3, pct(&health, 0.99) * 1e3, pct(&health, 1.0) * 1e3);
    printf("  GET /v1/summary meanwhile: n %5zu  p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms\n",
           summary.n, pct(&summary, 0.5) * 1e3, pct(&summary, 0.99) * 1e3,
           pct(&summary, 1.0) * 1e3);
    if (fd >= 0)
        close(fd);
    if (fs >= 0)
        close(fs);
    free(buf);
    free(health.v);
    free(summary.v);
    free(pld_rounds.v);
    return bad || pld_failed;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[4], "pld") == 0) {
        addr.sin_family = AF_INET;
        addr.sin_port = htons((uint16_t)atoi(argv[2]));
        int nrounds = atoi(argv[3]);
        if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 || nrounds < 1 || nrounds > 1000) {
            fprintf(stderr, "bench_isolation: bad arguments\n");
            return 1;
        }
        return pld_schedule(nrounds);
    }
    if (argc != 5) {
        fprintf(stderr, "usage: %s HOST PORT SECONDS LOADERS\n", argv[0]);
        return 1;
    }
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)atoi(argv[2]));
    double seconds = atof(argv[3]);
    int nload = atoi(argv[4]);
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 || !(seconds > 0 && seconds <= 600) ||
        nload < 1 || nload > 256) {
        fprintf(stderr, "bench_isolation: bad arguments\n");
        return 1;
    }
    samples r_idle = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    samples h_idle = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    samples r_busy = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    samples h_busy = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    if (!r_idle.v || !h_idle.v || !r_busy.v || !h_busy.v)
        return 1;
    int fail = 0;
    /* warm-up (clients created, pages touched), then idle */
    samples scratch_r = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    samples scratch_h = {calloc(MAX_SAMPLES, sizeof(double)), 0};
    if (probe_phase("warm", 0.5, &scratch_r, &scratch_h) != 0)
        fail = 1;
    free(scratch_r.v);
    free(scratch_h.v);
    if (probe_phase("idle", seconds, &r_idle, &h_idle) != 0)
        fail = 1;
    /* saturate the compute endpoints, give them 1.5 s to fill, then probe */
    loading = 1;
    pthread_t *t = calloc((size_t)nload, sizeof *t);
    int started = 0;
    for (; t && started < nload; started++)
        if (pthread_create(&t[started], NULL, loader, NULL) != 0)
            break;
    sleep_s(1.5);
    if (probe_phase("busy", seconds, &r_busy, &h_busy) != 0)
        fail = 1;
    __atomic_store_n(&loading, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    free(t);
    printf("  loaders (%d, POST /v1/delta PLD 3e-6 x 1000): %lu answered 200, %lu 503 "
           "overloaded, %lu 422, %lu other\n",
           started, got200, got503, got422, gotother);
    report("POST /v1/rounds (100 ids)", &r_idle, &r_busy);
    report("GET /healthz", &h_idle, &h_busy);
    free(r_idle.v);
    free(h_idle.v);
    free(r_busy.v);
    free(h_busy.v);
    return fail;
}
