/*
 * range.h: per-dimension value ranges for the 8-bit scalar quantizers (quant_sq8.h for IVF_SQ8,
 * index/hnsw_sq for HNSW_SQ) that a few outliers cannot stretch (issue 13).
 *
 * A min/max range lets one row of 1e6 among values in [0, 1] make the code step 4e3 for every row,
 * so every normal value codes to the same byte (recall@10 0.99 -> 0.001 on 6000 uniform rows with
 * 8 outliers). Here:
 *   1. fences from a sample (sx__range_fence): per dimension the r-th smallest and r-th largest
 *      sample values, r = 1 + m/256 of m sample values (0.4%: up to r - 1 outliers in the sample
 *      cannot move them), widened by their distance w on each side: [lo_r - w, hi_r + w]. Data
 *      with no outliers never reaches them (uniform: 2x its range; Gaussian: +-8 sigma); fewer
 *      than SX__RANGE_MIN_SAMPLE sample values leave the fences infinite (plain min/max);
 *   2. observation (sx__range_observe): min and max of the values inside the fences; outside,
 *      only the SX__RANGE_TAIL most extreme values on each side are kept;
 *   3. the range (sx__range_finish): [min, max] inside the fences, widened to the TAIL-th most
 *      extreme value beyond a fence when at least TAIL values lie beyond it. So at most TAIL - 1
 *      values per dimension and side fall outside the range: a genuine heavy tail or a second
 *      mode (many values) is kept in the range as min/max would, and a few outliers are not.
 * Values outside the range clamp when encoded; the quantizers then flag their rows and compute
 * those rows' distances exactly from the float vectors, so answers stay right (sx__sq8_clipped).
 * Non-finite values are ignored.
 *
 * Thread-safety: none (training is single-threaded); the result is plain arrays.
 */
#ifndef SX_VECTOR_RANGE_H
#define SX_VECTOR_RANGE_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

#define SX__RANGE_TAIL          32u   /* extreme values kept per dimension and side */
#define SX__RANGE_MIN_SAMPLE    64u   /* sample values per dimension needed for fences */
#define SX__RANGE_SAMPLE        4096u /* rows a caller samples for the fences, at most */
/* ... and at most this many floats in all (ns * dim), so wide vectors sample fewer rows */
#define SX__RANGE_SAMPLE_FLOATS ((size_t)1 << 22)

typedef struct sx__range {
    size_t dim;
    float *flo, *fhi; /* fences */
    float *lo, *hi;   /* min / max inside the fences (lo > hi: none seen) */
    float *top, *bot; /* dim x TAIL: largest values above fhi (descending), smallest below flo
                         (ascending) */
    uint32_t *ntop, *nbot;
} sx__range;

/* Rows to sample from n for the fences (min(n, SX__RANGE_SAMPLE, SX__RANGE_SAMPLE_FLOATS / dim),
 * at least 1 when n > 0). */
size_t sx__range_sample_rows(size_t n, size_t dim);
/* Bytes a training allocates at most: the ranges (init), fence's scratch, and a caller's sample
 * copy of sx__range_sample_rows(n, dim) rows. */
uint64_t sx__range_train_bytes(size_t n, size_t dim);
/* Errors: SX_ENOMEM. Fences start infinite. */
SX_NODISCARD sx_status sx__range_init(sx__range *r, size_t dim);
/* Sets the fences from ns sample rows (stride floats apart). Errors: SX_ENOMEM (scratch). */
SX_NODISCARD sx_status sx__range_fence(sx__range *r, const float *x, size_t ns, size_t stride);
void sx__range_observe(sx__range *r, const float *x, size_t n, size_t stride);
/* The ranges: lo[d] <= hi[d], or lo[d] > hi[d] for a dimension with no finite value seen. */
void sx__range_finish(const sx__range *r, float *lo, float *hi);
void sx__range_fini(sx__range *r);

#endif
