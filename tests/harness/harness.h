/*
 * harness.h: the tiny in-house test harness. A test file defines test functions and a main that
 * calls RUN(fn) for each, then returns TEST_DONE(). Assertions print file:line and the values and
 * abort the current test (longjmp), counting a failure. Randomised tests print their seed.
 * SKIPF(...) ends the current test as skipped (e.g. its dataset is absent), saying why.
 * Closing line: "N passed, N failed, N skipped". Exit status: 1 when a test failed, else 77
 * (ctest's SKIP_RETURN_CODE: the run shows as skipped) when a test was skipped, else 0.
 */
#ifndef SX_TEST_HARNESS_H
#define SX_TEST_HARNESS_H
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "procstat.h"

static int h_pass, h_fail, h_skip;
static jmp_buf h_jmp;
static const char *h_name;

#define FAILF(...)                                                  \
 do {                                                               \
  fprintf(stderr, "FAIL %s (%s:%d): ", h_name, __FILE__, __LINE__); \
  fprintf(stderr, __VA_ARGS__);                                     \
  fprintf(stderr, "\n");                                            \
  longjmp(h_jmp, 1);                                                \
 } while (0)

#define SKIPF(...)                                                  \
 do {                                                               \
  fprintf(stderr, "SKIP %s (%s:%d): ", h_name, __FILE__, __LINE__); \
  fprintf(stderr, __VA_ARGS__);                                     \
  fprintf(stderr, "\n");                                            \
  longjmp(h_jmp, 2);                                                \
 } while (0)

#define ASSERT(c)                     \
 do {                                 \
  if (!(c))                           \
   FAILF("assertion failed: %s", #c); \
 } while (0)
#define ASSERT_EQ(a, b)                               \
 do {                                                 \
  long long _a = (long long)(a), _b = (long long)(b); \
  if (_a != _b)                                       \
   FAILF("%s == %s: %lld != %lld", #a, #b, _a, _b);   \
 } while (0)
#define ASSERT_NEAR(a, b, eps)                                              \
 do {                                                                       \
  double _a = (double)(a), _b = (double)(b);                                \
  if (!(_a - _b <= (eps) && _b - _a <= (eps)))                              \
   FAILF("%s ~= %s: %.9g vs %.9g (eps %g)", #a, #b, _a, _b, (double)(eps)); \
 } while (0)
#define ASSERT_STATUS(expr, want)                                                \
 do {                                                                            \
  sx_status _st = (expr);                                                        \
  if (_st != (want))                                                             \
   FAILF("%s returned %s (%s), want %s", #expr, sx_status_str(_st), sx_errmsg(), \
         sx_status_str(want));                                                   \
 } while (0)
#define ASSERT_OK(expr) ASSERT_STATUS(expr, SX_OK)

#define RUN(fn)                       \
 do {                                 \
  h_name = #fn;                       \
  int _j = setjmp(h_jmp);             \
  if (_j == 0) {                      \
   fn();                              \
   h_pass++;                          \
   fprintf(stderr, "ok   %s\n", #fn); \
  } else if (_j == 2) {               \
   h_skip++;                          \
  } else {                            \
   h_fail++;                          \
  }                                   \
 } while (0)

#define TEST_DONE()                                                     \
 (printf("%d passed, %d failed, %d skipped\n", h_pass, h_fail, h_skip), \
  (h_fail ? 1 : (h_skip ? 77 : 0)))

/* Seed from SX_SEED or the time; printed so a failure can be replayed. */
static inline uint64_t test_seed(void)
{
    const char *s = getenv("SX_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    fprintf(stderr, "seed: SX_SEED=%" PRIu64 "\n", seed);
    return seed;
}

/* xorshift64* */
static inline uint64_t test_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static inline float test_randf(uint64_t *s)
{
    return (float)(test_rand(s) >> 40) / (float)(1u << 24);
}

/* A fresh temporary directory under $SX_TMPDIR (or /tmp). Returns a static buffer. */
static inline const char *test_tmpdir(const char *tag)
{
    static char buf[512];
    const char *base = getenv("SX_TMPDIR");
    if (!base)
        base = "/tmp";
    char cmd[1100];
    snprintf(buf, sizeof buf, "%s/%s.%d", base, tag, (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", buf, buf);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot create %s\n", buf);
        exit(2);
    }
    return buf;
}

/* Path of a shared data file, or NULL when absent: the caller must then SKIPF (visibly), never
 * pass. test_data_or_skip does that itself. */
static inline const char *test_data(const char *rel)
{
    static char buf[1024];
    const char *base = getenv("SX_SHARED_DATA");
    if (!base)
        base = "../shared/data";
    snprintf(buf, sizeof buf, "%s/%s", base, rel);
    FILE *f = fopen(buf, "rb");
    if (!f)
        return NULL;
    fclose(f);
    return buf;
}

/* Path of a shared data file; ends the current test as skipped, naming the file, when absent. */
static inline const char *test_data_or_skip(const char *rel)
{
    const char *p = test_data(rel);
    if (!p)
        SKIPF("dataset %s is absent (set SX_SHARED_DATA to the directory holding it)", rel);
    return p;
}

/* A data file at a fixed path (a Debian dataset package's, say); ends the current test as
 * skipped, naming the file and what provides it, when it is absent or unreadable. */
static inline void test_file_or_skip(const char *path, const char *provider)
{
    if (access(path, R_OK) != 0)
        SKIPF("%s is absent (%s)", path, provider);
}

/* For a test that needs BIGANN-10k (`loaded`: the caller's loader found and read it): returns when
 * loaded; otherwise ends the test as skipped when one of the files is absent (naming it), or as
 * failed when they are all there, since then they were unreadable or inconsistent. */
static inline void test_need_bigann(bool loaded)
{
    if (loaded)
        return;
    (void)test_data_or_skip("bigann10k/bigann10k_base.bvecs");
    (void)test_data_or_skip("bigann10k/bigann10k_query.bvecs");
    (void)test_data_or_skip("bigann10k/bigann10k_groundtruth_l2_k100.ivecs");
    FAILF("BIGANN-10k under $SX_SHARED_DATA is present but unreadable or inconsistent");
}

/* For a test that needs Fashion-MNIST's vectors (Debian's dataset-fashion-mnist, dir): ends it as
 * skipped when they are absent. */
static inline void test_need_fmnist_files(const char *dir)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
    test_file_or_skip(p, "Debian package dataset-fashion-mnist");
    snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte.gz", dir);
    test_file_or_skip(p, "Debian package dataset-fashion-mnist");
}

/* 1 in sanitizer builds (ASan, TSan: gcc's macros or clang's __has_feature), where RSS and
 * speed say little: tests then print such figures instead of asserting them, or do less work. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
# define TEST_SANITIZED 1
#elif defined(__has_feature)
# if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#  define TEST_SANITIZED 1
# endif
#endif
#ifndef TEST_SANITIZED
# define TEST_SANITIZED 0
#endif

#endif
