/*
 * gpu_kmeans.cu: Lloyd k-means on the GPU (gpu.h sx__gpu_kmeans), the GPU twin of the Lloyd
 * iterations of src/vector/kmeans.c (which stays the CPU path and the reference).
 *
 * Each pass over the rows, batch by batch (gpu_plan.h sx__gpu_kmeans_plan):
 *   1. SGEMM: T[i][j] = x_i . c_j (batch_rows x k, row-major);
 *   2. argmin_kernel, one warp per row: j* = argmin_j ||c_j||^2 - 2 T[i][j] (ties to the lower
 *      j, as the CPU), distance ||x_i||^2 + that (clamped at 0), both kept on the device for
 *      every row;
 *   3. accumulate_kernel (not in the final pass), one block per row: atomicAdd of the row into
 *      sums[j*] and of 1 into counts[j*].
 * After a pass: update_kernel sets c_j = sums_j / counts_j for non-empty clusters. Empty
 * clusters are re-seeded on the host: the counts come back (k words), and if any is zero the
 * distances come back too and the empty clusters take the rows farthest from their centroids
 * (gpu_plan.c sx__gpu_pick_farthest: deterministic, ties to the lower row), copied from the
 * caller's x. `iters` such passes, then one final assignment pass against the final centroids:
 * assign_out and the inertia (sum of the final distances, in double on the host) come from it.
 *
 * Batching: resident rows are uploaded once; streamed rows go through two pinned staging
 * buffers and two device slots on an upload stream, exactly as gpu_knn.cu's streamed base
 * (upload of batch c+1 overlaps the kernels of batch c).
 *
 * Determinism: float atomicAdd makes the sums' rounding depend on the order the rows arrive,
 * so two runs may differ in the last bits of the centroids (and rarely an assignment).
 *
 * Thread-safety: thread-safe (device lock).
 */
#include <math.h>
#include <string.h>

#include "gpu/gpu_cuda.h"

/* One warp per row i of the batch: nearest centroid by ||c||^2 - 2 x.c, ties to the lower j. */
static __global__ void argmin_kernel(const float *__restrict__ tile, size_t rows, uint32_t k,
                                     const float *__restrict__ cnorm, const float *__restrict__ x,
                                     size_t dim, uint32_t *assign, float *dist)
{
    size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    unsigned lane = threadIdx.x & 31u;
    if (w >= rows) /* warp-uniform */
        return;
    const float *t = tile + w * k;
    float best = INFINITY;
    uint32_t bj = UINT32_MAX;
    for (uint32_t j = lane; j < k; j += 32) {
        float d = fmaf(-2.0f, t[j], cnorm[j]);
        if (d < best) { /* j increases per lane: the first minimum is the lowest j */
            best = d;
            bj = j;
        }
    }
    const float *xr = x + w * dim;
    float xn = 0.0f;
    for (size_t d = lane; d < dim; d += 32)
        xn = fmaf(xr[d], xr[d], xn);
    for (unsigned o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        uint32_t oj = __shfl_xor_sync(0xffffffffu, bj, o);
        if (ob < best || (ob == best && oj < bj)) {
            best = ob;
            bj = oj;
        }
        xn += __shfl_xor_sync(0xffffffffu, xn, o);
    }
    if (lane == 0) {
        if (bj == UINT32_MAX) { /* every distance NaN */
            bj = 0;
            best = INFINITY;
        }
        assign[w] = bj;
        dist[w] = fmaxf(best + xn, 0.0f);
    }
}

/* One block per row: sums[assign[i]] += x_i, counts[assign[i]] += 1. */
static __global__ void accumulate_kernel(const float *__restrict__ x, size_t dim,
                                         const uint32_t *__restrict__ assign, float *sums,
                                         uint32_t *counts)
{
    size_t i = blockIdx.x;
    uint32_t a = assign[i];
    const float *xr = x + i * dim;
    float *sr = sums + (size_t)a * dim;
    for (size_t d = threadIdx.x; d < dim; d += blockDim.x)
        atomicAdd(&sr[d], xr[d]);
    if (threadIdx.x == 0)
        atomicAdd(&counts[a], 1u);
}

static __global__ void update_kernel(float *cent, const float *__restrict__ sums,
                                     const uint32_t *__restrict__ counts, size_t k, size_t dim)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k * dim)
        return;
    uint32_t c = counts[i / dim];
    if (c > 0)
        cent[i] = sums[i] / (float)c;
}

extern "C" sx_status sx__gpu_kmeans(const float *x, size_t n, size_t dim, uint32_t k,
                                    uint32_t iters, float *centroids, uint32_t *assign_out,
                                    double *inertia_out)
{
    sx_status rc = SX_OK;
    size_t budget = 0, g = 0, kk = k;
    bool locked = false;
    sx__gpu_kmeans_plan plan;
    const float one = 1.0f, zero = 0.0f;
    const size_t row_bytes = dim * sizeof(float);
    float *x_d[2] = {NULL, NULL}, *stage_h[2] = {NULL, NULL};
    float *tile_d = NULL, *cent_d = NULL, *cnorm_d = NULL, *sums_d = NULL, *dist_d = NULL;
    uint32_t *counts_d = NULL, *assign_d = NULL;
    uint32_t *counts_h = NULL, *empty_h = NULL, *far_h = NULL;
    float *dist_h = NULL;
    cudaStream_t s_comp = NULL, s_up = NULL;
    cudaEvent_t ev_up[2] = {NULL, NULL}, ev_used[2] = {NULL, NULL};
    cublasHandle_t h = NULL;

    if (!sx__gpu_available())
        return sx__err(SX_EINVAL, "no GPU: %s", sx__gpu_describe());
    if (!x || !centroids)
        return sx__err(SX_EINVAL, "gpu kmeans: NULL rows or centroids");
    if (n >= UINT32_MAX)
        return sx__err(SX_EINVAL, "gpu kmeans: %zu rows exceed 32-bit row numbers", n);
    rc = sx__gpu_kmeans_plan_make(n, dim, kk, SIZE_MAX, &plan); /* argument checks only */
    if (rc != SX_OK)
        return rc;
    rc = sx__gpu_enter(&budget);
    if (rc != SX_OK)
        return rc;
    locked = true;
    rc = sx__gpu_kmeans_plan_make(n, dim, kk, budget, &plan);
    if (rc != SX_OK)
        goto fail;
    counts_h = (uint32_t *)sx__malloc(kk * sizeof(uint32_t));
    empty_h = (uint32_t *)sx__malloc(kk * sizeof(uint32_t));
    if (!counts_h || !empty_h) {
        rc = sx__err(SX_ENOMEM, "gpu kmeans: %zu cluster counts", kk);
        goto fail;
    }

    for (int s = 0; s < (plan.resident ? 1 : 2); s++) {
        SX_CUDA_TRY(cudaMalloc((void **)&x_d[s], (plan.resident ? n : plan.batch_rows) * row_bytes));
        if (!plan.resident)
            SX_CUDA_TRY(cudaMallocHost((void **)&stage_h[s], plan.batch_rows * row_bytes));
        SX_CUDA_TRY(cudaEventCreateWithFlags(&ev_up[s], cudaEventDisableTiming));
        SX_CUDA_TRY(cudaEventCreateWithFlags(&ev_used[s], cudaEventDisableTiming));
    }
    SX_CUDA_TRY(cudaMalloc((void **)&tile_d, plan.batch_rows * kk * sizeof(float)));
    SX_CUDA_TRY(cudaMalloc((void **)&cent_d, kk * row_bytes));
    SX_CUDA_TRY(cudaMalloc((void **)&sums_d, kk * row_bytes));
    SX_CUDA_TRY(cudaMalloc((void **)&cnorm_d, kk * sizeof(float)));
    SX_CUDA_TRY(cudaMalloc((void **)&counts_d, kk * sizeof(uint32_t)));
    SX_CUDA_TRY(cudaMalloc((void **)&assign_d, n * sizeof(uint32_t)));
    SX_CUDA_TRY(cudaMalloc((void **)&dist_d, n * sizeof(float)));
    SX_CUDA_TRY(cudaStreamCreateWithFlags(&s_comp, cudaStreamNonBlocking));
    SX_CUDA_TRY(cudaStreamCreateWithFlags(&s_up, cudaStreamNonBlocking));
    SX_CUBLAS_TRY(cublasCreate(&h));
    SX_CUBLAS_TRY(cublasSetStream(h, s_comp));
    SX_CUBLAS_TRY(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));

    SX_CUDA_TRY(cudaMemcpyAsync(cent_d, centroids, kk * row_bytes, cudaMemcpyHostToDevice, s_comp));
    if (plan.resident)
        SX_CUDA_TRY(cudaMemcpyAsync(x_d[0], x, n * row_bytes, cudaMemcpyHostToDevice, s_comp));

    for (uint32_t pass = 0; pass <= iters; pass++) {
        const bool update = pass < iters;
        size_t n_empty = 0, n_far = 0;
        rc = sx__gpu_row_norms(cent_d, kk, dim, cnorm_d, s_comp);
        if (rc != SX_OK)
            goto fail;
        if (update) {
            SX_CUDA_TRY(cudaMemsetAsync(sums_d, 0, kk * row_bytes, s_comp));
            SX_CUDA_TRY(cudaMemsetAsync(counts_d, 0, kk * sizeof(uint32_t), s_comp));
        }
        for (size_t b = 0; b < plan.n_batches; b++) {
            size_t r0, rows;
            const float *xp;
            int u = 0;
            sx__gpu_kmeans_plan_batch(&plan, b, &r0, &rows);
            if (plan.resident) {
                xp = x_d[0] + r0 * dim;
            } else {
                u = (int)(g & 1);
                SX_CUDA_TRY(cudaEventSynchronize(ev_up[u]));
                memcpy(stage_h[u], x + r0 * dim, rows * row_bytes);
                SX_CUDA_TRY(cudaStreamWaitEvent(s_up, ev_used[u], 0));
                SX_CUDA_TRY(cudaMemcpyAsync(x_d[u], stage_h[u], rows * row_bytes,
                                            cudaMemcpyHostToDevice, s_up));
                SX_CUDA_TRY(cudaEventRecord(ev_up[u], s_up));
                SX_CUDA_TRY(cudaStreamWaitEvent(s_comp, ev_up[u], 0));
                xp = x_d[u];
            }
            /* column-major view: tile^T (k x rows) = C (k x dim) . X^T (dim x rows) */
            SX_CUBLAS_TRY(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)kk, (int)rows, (int)dim,
                                      &one, cent_d, (int)dim, xp, (int)dim, &zero, tile_d,
                                      (int)kk));
            argmin_kernel<<<sx_gpu_blocks(rows * 32, SX_GPU_WARP_BLOCK), SX_GPU_WARP_BLOCK, 0,
                            s_comp>>>(tile_d, rows, k, cnorm_d, xp, dim, assign_d + r0,
                                      dist_d + r0);
            SX_LAUNCH_TRY("argmin_kernel");
            if (update) {
                accumulate_kernel<<<(unsigned)rows, dim >= 256 ? 256u : 128u, 0, s_comp>>>(
                    xp, dim, assign_d + r0, sums_d, counts_d);
                SX_LAUNCH_TRY("accumulate_kernel");
            }
            if (!plan.resident) {
                SX_CUDA_TRY(cudaEventRecord(ev_used[u], s_comp));
                g++;
            }
        }
        if (!update)
            break;
        update_kernel<<<sx_gpu_blocks(kk * dim, 256), 256, 0, s_comp>>>(cent_d, sums_d, counts_d,
                                                                         kk, dim);
        SX_LAUNCH_TRY("update_kernel");
        SX_CUDA_TRY(cudaMemcpyAsync(counts_h, counts_d, kk * sizeof(uint32_t),
                                    cudaMemcpyDeviceToHost, s_comp));
        SX_CUDA_TRY(cudaStreamSynchronize(s_comp));
        for (size_t j = 0; j < kk; j++)
            if (counts_h[j] == 0)
                empty_h[n_empty++] = (uint32_t)j;
        if (n_empty == 0)
            continue;
        /* Re-seed: the empty clusters take the rows farthest from their centroids. */
        if (!dist_h) {
            dist_h = (float *)sx__malloc(n * sizeof(float));
            far_h = (uint32_t *)sx__malloc(kk * sizeof(uint32_t));
            if (!dist_h || !far_h) {
                rc = sx__err(SX_ENOMEM, "gpu kmeans: %zu row distances", n);
                goto fail;
            }
        }
        SX_CUDA_TRY(cudaMemcpy(dist_h, dist_d, n * sizeof(float), cudaMemcpyDeviceToHost));
        rc = sx__gpu_pick_farthest(dist_h, n, n_empty, far_h, &n_far);
        if (rc != SX_OK)
            goto fail;
        for (size_t e = 0; e < n_far; e++)
            SX_CUDA_TRY(cudaMemcpy(cent_d + (size_t)empty_h[e] * dim, x + (size_t)far_h[e] * dim,
                                   row_bytes, cudaMemcpyHostToDevice));
    }

    SX_CUDA_TRY(cudaMemcpyAsync(centroids, cent_d, kk * row_bytes, cudaMemcpyDeviceToHost, s_comp));
    if (assign_out)
        SX_CUDA_TRY(cudaMemcpyAsync(assign_out, assign_d, n * sizeof(uint32_t),
                                    cudaMemcpyDeviceToHost, s_comp));
    if (inertia_out) {
        if (!dist_h) {
            dist_h = (float *)sx__malloc(n * sizeof(float));
            if (!dist_h) {
                rc = sx__err(SX_ENOMEM, "gpu kmeans: %zu row distances", n);
                goto fail;
            }
        }
        SX_CUDA_TRY(cudaMemcpyAsync(dist_h, dist_d, n * sizeof(float), cudaMemcpyDeviceToHost,
                                    s_comp));
    }
    SX_CUDA_TRY(cudaStreamSynchronize(s_comp));
    SX_CUDA_TRY(cudaStreamSynchronize(s_up));
    if (inertia_out) {
        double sum = 0.0;
        for (size_t i = 0; i < n; i++)
            sum += (double)dist_h[i];
        *inertia_out = sum;
    }

fail:
    if (rc != SX_OK && locked)
        (void)cudaDeviceSynchronize();
    if (h)
        (void)cublasDestroy(h);
    for (int s = 0; s < 2; s++) {
        (void)cudaFree(x_d[s]);
        if (stage_h[s])
            (void)cudaFreeHost(stage_h[s]);
        if (ev_up[s])
            (void)cudaEventDestroy(ev_up[s]);
        if (ev_used[s])
            (void)cudaEventDestroy(ev_used[s]);
    }
    (void)cudaFree(tile_d);
    (void)cudaFree(cent_d);
    (void)cudaFree(sums_d);
    (void)cudaFree(cnorm_d);
    (void)cudaFree(counts_d);
    (void)cudaFree(assign_d);
    (void)cudaFree(dist_d);
    if (s_comp)
        (void)cudaStreamDestroy(s_comp);
    if (s_up)
        (void)cudaStreamDestroy(s_up);
    if (locked)
        sx__gpu_leave();
    sx__free(counts_h);
    sx__free(empty_h);
    sx__free(far_h);
    sx__free(dist_h);
    return rc;
}
