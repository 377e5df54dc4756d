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
 *   engine_long_name  the C API creates, reopens and drops a collection of 255 characters.
 *   old_layout      a database directory of an earlier version (no "name" in its
 *                   db.properties.json) opens under its directory's name, and drops.
 *   no_paths        a failing open, write or rename (forced ENOSPC through the platform layer's
 *                   fault injection) in a collection or database create, and a failing WAL
 *                   append in an insert, answer errors that do not contain the server's paths.
 *   drop_in_use     a collection handle taken before its collection and database are dropped
 *                   (the database is closed at once now) still searches, counts and describes,
 *                   then is released; and lookups racing with create/drop cycles of their
 *                   database (run it under AddressSanitizer: a use after free is the failure).
 *   utf8_desc       a description of multi-byte characters longer than the stored field comes
 *                   back as valid UTF-8 (cut at a character boundary), not dropped from the answer.
 * The figures of drop_releases are printed; SX_DDL_CYCLES changes its number of cycles.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>

#include "harness.h"
#include "http.h"
#include "platform/fs.h"
#include "server/server.h"

#define CYCLES 60

static size_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++; /* .tmp- and .drop- leftovers count */
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
    int fails = h_fail;
    cycle(999); /* warm-up: lazily started pools, curl's first connection */
    size_t t0 = count_dir("/proc/self/task"), f0 = count_dir("/proc/self/fd");
    const char *ec = getenv("SX_DDL_CYCLES"); /* more cycles, e.g. under ulimit -n 256 */
    int cycles = ec ? (int)strtol(ec, NULL, 10) : CYCLES;
    for (int i = 0; i < cycles && h_fail == fails; i++)
        cycle(i);
    size_t t1 = count_dir("/proc/self/task"), f1 = count_dir("/proc/self/fd");
    printf("after %d database create/drop cycles: threads %zu -> %zu, descriptors %zu -> %zu\n",
           cycles, t0, t1, f0, f1);
    ASSERT(t1 <= t0 + 3);
    ASSERT(f1 <= f0 + 3);
    /* nothing of the dropped databases is left on disk */
    char path[1024];
    snprintf(path, sizeof path, "%s/databases", d);
    ASSERT_EQ(count_dir(path), 0);
    ASSERT_OK(sx_server_stop(s));
}

/* A name of n characters: the letter c, then digits and underscores. */
static void long_name(char *buf, size_t n, char c)
{
    buf[0] = c;
    for (size_t i = 1; i < n; i++)
        buf[i] = (i % 7 == 0) ? '_' : (char)('0' + i % 10);
    buf[n] = '\0';
}

static long long count_rows(const char *db, const char *coll)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"dbName\":\"%s\",\"collectionName\":\"%s\",\"filter\":\"\","
             "\"outputFields\":[\"count(*)\"]}",
             db, coll);
    th_post("/v2/vectordb/entities/query", body, NULL);
    json_t *data = json_object_get(th_last.json, "data");
    json_t *c = json_object_get(json_array_get(data, 0), "count(*)");
    return json_is_integer(c) ? (long long)json_integer_value(c) : -1;
}

static bool listed(const char *path, const char *body, const char *name)
{
    th_post(path, body, NULL);
    json_t *data = json_object_get(th_last.json, "data");
    size_t i;
    json_t *v;
    json_array_foreach(data, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

static void test_long_names(void)
{
    const char *dir = test_tmpdir("ddl_names");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx_server *s = th_server_start(d, NULL);
    ASSERT(s != NULL);
    int fails = h_fail;
    static const size_t lens[] = { 200, 201, 247, 250, 255 };
    char db[256], coll[256], coll2[256], body[2048];
    for (size_t k = 0; k < sizeof lens / sizeof lens[0] && h_fail == fails; k++) {
        long_name(db, lens[k], 'd');
        long_name(coll, lens[k], 'c');
        long_name(coll2, lens[k], 'r');
        snprintf(body, sizeof body, "{\"dbName\":\"%s\"}", db);
        post_ok("/v2/vectordb/databases/create", body);
        const char *dbs[2] = { "default", db };
        for (int j = 0; j < 2; j++) {
            snprintf(body, sizeof body,
                     "{\"dbName\":\"%s\",\"collectionName\":\"%s\",\"dimension\":4}", dbs[j], coll);
            post_ok("/v2/vectordb/collections/create", body);
            snprintf(body, sizeof body,
                     "{\"dbName\":\"%s\",\"collectionName\":\"%s\",\"data\":["
                     "{\"id\":1,\"vector\":[1,2,3,4]},{\"id\":2,\"vector\":[2,3,4,5]}]}",
                     dbs[j], coll);
            post_ok("/v2/vectordb/entities/insert", body);
            snprintf(body, sizeof body, "{\"dbName\":\"%s\",\"collectionName\":\"%s\"}", dbs[j],
                     coll);
            post_ok("/v2/vectordb/collections/flush", body);
            snprintf(body, sizeof body,
                     "{\"dbName\":\"%s\",\"collectionName\":\"%s\",\"newCollectionName\":\"%s\"}",
                     dbs[j], coll, coll2);
            post_ok("/v2/vectordb/collections/rename", body);
        }
    }
    ASSERT_OK(sx_server_stop(s));
    /* a restart finds every database and collection by its full name */
    s = th_server_start(d, NULL);
    ASSERT(s != NULL);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0] && h_fail == fails; k++) {
        long_name(db, lens[k], 'd');
        long_name(coll2, lens[k], 'r');
        ASSERT(listed("/v2/vectordb/databases/list", "{}", db));
        const char *dbs[2] = { "default", db };
        for (int j = 0; j < 2; j++) {
            snprintf(body, sizeof body, "{\"dbName\":\"%s\"}", dbs[j]);
            ASSERT(listed("/v2/vectordb/collections/list", body, coll2));
            snprintf(body, sizeof body, "{\"dbName\":\"%s\",\"collectionName\":\"%s\"}", dbs[j],
                     coll2);
            post_ok("/v2/vectordb/collections/load", body);
            ASSERT_EQ(count_rows(dbs[j], coll2), 2);
            post_ok("/v2/vectordb/collections/drop", body);
        }
        snprintf(body, sizeof body, "{\"dbName\":\"%s\"}", db);
        post_ok("/v2/vectordb/databases/drop", body);
        ASSERT(!listed("/v2/vectordb/databases/list", "{}", db));
    }
    ASSERT_OK(sx_server_stop(s));
}

/* Errors that reach a client name no server path: a failing open (ENOSPC, forced) during a
 * collection create and a database create. */
static void test_no_paths(void)
{
    const char *dir = test_tmpdir("ddl_paths");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx_server *s = th_server_start(d, NULL);
    ASSERT(s != NULL);

    static const struct {
        const char *path, *body;
    } reqs[] = {
        { "/v2/vectordb/collections/create", "{\"collectionName\":\"nospace\",\"dimension\":4}" },
        { "/v2/vectordb/databases/create", "{\"dbName\":\"nospace\"}" },
    };

    static const sx__fault_op ops[] = { SX__FAULT_OPEN, SX__FAULT_WRITE, SX__FAULT_RENAME };
    for (size_t r = 0; r < 2; r++)
        for (size_t o = 0; o < 3; o++) {
            sx__fault_set(ops[o], 1, ENOSPC, true);
            th_post(reqs[r].path, reqs[r].body, NULL);
            sx__fault_clear_all();
            const char *msg = json_string_value(json_object_get(th_last.json, "message"));
            printf("%s with fault %zu: %s\n", reqs[r].path, o, msg ? msg : "(none)");
            ASSERT(th_code() != 0);
            ASSERT(msg != NULL);
            if (msg)
                ASSERT(strstr(msg, d) == NULL && strstr(msg, "/rest/") == NULL &&
                       strstr(msg, "/databases/") == NULL);
        }
    /* an insert whose WAL append fails (ENOSPC): the WAL's message names no path either */
    post_ok("/v2/vectordb/collections/create", "{\"collectionName\":\"walc\",\"dimension\":4}");
    sx__fault_set(SX__FAULT_WRITE, 1, ENOSPC, true);
    th_post("/v2/vectordb/entities/insert",
            "{\"collectionName\":\"walc\",\"data\":[{\"id\":1,\"vector\":[1,2,3,4]}]}", NULL);
    sx__fault_clear_all();
    const char *wmsg = json_string_value(json_object_get(th_last.json, "message"));
    printf("insert with a failing WAL write: %s\n", wmsg ? wmsg : "(none)");
    ASSERT(th_code() != 0 && wmsg != NULL);
    if (wmsg)
        ASSERT(strstr(wmsg, d) == NULL && strstr(wmsg, "/collections/") == NULL);
    /* and nothing of the failed creates is left */
    ASSERT(!listed("/v2/vectordb/collections/list", "{}", "nospace"));
    ASSERT(!listed("/v2/vectordb/databases/list", "{}", "nospace"));
    sx_status stop = sx_server_stop(s); /* the WAL of walc is FATAL (sticky) until a reopen */
    ASSERT(stop == SX_OK || stop == SX_EFATAL);
}

/* n copies of the 2-byte character U+00E9: the stored fields hold 1023 and 255 bytes, odd
 * counts, so a byte cut lands inside a character. */
static void utf8_text(char *buf, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        buf[k++] = '\xc3';
        buf[k++] = '\xa9';
    }
    buf[k] = '\0';
}

static bool valid_utf8_prefix(const char *got, const char *want)
{
    size_t n = strlen(got);
    if (n == 0 || strncmp(got, want, n) != 0)
        return false;
    /* ends at a character boundary of want */
    return (want[n] & 0xC0) != 0x80;
}

static void test_utf8_desc(void)
{
    const char *dir = test_tmpdir("ddl_utf8");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx_server *s = th_server_start(d, NULL);
    ASSERT(s != NULL);
    static char desc[4200], fdesc[1200], body[8192];
    utf8_text(desc, 2000); /* 4000 bytes: over the stored 1023 */
    utf8_text(fdesc, 500); /* 1000 bytes: over the stored 255 */
    snprintf(body, sizeof body,
             "{\"collectionName\":\"descs\",\"description\":\"%s\",\"schema\":{\"fields\":["
             "{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true,"
             "\"description\":\"%s\"},"
             "{\"fieldName\":\"v\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":4}}"
             "]}}",
             desc, fdesc);
    post_ok("/v2/vectordb/collections/create", body);
    for (int round = 0; round < 2; round++) {
        th_post("/v2/vectordb/collections/describe", "{\"collectionName\":\"descs\"}", NULL);
        json_t *data = json_object_get(th_last.json, "data");
        const char *got = json_string_value(json_object_get(data, "description"));
        ASSERT(got != NULL);
        if (got)
            ASSERT(strlen(got) > 900 && valid_utf8_prefix(got, desc));
        json_t *f0 = json_array_get(json_object_get(data, "fields"), 0);
        const char *fgot = json_string_value(json_object_get(f0, "description"));
        ASSERT(fgot != NULL);
        if (fgot)
            ASSERT(strlen(fgot) > 200 && valid_utf8_prefix(fgot, fdesc));
        /* and the same after a restart (the metadata file has it) */
        ASSERT_OK(sx_server_stop(s));
        s = th_server_start(d, NULL);
        ASSERT(s != NULL);
    }
    ASSERT_OK(sx_server_stop(s));
}

static sx__catalog *open_cat(const char *dir)
{
    sx_db_options o = { 0 };
    o.build_threads = 1;
    o.search_threads = 1;
    sx__catalog *cat = NULL;
    ASSERT_OK(sx__cat_open(dir, &o, &cat));
    return cat;
}

static void quick_meta(sx__coll_meta *m, const char *name)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->vecs[0].metric = SX_METRIC_L2;
    snprintf(m->fields[0].name, sizeof m->fields[0].name, "id");
    snprintf(m->fields[0].type, sizeof m->fields[0].type, "Int64");
    m->fields[0].is_primary = true;
    snprintf(m->fields[1].name, sizeof m->fields[1].name, "v");
    snprintf(m->fields[1].type, sizeof m->fields[1].type, "FloatVector");
    m->fields[1].dim = 4;
    m->n_fields = 2;
}

typedef struct racer {
    sx__catalog *cat;
    atomic_bool stop;
    atomic_long found;
} racer;

static void *lookup_loop(void *p)
{
    racer *r = p;
    static _Thread_local sx__coll_meta m;
    while (!atomic_load(&r->stop)) {
        sx_collection *h = NULL;
        if (sx__cat_coll_get(r->cat, "racy", "c", &h, &m) == SX_OK) {
            uint64_t n = 0;
            if (sx_count(h, NULL, &n) != SX_OK)
                n = 0;
            sx_collection_release(h);
            atomic_fetch_add(&r->found, 1);
        }
    }
    return NULL;
}

static void test_drop_in_use(void)
{
    const char *dir = test_tmpdir("ddl_inuse");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx__catalog *cat = open_cat(d);
    ASSERT(cat != NULL);
    static sx__coll_meta m, g;
    ASSERT_OK(sx__cat_db_create(cat, "busy"));
    quick_meta(&m, "c");
    ASSERT_OK(sx__cat_coll_create(cat, "busy", &m));
    sx_collection *h = NULL;
    ASSERT_OK(sx__cat_coll_get(cat, "busy", "c", &h, &g));
    int64_t ids[3] = { 1, 2, 3 };
    float v[12] = { 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6 };
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { 3, cols, 2 };
    ASSERT_OK(sx_insert(h, &b, NULL));
    ASSERT_OK(sx_flush(h));
    ASSERT_OK(sx__cat_coll_drop(cat, "busy", "c"));
    ASSERT_OK(sx__cat_db_drop(cat, "busy")); /* closes the database's sx_db */
    /* the request that took h before the drops finishes with it */
    sx_search_req q = { v, 1, 2, 0, NULL, NULL, 0, NULL, 0, -1 };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(h, &q, &rs));
    ASSERT_EQ(rs->n_rows, 2);
    sx_rowset_free(rs);
    uint64_t n = 0;
    ASSERT_OK(sx_count(h, NULL, &n));
    ASSERT_EQ(n, 3);
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(h, &ii));
    ASSERT_STATUS(sx_insert(h, &b, NULL), SX_ENOTFOUND);
    sx_collection_release(h);

    /* lookups racing with create/drop cycles of their database */
    racer r = { .cat = cat };
    atomic_init(&r.stop, false);
    atomic_init(&r.found, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ASSERT(pthread_create(&t[i], NULL, lookup_loop, &r) == 0);
    for (int i = 0; i < 40; i++) {
        ASSERT_OK(sx__cat_db_create(cat, "racy"));
        quick_meta(&m, "c");
        ASSERT_OK(sx__cat_coll_create(cat, "racy", &m));
        long f0 = atomic_load(&r.found); /* let a lookup find it (at most ~100 ms) */
        for (int w = 0; w < 1000 && atomic_load(&r.found) == f0; w++)
            usleep(100);
        ASSERT_OK(sx__cat_coll_drop(cat, "racy", "c"));
        ASSERT_OK(sx__cat_db_drop(cat, "racy"));
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("drop in use: %ld lookups found the collection during 40 cycles\n",
           atomic_load(&r.found));
    ASSERT_OK(sx__cat_close(cat));
}

/* The engine (C API) takes names of SX_MAX_NAME bytes too: its staging directories (.tmp-,
 * .drop-) used to add their prefix to the name and fail with "File name too long". */
static void test_engine_long_name(void)
{
    const char *dir = test_tmpdir("ddl_engine_name");
    char d[512], name[256];
    snprintf(d, sizeof d, "%s", dir);
    long_name(name, SX_MAX_NAME, 'e');
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(d, NULL, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0 } };
    sx_collection_def def = { name, f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *h = NULL;
    ASSERT_OK(sx_collection_open(db, name, &h));
    int64_t ids[2] = { 1, 2 };
    float v[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { 2, cols, 2 };
    ASSERT_OK(sx_insert(h, &b, NULL));
    ASSERT_OK(sx_flush(h));
    sx_collection_release(h);
    sx_db_close(db);
    ASSERT_OK(sx_db_open(d, NULL, &db));
    ASSERT_OK(sx_collection_open(db, name, &h));
    uint64_t n = 0;
    ASSERT_OK(sx_count(h, NULL, &n));
    ASSERT_EQ(n, 2);
    sx_collection_release(h);
    ASSERT_OK(sx_collection_drop(db, name));
    sx_db_close(db);
    char path[1024];
    snprintf(path, sizeof path, "%s/collections", d);
    ASSERT_EQ(count_dir(path), 0);
}

/* Data directories of earlier versions: databases/NAME/ whose db.properties.json has no "name"
 * (the directory's name was the database's) still open under that name, with their id and
 * collections; a drop of one goes through the same atomic rename. */
static void test_old_layout(void)
{
    const char *dir = test_tmpdir("ddl_old");
    char d[512], path[1024];
    snprintf(d, sizeof d, "%s", dir);
    /* a collection made in a database, then the database's file rewritten in the old form */
    sx__catalog *cat = open_cat(d);
    ASSERT(cat != NULL);
    ASSERT_OK(sx__cat_db_create(cat, "legacy"));
    static sx__coll_meta m;
    quick_meta(&m, "old_coll");
    ASSERT_OK(sx__cat_coll_create(cat, "legacy", &m));
    ASSERT_OK(sx__cat_close(cat));
    snprintf(path, sizeof path, "%s/databases/legacy/rest/db.properties.json", d);
    const char *old = "{\"id\": 77, \"properties\": {\"k\": \"v\"}}";
    ASSERT_OK(sx__fs_write_atomic(path, old, strlen(old)));
    cat = open_cat(d);
    ASSERT(cat != NULL);
    json_t *props = NULL;
    int64_t id = 0;
    ASSERT_OK(sx__cat_db_describe(cat, "legacy", &props, &id));
    ASSERT_EQ(id, 77);
    ASSERT(strcmp(json_string_value(json_object_get(props, "k")), "v") == 0);
    json_decref(props);
    static sx__coll_meta g;
    ASSERT_OK(sx__cat_coll_get(cat, "legacy", "old_coll", NULL, &g));
    ASSERT_OK(sx__cat_coll_drop(cat, "legacy", "old_coll"));
    ASSERT_OK(sx__cat_db_drop(cat, "legacy"));
    ASSERT_OK(sx__cat_close(cat));
    cat = open_cat(d);
    ASSERT(cat != NULL);
    ASSERT(!sx__cat_db_exists(cat, "legacy"));
    ASSERT_OK(sx__cat_close(cat));
    snprintf(path, sizeof path, "%s/databases", d);
    ASSERT_EQ(count_dir(path), 0);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_drop_releases);
    RUN(test_drop_in_use);
    RUN(test_long_names);
    RUN(test_engine_long_name);
    RUN(test_old_layout);
    RUN(test_no_paths);
    RUN(test_utf8_desc);
    curl_global_cleanup();
    return TEST_DONE();
}
