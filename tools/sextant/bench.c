/*
 * bench.c: `sextant bench`: load a dataset into a fresh collection, build an index, and measure
 * recall@k, QPS and latency per search parameter, optionally beside hnswlib (bench/peers).
 *
 * Phases (each a function below), and what is timed:
 *
 *   1. load_inputs    read base, queries, optional ground truth (datasets.h); not timed
 *   2. setup_db       open --data (or a fresh mkdtemp directory, removed at the end) and create
 *                     collection "bench": int64 key `id` = row number (not auto-id), vector
 *                     field `vector`, the metric
 *   3. insert_base    sx_insert in batches of --batch rows                       -> insert_s
 *   4. ensure_gt      without --gt: exact top-k through the engine, in batches of GT_BATCH
 *                     queries (the index does not exist yet, so every search is exact and the
 *                     engine can use BLAS); the distances of the ids found are then recomputed
 *                     in double and each row re-sorted (rescore_gt). Written to --gt / --gt-dist
 *                     when those name files that do not exist yet (a cache for the next run);
 *                     not timed
 *   5. build_index    sx_index_create + sx_flush + sx_index_wait                  -> build_s
 *                     load_s = insert_s + build_s (VectorDBBench's load_duration)
 *   6. run_all        per search-param value: every query once, one query per call, from one
 *                     thread (ann-benchmarks' protocol), then with --threads N > 1 the same
 *                     queries from N threads at once (a separate run entry, threads = N).
 *                     Latency per query with CLOCK_MONOTONIC around sx_search + reading the
 *                     hits + sx_rowset_free; QPS = nq / wall time; best of --runs passes
 *   7. peers          dlopen sx_peer_hnswlib.so, build hnswlib with the same M/efConstruction
 *                     and threads on the same vectors (timed: add of all rows), same ef list
 *   8. report         table on stdout, --json file
 *
 * Recall. With distances for the ground truth (--gt-dist, or computed in phase 4), recall is
 * ann-benchmarks' distance-threshold recall (docs: benchmarks.md §1): a returned hit counts when
 * its distance is within d_k + 1e-3 of the query's true k-th distance. The GT distances may be
 * squared or plain Euclidean (for L2), similarities or 1 - similarity / -IP (for ip/cosine):
 * the form is detected by recomputing, in double, the distance from each of the first queries
 * to its GT nearest neighbour and picking the form that matches; engine distances (squared L2
 * or similarity) are converted to that form before comparing. Computed GT stores L2 as
 * Euclidean, because the epsilon is meant for Euclidean values and squared float32 distances
 * of large vectors carry rounding above 1e-3. Without distances (only --gt ids) recall is the
 * id-set overlap |returned[0:k] ∩ gt[0:k]| / k. The peer's distances are not trusted to follow
 * any convention: its hits are re-scored from the vectors in double.
 *
 * Threading: the main thread does everything except the concurrent search runs, where worker
 * threads take query numbers from an atomic counter (relaxed: the counter only hands out
 * distinct indices; results are published to the main thread by pthread_join). Each worker
 * writes only its own queries' slots. The first error is kept under a mutex.
 *
 * Rejected: timing a batched sx_search (nq > 1) as "QPS": that measures throughput of the
 * engine's own thread pool, not the per-query latency ann-benchmarks and VectorDBBench report.
 */
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../bench/peers/peer.h"
#include "cli.h"
#include "datasets.h"

#define ERR_LEN       1024
#define MAX_SP_VALUES 64
#define GT_BATCH      256
#define GT_MIN_K      100
#define RECALL_EPS    1e-3
#define RECALL_TARGET 0.95
#define COLLECTION    "bench"
#define PEER_SO       "sx_peer_hnswlib.so"

/* The form ground-truth distances are kept in; everything is compared in this form. */
typedef enum dist_form {
    DF_SQL2 = 0,    /* squared Euclidean, lower is better */
    DF_L2 = 1,      /* Euclidean, lower is better */
    DF_SIM = 2,     /* inner product / cosine similarity, higher is better */
    DF_COSDIST = 3, /* 1 - similarity, lower is better */
    DF_NEGIP = 4    /* -inner product, lower is better */
} dist_form;

static const char *const form_names[] = { "squared Euclidean", "Euclidean", "similarity",
                                          "1 - similarity", "negative inner product" };

typedef struct run_result {
    char params[64];    /* "ef=10", "" without search params */
    const char *sp_val; /* the value of the search param, or NULL */
    unsigned threads;
    double recall, qps, p50_ms, p99_ms;
} run_result;

typedef struct sys_result {
    double build_s;
    uint64_t memory_bytes;
    run_result *runs;
    size_t n_runs;
} sys_result;

typedef struct gt_set {
    size_t k;     /* values per query row */
    int32_t *ids; /* nq * k, owned */
    float *dists; /* nq * k in `form`, owned, or NULL (id-set recall) */
    dist_form form;
    const char *source; /* "file" or "computed" */
} gt_set;

typedef __typeof__(&sx_peer_hnsw_new) peer_new_fn;
typedef __typeof__(&sx_peer_hnsw_add) peer_add_fn;
typedef __typeof__(&sx_peer_hnsw_set_ef) peer_set_ef_fn;
typedef __typeof__(&sx_peer_hnsw_search) peer_search_fn;
typedef __typeof__(&sx_peer_hnsw_memory) peer_memory_fn;
typedef __typeof__(&sx_peer_hnsw_free) peer_free_fn;

typedef struct peer_api {
    void *dl;
    char path[PATH_MAX];
    peer_new_fn hnsw_new;
    peer_add_fn add;
    peer_set_ef_fn set_ef;
    peer_search_fn search;
    peer_memory_fn memory;
    peer_free_fn free_index;
} peer_api;

typedef struct bench {
    /* options */
    const char *base_path, *query_path, *gt_path, *gt_dist_path, *data_opt, *json_path;
    sx_metric metric;
    const char *index_name;
    char index_type[16];
    cli_params build;
    char sp_key[64];
    const char *sp_vals[MAX_SP_VALUES];
    size_t n_sp;
    char sp_store[2048];
    uint32_t k;
    unsigned threads, runs;
    size_t nq_limit, base_limit, batch;
    int peers; /* -1 auto, 0 off, 1 on */

    /* state */
    ds_matrix base, queries;
    gt_set gt;
    bool gt_write_ids, gt_write_dists;
    char data_dir[PATH_MAX];
    bool data_is_temp;
    sx_db *db;
    sx_collection *c;
    double insert_s, build_s;
    uint64_t index_memory, collection_memory;
    char index_params[256];
    sys_result ours, peer;
    bool have_peer;
    char peer_note[PATH_MAX + 128];
    char err[ERR_LEN];
} bench;

/* ------------------------------------------------------------------ distances */

static double exact_sim_or_sq(sx_metric metric, const float *a, const float *b, size_t dim)
{
    double acc = 0, na = 0, nb = 0;
    for (size_t j = 0; j < dim; j++) {
        double x = (double)a[j], y = (double)b[j];
        if (metric == SX_METRIC_L2) {
            acc += (x - y) * (x - y);
        } else {
            acc += x * y;
            na += x * x;
            nb += y * y;
        }
    }
    if (metric == SX_METRIC_COSINE)
        acc = (na > 0 && nb > 0) ? acc / (sqrt(na) * sqrt(nb)) : 0.0;
    return acc;
}

/* Converts a raw value (squared L2 for l2, similarity otherwise) into `form`. */
static double to_form(double raw, dist_form form)
{
    switch (form) {
    case DF_SQL2:
    case DF_SIM:
        return raw;
    case DF_L2:
        return sqrt(raw > 0 ? raw : 0);
    case DF_COSDIST:
        return 1.0 - raw;
    case DF_NEGIP:
        return -raw;
    }
    return raw;
}

static bool higher_is_better(dist_form form)
{
    return form == DF_SIM;
}

/* ------------------------------------------------------------------ options */

static void bench_usage(FILE *out)
{
    fprintf(
        out,
        "usage: sextant bench --base FILE --query FILE [options]\n"
        "\n"
        "  --base FILE            base vectors (.fvecs .bvecs .npy IDX .gz)\n"
        "  --query FILE           query vectors\n"
        "  --gt FILE              ground-truth ids (.ivecs); computed through the engine if\n"
        "                         absent, and cached to FILE if FILE does not exist yet\n"
        "  --gt-dist FILE         ground-truth distances (.fvecs): distance-threshold recall\n"
        "  --metric M             l2 | ip | cosine (default l2)\n"
        "  --index T              flat | hnsw (default hnsw)\n"
        "  --param K=V            index build parameter, repeatable (M=16, efConstruction=200)\n"
        "  --search-param K=V,..  search parameter values, one run each (ef=10,20,40,80)\n"
        "  --k N                  neighbours per query (default 10)\n"
        "  --threads N            build threads, and an extra N-thread search run (default 1)\n"
        "  --nq N                 use the first N queries\n"
        "  --limit N              use the first N base vectors\n"
        "  --batch N              rows per sx_insert (default 1000)\n"
        "  --runs N               passes per setting, best QPS kept (default 1)\n"
        "  --data DIR             database directory (default: a temporary one, removed)\n"
        "  --json FILE            write the results as JSON\n"
        "  --peers | --no-peers   compare with hnswlib through build/" PEER_SO "\n"
        "                         (default: when the shim is found)\n");
}

static int parse_search_params(bench *b, const char *cmd, const char *s)
{
    const char *eq = strchr(s, '=');
    if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof b->sp_key) {
        fprintf(stderr, "sextant %s: --search-param '%s' is not KEY=V1,V2,...\n", cmd, s);
        return -1;
    }
    memcpy(b->sp_key, s, (size_t)(eq - s));
    b->sp_key[eq - s] = '\0';
    int n = cli_split_list(cmd, "--search-param", eq + 1, b->sp_store, sizeof b->sp_store,
                           b->sp_vals, MAX_SP_VALUES);
    if (n < 0)
        return -1;
    b->n_sp = (size_t)n;
    return 0;
}

/* Returns 0, CLI_EXIT_USAGE, or -1 for --help (exit 0). */
static int parse_args(bench *b, int argc, char **argv)
{
    const char *cmd = "bench", *v = NULL;
    uint64_t u;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            bench_usage(stdout);
            return -1;
        }
        if (cli_flag(argv, &i, "--peers")) {
            b->peers = 1;
            continue;
        }
        if (cli_flag(argv, &i, "--no-peers")) {
            b->peers = 0;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--base", &b->base_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--query", &b->query_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--gt", &b->gt_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--gt-dist", &b->gt_dist_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--data", &b->data_opt)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--json", &b->json_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--index", &b->index_name)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--metric", &v)) != 0) {
            if (r < 0 || cli_parse_metric(cmd, v, &b->metric) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--param", &v)) != 0) {
            if (r < 0 || cli_params_add(&b->build, cmd, v) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--search-param", &v)) != 0) {
            if (r < 0 || parse_search_params(b, cmd, v) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }

        struct {
            const char *name;
            uint64_t lo, hi;
        } nums[] = { { "--k", 1, SX_MAX_TOPK },  { "--threads", 1, 1024 },
                     { "--nq", 1, UINT32_MAX },  { "--limit", 1, UINT64_MAX },
                     { "--batch", 1, 10000000 }, { "--runs", 1, 100 } };

        bool matched = false;
        for (size_t j = 0; j < sizeof nums / sizeof nums[0] && !matched; j++) {
            r = cli_take(argc, argv, &i, cmd, nums[j].name, &v);
            if (r == 0)
                continue;
            if (r < 0 || cli_parse_u64(cmd, nums[j].name, v, nums[j].lo, nums[j].hi, &u) != 0)
                return CLI_EXIT_USAGE;
            matched = true;
            switch (j) {
            case 0:
                b->k = (uint32_t)u;
                break;
            case 1:
                b->threads = (unsigned)u;
                break;
            case 2:
                b->nq_limit = (size_t)u;
                break;
            case 3:
                b->base_limit = (size_t)u;
                break;
            case 4:
                b->batch = (size_t)u;
                break;
            default:
                b->runs = (unsigned)u;
                break;
            }
        }
        if (matched)
            continue;
        fprintf(stderr, "sextant bench: unknown argument '%s'\n", argv[i]);
        return CLI_EXIT_USAGE;
    }
    if (b->base_path == NULL || b->query_path == NULL) {
        fprintf(stderr, "sextant bench: --base and --query are required\n");
        return CLI_EXIT_USAGE;
    }
    if (b->gt_dist_path != NULL && b->gt_path == NULL) {
        fprintf(stderr, "sextant bench: --gt-dist needs --gt (the ids the distances belong to)\n");
        return CLI_EXIT_USAGE;
    }
    if (b->index_name == NULL)
        b->index_name = "hnsw";
    if (strcmp(b->index_name, "hnsw") == 0 || strcmp(b->index_name, "HNSW") == 0) {
        b->index_name = "hnsw";
        snprintf(b->index_type, sizeof b->index_type, "HNSW");
    } else if (strcmp(b->index_name, "flat") == 0 || strcmp(b->index_name, "FLAT") == 0) {
        b->index_name = "flat";
        snprintf(b->index_type, sizeof b->index_type, "FLAT");
    } else {
        fprintf(stderr, "sextant bench: --index: '%s' is not flat or hnsw\n", b->index_name);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* ------------------------------------------------------------------ inputs and ground truth */

static bool file_exists(const char *path)
{
    return path != NULL && access(path, F_OK) == 0;
}

/* Detects the form of GT distances by recomputing the first queries' nearest distances. */
static int detect_gt_form(bench *b)
{
    static const dist_form l2_forms[] = { DF_L2, DF_SQL2 };
    static const dist_form sim_forms[] = { DF_SIM, DF_COSDIST, DF_NEGIP };
    const dist_form *forms = b->metric == SX_METRIC_L2 ? l2_forms : sim_forms;
    size_t n_forms = b->metric == SX_METRIC_L2 ? 2 : (b->metric == SX_METRIC_COSINE ? 2 : 3);
    double err_sum[3] = { 0, 0, 0 }, scale = 0;
    size_t probe = b->queries.n < 100 ? b->queries.n : 100;
    for (size_t q = 0; q < probe; q++) {
        int32_t id = b->gt.ids[q * b->gt.k];
        double raw = exact_sim_or_sq(b->metric, b->queries.f + q * b->queries.dim,
                                     b->base.f + (size_t)id * b->base.dim, b->base.dim);
        double file = (double)b->gt.dists[q * b->gt.k];
        scale += fabs(file);
        for (size_t f = 0; f < n_forms; f++)
            err_sum[f] += fabs(to_form(raw, forms[f]) - file);
    }
    size_t best = 0;
    for (size_t f = 1; f < n_forms; f++) {
        if (err_sum[f] < err_sum[best])
            best = f;
    }
    b->gt.form = forms[best];
    double rel = err_sum[best] / (scale > 0 ? scale : 1.0);
    fprintf(stderr, "sextant bench: %s holds %s distances (mean relative error %.2g)\n",
            b->gt_dist_path, form_names[b->gt.form], rel);
    if (rel > 1e-3)
        fprintf(stderr,
                "sextant bench: warning: %s does not match the distances recomputed from the "
                "vectors; recall will be wrong (another dataset, or --limit cut the base?)\n",
                b->gt_dist_path);
    return 0;
}

static int load_inputs(bench *b)
{
    char err[ERR_LEN];
    const char *cmd = "bench";
    double t0 = cli_now();
    if (ds_load_float(b->base_path, b->base_limit, &b->base, err, sizeof err) != 0 ||
        ds_load_float(b->query_path, b->nq_limit, &b->queries, err, sizeof err) != 0)
        return cli_fail(cmd, "%s", err);
    fprintf(stderr, "sextant bench: base %zu x %zu, queries %zu x %zu (read in %.1f s)\n",
            b->base.n, b->base.dim, b->queries.n, b->queries.dim, cli_now() - t0);
    if (b->base.dim != b->queries.dim)
        return cli_fail(cmd, "base dimension %zu differs from query dimension %zu", b->base.dim,
                        b->queries.dim);
    if (b->base.dim > SX_MAX_DIM)
        return cli_fail(cmd, "dimension %zu exceeds SX_MAX_DIM (%u)", b->base.dim, SX_MAX_DIM);
    if ((size_t)b->k > b->base.n)
        return cli_fail(cmd, "--k %u exceeds the %zu base vectors", b->k, b->base.n);
    if (!file_exists(b->gt_path)) {
        b->gt_write_ids = b->gt_path != NULL;
        b->gt_write_dists = b->gt_dist_path != NULL;
        return 0;
    }
    ds_matrix ids = { 0 }, dists = { 0 };
    if (ds_load(b->gt_path, b->queries.n, &ids, err, sizeof err) != 0)
        return cli_fail(cmd, "%s", err);
    if (ids.type != DS_I32) {
        ds_free(&ids);
        return cli_fail(cmd, "%s: ground-truth ids must be int32 (.ivecs or <i4 .npy)", b->gt_path);
    }
    b->gt.ids = ids.i;
    b->gt.k = ids.dim;
    b->gt.source = "file";
    if (ids.n < b->queries.n || ids.dim < b->k)
        return cli_fail(cmd, "%s has %zu rows of %zu ids; need %zu rows of at least k=%u",
                        b->gt_path, ids.n, ids.dim, b->queries.n, b->k);
    for (size_t j = 0; j < b->queries.n * b->gt.k; j++) {
        if (b->gt.ids[j] < 0 || (size_t)b->gt.ids[j] >= b->base.n)
            return cli_fail(cmd,
                            "%s: id %d (query %zu) is not a row of the %zu base vectors "
                            "(wrong file, or --limit cut the base?)",
                            b->gt_path, (int)b->gt.ids[j], j / b->gt.k, b->base.n);
    }
    if (b->gt_dist_path == NULL)
        return 0;
    if (!file_exists(b->gt_dist_path)) {
        /* Distances of the file's ids, recomputed exactly, then cached. */
        b->gt.dists = malloc(b->queries.n * b->gt.k * sizeof(float));
        if (b->gt.dists == NULL)
            return cli_fail(cmd, "out of memory");
        b->gt.form = b->metric == SX_METRIC_L2 ? DF_L2 : DF_SIM;
        for (size_t j = 0; j < b->queries.n * b->gt.k; j++) {
            size_t q = j / b->gt.k;
            double raw =
                exact_sim_or_sq(b->metric, b->queries.f + q * b->base.dim,
                                b->base.f + (size_t)b->gt.ids[j] * b->base.dim, b->base.dim);
            b->gt.dists[j] = (float)to_form(raw, b->gt.form);
        }
        b->gt_write_dists = true;
        return 0;
    }
    if (ds_load(b->gt_dist_path, b->queries.n, &dists, err, sizeof err) != 0)
        return cli_fail(cmd, "%s", err);
    if (dists.type != DS_F32 || dists.n < b->queries.n || dists.dim != b->gt.k) {
        ds_free(&dists);
        return cli_fail(cmd, "%s does not match %s: want %zu rows of %zu float distances",
                        b->gt_dist_path, b->gt_path, b->queries.n, b->gt.k);
    }
    b->gt.dists = dists.f;
    return detect_gt_form(b);
}

typedef struct gt_pair {
    double d;
    int32_t id;
} gt_pair;

static int cmp_pair_asc(const void *a, const void *b)
{
    const gt_pair *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int cmp_pair_desc(const void *a, const void *b)
{
    const gt_pair *x = a, *y = b;
    if (x->d != y->d)
        return x->d > y->d ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Replaces the engine's float32 distances of the computed GT by exact (double) ones and re-sorts
 * each row, ties by the lower id. Why: a batched exact search may use the BLAS expansion
 * |q|^2 + |x|^2 - 2 q.x, whose float32 rounding on large vectors (Fashion-MNIST: squared
 * distances ~1e5..1e7) reaches 1e-3 in Euclidean terms, the size of the recall epsilon itself,
 * so a correct hit could be judged a miss against a slightly-too-small d_k. */
static int rescore_gt(bench *b)
{
    size_t gk = b->gt.k, dim = b->base.dim;
    gt_pair *row = malloc(gk * sizeof *row);
    if (row == NULL)
        return -1;
    int (*cmp)(const void *, const void *) =
        higher_is_better(b->gt.form) ? cmp_pair_desc : cmp_pair_asc;
    for (size_t q = 0; q < b->queries.n; q++) {
        int32_t *ids = b->gt.ids + q * gk;
        float *d = b->gt.dists + q * gk;
        for (size_t j = 0; j < gk; j++) {
            double raw = exact_sim_or_sq(b->metric, b->queries.f + q * dim,
                                         b->base.f + (size_t)ids[j] * dim, dim);
            row[j] = (gt_pair){ .d = to_form(raw, b->gt.form), .id = ids[j] };
        }
        qsort(row, gk, sizeof *row, cmp);
        for (size_t j = 0; j < gk; j++) {
            ids[j] = row[j].id;
            d[j] = (float)row[j].d;
        }
    }
    free(row);
    return 0;
}

/* Exact top-k of every query through the engine, before any index exists; distances then
 * recomputed exactly (rescore_gt). */
static int compute_gt(bench *b)
{
    const char *cmd = "bench";
    size_t nq = b->queries.n, dim = b->queries.dim;
    size_t gk = b->base.n < GT_MIN_K ? b->base.n : GT_MIN_K;
    if (gk < b->k)
        gk = b->k;
    b->gt.k = gk;
    b->gt.source = "computed";
    b->gt.form = b->metric == SX_METRIC_L2 ? DF_L2 : DF_SIM;
    b->gt.ids = malloc(nq * gk * sizeof(int32_t));
    b->gt.dists = malloc(nq * gk * sizeof(float));
    if (b->gt.ids == NULL || b->gt.dists == NULL)
        return cli_fail(cmd, "out of memory for the ground truth");
    fprintf(stderr, "sextant bench: computing exact top-%zu ground truth for %zu queries...\n", gk,
            nq);
    double t0 = cli_now();
    for (size_t q0 = 0; q0 < nq; q0 += GT_BATCH) {
        size_t n = nq - q0 < GT_BATCH ? nq - q0 : GT_BATCH;
        sx_search_req req = {
            .queries = b->queries.f + q0 * dim, .nq = n, .k = (uint32_t)gk, .metric = -1
        };
        sx_rowset *rs = NULL;
        sx_status st = sx_search(b->c, &req, &rs);
        if (st != SX_OK)
            return cli_sx_fail(cmd, "ground-truth search", st);
        if (rs->nq != n || rs->n_cols < 1 || rs->cols[0].type != SX_FIELD_INT64) {
            sx_rowset_free(rs);
            return cli_fail(cmd, "ground-truth search returned an unexpected result shape");
        }
        const int64_t *ids = rs->cols[0].data;
        size_t row = 0;
        for (size_t q = 0; q < n; q++) {
            if (rs->topks[q] != gk) {
                size_t got = rs->topks[q];
                sx_rowset_free(rs);
                return cli_fail(cmd, "exact search of query %zu returned %zu hits, want %zu",
                                q0 + q, got, gk);
            }
            for (size_t j = 0; j < gk; j++, row++) {
                b->gt.ids[(q0 + q) * gk + j] = (int32_t)ids[row];
                b->gt.dists[(q0 + q) * gk + j] =
                    (float)to_form((double)rs->distances[row], b->gt.form);
            }
        }
        sx_rowset_free(rs);
    }
    if (rescore_gt(b) != 0)
        return cli_fail(cmd, "out of memory");
    fprintf(stderr, "sextant bench: ground truth in %.1f s\n", cli_now() - t0);
    return 0;
}

static int ensure_gt(bench *b)
{
    char err[ERR_LEN];
    if (b->gt.ids == NULL && compute_gt(b) != 0)
        return CLI_EXIT_FAIL;
    if (b->gt_write_ids) {
        if (ds_write_vecs(b->gt_path, b->queries.n, b->gt.k, NULL, b->gt.ids, err, sizeof err) != 0)
            return cli_fail("bench", "caching ground truth: %s", err);
        fprintf(stderr, "sextant bench: wrote ground-truth ids to %s\n", b->gt_path);
    }
    if (b->gt_write_dists) {
        if (ds_write_vecs(b->gt_dist_path, b->queries.n, b->gt.k, b->gt.dists, NULL, err,
                          sizeof err) != 0)
            return cli_fail("bench", "caching ground truth: %s", err);
        fprintf(stderr, "sextant bench: wrote %s ground-truth distances to %s\n",
                form_names[b->gt.form], b->gt_dist_path);
    }
    return 0;
}

/* ------------------------------------------------------------------ database phases */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup_db(bench *b)
{
    const char *cmd = "bench";
    sx_status st;
    if (b->data_opt != NULL) {
        snprintf(b->data_dir, sizeof b->data_dir, "%s", b->data_opt);
    } else {
        const char *tmp = getenv("TMPDIR");
        if (tmp == NULL || tmp[0] == '\0')
            tmp = "/tmp";
        int len = snprintf(b->data_dir, sizeof b->data_dir, "%s/sextant-bench-XXXXXX", tmp);
        if (len < 0 || (size_t)len >= sizeof b->data_dir)
            return cli_fail(cmd, "TMPDIR path too long");
        if (mkdtemp(b->data_dir) == NULL)
            return cli_fail(cmd, "cannot create a directory under %s: %s", tmp, strerror(errno));
        b->data_is_temp = true;
    }
    sx_db_options opts = { 0 };
    opts.build_threads = b->threads;
    st = sx_db_open(b->data_dir, &opts, &b->db);
    if (st != SX_OK)
        return cli_sx_fail(cmd, b->data_dir, st);
    sx_collection *old = NULL;
    st = sx_collection_open(b->db, COLLECTION, &old);
    if (st == SX_OK) {
        sx_collection_release(old);
        fprintf(stderr, "sextant bench: dropping the existing collection '%s' in %s\n", COLLECTION,
                b->data_dir);
        st = sx_collection_drop(b->db, COLLECTION);
        if (st != SX_OK)
            return cli_sx_fail(cmd, "drop old bench collection", st);
    }
    sx_field_def fields[2];
    memset(fields, 0, sizeof fields);
    fields[0].name = "id";
    fields[0].type = SX_FIELD_INT64;
    fields[0].is_primary = true;
    fields[1].name = "vector";
    fields[1].type = SX_FIELD_FLOAT_VECTOR;
    fields[1].dim = (uint32_t)b->base.dim;
    sx_collection_def def = {
        .name = COLLECTION, .fields = fields, .n_fields = 2, .metric = b->metric
    };
    st = sx_collection_create(b->db, &def);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "create collection", st);
    st = sx_collection_open(b->db, COLLECTION, &b->c);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "open collection", st);
    return 0;
}

static int insert_base(bench *b)
{
    size_t bs = b->batch < b->base.n ? b->batch : b->base.n;
    int64_t *ids = malloc(bs * sizeof *ids);
    if (ids == NULL)
        return cli_fail("bench", "out of memory");
    double t0 = cli_now();
    for (size_t r = 0; r < b->base.n; r += bs) {
        size_t rows = b->base.n - r < bs ? b->base.n - r : bs;
        for (size_t j = 0; j < rows; j++)
            ids[j] = (int64_t)(r + j);
        sx_column cols[2] = {
            { .name = "id", .type = SX_FIELD_INT64, .data = ids },
            { .name = "vector",
              .type = SX_FIELD_FLOAT_VECTOR,
              .data = b->base.f + r * b->base.dim },
        };
        sx_batch batch = { .n_rows = rows, .cols = cols, .n_cols = 2 };
        sx_status st = sx_insert(b->c, &batch, NULL);
        if (st != SX_OK) {
            free(ids);
            return cli_sx_fail("bench", "insert", st);
        }
    }
    b->insert_s = cli_now() - t0;
    free(ids);
    fprintf(stderr, "sextant bench: inserted %zu rows in %.2f s\n", b->base.n, b->insert_s);
    return 0;
}

static int build_index(bench *b)
{
    const char *cmd = "bench";
    fprintf(stderr, "sextant bench: building %s index...\n", b->index_type);
    double t0 = cli_now();
    sx_status st = sx_index_create(b->c, b->index_type, b->build.p, b->build.n);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "create index", st);
    st = sx_flush(b->c);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "flush", st);
    st = sx_index_wait(b->c, 0);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "index build", st);
    b->build_s = cli_now() - t0;
    sx_index_info ii;
    st = sx_index_describe(b->c, &ii);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "describe index", st);
    if (ii.state != SX_INDEX_FINISHED)
        fprintf(stderr, "sextant bench: warning: index state is %d after the wait (%s)\n",
                (int)ii.state, ii.fail_reason);
    sx_collection_info ci;
    st = sx_collection_describe(b->c, &ci);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "describe collection", st);
    b->index_memory = ii.memory_bytes;
    b->collection_memory = ci.memory_bytes;
    snprintf(b->index_params, sizeof b->index_params, "%s", ii.params);
    fprintf(stderr,
            "sextant bench: index %s (%s) built in %.2f s, %" PRIu64 " / %" PRIu64
            " rows indexed\n",
            ii.type, ii.params, b->build_s, ii.indexed_rows, ii.total_rows);
    return 0;
}

/* ------------------------------------------------------------------ timed search runs */

/* One system's single-query search. Writes up to k hits (ids, distances in the GT form) and
 * their count. Returns 0, or -1 with a message in err. */
typedef int (*search_one_fn)(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len);

typedef struct run_ctx {
    search_one_fn fn;
    void *fn_ctx;
    size_t nq;
    uint32_t k;
    int64_t *ids;   /* nq * k */
    float *dists;   /* nq * k */
    size_t *counts; /* nq */
    double *lat;    /* nq, seconds */
    atomic_size_t next;
    atomic_bool failed;
    pthread_mutex_t mu;
    char err[ERR_LEN + 32]; /* guarded by: mu */
} run_ctx;

static void *run_worker(void *arg)
{
    run_ctx *r = arg;
    char err[ERR_LEN];
    for (;;) {
        /* relaxed: the counter only hands out distinct query numbers */
        size_t q = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (q >= r->nq || atomic_load_explicit(&r->failed, memory_order_relaxed))
            break;
        double t0 = cli_now();
        int rc = r->fn(r->fn_ctx, q, r->ids + q * r->k, r->dists + q * r->k, &r->counts[q], err,
                       sizeof err);
        r->lat[q] = cli_now() - t0;
        if (rc != 0) {
            pthread_mutex_lock(&r->mu);
            if (!atomic_load_explicit(&r->failed, memory_order_relaxed))
                snprintf(r->err, sizeof r->err, "query %zu: %s", q, err);
            atomic_store_explicit(&r->failed, true, memory_order_relaxed);
            pthread_mutex_unlock(&r->mu);
            break;
        }
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const double *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p * (double)n);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static double score_recall(const bench *b, const run_ctx *r)
{
    uint32_t k = b->k;
    double total = 0;
    int32_t *sorted = NULL;
    if (b->gt.dists == NULL) {
        sorted = malloc(k * sizeof *sorted);
        if (sorted == NULL)
            return NAN;
    }
    for (size_t q = 0; q < r->nq; q++) {
        size_t hits = 0, n = r->counts[q] < k ? r->counts[q] : k;
        const int64_t *ids = r->ids + q * k;
        const float *d = r->dists + q * k;
        if (b->gt.dists != NULL) {
            double thr = (double)b->gt.dists[q * b->gt.k + k - 1];
            bool hi = higher_is_better(b->gt.form);
            for (size_t j = 0; j < n; j++) {
                if (hi ? (double)d[j] >= thr - RECALL_EPS : (double)d[j] <= thr + RECALL_EPS)
                    hits++;
            }
        } else {
            memcpy(sorted, b->gt.ids + q * b->gt.k, k * sizeof *sorted);
            qsort(sorted, k, sizeof *sorted, cmp_i32);
            for (size_t j = 0; j < n; j++) {
                if (ids[j] < 0 || ids[j] > INT32_MAX)
                    continue;
                int32_t key = (int32_t)ids[j];
                if (bsearch(&key, sorted, k, sizeof *sorted, cmp_i32) != NULL)
                    hits++;
            }
        }
        total += (double)hits / (double)k;
    }
    free(sorted);
    return total / (double)r->nq;
}

/* Runs every query through fn from `threads` threads, best of b->runs passes. */
static int timed_run(bench *b, search_one_fn fn, void *fn_ctx, unsigned threads, run_result *out)
{
    size_t nq = b->queries.n;
    run_ctx r;
    memset(&r, 0, sizeof r);
    r.fn = fn;
    r.fn_ctx = fn_ctx;
    r.nq = nq;
    r.k = b->k;
    r.ids = malloc(nq * b->k * sizeof *r.ids);
    r.dists = malloc(nq * b->k * sizeof *r.dists);
    r.counts = calloc(nq, sizeof *r.counts);
    r.lat = malloc(nq * sizeof *r.lat);
    pthread_t *tids = calloc(threads, sizeof *tids);
    int rc = CLI_EXIT_FAIL;
    pthread_mutex_init(&r.mu, NULL);
    if (r.ids == NULL || r.dists == NULL || r.counts == NULL || r.lat == NULL || tids == NULL) {
        rc = cli_fail("bench", "out of memory");
        goto out;
    }
    out->qps = -1;
    for (unsigned pass = 0; pass < b->runs; pass++) {
        atomic_store(&r.next, 0);
        atomic_store(&r.failed, false);
        double t0 = cli_now();
        unsigned started = 0;
        if (threads == 1) {
            run_worker(&r);
        } else {
            for (; started < threads; started++) {
                if (pthread_create(&tids[started], NULL, run_worker, &r) != 0)
                    break;
            }
            for (unsigned j = 0; j < started; j++)
                pthread_join(tids[j], NULL);
        }
        double wall = cli_now() - t0;
        if (threads > 1 && started < threads) {
            rc = cli_fail("bench", "cannot start %u search threads", threads);
            goto out;
        }
        if (atomic_load(&r.failed)) {
            rc = cli_fail("bench", "search failed: %s", r.err);
            goto out;
        }
        double qps = wall > 0 ? (double)nq / wall : 0;
        if (qps <= out->qps)
            continue;
        qsort(r.lat, nq, sizeof *r.lat, cmp_double);
        out->qps = qps;
        out->p50_ms = percentile(r.lat, nq, 0.50) * 1e3;
        out->p99_ms = percentile(r.lat, nq, 0.99) * 1e3;
        out->recall = score_recall(b, &r);
    }
    out->threads = threads;
    rc = 0;
out:
    pthread_mutex_destroy(&r.mu);
    free(tids);
    free(r.ids);
    free(r.dists);
    free(r.counts);
    free(r.lat);
    return rc;
}

typedef struct ours_ctx {
    bench *b;
    sx_param param; /* the search param of this run */
    size_t n_params;
} ours_ctx;

static int ours_search(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len)
{
    ours_ctx *o = ctx;
    bench *b = o->b;
    sx_search_req req = { .queries = b->queries.f + q * b->queries.dim,
                          .nq = 1,
                          .k = b->k,
                          .params = o->n_params ? &o->param : NULL,
                          .n_params = o->n_params,
                          .metric = -1 };
    sx_rowset *rs = NULL;
    sx_status st = sx_search(b->c, &req, &rs);
    if (st != SX_OK) {
        snprintf(err, err_len, "sx_search: %s: %s", sx_status_str(st), sx_errmsg());
        return -1;
    }
    size_t n = rs->nq == 1 ? rs->topks[0] : 0;
    if (n > b->k)
        n = b->k;
    const int64_t *rid = rs->n_cols > 0 ? rs->cols[0].data : NULL;
    for (size_t j = 0; j < n && rid != NULL; j++) {
        ids[j] = rid[j];
        dists[j] = (float)to_form((double)rs->distances[j], b->gt.form);
    }
    *n_out = rid != NULL ? n : 0;
    sx_rowset_free(rs);
    return 0;
}

static int add_run(sys_result *s, const run_result *r)
{
    run_result *p = realloc(s->runs, (s->n_runs + 1) * sizeof *p);
    if (p == NULL)
        return cli_fail("bench", "out of memory");
    s->runs = p;
    s->runs[s->n_runs++] = *r;
    return 0;
}

static void print_run(const char *system, const run_result *r)
{
    printf("%-8s %-18s %7u  %9.4f %11.1f %9.3f %9.3f\n", system, r->params[0] ? r->params : "-",
           r->threads, r->recall, r->qps, r->p50_ms, r->p99_ms);
    (void)fflush(stdout);
}

static void print_header(uint32_t k)
{
    char rk[32];
    snprintf(rk, sizeof rk, "recall@%u", k);
    printf("%-8s %-18s %7s  %9s %11s %9s %9s\n", "index", "params", "threads", rk, "QPS", "p50 ms",
           "p99 ms");
}

static int run_ours(bench *b)
{
    size_t n_settings = b->n_sp > 0 ? b->n_sp : 1;
    printf("\n");
    print_header(b->k);
    for (size_t s = 0; s < n_settings; s++) {
        ours_ctx o = { .b = b };
        run_result r;
        memset(&r, 0, sizeof r);
        if (b->n_sp > 0) {
            o.param.key = b->sp_key;
            o.param.value = b->sp_vals[s];
            o.n_params = 1;
            r.sp_val = b->sp_vals[s];
            snprintf(r.params, sizeof r.params, "%.31s=%.31s", b->sp_key, b->sp_vals[s]);
        }
        unsigned tlist[2] = { 1, b->threads };
        for (size_t t = 0; t < (b->threads > 1 ? 2u : 1u); t++) {
            if (timed_run(b, ours_search, &o, tlist[t], &r) != 0)
                return CLI_EXIT_FAIL;
            if (add_run(&b->ours, &r) != 0)
                return CLI_EXIT_FAIL;
            print_run(b->index_type, &r);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ hnswlib peer */

/* Tries DIR/sx_peer_hnswlib.so: 0 loaded with every symbol, 1 no such file, -1 present but
 * unusable (dlopen failed or a symbol is missing; the reason goes to note). */
static int try_dlopen(peer_api *p, const char *dir, char *note, size_t note_len)
{
    int len = snprintf(p->path, sizeof p->path, "%s/%s", dir, PEER_SO);
    if (len < 0 || (size_t)len >= sizeof p->path || access(p->path, F_OK) != 0)
        return 1;
    p->dl = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
    if (p->dl == NULL) {
        const char *e = dlerror();
        snprintf(note, note_len, "cannot load %s: %s", p->path, e != NULL ? e : "?");
        return -1;
    }
    p->hnsw_new = (peer_new_fn)dlsym(p->dl, "sx_peer_hnsw_new");
    p->add = (peer_add_fn)dlsym(p->dl, "sx_peer_hnsw_add");
    p->set_ef = (peer_set_ef_fn)dlsym(p->dl, "sx_peer_hnsw_set_ef");
    p->search = (peer_search_fn)dlsym(p->dl, "sx_peer_hnsw_search");
    p->memory = (peer_memory_fn)dlsym(p->dl, "sx_peer_hnsw_memory");
    p->free_index = (peer_free_fn)dlsym(p->dl, "sx_peer_hnsw_free");
    if (p->hnsw_new == NULL || p->add == NULL || p->set_ef == NULL || p->search == NULL ||
        p->memory == NULL || p->free_index == NULL) {
        snprintf(note, note_len,
                 "%s does not export the functions of bench/peers/peer.h (built with "
                 "-fvisibility=hidden?)",
                 p->path);
        dlclose(p->dl);
        p->dl = NULL;
        return -1;
    }
    return 0;
}

/* Finds and loads the shim: next to the sextant binary, then in $SX_PEER_DIR; the first
 * candidate that loads wins. Returns true with p->dl set, or false with a note. */
static bool peer_load(peer_api *p, char *note, size_t note_len)
{
    char dirs[2][PATH_MAX];
    size_t n_dirs = 0;
    ssize_t n = readlink("/proc/self/exe", dirs[0], sizeof dirs[0] - 1);
    if (n > 0) {
        dirs[0][n] = '\0';
        char *slash = strrchr(dirs[0], '/');
        if (slash != NULL) {
            *slash = '\0';
            n_dirs++;
        }
    }
    const char *env = getenv("SX_PEER_DIR");
    if (env != NULL && env[0] != '\0' && strlen(env) < sizeof dirs[1])
        snprintf(dirs[n_dirs++], sizeof dirs[1], "%s", env);
    bool unusable = false;
    for (size_t j = 0; j < n_dirs; j++) {
        int rc = try_dlopen(p, dirs[j], note, note_len);
        if (rc == 0)
            return true;
        if (rc < 0) {
            fprintf(stderr, "sextant bench: %s\n", note);
            unusable = true;
        }
    }
    if (!unusable)
        snprintf(note, note_len, "%s not found (looked in %.1024s%s%.1024s)", PEER_SO,
                 n_dirs > 0 ? dirs[0] : "nowhere", n_dirs > 1 ? " and $SX_PEER_DIR=" : "",
                 n_dirs > 1 ? dirs[1] : "");
    return false;
}

typedef struct peer_ctx {
    bench *b;
    peer_api *api;
    void *h;
    const float *queries; /* normalised for cosine */
} peer_ctx;

static int peer_search(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len)
{
    peer_ctx *pc = ctx;
    bench *b = pc->b;
    size_t dim = b->queries.dim;
    size_t n = pc->api->search(pc->h, pc->queries + q * dim, b->k, ids, dists);
    if (n > b->k) {
        snprintf(err, err_len, "hnswlib returned %zu > k hits", n);
        return -1;
    }
    *n_out = n;
    return 0;
}

/* Looks up an integer `key` in "k=v,k=v" text. */
static bool param_in_list(const char *list, const char *key, long *out)
{
    size_t kl = strlen(key);
    const char *p = list;
    while (p != NULL && *p != '\0') {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            char *end = NULL;
            errno = 0;
            long v = strtol(p + kl + 1, &end, 10);
            if (errno == 0 && end != p + kl + 1 && (*end == ',' || *end == '\0')) {
                *out = v;
                return true;
            }
            return false;
        }
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return false;
}

static long build_param(const bench *b, const char *key, long dflt)
{
    long v;
    if (param_in_list(b->index_params, key, &v))
        return v;
    const char *s = cli_params_get(&b->build, key);
    if (s != NULL) {
        char *end = NULL;
        v = strtol(s, &end, 10);
        if (end != s && *end == '\0')
            return v;
    }
    return dflt;
}

static float *normalised_copy(const ds_matrix *m)
{
    float *out = malloc(m->n * m->dim * sizeof(float));
    if (out == NULL)
        return NULL;
    for (size_t r = 0; r < m->n; r++) {
        const float *src = m->f + r * m->dim;
        double nn = 0;
        for (size_t j = 0; j < m->dim; j++)
            nn += (double)src[j] * (double)src[j];
        double inv = nn > 0 ? 1.0 / sqrt(nn) : 0.0;
        for (size_t j = 0; j < m->dim; j++)
            out[r * m->dim + j] = (float)((double)src[j] * inv);
    }
    return out;
}

/* Re-scores peer hits from the vectors (in the GT form) so no distance convention is assumed. */
static int peer_search_rescored(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len)
{
    peer_ctx *pc = ctx;
    bench *b = pc->b;
    if (peer_search(ctx, q, ids, dists, n_out, err, err_len) != 0)
        return -1;
    /* Only the ids are needed for id-set recall; skip the rescoring cost then. */
    if (b->gt.dists == NULL)
        return 0;
    for (size_t j = 0; j < *n_out; j++) {
        if (ids[j] < 0 || (size_t)ids[j] >= b->base.n) {
            snprintf(err, err_len, "hnswlib returned label %" PRId64 " out of range", ids[j]);
            return -1;
        }
        double raw = exact_sim_or_sq(b->metric, b->queries.f + q * b->base.dim,
                                     b->base.f + (size_t)ids[j] * b->base.dim, b->base.dim);
        dists[j] = (float)to_form(raw, b->gt.form);
    }
    return 0;
}

static int run_peer(bench *b)
{
    peer_api api;
    memset(&api, 0, sizeof api);
    if (b->peers == 0)
        return 0;
    if (strcmp(b->index_name, "hnsw") != 0) {
        snprintf(b->peer_note, sizeof b->peer_note, "hnswlib peer skipped: index is not hnsw");
        fprintf(stderr, "sextant bench: %s\n", b->peer_note);
        return 0;
    }
    if (b->n_sp > 0 && strcmp(b->sp_key, "ef") != 0) {
        snprintf(b->peer_note, sizeof b->peer_note,
                 "hnswlib peer skipped: search param '%s' is not ef", b->sp_key);
        fprintf(stderr, "sextant bench: %s\n", b->peer_note);
        return 0;
    }
    if (!peer_load(&api, b->peer_note, sizeof b->peer_note)) {
        fprintf(stderr, "sextant bench: hnswlib peer: %s; continuing without it\n", b->peer_note);
        return 0;
    }
    int rc = CLI_EXIT_FAIL;
    float *nbase = NULL, *nq = NULL;
    void *h = NULL;
    const float *base = b->base.f, *queries = b->queries.f;
    int metric = b->metric == SX_METRIC_L2 ? 0 : 1;
    if (b->metric == SX_METRIC_COSINE) {
        nbase = normalised_copy(&b->base);
        nq = normalised_copy(&b->queries);
        if (nbase == NULL || nq == NULL) {
            rc = cli_fail("bench", "out of memory");
            goto out;
        }
        base = nbase;
        queries = nq;
    }
    long m = build_param(b, "M", 16), efc = build_param(b, "efConstruction", 200);
    fprintf(stderr, "sextant bench: building hnswlib (M=%ld, efConstruction=%ld, %u threads)...\n",
            m, efc, b->threads);
    double t0 = cli_now();
    h = api.hnsw_new((int)b->base.dim, metric, b->base.n, (int)m, (int)efc);
    if (h == NULL || api.add(h, base, b->base.n, (int)b->threads) != 0) {
        rc = cli_fail("bench", "hnswlib peer build failed");
        goto out;
    }
    b->peer.build_s = cli_now() - t0;
    b->peer.memory_bytes = (uint64_t)api.memory(h);
    fprintf(stderr, "sextant bench: hnswlib built in %.2f s\n", b->peer.build_s);
    peer_ctx pc = { .b = b, .api = &api, .h = h, .queries = queries };
    size_t n_settings = b->n_sp > 0 ? b->n_sp : 1;
    for (size_t s = 0; s < n_settings; s++) {
        run_result r;
        memset(&r, 0, sizeof r);
        long ef = 10;
        if (b->n_sp > 0) {
            char *end = NULL;
            ef = strtol(b->sp_vals[s], &end, 10);
            if (end == b->sp_vals[s] || *end != '\0' || ef <= 0) {
                rc = cli_fail("bench", "ef value '%s' is not a positive integer", b->sp_vals[s]);
                goto out;
            }
            r.sp_val = b->sp_vals[s];
            snprintf(r.params, sizeof r.params, "ef=%ld", ef);
        }
        api.set_ef(h, (int)ef);
        unsigned tlist[2] = { 1, b->threads };
        for (size_t t = 0; t < (b->threads > 1 ? 2u : 1u); t++) {
            if (timed_run(b, peer_search_rescored, &pc, tlist[t], &r) != 0)
                goto out;
            if (add_run(&b->peer, &r) != 0)
                goto out;
            print_run("hnswlib", &r);
        }
    }
    b->have_peer = true;
    rc = 0;
out:
    if (h != NULL)
        api.free_index(h);
    free(nbase);
    free(nq);
    dlclose(api.dl);
    return rc;
}

/* ------------------------------------------------------------------ report */

/* QPS at recall `target` by linear interpolation between the two single-thread runs around it
 * (sorted by recall); NAN when no pair brackets the target. */
static double qps_at_recall(const sys_result *s, double target)
{
    double best = NAN;
    for (size_t i = 0; i < s->n_runs; i++) {
        const run_result *a = &s->runs[i];
        if (a->threads != 1)
            continue;
        if (a->recall == target)
            best = isnan(best) || a->qps > best ? a->qps : best;
        for (size_t j = 0; j < s->n_runs; j++) {
            const run_result *c = &s->runs[j];
            if (c->threads != 1 || !(a->recall < target && c->recall > target))
                continue;
            double q = a->qps + (c->qps - a->qps) * (target - a->recall) / (c->recall - a->recall);
            if (isnan(best) || q > best)
                best = q;
        }
    }
    return best;
}

/* The JSON document is built in memory and written with one checked fwrite: a failed or short
 * write is then reported once, and no half-written file is left behind by an early return. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *sb, const char *fmt, ...)
{
    if (sb->oom)
        return;
    for (;;) {
        size_t room = sb->cap - sb->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(sb->p != NULL ? sb->p + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            sb->oom = true;
            return;
        }
        if ((size_t)n < room) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = sb->cap ? sb->cap * 2 : 4096;
        while (cap < sb->len + (size_t)n + 1)
            cap *= 2;
        char *np = realloc(sb->p, cap);
        if (np == NULL) {
            sb->oom = true;
            return;
        }
        sb->p = np;
        sb->cap = cap;
    }
}

static void json_str(sbuf *sb, const char *s)
{
    if (s == NULL) {
        sb_printf(sb, "null");
        return;
    }
    sb_printf(sb, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            sb_printf(sb, "\\%c", *p);
        else if (*p < 0x20)
            sb_printf(sb, "\\u%04x", *p);
        else
            sb_printf(sb, "%c", *p);
    }
    sb_printf(sb, "\"");
}

static void json_num(sbuf *sb, double v)
{
    if (isnan(v) || isinf(v))
        sb_printf(sb, "null");
    else
        sb_printf(sb, "%.6g", v);
}

/* A parameter value: a JSON number when it is one, else a string. */
static void json_param_value(sbuf *sb, const char *v)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (v[0] != '\0' && *end == '\0' && errno == 0 && !isnan(d) && !isinf(d) &&
        strspn(v, "0123456789.-+eE") == strlen(v))
        sb_printf(sb, "%s", v);
    else
        json_str(sb, v);
}

static void json_runs(sbuf *sb, const bench *b, const sys_result *s)
{
    sb_printf(sb, "[");
    for (size_t i = 0; i < s->n_runs; i++) {
        const run_result *r = &s->runs[i];
        sb_printf(sb, "%s\n    {\"search_params\": {", i ? "," : "");
        if (r->sp_val != NULL) {
            json_str(sb, b->sp_key);
            sb_printf(sb, ": ");
            json_param_value(sb, r->sp_val);
        }
        sb_printf(sb, "}, \"k\": %u, \"recall\": ", b->k);
        json_num(sb, r->recall);
        sb_printf(sb, ", \"qps\": ");
        json_num(sb, r->qps);
        sb_printf(sb, ", \"p50_ms\": ");
        json_num(sb, r->p50_ms);
        sb_printf(sb, ", \"p99_ms\": ");
        json_num(sb, r->p99_ms);
        sb_printf(sb, ", \"threads\": %u}", r->threads);
    }
    sb_printf(sb, "\n  ]");
}

/* sx_collection_info.memory_bytes already counts the built indexes (sextant.h: "vectors,
 * scalars and indexes held in memory"), so it is the total; adding sx_index_info.memory_bytes
 * again would count the graph twice. The index share is reported beside it. */
static uint64_t total_memory(const bench *b)
{
    return b->collection_memory;
}

static void json_ratios(sbuf *sb, const bench *b)
{
    sb_printf(sb, ",\n  \"ratios\": {\"hnswlib\": {\"per_setting\": [");
    size_t n = b->ours.n_runs < b->peer.n_runs ? b->ours.n_runs : b->peer.n_runs;
    for (size_t i = 0; i < n; i++) {
        const run_result *o = &b->ours.runs[i], *p = &b->peer.runs[i];
        sb_printf(sb, "%s\n    {\"params\": ", i ? "," : "");
        json_str(sb, o->params);
        sb_printf(sb, ", \"threads\": %u, \"qps_ratio\": ", o->threads);
        json_num(sb, p->qps > 0 ? o->qps / p->qps : (double)NAN);
        sb_printf(sb, ", \"recall\": ");
        json_num(sb, o->recall);
        sb_printf(sb, ", \"peer_recall\": ");
        json_num(sb, p->recall);
        sb_printf(sb, "}");
    }
    double qo = qps_at_recall(&b->ours, RECALL_TARGET);
    double qp = qps_at_recall(&b->peer, RECALL_TARGET);
    double peer_s = b->peer.build_s;
    sb_printf(sb, "\n  ], \"qps_at_recall_0.95\": ");
    json_num(sb, qo);
    sb_printf(sb, ", \"peer_qps_at_recall_0.95\": ");
    json_num(sb, qp);
    sb_printf(sb, ", \"qps_ratio_at_recall_0.95\": ");
    json_num(sb, qo / qp);
    sb_printf(sb, ", \"build_time_ratio\": ");
    json_num(sb, peer_s > 0 ? b->build_s / peer_s : (double)NAN);
    sb_printf(sb, ", \"load_time_ratio\": ");
    json_num(sb, peer_s > 0 ? (b->insert_s + b->build_s) / peer_s : (double)NAN);
    sb_printf(sb, "}}");
}

static void json_document(sbuf *sb, const bench *b)
{
    char date[32] = "unknown";
    time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv) == NULL ||
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv) == 0)
        snprintf(date, sizeof date, "unknown");
    sb_printf(sb, "{\n  \"tool\": \"sextant bench\",\n  \"version\": ");
    json_str(sb, sx_version());
    sb_printf(sb, ",\n  \"date\": ");
    json_str(sb, date);
    sb_printf(sb, ",\n  \"dataset\": {\"base\": ");
    json_str(sb, b->base_path);
    sb_printf(sb, ", \"query\": ");
    json_str(sb, b->query_path);
    sb_printf(sb, ", \"gt\": ");
    json_str(sb, b->gt_path);
    sb_printf(sb, ", \"gt_dist\": ");
    json_str(sb, b->gt_dist_path);
    sb_printf(sb, ", \"gt_source\": ");
    json_str(sb, b->gt.source);
    sb_printf(sb, "},\n  \"n\": %zu,\n  \"dim\": %zu,\n  \"nq\": %zu,\n  \"metric\": ", b->base.n,
              b->base.dim, b->queries.n);
    json_str(sb, cli_metric_name(b->metric));
    sb_printf(sb, ",\n  \"index\": ");
    json_str(sb, b->index_name);
    sb_printf(sb, ",\n  \"build_params\": {");
    for (size_t j = 0; j < b->build.n; j++) {
        sb_printf(sb, "%s", j ? ", " : "");
        json_str(sb, b->build.p[j].key);
        sb_printf(sb, ": ");
        json_param_value(sb, b->build.p[j].value);
    }
    sb_printf(sb, "},\n  \"index_params\": ");
    json_str(sb, b->index_params);
    sb_printf(sb, ",\n  \"insert_s\": ");
    json_num(sb, b->insert_s);
    sb_printf(sb, ",\n  \"build_s\": ");
    json_num(sb, b->build_s);
    sb_printf(sb, ",\n  \"load_s\": ");
    json_num(sb, b->insert_s + b->build_s);
    sb_printf(sb,
              ",\n  \"memory_bytes\": %" PRIu64 ",\n  \"index_memory_bytes\": %" PRIu64
              ",\n  \"collection_memory_bytes\": %" PRIu64 ",\n  \"simd\": ",
              total_memory(b), b->index_memory, b->collection_memory);
    json_str(sb, sx_simd_level());
    sb_printf(sb, ",\n  \"threads\": %u,\n  \"batch\": %zu,\n  \"k\": %u,\n  \"recall_kind\": ",
              b->threads, b->batch, b->k);
    json_str(sb, b->gt.dists != NULL ? "distance-threshold" : "id-set");
    sb_printf(sb, ",\n  \"runs\": ");
    json_runs(sb, b, &b->ours);
    sb_printf(sb, ",\n  \"peers\": {");
    if (b->have_peer) {
        sb_printf(sb, "\"hnswlib\": {\"build_s\": ");
        json_num(sb, b->peer.build_s);
        sb_printf(sb, ", \"memory_bytes\": %" PRIu64 ", \"runs\": ", b->peer.memory_bytes);
        json_runs(sb, b, &b->peer);
        sb_printf(sb, "}");
    }
    sb_printf(sb, "}");
    if (!b->have_peer && b->peer_note[0] != '\0') {
        sb_printf(sb, ",\n  \"peers_note\": ");
        json_str(sb, b->peer_note);
    }
    if (b->have_peer)
        json_ratios(sb, b);
    sb_printf(sb, "\n}\n");
}

static int write_json(const bench *b)
{
    sbuf sb = { 0 };
    json_document(&sb, b);
    if (sb.oom) {
        free(sb.p);
        return cli_fail("bench", "out of memory formatting the JSON report");
    }
    FILE *f = fopen(b->json_path, "w");
    if (f == NULL) {
        free(sb.p);
        return cli_fail("bench", "cannot create %s: %s", b->json_path, strerror(errno));
    }
    size_t wrote = fwrite(sb.p, 1, sb.len, f);
    free(sb.p);
    if (wrote != sb.len) {
        int e = errno;
        (void)fclose(f);
        return cli_fail("bench", "error writing %s: %s", b->json_path, strerror(e));
    }
    if (fclose(f) != 0)
        return cli_fail("bench", "error writing %s: %s", b->json_path, strerror(errno));
    fprintf(stderr, "sextant bench: wrote %s\n", b->json_path);
    return 0;
}

static void print_summary(const bench *b)
{
    char hb[32], hi[32], hc[32];
    double load_s = b->insert_s + b->build_s;
    printf("\nsextant bench: %s (%zu x %zu), %zu queries, metric %s, k=%u, simd %s\n",
           ds_basename(b->base_path), b->base.n, b->base.dim, b->queries.n,
           cli_metric_name(b->metric), b->k, sx_simd_level());
    printf("index %s (%s), recall: %s, ground truth %s\n", b->index_type,
           b->index_params[0] ? b->index_params : "defaults",
           b->gt.dists != NULL ? "distance threshold (d_k + 1e-3)" : "id set", b->gt.source);
    printf("load: insert %.2f s (%.0f rows/s), build %.2f s, total %.2f s\n", b->insert_s,
           b->insert_s > 0 ? (double)b->base.n / b->insert_s : 0.0, b->build_s, load_s);
    printf("memory: %s (collection, of which index %s; raw vectors %s)\n",
           cli_human_bytes(total_memory(b), hb, sizeof hb),
           cli_human_bytes(b->index_memory, hi, sizeof hi),
           cli_human_bytes((uint64_t)b->base.n * b->base.dim * sizeof(float), hc, sizeof hc));
    if (!b->have_peer) {
        if (b->peer_note[0] != '\0')
            printf("peers: %s\n", b->peer_note);
        return;
    }
    printf("hnswlib: build %.2f s, memory %s\n", b->peer.build_s,
           cli_human_bytes(b->peer.memory_bytes, hb, sizeof hb));
    printf("\n%-18s %7s  %11s %11s %11s %11s %9s\n", "vs hnswlib", "threads", "recall", "hnswlib",
           "QPS", "hnswlib", "QPS ratio");
    size_t n = b->ours.n_runs < b->peer.n_runs ? b->ours.n_runs : b->peer.n_runs;
    for (size_t i = 0; i < n; i++) {
        const run_result *o = &b->ours.runs[i], *p = &b->peer.runs[i];
        printf("%-18s %7u  %11.4f %11.4f %11.1f %11.1f %9.2f\n", o->params[0] ? o->params : "-",
               o->threads, o->recall, p->recall, o->qps, p->qps, p->qps > 0 ? o->qps / p->qps : 0);
    }
    double qo = qps_at_recall(&b->ours, RECALL_TARGET);
    double qp = qps_at_recall(&b->peer, RECALL_TARGET);
    if (isnan(qo) || isnan(qp)) {
        char so[32] = "n/a", sp[32] = "n/a";
        if (!isnan(qo))
            snprintf(so, sizeof so, "%.1f", qo);
        if (!isnan(qp))
            snprintf(sp, sizeof sp, "%.1f", qp);
        printf("QPS at recall %.2f (interpolated): not bracketed by the runs of both (sextant "
               "%s, hnswlib %s)\n",
               RECALL_TARGET, so, sp);
    } else {
        printf("QPS at recall %.2f (interpolated): sextant %.1f, hnswlib %.1f, ratio %.2f\n",
               RECALL_TARGET, qo, qp, qo / qp);
    }
    printf("build time ratio (sextant / hnswlib): %.2f (load time ratio %.2f)\n",
           b->peer.build_s > 0 ? b->build_s / b->peer.build_s : 0.0,
           b->peer.build_s > 0 ? load_s / b->peer.build_s : 0.0);
}

/* ------------------------------------------------------------------ entry */

static void bench_fini(bench *b)
{
    sx_collection_release(b->c);
    b->c = NULL;
    sx_db_close(b->db);
    b->db = NULL;
    if (b->data_is_temp && b->data_dir[0] != '\0') {
        if (nftw(b->data_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            fprintf(stderr, "sextant bench: warning: could not remove %s: %s\n", b->data_dir,
                    strerror(errno));
    }
    ds_free(&b->base);
    ds_free(&b->queries);
    free(b->gt.ids);
    free(b->gt.dists);
    free(b->ours.runs);
    free(b->peer.runs);
    cli_params_fini(&b->build);
}

int cli_bench(int argc, char **argv)
{
    bench *b = calloc(1, sizeof *b);
    if (b == NULL)
        return cli_fail("bench", "out of memory");
    b->metric = SX_METRIC_L2;
    b->k = 10;
    b->threads = 1;
    b->runs = 1;
    b->batch = 1000;
    b->peers = -1;
    int rc = parse_args(b, argc, argv);
    if (rc != 0) {
        if (rc == CLI_EXIT_USAGE)
            fprintf(stderr, "Run 'sextant bench --help' for usage.\n");
        else
            rc = CLI_EXIT_OK;
        goto out;
    }
    rc = CLI_EXIT_FAIL;
    if (load_inputs(b) != 0 || setup_db(b) != 0 || insert_base(b) != 0 || ensure_gt(b) != 0 ||
        build_index(b) != 0 || run_ours(b) != 0 || run_peer(b) != 0)
        goto out;
    print_summary(b);
    if (b->json_path != NULL && write_json(b) != 0)
        goto out;
    rc = CLI_EXIT_OK;
out:
    bench_fini(b);
    free(b);
    return rc;
}
