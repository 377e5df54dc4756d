/*
 * hnsw_sq.h: internal interface of the HNSW_SQ index family: an HNSW graph (Malkov & Yashunin,
 * arXiv 1603.09320, built by src/index/hnsw) searched on 8-bit scalar codes of the vectors, with
 * an exact re-rank of the best candidates from the segment's float vectors. The vtable is
 * sx__hnsw_sq_index_ops (index.h), type name "HNSW_SQ".
 *
 * Why. A plain HNSW search spends its time fetching and comparing full float vectors (3 KiB each
 * for Fashion-MNIST). Here the traversal compares the query with dim-byte codes using integer
 * dot products (AVX-512 VNNI vpdpbusd: 64 code bytes per instruction), and only the best few
 * candidates of the final pool are compared exactly (refine_k, hnsw_sq_search.c). The graph is the
 * float graph, so its quality is unchanged; code distances only steer the traversal.
 *
 * Files, one per life-cycle phase:
 *   hnsw_sq_build.c   parameters, memory estimate, build (HNSW build, then re-layout + encode),
 *                     vtable, free
 *   hnsw_sq_quant.c   the per-dimension quantizer, query preparation, integer dot kernels
 *                     (scalar, AVX2, AVX2-VNNI, AVX-512 VNNI) with run-time dispatch
 *   hnsw_sq_search.c  greedy descent + pool ef-search on code distances, filtered search, refine
 *   hnsw_sq_io.c      serialize / deserialize (byte format there) and sx__hnsw_sq_check
 *
 * The quantizer (SQ8). Per dimension d an affine map trained on the rows' range, min/max but
 * robust to outliers (vector/range.h: a few extreme values per dimension stay outside it):
 *   x_d ~ x'_d = a_d + s_d c_d,  c_d = round((x_d - a_d) / s_d) in [0, 255],
 *   s_d = (max_d - a_d) / 255.
 * A row with a value outside the range (clamped: its code is off by more than s_d there, the rule
 * of sx__sq8_clipped) is "clipped": its record's norm is NaN, so its code distance is NaN, and
 * every search site replaces it by the exact distance from the float vector (sx__hsq_fix). The
 * flag is derived from the codes and the vectors, at build and load alike (not serialized).
 * Distances are computed around a centre mu (L2: mu_d = a_d + 127.5 s_d, the middle of the code
 * range; IP/COSINE: mu = 0). A query q is prepared once: u = q - mu, w_d = s_d u_d is scaled to
 * int8, w_d ~ t w8_d with t = max|w| / 127 (w8 in [-127, 127]), B = sum (a_d - mu_d) u_d. Then
 *   <x' - mu, q - mu> ~ B + t * sum_d c_d w8_d   (u8 x s8 dot product: vpdpbusd, exact in int32)
 *   IP/COSINE: d = -<x', q>                       (mu = 0)
 *   L2:        d = ||x' - mu||^2 - 2 <x' - mu, q - mu> + ||q - mu||^2
 *                                                 (||x' - mu||^2 stored with the code)
 * i.e. one integer dot product per distance for both metrics, whatever the per-dimension scales.
 * Why the centre: the expansion of L2 subtracts large terms; around the origin, data far from
 * it (a large common offset) would lose the distances' low digits in float32 cancellation;
 * around mu every term is of the order of the data's spread. The only error beyond the code's
 * (<= s_d / 2 per dimension) is the query's 8-bit rounding, which the exact re-rank removes from
 * the final order. int32 cannot overflow: dim * 255 * 127 < 2^31 for dim <= SX_MAX_DIM.
 *
 * Memory layout. Level 0, which every search walks, is one array of n fixed-size records in node
 * order, 64-byte aligned, each record:
 *   [code: dim bytes][pad to 4][norm: f32 ||x' - mu||^2 (L2; 0 for IP)][level-0 list: count,
 *   M0 ids]
 *   padded to a multiple of 64 bytes.
 * A node's code, norm and links share cache lines, so the node a search expands has its links
 * next to the code it was just compared with (hnswlib's data_level0 idea, with codes instead of
 * vectors). Measured against codes and links in two separate arrays: see hnsw_sq_search.c.
 * Upper levels are as in hnsw.h: levels (n bytes), up_off (n uint32), up (blocks of M+1 uint32).
 * Bytes per node: rec_bytes (Fashion-MNIST: 784 + 4 + 132 -> 960; BIGANN: 128 + 4 + 132 -> 320)
 * + 5 + the upper levels (~4 (M+1) / (M-1)). The float vectors are BORROWED from the segment.
 *
 * Invariants (checked by sx__hnsw_sq_check after every build and on every deserialize):
 *   1. every id in a list is < n; no list holds its owner or the same id twice;
 *   2. level-0 counts <= M0 == 2*M, upper counts <= M; levels[i] <= SX__HNSW_MAX_LEVEL;
 *   3. a neighbour listed at level l has levels[nb] >= l;
 *   4. n > 0 => entry < n and levels[entry] == max_level == max over levels; n == 0 => entry
 *      is SX__HNSW_NONE;
 *   5. every node is reachable from the entry point through level-0 links (invariant R of
 *      graph.h; the graph is HNSW's, repaired by its build, and checked again after the
 *      re-layout and on every load); search seeds level 0 with the entry point as well as the
 *      descent's result, so with ef = n every row is found;
 *   6. the quantizer's a_d and s_d are finite, s_d >= 0, and so is mu; codes are any bytes (all
 *      decode).
 * Search never reads out of bounds on an index satisfying 1-4 and 6.
 *
 * Known weaknesses:
 *   XXX only sq_type SQ8: a 4-bit code (half the bytes per visited node) would help data sets
 *       that do not fit in cache, at the price of more re-ranking.
 *   XXX a dimension whose range dwarfs the others' (1e15 next to 1) leaves the code distances of
 *       the others below float32 resolution; results stay exact (re-rank) but recall drops.
 *
 * Thread-safety: a built index is immutable; any number of threads may search it at once. Each
 * thread keeps its search scratch in graph.h's TLS (hnsw_sq_search.c).
 */
#ifndef SX_INDEX_HNSW_SQ_H
#define SX_INDEX_HNSW_SQ_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/hnsw/hnsw.h"
#include "index/index.h"
#include "util/heap.h"
#include "vector/dist.h"

#define SX__HNSW_SQ_MAGIC   0x51485853u /* "SXHQ" little-endian */
#define SX__HNSW_SQ_VERSION 1u
#define SX__HNSW_SQ_SQ8     8u /* sq_type "SQ8": 8-bit codes */

/* Integer dot product of a code (dim bytes, read exactly dim bytes) with a prepared int8 query
 * (padded with zeros to a multiple of 64 and 64-byte aligned). */
typedef int32_t (*sx__hsq_dot_fn)(const uint8_t *code, const int8_t *q, size_t dim);
/* out[i] = dot(base + ids[i] * stride, q) for i < n: one call per expanded node, so the kernel
 * can prefetch the next record and interleave two records. */
typedef void (*sx__hsq_dot_batch_fn)(const uint8_t *base,
                                     size_t stride,
                                     const uint32_t *ids,
                                     size_t n,
                                     const int8_t *q,
                                     size_t dim,
                                     int32_t *out);

/* Query preparation, with u_d = q[d] - mu[d] and w_d = scale[d] * u_d: returns max |w_d| (0 when
 * not finite) and writes B = sum amu[d] u_d, nq = sum u_d^2. */
typedef float (*sx__hsq_scan_fn)(const float *mu,
                                 const float *amu,
                                 const float *scale,
                                 const float *q,
                                 size_t dim,
                                 float *B,
                                 float *nq);
/* q8[d] = round-half-even(scale[d] * (q[d] - mu[d]) * inv) clamped to [-127, 127] (NaN -> 0). */
typedef void (*sx__hsq_round_fn)(
    const float *mu, const float *scale, const float *q, size_t dim, float inv, int8_t *q8);

typedef struct sx__hsq_kernels {
    const char *isa; /* "scalar", "avx2", "avx2vnni", "avx512vnni" */
    sx__hsq_dot_fn dot;
    sx__hsq_dot_batch_fn dot_batch;
    sx__hsq_scan_fn scan;
    sx__hsq_round_fn round;
} sx__hsq_kernels;

/* The kernels for this CPU, following sx__dist()'s ISA (so SX_SIMD caps them too): resolved once.
 */
const sx__hsq_kernels *sx__hsq_kernels_get(void);
/* A named table ("scalar", "avx2", "avx2vnni", "avx512vnni"), NULL when the CPU lacks it (tests).
 */
const sx__hsq_kernels *sx__hsq_kernels_for(const char *isa);

/* A prepared query: see the header comment. q8 is caller-owned scratch of sx__hsq_q8_bytes(dim). */
typedef struct sx__hsq_query {
    int8_t *q8; /* w8, zero-padded to a multiple of 64, 64-byte aligned */
    float c0;   /* L2: ||q - mu||^2 - 2B; IP: -B */
    float c1;   /* L2: -2t; IP: -t */
} sx__hsq_query;

static inline size_t sx__hsq_q8_bytes(size_t dim)
{
    return (dim + 63) / 64 * 64;
}

typedef struct sx__hnsw_sq {
    const float *vecs; /* borrowed: n*dim floats, must outlive the index */
    size_t n;
    size_t dim;
    sx_metric metric;
    sx__dist_fn dist; /* exact "smaller is better" kernel, for the re-rank */
    uint32_t M;
    uint32_t M0; /* 2*M */
    uint32_t efc;
    uint32_t sq_type; /* SX__HNSW_SQ_SQ8 */
    bool refine;      /* false: results carry code distances (no re-rank) */
    uint32_t entry;   /* SX__HNSW_NONE when n == 0 */
    uint32_t max_level;
    float *qmin;   /* a_d, dim floats, 64-byte aligned; owned */
    float *qscale; /* s_d, dim floats, 64-byte aligned; owned */
    float *qmu;    /* mu_d (derived from a, s and the metric; not stored), owned */
    float *qamu;   /* a_d - mu_d (derived), owned */
    uint8_t *rec;  /* n * rec_bytes, 64-byte aligned; owned */
    size_t rec_bytes;
    size_t norm_off;  /* byte offset of the f32 norm in a record */
    size_t links_off; /* byte offset of the level-0 list (u32 count, M0 u32 ids) */
    uint8_t *levels;  /* n; owned */
    uint32_t *up_off; /* n; SX__HNSW_NONE for level-0 nodes; owned */
    uint32_t *up;     /* n_up * (M+1); owned (NULL when n_up == 0) */
    size_t n_up;
    const sx__hsq_kernels *kern;
} sx__hnsw_sq;

static inline const uint8_t *sx__hsq_code(const sx__hnsw_sq *h, uint32_t id)
{
    return h->rec + (size_t)id * h->rec_bytes;
}

static inline float sx__hsq_norm(const sx__hnsw_sq *h, uint32_t id)
{
    const uint8_t *p = h->rec + (size_t)id * h->rec_bytes + h->norm_off;
    return *(const float *)(const void *)p;
}

/* The link list (count, then ids) of node `id` at `level` (level <= levels[id]). */
static inline uint32_t *sx__hsq_links(const sx__hnsw_sq *h, uint32_t id, uint32_t level)
{
    if (level == 0)
        return (uint32_t *)(void *)(h->rec + (size_t)id * h->rec_bytes + h->links_off);
    return h->up + ((size_t)h->up_off[id] + level - 1) * (h->M + 1);
}

/* The level-0 lists (inside the records) as an adjacency view (graph.h). */
static inline sx__graph_view sx__hsq_l0_view(const sx__hnsw_sq *h)
{
    sx__graph_view v = { .n = h->n,
                         .cap = h->M0,
                         .format = SX__GRAPH_COUNTED,
                         .base = h->rec + h->links_off,
                         .stride = h->rec_bytes };
    return v;
}

/* Allocates an index shell for n rows: quantizer arrays, records, levels/up_off (up is sized by
 * sx__hnsw_sq_alloc_up). Everything zeroed; entry NONE. Errors: SX_ENOMEM. */
SX_NODISCARD sx_status sx__hnsw_sq_alloc(
    const float *vecs, size_t n, size_t dim, sx_metric metric, uint32_t M, sx__hnsw_sq **out);
/* Computes up_off from levels and allocates `up`. Errors: SX_ENOMEM, SX_ECORRUPT (more upper
 * blocks than 32 bits can index). */
SX_NODISCARD sx_status sx__hnsw_sq_alloc_up(sx__hnsw_sq *h);
/* Record size for dim and M0 (see the layout above). */
size_t sx__hnsw_sq_rec_bytes(size_t dim, uint32_t M0, size_t *norm_off, size_t *links_off);

/* Quantizer (hnsw_sq_quant.c). */
/* Trains a_d, s_d on the n rows (robust ranges per dimension, range.h; non-finite values
 * ignored), then sx__hsq_derive. Errors: SX_ENOMEM. */
SX_NODISCARD sx_status sx__hsq_train(sx__hnsw_sq *h);
/* Sets mu and a - mu from a, s and the metric (after training or loading). */
void sx__hsq_derive(sx__hnsw_sq *h);
/* Encodes row x into node id's record and sets its norm. */
void sx__hsq_encode(sx__hnsw_sq *h, uint32_t id, const float *x);
/* Sets node id's norm from its code, NaN when the code is clipped for its vector x (encode,
 * deserialize). */
void sx__hsq_set_norm(sx__hnsw_sq *h, uint32_t id, const float *x);
/* Prepares query q (see the header comment); out->q8 must point to sx__hsq_q8_bytes(dim) bytes.
 */
void sx__hsq_prepare(const sx__hnsw_sq *h, const float *q, sx__hsq_query *out);

/* Code distance of node id (scalar-free fast path through h->kern); NaN for a clipped node. */
static inline float sx__hsq_dist(const sx__hnsw_sq *h, const sx__hsq_query *q, uint32_t id)
{
    int32_t dot = h->kern->dot(sx__hsq_code(h, id), q->q8, h->dim);
    return sx__hsq_norm(h, id) + q->c0 + q->c1 * (float)dot;
}

/* d, a code distance of node id, or the exact distance from `query` when d is NaN (id is
 * clipped). */
static inline float sx__hsq_fix(const sx__hnsw_sq *h, const float *query, uint32_t id, float d)
{
    if (__builtin_expect(d == d, 1))
        return d;
    return h->dist(query, h->vecs + (size_t)id * h->dim, h->dim);
}

/* Structural invariants 1-6. SX_OK or SX_ECORRUPT naming the first violation; SX_ENOMEM if the
 * reachability scan cannot allocate. Thread-safety: read-only. */
SX_NODISCARD sx_status sx__hnsw_sq_check(const sx__index *idx);

/* vtable members implemented across the files */
void sx__hnsw_sq_free(sx__index *idx);
size_t sx__hnsw_sq_memory_bytes(const sx__index *idx);
sx_status sx__hnsw_sq_check_search_params(const sx_param *p, size_t np, size_t k);
/* index.h's filter_cost (hnsw_sq_search.c has the model and its measurements). */
double sx__hnsw_sq_filter_cost(
    const sx__index *idx, const sx_param *sp, size_t nsp, size_t k, size_t n_allowed);
sx_status sx__hnsw_sq_search(const sx__index *idx,
                             const float *query,
                             size_t k,
                             const sx_param *sp,
                             size_t nsp,
                             const uint64_t *allow,
                             sx__topk *out);
sx_status sx__hnsw_sq_serialize(const sx__index *idx, sx__wbuf *w);
sx_status sx__hnsw_sq_deserialize(const void *data,
                                  size_t len,
                                  const float *vecs,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  sx__index **out);

#endif
