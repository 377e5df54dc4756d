/*
 * peer.h: the C ABI of the optional peer shims loaded by `sextant bench` with dlopen
 * (build/sx_peer_hnswlib.so, build/sx_peer_faiss.so). Peers are only for side-by-side
 * benchmarks; nothing in libsextant depends on them. metric: 0 = L2 (squared), 1 = inner product
 * (cosine is inner product on unit vectors: the caller normalises).
 *
 * Invariants (both shims):
 *   1. Labels are row numbers 0..n-1 of the vectors given to add/build.
 *   2. search writes at most k hits, best first, and returns how many it wrote; it may run
 *      concurrently with other searches on the same handle, never with add/build/set/free.
 *   3. memory reports the bytes the library allocates for the index proper (documented per shim),
 *      not allocator overhead.
 *   4. Every entry point catches C++ exceptions: failure is a NULL handle, -1 or 0 hits.
 */
#ifndef SX_BENCH_PEER_H
#define SX_BENCH_PEER_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- hnswlib (hnswlib_shim.cpp) */

/* hnswlib HierarchicalNSW<float>; returns NULL on failure. */
void *sx_peer_hnsw_new(int dim, int metric, size_t max_n, int M, int ef_construction);
/* Adds rows [0,n) with labels 0..n-1, using `threads` threads (ParallelFor-style). 0 on success. */
int sx_peer_hnsw_add(void *h, const float *vecs, size_t n, int threads);
void sx_peer_hnsw_set_ef(void *h, int ef);
/* One query; writes up to k ids/distances best first; returns the number written. */
size_t sx_peer_hnsw_search(void *h, const float *q, size_t k, int64_t *ids, float *dists);
/* Bytes hnswlib allocated for the index (data level 0 + link lists). */
size_t sx_peer_hnsw_memory(void *h);
void sx_peer_hnsw_free(void *h);

/* ---------------------------------------------------------------- FAISS (faiss_shim.cpp) */

/* Bumped whenever sx_peer_faiss_params or a signature below changes; the bench refuses a shim
 * whose sx_peer_faiss_abi() differs from the value it was compiled with. */
#define SX_PEER_FAISS_ABI 3

/* Which FAISS index to build (Milvus's type it stands beside). */
typedef enum sx_peer_faiss_kind {
    SX_PEER_FAISS_IVF_FLAT = 0,  /* IndexIVFFlat over an IndexFlat{L2,IP} quantizer (IVF_FLAT) */
    SX_PEER_FAISS_IVF_PQ = 1,    /* IndexIVFPQ (by residual), optionally IndexRefineFlat (IVF_PQ) */
    SX_PEER_FAISS_HNSW_FLAT = 2, /* IndexHNSWFlat (HNSW, HNSW_SQ) */
    SX_PEER_FAISS_IVF_SQ8 = 3,   /* IndexIVFScalarQuantizer, QT_8bit (IVF_SQ8) */
    SX_PEER_FAISS_HNSW_FP16 = 4  /* IndexHNSWSQ, QT_fp16: vectors stored as float16 (HNSW on a
                                    FLOAT16_VECTOR field) */
} sx_peer_faiss_kind;

/* Build parameters, Milvus names in the comments. Unused fields are ignored. */
typedef struct sx_peer_faiss_params {
    int kind; /* sx_peer_faiss_kind */
    int dim;
    int metric; /* 0 = L2, 1 = IP */
    int nlist;  /* IVF_*: nlist, coarse centroids */
    int m;      /* IVF_PQ: m, sub-quantizers (divides dim) */
    int nbits;  /* IVF_PQ: nbits, bits per sub-code (8) */
    int refine; /* IVF_PQ/SQ8: nonzero wraps the index in IndexRefineFlat (exact re-rank) */
    int M;      /* HNSW: M, links per node (2*M on level 0) */
    int ef_construction; /* HNSW: efConstruction */
    int threads;         /* OpenMP threads for train + add (search is one query per call) */
    uint64_t seed;       /* k-means seed (0: FAISS's default) */
} sx_peer_faiss_params;

/* Returns SX_PEER_FAISS_ABI as the shim was compiled. */
int sx_peer_faiss_abi(void);
/* Creates an empty index; NULL with a message in err on failure (bad params, exception). */
void *sx_peer_faiss_new(const sx_peer_faiss_params *p, char *err, size_t err_len);
/* Trains (IVF: k-means on FAISS's default sample of nlist * 256 rows; PQ codebooks) and adds
 * rows [0,n) with labels 0..n-1, with p->threads OpenMP threads. 0, or -1 with a message. */
int sx_peer_faiss_build(void *h, const float *vecs, size_t n, char *err, size_t err_len);
/* Sets a search parameter: "nprobe" (IVF), "efSearch" (HNSW), "k_factor" (refine: the base
 * index returns k * k_factor candidates that are re-ranked exactly). 0, or -1 when the key does
 * not apply to this index or the value is out of range. */
int sx_peer_faiss_set(void *h, const char *key, double value);
/* One query; writes up to k ids/distances (FAISS's: squared L2 or inner product) best first;
 * returns the number written. dists may be NULL. */
size_t sx_peer_faiss_search(void *h, const float *q, size_t k, int64_t *ids, float *dists);
/* The same with FAISS's IDSelectorRange: only labels in [imin, imax) are returned (the filtered
 * search of the bench's filter cases), at the efSearch / nprobe set with sx_peer_faiss_set,
 * through SearchParametersHNSW / SearchParametersIVF. Returns the number written, or
 * (size_t)-1 when the index takes no selector (the IndexRefineFlat wrapper). */
size_t sx_peer_faiss_search_range(
    void *h, const float *q, size_t k, int64_t imin, int64_t imax, int64_t *ids, float *dists);
/* Bytes of the index proper: IVF = coarse centroids + per-list codes and int64 ids (+ PQ
 * codebooks and the precomputed table, or the SQ8 ranges; + the refine copy of the vectors); HNSW =
 * the vector storage + neighbour table + offsets + levels. */
size_t sx_peer_faiss_memory(void *h);
/* A short description, "IndexIVFPQ(nlist=128,m=32,nbits=8)+IndexRefineFlat". Borrowed: valid
 * until free. */
const char *sx_peer_faiss_describe(void *h);
void sx_peer_faiss_free(void *h);

/* Binary vectors (HAMMING): IndexBinaryFlat (nlist 0) or IndexBinaryIVF over an IndexBinaryFlat
 * quantizer (nlist coarse lists; BIN_FLAT, BIN_IVF_FLAT). dim in bits (a multiple of 8); rows and
 * queries packed dim / 8 bytes each. NULL with a message in err on failure. build trains (IVF:
 * FAISS's binary k-means on the rows) and adds with `threads` OpenMP threads, then sets the
 * calling thread back to 1. search writes up to k ids and Hamming distances, best first. */
void *sx_peer_faiss_bin_new(int dim_bits, int nlist, int threads, char *err, size_t err_len);
int sx_peer_faiss_bin_build(void *h, const uint8_t *rows, size_t n, char *err, size_t err_len);
void sx_peer_faiss_bin_set_nprobe(void *h, int nprobe);
size_t sx_peer_faiss_bin_search(void *h, const uint8_t *q, size_t k, int64_t *ids, int32_t *dists);
size_t sx_peer_faiss_bin_memory(void *h);
void sx_peer_faiss_bin_free(void *h);

#ifdef __cplusplus
}
#endif
#endif
