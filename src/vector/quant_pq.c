/*
 * quant_pq.c: product quantization with 8-bit codes (Jegou, Douze, Schmid, "Product quantization
 * for nearest neighbor search", IEEE PAMI 2011): training (k-means per sub-space), encoding,
 * decoding, asymmetric distance computation (ADC) tables and scans, and the codebook format.
 *
 * Training. Sub-space j (columns [j*dsub, (j+1)*dsub)) gets ksub = min(256, n) centroids from
 * sx__kmeans_train over the full rows with stride dim (k-means samples at most
 * ksub * SX__PQ_TRAIN_PER_CENTROID of them, seed + j; SX__PQ_TRAIN_ITERS iterations), so no
 * training copy is made here. Fewer
 * than 256 rows: ksub = n, codes stay below ksub. `threads` is unused: the k-means assignment step
 * is OpenBLAS-threaded already, and running sub-spaces in parallel on top of it oversubscribes.
 *
 * Kernels. Both the encoder and the ADC table need, for one sub-vector x, the distances to all
 * ksub centroids of its sub-space. The codebook is kept twice: m x ksub x dsub (decode) and
 * transposed, m x dsub x ksub, so that one SIMD register holds one coordinate of 16 (AVX-512) or
 * 8 (AVX2) consecutive centroids and the distance to 16 centroids is dsub FMAs. The encoder keeps
 * a running (min, index) pair per lane instead of storing the ksub distances.
 * The ADC scan sums m table entries T[j*ksub + code[j]]: with AVX-512 16 sub-spaces per gather
 * (the 16 code bytes widened to 32-bit indices plus j*ksub), with AVX2 8 per gather, else four
 * scalar accumulators. A gather beats permutes here: the table row of one sub-space is 256 floats
 * (16 registers), so a permute-based lookup needs 8 two-register permutes plus blends per 16
 * lookups, while one gather does 16 with the table in L1.
 * The ISA follows sx__dist()'s choice (so SX_SIMD=scalar|avx2 caps it too), resolved once.
 * Results differ between ISAs only by float summation order.
 *
 * Codebook format (sx__pq_serialize; little-endian, written through sx__wbuf):
 *   offset  size            field
 *   0       4               magic 0x51505853 ("SXPQ")
 *   4       4               version (1)
 *   8       4               dim, in [1, SX_MAX_DIM]
 *   12      4               m, divides dim
 *   16      4               ksub, in [1, 256]
 *   20      4*m*ksub*dsub   centroids, m x ksub x dsub float32, all finite
 *   end     4               CRC-32C of the bytes above
 *
 * Invariants:
 *   1. dim = m * dsub, 1 <= ksub <= 256; centroids and centroids_t hold the same values;
 *   2. every code byte produced by sx__pq_encode is < ksub (scans index the table with it
 *      unchecked: codes from outside must be validated by their owner);
 *   3. a deserialized codebook satisfies 1 and has only finite values.
 * Thread-safety: a trained sx__pq is immutable; every function but train/deserialize/fini only
 * reads it.
 */
#include "vector/quant_pq.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "vector/dist.h"
#include "vector/kmeans.h"

#if defined(__x86_64__) && defined(__GNUC__)
# include <immintrin.h>
# define PQ_X86 1
#else
# define PQ_X86 0
#endif

#define PQ_MAGIC   0x51505853u
#define PQ_VERSION 1u
#define PQ_KSUB    256u
/* rows encoded per block: the block's sub-vectors of one sub-space stay in cache while the
 * sub-space's transposed codebook is in L1 */
#define ENC_BLOCK  64u

/* ---------------------------------------------------------------- ISA choice */

enum { ISA_UNSET = -1, ISA_SCALAR = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

static atomic_int isa_cache = ISA_UNSET;

static int isa(void)
{
    int v = atomic_load_explicit(&isa_cache, memory_order_relaxed); /* idempotent init */
    if (v != ISA_UNSET)
        return v;
    const char *name = sx__dist()->isa;
    v = ISA_SCALAR;
#if PQ_X86
    if (strcmp(name, "avx512") == 0)
        v = ISA_AVX512;
    else if (strcmp(name, "avx2") == 0)
        v = ISA_AVX2;
#else
    (void)name;
#endif
    atomic_store_explicit(&isa_cache, v, memory_order_relaxed);
    return v;
}

/* ---------------------------------------------------------------- scalar kernels */

/* out[c] = sum_d (x[d] - ct[d*ksub + c])^2, or -sum_d x[d]*ct[d*ksub + c] when ip. */
static void
sub_dists_scalar(const float *x, const float *ct, size_t dsub, size_t ksub, bool ip, float *out)
{
    for (size_t c = 0; c < ksub; c++)
        out[c] = 0.0f;
    for (size_t d = 0; d < dsub; d++) {
        const float xd = x[d], *row = ct + d * ksub;
        if (ip) {
            for (size_t c = 0; c < ksub; c++)
                out[c] -= xd * row[c];
        } else {
            for (size_t c = 0; c < ksub; c++) {
                float t = xd - row[c];
                out[c] += t * t;
            }
        }
    }
}

/* Nearest centroid (squared L2; ties: lowest index) of x among ksub; scratch holds ksub floats. */
static uint8_t
nearest_scalar(const float *x, const float *ct, size_t dsub, size_t ksub, float *scratch)
{
    sub_dists_scalar(x, ct, dsub, ksub, false, scratch);
    size_t best = 0;
    for (size_t c = 1; c < ksub; c++)
        if (scratch[c] < scratch[best])
            best = c;
    return (uint8_t)best;
}

static float adc_scalar(const float *t, const uint8_t *code, size_t m, size_t ksub)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    size_t j = 0;
    for (; j + 4 <= m; j += 4) {
        s0 += t[j * ksub + code[j]];
        s1 += t[(j + 1) * ksub + code[j + 1]];
        s2 += t[(j + 2) * ksub + code[j + 2]];
        s3 += t[(j + 3) * ksub + code[j + 3]];
    }
    for (; j < m; j++)
        s0 += t[j * ksub + code[j]];
    return (s0 + s1) + (s2 + s3);
}

#if PQ_X86
/* The distance to centroid c alone (tails of the SIMD kernels). */
static float
sub_dist_one(const float *x, const float *ct, size_t dsub, size_t ksub, size_t c, bool ip)
{
    float s = 0.0f;
    for (size_t d = 0; d < dsub; d++) {
        float v = ct[d * ksub + c];
        if (ip) {
            s -= x[d] * v;
        } else {
            float t = x[d] - v;
            s += t * t;
        }
    }
    return s;
}

/* ---------------------------------------------------------------- AVX2 kernels */
__attribute__((target("avx2,fma"))) static void
sub_dists_avx2(const float *x, const float *ct, size_t dsub, size_t ksub, bool ip, float *out)
{
    size_t c = 0;
    for (; c + 8 <= ksub; c += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (size_t d = 0; d < dsub; d++) {
            __m256 v = _mm256_loadu_ps(ct + d * ksub + c);
            if (ip) {
                acc = _mm256_fnmadd_ps(_mm256_set1_ps(x[d]), v, acc);
            } else {
                __m256 t = _mm256_sub_ps(_mm256_set1_ps(x[d]), v);
                acc = _mm256_fmadd_ps(t, t, acc);
            }
        }
        _mm256_storeu_ps(out + c, acc);
    }
    for (; c < ksub; c++)
        out[c] = sub_dist_one(x, ct, dsub, ksub, c, ip);
}

__attribute__((target("avx2,fma"))) static uint8_t
nearest_avx2(const float *x, const float *ct, size_t dsub, size_t ksub, float *scratch)
{
    sub_dists_avx2(x, ct, dsub, ksub, false, scratch);
    size_t c = 0;
    float bd = __builtin_inff();
    size_t best = 0;
    if (ksub >= 8) {
        __m256 vmin = _mm256_loadu_ps(scratch);
        __m256i vidx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), cur = vidx;
        const __m256i step = _mm256_set1_epi32(8);
        for (c = 8; c + 8 <= ksub; c += 8) {
            cur = _mm256_add_epi32(cur, step);
            __m256 v = _mm256_loadu_ps(scratch + c);
            __m256 lt = _mm256_cmp_ps(v, vmin, _CMP_LT_OQ);
            vmin = _mm256_blendv_ps(vmin, v, lt);
            vidx = _mm256_castps_si256(
                _mm256_blendv_ps(_mm256_castsi256_ps(vidx), _mm256_castsi256_ps(cur), lt));
        }
        float mv[8];
        int32_t mi[8];
        _mm256_storeu_ps(mv, vmin);
        _mm256_storeu_si256((__m256i *)(void *)mi, vidx);
        for (int l = 0; l < 8; l++) {
            if (mv[l] < bd || (mv[l] == bd && (size_t)mi[l] < best)) {
                bd = mv[l];
                best = (size_t)mi[l];
            }
        }
    }
    for (; c < ksub; c++) {
        if (scratch[c] < bd) {
            bd = scratch[c];
            best = c;
        }
    }
    return (uint8_t)best;
}

__attribute__((target("avx2,fma"))) static float
adc_avx2(const float *t, const uint8_t *code, size_t m, size_t ksub)
{
    const __m256i off =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)ksub));
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t j = 0;
    const float *tj = t;
    for (; j + 16 <= m; j += 16) {
        __m128i c16 = _mm_loadu_si128((const __m128i *)(const void *)(code + j));
        __m256i i0 = _mm256_add_epi32(_mm256_cvtepu8_epi32(c16), off);
        __m256i i1 = _mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(c16, 8)), off);
        acc0 = _mm256_add_ps(acc0, _mm256_i32gather_ps(tj, i0, 4));
        acc1 = _mm256_add_ps(acc1, _mm256_i32gather_ps(tj + 8 * ksub, i1, 4));
        tj += 16 * ksub;
    }
    for (; j + 8 <= m; j += 8) {
        __m128i c8 = _mm_loadl_epi64((const __m128i *)(const void *)(code + j));
        __m256i i0 = _mm256_add_epi32(_mm256_cvtepu8_epi32(c8), off);
        acc0 = _mm256_add_ps(acc0, _mm256_i32gather_ps(tj, i0, 4));
        tj += 8 * ksub;
    }
    acc0 = _mm256_add_ps(acc0, acc1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    float r = _mm_cvtss_f32(s);
    for (; j < m; j++)
        r += t[j * ksub + code[j]];
    return r;
}

/* ---------------------------------------------------------------- AVX-512 kernels */

__attribute__((target("avx512f,fma"))) static void
sub_dists_avx512(const float *x, const float *ct, size_t dsub, size_t ksub, bool ip, float *out)
{
    size_t c = 0;
    for (; c + 16 <= ksub; c += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (size_t d = 0; d < dsub; d++) {
            __m512 v = _mm512_loadu_ps(ct + d * ksub + c);
            if (ip) {
                acc = _mm512_fnmadd_ps(_mm512_set1_ps(x[d]), v, acc);
            } else {
                __m512 t = _mm512_sub_ps(_mm512_set1_ps(x[d]), v);
                acc = _mm512_fmadd_ps(t, t, acc);
            }
        }
        _mm512_storeu_ps(out + c, acc);
    }
    for (; c < ksub; c++)
        out[c] = sub_dist_one(x, ct, dsub, ksub, c, ip);
}

__attribute__((target("avx512f,fma"))) static uint8_t
nearest_avx512(const float *x, const float *ct, size_t dsub, size_t ksub, float *scratch)
{
    if (ksub < 16 || ksub % 16 != 0)
        return nearest_avx2(x, ct, dsub, ksub, scratch);
    __m512 vmin = _mm512_set1_ps(__builtin_inff());
    __m512i vidx = _mm512_setzero_si512();
    __m512i cur = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    for (size_t c = 0; c < ksub; c += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (size_t d = 0; d < dsub; d++) {
            __m512 t = _mm512_sub_ps(_mm512_set1_ps(x[d]), _mm512_loadu_ps(ct + d * ksub + c));
            acc = _mm512_fmadd_ps(t, t, acc);
        }
        __mmask16 lt = _mm512_cmp_ps_mask(acc, vmin, _CMP_LT_OQ);
        vmin = _mm512_mask_mov_ps(vmin, lt, acc);
        vidx = _mm512_mask_mov_epi32(vidx, lt, cur);
        cur = _mm512_add_epi32(cur, step);
    }
    float mv = _mm512_reduce_min_ps(vmin);
    __mmask16 eq = _mm512_cmp_ps_mask(vmin, _mm512_set1_ps(mv), _CMP_EQ_OQ);
    if (eq == 0) /* all lanes NaN: fall back to centroid 0 like the scalar loop */
        return 0;
    return (uint8_t)_mm512_mask_reduce_min_epi32(eq, vidx);
}

__attribute__((target("avx512f"))) static float
adc_avx512(const float *t, const uint8_t *code, size_t m, size_t ksub)
{
    const __m512i off =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int)ksub));
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    size_t j = 0;
    const float *tj = t;
    for (; j + 32 <= m; j += 32) {
        __m512i i0 = _mm512_add_epi32(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(code + j))), off);
        __m512i i1 = _mm512_add_epi32(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(code + j + 16))),
            off);
        acc0 = _mm512_add_ps(acc0, _mm512_i32gather_ps(i0, tj, 4));
        acc1 = _mm512_add_ps(acc1, _mm512_i32gather_ps(i1, tj + 16 * ksub, 4));
        tj += 32 * ksub;
    }
    for (; j + 16 <= m; j += 16) {
        __m512i i0 = _mm512_add_epi32(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(code + j))), off);
        acc0 = _mm512_add_ps(acc0, _mm512_i32gather_ps(i0, tj, 4));
        tj += 16 * ksub;
    }
    if (j + 8 <= m) {
        /* 8 more sub-spaces: the low half of a masked gather */
        __m512i i0 = _mm512_add_epi32(
            _mm512_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(code + j))), off);
        __m512 g = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0x00FF, i0, tj, 4);
        acc0 = _mm512_add_ps(acc0, g);
        j += 8;
    }
    float r = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; j < m; j++)
        r += t[j * ksub + code[j]];
    return r;
}
#endif

/* ---------------------------------------------------------------- dispatch helpers */

static void
sub_dists(int level, const float *x, const float *ct, size_t dsub, size_t ksub, bool ip, float *out)
{
#if PQ_X86
    if (level == ISA_AVX512 && ksub % 16 == 0) {
        sub_dists_avx512(x, ct, dsub, ksub, ip, out);
        return;
    }
    if (level >= ISA_AVX2) {
        sub_dists_avx2(x, ct, dsub, ksub, ip, out);
        return;
    }
#else
    (void)level;
#endif
    sub_dists_scalar(x, ct, dsub, ksub, ip, out);
}

static uint8_t
nearest(int level, const float *x, const float *ct, size_t dsub, size_t ksub, float *scratch)
{
#if PQ_X86
    if (level == ISA_AVX512)
        return nearest_avx512(x, ct, dsub, ksub, scratch);
    if (level == ISA_AVX2)
        return nearest_avx2(x, ct, dsub, ksub, scratch);
#else
    (void)level;
#endif
    return nearest_scalar(x, ct, dsub, ksub, scratch);
}

/* ---------------------------------------------------------------- life cycle */

static void transpose(sx__pq *pq)
{
    size_t ks = pq->ksub, ds = pq->dsub;
    for (size_t j = 0; j < pq->m; j++) {
        const float *c = pq->centroids + j * ks * ds;
        float *t = pq->centroids_t + j * ks * ds;
        for (size_t k = 0; k < ks; k++)
            for (size_t d = 0; d < ds; d++)
                t[d * ks + k] = c[k * ds + d];
    }
}

/* Validates the shape and allocates both codebooks. */
static sx_status pq_alloc(sx__pq *pq, size_t dim, size_t m, size_t ksub, sx_status bad)
{
    memset(pq, 0, sizeof *pq);
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(bad, "PQ: dim %zu out of range [1, %u]", dim, SX_MAX_DIM);
    if (m == 0 || m > dim || dim % m != 0)
        return sx__err(bad, "PQ: m (%zu) must divide dim (%zu)", m, dim);
    if (ksub == 0 || ksub > PQ_KSUB)
        return sx__err(bad, "PQ: ksub %zu out of range [1, %u]", ksub, PQ_KSUB);
    size_t floats = m * ksub * (dim / m);
    pq->centroids = sx__malloc_aligned(floats * sizeof(float));
    pq->centroids_t = sx__malloc_aligned(floats * sizeof(float));
    if (!pq->centroids || !pq->centroids_t) {
        sx__pq_fini(pq);
        return sx__err(SX_ENOMEM, "PQ: cannot allocate a %zu x %zu codebook", m, ksub);
    }
    pq->dim = (uint32_t)dim;
    pq->m = (uint32_t)m;
    pq->dsub = (uint32_t)(dim / m);
    pq->ksub = (uint32_t)ksub;
    return SX_OK;
}

sx_status sx__pq_train(
    sx__pq *pq, const float *x, size_t n, size_t dim, uint32_t m, uint64_t seed, uint32_t threads)
{
    (void)threads;
    if (n == 0 || !x) {
        memset(pq, 0, sizeof *pq);
        return sx__err(SX_EINVAL, "PQ: no training rows");
    }
    size_t ksub = n < PQ_KSUB ? n : PQ_KSUB;
    sx_status rc = pq_alloc(pq, dim, m, ksub, SX_EINVAL);
    if (rc != SX_OK)
        return rc;
    size_t dsub = pq->dsub;
    /* One seed for every sub-space: each k-means then samples the same rows, so on a mapped x
     * larger than the page cache the sub-spaces after the first find the sample's pages cached
     * (a seed per sub-space drew other rows each time: m random sweeps of the file) */
    for (size_t j = 0; j < m; j++) {
        sx__kmeans_opts o = { 0 };
        o.k = ksub;
        o.seed = seed + 0x9E3779B97F4A7C15ull;
        o.max_sample = ksub * SX__PQ_TRAIN_PER_CENTROID;
        o.iters = SX__PQ_TRAIN_ITERS;
        rc = sx__kmeans_train(x + j * dsub, n, dsub, dim, &o, pq->centroids + j * ksub * dsub);
        if (rc != SX_OK) {
            sx__pq_fini(pq);
            return rc;
        }
    }
    transpose(pq);
    return SX_OK;
}

void sx__pq_fini(sx__pq *pq)
{
    if (!pq)
        return;
    sx__free_aligned(pq->centroids);
    sx__free_aligned(pq->centroids_t);
    memset(pq, 0, sizeof *pq);
}

size_t sx__pq_memory_bytes(const sx__pq *pq)
{
    return 2 * (size_t)pq->m * pq->ksub * pq->dsub * sizeof(float);
}

/* ---------------------------------------------------------------- encode / decode */

void sx__pq_encode(const sx__pq *pq, const float *x, size_t n, uint8_t *codes)
{
    const int level = isa();
    const size_t m = pq->m, ks = pq->ksub, ds = pq->dsub, dim = pq->dim;
    float scratch[PQ_KSUB];
    for (size_t b = 0; b < n; b += ENC_BLOCK) {
        size_t e = b + ENC_BLOCK < n ? b + ENC_BLOCK : n;
        for (size_t j = 0; j < m; j++) {
            const float *ct = pq->centroids_t + j * ks * ds;
            for (size_t i = b; i < e; i++)
                codes[i * m + j] = nearest(level, x + i * dim + j * ds, ct, ds, ks, scratch);
        }
    }
}

void sx__pq_decode(const sx__pq *pq, const uint8_t *code, float *out)
{
    const size_t ks = pq->ksub, ds = pq->dsub;
    for (size_t j = 0; j < pq->m; j++)
        memcpy(out + j * ds, pq->centroids + (j * ks + code[j]) * ds, ds * sizeof(float));
}

/* ---------------------------------------------------------------- ADC */

void sx__pq_table(const sx__pq *pq, const float *q, sx_metric metric, float *table)
{
    const int level = isa();
    const size_t ks = pq->ksub, ds = pq->dsub;
    const bool ip = metric != SX_METRIC_L2;
    for (size_t j = 0; j < pq->m; j++)
        sub_dists(level, q + j * ds, pq->centroids_t + j * ks * ds, ds, ks, ip, table + j * ks);
}

typedef float (*adc_fn)(const float *t, const uint8_t *code, size_t m, size_t ksub);

static adc_fn adc_for(int level)
{
#if PQ_X86
    if (level == ISA_AVX512)
        return adc_avx512;
    if (level == ISA_AVX2)
        return adc_avx2;
#else
    (void)level;
#endif
    return adc_scalar;
}

void sx__pq_scan(const sx__pq *pq, const float *table, const uint8_t *codes, size_t n, float *out)
{
    const size_t m = pq->m, ks = pq->ksub;
    adc_fn f = adc_for(isa());
    for (size_t i = 0; i < n; i++) {
        if (i + 4 < n)
            __builtin_prefetch(codes + (i + 4) * m, 0, 3);
        out[i] = f(table, codes + i * m, m, ks);
    }
}

void sx__pq_scan_ids(const sx__pq *pq,
                     const float *table,
                     const uint8_t *codes,
                     const uint32_t *ids,
                     size_t n,
                     float *out)
{
    const size_t m = pq->m, ks = pq->ksub;
    adc_fn f = adc_for(isa());
    for (size_t i = 0; i < n; i++)
        __builtin_prefetch(codes + (size_t)ids[i] * m, 0, 3);
    for (size_t i = 0; i < n; i++)
        out[i] = f(table, codes + (size_t)ids[i] * m, m, ks);
}

/* ---------------------------------------------------------------- format */

sx_status sx__pq_serialize(const sx__pq *pq, sx__wbuf *w)
{
    size_t start = w->len;
    sx__wbuf_u32(w, PQ_MAGIC);
    sx__wbuf_u32(w, PQ_VERSION);
    sx__wbuf_u32(w, pq->dim);
    sx__wbuf_u32(w, pq->m);
    sx__wbuf_u32(w, pq->ksub);
    sx__wbuf_f32s(w, pq->centroids, (size_t)pq->m * pq->ksub * pq->dsub);
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "PQ: cannot grow the serialization buffer");
    sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "PQ: cannot grow the serialization buffer");
    return SX_OK;
}

sx_status sx__pq_deserialize(sx__pq *pq, sx__rbuf *r)
{
    memset(pq, 0, sizeof *pq);
    size_t start = r->off;
    uint32_t magic = sx__rbuf_u32(r), version = sx__rbuf_u32(r);
    uint32_t dim = sx__rbuf_u32(r), m = sx__rbuf_u32(r), ksub = sx__rbuf_u32(r);
    if (!sx__rbuf_ok(r))
        return sx__err(SX_ECORRUPT, "PQ codebook: truncated header");
    if (magic != PQ_MAGIC)
        return sx__err(SX_ECORRUPT, "PQ codebook: bad magic 0x%08x", magic);
    if (version != PQ_VERSION)
        return sx__err(SX_ECORRUPT, "PQ codebook: unsupported version %u", version);
    if (dim == 0 || dim > SX_MAX_DIM || m == 0 || m > dim || dim % m != 0 || ksub == 0 ||
        ksub > PQ_KSUB)
        return sx__err(SX_ECORRUPT, "PQ codebook: bad shape dim=%u m=%u ksub=%u", dim, m, ksub);
    size_t floats = (size_t)ksub * dim;
    if (sx__rbuf_left(r) < floats * 4 + 4)
        return sx__err(SX_ECORRUPT, "PQ codebook: truncated (%zu of %zu bytes)", sx__rbuf_left(r),
                       floats * 4 + 4);
    const uint8_t *body = sx__rbuf_bytes(r, floats * 4);
    uint32_t crc = sx__rbuf_u32(r);
    if (!body || !sx__rbuf_ok(r))
        return sx__err(SX_ECORRUPT, "PQ codebook: truncated");
    if (sx__crc32c(0, r->p + start, (size_t)(body - r->p) + floats * 4 - start) != crc)
        return sx__err(SX_ECORRUPT, "PQ codebook: checksum mismatch");
    sx_status rc = pq_alloc(pq, dim, m, ksub, SX_ECORRUPT);
    if (rc != SX_OK)
        return rc;
    for (size_t i = 0; i < floats; i++) {
        uint32_t u = sx__le32(body + 4 * i);
        float f;
        memcpy(&f, &u, sizeof f);
        if (!isfinite(f)) {
            sx__pq_fini(pq);
            return sx__err(SX_ECORRUPT, "PQ codebook: non-finite centroid value at %zu", i);
        }
        pq->centroids[i] = f;
    }
    transpose(pq);
    return SX_OK;
}
