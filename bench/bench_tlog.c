/*
 * bench_tlog.c - the ledger's log as a Merkle tree (docs/TRANSPARENCY.md): on a tree of 10^6
 * leaves (BENCH_TLOG_LEAVES), the time to append a leaf, the memory a leaf costs, and the
 * time of an inclusion and of a consistency proof (random leaves and sizes; target: under
 * 1 ms); then start-up of a data directory of R records (BENCH_TLOG_RECORDS, 200000) after a
 * snapshot plus a log tail of R/10 records, and the part of it the tree takes (reading
 * tree.nodes and loading it, hashing the replayed records; target: within 10% of start-up
 * without it). Prints figures; asserts nothing about time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/ledger/ledger.h"
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

static void startup_figures(uint64_t r)
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
    double open[5];
    for (int i = 0; i < 5; i++) {
        double s = now_s();
        l = open_dir(dir);
        open[i] = now_s() - s;
        ledger_close_nosnapshot(l);
    }
    double med = bench_pct(open, 5, 0.5);
    /* the tree's part: tree.nodes read and loaded, the replayed records hashed */
    char path[256];
    snprintf(path, sizeof path, "%s/tree.nodes", dir);
    /* the snapshot's bytes (start-up reads them anyway: only their digest is the tree's) */
    snprintf(path, sizeof path, "%s/snapshot", dir);
    FILE *sf = fopen(path, "rb");
    size_t sb = 0;
    unsigned char *snap = NULL;
    if (sf != NULL && fseek(sf, 0, SEEK_END) == 0) {
        sb = (size_t)ftell(sf);
        rewind(sf);
        snap = malloc(sb ? sb : 1);
        if (snap == NULL || fread(snap, 1, sb, sf) != sb)
            exit(1);
    }
    if (sf)
        fclose(sf);
    /* the log tail's records (start-up reads them anyway: only their leaves are the tree's) */
    tail tl = {NULL, 0, 0};
    uint64_t last;
    snprintf(path, sizeof path, "%s/wal.log", dir);
    if (wal_read_file(dpb_fs_posix(), path, 0, UINT64_MAX, keep_fn, &tl, &last, NULL) != DPB_OK)
        exit(1);
    snprintf(path, sizeof path, "%s/tree.nodes", dir);
    double part[5], pn[5], pt[5], ps[5];
    for (int i = 0; i < 5; i++) {
        double s = now_s();
        FILE *f = fopen(path, "rb");
        uint64_t n = r + r / 10;
        size_t bytes = (size_t)TLOG_NODE_POS(n) * 32;
        unsigned char *b = malloc(bytes);
        if (f == NULL || b == NULL || fread(b, 1, bytes, f) != bytes)
            exit(1);
        fclose(f);
        dpb_tlog *t = tlog_new();
        if (tlog_load(t, b, n) != DPB_OK)
            exit(1);
        free(b);
        tlog_free(t);
        pn[i] = now_s() - s;
        for (size_t at = 0; at < tl.n;) { /* the replayed records' leaves */
            uint64_t seq;
            uint32_t len;
            memcpy(&seq, tl.b + at, 8);
            memcpy(&len, tl.b + at + 9, 4);
            tlog_hash h;
            tlog_leaf_hash(tl.b[at + 8], seq, tl.b + at + 13, len, h);
            at += 13 + len;
        }
        pt[i] = now_s() - s - pn[i];
        tlog_hash dg; /* the snapshot's digest, checked against tree.snap */
        tlog_leaf_hash(0, 0, snap, sb, dg);
        snprintf(path, sizeof path, "%s/tree.nodes", dir);
        ps[i] = now_s() - s - pn[i] - pt[i];
        part[i] = pn[i] + pt[i]; /* the digest runs beside the snapshot's parsing: not added */
    }
    free(tl.b);
    printf("tlog: the tree's part at start-up: tree.nodes read and loaded %.1f ms, the log tail's "
           "leaves %.1f ms; the snapshot's digest (%.1f MB) %.1f ms in a thread of its own beside "
           "the snapshot's parsing (medians)\n",
           bench_pct(pn, 5, 0.5) * 1e3, bench_pct(pt, 5, 0.5) * 1e3, (double)sb / 1e6,
           bench_pct(ps, 5, 0.5) * 1e3);
    free(snap);
    double tree = bench_pct(part, 5, 0.5);
    printf("tlog: start-up of %llu records (a snapshot of %llu, a log tail of %llu replayed): "
           "%.1f ms median of 5, of which the tree %.1f ms (reading tree.nodes, %.1f MB, "
           "and the tail's leaves): start-up with the tree %.1f%% above "
           "without it (target <= 10%%)\n",
           (unsigned long long)(r + r / 10), (unsigned long long)r, (unsigned long long)(r / 10),
           med * 1e3, tree * 1e3, (double)TLOG_NODE_POS(r + r / 10) * 32.0 / 1e6,
           100.0 * tree / (med - tree));
    rm_dir(dir);
}

int main(void)
{
    tree_figures(env_num("BENCH_TLOG_LEAVES", 1000000));
    startup_figures(env_num("BENCH_TLOG_RECORDS", 200000));
    return 0;
}
