/*
 * index.h: the vector-index interface (a vtable) implemented per index family.
 *
 * An index covers the rows [0,n) of one sealed segment. It BORROWS the segment's contiguous
 * vector array (n*dim floats): the array must outlive the index. Deleted or filtered-out rows are
 * excluded with an `allow` bitset at search time (bit i set = row i may be returned; NULL = all).
 * Distances are internal ("smaller is better", vector/dist.h).
 *
 * Life cycle: build (or deserialize) -> search many times, concurrently -> free. A built index is
 * immutable; search is thread-safe and allocates its own scratch (or uses a thread-local pool).
 * Parameters use Milvus's names; parse errors name the parameter and its allowed range.
 */
#ifndef SX_INDEX_INDEX_H
#define SX_INDEX_INDEX_H
#include <sextant.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/heap.h"
#include "vector/dist.h"

typedef struct sx__index sx__index;

typedef struct sx__build_ctx {
    uint32_t threads;          /* worker threads (>= 1) */
    atomic_size_t *progress;   /* optional: rows inserted so far (relaxed stores) */
    const atomic_bool *cancel; /* optional: build returns SX_ECANCELED when set */
    /* Bytes the build may allocate in total (0 = unlimited). An index that cannot work within
     * it returns SX_ENOMEM with a message naming the limit BEFORE allocating (see
     * estimate_build_bytes); DISKANN adapts its build to fit instead. */
    uint64_t memory_limit_bytes;
    /* File-backed indexes (DISKANN) write their files as <file_prefix>.<ext>; NULL = in-memory
     * only (tests may pass a temporary prefix). Files must be durable (fsynced) when build
     * returns. */
    const char *file_prefix;
    uint64_t seed; /* k-means / sampling seed (0: a fixed default) */
} sx__build_ctx;

typedef struct sx__index_ops {
    const char *name; /* "FLAT", "HNSW" */
    /* Checks build params (unknown keys and out-of-range values are SX_EINVAL naming them). */
    sx_status (*check_build_params)(const sx_param *p, size_t np);
    /* Checks search params for a given k (e.g. HNSW needs ef >= k). */
    sx_status (*check_search_params)(const sx_param *p, size_t np, size_t k);
    sx_status (*build)(const sx_param *p,
                       size_t np,
                       const float *vecs,
                       size_t n,
                       size_t dim,
                       sx_metric metric,
                       const sx__build_ctx *ctx,
                       sx__index **out);
    /* One query; pushes up to k hits into out (initialised by the caller with capacity k). */
    sx_status (*search)(const sx__index *idx,
                        const float *query,
                        size_t k,
                        const sx_param *sp,
                        size_t nsp,
                        const uint64_t *allow,
                        sx__topk *out);
    /* Appends the index's own bytes (not the vectors) to w. */
    sx_status (*serialize)(const sx__index *idx, sx__wbuf *w);
    /* Rebuilds from serialize's bytes; SX_ECORRUPT on any inconsistency (never asserts). */
    sx_status (*deserialize)(const void *data,
                             size_t len,
                             const float *vecs,
                             size_t n,
                             size_t dim,
                             sx_metric metric,
                             sx__index **out);
    size_t (*memory_bytes)(const sx__index *idx); /* excluding the borrowed vectors */
    void (*free)(sx__index *idx);

    /* ---- optional members (NULL when not applicable) ---- */
    /* Checks build params against the collection's vector dimension and metric (e.g. IVF_PQ's
     * m must divide dim), after check_build_params accepted them. SX_EINVAL naming the
     * parameter and what it must satisfy. */
    sx_status (*check_build_shape)(const sx_param *p, size_t np, size_t dim, sx_metric metric);
    /* Peak bytes build would allocate for n x dim with these params (for memory limits). */
    uint64_t (*estimate_build_bytes)(const sx_param *p, size_t np, size_t n, size_t dim);
    /* File-backed load: like deserialize, plus the prefix the build wrote its files under.
     * When set, the engine calls it instead of deserialize. */
    sx_status (*load_files)(const void *data,
                            size_t len,
                            const char *file_prefix,
                            const float *vecs,
                            size_t n,
                            size_t dim,
                            sx_metric metric,
                            sx__index **out);
    /* Serialization without a copy of the bulk: serialize's bytes are head || big || tail, where
     * head and tail are written into the (empty) buffers and big points into the index (borrowed
     * until the index is freed). The engine writes the three pieces to the index file as they are,
     * so a build that holds 1 GB of codes does not need a second GB to save them. */
    sx_status (*serialize_parts)(
        const sx__index *idx, sx__wbuf *head, const void **big, size_t *big_len, sx__wbuf *tail);
    /* Sizes the index's optional RAM cache (DISKANN's node cache) to at most `bytes` when its
     * build parameters left it none; a no-op when they chose one. Called by the engine before
     * the index is published, with a share of the memory budget's free part. */
    sx_status (*set_cache_bytes)(sx__index *idx, uint64_t bytes);
    /* The expected work of one filtered search that keeps n_allowed of the index's rows, in
     * float32 distance computations of gathered (random-access) rows; < 0: no estimate (the
     * engine then keeps its fixed selectivity rule). The engine weighs it against an exact scan
     * of the n_allowed rows (query.c); params as for search, already checked. */
    double (*filter_cost)(
        const sx__index *idx, const sx_param *sp, size_t nsp, size_t k, size_t n_allowed);
    /* Deletes the index's files (index drop, segment compaction). */
    void (*remove_files)(const char *file_prefix);
    /* Bytes of the index's own files on disk. */
    uint64_t (*disk_bytes)(const sx__index *idx);
    /* Cumulative read I/Os and bytes since load (thread-safe, relaxed counters). */
    void (*io_stats)(const sx__index *idx, uint64_t *ios, uint64_t *bytes);
    /* True when the index does not need the segment's vectors in RAM (DISKANN reads them from
     * its own sectors); the engine may then leave them unloaded. */
    bool reads_own_vectors;

    /* ---- element types (sextant.h's FLOAT16 / BFLOAT16 / BINARY vector fields) ----
     * vtypes: bit (1u << vt) for each sx__vtype the index takes; 0 means float32 only (then
     * the members below are NULL). An index that takes another type implements the three
     * members below for it: build / deserialize over n rows of sx__vtype_row_bytes(vt, dim)
     * bytes (BORROWED as the float32 array is), and search with the query as the field is
     * searched: dim float32 values for F16 and BF16, dim / 8 packed bytes for BIN. The engine
     * calls them for every field that is not float32, and the float32 members otherwise (an
     * index without the float32 bit answers those with SX_EINVAL). */
    uint32_t vtypes;
    sx_status (*build_typed)(const sx_param *p,
                             size_t np,
                             const void *vecs,
                             sx__vtype vt,
                             size_t n,
                             size_t dim,
                             sx_metric metric,
                             const sx__build_ctx *ctx,
                             sx__index **out);
    sx_status (*deserialize_typed)(const void *data,
                                   size_t len,
                                   const void *vecs,
                                   sx__vtype vt,
                                   size_t n,
                                   size_t dim,
                                   sx_metric metric,
                                   sx__index **out);
    sx_status (*search_typed)(const sx__index *idx,
                              const void *query,
                              size_t k,
                              const sx_param *sp,
                              size_t nsp,
                              const uint64_t *allow,
                              sx__topk *out);
} sx__index_ops;

/* Whether ops takes rows of element type vt (see vtypes). */
static inline bool sx__index_takes(const sx__index_ops *ops, sx__vtype vt)
{
    return ops->vtypes ? ((ops->vtypes >> vt) & 1u) != 0 : vt == SX__VT_F32;
}

/* Registry: returns the ops for a type name (case-insensitive; "AUTOINDEX" -> HNSW) or NULL. */
const sx__index_ops *sx__index_lookup(const char *type);
/* The same for a field of element type vt: AUTOINDEX is BIN_IVF_FLAT on binary fields. */
const sx__index_ops *sx__index_lookup_vt(const char *type, sx__vtype vt);

extern const sx__index_ops sx__flat_index_ops;
extern const sx__index_ops sx__hnsw_index_ops;
extern const sx__index_ops sx__ivf_flat_index_ops;
extern const sx__index_ops sx__ivf_sq8_index_ops;
extern const sx__index_ops sx__ivf_pq_index_ops;
extern const sx__index_ops sx__diskann_index_ops;
extern const sx__index_ops sx__hnsw_sq_index_ops;
/* issue 7: GPU index types (CPU twins when there is no GPU; src/index/cagra, src/index/ivf) */
extern const sx__index_ops sx__cagra_index_ops;
extern const sx__index_ops sx__gpu_ivf_flat_index_ops;
extern const sx__index_ops sx__gpu_ivf_pq_index_ops;
extern const sx__index_ops sx__gpu_brute_force_index_ops;
/* issue 16: binary vectors (src/index/flat: BIN_FLAT; src/index/ivf: BIN_IVF_FLAT) */
extern const sx__index_ops sx__bin_flat_index_ops;
extern const sx__index_ops sx__bin_ivf_flat_index_ops;

/* Every check an index build of this type would make before allocating, for a field of element
 * type vt: the index takes vt, check_build_params, dim in [1, SX_MAX_DIM] (BIN: bits, a multiple
 * of 8), the metric fits vt (L2/IP/COSINE; HAMMING/JACCARD), then
 * check_build_shape. */
SX_NODISCARD sx_status sx__index_check_build(const sx__index_ops *ops,
                                             sx__vtype vt,
                                             const sx_param *p,
                                             size_t np,
                                             size_t dim,
                                             sx_metric metric);
/* "FLAT, HNSW (AUTOINDEX), HNSW_SQ, ..." : every type name the registry knows, for messages. */
const char *sx__index_type_list(void);

/* Helpers for parsing Milvus-style numeric params. Returns SX_OK and *out = def when absent;
 * SX_EINVAL "<key> must be an integer in [lo, hi]" when present but invalid. Keys match
 * case-sensitively (Milvus names). */
sx_status
sx__param_int(const sx_param *p, size_t np, const char *key, long lo, long hi, long def, long *out);

#endif
