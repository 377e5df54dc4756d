/*
 * hnsw_sq_quant.c: the HNSW_SQ quantizer (8-bit codes, one affine map per dimension: FAISS's
 * QT_8bit with min/max ranges) and its integer distance kernels. The maths is in hnsw_sq.h.
 *
 * Why integer dot products and not the float kernels of vector/quant_sq8.c. quant_sq8 widens
 * every code byte to a float (vpmovzxbd + vcvtdq2ps + FMA: 16 dimensions per ~4 instructions);
 * here the query is quantized too, and one vpdpbusd multiplies 64 unsigned code bytes by 64
 * signed query bytes and accumulates into 16 int32 lanes, so a 784-byte code costs 13
 * instructions. The price is the query's 8-bit rounding (hnsw_sq.h), which only perturbs the
 * traversal's order: the final order comes from the exact re-rank. The expansion
 * ||x'-mu||^2 - 2<x'-mu,q-mu> + ||q-mu||^2 makes L2 a dot product too; squared differences of bytes
 * would need a per-dimension weight s_d^2 that integer SIMD cannot apply.
 *
 * Kernels (invariant: all return exactly the same int32 as the scalar one; tests compare them):
 *   scalar      reference loop
 *   avx2        16 dimensions per step: vpmovzxbw / vpmovsxbw + vpmaddwd (vpmaddubsw would
 *               saturate: 2 * 255 * 127 > 32767)
 *   avx2vnni    VEX vpdpbusd (AVX-VNNI), 32 dimensions per instruction, scalar tail
 *   avx512vnni  EVEX vpdpbusd, 64 dimensions per instruction, masked tail load (never reads past
 *               the code)
 * The ISA follows sx__dist()'s choice (so SX_SIMD=scalar|avx2|avx512 caps it), refined by the
 * CPU's VNNI support. SIMD functions carry __attribute__((target)) and run only after the
 * dispatch checked the CPU.
 *
 * Batch kernels compute the dot products of a list of records (an expanded node's unvisited
 * neighbours); the AVX-512 one four at a time, with independent accumulators for
 * instruction-level parallelism and one shared horizontal reduction, prefetching the next four
 * records.
 *
 * Thread-safety: the kernel table is resolved once with a benign race (both racers store the
 * same pointer); everything else is pure or writes only the caller's index under construction.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "index/hnsw_sq/hnsw_sq.h"
#include "vector/range.h"

/* ---------------------------------------------------------------- scalar */

static int32_t dot_scalar(const uint8_t *code, const int8_t *q, size_t dim)
{
    int32_t s = 0;
    for (size_t d = 0; d < dim; d++)
        s += (int32_t)code[d] * (int32_t)q[d];
    return s;
}

static inline void prefetch_rec(const uint8_t *p, size_t lines)
{
    for (size_t l = 0; l < lines; l++)
        __builtin_prefetch(p + 64 * l, 0, 3);
}

/* lines of a record that a distance reads: the code and the norm after it */
static inline size_t dist_lines(size_t dim)
{
    return (dim + 4 + 63) / 64;
}

static void dot_batch_scalar(const uint8_t *base,
                             size_t stride,
                             const uint32_t *ids,
                             size_t n,
                             const int8_t *q,
                             size_t dim,
                             int32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = dot_scalar(base + (size_t)ids[i] * stride, q, dim);
}

static float scan_scalar(const float *mu,
                         const float *amu,
                         const float *scale,
                         const float *q,
                         size_t dim,
                         float *B,
                         float *nq)
{
    float m = 0.0f;
    double b = 0.0, n2 = 0.0;
    for (size_t d = 0; d < dim; d++) {
        float u = q[d] - mu[d];
        float w = fabsf(scale[d] * u);
        m = w > m ? w : m;
        b += (double)amu[d] * (double)u;
        n2 += (double)u * (double)u;
    }
    *B = (float)b;
    *nq = (float)n2;
    return isfinite(m) ? m : 0.0f;
}

static void
round_scalar(const float *mu, const float *scale, const float *q, size_t dim, float inv, int8_t *q8)
{
    for (size_t d = 0; d < dim; d++) {
        float v = rintf(scale[d] * (q[d] - mu[d]) * inv);
        v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
        q8[d] = (int8_t)(v == v ? v : 0.0f);
    }
}

/* ---------------------------------------------------------------- AVX2 */

#define T_AVX2 __attribute__((target("avx2,fma")))

T_AVX2 static inline int32_t hsum256_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

T_AVX2 static inline __m256i madd16(const uint8_t *c, const int8_t *q)
{
    __m256i cw = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)c));
    __m256i qw = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(const void *)q));
    return _mm256_madd_epi16(cw, qw);
}

T_AVX2 static int32_t dot_avx2(const uint8_t *code, const int8_t *q, size_t dim)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    size_t d = 0;
    for (; d + 32 <= dim; d += 32) {
        a0 = _mm256_add_epi32(a0, madd16(code + d, q + d));
        a1 = _mm256_add_epi32(a1, madd16(code + d + 16, q + d + 16));
    }
    if (d + 16 <= dim) {
        a0 = _mm256_add_epi32(a0, madd16(code + d, q + d));
        d += 16;
    }
    int32_t s = hsum256_epi32(_mm256_add_epi32(a0, a1));
    for (; d < dim; d++)
        s += (int32_t)code[d] * (int32_t)q[d];
    return s;
}

T_AVX2 static void dot_batch_avx2(const uint8_t *base,
                                  size_t stride,
                                  const uint32_t *ids,
                                  size_t n,
                                  const int8_t *q,
                                  size_t dim,
                                  int32_t *out)
{
    size_t lines = dist_lines(dim);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n)
            prefetch_rec(base + (size_t)ids[i + 1] * stride, lines);
        out[i] = dot_avx2(base + (size_t)ids[i] * stride, q, dim);
    }
}

/* ---------------------------------------------------------------- AVX2 + AVX-VNNI */

#define T_AVXVNNI __attribute__((target("avx2,fma,avxvnni")))

T_AVXVNNI static inline __m256i ld256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

T_AVXVNNI static int32_t dot_avx2vnni(const uint8_t *code, const int8_t *q, size_t dim)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    size_t d = 0;
    for (; d + 64 <= dim; d += 64) {
        a0 = _mm256_dpbusd_avx_epi32(a0, ld256(code + d), ld256(q + d));
        a1 = _mm256_dpbusd_avx_epi32(a1, ld256(code + d + 32), ld256(q + d + 32));
    }
    if (d + 32 <= dim) {
        a0 = _mm256_dpbusd_avx_epi32(a0, ld256(code + d), ld256(q + d));
        d += 32;
    }
    int32_t s = hsum256_epi32(_mm256_add_epi32(a0, a1));
    for (; d < dim; d++)
        s += (int32_t)code[d] * (int32_t)q[d];
    return s;
}

T_AVXVNNI static void dot_batch_avx2vnni(const uint8_t *base,
                                         size_t stride,
                                         const uint32_t *ids,
                                         size_t n,
                                         const int8_t *q,
                                         size_t dim,
                                         int32_t *out)
{
    size_t lines = dist_lines(dim);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n)
            prefetch_rec(base + (size_t)ids[i + 1] * stride, lines);
        out[i] = dot_avx2vnni(base + (size_t)ids[i] * stride, q, dim);
    }
}

/* ---------------------------------------------------------------- AVX-512 VNNI */

#define T_VNNI512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

T_VNNI512 static inline __m512i ld512(const void *p)
{
    return _mm512_loadu_si512(p);
}

T_VNNI512 static inline __mmask64 tail_mask(size_t left)
{
    return left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
}

T_VNNI512 static int32_t dot_avx512vnni(const uint8_t *code, const int8_t *q, size_t dim)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    size_t d = 0;
    for (; d + 128 <= dim; d += 128) {
        a0 = _mm512_dpbusd_epi32(a0, ld512(code + d), _mm512_load_si512(q + d));
        a1 = _mm512_dpbusd_epi32(a1, ld512(code + d + 64), _mm512_load_si512(q + d + 64));
    }
    if (d + 64 <= dim) {
        a0 = _mm512_dpbusd_epi32(a0, ld512(code + d), _mm512_load_si512(q + d));
        d += 64;
    }
    if (d < dim) {
        __m512i c = _mm512_maskz_loadu_epi8(tail_mask(dim - d), code + d);
        a1 = _mm512_dpbusd_epi32(a1, c, _mm512_load_si512(q + d));
    }
    return _mm512_reduce_add_epi32(_mm512_add_epi32(a0, a1));
}

/* Two codes at once: independent dependency chains for the short codes (128 bytes = 2 steps)
 * where one code alone would leave the multiplier idle. */
T_VNNI512 static inline void
dot2_avx512vnni(const uint8_t *c0, const uint8_t *c1, const int8_t *q, size_t dim, int32_t *out)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    __m512i b0 = _mm512_setzero_si512(), b1 = _mm512_setzero_si512();
    size_t d = 0;
    for (; d + 128 <= dim; d += 128) {
        __m512i qa = _mm512_load_si512(q + d), qb = _mm512_load_si512(q + d + 64);
        a0 = _mm512_dpbusd_epi32(a0, ld512(c0 + d), qa);
        b0 = _mm512_dpbusd_epi32(b0, ld512(c1 + d), qa);
        a1 = _mm512_dpbusd_epi32(a1, ld512(c0 + d + 64), qb);
        b1 = _mm512_dpbusd_epi32(b1, ld512(c1 + d + 64), qb);
    }
    if (d < dim) {
        __mmask64 m = tail_mask(dim - d);
        __m512i qa = _mm512_load_si512(q + d);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_loadu_epi8(m, c0 + d), qa);
        b0 = _mm512_dpbusd_epi32(b0, _mm512_maskz_loadu_epi8(m, c1 + d), qa);
        d += 64;
        if (d < dim) {
            m = tail_mask(dim - d);
            qa = _mm512_load_si512(q + d);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_maskz_loadu_epi8(m, c0 + d), qa);
            b1 = _mm512_dpbusd_epi32(b1, _mm512_maskz_loadu_epi8(m, c1 + d), qa);
        }
    }
    out[0] = _mm512_reduce_add_epi32(_mm512_add_epi32(a0, a1));
    out[1] = _mm512_reduce_add_epi32(_mm512_add_epi32(b0, b1));
}

/* [sum(a), sum(b), sum(c), sum(d)] of 16 int32 lanes each: one shared reduction instead of four
 * (for 128-byte codes the reductions cost more than the dot products). */
T_VNNI512 static inline __m128i reduce4(__m512i a, __m512i b, __m512i c, __m512i d)
{
    /* per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3] and the same for c, d */
    __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    /* per 128-bit lane: [a, b, c, d] partial sums */
    __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Four codes at once: four independent accumulation chains, one reduction. */
T_VNNI512 static inline void dot4_avx512vnni(const uint8_t *c0,
                                             const uint8_t *c1,
                                             const uint8_t *c2,
                                             const uint8_t *c3,
                                             const int8_t *q,
                                             size_t dim,
                                             int32_t *out)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    __m512i a2 = _mm512_setzero_si512(), a3 = _mm512_setzero_si512();
    size_t d = 0;
    for (; d + 64 <= dim; d += 64) {
        __m512i qv = _mm512_load_si512(q + d);
        a0 = _mm512_dpbusd_epi32(a0, ld512(c0 + d), qv);
        a1 = _mm512_dpbusd_epi32(a1, ld512(c1 + d), qv);
        a2 = _mm512_dpbusd_epi32(a2, ld512(c2 + d), qv);
        a3 = _mm512_dpbusd_epi32(a3, ld512(c3 + d), qv);
    }
    if (d < dim) {
        __mmask64 m = tail_mask(dim - d);
        __m512i qv = _mm512_load_si512(q + d);
        a0 = _mm512_dpbusd_epi32(a0, _mm512_maskz_loadu_epi8(m, c0 + d), qv);
        a1 = _mm512_dpbusd_epi32(a1, _mm512_maskz_loadu_epi8(m, c1 + d), qv);
        a2 = _mm512_dpbusd_epi32(a2, _mm512_maskz_loadu_epi8(m, c2 + d), qv);
        a3 = _mm512_dpbusd_epi32(a3, _mm512_maskz_loadu_epi8(m, c3 + d), qv);
    }
    _mm_storeu_si128((__m128i *)(void *)out, reduce4(a0, a1, a2, a3));
}

T_VNNI512 static void dot_batch_avx512vnni(const uint8_t *base,
                                           size_t stride,
                                           const uint32_t *ids,
                                           size_t n,
                                           const int8_t *q,
                                           size_t dim,
                                           int32_t *out)
{
    size_t lines = dist_lines(dim);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        for (size_t j = i + 4; j < i + 8 && j < n; j++)
            prefetch_rec(base + (size_t)ids[j] * stride, lines);
        dot4_avx512vnni(base + (size_t)ids[i] * stride, base + (size_t)ids[i + 1] * stride,
                        base + (size_t)ids[i + 2] * stride, base + (size_t)ids[i + 3] * stride, q,
                        dim, out + i);
    }
    if (i + 2 <= n) {
        dot2_avx512vnni(base + (size_t)ids[i] * stride, base + (size_t)ids[i + 1] * stride, q, dim,
                        out + i);
        i += 2;
    }
    if (i < n)
        out[i] = dot_avx512vnni(base + (size_t)ids[i] * stride, q, dim);
}

T_VNNI512 static inline __mmask16 mask16(size_t left)
{
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

T_VNNI512 static float scan_avx512(const float *mu,
                                   const float *amu,
                                   const float *scale,
                                   const float *q,
                                   size_t dim,
                                   float *B,
                                   float *nq)
{
    __m512 m = _mm512_setzero_ps(), b = _mm512_setzero_ps(), n2 = _mm512_setzero_ps();
    for (size_t d = 0; d < dim; d += 16) {
        __mmask16 k = mask16(dim - d);
        __m512 u = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, q + d), _mm512_maskz_loadu_ps(k, mu + d));
        __m512 w = _mm512_abs_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, scale + d), u));
        m = _mm512_max_ps(w, m); /* a NaN w yields m (second operand) */
        b = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, amu + d), u, b);
        n2 = _mm512_fmadd_ps(u, u, n2);
    }
    *B = _mm512_reduce_add_ps(b);
    *nq = _mm512_reduce_add_ps(n2);
    float r = _mm512_reduce_max_ps(m);
    return isfinite(r) ? r : 0.0f;
}

T_VNNI512 static void
round_avx512(const float *mu, const float *scale, const float *q, size_t dim, float inv, int8_t *q8)
{
    const __m512 vinv = _mm512_set1_ps(inv), hi = _mm512_set1_ps(127.0f);
    const __m512 lo = _mm512_set1_ps(-127.0f);
    for (size_t d = 0; d < dim; d += 16) {
        __mmask16 k = mask16(dim - d);
        __m512 u = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, q + d), _mm512_maskz_loadu_ps(k, mu + d));
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, scale + d), u), vinv);
        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v); /* NaN -> 0 */
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        _mm_mask_storeu_epi8(q8 + d, k, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
    }
}

/* ---------------------------------------------------------------- dispatch */

static const sx__hsq_kernels k_scalar = { "scalar", dot_scalar, dot_batch_scalar, scan_scalar,
                                          round_scalar };
static const sx__hsq_kernels k_avx2 = { "avx2", dot_avx2, dot_batch_avx2, scan_scalar,
                                        round_scalar };
static const sx__hsq_kernels k_avx2vnni = { "avx2vnni", dot_avx2vnni, dot_batch_avx2vnni,
                                            scan_scalar, round_scalar };
static const sx__hsq_kernels k_avx512vnni = { "avx512vnni", dot_avx512vnni, dot_batch_avx512vnni,
                                              scan_avx512, round_avx512 };

/* CPUID feature bit (leaf, subleaf, register 0-3 = EAX..EDX, bit). The VNNI bits are read
 * directly: compilers disagree on __builtin_cpu_supports("avxvnni"). The OS state (YMM/ZMM) was
 * checked by the distance module's tables that each kernel table requires. */
static bool cpu_bit(unsigned leaf, unsigned sub, int reg, unsigned bit)
{
    unsigned r[4] = { 0, 0, 0, 0 };
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]))
        return false;
    return (r[reg] >> bit) & 1u;
}

const sx__hsq_kernels *sx__hsq_kernels_for(const char *isa)
{
    if (!isa || strcmp(isa, "scalar") == 0)
        return &k_scalar;
    /* the distance module checked AVX2/AVX-512 CPU and OS support for its own tables */
    if (strcmp(isa, "avx2") == 0)
        return sx__dist_avx2() ? &k_avx2 : NULL;
    if (strcmp(isa, "avx2vnni") == 0)
        return sx__dist_avx2() && cpu_bit(7, 1, 0, 4) ? &k_avx2vnni : NULL; /* AVX-VNNI */
    if (strcmp(isa, "avx512vnni") == 0)
        return sx__dist_avx512() && cpu_bit(7, 0, 2, 11) ? &k_avx512vnni : NULL; /* AVX512_VNNI */
    return NULL;
}

static _Atomic(const sx__hsq_kernels *) cached;

const sx__hsq_kernels *sx__hsq_kernels_get(void)
{
    const sx__hsq_kernels *k = atomic_load_explicit(&cached, memory_order_acquire);
    if (k)
        return k;
    const char *isa = sx__dist()->isa;
    k = NULL;
    if (strcmp(isa, "avx512") == 0)
        k = sx__hsq_kernels_for("avx512vnni");
    if (!k && (strcmp(isa, "avx512") == 0 || strcmp(isa, "avx2") == 0)) {
        k = sx__hsq_kernels_for("avx2vnni");
        if (!k)
            k = sx__hsq_kernels_for("avx2");
    }
    if (!k)
        k = &k_scalar;
    atomic_store_explicit(&cached, k, memory_order_release);
    return k;
}

/* ---------------------------------------------------------------- training, coding */

sx_status sx__hsq_train(sx__hnsw_sq *h)
{
    size_t dim = h->dim, n = h->n;
    float *lo = h->qmin, *hi = h->qscale; /* qscale holds the maxima until the end */
    /* outlier-robust ranges (vector/range.h): fences from evenly spaced rows, then all rows */
    sx__range r;
    sx_status rc = sx__range_init(&r, dim);
    if (rc != SX_OK)
        return rc;
    size_t ns = sx__range_sample_rows(n, dim);
    if (ns > 0)
        rc = sx__range_fence(&r, h->vecs, ns, dim * (n / ns));
    if (rc != SX_OK) {
        sx__range_fini(&r);
        return rc;
    }
    sx__range_observe(&r, h->vecs, n, dim);
    sx__range_finish(&r, lo, hi);
    sx__range_fini(&r);
    for (size_t d = 0; d < dim; d++) {
        if (!(lo[d] <= hi[d])) { /* never observed */
            lo[d] = 0.0f;
            hi[d] = 0.0f;
            continue;
        }
        float s = (hi[d] - lo[d]) / 255.0f;
        /* a range too wide for float (max - min overflows) cannot be coded: treat as constant */
        hi[d] = isfinite(s) ? s : 0.0f;
    }
    sx__hsq_derive(h);
    return SX_OK;
}

void sx__hsq_derive(sx__hnsw_sq *h)
{
    for (size_t d = 0; d < h->dim; d++) {
        float mu = h->metric == SX_METRIC_L2 ? h->qmin[d] + 127.5f * h->qscale[d] : 0.0f;
        h->qmu[d] = mu;
        h->qamu[d] = h->qmin[d] - mu;
    }
}

/* ||x' - mu||^2 of the decoded code; the same function at build and load, so both agree to the
 * bit. */
static float decoded_norm(const sx__hnsw_sq *h, const uint8_t *code)
{
    double s = 0.0;
    for (size_t d = 0; d < h->dim; d++) {
        double v = (double)h->qamu[d] + (double)h->qscale[d] * (double)code[d];
        s += v * v;
    }
    return (float)s;
}

/* x's code misrepresents it by more than a step somewhere (a clamped outlier, or a non-finite
 * value): see sx__sq8_clipped, the same rule. */
static bool clipped(const sx__hnsw_sq *h, const uint8_t *code, const float *x)
{
    for (size_t d = 0; d < h->dim; d++) {
        float s = h->qscale[d];
        if (!(fabsf(x[d] - (h->qmin[d] + (float)code[d] * s)) <= s))
            return true;
    }
    return false;
}

void sx__hsq_set_norm(sx__hnsw_sq *h, uint32_t id, const float *x)
{
    uint8_t *r = h->rec + (size_t)id * h->rec_bytes;
    float nv = h->metric == SX_METRIC_L2 ? decoded_norm(h, r) : 0.0f;
    if (clipped(h, r, x))
        nv = NAN; /* the code distance is NaN: searches use the exact one (sx__hsq_fix) */
    memcpy(r + h->norm_off, &nv, sizeof nv);
}

void sx__hsq_encode(sx__hnsw_sq *h, uint32_t id, const float *x)
{
    uint8_t *r = h->rec + (size_t)id * h->rec_bytes;
    for (size_t d = 0; d < h->dim; d++) {
        float s = h->qscale[d], v = x[d];
        float c = s > 0.0f && isfinite(v) ? rintf((v - h->qmin[d]) / s) : 0.0f;
        c = c < 0.0f ? 0.0f : (c > 255.0f ? 255.0f : c);
        r[d] = (uint8_t)c;
    }
    sx__hsq_set_norm(h, id, x);
}

void sx__hsq_prepare(const sx__hnsw_sq *h, const float *q, sx__hsq_query *out)
{
    size_t dim = h->dim, padded = sx__hsq_q8_bytes(dim);
    float B, qn;
    float m = h->kern->scan(h->qmu, h->qamu, h->qscale, q, dim, &B, &qn);
    /* m == 0 (query at the centre, constant data, or a non-finite query): every code distance
     * equals c0 and the re-rank decides */
    float t = m > 0.0f ? m / 127.0f : 0.0f;
    float inv = m > 0.0f ? 127.0f / m : 0.0f;
    h->kern->round(h->qmu, h->qscale, q, dim, inv, out->q8);
    memset(out->q8 + dim, 0, padded - dim);
    if (h->metric == SX_METRIC_L2) {
        out->c0 = qn - 2.0f * B;
        out->c1 = -2.0f * t;
    } else {
        out->c0 = -B;
        out->c1 = -t;
    }
}
