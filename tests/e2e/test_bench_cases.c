/*
 * test_bench_cases.c: `sextant bench`'s data, ground truth and case machinery, through the
 * binary ($SX_SEXTANT_BIN, set by ctest):
 *
 *   1. generated data is deterministic: two runs with the same generator and seed (separate
 *      caches) report the same dataset.data_hash and write byte-identical ground truth; another
 *      seed gives another hash;
 *   2. the ground-truth cache is reused (gt_cache.status "hit") and a corrupted cache file
 *      (one byte flipped, or truncated) is detected by its checksum and recomputed, to the same
 *      bytes as before;
 *   3. readers reject corrupt files with clear errors: truncated .fvecs, a .npy with a bad
 *      header, an HDF5 file without the `test` dataset, a non-HDF5 file named .hdf5; a valid
 *      ann-benchmarks HDF5 file (written here with libhdf5) benches with its own ground truth;
 *   4. filtered-case ground truth is exact: on 400 random vectors the cached ids of
 *      `label >= 200` / `label >= 360` equal a brute-force top-k among the rows kept;
 *   5. the JSON has the documented VectorDBBench keys with sane values, one concurrency entry
 *      per level, and a streaming case with one entry per stage.
 *
 * JSON is parsed with jansson (linked through the server library).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef SX_HAVE_HDF5
# include <hdf5.h>
#endif

#include "harness.h"

#define NB  400
#define NQ  20
#define DIM 8

static const char *bin;
static char dir[512];
static float base_v[NB * DIM];
static float query_v[NQ * DIM];
static char out_buf[1 << 20];
static char err_buf[1 << 16];

static void path_of(char *buf, size_t len, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= len)
        FAILF("path too long: %s/%s", dir, name);
}

static void put_le32(unsigned char *b, uint32_t v)
{
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
    b[2] = (unsigned char)(v >> 16);
    b[3] = (unsigned char)(v >> 24);
}

static void write_bytes(const char *name, const void *data, size_t len)
{
    char p[1024];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    if (f == NULL)
        FAILF("cannot create %s: %s", p, strerror(errno));
    if (len > 0 && fwrite(data, 1, len, f) != len)
        FAILF("cannot write %s", p);
    if (fclose(f) != 0)
        FAILF("cannot close %s", p);
}

static void write_fvecs(const char *name, const float *v, size_t n, size_t dim)
{
    size_t rec = 4 + dim * 4;
    unsigned char *buf = malloc(n * rec);
    ASSERT(buf != NULL);
    for (size_t r = 0; r < n; r++) {
        unsigned char *p = buf + r * rec;
        put_le32(p, (uint32_t)dim);
        for (size_t j = 0; j < dim; j++) {
            uint32_t u;
            memcpy(&u, &v[r * dim + j], sizeof u);
            put_le32(p + 4 + 4 * j, u);
        }
    }
    write_bytes(name, buf, n * rec);
    free(buf);
}

/* Reads a whole file; returns its size, or -1. Owned: free *out. */
static long slurp(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    (void)fseek(f, 0, SEEK_END);
    long n = ftell(f);
    (void)fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (b == NULL || (n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n)) {
        free(b);
        (void)fclose(f);
        return -1;
    }
    (void)fclose(f);
    *out = b;
    return n;
}

static void read_file(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    (void)fclose(f);
}

static int run(const char *args)
{
    char cmd[12288], out[1024], err[1024];
    path_of(out, sizeof out, "stdout.txt");
    path_of(err, sizeof err, "stderr.txt");
    int n =
        snprintf(cmd, sizeof cmd, "SX_NO_PROGRESS=1 '%s' %s > '%s' 2> '%s'", bin, args, out, err);
    if (n < 0 || (size_t)n >= sizeof cmd)
        FAILF("command too long");
    int st = system(cmd);
    read_file(out, out_buf, sizeof out_buf);
    read_file(err, err_buf, sizeof err_buf);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    if (getenv("SX_TEST_VERBOSE") != NULL)
        fprintf(stderr, "$ %s -> %d\n%s%s", cmd, WEXITSTATUS(st), out_buf, err_buf);
    return WEXITSTATUS(st);
}

#define RUN_EXPECT(want, ...)                                                                   \
 do {                                                                                           \
  char _args[8192];                                                                             \
  int _n = snprintf(_args, sizeof _args, __VA_ARGS__);                                          \
  if (_n < 0 || (size_t)_n >= sizeof _args)                                                     \
   FAILF("arguments too long");                                                                 \
  int _rc = run(_args);                                                                         \
  if (_rc != (want))                                                                            \
   FAILF("sextant %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", _args, _rc, (want), out_buf, \
         err_buf);                                                                              \
 } while (0)

static json_t *load_json(const char *name)
{
    char p[1024];
    path_of(p, sizeof p, name);
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    if (j == NULL)
        FAILF("%s: invalid JSON at line %d: %s", p, e.line, e.text);
    return j;
}

static double num(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        FAILF("key \"%s\" is not a number", key);
    return json_number_value(v);
}

static const char *str(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        FAILF("key \"%s\" is not a string", key);
    return json_string_value(v);
}

static void setup(void)
{
    uint64_t seed = test_seed();
    snprintf(dir, sizeof dir, "%s", test_tmpdir("test_bench_cases"));
    for (size_t j = 0; j < (size_t)NB * DIM; j++)
        base_v[j] = test_randf(&seed);
    for (size_t j = 0; j < (size_t)NQ * DIM; j++)
        query_v[j] = test_randf(&seed);
    write_fvecs("base.fvecs", base_v, NB, DIM);
    write_fvecs("query.fvecs", query_v, NQ, DIM);
}

/* ------------------------------------------------------------------ 1, 2: generated data */

#define GEN_ARGS                                                                              \
 "bench --synthetic 3000,16,7 --generate anisotropic --nq 40 --index flat --no-peers --k 10 " \
 "--concurrency 0"

static void gt_file(char *out, size_t len, const char *cache)
{
    snprintf(out, len, "%s/%s/sx-gmm-rot-1-n3000-d16-s7-q40-l2-k100-gt.ivecs", dir, cache);
}

static void test_generated_deterministic(void)
{
    RUN_EXPECT(0, GEN_ARGS " --cache-dir '%s/c1' --json '%s/g1.json'", dir, dir);
    RUN_EXPECT(0, GEN_ARGS " --cache-dir '%s/c2' --json '%s/g2.json'", dir, dir);
    json_t *a = load_json("g1.json"), *b = load_json("g2.json");
    const json_t *da = json_object_get(a, "dataset"), *db = json_object_get(b, "dataset");
    ASSERT(strncmp(str(da, "data_hash"), "fnv1a64:", 8) == 0);
    ASSERT(strcmp(str(da, "data_hash"), str(db, "data_hash")) == 0);
    ASSERT(strcmp(str(json_object_get(da, "synthetic"), "generator"), "sx-gmm-rot-1") == 0);
    ASSERT(strcmp(str(json_object_get(a, "gt_cache"), "status"), "miss") == 0);
    ASSERT_NEAR(num(a, "recall"), 1.0, 1e-9); /* FLAT is exact */
    json_decref(a);
    json_decref(b);
    char p1[1024], p2[1024];
    gt_file(p1, sizeof p1, "c1");
    gt_file(p2, sizeof p2, "c2");
    unsigned char *x = NULL, *y = NULL;
    long nx = slurp(p1, &x), ny = slurp(p2, &y);
    ASSERT(nx == 40L * (4 + 100 * 4));
    ASSERT(nx == ny && memcmp(x, y, (size_t)nx) == 0);
    free(x);
    free(y);
    /* another seed, other data */
    RUN_EXPECT(0,
               "bench --synthetic 3000,16,8 --generate anisotropic --nq 40 --index flat "
               "--no-peers --cache-dir '%s/c2' --json '%s/g3.json'",
               dir, dir);
    json_t *c = load_json("g3.json");
    a = load_json("g1.json");
    ASSERT(strcmp(str(json_object_get(a, "dataset"), "data_hash"),
                  str(json_object_get(c, "dataset"), "data_hash")) != 0);
    json_decref(a);
    json_decref(c);
    /* the cosine generator: unit vectors, so the l2 ground truth of ip and cosine agree */
    RUN_EXPECT(0,
               "bench --synthetic 2000,16,1 --generate cosine --metric cosine --nq 20 --index "
               "flat --no-peers --cache-dir '%s/c4' --json '%s/g4.json'",
               dir, dir);
    c = load_json("g4.json");
    ASSERT(strcmp(str(json_object_get(json_object_get(c, "dataset"), "synthetic"), "generator"),
                  "sx-gmm-rot-unit-1") == 0);
    ASSERT_NEAR(num(c, "recall"), 1.0, 1e-9);
    json_decref(c);
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    ASSERT(f != NULL);
    ASSERT(fseek(f, off, SEEK_SET) == 0);
    int ch = fgetc(f);
    ASSERT(ch != EOF);
    ASSERT(fseek(f, off, SEEK_SET) == 0);
    ASSERT(fputc(ch ^ 0x5a, f) != EOF);
    ASSERT(fclose(f) == 0);
}

static void test_gt_cache(void)
{
    char p1[1024];
    gt_file(p1, sizeof p1, "c1");
    unsigned char *orig = NULL;
    long n = slurp(p1, &orig);
    ASSERT(n > 0);
    RUN_EXPECT(0, GEN_ARGS " --cache-dir '%s/c1' --json '%s/h1.json'", dir, dir);
    json_t *j = load_json("h1.json");
    ASSERT(strcmp(str(json_object_get(j, "gt_cache"), "status"), "hit") == 0);
    ASSERT(strcmp(str(json_object_get(j, "dataset"), "gt_source"), "file") == 0);
    ASSERT(strstr(err_buf, "computing exact") == NULL);
    json_decref(j);

    /* one id flipped: the checksum catches it, the cache is recomputed to the same bytes */
    flip_byte(p1, n / 2);
    RUN_EXPECT(0, GEN_ARGS " --cache-dir '%s/c1' --json '%s/h2.json'", dir, dir);
    ASSERT(strstr(err_buf, "corrupt") != NULL);
    ASSERT(strstr(err_buf, "checksum mismatch") != NULL);
    j = load_json("h2.json");
    ASSERT(strcmp(str(json_object_get(j, "gt_cache"), "status"), "recomputed") == 0);
    json_decref(j);
    unsigned char *again = NULL;
    ASSERT(slurp(p1, &again) == n && memcmp(orig, again, (size_t)n) == 0);
    free(again);

    /* truncated distances file */
    char pd[1024];
    snprintf(pd, sizeof pd, "%s/c1/sx-gmm-rot-1-n3000-d16-s7-q40-l2-k100-gt-dist.fvecs", dir);
    ASSERT(truncate(pd, 1000) == 0);
    RUN_EXPECT(0, GEN_ARGS " --cache-dir '%s/c1' --json '%s/h3.json'", dir, dir);
    j = load_json("h3.json");
    ASSERT(strcmp(str(json_object_get(j, "gt_cache"), "status"), "recomputed") == 0);
    ASSERT_NEAR(num(j, "recall"), 1.0, 1e-9);
    json_decref(j);
    RUN_EXPECT(0, GEN_ARGS " --cache-dir '%s/c1' --json '%s/h4.json'", dir, dir);
    j = load_json("h4.json");
    ASSERT(strcmp(str(json_object_get(j, "gt_cache"), "status"), "hit") == 0);
    json_decref(j);
    free(orig);
}

/* ------------------------------------------------------------------ 3: readers */

static void test_corrupt_readers(void)
{
    /* truncated .fvecs: 3 bytes short of the last record */
    char p[1024];
    unsigned char *buf = NULL;
    path_of(p, sizeof p, "base.fvecs");
    long n = slurp(p, &buf);
    ASSERT(n > 10);
    write_bytes("trunc.fvecs", buf, (size_t)n - 3);
    free(buf);
    RUN_EXPECT(1, "bench --base '%s/trunc.fvecs' --query '%s/query.fvecs' --no-peers", dir, dir);
    ASSERT(strstr(err_buf, "trunc.fvecs") != NULL);
    ASSERT(strstr(err_buf, "truncated") != NULL);

    /* .npy whose header dict lacks the shape */
    static const unsigned char magic[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 54, 0 };
    char npy[64 + 16];
    memcpy(npy, magic, sizeof magic);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shapx': (2, 8), }";
    memset(npy + 10, ' ', 54);
    memcpy(npy + 10, dict, strlen(dict) < 53 ? strlen(dict) : 53);
    npy[63] = '\n';
    write_bytes("bad.npy", npy, 64);
    RUN_EXPECT(1, "bench --base '%s/bad.npy' --query '%s/query.fvecs' --no-peers", dir, dir);
    ASSERT(strstr(err_buf, "bad.npy") != NULL);
    /* not NumPy at all */
    write_bytes("junk.npy", "hello, world, not numpy", 23);
    RUN_EXPECT(1, "bench --base '%s/junk.npy' --query '%s/query.fvecs' --no-peers", dir, dir);
    ASSERT(strstr(err_buf, "junk.npy") != NULL);

    /* a text file named .hdf5 */
    write_bytes("fake.hdf5", "not an hdf5 file at all", 23);
    RUN_EXPECT(1, "bench --base '%s/fake.hdf5' --no-peers", dir);
    ASSERT(strstr(err_buf, "fake.hdf5") != NULL);
    ASSERT(strstr(err_buf, "HDF5") != NULL);
}

#ifdef SX_HAVE_HDF5
static void h5_put(hid_t f,
                   const char *name,
                   hid_t mem_type,
                   hid_t file_type,
                   size_t rows,
                   size_t cols,
                   const void *data)
{
    hsize_t dims[2] = { rows, cols };
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(f, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(d >= 0);
    ASSERT(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
}

static void h5_attr(hid_t f, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(value));
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(a >= 0);
    ASSERT(H5Awrite(a, t, value) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

/* Exact top-k (squared L2) among base rows [lo, NB) for query q; ids ascending by distance. */
static void brute_topk(size_t q, size_t lo, size_t k, int32_t *ids, float *dist)
{
    double best_d[100];
    int32_t best_i[100];
    size_t n = 0;
    for (size_t r = lo; r < NB; r++) {
        double d = 0;
        for (size_t j = 0; j < DIM; j++) {
            double t = (double)base_v[r * DIM + j] - (double)query_v[q * DIM + j];
            d += t * t;
        }
        size_t pos = n < k ? n : k;
        while (pos > 0 && best_d[pos - 1] > d)
            pos--;
        if (pos >= k)
            continue;
        size_t last = n < k ? n : k - 1;
        for (size_t m = last; m > pos; m--) {
            best_d[m] = best_d[m - 1];
            best_i[m] = best_i[m - 1];
        }
        best_d[pos] = d;
        best_i[pos] = (int32_t)r;
        if (n < k)
            n++;
    }
    for (size_t m = 0; m < k; m++) {
        ids[m] = best_i[m];
        if (dist != NULL)
            dist[m] = (float)sqrt(best_d[m]);
    }
}

static void test_hdf5(void)
{
    char p[1024];
    /* a valid ann-benchmarks file: train (float64, converted by the reader), test, neighbors
     * (int64), distances (Euclidean), attribute distance = euclidean */
    path_of(p, sizeof p, "ann.hdf5");
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT(f >= 0);
    double *train = malloc(sizeof(double) * NB * DIM);
    ASSERT(train != NULL);
    for (size_t j = 0; j < (size_t)NB * DIM; j++)
        train[j] = (double)base_v[j];
    h5_put(f, "train", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, NB, DIM, train);
    free(train);
    h5_put(f, "test", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, NQ, DIM, query_v);
    int64_t nb[NQ * 10];
    int32_t ids[10];
    float dist[NQ * 10];
    for (size_t q = 0; q < NQ; q++) {
        brute_topk(q, 0, 10, ids, dist + q * 10);
        for (size_t m = 0; m < 10; m++)
            nb[q * 10 + m] = ids[m];
    }
    h5_put(f, "neighbors", H5T_NATIVE_INT64, H5T_STD_I64LE, NQ, 10, nb);
    h5_put(f, "distances", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, NQ, 10, dist);
    h5_attr(f, "distance", "euclidean");
    H5Fclose(f);
    RUN_EXPECT(0, "bench --base '%s/ann.hdf5' --index flat --no-peers --json '%s/ann.json'", dir,
               dir);
    json_t *j = load_json("ann.json");
    const json_t *ds = json_object_get(j, "dataset");
    ASSERT(strcmp(str(ds, "kind"), "hdf5") == 0);
    ASSERT(strcmp(str(ds, "gt_source"), "file") == 0);
    ASSERT(strstr(str(ds, "gt"), "ann.hdf5:neighbors") != NULL);
    ASSERT(strcmp(str(j, "recall_kind"), "distance-threshold") == 0);
    ASSERT_EQ(num(j, "n"), NB);
    ASSERT_EQ(num(j, "nq"), NQ);
    ASSERT_NEAR(num(json_array_get(json_object_get(j, "runs"), 0), "recall"), 1.0, 1e-9);
    /* the ground truth has 10 columns: the cases run at k = 10 */
    ASSERT_EQ(num(json_array_get(json_object_get(j, "cases"), 0), "k"), 10);
    json_decref(j);

    /* missing `test`: a clear error naming the dataset */
    path_of(p, sizeof p, "notest.hdf5");
    f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    h5_put(f, "train", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, NB, DIM, base_v);
    H5Fclose(f);
    RUN_EXPECT(1, "bench --base '%s/notest.hdf5' --no-peers", dir);
    ASSERT(strstr(err_buf, "no dataset 'test'") != NULL);
    ASSERT(strstr(err_buf, "notest.hdf5") != NULL);

    /* an HDF5 file cut in half */
    unsigned char *buf = NULL;
    path_of(p, sizeof p, "ann.hdf5");
    long n = slurp(p, &buf);
    ASSERT(n > 100);
    write_bytes("cut.hdf5", buf, (size_t)n / 2);
    free(buf);
    RUN_EXPECT(1, "bench --base '%s/cut.hdf5' --no-peers", dir);
    ASSERT(strstr(err_buf, "cut.hdf5") != NULL);
}
#else
static void test_hdf5(void)
{
    fprintf(stderr, "built without libhdf5: HDF5 checks skipped\n");
}
#endif

/* ------------------------------------------------------------------ 4: filter ground truth */

static void test_filter_gt(void)
{
    RUN_EXPECT(0,
               "bench --base '%s/base.fvecs' --query '%s/query.fvecs' --index flat --no-peers "
               "--filter-rate 0.5,0.9 --cache-dir '%s/cf' --json '%s/f.json'",
               dir, dir, dir, dir);
    json_t *j = load_json("f.json");
    const json_t *cases = json_object_get(j, "cases");
    ASSERT_EQ(json_array_size(cases), 3);
    const json_t *c1 = json_array_get(cases, 1), *c2 = json_array_get(cases, 2);
    ASSERT(strcmp(str(c1, "type"), "filter") == 0);
    ASSERT(strcmp(str(c1, "filter"), "label >= 200") == 0);
    ASSERT_EQ(num(c1, "filter_kept_rows"), 200);
    ASSERT(strcmp(str(c2, "filter"), "label >= 360") == 0);
    ASSERT_EQ(num(c2, "filter_kept_rows"), 40);
    ASSERT_EQ(num(c2, "k"), 40); /* fewer rows pass than 100 */
    ASSERT_NEAR(num(c1, "recall"), 1.0, 1e-9);
    ASSERT_NEAR(num(c2, "recall"), 1.0, 1e-9);
    ASSERT_NEAR(num(c1, "ndcg"), 1.0, 1e-9);
    /* the cached filtered ground truth equals a brute force over the rows kept */
    const char *stem = str(json_object_get(j, "gt_cache"), "path");

    static const struct {
        const char *suffix;
        size_t lo, k;
    } want[] = { { "-f0.5-gt.ivecs", 200, 100 }, { "-f0.9-gt.ivecs", 360, 40 } };

    for (size_t w = 0; w < 2; w++) {
        char p[1200];
        snprintf(p, sizeof p, "%s%s", stem, want[w].suffix);
        unsigned char *buf = NULL;
        long n = slurp(p, &buf);
        size_t rec = 4 + 4 * want[w].k;
        if (n != (long)(NQ * rec))
            FAILF("%s: %ld bytes, want %zu", p, n, NQ * rec);
        for (size_t q = 0; q < NQ; q++) {
            int32_t ids[100];
            brute_topk(q, want[w].lo, want[w].k, ids, NULL);
            for (size_t m = 0; m < want[w].k; m++) {
                const unsigned char *b = buf + q * rec + 4 + 4 * m;
                int32_t got = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 |
                                        (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
                if (got != ids[m])
                    FAILF("%s: query %zu rank %zu: id %d, brute force %d", p, q, m, (int)got,
                          (int)ids[m]);
                ASSERT((size_t)got >= want[w].lo);
            }
        }
        free(buf);
    }
    json_decref(j);
}

/* ------------------------------------------------------------------ 5: JSON keys, levels */

static void test_json_keys(void)
{
    RUN_EXPECT(0,
               "bench --base '%s/base.fvecs' --query '%s/query.fvecs' --index hnsw --no-peers "
               "--search-param ef=10,40 --concurrency 1,2 --duration 1 --interval 1 "
               "--stream-rate 400 --stream-stages 4 --stream-concurrency 2 --json '%s/k.json'",
               dir, dir, dir);
    /* Go-benchmark blocks on stdout */
    ASSERT(strstr(out_buf, "Name      #   reqs      # fails  |       Avg") != NULL);
    ASSERT(strstr(out_buf, "search run finished, concurrency: 2") != NULL);
    ASSERT(strstr(out_buf, "headline:") != NULL);
    json_t *j = load_json("k.json");
    ASSERT_EQ(num(j, "schema_version"), 2);
    double ins = num(j, "insert_duration"), opt = num(j, "optimize_duration");
    ASSERT(ins > 0 && opt > 0);
    ASSERT_NEAR(num(j, "load_duration"), ins + opt, 1e-3 * (ins + opt) + 1e-6);
    ASSERT_NEAR(num(j, "insert_duration"), num(j, "insert_s"), 1e-3 * ins + 1e-6);
    double rec = num(j, "recall"), nd = num(j, "ndcg");
    ASSERT(rec > 0.5 && rec <= 1.0);
    ASSERT(nd > 0.5 && nd <= 1.0);
    double p99 = num(j, "serial_latency_p99"), p95 = num(j, "serial_latency_p95");
    ASSERT(p99 > 0 && p99 < 1.0 && p95 <= p99); /* seconds */
    ASSERT(num(j, "qps") > 0);
    ASSERT(strcmp(str(j, "qps_source"), "concurrency") == 0);
    ASSERT(strcmp(str(j, "build_device"), "cpu") == 0);
    const json_t *cn = json_object_get(j, "conc_num_list");
    ASSERT_EQ(json_array_size(cn), 2);
    ASSERT_EQ(json_integer_value(json_array_get(cn, 0)), 1);
    ASSERT_EQ(json_integer_value(json_array_get(cn, 1)), 2);
    static const char *const lists[] = { "conc_qps_list", "conc_latency_p99_list",
                                         "conc_latency_p95_list", "conc_latency_avg_list" };
    for (size_t l = 0; l < 4; l++) {
        const json_t *a = json_object_get(j, lists[l]);
        ASSERT_EQ(json_array_size(a), 2);
        for (size_t m = 0; m < 2; m++)
            ASSERT(json_number_value(json_array_get(a, m)) > 0);
    }
    /* the max over levels */
    double q0 = json_number_value(json_array_get(json_object_get(j, "conc_qps_list"), 0));
    double q1 = json_number_value(json_array_get(json_object_get(j, "conc_qps_list"), 1));
    ASSERT_NEAR(num(j, "qps"), q0 > q1 ? q0 : q1, 1e-6 * (q0 + q1));
    /* runs carry the schema-2 fields */
    const json_t *r0 = json_array_get(json_object_get(j, "runs"), 0);
    ASSERT(num(r0, "p95_ms") <= num(r0, "p99_ms"));
    ASSERT(num(r0, "ndcg") > 0);
    /* cases: performance (levels) then streaming (stages) */
    const json_t *cases = json_object_get(j, "cases");
    ASSERT_EQ(json_array_size(cases), 2);
    const json_t *perf = json_array_get(cases, 0);
    ASSERT(strcmp(str(perf, "name"), "performance") == 0);
    ASSERT_EQ(num(perf, "k"), 100);
    double r10 = num(perf, "recall_at_10"), r100 = num(perf, "recall_at_100");
    ASSERT(r10 > 0.5 && r10 <= 1.0 && r100 > 0.5 && r100 <= 1.0);
    ASSERT_NEAR(r100, rec, 1e-12);
    ASSERT(num(perf, "ndcg_at_10") > 0.5);
    const json_t *ser = json_object_get(perf, "serial");
    ASSERT_EQ(num(ser, "nq"), NQ);
    const json_t *lat = json_object_get(ser, "latency_ms");
    ASSERT(num(lat, "p50") <= num(lat, "p95") && num(lat, "p95") <= num(lat, "p99"));
    ASSERT_NEAR(num(lat, "p99") / 1e3, p99, 1e-9);
    const json_t *levels = json_object_get(json_object_get(perf, "concurrency"), "levels");
    ASSERT_EQ(json_array_size(levels), 2);
    for (size_t m = 0; m < 2; m++) {
        const json_t *lv = json_array_get(levels, m);
        ASSERT_EQ(num(lv, "concurrency"), m + 1);
        ASSERT(num(lv, "requests") > 0);
        ASSERT_EQ(num(lv, "failures"), 0);
        ASSERT(num(lv, "elapsed_s") >= 0.9);
        ASSERT(num(lv, "recall") > 0.5);
        const json_t *l2 = json_object_get(lv, "latency_ms");
        ASSERT(num(l2, "p50") <= num(l2, "p99") && num(l2, "min") <= num(l2, "max"));
    }
    const json_t *st = json_array_get(cases, 1);
    ASSERT(strcmp(str(st, "type"), "streaming") == 0);
    const json_t *stages = json_object_get(json_object_get(st, "streaming"), "stages");
    ASSERT_EQ(json_array_size(stages), 4);
    double prev_rows = 0;
    for (size_t m = 0; m < 4; m++) {
        const json_t *sg = json_array_get(stages, m);
        ASSERT_EQ(num(sg, "stage"), m + 1);
        ASSERT(num(sg, "rows") > prev_rows);
        prev_rows = num(sg, "rows");
        ASSERT(num(sg, "requests") > 0);
        ASSERT(num(sg, "recall") > 0.5 && num(sg, "recall") <= 1.0);
    }
    ASSERT_EQ(prev_rows, NB);
    json_decref(j);
    /* usage errors */
    RUN_EXPECT(2, "bench --synthetic 100,8 --filter-rate 1.5");
    RUN_EXPECT(2, "bench --synthetic 100,8 --generate spiral");
    RUN_EXPECT(2, "bench --case gen-7-7");
    RUN_EXPECT(2, "bench --base '%s/base.fvecs' --query '%s/query.fvecs' --generate cosine", dir,
               dir);
}

int main(void)
{
    bin = getenv("SX_SEXTANT_BIN");
    if (bin == NULL || bin[0] == '\0') {
        printf("SX_SEXTANT_BIN not set: skipped (run through ctest)\n");
        return 77;
    }
    RUN(setup);
    if (h_fail > 0)
        return TEST_DONE();
    RUN(test_generated_deterministic);
    RUN(test_gt_cache);
    RUN(test_corrupt_readers);
    RUN(test_hdf5);
    RUN(test_filter_gt);
    RUN(test_json_keys);
    if (h_fail == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    return TEST_DONE();
}
