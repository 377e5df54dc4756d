/*
 * flat.h: exact (brute-force) k-NN over a contiguous block of vectors. It is the FLAT index, the
 * search path for growing segments and un-indexed rows, and the test oracle for every ANN index.
 *
 * One query: SIMD kernel per row (sx__dist). Several queries (nq >= SX__FLAT_GEMM_MIN_NQ): blocked
 * OpenBLAS SGEMM computing <q,x> for a tile of queries x rows, then ||x||^2 - 2<q,x> + ||q||^2 for
 * L2 (norms computed per tile; pairs where that expansion's rounding bound is not small against
 * its value are recomputed with the row kernel, so a batch returns what single queries return,
 * flat.c). Results are pushed into caller-owned top-k heaps, so a caller can scan several blocks
 * (segment chunks) into the same heaps.
 */
#ifndef SX_INDEX_FLAT_H
#define SX_INDEX_FLAT_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

#include "util/heap.h"
#include "vector/dist.h"

/* Row path below, GEMM at or above. Measured on 100k x 128 (2-core VM): nq=7 row path 5.8 ms,
 * nq=8 GEMM 11-17 ms; the crossover is near 16. */
#define SX__FLAT_GEMM_MIN_NQ 16

/* Scans rows [0,n) of `base` (n*dim floats, row-major). Row i is reported with id id_base + i and
 * is considered only if allow == NULL or bit (id_base + i) of allow is set. For each query q in
 * [0,nq) pushes candidates into heaps[q]. Distances are internal ("smaller is better", dist.h).
 * Errors: SX_ENOMEM (GEMM scratch). Thread-safety: pure; heaps must not be shared. */
SX_NODISCARD sx_status sx__flat_scan(const float *base,
                                     size_t n,
                                     size_t dim,
                                     sx_metric metric,
                                     uint32_t id_base,
                                     const uint64_t *allow,
                                     const float *queries,
                                     size_t nq,
                                     sx__topk *heaps);

/* sx__flat_scan for rows of element type vt (n rows of sx__vtype_row_bytes(vt, dim) bytes):
 * float32 is sx__flat_scan; float16 / bfloat16 rows are compared with float32 queries (nq * dim
 * floats) by the widening kernels, or, for nq >= SX__FLAT_GEMM_MIN_NQ, widened a tile at a time
 * into float32 for the GEMM path; binary rows with packed queries (nq * dim / 8 bytes) and the
 * HAMMING or JACCARD kernel. Errors as sx__flat_scan, and SX_EINVAL for a metric that does not
 * fit vt. */
SX_NODISCARD sx_status sx__flat_scan_typed(const void *base,
                                           sx__vtype vt,
                                           size_t n,
                                           size_t dim,
                                           sx_metric metric,
                                           uint32_t id_base,
                                           const uint64_t *allow,
                                           const void *queries,
                                           size_t nq,
                                           sx__topk *heaps);

#endif
