/*
 * test_multivec.c: several vector fields in one collection. Three FLOAT_VECTOR fields of
 * different dims and metrics (a: 8, L2; b: 16, IP; c: 4, COSINE) get random rows in several
 * segments; every search is compared with a brute-force oracle over the model's vectors (the
 * exact top-k ids; an approximate index must reach recall@10 >= 0.9 at a generous ef): without
 * indexes, with a different index type on each field (HNSW, IVF_FLAT, FLAT), with a filter and
 * deleted rows, after dropping one field's index (the others stay), after a reopen that loads the
 * index files and replays a WAL tail, after compaction (every field's index rebuilt for the new
 * segments) and after changing one field's metric to COSINE with rows stored (its vectors
 * normalised, the other fields' vectors unchanged and their index rebuilt). Also: the schema
 * limits, errors for a field that is not a vector field, per-field metric checks, the vectors of
 * every field read back by get, and the manifest version (3 with several vector fields).
 * test_store_import: the same schema filled by a bulk import of one NumPy file per field, with a
 * DISKANN index on the second field, over a file:// object store with a small cache limit, then
 * opened in another directory from the store alone (the second field's DISKANN file read through
 * the block cache, not downloaded) and searched against the oracle again.
 */
#include <dirent.h>
#include <math.h>
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "npy.h"

#define NV   3
#define MAXN 6000
#define TOPK 10
#define NQ   20

static const char *const vnames[NV] = { "a", "b", "c" };
static const uint32_t dims[NV] = { 8, 16, 4 };
static sx_metric metrics[NV] = { SX_METRIC_L2, SX_METRIC_IP, SX_METRIC_COSINE };

static float *vecs[NV]; /* [id * dim]: as inserted (not normalised) */
static bool live[MAXN];
static int64_t tag[MAXN];
static uint64_t rng;
static sx_db *db;
static sx_collection *coll;
static char dir[512];

static sx_db_options opts(void)
{
    sx_db_options o = { 0 };
    o.segment_max_bytes = (uint64_t)(8 + 16 + 4) * 4 * 1500; /* about 1500 rows a segment */
    o.sync_mode = SX_SYNC_NONE;
    o.build_threads = 2;
    return o;
}

static void open_db(void)
{
    sx_db_options o = opts();
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "mv", &coll));
}

static void close_db(void)
{
    sx_collection_release(coll);
    sx_db_close(db);
    coll = NULL;
    db = NULL;
}

static void insert_range(int64_t from, int64_t to)
{
    for (; to - from > 1000; from += 1000) /* a batch must fit in a segment */
        insert_range(from, from + 1000);
    size_t n = (size_t)(to - from);
    int64_t *ids = malloc(n * sizeof *ids), *tags = malloc(n * sizeof *tags);
    float *v[NV];
    for (int f = 0; f < NV; f++)
        v[f] = malloc(n * dims[f] * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        int64_t id = from + (int64_t)i;
        ids[i] = id;
        tags[i] = tag[id] = (int64_t)(test_rand(&rng) % 4);
        live[id] = true;
        for (int f = 0; f < NV; f++)
            for (uint32_t j = 0; j < dims[f]; j++) {
                float x = test_randf(&rng) * 2 - 1;
                vecs[f][(size_t)id * dims[f] + j] = x;
                v[f][i * dims[f] + j] = x;
            }
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids, NULL },
                         { "a", SX_FIELD_FLOAT_VECTOR, v[0], NULL },
                         { "tag", SX_FIELD_INT64, tags, NULL },
                         { "b", SX_FIELD_FLOAT_VECTOR, v[1], NULL },
                         { "c", SX_FIELD_FLOAT_VECTOR, v[2], NULL } };
    sx_batch b = { n, cols, 5 };
    ASSERT_OK(sx_insert(coll, &b, NULL));
    free(ids);
    free(tags);
    for (int f = 0; f < NV; f++)
        free(v[f]);
}

/* The oracle's score of row id for query q on field f: smaller is better (negated similarity). */
static double score(int f, const float *q, int64_t id)
{
    const float *x = vecs[f] + (size_t)id * dims[f];
    double d = 0, nq = 0, nx = 0;
    for (uint32_t j = 0; j < dims[f]; j++) {
        if (metrics[f] == SX_METRIC_L2)
            d += ((double)q[j] - (double)x[j]) * ((double)q[j] - (double)x[j]);
        else
            d += (double)q[j] * (double)x[j];
        nq += (double)q[j] * (double)q[j];
        nx += (double)x[j] * (double)x[j];
    }
    if (metrics[f] == SX_METRIC_L2)
        return d;
    if (metrics[f] == SX_METRIC_COSINE)
        d /= sqrt(nq) * sqrt(nx);
    return -d;
}

/* The exact top-k ids (live rows, tag filter when want_tag >= 0). Returns how many. */
static size_t oracle(int f, const float *q, int64_t n_ids, int64_t want_tag, int64_t *out)
{
    double best[TOPK];
    size_t k = 0;
    for (int64_t id = 0; id < n_ids; id++) {
        if (!live[id] || (want_tag >= 0 && tag[id] != want_tag))
            continue;
        double s = score(f, q, id);
        if (k < TOPK || s < best[k - 1]) {
            size_t p = k < TOPK ? k++ : TOPK - 1;
            while (p > 0 && best[p - 1] > s) {
                best[p] = best[p - 1];
                out[p] = out[p - 1];
                p--;
            }
            best[p] = s;
            out[p] = id;
        }
    }
    return k;
}

/* Searches field f with NQ random queries and compares with the oracle: exact runs must return
 * the oracle's ids in order (ties aside: checked by score), approximate ones recall >= min_recall.
 * Returns the recall. */
static double check_search(int f,
                           int64_t n_ids,
                           const char *filter,
                           int64_t want_tag,
                           const sx_param *ps,
                           size_t np,
                           double min_recall)
{
    float *q = malloc((size_t)NQ * dims[f] * sizeof(float));
    for (size_t i = 0; i < (size_t)NQ * dims[f]; i++)
        q[i] = test_randf(&rng) * 2 - 1;
    sx_search_req r = { 0 };
    r.queries = q;
    r.nq = NQ;
    r.k = TOPK;
    r.filter = filter;
    r.metric = -1;
    r.anns_field = vnames[f];
    r.params = ps;
    r.n_params = np;
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(coll, &r, &rs));
    ASSERT_EQ(rs->nq, NQ);
    size_t at = 0, hit = 0, want_total = 0;
    const int64_t *got = rs->cols[0].data;
    for (size_t qi = 0; qi < NQ; qi++) {
        int64_t want[TOPK];
        size_t k = oracle(f, q + qi * dims[f], n_ids, want_tag, want);
        ASSERT_EQ(rs->topks[qi], k);
        want_total += k;
        for (size_t h = 0; h < k; h++) {
            int64_t id = got[at + h];
            ASSERT(id >= 0 && id < n_ids && live[id]);
            if (want_tag >= 0)
                ASSERT_EQ(tag[id], want_tag);
            /* the distance reported is the metric's (squared L2, or the similarity) */
            double s = score(f, q + qi * dims[f], id);
            double d = rs->distances[at + h];
            ASSERT_NEAR(metrics[f] == SX_METRIC_L2 ? d : -d, s, 1e-3 * (1 + fabs(s)));
            for (size_t w = 0; w < k; w++)
                if (want[w] == id) {
                    hit++;
                    break;
                }
            if (min_recall >= 1.0) /* exact: the h-th best score */
                ASSERT_NEAR(s, score(f, q + qi * dims[f], want[h]), 1e-4 * (1 + fabs(s)));
        }
        at += rs->topks[qi];
    }
    sx_rowset_free(rs);
    free(q);
    double recall = want_total ? (double)hit / (double)want_total : 1.0;
    if (recall < min_recall - 1e-9)
        FAILF("field %s: recall@10 %.3f under %.3f", vnames[f], recall, min_recall);
    return recall;
}

static void check_all(int64_t n_ids, bool indexed)
{
    sx_param hnsw_ef[] = { { "ef", "200" } };
    sx_param ivf_np[] = { { "nprobe", "16" } };
    check_search(0, n_ids, NULL, -1, indexed ? hnsw_ef : NULL, indexed ? 1 : 0,
                 indexed ? 0.9 : 1.0);
    check_search(1, n_ids, NULL, -1, indexed ? ivf_np : NULL, indexed ? 1 : 0, 1.0);
    check_search(2, n_ids, NULL, -1, NULL, 0, 1.0);
    check_search(1, n_ids, "tag == 2", 2, indexed ? ivf_np : NULL, indexed ? 1 : 0, 1.0);
    check_search(2, n_ids, "tag == 1", 1, NULL, 0, 1.0);
}

/* get returns every field's vector as inserted (COSINE fields: normalised). */
static void check_get(int64_t n_ids)
{
    int64_t keys[50];
    size_t n = 0;
    for (int64_t id = 0; id < n_ids && n < 50; id += n_ids / 50 + 1)
        if (live[id])
            keys[n++] = id;
    sx_keys k = { n, keys, NULL };
    const char *outf[] = { "a", "b", "c" };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_get(coll, &k, outf, 3, &rs));
    ASSERT_EQ(rs->n_rows, n);
    ASSERT_EQ(rs->n_cols, 4);
    for (int f = 0; f < NV; f++) {
        ASSERT(strcmp(rs->cols[f + 1].name, vnames[f]) == 0);
        ASSERT_EQ(rs->dims[f + 1], dims[f]);
        const float *got = rs->cols[f + 1].data;
        for (size_t i = 0; i < n; i++) {
            const float *x = vecs[f] + (size_t)keys[i] * dims[f];
            double norm = 0;
            for (uint32_t j = 0; j < dims[f]; j++)
                norm += (double)x[j] * (double)x[j];
            norm = metrics[f] == SX_METRIC_COSINE ? sqrt(norm) : 1.0;
            for (uint32_t j = 0; j < dims[f]; j++)
                ASSERT_NEAR(got[i * dims[f] + j], (double)x[j] / norm, 1e-5);
        }
    }
    sx_rowset_free(rs);
}

static void wait_state(const char *field, sx_index_state want, const char *type)
{
    sx_index_info ii;
    ASSERT_OK(sx_index_describe_on(coll, field, &ii));
    ASSERT_EQ(ii.state, want);
    if (type)
        ASSERT(strcmp(ii.type, type) == 0);
}

static void create_indexes(void)
{
    sx_param hp[] = { { "M", "16" }, { "efConstruction", "200" } };
    sx_param ip[] = { { "nlist", "16" } };
    ASSERT_OK(sx_index_create_on(coll, "a", "HNSW", hp, 2));
    ASSERT_OK(sx_index_create_on(coll, "b", "IVF_FLAT", ip, 1));
    ASSERT_OK(sx_index_create_on(coll, "c", "FLAT", NULL, 0));
    ASSERT_OK(sx_index_wait(coll, 0));
}

static uint32_t manifest_version(void)
{
    char path[700];
    snprintf(path, sizeof path, "%s/collections/mv/MANIFEST", dir);
    FILE *fp = fopen(path, "rb");
    ASSERT(fp);
    unsigned char h[12];
    ASSERT_EQ(fread(h, 1, 12, fp), 12);
    (void)fclose(fp);
    return (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;
}

static void test_schema_errors(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir("multivec_schema"));
    sx_db_options o = opts();
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f5[] = { { "id", SX_FIELD_INT64, true, false, 0, 0, false },
                          { "v1", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0, false },
                          { "v2", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0, false },
                          { "v3", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0, false },
                          { "v4", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0, false },
                          { "v5", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0, false } };
    sx_collection_def d = { "five", f5, 6, SX_METRIC_L2 };
    ASSERT_STATUS(sx_collection_create(db, &d), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "at most 4 vector fields") != NULL);
    d.n_fields = 5; /* four: allowed */
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "five", &coll));
    ASSERT_STATUS(sx_index_create_on(coll, "id", "HNSW", NULL, 0), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "not a vector field") != NULL);
    ASSERT_STATUS(sx_index_create_on(coll, "nope", "HNSW", NULL, 0), SX_EINVAL);
    ASSERT_STATUS(sx_collection_set_metric_on(coll, "id", SX_METRIC_IP), SX_EINVAL);
    ASSERT_STATUS(sx_index_wait_on(coll, "v2", 10), SX_ENOTFOUND);
    ASSERT_OK(sx_index_create_on(coll, "v4", "FLAT", NULL, 0));
    ASSERT_OK(sx_index_wait(coll, 0)); /* every indexed field: v4 only */
    ASSERT_STATUS(sx_index_wait_on(coll, "v1", 10), SX_ENOTFOUND);
    wait_state("v4", SX_INDEX_FINISHED, "FLAT");
    wait_state("v1", SX_INDEX_NONE, NULL);
    ASSERT_STATUS(sx_index_drop(coll), SX_ENOTFOUND); /* the first field has none */
    /* a batch lacking one vector field, or with a NaN in the third, writes nothing */
    int64_t ids[2] = { 1, 2 };
    float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, bad[8] = { 1, 2, 3, NAN, 5, 6, 7, 8 };
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids, NULL },
                         { "v1", SX_FIELD_FLOAT_VECTOR, v, NULL },
                         { "v2", SX_FIELD_FLOAT_VECTOR, v, NULL },
                         { "v3", SX_FIELD_FLOAT_VECTOR, v, NULL },
                         { "v4", SX_FIELD_FLOAT_VECTOR, v, NULL } };
    sx_batch b = { 2, cols, 4 };
    ASSERT_STATUS(sx_insert(coll, &b, NULL), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "v4") != NULL);
    b.n_cols = 5;
    cols[3].data = bad;
    ASSERT_STATUS(sx_insert(coll, &b, NULL), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "v3") != NULL);
    uint64_t n = 1;
    ASSERT_OK(sx_count(coll, NULL, &n));
    ASSERT_EQ(n, 0);
    /* per-field metric: a search asking another metric than the field's is refused */
    ASSERT_OK(sx_collection_set_metric_on(coll, "v2", SX_METRIC_IP));
    cols[3].data = v;
    ASSERT_OK(sx_insert(coll, &b, NULL));
    sx_search_req r = { 0 };
    r.queries = v;
    r.nq = 1;
    r.k = 2;
    r.anns_field = "v2";
    r.metric = SX_METRIC_L2;
    sx_rowset *rs = NULL;
    ASSERT_STATUS(sx_search(coll, &r, &rs), SX_EINVAL);
    r.metric = SX_METRIC_IP;
    ASSERT_OK(sx_search(coll, &r, &rs));
    ASSERT_EQ(rs->topks[0], 2);
    ASSERT_EQ(((const int64_t *)rs->cols[0].data)[0], 2); /* IP prefers the larger vector */
    sx_rowset_free(rs);
    r.anns_field = "id";
    ASSERT_STATUS(sx_search(coll, &r, &rs), SX_EINVAL);
    sx_collection_release(coll);
    coll = NULL;
    sx_db_close(db);
    db = NULL;
}

static void test_three_fields(void)
{
    rng = test_seed();
    snprintf(dir, sizeof dir, "%s", test_tmpdir("multivec"));
    for (int f = 0; f < NV; f++)
        vecs[f] = calloc((size_t)MAXN * dims[f], sizeof(float));
    memset(live, 0, sizeof live);
    sx_field_def fields[] = { { "id", SX_FIELD_INT64, true, false, 0, 0, false },
                              { "a", SX_FIELD_FLOAT_VECTOR, false, false, 8, 0, false },
                              { "tag", SX_FIELD_INT64, false, false, 0, 0, false },
                              { "b", SX_FIELD_FLOAT_VECTOR, false, false, 16, 0, false },
                              { "c", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0, false } };
    sx_collection_def d = { "mv", fields, 5, SX_METRIC_L2 };
    sx_db_options o = opts();
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "mv", &coll));
    metrics[0] = SX_METRIC_L2;
    metrics[1] = SX_METRIC_IP;
    metrics[2] = SX_METRIC_COSINE;
    ASSERT_OK(sx_collection_set_metric_on(coll, "b", SX_METRIC_IP));
    ASSERT_OK(sx_collection_set_metric_on(coll, "c", SX_METRIC_COSINE));
    ASSERT_EQ(manifest_version(), 3);

    /* no index: growing rows, then sealed segments, searched exactly */
    insert_range(0, 1000);
    check_all(1000, false);
    insert_range(1000, 4000);
    ASSERT_OK(sx_flush(coll));
    check_all(4000, false);
    check_get(4000);

    /* a different index on each field */
    create_indexes();
    wait_state("a", SX_INDEX_FINISHED, "HNSW");
    wait_state("b", SX_INDEX_FINISHED, "IVF_FLAT");
    wait_state("c", SX_INDEX_FINISHED, "FLAT");
    sx_index_info ii;
    ASSERT_OK(sx_index_describe_on(coll, "b", &ii));
    ASSERT_EQ(ii.metric, SX_METRIC_IP);
    ASSERT(strcmp(ii.params, "nlist=16") == 0);
    ASSERT_EQ(ii.indexed_rows, 4000);
    ASSERT_OK(sx_index_describe(coll, &ii)); /* the first vector field */
    ASSERT(strcmp(ii.type, "HNSW") == 0);
    check_all(4000, true);
    /* the per-field metric belongs to the index */
    ASSERT_STATUS(sx_collection_set_metric_on(coll, "b", SX_METRIC_L2), SX_EBUSY);
    ASSERT_STATUS(sx_collection_set_metric_on(coll, "a", SX_METRIC_IP), SX_EBUSY);

    /* deletes, and a growing tail */
    int64_t del[400];
    for (int i = 0; i < 400; i++) {
        del[i] = (int64_t)(test_rand(&rng) % 4000);
        live[del[i]] = false;
    }
    sx_keys dk = { 400, del, NULL };
    ASSERT_OK(sx_delete(coll, &dk, NULL));
    insert_range(4000, 4500);
    check_all(4500, true);

    /* dropping one field's index leaves the others' */
    ASSERT_OK(sx_index_drop_on(coll, "b"));
    wait_state("b", SX_INDEX_NONE, NULL);
    ASSERT_OK(sx_index_wait(coll, 0));
    wait_state("a", SX_INDEX_FINISHED, "HNSW");
    wait_state("c", SX_INDEX_FINISHED, "FLAT");
    check_search(1, 4500, NULL, -1, NULL, 0, 1.0);
    ASSERT_STATUS(sx_index_drop_on(coll, "b"), SX_ENOTFOUND);
    sx_param ip[] = { { "nlist", "16" } };
    ASSERT_OK(sx_index_create_on(coll, "b", "IVF_FLAT", ip, 1));
    ASSERT_OK(sx_index_wait_on(coll, "b", 0));

    /* reopen: the index files load (no rebuild needed), the WAL tail replays */
    insert_range(4500, 4800); /* not flushed */
    close_db();
    open_db();
    ASSERT_OK(sx_index_wait(coll, 0));
    wait_state("a", SX_INDEX_FINISHED, "HNSW");
    wait_state("b", SX_INDEX_FINISHED, "IVF_FLAT");
    wait_state("c", SX_INDEX_FINISHED, "FLAT");
    check_all(4800, true);
    check_get(4800);

    /* compaction rewrites the segments that have deletes: every field's index follows */
    ASSERT_OK(sx_flush(coll));
    ASSERT_OK(sx_compact(coll));
    ASSERT_OK(sx_index_wait(coll, 0));
    ASSERT_OK(sx_index_describe_on(coll, "c", &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED);
    ASSERT_EQ(ii.pending_rows, 0);
    check_all(4800, true);

    /* field b becomes COSINE with rows stored: its vectors normalised in place, a and c kept */
    ASSERT_OK(sx_index_drop_on(coll, "b"));
    insert_range(4800, 5000);
    ASSERT_OK(sx_collection_set_metric_on(coll, "b", SX_METRIC_COSINE));
    metrics[1] = SX_METRIC_COSINE;
    ASSERT_OK(sx_index_wait(coll, 0));
    wait_state("a", SX_INDEX_FINISHED, "HNSW");
    check_all(5000, true);
    check_get(5000);
    close_db();
    open_db();
    ASSERT_OK(sx_index_wait(coll, 0));
    check_all(5000, true);
    ASSERT_EQ(manifest_version(), 3);
    close_db();
    for (int f = 0; f < NV; f++)
        free(vecs[f]);
}

/* Files in d whose name contains `part` and, when `suffix` is set, ends with it. */
static int count_files(const char *d, const char *part, const char *suffix)
{
    DIR *dp = opendir(d);
    ASSERT(dp != NULL);
    int n = 0;
    const struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        size_t l = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
        if (strstr(e->d_name, part) &&
            (!suffix || (l >= sl && !strcmp(e->d_name + l - sl, suffix))))
            n++;
    }
    (void)closedir(dp);
    return n;
}

static void search_store_fields(int64_t n_ids)
{
    sx_param hnsw_ef[] = { { "ef", "200" } };
    sx_param dk[] = { { "search_list", "200" } };
    check_search(0, n_ids, NULL, -1, hnsw_ef, 1, 0.9);
    check_search(1, n_ids, NULL, -1, dk, 1, 0.9);
    check_search(1, n_ids, "tag == 3", 3, dk, 1, 0.9);
    check_search(2, n_ids, NULL, -1, NULL, 0, 1.0);
}

static void test_store_import(void)
{
    enum { N = 3000 };

    rng = test_seed();
    char root[600], url[700], a[600], b[600], files[600], cdir[700];
    snprintf(root, sizeof root, "%s", test_tmpdir("multivec_root"));
    snprintf(url, sizeof url, "file://%s", root);
    snprintf(a, sizeof a, "%s", test_tmpdir("multivec_a"));
    snprintf(b, sizeof b, "%s", test_tmpdir("multivec_b"));
    snprintf(files, sizeof files, "%s", test_tmpdir("multivec_files"));
    for (int f = 0; f < NV; f++)
        vecs[f] = calloc((size_t)MAXN * dims[f], sizeof(float));
    memset(live, 0, sizeof live);
    metrics[0] = SX_METRIC_L2;
    metrics[1] = SX_METRIC_IP;
    metrics[2] = SX_METRIC_COSINE;
    int64_t *ids = malloc(N * sizeof *ids), *tags = malloc(N * sizeof *tags);
    ASSERT(ids && tags);
    for (int64_t i = 0; i < N; i++) {
        ids[i] = i;
        tags[i] = tag[i] = (int64_t)(test_rand(&rng) % 4);
        live[i] = true;
        for (int f = 0; f < NV; f++)
            for (uint32_t j = 0; j < dims[f]; j++)
                vecs[f][(size_t)i * dims[f] + j] = test_randf(&rng) * 2 - 1;
    }
    char path[NV + 2][700], shape[64];
    const char *paths[NV + 2];
    snprintf(shape, sizeof shape, "(%d,)", N);
    snprintf(path[0], sizeof path[0], "%s/id.npy", files);
    th_write_npy(path[0], "<i8", shape, ids, N * sizeof *ids);
    snprintf(path[1], sizeof path[1], "%s/tag.npy", files);
    th_write_npy(path[1], "<i8", shape, tags, N * sizeof *tags);
    for (int f = 0; f < NV; f++) {
        snprintf(path[f + 2], sizeof path[f + 2], "%s/%s.npy", files, vnames[f]);
        snprintf(shape, sizeof shape, "(%d, %u)", N, dims[f]);
        th_write_npy(path[f + 2], "<f4", shape, vecs[f], (size_t)N * dims[f] * sizeof(float));
    }
    for (int i = 0; i < NV + 2; i++)
        paths[i] = path[i];
    free(ids);
    free(tags);

    sx_db_options o = opts();
    o.storage_url = url;
    o.cache_limit_bytes = 256u << 10;
    ASSERT_OK(sx_db_open(a, &o, &db));
    sx_field_def fields[] = { { "id", SX_FIELD_INT64, true, false, 0, 0, false },
                              { "a", SX_FIELD_FLOAT_VECTOR, false, false, 8, 0, false },
                              { "tag", SX_FIELD_INT64, false, false, 0, 0, false },
                              { "b", SX_FIELD_FLOAT_VECTOR, false, false, 16, 0, false },
                              { "c", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0, false } };
    sx_collection_def d = { "mv", fields, 5, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "mv", &coll));
    ASSERT_OK(sx_collection_set_metric_on(coll, "b", SX_METRIC_IP));
    ASSERT_OK(sx_collection_set_metric_on(coll, "c", SX_METRIC_COSINE));
    /* a group without one vector field's file is refused, and imports nothing */
    sx_import_group g = { paths, NV + 1 };
    sx_import_result res;
    ASSERT_STATUS(sx_import_run(coll, &g, 1, NULL, &res), SX_EINVAL);
    uint64_t n = 1;
    ASSERT_OK(sx_count(coll, NULL, &n));
    ASSERT_EQ(n, 0);
    g.n_paths = NV + 2;
    ASSERT_OK(sx_import_run(coll, &g, 1, NULL, &res));
    ASSERT_EQ(res.rows, N);
    sx_param hp[] = { { "M", "16" }, { "efConstruction", "200" } };
    sx_param dp[] = { { "max_degree", "32" }, { "search_list_size", "100" } };
    ASSERT_OK(sx_index_create_on(coll, "a", "HNSW", hp, 2));
    ASSERT_OK(sx_index_create_on(coll, "b", "DISKANN", dp, 2));
    ASSERT_OK(sx_index_wait(coll, 0));
    ASSERT_OK(sx_db_sync(db));
    check_get(N);
    search_store_fields(N);
    snprintf(cdir, sizeof cdir, "%s/collections/mv", a);
    ASSERT(count_files(cdir, ".v1.diskann", NULL) > 0); /* the second field's own files */
    sx_collection_release(coll);
    sx_db_close(db);

    /* another directory, from the store alone */
    ASSERT_OK(sx_db_open(b, &o, &db));
    ASSERT_OK(sx_collection_open(db, "mv", &coll));
    ASSERT_OK(sx_index_wait(coll, 0));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe_on(coll, "b", &ii));
    ASSERT(strcmp(ii.type, "DISKANN") == 0);
    ASSERT_EQ(ii.metric, SX_METRIC_IP);
    ASSERT_EQ(ii.indexed_rows, N);
    snprintf(cdir, sizeof cdir, "%s/collections/mv", b);
    ASSERT_EQ(count_files(cdir, ".v1.diskann", ".v1.diskann"), 0); /* read through the cache */
    search_store_fields(N);
    check_get(N);
    sx_collection_release(coll);
    sx_db_close(db);
    coll = NULL;
    db = NULL;
    for (int f = 0; f < NV; f++)
        free(vecs[f]);
}

int main(void)
{
    RUN(test_schema_errors);
    RUN(test_three_fields);
    RUN(test_store_import);
    return TEST_DONE();
}
