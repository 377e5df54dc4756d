/*
 * test_vector.c: distance kernels (src/vector/dist.c, dist_avx2.c, dist_avx512.c).
 *
 * Every ISA table the CPU has is compared with the scalar reference and with a double-precision
 * oracle for l2sq, ip and nip, on every dim 1..130 (all tail lengths of every loop) and the
 * dims real data sets use, with aligned and deliberately unaligned pointers. The tolerance is
 * relative to sum |a_i b_i| (or sum (a_i-b_i)^2), the quantity float rounding is proportional
 * to, so an inner product that cancels to ~0 is not held to an impossible relative error.
 * Also: dispatch and the SX_SIMD cap (through sx__dist_resolve, and through the real
 * environment variable in a child process), sx__dist_for_metric, normalize, norm2.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util/alloc.h"
#include "vector/dist.h"
#include "vector/quant_sq8.h"
#include "vector/range.h"

static uint64_t seed;

static const sx__dist_ops *tables[3];
static size_t n_tables;

static void fill(float *v, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++)
        v[i] = test_randf(s) * 2.0f - 1.0f;
}

/* double oracle: value and the magnitude sum that bounds its rounding error */
static double oracle_ip(const float *a, const float *b, size_t dim, double *mag)
{
    double s = 0.0, m = 0.0;
    for (size_t i = 0; i < dim; i++) {
        double p = (double)a[i] * (double)b[i];
        s += p;
        m += fabs(p);
    }
    *mag = m;
    return s;
}

static double oracle_l2sq(const float *a, const float *b, size_t dim)
{
    double s = 0.0;
    for (size_t i = 0; i < dim; i++) {
        double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    return s;
}

/* float summation of dim terms: error <= ~dim * eps * magnitude; allow a margin */
static double tol(size_t dim, double mag)
{
    return 4.0 * (double)dim * 1.2e-7 * mag + 1e-30;
}

static void check_one(const sx__dist_ops *t, const float *a, const float *b, size_t dim)
{
    const sx__dist_ops *ref = sx__dist_scalar();
    double mag;
    double ip = oracle_ip(a, b, dim, &mag);
    double l2 = oracle_l2sq(a, b, dim);

    float r_l2 = ref->l2sq(a, b, dim), r_ip = ref->ip(a, b, dim);
    float got_l2 = t->l2sq(a, b, dim), got_ip = t->ip(a, b, dim), got_nip = t->nip(a, b, dim);

    if (fabs((double)got_l2 - l2) > tol(dim, l2) ||
        fabs((double)got_l2 - (double)r_l2) > 2.0 * tol(dim, l2))
        FAILF("%s l2sq dim %zu: got %.9g, scalar %.9g, oracle %.9g", t->isa, dim, (double)got_l2,
              (double)r_l2, l2);
    if (fabs((double)got_ip - ip) > tol(dim, mag) ||
        fabs((double)got_ip - (double)r_ip) > 2.0 * tol(dim, mag))
        FAILF("%s ip dim %zu: got %.9g, scalar %.9g, oracle %.9g", t->isa, dim, (double)got_ip,
              (double)r_ip, ip);
    if (got_nip != -got_ip)
        FAILF("%s nip dim %zu: %.9g is not -ip %.9g", t->isa, dim, (double)got_nip, (double)got_ip);
}

static void test_tables_present(void)
{
    ASSERT(sx__dist_scalar() != NULL);
    ASSERT(strcmp(sx__dist_scalar()->isa, "scalar") == 0);
    for (size_t i = 0; i < n_tables; i++) {
        const sx__dist_ops *t = tables[i];
        ASSERT(t->isa && t->l2sq && t->ip && t->nip);
    }
    const sx__dist_ops *avx2 = sx__dist_avx2(), *avx512 = sx__dist_avx512();
    if (avx2)
        ASSERT(strcmp(avx2->isa, "avx2") == 0);
    if (avx512)
        ASSERT(strcmp(avx512->isa, "avx512") == 0);
    fprintf(stderr, "     tables: scalar%s%s; in use: %s\n", avx2 ? " avx2" : "",
            avx512 ? " avx512" : "", sx_simd_level());
}

static void test_dims_vs_reference(void)
{
    static const size_t extra[] = { 255, 256, 257, 768, 784, 1000, 1536 };
    const size_t maxdim = 1536, pad = 16;
    uint64_t s = seed;
    float *a = sx__malloc_aligned((maxdim + pad) * sizeof(float));
    float *b = sx__malloc_aligned((maxdim + pad) * sizeof(float));
    ASSERT(a && b);
    size_t ndims = 130 + sizeof extra / sizeof extra[0];
    for (size_t di = 0; di < ndims; di++) {
        size_t dim = di < 130 ? di + 1 : extra[di - 130];
        for (int rep = 0; rep < 3; rep++) {
            /* offsets 0 (64-byte aligned) and 1..3 floats (no vector alignment) */
            size_t oa = (size_t)rep, ob = (size_t)(rep * 2 + 1) % 4;
            fill(a + oa, dim, &s);
            fill(b + ob, dim, &s);
            for (size_t t = 0; t < n_tables; t++)
                check_one(tables[t], a + oa, b + ob, dim);
        }
    }
    sx__free_aligned(a);
    sx__free_aligned(b);
}

/* Tails must not read past dim: put the vector at the very end of the allocation so ASan
 * (or a page boundary) catches an over-read, and poison what follows with NaN. */
static void test_no_overread(void)
{
    uint64_t s = seed ^ 0x9e3779b97f4a7c15ull;
    for (size_t dim = 1; dim <= 70; dim++) {
        float *a = sx__malloc(dim * sizeof(float));
        float *b = sx__malloc(dim * sizeof(float));
        ASSERT(a && b);
        fill(a, dim, &s);
        fill(b, dim, &s);
        for (size_t t = 0; t < n_tables; t++) {
            ASSERT(isfinite(tables[t]->l2sq(a, b, dim)));
            ASSERT(isfinite(tables[t]->ip(a, b, dim)));
            check_one(tables[t], a, b, dim);
        }
        sx__free(a);
        sx__free(b);
    }
    float big[40];
    for (size_t i = 0; i < 40; i++)
        big[i] = i < 20 ? 1.0f : NAN;
    for (size_t t = 0; t < n_tables; t++) {
        ASSERT_NEAR(tables[t]->l2sq(big, big + 1, 19), 0.0, 0.0);
        ASSERT_NEAR(tables[t]->ip(big, big, 20), 20.0, 0.0);
    }
}

static void test_identities(void)
{
    uint64_t s = seed + 1;
    float a[300], b[300];
    for (size_t t = 0; t < n_tables; t++) {
        for (size_t dim = 1; dim < 300; dim += 37) {
            fill(a, dim, &s);
            fill(b, dim, &s);
            ASSERT_NEAR(tables[t]->l2sq(a, a, dim), 0.0, 0.0);
            /* symmetric: identical summation order for (a,b) and (b,a) */
            ASSERT(tables[t]->l2sq(a, b, dim) == tables[t]->l2sq(b, a, dim));
            ASSERT(tables[t]->ip(a, b, dim) == tables[t]->ip(b, a, dim));
        }
        ASSERT_NEAR(tables[t]->l2sq(a, b, 0), 0.0, 0.0);
        ASSERT_NEAR(tables[t]->ip(a, b, 0), 0.0, 0.0);
    }
}

static void test_resolve_cap(void)
{
    const sx__dist_ops *avx2 = sx__dist_avx2(), *avx512 = sx__dist_avx512();
    const sx__dist_ops *best = avx512 ? avx512 : avx2 ? avx2 : sx__dist_scalar();
    ASSERT(sx__dist_resolve("scalar") == sx__dist_scalar());
    ASSERT(sx__dist_resolve("avx2") == (avx2 ? avx2 : sx__dist_scalar()));
    ASSERT(sx__dist_resolve("avx512") == best);
    ASSERT(sx__dist_resolve(NULL) == best);
    ASSERT(sx__dist_resolve("bogus") == best);
    const char *env = getenv("SX_SIMD");
    ASSERT(sx__dist() == sx__dist_resolve(env));
    ASSERT(sx__dist() == sx__dist()); /* cached */
    ASSERT(strcmp(sx_simd_level(), sx__dist()->isa) == 0);
}

/* The real environment variable, read on the first sx__dist() call: a fresh process (this
 * binary re-executed with --print-simd) prints sx_simd_level() under each SX_SIMD value. */
static void test_env_cap(void)
{
    static const char *caps[] = { "scalar", "avx2", "avx512", "bogus" };
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        const char *want = sx__dist_resolve(caps[c])->isa;
        int fds[2];
        ASSERT(pipe(fds) == 0);
        (void)fflush(NULL);
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            if (setenv("SX_SIMD", caps[c], 1) != 0 || dup2(fds[1], 1) < 0)
                _exit(2);
            close(fds[0]);
            close(fds[1]);
            execl("/proc/self/exe", "test_vector", "--print-simd", (char *)NULL);
            _exit(3);
        }
        close(fds[1]);
        char buf[32] = { 0 };
        size_t got = 0;
        ssize_t r;
        while (got < sizeof buf - 1 && (r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
            got += (size_t)r;
        close(fds[0]);
        int status = 0;
        ASSERT(waitpid(pid, &status, 0) == pid);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        buf[strcspn(buf, "\n")] = '\0';
        if (strcmp(buf, want) != 0)
            FAILF("SX_SIMD=%s: child uses \"%s\", want \"%s\"", caps[c], buf, want);
    }
}

static void test_for_metric(void)
{
    const sx__dist_ops *t = sx__dist();
    ASSERT(sx__dist_for_metric(SX_METRIC_L2) == t->l2sq);
    ASSERT(sx__dist_for_metric(SX_METRIC_IP) == t->nip);
    ASSERT(sx__dist_for_metric(SX_METRIC_COSINE) == t->nip);
    ASSERT(sx__dist_for_metric((sx_metric)42) == NULL);
    float a[3] = { 1, 2, 3 }, b[3] = { 4, 5, 6 };
    ASSERT_NEAR(sx__dist_for_metric(SX_METRIC_IP)(a, b, 3), -32.0, 0.0);
    ASSERT_NEAR(sx__dist_for_metric(SX_METRIC_L2)(a, b, 3), 27.0, 0.0);
    ASSERT_NEAR(sx__dist_to_user(SX_METRIC_IP, -32.0f), 32.0, 0.0);
    ASSERT_NEAR(sx__dist_to_user(SX_METRIC_L2, 27.0f), 27.0, 0.0);
}

static void test_normalize(void)
{
    uint64_t s = seed + 2;
    float v[1536];
    static const size_t dims[] = { 1, 3, 16, 17, 128, 768, 1536 };
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        size_t dim = dims[di];
        fill(v, dim, &s);
        double mag;
        double exact = sqrt(oracle_ip(v, v, dim, &mag));
        ASSERT_NEAR(sqrt((double)sx__norm2(v, dim)), exact, 1e-5 * exact);
        float got = sx__normalize(v, dim);
        ASSERT_NEAR(got, exact, 1e-6 * exact);
        ASSERT_NEAR(sqrt(oracle_ip(v, v, dim, &mag)), 1.0, 1e-6);
        ASSERT_NEAR(sx__norm2(v, dim), 1.0, 1e-5);
    }
    /* zero vector: untouched, norm 0 */
    memset(v, 0, 8 * sizeof(float));
    ASSERT_NEAR(sx__normalize(v, 8), 0.0, 0.0);
    for (size_t i = 0; i < 8; i++)
        ASSERT(v[i] == 0.0f);
    /* tiny and huge components still normalise (double accumulation) */
    for (size_t i = 0; i < 4; i++)
        v[i] = 1e-30f;
    ASSERT(sx__normalize(v, 4) > 0.0f);
    ASSERT_NEAR(v[0], 0.5, 1e-6);
    for (size_t i = 0; i < 4; i++)
        v[i] = 1e30f;
    ASSERT_NEAR(sx__normalize(v, 4), 2e30, 1e24);
    ASSERT_NEAR(v[3], 0.5, 1e-6);
    /* the float extremes (issue 13): FLT_MAX-sized and denormal components, mixed, in the
     * widest vectors: the double sum neither overflows (3.4e38^2 * 32768 ~ 4e81) nor underflows
     * (1.4e-45^2 ~ 2e-90) */
    static float w[SX_MAX_DIM];
    for (size_t i = 0; i < SX_MAX_DIM; i++)
        w[i] = i % 2 ? 3.4e38f : -3.4e38f;
    (void)sx__normalize(w, SX_MAX_DIM);
    ASSERT_NEAR(w[0], -1.0 / sqrt((double)SX_MAX_DIM), 1e-6);
    for (size_t i = 0; i < 6; i++)
        v[i] = 1.4e-45f;
    (void)sx__normalize(v, 6);
    ASSERT_NEAR(v[5], 1.0 / sqrt(6.0), 1e-6);
    v[0] = 3e38f;
    v[1] = 1.4e-45f;
    (void)sx__normalize(v, 2);
    ASSERT(v[0] == 1.0f && v[1] == 0.0f);
}

/* The squared-norm bound of sextant.h: SX_MAX_SQNORM is exactly 2^125; a vector at it passes,
 * one ulp above does not; [3e38, ...] and 1e19 do not. */
static void test_sqnorm_bound(void)
{
    ASSERT(SX_MAX_SQNORM == ldexp(1.0, 125));
    float v[4] = { 0.5f, 0.25f, 0.0f, 1.0f };
    double n2;
    ASSERT_EQ(sx__first_over_sqnorm(v, 1, 4, &n2), 1);
    ASSERT_NEAR(sx__norm2_f64(v, 4), 1.3125, 0.0);
    float at[2] = { 0x1p62f, 0x1p62f }; /* 2^124 + 2^124 */
    ASSERT_EQ(sx__first_over_sqnorm(at, 1, 2, &n2), 1);
    float rows[3 * 2] = { 1.0f, 2.0f, 1e19f, 0.0f, 3e38f, 3e38f };
    ASSERT_EQ(sx__first_over_sqnorm(rows, 3, 2, &n2), 1);
    ASSERT_NEAR(n2, 1e38, 1e31);
    at[1] = nextafterf(0x1p62f, INFINITY);
    ASSERT_EQ(sx__first_over_sqnorm(at, 1, 2, &n2), 0);
}

/* range.h: fences are the order statistics they claim, a few outliers stay outside the range, a
 * full tail widens it, small samples give min/max. */
static void test_robust_range(void)
{
    uint64_t s = seed + 5;

    enum { M = 1000 };

    static float x[M * 2];
    /* dimension 0: a permutation of 0..999; dimension 1: 0..99, each ten times */
    for (size_t i = 0; i < M; i++) {
        x[2 * i] = (float)i;
        x[2 * i + 1] = (float)(i / 10);
    }
    for (int rep = 0; rep < 5; rep++) {
        for (size_t i = M - 1; i > 0; i--) {
            size_t j = test_rand(&s) % (i + 1);
            float t = x[2 * i];
            x[2 * i] = x[2 * j];
            x[2 * j] = t;
            t = x[2 * i + 1];
            x[2 * i + 1] = x[2 * j + 1];
            x[2 * j + 1] = t;
        }
        sx__range r;
        ASSERT_OK(sx__range_init(&r, 2));
        ASSERT_OK(sx__range_fence(&r, x, M, 2));
        /* k = 1 + 1000/256 = 4: the 4th smallest (0-based) and 4th largest */
        ASSERT_NEAR(r.flo[0], 4.0 - 991.0, 0.0);
        ASSERT_NEAR(r.fhi[0], 995.0 + 991.0, 0.0);
        ASSERT_NEAR(r.flo[1], 0.0 - 99.0, 0.0);
        ASSERT_NEAR(r.fhi[1], 99.0 + 99.0, 0.0);
        float lo[2], hi[2];
        /* a few outliers beyond the fences: outside the range */
        float out[3 * 2] = { 1e6f, -5e3f, -1e9f, 150.0f, 2000.0f, 250.0f };
        sx__range_observe(&r, x, M, 2);
        sx__range_observe(&r, out, 3, 2);
        sx__range_finish(&r, lo, hi);
        ASSERT(lo[0] == 0.0f && hi[0] == 999.0f);
        ASSERT(lo[1] == 0.0f && hi[1] == 150.0f);
        /* a full tail (SX__RANGE_TAIL values beyond a fence) is no outlier: widened to the
         * TAIL-th largest (beyond the upper fence: 1e6, 2000 and these; the 32 largest are 1e6
         * and 3036 .. 3006) */
        for (uint32_t t = 0; t < SX__RANGE_TAIL + 5; t++) {
            float v[2] = { 3000.0f + (float)t, 1.0f };
            sx__range_observe(&r, v, 1, 2);
        }
        sx__range_finish(&r, lo, hi);
        ASSERT(hi[0] == 3000.0f + (float)(SX__RANGE_TAIL + 5 - (SX__RANGE_TAIL - 1)) &&
               lo[0] == 0.0f);
        sx__range_fini(&r);
    }
    /* fewer than SX__RANGE_MIN_SAMPLE sample values: no fences, min/max */
    sx__range r;
    ASSERT_OK(sx__range_init(&r, 2));
    ASSERT_OK(sx__range_fence(&r, x, SX__RANGE_MIN_SAMPLE - 1, 2));
    ASSERT(isinf(r.flo[0]) && isinf(r.fhi[1]));
    float out[2] = { 1e6f, -1e6f };
    sx__range_observe(&r, x, 10, 2);
    sx__range_observe(&r, out, 1, 2);
    float lo[2], hi[2];
    sx__range_finish(&r, lo, hi);
    ASSERT(hi[0] == 1e6f && lo[1] == -1e6f);
    sx__range_fini(&r);
}

/* SQ8 with outliers (issue 13): the trained ranges are those of the normal rows, the outlier
 * rows and only they are clipped; a sparse dimension (0.5% nonzero, a full tail) keeps its
 * nonzero values in range. */
static void test_sq8_outliers(void)
{
    uint64_t s = seed + 6;

    enum { N = 20000, D = 8 };

    static float x[N * D];
    for (size_t i = 0; i < (size_t)N * D; i++)
        x[i] = test_randf(&s);
    for (size_t i = 0; i < N; i++)
        x[i * D + 7] = i % 200 == 3 ? 1.0f + test_randf(&s) : 0.0f;
    static const size_t bad[3] = { 17, 9000, 19999 };
    x[17 * D + 2] = 1e6f;
    for (size_t d = 0; d < D; d++)
        x[9000 * D + d] = -1e6f;
    x[19999 * D + 5] = 1e3f;
    sx__sq8 sq;
    ASSERT_OK(sx__sq8_train(&sq, x, N, D, D));
    for (size_t d = 0; d < 7; d++) {
        ASSERT_NEAR(sq.vmin[d], 0.0, 1e-3);
        ASSERT_NEAR(sq.vmin[d] + 255.0f * sq.scale[d], 1.0, 1e-3);
    }
    /* dimension 7: the sample (every 4th row) holds no nonzero value, so its fences are [0, 0];
     * 100 values lie above: a full tail, the range reaches its 32nd largest; row 9000's -1e6 is
     * alone below */
    float top7 = sq.vmin[7] + 255.0f * sq.scale[7];
    ASSERT(sq.vmin[7] == 0.0f && top7 > 1.0f && top7 < 2.0f);
    static uint8_t codes[N * D];
    sx__sq8_encode(&sq, x, N, D, codes);
    size_t clipped = 0;
    for (size_t i = 0; i < N; i++) {
        bool c = sx__sq8_clipped(&sq, x + i * D, codes + i * D);
        bool is_bad = i == bad[0] || i == bad[1] || i == bad[2];
        if (is_bad)
            ASSERT(c);
        clipped += c;
        if (c)
            continue;
        float dec[D];
        sx__sq8_decode(&sq, codes + i * D, dec);
        for (size_t d = 0; d < D; d++)
            ASSERT(fabsf(dec[d] - x[i * D + d]) <= sq.scale[d] * 1.0001f); /* one step at most */
    }
    /* the outliers and the values above dimension 7's range (at most TAIL - 1 of them) */
    ASSERT(clipped >= 3 && clipped <= 3 + SX__RANGE_TAIL - 1);
    sx__sq8_fini(&sq);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-simd") == 0) {
        puts(sx_simd_level());
        return 0;
    }
    seed = test_seed();
    tables[n_tables++] = sx__dist_scalar();
    if (sx__dist_avx2())
        tables[n_tables++] = sx__dist_avx2();
    if (sx__dist_avx512())
        tables[n_tables++] = sx__dist_avx512();

    RUN(test_tables_present);
    RUN(test_dims_vs_reference);
    RUN(test_no_overread);
    RUN(test_identities);
    RUN(test_resolve_cap);
    RUN(test_env_cap);
    RUN(test_for_metric);
    RUN(test_normalize);
    RUN(test_sqnorm_bound);
    RUN(test_robust_range);
    RUN(test_sq8_outliers);
    return TEST_DONE();
}
