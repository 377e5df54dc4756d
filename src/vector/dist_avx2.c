/*
 * dist_avx2.c: AVX2+FMA kernels (see dist.h): float32, float16 (F16C), bfloat16 and binary
 * (POPCNT) rows. This file alone is compiled with -mavx2 -mfma -mf16c -mpopcnt; nothing in it
 * runs unless sx__dist_avx2() found all four at run time.
 *
 * Shape of every kernel.
 * - Main loop: 32 floats per iteration into four independent 8-lane accumulators, so four FMAs
 *   are in flight (FMA latency 4, throughput 2/cycle: fewer accumulators stall on the add chain).
 *   dim 128 = 4 iterations, 768 = 24, 784 = 24 + 2 single vectors, 1536 = 48.
 * - Then 8 floats at a time, then a masked tail (vmaskmovps: masked-off lanes are not read, so a
 *   vector ending at the edge of a page never faults). No scalar tail loop.
 * - Unaligned loads throughout: rows of odd dim are not 32-byte aligned, and on every AVX2 CPU an
 *   unaligned load of aligned data costs the same as an aligned one.
 * The summation order differs from the scalar reference, so results agree within rounding only.
 */
#include "vector/dist.h"

#if defined(__x86_64__) || defined(__i386__)
# include <immintrin.h>
# include <stdbool.h>
# include <stdint.h>
# include <string.h>

# include "vector/dist_bits.h"

/* mask_tab + 8 - r: the first r lanes all-ones, the rest zero (r in 0..8). */
static const int32_t mask_tab[16] = { -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0 };

static inline __m256i tail_mask(size_t r)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)(mask_tab + 8 - r));
}

static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dist_l2sq_f32_avx2(const float *a, const void *bv, size_t dim)
{
    const float *b = bv;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
        __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16));
        __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24));
        s0 = _mm256_fmadd_ps(d0, d0, s0);
        s1 = _mm256_fmadd_ps(d1, d1, s1);
        s2 = _mm256_fmadd_ps(d2, d2, s2);
        s3 = _mm256_fmadd_ps(d3, d3, s3);
    }
    for (; i + 8 <= dim; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        s1 = _mm256_fmadd_ps(d, d, s1);
    }
    if (i < dim) {
        __m256i m = tail_mask(dim - i);
        __m256 d = _mm256_sub_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m));
        s2 = _mm256_fmadd_ps(d, d, s2);
    }
    return hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static inline float ip_avx2(const float *a, const float *b, size_t dim)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= dim; i += 8)
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s1);
    if (i < dim) {
        __m256i m = tail_mask(dim - i);
        s2 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), s2);
    }
    return hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static float dist_ip_f32_avx2(const float *a, const void *b, size_t dim)
{
    return ip_avx2(a, b, dim);
}

static float dist_nip_f32_avx2(const float *a, const void *b, size_t dim)
{
    return -ip_avx2(a, b, dim);
}

/* ---- float16 / bfloat16 rows: 8 values widened per load (vcvtph2ps; bfloat16: zero-extend to
 * 32 bits and shift left 16), then the float32 loop shapes above. The tail (< 8 values) is
 * copied into a zeroed 8-value buffer, and the query's lanes past it are masked off (zero), so
 * they add nothing. bf is a constant at every call: the compiler specialises the inlined body. */

static inline __attribute__((always_inline)) __m256 ld16(const uint16_t *p, bool bf)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (bf)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

static inline __attribute__((always_inline)) __m256 ld16_tail(const uint16_t *p, size_t r, bool bf)
{
    uint16_t t[8] = { 0 };
    memcpy(t, p, r * sizeof *t);
    return ld16(t, bf);
}

static inline __attribute__((always_inline)) float
l2sq_u16_avx2(const float *a, const uint16_t *b, size_t dim, bool bf)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
        __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(a + i), ld16(b + i, bf));
        __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 8), ld16(b + i + 8, bf));
        __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 16), ld16(b + i + 16, bf));
        __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(a + i + 24), ld16(b + i + 24, bf));
        s0 = _mm256_fmadd_ps(d0, d0, s0);
        s1 = _mm256_fmadd_ps(d1, d1, s1);
        s2 = _mm256_fmadd_ps(d2, d2, s2);
        s3 = _mm256_fmadd_ps(d3, d3, s3);
    }
    for (; i + 8 <= dim; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(a + i), ld16(b + i, bf));
        s1 = _mm256_fmadd_ps(d, d, s1);
    }
    if (i < dim) {
        __m256 d = _mm256_sub_ps(_mm256_maskload_ps(a + i, tail_mask(dim - i)),
                                 ld16_tail(b + i, dim - i, bf));
        s2 = _mm256_fmadd_ps(d, d, s2);
    }
    return hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static inline __attribute__((always_inline)) float
ip_u16_avx2(const float *a, const uint16_t *b, size_t dim, bool bf)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), ld16(b + i, bf), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), ld16(b + i + 8, bf), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), ld16(b + i + 16, bf), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), ld16(b + i + 24, bf), s3);
    }
    for (; i + 8 <= dim; i += 8)
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), ld16(b + i, bf), s1);
    if (i < dim)
        s2 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, tail_mask(dim - i)),
                             ld16_tail(b + i, dim - i, bf), s2);
    return hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static float dist_l2sq_f16_avx2(const float *a, const void *b, size_t dim)
{
    return l2sq_u16_avx2(a, b, dim, false);
}

static float dist_ip_f16_avx2(const float *a, const void *b, size_t dim)
{
    return ip_u16_avx2(a, b, dim, false);
}

static float dist_nip_f16_avx2(const float *a, const void *b, size_t dim)
{
    return -ip_u16_avx2(a, b, dim, false);
}

static float dist_l2sq_bf16_avx2(const float *a, const void *b, size_t dim)
{
    return l2sq_u16_avx2(a, b, dim, true);
}

static float dist_ip_bf16_avx2(const float *a, const void *b, size_t dim)
{
    return ip_u16_avx2(a, b, dim, true);
}

static float dist_nip_bf16_avx2(const float *a, const void *b, size_t dim)
{
    return -ip_u16_avx2(a, b, dim, true);
}

static inline __attribute__((always_inline)) void
widen_avx2(const uint16_t *in, float *out, size_t n, bool bf)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, ld16(in + i, bf));
    if (i < n)
        _mm256_maskstore_ps(out + i, tail_mask(n - i), ld16_tail(in + i, n - i, bf));
}

static void f16_to_f32_avx2(const uint16_t *in, float *out, size_t n)
{
    widen_avx2(in, out, n, false);
}

static void bf16_to_f32_avx2(const uint16_t *in, float *out, size_t n)
{
    widen_avx2(in, out, n, true);
}

/* binary: the word kernels of dist_bits.h, compiled here with -mpopcnt */
static float hamming_avx2(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    return sx__hamming_words(a, b, nbytes);
}

static float jaccard_avx2(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    return sx__jaccard_words(a, b, nbytes);
}

static void
hamming_n_avx2(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    sx__hamming_words_n(q, rows, n, nbytes, out);
}

static void
jaccard_n_avx2(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    sx__jaccard_words_n(q, rows, n, nbytes, out);
}

static const sx__dist_ops avx2_ops = {
    .isa = "avx2",
    .l2sq = dist_l2sq_f32_avx2,
    .ip = dist_ip_f32_avx2,
    .nip = dist_nip_f32_avx2,
    .l2sq_f16 = dist_l2sq_f16_avx2,
    .ip_f16 = dist_ip_f16_avx2,
    .nip_f16 = dist_nip_f16_avx2,
    .l2sq_bf16 = dist_l2sq_bf16_avx2,
    .ip_bf16 = dist_ip_bf16_avx2,
    .nip_bf16 = dist_nip_bf16_avx2,
    .hamming = hamming_avx2,
    .jaccard = jaccard_avx2,
    .hamming_n = hamming_n_avx2,
    .jaccard_n = jaccard_n_avx2,
    .f16_to_f32 = f16_to_f32_avx2,
    .bf16_to_f32 = bf16_to_f32_avx2,
};

const sx__dist_ops *sx__dist_avx2(void)
{
    /* libgcc's cpu model also checks XGETBV, i.e. that the OS saves the YMM state */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !sx__cpu_has_f16c() ||
        !__builtin_cpu_supports("popcnt"))
        return NULL;
    return &avx2_ops;
}

#else /* not x86: no AVX2 */

const sx__dist_ops *sx__dist_avx2(void)
{
    return NULL;
}

#endif
