/*
 * gpu_knn.cu: exact brute-force k nearest neighbours on the GPU (gpu.h sx__gpu_knn), also the
 * initial kNN graph of the CAGRA build (gpu_cagra.cu, through sx__gpu_knn_locked).
 *
 * Algorithm. The plan (gpu_plan.h) splits the queries into batches of query_rows and the base
 * into tiles of tile_cols rows. For each batch, for each tile:
 *   1. SGEMM (cuBLAS): T[i][j] = q_i . x_j, a query_rows x tile_cols row-major tile;
 *   2. select_kernel, one 256-thread block per query row: merges the row's running top-k
 *      (kept on the device across tiles) with the tile's candidates, where a candidate's partial
 *      distance is ||x_j||^2 - 2 T[i][j] (L2; ||q_i||^2 is added at the end) or -T[i][j] (IP).
 * then finalize_kernel turns the partial distances into the reported ones and the batch's
 * results are downloaded (or copied into the caller's device array for CAGRA).
 *
 * Selection kernel (select_kernel). Shared memory holds one array of P = 4096 (distance, id)
 * pairs: [0,k) the running top-k sorted by (distance, id), [k, P) a candidate buffer. Rounds of
 * 1024 tile entries (4 per thread): a thread appends an entry to the buffer (shared atomic
 * counter) only when it beats the current k-th pair (its threshold register). After each round
 * (two barriers: the count is read between them, so no thread can bump it while another still
 * reads it) the block flushes when fewer than 1024 free slots remain, or at the end of the
 * tile: bitonic sort of the top-k plus the buffer (padded to a power of two), the first k are
 * the new top-k, the buffer empties and the threshold tightens. The order is total ((distance,
 * id), ties to the lower id), so the result is exactly the k smallest pairs of a full sort,
 * independent of the tiling. NaN distances never enter.
 *
 * Overlap. Three streams: `comp` runs SGEMM and the kernels, `up` uploads streamed base chunks,
 * `down` downloads results. Streamed chunk c (slot c % 2): the host waits until the upload of
 * chunk c-2 left pinned staging slot c % 2, copies chunk c into it, and `up` waits until the
 * kernels that read device slot c % 2 (chunk c-2) finished before uploading; so the copy of chunk
 * c+1 overlaps the kernels of chunk c. Batch b uses result slot b % 2; `comp` waits until the
 * download of batch b-2 left that slot before reusing it, and the host copies batch b-1's results
 * into the caller's arrays while batch b computes. Queries are uploaded from the caller's memory
 * on `comp` (small next to the base; with queries == base and a resident base, the batch is read
 * from the device copy of the base instead).
 *
 * Precision. FP32 SGEMM, L2 through the norm expansion (as the CPU FLAT GEMM path): near-ties
 * may order differently from a direct difference. tf32 (CAGRA's initial graph) uses TF32 tensor
 * cores: 10-bit mantissa inputs, FP32 accumulation.
 *
 * Thread-safety: sx__gpu_knn is thread-safe (device lock); sx__gpu_knn_locked needs the lock.
 */
#include <math.h>
#include <string.h>

#include "gpu/gpu_cuda.h"

#define SEL_THREADS 256u
#define SEL_PER     4u
#define SEL_ROUND   (SEL_THREADS * SEL_PER)
#define SEL_P       4096u /* shared pairs: k <= 1024 leaves >= 3072 buffer slots >= 2 rounds */

static __device__ __forceinline__ bool pair_lt(float da, uint32_t ia, float db, uint32_t ib)
{
    return da < db || (da == db && ia < ib);
}

/* out[r] = ||x_r||^2 for rows [0, rows): one warp per row. */
static __global__ void norms_kernel(const float *__restrict__ x, size_t rows, size_t dim,
                                    float *__restrict__ out)
{
    size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    unsigned lane = threadIdx.x & 31u;
    if (w >= rows) /* warp-uniform */
        return;
    const float *r = x + w * dim;
    float s = 0.0f;
    for (size_t d = lane; d < dim; d += 32) {
        float v = r[d];
        s = fmaf(v, v, s);
    }
    for (unsigned o = 16; o > 0; o >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0)
        out[w] = s;
}

static __global__ void init_top_kernel(float *d, uint32_t *id, size_t count)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        d[i] = INFINITY;
        id[i] = UINT32_MAX;
    }
}

/* Bitonic sort of ad/ai[0, p2) by (distance, id), p2 a power of two; whole block. */
static __device__ void block_sort(float *ad, uint32_t *ai, uint32_t p2)
{
    for (uint32_t size = 2; size <= p2; size <<= 1) {
        for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
            for (uint32_t t = threadIdx.x; t < p2 / 2; t += blockDim.x) {
                uint32_t i = 2 * t - (t & (stride - 1));
                uint32_t j = i + stride;
                float di = ad[i], dj = ad[j];
                uint32_t ii = ai[i], ij = ai[j];
                bool up = (i & size) == 0;
                bool swap = up ? pair_lt(dj, ij, di, ii) : pair_lt(di, ii, dj, ij);
                if (swap) {
                    ad[i] = dj;
                    ad[j] = di;
                    ai[i] = ij;
                    ai[j] = ii;
                }
            }
            __syncthreads();
        }
    }
}

/* One block per query row r of the batch: merges tile row r (cols entries, base ids col0 + j)
 * into the running top-k top_d/top_i[r*k, r*k+k). bnorm: tile's base norms (L2) or NULL (IP).
 * self0: the batch's first global query row when excluding self (queries == base), else
 * UINT32_MAX (no base id equals it: n < UINT32_MAX). Launch: SEL_THREADS threads,
 * SEL_P * 8 bytes of dynamic shared memory. */
static __global__ void __launch_bounds__(SEL_THREADS)
    select_kernel(const float *__restrict__ tile, uint32_t cols, uint32_t col0,
                  const float *__restrict__ bnorm, float *top_d, uint32_t *top_i, uint32_t k,
                  uint32_t self0)
{
    extern __shared__ __align__(16) unsigned char smem[];
    float *ad = reinterpret_cast<float *>(smem);
    uint32_t *ai = reinterpret_cast<uint32_t *>(smem + SEL_P * sizeof(float));
    __shared__ uint32_t cnt;
    const uint32_t r = blockIdx.x, tid = threadIdx.x, cap = SEL_P - k;
    const float *trow = tile + (size_t)r * cols;
    float *rd = top_d + (size_t)r * k;
    uint32_t *ri = top_i + (size_t)r * k;
    const uint32_t self = self0 == UINT32_MAX ? UINT32_MAX : self0 + r;

    for (uint32_t t = tid; t < k; t += SEL_THREADS) {
        ad[t] = rd[t];
        ai[t] = ri[t];
    }
    if (tid == 0)
        cnt = 0;
    __syncthreads();
    float thr_d = ad[k - 1];
    uint32_t thr_i = ai[k - 1];

    for (uint32_t j0 = 0; j0 < cols; j0 += SEL_ROUND) {
#pragma unroll
        for (uint32_t p = 0; p < SEL_PER; p++) {
            uint32_t j = j0 + p * SEL_THREADS + tid;
            if (j < cols) {
                float v = trow[j];
                float d = bnorm ? fmaf(-2.0f, v, bnorm[j]) : -v;
                uint32_t id = col0 + j;
                if (id != self && pair_lt(d, id, thr_d, thr_i)) {
                    uint32_t s = atomicAdd(&cnt, 1u);
                    ad[k + s] = d; /* s < cap: at most SEL_ROUND per round, flushed below */
                    ai[k + s] = id;
                }
            }
        }
        __syncthreads();
        const uint32_t c = cnt;
        __syncthreads(); /* every thread has read cnt before anyone changes it */
        const bool last = j0 + SEL_ROUND >= cols;
        if (c > cap - SEL_ROUND || (last && c > 0)) { /* uniform: c, j0, cols are */
            uint32_t m = k + c, p2 = 1;
            while (p2 < m)
                p2 <<= 1;
            for (uint32_t t = m + tid; t < p2; t += SEL_THREADS) {
                ad[t] = INFINITY;
                ai[t] = UINT32_MAX;
            }
            __syncthreads();
            block_sort(ad, ai, p2); /* ends with a barrier */
            if (tid == 0)
                cnt = 0;
            __syncthreads();
            thr_d = ad[k - 1];
            thr_i = ai[k - 1];
        }
    }
    for (uint32_t t = tid; t < k; t += SEL_THREADS) {
        rd[t] = ad[t];
        ri[t] = ai[t];
    }
}

/* Partial distances -> reported ones: + ||q||^2 (L2, clamped at 0), +inf for empty slots. */
static __global__ void finalize_kernel(float *d, const uint32_t *id, size_t rows, uint32_t k,
                                       const float *qnorm)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * k)
        return;
    if (id[i] == UINT32_MAX)
        d[i] = INFINITY;
    else if (qnorm)
        d[i] = fmaxf(d[i] + qnorm[i / k], 0.0f);
}

extern "C" sx_status sx__gpu_row_norms(const float *x, size_t rows, size_t dim, float *out,
                                       cudaStream_t s)
{
    sx_status rc = SX_OK;
    if (rows == 0)
        return SX_OK;
    norms_kernel<<<sx_gpu_blocks(rows * 32, SX_GPU_WARP_BLOCK), SX_GPU_WARP_BLOCK, 0, s>>>(
        x, rows, dim, out);
    SX_LAUNCH_TRY("norms_kernel");
fail:
    return rc;
}

extern "C" sx_status sx__gpu_knn_locked(const float *base, size_t n, const float *queries,
                                        size_t nq, size_t dim, sx_metric metric, uint32_t k,
                                        bool exclude_self, bool tf32, size_t budget,
                                        uint32_t *out_ids, float *out_dist, uint32_t *dev_ids)
{
    sx_status rc = SX_OK;
    sx__gpu_knn_plan plan;
    const bool l2 = metric == SX_METRIC_L2;
    const bool same = queries == base;
    const bool skip_self = same && exclude_self;
    const float one = 1.0f, zero = 0.0f;
    float *base_d[2] = {NULL, NULL}, *bnorm_d[2] = {NULL, NULL};
    float *q_d = NULL, *qn_d = NULL, *tile_d = NULL;
    float *top_d[2] = {NULL, NULL};
    uint32_t *topi_d[2] = {NULL, NULL};
    float *stage_h[2] = {NULL, NULL}, *res_d_h[2] = {NULL, NULL};
    uint32_t *res_i_h[2] = {NULL, NULL};
    cudaStream_t s_comp = NULL, s_up = NULL, s_down = NULL;
    cudaEvent_t ev_up[2] = {NULL, NULL}, ev_used[2] = {NULL, NULL};
    cudaEvent_t ev_done[2] = {NULL, NULL}, ev_res[2] = {NULL, NULL};
    cublasHandle_t h = NULL;
    size_t g = 0, prev_b = SIZE_MAX, base_rows;
    const size_t row_bytes = dim * sizeof(float);

    rc = sx__gpu_knn_plan_make(n, nq, dim, k, dev_ids != NULL, budget, &plan);
    if (rc != SX_OK)
        return rc;
    if (nq == 0)
        return SX_OK;
    if (n == 0) { /* nothing to find: empty results */
        if (dev_ids)
            return sx__err(SX_EINVAL, "gpu knn: empty base");
        for (size_t i = 0; i < nq * (size_t)k; i++) {
            out_ids[i] = UINT32_MAX;
            if (out_dist)
                out_dist[i] = INFINITY;
        }
        return SX_OK;
    }

    base_rows = plan.resident ? n : plan.tile_cols;
    for (int s = 0; s < (plan.resident ? 1 : 2); s++) {
        SX_CUDA_TRY(cudaMalloc((void **)&base_d[s], base_rows * row_bytes));
        SX_CUDA_TRY(cudaMalloc((void **)&bnorm_d[s], base_rows * sizeof(float)));
        if (!plan.resident)
            SX_CUDA_TRY(cudaMallocHost((void **)&stage_h[s], base_rows * row_bytes));
    }
    SX_CUDA_TRY(cudaMalloc((void **)&q_d, plan.query_rows * row_bytes));
    SX_CUDA_TRY(cudaMalloc((void **)&qn_d, plan.query_rows * sizeof(float)));
    SX_CUDA_TRY(cudaMalloc((void **)&tile_d, plan.query_rows * plan.tile_cols * sizeof(float)));
    for (int s = 0; s < 2; s++) {
        SX_CUDA_TRY(cudaMalloc((void **)&top_d[s], plan.query_rows * k * sizeof(float)));
        SX_CUDA_TRY(cudaMalloc((void **)&topi_d[s], plan.query_rows * k * sizeof(uint32_t)));
        if (!dev_ids) {
            SX_CUDA_TRY(cudaMallocHost((void **)&res_d_h[s], plan.query_rows * k * sizeof(float)));
            SX_CUDA_TRY(cudaMallocHost((void **)&res_i_h[s], plan.query_rows * k * sizeof(uint32_t)));
        }
        SX_CUDA_TRY(cudaEventCreateWithFlags(&ev_up[s], cudaEventDisableTiming));
        SX_CUDA_TRY(cudaEventCreateWithFlags(&ev_used[s], cudaEventDisableTiming));
        SX_CUDA_TRY(cudaEventCreateWithFlags(&ev_done[s], cudaEventDisableTiming));
        SX_CUDA_TRY(cudaEventCreateWithFlags(&ev_res[s], cudaEventDisableTiming));
    }
    SX_CUDA_TRY(cudaStreamCreateWithFlags(&s_comp, cudaStreamNonBlocking));
    SX_CUDA_TRY(cudaStreamCreateWithFlags(&s_up, cudaStreamNonBlocking));
    SX_CUDA_TRY(cudaStreamCreateWithFlags(&s_down, cudaStreamNonBlocking));
    SX_CUBLAS_TRY(cublasCreate(&h));
    SX_CUBLAS_TRY(cublasSetStream(h, s_comp));
    SX_CUBLAS_TRY(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    SX_CUDA_TRY(cudaFuncSetAttribute(select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)(SEL_P * 8)));

    if (plan.resident) {
        SX_CUDA_TRY(cudaMemcpyAsync(base_d[0], base, n * row_bytes, cudaMemcpyHostToDevice, s_comp));
        if (l2) {
            rc = sx__gpu_row_norms(base_d[0], n, dim, bnorm_d[0], s_comp);
            if (rc != SX_OK)
                goto fail;
        }
    }

    for (size_t b = 0; b < plan.n_batches; b++) {
        size_t q0, rows;
        const int slot = (int)(b & 1);
        const float *qp, *qnp;
        sx__gpu_knn_plan_batch(&plan, b, &q0, &rows);
        if (same && plan.resident) {
            qp = base_d[0] + q0 * dim;
            qnp = bnorm_d[0] + q0;
        } else {
            SX_CUDA_TRY(cudaMemcpyAsync(q_d, queries + q0 * dim, rows * row_bytes,
                                        cudaMemcpyHostToDevice, s_comp));
            if (l2) {
                rc = sx__gpu_row_norms(q_d, rows, dim, qn_d, s_comp);
                if (rc != SX_OK)
                    goto fail;
            }
            qp = q_d;
            qnp = qn_d;
        }
        /* result slot free again: batch b-2's download finished */
        SX_CUDA_TRY(cudaStreamWaitEvent(s_comp, ev_res[slot], 0));
        init_top_kernel<<<sx_gpu_blocks(rows * k, 256), 256, 0, s_comp>>>(top_d[slot],
                                                                            topi_d[slot], rows * k);
        SX_LAUNCH_TRY("init_top_kernel");

        for (size_t t = 0; t < plan.n_tiles; t++) {
            size_t c0, cols;
            const float *bp, *bnp;
            int u = 0;
            sx__gpu_knn_plan_tile(&plan, t, &c0, &cols);
            if (plan.resident) {
                bp = base_d[0] + c0 * dim;
                bnp = bnorm_d[0] + c0;
            } else {
                u = (int)(g & 1);
                /* staging slot u free: the upload of chunk g-2 finished */
                SX_CUDA_TRY(cudaEventSynchronize(ev_up[u]));
                memcpy(stage_h[u], base + c0 * dim, cols * row_bytes);
                /* device slot u free: the kernels that read chunk g-2 finished */
                SX_CUDA_TRY(cudaStreamWaitEvent(s_up, ev_used[u], 0));
                SX_CUDA_TRY(cudaMemcpyAsync(base_d[u], stage_h[u], cols * row_bytes,
                                            cudaMemcpyHostToDevice, s_up));
                SX_CUDA_TRY(cudaEventRecord(ev_up[u], s_up));
                SX_CUDA_TRY(cudaStreamWaitEvent(s_comp, ev_up[u], 0));
                if (l2) {
                    rc = sx__gpu_row_norms(base_d[u], cols, dim, bnorm_d[u], s_comp);
                    if (rc != SX_OK)
                        goto fail;
                }
                bp = base_d[u];
                bnp = bnorm_d[u];
            }
            /* column-major view: tile^T (cols x rows) = X_tile (cols x dim) . Q^T (dim x rows) */
            SX_CUBLAS_TRY(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)cols, (int)rows, (int)dim,
                                      &one, bp, (int)dim, qp, (int)dim, &zero, tile_d, (int)cols));
            select_kernel<<<(unsigned)rows, SEL_THREADS, SEL_P * 8, s_comp>>>(
                tile_d, (uint32_t)cols, (uint32_t)c0, l2 ? bnp : NULL, top_d[slot], topi_d[slot],
                k, skip_self ? (uint32_t)q0 : UINT32_MAX);
            SX_LAUNCH_TRY("select_kernel");
            if (!plan.resident) {
                SX_CUDA_TRY(cudaEventRecord(ev_used[u], s_comp));
                g++;
            }
        }
        finalize_kernel<<<sx_gpu_blocks(rows * k, 256), 256, 0, s_comp>>>(
            top_d[slot], topi_d[slot], rows, k, l2 ? qnp : NULL);
        SX_LAUNCH_TRY("finalize_kernel");
        if (dev_ids) {
            SX_CUDA_TRY(cudaMemcpyAsync(dev_ids + q0 * k, topi_d[slot], rows * k * sizeof(uint32_t),
                                        cudaMemcpyDeviceToDevice, s_comp));
            continue;
        }
        SX_CUDA_TRY(cudaEventRecord(ev_done[slot], s_comp));
        SX_CUDA_TRY(cudaStreamWaitEvent(s_down, ev_done[slot], 0));
        SX_CUDA_TRY(cudaMemcpyAsync(res_d_h[slot], top_d[slot], rows * k * sizeof(float),
                                    cudaMemcpyDeviceToHost, s_down));
        SX_CUDA_TRY(cudaMemcpyAsync(res_i_h[slot], topi_d[slot], rows * k * sizeof(uint32_t),
                                    cudaMemcpyDeviceToHost, s_down));
        SX_CUDA_TRY(cudaEventRecord(ev_res[slot], s_down));
        /* while batch b computes, hand batch b-1's results over */
        if (prev_b != SIZE_MAX) {
            size_t p0, prow;
            const int ps = (int)(prev_b & 1);
            sx__gpu_knn_plan_batch(&plan, prev_b, &p0, &prow);
            SX_CUDA_TRY(cudaEventSynchronize(ev_res[ps]));
            memcpy(out_ids + p0 * k, res_i_h[ps], prow * k * sizeof(uint32_t));
            if (out_dist)
                memcpy(out_dist + p0 * k, res_d_h[ps], prow * k * sizeof(float));
        }
        prev_b = b;
    }
    if (!dev_ids && prev_b != SIZE_MAX) {
        size_t p0, prow;
        const int ps = (int)(prev_b & 1);
        sx__gpu_knn_plan_batch(&plan, prev_b, &p0, &prow);
        SX_CUDA_TRY(cudaEventSynchronize(ev_res[ps]));
        memcpy(out_ids + p0 * k, res_i_h[ps], prow * k * sizeof(uint32_t));
        if (out_dist)
            memcpy(out_dist + p0 * k, res_d_h[ps], prow * k * sizeof(float));
    }
    SX_CUDA_TRY(cudaStreamSynchronize(s_comp));
    SX_CUDA_TRY(cudaStreamSynchronize(s_up));
    SX_CUDA_TRY(cudaStreamSynchronize(s_down));

fail:
    /* Nothing may still read or write the buffers below (pinned staging especially). */
    if (rc != SX_OK)
        (void)cudaDeviceSynchronize();
    if (h)
        (void)cublasDestroy(h);
    for (int s = 0; s < 2; s++) {
        (void)cudaFree(base_d[s]);
        (void)cudaFree(bnorm_d[s]);
        (void)cudaFree(top_d[s]);
        (void)cudaFree(topi_d[s]);
        if (stage_h[s])
            (void)cudaFreeHost(stage_h[s]);
        if (res_d_h[s])
            (void)cudaFreeHost(res_d_h[s]);
        if (res_i_h[s])
            (void)cudaFreeHost(res_i_h[s]);
        if (ev_up[s])
            (void)cudaEventDestroy(ev_up[s]);
        if (ev_used[s])
            (void)cudaEventDestroy(ev_used[s]);
        if (ev_done[s])
            (void)cudaEventDestroy(ev_done[s]);
        if (ev_res[s])
            (void)cudaEventDestroy(ev_res[s]);
    }
    (void)cudaFree(q_d);
    (void)cudaFree(qn_d);
    (void)cudaFree(tile_d);
    if (s_comp)
        (void)cudaStreamDestroy(s_comp);
    if (s_up)
        (void)cudaStreamDestroy(s_up);
    if (s_down)
        (void)cudaStreamDestroy(s_down);
    return rc;
}

extern "C" sx_status sx__gpu_knn(const float *base, size_t n, const float *queries, size_t nq,
                                 size_t dim, sx_metric metric, uint32_t k, bool exclude_self,
                                 uint32_t *out_ids, float *out_dist)
{
    sx_status rc;
    size_t budget = 0;
    if (!sx__gpu_available())
        return sx__err(SX_EINVAL, "no GPU: %s", sx__gpu_describe());
    if ((n > 0 && !base) || (nq > 0 && (!queries || !out_ids)))
        return sx__err(SX_EINVAL, "gpu knn: NULL vectors or output");
    if (queries == base && nq > n)
        return sx__err(SX_EINVAL, "gpu knn: queries == base but nq %zu > n %zu", nq, n);
    if (n >= UINT32_MAX || nq >= UINT32_MAX)
        return sx__err(SX_EINVAL, "gpu knn: %zu base rows / %zu queries exceed 32-bit ids", n, nq);
    if (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL, "gpu knn: unknown metric %d", (int)metric);
    if (k == 0 || k > SX__GPU_TOPK_MAX)
        return sx__err(SX_EINVAL, "gpu knn: k %u out of range 1..%u", k, SX__GPU_TOPK_MAX);
    if (dim == 0 || dim > SX__GPU_DIM_MAX)
        return sx__err(SX_EINVAL, "gpu knn: dim %zu out of range 1..%u", dim, SX__GPU_DIM_MAX);
    rc = sx__gpu_enter(&budget);
    if (rc != SX_OK)
        return rc;
    rc = sx__gpu_knn_locked(base, n, queries, nq, dim, metric, k, exclude_self, false, budget,
                            out_ids, out_dist, NULL);
    sx__gpu_leave();
    return rc;
}
