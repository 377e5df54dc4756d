/*
 * test_nullable.c: nullable fields in the engine. A collection with nullable INT64, DOUBLE, BOOL
 * and VARCHAR fields gets random rows (about a third NULL in each field), deletes and upserts
 * that turn NULLs into values and back; after every step, in the growing segment, after a flush,
 * after compaction and merging, after a reopen that replays the WAL and after one that reads
 * only segment files, a set of filters is counted and queried and compared with a model that
 * applies Kleene's three-valued logic (a comparison with NULL is UNKNOWN, `not` keeps it
 * UNKNOWN, only TRUE rows match; `is null` is never UNKNOWN); the rows' values and NULL marks
 * come back in query, get and search results. Also: schema and batch errors, the file versions
 * written (manifest 2, segment 3), and readers running while a writer appends NULLs into the
 * same bitmap words (test_concurrent_nulls; in the TSan pass).
 */
#include <math.h>
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DIM   4
#define MAXID 4000

typedef struct mrow {
    bool live;
    bool has_age, has_score, has_flag, has_name;
    int64_t age;
    double score;
    bool flag;
    char name[16];
    int ver;
} mrow;

static mrow model[MAXID];
static sx_db *db;
static sx_collection *coll;
static const char *dir;
static uint64_t rng;

/* three-valued results: 1 TRUE, 0 FALSE, -1 UNKNOWN */
#define U (-1)

static int t_not(int a)
{
    return a == U ? U : !a;
}

static int t_and(int a, int b)
{
    if (a == 0 || b == 0)
        return 0;
    return a == U || b == U ? U : 1;
}

static int t_or(int a, int b)
{
    if (a == 1 || b == 1)
        return 1;
    return a == U || b == U ? U : 0;
}

static int age_gt(const mrow *r, int64_t x)
{
    return r->has_age ? r->age > x : U;
}

typedef struct fcase {
    const char *filter;
    int (*eval)(const mrow *r);
} fcase;

static int f0(const mrow *r)
{
    return age_gt(r, 30);
}

static int f1(const mrow *r)
{
    return t_not(age_gt(r, 30));
}

static int f2(const mrow *r)
{
    return !r->has_age;
}

static int f3(const mrow *r)
{
    return r->has_age;
}

static int f4(const mrow *r)
{
    return t_or(r->has_score ? r->score >= 0.5 : U, r->has_flag ? r->flag : U);
}

static int f5(const mrow *r)
{
    return t_not(r->has_flag ? r->flag : U);
}

static int f6(const mrow *r)
{
    return r->has_name ? r->name[0] == 'a' : U;
}

static int f7(const mrow *r)
{
    return t_not(r->has_name ? strcmp(r->name, "abc") == 0 : U);
}

static int f8(const mrow *r)
{
    return r->has_age ? r->age + 1 == 5 : U;
}

static int f9(const mrow *r)
{
    return r->has_age ? (r->age == 1 || r->age == 2 || r->age == 3) : U;
}

static int f10(const mrow *r)
{
    return t_not(f9(r));
}

static int f11(const mrow *r)
{
    return t_and(!r->has_age, r->has_score);
}

static int f12(const mrow *r)
{
    return r->has_age ? 1 : U; /* age == age */
}

static int f13(const mrow *r)
{
    return t_or(t_not(age_gt(r, 30)), !r->has_age);
}

static int f14(const mrow *r)
{
    return t_and(r->has_flag ? r->flag == true : U, r->has_name);
}

static int f15(const mrow *r)
{
    return t_not(t_and(age_gt(r, 10), r->has_score ? r->score < 0.25 : U));
}

static const fcase cases[] = {
    { "age > 30", f0 },
    { "not (age > 30)", f1 },
    { "age is null", f2 },
    { "age IS NOT NULL", f3 },
    { "score >= 0.5 or flag", f4 },
    { "not flag", f5 },
    { "name like \"a%\"", f6 },
    { "not (name == \"abc\")", f7 },
    { "age + 1 == 5", f8 },
    { "age in [1, 2, 3]", f9 },
    { "age not in [1, 2, 3]", f10 },
    { "age is null and score is not null", f11 },
    { "age == age", f12 },
    { "not (age > 30) or age is null", f13 },
    { "flag == true and name is not null", f14 },
    { "not (age > 10 and score < 0.25)", f15 },
};

static void vec_of(int64_t id, int ver, float *v)
{
    v[0] = (float)id;
    v[1] = (float)ver;
    v[2] = (float)(id % 13);
    v[3] = 1.0f;
}

static void open_db(void)
{
    sx_db_options o = { 0 };
    o.build_threads = 1;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "n", &coll));
}

static void close_db(void)
{
    sx_collection_release(coll);
    sx_db_close(db);
    coll = NULL;
    db = NULL;
}

/* writes ids [first, first + n) with fresh random values, NULLs included */
static void write_rows(bool upsert, int64_t first, size_t n, int ver)
{
    int64_t *ids = calloc(n, sizeof *ids), *age = calloc(n, sizeof *age);
    double *score = calloc(n, sizeof *score);
    bool *flag = calloc(n, 1), *va = calloc(n, 1), *vs = calloc(n, 1), *vf = calloc(n, 1),
         *vn = calloc(n, 1);
    char **name = calloc(n, sizeof *name);
    char(*nbuf)[16] = calloc(n, 16);
    float *v = calloc(n * DIM, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        int64_t id = first + (int64_t)i;
        mrow *m = &model[id];
        ids[i] = id;
        m->ver = ver;
        m->has_age = test_rand(&rng) % 3 != 0;
        m->age = (int64_t)(test_rand(&rng) % 60);
        m->has_score = test_rand(&rng) % 3 != 0;
        m->score = (double)(test_rand(&rng) % 1000) / 1000.0;
        m->has_flag = test_rand(&rng) % 3 != 0;
        m->flag = test_rand(&rng) % 2;
        m->has_name = test_rand(&rng) % 3 != 0;
        static const char *names[] = { "abc", "abd", "b", "", "axe", "zz" };
        snprintf(m->name, sizeof m->name, "%s", names[test_rand(&rng) % 6]);
        va[i] = m->has_age;
        vs[i] = m->has_score;
        vf[i] = m->has_flag;
        vn[i] = m->has_name;
        /* the value of a NULL row is ignored: garbage here, and a NULL VARCHAR pointer */
        age[i] = m->has_age ? m->age : 777;
        score[i] = m->has_score ? m->score : (double)NAN; /* even NaN */
        flag[i] = m->has_flag ? m->flag : true;
        snprintf(nbuf[i], 16, "%s", m->name);
        name[i] = m->has_name ? nbuf[i] : (i % 2 ? NULL : nbuf[i]);
        if (!m->has_age)
            m->age = 0;
        vec_of(id, ver, v + i * DIM);
    }
    sx_column cols[] = {
        { "id", SX_FIELD_INT64, ids, NULL }, { "v", SX_FIELD_FLOAT_VECTOR, v, NULL },
        { "age", SX_FIELD_INT64, age, va },  { "score", SX_FIELD_DOUBLE, score, vs },
        { "flag", SX_FIELD_BOOL, flag, vf }, { "name", SX_FIELD_VARCHAR, name, vn }
    };
    sx_batch b = { n, cols, 6 };
    if (upsert)
        ASSERT_OK(sx_upsert(coll, &b));
    else
        ASSERT_OK(sx_insert(coll, &b, NULL));
    for (size_t i = 0; i < n; i++)
        model[first + (int64_t)i].live = true;
    free(ids);
    free(age);
    free(score);
    free(flag);
    free(va);
    free(vs);
    free(vf);
    free(vn);
    free(name);
    free(nbuf);
    free(v);
}

static void delete_range(int64_t first, size_t n, size_t step)
{
    int64_t *k = calloc(n, sizeof *k);
    size_t m = 0;
    for (size_t i = 0; i < n; i += step) {
        k[m++] = first + (int64_t)i;
        model[first + (int64_t)i].live = false;
    }
    sx_keys keys = { m, k, NULL };
    ASSERT_OK(sx_delete(coll, &keys, NULL));
    free(k);
}

static const sx_column *col_named(const sx_rowset *rs, const char *n)
{
    for (size_t i = 0; i < rs->n_cols; i++)
        if (!strcmp(rs->cols[i].name, n))
            return &rs->cols[i];
    return NULL;
}

/* every row of rs has the model's values and NULL marks */
static void check_rowset(const sx_rowset *rs, size_t row0, size_t n)
{
    const sx_column *ci = col_named(rs, "id"), *ca = col_named(rs, "age"),
                    *cs = col_named(rs, "score"), *cf = col_named(rs, "flag"),
                    *cn = col_named(rs, "name");
    ASSERT(ci && ca && cs && cf && cn);
    for (size_t r = row0; r < row0 + n; r++) {
        int64_t id = ((const int64_t *)ci->data)[r];
        ASSERT(id >= 0 && id < MAXID && model[id].live);
        const mrow *m = &model[id];
        ASSERT_EQ(ca->valid ? ca->valid[r] : true, m->has_age);
        ASSERT_EQ(cs->valid ? cs->valid[r] : true, m->has_score);
        ASSERT_EQ(cf->valid ? cf->valid[r] : true, m->has_flag);
        ASSERT_EQ(cn->valid ? cn->valid[r] : true, m->has_name);
        if (m->has_age)
            ASSERT_EQ(((const int64_t *)ca->data)[r], m->age);
        else
            ASSERT_EQ(((const int64_t *)ca->data)[r], 0); /* stored as 0 */
        if (m->has_score)
            ASSERT(((const double *)cs->data)[r] == m->score);
        else
            ASSERT(((const double *)cs->data)[r] == 0.0);
        if (m->has_flag)
            ASSERT_EQ(((const bool *)cf->data)[r], m->flag);
        const char *nm = ((char *const *)cn->data)[r];
        ASSERT(!strcmp(nm, m->has_name ? m->name : ""));
    }
}

static void check_all(const char *when)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint64_t want = 0;
        for (int id = 0; id < MAXID; id++)
            if (model[id].live && cases[k].eval(&model[id]) == 1)
                want++;
        uint64_t got = 0;
        ASSERT_OK(sx_count(coll, cases[k].filter, &got));
        if (got != want)
            fprintf(stderr, "%s: filter %s: count %llu, model %llu\n", when, cases[k].filter,
                    (unsigned long long)got, (unsigned long long)want);
        ASSERT_EQ(got, want);
        const char *out[] = { "*" };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_query(coll, cases[k].filter, out, 1, 0, 0, &rs));
        ASSERT_EQ(rs->n_rows, want);
        for (size_t r = 0; r < rs->n_rows; r++) {
            int64_t id = ((const int64_t *)rs->cols[0].data)[r];
            ASSERT(cases[k].eval(&model[id]) == 1);
        }
        check_rowset(rs, 0, rs->n_rows);
        sx_rowset_free(rs);
    }
    /* get by keys and a search return the same values and NULL marks */
    int64_t keys[64];
    size_t nk = 0;
    for (int id = 0; id < MAXID && nk < 64; id += 37)
        if (model[id].live)
            keys[nk++] = id;
    sx_keys kk = { nk, keys, NULL };
    const char *out[] = { "age", "score", "flag", "name" };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_get(coll, &kk, out, 4, &rs));
    ASSERT_EQ(rs->n_rows, nk);
    check_rowset(rs, 0, rs->n_rows);
    sx_rowset_free(rs);
    float q[DIM];
    vec_of(keys[0], model[keys[0]].ver, q);
    sx_search_req req = { .queries = q,
                          .nq = 1,
                          .k = 5,
                          .filter = "age is null or age >= 0",
                          .output_fields = out,
                          .n_output_fields = 4,
                          .metric = -1 };
    ASSERT_OK(sx_search(coll, &req, &rs));
    ASSERT(rs->n_rows >= 1);
    ASSERT_EQ(((const int64_t *)rs->cols[0].data)[0], keys[0]);
    check_rowset(rs, 0, rs->n_rows);
    sx_rowset_free(rs);
}

static uint32_t file_version(const char *path)
{
    FILE *f = fopen(path, "rb");
    ASSERT(f != NULL);
    uint8_t b[12];
    ASSERT_EQ(fread(b, 1, 12, f), 12u);
    fclose(f);
    return (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
}

static void test_nullable_fields(void)
{
    rng = test_seed();
    dir = test_tmpdir("nullable");
    sx_db_options o = { 0 };
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0, false },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0, false },
                         { "age", SX_FIELD_INT64, false, false, 0, 0, true },
                         { "score", SX_FIELD_DOUBLE, false, false, 0, 0, true },
                         { "flag", SX_FIELD_BOOL, false, false, 0, 0, true },
                         { "name", SX_FIELD_VARCHAR, false, false, 0, 8, true } };
    /* the key and the vector cannot be nullable */
    f[0].nullable = true;
    sx_collection_def def = { "n", f, 6, SX_METRIC_L2 };
    ASSERT_STATUS(sx_collection_create(db, &def), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "primary key cannot be nullable") != NULL);
    f[0].nullable = false;
    f[1].nullable = true;
    ASSERT_STATUS(sx_collection_create(db, &def), SX_EINVAL);
    f[1].nullable = false;
    ASSERT_OK(sx_collection_create(db, &def));
    ASSERT_OK(sx_collection_open(db, "n", &coll));

    /* a NULL in a field that is not nullable is refused, nothing written */
    int64_t id1[] = { 1 };
    float v1[DIM] = { 1, 2, 3, 4 };
    int64_t a1[] = { 5 };
    double s1[] = { 0.5 };
    bool b1[] = { true }, no[] = { false };
    const char *n1[] = { "x" };
    sx_column bad[] = {
        { "id", SX_FIELD_INT64, id1, NULL }, { "v", SX_FIELD_FLOAT_VECTOR, v1, no },
        { "age", SX_FIELD_INT64, a1, NULL }, { "score", SX_FIELD_DOUBLE, s1, NULL },
        { "flag", SX_FIELD_BOOL, b1, NULL }, { "name", SX_FIELD_VARCHAR, n1, NULL }
    };
    sx_batch bb = { 1, bad, 6 };
    ASSERT_STATUS(sx_insert(coll, &bb, NULL), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "not nullable") != NULL);
    bad[1].valid = NULL;
    bad[0].valid = no;
    ASSERT_STATUS(sx_insert(coll, &bb, NULL), SX_EINVAL);
    uint64_t cnt = 1;
    ASSERT_OK(sx_count(coll, NULL, &cnt));
    ASSERT_EQ(cnt, 0u);

    /* growing rows, then sealed ones, then both */
    write_rows(false, 0, 1500, 1);
    check_all("growing");
    ASSERT_OK(sx_flush(coll));
    check_all("flushed");
    write_rows(false, 1500, 1000, 1);
    delete_range(0, 1500, 7);
    write_rows(true, 100, 300, 2); /* upserts: NULLs become values and back */
    check_all("sealed + growing");
    ASSERT_OK(sx_flush(coll));
    write_rows(false, 2500, 900, 1);
    ASSERT_OK(sx_flush(coll));
    ASSERT_OK(sx_compact(coll)); /* rewrites the segment with deletes, merges the small ones */
    check_all("compacted");
    char path[700];
    snprintf(path, sizeof path, "%s/collections/n/MANIFEST", dir);
    ASSERT_EQ(file_version(path), 2u);

    /* a reopen replaying the WAL (rows not flushed), then one from segment files only */
    write_rows(true, 2000, 800, 3);
    delete_range(2000, 800, 5);
    close_db();
    open_db();
    check_all("reopened (WAL replay)");
    ASSERT_OK(sx_flush(coll));
    close_db();
    open_db();
    check_all("reopened (segments)");
    ASSERT_OK(sx_index_create(coll, "HNSW", NULL, 0));
    ASSERT_OK(sx_index_wait(coll, 0));
    check_all("indexed");
    close_db();
    /* the segment files are version 3 */
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls %s/collections/n/*.sxs > %s/list", dir, dir);
    ASSERT(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/list", dir);
    FILE *lf = fopen(path, "r");
    ASSERT(lf != NULL);
    char line[700];
    int nseg = 0;
    while (fgets(line, sizeof line, lf)) {
        line[strcspn(line, "\n")] = 0;
        ASSERT_EQ(file_version(line), 3u);
        nseg++;
    }
    fclose(lf);
    ASSERT(nseg >= 1);
    /* the offline check reads the NULL bitmaps too */
    sx_db_options ro = { 0 };
    ro.read_only = true;
    ASSERT_OK(sx_db_open(dir, &ro, &db));
    ASSERT_OK(sx_db_check(db));
    sx_db_close(db);
    db = NULL;
}

/* A writer appends rows (age NULL exactly on odd ids) in small batches, so the NULL bits of
 * published and unpublished rows share words, while two readers query `age is null` and
 * `age > 5`: every answer must agree with the rule, whatever the moment. */
#define CONC_ROWS 6000
static atomic_bool conc_done;

static void *conc_reader(void *arg)
{
    const char *filter = arg;
    bool want_odd = strcmp(filter, "age is null") == 0;
    while (!atomic_load(&conc_done)) {
        const char *out[] = { "age" };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_query(coll, filter, out, 1, 0, 0, &rs));
        for (size_t r = 0; r < rs->n_rows; r++) {
            int64_t id = ((const int64_t *)rs->cols[0].data)[r];
            ASSERT_EQ(id % 2 == 1, want_odd);
            bool null = rs->cols[1].valid && !rs->cols[1].valid[r];
            ASSERT_EQ(null, want_odd);
        }
        sx_rowset_free(rs);
    }
    return NULL;
}

static void test_concurrent_nulls(void)
{
    dir = test_tmpdir("nullable_conc");
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0, false },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0, false },
                         { "age", SX_FIELD_INT64, false, false, 0, 0, true } };
    sx_collection_def def = { "n", f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    ASSERT_OK(sx_collection_open(db, "n", &coll));
    atomic_store(&conc_done, false);
    pthread_t th[2];
    ASSERT(pthread_create(&th[0], NULL, conc_reader, (void *)"age is null") == 0);
    ASSERT(pthread_create(&th[1], NULL, conc_reader, (void *)"age > 5") == 0);
    for (int64_t first = 0; first < CONC_ROWS; first += 7) {
        int64_t ids[7], age[7];
        bool valid[7];
        float v[7 * DIM];
        for (int i = 0; i < 7; i++) {
            ids[i] = first + i;
            age[i] = 10 + ids[i];
            valid[i] = ids[i] % 2 == 0;
            vec_of(ids[i], 1, v + i * DIM);
        }
        sx_column cols[] = { { "id", SX_FIELD_INT64, ids, NULL },
                             { "v", SX_FIELD_FLOAT_VECTOR, v, NULL },
                             { "age", SX_FIELD_INT64, age, valid } };
        sx_batch b = { 7, cols, 3 };
        ASSERT_OK(sx_insert(coll, &b, NULL));
        if (first % 2100 == 0)
            ASSERT_OK(sx_flush(coll)); /* sealing while the readers run */
    }
    atomic_store(&conc_done, true);
    for (int i = 0; i < 2; i++)
        ASSERT(pthread_join(th[i], NULL) == 0);
    uint64_t n = 0;
    ASSERT_OK(sx_count(coll, "age is null", &n));
    ASSERT_EQ(n, (uint64_t)(CONC_ROWS + 6) / 7 * 7 / 2);
    sx_collection_release(coll);
    sx_db_close(db);
    coll = NULL;
    db = NULL;
}

int main(void)
{
    RUN(test_nullable_fields);
    RUN(test_concurrent_nulls);
    return TEST_DONE();
}
