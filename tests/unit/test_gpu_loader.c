/*
 * test_gpu_loader.c: the gpu layer's plugin loader (src/gpu/gpu_loader.c), in every build. The
 * loader decides once per process, so each case runs in a fresh process: this binary re-executes
 * itself with the case's name and environment, and the parent checks the exit status.
 *
 *   fake       SX_CUDA_PLUGIN = the fake plugin (tests/unit/fake_gpu_plugin.c): nothing is mapped
 *              before the first GPU call, the plugin is after; the table is used (describe, knn,
 *              kmeans); the plugin's error message is the caller's sx_errmsg(); the plugin's
 *              allocations run the host's fault-injection countdown (sx__alloc_fail_after).
 *   abi        a plugin speaking another ABI: refused, "no GPU" with both ABI numbers; the entry
 *              points return SX_EINVAL with the same message.
 *   missing    SX_CUDA_PLUGIN names no file: refused with the path.
 *   foreign    SX_CUDA_PLUGIN names a shared object without sx__gpu_plugin_init.
 *   off        SX_GPU=off: nothing is opened, even with SX_CUDA_PLUGIN set.
 *   lazy       no SX_CUDA_PLUGIN: no CUDA library and no plugin mapped at start; in a CUDA build
 *              the first sx__gpu_describe() maps libsextant_cuda.so (found next to this binary),
 *              whether or not there is a GPU; without CUDA it says "built without CUDA".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "harness.h"
#include "util/alloc.h"

#ifndef SX_FAKE_PLUGIN
# error "SX_FAKE_PLUGIN (path of libsx_fake_gpu_plugin.so) is set by CMakeLists.txt"
#endif

static const char *self_path;

/* True when /proc/self/maps has a mapping whose path contains needle. */
static bool mapped(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    bool found = false;
    if (!f)
        return false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    (void)fclose(f);
    return found;
}

static bool any_cuda_mapped(void)
{
    return mapped("libcudart") || mapped("libcublas") || mapped("libcuda.so");
}

/* ------------------------------------------------------------ the cases (child processes) */

static void case_fake(void)
{
    ASSERT(!mapped("libsx_fake_gpu_plugin"));
    ASSERT(sx__gpu_available());
    ASSERT(mapped("libsx_fake_gpu_plugin"));
    ASSERT(strstr(sx__gpu_describe(), "fake GPU plugin") != NULL);
    float x[8] = { 0, 1, 2, 3, 4, 5, 6, 7 }, c[2] = { 0, 0 };
    uint32_t ids[2];
    float dist[2];
    ASSERT_STATUS(sx__gpu_knn(x, 4, x, 2, 2, SX_METRIC_L2, 1, false, ids, dist), SX_EIO);
    ASSERT(strcmp(sx_errmsg(), "fake knn: n=4 nq=2 dim=2 k=1") == 0);
    ASSERT_OK(sx__gpu_kmeans(x, 4, 2, 2, 7, c, NULL, NULL));
    ASSERT_EQ(c[0], 7);
    sx__alloc_fail_after(1);
    ASSERT_STATUS(sx__gpu_kmeans(x, 4, 2, 2, 7, c, NULL, NULL), SX_ENOMEM);
    sx__alloc_fail_after(0);
    ASSERT(strcmp(sx_errmsg(), "fake kmeans: out of memory") == 0);
    sx__cagra_build_params bp = { .intermediate_degree = 2, .graph_degree = 1 };
    uint32_t g[4];
    ASSERT_STATUS(sx__gpu_cagra_build(x, 4, 2, SX_METRIC_L2, &bp, g), SX_EINVAL);
}

static void expect_no_gpu(const char *want)
{
    const char *d = sx__gpu_describe();
    fprintf(stderr, "  describe: %s\n", d);
    ASSERT(!sx__gpu_available());
    ASSERT(strstr(d, want) != NULL);
    float x[8] = { 0 };
    uint32_t ids[4];
    float dist[4];
    ASSERT_STATUS(sx__gpu_knn(x, 4, x, 4, 2, SX_METRIC_L2, 1, true, ids, dist), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), want) != NULL);
    ASSERT_STATUS(sx__gpu_kmeans(x, 4, 2, 2, 5, x, NULL, NULL), SX_EINVAL);
    const uint32_t knn[8] = { 1, 2, 0, 2, 0, 1, 0, 1 };
    uint32_t g[4];
    ASSERT_STATUS(sx__gpu_cagra_prune_merge(knn, 4, 2, 1, g), SX_EINVAL);
}

static void case_abi(void)
{
    expect_no_gpu("speaks ABI 999");
}

static void case_missing(void)
{
    expect_no_gpu("SX_CUDA_PLUGIN=/nonexistent/libsextant_cuda.so: no such file");
}

static void case_foreign(void)
{
    expect_no_gpu("is not a Sextant CUDA plugin (no sx__gpu_plugin_init)");
}

static void case_off(void)
{
    expect_no_gpu("disabled by SX_GPU=off");
    ASSERT(!mapped("libsx_fake_gpu_plugin"));
}

static void case_lazy(void)
{
    ASSERT(!any_cuda_mapped());
    ASSERT(!mapped("libsextant_cuda"));
    const char *d = sx__gpu_describe();
    fprintf(stderr, "  describe: %s\n", d);
#ifdef SX_HAVE_CUDA
    ASSERT(mapped("libsextant_cuda"));
#else
    ASSERT(strstr(d, "built without CUDA") != NULL);
    ASSERT(!mapped("libsextant_cuda"));
    ASSERT(!any_cuda_mapped());
#endif
}

typedef struct gcase {
    const char *name;
    void (*fn)(void);
    const char *plugin; /* SX_CUDA_PLUGIN, NULL: unset */
    const char *gpu;    /* SX_GPU, NULL: unset */
} gcase;

static const gcase cases[] = {
    { "fake", case_fake, SX_FAKE_PLUGIN, NULL },
    { "abi", case_abi, SX_FAKE_PLUGIN_ABI, NULL },
    { "missing", case_missing, "/nonexistent/libsextant_cuda.so", NULL },
    { "foreign", case_foreign, SX_FOREIGN_SO, NULL },
    { "off", case_off, SX_FAKE_PLUGIN, "off" },
    { "lazy", case_lazy, NULL, NULL },
};

#define N_CASES (sizeof cases / sizeof cases[0])

/* Runs case i in a fresh process (this binary, argv[1] = the case's name). */
static void run_case(size_t i)
{
    const gcase *c = &cases[i];
    fflush(stderr);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        if (c->plugin)
            (void)setenv("SX_CUDA_PLUGIN", c->plugin, 1);
        else
            (void)unsetenv("SX_CUDA_PLUGIN");
        if (c->gpu)
            (void)setenv("SX_GPU", c->gpu, 1);
        else
            (void)unsetenv("SX_GPU");
        execl(self_path, self_path, c->name, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAILF("case %s: child exit status %d", c->name,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void test_fake(void)
{
    run_case(0);
}

static void test_abi(void)
{
    run_case(1);
}

static void test_missing(void)
{
    run_case(2);
}

static void test_foreign(void)
{
    run_case(3);
}

static void test_off(void)
{
    run_case(4);
}

static void test_lazy(void)
{
    run_case(5);
}

/* In the child: runs case c. 0 passed, 1 failed. */
static int run_one(const gcase *c)
{
    h_name = c->name;
    if (setjmp(h_jmp) != 0)
        return 1;
    c->fn();
    return 0;
}

/* In the child: runs the case named name. 0 passed, 1 failed, 2 no such case. */
static int run_child(const char *name)
{
    for (size_t i = 0; i < N_CASES; i++)
        if (strcmp(name, cases[i].name) == 0)
            return run_one(&cases[i]);
    return 2;
}

int main(int argc, char **argv)
{
    self_path = "/proc/self/exe";
    if (argc == 2) /* a child: one case, exit 0 when it passed */
        return run_child(argv[1]);
    RUN(test_fake);
    RUN(test_abi);
    RUN(test_missing);
    RUN(test_foreign);
    RUN(test_off);
    RUN(test_lazy);
    return TEST_DONE();
}
