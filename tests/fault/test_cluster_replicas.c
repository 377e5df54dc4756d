/*
 * test_cluster_replicas.c: in-memory replicas on query nodes (issue 17) on a real cluster
 * (`sextant cluster up`: 1 etcd member, 1 writer, 3 query nodes, the proxy; lease TTL 2 s).
 * Skipped (77) without etcd.
 *
 *   an unsharded collection (ru) and one with 4 shards (rs), 400 rows each, flushed, then
 *   loaded with replicaNumber 2: each unit (ru, rs__s0..3) ends up on exactly the 2 query nodes
 *   rendezvous hashing names (sx__replica_holders, computed here), so 10 placements over 3 nodes
 *   instead of 15; Eventually reads of ru are answered by its two holders only, in turn, and
 *   equal the writer's (count, a search); Eventually searches of rs (fanned out to the shards'
 *   holders) equal the Strong ones;
 *   kill -9 of a holder of ru: the very next Eventually reads are answered, whole, by the other
 *   holder (no reload, no fallback to the writer);
 *   release of rs: every query node holds every shard again;
 *   no sanitizer report in any node's log.
 */
#include <sextant.h>
#include <signal.h>
#include <stdlib.h>

#include "cluster.h"
#include "cluster/shard.h"
#include "harness.h"
#include "http.h"

#define ROWS 400
#define NQN  3

static unsigned base;
static const char *const qids[NQN] = { "q1", "q2", "q3" };

static void load(const char *coll, int shards)
{
    char body[512];
    if (shards > 1)
        snprintf(body, sizeof body,
                 "{\"collectionName\":\"%s\",\"dimension\":4,\"params\":{\"shardsNum\":%d}}", coll,
                 shards);
    else
        snprintf(body, sizeof body, "{\"collectionName\":\"%s\",\"dimension\":4}", coll);
    th_post_ok("/v2/vectordb/collections/create", body);
    static char b[ROWS * 96 + 256];
    size_t k = (size_t)snprintf(b, sizeof b, "{\"collectionName\":\"%s\",\"data\":[", coll);
    uint64_t s = 42;
    for (int i = 0; i < ROWS; i++)
        k += (size_t)snprintf(b + k, sizeof b - k, "%s{\"id\":%d,\"vector\":[%.4f,%.4f,%.4f,%.4f]}",
                              i ? "," : "", i, (double)test_randf(&s), (double)test_randf(&s),
                              (double)test_randf(&s), (double)test_randf(&s));
    snprintf(b + k, sizeof b - k, "]}");
    th_post("/v2/vectordb/entities/insert", b, NULL);
    ASSERT_EQ(th_code(), 0);
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\"}", coll);
    th_post_ok("/v2/vectordb/collections/flush", body);
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\",\"replicaNumber\":2}", coll);
    th_post_ok("/v2/vectordb/collections/load", body);
}

/* whether query node i lists unit */
static bool holds(int i, const char *unit)
{
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 50 + (unsigned)i);
    th_post("/v2/vectordb/collections/list", "{}", NULL);
    json_t *d = th_last.json ? json_object_get(th_last.json, "data") : NULL;
    bool found = false;
    for (size_t k = 0; k < json_array_size(d) && !found; k++)
        found = strcmp(json_string_value(json_array_get(d, k)), unit) == 0;
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base);
    return found;
}

/* the query nodes (bit i: q<i+1>) that should hold unit, and those that do */
static unsigned want_mask(const char *unit)
{
    size_t hold[NQN];
    size_t nh = sx__replica_holders("default", unit, qids, NQN, 2, hold);
    unsigned m = 0;
    for (size_t h = 0; h < nh; h++)
        m |= 1u << hold[h];
    return m;
}

static unsigned have_mask(const char *unit)
{
    unsigned m = 0;
    for (int i = 0; i < NQN; i++)
        m |= holds(i, unit) ? 1u << i : 0;
    return m;
}

static long long count_at(const char *coll, const char *level, char *node)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"filter\":\"id >= 0\",\"outputFields\":[\"count(*)\"],"
             "\"consistencyLevel\":\"%s\"}",
             coll, level);
    if (th_cl_via_n("/v2/vectordb/entities/query", body, node, 64) != 0)
        return -1;
    return json_integer_value(
        json_object_get(json_array_get(json_object_get(th_last.json, "data"), 0), "count(*)"));
}

/* the ids of a search's hits, as text */
static void search_ids(const char *coll, const char *level, char *out, size_t cap)
{
    char body[300], node[64];
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"data\":[[0.3,0.6,0.1,0.9]],\"limit\":10,"
             "\"consistencyLevel\":\"%s\"}",
             coll, level);
    ASSERT_EQ(th_cl_via("/v2/vectordb/entities/search", body, node), 0);
    json_t *d = json_object_get(th_last.json, "data");
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(d); i++)
        off += (size_t)snprintf(
            out + off, cap - off, "%lld ",
            (long long)json_integer_value(json_object_get(json_array_get(d, i), "id")));
}

static void test_replicas(void)
{
    char out[8192], args[1200];
    base = th_cl_pick_base(29);
    ASSERT(base != 0);
    snprintf(args, sizeof args,
             "cluster up --dir '%s' --port %u --etcd 1 --writers 1 --query-nodes 3 --lease-ttl 2",
             th_cl_dir, base);
    int rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster up: exit %d: %s", rc, out);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base);
    load("ru", 1);
    load("rs", 4);

    /* placement: every unit on exactly its two holders */
    const char *units[5] = { "ru", "rs__s0", "rs__s1", "rs__s2", "rs__s3" };
    double t0 = th_cl_mono();
    bool placed = false;
    while (!placed && th_cl_mono() - t0 < 20) {
        placed = true;
        for (int u = 0; u < 5 && placed; u++)
            placed = have_mask(units[u]) == want_mask(units[u]);
        if (!placed)
            usleep(200000);
    }
    int total = 0, per[NQN] = { 0 };
    for (int u = 0; u < 5; u++) {
        unsigned m = have_mask(units[u]);
        fprintf(stderr, "%s on %s%s%s (want %s%s%s)\n", units[u], m & 1 ? "q1 " : "",
                m & 2 ? "q2 " : "", m & 4 ? "q3 " : "", want_mask(units[u]) & 1 ? "q1 " : "",
                want_mask(units[u]) & 2 ? "q2 " : "", want_mask(units[u]) & 4 ? "q3 " : "");
        for (int i = 0; i < NQN; i++)
            if (m >> i & 1) {
                total++;
                per[i]++;
            }
    }
    ASSERT(placed);
    ASSERT_EQ(total, 10);
    fprintf(stderr, "units per query node: q1 %d, q2 %d, q3 %d\n", per[0], per[1], per[2]);

    /* Eventually reads of ru: its holders only, both in turn; equal to the writer's */
    unsigned ru = want_mask("ru"), seen = 0;
    char node[64];
    for (int i = 0; i < 12; i++) {
        ASSERT_EQ(count_at("ru", "Eventually", node), ROWS);
        ASSERT(node[0] == 'q' && node[1] >= '1' && node[1] <= '3');
        seen |= 1u << (node[1] - '1');
    }
    ASSERT_EQ(seen, ru);
    char a[512], b[512];
    search_ids("ru", "Strong", a, sizeof a);
    search_ids("ru", "Eventually", b, sizeof b);
    ASSERT(strcmp(a, b) == 0 && strlen(a) > 0);
    /* every shard's holders at the flushed version (they follow on their refresh interval:
     * placement alone can list a shard at the create's empty version) */
    double tw = th_cl_mono();
    while (count_at("rs", "Eventually", node) != ROWS && th_cl_mono() - tw < 20)
        usleep(100000);
    for (int i = 0; i < 8; i++) /* each shard read by each of its holders in turn */
        ASSERT_EQ(count_at("rs", "Eventually", node), ROWS);
    search_ids("rs", "Strong", a, sizeof a);
    search_ids("rs", "Eventually", b, sizeof b);
    if (strcmp(a, b) != 0 || !a[0])
        FAILF("rs: Strong %s, Eventually %s", a, b);

    /* kill -9 of one holder of ru: the other answers at once */
    int victim = (ru & 1) ? 0 : 1, other = -1;
    for (int i = 0; i < NQN; i++)
        if ((ru >> i & 1) && i != victim)
            other = i;
    th_cl_line ls[64];
    int n = th_cl_status(ls, 64);
    const th_cl_line *vl = th_cl_find(ls, n, qids[victim]);
    ASSERT(vl != NULL && vl->pid > 0);
    kill(vl->pid, SIGKILL);
    double tk = th_cl_mono();
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(count_at("ru", "Eventually", node), ROWS);
        ASSERT(strcmp(node, qids[other]) == 0);
    }
    fprintf(stderr, "%s killed: 10 Eventually reads of ru answered by %s within %.2f s\n",
            qids[victim], qids[other], th_cl_mono() - tk);

    /* release rs: every query node holds every shard again (the restarted one too) */
    th_post_ok("/v2/vectordb/collections/release", "{`collectionName`:`rs`}");
    t0 = th_cl_mono();
    placed = false;
    while (!placed && th_cl_mono() - t0 < 30) {
        placed = true;
        for (int u = 1; u < 5 && placed; u++)
            placed = have_mask(units[u]) == 7;
        if (!placed)
            usleep(200000);
    }
    ASSERT(placed);

    char why[1200];
    if (!th_cl_logs_clean(why, sizeof why))
        FAILF("sanitizer report in a node's log: %s", why);
    th_cl_down();
}

int main(void)
{
    int rc = th_cl_init("cluster_replicas");
    if (rc != 0)
        return rc;
    RUN(test_replicas);
    th_cl_down();
    return TEST_DONE();
}
