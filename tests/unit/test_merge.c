/*
 * test_merge.c: search merging (src/server/merge.c). Oracle: sx_search alone on the same
 * request. Merged batches stay under 16 query vectors (merge_max_nq = 15) so the engine's exact
 * scan uses the same per-row kernel merged or not, and results must be bitwise equal.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "server/server.h"

#define DIM        16
#define NROWS      3000
#define NTHREADS   8
#define PER_THREAD 120

static sx_db *g_db;
static sx_collection *g_c;

static const char *const FILTERS[] = { "", "tag < 50", "name like \"n1%\"" };
static const char *const OUT_A[] = { "tag", "name", "vec" };
static const char *const OUT_B[] = { "score", "flag" };

typedef struct plan {
    float q[3 * DIM];
    size_t nq;
    int filter;
    int outs; /* 0: none, 1: OUT_A, 2: OUT_B */
    uint32_t k;
    bool nan; /* a poisoned request: must fail alone */
    sx_rowset *want;
    sx_rowset *got;
    sx_status st;
    char key[128];
} plan;

static plan g_plans[NTHREADS][PER_THREAD];
static sx__merger *g_m;

static void fill_req(const plan *p, sx_search_req *r)
{
    memset(r, 0, sizeof *r);
    r->queries = p->q;
    r->nq = p->nq;
    r->k = p->k;
    r->filter = FILTERS[p->filter];
    r->metric = -1;
    if (p->outs == 1) {
        r->output_fields = OUT_A;
        r->n_output_fields = 3;
    } else if (p->outs == 2) {
        r->output_fields = OUT_B;
        r->n_output_fields = 2;
    }
}

static void open_coll(const char *tag)
{
    const char *dir = test_tmpdir(tag);
    sx_db_options o = { .sync_mode = SX_SYNC_NONE };
    ASSERT_OK(sx_db_open(dir, &o, &g_db));
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, .is_primary = true }, { "vec", SX_FIELD_FLOAT_VECTOR, .dim = DIM },
        { "tag", SX_FIELD_INT64, .dim = 0 },          { "score", SX_FIELD_DOUBLE, .dim = 0 },
        { "flag", SX_FIELD_BOOL, .dim = 0 },          { "name", SX_FIELD_VARCHAR, .max_length = 32 }
    };
    sx_collection_def def = { "m", f, 6, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(g_db, &def));
    ASSERT_OK(sx_collection_open(g_db, "m", &g_c));
    uint64_t s = 12345;
    int64_t *ids = malloc(NROWS * sizeof *ids), *tags = malloc(NROWS * sizeof *tags);
    double *scores = malloc(NROWS * sizeof *scores);
    bool *flags = malloc(NROWS * sizeof *flags);
    char **names = malloc(NROWS * sizeof *names);
    float *vecs = malloc((size_t)NROWS * DIM * sizeof *vecs);
    for (size_t i = 0; i < NROWS; i++) {
        ids[i] = (int64_t)i + 1;
        tags[i] = (int64_t)(test_rand(&s) % 100);
        scores[i] = (double)test_randf(&s);
        flags[i] = test_rand(&s) & 1;
        names[i] = malloc(16);
        snprintf(names[i], 16, "n%zu", i);
        for (size_t d = 0; d < DIM; d++)
            vecs[i * DIM + d] = test_randf(&s);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },    { "vec", SX_FIELD_FLOAT_VECTOR, vecs },
                         { "tag", SX_FIELD_INT64, tags },  { "score", SX_FIELD_DOUBLE, scores },
                         { "flag", SX_FIELD_BOOL, flags }, { "name", SX_FIELD_VARCHAR, names } };
    sx_batch b = { NROWS, cols, 6 };
    ASSERT_OK(sx_insert(g_c, &b, NULL));
    for (size_t i = 0; i < NROWS; i++)
        free(names[i]);
    free(ids);
    free(tags);
    free(scores);
    free(flags);
    free(names);
    free(vecs);
}

static void close_coll(void)
{
    sx_collection_release(g_c);
    sx_db_close(g_db);
    g_c = NULL;
    g_db = NULL;
}

/* Returns NULL when equal, else what differs. */
static const char *rowset_diff(const sx_rowset *a, const sx_rowset *b)
{
    if (a->n_rows != b->n_rows)
        return "n_rows";
    if (a->nq != b->nq)
        return "nq";
    if (a->n_cols != b->n_cols)
        return "n_cols";
    for (size_t q = 0; q < a->nq; q++)
        if (a->topks[q] != b->topks[q])
            return "topks";
    for (size_t r = 0; r < a->n_rows; r++)
        if (a->distances[r] != b->distances[r])
            return "distances";
    for (size_t i = 0; i < a->n_cols; i++) {
        if (strcmp(a->cols[i].name, b->cols[i].name) != 0 || a->cols[i].type != b->cols[i].type ||
            a->dims[i] != b->dims[i])
            return "column header";
        for (size_t r = 0; r < a->n_rows; r++) {
            switch (a->cols[i].type) {
            case SX_FIELD_VARCHAR:
                if (strcmp(((char **)a->cols[i].data)[r], ((char **)b->cols[i].data)[r]) != 0)
                    return "varchar value";
                break;
            case SX_FIELD_INT64:
            case SX_FIELD_DOUBLE:
                if (memcmp((const char *)a->cols[i].data + r * 8,
                           (const char *)b->cols[i].data + r * 8, 8) != 0)
                    return "int64/double value";
                break;
            case SX_FIELD_BOOL:
                if (((const bool *)a->cols[i].data)[r] != ((const bool *)b->cols[i].data)[r])
                    return "bool value";
                break;
            case SX_FIELD_FLOAT_VECTOR:
            case SX_FIELD_FLOAT16_VECTOR:
            case SX_FIELD_BFLOAT16_VECTOR:
            case SX_FIELD_BINARY_VECTOR: {
                size_t w = sx_vector_row_bytes(a->cols[i].type, a->dims[i]);
                if (memcmp((const char *)a->cols[i].data + r * w,
                           (const char *)b->cols[i].data + r * w, w) != 0)
                    return "vector value";
                break;
            }
            }
        }
    }
    return NULL;
}

static void *worker(void *arg)
{
    plan *ps = arg;
    for (size_t i = 0; i < PER_THREAD; i++) {
        sx_search_req r;
        fill_req(&ps[i], &r);
        ps[i].st = sx__merger_search(g_m, g_c, ps[i].key, &r, &ps[i].got);
    }
    return NULL;
}

static void test_merge_concurrent(void)
{
    open_coll("merge");
    uint64_t s = test_seed();
    size_t n_nan = 0;
    for (size_t t = 0; t < NTHREADS; t++) {
        for (size_t i = 0; i < PER_THREAD; i++) {
            plan *p = &g_plans[t][i];
            memset(p, 0, sizeof *p);
            p->nq = 1 + (size_t)(test_rand(&s) % 3);
            p->filter = (int)(test_rand(&s) % 3);
            p->outs = (int)(test_rand(&s) % 3);
            p->k = 5;
            for (size_t d = 0; d < p->nq * DIM; d++)
                p->q[d] = test_randf(&s);
            p->nan = (test_rand(&s) % 50) == 0;
            if (p->nan) {
                p->q[p->nq * DIM - 1] = NAN;
                n_nan++;
            }
            snprintf(p->key, sizeof p->key, "f%d|o%d|k%u", p->filter, p->outs, p->k);
            sx_search_req r;
            fill_req(p, &r);
            if (p->nan)
                ASSERT_STATUS(sx_search(g_c, &r, &p->want), SX_EINVAL);
            else
                ASSERT_OK(sx_search(g_c, &r, &p->want));
        }
    }
    sx_server_options o = { .merge_wait_us = 5000, .merge_max_nq = 15 };
    ASSERT_OK(sx__merger_new(&o, &g_m));
    pthread_t th[NTHREADS];
    for (size_t t = 0; t < NTHREADS; t++)
        ASSERT_EQ(pthread_create(&th[t], NULL, worker, g_plans[t]), 0);
    for (size_t t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    size_t n_ok = 0, n_fail = 0;
    for (size_t t = 0; t < NTHREADS; t++) {
        for (size_t i = 0; i < PER_THREAD; i++) {
            plan *p = &g_plans[t][i];
            if (p->nan) {
                ASSERT_EQ(p->st, SX_EINVAL);
                n_fail++;
                continue;
            }
            if (p->st != SX_OK)
                FAILF("thread %zu request %zu failed: %s", t, i, sx_status_str(p->st));
            const char *d = rowset_diff(p->want, p->got);
            if (d)
                FAILF("thread %zu request %zu (nq %zu filter %d outs %d): %s differs", t, i, p->nq,
                      p->filter, p->outs, d);
            ASSERT(p->got->n_rows > 0);
            n_ok++;
        }
    }
    ASSERT_EQ(n_fail, n_nan);
    ASSERT_EQ(n_ok + n_fail, NTHREADS * PER_THREAD);
    uint64_t batches = 0, merged = 0;
    sx__merger_stats(g_m, &batches, &merged);
    fprintf(stderr, "batches %llu, merged requests %llu, NaN requests %zu\n",
            (unsigned long long)batches, (unsigned long long)merged, n_nan);
    ASSERT(batches > 0);
    ASSERT(merged > batches);
    ASSERT(merged <= NTHREADS * PER_THREAD);
    for (size_t t = 0; t < NTHREADS; t++) {
        for (size_t i = 0; i < PER_THREAD; i++) {
            sx_rowset_free(g_plans[t][i].want);
            sx_rowset_free(g_plans[t][i].got);
        }
    }
    sx__merger_free(g_m);
    g_m = NULL;
    close_coll();
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A lone request does not wait for company; an nq over merge_max_nq searches alone; both give
 * the engine's answer. */
static void test_merge_alone(void)
{
    open_coll("merge_alone");
    sx_server_options o = { .merge_wait_us = 2000000, .merge_max_nq = 4 };
    sx__merger *m = NULL;
    ASSERT_OK(sx__merger_new(&o, &m));
    float q[6 * DIM];
    uint64_t s = 99;
    for (size_t d = 0; d < 6 * DIM; d++)
        q[d] = test_randf(&s);
    for (size_t nq = 1; nq <= 6; nq += 5) {
        sx_search_req r = { .queries = q,
                            .nq = nq,
                            .k = 7,
                            .metric = -1,
                            .output_fields = OUT_A,
                            .n_output_fields = 3 };
        sx_rowset *want = NULL, *got = NULL;
        ASSERT_OK(sx_search(g_c, &r, &want));
        double t0 = now_s();
        ASSERT_OK(sx__merger_search(m, g_c, "k", &r, &got));
        double dt = now_s() - t0;
        ASSERT(dt < 1.0); /* merge_wait_us is 2 s: a lone request must not wait */
        const char *d = rowset_diff(want, got);
        if (d)
            FAILF("nq %zu: %s differs", nq, d);
        ASSERT_EQ(got->nq, nq);
        ASSERT_EQ(got->n_rows, 7 * nq);
        sx_rowset_free(want);
        sx_rowset_free(got);
    }
    /* An error alone is the engine's error, with its message. */
    q[0] = NAN;
    sx_search_req bad = { .queries = q, .nq = 1, .k = 3, .metric = -1 };
    sx_rowset *none = NULL;
    ASSERT_STATUS(sx__merger_search(m, g_c, "k", &bad, &none), SX_EINVAL);
    ASSERT(none == NULL);
    ASSERT(strstr(sx_errmsg(), "NaN") != NULL);
    uint64_t batches = 0, merged = 0;
    sx__merger_stats(m, &batches, &merged);
    ASSERT_EQ(batches, 3); /* each ran alone, as a batch of one (nq 6 is over merge_max_nq) */
    ASSERT_EQ(merged, 3);
    sx__merger_free(m);
    close_coll();
}

int main(void)
{
    RUN(test_merge_alone);
    RUN(test_merge_concurrent);
    return TEST_DONE();
}
