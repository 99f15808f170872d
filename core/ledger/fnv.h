/* fnv.h - 64-bit FNV-1a over bytes, continuing from h (14695981039346656037 to start): the
 * ledger's hash of ids, events and multisets (not a defence against chosen collisions: every
 * table that uses it compares the keys in full). */
#ifndef LEDGER_FNV_H
#define LEDGER_FNV_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t fnv64(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#endif
