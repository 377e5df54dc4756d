/*
 * hash.h: the key hashes of the primary-key structures, defined once: the in-memory hash map
 * (engine/pkmap.c) and the Bloom filter of a segment's key block (storage/segfile.c), whose bits
 * are on disk, so these functions are part of the segment format (FORMAT-SEGMENT.md) and must
 * not change. sx__mix64 is MurmurHash3's 64-bit finalizer; strings are FNV-1a 64, then mixed.
 * Thread-safety: pure functions.
 */
#ifndef SX_UTIL_HASH_H
#define SX_UTIL_HASH_H
#include <stdint.h>

static inline uint64_t sx__mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t sx__hash_str(const char *k)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *k; k++) {
        h ^= (uint8_t)*k;
        h *= 1099511628211ull;
    }
    return sx__mix64(h);
}

#endif
