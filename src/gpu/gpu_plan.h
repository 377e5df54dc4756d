/*
 * gpu_plan.h: the host-side planning of the GPU kernels, in plain C so that it is compiled in
 * every build and unit-tested without a GPU (tests/unit/test_gpu.c). The CUDA sources
 * (gpu_knn.cu, gpu_kmeans.cu) take every size, offset and allocation from these plans, so a
 * plan that covers every row once and fits the budget here is what runs on the device.
 *
 * kNN plan (sx__gpu_knn). Queries are processed in batches of query_rows; for each batch the
 * base is scanned in column tiles of tile_cols rows: one SGEMM (query_rows x tile_cols tile of
 * inner products) and one top-k selection kernel per tile, the running top-k kept on the device.
 * Two layouts:
 *   resident: the whole base (and its norms) lives on the device, uploaded once; chosen when it
 *             takes at most half the budget.
 *   streamed: the base is streamed per query batch in chunks of tile_cols rows through two
 *             pinned staging buffers and two device slots (upload of chunk c+1 overlaps the
 *             kernels of chunk c); chosen when the base does not fit.
 * Device bytes (what sx__gpu_knn_plan_make checks against the budget):
 *   base      resident: n (dim+1) 4            streamed: 2 tile_cols (dim+1) 4
 *   queries   query_rows (dim+1) 4
 *   tile      query_rows tile_cols 4
 *   top-k     2 query_rows k 8   (two result slots: batch b+1 computes while b downloads)
 *   output    n_out k 4 when the caller keeps the ids on the device (CAGRA), else 0
 * Pinned host bytes: (output on the device ? 0 : 2 query_rows k 8, the result slots)
 *   + (streamed ? 2 tile_cols dim 4 : 0).
 *
 * k-means plan (sx__gpu_kmeans): the k centroids are resident; the n rows are processed in
 * batches of batch_rows (resident when the rows take at most half the budget, else streamed
 * through two pinned staging buffers as above). Device bytes:
 *   rows      resident: n dim 4               streamed: 2 batch_rows dim 4
 *   tile      batch_rows k 4
 *   per row   n 8 (assignment + distance of every row, kept on the device)
 *   centroids k (2 dim + 2) 4 (centroids, sums, norms, counts)
 * Pinned host bytes: streamed ? 2 batch_rows dim 4 : 0.
 *
 * Thread-safety: pure functions.
 */
#ifndef SX_GPU_PLAN_H
#define SX_GPU_PLAN_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest k of the selection kernel (its shared-memory buffer holds k + 2048 entries). */
#define SX__GPU_TOPK_MAX    1024u
/* Largest dimension accepted by the GPU paths (cuBLAS takes int sizes; the kernels need less). */
#define SX__GPU_DIM_MAX     65536u
/* Largest distance tile in floats (4 GiB): larger tiles do not make SGEMM faster. */
#define SX__GPU_TILE_MAX    ((size_t)1 << 30)
/* Preferred query rows per batch (a SGEMM of 4096 rows is compute-bound; the selection kernel
 * runs one block per query row, 4096 blocks fill any current GPU). */
#define SX__GPU_QUERY_ROWS  4096u
/* Smallest tile width the planner accepts before it shrinks the query batch instead. */
#define SX__GPU_MIN_COLS    4096u
/* Streamed chunks stop growing at this many bytes (staging is 2 chunks of pinned memory). */
#define SX__GPU_CHUNK_BYTES ((size_t)256 << 20)

typedef struct sx__gpu_knn_plan {
    size_t n, nq, dim;
    uint32_t k;
    bool resident;        /* base uploaded once (else streamed per query batch) */
    size_t query_rows;    /* rows per query batch, >= 1 */
    size_t tile_cols;     /* base rows per tile (= per streamed chunk), >= 1 */
    size_t n_batches;     /* ceil(nq / query_rows) */
    size_t n_tiles;       /* ceil(n / tile_cols) */
    size_t device_bytes;  /* device memory the plan allocates */
    size_t pinned_bytes;  /* pinned host memory the plan allocates */
    size_t out_dev_bytes; /* included in device_bytes: on-device output (see out_on_device) */
} sx__gpu_knn_plan;

/* Plans a kNN of nq queries over n base rows within budget_bytes of device memory. When
 * out_on_device, the result ids of all nq queries stay on the device (nq k 4 bytes, counted).
 * Errors: SX_EINVAL (dim == 0 or > SX__GPU_DIM_MAX, k == 0 or > SX__GPU_TOPK_MAX), SX_ENOMEM
 * (the budget does not hold even one query row and one base row; message names the bytes).
 * n == 0 or nq == 0 gives a plan with no tiles or no batches. */
SX_NODISCARD sx_status sx__gpu_knn_plan_make(size_t n,
                                             size_t nq,
                                             size_t dim,
                                             uint32_t k,
                                             bool out_on_device,
                                             size_t budget_bytes,
                                             sx__gpu_knn_plan *out);
/* Device and pinned bytes of a layout (the formulas above). */
size_t sx__gpu_knn_plan_device_bytes(const sx__gpu_knn_plan *p);
size_t sx__gpu_knn_plan_pinned_bytes(const sx__gpu_knn_plan *p);
/* Query batch b: rows [*row0, *row0 + *rows). b < n_batches. */
void sx__gpu_knn_plan_batch(const sx__gpu_knn_plan *p, size_t b, size_t *row0, size_t *rows);
/* Base tile t: rows [*row0, *row0 + *rows). t < n_tiles. */
void sx__gpu_knn_plan_tile(const sx__gpu_knn_plan *p, size_t t, size_t *row0, size_t *rows);

typedef struct sx__gpu_kmeans_plan {
    size_t n, dim, k;
    bool resident;     /* rows uploaded once (else streamed every pass) */
    size_t batch_rows; /* rows per batch, >= 1 */
    size_t n_batches;  /* ceil(n / batch_rows) */
    size_t device_bytes;
    size_t pinned_bytes;
} sx__gpu_kmeans_plan;

/* Plans GPU k-means of n rows into k centroids within budget_bytes. Errors: SX_EINVAL (n == 0,
 * k == 0, k > n, dim == 0 or > SX__GPU_DIM_MAX, k > SX__GPU_TILE_MAX), SX_ENOMEM (budget too
 * small for the centroids, the per-row arrays and one row). */
SX_NODISCARD sx_status sx__gpu_kmeans_plan_make(
    size_t n, size_t dim, size_t k, size_t budget_bytes, sx__gpu_kmeans_plan *out);
size_t sx__gpu_kmeans_plan_device_bytes(const sx__gpu_kmeans_plan *p);
void sx__gpu_kmeans_plan_batch(const sx__gpu_kmeans_plan *p, size_t b, size_t *row0, size_t *rows);

/* The device memory budget from the free and total bytes cudaMemGetInfo reports: free minus a
 * margin of max(512 MiB, total / 16) (cuBLAS workspace, the context, other processes), capped
 * by limit_bytes when nonzero (SX_GPU_MEM_LIMIT; tests force the streamed paths with it).
 * 0 when nothing is left. */
size_t sx__gpu_budget(size_t free_bytes, size_t total_bytes, size_t limit_bytes);

/* k-means empty-cluster repair: the `want` rows with the largest dist (ties to the lower row),
 * written to rows[] in decreasing distance; NaN distances count as smallest. Returns how many
 * were written (min(want, n)). Deterministic. Errors: SX_ENOMEM (scratch of want entries). */
SX_NODISCARD sx_status
sx__gpu_pick_farthest(const float *dist, size_t n, size_t want, uint32_t *rows, size_t *written);

#ifdef __cplusplus
}
#endif
#endif
