/*
 * gpu_cagra.cu: the CAGRA graph build on the GPU (gpu.h sx__gpu_cagra_build). The algorithm and
 * its per-node steps are described in cagra_rows.h (shared with the CPU side); here:
 *
 *   1. initial kNN graph: sx__gpu_knn_locked over the whole set with queries == base,
 *      k = intermediate_degree, self excluded, ids kept on the device (knn_d, n x ideg);
 *      TF32 tensor-core SGEMM unless p->knn_fp32. build_algo NN_DESCENT is not implemented on
 *      the GPU yet (XXX): it builds the same brute-force graph (exact up to TF32 rounding),
 *      which is at least as good a starting graph, only slower for large n.
 *   2. prune_kernel, one warp per node A: the warp sorts A's row by (id, rank) in shared memory
 *      (rank-counting sort: each lane places its entries by counting smaller keys, so no
 *      barrier-heavy network is needed for <= 1024 entries), then for every neighbour D at rank
 *      i (in order) the lanes scan D's kNN row and binary-search each entry B in the sorted
 *      row: if B sits at rank j > i, detours[j]++ (shared atomic). Entries that are empty, self
 *      or repeated (later copies) get detours = UINT32_MAX. The graph_degree entries with the
 *      smallest (detours, rank) (cagra_rows.h sx__cagra_prune_key) are written in that order.
 *      Cost per node: ideg^2 log(ideg) / 32 per lane, against cuVS's ideg^3 / 32 plain scan.
 *   3. reverse edges, deterministic and in the CPU twin's order: indegree_kernel counts every
 *      node's in-edges, the host turns the counts into segment offsets (prefix sum over n
 *      words), scatter_kernel drops every kept edge A->B at rank r into B's segment as the key
 *      r << 32 | A (arbitrary order), and reverse_select_kernel (one warp per node) keeps the
 *      graph_degree smallest keys in ascending order: sources by (rank, id), exactly what the
 *      CPU's "for r, for A in order, append while there is room" produces.
 *   4. merge_kernel, one thread per node: sx__cagra_merge_row into the output (which reuses
 *      knn_d's memory: the kNN rows are dead after step 2).
 * With the same kNN graph, steps 2-4 give the CPU twin's graph bit for bit (test_gpu checks it
 * through sx__gpu_cagra_prune_merge); cuBLAS and the selection are deterministic, so the whole
 * build is reproducible on one GPU model.
 *
 * Memory: step 1 follows the kNN plan (the n x ideg ids counted); steps 2-4 need
 * n (4 ideg + 16 deg + 16) bytes on the device at once; more than the budget is SX_ENOMEM (a
 * caller falls back to the CPU build). For 1M nodes with 128/64 that is 1.5 GiB.
 *
 * Thread-safety: thread-safe (device lock).
 */
#include <string.h>

#include "gpu/cagra_rows.h"
#include "gpu/gpu_cuda.h"

#define PRUNE_INV   0x80000000u /* srank flag: entry is empty, self or a repeat */
#define PRUNE_SMEM  32768u      /* shared bytes per block the warps share */

/* One warp per node a; shared per warp: srow[ideg] (the row, invalid ids as UINT32_MAX),
 * sid[ideg], srank[ideg], det[ideg] (uint32): PRUNE_WORDS * ideg words. */
#define PRUNE_WORDS 4u
static __global__ void prune_kernel(const uint32_t *__restrict__ knn, uint32_t n, uint32_t ideg,
                                    uint32_t deg, uint32_t *__restrict__ pruned)
{
    extern __shared__ uint32_t psm[];
    const unsigned wib = threadIdx.x / 32, lane = threadIdx.x & 31u;
    const size_t a = (size_t)blockIdx.x * (blockDim.x / 32) + wib;
    if (a >= n) /* warp-uniform; the kernel uses warp barriers only */
        return;
    uint32_t *srow = psm + (size_t)wib * PRUNE_WORDS * ideg;
    uint32_t *sid = srow + ideg;
    uint32_t *srank = sid + ideg;
    uint32_t *det = srank + ideg;
    const uint32_t *row = knn + a * ideg;

    for (uint32_t j = lane; j < ideg; j += 32) {
        uint32_t id = row[j];
        srow[j] = id >= n || id == (uint32_t)a ? UINT32_MAX : id;
        det[j] = 0;
    }
    __syncwarp();
    /* 1. sort the row by (id, rank), invalid ids (UINT32_MAX) last: rank-counting sort */
    for (uint32_t j = lane; j < ideg; j += 32) {
        const uint32_t id = srow[j];
        uint32_t pos = 0;
        for (uint32_t j2 = 0; j2 < ideg; j2++) {
            const uint32_t id2 = srow[j2];
            pos += id2 < id || (id2 == id && j2 < j);
        }
        sid[pos] = id;
        srank[pos] = j | (id == UINT32_MAX ? PRUNE_INV : 0u);
    }
    __syncwarp();
    /* repeated ids: the later ranks are invalid (srank[p] is written by its own lane only) */
    for (uint32_t p = lane + 1; p < ideg; p += 32)
        if (sid[p] != UINT32_MAX && sid[p] == sid[p - 1])
            srank[p] |= PRUNE_INV;
    __syncwarp();

    /* 2. detours: D at rank i, B in D's row at rank j > i of a's row */
    for (uint32_t i = 0; i + 1 < ideg; i++) {
        const uint32_t d = srow[i];
        if (d == UINT32_MAX)
            continue;
        const uint32_t *nb = knn + (size_t)d * ideg;
        for (uint32_t t = lane; t < ideg; t += 32) {
            const uint32_t c = nb[t];
            if (c >= n)
                continue;
            uint32_t lo = 0, hi = ideg;
            while (lo < hi) {
                const uint32_t mid = (lo + hi) >> 1;
                if (sid[mid] < c)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < ideg && sid[lo] == c) {
                const uint32_t rr = srank[lo];
                if (!(rr & PRUNE_INV) && rr > i)
                    atomicAdd(&det[rr], 1u);
            }
        }
    }
    __syncwarp();
    for (uint32_t p = lane; p < ideg; p += 32)
        if (srank[p] & PRUNE_INV)
            det[srank[p] & ~PRUNE_INV] = UINT32_MAX;
    __syncwarp();

    /* 3. keep the deg smallest (detours, rank), in that order */
    for (uint32_t j = lane; j < ideg; j += 32) {
        const uint64_t key = sx__cagra_prune_key(det[j], j);
        uint32_t pos = 0;
        for (uint32_t j2 = 0; j2 < ideg; j2++)
            pos += sx__cagra_prune_key(det[j2], j2) < key;
        if (pos < deg)
            pruned[a * deg + pos] = det[j] == UINT32_MAX ? SX__CAGRA_NONE : srow[j];
    }
}

/* Reverse edges, pass 1: in-degree of every node (uncapped). One thread per pruned slot. */
static __global__ void indegree_kernel(const uint32_t *__restrict__ pruned, size_t slots,
                                       uint32_t n, uint32_t *indeg)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= slots)
        return;
    uint32_t b = pruned[i];
    if (b < n)
        atomicAdd(&indeg[b], 1u);
}

/* Pass 2: every edge A->B (rank r) lands in B's segment [offsets[B], offsets[B+1]) of edges as
 * the key r << 32 | A, in arbitrary order (cursor: per-node fill counters, zeroed). */
static __global__ void scatter_kernel(const uint32_t *__restrict__ pruned, size_t slots,
                                      uint32_t n, uint32_t deg,
                                      const unsigned long long *__restrict__ offsets,
                                      uint32_t *cursor, unsigned long long *edges)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= slots)
        return;
    uint32_t b = pruned[i];
    if (b >= n)
        return;
    unsigned long long a = i / deg, r = i % deg;
    uint32_t slot = atomicAdd(&cursor[b], 1u);
    edges[offsets[b] + slot] = r << 32 | a;
}

/* Pass 3, one warp per node B: rev[B] = the deg smallest keys of its segment, ascending, i.e.
 * the sources in (rank, source id) order: the CPU twin's "for r, for A in order" append order
 * (keys are distinct: A's pruned row holds B at most once). rcount[B] = min(segment, deg). */
static __global__ void reverse_select_kernel(const unsigned long long *__restrict__ edges,
                                             const unsigned long long *__restrict__ offsets,
                                             uint32_t n, uint32_t deg, uint32_t *rev,
                                             uint32_t *rcount)
{
    const size_t b = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x & 31u;
    if (b >= n) /* warp-uniform */
        return;
    const unsigned long long *seg = edges + offsets[b];
    const size_t len = (size_t)(offsets[b + 1] - offsets[b]);
    for (size_t e = lane; e < len; e += 32) {
        const unsigned long long key = seg[e];
        size_t pos = 0;
        for (size_t e2 = 0; e2 < len && pos < deg; e2++)
            pos += seg[e2] < key;
        if (pos < deg)
            rev[b * deg + pos] = (uint32_t)key;
    }
    if (lane == 0)
        rcount[b] = len < deg ? (uint32_t)len : deg;
}

static __global__ void merge_kernel(const uint32_t *__restrict__ pruned,
                                    const uint32_t *__restrict__ rev,
                                    const uint32_t *__restrict__ rcount, uint32_t n, uint32_t deg,
                                    uint32_t *__restrict__ out)
{
    size_t a = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= n)
        return;
    sx__cagra_merge_row(pruned + a * deg, deg, rev + a * deg, rcount[a], out + a * deg);
}

/* Device bytes of steps 2-4 besides the kNN graph (n ideg words, counted separately). */
static size_t prune_merge_bytes(size_t n, uint32_t deg)
{
    return n * (size_t)deg * (4 + 8 + 4) + n * 8 + (n + 1) * 8;
}

/* Steps 2-4 on the device kNN graph knn_d (n x ideg; its memory is reused for the output),
 * result copied to the host graph (n x deg). Needs the device lock. */
static sx_status prune_merge_locked(uint32_t *knn_d, size_t n, uint32_t ideg, uint32_t deg,
                                    uint32_t *graph)
{
    sx_status rc = SX_OK;
    const size_t slots = n * (size_t)deg;
    uint32_t wpb;
    uint32_t *pruned_d = NULL, *rev_d = NULL, *indeg_d = NULL, *rcount_d = NULL;
    uint32_t *indeg_h = NULL;
    unsigned long long *edges_d = NULL, *offsets_d = NULL, *offsets_h = NULL;

    indeg_h = (uint32_t *)sx__malloc(n * sizeof(uint32_t));
    offsets_h = (unsigned long long *)sx__malloc((n + 1) * sizeof(unsigned long long));
    if (!indeg_h || !offsets_h) {
        rc = sx__err(SX_ENOMEM, "gpu cagra: reverse-edge offsets of %zu nodes", n);
        goto fail;
    }
    SX_CUDA_TRY(cudaMalloc((void **)&pruned_d, slots * sizeof(uint32_t)));
    SX_CUDA_TRY(cudaMalloc((void **)&rev_d, slots * sizeof(uint32_t)));
    SX_CUDA_TRY(cudaMalloc((void **)&edges_d, slots * sizeof(unsigned long long)));
    SX_CUDA_TRY(cudaMalloc((void **)&indeg_d, n * sizeof(uint32_t)));
    SX_CUDA_TRY(cudaMalloc((void **)&rcount_d, n * sizeof(uint32_t)));
    SX_CUDA_TRY(cudaMalloc((void **)&offsets_d, (n + 1) * sizeof(unsigned long long)));

    /* 2. prune */
    wpb = PRUNE_SMEM / (PRUNE_WORDS * 4 * ideg);
    if (wpb > 8)
        wpb = 8;
    if (wpb < 1)
        wpb = 1;
    prune_kernel<<<sx_gpu_blocks(n, wpb), wpb * 32, wpb * PRUNE_WORDS * 4 * ideg>>>(
        knn_d, (uint32_t)n, ideg, deg, pruned_d);
    SX_LAUNCH_TRY("prune_kernel");

    /* 3. reverse edges: in-degrees, offsets (prefix sum on the host: n words), scatter, select */
    SX_CUDA_TRY(cudaMemset(indeg_d, 0, n * sizeof(uint32_t)));
    indegree_kernel<<<sx_gpu_blocks(slots, 256), 256>>>(pruned_d, slots, (uint32_t)n, indeg_d);
    SX_LAUNCH_TRY("indegree_kernel");
    SX_CUDA_TRY(cudaMemcpy(indeg_h, indeg_d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    offsets_h[0] = 0;
    for (size_t i = 0; i < n; i++)
        offsets_h[i + 1] = offsets_h[i] + indeg_h[i];
    SX_CUDA_TRY(cudaMemcpy(offsets_d, offsets_h, (n + 1) * sizeof(unsigned long long),
                           cudaMemcpyHostToDevice));
    SX_CUDA_TRY(cudaMemset(indeg_d, 0, n * sizeof(uint32_t))); /* now the fill cursors */
    scatter_kernel<<<sx_gpu_blocks(slots, 256), 256>>>(pruned_d, slots, (uint32_t)n, deg,
                                                       offsets_d, indeg_d, edges_d);
    SX_LAUNCH_TRY("scatter_kernel");
    reverse_select_kernel<<<sx_gpu_blocks(n * 32, SX_GPU_WARP_BLOCK), SX_GPU_WARP_BLOCK>>>(
        edges_d, offsets_d, (uint32_t)n, deg, rev_d, rcount_d);
    SX_LAUNCH_TRY("reverse_select_kernel");

    /* 4. merge; the output reuses knn_d (n deg <= n ideg words; the kNN rows are dead) */
    merge_kernel<<<sx_gpu_blocks(n, 128), 128>>>(pruned_d, rev_d, rcount_d, (uint32_t)n, deg,
                                                 knn_d);
    SX_LAUNCH_TRY("merge_kernel");
    SX_CUDA_TRY(cudaMemcpy(graph, knn_d, slots * sizeof(uint32_t), cudaMemcpyDeviceToHost));

fail:
    if (rc != SX_OK)
        (void)cudaDeviceSynchronize();
    (void)cudaFree(pruned_d);
    (void)cudaFree(rev_d);
    (void)cudaFree(edges_d);
    (void)cudaFree(indeg_d);
    (void)cudaFree(rcount_d);
    (void)cudaFree(offsets_d);
    sx__free(indeg_h);
    sx__free(offsets_h);
    return rc;
}

static sx_status check_degrees(size_t n, uint32_t ideg, uint32_t deg)
{
    if (deg == 0 || ideg < deg || ideg > SX__GPU_TOPK_MAX)
        return sx__err(SX_EINVAL,
                       "gpu cagra: graph_degree %u and intermediate_graph_degree %u must satisfy "
                       "1 <= graph_degree <= intermediate_graph_degree <= %u",
                       deg, ideg, SX__GPU_TOPK_MAX);
    if (n == 0 || n >= UINT32_MAX)
        return sx__err(SX_EINVAL, "gpu cagra: %zu rows out of range 1..2^32-2", n);
    return SX_OK;
}

extern "C" sx_status sx__gpu_cagra_build(const float *x, size_t n, size_t dim, sx_metric metric,
                                         const sx__cagra_build_params *p, uint32_t *graph)
{
    sx_status rc = SX_OK;
    size_t budget = 0, need;
    uint32_t ideg, deg;
    uint32_t *knn_d = NULL;

    if (!sx__gpu_available())
        return sx__err(SX_EINVAL, "no GPU: %s", sx__gpu_describe());
    if (!x || !p || !graph)
        return sx__err(SX_EINVAL, "gpu cagra: NULL argument");
    ideg = p->intermediate_degree;
    deg = p->graph_degree;
    rc = check_degrees(n, ideg, deg);
    if (rc != SX_OK)
        return rc;
    if (dim == 0 || dim > SX__GPU_DIM_MAX)
        return sx__err(SX_EINVAL, "gpu cagra: dim %zu out of range 1..%u", dim, SX__GPU_DIM_MAX);
    if (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL, "gpu cagra: unknown metric %d", (int)metric);

    rc = sx__gpu_enter(&budget);
    if (rc != SX_OK)
        return rc;
    need = n * (size_t)ideg * 4 + prune_merge_bytes(n, deg);
    if (need > budget) {
        rc = sx__err(SX_ENOMEM,
                     "gpu cagra: pruning %zu nodes (degrees %u/%u) needs %zu device bytes, the "
                     "budget is %zu",
                     n, ideg, deg, need, budget);
        goto fail;
    }
    SX_CUDA_TRY(cudaMalloc((void **)&knn_d, n * ideg * sizeof(uint32_t)));
    rc = sx__gpu_knn_locked(x, n, x, n, dim, metric, ideg, true, !p->knn_fp32, budget, NULL,
                            NULL, knn_d);
    if (rc != SX_OK)
        goto fail;
    rc = prune_merge_locked(knn_d, n, ideg, deg, graph);

fail:
    if (rc != SX_OK)
        (void)cudaDeviceSynchronize();
    (void)cudaFree(knn_d);
    sx__gpu_leave();
    return rc;
}

extern "C" sx_status sx__gpu_cagra_prune_merge(const uint32_t *knn, size_t n, uint32_t ideg,
                                               uint32_t deg, uint32_t *graph)
{
    sx_status rc = SX_OK;
    size_t budget = 0, need;
    uint32_t *knn_d = NULL;

    if (!sx__gpu_available())
        return sx__err(SX_EINVAL, "no GPU: %s", sx__gpu_describe());
    if (!knn || !graph)
        return sx__err(SX_EINVAL, "gpu cagra: NULL argument");
    rc = check_degrees(n, ideg, deg);
    if (rc != SX_OK)
        return rc;
    rc = sx__gpu_enter(&budget);
    if (rc != SX_OK)
        return rc;
    need = n * (size_t)ideg * 4 + prune_merge_bytes(n, deg);
    if (need > budget) {
        rc = sx__err(SX_ENOMEM, "gpu cagra: pruning needs %zu device bytes, the budget is %zu",
                     need, budget);
        goto fail;
    }
    SX_CUDA_TRY(cudaMalloc((void **)&knn_d, n * ideg * sizeof(uint32_t)));
    SX_CUDA_TRY(cudaMemcpy(knn_d, knn, n * ideg * sizeof(uint32_t), cudaMemcpyHostToDevice));
    rc = prune_merge_locked(knn_d, n, ideg, deg, graph);

fail:
    if (rc != SX_OK)
        (void)cudaDeviceSynchronize();
    (void)cudaFree(knn_d);
    sx__gpu_leave();
    return rc;
}
