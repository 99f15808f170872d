/* sha256.h - SHA-256 (FIPS 180-4), for hashing API keys: tokens are never stored in clear. */
#ifndef HTTP_SHA256_H
#define HTTP_SHA256_H

#include <stddef.h>

void sha256(const void *data, size_t len, unsigned char out[32]);

#endif
