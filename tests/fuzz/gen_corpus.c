/*
 * gen_corpus.c: writes the seed corpora of the fuzz harnesses (tests/fuzz/corpus/<harness>/seed-*)
 * with the real writers, so the seeds are valid files the fuzzers then mutate:
 *   fuzz_filter      hand-written filter expressions (every operator family of expr.h)
 *   fuzz_rest_json   route byte + request body (fuzz_rest_common.h), for the main routes
 *   fuzz_wal         mode 0: WAL files made by sx__wal_append (also a torn one); mode 1: the
 *                    records of a real collection's WAL after insert / upsert / delete batches
 *   fuzz_manifest    MANIFESTs written by the engine (with segments, deletes and an index) and
 *                    by sx__manifest_write
 *   fuzz_segment     segment, delete and index files for segment 1, FZ_N rows, the fixture schema
 *   fuzz_index_load  every index family built on the fixed vectors and serialized
 * Usage: fuzz_gen_corpus OUT_DIR (normally tests/fuzz/corpus). Run by hand when a format changes;
 * its output is committed. Exit status 1 when a seed could not be made.
 */
#include "engine/expr.h"
#include "fuzz_common.h"
#include "fuzz_rest_common.h"
#include "index/index.h"
#include "storage/manifest.h"
#include "storage/segfile.h"
#include "storage/wal.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/buf.h"
#include "util/err.h"

static const char *g_out;
static char g_tmp[512];
static int g_fail;

static void put_seed(const char *harness, const char *name, const void *data, size_t n)
{
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/%s", g_out, harness);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    if (n > 64 * 1024)
        fprintf(stderr, "warning: %s is %zu bytes\n", path, n);
    if (!fz_write_file(path, data, n)) {
        fprintf(stderr, "cannot write %s\n", path);
        g_fail = 1;
    }
}

static void
put_seed_prefixed(const char *harness, const char *name, uint8_t b0, const void *data, size_t n)
{
    uint8_t *buf = malloc(n + 1);
    buf[0] = b0;
    memcpy(buf + 1, data, n);
    put_seed(harness, name, buf, n + 1);
    free(buf);
}

static void put_file_seed(const char *harness, const char *name, const char *path, int prefix)
{
    size_t n = 0;
    uint8_t *d = fz_read_file(path, &n);
    if (!d) {
        fprintf(stderr, "cannot read %s\n", path);
        g_fail = 1;
        return;
    }
    if (prefix >= 0)
        put_seed_prefixed(harness, name, (uint8_t)prefix, d, n);
    else
        put_seed(harness, name, d, n);
    free(d);
}

static void fail(const char *what, sx_status st)
{
    fprintf(stderr, "gen_corpus: %s: %s: %s\n", what, sx_status_str(st), sx_errmsg());
    g_fail = 1;
}

/* ------------------------------------------------------------------ filter */

static void gen_filter(void)
{
    static const char *const f[] = {
        "age > 18",
        "age >= 18 and score < 0.5 or not flag",
        "1 < age < 10 && name like \"a%\"",
        "id in [1, 2, 3] || color not in ['red', \"green\"]",
        "name like '%b_'",
        "(age + 2) * 3 % 5 == 1 and score / 2.0 != -1e10",
        "id == 42",
        "color IN ['red']",
        "flag == true and flag != False",
        "age is not null",
        "0x1F == age or 0b101 <= id or 017 > age",
        "name == \"caf\\u00e9\\n\\t\\\"x\\\"\"",
        "!(score >= 1.5e300) && -age < 3",
        "10 >= age > 1 and NOT (id <= -9223372036854775808)",
        "name like \"%\" or color like \"r%d\"",
    };
    char name[32];
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        snprintf(name, sizeof name, "%02zu", i);
        put_seed("fuzz_filter", name, f[i], strlen(f[i]));
    }
}

/* ------------------------------------------------------------------ REST */

static void gen_rest(void)
{
    static const char *const r[][2] = {
        { "collections/create",
          "{\"collectionName\":\"n1\",\"dimension\":3,\"metricType\":\"IP\"}" },
        { "collections/create",
          "{\"collectionName\":\"n2\",\"schema\":{\"autoId\":true,\"fields\":[{\"fieldName\":"
          "\"id\","
          "\"dataType\":\"Int64\",\"isPrimary\":true},{\"fieldName\":\"v\",\"dataType\":"
          "\"FloatVector\",\"elementTypeParams\":{\"dim\":2}},{\"fieldName\":\"t\",\"dataType\":"
          "\"VarChar\",\"elementTypeParams\":{\"max_length\":8}}]},\"indexParams\":[{\"fieldName\":"
          "\"v\",\"metricType\":\"L2\",\"indexType\":\"IVF_FLAT\",\"params\":{\"nlist\":2}}]}" },
        { "collections/describe", "{\"collectionName\":\"typed\"}" },
        { "collections/list", "{}" },
        { "collections/get_stats", "{\"collectionName\":\"quick\"}" },
        { "collections/rename", "{\"collectionName\":\"quick\",\"newCollectionName\":\"q2\"}" },
        { "collections/alter_properties",
          "{\"collectionName\":\"typed\",\"properties\":{\"collection.ttl.seconds\":60}}" },
        { "collections/release", "{\"collectionName\":\"quick\"}" },
        { "collections/flush", "{\"collectionName\":\"typed\"}" },
        { "collections/compact", "{\"collectionName\":\"typed\"}" },
        { "indexes/describe", "{\"collectionName\":\"typed\",\"indexName\":\"v_idx\"}" },
        { "indexes/drop", "{\"collectionName\":\"quick\",\"indexName\":\"vector\"}" },
        { "indexes/create",
          "{\"collectionName\":\"n1\",\"indexParams\":[{\"fieldName\":\"vector\",\"metricType\":"
          "\"IP\",\"indexType\":\"HNSW_SQ\",\"params\":{\"M\":4}}]}" },
        { "partitions/list", "{\"collectionName\":\"typed\"}" },
        { "partitions/create", "{\"collectionName\":\"typed\",\"partitionName\":\"p2\"}" },
        { "databases/create",
          "{\"dbName\":\"db2\",\"properties\":{\"database.max.collections\":3}}" },
        { "databases/describe", "{\"dbName\":\"default\"}" },
        { "entities/insert", "{\"collectionName\":\"quick\",\"data\":[{\"id\":10,\"vector\":[1,2,3,"
                             "4],\"x\":{\"y\":[1]}}]}" },
        { "entities/upsert",
          "{\"collectionName\":\"typed\",\"data\":[{\"pk\":\"a\",\"v\":[1,1,0,0],\"age\":1,"
          "\"score\":0.25,\"ok\":false,\"doc\":{}}]}" },
        { "entities/delete", "{\"collectionName\":\"typed\",\"filter\":\"age > 100\"}" },
        { "entities/query",
          "{\"collectionName\":\"typed\",\"filter\":\"pk in ['a','b'] and doc != ''\","
          "\"outputFields\":[\"*\"],\"limit\":3,\"offset\":1}" },
        { "entities/query", "{\"collectionName\":\"quick\",\"outputFields\":[\"count(*)\"]}" },
        { "entities/get",
          "{\"collectionName\":\"quick\",\"id\":[1,3],\"outputFields\":[\"color\"]}" },
        { "entities/search",
          "{\"collectionName\":\"quick\",\"data\":[[0.1,0.2,0.3,0.4]],\"annsField\":\"vector\","
          "\"limit\":3,\"outputFields\":[\"*\"],\"searchParams\":{\"params\":{\"ef\":16}}}" },
        { "entities/search",
          "{\"collectionName\":\"typed\",\"data\":[[1,0,0,0],[0,1,0,0]],\"filter\":\"age < 10\","
          "\"limit\":2,\"partitionNames\":[\"p1\"],\"searchParams\":{\"params\":{\"radius\":0.1,"
          "\"range_filter\":1.0}}}" },
        { "entities/hybrid_search",
          "{\"collectionName\":\"typed\",\"search\":[{\"data\":[[1,0,0,0]],\"annsField\":\"v\","
          "\"limit\":2},{\"data\":[[0,0,1,0]],\"annsField\":\"v\",\"limit\":2}],\"rerank\":{"
          "\"strategy\":\"rrf\",\"params\":{\"k\":10}},\"limit\":2}" },
    };
    fz_routes_init();
    char name[48];
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        int ri = fz_route_index(r[i][0]);
        if (ri < 0) {
            fprintf(stderr, "gen_corpus: no route %s\n", r[i][0]);
            g_fail = 1;
            continue;
        }
        snprintf(name, sizeof name, "%02zu", i);
        put_seed_prefixed("fuzz_rest_json", name, (uint8_t)ri, r[i][1], strlen(r[i][1]));
    }
}

/* ------------------------------------------------------------------ WAL, engine files */

static sx_status nop_replay(void *ctx, uint64_t lsn, uint8_t type, const void *p, size_t len)
{
    (void)ctx, (void)lsn, (void)type, (void)p, (void)len;
    return SX_OK;
}

static void gen_wal_raw(void)
{
    char dir[700], path[800];
    snprintf(dir, sizeof dir, "%s/walraw", g_tmp);
    sx__wal *w = NULL;
    sx_status st = sx__wal_open(dir, 0, false, false, nop_replay, NULL, &w);
    if (st != SX_OK)
        return fail("wal open", st);
    static const char big[300] = "payload";
    uint64_t lsn = 0;
    st = sx__wal_append(w, 1, "abc", 3, &lsn);
    if (st == SX_OK)
        st = sx__wal_append(w, 2, NULL, 0, &lsn);
    if (st == SX_OK)
        st = sx__wal_append(w, 3, big, sizeof big, &lsn);
    if (st == SX_OK)
        st = sx__wal_sync(w, lsn);
    sx_status cst = sx__wal_close(w);
    if (st != SX_OK || cst != SX_OK)
        return fail("wal append", st != SX_OK ? st : cst);
    snprintf(path, sizeof path, "%s/wal-00000000000000000001.log", dir);
    size_t n = 0;
    uint8_t *d = fz_read_file(path, &n);
    if (!d)
        return fail("wal read", SX_EIO);
    put_seed_prefixed("fuzz_wal", "raw-3rec", 0, d, n);
    put_seed_prefixed("fuzz_wal", "raw-torn", 0, d, n - 7);
    put_seed_prefixed("fuzz_wal", "raw-header", 0, d, SX__WAL_HEADER_BYTES);
    free(d);
}

static sx_status ingest(sx_collection *c, int64_t base, size_t n, bool upsert)
{
    int64_t id[8], age[8];
    double score[8];
    bool flag[8];
    const char *name[8];
    float vec[8 * FZ_DIM];
    static const char *const names[] = { "alice", "", "b%", "caf\xc3\xa9" };
    for (size_t i = 0; i < n; i++) {
        id[i] = base + (int64_t)i;
        age[i] = (int64_t)(i * 7) - 3;
        score[i] = (double)i / 3.0;
        flag[i] = i & 1;
        name[i] = names[i % 4];
        for (size_t j = 0; j < FZ_DIM; j++)
            vec[i * FZ_DIM + j] = (float)(i + j) * 0.25f;
    }
    sx_column cols[FZ_N_FIELDS] = {
        { "id", SX_FIELD_INT64, id },    { "vec", SX_FIELD_FLOAT_VECTOR, vec },
        { "age", SX_FIELD_INT64, age },  { "score", SX_FIELD_DOUBLE, score },
        { "flag", SX_FIELD_BOOL, flag }, { "name", SX_FIELD_VARCHAR, name },
    };
    sx_batch b = { .n_rows = n, .cols = cols, .n_cols = FZ_N_FIELDS };
    return upsert ? sx_upsert(c, &b) : sx_insert(c, &b, NULL);
}

/* Converts a WAL file into fuzz_wal's mode-1 record list. */
static void wal_to_seed(const char *path, const char *name)
{
    size_t n = 0;
    uint8_t *d = fz_read_file(path, &n);
    if (!d || n < SX__WAL_HEADER_BYTES) {
        free(d);
        return fail("engine wal read", SX_EIO);
    }
    sx__wbuf wb;
    sx__wbuf_init(&wb);
    size_t off = SX__WAL_HEADER_BYTES;
    while (off < n) {
        sx__wal_rec rec;
        size_t used = 0;
        if (sx__wal_record_decode(d + off, n - off, &rec, &used) != SX_OK)
            break;
        if (rec.len > 0xffff) {
            fprintf(stderr, "gen_corpus: record of %zu bytes skipped\n", rec.len);
        } else {
            sx__wbuf_u8(&wb, rec.type);
            sx__wbuf_u8(&wb, (uint8_t)(rec.len & 0xff));
            sx__wbuf_u8(&wb, (uint8_t)(rec.len >> 8));
            sx__wbuf_put(&wb, rec.payload, rec.len);
        }
        off += used;
    }
    if (sx__wbuf_ok(&wb) && wb.len > 0)
        put_seed_prefixed("fuzz_wal", name, 1, wb.data, wb.len);
    else
        fail("engine wal: no records", SX_ECORRUPT);
    sx__wbuf_fini(&wb);
    free(d);
}

static void gen_engine(void)
{
    char dbdir[700], path[900];
    snprintf(dbdir, sizeof dbdir, "%s/db", g_tmp);
    sx_db_options o = { .sync_mode = SX_SYNC_NONE, .build_threads = 1, .search_threads = 1 };
    sx_db *db = NULL;
    sx_collection *c = NULL;
    sx_collection_def d = fz_fixture_def("c");
    sx_status st = sx_db_open(dbdir, &o, &db);
    if (st == SX_OK)
        st = sx_collection_create(db, &d);
    if (st == SX_OK)
        st = sx_collection_open(db, "c", &c);
    if (st != SX_OK) {
        sx_db_close(db);
        return fail("engine open", st);
    }
    /* WAL: insert, upsert, delete by key, delete by filter */
    st = ingest(c, 1, 4, false);
    if (st == SX_OK)
        st = ingest(c, 3, 3, true);
    int64_t del[2] = { 1, 99 };
    sx_keys keys = { .n = 2, .ints = del };
    if (st == SX_OK)
        st = sx_delete(c, &keys, NULL);
    if (st == SX_OK)
        st = sx_delete_where(c, "name like \"b%\"", NULL);
    if (st != SX_OK)
        fail("engine ingest", st);
    snprintf(path, sizeof path, "%s/collections/c/wal/wal-00000000000000000001.log", dbdir);
    wal_to_seed(path, "engine-ops");

    /* MANIFEST after a flush (segments and delete files), then with an index */
    st = sx_flush(c);
    if (st != SX_OK)
        fail("flush", st);
    snprintf(path, sizeof path, "%s/collections/c/MANIFEST", dbdir);
    put_file_seed("fuzz_manifest", "engine-flushed", path, -1);
    int64_t del2[1] = { 4 };
    keys = (sx_keys){ .n = 1, .ints = del2 };
    if (sx_delete(c, &keys, NULL) != SX_OK || ingest(c, 20, 2, false) != SX_OK ||
        sx_flush(c) != SX_OK)
        fail("second flush", SX_EIO);
    sx_param ip[2] = { { "M", "8" }, { "efConstruction", "40" } };
    st = sx_index_create(c, "HNSW", ip, 2);
    if (st != SX_OK)
        fail("index create", st);
    put_file_seed("fuzz_manifest", "engine-index", path, -1);
    sx_collection_release(c);
    sx_db_close(db);
}

static void gen_manifest_direct(void)
{
    sx__manifest m;
    memset(&m, 0, sizeof m);
    m.generation = 7;
    m.name = "m";
    m.n_fields = FZ_N_FIELDS;
    m.fields = (sx_field_def *)fz_fields;
    for (size_t f = 0; f < FZ_N_FIELDS; f++)
        m.n_vec += fz_fields[f].type == SX_FIELD_FLOAT_VECTOR;
    m.vec[0].metric = SX_METRIC_COSINE;
    m.checkpoint_lsn = 12;
    m.next_auto_id = 1;
    m.next_seg_id = 3;
    sx__mseg segs[2] = { { 1, 10, 0 }, { 2, 5, 3 } };
    m.n_segs = 2;
    m.segs = segs;
    char path[700];
    snprintf(path, sizeof path, "%s/MANIFEST.direct", g_tmp);
    sx_status st = sx__manifest_write(path, &m);
    if (st != SX_OK)
        return fail("manifest write", st);
    put_file_seed("fuzz_manifest", "direct", path, -1);
    /* version 3: a second vector field with its own metric and index */
    sx_field_def more[FZ_N_FIELDS + 1];
    memcpy(more, fz_fields, sizeof fz_fields);
    more[FZ_N_FIELDS] = (sx_field_def){ "v2", SX_FIELD_FLOAT_VECTOR, false, false, 3, 0, false };
    m.fields = more;
    m.n_fields = FZ_N_FIELDS + 1;
    sx_param hp[2] = { { "M", "8" }, { "efConstruction", "40" } };
    m.vec[m.n_vec].metric = SX_METRIC_IP;
    m.vec[m.n_vec].index_type = "HNSW";
    m.vec[m.n_vec].index_params = hp;
    m.vec[m.n_vec].n_index_params = 2;
    m.n_vec++;
    snprintf(path, sizeof path, "%s/MANIFEST.direct-v3", g_tmp);
    st = sx__manifest_write(path, &m);
    if (st != SX_OK)
        return fail("manifest write", st);
    put_file_seed("fuzz_manifest", "direct-v3", path, -1);
}

/* ------------------------------------------------------------------ segment files */

static void gen_segment(void)
{
    int64_t id[FZ_N], age[FZ_N];
    double score[FZ_N];
    bool flag[FZ_N];
    char *name[FZ_N];
    float *vec = sx__malloc_aligned(sizeof(float) * FZ_N * FZ_DIM);
    static char strs[FZ_N][8];
    fz_fixed_vectors(vec);
    for (size_t i = 0; i < FZ_N; i++) {
        id[i] = (int64_t)i * 3;
        age[i] = -(int64_t)i;
        score[i] = (double)i * 0.5;
        flag[i] = i % 3 == 0;
        snprintf(strs[i], sizeof strs[i], "n%zu", i % 5 ? i : 0);
        name[i] = i % 7 ? strs[i] : "";
    }
    sx__segcol cols[FZ_N_FIELDS];
    void *data[FZ_N_FIELDS] = { id, vec, age, score, flag, name };
    for (size_t i = 0; i < FZ_N_FIELDS; i++)
        cols[i] = (sx__segcol){ .name = (char *)fz_fields[i].name,
                                .type = fz_fields[i].type,
                                .dim = fz_fields[i].dim,
                                .data = data[i],
                                .is_primary = fz_fields[i].is_primary };
    char path[700];
    snprintf(path, sizeof path, "%s/seg.sxs", g_tmp);
    /* format version 3: a key block on the (sorted) INT64 primary key */
    sx_status st = sx__segfile_write(path, 1, FZ_N, cols, FZ_N_FIELDS);
    if (st == SX_OK)
        put_file_seed("fuzz_segment", "seg", path, -1);
    else
        fail("segfile write", st);
    /* a segment of one row */
    st = sx__segfile_write(path, 1, 1, cols, FZ_N_FIELDS);
    if (st == SX_OK)
        put_file_seed("fuzz_segment", "seg-1row", path, -1);
    /* unsorted keys with duplicates (rows and keys arrays in the key block) */
    for (size_t i = 0; i < FZ_N; i++)
        id[i] = (int64_t)((i * 37) % 23) - 5;
    st = sx__segfile_write(path, 1, FZ_N, cols, FZ_N_FIELDS);
    if (st == SX_OK)
        put_file_seed("fuzz_segment", "seg-unsorted", path, -1);
    /* the key block on the VARCHAR column (rows array only) */
    for (size_t i = 0; i < FZ_N_FIELDS; i++)
        cols[i].is_primary = cols[i].type == SX_FIELD_VARCHAR;
    st = sx__segfile_write(path, 1, FZ_N, cols, FZ_N_FIELDS);
    if (st == SX_OK)
        put_file_seed("fuzz_segment", "seg-strkey", path, -1);
    /* no key block column (a segment writer that flags none) */
    for (size_t i = 0; i < FZ_N_FIELDS; i++)
        cols[i].is_primary = false;
    st = sx__segfile_write(path, 1, FZ_N, cols, FZ_N_FIELDS);
    if (st == SX_OK)
        put_file_seed("fuzz_segment", "seg-nokey", path, -1);
    /* nullable age, flag and name with NULL rows (version 3 bitmaps), the key block on id */
    uint64_t nulls_age[1] = { 0x8000000000000005ull }, nulls_flag[1] = { 0xF0 },
             nulls_name[1] = { 0 };
    for (size_t i = 0; i < FZ_N_FIELDS; i++) {
        cols[i].is_primary = fz_fields[i].is_primary;
        cols[i].nullable = fz_fields[i].type == SX_FIELD_BOOL ||
                           fz_fields[i].type == SX_FIELD_VARCHAR ||
                           strcmp(cols[i].name, "age") == 0;
    }
    cols[2].nulls = nulls_age;
    cols[4].nulls = nulls_flag;
    cols[5].nulls = nulls_name;
    st = sx__segfile_write(path, 1, FZ_N, cols, FZ_N_FIELDS);
    if (st == SX_OK)
        put_file_seed("fuzz_segment", "seg-nullable", path, -1);
    for (size_t i = 0; i < FZ_N_FIELDS; i++) {
        cols[i].nullable = false;
        cols[i].nulls = NULL;
    }

    uint64_t bits[(FZ_N + 63) / 64] = { 0 };
    sx__bits_set(bits, 0);
    sx__bits_set(bits, FZ_N - 1);
    snprintf(path, sizeof path, "%s/seg.del", g_tmp);
    st = sx__delfile_write(path, 1, FZ_N, bits);
    if (st == SX_OK)
        put_file_seed("fuzz_segment", "del", path, -1);
    else
        fail("delfile write", st);

    /* index file: a real HNSW serialization */
    sx_param p[2] = { { "M", "8" }, { "efConstruction", "40" } };
    sx__build_ctx bc = { .threads = 1, .seed = 1 };
    sx__index *idx = NULL;
    st = sx__hnsw_index_ops.build(p, 2, vec, FZ_N, FZ_DIM, SX_METRIC_L2, &bc, &idx);
    if (st == SX_OK) {
        sx__wbuf w;
        sx__wbuf_init(&w);
        st = sx__hnsw_index_ops.serialize(idx, &w);
        snprintf(path, sizeof path, "%s/seg.idx", g_tmp);
        if (st == SX_OK)
            st = sx__idxfile_write(path, "HNSW", "M=8,efConstruction=40", FZ_N, FZ_DIM, w.data,
                                   w.len);
        if (st == SX_OK)
            put_file_seed("fuzz_segment", "idx", path, -1);
        sx__wbuf_fini(&w);
        sx__hnsw_index_ops.free(idx);
    }
    if (st != SX_OK)
        fail("idxfile", st);
    sx__free_aligned(vec);
}

/* ------------------------------------------------------------------ index blobs */

static void gen_index(void)
{
    static float vec[FZ_N * FZ_DIM];
    fz_fixed_vectors(vec);

    static const struct {
        uint8_t sel;
        const char *name;
        const sx__index_ops *ops;
        sx_param p[4];
        size_t np;
        sx_metric metric;
    } k[] = {
        /* One index per entry: clang-format would put each member of a two-line entry on a
         * line of its own. */
        /* clang-format off */
        { 0, "flat", &sx__flat_index_ops, { { NULL, NULL } }, 0, SX_METRIC_L2 },
        { 1, "hnsw", &sx__hnsw_index_ops, { { "M", "8" }, { "efConstruction", "40" } }, 2,
          SX_METRIC_L2 },
        { 1 | 8, "hnsw-ip", &sx__hnsw_index_ops, { { "M", "4" }, { "efConstruction", "16" } }, 2,
          SX_METRIC_IP },
        { 2, "ivf-flat", &sx__ivf_flat_index_ops, { { "nlist", "4" } }, 1, SX_METRIC_L2 },
        { 3, "ivf-sq8", &sx__ivf_sq8_index_ops, { { "nlist", "4" } }, 1, SX_METRIC_L2 },
        { 4, "ivf-pq", &sx__ivf_pq_index_ops, { { "nlist", "4" }, { "m", "4" }, { "nbits", "8" } },
          3, SX_METRIC_L2 },
        { 5 | 16, "hnsw-sq", &sx__hnsw_sq_index_ops,
          { { "M", "8" }, { "efConstruction", "40" }, { "refine", "true" } }, 3,
          SX_METRIC_COSINE },
        { 6, "diskann", &sx__diskann_index_ops,
          { { "max_degree", "16" }, { "search_list_size", "32" } }, 2, SX_METRIC_L2 },
        /* clang-format on */
    };

    char prefix[700];
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        snprintf(prefix, sizeof prefix, "%s/idx-%s", g_tmp, k[i].name);
        sx__build_ctx bc = { .threads = 1, .seed = 1, .file_prefix = prefix };
        sx__index *idx = NULL;
        sx_status st = k[i].ops->check_build_params(k[i].p, k[i].np);
        if (st == SX_OK)
            st = k[i].ops->build(k[i].p, k[i].np, vec, FZ_N, FZ_DIM, k[i].metric, &bc, &idx);
        if (st != SX_OK) {
            fail(k[i].name, st);
            continue;
        }
        sx__wbuf w;
        sx__wbuf_init(&w);
        st = k[i].ops->serialize(idx, &w);
        if (st != SX_OK || !sx__wbuf_ok(&w)) {
            fail(k[i].name, st);
        } else if (k[i].ops->load_files) {
            char path[800];
            snprintf(path, sizeof path, "%s.diskann", prefix);
            size_t fn = 0;
            uint8_t *file = fz_read_file(path, &fn);
            if (!file) {
                fail("diskann file", SX_EIO);
            } else {
                sx__wbuf s;
                sx__wbuf_init(&s);
                sx__wbuf_u32(&s, (uint32_t)w.len);
                sx__wbuf_put(&s, w.data, w.len);
                sx__wbuf_put(&s, file, fn);
                if (sx__wbuf_ok(&s))
                    put_seed_prefixed("fuzz_index_load", k[i].name, k[i].sel, s.data, s.len);
                sx__wbuf_fini(&s);
                free(file);
            }
        } else {
            put_seed_prefixed("fuzz_index_load", k[i].name, k[i].sel, w.data, w.len);
        }
        sx__wbuf_fini(&w);
        k[i].ops->free(idx);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    g_out = argv[1];
    mkdir(g_out, 0755);
    snprintf(g_tmp, sizeof g_tmp, "%s", fz_tmpdir("gen"));
    gen_filter();
    gen_rest();
    gen_wal_raw();
    gen_engine();
    gen_manifest_direct();
    gen_segment();
    gen_index();
    return g_fail;
}
