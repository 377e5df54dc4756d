/*
 * dist.c: scalar reference kernels and the run-time ISA dispatch (see dist.h).
 *
 * Design.
 * - One table per ISA (sx__dist_ops: l2sq, ip, nip). The SIMD tables live in dist_avx2.c and
 *   dist_avx512.c, the only files compiled with -mavx2/-mavx512f; they return NULL when the CPU
 *   (or the OS, for the AVX-512 register state) lacks the ISA, so nothing here executes an
 *   instruction the machine does not have. No -march=native anywhere (style.md).
 * - sx__dist() resolves the best table once and caches the pointer. Callers hoist the function
 *   pointer out of their loops (FLAT takes sx__dist_for_metric once per scan), so the per-call
 *   cost is one indirect call, which the branch predictor learns at once.
 * - SX_SIMD=scalar|avx2|avx512 caps the choice; an unknown value is ignored. The variable is read
 *   on the first call only (tests that need another cap use sx__dist_resolve or a child process).
 *
 * Invariants.
 * 1. Every table returns, within float rounding, the same values as the scalar table: the SIMD
 *    kernels only reassociate the sums (tests/unit/test_vector.c checks every dim 1..130 and more).
 * 2. nip(a,b) == -ip(a,b) exactly for the same table (both share one summation order).
 *
 * Thread-safety: all kernels are pure. The cached table pointer is an atomic: two threads that
 * race on the first call both compute the same answer and store the same pointer, so the race is
 * benign; release/acquire is used only so the pattern stays correct if a table ever stops being
 * constant-initialised. The alternative, pthread_once, would add a library dependency here for
 * no gain.
 */
#include "vector/dist.h"

#if defined(__x86_64__) || defined(__i386__)
# include <cpuid.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/half.h"
#include "vector/dist_bits.h"

/* ---------------------------------------------------------------- scalar reference */

/* Four partial sums: still obviously correct, and the compiler may keep them in one SSE register
 * on machines where this is the table in use. */
static float dist_l2sq_f32_scalar(const float *a, const void *bv, size_t dim)
{
    const float *b = bv;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    size_t i = 0;
    for (; i + 4 <= dim; i += 4) {
        float d0 = a[i] - b[i], d1 = a[i + 1] - b[i + 1];
        float d2 = a[i + 2] - b[i + 2], d3 = a[i + 3] - b[i + 3];
        s0 += d0 * d0;
        s1 += d1 * d1;
        s2 += d2 * d2;
        s3 += d3 * d3;
    }
    for (; i < dim; i++) {
        float d = a[i] - b[i];
        s0 += d * d;
    }
    return (s0 + s1) + (s2 + s3);
}

static inline float ip_scalar(const float *a, const float *b, size_t dim)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    size_t i = 0;
    for (; i + 4 <= dim; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < dim; i++)
        s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static float dist_ip_f32_scalar(const float *a, const void *b, size_t dim)
{
    return ip_scalar(a, b, dim);
}

static float dist_nip_f32_scalar(const float *a, const void *b, size_t dim)
{
    return -ip_scalar(a, b, dim);
}

/* float16 / bfloat16 rows: the same four partial sums over the widened values, 64 values at a
 * time through a stack buffer (the widening is exact, so these equal the float32 kernels on
 * the widened row bit for bit). */
#define WIDEN_BLOCK 64

static float l2sq_u16_scalar(const float *a, const uint16_t *b, size_t dim, bool bf)
{
    float s = 0.0f, buf[WIDEN_BLOCK];
    for (size_t i = 0; i < dim; i += WIDEN_BLOCK) {
        size_t m = dim - i < WIDEN_BLOCK ? dim - i : WIDEN_BLOCK;
        for (size_t j = 0; j < m; j++)
            buf[j] = bf ? sx__bf16_to_f32(b[i + j]) : sx__f16_to_f32(b[i + j]);
        s += dist_l2sq_f32_scalar(a + i, buf, m);
    }
    return s;
}

static float ip_u16_scalar(const float *a, const uint16_t *b, size_t dim, bool bf)
{
    float s = 0.0f, buf[WIDEN_BLOCK];
    for (size_t i = 0; i < dim; i += WIDEN_BLOCK) {
        size_t m = dim - i < WIDEN_BLOCK ? dim - i : WIDEN_BLOCK;
        for (size_t j = 0; j < m; j++)
            buf[j] = bf ? sx__bf16_to_f32(b[i + j]) : sx__f16_to_f32(b[i + j]);
        s += ip_scalar(a + i, buf, m);
    }
    return s;
}

static float dist_l2sq_f16_scalar(const float *a, const void *b, size_t dim)
{
    return l2sq_u16_scalar(a, b, dim, false);
}

static float dist_ip_f16_scalar(const float *a, const void *b, size_t dim)
{
    return ip_u16_scalar(a, b, dim, false);
}

static float dist_nip_f16_scalar(const float *a, const void *b, size_t dim)
{
    return -ip_u16_scalar(a, b, dim, false);
}

static float dist_l2sq_bf16_scalar(const float *a, const void *b, size_t dim)
{
    return l2sq_u16_scalar(a, b, dim, true);
}

static float dist_ip_bf16_scalar(const float *a, const void *b, size_t dim)
{
    return ip_u16_scalar(a, b, dim, true);
}

static float dist_nip_bf16_scalar(const float *a, const void *b, size_t dim)
{
    return -ip_u16_scalar(a, b, dim, true);
}

static void f16_to_f32_scalar(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = sx__f16_to_f32(in[i]);
}

static void bf16_to_f32_scalar(const uint16_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = sx__bf16_to_f32(in[i]);
}

static float hamming_scalar(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    return sx__hamming_words(a, b, nbytes);
}

static float jaccard_scalar(const uint8_t *a, const uint8_t *b, size_t nbytes)
{
    return sx__jaccard_words(a, b, nbytes);
}

static void
hamming_n_scalar(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    sx__hamming_words_n(q, rows, n, nbytes, out);
}

static void
jaccard_n_scalar(const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out)
{
    sx__jaccard_words_n(q, rows, n, nbytes, out);
}

static const sx__dist_ops scalar_ops = {
    .isa = "scalar",
    .l2sq = dist_l2sq_f32_scalar,
    .ip = dist_ip_f32_scalar,
    .nip = dist_nip_f32_scalar,
    .l2sq_f16 = dist_l2sq_f16_scalar,
    .ip_f16 = dist_ip_f16_scalar,
    .nip_f16 = dist_nip_f16_scalar,
    .l2sq_bf16 = dist_l2sq_bf16_scalar,
    .ip_bf16 = dist_ip_bf16_scalar,
    .nip_bf16 = dist_nip_bf16_scalar,
    .hamming = hamming_scalar,
    .jaccard = jaccard_scalar,
    .hamming_n = hamming_n_scalar,
    .jaccard_n = jaccard_n_scalar,
    .f16_to_f32 = f16_to_f32_scalar,
    .bf16_to_f32 = bf16_to_f32_scalar,
};

const sx__dist_ops *sx__dist_scalar(void)
{
    return &scalar_ops;
}

/* ---------------------------------------------------------------- dispatch */

int sx__cpu_has_f16c(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return (int)((c >> 29) & 1u);
#else
    return 0;
#endif
}

const sx__dist_ops *sx__dist_resolve(const char *cap)
{
    /* rank: 0 scalar, 1 avx2, 2 avx512 (the default: no cap) */
    int max_rank = 2;
    if (cap && strcmp(cap, "scalar") == 0)
        max_rank = 0;
    else if (cap && strcmp(cap, "avx2") == 0)
        max_rank = 1;
    const sx__dist_ops *t;
    if (max_rank >= 2 && (t = sx__dist_avx512()) != NULL)
        return t;
    if (max_rank >= 1 && (t = sx__dist_avx2()) != NULL)
        return t;
    return &scalar_ops;
}

static _Atomic(const sx__dist_ops *) chosen;

const sx__dist_ops *sx__dist(void)
{
    /* acquire pairs with the release below (see the header comment for why a race is benign) */
    const sx__dist_ops *t = atomic_load_explicit(&chosen, memory_order_acquire);
    if (t)
        return t;
    t = sx__dist_resolve(getenv("SX_SIMD"));
    atomic_store_explicit(&chosen, t, memory_order_release);
    return t;
}

sx__dist_fn sx__dist_for_metric(sx_metric m)
{
    return sx__dist_for(m, SX__VT_F32);
}

sx__dist_fn sx__dist_for(sx_metric m, sx__vtype vt)
{
    const sx__dist_ops *t = sx__dist();
    bool l2 = m == SX_METRIC_L2, sim = m == SX_METRIC_IP || m == SX_METRIC_COSINE;
    if (!l2 && !sim)
        return NULL;
    switch (vt) {
    case SX__VT_F32:
        return l2 ? t->l2sq : t->nip;
    case SX__VT_F16:
        return l2 ? t->l2sq_f16 : t->nip_f16;
    case SX__VT_BF16:
        return l2 ? t->l2sq_bf16 : t->nip_bf16;
    case SX__VT_BIN:
        break;
    }
    return NULL;
}

sx__bdist_fn sx__bdist_for(sx_metric m)
{
    const sx__dist_ops *t = sx__dist();
    return m == SX_METRIC_HAMMING ? t->hamming : m == SX_METRIC_JACCARD ? t->jaccard : NULL;
}

sx__bdist_n_fn sx__bdist_n_for(sx_metric m)
{
    const sx__dist_ops *t = sx__dist();
    return m == SX_METRIC_HAMMING ? t->hamming_n : m == SX_METRIC_JACCARD ? t->jaccard_n : NULL;
}

void sx__widen(sx__vtype vt, const void *x, float *out, size_t dim)
{
    if (vt == SX__VT_F16)
        sx__dist()->f16_to_f32(x, out, dim);
    else if (vt == SX__VT_BF16)
        sx__dist()->bf16_to_f32(x, out, dim);
    else
        memcpy(out, x, dim * sizeof(float));
}

const char *sx__vtype_name(sx__vtype vt)
{
    switch (vt) {
    case SX__VT_F32:
        return "FLOAT_VECTOR";
    case SX__VT_F16:
        return "FLOAT16_VECTOR";
    case SX__VT_BF16:
        return "BFLOAT16_VECTOR";
    case SX__VT_BIN:
        return "BINARY_VECTOR";
    }
    return "?";
}

const char *sx_simd_level(void)
{
    return sx__dist()->isa;
}

/* ---------------------------------------------------------------- norms */

float sx__norm2(const float *v, size_t dim)
{
    return sx__dist()->ip(v, v, dim);
}

double sx__norm2_f64(const float *v, size_t dim)
{
    double s0 = 0.0, s1 = 0.0;
    size_t i = 0;
    for (; i + 2 <= dim; i += 2) {
        s0 += (double)v[i] * (double)v[i];
        s1 += (double)v[i + 1] * (double)v[i + 1];
    }
    if (i < dim)
        s0 += (double)v[i] * (double)v[i];
    return s0 + s1;
}

size_t sx__first_over_sqnorm(const float *v, size_t n, size_t dim, double *norm2)
{
    for (size_t i = 0; i < n; i++) {
        double s = sx__norm2_f64(v + i * dim, dim);
        if (!(s <= SX_MAX_SQNORM)) {
            *norm2 = s;
            return i;
        }
    }
    *norm2 = 0.0;
    return n;
}

float sx__normalize(float *v, size_t dim)
{
    /* Not a hot path (once per inserted COSINE vector or query), so the norm is summed in double:
     * any finite components normalise instead of under- or overflowing a float sum of squares
     * (FLT_MAX^2 * SX_MAX_DIM ~ 4e81 and the smallest denormal squared, ~2e-90, are both far
     * inside double's range; test_vector checks both). The scale is applied in double too, so a
     * tiny norm does not turn 1/norm into a float infinity. */
    double norm = sqrt(sx__norm2_f64(v, dim));
    if (norm > 0.0 && isfinite(norm)) {
        double inv = 1.0 / norm;
        for (size_t i = 0; i < dim; i++)
            v[i] = (float)((double)v[i] * inv);
    }
    return (float)norm;
}
