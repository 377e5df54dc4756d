/*
 * dist.h: distance kernels with run-time ISA dispatch, for float32, float16, bfloat16 and binary
 * vectors.
 *
 * Internal convention: every distance is "smaller is better".
 *   L2      -> squared Euclidean distance
 *   IP      -> negated inner product (-<a,b>)
 *   COSINE  -> negated inner product of unit vectors (collections store COSINE vectors normalised)
 *   HAMMING -> the number of differing bits
 *   JACCARD -> 1 - |a and b| / |a or b| (0 when both are all zeros)
 * sx__dist_to_user converts to the value users see (squared L2; IP; cosine similarity; the
 * Hamming and Jaccard distances as they are).
 *
 * Element types. A float kernel compares a float32 query q with a row x of the table's element
 * type: float32, float16 or bfloat16 (x points to uint16_t bits then). Rows of the 16-bit types
 * are widened to float32 lane by lane (exact: util/half.h) and the arithmetic is float32, as for
 * float32 rows; so a float16 row gives the same distance as the same values stored as float32,
 * within the summation's reassociation. The query stays float32: a search is never less precise
 * than its query. Binary kernels compare two packed bit vectors (nbytes bytes each).
 *
 * Kernels: scalar reference (dist.c), AVX2+FMA+F16C+POPCNT (dist_avx2.c), AVX-512F/BW/DQ/VL
 * (dist_avx512.c; float16 widening with vcvtph2ps, bfloat16 with a 16-bit shift, popcounts with
 * VPOPCNTDQ when the CPU has it, else 64-bit POPCNT). The best one the CPU supports is chosen once
 * (first call of sx__dist) into a function table; the environment variable
 * SX_SIMD=scalar|avx2|avx512 caps the choice (for tests and benchmarks).
 * Why not AVX-512 FP16 / BF16 arithmetic: vfmadd*ph accumulates in float16 (11-bit mantissa:
 * sums of hundreds of products lose their low digits) and vdpbf16ps needs the query in bfloat16;
 * both would make a search less exact than its float32 twin for a gain that the widening loads
 * (one conversion per 16 values, off the FMA chain) mostly already give.
 * Thread-safety: all functions are pure; sx__dist() is safe to call concurrently.
 */
#ifndef SX_VECTOR_DIST_H
#define SX_VECTOR_DIST_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

/* q: dim float32 values; x: dim values of the table member's element type */
typedef float (*sx__dist_fn)(const float *q, const void *x, size_t dim);
/* a, b: nbytes bytes of packed bits each */
typedef float (*sx__bdist_fn)(const uint8_t *a, const uint8_t *b, size_t nbytes);
/* out[i] = the distance of q to row i of n consecutive rows (nbytes each): one call per block of
 * rows, so a scan of short binary codes does not pay a call per row */
typedef void (*sx__bdist_n_fn)(
    const uint8_t *q, const uint8_t *rows, size_t n, size_t nbytes, float *out);
/* widens n 16-bit values to float32 */
typedef void (*sx__widen_fn)(const uint16_t *in, float *out, size_t n);

typedef struct sx__dist_ops {
    const char *isa;  /* "scalar", "avx2", "avx512" */
    sx__dist_fn l2sq; /* sum (a-b)^2 */
    sx__dist_fn ip;   /* sum a*b */
    sx__dist_fn nip;  /* -sum a*b: the "smaller is better" kernel for IP and COSINE */
    sx__dist_fn l2sq_f16, ip_f16, nip_f16;    /* x: float16 */
    sx__dist_fn l2sq_bf16, ip_bf16, nip_bf16; /* x: bfloat16 */
    sx__bdist_fn hamming;
    sx__bdist_fn jaccard;
    sx__bdist_n_fn hamming_n;
    sx__bdist_n_fn jaccard_n;
    sx__widen_fn f16_to_f32;
    sx__widen_fn bf16_to_f32;
} sx__dist_ops;

/* Element types of stored vectors (the vector field types of sextant.h). */
typedef enum sx__vtype {
    SX__VT_F32 = 0,
    SX__VT_F16 = 1,
    SX__VT_BF16 = 2,
    SX__VT_BIN = 3
} sx__vtype;

/* The element type of a vector field type (SX__VT_F32 for anything else). */
static inline sx__vtype sx__vtype_of(sx_field_type t)
{
    return t == SX_FIELD_FLOAT16_VECTOR    ? SX__VT_F16
           : t == SX_FIELD_BFLOAT16_VECTOR ? SX__VT_BF16
           : t == SX_FIELD_BINARY_VECTOR   ? SX__VT_BIN
                                           : SX__VT_F32;
}

/* Bytes of one row of dim values (bits for SX__VT_BIN) */
static inline size_t sx__vtype_row_bytes(sx__vtype vt, size_t dim)
{
    return vt == SX__VT_F32 ? dim * 4 : vt == SX__VT_BIN ? dim / 8 : dim * 2;
}

/* "FLOAT_VECTOR", "FLOAT16_VECTOR", ... for messages */
const char *sx__vtype_name(sx__vtype vt);

/* Whether metric m applies to element type vt: L2/IP/COSINE to the float types, HAMMING/JACCARD
 * to binary. */
static inline int sx__metric_fits(sx__vtype vt, sx_metric m)
{
    if (vt == SX__VT_BIN)
        return m == SX_METRIC_HAMMING || m == SX_METRIC_JACCARD;
    return m == SX_METRIC_L2 || m == SX_METRIC_IP || m == SX_METRIC_COSINE;
}

/* The table for this CPU (resolved once). */
const sx__dist_ops *sx__dist(void);
/* F16C (the float16 conversion instructions), from CPUID leaf 1 (ECX bit 29): a feature that
 * clang's __builtin_cpu_supports does not name. */
int sx__cpu_has_f16c(void);
/* Specific tables (NULL when the CPU or build lacks the ISA), for tests. */
const sx__dist_ops *sx__dist_scalar(void);
const sx__dist_ops *sx__dist_avx2(void);
const sx__dist_ops *sx__dist_avx512(void);
/* The table sx__dist() would pick when SX_SIMD is `cap` (NULL or unknown = no cap): the best
 * available ISA not above the cap. sx__dist() is sx__dist_resolve(getenv("SX_SIMD")), cached. */
const sx__dist_ops *sx__dist_resolve(const char *cap);

/* The "smaller is better" float32 kernel for a metric: l2sq for L2; nip (-ip) for IP/COSINE;
 * NULL for another metric. Resolved from sx__dist(). */
sx__dist_fn sx__dist_for_metric(sx_metric m);
/* The same for rows of element type vt (F32, F16, BF16); NULL for SX__VT_BIN or a metric that
 * does not fit. */
sx__dist_fn sx__dist_for(sx_metric m, sx__vtype vt);
/* The binary kernel of HAMMING or JACCARD; NULL for another metric. */
sx__bdist_fn sx__bdist_for(sx_metric m);
/* Its block form (sx__bdist_n_fn); NULL for another metric. */
sx__bdist_n_fn sx__bdist_n_for(sx_metric m);
/* Widens row x (dim values of type vt: F32, F16 or BF16) into out (dim floats). */
void sx__widen(sx__vtype vt, const void *x, float *out, size_t dim);

/* JACCARD from the counts of bits set in both and in either: 1 - both / any, 0 when any is 0
 * (two all-zero vectors are identical). One formula for every table. */
static inline float sx__jaccard_from_counts(uint64_t both, uint64_t any)
{
    return any ? (float)(1.0 - (double)both / (double)any) : 0.0f;
}

/* Internal distance -> user-facing value: the similarities (IP, COSINE) are negated back. */
static inline float sx__dist_to_user(sx_metric m, float d)
{
    return m == SX_METRIC_IP || m == SX_METRIC_COSINE ? -d : d;
}

/* Whether larger values are better for users (IP, COSINE): orders, ranges and rankers. */
static inline int sx__metric_is_similarity(sx_metric m)
{
    return m == SX_METRIC_IP || m == SX_METRIC_COSINE;
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
