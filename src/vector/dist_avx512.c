/*
 * dist_avx512.c: AVX-512F float32 kernels (see dist.h). This file alone is compiled with
 * -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma; nothing in it runs unless sx__dist_avx512()
 * found all of those at run time (the compiler may use any of them anywhere in this file).
 *
 * Shape of every kernel.
 * - Main loop: 64 floats per iteration into four independent 16-lane accumulators (four FMAs in
 *   flight hide the FMA latency). dim 128 = 2 iterations, 768 = 12, 784 = 12 + 1 single vector,
 *   1536 = 24.
 * - Then 16 floats at a time, then one masked tail: masked-off lanes are neither read nor can
 *   fault (AVX-512 fault suppression), so there is no scalar tail loop and dims below 16 are a
 *   single masked load per operand.
 * - Unaligned loads: a row of a dim that is not a multiple of 16 is not 64-byte aligned; on
 *   AVX-512 CPUs an unaligned load that does not cross a line costs the same as an aligned one.
 * The summation order differs from the scalar reference, so results agree within rounding only.
 */
#include "vector/dist.h"

#if defined(__x86_64__)
# include <immintrin.h>

static inline __mmask16 tail_mask(size_t r)
{
    return (__mmask16)((1u << r) - 1u); /* r in 1..15 */
}

static float dist_l2sq_f32_avx512(const float *a, const float *b, size_t dim)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 64 <= dim; i += 64) {
        __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
        __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16));
        __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32));
        __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48));
        s0 = _mm512_fmadd_ps(d0, d0, s0);
        s1 = _mm512_fmadd_ps(d1, d1, s1);
        s2 = _mm512_fmadd_ps(d2, d2, s2);
        s3 = _mm512_fmadd_ps(d3, d3, s3);
    }
    for (; i + 16 <= dim; i += 16) {
        __m512 d = _mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
        s1 = _mm512_fmadd_ps(d, d, s1);
    }
    if (i < dim) {
        __mmask16 m = tail_mask(dim - i);
        __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i));
        s2 = _mm512_fmadd_ps(d, d, s2);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static inline float ip_avx512(const float *a, const float *b, size_t dim)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 64 <= dim; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i + 16 <= dim; i += 16)
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s1);
    if (i < dim) {
        __mmask16 m = tail_mask(dim - i);
        s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s2);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static float dist_ip_f32_avx512(const float *a, const float *b, size_t dim)
{
    return ip_avx512(a, b, dim);
}

static float dist_nip_f32_avx512(const float *a, const float *b, size_t dim)
{
    return -ip_avx512(a, b, dim);
}

static const sx__dist_ops avx512_ops = {
    .isa = "avx512",
    .l2sq = dist_l2sq_f32_avx512,
    .ip = dist_ip_f32_avx512,
    .nip = dist_nip_f32_avx512,
};

const sx__dist_ops *sx__dist_avx512(void)
{
    /* libgcc's cpu model also checks XGETBV, i.e. that the OS saves the ZMM and mask state */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl") ||
        !__builtin_cpu_supports("fma"))
        return NULL;
    return &avx512_ops;
}

#else /* not x86-64: no AVX-512 */

const sx__dist_ops *sx__dist_avx512(void)
{
    return NULL;
}

#endif
