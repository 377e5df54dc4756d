/*
 * test_import_s3.c: bulk import from object storage, against s3rver (the SigV4-checking S3
 * server the S3 tests start themselves; skipped with a visible reason without node / npm ci).
 *   from_store   a database stored in s3://imp/db imports "data/base.fvecs" (a key relative to its
 *                store) and "s3://imp/raw/base.fvecs" (any key of the endpoint): both collections
 *                hold every row, a search finds each probe at distance 0, and a fresh directory
 *                opened from the store alone has the imported rows (the commit synced them)
 *   json_hdf5    row-based JSON streamed through ranged GETs (3,000 rows over several read
 *                windows) and an HDF5 object (downloaded to a temporary file, removed after)
 *   rates        the same 40,000 x 128 rows (20 MB; SX_IMPORT_ROWS=N for more) imported from a
 * local file, from s3rver, and inserted through sx_insert in batches of 10,000 + a flush: rows/s
 * and MB/s of each are printed (the figures of docs/internals/IMPORT.md) fault_mid    every GET
 * through a fault proxy fails (HTTP 500) from the third batch on: the import fails with SX_EREMOTE
 * naming the file, nothing is visible, no segment file is left; with the proxy healthy again it
 * succeeds
 *   bench_pipeline  `sextant bench --import s3://imp/raw/base.fvecs` (the seed pipeline: raw file
 *                in the bucket -> import job -> index -> query-ready), FLAT, with queries and
 *                exact ground truth (double) this test computes: the JSON's import block has every
 *                row and the file's bytes, the insert phase read at least the file from S3, and
 *                recall@10 is 1 (the auto ids map back to row numbers); a missing key fails with
 *                the key named, --import with --base is a usage error (2)
 */
#include <dirent.h>
#include <sextant.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#ifdef SX_HAVE_HDF5
# include <hdf5.h>
#endif

#include <jansson.h>

#include "faultproxy.h"
#include "harness.h"
#include "s3rver.h"
#include "storage/s3.h"

#define BUCKET "imp"
#define DIM    128u

static th_s3rver srv;
static faultproxy fp;
static const char *tmp;
static char fvecs[600];
static float *vecs;
static size_t N = 40000; /* SX_IMPORT_ROWS overrides (bench/import_rate.sh) */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t seg_files(const char *dir)
{
    DIR *d = opendir(dir);
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

static void create_auto(sx_db *db, const char *name)
{
    sx_field_def f[2] = {
        { "pk", SX_FIELD_INT64, true, true, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def d = { name, f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
}

static sx_db *open_db(const char *dir, const char *endpoint, bool store)
{
    sx_db_options o = { 0 }; /* SX_SYNC_FULL: inserts are acknowledged after their fdatasync */
    o.storage_url = store ? "s3://" BUCKET "/db" : NULL;
    o.s3_endpoint = endpoint;
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    return db;
}

static void check_rows(sx_collection *c)
{
    uint64_t n = 0;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, N);
    for (size_t i = 0; i < N; i += 997) {
        sx_search_req req = { vecs + i * DIM, 1, 1, 0, NULL, NULL, 0, NULL, 0, -1 };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(c, &req, &rs));
        ASSERT_EQ(rs->n_rows, 1);
        ASSERT(rs->distances[0] == 0.0f);
        sx_rowset_free(rs);
    }
}

static double import_one(sx_collection *c, const char *path, sx_import_result *res)
{
    const char *p[] = { path };
    sx_import_group g = { p, 1 };
    double t0 = now_s();
    ASSERT_OK(sx_import_run(c, &g, 1, NULL, res));
    return now_s() - t0;
}

static void from_store(void)
{
    char dir[600], dir2[600];
    snprintf(dir, sizeof dir, "%s/store", tmp);
    snprintf(dir2, sizeof dir2, "%s/store2", tmp);
    sx_db *db = open_db(dir, srv.endpoint, true);
    create_auto(db, "rel");
    create_auto(db, "abs");
    sx_collection *c = NULL;
    sx_import_result res;
    ASSERT_OK(sx_collection_open(db, "rel", &c));
    (void)import_one(c, "data/base.fvecs", &res);
    ASSERT_EQ(res.rows, N);
    check_rows(c);
    sx_collection_release(c);
    ASSERT_OK(sx_collection_open(db, "abs", &c));
    (void)import_one(c, "s3://" BUCKET "/raw/base.fvecs", &res);
    check_rows(c);
    /* a missing key */
    const char *p[] = { "data/nope.fvecs" };
    sx_import_group g = { p, 1 };
    ASSERT_STATUS(sx_import_run(c, &g, 1, NULL, NULL), SX_ENOTFOUND);
    ASSERT(strstr(sx_errmsg(), "does not exist in the object store") != NULL);
    sx_collection_release(c);
    sx_db_close(db);
    /* another directory, from the store alone */
    db = open_db(dir2, srv.endpoint, true);
    ASSERT_OK(sx_collection_open(db, "rel", &c));
    check_rows(c);
    sx_collection_release(c);
    sx_db_close(db);
}

/* JSON (3,000 rows, 2.4 MB: the 1 MiB read window refills across row boundaries) and HDF5
 * (downloaded to a temporary file first, removed after) from the bucket. */
static void json_hdf5(void)
{
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/jh", tmp);
    snprintf(path, sizeof path, "%s/rows.json", tmp);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f, "{\"rows\": [");
    for (size_t i = 0; i < 3000; i++) {
        fprintf(f, "%s\n{\"vec\": [", i ? "," : "");
        for (size_t j = 0; j < DIM; j++)
            fprintf(f, "%s%.9g", j ? "," : "", (double)vecs[i * DIM + j]);
        fprintf(f, "]}");
    }
    fprintf(f, "]}");
    ASSERT(fclose(f) == 0);
    sx__s3_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.endpoint = srv.endpoint;
    cfg.bucket = BUCKET;
    sx__s3 *S = NULL;
    ASSERT_OK(sx__s3_new(&cfg, &S));
    ASSERT_OK(sx__s3_put_file(S, "raw/rows.json", path));
#ifdef SX_HAVE_HDF5
    char h5[700];
    snprintf(h5, sizeof h5, "%s/base.h5", tmp);
    hid_t hf = H5Fcreate(h5, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(hf >= 0);
    hsize_t dims[2] = { N, DIM };
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t ds = H5Dcreate2(hf, "train", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vecs) >= 0);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(hf);
    ASSERT_OK(sx__s3_put_file(S, "raw/base.h5", h5));
#endif
    sx__s3_free(S);
    sx_db *db = open_db(dir, srv.endpoint, false);
    create_auto(db, "j");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "j", &c));
    sx_import_result res;
    (void)import_one(c, "s3://" BUCKET "/raw/rows.json", &res);
    ASSERT_EQ(res.rows, 3000);
    for (size_t i = 0; i < 3000; i += 101) {
        sx_search_req req = { vecs + i * DIM, 1, 1, 0, NULL, NULL, 0, NULL, 0, -1 };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(c, &req, &rs));
        ASSERT(rs->n_rows == 1 && rs->distances[0] == 0.0f);
        sx_rowset_free(rs);
    }
    sx_collection_release(c);
#ifdef SX_HAVE_HDF5
    create_auto(db, "h");
    ASSERT_OK(sx_collection_open(db, "h", &c));
    (void)import_one(c, "s3://" BUCKET "/raw/base.h5", &res);
    check_rows(c);
    sx_collection_release(c);
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".h5.tmp"))
            FAILF("temporary download %s left behind", e->d_name);
    closedir(d);
#endif
    sx_db_close(db);
}

static void rates(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/rates", tmp);
    sx_db *db = open_db(dir, srv.endpoint, false);
    create_auto(db, "local");
    create_auto(db, "s3");
    create_auto(db, "ins");
    double mb = (double)N * (4 + DIM * 4) / 1e6;
    sx_collection *c = NULL;
    sx_import_result res;
    ASSERT_OK(sx_collection_open(db, "local", &c));
    double tl = import_one(c, fvecs, &res);
    check_rows(c);
    sx_collection_release(c);
    ASSERT_OK(sx_collection_open(db, "s3", &c));
    double ts = import_one(c, "s3://" BUCKET "/raw/base.fvecs", &res);
    check_rows(c);
    sx_collection_release(c);
    ASSERT_OK(sx_collection_open(db, "ins", &c));
    double t0 = now_s();
    for (size_t i = 0; i < N; i += 10000) {
        sx_column col = { "vec", SX_FIELD_FLOAT_VECTOR, vecs + i * DIM };
        sx_batch b = { 10000, &col, 1 };
        ASSERT_OK(sx_insert(c, &b, NULL));
    }
    ASSERT_OK(sx_flush(c));
    double ti = now_s() - t0;
    check_rows(c);
    sx_collection_release(c);
    sx_db_close(db);
    fprintf(stderr,
            "     %zu x %u (%.1f MB of fvecs)\n"
            "     import, local file : %7.3f s  %9.0f rows/s  %7.1f MB/s\n"
            "     import, s3rver     : %7.3f s  %9.0f rows/s  %7.1f MB/s\n"
            "     sx_insert + flush  : %7.3f s  %9.0f rows/s  %7.1f MB/s (sync_mode FULL)\n",
            N, DIM, mb, tl, N / tl, mb / tl, ts, N / ts, mb / ts, ti, N / ti, mb / ti);
}

static bool break_after_two(void *ctx, const sx_import_progress *p)
{
    int *calls = ctx;
    (void)p;
    if (++*calls == 2) {
        fp_filter(&fp, "GET", "raw/base.fvecs");
        fp_set_persistent(&fp, FP_500);
    }
    return true;
}

static void fault_mid(void)
{
    char dir[600], ep[64], cdir[700];
    snprintf(dir, sizeof dir, "%s/fault", tmp);
    snprintf(cdir, sizeof cdir, "%s/collections/c", dir);
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", fp.port);
    sx_db *db = open_db(dir, ep, false);
    create_auto(db, "c");
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    int calls = 0;
    const char *p[] = { "s3://" BUCKET "/raw/base.fvecs" };
    sx_import_group g = { p, 1 };
    sx_import_opts o = { .progress = break_after_two, .progress_ctx = &calls, .batch_rows = 5000 };
    sx_status st = sx_import_run(c, &g, 1, &o, NULL);
    fp_clear(&fp);
    fprintf(stderr, "     after %d batches: %s: %s\n", calls, sx_status_str(st), sx_errmsg());
    ASSERT_EQ(st, SX_EREMOTE);
    ASSERT(strstr(sx_errmsg(), "raw/base.fvecs") != NULL);
    uint64_t n = 1;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 0);
    ASSERT_EQ(seg_files(cdir), 0);
    sx_import_opts o2 = { .progress = NULL, .progress_ctx = NULL, .batch_rows = 5000 };
    ASSERT_OK(sx_import_run(c, &g, 1, &o2, NULL));
    check_rows(c);
    sx_collection_release(c);
    sx_db_close(db);
}

/* Runs the sextant binary with args, output to tmp/NAME.log; the exit status (-1: no binary). */
static int run_bin(const char *name, const char *args)
{
    const char *bin = getenv("SX_SEXTANT_BIN");
    if (!bin)
        return -1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "SEXTANT_S3_ENDPOINT=%s %s %s > %s/%s.log 2>&1", srv.endpoint, bin,
             args, tmp, name);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static bool log_has(const char *name, const char *text)
{
    char p[700];
    snprintf(p, sizeof p, "%s/%s.log", tmp, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

static void bench_pipeline(void)
{
    if (!getenv("SX_SEXTANT_BIN"))
        SKIPF("SX_SEXTANT_BIN not set (run through ctest)");

    enum { NQ = 40, K = 10 };

    /* queries: perturbed base rows; ground truth: exact top-K in double */
    uint64_t s = 99;
    size_t rec = 4 + DIM * 4;
    unsigned char qb[NQ * (4 + DIM * 4)], gb[NQ * (4 + K * 4)];
    float q[NQ * DIM];
    for (size_t i = 0; i < NQ; i++) {
        uint32_t d = DIM;
        memcpy(qb + i * rec, &d, 4);
        for (size_t j = 0; j < DIM; j++)
            q[i * DIM + j] = vecs[(i * 997 % N) * DIM + j] + 0.05f * test_randf(&s);
        memcpy(qb + i * rec + 4, q + i * DIM, DIM * 4);
        int32_t best[K];
        double bd[K];
        for (size_t k = 0; k < K; k++) {
            best[k] = -1;
            bd[k] = 1e300;
        }
        for (size_t r = 0; r < N; r++) {
            double dd = 0;
            for (size_t j = 0; j < DIM; j++) {
                double t = (double)q[i * DIM + j] - (double)vecs[r * DIM + j];
                dd += t * t;
            }
            if (dd >= bd[K - 1])
                continue;
            size_t at = K - 1;
            while (at > 0 && bd[at - 1] > dd) {
                bd[at] = bd[at - 1];
                best[at] = best[at - 1];
                at--;
            }
            bd[at] = dd;
            best[at] = (int32_t)r;
        }
        uint32_t kk = K;
        memcpy(gb + i * (4 + K * 4), &kk, 4);
        memcpy(gb + i * (4 + K * 4) + 4, best, K * 4);
    }
    char qpath[600], gpath[600], jpath[600], args[3000];
    snprintf(qpath, sizeof qpath, "%s/query.fvecs", tmp);
    snprintf(gpath, sizeof gpath, "%s/gt.ivecs", tmp);
    snprintf(jpath, sizeof jpath, "%s/pipeline.json", tmp);
    FILE *f = fopen(qpath, "wb");
    ASSERT(f && fwrite(qb, 1, sizeof qb, f) == sizeof qb && fclose(f) == 0);
    f = fopen(gpath, "wb");
    ASSERT(f && fwrite(gb, 1, sizeof gb, f) == sizeof gb && fclose(f) == 0);

    snprintf(args, sizeof args,
             "bench --import s3://" BUCKET "/raw/base.fvecs --query %s --gt %s --index flat "
             "--k %d --data %s/pipeline-db --json %s",
             qpath, gpath, K, tmp, jpath);
    int rc = run_bin("pipeline", args);
    ASSERT_EQ(rc, 0);
    ASSERT(log_has("pipeline", "raw file -> query-ready"));
    json_error_t e;
    json_t *j = json_load_file(jpath, 0, &e);
    ASSERT(j != NULL);
    json_t *imp = json_object_get(j, "import");
    ASSERT(json_is_object(imp));
    ASSERT_EQ((uint64_t)json_integer_value(json_object_get(imp, "rows")), N);
    ASSERT_EQ((uint64_t)json_integer_value(json_object_get(imp, "bytes")), (uint64_t)N * rec);
    ASSERT(json_number_value(json_object_get(imp, "query_ready_s")) > 0);
    json_t *s3 = json_object_get(json_object_get(json_object_get(j, "io_profile"), "insert"), "s3");
    uint64_t s3_read = (uint64_t)json_integer_value(json_object_get(s3, "read_bytes"));
    printf("  pipeline: %llu rows, S3 read %llu bytes in the insert phase, raw -> query-ready "
           "%.2f s\n",
           (unsigned long long)N, (unsigned long long)s3_read,
           json_number_value(json_object_get(imp, "query_ready_s")));
    ASSERT(s3_read >= (uint64_t)N * rec);
    json_t *runs = json_object_get(j, "runs");
    ASSERT(json_is_array(runs) && json_array_size(runs) > 0);
    for (size_t i = 0; i < json_array_size(runs); i++) {
        double r = json_number_value(json_object_get(json_array_get(runs, i), "recall"));
        ASSERT(r > 0.9999);
    }
    json_decref(j);

    /* mistakes: a key that is not there; --import with --base */
    snprintf(args, sizeof args,
             "bench --import s3://" BUCKET "/raw/nope.fvecs --query %s --gt %s --index flat "
             "--data %s/pipeline-db2",
             qpath, gpath, tmp);
    ASSERT_EQ(run_bin("pipeline-missing", args), 1);
    ASSERT(log_has("pipeline-missing", "raw/nope.fvecs"));
    snprintf(args, sizeof args,
             "bench --import s3://" BUCKET "/raw/base.fvecs --base %s --query %s", fvecs, qpath);
    ASSERT_EQ(run_bin("pipeline-usage", args), 2);
    ASSERT(log_has("pipeline-usage", "--import"));
}

int main(void)
{
    tmp = test_tmpdir("import_s3");
    const char *er = getenv("SX_IMPORT_ROWS");
    if (er && strtoull(er, NULL, 10) >= 10000)
        N = (size_t)strtoull(er, NULL, 10) / 10000 * 10000; /* whole insert batches */
    int rc = th_s3rver_start(tmp, &srv);
    if (rc)
        return rc;
    if (fp_start(&fp, srv.port) != 0) {
        fprintf(stderr, "cannot start the fault proxy\n");
        th_s3rver_stop(&srv);
        return 1;
    }
    setenv("AWS_ACCESS_KEY_ID", TH_S3RVER_ACCESS, 1);
    setenv("AWS_SECRET_ACCESS_KEY", TH_S3RVER_SECRET, 1);
    /* the data: N x DIM floats, as .fvecs, locally and under two keys */
    vecs = malloc((size_t)N * DIM * 4);
    size_t rec = 4 + DIM * 4;
    unsigned char *buf = malloc((size_t)N * rec);
    if (!vecs || !buf)
        return 1;
    uint64_t s = 7;
    for (size_t i = 0; i < N; i++) {
        uint32_t d = DIM;
        memcpy(buf + i * rec, &d, 4);
        for (size_t j = 0; j < DIM; j++)
            vecs[i * DIM + j] = test_randf(&s);
        memcpy(buf + i * rec + 4, vecs + i * DIM, DIM * 4);
    }
    snprintf(fvecs, sizeof fvecs, "%s/base.fvecs", tmp);
    FILE *f = fopen(fvecs, "wb");
    if (!f || fwrite(buf, 1, (size_t)N * rec, f) != (size_t)N * rec || fclose(f) != 0)
        return 1;
    free(buf);
    sx__s3_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.endpoint = srv.endpoint;
    cfg.bucket = BUCKET;
    sx__s3 *S = NULL;
    if (sx__s3_new(&cfg, &S) != SX_OK || sx__s3_create_bucket(S) != SX_OK ||
        sx__s3_put_file(S, "raw/base.fvecs", fvecs) != SX_OK ||
        sx__s3_put_file(S, "db/data/base.fvecs", fvecs) != SX_OK) {
        fprintf(stderr, "S3 setup: %s\n", sx_errmsg());
        fp_stop(&fp);
        th_s3rver_stop(&srv);
        return 1;
    }
    sx__s3_free(S);
    RUN(from_store);
    RUN(json_hdf5);
    RUN(rates);
    RUN(fault_mid);
    RUN(bench_pipeline);
    free(vecs);
    fp_stop(&fp);
    th_s3rver_stop(&srv);
    return TEST_DONE();
}
