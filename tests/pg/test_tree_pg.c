/*
 * test_tree_pg.c - the log's Merkle tree on the PostgreSQL store (pg_harness.h): two replicas
 * of one database show the same tree; a snapshot keeps the tree's nodes in dpbudget_tree and a
 * ledger opened afterwards shows the same root, which its entries, hashed here by RFC 9162's
 * definition (not the daemon's code), give again; a row changed with UPDATE is refused at
 * start-up (a record start-up replays) or when read (one the snapshot covers), named by seq
 * and kind. Part of pg_tests (test_store_pg.c runs it).
 */
#include "../testlib.h"

#include "../../core/ledger/ledger.h"
#include "../tlog_ref.h"
#include "pg_harness.h"

void test_tree_on_pg(void);
void test_tree_same_on_file_and_pg(void);
void test_tree_tamper_on_pg(void);

/* A ledger on PostgreSQL (url) or in a data directory (dir, url NULL). */
static ledger *on_store(const char *url, const char *dir, dpb_error *e)
{
    ledger_options o;
    memset(&o, 0, sizeof o);
    o.ledger_url = url;
    o.dir = dir;
    o.default_budget = 1;
    o.default_epsilon = 10.0;
    o.default_delta = 1e-5;
    ledger *l = NULL;
    memset(e, 0, sizeof *e);
    return ledger_open(&o, &l, e) == DPB_OK ? l : NULL;
}

static ledger *on_pg(const char *url, dpb_error *e)
{
    return on_store(url, NULL, e);
}

static int put_range(ledger *l, int from, int to)
{
    size_t n = (size_t)(to - from);
    ledger_client *in = calloc(n, sizeof *in);
    for (size_t i = 0; i < n; i++) {
        snprintf(in[i].id, sizeof in[i].id, "p%05d", from + (int)i);
        in[i].epsilon = 10.0;
        in[i].delta = 1e-5;
        in[i].relation = DP_REL_ADD_OR_REMOVE;
    }
    dpb_error e = {0};
    dpb_status st = ledger_put_clients(l, in, n, &e);
    free(in);
    return st == DPB_OK ? 0 : -1;
}

typedef struct {
    h32 *lh;
    size_t n;
} acc;

static int leaf_of(void *ctx, uint64_t leaf, const unsigned char head[9], const void *p, size_t n)
{
    acc *a = ctx;
    if (leaf != a->n)
        return 1;
    ref_leaf_of_entry(head, p, n, a->lh[a->n++]);
    return 0;
}

/* The root of l's entries hashed here equals its head's. */
static int entries_give_head(ledger *l)
{
    uint64_t size;
    h32 root, r;
    ledger_log_head(l, &size, root);
    acc a = {calloc(size + 1, sizeof(h32)), 0};
    dpb_error e = {0};
    for (uint64_t at = 0; at < size; at += 1000) {
        uint64_t end = at + 1000 < size ? at + 1000 : size;
        CHECKF(ledger_log_entries(l, at, end, leaf_of, &a, &e) == DPB_OK, "%s", e.detail);
    }
    int ok = a.n == size && size > 0;
    if (ok) {
        ref_mth(a.lh, 0, a.n, r);
        ok = memcmp(r, root, 32) == 0;
    }
    free(a.lh);
    return ok;
}

void test_tree_on_pg(void)
{
    if (!pgh_up())
        return;
    char url[512], out[64];
    CHECK(pgh_fresh_db("t_tree", url, sizeof url) == 0);
    dpb_error e;
    ledger *a = on_pg(url, &e), *b = on_pg(url, &e);
    CHECKF(a != NULL && b != NULL, "%s", e.detail);
    if (a == NULL || b == NULL)
        return;
    CHECK(put_range(a, 0, 3000) == 0);
    CHECK(put_range(b, 3000, 5000) == 0); /* b catches up with a's first */
    CHECK(ledger_log_catch_up(a, &e) == DPB_OK && ledger_log_catch_up(b, &e) == DPB_OK);
    uint64_t na, nb;
    h32 ra, rb;
    ledger_log_head(a, &na, ra);
    ledger_log_head(b, &nb, rb);
    CHECKF(na == nb && na >= 5000 && memcmp(ra, rb, 32) == 0, "replicas: %llu vs %llu leaves",
           (unsigned long long)na, (unsigned long long)nb);
    CHECK(entries_give_head(b));
    ledger_close_nosnapshot(b);
    ledger_close(a); /* a snapshot: the first 4096 leaves' nodes kept in dpbudget_tree */
    CHECK(pgh_sql(url, "SELECT count(*) FROM dpbudget_tree", out, sizeof out) == 0 &&
          strcmp(out, "1") == 0);
    ledger *c = on_pg(url, &e);
    CHECKF(c != NULL, "%s", e.detail);
    if (c == NULL)
        return;
    uint64_t nc;
    h32 rc;
    ledger_log_head(c, &nc, rc);
    CHECK(nc == na && memcmp(rc, ra, 32) == 0);
    CHECK(entries_give_head(c));
    ledger_close_nosnapshot(c);
}

/* The same changes on the file store and on PostgreSQL: the same tree (a function of the log). */
void test_tree_same_on_file_and_pg(void)
{
    if (!pgh_up())
        return;
    char url[512], dir[] = "/tmp/dpb-tree-pg-XXXXXX";
    CHECK(pgh_fresh_db("t_same", url, sizeof url) == 0);
    CHECK(mkdtemp(dir) != NULL);
    dpb_error e;
    ledger *p = on_pg(url, &e);
    ledger *f = on_store(NULL, dir, &e);
    CHECKF(p != NULL && f != NULL, "%s", e.detail);
    if (p == NULL || f == NULL)
        return;
    for (int i = 0; i < 60; i += 7) {
        CHECK(put_range(p, i, i + 7) == 0);
        CHECK(put_range(f, i, i + 7) == 0);
    }
    uint64_t np, nf;
    h32 rp, rf;
    ledger_log_head(p, &np, rp);
    ledger_log_head(f, &nf, rf);
    /* each head is RFC 9162's root of that store's own entries; with payloads that hold
     * nothing of the moment they were made (as here, client records), the same root */
    CHECK(np == nf && np > 0 && entries_give_head(p) && entries_give_head(f));
    acc a = {calloc(np + 1, sizeof(h32)), 0}, b = {calloc(nf + 1, sizeof(h32)), 0};
    CHECK(ledger_log_entries(p, 0, np, leaf_of, &a, &e) == DPB_OK &&
          ledger_log_entries(f, 0, nf, leaf_of, &b, &e) == DPB_OK);
    int same_entries = a.n == b.n && memcmp(a.lh, b.lh, a.n * sizeof(h32)) == 0;
    CHECKF(!same_entries || memcmp(rp, rf, 32) == 0,
           "file and PostgreSQL: the same %llu entries, another root", (unsigned long long)np);
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "file and PostgreSQL: %llu leaves, entries %s, roots %s\n",
                (unsigned long long)np, same_entries ? "identical" : "differ",
                memcmp(rp, rf, 32) ? "differ" : "equal");
    free(a.lh);
    free(b.lh);
    ledger_close_nosnapshot(p);
    ledger_close_nosnapshot(f);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    CHECK(system(rm) == 0);
}

void test_tree_tamper_on_pg(void)
{
    if (!pgh_up())
        return;
    char url[512];
    CHECK(pgh_fresh_db("t_tamper", url, sizeof url) == 0);
    dpb_error e;
    ledger *l = on_pg(url, &e);
    CHECKF(l != NULL, "%s", e.detail);
    if (l == NULL)
        return;
    CHECK(put_range(l, 0, 4100) == 0); /* seqs 1..4100, then 4101..4120 */
    for (int i = 4100; i < 4120; i++)
        CHECK(put_range(l, i, i + 1) == 0);
    ledger_close_nosnapshot(l);
#define FLIP(seq)                                                                                  \
    "UPDATE dpbudget_log SET payload = set_byte(payload, length(payload) - 1, "                    \
    "get_byte(payload, length(payload) - 1) # 1) WHERE seq = " #seq
    /* a record start-up replays */
    CHECK(pgh_sql(url, FLIP(4110), NULL, 0) == 0);
    l = on_pg(url, &e);
    CHECKF(l == NULL && e.status == DPB_ECORRUPT && strstr(e.detail, "seq 4110 (CLIENT") != NULL,
           "a changed row: %s", l ? "started" : e.detail);
    if (l)
        ledger_close_nosnapshot(l);
    CHECK(pgh_sql(url, FLIP(4110), NULL, 0) == 0); /* back as it was */
    l = on_pg(url, &e);
    CHECKF(l != NULL, "%s", e.detail);
    if (l == NULL)
        return;
    ledger_close(l); /* a snapshot: start-up no longer reads the first 4096 rows */
    CHECK(pgh_sql(url, FLIP(7), NULL, 0) == 0);
    l = on_pg(url, &e);
    CHECKF(l != NULL, "%s", e.detail);
    if (l == NULL)
        return;
    acc a = {calloc(32, sizeof(h32)), 0};
    dpb_error_clear(&e);
    dpb_status st = ledger_log_entries(l, 0, 20, leaf_of, &a, &e);
    CHECKF(st == DPB_ECORRUPT && strstr(e.detail, "seq 7 (CLIENT") != NULL && a.n == 6,
           "reading a changed row: %s", e.detail);
    free(a.lh);
    ledger_close_nosnapshot(l);
}
