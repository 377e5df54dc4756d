/*
 * test_import.c: bulk import (sx_import_run, the import jobs and the REST job API), on real
 * files written by this test in each format and read back through the engine.
 *   json_rows / json_toplevel  row-based JSON ({"rows": [...]} and a top-level array) of every
 *                 field type: count, every value by sx_get, and an exact search hit per probe
 *   npy_folder    one .npy per field (<i8, <f4 2-D, <f8, |b1, <U8): same checks
 *   varchar_pk    a VARCHAR key from JSON (with \u escapes) and from <U .npy: get by key, the same
 *                 keys again refused, deletes find them
 *   fvecs_bvecs   auto-id collections from .fvecs and .bvecs (bytes become floats), consecutive
 *                 ids in file order, search hits at distance 0
 *   hdf5          "train" dataset (auto id) and a dataset per scalar field
 *   batches       1,000 rows in batches of 100: 10 sealed segments committed at once, progress
 *                 reported per batch, pk map updated (deletes and upserts see the rows), the
 *                 rows survive a reopen, and a later insert continues the ids
 *   malformed     truncated .npy, wrong dtype, wrong dim, bad JSON, a missing field, Parquet, a
 *                 missing file, a duplicate key (stored, and inside the job), a bad second
 *                 group after a good first one, a cancel: a clear error each, the count
 *                 unchanged, no segment file left, and still unchanged after a reopen
 *   dead_s3       an s3:// file on an endpoint where nothing listens: SX_EREMOTE, nothing
 *   crash         a child process SIGKILLed in the middle of a 60,000-row import (after 3 of
 *                 its batches are written): after reopen nothing of it is visible and its
 *                 segment files are gone
 *   index_budget  an HNSW index created before the import is built on the imported segments;
 *                 the batch is charged to the memory budget while the import runs (and given
 *                 back); a 2 MiB budget refuses a 16 KiB-a-row import with SX_ENOMEM, nothing
 *   oom           every allocation of an NPY and a JSON import failed in turn: SX_ENOMEM, nothing
 *                 visible and no file left each time, until it goes through
 *   wal_order     a key inserted and deleted in the WAL, then imported, then deleted again, with
 *                 more rows around, and the process exits without a close: after reopen the
 *                 imported rows, the WAL's later rows and the last delete are all there, once
 *   jobs          sx_import_submit / get / list / wait: a completed and a failed job with its
 *                 reason, both listed afterwards
 *   job_merge     a job's batches (7 segments of 100 rows) merged into one before COMPLETED
 *   rest          POST /v2/vectordb/jobs/import/create, get_progress, describe, list through an
 *                 in-process server: Completed with importedRows and progress 100, a failing
 *                 job Failed with its reason, an unknown job id refused; a JSON row's keys
 *                 outside the schema land in the dynamic field's hidden column
 *   cli_job       `sextant import --job` creates a collection from .fvecs and imports it in
 * batches; a Parquet file exits 1 naming the reason, nothing imported rest_root     with
 * import_root, local files outside it (directly, by "..", through a link) are refused at create
 * (1100); a file under it imports
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sextant.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef SX_HAVE_HDF5
# include <hdf5.h>
#endif

#include "harness.h"
#include "http.h"
#include "npy.h"
#include "util/alloc.h"

#define DIM 8

static char g_dir[512];

/* ------------------------------------------------------------ data and files */

static int64_t key_of(size_t i)
{
    return (int64_t)(i * 7 + 3);
}

static float val_of(size_t i, size_t j)
{
    return (float)((int)((i * 31 + j * 17) % 97) - 48) / 8.0f;
}

static double price_of(size_t i)
{
    return (double)i * 0.25 - 3.0;
}

static bool ok_of(size_t i)
{
    return i % 3 == 0;
}

static void tag_of(size_t i, char *buf, size_t n)
{
    snprintf(buf, n, "t%zu\xc3\xa9", i % 1000); /* with a two-byte character */
}

static void write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n)
        FAILF("cannot write %s", path);
    if (fclose(f) != 0)
        FAILF("cannot close %s", path);
}

static sx_db *open_db(const char *dir)
{
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    return db;
}

/* id INT64 pk, vec FLOAT_VECTOR(DIM), price DOUBLE, ok BOOL, tag VARCHAR(32) */
static void create_full(sx_db *db, const char *name)
{
    sx_field_def f[5] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
        { "price", SX_FIELD_DOUBLE, false, false, 0, 0 },
        { "ok", SX_FIELD_BOOL, false, false, 0, 0 },
        { "tag", SX_FIELD_VARCHAR, false, false, 0, 32 },
    };
    sx_collection_def d = { name, f, 5, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
}

/* pk INT64 auto id, vec FLOAT_VECTOR(dim) */
static void create_auto(sx_db *db, const char *name, uint32_t dim)
{
    sx_field_def f[2] = {
        { "pk", SX_FIELD_INT64, true, true, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, dim, 0 },
    };
    sx_collection_def d = { name, f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
}

static void write_json(const char *path, size_t n, bool wrapped)
{
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f, wrapped ? "{\"meta\": {\"x\": [1, \"]\"]}, \"rows\": [\n" : "[\n");
    for (size_t i = 0; i < n; i++) {
        char tag[32];
        tag_of(i, tag, sizeof tag);
        fprintf(f, "%s{\"id\": %lld, \"vec\": [", i ? ",\n" : "", (long long)key_of(i));
        for (size_t j = 0; j < DIM; j++)
            fprintf(f, "%s%.9g", j ? ", " : "", (double)val_of(i, j));
        fprintf(f, "], \"price\": %.17g, \"ok\": %s, \"tag\": \"%s\"}", price_of(i),
                ok_of(i) ? "true" : "false", tag);
    }
    fprintf(f, wrapped ? "\n]}\n" : "\n]\n");
    ASSERT(fclose(f) == 0);
}

static void write_npy_folder(const char *dir, size_t n, int dim)
{
    char p[1024], shape[64];
    ASSERT(mkdir(dir, 0755) == 0 || errno == EEXIST);
    int64_t *ids = malloc(n * 8);
    float *v = malloc(n * (size_t)dim * 4);
    double *pr = malloc(n * 8);
    bool *ok = malloc(n);
    uint32_t *tags = calloc(n * 8, 4);
    ASSERT(ids && v && pr && ok && tags);
    for (size_t i = 0; i < n; i++) {
        ids[i] = key_of(i);
        for (int j = 0; j < dim; j++)
            v[i * (size_t)dim + (size_t)j] = val_of(i, (size_t)j);
        pr[i] = price_of(i);
        ok[i] = ok_of(i);
        /* UTF-32: "t<i%1000>" + U+00E9 */
        char t[16];
        snprintf(t, sizeof t, "t%zu", i % 1000);
        size_t k = 0;
        for (; t[k]; k++)
            tags[i * 8 + k] = (uint32_t)(unsigned char)t[k];
        tags[i * 8 + k] = 0xE9;
    }
    snprintf(shape, sizeof shape, "(%zu,)", n);
    snprintf(p, sizeof p, "%s/id.npy", dir);
    th_write_npy(p, "<i8", shape, ids, n * 8);
    snprintf(p, sizeof p, "%s/price.npy", dir);
    th_write_npy(p, "<f8", shape, pr, n * 8);
    snprintf(p, sizeof p, "%s/ok.npy", dir);
    th_write_npy(p, "|b1", shape, ok, n);
    snprintf(p, sizeof p, "%s/tag.npy", dir);
    th_write_npy(p, "<U8", shape, tags, n * 32);
    snprintf(shape, sizeof shape, "(%zu, %d)", n, dim);
    snprintf(p, sizeof p, "%s/vec.npy", dir);
    th_write_npy(p, "<f4", shape, v, n * (size_t)dim * 4);
    free(ids);
    free(v);
    free(pr);
    free(ok);
    free(tags);
}

static sx_status import1(sx_collection *c, const char *const *paths, size_t n)
{
    sx_import_group g = { paths, n };
    return sx_import_run(c, &g, 1, NULL, NULL);
}

static void npy_paths(const char *dir, char p[5][1024], const char *ptrs[5])
{
    const char *names[5] = { "id", "vec", "price", "ok", "tag" };
    for (int i = 0; i < 5; i++) {
        snprintf(p[i], 1024, "%s/%s.npy", dir, names[i]);
        ptrs[i] = p[i];
    }
}

static uint64_t count_of(sx_collection *c)
{
    uint64_t n = 0;
    ASSERT_OK(sx_count(c, NULL, &n));
    return n;
}

/* Every value of rows 0..n-1 (keys key_of(i)) by sx_get, and a search hit per probe. */
static void check_full(sx_collection *c, size_t n)
{
    ASSERT_EQ(count_of(c), n);
    for (size_t i = 0; i < n; i += n / 37 + 1) {
        int64_t k = key_of(i);
        sx_keys keys = { 1, &k, NULL };
        const char *out[] = { "*" };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_get(c, &keys, out, 1, &rs));
        ASSERT_EQ(rs->n_rows, 1);
        for (size_t col = 0; col < rs->n_cols; col++) {
            const sx_column *cl = &rs->cols[col];
            if (strcmp(cl->name, "price") == 0)
                ASSERT(((const double *)cl->data)[0] == price_of(i));
            else if (strcmp(cl->name, "ok") == 0)
                ASSERT(((const bool *)cl->data)[0] == ok_of(i));
            else if (strcmp(cl->name, "tag") == 0) {
                char t[32];
                tag_of(i, t, sizeof t);
                ASSERT(strcmp(((const char *const *)cl->data)[0], t) == 0);
            } else if (strcmp(cl->name, "vec") == 0) {
                for (size_t j = 0; j < DIM; j++)
                    ASSERT(((const float *)cl->data)[j] == val_of(i, j));
            }
        }
        sx_rowset_free(rs);
        float q[DIM];
        for (size_t j = 0; j < DIM; j++)
            q[j] = val_of(i, j);
        sx_search_req req = { q, 1, 1, 0, NULL, NULL, 0, NULL, 0, -1 };
        ASSERT_OK(sx_search(c, &req, &rs));
        ASSERT_EQ(rs->n_rows, 1);
        ASSERT(rs->distances[0] == 0.0f);
        sx_rowset_free(rs);
    }
}

static size_t seg_files(const char *coll_dir)
{
    DIR *d = opendir(coll_dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "seg-", 4) == 0 && strstr(e->d_name, ".sxs"))
            n++;
    closedir(d);
    return n;
}

/* ------------------------------------------------------------ tests */

static void json_rows(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/json", g_dir);
    snprintf(path, sizeof path, "%s.json", dir);
    write_json(path, 500, true);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    const char *p[] = { path };
    sx_import_result res;
    sx_import_group g = { p, 1 };
    ASSERT_OK(sx_import_run(c, &g, 1, NULL, &res));
    ASSERT_EQ(res.rows, 500);
    ASSERT_EQ(res.segments, 1);
    check_full(c, 500);
    sx_collection_release(c);
    sx_db_close(db);
}

static void json_toplevel(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/jsona", g_dir);
    snprintf(path, sizeof path, "%s.json", dir);
    write_json(path, 300, false);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    const char *p[] = { path };
    ASSERT_OK(import1(c, p, 1));
    check_full(c, 300);
    sx_collection_release(c);
    sx_db_close(db);
}

/* Nullable fields from JSON rows: a null or an omitted key is NULL (a non-nullable field still
 * must be there); the NULLs reach the segment file, `is null` and the rowset's valid marks, and
 * survive a reopen. */
static void json_nullable(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/jnull", g_dir);
    snprintf(path, sizeof path, "%s.json", dir);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f, "{\"rows\": [");
    for (int i = 0; i < 120; i++) {
        fprintf(f, "%s{\"id\": %d, \"vec\": [%d, 1]", i ? "," : "", i, i);
        if (i % 3 == 1)
            fprintf(f, ", \"n\": null");
        else if (i % 3 == 2)
            fprintf(f, ", \"n\": %d", i);
        if (i % 4 != 0)
            fprintf(f, ", \"s\": \"s%d\"", i);
        fprintf(f, "}");
    }
    fprintf(f, "]}");
    ASSERT(fclose(f) == 0);
    sx_db *db = open_db(dir);
    sx_field_def fd[] = { { "id", SX_FIELD_INT64, true, false, 0, 0, false },
                          { "vec", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0, false },
                          { "n", SX_FIELD_INT64, false, false, 0, 0, true },
                          { "s", SX_FIELD_VARCHAR, false, false, 0, 16, true } };
    sx_collection_def def = { "c", fd, 4, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    const char *p[] = { path };
    ASSERT_OK(import1(c, p, 1));
    for (int pass = 0; pass < 2; pass++) {
        uint64_t n = 0;
        ASSERT_OK(sx_count(c, "n is null", &n));
        ASSERT_EQ(n, 80); /* i % 3 != 2 */
        ASSERT_OK(sx_count(c, "s is null", &n));
        ASSERT_EQ(n, 30);
        ASSERT_OK(sx_count(c, "n > 100 or s like \"s1%\"", &n));
        uint64_t want = 0;
        for (int i = 0; i < 120; i++) {
            char sb[16];
            snprintf(sb, sizeof sb, "s%d", i);
            want += (i % 3 == 2 && i > 100) || (i % 4 != 0 && sb[1] == '1');
        }
        ASSERT_EQ(n, want);
        const char *out[] = { "n", "s" };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_query(c, "id < 8", out, 2, 0, 0, &rs));
        ASSERT_EQ(rs->n_rows, 8);
        ASSERT(rs->cols[1].valid && rs->cols[2].valid);
        for (size_t r = 0; r < rs->n_rows; r++) {
            int64_t id = ((const int64_t *)rs->cols[0].data)[r];
            ASSERT_EQ(rs->cols[1].valid[r], id % 3 == 2);
            if (id % 3 == 2)
                ASSERT_EQ(((const int64_t *)rs->cols[1].data)[r], id);
            ASSERT_EQ(rs->cols[2].valid[r], id % 4 != 0);
        }
        sx_rowset_free(rs);
        sx_collection_release(c);
        sx_db_close(db);
        db = open_db(dir);
        ASSERT_OK(sx_collection_open(db, "c", &c));
    }
    ASSERT_OK(sx_db_check(db));
    sx_collection_release(c);
    sx_db_close(db);
}

/* A VARCHAR primary key from JSON and from <U .npy: get by key, a duplicate refused, a delete. */
static void varchar_pk(void)
{
    char dir[600], jpath[700], ndir[700], p1[800], p2[800];
    snprintf(dir, sizeof dir, "%s/vpk", g_dir);
    snprintf(jpath, sizeof jpath, "%s.json", dir);
    snprintf(ndir, sizeof ndir, "%s.npy", dir);
    FILE *f = fopen(jpath, "w");
    ASSERT(f != NULL);
    fprintf(f, "[");
    for (int i = 0; i < 100; i++)
        fprintf(f, "%s{\"name\": \"k\\u00e9%d\", \"vec\": [%d, 1]}", i ? "," : "", i, i);
    fprintf(f, "]");
    ASSERT(fclose(f) == 0);
    ASSERT(mkdir(ndir, 0755) == 0);
    uint32_t names[50 * 6];
    float v[50 * 2];
    memset(names, 0, sizeof names);
    for (int i = 0; i < 50; i++) {
        char t[8];
        snprintf(t, sizeof t, "n%d", i);
        for (size_t k = 0; t[k]; k++)
            names[i * 6 + (int)k] = (uint32_t)(unsigned char)t[k];
        v[i * 2] = (float)i;
        v[i * 2 + 1] = 2;
    }
    snprintf(p1, sizeof p1, "%s/name.npy", ndir);
    th_write_npy(p1, "<U6", "(50,)", names, sizeof names);
    snprintf(p2, sizeof p2, "%s/vec.npy", ndir);
    th_write_npy(p2, "<f4", "(50, 2)", v, sizeof v);
    sx_db *db = open_db(dir);
    sx_field_def fd[2] = {
        { "name", SX_FIELD_VARCHAR, true, false, 0, 16 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0 },
    };
    sx_collection_def d = { "s", fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "s", &c));
    const char *jp[] = { jpath };
    ASSERT_OK(import1(c, jp, 1));
    const char *np[] = { p1, p2 };
    ASSERT_OK(import1(c, np, 2));
    ASSERT_EQ(count_of(c), 150);
    const char *keys[3] = { "k\xc3\xa9"
                            "7",
                            "n49", "nope" };
    sx_keys k = { 3, NULL, keys };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_get(c, &k, NULL, 0, &rs));
    ASSERT_EQ(rs->n_rows, 2);
    sx_rowset_free(rs);
    ASSERT_STATUS(import1(c, np, 2), SX_EEXIST); /* the same keys again */
    ASSERT(strstr(sx_errmsg(), "\"n0\" already exists") != NULL);
    uint64_t nd = 0;
    ASSERT_OK(sx_delete(c, &k, &nd));
    ASSERT_EQ(nd, 2);
    ASSERT_EQ(count_of(c), 148);
    sx_collection_release(c);
    sx_db_close(db);
}

static void npy_folder(void)
{
    char dir[600], data[700], p[5][1024];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/npy", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    write_npy_folder(data, 2000, DIM);
    npy_paths(data, p, ptrs);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(import1(c, ptrs, 5));
    check_full(c, 2000);
    sx_collection_release(c);
    sx_db_close(db);
}

static void check_auto(sx_collection *c, const float *v, size_t n, uint32_t dim)
{
    ASSERT_EQ(count_of(c), n);
    int64_t base = -1;
    for (size_t i = 0; i < n; i += n / 23 + 1) {
        sx_search_req req = { v + i * dim, 1, 1, 0, NULL, NULL, 0, NULL, 0, -1 };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(c, &req, &rs));
        ASSERT_EQ(rs->n_rows, 1);
        ASSERT(rs->distances[0] == 0.0f);
        const sx_column *pk = NULL;
        for (size_t k = 0; k < rs->n_cols; k++)
            if (strcmp(rs->cols[k].name, "pk") == 0)
                pk = &rs->cols[k];
        ASSERT(pk != NULL);
        if (base < 0)
            base = ((const int64_t *)pk->data)[0];
        ASSERT_EQ(((const int64_t *)pk->data)[0], base + (int64_t)i); /* consecutive auto ids */
        sx_rowset_free(rs);
    }
}

static void fvecs_bvecs(void)
{
    const size_t n = 3000;
    const uint32_t dim = 24;
    char dir[600], fv[700], bv[700];
    snprintf(dir, sizeof dir, "%s/vecs", g_dir);
    snprintf(fv, sizeof fv, "%s.fvecs", dir);
    snprintf(bv, sizeof bv, "%s.bvecs", dir);
    float *v = malloc(n * dim * 4), *vb = malloc(n * dim * 4);
    unsigned char *fbuf = malloc(n * (4 + dim * 4)), *bbuf = malloc(n * (4 + dim));
    ASSERT(v && vb && fbuf && bbuf);
    uint64_t s = 99;
    for (size_t i = 0; i < n; i++) {
        uint32_t d = dim;
        memcpy(fbuf + i * (4 + dim * 4), &d, 4);
        memcpy(bbuf + i * (4 + dim), &d, 4);
        for (size_t j = 0; j < dim; j++) {
            v[i * dim + j] = test_randf(&s) * 10.0f - 5.0f;
            unsigned char b = (unsigned char)(test_rand(&s) & 0xff);
            bbuf[i * (4 + dim) + 4 + j] = b;
            vb[i * dim + j] = (float)b;
        }
        memcpy(fbuf + i * (4 + dim * 4) + 4, v + i * dim, dim * 4);
    }
    write_file(fv, fbuf, n * (4 + dim * 4));
    write_file(bv, bbuf, n * (4 + dim));
    sx_db *db = open_db(dir);
    create_auto(db, "f", dim);
    create_auto(db, "b", dim);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "f", &c));
    const char *p1[] = { fv };
    ASSERT_OK(import1(c, p1, 1));
    check_auto(c, v, n, dim);
    sx_collection_release(c);
    ASSERT_OK(sx_collection_open(db, "b", &c));
    const char *p2[] = { bv };
    ASSERT_OK(import1(c, p2, 1));
    check_auto(c, vb, n, dim);
    sx_collection_release(c);
    sx_db_close(db);
    free(v);
    free(vb);
    free(fbuf);
    free(bbuf);
}

static void hdf5(void)
{
#ifndef SX_HAVE_HDF5
    SKIPF("built without libhdf5-dev");
#else
    const size_t n = 1500;
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/h5", g_dir);
    snprintf(path, sizeof path, "%s.hdf5", dir);
    float *v = malloc(n * DIM * 4);
    double *pr = malloc(n * 8);
    ASSERT(v && pr);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < DIM; j++)
            v[i * DIM + j] = val_of(i, j) + (float)i; /* distinct rows */
        pr[i] = price_of(i);
    }
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(f >= 0);
    hsize_t d2[2] = { n, DIM }, d1[1] = { n };
    hid_t sp = H5Screate_simple(2, d2, NULL);
    hid_t ds = H5Dcreate2(f, "train", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    sp = H5Screate_simple(1, d1, NULL);
    ds = H5Dcreate2(f, "price", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, pr) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
    sx_db *db = open_db(dir);
    sx_field_def fd[3] = {
        { "pk", SX_FIELD_INT64, true, true, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
        { "price", SX_FIELD_DOUBLE, false, false, 0, 0 },
    };
    sx_collection_def d = { "h", fd, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "h", &c));
    const char *p[] = { path };
    sx_import_group g = { p, 1 };
    sx_import_opts o = { .progress = NULL, .progress_ctx = NULL, .batch_rows = 400 };
    sx_import_result res;
    ASSERT_OK(sx_import_run(c, &g, 1, &o, &res));
    ASSERT_EQ(res.segments, 4);
    check_auto(c, v, n, DIM);
    uint64_t k = 0;
    ASSERT_OK(sx_count(c, "price > 100.0", &k)); /* price_of(i) > 100 <=> i > 412 */
    ASSERT_EQ(k, n - 413);
    sx_collection_release(c);
    sx_db_close(db);
    free(v);
    free(pr);
#endif
}

typedef struct prog_log {
    int calls;
    uint64_t last_rows;
    bool monotone;
    int cancel_after; /* 0: never */
} prog_log;

static bool on_progress(void *ctx, const sx_import_progress *p)
{
    prog_log *l = ctx;
    l->calls++;
    if (p->rows_done < l->last_rows || p->bytes_done > p->bytes_total)
        l->monotone = false;
    l->last_rows = p->rows_done;
    return !(l->cancel_after && l->calls >= l->cancel_after);
}

static void batches(void)
{
    char dir[600], data[700], p[5][1024];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/batches", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    write_npy_folder(data, 1000, DIM);
    npy_paths(data, p, ptrs);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    prog_log log = { 0, 0, true, 0 };
    sx_import_group g = { ptrs, 5 };
    sx_import_opts o = { .progress = on_progress, .progress_ctx = &log, .batch_rows = 100 };
    sx_import_result res;
    ASSERT_OK(sx_import_run(c, &g, 1, &o, &res));
    ASSERT_EQ(res.rows, 1000);
    ASSERT_EQ(res.segments, 10);
    ASSERT(log.calls >= 10);
    ASSERT(log.monotone);
    ASSERT_EQ(log.last_rows, 1000);
    sx_collection_info info;
    ASSERT_OK(sx_collection_describe(c, &info));
    ASSERT_EQ(info.n_segments, 10);
    ASSERT_EQ(info.growing_rows, 0);
    check_full(c, 1000);
    /* the pk map knows the rows: delete two, upsert one, insert a duplicate */
    int64_t del[2] = { key_of(5), key_of(950) };
    sx_keys dk = { 2, del, NULL };
    uint64_t nd = 0;
    ASSERT_OK(sx_delete(c, &dk, &nd));
    ASSERT_EQ(nd, 2);
    ASSERT_EQ(count_of(c), 998);
    int64_t uk = key_of(10);
    float uv[DIM] = { 0 };
    double up = 1e6;
    bool uo = true;
    const char *ut = "upserted";
    sx_column cols[5] = { { "id", SX_FIELD_INT64, &uk },
                          { "vec", SX_FIELD_FLOAT_VECTOR, uv },
                          { "price", SX_FIELD_DOUBLE, &up },
                          { "ok", SX_FIELD_BOOL, &uo },
                          { "tag", SX_FIELD_VARCHAR, &ut } };
    sx_batch b = { 1, cols, 5 };
    ASSERT_OK(sx_upsert(c, &b));
    ASSERT_EQ(count_of(c), 998);
    ASSERT_STATUS(sx_insert(c, &b, NULL), SX_EEXIST);
    uint64_t k = 0;
    ASSERT_OK(sx_count(c, "price > 999999.0", &k));
    ASSERT_EQ(k, 1);
    sx_collection_release(c);
    sx_db_close(db);
    /* reopen: the imported rows and the changes are there */
    db = open_db(dir);
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_EQ(count_of(c), 998);
    ASSERT_OK(sx_count(c, "price > 999999.0", &k));
    ASSERT_EQ(k, 1);
    sx_collection_release(c);
    sx_db_close(db);
}

typedef struct bad_case {
    const char *what;
    sx_status want;
    const char *msg; /* substring of the message */
} bad_case;

static void expect_fail(sx_collection *c,
                        const char *coll_dir,
                        const sx_import_group *g,
                        size_t n_groups,
                        const sx_import_opts *o,
                        const bad_case *bc,
                        uint64_t want_count)
{
    size_t files_before = seg_files(coll_dir);
    sx_status st = sx_import_run(c, g, n_groups, o, NULL);
    if (st != bc->want)
        FAILF("%s: got %s (%s), want %s", bc->what, sx_status_str(st), sx_errmsg(),
              sx_status_str(bc->want));
    if (!strstr(sx_errmsg(), bc->msg))
        FAILF("%s: message \"%s\" lacks \"%s\"", bc->what, sx_errmsg(), bc->msg);
    fprintf(stderr, "     %-22s %s: %s\n", bc->what, sx_status_str(st), sx_errmsg());
    ASSERT_EQ(count_of(c), want_count);
    ASSERT_EQ(seg_files(coll_dir), files_before);
}

static void malformed(void)
{
    char dir[600], data[700], cdir[800], p[5][1024], path[1024];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/bad", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    snprintf(cdir, sizeof cdir, "%s/collections/c", dir);
    write_npy_folder(data, 400, DIM);
    npy_paths(data, p, ptrs);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    /* 10 rows inserted and flushed first: keys 1000000.. */
    int64_t ids[10];
    float vv[10 * DIM];
    double pr[10];
    bool okv[10];
    const char *tg[10];
    for (int i = 0; i < 10; i++) {
        ids[i] = 1000000 + i;
        for (int j = 0; j < DIM; j++)
            vv[i * DIM + j] = (float)i;
        pr[i] = 1;
        okv[i] = false;
        tg[i] = "x";
    }
    sx_column cols[5] = { { "id", SX_FIELD_INT64, ids },
                          { "vec", SX_FIELD_FLOAT_VECTOR, vv },
                          { "price", SX_FIELD_DOUBLE, pr },
                          { "ok", SX_FIELD_BOOL, okv },
                          { "tag", SX_FIELD_VARCHAR, tg } };
    sx_batch b = { 10, cols, 5 };
    ASSERT_OK(sx_insert(c, &b, NULL));
    ASSERT_OK(sx_flush(c));
    sx_import_group g = { ptrs, 5 };
    sx_import_opts small = { .progress = NULL, .progress_ctx = NULL, .batch_rows = 64 };

    /* truncated .npy: the last 100 bytes of the vectors cut off */
    char tp[5][1024];
    const char *tptrs[5];
    char tdir[800];
    snprintf(tdir, sizeof tdir, "%s.trunc", dir);
    write_npy_folder(tdir, 400, DIM);
    npy_paths(tdir, tp, tptrs);
    {
        struct stat stt;
        ASSERT(stat(tp[1], &stt) == 0);
        ASSERT(truncate(tp[1], stt.st_size - 100) == 0);
    }
    sx_import_group tg1 = { tptrs, 5 };
    bad_case c1 = { "truncated npy", SX_EINVAL, "truncated NumPy file" };
    expect_fail(c, cdir, &tg1, 1, &small, &c1, 10);
    /* a header cut inside */
    ASSERT(truncate(tp[1], 30) == 0);
    bad_case c1b = { "truncated npy header", SX_EINVAL, "truncated" };
    expect_fail(c, cdir, &tg1, 1, &small, &c1b, 10);

    /* wrong dtype: vectors as <f8 */
    snprintf(path, sizeof path, "%s.dtype/vec.npy", dir);
    {
        char d2[800];
        snprintf(d2, sizeof d2, "%s.dtype", dir);
        write_npy_folder(d2, 400, DIM);
        double *dv = calloc(400 * DIM, 8);
        th_write_npy(path, "<f8", "(400, 8)", dv, 400 * DIM * 8);
        free(dv);
        char dp[5][1024];
        const char *dptrs[5];
        npy_paths(d2, dp, dptrs);
        sx_import_group dg = { dptrs, 5 };
        bad_case c2 = { "wrong dtype", SX_EINVAL, "needs dtype <f4; the file has <f8" };
        expect_fail(c, cdir, &dg, 1, &small, &c2, 10);
        /* ids as <f4 */
        float *fi = calloc(400, 4);
        snprintf(path, sizeof path, "%s/id.npy", d2);
        th_write_npy(path, "<f4", "(400,)", fi, 400 * 4);
        free(fi);
        bad_case c2b = { "wrong dtype (pk)", SX_EINVAL, "\"id\" (INT64) needs dtype" };
        expect_fail(c, cdir, &dg, 1, &small, &c2b, 10);
    }
    /* wrong dim: (400, 7) */
    {
        char d3[800];
        snprintf(d3, sizeof d3, "%s.dim", dir);
        write_npy_folder(d3, 400, 7);
        char dp[5][1024];
        const char *dptrs[5];
        npy_paths(d3, dp, dptrs);
        sx_import_group dg = { dptrs, 5 };
        bad_case c3 = { "wrong dim (npy)", SX_EINVAL, "needs shape (rows, 8)" };
        expect_fail(c, cdir, &dg, 1, &small, &c3, 10);
        /* JSON with a 7-value vector in row 3 */
        snprintf(path, sizeof path, "%s.dim.json", dir);
        FILE *f = fopen(path, "w");
        ASSERT(f != NULL);
        fprintf(f, "{\"rows\": [");
        for (int i = 0; i < 5; i++)
            fprintf(f,
                    "%s{\"id\": %d, \"vec\": [1,2,3,4,5,6,7%s], \"price\": 1, \"ok\": true, "
                    "\"tag\": \"a\"}",
                    i ? "," : "", i, i == 3 ? "" : ",8");
        fprintf(f, "]}");
        ASSERT(fclose(f) == 0);
        const char *jp[] = { path };
        sx_import_group jg = { jp, 1 };
        bad_case c3b = { "wrong dim (json)", SX_EINVAL, "row 3: field \"vec\" has 7 values" };
        expect_fail(c, cdir, &jg, 1, &small, &c3b, 10);
    }
    /* bad JSON: row 250 of 400 is broken (after 3 batches of 64 were written) */
    {
        snprintf(path, sizeof path, "%s.badjson.json", dir);
        write_json(path, 400, true);
        FILE *f = fopen(path, "r+");
        ASSERT(f != NULL);
        char *txt = malloc(1 << 20);
        size_t len = fread(txt, 1, 1 << 20, f);
        char *row = txt;
        for (int i = 0; i < 251; i++)
            row = strstr(row + 1, "{\"id\"");
        ASSERT(row != NULL);
        char *colon = strchr(row, ':');
        *colon = ';';
        ASSERT(fseek(f, 0, SEEK_SET) == 0);
        ASSERT(fwrite(txt, 1, len, f) == len);
        ASSERT(fclose(f) == 0);
        free(txt);
        const char *jp[] = { path };
        sx_import_group jg = { jp, 1 };
        bad_case c4 = { "bad JSON", SX_EINVAL, "row 250: bad JSON" };
        expect_fail(c, cdir, &jg, 1, &small, &c4, 10);
        /* a truncated JSON file */
        struct stat stt;
        ASSERT(stat(path, &stt) == 0);
        ASSERT(truncate(path, stt.st_size / 3) == 0);
        bad_case c4b = { "truncated JSON", SX_EINVAL, "truncated" };
        expect_fail(c, cdir, &jg, 1, &small, &c4b, 10);
        write_file(path, "not json", 8);
        bad_case c4c = { "not JSON", SX_EINVAL, "bad JSON at byte" };
        expect_fail(c, cdir, &jg, 1, &small, &c4c, 10);
    }
    /* a field missing: the group without price.npy; a JSON row without price */
    {
        const char *four[4] = { ptrs[0], ptrs[1], ptrs[3], ptrs[4] };
        sx_import_group mg = { four, 4 };
        bad_case c5 = { "field missing (npy)", SX_EINVAL, "field \"price\" (DOUBLE) is missing" };
        expect_fail(c, cdir, &mg, 1, &small, &c5, 10);
        snprintf(path, sizeof path, "%s.missing.json", dir);
        write_file(path, "[{\"id\": 1, \"vec\": [1,2,3,4,5,6,7,8], \"ok\": true, \"tag\": \"a\"}]",
                   strlen("[{\"id\": 1, \"vec\": [1,2,3,4,5,6,7,8], \"ok\": true, \"tag\": "
                          "\"a\"}]"));
        const char *jp[] = { path };
        sx_import_group jg = { jp, 1 };
        bad_case c5b = { "field missing (json)", SX_EINVAL, "row 0: field \"price\" is missing" };
        expect_fail(c, cdir, &jg, 1, &small, &c5b, 10);
    }
    /* Parquet */
    {
        snprintf(path, sizeof path, "%s.parquet", dir);
        write_file(path, "PAR1", 4);
        const char *pp[] = { path };
        sx_import_group pg = { pp, 1 };
        bad_case c6 = { "parquet", SX_EINVAL, "needs an Arrow library, and Debian has none" };
        expect_fail(c, cdir, &pg, 1, &small, &c6, 10);
    }
    /* a missing file */
    {
        snprintf(path, sizeof path, "%s/nope/vec.npy", g_dir);
        const char *mp[5] = { ptrs[0], path, ptrs[2], ptrs[3], ptrs[4] };
        sx_import_group mg = { mp, 5 };
        bad_case c7 = { "missing file", SX_ENOTFOUND, "does not exist" };
        expect_fail(c, cdir, &mg, 1, &small, &c7, 10);
    }
    /* duplicate keys: a stored key in the last batch; the same group twice in one job */
    {
        char d4[800];
        snprintf(d4, sizeof d4, "%s.dup", dir);
        write_npy_folder(d4, 400, DIM);
        int64_t *k = malloc(400 * 8);
        for (int i = 0; i < 400; i++)
            k[i] = i == 390 ? 1000003 : key_of((size_t)i);
        snprintf(path, sizeof path, "%s/id.npy", d4);
        th_write_npy(path, "<i8", "(400,)", k, 400 * 8);
        free(k);
        char dp[5][1024];
        const char *dptrs[5];
        npy_paths(d4, dp, dptrs);
        sx_import_group dg = { dptrs, 5 };
        bad_case c8 = { "duplicate (stored)", SX_EEXIST, "primary key 1000003 already exists" };
        expect_fail(c, cdir, &dg, 1, &small, &c8, 10);
        sx_import_group twice[2] = { g, g };
        bad_case c8b = { "duplicate (in job)", SX_EEXIST, "already exists" };
        expect_fail(c, cdir, twice, 2, &small, &c8b, 10);
    }
    /* a good group, then a bad one: nothing of the first is visible */
    {
        const char *jp[] = { path };
        snprintf(path, sizeof path, "%s.parquet", dir);
        sx_import_group two[2] = { g, { jp, 1 } };
        bad_case c9 = { "bad second group", SX_EINVAL, "Parquet" };
        expect_fail(c, cdir, two, 2, &small, &c9, 10);
        /* headers are checked first: make the second group fail while reading instead */
        char d5[800];
        snprintf(d5, sizeof d5, "%s.late", dir);
        write_npy_folder(d5, 400, DIM);
        float *nv = calloc(400 * DIM, 4);
        nv[399 * DIM] = NAN;
        snprintf(path, sizeof path, "%s/vec.npy", d5);
        th_write_npy(path, "<f4", "(400, 8)", nv, 400 * DIM * 4);
        free(nv);
        char dp[5][1024];
        const char *dptrs[5];
        npy_paths(d5, dp, dptrs);
        sx_import_group two2[2] = { g, { dptrs, 5 } };
        bad_case c9b = { "bad row, 2nd group", SX_EINVAL, "row 799 has a NaN" };
        expect_fail(c, cdir, two2, 2, &small, &c9b, 10);
    }
    /* cancel from the progress callback after 2 batches */
    {
        prog_log log = { 0, 0, true, 2 };
        sx_import_opts co = { .progress = on_progress, .progress_ctx = &log, .batch_rows = 64 };
        bad_case c10 = { "cancelled", SX_ECANCELED, "cancelled" };
        expect_fail(c, cdir, &g, 1, &co, &c10, 10);
    }
    /* after all that, the good group imports */
    ASSERT_OK(sx_import_run(c, &g, 1, &small, NULL));
    ASSERT_EQ(count_of(c), 410);
    sx_collection_release(c);
    sx_db_close(db);
    db = open_db(dir);
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_EQ(count_of(c), 410);
    sx_collection_info info;
    ASSERT_OK(sx_collection_describe(c, &info));
    ASSERT_EQ(seg_files(cdir), info.n_segments); /* nothing left over */
    sx_collection_release(c);
    sx_db_close(db);
}

static void dead_s3(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/dead", g_dir);
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    o.s3_endpoint = "http://127.0.0.1:9"; /* discard port: nothing listens */
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 0);
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 0);
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    create_auto(db, "c", DIM);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    const char *p[] = { "s3://bucket/base.fvecs" };
    sx_import_group g = { p, 1 };
    sx_status st = sx_import_run(c, &g, 1, NULL, NULL);
    fprintf(stderr, "     dead endpoint: %s: %s\n", sx_status_str(st), sx_errmsg());
    ASSERT(st == SX_EREMOTE || st == SX_ETIMEDOUT);
    ASSERT(strstr(sx_errmsg(), "s3://bucket/base.fvecs") != NULL);
    ASSERT_EQ(count_of(c), 0);
    sx_collection_release(c);
    sx_db_close(db);
}

/* ---- crash */

typedef struct crash_ctx {
    int fd;
    int batches;
} crash_ctx;

static bool crash_progress(void *ctx, const sx_import_progress *p)
{
    crash_ctx *x = ctx;
    (void)p;
    if (++x->batches == 3) {
        char ch = 'x';
        if (write(x->fd, &ch, 1) != 1)
            _exit(3);
        for (;;)
            pause(); /* the parent kills us here, 3 segment files written */
    }
    return true;
}

static void crash(void)
{
    const size_t n = 60000;
    const uint32_t dim = 32;
    char dir[600], fv[700], cdir[800];
    snprintf(dir, sizeof dir, "%s/crash", g_dir);
    snprintf(fv, sizeof fv, "%s.fvecs", dir);
    snprintf(cdir, sizeof cdir, "%s/collections/c", dir);
    size_t rec = 4 + dim * 4;
    unsigned char *buf = malloc(n * rec);
    ASSERT(buf != NULL);
    uint64_t s = 5;
    for (size_t i = 0; i < n; i++) {
        uint32_t d = dim;
        memcpy(buf + i * rec, &d, 4);
        for (size_t j = 0; j < dim; j++) {
            float x = test_randf(&s);
            memcpy(buf + i * rec + 4 + j * 4, &x, 4);
        }
    }
    write_file(fv, buf, n * rec);
    free(buf);
    sx_db *db = open_db(dir);
    create_auto(db, "c", dim);
    sx_db_close(db);
    int pp[2];
    ASSERT(pipe(pp) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(pp[0]);
        sx_db *cdb = NULL;
        sx_db_options o = { 0 };
        if (sx_db_open(dir, &o, &cdb) != SX_OK)
            _exit(2);
        sx_collection *c = NULL;
        if (sx_collection_open(cdb, "c", &c) != SX_OK)
            _exit(2);
        crash_ctx x = { pp[1], 0 };
        const char *p[] = { fv };
        sx_import_group g = { p, 1 };
        sx_import_opts io = { .progress = crash_progress, .progress_ctx = &x, .batch_rows = 5000 };
        sx_status st = sx_import_run(c, &g, 1, &io, NULL);
        _exit(st == SX_OK ? 4 : 5);
    }
    close(pp[1]);
    char ch = 0;
    ASSERT(read(pp[0], &ch, 1) == 1);
    size_t files = seg_files(cdir);
    kill(pid, SIGKILL);
    int wst = 0;
    waitpid(pid, &wst, 0);
    close(pp[0]);
    ASSERT(WIFSIGNALED(wst));
    fprintf(stderr, "     killed with %zu segment files written\n", files);
    ASSERT(files >= 3);
    db = open_db(dir);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_EQ(count_of(c), 0);
    ASSERT_EQ(seg_files(cdir), 0); /* removed at open */
    /* and the import runs to the end after the restart */
    const char *p[] = { fv };
    sx_import_group g = { p, 1 };
    sx_import_opts io = { .progress = NULL, .progress_ctx = NULL, .batch_rows = 5000 };
    ASSERT_OK(sx_import_run(c, &g, 1, &io, NULL));
    ASSERT_EQ(count_of(c), n);
    sx_collection_release(c);
    sx_db_close(db);
}

/* An HNSW index created before the import: the imported segments get it built; and the budget:
 * the batch is charged (SX__MEM_IMPORT) while the import runs and given back after it; under a
 * budget too small for the smallest batch the import is refused naming it. */
typedef struct mem_ctx {
    sx_db *db;
    uint64_t seen;
} mem_ctx;

static bool mem_progress(void *ctx, const sx_import_progress *p)
{
    mem_ctx *m = ctx;
    (void)p;
    sx_memory_stats ms;
    sx_db_memory_stats(m->db, &ms);
    if (ms.import_bytes > m->seen)
        m->seen = ms.import_bytes;
    return true;
}

static void index_budget(void)
{
    char dir[600], data[700], p[5][1024];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/idx", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    write_npy_folder(data, 3000, DIM);
    npy_paths(data, p, ptrs);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    sx_param hp[2] = { { "M", "8" }, { "efConstruction", "64" } };
    ASSERT_OK(sx_index_create(c, "HNSW", hp, 2));
    mem_ctx m = { db, 0 };
    sx_import_group g = { ptrs, 5 };
    sx_import_opts o = { .progress = mem_progress, .progress_ctx = &m, .batch_rows = 1000 };
    ASSERT_OK(sx_import_run(c, &g, 1, &o, NULL));
    ASSERT(m.seen >= 1000 * (DIM * 4 + 8 + 8 + 1 + 8));
    sx_memory_stats ms;
    sx_db_memory_stats(db, &ms);
    ASSERT_EQ(ms.import_bytes, 0);
    ASSERT_OK(sx_index_wait(c, 60000));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED);
    ASSERT_EQ(ii.indexed_rows, 3000);
    check_full(c, 3000);
    sx_collection_release(c);
    sx_db_close(db);
    fprintf(stderr, "     import buffers charged: %llu bytes\n", (unsigned long long)m.seen);

    /* a 2 MiB budget and 16 KiB rows: not even 256 rows fit */
    snprintf(dir, sizeof dir, "%s/budget", g_dir);
    sx_db_options bo = { 0 };
    bo.sync_mode = SX_SYNC_NONE;
    bo.memory_limit_bytes = 2u << 20;
    ASSERT_OK(sx_db_open(dir, &bo, &db));
    create_auto(db, "w", 4096);
    ASSERT_OK(sx_collection_open(db, "w", &c));
    char fv[700];
    snprintf(fv, sizeof fv, "%s.fvecs", dir);
    size_t rec = 4 + 4096 * 4;
    unsigned char *buf = calloc(300, rec);
    ASSERT(buf != NULL);
    for (size_t i = 0; i < 300; i++) {
        uint32_t d = 4096;
        memcpy(buf + i * rec, &d, 4);
    }
    write_file(fv, buf, 300 * rec);
    free(buf);
    const char *fp[] = { fv };
    sx_import_group fg = { fp, 1 };
    ASSERT_STATUS(sx_import_run(c, &fg, 1, NULL, NULL), SX_ENOMEM);
    fprintf(stderr, "     2 MiB budget: %s\n", sx_errmsg());
    ASSERT(strstr(sx_errmsg(), "bulk import") != NULL);
    ASSERT_EQ(count_of(c), 0);
    sx_db_memory_stats(db, &ms);
    ASSERT_EQ(ms.import_bytes, 0);
    sx_collection_release(c);
    sx_db_close(db);
}

/* Every allocation of an import failed in turn (the allocator's countdown): each failure is
 * SX_ENOMEM with nothing visible and no file left, until the import goes through. */
static void oom(void)
{
    char dir[600], data[700], jpath[700], p[5][1024], cdir[800];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/oom", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    snprintf(jpath, sizeof jpath, "%s.json", dir);
    write_npy_folder(data, 50, DIM);
    write_json(jpath, 30, true);
    npy_paths(data, p, ptrs);
    sx_db *db = open_db(dir);
    const char *names[2] = { "n", "j" };
    const char *jp[] = { jpath };
    sx_import_group groups[2] = { { ptrs, 5 }, { jp, 1 } };
    long failures = 0, late = 0;
    for (int k = 0; k < 2; k++) {
        create_full(db, names[k]);
        sx_collection *c = NULL;
        ASSERT_OK(sx_collection_open(db, names[k], &c));
        snprintf(cdir, sizeof cdir, "%s/collections/%s", dir, names[k]);
        sx_import_opts o = { .progress = NULL, .progress_ctx = NULL, .batch_rows = 16 };
        sx_status st = SX_ENOMEM;
        long nth;
        for (nth = 1; nth < 5000 && st != SX_OK; nth++) {
            sx__alloc_fail_after(nth);
            st = sx_import_run(c, &groups[k], 1, &o, NULL);
            sx__alloc_fail_after(0);
            if (st == SX_OK)
                break;
            if (st != SX_ENOMEM)
                FAILF("allocation %ld: %s (%s)", nth, sx_status_str(st), sx_errmsg());
            failures++;
            if (strstr(sx_errmsg(), "the rows are visible")) {
                /* the flush failed after the commit point: the rows are there, and durable
                 * after the next flush (as sealed growing rows are) */
                late++;
                ASSERT_EQ(count_of(c), k == 0 ? 50 : 30);
                ASSERT_OK(sx_flush(c));
                st = SX_OK;
                break;
            }
            ASSERT_EQ(count_of(c), 0);
            ASSERT_EQ(seg_files(cdir), 0);
        }
        ASSERT_OK(st);
        ASSERT_EQ(count_of(c), k == 0 ? 50 : 30);
        sx_collection_release(c);
    }
    fprintf(stderr,
            "     allocation failures injected and handled: %ld (%ld after the commit point)\n",
            failures, late);
    ASSERT(failures > 20);
    sx_db_close(db);
    /* both imports are there after a reopen */
    db = open_db(dir);
    for (int k = 0; k < 2; k++) {
        sx_collection *c = NULL;
        ASSERT_OK(sx_collection_open(db, names[k], &c));
        ASSERT_EQ(count_of(c), k == 0 ? 50 : 30);
        sx_collection_release(c);
    }
    sx_db_close(db);
}

/* WAL order: key K inserted and deleted (both only in the WAL), then imported; the process exits
 * without closing. After reopen K is the imported row: the delete logged before the import is
 * not replayed onto it (the commit happens at a checkpoint). */
static void wal_order(void)
{
    char dir[600], data[700], p[5][1024];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/walorder", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    write_npy_folder(data, 200, DIM);
    npy_paths(data, p, ptrs);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_db_close(db);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        sx_db_options o = { 0 }; /* SX_SYNC_FULL: the WAL records are durable */
        sx_db *cdb = NULL;
        sx_collection *c = NULL;
        if (sx_db_open(dir, &o, &cdb) != SX_OK || sx_collection_open(cdb, "c", &c) != SX_OK)
            _exit(2);
        int64_t k = key_of(0);
        float v[DIM] = { 0 };
        double pr = -1;
        bool ok = false;
        const char *t = "old";
        sx_column cols[5] = { { "id", SX_FIELD_INT64, &k },
                              { "vec", SX_FIELD_FLOAT_VECTOR, v },
                              { "price", SX_FIELD_DOUBLE, &pr },
                              { "ok", SX_FIELD_BOOL, &ok },
                              { "tag", SX_FIELD_VARCHAR, &t } };
        sx_batch b = { 1, cols, 5 };
        sx_keys dk = { 1, &k, NULL };
        if (sx_insert(c, &b, NULL) != SX_OK || sx_delete(c, &dk, NULL) != SX_OK)
            _exit(3);
        /* a row that stays in the WAL after the import */
        int64_t k2 = 999999;
        cols[0].data = &k2;
        if (sx_insert(c, &b, NULL) != SX_OK)
            _exit(3);
        cols[0].data = &k;
        sx_import_group g = { ptrs, 5 };
        if (sx_import_run(c, &g, 1, NULL, NULL) != SX_OK)
            _exit(4);
        int64_t k3 = 888888;
        cols[0].data = &k3;
        if (sx_insert(c, &b, NULL) != SX_OK || sx_delete(c, &dk, NULL) != SX_OK)
            _exit(5);
        _exit(0); /* no close, no flush */
    }
    int wst = 0;
    waitpid(pid, &wst, 0);
    ASSERT(WIFEXITED(wst));
    ASSERT_EQ(WEXITSTATUS(wst), 0);
    db = open_db(dir);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    /* 200 imported - K (deleted after the import) + 999999 + 888888 */
    ASSERT_EQ(count_of(c), 201);
    int64_t keys[3] = { key_of(0), key_of(1), 999999 };
    sx_keys gk = { 3, keys, NULL };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_get(c, &gk, NULL, 0, &rs));
    ASSERT_EQ(rs->n_rows, 2);
    sx_rowset_free(rs);
    sx_collection_release(c);
    sx_db_close(db);
}

/* ---- jobs */

static void jobs(void)
{
    char dir[600], data[700], p[5][1024], bad[800];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/jobs", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    write_npy_folder(data, 700, DIM);
    npy_paths(data, p, ptrs);
    snprintf(bad, sizeof bad, "%s/x.parquet", dir);
    sx_db *db = open_db(dir);
    create_full(db, "c");
    sx_import_group g = { ptrs, 5 };
    char id1[SX_IMPORT_JOB_ID], id2[SX_IMPORT_JOB_ID];
    ASSERT_STATUS(sx_import_submit(db, "nope", &g, 1, NULL, id1), SX_ENOTFOUND);
    ASSERT_OK(sx_import_submit(db, "c", &g, 1, NULL, id1));
    const char *bp[] = { bad };
    sx_import_group bg = { bp, 1 };
    ASSERT_OK(sx_import_submit(db, "c", &bg, 1, NULL, id2));
    ASSERT(strcmp(id1, id2) != 0);
    ASSERT_OK(sx_import_job_wait(db, id1, 30000));
    ASSERT_OK(sx_import_job_wait(db, id2, 30000));
    sx_import_job_info info;
    ASSERT_OK(sx_import_job_get(db, id1, &info));
    ASSERT_EQ(info.state, SX_IMPORT_COMPLETED);
    ASSERT_EQ(info.percent, 100);
    ASSERT_EQ(info.rows_imported, 700);
    ASSERT_EQ(info.n_groups, 1);
    ASSERT(strstr(info.groups[0].files, "vec.npy") != NULL);
    ASSERT(info.complete_time_ms >= info.create_time_ms);
    sx_import_job_info_fini(&info);
    ASSERT_OK(sx_import_job_get(db, id2, &info));
    ASSERT_EQ(info.state, SX_IMPORT_FAILED);
    ASSERT(strstr(info.reason, "Parquet") != NULL);
    sx_import_job_info_fini(&info);
    ASSERT_STATUS(sx_import_job_get(db, "123", &info), SX_ENOTFOUND);
    sx_import_job_info *all = NULL;
    size_t n = 0;
    ASSERT_OK(sx_import_job_list(db, "c", &all, &n));
    ASSERT_EQ(n, 2);
    ASSERT(strcmp(all[0].job_id, id1) == 0);
    sx_import_jobs_free(all, n);
    ASSERT_OK(sx_import_job_list(db, "other", &all, &n));
    ASSERT_EQ(n, 0);
    sx_import_jobs_free(all, n);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    check_full(c, 700);
    sx_collection_release(c);
    /* a job still queued or running when the database closes: closed cleanly, nothing half */
    ASSERT_OK(sx_import_submit(db, "c", &g, 1, NULL, id1));
    sx_db_close(db);
    db = open_db(dir);
    ASSERT_OK(sx_collection_open(db, "c", &c));
    uint64_t cnt = count_of(c);
    ASSERT(cnt == 700); /* the second import of the same keys fails or never ran */
    sx_collection_release(c);
    sx_db_close(db);
}

/* A job's batches (one sealed segment each) are merged before the job is COMPLETED, as
 * Milvus's import ends with its compaction: 700 rows in batches of 100 rows -> 1 segment. */
static void job_merge(void)
{
    char dir[600], data[700], p[5][1024];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/jobmerge", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    write_npy_folder(data, 700, DIM);
    npy_paths(data, p, ptrs);
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    o.segment_max_bytes = 100 * DIM * sizeof(float);
    o.merge_max_bytes = 1000 * DIM * sizeof(float);
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    create_full(db, "c");
    sx_import_group g = { ptrs, 5 };
    char id[SX_IMPORT_JOB_ID];
    ASSERT_OK(sx_import_submit(db, "c", &g, 1, NULL, id));
    ASSERT_OK(sx_import_job_wait(db, id, 30000));
    sx_import_job_info info;
    ASSERT_OK(sx_import_job_get(db, id, &info));
    ASSERT_EQ(info.state, SX_IMPORT_COMPLETED);
    sx_import_job_info_fini(&info);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    sx_collection_info ci;
    ASSERT_OK(sx_collection_describe(c, &ci));
    ASSERT_EQ(ci.n_segments, 1);
    check_full(c, 700);
    sx_collection_release(c);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "c", &c));
    check_full(c, 700);
    sx_collection_release(c);
    sx_db_close(db);
}

/* ---- REST */

static json_t *post_json(const char *path, const char *body)
{
    th_resp *r = th_post(path, body, NULL);
    ASSERT(r != NULL);
    ASSERT_EQ(r->status, 200);
    if (!r->json)
        FAILF("%s: not JSON: %s", path, r->text);
    return r->json;
}

static json_t *wait_done(const char *job)
{
    char body[256];
    snprintf(body, sizeof body, "{\"jobId\": \"%s\"}", job);
    for (int i = 0; i < 600; i++) {
        json_t *j = post_json("/v2/vectordb/jobs/import/get_progress", body);
        ASSERT_EQ(th_code(), 0);
        json_t *d = json_object_get(j, "data");
        const char *st = json_string_value(json_object_get(d, "state"));
        ASSERT(st != NULL);
        if (strcmp(st, "Completed") == 0 || strcmp(st, "Failed") == 0)
            return d;
        struct timespec ts = { 0, 50 * 1000000L };
        nanosleep(&ts, NULL);
    }
    FAILF("job %s did not finish", job);
}

static void rest(void)
{
    char dir[600], data[700], body[4096], p[5][1024];
    const char *ptrs[5];
    snprintf(dir, sizeof dir, "%s/rest", g_dir);
    snprintf(data, sizeof data, "%s.data", dir);
    write_npy_folder(data, 600, DIM);
    npy_paths(data, p, ptrs);
    sx_server *srv = th_server_start(dir, NULL);
    ASSERT(srv != NULL);
    post_json("/v2/vectordb/collections/create",
              "{\"collectionName\": \"c\", \"schema\": {\"fields\": ["
              "{\"fieldName\": \"id\", \"dataType\": \"Int64\", \"isPrimary\": true},"
              "{\"fieldName\": \"vec\", \"dataType\": \"FloatVector\", \"elementTypeParams\": "
              "{\"dim\": 8}},"
              "{\"fieldName\": \"price\", \"dataType\": \"Double\"},"
              "{\"fieldName\": \"ok\", \"dataType\": \"Bool\"},"
              "{\"fieldName\": \"tag\", \"dataType\": \"VarChar\", \"elementTypeParams\": "
              "{\"max_length\": 32}}]}}");
    ASSERT_EQ(th_code(), 0);
    snprintf(body, sizeof body,
             "{\"collectionName\": \"c\", \"files\": [[\"%s\", \"%s\", \"%s\", \"%s\", \"%s\"]]}",
             ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4]);
    json_t *j = post_json("/v2/vectordb/jobs/import/create", body);
    ASSERT_EQ(th_code(), 0);
    const char *jid = json_string_value(json_object_get(json_object_get(j, "data"), "jobId"));
    ASSERT(jid != NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", jid);
    json_t *d = wait_done(job);
    ASSERT(strcmp(json_string_value(json_object_get(d, "state")), "Completed") == 0);
    ASSERT_EQ(json_integer_value(json_object_get(d, "progress")), 100);
    ASSERT_EQ(json_integer_value(json_object_get(d, "importedRows")), 600);
    ASSERT_EQ(json_integer_value(json_object_get(d, "totalRows")), 600);
    ASSERT(json_integer_value(json_object_get(d, "fileSize")) > 600 * DIM * 4);
    ASSERT(json_is_array(json_object_get(d, "details")));
    ASSERT_EQ(json_array_size(json_object_get(d, "details")), 1);
    json_t *det = json_array_get(json_object_get(d, "details"), 0);
    ASSERT_EQ(json_integer_value(json_object_get(det, "fileSize")),
              json_integer_value(json_object_get(d, "fileSize")));
    ASSERT_EQ(json_integer_value(json_object_get(det, "importedRows")), 600);
    ASSERT_EQ(json_integer_value(json_object_get(det, "progress")), 100);
    ASSERT(strstr(json_string_value(json_object_get(det, "fileName")), "vec.npy") != NULL);
    ASSERT(json_is_string(json_object_get(d, "completeTime")));
    /* describe = get_progress */
    snprintf(body, sizeof body, "{\"jobId\": \"%s\"}", job);
    j = post_json("/v2/vectordb/jobs/import/describe", body);
    ASSERT_EQ(th_code(), 0);
    ASSERT(strcmp(json_string_value(json_object_get(json_object_get(j, "data"), "collectionName")),
                  "c") == 0);
    /* the rows are there */
    j = post_json("/v2/vectordb/collections/get_stats", "{\"collectionName\": \"c\"}");
    ASSERT_EQ(th_code(), 0);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(j, "data"), "rowCount")), 600);
    /* a failing job: Failed with its reason */
    j = post_json("/v2/vectordb/jobs/import/create",
                  "{\"collectionName\": \"c\", \"files\": [[\"/no/such/file.json\"]]}");
    ASSERT_EQ(th_code(), 0);
    snprintf(job, sizeof job, "%s",
             json_string_value(json_object_get(json_object_get(j, "data"), "jobId")));
    d = wait_done(job);
    ASSERT(strcmp(json_string_value(json_object_get(d, "state")), "Failed") == 0);
    ASSERT(strstr(json_string_value(json_object_get(d, "reason")), "does not exist") != NULL);
    /* list: both, with their states */
    j = post_json("/v2/vectordb/jobs/import/list", "{\"collectionName\": \"c\"}");
    ASSERT_EQ(th_code(), 0);
    json_t *recs = json_object_get(json_object_get(j, "data"), "records");
    ASSERT_EQ(json_array_size(recs), 2);
    ASSERT(strcmp(json_string_value(json_object_get(json_array_get(recs, 1), "state")), "Failed") ==
           0);
    /* a collection with a dynamic field: JSON keys outside the schema go into it */
    post_json("/v2/vectordb/collections/create",
              "{\"collectionName\": \"dyn\", \"schema\": {\"enableDynamicField\": true, "
              "\"fields\": ["
              "{\"fieldName\": \"id\", \"dataType\": \"Int64\", \"isPrimary\": true},"
              "{\"fieldName\": \"vec\", \"dataType\": \"FloatVector\", \"elementTypeParams\": "
              "{\"dim\": 2}}]}}");
    ASSERT_EQ(th_code(), 0);
    char jpath[700];
    snprintf(jpath, sizeof jpath, "%s.dyn.json", dir);
    const char *dj = "{\"rows\": [{\"id\": 1, \"vec\": [1, 2], \"color\": \"red\"}, "
                     "{\"id\": 2, \"vec\": [3, 4]}, "
                     "{\"id\": 3, \"vec\": [5, 6], \"$meta\": {\"size\": 9}}]}";
    write_file(jpath, dj, strlen(dj));
    snprintf(body, sizeof body, "{\"collectionName\": \"dyn\", \"files\": [[\"%s\"]]}", jpath);
    j = post_json("/v2/vectordb/jobs/import/create", body);
    ASSERT_EQ(th_code(), 0);
    snprintf(job, sizeof job, "%s",
             json_string_value(json_object_get(json_object_get(j, "data"), "jobId")));
    d = wait_done(job);
    if (strcmp(json_string_value(json_object_get(d, "state")), "Completed") != 0)
        FAILF("dynamic-field import: %s", json_string_value(json_object_get(d, "reason")));
    /* refused requests */
    post_json("/v2/vectordb/jobs/import/get_progress", "{\"jobId\": \"42\"}");
    ASSERT(th_code() != 0);
    post_json("/v2/vectordb/jobs/import/create",
              "{\"collectionName\": \"nope\", \"files\": [[\"a.json\"]]}");
    ASSERT(th_code() != 0);
    post_json("/v2/vectordb/jobs/import/create", "{\"collectionName\": \"c\", \"files\": []}");
    ASSERT(th_code() != 0);
    post_json("/v2/vectordb/jobs/import/create",
              "{\"collectionName\": \"c\", \"partitionName\": \"p1\", \"files\": [[\"a.json\"]]}");
    ASSERT(th_code() != 0);
    ASSERT_OK(sx_server_stop(srv));
    /* the dynamic field's column holds the extra key (the server's hidden column) */
    sx_db *db = open_db(dir);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "dyn", &c));
    uint64_t k = 0;
    ASSERT_OK(sx_count(c, "sx_meta_ like \"%red%\"", &k));
    ASSERT_EQ(k, 1);
    ASSERT_OK(sx_count(c, "sx_meta_ == \"{}\"", &k));
    ASSERT_EQ(k, 1);
    ASSERT_OK(sx_count(c, "sx_meta_ == \"{\\\"size\\\":9}\"", &k));
    ASSERT_EQ(k, 1);
    sx_collection_release(c);
    sx_db_close(db);
}

/* --import-root: local files outside it (directly, through "..", or through a symbolic link) are
 * refused at create (1100); a file under it imports. */
static void rest_root(void)
{
    char dir[600], root[700], inside[800], outside[800], link[800], dotdot[900], body[2048];
    snprintf(dir, sizeof dir, "%s/rroot", g_dir);
    snprintf(root, sizeof root, "%s.files", dir);
    ASSERT(mkdir(root, 0755) == 0);
    snprintf(inside, sizeof inside, "%s/in.json", root);
    snprintf(outside, sizeof outside, "%s.out.json", dir);
    snprintf(link, sizeof link, "%s/sub", root);
    snprintf(dotdot, sizeof dotdot, "%s/../rroot.out.json", root);
    const char *rows = "[{\"id\": 1, \"vec\": [1, 2]}]";
    write_file(inside, rows, strlen(rows));
    write_file(outside, rows, strlen(rows));
    ASSERT(symlink(g_dir, link) == 0);
    sx_server_options so = { 0 };
    so.import_root = root;
    sx_server *srv = th_server_start(dir, &so);
    ASSERT(srv != NULL);
    post_json("/v2/vectordb/collections/create",
              "{\"collectionName\": \"c\", \"schema\": {\"fields\": ["
              "{\"fieldName\": \"id\", \"dataType\": \"Int64\", \"isPrimary\": true},"
              "{\"fieldName\": \"vec\", \"dataType\": \"FloatVector\", \"elementTypeParams\": "
              "{\"dim\": 2}}]}}");
    ASSERT_EQ(th_code(), 0);
    const char *bad[3] = { outside, dotdot, NULL };
    char via_link[900];
    snprintf(via_link, sizeof via_link, "%s/rroot.out.json", link);
    bad[2] = via_link;
    for (int i = 0; i < 3; i++) {
        snprintf(body, sizeof body, "{\"collectionName\": \"c\", \"files\": [[\"%s\"]]}", bad[i]);
        json_t *j = post_json("/v2/vectordb/jobs/import/create", body);
        ASSERT_EQ(th_code(), 1100);
        ASSERT(strstr(json_string_value(json_object_get(j, "message")), "import root") != NULL);
    }
    snprintf(body, sizeof body, "{\"collectionName\": \"c\", \"files\": [[\"%s\"]]}", inside);
    json_t *j = post_json("/v2/vectordb/jobs/import/create", body);
    ASSERT_EQ(th_code(), 0);
    char job[64];
    snprintf(job, sizeof job, "%s",
             json_string_value(json_object_get(json_object_get(j, "data"), "jobId")));
    json_t *d = wait_done(job);
    ASSERT(strcmp(json_string_value(json_object_get(d, "state")), "Completed") == 0);
    ASSERT_OK(sx_server_stop(srv));
}

/* `sextant import --job` ($SX_SEXTANT_BIN): creates the collection from a .fvecs file, imports it
 * in batches, prints the rate; a bad file exits 1 naming it, nothing imported. */
static void cli_job(void)
{
    const char *bin = getenv("SX_SEXTANT_BIN");
    if (!bin || !*bin)
        SKIPF("SX_SEXTANT_BIN not set (run through ctest)");
    char dir[600], fv[700], out[800], cmd[4096];
    snprintf(dir, sizeof dir, "%s/cli", g_dir);
    snprintf(fv, sizeof fv, "%s.fvecs", dir);
    snprintf(out, sizeof out, "%s.out", dir);
    size_t rec = 4 + 16 * 4;
    unsigned char *buf = malloc(2500 * rec);
    ASSERT(buf != NULL);
    uint64_t sd = 3;
    for (size_t i = 0; i < 2500; i++) {
        uint32_t d = 16;
        memcpy(buf + i * rec, &d, 4);
        for (size_t j = 0; j < 16; j++) {
            float x = test_randf(&sd);
            memcpy(buf + i * rec + 4 + j * 4, &x, 4);
        }
    }
    write_file(fv, buf, 2500 * rec);
    free(buf);
    snprintf(cmd, sizeof cmd,
             "'%s' import --job --data '%s' --collection v --file '%s' --batch-rows 1000 >'%s' "
             "2>&1",
             bin, dir, fv, out);
    ASSERT_EQ(system(cmd), 0);
    char text[2048] = "";
    FILE *f = fopen(out, "r");
    ASSERT(f != NULL);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    ASSERT(fclose(f) == 0);
    fprintf(stderr, "     %s", text);
    ASSERT(strstr(text, "imported 2500 rows into v in 3 sealed segment(s)") != NULL);
    snprintf(cmd, sizeof cmd,
             "'%s' import --job --data '%s' --collection v --file '%s/x.parquet' >'%s' 2>&1", bin,
             dir, dir, out);
    int rc = system(cmd);
    ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    f = fopen(out, "r");
    ASSERT(f != NULL);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    ASSERT(fclose(f) == 0);
    ASSERT(strstr(text, "Parquet") != NULL);
    sx_db *db = open_db(dir);
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "v", &c));
    ASSERT_EQ(count_of(c), 2500);
    sx_collection_release(c);
    sx_db_close(db);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s", test_tmpdir("import"));
    RUN(json_rows);
    RUN(json_toplevel);
    RUN(json_nullable);
    RUN(npy_folder);
    RUN(varchar_pk);
    RUN(fvecs_bvecs);
    RUN(hdf5);
    RUN(batches);
    RUN(malformed);
    RUN(dead_s3);
    RUN(crash);
    RUN(index_budget);
    RUN(oom);
    RUN(wal_order);
    RUN(jobs);
    RUN(job_merge);
    RUN(rest);
    RUN(rest_root);
    RUN(cli_job);
    return TEST_DONE();
}
