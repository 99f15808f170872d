/*
 * tlog.c - the ledger's log as a Merkle tree (tlog.h): leaf and node hashes per RFC 9162
 * section 2.1, every complete aligned subtree kept in post-order in chunks (no large copy as
 * the tree grows), tree heads and the inclusion (2.1.3.1) and consistency (2.1.4.1) proofs
 * computed from kept subtrees.
 *
 * May call: nettle's SHA-256, common/status. Called by the stores and the ledger.
 */
#include "tlog.h"

#include <nettle/sha2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Nodes per chunk (2^16 nodes: 2 MiB). */
#define CHUNK_BITS 16u
#define CHUNK_NODES ((uint64_t)1 << CHUNK_BITS)

struct dpb_tlog {
    pthread_mutex_t mu;
    unsigned char **chunk; /* chunk[c]: CHUNK_NODES hashes */
    size_t nchunks, chunk_cap;
    uint64_t n;    /* leaves pushed */
    uint64_t size; /* leaves committed */
};

const char *tlog_kind_name(uint8_t type)
{
    /* the ledger's record types (ledger_record.h REC_*), named for messages */
    static const char *const names[] = {"LOST",    "EVENT",  "CLIENT",  "ROUND",
                                        "RESERVE", "COMMIT", "RELEASE", "NAME"};
    return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

void tlog_entry_head(uint8_t type, uint64_t seq, unsigned char head[TLOG_ENTRY_HEAD])
{
    head[0] = type;
    for (int i = 0; i < 8; i++)
        head[1 + i] = (unsigned char)(seq >> (8 * i));
}

void tlog_leaf_hash(uint8_t type, uint64_t seq, const void *payload, size_t len, tlog_hash out)
{
    struct sha256_ctx c;
    unsigned char head[1 + TLOG_ENTRY_HEAD];
    head[0] = 0x00;
    tlog_entry_head(type, seq, head + 1);
    sha256_init(&c);
    sha256_update(&c, sizeof head, head);
    if (len > 0)
        sha256_update(&c, len, payload);
    sha256_digest(&c, TLOG_HASH_BYTES, out);
}

static void node_hash(const unsigned char *l, const unsigned char *r, unsigned char *out)
{
    struct sha256_ctx c;
    static const unsigned char one = 0x01;
    sha256_init(&c);
    sha256_update(&c, 1, &one);
    sha256_update(&c, TLOG_HASH_BYTES, l);
    sha256_update(&c, TLOG_HASH_BYTES, r);
    sha256_digest(&c, TLOG_HASH_BYTES, out);
}

dpb_tlog *tlog_new(void)
{
    dpb_tlog *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

void tlog_free(dpb_tlog *t)
{
    if (t == NULL)
        return;
    for (size_t c = 0; c < t->nchunks; c++)
        free(t->chunk[c]);
    free(t->chunk);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* The kept node at post-order position pos (< TLOG_NODE_POS(n)). */
static unsigned char *node_at(const dpb_tlog *t, uint64_t pos)
{
    return t->chunk[pos >> CHUNK_BITS] + (pos & (CHUNK_NODES - 1)) * TLOG_HASH_BYTES;
}

/* Room for nodes up to position pos (exclusive). 0, or -1 out of memory. */
static int reserve_nodes(dpb_tlog *t, uint64_t pos)
{
    size_t need = (size_t)((pos + CHUNK_NODES - 1) >> CHUNK_BITS);
    if (need > t->chunk_cap) {
        size_t cap = t->chunk_cap ? t->chunk_cap : 16;
        while (cap < need)
            cap *= 2;
        unsigned char **nc = realloc(t->chunk, cap * sizeof *nc);
        if (nc == NULL)
            return -1;
        t->chunk = nc;
        t->chunk_cap = cap;
    }
    while (t->nchunks < need) {
        unsigned char *c = malloc(CHUNK_NODES * TLOG_HASH_BYTES);
        if (c == NULL)
            return -1;
        t->chunk[t->nchunks++] = c;
    }
    return 0;
}

/* The kept node of level h, index j (complete: (j + 1) 2^h <= n). */
static const unsigned char *subtree(const dpb_tlog *t, unsigned h, uint64_t j)
{
    return node_at(t, TLOG_NODE_POS(((j + 1) << h) - 1) + h);
}

static dpb_status push_locked(dpb_tlog *t, const tlog_hash leaf)
{
    uint64_t i = t->n;
    uint64_t pos = TLOG_NODE_POS(i);
    unsigned ups = (unsigned)__builtin_ctzll(~i); /* subtrees leaf i completes */
    if (reserve_nodes(t, pos + 1 + ups) != 0)
        return DPB_ENOMEM;
    memcpy(node_at(t, pos), leaf, TLOG_HASH_BYTES);
    for (unsigned h = 1; h <= ups; h++) {
        /* the node of level h ending at leaf i: its left child is the level h-1 node just
         * before the right one, which sits at pos + h - 1 */
        uint64_t j = i >> h;
        const unsigned char *l = subtree(t, h - 1, 2 * j);
        node_hash(l, node_at(t, pos + h - 1), node_at(t, pos + h));
    }
    t->n = i + 1;
    return DPB_OK;
}

dpb_status tlog_push(dpb_tlog *t, const tlog_hash leaf)
{
    pthread_mutex_lock(&t->mu);
    dpb_status st = push_locked(t, leaf);
    pthread_mutex_unlock(&t->mu);
    return st;
}

dpb_status tlog_push_record(dpb_tlog *t, uint64_t seq, uint8_t type, const void *payload,
                            size_t len)
{
    tlog_hash h;
    tlog_leaf_hash(type, seq, payload, len, h);
    pthread_mutex_lock(&t->mu);
    dpb_status st = seq == t->n + 1 ? push_locked(t, h) : DPB_EINVAL;
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* Append the nodes of leaves [t->n, to) (committed). Mutex held. */
static dpb_status append_locked(dpb_tlog *t, const unsigned char *nodes, uint64_t to)
{
    uint64_t from = TLOG_NODE_POS(t->n), total = TLOG_NODE_POS(to);
    if (t->size != t->n)
        return DPB_EINVAL;
    if (reserve_nodes(t, total) != 0)
        return DPB_ENOMEM;
    for (uint64_t p = from; p < total;) {
        uint64_t in_chunk = CHUNK_NODES - (p & (CHUNK_NODES - 1));
        uint64_t k = total - p < in_chunk ? total - p : in_chunk;
        memcpy(node_at(t, p), nodes + (p - from) * TLOG_HASH_BYTES, (size_t)k * TLOG_HASH_BYTES);
        p += k;
    }
    t->n = to;
    t->size = to;
    return DPB_OK;
}

dpb_status tlog_load(dpb_tlog *t, const unsigned char *nodes, uint64_t n)
{
    pthread_mutex_lock(&t->mu);
    dpb_status st = t->n != 0 ? DPB_EINVAL : append_locked(t, nodes, n);
    pthread_mutex_unlock(&t->mu);
    return st;
}

dpb_status tlog_append_nodes(dpb_tlog *t, const unsigned char *nodes, uint64_t leaves)
{
    pthread_mutex_lock(&t->mu);
    dpb_status st = append_locked(t, nodes, t->n + leaves);
    pthread_mutex_unlock(&t->mu);
    return st;
}

void tlog_cut(dpb_tlog *t, uint64_t n)
{
    pthread_mutex_lock(&t->mu);
    if (n < t->size)
        n = t->size;
    if (n < t->n)
        t->n = n;
    pthread_mutex_unlock(&t->mu);
}

void tlog_commit(dpb_tlog *t, uint64_t n)
{
    pthread_mutex_lock(&t->mu);
    if (n > t->n)
        n = t->n;
    if (n > t->size)
        t->size = n;
    pthread_mutex_unlock(&t->mu);
}

uint64_t tlog_leaves(dpb_tlog *t)
{
    pthread_mutex_lock(&t->mu);
    uint64_t n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* Largest power of two below n (n >= 2). */
static uint64_t split_of(uint64_t n)
{
    uint64_t k = (uint64_t)1 << (63 - __builtin_clzll(n - 1));
    return k;
}

/* MTH(D[a:b)) for a range the RFC's recursion visits (a is a multiple of the largest power of
 * two not above b - a, b <= n, a < b). */
static void range_hash(const dpb_tlog *t, uint64_t a, uint64_t b, unsigned char *out)
{
    uint64_t w = b - a;
    if ((w & (w - 1)) == 0) {
        unsigned h = (unsigned)__builtin_ctzll(w);
        memcpy(out, subtree(t, h, a >> h), TLOG_HASH_BYTES);
        return;
    }
    uint64_t k = split_of(w);
    tlog_hash l, r;
    range_hash(t, a, a + k, l);
    range_hash(t, a + k, b, r);
    node_hash(l, r, out);
}

static void root_locked(const dpb_tlog *t, uint64_t size, tlog_hash root)
{
    if (size == 0) {
        struct sha256_ctx c;
        sha256_init(&c);
        sha256_digest(&c, TLOG_HASH_BYTES, root);
        return;
    }
    range_hash(t, 0, size, root);
}

void tlog_head(dpb_tlog *t, uint64_t *size, tlog_hash root)
{
    pthread_mutex_lock(&t->mu);
    *size = t->size;
    root_locked(t, t->size, root);
    pthread_mutex_unlock(&t->mu);
}

dpb_status tlog_root_at(dpb_tlog *t, uint64_t size, tlog_hash root)
{
    pthread_mutex_lock(&t->mu);
    dpb_status st = size <= t->size ? DPB_OK : DPB_EINVAL;
    if (st == DPB_OK)
        root_locked(t, size, root);
    pthread_mutex_unlock(&t->mu);
    return st;
}

dpb_status tlog_leaf(dpb_tlog *t, uint64_t i, tlog_hash out)
{
    pthread_mutex_lock(&t->mu);
    dpb_status st = i < t->n ? DPB_OK : DPB_EINVAL;
    if (st == DPB_OK)
        memcpy(out, node_at(t, TLOG_NODE_POS(i)), TLOG_HASH_BYTES);
    pthread_mutex_unlock(&t->mu);
    return st;
}

dpb_status tlog_nodes(dpb_tlog *t, uint64_t from, uint64_t to, unsigned char *out)
{
    pthread_mutex_lock(&t->mu);
    dpb_status st = from <= to && to <= t->n ? DPB_OK : DPB_EINVAL;
    if (st == DPB_OK) {
        uint64_t end = TLOG_NODE_POS(to);
        for (uint64_t p = TLOG_NODE_POS(from); p < end;) {
            uint64_t in_chunk = CHUNK_NODES - (p & (CHUNK_NODES - 1));
            uint64_t k = end - p < in_chunk ? end - p : in_chunk;
            memcpy(out, node_at(t, p), (size_t)k * TLOG_HASH_BYTES);
            out += k * TLOG_HASH_BYTES;
            p += k;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

dpb_status tlog_check_nodes(dpb_tlog *t, uint64_t *leaf)
{
    dpb_status st = DPB_OK;
    pthread_mutex_lock(&t->mu);
    for (uint64_t i = 0; i < t->n && st == DPB_OK; i++) {
        uint64_t pos = TLOG_NODE_POS(i);
        unsigned ups = (unsigned)__builtin_ctzll(~i);
        for (unsigned h = 1; h <= ups; h++) {
            tlog_hash x;
            node_hash(subtree(t, h - 1, 2 * (i >> h)), node_at(t, pos + h - 1), x);
            if (memcmp(x, node_at(t, pos + h), TLOG_HASH_BYTES) != 0) {
                *leaf = i;
                st = DPB_ECORRUPT;
                break;
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* PATH(m, D[a:b)) appended to path[*n..] (RFC 9162 2.1.3.1, bottom-up order). */
static void path_of(const dpb_tlog *t, uint64_t m, uint64_t a, uint64_t b, tlog_hash *path,
                    size_t *n)
{
    if (b - a <= 1)
        return;
    uint64_t k = split_of(b - a);
    if (m < k) {
        path_of(t, m, a, a + k, path, n);
        range_hash(t, a + k, b, path[(*n)++]);
    } else {
        path_of(t, m - k, a + k, b, path, n);
        range_hash(t, a, a + k, path[(*n)++]);
    }
}

dpb_status tlog_inclusion(dpb_tlog *t, uint64_t leaf, uint64_t size, tlog_hash *path, size_t *n,
                          dpb_error *err)
{
    *n = 0;
    pthread_mutex_lock(&t->mu);
    uint64_t have = t->size;
    dpb_status st = DPB_OK;
    if (size > have)
        st = dpb_fail(err, DPB_EINVAL, "tree_size",
                      "tree_size %llu is beyond the log's current size %llu",
                      (unsigned long long)size, (unsigned long long)have);
    else if (leaf >= size)
        st = dpb_fail(err, DPB_EINVAL, "leaf_index",
                      "leaf_index %llu is not below tree_size %llu: a tree of that size does "
                      "not hold it",
                      (unsigned long long)leaf, (unsigned long long)size);
    else
        path_of(t, leaf, 0, size, path, n);
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* SUBPROOF(m, D[a:b), whole) appended to proof[*n..] (RFC 9162 2.1.4.1). */
static void subproof(const dpb_tlog *t, uint64_t m, uint64_t a, uint64_t b, int whole,
                     tlog_hash *proof, size_t *n)
{
    uint64_t w = b - a;
    if (m == w) {
        if (!whole)
            range_hash(t, a, b, proof[(*n)++]);
        return;
    }
    uint64_t k = split_of(w);
    if (m <= k) {
        subproof(t, m, a, a + k, whole, proof, n);
        range_hash(t, a + k, b, proof[(*n)++]);
    } else {
        subproof(t, m - k, a + k, b, 0, proof, n);
        range_hash(t, a, a + k, proof[(*n)++]);
    }
}

dpb_status tlog_consistency(dpb_tlog *t, uint64_t first, uint64_t second, tlog_hash *proof,
                            size_t *n, dpb_error *err)
{
    *n = 0;
    pthread_mutex_lock(&t->mu);
    uint64_t have = t->size;
    dpb_status st = DPB_OK;
    if (second > have)
        st =
            dpb_fail(err, DPB_EINVAL, "second", "second %llu is beyond the log's current size %llu",
                     (unsigned long long)second, (unsigned long long)have);
    else if (first == 0)
        st = dpb_fail(err, DPB_EINVAL, "first",
                      "first must be at least 1 (every tree is consistent with the empty one)");
    else if (first > second)
        st = dpb_fail(err, DPB_EINVAL, "first", "first %llu is larger than second %llu",
                      (unsigned long long)first, (unsigned long long)second);
    else if (first < second)
        subproof(t, first, 0, second, 1, proof, n);
    pthread_mutex_unlock(&t->mu);
    return st;
}
