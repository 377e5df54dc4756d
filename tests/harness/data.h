/*
 * data.h: test-only readers for the shared datasets and an exact double-precision distance, used by
 * the index tests (TEXMEX .bvecs/.fvecs/.ivecs, Fashion-MNIST IDX .gz). Returned buffers are
 * malloc'd (free with free); NULL when the file is absent or malformed, and the test then skips.
 */
#ifndef SX_TEST_DATA_H
#define SX_TEST_DATA_H
#include <math.h>
#include <sextant.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* TEXMEX file: records of int32 d then d elements of `elem` bytes (1: uint8 -> float, 4: raw
 * float or int32 copied as is). */
static inline void *test_read_texmex(const char *path, size_t elem, size_t *n, size_t *d)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    int32_t dd;
    if (fread(&dd, 4, 1, f) != 1 || dd <= 0 || fseek(f, 0, SEEK_END) != 0) {
        (void)fclose(f);
        return NULL;
    }
    long len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        (void)fclose(f);
        return NULL;
    }
    size_t rec = 4 + (size_t)dd * elem;
    *n = (size_t)len / rec;
    *d = (size_t)dd;
    uint8_t *raw = malloc(rec);
    void *out = malloc(*n * *d * 4);
    for (size_t i = 0; i < *n; i++) {
        if (fread(raw, rec, 1, f) != 1)
            break;
        if (elem == 1)
            for (size_t j = 0; j < *d; j++)
                ((float *)out)[i * *d + j] = (float)raw[4 + j];
        else
            memcpy((uint8_t *)out + i * *d * 4, raw + 4, *d * 4);
    }
    free(raw);
    (void)fclose(f);
    return out;
}

static inline uint32_t test_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* First `want` images of an IDX (gzip) file as floats. */
static inline float *test_read_idx(const char *path, size_t want, size_t *dim)
{
    gzFile g = gzopen(path, "rb");
    if (!g)
        return NULL;
    uint8_t hdr[16];
    if (gzread(g, hdr, 16) != 16 || test_be32(hdr) != 0x803 || test_be32(hdr + 4) < want) {
        gzclose(g);
        return NULL;
    }
    *dim = (size_t)test_be32(hdr + 8) * test_be32(hdr + 12);
    size_t bytes = want * *dim;
    uint8_t *px = malloc(bytes);
    if (gzread(g, px, (unsigned)bytes) != (int)bytes) {
        free(px);
        gzclose(g);
        return NULL;
    }
    gzclose(g);
    float *out = malloc(bytes * sizeof *out);
    for (size_t i = 0; i < bytes; i++)
        out[i] = (float)px[i];
    free(px);
    return out;
}

/* Internal-convention distance in double: squared L2, or the negated inner product. */
static inline double test_dist_d(const float *a, const float *b, size_t dim, sx_metric m)
{
    double s = 0;
    for (size_t i = 0; i < dim; i++) {
        if (m == SX_METRIC_L2) {
            double t = (double)a[i] - (double)b[i];
            s += t * t;
        } else {
            s -= (double)a[i] * (double)b[i];
        }
    }
    return s;
}

/* Exact k-th smallest distance (test_dist_d) from q to the rows of base allowed by `allow` (a
 * bitset of n bits, NULL = all); *nallowed = their count; scratch holds n doubles. The threshold
 * for recall with ties (a hit counts when its true distance is <= this). */
static inline double test_kth_dist(const float *base,
                                   size_t n,
                                   size_t dim,
                                   sx_metric m,
                                   const float *q,
                                   size_t k,
                                   const uint64_t *allow,
                                   double *scratch,
                                   size_t *nallowed)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (!allow || (allow[i / 64] >> (i % 64) & 1u))
            scratch[c++] = test_dist_d(q, base + i * dim, dim, m);
    *nallowed = c;
    if (c == 0)
        return INFINITY;
    size_t kk = k < c ? k : c;
    for (size_t i = 0; i < kk; i++) { /* partial selection sort of the kk smallest */
        size_t b = i;
        for (size_t j = i + 1; j < c; j++)
            if (scratch[j] < scratch[b])
                b = j;
        double t = scratch[i];
        scratch[i] = scratch[b];
        scratch[b] = t;
    }
    return scratch[kk - 1];
}

#endif
