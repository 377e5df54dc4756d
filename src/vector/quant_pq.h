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

typedef struct sx__pq {
    uint32_t dim, m, dsub;   /* dsub = dim / m */
    uint32_t ksub;           /* 256 */
    float *centroids;        /* m x ksub x dsub, owned (sx__free_aligned) */
} sx__pq;

/* Trains on n rows (n >= 256 recommended; fewer rows: ksub clamps to n with a message-free
 * fallback). Errors: SX_EINVAL ("m must divide dim"), SX_ENOMEM. */
SX_NODISCARD sx_status sx__pq_train(sx__pq *pq, const float *x, size_t n, size_t dim, uint32_t m,
                                    uint64_t seed, uint32_t threads);
void sx__pq_fini(sx__pq *pq);
/* Encodes n rows into n*m bytes. */
void sx__pq_encode(const sx__pq *pq, const float *x, size_t n, uint8_t *codes);
/* Decodes one code into dim floats. */
void sx__pq_decode(const sx__pq *pq, const uint8_t *code, float *out);
/* Builds the ADC table (m*ksub floats) for query q under metric. */
void sx__pq_table(const sx__pq *pq, const float *q, sx_metric metric, float *table);
/* Distance of n codes (n*m bytes) from a table: out[i]. */
void sx__pq_scan(const sx__pq *pq, const float *table, const uint8_t *codes, size_t n, float *out);
/* Serialize / deserialize (SX_ECORRUPT on bad input). */
SX_NODISCARD sx_status sx__pq_serialize(const sx__pq *pq, sx__wbuf *w);
SX_NODISCARD sx_status sx__pq_deserialize(sx__pq *pq, sx__rbuf *r);

#endif
