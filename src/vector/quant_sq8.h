/*
 * quant_sq8.h: 8-bit scalar quantization, one affine map per dimension.
 *
 * Training records each dimension's range [vmin_d, vmax_d]; a value x is stored as the byte
 * c = round((x - vmin_d) / scale_d) clamped to [0, 255], scale_d = (vmax_d - vmin_d) / 255, and
 * decodes to vmin_d + c * scale_d (error <= scale_d / 2 inside the trained range; a constant
 * dimension has scale 0 and decodes exactly). A vector costs dim bytes instead of 4 dim.
 * The range is outlier-robust (vector/range.h: fences from a sample, optional, then min/max inside
 * them, at most SX__RANGE_TAIL - 1 values per dimension and side left outside): a few extreme rows
 * do not stretch every row's step. Their values clamp; sx__sq8_clipped tells such a row (its code
 * is off by more than a step somewhere), and the users compute its distances exactly instead.
 *
 * Distances from a float query to a code, without decoding, after a per-query preparation:
 *   L2:        prep_d = q_d - vmin_d                 dist = sum_d (prep_d - c_d scale_d)^2
 *   IP/COSINE: prep_d = q_d scale_d, bias = q.vmin   dist = -(bias + sum_d prep_d c_d)
 * (internal "smaller is better" convention of vector/dist.h). Kernels: scalar reference, AVX2+FMA
 * and AVX-512F, chosen once at run time following sx__dist()'s ISA (so SX_SIMD caps them too).
 *
 * Life cycle: sx__sq8_init -> sx__sq8_fence (optional, a sample) -> sx__sq8_observe (any number
 * of times) -> sx__sq8_finish, or sx__sq8_train for one block (fenced from evenly spaced rows);
 * then encode/decode/prepare/dist/scan/clipped; sx__sq8_fini.
 * Thread-safety: a finished sx__sq8 is immutable and may be used from any number of threads;
 * training is single-threaded. Prepared queries are caller-owned.
 */
#ifndef SX_VECTOR_QUANT_SQ8_H
#define SX_VECTOR_QUANT_SQ8_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

struct sx__range;

typedef struct sx__sq8 {
    uint32_t dim;
    float *vmin;           /* dim floats, owned (sx__free_aligned) */
    float *scale;          /* dim floats, owned */
    struct sx__range *rng; /* while training (init .. finish): the ranges; NULL otherwise */
} sx__sq8;

typedef float (*sx__sq8_l2_fn)(const float *prep,
                               const float *scale,
                               const uint8_t *code,
                               size_t dim);
typedef float (*sx__sq8_dot_fn)(const float *prep, const uint8_t *code, size_t dim);

typedef struct sx__sq8_kernels {
    const char *isa;    /* "scalar", "avx2", "avx512" */
    sx__sq8_l2_fn l2;   /* sum (prep - c*scale)^2 */
    sx__sq8_dot_fn dot; /* sum prep * c */
} sx__sq8_kernels;

/* The kernels for this CPU (resolved once), or for a named ISA (NULL when unavailable; tests). */
const sx__sq8_kernels *sx__sq8_kernels_get(void);
const sx__sq8_kernels *sx__sq8_kernels_for(const char *isa);

/* Allocates an untrained quantizer with empty ranges. Errors: SX_EINVAL (dim 0 or above
 * SX_MAX_DIM), SX_ENOMEM. */
SX_NODISCARD sx_status sx__sq8_init(sx__sq8 *sq, size_t dim);
/* Sets the outlier fences from ns sample rows (stride floats apart; range.h), before any
 * observe. Errors: SX_ENOMEM. */
SX_NODISCARD sx_status sx__sq8_fence(sx__sq8 *sq, const float *x, size_t ns, size_t stride);
/* Widens the ranges by n rows of x (stride floats apart). Non-finite values are ignored. */
void sx__sq8_observe(sx__sq8 *sq, const float *x, size_t n, size_t stride);
/* Ends training: computes the scales (a dimension never observed gets vmin 0, scale 0). */
void sx__sq8_finish(sx__sq8 *sq);
/* init + fence (from up to SX__RANGE_SAMPLE evenly spaced rows) + observe + finish. */
SX_NODISCARD sx_status
sx__sq8_train(sx__sq8 *sq, const float *x, size_t n, size_t dim, size_t stride);
void sx__sq8_fini(sx__sq8 *sq);
/* True when `code` misrepresents x by more than one step in some dimension (a value outside the
 * trained range, clamped) or x has a non-finite value: distances from the code would be wrong,
 * so the caller computes that row's exactly. A pure function of the quantizer, x and the code, so
 * a loaded index recomputes the same answer as its build. */
bool sx__sq8_clipped(const sx__sq8 *sq, const float *x, const uint8_t *code);

/* Encodes n rows (stride floats apart) into n*dim bytes (values outside the range clamp). */
void sx__sq8_encode(const sx__sq8 *sq, const float *x, size_t n, size_t stride, uint8_t *codes);
void sx__sq8_decode(const sx__sq8 *sq, const uint8_t *code, float *out);

/* Prepares query q (dim floats) for metric: prep gets dim floats, *bias the constant term. */
void sx__sq8_prepare(const sx__sq8 *sq, const float *q, sx_metric metric, float *prep, float *bias);
/* Distance of one code / of n consecutive codes (n*dim bytes) from a prepared query. */
float sx__sq8_dist(
    const sx__sq8 *sq, sx_metric metric, const float *prep, float bias, const uint8_t *code);
void sx__sq8_scan(const sx__sq8 *sq,
                  sx_metric metric,
                  const float *prep,
                  float bias,
                  const uint8_t *codes,
                  size_t n,
                  float *out);

/* Bytes: u32 dim, dim f32 vmin, dim f32 scale. deserialize checks dim == want_dim (when
 * nonzero), finite values and scale >= 0: SX_ECORRUPT otherwise. */
SX_NODISCARD sx_status sx__sq8_serialize(const sx__sq8 *sq, sx__wbuf *w);
SX_NODISCARD sx_status sx__sq8_deserialize(sx__sq8 *sq, sx__rbuf *r, size_t want_dim);

#endif
