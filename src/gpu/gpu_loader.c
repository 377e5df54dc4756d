/*
 * gpu_loader.c: gpu.h for libsextant, in every build. The CUDA code (the .cu files, the static
 * CUDA runtime and cuBLAS) is not linked into libsextant or the sextant binary: it is a plugin,
 * libsextant_cuda.so, that this file opens with dlopen the first time a GPU build, k-means, kNN
 * or device check runs (sx__gpu_available / sx__gpu_describe or any entry point). Until then,
 * and forever in a process that never builds a GPU index, no CUDA library is mapped: a
 * CUDA-enabled `sextant --help` had a peak RSS of 228 MB (libcublas + libcublasLt relocated at
 * start-up) against 12 MB without CUDA (README "GPU index build" has the figures).
 *
 * Why a host table (gpu_plugin.h) rather than the plugin linking libsextant or its own util.
 *   - The plugin must have no undefined reference back into libsextant: a static libsextant.a
 *     user has no libsextant.so for it to bind to, and -fvisibility=hidden keeps the sx__
 *     internals out of every dynamic symbol table anyway. It is linked with -Wl,--no-undefined.
 *   - What the .cu files use from util is sx__err, sx__malloc and sx__free. A private copy of
 *     err.c in the plugin would write its messages into the plugin's own thread-local buffer,
 *     which sx_errmsg() never reads; a private allocator would bypass the fault-injection
 *     countdown (sx__alloc_fail_after) that the OOM tests drive. So these three come from the
 *     host, as callbacks in the table passed to the plugin's init (the plugin defines sx__err,
 *     sx__malloc and sx__free as hidden forwarders, so the .cu sources are unchanged).
 *   - The pure code the plugin shares with the host (gpu_plan.c: plans, memory budget,
 *     farthest-row repair) is compiled into the plugin as its own copy: it has no state, and one
 *     source keeps the plans the CPU tests check identical to the ones that run on the device.
 *   Rejected: linking the plugin against libsextant.so (breaks static users, exports internals);
 *   weak symbols resolved at dlopen time (needs -rdynamic in every executable, fragile).
 *
 * Lookup (first existing file wins; a file that exists but fails to load is reported, not
 * skipped, so the message names the real problem):
 *   1. $SX_CUDA_PLUGIN (a path to the plugin): the only candidate when set and non-empty;
 *   2. next to the running executable (/proc/self/exe), where the build tree puts it beside
 *      build/sextant and the test binaries;
 *   3. next to the shared library holding this code (dladdr), for libsextant.so users;
 *   4. the build directory (SX_CUDA_PLUGIN_BUILD_DIR, CMAKE_BINARY_DIR at configure time);
 *   5. the install libdir (SX_CUDA_PLUGIN_LIBDIR, CMAKE_INSTALL_FULL_LIBDIR).
 * SX_GPU=off|0|no|false skips the lookup altogether (no dlopen). In a build without CUDA
 * (SX_CUDA=OFF) only $SX_CUDA_PLUGIN is tried; without it the answer is "built without CUDA".
 *
 * States (load(), run once under pthread_once): NOT_LOADED -> LOADED (plugin != NULL; the
 * plugin's own detection decides sx__gpu_available) or -> NONE (plugin == NULL, why[] says
 * why, every entry point returns SX_EINVAL "no GPU: <why>" and callers take their CPU twin,
 * logging that line once). The plugin is never closed: the CUDA runtime registers exit handlers.
 *
 * Thread-safety: every function is thread-safe; pthread_once orders the one load before every
 * use of plugin and why[], which are read-only afterwards.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpu/gpu_plugin.h"
#include "util/alloc.h"
#include "util/err.h"

#ifndef SX_CUDA_PLUGIN_BUILD_DIR
# define SX_CUDA_PLUGIN_BUILD_DIR ""
#endif
#ifndef SX_CUDA_PLUGIN_LIBDIR
# define SX_CUDA_PLUGIN_LIBDIR ""
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const sx__gpu_plugin *plugin; /* written once under load_once */
static char why[768];                /* written once under load_once (when plugin is NULL) */

static sx_status host_set_error(sx_status st, const char *msg)
{
    return sx__err(st, "%s", msg);
}

static const sx__gpu_host host = {
    .abi = SX__GPU_PLUGIN_ABI,
    .size = sizeof(sx__gpu_host),
    .set_error = host_set_error,
    .alloc = sx__malloc,
    .release = sx__free,
};

static bool env_off(const char *v)
{
    return v && (strcmp(v, "off") == 0 || strcmp(v, "OFF") == 0 || strcmp(v, "0") == 0 ||
                 strcmp(v, "no") == 0 || strcmp(v, "false") == 0);
}

/* Tries to open path as the plugin. Returns true when a decision was made (the file exists):
 * plugin set, or why[] written. */
static bool try_open(const char *path)
{
    if (access(path, F_OK) != 0)
        return false;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        (void)snprintf(why, sizeof why, "no usable GPU: cannot load the CUDA plugin %s: %s", path,
                       e ? e : "dlopen failed");
        return true;
    }
    sx__gpu_plugin_init_fn init = NULL;
    void *sym = dlsym(h, SX__GPU_PLUGIN_INIT);
    /* ISO C has no function <-> object pointer conversion; POSIX dlsym requires this one. */
    memcpy(&init, &sym, sizeof init);
    if (!init) {
        (void)snprintf(why, sizeof why, "no usable GPU: %s is not a Sextant CUDA plugin (no %s)",
                       path, SX__GPU_PLUGIN_INIT);
        return true;
    }
    const sx__gpu_plugin *t = NULL;
    sx__err_clear();
    sx_status st = init(&host, &t);
    if (st != SX_OK || !t || t->abi != SX__GPU_PLUGIN_ABI || t->size < sizeof(sx__gpu_plugin)) {
        (void)snprintf(why, sizeof why,
                       "no usable GPU: the CUDA plugin %s speaks ABI %u, this library %u (a "
                       "plugin from another Sextant build?)%s%s",
                       path, t ? t->abi : 0u, SX__GPU_PLUGIN_ABI, *sx_errmsg() ? ": " : "",
                       sx_errmsg());
        return true;
    }
    plugin = t;
    return true;
}

#ifdef SX_HAVE_CUDA
/* dir + "/" + SX__GPU_PLUGIN_FILE into out (PATH_MAX); false when dir is empty or too long. */
static bool join(char *out, const char *dir, size_t dir_len)
{
    if (dir_len == 0)
        return false;
    int n = snprintf(out, PATH_MAX, "%.*s/%s", (int)dir_len, dir, SX__GPU_PLUGIN_FILE);
    return n > 0 && n < PATH_MAX;
}

static size_t dir_len_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) : 0;
}

/* Lookup steps 2-5 (see the top of the file). */
static void search(void)
{
    char path[PATH_MAX], seen[4][PATH_MAX], exe[PATH_MAX];
    size_t n_seen = 0;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *dirs[4] = { NULL, NULL, SX_CUDA_PLUGIN_BUILD_DIR, SX_CUDA_PLUGIN_LIBDIR };
    size_t lens[4] = { 0, 0, strlen(SX_CUDA_PLUGIN_BUILD_DIR), strlen(SX_CUDA_PLUGIN_LIBDIR) };
    if (n > 0) {
        exe[n] = '\0';
        dirs[0] = exe;
        lens[0] = dir_len_of(exe);
    }
    Dl_info info;
    void *self = (void *)&sx__gpu_describe;
    if (dladdr(self, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
        !(n > 0 && strcmp(info.dli_fname, exe) == 0)) {
        dirs[1] = info.dli_fname;
        lens[1] = dir_len_of(info.dli_fname);
    }
    for (size_t i = 0; i < 4; i++) {
        if (!dirs[i] || !join(path, dirs[i], lens[i]))
            continue;
        bool dup = false;
        for (size_t j = 0; j < n_seen; j++)
            dup = dup || strcmp(seen[j], path) == 0;
        if (dup)
            continue;
        memcpy(seen[n_seen++], path, strlen(path) + 1);
        if (try_open(path))
            return;
    }
    int w = snprintf(why, sizeof why,
                     "no usable GPU: the CUDA plugin %s was not found (SX_CUDA_PLUGIN unset; "
                     "looked in",
                     SX__GPU_PLUGIN_FILE);
    for (size_t j = 0; j < n_seen && w > 0 && (size_t)w < sizeof why; j++) {
        int m = snprintf(why + w, sizeof why - (size_t)w, "%s %.*s", j ? "," : "",
                         (int)dir_len_of(seen[j]), seen[j]);
        w = m > 0 ? w + m : w;
    }
    if (w > 0 && (size_t)w < sizeof why)
        (void)snprintf(why + w, sizeof why - (size_t)w, ")");
}
#endif

static void load(void)
{
    if (env_off(getenv("SX_GPU"))) {
        (void)snprintf(why, sizeof why, "no GPU: disabled by SX_GPU=off");
        return;
    }
    const char *env = getenv("SX_CUDA_PLUGIN");
    if (env && *env) {
        if (!try_open(env))
            (void)snprintf(why, sizeof why, "no usable GPU: SX_CUDA_PLUGIN=%s: no such file", env);
        return;
    }
#ifdef SX_HAVE_CUDA
    search();
#else
    (void)snprintf(why, sizeof why,
                   "built without CUDA (SX_CUDA=OFF; SX_CUDA_PLUGIN=PATH loads a CUDA plugin)");
#endif
}

static const sx__gpu_plugin *get(void)
{
    pthread_once(&load_once, load);
    return plugin;
}

/* The error of an entry point without a plugin (why[] already starts with "no ..." but for the
 * build without CUDA). */
static sx_status no_gpu(void)
{
    if (strncmp(why, "no ", 3) == 0)
        return sx__err(SX_EINVAL, "%s", why);
    return sx__err(SX_EINVAL, "no GPU: %s", why);
}

bool sx__gpu_available(void)
{
    const sx__gpu_plugin *p = get();
    return p && p->available();
}

const char *sx__gpu_describe(void)
{
    const sx__gpu_plugin *p = get();
    return p ? p->describe() : why;
}

sx_status sx__gpu_knn(const float *base,
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
    const sx__gpu_plugin *p = get();
    if (!p)
        return no_gpu();
    return p->knn(base, n, queries, nq, dim, metric, k, exclude_self, out_ids, out_dist);
}

sx_status sx__gpu_kmeans(const float *x,
                         size_t n,
                         size_t dim,
                         uint32_t k,
                         uint32_t iters,
                         float *centroids,
                         uint32_t *assign_out,
                         double *inertia_out)
{
    const sx__gpu_plugin *p = get();
    if (!p)
        return no_gpu();
    return p->kmeans(x, n, dim, k, iters, centroids, assign_out, inertia_out);
}

sx_status sx__gpu_cagra_build(const float *x,
                              size_t n,
                              size_t dim,
                              sx_metric metric,
                              const sx__cagra_build_params *bp,
                              uint32_t *graph)
{
    const sx__gpu_plugin *p = get();
    if (!p)
        return no_gpu();
    return p->cagra_build(x, n, dim, metric, bp, graph);
}

sx_status sx__gpu_cagra_prune_merge(
    const uint32_t *knn, size_t n, uint32_t ideg, uint32_t deg, uint32_t *graph)
{
    const sx__gpu_plugin *p = get();
    if (!p)
        return no_gpu();
    return p->cagra_prune_merge(knn, n, ideg, deg, graph);
}
