/*
 * test_progress.c: index build progress is truthful (reliability.md T12). While background builds
 * run, sx_index_describe is polled: indexed_rows never decreases, never exceeds total_rows,
 * building_rows stays within the segment being built, and the state is FINISHED exactly when
 * indexed_rows == total_rows. "Search uses the index exactly at 100%" is observed through a
 * DISKANN index, the one whose use is visible from outside (its sector reads, read_ios): a
 * search while the only sealed segment is not yet indexed does no index I/O (exact scan), and a
 * search after the state says FINISHED does.
 */
#include <sextant.h>
#include <time.h>

#include "harness.h"

#define DIM 32

static void fill(sx_collection *c, int64_t first, size_t n, uint64_t *rs)
{
    int64_t *ids = malloc(n * sizeof *ids);
    float *v = malloc(n * DIM * sizeof *v);
    ASSERT(ids && v);
    for (size_t i = 0; i < n; i++) {
        ids[i] = first + (int64_t)i;
        for (int k = 0; k < DIM; k++)
            v[i * DIM + k] = test_randf(rs);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch bt = { n, cols, 2 };
    ASSERT_OK(sx_insert(c, &bt, NULL));
    free(ids);
    free(v);
}

static sx_collection *make(sx_db *db, const char *name)
{
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 } };
    sx_collection_def d = { name, f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, name, &c));
    return c;
}

/* HNSW over 6 sealed segments: polled progress is monotone and FINISHED iff 100%. */
static void test_monotone(void)
{
    const char *dir = test_tmpdir("progress");
    sx_db_options o = { 0 };
    o.segment_max_bytes = 3000 * DIM * 4;
    o.build_threads = 1;
    sx_db *db;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_collection *c = make(db, "p");
    uint64_t rs = test_seed() | 1;
    for (int b = 0; b < 6; b++) {
        fill(c, b * 3000, 3000, &rs);
        ASSERT_OK(sx_flush(c));
    }
    sx_param p[] = { { "M", "16" }, { "efConstruction", "200" } };
    ASSERT_OK(sx_index_create(c, "HNSW", p, 2));
    uint64_t last = 0, polls = 0, distinct = 0;
    for (;;) {
        sx_index_info ii;
        ASSERT_OK(sx_index_describe(c, &ii));
        polls++;
        if (ii.indexed_rows < last)
            FAILF("progress went back: %llu after %llu", (unsigned long long)ii.indexed_rows,
                  (unsigned long long)last);
        if (ii.indexed_rows != last)
            distinct++;
        last = ii.indexed_rows;
        ASSERT(ii.indexed_rows <= ii.total_rows);
        ASSERT_EQ(ii.pending_rows, ii.total_rows - ii.indexed_rows);
        ASSERT(ii.building_rows <= 3000);
        if (ii.state == SX_INDEX_FINISHED) {
            ASSERT_EQ(ii.indexed_rows, ii.total_rows);
            break;
        }
        ASSERT(ii.state == SX_INDEX_IN_PROGRESS);
        ASSERT(ii.indexed_rows < ii.total_rows); /* not finished: not 100% either */
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
    }
    ASSERT_EQ(last, 18000);
    fprintf(stderr,
            "progress: %llu polls, %llu distinct values, monotone, FINISHED at exactly "
            "18000/18000\n",
            (unsigned long long)polls, (unsigned long long)distinct);
    sx_collection_release(c);
    sx_db_close(db);
}

/* DISKANN on one segment: no index I/O before FINISHED, index I/O after. */
static void test_search_uses_index_at_100(void)
{
    const char *dir = test_tmpdir("progress_dk");
    sx_db_options o = { 0 };
    o.build_threads = 1;
    sx_db *db;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_collection *c = make(db, "d");
    uint64_t rs = test_seed() | 1;
    fill(c, 0, 6000, &rs);
    ASSERT_OK(sx_flush(c));
    float q[DIM];
    for (int k = 0; k < DIM; k++)
        q[k] = test_randf(&rs);
    sx_search_req req = { .queries = q, .nq = 1, .k = 10, .metric = -1 };
    ASSERT_OK(sx_index_create(c, "DISKANN", NULL, 0));
    int before = 0, after = 0;
    for (;;) {
        sx_index_info a, b;
        ASSERT_OK(sx_index_describe(c, &a));
        sx_rowset *rs_out;
        ASSERT_OK(sx_search(c, &req, &rs_out));
        ASSERT_EQ(rs_out->n_rows, 10);
        sx_rowset_free(rs_out);
        ASSERT_OK(sx_index_describe(c, &b));
        if (a.state != SX_INDEX_FINISHED && b.state != SX_INDEX_FINISHED) {
            /* not indexed during the whole search: it was exact, no sector was read */
            ASSERT(a.indexed_rows < a.total_rows);
            ASSERT_EQ(b.read_ios, a.read_ios);
            before++;
        } else if (a.state == SX_INDEX_FINISHED) {
            ASSERT_EQ(a.indexed_rows, a.total_rows);
            ASSERT(b.read_ios > a.read_ios); /* indexed: the search read sectors */
            if (++after >= 3)
                break;
        }
    }
    fprintf(stderr, "DISKANN: %d searches before 100%% read no sector, %d after 100%% did\n",
            before, after);
    sx_collection_release(c);
    sx_db_close(db);
}

int main(void)
{
    RUN(test_monotone);
    RUN(test_search_uses_index_at_100);
    return TEST_DONE();
}
