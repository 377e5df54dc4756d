/*
 * test_crash.c: durability under kill -9 (reliability.md T1, embedded mode). A child process
 * inserts batches of BATCH rows (ids batch*BATCH ..), sometimes upserts an earlier batch with a
 * new version, sometimes deletes an earlier batch, sometimes flushes, and reports every
 * acknowledged operation through a pipe. The parent SIGKILLs it at a random moment, reopens the
 * database and checks: every acknowledged batch is fully present, every batch is all-or-nothing
 * (all its rows carry one version), no acknowledged upsert is rolled back, every acknowledged
 * delete stayed deleted, and every row's nullable field `tag` is NULL exactly where it was
 * written NULL (id % 3 == 0) and else holds id * 2 + ver (the NULL bits survive WAL replay and
 * sealing). Repeated ROUNDS times (SX_KILL_ROUNDS, default 50) on the same directory, so recovery
 * also runs over earlier recoveries. Seed printed (SX_SEED replays).
 */
#include <sextant.h>
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"

#define BATCH          50
#define ROUNDS_DEFAULT 50
#define DIM            8
#define MAXB           100000

enum { ACK_INSERT = 1, ACK_UPSERT = 2, ACK_DELETE = 3 };

static void child(const char *dir, int fd, int round, uint64_t seed)
{
    sx_db *db;
    sx_db_options o = { 0 };
    o.segment_max_bytes = 3000 * DIM * 4;
    o.build_threads = 1;
    if (sx_db_open(dir, &o, &db) != SX_OK)
        _exit(3);
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "batch", SX_FIELD_INT64, false, false, 0, 0 },
                         { "ver", SX_FIELD_INT64, false, false, 0, 0 },
                         { "tag", SX_FIELD_INT64, false, false, 0, 0, true } };
    sx_collection_def d = { "c", f, 5, SX_METRIC_L2 };
    sx_status st = sx_collection_create(db, &d);
    if (st != SX_OK && st != SX_EEXIST)
        _exit(4);
    sx_collection *c;
    if (sx_collection_open(db, "c", &c) != SX_OK)
        _exit(5);
    if (round == 0 && sx_index_create(c, "HNSW", NULL, 0) != SX_OK)
        _exit(6);
    uint64_t s = seed;
    int64_t ids[BATCH], bn[BATCH], ver[BATCH], tag[BATCH];
    bool tag_ok[BATCH];
    float v[BATCH * DIM];
    for (int b = round * 1000;; b++) {
        for (int i = 0; i < BATCH; i++) {
            ids[i] = (int64_t)b * BATCH + i;
            bn[i] = b;
            ver[i] = 0;
            tag_ok[i] = ids[i] % 3 != 0;
            tag[i] = ids[i] * 2;
            for (int k = 0; k < DIM; k++)
                v[i * DIM + k] = test_randf(&s);
        }
        sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                             { "v", SX_FIELD_FLOAT_VECTOR, v },
                             { "batch", SX_FIELD_INT64, bn },
                             { "ver", SX_FIELD_INT64, ver },
                             { "tag", SX_FIELD_INT64, tag, tag_ok } };
        sx_batch bt = { BATCH, cols, 5 };
        if (sx_insert(c, &bt, NULL) != SX_OK)
            _exit(7);
        int32_t msg[3] = { ACK_INSERT, b, 0 };
        if (write(fd, msg, sizeof msg) != sizeof msg)
            _exit(8);
        int up = b - 2; /* upsert an earlier batch (never a deleted one: those are x % 7 == 2) */
        if (b % 3 == 0 && up >= round * 1000 && up % 7 != 2) {
            for (int i = 0; i < BATCH; i++) {
                ids[i] = (int64_t)up * BATCH + i;
                bn[i] = up;
                ver[i] = b;
                tag_ok[i] = ids[i] % 3 != 0;
                tag[i] = ids[i] * 2 + b;
            }
            if (sx_upsert(c, &bt) != SX_OK)
                _exit(11);
            int32_t m2[3] = { ACK_UPSERT, up, b };
            if (write(fd, m2, sizeof m2) != sizeof m2)
                _exit(8);
        }
        if (b % 7 == 3) { /* delete the previous batch */
            char filt[64];
            snprintf(filt, sizeof filt, "batch == %d", b - 1);
            if (sx_delete_where(c, filt, NULL) != SX_OK)
                _exit(9);
            int32_t m3[3] = { ACK_DELETE, b - 1, 0 };
            if (write(fd, m3, sizeof m3) != sizeof m3)
                _exit(8);
        }
        if (b % 23 == 0 && sx_flush(c) != SX_OK)
            _exit(10);
    }
}

static void test_kill9(void)
{
    const char *dir0 = test_tmpdir("crash");
    char dir[512];
    snprintf(dir, sizeof dir, "%s", dir0);
    uint64_t seed = test_seed();
    static signed char state[MAXB]; /* 0 unknown, 1 acked insert, 2 acked delete */
    static int32_t min_ver[MAXB];   /* highest acknowledged upsert version of a batch */
    memset(state, 0, sizeof state);
    memset(min_ver, 0, sizeof min_ver);
    const char *er = getenv("SX_KILL_ROUNDS");
    int rounds = er ? atoi(er) : ROUNDS_DEFAULT; /* test code: atoi is fine here */
    long upserts = 0;
    uint64_t rs = seed;
    long total_acks = 0;
    double worst_recovery_ms = 0;
    for (int round = 0; round < rounds; round++) {
        int p[2];
        ASSERT(pipe(p) == 0);
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child(dir, p[1], round, seed + (uint64_t)round);
        }
        close(p[1]);
        /* let it run 30..400 ms, then kill -9 */
        struct timespec ts = { 0, (long)(30 + test_rand(&rs) % 370) * 1000000L };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int wst;
        waitpid(pid, &wst, 0);
        if (WIFEXITED(wst))
            FAILF("child exited early with %d in round %d", WEXITSTATUS(wst), round);
        int32_t msg[3];
        while (read(p[0], msg, sizeof msg) == sizeof msg) {
            total_acks++;
            if (msg[1] < 0 || msg[1] >= MAXB)
                continue;
            if (msg[0] == ACK_INSERT)
                state[msg[1]] = 1;
            else if (msg[0] == ACK_DELETE)
                state[msg[1]] = 2;
            else if (msg[0] == ACK_UPSERT) {
                upserts++;
                if (msg[2] > min_ver[msg[1]])
                    min_ver[msg[1]] = msg[2];
            }
        }
        close(p[0]);
        /* recover and verify */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        sx_db *db;
        ASSERT_OK(sx_db_open(dir, NULL, &db));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (ms > worst_recovery_ms)
            worst_recovery_ms = ms;
        sx_collection *c;
        sx_status st = sx_collection_open(db, "c", &c);
        if (st == SX_ENOTFOUND) { /* killed before the create was durable */
            sx_db_close(db);
            continue;
        }
        ASSERT_OK(st);
        sx_rowset *all;
        const char *outs[] = { "batch", "ver", "tag" };
        ASSERT_OK(sx_query(c, NULL, outs, 3, 0, 0, &all));
        static int per_batch[MAXB];
        static int64_t batch_ver[MAXB];
        memset(per_batch, 0, sizeof per_batch);
        for (size_t i = 0; i < all->n_rows; i++) {
            int64_t b = ((int64_t *)all->cols[1].data)[i];
            int64_t vr = ((int64_t *)all->cols[2].data)[i];
            ASSERT(b >= 0 && b < MAXB);
            int64_t id = ((int64_t *)all->cols[0].data)[i];
            ASSERT_EQ(id / BATCH, b);
            bool null = all->cols[3].valid && !all->cols[3].valid[i];
            if (null != (id % 3 == 0))
                FAILF("round %d: row %lld: tag NULL is %d, written %d", round, (long long)id,
                      (int)null, (int)(id % 3 == 0));
            if (!null && ((int64_t *)all->cols[3].data)[i] != id * 2 + vr)
                FAILF("round %d: row %lld: tag %lld, written %lld", round, (long long)id,
                      (long long)((int64_t *)all->cols[3].data)[i], (long long)(id * 2 + vr));
            if (per_batch[b] == 0)
                batch_ver[b] = vr;
            else if (batch_ver[b] != vr)
                FAILF("round %d: batch %d mixes versions %lld and %lld (a half-applied upsert)",
                      round, (int)b, (long long)batch_ver[b], (long long)vr);
            per_batch[b]++;
        }
        for (int b = 0; b < MAXB; b++) {
            if (per_batch[b] != 0 && per_batch[b] != BATCH)
                FAILF("round %d: batch %d is half present (%d rows)", round, b, per_batch[b]);
            /* a delete of b issued after b+1's ack but killed before its own ack may be durable */
            bool delete_in_flight = (b + 1) % 7 == 3 && b + 1 < MAXB && state[b + 1] == 1;
            if (state[b] == 1 && per_batch[b] == 0 && delete_in_flight)
                state[b] = 2;
            if (state[b] == 1 && per_batch[b] != BATCH)
                FAILF("round %d: acknowledged batch %d lost", round, b);
            if (state[b] == 2 && per_batch[b] != 0)
                FAILF("round %d: deleted batch %d came back", round, b);
            if (per_batch[b] == BATCH && batch_ver[b] < min_ver[b])
                FAILF("round %d: acknowledged upsert of batch %d (version %d) rolled back to %lld",
                      round, b, (int)min_ver[b], (long long)batch_ver[b]);
        }
        /* the next round only trusts what is now present */
        for (int b = 0; b < MAXB; b++)
            if (state[b] == 0 && per_batch[b] == BATCH)
                state[b] = 1;
        sx_rowset_free(all);
        ASSERT_OK(sx_db_check(db));
        sx_collection_release(c);
        sx_db_close(db);
    }
    fprintf(stderr,
            "kill -9 rounds: %d, acknowledged operations checked: %ld (upserts %ld), worst "
            "recovery %.1f ms\n",
            rounds, total_acks, upserts, worst_recovery_ms);
    ASSERT(total_acks > rounds);
    ASSERT(upserts > 0);
}

int main(void)
{
    RUN(test_kill9);
    return TEST_DONE();
}
