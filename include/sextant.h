/*
 * sextant.h: the public C API of Sextant, an embedded vector database.
 *
 * Model. A database is a directory. It holds collections; a collection has a schema: one primary
 * key (int64 or varchar, optionally auto-generated), one to SX_MAX_VECTOR_FIELDS FLOAT_VECTOR
 * fields (each with its own dimension, metric and index), and scalar fields (int64, double, bool,
 * varchar). Rows are inserted in columnar batches, made durable in a
 * write-ahead log before the call returns, and are searchable at once. An optional index (see
 * sx_index_create for the types) is built in the background on sealed segments; searches stay
 * exact-correct meanwhile.
 *
 * Conventions.
 * - Every fallible function returns sx_status (SX_OK = 0). Results go to out-parameters, written
 *   only on success. The message of the last failure on the calling thread is sx_errmsg().
 * - Strings passed in are borrowed for the duration of the call. Objects returned through an
 *   out-parameter are owned by the caller and freed with the named function.
 * - Thread-safety: all functions taking an sx_db or sx_collection are safe to call from many
 *   threads at once unless stated otherwise; sx_db_close must be the last call on a database.
 * - COSINE collections store vectors L2-normalised (so get/query return unit vectors).
 */
#ifndef SEXTANT_H
#define SEXTANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SX_BUILDING)
# define SX_API __attribute__((visibility("default")))
#else
# define SX_API
#endif
#define SX_NODISCARD __attribute__((warn_unused_result))

/* ---------------------------------------------------------------- errors */

typedef enum sx_status {
    SX_OK = 0,
    SX_ENOMEM,    /* allocation failed */
    SX_EINVAL,    /* invalid argument, schema, parameter or expression */
    SX_ENOTFOUND, /* no such collection, field, index or key */
    SX_EEXIST,    /* already exists */
    SX_EIO,       /* I/O error from the operating system */
    SX_ENOSPC,    /* disk full */
    SX_ECORRUPT,  /* on-disk data failed a checksum or structural check */
    SX_EBUSY,     /* resource busy (e.g. database locked by another process) */
    SX_ECANCELED, /* operation cancelled */
    SX_ETIMEDOUT, /* wait timed out */
    SX_EREMOTE,   /* remote endpoint failed */
    SX_EFATAL,    /* sticky error state after a failed fsync: reopen the database */
    SX_EPARSE,    /* filter expression did not parse; the message names the position */
    SX_EFENCED,   /* cluster mode: another writer holds this collection (sx_store_fence) */
    SX_ESTALE, /* cluster mode: this copy is older than the committed one (sx_collection_reload) */
    SX_STATUS_COUNT
} sx_status;

/* Returns a static, human-readable name for a status ("SX_EINVAL"). */
SX_API const char *sx_status_str(sx_status st);
/* Returns the message of the last failing call on this thread ("" if none).
 * Borrowed: valid until the next sextant call on this thread. */
SX_API const char *sx_errmsg(void);

/* ---------------------------------------------------------------- schema */

typedef enum sx_field_type {
    SX_FIELD_INT64 = 1,
    SX_FIELD_DOUBLE = 2,
    SX_FIELD_BOOL = 3,
    SX_FIELD_VARCHAR = 4,
    SX_FIELD_FLOAT_VECTOR = 5,
    /* Vectors of other element types (Milvus's FLOAT16_VECTOR, BFLOAT16_VECTOR, BINARY_VECTOR),
     * stored as given: IEEE 754 binary16 and bfloat16 values of 2 bytes (uint16_t, the bits),
     * or dim bits packed 8 to a byte (bit i of a row is bit 7 - i % 8 of byte i / 8: the first
     * bit is the first byte's most significant, as Milvus and FAISS pack them). dim counts
     * values, or bits for BINARY_VECTOR (a multiple of 8). In columns (sx_column.data) and
     * rowsets such a field is uint16_t[n * dim] or uint8_t[n * dim / 8]. FLOAT16 and BFLOAT16
     * take the float metrics (L2, IP, COSINE) and are searched with float32 queries; BINARY
     * takes HAMMING and JACCARD and is searched with packed queries (sx_search_req.bqueries).
     * Indexes: FLAT and HNSW over FLOAT16 / BFLOAT16; FLAT (BIN_FLAT) and BIN_IVF_FLAT over
     * BINARY. */
    SX_FIELD_FLOAT16_VECTOR = 6,
    SX_FIELD_BFLOAT16_VECTOR = 7,
    SX_FIELD_BINARY_VECTOR = 8
} sx_field_type;

/* True for the vector types (FLOAT, FLOAT16, BFLOAT16, BINARY). */
static inline bool sx_field_is_vector(sx_field_type t)
{
    return t == SX_FIELD_FLOAT_VECTOR || t == SX_FIELD_FLOAT16_VECTOR ||
           t == SX_FIELD_BFLOAT16_VECTOR || t == SX_FIELD_BINARY_VECTOR;
}

/* Bytes of one vector of type t and dimension dim (0 for a scalar type). */
static inline size_t sx_vector_row_bytes(sx_field_type t, uint32_t dim)
{
    switch (t) {
    case SX_FIELD_FLOAT_VECTOR:
        return (size_t)dim * 4;
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
        return (size_t)dim * 2;
    case SX_FIELD_BINARY_VECTOR:
        return (size_t)dim / 8;
    default:
        return 0;
    }
}

/* Metrics. L2 (squared Euclidean), IP and COSINE for FLOAT, FLOAT16 and BFLOAT16 vectors;
 * HAMMING (differing bits) and JACCARD (1 - |a and b| / |a or b|, 0 for two empty vectors) for
 * BINARY vectors. L2, HAMMING and JACCARD are distances (smaller is closer), IP and COSINE
 * similarities. */
typedef enum sx_metric {
    SX_METRIC_L2 = 0,
    SX_METRIC_IP = 1,
    SX_METRIC_COSINE = 2,
    SX_METRIC_HAMMING = 3,
    SX_METRIC_JACCARD = 4
} sx_metric;

/* "L2", "IP", "COSINE", "HAMMING", "JACCARD" ("?" for another value). */
static inline const char *sx_metric_str(sx_metric m)
{
    switch (m) {
    case SX_METRIC_L2:
        return "L2";
    case SX_METRIC_IP:
        return "IP";
    case SX_METRIC_COSINE:
        return "COSINE";
    case SX_METRIC_HAMMING:
        return "HAMMING";
    case SX_METRIC_JACCARD:
        return "JACCARD";
    }
    return "?";
}

/* True for the similarities (IP, COSINE: larger is closer), false for the distances. */
static inline bool sx_metric_is_similarity(sx_metric m)
{
    return m == SX_METRIC_IP || m == SX_METRIC_COSINE;
}

#define SX_MAX_DIM           32768u
#define SX_MAX_FIELDS        64u
#define SX_MAX_NAME          255u
#define SX_MAX_VARCHAR       65535u
#define SX_MAX_TOPK          16384u
/* FLOAT_VECTOR fields per collection (Milvus's proxy.maxVectorFieldNum default). The first in the
 * schema is the default vector field of searches, index calls and metric changes. */
#define SX_MAX_VECTOR_FIELDS 4u
/* The largest squared L2 norm of a stored or query vector in an L2 or IP collection: 2^125
 * (about 4.25e37; a vector of dim d may have components up to about 6.5e18 / sqrt(d)). Within it
 * every float32 distance the engine computes is finite: ||q - x||^2 <= (||q|| + ||x||)^2 <= 2^127
 * and |<q, x>| <= 2^125, below FLT_MAX (about 2^128), so no search can meet an overflow (an
 * infinite distance, or inf - inf = NaN). A row like [3e38, 3e38, ...] is finite but above it:
 * sx_insert / sx_upsert refuse the batch with SX_EINVAL naming the row, and sx_search refuses such
 * a query likewise. COSINE collections store unit vectors (normalised in double), so any finite
 * vector is accepted there. */
#define SX_MAX_SQNORM        4.2535295865117308e37 /* 2^125, exactly (as a double) */

typedef struct sx_field_def {
    const char *name; /* [A-Za-z_][A-Za-z0-9_]*, at most SX_MAX_NAME bytes */
    sx_field_type type;
    bool is_primary;     /* exactly one field; INT64 or VARCHAR */
    bool auto_id;        /* primary only, INT64 only: ids are generated on insert */
    uint32_t dim;        /* FLOAT_VECTOR: 1..SX_MAX_DIM */
    uint32_t max_length; /* VARCHAR: 1..SX_MAX_VARCHAR (0 = SX_MAX_VARCHAR) */
    /* the field may hold NULL (sx_column.valid); not the primary key, not the vector field.
     * Filters: a comparison with NULL is UNKNOWN (no match, and `not` of it matches nothing
     * either); `f is null` / `f is not null` test it. */
    bool nullable;
} sx_field_def;

typedef struct sx_collection_def {
    const char *name;
    const sx_field_def *fields;
    size_t n_fields;
    /* every vector field's metric at create (sx_collection_set_metric_on changes one field's);
     * its indexes and searches must agree. A field whose type the metric does not fit (a binary
     * field under L2, a float field under HAMMING) gets its type's default: L2, or HAMMING. */
    sx_metric metric;
} sx_collection_def;

/* ---------------------------------------------------------------- database */

typedef struct sx_db sx_db;
typedef struct sx_collection sx_collection;

typedef enum sx_sync_mode {
    SX_SYNC_FULL = 0, /* default: acknowledge after fdatasync of the WAL (group commit) */
    SX_SYNC_NONE = 1  /* never fsync the WAL (tests/benchmarks only: a crash may lose data) */
} sx_sync_mode;

typedef struct sx_db_options {
    uint64_t
        segment_max_bytes;   /* seal the growing segment past this many vector bytes (0: 256 MiB) */
    uint32_t build_threads;  /* threads for index builds (0: all cores) */
    uint32_t search_threads; /* threads for batched searches (0: all cores) */
    sx_sync_mode sync_mode;
    bool read_only; /* open for inspection (sextant info): no WAL writes, no builds */
    /* Bytes one index build may allocate (0: unlimited). A build that would exceed it works
     * within it (DISKANN partitions its build) or fails cleanly (state FAILED, fail_reason says
     * so); it is never OOM-killed. Milvus: index_build_memory_limit. */
    uint64_t index_build_memory_limit;
    /* Object storage (docs/internals/STORAGE.md). NULL or "": local only. "s3://BUCKET[/PREFIX]"
     * (AWS S3, MinIO, Ceph RGW, s3rver; credentials from AWS_ACCESS_KEY_ID /
     * AWS_SECRET_ACCESS_KEY, else $SEXTANT_S3_CREDENTIALS or ~/.aws/credentials) or
     * "file:///abs/dir" (a directory, e.g. a shared mount). The WAL stays in `dir`; sealed
     * segments, delete files, index files and each collection's manifest are uploaded when a
     * segment is sealed (sx_flush, sx_compact, a full growing segment) and index files after
     * their build. Opening a directory that lacks a collection the store has downloads it first,
     * so a collection can be opened anywhere from the store alone after a flush. Strings are
     * copied by sx_db_open. */
    const char *storage_url;
    const char *s3_endpoint; /* "http://127.0.0.1:4569"; NULL: $SEXTANT_S3_ENDPOINT, else AWS */
    const char *s3_region;   /* NULL: $AWS_REGION, else "us-east-1" */
    /* Cache of store-backed files (0: unlimited: every file is kept locally in full). With a
     * store and a limit: (1) DISKANN files of collections opened from the store are not
     * downloaded; their sectors are read with ranged GETs through an in-memory LRU block cache
     * of this many bytes; (2) after each sync, local copies of index files the store holds are
     * removed, least recently used first, while the collection's store-backed local bytes exceed
     * the limit, and downloaded again when needed. Sealed segment files stay local (their
     * vectors are memory-mapped). See docs/internals/STORAGE.md, "Cache". */
    uint64_t cache_limit_bytes;
    /* Salvage (`sextant check --salvage`): a WAL whose middle is corrupt normally refuses to open
     * (SX_ECORRUPT naming file and offset); with this set, the log is cut at the first invalid
     * record instead (the records after it are lost), copies of the dropped parts are kept as
     * "<wal file>.salvaged", and a line on stderr says what was cut. Never set it by default. */
    bool wal_salvage;
    /* The memory budget of the whole database (docs/internals/MEMORY.md): growing segments,
     * sealed heap columns, primary-key maps, indexes in RAM, index builds, the block cache, bulk
     * imports and search scratch take their memory from it. When it is exhausted the engine
     * seals the growing segment, evicts cache blocks, builds within what is left (DISKANN
     * partitions) or refuses with SX_ENOMEM naming the budget; it is never OOM-killed for it.
     * 0 (default): the memory limit of the process's cgroup (v2 memory.max, v1
     * memory.limit_in_bytes) less a headroom of max(32 MiB, 1/8), or unlimited when there is no
     * such limit. SX_MEMORY_UNLIMITED: no budget even inside a limited cgroup. */
    uint64_t memory_limit_bytes;
    /* A budget shared by several databases of one process (a server's Milvus databases): when
     * set, memory_limit_bytes is ignored and this database charges the shared budget. Borrowed:
     * it must outlive every database using it. NULL (default): the database has its own. */
    struct sx_memory_budget *memory_budget;
    /* Compaction merges runs of small sealed segments (sx_compact: those under half of the
     * target, without deleted rows) into segments of up to this many vector bytes. 0 (default):
     * segment_max_bytes, and at least 2 GiB in a collection whose index reads its own vectors
     * from disk (DISKANN; Milvus's dataCoord.segment.diskSegmentMaxSize), where each segment is
     * one more graph a query walks. Sealing stays at segment_max_bytes: the growing segment,
     * which lives in RAM, is not made larger by a large merge target. */
    uint64_t merge_max_bytes;
    /* Background merging: after a flush that sealed segments, once at least this many small
     * sealed segments (under half the merge target, no deleted rows) exist, the index builder
     * thread merges them as sx_compact would (then builds their index), as Milvus's automatic
     * compaction does (dataCoord.compaction.min.segment: 3). 0 (the library's default): only
     * sx_compact merges. `sextant serve` sets 3. */
    uint32_t auto_merge;
    /* Fenced store commits (cluster mode; NULL: none). Borrowed: it must outlive the database.
     * See sx_store_fence below and docs/internals/CLUSTER.md. Needs storage_url. */
    const struct sx_store_fence *store_fence;
    /* Index builds handed to other processes (cluster mode's index workers; NULL: every build
     * runs in this process). Borrowed: it must outlive the database. See sx_index_builder. */
    const struct sx_index_builder *index_builder;
} sx_db_options;

/* Fencing of a collection's store prefix (cluster mode, docs/internals/CLUSTER.md). Without a
 * fence one process writes a collection's objects and its store manifest is the object
 * <collection>/MANIFEST. With one, a coordinator (Sextant's cluster writer, on etcd) decides which
 * process may write each collection and keeps the pointer to its current store manifest:
 *   - objects this process uploads are named <collection>/<prefix><name>, prefix being the
 *     writer's epoch (its fencing token, e.g. "e1234/"), so a fenced writer never overwrites an
 *     object another epoch named; objects named by the current manifest keep their keys;
 *   - each store manifest is a new object <collection>/<prefix>MANIFEST.<generation>.<n>, made
 *     current by commit(); a refused commit (SX_EFENCED) leaves the store as it was, and only
 *     after a commit are objects the new manifest does not name deleted;
 *   - an open restores missing collections from current(), not from <collection>/MANIFEST;
 *   - an insert, upsert or delete is refused before it starts, and answered SX_EFENCED after its
 *     WAL sync (outcome unknown: it is in this process's WAL only), when may_ack() is false.
 * Every callback gets the database's storage_url (a server's databases other than "default" have
 * ".../databases/<name>") and the collection's name, may be called from any thread, under the
 * collection's locks, and must not call back into the database. */
typedef struct sx_store_fence {
    void *ctx;
    /* The key prefix for this process's uploads to `collection` into buf ("" allowed).
     * SX_EFENCED when this process may not write it. */
    sx_status (*prefix)(
        void *ctx, const char *store, const char *collection, char *buf, size_t cap);
    /* Makes manifest_key (relative to the store root; NULL: the collection is dropped) the
     * collection's current store manifest if this process still holds it. SX_OK; SX_EFENCED
     * (nothing changed); SX_EREMOTE (the coordinator did not answer: unknown, retried later). */
    sx_status (*commit)(void *ctx,
                        const char *store,
                        const char *collection,
                        const char *manifest_key);
    /* The current store manifest's key (relative to the store root) into buf; SX_ENOTFOUND when
     * the collection has none (new, or dropped). */
    sx_status (*current)(
        void *ctx, const char *store, const char *collection, char *buf, size_t cap);
    /* May a write to collection be acknowledged now (this process holds it and its lease has
     * not lapsed)? SX_OK, else SX_EFENCED (or SX_EREMOTE) with a message saying why. NULL:
     * always. */
    sx_status (*may_ack)(void *ctx, const char *store, const char *collection);
    /* Read-only databases (a cluster's query nodes): does this process serve collection (its
     * replica placement)? One it does not is not restored from the store, and one it served
     * is retired at the next sx_db_refresh (its files removed once unused). NULL: all. */
    bool (*serves)(void *ctx, const char *store, const char *collection);
} sx_store_fence;

#define SX_MEMORY_UNLIMITED UINT64_MAX

/* A memory budget that several databases share (sx_db_options.memory_budget). limit_bytes as
 * sx_db_options.memory_limit_bytes: 0 = the cgroup's limit less the headroom, else unlimited;
 * SX_MEMORY_UNLIMITED = none. Errors: SX_ENOMEM. Free after the last database using it closed. */
typedef struct sx_memory_budget sx_memory_budget;
SX_API SX_NODISCARD sx_status sx_memory_budget_new(uint64_t limit_bytes, sx_memory_budget **out);
SX_API void sx_memory_budget_free(sx_memory_budget *b);

/* Opens (creating if needed) the database in directory `dir`, recovering every collection from
 * its manifest and WAL. `opts` may be NULL for defaults.
 * Returns: SX_OK and *out. Errors: SX_EIO, SX_ECORRUPT (a manifest/segment failed its checks;
 * a torn WAL tail is truncated silently), SX_EBUSY (another process holds the directory lock).
 * Ownership: close with sx_db_close. Thread-safety: any thread. */
SX_API SX_NODISCARD sx_status sx_db_open(const char *dir, const sx_db_options *opts, sx_db **out);

/* Waits for background builds to stop, releases everything. Open collection handles must have
 * been released. NULL is a no-op. Thread-safety: must be the last call on db. */
SX_API void sx_db_close(sx_db *db);

/* Creates a collection. Errors: SX_EINVAL (bad schema, message says why), SX_EEXIST, SX_EIO. */
SX_API SX_NODISCARD sx_status sx_collection_create(sx_db *db, const sx_collection_def *def);
/* Drops a collection and deletes its files. Open handles stay usable until released but their
 * writes fail with SX_ENOTFOUND. Errors: SX_ENOTFOUND, SX_EIO. */
SX_API SX_NODISCARD sx_status sx_collection_drop(sx_db *db, const char *name);
/* Replaces this database's copy of collection `name` with the store's current one (cluster mode:
 * a writer adopting a collection another writer committed since this copy was made; a writable
 * database with a storage_url). The local copy, if any, is retired as a drop would (writes
 * through handles still open get SX_ENOTFOUND, their reads answer from the retired copy, its
 * builds stop) and its directory moved to keep_dir (a path
 * that must not exist; NULL: deleted), rows the store does not have included; then the store's
 * current manifest is restored and opened (indexes loaded, missing ones queued). Nothing in the
 * store changes. SX_ENOTFOUND: the store has no current manifest for it (the local copy stays
 * retired). */
SX_API SX_NODISCARD sx_status sx_collection_reload(sx_db *db,
                                                   const char *name,
                                                   const char *keep_dir);
/* Lists collection names, sorted. Ownership: free with sx_strings_free(names, n). */
SX_API SX_NODISCARD sx_status sx_collection_list(sx_db *db, char ***names, size_t *n);
SX_API void sx_strings_free(char **names, size_t n);

/* Gets a handle on a collection. Ownership: release with sx_collection_release. */
SX_API SX_NODISCARD sx_status sx_collection_open(sx_db *db, const char *name, sx_collection **out);
SX_API void sx_collection_release(sx_collection *c);

typedef struct sx_collection_info {
    char name[SX_MAX_NAME + 1];
    sx_metric metric;
    size_t n_fields;
    sx_field_def fields[SX_MAX_FIELDS]; /* names borrowed: valid until the handle is released */
    uint64_t n_rows;                    /* live rows (inserted minus deleted) */
    uint32_t n_segments;                /* sealed segments */
    uint64_t growing_rows;              /* rows in the in-memory growing segment */
    uint64_t wal_bytes;                 /* current WAL size */
    uint64_t memory_bytes;              /* vectors, scalars and indexes held in memory */
} sx_collection_info;

SX_API SX_NODISCARD sx_status sx_collection_describe(sx_collection *c, sx_collection_info *out);

/* One file of a segment (seg-<id>.* in the collection's directory). */
typedef struct sx_segment_file {
    char name[64];  /* "seg-00000000000000000012.sxs" (a ".remote" stub's name without it) */
    uint64_t bytes; /* local size; for a file held only in the object store, its size there */
    bool remote;    /* the bytes are only in the object store (a local ".remote" stub) */
    bool in_store;  /* the object store holds it (remote, or uploaded and kept locally too) */
} sx_segment_file;

#define SX_SEGMENT_MAX_FILES 16

typedef enum sx_segment_index_state {
    SX_SEGIDX_NONE = 0,    /* the field has no index (or the segment is growing) */
    SX_SEGIDX_PENDING = 1, /* waiting for the builder, or being built */
    SX_SEGIDX_BUILT = 2
} sx_segment_index_state;

typedef struct sx_segment_desc {
    uint64_t id;
    bool sealed;    /* false: the growing segment (always the last one listed) */
    bool persisted; /* its file is durable and in the manifest */
    uint64_t rows;  /* rows stored, deleted ones included */
    uint64_t deleted_rows;
    /* [v]: the collection's v-th vector field (sx_collection_info's order) */
    sx_segment_index_state index_state[SX_MAX_VECTOR_FIELDS];
    uint64_t index_memory_bytes; /* all fields' built indexes of this segment */
    size_t n_files;
    sx_segment_file files[SX_SEGMENT_MAX_FILES]; /* sorted by name; at most 16 listed */
} sx_segment_desc;

/* Lists the collection's segments: sealed ones by id, then the growing one. Files are listed
 * from the collection's directory (a snapshot: a compaction running meanwhile may have removed
 * or added some). Ownership: free *out with sx_segments_free. Errors: SX_ENOMEM, SX_EIO
 * (directory). Thread-safety: any thread, concurrently with writes and builds. */
SX_API SX_NODISCARD sx_status sx_collection_segments(sx_collection *c,
                                                     sx_segment_desc **out,
                                                     size_t *n);
SX_API void sx_segments_free(sx_segment_desc *segs);

/* Changes the collection's metric (Milvus ties the metric to the index, so a collection created
 * before its index learns the metric late). Allowed only while the collection has no index
 * (setting the metric it already has is a no-op, index or not).
 * Stored vectors: L2 and IP use them as stored, so L2 <-> IP changes only the metric. To COSINE
 * with rows stored: the growing rows are flushed, then every sealed segment is rewritten with
 * unit-length vectors (and without its deleted rows, as sx_compact does); inserts wait meanwhile.
 * From COSINE with rows stored: refused, the original vectors are gone. Durable: the new metric
 * and the rewritten segments are committed by one manifest write, so a crash leaves either the old
 * state or the new one.
 * Errors: SX_EBUSY (the collection has an index: drop it first; or inserts kept arriving while
 * converting to COSINE), SX_EINVAL (bad metric, COSINE -> L2/IP with rows, read-only database),
 * SX_ENOTFOUND (dropped), SX_EIO, SX_ENOSPC, SX_EFATAL.
 * Thread-safety: safe against inserts, deletes, flushes and index creation on the collection; a
 * search running at the same moment may use either metric, so change it before serving searches
 * (the REST server does it before the collection can be loaded). */
SX_API SX_NODISCARD sx_status sx_collection_set_metric(sx_collection *c, sx_metric m);
/* The same for one vector field (field NULL or "": the first vector field): each vector field has
 * its own metric and its own index. Errors as sx_collection_set_metric, and SX_EINVAL naming a
 * field that is not a vector field of the collection. */
SX_API SX_NODISCARD sx_status sx_collection_set_metric_on(sx_collection *c,
                                                          const char *field,
                                                          sx_metric m);

/* ---------------------------------------------------------------- data */

/* A column of a batch. `data` points at n_rows values: int64_t, double, bool, const char * (NUL
 * terminated UTF-8), or n_rows*dim floats for the vector field. Borrowed for the call.
 * `valid` (optional, n_rows bools; NULL = every row has a value): false marks a NULL row of a
 * nullable field (its value in `data` is ignored: stored as 0, 0.0, false or "", and a VARCHAR
 * pointer may be NULL there); a false on a field that is not nullable is SX_EINVAL.
 * In a rowset, `valid` is set (owned) on nullable fields' columns that hold a NULL, else NULL. */
typedef struct sx_column {
    const char *name;
    sx_field_type type;
    const void *data;
    const bool *valid;
} sx_column;

typedef struct sx_batch {
    size_t n_rows;
    const sx_column *cols;
    size_t n_cols;
} sx_batch;

/* Primary keys: exactly one of ints/strs is non-NULL. */
typedef struct sx_keys {
    size_t n;
    const int64_t *ints;
    const char *const *strs;
} sx_keys;

/* Inserts a batch atomically: all rows or none, durable (per sync_mode) on SX_OK. Every schema
 * field must be present (the auto-id primary key must be absent). Vectors must be finite and, in
 * L2 and IP collections, of squared norm at most SX_MAX_SQNORM (2^125).
 * ids_out (optional) receives the int64 primary keys of the rows, n_rows of them (auto ids);
 * caller-allocated. Errors: SX_EINVAL (message names the field/row), SX_EEXIST (duplicate key in
 * the batch or already present: use upsert), SX_EIO, SX_ENOSPC, SX_EFATAL (sticky). */
SX_API SX_NODISCARD sx_status sx_insert(sx_collection *c, const sx_batch *b, int64_t *ids_out);
/* Like insert, but rows whose key exists replace the old row (delete + insert, atomically). */
SX_API SX_NODISCARD sx_status sx_upsert(sx_collection *c, const sx_batch *b);
/* Deletes rows by primary key. Unknown keys are ignored. *n_deleted (optional) = rows deleted. */
SX_API SX_NODISCARD sx_status sx_delete(sx_collection *c, const sx_keys *keys, uint64_t *n_deleted);
/* Deletes the rows matching a filter expression (see sx_query). Errors: SX_EPARSE, SX_EINVAL. */
SX_API SX_NODISCARD sx_status sx_delete_where(sx_collection *c,
                                              const char *filter,
                                              uint64_t *n_deleted);
/* Seals the growing segment to disk, persists delete bitmaps, rewrites the manifest and
 * truncates the WAL. The sealed segment gets the collection's index built in the background.
 * With an object store, the new files and the manifest are then uploaded (see sx_db_sync):
 * SX_EREMOTE means the local flush is complete and durable but the store is behind; a later
 * flush or sx_db_sync catches up. */
SX_API SX_NODISCARD sx_status sx_flush(sx_collection *c);
/* Whether c has writes a flush would make durable in its files or the store: WAL records after
 * the last flush's checkpoint, a sealed segment or deletes not written yet, or a store sync
 * owed (sx_db_sync). A timed flush (sextant serve --sync-ms) flushes only such collections.
 * False for a read-only or dropped collection. Takes the collection's flush lock briefly. */
SX_API bool sx_collection_unsynced(sx_collection *c);
/* Rewrites sealed segments that hold deleted rows without them (and merges small ones). */
SX_API SX_NODISCARD sx_status sx_compact(sx_collection *c);

/* ---------------------------------------------------------------- results */

/* A set of rows, columnar. Ownership: free with sx_rowset_free. For searches, rows are the hits
 * of query 0, then query 1, ...; topks[q] = hits of query q; distances[i] = raw metric value of
 * hit i (squared L2, or IP / cosine similarity: larger is better). For query/get, nq = 0 and
 * topks/distances are NULL. Columns: the primary key first, then the requested fields in the
 * order asked. VARCHAR data is `char **`, vectors are n_rows*dim floats. */
typedef struct sx_rowset {
    size_t n_rows;
    size_t n_cols;
    sx_column *cols; /* names and data owned by the rowset */
    uint32_t *dims;  /* per column: dim for vectors, else 0 */
    size_t nq;
    size_t *topks;
    float *distances;
} sx_rowset;

SX_API void sx_rowset_free(sx_rowset *rs);

/* ---------------------------------------------------------------- parameters */

/* Key/value parameter, Milvus names: M, efConstruction, ef, nlist, nprobe, ... */
typedef struct sx_param {
    const char *key;
    const char *value;
} sx_param;

/* One index build offered to an sx_index_builder: the index of vector field `field` of sealed
 * segment `segment_id`, whose segment file the store holds at `segment_key`. Strings and params
 * are valid during the call. */
typedef struct sx_index_build_job {
    const char *store;      /* the database's storage_url */
    const char *collection; /* the collection (its name in the engine and the store) */
    uint64_t segment_id;
    const char *segment_key; /* the segment file's object key, relative to `store` */
    const char *field;       /* the vector field */
    uint64_t rows;
    uint32_t dim;
    sx_metric metric;
    const char *index_type; /* canonical name ("HNSW") */
    const sx_param *params; /* the index's build parameters */
    size_t n_params;
    /* An index with files beside its index file (DISKANN: <side_prefix>.diskann): where build()
     * writes them, as sx_index_build_segment_file's side_prefix. NULL: it has none. */
    const char *side_prefix;
    /* Nonzero once the build is no longer wanted (a drop, the database closing): the builder
     * returns SX_ECANCELED soon after. */
    int (*cancelled)(const struct sx_index_build_job *job);
    void *engine_private;
} sx_index_build_job;

/* Builds elsewhere (cluster mode: src/cluster/indexjob.c, index workers on etcd + the store).
 * While a database has one, each build of a sealed segment's index is offered to build() on one
 * of `slots` engine threads (0: 4), so that many builds can be out at once. build() blocks until
 * the index file (as sx_index_build_segment_file writes it) is at out_path, then returns SX_OK: the
 * engine checks the file against the index spec, loads and publishes it and the store sync uploads
 * it (through the fence) as if built here. Any other status (SX_ENOTFOUND: no worker; a failure)
 * makes the engine build it itself, as it would without a builder: a build is never lost to a
 * missing worker. Called from engine threads, under no engine lock. */
typedef struct sx_index_builder {
    void *ctx;
    unsigned slots;
    sx_status (*build)(void *ctx, const sx_index_build_job *job, const char *out_path);
} sx_index_builder;

/* ---------------------------------------------------------------- search, query */

typedef struct sx_search_req {
    /* nq * dim floats (dim = the field's), for FLOAT, FLOAT16 and BFLOAT16 vector fields */
    const float *queries;
    size_t nq;
    uint32_t k;                       /* top-k per query, 1..SX_MAX_TOPK */
    uint32_t offset;                  /* skip this many best hits (k + offset <= SX_MAX_TOPK) */
    const char *filter;               /* optional boolean expression (NULL or "" = all rows) */
    const char *const *output_fields; /* optional field names; "*" = all */
    size_t n_output_fields;
    const sx_param *params; /* per-index search params (ef for HNSW) */
    size_t n_params;
    int metric; /* -1: the collection's; else must equal it */
    /* skip the rows not yet sealed (the growing segment), as Milvus's ignore_growing: faster,
     * and the latest writes are not seen */
    bool ignore_growing;
    /* the vector field searched (Milvus's anns_field): NULL or "" = the first vector field; its
     * dim, metric and index apply */
    const char *anns_field;
    /* nq * dim / 8 bytes of packed bits, for a BINARY_VECTOR field (queries NULL then) */
    const uint8_t *bqueries;
    /* scan every row exactly, as FLAT would, whatever index the segments have (the web
     * console's recall check: the same rows, filter and deletes as the indexed search) */
    bool exact;
    /* optional out: how each segment was searched (sx_search_plan), summed over the segments;
     * written on success */
    struct sx_search_plan *plan;
    /* how a filtered search is carried out on segments with an index: SX_PLAN_AUTO (0, the
     * cost estimate below), SX_PLAN_INDEX (always through the index with the filter) or
     * SX_PLAN_EXACT (always an exact scan of the rows the filter keeps) */
    int filter_plan;
} sx_search_req;

enum { SX_PLAN_AUTO = 0, SX_PLAN_INDEX = 1, SX_PLAN_EXACT = 2 };

/* How one sx_search was carried out, per segment, summed over the segments where the filter
 * and the deletes keep rows (rows and rows_kept count every segment searched). A
 * filtered search (a filter, or deleted rows) over a segment with an index is planned there
 * from the fraction of rows the filter keeps: through the index with the filter (graph
 * traversal that passes over the rows it drops), or an exact scan of the rows it keeps,
 * whichever the index's cost estimate finds cheaper (indexes without an estimate: exact below
 * 2,048 rows or 5% of the segment). Exact scans are exact; the index's recall applies to the
 * others. */
typedef struct sx_search_plan {
    uint32_t index;           /* searched through the index, no row filtered out */
    uint32_t index_filtered;  /* through the index with the filter */
    uint32_t exact_filtered;  /* an index there, but the rows the filter keeps scanned exactly */
    uint32_t exact_unindexed; /* scanned exactly: no index (growing rows, not built yet) */
    uint32_t exact_other;     /* scanned exactly by request (exact) or as a FLAT batch */
    uint64_t rows;            /* rows of the segments searched */
    uint64_t rows_kept;       /* of them, rows the filter and the deletes keep */
} sx_search_plan;

/* Searches the nq queries. Exact on rows not covered by a finished index; an index is used on
 * segments that have one unless the filter keeps few rows (then exact search is cheaper and
 * exact). Errors: SX_EINVAL (dimension, k, params, NaN or infinite query, a query of squared
 * norm above SX_MAX_SQNORM in an L2 or IP collection), SX_EPARSE (filter). */
SX_API SX_NODISCARD sx_status sx_search(sx_collection *c,
                                        const sx_search_req *req,
                                        sx_rowset **out);

/* ---------------------------------------------------------------- sparse vectors
 *
 * Sparse vectors (Milvus's SPARSE_FLOAT_VECTOR: (index, value) pairs, indexes in [0, 2^32 - 2],
 * values finite and >= 0) are held in a VARCHAR field in this text form: entries "i:v" joined by
 * ',', indexes strictly increasing, each value written with 9 significant digits (a float32 reads
 * back bit for bit), e.g. "3:0.5,17:1.25"; "" is the empty vector. The engine stores, logs and
 * compacts such a field like any VARCHAR (so its rows are at most SX_MAX_VARCHAR bytes of text,
 * about 5,000 entries) and searches it with sx_sparse_search. */

/* Writes the text of (idx[i], val[i]) (nnz entries, already valid: increasing indexes, finite
 * values >= 0) into buf (cap bytes, NUL-terminated when it fits). Returns the length the text
 * needs without its NUL (compare with cap to see whether it fit). */
SX_API size_t
sx_sparse_format(const uint32_t *idx, const float *val, size_t nnz, char *buf, size_t cap);
/* Reads a sparse vector's text into idx / val (cap entries each; both may be NULL with cap 0 to
 * count): *nnz = its entries. Errors (SX_EINVAL, the message names the entry): bad syntax, an
 * index not above the previous one or equal to 2^32 - 1, a negative, NaN or infinite value,
 * more than cap entries. */
SX_API SX_NODISCARD sx_status
sx_sparse_parse(const char *text, uint32_t *idx, float *val, size_t cap, size_t *nnz);

typedef struct sx_sparse_query {
    const uint32_t *idx; /* strictly increasing */
    const float *val;    /* finite, >= 0 */
    size_t nnz;          /* 0: the query matches nothing */
} sx_sparse_query;

typedef enum sx_sparse_scoring {
    SX_SPARSE_IP = 0,  /* the inner product of the query's and the row's values */
    SX_SPARSE_BM25 = 1 /* BM25: rows hold term frequencies, the query its terms' counts */
} sx_sparse_scoring;

typedef struct sx_sparse_req {
    const char *field; /* a VARCHAR field holding sparse vectors (the text form above) */
    const sx_sparse_query *queries;
    size_t nq;
    uint32_t k, offset; /* k + offset <= SX_MAX_TOPK */
    const char *filter; /* optional, as sx_search's */
    const char *const *output_fields;
    size_t n_output_fields;
    /* Milvus's drop_ratio_search: each query's smallest values (this fraction of its entries,
     * rounded down) are left out. [0, 1). */
    float drop_ratio_search;
    /* Milvus's drop_ratio_build: each stored row's smallest values (this fraction of its
     * entries, rounded down) are left out of scoring, on sealed and growing rows alike. [0, 1). */
    float drop_ratio_build;
    bool ignore_growing; /* as sx_search's */
    /* score every row that shares an index with the query (no pruning): the reference the
     * pruned search (MaxScore over per-segment inverted lists) must equal; for tests and
     * measurement */
    bool exhaustive;
    /* SX_SPARSE_BM25 (Okapi BM25, as Milvus's full-text search): the score of a row is the sum
     * over the query's indexes t of q(t) * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl /
     * avgdl)), where q(t) is the query's value (its count of the term), tf the row's value, dl
     * the sum of the row's values, avgdl their mean over the live rows of the field and idf(t) =
     * ln(1 + (N - df + 0.5) / (df + 0.5)) with N the live rows and df those having t. The
     * statistics are the collection's live rows at the time of the search (deleted rows out,
     * the growing rows in, whatever the filter), merged from every segment, so the scores equal
     * a single BM25 index over those rows. drop_ratio_build must be 0. */
    sx_sparse_scoring scoring;
    float bm25_k1; /* > 0 (0: 1.2) */
    float bm25_b;  /* [0, 1]; used as given (Milvus's default is 0.75) */
} sx_sparse_req;

/* Inner-product search of sparse vectors: per query, the k + offset rows (after `offset`) with
 * the highest inner product among the rows that share at least one index with the query (with
 * both drop ratios applied), ties broken by storage order. The rowset's distances are the inner
 * products (higher is better). Sealed segments are searched through an inverted index built on
 * first use and kept with the segment (charged to the memory budget as index memory); the
 * growing segment's rows are scored one by one. Exact: the pruning skips only rows that cannot
 * enter the top k. A row whose text does not parse fails the search (SX_ECORRUPT naming it).
 * Errors: SX_EINVAL (field, k, ratios, a bad query), SX_EPARSE (filter), SX_ENOMEM, SX_ETIMEDOUT
 * (the thread's deadline), SX_ECORRUPT. */
SX_API SX_NODISCARD sx_status sx_sparse_search(sx_collection *c,
                                               const sx_sparse_req *req,
                                               sx_rowset **out);

/* Returns rows matching `filter` (NULL/"" = all) in primary-key insertion order, after skipping
 * `offset` of them, at most `limit` (0 = no limit). */
SX_API SX_NODISCARD sx_status sx_query(sx_collection *c,
                                       const char *filter,
                                       const char *const *output_fields,
                                       size_t n_output_fields,
                                       uint64_t limit,
                                       uint64_t offset,
                                       sx_rowset **out);
/* Returns the rows with the given primary keys (missing keys are skipped), in key order given. */
SX_API SX_NODISCARD sx_status sx_get(sx_collection *c,
                                     const sx_keys *keys,
                                     const char *const *output_fields,
                                     size_t n_output_fields,
                                     sx_rowset **out);
/* Counts rows matching `filter` (NULL/"" = all live rows). */
SX_API SX_NODISCARD sx_status sx_count(sx_collection *c, const char *filter, uint64_t *out);

/* Deadlines. sx_deadline_set installs the calling thread's deadline for engine reads:
 * deadline_ns is a CLOCK_MONOTONIC time in nanoseconds (sx_clock_ns() + budget), 0 (or negative)
 * = none, the default. While it is set, sx_search, sx_query, sx_count, sx_get and
 * sx_delete_where stop with SX_ETIMEDOUT "deadline exceeded after N ms" (N: since the
 * sx_deadline_set call) once it has passed: checked at entry, between segments, every 1024 rows
 * of filter evaluation, per block of an exact scan, between the queries of an index search and
 * every 1024 expansions of a filtered graph search (HNSW, HNSW_SQ, CAGRA; worker threads get it
 * from the caller). A call that times out returns no partial result and
 * changes nothing (sx_delete_where times out before it deletes); the collection stays usable.
 * Returns: the previous deadline (restore it when done).
 * Thread-safety: per thread; other threads are unaffected. */
SX_API int64_t sx_deadline_set(int64_t deadline_ns);
/* CLOCK_MONOTONIC now, in nanoseconds: the clock of sx_deadline_set. */
SX_API int64_t sx_clock_ns(void);

/* ---------------------------------------------------------------- indexes */

typedef enum sx_index_state {
    SX_INDEX_NONE = 0,        /* no index on the collection */
    SX_INDEX_IN_PROGRESS = 1, /* some sealed segments are still being built */
    SX_INDEX_FINISHED = 2,    /* every sealed segment has the index */
    SX_INDEX_FAILED = 3       /* a build failed: fail_reason says why */
} sx_index_state;

typedef struct sx_index_info {
    char type[32]; /* "FLAT", "HNSW" */
    sx_metric metric;
    sx_index_state state;
    uint64_t indexed_rows; /* rows in segments whose index is built */
    uint64_t total_rows;   /* all rows stored (sealed + growing, deleted rows included) */
    uint64_t pending_rows; /* total_rows - indexed_rows */
    uint64_t memory_bytes; /* bytes held by built indexes (graphs; vectors are counted in the
                              collection) */
    char params[256];      /* build params, "M=16,efConstruction=200" */
    char fail_reason[256];
    uint64_t building_rows; /* rows processed so far by the build running now (0 if none) */
    uint64_t disk_bytes;    /* bytes of index files on disk (all segments) */
    uint64_t read_ios;      /* read I/Os by file-backed indexes (DISKANN), cumulative since open */
    uint64_t read_bytes;    /* bytes read by file-backed indexes, cumulative since open */
    uint64_t growing_rows; /* rows of the growing segment (in total_rows and pending_rows): searched
                              exactly, indexed once sealed (sx_flush or the segment size) */
} sx_index_info;

/* Index types (case-insensitive): FLAT, HNSW (AUTOINDEX is HNSW), HNSW_SQ, IVF_FLAT, IVF_SQ8,
 * IVF_PQ, DISKANN, GPU_CAGRA, GPU_IVF_FLAT, GPU_IVF_PQ, GPU_BRUTE_FORCE (the GPU_* types build
 * with their CPU twins when no GPU is usable); on FLOAT16 / BFLOAT16 fields FLAT and HNSW; on
 * BINARY fields BIN_FLAT (or FLAT) and BIN_IVF_FLAT (AUTOINDEX is BIN_IVF_FLAT there).
 * Parameters use Milvus's names.
 *
 * Checks an index type and its build parameters against a vector dimension and metric, with no
 * collection: exactly what sx_index_create checks before it changes anything, so a caller can
 * refuse a bad index before it writes any row. Errors: SX_EINVAL naming the type (with the list
 * of types) or the parameter and its allowed range. Thread-safety: any thread. */
SX_API SX_NODISCARD sx_status sx_index_check_params(const char *index_type,
                                                    const sx_param *params,
                                                    size_t n_params,
                                                    uint32_t dim,
                                                    sx_metric metric);

/* Options of sx_index_build_segment_file (zeroed: the defaults). */
typedef struct sx_segment_build_options {
    uint32_t threads; /* build threads (0: all cores) */
    /* An index with files beside its index file (DISKANN) writes them as <side_prefix>.diskann;
     * NULL refuses such an index (SX_EINVAL). */
    const char *side_prefix;
    /* Optional: called about every 100 ms from another thread while the build runs; nonzero
     * stops it (SX_ECANCELED, nothing written). */
    int (*cancelled)(void *ud);
    void *ud;
} sx_segment_build_options;

/* Builds the index of vector field `field` of the sealed segment file at segment_path (a
 * seg-<id>.sxs of any collection: its columns are read from its headers, every CRC checked) and
 * writes the index file a database would write for it to out_path (atomically): the job of an
 * index worker (sx_index_builder). opts: NULL for the defaults. *rows_out (optional): the
 * segment's rows. Errors: SX_ENOTFOUND (no such field), SX_EINVAL (not a vector field, bad
 * parameters), SX_ECORRUPT (the file), SX_ECANCELED, SX_ENOMEM, SX_EIO. Thread-safety: any
 * thread. */
SX_API SX_NODISCARD sx_status sx_index_build_segment_file(const char *segment_path,
                                                          const char *field,
                                                          const char *index_type,
                                                          const sx_param *params,
                                                          size_t n_params,
                                                          sx_metric metric,
                                                          const sx_segment_build_options *opts,
                                                          const char *out_path,
                                                          uint64_t *rows_out);
/* sx_index_check_params for a field of type field_type (any vector type). */
SX_API SX_NODISCARD sx_status sx_index_check_params_for(const char *index_type,
                                                        sx_field_type field_type,
                                                        const sx_param *params,
                                                        size_t n_params,
                                                        uint32_t dim,
                                                        sx_metric metric);
/* Checks search parameters for an index type and top-k (what sx_search applies to a segment
 * with that index). Errors: SX_EINVAL naming the parameter. Thread-safety: any thread. */
SX_API SX_NODISCARD sx_status sx_index_check_search_params(const char *index_type,
                                                           const sx_param *params,
                                                           size_t n_params,
                                                           uint32_t k);
/* Creates the index of the collection's first vector field (each vector field has at most one;
 * sx_index_create_on names the field). Builds run in the background, one job per
 * sealed segment; growing rows are searched exactly until sealed.
 * Errors: SX_EINVAL (unknown type, parameter out of range for the collection's dim and metric:
 * the message names it; nothing changed), SX_EEXIST (an index with other params exists), SX_EIO. */
SX_API SX_NODISCARD sx_status sx_index_create(sx_collection *c,
                                              const char *index_type,
                                              const sx_param *params,
                                              size_t n_params);
SX_API SX_NODISCARD sx_status sx_index_describe(sx_collection *c, sx_index_info *out);
SX_API SX_NODISCARD sx_status sx_index_drop(sx_collection *c);
/* Waits until every sealed segment has the index of every indexed vector field (or a build
 * failed). timeout_ms 0 = forever.
 * Errors: SX_ETIMEDOUT, SX_ENOTFOUND (no index), or the failed build's own status (SX_ENOMEM
 * over the build memory limit, SX_EINVAL, SX_EIO, ...) with its reason in sx_errmsg(). */
SX_API SX_NODISCARD sx_status sx_index_wait(sx_collection *c, uint64_t timeout_ms);
/* The same on one vector field: `field` NULL or "" = the first vector field, else the name of a
 * FLOAT_VECTOR field (SX_EINVAL otherwise). Each vector field's index is built, stored, described
 * and dropped on its own; sx_index_wait_on waits for that field's only. */
SX_API SX_NODISCARD sx_status sx_index_create_on(sx_collection *c,
                                                 const char *field,
                                                 const char *index_type,
                                                 const sx_param *params,
                                                 size_t n_params);
SX_API SX_NODISCARD sx_status sx_index_describe_on(sx_collection *c,
                                                   const char *field,
                                                   sx_index_info *out);
SX_API SX_NODISCARD sx_status sx_index_drop_on(sx_collection *c, const char *field);
SX_API SX_NODISCARD sx_status sx_index_wait_on(sx_collection *c,
                                               const char *field,
                                               uint64_t timeout_ms);

/* ---------------------------------------------------------------- misc */

/* Uploads to the object store (sx_db_options.storage_url) whatever it lacks of every
 * collection's committed state: files named by the local manifests, index files built since the
 * last sync, then each collection's store manifest; then deletes objects no manifest names.
 * sx_flush already does this for its collection; this also covers index builds that finished
 * after the last flush. A no-op without a store or when read-only.
 * Returns: SX_OK, or the first failure (the other collections are still tried).
 * Errors: SX_EREMOTE (the store failed: the message names the object; nothing local changed, so
 * nothing acknowledged is lost and a later sync or flush retries), SX_EIO, SX_ENOMEM.
 * Thread-safety: any thread; serialised with flushes per collection. */
SX_API SX_NODISCARD sx_status sx_db_sync(sx_db *db);

/* Read-only databases with a store (cluster mode's query nodes): brings every collection to
 * the store's current manifest (the fence's pointer when opts.store_fence is set). A changed
 * collection is reopened from it: objects the previous manifest named with the same key are
 * kept, the others downloaded; a collection new in the store is restored, one gone from it
 * is removed. Handles opened before keep the older version until released (its files are
 * removed once no handle uses it); sx_collection_open after the call gets the new one.
 * *changed (optional): collections reloaded, added or removed. Errors: SX_EINVAL (not
 * read-only, no store), SX_EREMOTE (listing or downloading failed: the collections not yet
 * refreshed keep their version; call again), SX_ECORRUPT. Thread-safety: one refresh at a time
 * per database; any thread; concurrent reads are fine. */
SX_API SX_NODISCARD sx_status sx_db_refresh(sx_db *db, size_t *changed);

/* A small object at the root of a store (storage_url as in sx_db_options; s3_endpoint NULL:
 * $SEXTANT_S3_ENDPOINT, else AWS): cluster mode's identity marker CLUSTER-UUID. key: a plain
 * name ([A-Za-z0-9._-], no '/'). get: *data (owned: free with sx_free_bytes) gets the bytes and
 * a NUL; SX_ENOTFOUND when absent. put: atomic (the whole object or nothing). At most 1 MiB.
 * Errors: SX_EINVAL (URL or key), SX_EREMOTE. */
SX_API SX_NODISCARD sx_status sx_store_object_get(
    const char *storage_url, const char *s3_endpoint, const char *key, char **data, size_t *len);
SX_API SX_NODISCARD sx_status sx_store_object_put(const char *storage_url,
                                                  const char *s3_endpoint,
                                                  const char *key,
                                                  const void *data,
                                                  size_t len);
SX_API void sx_free_bytes(void *p);
/* Whole objects anywhere under a store's root, as files (cluster mode's index workers move
 * segment and index files with them): get writes key's content to path (atomically: a temporary
 * name, then rename), put uploads path's content as key (the whole object or nothing), delete
 * removes key (absent: SX_OK). key: relative to the root, '/'-separated, no "..", "//" or leading
 * '/'. Errors: SX_EINVAL (URL or key), SX_ENOTFOUND (get: absent), SX_EREMOTE, SX_EIO. */
SX_API SX_NODISCARD sx_status sx_store_file_get(const char *storage_url,
                                                const char *s3_endpoint,
                                                const char *key,
                                                const char *path);
SX_API SX_NODISCARD sx_status sx_store_file_put(const char *storage_url,
                                                const char *s3_endpoint,
                                                const char *key,
                                                const char *path);
SX_API SX_NODISCARD sx_status sx_store_object_delete(const char *storage_url,
                                                     const char *s3_endpoint,
                                                     const char *key);

/* Verifies checksums of every manifest, segment, delete and index file, and the WAL.
 * Returns SX_OK or SX_ECORRUPT with the first problem in sx_errmsg(). */
SX_API SX_NODISCARD sx_status sx_db_check(sx_db *db);

/* Process-wide I/O totals since start: every read/write/fsync Sextant issued on its files
 * (WAL, segments, manifests, index files, DISKANN sector reads). Thread-safety: any thread;
 * relaxed counters, so a snapshot may be mid-update by one operation. */
typedef struct sx_io_stats {
    uint64_t read_ops;
    uint64_t read_bytes;
    uint64_t write_ops;
    uint64_t write_bytes;
    uint64_t fsyncs; /* fdatasync/fsync calls on files and directories */
} sx_io_stats;

SX_API void sx_io_stats_get(sx_io_stats *out);

/* The cache of store-backed files (sx_db_options.cache_limit_bytes): cumulative counters of
 * the in-memory block cache (DISKANN sectors read with ranged GETs) and of local copies.
 * All zero without a store or a limit. Thread-safety: any thread. */
typedef struct sx_cache_stats {
    uint64_t limit_bytes, block_bytes, resident_bytes;
    uint64_t hits, misses; /* blocks served from memory / fetched */
    uint64_t waits;        /* blocks another thread was fetching (one GET served both) */
    uint64_t evictions;    /* blocks evicted to stay under the limit */
    uint64_t fetches;      /* ranged GETs issued (a run of missing blocks is one GET) */
    uint64_t fetch_errors;
    uint64_t bytes_fetched;
    uint64_t local_evictions, local_evicted_bytes; /* local copies removed by the limit */
    uint64_t local_fetches;                        /* local copies downloaded again on demand */
} sx_cache_stats;

SX_API void sx_db_cache_stats(sx_db *db, sx_cache_stats *out);
/* Indexes this database published from files its sx_index_builder built (cluster mode: built by
 * index workers), since open. Thread-safety: any thread. */
SX_API uint64_t sx_db_remote_builds(sx_db *db);

/* Where the memory budget goes (sx_db_options.memory_limit_bytes). Charges are the holders'
 * estimates of their arrays; the process's RSS also has code, stacks and allocator slack.
 * Thread-safety: any thread. */
typedef struct sx_memory_stats {
    uint64_t limit_bytes; /* 0: unlimited (counted only) */
    uint64_t used_bytes, peak_bytes;
    uint64_t growing_bytes; /* growing segments' rows */
    uint64_t sealed_bytes;  /* sealed segments' heap columns (mapped columns are not heap) */
    uint64_t pkmap_bytes;   /* primary-key lookup */
    uint64_t index_bytes;   /* built indexes in RAM (graphs, PQ codes, node caches) */
    uint64_t build_bytes;   /* index builds running */
    uint64_t cache_bytes;   /* block cache and DISKANN node caches sized from the budget */
    uint64_t import_bytes;  /* bulk-import buffers */
    uint64_t scratch_bytes; /* search scratch and answers being assembled */
    uint64_t refusals;      /* charges refused (SX_ENOMEM) since open */
    char source[160];       /* where the limit comes from */
} sx_memory_stats;

SX_API void sx_db_memory_stats(sx_db *db, sx_memory_stats *out);
SX_API void sx_memory_budget_stats(const sx_memory_budget *b, sx_memory_stats *out);

/* I/O profile, per phase and backend, for sizing storage (issue 5). The engine tags its threads:
 * inserts, deletes and flushes are INSERT, background index builds BUILD, searches / queries /
 * gets QUERY; anything else OTHER. A caller may set its own thread's phase (the benchmark does).
 * Sizes are histogrammed by power of two: bucket 0 = up to 4 KiB, bucket i = up to 4 KiB << i,
 * the last bucket everything larger. Counters are cumulative since start; IOPS = ops / the
 * caller's measured phase time. Thread-safety: any thread (relaxed counters). */
typedef enum sx_io_phase {
    SX_IO_PHASE_OTHER = 0,
    SX_IO_PHASE_INSERT = 1,
    SX_IO_PHASE_BUILD = 2,
    SX_IO_PHASE_QUERY = 3
} sx_io_phase;

#define SX_IO_PHASES       4
#define SX_IO_BACKENDS     2  /* 0: local files, 1: object store (S3) */
#define SX_IO_SIZE_BUCKETS 12 /* <=4K, <=8K, ... <=4M, larger */

typedef struct sx_io_counter {
    uint64_t read_ops, read_bytes, write_ops, write_bytes;
    uint64_t read_hist[SX_IO_SIZE_BUCKETS];
    uint64_t write_hist[SX_IO_SIZE_BUCKETS];
} sx_io_counter;

typedef struct sx_io_profile {
    sx_io_counter c[SX_IO_PHASES][SX_IO_BACKENDS];
} sx_io_profile;

SX_API void sx_io_profile_get(sx_io_profile *out);
/* Sets the calling thread's phase; returns the previous one. */
SX_API sx_io_phase sx_io_phase_set(sx_io_phase p);

/* ---------------------------------------------------------------- bulk import
 *
 * Milvus's bulk import (docs/internals/IMPORT.md): files are read in groups ("batches" in
 * Milvus's words), each group one of
 *   - one row-based JSON file: {"rows": [{field: value, ...}, ...]} or a top-level array of rows;
 *   - one NumPy file per field, named <field>.npy (float vectors '<f4' shape (n, dim); INT64 '<i8'
 *     or '<i4'; DOUBLE '<f8' or '<f4'; BOOL '|b1'; VARCHAR '<U<k>'; all shape (n,));
 *   - a .fvecs or .bvecs file for the vector field (with .npy files for the other fields);
 *   - an HDF5 file (.hdf5/.h5): dataset named like the vector field or "train", and a dataset
 *     per scalar field named like it (or .npy files for them).
 * Parquet is refused (SX_EINVAL): it needs an Arrow library, and Debian has none.
 * A path is local ("/abs", "file:///abs", or relative to the working directory when the
 * database has no store), in the database's object store (a relative key when storage_url is
 * set), or "s3://BUCKET/KEY" (the database's S3 endpoint and credentials).
 * Rows go straight into sealed segments (no WAL record per row); the job is atomic: all its
 * segments enter the manifest in one commit at the end, so a failure or a crash before it
 * leaves nothing visible (the segment files are removed). Every header is checked against the
 * schema before a row is written (each non-auto-id field present once, dims, dtypes); auto ids
 * are assigned; duplicate primary keys (in the job or with stored rows) fail the job. */
typedef enum sx_import_state {
    SX_IMPORT_PENDING = 0,
    SX_IMPORT_IMPORTING = 1,
    SX_IMPORT_COMPLETED = 2,
    SX_IMPORT_FAILED = 3
} sx_import_state;

/* Progress of a running import: rows and bytes read so far and the totals (rows_total is 0
 * when not known before reading, as for JSON; bytes_total is the files' sizes). */
typedef struct sx_import_progress {
    uint64_t rows_done, rows_total;
    uint64_t bytes_done, bytes_total;
    size_t group;                               /* the group being read (0-based) */
    size_t n_groups;                            /* groups in the job */
    uint64_t group_rows_done, group_bytes_done; /* of that group */
    uint64_t group_bytes_total;                 /* its files' sizes */
    bool committing; /* every row is read; the segments are being committed */
} sx_import_progress;

/* Called after each batch (and once at the end) on the importing thread; returning false
 * cancels the import (SX_ECANCELED, nothing visible). */
typedef bool (*sx_import_progress_fn)(void *ctx, const sx_import_progress *p);

typedef struct sx_import_group {
    const char *const *paths;
    size_t n_paths;
} sx_import_group;

typedef struct sx_import_opts {
    sx_import_progress_fn progress; /* optional */
    void *progress_ctx;
    uint64_t batch_rows; /* rows per sealed segment (0: the collection's segment size) */
    /* Milvus's dynamic field: a VARCHAR field (or NULL) that gets, per row, the keys of a JSON
     * row that are not in the schema as a JSON object text ("{}" for rows of other formats).
     * Without it such keys fail the import. */
    const char *dynamic_field;
    /* VARCHAR fields set to one value in every imported row (key = field, value = text), e.g. a
     * partition column; the files must not give them. */
    const sx_param *consts;
    size_t n_consts;
    /* Hash routing (Milvus's partition key mode): every row's VARCHAR field route_field (not
     * given by the files) gets "<route_prefix><i>", where i in [0, route_parts) is the bucket of
     * the row's value of route_key (an INT64 or VARCHAR field, not nullable) as Milvus hashes
     * partition keys (MurmurHash3 of an integer, CRC-32 of a string's first 100 bytes). NULL
     * route_field: off. */
    const char *route_field;
    const char *route_key;
    const char *route_prefix; /* NULL: "" */
    uint32_t route_parts;     /* >= 1 when route_field is set */
} sx_import_opts;

typedef struct sx_import_result {
    uint64_t rows;     /* rows imported */
    uint64_t bytes;    /* bytes of the files read */
    uint32_t segments; /* sealed segments committed */
} sx_import_result;

/* Imports the groups into c synchronously (see above). opts and out may be NULL. Errors:
 * SX_EINVAL (a file does not fit the schema or is malformed: the message names file and field),
 * SX_ENOTFOUND (a file is missing), SX_EEXIST (duplicate key), SX_EREMOTE (the store failed),
 * SX_ECANCELED, SX_ENOMEM (the memory budget), SX_EIO, SX_ENOSPC. On any error nothing of the
 * job is visible. Thread-safety: any thread; runs alongside inserts and searches (the commit
 * takes the collection's flush and write locks briefly). */
SX_API SX_NODISCARD sx_status sx_import_run(sx_collection *c,
                                            const sx_import_group *groups,
                                            size_t n_groups,
                                            const sx_import_opts *opts,
                                            sx_import_result *out);

/* Import jobs: sx_import_run on the database's import thread (one job at a time, in order).
 * Jobs are kept in memory until sx_db_close (listed after they finish; not persisted). */
#define SX_IMPORT_JOB_ID 32

typedef struct sx_import_job_info {
    char job_id[SX_IMPORT_JOB_ID];
    char collection[SX_MAX_NAME + 1];
    sx_import_state state;
    sx_import_progress progress;
    uint32_t percent;         /* 0..100 (100 only when completed) */
    char reason[512];         /* failed jobs: the error message */
    sx_status status;         /* failed jobs: the error */
    int64_t create_time_ms;   /* wall clock, ms since the epoch */
    int64_t complete_time_ms; /* 0 until completed or failed */
    uint64_t rows_imported;   /* committed rows (completed jobs) */
    size_t n_groups;

    /* per group (n_groups entries): its files joined with ",", its bytes and rows read, and
     * its state. Owned by the info: free with sx_import_job_info_fini. */
    struct sx_import_group_info {
        char *files;
        uint64_t bytes, rows; /* read so far */
        uint64_t total_bytes; /* the files' sizes (0 until the job has opened them) */
        sx_import_state state;
    } * groups;
} sx_import_job_info;

/* Queues an import job of the groups into collection `name` (names, dynamic_field and consts of
 * opts are copied; its progress callback is not used; NULL: defaults) and writes its id into
 * job_id. Errors: SX_ENOTFOUND (no such collection), SX_EINVAL (no files, a
 * partition other than "_default"), SX_ENOMEM. The files are checked when the job runs; its
 * state then says FAILED with the reason. */
SX_API SX_NODISCARD sx_status sx_import_submit(sx_db *db,
                                               const char *name,
                                               const sx_import_group *groups,
                                               size_t n_groups,
                                               const sx_import_opts *opts,
                                               char job_id[SX_IMPORT_JOB_ID]);
/* Fills *out with the job's state. SX_ENOTFOUND for an unknown id. */
SX_API SX_NODISCARD sx_status sx_import_job_get(sx_db *db,
                                                const char *job_id,
                                                sx_import_job_info *out);
/* Lists jobs (of collection `name`, or all with NULL), oldest first. Owned: free with
 * sx_import_jobs_free(infos, n). */
SX_API SX_NODISCARD sx_status sx_import_job_list(sx_db *db,
                                                 const char *name,
                                                 sx_import_job_info **infos,
                                                 size_t *n);
SX_API void sx_import_job_info_fini(sx_import_job_info *info);
SX_API void sx_import_jobs_free(sx_import_job_info *infos, size_t n);
/* Waits until the job is COMPLETED or FAILED, or timeout_ms passes (SX_ETIMEDOUT; <0: forever). */
SX_API SX_NODISCARD sx_status sx_import_job_wait(sx_db *db, const char *job_id, int64_t timeout_ms);
SX_API const char *sx_import_state_str(sx_import_state st); /* "Pending", "Importing", ... */

SX_API const char *sx_version(void);
SX_API const char *sx_simd_level(void); /* "avx512", "avx2" or "scalar": the kernels in use */

#ifdef __cplusplus
}
#endif
#endif /* SEXTANT_H */
