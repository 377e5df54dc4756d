/*
 * hnsw.h: internal interface of the HNSW index family (Hierarchical Navigable Small World graphs,
 * Malkov & Yashunin, "Efficient and robust approximate nearest neighbor search using Hierarchical
 * Navigable Small World graphs", arXiv 1603.09320). The vtable is sx__hnsw_index_ops (index.h).
 *
 * Files, one per life-cycle phase:
 *   hnsw_build.c   parameters, level generation, parallel insertion (Alg. 1 + Alg. 4), repair
 *   hnsw_search.c  greedy descent + ef-search at level 0 (Alg. 2, Alg. 5) on graph.h's pool
 *   hnsw_io.c      serialize / deserialize (byte format documented there)
 *   hnsw_check.c   structural invariants (sx__hnsw_check), also run on every deserialize
 *
 * Memory layout. The index BORROWS the segment's vectors (n rows of dim float32, float16 or
 * bfloat16 values: FLOAT16_VECTOR and BFLOAT16_VECTOR fields are indexed at 2 bytes per value,
 * searched with float32 queries through dist.h's widening kernels) and stores only the graph:
 *   l0       n * (M0+1) uint32, one flat array: node i's level-0 list is l0[i*(M0+1)]: the count,
 *            then up to M0 neighbour ids. Flat so that a neighbour's list is one multiply away and
 *            can be prefetched.
 *   levels   n bytes: the top level of each node (0 for ~ (1 - 1/M) of them).
 *   up_off   n uint32: for a node with levels[i] > 0, the index of its first block in `up`;
 *            SX__HNSW_NONE otherwise. Block b (level l >= 1 of that node is block up_off[i]+l-1)
 *            is up[b*(M+1)]: count then up to M ids.
 * Per node this is 4*(M0+1) + 1 + 4 bytes plus ~4*(M+1)/(M-1) for the upper levels, i.e. ~141 bytes
 * at M = 16 (hnswlib: 4*(M0+1) + 8-byte label + 8-byte pointer + a copy of the vector).
 *
 * Invariants (checked by sx__hnsw_check):
 *   1. every id in a list is < n, no list holds its owner or the same id twice;
 *   2. level-0 counts <= M0, upper counts <= M; M0 == 2*M; levels[i] <= SX__HNSW_MAX_LEVEL;
 *   3. a neighbour listed at level l has levels[nb] >= l (so its level-l list exists);
 *   4. n > 0 => entry < n and levels[entry] == max_level == max over levels; n == 0 => entry NONE;
 *   5. every node is reachable from the entry point following level-0 links (invariant R of
 *      graph.h, seed set {entry}): level-0 search is seeded with the entry point as well as the
 *      greedy-descent result, so with ef = n it returns every row.
 * Search never reads out of bounds on a graph satisfying 1-4; 5 is what makes recall possible and
 * is guaranteed by the build's repair pass (sx__graph_repair; HNSW's pruning can orphan a node
 * otherwise) and checked after every build and on every load.
 *
 * Thread-safety: a built index is immutable; any number of threads may search it at once. Search
 * scratch (visited tags, candidate pool) is a per-thread sx__graph_scratch (graph.h's TLS).
 */
#ifndef SX_INDEX_HNSW_H
#define SX_INDEX_HNSW_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/graph/graph.h"
#include "index/index.h"
#include "util/heap.h"
#include "vector/dist.h"

#define SX__HNSW_MAGIC     0x4E485853u /* "SXHN" little-endian */
#define SX__HNSW_VERSION   1u
#define SX__HNSW_MAX_LEVEL 48u
#define SX__HNSW_M_MIN     2
#define SX__HNSW_M_MAX     2048
#define SX__HNSW_M_DEF     16
#define SX__HNSW_EFC_DEF   200
#define SX__HNSW_EF_DEF    64
/* Work bounds (issue 13): a build costs about n x min(efConstruction, n) x M distance
 * computations, a search about ef x M. Milvus documents efConstruction and ef as [1, int_max];
 * 4096 is 8x the largest value Milvus 2.4 accepted (512) and 20x the default; ef goes to 65536,
 * four times the 16,384 top-k cap (ef >= k), as DISKANN's search_list and CAGRA's itopk_size. */
#define SX__HNSW_EFC_MAX   4096
#define SX__HNSW_EF_MAX    65536
#define SX__HNSW_NONE      UINT32_MAX
/* Node ids use 31 bits: the top bit marks "expanded" in the search pool (graph.h). */
#define SX__HNSW_MAX_N     SX__GRAPH_MAX_N

typedef struct sx__hnsw {
    const void *vecs; /* borrowed: n rows of row_bytes (dim values of type vt), must outlive it */
    size_t n;
    size_t dim;
    size_t row_bytes;
    sx__vtype vt; /* F32, F16 or BF16: rows of 16-bit types are compared with float32 queries */
    sx_metric metric;
    sx__dist_fn dist;   /* "smaller is better" kernel for metric and vt, resolved once */
    uint32_t M;         /* max degree above level 0 */
    uint32_t M0;        /* max degree at level 0 (2*M) */
    uint32_t efc;       /* efConstruction used to build (kept for describe/serialize) */
    uint32_t entry;     /* entry point, SX__HNSW_NONE when n == 0 */
    uint32_t max_level; /* levels[entry] */
    uint32_t *l0;       /* n*(M0+1), 64-byte aligned; owned */
    uint8_t *levels;    /* n; owned */
    uint32_t *up_off;   /* n; owned */
    uint32_t *up;       /* n_up * (M+1); owned (NULL when n_up == 0) */
    size_t n_up;        /* number of upper-level blocks */
} sx__hnsw;

/* The link list (count, then ids) of node `id` at `level` (level <= levels[id]). */
static inline uint32_t *sx__hnsw_links(const sx__hnsw *h, uint32_t id, uint32_t level)
{
    if (level == 0)
        return h->l0 + (size_t)id * (h->M0 + 1);
    return h->up + ((size_t)h->up_off[id] + level - 1) * (h->M + 1);
}

static inline const void *sx__hnsw_vec(const sx__hnsw *h, uint32_t id)
{
    return (const char *)h->vecs + (size_t)id * h->row_bytes;
}

/* Row id as a float32 query: the row itself for float32 rows, else widened into buf (dim
 * floats). The build compares rows with rows this way (the kernels take a float32 side). */
static inline const float *sx__hnsw_qvec(const sx__hnsw *h, uint32_t id, float *buf)
{
    if (h->vt == SX__VT_F32)
        return (const float *)sx__hnsw_vec(h, id);
    sx__widen(h->vt, sx__hnsw_vec(h, id), buf, h->dim);
    return buf;
}

/* Greedy descent (Alg. 2 with ef = 1) from (cur, *cur_dist) at levels [top, bottom], top >= bottom
 * >= 1. Returns the closest node found; *cur_dist is updated. `concurrent` selects atomic loads of
 * the link lists (build: other threads may be writing them). */
uint32_t sx__hnsw_greedy(const sx__hnsw *h,
                         const float *q,
                         uint32_t cur,
                         float *cur_dist,
                         uint32_t top,
                         uint32_t bottom,
                         bool concurrent);

/* ef-search at one level (Alg. 2), used by the build: seeds[0..nseeds) (distances known) start
 * the search, `self` (or SX__HNSW_NONE) is never returned. Link lists are read with atomic loads.
 * The result is s->pool[0..return), sorted best first, ids without SX__GRAPH_FLAG. Scratch must
 * have been reserved (sx__graph_scratch_reserve) for h->n nodes, a pool of ef >= nseeds and
 * h->M0 gathered ids. Thread-safety: one scratch per thread.
 */
size_t sx__hnsw_search_level_build(const sx__hnsw *h,
                                   sx__graph_scratch *s,
                                   const float *q,
                                   const sx__hit *seeds,
                                   size_t nseeds,
                                   size_t ef,
                                   uint32_t level,
                                   uint32_t self);

/* The level-0 lists as an adjacency view (graph.h): counted lists of at most M0 ids. */
static inline sx__graph_view sx__hnsw_l0_view(const sx__hnsw *h)
{
    sx__graph_view v = { .n = h->n,
                         .cap = h->M0,
                         .format = SX__GRAPH_COUNTED,
                         .base = (uint8_t *)(void *)h->l0,
                         .stride = ((size_t)h->M0 + 1) * sizeof(uint32_t) };
    return v;
}

/* Upper-level storage for nodes with levels[0..n): up_off[i] = the first block of node i
 * (SX__HNSW_NONE for level-0 nodes; block of level l >= 1 is up_off[i] + l - 1), *up = zeroed
 * blocks of M + 1 u32 (NULL when no node has an upper level), *n_up their number. Shared by HNSW
 * and HNSW_SQ (same upper-level layout). Errors: SX_ENOMEM, SX_EINVAL (more blocks than 32 bits
 * can index). Ownership: *up is the caller's (sx__free). */
SX_NODISCARD sx_status sx__hnsw_upper_alloc(
    const uint8_t *levels, size_t n, uint32_t M, uint32_t *up_off, uint32_t **up, size_t *n_up);

/* One link list (count, then ids) in the serialized form shared by HNSW and HNSW_SQ
 * (hnsw_io.c): u32 count, then count u32 ids. get decodes into ll (capacity cap) and returns
 * false on a count above cap or short input. */
void sx__hnsw_put_list(sx__wbuf *w, const uint32_t *ll);
bool sx__hnsw_get_list(sx__rbuf *r, uint32_t *ll, uint32_t cap);

/* Invariants 1-3 for one list ll (count, then ids) of node `owner` at `level`, in a graph of n
 * nodes with levels[] and capacity cap: ids < n, not the owner, no id twice (stamp[id] == mark
 * marks the ids of this list: one fresh mark per list), a neighbour listed at level l has
 * levels[nb] >= l. SX_ECORRUPT naming `who` and the node otherwise. Shared by HNSW and HNSW_SQ. */
SX_NODISCARD sx_status sx__hnsw_check_list(const uint32_t *ll,
                                           uint32_t owner,
                                           uint32_t level,
                                           uint32_t cap,
                                           const uint8_t *levels,
                                           size_t n,
                                           uint32_t *stamp,
                                           uint32_t mark,
                                           const char *who);

/* Checks the structural invariants 1-5 above. Returns SX_OK or SX_ECORRUPT with the first
 * violation in sx_errmsg(); SX_ENOMEM if the reachability scan cannot allocate.
 * Thread-safety: read-only on idx. */
SX_NODISCARD sx_status sx__hnsw_check(const sx__index *idx);

/* Frees the graph arrays and the struct. NULL is a no-op. */
void sx__hnsw_free(sx__index *idx);

/* vtable members implemented across the files */
sx_status sx__hnsw_check_build_params(const sx_param *p, size_t np);
sx_status sx__hnsw_check_search_params(const sx_param *p, size_t np, size_t k);
/* index.h's filter_cost: the distances a filtered search computes (graph.h's
 * sx__graph_filtered_visits has the model and the measurements it was fitted to). */
double sx__hnsw_filter_cost(
    const sx__index *idx, const sx_param *sp, size_t nsp, size_t k, size_t n_allowed);
sx_status sx__hnsw_build(const sx_param *p,
                         size_t np,
                         const float *vecs,
                         size_t n,
                         size_t dim,
                         sx_metric metric,
                         const sx__build_ctx *ctx,
                         sx__index **out);
sx_status sx__hnsw_search(const sx__index *idx,
                          const float *query,
                          size_t k,
                          const sx_param *sp,
                          size_t nsp,
                          const uint64_t *allow,
                          sx__topk *out);
sx_status sx__hnsw_serialize(const sx__index *idx, sx__wbuf *w);
sx_status sx__hnsw_deserialize(const void *data,
                               size_t len,
                               const float *vecs,
                               size_t n,
                               size_t dim,
                               sx_metric metric,
                               sx__index **out);
/* The typed members (index.h): rows of vt (F32, F16, BF16); search_typed's query is float32. */
sx_status sx__hnsw_build_typed(const sx_param *p,
                               size_t np,
                               const void *vecs,
                               sx__vtype vt,
                               size_t n,
                               size_t dim,
                               sx_metric metric,
                               const sx__build_ctx *ctx,
                               sx__index **out);
sx_status sx__hnsw_deserialize_typed(const void *data,
                                     size_t len,
                                     const void *vecs,
                                     sx__vtype vt,
                                     size_t n,
                                     size_t dim,
                                     sx_metric metric,
                                     sx__index **out);
sx_status sx__hnsw_search_typed(const sx__index *idx,
                                const void *query,
                                size_t k,
                                const sx_param *sp,
                                size_t nsp,
                                const uint64_t *allow,
                                sx__topk *out);
size_t sx__hnsw_memory_bytes(const sx__index *idx);

/* Allocates an empty graph for n nodes with the given levels (taken: on success `levels` belongs
 * to the index, on failure it is freed). Lists are empty. Used by build and deserialize.
 * Errors: SX_ENOMEM, SX_EINVAL (upper-level blocks overflow 32 bits). */
sx_status sx__hnsw_alloc(const void *vecs,
                         sx__vtype vt,
                         size_t n,
                         size_t dim,
                         sx_metric metric,
                         uint32_t M,
                         uint32_t efc,
                         uint8_t *levels,
                         sx__hnsw **out);

#endif
