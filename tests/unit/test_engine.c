/*
 * test_engine.c: the engine through the public API: schema validation, insert/upsert/delete,
 * get/query/count, filtered search against brute force, flush + reopen with identical results,
 * index builds with exact ground truth, compaction, and concurrent search + insert.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sextant.h>
#include <unistd.h>

#include "harness.h"

#define DIM 16

static sx_db *open_db(const char *dir)
{
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.segment_max_bytes = 4000 * DIM * 4; /* small segments: exercise sealing */
    o.build_threads = 2;
    o.search_threads = 2;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    return db;
}

static void create_coll(sx_db *db, const char *name, sx_metric m)
{
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
        { "age", SX_FIELD_INT64, false, false, 0, 0 },
        { "score", SX_FIELD_DOUBLE, false, false, 0, 0 },
        { "flag", SX_FIELD_BOOL, false, false, 0, 0 },
        { "color", SX_FIELD_VARCHAR, false, false, 0, 32 },
    };
    sx_collection_def d = { name, f, 6, m };
    ASSERT_OK(sx_collection_create(db, &d));
}

static const char *colors[] = { "red", "green", "blue", "redwood" };

/* rows [start, start+n) with deterministic content */
static sx_status insert_rows(sx_collection *c, int64_t start, size_t n, uint64_t seed)
{
    int64_t *ids = malloc(n * 8), *age = malloc(n * 8);
    double *score = malloc(n * 8);
    bool *flag = malloc(n);
    const char **color = malloc(n * sizeof(char *));
    float *v = malloc(n * DIM * 4);
    uint64_t s = seed ^ (uint64_t)start * 7919u;
    for (size_t i = 0; i < n; i++) {
        ids[i] = start + (int64_t)i;
        age[i] = ids[i] % 100;
        score[i] = (double)(ids[i] % 17) * 0.5;
        flag[i] = ids[i] % 3 == 0;
        color[i] = colors[ids[i] % 4];
        for (int d = 0; d < DIM; d++)
            v[i * DIM + d] = test_randf(&s) * 10.0f;
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },   { "vec", SX_FIELD_FLOAT_VECTOR, v },
                         { "age", SX_FIELD_INT64, age },  { "score", SX_FIELD_DOUBLE, score },
                         { "flag", SX_FIELD_BOOL, flag }, { "color", SX_FIELD_VARCHAR, color } };
    sx_batch b = { n, cols, 6 };
    sx_status st = sx_insert(c, &b, NULL);
    free(ids), free(age), free(score), free(flag), free(color), free(v);
    return st;
}

static void test_schema_errors(void)
{
    sx_db *db = open_db(test_tmpdir("eng_schema"));
    sx_field_def bad_dim[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                               { "v", SX_FIELD_FLOAT_VECTOR, false, false, 40000, 0 } };
    sx_collection_def d = { "c1", bad_dim, 2, SX_METRIC_L2 };
    ASSERT_STATUS(sx_collection_create(db, &d), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "dim") != NULL);
    sx_field_def no_pk[] = { { "id", SX_FIELD_INT64, false, false, 0, 0 },
                             { "v", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0 } };
    d.fields = no_pk;
    ASSERT_STATUS(sx_collection_create(db, &d), SX_EINVAL);
    d.name = "bad name";
    ASSERT_STATUS(sx_collection_create(db, &d), SX_EINVAL);
    create_coll(db, "ok", SX_METRIC_L2);
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0 } };
    sx_collection_def d2 = { "ok", f, 2, SX_METRIC_L2 };
    ASSERT_STATUS(sx_collection_create(db, &d2), SX_EEXIST);
    char **names;
    size_t n;
    ASSERT_OK(sx_collection_list(db, &names, &n));
    ASSERT_EQ(n, 1);
    ASSERT(strcmp(names[0], "ok") == 0);
    sx_strings_free(names, n);
    ASSERT_OK(sx_collection_drop(db, "ok"));
    ASSERT_STATUS(sx_collection_drop(db, "ok"), SX_ENOTFOUND);
    sx_db_close(db);
}

static void test_insert_errors(void)
{
    sx_db *db = open_db(test_tmpdir("eng_ins"));
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(insert_rows(c, 0, 10, 1));
    ASSERT_STATUS(insert_rows(c, 5, 10, 1), SX_EEXIST); /* duplicate keys: all or nothing */
    uint64_t n;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 10);
    float v[DIM] = { 0 };
    v[3] = NAN;
    int64_t id = 99, age = 1;
    double score = 0;
    bool flag = false;
    const char *color = "x";
    sx_column cols[] = { { "id", SX_FIELD_INT64, &id },    { "vec", SX_FIELD_FLOAT_VECTOR, v },
                         { "age", SX_FIELD_INT64, &age },  { "score", SX_FIELD_DOUBLE, &score },
                         { "flag", SX_FIELD_BOOL, &flag }, { "color", SX_FIELD_VARCHAR, &color } };
    sx_batch b = { 1, cols, 6 };
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "NaN") != NULL);
    v[3] = 0;
    b.n_cols = 5; /* missing color */
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "color") != NULL);
    b.n_cols = 6;
    const char *longs = "0123456789012345678901234567890123456789";
    cols[5].data = &longs;
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EINVAL);
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 10);
    sx_collection_release(c);
    sx_db_close(db);
}

/* brute-force oracle over all live rows via query(*) */
static void
check_search_matches_bruteforce(sx_collection *c, const char *filter, uint32_t k, uint64_t seed)
{
    sx_rowset *all = NULL;
    const char *outs[] = { "vec" };
    ASSERT_OK(sx_query(c, filter, outs, 1, 0, 0, &all));
    uint64_t s = seed;
    for (int q = 0; q < 5; q++) {
        float qv[DIM];
        for (int d = 0; d < DIM; d++)
            qv[d] = test_randf(&s) * 10.0f;
        /* oracle: k smallest squared L2 */
        size_t n = all->n_rows;
        double *dist = malloc((n + 1) * sizeof(double));
        const float *vecs = all->cols[1].data;
        for (size_t i = 0; i < n; i++) {
            double acc = 0;
            for (int d = 0; d < DIM; d++) {
                double t = (double)vecs[i * DIM + d] - (double)qv[d];
                acc += t * t;
            }
            dist[i] = acc;
        }
        sx_search_req req = { 0 };
        req.queries = qv;
        req.nq = 1;
        req.k = k;
        req.filter = filter;
        req.metric = -1;
        sx_param ef = { "ef", "400" };
        req.params = &ef;
        req.n_params = 1;
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(c, &req, &rs));
        size_t want = n < k ? n : k;
        ASSERT_EQ(rs->topks[0], want);
        /* every returned distance must be <= the oracle's k-th distance (+eps), and sorted */
        double *sorted = malloc((n + 1) * sizeof(double));
        memcpy(sorted, dist, n * sizeof(double));
        for (size_t i = 1; i < n; i++) /* insertion sort is fine for test sizes */
            for (size_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
                double t = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = t;
            }
        for (size_t h = 0; h < rs->topks[0]; h++) {
            ASSERT((double)rs->distances[h] <= sorted[want - 1] * 1.0001 + 1e-3);
            if (h)
                ASSERT(rs->distances[h] >= rs->distances[h - 1]);
            ASSERT_NEAR(rs->distances[h], sorted[h], sorted[h] * 1e-3 + 1e-2);
        }
        free(sorted);
        free(dist);
        sx_rowset_free(rs);
    }
    sx_rowset_free(all);
}

static void test_crud_and_filters(void)
{
    const char *dir = test_tmpdir("eng_crud");
    sx_db *db = open_db(dir);
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    uint64_t seed = test_seed();
    for (int b = 0; b < 10; b++)
        ASSERT_OK(insert_rows(c, b * 1000, 1000, seed)); /* crosses the 4000-row segment size */
    uint64_t n;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 10000);
    ASSERT_OK(sx_count(c, "age < 10", &n));
    ASSERT_EQ(n, 1000);
    ASSERT_OK(sx_count(c, "color like \"red%\" and flag", &n));
    uint64_t expect = 0;
    for (int64_t i = 0; i < 10000; i++)
        expect += (i % 4 == 0 || i % 4 == 3) && i % 3 == 0;
    ASSERT_EQ(n, expect);
    ASSERT_STATUS(sx_count(c, "age <", &n), SX_EPARSE);
    ASSERT(strstr(sx_errmsg(), "position") != NULL);
    ASSERT_STATUS(sx_count(c, "nosuch == 1", &n), SX_EINVAL);

    /* delete by key and by filter */
    int64_t dk[] = { 1, 2, 3, 123456 };
    sx_keys keys = { 4, dk, NULL };
    uint64_t nd;
    ASSERT_OK(sx_delete(c, &keys, &nd));
    ASSERT_EQ(nd, 3);
    ASSERT_OK(sx_delete_where(c, "age == 50", &nd));
    ASSERT_EQ(nd, 100);
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 10000 - 103);

    /* get */
    int64_t gk[] = { 0, 1, 4, 9999 };
    sx_keys g = { 4, gk, NULL };
    const char *outs[] = { "color", "age" };
    sx_rowset *rs;
    ASSERT_OK(sx_get(c, &g, outs, 2, &rs));
    ASSERT_EQ(rs->n_rows, 3);
    ASSERT_EQ(rs->n_cols, 3);
    ASSERT_EQ(((int64_t *)rs->cols[0].data)[1], 4);
    ASSERT(strcmp(((char **)rs->cols[1].data)[1], "red") == 0);
    sx_rowset_free(rs);

    /* upsert replaces */
    ASSERT_OK(sx_query(c, "id in [4]", NULL, 0, 0, 0, &rs));
    ASSERT_EQ(rs->n_rows, 1);
    sx_rowset_free(rs);

    /* query limit/offset */
    ASSERT_OK(sx_query(c, "age == 7", outs, 1, 10, 5, &rs));
    ASSERT_EQ(rs->n_rows, 10);
    for (size_t i = 0; i < rs->n_rows; i++)
        ASSERT_EQ(((int64_t *)rs->cols[0].data)[i] % 100, 7);
    sx_rowset_free(rs);

    /* filtered search vs brute force, several selectivities, before and after an index */
    check_search_matches_bruteforce(c, NULL, 10, seed + 1);
    check_search_matches_bruteforce(c, "age < 2", 10, seed + 2); /* 2%: exact path */
    check_search_matches_bruteforce(c, "age >= 5 and flag", 10, seed + 3);
    check_search_matches_bruteforce(c, "id in [5, 6, 7]", 10, seed + 4); /* fewer than k */
    ASSERT_OK(
        sx_index_create(c, "HNSW", (sx_param[]){ { "M", "16" }, { "efConstruction", "200" } }, 2));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 60000));
    sx_index_info info;
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.state, SX_INDEX_FINISHED);
    ASSERT_EQ(info.indexed_rows, 10000);
    ASSERT_EQ(info.pending_rows, 0);
    check_search_matches_bruteforce(c, NULL, 10, seed + 1);
    check_search_matches_bruteforce(c, "age < 2", 10, seed + 2);
    check_search_matches_bruteforce(c, "age >= 5 and flag", 10, seed + 3);
    sx_param bad = { "ef", "3" };
    float qv[DIM] = { 0 };
    sx_search_req req = {
        .queries = qv, .nq = 1, .k = 10, .params = &bad, .n_params = 1, .metric = -1
    };
    ASSERT_STATUS(sx_search(c, &req, &rs), SX_EINVAL);
    ASSERT_STATUS(sx_index_create(c, "HNSW", (sx_param[]){ { "M", "8" } }, 1), SX_EEXIST);
    ASSERT_STATUS(sx_index_create(c, "NOPE", NULL, 0), SX_EINVAL);
    sx_collection_release(c);
    sx_db_close(db);
}

static void search_all(sx_collection *c, const float *qs, size_t nq, sx_rowset **rs)
{
    sx_search_req req = { 0 };
    req.queries = qs;
    req.nq = nq;
    req.k = 10;
    req.metric = -1;
    sx_param ef = { "ef", "200" };
    req.params = &ef;
    req.n_params = 1;
    ASSERT_OK(sx_search(c, &req, rs));
}

static void test_reopen_identical(void)
{
    const char *dir = test_tmpdir("eng_reopen");
    char path[512];
    snprintf(path, sizeof path, "%s", dir);
    sx_db *db = open_db(path);
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    uint64_t seed = test_seed();
    for (int b = 0; b < 6; b++)
        ASSERT_OK(insert_rows(c, b * 1000, 1000, seed));
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(insert_rows(c, 6000, 500, seed)); /* some rows only in the WAL */
    int64_t dk[] = { 10, 20, 6001 };
    sx_keys keys = { 3, dk, NULL };
    ASSERT_OK(sx_delete(c, &keys, NULL));
    ASSERT_OK(sx_index_wait(c, 60000));
    float qs[8 * DIM];
    uint64_t s = seed;
    for (int i = 0; i < 8 * DIM; i++)
        qs[i] = test_randf(&s) * 10.0f;
    sx_rowset *a, *b;
    search_all(c, qs, 8, &a);
    sx_collection_release(c);
    sx_db_close(db);

    db = open_db(path);
    ASSERT_OK(sx_db_check(db));
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(sx_index_wait(c, 60000));
    search_all(c, qs, 8, &b);
    ASSERT_EQ(a->n_rows, b->n_rows);
    for (size_t i = 0; i < a->n_rows; i++) {
        ASSERT_EQ(((int64_t *)a->cols[0].data)[i], ((int64_t *)b->cols[0].data)[i]);
        ASSERT_NEAR(a->distances[i], b->distances[i], 1e-4);
    }
    uint64_t n;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 6500 - 3);
    sx_rowset_free(a);
    sx_rowset_free(b);
    /* compaction drops deleted rows, keeps results */
    ASSERT_OK(sx_compact(c));
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 6500 - 3);
    int64_t gk[] = { 10, 11 };
    sx_keys g = { 2, gk, NULL };
    sx_rowset *rs;
    ASSERT_OK(sx_get(c, &g, NULL, 0, &rs));
    ASSERT_EQ(rs->n_rows, 1);
    ASSERT_EQ(((int64_t *)rs->cols[0].data)[0], 11);
    sx_rowset_free(rs);
    sx_collection_release(c);
    sx_db_close(db);
    db = open_db(path);
    ASSERT_OK(sx_db_check(db));
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 6500 - 3);
    sx_collection_release(c);
    sx_db_close(db);
}

static bool file_exists(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void touch(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    ASSERT_EQ(fclose(f), 0);
}

/* Opening a collection removes the files its manifest does not name (collect_garbage), parsing
 * seg-ID.EXT and seg-ID.del.GEN names; a 20-digit ID past 64 bits names no segment (it was
 * undefined behaviour in sscanf) and other names are kept. */
static void test_open_collects_garbage(void)
{
    const char *dir = test_tmpdir("eng_gc");
    char path[512], cdir[600], live[64];
    snprintf(path, sizeof path, "%s", dir);
    sx_db *db = open_db(path);
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(insert_rows(c, 0, 100, 1));
    ASSERT_OK(sx_flush(c));
    sx_collection_release(c);
    sx_db_close(db);
    snprintf(cdir, sizeof cdir, "%s/collections/c", path);
    DIR *d = opendir(cdir);
    ASSERT(d != NULL);
    live[0] = '\0';
    for (struct dirent *e = readdir(d); e; e = readdir(d))
        if (strncmp(e->d_name, "seg-", 4) == 0 && strstr(e->d_name, ".sxs"))
            snprintf(live, sizeof live, "%s", e->d_name);
    closedir(d);
    ASSERT(live[0] != '\0');
    char live_del[80], live_idx[80];
    snprintf(live_del, sizeof live_del, "%.24s.del.77", live); /* "seg-" + 20 digits */
    snprintf(live_idx, sizeof live_idx, "%.24s.idx.tmp", live);
    const char *gone[] = { "seg-00000000000000000999.sxs",
                           "seg-99999999999999999999.sxs",
                           "seg-18446744073709551616.del.1",
                           "junk.tmp",
                           live_del,
                           live_idx };
    const char *kept[] = { "notes.txt", "seg-x.sxs", "seg-+5.sxs", "seg-00000000000000000999." };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        touch(cdir, gone[i]);
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        touch(cdir, kept[i]);
    db = open_db(path);
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT(file_exists(cdir, live));
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        if (file_exists(cdir, gone[i]))
            FAILF("%s was not removed", gone[i]);
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (!file_exists(cdir, kept[i]))
            FAILF("%s was removed", kept[i]);
    uint64_t n;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 100);
    sx_collection_release(c);
    sx_db_close(db);
}

static void test_varchar_pk_cosine_autoid(void)
{
    sx_db *db = open_db(test_tmpdir("eng_vpk"));
    sx_field_def f[] = { { "name", SX_FIELD_VARCHAR, true, false, 0, 64 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, 3, 0 } };
    sx_collection_def d = { "s", f, 2, SX_METRIC_COSINE };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "s", &c));
    const char *names[] = { "a", "b", "c" };
    float v[] = { 1, 0, 0, 0, 2, 0, 1, 1, 0 };
    sx_column cols[] = { { "name", SX_FIELD_VARCHAR, names }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { 3, cols, 2 };
    ASSERT_OK(sx_insert(c, &b, NULL));
    float q[] = { 0, 5, 0 };
    sx_search_req req = { .queries = q, .nq = 1, .k = 3, .metric = SX_METRIC_COSINE };
    sx_rowset *rs;
    ASSERT_OK(sx_search(c, &req, &rs));
    ASSERT_EQ(rs->topks[0], 3);
    ASSERT(strcmp(((char **)rs->cols[0].data)[0], "b") == 0);
    ASSERT_NEAR(rs->distances[0], 1.0, 1e-5);
    ASSERT_NEAR(rs->distances[1], 0.70710678, 1e-5);
    sx_rowset_free(rs);
    req.metric = SX_METRIC_L2;
    ASSERT_STATUS(sx_search(c, &req, &rs), SX_EINVAL);
    /* upsert by string key */
    float v2[] = { 0, 0, 1 };
    const char *n2[] = { "b" };
    sx_column c2[] = { { "name", SX_FIELD_VARCHAR, n2 }, { "v", SX_FIELD_FLOAT_VECTOR, v2 } };
    sx_batch b2 = { 1, c2, 2 };
    ASSERT_OK(sx_upsert(c, &b2));
    uint64_t n;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 3);
    req.metric = -1;
    ASSERT_OK(sx_search(c, &req, &rs));
    ASSERT(strcmp(((char **)rs->cols[0].data)[0], "c") == 0);
    sx_rowset_free(rs);
    sx_collection_release(c);

    sx_field_def fa[] = { { "id", SX_FIELD_INT64, true, true, 0, 0 },
                          { "v", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0 } };
    sx_collection_def da = { "auto", fa, 2, SX_METRIC_IP };
    ASSERT_OK(sx_collection_create(db, &da));
    ASSERT_OK(sx_collection_open(db, "auto", &c));
    float va[] = { 1, 2, 3, 4 };
    sx_column ca[] = { { "v", SX_FIELD_FLOAT_VECTOR, va } };
    sx_batch ba = { 2, ca, 1 };
    int64_t ids[2], ids2[2];
    ASSERT_OK(sx_insert(c, &ba, ids));
    ASSERT_OK(sx_insert(c, &ba, ids2));
    ASSERT(ids[0] != ids[1] && ids2[0] > ids[1]);
    sx_collection_release(c);
    sx_db_close(db);
}

typedef struct conc {
    sx_collection *c;
    int id;
    int failures;
} conc;

static void *searcher(void *arg)
{
    conc *x = arg;
    float q[DIM] = { 1, 2, 3 };
    for (int i = 0; i < 200; i++) {
        sx_search_req req = {
            .queries = q, .nq = 1, .k = 5, .metric = -1, .filter = i % 2 ? "age > 10" : NULL
        };
        sx_rowset *rs;
        if (sx_search(x->c, &req, &rs) != SX_OK)
            x->failures++;
        else
            sx_rowset_free(rs);
    }
    return NULL;
}

static void *inserter(void *arg)
{
    conc *x = arg;
    for (int i = 0; i < 40; i++)
        if (insert_rows(x->c, 100000 + x->id * 100000 + i * 100, 100, 7) != SX_OK)
            x->failures++;
    return NULL;
}

static void test_concurrent_search_insert(void)
{
    sx_db *db = open_db(test_tmpdir("eng_conc"));
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    pthread_t t[5];
    conc x[5];
    for (int i = 0; i < 5; i++) {
        x[i] = (conc){ c, i, 0 };
        pthread_create(&t[i], NULL, i < 2 ? inserter : searcher, &x[i]);
    }
    for (int i = 0; i < 5; i++) {
        pthread_join(t[i], NULL);
        ASSERT_EQ(x[i].failures, 0);
    }
    uint64_t n;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 8000);
    sx_collection_release(c);
    sx_db_close(db);
}

static void test_build_memory_limit_and_drop(void)
{
    const char *dir = test_tmpdir("eng_memlimit");
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.index_build_memory_limit = 4096; /* far below what 3000 rows need */
    ASSERT_OK(sx_db_open(dir, &o, &db));
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(insert_rows(c, 0, 1000, 5));
    ASSERT_OK(insert_rows(c, 1000, 1000, 5));
    ASSERT_OK(insert_rows(c, 2000, 1000, 5));
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    ASSERT_OK(sx_flush(c));
    ASSERT_STATUS(sx_index_wait(c, 60000), SX_ENOMEM); /* the build's own status */
    sx_index_info info;
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.state, SX_INDEX_FAILED);
    ASSERT(strstr(info.fail_reason, "index_build_memory_limit") != NULL);
    ASSERT_EQ(info.indexed_rows, 0);
    /* search stays correct without the index */
    check_search_matches_bruteforce(c, NULL, 10, 11);
    /* dropping the failed index clears the state; FLAT needs no build memory */
    ASSERT_OK(sx_index_drop(c));
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.state, SX_INDEX_NONE);
    ASSERT_OK(sx_index_create(c, "FLAT", NULL, 0));
    ASSERT_OK(sx_index_wait(c, 60000));
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.state, SX_INDEX_FINISHED);
    ASSERT_EQ(info.indexed_rows, 3000);
    sx_collection_release(c);
    sx_db_close(db);
}

static void test_drop_cancels_build(void)
{
    const char *dir = test_tmpdir("eng_cancel");
    sx_db *db = open_db(dir);
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    for (int b = 0; b < 8; b++)
        ASSERT_OK(insert_rows(c, b * 1000, 1000, 9)); /* two sealed segments of 4000 */
    ASSERT_OK(sx_index_create(c, "HNSW", (sx_param[]){ { "efConstruction", "2000" } }, 1));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_drop(c)); /* cancels queued and running builds, returns promptly */
    sx_index_info info;
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.state, SX_INDEX_NONE);
    ASSERT_EQ(info.indexed_rows, 0);
    ASSERT_STATUS(sx_index_wait(c, 1000), SX_ENOTFOUND);
    uint64_t n;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 8000);
    sx_collection_release(c);
    ASSERT_OK(sx_collection_drop(db, "c"));
    sx_db_close(db);
}

/* sx_collection_set_metric: L2 <-> IP keeps vectors, to COSINE normalises sealed and growing rows
 * (deleted rows dropped), from COSINE with rows and with an index refused, persisted. */
static sx_status insert4(sx_collection *c, int64_t id, float a, float b, float cc, float d)
{
    float v[4] = { a, b, cc, d };
    const char *tag[1] = { "t" };
    sx_column cols[] = { { "id", SX_FIELD_INT64, &id },
                         { "v", SX_FIELD_FLOAT_VECTOR, v },
                         { "tag", SX_FIELD_VARCHAR, tag } };
    sx_batch b4 = { 1, cols, 3 };
    return sx_insert(c, &b4, NULL);
}

/* top-3 of q=[0.1,0.2,0.3,0.4]: ids and distances */
static void search4(sx_collection *c, int64_t *ids, float *dists, size_t *n)
{
    static const float q[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
    sx_search_req req = { 0 };
    req.queries = q;
    req.nq = 1;
    req.k = 3;
    req.metric = -1;
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(c, &req, &rs));
    *n = rs->n_rows;
    for (size_t i = 0; i < rs->n_rows; i++) {
        ids[i] = ((int64_t *)rs->cols[0].data)[i];
        dists[i] = rs->distances[i];
    }
    sx_rowset_free(rs);
}

static void test_set_metric(void)
{
    const char *dir = test_tmpdir("eng_set_metric");
    sx_db *db = open_db(dir);
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0 },
                         { "tag", SX_FIELD_VARCHAR, false, false, 0, 8 } };
    sx_collection_def d = { "m", f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "m", &c));
    sx_collection_info *ci = malloc(sizeof *ci);
    ASSERT_STATUS(sx_collection_set_metric(c, (sx_metric)7), SX_EINVAL);
    /* empty: any change */
    ASSERT_OK(sx_collection_set_metric(c, SX_METRIC_COSINE));
    ASSERT_OK(sx_collection_set_metric(c, SX_METRIC_L2));
    ASSERT_OK(insert4(c, 1, 0.1f, 0.2f, 0.3f, 0.4f));
    ASSERT_OK(insert4(c, 2, 0.5f, 0.6f, 0.7f, 0.8f));
    ASSERT_OK(insert4(c, 3, 0.9f, 0.1f, 0.2f, 0.3f));
    int64_t ids[3];
    float ds[3];
    size_t n = 0;
    search4(c, ids, ds, &n);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(ids[0], 1);
    ASSERT_NEAR(ds[0], 0.0, 1e-6);
    ASSERT_EQ(ids[1], 2);
    ASSERT_NEAR(ds[1], 0.64, 1e-5); /* squared L2 */
    ASSERT_EQ(ids[2], 3);
    ASSERT_NEAR(ds[2], 0.67, 1e-5);
    /* L2 -> IP with rows: vectors as stored */
    ASSERT_OK(sx_collection_set_metric(c, SX_METRIC_IP));
    ASSERT_OK(sx_collection_describe(c, ci));
    ASSERT_EQ(ci->metric, SX_METRIC_IP);
    search4(c, ids, ds, &n);
    ASSERT_EQ(ids[0], 2);
    ASSERT_NEAR(ds[0], 0.70, 1e-5);
    ASSERT_EQ(ids[1], 1);
    ASSERT_NEAR(ds[1], 0.30, 1e-5);
    /* a sealed segment with a deleted row, plus growing rows: IP -> COSINE normalises all */
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(insert4(c, 4, 2.0f, 0.0f, 0.0f, 0.0f));
    int64_t dk[] = { 2 };
    sx_keys keys = { 1, dk, NULL };
    ASSERT_OK(sx_delete(c, &keys, NULL));
    ASSERT_OK(sx_collection_set_metric(c, SX_METRIC_COSINE));
    ASSERT_STATUS(sx_collection_set_metric(c, SX_METRIC_L2), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "original") != NULL);
    ASSERT_OK(insert4(c, 5, 0.0f, 3.0f, 0.0f, 0.0f)); /* normalised on insert now */
    for (int pass = 0; pass < 2; pass++) {
        ASSERT_OK(sx_collection_describe(c, ci));
        ASSERT_EQ(ci->metric, SX_METRIC_COSINE);
        uint64_t cnt = 0;
        ASSERT_OK(sx_count(c, NULL, &cnt));
        ASSERT_EQ(cnt, 4); /* 1, 3, 4, 5 */
        search4(c, ids, ds, &n);
        ASSERT_EQ(ids[0], 1);
        ASSERT_NEAR(ds[0], 1.0, 1e-5);
        ASSERT_EQ(ids[1], 3);
        ASSERT_NEAR(ds[1], 0.29 / (sqrt(0.30) * sqrt(0.95)), 1e-5);
        int64_t gk[] = { 4, 5, 1, 2 };
        sx_keys g = { 4, gk, NULL };
        const char *of[] = { "v", "tag" };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_get(c, &g, of, 2, &rs));
        ASSERT_EQ(rs->n_rows, 3);
        const float *v = rs->cols[1].data;
        ASSERT_NEAR(v[0], 1.0, 1e-6);
        ASSERT_NEAR(v[4 + 1], 1.0, 1e-6);
        ASSERT_NEAR(v[8 + 0], 0.1 / sqrt(0.30), 1e-6);
        ASSERT(strcmp(((char **)rs->cols[2].data)[2], "t") == 0);
        sx_rowset_free(rs);
        if (pass == 0) { /* reopen: the metric and the rewritten segments persist */
            sx_collection_release(c);
            sx_db_close(db);
            db = open_db(dir);
            ASSERT_OK(sx_db_check(db));
            ASSERT_OK(sx_collection_open(db, "m", &c));
        }
    }
    /* with an index the metric is fixed */
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    ASSERT_STATUS(sx_collection_set_metric(c, SX_METRIC_COSINE), SX_OK); /* unchanged: fine */
    ASSERT_STATUS(sx_collection_set_metric(c, SX_METRIC_IP), SX_EBUSY);
    ASSERT(strstr(sx_errmsg(), "index") != NULL);
    ASSERT_OK(sx_index_drop(c));
    ASSERT_STATUS(sx_collection_set_metric(c, SX_METRIC_IP), SX_EINVAL);
    sx_collection_release(c);
    /* empty COSINE collection -> L2, persisted */
    d.name = "e";
    d.metric = SX_METRIC_COSINE;
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "e", &c));
    ASSERT_OK(sx_collection_set_metric(c, SX_METRIC_L2));
    sx_collection_release(c);
    sx_db_close(db);
    db = open_db(dir);
    ASSERT_OK(sx_collection_open(db, "e", &c));
    ASSERT_OK(sx_collection_describe(c, ci));
    ASSERT_EQ(ci->metric, SX_METRIC_L2);
    sx_collection_release(c);
    sx_db_close(db);
    free(ci);
}

/* One search request, one param; returns the status and copies sx_errmsg() into msg. */
static sx_status search_with(sx_collection *c, const char *key, const char *val, char *msg)
{
    float q[DIM] = { 0 };
    sx_param p = { key, val };
    sx_search_req req = { 0 };
    req.queries = q;
    req.nq = 1;
    req.k = 10;
    req.metric = -1;
    req.params = &p;
    req.n_params = 1;
    sx_rowset *rs = NULL;
    sx_status st = sx_search(c, &req, &rs);
    snprintf(msg, 256, "%s", st == SX_OK ? "" : sx_errmsg());
    sx_rowset_free(rs);
    return st;
}

/* Search params are checked against the collection's index type for every search: while every
 * row is growing (searched exactly, no index built), sealed and indexed, or both, a bad value
 * gets the same status and message. Without an index spec nothing interprets them. */
static void test_search_params_checked_always(void)
{
    sx_db *db = open_db(test_tmpdir("eng_sparams"));
    create_coll(db, "c", SX_METRIC_L2);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(insert_rows(c, 0, 300, 3));
    char msg[256], growing_abc[256], growing_small[256];
    /* no index: exact search, the params are not interpreted */
    ASSERT_OK(search_with(c, "ef", "abc", msg));

    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    sx_index_info info;
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.indexed_rows, 0); /* all 300 rows growing */
    ASSERT_STATUS(search_with(c, "ef", "abc", growing_abc), SX_EINVAL);
    ASSERT(strstr(growing_abc, "ef") != NULL);
    ASSERT_STATUS(search_with(c, "ef", "5", growing_small), SX_EINVAL); /* ef < k = 10 */
    ASSERT(strstr(growing_small, "ef(5)") != NULL);
    ASSERT_OK(search_with(c, "ef", "64", msg));

    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 60000));
    ASSERT_OK(sx_index_describe(c, &info));
    ASSERT_EQ(info.indexed_rows, 300); /* sealed and indexed */
    ASSERT_STATUS(search_with(c, "ef", "abc", msg), SX_EINVAL);
    if (strcmp(msg, growing_abc) != 0)
        FAILF("sealed: \"%s\", growing: \"%s\"", msg, growing_abc);
    ASSERT_STATUS(search_with(c, "ef", "5", msg), SX_EINVAL);
    ASSERT(strcmp(msg, growing_small) == 0);
    ASSERT_OK(insert_rows(c, 300, 50, 3)); /* sealed + growing */
    ASSERT_STATUS(search_with(c, "ef", "abc", msg), SX_EINVAL);
    ASSERT(strcmp(msg, growing_abc) == 0);
    ASSERT_OK(search_with(c, "ef", "64", msg));

    /* Another type, growing only: IVF_FLAT's nprobe range. */
    ASSERT_OK(sx_index_drop(c));
    ASSERT_OK(search_with(c, "nprobe", "0", msg));
    ASSERT_OK(sx_index_create(c, "IVF_FLAT", (sx_param[]){ { "nlist", "4" } }, 1));
    ASSERT_STATUS(search_with(c, "nprobe", "0", msg), SX_EINVAL);
    ASSERT(strstr(msg, "nprobe") != NULL);
    ASSERT_OK(search_with(c, "nprobe", "2", msg));
    /* a param without a value */
    ASSERT_STATUS(search_with(c, "nprobe", NULL, msg), SX_EINVAL);
    sx_collection_release(c);
    sx_db_close(db);
}

int main(void)
{
    RUN(test_schema_errors);
    RUN(test_insert_errors);
    RUN(test_crud_and_filters);
    RUN(test_reopen_identical);
    RUN(test_open_collects_garbage);
    RUN(test_varchar_pk_cosine_autoid);
    RUN(test_concurrent_search_insert);
    RUN(test_build_memory_limit_and_drop);
    RUN(test_drop_cancels_build);
    RUN(test_set_metric);
    RUN(test_search_params_checked_always);
    return TEST_DONE();
}
