/*
 * test_index_builder.c: builds handed to another process (sx_db_options.index_builder, cluster
 * mode's index workers) over a file:// store, with an in-test builder doing what a worker does:
 * download the segment by its key (sx_store_file_get), sx_index_build_segment_file, write the
 * index file where the engine asks. What it checks:
 *
 *   - every sealed segment's build is offered (segment key in the store, rows, dim, type,
 *     parameters as the spec has them), the file is loaded and published (the index is Finished,
 *     every row indexed), and the answers equal those of a collection whose indexes were built
 *     in-process (same build thread count and seed: the same graph);
 *   - the index file is uploaded to the store like a local build's;
 *   - a builder that fails (no worker) or answers with a file of other parameters: the engine
 *     builds the index itself (the mismatching file is never published); answers equal again;
 *   - sx_index_build_segment_file refuses a missing field, a field that is not a vector, DISKANN
 *     without a side prefix and a missing file, and a cancelled build writes nothing.
 */
#include <dirent.h>
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "harness.h"

#define DIM  16
#define SEGS 3
#define PER  700

typedef enum mode { M_WORKER = 0, M_FAIL, M_OTHER_PARAMS } mode;

/* the index under test: HNSW, or DISKANN (a graph file beside the index file) */
static const char *itype = "HNSW";
static sx_param iparams[2] = { { "M", "16" }, { "efConstruction", "100" } };
static sx_param sparams[1] = { { "ef", "16" } };
static sx_param other[2] = { { "M", "8" }, { "efConstruction", "40" } };

typedef struct fake {
    mode m;
    atomic_int calls, built;
    char scratch[600];
    char last_key[512];
    uint64_t last_rows;
    uint32_t last_dim;
    char last_params[256];
    pthread_mutex_t mu; /* guards the last_* fields */
} fake;

static sx_status fake_build(void *ctx, const sx_index_build_job *job, const char *out_path)
{
    fake *f = ctx;
    int n = atomic_fetch_add(&f->calls, 1);
    pthread_mutex_lock(&f->mu); /* builds run on several slot threads at once */
    snprintf(f->last_key, sizeof f->last_key, "%s", job->segment_key);
    f->last_rows = job->rows;
    f->last_dim = job->dim;
    size_t off = 0;
    f->last_params[0] = '\0';
    for (size_t i = 0; i < job->n_params; i++)
        off += (size_t)snprintf(f->last_params + off, sizeof f->last_params - off, "%s=%s;",
                                job->params[i].key, job->params[i].value);
    pthread_mutex_unlock(&f->mu);
    if (f->m == M_FAIL)
        return SX_EREMOTE;
    char seg[800];
    snprintf(seg, sizeof seg, "%s/seg-%d.sxs", f->scratch, n);
    sx_status st = sx_store_file_get(job->store, NULL, job->segment_key, seg);
    if (st != SX_OK)
        return st;
    sx_segment_build_options bo = { 1, job->side_prefix, NULL, NULL };
    uint64_t rows = 0;
    st = f->m == M_OTHER_PARAMS
             ? sx_index_build_segment_file(seg, job->field, job->index_type, other, 2, job->metric,
                                           &bo, out_path, &rows)
             : sx_index_build_segment_file(seg, job->field, job->index_type, job->params,
                                           job->n_params, job->metric, &bo, out_path, &rows);
    unlink(seg);
    if (st == SX_OK && rows != job->rows)
        return SX_ECORRUPT;
    if (st == SX_OK)
        atomic_fetch_add(&f->built, 1);
    return st;
}

static void vec_of(int64_t id, float *v)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 3);
    for (int d = 0; d < DIM; d++)
        v[d] = test_randf(&s);
}

static sx_collection *load(sx_db *db, const char *name)
{
    sx_field_def fd[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def def = { name, fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, name, &c));
    static int64_t ids[PER];
    static float v[PER * DIM];
    for (int s = 0; s < SEGS; s++) {
        for (int i = 0; i < PER; i++) {
            ids[i] = s * PER + i;
            vec_of(ids[i], v + (size_t)i * DIM);
        }
        sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
        sx_batch bt = { PER, cols, 2 };
        ASSERT_OK(sx_insert(c, &bt, NULL));
        ASSERT_OK(sx_flush(c));
    }
    ASSERT_OK(sx_index_create(c, itype, iparams, 2));
    ASSERT_OK(sx_index_wait(c, 60000));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED);
    ASSERT_EQ(ii.indexed_rows, (uint64_t)SEGS * PER);
    return c;
}

/* the ids and distances of 10 searches (k 10, ef 16: an approximate answer, so two different
 * graphs are unlikely to give the same text) */
static void answers(sx_collection *c, char *out, size_t cap)
{
    size_t off = 0;
    out[0] = '\0';
    for (int q = 0; q < 10; q++) {
        float qv[DIM];
        vec_of(100000 + q, qv);
        sx_search_req rq;
        memset(&rq, 0, sizeof rq);
        rq.queries = qv;
        rq.nq = 1;
        rq.k = 10;
        rq.metric = -1;
        rq.params = sparams;
        rq.n_params = 1;
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(c, &rq, &rs));
        const int64_t *ids = rs->cols[0].data;
        for (size_t i = 0; i < rs->topks[0]; i++)
            off += (size_t)snprintf(out + off, cap - off, "%lld:%.5f ", (long long)ids[i],
                                    (double)rs->distances[i]);
        sx_rowset_free(rs);
    }
}

static int store_files(const char *dir, const char *suffix)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            n += store_files(p, suffix);
        else if (strstr(e->d_name, suffix))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static void run_mode(mode m, const char *tag)
{
    char root[600], url[700], local[600], remote[600];
    snprintf(root, sizeof root, "%s", test_tmpdir(tag));
    snprintf(url, sizeof url, "file://%s/store", root);
    snprintf(local, sizeof local, "%s/local", root);
    snprintf(remote, sizeof remote, "%s/remote", root);
    fake f;
    memset(&f, 0, sizeof f);
    f.m = m;
    pthread_mutex_init(&f.mu, NULL);
    snprintf(f.scratch, sizeof f.scratch, "%s/scratch", root);
    ASSERT(mkdir(f.scratch, 0755) == 0);
    sx_index_builder b = { &f, 2, fake_build };

    sx_db_options o = { 0 };
    o.storage_url = url;
    o.build_threads = 1;
    sx_db *dl = NULL, *dr = NULL;
    ASSERT_OK(sx_db_open(local, &o, &dl));
    sx_collection *cl = load(dl, "here");
    /* its own store: a database opening a store restores the collections it lacks (here's,
     * whose last index file may not be uploaded yet, would be built again) */
    char url2[720];
    snprintf(url2, sizeof url2, "%s2", url);
    o.storage_url = url2;
    o.index_builder = &b;
    ASSERT_OK(sx_db_open(remote, &o, &dr));
    sx_collection *cr = load(dr, "there");

    ASSERT_EQ(atomic_load(&f.calls), SEGS);
    ASSERT(strstr(f.last_key, "there/seg-") == f.last_key);
    ASSERT(strstr(f.last_key, ".sxs") != NULL);
    ASSERT_EQ(f.last_rows, PER);
    ASSERT_EQ(f.last_dim, DIM);
    char want[128];
    snprintf(want, sizeof want, "%s=%s;%s=%s;", iparams[0].key, iparams[0].value, iparams[1].key,
             iparams[1].value);
    ASSERT(strcmp(f.last_params, want) == 0);
    ASSERT_EQ(atomic_load(&f.built), m == M_FAIL ? 0 : SEGS);
    /* published from the builder's files only when they match the spec */
    ASSERT_EQ(sx_db_remote_builds(dr), m == M_WORKER ? SEGS : 0);
    ASSERT_EQ(sx_db_remote_builds(dl), 0);

    static char a[20000], bb[20000];
    answers(cl, a, sizeof a);
    answers(cr, bb, sizeof bb);
    ASSERT(strcmp(a, bb) == 0); /* same graphs: built remotely, or here after a refusal */
    /* a sync after every pending one: the store holds what the manifest names */
    ASSERT_OK(sx_db_sync(dr));
    char sdir[800];
    snprintf(sdir, sizeof sdir, "%s/store2/there", root);
    ASSERT_EQ(store_files(sdir, ".idx."), SEGS); /* seg-<id>.idx.<crc>: uploaded by the sync */
    if (strcmp(itype, "DISKANN") == 0)
        ASSERT_EQ(store_files(sdir, ".diskann"), SEGS);
    sx_collection_release(cl);
    sx_collection_release(cr);
    sx_db_close(dl);
    sx_db_close(dr);
}

static void test_worker_builds(void)
{
    run_mode(M_WORKER, "ib_worker");
}

static void test_failing_builder(void)
{
    run_mode(M_FAIL, "ib_fail");
}

static void test_mismatching_file(void)
{
    run_mode(M_OTHER_PARAMS, "ib_other");
}

/* DISKANN: its graph and vectors file comes back beside the index file */
static void test_worker_builds_diskann(void)
{
    itype = "DISKANN";
    iparams[0] = (sx_param){ "max_degree", "16" };
    iparams[1] = (sx_param){ "search_list_size", "40" };
    sparams[0] = (sx_param){ "search_list", "16" };
    other[0] = (sx_param){ "max_degree", "8" };
    other[1] = (sx_param){ "search_list_size", "20" };
    run_mode(M_WORKER, "ib_dk_worker");
    run_mode(M_OTHER_PARAMS, "ib_dk_other");
    itype = "HNSW";
    iparams[0] = (sx_param){ "M", "16" };
    iparams[1] = (sx_param){ "efConstruction", "100" };
    sparams[0] = (sx_param){ "ef", "16" };
    other[0] = (sx_param){ "M", "8" };
    other[1] = (sx_param){ "efConstruction", "40" };
}

static int always(void *ud)
{
    (void)ud;
    return 1;
}

static void test_build_file_errors(void)
{
    char root[600];
    snprintf(root, sizeof root, "%s", test_tmpdir("ib_err"));
    char dir[700], seg[900], out[900];
    snprintf(dir, sizeof dir, "%s/db", root);
    sx_db_options o = { 0 };
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def fd[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def def = { "e", fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "e", &c));
    int64_t ids[50];
    float v[50 * DIM];
    for (int i = 0; i < 50; i++) {
        ids[i] = i;
        vec_of(i, v + (size_t)i * DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch bt = { 50, cols, 2 };
    ASSERT_OK(sx_insert(c, &bt, NULL));
    ASSERT_OK(sx_flush(c));
    snprintf(seg, sizeof seg, "%s/collections/e/seg-%020d.sxs", dir, 1);
    snprintf(out, sizeof out, "%s/out.idx", root);
    uint64_t rows = 0;
    ASSERT_OK(
        sx_index_build_segment_file(seg, "vec", "FLAT", NULL, 0, SX_METRIC_L2, NULL, out, &rows));
    ASSERT_EQ(rows, 50);
    ASSERT_STATUS(
        sx_index_build_segment_file(seg, "nope", "FLAT", NULL, 0, SX_METRIC_L2, NULL, out, NULL),
        SX_ENOTFOUND);
    ASSERT_STATUS(
        sx_index_build_segment_file(seg, "id", "FLAT", NULL, 0, SX_METRIC_L2, NULL, out, NULL),
        SX_EINVAL);
    ASSERT_STATUS(
        sx_index_build_segment_file(seg, "vec", "DISKANN", NULL, 0, SX_METRIC_L2, NULL, out, NULL),
        SX_EINVAL);
    /* cancelled: nothing written */
    sx_segment_build_options co = { 1, NULL, always, NULL };
    char out2[900];
    snprintf(out2, sizeof out2, "%s/cancelled.idx", root);
    ASSERT_STATUS(
        sx_index_build_segment_file(seg, "vec", "HNSW", NULL, 0, SX_METRIC_L2, &co, out2, NULL),
        SX_ECANCELED);
    ASSERT(access(out2, F_OK) != 0);
    snprintf(out, sizeof out, "%s/nofile.sxs", root);
    ASSERT(sx_index_build_segment_file(out, "vec", "FLAT", NULL, 0, SX_METRIC_L2, NULL, seg,
                                       NULL) != SX_OK);
    sx_collection_release(c);
    sx_db_close(db);
}

int main(void)
{
    RUN(test_worker_builds);
    RUN(test_failing_builder);
    RUN(test_mismatching_file);
    RUN(test_worker_builds_diskann);
    RUN(test_build_file_errors);
    return TEST_DONE();
}
