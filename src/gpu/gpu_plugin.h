/*
 * gpu_plugin.h: the binary interface between libsextant's GPU layer (gpu_loader.c) and the CUDA
 * plugin, libsextant_cuda.so (gpu_plugin.cu, the other .cu files of src/gpu/ and gpu_plan.c), which
 * the loader opens with dlopen on first use (issue 12: CPU users do not map the CUDA runtime).
 *
 * The plugin exports exactly one symbol, sx__gpu_plugin_init (SX__GPU_PLUGIN_INIT); everything
 * else in it is local (version script src/gpu/gpu_plugin.map), the static CUDA runtime included.
 * It has no undefined reference into libsextant (linked with -Wl,--no-undefined): what it needs
 * from the host it gets through the sx__gpu_host table passed to init.
 *
 * Handshake. The loader calls init(&host, &table) once (under its pthread_once). The plugin
 * checks host->abi and host->size, keeps the host pointer (the table is static in the loader,
 * valid for the life of the process) and points *table at its own static table, whose abi and
 * size the loader checks in turn. Either side refusing means "no GPU" with a message naming the
 * two ABI numbers (a plugin from another Sextant build).
 *
 * Versioning: SX__GPU_PLUGIN_ABI changes whenever either struct or a function's meaning does;
 * members are only ever appended, and size tells which are there.
 *
 * Thread-safety: init runs once, before any other call; the table's functions are those of
 * gpu.h, with gpu.h's thread-safety. The host callbacks may be called from any thread.
 */
#ifndef SX_GPU_PLUGIN_H
#define SX_GPU_PLUGIN_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SX__GPU_PLUGIN_ABI  1u
#define SX__GPU_PLUGIN_INIT "sx__gpu_plugin_init"
#define SX__GPU_PLUGIN_FILE "libsextant_cuda.so"

/* What the host (libsextant) lends the plugin. */
typedef struct sx__gpu_host {
    uint32_t abi;  /* SX__GPU_PLUGIN_ABI */
    uint32_t size; /* sizeof(sx__gpu_host) */
    /* Records msg as the calling thread's sx_errmsg() and returns st (sx__err). */
    sx_status (*set_error)(sx_status st, const char *msg);
    /* sx__malloc / sx__free: the host's allocator, with its fault-injection countdown. */
    void *(*alloc)(size_t n);
    void (*release)(void *p);
} sx__gpu_host;

/* What the plugin provides: gpu.h, one member per function, same signatures and semantics. */
typedef struct sx__gpu_plugin {
    uint32_t abi;  /* SX__GPU_PLUGIN_ABI */
    uint32_t size; /* sizeof(sx__gpu_plugin) */
    bool (*available)(void);
    const char *(*describe)(void);
    sx_status (*knn)(const float *base,
                     size_t n,
                     const float *queries,
                     size_t nq,
                     size_t dim,
                     sx_metric metric,
                     uint32_t k,
                     bool exclude_self,
                     uint32_t *out_ids,
                     float *out_dist);
    sx_status (*kmeans)(const float *x,
                        size_t n,
                        size_t dim,
                        uint32_t k,
                        uint32_t iters,
                        float *centroids,
                        uint32_t *assign_out,
                        double *inertia_out);
    sx_status (*cagra_build)(const float *x,
                             size_t n,
                             size_t dim,
                             sx_metric metric,
                             const sx__cagra_build_params *p,
                             uint32_t *graph);
    sx_status (*cagra_prune_merge)(
        const uint32_t *knn, size_t n, uint32_t ideg, uint32_t deg, uint32_t *graph);
} sx__gpu_plugin;

/* The plugin's one export. *table is set in every case (so the loader can name the plugin's ABI);
 * returns SX_OK, or SX_EINVAL when it does not speak host->abi. */
typedef sx_status (*sx__gpu_plugin_init_fn)(const sx__gpu_host *host, const sx__gpu_plugin **table);

#ifdef __cplusplus
}
#endif
#endif
