/*
 * gpu_plugin.cu: the entry of the CUDA plugin, libsextant_cuda.so (gpu_plugin.h has the
 * interface, gpu_loader.c the reasons for its shape and the lookup).
 *
 * The plugin is this file, the other .cu files of src/gpu/ (gpu_device, gpu_knn, gpu_kmeans,
 * gpu_cagra), its own copy of gpu_plan.c, the static CUDA runtime and cuBLAS. Its one export is
 * sx__gpu_plugin_init, which hands the loader a table of the gpu.h functions that the .cu files
 * define (hidden here, so they never clash with the loader's functions of the same names in
 * libsextant). The three util functions the .cu files and gpu_plan.c call, sx__err, sx__malloc
 * and sx__free, are defined below as hidden forwarders to the host's table: the message lands
 * in libsextant's thread-local sx_errmsg() buffer and allocations go through libsextant's
 * fault-injection countdown. So the plugin has no undefined reference into libsextant (it is
 * linked with -Wl,--no-undefined).
 *
 * Thread-safety: `host` is written once by sx__gpu_plugin_init, which the loader runs under its
 * pthread_once before any other call; read-only afterwards.
 */
#include <stdarg.h>
#include <stdio.h>

#include "gpu/gpu_cuda.h"
#include "gpu/gpu_plugin.h"

static const sx__gpu_host *host; /* set once by sx__gpu_plugin_init */

extern "C" sx_status sx__err(sx_status st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return host ? host->set_error(st, msg) : st;
}

extern "C" void *sx__malloc(size_t n)
{
    return host ? host->alloc(n) : NULL;
}

extern "C" void sx__free(void *p)
{
    if (host)
        host->release(p);
}

static const sx__gpu_plugin table = {
    SX__GPU_PLUGIN_ABI,  (uint32_t)sizeof(sx__gpu_plugin),
    sx__gpu_available,   sx__gpu_describe,
    sx__gpu_knn,         sx__gpu_kmeans,
    sx__gpu_cagra_build, sx__gpu_cagra_prune_merge,
};

extern "C" __attribute__((visibility("default"))) sx_status
sx__gpu_plugin_init(const sx__gpu_host *h, const sx__gpu_plugin **out)
{
    *out = &table;
    if (!h || h->abi != SX__GPU_PLUGIN_ABI || h->size < sizeof(sx__gpu_host))
        return SX_EINVAL;
    host = h;
    return SX_OK;
}
