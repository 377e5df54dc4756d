/*
 * gpu_none.c: the GPU layer of a build without CUDA (CMake SX_CUDA=OFF, or AUTO without nvcc).
 * Every entry point of gpu.h answers "no GPU": sx__gpu_available() is false and the others
 * return SX_EINVAL, so callers take their CPU twin. With CUDA the .cu files define these
 * symbols instead and this file compiles to nothing (CMake also leaves it out of that build).
 * Thread-safety: pure.
 */
#include "gpu/gpu.h"

#ifndef SX_HAVE_CUDA
#include "util/err.h"

bool sx__gpu_available(void)
{
    return false;
}

const char *sx__gpu_describe(void)
{
    return "built without CUDA";
}

sx_status sx__gpu_knn(const float *base, size_t n, const float *queries, size_t nq, size_t dim,
                      sx_metric metric, uint32_t k, bool exclude_self, uint32_t *out_ids,
                      float *out_dist)
{
    (void)base, (void)n, (void)queries, (void)nq, (void)dim, (void)metric, (void)k;
    (void)exclude_self, (void)out_ids, (void)out_dist;
    return sx__err(SX_EINVAL, "no GPU: built without CUDA");
}

sx_status sx__gpu_kmeans(const float *x, size_t n, size_t dim, uint32_t k, uint32_t iters,
                         float *centroids, uint32_t *assign_out, double *inertia_out)
{
    (void)x, (void)n, (void)dim, (void)k, (void)iters, (void)centroids, (void)assign_out;
    (void)inertia_out;
    return sx__err(SX_EINVAL, "no GPU: built without CUDA");
}

sx_status sx__gpu_cagra_build(const float *x, size_t n, size_t dim, sx_metric metric,
                              const sx__cagra_build_params *p, uint32_t *graph)
{
    (void)x, (void)n, (void)dim, (void)metric, (void)p, (void)graph;
    return sx__err(SX_EINVAL, "no GPU: built without CUDA");
}

sx_status sx__gpu_cagra_prune_merge(const uint32_t *knn, size_t n, uint32_t ideg, uint32_t deg,
                                    uint32_t *graph)
{
    (void)knn, (void)n, (void)ideg, (void)deg, (void)graph;
    return sx__err(SX_EINVAL, "no GPU: built without CUDA");
}
#else
/* ISO C wants at least one declaration in a translation unit. */
typedef int sx__gpu_none_unused;
#endif
