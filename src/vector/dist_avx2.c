/*
 * dist_avx2.c: AVX2+FMA float32 kernels (see dist.h). This file alone is compiled with
 * -mavx2 -mfma; nothing in it runs unless sx__dist_avx2() found the ISA at run time.
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
# include <stdint.h>

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

static float dist_l2sq_f32_avx2(const float *a, const float *b, size_t dim)
{
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

static float dist_ip_f32_avx2(const float *a, const float *b, size_t dim)
{
    return ip_avx2(a, b, dim);
}

static float dist_nip_f32_avx2(const float *a, const float *b, size_t dim)
{
    return -ip_avx2(a, b, dim);
}

static const sx__dist_ops avx2_ops = {
    .isa = "avx2",
    .l2sq = dist_l2sq_f32_avx2,
    .ip = dist_ip_f32_avx2,
    .nip = dist_nip_f32_avx2,
};

const sx__dist_ops *sx__dist_avx2(void)
{
    /* libgcc's cpu model also checks XGETBV, i.e. that the OS saves the YMM state */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return NULL;
    return &avx2_ops;
}

#else /* not x86: no AVX2 */

const sx__dist_ops *sx__dist_avx2(void)
{
    return NULL;
}

#endif
