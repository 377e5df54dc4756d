/*
 * diskann_bench.c: DISKANN figures on BIGANN-10k and Fashion-MNIST: recall@10, single-thread QPS,
 * I/Os and bytes read per query, RAM bytes vs raw vector bytes, build time and memory under a
 * memory limit. Not a test: nothing is asserted apart from the calls succeeding.
 *
 * Usage: diskann_bench [options]
 *   --data bigann|fmnist   data set (default bigann): BIGANN-10k from $SX_SHARED_DATA (or
 *                          ../shared/data), Fashion-MNIST from /usr/share/datasets/fashion-mnist
 *                          with the shipped ground truth
 *   --nq N                 queries (default: all: 100 / 10000)
 *   --threads T            build threads (default 2); search is always single-threaded
 *   --limit-mb X           ctx->memory_limit_bytes in MiB (default 0 = unlimited)
 *   --R n --L n --alpha a --ratio r   build params (Milvus names max_degree, search_list_size,
 *                          alpha, pq_code_budget_gb_ratio; defaults 56, 100, 1.2, 0.125)
 *   --sl a,b,c             search_list values (default 10,16,24,32,48,64,100)
 *   --beam a,b             beam_width values (default 4); every search_list runs with each
 *   --dir D                where the index file goes (default $SX_TMPDIR or /tmp); removed after
 * Recall: BIGANN by ids against the shipped top-100; Fashion-MNIST by ann-benchmarks'
 * distance-threshold rule (returned row counts when its Euclidean distance <= d_10 + 1e-3).
 * Memory: the accounted build peak (every allocation of the build, k-means bounded by its
 * estimate; vectors are borrowed, not counted) and getrusage's peak RSS of the process before and
 * after the build. The "before" figure is taken after a warm-up build of the first 2,000 rows,
 * so it already holds what any build touches once per process (OpenBLAS's work buffers, thread
 * stacks) besides the vectors this program holds (printed separately). getrusage's figure is a
 * process-lifetime high-water mark (the data loading may set it), so the build's own peak is also
 * measured as VmHWM after resetting it (/proc/self/clear_refs) just before the build, minus the
 * RSS at that moment.
 * Output: a header block, then one row per search_list:
 *   search_list  recall@10  QPS  ms/query  I/Os/query  KiB/query
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "index/diskann/diskann.h"
#include "index/index.h"
#include "util/heap.h"

#define K  10
#define FM "/usr/share/datasets/fashion-mnist"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double maxrss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* A "Name:  N kB" line of /proc/self/status in MiB, or -1. */
static double status_mib(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    double v = -1;
    size_t len = strlen(name);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, len) == 0)
            v = strtod(line + len, NULL) / 1024.0;
    fclose(f);
    return v;
}

/* Resets VmHWM to the current RSS (Linux >= 4.0); false when not possible. */
static bool reset_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static const char *shared(const char *rel, char *buf, size_t cap)
{
    const char *base = getenv("SX_SHARED_DATA");
    snprintf(buf, cap, "%s/%s", base ? base : "../shared/data", rel);
    return buf;
}

static float *read_bvecs(const char *path, size_t *n, size_t *dim)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    int32_t d;
    if (fread(&d, 4, 1, f) != 1 || d <= 0) {
        fclose(f);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t rec = 4 + (size_t)d;
    *n = (size_t)len / rec;
    *dim = (size_t)d;
    float *out = malloc(*n * *dim * sizeof *out);
    uint8_t *raw = malloc(rec);
    for (size_t i = 0; i < *n; i++) {
        if (fread(raw, rec, 1, f) != 1)
            break;
        for (size_t j = 0; j < *dim; j++)
            out[i * *dim + j] = (float)raw[4 + j];
    }
    free(raw);
    fclose(f);
    return out;
}

/* records of int32 d + d 4-byte values */
static void *read_vecs4(const char *path, size_t *n, size_t *dim)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    int32_t d;
    if (fread(&d, 4, 1, f) != 1 || d <= 0) {
        fclose(f);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t rec = 4 + 4 * (size_t)d;
    *n = (size_t)len / rec;
    *dim = (size_t)d;
    uint32_t *out = malloc(*n * *dim * 4);
    for (size_t i = 0; i < *n; i++) {
        int32_t dd;
        if (fread(&dd, 4, 1, f) != 1 || fread(out + i * *dim, 4, *dim, f) != *dim)
            break;
    }
    fclose(f);
    return out;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static float *read_idx(const char *path, size_t *n, size_t *dim)
{
    gzFile g = gzopen(path, "rb");
    if (!g)
        return NULL;
    uint8_t hdr[16];
    if (gzread(g, hdr, 16) != 16 || be32(hdr) != 0x803) {
        gzclose(g);
        return NULL;
    }
    *n = be32(hdr + 4);
    *dim = (size_t)be32(hdr + 8) * be32(hdr + 12);
    size_t bytes = *n * *dim;
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

/* Copies the next comma-separated token of cur into tok; returns where the rest starts. */
static const char *next_tok(const char *cur, char *tok, size_t cap)
{
    const char *comma = strchr(cur, ',');
    size_t len = comma ? (size_t)(comma - cur) : strlen(cur);
    snprintf(tok, cap, "%.*s", (int)(len < cap ? len : cap - 1), cur);
    return comma ? comma + 1 : cur + len;
}

int main(int argc, char **argv)
{
    const char *data = "bigann", *sls = "10,16,24,32,48,64,100", *beam = "4";
    const char *Rs = "56", *Ls = "100", *alpha = "1.2", *ratio = "0.125";
    const char *dir = getenv("SX_TMPDIR") ? getenv("SX_TMPDIR") : "/tmp";
    size_t nq_want = 0;
    uint32_t threads = 2;
    double limit_mb = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--data"))
            data = v;
        else if (!strcmp(k, "--nq"))
            nq_want = strtoul(v, NULL, 10);
        else if (!strcmp(k, "--threads"))
            threads = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(k, "--limit-mb"))
            limit_mb = strtod(v, NULL);
        else if (!strcmp(k, "--R"))
            Rs = v;
        else if (!strcmp(k, "--L"))
            Ls = v;
        else if (!strcmp(k, "--alpha"))
            alpha = v;
        else if (!strcmp(k, "--ratio"))
            ratio = v;
        else if (!strcmp(k, "--sl"))
            sls = v;
        else if (!strcmp(k, "--beam"))
            beam = v;
        else if (!strcmp(k, "--dir"))
            dir = v;
        else {
            fprintf(stderr, "unknown option %s\n", k);
            return 2;
        }
    }

    size_t n = 0, dim = 0, nq = 0, gtk = 0, dq = 0, dk = 0, ndist = 0;
    float *base = NULL, *q = NULL, *gtd = NULL;
    uint32_t *gt = NULL;
    char p1[1024];
    bool fm = strcmp(data, "fmnist") == 0;
    if (fm) {
        base = read_idx(FM "/train-images-idx3-ubyte.gz", &n, &dim);
        q = read_idx(FM "/t10k-images-idx3-ubyte.gz", &nq, &dq);
        gt = read_vecs4(shared("fashion-mnist/fmnist_groundtruth_l2_k100.ivecs", p1, sizeof p1),
                        &ndist, &gtk);
        gtd =
            read_vecs4(shared("fashion-mnist/fmnist_groundtruth_l2_k100_dist.fvecs", p1, sizeof p1),
                       &ndist, &dk);
    } else {
        base = read_bvecs(shared("bigann10k/bigann10k_base.bvecs", p1, sizeof p1), &n, &dim);
        q = read_bvecs(shared("bigann10k/bigann10k_query.bvecs", p1, sizeof p1), &nq, &dq);
        gt = read_vecs4(shared("bigann10k/bigann10k_groundtruth_l2_k100.ivecs", p1, sizeof p1),
                        &ndist, &gtk);
    }
    if (!base || !q || !gt || (fm && !gtd)) {
        fprintf(stderr, "data set %s not found\n", data);
        return 2;
    }
    if (nq_want && nq_want < nq)
        nq = nq_want;
    double rss_data = maxrss_mib();

    char prefix[1024];
    snprintf(prefix, sizeof prefix, "%s/diskann_bench.%d", dir, (int)getpid());
    sx_param bp[] = { { "max_degree", Rs },
                      { "search_list_size", Ls },
                      { "alpha", alpha },
                      { "pq_code_budget_gb_ratio", ratio } };
    const sx__index_ops *ops = &sx__diskann_index_ops;
    sx__build_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.threads = threads;
    ctx.file_prefix = prefix;
    ctx.memory_limit_bytes = (uint64_t)(limit_mb * 1048576.0);
    ctx.seed = 1;
    uint64_t est = ops->estimate_build_bytes(bp, 4, n, dim);
    sx__index *idx = NULL;
    /* warm-up: OpenBLAS buffers and threads exist before the measured build */
    if (ops->build(bp, 4, base, n < 2000 ? n : 2000, dim, SX_METRIC_L2, &ctx, &idx) != SX_OK) {
        fprintf(stderr, "warm-up build failed: %s\n", sx_errmsg());
        return 1;
    }
    ops->free(idx);
    idx = NULL;
    double rss_warm = maxrss_mib();
    bool hwm_ok = reset_hwm();
    double rss_before = status_mib("VmRSS:");
    double t0 = now_s();
    sx_status rc = ops->build(bp, 4, base, n, dim, SX_METRIC_L2, &ctx, &idx);
    double build_s = now_s() - t0;
    if (rc != SX_OK) {
        fprintf(stderr, "build failed: %s: %s\n", sx_status_str(rc), sx_errmsg());
        return 1;
    }
    double rss_build = maxrss_mib();
    double hwm = hwm_ok ? status_mib("VmHWM:") : -1;
    const sx__diskann *d = (const sx__diskann *)idx;
    size_t raw = n * dim * sizeof(float), ram = ops->memory_bytes(idx);
    printf("data %s: n=%zu dim=%zu queries=%zu\n", data, n, dim, nq);
    printf("build: max_degree=%s search_list_size=%s alpha=%s pq_code_budget_gb_ratio=%s "
           "(m=%u bytes/vector) threads=%u\n",
           Rs, Ls, alpha, ratio, d->pq.m, threads);
    printf("build: %.1f s; memory limit %.1f MiB; in-memory estimate %.1f MiB; %u shard(s); "
           "accounted peak %.1f MiB\n",
           build_s, limit_mb, (double)est / 1048576.0, d->build_shards,
           (double)d->build_peak_bytes / 1048576.0);
    printf("peak RSS: %.1f MiB after loading the data (vectors %.1f MiB), %.1f MiB after a "
           "warm-up build, %.1f MiB after the build (+%.1f MiB)\n",
           rss_data, (double)raw / 1048576.0, rss_warm, rss_build, rss_build - rss_warm);
    if (hwm >= 0)
        printf("build's own peak RSS: VmHWM %.1f MiB - RSS before the build %.1f MiB = %.1f MiB\n",
               hwm, rss_before, hwm - rss_before);
    printf("RAM %zu bytes = %.2f%% of the raw vectors (%zu bytes); disk %llu bytes\n", ram,
           100.0 * (double)ram / (double)raw, raw, (unsigned long long)ops->disk_bytes(idx));
    printf("I/O: %s, %s%s%s\n", d->io_mode == SX__DISKANN_IO_URING ? "io_uring" : "pread",
           d->is_direct ? "O_DIRECT" : "buffered", d->io_note[0] ? "; " : "", d->io_note);
    printf("%12s %5s %10s %9s %9s %11s %10s\n", "search_list", "beam", "recall@10", "QPS",
           "ms/query", "I/Os/query", "KiB/query");

    for (const char *cur = sls; *cur;) {
        char tok[32];
        cur = next_tok(cur, tok, sizeof tok);
        for (const char *bcur = beam; *bcur;) {
            char btok[32];
            bcur = next_tok(bcur, btok, sizeof btok);
            sx_param sp[] = { { "search_list", tok }, { "beam_width", btok } };
            sx__hit store[K];
            uint64_t io0, b0, io1, b1;
            size_t hit = 0;
            ops->io_stats(idx, &io0, &b0);
            double ts = now_s();
            for (size_t i = 0; i < nq; i++) {
                sx__topk t;
                sx__topk_init(&t, store, K);
                rc = ops->search(idx, q + i * dim, K, sp, 2, NULL, &t);
                if (rc != SX_OK) {
                    fprintf(stderr, "search failed: %s\n", sx_errmsg());
                    return 1;
                }
                size_t got = sx__topk_sort(&t);
                for (size_t j = 0; j < got; j++) {
                    if (fm) {
                        float thr = gtd[i * dk + K - 1] + 1e-3f;
                        if (sqrtf(store[j].dist) <= thr)
                            hit++;
                    } else {
                        for (size_t g = 0; g < K; g++)
                            hit += store[j].id == gt[i * gtk + g];
                    }
                }
            }
            double el = now_s() - ts;
            ops->io_stats(idx, &io1, &b1);
            printf("%12s %5s %10.4f %9.0f %9.3f %11.1f %10.1f\n", tok, btok,
                   (double)hit / (double)(nq * K), (double)nq / el, 1000.0 * el / (double)nq,
                   (double)(io1 - io0) / (double)nq, (double)(b1 - b0) / (double)nq / 1024.0);
            fflush(stdout);
        }
    }
    ops->free(idx);
    ops->remove_files(prefix);
    free(base);
    free(q);
    free(gt);
    free(gtd);
    return 0;
}
