/*
 * bench.c: `sextant bench`: load a dataset (or generate one) into a fresh collection, build an
 * index, and measure recall@k, QPS and latency per search parameter, optionally beside the peer
 * libraries hnswlib and FAISS (bench/peers).
 *
 * Phases (each a function below), and what is timed:
 *
 *   1. load_inputs    read base, queries, optional ground truth (datasets.h; an HDF5 file in
 *                     the ann-benchmarks layout supplies all three and the metric), or
 *                     generate them with --synthetic / --case (datasets.h: generators sx-gmm-1,
 *                     sx-gmm-rot-1, sx-gmm-rot-unit-1; ground truth cached under --cache-dir);
 *                     dataset.data_hash; not timed
 *   1b. resolve_params  fill in the build params the peers must share (Milvus defaults, table
 *                     `kinds` below) and the default sweep of the index's search param
 *   2. setup_db       open --data (or a fresh mkdtemp directory, removed at the end) and create
 *                     collection "bench": int64 key `id` = row number (not auto-id), vector
 *                     field `vector`, the metric; with filter cases an int64 `label` = id
 *   3. insert_base    sx_insert in batches of --batch rows                       -> insert_s
 *   4. ensure_gt      without --gt: exact top-k through the engine, in batches of GT_BATCH
 *                     queries (the index does not exist yet, so every search is exact and the
 *                     engine can use BLAS); the distances of the ids found are then recomputed
 *                     in double and each row re-sorted (rescore_set). Written to --gt / --gt-dist
 *                     when those name files that do not exist yet (a cache for the next run);
 *                     not timed
 *   5. build_index    sx_index_create + sx_flush + sx_index_wait                  -> build_s
 *                     load_s = insert_s + build_s (VectorDBBench's load_duration)
 *   6. run_ours       per value of the swept search param (the other --search-param keys are
 *                     constants sent with every query): every query once, one query per call,
 *                     from one thread (ann-benchmarks' protocol), then with --threads N > 1 the
 *                     same queries from N threads at once (a separate run entry, threads = N).
 *                     Latency per query with CLOCK_MONOTONIC around sx_search + reading the
 *                     hits + sx_rowset_free; QPS = nq / wall time; best of --runs passes. The
 *                     index's cumulative read counters (sx_index_info.read_ios / read_bytes)
 *                     are read before and after each run: their difference / queries is the
 *                     run's io_per_query and bytes_read_per_query (DISKANN)
 *   7. run_peers      for each peer of the index kind (table `kinds`): dlopen its shim, build
 *                     the library's counterpart index with the same build params and threads on
 *                     the same vectors (timed: train + add), then the same sweep, mapped to the
 *                     library's names (ef -> efSearch, nprobe -> nprobe, refine_k -> k_factor)
 *   8. run_cases      VectorDBBench-style cases (schema 2): the performance case (serial pass
 *                     at k = 100: recall@10/@100, NDCG@10/@100, p50/p95/p99; then one
 *                     concurrency level per --concurrency value, bench_cases.c), one filter
 *                     case per --filter-rate (an int64 `label` field, `label >= n * rate`, its
 *                     ground truth computed with the filter in phase 4), and the streaming case
 *                     (--stream-rate: a second database whose rows arrive at a fixed rate while
 *                     --stream-concurrency threads search; recall and p99 per stage)
 *   9. report         table on stdout, --json file (docs/BENCH-RESULTS.md), --html report
 *
 * Ground-truth cache (synthetic data, or any data with --cache-dir): STEM-gt.ivecs,
 * STEM-gt-dist.fvecs and STEM.meta under the cache directory, STEM naming every input the
 * ground truth depends on (generator or data hash, n, dim, seed, nq, metric, k; "-f<rate>" for a
 * filter case, "-s<stage>of<S>" for a streaming stage). STEM.meta holds the FNV-1a 64 hashes of
 * the two files: a cache whose files do not hash to it (truncated, edited, half-written) is
 * removed and computed again (JSON gt_cache.status "recomputed"); a good one is a "hit".
 *
 * I/O profile (issue 5). sx_io_profile_get is snapshotted around phases 3, 5 and 6 and the
 * report shows the differences per engine phase and backend (local files, S3): operations and
 * bytes read and written, mean operation size, the size histogram, and IOPS = operations / the
 * phase's wall time. The engine tags the phases itself (inserts and flushes INSERT, the builder
 * thread BUILD, searches QUERY); the bench also tags its own thread around the flush it issues in
 * phase 5, since that flush writes the ingested rows' segment. Phase walls: insert = insert_s +
 * the flush inside phase 5 (flush_s), optimize = build_s - flush_s, query = the summed wall time
 * of every timed run of ours. The ground-truth searches of phase 4 fall between the snapshots
 * and are not counted. I/O the engine does on an untagged thread shows up as "other" (no IOPS).
 *
 * Peers: hnsw / hnsw_sq -> hnswlib HierarchicalNSW and FAISS IndexHNSWFlat; ivf_flat -> FAISS
 * IndexIVFFlat; ivf_sq8 -> FAISS IndexIVFScalarQuantizer(QT_8bit); ivf_pq -> FAISS IndexIVFPQ;
 * both wrapped in IndexRefineFlat when refine is on (refine_k = its k_factor); flat and diskann
 * have none (FAISS has no on-disk graph index and DiskANN is not packaged).
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
 * id-set overlap |returned[0:k] ∩ gt[0:k]| / k. A peer's distances are not trusted to follow
 * any convention: its hits are re-scored from the vectors in double.
 *
 * Invariants:
 *   1. Every peer runs exactly the settings ours ran, in the same order (setting x threads), so
 *      run i of a peer pairs with run i of ours in the ratio tables; a peer that cannot map the
 *      swept key is skipped whole (with a note), never run partially.
 *   2. At most one --search-param key carries several values (the swept key); all others are
 *      constants.
 *   3. Peers run one at a time and are freed before the next is built (memory at 1M scale).
 *
 * Threading: the main thread does everything except the concurrent search runs, where worker
 * threads take query numbers from an atomic counter (relaxed: the counter only hands out
 * distinct indices; results are published to the main thread by pthread_join). Each worker
 * writes only its own queries' slots. The first error is kept under a mutex.
 *
 * Rejected: timing a batched sx_search (nq > 1) as "QPS": that measures throughput of the
 * engine's own thread pool, not the per-query latency ann-benchmarks and VectorDBBench report.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../bench/peers/peer.h"
#include "bench_cases.h"
#include "bench_generate.h"
#include "bench_metrics.h"
#include "cli.h"
#include "datasets.h"
#include "progress.h"
#include "report.h"

#define ERR_LEN        1024
#define MAX_SP_VALUES  64
#define MAX_SP_KEYS    8
#define MAX_PEERS      2
#define GT_BATCH       256
#define GT_MIN_K       100
#define RECALL_EPS     1e-3
#define RECALL_TARGET  0.95
#define COLLECTION     "bench"
#define PEER_SO        "sx_peer_hnswlib.so"
#define FAISS_SO       "sx_peer_faiss.so"
#define SYN_DEFAULT_NQ 1000
#define MAX_LEVELS     32
#define MAX_FILTERS    8
#define MAX_CASES      (2 + MAX_FILTERS)
#define CASE_K         100 /* VectorDBBench's K_DEFAULT */
#define DEF_DURATION   30
#define DEF_INTERVAL   5
#define DEF_STREAM_C   5
#define DEF_STAGES     10
#define PRESET_NQ      1000
/* Milvus's defaults for the build params a peer must share (milvus-rest-v2.md §8). */
#define DEF_HNSW_M     16
#define DEF_HNSW_EFC   200
#define DEF_IVF_NLIST  128
#define DEF_PQ_NBITS   8

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
    char params[64]; /* the swept setting, "nprobe=8"; "" without search params */
    size_t setting;  /* index into the swept key's values; SIZE_MAX without search params */
    unsigned threads;
    double recall, qps, p50_ms, p99_ms;
    double p95_ms, ndcg;                  /* schema 2 */
    double io_per_query, bytes_per_query; /* NAN when not measured */
    double wall_s;                        /* summed wall time of all passes (I/O profile IOPS) */
    char plan[48]; /* filtered sweeps: the plan most segment searches got, with its share */
} run_result;

typedef struct sys_result {
    const char *name; /* "hnswlib", "faiss" (JSON key) */
    char desc[192];   /* the library's index, "IndexIVFFlat(nlist=128)" */
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

/* One --search-param key and its values (one value for a constant key). */
typedef struct sp_key {
    char key[64];
    const char *vals[MAX_SP_VALUES];
    size_t n;
    char store[1024];
} sp_key;

typedef enum peer_lib { PEER_NONE = 0, PEER_HNSWLIB = 1, PEER_FAISS = 2 } peer_lib;

typedef enum sweep_rule {
    SWEEP_NONE = 0,
    SWEEP_GE_K = 1,    /* values below k are dropped (ef, search_list) */
    SWEEP_LE_NLIST = 2 /* values above nlist are dropped (nprobe) */
} sweep_rule;

/* An index kind `--index` accepts: the engine type, its default sweep and its peers. */
typedef struct index_kind {
    const char *name; /* --index value */
    const char *type; /* engine type (sx_index_create) */
    const char *sweep_key;
    const char *sweep_vals;
    sweep_rule rule;

    struct {
        peer_lib lib;
        int faiss_kind; /* sx_peer_faiss_kind */
    } peers[MAX_PEERS];
} index_kind;

static const index_kind kinds[] = {
    { "flat", "FLAT", NULL, NULL, SWEEP_NONE, { { PEER_NONE, 0 }, { PEER_NONE, 0 } } },
    { "hnsw",
      "HNSW",
      "ef",
      "10,20,40,80,120,200",
      SWEEP_GE_K,
      { { PEER_HNSWLIB, 0 }, { PEER_FAISS, SX_PEER_FAISS_HNSW_FLAT } } },
    { "ivf_flat",
      "IVF_FLAT",
      "nprobe",
      "1,2,4,8,16,32,64",
      SWEEP_LE_NLIST,
      { { PEER_FAISS, SX_PEER_FAISS_IVF_FLAT }, { PEER_NONE, 0 } } },
    { "ivf_sq8",
      "IVF_SQ8",
      "nprobe",
      "1,2,4,8,16,32,64",
      SWEEP_LE_NLIST,
      { { PEER_FAISS, SX_PEER_FAISS_IVF_SQ8 }, { PEER_NONE, 0 } } },
    { "ivf_pq",
      "IVF_PQ",
      "nprobe",
      "1,2,4,8,16,32,64",
      SWEEP_LE_NLIST,
      { { PEER_FAISS, SX_PEER_FAISS_IVF_PQ }, { PEER_NONE, 0 } } },
    { "hnsw_sq",
      "HNSW_SQ",
      "ef",
      "10,20,40,80,120,200",
      SWEEP_GE_K,
      { { PEER_HNSWLIB, 0 }, { PEER_FAISS, SX_PEER_FAISS_HNSW_FLAT } } },
    { "diskann",
      "DISKANN",
      "search_list",
      "10,20,30,40,50,75,100,150,200",
      SWEEP_GE_K,
      { { PEER_NONE, 0 }, { PEER_NONE, 0 } } },
    /* GPU types (issue 7): built on the GPU when one is usable, else by the CPU twin
     * (JSON build_device); peers as their CPU counterparts */
    { "gpu_cagra",
      "GPU_CAGRA",
      "itopk_size",
      "16,32,64,128,256",
      SWEEP_GE_K,
      { { PEER_HNSWLIB, 0 }, { PEER_NONE, 0 } } },
    { "gpu_ivf_flat",
      "GPU_IVF_FLAT",
      "nprobe",
      "1,2,4,8,16,32,64",
      SWEEP_LE_NLIST,
      { { PEER_FAISS, SX_PEER_FAISS_IVF_FLAT }, { PEER_NONE, 0 } } },
    { "gpu_ivf_pq",
      "GPU_IVF_PQ",
      "nprobe",
      "1,2,4,8,16,32,64",
      SWEEP_LE_NLIST,
      { { PEER_FAISS, SX_PEER_FAISS_IVF_PQ }, { PEER_NONE, 0 } } },
    { "gpu_brute_force",
      "GPU_BRUTE_FORCE",
      NULL,
      NULL,
      SWEEP_NONE,
      { { PEER_NONE, 0 }, { PEER_NONE, 0 } } },
};

/* --case presets: generated data at the sizes of VectorDBBench's cases (benchmarks.md §2). */
typedef struct case_preset {
    const char *name;
    size_t n, dim;
    ds_gen gen;
    sx_metric metric;
    const char *about;
} case_preset;

static const case_preset presets[] = {
    { "gen-1m-128", 1000000, 128, DS_GEN_ANISOTROPIC, SX_METRIC_L2, "SIFT-sized, l2" },
    { "gen-500k-768", 500000, 768, DS_GEN_COSINE, SX_METRIC_COSINE, "Cohere-like, cosine" },
    { "gen-100k-1536", 100000, 1536, DS_GEN_COSINE, SX_METRIC_COSINE, "OpenAI-like, cosine" },
};

/* sx_search_plan's counts, in its order: the names in the output and the JSON */
#define N_PLANS 5
static const char *const plan_names[N_PLANS] = { "index", "index_filtered", "exact_filtered",
                                                 "exact_unindexed", "exact_other" };

/* Adds one search's plan to the counters (relaxed: counts read after the threads joined). */
static void add_plan(_Atomic uint64_t *acc, const sx_search_plan *p)
{
    const uint32_t got[N_PLANS] = { p->index, p->index_filtered, p->exact_filtered,
                                    p->exact_unindexed, p->exact_other };
    /* only the counts that moved: every search thread adds here, and a contended atomic per
     * plan kind and search would weigh on our multi-thread QPS and not on the peers' */
    for (size_t i = 0; i < N_PLANS; i++)
        if (got[i] != 0)
            atomic_fetch_add_explicit(&acc[i], got[i], memory_order_relaxed);
}

/* "exact_filtered" (every segment search got it) or "index_filtered 62%": the commonest. */
static void plan_label(_Atomic uint64_t *acc, char *out, size_t len)
{
    uint64_t total = 0, best = 0;
    size_t bi = 0;
    for (size_t i = 0; i < N_PLANS; i++) {
        uint64_t v = atomic_load_explicit(&acc[i], memory_order_relaxed);
        total += v;
        if (v > best) {
            best = v;
            bi = i;
        }
    }
    if (total == 0)
        snprintf(out, len, "-");
    else if (best == total)
        snprintf(out, len, "%s", plan_names[bi]);
    else
        snprintf(out, len, "%s %.0f%%", plan_names[bi], 100.0 * (double)best / (double)total);
}

/* One case's results (JSON cases[]). */
typedef struct case_result {
    char name[32];
    const char *type; /* "performance", "filter", "streaming" */
    char filter[96];  /* "" = none */
    double filter_rate;
    uint64_t kept_rows;
    uint64_t plan[N_PLANS]; /* segment searches of the serial pass by plan (case_ctx.plan) */
    uint32_t k;
    const gt_set *gt; /* ground truth of the serial pass (streaming: the full one) */
    double insert_s, optimize_s;
    double recall, ndcg, recall10, ndcg10, recall100, ndcg100;
    size_t s_nq;
    double s_qps, s_avg, s_p50, s_p95, s_p99, s_max; /* ms, serial pass */
    bc_stats levels[MAX_LEVELS];
    size_t n_levels;
    /* streaming */
    bc_stage *stages;
    unsigned n_stages;
    unsigned stream_conc;
    double stream_rate, stream_insert_s;
    uint64_t stream_segment_bytes;
} case_result;

typedef __typeof__(&sx_peer_hnsw_new) peer_new_fn;
typedef __typeof__(&sx_peer_hnsw_add) peer_add_fn;
typedef __typeof__(&sx_peer_hnsw_set_ef) peer_set_ef_fn;
typedef __typeof__(&sx_peer_hnsw_search) peer_search_fn;
typedef __typeof__(&sx_peer_hnsw_memory) peer_memory_fn;
typedef __typeof__(&sx_peer_hnsw_free) peer_free_fn;
typedef __typeof__(&sx_peer_faiss_abi) faiss_abi_fn;
typedef __typeof__(&sx_peer_faiss_new) faiss_new_fn;
typedef __typeof__(&sx_peer_faiss_build) faiss_build_fn;
typedef __typeof__(&sx_peer_faiss_set) faiss_set_fn;
typedef __typeof__(&sx_peer_faiss_search) faiss_search_fn;
typedef __typeof__(&sx_peer_faiss_search_range) faiss_search_range_fn;
typedef __typeof__(&sx_peer_faiss_memory) faiss_memory_fn;
typedef __typeof__(&sx_peer_faiss_describe) faiss_describe_fn;
typedef __typeof__(&sx_peer_faiss_free) faiss_free_fn;

/* A loaded shim: one of the two function sets is filled, by lib. */
typedef struct peer_api {
    peer_lib lib;
    void *dl;
    char path[PATH_MAX];
    /* hnswlib */
    peer_new_fn hnsw_new;
    peer_add_fn add;
    peer_set_ef_fn set_ef;
    peer_search_fn search;
    peer_memory_fn memory;
    peer_free_fn free_index;
    /* FAISS */
    faiss_new_fn f_new;
    faiss_build_fn f_build;
    faiss_set_fn f_set;
    faiss_search_fn f_search;
    faiss_search_range_fn f_search_range;
    faiss_memory_fn f_memory;
    faiss_describe_fn f_describe;
    faiss_free_fn f_free;
} peer_api;

typedef struct bench {
    /* options */
    const char *base_path, *query_path, *gt_path, *gt_dist_path, *data_opt, *json_path;
    const char *synthetic_opt, *cache_opt;
    sx_metric metric;
    const index_kind *kind;
    cli_params build;
    sp_key sp[MAX_SP_KEYS];
    size_t n_sp_keys;
    long sweep;  /* index of the swept key in sp, -1 without search params */
    size_t n_sp; /* settings: values of the swept key (0 without search params) */
    uint32_t k;
    unsigned threads, runs;
    size_t nq_limit, base_limit, batch;
    uint64_t segment_bytes;      /* --segment-bytes (0: one segment for all rows) */
    uint64_t build_memory_limit; /* --build-memory-limit (0: unlimited) */
    int peers;                   /* -1 auto, 0 off, 1 on */
    const char *storage_url;     /* --storage s3://BUCKET/PREFIX (NULL: local files) */
    const char *s3_endpoint, *s3_region;
    uint64_t cache_mb;     /* --cache-mb: cache_limit_bytes in MiB (0: none) */
    uint64_t memory_limit; /* --memory-limit: memory_limit_bytes (0: the cgroup default) */
    /* --import URL: the base vectors come from a bulk-import job reading URL (s3://BUCKET/KEY,
     * a key of --storage, or a local path) instead of sx_insert from RAM; they are never loaded
     * into the bench's memory (no peers, no filter or streaming cases) */
    const char *import_url;

    /* cases (schema 2) */
    const case_preset *preset; /* --case, NULL = custom */
    ds_gen gen;                /* --generate */
    bool gen_given, metric_given, seed_given;
    uint64_t seed_opt;
    const char *html_path;
    char *html_json; /* json_path derived from --html when --json is absent (owned) */
    unsigned conc[MAX_LEVELS];
    size_t n_conc;
    bool conc_given;
    uint64_t duration_s, interval_s;
    cli_params case_params; /* --case-param; empty: chosen from the sweep */
    uint32_t case_k;
    double filter_rates[MAX_FILTERS];
    int filter_plan;         /* --filter-plan: sx_search_req.filter_plan of every search */
    size_t qbatch;           /* --query-batch: queries per sx_search in our sweep (0, 1: one) */
    unsigned search_threads; /* --search-threads: sx_db_options.search_threads (0: the default) */
    size_t n_filters;
    double stream_rate;
    unsigned stream_conc, stream_stages;
    bool has_label; /* the schema has the int64 `label` field */
    gt_set filter_gt[MAX_FILTERS];
    gt_set *stage_gt; /* stream_stages entries */
    sx_param case_sp[MAX_SP_KEYS];
    char case_sp_store[MAX_SP_KEYS][2][64];
    size_t n_case_sp;
    case_result cases[MAX_CASES];
    size_t n_cases;
    char data_hash[40];
    char cache_stem[PATH_MAX]; /* "" = no ground-truth cache */
    const char *gt_cache_status;
    bool is_hdf5;
    char hdf5_query[PATH_MAX], hdf5_gt[PATH_MAX], hdf5_gt_dist[PATH_MAX];
    char build_device[48];

    /* synthetic data (--synthetic N,DIM[,SEED]) */
    bool is_synthetic;
    size_t syn_n, syn_dim;
    uint64_t syn_seed;
    char syn_base_label[96], syn_query_label[96];
    char cache_dir[PATH_MAX];
    char gt_cache[PATH_MAX], gt_dist_cache[PATH_MAX];

    /* state */
    ds_matrix base, queries;
    gt_set gt;
    bool gt_write_ids, gt_write_dists;
    bool gt_mismatch; /* the GT distances disagree with the vectors (detect_gt_form) */
    char data_dir[PATH_MAX];
    bool data_is_temp;
    sx_db *db;
    sx_collection *c;
    double insert_s, build_s;
    /* --import: the job (rows, file bytes, segments, seconds) and the merge of its segments */
    uint64_t import_rows, import_bytes;
    uint32_t import_segments, merged_segments;
    double import_job_s, merge_s;
    int64_t id_offset; /* the engine's key of base row r is r + id_offset (auto ids: 1) */
    double flush_s;    /* the sx_flush inside build_index (part of build_s) */
    double query_s;    /* summed wall time of ours' timed runs */
    /* I/O profile: differences over phases 3, 5 and 6, indexed by engine phase */
    sx_io_profile io_prof;
    double reopen_s;         /* --storage --cache-mb: open of a fresh directory from the store */
    sx_cache_stats cache_st; /* after the query runs */
    uint64_t index_memory, collection_memory, index_disk;
    bool io_reported; /* the index's read counters moved during some run */
    char index_params[256];
    sys_result ours;
    sys_result peer[MAX_PEERS];
    /* filtered sweeps (filter cases with peers): per filter case, the sweep with its filter,
     * single-thread, ours and FAISS's (IDSelectorRange) */
    sys_result fs_ours[MAX_FILTERS], fs_faiss[MAX_FILTERS];
    size_t n_peer;
    char peer_note[2048];
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
        "usage: sextant bench (--base FILE --query FILE | --synthetic N,DIM[,SEED] | --case NAME)\n"
        "                     [options]\n"
        "       sextant bench --import URL --query FILE [--gt FILE] [options]  (the seed\n"
        "                     pipeline: raw file -> bulk import -> index -> query-ready)\n"
        "       sextant bench generate --synthetic N,DIM[,SEED] --out DIR  (the generated data "
        "and\n"
        "                     its exact ground truth as files, in bounded memory; --help there)\n"
        "       sextant bench report|compare RESULT.json...  (HTML report, comparison table)\n"
        "\n"
        "  --base FILE            base vectors (.fvecs .bvecs .npy IDX .gz, or .hdf5 in the\n"
        "                         ann-benchmarks layout: FILE.hdf5 = train; --query, --gt and\n"
        "                         --gt-dist then default to its test, neighbors and distances,\n"
        "                         and --metric to its `distance` attribute)\n"
        "  --query FILE           query vectors (FILE.hdf5:test picks an HDF5 dataset)\n"
        "  --import URL           load the base vectors with a bulk-import job (sx_import_run)\n"
        "                         instead of sx_insert: s3://BUCKET/KEY (endpoint from\n"
        "                         --s3-endpoint or $SEXTANT_S3_ENDPOINT), a key of --storage,\n"
        "                         or a local path; .fvecs .bvecs .npy .hdf5. The vectors never\n"
        "                         enter the bench's memory: without --gt the ground truth is\n"
        "                         exact search through the engine; no peers. Reports the job's\n"
        "                         rows/s and MB/s, the merge of its segments, the build, and\n"
        "                         raw -> query-ready, with the I/O profile per phase\n"
        "  --synthetic N,DIM[,S]  generate N x DIM vectors instead (seed S, default 1) and --nq\n"
        "                         queries from the same distribution (default %d); ground truth\n"
        "                         cached under --cache-dir\n"
        "  --generate KIND        the generator of --synthetic: clustered (sx-gmm-1, default),\n"
        "                         anisotropic (sx-gmm-rot-1: rotated components), cosine\n"
        "                         (sx-gmm-rot-unit-1: anisotropic, shared mean, unit length)\n"
        "  --case NAME            a preset: gen-1m-128 (anisotropic, l2), gen-500k-768 and\n"
        "                         gen-100k-1536 (cosine generator and metric); 1000 queries,\n"
        "                         concurrency 1,5,10,20 unless given\n"
        "  --seed S               generator seed for --case or --synthetic (default 1)\n"
        "  --cache-dir DIR        ground-truth cache (also --cache; default: bench-cache next to\n"
        "                         the sextant binary, i.e. build/bench-cache); file datasets are\n"
        "                         cached only when this is given (keyed by the data's hash)\n"
        "  --gt FILE              ground-truth ids (.ivecs); computed through the engine if\n"
        "                         absent, and cached to FILE if FILE does not exist yet\n"
        "  --gt-dist FILE         ground-truth distances (.fvecs): distance-threshold recall\n"
        "  --metric M             l2 | ip | cosine (default l2)\n"
        "  --index T              flat | hnsw | ivf_flat | ivf_sq8 | ivf_pq | hnsw_sq | diskann\n"
        "                         | gpu_cagra | gpu_ivf_flat | gpu_ivf_pq | gpu_brute_force\n"
        "                         (default hnsw; GPU_* report build_device in the JSON)\n"
        "  --param K=V            index build parameter, repeatable (M=16, efConstruction=200,\n"
        "                         nlist=1024, m=32, max_degree=56, ...)\n"
        "  --search-param K=V,..  search parameter, repeatable; one key may list several values\n"
        "                         (one run each: nprobe=1,2,4,8), the others are constants sent\n"
        "                         with every query (refine=true). Default sweep when the index's\n"
        "                         key is not given: hnsw/hnsw_sq ef=10..200, ivf_* nprobe=1..64,\n"
        "                         diskann search_list=10..200\n"
        "  --k N                  neighbours per query (default 10)\n"
        "  --threads N            build threads, and an extra N-thread search run (default 1)\n"
        "  --query-batch N        our sweep searches N queries per sx_search call (a batch,\n"
        "                         split across the engine's search threads; latency\n"
        "                         percentiles are then per batch). Default 1\n"
        "  --search-threads N     the engine's threads for one batch (sx_db_options\n"
        "                         .search_threads; default: all cores)\n"
        "  --nq N                 use the first N queries\n"
        "  --limit N              use the first N base vectors\n"
        "  --batch N              rows per sx_insert (default 1000)\n"
        "  --runs N               passes per setting, best QPS kept (default 1)\n"
        "  --segment-bytes N      seal segments at N vector bytes (default: one segment for all\n"
        "                         rows, so the index compares with one library index)\n"
        "  --build-memory-limit N bytes one index build may allocate (index_build_memory_limit)\n"
        "  --memory-limit SIZE    memory budget of the database (memory_limit_bytes): 3G, 512M,\n"
        "                         bytes or 'unlimited' (default: the cgroup's limit less 1/8)\n"
        "  --data DIR             database directory (default: a temporary one, removed)\n"
        "  --storage URL          keep sealed segments and index files in an object store:\n"
        "                         s3://BUCKET/PREFIX (default: local files in --data);\n"
        "                         credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY\n"
        "  --s3-endpoint URL      S3 endpoint (MinIO, Ceph RGW, s3rver: http://HOST:PORT;\n"
        "                         default $SEXTANT_S3_ENDPOINT, else AWS)\n"
        "  --s3-region R          S3 region for request signing (default $AWS_REGION, else\n"
        "                         us-east-1)\n"
        "  --cache-mb N           cache_limit_bytes = N MiB. With --storage, after the build the\n"
        "                         database is reopened in a fresh directory from the store\n"
        "                         (timed) and queried there: DISKANN then reads its sectors\n"
        "                         with ranged GETs through an N MiB block cache\n"
        "  --json FILE            write the results as JSON (docs/BENCH-RESULTS.md)\n"
        "  --html FILE            and an HTML report of them (needs --json, or writes FILE.json)\n"
        "  --peers | --no-peers   compare with hnswlib (build/" PEER_SO ") and FAISS\n"
        "                         (build/" FAISS_SO "); default: when the shims are found\n"
        "\n"
        "Cases (VectorDBBench style, after the sweep; results under \"cases\" in the JSON):\n"
        "  every run: a serial pass at k=100 (recall@10/@100, NDCG@10/@100, p50/p95/p99)\n"
        "  --concurrency LIST     concurrency levels, one --duration each, in-process threads\n"
        "                         (default: none; 1,5,10,20 with --case; 0 = none)\n"
        "  --duration S           seconds per level (default %d)\n"
        "  --interval S           seconds between progress blocks (default %d)\n"
        "  --case-param K=V       search param of the cases, repeatable (default: the first\n"
        "                         sweep setting reaching recall 0.95, else the last)\n"
        "  --case-k N             top-k of the cases (default 100, capped by the ground truth)\n"
        "  --filter-rate LIST     filter cases: an int64 field `label` = row number, filter\n"
        "                         `label >= n * rate` (rate = fraction removed: 0.01 keeps 99%%,\n"
        "                         0.99 keeps 1%%); ground truth computed with the filter;\n"
        "                         with peers, every swept setting is also run with each\n"
        "                         filter for us and FAISS (IDSelectorRange): filtered sweeps\n"
        "  --filter-plan P        auto (default: the cost estimate per segment), index or\n"
        "                         exact: how filtered searches use the index (the plan is\n"
        "                         printed per case and per filtered-sweep setting)\n"
        "  --stream-rate R        streaming case: insert at R rows/s into a second collection\n"
        "                         while --stream-concurrency threads (default %d) search;\n"
        "                         recall and p99 per stage (--stream-stages, default %d)\n"
        "\n"
        "Remote mode (a REST load generator, Milvus Go-benchmark style; `--target` selects it):\n"
        "  sextant bench --target http://HOST:PORT --collection NAME --query FILE [--gt FILE]\n"
        "                [--concurrency 1,10,20] [--duration 30] [--warmup 0] [--interval 5]\n"
        "                [--limit 10 (top-k)] [--nq 1 (vectors per request)] [--ann-field vector]\n"
        "                [--search-params '{\"ef\":64}'] [--metric L2|IP|COSINE] [--filter EXPR]\n"
        "                [--token T] [--db default] [--timeout 60] [--json FILE]\n"
        "  (`sextant bench --target URL --help` explains each option)\n",
        SYN_DEFAULT_NQ, DEF_DURATION, DEF_INTERVAL, DEF_STREAM_C, DEF_STAGES);
}

static const index_kind *find_kind(const char *name)
{
    for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++) {
        if (strcasecmp(name, kinds[j].name) == 0)
            return &kinds[j];
    }
    return NULL;
}

static sp_key *find_sp(bench *b, const char *key)
{
    for (size_t j = 0; j < b->n_sp_keys; j++) {
        if (strcmp(b->sp[j].key, key) == 0)
            return &b->sp[j];
    }
    return NULL;
}

/* One --search-param KEY=V1,V2,...; a repeated key replaces the earlier values. */
static int parse_search_params(bench *b, const char *cmd, const char *s)
{
    const char *eq = strchr(s, '=');
    if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof b->sp[0].key) {
        fprintf(stderr, "sextant %s: --search-param '%s' is not KEY=V1,V2,...\n", cmd, s);
        return -1;
    }
    char key[sizeof b->sp[0].key];
    memcpy(key, s, (size_t)(eq - s));
    key[eq - s] = '\0';
    sp_key *k = find_sp(b, key);
    if (k == NULL) {
        if (b->n_sp_keys == MAX_SP_KEYS) {
            fprintf(stderr, "sextant %s: more than %d --search-param keys\n", cmd, MAX_SP_KEYS);
            return -1;
        }
        k = &b->sp[b->n_sp_keys++];
        snprintf(k->key, sizeof k->key, "%s", key);
    }
    int n = cli_split_list(cmd, "--search-param", eq + 1, k->store, sizeof k->store, k->vals,
                           MAX_SP_VALUES);
    if (n < 0)
        return -1;
    k->n = (size_t)n;
    return 0;
}

/* --synthetic N,DIM[,SEED] */
static int parse_synthetic(bench *b, const char *cmd, const char *s)
{
    char store[128];
    const char *items[3];
    uint64_t n, dim, seed = 1;
    int cnt = cli_split_list(cmd, "--synthetic", s, store, sizeof store, items, 3);
    if (cnt < 0)
        return -1;
    if (cnt < 2) {
        fprintf(stderr, "sextant %s: --synthetic '%s' is not N,DIM[,SEED]\n", cmd, s);
        return -1;
    }
    if (cli_parse_u64(cmd, "--synthetic N", items[0], 1, UINT32_MAX, &n) != 0 ||
        cli_parse_u64(cmd, "--synthetic DIM", items[1], 1, SX_MAX_DIM, &dim) != 0 ||
        (cnt == 3 && cli_parse_u64(cmd, "--synthetic SEED", items[2], 0, UINT64_MAX, &seed) != 0))
        return -1;
    b->is_synthetic = true;
    b->syn_n = (size_t)n;
    b->syn_dim = (size_t)dim;
    b->syn_seed = seed;
    return 0;
}

/* A list of numbers in (0, 1): --filter-rate 0.01,0.99 */
static int parse_rates(bench *b, const char *cmd, const char *s)
{
    char store[256];
    const char *items[MAX_FILTERS];
    int cnt = cli_split_list(cmd, "--filter-rate", s, store, sizeof store, items, MAX_FILTERS);
    if (cnt < 0)
        return -1;
    for (int j = 0; j < cnt; j++) {
        char *end = NULL;
        errno = 0;
        double r = strtod(items[j], &end);
        if (errno != 0 || end == items[j] || *end != '\0' || !(r > 0.0 && r < 1.0)) {
            fprintf(stderr, "sextant %s: --filter-rate '%s' is not a number in (0, 1)\n", cmd,
                    items[j]);
            return -1;
        }
        b->filter_rates[j] = r;
    }
    b->n_filters = (size_t)cnt;
    return 0;
}

/* --concurrency 1,5,10,20 (0 = none) */
static int parse_conc(bench *b, const char *cmd, const char *s)
{
    char store[512];
    const char *items[MAX_LEVELS];
    int cnt = cli_split_list(cmd, "--concurrency", s, store, sizeof store, items, MAX_LEVELS);
    if (cnt < 0)
        return -1;
    b->n_conc = 0;
    b->conc_given = true;
    for (int j = 0; j < cnt; j++) {
        uint64_t v;
        if (cli_parse_u64(cmd, "--concurrency", items[j], 0, 1024, &v) != 0)
            return -1;
        if (v > 0)
            b->conc[b->n_conc++] = (unsigned)v;
    }
    return 0;
}

static const case_preset *find_preset(const char *name)
{
    for (size_t j = 0; j < sizeof presets / sizeof presets[0]; j++) {
        if (strcmp(name, presets[j].name) == 0)
            return &presets[j];
    }
    return NULL;
}

/* After the options of parse_args: applies a --case preset, derives the synthetic and HTML
 * settings, and checks the combinations. Returns 0 or CLI_EXIT_USAGE. */
static int finish_args(bench *b, const char *index_name)
{
    if (b->preset != NULL) {
        if (b->is_synthetic) {
            fprintf(stderr, "sextant bench: --case and --synthetic exclude each other\n");
            return CLI_EXIT_USAGE;
        }
        b->is_synthetic = true;
        b->syn_n = b->preset->n;
        b->syn_dim = b->preset->dim;
        b->syn_seed = b->seed_given ? b->seed_opt : 1;
        if (!b->gen_given)
            b->gen = b->preset->gen;
        if (!b->metric_given)
            b->metric = b->preset->metric;
        if (b->nq_limit == 0)
            b->nq_limit = PRESET_NQ;
        if (!b->conc_given) {
            static const unsigned dflt[] = { 1, 5, 10, 20 };
            for (size_t j = 0; j < 4; j++)
                b->conc[j] = dflt[j];
            b->n_conc = 4;
        }
    } else if (b->seed_given && b->is_synthetic) {
        b->syn_seed = b->seed_opt;
    }
    if (b->gen_given && !b->is_synthetic) {
        fprintf(stderr, "sextant bench: --generate needs --synthetic or --case\n");
        return CLI_EXIT_USAGE;
    }
    if (b->is_synthetic) {
        if (b->base_path != NULL || b->query_path != NULL || b->base_limit > 0) {
            fprintf(stderr, "sextant bench: --synthetic replaces --base, --query and --limit\n");
            return CLI_EXIT_USAGE;
        }
        snprintf(b->syn_base_label, sizeof b->syn_base_label, "synthetic:%s:%zux%zu:seed=%" PRIu64,
                 ds_gen_name(b->gen), b->syn_n, b->syn_dim, b->syn_seed);
        snprintf(b->syn_query_label, sizeof b->syn_query_label, "%s:queries", b->syn_base_label);
        b->base_path = b->syn_base_label;
        b->query_path = b->syn_query_label;
    } else if (b->import_url != NULL) {
        if (b->base_path != NULL || b->query_path == NULL || b->base_limit > 0) {
            fprintf(stderr, "sextant bench: --import reads the base vectors from its URL: give "
                            "--query (and --gt), not --base or --limit\n");
            return CLI_EXIT_USAGE;
        }
        if (b->peers == 1 || b->n_filters > 0 || b->stream_rate > 0) {
            fprintf(stderr, "sextant bench: --import keeps the base vectors out of the bench's "
                            "memory: no --peers, --filter-rate or --stream-rate with it\n");
            return CLI_EXIT_USAGE;
        }
        b->peers = 0;
        b->base_path = b->import_url; /* for the report */
    } else if (b->base_path != NULL && b->query_path == NULL && ds_is_hdf5(b->base_path)) {
        b->is_hdf5 = true;
    } else if (b->base_path == NULL || b->query_path == NULL) {
        fprintf(stderr, "sextant bench: --base and --query (or --synthetic) are required\n");
        return CLI_EXIT_USAGE;
    }
    if (b->gt_dist_path != NULL && b->gt_path == NULL) {
        fprintf(stderr, "sextant bench: --gt-dist needs --gt (the ids the distances belong to)\n");
        return CLI_EXIT_USAGE;
    }
    b->kind = find_kind(index_name != NULL ? index_name : "hnsw");
    if (b->kind == NULL) {
        fprintf(stderr,
                "sextant bench: --index: '%s' is not flat, hnsw, ivf_flat, ivf_sq8, ivf_pq, "
                "hnsw_sq, diskann, gpu_cagra, gpu_ivf_flat, gpu_ivf_pq or gpu_brute_force\n",
                index_name);
        return CLI_EXIT_USAGE;
    }
    if (b->html_path != NULL && b->json_path == NULL) {
        size_t len = strlen(b->html_path);
        b->html_json = malloc(len + 6);
        if (b->html_json == NULL)
            return CLI_EXIT_USAGE;
        memcpy(b->html_json, b->html_path, len + 1);
        if (len > 5 && strcmp(b->html_json + len - 5, ".html") == 0)
            b->html_json[len - 5] = '\0';
        memcpy(b->html_json + strlen(b->html_json), ".json", 6);
        b->json_path = b->html_json;
    }
    if (b->stream_rate > 0 && b->stream_stages > 0 && (size_t)b->stream_stages > 100) {
        fprintf(stderr, "sextant bench: --stream-stages is at most 100\n");
        return CLI_EXIT_USAGE;
    }
    size_t multi = 0;
    for (size_t j = 0; j < b->n_sp_keys; j++)
        multi += b->sp[j].n > 1;
    if (multi > 1) {
        fprintf(stderr, "sextant bench: only one --search-param key may list several values (the "
                        "swept one); the others are constants\n");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* Returns 0, CLI_EXIT_USAGE, or -1 for --help (exit 0). */
/* The numeric options (a table of names and ranges): 1 when argv[*i] was one (taken), 0 when
 * it was not, -1 on a bad value (the message is printed). */
static int parse_num_opt(bench *b, int argc, char **argv, int *i, const char *cmd)
{
    const char *v = NULL;
    uint64_t u = 0;
    int r;

    struct {
        const char *name;
        uint64_t lo, hi;
    } nums[] = { { "--k", 1, SX_MAX_TOPK },
                 { "--threads", 1, 1024 },
                 { "--nq", 1, UINT32_MAX },
                 { "--limit", 1, UINT64_MAX },
                 { "--batch", 1, 10000000 },
                 { "--runs", 1, 100 },
                 { "--segment-bytes", 1, UINT64_MAX },
                 { "--build-memory-limit", 1, UINT64_MAX },
                 { "--cache-mb", 1, UINT64_MAX >> 20 },
                 { "--duration", 1, 86400 },
                 { "--interval", 1, 3600 },
                 { "--case-k", 1, SX_MAX_TOPK },
                 { "--stream-concurrency", 1, 1024 },
                 { "--stream-stages", 1, 100 },
                 { "--seed", 0, UINT64_MAX },
                 { "--query-batch", 1, 65536 },
                 { "--search-threads", 1, 1024 } };

    bool matched = false;
    for (size_t j = 0; j < sizeof nums / sizeof nums[0] && !matched; j++) {
        r = cli_take(argc, argv, i, cmd, nums[j].name, &v);
        if (r == 0)
            continue;
        if (r < 0 || cli_parse_u64(cmd, nums[j].name, v, nums[j].lo, nums[j].hi, &u) != 0)
            return -1;
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
        case 6:
            b->segment_bytes = u;
            break;
        case 7:
            b->build_memory_limit = u;
            break;
        case 8:
            b->cache_mb = u;
            break;
        case 9:
            b->duration_s = u;
            break;
        case 10:
            b->interval_s = u;
            break;
        case 11:
            b->case_k = (uint32_t)u;
            break;
        case 12:
            b->stream_conc = (unsigned)u;
            break;
        case 13:
            b->stream_stages = (unsigned)u;
            break;
        case 14:
            b->seed_opt = u;
            b->seed_given = true;
            break;
        case 15:
            b->qbatch = (size_t)u;
            break;
        case 16:
            b->search_threads = (unsigned)u;
            break;
        default:
            b->runs = (unsigned)u;
            break;
        }
    }
    return matched ? 1 : 0;
}

static int parse_args(bench *b, int argc, char **argv)
{
    const char *cmd = "bench", *v = NULL;
    const char *index_name = NULL;
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
            (r = cli_take(argc, argv, &i, cmd, "--import", &b->import_url)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--query", &b->query_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--gt", &b->gt_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--gt-dist", &b->gt_dist_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--data", &b->data_opt)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--json", &b->json_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--cache", &b->cache_opt)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--cache-dir", &b->cache_opt)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--html", &b->html_path)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--storage", &b->storage_url)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--s3-endpoint", &b->s3_endpoint)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--s3-region", &b->s3_region)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--index", &index_name)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--metric", &v)) != 0) {
            if (r < 0 || cli_parse_metric(cmd, v, &b->metric) != 0)
                return CLI_EXIT_USAGE;
            b->metric_given = true;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--generate", &v)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            if (ds_gen_parse(v, &b->gen) != 0) {
                fprintf(stderr,
                        "sextant bench: --generate: '%s' is not clustered, anisotropic or "
                        "cosine\n",
                        v);
                return CLI_EXIT_USAGE;
            }
            b->gen_given = true;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--case", &v)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            b->preset = find_preset(v);
            if (b->preset == NULL) {
                fprintf(stderr,
                        "sextant bench: --case: '%s' is not gen-1m-128, gen-500k-768 or "
                        "gen-100k-1536\n",
                        v);
                return CLI_EXIT_USAGE;
            }
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--case-param", &v)) != 0) {
            if (r < 0 || cli_params_add(&b->case_params, cmd, v) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--concurrency", &v)) != 0) {
            if (r < 0 || parse_conc(b, cmd, v) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--filter-rate", &v)) != 0) {
            if (r < 0 || parse_rates(b, cmd, v) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--filter-plan", &v)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            if (strcmp(v, "auto") == 0) {
                b->filter_plan = SX_PLAN_AUTO;
            } else if (strcmp(v, "index") == 0) {
                b->filter_plan = SX_PLAN_INDEX;
            } else if (strcmp(v, "exact") == 0) {
                b->filter_plan = SX_PLAN_EXACT;
            } else {
                fprintf(stderr, "sextant %s: --filter-plan '%s': auto, index or exact\n", cmd, v);
                return CLI_EXIT_USAGE;
            }
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--stream-rate", &v)) != 0) {
            char *end = NULL;
            if (r < 0)
                return CLI_EXIT_USAGE;
            errno = 0;
            b->stream_rate = strtod(v, &end);
            if (errno != 0 || end == v || *end != '\0' || !(b->stream_rate > 0) ||
                b->stream_rate > 1e9) {
                fprintf(stderr, "sextant bench: --stream-rate '%s' is not a positive rows/s\n", v);
                return CLI_EXIT_USAGE;
            }
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
        if ((r = cli_take(argc, argv, &i, cmd, "--synthetic", &v)) != 0) {
            if (r < 0 || parse_synthetic(b, cmd, v) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }

        if ((r = cli_take(argc, argv, &i, cmd, "--memory-limit", &v)) != 0) {
            if (r < 0 || cli_parse_size(cmd, "--memory-limit", v, 16u << 20, &b->memory_limit) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }

        if ((r = parse_num_opt(b, argc, argv, &i, cmd)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        fprintf(stderr, "sextant bench: unknown argument '%s'\n", argv[i]);
        return CLI_EXIT_USAGE;
    }
    return finish_args(b, index_name);
}

/* ------------------------------------------------------------------ inputs and ground truth */

static bool file_exists(const char *path)
{
    if (path != NULL && ds_is_hdf5(path))
        return ds_hdf5_has(path) != 0;
    return path != NULL && access(path, F_OK) == 0;
}

/* ------------------------------------------------------------------ ground-truth cache */

/* STEM.meta: "sextant-gt-cache 1\nids HEX\ndists HEX\n", the FNV-1a 64 of the two files. */
static int meta_path(const char *stem, const char *ext, char *out, size_t len)
{
    int n = snprintf(out, len, "%s%s", stem, ext);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* A line's hexadecimal checksum ("%016" PRIx64 then the newline). strtoull, not sscanf's %llx,
 * whose result is undefined for a number past 64 bits. */
static bool hex_u64(const char *s, unsigned long long *out)
{
    char *end = NULL;
    if (!isxdigit((unsigned char)*s))
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    if (errno != 0 || (*end != '\n' && *end != '\0'))
        return false;
    *out = v;
    return true;
}

/* 1 when STEM-gt.ivecs, STEM-gt-dist.fvecs and STEM.meta exist and the files hash to the
 * meta's values; 0 otherwise (message in why). */
static int cache_verify(const char *stem, char *why, size_t why_len)
{
    char ids[PATH_MAX], dists[PATH_MAX], meta[PATH_MAX], err[ERR_LEN];
    if (meta_path(stem, "-gt.ivecs", ids, sizeof ids) != 0 ||
        meta_path(stem, "-gt-dist.fvecs", dists, sizeof dists) != 0 ||
        meta_path(stem, ".meta", meta, sizeof meta) != 0) {
        snprintf(why, why_len, "path too long");
        return 0;
    }
    FILE *f = fopen(meta, "r");
    if (f == NULL) {
        snprintf(why, why_len, "no checksum file %s", meta);
        return 0;
    }
    char line[128];
    unsigned long long want_ids = 0, want_dists = 0;
    int got = 0;
    if (fgets(line, sizeof line, f) != NULL && strcmp(line, "sextant-gt-cache 1\n") == 0) {
        while (fgets(line, sizeof line, f) != NULL) {
            if (strncmp(line, "ids ", 4) == 0 && hex_u64(line + 4, &want_ids))
                got |= 1;
            else if (strncmp(line, "dists ", 6) == 0 && hex_u64(line + 6, &want_dists))
                got |= 2;
        }
    }
    (void)fclose(f);
    if (got != 3) {
        snprintf(why, why_len, "%s is not a checksum file", meta);
        return 0;
    }
    uint64_t h_ids, h_dists;
    if (ds_hash_file(ids, &h_ids, err, sizeof err) != 0 ||
        ds_hash_file(dists, &h_dists, err, sizeof err) != 0) {
        snprintf(why, why_len, "%s", err);
        return 0;
    }
    if (h_ids != (uint64_t)want_ids || h_dists != (uint64_t)want_dists) {
        snprintf(why, why_len, "checksum mismatch (%s: %016" PRIx64 ", want %016llx)",
                 h_ids != (uint64_t)want_ids ? ids : dists,
                 h_ids != (uint64_t)want_ids ? h_ids : h_dists,
                 h_ids != (uint64_t)want_ids ? want_ids : want_dists);
        return 0;
    }
    return 1;
}

/* Writes STEM.meta for the two files just written (tmp + rename). */
static int cache_seal(const char *stem)
{
    char ids[PATH_MAX], dists[PATH_MAX], meta[PATH_MAX], tmp[PATH_MAX + 32], err[ERR_LEN];
    uint64_t h_ids, h_dists;
    if (meta_path(stem, "-gt.ivecs", ids, sizeof ids) != 0 ||
        meta_path(stem, "-gt-dist.fvecs", dists, sizeof dists) != 0 ||
        meta_path(stem, ".meta", meta, sizeof meta) != 0)
        return cli_fail("bench", "cache path too long: %s", stem);
    if (ds_hash_file(ids, &h_ids, err, sizeof err) != 0 ||
        ds_hash_file(dists, &h_dists, err, sizeof err) != 0)
        return cli_fail("bench", "%s", err);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", meta, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return cli_fail("bench", "cannot create %s: %s", tmp, strerror(errno));
    int w = fprintf(f, "sextant-gt-cache 1\nids %016" PRIx64 "\ndists %016" PRIx64 "\n", h_ids,
                    h_dists);
    if (w < 0 || fclose(f) != 0 || rename(tmp, meta) != 0) {
        (void)unlink(tmp);
        return cli_fail("bench", "cannot write %s: %s", meta, strerror(errno));
    }
    return 0;
}

/* Removes a cache entry's three files. */
static void cache_drop(const char *stem)
{
    static const char *const ext[] = { "-gt.ivecs", "-gt-dist.fvecs", ".meta" };
    char p[PATH_MAX];
    for (size_t j = 0; j < 3; j++) {
        if (meta_path(stem, ext[j], p, sizeof p) == 0)
            (void)unlink(p);
    }
}

/* Status of a cache entry about to be used: "hit" (verified), "recomputed" (files there but
 * failing the checksum: removed), "miss" (nothing there). */
static const char *cache_check(const char *stem)
{
    char ids[PATH_MAX], why[PATH_MAX + 128];
    if (meta_path(stem, "-gt.ivecs", ids, sizeof ids) != 0)
        return "miss";
    char dists[PATH_MAX], meta[PATH_MAX];
    (void)meta_path(stem, "-gt-dist.fvecs", dists, sizeof dists);
    (void)meta_path(stem, ".meta", meta, sizeof meta);
    bool any = access(ids, F_OK) == 0 || access(dists, F_OK) == 0 || access(meta, F_OK) == 0;
    if (!any)
        return "miss";
    if (cache_verify(stem, why, sizeof why) == 1)
        return "hit";
    fprintf(stderr, "sextant bench: ground-truth cache %s is corrupt (%s): recomputing it\n", stem,
            why);
    cache_drop(stem);
    return "recomputed";
}

/* Detects the form of GT distances by recomputing the first queries' nearest distances. */
/* The vectors of base rows ids[0], ids[stride], ... (n of them) through sx_get (keys are row +
 * id_offset), for --import where the bench does not hold the base. *out owned (free). */
static int fetch_rows(bench *b, const int32_t *ids, size_t stride, size_t n, float **out)
{
    const char *cmd = "bench";
    size_t dim = b->base.dim;
    int64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    float *v = malloc((n ? n : 1) * dim * sizeof *v);
    if (keys == NULL || v == NULL) {
        free(keys);
        free(v);
        return cli_fail(cmd, "out of memory");
    }
    for (size_t j = 0; j < n; j++)
        keys[j] = (int64_t)ids[j * stride] + b->id_offset;
    sx_keys k = { .n = n, .ints = keys };
    const char *fields[2] = { "id", "vector" };
    sx_rowset *rs = NULL;
    sx_status st = sx_get(b->c, &k, fields, 2, &rs);
    int rc = 0;
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "read back ground-truth rows", st);
    } else if (rs->n_rows != n || rs->n_cols != 2 || rs->dims[1] != dim) {
        rc = cli_fail(cmd, "read back %zu of %zu ground-truth rows (ids not in the collection?)",
                      rs->n_rows, n);
    } else {
        const int64_t *got = rs->cols[0].data;
        for (size_t j = 0; j < n && rc == 0; j++)
            if (got[j] != keys[j])
                rc = cli_fail(cmd, "sx_get returned key %lld for %lld", (long long)got[j],
                              (long long)keys[j]);
        memcpy(v, rs->cols[1].data, n * dim * sizeof *v);
    }
    sx_rowset_free(rs);
    free(keys);
    if (rc != 0) {
        free(v);
        return rc;
    }
    *out = v;
    return 0;
}

static int detect_gt_form(bench *b)
{
    static const dist_form l2_forms[] = { DF_L2, DF_SQL2 };
    static const dist_form sim_forms[] = { DF_SIM, DF_COSDIST, DF_NEGIP };
    const dist_form *forms = b->metric == SX_METRIC_L2 ? l2_forms : sim_forms;
    size_t n_forms = b->metric == SX_METRIC_L2 ? 2 : (b->metric == SX_METRIC_COSINE ? 2 : 3);
    double err_sum[3] = { 0, 0, 0 }, scale = 0;
    size_t probe = b->queries.n < 100 ? b->queries.n : 100;
    float *fetched = NULL; /* --import: the probed base rows, read back through the engine */
    if (b->base.f == NULL && fetch_rows(b, b->gt.ids, b->gt.k, probe, &fetched) != 0)
        return CLI_EXIT_FAIL;
    for (size_t q = 0; q < probe; q++) {
        int32_t id = b->gt.ids[q * b->gt.k];
        const float *v = fetched ? fetched + q * b->base.dim : b->base.f + (size_t)id * b->base.dim;
        double raw = exact_sim_or_sq(b->metric, b->queries.f + q * b->queries.dim, v, b->base.dim);
        double file = (double)b->gt.dists[q * b->gt.k];
        scale += fabs(file);
        for (size_t f = 0; f < n_forms; f++)
            err_sum[f] += fabs(to_form(raw, forms[f]) - file);
    }
    free(fetched);
    size_t best = 0;
    for (size_t f = 1; f < n_forms; f++) {
        if (err_sum[f] < err_sum[best])
            best = f;
    }
    b->gt.form = forms[best];
    double rel = err_sum[best] / (scale > 0 ? scale : 1.0);
    fprintf(stderr, "sextant bench: %s holds %s distances (mean relative error %.2g)\n",
            b->gt_dist_path, form_names[b->gt.form], rel);
    b->gt_mismatch = rel > 1e-3;
    if (b->gt_mismatch && !b->is_synthetic)
        fprintf(stderr,
                "sextant bench: warning: %s does not match the distances recomputed from the "
                "vectors; recall will be wrong (another dataset, or --limit cut the base?)\n",
                b->gt_dist_path);
    return 0;
}

/* Creates `path` and its missing parents (mode 0755). 0, or -1 with errno set. */
static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    int len = snprintf(tmp, sizeof tmp, "%s", path);
    if (len <= 0 || (size_t)len >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* --cache, or bench-cache next to the running binary (build/bench-cache for build/sextant), or
 * build/bench-cache under the working directory when /proc/self/exe cannot be read. */
static void resolve_cache_dir(bench *b)
{
    if (b->cache_opt != NULL) {
        snprintf(b->cache_dir, sizeof b->cache_dir, "%s", b->cache_opt);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = NULL;
    if (n > 0) {
        exe[n] = '\0';
        slash = strrchr(exe, '/');
    }
    if (slash != NULL) {
        *slash = '\0';
        snprintf(b->cache_dir, sizeof b->cache_dir, "%.*s/bench-cache", PATH_MAX - 16, exe);
    } else {
        snprintf(b->cache_dir, sizeof b->cache_dir, "build/bench-cache");
    }
}

/* The rows the computed ground truth keeps per query (compute_gt). */
static size_t gt_columns(const bench *b)
{
    size_t gk = b->base.n < GT_MIN_K ? b->base.n : GT_MIN_K;
    return gk < b->k ? b->k : gk;
}

/* Points --gt / --gt-dist at the cache entry STEM = CACHE_DIR/what-q<nq>-<metric>-k<k>
 * (`what` names the data: generator, n, dim and seed, or the data hash), after checking it
 * (cache_check: a corrupt entry is removed so that it is recomputed). */
static int setup_gt_cache(bench *b, const char *what)
{
    const char *cmd = "bench";
    resolve_cache_dir(b);
    if (mkdir_p(b->cache_dir) != 0)
        return cli_fail(cmd, "cannot create the cache directory %s: %s", b->cache_dir,
                        strerror(errno));
    char stem[PATH_MAX];
    int len = snprintf(stem, sizeof stem, "%s/%s-q%zu-%s-k%zu", b->cache_dir, what, b->queries.n,
                       cli_metric_name(b->metric), gt_columns(b));
    if (len < 0 || (size_t)len + 32 >= sizeof stem)
        return cli_fail(cmd, "cache path too long: %s", b->cache_dir);
    snprintf(b->cache_stem, sizeof b->cache_stem, "%s", stem);
    snprintf(b->gt_cache, sizeof b->gt_cache, "%s-gt.ivecs", stem);
    snprintf(b->gt_dist_cache, sizeof b->gt_dist_cache, "%s-gt-dist.fvecs", stem);
    b->gt_cache_status = cache_check(stem);
    b->gt_path = b->gt_cache;
    b->gt_dist_path = b->gt_dist_cache;
    fprintf(stderr, "sextant bench: ground truth cache %s (%s)\n", b->gt_path, b->gt_cache_status);
    return 0;
}

/* dataset.data_hash: FNV-1a 64 over the base and query values. */
static void hash_data(bench *b)
{
    uint64_t h = ds_hash_matrix(ds_hash_init(), &b->base);
    h = ds_hash_matrix(h, &b->queries);
    snprintf(b->data_hash, sizeof b->data_hash, "fnv1a64:%016" PRIx64, h);
}

/* Generates the --synthetic base and queries; points --gt / --gt-dist at the cache unless
 * given. The cache names carry every input the ground truth depends on. */
static int load_synthetic(bench *b)
{
    char err[ERR_LEN];
    const char *cmd = "bench";
    size_t nq = b->nq_limit > 0 ? b->nq_limit : SYN_DEFAULT_NQ;
    double t0 = cli_now();
    if (ds_generate(b->gen, b->syn_n, b->syn_dim, b->syn_seed, 0, b->syn_n, &b->base, err,
                    sizeof err) != 0 ||
        ds_generate(b->gen, b->syn_n, b->syn_dim, b->syn_seed, 1, nq, &b->queries, err,
                    sizeof err) != 0)
        return cli_fail(cmd, "%s", err);
    hash_data(b);
    fprintf(stderr,
            "sextant bench: generated %s (%s) base %zu x %zu, queries %zu (seed %" PRIu64
            ", %.1f s, %s)\n",
            ds_gen_kind(b->gen), ds_gen_name(b->gen), b->base.n, b->base.dim, b->queries.n,
            b->syn_seed, cli_now() - t0, b->data_hash);
    if (b->gt_path != NULL)
        return 0;
    char what[160];
    snprintf(what, sizeof what, "%s-n%zu-d%zu-s%" PRIu64, ds_gen_name(b->gen), b->syn_n, b->syn_dim,
             b->syn_seed);
    return setup_gt_cache(b, what);
}

/* An ann-benchmarks HDF5 file: query, ground truth and metric from the file unless given. */
static void resolve_hdf5(bench *b)
{
    char file[PATH_MAX], dist[64];
    snprintf(file, sizeof file, "%s", b->base_path);
    char *colon = strrchr(file, ':');
    if (colon != NULL && colon > strrchr(file, '.'))
        *colon = '\0';
    snprintf(b->hdf5_query, sizeof b->hdf5_query, "%.*s:test", PATH_MAX - 16, file);
    b->query_path = b->hdf5_query;
    if (b->gt_path == NULL) {
        snprintf(b->hdf5_gt, sizeof b->hdf5_gt, "%.*s:neighbors", PATH_MAX - 16, file);
        if (ds_hdf5_has(b->hdf5_gt)) {
            b->gt_path = b->hdf5_gt;
            snprintf(b->hdf5_gt_dist, sizeof b->hdf5_gt_dist, "%.*s:distances", PATH_MAX - 16,
                     file);
            if (b->gt_dist_path == NULL && ds_hdf5_has(b->hdf5_gt_dist))
                b->gt_dist_path = b->hdf5_gt_dist;
        }
    }
    if (!b->metric_given && ds_hdf5_distance(file, dist, sizeof dist) == 0) {
        if (strcmp(dist, "angular") == 0 || strcmp(dist, "cosine") == 0)
            b->metric = SX_METRIC_COSINE;
        else if (strcmp(dist, "dot") == 0 || strcmp(dist, "ip") == 0)
            b->metric = SX_METRIC_IP;
        else
            b->metric = SX_METRIC_L2;
        fprintf(stderr, "sextant bench: %s: distance \"%s\" -> metric %s\n", file, dist,
                cli_metric_name(b->metric));
    }
}

/* --gt-dist into b->gt.dists: float distances, one row of gt.k per query. */
static int load_gt_dists(bench *b)
{
    char err[ERR_LEN];
    ds_matrix dists = { 0 };
    if (ds_load(b->gt_dist_path, b->queries.n, &dists, err, sizeof err) != 0)
        return cli_fail("bench", "%s", err);
    if (dists.type != DS_F32 || dists.n < b->queries.n || dists.dim != b->gt.k) {
        ds_free(&dists);
        return cli_fail("bench", "%s does not match %s: want %zu rows of %zu float distances",
                        b->gt_dist_path, b->gt_path, b->queries.n, b->gt.k);
    }
    b->gt.dists = dists.f;
    return 0;
}

static int load_inputs(bench *b)
{
    char err[ERR_LEN];
    const char *cmd = "bench";
    if (b->is_synthetic) {
        if (load_synthetic(b) != 0)
            return CLI_EXIT_FAIL;
    } else if (b->import_url != NULL) {
        /* the base stays where it is: its row count is known after the import (import_base) */
        double t0 = cli_now();
        if (ds_load_float(b->query_path, b->nq_limit, &b->queries, err, sizeof err) != 0)
            return cli_fail(cmd, "%s", err);
        b->base.dim = b->queries.dim;
        fprintf(stderr,
                "sextant bench: queries %zu x %zu (read in %.1f s); base vectors by bulk import "
                "from %s\n",
                b->queries.n, b->queries.dim, cli_now() - t0, b->import_url);
    } else {
        double t0 = cli_now();
        if (b->is_hdf5)
            resolve_hdf5(b);
        if (ds_load_float(b->base_path, b->base_limit, &b->base, err, sizeof err) != 0 ||
            ds_load_float(b->query_path, b->nq_limit, &b->queries, err, sizeof err) != 0)
            return cli_fail(cmd, "%s", err);
        if (b->base.dim == b->queries.dim)
            hash_data(b);
        fprintf(stderr, "sextant bench: base %zu x %zu, queries %zu x %zu (read in %.1f s, %s)\n",
                b->base.n, b->base.dim, b->queries.n, b->queries.dim, cli_now() - t0, b->data_hash);
        if (b->gt_path == NULL && b->cache_opt != NULL && b->base.dim == b->queries.dim) {
            char what[96];
            snprintf(what, sizeof what, "data-%s-n%zu-d%zu", b->data_hash + 8, b->base.n,
                     b->base.dim);
            if (setup_gt_cache(b, what) != 0)
                return CLI_EXIT_FAIL;
        }
    }
    if (b->base.dim != b->queries.dim)
        return cli_fail(cmd, "base dimension %zu differs from query dimension %zu", b->base.dim,
                        b->queries.dim);
    if (b->base.dim > SX_MAX_DIM)
        return cli_fail(cmd, "dimension %zu exceeds SX_MAX_DIM (%u)", b->base.dim, SX_MAX_DIM);
    if (b->import_url == NULL && (size_t)b->k > b->base.n)
        return cli_fail(cmd, "--k %u exceeds the %zu base vectors", b->k, b->base.n);
    if (!file_exists(b->gt_path)) {
        b->gt_write_ids = b->gt_path != NULL;
        b->gt_write_dists = b->gt_dist_path != NULL;
        return 0;
    }
    ds_matrix ids = { 0 };
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
    if (b->import_url != NULL) { /* checked against the rows after the import */
        if (b->gt_dist_path == NULL || !file_exists(b->gt_dist_path))
            return 0; /* recall by ids: distances cannot be recomputed without the base */
        return load_gt_dists(b);
    }
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
    if (load_gt_dists(b) != 0)
        return CLI_EXIT_FAIL;
    if (detect_gt_form(b) != 0)
        return CLI_EXIT_FAIL;
    if (b->gt_mismatch && b->gt_path == b->gt_cache) {
        /* A cache written from other data (an older generator): recompute and replace it. */
        fprintf(stderr,
                "sextant bench: %s is stale (distances differ from the data); "
                "recomputing it\n",
                b->gt_path);
        free(b->gt.ids);
        free(b->gt.dists);
        memset(&b->gt, 0, sizeof b->gt);
        b->gt_write_ids = b->gt_write_dists = true;
        b->gt_cache_status = "recomputed";
    }
    return 0;
}

/* ------------------------------------------------------------------ parameters */

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

static bool is_true(const char *v)
{
    return v != NULL && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

/* A constant search param's value (the first value when it is the swept key), or NULL. */
static const char *sp_value(const bench *b, const char *key)
{
    for (size_t j = 0; j < b->n_sp_keys; j++) {
        if (strcmp(b->sp[j].key, key) == 0)
            return b->sp[j].vals[0];
    }
    return NULL;
}

/* Refinement is on when `refine` is true as a search param (IVF_SQ8 / IVF_PQ: the index then
 * re-ranks ceil(k * refine_k) candidates exactly), or as a build param for a future index
 * that takes it there. */
static bool refine_on(const bench *b)
{
    return is_true(cli_params_get(&b->build, "refine")) || is_true(sp_value(b, "refine"));
}

/* Default IVF_PQ m: the largest divisor of dim not above dim / 4 (4-dimensional sub-spaces,
 * dim / 4 bytes per code: 32 for 128-d, 196 for 784-d). */
static long default_pq_m(size_t dim)
{
    size_t target = dim / 4 > 0 ? dim / 4 : 1;
    for (size_t m = target; m > 1; m--) {
        if (dim % m == 0)
            return (long)m;
    }
    return 1;
}

static int add_default_param(bench *b, const char *key, long value)
{
    if (cli_params_get(&b->build, key) != NULL)
        return 0;
    char kv[96];
    snprintf(kv, sizeof kv, "%s=%ld", key, value);
    return cli_params_add(&b->build, "bench", kv);
}

/* Adds the index kind's default sweep as a new search-param key, dropping the values the rule
 * excludes (ef / search_list below k, nprobe above nlist). */
static int add_default_sweep(bench *b)
{
    const index_kind *kd = b->kind;
    if (b->n_sp_keys == MAX_SP_KEYS)
        return cli_fail("bench", "too many --search-param keys to add the default %s sweep",
                        kd->sweep_key);
    long nlist = build_param(b, "nlist", DEF_IVF_NLIST);
    char list[512] = "";
    size_t off = 0;
    const char *p = kd->sweep_vals;
    while (p != NULL && *p != '\0') {
        long v = strtol(p, NULL, 10);
        bool keep = kd->rule == SWEEP_GE_K ? v >= (long)b->k
                                           : (kd->rule == SWEEP_LE_NLIST ? v <= nlist : true);
        if (keep) {
            int w = snprintf(list + off, sizeof list - off, "%s%ld", off ? "," : "", v);
            if (w > 0 && (size_t)w < sizeof list - off)
                off += (size_t)w;
        }
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    if (off == 0)
        snprintf(list, sizeof list, "%ld", kd->rule == SWEEP_GE_K ? (long)b->k : nlist);
    sp_key *k = &b->sp[b->n_sp_keys];
    snprintf(k->key, sizeof k->key, "%s", kd->sweep_key);
    int n = cli_split_list("bench", "default sweep", list, k->store, sizeof k->store, k->vals,
                           MAX_SP_VALUES);
    if (n < 0)
        return CLI_EXIT_FAIL;
    k->n = (size_t)n;
    b->n_sp_keys++;
    return 0;
}

/* Phase 1b: the build params every system must share, and the sweep. */
static int resolve_params(bench *b)
{
    const char *t = b->kind->name;
    int rc = 0;
    if (strcmp(t, "hnsw") == 0 || strcmp(t, "hnsw_sq") == 0) {
        rc |= add_default_param(b, "M", DEF_HNSW_M);
        rc |= add_default_param(b, "efConstruction", DEF_HNSW_EFC);
    }
    if (strncmp(t, "ivf_", 4) == 0 || strncmp(t, "gpu_ivf_", 8) == 0)
        rc |= add_default_param(b, "nlist", DEF_IVF_NLIST);
    if (strcmp(t, "ivf_pq") == 0 || strcmp(t, "gpu_ivf_pq") == 0)
        rc |= add_default_param(b, "m", default_pq_m(b->base.dim));
    if (rc != 0)
        return CLI_EXIT_FAIL;
    b->sweep = -1;
    for (size_t j = 0; j < b->n_sp_keys; j++) {
        if (b->sp[j].n > 1)
            b->sweep = (long)j;
    }
    if (b->sweep < 0 && b->kind->sweep_key != NULL) {
        for (size_t j = 0; j < b->n_sp_keys; j++) {
            if (strcmp(b->sp[j].key, b->kind->sweep_key) == 0)
                b->sweep = (long)j;
        }
        if (b->sweep < 0) {
            if (add_default_sweep(b) != 0)
                return CLI_EXIT_FAIL;
            b->sweep = (long)b->n_sp_keys - 1;
        }
    }
    if (b->sweep < 0 && b->n_sp_keys > 0)
        b->sweep = 0;
    b->n_sp = b->sweep >= 0 ? b->sp[b->sweep].n : 0;
    if (b->sweep >= 0) {
        const sp_key *s = &b->sp[b->sweep];
        bool first = true;
        fprintf(stderr, "sextant bench: sweeping %s over %zu value%s", s->key, s->n,
                s->n == 1 ? "" : "s");
        for (size_t j = 0; j < b->n_sp_keys; j++) {
            if ((long)j == b->sweep)
                continue;
            fprintf(stderr, "%s%s=%s", first ? "; constants " : ", ", b->sp[j].key,
                    b->sp[j].vals[0]);
            first = false;
        }
        fprintf(stderr, "\n");
    }
    return 0;
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
static int rescore_set(bench *b, gt_set *g)
{
    size_t gk = g->k, dim = b->base.dim;
    gt_pair *row = malloc(gk * sizeof *row);
    if (row == NULL)
        return -1;
    int (*cmp)(const void *, const void *) =
        higher_is_better(g->form) ? cmp_pair_desc : cmp_pair_asc;
    for (size_t q = 0; q < b->queries.n; q++) {
        int32_t *ids = g->ids + q * gk;
        float *d = g->dists + q * gk;
        for (size_t j = 0; j < gk; j++) {
            double raw = exact_sim_or_sq(b->metric, b->queries.f + q * dim,
                                         b->base.f + (size_t)ids[j] * dim, dim);
            row[j] = (gt_pair){ .d = to_form(raw, g->form), .id = ids[j] };
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

/* Exact top-want_k of every query among the rows passing `filter` (NULL: all) through the
 * engine, before any index exists (so every search is exact; batches of GT_BATCH queries let
 * the engine use BLAS and its search threads); distances then recomputed exactly (rescore_set).
 * A filter keeping fewer than want_k rows gives rows of that many ids. */
static int compute_gt_set(bench *b, const char *filter, size_t want_k, gt_set *g, const char *what)
{
    const char *cmd = "bench";
    size_t nq = b->queries.n, dim = b->queries.dim;
    size_t gk = want_k;
    if (filter != NULL) {
        uint64_t kept = 0;
        sx_status st = sx_count(b->c, filter, &kept);
        if (st != SX_OK)
            return cli_sx_fail(cmd, "count the rows of the filter", st);
        if (kept == 0)
            return cli_fail(cmd, "the filter '%s' keeps no rows", filter);
        if (kept < gk)
            gk = (size_t)kept;
    }
    memset(g, 0, sizeof *g);
    g->k = gk;
    g->source = "computed";
    g->form = b->metric == SX_METRIC_L2 ? DF_L2 : DF_SIM;
    g->ids = malloc(nq * gk * sizeof(int32_t));
    g->dists = malloc(nq * gk * sizeof(float));
    if (g->ids == NULL || g->dists == NULL)
        return cli_fail(cmd, "out of memory for the ground truth");
    fprintf(stderr, "sextant bench: computing exact top-%zu ground truth%s%s for %zu queries...\n",
            gk, what[0] ? " " : "", what, nq);
    double t0 = cli_now();
    prog pr;
    prog_begin(&pr, "ground truth", "queries", nq);
    for (size_t q0 = 0; q0 < nq; q0 += GT_BATCH) {
        size_t n = nq - q0 < GT_BATCH ? nq - q0 : GT_BATCH;
        sx_search_req req = { .queries = b->queries.f + q0 * dim,
                              .nq = n,
                              .k = (uint32_t)gk,
                              .filter = filter,
                              .metric = -1 };
        sx_rowset *rs = NULL;
        sx_status st = sx_search(b->c, &req, &rs);
        if (st != SX_OK) {
            prog_end(&pr);
            return cli_sx_fail(cmd, "ground-truth search", st);
        }
        if (rs->nq != n || rs->n_cols < 1 || rs->cols[0].type != SX_FIELD_INT64) {
            sx_rowset_free(rs);
            prog_end(&pr);
            return cli_fail(cmd, "ground-truth search returned an unexpected result shape");
        }
        const int64_t *ids = rs->cols[0].data;
        size_t row = 0;
        for (size_t q = 0; q < n; q++) {
            if (rs->topks[q] != gk) {
                size_t got = rs->topks[q];
                sx_rowset_free(rs);
                prog_end(&pr);
                return cli_fail(cmd, "exact search of query %zu returned %zu hits, want %zu",
                                q0 + q, got, gk);
            }
            for (size_t j = 0; j < gk; j++, row++) {
                g->ids[(q0 + q) * gk + j] = (int32_t)(ids[row] - b->id_offset);
                g->dists[(q0 + q) * gk + j] = (float)to_form((double)rs->distances[row], g->form);
            }
        }
        sx_rowset_free(rs);
        prog_update(&pr, q0 + n);
    }
    prog_end(&pr);
    if (b->base.f != NULL && rescore_set(b, g) != 0) /* --import: the engine's float distances */
        return cli_fail(cmd, "out of memory");
    fprintf(stderr, "sextant bench: ground truth in %.1f s\n", cli_now() - t0);
    return 0;
}

static int compute_gt(bench *b)
{
    return compute_gt_set(b, NULL, gt_columns(b), &b->gt, "");
}

/* A case's ground truth (filter case, streaming stage): from the cache entry
 * cache_stem + suffix when it verifies, else computed (and cached when caching is on). */
static int case_gt(bench *b, const char *suffix, const char *filter, gt_set *g, const char *what)
{
    char err[ERR_LEN], stem[PATH_MAX], ids[PATH_MAX], dists[PATH_MAX];
    bool cached = b->cache_stem[0] != '\0';
    if (cached) {
        int n = snprintf(stem, sizeof stem, "%s%s", b->cache_stem, suffix);
        if (n < 0 || (size_t)n + 16 >= sizeof stem)
            return cli_fail("bench", "cache path too long");
        snprintf(ids, sizeof ids, "%s-gt.ivecs", stem);
        snprintf(dists, sizeof dists, "%s-gt-dist.fvecs", stem);
        if (strcmp(cache_check(stem), "hit") == 0) {
            ds_matrix mi = { 0 }, md = { 0 };
            if (ds_load(ids, 0, &mi, err, sizeof err) == 0 &&
                ds_load(dists, 0, &md, err, sizeof err) == 0 && mi.type == DS_I32 &&
                md.type == DS_F32 && mi.n == b->queries.n && md.n == mi.n && md.dim == mi.dim) {
                memset(g, 0, sizeof *g);
                g->k = mi.dim;
                g->ids = mi.i;
                g->dists = md.f;
                g->form = b->metric == SX_METRIC_L2 ? DF_L2 : DF_SIM;
                g->source = "file";
                fprintf(stderr, "sextant bench: ground truth%s%s from the cache (%s)\n",
                        what[0] ? " " : "", what, stem);
                return 0;
            }
            ds_free(&mi);
            ds_free(&md);
            cache_drop(stem);
        }
    }
    if (compute_gt_set(b, filter, gt_columns(b), g, what) != 0)
        return CLI_EXIT_FAIL;
    if (!cached)
        return 0;
    if (ds_write_vecs(ids, b->queries.n, g->k, NULL, g->ids, err, sizeof err) != 0 ||
        ds_write_vecs(dists, b->queries.n, g->k, g->dists, NULL, err, sizeof err) != 0)
        return cli_fail("bench", "caching ground truth: %s", err);
    return cache_seal(stem);
}

/* The filter of filter case f: VectorDBBench's `id >= size * rate`, on the label field. */
static uint64_t filter_min(const bench *b, size_t f)
{
    return (uint64_t)floor((double)b->base.n * b->filter_rates[f]);
}

static void filter_expr(const bench *b, size_t f, char *out, size_t len)
{
    snprintf(out, len, "label >= %" PRIu64, filter_min(b, f));
}

/* Ground truths of the filter cases and streaming stages (phase 4, before the index). */
static int ensure_case_gts(bench *b)
{
    char filter[96], suffix[64], what[96];
    for (size_t f = 0; f < b->n_filters; f++) {
        filter_expr(b, f, filter, sizeof filter);
        snprintf(suffix, sizeof suffix, "-f%g", b->filter_rates[f]);
        snprintf(what, sizeof what, "with filter %s", filter);
        if (case_gt(b, suffix, filter, &b->filter_gt[f], what) != 0)
            return CLI_EXIT_FAIL;
    }
    if (b->stream_rate > 0) {
        unsigned S = b->stream_stages;
        if ((size_t)S > b->base.n)
            return cli_fail("bench", "--stream-stages %u exceeds the %zu rows", S, b->base.n);
        b->stage_gt = calloc(S, sizeof *b->stage_gt);
        if (b->stage_gt == NULL)
            return cli_fail("bench", "out of memory");
        for (unsigned st = 1; st <= S; st++) {
            uint64_t rows = (uint64_t)b->base.n * st / S;
            snprintf(filter, sizeof filter, "id < %" PRIu64, rows);
            snprintf(suffix, sizeof suffix, "-s%uof%u", st, S);
            snprintf(what, sizeof what, "of stream stage %u/%u (%s)", st, S, filter);
            if (case_gt(b, suffix, filter, &b->stage_gt[st - 1], what) != 0)
                return CLI_EXIT_FAIL;
        }
    }
    return 0;
}

static int ensure_gt(bench *b)
{
    char err[ERR_LEN];
    if (b->gt.ids == NULL && compute_gt(b) != 0)
        return CLI_EXIT_FAIL;
    if (b->gt_cache_status == NULL && (b->gt_write_ids || b->gt_write_dists))
        b->gt_cache_status = "written";
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
    if (b->cache_stem[0] != '\0' && b->gt_path == b->gt_cache &&
        (b->gt_write_ids || b->gt_write_dists) && cache_seal(b->cache_stem) != 0)
        return CLI_EXIT_FAIL;
    return ensure_case_gts(b);
}

/* ------------------------------------------------------------------ database phases */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Creates and opens collection `name`: int64 key `id` (the row number), vector field `vector`,
 * and with filter cases the int64 field `label` (= id; VectorDBBench filters on `id >= N`). */
static int create_collection(bench *b, sx_db *db, const char *name, sx_collection **out)
{
    const char *cmd = "bench";
    sx_field_def fields[3];
    memset(fields, 0, sizeof fields);
    fields[0].name = "id";
    fields[0].type = SX_FIELD_INT64;
    fields[0].is_primary = true;
    fields[0].auto_id = b->import_url != NULL && db == b->db; /* the import assigns the keys */
    fields[1].name = "vector";
    fields[1].type = SX_FIELD_FLOAT_VECTOR;
    fields[1].dim = (uint32_t)b->base.dim;
    fields[2].name = "label";
    fields[2].type = SX_FIELD_INT64;
    sx_collection_def def = {
        .name = name, .fields = fields, .n_fields = b->has_label ? 3 : 2, .metric = b->metric
    };
    sx_status st = sx_collection_create(db, &def);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "create collection", st);
    st = sx_collection_open(db, name, out);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "open collection", st);
    return 0;
}

/* Inserts base rows [row0, row0 + n) into c (ids: scratch of n). */
static sx_status insert_rows(bench *b, sx_collection *c, size_t row0, size_t n, int64_t *ids)
{
    for (size_t j = 0; j < n; j++)
        ids[j] = (int64_t)(row0 + j);
    sx_column cols[3] = {
        { .name = "id", .type = SX_FIELD_INT64, .data = ids },
        { .name = "vector", .type = SX_FIELD_FLOAT_VECTOR, .data = b->base.f + row0 * b->base.dim },
        { .name = "label", .type = SX_FIELD_INT64, .data = ids },
    };
    sx_batch batch = { .n_rows = n, .cols = cols, .n_cols = b->has_label ? 3 : 2 };
    return sx_insert(c, &batch, NULL);
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
    opts.search_threads = b->search_threads;
    /* One sealed segment holds every row unless --segment-bytes says otherwise: a per-segment
     * index (nlist lists, nprobe probes per segment) then compares with one library index. */
    uint64_t raw = (uint64_t)b->base.n * b->base.dim * sizeof(float);
    opts.segment_max_bytes = b->segment_bytes > 0 ? b->segment_bytes : raw + (1u << 20);
    if (b->import_url != NULL) {
        /* the row count is not known yet: the job writes segments of the default size (or
         * --segment-bytes), merged afterwards into one (or up to --segment-bytes) */
        opts.segment_max_bytes = b->segment_bytes;
        opts.merge_max_bytes = b->segment_bytes > 0 ? b->segment_bytes : UINT64_MAX / 4;
    }
    opts.index_build_memory_limit = b->build_memory_limit;
    opts.storage_url = b->storage_url;
    opts.s3_endpoint = b->s3_endpoint;
    opts.s3_region = b->s3_region;
    opts.cache_limit_bytes = b->cache_mb << 20;
    opts.memory_limit_bytes = b->memory_limit;
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
    b->has_label = b->n_filters > 0;
    return create_collection(b, b->db, COLLECTION, &b->c);
}

static bool import_progress(void *ctx, const sx_import_progress *p)
{
    prog_update(ctx, p->bytes_done >> 20);
    return true;
}

/* The key of row `offset` in insertion order (sx_query), or -1 with the message printed. */
static int64_t key_at(bench *b, uint64_t offset)
{
    const char *fields[1] = { "id" };
    sx_rowset *rs = NULL;
    sx_status st = sx_query(b->c, NULL, fields, 1, 1, offset, &rs);
    int64_t key = -1;
    if (st != SX_OK)
        (void)cli_sx_fail("bench", "query the imported keys", st);
    else if (rs->n_rows == 1 && rs->n_cols == 1)
        key = ((const int64_t *)rs->cols[0].data)[0];
    else
        (void)cli_fail("bench", "no row at offset %llu", (unsigned long long)offset);
    sx_rowset_free(rs);
    return key;
}

/* --import: the bulk-import job (on this thread, I/O tagged INSERT), then the merge of its
 * segments (sx_compact), timed together as insert_s. The keys are the job's auto ids: base row r
 * is key r + id_offset, checked on the first and the last row. Then what load_inputs could not
 * check without the row count: k, the ground-truth ids, the form of its distances. */
static int import_base(bench *b)
{
    const char *cmd = "bench";
    const char *paths[1] = { b->import_url };
    sx_import_group g = { paths, 1 };
    prog pr;
    prog_begin(&pr, "import", "MiB", 0);
    sx_import_opts io = { .progress = import_progress, .progress_ctx = &pr, .batch_rows = 0 };
    sx_import_result res;
    memset(&res, 0, sizeof res);
    sx_io_phase ph = sx_io_phase_set(SX_IO_PHASE_INSERT);
    double t0 = cli_now();
    sx_status st = sx_import_run(b->c, &g, 1, &io, &res);
    b->import_job_s = cli_now() - t0;
    prog_end(&pr);
    sx_collection_info ci;
    memset(&ci, 0, sizeof ci);
    if (st == SX_OK)
        st = sx_collection_describe(b->c, &ci);
    if (st == SX_OK && ci.n_segments > 1) {
        double t1 = cli_now();
        st = sx_compact(b->c);
        if (st == SX_OK)
            st = sx_collection_describe(b->c, &ci);
        b->merge_s = cli_now() - t1;
    }
    b->insert_s = cli_now() - t0;
    (void)sx_io_phase_set(ph);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "import", st);
    b->import_rows = res.rows;
    b->import_bytes = res.bytes;
    b->import_segments = res.segments;
    b->merged_segments = ci.n_segments;
    b->base.n = (size_t)res.rows;
    double mb = (double)res.bytes / 1e6;
    fprintf(stderr,
            "sextant bench: imported %llu rows from %s (%.1f MB) in %.2f s (%.0f rows/s, %.1f "
            "MB/s) as %u segment(s), merged into %u in %.2f s\n",
            (unsigned long long)res.rows, b->import_url, mb, b->import_job_s,
            b->import_job_s > 0 ? (double)res.rows / b->import_job_s : 0.0,
            b->import_job_s > 0 ? mb / b->import_job_s : 0.0, res.segments, ci.n_segments,
            b->merge_s);
    if (b->base.n == 0)
        return cli_fail(cmd, "%s holds no rows", b->import_url);
    int64_t first = key_at(b, 0), last = key_at(b, b->base.n - 1);
    if (first < 0 || last < 0)
        return CLI_EXIT_FAIL;
    if (last - first != (int64_t)b->base.n - 1)
        return cli_fail(cmd,
                        "the imported keys run from %lld to %lld for %zu rows: not one "
                        "consecutive range, so results cannot be mapped to row numbers",
                        (long long)first, (long long)last, b->base.n);
    b->id_offset = first;
    if ((size_t)b->k > b->base.n)
        return cli_fail(cmd, "--k %u exceeds the %zu imported rows", b->k, b->base.n);
    if (b->gt.ids == NULL)
        return 0;
    for (size_t j = 0; j < b->queries.n * b->gt.k; j++)
        if (b->gt.ids[j] < 0 || (size_t)b->gt.ids[j] >= b->base.n)
            return cli_fail(cmd, "%s: id %d (query %zu) is not a row of the %zu imported rows",
                            b->gt_path, (int)b->gt.ids[j], j / b->gt.k, b->base.n);
    if (b->gt.dists != NULL && detect_gt_form(b) != 0)
        return CLI_EXIT_FAIL;
    if (b->gt_mismatch)
        return cli_fail(cmd, "%s does not match the imported vectors", b->gt_dist_path);
    return 0;
}

static int insert_base(bench *b)
{
    if (b->import_url != NULL)
        return import_base(b);
    size_t bs = b->batch < b->base.n ? b->batch : b->base.n;
    int64_t *ids = malloc(bs * sizeof *ids);
    if (ids == NULL)
        return cli_fail("bench", "out of memory");
    double t0 = cli_now();
    prog pr;
    prog_begin(&pr, "insert", "rows", b->base.n);
    for (size_t r = 0; r < b->base.n; r += bs) {
        size_t rows = b->base.n - r < bs ? b->base.n - r : bs;
        sx_status st = insert_rows(b, b->c, r, rows, ids);
        if (st != SX_OK) {
            prog_end(&pr);
            free(ids);
            return cli_sx_fail("bench", "insert", st);
        }
        prog_update(&pr, r + rows);
    }
    prog_end(&pr);
    b->insert_s = cli_now() - t0;
    free(ids);
    fprintf(stderr, "sextant bench: inserted %zu rows in %.2f s\n", b->base.n, b->insert_s);
    return 0;
}

/* Where the index was built (JSON build_device). CPU types: "cpu". GPU_* types build on the GPU
 * when one is usable and otherwise with their CPU twin; the public API does not say which, so:
 * "cpu-twin" under SX_GPU=off, the engine's word when its parameter string carries a device=
 * entry, else "unknown". */
static void resolve_build_device(bench *b, const sx_index_info *ii)
{
    if (strncmp(b->kind->type, "GPU_", 4) != 0) {
        snprintf(b->build_device, sizeof b->build_device, "cpu");
        return;
    }
    const char *env = getenv("SX_GPU");
    if (env != NULL && strcasecmp(env, "off") == 0) {
        snprintf(b->build_device, sizeof b->build_device, "cpu-twin");
        return;
    }
    const char *d = strstr(ii->params, "device=");
    if (d != NULL) {
        d += 7;
        size_t n = strcspn(d, ",");
        snprintf(b->build_device, sizeof b->build_device, "%.*s", (int)(n < 40 ? n : 40), d);
        return;
    }
    snprintf(b->build_device, sizeof b->build_device, "unknown");
}

static int build_index(bench *b)
{
    const char *cmd = "bench";
    fprintf(stderr, "sextant bench: building %s index...\n", b->kind->type);
    double t0 = cli_now();
    sx_status st = sx_index_create(b->c, b->kind->type, b->build.p, b->build.n);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "create index", st);
    /* The flush seals the ingested rows into a segment (and uploads it with --storage): ingest
     * I/O, so tagged INSERT and timed apart from the build (I/O profile walls). */
    double tf = cli_now();
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_INSERT);
    st = sx_flush(b->c);
    sx_io_phase_set(prev);
    b->flush_s = cli_now() - tf;
    if (st != SX_OK)
        return cli_sx_fail(cmd, "flush", st);
    prog pr;
    prog_begin(&pr, "index build", "rows", b->base.n);
    for (;;) {
        /* poll so that the status line moves; the wait itself ends the phase */
        st = sx_index_wait(b->c, pr.on ? 200 : 0);
        if (st != SX_ETIMEDOUT)
            break;
        sx_index_info pi;
        if (sx_index_describe(b->c, &pi) == SX_OK)
            prog_update(&pr, pi.indexed_rows + pi.building_rows);
    }
    prog_end(&pr);
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
    b->index_disk = ii.disk_bytes;
    b->collection_memory = ci.memory_bytes;
    snprintf(b->index_params, sizeof b->index_params, "%s", ii.params);
    resolve_build_device(b, &ii);
    fprintf(stderr,
            "sextant bench: index %s (%s) built in %.2f s on %s, %" PRIu64 " / %" PRIu64
            " rows indexed\n",
            ii.type, ii.params, b->build_s, b->build_device, ii.indexed_rows, ii.total_rows);
    return 0;
}

/* --storage with --cache-mb: the database is closed (its data directory removed when it is a
 * temporary one) and opened in a fresh temporary directory from the store alone, as a new node
 * would: timed as reopen_s, not part of load_s. The queries then run there, so a DISKANN index
 * reads its sectors through the block cache (ranged GETs) instead of a local file. */
static int reopen_from_store(bench *b)
{
    const char *cmd = "bench";
    if (b->storage_url == NULL || b->cache_mb == 0)
        return 0;
    sx_status st = sx_db_sync(b->db);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "sync to the store", st);
    sx_collection_release(b->c);
    b->c = NULL;
    sx_db_close(b->db);
    b->db = NULL;
    if (b->data_is_temp && nftw(b->data_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "sextant bench: warning: could not remove %s: %s\n", b->data_dir,
                strerror(errno));
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || *tmp == '\0')
        tmp = "/tmp";
    int len = snprintf(b->data_dir, sizeof b->data_dir, "%s/sextant-bench-XXXXXX", tmp);
    if (len < 0 || (size_t)len >= sizeof b->data_dir)
        return cli_fail(cmd, "TMPDIR path too long");
    if (mkdtemp(b->data_dir) == NULL)
        return cli_fail(cmd, "cannot create a directory under %s: %s", tmp, strerror(errno));
    b->data_is_temp = true;
    sx_db_options opts = { 0 };
    opts.build_threads = b->threads;
    opts.search_threads = b->search_threads;
    uint64_t raw = (uint64_t)b->base.n * b->base.dim * sizeof(float);
    opts.segment_max_bytes = b->segment_bytes > 0 ? b->segment_bytes : raw + (1u << 20);
    opts.index_build_memory_limit = b->build_memory_limit;
    opts.storage_url = b->storage_url;
    opts.s3_endpoint = b->s3_endpoint;
    opts.s3_region = b->s3_region;
    opts.cache_limit_bytes = b->cache_mb << 20;
    opts.memory_limit_bytes = b->memory_limit;
    double t0 = cli_now();
    st = sx_db_open(b->data_dir, &opts, &b->db);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "open from the store", st);
    st = sx_collection_open(b->db, COLLECTION, &b->c);
    if (st == SX_OK)
        st = sx_index_wait(b->c, 0);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "open the collection from the store", st);
    b->reopen_s = cli_now() - t0;
    fprintf(stderr,
            "sextant bench: reopened from %s in a fresh directory in %.2f s (cache %" PRIu64
            " MiB)\n",
            b->storage_url, b->reopen_s, b->cache_mb);
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
    size_t step; /* queries per call: fn answers queries q..q+step-1 (fewer at the end) */
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
    atomic_uint ready;      /* multi-thread passes: workers created and waiting for go */
    atomic_bool go;         /* set once every created worker is ready; the clock starts */
} run_ctx;

#define RUN_CHUNK 8 /* single queries per grab of a search thread (run_worker) */

static void *run_worker(void *arg)
{
    run_ctx *r = arg;
    char err[ERR_LEN];
    /* single queries are handed out RUN_CHUNK at a time: with one at a time, two threads wrote
     * the neighbouring slots of ids / dists / counts / lat for every query, and the shared
     * lines moved between the cores at each (measurable at ~5 us a query) */
    size_t chunk = r->step == 1 ? RUN_CHUNK : r->step, q = 0, end = 0;
    for (;;) {
        if (q >= end) {
            /* relaxed: the counter only hands out distinct query numbers */
            q = atomic_fetch_add_explicit(&r->next, chunk, memory_order_relaxed);
            end = q + chunk < r->nq ? q + chunk : r->nq;
        }
        if (q >= r->nq || atomic_load_explicit(&r->failed, memory_order_relaxed))
            break;
        double t0 = cli_now();
        int rc = r->fn(r->fn_ctx, q, r->ids + q * r->k, r->dists + q * r->k, &r->counts[q], err,
                       sizeof err);
        double lat = cli_now() - t0;
        for (size_t j = q; j < q + r->step && j < r->nq; j++)
            r->lat[j] = lat; /* a batch: each of its queries waited for the whole batch */
        if (rc != 0) {
            pthread_mutex_lock(&r->mu);
            if (!atomic_load_explicit(&r->failed, memory_order_relaxed))
                snprintf(r->err, sizeof r->err, "query %zu: %s", q, err);
            atomic_store_explicit(&r->failed, true, memory_order_relaxed);
            pthread_mutex_unlock(&r->mu);
            break;
        }
        q += r->step;
    }
    return NULL;
}

/* A worker of a multi-thread pass: waits until every worker has been created, so thread
 * creation stays out of the timed pass (at BIGANN-10k's 100 queries of ~5 us each, two
 * pthread_create calls were a tenth of the pass). */
static void *run_worker_started(void *arg)
{
    run_ctx *r = arg;
    atomic_fetch_add(&r->ready, 1);
    while (!atomic_load(&r->go))
        (void)sched_yield();
    return run_worker(r);
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

/* Mean NDCG@k of a run against the ground-truth ids (bench_metrics.h). */
static double score_ndcg(const bench *b, const run_ctx *r)
{
    double total = 0;
    for (size_t q = 0; q < r->nq; q++) {
        size_t n = r->counts[q] < b->k ? r->counts[q] : b->k;
        total += bm_ndcg(r->ids + q * b->k, n, b->gt.ids + q * b->gt.k, b->k);
    }
    return r->nq ? total / (double)r->nq : (double)NAN;
}

/* Runs every query through fn from `threads` threads, best of b->runs passes. */
static int ours_search(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len);

static int timed_run(bench *b, search_one_fn fn, void *fn_ctx, unsigned threads, run_result *out)
{
    size_t nq = b->queries.n;
    run_ctx r;
    memset(&r, 0, sizeof r);
    r.fn = fn;
    r.fn_ctx = fn_ctx;
    r.step = fn == ours_search && b->qbatch > 1 ? b->qbatch : 1;
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
    out->wall_s = 0;
    for (unsigned pass = 0; pass < b->runs; pass++) {
        atomic_store(&r.next, 0);
        atomic_store(&r.failed, false);
        double t0 = 0;
        unsigned started = 0;
        if (threads == 1) {
            t0 = cli_now();
            run_worker(&r);
        } else {
            /* the clock starts once every created worker waits for `go` (when a creation
             * fails, the ones created still run and the pass is refused below) */
            atomic_store(&r.ready, 0);
            atomic_store(&r.go, false);
            for (; started < threads; started++) {
                if (pthread_create(&tids[started], NULL, run_worker_started, &r) != 0)
                    break;
            }
            while (atomic_load(&r.ready) < started)
                (void)sched_yield();
            t0 = cli_now();
            atomic_store(&r.go, true);
            for (unsigned j = 0; j < started; j++)
                pthread_join(tids[j], NULL);
        }
        double wall = cli_now() - t0;
        out->wall_s += wall;
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
        out->p95_ms = percentile(r.lat, nq, 0.95) * 1e3;
        out->recall = score_recall(b, &r);
        out->ndcg = score_ndcg(b, &r);
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
    sx_param params[MAX_SP_KEYS]; /* every search param of this setting */
    size_t n_params;
    const char *filter;             /* filtered sweeps; NULL otherwise */
    _Atomic uint64_t plan[N_PLANS]; /* sx_search_plan counts over the run's searches */
} ours_ctx;

static int ours_search(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len)
{
    ours_ctx *o = ctx;
    bench *b = o->b;
    /* --query-batch: queries q..q+nb-1 in one call; their answers go to ids / dists / n_out
     * at strides of k and 1 (timed_run's arrays are laid out by query) */
    size_t nb = b->qbatch > 1 ? b->qbatch : 1;
    if (nb > b->queries.n - q)
        nb = b->queries.n - q;
    sx_search_plan plan;
    sx_search_req req = { .queries = b->queries.f + q * b->queries.dim,
                          .nq = nb,
                          .k = b->k,
                          .filter = o->filter,
                          .params = o->n_params ? o->params : NULL,
                          .n_params = o->n_params,
                          .metric = -1,
                          .plan = &plan,
                          .filter_plan = b->filter_plan };
    sx_rowset *rs = NULL;
    sx_status st = sx_search(b->c, &req, &rs);
    if (st != SX_OK) {
        snprintf(err, err_len, "sx_search: %s: %s", sx_status_str(st), sx_errmsg());
        return -1;
    }
    add_plan(o->plan, &plan);
    const int64_t *rid = rs->n_cols > 0 ? rs->cols[0].data : NULL;
    size_t row = 0; /* the rowset holds the queries' hits one after another */
    for (size_t i = 0; i < nb; i++) {
        size_t got = rs->nq == nb ? rs->topks[i] : 0, n = got < b->k ? got : b->k;
        for (size_t j = 0; j < n && rid != NULL; j++) {
            ids[i * b->k + j] = rid[row + j] - b->id_offset;
            dists[i * b->k + j] = (float)to_form((double)rs->distances[row + j], b->gt.form);
        }
        n_out[i] = rid != NULL ? n : 0;
        row += got;
    }
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

static bool is_diskann(const bench *b)
{
    return strcmp(b->kind->name, "diskann") == 0;
}

/* io_cols: the index reports reads (DISKANN): print them, "-" while the engine has none. */
static void print_run(const char *system, const run_result *r, bool io_cols)
{
    printf("%-8s %-18s %7u  %9.4f %11.1f %9.3f %9.3f", system, r->params[0] ? r->params : "-",
           r->threads, r->recall, r->qps, r->p50_ms, r->p99_ms);
    if (!isnan(r->io_per_query))
        printf(" %8.1f %10.0f", r->io_per_query, r->bytes_per_query);
    else if (io_cols)
        printf(" %8s %10s", "-", "-");
    printf("\n");
    (void)fflush(stdout);
}

static void print_header(const bench *b)
{
    char rk[32];
    snprintf(rk, sizeof rk, "recall@%u", b->k);
    printf("%-8s %-18s %7s  %9s %11s %9s %9s", "index", "params", "threads", rk, "QPS", "p50 ms",
           "p99 ms");
    if (is_diskann(b))
        printf(" %8s %10s", "IO/query", "bytes/q");
    printf("\n");
}

/* The index's cumulative read counters (0 until the engine reports them). */
static void index_io(bench *b, uint64_t *ios, uint64_t *bytes)
{
    sx_index_info ii;
    *ios = 0;
    *bytes = 0;
    if (sx_index_describe(b->c, &ii) == SX_OK) {
        *ios = ii.read_ios;
        *bytes = ii.read_bytes;
    }
}

/* The label of setting s: "nprobe=8" (the swept key only; constants are printed once). */
static void setting_label(const bench *b, size_t s, run_result *r)
{
    r->setting = SIZE_MAX;
    r->params[0] = '\0';
    if (b->sweep < 0)
        return;
    const sp_key *k = &b->sp[b->sweep];
    r->setting = s;
    snprintf(r->params, sizeof r->params, "%.31s=%.31s", k->key, k->vals[s]);
}

/* The search params of swept setting s: every key, the swept one at its s-th value. */
static void ours_params(const bench *b, size_t s, ours_ctx *o)
{
    for (size_t j = 0; j < b->n_sp_keys; j++) {
        o->params[j].key = b->sp[j].key;
        o->params[j].value = (long)j == b->sweep ? b->sp[j].vals[s] : b->sp[j].vals[0];
    }
    o->n_params = b->n_sp_keys;
}

static int run_ours(bench *b)
{
    size_t n_settings = b->n_sp > 0 ? b->n_sp : 1;
    b->ours.name = "sextant";
    snprintf(b->ours.desc, sizeof b->ours.desc, "%s", b->kind->type);
    printf("\n");
    print_header(b);
    for (size_t s = 0; s < n_settings; s++) {
        ours_ctx o = { .b = b };
        run_result r;
        memset(&r, 0, sizeof r);
        setting_label(b, s, &r);
        ours_params(b, s, &o);
        unsigned tlist[2] = { 1, b->threads };
        for (size_t t = 0; t < (b->threads > 1 ? 2u : 1u); t++) {
            uint64_t ios0, bytes0, ios1, bytes1;
            index_io(b, &ios0, &bytes0);
            if (timed_run(b, ours_search, &o, tlist[t], &r) != 0)
                return CLI_EXIT_FAIL;
            b->query_s += r.wall_s;
            index_io(b, &ios1, &bytes1);
            double nq = (double)b->queries.n * (double)b->runs;
            r.io_per_query = r.bytes_per_query = NAN;
            if (ios1 > ios0 || bytes1 > bytes0) {
                r.io_per_query = (double)(ios1 - ios0) / nq;
                r.bytes_per_query = (double)(bytes1 - bytes0) / nq;
                b->io_reported = true;
            }
            if (add_run(&b->ours, &r) != 0)
                return CLI_EXIT_FAIL;
            print_run(b->kind->type, &r, is_diskann(b));
        }
    }
    if (is_diskann(b) && !b->io_reported)
        fprintf(stderr, "sextant bench: the engine reported no index reads (sx_index_info "
                        "read_ios/read_bytes stayed 0): io_per_query is null\n");
    return 0;
}

/* The swept settings of our index with filter case f's filter, one thread, scored against that
 * filter's exact ground truth (b->gt is pointed at it for the runs: timed_run scores b->gt). */
static int sweep_filtered_ours(bench *b, size_t f)
{
    size_t n_settings = b->n_sp > 0 ? b->n_sp : 1;
    char filter[96];
    filter_expr(b, f, filter, sizeof filter);
    sys_result *out = &b->fs_ours[f];
    out->name = "sextant";
    snprintf(out->desc, sizeof out->desc, "%s", b->kind->type);
    for (size_t s = 0; s < n_settings; s++) {
        ours_ctx o = { .b = b, .filter = filter };
        ours_params(b, s, &o);
        run_result r;
        memset(&r, 0, sizeof r);
        setting_label(b, s, &r);
        r.io_per_query = r.bytes_per_query = NAN;
        if (timed_run(b, ours_search, &o, 1, &r) != 0)
            return CLI_EXIT_FAIL;
        plan_label(o.plan, r.plan, sizeof r.plan);
        if (add_run(out, &r) != 0)
            return CLI_EXIT_FAIL;
    }
    return 0;
}

/* Filtered sweeps (issue 18): with filter cases and peers, every swept setting is also run with
 * each filter, for us here and for FAISS (IDSelectorRange) in run_one_peer, so that filtered
 * search is compared at equal recall in one process. */
static int run_filter_sweeps(bench *b)
{
    if (b->n_filters == 0 || b->peers == 0)
        return 0;
    gt_set saved = b->gt;
    int rc = 0;
    for (size_t f = 0; f < b->n_filters && rc == 0; f++) {
        b->gt = b->filter_gt[f];
        rc = sweep_filtered_ours(b, f);
    }
    b->gt = saved;
    return rc;
}

/* ------------------------------------------------------------------ cases (schema 2) */

/* A case's searches: the collection, the filter, the ground truth(s), top-k, and the form the
 * engine's distances are converted to (that of the ground truth they are compared with). */
typedef struct case_ctx {
    bench *b;
    sx_collection *c;
    const gt_set *gt;     /* performance / filter case */
    const gt_set *stages; /* streaming: stage s (1-based) -> stages[s - 1] */
    const char *filter;   /* NULL: none */
    uint32_t k;
    dist_form form;
    /* sx_search_plan counts summed over the case's searches (any thread): the segments
     * searched through the index (unfiltered, filtered), scanned exactly with an index there,
     * without one, by request */
    _Atomic uint64_t plan[N_PLANS];
} case_ctx;

static int case_search(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len)
{
    case_ctx *cc = ctx;
    bench *b = cc->b;
    sx_search_req req = { .queries = b->queries.f + q * b->queries.dim,
                          .nq = 1,
                          .k = cc->k,
                          .filter = cc->filter,
                          .params = b->n_case_sp ? b->case_sp : NULL,
                          .n_params = b->n_case_sp,
                          .metric = -1 };
    sx_search_plan plan;
    req.plan = &plan;
    req.filter_plan = b->filter_plan;
    sx_rowset *rs = NULL;
    sx_status st = sx_search(cc->c, &req, &rs);
    if (st != SX_OK) {
        snprintf(err, err_len, "sx_search: %s: %s", sx_status_str(st), sx_errmsg());
        return -1;
    }
    add_plan(cc->plan, &plan);
    size_t n = rs->nq == 1 ? rs->topks[0] : 0;
    if (n > cc->k)
        n = cc->k;
    const int64_t *rid = rs->n_cols > 0 ? rs->cols[0].data : NULL;
    int64_t off = cc->c == cc->b->c ? cc->b->id_offset : 0; /* the streaming case: own keys */
    for (size_t j = 0; j < n && rid != NULL; j++) {
        ids[j] = rid[j] - off;
        dists[j] = (float)to_form((double)rs->distances[j], cc->form);
    }
    *n_out = rid != NULL ? n : 0;
    sx_rowset_free(rs);
    return 0;
}

/* recall@k of one answer: distance threshold when g has distances, else id set. */
static double
score_one(const gt_set *g, size_t q, size_t k, const int64_t *ids, const float *dists, size_t n)
{
    size_t kk = k < g->k ? k : g->k;
    if (g->dists != NULL)
        return bm_recall_threshold(dists, n, g->dists + q * g->k, kk, higher_is_better(g->form),
                                   RECALL_EPS);
    return bm_recall_ids(ids, n, g->ids + q * g->k, kk);
}

static double
case_score(void *ctx, unsigned stage, size_t q, const int64_t *ids, const float *dists, size_t n)
{
    case_ctx *cc = ctx;
    const gt_set *g = cc->stages != NULL && stage > 0 ? &cc->stages[stage - 1] : cc->gt;
    return score_one(g, q, cc->k, ids, dists, n);
}

/* The search params of every case search: --case-param, else the sweep's first single-thread
 * setting reaching RECALL_TARGET (the last one when none does) with the constants; an
 * ef-like key (SWEEP_GE_K) below the case's k is raised to k. */
static void choose_case_params(bench *b, uint32_t k)
{
    b->n_case_sp = 0;
    if (b->case_params.n > 0) {
        for (size_t j = 0; j < b->case_params.n && j < MAX_SP_KEYS; j++) {
            snprintf(b->case_sp_store[j][0], 64, "%s", b->case_params.p[j].key);
            snprintf(b->case_sp_store[j][1], 64, "%s", b->case_params.p[j].value);
            b->n_case_sp++;
        }
    } else {
        size_t chosen = SIZE_MAX;
        for (size_t i = 0; i < b->ours.n_runs; i++) {
            const run_result *r = &b->ours.runs[i];
            if (r->threads != 1)
                continue;
            chosen = r->setting;
            if (r->recall >= RECALL_TARGET)
                break;
        }
        for (size_t j = 0; j < b->n_sp_keys && j < MAX_SP_KEYS; j++) {
            const char *v = b->sp[j].vals[0];
            if ((long)j == b->sweep && chosen != SIZE_MAX)
                v = b->sp[j].vals[chosen];
            snprintf(b->case_sp_store[j][0], 64, "%s", b->sp[j].key);
            snprintf(b->case_sp_store[j][1], 64, "%s", v);
            b->n_case_sp++;
        }
    }
    for (size_t j = 0; j < b->n_case_sp; j++) {
        if (b->kind->rule == SWEEP_GE_K && b->kind->sweep_key != NULL &&
            strcmp(b->case_sp_store[j][0], b->kind->sweep_key) == 0) {
            long v = strtol(b->case_sp_store[j][1], NULL, 10);
            if (v < (long)k)
                snprintf(b->case_sp_store[j][1], 64, "%u", k);
        }
        b->case_sp[j].key = b->case_sp_store[j][0];
        b->case_sp[j].value = b->case_sp_store[j][1];
    }
}

/* The serial pass (VectorDBBench serial_runner): every query once, one at a time. */
static int case_serial(bench *b, case_ctx *cc, case_result *cr)
{
    size_t nq = b->queries.n, k = cc->k;
    const gt_set *g = cc->gt;
    int64_t *ids = malloc(k * sizeof *ids);
    float *d = malloc(k * sizeof *d);
    double *lat = malloc(nq * sizeof *lat);
    char err[ERR_LEN];
    int rc = CLI_EXIT_FAIL;
    if (ids == NULL || d == NULL || lat == NULL) {
        rc = cli_fail("bench", "out of memory");
        goto out;
    }
    double rk = 0, nk = 0, r10 = 0, g10 = 0, wall = 0;
    size_t k10 = g->k >= 10 && k >= 10 ? 10 : 0;
    prog pr;
    prog_begin(&pr, "serial", "queries", nq);
    for (size_t q = 0; q < nq; q++) {
        size_t n = 0;
        double t0 = cli_now();
        int st = case_search(cc, q, ids, d, &n, err, sizeof err);
        lat[q] = cli_now() - t0;
        wall += lat[q];
        if (st != 0) {
            prog_end(&pr);
            rc = cli_fail("bench", "case %s: query %zu: %s", cr->name, q, err);
            goto out;
        }
        size_t kk = k < g->k ? k : g->k;
        rk += score_one(g, q, kk, ids, d, n);
        nk += bm_ndcg(ids, n, g->ids + q * g->k, kk);
        if (k10 > 0) {
            size_t top = n < 10 ? n : 10;
            r10 += score_one(g, q, 10, ids, d, top);
            g10 += bm_ndcg(ids, top, g->ids + q * g->k, 10);
        }
        if ((q & 63) == 63)
            prog_update(&pr, q + 1);
    }
    prog_end(&pr);
    cr->s_nq = nq;
    cr->recall = rk / (double)nq;
    cr->ndcg = nk / (double)nq;
    cr->recall10 = k10 ? r10 / (double)nq : (double)NAN;
    cr->ndcg10 = k10 ? g10 / (double)nq : (double)NAN;
    bool at100 = cr->k >= 100;
    cr->recall100 = at100 ? cr->recall : (double)NAN;
    cr->ndcg100 = at100 ? cr->ndcg : (double)NAN;
    if (cr->k == 10) {
        cr->recall10 = cr->recall;
        cr->ndcg10 = cr->ndcg;
    }
    cr->s_qps = wall > 0 ? (double)nq / wall : (double)NAN;
    bm_sort(lat, nq);
    cr->s_avg = bm_mean(lat, nq) * 1e3;
    cr->s_p50 = bm_percentile(lat, nq, 0.50) * 1e3;
    cr->s_p95 = bm_percentile(lat, nq, 0.95) * 1e3;
    cr->s_p99 = bm_percentile(lat, nq, 0.99) * 1e3;
    cr->s_max = lat[nq - 1] * 1e3;
    printf("case %-12s serial k=%u: recall %.4f, ndcg %.4f, recall@10 %.4f, QPS %.1f, p50 %.3f "
           "ms, p95 %.3f ms, p99 %.3f ms\n",
           cr->name, cr->k, cr->recall, cr->ndcg, cr->recall10, cr->s_qps, cr->s_p50, cr->s_p95,
           cr->s_p99);
    /* the plan each segment got, over the serial pass (segment searches: queries x segments) */
    printf("case %-12s plan:", cr->name);
    for (size_t i = 0; i < N_PLANS; i++) {
        cr->plan[i] = atomic_load(&cc->plan[i]);
        if (cr->plan[i])
            printf(" %s %" PRIu64, plan_names[i], cr->plan[i]);
    }
    printf(" (segment searches)\n");
    (void)fflush(stdout);
    rc = 0;
out:
    free(ids);
    free(d);
    free(lat);
    return rc;
}

/* The concurrency levels of one case. */
static int case_levels(bench *b, case_ctx *cc, case_result *cr)
{
    char err[ERR_LEN];
    for (size_t j = 0; j < b->n_conc; j++) {
        bc_level_spec spec = { .conc = b->conc[j],
                               .duration_s = (double)b->duration_s,
                               .interval_s = (double)b->interval_s,
                               .nq = b->queries.n,
                               .k = cc->k,
                               .search = case_search,
                               .score = case_score,
                               .ctx = cc };
        if (bc_run_level(&spec, &cr->levels[j], err, sizeof err) != 0)
            return cli_fail("bench", "case %s, concurrency %u: %s", cr->name, b->conc[j], err);
        cr->n_levels = j + 1;
    }
    return 0;
}

static uint32_t case_k_of(const bench *b, const gt_set *g)
{
    uint32_t k = b->case_k > 0 ? b->case_k : CASE_K;
    if (k > g->k)
        k = (uint32_t)g->k;
    if (k > b->base.n)
        k = (uint32_t)b->base.n;
    return k;
}

/* The streaming case's callbacks share one context: the case context first (case_search and
 * case_score read a stream_ctx as the case_ctx it starts with), then the insert scratch. */
typedef struct stream_ctx {
    case_ctx cc;
    int64_t *ids; /* batch scratch */
} stream_ctx;

static int stream_insert(void *ctx, size_t row0, size_t n, char *err, size_t err_len)
{
    stream_ctx *sc = ctx;
    sx_status st = insert_rows(sc->cc.b, sc->cc.c, row0, n, sc->ids);
    if (st != SX_OK) {
        snprintf(err, err_len, "insert: %s: %s", sx_status_str(st), sx_errmsg());
        return -1;
    }
    return 0;
}

static uint64_t stream_indexed(void *ctx)
{
    stream_ctx *sc = ctx;
    sx_index_info ii;
    return sx_index_describe(sc->cc.c, &ii) == SX_OK ? ii.indexed_rows : 0;
}

static int case_streaming(bench *b, case_result *cr)
{
    const char *cmd = "bench";
    char dir[PATH_MAX + 16], err[ERR_LEN];
    unsigned S = b->stream_stages;
    snprintf(dir, sizeof dir, "%s-stream", b->data_dir);
    sx_db_options opts = { 0 };
    opts.build_threads = b->threads;
    opts.search_threads = b->search_threads;
    uint64_t raw = (uint64_t)b->base.n * b->base.dim * sizeof(float);
    uint64_t seg = raw / S;
    if (seg < 4096)
        seg = 4096;
    opts.segment_max_bytes = seg;
    sx_db *db = NULL;
    sx_collection *c = NULL;
    stream_ctx sc;
    memset(&sc, 0, sizeof sc);
    int rc = CLI_EXIT_FAIL;
    (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    sx_status st = sx_db_open(dir, &opts, &db);
    if (st != SX_OK)
        return cli_sx_fail(cmd, dir, st);
    if (create_collection(b, db, COLLECTION, &c) != 0)
        goto out;
    st = sx_index_create(c, b->kind->type, b->build.p, b->build.n);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "create index (streaming)", st);
        goto out;
    }
    size_t batch = (size_t)(b->stream_rate / 10.0);
    if (batch < 1)
        batch = 1;
    if (batch > b->batch && b->batch > 0)
        batch = b->batch;
    /* at most a segment (the engine refuses larger batches) and a stage, so stages differ */
    size_t seg_rows = (size_t)(seg / (b->base.dim * sizeof(float)));
    size_t stage_rows = b->base.n / S;
    if (batch > seg_rows && seg_rows > 0)
        batch = seg_rows;
    if (batch > stage_rows && stage_rows > 0)
        batch = stage_rows;
    sc.ids = malloc(batch * sizeof *sc.ids);
    cr->stages = calloc(S, sizeof *cr->stages);
    if (sc.ids == NULL || cr->stages == NULL) {
        rc = cli_fail(cmd, "out of memory");
        goto out;
    }
    const gt_set *last = &b->stage_gt[S - 1];
    sc.cc = (case_ctx){ .b = b,
                        .c = c,
                        .gt = last,
                        .stages = b->stage_gt,
                        .k = case_k_of(b, last),
                        .form = last->form };
    cr->k = sc.cc.k;
    cr->gt = last;
    double final_s = (double)b->base.n / b->stream_rate / S;
    bc_stream_spec spec = { .n_rows = b->base.n,
                            .batch = batch,
                            .rate = b->stream_rate,
                            .conc = b->stream_conc,
                            .n_stages = S,
                            .nq = b->queries.n,
                            .k = sc.cc.k,
                            .final_s = final_s < 1.0 ? 1.0 : final_s,
                            .insert = stream_insert,
                            .search = case_search,
                            .score = case_score,
                            .indexed = stream_indexed,
                            .ctx = &sc };
    printf("\ncase streaming: %zu rows at %.0f rows/s (batches of %zu), %u search threads, %u "
           "stages, top-%u\n",
           b->base.n, b->stream_rate, batch, b->stream_conc, S, sc.cc.k);
    (void)fflush(stdout);
    if (bc_run_stream(&spec, cr->stages, &cr->stream_insert_s, err, sizeof err) != 0) {
        rc = cli_fail(cmd, "streaming case: %s", err);
        goto out;
    }
    cr->n_stages = S;
    cr->stream_conc = b->stream_conc;
    cr->stream_rate = b->stream_rate;
    cr->stream_segment_bytes = seg;
    cr->insert_s = cr->stream_insert_s;
    cr->optimize_s = NAN;
    rc = 0;
out:
    free(sc.ids);
    sx_collection_release(c);
    sx_db_close(db);
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        fprintf(stderr, "sextant bench: warning: could not remove %s\n", dir);
    return rc;
}

static void case_init(case_result *cr, const char *name, const char *type)
{
    memset(cr, 0, sizeof *cr);
    snprintf(cr->name, sizeof cr->name, "%s", name);
    cr->type = type;
    cr->filter_rate = NAN;
    cr->recall = cr->ndcg = cr->recall10 = cr->ndcg10 = cr->recall100 = cr->ndcg100 = NAN;
    cr->s_qps = cr->s_avg = cr->s_p50 = cr->s_p95 = cr->s_p99 = cr->s_max = NAN;
}

/* Phase 8: the cases. */
static int run_cases(bench *b)
{
    const char *cmd = "bench";
    uint32_t k = case_k_of(b, &b->gt);
    choose_case_params(b, k);
    printf("\ncases: top-%u, search params", k);
    for (size_t j = 0; j < b->n_case_sp; j++)
        printf(" %s=%s", b->case_sp[j].key, b->case_sp[j].value);
    if (b->n_case_sp == 0)
        printf(" (none)");
    printf("; concurrency");
    for (size_t j = 0; j < b->n_conc; j++)
        printf("%s%u", j ? "," : " ", b->conc[j]);
    if (b->n_conc == 0)
        printf(" (none)");
    printf("\n");
    (void)fflush(stdout);

    case_result *cr = &b->cases[b->n_cases];
    case_init(cr, "performance", "performance");
    cr->k = k;
    cr->gt = &b->gt;
    cr->insert_s = b->insert_s;
    cr->optimize_s = b->build_s;
    case_ctx cc = { .b = b, .c = b->c, .gt = &b->gt, .k = k, .form = b->gt.form };
    b->n_cases++;
    if (case_serial(b, &cc, cr) != 0 || case_levels(b, &cc, cr) != 0)
        return CLI_EXIT_FAIL;

    for (size_t f = 0; f < b->n_filters; f++) {
        cr = &b->cases[b->n_cases];
        char name[32];
        snprintf(name, sizeof name, "filter-%gp", b->filter_rates[f] * 100.0);
        case_init(cr, name, "filter");
        filter_expr(b, f, cr->filter, sizeof cr->filter);
        cr->filter_rate = b->filter_rates[f];
        sx_status st = sx_count(b->c, cr->filter, &cr->kept_rows);
        if (st != SX_OK)
            return cli_sx_fail(cmd, "count filtered rows", st);
        const gt_set *g = &b->filter_gt[f];
        cr->k = case_k_of(b, g);
        cr->gt = g;
        cr->insert_s = b->insert_s;
        cr->optimize_s = b->build_s;
        case_ctx fc = {
            .b = b, .c = b->c, .gt = g, .filter = cr->filter, .k = cr->k, .form = g->form
        };
        b->n_cases++;
        printf("\ncase %s: filter %s keeps %" PRIu64 " of %zu rows\n", cr->name, cr->filter,
               cr->kept_rows, b->base.n);
        if (case_serial(b, &fc, cr) != 0 || case_levels(b, &fc, cr) != 0)
            return CLI_EXIT_FAIL;
    }
    if (b->stream_rate > 0) {
        cr = &b->cases[b->n_cases];
        case_init(cr, "streaming", "streaming");
        b->n_cases++;
        if (case_streaming(b, cr) != 0)
            return CLI_EXIT_FAIL;
        const bc_stage *last = &cr->stages[cr->n_stages - 1];
        cr->recall = last->st.recall;
    }
    return 0;
}

/* ------------------------------------------------------------------ peers */

static void add_note(bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends "; message" to the peers note (JSON peers_note) and prints it. */
static void add_note(bench *b, const char *fmt, ...)
{
    char msg[PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = strlen(b->peer_note);
    snprintf(b->peer_note + len, sizeof b->peer_note - len, "%s%s", len ? "; " : "", msg);
    fprintf(stderr, "sextant bench: %s\n", msg);
}

static const char *lib_name(peer_lib lib)
{
    return lib == PEER_FAISS ? "faiss" : "hnswlib";
}

static const char *lib_so(peer_lib lib)
{
    return lib == PEER_FAISS ? FAISS_SO : PEER_SO;
}

/* Resolves the shim's functions; false when one is missing. */
static bool resolve_symbols(peer_api *p)
{
    if (p->lib == PEER_HNSWLIB) {
        p->hnsw_new = (peer_new_fn)dlsym(p->dl, "sx_peer_hnsw_new");
        p->add = (peer_add_fn)dlsym(p->dl, "sx_peer_hnsw_add");
        p->set_ef = (peer_set_ef_fn)dlsym(p->dl, "sx_peer_hnsw_set_ef");
        p->search = (peer_search_fn)dlsym(p->dl, "sx_peer_hnsw_search");
        p->memory = (peer_memory_fn)dlsym(p->dl, "sx_peer_hnsw_memory");
        p->free_index = (peer_free_fn)dlsym(p->dl, "sx_peer_hnsw_free");
        return p->hnsw_new != NULL && p->add != NULL && p->set_ef != NULL && p->search != NULL &&
               p->memory != NULL && p->free_index != NULL;
    }
    faiss_abi_fn abi = (faiss_abi_fn)dlsym(p->dl, "sx_peer_faiss_abi");
    p->f_new = (faiss_new_fn)dlsym(p->dl, "sx_peer_faiss_new");
    p->f_build = (faiss_build_fn)dlsym(p->dl, "sx_peer_faiss_build");
    p->f_set = (faiss_set_fn)dlsym(p->dl, "sx_peer_faiss_set");
    p->f_search = (faiss_search_fn)dlsym(p->dl, "sx_peer_faiss_search");
    p->f_search_range = (faiss_search_range_fn)dlsym(p->dl, "sx_peer_faiss_search_range");
    p->f_memory = (faiss_memory_fn)dlsym(p->dl, "sx_peer_faiss_memory");
    p->f_describe = (faiss_describe_fn)dlsym(p->dl, "sx_peer_faiss_describe");
    p->f_free = (faiss_free_fn)dlsym(p->dl, "sx_peer_faiss_free");
    return abi != NULL && abi() == SX_PEER_FAISS_ABI && p->f_new != NULL && p->f_build != NULL &&
           p->f_set != NULL && p->f_search != NULL && p->f_search_range != NULL &&
           p->f_memory != NULL && p->f_describe != NULL && p->f_free != NULL;
}

/* Tries DIR/<shim>: 0 loaded with every symbol, 1 no such file, -1 present but unusable
 * (dlopen failed or a symbol is missing; the reason goes to note). */
static int try_dlopen(peer_api *p, const char *dir, char *note, size_t note_len)
{
    int len = snprintf(p->path, sizeof p->path, "%s/%s", dir, lib_so(p->lib));
    if (len < 0 || (size_t)len >= sizeof p->path || access(p->path, F_OK) != 0)
        return 1;
    /* libgomp reads its wait policy when it is loaded, i.e. by this dlopen: spin-waiting
     * OpenMP threads made FAISS's 2-thread builds 10x slower than 1-thread ones on a loaded
     * 2-core machine. The user's setting wins. */
    if (p->lib == PEER_FAISS && setenv("OMP_WAIT_POLICY", "PASSIVE", 0) != 0)
        fprintf(stderr, "sextant bench: warning: cannot set OMP_WAIT_POLICY\n");
    /* NODELETE: FAISS's OpenMP and BLAS worker threads outlive the calls into the shim; they
     * must never find their code unmapped by dlclose. */
    p->dl = dlopen(p->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (p->dl == NULL) {
        const char *e = dlerror();
        snprintf(note, note_len, "cannot load %s: %s", p->path, e != NULL ? e : "?");
        return -1;
    }
    if (!resolve_symbols(p)) {
        snprintf(note, note_len,
                 "%s does not export the functions of bench/peers/peer.h (built with "
                 "-fvisibility=hidden, or from another peer.h version?)",
                 p->path);
        dlclose(p->dl);
        p->dl = NULL;
        return -1;
    }
    return 0;
}

/* Finds and loads a shim: next to the sextant binary, then in $SX_PEER_DIR; the first
 * candidate that loads wins. Returns true with p->dl set, or false with a note. */
static bool peer_load(peer_api *p, peer_lib lib, char *note, size_t note_len)
{
    char dirs[2][PATH_MAX];
    size_t n_dirs = 0;
    memset(p, 0, sizeof *p);
    p->lib = lib;
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
        snprintf(note, note_len, "%s not found (looked in %.1024s%s%.1024s)", lib_so(lib),
                 n_dirs > 0 ? dirs[0] : "nowhere", n_dirs > 1 ? " and $SX_PEER_DIR=" : "",
                 n_dirs > 1 ? dirs[1] : "");
    return false;
}

typedef struct peer_ctx {
    bench *b;
    peer_api *api;
    void *h;
    const float *queries; /* normalised for cosine */
    bool sel;             /* filtered sweeps: only labels >= sel_min (FAISS IDSelectorRange) */
    int64_t sel_min;
} peer_ctx;

/* One peer query; its hits are re-scored from the vectors (in the GT form) so no distance
 * convention is assumed. */
static int peer_search_rescored(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len)
{
    peer_ctx *pc = ctx;
    bench *b = pc->b;
    size_t dim = b->queries.dim;
    const float *qv = pc->queries + q * dim;
    size_t n = pc->sel ? pc->api->f_search_range(pc->h, qv, b->k, pc->sel_min, (int64_t)b->base.n,
                                                 ids, dists)
               : pc->api->lib == PEER_FAISS ? pc->api->f_search(pc->h, qv, b->k, ids, dists)
                                            : pc->api->search(pc->h, qv, b->k, ids, dists);
    if (n > b->k) {
        snprintf(err, err_len, "%s returned %zu > k hits", lib_name(pc->api->lib), n);
        return -1;
    }
    *n_out = n;
    /* Only the ids are needed for id-set recall; skip the rescoring cost then. */
    if (b->gt.dists == NULL)
        return 0;
    for (size_t j = 0; j < n; j++) {
        if (ids[j] < 0 || (size_t)ids[j] >= b->base.n) {
            snprintf(err, err_len, "%s returned label %" PRId64 " out of range",
                     lib_name(pc->api->lib), ids[j]);
            return -1;
        }
        double raw = exact_sim_or_sq(b->metric, b->queries.f + q * dim,
                                     b->base.f + (size_t)ids[j] * dim, dim);
        dists[j] = (float)to_form(raw, b->gt.form);
    }
    return 0;
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

/* Maps one of our search params to the library's. Returns true with the library's key and
 * value, false when it has no counterpart. refine_k is Milvus's magnification factor (the
 * index re-ranks k * refine_k candidates), which is FAISS's IndexRefine k_factor. */
static bool map_param(const peer_api *api,
                      int faiss_kind,
                      bool refine,
                      const char *key,
                      const char *val,
                      const char **pkey,
                      double *pval)
{
    char *end = NULL;
    double v = strtod(val, &end);
    if (end == val || *end != '\0')
        return false;
    *pval = v;
    if (api->lib == PEER_HNSWLIB) {
        *pkey = "ef";
        return strcmp(key, "ef") == 0;
    }
    if (faiss_kind == SX_PEER_FAISS_HNSW_FLAT) {
        *pkey = "efSearch";
        return strcmp(key, "ef") == 0;
    }
    if (strcmp(key, "nprobe") == 0) {
        *pkey = "nprobe";
        return true;
    }
    if (refine && strcmp(key, "refine_k") == 0) {
        *pkey = "k_factor";
        return true;
    }
    return false;
}

static int peer_set(peer_api *api, void *h, const char *pkey, double v)
{
    if (api->lib == PEER_HNSWLIB) {
        if (v < 1 || v > INT_MAX)
            return -1;
        api->set_ef(h, (int)v);
        return 0;
    }
    return api->f_set(h, pkey, v);
}

/* Builds one peer index on (base, queries) and runs our settings through it (invariant 1).
 * Returns 0 (out filled, or skipped with a note: out->n_runs == 0) or CLI_EXIT_FAIL. */
/* FAISS's half of the filtered sweeps (run_filter_sweeps): the swept settings with an
 * IDSelectorRange of each filter case's rows, one thread, against that filter's ground truth. */
static int sweep_filtered_faiss(
    bench *b, peer_api *api, void *h, int faiss_kind, bool refine, const float *queries)
{
    int64_t id;
    float d;
    if (api->f_search_range(h, queries, 1, 0, (int64_t)b->base.n, &id, &d) == (size_t)-1) {
        add_note(b, "faiss %s takes no ID selector: not in the filtered sweeps",
                 api->f_describe(h));
        return 0;
    }
    size_t n_settings = b->n_sp > 0 ? b->n_sp : 1;
    gt_set saved = b->gt;
    int rc = 0;
    for (size_t f = 0; f < b->n_filters && rc == 0; f++) {
        sys_result *out = &b->fs_faiss[f];
        out->name = "faiss";
        snprintf(out->desc, sizeof out->desc, "%s + IDSelectorRange", api->f_describe(h));
        b->gt = b->filter_gt[f];
        peer_ctx pc = { .b = b,
                        .api = api,
                        .h = h,
                        .queries = queries,
                        .sel = true,
                        .sel_min = (int64_t)filter_min(b, f) };
        for (size_t s = 0; s < n_settings && rc == 0; s++) {
            run_result r;
            memset(&r, 0, sizeof r);
            setting_label(b, s, &r);
            r.io_per_query = r.bytes_per_query = NAN;
            const char *pkey;
            double pval;
            if (b->sweep >= 0) {
                const sp_key *k = &b->sp[b->sweep];
                if (!map_param(api, faiss_kind, refine, k->key, k->vals[s], &pkey, &pval) ||
                    peer_set(api, h, pkey, pval) != 0) {
                    rc =
                        cli_fail("bench", "faiss: %s value '%s' is not usable", k->key, k->vals[s]);
                    break;
                }
            }
            if (timed_run(b, peer_search_rescored, &pc, 1, &r) != 0 || add_run(out, &r) != 0)
                rc = CLI_EXIT_FAIL;
        }
    }
    b->gt = saved;
    return rc;
}

static int run_one_peer(bench *b,
                        peer_api *api,
                        int faiss_kind,
                        const float *base,
                        const float *queries,
                        sys_result *out)
{
    const char *name = lib_name(api->lib);
    bool refine =
        (faiss_kind == SX_PEER_FAISS_IVF_PQ || faiss_kind == SX_PEER_FAISS_IVF_SQ8) && refine_on(b);
    const char *pkey;
    double pval;
    if (b->sweep >= 0 && !map_param(api, faiss_kind, refine, b->sp[b->sweep].key,
                                    b->sp[b->sweep].vals[0], &pkey, &pval)) {
        add_note(b, "%s peer skipped: the swept search param '%s' has no counterpart in it", name,
                 b->sp[b->sweep].key);
        return 0;
    }
    int rc = CLI_EXIT_FAIL;
    void *h = NULL;
    int metric = b->metric == SX_METRIC_L2 ? 0 : 1;
    char err[ERR_LEN] = "";
    double t0 = 0;
    if (api->lib == PEER_HNSWLIB) {
        long m = build_param(b, "M", DEF_HNSW_M),
             efc = build_param(b, "efConstruction", DEF_HNSW_EFC);
        snprintf(out->desc, sizeof out->desc, "HierarchicalNSW(M=%ld,efConstruction=%ld)", m, efc);
        fprintf(stderr, "sextant bench: building hnswlib %s, %u threads...\n", out->desc,
                b->threads);
        t0 = cli_now();
        h = api->hnsw_new((int)b->base.dim, metric, b->base.n, (int)m, (int)efc);
        if (h == NULL || api->add(h, base, b->base.n, (int)b->threads) != 0) {
            rc = cli_fail("bench", "hnswlib peer build failed");
            goto out;
        }
    } else {
        sx_peer_faiss_params fp = {
            .kind = faiss_kind,
            .dim = (int)b->base.dim,
            .metric = metric,
            .nlist = (int)build_param(b, "nlist", DEF_IVF_NLIST),
            .m = (int)build_param(b, "m", default_pq_m(b->base.dim)),
            .nbits = (int)build_param(b, "nbits", DEF_PQ_NBITS),
            .refine = refine,
            .M = (int)build_param(b, "M", DEF_HNSW_M),
            .ef_construction = (int)build_param(b, "efConstruction", DEF_HNSW_EFC),
            .threads = (int)b->threads,
        };
        h = api->f_new(&fp, err, sizeof err);
        if (h == NULL) {
            add_note(b, "faiss peer skipped: %s", err);
            rc = 0;
            goto out;
        }
        snprintf(out->desc, sizeof out->desc, "%s", api->f_describe(h));
        fprintf(stderr, "sextant bench: building faiss %s, %u threads...\n", out->desc, b->threads);
        t0 = cli_now();
        if (api->f_build(h, base, b->base.n, err, sizeof err) != 0) {
            rc = cli_fail("bench", "faiss peer build failed: %s", err);
            goto out;
        }
    }
    out->name = name;
    out->build_s = cli_now() - t0;
    out->memory_bytes = (uint64_t)(api->lib == PEER_FAISS ? api->f_memory(h) : api->memory(h));
    fprintf(stderr, "sextant bench: %s built in %.2f s\n", name, out->build_s);
    /* Constants first: those with a counterpart are set once, the others are noted. */
    for (size_t j = 0; j < b->n_sp_keys; j++) {
        if ((long)j == b->sweep)
            continue;
        if (!map_param(api, faiss_kind, refine, b->sp[j].key, b->sp[j].vals[0], &pkey, &pval)) {
            if (strcmp(b->sp[j].key, "refine") != 0)
                fprintf(stderr,
                        "sextant bench: %s: search param %s=%s has no counterpart; "
                        "not applied\n",
                        name, b->sp[j].key, b->sp[j].vals[0]);
            continue;
        }
        if (peer_set(api, h, pkey, pval) != 0) {
            rc = cli_fail("bench", "%s: cannot set %s=%g", name, pkey, pval);
            goto out;
        }
    }
    peer_ctx pc = { .b = b, .api = api, .h = h, .queries = queries };
    size_t n_settings = b->n_sp > 0 ? b->n_sp : 1;
    for (size_t s = 0; s < n_settings; s++) {
        run_result r;
        memset(&r, 0, sizeof r);
        setting_label(b, s, &r);
        r.io_per_query = r.bytes_per_query = NAN;
        if (b->sweep >= 0) {
            const sp_key *k = &b->sp[b->sweep];
            if (!map_param(api, faiss_kind, refine, k->key, k->vals[s], &pkey, &pval) ||
                peer_set(api, h, pkey, pval) != 0) {
                rc = cli_fail("bench", "%s: %s value '%s' is not usable", name, k->key, k->vals[s]);
                goto out;
            }
        }
        unsigned tlist[2] = { 1, b->threads };
        for (size_t t = 0; t < (b->threads > 1 ? 2u : 1u); t++) {
            if (timed_run(b, peer_search_rescored, &pc, tlist[t], &r) != 0)
                goto out;
            if (add_run(out, &r) != 0)
                goto out;
            print_run(name, &r, false);
        }
    }
    if (api->lib == PEER_FAISS && b->n_filters > 0 &&
        sweep_filtered_faiss(b, api, h, faiss_kind, refine, queries) != 0)
        goto out;
    if (api->lib == PEER_HNSWLIB && b->n_filters > 0)
        add_note(b, "hnswlib is not in the filtered sweeps: Debian's hnswlib 0.6.2 has no "
                    "filter functor (searchKnn takes one from 0.7)");
    rc = 0;
out:
    if (h != NULL) {
        if (api->lib == PEER_FAISS)
            api->f_free(h);
        else
            api->free_index(h);
    }
    return rc;
}

static int run_peers(bench *b)
{
    if (b->peers == 0)
        return 0;
    bool any = false;
    for (size_t j = 0; j < MAX_PEERS; j++)
        any |= b->kind->peers[j].lib != PEER_NONE;
    if (!any) {
        add_note(b, "no peer for %s (%s)", b->kind->type,
                 is_diskann(b) ? "FAISS has no on-disk graph index and DiskANN is not packaged"
                               : "not compared");
        return 0;
    }
    int rc = CLI_EXIT_FAIL;
    float *nbase = NULL, *nq = NULL;
    const float *base = b->base.f, *queries = b->queries.f;
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
    for (size_t j = 0; j < MAX_PEERS; j++) {
        peer_lib lib = b->kind->peers[j].lib;
        if (lib == PEER_NONE)
            continue;
        peer_api api;
        char note[PATH_MAX + 256];
        if (!peer_load(&api, lib, note, sizeof note)) {
            add_note(b, "%s peer: %s; continuing without it", lib_name(lib), note);
            continue;
        }
        sys_result *out = &b->peer[b->n_peer];
        memset(out, 0, sizeof *out);
        int prc = run_one_peer(b, &api, b->kind->peers[j].faiss_kind, base, queries, out);
        dlclose(api.dl);
        if (prc != 0) {
            free(out->runs);
            out->runs = NULL;
            goto out;
        }
        if (out->n_runs > 0)
            b->n_peer++;
    }
    rc = 0;
out:
    free(nbase);
    free(nq);
    return rc;
}

/* ------------------------------------------------------------------ report */

/* QPS at recall `target` interpolated between the single-thread runs that bracket it
 * (bm_qps_at_recall: the one definition the console, the JSON and the report share); NAN when no
 * pair brackets the target. */
static double qps_at_recall(const sys_result *s, double target)
{
    double *rq = calloc(2 * s->n_runs + 1, sizeof *rq);
    if (rq == NULL)
        return (double)NAN;
    size_t n = 0;
    for (size_t i = 0; i < s->n_runs; i++) {
        if (s->runs[i].threads != 1)
            continue;
        rq[n] = s->runs[i].recall;
        rq[s->n_runs + n] = s->runs[i].qps;
        n++;
    }
    double q = bm_qps_at_recall(rq, rq + s->n_runs, n, target);
    free(rq);
    return q;
}

/* The fastest single-thread run reaching recall `target` (its QPS; NAN when none does) and its
 * index in *at: with exact plans a filtered curve can sit at recall 1 for every setting, where
 * the interpolation of qps_at_recall has no bracketing pair. */
static double fastest_reaching(const sys_result *s, double target, size_t *at)
{
    double best = (double)NAN;
    for (size_t i = 0; i < s->n_runs; i++) {
        const run_result *r = &s->runs[i];
        if (r->threads == 1 && r->recall >= target && (isnan(best) || r->qps > best)) {
            best = r->qps;
            *at = i;
        }
    }
    return best;
}

/* The JSON document is built in memory and written with one checked fwrite: a failed or short
 * write is then reported once, and no half-written file is left behind by an early return. */
/* ------------------------------------------------------------------ I/O profile */

/* Report order and names of the engine's phases (sx_io_phase values) and backends. */
static const sx_io_phase prof_order[SX_IO_PHASES] = { SX_IO_PHASE_INSERT, SX_IO_PHASE_BUILD,
                                                      SX_IO_PHASE_QUERY, SX_IO_PHASE_OTHER };
static const char *const prof_phase_name[SX_IO_PHASES] = { "other", "insert", "optimize", "query" };
static const char *const prof_backend_name[SX_IO_BACKENDS] = { "local", "s3" };
static const char *const prof_bucket_name[SX_IO_SIZE_BUCKETS] = { "4K",  "8K",   "16K",  "32K",
                                                                  "64K", "128K", "256K", "512K",
                                                                  "1M",  "2M",   "4M",   ">4M" };

/* acc += after - before, counter by counter (the profile is cumulative since start). */
static void
prof_add_delta(sx_io_profile *acc, const sx_io_profile *after, const sx_io_profile *before)
{
    for (int ph = 0; ph < SX_IO_PHASES; ph++) {
        for (int be = 0; be < SX_IO_BACKENDS; be++) {
            sx_io_counter *a = &acc->c[ph][be];
            const sx_io_counter *x = &after->c[ph][be], *y = &before->c[ph][be];
            a->read_ops += x->read_ops - y->read_ops;
            a->read_bytes += x->read_bytes - y->read_bytes;
            a->write_ops += x->write_ops - y->write_ops;
            a->write_bytes += x->write_bytes - y->write_bytes;
            for (int i = 0; i < SX_IO_SIZE_BUCKETS; i++) {
                a->read_hist[i] += x->read_hist[i] - y->read_hist[i];
                a->write_hist[i] += x->write_hist[i] - y->write_hist[i];
            }
        }
    }
}

/* The wall time IOPS of engine phase ph are computed over; NAN for OTHER (no phase of its own). */
static double prof_wall(const bench *b, sx_io_phase ph)
{
    switch (ph) {
    case SX_IO_PHASE_INSERT:
        return b->insert_s + b->flush_s;
    case SX_IO_PHASE_BUILD:
        return b->build_s - b->flush_s > 0 ? b->build_s - b->flush_s : 0;
    case SX_IO_PHASE_QUERY:
        return b->query_s;
    default:
        return (double)NAN;
    }
}

static double prof_iops(uint64_t ops, double wall)
{
    return wall > 0 ? (double)ops / wall : (double)NAN;
}

/* One table row: a phase's reads or writes on one backend. */
static void print_prof_row(const char *phase,
                           double wall,
                           const char *backend,
                           const char *dir,
                           uint64_t ops,
                           uint64_t bytes,
                           const uint64_t *hist)
{
    char hb[32], hm[32], iops[32], wall_s[32];
    if (isnan(wall))
        snprintf(wall_s, sizeof wall_s, "-");
    else
        snprintf(wall_s, sizeof wall_s, "%.2f", wall);
    double io = prof_iops(ops, wall);
    if (isnan(io))
        snprintf(iops, sizeof iops, "-");
    else
        snprintf(iops, sizeof iops, "%.1f", io);
    printf("%-9s %8s  %-7s %-5s %10" PRIu64 " %11s %10s %10s ", phase, wall_s, backend, dir, ops,
           cli_human_bytes(bytes, hb, sizeof hb),
           cli_human_bytes(ops ? bytes / ops : 0, hm, sizeof hm), iops);
    for (int i = 0; i < SX_IO_SIZE_BUCKETS; i++)
        if (hist[i])
            printf(" %s:%" PRIu64, prof_bucket_name[i], hist[i]);
    printf("\n");
}

/* The I/O profile table: one row per phase, backend and direction that saw any operation. */
static void print_io_profile(const bench *b)
{
    printf("\nI/O profile (per engine phase; IOPS = ops / the phase's wall time; op sizes: count "
           "per bucket, <= the label):\n");
    printf("%-9s %8s  %-7s %-5s %10s %11s %10s %10s  %s\n", "phase", "wall s", "backend", "dir",
           "ops", "bytes", "mean op", "IOPS", "op sizes");
    for (int o = 0; o < SX_IO_PHASES; o++) {
        sx_io_phase ph = prof_order[o];
        double wall = prof_wall(b, ph);
        bool any = false;
        for (int be = 0; be < SX_IO_BACKENDS; be++) {
            const sx_io_counter *c = &b->io_prof.c[ph][be];
            if (c->read_ops || c->read_bytes) {
                print_prof_row(prof_phase_name[ph], wall, prof_backend_name[be], "read",
                               c->read_ops, c->read_bytes, c->read_hist);
                any = true;
            }
            if (c->write_ops || c->write_bytes) {
                print_prof_row(prof_phase_name[ph], wall, prof_backend_name[be], "write",
                               c->write_ops, c->write_bytes, c->write_hist);
                any = true;
            }
        }
        if (!any && ph != SX_IO_PHASE_OTHER)
            printf("%-9s %8.2f  (no I/O)\n", prof_phase_name[ph], wall);
    }
}

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

/* A parameter value: a JSON number when it is one, true/false for booleans, else a string. */
static void json_param_value(sbuf *sb, const char *v)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    bool number = v[0] != '\0' && *end == '\0' && errno == 0 && !isnan(d) && !isinf(d) &&
                  strspn(v, "0123456789.-+eE") == strlen(v);
    if (number || strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
        sb_printf(sb, "%s", v);
    else
        json_str(sb, v);
}

/* {"nprobe": 8, "refine": true}: the constants and the run's value of the swept key. */
static void json_search_params(sbuf *sb, const bench *b, const run_result *r)
{
    sb_printf(sb, "{");
    for (size_t j = 0; j < b->n_sp_keys; j++) {
        const char *v = b->sp[j].vals[0];
        if ((long)j == b->sweep && r->setting != SIZE_MAX)
            v = b->sp[j].vals[r->setting];
        sb_printf(sb, "%s", j ? ", " : "");
        json_str(sb, b->sp[j].key);
        sb_printf(sb, ": ");
        json_param_value(sb, v);
    }
    sb_printf(sb, "}");
}

static void json_runs(sbuf *sb, const bench *b, const sys_result *s, bool io_fields)
{
    sb_printf(sb, "[");
    for (size_t i = 0; i < s->n_runs; i++) {
        const run_result *r = &s->runs[i];
        sb_printf(sb, "%s\n    {\"search_params\": ", i ? "," : "");
        json_search_params(sb, b, r);
        sb_printf(sb, ", \"k\": %u, \"recall\": ", b->k);
        json_num(sb, r->recall);
        sb_printf(sb, ", \"qps\": ");
        json_num(sb, r->qps);
        sb_printf(sb, ", \"p50_ms\": ");
        json_num(sb, r->p50_ms);
        sb_printf(sb, ", \"p99_ms\": ");
        json_num(sb, r->p99_ms);
        sb_printf(sb, ", \"p95_ms\": ");
        json_num(sb, r->p95_ms);
        sb_printf(sb, ", \"ndcg\": ");
        json_num(sb, r->ndcg);
        sb_printf(sb, ", \"threads\": %u", r->threads);
        if (r->plan[0]) {
            sb_printf(sb, ", \"plan\": ");
            json_str(sb, r->plan);
        }
        if (io_fields || !isnan(r->io_per_query)) {
            sb_printf(sb, ", \"io_per_query\": ");
            json_num(sb, r->io_per_query);
            sb_printf(sb, ", \"bytes_read_per_query\": ");
            json_num(sb, r->bytes_per_query);
        }
        sb_printf(sb, "}");
    }
    sb_printf(sb, "\n  ]");
}

/* sx_collection_info.memory_bytes already counts the built indexes (sextant.h: "vectors,
 * scalars and indexes held in memory"), so it is the total; adding sx_index_info.memory_bytes
 * again would count the index twice. The index share is reported beside it. */
static uint64_t total_memory(const bench *b)
{
    return b->collection_memory;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : (double)NAN;
}

static void json_ratios(sbuf *sb, const bench *b)
{
    sb_printf(sb, ",\n  \"ratios\": {");
    for (size_t pi = 0; pi < b->n_peer; pi++) {
        const sys_result *peer = &b->peer[pi];
        sb_printf(sb, "%s", pi ? ",\n    " : "");
        json_str(sb, peer->name);
        sb_printf(sb, ": {\"per_setting\": [");
        size_t n = b->ours.n_runs < peer->n_runs ? b->ours.n_runs : peer->n_runs;
        for (size_t i = 0; i < n; i++) {
            const run_result *o = &b->ours.runs[i], *p = &peer->runs[i];
            sb_printf(sb, "%s\n    {\"params\": ", i ? "," : "");
            json_str(sb, o->params);
            sb_printf(sb, ", \"threads\": %u, \"qps_ratio\": ", o->threads);
            json_num(sb, ratio(o->qps, p->qps));
            sb_printf(sb, ", \"recall\": ");
            json_num(sb, o->recall);
            sb_printf(sb, ", \"peer_recall\": ");
            json_num(sb, p->recall);
            sb_printf(sb, "}");
        }
        double qo = qps_at_recall(&b->ours, RECALL_TARGET);
        double qp = qps_at_recall(peer, RECALL_TARGET);
        sb_printf(sb, "\n  ], \"qps_at_recall_0.95\": ");
        json_num(sb, qo);
        sb_printf(sb, ", \"peer_qps_at_recall_0.95\": ");
        json_num(sb, qp);
        sb_printf(sb, ", \"qps_ratio_at_recall_0.95\": ");
        json_num(sb, qo / qp);
        sb_printf(sb, ", \"build_time_ratio\": ");
        json_num(sb, ratio(b->build_s, peer->build_s));
        sb_printf(sb, ", \"load_time_ratio\": ");
        json_num(sb, ratio(b->insert_s + b->build_s, peer->build_s));
        sb_printf(sb, ", \"memory_ratio\": ");
        json_num(sb, ratio((double)total_memory(b), (double)peer->memory_bytes));
        sb_printf(sb, ", \"index_memory_ratio\": ");
        json_num(sb, ratio((double)b->index_memory, (double)peer->memory_bytes));
        sb_printf(sb, "}");
    }
    sb_printf(sb, "}");
}

/* "filtered_sweeps": per filter case with peers, our runs (each with its plan) and FAISS's, and
 * the fastest of each reaching recall 0.95. */
static void json_filter_sweeps(sbuf *sb, const bench *b)
{
    if (b->n_filters == 0 || b->fs_ours[0].n_runs == 0)
        return;
    sb_printf(sb, ",\n  \"filtered_sweeps\": [");
    for (size_t f = 0; f < b->n_filters; f++) {
        const sys_result *o = &b->fs_ours[f], *p = &b->fs_faiss[f];
        char filter[96];
        filter_expr(b, f, filter, sizeof filter);
        sb_printf(sb, "%s\n  {\"filter\": ", f ? "," : "");
        json_str(sb, filter);
        sb_printf(sb, ", \"filter_rate\": ");
        json_num(sb, b->filter_rates[f]);
        sb_printf(sb, ", \"sextant\": ");
        json_runs(sb, b, o, false);
        sb_printf(sb, ", \"faiss_index\": ");
        json_str(sb, p->n_runs ? p->desc : NULL);
        sb_printf(sb, ", \"faiss\": ");
        json_runs(sb, b, p, false);
        size_t io = 0, ip = 0;
        double qo = fastest_reaching(o, RECALL_TARGET, &io);
        double qp = p->n_runs ? fastest_reaching(p, RECALL_TARGET, &ip) : (double)NAN;
        sb_printf(sb, ", \"fastest_qps_at_recall_0.95\": ");
        json_num(sb, qo);
        sb_printf(sb, ", \"faiss_fastest_qps_at_recall_0.95\": ");
        json_num(sb, qp);
        sb_printf(sb, ", \"qps_ratio_at_recall_0.95\": ");
        json_num(sb, qo / qp);
        sb_printf(sb, "}");
    }
    sb_printf(sb, "\n  ]");
}

static void json_hist(sbuf *sb, const uint64_t *h)
{
    sb_printf(sb, "[");
    for (int i = 0; i < SX_IO_SIZE_BUCKETS; i++)
        sb_printf(sb, "%s%" PRIu64, i ? ", " : "", h[i]);
    sb_printf(sb, "]");
}

/* "io_profile": phase -> backend -> counters; "io_profile_wall_s": phase -> seconds the IOPS are
 * over; "io_profile_buckets": the upper bound in bytes of each histogram bucket (null: larger). */
static void json_io_profile(sbuf *sb, const bench *b)
{
    sb_printf(sb, ",\n  \"io_profile\": {");
    for (int o = 0; o < SX_IO_PHASES; o++) {
        sx_io_phase ph = prof_order[o];
        double wall = prof_wall(b, ph);
        sb_printf(sb, "%s\n    ", o ? "," : "");
        json_str(sb, prof_phase_name[ph]);
        sb_printf(sb, ": {");
        for (int be = 0; be < SX_IO_BACKENDS; be++) {
            const sx_io_counter *c = &b->io_prof.c[ph][be];
            sb_printf(sb, "%s\n      ", be ? "," : "");
            json_str(sb, prof_backend_name[be]);
            sb_printf(sb,
                      ": {\"read_ops\": %" PRIu64 ", \"read_bytes\": %" PRIu64
                      ", \"write_ops\": %" PRIu64 ", \"write_bytes\": %" PRIu64 ", \"read_iops\": ",
                      c->read_ops, c->read_bytes, c->write_ops, c->write_bytes);
            json_num(sb, prof_iops(c->read_ops, wall));
            sb_printf(sb, ", \"write_iops\": ");
            json_num(sb, prof_iops(c->write_ops, wall));
            sb_printf(sb, ",\n        \"read_hist\": ");
            json_hist(sb, c->read_hist);
            sb_printf(sb, ", \"write_hist\": ");
            json_hist(sb, c->write_hist);
            sb_printf(sb, "}");
        }
        sb_printf(sb, "}");
    }
    sb_printf(sb, "},\n  \"io_profile_wall_s\": {");
    for (int o = 0; o < SX_IO_PHASES; o++) {
        sb_printf(sb, "%s", o ? ", " : "");
        json_str(sb, prof_phase_name[prof_order[o]]);
        sb_printf(sb, ": ");
        json_num(sb, prof_wall(b, prof_order[o]));
    }
    sb_printf(sb, "},\n  \"io_profile_buckets\": [");
    for (int i = 0; i < SX_IO_SIZE_BUCKETS; i++) {
        if (i == SX_IO_SIZE_BUCKETS - 1)
            sb_printf(sb, "%snull", i ? ", " : "");
        else
            sb_printf(sb, "%s%" PRIu64, i ? ", " : "", (uint64_t)4096 << i);
    }
    sb_printf(sb, "]");
}

/* ------------------------------------------------------------------ JSON, schema 2 */

static void json_lat(sbuf *sb, double avg, double p50, double p95, double p99)
{
    sb_printf(sb, "{\"avg\": ");
    json_num(sb, avg);
    sb_printf(sb, ", \"p50\": ");
    json_num(sb, p50);
    sb_printf(sb, ", \"p95\": ");
    json_num(sb, p95);
    sb_printf(sb, ", \"p99\": ");
    json_num(sb, p99);
}

/* The VectorDBBench keys of a case (shared by the top level and cases[]). */
static double case_max_qps(const case_result *cr, const char **source)
{
    double best = NAN;
    for (size_t j = 0; j < cr->n_levels; j++) {
        if (isnan(best) || cr->levels[j].qps > best)
            best = cr->levels[j].qps;
    }
    *source = "concurrency";
    if (isnan(best) && cr->n_stages > 0) {
        for (unsigned j = 0; j < cr->n_stages; j++) {
            if (isnan(best) || cr->stages[j].st.qps > best)
                best = cr->stages[j].st.qps;
        }
        *source = "streaming";
        return best;
    }
    if (isnan(best)) {
        *source = "serial";
        best = cr->s_qps;
    }
    return best;
}

static void json_vdb_keys(sbuf *sb, const bench *b, const case_result *cr, const char *indent)
{
    const char *src;
    double qps = case_max_qps(cr, &src);
    sb_printf(sb, "%s\"insert_duration\": ", indent);
    json_num(sb, cr->insert_s);
    sb_printf(sb, ",%s\"optimize_duration\": ", indent);
    json_num(sb, cr->optimize_s);
    sb_printf(sb, ",%s\"load_duration\": ", indent);
    json_num(sb, isnan(cr->optimize_s) ? cr->insert_s : cr->insert_s + cr->optimize_s);
    sb_printf(sb, ",%s\"recall\": ", indent);
    json_num(sb, cr->recall);
    sb_printf(sb, ",%s\"ndcg\": ", indent);
    json_num(sb, cr->ndcg);
    sb_printf(sb, ",%s\"serial_latency_p99\": ", indent);
    json_num(sb, cr->s_p99 / 1e3);
    sb_printf(sb, ",%s\"serial_latency_p95\": ", indent);
    json_num(sb, cr->s_p95 / 1e3);
    sb_printf(sb, ",%s\"qps\": ", indent);
    json_num(sb, qps);
    sb_printf(sb, ",%s\"qps_source\": ", indent);
    json_str(sb, src);
    static const char *const lists[] = { "conc_num_list", "conc_qps_list", "conc_latency_p99_list",
                                         "conc_latency_p95_list", "conc_latency_avg_list" };
    for (size_t l = 0; l < 5; l++) {
        sb_printf(sb, ",%s\"%s\": [", indent, lists[l]);
        for (size_t j = 0; j < cr->n_levels; j++) {
            const bc_stats *st = &cr->levels[j];
            sb_printf(sb, "%s", j ? ", " : "");
            switch (l) {
            case 0:
                sb_printf(sb, "%u", b->conc[j]);
                break;
            case 1:
                json_num(sb, st->qps);
                break;
            case 2:
                json_num(sb, st->p99_ms / 1e3);
                break;
            case 3:
                json_num(sb, st->p95_ms / 1e3);
                break;
            default:
                json_num(sb, st->avg_ms / 1e3);
                break;
            }
        }
        sb_printf(sb, "]");
    }
}

static void json_case(sbuf *sb, const bench *b, const case_result *cr, size_t ci)
{
    sb_printf(sb, "%s\n    {\"name\": ", ci ? "," : "");
    json_str(sb, cr->name);
    sb_printf(sb, ", \"type\": ");
    json_str(sb, cr->type);
    sb_printf(sb, ", \"filter\": ");
    json_str(sb, cr->filter[0] ? cr->filter : NULL);
    sb_printf(sb, ", \"filter_rate\": ");
    json_num(sb, cr->filter_rate);
    sb_printf(sb, ", \"filter_kept_rows\": ");
    if (cr->filter[0])
        sb_printf(sb, "%" PRIu64, cr->kept_rows);
    else
        sb_printf(sb, "null");
    sb_printf(sb, ", \"plan\": {");
    for (size_t i = 0; i < N_PLANS; i++)
        sb_printf(sb, "%s\"%s\": %" PRIu64, i ? ", " : "", plan_names[i], cr->plan[i]);
    sb_printf(sb, "}");
    sb_printf(sb, ", \"k\": %u, \"search_params\": {", cr->k);
    for (size_t j = 0; j < b->n_case_sp; j++) {
        sb_printf(sb, "%s", j ? ", " : "");
        json_str(sb, b->case_sp[j].key);
        sb_printf(sb, ": ");
        json_param_value(sb, b->case_sp[j].value);
    }
    sb_printf(sb, "},");
    json_vdb_keys(sb, b, cr, "\n     ");
    sb_printf(sb, ",\n     \"recall_at_10\": ");
    json_num(sb, cr->recall10);
    sb_printf(sb, ", \"ndcg_at_10\": ");
    json_num(sb, cr->ndcg10);
    sb_printf(sb, ", \"recall_at_100\": ");
    json_num(sb, cr->recall100);
    sb_printf(sb, ", \"ndcg_at_100\": ");
    json_num(sb, cr->ndcg100);
    if (cr->s_nq > 0) {
        sb_printf(sb, ",\n     \"serial\": {\"nq\": %zu, \"k\": %u, \"qps\": ", cr->s_nq, cr->k);
        json_num(sb, cr->s_qps);
        sb_printf(sb, ", \"latency_ms\": ");
        json_lat(sb, cr->s_avg, cr->s_p50, cr->s_p95, cr->s_p99);
        sb_printf(sb, ", \"max\": ");
        json_num(sb, cr->s_max);
        sb_printf(sb, "}}");
    } else {
        sb_printf(sb, ",\n     \"serial\": null");
    }
    if (cr->n_levels > 0) {
        sb_printf(sb,
                  ",\n     \"concurrency\": {\"duration_s\": %" PRIu64 ", \"interval_s\": %" PRIu64
                  ", \"levels\": [",
                  b->duration_s, b->interval_s);
        for (size_t j = 0; j < cr->n_levels; j++) {
            const bc_stats *st = &cr->levels[j];
            sb_printf(sb,
                      "%s\n       {\"concurrency\": %u, \"requests\": %" PRIu64
                      ", \"failures\": %" PRIu64 ", \"elapsed_s\": ",
                      j ? "," : "", b->conc[j], st->requests, st->failures);
            json_num(sb, st->elapsed_s);
            sb_printf(sb, ", \"qps\": ");
            json_num(sb, st->qps);
            sb_printf(sb, ", \"recall\": ");
            json_num(sb, st->recall);
            sb_printf(sb, ", \"latency_ms\": ");
            json_lat(sb, st->avg_ms, st->p50_ms, st->p95_ms, st->p99_ms);
            sb_printf(sb, ", \"min\": ");
            json_num(sb, st->min_ms);
            sb_printf(sb, ", \"max\": ");
            json_num(sb, st->max_ms);
            sb_printf(sb, "}}");
        }
        sb_printf(sb, "]}");
    } else {
        sb_printf(sb, ",\n     \"concurrency\": null");
    }
    if (cr->n_stages > 0) {
        sb_printf(sb, ",\n     \"streaming\": {\"insert_rate\": ");
        json_num(sb, cr->stream_rate);
        sb_printf(sb, ", \"achieved_insert_rate\": ");
        json_num(sb,
                 cr->stream_insert_s > 0 ? (double)b->base.n / cr->stream_insert_s : (double)NAN);
        sb_printf(sb, ", \"concurrency\": %u, \"segment_max_bytes\": %" PRIu64 ", \"stages\": [",
                  cr->stream_conc, cr->stream_segment_bytes);
        for (unsigned j = 0; j < cr->n_stages; j++) {
            const bc_stage *st = &cr->stages[j];
            sb_printf(sb, "%s\n       {\"stage\": %u, \"fraction\": ", j ? "," : "", st->stage);
            json_num(sb, st->fraction);
            sb_printf(sb,
                      ", \"rows\": %zu, \"indexed_rows\": %" PRIu64 ", \"elapsed_s\": ", st->rows,
                      st->indexed_rows);
            json_num(sb, st->st.elapsed_s);
            sb_printf(sb, ", \"requests\": %" PRIu64 ", \"failures\": %" PRIu64 ", \"qps\": ",
                      st->st.requests, st->st.failures);
            json_num(sb, st->st.qps);
            sb_printf(sb, ", \"recall\": ");
            json_num(sb, st->st.recall);
            sb_printf(sb, ", \"latency_ms\": ");
            json_lat(sb, st->st.avg_ms, st->st.p50_ms, st->st.p95_ms, st->st.p99_ms);
            sb_printf(sb, "}}");
        }
        sb_printf(sb, "]}");
    }
    sb_printf(sb, "}");
}

/* Appended after the schema-1 keys (docs/BENCH-RESULTS.md). */
static void json_schema2(sbuf *sb, const bench *b)
{
    sb_printf(sb, ",\n  \"case\": ");
    json_str(sb, b->preset != NULL ? b->preset->name : "custom");
    sb_printf(sb, ",\n  \"build_device\": ");
    json_str(sb, b->build_device[0] ? b->build_device : "cpu");
    sb_printf(sb, ",\n  \"gt_cache\": ");
    if (b->gt_cache_status != NULL) {
        sb_printf(sb, "{\"path\": ");
        json_str(sb, b->cache_stem[0] ? b->cache_stem : b->gt_path);
        sb_printf(sb, ", \"status\": ");
        json_str(sb, b->gt_cache_status);
        sb_printf(sb, "}");
    } else {
        sb_printf(sb, "null");
    }
    if (b->n_cases > 0) {
        sb_printf(sb, ",");
        json_vdb_keys(sb, b, &b->cases[0], "\n  ");
    }
    sb_printf(sb, ",\n  \"cases\": [");
    for (size_t j = 0; j < b->n_cases; j++)
        json_case(sb, b, &b->cases[j], j);
    sb_printf(sb, "\n  ]");
}

/* DAMON's sampling interval in microseconds when a kdamond is running on this machine (0 when
 * none is, or /sys does not say). On the paravirtualised VMs we measure on, its access sampling
 * slowed searches from two threads 5-30x for ~0.1 s after every sample, while one thread was
 * not slowed (docs/internals/SEARCH-SPEED.md entry 9), so the summary names it beside the
 * figures. */
static unsigned long damon_sample_us(void)
{
    static const char dir[] = "/sys/kernel/mm/damon/admin/kdamonds";
    unsigned long best = 0;
    for (unsigned i = 0; i < 16; i++) {
        char path[160], buf[32] = "";
        (void)snprintf(path, sizeof path, "%s/%u/state", dir, i);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            break;
        bool on = fgets(buf, sizeof buf, f) != NULL && strncmp(buf, "on", 2) == 0;
        (void)fclose(f);
        (void)snprintf(path, sizeof path, "%s/%u/contexts/0/monitoring_attrs/intervals/sample_us",
                       dir, i);
        f = on ? fopen(path, "r") : NULL;
        if (f == NULL)
            continue;
        unsigned long us = 0;
        if (fgets(buf, sizeof buf, f) != NULL)
            us = strtoul(buf, NULL, 10);
        (void)fclose(f);
        best = best == 0 || (us > 0 && us < best) ? us : best;
    }
    return best;
}

static void json_document(sbuf *sb, const bench *b)
{
    char date[32] = "unknown";
    time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv) == NULL ||
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv) == 0)
        snprintf(date, sizeof date, "unknown");
    sb_printf(sb, "{\n  \"tool\": \"sextant bench\",\n  \"schema_version\": 2,\n  \"version\": ");
    json_str(sb, sx_version());
    sb_printf(sb, ",\n  \"date\": ");
    json_str(sb, date);
    sb_printf(sb, ",\n  \"dataset\": {\"kind\": ");
    json_str(sb, b->is_synthetic ? "synthetic" : (b->is_hdf5 ? "hdf5" : "file"));
    sb_printf(sb, ", \"name\": "); /* a well-known data set's name, else null */
    json_str(sb, b->is_synthetic ? NULL : ds_known_name(b->base_path));
    sb_printf(sb, ", \"base\": ");
    json_str(sb, b->base_path);
    sb_printf(sb, ", \"query\": ");
    json_str(sb, b->query_path);
    sb_printf(sb, ", \"gt\": ");
    json_str(sb, b->gt_path);
    sb_printf(sb, ", \"gt_dist\": ");
    json_str(sb, b->gt_dist_path);
    sb_printf(sb, ", \"gt_source\": ");
    json_str(sb, b->gt.source);
    if (b->is_synthetic) {
        sb_printf(sb, ", \"synthetic\": {\"generator\": ");
        json_str(sb, ds_gen_name(b->gen));
        sb_printf(sb, ", \"n\": %zu, \"dim\": %zu, \"seed\": %" PRIu64 ", \"nq\": %zu}", b->syn_n,
                  b->syn_dim, b->syn_seed, b->queries.n);
    }
    sb_printf(sb, ", \"data_hash\": ");
    json_str(sb, b->data_hash[0] ? b->data_hash : NULL);
    sb_printf(sb, "},\n  \"n\": %zu,\n  \"dim\": %zu,\n  \"nq\": %zu,\n  \"metric\": ", b->base.n,
              b->base.dim, b->queries.n);
    json_str(sb, cli_metric_name(b->metric));
    sb_printf(sb, ",\n  \"index\": ");
    json_str(sb, b->kind->name);
    sb_printf(sb, ",\n  \"index_type\": ");
    json_str(sb, b->kind->type);
    sb_printf(sb, ",\n  \"build_params\": {");
    for (size_t j = 0; j < b->build.n; j++) {
        sb_printf(sb, "%s", j ? ", " : "");
        json_str(sb, b->build.p[j].key);
        sb_printf(sb, ": ");
        json_param_value(sb, b->build.p[j].value);
    }
    sb_printf(sb, "},\n  \"index_params\": ");
    json_str(sb, b->index_params);
    sb_printf(sb, ",\n  \"swept_param\": ");
    json_str(sb, b->sweep >= 0 ? b->sp[b->sweep].key : NULL);
    sb_printf(sb, ",\n  \"insert_s\": ");
    json_num(sb, b->insert_s);
    sb_printf(sb, ",\n  \"build_s\": ");
    json_num(sb, b->build_s);
    sb_printf(sb, ",\n  \"load_s\": ");
    json_num(sb, b->insert_s + b->build_s);
    sb_printf(sb, ",\n  \"flush_s\": ");
    json_num(sb, b->flush_s);
    sb_printf(sb, ",\n  \"query_s\": ");
    json_num(sb, b->query_s);
    if (b->import_url != NULL) {
        /* raw file -> query-ready (the seed pipeline): load_s, split into the job, the merge of
         * its segments and the build */
        sb_printf(sb, ",\n  \"import\": {\"url\": ");
        json_str(sb, b->import_url);
        sb_printf(sb,
                  ", \"rows\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"segments\": %u, "
                  "\"merged_segments\": %u, \"job_s\": %.3f, \"merge_s\": %.3f, \"rows_per_s\": ",
                  b->import_rows, b->import_bytes, b->import_segments, b->merged_segments,
                  b->import_job_s, b->merge_s);
        json_num(sb, b->import_job_s > 0 ? (double)b->import_rows / b->import_job_s : (double)NAN);
        sb_printf(sb, ", \"mb_per_s\": ");
        json_num(sb, b->import_job_s > 0 ? (double)b->import_bytes / 1e6 / b->import_job_s
                                         : (double)NAN);
        sb_printf(sb, ", \"query_ready_s\": %.3f}", b->insert_s + b->build_s);
    }
    sb_printf(sb, ",\n  \"storage\": ");
    json_str(sb, b->storage_url != NULL ? b->storage_url : "local");
    if (b->cache_mb > 0) {
        const sx_cache_stats *cs = &b->cache_st;
        sb_printf(sb,
                  ",\n  \"cache\": {\"limit_bytes\": %" PRIu64 ", \"reopen_s\": %.3f, "
                  "\"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"waits\": %" PRIu64
                  ", \"evictions\": %" PRIu64 ", \"fetches\": %" PRIu64
                  ", \"bytes_fetched\": %" PRIu64 ", \"fetch_errors\": %" PRIu64
                  ", \"local_evictions\": %" PRIu64 ", \"local_fetches\": %" PRIu64 "}",
                  cs->limit_bytes, b->reopen_s, cs->hits, cs->misses, cs->waits, cs->evictions,
                  cs->fetches, cs->bytes_fetched, cs->fetch_errors, cs->local_evictions,
                  cs->local_fetches);
    }
    json_io_profile(sb, b);
    sb_printf(sb,
              ",\n  \"memory_bytes\": %" PRIu64 ",\n  \"index_memory_bytes\": %" PRIu64
              ",\n  \"index_disk_bytes\": %" PRIu64 ",\n  \"collection_memory_bytes\": %" PRIu64
              ",\n  \"raw_vector_bytes\": %" PRIu64 ",\n  \"simd\": ",
              total_memory(b), b->index_memory, b->index_disk, b->collection_memory,
              (uint64_t)b->base.n * b->base.dim * sizeof(float));
    json_str(sb, sx_simd_level());
    sb_printf(sb, ",\n  \"damon_sample_us\": %lu", damon_sample_us());
    sb_printf(sb,
              ",\n  \"threads\": %u,\n  \"batch\": %zu,\n  \"segment_max_bytes\": %" PRIu64
              ",\n  \"build_memory_limit\": %" PRIu64 ",\n  \"k\": %u,\n  \"recall_kind\": ",
              b->threads, b->batch,
              b->segment_bytes > 0 ? b->segment_bytes
                                   : (uint64_t)b->base.n * b->base.dim * sizeof(float) + (1u << 20),
              b->build_memory_limit, b->k);
    json_str(sb, b->gt.dists != NULL ? "distance-threshold" : "id-set");
    if (is_diskann(b) && !b->io_reported) {
        sb_printf(sb, ",\n  \"io_note\": ");
        json_str(sb, "the engine reported no index reads (sx_index_info.read_ios stayed 0)");
    }
    sb_printf(sb, ",\n  \"runs\": ");
    json_runs(sb, b, &b->ours, is_diskann(b));
    sb_printf(sb, ",\n  \"peers\": {");
    for (size_t pi = 0; pi < b->n_peer; pi++) {
        const sys_result *p = &b->peer[pi];
        sb_printf(sb, "%s", pi ? ",\n    " : "");
        json_str(sb, p->name);
        sb_printf(sb, ": {\"build_s\": ");
        json_num(sb, p->build_s);
        sb_printf(sb, ", \"memory_bytes\": %" PRIu64 ", \"index\": ", p->memory_bytes);
        json_str(sb, p->desc);
        sb_printf(sb, ", \"runs\": ");
        json_runs(sb, b, p, false);
        sb_printf(sb, "}");
    }
    sb_printf(sb, "}");
    if (b->peer_note[0] != '\0') {
        sb_printf(sb, ",\n  \"peers_note\": ");
        json_str(sb, b->peer_note);
    }
    if (b->n_peer > 0)
        json_ratios(sb, b);
    json_filter_sweeps(sb, b);
    json_schema2(sb, b);
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

static void print_peer_table(const bench *b, const sys_result *peer)
{
    char hb[32], ho[32], hi[32];
    const char *name = peer->name;
    /* Both shares: a library index that keeps no vectors (IVF_SQ8/IVF_PQ without refine)
     * compares with our index alone; one that copies them (flat codes, HNSW storage, refine)
     * with the collection, which holds the vectors once. */
    printf("\n%s %s: build %.2f s, memory %s; sextant index %s (%.2fx), collection with the "
           "vectors %s (%.2fx)\n",
           name, peer->desc, peer->build_s, cli_human_bytes(peer->memory_bytes, hb, sizeof hb),
           cli_human_bytes(b->index_memory, hi, sizeof hi),
           ratio((double)b->index_memory, (double)peer->memory_bytes),
           cli_human_bytes(total_memory(b), ho, sizeof ho),
           ratio((double)total_memory(b), (double)peer->memory_bytes));
    char head[32];
    snprintf(head, sizeof head, "vs %s", name);
    printf("%-18s %7s  %11s %11s %11s %11s %9s\n", head, "threads", "recall", name, "QPS", name,
           "QPS ratio");
    size_t n = b->ours.n_runs < peer->n_runs ? b->ours.n_runs : peer->n_runs;
    for (size_t i = 0; i < n; i++) {
        const run_result *o = &b->ours.runs[i], *p = &peer->runs[i];
        printf("%-18s %7u  %11.4f %11.4f %11.1f %11.1f %9.2f\n", o->params[0] ? o->params : "-",
               o->threads, o->recall, p->recall, o->qps, p->qps, p->qps > 0 ? o->qps / p->qps : 0);
    }
    double qo = qps_at_recall(&b->ours, RECALL_TARGET);
    double qp = qps_at_recall(peer, RECALL_TARGET);
    if (isnan(qo) || isnan(qp)) {
        char so[32] = "n/a", sp[32] = "n/a";
        if (!isnan(qo))
            snprintf(so, sizeof so, "%.1f", qo);
        if (!isnan(qp))
            snprintf(sp, sizeof sp, "%.1f", qp);
        printf("QPS at recall %.2f (interpolated): not bracketed by the runs of both (sextant "
               "%s, %s %s)\n",
               RECALL_TARGET, so, name, sp);
    } else {
        printf("QPS at recall %.2f (interpolated): sextant %.1f, %s %.1f, ratio %.2f\n",
               RECALL_TARGET, qo, name, qp, qo / qp);
    }
    printf("build time ratio (sextant / %s): %.2f (load time ratio %.2f)\n", name,
           ratio(b->build_s, peer->build_s), ratio(b->insert_s + b->build_s, peer->build_s));
}

static void print_filter_sweeps(const bench *b)
{
    for (size_t f = 0; f < b->n_filters; f++) {
        const sys_result *o = &b->fs_ours[f], *p = &b->fs_faiss[f];
        if (o->n_runs == 0)
            continue;
        char filter[96];
        filter_expr(b, f, filter, sizeof filter);
        printf("\nfiltered sweep, filter %s (%.4g%% of the rows; one thread, recall@%u against "
               "the filtered ground truth; faiss: %s)\n",
               filter, 100.0 * (1.0 - b->filter_rates[f]), b->k, p->n_runs ? p->desc : "not run");
        printf("%-18s %11s %11s %11s %11s %9s  %s\n", "params", "recall", "faiss", "QPS", "faiss",
               "QPS ratio", "sextant plan");
        for (size_t i = 0; i < o->n_runs; i++) {
            const run_result *r = &o->runs[i], *q = i < p->n_runs ? &p->runs[i] : NULL;
            printf("%-18s %11.4f %11.4f %11.1f %11.1f %9.2f  %s\n", r->params[0] ? r->params : "-",
                   r->recall, q ? q->recall : (double)NAN, r->qps, q ? q->qps : (double)NAN,
                   q && q->qps > 0 ? r->qps / q->qps : (double)NAN, r->plan);
        }
        size_t io = 0, ip = 0;
        double qo = fastest_reaching(o, RECALL_TARGET, &io);
        double qp = p->n_runs ? fastest_reaching(p, RECALL_TARGET, &ip) : (double)NAN;
        if (isnan(qo) || isnan(qp)) {
            char so[96] = "never reaches it", sp[96] = "never reaches it";
            if (!isnan(qo))
                snprintf(so, sizeof so, "%.1f QPS (%s)", qo, o->runs[io].params);
            if (!isnan(qp))
                snprintf(sp, sizeof sp, "%.1f QPS (%s)", qp, p->runs[ip].params);
            printf("fastest at recall >= %.2f: sextant %s, faiss %s%s\n", RECALL_TARGET, so,
                   p->n_runs ? sp : "not run", " (no ratio)");
        } else
            printf("fastest at recall >= %.2f: sextant %.1f QPS (%s), faiss %.1f QPS (%s): "
                   "ratio %.2f\n",
                   RECALL_TARGET, qo, o->runs[io].params, qp, p->runs[ip].params, qo / qp);
    }
}

static void fmt_num(char *buf, size_t len, int prec, double v)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.*f", prec, v);
}

/* The cases' tables and the headline (VectorDBBench's numbers of the performance case). */
static void print_cases(const bench *b)
{
    if (b->n_cases == 0)
        return;
    char r10[16], r100[16], n100[16], p50[16], p95[16], p99[16], qps[16], sq[16];
    printf("\n%-14s %5s %9s %9s %9s %11s %9s %9s %9s %11s\n", "case", "k", "recall@10", "recall@k",
           "ndcg@k", "serial QPS", "p50 ms", "p95 ms", "p99 ms", "max QPS");
    for (size_t j = 0; j < b->n_cases; j++) {
        const case_result *cr = &b->cases[j];
        const char *src;
        double mq = case_max_qps(cr, &src);
        fmt_num(r10, sizeof r10, 4, cr->recall10);
        fmt_num(r100, sizeof r100, 4, cr->recall);
        fmt_num(n100, sizeof n100, 4, cr->ndcg);
        fmt_num(sq, sizeof sq, 1, cr->s_qps);
        fmt_num(qps, sizeof qps, 1, mq);
        fmt_num(p50, sizeof p50, 3, cr->s_p50);
        fmt_num(p95, sizeof p95, 3, cr->s_p95);
        fmt_num(p99, sizeof p99, 3, cr->s_p99);
        printf("%-14s %5u %9s %9s %9s %11s %9s %9s %9s %11s\n", cr->name, cr->k, r10, r100, n100,
               sq, p50, p95, p99, qps);
        if (cr->n_levels > 0) {
            printf("  %11s %10s %9s %10s %9s %9s %9s %9s\n", "concurrency", "requests", "failures",
                   "qps", "avg_ms", "p95_ms", "p99_ms", "recall");
            for (size_t l = 0; l < cr->n_levels; l++) {
                const bc_stats *st = &cr->levels[l];
                printf("  %11u %10" PRIu64 " %9" PRIu64 " %10.1f %9.3f %9.3f %9.3f %9.4f\n",
                       b->conc[l], st->requests, st->failures, st->qps, st->avg_ms, st->p95_ms,
                       st->p99_ms, st->recall);
            }
        }
        if (cr->n_stages > 0) {
            printf("  %5s %9s %9s %9s %10s %9s %9s %9s\n", "stage", "rows", "indexed", "requests",
                   "qps", "recall", "p95_ms", "p99_ms");
            for (unsigned s2 = 0; s2 < cr->n_stages; s2++) {
                const bc_stage *st = &cr->stages[s2];
                printf("  %5u %9zu %9" PRIu64 " %9" PRIu64 " %10.1f %9.4f %9.3f %9.3f\n", st->stage,
                       st->rows, st->indexed_rows, st->st.requests, st->st.qps, st->st.recall,
                       st->st.p95_ms, st->st.p99_ms);
            }
            printf("  insert %.1f s at %.0f rows/s (target %.0f)\n", cr->stream_insert_s,
                   cr->stream_insert_s > 0 ? (double)b->base.n / cr->stream_insert_s : 0.0,
                   cr->stream_rate);
        }
    }
    const case_result *p = &b->cases[0];
    const char *src;
    double mq = case_max_qps(p, &src);
    fmt_num(r10, sizeof r10, 4, p->recall10);
    fmt_num(r100, sizeof r100, 4, p->recall100);
    fmt_num(n100, sizeof n100, 4, p->ndcg100);
    fmt_num(qps, sizeof qps, 1, mq);
    printf("\nheadline: %s %s on %zu x %zu (%s): load %.1f s (insert %.1f s + optimize %.1f s, "
           "built on %s)\n",
           b->kind->type, b->index_params, b->base.n, b->base.dim, cli_metric_name(b->metric),
           p->insert_s + p->optimize_s, p->insert_s, p->optimize_s,
           b->build_device[0] ? b->build_device : "cpu");
    printf("headline: recall@10 %s, recall@100 %s, ndcg@100 %s, serial p99 %.3f ms, QPS %s (%s)\n",
           r10, r100, n100, p->s_p99, qps, src);
    for (size_t pi = 0; pi < b->n_peer; pi++) {
        double qo = qps_at_recall(&b->ours, RECALL_TARGET);
        double qp = qps_at_recall(&b->peer[pi], RECALL_TARGET);
        if (!isnan(qo) && !isnan(qp))
            printf("headline: single-thread QPS at recall@%u %.2f: %.2fx %s\n", b->k, RECALL_TARGET,
                   qo / qp, b->peer[pi].name);
    }
    (void)fflush(stdout);
}

static void print_summary(const bench *b)
{
    char hb[32], hi[32], hc[32], hd[32];
    double load_s = b->insert_s + b->build_s;
    if (b->is_synthetic)
        printf("\nsextant bench: synthetic data (%s, seed %" PRIu64 ") (%zu x %zu), %zu queries, "
               "metric %s, k=%u, simd %s\n",
               ds_gen_name(b->gen), b->syn_seed, b->base.n, b->base.dim, b->queries.n,
               cli_metric_name(b->metric), b->k, sx_simd_level());
    else
        printf("\nsextant bench: %s (%zu x %zu), %zu queries, metric %s, k=%u, simd %s\n",
               ds_basename(b->base_path), b->base.n, b->base.dim, b->queries.n,
               cli_metric_name(b->metric), b->k, sx_simd_level());
    unsigned long damon_us = damon_sample_us();
    if (damon_us > 0)
        printf("machine: DAMON is on (access sampled every %.0f ms): on paravirtualised VMs it "
               "slows searches from several threads in bursts (SEARCH-SPEED.md entry 9)\n",
               (double)damon_us / 1e3);
    printf("index %s (%s), recall: %s, ground truth %s\n", b->kind->type,
           b->index_params[0] ? b->index_params : "defaults",
           b->gt.dists != NULL ? "distance threshold (d_k + 1e-3)" : "id set", b->gt.source);
    if (b->n_sp_keys > 1) {
        printf("search params held constant:");
        for (size_t j = 0; j < b->n_sp_keys; j++) {
            if ((long)j != b->sweep)
                printf(" %s=%s", b->sp[j].key, b->sp[j].vals[0]);
        }
        printf("\n");
    }
    if (b->import_url != NULL)
        printf("load: import job %.2f s (%.0f rows/s, %.1f MB/s) + merge of %u segments %.2f s, "
               "build %.2f s: raw file -> query-ready %.2f s\n",
               b->import_job_s,
               b->import_job_s > 0 ? (double)b->import_rows / b->import_job_s : 0.0,
               b->import_job_s > 0 ? (double)b->import_bytes / 1e6 / b->import_job_s : 0.0,
               b->import_segments, b->merge_s, b->build_s, load_s);
    else
        printf("load: insert %.2f s (%.0f rows/s), build %.2f s, total %.2f s\n", b->insert_s,
               b->insert_s > 0 ? (double)b->base.n / b->insert_s : 0.0, b->build_s, load_s);
    printf("memory: %s (collection, of which index %s; raw vectors %s)\n",
           cli_human_bytes(total_memory(b), hb, sizeof hb),
           cli_human_bytes(b->index_memory, hi, sizeof hi),
           cli_human_bytes((uint64_t)b->base.n * b->base.dim * sizeof(float), hc, sizeof hc));
    if (b->index_disk > 0 || is_diskann(b))
        printf("disk: index files %s%s\n", cli_human_bytes(b->index_disk, hd, sizeof hd),
               is_diskann(b) && !b->io_reported ? "; I/O per query not reported by the engine"
                                                : "");
    if (b->storage_url != NULL)
        printf("storage: %s (endpoint %s)\n", b->storage_url,
               b->s3_endpoint != NULL ? b->s3_endpoint : "default");
    if (b->cache_mb > 0) {
        const sx_cache_stats *cs = &b->cache_st;
        uint64_t blocks = cs->hits + cs->misses + cs->waits;
        printf("cache: limit %" PRIu64 " MiB%s; block cache (%" PRIu64 " B blocks): %" PRIu64
               " hits, %" PRIu64 " misses (hit rate %.1f%%), %" PRIu64 " coalesced, %" PRIu64
               " evictions, %" PRIu64 " ranged GETs (%s), %" PRIu64
               " errors; local copies: %" PRIu64 " evicted, %" PRIu64 " fetched again\n",
               b->cache_mb, b->reopen_s > 0 ? "" : " (no --storage: local files only)",
               cs->block_bytes, cs->hits, cs->misses,
               blocks ? 100.0 * (double)cs->hits / (double)blocks : 0.0, cs->waits, cs->evictions,
               cs->fetches, cli_human_bytes(cs->bytes_fetched, hd, sizeof hd), cs->fetch_errors,
               cs->local_evictions, cs->local_fetches);
        if (b->reopen_s > 0)
            printf("open from the store (fresh directory, before the queries): %.2f s\n",
                   b->reopen_s);
    }
    print_io_profile(b);
    if (b->peer_note[0] != '\0')
        printf("peers: %s\n", b->peer_note);
    for (size_t pi = 0; pi < b->n_peer; pi++)
        print_peer_table(b, &b->peer[pi]);
    print_filter_sweeps(b);
    print_cases(b);
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
    for (size_t j = 0; j < MAX_FILTERS; j++) {
        free(b->filter_gt[j].ids);
        free(b->filter_gt[j].dists);
    }
    if (b->stage_gt != NULL) {
        for (unsigned j = 0; j < b->stream_stages; j++) {
            free(b->stage_gt[j].ids);
            free(b->stage_gt[j].dists);
        }
        free(b->stage_gt);
    }
    for (size_t j = 0; j < b->n_cases; j++)
        free(b->cases[j].stages);
    cli_params_fini(&b->case_params);
    free(b->html_json);
    free(b->ours.runs);
    for (size_t j = 0; j < MAX_PEERS; j++)
        free(b->peer[j].runs);
    for (size_t j = 0; j < MAX_FILTERS; j++) {
        free(b->fs_ours[j].runs);
        free(b->fs_faiss[j].runs);
    }
    cli_params_fini(&b->build);
}

int cli_bench(int argc, char **argv)
{
    /* `sextant bench report|compare FILE...`: reports over result files (report.c); `sextant
     * bench generate`: a generated dataset written to files (bench_generate.c) */
    if (argc > 1 && strcmp(argv[1], "report") == 0)
        return cli_bench_report(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "compare") == 0)
        return cli_bench_compare(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "generate") == 0)
        return cli_bench_generate(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--target") == 0 || strncmp(argv[i], "--target=", 9) == 0)
            return cli_bench_remote(argc, argv);
    }
    bench *b = calloc(1, sizeof *b);
    if (b == NULL)
        return cli_fail("bench", "out of memory");
    b->metric = SX_METRIC_L2;
    b->k = 10;
    b->threads = 1;
    b->runs = 1;
    b->batch = 1000;
    b->peers = -1;
    b->sweep = -1;
    b->duration_s = DEF_DURATION;
    b->interval_s = DEF_INTERVAL;
    b->stream_conc = DEF_STREAM_C;
    b->stream_stages = DEF_STAGES;
    int rc = parse_args(b, argc, argv);
    if (rc != 0) {
        if (rc == CLI_EXIT_USAGE)
            fprintf(stderr, "Run 'sextant bench --help' for usage.\n");
        else
            rc = CLI_EXIT_OK;
        goto out;
    }
    rc = CLI_EXIT_FAIL;
    /* I/O profile windows: phases 3, 5 and 6 (not the ground truth, not the peers) */
    sx_io_profile p0, p1;
    if (load_inputs(b) != 0 || resolve_params(b) != 0 || setup_db(b) != 0)
        goto out;
    sx_io_profile_get(&p0);
    if (insert_base(b) != 0)
        goto out;
    sx_io_profile_get(&p1);
    prof_add_delta(&b->io_prof, &p1, &p0);
    if (ensure_gt(b) != 0)
        goto out;
    sx_io_profile_get(&p0);
    if (build_index(b) != 0)
        goto out;
    sx_io_profile_get(&p1);
    prof_add_delta(&b->io_prof, &p1, &p0);
    if (reopen_from_store(b) != 0)
        goto out;
    sx_io_profile_get(&p0);
    if (run_ours(b) != 0)
        goto out;
    sx_io_profile_get(&p1);
    prof_add_delta(&b->io_prof, &p1, &p0);
    sx_db_cache_stats(b->db, &b->cache_st);
    if (run_filter_sweeps(b) != 0)
        goto out;
    if (run_peers(b) != 0)
        goto out;
    if (run_cases(b) != 0)
        goto out;
    print_summary(b);
    if (b->json_path != NULL && write_json(b) != 0)
        goto out;
    if (b->html_path != NULL) {
        const char *paths[1] = { b->json_path };
        if (report_write_html(paths, 1, b->html_path) != 0)
            goto out;
        printf("report: %s\n", b->html_path);
    }
    rc = CLI_EXIT_OK;
out:
    bench_fini(b);
    free(b);
    return rc;
}
