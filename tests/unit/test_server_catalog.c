/*
 * test_server_catalog.c: the REST server's catalog (src/server/catalog.c): collection metadata
 * create/get/list/drop/rename/update and its persistence across close + reopen, metadata derived
 * for a collection made through the C API, metadata without an engine collection removed at open,
 * databases (create/list/drop, isolation of their collections), database properties.
 */
#include <pthread.h>
#include <sextant.h>

#include "harness.h"
#include "platform/fs.h"
#include "server/server.h"

static sx_db_options opts(void)
{
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    o.build_threads = 1;
    o.search_threads = 1;
    return o;
}

static sx__catalog *open_cat(const char *dir)
{
    sx_db_options o = opts();
    sx__catalog *cat = NULL;
    ASSERT_OK(sx__cat_open(dir, &o, &cat));
    return cat;
}

/* id Int64 pk, vector FloatVector(4), age Int32, tag VarChar(32), doc JSON */
static void make_meta(sx__coll_meta *m, const char *name)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->vecs[0].metric = SX_METRIC_L2;
    const char *names[] = { "id", "vector", "age", "tag", "doc" };
    const char *types[] = { "Int64", "FloatVector", "Int32", "VarChar", "JSON" };
    for (size_t i = 0; i < 5; i++) {
        snprintf(m->fields[i].name, sizeof m->fields[i].name, "%s", names[i]);
        snprintf(m->fields[i].type, sizeof m->fields[i].type, "%s", types[i]);
    }
    m->fields[0].is_primary = true;
    m->fields[1].dim = 4;
    m->fields[3].max_length = 32;
    m->n_fields = 5;
    m->enable_dynamic = true;
    m->has_partitions = true;
}

static size_t list_colls(sx__catalog *cat, const char *db, char *buf, size_t cap)
{
    char **names = NULL;
    size_t n = 0;
    ASSERT_OK(sx__cat_coll_list(cat, db, &names, &n));
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strncat(buf, names[i], cap - strlen(buf) - 1);
        strncat(buf, ",", cap - strlen(buf) - 1);
    }
    sx_strings_free(names, n);
    return n;
}

static void test_create_get_persist(void)
{
    const char *dir = test_tmpdir("cat_basic");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx__catalog *cat = open_cat(d);
    static sx__coll_meta m, g;
    make_meta(&m, "books");
    ASSERT_OK(sx__cat_coll_create(cat, "default", &m));
    ASSERT(strcmp(m.engine_name, "books") == 0);
    ASSERT(m.collection_id > 0);
    ASSERT(m.created_ms > 0);
    ASSERT_EQ(m.fields[0].field_id, 100);
    ASSERT_EQ(m.fields[4].field_id, 104);
    ASSERT_EQ(m.fields[2].engine_type, SX_FIELD_INT64);
    ASSERT_EQ(m.fields[4].engine_type, SX_FIELD_VARCHAR);
    ASSERT_EQ(m.n_parts, 1);
    ASSERT(strcmp(m.parts[0], "_default") == 0);
    ASSERT(strcmp(m.consistency, "Bounded") == 0);

    /* the same name again */
    static sx__coll_meta m2;
    make_meta(&m2, "books");
    ASSERT_STATUS(sx__cat_coll_create(cat, "default", &m2), SX_EEXIST);
    /* a bad type */
    make_meta(&m2, "bad");
    snprintf(m2.fields[2].type, sizeof m2.fields[2].type, "BinaryVector");
    m2.fields[2].engine_type = (sx_field_type)0;
    ASSERT_STATUS(sx__cat_coll_create(cat, "default", &m2), SX_EINVAL);
    /* an Array without its element type and capacity */
    make_meta(&m2, "bad");
    snprintf(m2.fields[2].type, sizeof m2.fields[2].type, "Array");
    m2.fields[2].engine_type = (sx_field_type)0;
    ASSERT_STATUS(sx__cat_coll_create(cat, "default", &m2), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "element type and max_capacity") != NULL);
    /* engine refusal (no primary key) leaves no metadata behind */
    make_meta(&m2, "nopk");
    m2.fields[0].is_primary = false;
    ASSERT_STATUS(sx__cat_coll_create(cat, "default", &m2), SX_EINVAL);
    ASSERT_STATUS(sx__cat_coll_get(cat, "default", "nopk", NULL, &g), SX_ENOTFOUND);
    char path[700];
    snprintf(path, sizeof path, "%s/rest/nopk.json", d);
    ASSERT(access(path, F_OK) != 0);

    /* handle + hidden columns in the engine schema */
    sx_collection *h = NULL;
    ASSERT_OK(sx__cat_coll_get(cat, "default", "books", &h, &g));
    ASSERT(h != NULL);
    sx_collection_info info;
    ASSERT_OK(sx_collection_describe(h, &info));
    ASSERT_EQ(info.n_fields, 7);
    ASSERT(strcmp(info.fields[5].name, SX__META_FIELD) == 0);
    ASSERT(strcmp(info.fields[6].name, SX__PART_FIELD) == 0);
    ASSERT_EQ(info.fields[6].type, SX_FIELD_VARCHAR);
    sx_collection_release(h);
    ASSERT_EQ(g.collection_id, m.collection_id);
    ASSERT(strcmp(g.fields[2].type, "Int32") == 0);

    /* update: load state, index, partitions, properties */
    g.loaded = true;
    snprintf(g.vecs[0].index_name, sizeof g.vecs[0].index_name, "vidx");
    snprintf(g.vecs[0].index_type, sizeof g.vecs[0].index_type, "HNSW");
    snprintf(g.parts[1], sizeof g.parts[1], "p1");
    g.n_parts = 2;
    snprintf(g.properties, sizeof g.properties, "{\"collection.ttl.seconds\":\"60\"}");
    snprintf(g.description, sizeof g.description, "some books");
    ASSERT_OK(sx__cat_coll_update(cat, "default", &g));

    /* rename */
    ASSERT_OK(sx__cat_coll_rename(cat, "default", "books", NULL, "novels"));
    ASSERT_STATUS(sx__cat_coll_get(cat, "default", "books", NULL, &g), SX_ENOTFOUND);
    ASSERT_STATUS(sx__cat_coll_rename(cat, "default", "books", NULL, "x"), SX_ENOTFOUND);
    ASSERT_STATUS(sx__cat_coll_rename(cat, "default", "novels", NULL, "bad name"), SX_EINVAL);
    /* a new collection named like the renamed one's engine name gets another engine name */
    static sx__coll_meta m3;
    make_meta(&m3, "books");
    ASSERT_OK(sx__cat_coll_create(cat, "default", &m3));
    ASSERT(strcmp(m3.engine_name, "books") != 0);
    ASSERT(strncmp(m3.engine_name, "books_", 6) == 0);
    ASSERT_STATUS(sx__cat_coll_rename(cat, "default", "novels", "", "books"), SX_EEXIST);
    char buf[256];
    ASSERT_EQ(list_colls(cat, "default", buf, sizeof buf), 2);
    ASSERT(strcmp(buf, "books,novels,") == 0);
    ASSERT_OK(sx__cat_close(cat));

    /* reopen: everything came back */
    cat = open_cat(d);
    ASSERT_EQ(list_colls(cat, "default", buf, sizeof buf), 2);
    ASSERT(strcmp(buf, "books,novels,") == 0);
    ASSERT_OK(sx__cat_coll_get(cat, "default", "novels", &h, &g));
    sx_collection_release(h);
    ASSERT(strcmp(g.engine_name, "books") == 0);
    ASSERT_EQ(g.collection_id, m.collection_id);
    ASSERT(g.loaded);
    ASSERT(strcmp(g.vecs[0].index_name, "vidx") == 0);
    ASSERT(strcmp(g.vecs[0].index_type, "HNSW") == 0);
    ASSERT_EQ(g.n_parts, 2);
    ASSERT(strcmp(g.parts[1], "p1") == 0);
    ASSERT(strstr(g.properties, "collection.ttl.seconds") != NULL);
    ASSERT(strcmp(g.description, "some books") == 0);
    ASSERT_EQ(g.n_fields, 5);
    ASSERT(strcmp(g.fields[4].type, "JSON") == 0);
    ASSERT_EQ(g.fields[3].max_length, 32);
    ASSERT_EQ(g.fields[1].dim, 4);
    ASSERT(g.enable_dynamic && g.has_partitions);
    ASSERT_OK(sx__cat_coll_get(cat, "default", "books", NULL, &g));
    ASSERT(strcmp(g.engine_name, m3.engine_name) == 0);

    /* drop */
    ASSERT_OK(sx__cat_coll_drop(cat, "default", "novels"));
    ASSERT_STATUS(sx__cat_coll_drop(cat, "default", "novels"), SX_ENOTFOUND);
    ASSERT_STATUS(sx__cat_coll_get(cat, "default", "novels", NULL, &g), SX_ENOTFOUND);
    snprintf(path, sizeof path, "%s/rest/books.json", d);
    ASSERT(access(path, F_OK) != 0);
    ASSERT_EQ(list_colls(cat, "default", buf, sizeof buf), 1);
    ASSERT_OK(sx__cat_close(cat));
    cat = open_cat(d);
    ASSERT_EQ(list_colls(cat, "default", buf, sizeof buf), 1);
    ASSERT(strcmp(buf, "books,") == 0);
    ASSERT_OK(sx__cat_close(cat));
}

static void test_derived_and_orphans(void)
{
    const char *dir = test_tmpdir("cat_derive");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    /* a collection made through the C API, with an index */
    sx_db_options o = opts();
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(d, &o, &db));
    sx_field_def f[] = {
        { "pk", SX_FIELD_VARCHAR, true, false, 0, 64 },
        { "emb", SX_FIELD_FLOAT_VECTOR, false, false, 8, 0 },
        { "score", SX_FIELD_DOUBLE, false, false, 0, 0 },
        { "ok", SX_FIELD_BOOL, false, false, 0, 0 },
    };
    sx_collection_def def = { "capi", f, 4, SX_METRIC_IP };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_field_def f2[] = {
        { "id", SX_FIELD_INT64, true, true, 0, 0 },
        { "v", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0 },
    };
    sx_collection_def def2 = { "plain", f2, 2, SX_METRIC_COSINE };
    ASSERT_OK(sx_collection_create(db, &def2));
    sx_collection *h = NULL;
    ASSERT_OK(sx_collection_open(db, "capi", &h));
    ASSERT_OK(sx_index_create(h, "HNSW", NULL, 0));
    sx_collection_release(h);
    sx_db_close(db);
    /* metadata of a collection the engine does not have (crash between the two steps) */
    char path[700];
    snprintf(path, sizeof path, "%s/rest", d);
    ASSERT_OK(sx__fs_mkdir_p(path));
    snprintf(path, sizeof path, "%s/rest/ghost.json", d);
    const char *ghost = "{\"name\":\"ghost\",\"engine_name\":\"ghost\",\"metric\":\"L2\","
                        "\"fields\":[{\"name\":\"id\",\"type\":\"Int64\",\"engine_type\":1}]}";
    ASSERT_OK(sx__fs_write_atomic(path, ghost, strlen(ghost)));

    sx__catalog *cat = open_cat(d);
    ASSERT(access(path, F_OK) != 0); /* removed at open */
    char buf[256];
    ASSERT_EQ(list_colls(cat, "default", buf, sizeof buf), 2);
    ASSERT(strcmp(buf, "capi,plain,") == 0);
    static sx__coll_meta g;
    ASSERT_OK(sx__cat_coll_get(cat, NULL, "capi", NULL, &g));
    ASSERT(strcmp(g.engine_name, "capi") == 0);
    ASSERT_EQ(g.vecs[0].metric, SX_METRIC_IP);
    ASSERT_EQ(g.n_fields, 4);
    ASSERT(strcmp(g.fields[0].type, "VarChar") == 0);
    ASSERT_EQ(g.fields[0].max_length, 64);
    ASSERT(g.fields[0].is_primary);
    ASSERT(strcmp(g.fields[1].type, "FloatVector") == 0);
    ASSERT_EQ(g.fields[1].dim, 8);
    ASSERT(strcmp(g.fields[2].type, "Double") == 0);
    ASSERT(strcmp(g.fields[3].type, "Bool") == 0);
    ASSERT_EQ(g.fields[3].field_id, 103);
    ASSERT(g.loaded);
    ASSERT(!g.enable_dynamic && !g.has_partitions);
    ASSERT(strcmp(g.vecs[0].index_name, "emb") == 0);
    ASSERT(strcmp(g.vecs[0].field, "emb") == 0);
    ASSERT(strcmp(g.vecs[0].index_type, "HNSW") == 0);
    ASSERT_EQ(g.n_parts, 1);
    ASSERT(strcmp(g.consistency, "Bounded") == 0);
    int64_t id1 = g.collection_id;
    ASSERT(id1 > 0);
    ASSERT_OK(sx__cat_coll_get(cat, NULL, "plain", NULL, &g));
    ASSERT(g.vecs[0].index_name[0] == '\0');
    ASSERT(g.fields[0].auto_id);
    ASSERT_EQ(g.vecs[0].metric, SX_METRIC_COSINE);
    ASSERT(g.collection_id != id1);
    /* derived metadata was persisted: the same id after a reopen */
    ASSERT_OK(sx__cat_close(cat));
    cat = open_cat(d);
    ASSERT_OK(sx__cat_coll_get(cat, "default", "capi", NULL, &g));
    ASSERT_EQ(g.collection_id, id1);
    ASSERT_OK(sx__cat_close(cat));
}

static void test_databases(void)
{
    const char *dir = test_tmpdir("cat_db");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx__catalog *cat = open_cat(d);
    ASSERT(sx__cat_db_exists(cat, "default"));
    ASSERT(sx__cat_db_exists(cat, NULL));
    ASSERT(!sx__cat_db_exists(cat, "zoo"));
    ASSERT_OK(sx__cat_db_create(cat, "zoo"));
    ASSERT_OK(sx__cat_db_create(cat, "alpha"));
    ASSERT_STATUS(sx__cat_db_create(cat, "zoo"), SX_EEXIST);
    ASSERT_STATUS(sx__cat_db_create(cat, "default"), SX_EEXIST);
    ASSERT_STATUS(sx__cat_db_create(cat, "9bad"), SX_EINVAL);
    ASSERT_STATUS(sx__cat_db_create(cat, "a-b"), SX_EINVAL);
    char **names = NULL;
    size_t n = 0;
    ASSERT_OK(sx__cat_db_list(cat, &names, &n));
    ASSERT_EQ(n, 3);
    ASSERT(strcmp(names[0], "default") == 0);
    ASSERT(strcmp(names[1], "alpha") == 0);
    ASSERT(strcmp(names[2], "zoo") == 0);
    sx_strings_free(names, n);

    /* a collection in zoo is not visible in default, and the same name may exist in both */
    static sx__coll_meta m, g;
    make_meta(&m, "animals");
    ASSERT_OK(sx__cat_coll_create(cat, "zoo", &m));
    ASSERT_STATUS(sx__cat_coll_get(cat, "default", "animals", NULL, &g), SX_ENOTFOUND);
    ASSERT(strstr(sx_errmsg(), "can't find collection[database=default][collection=animals]") !=
           NULL);
    char buf[256];
    ASSERT_EQ(list_colls(cat, "default", buf, sizeof buf), 0);
    ASSERT_EQ(list_colls(cat, "zoo", buf, sizeof buf), 1);
    make_meta(&m, "animals");
    m.vecs[0].metric = SX_METRIC_IP;
    ASSERT_OK(sx__cat_coll_create(cat, "default", &m));
    ASSERT_OK(sx__cat_coll_get(cat, "zoo", "animals", NULL, &g));
    ASSERT_EQ(g.vecs[0].metric, SX_METRIC_L2);
    ASSERT_STATUS(sx__cat_coll_get(cat, "nodb", "animals", NULL, &g), SX_ENOTFOUND);
    ASSERT(strstr(sx_errmsg(), "database not found[database=nodb]") != NULL);
    ASSERT_STATUS(sx__cat_coll_create(cat, "nodb", &m), SX_ENOTFOUND);
    ASSERT_STATUS(sx__cat_coll_rename(cat, "zoo", "animals", "default", "x"), SX_EINVAL);

    /* properties */
    json_t *p = NULL;
    int64_t id = 0;
    ASSERT_OK(sx__cat_db_describe(cat, "zoo", &p, &id));
    ASSERT(json_is_object(p) && json_object_size(p) == 0);
    ASSERT(id > 1);
    json_decref(p);
    json_t *np = json_pack("{s:s}", "database.replica.number", "1");
    ASSERT_OK(sx__cat_db_set_props(cat, "zoo", np));
    json_decref(np);
    int64_t did = 0;
    ASSERT_OK(sx__cat_db_describe(cat, "default", NULL, &did));
    ASSERT_EQ(did, 1);

    /* drop: refused when not empty or default */
    ASSERT_STATUS(sx__cat_db_drop(cat, "zoo"), SX_EBUSY);
    ASSERT_STATUS(sx__cat_db_drop(cat, "default"), SX_EINVAL);
    ASSERT_STATUS(sx__cat_db_drop(cat, "nodb"), SX_ENOTFOUND);
    ASSERT_OK(sx__cat_db_drop(cat, "alpha"));
    ASSERT(!sx__cat_db_exists(cat, "alpha"));
    ASSERT_OK(sx__cat_close(cat));

    /* reopen: zoo and its collection and properties are back, alpha is gone */
    cat = open_cat(d);
    ASSERT_OK(sx__cat_db_list(cat, &names, &n));
    ASSERT_EQ(n, 2);
    ASSERT(strcmp(names[1], "zoo") == 0);
    sx_strings_free(names, n);
    ASSERT_OK(sx__cat_coll_get(cat, "zoo", "animals", NULL, &g));
    ASSERT_EQ(g.vecs[0].metric, SX_METRIC_L2);
    ASSERT_OK(sx__cat_coll_get(cat, "default", "animals", NULL, &g));
    ASSERT_EQ(g.vecs[0].metric, SX_METRIC_IP);
    int64_t id2 = 0;
    ASSERT_OK(sx__cat_db_describe(cat, "zoo", &p, &id2));
    ASSERT_EQ(id2, id);
    ASSERT(strcmp(json_string_value(json_object_get(p, "database.replica.number")), "1") == 0);
    json_decref(p);
    ASSERT_OK(sx__cat_coll_drop(cat, "zoo", "animals"));
    ASSERT_OK(sx__cat_db_drop(cat, "zoo"));
    ASSERT_STATUS(sx__cat_coll_get(cat, "zoo", "animals", NULL, &g), SX_ENOTFOUND);
    /* re-create with the same name: empty */
    ASSERT_OK(sx__cat_db_create(cat, "zoo"));
    ASSERT_EQ(list_colls(cat, "zoo", buf, sizeof buf), 0);
    ASSERT_OK(sx__cat_close(cat));
}

/* ---- foreach and concurrent creates of one name */

static int count_visit(void *ctx, const char *db, const sx__coll_meta *meta, sx_collection *h)
{
    (void)db;
    (void)meta;
    if (h)
        (*(int *)ctx)++;
    return 0;
}

typedef struct race_arg {
    sx__catalog *cat;
    int created;
    int exists;
} race_arg;

static void *race(void *p)
{
    race_arg *a = p;
    sx__coll_meta *m = malloc(sizeof *m);
    make_meta(m, "racy");
    sx_status st = sx__cat_coll_create(a->cat, "default", m);
    if (st == SX_OK)
        a->created++;
    else if (st == SX_EEXIST)
        a->exists++;
    free(m);
    return NULL;
}

/* With object storage, a default-database collection named "databases" gets another engine
 * name: its objects would otherwise share the prefix of every other database's, and its drop
 * would delete them. */
static void test_databases_name_with_store(void)
{
    const char *dir = test_tmpdir("cat_dbname");
    char d[512], store[600], url[700], path[900];
    snprintf(d, sizeof d, "%s/data", dir);
    snprintf(store, sizeof store, "%s/store", dir);
    ASSERT_OK(sx__fs_mkdir_p(store));
    snprintf(url, sizeof url, "file://%s", store);
    sx_db_options o = opts();
    o.storage_url = url;
    sx__catalog *cat = NULL;
    ASSERT_OK(sx__cat_open(d, &o, &cat));
    ASSERT_OK(sx__cat_db_create(cat, "zoo"));
    static sx__coll_meta m, g;
    make_meta(&m, "animals");
    ASSERT_OK(sx__cat_coll_create(cat, "zoo", &m));
    sx_collection *h = NULL;
    ASSERT_OK(sx__cat_coll_get(cat, "zoo", "animals", &h, &g));
    ASSERT_OK(sx_flush(h));
    sx_collection_release(h);
    snprintf(path, sizeof path, "%s/databases/zoo/animals", store);
    ASSERT(sx__fs_exists(path)); /* zoo's objects are in the store */

    make_meta(&m, "databases");
    ASSERT_OK(sx__cat_coll_create(cat, "default", &m));
    ASSERT(strcmp(m.engine_name, "databases") != 0);
    ASSERT(strncmp(m.engine_name, "databases_", 10) == 0);
    ASSERT_OK(sx__cat_coll_get(cat, "default", "databases", &h, &g)); /* the name clients use */
    ASSERT(strcmp(g.name, "databases") == 0);
    ASSERT_OK(sx_flush(h));
    sx_collection_release(h);
    ASSERT_OK(sx__cat_coll_drop(cat, "default", "databases"));
    ASSERT(sx__fs_exists(path)); /* the drop deleted nothing of zoo's */
    /* in another database the name is an ordinary one */
    make_meta(&m, "databases");
    ASSERT_OK(sx__cat_coll_create(cat, "zoo", &m));
    ASSERT(strcmp(m.engine_name, "databases") == 0);
    ASSERT_OK(sx__cat_close(cat));
}

static void test_concurrency_foreach(void)
{
    const char *dir = test_tmpdir("cat_conc");
    char d[512];
    snprintf(d, sizeof d, "%s", dir);
    sx__catalog *cat = open_cat(d);
    race_arg args[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (race_arg){ cat, 0, 0 };
        pthread_create(&t[i], NULL, race, &args[i]);
    }
    int created = 0, exists = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        created += args[i].created;
        exists += args[i].exists;
    }
    ASSERT_EQ(created, 1);
    ASSERT_EQ(exists, 3);
    ASSERT_OK(sx__cat_db_create(cat, "other"));
    static sx__coll_meta m;
    make_meta(&m, "o1");
    ASSERT_OK(sx__cat_coll_create(cat, "other", &m));
    int visited = 0;
    ASSERT_OK(sx__cat_foreach(cat, count_visit, &visited));
    ASSERT_EQ(visited, 2);
    ASSERT_OK(sx__cat_close(cat));
}

int main(void)
{
    RUN(test_create_get_persist);
    RUN(test_derived_and_orphans);
    RUN(test_databases);
    RUN(test_databases_name_with_store);
    RUN(test_concurrency_foreach);
    return TEST_DONE();
}
