/*
 * test_cluster_shards.c: a collection with shardsNum > 1 through the cluster proxy, on a real
 * cluster (`sextant cluster up`: 3 etcd members, 2 writers, 2 query nodes, the proxy; the lease
 * TTL 2 s). Skipped (77) without etcd.
 *
 *   create with shardsNum 3 (FLAT, L2): three shard collections "sh__s0..2" spread over both
 *   writers, one name in collections/list, describe says shardsNum 3;
 *   600 rows inserted through the proxy land on their key's shard (each shard's row count, read
 *   on the writer holding it, is near 200, and the sum is 600); insertIds in the request's order;
 *   searches (nq 4, limit 10, with and without offset, with a filter) equal brute force over the
 *   rows inserted, computed here; query count(*) sums the shards; a query window with limit and
 *   offset is the rows 120..129 by key; get finds keys on any shard; delete by filter reaches
 *   every shard (deleteCount 50); upsert replaces a row on its shard;
 *   an autoID collection with 2 shards: keys given by the proxy, unique over the shards; a row
 *   with a key refused (1804);
 *   an Eventually read right after a create (query nodes not refreshed yet) is answered (the
 *   proxy sends it to the writer instead of failing it with the query node's "not found");
 *   Eventually reads after a flush are answered by the query nodes (X-Sextant-Node names only
 *   q1/q2) and equal the Strong answers;
 *   kill -9 of query node q1: Eventually searches go on, whole, at q2; q1 is restarted;
 *   kill -9 of the proxy: restarted, it answers again;
 *   kill -9 of the writer holding shard 0: requests touching it fail naming the shard (no
 *   partial answer), upserts retried until the supervisor's restart is serving again, then every
 *   acknowledged row is there (count and a search of each retried row);
 *   a reserved name (x__s1) is refused; drop removes every shard, and the name can be created
 *   again with another shardsNum.
 */
#include <math.h>
#include <sextant.h>
#include <stdlib.h>

#include "cluster.h"
#include "etcd.h"
#include "harness.h"
#include "http.h"

#define DIM  8
#define ROWS 600

static unsigned base;
static float vecs[ROWS + 200][DIM];
static bool live[ROWS + 200];

static void vec_of(int id, float *v)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
    for (int d = 0; d < DIM; d++)
        v[d] = test_randf(&s) * 10.0f;
}

/* rows first..first+n-1 of collection sh as an insert (or upsert) body */
static char *rows_body(const char *coll, int first, int n)
{
    size_t cap = 256 + (size_t)n * (DIM * 16 + 32);
    char *b = malloc(cap);
    size_t k = (size_t)snprintf(b, cap, "{\"collectionName\":\"%s\",\"data\":[", coll);
    for (int i = 0; i < n; i++) {
        int id = first + i;
        vec_of(id, vecs[id]);
        k += (size_t)snprintf(b + k, cap - k, "%s{\"id\":%d,\"vector\":[", i ? "," : "", id);
        for (int d = 0; d < DIM; d++)
            k += (size_t)snprintf(b + k, cap - k, "%s%.6f", d ? "," : "", (double)vecs[id][d]);
        k += (size_t)snprintf(b + k, cap - k, "]}");
    }
    snprintf(b + k, cap - k, "]}");
    return b;
}

/* the vectors as the server holds them (JSON decimals parsed back) */
static void reparse(int id)
{
    char t[32];
    for (int d = 0; d < DIM; d++) {
        snprintf(t, sizeof t, "%.6f", (double)vecs[id][d]);
        vecs[id][d] = strtof(t, NULL);
    }
}

static double l2(const float *a, const float *b)
{
    double s = 0;
    for (int d = 0; d < DIM; d++) {
        double x = (double)a[d] - (double)b[d];
        s += x * x;
    }
    return s;
}

typedef struct bh {
    int id;
    double d;
} bh;

static int cmp_bh(const void *a, const void *b)
{
    const bh *x = a, *y = b;
    return x->d < y->d ? -1 : x->d > y->d ? 1 : x->id - y->id;
}

/* checks a search answer of queries q[0..nq) (limit, offset, ids below `below` when > 0)
 * against brute force over the live rows */
static void
check_search(const json_t *ans, const float (*q)[DIM], int nq, int limit, int offset, int below)
{
    const json_t *data = json_object_get(ans, "data"), *tk = json_object_get(ans, "topks");
    ASSERT_EQ(json_array_size(tk), (size_t)nq);
    bh *all = malloc(sizeof(bh) * (ROWS + 200));
    size_t at = 0;
    for (int i = 0; i < nq; i++) {
        int m = 0;
        for (int id = 0; id < ROWS + 200; id++)
            if (live[id] && (below <= 0 || id < below)) {
                all[m].id = id;
                all[m].d = l2(q[i], vecs[id]);
                m++;
            }
        qsort(all, (size_t)m, sizeof *all, cmp_bh);
        int want = m - offset < limit ? m - offset : limit;
        ASSERT_EQ(json_integer_value(json_array_get(tk, (size_t)i)), want);
        for (int r = 0; r < want; r++) {
            const json_t *row = json_array_get(data, at + (size_t)r);
            json_int_t got = json_integer_value(json_object_get(row, "id"));
            if (got != all[offset + r].id)
                FAILF("query %d rank %d: id %lld, brute force %d (distance %g vs %g)", i, r,
                      (long long)got, all[offset + r].id,
                      json_number_value(json_object_get(row, "distance")), all[offset + r].d);
        }
        at += (size_t)want;
    }
    free(all);
}

static char *search_body(const char *extra, const float (*q)[DIM], int nq)
{
    static char b[8192];
    size_t k = (size_t)snprintf(b, sizeof b, "{\"collectionName\":\"sh\",%s\"data\":[", extra);
    for (int i = 0; i < nq; i++) {
        k += (size_t)snprintf(b + k, sizeof b - k, "%s[", i ? "," : "");
        for (int d = 0; d < DIM; d++)
            k += (size_t)snprintf(b + k, sizeof b - k, "%s%.6f", d ? "," : "", (double)q[i][d]);
        k += (size_t)snprintf(b + k, sizeof b - k, "]");
    }
    snprintf(b + k, sizeof b - k, "]}");
    return b;
}

static char count_node[200]; /* X-Sextant-Node of count_of's answer */

static long long count_of(const char *coll, const char *level)
{
    char body[256];
    char *node = count_node;
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"filter\":\"\",\"outputFields\":[\"count(*)\"]%s%s%s}",
             coll, level ? ",\"consistencyLevel\":\"" : "", level ? level : "", level ? "\"" : "");
    if (th_cl_via_n("/v2/vectordb/entities/query", body, node, sizeof count_node) != 0)
        return -1;
    return (long long)json_integer_value(
        json_object_get(json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"));
}

/* the writers holding sh's shards, as the proxy's X-Sextant-Node of a Strong get_stats names
 * them ("w1,w2,w1") */
static char holders[3][8];

static void read_holders(void)
{
    char node[200];
    ASSERT_EQ(th_cl_via_n("/v2/vectordb/collections/get_stats", "{\"collectionName\":\"sh\"}", node,
                          sizeof node),
              0);
    ASSERT_EQ(sscanf(node, "%7[^,],%7[^,],%7s", holders[0], holders[1], holders[2]), 3);
}

/* the rows of shard k of sh on writer w ("w1"/"w2"), -1 when it has no such collection */
static long long shard_rows(unsigned k, const char *w)
{
    char saved[128], body[128];
    snprintf(saved, sizeof saved, "%s", th_base);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 1 + (unsigned)(w[1] - '1'));
    snprintf(body, sizeof body, "{\"collectionName\":\"sh__s%u\"}", k);
    th_post("/v2/vectordb/collections/get_stats", body, NULL);
    snprintf(th_base, sizeof th_base, "%s", saved);
    if (th_code() != 0)
        return -1;
    return (long long)json_integer_value(
        json_object_get(json_object_get(th_last.json, "data"), "rowCount"));
}

static void test_shards(void)
{
    char out[8192], args[1024], node[200];
    base = th_cl_pick_base(17);
    ASSERT(base != 0);
    snprintf(args, sizeof args,
             "cluster up --dir '%s' --port %u --etcd 3 --writers 2 --query-nodes 2 --lease-ttl 2",
             th_cl_dir, base);
    int rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster up: exit %d: %s", rc, out);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base);

    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"collectionName\":\"sh\",\"schema\":{\"fields\":[{\"fieldName\":\"id\","
                        "\"dataType\":\"Int64\",\"isPrimary\":true},{\"fieldName\":\"vector\","
                        "\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":8}}]},"
                        "\"indexParams\":[{\"fieldName\":\"vector\",\"metricType\":\"L2\","
                        "\"indexType\":\"FLAT\"}],\"params\":{\"shardsNum\":3}}",
                        node),
              0);
    /* mistakes: a shard's name, the same name with another shardsNum */
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"collectionName\":\"x__s1\",\"dimension\":8}", node),
              1100);
    ASSERT(th_cl_via("/v2/vectordb/collections/create",
                     "{\"collectionName\":\"sh\",\"dimension\":8,\"params\":{\"shardsNum\":2}}",
                     node) != 0);
    ASSERT(strstr(json_string_value(json_object_get(th_last.json, "message")), "shardsNum 3"));

    for (int b = 0; b < ROWS / 100; b++) {
        char *body = rows_body("sh", b * 100, 100);
        ASSERT_EQ(th_cl_via_n("/v2/vectordb/entities/insert", body, node, sizeof node), 0);
        free(body);
        const json_t *ids = json_object_get(json_object_get(th_last.json, "data"), "insertIds");
        ASSERT_EQ(json_array_size(ids), (size_t)100);
        for (int i = 0; i < 100; i++)
            ASSERT_EQ(json_integer_value(json_array_get(ids, (size_t)i)), b * 100 + i);
        for (int i = 0; i < 100; i++) {
            reparse(b * 100 + i);
            live[b * 100 + i] = true;
        }
    }
    /* every shard holds about a third; both writers hold shards */
    long long sum = 0;
    bool w1 = false, w2 = false;
    read_holders();
    char holder0[8];
    snprintf(holder0, sizeof holder0, "%s", holders[0]);
    for (unsigned k = 0; k < 3; k++) {
        long long r = shard_rows(k, holders[k]);
        if (r < 120 || r > 280)
            FAILF("shard %u holds %lld of 600 rows on %s", k, r, holders[k]);
        sum += r;
        w1 = w1 || strcmp(holders[k], "w1") == 0;
        w2 = w2 || strcmp(holders[k], "w2") == 0;
    }
    ASSERT_EQ(sum, ROWS);
    ASSERT(w1 && w2);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/list", "{}", node), 0);
    const json_t *names = json_object_get(th_last.json, "data");
    ASSERT_EQ(json_array_size(names), (size_t)1);
    ASSERT(strcmp(json_string_value(json_array_get(names, 0)), "sh") == 0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/describe", "{\"collectionName\":\"sh\"}", node),
              0);
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(th_last.json, "data"), "shardsNum")), 3);
    ASSERT(strcmp(json_string_value(
                      json_object_get(json_object_get(th_last.json, "data"), "collectionName")),
                  "sh") == 0);

    /* searches against brute force (Strong: the writers, every acknowledged row) */
    float q[4][DIM];
    uint64_t s = 42;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 4; i++)
            for (int d = 0; d < DIM; d++)
                q[i][d] = test_randf(&s) * 10.0f;
        char b[8192];
        snprintf(b, sizeof b, "%s", search_body("\"limit\":10,", (const float(*)[DIM])q, 4));
        for (int i = 0; i < 4; i++) /* as sent */
            for (int d = 0; d < DIM; d++) {
                char t[32];
                snprintf(t, sizeof t, "%.6f", (double)q[i][d]);
                q[i][d] = strtof(t, NULL);
            }
        ASSERT_EQ(th_cl_via_n("/v2/vectordb/entities/search", b, node, sizeof node), 0);
        check_search(th_last.json, (const float(*)[DIM])q, 4, 10, 0, 0);
        ASSERT_EQ(th_cl_via_n("/v2/vectordb/entities/search",
                              search_body("\"limit\":10,\"offset\":7,", (const float(*)[DIM])q, 4),
                              node, sizeof node),
                  0);
        check_search(th_last.json, (const float(*)[DIM])q, 4, 10, 7, 0);
        ASSERT_EQ(th_cl_via_n("/v2/vectordb/entities/search",
                              search_body("\"limit\":5,\"filter\":\"id < 300\",",
                                          (const float(*)[DIM])q, 4),
                              node, sizeof node),
                  0);
        check_search(th_last.json, (const float(*)[DIM])q, 4, 5, 0, 300);
    }
    ASSERT_EQ(count_of("sh", NULL), ROWS);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/query",
                        "{\"collectionName\":\"sh\",\"filter\":\"id >= 100\",\"limit\":10,"
                        "\"offset\":20,\"outputFields\":[\"id\"]}",
                        node),
              0);
    const json_t *d = json_object_get(th_last.json, "data");
    ASSERT_EQ(json_array_size(d), (size_t)10);
    for (int i = 0; i < 10; i++)
        ASSERT_EQ(json_integer_value(json_object_get(json_array_get(d, (size_t)i), "id")), 120 + i);
    /* limit and offset as the nodes read them: text numbers, a query's default of 100, a search's
     * 0 refused */
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/query",
                        "{\"collectionName\":\"sh\",\"filter\":\"id >= 0\","
                        "\"outputFields\":[\"id\"]}",
                        node),
              0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), (size_t)100);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/query",
                        "{\"collectionName\":\"sh\",\"filter\":\"id >= 0\",\"limit\":\"5\","
                        "\"Offset\":\"10\",\"outputFields\":[\"id\"]}",
                        node),
              0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), (size_t)5);
    ASSERT(th_cl_via("/v2/vectordb/entities/search",
                     "{\"collectionName\":\"sh\",\"data\":[[1,1,1,1,1,1,1,1]],\"limit\":0}",
                     node) != 0);
    ASSERT(th_cl_via("/v2/vectordb/entities/search",
                     "{\"collectionName\":\"sh\",\"data\":[[1,1,1,1,1,1,1,1]],\"limit\":10,"
                     "\"offset\":-1}",
                     node) != 0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/search",
                        "{\"collectionName\":\"sh\",\"data\":[[1,1,1,1,1,1,1,1]],\"limit\":\"3\"}",
                        node),
              0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), (size_t)3);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/get",
                        "{\"collectionName\":\"sh\",\"id\":[599,5,300,7777]}", node),
              0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), (size_t)3);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/delete",
                        "{\"collectionName\":\"sh\",\"filter\":\"id < 50\"}", node),
              0);
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(th_last.json, "data"), "deleteCount")),
        50);
    for (int id = 0; id < 50; id++)
        live[id] = false;
    ASSERT_EQ(count_of("sh", NULL), ROWS - 50);
    /* upsert: row 60 gets row 700's vector */
    char *ub = rows_body("sh", 700, 1);
    reparse(700);
    char *idp = strstr(ub, "\"id\":700");
    ASSERT(idp);
    memcpy(idp, "\"id\":60 ", 8);
    ASSERT(th_cl_via("/v2/vectordb/entities/upsert", "{\"collectionName\":\"sh\",", node) != 0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/upsert", ub, node), 0);
    free(ub);
    memcpy(vecs[60], vecs[700], sizeof vecs[60]);
    ASSERT_EQ(count_of("sh", NULL), ROWS - 50);
    memcpy(q[0], vecs[60], sizeof q[0]);
    ASSERT_EQ(th_cl_via_n("/v2/vectordb/entities/search",
                          search_body("\"limit\":3,", (const float(*)[DIM])q, 1), node,
                          sizeof node),
              0);
    check_search(th_last.json, (const float(*)[DIM])q, 1, 3, 0, 0);
    ASSERT_EQ(json_integer_value(
                  json_object_get(json_array_get(json_object_get(th_last.json, "data"), 0), "id")),
              60);

    /* a VarChar key whose text a node's "moved" message contains is inserted once (the proxy
     * reads only failures' messages for that) */
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"collectionName\":\"vc\",\"dimension\":2,\"idType\":\"VarChar\","
                        "\"params\":{\"shardsNum\":2,\"max_length\":64}}",
                        node),
              0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/insert",
                        "{\"collectionName\":\"vc\",\"data\":[{\"id\":\"held by writer w9\","
                        "\"vector\":[1,2]},{\"id\":\"k2\",\"vector\":[2,2]}]}",
                        node),
              0);
    ASSERT_EQ(count_of("vc", NULL), 2);

    /* autoID over 2 shards: keys from the proxy, unique */
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"collectionName\":\"au\",\"dimension\":2,\"metricType\":\"IP\","
                        "\"autoID\":true,\"params\":{\"shardsNum\":2}}",
                        node),
              0);
    /* right after a create the query nodes have not refreshed (every 500 ms): their "not
     * found" must not fail an Eventually read, which the proxy then sends to the writer */
    ASSERT_EQ(count_of("au", "Eventually"), 0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"collectionName\":\"lg\",\"dimension\":2}", node),
              0);
    ASSERT_EQ(count_of("lg", "Eventually"), 0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/drop", "{\"collectionName\":\"lg\"}", node), 0);
    json_int_t seen[100];
    for (int r = 0; r < 2; r++) {
        char b[4096];
        size_t k = (size_t)snprintf(b, sizeof b, "{\"collectionName\":\"au\",\"data\":[");
        for (int i = 0; i < 50; i++)
            k += (size_t)snprintf(b + k, sizeof b - k, "%s{\"vector\":[%d,1]}", i ? "," : "", i);
        snprintf(b + k, sizeof b - k, "]}");
        ASSERT_EQ(th_cl_via("/v2/vectordb/entities/insert", b, node), 0);
        const json_t *ids = json_object_get(json_object_get(th_last.json, "data"), "insertIds");
        ASSERT_EQ(json_array_size(ids), (size_t)50);
        for (int i = 0; i < 50; i++) {
            seen[r * 50 + i] = json_integer_value(json_array_get(ids, (size_t)i));
            for (int j = 0; j < r * 50 + i; j++)
                ASSERT(seen[j] != seen[r * 50 + i]);
        }
    }
    ASSERT_EQ(count_of("au", NULL), 100);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/insert",
                        "{\"collectionName\":\"au\",\"data\":[{\"id\":5,\"vector\":[1,1]}]}", node),
              1804);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/describe", "{\"collectionName\":\"au\"}", node),
              0);
    ASSERT(json_is_true(json_object_get(json_object_get(th_last.json, "data"), "autoId")));
    /* the same create again is the idempotent repeat; with autoID off it is refused (the
     * shards' own schemas have autoID off either way) */
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"collectionName\":\"au\",\"dimension\":2,\"metricType\":\"IP\","
                        "\"autoID\":true,\"params\":{\"shardsNum\":2}}",
                        node),
              0);
    ASSERT(th_cl_via("/v2/vectordb/collections/create",
                     "{\"collectionName\":\"au\",\"dimension\":2,\"metricType\":\"IP\","
                     "\"params\":{\"shardsNum\":2}}",
                     node) != 0);
    ASSERT(strstr(json_string_value(json_object_get(th_last.json, "message")), "autoID true"));
    ASSERT_EQ(count_of("au", NULL), 100);

    /* Eventually: the query nodes, once they follow the flushed shards */
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/flush", "{\"collectionName\":\"sh\"}", node), 0);
    double t0 = th_cl_mono();
    long long ev = -1;
    while (ev != ROWS - 50 && th_cl_mono() - t0 < 15) {
        usleep(100000);
        ev = count_of("sh", "Eventually");
    }
    ASSERT_EQ(ev, ROWS - 50);
    /* that count may have come from shards on different nodes, or from a writer for a shard a
     * query node did not have yet: wait until each query node holds every shard */
    for (unsigned qn = 0; qn < 2; qn++) {
        char saved[128];
        snprintf(saved, sizeof saved, "%s", th_base);
        snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 50 + qn);
        long long have = -1;
        while (have != ROWS - 50 && th_cl_mono() - t0 < 30) {
            have = 0;
            for (unsigned k = 0; k < 3 && have >= 0; k++) {
                char cn[32];
                snprintf(cn, sizeof cn, "sh__s%u", k);
                long long r = count_of(cn, NULL);
                have = r < 0 ? -1 : have + r;
            }
            if (have != ROWS - 50)
                usleep(100000);
        }
        snprintf(th_base, sizeof th_base, "%s", saved);
        ASSERT_EQ(have, ROWS - 50);
    }
    ASSERT_EQ(count_of("sh", "Eventually"), ROWS - 50);
    snprintf(node, sizeof node, "%s", count_node); /* the nodes that answered the count */
    for (char *p = node; *p; p++)
        if (*p == ',')
            *p = ' ';
    ASSERT(strstr(node, "w") == NULL && strstr(node, "q") != NULL);
    ASSERT_EQ(th_cl_via_n("/v2/vectordb/entities/search",
                          search_body("\"limit\":10,\"consistencyLevel\":\"Eventually\",",
                                      (const float(*)[DIM])q, 4),
                          node, sizeof node),
              0);
    ASSERT(strstr(node, "w") == NULL);
    check_search(th_last.json, (const float(*)[DIM])q, 4, 10, 0, 0);

    /* kill -9 of query node q1: Eventually searches go on at q2 (a shard search that cannot
     * connect is sent to another query node, and q1 is skipped while it is down), each answer
     * whole; the supervisor restarts q1 */
    th_cl_line ls[16];
    int n = th_cl_status(ls, 16);
    const th_cl_line *q1 = th_cl_find(ls, n, "q1");
    ASSERT(q1 && th_cl_alive(q1->pid));
    kill(q1->pid, SIGKILL);
    usleep(100000);
    for (int i = 0; i < 10; i++) {
        long long c = th_cl_via_n("/v2/vectordb/entities/search",
                                  search_body("\"limit\":10,\"consistencyLevel\":\"Eventually\",",
                                              (const float(*)[DIM])q, 4),
                                  node, sizeof node);
        if (c != 0)
            FAILF("search %d after q1 was killed: %s", i, th_last.text ? th_last.text : "");
        check_search(th_last.json, (const float(*)[DIM])q, 4, 10, 0, 0);
    }
    t0 = th_cl_mono();
    do {
        usleep(100000);
        n = th_cl_status(ls, 16);
    } while (th_cl_mono() - t0 < 15 && th_cl_find(ls, n, "q1")->restarts < 1);
    ASSERT_EQ(th_cl_find(ls, n, "q1")->restarts, 1);

    /* kill -9 of the proxy: restarted by the supervisor, it serves again (it keeps no state) */
    const th_cl_line *px = th_cl_find(ls, n, "proxy");
    ASSERT(px && th_cl_alive(px->pid));
    kill(px->pid, SIGKILL);
    t0 = th_cl_mono();
    while (count_of("sh", NULL) != ROWS - 50 && th_cl_mono() - t0 < 15)
        usleep(100000);
    ASSERT_EQ(count_of("sh", NULL), ROWS - 50);
    n = th_cl_status(ls, 16);
    ASSERT_EQ(th_cl_find(ls, n, "proxy")->restarts, 1);

    /* kill -9 of the writer holding shard 0 */
    n = th_cl_status(ls, 16);
    const th_cl_line *victim = th_cl_find(ls, n, holder0);
    ASSERT(victim && th_cl_alive(victim->pid));
    kill(victim->pid, SIGKILL);
    usleep(300000);
    long long code =
        th_cl_via_n("/v2/vectordb/entities/search",
                    search_body("\"limit\":10,", (const float(*)[DIM])q, 4), node, sizeof node);
    if (code == 0) /* the restart may already serve: then the answer must be whole */
        check_search(th_last.json, (const float(*)[DIM])q, 4, 10, 0, 0);
    else
        ASSERT(strstr(json_string_value(json_object_get(th_last.json, "message")), "shard 0") !=
               NULL);
    /* upserts of rows 600..699, retried whole until acknowledged */
    t0 = th_cl_mono();
    for (int b = 0; b < 10; b++) {
        char *body = rows_body("sh", ROWS + b * 10, 10);
        while ((code = th_cl_via_n("/v2/vectordb/entities/upsert", body, node, sizeof node)) != 0 &&
               th_cl_mono() - t0 < 40)
            usleep(250000);
        free(body);
        ASSERT_EQ(code, 0);
        for (int i = 0; i < 10; i++) {
            reparse(ROWS + b * 10 + i);
            live[ROWS + b * 10 + i] = true;
        }
    }
    ASSERT_EQ(count_of("sh", NULL), ROWS - 50 + 100);
    for (int id = ROWS; id < ROWS + 100; id += 7) {
        memcpy(q[0], vecs[id], sizeof q[0]);
        ASSERT_EQ(th_cl_via_n("/v2/vectordb/entities/search",
                              search_body("\"limit\":1,", (const float(*)[DIM])q, 1), node,
                              sizeof node),
                  0);
        ASSERT_EQ(json_integer_value(json_object_get(
                      json_array_get(json_object_get(th_last.json, "data"), 0), "id")),
                  id);
    }
    check_search(th_last.json, (const float(*)[DIM])q, 1, 1, 0, 0);
    n = th_cl_status(ls, 16);
    ASSERT(th_cl_find(ls, n, holder0)->restarts == 1);

    /* drop: every shard goes from its holder; the name is free for another shardsNum */
    read_holders();
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/drop", "{\"collectionName\":\"sh\"}", node), 0);
    for (unsigned k = 0; k < 3; k++)
        ASSERT_EQ(shard_rows(k, holders[k]), -1);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/describe", "{\"collectionName\":\"sh\"}", node),
              100);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/list", "{}", node), 0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), (size_t)2); /* au, vc */
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"collectionName\":\"sh\",\"dimension\":8,\"params\":{\"shardsNum\":2}}",
                        node),
              0);
    ASSERT_EQ(count_of("sh", NULL), 0);

    snprintf(args, sizeof args, "cluster down --dir '%s'", th_cl_dir);
    rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster down: exit %d: %s", rc, out);
}

/* the nodes' logs: no sanitizer report (the nodes are child processes) */
static void test_logs_clean(void)
{
    char why[1200];
    if (!th_cl_logs_clean(why, sizeof why))
        FAILF("%s", why);
}

int main(void)
{
    int rc = th_cl_init("cluster_shards");
    if (rc != 0)
        return rc;
    RUN(test_shards);
    th_cl_down();
    RUN(test_logs_clean);
    return TEST_DONE();
}
