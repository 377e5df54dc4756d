/*
 * test_db_refresh.c: sx_db_refresh, the read side of cluster mode's query nodes, over a file://
 * store: a writer database and a read-only database on the same store.
 *
 *   - the reader opens what the writer synced; after more rows, an index build, deletes and a
 *     flush on the writer, one refresh brings the reader to the same count and the same search
 *     answers (ids and distances) as the writer;
 *   - a handle opened before a refresh keeps its version (the old count) until released; after a
 *     compaction on the writer, the segment files only the old version uses stay while it is
 *     held and are removed by the refresh after its release;
 *   - files whose key did not change are not downloaded again (same inode);
 *   - nothing changed: the refresh reports 0 and downloads nothing;
 *   - a collection created on the writer appears, a dropped one disappears with its directory;
 *   - refresh on a writable database is refused;
 *   - two threads opening, counting and searching while six refreshes swap versions under them:
 *     no error, counts never go back (also under TSan).
 */
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "harness.h"

#define DIM 8

static void vec_of(int64_t id, float *v)
{
    for (int d = 0; d < DIM; d++)
        v[d] = (float)((id * 7919 + d * 104729) % 1000) / 100.0f;
}

static void insert_range(sx_collection *c, int64_t from, int64_t n)
{
    int64_t ids[512];
    float v[512 * DIM];
    for (int64_t i = 0; i < n; i++) {
        ids[i] = from + i;
        vec_of(from + i, v + i * DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch bt = { (size_t)n, cols, 2 };
    ASSERT_OK(sx_insert(c, &bt, NULL));
}

static void top10(sx_collection *c, char *out, size_t cap)
{
    float q[DIM];
    vec_of(4242, q);
    sx_search_req rq;
    memset(&rq, 0, sizeof rq);
    rq.queries = q;
    rq.nq = 1;
    rq.k = 10;
    rq.metric = -1;
    sx_param ef = { "ef", "64" };
    rq.params = &ef;
    rq.n_params = 1;
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(c, &rq, &rs));
    size_t off = 0;
    out[0] = '\0';
    const int64_t *ids = rs->cols[0].data;
    for (size_t i = 0; i < rs->topks[0]; i++)
        off += (size_t)snprintf(out + off, cap - off, "%lld:%.4f ", (long long)ids[i],
                                (double)rs->distances[i]);
    sx_rowset_free(rs);
}

static uint64_t count_of(sx_db *db, const char *name)
{
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, name, &c));
    uint64_t n = 0;
    ASSERT_OK(sx_count(c, NULL, &n));
    sx_collection_release(c);
    return n;
}

static ino_t inode_of(const char *dir, const char *coll, const char *file)
{
    char p[1200];
    snprintf(p, sizeof p, "%s/collections/%s/%s", dir, coll, file);
    struct stat st;
    return stat(p, &st) == 0 ? st.st_ino : 0;
}

static void test_refresh(void)
{
    char root[600], url[700], w[600], r[600];
    snprintf(root, sizeof root, "%s", test_tmpdir("refresh_root"));
    snprintf(url, sizeof url, "file://%s", root);
    snprintf(w, sizeof w, "%s", test_tmpdir("refresh_w"));
    snprintf(r, sizeof r, "%s", test_tmpdir("refresh_r"));
    sx_db_options wo = { 0 };
    wo.storage_url = url;
    wo.build_threads = 1;
    sx_db *dw;
    ASSERT_OK(sx_db_open(w, &wo, &dw));
    sx_field_def fd[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def def = { "rc", fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(dw, &def));
    sx_collection *cw;
    ASSERT_OK(sx_collection_open(dw, "rc", &cw));
    insert_range(cw, 0, 500);
    ASSERT_OK(sx_flush(cw));

    sx_db_options ro = { 0 };
    ro.storage_url = url;
    ro.read_only = true;
    sx_db *dr;
    ASSERT_OK(sx_db_open(r, &ro, &dr));
    ASSERT_EQ(count_of(dr, "rc"), 500);
    size_t ch = 99;
    ASSERT_OK(sx_db_refresh(dr, &ch));
    ASSERT_EQ(ch, 0);
    ino_t seg1 = inode_of(r, "rc", "seg-00000000000000000001.sxs");
    ASSERT(seg1 != 0);

    /* the writer moves on: more rows, an HNSW index, deletes */
    sx_collection *old;
    ASSERT_OK(sx_collection_open(dr, "rc", &old)); /* held across the refresh */
    insert_range(cw, 500, 500);
    sx_param hp[] = { { "M", "16" }, { "efConstruction", "100" } };
    ASSERT_OK(sx_index_create(cw, "HNSW", hp, 2));
    ASSERT_OK(sx_flush(cw));
    ASSERT_OK(sx_index_wait(cw, 120000));
    int64_t dk[] = { 3, 4, 5, 600 };
    sx_keys keys = { 4, dk, NULL };
    ASSERT_OK(sx_delete(cw, &keys, NULL));
    ASSERT_OK(sx_flush(cw));
    ASSERT_OK(sx_db_sync(dw));
    ASSERT_OK(sx_db_refresh(dr, &ch));
    ASSERT_EQ(ch, 1);
    ASSERT_EQ(count_of(dr, "rc"), 996);
    uint64_t n_old = 0;
    ASSERT_OK(sx_count(old, NULL, &n_old));
    ASSERT_EQ(n_old, 500); /* the handle kept its version */
    ASSERT_EQ(inode_of(r, "rc", "seg-00000000000000000001.sxs"), seg1); /* not downloaded again */
    char a[1024], b[1024];
    top10(cw, a, sizeof a);
    sx_collection *cr;
    ASSERT_OK(sx_collection_open(dr, "rc", &cr));
    top10(cr, b, sizeof b);
    sx_collection_release(cr);
    ASSERT(strcmp(a, b) == 0);
    sx_collection_info info;
    ASSERT_OK(sx_collection_open(dr, "rc", &cr));
    ASSERT_OK(sx_collection_describe(cr, &info));
    sx_collection_release(cr);
    ASSERT_EQ(info.n_rows, 996);

    /* compaction on the writer rewrites the segments with deleted rows: the reader's version
     * held by a handle keeps their files; after its release they go */
    sx_collection_release(old);
    ASSERT_OK(sx_collection_open(dr, "rc", &old));
    ASSERT_OK(sx_compact(cw));
    ASSERT_OK(sx_index_wait(cw, 120000));
    ASSERT_OK(sx_db_sync(dw));
    ASSERT_OK(sx_db_refresh(dr, &ch));
    ASSERT_EQ(ch, 1);
    ASSERT_EQ(count_of(dr, "rc"), 996);
    ASSERT(inode_of(r, "rc", "seg-00000000000000000001.sxs") != 0); /* still used by `old` */
    ASSERT_OK(sx_count(old, NULL, &n_old));
    ASSERT_EQ(n_old, 996);
    sx_collection_release(old);
    ASSERT_OK(sx_db_refresh(dr, &ch));
    ASSERT_EQ(ch, 0);
    ASSERT_EQ(inode_of(r, "rc", "seg-00000000000000000001.sxs"), 0); /* collected */
    ASSERT_EQ(count_of(dr, "rc"), 996);
    top10(cw, a, sizeof a);
    ASSERT_OK(sx_collection_open(dr, "rc", &cr));
    top10(cr, b, sizeof b);
    sx_collection_release(cr);
    ASSERT(strcmp(a, b) == 0);

    /* a new collection appears, a dropped one goes with its directory */
    sx_collection_def def2 = { "rd", fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(dw, &def2));
    sx_collection *cw2;
    ASSERT_OK(sx_collection_open(dw, "rd", &cw2));
    insert_range(cw2, 0, 10);
    ASSERT_OK(sx_flush(cw2));
    sx_collection_release(cw2);
    ASSERT_OK(sx_db_refresh(dr, &ch));
    ASSERT_EQ(ch, 1);
    ASSERT_EQ(count_of(dr, "rd"), 10);
    ASSERT_OK(sx_collection_drop(dw, "rd"));
    ASSERT_OK(sx_db_refresh(dr, &ch));
    ASSERT_EQ(ch, 1);
    sx_collection *gone;
    ASSERT_STATUS(sx_collection_open(dr, "rd", &gone), SX_ENOTFOUND);
    char p[1200];
    snprintf(p, sizeof p, "%s/collections/rd", r);
    struct stat st;
    ASSERT(stat(p, &st) != 0);

    ASSERT_STATUS(sx_db_refresh(dw, &ch), SX_EINVAL);
    sx_collection_release(cw);
    sx_db_close(dr);
    sx_db_close(dw);
}

/* readers searching while refreshes swap versions under them (also run under TSan) */
typedef struct rd {
    sx_db *db;
    atomic_bool *stop;
    long searches, errors;
    uint64_t last_count;
} rd;

static void *reader_main(void *arg)
{
    rd *r = arg;
    float q[DIM];
    vec_of(7, q);
    while (!atomic_load(r->stop)) {
        sx_collection *c;
        if (sx_collection_open(r->db, "rc", &c) != SX_OK) {
            r->errors++;
            continue;
        }
        uint64_t n = 0;
        if (sx_count(c, NULL, &n) != SX_OK || n < r->last_count)
            r->errors++; /* a version never goes back */
        r->last_count = n;
        sx_search_req rq;
        memset(&rq, 0, sizeof rq);
        rq.queries = q;
        rq.nq = 1;
        rq.k = 5;
        rq.metric = -1;
        sx_rowset *rs = NULL;
        if (sx_search(c, &rq, &rs) != SX_OK || rs->topks[0] != 5)
            r->errors++;
        sx_rowset_free(rs);
        sx_collection_release(c);
        r->searches++;
    }
    return NULL;
}

static void test_refresh_under_reads(void)
{
    char root[600], url[700], w[600], r[600];
    snprintf(root, sizeof root, "%s", test_tmpdir("refresh2_root"));
    snprintf(url, sizeof url, "file://%s", root);
    snprintf(w, sizeof w, "%s", test_tmpdir("refresh2_w"));
    snprintf(r, sizeof r, "%s", test_tmpdir("refresh2_r"));
    sx_db_options wo = { 0 };
    wo.storage_url = url;
    wo.build_threads = 1;
    sx_db *dw;
    ASSERT_OK(sx_db_open(w, &wo, &dw));
    sx_field_def fd[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def def = { "rc", fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(dw, &def));
    sx_collection *cw;
    ASSERT_OK(sx_collection_open(dw, "rc", &cw));
    insert_range(cw, 0, 100);
    ASSERT_OK(sx_flush(cw));
    sx_db_options ro = { 0 };
    ro.storage_url = url;
    ro.read_only = true;
    sx_db *dr;
    ASSERT_OK(sx_db_open(r, &ro, &dr));
    atomic_bool stop;
    atomic_init(&stop, false);
    rd rs[2] = { { dr, &stop, 0, 0, 0 }, { dr, &stop, 0, 0, 0 } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ASSERT_EQ(pthread_create(&t[i], NULL, reader_main, &rs[i]), 0);
    for (int round = 1; round <= 6; round++) {
        insert_range(cw, round * 100, 100);
        if (round == 3) {
            int64_t dk[] = { 1, 2 };
            sx_keys keys = { 2, dk, NULL };
            ASSERT_OK(sx_delete(cw, &keys, NULL));
        }
        ASSERT_OK(sx_flush(cw));
        size_t ch = 0;
        ASSERT_OK(sx_db_refresh(dr, &ch));
        ASSERT_EQ(ch, 1);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    size_t ch = 0;
    ASSERT_OK(sx_db_refresh(dr, &ch)); /* frees the last retired versions */
    ASSERT_EQ(rs[0].errors + rs[1].errors, 0);
    ASSERT(rs[0].searches > 0 && rs[1].searches > 0);
    ASSERT_EQ(count_of(dr, "rc"), 698);
    sx_collection_release(cw);
    sx_db_close(dr);
    sx_db_close(dw);
}

int main(void)
{
    RUN(test_refresh);
    RUN(test_refresh_under_reads);
    return TEST_DONE();
}
