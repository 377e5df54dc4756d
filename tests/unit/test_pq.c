/*
 * test_pq.c: unit tests of product quantization (src/vector/quant_pq.c).
 *
 * Data: a seeded synthetic mixture of 64 Gaussian clusters in 32 dimensions (5,000 rows), so the
 * expected error levels do not depend on shipped files; BIGANN-10k is used too when present.
 *   - reconstruction: mean squared error of decode(encode(x)) is below 25% of the data variance
 *     (mean squared distance to the mean) for every m in {4, 8, 16, 32} and strictly decreases
 *     as m grows;
 *   - encode picks the nearest sub-centroid (checked against a brute-force search in double);
 *   - ADC: sx__pq_scan and sx__pq_scan_ids equal the exact distance from the query to the decoded
 *     vector within float rounding (relative 1e-4 + absolute 1e-3), for L2 and IP, and for m
 *     values that exercise every SIMD tail (m = 1, 3, 8, 24, 40, 64);
 *   - fewer than 256 training rows: ksub = n and every code is < ksub;
 *   - serialize -> deserialize gives the same codebook, codes and tables;
 *   - corrupt input: every truncation, byte flips (CRC stale), and semantic damage with the CRC
 *     recomputed (bad shape, NaN centroid) are SX_ECORRUPT, never a crash;
 *   - bad m (not a divisor of dim, 0) is SX_EINVAL.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "vector/quant_pq.h"

#define N   5000
#define DIM 32

static float *mixture(size_t n, size_t dim, uint64_t seed)
{
    uint64_t s = seed | 1;
    size_t nc = 64;
    float *cent = malloc(nc * dim * sizeof *cent);
    float *x = malloc(n * dim * sizeof *x);
    for (size_t i = 0; i < nc * dim; i++)
        cent[i] = test_randf(&s) * 8.0f - 4.0f;
    for (size_t i = 0; i < n; i++) {
        size_t c = test_rand(&s) % nc;
        for (size_t d = 0; d < dim; d++) {
            /* sum of 4 uniforms: roughly Gaussian, sd ~ 1.15 */
            float g = test_randf(&s) + test_randf(&s) + test_randf(&s) + test_randf(&s) - 2.0f;
            x[i * dim + d] = cent[c * dim + d] + 2.0f * g;
        }
    }
    free(cent);
    return x;
}

static double variance(const float *x, size_t n, size_t dim)
{
    double tot = 0;
    for (size_t d = 0; d < dim; d++) {
        double mean = 0, sq = 0;
        for (size_t i = 0; i < n; i++)
            mean += (double)x[i * dim + d];
        mean /= (double)n;
        for (size_t i = 0; i < n; i++) {
            double t = (double)x[i * dim + d] - mean;
            sq += t * t;
        }
        tot += sq / (double)n;
    }
    return tot;
}

static double recon_mse(const sx__pq *pq, const float *x, size_t n, size_t dim)
{
    uint8_t *codes = malloc(n * pq->m);
    float *dec = malloc(dim * sizeof *dec);
    sx__pq_encode(pq, x, n, codes);
    double err = 0;
    for (size_t i = 0; i < n; i++) {
        sx__pq_decode(pq, codes + i * pq->m, dec);
        for (size_t d = 0; d < dim; d++) {
            double t = (double)x[i * dim + d] - (double)dec[d];
            err += t * t;
        }
    }
    free(codes);
    free(dec);
    return err / (double)n;
}

static void test_reconstruction_error(void)
{
    float *x = mixture(N, DIM, 42);
    double var = variance(x, N, DIM), prev = INFINITY;
    uint32_t ms[] = { 4, 8, 16, 32 };
    for (size_t t = 0; t < 4; t++) {
        sx__pq pq;
        ASSERT_OK(sx__pq_train(&pq, x, N, DIM, ms[t], 7, 1));
        ASSERT_EQ(pq.ksub, 256);
        ASSERT_EQ(pq.dsub, DIM / ms[t]);
        double mse = recon_mse(&pq, x, N, DIM);
        fprintf(stderr, "  m=%u: mse %.3f, variance %.3f (%.1f%%)\n", ms[t], mse, var,
                100.0 * mse / var);
        ASSERT(mse < 0.25 * var);
        ASSERT(mse < prev);
        prev = mse;
        sx__pq_fini(&pq);
    }
    free(x);
}

static void test_bigann_reconstruction(void)
{
    const char *path = test_data_or_skip("bigann10k/bigann10k_base.bvecs");
    FILE *f = fopen(path, "rb");
    ASSERT(f);
    size_t n = 10000, dim = 128;
    float *x = malloc(n * dim * sizeof *x);
    uint8_t rec[4 + 128];
    for (size_t i = 0; i < n; i++) {
        ASSERT(fread(rec, sizeof rec, 1, f) == 1);
        for (size_t d = 0; d < dim; d++)
            x[i * dim + d] = rec[4 + d];
    }
    fclose(f);
    double var = variance(x, n, dim), prev = INFINITY;
    uint32_t ms[] = { 16, 32, 64 };
    for (size_t t = 0; t < 3; t++) {
        sx__pq pq;
        ASSERT_OK(sx__pq_train(&pq, x, n, dim, ms[t], 1, 1));
        double mse = recon_mse(&pq, x, n, dim);
        fprintf(stderr, "  bigann m=%u: mse %.1f, variance %.1f (%.1f%%)\n", ms[t], mse, var,
                100.0 * mse / var);
        ASSERT(mse < 0.5 * var);
        ASSERT(mse < prev);
        prev = mse;
        sx__pq_fini(&pq);
    }
    free(x);
}

static void test_encode_is_nearest(void)
{
    float *x = mixture(2000, 24, 3);
    sx__pq pq;
    ASSERT_OK(sx__pq_train(&pq, x, 2000, 24, 6, 11, 1));
    uint8_t *codes = malloc(2000 * 6);
    sx__pq_encode(&pq, x, 2000, codes);
    for (size_t i = 0; i < 2000; i++) {
        for (size_t j = 0; j < 6; j++) {
            const float *sv = x + i * 24 + j * 4;
            double best = INFINITY, got = 0;
            for (size_t c = 0; c < pq.ksub; c++) {
                const float *cc = pq.centroids + (j * pq.ksub + c) * 4;
                double s = 0;
                for (size_t d = 0; d < 4; d++)
                    s += ((double)sv[d] - (double)cc[d]) * ((double)sv[d] - (double)cc[d]);
                if (s < best)
                    best = s;
                if (c == codes[i * 6 + j])
                    got = s;
            }
            ASSERT(codes[i * 6 + j] < pq.ksub);
            ASSERT_NEAR(got, best, 1e-3 + 1e-4 * best);
        }
    }
    free(codes);
    sx__pq_fini(&pq);
    free(x);
}

static void check_adc(size_t dim, uint32_t m, size_t n)
{
    float *x = mixture(n, dim, 100 + m);
    sx__pq pq;
    ASSERT_OK(sx__pq_train(&pq, x, n, dim, m, 5, 1));
    uint8_t *codes = malloc(n * m);
    sx__pq_encode(&pq, x, n, codes);
    float *table = malloc((size_t)m * pq.ksub * sizeof *table);
    float *out = malloc(n * sizeof *out), *out2 = malloc(n * sizeof *out2);
    float *dec = malloc(dim * sizeof *dec);
    uint32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = (uint32_t)((i * 7919) % n);
    sx_metric metrics[] = { SX_METRIC_L2, SX_METRIC_IP };
    for (int mi = 0; mi < 2; mi++) {
        for (size_t qi = 0; qi < 5; qi++) {
            const float *q = x + ((qi * 131) % n) * dim;
            sx__pq_table(&pq, q, metrics[mi], table);
            sx__pq_scan(&pq, table, codes, n, out);
            sx__pq_scan_ids(&pq, table, codes, ids, n, out2);
            for (size_t i = 0; i < n; i++) {
                sx__pq_decode(&pq, codes + i * m, dec);
                double want = 0, mag = 0;
                for (size_t d = 0; d < dim; d++) {
                    if (metrics[mi] == SX_METRIC_L2) {
                        double t = (double)q[d] - (double)dec[d];
                        want += t * t;
                        mag += t * t;
                    } else {
                        want -= (double)q[d] * (double)dec[d];
                        mag += fabs((double)q[d] * (double)dec[d]);
                    }
                }
                ASSERT_NEAR(out[i], want, 1e-3 + 1e-4 * mag);
                ASSERT(out2[i] == out[ids[i]]);
            }
        }
    }
    free(ids);
    free(dec);
    free(out);
    free(out2);
    free(table);
    free(codes);
    sx__pq_fini(&pq);
    free(x);
}

static void test_adc_matches_decoded(void)
{
    check_adc(16, 1, 600);
    check_adc(24, 3, 600);
    check_adc(32, 8, 600);
    check_adc(48, 24, 600);
    check_adc(80, 40, 600);
    check_adc(128, 64, 600);
}

static void test_few_rows(void)
{
    float *x = mixture(40, 16, 9);
    sx__pq pq;
    ASSERT_OK(sx__pq_train(&pq, x, 40, 16, 4, 1, 1));
    ASSERT_EQ(pq.ksub, 40);
    uint8_t codes[40 * 4];
    sx__pq_encode(&pq, x, 40, codes);
    for (size_t i = 0; i < 40 * 4; i++)
        ASSERT(codes[i] < 40);
    /* a table and scan over ksub = 40 (not a multiple of the SIMD width) */
    check_adc(16, 4, 37);
    sx__pq_fini(&pq);
    free(x);
}

static void test_bad_params(void)
{
    float *x = mixture(300, 30, 2);
    sx__pq pq;
    ASSERT_STATUS(sx__pq_train(&pq, x, 300, 30, 7, 1, 1), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "m ") != NULL);
    ASSERT_STATUS(sx__pq_train(&pq, x, 300, 30, 0, 1, 1), SX_EINVAL);
    ASSERT_STATUS(sx__pq_train(&pq, x, 0, 30, 5, 1, 1), SX_EINVAL);
    sx__pq_fini(&pq); /* zeroed on failure: no-op */
    free(x);
}

static sx_status deser(const uint8_t *b, size_t len, sx__pq *pq)
{
    sx__rbuf r;
    sx__rbuf_init(&r, b, len);
    sx_status rc = sx__pq_deserialize(pq, &r);
    if (rc == SX_OK && sx__rbuf_left(&r) != 0) {
        sx__pq_fini(pq);
        return SX_ECORRUPT;
    }
    return rc;
}

static void test_round_trip_and_corruption(void)
{
    float *x = mixture(1000, 32, 4);
    sx__pq pq, pq2;
    ASSERT_OK(sx__pq_train(&pq, x, 1000, 32, 8, 1, 1));
    sx__wbuf w;
    sx__wbuf_init(&w);
    sx__wbuf_u32(&w, 0xDEADBEEF); /* the record need not start at offset 0 */
    ASSERT_OK(sx__pq_serialize(&pq, &w));
    const uint8_t *rec = w.data + 4;
    size_t len = w.len - 4;
    ASSERT_OK(deser(rec, len, &pq2));
    ASSERT_EQ(pq2.m, pq.m);
    ASSERT_EQ(pq2.ksub, pq.ksub);
    ASSERT(memcmp(pq.centroids, pq2.centroids, (size_t)pq.m * pq.ksub * pq.dsub * 4) == 0);
    ASSERT(memcmp(pq.centroids_t, pq2.centroids_t, (size_t)pq.m * pq.ksub * pq.dsub * 4) == 0);
    uint8_t c1[1000 * 8], c2[1000 * 8];
    sx__pq_encode(&pq, x, 1000, c1);
    sx__pq_encode(&pq2, x, 1000, c2);
    ASSERT(memcmp(c1, c2, sizeof c1) == 0);
    sx__pq_fini(&pq2);

    /* every truncation */
    for (size_t l = 0; l < len; l++)
        ASSERT_STATUS(deser(rec, l, &pq2), SX_ECORRUPT);
    /* byte flips with a stale CRC */
    uint8_t *cp = malloc(len);
    uint64_t s = test_seed();
    for (int t = 0; t < 300; t++) {
        memcpy(cp, rec, len);
        size_t at = test_rand(&s) % len;
        cp[at] ^= (uint8_t)(1u + test_rand(&s) % 255);
        ASSERT_STATUS(deser(cp, len, &pq2), SX_ECORRUPT);
    }
    /* semantic damage with the CRC recomputed */
    memcpy(cp, rec, len);
    sx__put_le32(cp + 12, 5); /* m = 5 does not divide 32 */
    sx__put_le32(cp + len - 4, sx__crc32c(0, cp, len - 4));
    ASSERT_STATUS(deser(cp, len, &pq2), SX_ECORRUPT);
    memcpy(cp, rec, len);
    sx__put_le32(cp + 16, 300); /* ksub > 256 */
    sx__put_le32(cp + len - 4, sx__crc32c(0, cp, len - 4));
    ASSERT_STATUS(deser(cp, len, &pq2), SX_ECORRUPT);
    memcpy(cp, rec, len);
    sx__put_le32(cp + 20 + 4 * 17, 0x7FC00000u); /* NaN centroid */
    sx__put_le32(cp + len - 4, sx__crc32c(0, cp, len - 4));
    ASSERT_STATUS(deser(cp, len, &pq2), SX_ECORRUPT);
    memcpy(cp, rec, len);
    cp[0] ^= 1; /* bad magic */
    sx__put_le32(cp + len - 4, sx__crc32c(0, cp, len - 4));
    ASSERT_STATUS(deser(cp, len, &pq2), SX_ECORRUPT);
    free(cp);
    sx__wbuf_fini(&w);
    sx__pq_fini(&pq);
    free(x);
}

int main(void)
{
    RUN(test_reconstruction_error);
    RUN(test_bigann_reconstruction);
    RUN(test_encode_is_nearest);
    RUN(test_adc_matches_decoded);
    RUN(test_few_rows);
    RUN(test_bad_params);
    RUN(test_round_trip_and_corruption);
    return TEST_DONE();
}
