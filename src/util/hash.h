/*
 * hash.h: the key hashes of the primary-key structures, defined once: the in-memory hash map
 * (engine/pkmap.c) and the Bloom filter of a segment's key block (storage/segfile.c), whose bits
 * are on disk, so these functions are part of the segment format (FORMAT-SEGMENT.md) and must
 * not change. sx__mix64 is MurmurHash3's 64-bit finalizer; strings are FNV-1a 64, then mixed.
 * Thread-safety: pure functions.
 */
#ifndef SX_UTIL_HASH_H
#define SX_UTIL_HASH_H
#include <stddef.h>
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

/* Partition key routing (Milvus's partition key mode, used by the server's inserts and the
 * engine's bulk import alike): the bucket in [0, n) of a row whose key is the integer v or the
 * string s (s non-NULL). The hashes are Milvus's (typeutil.Hash32Int64: MurmurHash3 x86_32,
 * seed 0, of v's 8 little-endian bytes, masked to 31 bits; typeutil.HashString2Uint32: CRC-32
 * IEEE of s's first 100 bytes), so rows land in the partitions Milvus would put them in. The
 * partition of a stored row depends on them: they must not change. MurmurHash3 is Austin
 * Appleby's public-domain algorithm; the CRC uses a 16-entry (nibble) table. */
static inline uint32_t sx__murmur3_32_u64(uint64_t v)
{
    const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
    uint32_t h = 0;
    for (int b = 0; b < 2; b++) {
        uint32_t k = (uint32_t)(v >> (32 * b)); /* little-endian 4-byte blocks */
        k *= c1;
        k = (k << 15) | (k >> 17);
        k *= c2;
        h ^= k;
        h = (h << 13) | (h >> 19);
        h = h * 5 + 0xe6546b64u;
    }
    h ^= 8u; /* length */
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static inline uint32_t sx__crc32_ieee(const char *s, size_t n)
{
    static const uint32_t t[16] = { 0x00000000u, 0x1db71064u, 0x3b6e20c8u, 0x26d930acu,
                                    0x76dc4190u, 0x6b6b51f4u, 0x4db26158u, 0x5005713cu,
                                    0xedb88320u, 0xf00f9344u, 0xd6d6a3e8u, 0xcb61b38cu,
                                    0x9b64c2b0u, 0x86d3d2d4u, 0xa00ae278u, 0xbdbdf21cu };
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= (uint8_t)s[i];
        c = (c >> 4) ^ t[c & 15u];
        c = (c >> 4) ^ t[c & 15u];
    }
    return ~c;
}

static inline uint32_t sx__key_bucket(int64_t v, const char *s, uint32_t n)
{
    uint32_t h;
    if (s) {
        size_t len = 0;
        while (len < 100 && s[len])
            len++;
        h = sx__crc32_ieee(s, len);
    } else {
        h = sx__murmur3_32_u64((uint64_t)v) & 0x7fffffffu;
    }
    return h % n;
}

#endif
