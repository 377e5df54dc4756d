/*
 * fuzz_rest_json.c: libFuzzer harness for the REST server's JSON request path: the real route
 * handlers (src/server/server.h) called directly, as http.c calls them, without HTTP.
 *
 * Input byte 0 picks the route (fuzz_rest_common.h: index into the collections, indexes, admin
 * and entities tables, modulo their size); the rest is the request body. It goes through what
 * http.c does before a handler: empty body refused, the same JSON depth pre-scan (a copy of
 * http.c's static json_depth_scan, limit 64 = the server default), json_loadb with
 * JSON_DECODE_ANY, non-objects refused, dbName picked from the body; then the handler runs and
 * the response is serialized (json_dumps) and freed.
 *
 * State: one catalog per process in a scratch directory (LLVMFuzzerInitialize), holding two
 * fixture collections made through the handlers themselves: "quick" (quick setup, dim 4, AUTOINDEX,
 * dynamic fields, a few rows) and "typed" (VarChar primary key, Int32 / Double / Bool / JSON
 * fields, HNSW COSINE index, partition p1, one sealed segment with its index, growing rows).
 * After every write route the harness restores the fixtures so inputs stay independent enough
 * for libFuzzer: databases other than "default" and collections other than the fixtures are
 * dropped, and a fixture that is missing, released, without index or over 2000 rows is dropped and
 * made again. Every route is reachable, including database create/drop and index builds (the
 * fixtures are tiny); responses' codes are not checked (every error is a normal outcome).
 *
 * Resource bounds (issue 13): every input must finish its handler within BOUND_SECONDS of wall
 * time and grow this process's peak RSS (VmHWM, reset through /proc/self/clear_refs before the
 * input) by at most BOUND_RSS_MB; otherwise the harness aborts, which libFuzzer reports as a
 * crash with the input saved. The bounds hold for every route on the fixtures (at most 2000 rows
 * of dim 4) whatever the body asks: limits, nq, output fields, filters, params. The replay test
 * (fuzz_replay_fuzz_rest_json) checks them on the corpus, regress-* inputs included (a search of
 * nq 64 x limit 16384, limit 2^63-1 with an offset, a LIKE of a 3,000-character pattern).
 */
#include <time.h>

#include "../harness/procstat.h"
#include "fuzz_common.h"
#include "fuzz_rest_common.h"
#include "util/err.h"

#define JSON_DEPTH    64
#define ROW_CAP       2000
#define BOUND_SECONDS 5.0
#define BOUND_RSS_MB  256

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static sx__catalog *g_cat;
static sx_server_options g_opts;

static const char k_quick[] = "{\"collectionName\":\"quick\",\"dimension\":4}";
static const char k_typed[] =
    "{\"collectionName\":\"typed\",\"schema\":{\"autoID\":false,\"enableDynamicField\":true,"
    "\"fields\":[{\"fieldName\":\"pk\",\"dataType\":\"VarChar\",\"isPrimary\":true,"
    "\"elementTypeParams\":{\"max_length\":32}},"
    "{\"fieldName\":\"v\",\"dataType\":\"FloatVector\",\"elementTypeParams\":{\"dim\":\"4\"}},"
    "{\"fieldName\":\"age\",\"dataType\":\"Int32\"},{\"fieldName\":\"score\",\"dataType\":"
    "\"Double\"},"
    "{\"fieldName\":\"ok\",\"dataType\":\"Bool\"},{\"fieldName\":\"doc\",\"dataType\":\"JSON\"}]},"
    "\"indexParams\":[{\"fieldName\":\"v\",\"indexName\":\"v_idx\",\"metricType\":\"COSINE\","
    "\"indexType\":\"HNSW\",\"params\":{\"M\":8,\"efConstruction\":32}}]}";
static const char k_quick_rows[] =
    "{\"collectionName\":\"quick\",\"data\":["
    "{\"id\":1,\"vector\":[0.1,0.2,0.3,0.4],\"color\":\"red\"},"
    "{\"id\":2,\"vector\":[0.5,0.1,0.0,-0.4],\"color\":\"blue\",\"n\":7},"
    "{\"id\":3,\"vector\":[1,1,1,1],\"tags\":[\"a\",\"b\"]},"
    "{\"id\":-9223372036854775808,\"vector\":[-1,0,0,0]}]}";
static const char k_typed_rows1[] =
    "{\"collectionName\":\"typed\",\"data\":["
    "{\"pk\":\"a\",\"v\":[0.1,0.2,0.3,0.4],\"age\":30,\"score\":1.5,\"ok\":true,\"doc\":{\"x\":1}},"
    "{\"pk\":\"b\",\"v\":[0.4,0.3,0.2,0.1],\"age\":-2,\"score\":-0.0,\"ok\":false,\"doc\":[1,2]},"
    "{\"pk\":\"c\",\"v\":[1,0,0,0],\"age\":2147483647,\"score\":1e300,\"ok\":true,\"doc\":null,"
    "\"extra\":\"dyn\"}]}";
static const char k_typed_rows2[] =
    "{\"collectionName\":\"typed\",\"partitionName\":\"p1\",\"data\":["
    "{\"pk\":\"d\",\"v\":[0,1,0,0],\"age\":5,\"score\":2,\"ok\":false,\"doc\":\"s\"}]}";

/* Returns the maximum nesting depth of the JSON text, stopping early past `limit` (a copy of
 * http.c's json_depth_scan, which is static there). */
static size_t json_depth_scan(const char *p, size_t len, size_t limit)
{
    size_t depth = 0, max = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < len; i++) {
        char ch = p[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max) {
                max = depth;
                if (max > limit)
                    return max;
            }
        } else if ((ch == ']' || ch == '}') && depth > 0) {
            depth--;
        }
    }
    return max;
}

/* Runs one request the way http.c's answer_route does. Returns the response code (or -1). */
static int call_route(const sx__route *rt, const char *body_text, size_t len)
{
    if (len == 0 || json_depth_scan(body_text, len, JSON_DEPTH) > JSON_DEPTH)
        return -1;
    json_error_t jerr;
    json_t *body = json_loadb(body_text, len, JSON_DECODE_ANY, &jerr);
    if (!body || !json_is_object(body)) {
        json_decref(body);
        return -1;
    }
    sx__req rq;
    memset(&rq, 0, sizeof rq);
    rq.cat = g_cat;
    rq.opts = &g_opts;
    rq.body = body;
    rq.db_name = "default";
    json_t *dbv = sx__jget(body, "dbName");
    if (json_is_string(dbv) && json_string_length(dbv) > 0)
        rq.db_name = json_string_value(dbv);
    rq.int64_as_string = len & 1; /* both encodings, chosen by a bit the fuzzer controls */
    rq.timeout_s = 30;
    sx__resp rs = { 200, NULL, NULL, 0 };
    rt->fn(&rq, &rs);
    rs.body = sx__resp_json(&rs);
    if (!rs.body)
        sx__ok(&rs, NULL);
    int code = -1;
    if (rs.body) {
        json_t *cv = json_object_get(rs.body, "code");
        if (json_is_integer(cv))
            code = (int)json_integer_value(cv);
        char *text = json_dumps(rs.body, JSON_COMPACT);
        free(text);
    }
    json_decref(rs.body);
    json_decref(body);
    return code;
}

static int call_path(const char *suffix, const char *body)
{
    int i = fz_route_index(suffix);
    if (i < 0) {
        fprintf(stderr, "fuzz_rest_json: no route %s\n", suffix);
        return -1;
    }
    return call_route(fz_routes[i], body, strlen(body));
}

static void make_quick(void)
{
    call_path("collections/create", k_quick);
    call_path("entities/insert", k_quick_rows);
}

static void make_typed(void)
{
    call_path("collections/create", k_typed);
    call_path("partitions/create", "{\"collectionName\":\"typed\",\"partitionName\":\"p1\"}");
    call_path("entities/insert", k_typed_rows1);
    call_path("collections/flush", "{\"collectionName\":\"typed\"}");
    call_path("entities/insert", k_typed_rows2);
    call_path("collections/load", "{\"collectionName\":\"typed\"}");
}

/* True when the fixture exists, is loaded, has its index and at most ROW_CAP rows. */
static bool fixture_ok(const char *name)
{
    sx_collection *h = NULL;
    sx__coll_meta *meta = malloc(sizeof *meta);
    if (!meta)
        return true;
    bool ok = false;
    if (sx__cat_coll_get(g_cat, "default", name, &h, meta) == SX_OK) {
        sx_collection_info info;
        ok = meta->loaded && meta->n_vecs && meta->vecs[0].index_name[0] &&
             !meta->vecs[0].metric_pending && sx_collection_describe(h, &info) == SX_OK &&
             info.n_rows <= ROW_CAP;
        sx_collection_release(h);
    }
    free(meta);
    return ok;
}

static void restore_fixtures(void)
{
    char **names = NULL;
    size_t n = 0;
    if (sx__cat_db_list(g_cat, &names, &n) == SX_OK) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], "default") != 0)
                sx__ignore(sx__cat_db_drop(g_cat, names[i]));
        sx_strings_free(names, n);
    }
    names = NULL;
    n = 0;
    if (sx__cat_coll_list(g_cat, "default", &names, &n) == SX_OK) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], "quick") != 0 && strcmp(names[i], "typed") != 0)
                sx__ignore(sx__cat_coll_drop(g_cat, "default", names[i]));
        sx_strings_free(names, n);
    }
    if (!fixture_ok("quick")) {
        sx__ignore(sx__cat_coll_drop(g_cat, "default", "quick"));
        make_quick();
    }
    if (!fixture_ok("typed")) {
        sx__ignore(sx__cat_coll_drop(g_cat, "default", "typed"));
        make_typed();
    }
}

static void cat_close(void)
{
    if (g_cat)
        sx__ignore(sx__cat_close(g_cat));
    g_cat = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = fz_tmpdir("rest");
    fz_routes_init();
    g_opts.data_dir = tmp;
    g_opts.quiet = true;
    g_opts.max_json_depth = JSON_DEPTH;
    g_opts.db.sync_mode = SX_SYNC_NONE;
    g_opts.db.build_threads = 1;
    g_opts.db.search_threads = 1;
    if (sx__cat_open(tmp, &g_opts.db, &g_cat) != SX_OK) {
        fprintf(stderr, "fuzz_rest_json: catalog: %s\n", sx_errmsg());
        exit(2);
    }
    atexit(cat_close); /* registered after fz_tmpdir's cleanup: runs before it */
    restore_fixtures();
    if (!fixture_ok("quick") || !fixture_ok("typed")) {
        fprintf(stderr, "fuzz_rest_json: fixtures could not be made\n");
        exit(2);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || fz_n_routes == 0)
        return 0;
    const sx__route *rt = fz_routes[data[0] % fz_n_routes];
    bool hwm = test_reset_hwm();
    uint64_t rss0 = test_vm_kb("VmRSS");
    double t0 = mono_s();
    call_route(rt, (const char *)data + 1, size - 1);
    double secs = mono_s() - t0;
    uint64_t peak = hwm ? test_vm_kb("VmHWM") : 0;
    uint64_t grew_mb = peak > rss0 ? (peak - rss0) >> 10 : 0;
    if (secs > BOUND_SECONDS || grew_mb > BOUND_RSS_MB) {
        fprintf(stderr,
                "fuzz_rest_json: %s took %.2f s and grew the peak RSS by %llu MB (bounds: "
                "%.0f s, %d MB)\n",
                rt->path, secs, (unsigned long long)grew_mb, BOUND_SECONDS, BOUND_RSS_MB);
        abort();
    }
    if (rt->is_write)
        restore_fixtures();
    return 0;
}
