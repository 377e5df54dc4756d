/*
 * test_compact.c: compaction runs its segment rewrite outside write_mu, so writes race with it;
 * the races are made deterministic with sx__compact_hook (called on the compacting thread after
 * the delete-bit snapshot, before the copy). Checked: deletes and upserts of the segment's rows
 * that arrive during the copy are applied to the new segment (count, get, search never return
 * them), inserts during the copy are kept, all of it survives a flush + reopen and a reopen
 * without a flush (WAL replay against the compacted segment), and a writer is not blocked by a
 * running compaction (an insert completes while the hook holds the compaction mid-copy).
 */
#include <pthread.h>
#include <sextant.h>

#include "engine/engine.h"
#include "harness.h"

#define DIM 4
#define N   3000

static sx_db *db;
static sx_collection *coll;
static const char *dir;

static void open_db(void)
{
    sx_db_options o = { 0 };
    o.build_threads = 1;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
}

static void close_db(void)
{
    sx_collection_release(coll);
    sx_db_close(db);
    coll = NULL;
    db = NULL;
}

static void vec_of(int64_t id, int ver, float *v)
{
    /* unique per (id, version), exact in float */
    v[0] = (float)id;
    v[1] = (float)(ver * 10000);
    v[2] = (float)(id % 7);
    v[3] = 1.0f;
}

static sx_status write_rows(bool upsert, int64_t first, size_t n, int ver)
{
    int64_t *ids = malloc(n * sizeof *ids);
    int64_t *vers = malloc(n * sizeof *vers);
    float *v = malloc(n * DIM * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        ids[i] = first + (int64_t)i;
        vers[i] = ver;
        vec_of(ids[i], ver, v + i * DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                         { "v", SX_FIELD_FLOAT_VECTOR, v },
                         { "ver", SX_FIELD_INT64, vers } };
    sx_batch b = { n, cols, 3 };
    sx_status st = upsert ? sx_upsert(coll, &b) : sx_insert(coll, &b, NULL);
    free(ids);
    free(vers);
    free(v);
    return st;
}

static uint64_t count(const char *f)
{
    uint64_t n = 0;
    ASSERT_OK(sx_count(coll, f, &n));
    return n;
}

/* The version stored for id, or -1 when absent. */
static int64_t version_of(int64_t id)
{
    sx_keys k = { 1, &id, NULL };
    const char *out[] = { "ver", "v" };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_get(coll, &k, out, 2, &rs));
    int64_t ver = -1;
    if (rs->n_rows == 1) {
        ver = ((const int64_t *)rs->cols[1].data)[0];
        float want[DIM];
        vec_of(id, (int)ver, want);
        if (memcmp(want, rs->cols[2].data, sizeof want) != 0)
            FAILF("id %lld: vector does not match its version %lld", (long long)id, (long long)ver);
    }
    ASSERT(rs->n_rows <= 1);
    sx_rowset_free(rs);
    return ver;
}

/* A search for id's own vector at version ver must find it at distance 0 (or not at all when
 * it is deleted). */
static void check_search(int64_t id, int ver, bool present)
{
    float q[DIM];
    vec_of(id, ver, q);
    sx_search_req req = { .queries = q, .nq = 1, .k = 3, .metric = -1 };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(coll, &req, &rs));
    bool found = false;
    for (size_t i = 0; i < rs->n_rows; i++)
        if (((const int64_t *)rs->cols[0].data)[i] == id && rs->distances[i] == 0.0f)
            found = true;
    sx_rowset_free(rs);
    if (found != present)
        FAILF("search for id %lld (version %d): %s", (long long)id, ver,
              present ? "missing" : "returned although deleted");
}

static int hook_calls;

/* During the copy: delete ids [0,100), upsert [100,200) to version 1, insert [N, N+50), delete
 * [200,210) by filter. The old segment's rows are the targets (the pk map points there). */
static void racing_writes(sx_collection *c, uint64_t seg_id)
{
    (void)c;
    (void)seg_id;
    if (hook_calls++)
        return; /* the first segment only */
    int64_t ids[100];
    for (int i = 0; i < 100; i++)
        ids[i] = i;
    sx_keys k = { 100, ids, NULL };
    uint64_t del = 0;
    if (sx_delete(coll, &k, &del) != SX_OK || del != 100)
        abort();
    if (write_rows(true, 100, 100, 1) != SX_OK)
        abort();
    if (write_rows(false, N, 50, 0) != SX_OK)
        abort();
    if (sx_delete_where(coll, "id >= 200 and id < 210", &del) != SX_OK || del != 10)
        abort();
}

static void check_state(void)
{
    /* N rows, minus [300,600) deleted before compaction, minus the 100 + 10 racing deletes,
     * plus 50 inserted during the copy */
    ASSERT_EQ(count(NULL), N - 300 - 110 + 50);
    ASSERT_EQ(count("id < 100"), 0);
    ASSERT_EQ(count("id >= 100 and id < 200 and ver == 1"), 100);
    ASSERT_EQ(count("id >= 100 and id < 200 and ver == 0"), 0);
    ASSERT_EQ(count("id >= 200 and id < 210"), 0);
    ASSERT_EQ(count("id >= 300 and id < 600"), 0);
    ASSERT_EQ(version_of(5), -1);
    ASSERT_EQ(version_of(150), 1);
    ASSERT_EQ(version_of(205), -1);
    ASSERT_EQ(version_of(1000), 0);
    ASSERT_EQ(version_of(N + 10), 0);
    check_search(5, 0, false);
    check_search(150, 1, true);
    check_search(150, 0, false);
    check_search(1000, 0, true);
    check_search(N + 20, 0, true);
}

/* A fresh database in SX_TMPDIR/tag with collection c: N sealed rows, then `del_filter`'s rows
 * deleted (want of them). */
static void setup(const char *tag, const char *del_filter, uint64_t want)
{
    dir = test_tmpdir(tag);
    sx_db_options o = { 0 };
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "ver", SX_FIELD_INT64, false, false, 0, 0 } };
    sx_collection_def d = { "c", f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_db_close(db);
    open_db();
    ASSERT_OK(write_rows(false, 0, N, 0));
    ASSERT_OK(sx_flush(coll));
    uint64_t del = 0;
    ASSERT_OK(sx_delete_where(coll, del_filter, &del));
    ASSERT_EQ(del, want);
}

static void test_writes_race_with_the_copy(void)
{
    setup("compact", "id >= 300 and id < 600", 300);
    hook_calls = 0;
    sx__compact_hook = racing_writes;
    ASSERT_OK(sx_compact(coll));
    sx__compact_hook = NULL;
    ASSERT_EQ(hook_calls, 1);
    sx_collection_info info;
    ASSERT_OK(sx_collection_describe(coll, &info));
    ASSERT_EQ(info.n_segments, 1); /* the compacted one */
    check_state();
    /* reopen without a flush: the racing deletes come back from the WAL */
    close_db();
    open_db();
    check_state();
    /* flush (writes the new segment's delete file), compact again, reopen */
    ASSERT_OK(sx_flush(coll));
    ASSERT_OK(sx_compact(coll));
    close_db();
    open_db();
    check_state();
    ASSERT_OK(sx_db_check(db));
    close_db();
}

/* A writer is not blocked by a running compaction: the hook holds the compaction mid-copy until
 * an insert from another thread has completed. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_state;    /* 1: compaction is in its copy; 2: the insert completed */
static bool gate_timeout; /* the hook gave up waiting: the writer was blocked */

static void hold_copy(sx_collection *c, uint64_t seg_id)
{
    (void)c;
    (void)seg_id;
    pthread_mutex_lock(&gate_mu);
    if (gate_state == 0) {
        gate_state = 1;
        pthread_cond_broadcast(&gate_cv);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 30; /* a blocked writer fails the test, not hangs it */
        while (gate_state != 2)
            if (pthread_cond_timedwait(&gate_cv, &gate_mu, &t) != 0) {
                gate_timeout = true;
                break;
            }
    }
    pthread_mutex_unlock(&gate_mu);
}

static void *compact_thread(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)sx_compact(coll);
}

static void test_writer_not_blocked(void)
{
    setup("compact2", "id < 500", 500);
    gate_state = 0;
    gate_timeout = false;
    sx__compact_hook = hold_copy;
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, compact_thread, NULL) == 0);
    pthread_mutex_lock(&gate_mu);
    while (gate_state != 1)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    /* the compaction is now mid-copy, holding flush_mu only */
    sx_status st = write_rows(false, N, 10, 0);
    uint64_t del2 = 0;
    int64_t id = 600;
    sx_keys k = { 1, &id, NULL };
    sx_status dst = sx_delete(coll, &k, &del2);
    pthread_mutex_lock(&gate_mu);
    gate_state = 2;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
    void *ret = NULL;
    pthread_join(t, &ret);
    sx__compact_hook = NULL;
    if (gate_timeout)
        FAILF("the insert waited for the compaction's copy (30 s)");
    ASSERT_OK(st);
    ASSERT_OK(dst);
    ASSERT_EQ(del2, 1);
    ASSERT_EQ((sx_status)(intptr_t)ret, SX_OK);
    ASSERT_EQ(count(NULL), N - 500 + 10 - 1);
    ASSERT_EQ(version_of(600), -1);
    close_db();
}

/* ------------------------------------------------------------------ merging small segments */

#define MSEG  300 /* rows per small segment */
#define MSEGS 10

static int merge_calls;

/* During the first run's merge: delete [10,20) (its first segment), upsert [310,320) to
 * version 2 (its second), insert [5000,5010). */
static void racing_merge(sx_collection *c, uint64_t first, size_t n)
{
    (void)c;
    (void)first;
    if (merge_calls++ || n != 4)
        return;
    int64_t ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = 10 + i;
    sx_keys k = { 10, ids, NULL };
    uint64_t del = 0;
    if (sx_delete(coll, &k, &del) != SX_OK || del != 10)
        abort();
    if (write_rows(true, 310, 10, 2) != SX_OK || write_rows(false, 5000, 10, 0) != SX_OK)
        abort();
}

static void check_merged(void)
{
    /* 3000 rows, minus [600,650) deleted before, minus [10,20) during the merge, plus 10 new */
    ASSERT_EQ(count(NULL), MSEG * MSEGS - 50 - 10 + 10);
    ASSERT_EQ(count("id >= 10 and id < 20"), 0);
    ASSERT_EQ(count("id >= 600 and id < 650"), 0);
    ASSERT_EQ(count("id >= 310 and id < 320 and ver == 2"), 10);
    ASSERT_EQ(count("ver == 2"), 10);
    ASSERT_EQ(version_of(15), -1);
    ASSERT_EQ(version_of(315), 2);
    ASSERT_EQ(version_of(299), 0);
    ASSERT_EQ(version_of(2999), 0);
    ASSERT_EQ(version_of(5005), 0);
    check_search(15, 0, false);
    check_search(315, 0, false);
    check_search(315, 2, true);
    check_search(1234, 0, true);
    check_search(2999, 0, true);
    /* rows come back in insertion order: the merged segments keep their order */
    sx_rowset *rs = NULL;
    const char *out[] = { "id" };
    ASSERT_OK(sx_query(coll, "id >= 0 and id < 3000", out, 1, 0, 0, &rs));
    const int64_t *got = rs->cols[0].data;
    for (size_t i = 1; i < rs->n_rows; i++) {
        bool upserted = got[i] >= 310 && got[i] < 320; /* moved to the end by the upsert */
        if (!upserted && got[i - 1] > got[i] && !(got[i - 1] >= 310 && got[i - 1] < 320))
            FAILF("query order: %lld before %lld", (long long)got[i - 1], (long long)got[i]);
    }
    sx_rowset_free(rs);
}

/* A collection sealed as many small segments (segment_max_bytes of 4 of them) is merged by
 * sx_compact into runs of at most 4 (4 + 4 + 2), with the deletes, upserts and inserts that race
 * with a merge applied, and the result survives a reopen with and without a flush. */
static void test_merge_small_segments(void)
{
    dir = test_tmpdir("merge");
    sx_db_options o = { 0 };
    o.segment_max_bytes = 4 * MSEG * DIM * sizeof(float);
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "ver", SX_FIELD_INT64, false, false, 0, 0 } };
    sx_collection_def d = { "c", f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
    for (int s = 0; s < MSEGS; s++) {
        ASSERT_OK(write_rows(false, (int64_t)s * MSEG, MSEG, 0));
        ASSERT_OK(sx_flush(coll));
    }
    uint64_t del = 0;
    ASSERT_OK(sx_delete_where(coll, "id >= 600 and id < 650", &del));
    ASSERT_EQ(del, 50);
    sx_collection_info info;
    ASSERT_OK(sx_collection_describe(coll, &info));
    ASSERT_EQ(info.n_segments, MSEGS);
    merge_calls = 0;
    sx__merge_hook = racing_merge;
    ASSERT_OK(sx_compact(coll));
    sx__merge_hook = NULL;
    ASSERT_EQ(merge_calls, 3);
    ASSERT_OK(sx_collection_describe(coll, &info));
    ASSERT_EQ(info.n_segments, 3);
    check_merged();
    /* without a flush: the racing deletes come back from the WAL onto the merged segment */
    sx_collection_release(coll);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
    check_merged();
    ASSERT_OK(sx_flush(coll));
    /* the first merged segment (20 rows deleted: 10 by the race, 10 by the upserts) is
     * rewritten; the last run (600 rows) is half of segment_max_bytes, not small, so the flushed
     * 20 rows have no small neighbour to merge with: 4 segments */
    ASSERT_OK(sx_compact(coll));
    ASSERT_OK(sx_collection_describe(coll, &info));
    ASSERT_EQ(info.n_segments, 4);
    sx_collection_release(coll);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
    check_merged();
    ASSERT_OK(sx_db_check(db));
    close_db();
}

/* The merge target is its own setting (merge_max_bytes): segments seal at segment_max_bytes
 * and merge up to the target; without one, a collection with a disk index (DISKANN) merges up to
 * 2 GiB while one without an index stays at segment_max_bytes. */
static void test_merge_target(void)
{
    for (int variant = 0; variant < 3; variant++) {
        dir = test_tmpdir("mtarget");
        sx_db_options o = { 0 };
        o.build_threads = 1;
        o.segment_max_bytes = MSEG * DIM * sizeof(float);
        if (variant == 0)
            o.merge_max_bytes = 3 * MSEG * DIM * sizeof(float);
        ASSERT_OK(sx_db_open(dir, &o, &db));
        sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                             { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                             { "ver", SX_FIELD_INT64, false, false, 0, 0 } };
        sx_collection_def d = { "c", f, 3, SX_METRIC_L2 };
        ASSERT_OK(sx_collection_create(db, &d));
        ASSERT_OK(sx_collection_open(db, "c", &coll));
        if (variant == 2) {
            sx_param p[] = { { "max_degree", "8" }, { "search_list_size", "16" } };
            ASSERT_OK(sx_index_create(coll, "DISKANN", p, 2));
        }
        /* half-segment writes: the growing segment seals at MSEG rows (segment_max_bytes) */
        for (int s = 0; s < 2 * MSEGS; s++)
            ASSERT_OK(write_rows(false, (int64_t)s * (MSEG / 2), MSEG / 2, 0));
        ASSERT_OK(sx_flush(coll));
        sx_collection_info info;
        ASSERT_OK(sx_collection_describe(coll, &info));
        ASSERT_EQ(info.n_segments, MSEGS);
        ASSERT_OK(sx_compact(coll));
        ASSERT_OK(sx_collection_describe(coll, &info));
        /* 0: runs of 3 x MSEG rows (the last of 1); 1: every segment is half of its own
         * target, not small: unchanged; 2: one segment */
        uint32_t want = variant == 0 ? (MSEGS + 2) / 3 : variant == 1 ? MSEGS : 1;
        fprintf(stderr, "  merge target variant %d: %u segments (want %u)\n", variant,
                info.n_segments, want);
        ASSERT_EQ(info.n_segments, want);
        ASSERT_EQ(count(NULL), MSEG * MSEGS);
        ASSERT_EQ(version_of(MSEG * MSEGS - 1), 0);
        close_db();
    }
}

/* auto_merge = 3: the builder thread merges small segments after the flush that makes the third
 * (and builds their index); every row is still there once, and closing the database with merges
 * queued neither hangs nor leaks (ASan). */
static void test_auto_merge(void)
{
    dir = test_tmpdir("automerge");
    sx_db_options o = { 0 };
    o.build_threads = 1;
    o.segment_max_bytes = 8 * MSEG * DIM * sizeof(float);
    o.auto_merge = 3;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "ver", SX_FIELD_INT64, false, false, 0, 0 } };
    sx_collection_def d = { "c", f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
    sx_param p[] = { { "M", "8" }, { "efConstruction", "32" } };
    ASSERT_OK(sx_index_create(coll, "HNSW", p, 2));
    sx_collection_info info;
    for (int s = 0; s < 2; s++) { /* two small segments: no merge yet */
        ASSERT_OK(write_rows(false, (int64_t)s * MSEG, MSEG, 0));
        ASSERT_OK(sx_flush(coll));
    }
    ASSERT_OK(sx_index_wait(coll, 30000));
    ASSERT_OK(sx_collection_describe(coll, &info));
    ASSERT_EQ(info.n_segments, 2);
    ASSERT_OK(write_rows(false, 2 * MSEG, MSEG, 0));
    ASSERT_OK(sx_flush(coll)); /* the third: queued */
    for (int t = 0; t < 1000; t++) {
        ASSERT_OK(sx_collection_describe(coll, &info));
        if (info.n_segments == 1)
            break;
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    ASSERT_EQ(info.n_segments, 1);
    ASSERT_OK(sx_index_wait(coll, 30000));
    ASSERT_EQ(count(NULL), 3 * MSEG);
    ASSERT_EQ(version_of(0), 0);
    ASSERT_EQ(version_of(3 * MSEG - 1), 0);
    /* more small flushes, then close at once: whatever was merged, nothing is lost */
    for (int s = 3; s < 7; s++) {
        ASSERT_OK(write_rows(false, (int64_t)s * MSEG, MSEG, 0));
        ASSERT_OK(sx_flush(coll));
    }
    close_db();
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
    ASSERT_EQ(count(NULL), 7 * MSEG);
    ASSERT_EQ(version_of(7 * MSEG - 1), 0);
    ASSERT_OK(sx_db_check(db));
    close_db();
}

int main(void)
{
    RUN(test_writes_race_with_the_copy);
    RUN(test_writer_not_blocked);
    RUN(test_merge_small_segments);
    RUN(test_merge_target);
    RUN(test_auto_merge);
    return TEST_DONE();
}
