/*
 * bitset.h: fixed-size bitsets of uint64_t words. Bit i of word i/64. Used for delete bitmaps
 * (bit set = row deleted) and filter results (bit set = row allowed).
 * Delete bitmaps are read by searches while the writer sets bits: sx__bits_set_atomic and
 * sx__bits_test_atomic use relaxed atomics (a search may or may not see a delete that races
 * with it; it never sees a torn word).
 */
#ifndef SX_UTIL_BITSET_H
#define SX_UTIL_BITSET_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline size_t sx__bits_words(size_t nbits)
{
    return (nbits + 63) / 64;
}

static inline bool sx__bits_test(const uint64_t *w, size_t i)
{
    return (w[i >> 6] >> (i & 63)) & 1u;
}

static inline void sx__bits_set(uint64_t *w, size_t i)
{
    w[i >> 6] |= (uint64_t)1 << (i & 63);
}

static inline void sx__bits_clear(uint64_t *w, size_t i)
{
    w[i >> 6] &= ~((uint64_t)1 << (i & 63));
}

static inline bool sx__bits_test_atomic(const uint64_t *w, size_t i)
{
    uint64_t v = __atomic_load_n(&w[i >> 6], __ATOMIC_RELAXED);
    return (v >> (i & 63)) & 1u;
}

static inline void sx__bits_set_atomic(uint64_t *w, size_t i)
{
    __atomic_fetch_or(&w[i >> 6], (uint64_t)1 << (i & 63), __ATOMIC_RELAXED);
}

/* number of set bits among the first nbits */
size_t sx__bits_count(const uint64_t *w, size_t nbits);

#endif
