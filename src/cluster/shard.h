/*
 * shard.h: how the cluster proxy spreads one Milvus collection over shards and merges the
 * shards' answers (docs/internals/CLUSTER.md, "Shards"). Pure functions on jansson trees: no
 * I/O, no locks, no global state, so tests/unit/test_shard.c checks them without a cluster.
 *
 * Naming. Shard k (0-based) of collection c with shardsNum S > 1 is the engine collection
 * "c__s<k>" on the writer holding it (its own WAL, segments, store manifest, epoch key: the
 * single-node engine and the fencing protocol apply per shard unchanged). A collection created
 * with shardsNum 1 (Milvus's default) keeps its own name. The proxy refuses user names that
 * look like a shard's.
 *
 * Placement of rows. A row goes to shard hash(pk) mod S: an Int64 key through murmur3's 64-bit
 * finalizer, a VarChar key through FNV-1a then murmur3's 32-bit finalizer. Upserts and deletes
 * by key therefore reach the shard that holds the key.
 *
 * Merging (each answer already checked to have code 0):
 *   search   every shard answered limit + offset hits per query ("topks"); per query the hits
 *            are merged by distance (ascending for L2-like answers, descending for IP/COSINE),
 *            ties by shard order, and [offset, offset + limit) kept. The direction is read off
 *            the answers (a shard's list is sorted best first) or given by the caller.
 *   query    count(*) answers are summed; rows are merged shard list by shard list, always
 *            taking the smallest key among the lists' heads (each list stays in its shard's
 *            order, so the first N rows out depend only on each shard's first N rows and pages
 *            cut from windows of increasing offset neither repeat nor skip a row), and the
 *            window [offset, offset + limit) kept when the request had a limit.
 *   counts   insertCount / upsertCount / deleteCount and rowCount are summed; an index's
 *            row counts too, and its state is the least advanced shard's.
 */
#ifndef SX_CLUSTER_SHARD_H
#define SX_CLUSTER_SHARD_H
#include <jansson.h>
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SX__SHARD_MAX 16 /* Milvus's proxy.maxShardNum default (the server's SX__MAX_SHARDS) */

/* "base__s<k>" into out; false when it does not fit. */
bool sx__shard_name(const char *base, unsigned k, char *out, size_t cap);
/* true when name is a shard's name ("x__s<digits>" with x non-empty); *k and base (optional,
 * cap bytes) receive its parts. */
bool sx__shard_parse(const char *name, char *base, size_t cap, unsigned *k);

/* FNV-1a, then murmur3's 32-bit finalizer (FNV's low bits alone follow the last characters'
 * parity). Also the proxy's placement hash of collection names. */
uint32_t sx__shard_str_hash(const char *s);

/* Replica placement on query nodes (docs/internals/CLUSTER.md, "Replicas"): rendezvous hashing.
 * The holders of unit (db, name) (a collection, or one shard of a sharded collection) among the
 * n query nodes ids[] are the r with the highest sx__shard_str_hash("<db>/<name>@<id>"), so
 * every process that knows the same live nodes computes the same holders, and a node joining or
 * leaving moves only the units it gains or held. out (r entries at most): indexes into ids, the
 * best first. Returns how many (min(r, n)); r == 0: every node. */
size_t sx__replica_holders(
    const char *db, const char *name, const char *const *ids, size_t n, unsigned r, size_t *out);

/* The shard of a primary key value (a JSON integer or string) among n; -1 when the value is
 * neither. */
int sx__shard_of_pk(const json_t *pk, unsigned n);

/* Splits rows (a JSON array of row objects) by the shard of each row's field pk. out[k] gets a
 * new array (possibly empty) for each k < n; *bad (optional) the index of the first row with
 * no usable key. Errors: SX_EINVAL (a row without an integer or string pk: out untouched),
 * SX_ENOMEM. */
SX_NODISCARD sx_status
sx__shard_split_rows(const json_t *rows, const char *pk, unsigned n, json_t **out, size_t *bad);

/* Direction of the answers' distances: 1 larger is better, 0 smaller is better, -1 unknown
 * (no shard's list for any query holds two different distances). */
int sx__shard_search_order(json_t *const *ans, unsigned n);

/* Merges n search answers of nq queries each into one answer {"code":0,"data":[...],
 * "topks":[...],"cost":sum}. larger_better as above (0 or 1). New reference; NULL on a
 * malformed answer (a "topks" that does not add up to its data) or out of memory. */
json_t *sx__shard_merge_search(
    json_t *const *ans, unsigned n, size_t nq, size_t limit, size_t offset, bool larger_better);

/* Merges n query (or get) answers: a lone "count(*)" per answer (an integer, or its decimal
 * text) is summed; else the rows are merged by the heads' field pk (integers, then strings;
 * ties: the lower shard) and, when has_limit, [offset, offset + limit) kept. New reference;
 * NULL on out of memory. */
json_t *sx__shard_merge_query(
    json_t *const *ans, unsigned n, const char *pk, bool has_limit, size_t limit, size_t offset);

/* indexes/describe: ans[0]'s entries with totalRows, indexedRows, pendingRows and growingRows
 * summed over the shards (entry by entry) and the indexState of the first shard whose index
 * is not "Finished" (with its failReason). New reference. */
json_t *sx__shard_merge_index(json_t *const *ans, unsigned n);

/* collections/get_load_state: the answer of the least advanced shard (LoadStateNotExist <
 * NotLoad < Loading < Loaded), so "Loaded" means every shard is. New reference. */
json_t *sx__shard_merge_load(json_t *const *ans, unsigned n);

/* Sums data.<key> (an integer) over n answers into a copy of ans[0]. New reference. */
json_t *sx__shard_sum(json_t *const *ans, unsigned n, const char *key);

#endif
