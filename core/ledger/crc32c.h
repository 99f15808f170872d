/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of the write-ahead log and the snapshot.
 *
 * Polynomial 0x1EDC6F41 (reflected 0x82F63B78), reflected input and output, initial value
 * 0xFFFFFFFF and final XOR 0xFFFFFFFF: the CRC of iSCSI (RFC 3720), ext4, SSE4.2's crc32
 * instruction and Google's crc32c library. Check value: crc32c("123456789") == 0xE3069283.
 * Computed with that instruction where the processor has it (x86-64 with SSE4.2).
 */
#ifndef DPB_LEDGER_CRC32C_H
#define DPB_LEDGER_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend a finished CRC-32C over n more bytes of buf and return the finished result.
 * Convention (zlib's crc32() style): crc is a *finished* value, 0 to start, and the
 * function applies the initial and final inversion itself, so
 *     dpb_crc32c(0, "123456789", 9) == 0xE3069283,
 *     dpb_crc32c(0, buf, 0) == 0, dpb_crc32c(c, buf, 0) == c, and
 *     dpb_crc32c(dpb_crc32c(0, a, na), b, nb) == CRC-32C of a followed by b.
 * buf may be NULL when n == 0. Pure; thread-safe. */
uint32_t dpb_crc32c(uint32_t crc, const void *buf, size_t n);

/* The same CRC, always byte-at-a-time from the table (what dpb_crc32c does where the
 * processor has no crc32 instruction, and for fewer than 16 bytes); and whether dpb_crc32c
 * uses the instruction on this processor (1) or not (0). For the unit tests. */
uint32_t dpb_crc32c_table(uint32_t crc, const void *buf, size_t n);
int dpb_crc32c_hw(void);

#endif
