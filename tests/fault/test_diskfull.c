/*
 * test_diskfull.c: a full disk (reliability.md T4). The database lives on a small tmpfs (24 MiB,
 * mounted by the test; skipped when mounting is not permitted) that also holds an 8 MiB ballast
 * file. Inserts run until the disk is full: each write is either acknowledged or refused with
 * SX_ENOSPC and a clear message (never SX_EFATAL, never a crash); after the refusal, reads
 * (count, get, search) keep working; deleting the ballast lets writes resume in the same
 * process, without a restart; finally a reopen finds every acknowledged row.
 */
#include <errno.h>
#include <sextant.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "harness.h"

#define DIM   128
#define BATCH 200

static char mnt[512];
static bool mounted;

static void unmount(void)
{
    if (mounted && umount2(mnt, MNT_DETACH) == 0)
        mounted = false;
}

static sx_status insert_batch(sx_collection *c, int64_t first, uint64_t *rs)
{
    static int64_t ids[BATCH];
    static float v[BATCH * DIM];
    for (int i = 0; i < BATCH; i++) {
        ids[i] = first + i;
        for (int k = 0; k < DIM; k++)
            v[i * DIM + k] = test_randf(rs);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch bt = { BATCH, cols, 2 };
    return sx_insert(c, &bt, NULL);
}

static void test_disk_full(void)
{
    char db_dir[600], ballast[600];
    snprintf(db_dir, sizeof db_dir, "%s/db", mnt);
    snprintf(ballast, sizeof ballast, "%s/ballast", mnt);
    FILE *f = fopen(ballast, "wb");
    ASSERT(f != NULL);
    static char block[1 << 20];
    memset(block, 0x5a, sizeof block);
    for (int i = 0; i < 8; i++)
        ASSERT(fwrite(block, 1, sizeof block, f) == sizeof block);
    ASSERT(fclose(f) == 0);

    sx_db_options o = { 0 };
    o.segment_max_bytes = 2u << 20; /* seal every ~4000 rows */
    o.build_threads = 1;
    sx_db *db;
    ASSERT_OK(sx_db_open(db_dir, &o, &db));
    sx_field_def fd[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                          { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 } };
    sx_collection_def d = { "c", fd, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    uint64_t rs = test_seed() | 1;
    int64_t acked = 0;
    int refused = 0;
    for (int b = 0; b < 1000 && refused == 0; b++) {
        sx_status st = insert_batch(c, acked, &rs);
        if (st == SX_OK) {
            acked += BATCH;
        } else if (st == SX_ENOSPC) {
            refused++;
            fprintf(stderr, "refused after %lld rows: %s\n", (long long)acked, sx_errmsg());
            ASSERT(strstr(sx_errmsg(), "disk full") != NULL ||
                   strstr(sx_errmsg(), "No space") != NULL);
        } else {
            FAILF("insert on a filling disk: %s (%s), want SX_OK or SX_ENOSPC", sx_status_str(st),
                  sx_errmsg());
        }
    }
    ASSERT(refused == 1);
    ASSERT(acked > 0);
    /* it stays refused while the disk is full, and nothing half-written appears */
    ASSERT_STATUS(insert_batch(c, acked, &rs), SX_ENOSPC);
    /* reads keep working */
    uint64_t n = 0;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, (uint64_t)acked);
    int64_t probe[] = { 0, acked / 2, acked - 1 };
    sx_keys keys = { 3, probe, NULL };
    sx_rowset *got;
    ASSERT_OK(sx_get(c, &keys, NULL, 0, &got));
    ASSERT_EQ(got->n_rows, 3);
    sx_rowset_free(got);
    float q[DIM];
    for (int k = 0; k < DIM; k++)
        q[k] = test_randf(&rs);
    sx_search_req req = { .queries = q, .nq = 1, .k = 5, .metric = -1 };
    ASSERT_OK(sx_search(c, &req, &got));
    ASSERT_EQ(got->n_rows, 5);
    sx_rowset_free(got);
    /* free space: writes resume in the same process */
    ASSERT(unlink(ballast) == 0);
    int resumed = 0;
    for (int b = 0; b < 10; b++) {
        ASSERT_OK(insert_batch(c, acked, &rs));
        acked += BATCH;
        resumed++;
    }
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, (uint64_t)acked);
    sx_collection_release(c);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(db_dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "c", &c));
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, (uint64_t)acked);
    ASSERT_OK(sx_db_check(db));
    sx_collection_release(c);
    sx_db_close(db);
    fprintf(stderr,
            "disk full: %lld rows acknowledged, writes refused with SX_ENOSPC at a full "
            "24 MiB tmpfs, reads served, %d batches accepted after freeing 8 MiB without a "
            "restart, all rows there after reopen\n",
            (long long)acked, resumed);
}

int main(void)
{
    const char *base = getenv("SX_TMPDIR");
    if (!base)
        base = "/tmp";
    snprintf(mnt, sizeof mnt, "%s/diskfull.%d", base, (int)getpid());
    mkdir(base, 0755);
    if (mkdir(mnt, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "skip: cannot create %s\n", mnt);
        return 77;
    }
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=24m") != 0) {
        fprintf(stderr, "skip: cannot mount a tmpfs at %s (%s): needs root / CAP_SYS_ADMIN\n", mnt,
                strerror(errno));
        rmdir(mnt);
        return 77;
    }
    mounted = true;
    atexit(unmount);
    RUN(test_disk_full);
    unmount();
    rmdir(mnt);
    return TEST_DONE();
}
