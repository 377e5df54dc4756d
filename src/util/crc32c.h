/*
 * crc32c.h: CRC-32C (Castagnoli), used by every on-disk record and block. Hardware (SSE4.2) when
 * the CPU has it, a table otherwise; both give identical results (tested).
 */
#ifndef SX_UTIL_CRC32C_H
#define SX_UTIL_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* Extends `crc` (start with 0) over n bytes. Thread-safety: pure. */
uint32_t sx__crc32c(uint32_t crc, const void *p, size_t n);
/* Table-only implementation, for tests. */
uint32_t sx__crc32c_sw(uint32_t crc, const void *p, size_t n);

#endif
