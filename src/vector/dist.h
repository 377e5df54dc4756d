/*
 * dist.h: float32 distance kernels with run-time ISA dispatch.
 *
 * Internal convention: every distance is "smaller is better".
 *   L2     -> squared Euclidean distance
 *   IP     -> negated inner product (-<a,b>)
 *   COSINE -> negated inner product of unit vectors (collections store COSINE vectors normalised)
 * sx__dist_to_user converts to the value users see (squared L2; IP; cosine similarity).
 *
 * Kernels: scalar reference (dist.c), AVX2+FMA (dist_avx2.c), AVX-512F (dist_avx512.c). The best
 * one the CPU supports is chosen once (first call of sx__dist) into a function table; the
 * environment variable SX_SIMD=scalar|avx2|avx512 caps the choice (for tests and benchmarks).
 * Thread-safety: all functions are pure; sx__dist() is safe to call concurrently.
 */
#ifndef SX_VECTOR_DIST_H
#define SX_VECTOR_DIST_H
#include <sextant.h>
#include <stddef.h>

typedef float (*sx__dist_fn)(const float *a, const float *b, size_t dim);

typedef struct sx__dist_ops {
    const char *isa;  /* "scalar", "avx2", "avx512" */
    sx__dist_fn l2sq; /* sum (a-b)^2 */
    sx__dist_fn ip;   /* sum a*b */
    sx__dist_fn nip;  /* -sum a*b: the "smaller is better" kernel for IP and COSINE */
} sx__dist_ops;

/* The table for this CPU (resolved once). */
const sx__dist_ops *sx__dist(void);
/* Specific tables (NULL when the CPU or build lacks the ISA), for tests. */
const sx__dist_ops *sx__dist_scalar(void);
const sx__dist_ops *sx__dist_avx2(void);
const sx__dist_ops *sx__dist_avx512(void);
/* The table sx__dist() would pick when SX_SIMD is `cap` (NULL or unknown = no cap): the best
 * available ISA not above the cap. sx__dist() is sx__dist_resolve(getenv("SX_SIMD")), cached. */
const sx__dist_ops *sx__dist_resolve(const char *cap);

/* The "smaller is better" kernel for a metric: l2sq for L2; nip (-ip) for IP/COSINE; NULL for
 * an unknown metric. Resolved from sx__dist(). */
sx__dist_fn sx__dist_for_metric(sx_metric m);

/* Internal distance -> user-facing value. */
static inline float sx__dist_to_user(sx_metric m, float d)
{
    return m == SX_METRIC_L2 ? d : -d;
}

/* Scales v to unit L2 norm in place; a zero vector is left as is. Returns the original norm. */
float sx__normalize(float *v, size_t dim);
/* Sum of squares (for FLAT's GEMM path). */
float sx__norm2(const float *v, size_t dim);
/* Sum of squares in double (each square is exact in double; the sum rounds at 2^-53, and cannot
 * overflow for finite floats), for checks against SX_MAX_SQNORM. */
double sx__norm2_f64(const float *v, size_t dim);
/* The first of n vectors (dim floats each) whose squared norm exceeds SX_MAX_SQNORM (sextant.h),
 * or n when none does; *norm2 = its squared norm. Vectors must already be finite. */
size_t sx__first_over_sqnorm(const float *v, size_t n, size_t dim, double *norm2);

#endif
