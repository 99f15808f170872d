/*
 * bench_vocab.c - start-up time of a ledger whose event vocabulary was grown by its rounds
 * (docs/LEDGER.md, "The event vocabulary"): R rounds (1000; BENCH_VOCAB_ROUNDS), each
 * carrying a new event as large as the ledger takes (LEDGER_EVENT_NODES_MAX objects nearly,
 * LEDGER_EVENT_BYTES_MAX bytes stored nearly), then the same with a one-Gaussian event (the
 * usual shape, for the ratio). Each is opened twice: as after a crash (every round in the
 * log, replayed: the clients charged need their events' profiles), then after a clean close
 * (the snapshot holds the vocabulary and the spends: nothing to compute). Prints the figures
 * and the profiles (RDP curves) recovery computed; asserts nothing about time. The log's
 * EVENT records and the snapshot carry each event's profile (LEDGER_FORMAT 5), so neither
 * start-up computes the large events' profiles.
 *
 * Target: start-up under 2 s after 1000 rounds of the largest event, after a crash and on a
 * restart (the k8s start-up probe).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/ledger/ledger.h"
#include "benchlib.h"

/* A new node of kind k, a Gaussian of noise s when k is DP_EV_GAUSSIAN (exit when out of
 * memory: a benchmark). */
static dp_event *node(dp_event_kind k, double s)
{
    dp_event *e = dp_event_new(k);
    if (e == NULL)
        exit(1);
    if (k == DP_EV_GAUSSIAN)
        e->u.noise.noise_multiplier = s;
    return e;
}

/* The largest event the ledger takes, new for every seed, of the kind whose profile costs
 * most: a composition of Poisson-sampled Gaussians (each an RDP sum over the orders) up to
 * the objects' limit, trimmed to the bytes' limit (not reached: about 17 bytes a pair). */
static dp_event *largest(int seed)
{
    dp_event *c = node(DP_EV_COMPOSED, 0.0);
    size_t n = (LEDGER_EVENT_NODES_MAX - 1) / 2;
    if ((c->u.composed.events = calloc(n, sizeof(dp_event *))) == NULL)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        dp_event *p = node(DP_EV_POISSON_SAMPLED, 0.0);
        p->u.sampled.sampling_probability = 0.01 + (double)i * 1e-6;
        p->u.sampled.event = node(DP_EV_GAUSSIAN, 20.0 + seed * 1e-3 + (double)i * 1e-4);
        c->u.composed.events[c->u.composed.n++] = p;
    }
    while (ledger_event_check(c, NULL) != LEDGER_EVENT_FITS && c->u.composed.n > 1)
        dp_event_free(c->u.composed.events[--c->u.composed.n]);
    return c;
}

static dp_event *small(int seed)
{
    return node(DP_EV_GAUSSIAN, 200.0 + seed * 1e-3);
}

static ledger *open_dir(const char *dir, int *ok)
{
    ledger_options o = {dir, NULL, 0, 0.0, 0.0, 1000000000, 0, 0, NULL, 0, 0, 0};
    ledger *l = NULL;
    dpb_error err = {0};
    *ok = ledger_open(&o, &l, &err) == DPB_OK;
    if (!*ok)
        fprintf(stderr, "bench_vocab: %s\n", err.detail);
    return l;
}

#define NCLIENTS 10

/* R rounds of a new event each (make(seed)) over NCLIENTS clients, then the ledger closed
 * as if killed: everything in the log, no snapshot. 0, or -1. */
static int build(const char *dir, size_t R, dp_event *(*make)(int), size_t *bytes)
{
    rm_dir(dir);
    int ok;
    ledger *l = open_dir(dir, &ok);
    if (!ok)
        return -1;
    const char *ids[NCLIENTS];
    static char names[NCLIENTS][16];
    for (int i = 0; i < NCLIENTS; i++) {
        ledger_client in, out;
        memset(&in, 0, sizeof in);
        snprintf(names[i], sizeof names[i], "c%d", i);
        snprintf(in.id, sizeof in.id, "%s", names[i]);
        in.epsilon = 1e9;
        in.delta = 1e-5;
        int created;
        if (ledger_put_client(l, &in, &created, &out, NULL) != DPB_OK)
            return -1;
        ids[i] = names[i];
    }
    for (size_t r = 0; r < R; r++) {
        dp_event *ev = make((int)r);
        if (r == 0) {
            unsigned char *b = NULL;
            size_t cap = 0;
            *bytes = 0;
            dp_event_encode(ev, &b, bytes, &cap);
            free(b);
        }
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "v-%zu", r);
        ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
        rq.event = ev;
        rq.participants = ids;
        rq.n = NCLIENTS;
        ledger_round_res res;
        dpb_error err = {0};
        dpb_status st = ledger_round(l, &rq, &res, &err);
        dp_event_free(ev);
        if (st != DPB_OK) {
            fprintf(stderr, "bench_vocab: round %zu: %s\n", r, err.detail);
            return -1;
        }
        ledger_round_res_free(&res);
    }
    ledger_close_nosnapshot(l);
    return 0;
}

/* Open the ledger in dir: the seconds it took and the profiles it computed; then closed
 * (clean: with a snapshot, which holds the vocabulary). */
static double start_up(const char *dir, uint64_t *profiles, int clean)
{
    int ok;
    double t0 = now_s();
    ledger *l = open_dir(dir, &ok);
    double t = now_s() - t0;
    if (!ok)
        return -1.0;
    *profiles = ledger_open_profiles(l);
    if (clean)
        ledger_close(l);
    else
        ledger_close_nosnapshot(l);
    return t;
}

int main(int argc, char **argv)
{
    const char *build_dir = argc > 1 ? argv[1] : "build";
    size_t R =
        getenv("BENCH_VOCAB_ROUNDS") ? strtoul(getenv("BENCH_VOCAB_ROUNDS"), NULL, 10) : 1000;
    char dir[256];
    snprintf(dir, sizeof dir, "%s/bench-vocab-data", build_dir);
    dp_event *big = largest(0);
    printf("bench_vocab: %zu rounds of %d clients, each round a new event; the largest taken "
           "holds %zu objects (limit %d)\n",
           R, NCLIENTS, dp_event_nodes(big), LEDGER_EVENT_NODES_MAX);
    dp_event_free(big);
    static const struct {
        const char *what;
        dp_event *(*make)(int);
    } shapes[] = {{"largest event", largest}, {"one-Gaussian event (baseline)", small}};
    double restart[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        size_t bytes = 0;
        double t0 = now_s();
        if (build(dir, R, shapes[s].make, &bytes) != 0)
            return 1;
        printf("%zu rounds of a %s (%zu bytes stored each) in %.1f s\n", R, shapes[s].what, bytes,
               now_s() - t0);
        for (int clean = 0; clean <= 1; clean++) {
            uint64_t prof = 0;
            /* the first open replays the log (as after a crash) and closes with a snapshot;
             * the second reads that snapshot (a restart) */
            double t = start_up(dir, &prof, !clean);
            if (t < 0)
                return 1;
            if (clean)
                restart[s] = t;
            printf("  start-up %s: %.3f s, %llu event profiles computed%s\n",
                   clean ? "on restart (the snapshot holds the vocabulary)"
                         : "after a crash (every round in the log, replayed)",
                   t, (unsigned long long)prof,
                   s == 0 ? (t < 2.0 ? "  target < 2 s [ok]" : "  target < 2 s [MISSED]") : "");
            fflush(stdout);
        }
    }
    printf("restart, largest events against one-Gaussian events: %.1fx\n",
           restart[1] > 0 ? restart[0] / restart[1] : 0.0);
    rm_dir(dir);
    return 0;
}
