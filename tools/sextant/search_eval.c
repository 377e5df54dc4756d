/*
 * search_eval.c: `sextant search --gt FILE`: measures an existing collection instead of printing
 * hits. For each value of --sweep KEY=V1,V2,... (or once, without it) every query is sent alone
 * (nq = 1 per sx_search, ann-benchmarks' protocol) from --threads threads, and one line reports
 * recall@k against the ground truth, QPS (queries / wall time), p50 / p99 latency and, for
 * file-backed indexes (DISKANN), read I/Os and bytes per query from sx_index_info's counters.
 * This is the query half of bench/beyond_ram.sh: the collection was written by another process
 * (`sextant import`), so this process's peak memory is that of open + search alone.
 *
 * Recall (bench_metrics.h): with --gt-dist, ann-benchmarks' distance-threshold recall, the
 * engine's distances converted to the ground truth's form (squared L2 -> Euclidean, as
 * `sextant bench generate` writes it; similarities as they are); else the id-set overlap with
 * gt.ivecs. Ids are the collection's int64 primary key, which `sextant import` sets to the row
 * number of the file (what ground-truth files list).
 *
 * Threading: workers take query numbers from an atomic counter (relaxed; results are published
 * by pthread_join) and write only their own queries' slots; the first error is kept under a
 * mutex.
 */
#include "search_eval.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_metrics.h"
#include "cli.h"
#include "datasets.h"

#define MAX_SWEEP   32
#define MAX_THREADS 256

typedef struct eval_run {
    sx_collection *c;
    const ds_matrix *q;
    uint32_t k;
    int64_t id_offset;
    sx_param params[CLI_MAX_PARAMS + 1];
    size_t n_params;
    atomic_size_t next;
    double *lat;   /* per query, seconds */
    int64_t *ids;  /* nq * k, -1 = no hit */
    float *dist;   /* nq * k */
    size_t *n_got; /* per query */
    pthread_mutex_t mu;
    sx_status st;  /* first error, under mu */
    char err[512]; /* its message (sx_errmsg is per thread), under mu */
} eval_run;

static void *worker(void *arg)
{
    eval_run *r = arg;
    const size_t dim = r->q->dim;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (i >= r->q->n)
            break;
        sx_search_req req = { .queries = r->q->f + i * dim,
                              .nq = 1,
                              .k = r->k,
                              .params = r->params,
                              .n_params = r->n_params,
                              .metric = -1 };
        sx_rowset *rs = NULL;
        double t0 = cli_now();
        sx_status st = sx_search(r->c, &req, &rs);
        size_t got = 0;
        if (st == SX_OK && rs->nq == 1 && rs->n_cols > 0 && rs->cols[0].type == SX_FIELD_INT64) {
            got = rs->topks[0] < r->k ? rs->topks[0] : r->k;
            const int64_t *pk = rs->cols[0].data;
            for (size_t j = 0; j < got; j++) {
                r->ids[i * r->k + j] = pk[j] - r->id_offset;
                r->dist[i * r->k + j] = rs->distances[j];
            }
        } else if (st == SX_OK) {
            st = SX_EINVAL; /* the key is not INT64: the ids cannot be row numbers */
        }
        sx_rowset_free(rs);
        r->lat[i] = cli_now() - t0;
        r->n_got[i] = got;
        if (st != SX_OK) {
            pthread_mutex_lock(&r->mu);
            if (r->st == SX_OK) {
                r->st = st;
                (void)snprintf(r->err, sizeof r->err, "%s",
                               st == SX_EINVAL && !sx_errmsg()[0]
                                   ? "the primary key is not INT64: hits are not row numbers"
                                   : sx_errmsg());
            }
            pthread_mutex_unlock(&r->mu);
            break;
        }
    }
    return NULL;
}

static void index_io(sx_collection *c, uint64_t *ios, uint64_t *bytes)
{
    sx_index_info ii;
    *ios = *bytes = 0;
    if (sx_index_describe(c, &ii) == SX_OK) {
        *ios = ii.read_ios;
        *bytes = ii.read_bytes;
    }
}

/* Mean recall@k over the queries (definition in the file comment). */
static double
mean_recall(const eval_run *r, sx_metric metric, const ds_matrix *gt, const ds_matrix *gt_dist)
{
    const size_t k = r->k;
    double sum = 0;
    float *conv = malloc(k * sizeof *conv);
    if (conv == NULL)
        return NAN;
    for (size_t i = 0; i < r->q->n; i++) {
        size_t got = r->n_got[i];
        if (gt_dist != NULL) {
            bool higher = metric != SX_METRIC_L2;
            for (size_t j = 0; j < got; j++) {
                float d = r->dist[i * k + j];
                conv[j] = higher ? d : sqrtf(d > 0 ? d : 0.0f);
            }
            sum += bm_recall_threshold(conv, got, gt_dist->f + i * gt_dist->dim, k, higher,
                                       BM_RECALL_EPS);
        } else {
            sum += bm_recall_ids(r->ids + i * k, got, gt->i + i * gt->dim, k);
        }
    }
    free(conv);
    return sum / (double)r->q->n;
}

static int run_setting(const search_eval_opts *o,
                       eval_run *r,
                       sx_metric metric,
                       const ds_matrix *gt,
                       const ds_matrix *gt_dist,
                       const char *label)
{
    uint64_t ios0, bytes0, ios1, bytes1;
    pthread_t th[MAX_THREADS];
    atomic_store_explicit(&r->next, 0, memory_order_relaxed);
    r->st = SX_OK;
    r->err[0] = '\0';
    index_io(r->c, &ios0, &bytes0);
    double t0 = cli_now();
    unsigned started = 0;
    for (; started < o->threads; started++) {
        if (pthread_create(&th[started], NULL, worker, r) != 0)
            break;
    }
    if (started == 0)
        (void)worker(r);
    for (unsigned t = 0; t < started; t++)
        (void)pthread_join(th[t], NULL);
    double wall = cli_now() - t0;
    index_io(r->c, &ios1, &bytes1);
    if (r->st != SX_OK)
        return cli_fail("search", "search: %s: %s", sx_status_str(r->st),
                        r->err[0] ? r->err : "(no message)");
    const size_t nq = r->q->n;
    double rec = mean_recall(r, metric, gt, gt_dist);
    bm_sort(r->lat, nq);
    printf("%-22s %8.4f %9.1f %9.3f %9.3f %9.3f", label, rec, (double)nq / wall,
           bm_percentile(r->lat, nq, 0.50) * 1e3, bm_percentile(r->lat, nq, 0.99) * 1e3,
           bm_mean(r->lat, nq) * 1e3);
    if (ios1 > ios0 || bytes1 > bytes0)
        printf(" %9.1f %9.1f", (double)(ios1 - ios0) / (double)nq,
               (double)(bytes1 - bytes0) / (double)nq / 1024.0);
    else
        printf(" %9s %9s", "-", "-");
    printf("\n");
    (void)fflush(stdout);
    return CLI_EXIT_OK;
}

int search_eval(const search_eval_opts *o,
                sx_collection *c,
                const ds_matrix *q,
                const sx_param *params,
                size_t n_params)
{
    ds_matrix gt = { 0 }, gt_dist = { 0 };
    char err[512], store[1024];
    const char *vals[MAX_SWEEP];
    int n_vals = 0, rc = CLI_EXIT_FAIL;
    char key[64] = "";
    eval_run *r = calloc(1, sizeof *r);
    if (r == NULL)
        return cli_fail("search", "out of memory");
    pthread_mutex_init(&r->mu, NULL);
    if (ds_load(o->gt, q->n, &gt, err, sizeof err) != 0 ||
        (o->gt_dist != NULL && ds_load(o->gt_dist, q->n, &gt_dist, err, sizeof err) != 0)) {
        rc = cli_fail("search", "%s", err);
        goto out;
    }
    if (gt.type != DS_I32 || gt.n < q->n || gt.dim < o->k) {
        rc = cli_fail("search",
                      "%s: need %zu rows of at least %" PRIu32 " ids (.ivecs), has %zu x %zu",
                      o->gt, q->n, o->k, gt.n, gt.dim);
        goto out;
    }
    if (o->gt_dist != NULL && (gt_dist.type != DS_F32 || gt_dist.n < q->n || gt_dist.dim < o->k)) {
        rc = cli_fail("search", "%s: need %zu rows of at least %" PRIu32 " distances (.fvecs)",
                      o->gt_dist, q->n, o->k);
        goto out;
    }
    if (o->sweep != NULL) {
        const char *eq = strchr(o->sweep, '=');
        if (eq == NULL || eq == o->sweep || (size_t)(eq - o->sweep) >= sizeof key) {
            rc = cli_usage_error("search", "--sweep '%s' is not KEY=V1,V2,...", o->sweep);
            goto out;
        }
        memcpy(key, o->sweep, (size_t)(eq - o->sweep));
        key[eq - o->sweep] = '\0';
        n_vals = cli_split_list("search", "--sweep", eq + 1, store, sizeof store, vals, MAX_SWEEP);
        if (n_vals < 0) {
            rc = CLI_EXIT_USAGE;
            goto out;
        }
    }
    sx_collection_info ci;
    sx_status st = sx_collection_describe(c, &ci);
    if (st != SX_OK) {
        rc = cli_sx_fail("search", "describe", st);
        goto out;
    }
    r->c = c;
    r->q = q;
    r->k = o->k;
    r->id_offset = o->id_offset;
    r->lat = malloc(q->n * sizeof *r->lat);
    r->ids = malloc(q->n * o->k * sizeof *r->ids);
    r->dist = malloc(q->n * o->k * sizeof *r->dist);
    r->n_got = malloc(q->n * sizeof *r->n_got);
    if (r->lat == NULL || r->ids == NULL || r->dist == NULL || r->n_got == NULL) {
        rc = cli_fail("search", "out of memory for %zu queries", q->n);
        goto out;
    }
    for (size_t j = 0; j < n_params; j++) {
        if (n_vals == 0 || strcmp(params[j].key, key) != 0)
            r->params[r->n_params++] = params[j];
    }
    printf("%zu queries, k=%" PRIu32 ", %u thread%s, recall against %s\n", q->n, o->k, o->threads,
           o->threads == 1 ? "" : "s", o->gt_dist != NULL ? o->gt_dist : o->gt);
    printf("%-22s %8s %9s %9s %9s %9s %9s %9s\n", "setting", "recall", "QPS", "p50 ms", "p99 ms",
           "mean ms", "IO/query", "KiB/query");
    for (int s = 0; s < (n_vals > 0 ? n_vals : 1); s++) {
        char label[96] = "(defaults)";
        size_t np = r->n_params;
        if (n_vals > 0) {
            r->params[np] = (sx_param){ .key = key, .value = vals[s] };
            r->n_params = np + 1;
            snprintf(label, sizeof label, "%s=%s", key, vals[s]);
        }
        rc = run_setting(o, r, ci.metric, &gt, o->gt_dist != NULL ? &gt_dist : NULL, label);
        r->n_params = np;
        if (rc != CLI_EXIT_OK)
            goto out;
    }
    rc = CLI_EXIT_OK;
out:
    ds_free(&gt);
    ds_free(&gt_dist);
    free(r->lat);
    free(r->ids);
    free(r->dist);
    free(r->n_got);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return rc;
}
