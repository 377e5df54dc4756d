/*
 * test_server_pkey.c: Milvus's partition key mode through an in-process server over loopback
 * REST (th_server_start / th_post).
 *
 *   hashes     the routing hashes against known answers: MurmurHash3 x86_32 of 8 bytes (values
 *              from an implementation checked against the algorithm's published vectors) and
 *              CRC-32 against zlib's crc32, which shares no code with ours.
 *   varchar    a VarChar partition key, partitionsNum 8: the partitions listed and described,
 *              400 rows routed (each partition's row count against the oracle: zlib's CRC-32 of
 *              the key modulo 8), a filtered search on one key against a brute force over that
 *              key's rows, the refused operations (partition names on insert / search / query /
 *              delete / import, partition create / drop / load / release) writing nothing, an
 *              upsert that moves rows to another key's partition, a delete by key, a bulk import
 *              (JSON rows) routed like inserts, and everything again after a restart.
 *   int64      an Int64 key with the default partition count (64), rows routed by MurmurHash3.
 *   legacy     a metadata file from before routing (is_partition_key but no key_partitions)
 *              opens as before: one "_default" partition that holds the rows.
 *   schema     the create errors (two keys, the primary key as key, an Int32 or nullable key,
 *              partitionsNum without a key, out of range).
 */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "harness.h"
#include "http.h"
#include "server/server.h"
#include "util/hash.h"

#define N_ROWS    400
#define N_TENANTS 23
#define DIM       4
#define PARTS     8

static const char *g_dir;
static sx_server *g_srv;
static float g_vec[N_ROWS][DIM];
static char g_tenant[N_ROWS][32]; /* the current key of row i (upserts change it) */
static bool g_live[N_ROWS];

static uint64_t part_rows(const char *coll, const char *part)
{
    char b[256];
    snprintf(b, sizeof b, "{`collectionName`:`%s`,`partitionName`:`%s`}", coll, part);
    json_t *d = th_post_ok("/v2/vectordb/partitions/get_stats", b);
    return (uint64_t)json_integer_value(json_object_get(d, "rowCount"));
}

static uint32_t oracle_part(const char *tenant, uint32_t n)
{
    return (uint32_t)(crc32(0L, (const Bytef *)tenant, (uInt)strlen(tenant)) % n);
}

/* Every partition of "pk" holds the live rows whose key hashes to it. */
static void check_counts(void)
{
    uint64_t want[PARTS] = { 0 }, total = 0;
    for (size_t i = 0; i < N_ROWS; i++)
        if (g_live[i]) {
            want[oracle_part(g_tenant[i], PARTS)]++;
            total++;
        }
    uint64_t got_total = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "_default_%u", p);
        uint64_t got = part_rows("pk", name);
        if (got != want[p])
            FAILF("partition %s holds %llu rows, want %llu", name, (unsigned long long)got,
                  (unsigned long long)want[p]);
        got_total += got;
    }
    ASSERT_EQ(got_total, total);
}

static void hashes(void)
{
    /* MurmurHash3 x86_32 (seed 0) of the 8 little-endian bytes, masked to 31 bits */
    static const struct {
        int64_t v;
        uint32_t h;
    } kat[] = { { 0, 0x63852afcu },        { 1, 0x53075d44u },         { -1, 0x627564e8u },
                { 42, 0x6f8f913eu },       { 123456789, 0x2920fe31u }, { INT64_MIN, 0x516faf25u },
                { INT64_MAX, 0x027144bfu } };

    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++)
        ASSERT_EQ(sx__key_bucket(kat[i].v, NULL, 0x80000000u), kat[i].h);
    /* CRC-32 of the first 100 bytes, against zlib */
    char s[160];
    uint64_t seed = 7;
    for (size_t len = 0; len < sizeof s; len++) {
        for (size_t k = 0; k < len; k++)
            s[k] = (char)(1 + test_rand(&seed) % 255);
        s[len] = 0;
        size_t hl = len > 100 ? 100 : len;
        uint32_t z = (uint32_t)crc32(0L, (const Bytef *)s, (uInt)hl);
        ASSERT_EQ(sx__key_bucket(0, s, 1000003u), z % 1000003u);
        ASSERT_EQ(sx__key_bucket(0, s, 7u), z % 7u);
    }
}

static void start(void)
{
    g_srv = th_server_start(g_dir, NULL);
    ASSERT(g_srv != NULL);
}

static void stop(void)
{
    ASSERT_OK(sx_server_stop(g_srv));
    g_srv = NULL;
}

static void insert_rows(size_t from, size_t to, const char *verb)
{
    static char body[1 << 16];
    size_t n = (size_t)snprintf(body, sizeof body, "{`collectionName`:`pk`,`data`:[");
    for (size_t i = from; i < to; i++)
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s{`id`:%zu,`v`:[%g,%g,%g,%g],`tenant`:`%s`,`extra`:%zu}",
                              i > from ? "," : "", i, (double)g_vec[i][0], (double)g_vec[i][1],
                              (double)g_vec[i][2], (double)g_vec[i][3], g_tenant[i], i);
    snprintf(body + n, sizeof body - n, "]}");
    char path[64];
    snprintf(path, sizeof path, "/v2/vectordb/entities/%s", verb);
    (void)th_post_ok(path, body);
    for (size_t i = from; i < to; i++)
        g_live[i] = true;
}

/* A filtered search on tenant t: exact (FLAT), so the distances must equal a brute force over
 * that tenant's live rows, and every hit must be one of them. */
static void check_search(const char *t)
{
    const float q[DIM] = { 3, -2, 5, 1 };
    double want[N_ROWS];
    size_t nw = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        if (!g_live[i] || strcmp(g_tenant[i], t) != 0)
            continue;
        double d = 0;
        for (size_t k = 0; k < DIM; k++) {
            double x = (double)q[k] - (double)g_vec[i][k];
            d += x * x;
        }
        size_t at = nw++;
        while (at > 0 && want[at - 1] > d) {
            want[at] = want[at - 1];
            at--;
        }
        want[at] = d;
    }
    ASSERT(nw > 0);
    char b[512];
    snprintf(b, sizeof b,
             "{`collectionName`:`pk`,`data`:[[3,-2,5,1]],`limit`:10,`filter`:`tenant == \\`%s\\``,"
             "`outputFields`:[`tenant`]}",
             t);
    json_t *hits = th_post_ok("/v2/vectordb/entities/search", b);
    size_t want_n = nw < 10 ? nw : 10;
    ASSERT_EQ(json_array_size(hits), want_n);
    for (size_t i = 0; i < want_n; i++) {
        json_t *h = json_array_get(hits, i);
        int64_t id = json_integer_value(json_object_get(h, "id"));
        ASSERT(id >= 0 && id < N_ROWS && g_live[id]);
        ASSERT(strcmp(g_tenant[id], t) == 0);
        ASSERT(strcmp(json_string_value(json_object_get(h, "tenant")), t) == 0);
        ASSERT_NEAR(json_number_value(json_object_get(h, "distance")), want[i], 1e-3);
    }
}

static void varchar_key(void)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < N_ROWS; i++) {
        for (size_t k = 0; k < DIM; k++)
            g_vec[i][k] = (float)((int)(test_rand(&s) % 101) - 50);
        snprintf(g_tenant[i], sizeof g_tenant[i], "t%zu", i % N_TENANTS);
    }
    start();
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`pk`,`schema`:{`enableDynamicField`:true,`fields`:["
                     "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                     "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:4}},"
                     "{`fieldName`:`tenant`,`dataType`:`VarChar`,`isPartitionKey`:true,"
                     "`elementTypeParams`:{`max_length`:32}}]},`params`:{`partitionsNum`:8},"
                     "`indexParams`:[{`fieldName`:`v`,`metricType`:`L2`,"
                     "`params`:{`index_type`:`FLAT`}}]}");
    json_t *d = th_post_ok("/v2/vectordb/partitions/list", "{`collectionName`:`pk`}");
    ASSERT_EQ(json_array_size(d), PARTS);
    for (size_t p = 0; p < PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "_default_%zu", p);
        ASSERT(strcmp(json_string_value(json_array_get(d, p)), name) == 0);
    }
    d = th_post_ok("/v2/vectordb/partitions/has",
                   "{`collectionName`:`pk`,`partitionName`:`_default_7`}");
    ASSERT(json_is_true(json_object_get(d, "has")));
    d = th_post_ok("/v2/vectordb/partitions/has",
                   "{`collectionName`:`pk`,`partitionName`:`_default_8`}");
    ASSERT(json_is_false(json_object_get(d, "has")));
    d = th_post_ok("/v2/vectordb/partitions/has",
                   "{`collectionName`:`pk`,`partitionName`:`_default`}");
    ASSERT(json_is_false(json_object_get(d, "has")));
    d = th_post_ok("/v2/vectordb/collections/describe", "{`collectionName`:`pk`}");
    ASSERT_EQ(json_integer_value(json_object_get(d, "partitionsNum")), PARTS);
    ASSERT(json_is_true(
        json_object_get(json_array_get(json_object_get(d, "fields"), 2), "partitionKey")));

    insert_rows(0, N_ROWS / 2, "insert");
    insert_rows(N_ROWS / 2, N_ROWS, "insert");
    check_counts();
    check_search("t3");
    check_search("t17");

    /* refused, nothing written */
    const char *no_names = "not support manually specifying the partition names if partition key "
                           "mode is used";
    th_expect("/v2/vectordb/entities/insert",
              "{`collectionName`:`pk`,`partitionName`:`_default_1`,`data`:[{`id`:9999,"
              "`v`:[1,2,3,4],`tenant`:`t1`}]}",
              1100, no_names);
    th_expect("/v2/vectordb/entities/upsert",
              "{`collectionName`:`pk`,`partitionName`:`_default`,`data`:[{`id`:1,"
              "`v`:[1,2,3,4],`tenant`:`t1`}]}",
              1100, no_names);
    th_expect("/v2/vectordb/entities/search",
              "{`collectionName`:`pk`,`data`:[[1,2,3,4]],`partitionNames`:[`_default_0`]}", 1100,
              no_names);
    th_expect("/v2/vectordb/entities/query",
              "{`collectionName`:`pk`,`filter`:`id >= 0`,`partitionNames`:[`_default_0`]}", 1100,
              no_names);
    th_expect("/v2/vectordb/entities/delete",
              "{`collectionName`:`pk`,`filter`:`id >= 0`,`partitionName`:`_default_0`}", 1100,
              no_names);
    th_expect("/v2/vectordb/jobs/import/create",
              "{`collectionName`:`pk`,`partitionName`:`_default_0`,`files`:[[`x.json`]]}", 1100,
              no_names);
    th_expect("/v2/vectordb/partitions/create", "{`collectionName`:`pk`,`partitionName`:`p1`}",
              1100, "disable create partition if partition key mode is used");
    th_expect("/v2/vectordb/partitions/drop",
              "{`collectionName`:`pk`,`partitionName`:`_default_1`}", 1100,
              "disable drop partition if partition key mode is used");
    th_expect("/v2/vectordb/partitions/load",
              "{`collectionName`:`pk`,`partitionNames`:[`_default_1`]}", 1100,
              "disable load partitions if partition key mode is used");
    th_expect("/v2/vectordb/partitions/release",
              "{`collectionName`:`pk`,`partitionNames`:[`_default_1`]}", 1100,
              "disable release partitions if partition key mode is used");
    check_counts();

    /* upsert moves rows 0..29 to another key (and so, mostly, another partition) */
    for (size_t i = 0; i < 30; i++)
        snprintf(g_tenant[i], sizeof g_tenant[i], "moved%zu", i % 3);
    insert_rows(0, 30, "upsert");
    check_counts();
    check_search("moved1");
    /* delete by key */
    (void)th_post_ok("/v2/vectordb/entities/delete", "{`collectionName`:`pk`,`filter`:`tenant == "
                                                     "\\`t4\\``}");
    for (size_t i = 0; i < N_ROWS; i++)
        if (strcmp(g_tenant[i], "t4") == 0)
            g_live[i] = false;
    check_counts();
}

/* A JSON rows file imported through jobs/import: routed like inserts. Rows 300..399 are deleted
 * first and come back with new keys. */
static void import_routed(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s.rows.json", g_dir);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fprintf(f, "{\"rows\":[");
    (void)th_post_ok("/v2/vectordb/entities/delete",
                     "{`collectionName`:`pk`,`filter`:`id >= 300`}");
    for (size_t i = 300; i < N_ROWS; i++) {
        g_live[i] = false;
        snprintf(g_tenant[i], sizeof g_tenant[i], "imp%zu", i % 11);
        fprintf(f, "%s{\"id\":%zu,\"v\":[%g,%g,%g,%g],\"tenant\":\"%s\"}", i > 300 ? "," : "", i,
                (double)g_vec[i][0], (double)g_vec[i][1], (double)g_vec[i][2], (double)g_vec[i][3],
                g_tenant[i]);
    }
    fprintf(f, "]}");
    ASSERT_EQ(fclose(f), 0);
    check_counts();
    json_t *d = th_postf("/v2/vectordb/jobs/import/create",
                         "{`collectionName`:`pk`,`files`:[[`%s`]]}", path);
    ASSERT_EQ(th_code(), 0);
    char job[64];
    snprintf(job, sizeof job, "%s",
             json_string_value(json_object_get(json_object_get(d, "data"), "jobId")));
    for (int i = 0;; i++) {
        ASSERT(i < 600);
        d = json_object_get(
            th_postf("/v2/vectordb/jobs/import/get_progress", "{`jobId`:`%s`}", job), "data");
        const char *st = json_string_value(json_object_get(d, "state"));
        ASSERT(st != NULL);
        if (strcmp(st, "Failed") == 0)
            FAILF("import failed: %s", th_last.text);
        if (strcmp(st, "Completed") == 0)
            break;
        struct timespec ts = { 0, 20 * 1000000L };
        nanosleep(&ts, NULL);
    }
    for (size_t i = 300; i < N_ROWS; i++)
        g_live[i] = true;
    check_counts();
    check_search("imp5");
}

static void after_restart(void)
{
    (void)th_post_ok("/v2/vectordb/collections/flush", "{`collectionName`:`pk`}");
    stop();
    start();
    json_t *d = th_post_ok("/v2/vectordb/partitions/list", "{`collectionName`:`pk`}");
    ASSERT_EQ(json_array_size(d), PARTS);
    check_counts();
    check_search("t3");
    check_search("imp5");
    /* still refused after the reopen */
    th_expect("/v2/vectordb/partitions/create", "{`collectionName`:`pk`,`partitionName`:`p1`}",
              1100, "partition key mode");
}

static void int64_key(void)
{
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`pk64`,`schema`:{`fields`:["
                     "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                     "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}},"
                     "{`fieldName`:`org`,`dataType`:`Int64`,`isPartitionKey`:true}]},"
                     "`indexParams`:[{`fieldName`:`v`,`metricType`:`IP`,"
                     "`params`:{`index_type`:`FLAT`}}]}");
    json_t *d = th_post_ok("/v2/vectordb/collections/describe", "{`collectionName`:`pk64`}");
    ASSERT_EQ(json_integer_value(json_object_get(d, "partitionsNum")), SX__DEFAULT_KEY_PARTS);
    static char body[1 << 16];
    uint64_t want[SX__DEFAULT_KEY_PARTS] = { 0 };
    size_t n = (size_t)snprintf(body, sizeof body, "{`collectionName`:`pk64`,`data`:[");
    for (int64_t i = 0; i < 300; i++) {
        int64_t org = i * 7919 - 100000;
        want[sx__key_bucket(org, NULL, SX__DEFAULT_KEY_PARTS)]++;
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{`id`:%lld,`v`:[1,%lld],`org`:%lld}",
                              i ? "," : "", (long long)i, (long long)i, (long long)org);
    }
    snprintf(body + n, sizeof body - n, "]}");
    for (char *p = body; *p; p++)
        if (*p == '`')
            *p = '"';
    th_resp *r = th_post("/v2/vectordb/entities/insert", body, NULL);
    ASSERT(r && th_code() == 0);
    size_t used = 0;
    for (uint32_t p = 0; p < SX__DEFAULT_KEY_PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "_default_%u", p);
        ASSERT_EQ(part_rows("pk64", name), want[p]);
        used += want[p] > 0;
    }
    ASSERT(used > 32); /* 300 keys spread over most of the 64 partitions */
}

/* A partition key collection whose metadata predates routing keeps its "_default". */
static void legacy(void)
{
    (void)th_post_ok("/v2/vectordb/collections/create",
                     "{`collectionName`:`old`,`schema`:{`fields`:["
                     "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
                     "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}},"
                     "{`fieldName`:`k`,`dataType`:`Int64`,`isPartitionKey`:true}]},"
                     "`params`:{`partitionsNum`:4}}");
    stop();
    char path[4096];
    snprintf(path, sizeof path, "%s/rest/old.json", g_dir);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ASSERT(j != NULL);
    ASSERT_EQ(json_integer_value(json_object_get(j, "key_partitions")), 4);
    ASSERT_EQ(json_object_del(j, "key_partitions"), 0);
    ASSERT_EQ(json_dump_file(j, path, JSON_COMPACT), 0);
    json_decref(j);
    start();
    json_t *d = th_post_ok("/v2/vectordb/partitions/list", "{`collectionName`:`old`}");
    ASSERT_EQ(json_array_size(d), 1);
    ASSERT(strcmp(json_string_value(json_array_get(d, 0)), "_default") == 0);
    (void)th_post_ok("/v2/vectordb/entities/insert",
                     "{`collectionName`:`old`,`data`:[{`id`:1,`v`:[1,2],`k`:5},"
                     "{`id`:2,`v`:[1,2],`k`:6}]}");
    ASSERT_EQ(part_rows("old", "_default"), 2);
    d = th_post_ok("/v2/vectordb/collections/describe", "{`collectionName`:`old`}");
    ASSERT_EQ(json_integer_value(json_object_get(d, "partitionsNum")), 1);
}

static void schema_errors(void)
{
#define F_ID  "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true}"
#define F_VEC "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:2}}"
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`e1`,`schema`:{`fields`:[" F_ID "," F_VEC
              ",{`fieldName`:`a`,`dataType`:`Int64`,`isPartitionKey`:true},"
              "{`fieldName`:`b`,`dataType`:`Int64`,`isPartitionKey`:true}]}}",
              1100, "there are more than one partition key");
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`e2`,`schema`:{`fields`:["
              "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true,`isPartitionKey`:true}," F_VEC
              "]}}",
              1100, "the partition key field must not be primary field");
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`e3`,`schema`:{`fields`:[" F_ID "," F_VEC
              ",{`fieldName`:`a`,`dataType`:`Int32`,`isPartitionKey`:true}]}}",
              1100, "the data type of partition key should be Int64 or VarChar");
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`e4`,`schema`:{`fields`:[" F_ID "," F_VEC
              ",{`fieldName`:`a`,`dataType`:`Int64`,`isPartitionKey`:true,`nullable`:true}]}}",
              1100, "partition key field not support nullable");
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`e5`,`schema`:{`fields`:[" F_ID "," F_VEC "]},"
              "`params`:{`partitionsNum`:4}}",
              1100, "num_partitions should only be specified with partition key field enabled");
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`e6`,`schema`:{`fields`:[" F_ID "," F_VEC
              ",{`fieldName`:`a`,`dataType`:`Int64`,`isPartitionKey`:true}]},"
              "`params`:{`partitionsNum`:1025}}",
              1100, "partition number (1025) exceeds max configuration (1024)");
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`e7`,`schema`:{`fields`:[" F_ID "," F_VEC
              ",{`fieldName`:`a`,`dataType`:`Int64`,`isPartitionKey`:true}]},"
              "`params`:{`partitionsNum`:-3}}",
              1100, "the specified partitions should be greater than 0");
    json_t *d = th_post_ok("/v2/vectordb/collections/list", "{}");
    for (size_t i = 0; i < json_array_size(d); i++)
        ASSERT(json_string_value(json_array_get(d, i))[0] != 'e'); /* none was made */
    /* a different partition count is a different collection */
    th_expect("/v2/vectordb/collections/create",
              "{`collectionName`:`pk`,`schema`:{`enableDynamicField`:true,`fields`:["
              "{`fieldName`:`id`,`dataType`:`Int64`,`isPrimary`:true},"
              "{`fieldName`:`v`,`dataType`:`FloatVector`,`elementTypeParams`:{`dim`:4}},"
              "{`fieldName`:`tenant`,`dataType`:`VarChar`,`isPartitionKey`:true,"
              "`elementTypeParams`:{`max_length`:32}}]},`params`:{`partitionsNum`:9}}",
              65535, "create duplicate collection with different parameters");
#undef F_ID
#undef F_VEC
}

int main(void)
{
    g_dir = test_tmpdir("srv_pkey");
    RUN(hashes);
    RUN(varchar_key);
    RUN(import_routed);
    RUN(after_restart);
    RUN(int64_key);
    RUN(legacy);
    RUN(schema_errors);
    if (g_srv)
        stop();
    return TEST_DONE();
}
