/*
 * cagra_rows.h: the per-node steps of the CAGRA graph build that the GPU build (gpu_cagra.cu,
 * one thread per node) and a CPU build can share verbatim: static inline functions compiled as
 * __host__ __device__ under nvcc and as plain C elsewhere, so both sides compute the same rows.
 *
 * CAGRA (Ootomo et al., "CAGRA: Highly Parallel Graph Construction and Approximate Nearest
 * Neighbor Search for GPUs", ICDE 2024, arXiv 2308.15136; cuVS cagra/graph_core.cuh):
 *   1. initial kNN graph of intermediate_degree (rank order, no self edges);
 *   2. rank-based pruning: for neighbour B at rank j of node A, detours(j) = number of
 *      neighbours D at rank i < j whose kNN row contains B; keep the graph_degree neighbours with
 *      the fewest detours, ties by rank (sx__cagra_prune_key);
 *   3. reverse edges: for each kept edge A->B, A is appended to rev(B) in rank order of the kept
 *      lists, capped at graph_degree entries;
 *   4. merge (sx__cagra_merge_row): the first graph_degree/2 pruned edges are kept (protected),
 *      then reverse edges, then the remaining pruned edges, skipping duplicates, truncated to
 *      graph_degree; empty slots are UINT32_MAX.
 *
 * Thread-safety: pure.
 */
#ifndef SX_GPU_CAGRA_ROWS_H
#define SX_GPU_CAGRA_ROWS_H
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
# define SX_HD __host__ __device__
#else
# define SX_HD
#endif

#define SX__CAGRA_NONE UINT32_MAX

static inline SX_HD bool sx__cagra_row_has(const uint32_t *row, uint32_t m, uint32_t id)
{
    for (uint32_t i = 0; i < m; i++)
        if (row[i] == id)
            return true;
    return false;
}

/* Merge step (4) for one node: out[0..deg) from its pruned row pruned[0..deg) and its reverse
 * edges rev[0..nrev). out must not alias the inputs. */
static inline SX_HD void sx__cagra_merge_row(
    const uint32_t *pruned, uint32_t deg, const uint32_t *rev, uint32_t nrev, uint32_t *out)
{
    uint32_t m = 0, protect = deg / 2;
    for (uint32_t i = 0; i < protect; i++)
        if (pruned[i] != SX__CAGRA_NONE && !sx__cagra_row_has(out, m, pruned[i]))
            out[m++] = pruned[i];
    for (uint32_t i = 0; i < nrev && m < deg; i++)
        if (rev[i] != SX__CAGRA_NONE && !sx__cagra_row_has(out, m, rev[i]))
            out[m++] = rev[i];
    for (uint32_t i = protect; i < deg && m < deg; i++)
        if (pruned[i] != SX__CAGRA_NONE && !sx__cagra_row_has(out, m, pruned[i]))
            out[m++] = pruned[i];
    while (m < deg)
        out[m++] = SX__CAGRA_NONE;
}

/* Prune order (2), key of the neighbour at rank j with `detours` detours: smaller is kept
 * first. Invalid entries (empty, self, duplicates) pass detours = UINT32_MAX. */
static inline SX_HD uint64_t sx__cagra_prune_key(uint32_t detours, uint32_t j)
{
    return (uint64_t)detours << 32 | j;
}

#endif
