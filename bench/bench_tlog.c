/*
 * bench_tlog.c - the ledger's log as a Merkle tree (docs/TRANSPARENCY.md): on a tree of 10^6
 * leaves (BENCH_TLOG_LEAVES), the time to append a leaf, the memory a leaf costs, and the
 * time of an inclusion and of a consistency proof (random leaves and sizes; target: under
 * 1 ms); then start-up of a data directory of R records (BENCH_TLOG_RECORDS, 200000) after a
 * snapshot plus a log tail of R/10 records, with the tree and with the tree's start-up work
 * skipped (the same code; BENCH_TLOG_RUNS interleaved runs of each, 11), medians of wall and
 * CPU time and their ratio (target: within 10%), and the parts of the tree's work timed
 * apart. Prints figures; asserts nothing about time.
 */
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/ledger/ledger.h"
#include "../core/ledger/snapshot.h"
#include "../core/ledger/store.h"
#include "../core/ledger/tlog.h"
#include "../core/ledger/wal.h"
#include "benchlib.h"

static unsigned long long env_num(const char *name, unsigned long long dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : dflt;
}

static void tree_figures(uint64_t n)
{
    long rss0 = rss_kib();
    dpb_tlog *t = tlog_new();
    unsigned char payload[120];
    memset(payload, 7, sizeof payload);
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) {
        memcpy(payload, &i, sizeof i);
        if (tlog_push_record(t, i + 1, 3, payload, sizeof payload) != DPB_OK)
            exit(1);
    }
    double push = now_s() - t0;
    tlog_commit(t, n);
    long rss1 = rss_kib();
    printf("tlog: %llu leaves (entries of 129 bytes): %.2f us per leaf appended; memory %.1f "
           "bytes per leaf (resident), %.1f kept (2n - popcount(n) hashes of 32 bytes)\n",
           (unsigned long long)n, push / (double)n * 1e6,
           (double)(rss1 - rss0) * 1024.0 / (double)n, (double)TLOG_NODE_POS(n) * 32.0 / (double)n);
    enum { K = 20000 };
    double *d = malloc(K * sizeof *d);
    tlog_hash path[TLOG_MAX_PROOF];
    size_t len;
    uint64_t x = 0x9e3779b97f4a7c15ull, sum = 0;
    for (int kind = 0; kind < 2; kind++) {
        for (int k = 0; k < K; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t size = k % 2 ? n : 1 + x % n;
            uint64_t a = (x >> 20) % size;
            double s = now_s();
            dpb_status st = kind == 0 ? tlog_inclusion(t, a, size, path, &len, NULL)
                                      : tlog_consistency(t, a + 1, size, path, &len, NULL);
            d[k] = (now_s() - s) * 1e6;
            if (st != DPB_OK)
                exit(1);
            sum += len;
        }
        double mean = 0;
        for (int k = 0; k < K; k++)
            mean += d[k] / K;
        double p50 = bench_pct(d, K, 0.5), p99 = bench_pct(d, K, 0.99), mx = d[K - 1];
        printf("tlog: %s proof on %llu leaves: mean %.2f us, p50 %.2f us, p99 %.2f us, max "
               "%.2f us (%d proofs, random leaves and sizes; target < 1000 us)\n",
               kind == 0 ? "inclusion" : "consistency", (unsigned long long)n, mean, p50, p99, mx,
               K);
    }
    tlog_hash r;
    uint64_t size;
    double s = now_s();
    tlog_head(t, &size, r);
    printf("tlog: a tree head (size and root) of %llu leaves: %.2f us (%llu hashes in proofs)\n",
           (unsigned long long)size, (now_s() - s) * 1e6, (unsigned long long)sum);
    free(d);
    tlog_free(t);
}

static ledger *open_dir(const char *dir)
{
    ledger_options o = {dir, NULL, 0, 0.0, 0.0, 1000000000, 0, 0, NULL, 0, 0, 0};
    ledger *l = NULL;
    dpb_error e = {0};
    if (ledger_open(&o, &l, &e) != DPB_OK) {
        fprintf(stderr, "bench_tlog: %s\n", e.detail);
        exit(1);
    }
    return l;
}

static void put_range(ledger *l, uint64_t from, uint64_t to)
{
    enum { B = 10000 };
    ledger_client *in = calloc(B, sizeof *in);
    for (uint64_t at = from; at < to; at += B) {
        size_t n = to - at < B ? (size_t)(to - at) : B;
        for (size_t i = 0; i < n; i++) {
            snprintf(in[i].id, sizeof in[i].id, "client-%08llu", (unsigned long long)(at + i));
            in[i].epsilon = 8.0;
            in[i].delta = 1e-5;
            in[i].relation = DP_REL_ADD_OR_REMOVE;
        }
        dpb_error e = {0};
        if (ledger_put_clients(l, in, n, &e) != DPB_OK) {
            fprintf(stderr, "bench_tlog: %s\n", e.detail);
            exit(1);
        }
    }
    free(in);
}

typedef struct {
    unsigned char *b; /* records as (seq u64, type u8, len u32, payload), back to back */
    size_t n, cap;
} tail;

static int keep_fn(void *ctx, uint64_t seq, uint8_t type, const void *p, size_t n)
{
    tail *t = ctx;
    if (t->n + 13 + n > t->cap) {
        t->cap = 2 * (t->cap + 13 + n);
        if ((t->b = realloc(t->b, t->cap)) == NULL)
            exit(1);
    }
    memcpy(t->b + t->n, &seq, 8);
    t->b[t->n + 8] = type;
    uint32_t len = (uint32_t)n;
    memcpy(t->b + t->n + 9, &len, 4);
    memcpy(t->b + t->n + 13, p, n);
    t->n += 13 + n;
    return 0;
}

/* ---- start-up without the tree: the same code, the tree's start-up work skipped ---------- */

/* The file store with the tree's start-up work skipped (bench only, never the daemon's): the
 * snapshot read and its CRC checked as before the tree (no SHA-256, tree.snap unread), and
 * tree_open given zeroed nodes instead of tree.nodes' (no file read, no hash), so that the
 * log tail replays on top of them. What is still the tree's in this run: the copy of the
 * nodes into the tree's memory and the tail's leaf hashes (both timed apart below). */
static const char *plain_dir;
static const unsigned char *plain_nodes; /* zeroed, TLOG_NODE_POS(upto) hashes */
static store_ops plain_ops;

static dpb_status plain_load_snapshot(ledger_store *s, uint64_t *seq, void **data, size_t *len,
                                      dpb_error *err)
{
    (void)s;
    return snapshot_read(plain_dir, dpb_fs_posix(), seq, data, len, err);
}

static dpb_status plain_tree_open(ledger_store *s, dpb_tlog *t, uint64_t upto, dpb_error *err)
{
    (void)s;
    (void)err;
    return upto > 0 ? tlog_append_nodes(t, plain_nodes, upto) : DPB_OK;
}

static ledger *open_plain(const char *dir)
{
    ledger_options o = {dir, NULL, 0, 0.0, 0.0, 1000000000, 0, 0, NULL, 0, 0, 0};
    ledger_store *s = NULL;
    ledger *l = NULL;
    dpb_error e = {0};
    if (store_file_open(dir, NULL, &s, &e) != DPB_OK) {
        fprintf(stderr, "bench_tlog: %s\n", e.detail);
        exit(1);
    }
    plain_ops = *s->ops;
    plain_ops.load_snapshot = plain_load_snapshot;
    plain_ops.tree_open = plain_tree_open;
    s->ops = &plain_ops;
    plain_dir = dir;
    if (ledger_open_store(&o, s, &l, &e) != DPB_OK) {
        fprintf(stderr, "bench_tlog: %s\n", e.detail);
        exit(1);
    }
    return l;
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void startup_figures(uint64_t r, int runs)
{
    char dir[] = "/tmp/dpb-bench-tlog.XXXXXX";
    if (mkdtemp(dir) == NULL)
        exit(1);
    ledger *l = open_dir(dir);
    put_range(l, 0, r);
    ledger_close(l); /* a snapshot of r records; the log archived */
    l = open_dir(dir);
    put_range(l, r, r + r / 10);
    ledger_close_nosnapshot(l); /* a tail of r/10 records replayed at start-up */
    unsigned char *zeros = calloc((size_t)TLOG_NODE_POS(r) + 1, TLOG_HASH_BYTES);
    if (zeros == NULL)
        exit(1);
    plain_nodes = zeros;
    /* interleaved: with the tree, then without, then without, then with, ... */
    double *w[2], *c[2]; /* [0] with the tree, [1] without; wall and CPU (every thread) */
    for (int k = 0; k < 2; k++) {
        w[k] = calloc((size_t)runs, sizeof(double));
        c[k] = calloc((size_t)runs, sizeof(double));
        if (w[k] == NULL || c[k] == NULL)
            exit(1);
    }
    l = open_dir(dir); /* once, to warm the page cache */
    ledger_close_nosnapshot(l);
    for (int i = 0; i < runs; i++)
        for (int j = 0; j < 2; j++) {
            int k = (i + j) % 2;
            double s = now_s(), sc = cpu_s();
            l = k == 0 ? open_dir(dir) : open_plain(dir);
            w[k][i] = now_s() - s;
            c[k][i] = cpu_s() - sc;
            ledger_close_nosnapshot(l);
        }
    /* the tree's part still in the run without it: the nodes copied in, the tail's leaves */
    tail tl = {NULL, 0, 0};
    uint64_t last;
    char path[256];
    snprintf(path, sizeof path, "%s/wal.log", dir);
    if (wal_read_file(dpb_fs_posix(), path, 0, UINT64_MAX, keep_fn, &tl, &last, NULL) != DPB_OK)
        exit(1);
    /* the snapshot's payload, for its SHA-256 (what start-up with the tree adds to reading it) */
    snprintf(path, sizeof path, "%s/snapshot", dir);
    FILE *sf = fopen(path, "rb");
    size_t sn = 0;
    unsigned char *snap = NULL;
    if (sf != NULL && fseek(sf, 0, SEEK_END) == 0) {
        sn = (size_t)ftell(sf);
        rewind(sf);
        snap = malloc(sn ? sn : 1);
        if (snap == NULL || fread(snap, 1, sn, sf) != sn)
            exit(1);
    }
    if (sf != NULL)
        fclose(sf);
    double pz[5], pt[5], ps[5];
    for (int i = 0; i < 5; i++) {
        double s0 = cpu_s();
        struct sha256_ctx sc;
        tlog_hash dg;
        sha256_init(&sc);
        sha256_update(&sc, sn > 32 ? sn - 32 : 0, snap + 32);
        sha256_digest(&sc, sizeof dg, dg);
        ps[i] = cpu_s() - s0;
        double s = cpu_s();
        dpb_tlog *t = tlog_new();
        if (t == NULL || tlog_append_nodes(t, zeros, r) != DPB_OK)
            exit(1);
        tlog_free(t);
        pz[i] = cpu_s() - s;
        s = cpu_s();
        for (size_t at = 0; at < tl.n;) { /* the replayed records' leaves */
            uint64_t seq;
            uint32_t len;
            memcpy(&seq, tl.b + at, 8);
            memcpy(&len, tl.b + at + 9, 4);
            tlog_hash h;
            tlog_leaf_hash(tl.b[at + 8], seq, tl.b + at + 13, len, h);
            at += 13 + len;
        }
        pt[i] = cpu_s() - s;
    }
    free(tl.b);
    free(zeros);
    free(snap);
    double in = bench_pct(pz, 5, 0.5) + bench_pct(pt, 5, 0.5);
    double wt = bench_pct(w[0], (size_t)runs, 0.5), wn = bench_pct(w[1], (size_t)runs, 0.5);
    double ct = bench_pct(c[0], (size_t)runs, 0.5), cn = bench_pct(c[1], (size_t)runs, 0.5);
    struct stat sb;
    snprintf(path, sizeof path, "%s/snapshot", dir);
    double snap_mb = stat(path, &sb) == 0 ? (double)sb.st_size / 1e6 : 0.0;
    /* bench_pct sorted them: [0] is the minimum, the run least disturbed by other jobs */
    printf("tlog: start-up of %llu records (a snapshot of %llu, %.1f MB, and a log tail of %llu "
           "replayed), %d interleaved runs of each, median (minimum): with the tree %.1f (%.1f) ms "
           "wall, %.1f (%.1f) ms CPU; without it %.1f (%.1f) ms wall, %.1f (%.1f) ms CPU\n",
           (unsigned long long)(r + r / 10), (unsigned long long)r, snap_mb,
           (unsigned long long)(r / 10), runs, wt * 1e3, w[0][0] * 1e3, ct * 1e3, c[0][0] * 1e3,
           wn * 1e3, w[1][0] * 1e3, cn * 1e3, c[1][0] * 1e3);
    printf("tlog: start-up ratio with the tree / without, medians (minima): wall %.3f (%.3f), CPU "
           "%.3f (%.3f) (target <= 1.10); the run without it still does %.1f ms (CPU) of the "
           "tree's work (the nodes copied in %.1f ms, the tail's leaves %.1f ms): without them, "
           "CPU %.3f (%.3f)\n",
           wt / wn, w[0][0] / w[1][0], ct / cn, c[0][0] / c[1][0], in * 1e3,
           bench_pct(pz, 5, 0.5) * 1e3, bench_pct(pt, 5, 0.5) * 1e3, ct / (cn - in),
           c[0][0] / (c[1][0] - in));
    printf("tlog: of the tree's start-up work, the snapshot's SHA-256 (%.1f MB, checked against "
           "tree.snap before it is parsed) takes %.1f ms of CPU (median of 5), computed as the "
           "snapshot "
           "is read and checksummed\n",
           (double)sn / 1e6, bench_pct(ps, 5, 0.5) * 1e3);
    for (int k = 0; k < 2; k++) {
        free(w[k]);
        free(c[k]);
    }
    rm_dir(dir);
}

int main(void)
{
    tree_figures(env_num("BENCH_TLOG_LEAVES", 1000000));
    startup_figures(env_num("BENCH_TLOG_RECORDS", 200000), (int)env_num("BENCH_TLOG_RUNS", 11));
    return 0;
}
