/*
 * test_cluster_cli.c: `sextant cluster up|status|down` as a user runs them (the real binary, a
 * real 3-member etcd, two fenced shard writers, a file:// store). Skipped (77) without etcd.
 *
 *   up (no --storage: its own s3rver when node and the npm package are found, which `make
 *   deps` installs; else a file:// store) returns once both writers answer /readyz; status
 *   prints one line per process (role,
 *   name, pid=N, address, state, restarts) and every pid is alive; a second up on the same
 *   directory is refused; --query-nodes 1 is refused as not built yet;
 *   kill -9 of a writer: the supervisor restarts it on its directory; rows acknowledged before
 *   the kill are there once it serves again (WAL replay; writes are refused until the dead
 *   process's lease expires, then accepted);
 *   kill -9 of an etcd member: restarted (restarts=1), writes go on (retried, as upserts, while
 *   the writer cannot renew its lease: only lease refusals are allowed);
 *   the query node (--query-nodes 1) serves the writer's rows once flushed and refuses writes;
 *   kill -9 of it: restarted, it serves them again;
 *   the proxy (P; writers on P+1..): four collections created through it land on both writers,
 * their writes and default (Strong) reads go to the writer holding each, an Eventually read goes to
 *   the query node (once it has the flushed rows), collections/list merges every writer's; a
 *   database created after the query node started is followed by it: an Eventually read of its
 *   collection is answered by the query node;
 *   down stops every process (none of the pids is alive after it), status then says down;
 *   up again on the same directory: the cluster comes back with its data (etcd members on their
 *   data directories, writers on theirs).
 */
#include <sextant.h>
#include <stdlib.h>

#include "cluster.h"
#include "etcd.h"
#include "harness.h"
#include "http.h"

static unsigned base;

static char *insert_body(int first, int n)
{
    size_t cap = 128 + (size_t)n * 96;
    char *b = malloc(cap);
    size_t k = (size_t)snprintf(b, cap, "{\"collectionName\":\"cc\",\"data\":[");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(b + k, cap - k, "%s{\"id\":%d,\"vector\":[%d,%d,1,1]}", i ? "," : "",
                              first + i, (first + i) % 17, (first + i) % 5);
    snprintf(b + k, cap - k, "]}");
    return b;
}

static long long insert(int first, int n)
{
    char *b = insert_body(first, n);
    th_post("/v2/vectordb/entities/insert", b, NULL);
    free(b);
    return th_code();
}

static long long count(void)
{
    th_post("/v2/vectordb/entities/query",
            "{\"collectionName\":\"cc\",\"filter\":\"id >= 0\",\"outputFields\":[\"count(*)\"]}",
            NULL);
    if (th_code() != 0)
        FAILF("count: %s", th_last.text ? th_last.text : "(no answer)");
    return (long long)json_integer_value(
        json_object_get(json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"));
}

static void test_cluster(void)
{
    char out[8192], args[1024];
    base = th_cl_pick_base(0);
    ASSERT(base != 0);
    snprintf(args, sizeof args,
             "cluster up --dir '%s' --port %u --etcd 3 --writers 2 --query-nodes 1 --lease-ttl 2",
             th_cl_dir, base);
    int rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster up: exit %d: %s", rc, out);
    ASSERT(strstr(out, "cluster up in") != NULL);
    th_cl_line ls[16];
    int n = th_cl_status(ls, 16);
    /* no --storage: an s3rver of the cluster's own when node and the npm package are there */
    bool s3 = strstr(out, "on s3rver") != NULL;
    ASSERT_EQ(n, 8 + s3);
    const char *names[] = { "-",  "etcd-m1", "etcd-m2", "etcd-m3", "w1",
                            "w2", "q1",      "proxy",   "s3rver" };
    for (size_t i = 0; i < 8u + s3; i++) {
        const th_cl_line *l = th_cl_find(ls, n, names[i]);
        ASSERT(l != NULL);
        ASSERT(th_cl_alive(l->pid));
        ASSERT(strcmp(l->state, "running") == 0);
    }
    ASSERT(strcmp(th_cl_find(ls, n, "w1")->role, "writer") == 0);
    ASSERT(strcmp(th_cl_find(ls, n, "etcd-m2")->role, "etcd") == 0);
    /* mistakes */
    rc = th_cl_run(out, sizeof out, args);
    ASSERT_EQ(rc, 1);
    ASSERT(strstr(out, "already up") != NULL);
    snprintf(args, sizeof args, "cluster up --dir '%s/other' --port %u --index-workers 17",
             th_cl_dir, base + 500);
    rc = th_cl_run(out, sizeof out, args);
    ASSERT_EQ(rc, 2);
    ASSERT(strstr(out, "--index-workers") != NULL);
    ASSERT(strcmp(th_cl_find(ls, n, "q1")->role, "query") == 0);

    /* data through writer 1 */
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 1);
    th_post("/v2/vectordb/collections/create",
            "{\"collectionName\":\"cc\",\"dimension\":4,\"metricType\":\"L2\"}", NULL);
    ASSERT_EQ(th_code(), 0);
    for (int b = 0; b < 5; b++)
        ASSERT_EQ(insert(b * 20, 20), 0);

    /* kill -9 writer 1: restarted on its directory, the rows come back */
    int w1 = th_cl_find(ls, n, "w1")->pid;
    kill(w1, SIGKILL);
    double t0 = th_cl_mono();
    long long code = -1;
    while (code != 0 && th_cl_mono() - t0 < 30) {
        usleep(250000);
        code = insert(1000, 10); /* refused until the dead process's lease expired */
    }
    ASSERT_EQ(code, 0);
    ASSERT_EQ(count(), 110);
    n = th_cl_status(ls, 16);
    ASSERT(th_cl_find(ls, n, "w1")->restarts == 1);
    ASSERT(th_cl_find(ls, n, "w1")->pid != w1 && th_cl_alive(th_cl_find(ls, n, "w1")->pid));

    /* kill -9 an etcd member: restarted, writes go on */
    int m2 = th_cl_find(ls, n, "etcd-m2")->pid;
    kill(m2, SIGKILL);
    t0 = th_cl_mono();
    const th_cl_line *l = NULL;
    while (th_cl_mono() - t0 < 15) {
        n = th_cl_status(ls, 16);
        l = th_cl_find(ls, n, "etcd-m2");
        if (l && l->restarts == 1 && strcmp(l->state, "running") == 0 && th_cl_alive(l->pid))
            break;
        usleep(100000);
    }
    ASSERT(l && l->restarts == 1 && th_cl_alive(l->pid));
    /* Writes go on, though not necessarily at once: while the members elect a leader again
     * (the killed one may have led) the writer cannot renew its lease, and past 0.9 x the TTL
     * (2 s here) it refuses writes (before the WAL) or, when the lapse falls during the fsync,
     * answers "outcome unknown" (the rows are in its WAL). So the first try is an insert and
     * every retry an upsert of the same rows: applied once whichever way a refusal went. Any
     * other refusal fails the test. */
    code = insert(2000, 10);
    t0 = th_cl_mono();
    while (code != 0 && th_cl_mono() - t0 < 20) {
        const char *msg =
            th_last.json ? json_string_value(json_object_get(th_last.json, "message")) : NULL;
        fprintf(stderr, "write after the etcd member restart refused (%lld): %s\n", code,
                msg ? msg : "(no answer)");
        ASSERT(msg && (strstr(msg, "lease") || strstr(msg, "etcd")));
        usleep(250000);
        char *b = insert_body(2000, 10);
        th_post("/v2/vectordb/entities/upsert", b, NULL);
        free(b);
        code = th_code();
    }
    ASSERT_EQ(code, 0);
    th_post("/v2/vectordb/collections/flush", "{\"collectionName\":\"cc\"}", NULL);
    ASSERT_EQ(th_code(), 0);

    /* the query node follows the committed manifests (after the flush), read-only */
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 50);
    long long qn = -1;
    t0 = th_cl_mono();
    while (th_cl_mono() - t0 < 15) {
        th_post(
            "/v2/vectordb/entities/query",
            "{\"collectionName\":\"cc\",\"filter\":\"id >= 0\",\"outputFields\":[\"count(*)\"]}",
            NULL);
        if (th_code() == 0 &&
            (qn = (long long)json_integer_value(json_object_get(
                 json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"))) == 120)
            break;
        usleep(100000);
    }
    ASSERT_EQ(qn, 120);
    ASSERT(insert(3000, 1) != 0); /* read-only */
    /* kill -9 of the query node: restarted, it serves the same rows */
    int q1 = th_cl_find(ls, n, "q1")->pid;
    kill(q1, SIGKILL);
    t0 = th_cl_mono();
    qn = -1;
    while (th_cl_mono() - t0 < 20 && qn != 120) {
        usleep(200000);
        th_post(
            "/v2/vectordb/entities/query",
            "{\"collectionName\":\"cc\",\"filter\":\"id >= 0\",\"outputFields\":[\"count(*)\"]}",
            NULL);
        if (th_code() == 0)
            qn = (long long)json_integer_value(json_object_get(
                json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"));
    }
    ASSERT_EQ(qn, 120);
    n = th_cl_status(ls, 16);
    ASSERT(th_cl_find(ls, n, "q1")->restarts == 1);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 1);

    /* the REST proxy: collections placed over both writers, writes and Strong reads at the
     * holder, Eventually reads at the query node, the list merged */
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base);
    char node[64];
    bool on_w1 = false, on_w2 = false;
    for (int k = 0; k < 4; k++) {
        char body[256];
        snprintf(body, sizeof body, "{\"collectionName\":\"pc%d\",\"dimension\":4}", k);
        ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create", body, node), 0);
        on_w1 = on_w1 || strcmp(node, "w1") == 0;
        on_w2 = on_w2 || strcmp(node, "w2") == 0;
        snprintf(body, sizeof body,
                 "{\"collectionName\":\"pc%d\",\"data\":[{\"id\":1,\"vector\":[1,2,3,4]},"
                 "{\"id\":2,\"vector\":[2,2,3,4]}]}",
                 k);
        char wnode[64];
        ASSERT_EQ(th_cl_via("/v2/vectordb/entities/insert", body, wnode), 0);
        ASSERT(strcmp(wnode, node) == 0); /* the writer that took it at create */
        snprintf(body, sizeof body,
                 "{\"collectionName\":\"pc%d\",\"filter\":\"id >= 0\","
                 "\"outputFields\":[\"count(*)\"]}",
                 k);
        ASSERT_EQ(th_cl_via("/v2/vectordb/entities/query", body, wnode), 0);
        ASSERT(strcmp(wnode, node) == 0); /* Strong (the default): the holder, every row */
        ASSERT_EQ(json_integer_value(json_object_get(
                      json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)")),
                  2);
    }
    ASSERT(on_w1 && on_w2);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/flush", "{\"collectionName\":\"pc1\"}", node), 0);
    long long ev = -1;
    t0 = th_cl_mono();
    /* until the query node has pc1's flushed rows (before, the proxy passes its "not found" on
     * to the writer) */
    while ((ev != 2 || strcmp(node, "q1") != 0) && th_cl_mono() - t0 < 10) {
        usleep(100000);
        if (th_cl_via("/v2/vectordb/entities/query",
                      "{\"collectionName\":\"pc1\",\"filter\":\"id >= 0\",\"outputFields\":"
                      "[\"count(*)\"],\"consistencyLevel\":\"Eventually\"}",
                      node) == 0)
            ev = json_integer_value(json_object_get(
                json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"));
    }
    ASSERT_EQ(ev, 2);
    ASSERT(strcmp(node, "q1") == 0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/list", "{}", node), 0);
    ASSERT_EQ(json_array_size(json_object_get(th_last.json, "data")), 5); /* cc, pc0..pc3 */

    /* a database created after the query node started: it follows it (etcd's manifest keys),
     * so an Eventually read of it is answered by the query node, not passed to the writer */
    ASSERT_EQ(th_cl_via("/v2/vectordb/databases/create", "{\"dbName\":\"zoo\"}", node), 0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/create",
                        "{\"dbName\":\"zoo\",\"collectionName\":\"zc\",\"dimension\":4}", node),
              0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/insert",
                        "{\"dbName\":\"zoo\",\"collectionName\":\"zc\",\"data\":[{\"id\":1,"
                        "\"vector\":[1,2,3,4]},{\"id\":2,\"vector\":[2,2,3,4]},{\"id\":3,"
                        "\"vector\":[3,2,3,4]}]}",
                        node),
              0);
    ASSERT_EQ(th_cl_via("/v2/vectordb/collections/flush",
                        "{\"dbName\":\"zoo\",\"collectionName\":\"zc\"}", node),
              0);
    ev = -1;
    node[0] = '\0';
    t0 = th_cl_mono();
    while ((ev != 3 || strcmp(node, "q1") != 0) && th_cl_mono() - t0 < 15) {
        usleep(100000);
        if (th_cl_via("/v2/vectordb/entities/query",
                      "{\"dbName\":\"zoo\",\"collectionName\":\"zc\",\"filter\":\"id >= 0\","
                      "\"outputFields\":[\"count(*)\"],\"consistencyLevel\":\"Eventually\"}",
                      node) == 0)
            ev = json_integer_value(json_object_get(
                json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"));
    }
    fprintf(stderr, "database zoo: served by %s after %.2f s\n", node, th_cl_mono() - t0);
    ASSERT_EQ(ev, 3);
    ASSERT(strcmp(node, "q1") == 0);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 1);

    /* down: nothing left */
    int pids[16];
    for (int i = 0; i < n; i++)
        pids[i] = ls[i].pid;
    snprintf(args, sizeof args, "cluster down --dir '%s'", th_cl_dir);
    rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster down: exit %d: %s", rc, out);
    for (int i = 0; i < n; i++)
        if (th_cl_alive(pids[i]))
            FAILF("%s pid=%d is alive after down", ls[i].name, pids[i]);
    snprintf(args, sizeof args, "cluster status --dir '%s'", th_cl_dir);
    ASSERT_EQ(th_cl_run(out, sizeof out, args), 1);
    ASSERT(strstr(out, "down") != NULL);

    /* up again: same data */
    snprintf(args, sizeof args,
             "cluster up --dir '%s' --port %u --etcd 3 --writers 2 --query-nodes 1", th_cl_dir,
             base);
    rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster up (again): exit %d: %s", rc, out);
    ASSERT_EQ(count(), 120);
    snprintf(args, sizeof args, "cluster down --dir '%s'", th_cl_dir);
    ASSERT_EQ(th_cl_run(out, sizeof out, args), 0);
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
    int rc = th_cl_init("cluster_cli");
    if (rc != 0)
        return rc;
    RUN(test_cluster);
    th_cl_down();
    RUN(test_logs_clean);
    return TEST_DONE();
}
