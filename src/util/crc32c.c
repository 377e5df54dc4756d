/*
 * crc32c.c: CRC-32C, reflected polynomial 0x82F63B78. The SSE4.2 crc32 instruction computes the
 * same function; it is selected once at first use.
 */
#include "util/crc32c.h"

#include <stdatomic.h>
#include <string.h>

static uint32_t table[256];
static atomic_int table_ready; /* acquire/release: publishes the table contents */

static void init_table(void)
{
    if (atomic_load_explicit(&table_ready, memory_order_acquire))
        return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
    atomic_store_explicit(&table_ready, 1, memory_order_release);
}

uint32_t sx__crc32c_sw(uint32_t crc, const void *p, size_t n)
{
    init_table();
    const uint8_t *b = p;
    crc = ~crc;
    while (n--)
        crc = table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        c = __builtin_ia32_crc32di(c, v);
        b += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *b++);
    return ~c32;
}
#endif

uint32_t sx__crc32c(uint32_t crc, const void *p, size_t n)
{
#if defined(__x86_64__)
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
    if (have)
        return crc_hw(crc, p, n);
#endif
    return sx__crc32c_sw(crc, p, n);
}
