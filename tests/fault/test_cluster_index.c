/*
 * test_cluster_index.c: index workers (issue 17) on a real cluster (`sextant cluster up`: 1 etcd
 * member, 1 writer sealing at 1 MiB, 2 index workers with one build thread each, the proxy; lease
 * TTL 2 s, 1 query node). Skipped (77) without etcd.
 *
 *   six sealed segments (3,000 x 64 each, over half the seal size: not merged), then an HNSW
 *   index: every segment's index is built by a worker (the writer's log names each; both workers
 *   built some), the index is Finished with every row indexed, and searches (ef 128) reach recall
 *   >= 0.95 against brute force computed here; the query node, once it followed the commit,
 *   serves them too (Finished, every row indexed, recall >= 0.95); a DISKANN index (its graph
 *   file travels beside the index file) likewise built by workers, recall >= 0.95; a collection
 *   dropped while workers build its DISKANN index: the jobs are withdrawn and a worker stops its
 *   build (its log says cancelled); the writer's /metrics counts the published indexes;
 *   kill -9 of an index worker right after it claimed a job of a second collection: its claim
 *   expires with its lease, the job is built by a worker anyway (the other or the restarted one),
 *   every segment of it by a worker, recall >= 0.95;
 *   both workers stopped (SIGSTOP) past their lease: a third collection's builds run on the
 *   writer (nothing waits for a worker that is gone), recall >= 0.95; resumed, the workers find
 *   their lease gone, exit 3 and are restarted;
 *   no sanitizer report in any node's log.
 */
#include <math.h>
#include <sextant.h>
#include <signal.h>
#include <stdlib.h>

#include "cluster.h"
#include "harness.h"
#include "http.h"

#define DIM  64
#define SEGS 6
#define PER  3000
#define ROWS (SEGS * PER)
#define NQ   20
#define K    10

static unsigned base;
static float *vecs; /* ROWS x DIM */

static void vec_of(int id, float *v)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 7);
    for (int d = 0; d < DIM; d++)
        v[d] = test_randf(&s);
}

static void load(const char *coll)
{
    char body[512];
    /* a schema and no index (a quick create would build the default index while loading) */
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"schema\":{\"fields\":[{\"fieldName\":\"id\","
             "\"dataType\":\"Int64\",\"isPrimary\":true},{\"fieldName\":\"vector\",\"dataType\":"
             "\"FloatVector\",\"elementTypeParams\":{\"dim\":%d}}]}}",
             coll, DIM);
    th_post_ok("/v2/vectordb/collections/create", body);
    size_t cap = (size_t)1000 * (DIM * 14 + 40) + 256;
    char *b = malloc(cap);
    for (int s = 0; s < SEGS; s++) {
        for (int first = s * PER; first < (s + 1) * PER; first += 1000) {
            size_t k = (size_t)snprintf(b, cap, "{\"collectionName\":\"%s\",\"data\":[", coll);
            for (int id = first; id < first + 1000; id++) {
                k += (size_t)snprintf(b + k, cap - k, "%s{\"id\":%d,\"vector\":[",
                                      id > first ? "," : "", id);
                for (int d = 0; d < DIM; d++)
                    k += (size_t)snprintf(b + k, cap - k, "%s%.6f", d ? "," : "",
                                          (double)vecs[(size_t)id * DIM + (size_t)d]);
                k += (size_t)snprintf(b + k, cap - k, "]}");
            }
            snprintf(b + k, cap - k, "]}");
            th_post("/v2/vectordb/entities/insert", b, NULL); /* over th_postf's buffer */
            if (th_code() != 0)
                FAILF("insert into %s: %.300s", coll, th_last.text ? th_last.text : "");
        }
        snprintf(body, sizeof body, "{\"collectionName\":\"%s\"}", coll);
        th_post_ok("/v2/vectordb/collections/flush", body);
    }
    free(b);
}

static void create_index_as(const char *coll, const char *params)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"collectionName\":\"%s\",\"indexParams\":[{\"fieldName\":\"vector\","
             "\"indexName\":\"vector\",\"metricType\":\"L2\",\"params\":%s}]}",
             coll, params);
    th_post_ok("/v2/vectordb/indexes/create", body);
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\"}", coll);
    th_post_ok("/v2/vectordb/collections/load", body);
}

static void create_index(const char *coll)
{
    create_index_as(coll, "{\"index_type\":\"HNSW\",\"M\":16,\"efConstruction\":100}");
}

/* Waits until the index is Finished with every row indexed; seconds taken, or -1. */
static double wait_index(const char *coll, double limit_s)
{
    char body[256];
    snprintf(body, sizeof body, "{\"collectionName\":\"%s\",\"indexName\":\"vector\"}", coll);
    double t0 = th_cl_mono();
    while (th_cl_mono() - t0 < limit_s) {
        th_post("/v2/vectordb/indexes/describe", body, NULL);
        json_t *d = th_last.json ? json_object_get(th_last.json, "data") : NULL;
        json_t *e = json_is_array(d) ? json_array_get(d, 0) : NULL;
        const char *state = e ? json_string_value(json_object_get(e, "indexState")) : NULL;
        json_int_t idx = e ? json_integer_value(json_object_get(e, "indexedRows")) : 0;
        json_int_t pend = e ? json_integer_value(json_object_get(e, "pendingRows")) : 1;
        if (state && strcmp(state, "Finished") == 0 && idx == ROWS && pend == 0)
            return th_cl_mono() - t0;
        usleep(200000);
    }
    fprintf(stderr, "index of %s not finished: %s\n", coll, th_last.text ? th_last.text : "");
    return -1;
}

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static const char *search_params = "{\"ef\":128}";

/* recall@K of NQ searches (ef 128, or search_params) against brute force over every row */
static double recall(const char *coll)
{
    float *d = malloc(sizeof(float) * ROWS), *sorted = malloc(sizeof(float) * ROWS);
    size_t cap = (size_t)DIM * 14 + 512;
    char *b = malloc(cap);
    int hits = 0;
    for (int q = 0; q < NQ; q++) {
        float qv[DIM];
        vec_of(1000000 + q, qv);
        for (int i = 0; i < ROWS; i++) {
            double s = 0;
            for (int k = 0; k < DIM; k++) {
                double t = (double)qv[k] - (double)vecs[(size_t)i * DIM + (size_t)k];
                s += t * t;
            }
            d[i] = sorted[i] = (float)s;
        }
        qsort(sorted, ROWS, sizeof(float), cmp_f);
        float kth = sorted[K - 1];
        size_t k = (size_t)snprintf(b, cap, "{\"collectionName\":\"%s\",\"data\":[[", coll);
        for (int j = 0; j < DIM; j++)
            k += (size_t)snprintf(b + k, cap - k, "%s%.6f", j ? "," : "", (double)qv[j]);
        snprintf(b + k, cap - k,
                 "]],\"limit\":%d,\"searchParams\":{\"params\":%s},"
                 "\"consistencyLevel\":\"Strong\"}",
                 K, search_params);
        json_t *data = th_post_ok("/v2/vectordb/entities/search", b);
        ASSERT(json_array_size(data) == K);
        for (size_t i = 0; i < K; i++) {
            json_int_t id = json_integer_value(json_object_get(json_array_get(data, i), "id"));
            ASSERT(id >= 0 && id < ROWS);
            hits += d[id] <= kth * (1.0f + 1e-5f);
        }
    }
    free(d);
    free(sorted);
    free(b);
    return (double)hits / (NQ * K);
}

/* Lines of log file `name` (under logs/) containing both a and b (b may be NULL). */
static int log_count(const char *name, const char *a, const char *b)
{
    char path[1000], line[2048];
    if (strcmp(name, "supervisor") == 0)
        snprintf(path, sizeof path, "%s/supervisor.log", th_cl_dir);
    else
        snprintf(path, sizeof path, "%s/logs/%s.log", th_cl_dir, name);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, a) && (!b || strstr(line, b));
    if (f)
        fclose(f);
    return n;
}

static int pid_of(const char *name)
{
    th_cl_line ls[64];
    int n = th_cl_status(ls, 64);
    const th_cl_line *l = th_cl_find(ls, n, name);
    return l ? l->pid : 0;
}

static void test_index_workers(void)
{
    char out[8192], args[1200];
    base = th_cl_pick_base(23);
    ASSERT(base != 0);
    snprintf(
        args, sizeof args,
        "cluster up --dir '%s' --port %u --etcd 1 --writers 1 --query-nodes 1 --index-workers 2 "
        "--build-threads 1 --segment-mb 1 --lease-ttl 2",
        th_cl_dir, base);
    int rc = th_cl_run(out, sizeof out, args);
    if (rc != 0)
        FAILF("cluster up: exit %d: %s", rc, out);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base);

    /* 1. six segments, then the index: every segment built by a worker, both took part */
    load("ia");
    create_index("ia");
    double t = wait_index("ia", 180);
    ASSERT(t >= 0);
    int by_worker = log_count("w1", "built by a worker", "of ia segment");
    fprintf(stderr,
            "ia: index finished %.2f s after create, %d of %d segments by workers "
            "(x1 %d, x2 %d)\n",
            t, by_worker, SEGS, log_count("x1", "built in", " of ia "),
            log_count("x2", "built in", " of ia "));
    ASSERT_EQ(by_worker, SEGS);
    ASSERT(log_count("x1", "built in", " of ia ") >= 1);
    ASSERT(log_count("x2", "built in", " of ia ") >= 1);
    double r = recall("ia");
    fprintf(stderr, "ia: recall@10 %.3f\n", r);
    ASSERT(r >= 0.95);
    /* the query node (CPU only, like the workers here) serves the workers' indexes once it has
     * followed the committed manifest */
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 50);
    t = wait_index("ia", 60);
    ASSERT(t >= 0);
    r = recall("ia");
    fprintf(stderr, "ia on query node q1: recall@10 %.3f\n", r);
    ASSERT(r >= 0.95);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base);

    /* DISKANN: its graph file comes back from the worker beside the index file */
    load("id");
    create_index_as("id", "{\"index_type\":\"DISKANN\",\"max_degree\":24,"
                          "\"search_list_size\":60}");
    t = wait_index("id", 180);
    ASSERT(t >= 0);
    by_worker = log_count("w1", "built by a worker", "of id segment");
    fprintf(stderr, "id (DISKANN): finished %.2f s after create, %d of %d segments by workers\n", t,
            by_worker, SEGS);
    ASSERT_EQ(by_worker, SEGS);
    search_params = "{\"search_list\":64}";
    r = recall("id");
    search_params = "{\"ef\":128}";
    fprintf(stderr, "id: recall@10 %.3f\n", r);
    ASSERT(r >= 0.95);
    /* a drop while workers build: the jobs are withdrawn and the workers stop their builds */
    load("ie");
    create_index_as("ie", "{\"index_type\":\"DISKANN\",\"max_degree\":96,"
                          "\"search_list_size\":800}");
    double t0 = th_cl_mono();
    while (log_count("x1", "claimed", "/ie/") + log_count("x2", "claimed", "/ie/") == 0 &&
           th_cl_mono() - t0 < 60)
        usleep(20000);
    th_post_ok("/v2/vectordb/collections/drop", "{`collectionName`:`ie`}");
    double t_drop = th_cl_mono();
    int stopped = 0;
    while (stopped == 0 && th_cl_mono() - t_drop < 20) {
        stopped = log_count("x1", "/ie/", "cancel") + log_count("x2", "/ie/", "cancel");
        usleep(50000);
    }
    fprintf(stderr,
            "ie: dropped while building: %d worker build(s) stopped %.2f s after the drop, "
            "%d finished\n",
            stopped, th_cl_mono() - t_drop,
            log_count("x1", "built in", " of ie ") + log_count("x2", "built in", " of ie "));
    ASSERT(stopped >= 1);
    /* the writer's /metrics counts the indexes it published from workers' files */
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base + 1);
    th_resp *mr = th_request("GET", "/metrics", NULL, 0, NULL);
    const char *ml =
        mr && mr->text ? strstr(mr->text, "\nsextant_index_remote_builds_total ") : NULL;
    ASSERT(ml != NULL);
    ASSERT_EQ(strtoll(ml + strlen("\nsextant_index_remote_builds_total "), NULL, 10), 2 * SEGS);
    snprintf(th_base, sizeof th_base, "http://127.0.0.1:%u", base);

    /* 2. kill -9 of a worker that holds a claim */
    load("ib");
    int before = log_count("x1", "claimed", "/ib/");
    create_index("ib");
    t0 = th_cl_mono();
    while (log_count("x1", "claimed", "/ib/") == before && th_cl_mono() - t0 < 60)
        usleep(20000);
    ASSERT(log_count("x1", "claimed", "/ib/") > before);
    int x1 = pid_of("x1");
    ASSERT(x1 > 0);
    kill(x1, SIGKILL);
    t = wait_index("ib", 180);
    ASSERT(t >= 0);
    by_worker = log_count("w1", "built by a worker", "of ib segment");
    fprintf(stderr,
            "ib: x1 killed holding a claim; index finished %.2f s after, %d of %d by "
            "workers\n",
            t, by_worker, SEGS);
    ASSERT_EQ(by_worker, SEGS);
    r = recall("ib");
    fprintf(stderr, "ib: recall@10 %.3f\n", r);
    ASSERT(r >= 0.95);

    /* 3. no worker alive: the writer builds */
    t0 = th_cl_mono();
    int x1b = 0;
    while ((x1b = pid_of("x1")) <= 0 && th_cl_mono() - t0 < 30)
        usleep(100000);
    int x2 = pid_of("x2");
    ASSERT(x1b > 0 && x2 > 0);
    kill(x1b, SIGSTOP);
    kill(x2, SIGSTOP);
    sleep(4); /* past the TTL (2 s): their node keys are gone */
    load("ic");
    create_index("ic");
    t = wait_index("ic", 180);
    kill(x1b, SIGCONT);
    kill(x2, SIGCONT);
    ASSERT(t >= 0);
    by_worker = log_count("w1", "built by a worker", "of ic segment");
    fprintf(stderr, "ic: workers stopped; index finished %.2f s after create, %d by workers\n", t,
            by_worker);
    ASSERT_EQ(by_worker, 0);
    r = recall("ic");
    fprintf(stderr, "ic: recall@10 %.3f\n", r);
    ASSERT(r >= 0.95);
    t0 = th_cl_mono();
    while (log_count("supervisor", "x2 pid=", "exited with status 3") == 0 &&
           th_cl_mono() - t0 < 30)
        usleep(100000);
    ASSERT(log_count("supervisor", "x2 pid=", "exited with status 3") >= 1);

    char why[1200];
    if (!th_cl_logs_clean(why, sizeof why))
        FAILF("sanitizer report in a node's log: %s", why);
    th_cl_down();
}

int main(void)
{
    int rc = th_cl_init("cluster_index");
    if (rc != 0)
        return rc;
    vecs = malloc(sizeof(float) * (size_t)ROWS * DIM);
    for (int i = 0; i < ROWS; i++)
        vec_of(i, vecs + (size_t)i * DIM);
    RUN(test_index_workers);
    th_cl_down();
    free(vecs);
    return TEST_DONE();
}
