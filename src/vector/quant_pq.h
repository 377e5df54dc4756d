/*
 * quant_pq.h: product quantization (Jegou et al., PAMI 2011) with nbits = 8: the vector is split
 * into m sub-vectors of dim/m (dim must be divisible by m); each is replaced by the id of its
 * nearest of 256 sub-centroids (k-means per sub-space). Search uses asymmetric distance
 * computation (ADC): per query a table of m x 256 partial distances, then a code's distance is
 * the sum of m lookups (SIMD gather/shuffle where it pays off).
 * For IP/COSINE the table holds negated partial inner products (internal "smaller is better").
 * Codebooks are serialised little-endian through buf.h. Thread-safety: a trained sx__pq is
 * immutable; tables are per query (caller-owned).
 */
#ifndef SX_VECTOR_QUANT_PQ_H
#define SX_VECTOR_QUANT_PQ_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Training rows per sub-centroid: each sub-space's k-means sees at most ksub * this many rows
 * (sampled by k-means with the seed) for SX__PQ_TRAIN_ITERS Lloyd iterations (fewer when it
 * converges), so training costs O(ksub^2 * 64 * dim * 12) whatever n is. FAISS uses up to 256
 * rows per centroid and 25 iterations, DiskANN's PQ 12 iterations; with 8-bit codes on small
 * sub-spaces the reconstruction error moves by ~1% between these settings (test_pq prints it). */
#define SX__PQ_TRAIN_PER_CENTROID 64u
#define SX__PQ_TRAIN_ITERS        12u

typedef struct sx__pq {
    uint32_t dim, m, dsub; /* dsub = dim / m */
    uint32_t ksub;         /* 256, or n when trained on n < 256 rows */
    float *centroids;      /* m x ksub x dsub, owned (sx__free_aligned) */
    float *centroids_t;    /* the same, transposed per sub-space: m x dsub x ksub, owned
                            * (sx__free_aligned); lets the table and encode kernels run over
                            * 16 centroids per SIMD register */
} sx__pq;

/* Trains on n rows (n >= 256 recommended; fewer rows: ksub clamps to n with a message-free
 * fallback). Errors: SX_EINVAL ("m must divide dim"), SX_ENOMEM. On failure *pq is zeroed. */
SX_NODISCARD sx_status sx__pq_train(
    sx__pq *pq, const float *x, size_t n, size_t dim, uint32_t m, uint64_t seed, uint32_t threads);
/* Frees the codebooks; *pq is zeroed. A zeroed sx__pq is a no-op. */
void sx__pq_fini(sx__pq *pq);
/* Encodes n rows into n*m bytes. */
void sx__pq_encode(const sx__pq *pq, const float *x, size_t n, uint8_t *codes);
/* Decodes one code into dim floats. */
void sx__pq_decode(const sx__pq *pq, const uint8_t *code, float *out);
/* Builds the ADC table (m*ksub floats) for query q under metric. */
void sx__pq_table(const sx__pq *pq, const float *q, sx_metric metric, float *table);
/* Distance of n codes (n*m bytes) from a table: out[i]. */
void sx__pq_scan(const sx__pq *pq, const float *table, const uint8_t *codes, size_t n, float *out);
/* Same for the codes of the rows ids[0..n) of a code array (row r at codes + r*m): the random
 * access pattern of a graph search. */
void sx__pq_scan_ids(const sx__pq *pq,
                     const float *table,
                     const uint8_t *codes,
                     const uint32_t *ids,
                     size_t n,
                     float *out);
/* Bytes of the codebooks (both layouts). */
size_t sx__pq_memory_bytes(const sx__pq *pq);
/* Serialize / deserialize (SX_ECORRUPT on bad input). The record carries its own CRC-32C. */
SX_NODISCARD sx_status sx__pq_serialize(const sx__pq *pq, sx__wbuf *w);
SX_NODISCARD sx_status sx__pq_deserialize(sx__pq *pq, sx__rbuf *r);

#endif
