/*
 * peer.h: the C ABI of the optional peer shims loaded by `sextant bench` with dlopen
 * (build/sx_peer_hnswlib.so). Peers are only for side-by-side benchmarks; nothing in libsextant
 * depends on them. metric: 0 = L2 (squared), 1 = inner product.
 */
#ifndef SX_BENCH_PEER_H
#define SX_BENCH_PEER_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif
