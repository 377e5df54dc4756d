/*
 * test_bench_remote.c: `sextant bench --target` (tools/sextant/bench_remote.c) end to end against
 * an in-process REST server.
 *
 * Setup over HTTP only (as any client would): a custom-schema collection (id Int64 PK, vector
 * FloatVector dim 128), BIGANN-10k base vectors ($SX_SHARED_DATA/bigann10k, or 2000 seeded random
 * vectors when the data is absent) inserted with explicit ids 0..n-1, an HNSW index, load, and a
 * poll of get_load_state until LoadStateLoaded. The test writes 100 queries (.fvecs) and their
 * exact top-10 ground truth (.ivecs, computed here in double) and runs the CLI binary
 * ($SX_SEXTANT_BIN) at concurrency 1 and 4 for 2 s each with 1 s report intervals.
 *
 * Asserts: exit status 0; out.json has two levels (concurrency 1 and 4) each with requests > 0,
 * failures 0, qps > 0, p99 >= p95 >= p50 > 0, min <= avg <= max, recall@10 >= 0.9; the
 * VectorDBBench lists match the levels; stdout carries the Go-benchmark header and per level at
 * least one periodic row plus the final row, in the exact column layout, with 0 failures and
 * non-decreasing request counts. Also: an unreachable target and a missing collection exit 1
 * with a clear message before any level runs.
 */
#include <stdarg.h>
#include <sys/wait.h>

#include "data.h"
#include "harness.h"
#include "http.h"

#define DIM      128
#define NQ       100
#define K        10
#define N_RANDOM 2000

static sx_server *srv;
static float *base;
static size_t n_base;
static float queries[NQ * DIM];
static char dir[512];
static char q_path[600], gt_path[600], json_path[600], out_path[600], err_path[600];

/* ------------------------------------------------------------------ helpers */

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(sbuf *s, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->p ? s->p + s->len : NULL, s->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            abort();
        if (s->p && (size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap ? s->cap * 2 : 1 << 16;
        while (cap < s->len + (size_t)n + 1)
            cap *= 2;
        s->p = realloc(s->p, cap);
        if (!s->p)
            abort();
        s->cap = cap;
    }
}

static int write_vecs(const char *path, const void *data, size_t n, size_t dim)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int32_t d = (int32_t)dim;
    for (size_t i = 0; i < n; i++) {
        if (fwrite(&d, 4, 1, f) != 1 ||
            fwrite((const char *)data + i * dim * 4, 4, dim, f) != dim) {
            fclose(f);
            return -1;
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    sbuf s = { 0 };
    char buf[4096];
    size_t n;
    sb_add(&s, "%s", "");
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sb_add(&s, "%.*s", (int)n, buf);
    fclose(f);
    return s.p;
}

/* Runs the CLI with `args` appended; stdout/stderr to out_path/err_path. Returns the exit code. */
static int run_cli(const char *args)
{
    const char *bin = getenv("SX_SEXTANT_BIN");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' bench %s >'%s' 2>'%s'", bin, args, out_path, err_path);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* ------------------------------------------------------------------ setup */

static void setup_data(void)
{
    size_t d = 0, nq = 0;
    const char *p = test_data("bigann10k/bigann10k_base.bvecs");
    base = p ? test_read_texmex(p, 1, &n_base, &d) : NULL;
    float *q = NULL;
    if (base && d == DIM) {
        p = test_data("bigann10k/bigann10k_query.bvecs");
        q = p ? test_read_texmex(p, 1, &nq, &d) : NULL;
    }
    if (base && q && d == DIM && nq >= NQ) {
        memcpy(queries, q, sizeof queries);
        fprintf(stderr, "data: BIGANN-10k (%zu base vectors)\n", n_base);
    } else {
        free(base);
        n_base = N_RANDOM;
        base = malloc(n_base * DIM * sizeof *base);
        uint64_t s = 42;
        for (size_t i = 0; i < n_base * DIM; i++)
            base[i] = test_randf(&s);
        for (size_t i = 0; i < NQ * DIM; i++)
            queries[i] = test_randf(&s);
        fprintf(stderr, "data: BIGANN-10k absent, %zu random vectors\n", n_base);
    }
    free(q);

    /* exact top-K in double, ties broken by id */
    int32_t *gt = malloc(NQ * K * sizeof *gt);
    double *dist = malloc(n_base * sizeof *dist);
    for (size_t qi = 0; qi < NQ; qi++) {
        for (size_t i = 0; i < n_base; i++)
            dist[i] = test_dist_d(queries + qi * DIM, base + i * DIM, DIM, SX_METRIC_L2);
        for (size_t k = 0; k < K; k++) {
            size_t best = SIZE_MAX;
            for (size_t i = 0; i < n_base; i++) {
                if (dist[i] >= 0 && (best == SIZE_MAX || dist[i] < dist[best]))
                    best = i;
            }
            gt[qi * K + k] = (int32_t)best;
            dist[best] = -1; /* taken */
        }
    }
    free(dist);
    if (write_vecs(q_path, queries, NQ, DIM) != 0 || write_vecs(gt_path, gt, NQ, K) != 0) {
        fprintf(stderr, "cannot write the query / ground-truth files\n");
        exit(2);
    }
    free(gt);
}

static void test_setup_collection(void)
{
    th_post("/v2/vectordb/collections/create",
            "{\"collectionName\":\"c\",\"schema\":{\"autoID\":false,\"enableDynamicField\":false,"
            "\"fields\":[{\"fieldName\":\"id\",\"dataType\":\"Int64\",\"isPrimary\":true},"
            "{\"fieldName\":\"vector\",\"dataType\":\"FloatVector\",\"elementTypeParams\":"
            "{\"dim\":128}}]}}",
            NULL);
    ASSERT_EQ(th_last.status, 200);
    ASSERT_EQ(th_code(), 0);

    const size_t batch = 1000;
    for (size_t first = 0; first < n_base; first += batch) {
        size_t end = first + batch < n_base ? first + batch : n_base;
        sbuf s = { 0 };
        sb_add(&s, "{\"collectionName\":\"c\",\"data\":[");
        for (size_t i = first; i < end; i++) {
            sb_add(&s, "%s{\"id\":%zu,\"vector\":[", i > first ? "," : "", i);
            for (size_t j = 0; j < DIM; j++)
                sb_add(&s, "%s%.9g", j ? "," : "", (double)base[i * DIM + j]);
            sb_add(&s, "]}");
        }
        sb_add(&s, "]}");
        th_post("/v2/vectordb/entities/insert", s.p, NULL);
        free(s.p);
        ASSERT_EQ(th_last.status, 200);
        ASSERT_EQ(th_code(), 0);
        json_t *cnt = json_object_get(json_object_get(th_last.json, "data"), "insertCount");
        ASSERT_EQ(json_integer_value(cnt), end - first);
    }

    th_post("/v2/vectordb/indexes/create",
            "{\"collectionName\":\"c\",\"indexParams\":[{\"fieldName\":\"vector\","
            "\"indexName\":\"vector_idx\",\"metricType\":\"L2\",\"params\":{\"index_type\":"
            "\"HNSW\",\"M\":16,\"efConstruction\":200}}]}",
            NULL);
    ASSERT_EQ(th_code(), 0);
    th_post("/v2/vectordb/collections/load", "{\"collectionName\":\"c\"}", NULL);
    ASSERT_EQ(th_code(), 0);
    const char *state = NULL;
    for (int i = 0; i < 1200; i++) {
        th_post("/v2/vectordb/collections/get_load_state", "{\"collectionName\":\"c\"}", NULL);
        ASSERT_EQ(th_code(), 0);
        state =
            json_string_value(json_object_get(json_object_get(th_last.json, "data"), "loadState"));
        if (state && strcmp(state, "LoadStateLoaded") == 0)
            break;
        usleep(100000);
    }
    ASSERT(state && strcmp(state, "LoadStateLoaded") == 0);
    th_post("/v2/vectordb/collections/get_stats", "{\"collectionName\":\"c\"}", NULL);
    ASSERT_EQ(th_code(), 0);
    ASSERT_EQ(
        json_integer_value(json_object_get(json_object_get(th_last.json, "data"), "rowCount")),
        n_base);
}

/* ------------------------------------------------------------------ the benchmark run */

static json_t *level(json_t *root, size_t i)
{
    return json_array_get(json_object_get(root, "levels"), i);
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    ASSERT(json_is_number(v));
    return json_number_value(v);
}

static void test_bench_levels(void)
{
    char args[3000];
    snprintf(args, sizeof args,
             "--target %s --collection c --query '%s' --gt '%s' --concurrency 1,4 --duration 2 "
             "--interval 1 --search-params '{\"ef\":64}' --json '%s'",
             th_base, q_path, gt_path, json_path);
    int rc = run_cli(args);
    char *out = slurp(out_path), *err = slurp(err_path);
    fprintf(stderr, "--- bench stdout ---\n%s--- bench stderr ---\n%s---\n", out ? out : "",
            err ? err : "");
    ASSERT_EQ(rc, 0);
    ASSERT(out != NULL);

    /* JSON */
    json_error_t je;
    json_t *root = json_load_file(json_path, 0, &je);
    ASSERT(root != NULL);
    ASSERT_EQ(json_array_size(json_object_get(root, "levels")), 2);
    ASSERT_EQ(num(root, "limit"), K);
    ASSERT_EQ(num(root, "nq"), 1);
    ASSERT(strcmp(json_string_value(json_object_get(root, "collection")), "c") == 0);
    const int conc[2] = { 1, 4 };
    for (size_t i = 0; i < 2; i++) {
        json_t *l = level(root, i);
        json_t *lat = json_object_get(l, "latency_ms");
        ASSERT_EQ(num(l, "concurrency"), conc[i]);
        ASSERT(num(l, "requests") > 0);
        ASSERT_EQ(num(l, "failures"), 0);
        ASSERT(num(l, "qps") > 0);
        /* qps is requests / elapsed, elapsed about --duration */
        ASSERT_NEAR(num(l, "qps") * num(l, "elapsed_s"), num(l, "requests"),
                    1e-6 * num(l, "requests") + 1e-6);
        ASSERT(num(l, "elapsed_s") >= 2.0 && num(l, "elapsed_s") < 10.0);
        ASSERT(num(lat, "p50") > 0);
        ASSERT(num(lat, "p95") >= num(lat, "p50"));
        ASSERT(num(lat, "p99") >= num(lat, "p95"));
        ASSERT(num(lat, "max") >= num(lat, "p99"));
        ASSERT(num(lat, "min") <= num(lat, "avg") && num(lat, "avg") <= num(lat, "max"));
        double recall = num(l, "recall");
        fprintf(stderr, "level %zu: recall %.4f qps %.1f\n", i, recall, num(l, "qps"));
        ASSERT(recall >= 0.9 && recall <= 1.0);
        json_t *cn = json_object_get(root, "conc_num_list");
        ASSERT_EQ(json_integer_value(json_array_get(cn, i)), conc[i]);
        ASSERT_NEAR(json_number_value(json_array_get(json_object_get(root, "conc_qps_list"), i)),
                    num(l, "qps"), 1e-9);
        ASSERT_NEAR(
            json_number_value(json_array_get(json_object_get(root, "conc_latency_p99_list"), i)),
            num(lat, "p99") / 1000.0, 1e-12);
        ASSERT_NEAR(
            json_number_value(json_array_get(json_object_get(root, "conc_latency_avg_list"), i)),
            num(lat, "avg") / 1000.0, 1e-12);
    }
    json_decref(root);

    /* stdout: Go-benchmark layout */
    static const char header[] = "Name      #   reqs      # fails  |       Avg       Min       "
                                 "Max    Median  |     req/s  failures/s";
    int headers = 0, rows = 0, finished = 0;
    unsigned long long last_reqs = 0;
    int cur_level = -1;
    for (char *line = out, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strstr(line, "concurrency 1:") || strstr(line, "concurrency 4:")) {
            cur_level++;
            last_reqs = 0;
        }
        const char *h = strstr(line, "] Name ");
        if (h) {
            ASSERT(line[0] == '[');
            ASSERT(strcmp(h + 2, header) == 0);
            headers++;
        }
        const char *r = strstr(line, "] search  "); /* a row, not "search run finished" */
        if (r) {
            r += 2;
            unsigned long long reqs, fails;
            double pct, avg, mn, mx, med, rps, fps;
            ASSERT(strlen(r) == strlen(header));
            ASSERT(sscanf(r, "search %llu %llu(%lf%%) | %lf %lf %lf %lf | %lf %lf", &reqs, &fails,
                          &pct, &avg, &mn, &mx, &med, &rps, &fps) == 9);
            ASSERT(reqs > 0 && reqs >= last_reqs);
            ASSERT_EQ(fails, 0);
            ASSERT(mn <= avg && avg <= mx && mn <= med && med <= mx && mn > 0);
            ASSERT(rps > 0 && fps == 0);
            last_reqs = reqs;
            rows++;
        }
        if (strstr(line, "search run finished, concurrency:")) {
            ASSERT(strstr(line, "recall@10") != NULL);
            finished++;
        }
    }
    ASSERT_EQ(cur_level, 1);
    ASSERT_EQ(finished, 2);
    ASSERT(headers == rows);
    ASSERT(rows >= 4); /* per level >= 1 periodic line + the final one */
    free(out);
    free(err);
}

/* --target grpc://: the same load as gRPC Search calls on the same port (HTTP/2 through
 * libcurl, one connection per client thread reused for every request): no failures, recall
 * against the ground truth, many requests per connection. */
static void test_bench_grpc(void)
{
    char args[3000];
    ASSERT(strncmp(th_base, "http://", 7) == 0);
    snprintf(args, sizeof args,
             "--target grpc://%s --collection c --query '%s' --gt '%s' --concurrency 1,4 "
             "--duration 2 --interval 1 --search-params '{\"ef\":64}' --json '%s'",
             th_base + 7, q_path, gt_path, json_path);
    int rc = run_cli(args);
    char *out = slurp(out_path), *err = slurp(err_path);
    fprintf(stderr, "--- bench grpc stdout ---\n%s--- stderr ---\n%s---\n", out ? out : "",
            err ? err : "");
    ASSERT_EQ(rc, 0);
    ASSERT(out && strstr(out, "/milvus.proto.milvus.MilvusService/Search"));
    json_error_t je;
    json_t *root = json_load_file(json_path, 0, &je);
    ASSERT(root != NULL);
    ASSERT_EQ(json_array_size(json_object_get(root, "levels")), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *l = level(root, i);
        ASSERT(num(l, "requests") > 20); /* a reused connection, not one call each */
        ASSERT_EQ(num(l, "failures"), 0);
        double recall = num(l, "recall");
        fprintf(stderr, "grpc level %zu: recall %.4f qps %.1f\n", i, recall, num(l, "qps"));
        ASSERT(recall >= 0.9 && recall <= 1.0);
    }
    json_decref(root);
    /* a collection that does not exist: the probe's Status error, exit 1 */
    snprintf(args, sizeof args, "--target grpc://%s --collection nope --query '%s' --duration 1",
             th_base + 7, q_path);
    ASSERT_EQ(run_cli(args), 1);
    char *e2 = slurp(err_path);
    ASSERT(e2 && strstr(e2, "code 100"));
    free(e2);
    free(out);
    free(err);
}

static void test_bench_setup_errors(void)
{
    char args[3000];
    snprintf(args, sizeof args,
             "--target http://127.0.0.1:1 --collection c --query '%s' --duration 1", q_path);
    ASSERT_EQ(run_cli(args), 1);
    char *err = slurp(err_path);
    ASSERT(err && strstr(err, "cannot reach http://127.0.0.1:1") != NULL);
    free(err);

    snprintf(args, sizeof args, "--target %s --collection nope --query '%s' --duration 1", th_base,
             q_path);
    ASSERT_EQ(run_cli(args), 1);
    err = slurp(err_path);
    ASSERT(err && strstr(err, "probe search on collection 'nope'") != NULL);
    ASSERT(strstr(err, "code 100") != NULL);
    free(err);
    char *out = slurp(out_path);
    ASSERT(out && strstr(out, "] Name ") == NULL);
    free(out);

    snprintf(args, sizeof args, "--target %s --collection c --query '%s' --concurrency 0", th_base,
             q_path);
    ASSERT_EQ(run_cli(args), 2);
    /* --consistency: a level Milvus does not have is a usage error; one it has is sent and
     * accepted (the single server answers every level from the same data) */
    snprintf(args, sizeof args, "--target %s --collection c --query '%s' --consistency Weak",
             th_base, q_path);
    ASSERT_EQ(run_cli(args), 2);
    err = slurp(err_path);
    ASSERT(err && strstr(err, "--consistency 'Weak'") != NULL);
    free(err);
    for (int g = 0; g < 2; g++) {
        snprintf(args, sizeof args,
                 "--target %s%s --collection c --query '%s' --consistency Eventually "
                 "--concurrency 1 --duration 1 --interval 1 --json '%s'",
                 g ? "grpc://" : "", g ? th_base + 7 : th_base, q_path, json_path);
        ASSERT_EQ(run_cli(args), 0);
        json_error_t je;
        json_t *root = json_load_file(json_path, 0, &je);
        ASSERT(root != NULL);
        ASSERT(num(level(root, 0), "requests") > 0);
        ASSERT_EQ(num(level(root, 0), "failures"), 0);
        json_decref(root);
    }
}

int main(void)
{
    const char *bin = getenv("SX_SEXTANT_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "SX_SEXTANT_BIN not set or not executable: skipped\n");
        return 77;
    }
    snprintf(dir, sizeof dir, "%s", test_tmpdir("bench_remote"));
    snprintf(q_path, sizeof q_path, "%s/q.fvecs", dir);
    snprintf(gt_path, sizeof gt_path, "%s/gt.ivecs", dir);
    snprintf(json_path, sizeof json_path, "%s/out.json", dir);
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
    char data_dir[600];
    snprintf(data_dir, sizeof data_dir, "%s/db", dir);
    setup_data();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    srv = th_server_start(data_dir, NULL);
    if (!srv)
        return 1;
    RUN(test_setup_collection);
    if (h_fail == 0) {
        RUN(test_bench_levels);
        RUN(test_bench_grpc);
        RUN(test_bench_setup_errors);
    }
    sx_status st = sx_server_stop(srv);
    if (st != SX_OK) {
        fprintf(stderr, "sx_server_stop: %s: %s\n", sx_status_str(st), sx_errmsg());
        h_fail++;
    }
    th_reset();
    curl_global_cleanup();
    free(base);
    return TEST_DONE();
}
