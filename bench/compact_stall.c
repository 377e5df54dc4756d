/*
 * compact_stall.c (bench helper): insert latency while a compaction runs.
 *
 * A collection of --rows rows (dim --dim) is sealed into segments of about --seg-mb MiB, then
 * --delete-pct of its rows are deleted (spread over every segment) and flushed. One writer
 * thread inserts batches of --batch rows back to back and records each sx_insert's latency;
 * after a --warmup-s baseline window the main thread runs sx_compact (which rewrites every
 * segment). Printed: insert count, p50 / p99 / max latency in the baseline window and during the
 * compaction, the compaction's duration, and the p99 ratio (during / baseline). Before the
 * write_mu change (issue 12) every insert waited for the whole rewrite of each segment; after,
 * only for the delete-bit snapshot and the swap.
 *
 *   build/compact_stall [--rows 400000] [--dim 64] [--seg-mb 32] [--delete-pct 30]
 *                       [--batch 100] [--warmup-s 2] [--dir /tmp/sx-compact-bench]
 *
 * Two threads (writer + compaction); run on an otherwise idle machine and read the ratio, not
 * absolute times. WAL fsync is on (sync_mode full), as a database runs by default.
 */
#include <math.h>
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct lat {
    double t;  /* start time */
    double us; /* latency */
} lat;

static sx_collection *coll;
static size_t dim = 64, batch = 100;
static atomic_bool stop;
static lat *lats;
static size_t n_lats, cap_lats;
static int64_t next_id;

static void fill(int64_t first, size_t n, int64_t *ids, float *v)
{
    uint64_t s = (uint64_t)first * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        ids[i] = first + (int64_t)i;
        for (size_t d = 0; d < dim; d++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            v[i * dim + d] = (float)(s >> 40) / (float)(1u << 24);
        }
    }
}

static sx_status insert(int64_t first, size_t n, int64_t *ids, float *v)
{
    fill(first, n, ids, v);
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { n, cols, 2 };
    return sx_insert(coll, &b, NULL);
}

static void *writer(void *arg)
{
    (void)arg;
    int64_t *ids = malloc(batch * sizeof *ids);
    float *v = malloc(batch * dim * sizeof *v);
    while (!atomic_load(&stop)) {
        double t0 = now_s();
        if (insert(next_id, batch, ids, v) != SX_OK) {
            fprintf(stderr, "insert failed: %s\n", sx_errmsg());
            exit(1);
        }
        double t1 = now_s();
        next_id += (int64_t)batch;
        if (n_lats == cap_lats) {
            cap_lats = cap_lats ? cap_lats * 2 : 4096;
            lats = realloc(lats, cap_lats * sizeof *lats);
        }
        lats[n_lats++] = (lat){ t0, (t1 - t0) * 1e6 };
    }
    free(ids);
    free(v);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50, p99, max of the latencies of inserts that started in [t0, t1). */
static size_t window(double t0, double t1, double *p50, double *p99, double *mx)
{
    double *x = malloc((n_lats + 1) * sizeof *x);
    size_t m = 0;
    for (size_t i = 0; i < n_lats; i++)
        if (lats[i].t >= t0 && lats[i].t < t1)
            x[m++] = lats[i].us;
    *p50 = *p99 = *mx = 0;
    if (m) {
        qsort(x, m, sizeof *x, cmp_d);
        *p50 = x[m / 2];
        *p99 = x[(size_t)ceil(0.99 * (double)m) - 1];
        *mx = x[m - 1];
    }
    free(x);
    return m;
}

int main(int argc, char **argv)
{
    size_t rows = 400000, seg_mb = 32, del_pct = 30;
    double warmup = 2.0;
    const char *dir = "/tmp/sx-compact-bench";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows"))
            rows = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dim"))
            dim = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seg-mb"))
            seg_mb = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--delete-pct"))
            del_pct = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--warmup-s"))
            warmup = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s (see the comment at the top of the file)\n",
                    argv[i]);
            return 2;
        }
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return 1;
    sx_db_options o = { 0 };
    o.segment_max_bytes = (uint64_t)seg_mb << 20;
    o.sync_mode = SX_SYNC_FULL;
    sx_db *db = NULL;
    if (sx_db_open(dir, &o, &db) != SX_OK) {
        fprintf(stderr, "open: %s\n", sx_errmsg());
        return 1;
    }
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, (uint32_t)dim, 0 } };
    sx_collection_def d = { "c", f, 2, SX_METRIC_L2 };
    if (sx_collection_create(db, &d) != SX_OK || sx_collection_open(db, "c", &coll) != SX_OK) {
        fprintf(stderr, "create: %s\n", sx_errmsg());
        return 1;
    }
    const size_t chunk = 10000;
    int64_t *ids = malloc(chunk * sizeof *ids);
    float *v = malloc(chunk * dim * sizeof *v);
    for (size_t r = 0; r < rows; r += chunk) {
        size_t n = rows - r < chunk ? rows - r : chunk;
        if (insert((int64_t)r, n, ids, v) != SX_OK) {
            fprintf(stderr, "load: %s\n", sx_errmsg());
            return 1;
        }
    }
    if (sx_flush(coll) != SX_OK)
        return 1;
    /* delete del_pct% of the rows, spread over every segment */
    char filter[64];
    snprintf(filter, sizeof filter, "id %% 100 < %zu", del_pct);
    uint64_t deleted = 0;
    if (sx_delete_where(coll, filter, &deleted) != SX_OK || sx_flush(coll) != SX_OK) {
        fprintf(stderr, "delete: %s\n", sx_errmsg());
        return 1;
    }
    sx_collection_info info;
    if (sx_collection_describe(coll, &info) != SX_OK)
        return 1;
    next_id = (int64_t)rows;
    pthread_t w;
    if (pthread_create(&w, NULL, writer, NULL) != 0)
        return 1;
    double t0 = now_s();
    struct timespec ws = { (time_t)warmup, (long)((warmup - floor(warmup)) * 1e9) };
    nanosleep(&ws, NULL);
    double c0 = now_s();
    sx_status st = sx_compact(coll);
    double c1 = now_s();
    atomic_store(&stop, true);
    pthread_join(w, NULL);
    if (st != SX_OK) {
        fprintf(stderr, "compact: %s\n", sx_errmsg());
        return 1;
    }
    double b50, b99, bmx, c50, c99, cmx;
    size_t nb = window(t0, c0, &b50, &b99, &bmx);
    size_t nc = window(c0, c1, &c50, &c99, &cmx);
    printf("compact_stall: %zu rows x %zu dims in %u segments, %llu deleted (%zu%%), inserts of "
           "%zu rows, 1 writer thread + 1 compaction thread\n",
           rows, dim, info.n_segments, (unsigned long long)deleted, del_pct, batch);
    printf("  compaction: %.3f s\n", c1 - c0);
    printf("  baseline (%.1f s): %zu inserts, p50 %.0f us, p99 %.0f us, max %.0f us\n", c0 - t0, nb,
           b50, b99, bmx);
    printf("  during compaction: %zu inserts, p50 %.0f us, p99 %.0f us, max %.0f us\n", nc, c50,
           c99, cmx);
    printf("  p99 during / baseline: %.2fx; max during / baseline p99: %.2fx\n",
           b99 > 0 ? c99 / b99 : 0.0, b99 > 0 ? cmx / b99 : 0.0);
    free(ids);
    free(v);
    sx_collection_release(coll);
    sx_db_close(db);
    return 0;
}
