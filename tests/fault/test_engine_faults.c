/*
 * test_engine_faults.c: storage failures injected through the platform seam (src/platform/fs.h)
 * under the whole engine:
 *  - a failed WAL fsync: the insert is not acknowledged, the database turns sticky FATAL (every
 *    later write fails with SX_EFATAL, reads keep working), and after reopen every acknowledged
 *    row is there;
 *  - every write / fsync / rename call of a flush failing in turn (EIO and ENOSPC): the flush
 *    reports the error, nothing acknowledged is lost after reopen, and a later flush succeeds;
 *  - allocation failures (countdown N = 1, 2, ...) during insert and search: clean errors, no
 *    crash, no leak under ASan.
 */
#include <errno.h>
#include <sextant.h>

#include "harness.h"
#include "platform/fs.h"
#include "util/alloc.h"

#define DIM 4

static void make(sx_db *db)
{
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 } };
    sx_collection_def d = { "c", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
}

static sx_status ins(sx_collection *c, int64_t start, size_t n)
{
    int64_t ids[64];
    float v[64 * DIM];
    for (size_t i = 0; i < n; i++) {
        ids[i] = start + (int64_t)i;
        for (int d = 0; d < DIM; d++)
            v[i * DIM + d] = (float)(ids[i] * 3 + d);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { n, cols, 2 };
    return sx_insert(c, &b, NULL);
}

static uint64_t count(sx_collection *c)
{
    uint64_t n = 0;
    ASSERT_OK(sx_count(c, NULL, &n));
    return n;
}

static void test_fsync_failure_is_sticky(void)
{
    const char *dir0 = test_tmpdir("fault_fsync");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", dir0);
    sx_db *db;
    ASSERT_OK(sx_db_open(dir, NULL, &db));
    make(db);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(ins(c, 0, 10));
    sx__fault_set(SX__FAULT_SYNC, 1, EIO, false);
    ASSERT_STATUS(ins(c, 10, 10), SX_EFATAL);
    sx__fault_clear_all();
    ASSERT_STATUS(ins(c, 20, 10), SX_EFATAL); /* sticky, even though fsync would work now */
    int64_t k = 1;
    sx_keys keys = { 1, &k, NULL };
    ASSERT_STATUS(sx_delete(c, &keys, NULL), SX_EFATAL);
    ASSERT(count(c) >= 10); /* reads keep working */
    sx_collection_release(c);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(dir, NULL, &db));
    ASSERT_OK(sx_collection_open(db, "c", &c));
    uint64_t n = count(c);
    ASSERT(n == 10 || n == 20); /* the unacknowledged batch may or may not have reached disk */
    ASSERT_OK(ins(c, 100, 10)); /* writable again after reopen */
    sx_collection_release(c);
    sx_db_close(db);
}

static void test_flush_faults_every_call(void)
{
    static const sx__fault_op ops[] = { SX__FAULT_WRITE, SX__FAULT_SYNC, SX__FAULT_RENAME };
    static const int errs[] = { EIO, ENOSPC };
    long injected = 0;
    for (size_t o = 0; o < 3; o++) {
        for (size_t e = 0; e < 2; e++) {
            for (long nth = 1; nth < 40; nth++) {
                const char *dir0 = test_tmpdir("fault_flush");
                char dir[512];
                snprintf(dir, sizeof dir, "%s", dir0);
                sx_db *db;
                sx_db_options opt = { 0 };
                ASSERT_OK(sx_db_open(dir, &opt, &db));
                make(db);
                sx_collection *c;
                ASSERT_OK(sx_collection_open(db, "c", &c));
                ASSERT_OK(ins(c, 0, 50));
                int64_t k = 3;
                sx_keys keys = { 1, &k, NULL };
                ASSERT_OK(sx_delete(c, &keys, NULL));
                long before = sx__fault_calls(ops[o]);
                sx__fault_set(ops[o], nth, errs[e], false);
                sx_status st = sx_flush(c);
                long calls = sx__fault_calls(ops[o]) - before;
                sx__fault_clear_all();
                bool fired = calls >= nth;
                if (fired) {
                    injected++;
                    ASSERT(st != SX_OK);
                }
                /* acknowledged rows survive a reopen whatever happened */
                sx_collection_release(c);
                sx_db_close(db);
                ASSERT_OK(sx_db_open(dir, NULL, &db));
                ASSERT_OK(sx_db_check(db));
                ASSERT_OK(sx_collection_open(db, "c", &c));
                ASSERT_EQ(count(c), 49);
                ASSERT_OK(sx_flush(c));
                ASSERT_EQ(count(c), 49);
                sx_collection_release(c);
                sx_db_close(db);
                if (!fired)
                    break; /* past the last call site of this op */
            }
        }
    }
    fprintf(stderr, "flush: %ld injected faults, all recovered\n", injected);
    ASSERT(injected > 6);
}

static void test_oom_countdown(void)
{
    const char *dir0 = test_tmpdir("fault_oom");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", dir0);
    sx_db *db;
    ASSERT_OK(sx_db_open(dir, NULL, &db));
    make(db);
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(ins(c, 0, 20));
    long failures = 0;
    int64_t next = 1000;
    for (long nth = 1; nth < 200; nth++) {
        sx__alloc_fail_after(nth);
        float q[DIM] = { 1, 2, 3, 4 };
        sx_search_req req = { .queries = q, .nq = 1, .k = 5, .metric = -1, .filter = "id > 2" };
        sx_rowset *rs = NULL;
        sx_status st = sx_search(c, &req, &rs);
        sx__alloc_fail_after(0);
        if (st == SX_OK)
            sx_rowset_free(rs);
        else
            failures++;
        ASSERT(st == SX_OK || st == SX_ENOMEM);
    }
    for (long nth = 1; nth < 60; nth++) {
        sx__alloc_fail_after(nth);
        sx_status st = ins(c, next, 5);
        sx__alloc_fail_after(0);
        if (st == SX_EFATAL)
            break; /* an allocation failure inside the WAL flush is a failed write: sticky */
        ASSERT(st == SX_OK || st == SX_ENOMEM);
        if (st == SX_OK)
            next += 5;
        else
            failures++;
        ASSERT_EQ(count(c), 20 + (uint64_t)(next - 1000)); /* a failed insert left nothing */
    }
    fprintf(stderr, "allocation failures injected and handled: %ld\n", failures);
    ASSERT(failures > 10);
    sx_collection_release(c);
    sx_db_close(db);
    /* and nothing that failed comes back from the WAL */
    ASSERT_OK(sx_db_open(dir, NULL, &db));
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_EQ(count(c), 20 + (uint64_t)(next - 1000));
    sx_collection_release(c);
    sx_db_close(db);
}

int main(void)
{
    RUN(test_fsync_failure_is_sticky);
    RUN(test_flush_faults_every_call);
    RUN(test_oom_countdown);
    return TEST_DONE();
}
