/*
 * test_server_collections.c: the collection, index, partition and database handlers
 * (src/server/handlers_collections.c, handlers_indexes.c, handlers_admin.c) called directly,
 * without HTTP: a hand-built sx__req over a catalog in a temporary directory, the route found in
 * the route tables by its path. Asserts Milvus's codes, messages and response shapes
 * (milvus-rest-v2.md sections 5, 7, 8).
 */
#include <math.h>
#include <pthread.h>
#include <sextant.h>

#include "harness.h"
#include "server/server.h"

static sx__catalog *cat;
static sx_server_options sopts;

static const sx__route *find_route(const char *path)
{
    const sx__route *tables[] = { sx__routes_collections, sx__routes_indexes, sx__routes_admin,
                                  sx__routes_entities };
    for (size_t t = 0; t < 4; t++)
        for (const sx__route *r = tables[t]; r->path; r++)
            if (strcmp(r->path, path) == 0)
                return r;
    return NULL;
}

/* Calls the handler of `path` (without the /v2/vectordb/ prefix) with a JSON body. Returns the
 * response body (owned). */
static json_t *call(const char *path, const char *body)
{
    char full[256];
    snprintf(full, sizeof full, "/v2/vectordb/%s", path);
    const sx__route *r = find_route(full);
    if (!r)
        FAILF("no route %s", full);
    json_error_t err;
    json_t *b = json_loads(body, 0, &err);
    if (!b)
        FAILF("bad test body %s: %s", body, err.text);
    sx__req rq = { 0 };
    rq.cat = cat;
    rq.opts = &sopts;
    rq.body = b;
    const char *db = NULL;
    rq.db_name = sx__jstr(b, "dbName", &db) == 0 && db && *db ? db : "default";
    rq.int64_as_string = false;
    rq.timeout_s = 30;
    sx__resp rs = { 200, NULL, NULL, 0 };
    r->fn(&rq, &rs);
    json_decref(b);
    if (rs.http_status != 200)
        FAILF("%s: http status %d", full, rs.http_status);
    json_t *out = sx__resp_json(&rs);
    if (!out)
        out = json_pack("{s:i,s:{}}", "code", 0, "data");
    return out;
}

static int code_of(const json_t *j)
{
    return (int)json_integer_value(json_object_get(j, "code"));
}

static const char *msg_of(const json_t *j)
{
    const char *m = json_string_value(json_object_get(j, "message"));
    return m ? m : "";
}

/* Calls and checks the code; returns the response (owned). */
static json_t *expect(const char *path, const char *body, int want)
{
    json_t *r = call(path, body);
    if (code_of(r) != want) {
        char *s = json_dumps(r, JSON_COMPACT);
        fprintf(stderr, "%s %s -> %s\n", path, body, s);
        free(s);
        json_decref(r);
        FAILF("%s: code %d, want %d", path, code_of(r), want);
    }
    if (want != 0 && json_object_get(r, "data"))
        FAILF("%s: an error response must have no data key", path);
    return r;
}

static void ok(const char *path, const char *body)
{
    json_decref(expect(path, body, 0));
}

static void expect_msg(const char *path, const char *body, int want, const char *needle)
{
    json_t *r = expect(path, body, want);
    if (!strstr(msg_of(r), needle)) {
        fprintf(stderr, "message: %s\n", msg_of(r));
        json_decref(r);
        FAILF("%s: message lacks \"%s\"", path, needle);
    }
    json_decref(r);
}

static const char *sget(const json_t *o, const char *path)
{
    /* dotted path of object keys */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *cur = o;
    char *save = NULL;
    for (char *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, k);
    return json_is_string(cur) ? json_string_value(cur) : NULL;
}

static long long iget(const json_t *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *cur = o;
    char *save = NULL;
    for (char *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, k);
    if (!json_is_integer(cur))
        FAILF("%s is not an integer", path);
    return (long long)json_integer_value(cur);
}

static bool str_array_is(const json_t *a, const char *const *want, size_t n)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!json_is_string(json_array_get(a, i)) ||
            strcmp(json_string_value(json_array_get(a, i)), want[i]) != 0)
            return false;
    return true;
}

static char cat_dir[512];

static void fresh_catalog(const char *tag)
{
    const char *dir = test_tmpdir(tag);
    snprintf(cat_dir, sizeof cat_dir, "%s", dir);
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    o.build_threads = 1;
    o.search_threads = 1;
    o.segment_max_bytes = 64 * 1024;
    ASSERT_OK(sx__cat_open(dir, &o, &cat));
}

static void close_catalog(void)
{
    ASSERT_OK(sx__cat_close(cat));
    cat = NULL;
}

/* Closes and reopens the catalog of the last fresh_catalog. */
static void reopen_catalog(void)
{
    close_catalog();
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    ASSERT_OK(sx__cat_open(cat_dir, &o, &cat));
}

/* ---------------------------------------------------------------- tests */

static void test_routes_table(void)
{
    const sx__route *tables[] = { sx__routes_collections, sx__routes_indexes, sx__routes_admin };
    size_t n = 0;
    for (size_t t = 0; t < 3; t++)
        for (const sx__route *r = tables[t]; r->path; r++) {
            ASSERT(strncmp(r->path, "/v2/vectordb/", 13) == 0);
            ASSERT(r->fn != NULL);
            n++;
        }
    ASSERT_EQ(n, 18 + 6 + 13 + 5); /* + aliases */
    ASSERT(find_route("/v2/vectordb/aliases/alter")->is_write);
    ASSERT(!find_route("/v2/vectordb/aliases/list")->is_write);
    ASSERT(find_route("/v2/vectordb/collections/create")->is_write);
    ASSERT(find_route("/v2/vectordb/collections/drop")->is_write);
    ASSERT(!find_route("/v2/vectordb/collections/describe")->is_write);
    ASSERT(!find_route("/v2/vectordb/collections/list")->is_write);
    ASSERT(find_route("/v2/vectordb/indexes/create")->is_write);
    ASSERT(!find_route("/v2/vectordb/indexes/describe")->is_write);
    ASSERT(find_route("/v2/vectordb/partitions/drop")->is_write);
    ASSERT(!find_route("/v2/vectordb/partitions/list")->is_write);
    ASSERT(find_route("/v2/vectordb/databases/create")->is_write);
    ASSERT(!find_route("/v2/vectordb/databases/list")->is_write);
}

static void test_missing_params(void)
{
    fresh_catalog("h_missing");
    /* every route with a required name answers 1802 on {} */
    const char *need[] = {
        "collections/create",
        "collections/describe",
        "collections/has",
        "collections/drop",
        "collections/get_stats",
        "collections/load",
        "collections/release",
        "collections/refresh_load",
        "collections/get_load_state",
        "collections/rename",
        "collections/alter_properties",
        "collections/drop_properties",
        "collections/flush",
        "collections/compact",
        "collections/fields/add",
        "collections/fields/alter_properties",
        "indexes/create",
        "indexes/describe",
        "indexes/list",
        "indexes/drop",
        "indexes/alter_properties",
        "indexes/drop_properties",
        "partitions/list",
        "partitions/create",
        "partitions/drop",
        "partitions/has",
        "partitions/get_stats",
        "partitions/load",
        "partitions/release",
        "databases/create",
        "databases/drop",
        "databases/describe",
        "databases/alter",
        "databases/drop_properties",
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        json_decref(expect(need[i], "{}", 1802));
    expect_msg("collections/describe", "{}", 1802,
               "missing required parameters, error: Key: 'CollectionNameReq.CollectionName' "
               "Error:Field validation for 'CollectionName' failed on the 'required' tag");
    expect_msg("collections/create", "{\"collectionName\":\"\"}", 1802,
               "'CollectionReq.CollectionName'");
    expect_msg("collections/rename", "{\"collectionName\":\"a\"}", 1802,
               "'RenameCollectionReq.NewCollectionName'");
    expect_msg("indexes/describe", "{\"collectionName\":\"a\"}", 1802, "'IndexReq.IndexName'");
    expect_msg("partitions/create", "{\"collectionName\":\"a\"}", 1802,
               "'PartitionReq.PartitionName'");
    expect_msg("databases/create", "{}", 1802, "'DatabaseReqWithProperties.DbName'");
    /* wrong type -> 1801 */
    json_decref(expect("collections/describe", "{\"collectionName\":5}", 1801));
    /* list routes need nothing */
    ok("collections/list", "{}");
    ok("databases/list", "{}");
    ok("collections/get_compaction_state", "{}");
    close_catalog();
}

/* New names are checked with Milvus's rules and texts before the file system sees them. */
static void test_name_rules(void)
{
    fresh_catalog("h_names");
    char long_name[300], body[400];
    memset(long_name, 'a', sizeof long_name);
    long_name[256] = '\0'; /* 255 is the most */
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\",\"dimension\":4}", long_name);
    expect_msg("collections/create", body, 1100,
               "the length of a collection name must be less than 255 characters");
    long_name[255] = '\0';
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\",\"dimension\":4}", long_name);
    json_decref(expect("collections/create", body, 0));
    expect_msg("collections/create", "{\"collectionName\":\"1abc\",\"dimension\":4}", 1100,
               "Invalid collection name: 1abc. the first character of a collection name must be an "
               "underscore or a letter.");
    expect_msg("collections/create", "{\"collectionName\":\"a-b\",\"dimension\":4}", 1100,
               "collection name can only contain numbers, letters and underscores.");
    expect_msg("collections/create", "{\"collectionName\":\"\",\"dimension\":4}", 1802,
               "CollectionName");
    expect_msg("collections/rename", "{\"collectionName\":\"x\",\"newCollectionName\":\"b c\"}",
               1100, "can only contain numbers, letters and underscores");
    json_decref(expect("collections/create", "{\"collectionName\":\"ok_1\",\"dimension\":4}", 0));
    expect_msg("aliases/create", "{\"collectionName\":\"ok_1\",\"aliasName\":\"9x\"}", 1100,
               "the first character of a collection alias must be an underscore or a letter.");
    /* nothing was made but the two good ones */
    json_t *r = expect("collections/list", "{}", 0);
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 2);
    json_decref(r);
    close_catalog();
}

static void test_unknown_collection(void)
{
    fresh_catalog("h_unknown");
    const char *b = "{\"collectionName\":\"nope\"}";
    expect_msg("collections/describe", b, 100,
               "can't find collection[database=default][collection=nope]");
    json_decref(expect("collections/get_stats", b, 100));
    json_decref(expect("collections/load", b, 100));
    json_decref(expect("collections/release", b, 100));
    json_decref(expect("collections/get_load_state", b, 100));
    json_decref(expect("collections/flush", b, 100));
    json_decref(expect("indexes/list", b, 100));
    json_decref(expect("partitions/list", b, 100));
    json_t *r = expect("collections/has", b, 0);
    ASSERT(json_is_false(json_object_get(json_object_get(r, "data"), "has")));
    json_decref(r);
    ok("collections/drop", b); /* missing = success */
    /* missing database */
    expect_msg("collections/describe", "{\"collectionName\":\"x\",\"dbName\":\"nodb\"}", 800,
               "database not found[database=nodb]");
    json_decref(expect("collections/list", "{\"dbName\":\"nodb\"}", 800));
    r = expect("collections/list", "{}", 0);
    ASSERT(json_is_array(json_object_get(r, "data")));
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 0);
    json_decref(r);
    close_catalog();
}

static void test_quick_create(void)
{
    fresh_catalog("h_quick");
    ok("collections/create", "{\"collectionName\":\"quick\",\"dimension\":4}");
    json_t *r = expect("collections/describe", "{\"collectionName\":\"quick\"}", 0);
    json_t *d = json_object_get(r, "data");
    ASSERT(strcmp(sget(d, "collectionName"), "quick") == 0);
    ASSERT(iget(d, "collectionID") > 0);
    ASSERT(json_is_false(json_object_get(d, "autoId")));
    json_t *fields = json_object_get(d, "fields");
    ASSERT_EQ(json_array_size(fields), 2); /* hidden columns are not listed */
    json_t *f0 = json_array_get(fields, 0), *f1 = json_array_get(fields, 1);
    ASSERT(strcmp(sget(f0, "name"), "id") == 0);
    ASSERT(strcmp(sget(f0, "type"), "Int64") == 0);
    ASSERT(json_is_true(json_object_get(f0, "primaryKey")));
    ASSERT_EQ(iget(f0, "id"), 100);
    ASSERT(strcmp(sget(f1, "name"), "vector") == 0);
    ASSERT(strcmp(sget(f1, "type"), "FloatVector") == 0);
    ASSERT_EQ(iget(f1, "id"), 101);
    json_t *p = json_array_get(json_object_get(f1, "params"), 0);
    ASSERT(strcmp(sget(p, "key"), "dim") == 0);
    ASSERT(strcmp(sget(p, "value"), "4") == 0);
    json_t *idx = json_array_get(json_object_get(d, "indexes"), 0);
    ASSERT(idx != NULL);
    ASSERT(strcmp(sget(idx, "fieldName"), "vector") == 0);
    ASSERT(strcmp(sget(idx, "indexName"), "vector") == 0);
    ASSERT(strcmp(sget(idx, "metricType"), "COSINE") == 0);
    ASSERT(strcmp(sget(d, "load"), "LoadStateLoaded") == 0);
    ASSERT_EQ(iget(d, "shardsNum"), 1);
    ASSERT_EQ(iget(d, "partitionsNum"), 1);
    ASSERT(strcmp(sget(d, "consistencyLevel"), "Bounded") == 0);
    ASSERT(json_is_true(json_object_get(d, "enableDynamicField")));
    ASSERT(json_is_array(json_object_get(d, "aliases")));
    ASSERT(json_is_array(json_object_get(d, "functions")));
    ASSERT(json_is_array(json_object_get(d, "properties")));
    ASSERT(strcmp(msg_of(r), "") == 0);
    json_decref(r);

    r = expect("indexes/list", "{\"collectionName\":\"quick\"}", 0);
    const char *want_idx[] = { "vector" };
    ASSERT(str_array_is(json_object_get(r, "data"), want_idx, 1));
    json_decref(r);
    r = expect("collections/get_load_state", "{\"collectionName\":\"quick\"}", 0);
    ASSERT(strcmp(sget(r, "data.loadState"), "LoadStateLoaded") == 0);
    ASSERT_EQ(iget(r, "data.loadProgress"), 100);
    json_decref(r);
    r = expect("indexes/describe", "{\"collectionName\":\"quick\",\"indexName\":\"vector\"}", 0);
    json_t *di = json_array_get(json_object_get(r, "data"), 0);
    ASSERT(di != NULL);
    ASSERT(strcmp(sget(di, "indexType"), "AUTOINDEX") == 0);
    ASSERT(strcmp(sget(di, "metricType"), "COSINE") == 0);
    ASSERT(strcmp(sget(di, "indexState"), "Finished") == 0);
    ASSERT(strcmp(sget(di, "fieldName"), "vector") == 0);
    ASSERT_EQ(iget(di, "totalRows"), 0);
    ASSERT(strcmp(sget(di, "failReason"), "") == 0);
    json_decref(r);
    expect_msg("indexes/describe", "{\"collectionName\":\"quick\",\"indexName\":\"other\"}", 700,
               "index not found[indexName=other]");
    r = expect("partitions/list", "{\"collectionName\":\"quick\"}", 0);
    const char *want_parts[] = { "_default" };
    ASSERT(str_array_is(json_object_get(r, "data"), want_parts, 1));
    json_decref(r);

    /* duplicate: same schema succeeds, another one fails */
    ok("collections/create", "{\"collectionName\":\"quick\",\"dimension\":4}");
    expect_msg("collections/create", "{\"collectionName\":\"quick\",\"dimension\":8}", 65535,
               "create duplicate collection with different parameters");

    /* quick-setup options */
    ok("collections/create", "{\"collectionName\":\"q2\",\"dimension\":\"3\",\"metricType\":\"L2\","
                             "\"idType\":\"VarChar\",\"params\":{\"max_length\":\"16\","
                             "\"enableDynamicField\":false},\"primaryFieldName\":\"pk\","
                             "\"vectorFieldName\":\"emb\",\"description\":\"two\"}");
    r = expect("collections/describe", "{\"collectionName\":\"q2\"}", 0);
    d = json_object_get(r, "data");
    f0 = json_array_get(json_object_get(d, "fields"), 0);
    ASSERT(strcmp(sget(f0, "name"), "pk") == 0);
    ASSERT(strcmp(sget(f0, "type"), "VarChar") == 0);
    p = json_array_get(json_object_get(f0, "params"), 0);
    ASSERT(strcmp(sget(p, "key"), "max_length") == 0);
    ASSERT(strcmp(sget(p, "value"), "16") == 0);
    ASSERT(strcmp(sget(json_array_get(json_object_get(d, "indexes"), 0), "metricType"), "L2") == 0);
    ASSERT(strcmp(sget(json_array_get(json_object_get(d, "indexes"), 0), "indexName"), "emb") == 0);
    ASSERT(json_is_false(json_object_get(d, "enableDynamicField")));
    ASSERT(strcmp(sget(d, "description"), "two") == 0);
    json_decref(r);
    /* booleans as Go's ParseBool spells them: "0" / "1" too (Milvus's REST tests send "0") */
    ok("collections/create", "{\"collectionName\":\"q0\",\"dimension\":2,"
                             "\"params\":{\"enableDynamicField\":\"0\"}}");
    r = expect("collections/describe", "{\"collectionName\":\"q0\"}", 0);
    ASSERT(json_is_false(json_object_get(json_object_get(r, "data"), "enableDynamicField")));
    json_decref(r);
    expect_msg("collections/create",
               "{\"collectionName\":\"q0b\",\"dimension\":2,"
               "\"params\":{\"enableDynamicField\":\"yes\"}}",
               1100, "enableDynamicField");
    ok("collections/create", "{\"collectionName\":\"q3\",\"dimension\":2,\"autoID\":true}");
    r = expect("collections/describe", "{\"collectionName\":\"q3\"}", 0);
    ASSERT(json_is_true(json_object_get(json_object_get(r, "data"), "autoId")));
    json_decref(r);

    /* quick-setup errors */
    expect_msg("collections/create", "{\"collectionName\":\"e1\"}", 1100,
               "dimension is required for quickly create collection");
    expect_msg("collections/create",
               "{\"collectionName\":\"e2\",\"dimension\":4,\"idType\":\"Int32\"}", 1100,
               "idType can only be [Int64, VarChar]");
    expect_msg("collections/create",
               "{\"collectionName\":\"e3\",\"dimension\":4,\"idType\":\"VarChar\"}", 1100,
               "max_length");
    json_decref(expect("collections/create",
                       "{\"collectionName\":\"e4\",\"dimension\":4,\"metricType\":\"HAMMING\"}",
                       1100));
    expect_msg(
        "collections/create",
        "{\"collectionName\":\"e5\",\"dimension\":4,\"params\":{\"consistencyLevel\":\"Weak\"}}",
        1100, "consistencyLevel can only be");
    json_decref(
        expect("collections/create", "{\"collectionName\":\"e6\",\"dimension\":\"x\"}", 1801));
    json_t *lr = expect("collections/list", "{}", 0);
    const char *want_list[] = { "q0", "q2", "q3", "quick" };
    ASSERT(str_array_is(json_object_get(lr, "data"), want_list, 4));
    json_decref(lr);
    ok("collections/create", "{\"collectionName\":\"q4\",\"dimension\":4,"
                             "\"params\":{\"consistencyLevel\":\"Strong\"}}");
    r = expect("collections/describe", "{\"collectionName\":\"q4\"}", 0);
    ASSERT(strcmp(sget(r, "data.consistencyLevel"), "Strong") == 0);
    json_decref(r);
    close_catalog();
}

#define CUSTOM                                                                                    \
 "{\"collectionName\":\"c\",\"metricType\":\"L2\",\"schema\":{\"autoID\":false,"                  \
 "\"enableDynamicField\":true,\"fields\":["                                                       \
 "{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true},"                              \
 "{\"fieldName\":\"vector\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":\"4\"}}," \
 "{\"fieldName\":\"color\",\"dataType\":\"VarChar\",\"elementTypeParams\":{\"max_length\":64}},"  \
 "{\"fieldName\":\"age\",\"dataType\":\"Int32\"},{\"fieldName\":\"doc\",\"dataType\":\"JSON\"}]}}"

static void test_custom_and_indexes(void)
{
    fresh_catalog("h_custom");
    ok("collections/create", CUSTOM);
    ok("collections/create", CUSTOM); /* same schema again */
    json_t *r = expect("collections/describe", "{\"collectionName\":\"c\"}", 0);
    json_t *d = json_object_get(r, "data");
    ASSERT(strcmp(sget(d, "load"), "LoadStateNotLoad") == 0);
    ASSERT_EQ(json_array_size(json_object_get(d, "indexes")), 0);
    json_t *fields = json_object_get(d, "fields");
    ASSERT_EQ(json_array_size(fields), 5);
    ASSERT(strcmp(sget(json_array_get(fields, 3), "type"), "Int32") == 0);
    ASSERT(strcmp(sget(json_array_get(fields, 4), "type"), "JSON") == 0);
    ASSERT(json_object_get(json_array_get(fields, 3), "params") == NULL);
    json_t *p = json_array_get(json_object_get(json_array_get(fields, 2), "params"), 0);
    ASSERT(strcmp(sget(p, "value"), "64") == 0);
    json_decref(r);

    r = expect("collections/get_load_state", "{\"collectionName\":\"c\"}", 0);
    ASSERT(strcmp(sget(r, "data.loadState"), "LoadStateNotLoad") == 0);
    ASSERT(json_object_get(json_object_get(r, "data"), "loadProgress") == NULL);
    json_decref(r);
    expect_msg("collections/load", "{\"collectionName\":\"c\"}", 700,
               "index not found[collection=c]");
    r = expect("indexes/list", "{\"collectionName\":\"c\"}", 0);
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 0);
    json_decref(r);
    expect_msg("indexes/describe", "{\"collectionName\":\"c\",\"indexName\":\"vector\"}", 700,
               "index not found");

    /* index errors */
    expect_msg("indexes/create",
               "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
               "\"metricType\":\"FOO\",\"indexType\":\"HNSW\"}]}",
               1100, "metric type FOO not found");
    expect_msg("indexes/create",
               "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
               "\"metricType\":\"L2\",\"params\":{\"index_type\":\"SCANN\"}}]}",
               701, "not supported by Sextant yet");
    json_decref(expect("indexes/create",
                       "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
                       "\"indexType\":\"FOO\"}]}",
                       1100));
    expect_msg("indexes/create",
               "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"nofield\"}]}", 1700,
               "field not found[field=nofield]");
    json_decref(expect("indexes/create", "{\"collectionName\":\"c\",\"indexParams\":[{}]}", 1802));
    json_decref(expect("indexes/create", "{\"collectionName\":\"c\"}", 1802));
    json_decref(expect("indexes/create",
                       "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
                       "\"indexType\":\"HNSW\",\"params\":{\"M\":\"abc\"}}]}",
                       1100));
    /* scalar index: accepted, nothing built or listed */
    ok("indexes/create", "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"color\","
                         "\"indexType\":\"INVERTED\"}]}");
    r = expect("indexes/list", "{\"collectionName\":\"c\"}", 0);
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 0);
    json_decref(r);

    /* the vector index, params as strings and numbers */
    const char *hnsw = "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
                       "\"indexName\":\"vidx\",\"metricType\":\"L2\",\"params\":{\"index_type\":"
                       "\"HNSW\",\"M\":\"16\",\"efConstruction\":200}}]}";
    ok("indexes/create", hnsw);
    ok("indexes/create", hnsw); /* the same again */
    /* the index fixed the metric */
    expect_msg("indexes/create",
               "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
               "\"indexName\":\"vidx\",\"metricType\":\"IP\",\"indexType\":\"HNSW\"}]}",
               1100, "drop the index to change the metric");
    expect_msg("indexes/create",
               "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
               "\"indexName\":\"vidx\",\"metricType\":\"L2\",\"params\":{\"index_type\":"
               "\"HNSW\",\"M\":32,\"efConstruction\":200}}]}",
               65535, "at most one distinct index");
    json_decref(expect("indexes/create",
                       "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
                       "\"indexName\":\"other\",\"metricType\":\"L2\"}]}",
                       65535));
    r = expect("indexes/list", "{\"collectionName\":\"c\"}", 0);
    const char *want_idx[] = { "vidx" };
    ASSERT(str_array_is(json_object_get(r, "data"), want_idx, 1));
    json_decref(r);
    r = expect("indexes/describe", "{\"collectionName\":\"c\",\"indexName\":\"vidx\"}", 0);
    json_t *di = json_array_get(json_object_get(r, "data"), 0);
    ASSERT(strcmp(sget(di, "indexType"), "HNSW") == 0);
    ASSERT(strcmp(sget(di, "metricType"), "L2") == 0);
    ASSERT(strcmp(sget(di, "indexName"), "vidx") == 0);
    ASSERT(strcmp(sget(di, "indexState"), "Finished") == 0);
    json_decref(r);
    ok("indexes/alter_properties", "{\"collectionName\":\"c\",\"indexName\":\"vidx\","
                                   "\"properties\":{\"mmap.enabled\":true}}");
    ok("indexes/drop_properties", "{\"collectionName\":\"c\",\"indexName\":\"vidx\","
                                  "\"propertyKeys\":[\"mmap.enabled\"]}");
    /* Milvus's one configurable index property: others, and empty lists, are refused */
    json_decref(expect("indexes/alter_properties",
                       "{\"collectionName\":\"c\",\"indexName\":\"vidx\","
                       "\"properties\":{\"nlist\":7}}",
                       SX__MC_INVALID_PARAM));
    json_decref(expect("indexes/alter_properties",
                       "{\"collectionName\":\"c\",\"indexName\":\"vidx\",\"properties\":{}}",
                       SX__MC_INVALID_PARAM));
    json_decref(expect("indexes/alter_properties",
                       "{\"collectionName\":\"c\",\"indexName\":\"vidx\","
                       "\"properties\":{\"mmap.enabled\":\"maybe\"}}",
                       SX__MC_INVALID_PARAM));
    json_decref(expect("indexes/drop_properties",
                       "{\"collectionName\":\"c\",\"indexName\":\"vidx\","
                       "\"propertyKeys\":[\"nope\"]}",
                       SX__MC_INVALID_PARAM));

    /* load, then the index cannot be dropped until release */
    ok("collections/load", "{\"collectionName\":\"c\"}");
    r = expect("collections/get_load_state", "{\"collectionName\":\"c\"}", 0);
    ASSERT(strcmp(sget(r, "data.loadState"), "LoadStateLoaded") == 0);
    ASSERT_EQ(iget(r, "data.loadProgress"), 100);
    json_decref(r);
    expect_msg("collections/get_load_state",
               "{\"collectionName\":\"c\",\"partitionNames\":[\"nop\"]}", 200,
               "partition not found[partition=nop]");
    expect_msg("indexes/drop", "{\"collectionName\":\"c\",\"indexName\":\"vidx\"}", 65535,
               "index cannot be dropped, collection is loaded, please release it first");
    ok("collections/release", "{\"collectionName\":\"c\"}");
    r = expect("collections/describe", "{\"collectionName\":\"c\"}", 0);
    ASSERT(strcmp(sget(r, "data.load"), "LoadStateNotLoad") == 0);
    json_decref(r);
    ok("indexes/drop", "{\"collectionName\":\"c\",\"indexName\":\"vidx\"}");
    ok("indexes/drop", "{\"collectionName\":\"c\",\"indexName\":\"vidx\"}"); /* missing: ok */
    r = expect("indexes/list", "{\"collectionName\":\"c\"}", 0);
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 0);
    json_decref(r);
    json_decref(expect("collections/load", "{\"collectionName\":\"c\"}", 700));
    /* without an index (and rows) the next index picks another metric */
    ok("indexes/create", "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
                         "\"metricType\":\"IP\",\"indexType\":\"FLAT\"}]}");
    r = expect("indexes/describe", "{\"collectionName\":\"c\",\"indexName\":\"vector\"}", 0);
    ASSERT(strcmp(sget(json_array_get(json_object_get(r, "data"), 0), "metricType"), "IP") == 0);
    json_decref(r);
    ok("indexes/drop", "{\"collectionName\":\"c\",\"indexName\":\"vector\"}");

    /* custom schema with indexParams: indexed and loaded by create */
    ok("collections/create",
       "{\"collectionName\":\"c2\",\"schema\":{\"fields\":["
       "{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true},"
       "{\"fieldName\":\"vector\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":4}},"
       "{\"fieldName\":\"color\",\"dataType\":\"VarChar\",\"elementTypeParams\":{\"max_length\":64}"
       "}]},"
       "\"indexParams\":[{\"fieldName\":\"vector\",\"indexName\":\"vector_idx\",\"metricType\":"
       "\"IP\","
       "\"params\":{\"index_type\":\"IVF_FLAT\",\"nlist\":16}}]}");
    r = expect("collections/describe", "{\"collectionName\":\"c2\"}", 0);
    d = json_object_get(r, "data");
    ASSERT(strcmp(sget(d, "load"), "LoadStateLoaded") == 0);
    ASSERT(json_is_false(json_object_get(d, "enableDynamicField")));
    ASSERT(strcmp(sget(json_array_get(json_object_get(d, "indexes"), 0), "metricType"), "IP") == 0);
    json_decref(r);
    r = expect("indexes/describe", "{\"collectionName\":\"c2\",\"indexName\":\"vector_idx\"}", 0);
    ASSERT(strcmp(sget(json_array_get(json_object_get(r, "data"), 0), "indexType"), "IVF_FLAT") ==
           0);
    json_decref(r);
    close_catalog();
}

static void test_schema_errors(void)
{
    fresh_catalog("h_schema");
#define F_ID      "{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true}"
#define F_VEC     "{\"fieldName\":\"v\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":4}}"
#define MK(extra) "{\"collectionName\":\"s\",\"schema\":{\"fields\":[" F_ID "," F_VEC extra "]}}"
    expect_msg("collections/create", MK(",{\"fieldName\":\"x\",\"dataType\":\"Int65\"}"), 1100,
               "data type Int65 is invalid(case sensitive).");
    expect_msg("collections/create", MK(",{\"fieldName\":\"x\",\"dataType\":\"int64\"}"), 1100,
               "data type int64 is invalid(case sensitive).");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"Array\",\"elementDataType\":\"Int64\"}"),
               1100, "type param(max_capacity) should be specified");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"Array\",\"elementDataType\":\"JSON\","
                  "\"elementTypeParams\":{\"max_capacity\":4}}"),
               1100, "elementDataType of the Array field x must be one of");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"Array\",\"elementDataType\":\"VarChar\","
                  "\"elementTypeParams\":{\"max_capacity\":4}}"),
               1100, "max_length");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"Array\",\"elementDataType\":\"Int8\","
                  "\"elementTypeParams\":{\"max_capacity\":4097}}"),
               1100, "in range 1..4096");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"Int8\",\"defaultValue\":128}"), 1100,
               "field x: the default value is not an integer in the field's range");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"Double\",\"defaultValue\":\"1\"}"), 1100,
               "not a finite number");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"VarChar\",\"elementTypeParams\":{"
                  "\"max_length\":2},\"defaultValue\":\"abc\"}"),
               1100, "longer than the field's max_length");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"JSON\",\"defaultValue\":{}}"), 1100,
               "scalar fields only");
    expect_msg("collections/create",
               "{\"collectionName\":\"s\",\"schema\":{\"fields\":[{\"fieldName\":\"id\","
               "\"dataType\":\"Int64\",\"isPrimary\":true,\"defaultValue\":1}," F_VEC "]}}",
               1100, "primary key cannot have a default");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"BinaryVector\",\"elementTypeParams\":{"
                  "\"dim\":12}}"),
               1100, "has to be multiple of 8");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"Int8Vector\",\"elementTypeParams\":{"
                  "\"dim\":8}}"),
               1100, "not supported by Sextant yet");
    /* sparse vectors: counted among the four vector fields, never nullable; without any vector
     * field the schema is refused */
    expect_msg("collections/create",
               "{\"collectionName\":\"s\",\"schema\":{\"fields\":[{\"fieldName\":\"id\","
               "\"dataType\":\"Int64\",\"isPrimary\":true},{\"fieldName\":\"x\",\"dataType\":"
               "\"Int64\"}]}}",
               1100, "schema does not contain vector field");
    expect_msg("collections/create",
               MK(",{\"fieldName\":\"x\",\"dataType\":\"SparseFloatVector\",\"nullable\":true}"),
               1100, "cannot be nullable");
#define F_VEC8(n) \
 ",{\"fieldName\":\"" n "\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":8}}"
    /* F_VEC and four more: a fifth vector field is refused as Milvus does */
    expect_msg("collections/create", MK(F_VEC8("x1") F_VEC8("x2") F_VEC8("x3") F_VEC8("x4")), 1100,
               "maximum vector field's number should be limited to 4");
    expect_msg("collections/create",
               MK(F_VEC8("x1") F_VEC8("x2")
                      F_VEC8("x3") ",{\"fieldName\":\"x4\",\"dataType\":\"SparseFloatVector\"}"),
               1100, "maximum vector field's number should be limited to 4");
#undef F_VEC8
    expect_msg("collections/create",
               "{\"collectionName\":\"s\",\"schema\":{\"fields\":["
               "{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true,"
               "\"nullable\":true}," F_VEC "]}}",
               1100, "the primary key field id cannot be nullable");
    expect_msg("collections/create", MK(",{\"fieldName\":\"x\",\"dataType\":\"VarChar\"}"), 1100,
               "max_length");
    expect_msg("collections/create",
               "{\"collectionName\":\"s\",\"schema\":{\"fields\":[" F_VEC "]}}", 1100,
               "primary key");
    expect_msg("collections/create",
               "{\"collectionName\":\"s\",\"schema\":{\"fields\":[" F_ID "]}}", 1100,
               "vector field");
    expect_msg("collections/create",
               "{\"collectionName\":\"s\",\"schema\":{\"fields\":[" F_ID ","
               "{\"fieldName\":\"v\",\"dataType\":\"FloatVector\"}]}}",
               1100, "dim");
    expect_msg("collections/create",
               "{\"collectionName\":\"s\",\"schema\":{\"fields\":[" F_ID "," F_VEC "]},"
               "\"indexParams\":[{\"fieldName\":\"zz\",\"metricType\":\"L2\"}]}",
               1802, "`zz` hasn't defined in schema");
    json_decref(expect("collections/create",
                       "{\"collectionName\":\"s\",\"schema\":{\"fields\":[" F_ID ","
                       "{\"dataType\":\"Int64\"}," F_VEC "]}}",
                       1802));
    json_t *r = expect("collections/list", "{}", 0);
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 0); /* nothing was created */
    json_decref(r);
    /* schema.autoID applies to the primary key */
    ok("collections/create",
       "{\"collectionName\":\"s\",\"schema\":{\"autoId\":true,\"fields\":[" F_ID "," F_VEC "]}}");
    r = expect("collections/describe", "{\"collectionName\":\"s\"}", 0);
    ASSERT(json_is_true(json_object_get(json_object_get(r, "data"), "autoId")));
    json_decref(r);
    close_catalog();
}

/* Inserts rows straight into the engine (the entities handlers are another file's). */
static void insert_rows(const char *coll, int64_t first, size_t n, const char *part)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = malloc(sizeof *m);
    ASSERT_OK(sx__cat_coll_get(cat, "default", coll, &h, m));
    int64_t ids[64];
    float vec[64 * 4];
    const char *meta[64], *parts[64];
    for (size_t i = 0; i < n; i++) {
        ids[i] = first + (int64_t)i;
        for (int k = 0; k < 4; k++)
            vec[i * 4 + (size_t)k] = (float)(i + 1) * 0.25f + (float)k;
        meta[i] = "{}";
        parts[i] = part;
    }
    sx_column cols[4] = { { "id", SX_FIELD_INT64, ids },
                          { "vector", SX_FIELD_FLOAT_VECTOR, vec },
                          { SX__META_FIELD, SX_FIELD_VARCHAR, meta },
                          { SX__PART_FIELD, SX_FIELD_VARCHAR, parts } };
    sx_batch b = { n, cols, 4 };
    ASSERT_OK(sx_insert(h, &b, NULL));
    sx_collection_release(h);
    free(m);
}

static void test_stats_partitions(void)
{
    fresh_catalog("h_parts");
    ok("collections/create", "{\"collectionName\":\"p\",\"dimension\":4}");
    insert_rows("p", 1, 3, "_default");
    json_t *r = expect("collections/get_stats", "{\"collectionName\":\"p\"}", 0);
    ASSERT_EQ(iget(r, "data.rowCount"), 3);
    json_decref(r);

    ok("partitions/create", "{\"collectionName\":\"p\",\"partitionName\":\"p1\"}");
    ok("partitions/create", "{\"collectionName\":\"p\",\"partitionName\":\"p1\"}"); /* again */
    json_decref(
        expect("partitions/create", "{\"collectionName\":\"p\",\"partitionName\":\"a b\"}", 1100));
    insert_rows("p", 100, 2, "p1");
    r = expect("partitions/list", "{\"collectionName\":\"p\"}", 0);
    const char *want[] = { "_default", "p1" };
    ASSERT(str_array_is(json_object_get(r, "data"), want, 2));
    json_decref(r);
    r = expect("partitions/has", "{\"collectionName\":\"p\",\"partitionName\":\"p1\"}", 0);
    ASSERT(json_is_true(json_object_get(json_object_get(r, "data"), "has")));
    json_decref(r);
    r = expect("partitions/get_stats", "{\"collectionName\":\"p\",\"partitionName\":\"p1\"}", 0);
    ASSERT_EQ(iget(r, "data.rowCount"), 2);
    json_decref(r);
    r = expect("partitions/get_stats", "{\"collectionName\":\"p\",\"partitionName\":\"_default\"}",
               0);
    ASSERT_EQ(iget(r, "data.rowCount"), 3);
    json_decref(r);
    expect_msg("partitions/get_stats", "{\"collectionName\":\"p\",\"partitionName\":\"zz\"}", 200,
               "partition not found[partition=zz]");
    r = expect("collections/describe", "{\"collectionName\":\"p\"}", 0);
    ASSERT_EQ(iget(r, "data.partitionsNum"), 2);
    json_decref(r);

    /* load / release of partitions */
    json_decref(
        expect("partitions/load", "{\"collectionName\":\"p\",\"partitionNames\":[\"zz\"]}", 200));
    json_decref(
        expect("partitions/load", "{\"collectionName\":\"p\",\"partitionNames\":[]}", 1802));
    ok("partitions/release", "{\"collectionName\":\"p\",\"partitionNames\":[\"p1\"]}");
    r = expect("collections/get_load_state", "{\"collectionName\":\"p\"}", 0);
    ASSERT(strcmp(sget(r, "data.loadState"), "LoadStateLoaded") == 0); /* some released */
    json_decref(r);
    ok("partitions/release", "{\"collectionName\":\"p\",\"partitionNames\":[\"p1\",\"_default\"]}");
    r = expect("collections/get_load_state", "{\"collectionName\":\"p\"}", 0);
    ASSERT(strcmp(sget(r, "data.loadState"), "LoadStateNotLoad") == 0);
    json_decref(r);
    ok("partitions/load", "{\"collectionName\":\"p\",\"partitionNames\":[\"p1\"]}");
    r = expect("collections/get_load_state", "{\"collectionName\":\"p\"}", 0);
    ASSERT(strcmp(sget(r, "data.loadState"), "LoadStateLoaded") == 0);
    json_decref(r);

    /* drop */
    expect_msg("partitions/drop", "{\"collectionName\":\"p\",\"partitionName\":\"_default\"}", 1100,
               "default partition cannot be deleted");
    ok("partitions/drop", "{\"collectionName\":\"p\",\"partitionName\":\"p1\"}");
    ok("partitions/drop", "{\"collectionName\":\"p\",\"partitionName\":\"p1\"}"); /* missing */
    r = expect("partitions/has", "{\"collectionName\":\"p\",\"partitionName\":\"p1\"}", 0);
    ASSERT(json_is_false(json_object_get(json_object_get(r, "data"), "has")));
    json_decref(r);
    r = expect("collections/get_stats", "{\"collectionName\":\"p\"}", 0);
    ASSERT_EQ(iget(r, "data.rowCount"), 3); /* its rows went with it */
    json_decref(r);

    /* partition limit */
    for (int i = 1; i < SX__MAX_PARTS; i++) {
        char b[128];
        snprintf(b, sizeof b, "{\"collectionName\":\"p\",\"partitionName\":\"x%d\"}", i);
        ok("partitions/create", b);
    }
    expect_msg("partitions/create", "{\"collectionName\":\"p\",\"partitionName\":\"one_more\"}",
               65535, "exceeds max configuration");

    /* flush, compact, load progress after flush (index builds in the background) */
    ok("collections/flush", "{\"collectionName\":\"p\"}");
    for (int tries = 0;; tries++) {
        r = expect("collections/get_load_state", "{\"collectionName\":\"p\"}", 0);
        const char *st = sget(r, "data.loadState");
        long long prog = iget(r, "data.loadProgress");
        bool done = strcmp(st, "LoadStateLoaded") == 0;
        if (!done) {
            ASSERT(strcmp(st, "LoadStateLoading") == 0);
            ASSERT(prog >= 0 && prog < 100);
        } else {
            ASSERT_EQ(prog, 100);
        }
        json_decref(r);
        if (done)
            break;
        ASSERT(tries < 2000);
        usleep(5000);
    }
    r = expect("indexes/describe", "{\"collectionName\":\"p\",\"indexName\":\"vector\"}", 0);
    json_t *di = json_array_get(json_object_get(r, "data"), 0);
    ASSERT_EQ(iget(di, "totalRows"), 5); /* the engine counts deleted rows until compaction */
    ASSERT_EQ(iget(di, "indexedRows"), 5);
    ASSERT_EQ(iget(di, "pendingRows"), 0);
    json_decref(r);
    r = expect("collections/compact", "{\"collectionName\":\"p\"}", 0);
    ASSERT(iget(r, "data.compactionID") > 0);
    json_decref(r);
    r = expect("collections/get_compaction_state", "{\"jobID\":1}", 0);
    ASSERT(strcmp(sget(r, "data.state"), "Completed") == 0);
    json_decref(r);
    close_catalog();
}

static void test_rename_properties(void)
{
    fresh_catalog("h_rename");
    ok("collections/create", "{\"collectionName\":\"a\",\"dimension\":4}");
    ok("collections/create", "{\"collectionName\":\"b\",\"dimension\":4}");
    ok("collections/rename", "{\"collectionName\":\"a\",\"newCollectionName\":\"a2\"}");
    json_decref(expect("collections/describe", "{\"collectionName\":\"a\"}", 100));
    json_t *r = expect("collections/describe", "{\"collectionName\":\"a2\"}", 0);
    ASSERT(strcmp(sget(r, "data.collectionName"), "a2") == 0);
    json_decref(r);
    json_decref(expect("collections/rename",
                       "{\"collectionName\":\"a\",\"newCollectionName\":\"x\"}", 100));
    json_decref(expect("collections/rename",
                       "{\"collectionName\":\"a2\",\"newCollectionName\":\"b\"}", 65535));
    json_decref(expect(
        "collections/rename",
        "{\"collectionName\":\"a2\",\"newCollectionName\":\"x\",\"newDbName\":\"nodb\"}", 800));
    /* a new collection may take the old name */
    ok("collections/create", "{\"collectionName\":\"a\",\"dimension\":2}");
    r = expect("collections/list", "{}", 0);
    const char *want[] = { "a", "a2", "b" };
    ASSERT(str_array_is(json_object_get(r, "data"), want, 3));
    json_decref(r);

    ok("collections/alter_properties", "{\"collectionName\":\"b\",\"properties\":{\"collection.ttl."
                                       "seconds\":60,\"mmap.enabled\":true}}");
    r = expect("collections/describe", "{\"collectionName\":\"b\"}", 0);
    json_t *props = json_object_get(json_object_get(r, "data"), "properties");
    ASSERT_EQ(json_array_size(props), 2);
    ASSERT(strcmp(sget(json_array_get(props, 0), "key"), "collection.ttl.seconds") == 0);
    ASSERT(strcmp(sget(json_array_get(props, 0), "value"), "60") == 0);
    ASSERT(strcmp(sget(json_array_get(props, 1), "value"), "true") == 0);
    json_decref(r);
    ok("collections/drop_properties",
       "{\"collectionName\":\"b\",\"propertyKeys\":[\"mmap.enabled\"]}");
    r = expect("collections/describe", "{\"collectionName\":\"b\"}", 0);
    ASSERT_EQ(json_array_size(json_object_get(json_object_get(r, "data"), "properties")), 1);
    json_decref(r);
    expect_msg("collections/fields/add", "{\"collectionName\":\"b\"}", 3000,
               "not supported by Sextant yet");
    json_decref(expect("collections/fields/alter_properties",
                       "{\"collectionName\":\"b\",\"fieldName\":\"vector\"}", 3000));
    ok("collections/refresh_load", "{\"collectionName\":\"b\"}");
    ok("collections/drop", "{\"collectionName\":\"b\"}");
    r = expect("collections/has", "{\"collectionName\":\"b\"}", 0);
    ASSERT(json_is_false(json_object_get(json_object_get(r, "data"), "has")));
    json_decref(r);
    close_catalog();
}

static void test_databases(void)
{
    fresh_catalog("h_db");
    json_t *r = expect("databases/list", "{}", 0);
    const char *w1[] = { "default" };
    ASSERT(str_array_is(json_object_get(r, "data"), w1, 1));
    json_decref(r);
    ok("databases/create", "{\"dbName\":\"db1\",\"properties\":{\"database.max.collections\":10}}");
    expect_msg("databases/create", "{\"dbName\":\"db1\"}", 65535, "database already exist: db1");
    expect_msg("databases/create", "{\"dbName\":\"1x\"}", 802,
               "invalid database name[database=1x]");
    r = expect("databases/list", "{}", 0);
    const char *w2[] = { "default", "db1" };
    ASSERT(str_array_is(json_object_get(r, "data"), w2, 2));
    json_decref(r);
    r = expect("databases/describe", "{\"dbName\":\"db1\"}", 0);
    ASSERT(strcmp(sget(r, "data.dbName"), "db1") == 0);
    ASSERT(iget(r, "data.dbID") > 1);
    json_t *props = json_object_get(json_object_get(r, "data"), "properties");
    ASSERT_EQ(json_array_size(props), 1);
    ASSERT(strcmp(sget(json_array_get(props, 0), "value"), "10") == 0);
    json_decref(r);
    ok("databases/alter", "{\"dbName\":\"db1\",\"properties\":{\"a\":\"x\"}}");
    ok("databases/drop_properties",
       "{\"dbName\":\"db1\",\"propertyKeys\":[\"database.max.collections\"]}");
    r = expect("databases/describe", "{\"dbName\":\"db1\"}", 0);
    props = json_object_get(json_object_get(r, "data"), "properties");
    ASSERT_EQ(json_array_size(props), 1);
    ASSERT(strcmp(sget(json_array_get(props, 0), "key"), "a") == 0);
    json_decref(r);
    expect_msg("databases/describe", "{\"dbName\":\"nodb\"}", 800,
               "database not found[database=nodb]");
    json_decref(expect("databases/alter", "{\"dbName\":\"nodb\"}", 800));

    /* a collection in db1 is invisible in default */
    ok("collections/create", "{\"dbName\":\"db1\",\"collectionName\":\"c\",\"dimension\":4}");
    r = expect("collections/list", "{\"dbName\":\"db1\"}", 0);
    const char *w3[] = { "c" };
    ASSERT(str_array_is(json_object_get(r, "data"), w3, 1));
    json_decref(r);
    r = expect("collections/list", "{}", 0);
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 0);
    json_decref(r);
    json_decref(expect("collections/describe", "{\"collectionName\":\"c\"}", 100));
    ok("collections/describe", "{\"dbName\":\"db1\",\"collectionName\":\"c\"}");
    expect_msg("databases/drop", "{\"dbName\":\"db1\"}", 65535, "not empty");
    expect_msg("databases/drop", "{\"dbName\":\"default\"}", 65535,
               "can not drop default database");
    ok("collections/drop", "{\"dbName\":\"db1\",\"collectionName\":\"c\"}");
    ok("databases/drop", "{\"dbName\":\"db1\"}");
    ok("databases/drop", "{\"dbName\":\"db1\"}"); /* missing: success */
    json_decref(expect("databases/describe", "{\"dbName\":\"db1\"}", 800));
    json_decref(expect("collections/create",
                       "{\"dbName\":\"db1\",\"collectionName\":\"c\",\"dimension\":4}", 800));
    close_catalog();
}

/* Array fields and default values survive a reopen of the catalog and are described as Milvus
 * describes them (elementType, max_capacity / max_length params, defaultValue). */
static void test_array_default_persist(void)
{
    const char *dir = test_tmpdir("h_arrdef");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    ASSERT_OK(sx__cat_open(d, &o, &cat));
    const char *create =
        "{\"collectionName\":\"ad\",\"schema\":{\"fields\":[" F_ID "," F_VEC ","
        "{\"fieldName\":\"tags\",\"dataType\":\"Array\",\"elementDataType\":\"VarChar\","
        "\"elementTypeParams\":{\"max_capacity\":\"5\",\"max_length\":12}},"
        "{\"fieldName\":\"grade\",\"dataType\":\"Int32\",\"defaultValue\":-3},"
        "{\"fieldName\":\"label\",\"dataType\":\"VarChar\",\"elementTypeParams\":{\"max_length\":"
        "9},\"defaultValue\":\"none\",\"nullable\":true}]}}";
    ok("collections/create", create);
    ok("collections/create", create); /* the same schema again: fine */
    ok("aliases/create", "{\"collectionName\":\"ad\",\"aliasName\":\"ad_live\"}");
    close_catalog();
    ASSERT_OK(sx__cat_open(d, &o, &cat));
    json_t *r = expect("collections/describe", "{\"collectionName\":\"ad\"}", 0);
    json_t *fields = json_object_get(json_object_get(r, "data"), "fields");
    ASSERT_EQ(json_array_size(fields), 5);
    json_t *tags = json_array_get(fields, 2), *grade = json_array_get(fields, 3);
    ASSERT(strcmp(sget(tags, "type"), "Array") == 0);
    ASSERT(strcmp(sget(tags, "elementType"), "VarChar") == 0);
    json_t *ps = json_object_get(tags, "params");
    ASSERT(strcmp(sget(json_array_get(ps, 0), "key"), "max_capacity") == 0);
    ASSERT(strcmp(sget(json_array_get(ps, 0), "value"), "5") == 0);
    ASSERT(strcmp(sget(json_array_get(ps, 1), "value"), "12") == 0);
    ASSERT_EQ(json_integer_value(json_object_get(grade, "defaultValue")), -3);
    ASSERT(strcmp(json_string_value(json_object_get(json_array_get(fields, 4), "defaultValue")),
                  "none") == 0);
    /* the alias survived the reopen */
    json_t *al = json_object_get(json_object_get(r, "data"), "aliases");
    ASSERT(json_array_size(al) == 1);
    ASSERT(strcmp(json_string_value(json_array_get(al, 0)), "ad_live") == 0);
    json_t *ra = expect("aliases/describe", "{\"aliasName\":\"ad_live\"}", 0);
    ASSERT(strcmp(sget(json_object_get(ra, "data"), "collectionName"), "ad") == 0);
    json_decref(ra);
    /* nullable persisted too (label), and only where declared */
    ASSERT(json_is_true(json_object_get(json_array_get(fields, 4), "nullable")));
    ASSERT(json_is_false(json_object_get(grade, "nullable")));
    json_decref(r);
    /* another default is another schema: refused as an existing collection */
    const char *other =
        "{\"collectionName\":\"ad\",\"schema\":{\"fields\":[" F_ID "," F_VEC ","
        "{\"fieldName\":\"tags\",\"dataType\":\"Array\",\"elementDataType\":\"VarChar\","
        "\"elementTypeParams\":{\"max_capacity\":\"5\",\"max_length\":12}},"
        "{\"fieldName\":\"grade\",\"dataType\":\"Int32\",\"defaultValue\":4},"
        "{\"fieldName\":\"label\",\"dataType\":\"VarChar\",\"elementTypeParams\":{\"max_length\":"
        "9},\"defaultValue\":\"none\",\"nullable\":true}]}}";
    json_t *e = call("collections/create", other);
    ASSERT(e && json_integer_value(json_object_get(e, "code")) != 0);
    json_decref(e);
    close_catalog();
}

static void test_persistence(void)
{
    const char *dir = test_tmpdir("h_persist");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    ASSERT_OK(sx__cat_open(d, &o, &cat));
    ok("collections/create", "{\"collectionName\":\"k\",\"dimension\":4,\"metricType\":\"IP\"}");
    ok("collections/create", CUSTOM);
    ok("collections/rename", "{\"collectionName\":\"c\",\"newCollectionName\":\"c9\"}");
    close_catalog();
    ASSERT_OK(sx__cat_open(d, &o, &cat));
    json_t *r = expect("collections/describe", "{\"collectionName\":\"k\"}", 0);
    ASSERT(strcmp(sget(r, "data.load"), "LoadStateLoaded") == 0);
    ASSERT(strcmp(sget(json_array_get(json_object_get(json_object_get(r, "data"), "indexes"), 0),
                       "metricType"),
                  "IP") == 0);
    json_decref(r);
    r = expect("collections/describe", "{\"collectionName\":\"c9\"}", 0);
    ASSERT(strcmp(sget(r, "data.load"), "LoadStateNotLoad") == 0);
    ASSERT_EQ(json_array_size(json_object_get(json_object_get(r, "data"), "fields")), 5);
    json_decref(r);
    close_catalog();
}

/* ---------------------------------------------------------------- metric chosen by the index */

/* The engine collection behind a client name, and a search of q (filter optional). */
static sx_rowset *engine_search(const char *coll, const float *q, uint32_t k, const char *filter)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = malloc(sizeof *m);
    ASSERT_OK(sx__cat_coll_get(cat, "default", coll, &h, m));
    free(m);
    sx_search_req req = { 0 };
    req.queries = q;
    req.nq = 1;
    req.k = k;
    req.filter = filter;
    req.metric = -1;
    sx_param ef = { "ef", "64" };
    req.params = &ef;
    req.n_params = 1;
    sx_rowset *rs = NULL;
    sx_status st = sx_search(h, &req, &rs);
    sx_collection_release(h);
    ASSERT_OK(st);
    return rs;
}

static sx__coll_meta *meta_of(const char *coll)
{
    static sx__coll_meta m;
    ASSERT_OK(sx__cat_coll_get(cat, "default", coll, NULL, &m));
    return &m;
}

#define DEMO_CREATE                                                                                \
 "{\"collectionName\":\"demo_http\",\"schema\":{\"autoID\":false,\"enableDynamicField\":false,"    \
 "\"fields\":[{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true},"                   \
 "{\"fieldName\":\"vector\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":4}},"      \
 "{\"fieldName\":\"color\",\"dataType\":\"VarChar\",\"elementTypeParams\":{\"max_length\":32}}]}," \
 "\"metricType\":\"COSINE\",\"primaryFieldName\":\"id\",\"vectorFieldName\":\"vector\","           \
 "\"dbName\":\"default\"}"

/* milvus-rest-v2.md section 11: custom schema without indexParams (the SDK's COSINE default is
 * ignored), insert, createIndex L2, load, search with squared-L2 distances. */
static void test_sdk_flow_metric_from_index(void)
{
    fresh_catalog("h_sdk_flow");
    ok("collections/create", DEMO_CREATE);
    ASSERT(meta_of("demo_http")->vecs[0].metric_pending);
    ASSERT_EQ(meta_of("demo_http")->vecs[0].metric, SX_METRIC_L2);
    ok("collections/create", DEMO_CREATE); /* repeated: still the same collection */
    json_t *r = expect("entities/insert",
                       "{\"collectionName\":\"demo_http\",\"data\":["
                       "{\"id\":1,\"vector\":[0.1,0.2,0.3,0.4],\"color\":\"red\"},"
                       "{\"id\":2,\"vector\":[0.5,0.6,0.7,0.8],\"color\":\"blue\"},"
                       "{\"id\":3,\"vector\":[0.9,0.1,0.2,0.3],\"color\":\"red\"}],"
                       "\"dbName\":\"default\"}",
                       0);
    ASSERT_EQ(iget(r, "data.insertCount"), 3);
    json_decref(r);
    ok("indexes/create",
       "{\"collectionName\":\"demo_http\",\"indexParams\":[{\"fieldName\":\"vector\","
       "\"indexName\":\"vector_idx\",\"metricType\":\"L2\",\"params\":{\"index_type\":\"HNSW\","
       "\"M\":16,\"efConstruction\":200}}],\"dbName\":\"default\"}");
    ok("collections/load", "{\"collectionName\":\"demo_http\",\"dbName\":\"default\"}");
    r = expect("collections/get_load_state", "{\"collectionName\":\"demo_http\"}", 0);
    ASSERT(strcmp(sget(r, "data.loadState"), "LoadStateLoaded") == 0);
    json_decref(r);
    r = expect("collections/describe", "{\"collectionName\":\"demo_http\"}", 0);
    ASSERT(strcmp(sget(json_array_get(json_object_get(json_object_get(r, "data"), "indexes"), 0),
                       "metricType"),
                  "L2") == 0);
    json_decref(r);
    r = expect("indexes/describe",
               "{\"collectionName\":\"demo_http\",\"indexName\":\"vector_idx\"}", 0);
    ASSERT(strcmp(sget(json_array_get(json_object_get(r, "data"), 0), "metricType"), "L2") == 0);
    json_decref(r);
    ASSERT(!meta_of("demo_http")->vecs[0].metric_pending);
    ASSERT_EQ(meta_of("demo_http")->vecs[0].metric, SX_METRIC_L2);
    /* the search of the example: squared L2 */
    static const float q[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
    sx_rowset *rs = engine_search("demo_http", q, 2, "color == \"red\"");
    ASSERT_EQ(rs->n_rows, 2);
    ASSERT_EQ(((int64_t *)rs->cols[0].data)[0], 1);
    ASSERT_NEAR(rs->distances[0], 0.0, 1e-6);
    ASSERT_EQ(((int64_t *)rs->cols[0].data)[1], 3);
    ASSERT_NEAR(rs->distances[1], 0.67, 1e-5);
    sx_rowset_free(rs);
    /* through the search route too, when the collection is loaded */
    r = expect(
        "entities/search",
        "{\"collectionName\":\"demo_http\",\"data\":[[0.1,0.2,0.3,0.4]],\"annsField\":"
        "\"vector\",\"filter\":\"color == \\\"red\\\"\",\"limit\":2,\"outputFields\":[\"id\","
        "\"color\"],\"searchParams\":{\"metricType\":\"L2\",\"params\":{\"ef\":64}},"
        "\"dbName\":\"default\"}",
        0);
    json_t *hits = json_object_get(r, "data");
    ASSERT_EQ(json_array_size(hits), 2);
    ASSERT_NEAR(json_number_value(json_object_get(json_array_get(hits, 1), "distance")), 0.67,
                1e-5);
    json_decref(r);
    /* the metric persists, and no longer pending */
    reopen_catalog();
    ASSERT(!meta_of("demo_http")->vecs[0].metric_pending);
    ASSERT_EQ(meta_of("demo_http")->vecs[0].metric, SX_METRIC_L2);
    close_catalog();
}

/* A pending collection with rows (sealed and growing, auto ids, dynamic and partition columns)
 * whose first index asks for COSINE: every row survives, normalised; distances are cosine
 * similarities. Then the COSINE rows cannot go back to L2. */
static void test_pending_to_cosine_with_rows(void)
{
    fresh_catalog("h_to_cosine");
    ok("collections/create",
       "{\"collectionName\":\"cc\",\"metricType\":\"COSINE\",\"schema\":{\"autoID\":true,"
       "\"enableDynamicField\":true,\"fields\":["
       "{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true},"
       "{\"fieldName\":\"vector\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":4}},"
       "{\"fieldName\":\"color\",\"dataType\":\"VarChar\",\"elementTypeParams\":{\"max_length\":32}"
       "}]}}");
    ok("partitions/create", "{\"collectionName\":\"cc\",\"partitionName\":\"p1\"}");
    ok("entities/insert", "{\"collectionName\":\"cc\",\"data\":["
                          "{\"vector\":[0.1,0.2,0.3,0.4],\"color\":\"red\",\"extra\":7},"
                          "{\"vector\":[0.5,0.6,0.7,0.8],\"color\":\"blue\"}]}");
    ok("collections/flush", "{\"collectionName\":\"cc\"}"); /* sealed rows */
    ok("entities/insert", "{\"collectionName\":\"cc\",\"partitionName\":\"p1\",\"data\":["
                          "{\"vector\":[0.9,0.1,0.2,0.3],\"color\":\"red\"},"
                          "{\"vector\":[2,0,0,0],\"color\":\"green\"}]}");
    ASSERT(meta_of("cc")->vecs[0].metric_pending);
    ok("indexes/create", "{\"collectionName\":\"cc\",\"indexParams\":[{\"fieldName\":\"vector\","
                         "\"metricType\":\"COSINE\",\"indexType\":\"HNSW\"}]}");
    ASSERT(!meta_of("cc")->vecs[0].metric_pending);
    ASSERT_EQ(meta_of("cc")->vecs[0].metric, SX_METRIC_COSINE);
    ok("collections/load", "{\"collectionName\":\"cc\"}");
    for (int pass = 0; pass < 2; pass++) {
        json_t *r = expect("collections/describe", "{\"collectionName\":\"cc\"}", 0);
        ASSERT(
            strcmp(sget(json_array_get(json_object_get(json_object_get(r, "data"), "indexes"), 0),
                        "metricType"),
                   "COSINE") == 0);
        json_decref(r);
        r = expect("collections/get_stats", "{\"collectionName\":\"cc\"}", 0);
        ASSERT_EQ(iget(r, "data.rowCount"), 4);
        json_decref(r);
        /* every row, with its auto id, dynamic field and partition */
        sx_collection *h = NULL;
        sx__coll_meta *m = malloc(sizeof *m);
        ASSERT_OK(sx__cat_coll_get(cat, "default", "cc", &h, m));
        free(m);
        int64_t keys[] = { 1, 2, 3, 4 };
        sx_keys k = { 4, keys, NULL };
        const char *of[] = { "vector", SX__META_FIELD, SX__PART_FIELD };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_get(h, &k, of, 3, &rs));
        sx_collection_release(h);
        ASSERT_EQ(rs->n_rows, 4);
        const float *v = rs->cols[1].data;
        ASSERT_NEAR(v[3 * 4], 1.0, 1e-6); /* [2,0,0,0] normalised */
        ASSERT_NEAR(v[0], 0.1 / sqrt(0.30), 1e-6);
        ASSERT(strstr(((char **)rs->cols[2].data)[0], "extra") != NULL);
        ASSERT(strcmp(((char **)rs->cols[3].data)[0], "_default") == 0);
        ASSERT(strcmp(((char **)rs->cols[3].data)[2], "p1") == 0);
        sx_rowset_free(rs);
        static const float q[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
        rs = engine_search("cc", q, 4, NULL);
        ASSERT_EQ(rs->n_rows, 4);
        ASSERT_EQ(((int64_t *)rs->cols[0].data)[0], 1);
        ASSERT_NEAR(rs->distances[0], 1.0, 1e-5);
        ASSERT_EQ(((int64_t *)rs->cols[0].data)[1], 2);
        ASSERT_NEAR(rs->distances[1], 0.70 / (sqrt(0.30) * sqrt(1.74)), 1e-5);
        ASSERT_EQ(((int64_t *)rs->cols[0].data)[3], 4);
        ASSERT_NEAR(rs->distances[3], 0.1 / sqrt(0.30), 1e-5);
        sx_rowset_free(rs);
        if (pass == 0)
            reopen_catalog();
    }
    /* new rows are normalised too; auto ids continue */
    {
        json_t *r = expect("entities/insert",
                           "{\"collectionName\":\"cc\",\"data\":["
                           "{\"vector\":[0,0,5,0],\"color\":\"x\"}]}",
                           0);
        ASSERT_EQ(json_integer_value(
                      json_array_get(json_object_get(json_object_get(r, "data"), "insertIds"), 0)),
                  5);
        json_decref(r);
    }
    /* COSINE rows cannot go back to L2, even without the index */
    ok("collections/release", "{\"collectionName\":\"cc\"}");
    ok("indexes/drop", "{\"collectionName\":\"cc\",\"indexName\":\"vector\"}");
    expect_msg("indexes/create",
               "{\"collectionName\":\"cc\",\"indexParams\":[{\"fieldName\":\"vector\","
               "\"metricType\":\"L2\",\"indexType\":\"HNSW\"}]}",
               1100, "original vectors");
    ASSERT_EQ(meta_of("cc")->vecs[0].metric, SX_METRIC_COSINE);
    close_catalog();
}

/* Concurrent metadata changes (load state, partitions, properties) all land. */
typedef struct mod_arg {
    int which;
} mod_arg;

static void *modifier(void *arg)
{
    mod_arg *a = arg;
    for (int i = 0; i < 20; i++) {
        char body[256];
        json_t *r = NULL;
        if (a->which == 0) {
            snprintf(body, sizeof body, "{\"collectionName\":\"k\",\"partitionName\":\"p%d\"}", i);
            r = call("partitions/create", body);
        } else {
            snprintf(body, sizeof body, "{\"collectionName\":\"k\",\"properties\":{\"key%d\":%d}}",
                     i, i);
            r = call("collections/alter_properties", body);
        }
        if (code_of(r) != 0)
            fprintf(stderr, "modifier %d: code %d\n", a->which, code_of(r));
        json_decref(r);
    }
    return NULL;
}

static void test_concurrent_modify(void)
{
    fresh_catalog("h_modify");
    ok("collections/create", "{\"collectionName\":\"k\",\"dimension\":4}");
    pthread_t t[2];
    mod_arg args[2] = { { 0 }, { 1 } };
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, modifier, &args[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    sx__coll_meta *m = meta_of("k");
    ASSERT_EQ(m->n_parts, 21);
    json_t *props = json_loads(m->properties, 0, NULL);
    ASSERT_EQ(json_object_size(props), 20);
    json_decref(props);
    close_catalog();
}

int main(void)
{
    RUN(test_routes_table);
    RUN(test_missing_params);
    RUN(test_name_rules);
    RUN(test_unknown_collection);
    RUN(test_quick_create);
    RUN(test_custom_and_indexes);
    RUN(test_schema_errors);
    RUN(test_stats_partitions);
    RUN(test_rename_properties);
    RUN(test_databases);
    RUN(test_persistence);
    RUN(test_array_default_persist);
    RUN(test_sdk_flow_metric_from_index);
    RUN(test_pending_to_cosine_with_rows);
    RUN(test_concurrent_modify);
    return TEST_DONE();
}
