/*
 * test_powerloss.c: simulated power loss (reliability.md T2). A child process turns on the
 * platform layer's power-loss mode (sx__powerloss_enable: every write is undoable until its file
 * is fsynced) and runs inserts, upserts, deletes, flushes and an index build, reporting every
 * acknowledged operation through a pipe. At a random write (inside a WAL append, a segment
 * flush, a manifest or index write: wherever the count falls) the "power fails": a random
 * subset of the unsynced writes of every file is dropped, the newest surviving one is torn at a
 * 512-byte boundary, and the process vanishes. The parent reopens the database and checks, with
 * the default fsync policy: nothing acknowledged is lost, acknowledged deletes stay deleted,
 * batches are all-or-nothing, and sx_db_check passes. ROUNDS rounds on one directory (so
 * recoveries stack), SX_POWERLOSS_ROUNDS to change; SX_SEED replays.
 */
#include <sextant.h>
#include <signal.h>
#include <sys/wait.h>

#include "harness.h"
#include "platform/fs.h"

#define BATCH          40
#define DIM            8
#define MAXB           60000
#define ROUNDS_DEFAULT 40

enum { ACK_INSERT = 1, ACK_DELETE = 2, ACK_UPSERT = 3 };

static void child(const char *dir, int fd, int round, uint64_t seed, uint64_t crash_at)
{
    sx_db *db;
    sx_db_options o = { 0 };
    o.segment_max_bytes = 1500 * DIM * 4; /* seal every ~1500 rows: flushes inside inserts */
    o.build_threads = 1;
    if (sx_db_open(dir, &o, &db) != SX_OK)
        _exit(3);
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "batch", SX_FIELD_INT64, false, false, 0, 0 },
                         { "ver", SX_FIELD_INT64, false, false, 0, 0 } };
    sx_collection_def d = { "c", f, 4, SX_METRIC_L2 };
    sx_status st = sx_collection_create(db, &d);
    if (st != SX_OK && st != SX_EEXIST)
        _exit(4);
    sx_collection *c;
    if (sx_collection_open(db, "c", &c) != SX_OK)
        _exit(5);
    /* Power-loss mode from here: the open itself (recovery) ran on a sound disk. */
    sx__powerloss_enable(seed, crash_at);
    if (round % 5 == 0) {
        sx_index_info ii;
        if (sx_index_describe(c, &ii) == SX_OK && ii.state == SX_INDEX_NONE &&
            sx_index_create(c, "HNSW", NULL, 0) != SX_OK)
            _exit(6);
    }
    uint64_t s = seed;
    int64_t ids[BATCH], bn[BATCH], ver[BATCH];
    float v[BATCH * DIM];
    for (int b = round * 1000; b < round * 1000 + 900; b++) {
        for (int i = 0; i < BATCH; i++) {
            ids[i] = (int64_t)b * BATCH + i;
            bn[i] = b;
            ver[i] = 0;
            for (int k = 0; k < DIM; k++)
                v[i * DIM + k] = test_randf(&s);
        }
        sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                             { "v", SX_FIELD_FLOAT_VECTOR, v },
                             { "batch", SX_FIELD_INT64, bn },
                             { "ver", SX_FIELD_INT64, ver } };
        sx_batch bt = { BATCH, cols, 4 };
        if (sx_insert(c, &bt, NULL) != SX_OK)
            _exit(7);
        int32_t m[3] = { ACK_INSERT, b, 0 };
        if (write(fd, m, sizeof m) != sizeof m)
            _exit(8);
        int up = b - 1;
        if (b % 4 == 1 && up >= round * 1000 && up % 5 != 2) {
            for (int i = 0; i < BATCH; i++) {
                ids[i] = (int64_t)up * BATCH + i;
                bn[i] = up;
                ver[i] = b;
            }
            if (sx_upsert(c, &bt) != SX_OK)
                _exit(11);
            int32_t m2[3] = { ACK_UPSERT, up, b };
            if (write(fd, m2, sizeof m2) != sizeof m2)
                _exit(8);
        }
        if (b % 5 == 3) { /* delete batch b - 1 (x % 5 == 2: never upserted) */
            char filt[64];
            snprintf(filt, sizeof filt, "batch == %d", b - 1);
            if (sx_delete_where(c, filt, NULL) != SX_OK)
                _exit(9);
            int32_t m3[3] = { ACK_DELETE, b - 1, 0 };
            if (write(fd, m3, sizeof m3) != sizeof m3)
                _exit(8);
        }
        if (b % 17 == 0 && sx_flush(c) != SX_OK)
            _exit(10);
        if (b % 97 == 50 && sx_compact(c) != SX_OK)
            _exit(12);
    }
    _exit(0); /* no crash this round (the write count was never reached) */
}

static void test_powerloss(void)
{
    const char *dir = test_tmpdir("powerloss");
    uint64_t seed = test_seed();
    uint64_t rs = seed;
    static signed char state[MAXB]; /* 0 unknown, 1 acked insert, 2 acked delete */
    static int32_t min_ver[MAXB];
    memset(state, 0, sizeof state);
    memset(min_ver, 0, sizeof min_ver);
    const char *er = getenv("SX_POWERLOSS_ROUNDS");
    int rounds = er ? (int)strtol(er, NULL, 10) : ROUNDS_DEFAULT;
    long acks = 0, crashes = 0;
    double worst_ms = 0;
    for (int round = 0; round < rounds; round++) {
        int p[2];
        ASSERT(pipe(p) == 0);
        uint64_t crash_at = 2 + test_rand(&rs) % 600;
        pid_t pid = fork();
        ASSERT(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child(dir, p[1], round, seed + (uint64_t)round * 7919, crash_at);
        }
        close(p[1]);
        int32_t m[3];
        while (read(p[0], m, sizeof m) == sizeof m) {
            acks++;
            if (m[1] < 0 || m[1] >= MAXB)
                continue;
            if (m[0] == ACK_INSERT)
                state[m[1]] = 1;
            else if (m[0] == ACK_DELETE)
                state[m[1]] = 2;
            else if (m[0] == ACK_UPSERT && m[2] > min_ver[m[1]])
                min_ver[m[1]] = m[2];
        }
        close(p[0]);
        int wst;
        waitpid(pid, &wst, 0);
        if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0)
            FAILF("round %d: child failed (status %d) before the power cut", round, wst);
        crashes++;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        sx_db *db;
        ASSERT_OK(sx_db_open(dir, NULL, &db));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (ms > worst_ms)
            worst_ms = ms;
        sx_collection *c;
        sx_status st = sx_collection_open(db, "c", &c);
        if (st == SX_ENOTFOUND) {
            sx_db_close(db);
            continue;
        }
        ASSERT_OK(st);
        const char *outs[] = { "batch", "ver" };
        sx_rowset *all;
        ASSERT_OK(sx_query(c, NULL, outs, 2, 0, 0, &all));
        static int per[MAXB];
        static int64_t bver[MAXB];
        memset(per, 0, sizeof per);
        for (size_t i = 0; i < all->n_rows; i++) {
            int64_t b = ((int64_t *)all->cols[1].data)[i];
            int64_t vr = ((int64_t *)all->cols[2].data)[i];
            ASSERT(b >= 0 && b < MAXB);
            if (per[b] == 0)
                bver[b] = vr;
            else if (bver[b] != vr)
                FAILF("round %d: batch %d mixes versions", round, (int)b);
            per[b]++;
        }
        for (int b = 0; b < MAXB; b++) {
            if (per[b] != 0 && per[b] != BATCH)
                FAILF("round %d: batch %d half present (%d rows)", round, b, per[b]);
            /* the delete of b issued after b+1's insert ack, cut by the power loss, may stick */
            bool del_in_flight = (b + 1) % 5 == 3 && b + 1 < MAXB && state[b + 1] == 1;
            if (state[b] == 1 && per[b] == 0 && del_in_flight)
                state[b] = 2;
            if (state[b] == 1 && per[b] != BATCH)
                FAILF("round %d: acknowledged batch %d lost after power loss (crash at write "
                      "%llu)",
                      round, b, (unsigned long long)crash_at);
            if (state[b] == 2 && per[b] != 0)
                FAILF("round %d: deleted batch %d came back", round, b);
            if (per[b] == BATCH && bver[b] < min_ver[b])
                FAILF("round %d: acknowledged upsert of batch %d rolled back", round, b);
            if (state[b] == 0 && per[b] == BATCH)
                state[b] = 1; /* in flight at the cut and durable: trusted from now on */
        }
        sx_rowset_free(all);
        st = sx_db_check(db);
        if (st != SX_OK)
            FAILF("round %d: sx_db_check after power loss: %s", round, sx_errmsg());
        sx_collection_release(c);
        sx_db_close(db);
    }
    fprintf(stderr,
            "power loss: %d rounds, %ld power cuts, %ld acknowledged operations checked, 0 lost; "
            "worst recovery %.1f ms\n",
            rounds, crashes, acks, worst_ms);
    ASSERT(acks > rounds);
}

int main(void)
{
    RUN(test_powerloss);
    return TEST_DONE();
}
