/*
 * tlog_ref.h - RFC 9162 section 2.1 written from the RFC's text for the tests (never the
 * daemon's code): SHA-256 (nettle's primitive only), MTH by its recursive definition, the
 * leaf hash of an entry, and the verification algorithms of 2.1.3.2 (inclusion) and 2.1.4.2
 * (consistency). Used by the unit, API and PostgreSQL suites.
 */
#ifndef DPB_TESTS_TLOG_REF_H
#define DPB_TESTS_TLOG_REF_H

#include <nettle/sha2.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef unsigned char h32[32];

static inline void sha(const unsigned char *a, size_t na, const unsigned char *b, size_t nb,
                       const unsigned char *c, size_t nc, unsigned char *out)
{
    struct sha256_ctx x;
    sha256_init(&x);
    sha256_update(&x, na, a);
    if (nb)
        sha256_update(&x, nb, b);
    if (nc)
        sha256_update(&x, nc, c);
    sha256_digest(&x, 32, out);
}

/* leaf input of test leaf i: the entry of a record seq i + 1, type 2, payload "leaf i" */
static inline void ref_leaf(uint64_t i, unsigned char *out)
{
    unsigned char e[9 + 32];
    e[0] = 2;
    for (int k = 0; k < 8; k++)
        e[1 + k] = (unsigned char)((i + 1) >> (8 * k));
    int n = snprintf((char *)e + 9, 32, "leaf %llu", (unsigned long long)i);
    static const unsigned char zero = 0;
    sha(&zero, 1, e, 9 + (size_t)n, NULL, 0, out);
}

static inline void ref_node(const unsigned char *l, const unsigned char *r, unsigned char *out)
{
    static const unsigned char one = 1;
    sha(&one, 1, l, 32, r, 32, out);
}

/* MTH(D[a:b)) over leaf hashes lh, by the definition (k: the largest power of two < n). */
static inline void ref_mth(const h32 *lh, uint64_t a, uint64_t b, unsigned char *out)
{
    uint64_t n = b - a;
    if (n == 0) {
        sha(NULL, 0, NULL, 0, NULL, 0, out);
        return;
    }
    if (n == 1) {
        memcpy(out, lh[a], 32);
        return;
    }
    uint64_t k = 1;
    while (k * 2 < n)
        k *= 2;
    h32 l, r;
    ref_mth(lh, a, a + k, l);
    ref_mth(lh, a + k, b, r);
    ref_node(l, r, out);
}

/* 2.1.3.2: verify an inclusion proof of leaf hash lh at index in a tree (size, root). */
static inline int ref_verify_inclusion(uint64_t index, uint64_t size, const unsigned char *lh,
                                       const h32 *path, size_t n, const unsigned char *root)
{
    if (index >= size)
        return 0;
    uint64_t fn = index, sn = size - 1;
    h32 r;
    memcpy(r, lh, 32);
    for (size_t i = 0; i < n; i++) {
        if (sn == 0)
            return 0;
        if ((fn & 1) || fn == sn) {
            ref_node(path[i], r, r);
            if (!(fn & 1))
                while (fn != 0 && !(fn & 1)) {
                    fn >>= 1;
                    sn >>= 1;
                }
        } else {
            ref_node(r, path[i], r);
        }
        fn >>= 1;
        sn >>= 1;
    }
    return sn == 0 && memcmp(r, root, 32) == 0;
}

/* 2.1.4.2: verify a consistency proof between (first, first_hash) and (second, second_hash). */
static inline int ref_verify_consistency(uint64_t first, uint64_t second, const unsigned char *fh,
                                         const unsigned char *sh, const h32 *proof, size_t n)
{
    if (first == second)
        return n == 0 && memcmp(fh, sh, 32) == 0;
    if (first > second || first == 0 || n == 0)
        return 0;
    h32 p[130];
    size_t np = 0;
    if ((first & (first - 1)) == 0) /* a power of two: prepend first_hash */
        memcpy(p[np++], fh, 32);
    for (size_t i = 0; i < n; i++)
        memcpy(p[np++], proof[i], 32);
    uint64_t fn = first - 1, sn = second - 1;
    while (fn & 1) {
        fn >>= 1;
        sn >>= 1;
    }
    h32 fr, sr;
    memcpy(fr, p[0], 32);
    memcpy(sr, p[0], 32);
    for (size_t i = 1; i < np; i++) {
        if (sn == 0)
            return 0;
        if ((fn & 1) || fn == sn) {
            ref_node(p[i], fr, fr);
            ref_node(p[i], sr, sr);
            if (!(fn & 1))
                while (fn != 0 && !(fn & 1)) {
                    fn >>= 1;
                    sn >>= 1;
                }
        } else {
            ref_node(sr, p[i], sr);
        }
        fn >>= 1;
        sn >>= 1;
    }
    return sn == 0 && memcmp(fr, fh, 32) == 0 && memcmp(sr, sh, 32) == 0;
}

/* The leaf hash of an entry given as head (type, seq LE: 9 bytes) and payload. */
static inline void ref_leaf_of_entry(const unsigned char *head, const void *payload, size_t n,
                                     unsigned char *out)
{
    unsigned char b[10];
    b[0] = 0x00;
    memcpy(b + 1, head, 9);
    sha(b, 10, payload, n, NULL, 0, out);
}

#endif
