/*
 * sextant_server.h: the Milvus RESTful API v2 server of Sextant, as a library (libsextant_server),
 * used by `sextant serve` and by the tests, which run it in-process.
 *
 * Conventions as in sextant.h: sx_status returns, out-parameters written on success only,
 * sx_errmsg() for the message of the last failure on the calling thread.
 */
#ifndef SEXTANT_SERVER_H
#define SEXTANT_SERVER_H

#include "sextant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sx_server sx_server;

typedef struct sx_server_options {
    const char *data_dir;    /* required: the database directory (default database) */
    const char *bind_addr;   /* NULL: "127.0.0.1". A non-loopback address needs credentials. */
    uint16_t port;           /* 0: an ephemeral port (tests); see sx_server_port */
    const char *auth_token;  /* optional: "user:password" or an API key (Bearer / Basic) */
    const char *users_file;  /* optional: lines "user:password" or "user:password:ro" (read-only) */
    uint64_t max_body_bytes; /* 0: 64 MiB; larger bodies get 413 before they are read */
    uint32_t max_connections; /* 0: 1024; past it, each new connection closes the oldest idle
                                 one (keep-alive, or no complete request yet); connections
                                 with a request in progress are kept, and MHD accepts at most
                                 16 more */
    uint32_t idle_timeout_s;  /* 0: 60; an idle or slow client is disconnected after it */
    uint32_t http_threads;    /* 0: max(16, 4 * cores) */
    uint32_t max_nq;          /* 0: 16384 query vectors per search */
    uint32_t max_json_depth;  /* 0: 64 nesting levels */
    /* Answer size: a search, query or get whose JSON answer is estimated (before the engine
     * runs it: hits x the bytes per row of the requested fields; again on the rows found, with
     * their real string lengths) over this many bytes is refused with code 1100 naming the
     * estimate and the limit. 0: 64 MiB. */
    uint64_t max_response_bytes;
    /* Deadline of a search, query, get, count or delete by filter, in seconds, when the request
     * has no Request-Timeout header (a header asks for its own, up to 3600 s): the engine stops
     * the work with SX_ETIMEDOUT (code 65535 "deadline exceeded"). 0: 30 s. */
    uint32_t request_timeout_s;
    /* Connection admission (src/server/http.c, "Connections"):
     * max_connections_per_ip  0: max_connections / 2 (at least 1); past it, a new connection
     *                         from that address closes the address's longest-idle one (or is
     *                         closed itself when all the others hold a request).
     * header_timeout_s        0: 10; the request line and headers must arrive within it of the
     *                         accept (or of the request line on a kept-alive connection),
     *                         however slowly they trickle.
     * min_upload_bytes_per_s  0: 1024; a body that delivers less over a window of
     *                         header_timeout_s is cut.
     * shutdown_grace_s        0: 5; at sx_server_stop, uploads and headers still arriving
     *                         after it are cut (requests being handled finish). */
    uint32_t max_connections_per_ip;
    uint32_t header_timeout_s;
    uint32_t min_upload_bytes_per_s;
    uint32_t shutdown_grace_s;
    /* JSON memory: what the parsed document (jansson's DOM) of request bodies may take. */
    uint64_t max_json_bytes;       /* 0: 256 MiB per request body; over it: code 1102 */
    uint64_t max_json_total_bytes; /* 0: 512 MiB for all requests in flight; over it: code 1807 */
    /* Search merging: while every search slot is busy, queued searches with the same
     * collection, field, params, filter, limit and output fields are run as one batch
     * (src/server/merge.c). At low load nothing waits. */
    bool merge_disable;     /* false: merging on (the default) */
    uint32_t merge_wait_us; /* 0: 50 ms: longest a queued search waits for a free slot */
    uint32_t merge_max_nq;  /* 0: 256 query vectors per merged batch */
    uint32_t merge_slots;   /* 0: db.search_threads, else the number of CPUs: searches run at
                               once before later ones queue (and merge) */
    sx_db_options db;       /* passed to sx_db_open for every database */
    /* Bulk import (/v2/vectordb/jobs/import/create): the directory local files must lie in
     * (symbolic links resolved); paths outside it are refused (code 1100). NULL: any file the
     * server process can read, which suits trusted clients only. Object-store keys (relative
     * with a store, s3://) are not affected. */
    const char *import_root;
    bool quiet; /* no access log / startup line on stderr */
    /* Cluster mode (a writer; sx_cluster_node_before_collection with the node as ud): called
     * before a request that names a collection runs (REST or gRPC), with the database, the
     * collection's engine name, whether the request writes and whether the server has the
     * collection, so the writer can take it and adopt the committed state when its copy is
     * older or absent (sx_server_adopt_collection). Not
     * SX_OK: the request fails with its message. NULL: none. */
    sx_status (*before_collection)(
        void *ud, sx_server *s, const char *db, const char *collection, bool write, bool local);
    void *before_collection_ud;
} sx_server_options;

/* Opens the data directory and starts serving. Errors: SX_EINVAL (bad options, e.g. a remote bind
 * without credentials: the message says why), SX_EIO (port in use, directory unusable), SX_EBUSY
 * (another process has the directory), the engine's errors from opening the databases.
 * Ownership: stop with sx_server_stop. */
SX_API SX_NODISCARD sx_status sx_server_start(const sx_server_options *opts, sx_server **out);
/* The TCP port the server listens on. */
SX_API uint16_t sx_server_port(const sx_server *s);
/* Graceful stop: while in-flight requests finish, /readyz answers 503 and new requests 503;
 * uploads and headers still arriving after shutdown_grace_s are cut. Then it stops accepting,
 * flushes every collection, closes the databases and frees the server. Returns the first
 * flush/close error. NULL is a no-op (SX_OK). Thread-safety: call once, from any thread but a
 * request handler. */
SX_API SX_NODISCARD sx_status sx_server_stop(sx_server *s);

/* ------------------------------------------------------------ cluster mode: nodes */

/* A node of a Sextant cluster (docs/internals/CLUSTER.md). Every node checks the cluster identity
 * (the UUID in etcd and the store's CLUSTER-UUID must agree), holds an etcd lease and registers
 * node/<id> on it. Give sx_cluster_node_fence(n) as sx_server_options.db.store_fence, with
 * db.storage_url = storage_url.
 *
 * A writer (query_node false) takes each collection it writes with an epoch key on its lease
 * and commits every store manifest with a txn fenced on that key's revision. Local collections
 * that another writer committed past since this directory last synced are moved to
 * DATA/cluster/stale/ before the server opens them, so the open restores the committed state.
 * When etcd says the lease is gone, on_fenced runs once (from a background thread): the process
 * must stop acknowledging (the engine already refuses writes) and restart to reconcile.
 *
 * A query node (query_node true; the server opens its databases read-only) only reads the
 * committed pointers: its collections are restored from them and sx_server_refresh brings them
 * to the latest ones. */
typedef struct sx_cluster_node sx_cluster_node;

typedef struct sx_cluster_node_options {
    const char *etcd;        /* client URLs, comma-separated (required) */
    const char *node_id;     /* [A-Za-z0-9_-], unique in the cluster (required) */
    const char *data_dir;    /* the server's data directory (required) */
    const char *storage_url; /* the store (required) */
    const char *s3_endpoint; /* NULL: $SEXTANT_S3_ENDPOINT, else AWS */
    const char *addr;        /* advertised in etcd's node/<id> ("127.0.0.1:19530") */
    uint32_t lease_ttl_s;    /* 0: 5 */
    bool query_node;         /* a query node (read-only) instead of a writer */
    /* An index worker instead (no server: it claims index build jobs from etcd, reads the
     * segments from the store, builds with build_threads threads (0: all cores), uploads the
     * index files; docs/internals/CLUSTER.md, "Index workers"). Files: data_dir/jobs/. */
    bool index_worker;
    uint32_t build_threads;
    void (*on_fenced)(void *ud);
    void *ud;
} sx_cluster_node_options;

/* Errors: SX_EINVAL (options; identity mismatch: the message says which), SX_EREMOTE (etcd or
 * the store did not answer), SX_EIO (moving a stale copy). Ownership: sx_cluster_node_stop,
 * after sx_server_stop. */
SX_API SX_NODISCARD sx_status sx_cluster_node_start(const sx_cluster_node_options *opts,
                                                    sx_cluster_node **out);
SX_API const sx_store_fence *sx_cluster_node_fence(sx_cluster_node *n);
/* A writer's index builds offered to the cluster's index workers: give it as
 * sx_server_options.db.index_builder (NULL for other roles). Borrowed, like the fence. */
SX_API const sx_index_builder *sx_cluster_node_index_builder(sx_cluster_node *n);
SX_API const char *sx_cluster_node_uuid(const sx_cluster_node *n);
/* The databases that have a committed collection in the cluster (etcd's manifest keys), besides
 * "default". *names owned (sx_strings_free). Errors: SX_EREMOTE (etcd), SX_ENOMEM. */
SX_API SX_NODISCARD sx_status sx_cluster_node_databases(sx_cluster_node *n,
                                                        char ***names,
                                                        size_t *count);
SX_API bool sx_cluster_node_fenced(const sx_cluster_node *n);
/* A writer: records in etcd (synced/<id>, on its lease) that every row it acknowledged before
 * wall_ms is committed (a timed sync round that began then succeeded). */
SX_API SX_NODISCARD sx_status sx_cluster_node_synced(sx_cluster_node *n, int64_t wall_ms);
/* The time before which every row any registered writer acknowledged is committed: the least
 * of the writers' synced/<id> values, 0 when a writer has none (no --sync-ms). A query node
 * that reads it before a refresh serves at least that fresh a state after it. */
SX_API SX_NODISCARD sx_status sx_cluster_node_fresh_floor(sx_cluster_node *n, int64_t *wall_ms);
/* A writer's sx_server_options.before_collection (ud: the node). A collection this writer does
 * not hold and that has a committed state is taken (etcd); when its copy is older than that
 * state or absent (its holder is gone: the proxy placed it here), the copy is moved to
 * DATA/cluster/stale/ and the committed state restored (sx_server_adopt_collection) before the
 * request runs. A write to a collection another writer holds fails naming the holder; a read
 * is answered from the local copy. Other roles: SX_OK, nothing done. */
SX_API SX_NODISCARD sx_status sx_cluster_node_before_collection(
    void *ud, sx_server *s, const char *db, const char *collection, bool write, bool local);
/* Revokes the lease (a writer's collections may be taken at once) unless it was lost or
 * sx_cluster_node_keep_lease was called. */
SX_API void sx_cluster_node_stop(sx_cluster_node *n);
/* The stop lets the lease expire instead (a writer whose last flush failed: its WAL holds
 * acknowledged rows, so other writers must not adopt its collections before it is restarted or
 * its TTL has passed). */
SX_API void sx_cluster_node_keep_lease(sx_cluster_node *n);

/* The cluster's REST front door (docs/internals/CLUSTER.md, "Proxy"): forwards each Milvus REST
 * v2 request to the node that must answer it: writes and DDL to the writer holding the collection
 * (one nobody holds to its last writer while that one runs, else to one chosen by a hash of its
 * name), reads with consistencyLevel "Eventually" to the query nodes in turn, "Bounded" too when
 * the answering node's state is at most 5 s old (X-Sextant-Fresh-Ms), other reads to the holding
 * writer (it has every acknowledged row), collections/list from etcd. Answers carry
 * X-Sextant-Node. The same port serves gRPC (the node's front end over the proxy's routes). */
typedef struct sx_cluster_proxy sx_cluster_proxy;

typedef struct sx_cluster_proxy_options {
    const char *etcd; /* client URLs (required); the cluster must exist (a writer started) */
    uint16_t port;    /* 0: an ephemeral port (see sx_cluster_proxy_port) */
    uint32_t threads; /* 0: 16 */
} sx_cluster_proxy_options;

SX_API SX_NODISCARD sx_status sx_cluster_proxy_start(const sx_cluster_proxy_options *opts,
                                                     sx_cluster_proxy **out);
SX_API uint16_t sx_cluster_proxy_port(const sx_cluster_proxy *p);
SX_API void sx_cluster_proxy_stop(sx_cluster_proxy *p);

/* Query nodes: brings every database of a read-only server over a store to the store's current
 * manifests (sx_db_refresh), and its collection list with them (a collection new in the store
 * appears with metadata derived from its schema; one gone disappears). Requests in flight keep
 * the version they opened. *changed (optional): collections reloaded, added or removed. */
SX_API SX_NODISCARD sx_status sx_server_refresh(sx_server *s, size_t *changed);
/* A read-only server (query node) opens the databases named that it does not have yet (their
 * collections restored from the store, then followed by sx_server_refresh): a cluster's query
 * node passes sx_cluster_node_databases. "default" and names that are not valid are skipped.
 * Errors: SX_EINVAL (not read-only), the first open that failed (the others are still opened). */
SX_API SX_NODISCARD sx_status sx_server_follow_databases(sx_server *s,
                                                         const char *const *names,
                                                         size_t n);

/* Flushes every collection of a writable server that has unsynced writes
 * (sx_collection_unsynced): their rows sealed, written and uploaded to the store. `sextant serve
 * --sync-ms N` calls it every N ms, which bounds how much a lost machine takes with it.
 * *flushed (optional): collections flushed. Errors: the first flush that failed (the others
 * are still flushed), except SX_EFENCED / SX_ESTALE (cluster mode: a copy another writer holds,
 * whose rows will never be committed by this one); SX_EINVAL on a read-only server. */
SX_API SX_NODISCARD sx_status sx_server_sync(sx_server *s, size_t *flushed);
/* Whether the server's database db has collection (its engine name or its name). */
SX_API bool sx_server_has_collection(sx_server *s, const char *db, const char *collection);
/* A query node: every row its cluster acknowledged before wall_ms (ms since the epoch) is in its
 * answers, as of its last refresh (serve's refresher sets it from the writers' timed syncs,
 * sx_cluster_node_fresh_floor). Its REST answers then carry X-Sextant-Fresh-Ms, by which the
 * proxy serves Bounded reads from query nodes. 0: unknown (no header). */
SX_API void sx_server_set_fresh_ms(sx_server *s, int64_t wall_ms);
/* A writable server over a store replaces its copy of a collection (engine name) with the
 * store's committed state (sx_collection_reload; the copy moved to keep_dir, NULL: deleted),
 * creating the database first when the server lacks it, and keeps or derives its metadata: an
 * existing entry keeps its Milvus-level settings and takes the engine's indexes and metrics, a
 * new one is derived from the schema. Errors: SX_EINVAL (read-only server or bad names),
 * SX_ENOTFOUND (the store has no committed state), SX_EREMOTE, SX_EIO. */
SX_API SX_NODISCARD sx_status sx_server_adopt_collection(sx_server *s,
                                                         const char *db,
                                                         const char *collection,
                                                         const char *keep_dir);

#ifdef __cplusplus
}
#endif
#endif /* SEXTANT_SERVER_H */
