/*
 * tlog.h - the ledger's log as a Merkle tree (RFC 9162 section 2.1): the transparency log's
 * hashes, kept in memory, its tree heads and its proofs (docs/TRANSPARENCY.md).
 *
 * Leaves: one per record of the log, in sequence order. Seqs start at 1 with no gap
 * (store.h), so the record seq is leaf tlog_leaf_index(seq) = seq - 1, and leaf i is the
 * record seq i + 1. The entry of a record (the bytes a leaf hashes) is
 *     type u8 | seq u64 little-endian | payload (the record's bytes as the store keeps them)
 * (9 + len bytes); leaf hash = SHA-256(0x00 | entry); node = SHA-256(0x01 | left | right);
 * the root of the empty tree is SHA-256 of nothing. A record lost before this version kept
 * its log (a data directory whose snapshot cut it away) has the entry 0x00 | seq u64 LE
 * (type 0: "lost"), so that leaf indices still follow seqs.
 *
 * What is kept: every complete, aligned subtree's hash (2 n - popcount(n) hashes of 32 bytes
 * for n leaves: 64 bytes per record), in post-order, which is also the layout stores persist
 * (the nodes a leaf completes follow it: TLOG_NODE_POS). Any tree head or proof for any size
 * up to n is then O(log^2 n) hashes, never a recomputation of the tree.
 *
 * Leaves are pushed as records are appended (tentative), and become part of the tree when
 * the store has made them durable (tlog_commit): heads and proofs show only committed
 * leaves, so a leaf index a change was answered with is in every later head. A failed sync
 * cuts the tentative ones off (tlog_cut).
 *
 * Thread-safe: one mutex of its own (never held while calling out); read heads and proofs
 * from any thread. May call: nettle (SHA-256), common/. Used by the stores and the ledger.
 */
#ifndef DPB_LEDGER_TLOG_H
#define DPB_LEDGER_TLOG_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"

#define TLOG_HASH_BYTES 32u
/* Longest audit path or consistency proof: 2 per level of a tree of up to 2^63 leaves. */
#define TLOG_MAX_PROOF 128u
/* The entry's bytes before the payload: type u8 and seq u64 LE. */
#define TLOG_ENTRY_HEAD 9u
/* Type of a lost record's entry (above). */
#define TLOG_TYPE_LOST 0u

typedef struct dpb_tlog dpb_tlog;

typedef unsigned char tlog_hash[TLOG_HASH_BYTES];

/* The leaf index of the record seq (seq >= 1). */
static inline uint64_t tlog_leaf_index(uint64_t seq)
{
    return seq - 1;
}

/* Post-order position of leaf i among the kept nodes: 2 i - popcount(i). The node of level h
 * covering leaves [j 2^h, (j + 1) 2^h) sits at TLOG_NODE_POS((j + 1) 2^h - 1) + h. n leaves
 * keep TLOG_NODE_POS(n) nodes. */
#define TLOG_NODE_POS(i) (2u * (uint64_t)(i) - (uint64_t)__builtin_popcountll((uint64_t)(i)))

/* An empty tree (NULL: out of memory). */
dpb_tlog *tlog_new(void);
void tlog_free(dpb_tlog *t);

/* The leaf hash of a record: SHA-256(0x00 | type | seq LE | payload[0..len)). */
void tlog_leaf_hash(uint8_t type, uint64_t seq, const void *payload, size_t len, tlog_hash out);
/* The entry's first TLOG_ENTRY_HEAD bytes (type, seq LE) into head. */
void tlog_entry_head(uint8_t type, uint64_t seq, unsigned char head[TLOG_ENTRY_HEAD]);
/* The name of a record type in the ledger's log ("ROUND", ...; "LOST" for 0; "unknown"). */
const char *tlog_kind_name(uint8_t type);

/* Push the next leaf (tentative). DPB_OK, DPB_ENOMEM. */
dpb_status tlog_push(dpb_tlog *t, const tlog_hash leaf);
/* Push the record's leaf: its seq must be the next leaf's (else DPB_EINVAL). */
dpb_status tlog_push_record(dpb_tlog *t, uint64_t seq, uint8_t type, const void *payload,
                            size_t len);
/* Load n leaves' kept nodes (TLOG_NODE_POS(n) hashes, post-order, as tlog_nodes copied them)
 * into an empty tree, committed. DPB_OK, DPB_EINVAL (the tree is not empty), DPB_ENOMEM. */
dpb_status tlog_load(dpb_tlog *t, const unsigned char *nodes, uint64_t n);
/* Append the kept nodes of the next `leaves` leaves (TLOG_NODE_POS(n + leaves) -
 * TLOG_NODE_POS(n) hashes, post-order, n the leaves held), committed: a store's persisted
 * nodes loaded piece by piece. DPB_OK, DPB_EINVAL (leaves not all committed), DPB_ENOMEM. */
dpb_status tlog_append_nodes(dpb_tlog *t, const unsigned char *nodes, uint64_t leaves);
/* Drop the leaves from index n on (uncommitted ones only: n is at least the committed size). */
void tlog_cut(dpb_tlog *t, uint64_t n);
/* Leaves [0, n) are durable: the tree's size becomes min(n, leaves pushed) if larger. */
void tlog_commit(dpb_tlog *t, uint64_t n);

/* Leaves pushed (committed or not). */
uint64_t tlog_leaves(dpb_tlog *t);
/* The committed size and its root hash, read together. */
void tlog_head(dpb_tlog *t, uint64_t *size, tlog_hash root);
/* Root of the tree of the first size leaves (size <= committed). DPB_OK, DPB_EINVAL. */
dpb_status tlog_root_at(dpb_tlog *t, uint64_t size, tlog_hash root);
/* Leaf i's hash (i < leaves pushed). DPB_OK, DPB_EINVAL. */
dpb_status tlog_leaf(dpb_tlog *t, uint64_t i, tlog_hash out);
/* Copy the kept nodes of leaves [from, to) (post-order positions TLOG_NODE_POS(from) to
 * TLOG_NODE_POS(to)) into out (room for TLOG_NODE_POS(to) - TLOG_NODE_POS(from) hashes):
 * what a store persists. DPB_OK, DPB_EINVAL (to beyond the leaves pushed). */
dpb_status tlog_nodes(dpb_tlog *t, uint64_t from, uint64_t to, unsigned char *out);

/* Recompute every kept interior node from its children and compare: DPB_OK, or DPB_ECORRUPT
 * with *leaf the leaf whose completed subtree differs (the nodes were changed or damaged). */
dpb_status tlog_check_nodes(dpb_tlog *t, uint64_t *leaf);

/* RFC 9162 2.1.3.1: the audit path of leaf in the tree of size leaves (leaf < size <=
 * committed), leaf to root, into path[0..*n) (*n <= TLOG_MAX_PROOF). DPB_OK, DPB_EINVAL (err
 * says which bound failed; err may be NULL). */
dpb_status tlog_inclusion(dpb_tlog *t, uint64_t leaf, uint64_t size, tlog_hash *path, size_t *n,
                          dpb_error *err);
/* RFC 9162 2.1.4.1: the consistency proof between the trees of sizes first and second
 * (1 <= first <= second <= committed; empty when first == second) into proof[0..*n).
 * DPB_OK, DPB_EINVAL. */
dpb_status tlog_consistency(dpb_tlog *t, uint64_t first, uint64_t second, tlog_hash *proof,
                            size_t *n, dpb_error *err);

#endif
