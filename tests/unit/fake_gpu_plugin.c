/*
 * fake_gpu_plugin.c: a CUDA-free plugin for test_gpu_loader (src/gpu/gpu_plugin.h), built as
 * build/libsx_fake_gpu_plugin.so (ABI SX__GPU_PLUGIN_ABI) and, with FAKE_ABI=999, as
 * build/libsx_fake_gpu_plugin_abi.so (an incompatible plugin). It lets every build, with or
 * without nvcc, drive the loader's whole path: dlopen, the handshake, the table, and the host
 * callbacks across the boundary (an error message set in the plugin is the caller's
 * sx_errmsg(); an allocation in the plugin runs the host's fault-injection countdown).
 *
 * Behaviour: available() is true; describe() names the fake; knn fails with SX_EIO and a message
 * naming its arguments; kmeans allocates k floats through the host (SX_ENOMEM when that fails),
 * writes iters into centroids[0] and succeeds; cagra_build and cagra_prune_merge return
 * SX_EINVAL. Linked with -Wl,--no-undefined, like the real plugin.
 */
#include <stdio.h>
#include <string.h>

#include "gpu/gpu_plugin.h"

#ifndef FAKE_ABI
# define FAKE_ABI SX__GPU_PLUGIN_ABI
#endif

static const sx__gpu_host *host;

static bool fake_available(void)
{
    return true;
}

static const char *fake_describe(void)
{
    return "fake GPU plugin (tests/unit/fake_gpu_plugin.c)";
}

static sx_status fake_knn(const float *base,
                          size_t n,
                          const float *queries,
                          size_t nq,
                          size_t dim,
                          sx_metric metric,
                          uint32_t k,
                          bool exclude_self,
                          uint32_t *out_ids,
                          float *out_dist)
{
    char msg[128];
    (void)base, (void)queries, (void)metric, (void)exclude_self, (void)out_ids, (void)out_dist;
    (void)snprintf(msg, sizeof msg, "fake knn: n=%zu nq=%zu dim=%zu k=%u", n, nq, dim, k);
    return host->set_error(SX_EIO, msg);
}

static sx_status fake_kmeans(const float *x,
                             size_t n,
                             size_t dim,
                             uint32_t k,
                             uint32_t iters,
                             float *centroids,
                             uint32_t *assign_out,
                             double *inertia_out)
{
    (void)x, (void)n, (void)dim, (void)assign_out, (void)inertia_out;
    float *tmp = host->alloc(k * sizeof *tmp);
    if (!tmp)
        return host->set_error(SX_ENOMEM, "fake kmeans: out of memory");
    memset(tmp, 0, k * sizeof *tmp);
    tmp[0] = (float)iters;
    centroids[0] = tmp[0];
    host->release(tmp);
    return SX_OK;
}

static sx_status fake_cagra_build(const float *x,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  const sx__cagra_build_params *p,
                                  uint32_t *graph)
{
    (void)x, (void)n, (void)dim, (void)metric, (void)p, (void)graph;
    return host->set_error(SX_EINVAL, "fake cagra build");
}

static sx_status
fake_prune_merge(const uint32_t *knn, size_t n, uint32_t ideg, uint32_t deg, uint32_t *graph)
{
    (void)knn, (void)n, (void)ideg, (void)deg, (void)graph;
    return host->set_error(SX_EINVAL, "fake prune merge");
}

static const sx__gpu_plugin table = {
    .abi = FAKE_ABI,
    .size = sizeof(sx__gpu_plugin),
    .available = fake_available,
    .describe = fake_describe,
    .knn = fake_knn,
    .kmeans = fake_kmeans,
    .cagra_build = fake_cagra_build,
    .cagra_prune_merge = fake_prune_merge,
};

__attribute__((visibility("default"))) sx_status sx__gpu_plugin_init(const sx__gpu_host *h,
                                                                     const sx__gpu_plugin **out);

sx_status sx__gpu_plugin_init(const sx__gpu_host *h, const sx__gpu_plugin **out)
{
    *out = &table;
    if (!h || h->abi != FAKE_ABI || h->size < sizeof(sx__gpu_host))
        return SX_EINVAL;
    host = h;
    return SX_OK;
}
