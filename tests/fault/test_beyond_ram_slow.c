/*
 * test_beyond_ram_slow.c: a collection several times larger than the memory it may use (issue 14).
 * Import, DISKANN build, reopen and search all run as `sextant` processes inside a real memory
 * cgroup (v2 memory.max with memory.swap.max 0, else v1 memory.limit_in_bytes with swappiness
 * 0), limited to a fifth of the raw vector bytes. Asserted: every process exits 0 (an OOM kill
 * is a SIGKILL and the cgroup's oom_kill count), the cgroup's peak stays within its limit (the
 * kernel guarantees that; the figure is printed), and recall@10 of the search against exact
 * ground truth (brute force here, outside the cgroup) is >= 0.95.
 *
 * The data: N x DIM float32 drawn around 256 Gaussian cluster centres (SX_BEYOND_N, default
 * 330000; DIM 256: 322 MiB raw; the limit SX_BEYOND_LIMIT_MB, default raw / 5 = 64 MiB), 200
 * queries from the same distribution. Measured (2-core machine, busy): import 3 s, DISKANN build
 * 76 s, reopen + 200 queries 47 s (segments of 8,192 rows read from disk through a 64 MiB page
 * cache), recall@10 1.0. The process's own budget follows the cgroup (no --memory-limit is
 * passed: the default is the cgroup's limit less the headroom). DISKANN parameters keep the
 * in-RAM part small: PQ codes of 32 bytes per vector (pq_code_budget_gb_ratio 1/32).
 *
 * Skipped (77, with the reason) when no memory cgroup is writable (not root, no controller).
 * The "_slow" suffix keeps it out of the sanitizer passes (their shadow memory would blow any
 * limit); the release pass runs it. SX_BEYOND_KEEP=1 keeps the data directory for a look,
 * SX_BEYOND_DIM changes the dimension.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sextant.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define NQ      200
#define K       10
#define CENTERS 256

static size_t g_n = 330000;
static size_t DIM = 256; /* SX_BEYOND_DIM */
static char g_dir[600];
static char g_cg[300]; /* the cgroup directory */
static int g_v2;

/* ---------------------------------------------------------------- files */

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, text, strlen(text));
    int e = close(fd);
    return w == (ssize_t)strlen(text) && e == 0 ? 0 : -1;
}

static uint64_t read_u64(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f)) {
        if (!key) {
            v = strtoull(line, NULL, 10);
            break;
        }
        size_t kl = strlen(key);
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    }
    (void)fclose(f);
    return v;
}

static char *cgfile(const char *name)
{
    static char p[400];
    snprintf(p, sizeof p, "%s/%s", g_cg, name);
    return p;
}

/* ---------------------------------------------------------------- the cgroup */

/* Creates the cgroup with `limit` bytes. Returns 0, or -1 with a reason in why. */
static int cg_create(uint64_t limit, char *why, size_t why_len)
{
    char lim[32];
    snprintf(lim, sizeof lim, "%llu", (unsigned long long)limit);
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
        g_v2 = 1;
        snprintf(g_cg, sizeof g_cg, "/sys/fs/cgroup/sx_beyond_%d", (int)getpid());
        if (mkdir(g_cg, 0755) != 0) {
            snprintf(why, why_len, "cannot create %s: %s", g_cg, strerror(errno));
            return -1;
        }
        if (write_file(cgfile("memory.max"), lim) != 0) {
            snprintf(why, why_len, "cgroup v2 without the memory controller in %s", g_cg);
            return -1;
        }
        (void)write_file(cgfile("memory.swap.max"), "0");
        return 0;
    }
    g_v2 = 0;
    snprintf(g_cg, sizeof g_cg, "/sys/fs/cgroup/memory/sx_beyond_%d", (int)getpid());
    if (mkdir(g_cg, 0755) != 0) {
        snprintf(why, why_len, "cannot create %s: %s (no writable memory cgroup)", g_cg,
                 strerror(errno));
        return -1;
    }
    if (write_file(cgfile("memory.limit_in_bytes"), lim) != 0) {
        snprintf(why, why_len, "cannot write %s", cgfile("memory.limit_in_bytes"));
        return -1;
    }
    (void)write_file(cgfile("memory.swappiness"), "0");
    return 0;
}

static void cg_remove(void)
{
    if (g_cg[0])
        (void)rmdir(g_cg);
}

static uint64_t cg_oom_kills(void)
{
    return g_v2 ? read_u64(cgfile("memory.events"), "oom_kill")
                : read_u64(cgfile("memory.oom_control"), "oom_kill");
}

static uint64_t cg_peak(void)
{
    return g_v2 ? read_u64(cgfile("memory.peak"), NULL)
                : read_u64(cgfile("memory.max_usage_in_bytes"), NULL);
}

static void cg_reset_peak(void)
{
    if (!g_v2)
        (void)write_file(cgfile("memory.max_usage_in_bytes"), "0");
}

/* Runs argv inside the cgroup; its stdout goes to out_path (NULL: inherited). Returns the wait
 * status; *secs gets the wall time. */
static int cg_run(char *const argv[], const char *out_path, double *secs)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid == 0) {
        char me[32];
        snprintf(me, sizeof me, "%d", (int)getpid());
        if (write_file(cgfile("cgroup.procs"), me) != 0)
            _exit(126);
        if (out_path) {
            int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, 1) < 0)
                _exit(126);
            close(fd);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return status;
}

/* ---------------------------------------------------------------- data */

static float gauss(uint64_t *s)
{
    float u1 = test_randf(s), u2 = test_randf(s);
    if (u1 < 1e-7f)
        u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* Writes n vectors around the centres to path (.fvecs); keeps them in out when non-NULL. */
static void gen(const char *path, const float *centers, size_t n, uint64_t *seed, float *out)
{
    FILE *f = fopen(path, "wb");
    ASSERT(f != NULL);
    float *v = malloc(DIM * sizeof *v);
    ASSERT(v != NULL);
    int32_t d = (int32_t)DIM;
    for (size_t i = 0; i < n; i++) {
        const float *c = centers + (size_t)(test_rand(seed) % CENTERS) * DIM;
        for (size_t j = 0; j < DIM; j++)
            v[j] = c[j] + 0.35f * gauss(seed);
        ASSERT(fwrite(&d, 4, 1, f) == 1 && fwrite(v, 4, DIM, f) == DIM);
        if (out)
            memcpy(out + i * DIM, v, DIM * sizeof *v);
    }
    free(v);
    ASSERT(fclose(f) == 0);
}

/* Exact top-K ids (row numbers = ids: import numbers rows from 0) of the queries, streaming the
 * base file once. */
static void ground_truth(const char *base, const float *q, int64_t *gt)
{
    float *best = malloc(sizeof(float) * NQ * K);
    ASSERT(best != NULL);
    for (size_t i = 0; i < (size_t)NQ * K; i++) {
        best[i] = INFINITY;
        gt[i] = -1;
    }
    FILE *f = fopen(base, "rb");
    ASSERT(f != NULL);
    float *v = malloc(DIM * sizeof *v);
    ASSERT(v != NULL);
    int32_t d;
    for (int64_t id = 0; fread(&d, 4, 1, f) == 1; id++) {
        ASSERT(d == (int32_t)DIM && fread(v, 4, DIM, f) == DIM);
        for (size_t qi = 0; qi < NQ; qi++) {
            const float *qq = q + qi * DIM;
            float s = 0;
            for (size_t j = 0; j < DIM; j++) {
                float t = qq[j] - v[j];
                s += t * t;
            }
            float *b = best + qi * K;
            int64_t *g = gt + qi * K;
            if (s >= b[K - 1])
                continue;
            size_t p = K - 1;
            while (p > 0 && b[p - 1] > s) {
                b[p] = b[p - 1];
                g[p] = g[p - 1];
                p--;
            }
            b[p] = s;
            g[p] = id;
        }
    }
    (void)fclose(f);
    free(v);
    free(best);
}

/* Parses `sextant search` output ("query I: ..." then "  1. id=N  distance=..."). */
static size_t parse_hits(const char *path, int64_t *got)
{
    for (size_t i = 0; i < (size_t)NQ * K; i++)
        got[i] = -2;
    FILE *f = fopen(path, "r");
    ASSERT(f != NULL);
    char line[512];
    long qi = -1;
    size_t rank = 0, hits = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "query ", 6) == 0) {
            qi = strtol(line + 6, NULL, 10);
            rank = 0;
            continue;
        }
        const char *p = strstr(line, "id=");
        if (p && qi >= 0 && qi < NQ && rank < K) {
            got[(size_t)qi * K + rank++] = strtoll(p + 3, NULL, 10);
            hits++;
        }
    }
    (void)fclose(f);
    return hits;
}

/* ---------------------------------------------------------------- the test */

static void test_beyond_ram(void)
{
    const char *bin = getenv("SX_SEXTANT_BIN");
    if (!bin)
        SKIPF("SX_SEXTANT_BIN not set (run through ctest)");
    uint64_t raw = (uint64_t)g_n * DIM * 4;
    uint64_t limit = raw / 5;
    if (getenv("SX_BEYOND_LIMIT_MB"))
        limit = strtoull(getenv("SX_BEYOND_LIMIT_MB"), NULL, 10) << 20;
    char why[512];
    if (cg_create(limit, why, sizeof why) != 0) {
        cg_remove();
        SKIPF("%s", why);
    }

    uint64_t seed = test_seed();
    float *centers = malloc(sizeof(float) * CENTERS * DIM);
    float *q = malloc(sizeof(float) * NQ * DIM);
    int64_t *gt = malloc(sizeof(int64_t) * NQ * K), *got = malloc(sizeof(int64_t) * NQ * K);
    ASSERT(centers && q && gt && got);
    for (size_t i = 0; i < (size_t)CENTERS * DIM; i++)
        centers[i] = test_randf(&seed) * 4.0f;
    char base[700], qpath[700], data[700], out[700];
    snprintf(base, sizeof base, "%s/base.fvecs", g_dir);
    snprintf(qpath, sizeof qpath, "%s/query.fvecs", g_dir);
    snprintf(data, sizeof data, "%s/db", g_dir);
    snprintf(out, sizeof out, "%s/search.out", g_dir);
    gen(base, centers, g_n, &seed, NULL);
    gen(qpath, centers, NQ, &seed, q);
    ground_truth(base, q, gt);
    fprintf(stderr,
            "  %zu x %zu float32 = %.0f MiB raw; cgroup %s limit %.0f MiB (%.1fx smaller)\n", g_n,
            DIM, (double)raw / 1048576.0, g_v2 ? "v2" : "v1", (double)limit / 1048576.0,
            (double)raw / (double)limit);

    /* import + DISKANN build, in the cgroup */
    char *imp[] = { (char *)bin, "import", "--data", data, "--collection", "big", "--file", base,
                    "--index", "diskann", "--param", "max_degree=32", "--param",
                    "search_list_size=64", "--param", "pq_code_budget_gb_ratio=0.03125",
                    /* segments of 8,192 rows, as the budget's growing segments are, not merged:
                     * one graph over these 256 tight, well-separated clusters navigates poorly
                     * at search_list 100 (recall@10 0.14 measured; issue 18), and this test is
                     * about memory. bench/beyond_ram.sh measures the merged, partitioned build. */
                    "--segment-max", "8M", NULL };
    double t_imp = 0, t_search = 0;
    cg_reset_peak();
    int st = cg_run(imp, NULL, &t_imp);
    uint64_t peak_imp = cg_peak();
    fprintf(stderr, "  import + build: %.1f s, cgroup peak %.1f MiB, oom kills %llu\n", t_imp,
            (double)peak_imp / 1048576.0, (unsigned long long)cg_oom_kills());
    if (WIFSIGNALED(st))
        FAILF("sextant import killed by signal %d (oom kills %llu)", WTERMSIG(st),
              (unsigned long long)cg_oom_kills());
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* reopen + search, in the cgroup */
    char *srch[] = { (char *)bin, "search",          "--data", data,  "--collection",
                     "big",       "--query",         qpath,    "--k", "10",
                     "--param",   "search_list=100", NULL };
    cg_reset_peak();
    st = cg_run(srch, out, &t_search);
    uint64_t peak_search = cg_peak();
    fprintf(stderr, "  reopen + %d queries: %.1f s, cgroup peak %.1f MiB, oom kills %llu\n", NQ,
            t_search, (double)peak_search / 1048576.0, (unsigned long long)cg_oom_kills());
    if (WIFSIGNALED(st))
        FAILF("sextant search killed by signal %d", WTERMSIG(st));
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT_EQ(cg_oom_kills(), 0);

    size_t hits = parse_hits(out, got);
    ASSERT_EQ(hits, (size_t)NQ * K);
    size_t match = 0;
    for (size_t qi = 0; qi < NQ; qi++)
        for (size_t a = 0; a < K; a++)
            for (size_t b = 0; b < K; b++)
                if (got[qi * K + a] == gt[qi * K + b]) {
                    match++;
                    break;
                }
    double recall = (double)match / (double)(NQ * K);
    fprintf(stderr, "  recall@10 = %.4f (search_list=100)\n", recall);
    ASSERT(recall >= 0.95);

    free(centers);
    free(q);
    free(gt);
    free(got);
    cg_remove();
}

int main(void)
{
    if (getenv("SX_BEYOND_DIM"))
        DIM = strtoull(getenv("SX_BEYOND_DIM"), NULL, 10);
    if (getenv("SX_BEYOND_N"))
        g_n = strtoull(getenv("SX_BEYOND_N"), NULL, 10);
    snprintf(g_dir, sizeof g_dir, "%s", test_tmpdir("test_beyond_ram"));
    RUN(test_beyond_ram);
    cg_remove();
    int rc = TEST_DONE();
    if (rc == 0 && !getenv("SX_BEYOND_KEEP")) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", g_dir);
    }
    return rc;
}
