/*
 * bitset.c: bit counting for bitset.h.
 */
#include "util/bitset.h"

size_t sx__bits_count(const uint64_t *w, size_t nbits)
{
    size_t full = nbits / 64, c = 0;
    for (size_t i = 0; i < full; i++)
        c += (size_t)__builtin_popcountll(__atomic_load_n(&w[i], __ATOMIC_RELAXED));
    size_t rest = nbits & 63;
    if (rest) {
        uint64_t mask = ((uint64_t)1 << rest) - 1;
        c += (size_t)__builtin_popcountll(__atomic_load_n(&w[full], __ATOMIC_RELAXED) & mask);
    }
    return c;
}
