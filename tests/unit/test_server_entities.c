/*
 * test_server_entities.c: the /v2/vectordb/entities/... handlers (src/server/handlers_entities.c)
 * called directly on a catalog in a temporary directory, with exact expected values: rows read
 * back field by field, search results against a brute-force ground truth computed here.
 * Request bodies are written with ` for JSON quotes (filters use '...' strings).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "server/server.h"

static sx__catalog *g_cat;
static sx__merger *g_merger;
static sx_server_options g_opts;

/* ------------------------------------------------------------------ helpers */

static json_t *call_ex(const char *path, const char *text, bool i64s)
{
    char *buf = strdup(text);
    for (char *p = buf; *p; p++)
        if (*p == '`')
            *p = '"';
    json_error_t e;
    json_t *body = json_loads(buf, 0, &e);
    if (!body) {
        fprintf(stderr, "bad test body: %s: %s\n", buf, e.text);
        free(buf);
        return NULL;
    }
    free(buf);
    sx__handler_fn fn = NULL;
    const sx__route *tables[] = { sx__routes_entities, sx__routes_indexes, sx__routes_collections,
                                  sx__routes_admin };
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const sx__route *r = tables[t]; r->path; r++)
            if (strcmp(r->path, path) == 0)
                fn = r->fn;
    if (!fn) {
        json_decref(body);
        return NULL;
    }
    sx__req rq = { .cat = g_cat,
                   .merger = g_merger,
                   .opts = &g_opts,
                   .body = body,
                   .db_name = "default",
                   .int64_as_string = i64s,
                   .timeout_s = 30 };
    sx__resp rs = { 200, NULL, NULL, 0 };
    fn(&rq, &rs);
    json_decref(body);
    json_t *out = sx__resp_json(&rs);
    if (!out)
        out = json_pack("{s:i,s:{}}", "code", 0, "data");
    return out;
}

static json_t *call(const char *path, const char *text)
{
    return call_ex(path, text, false);
}

static int code_of(const json_t *r)
{
    return r ? (int)json_integer_value(json_object_get(r, "code")) : -1;
}

static const char *msg_of(const json_t *r)
{
    const char *m = json_string_value(json_object_get(r, "message"));
    return m ? m : "";
}

#define EXPECT_CODE(resp, want)                                   \
 do {                                                             \
  json_t *r_ = (resp);                                            \
  int c_ = code_of(r_);                                           \
  if (c_ != (want)) {                                             \
   char *d_ = r_ ? json_dumps(r_, JSON_COMPACT) : NULL;           \
   FAILF("code %d, want %d: %s", c_, (want), d_ ? d_ : "(null)"); \
  }                                                               \
  json_decref(r_);                                                \
 } while (0)

/* Asserts code 0 and returns the response (caller decrefs). */
static json_t *ok(json_t *r)
{
    if (code_of(r) != 0) {
        char *d = r ? json_dumps(r, JSON_COMPACT) : NULL;
        fprintf(stderr, "unexpected failure: %s\n", d ? d : "(null)");
        free(d);
        json_decref(r);
        return NULL;
    }
    return r;
}

static json_t *data_of(json_t *r)
{
    return json_object_get(r, "data");
}

static void add_field(sx__coll_meta *m,
                      const char *name,
                      const char *type,
                      sx_field_type et,
                      bool pk,
                      bool auto_id,
                      uint32_t dim,
                      uint32_t max_len)
{
    sx__field_meta *f = &m->fields[m->n_fields++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->type, sizeof f->type, "%s", type);
    f->engine_type = et;
    f->is_primary = pk;
    f->auto_id = auto_id;
    f->dim = dim;
    f->max_length = max_len;
}

static sx__coll_meta *new_meta(const char *name, sx_metric metric, bool dynamic)
{
    sx__coll_meta *m = calloc(1, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    for (size_t i = 0; i < SX_MAX_VECTOR_FIELDS; i++) /* by position: every vector field */
        m->vecs[i].metric = metric;
    m->enable_dynamic = dynamic;
    m->has_partitions = true;
    m->loaded = true;
    m->n_parts = 2;
    snprintf(m->parts[0], sizeof m->parts[0], "_default");
    snprintf(m->parts[1], sizeof m->parts[1], "p1");
    return m;
}

static int create(sx__coll_meta *m)
{
    sx_status st = sx__cat_coll_create(g_cat, "default", m);
    if (st != SX_OK)
        fprintf(stderr, "create %s: %s\n", m->name, sx_errmsg());
    free(m);
    return st == SX_OK;
}

static int64_t count_rows(const char *coll)
{
    char body[256];
    snprintf(body, sizeof body, "{`collectionName`:`%s`,`outputFields`:[`count(*)`]}", coll);
    json_t *r = ok(call("/v2/vectordb/entities/query", body));
    if (!r)
        return -1;
    int64_t n = json_integer_value(json_object_get(json_array_get(data_of(r), 0), "count(*)"));
    json_decref(r);
    return n;
}

static int64_t jint(const json_t *row, const char *k)
{
    return json_integer_value(json_object_get(row, k));
}

static const char *jstr(const json_t *row, const char *k)
{
    const char *s = json_string_value(json_object_get(row, k));
    return s ? s : "(not a string)";
}

/* ------------------------------------------------------------------ setup */

static void test_setup(void)
{
    const char *dir = test_tmpdir("srv_entities");
    sx_db_options o = { .sync_mode = SX_SYNC_NONE };
    ASSERT_OK(sx__cat_open(dir, &o, &g_cat));
    sx__coll_meta *m = new_meta("c1", SX_METRIC_L2, false);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "vector", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0);
    add_field(m, "color", "VarChar", SX_FIELD_VARCHAR, false, false, 0, 8);
    add_field(m, "i32", "Int32", SX_FIELD_INT64, false, false, 0, 0);
    add_field(m, "i8", "Int8", SX_FIELD_INT64, false, false, 0, 0);
    add_field(m, "big", "Int64", SX_FIELD_INT64, false, false, 0, 0);
    add_field(m, "d", "Double", SX_FIELD_DOUBLE, false, false, 0, 0);
    add_field(m, "b", "Bool", SX_FIELD_BOOL, false, false, 0, 0);
    add_field(m, "j", "JSON", SX_FIELD_VARCHAR, false, false, 0, 0);
    ASSERT(create(m));
    m = new_meta("dyn", SX_METRIC_L2, true);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "vector", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    ASSERT(create(m));
    m = new_meta("auto", SX_METRIC_L2, false);
    add_field(m, "pk", "Int64", SX_FIELD_INT64, true, true, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    ASSERT(create(m));
    m = new_meta("unl", SX_METRIC_L2, false);
    m->loaded = false;
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    ASSERT(create(m));
    m = new_meta("vs", SX_METRIC_IP, false);
    add_field(m, "name", "VarChar", SX_FIELD_VARCHAR, true, false, 0, 16);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    ASSERT(create(m));
    m = new_meta("gt", SX_METRIC_L2, false);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 8, 0);
    add_field(m, "tag", "Int64", SX_FIELD_INT64, false, false, 0, 0);
    ASSERT(create(m));
    m = new_meta("arr", SX_METRIC_L2, false);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    add_field(m, "tags", "Array", SX_FIELD_VARCHAR, false, false, 0, SX_MAX_VARCHAR);
    snprintf(m->fields[2].elem_type, sizeof m->fields[2].elem_type, "VarChar");
    m->fields[2].max_capacity = 3;
    m->fields[2].elem_max_length = 4;
    add_field(m, "nums", "Array", SX_FIELD_VARCHAR, false, false, 0, SX_MAX_VARCHAR);
    snprintf(m->fields[3].elem_type, sizeof m->fields[3].elem_type, "Int8");
    m->fields[3].max_capacity = 4;
    add_field(m, "fs", "Array", SX_FIELD_VARCHAR, false, false, 0, SX_MAX_VARCHAR);
    snprintf(m->fields[4].elem_type, sizeof m->fields[4].elem_type, "Float");
    m->fields[4].max_capacity = 2;
    ASSERT(create(m));
    m = new_meta("defs", SX_METRIC_L2, false);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    add_field(m, "label", "VarChar", SX_FIELD_VARCHAR, false, false, 0, 8);
    snprintf(m->fields[2].default_json, sizeof m->fields[2].default_json, "\"none\"");
    add_field(m, "n", "Int16", SX_FIELD_INT64, false, false, 0, 0);
    snprintf(m->fields[3].default_json, sizeof m->fields[3].default_json, "-4");
    add_field(m, "req", "Bool", SX_FIELD_BOOL, false, false, 0, 0); /* no default */
    ASSERT(create(m));
    m = new_meta("gtip", SX_METRIC_IP, false);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 8, 0);
    add_field(m, "tag", "Int64", SX_FIELD_INT64, false, false, 0, 0);
    ASSERT(create(m));
}

/* ------------------------------------------------------------------ insert / get / query */

static const char *C1_ROWS =
    "{`collectionName`:`c1`,`data`:["
    "{`id`:1,`vector`:[0.1,0.2,0.3,0.4],`color`:`red`,`i32`:-7,`i8`:127,`big`:9007199254740993,"
    "`d`:1.5,`b`:true,`j`:{`a`:[1,2],`s`:`x`}},"
    "{`id`:2,`vector`:[0.5,0.6,0.7,0.8],`color`:`blue`,`i32`:2147483647,`i8`:-128,`big`:-5,"
    "`d`:-0.25,`b`:false,`j`:[1,`two`]},"
    "{`id`:3,`vector`:[0.9,0.1,0.2,0.3],`color`:`red`,`i32`:0,`i8`:0,`big`:`42`,`d`:0,`b`:true,"
    "`j`:`str`}]}";

static void test_insert_get_query(void)
{
    json_t *r = ok(call("/v2/vectordb/entities/insert", C1_ROWS));
    ASSERT(r);
    json_t *d = data_of(r);
    ASSERT_EQ(jint(d, "insertCount"), 3);
    json_t *ids = json_object_get(d, "insertIds");
    ASSERT_EQ(json_array_size(ids), 3);
    ASSERT(json_is_integer(json_array_get(ids, 0)));
    ASSERT_EQ(json_integer_value(json_array_get(ids, 2)), 3);
    ASSERT_EQ(jint(r, "cost"), 0);
    json_decref(r);

    /* get in the order asked, every field by default */
    r = ok(call("/v2/vectordb/entities/get", "{`collectionName`:`c1`,`id`:[3,1,99]}"));
    ASSERT(r);
    d = data_of(r);
    ASSERT_EQ(json_array_size(d), 2);
    json_t *row3 = json_array_get(d, 0), *row1 = json_array_get(d, 1);
    ASSERT_EQ(jint(row3, "id"), 3);
    ASSERT_EQ(jint(row1, "id"), 1);
    ASSERT_EQ(json_object_size(row1), 9); /* 9 declared fields, no hidden column */
    ASSERT(!json_object_get(row1, SX__PART_FIELD));
    ASSERT(strcmp(jstr(row1, "color"), "red") == 0);
    ASSERT_EQ(jint(row1, "i32"), -7);
    ASSERT_EQ(jint(row1, "i8"), 127);
    ASSERT_EQ(jint(row1, "big"), 9007199254740993LL);
    ASSERT_EQ(jint(row3, "big"), 42); /* numeric string accepted for Int64 */
    ASSERT(json_real_value(json_object_get(row1, "d")) == 1.5);
    ASSERT(json_is_true(json_object_get(row1, "b")));
    ASSERT(strcmp(jstr(row1, "j"), "{\"a\":[1,2],\"s\":\"x\"}") == 0);
    ASSERT(strcmp(jstr(row3, "j"), "\"str\"") == 0);
    json_t *v = json_object_get(row1, "vector");
    ASSERT_EQ(json_array_size(v), 4);
    ASSERT(json_real_value(json_array_get(v, 1)) == (double)0.2f);
    ASSERT(json_real_value(json_array_get(v, 3)) == (double)0.4f);
    json_decref(r);

    /* int64 as strings: Int64 fields and ids are strings, Int32/Int8 stay numbers */
    r = ok(call_ex(
        "/v2/vectordb/entities/query",
        "{`collectionName`:`c1`,`filter`:`color == 'red'`,`outputFields`:[`big`,`i32`,`i8`]}",
        true));
    ASSERT(r);
    d = data_of(r);
    ASSERT_EQ(json_array_size(d), 2);
    row1 = json_array_get(d, 0);
    ASSERT(strcmp(jstr(row1, "id"), "1") == 0);
    ASSERT(strcmp(jstr(row1, "big"), "9007199254740993") == 0);
    ASSERT(json_is_integer(json_object_get(row1, "i32")));
    ASSERT_EQ(jint(row1, "i32"), -7);
    ASSERT_EQ(json_object_size(row1), 4);
    ASSERT(strcmp(jstr(json_array_get(d, 1), "id"), "3") == 0);
    json_decref(r);

    /* count(*), limit and offset */
    ASSERT_EQ(count_rows("c1"), 3);
    r = ok(call(
        "/v2/vectordb/entities/query",
        "{`collectionName`:`c1`,`filter`:`id > 0`,`limit`:1,`offset`:1,`outputFields`:[`id`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 2);
    json_decref(r);
    EXPECT_CODE(
        call("/v2/vectordb/entities/query", "{`collectionName`:`c1`,`limit`:16000,`offset`:385}"),
        SX__MC_UNEXPECTED); /* Milvus's 65535 "invalid max query result window" */
    EXPECT_CODE(call("/v2/vectordb/entities/query", "{`collectionName`:`c1`,`offset`:-1}"),
                SX__MC_UNEXPECTED);
    /* a window past int64 is refused too (limit + offset was a signed overflow) */
    r = call("/v2/vectordb/entities/query",
             "{`collectionName`:`c1`,`limit`:9223372036854775807,`offset`:1}");
    ASSERT_EQ(code_of(r), SX__MC_UNEXPECTED);
    ASSERT(strstr(msg_of(r), "but got 9223372036854775808") != NULL);
    json_decref(r);
    EXPECT_CODE(call("/v2/vectordb/entities/query",
                     "{`collectionName`:`c1`,`limit`:2,`offset`:9223372036854775807}"),
                SX__MC_UNEXPECTED);
    r = ok(call("/v2/vectordb/entities/query", "{`collectionName`:`c1`,`limit`:16383,`offset`:1}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 2);
    json_decref(r);
    EXPECT_CODE(
        call("/v2/vectordb/entities/query", "{`collectionName`:`c1`,`outputFields`:[`nope`]}"),
        SX__MC_INVALID_PARAM);

    /* JSON paths: row 1 has j.s == "x" and j.a[1] == 2, row 2 has j[1] == "two", row 3 is a
     * string (no path matches it) */
    static const struct {
        const char *filter;
        const char *ids;
    } jq[] = {
        { "j['s'] == 'x'", "1" },
        { "j['a'][1] == 2", "1" },
        { "j[1] == 'two'", "2" },
        { "j['a'][0] + 1 == 2 or j[0] == 1", "1,2" },
        { "not (j['s'] == 'x')", "" },
        { "j['s'] in ['x', 'y'] and b == true", "1" },
        { "j['s'] like 'x%' or id == 3", "1,3" },
    };

    for (size_t k = 0; k < sizeof jq / sizeof jq[0]; k++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{`collectionName`:`c1`,`filter`:`%s`,`outputFields`:[`id`],`limit`:10}",
                 jq[k].filter);
        r = ok(call("/v2/vectordb/entities/query", body));
        ASSERT(r);
        char got[64] = "";
        int64_t idv[8];
        size_t nid = 0;
        for (size_t i = 0; i < json_array_size(data_of(r)) && nid < 8; i++)
            idv[nid++] = jint(json_array_get(data_of(r), i), "id");
        for (size_t i = 1; i < nid; i++) /* sort */
            for (size_t j = i; j > 0 && idv[j - 1] > idv[j]; j--) {
                int64_t t = idv[j];
                idv[j] = idv[j - 1];
                idv[j - 1] = t;
            }
        for (size_t i = 0; i < nid; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)idv[i]);
        if (strcmp(got, jq[k].ids) != 0)
            FAILF("filter <%s>: ids [%s], want [%s]", jq[k].filter, got, jq[k].ids);
        json_decref(r);
    }
    EXPECT_CODE(call("/v2/vectordb/entities/query", "{`collectionName`:`nosuch`}"),
                SX__MC_COLL_NOT_FOUND);
    EXPECT_CODE(call("/v2/vectordb/entities/query", "{`filter`:`id > 0`}"),
                SX__MC_MISSING_REQUIRED);
    EXPECT_CODE(call("/v2/vectordb/entities/get", "{`collectionName`:`c1`,`id`:[{`a`:1}]}"),
                SX__MC_BAD_PK);
    EXPECT_CODE(call("/v2/vectordb/entities/get", "{`collectionName`:`c1`,`id`:true}"),
                SX__MC_BAD_PK);
    EXPECT_CODE(call("/v2/vectordb/entities/get", "{`collectionName`:`c1`}"),
                SX__MC_MISSING_REQUIRED);
}

static void test_insert_errors(void)
{
    int64_t before = count_rows("c1");
    ASSERT_EQ(before, 3);
    /* wrong dimension in the second row: nothing of the batch is inserted */
    json_t *r = call(
        "/v2/vectordb/entities/insert",
        "{`collectionName`:`c1`,`data`:["
        "{`id`:10,`vector`:[1,2,3,4],`color`:`a`,`i32`:1,`i8`:1,`big`:1,`d`:1,`b`:true,`j`:1},"
        "{`id`:11,`vector`:[1,2,3],`color`:`a`,`i32`:1,`i8`:1,`big`:1,`d`:1,`b`:true,`j`:1}]}");
    ASSERT_EQ(code_of(r), SX__MC_BAD_INSERT);
    ASSERT(strstr(msg_of(r), "fail to deal the insert data") != NULL);
    ASSERT(strstr(msg_of(r), "row 1") != NULL);
    ASSERT(strstr(msg_of(r), "vector") != NULL);
    json_decref(r);
    ASSERT_EQ(count_rows("c1"), before);
    /* extra field without dynamic schema */
    r = call("/v2/vectordb/entities/insert",
             "{`collectionName`:`c1`,`data`:[{`id`:10,`vector`:[1,2,3,4],`color`:`a`,`i32`:1,"
             "`i8`:1,`big`:1,`d`:1,`b`:true,`j`:1,`extra`:5}]}");
    ASSERT_EQ(code_of(r), SX__MC_INVALID_PARAM);
    ASSERT(strstr(msg_of(r), "has pass more field without dynamic schema, please check it") !=
           NULL);
    json_decref(r);
    /* range and type checks */
    const char *bad[] = {
        "`i8`:128,`i32`:1,`big`:1,`d`:1,`b`:true,`color`:`a`",
        "`i8`:1,`i32`:2147483648,`big`:1,`d`:1,`b`:true,`color`:`a`",
        "`i8`:1,`i32`:1.5,`big`:1,`d`:1,`b`:true,`color`:`a`",
        "`i8`:1,`i32`:1,`big`:1,`d`:`x`,`b`:true,`color`:`a`",
        "`i8`:1,`i32`:1,`big`:1,`d`:1,`b`:1,`color`:`a`",
        "`i8`:1,`i32`:1,`big`:1,`d`:1,`b`:true,`color`:`123456789`",
        "`i8`:1,`i32`:1,`big`:1,`d`:1,`b`:true,`color`:7",
        "`i8`:1,`i32`:1,`big`:1,`d`:1,`b`:true", /* color missing */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{`collectionName`:`c1`,`data`:[{`id`:20,`vector`:[1,2,3,4],`j`:{},%s}]}", bad[i]);
        r = call("/v2/vectordb/entities/insert", body);
        if (code_of(r) != SX__MC_BAD_INSERT)
            FAILF("case %zu: code %d (%s)", i, code_of(r), msg_of(r));
        json_decref(r);
    }
    EXPECT_CODE(call("/v2/vectordb/entities/insert",
                     "{`collectionName`:`c1`,`data`:[{`id`:20,`vector`:[1,2,`x`,4],`j`:{},`i8`:1,"
                     "`i32`:1,`big`:1,`d`:1,`b`:true,`color`:`a`}]}"),
                SX__MC_BAD_INSERT);
    /* duplicate key */
    EXPECT_CODE(call("/v2/vectordb/entities/insert",
                     "{`collectionName`:`c1`,`data`:[{`id`:1,`vector`:[1,2,3,4],`j`:{},`i8`:1,"
                     "`i32`:1,`big`:1,`d`:1,`b`:true,`color`:`a`}]}"),
                SX__MC_BAD_INSERT);
    EXPECT_CODE(call("/v2/vectordb/entities/insert", "{`collectionName`:`c1`}"),
                SX__MC_MISSING_REQUIRED);
    EXPECT_CODE(call("/v2/vectordb/entities/insert",
                     "{`collectionName`:`c1`,`partitionName`:`nope`,`data`:[{`id`:20}]}"),
                SX__MC_PART_NOT_FOUND);
    ASSERT_EQ(count_rows("c1"), before);
}

static void test_dynamic(void)
{
    json_t *r = ok(call("/v2/vectordb/entities/insert",
                        "{`collectionName`:`dyn`,`data`:["
                        "{`id`:1,`vector`:[1,0],`tag`:`x`,`n`:5,`o`:{`k`:[true]}},"
                        "{`id`:2,`vector`:[0,1]}]}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query", "{`collectionName`:`dyn`,`filter`:`id == 1`}"));
    ASSERT(r);
    json_t *row = json_array_get(data_of(r), 0);
    ASSERT_EQ(json_object_size(row), 5); /* id, vector, tag, n, o */
    ASSERT(strcmp(jstr(row, "tag"), "x") == 0);
    ASSERT_EQ(jint(row, "n"), 5);
    ASSERT(json_is_true(json_array_get(json_object_get(json_object_get(row, "o"), "k"), 0)));
    ASSERT(!json_object_get(row, SX__META_FIELD));
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/get",
                "{`collectionName`:`dyn`,`id`:[2,1],`outputFields`:[`tag`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 2);
    ASSERT_EQ(json_object_size(json_array_get(data_of(r), 0)), 1); /* id only: no tag on row 2 */
    row = json_array_get(data_of(r), 1);
    ASSERT_EQ(json_object_size(row), 2);
    ASSERT(strcmp(jstr(row, "tag"), "x") == 0);
    json_decref(r);
    EXPECT_CODE(call("/v2/vectordb/entities/insert",
                     "{`collectionName`:`dyn`,`data`:[{`id`:3,`vector`:[1,0],`$meta`:{`a`:1}}]}"),
                SX__MC_BAD_INSERT);
    /* filters on dynamic keys: a bare name or $meta["name"]; a row without the key matches
     * neither the predicate nor its negation */
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`dyn`,`filter`:`tag == 'x'`,`outputFields`:[`tag`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 1);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`dyn`,`filter`:`$meta['n'] > 4 and not (tag != 'x')`}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`dyn`,`filter`:`not (tag == 'x')`}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 0); /* row 2 has no tag: UNKNOWN, not TRUE */
    json_decref(r);
    /* exists on a dynamic key (the rewrite makes it a path of the hidden column) */
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`dyn`,`filter`:`exists tag and not exists $meta['zz']`}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 1);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query", "{`collectionName`:`dyn`,`filter`:`not exists n`}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 2);
    json_decref(r);
    /* search with a dynamic output key */
    r = ok(call("/v2/vectordb/entities/search",
                "{`collectionName`:`dyn`,`data`:[[1,0]],`limit`:1,`outputFields`:[`n`]}"));
    ASSERT(r);
    row = json_array_get(data_of(r), 0);
    ASSERT_EQ(jint(row, "id"), 1);
    ASSERT_EQ(jint(row, "n"), 5);
    ASSERT(json_real_value(json_object_get(row, "distance")) == 0.0);
    json_decref(r);
}

/* Array fields: stored as JSON text, answered as arrays, checked on insert (element type and
 * range, max_capacity, the elements' max_length; a bad row inserts nothing), filtered with
 * array_contains* / array_length / indexing. */
static void test_arrays(void)
{
    json_t *r = ok(call("/v2/vectordb/entities/insert",
                        "{`collectionName`:`arr`,`data`:["
                        "{`id`:1,`v`:[1,0],`tags`:[`a`,`bb`],`nums`:[1,-2,3],`fs`:[0.5]},"
                        "{`id`:2,`v`:[0,1],`tags`:[],`nums`:[127],`fs`:[]},"
                        "{`id`:3,`v`:[1,1],`tags`:[`bb`,`cccc`,`a`],`nums`:[],`fs`:[1,2]}]}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`arr`,`filter`:`array_contains(tags, 'a')`,"
                "`outputFields`:[`tags`,`nums`,`fs`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 2);
    json_t *row = json_array_get(data_of(r), 0);
    ASSERT_EQ(jint(row, "id"), 1);
    json_t *tags = json_object_get(row, "tags"), *nums = json_object_get(row, "nums");
    ASSERT(json_is_array(tags) && json_array_size(tags) == 2);
    ASSERT(strcmp(json_string_value(json_array_get(tags, 1)), "bb") == 0);
    ASSERT(json_is_array(nums) && json_array_size(nums) == 3);
    ASSERT_EQ(json_integer_value(json_array_get(nums, 1)), -2);
    ASSERT(json_number_value(json_array_get(json_object_get(row, "fs"), 0)) == 0.5);
    json_decref(r);

    static const struct {
        const char *filter;
        const char *ids;
    } fs[] = {
        { "array_contains_all(tags, ['a', 'bb'])", "1,3" },
        { "array_contains_any(nums, [127, 3])", "1,2" },
        { "array_length(nums) == 0", "3" },
        { "array_length(tags) > 1 and nums[0] == 1", "1" },
        { "not array_contains(tags, 'cccc')", "1,2" },
        { "json_contains(fs, 2)", "3" },
    };

    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
        char body[256];
        snprintf(body, sizeof body, "{`collectionName`:`arr`,`filter`:`%s`,`outputFields`:[`id`]}",
                 fs[k].filter);
        r = ok(call("/v2/vectordb/entities/query", body));
        ASSERT(r);
        char got[64] = "";
        for (size_t i = 0; i < json_array_size(data_of(r)); i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)jint(json_array_get(data_of(r), i), "id"));
        if (strcmp(got, fs[k].ids) != 0)
            FAILF("<%s>: ids %s, want %s", fs[k].filter, got, fs[k].ids);
        json_decref(r);
    }
    static const char *const bad[] = {
        "{`id`:9,`v`:[1,0],`tags`:[`a`,`b`,`c`,`d`],`nums`:[],`fs`:[]}", /* over capacity */
        "{`id`:9,`v`:[1,0],`tags`:[`toolong`],`nums`:[],`fs`:[]}",       /* element length */
        "{`id`:9,`v`:[1,0],`tags`:[],`nums`:[128],`fs`:[]}",             /* Int8 range */
        "{`id`:9,`v`:[1,0],`tags`:[],`nums`:[1.5],`fs`:[]}",             /* not an integer */
        "{`id`:9,`v`:[1,0],`tags`:[1],`nums`:[],`fs`:[]}",               /* not a string */
        "{`id`:9,`v`:[1,0],`tags`:`a`,`nums`:[],`fs`:[]}",               /* not an array */
        "{`id`:9,`v`:[1,0],`tags`:[],`nums`:[],`fs`:[1e39]}",            /* Float range */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char body[256];
        snprintf(body, sizeof body, "{`collectionName`:`arr`,`data`:[%s]}", bad[k]);
        EXPECT_CODE(call("/v2/vectordb/entities/insert", body), SX__MC_BAD_INSERT);
    }
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`arr`,`filter`:`id == 9`,`outputFields`:[`id`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 0);
    json_decref(r);
}

/* Default values: a row that omits a field with a default, or gives null, gets the default (insert
 * and upsert); a field without one is still required. */
static void test_defaults(void)
{
    json_t *r = ok(call("/v2/vectordb/entities/insert",
                        "{`collectionName`:`defs`,`data`:["
                        "{`id`:1,`v`:[1,0],`req`:true},"
                        "{`id`:2,`v`:[0,1],`label`:null,`n`:9,`req`:false},"
                        "{`id`:3,`v`:[1,1],`label`:`x`,`n`:null,`req`:true}]}"));
    ASSERT(r);
    json_decref(r);

    static const struct {
        const char *filter;
        size_t n;
    } fs[] = { { "label == 'none'", 2 }, { "n == -4", 2 }, { "label == 'none' and n == -4", 1 } };

    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
        char body[200];
        snprintf(body, sizeof body, "{`collectionName`:`defs`,`filter`:`%s`}", fs[k].filter);
        r = ok(call("/v2/vectordb/entities/query", body));
        ASSERT(r);
        if (json_array_size(data_of(r)) != fs[k].n)
            FAILF("<%s>: %zu rows, want %zu", fs[k].filter, json_array_size(data_of(r)), fs[k].n);
        json_decref(r);
    }
    EXPECT_CODE(call("/v2/vectordb/entities/insert",
                     "{`collectionName`:`defs`,`data`:[{`id`:4,`v`:[1,0]}]}"),
                SX__MC_BAD_INSERT); /* req has no default */
    r = ok(call("/v2/vectordb/entities/upsert",
                "{`collectionName`:`defs`,`data`:[{`id`:3,`v`:[1,1],`req`:false}]}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`defs`,`filter`:`id == 3`,`outputFields`:[`label`,`n`]}"));
    ASSERT(r);
    json_t *row = json_array_get(data_of(r), 0);
    ASSERT(row && strcmp(jstr(row, "label"), "none") == 0);
    ASSERT_EQ(jint(row, "n"), -4);
    json_decref(r);
}

/* Nullable fields through REST: created with "nullable", described, a row that omits the field or
 * gives null stores NULL (a default wins over NULL), answered as null, filtered with three-valued
 * logic and `is [not] null`; the key and the vector cannot be nullable. */
static void test_nullable(void)
{
    json_t *r =
        ok(call("/v2/vectordb/collections/create",
                "{`collectionName`:`nul`,`schema`:{`fields`:["
                "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}},"
                "{`fieldName`:`n`,`dataType`:`Int32`,`nullable`:true},"
                "{`fieldName`:`s`,`dataType`:`VarChar`,`nullable`:true,`elementTypeParams`:{`max_"
                "length`:8}},"
                "{`fieldName`:`d`,`dataType`:`Double`,`nullable`:true,`defaultValue`:1.5},"
                "{`fieldName`:`j`,`dataType`:`JSON`,`nullable`:true},"
                "{`fieldName`:`a`,`dataType`:`Array`,`elementDataType`:`Int64`,`nullable`:true,"
                "`elementTypeParams`:{`max_capacity`:4}}]},"
                "`indexParams`:[{`fieldName`:`v`,`metricType`:`L2`,`indexType`:`FLAT`}]}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/collections/describe", "{`collectionName`:`nul`}"));
    ASSERT(r);
    json_t *fields = json_object_get(json_object_get(r, "data"), "fields");
    size_t nn = 0;
    for (size_t i = 0; i < json_array_size(fields); i++)
        nn += json_is_true(json_object_get(json_array_get(fields, i), "nullable"));
    ASSERT_EQ(nn, 5);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/insert",
                "{`collectionName`:`nul`,`data`:["
                "{`id`:1,`v`:[1,0],`n`:5,`s`:`x`,`d`:2.5,`j`:{`k`:1},`a`:[1,2]},"
                "{`id`:2,`v`:[0,1],`n`:null,`s`:null,`d`:null,`j`:null,`a`:null},"
                "{`id`:3,`v`:[1,1]},"
                "{`id`:4,`v`:[2,1],`n`:-3,`a`:[7]}]}"));
    ASSERT(r);
    json_decref(r);

    static const struct {
        const char *filter;
        const char *ids;
    } fs[] = { { "n is null", "2,3" },
               { "n is not null", "1,4" },
               { "n > 0", "1" },
               { "not (n > 0)", "4" },
               { "n > 0 or s is null", "1,2,3,4" },
               { "s == 'x'", "1" },
               { "not (s == 'x')", "" },
               { "d == 1.5", "2,3,4" }, /* the default, not NULL */
               { "j is null", "2,3,4" },
               { "j['k'] == 1", "1" },
               { "array_contains(a, 7)", "4" },
               { "not array_contains(a, 7)", "1" },
               { "a is null and n is null", "2,3" } };

    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
        char body[300];
        snprintf(body, sizeof body, "{`collectionName`:`nul`,`filter`:`%s`,`limit`:10}",
                 fs[k].filter);
        r = ok(call("/v2/vectordb/entities/query", body));
        ASSERT(r);
        char got[64] = "";
        for (size_t i = 0; i < json_array_size(data_of(r)); i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)jint(json_array_get(data_of(r), i), "id"));
        if (strcmp(got, fs[k].ids) != 0)
            FAILF("<%s>: ids %s, want %s", fs[k].filter, got, fs[k].ids);
        json_decref(r);
    }
    r = ok(call("/v2/vectordb/entities/get",
                "{`collectionName`:`nul`,`id`:[2,4],`outputFields`:[`n`,`s`,`d`,`j`,`a`]}"));
    ASSERT(r);
    json_t *r2 = json_array_get(data_of(r), 0), *r4 = json_array_get(data_of(r), 1);
    ASSERT(r2 && r4);
    ASSERT(json_is_null(json_object_get(r2, "n")) && json_is_null(json_object_get(r2, "s")));
    ASSERT(json_is_null(json_object_get(r2, "j")) && json_is_null(json_object_get(r2, "a")));
    ASSERT(json_real_value(json_object_get(r2, "d")) == 1.5);
    ASSERT_EQ(jint(r4, "n"), -3);
    ASSERT(json_is_null(json_object_get(r4, "s")));
    ASSERT_EQ(json_array_size(json_object_get(r4, "a")), 1);
    json_decref(r);
    /* the key and the vector are never nullable */
    EXPECT_CODE(call("/v2/vectordb/collections/create",
                     "{`collectionName`:`nul2`,`schema`:{`fields`:["
                     "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true,`nullable`:true},"
                     "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}}]}}"),
                SX__MC_INVALID_PARAM);
    EXPECT_CODE(call("/v2/vectordb/collections/create",
                     "{`collectionName`:`nul2`,`schema`:{`fields`:["
                     "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                     "{`fieldName`:`v`,`dataType`:`FloatVector`,`nullable`:true,"
                     "`elementTypeParams`:{`dim`:2}}]}}"),
                SX__MC_INVALID_PARAM);
    /* a vector cannot be null in a row */
    EXPECT_CODE(
        call("/v2/vectordb/entities/insert", "{`collectionName`:`nul`,`data`:[{`id`:9,`v`:null}]}"),
        SX__MC_BAD_INSERT);
}

/* A filter on a field the collection lacks: 1100, naming the field and listing the declared
 * fields (never the hidden columns); with the dynamic field enabled such a name is a
 * dynamic-field key instead (rows without it match nothing). Search, query and delete share the
 * check. */
static void test_missing_field_filter(void)
{
    json_t *r = call("/v2/vectordb/entities/search",
                     "{`collectionName`:`gt`,`data`:[[1,1,1,1,1,1,1,1]],`filter`:`color == red`}");
    ASSERT_EQ(code_of(r), SX__MC_INVALID_PARAM);
    const char *want = "invalid parameter: cannot parse expression: field color not exist: "
                       "collection gt has no field named \"color\" (its fields: id, v, tag)";
    if (strcmp(msg_of(r), want) != 0)
        FAILF("message \"%s\", want \"%s\"", msg_of(r), want);
    json_decref(r);
    r = call("/v2/vectordb/entities/query", "{`collectionName`:`gt`,`filter`:`tag > 1 or x < 2`}");
    ASSERT_EQ(code_of(r), SX__MC_INVALID_PARAM);
    ASSERT(strstr(msg_of(r), "no field named \"x\" (its fields: id, v, tag)") != NULL);
    json_decref(r);
    /* a hidden column is not a field either */
    r = call("/v2/vectordb/entities/query",
             "{`collectionName`:`dyn`,`filter`:`" SX__PART_FIELD " == 'p1'`}");
    ASSERT_EQ(code_of(r), SX__MC_INVALID_PARAM);
    ASSERT(strstr(msg_of(r), "no field named \"" SX__PART_FIELD "\" (its fields: id, vector)") !=
           NULL);
    ASSERT(strstr(msg_of(r), "dynamic") == NULL);
    json_decref(r);
    /* dynamic field enabled: a dynamic-field key no row has; search and delete match nothing */
    r = ok(call("/v2/vectordb/entities/search",
                "{`collectionName`:`dyn`,`data`:[[1,0]],`filter`:`color == 'red'`}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 0);
    json_decref(r);
    r = ok(
        call("/v2/vectordb/entities/delete", "{`collectionName`:`dyn`,`filter`:`color == 'red'`}"));
    ASSERT(r);
    json_decref(r);
    /* $meta on a collection without the dynamic field */
    r = call("/v2/vectordb/entities/query", "{`collectionName`:`gt`,`filter`:`$meta['a'] == 1`}");
    ASSERT_EQ(code_of(r), SX__MC_INVALID_PARAM);
    ASSERT(strstr(msg_of(r), "no dynamic field") != NULL);
    json_decref(r);
}

static void test_auto_id_upsert_delete(void)
{
    EXPECT_CODE(call("/v2/vectordb/entities/insert",
                     "{`collectionName`:`auto`,`data`:[{`pk`:5,`v`:[1,2]}]}"),
                SX__MC_BAD_INSERT);
    json_t *r = ok(call_ex("/v2/vectordb/entities/insert",
                           "{`collectionName`:`auto`,`data`:[{`v`:[1,2]},{`v`:[3,4]}]}", true));
    ASSERT(r);
    json_t *ids = json_object_get(data_of(r), "insertIds");
    ASSERT_EQ(json_array_size(ids), 2);
    ASSERT(json_is_string(json_array_get(ids, 0)));
    char body[256];
    snprintf(body, sizeof body, "{`collectionName`:`auto`,`id`:[`%s`,`%s`]}",
             json_string_value(json_array_get(ids, 1)), json_string_value(json_array_get(ids, 0)));
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/get", body));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 2);
    ASSERT(json_real_value(
               json_array_get(json_object_get(json_array_get(data_of(r), 0), "v"), 0)) == 3.0);
    json_decref(r);

    /* autoID upsert: the given key is replaced by a row with a new id */
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`auto`,`filter`:`pk >= 0`,`limit`:1}"));
    ASSERT(r);
    int64_t old_id = jint(json_array_get(data_of(r), 0), "pk");
    json_decref(r);
    snprintf(body, sizeof body, "{`collectionName`:`auto`,`data`:[{`pk`:%lld,`v`:[7,8]}]}",
             (long long)old_id);
    r = ok(call("/v2/vectordb/entities/upsert", body));
    ASSERT(r);
    int64_t new_id =
        json_integer_value(json_array_get(json_object_get(data_of(r), "upsertIds"), 0));
    ASSERT(new_id != old_id);
    json_decref(r);
    ASSERT_EQ(count_rows("auto"), 2);
    snprintf(body, sizeof body, "{`collectionName`:`auto`,`id`:[%lld,%lld]}", (long long)old_id,
             (long long)new_id);
    r = ok(call("/v2/vectordb/entities/get", body));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "pk"), new_id);
    ASSERT(json_real_value(
               json_array_get(json_object_get(json_array_get(data_of(r), 0), "v"), 1)) == 8.0);
    json_decref(r);
    EXPECT_CODE(
        call("/v2/vectordb/entities/upsert", "{`collectionName`:`auto`,`data`:[{`v`:[7,8]}]}"),
        SX__MC_BAD_INSERT);

    /* upsert replaces the row; ids echoed */
    r = ok(call("/v2/vectordb/entities/upsert",
                "{`collectionName`:`c1`,`data`:[{`id`:1,`vector`:[0.1,0.2,0.3,0.4],`color`:`green`,"
                "`i32`:1,`i8`:1,`big`:1,`d`:1,`b`:true,`j`:{}}]}"));
    ASSERT(r);
    ASSERT_EQ(jint(data_of(r), "upsertCount"), 1);
    ASSERT_EQ(json_integer_value(json_array_get(json_object_get(data_of(r), "upsertIds"), 0)), 1);
    json_decref(r);
    ASSERT_EQ(count_rows("c1"), 3);
    r = ok(call("/v2/vectordb/entities/get",
                "{`collectionName`:`c1`,`id`:1,`outputFields`:[`color`,`j`]}"));
    ASSERT(r);
    ASSERT(strcmp(jstr(json_array_get(data_of(r), 0), "color"), "green") == 0);
    ASSERT(strcmp(jstr(json_array_get(data_of(r), 0), "j"), "{}") == 0);
    json_decref(r);

    /* varchar primary keys: always strings */
    r = ok(call("/v2/vectordb/entities/insert",
                "{`collectionName`:`vs`,`data`:[{`name`:`a`,`v`:[1,0]},{`name`:`b`,`v`:[0,1]}]}"));
    ASSERT(r);
    ASSERT(strcmp(json_string_value(json_array_get(json_object_get(data_of(r), "insertIds"), 1)),
                  "b") == 0);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/get", "{`collectionName`:`vs`,`id`:`b`}"));
    ASSERT(r);
    ASSERT(strcmp(jstr(json_array_get(data_of(r), 0), "name"), "b") == 0);
    json_decref(r);
    EXPECT_CODE(call("/v2/vectordb/entities/get", "{`collectionName`:`vs`,`id`:[1]}"),
                SX__MC_BAD_PK);

    /* delete with exprParams templates */
    EXPECT_CODE(call("/v2/vectordb/entities/delete", "{`collectionName`:`c1`}"),
                SX__MC_MISSING_REQUIRED);
    EXPECT_CODE(
        call("/v2/vectordb/entities/delete", "{`collectionName`:`c1`,`filter`:`id in {ids}`}"),
        SX__MC_INVALID_PARAM);
    r = ok(call("/v2/vectordb/entities/delete",
                "{`collectionName`:`vs`,`filter`:`name == {n}`,`exprParams`:{`n`:`a`}}"));
    ASSERT(r);
    ASSERT_EQ(jint(data_of(r), "deleteCount"), 1);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/delete",
                "{`collectionName`:`c1`,`filter`:`id in {ids} and color != '{ids}'`,"
                "`exprParams`:{`ids`:[2,7]}}"));
    ASSERT(r);
    ASSERT_EQ(jint(data_of(r), "deleteCount"), 1);
    json_decref(r);
    ASSERT_EQ(count_rows("c1"), 2);
    r = ok(call("/v2/vectordb/entities/get", "{`collectionName`:`c1`,`id`:[1,2,3]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 2);
    ASSERT_EQ(jint(json_array_get(data_of(r), 1), "id"), 3);
    json_decref(r);
}

static void test_not_loaded(void)
{
    EXPECT_CODE(call("/v2/vectordb/entities/query", "{`collectionName`:`unl`}"),
                SX__MC_COLL_NOT_LOADED);
    EXPECT_CODE(call("/v2/vectordb/entities/get", "{`collectionName`:`unl`,`id`:1}"),
                SX__MC_COLL_NOT_LOADED);
    json_t *r = call("/v2/vectordb/entities/search", "{`collectionName`:`unl`,`data`:[[1,2]]}");
    ASSERT_EQ(code_of(r), SX__MC_COLL_NOT_LOADED);
    ASSERT(strcmp(msg_of(r), "collection not loaded[collection=unl]") == 0);
    json_decref(r);
    /* writes do not need a load */
    r = ok(call("/v2/vectordb/entities/insert",
                "{`collectionName`:`unl`,`data`:[{`id`:1,`v`:[1,2]}]}"));
    ASSERT(r);
    json_decref(r);
}

/* ------------------------------------------------------------------ search vs ground truth */

#define GT_N   300
#define GT_DIM 8
static float g_vecs[GT_N][GT_DIM];
static int64_t g_tags[GT_N];

static void fill_gt(const char *coll)
{
    uint64_t s = 777;
    json_t *rows = json_array();
    for (size_t i = 0; i < GT_N; i++) {
        json_t *v = json_array();
        for (size_t d = 0; d < GT_DIM; d++) {
            /* exactly representable values: the JSON round trip is exact */
            g_vecs[i][d] = (float)(int)(test_rand(&s) % 1000) / 256.0f - 2.0f;
            json_array_append_new(v, json_real((double)g_vecs[i][d]));
        }
        g_tags[i] = (int64_t)(i % 7);
        json_array_append_new(rows, json_pack("{s:I,s:o,s:I}", "id", (json_int_t)i, "v", v, "tag",
                                              (json_int_t)g_tags[i]));
    }
    json_t *body = json_pack("{s:s,s:o}", "collectionName", coll, "data", rows);
    char *txt = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    json_t *r = ok(call("/v2/vectordb/entities/insert", txt));
    free(txt);
    ASSERT(r);
    ASSERT_EQ(jint(data_of(r), "insertCount"), GT_N);
    json_decref(r);
}

typedef struct gt_hit {
    double d;
    int64_t id;
} gt_hit;

static int gt_cmp_asc(const void *a, const void *b)
{
    const gt_hit *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* Ground truth for query q: all rows passing `tag_mod` (-1: all) sorted best first; distances
 * as the engine reports them (squared L2; IP as larger-is-better, stored negated for sorting). */
static size_t gt_search(const float *q, bool ip, int tag_eq, gt_hit *out)
{
    size_t n = 0;
    for (size_t i = 0; i < GT_N; i++) {
        if (tag_eq >= 0 && g_tags[i] != tag_eq)
            continue;
        double acc = 0;
        for (size_t d = 0; d < GT_DIM; d++) {
            double x = (double)q[d], y = (double)g_vecs[i][d];
            acc += ip ? x * y : (x - y) * (x - y);
        }
        out[n].d = ip ? -acc : acc;
        out[n].id = (int64_t)i;
        n++;
    }
    qsort(out, n, sizeof *out, gt_cmp_asc);
    return n;
}

static void make_queries(float q[2][GT_DIM], uint64_t seed)
{
    for (size_t i = 0; i < 2; i++)
        for (size_t d = 0; d < GT_DIM; d++)
            q[i][d] = (float)(int)(test_rand(&seed) % 1000) / 256.0f - 2.0f;
}

static char *search_body(const char *coll, float (*q)[GT_DIM], size_t nq, const char *extra)
{
    json_t *data = json_array();
    for (size_t i = 0; i < nq; i++) {
        json_t *v = json_array();
        for (size_t d = 0; d < GT_DIM; d++)
            json_array_append_new(v, json_real((double)q[i][d]));
        json_array_append_new(data, v);
    }
    json_t *body = json_pack("{s:s,s:o}", "collectionName", coll, "data", data);
    char *txt = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    /* splice the extra members in before the closing brace */
    size_t n = strlen(txt);
    char *out = malloc(n + strlen(extra) + 4);
    memcpy(out, txt, n - 1);
    out[n - 1] = '\0';
    if (*extra) {
        strcat(out, ",");
        strcat(out, extra);
    }
    strcat(out, "}");
    free(txt);
    return out;
}

/* Checks the flat search result against the truth, k hits per query from `skip`. */
static void check_hits(json_t *r,
                       gt_hit truth[2][GT_N],
                       const size_t *n_truth,
                       size_t nq,
                       size_t k,
                       size_t skip,
                       bool ip)
{
    json_t *topks = json_object_get(r, "topks");
    json_t *data = data_of(r);
    ASSERT_EQ(json_array_size(topks), nq);
    size_t at = 0;
    for (size_t qi = 0; qi < nq; qi++) {
        size_t want = n_truth[qi] > skip ? n_truth[qi] - skip : 0;
        if (want > k)
            want = k;
        ASSERT_EQ(json_integer_value(json_array_get(topks, qi)), want);
        for (size_t h = 0; h < want; h++, at++) {
            json_t *row = json_array_get(data, at);
            const gt_hit *g = &truth[qi][skip + h];
            if (jint(row, "id") != g->id)
                FAILF("query %zu hit %zu: id %lld, want %lld", qi, h, (long long)jint(row, "id"),
                      (long long)g->id);
            double dist = json_real_value(json_object_get(row, "distance"));
            ASSERT_NEAR(dist, ip ? -g->d : g->d, 1e-4);
        }
    }
    ASSERT_EQ(json_array_size(data), at);
}

static gt_hit g_truth[2][GT_N];

static void test_fill_gt(void)
{
    fill_gt("gt");
    fill_gt("gtip");
}

static void test_search_ground_truth(void)
{
    float q[2][GT_DIM];
    make_queries(q, 4242);
    size_t nt[2];
    for (size_t i = 0; i < 2; i++)
        nt[i] = gt_search(q[i], false, -1, g_truth[i]);
    /* nq = 2, default outputs (id + distance only) */
    char *b = search_body("gt", q, 2, "`limit`:7");
    json_t *r = ok(call("/v2/vectordb/entities/search", b));
    free(b);
    ASSERT(r);
    check_hits(r, g_truth, nt, 2, 7, 0, false);
    ASSERT_EQ(json_object_size(json_array_get(data_of(r), 0)), 2);
    ASSERT_EQ(jint(r, "cost"), 0);
    json_decref(r);
    /* offset, output field, ids as strings */
    b = search_body("gt", q, 2, "`limit`:5,`offset`:3,`outputFields`:[`tag`]");
    r = ok(call("/v2/vectordb/entities/search", b));
    free(b);
    ASSERT(r);
    check_hits(r, g_truth, nt, 2, 5, 3, false);
    json_t *row = json_array_get(data_of(r), 0);
    ASSERT_EQ(jint(row, "tag"), g_tags[jint(row, "id")]);
    json_decref(r);
    /* filter + searchParams nested / flat / both agreeing */
    for (size_t i = 0; i < 2; i++)
        nt[i] = gt_search(q[i], false, 3, g_truth[i]);
    const char *variants[] = {
        "`limit`:4,`filter`:`tag == "
        "{t}`,`exprParams`:{`t`:3},`searchParams`:{`metricType`:`L2`,`params`:{`ef`:64}}",
        "`limit`:4,`filter`:`tag == 3`,`searchParams`:{`metricType`:`l2`,`ef`:64}",
        "`limit`:4,`filter`:`tag == "
        "3`,`searchParams`:{`ef`:64,`params`:{`ef`:`64`}},`consistencyLevel`:`Strong`",
    };
    for (size_t v = 0; v < 3; v++) {
        b = search_body("gt", q, 2, variants[v]);
        r = ok(call("/v2/vectordb/entities/search", b));
        free(b);
        if (!r)
            FAILF("variant %zu failed", v);
        check_hits(r, g_truth, nt, 2, 4, 0, false);
        json_decref(r);
    }

    /* errors */
    const struct {
        const char *extra;
        int code;
    } errs[] = {
        { "`searchParams`:{`ef`:64,`params`:{`ef`:32}}", SX__MC_INVALID_PARAM },
        { "`searchParams`:{`metricType`:`IP`}", SX__MC_INVALID_PARAM },
        { "`searchParams`:{`metricType`:`HAMMING`}", SX__MC_INVALID_PARAM },
        { "`consistencyLevel`:`Sometimes`", SX__MC_INVALID_PARAM },
        /* the window: Milvus's plain errors, 65535 */
        { "`limit`:16000,`offset`:385", SX__MC_UNEXPECTED },
        { "`limit`:16385", SX__MC_UNEXPECTED },
        { "`offset`:-1", SX__MC_UNEXPECTED },
        { "`limit`:9223372036854775807,`offset`:1", SX__MC_UNEXPECTED },
        { "`limit`:1,`offset`:9223372036854775807", SX__MC_UNEXPECTED },
        { "`annsField`:`tag`", SX__MC_INVALID_PARAM },   /* not a vector field */
        { "`annsField`:`nope`", SX__MC_INVALID_PARAM },  /* no such field */
        { "`groupingField`:`v`", SX__MC_INVALID_PARAM }, /* a vector cannot group */
        { "`partitionNames`:[`nope`]", SX__MC_PART_NOT_FOUND },
        { "`filter`:`nofield > 1`", SX__MC_INVALID_PARAM },
        { "`searchParams`:{`radius`:1,`range_filter`:2}", SX__MC_INVALID_PARAM },
    };

    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        b = search_body("gt", q, 1, errs[i].extra);
        r = call("/v2/vectordb/entities/search", b);
        free(b);
        if (code_of(r) != errs[i].code)
            FAILF("case %zu (%s): code %d, want %d (%s)", i, errs[i].extra, code_of(r),
                  errs[i].code, msg_of(r));
        ASSERT(strlen(msg_of(r)) > 0);
        json_decref(r);
    }
    EXPECT_CODE(call("/v2/vectordb/entities/search", "{`collectionName`:`gt`,`data`:[[1,2,3]]}"),
                SX__MC_BAD_JSON);
    EXPECT_CODE(call("/v2/vectordb/entities/search", "{`collectionName`:`gt`,`data`:[]}"),
                SX__MC_BAD_JSON);
    EXPECT_CODE(call("/v2/vectordb/entities/search", "{`collectionName`:`gt`}"),
                SX__MC_MISSING_REQUIRED);
    g_opts.max_nq = 1;
    b = search_body("gt", q, 2, "");
    EXPECT_CODE(call("/v2/vectordb/entities/search", b), SX__MC_PARAM_TOO_LARGE);
    free(b);
    g_opts.max_nq = 0;
    /* no rows pass: topks [0,0], data [] */
    b = search_body("gt", q, 2, "`filter`:`tag > 100`");
    r = ok(call("/v2/vectordb/entities/search", b));
    free(b);
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 0);
    ASSERT_EQ(json_integer_value(json_array_get(json_object_get(r, "topks"), 1)), 0);
    json_decref(r);
}

static void test_range_search(void)
{
    float q[2][GT_DIM];
    make_queries(q, 99);
    gt_hit all[GT_N];
    /* L2: keep range_filter <= d < radius, with radius/range_filter between ranks */
    size_t n = gt_search(q[0], false, -1, all);
    ASSERT(n == GT_N);
    double radius = (all[40].d + all[41].d) / 2, rf = (all[9].d + all[10].d) / 2;
    ASSERT(all[40].d < all[41].d && all[9].d < all[10].d);
    size_t nt[2] = { 31, 0 }; /* ranks 10..40 */
    memcpy(g_truth[0], all + 10, 31 * sizeof(gt_hit));
    char extra[256];
    for (size_t lim = 5; lim <= 100; lim += 95) {
        snprintf(extra, sizeof extra,
                 "`limit`:%zu,`searchParams`:{`radius`:%.17g,`range_filter`:%.17g}", lim, radius,
                 rf);
        char *b = search_body("gt", q, 1, extra);
        json_t *r = ok(call("/v2/vectordb/entities/search", b));
        free(b);
        ASSERT(r);
        check_hits(r, g_truth, nt, 1, lim, 0, false);
        json_decref(r);
    }
    /* radius only, with an offset */
    snprintf(extra, sizeof extra,
             "`limit`:100,`offset`:2,`searchParams`:{`params`:{`radius`:%.17g}}", radius);
    char *b = search_body("gt", q, 1, extra);
    json_t *r = ok(call("/v2/vectordb/entities/search", b));
    free(b);
    ASSERT(r);
    memcpy(g_truth[0], all, 41 * sizeof(gt_hit));
    nt[0] = 41;
    check_hits(r, g_truth, nt, 1, 100, 2, false);
    json_decref(r);

    /* IP: keep radius < d <= range_filter */
    n = gt_search(q[1], true, -1, all); /* d = -ip, ascending */
    double ip_hi = -(all[4].d + all[5].d) / 2, ip_lo = -(all[60].d + all[61].d) / 2;
    ASSERT(all[4].d < all[5].d && all[60].d < all[61].d);
    memcpy(g_truth[0], all + 5, 56 * sizeof(gt_hit)); /* ranks 5..60 */
    nt[0] = 56;
    snprintf(extra, sizeof extra,
             "`limit`:50,`searchParams`:{`metricType`:`IP`,`radius`:%.17g,`range_filter`:%.17g}",
             ip_lo, ip_hi);
    b = search_body("gtip", &q[1], 1, extra);
    r = ok(call("/v2/vectordb/entities/search", b));
    free(b);
    ASSERT(r);
    check_hits(r, g_truth, nt, 1, 50, 0, true);
    json_decref(r);
}

static void test_partitions(void)
{
    json_t *r = ok(
        call("/v2/vectordb/entities/insert",
             "{`collectionName`:`c1`,`partitionName`:`p1`,`data`:[{`id`:50,"
             "`vector`:[9,9,9,9],`color`:`red`,`i32`:1,`i8`:1,`big`:1,`d`:1,`b`:true,`j`:{}}]}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`c1`,`partitionNames`:[`p1`],`outputFields`:[`id`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 50);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/query",
                "{`collectionName`:`c1`,`filter`:`color == 'red' or id > 0`,"
                "`partitionNames`:[`_default`],`outputFields`:[`count(*)`]}"));
    ASSERT(r);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "count(*)"), 2);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/search",
                "{`collectionName`:`c1`,`data`:[[0,0,0,0]],`limit`:10,`partitionNames`:[`p1`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 50);
    ASSERT_NEAR(json_real_value(json_object_get(json_array_get(data_of(r), 0), "distance")), 324.0,
                1e-3);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/get",
                "{`collectionName`:`c1`,`id`:[1,50],`partitionNames`:[`p1`]}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(data_of(r)), 1);
    ASSERT_EQ(jint(json_array_get(data_of(r), 0), "id"), 50);
    json_decref(r);
    EXPECT_CODE(
        call("/v2/vectordb/entities/query", "{`collectionName`:`c1`,`partitionNames`:[`p2`]}"),
        SX__MC_PART_NOT_FOUND);
    r = ok(call("/v2/vectordb/entities/delete",
                "{`collectionName`:`c1`,`filter`:`id > 0`,`partitionName`:`p1`}"));
    ASSERT(r);
    ASSERT_EQ(jint(data_of(r), "deleteCount"), 1);
    json_decref(r);
    ASSERT_EQ(count_rows("c1"), 2);
}

/* The spec's example search (section 11): ids 1 and 3, squared L2 0 and 0.67. */
static void test_search_example(void)
{
    json_t *r = ok(call_ex(
        "/v2/vectordb/entities/search",
        "{`collectionName`:`c1`,`data`:[[0.1,0.2,0.3,0.4]],`annsField`:`vector`,"
        "`filter`:`color == 'red' or color == 'green'`,`limit`:2,`outputFields`:[`id`,`color`],"
        "`searchParams`:{`metricType`:`L2`,`params`:{`ef`:64}}}",
        true));
    ASSERT(r);
    json_t *d = data_of(r);
    ASSERT_EQ(json_array_size(d), 2);
    ASSERT_EQ(json_integer_value(json_array_get(json_object_get(r, "topks"), 0)), 2);
    ASSERT(strcmp(jstr(json_array_get(d, 0), "id"), "1") == 0);
    ASSERT(strcmp(jstr(json_array_get(d, 1), "id"), "3") == 0);
    ASSERT(strcmp(jstr(json_array_get(d, 1), "color"), "red") == 0);
    ASSERT_NEAR(json_real_value(json_object_get(json_array_get(d, 0), "distance")), 0.0, 1e-6);
    ASSERT_NEAR(json_real_value(json_object_get(json_array_get(d, 1), "distance")), 0.67, 1e-5);
    ASSERT_EQ(json_object_size(json_array_get(d, 0)), 3);
    json_decref(r);
}

/* ------------------------------------------------------------------ hybrid search */

typedef struct fused {
    int64_t id;
    double score;
} fused;

static int fused_cmp(const void *a, const void *b)
{
    const fused *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* Expected fusion of sub 0 (no filter) and sub 1 (tag == 3), `lim` hits each. */
static size_t expect_fused(const float *q, size_t lim, bool weighted, const double *w, fused *out)
{
    static gt_hit s0[GT_N], s1[GT_N];
    size_t n0 = gt_search(q, false, -1, s0), n1 = gt_search(q, false, 3, s1);
    n0 = n0 < lim ? n0 : lim;
    n1 = n1 < lim ? n1 : lim;
    double score[GT_N] = { 0 };
    bool seen[GT_N] = { false };
    for (size_t h = 0; h < n0; h++) {
        score[s0[h].id] += weighted ? w[0] * (1.0 - 2.0 * atan(s0[h].d) / 3.14159265358979323846)
                                    : 1.0 / (60.0 + (double)(h + 1));
        seen[s0[h].id] = true;
    }
    for (size_t h = 0; h < n1; h++) {
        score[s1[h].id] += weighted ? w[1] * (1.0 - 2.0 * atan(s1[h].d) / 3.14159265358979323846)
                                    : 1.0 / (60.0 + (double)(h + 1));
        seen[s1[h].id] = true;
    }
    size_t n = 0;
    for (size_t i = 0; i < GT_N; i++)
        if (seen[i])
            out[n++] = (fused){ (int64_t)i, score[i] };
    qsort(out, n, sizeof *out, fused_cmp);
    return n;
}

static char *hybrid_body(float (*q)[GT_DIM], const char *rerank, size_t lim, size_t sub_lim)
{
    json_t *subs = json_array();
    for (size_t s = 0; s < 2; s++) {
        json_t *data = json_array(), *v = json_array();
        for (size_t d = 0; d < GT_DIM; d++)
            json_array_append_new(v, json_real((double)q[0][d]));
        json_array_append_new(data, v);
        json_t *sub = json_pack("{s:o,s:s,s:I,s:s}", "data", data, "annsField", "v", "limit",
                                (json_int_t)sub_lim, "metricType", "L2");
        if (s == 1)
            json_object_set_new(sub, "filter", json_string("tag == {t}"));
        if (s == 1)
            json_object_set_new(sub, "exprParams", json_pack("{s:i}", "t", 3));
        json_array_append_new(subs, sub);
    }
    json_error_t e;
    json_t *rr = json_loads(rerank, 0, &e);
    json_t *body = json_pack("{s:s,s:o,s:o,s:I,s:[s]}", "collectionName", "gt", "search", subs,
                             "rerank", rr, "limit", (json_int_t)lim, "outputFields", "tag");
    char *txt = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return txt;
}

static void test_hybrid(void)
{
    float q[2][GT_DIM];
    make_queries(q, 31337);
    fused want[GT_N];
    const char *rerank[] = { "{\"strategy\":\"rrf\",\"params\":{\"k\":60}}",
                             "{\"strategy\":\"weighted\",\"params\":{\"weights\":[0.7,0.3]}}" };
    const double w[2] = { 0.7, 0.3 };
    for (size_t v = 0; v < 2; v++) {
        size_t n = expect_fused(q[0], 10, v == 1, w, want);
        ASSERT(n > 10);
        char *b = hybrid_body(q, rerank[v], 8, 10);
        json_t *r = ok(call("/v2/vectordb/entities/hybrid_search", b));
        free(b);
        ASSERT(r);
        ASSERT_EQ(json_integer_value(json_array_get(json_object_get(r, "topks"), 0)), 8);
        json_t *d = data_of(r);
        ASSERT_EQ(json_array_size(d), 8);
        for (size_t i = 0; i < 8; i++) {
            json_t *row = json_array_get(d, i);
            if (jint(row, "id") != want[i].id)
                FAILF("rerank %zu hit %zu: id %lld, want %lld", v, i, (long long)jint(row, "id"),
                      (long long)want[i].id);
            ASSERT_NEAR(json_real_value(json_object_get(row, "distance")), want[i].score, 1e-6);
            ASSERT_EQ(jint(row, "tag"), g_tags[want[i].id]);
        }
        json_decref(r);
    }
    char *b = hybrid_body(q, "{\"strategy\":\"weighted\",\"params\":{\"weights\":[1]}}", 8, 10);
    EXPECT_CODE(call("/v2/vectordb/entities/hybrid_search", b), SX__MC_INVALID_PARAM);
    free(b);
    b = hybrid_body(q, "{\"strategy\":\"magic\"}", 8, 10);
    EXPECT_CODE(call("/v2/vectordb/entities/hybrid_search", b), SX__MC_INVALID_PARAM);
    free(b);
    /* limit + offset past int64 (it was a signed overflow) */
    b = hybrid_body(q, rerank[0], (size_t)INT64_MAX, 10);
    char *bo = malloc(strlen(b) + 16);
    ASSERT(bo);
    snprintf(bo, strlen(b) + 16, "%.*s,\"offset\":1}", (int)strlen(b) - 1, b);
    EXPECT_CODE(call("/v2/vectordb/entities/hybrid_search", bo), SX__MC_UNEXPECTED);
    free(bo);
    free(b);
    EXPECT_CODE(call("/v2/vectordb/entities/hybrid_search", "{`collectionName`:`gt`}"),
                SX__MC_MISSING_REQUIRED);
    EXPECT_CODE(call("/v2/vectordb/entities/hybrid_search",
                     "{`collectionName`:`gt`,`search`:[{`data`:[[1,1,1,1,1,1,1,1]]},"
                     "{`data`:[[1,1,1,1,1,1,1,1],[0,0,0,0,0,0,0,0]]}]}"),
                SX__MC_INVALID_PARAM);
}

/* A range search on a sealed HNSW segment whose ef equals its limit (as pymilvus's
 * search_iterator sends them): the widened rounds ask for 4x, 16x ... the limit, and the graph's
 * ef is raised with them instead of failing with "ef(5) should be larger than or equal to
 * k(20)". The hits are the exact ones in range (ef >= the rows here). */
static void test_range_search_hnsw_ef(void)
{
    sx__coll_meta *m = new_meta("rsh", SX_METRIC_L2, false);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    ASSERT(create(m));
    json_t *r = ok(call("/v2/vectordb/indexes/create",
                        "{`collectionName`:`rsh`,`indexParams`:[{`fieldName`:`v`,`indexName`:`v`,"
                        "`metricType`:`L2`,`params`:{`index_type`:`HNSW`,`M`:8,"
                        "`efConstruction`:64}}]}"));
    ASSERT(r);
    json_decref(r);
    char body[8192] = "{`collectionName`:`rsh`,`data`:[";
    for (int i = 0; i < 60; i++) /* row i at distance^2 i^2 from the origin */
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s{`id`:%d,`v`:[%d,0]}",
                 i ? "," : "", i, i);
    strcat(body, "]}");
    r = ok(call("/v2/vectordb/entities/insert", body));
    ASSERT(r);
    json_decref(r);
    sx_collection *h = NULL;
    sx__coll_meta meta;
    ASSERT_OK(sx__cat_coll_get(g_cat, "default", "rsh", &h, &meta));
    ASSERT_OK(sx_flush(h));
    ASSERT_OK(sx_index_wait(h, 60000));
    sx_collection_release(h);
    /* describe gives the build params the engine uses */
    r = ok(call("/v2/vectordb/indexes/describe", "{`collectionName`:`rsh`,`indexName`:`v`}"));
    ASSERT(r);
    json_t *bp = json_object_get(json_array_get(data_of(r), 0), "params");
    /* numbers, as the client sent them (pymilvus compares Collection.index().params) */
    ASSERT(json_integer_value(json_object_get(bp, "M")) == 8 &&
           json_integer_value(json_object_get(bp, "efConstruction")) == 64);
    json_decref(r);
    /* rows 30..49: 900 <= d < 2500; limit 5 needs rounds of 5, 20, 80 candidates */
    r = ok(call("/v2/vectordb/entities/search",
                "{`collectionName`:`rsh`,`data`:[[0,0]],`limit`:5,"
                "`searchParams`:{`params`:{`ef`:5,`radius`:2500,`range_filter`:900}}}"));
    ASSERT(r);
    json_t *d = data_of(r);
    ASSERT_EQ(json_array_size(d), 5);
    for (size_t i = 0; i < 5; i++)
        ASSERT_EQ(jint(json_array_get(d, i), "id"), 30 + (int64_t)i);
    json_decref(r);
    /* the first round keeps the caller's ef: smaller than the limit is still an error */
    EXPECT_CODE(call("/v2/vectordb/entities/search",
                     "{`collectionName`:`rsh`,`data`:[[0,0]],`limit`:5,"
                     "`searchParams`:{`params`:{`ef`:4,`radius`:2500}}}"),
                SX__MC_INVALID_PARAM);
    ASSERT_OK(sx__cat_coll_drop(g_cat, "default", "rsh"));
}

/* Group-by search against brute force: groups in order of their best hit, groupSize hits each,
 * offset counted in groups, a filter, a nullable field whose NULLs form one group, the group's
 * value in every hit; errors for a bad grouping field, a bad groupSize and a grouped range
 * search. The rows are growing and then sealed under a FLAT index (exact both times). */
#define GRP_N 400
static double grp_d[GRP_N];

static int grp_doc(int i)
{
    return (i * 7) % 23;
}

static bool grp_label_null(int i)
{
    return i % 5 == 0;
}

static int grp_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    if (grp_d[x] != grp_d[y])
        return grp_d[x] < grp_d[y] ? -1 : 1;
    return x - y;
}

/* the expected ids: rows by distance (ties by id), grouped by key(i), first `size` per group */
static size_t
grp_expect(int (*key)(int), bool (*keep)(int), size_t offset, size_t limit, size_t size, int *out)
{
    int order[GRP_N];
    for (int i = 0; i < GRP_N; i++)
        order[i] = i;
    qsort(order, GRP_N, sizeof order[0], grp_cmp);
    int gkey[GRP_N];
    size_t ng = 0, gcount[GRP_N] = { 0 }, n = 0;
    int ghits[GRP_N][8];
    for (int k = 0; k < GRP_N; k++) {
        int i = order[k];
        if (keep && !keep(i))
            continue;
        size_t g = 0;
        while (g < ng && gkey[g] != key(i))
            g++;
        if (g == ng) {
            if (ng == offset + limit)
                continue;
            gkey[ng++] = key(i);
        }
        if (gcount[g] < size)
            ghits[g][gcount[g]++] = i;
    }
    for (size_t g = offset; g < ng; g++)
        for (size_t h = 0; h < gcount[g]; h++)
            out[n++] = ghits[g][h];
    return n;
}

static int grp_label_key(int i)
{
    return grp_label_null(i) ? -1 : i % 3; /* labels "l0".."l2", NULL */
}

static bool grp_odd(int i)
{
    return i % 2 == 1;
}

static void grp_check(
    const char *extra, int (*key)(int), bool (*keep)(int), size_t offset, size_t limit, size_t size)
{
    char body[600];
    snprintf(body, sizeof body,
             "{`collectionName`:`grp`,`data`:[[0.3,0.7,0.2,0.9]],`limit`:%zu,`offset`:%zu,%s}",
             limit, offset, extra);
    json_t *r = ok(call("/v2/vectordb/entities/search", body));
    ASSERT(r);
    int want[GRP_N];
    size_t n = grp_expect(key, keep, offset, limit, size, want);
    json_t *d = data_of(r);
    if (json_array_size(d) != n)
        FAILF("<%s>: %zu hits, want %zu", extra, json_array_size(d), n);
    for (size_t i = 0; i < n; i++) {
        json_t *h = json_array_get(d, i);
        int64_t id = jint(h, "id");
        if (id != want[i])
            FAILF("<%s>: hit %zu is %lld, want %d", extra, i, (long long)id, want[i]);
        if (key == grp_doc)
            ASSERT_EQ(jint(h, "doc"), grp_doc((int)id)); /* the group value comes back */
        else if (grp_label_null((int)id))
            ASSERT(json_is_null(json_object_get(h, "label")));
    }
    json_decref(r);
}

static void test_group_by(void)
{
    json_t *r = ok(call("/v2/vectordb/collections/create",
                        "{`collectionName`:`grp`,`schema`:{`fields`:["
                        "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                        "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:4}},"
                        "{`fieldName`:`doc`,`dataType`:`Int32`},"
                        "{`fieldName`:`label`,`dataType`:`VarChar`,`nullable`:true,"
                        "`elementTypeParams`:{`max_length`:8}},"
                        "{`fieldName`:`meta`,`dataType`:`JSON`}]},"
                        "`indexParams`:[{`fieldName`:`v`,`metricType`:`L2`,`indexType`:`FLAT`}]}"));
    ASSERT(r);
    json_decref(r);
    static char body[200000];
    snprintf(body, sizeof body, "{`collectionName`:`grp`,`data`:[");
    const float q[4] = { 0.3f, 0.7f, 0.2f, 0.9f };
    for (int i = 0; i < GRP_N; i++) {
        float v[4] = { (float)((i * 37) % 101) / 100.0f, (float)((i * 53) % 97) / 100.0f,
                       (float)((i * 11) % 89) / 100.0f, (float)((i * 29) % 83) / 100.0f };
        double d = 0;
        for (int k = 0; k < 4; k++)
            d += ((double)v[k] - (double)q[k]) * ((double)v[k] - (double)q[k]);
        grp_d[i] = d;
        char label[32];
        if (grp_label_null(i))
            snprintf(label, sizeof label, "null");
        else
            snprintf(label, sizeof label, "`l%d`", i % 3);
        snprintf(body + strlen(body), sizeof body - strlen(body),
                 "%s{`id`:%d,`v`:[%.2f,%.2f,%.2f,%.2f],`doc`:%d,`label`:%s,`meta`:{}}",
                 i ? "," : "", i, (double)v[0], (double)v[1], (double)v[2], (double)v[3],
                 grp_doc(i), label);
    }
    strcat(body, "]}");
    r = ok(call("/v2/vectordb/entities/insert", body));
    ASSERT(r);
    json_decref(r);
    for (int pass = 0; pass < 2; pass++) {
        grp_check("`groupingField`:`doc`", grp_doc, NULL, 0, 5, 1);
        grp_check("`groupingField`:`doc`,`groupSize`:3", grp_doc, NULL, 0, 5, 3);
        grp_check("`groupingField`:`doc`,`groupSize`:2,`strictGroupSize`:true", grp_doc, NULL, 2, 4,
                  2);
        grp_check("`groupingField`:`doc`,`groupSize`:4,`filter`:`id % 2 == 1`", grp_doc, grp_odd, 0,
                  30, 4); /* more groups than exist: every group */
        grp_check("`groupingField`:`label`,`groupSize`:2,`outputFields`:[`label`]", grp_label_key,
                  NULL, 0, 10, 2); /* NULL is one group */
        if (pass == 0) {           /* then sealed under the FLAT index */
            sx_collection *h = NULL;
            sx__coll_meta meta;
            ASSERT_OK(sx__cat_coll_get(g_cat, "default", "grp", &h, &meta));
            ASSERT_OK(sx_flush(h));
            ASSERT_OK(sx_index_wait(h, 60000));
            sx_collection_release(h);
        }
    }

    /* hybrid_search grouped: two identical sub-searches fuse (RRF) into the distance order, so
     * the groups are those of the plain grouped search */
    static const struct {
        const char *extra;
        size_t offset, limit, size;
    } hy[] = { { "`groupingField`:`doc`", 0, 5, 1 },
               { "`groupingField`:`doc`,`groupSize`:2", 1, 4, 2 } };

    for (size_t k = 0; k < 2; k++) {
        char hb[800];
        snprintf(
            hb, sizeof hb,
            "{`collectionName`:`grp`,`search`:["
            "{`data`:[[0.3,0.7,0.2,0.9]],`limit`:100},{`data`:[[0.3,0.7,0.2,0.9]],`limit`:100}],"
            "`rerank`:{`strategy`:`rrf`},`limit`:%zu,`offset`:%zu,%s}",
            hy[k].limit, hy[k].offset, hy[k].extra);
        r = ok(call("/v2/vectordb/entities/hybrid_search", hb));
        ASSERT(r);
        int want[GRP_N];
        size_t n = grp_expect(grp_doc, NULL, hy[k].offset, hy[k].limit, hy[k].size, want);
        json_t *d = data_of(r);
        if (json_array_size(d) != n)
            FAILF("hybrid <%s>: %zu hits, want %zu", hy[k].extra, json_array_size(d), n);
        for (size_t i = 0; i < n; i++) {
            json_t *h = json_array_get(d, i);
            if (jint(h, "id") != want[i])
                FAILF("hybrid <%s>: hit %zu is %lld, want %d", hy[k].extra, i,
                      (long long)jint(h, "id"), want[i]);
            ASSERT_EQ(jint(h, "doc"), grp_doc(want[i]));
        }
        json_decref(r);
    }
    EXPECT_CODE(call("/v2/vectordb/entities/search",
                     "{`collectionName`:`grp`,`data`:[[0,0,0,0]],`groupingField`:`nope`}"),
                SX__MC_INVALID_PARAM);
    EXPECT_CODE(call("/v2/vectordb/entities/search",
                     "{`collectionName`:`grp`,`data`:[[0,0,0,0]],`groupingField`:`meta`}"),
                SX__MC_INVALID_PARAM);
    EXPECT_CODE(call("/v2/vectordb/entities/search",
                     "{`collectionName`:`grp`,`data`:[[0,0,0,0]],`groupingField`:`doc`,"
                     "`groupSize`:0}"),
                SX__MC_INVALID_PARAM);
    EXPECT_CODE(call("/v2/vectordb/entities/search",
                     "{`collectionName`:`grp`,`data`:[[0,0,0,0]],`groupingField`:`doc`,"
                     "`searchParams`:{`radius`:5}}"),
                SX__MC_INVALID_PARAM);
    ASSERT_OK(sx__cat_coll_drop(g_cat, "default", "grp"));
}

/* searchParams.ignoreGrowing: only sealed rows are searched (hybrid_search's sub-requests too);
 * false or absent: every row. Also merged requests never mix the two (the merger is skipped). */
static void test_ignore_growing(void)
{
    json_t *r =
        ok(call("/v2/vectordb/collections/create",
                "{`collectionName`:`ig`,`schema`:{`fields`:["
                "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}}]},"
                "`indexParams`:[{`fieldName`:`v`,`metricType`:`L2`,`indexType`:`FLAT`}]}"));
    ASSERT(r);
    json_decref(r);
    for (int batch = 0; batch < 2; batch++) {
        char body[2048] = "{`collectionName`:`ig`,`data`:[";
        for (int i = 0; i < 10; i++)
            snprintf(body + strlen(body), sizeof body - strlen(body), "%s{`id`:%d,`v`:[%d,1]}",
                     i ? "," : "", batch * 10 + i, batch * 10 + i);
        strcat(body, "]}");
        r = ok(call("/v2/vectordb/entities/insert", body));
        ASSERT(r);
        json_decref(r);
        if (batch == 0) { /* ids 0..9 sealed, 10..19 growing */
            sx_collection *h = NULL;
            sx__coll_meta meta;
            ASSERT_OK(sx__cat_coll_get(g_cat, "default", "ig", &h, &meta));
            ASSERT_OK(sx_flush(h));
            sx_collection_release(h);
        }
    }

    static const struct {
        const char *path, *body;
        size_t n;
    } cs[] = {
        { "/v2/vectordb/entities/search",
          "{`collectionName`:`ig`,`data`:[[15,1]],`limit`:50,`searchParams`:{`ignoreGrowing`:true}"
          "}",
          10 },
        { "/v2/vectordb/entities/search",
          "{`collectionName`:`ig`,`data`:[[15,1]],`limit`:50,"
          "`searchParams`:{`params`:{`ignore_growing`:false}}}",
          20 },
        { "/v2/vectordb/entities/search", "{`collectionName`:`ig`,`data`:[[15,1]],`limit`:50}",
          20 },
        { "/v2/vectordb/entities/hybrid_search",
          "{`collectionName`:`ig`,`search`:[{`data`:[[15,1]],`limit`:50,"
          "`params`:{`ignoreGrowing`:true}}],`rerank`:{`strategy`:`rrf`},`limit`:50}",
          10 },
    };

    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        r = ok(call(cs[k].path, cs[k].body));
        ASSERT(r);
        json_t *d = data_of(r);
        if (json_array_size(d) != cs[k].n)
            FAILF("case %zu: %zu hits, want %zu", k, json_array_size(d), cs[k].n);
        for (size_t i = 0; cs[k].n == 10 && i < json_array_size(d); i++)
            ASSERT(jint(json_array_get(d, i), "id") < 10);
        json_decref(r);
    }
    EXPECT_CODE(
        call("/v2/vectordb/entities/search",
             "{`collectionName`:`ig`,`data`:[[15,1]],`searchParams`:{`ignoreGrowing`:`maybe`}}"),
        SX__MC_INVALID_PARAM);
    /* search by primary keys: each row's own vector is its query (a sealed and a growing row) */
    r = ok(call("/v2/vectordb/entities/search", "{`collectionName`:`ig`,`ids`:[5,12],`limit`:2}"));
    ASSERT(r);
    json_t *d = data_of(r);
    ASSERT_EQ(json_array_size(d), 4);
    ASSERT_EQ(jint(json_array_get(d, 0), "id"), 5);
    ASSERT(json_real_value(json_object_get(json_array_get(d, 0), "distance")) == 0.0);
    ASSERT_EQ(jint(json_array_get(d, 2), "id"), 12);
    json_decref(r);
    EXPECT_CODE(call("/v2/vectordb/entities/search", "{`collectionName`:`ig`,`ids`:[5,99]}"),
                SX__MC_INVALID_PARAM); /* no such row */
    EXPECT_CODE(
        call("/v2/vectordb/entities/search", "{`collectionName`:`ig`,`ids`:[5],`data`:[[1,1]]}"),
        SX__MC_INVALID_PARAM);
    EXPECT_CODE(call("/v2/vectordb/entities/search", "{`collectionName`:`ig`,`ids`:[]}"),
                SX__MC_INVALID_PARAM);
    ASSERT_OK(sx__cat_coll_drop(g_cat, "default", "ig"));
}

/* Aliases, as a blue/green switch: search, insert and describe through an alias reach its
 * collection; alter moves it at once; the name rules (an alias is not a collection name, not
 * twice, not of an alias) and the drop rules (not through an alias, not while aliased). */
static void al_ids(const char *body, const char *want)
{
    json_t *r = ok(call("/v2/vectordb/entities/query", body));
    ASSERT(r);
    char got[128] = "";
    for (size_t i = 0; i < json_array_size(data_of(r)); i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                 (long long)jint(json_array_get(data_of(r), i), "id"));
    if (strcmp(got, want) != 0)
        FAILF("<%s>: ids %s, want %s", body, got, want);
    json_decref(r);
}

static void test_aliases(void)
{
    const char *mk[] = { "blue", "green" };
    for (int k = 0; k < 2; k++) {
        char body[600];
        snprintf(body, sizeof body,
                 "{`collectionName`:`%s`,`schema`:{`fields`:["
                 "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                 "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}}]},"
                 "`indexParams`:[{`fieldName`:`v`,`metricType`:`L2`,`indexType`:`FLAT`}]}",
                 mk[k]);
        json_t *r = ok(call("/v2/vectordb/collections/create", body));
        ASSERT(r);
        json_decref(r);
        snprintf(body, sizeof body,
                 "{`collectionName`:`%s`,`data`:[{`id`:%d,`v`:[1,1]},{`id`:%d,`v`:[2,2]}]}", mk[k],
                 k * 10 + 1, k * 10 + 2);
        r = ok(call("/v2/vectordb/entities/insert", body));
        ASSERT(r);
        json_decref(r);
    }
    json_t *r =
        ok(call("/v2/vectordb/aliases/create", "{`collectionName`:`blue`,`aliasName`:`prod`}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/aliases/describe", "{`aliasName`:`prod`}"));
    ASSERT(r);
    ASSERT(strcmp(jstr(json_object_get(r, "data"), "collectionName"), "blue") == 0);
    json_decref(r);
    al_ids("{`collectionName`:`prod`,`filter`:`id > 0`}", "1,2");
    r = ok(call("/v2/vectordb/entities/insert",
                "{`collectionName`:`prod`,`data`:[{`id`:3,`v`:[3,3]}]}"));
    ASSERT(r);
    json_decref(r);
    al_ids("{`collectionName`:`blue`,`filter`:`id > 0`}", "1,2,3");
    r = ok(call("/v2/vectordb/collections/describe", "{`collectionName`:`blue`}"));
    ASSERT(r);
    json_t *al = json_object_get(json_object_get(r, "data"), "aliases");
    ASSERT(json_array_size(al) == 1 &&
           strcmp(json_string_value(json_array_get(al, 0)), "prod") == 0);
    json_decref(r);
    /* the rules */
    EXPECT_CODE(
        call("/v2/vectordb/aliases/create", "{`collectionName`:`green`,`aliasName`:`prod`}"),
        SX__MC_INVALID_PARAM); /* taken */
    EXPECT_CODE(
        call("/v2/vectordb/aliases/create", "{`collectionName`:`blue`,`aliasName`:`green`}"),
        SX__MC_INVALID_PARAM); /* a collection's name */
    EXPECT_CODE(call("/v2/vectordb/aliases/create", "{`collectionName`:`prod`,`aliasName`:`p2`}"),
                SX__MC_COLL_NOT_FOUND); /* an alias of an alias */
    EXPECT_CODE(call("/v2/vectordb/aliases/create", "{`collectionName`:`nope`,`aliasName`:`p2`}"),
                SX__MC_COLL_NOT_FOUND);
    EXPECT_CODE(call("/v2/vectordb/aliases/create", "{`collectionName`:`blue`,`aliasName`:`9x`}"),
                SX__MC_INVALID_PARAM);
    EXPECT_CODE(call("/v2/vectordb/collections/create", "{`collectionName`:`prod`,`dimension`:2}"),
                SX__MC_INVALID_PARAM); /* the name is an alias */
    EXPECT_CODE(call("/v2/vectordb/collections/drop", "{`collectionName`:`blue`}"),
                SX__MC_INVALID_PARAM); /* still aliased */
    EXPECT_CODE(call("/v2/vectordb/collections/drop", "{`collectionName`:`prod`}"),
                SX__MC_INVALID_PARAM); /* through an alias */
    /* the switch */
    r = ok(call("/v2/vectordb/aliases/alter", "{`collectionName`:`green`,`aliasName`:`prod`}"));
    ASSERT(r);
    json_decref(r);
    al_ids("{`collectionName`:`prod`,`filter`:`id > 0`}", "11,12");
    r = ok(call("/v2/vectordb/aliases/list", "{`collectionName`:`blue`}"));
    ASSERT(r);
    ASSERT_EQ(json_array_size(json_object_get(r, "data")), 0);
    json_decref(r);
    r = ok(call("/v2/vectordb/aliases/create", "{`collectionName`:`blue`,`aliasName`:`old`}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/aliases/list", "{}"));
    ASSERT(r);
    json_t *all = json_object_get(r, "data");
    ASSERT(json_array_size(all) == 2 &&
           strcmp(json_string_value(json_array_get(all, 0)), "old") == 0 &&
           strcmp(json_string_value(json_array_get(all, 1)), "prod") == 0);
    json_decref(r);
    EXPECT_CODE(call("/v2/vectordb/aliases/alter", "{`collectionName`:`blue`,`aliasName`:`none`}"),
                SX__MC_COLL_NOT_FOUND); /* alter needs an existing alias */
    /* drop: twice is fine; then the collections go */
    for (int k = 0; k < 2; k++) {
        r = ok(call("/v2/vectordb/aliases/drop", "{`aliasName`:`prod`}"));
        ASSERT(r);
        json_decref(r);
    }
    EXPECT_CODE(call("/v2/vectordb/aliases/describe", "{`aliasName`:`prod`}"),
                SX__MC_COLL_NOT_FOUND);
    EXPECT_CODE(call("/v2/vectordb/entities/query", "{`collectionName`:`prod`,`filter`:`id > 0`}"),
                SX__MC_COLL_NOT_FOUND);
    r = ok(call("/v2/vectordb/aliases/drop", "{`aliasName`:`old`}"));
    ASSERT(r);
    json_decref(r);
    for (int k = 0; k < 2; k++) {
        char body[100];
        snprintf(body, sizeof body, "{`collectionName`:`%s`}", mk[k]);
        r = ok(call("/v2/vectordb/collections/drop", body));
        ASSERT(r);
        json_decref(r);
    }
}

/* ------------------------------------------------------------------ search params */

/* A bad searchParams value gets the same code and message whether the rows are growing (no
 * index built yet) or sealed and indexed, on search and on hybrid_search (Milvus answers 1100,
 * invalid parameter, whatever the data). */
static void test_search_params_whatever_the_data(void)
{
    sx__coll_meta *m = new_meta("sp", SX_METRIC_L2, false);
    add_field(m, "id", "Int64", SX_FIELD_INT64, true, false, 0, 0);
    add_field(m, "v", "FloatVector", SX_FIELD_FLOAT_VECTOR, false, false, 2, 0);
    ASSERT(create(m));
    json_t *r = ok(call("/v2/vectordb/indexes/create",
                        "{`collectionName`:`sp`,`indexParams`:[{`fieldName`:`v`,`indexName`:`v`,"
                        "`metricType`:`L2`,`params`:{`index_type`:`HNSW`,`M`:8}}]}"));
    ASSERT(r);
    json_decref(r);
    r = ok(call("/v2/vectordb/entities/insert",
                "{`collectionName`:`sp`,`data`:[{`id`:1,`v`:[1,2]},{`id`:2,`v`:[3,4]},"
                "{`id`:3,`v`:[5,6]}]}"));
    ASSERT(r);
    json_decref(r);
    static const char *bad[] = {
        "{`collectionName`:`sp`,`data`:[[1,2]],`limit`:2,"
        "`searchParams`:{`params`:{`ef`:`abc`}}}",
        "{`collectionName`:`sp`,`data`:[[1,2]],`limit`:2,`searchParams`:{`ef`:1}}",
        "{`collectionName`:`sp`,`search`:[{`data`:[[1,2]],`annsField`:`v`,`limit`:2,"
        "`params`:{`ef`:`abc`}},{`data`:[[1,2]],`annsField`:`v`,`limit`:2}],"
        "`rerank`:{`strategy`:`rrf`,`params`:{`k`:60}},`limit`:2}",
    };
    static const char *path[] = { "/v2/vectordb/entities/search", "/v2/vectordb/entities/search",
                                  "/v2/vectordb/entities/hybrid_search" };
    char growing[3][512];
    for (size_t i = 0; i < 3; i++) {
        r = call(path[i], bad[i]);
        if (code_of(r) != SX__MC_INVALID_PARAM) {
            char *d = r ? json_dumps(r, JSON_COMPACT) : NULL;
            FAILF("growing rows, request %zu: want code %d, got %s", i, SX__MC_INVALID_PARAM,
                  d ? d : "(null)");
        }
        snprintf(growing[i], sizeof growing[i], "%s", msg_of(r));
        json_decref(r);
    }
    ASSERT(strstr(growing[0], "ef") != NULL);
    ASSERT(strstr(growing[1], "ef(1) should be larger than or equal to k(2)") != NULL);
    /* a good value passes while growing */
    r = ok(call("/v2/vectordb/entities/search",
                "{`collectionName`:`sp`,`data`:[[1,2]],`limit`:2,`searchParams`:{`ef`:16}}"));
    ASSERT(r);
    json_decref(r);

    sx_collection *h = NULL;
    sx__coll_meta meta;
    ASSERT_OK(sx__cat_coll_get(g_cat, "default", "sp", &h, &meta));
    ASSERT_OK(sx_flush(h));
    ASSERT_OK(sx_index_wait(h, 60000));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(h, &ii));
    sx_collection_release(h);
    ASSERT_EQ(ii.indexed_rows, 3);
    for (size_t i = 0; i < 3; i++) {
        r = call(path[i], bad[i]);
        ASSERT_EQ(code_of(r), SX__MC_INVALID_PARAM);
        if (strcmp(msg_of(r), growing[i]) != 0)
            FAILF("request %zu: sealed \"%s\", growing \"%s\"", i, msg_of(r), growing[i]);
        json_decref(r);
    }
    ASSERT_OK(sx__cat_coll_drop(g_cat, "default", "sp")); /* run again through the merger */
}

static void test_teardown(void)
{
    ASSERT_OK(sx__cat_close(g_cat));
    g_cat = NULL;
}

int main(void)
{
    RUN(test_setup);
    if (h_fail)
        return TEST_DONE();
    RUN(test_insert_get_query);
    RUN(test_insert_errors);
    RUN(test_dynamic);
    RUN(test_arrays);
    RUN(test_defaults);
    RUN(test_nullable);
    RUN(test_missing_field_filter);
    RUN(test_auto_id_upsert_delete);
    RUN(test_not_loaded);
    RUN(test_search_example);
    RUN(test_fill_gt);
    RUN(test_search_ground_truth);
    RUN(test_range_search);
    RUN(test_range_search_hnsw_ef);
    RUN(test_group_by);
    RUN(test_ignore_growing);
    RUN(test_aliases);
    RUN(test_hybrid);
    RUN(test_partitions);
    RUN(test_search_params_whatever_the_data);
    /* the same searches through the merger */
    sx_server_options mo = { .merge_wait_us = 1000 };
    if (sx__merger_new(&mo, &g_merger) == SX_OK) {
        RUN(test_search_example);
        RUN(test_search_ground_truth);
        RUN(test_search_params_whatever_the_data);
        sx__merger_free(g_merger);
        g_merger = NULL;
    }
    RUN(test_teardown);
    return TEST_DONE();
}
