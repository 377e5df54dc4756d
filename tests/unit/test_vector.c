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
    return TEST_DONE();
}
