/*
 * test_search_plan.c: the plan of filtered searches over indexed segments (query.c's
 * plan_segment, issue 18) and sx_search_plan, against brute force computed here.
 *
 * Two sealed segments of 6,000 rows x 64 (uniform random, L2), indexed with HNSW and then, in a
 * second collection, HNSW_SQ (sq8, refine FP32): both estimate their cost. `age` = id % 100,
 * filters keeping 1%, 10%, 50%, 90% and 99% of the rows, plus deletes. For each filter and each
 * plan: forced exact (filter_plan SX_PLAN_EXACT): every segment reported exact_filtered, the answer
 *     is brute force's (ids, distances within 1e-3);
 *   forced index (SX_PLAN_INDEX): every segment reported index_filtered; recall@10 >= 0.90 at ef
 * 128 (the two-heap traversal passes over filtered-out rows, so no selectivity is a cliff); the
 * cost estimate (SX_PLAN_AUTO): the counts sum to the segments; the answer is exactly the forced
 *     answer of the plan it reports (the plan is what ran); 1% is scanned, 99% traversed; recall
 *     >= 0.95 at every selectivity.
 * Unfiltered searches report index; growing rows exact_unindexed; req.exact exact_other.
 * rows / rows_kept count the rows of the segments and those the filter keeps.
 */
#include <math.h>
#include <sextant.h>
#include <stdlib.h>

#include "harness.h"

#define DIM   64
#define NROWS 12000
#define NQ    40
#define K     10

static float *vecs;
static int64_t *ages;

static sx_status insert_rows(sx_collection *c, int64_t start, size_t n, uint64_t seed)
{
    int64_t *ids = malloc(n * sizeof *ids), *age = malloc(n * sizeof *age);
    float *v = malloc(n * DIM * sizeof *v);
    uint64_t s = seed ^ (uint64_t)start * 7919u;
    for (size_t i = 0; i < n; i++) {
        ids[i] = start + (int64_t)i;
        age[i] = ids[i] % 100;
        for (int d = 0; d < DIM; d++)
            v[i * DIM + d] = test_randf(&s);
    }
    if (vecs && start + (int64_t)n <= NROWS) {
        memcpy(vecs + start * DIM, v, n * DIM * sizeof *v);
        memcpy(ages + start, age, n * sizeof *age);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                         { "vec", SX_FIELD_FLOAT_VECTOR, v },
                         { "age", SX_FIELD_INT64, age } };
    sx_batch b = { n, cols, 3 };
    sx_status st = sx_insert(c, &b, NULL);
    free(ids);
    free(age);
    free(v);
    return st;
}

static bool deleted(int64_t id)
{
    return id % 97 == 5; /* deleted before the searches */
}

/* Brute force: the K nearest rows with age < lim, not deleted (ties by id). */
static void brute(const float *q, int lim, int64_t *out, float *dist)
{
    for (int j = 0; j < K; j++) {
        out[j] = -1;
        dist[j] = INFINITY;
    }
    for (int64_t r = 0; r < NROWS; r++) {
        if (ages[r] >= lim || deleted(r))
            continue;
        float d = 0;
        for (int x = 0; x < DIM; x++) {
            float t = q[x] - vecs[r * DIM + x];
            d += t * t;
        }
        if (d >= dist[K - 1])
            continue;
        int j = K - 1;
        while (j > 0 && dist[j - 1] > d) {
            dist[j] = dist[j - 1];
            out[j] = out[j - 1];
            j--;
        }
        dist[j] = d;
        out[j] = r;
    }
}

typedef struct answer {
    int64_t ids[NQ * K];
    float dist[NQ * K];
    size_t n[NQ];
    sx_search_plan plan; /* summed over the queries */
} answer;

static void
search(sx_collection *c, const float *qs, const char *filter, bool exact, int how, answer *a)
{
    memset(a, 0, sizeof *a);
    sx_param ef = { "ef", "128" };
    for (size_t q = 0; q < NQ; q++) {
        sx_search_plan p;
        memset(&p, 0xff, sizeof p); /* written on success */
        sx_search_req req = { .queries = qs + q * DIM,
                              .nq = 1,
                              .k = K,
                              .filter = filter,
                              .params = &ef,
                              .n_params = 1,
                              .metric = -1,
                              .exact = exact,
                              .plan = &p,
                              .filter_plan = how };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(c, &req, &rs));
        a->n[q] = rs->topks[0];
        ASSERT(a->n[q] <= K);
        for (size_t j = 0; j < a->n[q]; j++) {
            a->ids[q * K + j] = ((const int64_t *)rs->cols[0].data)[j];
            a->dist[q * K + j] = rs->distances[j];
        }
        sx_rowset_free(rs);
        a->plan.index += p.index;
        a->plan.index_filtered += p.index_filtered;
        a->plan.exact_filtered += p.exact_filtered;
        a->plan.exact_unindexed += p.exact_unindexed;
        a->plan.exact_other += p.exact_other;
        a->plan.rows += p.rows;
        a->plan.rows_kept += p.rows_kept;
    }
}

static double recall(const answer *a, const float *qs, int lim, bool require_exact)
{
    double hits = 0;
    for (size_t q = 0; q < NQ; q++) {
        int64_t want[K];
        float wd[K];
        brute(qs + q * DIM, lim, want, wd);
        for (size_t j = 0; j < a->n[q]; j++) {
            ASSERT(!deleted(a->ids[q * K + j]));
            ASSERT(ages[a->ids[q * K + j]] < lim); /* every answer passes the filter */
            for (int w = 0; w < K; w++)
                hits += want[w] == a->ids[q * K + j];
        }
        if (require_exact) {
            ASSERT_EQ(a->n[q], K);
            for (int j = 0; j < K; j++) {
                ASSERT_EQ(a->ids[q * K + j], want[j]);
                ASSERT_NEAR(a->dist[q * K + j], wd[j], 1e-3);
            }
        }
    }
    return hits / (double)(NQ * K);
}

static bool same(const answer *a, const answer *b)
{
    for (size_t q = 0; q < NQ; q++) {
        if (a->n[q] != b->n[q])
            return false;
        for (size_t j = 0; j < a->n[q]; j++)
            if (a->ids[q * K + j] != b->ids[q * K + j])
                return false;
    }
    return true;
}

static void plans(const char *type, const sx_param *bp, size_t nbp)
{
    vecs = malloc((size_t)NROWS * DIM * sizeof *vecs);
    ages = malloc(NROWS * sizeof *ages);
    const char *dir = test_tmpdir(type);
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.segment_max_bytes = (uint64_t)(NROWS / 2) * DIM * 4; /* two sealed segments */
    o.build_threads = 2;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
        { "age", SX_FIELD_INT64, false, false, 0, 0 },
    };
    sx_collection_def d = { "p", f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "p", &c));
    uint64_t seed = test_seed();
    for (int b = 0; b < NROWS / 1000; b++)
        ASSERT_OK(insert_rows(c, (int64_t)b * 1000, 1000, seed));
    ASSERT_OK(sx_index_create(c, type, bp, nbp));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 120000));
    int64_t del[NROWS];
    size_t nd = 0;
    for (int64_t r = 0; r < NROWS; r++)
        if (deleted(r))
            del[nd++] = r;
    sx_keys keys = { nd, del, NULL };
    ASSERT_OK(sx_delete(c, &keys, NULL));
    ASSERT_OK(sx_flush(c));

    float qs[NQ * DIM];
    uint64_t s = seed + 1;
    for (int i = 0; i < NQ * DIM; i++)
        qs[i] = test_randf(&s);
    answer *ex = malloc(sizeof *ex), *ix = malloc(sizeof *ix), *au = malloc(sizeof *au);

    /* a filter keeping every row but the deleted ones: the counts cover every segment */
    search(c, qs, "age >= 0", false, SX_PLAN_AUTO, au);
    uint32_t segs = au->plan.index + au->plan.index_filtered + au->plan.exact_filtered +
                    au->plan.exact_unindexed + au->plan.exact_other;
    ASSERT_EQ(segs, 2 * NQ);
    ASSERT_EQ(au->plan.exact_unindexed + au->plan.exact_other, 0);
    ASSERT_EQ(au->plan.rows, (uint64_t)NROWS * NQ);
    ASSERT_EQ(au->plan.rows_kept, (uint64_t)(NROWS - nd) * NQ);

    const int lims[] = { 1, 10, 50, 90, 99 };
    for (size_t li = 0; li < sizeof lims / sizeof lims[0]; li++) {
        int lim = lims[li];
        char filter[32];
        snprintf(filter, sizeof filter, "age < %d", lim);
        uint64_t kept = 0;
        for (int64_t r = 0; r < NROWS; r++)
            kept += ages[r] < lim && !deleted(r);

        search(c, qs, filter, false, SX_PLAN_EXACT, ex);
        search(c, qs, filter, false, SX_PLAN_INDEX, ix);
        search(c, qs, filter, false, SX_PLAN_AUTO, au);

        ASSERT_EQ(ex->plan.exact_filtered, 2 * NQ);
        ASSERT_EQ(ex->plan.index + ex->plan.index_filtered, 0);
        (void)recall(ex, qs, lim, true);

        ASSERT_EQ(ix->plan.index_filtered, 2 * NQ);
        ASSERT_EQ(ix->plan.exact_filtered, 0);
        double ri = recall(ix, qs, lim, false);
        fprintf(stderr,
                "%s, age < %d: kept %llu rows, index recall %.4f, auto: index %u exact %u\n", type,
                lim, (unsigned long long)kept, ri, au->plan.index_filtered,
                au->plan.exact_filtered);
        ASSERT(ri >= 0.90);

        ASSERT_EQ(au->plan.index_filtered + au->plan.exact_filtered, 2 * NQ);
        ASSERT_EQ(au->plan.rows, (uint64_t)NROWS * NQ);
        ASSERT_EQ(au->plan.rows_kept, kept * NQ);
        /* both segments hold the same share of the filter: one plan for both, every query */
        ASSERT(au->plan.index_filtered == 0 || au->plan.exact_filtered == 0);
        ASSERT(same(au, au->plan.exact_filtered ? ex : ix));
        if (lim == 1)
            ASSERT_EQ(au->plan.exact_filtered, 2 * NQ);
        if (lim == 99)
            ASSERT_EQ(au->plan.index_filtered, 2 * NQ);
        ASSERT(recall(au, qs, lim, false) >= 0.95);
    }

    /* req.exact: exact_other; growing rows: exact_unindexed */
    search(c, qs, NULL, true, SX_PLAN_AUTO, au);
    ASSERT_EQ(au->plan.exact_other, 2 * NQ);
    sx_search_req bad = { .queries = qs, .nq = 1, .k = K, .metric = -1, .filter_plan = 3 };
    sx_rowset *rs = NULL;
    ASSERT_STATUS(sx_search(c, &bad, &rs), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "filter_plan") != NULL);
    ASSERT_OK(insert_rows(c, NROWS, 100, seed));
    search(c, qs, NULL, false, SX_PLAN_AUTO, au);
    ASSERT_EQ(au->plan.exact_unindexed, NQ);
    ASSERT_EQ(au->plan.index_filtered, 2 * NQ); /* the deletes filter the sealed ones */
    ASSERT_EQ(au->plan.rows, (uint64_t)(NROWS + 100) * NQ);

    free(ex);
    free(ix);
    free(au);
    sx_collection_release(c);
    sx_db_close(db);
    free(vecs);
    free(ages);
}

static void test_hnsw(void)
{
    plans("HNSW", (sx_param[]){ { "M", "16" }, { "efConstruction", "100" } }, 2);
}

static void test_hnsw_sq(void)
{
    plans("HNSW_SQ",
          (sx_param[]){ { "M", "16" },
                        { "efConstruction", "100" },
                        { "sq_type", "SQ8" },
                        { "refine", "true" },
                        { "refine_type", "FP32" } },
          5);
}

int main(void)
{
    RUN(test_hnsw);
    RUN(test_hnsw_sq);
    return TEST_DONE();
}
