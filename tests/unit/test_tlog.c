/* test_tlog.c - the ledger's log as a Merkle tree (core/ledger/tlog.h) against RFC 9162
 * section 2.1 written here from the RFC (MTH by its recursive definition, the verification
 * algorithms of 2.1.3.2 and 2.1.4.2), never the daemon's code: every tree size up to 300 with
 * every inclusion and consistency proof verified, spot checks at 10^6 leaves; then the file
 * store: the tree kept across restarts and snapshots (archive, tree.nodes), rebuilt when
 * tree.nodes is lost or torn, and a record, segment or snapshot changed on disk (its CRC
 * recomputed) refused at start-up or when read, naming the record. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/ledger/crc32c.h"
#include "../../core/ledger/ledger.h"
#include "../../core/ledger/tlog.h"
#include "../tlog_ref.h"
#include "suites.h"

/* A tree of n test leaves through the code under test; lh[0..n) its leaf hashes (ref). */
static dpb_tlog *build(uint64_t n, h32 *lh)
{
    dpb_tlog *t = tlog_new();
    for (uint64_t i = 0; i < n; i++) {
        char p[32];
        int k = snprintf(p, sizeof p, "leaf %llu", (unsigned long long)i);
        CHECK(tlog_push_record(t, i + 1, 2, p, (size_t)k) == DPB_OK);
        if (lh)
            ref_leaf(i, lh[i]);
    }
    tlog_commit(t, n);
    return t;
}

/* ---- the tree ----------------------------------------------------------------------------- */

static void tlog_every_size_to_300(void)
{
    enum { N = 300 };
    h32 *lh = malloc(N * sizeof *lh);
    h32 *root = malloc((N + 1) * sizeof *root);
    dpb_tlog *t = build(N, lh);
    for (uint64_t n = 0; n <= N; n++)
        ref_mth(lh, 0, n, root[n]);
    unsigned long bad_root = 0, bad_inc = 0, bad_con = 0, proofs = 0;
    tlog_hash got, path[TLOG_MAX_PROOF];
    for (uint64_t n = 0; n <= N; n++) {
        CHECK(tlog_root_at(t, n, got) == DPB_OK);
        bad_root += memcmp(got, root[n], 32) != 0;
        for (uint64_t m = 0; m < n; m++) {
            size_t k;
            CHECK(tlog_inclusion(t, m, n, path, &k, NULL) == DPB_OK);
            bad_inc += !ref_verify_inclusion(m, n, lh[m], (const h32 *)path, k, root[n]);
            /* and it proves nothing for another leaf */
            if (n > 1)
                bad_inc +=
                    ref_verify_inclusion((m + 1) % n, n, lh[m], (const h32 *)path, k, root[n]) &&
                    memcmp(lh[m], lh[(m + 1) % n], 32) != 0;
            proofs++;
        }
        for (uint64_t m = 1; m <= n; m++) {
            size_t k;
            CHECK(tlog_consistency(t, m, n, path, &k, NULL) == DPB_OK);
            bad_con += !ref_verify_consistency(m, n, root[m], root[n], (const h32 *)path, k);
            if (m < n) /* a forked first tree is not consistent */
                bad_con += ref_verify_consistency(m, n, lh[0], root[n], (const h32 *)path, k) &&
                           memcmp(lh[0], root[m], 32) != 0;
            proofs++;
        }
    }
    CHECKF(bad_root == 0 && bad_inc == 0 && bad_con == 0,
           "%lu roots, %lu inclusion and %lu consistency proofs wrong of %lu", bad_root, bad_inc,
           bad_con, proofs);
    tlog_free(t);
    free(lh);
    free(root);
}

/* Refused bounds name their field; the empty tree's root is SHA-256(""). */
static void tlog_bounds(void)
{
    dpb_tlog *t = build(10, NULL);
    tlog_hash p[TLOG_MAX_PROOF], r;
    size_t k;
    dpb_error e = {0};
#define E0 (e = (dpb_error){0}, &e)
    CHECK(tlog_inclusion(t, 10, 10, p, &k, E0) == DPB_EINVAL && strcmp(e.field, "leaf_index") == 0);
    CHECK(tlog_inclusion(t, 0, 11, p, &k, E0) == DPB_EINVAL && strcmp(e.field, "tree_size") == 0);
    CHECK(tlog_consistency(t, 0, 5, p, &k, E0) == DPB_EINVAL && strcmp(e.field, "first") == 0);
    CHECK(tlog_consistency(t, 6, 5, p, &k, E0) == DPB_EINVAL && strcmp(e.field, "first") == 0);
    CHECK(tlog_consistency(t, 5, 11, p, &k, E0) == DPB_EINVAL && strcmp(e.field, "second") == 0);
    CHECK(tlog_consistency(t, 5, 5, p, &k, E0) == DPB_OK && k == 0);
    dpb_tlog *z = tlog_new();
    uint64_t n;
    tlog_head(z, &n, r);
    /* e3b0c442...: SHA-256 of nothing */
    CHECK(n == 0 && r[0] == 0xe3 && r[1] == 0xb0 && r[31] == 0x55);
    tlog_free(z);
    /* tentative leaves are not shown until committed, and a cut drops them */
    char one[] = "x";
    CHECK(tlog_push_record(t, 11, 2, one, 1) == DPB_OK);
    CHECK(tlog_push_record(t, 13, 2, one, 1) == DPB_EINVAL); /* not the next seq */
    tlog_head(t, &n, r);
    CHECK(n == 10 && tlog_leaves(t) == 11);
    tlog_cut(t, 5); /* never below the committed size */
    CHECK(tlog_leaves(t) == 10);
    CHECK(tlog_push_record(t, 11, 2, one, 1) == DPB_OK);
    tlog_commit(t, 100);
    tlog_head(t, &n, r);
    CHECK(n == 11);
    tlog_free(t);
}

/* 10^6 leaves (across many node chunks): spot checks against the definition, and the kept
 * nodes copied out and loaded back give the same tree. */
static void tlog_million(void)
{
    enum { N = 1000000 };
    h32 *lh = malloc((size_t)N * sizeof *lh);
    dpb_tlog *t = build(N, lh);
    const uint64_t sizes[] = {N, 999999, 524288, 524289, 65537};
    h32 root[5];
    for (size_t i = 0; i < 5; i++)
        ref_mth(lh, 0, sizes[i], root[i]);
    tlog_hash path[TLOG_MAX_PROOF];
    unsigned long bad = 0, runs = 0;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < 5; i++) {
        for (int j = 0; j < 40; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t m = j == 0 ? sizes[i] - 1 : j == 1 ? 0 : x % sizes[i];
            size_t k;
            CHECK(tlog_inclusion(t, m, sizes[i], path, &k, NULL) == DPB_OK);
            bad += !ref_verify_inclusion(m, sizes[i], lh[m], (const h32 *)path, k, root[i]);
            runs++;
        }
        for (size_t j = 0; j < 5; j++) {
            if (sizes[j] > sizes[i])
                continue;
            size_t k;
            CHECK(tlog_consistency(t, sizes[j], sizes[i], path, &k, NULL) == DPB_OK);
            bad +=
                !ref_verify_consistency(sizes[j], sizes[i], root[j], root[i], (const h32 *)path, k);
            runs++;
        }
    }
    CHECKF(bad == 0, "%lu of %lu proofs at 10^6 leaves wrong", bad, runs);
    unsigned char *nodes = malloc((size_t)TLOG_NODE_POS(N) * 32);
    CHECK(tlog_nodes(t, 0, N, nodes) == DPB_OK);
    dpb_tlog *u = tlog_new();
    CHECK(tlog_load(u, nodes, N) == DPB_OK);
    tlog_hash r;
    uint64_t n;
    tlog_head(u, &n, r);
    CHECK(n == N && memcmp(r, root[0], 32) == 0);
    tlog_free(u);
    free(nodes);
    tlog_free(t);
    free(lh);
}

/* ---- the file store ------------------------------------------------------------------------ */

static ledger *open_at(const char *dir, uint64_t snap_every, dpb_error *err)
{
    ledger_options o = {dir, NULL, 1, 10.0, 1e-5, snap_every, 0, 0, NULL, 0, 0, 0};
    ledger *l = NULL;
    memset(err, 0, sizeof *err);
    return ledger_open(&o, &l, err) == DPB_OK ? l : NULL;
}

static int put_n(ledger *l, int from, int to)
{
    for (int i = from; i < to; i++) {
        ledger_client in, out;
        memset(&in, 0, sizeof in);
        snprintf(in.id, sizeof in.id, "c%05d", i);
        in.epsilon = 10.0;
        in.delta = 1e-5;
        in.relation = DP_REL_ADD_OR_REMOVE;
        int created;
        dpb_error err = {0};
        if (ledger_put_client(l, &in, &created, &out, &err) != DPB_OK)
            return -1;
    }
    return 0;
}

typedef struct {
    h32 *lh; /* leaf hashes of the entries, by the definition */
    uint64_t n;
} ent_acc;

static int ent_fn(void *ctx, uint64_t leaf, const unsigned char head[9], const void *p, size_t n)
{
    ent_acc *a = ctx;
    if (leaf != a->n)
        return 1;
    ref_leaf_of_entry(head, p, n, a->lh[a->n++]);
    return 0;
}

/* Every entry of l read back, hashed by the definition: its root must be the head's. */
static int entries_match_head(ledger *l, uint64_t *size_out)
{
    uint64_t size;
    tlog_hash root;
    ledger_log_head(l, &size, root);
    *size_out = size;
    ent_acc a = {malloc((size + 1) * sizeof(h32)), 0};
    dpb_error err = {0};
    dpb_status st = size ? ledger_log_entries(l, 0, size, ent_fn, &a, &err) : DPB_OK;
    CHECKF(st == DPB_OK && a.n == size, "entries: %s (%llu of %llu)", err.detail,
           (unsigned long long)a.n, (unsigned long long)size);
    h32 r;
    ref_mth(a.lh, 0, a.n, r);
    int ok = st == DPB_OK && memcmp(r, root, 32) == 0;
    free(a.lh);
    return ok;
}

static int count_segments(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/archive", dir);
    DIR *d = opendir(p);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".seg") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Records survive snapshots in the archive; the tree is the same after restarts, with
 * tree.nodes removed (rebuilt from the archive) or torn (cut back, the rest rebuilt). */
static void tlog_file_store_keeps_every_record(void)
{
    char dir[256];
    CHECK(tl_make_dir(dir, sizeof dir, "dpb_tlog_") == 0);
    dpb_error err;
    ledger *l = open_at(dir, 1000000, &err);
    CHECKF(l != NULL, "%s", err.detail);
    if (l == NULL)
        return;
    CHECK(put_n(l, 0, 40) == 0);
    ledger_close(l); /* a snapshot: the log is cut, its records archived */
    l = open_at(dir, 1000000, &err);
    CHECKF(l != NULL, "%s", err.detail);
    CHECK(put_n(l, 40, 70) == 0);
    uint64_t size0, size;
    tlog_hash r0, r;
    ledger_log_head(l, &size0, r0);
    CHECK(size0 == 70);
    CHECK(entries_match_head(l, &size));
    ledger_close(l);
    CHECK(count_segments(dir) == 2);
    char p[512];
    const char *how[] = {"reopened", "tree.nodes removed", "tree.nodes torn"};
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/tree.nodes", dir);
        if (k == 1)
            CHECK(unlink(p) == 0);
        if (k == 2)
            CHECK(truncate(p, 32 * 57 + 5) == 0);
        l = open_at(dir, 1000000, &err);
        CHECKF(l != NULL, "%s: %s", how[k], err.detail);
        if (l == NULL)
            continue;
        ledger_log_head(l, &size, r);
        CHECKF(size == size0 && memcmp(r, r0, 32) == 0, "%s: another tree (size %llu)", how[k],
               (unsigned long long)size);
        CHECK(entries_match_head(l, &size));
        ledger_close_nosnapshot(l);
    }
    CHECK(tl_remove_dir(dir));
}

/* The records of a log file: offsets of each record. */
static size_t record_offsets(const unsigned char *b, size_t n, size_t *off, size_t max)
{
    size_t k = 0;
    for (size_t at = 0; at + 17 <= n && k < max;) {
        uint32_t len = (uint32_t)b[at] | (uint32_t)b[at + 1] << 8 | (uint32_t)b[at + 2] << 16 |
                       (uint32_t)b[at + 3] << 24;
        off[k++] = at;
        at += 17 + len;
    }
    return k;
}

/* Flip a payload byte of the k-th record of path and recompute its CRC (a tamperer's edit). */
static int tamper_record(const char *path, size_t k)
{
    FILE *f = fopen(path, "r+b");
    if (f == NULL)
        return -1;
    static unsigned char b[1 << 20];
    size_t n = fread(b, 1, sizeof b, f);
    size_t off[4096];
    size_t m = record_offsets(b, n, off, 4096);
    if (k >= m) {
        fclose(f);
        return -1;
    }
    size_t at = off[k];
    uint32_t len = (uint32_t)b[at] | (uint32_t)b[at + 1] << 8 | (uint32_t)b[at + 2] << 16 |
                   (uint32_t)b[at + 3] << 24;
    b[at + 17 + len - 1] ^= 0x01; /* the payload's last byte (a client's epsilon, say) */
    uint32_t crc = dpb_crc32c(dpb_crc32c(0, b + at + 8, 9), b + at + 17, len);
    for (int i = 0; i < 4; i++)
        b[at + 4 + i] = (unsigned char)(crc >> (8 * i));
    int ok = fseek(f, 0, SEEK_SET) == 0 && fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A directory with 30 records archived (a snapshot at 30) and 20 in the log after it. */
static int tamper_dir(char *dir, size_t n)
{
    if (tl_make_dir(dir, n, "dpb_tlogt_") != 0)
        return -1;
    dpb_error err;
    ledger *l = open_at(dir, 1000000, &err);
    if (l == NULL)
        return -1;
    int rc = put_n(l, 0, 30);
    ledger_close(l);
    l = open_at(dir, 1000000, &err);
    if (l == NULL)
        return -1;
    rc |= put_n(l, 30, 50);
    ledger_close_nosnapshot(l);
    return rc;
}

/* A record changed in wal.log (CRC recomputed) is refused at start-up, named by seq and kind;
 * one changed in an archive segment is refused when read; a snapshot changed (its CRC
 * recomputed) is refused at start-up. */
static void tlog_tamper_detected(void)
{
    char dir[256], p[512];
    dpb_error err;
    /* the log after the snapshot: the 5th record there is seq 35 */
    CHECK(tamper_dir(dir, sizeof dir) == 0);
    snprintf(p, sizeof p, "%s/wal.log", dir);
    CHECK(tamper_record(p, 4) == 0);
    ledger *l = open_at(dir, 1000000, &err);
    CHECKF(l == NULL && err.status == DPB_ECORRUPT && strstr(err.detail, "seq 35 (CLIENT") != NULL,
           "a changed log record: %s", l ? "started" : err.detail);
    if (l)
        ledger_close_nosnapshot(l);
    CHECK(tl_remove_dir(dir));

    /* the archive: start-up does not read it; reading the entries refuses the record */
    CHECK(tamper_dir(dir, sizeof dir) == 0);
    snprintf(p, sizeof p, "%s/archive/%020d.seg", dir, 1);
    CHECK(tamper_record(p, 9) == 0);
    l = open_at(dir, 1000000, &err);
    CHECKF(l != NULL, "%s", err.detail);
    if (l != NULL) {
        ent_acc a = {malloc(64 * sizeof(h32)), 0};
        dpb_status st = ledger_log_entries(l, 0, 50, ent_fn, &a, &err);
        CHECKF(st == DPB_ECORRUPT && strstr(err.detail, "seq 10 (CLIENT") != NULL && a.n == 9,
               "a changed archived record: %s (%llu read)", err.detail, (unsigned long long)a.n);
        free(a.lh);
        ledger_close_nosnapshot(l);
    }
    CHECK(tl_remove_dir(dir));

    /* the snapshot's payload, its CRC recomputed (snapshot.h: crc over bytes 0..27, then the
     * payload, at offset 28) */
    CHECK(tamper_dir(dir, sizeof dir) == 0);
    snprintf(p, sizeof p, "%s/snapshot", dir);
    FILE *f = fopen(p, "r+b");
    static unsigned char b[1 << 20];
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    CHECK(n > 40);
    /* client c00005's epsilon (its id, then the f64): a change that still parses */
    unsigned char *at = NULL;
    for (size_t i = 32; at == NULL && i + 14 < n; i++)
        if (memcmp(b + i, "c00005", 6) == 0)
            at = b + i;
    CHECK(at != NULL);
    if (at != NULL)
        at[6] ^= 0x01; /* the lowest byte of its epsilon's mantissa */
    uint32_t crc = dpb_crc32c(dpb_crc32c(0, b, 28), b + 32, n - 32);
    for (int i = 0; i < 4; i++)
        b[28 + i] = (unsigned char)(crc >> (8 * i));
    CHECK(f && fseek(f, 0, SEEK_SET) == 0 && fwrite(b, 1, n, f) == n);
    if (f)
        fclose(f);
    l = open_at(dir, 1000000, &err);
    CHECKF(l == NULL && err.status == DPB_ECORRUPT && strstr(err.detail, "/snapshot") &&
               strstr(err.detail, "SHA-256"),
           "a changed snapshot: %s", l ? "started" : err.detail);
    if (l)
        ledger_close_nosnapshot(l);
    CHECK(tl_remove_dir(dir));

    /* records cut from the end of the log (the tree holds more): refused */
    CHECK(tamper_dir(dir, sizeof dir) == 0);
    snprintf(p, sizeof p, "%s/wal.log", dir);
    f = fopen(p, "rb");
    n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f)
        fclose(f);
    size_t off[64];
    size_t m = record_offsets(b, n, off, 64);
    CHECK(m == 20 && truncate(p, (off_t)off[15]) == 0);
    l = open_at(dir, 1000000, &err);
    CHECKF(l == NULL && err.status == DPB_ECORRUPT && strstr(err.detail, "seq 46") != NULL,
           "records cut from the log: %s", l ? "started" : err.detail);
    if (l)
        ledger_close_nosnapshot(l);
    CHECK(tl_remove_dir(dir));
}

const tl_test TLOG_TESTS[] = {
    {"tlog_every_size_to_300", tlog_every_size_to_300},
    {"tlog_bounds", tlog_bounds},
    {"tlog_million", tlog_million},
    {"tlog_file_store_keeps_every_record", tlog_file_store_keeps_every_record},
    {"tlog_tamper_detected", tlog_tamper_detected},
};
const size_t TLOG_NTESTS = sizeof TLOG_TESTS / sizeof TLOG_TESTS[0];
