/*
 * test_check.c: `sextant check DIR` (offline integrity check) and `--salvage` (reliability.md
 * T2's "corrupt middle -> refuse to start with a clear message, explicit --salvage").
 *   - a sound directory checks clean (exit 0);
 *   - a WAL with a flipped byte in its second record (a valid record follows) makes open refuse
 *     (SX_ECORRUPT naming the WAL) and check fail (exit 1, hinting at --salvage);
 *   - check --salvage cuts the log at the bad record: exit 0, the first batch survives, the
 *     later ones are gone, the dropped bytes are kept in *.salvaged, and the database opens;
 *   - a flipped byte in a sealed segment file fails the check (exit 1, BAD line).
 */
#include <sextant.h>
#include <sys/stat.h>

#include "harness.h"

#define DIM 4
#define N   100

static const char *bin;

static void make_db(const char *dir, int batches, bool flush)
{
    sx_db *db;
    ASSERT_OK(sx_db_open(dir, NULL, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 } };
    sx_collection_def d = { "c", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    int64_t ids[N];
    float v[N * DIM];
    for (int b = 0; b < batches; b++) {
        for (int i = 0; i < N; i++) {
            ids[i] = b * N + i;
            for (int k = 0; k < DIM; k++)
                v[i * DIM + k] = (float)(b * N + i + k);
        }
        sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
        sx_batch bt = { N, cols, 2 };
        ASSERT_OK(sx_insert(c, &bt, NULL));
    }
    if (flush)
        ASSERT_OK(sx_flush(c));
    sx_collection_release(c);
    sx_db_close(db);
}

/* Runs `sextant check ARGS`, returns the exit status; output in out (truncated to cap). */
static int run_check(const char *args, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' check %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    ASSERT(p != NULL);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void flip_byte(const char *path, double frac)
{
    FILE *f = fopen(path, "r+b");
    ASSERT(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long at = (long)((double)size * frac);
    fseek(f, at, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
}

static void
find_file(const char *dir, const char *prefix, const char *suffix, char *out, size_t cap)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep '^%s' | grep '%s$' | head -1", dir, prefix, suffix);
    FILE *p = popen(cmd, "r");
    ASSERT(p != NULL);
    char name[512] = "";
    if (!fgets(name, sizeof name, p))
        name[0] = 0;
    pclose(p);
    name[strcspn(name, "\n")] = 0;
    ASSERT(name[0] != 0);
    snprintf(out, cap, "%s/%s", dir, name);
}

static void test_clean(void)
{
    const char *dir = test_tmpdir("check_clean");
    make_db(dir, 3, true);
    char out[8192];
    int rc = run_check(dir, out, sizeof out);
    if (rc != 0)
        FAILF("check of a sound directory: exit %d:\n%s", rc, out);
    ASSERT(strstr(out, "collection c: 300 rows") != NULL);
    ASSERT(strstr(out, "ok: 0 problems found") != NULL);
}

static void test_wal_salvage(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("check_wal"));
    make_db(dir, 3, false); /* three WAL records, never flushed */
    char wal_dir[700], wal[1400];
    snprintf(wal_dir, sizeof wal_dir, "%s/collections/c/wal", dir);
    find_file(wal_dir, "wal-", ".log", wal, sizeof wal);
    flip_byte(wal, 0.55); /* inside the second record: the third is still valid after it */
    sx_db *db = NULL;
    sx_db_options ro = { 0 };
    ro.read_only = true;
    ASSERT_STATUS(sx_db_open(dir, &ro, &db), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "WAL") != NULL);
    char out[8192];
    int rc = run_check(dir, out, sizeof out);
    if (rc != 1)
        FAILF("check of a corrupt WAL: exit %d, want 1:\n%s", rc, out);
    ASSERT(strstr(out, "--salvage") != NULL);
    char args[800];
    snprintf(args, sizeof args, "--salvage '%s'", dir);
    rc = run_check(args, out, sizeof out);
    if (rc != 0)
        FAILF("check --salvage: exit %d:\n%s", rc, out);
    ASSERT(strstr(out, "WAL salvage") != NULL);
    char bak[1500];
    snprintf(bak, sizeof bak, "%s.salvaged", wal);
    struct stat sb;
    ASSERT(stat(bak, &sb) == 0 && sb.st_size > 0);
    /* the first batch survives, the cut ones are gone, and the database opens normally */
    ASSERT_OK(sx_db_open(dir, NULL, &db));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    uint64_t n = 0;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, N);
    ASSERT_OK(sx_count(c, "id < 100", &n));
    ASSERT_EQ(n, N);
    ASSERT_OK(sx_db_check(db));
    sx_collection_release(c);
    sx_db_close(db);
    rc = run_check(dir, out, sizeof out);
    ASSERT_EQ(rc, 0);
}

static void test_bad_segment(void)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("check_seg"));
    make_db(dir, 2, true);
    char cdir[700], seg[1400];
    snprintf(cdir, sizeof cdir, "%s/collections/c", dir);
    find_file(cdir, "seg-", ".sxs", seg, sizeof seg);
    flip_byte(seg, 0.7);
    char out[8192];
    int rc = run_check(dir, out, sizeof out);
    if (rc != 1)
        FAILF("check of a corrupt segment: exit %d, want 1:\n%s", rc, out);
    ASSERT(strstr(out, "BAD") != NULL);
}

int main(void)
{
    bin = getenv("SX_SEXTANT_BIN");
    if (!bin) {
        fprintf(stderr, "skip: SX_SEXTANT_BIN not set\n");
        return 77;
    }
    RUN(test_clean);
    RUN(test_wal_salvage);
    RUN(test_bad_segment);
    return TEST_DONE();
}
