/*
 * kmeans.h: k-means shared by IVF (coarse quantizer) and PQ (sub-quantizer codebooks).
 *
 * Algorithm: k-means++ seeding (or random sampling for large k) on a training sample of at most
 * max(k * SX__KMEANS_SAMPLE_PER_CENTROID, ...) rows drawn with the seed, then Lloyd iterations with
 * the assignment step as one BLAS SGEMM per block (||x||^2 - 2 x.c + ||c||^2), empty clusters
 * repaired by splitting the largest cluster. Deterministic for a given seed and thread count.
 * Thread-safety: pure; uses OpenBLAS threads.
 */
#ifndef SX_INDEX_KMEANS_H
#define SX_INDEX_KMEANS_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

#define SX__KMEANS_SAMPLE_PER_CENTROID 256

typedef struct sx__kmeans_opts {
    size_t k;            /* clusters, 1..n */
    uint32_t iters;      /* Lloyd iterations (0: 20) */
    uint64_t seed;
    size_t max_sample;   /* training rows cap (0: k * SX__KMEANS_SAMPLE_PER_CENTROID) */
    double *inertia_out; /* optional: final inertia (sum of squared distances on the sample) */
} sx__kmeans_opts;

/* Trains k centroids (written to centroids, k*dim floats) on n rows of x (n*dim). Rows are
 * read with stride `stride` floats (>= dim; = dim for contiguous). Errors: SX_EINVAL (k > n or 0),
 * SX_ENOMEM. */
SX_NODISCARD sx_status sx__kmeans_train(const float *x, size_t n, size_t dim, size_t stride,
                                        const sx__kmeans_opts *o, float *centroids);
/* Nearest centroid (squared L2) for each of n rows: assign[i] in [0,k); optional dist_out. */
SX_NODISCARD sx_status sx__kmeans_assign(const float *x, size_t n, size_t dim, size_t stride,
                                         const float *centroids, size_t k, uint32_t *assign,
                                         float *dist_out);

#endif
