/*
 * kmeans.c: k-means for the IVF coarse quantizer and the PQ codebooks (see kmeans.h).
 *
 * Algorithm. Lloyd's algorithm (S. Lloyd, "Least squares quantization in PCM", 1982):
 *   0. Sample: ns = min(n, max_sample) rows drawn without replacement (Knuth's Algorithm S,
 *      sorted so the copy reads x forwards), then shuffled (Fisher-Yates) and copied into one
 *      contiguous 64-byte aligned block S (ns x dim). The shuffle makes every prefix of S a
 *      uniform random subset, which the seeding uses.
 *   1. Seed k centroids: k-means++ (Arthur & Vassilvitskii, SODA 2007, D^2 sampling) over the
 *      first P = min(ns, 64 k) rows of S when k <= 256 and k * P * dim <= 2^28; otherwise the
 *      first k rows of S (k distinct random rows, FAISS's default). Why: k-means++ makes k
 *      sequential passes over P rows (memory-bound SGEMV), and it pays off only in low
 *      dimensions. Measured (mean of 5 seeds, 10k BIGANN rows): PQ-like sub-spaces of 4 and 8
 *      dimensions, k = 256, 25 iterations: inertia 15% and 2% lower than random seeding; 128
 *      dimensions, k = 64: equal; Fashion-MNIST (784 dimensions), k = 256: random seeding 0.5%
 *      lower at every iteration count, while k-means++ cost as much as 4 Lloyd iterations.
 *   2. Assign: for a block of rows X, T = -2 X C^T with one cblas_sgemm, then per row the argmin
 *      over j of ||c_j||^2 + T[.,j] (AVX-512 or AVX2 following vector/dist.h's ISA choice; ties
 *      to the lower index in every path, which all compute the same floats). Numerics (issue
 *      13): this expansion cancels for rows far from the origin relative to their spread, as in
 *      FLAT's GEMM path (flat.c), but here it only picks a centroid (a near-tie may go either
 *      way) and is never reported as a distance: IVF scans its lists with the kernels or codes.
 *      Within SX_MAX_SQNORM (sextant.h) no term overflows, so no NaN can steer an assignment.
 *   3. Update: c_j = mean of its rows (float sums).
 *   4. Repair: each empty cluster i takes half of a cluster j chosen largest first by sum of
 *      squared errors ("split the largest", measured by SSE so a cluster of identical rows,
 *      SSE 0, is never split; each cluster is split at most once per iteration, the empty
 *      clusters taking the candidates in decreasing SSE order): c_i = c_j + delta, c_j = c_j -
 *      delta, delta_d = +-(|c_j[d]| + sigma_j)/1024 with random signs and sigma_j the cluster's
 *      rms deviation per dimension. With nothing left to split (fewer distinct rows than k) an
 *      empty cluster copies the largest one's centroid.
 *   Iterate 2-4 `iters` times, stopping early when an assignment changes nothing and the
 *   previous iteration repaired nothing (the centroids are then a fixed point).
 *
 * Invariants.
 *   1. Deterministic: every random choice comes from one splitmix64 stream seeded by opts.seed;
 *      no step depends on thread timing (SGEMM's per-element summation order is fixed by the
 *      OpenBLAS kernel, not by its thread count).
 *   2. The caller's centroid buffer is written once, on success.
 *   3. Every allocation is bounded by sx__kmeans_train_bytes(n, dim, k, max_sample).
 *
 * Cost per iteration: 2 ns k dim flops in SGEMM + ns k adds/compares in the argmin + ns dim in
 * the update. For PQ sub-quantizers (k = 256, dim = dsub = 4..16) the argmin is as costly as the
 * SGEMM, hence its SIMD path.
 *
 * Thread-safety: pure. SGEMM uses OpenBLAS's threads; the rest runs on the calling thread.
 */
#include "vector/kmeans.h"

#include <cblas.h>
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"
#include "vector/dist.h"

/* SGEMM output tile: at most this many floats (1 MiB), at least one row. */
#define TILE_FLOATS ((size_t)1 << 18)
#define SPLIT_EPS   (1.0f / 1024.0f)

/* ---------------------------------------------------------------- random numbers */

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, passes BigCrush, trivially seeded. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 bits */
static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* uniform in [0, n), n >= 1 (Lemire's multiply-shift; the bias is < n / 2^64) */
static size_t rng_below(uint64_t *s, size_t n)
{
    return (size_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

void sx__kmeans_sample_rows(size_t n, size_t ns, uint64_t seed, uint32_t *rows)
{
    uint64_t s = seed ^ 0x6B6D65616E73ull; /* "kmeans" */
    size_t need = ns, t = 0;
    for (size_t i = 0; i < n && need > 0; i++) {
        /* select row i with probability need / (n - i) */
        if ((double)(n - i) * rng_unit(&s) < (double)need) {
            rows[t++] = (uint32_t)i;
            need--;
        }
    }
}

/* ---------------------------------------------------------------- argmin kernels */

typedef uint32_t (*argmin_fn)(const float *t, const float *cn, size_t k, float *best);

/* argmin over j of t[j] + cn[j]; ties to the lower j; *best = the minimum. */
static uint32_t argmin_scalar(const float *t, const float *cn, size_t k, float *best)
{
    float b = INFINITY;
    uint32_t bi = 0;
    for (size_t j = 0; j < k; j++) {
        float v = t[j] + cn[j];
        if (v < b) {
            b = v;
            bi = (uint32_t)j;
        }
    }
    *best = b;
    return bi;
}

/* Two independent (value, index) accumulators of 8 lanes; each lane keeps its first minimum,
 * and the final reduction takes the lowest index among equal minima, so the answer equals the
 * scalar one exactly. */
__attribute__((target("avx2,fma"))) static uint32_t
argmin_avx2(const float *t, const float *cn, size_t k, float *best)
{
    float b = INFINITY;
    uint32_t bi = 0;
    size_t j = 0;
    if (k >= 16) {
        __m256 b0 = _mm256_set1_ps(INFINITY), b1 = b0;
        __m256i i0 = _mm256_setzero_si256(), i1 = i0;
        __m256i c0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i c1 = _mm256_add_epi32(c0, _mm256_set1_epi32(8));
        const __m256i step = _mm256_set1_epi32(16);
        for (; j + 16 <= k; j += 16) {
            __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(t + j), _mm256_loadu_ps(cn + j));
            __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(t + j + 8), _mm256_loadu_ps(cn + j + 8));
            __m256 l0 = _mm256_cmp_ps(v0, b0, _CMP_LT_OQ);
            __m256 l1 = _mm256_cmp_ps(v1, b1, _CMP_LT_OQ);
            b0 = _mm256_blendv_ps(b0, v0, l0);
            b1 = _mm256_blendv_ps(b1, v1, l1);
            i0 = _mm256_blendv_epi8(i0, c0, _mm256_castps_si256(l0));
            i1 = _mm256_blendv_epi8(i1, c1, _mm256_castps_si256(l1));
            c0 = _mm256_add_epi32(c0, step);
            c1 = _mm256_add_epi32(c1, step);
        }
        float vals[16];
        uint32_t ids[16];
        _mm256_storeu_ps(vals, b0);
        _mm256_storeu_ps(vals + 8, b1);
        _mm256_storeu_si256((__m256i *)(void *)ids, i0);
        _mm256_storeu_si256((__m256i *)(void *)(ids + 8), i1);
        for (int l = 0; l < 16; l++) {
            if (vals[l] < b || (vals[l] == b && ids[l] < bi)) {
                b = vals[l];
                bi = ids[l];
            }
        }
    }
    for (; j < k; j++) {
        float v = t[j] + cn[j];
        if (v < b) {
            b = v;
            bi = (uint32_t)j;
        }
    }
    *best = b;
    return bi;
}

/* The same with 16-lane registers and mask blends. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) static uint32_t
argmin_avx512(const float *t, const float *cn, size_t k, float *best)
{
    float b = INFINITY;
    uint32_t bi = 0;
    size_t j = 0;
    if (k >= 32) {
        __m512 b0 = _mm512_set1_ps(INFINITY), b1 = b0;
        __m512i i0 = _mm512_setzero_si512(), i1 = i0;
        __m512i c0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        __m512i c1 = _mm512_add_epi32(c0, _mm512_set1_epi32(16));
        const __m512i step = _mm512_set1_epi32(32);
        for (; j + 32 <= k; j += 32) {
            __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(t + j), _mm512_loadu_ps(cn + j));
            __m512 v1 = _mm512_add_ps(_mm512_loadu_ps(t + j + 16), _mm512_loadu_ps(cn + j + 16));
            __mmask16 l0 = _mm512_cmp_ps_mask(v0, b0, _CMP_LT_OQ);
            __mmask16 l1 = _mm512_cmp_ps_mask(v1, b1, _CMP_LT_OQ);
            b0 = _mm512_mask_blend_ps(l0, b0, v0);
            b1 = _mm512_mask_blend_ps(l1, b1, v1);
            i0 = _mm512_mask_blend_epi32(l0, i0, c0);
            i1 = _mm512_mask_blend_epi32(l1, i1, c1);
            c0 = _mm512_add_epi32(c0, step);
            c1 = _mm512_add_epi32(c1, step);
        }
        float vals[32];
        uint32_t ids[32];
        _mm512_storeu_ps(vals, b0);
        _mm512_storeu_ps(vals + 16, b1);
        _mm512_storeu_si512((void *)ids, i0);
        _mm512_storeu_si512((void *)(ids + 16), i1);
        for (int l = 0; l < 32; l++) {
            if (vals[l] < b || (vals[l] == b && ids[l] < bi)) {
                b = vals[l];
                bi = ids[l];
            }
        }
    }
    for (; j < k; j++) {
        float v = t[j] + cn[j];
        if (v < b) {
            b = v;
            bi = (uint32_t)j;
        }
    }
    *best = b;
    return bi;
}

static argmin_fn pick_argmin(void)
{
    /* follow the distance kernels' choice (which checked CPU and OS support), so SX_SIMD caps
     * this too */
    const char *isa = sx__dist()->isa;
    if (strcmp(isa, "avx512") == 0)
        return argmin_avx512;
    if (strcmp(isa, "avx2") == 0)
        return argmin_avx2;
    return argmin_scalar;
}

/* ---------------------------------------------------------------- assignment */

typedef struct assigner {
    const float *c; /* k x dim centroids */
    float *cn;      /* k: ||c_j||^2 */
    float *tile;    /* rows_per_tile x k */
    size_t k, dim, rows_per_tile;
    argmin_fn argmin;
} assigner;

static size_t tile_rows(size_t k)
{
    size_t r = TILE_FLOATS / k;
    return r ? r : 1;
}

static sx_status assigner_init(assigner *a, const float *c, size_t k, size_t dim)
{
    a->c = c;
    a->k = k;
    a->dim = dim;
    a->rows_per_tile = tile_rows(k);
    a->argmin = pick_argmin();
    a->cn = sx__malloc_aligned(k * sizeof(float));
    a->tile = sx__malloc_aligned(a->rows_per_tile * k * sizeof(float));
    if (!a->cn || !a->tile) {
        sx__free_aligned(a->cn);
        sx__free_aligned(a->tile);
        return sx__err(SX_ENOMEM, "k-means: cannot allocate a %zu x %zu distance tile",
                       a->rows_per_tile, k);
    }
    return SX_OK;
}

static void assigner_norms(assigner *a)
{
    for (size_t j = 0; j < a->k; j++)
        a->cn[j] = sx__norm2(a->c + j * a->dim, a->dim);
}

static void assigner_fini(assigner *a)
{
    sx__free_aligned(a->cn);
    sx__free_aligned(a->tile);
}

/* Assigns rows [0,n) of x (stride floats apart): assign[i], and best[i] = min_j ||c_j||^2 -
 * 2 x_i.c_j (add ||x_i||^2 for the squared distance). */
static void
assign_rows(assigner *a, const float *x, size_t n, size_t stride, uint32_t *assign, float *best)
{
    for (size_t i0 = 0; i0 < n; i0 += a->rows_per_tile) {
        size_t rows = n - i0 < a->rows_per_tile ? n - i0 : a->rows_per_tile;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)a->k, (int)a->dim,
                    -2.0f, x + i0 * stride, (int)stride, a->c, (int)a->dim, 0.0f, a->tile,
                    (int)a->k);
        for (size_t r = 0; r < rows; r++) {
            float b;
            assign[i0 + r] = a->argmin(a->tile + r * a->k, a->cn, a->k, &b);
            best[i0 + r] = b;
        }
    }
}

static sx_status check_args(size_t n, size_t dim, size_t stride, size_t k)
{
    if (k == 0)
        return sx__err(SX_EINVAL, "k-means: k must be >= 1");
    if (dim == 0 || dim > INT_MAX || stride < dim || stride > INT_MAX)
        return sx__err(SX_EINVAL, "k-means: bad dim %zu / stride %zu", dim, stride);
    if (k > INT_MAX || n > UINT32_MAX)
        return sx__err(SX_EINVAL, "k-means: %zu rows / %zu clusters exceed the 32-bit range", n, k);
    return SX_OK;
}

sx_status sx__kmeans_assign(const float *x,
                            size_t n,
                            size_t dim,
                            size_t stride,
                            const float *centroids,
                            size_t k,
                            uint32_t *assign,
                            float *dist_out)
{
    sx_status rc = check_args(n, dim, stride, k);
    if (rc != SX_OK || n == 0)
        return rc;
    assigner a;
    rc = assigner_init(&a, centroids, k, dim);
    if (rc != SX_OK)
        return rc;
    float *best = sx__malloc(a.rows_per_tile * sizeof *best);
    if (!best) {
        assigner_fini(&a);
        return sx__err(SX_ENOMEM, "k-means: out of memory");
    }
    assigner_norms(&a);
    for (size_t i0 = 0; i0 < n; i0 += a.rows_per_tile) {
        size_t rows = n - i0 < a.rows_per_tile ? n - i0 : a.rows_per_tile;
        assign_rows(&a, x + i0 * stride, rows, stride, assign + i0, best);
        if (dist_out) {
            for (size_t r = 0; r < rows; r++) {
                float d = sx__norm2(x + (i0 + r) * stride, dim) + best[r];
                dist_out[i0 + r] = d > 0.0f ? d : 0.0f;
            }
        }
    }
    sx__free(best);
    assigner_fini(&a);
    return SX_OK;
}

/* ---------------------------------------------------------------- training */

typedef struct kstate {
    size_t ns, dim, k;
    float *s;                 /* ns x dim sample (aligned) */
    float *xn;                /* ns: ||s_i||^2 */
    uint32_t *assign;         /* ns */
    float *best;              /* ns */
    float *c;                 /* k x dim working centroids (aligned) */
    size_t *count;            /* k */
    double *sse;              /* k */
    struct split_cand *order; /* k: repair scratch */
    uint64_t rng;
} kstate;

static size_t sample_size(size_t n, size_t k, size_t max_sample)
{
    size_t cap = max_sample;
    if (cap == 0)
        cap = k > SIZE_MAX / SX__KMEANS_SAMPLE_PER_CENTROID ? SIZE_MAX
                                                            : k * SX__KMEANS_SAMPLE_PER_CENTROID;
    if (cap < k)
        cap = k;
    return n < cap ? n : cap;
}

static size_t pp_rows(size_t ns, size_t k)
{
    size_t p = k * SX__KMEANS_PP_ROWS_PER_CENTROID;
    return ns < p ? ns : p;
}

static bool use_pp(const sx__kmeans_opts *o, size_t ns, size_t dim)
{
    if (o->init == SX__KMEANS_INIT_PP)
        return true;
    if (o->init == SX__KMEANS_INIT_RANDOM)
        return false;
    return o->k <= SX__KMEANS_PP_MAX_K &&
           (double)o->k * (double)pp_rows(ns, o->k) * (double)dim <= SX__KMEANS_PP_MAX_WORK;
}

uint64_t sx__kmeans_train_bytes(size_t n, size_t dim, size_t k, size_t max_sample)
{
    if (k == 0)
        return 0;
    uint64_t ns = sample_size(n, k, max_sample);
    uint64_t b = ns * 4 /* rows */ + ns * dim * 4 /* S */ + ns * 12 /* xn, assign, best */;
    b += (uint64_t)pp_rows((size_t)ns, k) * 8;                   /* k-means++ distances */
    b += (uint64_t)k * dim * 4 + (uint64_t)k * (4 + 8 + 8 + 16); /* c, cn, count, sse, order */
    b += (uint64_t)tile_rows(k) * (k + 1) * 4 + 256;             /* tile, prev, alignment */
    return b;
}

/* Seeds st->c by k-means++ over the first P rows of the shuffled sample. The distances to each
 * new centroid come from one SGEMV (||x||^2 - 2 x.c + ||c||^2, clamped at 0): for the small
 * dimensions where k-means++ is used this is several times faster than a kernel call per row,
 * and D^2 sampling does not need the last bits. */
static sx_status seed_pp(kstate *st)
{
    size_t p = pp_rows(st->ns, st->k), dim = st->dim;
    float *mind = sx__malloc(p * sizeof *mind);
    float *dot = sx__malloc(p * sizeof *dot);
    if (!mind || !dot) {
        sx__free(mind);
        sx__free(dot);
        return sx__err(SX_ENOMEM, "k-means++: out of memory");
    }
    size_t pick = rng_below(&st->rng, p);
    for (size_t c = 0; c < st->k; c++) {
        if (c > 0) {
            double total = 0.0;
            for (size_t i = 0; i < p; i++)
                total += (double)mind[i];
            if (!(total > 0.0)) {
                /* every row coincides with a chosen centroid: any row will do */
                pick = rng_below(&st->rng, p);
            } else {
                double r = rng_unit(&st->rng) * total, acc = 0.0;
                size_t last_pos = 0;
                pick = p;
                for (size_t i = 0; i < p; i++) {
                    if (mind[i] <= 0.0f)
                        continue;
                    last_pos = i;
                    acc += (double)mind[i];
                    if (acc > r) {
                        pick = i;
                        break;
                    }
                }
                if (pick == p) /* rounding pushed r past the last positive row */
                    pick = last_pos;
            }
        }
        float *cc = st->c + c * dim;
        memcpy(cc, st->s + pick * dim, dim * sizeof(float));
        float cn = st->xn[pick];
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)p, (int)dim, -2.0f, st->s, (int)dim, cc, 1,
                    0.0f, dot, 1);
        for (size_t i = 0; i < p; i++) {
            float d = st->xn[i] + dot[i] + cn;
            d = d > 0.0f ? d : 0.0f;
            if (c == 0 || d < mind[i])
                mind[i] = d;
        }
        mind[pick] = 0.0f; /* exactly, whatever the rounding */
    }
    sx__free(dot);
    sx__free(mind);
    return SX_OK;
}

/* Means of the assigned rows into st->c; empty clusters get zeros (repaired next). */
static void update_centroids(kstate *st)
{
    size_t dim = st->dim;
    memset(st->c, 0, st->k * dim * sizeof(float));
    for (size_t i = 0; i < st->ns; i++) {
        float *c = st->c + (size_t)st->assign[i] * dim;
        const float *x = st->s + i * dim;
        for (size_t d = 0; d < dim; d++)
            c[d] += x[d];
    }
    for (size_t j = 0; j < st->k; j++) {
        if (st->count[j] == 0)
            continue;
        float inv = 1.0f / (float)st->count[j];
        float *c = st->c + j * dim;
        for (size_t d = 0; d < dim; d++)
            c[d] *= inv;
    }
}

typedef struct split_cand {
    double sse;
    uint32_t idx;
} split_cand;

/* larger SSE first, then lower index (a total order: deterministic whatever qsort does) */
static int by_sse_desc(const void *a, const void *b)
{
    const split_cand *x = a, *y = b;
    if (x->sse != y->sse)
        return x->sse > y->sse ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Splits clusters into the empty ones (see the file comment): the empty clusters, in index
 * order, take half of the splittable clusters (count > 1, SSE > 0) in decreasing SSE order, each
 * split at most once per call; empty clusters left over copy the largest cluster's centroid.
 * O(k log k) per call, so many empty clusters at large k stay cheap. Returns how many clusters
 * were split. */
static size_t repair_empty(kstate *st)
{
    split_cand *order = st->order;
    size_t dim = st->dim, k = st->k, nsplit = 0, big = k;
    bool any_empty = false;
    for (size_t t = 0; t < k; t++) {
        if (st->count[t] == 0)
            any_empty = true;
        else if (big == k || st->count[t] > st->count[big])
            big = t;
        if (st->count[t] > 1 && st->sse[t] > 0.0) {
            order[nsplit].sse = st->sse[t];
            order[nsplit++].idx = (uint32_t)t;
        }
    }
    if (!any_empty)
        return 0;
    qsort(order, nsplit, sizeof *order, by_sse_desc);
    size_t next = 0, fixed = 0;
    for (size_t i = 0; i < k; i++) {
        if (st->count[i] != 0)
            continue;
        float *ci = st->c + i * dim;
        if (next == nsplit) {
            /* nothing left to split: duplicate the largest, it stays empty */
            if (big != k)
                memcpy(ci, st->c + big * dim, dim * sizeof(float));
            continue;
        }
        size_t j = order[next++].idx;
        float *cj = st->c + j * dim;
        float sigma = (float)sqrt(st->sse[j] / ((double)st->count[j] * (double)dim));
        uint64_t bits = 0;
        for (size_t d = 0; d < dim; d++) {
            if (d % 64 == 0)
                bits = rng_next(&st->rng);
            float delta = (fabsf(cj[d]) + sigma) * SPLIT_EPS;
            if ((bits >> (d % 64)) & 1u)
                delta = -delta;
            ci[d] = cj[d] + delta;
            cj[d] = cj[d] - delta;
        }
        st->count[i] = st->count[j] / 2;
        st->count[j] -= st->count[i];
        fixed++;
    }
    return fixed;
}

static void kstate_free(kstate *st)
{
    sx__free_aligned(st->s);
    sx__free(st->xn);
    sx__free(st->assign);
    sx__free(st->best);
    sx__free_aligned(st->c);
    sx__free(st->count);
    sx__free(st->sse);
    sx__free(st->order);
}

static bool cancelled(const sx__kmeans_opts *o)
{
    /* relaxed: a stop request needs no ordering with other memory */
    return o->cancel && atomic_load_explicit(o->cancel, memory_order_relaxed);
}

sx_status sx__kmeans_train(
    const float *x, size_t n, size_t dim, size_t stride, const sx__kmeans_opts *o, float *centroids)
{
    sx_status rc = check_args(n, dim, stride, o ? o->k : 0);
    if (rc != SX_OK)
        return rc;
    if (o->k > n)
        return sx__err(SX_EINVAL, "k-means: k = %zu exceeds the %zu training rows", o->k, n);
    kstate st;
    memset(&st, 0, sizeof st);
    st.k = o->k;
    st.dim = dim;
    st.ns = sample_size(n, o->k, o->max_sample);
    st.rng = o->seed ^ 0x243F6A8885A308D3ull;
    size_t ns = st.ns, k = st.k;
    uint32_t iters = o->iters ? o->iters : SX__KMEANS_ITERS_DEF;
    assigner a;
    bool have_assigner = false;
    uint32_t *prev = NULL;
    uint32_t *rows = sx__malloc(ns * sizeof *rows);
    st.s = sx__malloc_aligned(ns * dim * sizeof(float));
    st.xn = sx__malloc(ns * sizeof *st.xn);
    st.assign = sx__malloc(ns * sizeof *st.assign);
    st.best = sx__malloc(ns * sizeof *st.best);
    st.c = sx__malloc_aligned(k * dim * sizeof(float));
    st.count = sx__malloc(k * sizeof *st.count);
    st.sse = sx__malloc(k * sizeof *st.sse);
    st.order = sx__malloc(k * sizeof *st.order);
    if (!rows || !st.s || !st.xn || !st.assign || !st.best || !st.c || !st.count || !st.sse ||
        !st.order) {
        rc = sx__err(SX_ENOMEM, "k-means: cannot allocate a %zu x %zu sample", ns, dim);
        goto out;
    }

    /* 0. sample, shuffle, copy */
    if (ns < n) {
        sx__kmeans_sample_rows(n, ns, rng_next(&st.rng), rows);
    } else {
        for (size_t i = 0; i < ns; i++)
            rows[i] = (uint32_t)i;
    }
    for (size_t i = ns; i > 1; i--) {
        size_t j = rng_below(&st.rng, i);
        uint32_t t = rows[i - 1];
        rows[i - 1] = rows[j];
        rows[j] = t;
    }
    for (size_t i = 0; i < ns; i++) {
        memcpy(st.s + i * dim, x + (size_t)rows[i] * stride, dim * sizeof(float));
        st.xn[i] = sx__norm2(st.s + i * dim, dim);
    }
    sx__free(rows);
    rows = NULL;

    /* 1. seed */
    if (use_pp(o, ns, dim)) {
        rc = seed_pp(&st);
        if (rc != SX_OK)
            goto out;
    } else {
        memcpy(st.c, st.s, k * dim * sizeof(float));
    }
    if (cancelled(o)) {
        rc = sx__err(SX_ECANCELED, "k-means: cancelled");
        goto out;
    }

    rc = assigner_init(&a, st.c, k, dim);
    if (rc != SX_OK)
        goto out;
    have_assigner = true;
    prev = sx__malloc(a.rows_per_tile * sizeof *prev);
    if (!prev) {
        rc = sx__err(SX_ENOMEM, "k-means: out of memory");
        goto out;
    }
    memset(st.assign, 0, ns * sizeof *st.assign);
    size_t repaired = 1; /* forces at least one update */
    for (uint32_t it = 0; it < iters; it++) {
        if (cancelled(o)) {
            rc = sx__err(SX_ECANCELED, "k-means: cancelled");
            goto out;
        }
        /* 2. assign, counting rows whose cluster changed */
        assigner_norms(&a);
        size_t changed = 0;
        for (size_t i0 = 0; i0 < ns; i0 += a.rows_per_tile) {
            size_t r = ns - i0 < a.rows_per_tile ? ns - i0 : a.rows_per_tile;
            memcpy(prev, st.assign + i0, r * sizeof *prev);
            assign_rows(&a, st.s + i0 * dim, r, dim, st.assign + i0, st.best + i0);
            if (it > 0) {
                for (size_t t = 0; t < r; t++)
                    changed += prev[t] != st.assign[i0 + t];
            }
        }
        memset(st.count, 0, k * sizeof *st.count);
        for (size_t j = 0; j < k; j++)
            st.sse[j] = 0.0;
        for (size_t i = 0; i < ns; i++) {
            float d = st.xn[i] + st.best[i];
            st.count[st.assign[i]]++;
            st.sse[st.assign[i]] += d > 0.0f ? (double)d : 0.0;
        }
        if (it > 0 && changed == 0 && repaired == 0)
            break;
        /* 3. update, 4. repair */
        update_centroids(&st);
        repaired = repair_empty(&st);
    }

    if (o->inertia_out) {
        assigner_norms(&a);
        double inertia = 0.0;
        assign_rows(&a, st.s, ns, dim, st.assign, st.best);
        for (size_t i = 0; i < ns; i++) {
            float d = st.xn[i] + st.best[i];
            inertia += d > 0.0f ? (double)d : 0.0;
        }
        *o->inertia_out = inertia;
    }
    memcpy(centroids, st.c, k * dim * sizeof(float));
out:
    if (have_assigner)
        assigner_fini(&a);
    sx__free(rows);
    sx__free(prev);
    kstate_free(&st);
    return rc;
}
