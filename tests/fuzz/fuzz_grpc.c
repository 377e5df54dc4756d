/*
 * fuzz_grpc.c: libFuzzer harness for the gRPC message path: the nesting pre-scan, protobuf-c's
 * unpacking and every MilvusService RPC of grpc_milvus.c (sx__grpc_milvus, as a transport worker
 * calls it), down through sx__server_call into the REST handlers and the engine.
 *
 * Input byte 0 picks the RPC: its index among the methods of milvus.proto.milvus.MilvusService
 * in proto/milvus.proto (declaration order, modulo their number); the rest is the request
 * message. Bit 7 of byte 0 makes the call read-only (as a read-only user's).
 *
 * State: one in-process server (sx_server_start on a scratch directory, an ephemeral loopback
 * port that nothing connects to) with one fixture collection "quick" (dim 4, COSINE AUTOINDEX,
 * dynamic fields, a few rows) made through the REST routes. After every input the harness
 * restores it: databases other than "default" and other collections are dropped, and a fixture
 * that is missing, released or over 2000 rows is made again. Bounds as fuzz_rest_json: an input
 * must finish within BOUND_SECONDS and grow the peak RSS by at most BOUND_RSS_MB.
 */
#include <time.h>

#include "../harness/procstat.h"
#include "fuzz_common.h"
#include "milvus.pb-c.h"
#include "server/server.h"
#include "util/err.h"

#define BOUND_SECONDS 5.0
#define BOUND_RSS_MB  256
#define ROW_CAP       2000

static sx_server *g_srv;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rest(const char *route, const char *body)
{
    json_error_t e;
    json_t *b = json_loads(body, 0, &e);
    json_t *a = b ? sx__server_call(g_srv, route, b, "default", false, 10, "fuzz") : NULL;
    json_decref(a);
    json_decref(b);
}

static void make_quick(void)
{
    rest("/v2/vectordb/collections/create", "{\"collectionName\":\"quick\",\"dimension\":4}");
    rest("/v2/vectordb/entities/insert",
         "{\"collectionName\":\"quick\",\"data\":["
         "{\"id\":1,\"vector\":[0.1,0.2,0.3,0.4],\"color\":\"red\"},"
         "{\"id\":2,\"vector\":[0.5,0.1,0.0,-0.4],\"color\":\"blue\",\"n\":7},"
         "{\"id\":3,\"vector\":[1,1,1,1]}]}");
}

static bool quick_ok(void)
{
    sx__coll_meta m;
    sx_collection *h = NULL;
    if (sx__cat_coll_get(sx__server_catalog(g_srv), "default", "quick", &h, &m) != SX_OK)
        return false;
    sx_collection_info st;
    bool ok = m.loaded && m.n_vecs && m.vecs[0].index_name[0] &&
              sx_collection_describe(h, &st) == SX_OK && st.n_rows <= ROW_CAP;
    sx_collection_release(h);
    return ok;
}

static void restore(void)
{
    sx__catalog *cat = sx__server_catalog(g_srv);
    char **names = NULL;
    size_t n = 0;
    if (sx__cat_db_list(cat, &names, &n) == SX_OK) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], "default") != 0)
                sx__ignore(sx__cat_db_drop(cat, names[i]));
        sx_strings_free(names, n);
    }
    names = NULL;
    n = 0;
    if (sx__cat_coll_list(cat, "default", &names, &n) == SX_OK) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], "quick") != 0)
                sx__ignore(sx__cat_coll_drop(cat, "default", names[i]));
        sx_strings_free(names, n);
    }
    if (!quick_ok()) {
        sx__ignore(sx__cat_coll_drop(cat, "default", "quick"));
        make_quick();
    }
}

static void stop_server(void)
{
    if (g_srv)
        sx__ignore(sx_server_stop(g_srv));
    g_srv = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = fz_tmpdir("grpc");
    sx_server_options o;
    memset(&o, 0, sizeof o);
    o.data_dir = tmp;
    o.quiet = true;
    o.http_threads = 2;
    o.db.sync_mode = SX_SYNC_NONE;
    o.db.build_threads = 1;
    o.db.search_threads = 1;
    if (sx_server_start(&o, &g_srv) != SX_OK) {
        fprintf(stderr, "fuzz_grpc: server: %s\n", sx_errmsg());
        exit(2);
    }
    atexit(stop_server); /* registered after fz_tmpdir's cleanup: runs before it */
    restore();
    if (!quick_ok()) {
        fprintf(stderr, "fuzz_grpc: the fixture could not be made\n");
        exit(2);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ProtobufCServiceDescriptor *svc = &sx_pb__milvus_service__descriptor;
    if (size == 0 || svc->n_methods == 0)
        return 0;
    const char *method = svc->methods[(data[0] & 0x7f) % svc->n_methods].name;
    sx__grpc_call call = { method, data + 1, size - 1, "default", (data[0] & 0x80) != 0, 10 };
    sx__grpc_reply reply;
    memset(&reply, 0, sizeof reply);
    bool hwm = test_reset_hwm();
    uint64_t rss0 = test_vm_kb("VmRSS");
    double t0 = mono_s();
    sx__grpc_milvus(sx__server_svc(g_srv), &call, &reply);
    double secs = mono_s() - t0;
    uint64_t peak = hwm ? test_vm_kb("VmHWM") : 0;
    uint64_t grew_mb = peak > rss0 ? (peak - rss0) >> 10 : 0;
    if (reply.grpc_status == 0 && !reply.body)
        abort(); /* an OK answer always has a message */
    free(reply.body);
    if (secs > BOUND_SECONDS || grew_mb > BOUND_RSS_MB) {
        fprintf(stderr, "fuzz_grpc: %s took %.2f s and grew the peak RSS by %llu MB\n", method,
                secs, (unsigned long long)grew_mb);
        abort();
    }
    restore();
    return 0;
}
