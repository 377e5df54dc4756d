/*
 * quant_sq8.c: 8-bit per-dimension scalar quantization (see quant_sq8.h for the maths).
 *
 * Design.
 * - Per-dimension ranges (FAISS's QT_8bit), min/max but robust to outliers (vector/range.h):
 *   FAISS's RS_minmax let one row of 1e6 among values in [0, 1] give every row of IVF_SQ8 the
 *   same code (recall@10 0.99 -> 0.001, issue 13). Values outside the range clamp to 0 or 255,
 *   and sx__sq8_clipped reports the rows that have such values.
 * - The distance kernels work on the codes directly: a byte is widened to int32 and converted to
 *   float in registers (vpmovzxbd + vcvtdq2ps), then one FMA forms prep - c*scale and a second
 *   accumulates the square. Per 8 dimensions that reads 8 code bytes instead of 32 vector bytes,
 *   which is the point of SQ8 when the data does not fit in cache.
 * - The SIMD kernels live in this file as __attribute__((target(...))) functions (no per-file
 *   -m flags needed) and are only called after the dispatch checked the CPU.
 *
 * Invariants.
 *   1. After sx__sq8_finish, vmin and scale are finite and scale >= 0 (also enforced on load).
 *   2. Every kernel table computes the same sums as the scalar one up to reassociation
 *      (tests/unit/test_ivf.c compares them).
 *   3. decode(encode(x)) is within scale_d / 2 of x_d for x_d inside the trained range.
 *
 * Thread-safety: the kernel table pointer is resolved once with a benign race (both racers store
 * the same pointer; release/acquire as in dist.c). Everything else is pure.
 */
#include "vector/quant_sq8.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"
#include "vector/dist.h"
#include "vector/range.h"

/* ---------------------------------------------------------------- scalar kernels */

static float sq8_l2_scalar(const float *prep, const float *scale, const uint8_t *code, size_t dim)
{
    float s0 = 0.0f, s1 = 0.0f;
    size_t d = 0;
    for (; d + 2 <= dim; d += 2) {
        float e0 = prep[d] - (float)code[d] * scale[d];
        float e1 = prep[d + 1] - (float)code[d + 1] * scale[d + 1];
        s0 += e0 * e0;
        s1 += e1 * e1;
    }
    for (; d < dim; d++) {
        float e = prep[d] - (float)code[d] * scale[d];
        s0 += e * e;
    }
    return s0 + s1;
}

static float sq8_dot_scalar(const float *prep, const uint8_t *code, size_t dim)
{
    float s0 = 0.0f, s1 = 0.0f;
    size_t d = 0;
    for (; d + 2 <= dim; d += 2) {
        s0 += prep[d] * (float)code[d];
        s1 += prep[d + 1] * (float)code[d + 1];
    }
    for (; d < dim; d++)
        s0 += prep[d] * (float)code[d];
    return s0 + s1;
}

/* ---------------------------------------------------------------- AVX2 + FMA */

__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static inline __m256 widen8(const uint8_t *p)
{
    __m128i c = _mm_loadl_epi64((const __m128i *)(const void *)p);
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(c));
}

__attribute__((target("avx2,fma"))) static float
sq8_l2_avx2(const float *prep, const float *scale, const uint8_t *code, size_t dim)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t d = 0;
    for (; d + 16 <= dim; d += 16) {
        __m256 e0 = _mm256_fnmadd_ps(widen8(code + d), _mm256_loadu_ps(scale + d),
                                     _mm256_loadu_ps(prep + d));
        __m256 e1 = _mm256_fnmadd_ps(widen8(code + d + 8), _mm256_loadu_ps(scale + d + 8),
                                     _mm256_loadu_ps(prep + d + 8));
        a0 = _mm256_fmadd_ps(e0, e0, a0);
        a1 = _mm256_fmadd_ps(e1, e1, a1);
    }
    if (d + 8 <= dim) {
        __m256 e0 = _mm256_fnmadd_ps(widen8(code + d), _mm256_loadu_ps(scale + d),
                                     _mm256_loadu_ps(prep + d));
        a0 = _mm256_fmadd_ps(e0, e0, a0);
        d += 8;
    }
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; d < dim; d++) {
        float e = prep[d] - (float)code[d] * scale[d];
        s += e * e;
    }
    return s;
}

__attribute__((target("avx2,fma"))) static float
sq8_dot_avx2(const float *prep, const uint8_t *code, size_t dim)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t d = 0;
    for (; d + 16 <= dim; d += 16) {
        a0 = _mm256_fmadd_ps(widen8(code + d), _mm256_loadu_ps(prep + d), a0);
        a1 = _mm256_fmadd_ps(widen8(code + d + 8), _mm256_loadu_ps(prep + d + 8), a1);
    }
    if (d + 8 <= dim) {
        a0 = _mm256_fmadd_ps(widen8(code + d), _mm256_loadu_ps(prep + d), a0);
        d += 8;
    }
    float s = hsum256(_mm256_add_ps(a0, a1));
    for (; d < dim; d++)
        s += prep[d] * (float)code[d];
    return s;
}

/* ---------------------------------------------------------------- AVX-512F */

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

T512 static inline __m512 widen16(const uint8_t *p)
{
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c));
}

T512 static inline __m512 widen16_masked(const uint8_t *p, __mmask16 m)
{
    __m128i c = _mm_maskz_loadu_epi8(m, p);
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(c));
}

T512 static float
sq8_l2_avx512(const float *prep, const float *scale, const uint8_t *code, size_t dim)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    size_t d = 0;
    for (; d + 32 <= dim; d += 32) {
        __m512 e0 = _mm512_fnmadd_ps(widen16(code + d), _mm512_loadu_ps(scale + d),
                                     _mm512_loadu_ps(prep + d));
        __m512 e1 = _mm512_fnmadd_ps(widen16(code + d + 16), _mm512_loadu_ps(scale + d + 16),
                                     _mm512_loadu_ps(prep + d + 16));
        a0 = _mm512_fmadd_ps(e0, e0, a0);
        a1 = _mm512_fmadd_ps(e1, e1, a1);
    }
    for (; d < dim; d += 16) {
        size_t left = dim - d;
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        __m512 e0 =
            _mm512_fnmadd_ps(widen16_masked(code + d, m), _mm512_maskz_loadu_ps(m, scale + d),
                             _mm512_maskz_loadu_ps(m, prep + d));
        a0 = _mm512_fmadd_ps(e0, e0, a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

T512 static float sq8_dot_avx512(const float *prep, const uint8_t *code, size_t dim)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    size_t d = 0;
    for (; d + 32 <= dim; d += 32) {
        a0 = _mm512_fmadd_ps(widen16(code + d), _mm512_loadu_ps(prep + d), a0);
        a1 = _mm512_fmadd_ps(widen16(code + d + 16), _mm512_loadu_ps(prep + d + 16), a1);
    }
    for (; d < dim; d += 16) {
        size_t left = dim - d;
        __mmask16 m = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
        a0 = _mm512_fmadd_ps(widen16_masked(code + d, m), _mm512_maskz_loadu_ps(m, prep + d), a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

/* ---------------------------------------------------------------- dispatch */

static const sx__sq8_kernels k_scalar = { "scalar", sq8_l2_scalar, sq8_dot_scalar };
static const sx__sq8_kernels k_avx2 = { "avx2", sq8_l2_avx2, sq8_dot_avx2 };
static const sx__sq8_kernels k_avx512 = { "avx512", sq8_l2_avx512, sq8_dot_avx512 };

const sx__sq8_kernels *sx__sq8_kernels_for(const char *isa)
{
    if (!isa || strcmp(isa, "scalar") == 0)
        return &k_scalar;
    /* the distance module already checked CPU and OS support for its tables */
    if (strcmp(isa, "avx2") == 0)
        return sx__dist_avx2() ? &k_avx2 : NULL;
    if (strcmp(isa, "avx512") == 0)
        return sx__dist_avx512() ? &k_avx512 : NULL;
    return NULL;
}

static _Atomic(const sx__sq8_kernels *) cached;

const sx__sq8_kernels *sx__sq8_kernels_get(void)
{
    const sx__sq8_kernels *k = atomic_load_explicit(&cached, memory_order_acquire);
    if (k)
        return k;
    k = sx__sq8_kernels_for(sx__dist()->isa);
    if (!k)
        k = &k_scalar;
    atomic_store_explicit(&cached, k, memory_order_release);
    return k;
}

/* ---------------------------------------------------------------- training, coding */

/* The arrays of a quantizer of dim (no training state). */
static sx_status sq8_alloc(sx__sq8 *sq, size_t dim)
{
    memset(sq, 0, sizeof *sq);
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "SQ8: dim %zu out of range 1..%u", dim, SX_MAX_DIM);
    sq->vmin = sx__malloc_aligned(dim * sizeof(float));
    sq->scale = sx__malloc_aligned(dim * sizeof(float));
    if (!sq->vmin || !sq->scale) {
        sx__sq8_fini(sq);
        return sx__err(SX_ENOMEM, "SQ8: out of memory");
    }
    sq->dim = (uint32_t)dim;
    return SX_OK;
}

sx_status sx__sq8_init(sx__sq8 *sq, size_t dim)
{
    sx_status rc = sq8_alloc(sq, dim);
    if (rc != SX_OK)
        return rc;
    sq->rng = sx__malloc(sizeof *sq->rng);
    if (!sq->rng) {
        sx__sq8_fini(sq);
        return sx__err(SX_ENOMEM, "SQ8: out of memory");
    }
    rc = sx__range_init(sq->rng, dim);
    if (rc != SX_OK) {
        sx__free(sq->rng);
        sq->rng = NULL;
        sx__sq8_fini(sq);
    }
    return rc;
}

sx_status sx__sq8_fence(sx__sq8 *sq, const float *x, size_t ns, size_t stride)
{
    return sq->rng ? sx__range_fence(sq->rng, x, ns, stride) : SX_OK;
}

void sx__sq8_observe(sx__sq8 *sq, const float *x, size_t n, size_t stride)
{
    if (sq->rng)
        sx__range_observe(sq->rng, x, n, stride);
}

void sx__sq8_finish(sx__sq8 *sq)
{
    if (!sq->rng)
        return;
    sx__range_finish(sq->rng, sq->vmin, sq->scale); /* scale holds the maxima until below */
    sx__range_fini(sq->rng);
    sx__free(sq->rng);
    sq->rng = NULL;
    for (size_t d = 0; d < sq->dim; d++) {
        float lo = sq->vmin[d], hi = sq->scale[d];
        if (!(lo <= hi)) { /* never observed */
            sq->vmin[d] = 0.0f;
            sq->scale[d] = 0.0f;
            continue;
        }
        float s = (hi - lo) / 255.0f;
        sq->scale[d] = isfinite(s) ? s : 0.0f;
    }
}

sx_status sx__sq8_train(sx__sq8 *sq, const float *x, size_t n, size_t dim, size_t stride)
{
    sx_status rc = sx__sq8_init(sq, dim);
    if (rc != SX_OK)
        return rc;
    size_t ns = sx__range_sample_rows(n, dim);
    if (ns > 0) {
        rc = sx__sq8_fence(sq, x, ns, stride * (n / ns));
        if (rc != SX_OK) {
            sx__sq8_fini(sq);
            return rc;
        }
    }
    sx__sq8_observe(sq, x, n, stride);
    sx__sq8_finish(sq);
    return SX_OK;
}

void sx__sq8_fini(sx__sq8 *sq)
{
    if (sq->rng) {
        sx__range_fini(sq->rng);
        sx__free(sq->rng);
    }
    sx__free_aligned(sq->vmin);
    sx__free_aligned(sq->scale);
    memset(sq, 0, sizeof *sq);
}

bool sx__sq8_clipped(const sx__sq8 *sq, const float *x, const uint8_t *code)
{
    for (size_t d = 0; d < sq->dim; d++) {
        float s = sq->scale[d];
        /* !(<=) also catches a non-finite value */
        if (!(fabsf(x[d] - (sq->vmin[d] + (float)code[d] * s)) <= s))
            return true;
    }
    return false;
}

void sx__sq8_encode(const sx__sq8 *sq, const float *x, size_t n, size_t stride, uint8_t *codes)
{
    size_t dim = sq->dim;
    for (size_t i = 0; i < n; i++) {
        const float *r = x + i * stride;
        uint8_t *c = codes + i * dim;
        for (size_t d = 0; d < dim; d++) {
            float s = sq->scale[d];
            float t = s > 0.0f ? (r[d] - sq->vmin[d]) / s : 0.0f;
            /* !(t > 0) also catches NaN */
            c[d] = !(t > 0.0f) ? 0 : t >= 255.0f ? 255 : (uint8_t)lrintf(t);
        }
    }
}

void sx__sq8_decode(const sx__sq8 *sq, const uint8_t *code, float *out)
{
    for (size_t d = 0; d < sq->dim; d++)
        out[d] = sq->vmin[d] + (float)code[d] * sq->scale[d];
}

void sx__sq8_prepare(const sx__sq8 *sq, const float *q, sx_metric metric, float *prep, float *bias)
{
    if (metric == SX_METRIC_L2) {
        for (size_t d = 0; d < sq->dim; d++)
            prep[d] = q[d] - sq->vmin[d];
        *bias = 0.0f;
        return;
    }
    float b = 0.0f;
    for (size_t d = 0; d < sq->dim; d++) {
        prep[d] = q[d] * sq->scale[d];
        b += q[d] * sq->vmin[d];
    }
    *bias = b;
}

float sx__sq8_dist(
    const sx__sq8 *sq, sx_metric metric, const float *prep, float bias, const uint8_t *code)
{
    const sx__sq8_kernels *k = sx__sq8_kernels_get();
    if (metric == SX_METRIC_L2)
        return k->l2(prep, sq->scale, code, sq->dim);
    return -(bias + k->dot(prep, code, sq->dim));
}

void sx__sq8_scan(const sx__sq8 *sq,
                  sx_metric metric,
                  const float *prep,
                  float bias,
                  const uint8_t *codes,
                  size_t n,
                  float *out)
{
    const sx__sq8_kernels *k = sx__sq8_kernels_get();
    size_t dim = sq->dim;
    if (metric == SX_METRIC_L2) {
        for (size_t i = 0; i < n; i++)
            out[i] = k->l2(prep, sq->scale, codes + i * dim, dim);
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = -(bias + k->dot(prep, codes + i * dim, dim));
    }
}

/* ---------------------------------------------------------------- serialization */

sx_status sx__sq8_serialize(const sx__sq8 *sq, sx__wbuf *w)
{
    sx__wbuf_u32(w, sq->dim);
    sx__wbuf_f32s(w, sq->vmin, sq->dim);
    sx__wbuf_f32s(w, sq->scale, sq->dim);
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "SQ8: out of memory serializing");
    return SX_OK;
}

sx_status sx__sq8_deserialize(sx__sq8 *sq, sx__rbuf *r, size_t want_dim)
{
    memset(sq, 0, sizeof *sq);
    uint32_t dim = sx__rbuf_u32(r);
    if (!sx__rbuf_ok(r) || dim == 0 || dim > SX_MAX_DIM || (want_dim && dim != want_dim))
        return sx__err(SX_ECORRUPT, "SQ8: bad dim %u", dim);
    if (sx__rbuf_left(r) / 8 < dim)
        return sx__err(SX_ECORRUPT, "SQ8: truncated ranges");
    sx_status rc = sq8_alloc(sq, dim);
    if (rc != SX_OK)
        return rc;
    sx__rbuf_f32s(r, sq->vmin, dim);
    sx__rbuf_f32s(r, sq->scale, dim);
    if (!sx__rbuf_ok(r)) {
        sx__sq8_fini(sq);
        return sx__err(SX_ECORRUPT, "SQ8: truncated ranges");
    }
    for (size_t d = 0; d < dim; d++) {
        if (!isfinite(sq->vmin[d]) || !isfinite(sq->scale[d]) || sq->scale[d] < 0.0f) {
            sx__sq8_fini(sq);
            return sx__err(SX_ECORRUPT, "SQ8: bad range in dimension %zu", d);
        }
    }
    return SX_OK;
}
