/*
 * test_fs.c: the platform I/O seam (src/platform/fs.c): atomic replace (and that a failed rename
 * keeps the old contents), bounded whole-file reads, sorted listings, the directory lock across
 * processes, mkdir_p/rmtree, file positions, and the fault-injection controls themselves.
 */
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "platform/fs.h"
#include "util/alloc.h"

static char g_base[512];

static const char *tpath(const char *rel)
{
    static char buf[2][700];
    static int k;
    k ^= 1;
    (void)snprintf(buf[k], sizeof buf[k], "%s/%s", g_base, rel);
    return buf[k];
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sx__free(names[i]);
    sx__free(names);
}

/* Asserts path holds exactly `want`. */
#define ASSERT_CONTENTS(path, want)                              \
 do {                                                            \
  void *_d = NULL;                                               \
  size_t _n = 0;                                                 \
  ASSERT_OK(sx__fs_read_all((path), 1u << 20, &_d, &_n));        \
  int _same = _n == strlen(want) && memcmp(_d, (want), _n) == 0; \
  sx__free(_d);                                                  \
  if (!_same)                                                    \
   FAILF("%s does not hold \"%s\"", (path), (want));             \
 } while (0)

static void test_write_atomic(void)
{
    char p[700], tmp[720];
    (void)snprintf(p, sizeof p, "%s", tpath("atomic"));
    (void)snprintf(tmp, sizeof tmp, "%s.tmp", p);
    ASSERT_OK(sx__fs_write_atomic(p, "hello", 5));
    ASSERT_CONTENTS(p, "hello");
    ASSERT_OK(sx__fs_write_atomic(p, "a longer replacement", 20));
    ASSERT_CONTENTS(p, "a longer replacement");
    ASSERT_OK(sx__fs_write_atomic(p, "x", 1)); /* shorter: no stale tail */
    ASSERT_CONTENTS(p, "x");
    ASSERT_OK(sx__fs_write_atomic(p, "", 0));
    ASSERT_CONTENTS(p, "");
    ASSERT(!sx__fs_exists(tmp));
    /* the fsyncs happen: file and directory */
    long s0 = sx__fault_calls(SX__FAULT_SYNC), r0 = sx__fault_calls(SX__FAULT_RENAME);
    ASSERT_OK(sx__fs_write_atomic(p, "y", 1));
    ASSERT_EQ(sx__fault_calls(SX__FAULT_SYNC) - s0, 2);
    ASSERT_EQ(sx__fault_calls(SX__FAULT_RENAME) - r0, 1);
    /* into a missing directory */
    ASSERT_STATUS(sx__fs_write_atomic(tpath("no/such/dir/f"), "z", 1), SX_ENOTFOUND);
    ASSERT(strstr(sx_errmsg(), "no/such/dir/f") != NULL);
}

static void test_write_atomic_faults(void)
{
    char p[700], tmp[720];
    (void)snprintf(p, sizeof p, "%s", tpath("atomic_fault"));
    (void)snprintf(tmp, sizeof tmp, "%s.tmp", p);
    ASSERT_OK(sx__fs_write_atomic(p, "old contents", 12));

    /* rename fails: the old contents stay, the tmp file is cleaned up */
    sx__fault_set(SX__FAULT_RENAME, 1, EIO, false);
    ASSERT_STATUS(sx__fs_write_atomic(p, "new contents", 12), SX_EIO);
    ASSERT(strstr(sx_errmsg(), "rename") != NULL);
    ASSERT(strstr(sx_errmsg(), p) != NULL);
    ASSERT_CONTENTS(p, "old contents");
    ASSERT(!sx__fs_exists(tmp));

    /* fsync of the tmp file fails: never renamed */
    sx__fault_set(SX__FAULT_SYNC, 1, EIO, false);
    ASSERT_STATUS(sx__fs_write_atomic(p, "new contents", 12), SX_EIO);
    ASSERT_CONTENTS(p, "old contents");
    ASSERT(!sx__fs_exists(tmp));

    /* disk full while writing the tmp file */
    sx__fault_set(SX__FAULT_WRITE, 1, ENOSPC, false);
    ASSERT_STATUS(sx__fs_write_atomic(p, "new contents", 12), SX_ENOSPC);
    ASSERT_CONTENTS(p, "old contents");
    ASSERT(!sx__fs_exists(tmp));

    /* cannot even create the tmp file */
    sx__fault_set(SX__FAULT_OPEN, 1, EACCES, false);
    ASSERT_STATUS(sx__fs_write_atomic(p, "new contents", 12), SX_EIO);
    ASSERT_CONTENTS(p, "old contents");

    /* faults are one-shot unless persistent: the next write goes through */
    ASSERT_OK(sx__fs_write_atomic(p, "new contents", 12));
    ASSERT_CONTENTS(p, "new contents");
    sx__fault_clear_all();
}

static void test_read_all(void)
{
    char p[700];
    (void)snprintf(p, sizeof p, "%s", tpath("hundred"));
    uint8_t b[100];
    for (int i = 0; i < 100; i++)
        b[i] = (uint8_t)('a' + i % 26);
    ASSERT_OK(sx__fs_write_atomic(p, b, sizeof b));
    void *d = NULL;
    size_t n = 0;
    ASSERT_STATUS(sx__fs_read_all(p, 99, &d, &n), SX_EINVAL);
    ASSERT(d == NULL); /* out-params untouched on failure */
    ASSERT(strstr(sx_errmsg(), p) != NULL);
    ASSERT_OK(sx__fs_read_all(p, 100, &d, &n));
    ASSERT_EQ(n, 100);
    ASSERT(memcmp(d, b, 100) == 0);
    ASSERT_EQ(((char *)d)[100], '\0'); /* NUL-terminated for text parsers */
    sx__free(d);
    d = NULL;
    ASSERT_OK(sx__fs_read_all(p, UINT64_MAX, &d, &n));
    ASSERT_EQ(n, 100);
    sx__free(d);
    d = NULL;
    /* empty file */
    ASSERT_OK(sx__fs_write_atomic(p, "", 0));
    ASSERT_OK(sx__fs_read_all(p, 0, &d, &n));
    ASSERT(d != NULL);
    ASSERT_EQ(n, 0);
    sx__free(d);
    d = NULL;
    /* missing file */
    ASSERT_STATUS(sx__fs_read_all(tpath("missing"), 100, &d, &n), SX_ENOTFOUND);
    ASSERT(strstr(sx_errmsg(), "missing") != NULL);
}

static void test_list_sorted(void)
{
    ASSERT_OK(sx__fs_mkdir(tpath("list")));
    const char *names[] = { "b", "a", "c10", "c2", "B", "wal-2.log", "wal-10.log" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[64];
        (void)snprintf(p, sizeof p, "list/%s", names[i]);
        ASSERT_OK(sx__fs_write_atomic(tpath(p), "x", 1));
    }
    ASSERT_OK(sx__fs_mkdir(tpath("list/d")));
    char **got = NULL;
    size_t n = 0;
    ASSERT_OK(sx__fs_list(tpath("list"), &got, &n));
    const char *want[] = { "B", "a", "b", "c10", "c2", "d", "wal-10.log", "wal-2.log" };
    ASSERT_EQ(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++)
        if (strcmp(got[i], want[i]) != 0)
            FAILF("entry %zu is %s, want %s", i, got[i], want[i]);
    free_names(got, n);
    /* empty directory */
    ASSERT_OK(sx__fs_mkdir(tpath("list/d/e")));
    ASSERT_OK(sx__fs_list(tpath("list/d/e"), &got, &n));
    ASSERT_EQ(n, 0);
    free_names(got, n);
    /* missing */
    ASSERT_STATUS(sx__fs_list(tpath("list/nope"), &got, &n), SX_ENOTFOUND);
}

/* Runs sx__fs_lock(path) in a child process; returns its status (or -1). */
static int lock_in_child(const char *path)
{
    (void)fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        sx__file *f = NULL;
        sx_status st = sx__fs_lock(path, &f);
        if (st == SX_OK)
            st = sx__file_close(f);
        _exit((int)st);
    }
    int ws = 0;
    if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws))
        return -1;
    return WEXITSTATUS(ws);
}

static void test_lock(void)
{
    char p[700];
    (void)snprintf(p, sizeof p, "%s", tpath("LOCK"));
    sx__file *lk = NULL;
    ASSERT_OK(sx__fs_lock(p, &lk)); /* created if needed */
    ASSERT(sx__fs_exists(p));
    /* flock is per open file description: a child's own open must be refused */
    ASSERT_EQ(lock_in_child(p), SX_EBUSY);
    /* so is a second open in this process */
    sx__file *lk2 = NULL;
    ASSERT_STATUS(sx__fs_lock(p, &lk2), SX_EBUSY);
    ASSERT(strstr(sx_errmsg(), "LOCK") != NULL);
    /* released on close */
    ASSERT_OK(sx__file_close(lk));
    ASSERT_EQ(lock_in_child(p), SX_OK);
    ASSERT_OK(sx__fs_lock(p, &lk2));
    ASSERT_OK(sx__file_close(lk2));
}

static void test_mkdir_p_rmtree(void)
{
    ASSERT_OK(sx__fs_mkdir_p(tpath("tree/a/b/c")));
    struct stat sb;
    ASSERT(stat(tpath("tree/a/b/c"), &sb) == 0 && S_ISDIR(sb.st_mode));
    ASSERT_OK(sx__fs_mkdir_p(tpath("tree/a/b/c")));     /* existing: fine */
    ASSERT_OK(sx__fs_mkdir_p(tpath("tree/a//b/c/d/"))); /* doubled and trailing slashes */
    ASSERT(sx__fs_exists(tpath("tree/a/b/c/d")));
    ASSERT_OK(sx__fs_mkdir(tpath("tree/a"))); /* EEXIST is success */
    ASSERT_OK(sx__fs_write_atomic(tpath("tree/a/file"), "data", 4));
    ASSERT_OK(sx__fs_write_atomic(tpath("tree/a/b/c/deep"), "data", 4));
    /* a path through a regular file */
    ASSERT(sx__fs_mkdir_p(tpath("tree/a/file/sub")) != SX_OK);
    ASSERT(sx__fs_mkdir(tpath("tree/a/file")) != SX_OK); /* exists but not a directory */
    ASSERT_OK(sx__fs_rmtree(tpath("tree")));
    ASSERT(!sx__fs_exists(tpath("tree")));
    ASSERT_OK(sx__fs_rmtree(tpath("tree"))); /* ENOENT is success */
    /* a plain file */
    ASSERT_OK(sx__fs_write_atomic(tpath("plain"), "p", 1));
    ASSERT_OK(sx__fs_rmtree(tpath("plain")));
    ASSERT(!sx__fs_exists(tpath("plain")));
    ASSERT_OK(sx__fs_unlink(tpath("plain"))); /* ENOENT is success */
    ASSERT_OK(sx__fs_sync_dir(g_base));
    ASSERT_STATUS(sx__fs_sync_dir(tpath("nodir")), SX_ENOTFOUND);
}

static void test_file_ops(void)
{
    char p[700];
    (void)snprintf(p, sizeof p, "%s", tpath("ops"));
    sx__file *f = NULL;
    ASSERT_STATUS(sx__file_open(p, SX__F_READ, &f), SX_ENOTFOUND);
    ASSERT_OK(sx__file_open(p, SX__F_WRITE | SX__F_CREATE | SX__F_EXCL, &f));
    ASSERT(strcmp(sx__file_path(f), p) == 0);
    ASSERT_OK(sx__file_append(f, "abc", 3));
    ASSERT_OK(sx__file_append(f, "defg", 4));
    uint64_t sz = 0;
    ASSERT_OK(sx__file_size(f, &sz));
    ASSERT_EQ(sz, 7);
    ASSERT_OK(sx__file_pwrite(f, "XY", 2, 1));
    char buf[32];
    size_t got = 0;
    ASSERT_OK(sx__file_pread(f, buf, sizeof buf, 0, &got)); /* short at end of file */
    ASSERT_EQ(got, 7);
    ASSERT(memcmp(buf, "aXYdefg", 7) == 0);
    ASSERT_OK(sx__file_pread(f, buf, 4, 100, &got));
    ASSERT_EQ(got, 0);
    ASSERT_OK(sx__file_truncate(f, 2)); /* moves the append position */
    ASSERT_OK(sx__file_append(f, "zz", 2));
    ASSERT_OK(sx__file_sync(f));
    ASSERT_OK(sx__file_close(f));
    ASSERT_CONTENTS(p, "aXzz");
    ASSERT_STATUS(sx__file_open(p, SX__F_WRITE | SX__F_CREATE | SX__F_EXCL, &f), SX_EEXIST);
    /* reopening for write appends after the existing bytes */
    ASSERT_OK(sx__file_open(p, SX__F_WRITE, &f));
    ASSERT_OK(sx__file_append(f, "!", 1));
    ASSERT_OK(sx__file_close(f));
    ASSERT_CONTENTS(p, "aXzz!");
    /* a large append (several MiB) arrives whole */
    size_t big = (5u << 20) + 3;
    uint8_t *data = sx__malloc(big);
    ASSERT(data);
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 131 + 7);
    ASSERT_OK(sx__file_open(p, SX__F_WRITE | SX__F_TRUNC, &f));
    ASSERT_OK(sx__file_append(f, data, big));
    ASSERT_OK(sx__file_close(f));
    void *d = NULL;
    size_t n = 0;
    ASSERT_OK(sx__fs_read_all(p, big, &d, &n));
    ASSERT_EQ(n, big);
    ASSERT(memcmp(d, data, big) == 0);
    sx__free(d);
    sx__free(data);
    ASSERT_OK(sx__file_close(NULL));
    ASSERT_STATUS(sx__file_open(p, 0, &f), SX_EINVAL);
    ASSERT_STATUS(sx__file_open(p, SX__F_READ | SX__F_CREATE, &f), SX_EINVAL);
}

/* The process-wide I/O counters move by exactly what this thread did (the test is single-threaded).
 */
static void test_io_stats(void)
{
    char p[700];
    (void)snprintf(p, sizeof p, "%s", tpath("iostats"));
    sx_io_stats a, b;
    sx_io_stats_get(&a);
    sx__file *f = NULL;
    ASSERT_OK(sx__file_open(p, SX__F_WRITE | SX__F_CREATE, &f));
    ASSERT_OK(sx__file_append(f, "0123456789", 10));
    ASSERT_OK(sx__file_pwrite(f, "ab", 2, 3));
    ASSERT_OK(sx__file_sync(f));
    char buf[16];
    size_t got = 0;
    ASSERT_OK(sx__file_pread(f, buf, sizeof buf, 0, &got));
    ASSERT_OK(sx__file_close(f));
    sx_io_stats_get(&b);
    ASSERT_EQ(b.write_ops - a.write_ops, 2);
    ASSERT_EQ(b.write_bytes - a.write_bytes, 12);
    ASSERT_EQ(b.read_ops - a.read_ops, 1);
    ASSERT_EQ(b.read_bytes - a.read_bytes, 10);
    ASSERT_EQ(b.fsyncs - a.fsyncs, 1);
}

static void test_fault_controls(void)
{
    char p[700];
    (void)snprintf(p, sizeof p, "%s", tpath("faults"));
    sx__file *f = NULL;
    ASSERT_OK(sx__file_open(p, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &f));
    /* countdown: the 2nd call fails, with the errno given, then it is disarmed */
    long w0 = sx__fault_calls(SX__FAULT_WRITE);
    sx__fault_set(SX__FAULT_WRITE, 2, ENOSPC, false);
    ASSERT_OK(sx__file_append(f, "1", 1));
    ASSERT_STATUS(sx__file_append(f, "2", 1), SX_ENOSPC);
    ASSERT(strstr(sx_errmsg(), p) != NULL);
    ASSERT(strstr(sx_errmsg(), "No space") != NULL);
    ASSERT_OK(sx__file_append(f, "3", 1));
    ASSERT_OK(sx__file_pwrite(f, "4", 1, 2));
    ASSERT_EQ(sx__fault_calls(SX__FAULT_WRITE) - w0, 4);
    /* persistent: every call from the first failure on */
    sx__fault_set(SX__FAULT_SYNC, 1, EIO, true);
    for (int i = 0; i < 3; i++)
        ASSERT_STATUS(sx__file_sync(f), SX_EIO);
    ASSERT_STATUS(sx__fs_sync_dir(g_base), SX_EIO);
    sx__fault_clear_all();
    ASSERT_OK(sx__file_sync(f));
    ASSERT_OK(sx__file_close(f));
    ASSERT_CONTENTS(p, "134");
    /* open and rename */
    sx__fault_set(SX__FAULT_OPEN, 1, EMFILE, false);
    ASSERT_STATUS(sx__file_open(p, SX__F_READ, &f), SX_EIO);
    ASSERT_OK(sx__file_open(p, SX__F_READ, &f));
    ASSERT_OK(sx__file_close(f));
    sx__fault_set(SX__FAULT_RENAME, 1, EXDEV, false);
    ASSERT_STATUS(sx__fs_rename(p, tpath("faults2")), SX_EIO);
    ASSERT(sx__fs_exists(p));
    ASSERT_OK(sx__fs_rename(p, tpath("faults2")));
    ASSERT(!sx__fs_exists(p));
    /* countdown 0 disables */
    sx__fault_set(SX__FAULT_RENAME, 0, EIO, true);
    ASSERT_OK(sx__fs_rename(tpath("faults2"), p));
    sx__fault_clear_all();
}

static void test_oom(void)
{
    /* allocation failures surface as SX_ENOMEM and leak nothing (ASan) */
    char p[700];
    (void)snprintf(p, sizeof p, "%s", tpath("oomfile"));
    ASSERT_OK(sx__fs_write_atomic(p, "abc", 3));
    int ok = 0;
    for (long n = 1; n < 50 && !ok; n++) {
        void *d = NULL;
        size_t len = 0;
        char **names = NULL;
        size_t cnt = 0;
        sx__alloc_fail_after(n);
        sx_status a = sx__fs_write_atomic(p, "abc", 3);
        sx_status b = sx__fs_read_all(p, 100, &d, &len);
        sx_status c = sx__fs_list(g_base, &names, &cnt);
        sx__alloc_fail_after(0);
        ASSERT(a == SX_OK || a == SX_ENOMEM);
        ASSERT(b == SX_OK || b == SX_ENOMEM);
        ASSERT(c == SX_OK || c == SX_ENOMEM);
        if (b == SX_OK)
            sx__free(d);
        if (c == SX_OK)
            free_names(names, cnt);
        ok = a == SX_OK && b == SX_OK && c == SX_OK;
    }
    ASSERT(ok);
}

int main(void)
{
    (void)test_seed();
    (void)snprintf(g_base, sizeof g_base, "%s", test_tmpdir("test_fs"));
    RUN(test_write_atomic);
    RUN(test_write_atomic_faults);
    RUN(test_read_all);
    RUN(test_list_sorted);
    RUN(test_lock);
    RUN(test_mkdir_p_rmtree);
    RUN(test_file_ops);
    RUN(test_io_stats);
    RUN(test_fault_controls);
    RUN(test_oom);
    sx__fault_clear_all();
    if (h_fail == 0) {
        sx_status st = sx__fs_rmtree(g_base);
        (void)st;
    }
    return TEST_DONE();
}
