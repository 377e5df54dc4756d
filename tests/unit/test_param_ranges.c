/*
 * test_param_ranges.c: index parameters that bound work (issue 13, finding 3). Through the
 * public API: efConstruction 1000000000 (accepted before, and a quadratic build) and each other
 * out-of-range value is refused with SX_EINVAL and a message naming the parameter and its range;
 * the largest in-range values still build and search.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sextant.h"

#define DIM 8
#define NR  600

static sx_db *db;
static sx_collection *coll;

static void setup(void)
{
    sx_db_options o = { 0 };
    o.build_threads = 2;
    o.search_threads = 2;
    ASSERT_OK(sx_db_open(test_tmpdir("param_ranges"), &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 } };
    sx_collection_def d = { "c", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
    static int64_t ids[NR];
    static float v[NR * DIM];
    uint64_t s = 7;
    for (size_t i = 0; i < NR; i++) {
        ids[i] = (int64_t)i;
        for (int k = 0; k < DIM; k++)
            v[i * DIM + k] = test_randf(&s);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { NR, cols, 2 };
    ASSERT_OK(sx_insert(coll, &b, NULL));
    ASSERT_OK(sx_flush(coll));
}

/* sx_index_create(type, key=value) must be SX_EINVAL naming key and range. */
static void refuse_build(const char *type, const char *key, const char *value, const char *range)
{
    sx_param p = { key, value };
    sx_status st = sx_index_create(coll, type, &p, 1);
    if (st != SX_EINVAL)
        FAILF("%s %s=%s: got %s, want SX_EINVAL", type, key, value, sx_status_str(st));
    const char *m = sx_errmsg();
    if (!strstr(m, key) || !strstr(m, range))
        FAILF("%s %s=%s: message \"%s\" lacks \"%s\" or \"%s\"", type, key, value, m, key, range);
}

static void build_ranges(void)
{
    refuse_build("HNSW", "efConstruction", "1000000000", "[1, 4096]");
    refuse_build("HNSW", "efConstruction", "4097", "[1, 4096]");
    refuse_build("HNSW", "efConstruction", "0", "[1, 4096]");
    refuse_build("HNSW", "M", "2049", "[2, 2048]");
    refuse_build("HNSW", "M", "1", "[2, 2048]");
    refuse_build("HNSW_SQ", "efConstruction", "1000000000", "[1, 4096]");
    refuse_build("HNSW_SQ", "efConstruction", "4097", "[1, 4096]");
    refuse_build("HNSW_SQ", "M", "4096", "[2, 2048]");
    refuse_build("IVF_FLAT", "nlist", "65537", "[1, 65536]");
    refuse_build("IVF_FLAT", "nlist", "1000000000", "[1, 65536]");
    refuse_build("DISKANN", "search_list_size", "1000000000", "[1, 65536]");
    refuse_build("DISKANN", "max_degree", "513", "[1, 512]");
}

/* A search with key=value on the collection's index must be SX_EINVAL naming key and range. */
static void refuse_search(const char *key, const char *value, const char *range)
{
    float q[DIM] = { 0 };
    sx_param p = { key, value };
    sx_search_req r = { .queries = q, .nq = 1, .k = 5, .params = &p, .n_params = 1, .metric = -1 };
    sx_rowset *rs = NULL;
    sx_status st = sx_search(coll, &r, &rs);
    sx_rowset_free(rs);
    if (st != SX_EINVAL)
        FAILF("search %s=%s: got %s, want SX_EINVAL", key, value, sx_status_str(st));
    const char *m = sx_errmsg();
    if (!strstr(m, key) || !strstr(m, range))
        FAILF("search %s=%s: message \"%s\" lacks \"%s\" or \"%s\"", key, value, m, key, range);
}

static void search_ok(const char *key, const char *value)
{
    float q[DIM] = { 0 };
    sx_param p = { key, value };
    sx_search_req r = { .queries = q, .nq = 1, .k = 5, .params = &p, .n_params = 1, .metric = -1 };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(coll, &r, &rs));
    ASSERT_EQ(rs->topks[0], 5);
    sx_rowset_free(rs);
}

/* The largest in-range build values work; ef is bounded at search time. */
static void hnsw_in_range(void)
{
    sx_param p[2] = { { "M", "64" }, { "efConstruction", "4096" } };
    ASSERT_OK(sx_index_create(coll, "HNSW", p, 2));
    ASSERT_OK(sx_index_wait(coll, 120000));
    sx_index_info info;
    ASSERT_OK(sx_index_describe(coll, &info));
    ASSERT_EQ(info.state, SX_INDEX_FINISHED);
    ASSERT_EQ(info.indexed_rows, NR);
    search_ok("ef", "65536");
    search_ok("ef", "5");
    refuse_search("ef", "65537", "[1, 65536]");
    refuse_search("ef", "1000000000", "[1, 65536]");
    ASSERT_OK(sx_index_drop(coll));
}

static void hnsw_sq_in_range(void)
{
    sx_param p[1] = { { "efConstruction", "4096" } };
    ASSERT_OK(sx_index_create(coll, "HNSW_SQ", p, 1));
    ASSERT_OK(sx_index_wait(coll, 120000));
    search_ok("ef", "65536");
    refuse_search("ef", "65537", "[1, 65536]");
    ASSERT_OK(sx_index_drop(coll));
}

int main(void)
{
    RUN(setup);
    if (!coll)
        return TEST_DONE();
    RUN(build_ranges);
    RUN(hnsw_in_range);
    RUN(hnsw_sq_in_range);
    sx_collection_release(coll);
    sx_db_close(db);
    return TEST_DONE();
}
