/*
 * flat_bw.c: single-query FLAT scan throughput against the machine's own read bandwidth.
 *
 * A single-query exact scan does 2 flops per 4-byte float it reads, so on any current core it is
 * bound by memory bandwidth; the figure of merit is the fraction of the achievable single-thread
 * read bandwidth it reaches. Both numbers are measured in the same run, on the same buffer, by
 * the same thread:
 *   read bandwidth: a sum of every float of the buffer with 8 independent vector accumulators
 *                   (AVX-512 or AVX2, whichever the CPU has; the widest is not needed to saturate
 *                   memory, but it keeps the loop's own cost out of the figure);
 *   FLAT scan:      sx__flat_scan(nq = 1, k = 10) over the same buffer, with the kernels
 *                   sx__dist() picked (SX_SIMD caps them, as in the library).
 * The two are run back to back REPS times after one warm-up pass (alternating which goes first),
 * and each pair gives a ratio scan/read. The headline is the median of those paired ratios, with
 * the median bandwidths: on a shared machine the available bandwidth drifts by 2x within seconds,
 * and pairing cancels the drift that separate best-of figures would not. The best figures are
 * printed too. The buffers should be well above the last-level cache so both figures are DRAM
 * figures; the LLC size the OS reports is printed.
 *
 * Usage: flat_bw [N DIM]...   (default: 1000000 128  200000 768: 512 MB and 614 MB)
 * Output: one line per shape:
 *   FLAT scan at X GB/s = Y% of the measured read bandwidth Z GB/s
 * Not a test: nothing is asserted, apart from the scan succeeding.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "index/flat/flat.h"
#include "util/alloc.h"
#include "util/heap.h"
#include "vector/dist.h"

#define REPS 11

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((target("avx512f"))) static float sum_avx512(const float *v, size_t n)
{
    __m512 s[8];
    for (int j = 0; j < 8; j++)
        s[j] = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 128 <= n; i += 128)
        for (int j = 0; j < 8; j++)
            s[j] = _mm512_add_ps(s[j], _mm512_load_ps(v + i + 16 * (size_t)j));
    for (int j = 1; j < 8; j++)
        s[0] = _mm512_add_ps(s[0], s[j]);
    float r = _mm512_reduce_add_ps(s[0]);
    for (; i < n; i++)
        r += v[i];
    return r;
}

__attribute__((target("avx2"))) static float sum_avx2(const float *v, size_t n)
{
    __m256 s[8];
    for (int j = 0; j < 8; j++)
        s[j] = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 8; j++)
            s[j] = _mm256_add_ps(s[j], _mm256_load_ps(v + i + 8 * (size_t)j));
    for (int j = 1; j < 8; j++)
        s[0] = _mm256_add_ps(s[0], s[j]);
    float lanes[8];
    _mm256_storeu_ps(lanes, s[0]);
    float r = 0.0f;
    for (int j = 0; j < 8; j++)
        r += lanes[j];
    for (; i < n; i++)
        r += v[i];
    return r;
}

static float sum_plain(const float *v, size_t n)
{
    float s[8] = { 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += v[i + (size_t)j];
    float r = 0.0f;
    for (int j = 0; j < 8; j++)
        r += s[j];
    for (; i < n; i++)
        r += v[i];
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* best and median of REPS samples (sorts v) */
static void summarize(double *v, double *best, double *median)
{
    qsort(v, REPS, sizeof *v, cmp_double);
    *best = v[REPS - 1];
    *median = v[REPS / 2];
}

static int run_shape(size_t n, size_t dim)
{
    size_t nf = n * dim;
    double bytes = (double)nf * sizeof(float);
    float *base = sx__malloc_aligned(nf * sizeof(float));
    float *q = sx__malloc(dim * sizeof(float));
    if (!base || !q) {
        fprintf(stderr, "flat_bw: cannot allocate %.0f MB\n", bytes / 1e6);
        sx__free_aligned(base);
        sx__free(q);
        return 1;
    }
    uint64_t s = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < nf; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        base[i] = (float)(s >> 40) / (float)(1u << 24);
    }
    for (size_t i = 0; i < dim; i++)
        q[i] = base[i] * 0.5f;

    float (*sum)(const float *, size_t) = sum_plain;
    const char *sum_isa = "plain";
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        sum = sum_avx512;
        sum_isa = "avx512";
    } else if (__builtin_cpu_supports("avx2")) {
        sum = sum_avx2;
        sum_isa = "avx2";
    }

    double rd[REPS], sc[REPS], ratio[REPS];
    volatile float sink = 0.0f;
    sx__hit store[10];
    sx__topk h;
    uint32_t top = 0;
    for (int r = -1; r < REPS; r++) {
        double t_read = 0.0, t_scan = 0.0;
        for (int part = 0; part < 2; part++) {
            double t0 = now_s();
            if ((part == 0) == (r % 2 == 0)) {
                sink = sink + sum(base, nf);
                t_read = now_s() - t0;
                continue;
            }
            sx__topk_init(&h, store, 10);
            if (sx__flat_scan(base, n, dim, SX_METRIC_L2, 0, NULL, q, 1, &h) != SX_OK) {
                fprintf(stderr, "flat_bw: scan failed: %s\n", sx_errmsg());
                return 1;
            }
            t_scan = now_s() - t0;
            (void)sx__topk_sort(&h);
            top = h.h[0].id;
        }
        if (r >= 0) {
            rd[r] = bytes / t_read / 1e9;
            sc[r] = bytes / t_scan / 1e9;
            ratio[r] = t_read / t_scan;
        }
    }
    double rd_best, rd_med, sc_best, sc_med, ratio_best, ratio_med;
    summarize(rd, &rd_best, &rd_med);
    summarize(sc, &sc_best, &sc_med);
    summarize(ratio, &ratio_best, &ratio_med);
    printf("%zu x %zu floats (%.0f MB), kernels %s, read loop %s, nearest id %u\n", n, dim,
           bytes / 1e6, sx_simd_level(), sum_isa, top);
    printf("  best: scan %.2f GB/s (%.1f M rows/s), read %.2f GB/s; paired ratios %.0f%%..%.0f%%\n",
           sc_best, sc_best * 1e9 / ((double)dim * sizeof(float)) / 1e6, rd_best, 100.0 * ratio[0],
           100.0 * ratio_best);
    printf("FLAT scan at %.2f GB/s = %.0f%% of the measured read bandwidth %.2f GB/s "
           "(medians of %d paired runs)\n",
           sc_med, 100.0 * ratio_med, rd_med, REPS);
    sx__free_aligned(base);
    sx__free(q);
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || v == 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    static const size_t def[] = { 1000000, 128, 200000, 768 };
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0)
        printf("last-level cache reported by the OS: %.0f MB\n", (double)llc / 1e6);
    if (argc > 1 && (argc - 1) % 2 != 0) {
        fprintf(stderr, "usage: flat_bw [N DIM]...\n");
        return 2;
    }
    int rc = 0;
    if (argc == 1) {
        for (size_t i = 0; i < 4; i += 2)
            rc |= run_shape(def[i], def[i + 1]);
        return rc;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        size_t n, dim;
        if (parse_size(argv[i], &n) != 0 || parse_size(argv[i + 1], &dim) != 0 ||
            dim > SX_MAX_DIM) {
            fprintf(stderr, "flat_bw: bad shape %s %s\n", argv[i], argv[i + 1]);
            return 2;
        }
        rc |= run_shape(n, dim);
    }
    return rc;
}
