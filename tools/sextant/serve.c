/*
 * serve.c: the `sextant serve` subcommand: runs the Milvus RESTful API v2 server
 * (sextant_server.h) on a data directory until SIGTERM or SIGINT.
 *
 * Signals. SIGTERM and SIGINT get a handler that only posts a semaphore (sem_post is
 * async-signal-safe); the main thread waits on it and then runs the graceful stop (finish
 * in-flight requests, flush every collection, close). Why not block the signals and sigwait():
 * threads that exist before main() (OpenBLAS starts its pool from a library constructor) do not
 * inherit a mask set in main, and a default-action SIGINT/SIGTERM delivered to one of them
 * killed the process instead of stopping it (seen under load: `kill -INT` ended the server by a
 * signal). With a handler installed the disposition is process-wide, so whichever thread takes
 * the signal, the stop runs on the main thread. Exit status: 0 after a clean stop, 1 if
 * starting or stopping failed, 2 on usage errors.
 *
 * The token may come from the environment (SEXTANT_AUTH_TOKEN) so it does not show in `ps`.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sextant_server.h"

static sem_t stop_sem;
static atomic_int stop_signal;
static atomic_bool fenced;

/* query nodes: sx_server_refresh every refresh_ms until stopped; writers with --sync-ms:
 * sx_server_sync every sync_ms */
typedef struct refresher {
    sx_server *srv;
    sx_cluster_node *node; /* cluster mode: a query node follows new databases and reports its
                              freshness, a writer publishes its synced time */
    uint64_t every_ms;
    bool quiet;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool sync; /* a writer's timed flush instead */
} refresher;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One timed flush (a writer's --sync-ms); a failure is logged once until it changes. */
static void sync_round(refresher *r, char *last, size_t cap)
{
    size_t n = 0;
    int64_t t0 = wall_ms(); /* every row acknowledged before it is committed after the round */
    sx_status st = sx_server_sync(r->srv, &n);
    if (st == SX_OK && r->node)
        st = sx_cluster_node_synced(r->node, t0);
    if (st != SX_OK && strcmp(last, sx_errmsg()) != 0) {
        (void)snprintf(last, cap, "%s", sx_errmsg());
        fprintf(stderr, "sextant: timed flush: %s (retried)\n", last);
    } else if (st == SX_OK) {
        last[0] = '\0';
    }
}

static void *refresh_main(void *arg)
{
    refresher *r = arg;
    char last[512] = "", lastf[512] = "";
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (r->every_ms % 1000) * 1000000u;
        ts.tv_sec += (time_t)(r->every_ms / 1000 + ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        if (r->stop)
            break;
        pthread_mutex_unlock(&r->mu);
        if (r->sync) {
            sync_round(r, last, sizeof last);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        size_t ch = 0;
        char **dbs = NULL;
        size_t n_dbs = 0;
        /* read before the refresh: what the refresh brings is at least that fresh */
        int64_t floor = 0;
        bool have_floor = r->node && sx_cluster_node_fresh_floor(r->node, &floor) == SX_OK;
        sx_status fst = r->node ? sx_cluster_node_databases(r->node, &dbs, &n_dbs) : SX_OK;
        if (fst == SX_OK && n_dbs)
            fst = sx_server_follow_databases(r->srv, (const char *const *)dbs, n_dbs);
        sx_strings_free(dbs, n_dbs);
        if (fst != SX_OK && strcmp(lastf, sx_errmsg()) != 0) {
            (void)snprintf(lastf, sizeof lastf, "%s", sx_errmsg());
            fprintf(stderr, "sextant: following new databases: %s (retried)\n", lastf);
        } else if (fst == SX_OK) {
            lastf[0] = '\0';
        }
        sx_status st = sx_server_refresh(r->srv, &ch); /* whatever the databases' answer */
        if (st != SX_OK && strcmp(last, sx_errmsg()) != 0) {
            (void)snprintf(last, sizeof last, "%s", sx_errmsg());
            fprintf(stderr, "sextant: refresh: %s (retried)\n", last);
        } else if (st == SX_OK) {
            last[0] = '\0';
            if (have_floor && fst == SX_OK) /* every database followed and refreshed */
                sx_server_set_fresh_ms(r->srv, floor);
            if (ch && !r->quiet)
                fprintf(stderr, "sextant: refresh: %zu collection(s) updated\n", ch);
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static bool refresher_start(refresher *r, pthread_t *thr)
{
    if (pthread_create(thr, NULL, refresh_main, r) == 0)
        return true;
    fprintf(stderr, "sextant: cannot start the refresh thread: collections stay as opened\n");
    return false;
}

static void refresher_stop(refresher *r, pthread_t thr)
{
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(thr, NULL);
}

static void on_fenced(void *ud);

/* cluster mode: joins the cluster (identity, lease, node key; a writer reconciles its
 * directory) and points the server's databases at the node's fence */
static sx_status cluster_node_start(const char *etcd,
                                    const char *node_id,
                                    const char *data,
                                    const char *addr,
                                    uint32_t lease_ttl,
                                    bool query,
                                    sx_server_options *o,
                                    sx_cluster_node **out)
{
    sx_cluster_node_options co;
    memset(&co, 0, sizeof co);
    co.etcd = etcd;
    co.node_id = node_id;
    co.data_dir = data;
    co.storage_url = o->db.storage_url;
    co.s3_endpoint = o->db.s3_endpoint;
    co.addr = addr;
    co.lease_ttl_s = lease_ttl;
    co.query_node = query;
    co.on_fenced = on_fenced;
    sx_status st = sx_cluster_node_start(&co, out);
    if (st != SX_OK)
        return st;
    o->db.store_fence = sx_cluster_node_fence(*out);
    o->db.index_builder = sx_cluster_node_index_builder(*out); /* NULL on a query node */
    if (!query) { /* a writer adopts the collections of a writer that is gone */
        o->before_collection = sx_cluster_node_before_collection;
        o->before_collection_ud = *out;
    }
    fprintf(stderr, "sextant: %s %s of cluster %s (etcd %s)\n", query ? "query node" : "writer",
            node_id, sx_cluster_node_uuid(*out), etcd);
    return SX_OK;
}

/* cluster mode: the writer's etcd lease is gone (keep-alive thread) */
static void on_fenced(void *ud)
{
    (void)ud;
    atomic_store(&fenced, true);
    (void)sem_post(&stop_sem);
}

static void on_stop_signal(int sig)
{
    atomic_store(&stop_signal, sig);
    (void)sem_post(&stop_sem);
}

static void serve_usage(FILE *out)
{
    fprintf(
        out,
        "usage: sextant serve --data DIR [options]\n"
        "\n"
        "Serves the Milvus RESTful API v2 (/v2/vectordb/...) and Milvus's gRPC API\n"
        "(milvus.proto.milvus.MilvusService over HTTP/2) on one port, on a data directory,\n"
        "and a web console at /webui/ on the same port (a client of the same API).\n"
        "\n"
        "  --data DIR             database directory (created if missing)\n"
        "  --port N               TCP port (default 19530; 0 = any free port)\n"
        "  --bind ADDR            listen address (default 127.0.0.1; a non-loopback address\n"
        "                         needs --auth-token or --users)\n"
        "  --auth-token TOKEN     require 'Authorization: Bearer TOKEN' (or Basic user:pass\n"
        "                         when TOKEN is user:pass); also from SEXTANT_AUTH_TOKEN\n"
        "  --users FILE           credentials file: lines user:password or user:password:ro\n"
        "  --max-body-mb N        largest request body in MiB (default 64)\n"
        "  --threads N            HTTP worker threads (default max(16, 4 x cores))\n"
        "  --max-connections N    concurrent connections (default 1024); past it, the oldest\n"
        "                         idle one is closed for each new one\n"
        "  --idle-timeout S       disconnect idle or slow clients after S seconds (default 60)\n"
        "  --max-response-mb N    largest search/query/get answer in MiB, estimated before the\n"
        "                         work is done (default 64)\n"
        "  --request-timeout S    deadline of a search/query/get/delete without a\n"
        "                         Request-Timeout header (default 30)\n"
        "  --max-connections-per-ip N\n"
        "                         connections from one client address; past it, its\n"
        "                         oldest idle one is closed (default: half of\n"
        "                         --max-connections)\n"
        "  --header-timeout S     a request's line and headers must arrive within S seconds,\n"
        "                         however slowly they trickle (default 10)\n"
        "  --min-upload-rate N    cut a request body arriving slower than N bytes/s over a\n"
        "                         --header-timeout window (default 1024)\n"
        "  --shutdown-grace S     on SIGTERM, cut uploads still arriving after S seconds\n"
        "                         (default 5)\n"
        "  --max-json-mb N        memory the parsed JSON of one request may take, MiB (256)\n"
        "  --max-json-total-mb N  the same for all requests in flight together, MiB (512)\n"
        "  --no-merge             do not merge concurrent searches into batches\n"
        "  --merge-wait-us N      longest a queued search waits for a free slot (50000)\n"
        "  --merge-max-nq N       query vectors per merged batch (256)\n"
        "  --merge-slots N        searches that run at once before later ones queue and merge\n"
        "                         (default: the number of CPUs)\n"
        "  --import-root DIR      bulk import reads local files under DIR only (default:\n"
        "                         any file the server can read)\n"
        "  --sync full|none       WAL durability (default full; none: tests only)\n"
        "  --build-threads N      threads of an index build (default: every core)\n"
        "  --segment-mb N         seal a collection's growing segment past N MiB of vectors\n"
        "                         (default 256)\n"
        "  --sync-ms N            flush every collection with unsynced writes every N ms\n"
        "                         (needs --storage; a lost machine then loses at most the\n"
        "                         rows acknowledged in the last N ms and one flush)\n"
        "  --auto-merge N         merge small sealed segments in the background once N of\n"
        "                         them exist in a collection (default 3, as Milvus's\n"
        "                         compaction.min.segment; 0: only on compact)\n"
        "  --quiet                no access log\n" CLI_STORAGE_USAGE "\n"
        "Cluster mode (a shard writer; docs/internals/CLUSTER.md):\n"
        "  --etcd URLS            etcd client URLs, comma-separated: the writer holds an etcd\n"
        "                         lease, takes each collection it writes with an epoch key\n"
        "                         and commits its store manifests fenced on that key's\n"
        "                         revision (needs --storage and --node-id)\n"
        "  --node-id ID           this writer's id in the cluster ([A-Za-z0-9_-])\n"
        "  --lease-ttl S          etcd lease TTL in seconds (default 5): writes are\n"
        "                         acknowledged only while the lease is known to be held\n"
        "  --query                a query node instead: the databases open read-only from\n"
        "                         --storage (with --etcd: at the committed manifests) and\n"
        "                         follow the store's newest manifests\n"
        "  --refresh-ms N         how often a query node looks for new manifests (500)\n"
        "  --index-worker         an index worker instead (no server; needs --etcd,\n"
        "                         --node-id, --storage, --data for its scratch files): claims\n"
        "                         the writers' index builds from etcd, reads the segments\n"
        "                         from the store, builds (--build-threads) and uploads the\n"
        "                         index files; writers build themselves while none is alive\n"
        "  --proxy                the cluster's REST front door instead (needs only --etcd\n"
        "                         and --port): writes go to the writer holding the\n"
        "                         collection, reads to it or, with consistencyLevel\n"
        "                         Eventually, to the query nodes; a collection created\n"
        "                         with params.shardsNum > 1 is sharded over the writers\n"
        "\n"
        "Stops gracefully on SIGTERM or SIGINT (in-flight requests finish, data is flushed).\n"
        "Exit status: 0 stopped, 1 failed, 2 usage, 3 fenced (cluster mode: the etcd lease was\n"
        "lost; restart the writer on the same directory to reconcile).\n");
}

/* Waits for SIGTERM/SIGINT (or, in cluster mode, the lease's loss) while a query node's refresher
 * runs, then stops the server and the cluster node. Returns the exit status. */
static int serve_until_stopped(const char *cmd,
                               sx_server *srv,
                               sx_cluster_node *cw,
                               bool query,
                               uint64_t refresh_ms,
                               uint64_t sync_ms,
                               bool quiet,
                               const char *node_id,
                               const char *data)
{
    refresher rf = { srv,
                     cw,
                     query ? refresh_ms : sync_ms,
                     quiet,
                     PTHREAD_MUTEX_INITIALIZER,
                     PTHREAD_COND_INITIALIZER,
                     false,
                     !query };
    pthread_t rthr;
    bool rthr_on = (query || sync_ms) && refresher_start(&rf, &rthr);

    while (sem_wait(&stop_sem) != 0 && errno == EINTR) {
    }
    if (rthr_on)
        refresher_stop(&rf, rthr);
    int sig = atomic_load(&stop_signal);
    bool was_fenced = atomic_load(&fenced);
    if (was_fenced)
        fprintf(stderr,
                "sextant: writer %s: fenced (etcd lease lost): stopping; restart it on "
                "%s to reconcile\n",
                node_id, data);
    else if (!quiet)
        fprintf(stderr, "sextant: %s: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    sx_status st = sx_server_stop(srv);
    if (st != SX_OK) /* rows only this WAL has: no adoption before the TTL */
        sx_cluster_node_keep_lease(cw);
    sx_cluster_node_stop(cw);
    if (was_fenced)
        return 3;
    if (st != SX_OK)
        return cli_sx_fail(cmd, "stop", st);
    if (!quiet)
        fprintf(stderr, "sextant: stopped\n");
    return CLI_EXIT_OK;
}

/* SIGTERM/SIGINT post stop_sem. 0, or -1 (message printed). */
static int install_stop_handlers(const char *cmd)
{
    if (sem_init(&stop_sem, 0, 0) != 0) {
        (void)cli_fail(cmd, "cannot create a semaphore");
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) {
        (void)cli_fail(cmd, "cannot install the signal handlers");
        return -1;
    }
    return 0;
}

/* `serve --proxy`: the cluster's REST front door until SIGTERM/SIGINT */
static int serve_proxy(const char *cmd, const char *etcd, uint16_t port)
{
    if (install_stop_handlers(cmd) != 0)
        return CLI_EXIT_FAIL;
    sx_cluster_proxy_options po;
    memset(&po, 0, sizeof po);
    po.etcd = etcd;
    po.port = port;
    sx_cluster_proxy *px = NULL;
    sx_status st = sx_cluster_proxy_start(&po, &px);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "proxy", st);
    fprintf(stderr, "sextant: cluster proxy on http://127.0.0.1:%u (etcd %s)\n",
            (unsigned)sx_cluster_proxy_port(px), etcd);
    while (sem_wait(&stop_sem) != 0 && errno == EINTR) {
    }
    sx_cluster_proxy_stop(px);
    return CLI_EXIT_OK;
}

/* `serve --index-worker`: claims index build jobs until SIGTERM/SIGINT or the lease's loss.
 * DATA/READY exists while it is registered (`cluster up` waits for it). */
static int serve_index_worker(const char *cmd,
                              const char *etcd,
                              const char *node_id,
                              const char *data,
                              const cli_storage *sto,
                              uint32_t lease_ttl,
                              uint32_t build_threads)
{
    if (!etcd || !node_id || !sto->url)
        return cli_usage_error(cmd, "--index-worker needs --etcd, --node-id and --storage");
    char ready[4096];
    (void)snprintf(ready, sizeof ready, "%s/READY", data);
    (void)unlink(ready);
    if (mkdir(data, 0755) != 0 && errno != EEXIST)
        return cli_fail(cmd, "%s: %s", data, strerror(errno));
    if (install_stop_handlers(cmd) != 0)
        return CLI_EXIT_FAIL;
    sx_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    cli_storage_apply(sto, &dbo);
    sx_cluster_node_options co;
    memset(&co, 0, sizeof co);
    co.etcd = etcd;
    co.node_id = node_id;
    co.data_dir = data;
    co.storage_url = dbo.storage_url;
    co.s3_endpoint = dbo.s3_endpoint;
    co.addr = "-";
    co.lease_ttl_s = lease_ttl;
    co.index_worker = true;
    co.build_threads = build_threads;
    co.on_fenced = on_fenced;
    sx_cluster_node *n = NULL;
    sx_status st = sx_cluster_node_start(&co, &n);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "cluster", st);
    fprintf(stderr, "sextant: index worker %s of cluster %s (etcd %s, %u build threads)\n", node_id,
            sx_cluster_node_uuid(n), etcd, build_threads);
    FILE *f = fopen(ready, "w");
    if (f)
        (void)fclose(f);
    (void)fflush(stderr);
    while (sem_wait(&stop_sem) != 0 && errno == EINTR) {
    }
    (void)unlink(ready);
    bool was_fenced = atomic_load(&fenced);
    sx_cluster_node_stop(n);
    fprintf(stderr, "sextant: index worker %s: %s\n", node_id,
            was_fenced ? "its etcd lease was lost: stopping" : "stopped");
    return was_fenced ? 3 : CLI_EXIT_OK;
}

int cli_serve(int argc, char **argv)
{
    const char *cmd = "serve";
    const char *data = NULL, *bind = NULL, *token = NULL, *users = NULL, *v = NULL;
    const char *import_root = NULL, *etcd = NULL, *node_id = NULL;
    uint64_t lease_ttl = 5, refresh_ms = 500, sync_ms = 0;
    bool query = false, proxy = false, index_worker = false;
    uint64_t segment_mb = 0;
    uint64_t port = 19530, body_mb = 64, threads = 0, max_conn = 0, idle = 0;
    uint64_t merge_wait = 0, merge_nq = 0, merge_slots = 0, resp_mb = 0, req_timeout = 0;
    uint64_t per_ip = 0, header_s = 0, min_rate = 0, grace_s = 0, json_mb = 0, json_total_mb = 0;
    uint64_t auto_merge = 3;
    uint64_t build_threads = 0;
    bool no_merge = false, quiet = false;
    sx_sync_mode sync = SX_SYNC_FULL;
    cli_storage sto = { 0 };

    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            serve_usage(stdout);
            return CLI_EXIT_OK;
        }
        if ((r = cli_take_storage(argc, argv, &i, cmd, &sto)) != 0) {
            if (r < 0)
                return cli_usage_error(cmd, "bad storage option");
            continue;
        }
        if (cli_flag(argv, &i, "--no-merge")) {
            no_merge = true;
            continue;
        }
        if (cli_flag(argv, &i, "--quiet")) {
            quiet = true;
            continue;
        }
        if (cli_flag(argv, &i, "--query")) {
            query = true;
            continue;
        }
        if (cli_flag(argv, &i, "--proxy")) {
            proxy = true;
            continue;
        }
        if (cli_flag(argv, &i, "--index-worker")) {
            index_worker = true;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--data", &data)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--bind", &bind)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--auth-token", &token)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--users", &users)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--import-root", &import_root)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--etcd", &etcd)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--node-id", &node_id)) != 0) {
            if (r < 0)
                return cli_usage_error(cmd, "missing value");
            continue;
        }

        struct {
            const char *name;
            uint64_t lo, hi, *out;
        } nums[] = {
            { "--port", 0, 65535, &port },
            { "--max-body-mb", 1, 1u << 20, &body_mb },
            { "--threads", 1, 1024, &threads },
            { "--max-connections", 1, 1000000, &max_conn },
            { "--idle-timeout", 1, 86400, &idle },
            { "--merge-wait-us", 1, 10000000, &merge_wait },
            { "--merge-max-nq", 1, 1000000, &merge_nq },
            { "--merge-slots", 1, 4096, &merge_slots },
            { "--max-response-mb", 1, 1u << 20, &resp_mb },
            { "--request-timeout", 1, 3600, &req_timeout },
            { "--max-connections-per-ip", 1, 1000000, &per_ip },
            { "--header-timeout", 1, 86400, &header_s },
            { "--min-upload-rate", 1, 1u << 30, &min_rate },
            { "--shutdown-grace", 1, 3600, &grace_s },
            { "--max-json-mb", 1, 1u << 20, &json_mb },
            { "--max-json-total-mb", 1, 1u << 20, &json_total_mb },
            { "--auto-merge", 0, 1000000, &auto_merge },
            { "--build-threads", 1, 1024, &build_threads },
            { "--lease-ttl", 1, 3600, &lease_ttl },
            { "--refresh-ms", 10, 3600000, &refresh_ms },
            { "--segment-mb", 1, 1u << 20, &segment_mb },
            { "--sync-ms", 10, 86400000, &sync_ms },
        };

        bool matched = false;
        for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
            r = cli_take(argc, argv, &i, cmd, nums[k].name, &v);
            if (r == 0)
                continue;
            if (r < 0 ||
                cli_parse_u64(cmd, nums[k].name, v, nums[k].lo, nums[k].hi, nums[k].out) != 0)
                return cli_usage_error(cmd, "bad value for %s", nums[k].name);
            matched = true;
            break;
        }
        if (matched)
            continue;
        if ((r = cli_take(argc, argv, &i, cmd, "--sync", &v)) != 0) {
            if (r < 0)
                return cli_usage_error(cmd, "missing value");
            if (strcmp(v, "full") == 0)
                sync = SX_SYNC_FULL;
            else if (strcmp(v, "none") == 0)
                sync = SX_SYNC_NONE;
            else
                return cli_usage_error(cmd, "--sync: '%s' is not one of full, none", v);
            continue;
        }
        return cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    }
    if (proxy) {
        if (!etcd)
            return cli_usage_error(cmd, "--proxy needs --etcd");
        return serve_proxy(cmd, etcd, (uint16_t)port);
    }
    if (!data)
        return cli_usage_error(cmd, "--data is required");
    if (cli_storage_check(cmd, &sto) != 0)
        return cli_usage_error(cmd, "bad storage option");
    if (index_worker)
        return serve_index_worker(cmd, etcd, node_id, data, &sto, (uint32_t)lease_ttl,
                                  (uint32_t)build_threads);
    if (!proxy && (etcd || node_id) && (!etcd || !node_id || !sto.url))
        return cli_usage_error(cmd, "cluster mode needs --etcd, --node-id and --storage together");
    if (query && !sto.url)
        return cli_usage_error(cmd, "--query needs --storage (the store it reads)");
    if (sync_ms && (!sto.url || query))
        return cli_usage_error(cmd, "--sync-ms needs --storage (it flushes to the store) and a "
                                    "writable server");
    if (!token) {
        const char *env = getenv("SEXTANT_AUTH_TOKEN");
        if (env && *env)
            token = env;
    }

    sx_server_options o;
    memset(&o, 0, sizeof o);
    o.data_dir = data;
    o.bind_addr = bind;
    o.port = (uint16_t)port;
    o.auth_token = token;
    o.users_file = users;
    o.import_root = import_root;
    o.max_body_bytes = body_mb << 20;
    o.http_threads = (uint32_t)threads;
    o.max_connections = (uint32_t)max_conn;
    o.idle_timeout_s = (uint32_t)idle;
    o.max_connections_per_ip = (uint32_t)per_ip;
    o.header_timeout_s = (uint32_t)header_s;
    o.min_upload_bytes_per_s = (uint32_t)min_rate;
    o.shutdown_grace_s = (uint32_t)grace_s;
    o.max_json_bytes = json_mb << 20;
    o.max_json_total_bytes = json_total_mb << 20;
    o.merge_disable = no_merge;
    o.merge_wait_us = (uint32_t)merge_wait;
    o.merge_max_nq = (uint32_t)merge_nq;
    o.merge_slots = (uint32_t)merge_slots;
    o.max_response_bytes = resp_mb << 20;
    o.request_timeout_s = (uint32_t)req_timeout;
    o.db.sync_mode = sync;
    o.db.auto_merge = auto_merge == 1 ? 2 : (uint32_t)auto_merge; /* a run needs two */
    o.db.build_threads = (uint32_t)build_threads;
    o.db.segment_max_bytes = segment_mb << 20;
    cli_storage_apply(&sto, &o.db); /* argv strings: valid for the life of the server */
    o.db.read_only = query;
    o.quiet = quiet;

    /* Handlers before the server starts: a signal that arrives during start stops it as soon
     * as start returns. */
    if (install_stop_handlers(cmd) != 0)
        return CLI_EXIT_FAIL;

    sx_cluster_node *cw = NULL;
    if (etcd) {
        char addr[300];
        (void)snprintf(addr, sizeof addr, "%s:%u", bind ? bind : "127.0.0.1", (unsigned)port);
        sx_status cst =
            cluster_node_start(etcd, node_id, data, addr, (uint32_t)lease_ttl, query, &o, &cw);
        if (cst != SX_OK)
            return cli_sx_fail(cmd, "cluster", cst);
    }

    sx_server *srv = NULL;
    sx_status st = sx_server_start(&o, &srv);
    if (st != SX_OK) {
        int rc = cli_sx_fail(cmd, "start", st);
        sx_cluster_node_stop(cw);
        return rc;
    }
    fprintf(stderr, "sextant: serving %s on http://%s:%u\n", data, bind ? bind : "127.0.0.1",
            (unsigned)sx_server_port(srv));
    fprintf(stderr, "sextant: web console on http://%s:%u/webui/\n", bind ? bind : "127.0.0.1",
            (unsigned)sx_server_port(srv));
    (void)fflush(stderr);

    return serve_until_stopped(cmd, srv, cw, query, refresh_ms, sync_ms, quiet, node_id, data);
}
