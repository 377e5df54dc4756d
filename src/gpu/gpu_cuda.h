/*
 * gpu_cuda.h: private header of the CUDA sources (src/gpu/NAME.cu); never included by C files.
 *
 * Conventions of the .cu files:
 *   - C-like CUDA C++: every variable a function may free is declared (NULL) at its top, so the
 *     single `fail:` exit can free everything; no exceptions, no STL (GCC __atomic builtins), no
 *     templates with external linkage (kernels and helpers are static; the plugin they are linked
 *     into exports only sx__gpu_plugin_init, gpu_plugin.h).
 *   - From util they use sx__err, sx__malloc and sx__free only: in the plugin those are
 *     gpu_plugin.cu's forwarders to libsextant's (the host table); nothing else from libsextant
 *     is reachable (the plugin is linked with -Wl,--no-undefined).
 *   - Every CUDA runtime / cuBLAS call is checked with SX_CUDA_TRY / SX_CUBLAS_TRY, which record
 *     the call's text and cudaGetErrorString in the error message and jump to `fail` with rc set
 *     (SX_ENOMEM for an allocation failure, SX_EIO otherwise). Kernel launches are checked with
 *     SX_LAUNCH_TRY (cudaGetLastError). A sticky error (the context is lost: illegal address,
 *     launch failure, ...) also marks the GPU unusable, so later builds take the CPU path.
 *   - Public entry points run under the device lock (sx__gpu_enter / sx__gpu_leave): one GPU
 *     job at a time, so the memory budget read at entry is ours to spend.
 */
#ifndef SX_GPU_CUDA_H
#define SX_GPU_CUDA_H
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu/gpu.h"
#include "gpu/gpu_plan.h"

extern "C" {
#include "util/alloc.h"
#include "util/err.h"
}

/* Records "<what>: <cudaGetErrorString>" and returns SX_ENOMEM (allocation) or SX_EIO. */
extern "C" sx_status sx__gpu_cuda_fail(const char *what, cudaError_t e);
/* Records "<what>: cuBLAS status <name>" and returns SX_ENOMEM (allocation) or SX_EIO. */
extern "C" sx_status sx__gpu_cublas_fail(const char *what, cublasStatus_t s);

/* Checks availability, takes the device lock, selects the device and computes the memory
 * budget (gpu_plan.h sx__gpu_budget; SX_GPU_MEM_LIMIT=<bytes> caps it). On error the lock is
 * not held. Errors: SX_EINVAL (no GPU), SX_EIO. */
extern "C" sx_status sx__gpu_enter(size_t *budget);
/* Releases the device lock taken by a successful sx__gpu_enter. */
extern "C" void sx__gpu_leave(void);

/* The kNN engine (gpu_knn.cu) under the device lock. Results go either to the host
 * (out_ids/out_dist, nq*k each; out_dist may be NULL) or, when dev_ids is not NULL, to a device
 * array of nq*k ids the caller allocated (plan out_dev_bytes, counted in budget). tf32 selects
 * TF32 tensor-core SGEMM (approximate ranks). Arguments are validated by the caller. */
extern "C" sx_status sx__gpu_knn_locked(const float *base,
                                        size_t n,
                                        const float *queries,
                                        size_t nq,
                                        size_t dim,
                                        sx_metric metric,
                                        uint32_t k,
                                        bool exclude_self,
                                        bool tf32,
                                        size_t budget,
                                        uint32_t *out_ids,
                                        float *out_dist,
                                        uint32_t *dev_ids);

/* ||x_r||^2 for rows [0, rows) of x (device), into out (device), on stream s (gpu_knn.cu). */
extern "C" sx_status
sx__gpu_row_norms(const float *x, size_t rows, size_t dim, float *out, cudaStream_t s);

#define SX_CUDA_TRY(call)                \
 do {                                    \
  cudaError_t sx_e_ = (call);            \
  if (sx_e_ != cudaSuccess) {            \
   rc = sx__gpu_cuda_fail(#call, sx_e_); \
   goto fail;                            \
  }                                      \
 } while (0)

#define SX_CUBLAS_TRY(call)                \
 do {                                      \
  cublasStatus_t sx_s_ = (call);           \
  if (sx_s_ != CUBLAS_STATUS_SUCCESS) {    \
   rc = sx__gpu_cublas_fail(#call, sx_s_); \
   goto fail;                              \
  }                                        \
 } while (0)

/* After a kernel launch: launch-configuration errors (and earlier asynchronous ones). */
#define SX_LAUNCH_TRY(name)                       \
 do {                                             \
  cudaError_t sx_e_ = cudaGetLastError();         \
  if (sx_e_ != cudaSuccess) {                     \
   rc = sx__gpu_cuda_fail("launch " name, sx_e_); \
   goto fail;                                     \
  }                                               \
 } while (0)

/* Blocks for warp-per-row kernels: 8 warps per block. */
#define SX_GPU_WARP_BLOCK 256u

static inline unsigned sx_gpu_blocks(size_t threads, unsigned per_block)
{
    return (unsigned)((threads + per_block - 1) / per_block);
}

#endif
