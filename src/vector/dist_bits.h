/*
 * dist_bits.h: the word-at-a-time binary kernels (HAMMING, JACCARD), as static inline functions
 * for the files of dist.h: dist.c includes them as the scalar table's kernels, dist_avx2.c (built
 * with -mpopcnt) as its own, where __builtin_popcountll becomes the POPCNT instruction, and
 * dist_avx512.c as the fallback of CPUs without VPOPCNTDQ. One body, three code generations.
 *
 * Rows are read 64 bits at a time with memcpy (a row of nbytes not a multiple of 8 leaves the
 * next one unaligned), then byte by byte. Counts are exact integers; the float returned is exact
 * up to 2^24 differing bits (SX_MAX_DIM bits is far below).
 * Thread-safety: pure functions.
 */
#ifndef SX_VECTOR_DIST_BITS_H
#define SX_VECTOR_DIST_BITS_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vector/dist.h"

static inline float sx__hamming_words(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    uint64_t c = 0;
    size_t i = 0;
    for (; i + 8 <= nbytes; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        c += (uint64_t)__builtin_popcountll(x ^ y);
    }
    for (; i < nbytes; i++)
        c += (uint64_t)__builtin_popcount((unsigned)(a[i] ^ b[i]));
    return (float)c;
}

static inline float sx__jaccard_words(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    uint64_t both = 0, any = 0;
    size_t i = 0;
    for (; i + 8 <= nbytes; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        both += (uint64_t)__builtin_popcountll(x & y);
        any += (uint64_t)__builtin_popcountll(x | y);
    }
    for (; i < nbytes; i++) {
        both += (uint64_t)__builtin_popcount((unsigned)(a[i] & b[i]));
        any += (uint64_t)__builtin_popcount((unsigned)(a[i] | b[i]));
    }
    return sx__jaccard_from_counts(both, any);
}

/* The block forms: row i of n consecutive rows. */
static inline void
sx__hamming_words_n(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = sx__hamming_words(q, rows + i * nbytes, nbytes);
}

static inline void
sx__jaccard_words_n(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = sx__jaccard_words(q, rows + i * nbytes, nbytes);
}

#endif
