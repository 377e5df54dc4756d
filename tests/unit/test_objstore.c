/*
 * test_objstore.c: the object-store interface over the local-filesystem backend (file://, no
 * network) and the engine's store protocol (src/engine/store.c): flush uploads segments, delete
 * files, index files and the store manifest; a fresh data directory opens from the store alone
 * with identical count/get/search results; compaction and drops are reflected (GC after the
 * manifest); injected store failures (before and after the operation, i.e. lost responses) make
 * flush return SX_EREMOTE without losing an acknowledged row, the store's MANIFEST never names a
 * missing object, and a later flush catches up.
 * The store manifest is decoded here independently of the engine (FORMAT-SEGMENT.md layout).
 */
#include <sextant.h>
#include <sys/stat.h>

#include "harness.h"
#include "storage/objstore.h"
#include "util/alloc.h"

#define DIM 8

/* ---------------------------------------------------------------- store inspection */

typedef struct ment {
    char name[256], key[256];
    uint64_t size;
    uint8_t kind;
} ment;

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Decodes <root>/<coll>/MANIFEST; returns the number of entries (-1: absent). */
static int
read_store_manifest(const char *root, const char *coll, ment *out, int max, uint64_t *gen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/MANIFEST", root, coll);
    size_t len = 0;
    uint8_t *b = slurp(path, &len);
    if (!b)
        return -1;
    ASSERT(len > 32 && memcmp(b, "SXSTM001", 8) == 0);
    ASSERT_EQ(rd32(b + 8), 1);
    *gen = rd64(b + 12);
    size_t off = 20;
    uint32_t mlen = rd32(b + off);
    off += 4;
    ASSERT(memcmp(b + off, "SXMAN001", 8) == 0); /* the local manifest, embedded */
    off += mlen;
    uint32_t n = rd32(b + off);
    off += 4;
    ASSERT((int)n <= max);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = rd32(b + off);
        off += 4;
        snprintf(out[i].name, sizeof out[i].name, "%.*s", (int)l, (const char *)b + off);
        off += l;
        l = rd32(b + off);
        off += 4;
        snprintf(out[i].key, sizeof out[i].key, "%.*s", (int)l, (const char *)b + off);
        off += l;
        out[i].size = rd64(b + off);
        off += 8 + 4;
        out[i].kind = b[off++];
    }
    ASSERT_EQ(off + 4, len);
    free(b);
    return (int)n;
}

static bool file_has_size(const char *path, uint64_t size)
{
    struct stat sb;
    return stat(path, &sb) == 0 && (uint64_t)sb.st_size == size;
}

/* The store invariant: its MANIFEST (if any) names only objects present with the recorded size.
 * Returns the number of entries; *n_kind counts entries per kind. */
static int check_store(const char *root, const char *coll, int n_kind[3])
{
    static ment e[4096];
    uint64_t gen = 0;
    int n = read_store_manifest(root, coll, e, 4096, &gen);
    if (n_kind)
        n_kind[0] = n_kind[1] = n_kind[2] = 0;
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/%s", root, coll, e[i].key);
        if (!file_has_size(path, e[i].size))
            FAILF("store manifest names %s (%" PRIu64 " bytes) but the store lacks it", e[i].key,
                  e[i].size);
        if (n_kind)
            n_kind[e[i].kind]++;
    }
    return n;
}

/* Objects in <root>/<coll>/ other than MANIFEST that the manifest does not name. */
static int unnamed_objects(const char *root, const char *coll)
{
    static ment e[4096];
    uint64_t gen = 0;
    int n = read_store_manifest(root, coll, e, 4096, &gen);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls '%s/%s'", root, coll);
    FILE *p = popen(cmd, "r");
    char line[512];
    int extra = 0;
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, "MANIFEST") == 0 || strstr(line, ".tmp"))
            continue;
        bool named = false;
        for (int i = 0; i < n; i++)
            named = named || strcmp(e[i].key, line) == 0;
        extra += !named;
    }
    if (p)
        pclose(p);
    return extra;
}

/* ---------------------------------------------------------------- data helpers */

static sx_db *open_store_db(const char *dir, const char *url)
{
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.segment_max_bytes = 1000 * DIM * 4; /* 1000-row segments */
    o.build_threads = 2;
    o.search_threads = 2;
    o.sync_mode = SX_SYNC_FULL;
    o.storage_url = url;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    return db;
}

static void create_coll(sx_db *db, const char *name)
{
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
        { "tag", SX_FIELD_VARCHAR, false, false, 0, 16 },
    };
    sx_collection_def d = { name, f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
}

static void row_vec(int64_t id, float *v)
{
    uint64_t s = (uint64_t)id * 0x9E3779B97F4A7C15ull + 1;
    for (int d = 0; d < DIM; d++)
        v[d] = test_randf(&s) * 10.0f;
}

static sx_status insert_rows(sx_collection *c, int64_t start, size_t n)
{
    int64_t *ids = malloc(n * 8);
    float *v = malloc(n * DIM * 4);
    const char **tags = malloc(n * sizeof(char *));
    static const char *names[] = { "a", "bb", "ccc" };
    for (size_t i = 0; i < n; i++) {
        ids[i] = start + (int64_t)i;
        row_vec(ids[i], v + i * DIM);
        tags[i] = names[ids[i] % 3];
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                         { "vec", SX_FIELD_FLOAT_VECTOR, v },
                         { "tag", SX_FIELD_VARCHAR, tags } };
    sx_batch b = { n, cols, 3 };
    sx_status st = sx_insert(c, &b, NULL);
    free(ids), free(v), free(tags);
    return st;
}

static void search(sx_collection *c, const float *qs, size_t nq, sx_rowset **rs)
{
    sx_search_req req = { 0 };
    req.queries = qs;
    req.nq = nq;
    req.k = 10;
    req.metric = -1;
    sx_param ef = { "ef", "400" };
    req.params = &ef;
    req.n_params = 1;
    ASSERT_OK(sx_search(c, &req, rs));
}

static void same_results(const sx_rowset *a, const sx_rowset *b)
{
    ASSERT_EQ(a->n_rows, b->n_rows);
    ASSERT_EQ(a->nq, b->nq);
    for (size_t i = 0; i < a->n_rows; i++) {
        ASSERT_EQ(((int64_t *)a->cols[0].data)[i], ((int64_t *)b->cols[0].data)[i]);
        ASSERT_NEAR(a->distances[i], b->distances[i], 1e-5);
    }
}

/* Exact top-10 by brute force over ids [0, n) minus deleted (deleted[id] true). */
static void exact_top(const float *q, int64_t n, const bool *deleted, int64_t *out)
{
    float best[10];
    for (int i = 0; i < 10; i++) {
        best[i] = 1e30f;
        out[i] = -1;
    }
    for (int64_t id = 0; id < n; id++) {
        if (deleted && deleted[id])
            continue;
        float v[DIM], d = 0;
        row_vec(id, v);
        for (int k = 0; k < DIM; k++)
            d += (v[k] - q[k]) * (v[k] - q[k]);
        if (d >= best[9])
            continue;
        int j = 9;
        while (j > 0 && best[j - 1] > d) {
            best[j] = best[j - 1];
            out[j] = out[j - 1];
            j--;
        }
        best[j] = d;
        out[j] = id;
    }
}

static char g_root[600], g_url[700];

static void fresh_store(const char *tag)
{
    snprintf(g_root, sizeof g_root, "%s", test_tmpdir(tag));
    snprintf(g_url, sizeof g_url, "file://%s", g_root);
}

/* ---------------------------------------------------------------- tests */

static void test_fs_backend(void)
{
    fresh_store("objfs");
    sx__objstore *o = NULL;
    ASSERT_STATUS(sx__objstore_open("file://relative/x", NULL, &o), SX_EINVAL);
    ASSERT_STATUS(sx__objstore_open("ftp://x", NULL, &o), SX_EINVAL);
    ASSERT_OK(sx__objstore_open(g_url, NULL, &o));
    ASSERT_OK(sx__objstore_put(o, "a/one", "hello world", 11));
    ASSERT_OK(sx__objstore_put(o, "a/two", "xy", 2));
    ASSERT_OK(sx__objstore_put(o, "b/three", "", 0));
    ASSERT_STATUS(sx__objstore_put(o, "../escape", "x", 1), SX_EINVAL);
    ASSERT_STATUS(sx__objstore_put(o, "/abs", "x", 1), SX_EINVAL);
    ASSERT_STATUS(sx__objstore_put(o, "a//b", "x", 1), SX_EINVAL);
    uint64_t sz = 0;
    ASSERT_OK(sx__objstore_head(o, "a/one", &sz));
    ASSERT_EQ(sz, 11);
    ASSERT_STATUS(sx__objstore_head(o, "a/none", &sz), SX_ENOTFOUND);
    char buf[8] = { 0 };
    ASSERT_OK(sx__objstore_get_range(o, "a/one", 6, 5, buf));
    ASSERT(memcmp(buf, "world", 5) == 0);
    ASSERT(sx__objstore_get_range(o, "a/one", 8, 5, buf) != SX_OK); /* past the end */
    void *d = NULL;
    size_t n = 0;
    ASSERT_OK(sx__objstore_get(o, "a/two", &d, &n));
    ASSERT_EQ(n, 2);
    ASSERT(memcmp(d, "xy", 2) == 0);
    sx__free(d);
    /* put_file / get_file round trip of a multi-chunk file */
    char src[700], dst[700];
    snprintf(src, sizeof src, "%s/../objfs_src.%d", g_root, (int)getpid());
    snprintf(dst, sizeof dst, "%s/../objfs_dst.%d", g_root, (int)getpid());
    FILE *f = fopen(src, "wb");
    for (int i = 0; i < (3 << 20) / 4; i++)
        fwrite(&i, 4, 1, f);
    fclose(f);
    ASSERT_OK(sx__objstore_put_file(o, "big/file", src));
    ASSERT_OK(sx__objstore_get_file(o, "big/file", dst));
    size_t l1 = 0, l2 = 0;
    uint8_t *b1 = slurp(src, &l1), *b2 = slurp(dst, &l2);
    ASSERT_EQ(l1, 3u << 20);
    ASSERT_EQ(l1, l2);
    ASSERT(memcmp(b1, b2, l1) == 0);
    free(b1), free(b2);
    unlink(src), unlink(dst);
    /* a leftover .tmp is not an object */
    char tmp[800];
    snprintf(tmp, sizeof tmp, "%s/a/partial.tmp", g_root);
    f = fopen(tmp, "wb");
    fclose(f);
    char **keys = NULL;
    uint64_t *sizes = NULL;
    ASSERT_OK(sx__objstore_list(o, "a/", &keys, &sizes, &n));
    ASSERT_EQ(n, 2);
    ASSERT(strcmp(keys[0], "a/one") == 0 && strcmp(keys[1], "a/two") == 0);
    ASSERT_EQ(sizes[0], 11);
    sx_strings_free(keys, n);
    sx__free(sizes);
    ASSERT_OK(sx__objstore_list(o, "", &keys, NULL, &n));
    ASSERT_EQ(n, 4);
    sx_strings_free(keys, n);
    ASSERT_OK(sx__objstore_del(o, "a/one"));
    ASSERT_OK(sx__objstore_del(o, "a/one")); /* absent: success */
    ASSERT_STATUS(sx__objstore_head(o, "a/one", &sz), SX_ENOTFOUND);
    /* injected faults: before (nothing stored) and after (stored, failure reported) */
    sx__objstore_fault_set(SX__OBJ_FAULT_PUT, 1, false, false);
    ASSERT_STATUS(sx__objstore_put(o, "f/before", "x", 1), SX_EREMOTE);
    ASSERT_STATUS(sx__objstore_head(o, "f/before", &sz), SX_ENOTFOUND);
    sx__objstore_fault_set(SX__OBJ_FAULT_PUT, 1, false, true);
    ASSERT_STATUS(sx__objstore_put(o, "f/after", "x", 1), SX_EREMOTE);
    ASSERT_OK(sx__objstore_head(o, "f/after", &sz));
    ASSERT_OK(sx__objstore_put(o, "f/ok", "x", 1)); /* one-shot */
    sx__objstore_fault_clear_all();
    sx__objstore_free(o);
}

/* ingest + index + deletes + flush; open elsewhere from the store alone: identical results */
static void test_open_from_store(void)
{
    fresh_store("objstore_rt");
    char a_dir[600], b_dir[600];
    snprintf(a_dir, sizeof a_dir, "%s", test_tmpdir("objstore_a"));
    snprintf(b_dir, sizeof b_dir, "%s", test_tmpdir("objstore_b"));
    sx_db *db = open_store_db(a_dir, g_url);
    create_coll(db, "docs");
    /* the empty collection is in the store at once */
    ASSERT_EQ(check_store(g_root, "docs", NULL), 0);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "docs", &c));
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    for (int b = 0; b < 5; b++)
        ASSERT_OK(insert_rows(c, b * 700, 700)); /* 3500 rows: 3 sealed segments + growing */
    int64_t dk[] = { 3, 500, 1999, 3400 };
    sx_keys keys = { 4, dk, NULL };
    ASSERT_OK(sx_delete(c, &keys, NULL));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 120000));
    ASSERT_OK(sx_db_sync(db));
    int kinds[3];
    int n = check_store(g_root, "docs", kinds);
    ASSERT(kinds[0] >= 4);         /* every sealed segment */
    ASSERT(kinds[1] >= 1);         /* delete files */
    ASSERT_EQ(kinds[2], kinds[0]); /* one HNSW index file per segment */
    ASSERT_EQ(n, kinds[0] + kinds[1] + kinds[2]);
    ASSERT_EQ(unnamed_objects(g_root, "docs"), 0);
    float qs[16 * DIM];
    uint64_t s = 77;
    for (int i = 0; i < 16 * DIM; i++)
        qs[i] = test_randf(&s) * 10.0f;
    sx_rowset *ra, *rb;
    search(c, qs, 16, &ra);
    sx_collection_release(c);
    sx_db_close(db);

    /* B: an empty data directory, the store only */
    db = open_store_db(b_dir, g_url);
    ASSERT_OK(sx_db_check(db));
    ASSERT_OK(sx_collection_open(db, "docs", &c));
    uint64_t cnt = 0;
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, 3500 - 4);
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT(strcmp(ii.type, "HNSW") == 0);
    ASSERT_OK(sx_index_wait(c, 120000));
    search(c, qs, 16, &rb);
    same_results(ra, rb);
    /* and both equal the exact answer (ef=400 on 1000-row graphs is exact here) */
    bool deleted[3500] = { false };
    for (int i = 0; i < 4; i++)
        deleted[dk[i]] = true;
    int hits = 0;
    for (int q = 0; q < 16; q++) {
        int64_t top[10];
        exact_top(qs + q * DIM, 3500, deleted, top);
        for (int i = 0; i < 10; i++)
            hits += ((int64_t *)rb->cols[0].data)[q * 10 + i] == top[i];
    }
    ASSERT(hits >= 16 * 10 * 98 / 100);
    int64_t gk[] = { 2, 3, 3499 };
    sx_keys g = { 3, gk, NULL };
    const char *outs[] = { "vec", "tag" };
    sx_rowset *rs;
    ASSERT_OK(sx_get(c, &g, outs, 2, &rs));
    ASSERT_EQ(rs->n_rows, 2); /* 3 was deleted */
    ASSERT_EQ(((int64_t *)rs->cols[0].data)[1], 3499);
    float v[DIM];
    row_vec(3499, v);
    ASSERT(memcmp((float *)rs->cols[1].data + DIM, v, sizeof v) == 0);
    ASSERT(strcmp(((char **)rs->cols[2].data)[1], "bb") == 0); /* 3499 % 3 == 1 */
    sx_rowset_free(rs);
    sx_rowset_free(ra);
    sx_rowset_free(rb);

    /* B continues: compaction rewrites the segments with deletes; GC removes the old ones */
    int before = check_store(g_root, "docs", kinds);
    int seg_before = kinds[0];
    ASSERT(before > 0);
    ASSERT_OK(sx_compact(c));
    /* the builder indexes the new segments and uploads their index files after sx_compact
     * returns: between its object PUT and its manifest PUT an object is briefly unnamed */
    ASSERT_OK(sx_index_wait(c, 120000));
    ASSERT_OK(sx_db_sync(db));
    n = check_store(g_root, "docs", kinds);
    ASSERT_EQ(kinds[1], 0); /* compacted segments have no delete files */
    ASSERT_EQ(kinds[0], seg_before);
    ASSERT_EQ(unnamed_objects(g_root, "docs"), 0);
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, 3500 - 4);
    sx_collection_release(c);
    sx_db_close(db);
    /* the store still opens to the compacted state */
    snprintf(b_dir, sizeof b_dir, "%s", test_tmpdir("objstore_c"));
    db = open_store_db(b_dir, g_url);
    ASSERT_OK(sx_collection_open(db, "docs", &c));
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, 3500 - 4);
    sx_collection_release(c);
    /* drop deletes the collection's objects; it does not come back */
    ASSERT_OK(sx_collection_drop(db, "docs"));
    ASSERT_EQ(check_store(g_root, "docs", NULL), -1);
    sx_db_close(db);
    snprintf(b_dir, sizeof b_dir, "%s", test_tmpdir("objstore_d"));
    db = open_store_db(b_dir, g_url);
    ASSERT_STATUS(sx_collection_open(db, "docs", &c), SX_ENOTFOUND);
    sx_db_close(db);
}

/* Store failures at every put / delete of a flush, before and after the operation. */
static void test_store_faults(void)
{
    fresh_store("objstore_f");
    char a_dir[600];
    snprintf(a_dir, sizeof a_dir, "%s", test_tmpdir("objstore_fa"));
    sx_db *db = open_store_db(a_dir, g_url);
    create_coll(db, "t");
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "t", &c));
    int64_t next = 0;
    int failures = 0, successes = 0;
    for (int round = 0; round < 24; round++) {
        sx__objstore_fault_op op = round % 3 == 2 ? SX__OBJ_FAULT_DEL : SX__OBJ_FAULT_PUT;
        bool after = (round / 3) % 2 == 1;
        long countdown = 1 + round % 4;
        ASSERT_OK(insert_rows(c, next, 600)); /* acknowledged: WAL */
        next += 600;
        int64_t dk[] = { next - 1 - round, round };
        sx_keys keys = { 2, dk, NULL };
        uint64_t nd = 0;
        ASSERT_OK(sx_delete(c, &keys, &nd));
        sx__objstore_fault_set(op, countdown, round % 5 == 4, after);
        sx_status st = sx_flush(c);
        sx__objstore_fault_clear_all();
        if (st == SX_OK) {
            successes++;
        } else {
            ASSERT_EQ(st, SX_EREMOTE);
            ASSERT(strstr(sx_errmsg(), "object store") != NULL);
            ASSERT(strstr(sx_errmsg(), "next flush retries") != NULL);
            failures++;
        }
        check_store(g_root, "t", NULL); /* never names a missing object */
        uint64_t cnt = 0;
        ASSERT_OK(sx_count(c, NULL, &cnt));
        (void)cnt;
    }
    ASSERT(failures > 0);
    ASSERT(successes > 0);
    uint64_t want = 0;
    ASSERT_OK(sx_count(c, NULL, &want));
    /* faults in the listing and manifest read of a first sync: a fresh process */
    sx_collection_release(c);
    sx_db_close(db);
    sx__objstore_fault_set(SX__OBJ_FAULT_LIST, 1, true, false);
    sx_db *bad = NULL;
    sx_db_options o = { 0 };
    o.storage_url = g_url;
    char e_dir[600];
    snprintf(e_dir, sizeof e_dir, "%s", test_tmpdir("objstore_fe"));
    ASSERT_STATUS(sx_db_open(e_dir, &o, &bad), SX_EREMOTE); /* cannot list: refuses to open */
    sx__objstore_fault_clear_all();
    /* restart on the same directory: every acknowledged row is there (local MANIFEST + WAL) */
    db = open_store_db(a_dir, g_url);
    ASSERT_OK(sx_collection_open(db, "t", &c));
    uint64_t cnt = 0;
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, want);
    /* the store may be behind; a flush without faults catches up */
    sx__objstore_fault_set(SX__OBJ_FAULT_PUT, 1, true, false);
    ASSERT_STATUS(sx_flush(c), SX_EREMOTE);
    check_store(g_root, "t", NULL);
    sx__objstore_fault_clear_all();
    ASSERT_OK(sx_flush(c));
    ASSERT_EQ(unnamed_objects(g_root, "t"), 0);
    check_store(g_root, "t", NULL);
    sx_collection_release(c);
    /* a drop whose store delete fails is refused */
    sx__objstore_fault_set(SX__OBJ_FAULT_DEL, 1, false, false);
    ASSERT_STATUS(sx_collection_drop(db, "t"), SX_EREMOTE);
    sx__objstore_fault_clear_all();
    ASSERT_OK(sx_collection_open(db, "t", &c));
    sx_collection_release(c);
    sx_db_close(db);
    /* a fresh directory from the store has every acknowledged row */
    char f_dir[600];
    snprintf(f_dir, sizeof f_dir, "%s", test_tmpdir("objstore_ff"));
    db = open_store_db(f_dir, g_url);
    ASSERT_OK(sx_collection_open(db, "t", &c));
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, want);
    ASSERT_EQ(want, (uint64_t)next - 2 * 24);
    for (int64_t id = 0; id < next; id += 97) {
        sx_keys g = { 1, &id, NULL };
        sx_rowset *rs;
        ASSERT_OK(sx_get(c, &g, NULL, 0, &rs));
        bool is_deleted = false;
        for (int r = 0; r < 24; r++)
            is_deleted = is_deleted || id == r || id == 600 * (r + 1) - 1 - r;
        ASSERT_EQ(rs->n_rows, is_deleted ? 0 : 1);
        sx_rowset_free(rs);
    }
    sx_collection_release(c);
    sx_db_close(db);
}

/* A seal forced by inserts does not fail the insert when the store is down. */
static void test_insert_seal_with_store_down(void)
{
    fresh_store("objstore_i");
    char a_dir[600];
    snprintf(a_dir, sizeof a_dir, "%s", test_tmpdir("objstore_ia"));
    sx_db *db = open_store_db(a_dir, g_url);
    create_coll(db, "t");
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "t", &c));
    sx__objstore_fault_set(SX__OBJ_FAULT_PUT, 1, true, false);
    for (int b = 0; b < 5; b++)
        ASSERT_OK(insert_rows(c, b * 500, 500)); /* seals at 1000 rows: uploads fail */
    ASSERT_STATUS(sx_db_sync(db), SX_EREMOTE);
    check_store(g_root, "t", NULL);
    sx__objstore_fault_clear_all();
    ASSERT_OK(sx_db_sync(db));
    int kinds[3];
    check_store(g_root, "t", kinds);
    ASSERT_EQ(kinds[0], 2); /* the two sealed segments */
    sx_collection_release(c);
    sx_db_close(db);
}

/* Index files: DISKANN's sector file goes up with its .idx; dropping the index removes both
 * from the store; a new index gets new (CRC-named) objects; open from the store loads them. */
static void test_index_objects(void)
{
    fresh_store("objstore_x");
    char a_dir[600], b_dir[600];
    snprintf(a_dir, sizeof a_dir, "%s", test_tmpdir("objstore_xa"));
    snprintf(b_dir, sizeof b_dir, "%s", test_tmpdir("objstore_xb"));
    sx_db *db = open_store_db(a_dir, g_url);
    create_coll(db, "k");
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "k", &c));
    for (int b = 0; b < 4; b++)
        ASSERT_OK(insert_rows(c, b * 500, 500));
    ASSERT_OK(sx_flush(c)); /* 2 sealed segments of 1000 rows */
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    ASSERT_OK(sx_index_wait(c, 120000));
    ASSERT_OK(sx_db_sync(db));
    int kinds[3];
    check_store(g_root, "k", kinds);
    ASSERT_EQ(kinds[0], 2);
    ASSERT_EQ(kinds[2], 2);
    ASSERT_OK(sx_index_drop(c));
    check_store(g_root, "k", kinds);
    ASSERT_EQ(kinds[2], 0);
    ASSERT_EQ(unnamed_objects(g_root, "k"), 0);
    sx_param dp[] = { { "max_degree", "16" }, { "search_list_size", "40" } };
    ASSERT_OK(sx_index_create(c, "DISKANN", dp, 2));
    ASSERT_OK(sx_index_wait(c, 120000));
    ASSERT_OK(sx_db_sync(db));
    check_store(g_root, "k", kinds);
    ASSERT_EQ(kinds[2], 4); /* seg-<id>.idx and seg-<id>.diskann per segment */
    ASSERT_EQ(unnamed_objects(g_root, "k"), 0);
    float qs[4 * DIM];
    uint64_t s = 9;
    for (int i = 0; i < 4 * DIM; i++)
        qs[i] = test_randf(&s) * 10.0f;
    sx_search_req req = { 0 };
    req.queries = qs;
    req.nq = 4;
    req.k = 10;
    req.metric = -1;
    sx_param sp = { "search_list", "100" };
    req.params = &sp;
    req.n_params = 1;
    sx_rowset *ra, *rb;
    ASSERT_OK(sx_search(c, &req, &ra));
    sx_collection_release(c);
    sx_db_close(db);
    db = open_store_db(b_dir, g_url);
    ASSERT_OK(sx_collection_open(db, "k", &c));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED); /* loaded from the downloaded files, not rebuilt */
    ASSERT(ii.disk_bytes > 0);
    ASSERT_OK(sx_search(c, &req, &rb));
    same_results(ra, rb);
    sx_rowset_free(ra);
    sx_rowset_free(rb);
    sx_collection_release(c);
    sx_db_close(db);
}

int main(void)
{
    RUN(test_fs_backend);
    RUN(test_open_from_store);
    RUN(test_store_faults);
    RUN(test_insert_seal_with_store_down);
    RUN(test_index_objects);
    return TEST_DONE();
}
