/*
 * ledger_tlog.c - the ledger's log as a Merkle tree, read (ledger.h "The log's tree"): tree
 * heads, inclusion and consistency proofs over the durable records, and the entries read
 * back from the store, each checked against its leaf before it is shown.
 *
 * May call: tlog.c, the store (store.h), ledger_txn.h (a shared store's catch-up). Takes no
 * ledger lock otherwise: the tree has its own mutex and the store reads durable records only.
 */
#include "ledger_int.h"
#include "ledger_txn.h"

/* Every record the store made durable is part of the tree shown. */
static void settle(ledger *l)
{
    tlog_commit(l->tree, store_durable_seq(l->st));
}

dpb_status ledger_log_catch_up(ledger *l, dpb_error *err)
{
    if (!l->shared)
        return DPB_OK;
    return lg_read_begin(l, err);
}

void ledger_log_head(ledger *l, uint64_t *size, unsigned char root[TLOG_HASH_BYTES])
{
    settle(l);
    tlog_head(l->tree, size, root);
}

dpb_status ledger_log_inclusion(ledger *l, uint64_t leaf, uint64_t size, tlog_hash *path, size_t *n,
                                dpb_error *err)
{
    settle(l);
    return tlog_inclusion(l->tree, leaf, size, path, n, err);
}

dpb_status ledger_log_consistency(ledger *l, uint64_t first, uint64_t second, tlog_hash *proof,
                                  size_t *n, dpb_error *err)
{
    settle(l);
    return tlog_consistency(l->tree, first, second, proof, n, err);
}

typedef struct {
    ledger *l;
    ledger_entry_fn fn;
    void *ctx;
    uint64_t bad_seq; /* a record whose hash is not its leaf's */
    uint8_t bad_type;
} entries_ctx;

static int entry_fn(void *ctx, uint64_t seq, uint8_t type, const void *payload, size_t len)
{
    entries_ctx *c = ctx;
    tlog_hash kept, h;
    tlog_leaf_hash(type, seq, payload, len, h);
    if (tlog_leaf(c->l->tree, tlog_leaf_index(seq), kept) != DPB_OK ||
        memcmp(h, kept, sizeof h) != 0) {
        c->bad_seq = seq;
        c->bad_type = type;
        return 1;
    }
    unsigned char head[TLOG_ENTRY_HEAD];
    tlog_entry_head(type, seq, head);
    return c->fn(c->ctx, tlog_leaf_index(seq), head, payload, len);
}

/* The entries [start, end) of records the store lost before this version (type 0). */
static int lost_entries(ledger *l, uint64_t start, uint64_t end, ledger_entry_fn fn, void *ctx,
                        uint64_t *next)
{
    tlog_hash kept, h;
    for (*next = start; *next < end; (*next)++) {
        tlog_leaf_hash(TLOG_TYPE_LOST, *next + 1, NULL, 0, h);
        if (tlog_leaf(l->tree, *next, kept) != DPB_OK || memcmp(h, kept, sizeof h) != 0)
            return 0;
        unsigned char head[TLOG_ENTRY_HEAD];
        tlog_entry_head(TLOG_TYPE_LOST, *next + 1, head);
        if (fn(ctx, *next, head, "", 0) != 0)
            return 1;
    }
    return 0;
}

dpb_status ledger_log_entries(ledger *l, uint64_t start, uint64_t end, ledger_entry_fn fn,
                              void *ctx, dpb_error *err)
{
    settle(l);
    uint64_t size;
    tlog_hash root;
    tlog_head(l->tree, &size, root);
    if (end > size)
        return dpb_fail(err, DPB_EINVAL, "end", "end %llu is beyond the log's current size %llu",
                        (unsigned long long)end, (unsigned long long)size);
    if (start >= end)
        return dpb_fail(err, DPB_EINVAL, "start", "start %llu is not below end %llu",
                        (unsigned long long)start, (unsigned long long)end);
    uint64_t next;
    if (lost_entries(l, start, end, fn, ctx, &next) != 0)
        return DPB_OK;
    if (next >= end)
        return DPB_OK;
    entries_ctx c = {l, fn, ctx, 0, 0};
    dpb_error e = {0};
    dpb_status st = store_read_records(l->st, next + 1, end, entry_fn, &c, &e);
    if (c.bad_seq != 0)
        return dpb_fail(err, DPB_ECORRUPT, NULL,
                        "the log's record seq %llu (%s, leaf %llu) is not the record the ledger "
                        "logged: its hash differs from its leaf in the log's tree (changed in "
                        "the store after it was written)",
                        (unsigned long long)c.bad_seq, tlog_kind_name(c.bad_type),
                        (unsigned long long)tlog_leaf_index(c.bad_seq));
    if (st == DPB_ECANCELLED) /* the caller stopped */
        return DPB_OK;
    if (st != DPB_OK)
        return dpb_fail(err, st == DPB_ENOTFOUND ? DPB_ECORRUPT : st, NULL, "%s", e.detail);
    return DPB_OK;
}

static int count_fn(void *ctx, uint64_t leaf, const unsigned char head[9], const void *payload,
                    size_t len)
{
    (void)leaf;
    (void)head;
    (void)payload;
    (void)len;
    (*(uint64_t *)ctx)++;
    return 0;
}

dpb_status ledger_log_verify(ledger *l, uint64_t *checked, dpb_error *err)
{
    *checked = 0;
    uint64_t size;
    tlog_hash root;
    ledger_log_head(l, &size, root);
    dpb_status st = size ? ledger_log_entries(l, 0, size, count_fn, checked, err) : DPB_OK;
    if (st != DPB_OK)
        return st;
    uint64_t leaf;
    if (tlog_check_nodes(l->tree, &leaf) != DPB_OK)
        return dpb_fail(err, DPB_ECORRUPT, NULL,
                        "the log's tree is damaged: a node of the subtree ending at leaf %llu "
                        "(record seq %llu) is not the hash of its children (the kept nodes were "
                        "changed)",
                        (unsigned long long)leaf, (unsigned long long)(leaf + 1));
    return DPB_OK;
}
