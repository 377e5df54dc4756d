/*
 * cagra.h: internal interface of the GPU_CAGRA index family (CAGRA: Ootomo et al., "CAGRA: Highly
 * Parallel Graph Construction and Approximate Nearest Neighbor Search for GPUs", arXiv
 * 2308.15136; cuVS cpp/src/neighbors/detail/cagra/graph_core.cuh). The vtable is
 * sx__cagra_index_ops (index.h); the same directory holds the GPU_BRUTE_FORCE vtable
 * (cagra_index.c) and the one-line backend notes shared with the GPU IVF builds.
 *
 * Files, one per life-cycle phase:
 *   cagra_build.c   the CPU twin of the GPU build (sx__cagra_build_graph): exact or NN-descent
 *                   kNN graph, rank-based pruning, reverse edges, merge; multi-threaded
 *   cagra_search.c  best-first search over the fixed-degree graph (itopk buffer, search_width
 *                   parents per iteration), filtered variant, per-thread scratch
 *   cagra_io.c      serialize / deserialize (byte format there), sx__cagra_check
 *   cagra_index.c   parameters, the build entry (GPU when available, else the CPU twin), entry
 *                   points, memory estimate, the GPU_CAGRA and GPU_BRUTE_FORCE vtables
 *
 * The build (the same four steps on the GPU, src/gpu, and here):
 *   1. initial kNN graph of K = intermediate_graph_degree (capped at n-1), each row sorted by
 *      distance without the node itself: exact (blocked SGEMM through sx__flat_scan) when
 *      build_algo = IVF_PQ and n <= SX__CAGRA_EXACT_MAX_N, or whenever n is small; otherwise
 *      NN-descent (Dong, Charikar, Li, WWW 2011) with new/old flags, sampled local joins and an
 *      update-rate stop (cagra_build.c). On the CPU the "IVF_PQ" route is an EXACT kNN graph (the
 *      best graph IVF-PQ plus refinement approximates); above SX__CAGRA_EXACT_MAX_N rows, where
 *      O(n^2 d) stops being affordable, it switches to NN-descent.
 *   2. rank-based pruning: for neighbour B of A at rank r, detours(B) = number of neighbours D of
 *      A at rank < r whose kNN list contains B; keep the graph_degree neighbours with the fewest
 *      detours, ties by rank (ids and ranks only, no distances).
 *   3. reverse graph: for rank r = 0.., for A = 0..n-1 in order, append A to rev[pruned[A][r]]
 *      while rev holds fewer than graph_degree ids (deterministic order: lower ranks first).
 *   4. merge, per node A (sx__cagra_merge_row of src/gpu/cagra_rows.h, the same code the GPU
 *      kernel runs): out = the first graph_degree/2 pruned edges (protected), then the reverse
 *      edges in rev order, then the remaining pruned edges in (detours, rank) order, skipping
 *      duplicates, truncated to graph_degree (cuVS puts the reverse edges right after the
 *      protected prefix too). The pruned row holds min(graph_degree, K) distinct valid ids (K =
 *      the kNN row length, min(inter, n - 1)) and the merge only adds to the protected prefix
 *      while room remains, so every row ends with exactly min(graph_degree, n - 1) distinct
 *      valid non-self ids; remaining slots are SX__CAGRA_NONE.
 *
 * Memory layout (the index BORROWS the segment's vectors, n*dim floats):
 *   graph    n * degree uint32, row-major, 64-byte aligned; row i = node i's out-edges, valid ids
 *            first, then SX__CAGRA_NONE padding (only when n - 1 < degree)
 *   entries  n_entries uint32 (<= SX__CAGRA_MAX_ENTRIES): the node nearest the mean, then rows
 *            drawn with the seed; every search starts from all of them
 *
 * Invariants (checked by sx__cagra_check, run after every build and on every deserialize):
 *   1. 1 <= degree < inter_degree <= SX__CAGRA_DEGREE_MAX; build_algo and flags known;
 *   2. n == 0 <=> n_entries == 0; otherwise 1 <= n_entries <= min(n, SX__CAGRA_MAX_ENTRIES),
 *      every entry < n;
 *   3. every row: ids < n, never the row itself, no id twice, valid ids before the padding
 *      (so at most min(degree, n - 1) of them);
 *   4. every node is reachable from the entry points (invariant R of graph.h, seed set = the
 *      entry list every search starts from), so with itopk_size = n a search returns every row.
 * The CPU build guarantees more (every row holds exactly min(degree, n - 1) ids, test_cagra
 * checks it). Invariant 4 is made by sx__cagra_repair (graph.h's repair over the padded rows:
 * rows are full after the CPU build, so it only ever replaces a row's last non-tree edge; cuVS's
 * optional MST pass is not implemented) on every built graph, the CPU twin's and the GPU's: a
 * GPU-built graph must satisfy 1-3 (sx__cagra_check_rows) before it is repaired and accepted.
 * Search never reads out of bounds on a graph satisfying 1-3.
 *
 * Thread-safety: a built index is immutable; any number of threads may search it at once (each
 * thread keeps its scratch in graph.h's TLS, cagra_search.c).
 */
#ifndef SX_INDEX_CAGRA_H
#define SX_INDEX_CAGRA_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/cagra_rows.h"
#include "gpu/gpu.h"
#include "index/graph/graph.h"
#include "index/index.h"
#include "util/heap.h"
#include "vector/dist.h"

#define SX__CAGRA_MAGIC           0x47435853u /* "SXCG" little-endian */
#define SX__CAGRA_VERSION         1u
/* SX__CAGRA_NONE (UINT32_MAX, an empty slot) comes from gpu/cagra_rows.h */
#define SX__CAGRA_DEGREE_MAX      1024u
#define SX__CAGRA_INTER_DEF       128u /* Milvus intermediate_graph_degree default */
#define SX__CAGRA_GRAPH_DEF       64u  /* Milvus graph_degree default */
#define SX__CAGRA_NND_ITERS       20u  /* cuVS nn_descent_niter default */
#define SX__CAGRA_NND_ITERS_MAX   200u
#define SX__CAGRA_ITOPK_DEF       64u /* cuVS itopk_size default */
#define SX__CAGRA_ITOPK_MAX       65536u
#define SX__CAGRA_WIDTH_DEF       1u /* cuVS search_width default */
#define SX__CAGRA_WIDTH_MAX       1024u
#define SX__CAGRA_ITERS_MAX       65536u /* min_iterations / max_iterations: bounds the work */
#define SX__CAGRA_MAX_ENTRIES     16u
/* Exact kNN graph on the CPU for the IVF_PQ route up to this many rows (O(n^2 d) SGEMM work:
 * 65536 x 128 is ~1.1e12 flops, seconds on a few cores), NN-descent above. */
#define SX__CAGRA_EXACT_MAX_N     ((size_t)65536)
/* NN-descent needs enough rows to sample from: below max(this, 4 K) the kNN graph is exact. */
#define SX__CAGRA_SMALL_N         ((size_t)2048)
/* build_algo values (gpu.h's sx__cagra_build_params.build_algo) */
#define SX__CAGRA_ALGO_IVF_PQ     0
#define SX__CAGRA_ALGO_NN_DESCENT 1
/* flags */
#define SX__CAGRA_FLAG_GPU        1u /* the graph was built by sx__gpu_cagra_build */

typedef struct sx__cagra {
    const float *vecs; /* borrowed: n*dim floats, must outlive the index */
    size_t n;
    size_t dim;
    sx_metric metric;
    sx__dist_fn dist;      /* "smaller is better" kernel for metric */
    uint32_t degree;       /* graph_degree: the row stride of graph */
    uint32_t inter_degree; /* intermediate_graph_degree the graph was built with */
    uint32_t build_algo;   /* SX__CAGRA_ALGO_* requested */
    uint32_t flags;        /* SX__CAGRA_FLAG_* */
    uint32_t n_entries;
    uint32_t *entries; /* n_entries; owned */
    uint32_t *graph;   /* n * degree, aligned; owned */
} sx__cagra;

static inline const uint32_t *sx__cagra_row(const sx__cagra *g, uint32_t id)
{
    return g->graph + (size_t)id * g->degree;
}

static inline const float *sx__cagra_vec(const sx__cagra *g, uint32_t id)
{
    return g->vecs + (size_t)id * g->dim;
}

/* Parsed build parameters (Milvus names; cache_dataset_on_device and adapt_for_cpu are accepted
 * and recorded only: the CPU keeps the vectors in RAM and always serves the graph itself). */
typedef struct sx__cagra_opts {
    sx__cagra_build_params bp; /* degrees, algorithm, NN-descent iterations (gpu.h) */
    bool cache_dataset_on_device;
    bool adapt_for_cpu;
} sx__cagra_opts;

/* Parses build params: intermediate_graph_degree [2, 1024] = 128, graph_degree [1, 1024] = 64
 * (must be < intermediate_graph_degree), build_algo IVF_PQ | NN_DESCENT = IVF_PQ,
 * nn_descent_niter [1, 200] = 20 (cuVS's name), cache_dataset_on_device / adapt_for_cpu
 * true|false; index_type / metric_type tolerated. Errors: SX_EINVAL naming the parameter. */
SX_NODISCARD sx_status sx__cagra_parse_build(const sx_param *p, size_t np, sx__cagra_opts *o);

/* ---- the CPU twin of the build (cagra_build.c) ----
 * Every phase uses `threads` workers (0: all online CPUs; the caller is one of them) and, when
 * ctx is non-NULL, checks ctx->cancel between chunks (SX_ECANCELED) and stores progress into
 * ctx->progress as a fraction of n (monotone; n when the graph is done). All are deterministic
 * for the same inputs and thread-count-independent, except the exact kNN graph, whose SGEMM
 * rounding can order exact distance ties differently. Errors: SX_ENOMEM, SX_ECANCELED,
 * SX_EINVAL (bad sizes). Thread-safety: pure apart from the output buffers. */

/* Exact kNN graph: knn[i*K ..] = the K nearest rows of row i (not i), ascending distance. Needs
 * n - 1 >= K. */
SX_NODISCARD sx_status sx__cagra_knn_exact(const float *x,
                                           size_t n,
                                           size_t dim,
                                           sx_metric metric,
                                           uint32_t K,
                                           uint32_t threads,
                                           const sx__build_ctx *ctx,
                                           uint32_t *knn);
/* NN-descent kNN graph (same output contract; approximate). Needs n - 1 >= K. `iters` caps the
 * iterations; *iters_done (optional) receives how many ran. */
SX_NODISCARD sx_status sx__cagra_knn_nn_descent(const float *x,
                                                size_t n,
                                                size_t dim,
                                                sx_metric metric,
                                                uint32_t K,
                                                uint32_t iters,
                                                uint64_t seed,
                                                uint32_t threads,
                                                const sx__build_ctx *ctx,
                                                uint32_t *knn,
                                                uint32_t *iters_done);
/* Rank-based pruning of a kNN graph (rows of K ids, SX__CAGRA_NONE allowed) to `degree` ids per
 * row (fewest detours, ties by rank); rows with fewer valid candidates are padded. */
SX_NODISCARD sx_status sx__cagra_prune(const uint32_t *knn,
                                       size_t n,
                                       uint32_t K,
                                       uint32_t degree,
                                       uint32_t threads,
                                       const sx__build_ctx *ctx,
                                       uint32_t *pruned);
/* Reverse edges + merge (steps 3-4 above) of a pruned graph (n * degree) into graph. */
SX_NODISCARD sx_status sx__cagra_merge(const uint32_t *pruned,
                                       size_t n,
                                       uint32_t degree,
                                       uint32_t threads,
                                       const sx__build_ctx *ctx,
                                       uint32_t *graph);
/* The whole CPU build (steps 1-4), the twin of sx__gpu_cagra_build (gpu.h) with the same output:
 * graph[n * p->graph_degree], SX__CAGRA_NONE for empty slots. p->threads is the worker count
 * when ctx is NULL (ctx->threads otherwise). */
SX_NODISCARD sx_status sx__cagra_build_graph(const float *x,
                                             size_t n,
                                             size_t dim,
                                             sx_metric metric,
                                             const sx__cagra_build_params *p,
                                             const sx__build_ctx *ctx,
                                             uint32_t *graph);
/* Peak bytes sx__cagra_build_graph allocates besides the output graph. */
uint64_t
sx__cagra_build_graph_bytes(size_t n, uint32_t K, uint32_t degree, int algo, uint32_t threads);
/* Whether step 1 runs NN-descent for these sizes (else the exact kNN graph). */
bool sx__cagra_uses_nn_descent(size_t n, uint32_t K, int algo);

/* ---- index object ---- */

/* Allocates an index shell with an uninitialised graph of n * degree and room for n_entries.
 * Errors: SX_ENOMEM. */
SX_NODISCARD sx_status sx__cagra_alloc(const float *vecs,
                                       size_t n,
                                       size_t dim,
                                       sx_metric metric,
                                       uint32_t degree,
                                       uint32_t inter_degree,
                                       uint32_t n_entries,
                                       sx__cagra **out);
/* Frees the arrays and the struct. NULL is a no-op. */
void sx__cagra_free(sx__index *idx);

/* The rows as an adjacency view (graph.h): padded rows of `degree` slots. */
static inline sx__graph_view sx__cagra_view(const sx__cagra *g)
{
    sx__graph_view v = { .n = g->n,
                         .cap = g->degree,
                         .format = SX__GRAPH_PADDED,
                         .base = (uint8_t *)(void *)g->graph,
                         .stride = (size_t)g->degree * sizeof(uint32_t) };
    return v;
}

/* Checks invariants 1-3 (the rows alone). Returns SX_OK or SX_ECORRUPT (first violation in
 * sx_errmsg()), or SX_ENOMEM. Thread-safety: read-only on idx. */
SX_NODISCARD sx_status sx__cagra_check_rows(const sx__index *idx);
/* Checks invariants 1-4. Errors as sx__cagra_check_rows. Thread-safety: read-only on idx. */
SX_NODISCARD sx_status sx__cagra_check(const sx__index *idx);
/* Makes invariant 4 hold on a graph satisfying 1-3 (graph.h's sx__graph_repair: parents found
 * by an itopk search for the unreached node). Errors: SX_ENOMEM. Thread-safety: writes g's rows;
 * nothing may search g meanwhile. */
SX_NODISCARD sx_status sx__cagra_repair(sx__cagra *g);

/* vtable members (index.h has the contracts) */
sx_status sx__cagra_check_search_params(const sx_param *p, size_t np, size_t k);
sx_status sx__cagra_search(const sx__index *idx,
                           const float *query,
                           size_t k,
                           const sx_param *sp,
                           size_t nsp,
                           const uint64_t *allow,
                           sx__topk *out);
sx_status sx__cagra_serialize(const sx__index *idx, sx__wbuf *w);
sx_status sx__cagra_deserialize(const void *data,
                                size_t len,
                                const float *vecs,
                                size_t n,
                                size_t dim,
                                sx_metric metric,
                                sx__index **out);
size_t sx__cagra_memory_bytes(const sx__index *idx);

/* ---- backend notes ----
 * One line on stderr, once per process per note kind, saying which backend a GPU_* build used
 * ("GPU_CAGRA: no usable GPU (...): building the graph with the CPU twin"). Silenced by the
 * environment variable SX_QUIET (set and not "0"). Thread-safe (an atomic flag per kind). */
enum {
    SX__GPU_NOTE_CAGRA_CPU = 0,
    SX__GPU_NOTE_CAGRA_GPU,
    SX__GPU_NOTE_CAGRA_FAIL,
    SX__GPU_NOTE_KMEANS_CPU,
    SX__GPU_NOTE_KMEANS_GPU,
    SX__GPU_NOTE_KMEANS_FAIL,
    SX__GPU_NOTE_BRUTE_FORCE,
    SX__GPU_NOTE_COUNT
};

void sx__gpu_note_once(int kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
