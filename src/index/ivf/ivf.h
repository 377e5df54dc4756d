/*
 * ivf.h: internal interface of the IVF index family (inverted file over a k-means coarse
 * quantizer: Sivic & Zisserman, "Video Google", ICCV 2003; with product quantization: Jegou,
 * Douze & Schmid, "Product quantization for nearest neighbor search", PAMI 2011, IVFADC).
 * One core, three code kinds, three vtables (index.h):
 *   IVF_FLAT  sx__ivf_flat_index_ops  exact distances from the vectors
 *   IVF_SQ8   sx__ivf_sq8_index_ops   8-bit scalar codes of the residual x - c (quant_sq8.h)
 *   IVF_PQ    sx__ivf_pq_index_ops    PQ codes (nbits = 8) of the residual x - c (quant_pq.h),
 *                                     optional exact re-ranking ("refine")
 *
 * Files, one per life-cycle phase:
 *   ivf_build.c   parameters, memory estimate, k-means + assignment + encoding, vtables
 *   ivf_search.c  coarse search, list scans (SIMD ADC), refine, per-thread scratch
 *   ivf_io.c      serialize / deserialize (byte format documented there)
 *   ivf_check.c   structural invariants (sx__ivf_check), run on every deserialize
 *
 * Memory layout (the index BORROWS the segment's vectors, n*dim floats):
 *   centroids  nlist x dim floats (64-byte aligned)
 *   off        nlist+1 uint32: list l holds list positions [off[l], off[l+1])
 *   ids        n uint32, row ids in list order (ascending within a list: a counting sort of the
 *              assignment in row order)
 *   FLAT       lvecs: a copy of the vectors in list order (n x dim floats, aligned), so a list
 *              scan streams through memory. It doubles the RAM of the vectors (the segment keeps
 *              its own array), but reading the rows in place through ids is DRAM-latency bound:
 *              measured single-thread on 1M x 128 synthetic (nlist 1024, nprobe 16, the best
 *              software prefetch of each): 910 QPS copied vs 373 in place; Fashion-MNIST (nlist
 *              256, nprobe 4): 1875 vs 1506. The copy is not serialized: load rebuilds it from
 *              the borrowed vectors and the ids.
 *   SQ8        codes: n x dim bytes in list order; sq: the per-dimension ranges of the residuals
 *              (outlier-robust, vector/range.h); sq_exact: a bit per list position whose residual
 *              lies outside them (clamped code), scanned with exact distances from the vectors
 *              instead of its code (sx__ivf_sq8_flag, at build and load)
 *   PQ         codes in blocks of SX__IVF_PQ_BLOCK vectors, transposed inside a block: block b
 *              of list l (blocks [blk[l], blk[l+1])) holds m x 32 bytes, byte j*32 + t = code j
 *              of the list's vector 32*b + t (padding vectors: code 0, never reported). One
 *              16-byte load then feeds 16 lanes of a table gather.
 *              term (L2 only): one float per coded vector, in the same blocks (32 per block):
 *              ||r'||^2 + 2 <c, r'> for the decoded residual r' of a row of list c, because
 *              ||q - c - r'||^2 = ||q - c||^2 + term - 2 <q, r'>: the first part is the coarse
 *              distance, the last a table lookup per sub-space from ONE table per query
 *              (-2 <q_j, p_js>). FAISS's alternative, a precomputed nlist x m x ksub table added
 *              to the query's table for every probed list, costs nlist * m KiB (14 MiB for
 *              Fashion-MNIST at nlist 256, m 56, four times the codes) and m*ksub adds per list;
 *              this costs 4 bytes per row and nothing per list. Not serialized: load recomputes
 *              it from the codes (n * dim flops).
 *
 * Invariants (checked by sx__ivf_check):
 *   1. n == 0 <=> nlist == 0; otherwise 1 <= nlist <= min(n, SX__IVF_NLIST_MAX);
 *   2. off[0] == 0, off is non-decreasing, off[nlist] == n;
 *   3. ids is a permutation of [0, n);
 *   4. centroids (and SQ8 ranges) are finite;
 *   5. PQ: every code < ksub (a table lookup stays inside its row); blk[l+1]-blk[l] ==
 *      ceil(list size / 32); pq.dim == dim, pq.m == m.
 * Search never reads out of bounds on an index satisfying 1-5.
 *
 * Thread-safety: a built index is immutable; any number of threads may search it at once. Each
 * thread keeps its search scratch in a pthread key (ivf_search.c).
 */
#ifndef SX_INDEX_IVF_H
#define SX_INDEX_IVF_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"
#include "util/heap.h"
#include "vector/dist.h"
#include "vector/quant_pq.h"
#include "vector/quant_sq8.h"

#define SX__IVF_MAGIC         0x56495853u /* "SXIV" little-endian */
#define SX__IVF_VERSION       1u
#define SX__IVF_NLIST_MIN     1
#define SX__IVF_NLIST_MAX     65536
#define SX__IVF_NLIST_DEF     128
#define SX__IVF_NPROBE_DEF    8
#define SX__IVF_PQ_BLOCK      32u
#define SX__IVF_PQ_KSUB       256u
/* residuals the PQ codebooks are trained on, at most: what the codec's k-means samples anyway */
#define SX__IVF_PQ_TRAIN_ROWS ((size_t)SX__IVF_PQ_KSUB * SX__PQ_TRAIN_PER_CENTROID)
#define SX__IVF_REFINE_K_MAX  65536.0
/* Rows encoded per work item of the parallel encoder. */
#define SX__IVF_ENCODE_CHUNK  1024u
#define SX__IVF_MAX_THREADS   64u

typedef enum sx__ivf_kind {
    SX__IVF_KIND_FLAT = 0,
    SX__IVF_KIND_SQ8 = 1,
    SX__IVF_KIND_PQ = 2,
} sx__ivf_kind;

typedef struct sx__ivf {
    sx__ivf_kind kind;
    const float *vecs; /* borrowed: n*dim floats, must outlive the index */
    size_t n;
    size_t dim;
    sx_metric metric;
    sx__dist_fn dist;     /* "smaller is better" kernel for metric */
    size_t chunk;         /* FLAT early-abandon chunk in floats (L2, dim >= 2*chunk), else 0 */
    uint32_t nlist_param; /* the requested nlist (describe / serialize) */
    uint32_t nlist;       /* lists built: min(nlist_param, n) */
    float *centroids;     /* nlist*dim, aligned; owned */
    float *lvecs;         /* FLAT: n*dim copy in list order, aligned; owned */
    uint32_t *off;        /* nlist+1; owned */
    uint32_t *ids;        /* n; owned */
    /* SQ8 */
    sx__sq8 sq;
    uint8_t *sq_codes;  /* n*dim; owned */
    uint64_t *sq_exact; /* list positions whose code is clipped (sx__sq8_clipped): n bits, NULL
                           when none; owned. Not serialized: derived from codes and vectors. */
    size_t sq_n_exact;
    /* PQ */
    uint32_t m; /* sub-quantizers (0 unless PQ) */
    sx__pq pq;
    uint32_t *blk;     /* nlist+1 block offsets; owned */
    uint8_t *pq_codes; /* blk[nlist] * m * 32 bytes, aligned; owned */
    float *term;       /* L2: blk[nlist]*32 floats, else NULL; aligned; owned */
} sx__ivf;

static inline const sx__ivf *sx__ivf_of(const sx__index *idx)
{
    return (const sx__ivf *)(const void *)idx;
}

static inline size_t sx__ivf_list_size(const sx__ivf *v, uint32_t l)
{
    return (size_t)v->off[l + 1] - v->off[l];
}

/* Allocates an empty index shell (fields zeroed, shape set). Errors: SX_ENOMEM. */
sx_status sx__ivf_new(
    sx__ivf_kind kind, const float *vecs, size_t n, size_t dim, sx_metric metric, sx__ivf **out);
/* Frees everything the index owns and the struct. NULL is a no-op. */
void sx__ivf_free(sx__index *idx);

/* Copies the vectors into list order (lvecs) from vecs and ids. Used by build and deserialize.
 * Errors: SX_ENOMEM. */
sx_status sx__ivf_finish_flat(sx__ivf *v);
/* Given centroids, off, ids (and sq_codes / row-major PQ codes in list order), builds the
 * derived search structures: the transposed PQ blocks (from `rowcodes`, n*m bytes, borrowed) and
 * the L2 terms. Used by build and deserialize. Errors: SX_ENOMEM. */
sx_status sx__ivf_finish_pq(sx__ivf *v, const uint8_t *rowcodes);
/* SQ8: sets sq_exact from the codes, the vectors and the lists (sx__sq8_clipped of each row's
 * residual), at build and load alike. Needs valid off/ids (sx__ivf_check). Errors: SX_ENOMEM. */
sx_status sx__ivf_sq8_flag(sx__ivf *v);
/* Copies the PQ codes of list position p (row-major, m bytes) out of the blocked layout. */
void sx__ivf_pq_code_at(const sx__ivf *v, uint32_t list, size_t p, uint8_t *out);

/* ADC over one transposed block (ivf.h layout): out[t] = (base + term[t]) + sum_j tab[j*ksub +
 * blk[j*32 + t]] for the 32 lanes (term may be NULL: 0). Every ISA adds in the same order, so
 * the results are bit-identical. */
typedef void (*sx__ivf_adc_fn)(const float *tab,
                               size_t ksub,
                               const uint8_t *blk,
                               size_t m,
                               float base,
                               const float *term,
                               float *out);
/* The kernel for "scalar", "avx2" or "avx512" (NULL when the CPU lacks it; tests), or for this
 * CPU with isa == NULL (following sx__dist()'s choice, so SX_SIMD caps it). */
sx__ivf_adc_fn sx__ivf_adc_for(const char *isa);

/* Checks invariants 1-5. Returns SX_OK or SX_ECORRUPT (first violation in sx_errmsg()), or
 * SX_ENOMEM. Thread-safety: read-only. */
SX_NODISCARD sx_status sx__ivf_check(const sx__index *idx);

/* The vtable of a kind. A strong reference: index.h declares the vtables weak, and a weak
 * reference alone does not pull ivf_build.o out of libsextant.a (tools and benchmarks that need
 * the family linked call this). */
const sx__index_ops *sx__ivf_ops(sx__ivf_kind kind);
/* Kind names for messages ("IVF_FLAT", ...). */
const char *sx__ivf_kind_name(sx__ivf_kind kind);

/* vtable members shared by the three kinds (index.h has the contracts):
 * check_search_params: nprobe, refine, refine_k (the last two IVF_SQ8/IVF_PQ only), "ef"
 *   tolerated; anything else SX_EINVAL naming it (ivf_search.c).
 * search: one query into out; SX_EINVAL on a bad value of a known parameter, SX_ENOMEM when the
 *   per-thread scratch cannot grow. Thread-safe.
 * serialize: appends the record of ivf_io.c to w; SX_ENOMEM when w cannot grow.
 * deserialize: SX_ECORRUPT on any inconsistency, SX_ENOMEM; never asserts on input.
 * memory_bytes: everything the index owns (the FLAT copy included), not the borrowed vectors. */
sx_status sx__ivf_check_search_params(sx__ivf_kind kind, const sx_param *p, size_t np, size_t k);
sx_status sx__ivf_search(const sx__index *idx,
                         const float *query,
                         size_t k,
                         const sx_param *sp,
                         size_t nsp,
                         const uint64_t *allow,
                         sx__topk *out);
sx_status sx__ivf_serialize(const sx__index *idx, sx__wbuf *w);
sx_status sx__ivf_deserialize(sx__ivf_kind kind,
                              const void *data,
                              size_t len,
                              const float *vecs,
                              size_t n,
                              size_t dim,
                              sx_metric metric,
                              sx__index **out);
size_t sx__ivf_memory_bytes(const sx__index *idx);

#endif
