/*
 * fence.h: a shard writer's hold on its collections, on etcd (docs/internals/CLUSTER.md,
 * "Fencing protocol"): one lease per writer process, kept alive by a thread; one epoch key per
 * collection taken with a create-if-absent txn on that lease (its revision is the fencing token
 * R); every store manifest made current with a txn that compares the epoch key's mod_revision
 * with R. It implements the engine's sx_store_fence, so the engine's store sync does the data
 * work and this file only decides who may commit.
 *
 * Keys (prefix /sextant/<cluster-uuid>/):
 *   epoch/<db>/<collection>      the writer's node id, on its lease
 *   manifest/<db>/<collection>   the current store manifest's key (relative to the db's store)
 *   node/<id>                    {"role","addr","pid"} on the lease (membership)
 * Local state: DATA/cluster/known/<db>/<collection> holds the manifest key this process last
 * committed or restored from. Taking a collection whose committed manifest is another (another
 * writer committed since) is refused: the local copy is stale; sx__fence_reconcile, run before
 * the database opens, moves such copies to DATA/cluster/stale/ so the open restores the
 * committed state (their unshipped WAL rows are the documented recovery-point loss).
 *
 * Lease. TTL lease_ttl_s (default 5). Keep-alive every TTL/3; after a keep-alive sent at t the
 * lease is trusted until t + 0.9 TTL (etcd starts the TTL when it receives the request, after
 * t). Writes are acknowledged only while trusted (may_ack), so a writer paused past its TTL
 * (SIGSTOP, a long GC-like stall) acknowledges nothing after it wakes; its next commit fails the
 * revision compare. When etcd answers that the lease is gone, the fence is lost for good: the
 * on_lost callback runs once (sextant node exits so its supervisor restarts it, and the restart
 * reconciles).
 *
 * Locking: net_mu (SX__RANK_FENCE) serializes the etcd conversations that take a collection or
 * commit (called from the engine under flush_mu/store_mu, which rank lower); tab_mu
 * (SX__RANK_FENCE_TAB) guards the table of held collections and is never held across I/O, so
 * acknowledging a write to a held collection never waits for etcd. The keep-alive thread
 * touches only atomics and its own etcd client.
 */
#ifndef SX_CLUSTER_FENCE_H
#define SX_CLUSTER_FENCE_H
#include <sextant.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct sx__fence sx__fence;

typedef struct sx__fence_config {
    const char *etcd;          /* client URLs, comma-separated */
    const char *node_id;       /* this writer's id (unique in the cluster) */
    const char *data_dir;      /* the server's data directory (cluster/ state lives there) */
    const char *storage_url;   /* the default database's store URL (others: /databases/<db>) */
    const char *s3_endpoint;   /* for the cluster UUID object (NULL: as the engine resolves it) */
    const char *addr;          /* advertised "host:port" (node/<id>) */
    uint32_t lease_ttl_s;      /* 0: 5 */
    bool query_node;           /* registers as a query node (reads pointers only) */
    bool index_worker;         /* registers as an index worker (indexjob.c) */
    void (*on_lost)(void *ud); /* the lease is gone (called once, from the keep-alive thread) */
    void *on_lost_ud;
} sx__fence_config;

/* Checks the cluster identity (sx__cluster_uuid), grants the lease, registers node/<id>, starts
 * the keep-alive thread. Errors: SX_EREMOTE (etcd), SX_EINVAL (identity mismatch: message). */
SX_NODISCARD sx_status sx__fence_start(const sx__fence_config *cfg, sx__fence **out);
/* The engine's interface (borrowed: valid until sx__fence_stop). */
const sx_store_fence *sx__fence_iface(sx__fence *f);
/* Before the database opens: local collections whose committed manifest (etcd) is not the one
 * they were last synced with are moved to DATA/cluster/stale/<db>.<name>.<time>; prints a line
 * for each. Only the default database's directory (DATA/collections). */
SX_NODISCARD sx_status sx__fence_reconcile(sx__fence *f);
bool sx__fence_lost(const sx__fence *f);
/* For indexjob.c: the key prefix "/sextant/<uuid>/", the lease, the node id, the etcd client
 * URLs, and the database a store URL belongs to ("default", or the name after /databases/). */
const char *sx__fence_prefix(const sx__fence *f);
int64_t sx__fence_lease(const sx__fence *f);
const char *sx__fence_node_id(const sx__fence *f);
const char *sx__fence_etcd(const sx__fence *f);
void sx__fence_db_of(const sx__fence *f, const char *store, char *db, size_t cap);
const char *sx__fence_uuid(const sx__fence *f);
/* Stops the keep-alive, revokes the lease (so another writer may take the collections at once)
 * unless the fence was lost. NULL is a no-op. */
void sx__fence_stop(sx__fence *f);

/* The cluster identity (scale-out.md rule 4, Milvus #36094): /sextant/uuid in etcd and the
 * object CLUSTER-UUID at the store's root must agree. Both absent: a new UUID is written to both
 * (etcd first, create-if-absent). etcd's only: written to the store. The store's only (etcd was
 * reset or is another cluster): refused, never started empty. Different: refused.
 * uuid_out: 37 bytes. */
/* Tests only: a pause between the identity's two reads, so a test can have another node bootstrap
 * inside it (0: none). */
extern _Atomic long sx__cluster_uuid_pause_ms;
SX_NODISCARD sx_status sx__cluster_uuid(const char *etcd,
                                        const char *storage_url,
                                        const char *s3_endpoint,
                                        char *uuid_out);

#endif
