/*
 * gpu_device.cu: device detection, the device lock, the memory budget and CUDA error mapping.
 *
 * Detection (once per process, pthread_once): SX_GPU=off|0|no|false forces "no GPU"; otherwise
 * cudaGetDeviceCount (fails without a driver: the reason is kept), cudaGetDeviceProperties of
 * device 0 (SX_GPU_DEVICE=<n> picks another), and a probe kernel launch + synchronize, which
 * fails when this build has no code for the device's architecture (CMake CUDA_ARCHITECTURES).
 * The result and a one-line description are cached; callers log the description once when
 * they fall back to their CPU twin.
 *
 * Sticky errors. After an error that loses the CUDA context (illegal address, launch failure,
 * ...) every later CUDA call of the process fails; sx__gpu_cuda_fail then marks the GPU
 * unusable (sx__gpu_available() turns false, the description says why), so later builds take
 * the CPU path instead of failing.
 *
 * Locking. One mutex serialises GPU jobs (gpu.h: one build at a time uses the GPU). The budget
 * is read from cudaMemGetInfo after taking it, so a job may spend it all (other processes on
 * the same GPU are covered only by the margin, gpu_plan.c sx__gpu_budget).
 *
 * Thread-safety: all functions are thread-safe.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_cuda.h"

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static bool detected_ok;        /* written once under detect_once */
static int device_id;           /* written once under detect_once */
static char detect_desc[256];   /* written once under detect_once */
static pthread_mutex_t device_mu = PTHREAD_MUTEX_INITIALIZER;
static bool broken;                /* release after broken_desc is written, acquire to read it */
static char broken_desc[320];   /* guarded by: device_mu (written once, before broken) */

static __global__ void probe_kernel(int *out)
{
    *out = 42;
}

static bool env_off(const char *v)
{
    return v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcmp(v, "no") == 0 ||
                 strcmp(v, "false") == 0 || strcmp(v, "OFF") == 0);
}

static void detect(void)
{
    int count = 0, probe = 0, *probe_d = NULL;
    cudaDeviceProp prop;
    cudaError_t e;
    const char *dev = getenv("SX_GPU_DEVICE");
    if (env_off(getenv("SX_GPU"))) {
        snprintf(detect_desc, sizeof detect_desc, "no GPU: disabled by SX_GPU=off");
        return;
    }
    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(detect_desc, sizeof detect_desc, "no usable GPU: cudaGetDeviceCount: %s",
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return;
    }
    if (count <= 0) {
        snprintf(detect_desc, sizeof detect_desc, "no usable GPU: no CUDA device");
        return;
    }
    if (dev && *dev) {
        char *end = NULL;
        long v = strtol(dev, &end, 10);
        if (*end != '\0' || v < 0 || v >= count) {
            snprintf(detect_desc, sizeof detect_desc,
                     "no usable GPU: SX_GPU_DEVICE=%s is not a device number 0..%d", dev,
                     count - 1);
            return;
        }
        device_id = (int)v;
    }
    e = cudaGetDeviceProperties(&prop, device_id);
    if (e == cudaSuccess)
        e = cudaSetDevice(device_id);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&probe_d, sizeof(int));
    if (e == cudaSuccess) {
        probe_kernel<<<1, 1>>>(probe_d);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(&probe, probe_d, sizeof(int), cudaMemcpyDeviceToHost);
    if (probe_d)
        (void)cudaFree(probe_d);
    if (e == cudaSuccess && probe != 42)
        e = cudaErrorUnknown;
    if (e != cudaSuccess) {
        snprintf(detect_desc, sizeof detect_desc, "no usable GPU: device %d: %s", device_id,
                 cudaGetErrorString(e));
        (void)cudaGetLastError();
        return;
    }
    snprintf(detect_desc, sizeof detect_desc, "%s, %.0f GiB, cc %d.%d", prop.name,
             (double)prop.totalGlobalMem / (double)(1ull << 30), prop.major, prop.minor);
    detected_ok = true;
}

extern "C" bool sx__gpu_available(void)
{
    pthread_once(&detect_once, detect);
    return detected_ok && !__atomic_load_n(&broken, __ATOMIC_ACQUIRE);
}

extern "C" const char *sx__gpu_describe(void)
{
    pthread_once(&detect_once, detect);
    if (__atomic_load_n(&broken, __ATOMIC_ACQUIRE))
        return broken_desc;
    return detect_desc;
}

/* Errors after which the context is unusable (CUDA runtime API: "sticky" errors). */
static bool sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
        return true;
    default:
        return false;
    }
}

extern "C" sx_status sx__gpu_cuda_fail(const char *what, cudaError_t e)
{
    const char *msg = cudaGetErrorString(e);
    if (sticky(e) && !__atomic_load_n(&broken, __ATOMIC_RELAXED)) {
        /* Called under device_mu (every CUDA call runs inside sx__gpu_enter/leave). */
        snprintf(broken_desc, sizeof broken_desc, "GPU disabled after a CUDA error: %s: %s",
                 what, msg);
        __atomic_store_n(&broken, true, __ATOMIC_RELEASE);
    }
    return sx__err(e == cudaErrorMemoryAllocation ? SX_ENOMEM : SX_EIO, "gpu: %s: %s", what,
                   msg);
}

static const char *cublas_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "NOT_SUPPORTED";
    default: return "error";
    }
}

extern "C" sx_status sx__gpu_cublas_fail(const char *what, cublasStatus_t s)
{
    return sx__err(s == CUBLAS_STATUS_ALLOC_FAILED ? SX_ENOMEM : SX_EIO,
                   "gpu: %s: cuBLAS status %s (%d)", what, cublas_name(s), (int)s);
}

extern "C" sx_status sx__gpu_enter(size_t *budget)
{
    sx_status rc = SX_OK;
    size_t free_b = 0, total_b = 0, limit = 0;
    const char *lim = getenv("SX_GPU_MEM_LIMIT");
    if (!sx__gpu_available())
        return sx__err(SX_EINVAL, "no GPU: %s", sx__gpu_describe());
    if (lim && *lim) {
        char *end = NULL;
        unsigned long long v = strtoull(lim, &end, 10);
        if (*end != '\0')
            return sx__err(SX_EINVAL, "SX_GPU_MEM_LIMIT=%s is not a byte count", lim);
        limit = (size_t)v;
    }
    pthread_mutex_lock(&device_mu);
    SX_CUDA_TRY(cudaSetDevice(device_id));
    SX_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
    *budget = sx__gpu_budget(free_b, total_b, limit);
    return SX_OK;
fail:
    pthread_mutex_unlock(&device_mu);
    return rc;
}

extern "C" void sx__gpu_leave(void)
{
    pthread_mutex_unlock(&device_mu);
}
