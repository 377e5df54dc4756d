/*
 * hnsw_check.c: sx__hnsw_check, the structural oracle of the HNSW graph (invariants 1-5 of hnsw.h):
 *   1. ids < n, no self loops, no duplicate neighbours in a list;
 *   2. level-0 degree <= M0 = 2*M, upper degree <= M, levels <= SX__HNSW_MAX_LEVEL;
 *   3. a neighbour listed at level l has a level-l list (levels[nb] >= l), and a node's upper
 *      blocks lie inside the upper array;
 *   4. entry point valid: n == 0 <=> entry == NONE; else entry < n, levels[entry] == max_level ==
 *      the maximum level of any node;
 *   5. every node is reachable from the entry point through level-0 links (graph.h's BFS,
 *      sx__graph_check_reach: invariant R with seed set {entry}).
 * Run after every build in tests and on every deserialize (hnsw_io.c), so a loaded index is
 * always safe to search. Cost: O(n * M0) time, ~4 bytes per node of scratch.
 * Thread-safety: read-only on the index.
 */
#include <string.h>

#include "index/hnsw/hnsw.h"
#include "util/alloc.h"
#include "util/err.h"

sx_status sx__hnsw_check_list(const uint32_t *ll,
                              uint32_t owner,
                              uint32_t level,
                              uint32_t cap,
                              const uint8_t *levels,
                              size_t n,
                              uint32_t *stamp,
                              uint32_t mark,
                              const char *who)
{
    if (ll[0] > cap)
        return sx__err(SX_ECORRUPT, "%s: node %u level %u has degree %u > %u", who, owner, level,
                       ll[0], cap);
    for (uint32_t j = 1; j <= ll[0]; j++) {
        uint32_t id = ll[j];
        if (id >= n)
            return sx__err(SX_ECORRUPT, "%s: node %u level %u: neighbour %u out of range (n=%zu)",
                           who, owner, level, id, n);
        if (id == owner)
            return sx__err(SX_ECORRUPT, "%s: node %u level %u links to itself", who, owner, level);
        if (levels[id] < level)
            return sx__err(SX_ECORRUPT, "%s: node %u level %u links to node %u of level %u", who,
                           owner, level, id, levels[id]);
        if (stamp[id] == mark)
            return sx__err(SX_ECORRUPT, "%s: node %u level %u lists neighbour %u twice", who, owner,
                           level, id);
        stamp[id] = mark;
    }
    return SX_OK;
}

sx_status sx__hnsw_check(const sx__index *idx)
{
    const sx__hnsw *h = (const sx__hnsw *)idx;
    if (!h)
        return sx__err(SX_EINVAL, "HNSW check: no index");
    size_t n = h->n;
    if (h->M < SX__HNSW_M_MIN || h->M > SX__HNSW_M_MAX || h->M0 != 2 * h->M)
        return sx__err(SX_ECORRUPT, "HNSW: bad degrees M=%u M0=%u", h->M, h->M0);
    if (n > SX__HNSW_MAX_N)
        return sx__err(SX_ECORRUPT, "HNSW: %zu nodes exceed the limit", n);
    if (n == 0) {
        if (h->entry != SX__HNSW_NONE)
            return sx__err(SX_ECORRUPT, "HNSW: empty index with entry point %u", h->entry);
        return SX_OK;
    }
    if (h->entry >= n)
        return sx__err(SX_ECORRUPT, "HNSW: entry point %u out of range (n=%zu)", h->entry, n);
    if (h->max_level > SX__HNSW_MAX_LEVEL || h->levels[h->entry] != h->max_level)
        return sx__err(SX_ECORRUPT, "HNSW: entry point %u has level %u, max level is %u", h->entry,
                       h->levels[h->entry], h->max_level);
    for (size_t i = 0; i < n; i++) {
        uint32_t l = h->levels[i];
        if (l > h->max_level)
            return sx__err(SX_ECORRUPT, "HNSW: node %zu has level %u above the entry point's %u", i,
                           l, h->max_level);
        if (l == 0 ? h->up_off[i] != SX__HNSW_NONE
                   : h->up_off[i] == SX__HNSW_NONE || (size_t)h->up_off[i] + l > h->n_up)
            return sx__err(SX_ECORRUPT, "HNSW: node %zu has bad upper-level storage", i);
    }

    uint32_t *stamp = sx__malloc(n * sizeof *stamp);
    if (!stamp)
        return sx__err(SX_ENOMEM, "HNSW check: out of memory");
    memset(stamp, 0xFF, n * sizeof *stamp);
    uint32_t t = 0;
    sx_status rc = SX_OK;
    for (size_t i = 0; i < n && rc == SX_OK; i++)
        for (uint32_t l = 0; l <= h->levels[i] && rc == SX_OK; l++)
            rc = sx__hnsw_check_list(sx__hnsw_links(h, (uint32_t)i, l), (uint32_t)i, l,
                                     l ? h->M : h->M0, h->levels, n, stamp, t++, "HNSW");
    sx__free(stamp);
    if (rc != SX_OK)
        return rc;
    sx__graph_view v = sx__hnsw_l0_view(h);
    return sx__graph_check_reach(&v, &h->entry, 1, "HNSW", "the entry point at level 0");
}
