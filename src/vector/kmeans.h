/*
 * kmeans.h: k-means shared by IVF (coarse quantizer) and PQ (sub-quantizer codebooks).
 *
 * Algorithm (kmeans.c has the details): Lloyd's algorithm (Lloyd 1982) on a training sample of
 * at most max_sample rows (default k * SX__KMEANS_SAMPLE_PER_CENTROID = 256 rows per centroid,
 * FAISS's max_points_per_centroid) drawn without replacement with the seed. Seeding: k-means++
 * (Arthur & Vassilvitskii, SODA 2007) over a random subset of P = min(sample, k *
 * SX__KMEANS_PP_ROWS_PER_CENTROID) rows when k <= SX__KMEANS_PP_MAX_K and k * P * dim <=
 * SX__KMEANS_PP_MAX_WORK (low dimensions, e.g. PQ sub-spaces, where it lowers the inertia);
 * otherwise k distinct random sample rows (high dimensions, where k-means++ is no better and costs
 * several Lloyd iterations; measurements in kmeans.c). The assignment
 * step is one BLAS SGEMM per block of rows (argmin_j ||c_j||^2 - 2 x.c_j); empty clusters are
 * repaired by splitting the cluster with the largest sum of squared errors. Deterministic for a
 * given seed (and OpenBLAS build / thread count).
 * Thread-safety: pure (the caller's buffers only); SGEMM may use OpenBLAS's own threads.
 */
#ifndef SX_VECTOR_KMEANS_H
#define SX_VECTOR_KMEANS_H
#include <sextant.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SX__KMEANS_SAMPLE_PER_CENTROID  256
#define SX__KMEANS_PP_MAX_K             256
#define SX__KMEANS_PP_ROWS_PER_CENTROID 64
#define SX__KMEANS_PP_MAX_WORK          268435456.0 /* 2^28: k * P * dim for k-means++ */
#define SX__KMEANS_ITERS_DEF            20

/* Seeding choice (opts.init). AUTO follows the rule above; the others force one (tests). */
enum { SX__KMEANS_INIT_AUTO = 0, SX__KMEANS_INIT_PP = 1, SX__KMEANS_INIT_RANDOM = 2 };

typedef struct sx__kmeans_opts {
    size_t k;       /* clusters, 1..n */
    uint32_t iters; /* Lloyd iterations (0: SX__KMEANS_ITERS_DEF) */
    uint64_t seed;
    size_t max_sample;         /* training rows cap (0: k * SX__KMEANS_SAMPLE_PER_CENTROID) */
    double *inertia_out;       /* optional: final inertia (sum of squared distances of the
                                * sample to the final centroids; costs one more assignment) */
    const atomic_bool *cancel; /* optional: checked every iteration -> SX_ECANCELED */
    int init;                  /* SX__KMEANS_INIT_* (0 = AUTO) */
} sx__kmeans_opts;

/* Trains k centroids (written to centroids, k*dim floats) on n rows of x. Rows are read with
 * stride `stride` floats (>= dim; = dim for contiguous), so PQ can train on a column slice.
 * Stops early when an iteration changes no assignment. With fewer than k distinct rows some
 * centroids duplicate others (their clusters stay empty). Errors: SX_EINVAL (k == 0, k > n,
 * dim == 0, stride < dim), SX_ENOMEM, SX_ECANCELED. centroids is written only on success. */
SX_NODISCARD sx_status sx__kmeans_train(const float *x,
                                        size_t n,
                                        size_t dim,
                                        size_t stride,
                                        const sx__kmeans_opts *o,
                                        float *centroids);

/* Nearest centroid (squared L2, ties to the lower index) for each of n rows: assign[i] in [0,k);
 * optional dist_out[i] = squared distance (>= 0). One SGEMM per block of rows; the distance is
 * ||x||^2 - 2 x.c + ||c||^2 in float, so near-ties may resolve either way by rounding.
 * Errors: SX_EINVAL (k == 0, stride < dim), SX_ENOMEM (a tile of at most ~1 MiB). */
SX_NODISCARD sx_status sx__kmeans_assign(const float *x,
                                         size_t n,
                                         size_t dim,
                                         size_t stride,
                                         const float *centroids,
                                         size_t k,
                                         uint32_t *assign,
                                         float *dist_out);

/* Draws ns of the rows [0,n) without replacement (Knuth's selection sampling, TAOCP 3.4.2
 * Algorithm S), written to rows[0..ns) in increasing order; ns <= n. Deterministic in seed. */
void sx__kmeans_sample_rows(size_t n, size_t ns, uint64_t seed, uint32_t *rows);

/* Upper bound of the bytes sx__kmeans_train allocates for these sizes (memory limits). */
uint64_t sx__kmeans_train_bytes(size_t n, size_t dim, size_t k, size_t max_sample);

#endif
