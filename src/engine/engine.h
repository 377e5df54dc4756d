/*
 * engine.h: internal structures of the engine layer (db, collection, segment, read views).
 * Locking: docs/internals/LOCKING.md. In short, per collection:
 *   write_mu  serialises writers (insert/upsert/delete/flush staging/compaction swap) and guards
 *             the pk map, id counters, the growing segment's appends and the WAL append order.
 *   seg_lock  (rwlock) guards the segment list and the growing pointer and the index spec;
 *             readers take it shared only to build a read view (refcounted segments).
 *   flush_mu  serialises flush and compaction (long I/O runs under it, not under write_mu).
 *   idx_mu    (per segment) guards the segment's index pointer.
 * Lock order: flush_mu -> write_mu -> seg_lock -> idx_mu -> db->mu. The WAL has its own mutex,
 * taken last. Rows become visible to readers when n_rows is published (release store) after the
 * row data is written; readers load it with acquire.
 */
#ifndef SX_ENGINE_ENGINE_H
#define SX_ENGINE_ENGINE_H
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/expr.h"
#include "index/index.h"
#include "platform/fs.h"
#include "storage/segfile.h"
#include "storage/wal.h"
#include "util/lock.h"

#define SX__CHUNK_ROWS 8192u /* growing-segment chunk; a multiple of 64 (bitset words) */

/* An index attached to a segment; refcounted so a search can keep using an index that a
 * concurrent drop detaches. */
typedef struct sx__idxref {
    atomic_int refs; /* acq_rel on decrement: the last owner frees */
    const sx__index_ops *ops;
    sx__index *idx;
    /* the index's in-RAM part (ops->memory_bytes) charged to the database's budget as
     * SX__MEM_INDEX when published on a segment, given back by the last unref */
    struct sx__membudget *budget;
    uint64_t charged;
    /* of memory_bytes, the optional cache size_cache gave it (build.c): charged as SX__MEM_CACHE
     * instead, so all such caches together stay within their share of the budget */
    uint64_t cache_charged;
} sx__idxref;

typedef struct sx__segment {
    uint64_t id;
    atomic_int refs; /* acq_rel on decrement */
    bool sealed;     /* immutable rows (delete bits still change) */
    size_t cap_rows;
    size_t chunk_rows;
    size_t n_chunks;      /* allocated chunk slots */
    atomic_size_t n_rows; /* visible rows: release after data written, acquire by readers */
    size_t n_fields;
    void ***chunks; /* [field][chunk]; sealed: one chunk per field */
    /* [field][chunk]: NULL bits of a nullable field (bit i of chunk ch: row ch * chunk_rows + i
     * is NULL; words of chunk_rows bits, zero past the rows), NULL for the other fields. Growing:
     * allocated with the field's chunk, bits set with atomic or (commit_rows) and read with
     * atomic loads (sx__seg_is_null, view.c), since a word may hold published and unpublished
     * rows. nulls_mapped bit f: field f's words point into `map`. */
    uint64_t ***nulls;
    uint64_t nulls_mapped;
    bool *types_is_str; /* per field: VARCHAR (strings owned by the segment) */
    void *map;          /* sealed from a file: read-only mapping of the segment file */
    size_t map_len;
    uint64_t mapped_mask; /* bit f: field f's chunk points into `map` (not freed with s) */
    /* Key index of a sealed segment opened from its file (the file's key block, mapped, or
     * built in the heap for a version 1 file: pk.owned, charged as SX__MEM_PKMAP). pk.col ==
     * UINT32_MAX: none; the segment's live keys are then in the collection's hash map (a
     * segment sealed in memory and not yet replaced by its mapped file). Immutable. */
    sx__segpk pk;
    uint64_t pk_charged;
    uint64_t *deleted; /* cap_rows bits, atomic bit ops (bitset.h) */
    atomic_size_t n_deleted;
    /* guarded by the collection's write_mu */
    uint64_t del_gen;         /* generation of the persisted delete file (0 none) */
    size_t persisted_deleted; /* n_deleted when del_gen was written */
    bool persisted;           /* segment file is durable and in the manifest */
    /* guarded by idx_mu; [v]: the collection's v-th vector field (sx__vfield) */
    sx__mutex idx_mu;
    sx__idxref *index[SX_MAX_VECTOR_FIELDS];
    bool build_pending[SX_MAX_VECTOR_FIELDS];
    /* sealed segments: the inverted index of a sparse-vector VARCHAR field f, built on first
     * search (sparse.c), NULL until then; freed with the segment. Guarded by idx_mu (installed
     * once; read under it, used after, since it never changes once installed). */
    struct sx__sparse_ix *sparse[SX_MAX_FIELDS];
    /* Memory charged to the database's budget for this segment's heap (a growing segment: its
     * chunks and strings, kind SX__MEM_GROWING), given back when the segment is freed (the last
     * reference). Guarded by the collection's write_mu while growing; immutable once sealed. */
    struct sx__membudget *budget;
    uint64_t charged;
    int charge_kind; /* sx__memkind */
} sx__segment;

typedef struct sx__pkmap sx__pkmap;

/* A vector field of a collection: its dimension, metric and index spec. field and dim are
 * immutable; metric changes only under flush_mu + write_mu + seg_lock (write side) while the
 * field has no index (sx_collection_set_metric_on); the spec and the failure are guarded by
 * seg_lock (changed under its write side with flush_mu and write_mu held). */
typedef struct sx__vfield {
    size_t field;     /* index in the collection's fields */
    uint32_t dim;     /* values (bits for binary) */
    sx__vtype vt;     /* element type (FLOAT, FLOAT16, BFLOAT16, BINARY vector fields) */
    size_t row_bytes; /* bytes of one vector */
    sx_metric metric;
    char *index_type;       /* NULL: no index */
    sx_param *index_params; /* owned */
    size_t n_index_params;
    char index_params_str[256];
    const sx__index_ops *iops;
    char fail_reason[256];
    sx_status fail_status; /* the failed build's status (with fail_reason) */
} sx__vfield;

struct sx_collection {
    sx_db *db;
    char *name;
    char *dir;
    atomic_int refs; /* the db list holds one; handles hold one each */
    atomic_bool dropped;
    atomic_bool merge_queued; /* a background merge job of it is in the builder's queue */
    /* schema: immutable after create */
    size_t n_fields;
    sx_field_def *fields; /* owned names */
    sx_field_type *types;
    bool *nullable; /* per field (the schema's nullable flags) */
    const char **names;
    size_t pk; /* index of the primary key field */
    /* the vector fields in schema order (vfs[0]: the default of searches and index calls);
     * field and dim immutable, the rest guarded as sx__vfield says */
    size_t n_vf;
    sx__vfield vfs[SX_MAX_VECTOR_FIELDS];
    sx__expr_schema xschema;

    sx__mutex write_mu;
    sx__mutex flush_mu;
    /* threads in sx__coll_flush waiting for flush_mu (relaxed count; sx_compact yields to them
     * between two segments, since a mutex hands itself to no one in particular) */
    atomic_int flush_waiters;
    sx__rwlock seg_lock;
    /* guarded by seg_lock (write side also holds write_mu when changing it) */
    sx__segment **segs; /* sealed, in id order */
    size_t n_segs;
    sx__segment *growing; /* never NULL while open */
    /* guarded by write_mu */
    sx__pkmap *pkmap;
    uint64_t next_auto_id;
    uint64_t next_seg_id;
    uint64_t checkpoint_lsn;
    uint64_t manifest_gen;
    size_t max_growing_rows;
    sx__wal *wal;
    pthread_cond_t index_cv; /* signalled (with seg_lock's companion idx_wait_mu) on builds */
    sx__mutex idx_wait_mu;
    /* object store (store.c): NULL without one. store_mu guards *cs; order flush_mu -> store_mu */
    sx__mutex store_mu;
    struct sx__cstore *cs;
};

/* The index in c->vfs of field f, or SIZE_MAX when f is not a vector field. */
static inline size_t sx__vslot(const sx_collection *c, size_t f)
{
    for (size_t v = 0; v < c->n_vf; v++)
        if (c->vfs[v].field == f)
            return v;
    return SIZE_MAX;
}

typedef struct sx__job {
    struct sx__job *next;
    sx_collection *c; /* ref held */
    sx__segment *s;   /* ref held; NULL: a background merge of c's small segments */
    size_t v;         /* the vector field (c->vfs[v]) whose index is built */
    bool local;       /* build it in this process (an sx_index_builder did not) */
} sx__job;

/* A thread that hands builds to the database's sx_index_builder (build.c). */
typedef struct sx__rslot {
    struct sx_db *db;
    pthread_t thr;
    sx_collection *c;   /* guarded by db->mu: the collection of the job out, or NULL */
    atomic_bool cancel; /* the job out is no longer wanted */
    struct sx__job *j;  /* the job out (this slot's thread only) */
} sx__rslot;

struct sx_db {
    /* 1 for the owner until sx_db_close, plus 1 per collection object alive (a handle of a
     * dropped collection may outlive sx_db_close: the struct, mu and opts stay valid for it,
     * everything else is released by sx_db_close). Freed by sx__db_unref at 0. */
    atomic_size_t refs;
    char *dir;
    sx_db_options opts;
    sx__file *lock;
    sx__mutex mu; /* guards colls, creating and the job queue */
    sx_collection **colls;
    size_t n_colls;
    char **creating; /* guarded by mu: names being created (reserved, not yet in colls) */
    size_t n_creating;
    pthread_cond_t job_cv;
    sx__job *jobs_head, *jobs_tail;
    bool stopping;
    bool has_builder;
    pthread_t builder;
    atomic_bool cancel_build;     /* set by close and by an index drop of the running job's coll. */
    sx_collection *building;      /* guarded by mu: collection of the running job (or NULL) */
    size_t building_v;            /* guarded by mu: its vector field */
    atomic_size_t build_progress; /* rows done by the running job (relaxed) */
    /* builds offered to opts.index_builder: a queue the builder fills (guarded by mu) and the
     * slots' threads that take from it (n_rslots fixed while open) */
    sx__job *rjobs_head, *rjobs_tail;
    pthread_cond_t rjob_cv;
    sx__rslot *rslots;
    size_t n_rslots;
    atomic_uint_fast64_t remote_builds; /* indexes built by the index_builder, published here */
    struct sx__objstore *store;         /* NULL: local only (store.c); immutable while open */
    /* cache.c: NULL without a store or without cache_limit_bytes; freed after the collections */
    struct sx__blockcache *bcache;
    atomic_uint_fast64_t local_evictions; /* local copies removed by the limit (relaxed) */
    atomic_uint_fast64_t local_evicted_bytes;
    atomic_uint_fast64_t local_fetches; /* files downloaded again on demand */
    /* the memory budget (platform/membudget.h): never NULL while open (unlimited budgets count
     * too); freed by sx__db_unref, after every handle that may still give memory back */
    struct sx__membudget *budget;
    bool budget_shared; /* opts.memory_budget: borrowed, not freed here */
    /* import.c: the import jobs and their thread (NULL until the first job); stopped by
     * sx_db_close before the builder */
    struct sx__importer *importer;
    /* sx_db_refresh: older versions of refreshed collections, kept (one reference each) until
     * no handle uses them; guarded by mu */
    sx_collection **retired;
    size_t n_retired;
};

/* A consistent set of segments for one read (search/query/count/get). */
typedef struct sx__view {
    size_t n;
    sx__segment **segs; /* ref held */
    size_t *rows;       /* visible rows per segment at view time */
    /* idx[i][v]: segment i's index of vector field v (ref held) or NULL */
    sx__idxref *(*idx)[SX_MAX_VECTOR_FIELDS];
} sx__view;

/* segment.c */
SX_NODISCARD sx_status sx__seg_new_growing(const sx_collection *c,
                                           uint64_t id,
                                           size_t cap,
                                           sx__segment **out);
/* A sealed segment taking ownership of contiguous column arrays (cols[f], n rows) and of the NULL
 * bit arrays nulls[f] (sx__bits_words(n) words from sx__calloc, for nullable fields; nulls may
 * be NULL when no field is nullable); its heap is charged to the budget as SX__MEM_SEALED
 * (forced: the rows must be held). On error nothing is taken. */
SX_NODISCARD sx_status sx__seg_new_sealed(const sx_collection *c,
                                          uint64_t id,
                                          size_t n,
                                          void **cols,
                                          uint64_t **nulls,
                                          sx__segment **out);
/* Opens the sealed segment file seg-<id>.sxs of c: fixed-width columns and the key block stay in
 * the mapping (no heap copy; CRCs verified by streaming reads), VARCHAR columns are decoded into
 * the heap; a version 1 file gets its key index built in the heap. n_expect: the manifest's row
 * count (a mismatch is SX_ECORRUPT). The delete bits are all clear. Heap charged as
 * SX__MEM_SEALED (bitset, strings) and SX__MEM_PKMAP (a heap key index). Owned: sx__seg_unref.
 * Errors: those of sx__segfile_read, SX_ECORRUPT, SX_ENOMEM. Thread-safety: reads c's immutable
 * schema only. */
SX_NODISCARD sx_status sx__seg_open_file(const sx_collection *c,
                                         uint64_t id,
                                         uint64_t n_expect,
                                         sx__segment **out);
void sx__seg_ref(sx__segment *s);
void sx__seg_unref(sx__segment *s);

static inline void *sx__seg_cell(const sx__segment *s, size_t f, size_t row, size_t width)
{
    return (char *)s->chunks[f][row / s->chunk_rows] + (row % s->chunk_rows) * width;
}

/* Whether row `row` (published) of field f is NULL. */
static inline bool sx__seg_is_null(const sx__segment *s, size_t f, size_t row)
{
    if (!s->nulls[f])
        return false;
    const uint64_t *w = s->nulls[f][row / s->chunk_rows];
    size_t i = row % s->chunk_rows;
    return w && (__atomic_load_n(&w[i / 64], __ATOMIC_RELAXED) >> (i % 64) & 1);
}

size_t sx__field_width(const sx_collection *c, size_t f);
/* Scales one stored vector of element type vt (dim values) to unit L2 norm in place, for COSINE
 * fields: float32 as sx__normalize; float16 / bfloat16 widened, normalised in float32 and rounded
 * back (so the stored row's norm is 1 within the type's rounding, 2^-11 or 2^-8); binary rows
 * and zero vectors are left as they are. */
void sx__normalize_row(sx__vtype vt, void *row, size_t dim);
/* Checks n float16 / bfloat16 rows (dim values each) of field f: every value finite (SX_EINVAL
 * naming the row), and *over_row = the first row whose squared norm (widened, summed in double)
 * exceeds SX_MAX_SQNORM (n when none), *norm2 its norm: sx__first_over_sqnorm's contract for
 * float32 rows. Used by inserts and imports. */
SX_NODISCARD sx_status sx__check_half_rows(
    sx_collection *c, size_t f, const uint16_t *v, size_t n, size_t *over_row, double *norm2);

/* query.c, shared with sparse.c: result rows by (segment of the view, row), the output fields a
 * request names (the primary key first; "*" = all), the rowset of such rows, a filter (NULL for
 * none or blank). */
typedef struct sx__rowref {
    uint32_t seg;
    uint32_t row;
} sx__rowref;

SX_NODISCARD sx_status sx__resolve_fields(
    sx_collection *c, const char *const *names, size_t n, size_t *out, size_t *n_out);
SX_NODISCARD sx_status sx__build_rowset(sx_collection *c,
                                        const struct sx__view *v,
                                        const sx__rowref *refs,
                                        size_t n,
                                        const size_t *fields,
                                        size_t n_fields,
                                        sx_rowset **out);
SX_NODISCARD sx_status sx__parse_filter(sx_collection *c, const char *filter, sx__expr **e);
/* A search's answer: the rowset of the hits refs[0, n) (nq queries, *topks hits each) with the
 * output fields asked for (the primary key first); on SX_OK the rowset owns *topks and *dists
 * (set to NULL here). */
SX_NODISCARD sx_status sx__search_rowset(sx_collection *c,
                                         const struct sx__view *v,
                                         const sx__rowref *refs,
                                         size_t n,
                                         const char *const *output_fields,
                                         size_t n_output_fields,
                                         size_t nq,
                                         size_t **topks,
                                         float **dists,
                                         sx_rowset **out);
/* sparse.c: frees a segment's sparse index (and gives its memory back). */
void sx__sparse_ix_free(struct sx__sparse_ix *ix);
/* Copies the growing segment's visible rows into a new contiguous sealed segment (same id),
 * moving varchar strings. Caller holds write_mu. */
SX_NODISCARD sx_status sx__seg_seal_copy(const sx_collection *c, sx__segment *g, sx__segment **out);
/* Column views of chunk `ch` (rows [ch*chunk_rows, ...)) for expression evaluation. */
void sx__seg_colrefs(const sx_collection *c, const sx__segment *s, size_t ch, sx__colref *out);
size_t sx__seg_memory(const sx_collection *c, const sx__segment *s);
void sx__idxref_unref(sx__idxref *r);

/* pkmap.c: primary key -> (segment id, row) hash map for the keys of segments without a key
 * index (the growing segment, a segment sealed in memory until its mapped file replaces it);
 * sealed segments opened from their files answer from their key index (sx__pk_get_*).
 * Guarded by write_mu. */
SX_NODISCARD sx_status sx__pkmap_new(bool str, sx__pkmap **out);
/* Charges the map's table to b as SX__MEM_PKMAP from now on (forced: the map must hold every
 * key); sx__pkmap_free gives it back. */
void sx__pkmap_set_budget(sx__pkmap *m, struct sx__membudget *b);
/* Removes every entry pointing into segment `seg` (its key index now answers for it) and
 * shrinks the table to what the remaining keys need. */
void sx__pkmap_drop_seg(sx__pkmap *m, uint64_t seg);
/* The live location of key k in c: the hash map, then the key index of each sealed segment
 * (Bloom filter, binary search over the mapped sorted keys, delete bit). Caller holds write_mu. */
bool sx__pk_get_i(const sx_collection *c, int64_t k, uint64_t *seg, uint32_t *row);
bool sx__pk_get_s(const sx_collection *c, const char *k, uint64_t *seg, uint32_t *row);
/* Heap bytes of c's key lookup structures (hash map + heap key indexes). Caller holds write_mu. */
size_t sx__pk_memory(const sx_collection *c);
void sx__pkmap_free(sx__pkmap *m);
/* Returns true and the location if present. */
bool sx__pkmap_get_i(const sx__pkmap *m, int64_t k, uint64_t *seg, uint32_t *row);
bool sx__pkmap_get_s(const sx__pkmap *m, const char *k, uint64_t *seg, uint32_t *row);
SX_NODISCARD sx_status sx__pkmap_put_i(sx__pkmap *m, int64_t k, uint64_t seg, uint32_t row);
SX_NODISCARD sx_status sx__pkmap_put_s(sx__pkmap *m, const char *k, uint64_t seg, uint32_t row);
/* Takes ownership of k (an sx__malloc'd string), also on failure. After a successful
 * sx__pkmap_reserve(m, n), the next n puts of new keys do not allocate (put_i and put_s_take
 * cannot fail then). */
SX_NODISCARD sx_status sx__pkmap_put_s_take(sx__pkmap *m, char *k, uint64_t seg, uint32_t row);
SX_NODISCARD sx_status sx__pkmap_reserve(sx__pkmap *m, size_t extra);
void sx__pkmap_del_i(sx__pkmap *m, int64_t k);
void sx__pkmap_del_s(sx__pkmap *m, const char *k);
size_t sx__pkmap_count(const sx__pkmap *m);
size_t sx__pkmap_memory(const sx__pkmap *m);

/* view.c */
SX_NODISCARD sx_status sx__view_get(sx_collection *c, sx__view *v);
void sx__view_release(sx__view *v);
/* allow bitset for segment i of the view: not deleted and (expr == NULL or matches).
 * *bits owned (sx__free); *n_allowed counts set bits. */
SX_NODISCARD sx_status sx__view_allow(const sx_collection *c,
                                      const sx__view *v,
                                      size_t i,
                                      const sx__expr *e,
                                      uint64_t **bits,
                                      size_t *n_allowed);
sx__segment *sx__find_seg(sx_collection *c, uint64_t id); /* under write_mu or seg_lock */

/* ingest.c */
SX_NODISCARD sx_status
sx__replay_record(void *ctx, uint64_t lsn, uint8_t type, const void *payload, size_t len);

/* collection.c */
SX_NODISCARD sx_status sx__coll_open(sx_db *db, const char *name, sx_collection **out);
void sx__coll_unref(sx_collection *c);
/* db.c: drops one reference of db->refs; frees the struct at 0. */
void sx__db_unref(sx_db *db);
SX_NODISCARD sx_status sx__coll_flush(sx_collection *c, bool from_insert);
/* The merge half of sx_compact alone: runs of small sealed segments without deletes merged up to
 * the merge target (sx_db_options.merge_max_bytes), then a store sync. Takes flush_mu. *any: a
 * run was merged. */
SX_NODISCARD sx_status sx__merge_segments(sx_collection *c, bool *any);
/* The builder thread's merge job (sx_db_options.auto_merge): sx__merge_segments, stopping
 * between runs when the database closes. */
void sx__merge_background(sx_collection *c);
/* build.c: queues a background merge of c (once: c->merge_queued). */
void sx__merge_enqueue(sx_db *db, sx_collection *c);

/* A flush that also commits segments written elsewhere (a bulk import, import.c). prepare runs
 * first under write_mu, before anything changes (checks, reservations; an error ends the flush
 * with nothing done); publish runs under write_mu and seg_lock (write) right after the WAL
 * rotation and the seal, so the segments become visible exactly at the new checkpoint, and must
 * not fail (it appends them to c->segs with persisted = true: their files are durable, so the
 * flush's manifest names them); committed runs under flush_mu after that manifest is durable.
 * from_insert: as sx__coll_flush (store errors are not returned). */
typedef struct sx__flush_extra {
    sx_status (*prepare)(void *ctx, sx_collection *c);
    void (*publish)(void *ctx, sx_collection *c);
    void (*committed)(void *ctx, sx_collection *c);
    void *ctx;
    size_t n_segs; /* segments publish appends (room the flush keeps in c->segs) */
} sx__flush_extra;

/* ingest.c: SX_OK when c takes writes (not dropped, not read-only, WAL not fatal), else the
 * error naming why. Caller holds write_mu. */
SX_NODISCARD sx_status sx__coll_check_writable(sx_collection *c);
SX_NODISCARD sx_status sx__coll_flush_extra(sx_collection *c,
                                            bool from_insert,
                                            const sx__flush_extra *x);
SX_NODISCARD sx_status sx__coll_check(sx_collection *c);
/* Tests only (NULL otherwise): called by compaction between the delete-bit snapshot of a
 * segment and its rewrite, on the compacting thread with only flush_mu held, so a test can make
 * writes race with the copy deterministically. */
extern void (*sx__compact_hook)(sx_collection *c, uint64_t seg_id);
/* Tests: called by a merge of small segments (sx_compact) before it writes the merged file, with
 * the id of the run's first segment and the run's length; writes may race from it. */
extern void (*sx__merge_hook)(sx_collection *c, uint64_t first_seg_id, size_t n);
SX_NODISCARD sx_status sx__write_manifest(sx_collection *c, const uint64_t *del_gens);
/* <dir>/seg-<id>.<ext> */
void sx__coll_path(const sx_collection *c, char *buf, size_t n, const char *ext, uint64_t id);

/* build.c */
/* Queues the build of vector field v's index on sealed segment s. */
void sx__build_enqueue(sx_db *db, sx_collection *c, sx__segment *s, size_t v);
SX_NODISCARD sx_status sx__builder_start(sx_db *db);
void sx__builder_stop(sx_db *db);
/* For every indexed vector field: loads the index file of a sealed segment if it matches the
 * field's spec; else queues a build. sx__seg_attach_one: field v only. */
void sx__seg_attach_index(sx_collection *c, sx__segment *s);
void sx__seg_attach_one(sx_collection *c, sx__segment *s, size_t v);
/* Detaches and deletes vector field v's index (files of type ops) from every sealed segment. */
void sx__coll_drop_indexes(sx_collection *c, size_t v, const sx__index_ops *ops);
/* Removes the index files of every vector field of sealed segment `id` (types: the specs). */
void sx__seg_remove_index_files(sx_collection *c, uint64_t id);
/* Cancels queued and running builds of c (index drop, collection drop). */
void sx__build_cancel_coll(sx_db *db, sx_collection *c);
/* <dir>/seg-<id> (vector field 0) or <dir>/seg-<id>.v<v>: prefix under which file-backed
 * indexes keep their files */
void sx__idx_prefix(const sx_collection *c, char *buf, size_t n, uint64_t id, size_t v);
/* The index file's extension for vector field v: "idx" (v = 0, the name before several vector
 * fields), "v<v>.idx" (so seg-<id>.v1.idx); remote: with ".remote" appended. */
const char *sx__idx_ext(size_t v, bool remote);
/* The vector field named `field` (NULL or "": the first): *v = its index in c->vfs. SX_EINVAL
 * naming the field when it is not a vector field of c. */
SX_NODISCARD sx_status sx__vfield_find(const sx_collection *c, const char *field, size_t *v);

/* store.c: the collection files in an object store (sx_db_options.storage_url). Every function
 * is a no-op returning SX_OK when the database has no store. */
SX_NODISCARD sx_status sx__store_open(sx_db *db);
/* Downloads every collection the store has and the data directory lacks (open from the store). */
SX_NODISCARD sx_status sx__store_restore(sx_db *db);
/* Restores collection `name` from the store's current manifest into collections/<name> (which
 * must not exist): a tmp directory renamed into place. SX_OK with nothing restored when the
 * store has no current manifest for it. */
SX_NODISCARD sx_status sx__store_restore_one(sx_db *db, const char *name);
SX_NODISCARD sx_status sx__store_coll_init(sx_collection *c);
void sx__store_coll_fini(sx_collection *c);
/* Uploads what the local MANIFEST names and the store lacks, then the store manifest, then
 * deletes unnamed objects. Caller holds flush_mu (sx__store_sync takes it). Errors: SX_EREMOTE
 * (the local state is unchanged and complete; the next sync retries), SX_ENOMEM, SX_EIO. */
SX_NODISCARD sx_status sx__store_sync_locked(sx_collection *c);
/* SX_EFENCED (message set) when the database's sx_store_fence says a write to c may not be
 * acknowledged now; SX_OK otherwise (and without a fence). after_write: the write is already in
 * the WAL (the message says its outcome is unknown). */
SX_NODISCARD sx_status sx__store_may_ack(sx_collection *c, bool after_write);
/* Read-only refresh (sx_db_refresh): brings collections/<name> to the store's current manifest
 * (objects whose key the previous one named stay, the rest are downloaded; MANIFEST last).
 * *changed: false when the copy was already current. SX_ENOTFOUND: the store has none. */
SX_NODISCARD sx_status sx__store_refresh_files(sx_db *db, const char *name, bool *changed);
/* Removes the segment files of collections/<name> its current store manifest does not name
 * (after every older open version of it was freed). */
void sx__store_gc_local(sx_db *db, const char *name);
/* The collections the store has (sorted; owned: sx_strings_free). */
SX_NODISCARD sx_status sx__store_names(sx_db *db, char ***names, size_t *n);
SX_NODISCARD sx_status sx__store_sync(sx_collection *c);
void sx__store_mark_dirty(sx_collection *c);
bool sx__store_is_dirty(sx_collection *c);
/* The builder brackets writing a segment's index file with these (store_mu held between). */
void sx__store_index_begin(sx_collection *c);
void sx__store_index_end(sx_collection *c, uint64_t seg_id, size_t v);
/* The builder, after publishing an index: sync if flush_mu can be had soon, else leave dirty. */
void sx__store_after_build(sx_collection *c, const atomic_bool *cancel);
/* The store key (relative to the database's store root) of sealed segment seg_id's file, once a
 * sync has uploaded it (syncing when nobody else is; up to 60 s). SX_ENOTFOUND without a store,
 * SX_ECANCELED (a drop, or *cancel set), SX_ETIMEDOUT. */
SX_NODISCARD sx_status sx__store_segment_key(
    sx_collection *c, uint64_t seg_id, char *buf, size_t cap, const atomic_bool *cancel);
/* Drop: the store manifest goes first (SX_EREMOTE: not dropped), the other objects after. */
SX_NODISCARD sx_status sx__store_drop_begin(sx_collection *c);
void sx__store_drop_finish(sx_db *db, const char *name);

/* cache.c: the local cache of store-backed files (cache_limit_bytes; STORAGE.md "Cache"). */
SX_NODISCARD sx_status sx__cache_open(sx_db *db); /* the block cache, when store and limit */
void sx__cache_close(sx_db *db);
/* Whether the store holds file `name` of the collection with that size, as of the last listing
 * or upload (false without a store, or before the first sync listed it). Takes store_mu. */
bool sx__store_holds(sx_collection *c, const char *name, uint64_t size);
/* <file_path>.remote: the file's bytes are only in the store under <collection>/<key>. */
SX_NODISCARD sx_status sx__stub_write(const char *file_path,
                                      const char *key,
                                      uint64_t size,
                                      uint32_t crc);
/* SX_ENOTFOUND (no stub, no message), SX_ECORRUPT, SX_EIO, SX_ENOMEM. */
SX_NODISCARD sx_status
sx__stub_read(const char *file_path, char *key, size_t keycap, uint64_t *size, uint32_t *crc);
/* Removes vector field v's seg-<id>.idx.remote (with seg-<id>.idx: index drop, compaction). */
void sx__store_forget_local(const sx_collection *c, uint64_t seg_id, size_t v);
/* Makes <dir>/<name> local again from its stub (download, size and CRC check, stub removed).
 * SX_OK when already local; SX_ENOTFOUND when neither file nor stub exists. */
SX_NODISCARD sx_status sx__store_fetch(sx_collection *c, const char *name);
/* ops->load_files, except that a DISKANN file present only as a stub is read through the block
 * cache (or downloaded first when there is no cache). Ownership: payload (sx__malloc'd) is
 * taken over on every path; DISKANN keeps its PQ codes in it instead of copying them. */
SX_NODISCARD sx_status sx__store_load_files(sx_collection *c,
                                            size_t v,
                                            const sx__index_ops *ops,
                                            void *payload,
                                            size_t len,
                                            const char *prefix,
                                            const float *vecs,
                                            size_t n,
                                            sx__index **out);
/* store.c: records that <name> of c was used now (LRU order of local copies). */
void sx__store_touch(sx_collection *c, const char *name);

/* import.c: cancels the running import job, joins the import thread, frees the jobs. */
void sx__import_stop(sx_db *db);

/* WAL record types */
enum { SX__REC_INSERT = 1, SX__REC_UPSERT = 2, SX__REC_DELETE = 3 };

#endif
