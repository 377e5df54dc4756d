/*
 * gpu.h: the GPU layer's C interface (issue 7). Implemented in CUDA C (the .cu files in
 * src/gpu/), built when the build has CUDA (CMake SX_CUDA=AUTO|ON|OFF; AUTO = when nvcc is found)
 * into the plugin libsextant_cuda.so; in libsextant these functions are gpu_loader.c's, which
 * opens the plugin on the first call and forwards to it (issue 12), or answers "no GPU" with the
 * reason (no plugin, no driver, built without CUDA, SX_GPU=off). Callers (index builds) always
 * have a CPU twin of each algorithm and fall back to it when sx__gpu_available() is false,
 * logging one line.
 *
 * Memory: plain cudaMalloc (no managed memory). Inputs larger than the device memory budget are
 * processed in batches (base vectors streamed through pinned host buffers on two streams, so
 * copies overlap kernels).
 *
 * Thread-safety: every function may be called from any thread; calls are serialised on the
 * device by an internal mutex (one build at a time uses the GPU; others wait or fall back).
 */
#ifndef SX_GPU_GPU_H
#define SX_GPU_GPU_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CUDA sources are C++ */
#endif

/* True when the library was built with CUDA, the driver loads, and at least one device is
 * usable. Detected once (thread-safe); SX_GPU=off in the environment forces false. */
bool sx__gpu_available(void);
/* One line describing the device ("NVIDIA H200, 139 GiB, cc 9.0") or why there is none. */
const char *sx__gpu_describe(void);

/* Exact k nearest neighbours of nq queries among n base vectors (row-major float32, dim).
 * metric: L2 (squared distances) or IP (negated inner products, smaller is better; COSINE
 * callers pass normalised vectors and SX_METRIC_IP). Output: out_ids[nq*k] (row numbers,
 * UINT32_MAX when fewer than k exist), out_dist[nq*k] ascending. exclude_self: when queries ==
 * base (same pointer), row i never returns itself (kNN-graph construction).
 * Errors: SX_EINVAL (no GPU / bad args), SX_ENOMEM (device or pinned allocation), SX_EIO
 * (CUDA error: the message names the call). */
SX_NODISCARD sx_status sx__gpu_knn(const float *base,
                                   size_t n,
                                   const float *queries,
                                   size_t nq,
                                   size_t dim,
                                   sx_metric metric,
                                   uint32_t k,
                                   bool exclude_self,
                                   uint32_t *out_ids,
                                   float *out_dist);

/* Lloyd k-means on the GPU: GEMM assignment + centroid update kernels, `iters` iterations from
 * the given initial centroids (in/out: k*dim floats). assign_out (optional, n) receives the final
 * assignment; *inertia_out (optional) the final sum of squared distances. */
SX_NODISCARD sx_status sx__gpu_kmeans(const float *x,
                                      size_t n,
                                      size_t dim,
                                      uint32_t k,
                                      uint32_t iters,
                                      float *centroids,
                                      uint32_t *assign_out,
                                      double *inertia_out);

/* CAGRA graph build on the GPU (the same algorithm as the CPU twin in src/index/cagra/):
 * initial kNN graph of intermediate_degree (exact GPU kNN in batches, or NN-descent), rank-based
 * pruning to graph_degree, reverse edges, merge. Output: graph[n * graph_degree] neighbour ids
 * (row-major, UINT32_MAX = empty slot). */
typedef struct sx__cagra_build_params {
    uint32_t intermediate_degree; /* Milvus intermediate_graph_degree, default 128 */
    uint32_t graph_degree;        /* Milvus graph_degree, default 64 (< intermediate) */
    int build_algo;               /* 0: exact kNN (IVF_PQ on big data), 1: NN_DESCENT */
    uint32_t nn_descent_iters;    /* default 20 */
    uint32_t threads;             /* CPU twin: 0 = all cores */
    uint64_t seed;
    /* GPU only (added by the CUDA side): the initial kNN graph's SGEMM runs on TF32 tensor cores
     * by default (inputs rounded to 10 mantissa bits: ranks of near-ties may swap, which the
     * pruning tolerates; ~8x the FP32 rate); true = plain FP32 (exact ranks, as the CPU twin). */
    bool knn_fp32;
} sx__cagra_build_params;

SX_NODISCARD sx_status sx__gpu_cagra_build(const float *x,
                                           size_t n,
                                           size_t dim,
                                           sx_metric metric,
                                           const sx__cagra_build_params *p,
                                           uint32_t *graph);

/* Steps 2-4 of the CAGRA build alone (added by the CUDA side, for tests and for callers with a
 * kNN graph of their own): knn[n * ideg] rows in rank order (SX__CAGRA_NONE / out-of-range ids
 * and the row itself are ignored) -> graph[n * deg]. With the same kNN graph the result equals
 * the CPU twin's sx__cagra_prune + sx__cagra_merge bit for bit. Errors as sx__gpu_cagra_build. */
SX_NODISCARD sx_status sx__gpu_cagra_prune_merge(
    const uint32_t *knn, size_t n, uint32_t ideg, uint32_t deg, uint32_t *graph);

#ifdef __cplusplus
}
#endif
#endif
