/*
 * dist_avx512.c: AVX-512F kernels (see dist.h): float32, float16, bfloat16 and binary rows. This
 * file alone is compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c -mpopcnt;
 * nothing in it runs unless sx__dist_avx512() found all of those at run time (the compiler may
 * use any of them anywhere in this file). VPOPCNTDQ is enabled per function (see the binary
 * kernels) and chosen at run time.
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
# include <stdbool.h>
# include <stdint.h>

# include "vector/dist_bits.h"

static inline __mmask16 tail_mask(size_t r)
{
    return (__mmask16)((1u << r) - 1u); /* r in 1..15 */
}

static float dist_l2sq_f32_avx512(const float *a, const void *bv, size_t dim)
{
    const float *b = bv;
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

static float dist_ip_f32_avx512(const float *a, const void *b, size_t dim)
{
    return ip_avx512(a, b, dim);
}

static float dist_nip_f32_avx512(const float *a, const void *b, size_t dim)
{
    return -ip_avx512(a, b, dim);
}

/* ---- float16 / bfloat16 rows: 16 values widened per 32-byte load (vcvtph2ps; bfloat16:
 * vpmovzxwd then a 16-bit shift), the float32 loop shapes above; the tail is one masked 16-bit
 * load (AVX512BW+VL), its masked-off lanes zero on both sides. bf is a constant at every call. */

static inline __attribute__((always_inline)) __m512 widen16(__m256i h, bool bf)
{
    if (bf)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

static inline __attribute__((always_inline)) __m512 ld16(const uint16_t *p, bool bf)
{
    return widen16(_mm256_loadu_si256((const __m256i *)(const void *)p), bf);
}

static inline __attribute__((always_inline)) __m512
ld16_tail(const uint16_t *p, __mmask16 m, bool bf)
{
    return widen16(_mm256_maskz_loadu_epi16(m, p), bf);
}

static inline __attribute__((always_inline)) float
l2sq_u16_avx512(const float *a, const uint16_t *b, size_t dim, bool bf)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 64 <= dim; i += 64) {
        __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(a + i), ld16(b + i, bf));
        __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 16), ld16(b + i + 16, bf));
        __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 32), ld16(b + i + 32, bf));
        __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(a + i + 48), ld16(b + i + 48, bf));
        s0 = _mm512_fmadd_ps(d0, d0, s0);
        s1 = _mm512_fmadd_ps(d1, d1, s1);
        s2 = _mm512_fmadd_ps(d2, d2, s2);
        s3 = _mm512_fmadd_ps(d3, d3, s3);
    }
    for (; i + 16 <= dim; i += 16) {
        __m512 d = _mm512_sub_ps(_mm512_loadu_ps(a + i), ld16(b + i, bf));
        s1 = _mm512_fmadd_ps(d, d, s1);
    }
    if (i < dim) {
        __mmask16 m = tail_mask(dim - i);
        __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, a + i), ld16_tail(b + i, m, bf));
        s2 = _mm512_fmadd_ps(d, d, s2);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static inline __attribute__((always_inline)) float
ip_u16_avx512(const float *a, const uint16_t *b, size_t dim, bool bf)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    __m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 64 <= dim; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), ld16(b + i, bf), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), ld16(b + i + 16, bf), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), ld16(b + i + 32, bf), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), ld16(b + i + 48, bf), s3);
    }
    for (; i + 16 <= dim; i += 16)
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), ld16(b + i, bf), s1);
    if (i < dim) {
        __mmask16 m = tail_mask(dim - i);
        s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), ld16_tail(b + i, m, bf), s2);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static float dist_l2sq_f16_avx512(const float *a, const void *b, size_t dim)
{
    return l2sq_u16_avx512(a, b, dim, false);
}

static float dist_ip_f16_avx512(const float *a, const void *b, size_t dim)
{
    return ip_u16_avx512(a, b, dim, false);
}

static float dist_nip_f16_avx512(const float *a, const void *b, size_t dim)
{
    return -ip_u16_avx512(a, b, dim, false);
}

static float dist_l2sq_bf16_avx512(const float *a, const void *b, size_t dim)
{
    return l2sq_u16_avx512(a, b, dim, true);
}

static float dist_ip_bf16_avx512(const float *a, const void *b, size_t dim)
{
    return ip_u16_avx512(a, b, dim, true);
}

static float dist_nip_bf16_avx512(const float *a, const void *b, size_t dim)
{
    return -ip_u16_avx512(a, b, dim, true);
}

static inline __attribute__((always_inline)) void
widen_avx512(const uint16_t *in, float *out, size_t n, bool bf)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, ld16(in + i, bf));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(out + i, m, ld16_tail(in + i, m, bf));
    }
}

static void f16_to_f32_avx512(const uint16_t *in, float *out, size_t n)
{
    widen_avx512(in, out, n, false);
}

static void bf16_to_f32_avx512(const uint16_t *in, float *out, size_t n)
{
    widen_avx512(in, out, n, true);
}

/* ---- binary rows. With VPOPCNTDQ: 64 bytes per step (vpopcntq on the xor / and / or), the
 * tail one masked byte load; the instruction is enabled for these functions only (target
 * attribute), so nothing else in the file can pick it up on a CPU without it. Without it: the
 * word kernels of dist_bits.h (64-bit POPCNT). */

/* Rows under 64 bytes (512 bits, the common binary codes) take the word kernel: two to seven
 * POPCNTs beat a masked 64-byte load and a 512-bit reduction. */
__attribute__((target("avx512vpopcntdq"))) static float
hamming_avx512(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    if (nbytes < 64)
        return sx__hamming_words(a, b, nbytes);
    __m512i c = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 64 <= nbytes; i += 64)
        c = _mm512_add_epi64(c, _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512(a + i),
                                                                     _mm512_loadu_si512(b + i))));
    if (i < nbytes) {
        __mmask64 m = ~0ull >> (64 - (nbytes - i)); /* nbytes - i in 1..63 */
        c = _mm512_add_epi64(
            c, _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_maskz_loadu_epi8(m, a + i),
                                                    _mm512_maskz_loadu_epi8(m, b + i))));
    }
    return (float)_mm512_reduce_add_epi64(c);
}

__attribute__((target("avx512vpopcntdq"))) static float
jaccard_avx512(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    if (nbytes < 64)
        return sx__jaccard_words(a, b, nbytes);
    __m512i both = _mm512_setzero_si512(), any = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 64 <= nbytes; i += 64) {
        __m512i x = _mm512_loadu_si512(a + i), y = _mm512_loadu_si512(b + i);
        both = _mm512_add_epi64(both, _mm512_popcnt_epi64(_mm512_and_si512(x, y)));
        any = _mm512_add_epi64(any, _mm512_popcnt_epi64(_mm512_or_si512(x, y)));
    }
    if (i < nbytes) {
        __mmask64 m = ~0ull >> (64 - (nbytes - i)); /* nbytes - i in 1..63 */
        __m512i x = _mm512_maskz_loadu_epi8(m, a + i), y = _mm512_maskz_loadu_epi8(m, b + i);
        both = _mm512_add_epi64(both, _mm512_popcnt_epi64(_mm512_and_si512(x, y)));
        any = _mm512_add_epi64(any, _mm512_popcnt_epi64(_mm512_or_si512(x, y)));
    }
    return sx__jaccard_from_counts((uint64_t)_mm512_reduce_add_epi64(both),
                                   (uint64_t)_mm512_reduce_add_epi64(any));
}

static float hamming_words_avx512(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    return sx__hamming_words(a, b, nbytes);
}

static float jaccard_words_avx512(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    return sx__jaccard_words(a, b, nbytes);
}

__attribute__((target("avx512vpopcntdq"))) static void
hamming_n_avx512(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    if (nbytes < 64) {
        sx__hamming_words_n(q, rows, n, nbytes, out);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = hamming_avx512(q, rows + i * nbytes, nbytes);
}

__attribute__((target("avx512vpopcntdq"))) static void
jaccard_n_avx512(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    if (nbytes < 64) {
        sx__jaccard_words_n(q, rows, n, nbytes, out);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = jaccard_avx512(q, rows + i * nbytes, nbytes);
}

static void
hamming_n_words_avx512(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    sx__hamming_words_n(q, rows, n, nbytes, out);
}

static void
jaccard_n_words_avx512(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    sx__jaccard_words_n(q, rows, n, nbytes, out);
}

# define AVX512_FLOAT_MEMBERS                                                                 \
  .isa = "avx512", .l2sq = dist_l2sq_f32_avx512, .ip = dist_ip_f32_avx512,                    \
  .nip = dist_nip_f32_avx512, .l2sq_f16 = dist_l2sq_f16_avx512, .ip_f16 = dist_ip_f16_avx512, \
  .nip_f16 = dist_nip_f16_avx512, .l2sq_bf16 = dist_l2sq_bf16_avx512,                         \
  .ip_bf16 = dist_ip_bf16_avx512, .nip_bf16 = dist_nip_bf16_avx512,                           \
  .f16_to_f32 = f16_to_f32_avx512, .bf16_to_f32 = bf16_to_f32_avx512

static const sx__dist_ops avx512_ops = {
    AVX512_FLOAT_MEMBERS,          .hamming = hamming_avx512,     .jaccard = jaccard_avx512,
    .hamming_n = hamming_n_avx512, .jaccard_n = jaccard_n_avx512,
};

/* the same without VPOPCNTDQ (Skylake-SP, Cascade Lake: AVX-512 but no vector popcount) */
static const sx__dist_ops avx512_ops_nopopcnt = {
    AVX512_FLOAT_MEMBERS,
    .hamming = hamming_words_avx512,
    .jaccard = jaccard_words_avx512,
    .hamming_n = hamming_n_words_avx512,
    .jaccard_n = jaccard_n_words_avx512,
};

const sx__dist_ops *sx__dist_avx512(void)
{
    /* libgcc's cpu model also checks XGETBV, i.e. that the OS saves the ZMM and mask state */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl") ||
        !__builtin_cpu_supports("fma") || !sx__cpu_has_f16c() || !__builtin_cpu_supports("popcnt"))
        return NULL;
    return __builtin_cpu_supports("avx512vpopcntdq") ? &avx512_ops : &avx512_ops_nopopcnt;
}

#else /* not x86-64: no AVX-512 */

const sx__dist_ops *sx__dist_avx512(void)
{
    return NULL;
}

#endif
