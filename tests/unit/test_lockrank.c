/*
 * test_lockrank.c: the lock-rank checker (src/util/lock.h). In builds with SX_LOCK_CHECK (Debug,
 * ASan, TSan) taking a lock whose rank is not above every held lock's must abort with a message
 * naming both locks; trylock may go out of order; unlock order is free; cond waits keep the held
 * list. Each violation runs in a child process (it aborts). Also, through the engine: the order
 * the engine documents holds on its real paths (a flush holding flush_mu reaches db.mu through the
 * build queue; sx_db_check no longer takes db.mu around a collection's flush_mu).
 * In a release build (no checker) the violation cases are skipped, saying so.
 */
#include <sextant.h>
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"
#include "util/lock.h"

/* Runs fn in a child with stderr captured into buf; returns the child's wait status. */
static int run_child(void (*fn)(void), char *buf, size_t cap)
{
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + len, cap - 1 - len)) > 0 && len + 1 < cap)
        len += (size_t)r;
    buf[len] = '\0';
    close(fds[0]);
    int st = 0;
    ASSERT(waitpid(pid, &st, 0) == pid);
    return st;
}

static sx__mutex a, b;
static sx__rwlock rw;

static void init_locks(void)
{
    ASSERT(sx__mutex_init(&a, SX__RANK_FLUSH, "test.a") == 0);
    ASSERT(sx__mutex_init(&b, SX__RANK_DB, "test.b") == 0);
    ASSERT(sx__rwlock_init(&rw, SX__RANK_SEG, "test.rw") == 0);
}

static void inverted(void)
{
    sx__mutex_lock(&b); /* rank 160 */
    sx__mutex_lock(&a); /* rank 100: out of order */
}

static void inverted_rw(void)
{
    sx__mutex_lock(&b);
    sx__rwlock_rdlock(&rw);
}

static void same_rank(void)
{
    sx__mutex c;
    (void)sx__mutex_init(&c, SX__RANK_FLUSH, "test.c");
    sx__mutex_lock(&a);
    sx__mutex_lock(&c); /* equal ranks do not nest */
}

static void unlock_unheld(void)
{
    sx__mutex_unlock(&a);
}

static void require_checker(void)
{
#ifndef SX_LOCK_CHECK
    SKIPF("release build: the lock-rank checker is compiled out (Debug/ASan/TSan builds run it)");
#endif
}

static void expect_abort(void (*fn)(void), const char *must_name)
{
    char buf[4096];
    int st = run_child(fn, buf, sizeof buf);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT)
        FAILF("expected an abort, got status 0x%x; stderr: %s", st, buf);
    if (!strstr(buf, "lock order violation") || !strstr(buf, must_name))
        FAILF("message does not name the locks: %s", buf);
}

static void test_inversion_aborts(void)
{
    require_checker();
    expect_abort(inverted, "test.a (rank 100");
    expect_abort(inverted_rw, "test.rw");
    expect_abort(same_rank, "test.c");
    expect_abort(unlock_unheld, "not held");
}

static void test_allowed_patterns(void)
{
    require_checker();
    /* increasing order, non-LIFO unlock */
    sx__mutex_lock(&a);
    sx__rwlock_wrlock(&rw);
    sx__mutex_lock(&b);
    ASSERT_EQ(sx__lockrank_held(), 3);
    sx__rwlock_unlock(&rw);
    sx__mutex_unlock(&a);
    sx__mutex_unlock(&b);
    ASSERT_EQ(sx__lockrank_held(), 0);
    /* trylock out of order is allowed and then counts as held */
    sx__mutex_lock(&b);
    ASSERT(sx__mutex_trylock(&a));
    ASSERT_EQ(sx__lockrank_held(), 2);
    sx__mutex_unlock(&a);
    sx__mutex_unlock(&b);
    /* a timed cond wait keeps the mutex in the held list */
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    sx__mutex_lock(&a);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 1000000;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    (void)sx__cond_timedwait(&cv, &a, &t);
    ASSERT_EQ(sx__lockrank_held(), 1);
    sx__mutex_unlock(&a);
    ASSERT_EQ(sx__lockrank_held(), 0);
}

/* The engine's own paths under the checker: create, insert, flush (flush_mu -> build queue's
 * db.mu), index create/wait/describe (idx_wait_mu -> seg_lock -> idx_mu -> db.mu), sx_db_check
 * (flush_mu with db.mu released), compaction, drop. Any out-of-order lock aborts this process. */
static void test_engine_paths(void)
{
    const char *dir = test_tmpdir("lockrank");
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.build_threads = 1;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0 } };
    sx_collection_def d = { "c", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    int64_t ids[64];
    float v[64 * 4];
    for (int i = 0; i < 64; i++) {
        ids[i] = i;
        for (int j = 0; j < 4; j++)
            v[i * 4 + j] = (float)((i * 7 + j) % 13);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch bt = { 64, cols, 2 };
    ASSERT_OK(sx_insert(c, &bt, NULL));
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 60000));
    ASSERT_OK(sx_db_check(db));
    sx_keys k = { 8, ids, NULL };
    uint64_t del = 0;
    ASSERT_OK(sx_delete(c, &k, &del));
    ASSERT_EQ(del, 8);
    ASSERT_OK(sx_compact(c));
    ASSERT_OK(sx_index_drop(c));
    sx_collection_release(c);
    ASSERT_OK(sx_collection_drop(db, "c"));
    sx_db_close(db);
#ifdef SX_LOCK_CHECK
    ASSERT_EQ(sx__lockrank_held(), 0);
#endif
}

int main(void)
{
    init_locks();
    RUN(test_inversion_aborts);
    RUN(test_allowed_patterns);
    RUN(test_engine_paths);
    return TEST_DONE();
}
