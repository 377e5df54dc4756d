/*
 * server.h: internal interface of the REST server (src/server/). Nothing below src/server/
 * includes it; the server uses the engine through the public API (sextant.h) only, plus the
 * platform layer for atomic metadata files.
 *
 * Files.
 *   http.c                 sx_server_start/stop, libmicrohttpd wiring, body limits, routing, auth,
 *                          CORS, health routes, the /metrics route, graceful stop
 *   metrics.c              counters and latency histograms, Prometheus text exposition
 *   json.c                 jansson helpers: case-insensitive keys, Milvus request decoding rules,
 *                          the response envelope, status -> Milvus code mapping
 *   catalog.c              databases (one sx_db each) and the Milvus-level collection metadata kept
 *                          beside the engine's collections (declared types, load state, index
 *                          name, dynamic field, description, partitions, properties)
 *   request.c              the helpers the handler files share: the collection a request names,
 *                          field lookup, load, properties, index creation from indexParams
 *   handlers_collections.c /v2/vectordb/collections/...
 *   handlers_indexes.c     /v2/vectordb/indexes/...
 *   handlers_admin.c       /v2/vectordb/partitions/... and /v2/vectordb/databases/...
 *   handlers_entities.c    /v2/vectordb/entities/...
 *   merge.c                merging of concurrent small searches into one batch
 *   handlers_console.c     /v2/sextant/...: what the web console needs beyond Milvus's routes
 *   webui.c                GET /webui/...: the console's files, built into the binary
 *   grpc.c                 the port's front door (HTTP/2 preface -> gRPC, else libmicrohttpd) and
 *                          the gRPC transport: nghttp2 sessions on one loop thread, a worker pool
 *   grpc_milvus.c          the MilvusService RPCs: protobuf <-> the REST routes' JSON requests,
 *                          run through sx__server_call (http.c), the one entry both APIs share
 * A handlers_*.c file calls only request.c, json.c, catalog.c, merge.c and metrics.c, never
 * another handlers_*.c (checked with nm in tests/lint/check_layers.sh).
 *
 * Threads. libmicrohttpd runs handlers on its thread pool; any number run at once. Handlers hold
 * no server-wide lock: the catalog has its own mutex (catalog.c), the engine is thread-safe.
 *
 * Request flow (http.c): size check (413 before the body is read) -> body accumulated up to the
 * limit -> route lookup (404 "404 page not found" text/plain for unknown paths and non-POST) ->
 * auth (401 code 1800) -> JSON parse (1801 on empty/invalid body or depth over the limit; a
 * non-object top level is 1801 too) -> db name resolution -> handler -> envelope -> 200.
 */
#ifndef SX_SERVER_INTERNAL_H
#define SX_SERVER_INTERNAL_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "sextant.h"
#include "sextant_server.h"

/* ------------------------------------------------------------------ Milvus error codes */

enum {
    SX__MC_OK = 0,
    SX__MC_NOT_READY = 1,
    SX__MC_COLL_NOT_FOUND = 100,
    SX__MC_COLL_NOT_LOADED = 101,
    SX__MC_ILLEGAL_SCHEMA = 105,
    SX__MC_PART_NOT_FOUND = 200,
    SX__MC_INDEX_NOT_FOUND = 700,
    SX__MC_INDEX_UNSUPPORTED = 701,
    SX__MC_INDEX_DUP = 702,
    SX__MC_DB_NOT_FOUND = 800,
    SX__MC_DB_INVALID = 802,
    SX__MC_INVALID_PARAM = 1100,
    SX__MC_MISSING_PARAM = 1101,
    SX__MC_PARAM_TOO_LARGE = 1102,
    SX__MC_NOT_AUTH = 1400,
    SX__MC_PRIV_DENIED = 1401,
    SX__MC_FIELD_NOT_FOUND = 1700,
    SX__MC_UNAUTHENTICATED = 1800,
    SX__MC_BAD_JSON = 1801,
    SX__MC_MISSING_REQUIRED = 1802,
    SX__MC_BAD_INSERT = 1804,
    SX__MC_BAD_PK = 1806,
    SX__MC_LIMITED = 1807,
    SX__MC_UNSUPPORTED = 3000,
    SX__MC_UNEXPECTED = 65535
};

/* ------------------------------------------------------------------ requests, routes */

typedef struct sx__catalog sx__catalog;
typedef struct sx__metrics sx__metrics;
typedef struct sx__merger sx__merger;

/* One request as a handler sees it. Everything is borrowed for the duration of the handler. */
typedef struct sx__req {
    sx_server *srv;
    sx__catalog *cat;
    sx__metrics *metrics;
    sx__merger *merger; /* NULL when merging is disabled */
    const sx_server_options *opts;
    json_t *body;         /* the parsed JSON object (never NULL in a handler) */
    const char *db_name;  /* body dbName if non-empty, else DB-Name header, else "default" */
    bool int64_as_string; /* Accept-Type-Allow-Int64: false -> int64 values as strings */
    double timeout_s;     /* Request-Timeout header (default 30) */
    bool read_only_user;  /* authenticated with read-only credentials */
    const char *user;     /* an API user (rbac.c) the request comes from, else NULL */
    /* the name the caller logged in with (an API user, or the user of a users-file or token
     * "user:password" credential), for display only; NULL for a token or no credentials */
    const char *login;
} sx__req;

/* The handler's answer. http.c sends `body` (owned here, freed by http.c) with `http_status`. */
typedef struct sx__resp {
    int http_status; /* 200 unless set otherwise */
    json_t *body;    /* NULL: http.c answers {"code":0,"data":{}} (or sends `text`) */
    /* Or a complete JSON text of a code-0 answer, encoded row by row so that no JSON tree of the
     * whole answer exists (search, query, get): owned, sx__free'd by http.c. Sent when body is
     * NULL; sx__fail frees it (a failure replaces the answer). */
    uint8_t *text;
    size_t text_len;
} sx__resp;

typedef void (*sx__handler_fn)(sx__req *rq, sx__resp *rs);

typedef struct sx__route {
    const char *path; /* full path, e.g. "/v2/vectordb/collections/create" */
    sx__handler_fn fn;
    bool is_write; /* changes data or schema: refused (403, code 1401) for read-only users */
} sx__route;

/* Route tables, one per handler file, terminated by an entry with path == NULL. http.c
 * concatenates them; tests walk them (every route is called with and without credentials). */
extern const sx__route sx__routes_collections[];
extern const sx__route sx__routes_indexes[];
extern const sx__route sx__routes_admin[];
extern const sx__route sx__routes_entities[];
extern const sx__route sx__routes_import[];
extern const sx__route sx__routes_rbac[]; /* users and roles (handlers_rbac.c) */
/* /v2/sextant/...: the web console's routes (handlers_console.c, docs/internals/WEBUI.md) */
extern const sx__route sx__routes_console[];

/* Every route the server answers, in one NULL-terminated array (http.c). The health and metrics
 * routes (GET /livez, /readyz, /healthz, /metrics) are not in it; they are listed by
 * sx__open_paths. */
const sx__route *sx__server_routes(size_t *n);
extern const char *const sx__open_paths[]; /* NULL-terminated: routes that need no credentials */

/* ------------------------------------------------------------------ webui.c */

/* The console's security headers (http.c adds them to every /webui answer). */
#define SX__WEBUI_CSP                                                              \
 "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " \
 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

typedef struct sx__webui_answer {
    unsigned status;           /* 200, 301, 304 or 404 */
    const char *ctype;         /* 200/304: the file's type */
    const char *etag;          /* 200/304: quoted SHA-1 of the file */
    const char *location;      /* 301 */
    const unsigned char *data; /* 200: static bytes (never freed) */
    size_t len;
} sx__webui_answer;

/* Whether url is /webui or under /webui/. */
bool sx__webui_path(const char *url);
/* What to answer a GET/HEAD of url (if_none_match: the request's header or NULL). */
void sx__webui_lookup(const char *url, const char *if_none_match, sx__webui_answer *out);

/* ------------------------------------------------------------------ json.c */

/* Case-insensitive member lookup (Go's encoding/json matching). Returns borrowed or NULL. A JSON
 * null counts as absent. */
json_t *sx__jget(const json_t *obj, const char *key);

/* Typed optional getters on obj[key]. Return 0 when absent (out untouched) or read (*out set),
 * -1 on a type mismatch. Integers accept JSON integers, integral reals and numeric strings;
 * bools accept true/false and "true"/"false"; strings accept strings only (borrowed). */
int sx__jstr(const json_t *obj, const char *key, const char **out);
int sx__jint(const json_t *obj, const char *key, int64_t *out);
int sx__jbool(const json_t *obj, const char *key, bool *out);
int sx__jdouble(const json_t *obj, const char *key, double *out);
/* Converts one JSON value (integer, integral real, numeric string) to int64. */
bool sx__json_to_int64(const json_t *v, int64_t *out);

/* Required non-empty string in rq->body. On failure sets rs to 1802 (missing/empty, Milvus's
 * validator message naming `structName.Field`) or 1801 (wrong type) and returns false. */
bool sx__need_str(
    sx__req *rq, sx__resp *rs, const char *key, const char *struct_name, const char **out);

/* An int64 for a response: a JSON integer, or a string when rq->int64_as_string. New ref. */
json_t *sx__jint64_out(const sx__req *rq, int64_t v);

/* Envelopes. sx__ok steals `data` (NULL: {}) and sets {"code":0,"data":data}. sx__fail sets
 * {"code":code,"message":"..."} (no data key) with HTTP 200, replacing any earlier body. */
void sx__ok(sx__resp *rs, json_t *data);
void sx__fail(sx__resp *rs, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The answer as a JSON tree (tests and the fuzz harness call handlers directly): the body, or
 * the text parsed; NULL when neither. Takes both out of rs (the caller owns the result). */
json_t *sx__resp_json(sx__resp *rs);
/* Maps an engine status (message from sx_errmsg()) to a Milvus code: SX_EINVAL/SX_EPARSE ->
 * 1100, SX_ENOTFOUND -> not_found_code, SX_ENOSPC/SX_EIO/SX_EFATAL/others -> 65535, with
 * "<what>: <sx_errmsg()>" as the message. */
void sx__fail_st(sx__resp *rs, sx_status st, int not_found_code, const char *what);
/* sx_errmsg() with absolute paths cut to their last component (what sx__fail_st sends), in buf
 * (returned). For messages that quote the engine's text in their own words. */
const char *sx__errmsg_safe(char *buf, size_t cap);

/* Milvus type names <-> engine types and metric names. */
const char *sx__metric_name(sx_metric m);             /* "L2", "IP", "COSINE" */
bool sx__metric_parse(const char *s, sx_metric *out); /* case-insensitive */

/* ------------------------------------------------------------------ catalog.c */

#define SX__META_FIELD        "sx_meta_" /* hidden VARCHAR column: a row's dynamic fields, as JSON */
#define SX__PART_FIELD        "sx_part_" /* hidden VARCHAR column: the partition of a row */
/* Milvus 2.5's text for a missing collection (code 100), with the database and the name: code
 * written against Milvus matches on "can't find collection". */
#define SX__COLL_NOT_FOUND    "can't find collection[database=%s][collection=%s]"
#define SX__MAX_PARTS         64
/* Partition key mode: partitions made when partitionsNum / num_partitions is not given
 * (Milvus 2.4's default), and the most a collection may ask for (Milvus's maxPartitionNum). */
#define SX__DEFAULT_KEY_PARTS 64u
#define SX__MAX_KEY_PARTS     1024u
#define SX__MAX_SHARDS        16 /* Milvus's proxy.maxShardNum default */
#define SX__MAX_ALIASES       16

/* A field as Milvus clients declared it. The engine stores Int8/16/32/64 as INT64, Float/Double
 * as DOUBLE, VarChar/String/JSON as VARCHAR (JSON as its raw text), Bool as BOOL. */
typedef struct sx__field_meta {
    char name[SX_MAX_NAME + 1];
    char type[24]; /* Milvus dataType name as declared: "Int32", "JSON", "FloatVector" */
    sx_field_type engine_type;
    int64_t field_id; /* 100, 101, ... in schema order */
    bool is_primary;
    bool auto_id;
    bool is_partition_key;
    uint32_t dim;        /* FloatVector */
    uint32_t max_length; /* VarChar; JSON and Array: SX_MAX_VARCHAR (their stored text) */
    /* Array fields (stored as the JSON text of the array in a VARCHAR column): the declared
     * element type ("Int64", "VarChar", ...), max_capacity (elements per row) and the elements'
     * max_length (VarChar elements). Empty / 0 for other types. */
    char elem_type[24];
    uint32_t max_capacity;
    uint32_t elem_max_length;
    /* The default value (Milvus's defaultValue) as compact JSON text, "" = none: a row that omits
     * the field or gives null gets it. Scalars only (not the primary key, vectors, JSON, Array);
     * at most SX__MAX_DEFAULT_TEXT bytes of text. */
    char default_json[256];
    char description[256];
    /* Milvus's nullable: the engine field is nullable (sx_field_def.nullable); a row that omits
     * the field or gives null stores NULL unless the field has a default. Not the primary key,
     * not vectors. */
    bool nullable;
    /* VarChar fields of full-text search (Milvus's enable_analyzer): the analyzer_params as
     * compact JSON text ("" = the standard analyzer), analyzer.h. */
    bool enable_analyzer;
    char analyzer[256];
} sx__field_meta;

#define SX__MAX_DEFAULT_TEXT 255u

/* The most elements an Array field may declare (Milvus's limit on max_capacity). */
#define SX__MAX_ARRAY_CAPACITY 4096u

/* The state of one FloatVector field (Milvus's model: every vector field has its own metric and
 * at most one index, with its own name). */
typedef struct sx__vec_meta {
    char field[SX_MAX_NAME + 1]; /* the FloatVector field's name */
    sx_metric metric;            /* the engine field's metric (= its index's) */
    /* No metric chosen yet (custom schema created without an index on this field, as Milvus
     * allows): the engine field is L2 with raw vectors, and the field's first index sets the
     * metric it asks for (sx_collection_set_metric_on). Persisted. */
    bool metric_pending;
    char index_name[SX_MAX_NAME + 1]; /* "" = no index */
    char index_type[32];              /* as the client asked: "AUTOINDEX", "HNSW", ... */
} sx__vec_meta;

/* A SparseFloatVector field (Milvus's sparse vectors, held in an engine VARCHAR column as the
 * engine's sparse text, sextant.h "sparse vectors") and its index. Searches go through
 * sx_sparse_search with the index's drop_ratio_build; the engine builds its inverted lists per
 * sealed segment on first use, so "creating" the index records it here and builds nothing. */
typedef struct sx__sparse_meta {
    char field[SX_MAX_NAME + 1];
    char index_name[SX_MAX_NAME + 1]; /* "" = no index */
    char index_type[32];              /* SPARSE_INVERTED_INDEX, SPARSE_WAND (as asked) */
    char algo[24];                    /* inverted_index_algo as asked, "" = none given */
    float drop_ratio_build;           /* [0, 1) */
    /* The output of a BM25 function (schema, immutable): its name and its input, a VarChar
     * field with enable_analyzer; rows get term frequencies of the analyzed text at insert and
     * the index's metric is BM25 (k1, b), searched by raw text. "" = a plain sparse field. */
    char function[SX_MAX_NAME + 1];
    char bm25_input[SX_MAX_NAME + 1];
    float bm25_k1, bm25_b; /* the index's (mutable with it) */
} sx__sparse_meta;

#define SX__SPARSE_TYPE "SparseFloatVector"

typedef struct sx__coll_meta {
    char name[SX_MAX_NAME + 1];        /* the name clients use (may differ after rename) */
    char engine_name[SX_MAX_NAME + 1]; /* the engine collection's name in its sx_db */
    int64_t collection_id;
    int64_t created_ms;
    char description[1024];
    /* One entry per FloatVector field, in schema order (vecs[0]: the first vector field, the
     * engine's default one). sx__cat_coll_create names them after the schema (a caller fills
     * metric / metric_pending by position); their metric and index state may change through
     * sx__cat_coll_modify, their names never. */
    size_t n_vecs;
    sx__vec_meta vecs[SX_MAX_VECTOR_FIELDS];
    size_t n_fields; /* user fields only (no hidden columns) */
    sx__field_meta fields[SX_MAX_FIELDS];
    /* One entry per SparseFloatVector field, in schema order (named like vecs[]: names from the
     * schema, the index state mutable). Dense and sparse vector fields together are at most
     * SX_MAX_VECTOR_FIELDS. */
    size_t n_sparse;
    sx__sparse_meta sparse[SX_MAX_VECTOR_FIELDS];
    bool enable_dynamic;  /* hidden column SX__META_FIELD exists */
    bool has_partitions;  /* hidden column SX__PART_FIELD exists */
    char consistency[16]; /* "Bounded" by default */
    /* Milvus's shardsNum as asked at create (1..16; 1 when not given, and for collections made
     * before it was kept or by an import: the catalog sets it), described back: one
     * writer serves the collection whatever it says (docs/COMPATIBILITY.md). */
    uint32_t shards;
    bool loaded; /* persisted: survives restarts as in Milvus */
    /* Aliases (Milvus's): other names of this collection in its database, unique among the
     * database's collection names and aliases; every lookup by name takes them (search, insert,
     * describe ... through an alias reach this collection); drop refuses an alias and a
     * collection that still has one. Persisted with the collection's metadata. */
    size_t n_aliases;
    char aliases[SX__MAX_ALIASES][SX_MAX_NAME + 1];
    size_t n_parts; /* partitions; [0] is always "_default" */
    char parts[SX__MAX_PARTS][SX_MAX_NAME + 1];
    /* Partition-key collections (Milvus's partition key mode: a field with is_partition_key and
     * key_parts > 0): the partitions are "_default_0" .. "_default_<key_parts-1>", made at create
     * and never changed; each row goes to the one its key's hash names (sx__meta_key_part). The
     * parts[] list above then keeps its hidden "_default" and is never shown: read partitions
     * through sx__meta_n_parts / sx__meta_part_name / sx__meta_part_find. Schema, not mutable
     * metadata. 0 for other collections and for partition-key collections made before routing
     * existed (2026-12-06: their rows stay in "_default", which they still list). */
    uint32_t key_parts;
    char properties[2048]; /* JSON object text of collection properties ("{}") */
} sx__coll_meta;

/* Opens the catalog on a data directory: the default database is `dir` itself, database NAME
 * lives in dir/databases/NAME/. Each database is an sx_db opened with `opts`. Metadata of a
 * collection lives in <dbdir>/rest/<engine_name>.json (written atomically); a collection the
 * engine has but with no metadata file (created by the CLI or the C API) gets metadata derived
 * from its engine schema. */
SX_NODISCARD sx_status sx__cat_open(const char *dir, const sx_db_options *opts, sx__catalog **out);
/* Flushes every collection of every database (returns the first error), closes them. */
SX_NODISCARD sx_status sx__cat_close(sx__catalog *cat);
/* Read-only catalogs over a store (query nodes): sx_db_refresh on every database, then
 * metadata for the collections that appeared (derived from the engine's schema) and none for
 * those that went. *changed: collections reloaded, added or removed. */
SX_NODISCARD sx_status sx__cat_refresh(sx__catalog *cat, size_t *changed);
/* The process's memory budget, shared by the catalog's databases (sx_db_options.memory_budget). */
void sx__cat_memory_stats(sx__catalog *cat, sx_memory_stats *out);
/* Indexes published from index workers' files (cluster mode), over every database. */
uint64_t sx__cat_remote_builds(sx__catalog *cat);
/* A read-only server (query node): opens database db (DATA/databases/<db>, restored from the
 * store's <url>/databases/<db>) unless it has it. Names that are not valid or too long for a
 * directory are skipped (SX_OK). Errors: SX_EINVAL (not read-only), the open's. */
SX_NODISCARD sx_status sx__cat_db_follow(sx__catalog *cat, const char *db);
/* sx_server_adopt_collection's work (catalog.c): the engine's reload under ddl_mu, then the
 * metadata kept (indexes and metrics from the engine) or derived. */
SX_NODISCARD sx_status sx__cat_coll_adopt(sx__catalog *cat,
                                          const char *db,
                                          const char *ename,
                                          const char *keep_dir);

/* Name lists (db_list: "default" first, then the others sorted; coll_list: client names sorted)
 * are owned by the caller: free with sx_strings_free(names, n). Thread-safety: every sx__cat_*
 * function but sx__cat_close may be called from any number of threads at once. */
SX_NODISCARD sx_status sx__cat_db_list(sx__catalog *cat, char ***names, size_t *n);
SX_NODISCARD sx_status sx__cat_db_create(sx__catalog *cat, const char *db);
SX_NODISCARD sx_status sx__cat_db_drop(sx__catalog *cat, const char *db); /* not "default" */
bool sx__cat_db_exists(sx__catalog *cat, const char *db);
/* Database properties and id (Milvus dbID), persisted in <dbdir>/rest/db.properties.json.
 * *props: a new reference to a copy of the properties object (json_decref it). */
SX_NODISCARD sx_status sx__cat_db_describe(sx__catalog *cat,
                                           const char *db,
                                           json_t **props,
                                           int64_t *db_id);
/* Replaces the properties object (borrowed; copied). Errors: SX_ENOTFOUND, SX_EIO. */
SX_NODISCARD sx_status sx__cat_db_set_props(sx__catalog *cat, const char *db, const json_t *props);

/* The engine name of collection (or alias) name of database db into ename, without copying its
 * metadata (a lookup under mu: cheap enough for every request). false: no such collection. */
bool sx__cat_engine_name(
    sx__catalog *cat, const char *db, const char *name, char *ename, size_t cap);
/* Whether database db has a collection whose engine name or client name is name (aliases do
 * not count). A lookup under mu. */
bool sx__cat_has_coll(sx__catalog *cat, const char *db, const char *name);
/* Finds a collection by its client name: on SX_OK *h is an open handle (release it with
 * sx_collection_release) and *meta a copy of its metadata. h may be NULL when only metadata is
 * wanted. Errors: SX_ENOTFOUND (no such database or collection: the message says which). */
SX_NODISCARD sx_status sx__cat_coll_get(
    sx__catalog *cat, const char *db, const char *name, sx_collection **h, sx__coll_meta *meta);
/* Creates the engine collection (with hidden columns as the metadata asks) and its metadata.
 * Fills meta->engine_name, collection_id, created_ms, field ids. Errors: SX_EEXIST, SX_EINVAL,
 * SX_ENOTFOUND (database). */
SX_NODISCARD sx_status sx__cat_coll_create(sx__catalog *cat, const char *db, sx__coll_meta *meta);
SX_NODISCARD sx_status sx__cat_coll_drop(sx__catalog *cat, const char *db, const char *name);
/* Persists changed metadata (load state, index names, partitions, properties, description). The
 * schema part (fields, the vector fields' names, metrics and metric_pending) must not change. It
 * writes the whole mutable part the caller read earlier: a concurrent change to the same collection
 * is lost, so handlers use sx__cat_coll_modify instead. */
SX_NODISCARD sx_status sx__cat_coll_update(sx__catalog *cat,
                                           const char *db,
                                           const sx__coll_meta *meta);
/* Read-modify-write of a collection's metadata under the catalog's DDL lock: fn gets a fresh copy
 * of the metadata and changes it (or returns an error: nothing is written, its status is
 * returned); then the copy is persisted and cached. fn runs holding the DDL lock: it may call the
 * engine (sx_collection_set_metric_on, sx_index_create_on) but no sx__cat_* function that
 * changes anything. fn may change every mutable part and the vecs[] metric, metric_pending and
 * index (it keeps the engine in step); identity, fields and the vecs[] names are restored from
 * the cache. Errors: fn's, SX_ENOTFOUND, SX_EIO,
 * SX_EINVAL (read-only catalog, bad partition count). */
SX_NODISCARD sx_status sx__cat_coll_modify(sx__catalog *cat,
                                           const char *db,
                                           const char *name,
                                           sx_status (*fn)(void *ctx, sx__coll_meta *meta),
                                           void *ctx);
SX_NODISCARD sx_status sx__cat_coll_rename(
    sx__catalog *cat, const char *db, const char *name, const char *new_db, const char *new_name);
/* Aliases (under ddl_mu, each a metadata write of the collection concerned). create: alias a
 * valid name used by no collection or alias of db, coll a collection's own name (not an alias);
 * drop: a missing alias is fine; alter: moves an existing alias to coll (two writes: the old
 * collection's first, so a crash between them loses the alias, never leaves it on both);
 * describe: the collection's name into coll_out; list: db's aliases, or coll's (NULL: all),
 * sorted (sx_strings_free). Errors: SX_EEXIST (the name is taken), SX_ENOTFOUND (the collection,
 * or the alias for alter / describe), SX_EINVAL (a bad name, more than SX__MAX_ALIASES), SX_EIO. */
SX_NODISCARD sx_status sx__cat_alias_create(sx__catalog *cat,
                                            const char *db,
                                            const char *alias,
                                            const char *coll);
SX_NODISCARD sx_status sx__cat_alias_drop(sx__catalog *cat, const char *db, const char *alias);
SX_NODISCARD sx_status sx__cat_alias_alter(sx__catalog *cat,
                                           const char *db,
                                           const char *alias,
                                           const char *coll);
SX_NODISCARD sx_status sx__cat_alias_describe(sx__catalog *cat,
                                              const char *db,
                                              const char *alias,
                                              char coll_out[SX_MAX_NAME + 1]);
SX_NODISCARD sx_status
sx__cat_alias_list(sx__catalog *cat, const char *db, const char *coll, char ***names, size_t *n);
/* A collection's metadata as the JSON the catalog keeps it in (new reference; NULL when out of
 * memory), and back (false: not a usable metadata object). The cluster proxy reads a node's
 * metadata this way (/v2/sextant/collections/meta). */
json_t *sx__cat_meta_json(const sx__coll_meta *m);
bool sx__cat_meta_parse(const json_t *j, sx__coll_meta *m);
SX_NODISCARD sx_status sx__cat_coll_list(sx__catalog *cat,
                                         const char *db,
                                         char ***names,
                                         size_t *n);

/* Calls fn for every collection of every database (for /metrics); stops at the first non-zero
 * return. The handle is borrowed for the call. */
typedef int (*sx__cat_visit_fn)(void *ctx,
                                const char *db,
                                const sx__coll_meta *meta,
                                sx_collection *h);
SX_NODISCARD sx_status sx__cat_foreach(sx__catalog *cat, sx__cat_visit_fn fn, void *ctx);

/* Import jobs of database db (the engine's, see sextant.h "bulk import"): name is the client
 * collection name; infos and out carry client names. Errors: SX_ENOTFOUND (database, collection
 * or job: the message says which), the engine's. */
SX_NODISCARD sx_status sx__cat_import_submit(sx__catalog *cat,
                                             const char *db,
                                             const char *name,
                                             const sx_import_group *groups,
                                             size_t n_groups,
                                             const sx_import_opts *opts,
                                             char job_id[SX_IMPORT_JOB_ID]);
SX_NODISCARD sx_status sx__cat_import_get(sx__catalog *cat,
                                          const char *db,
                                          const char *job_id,
                                          sx_import_job_info *out);
SX_NODISCARD sx_status sx__cat_import_list(
    sx__catalog *cat, const char *db, const char *name, sx_import_job_info **infos, size_t *n);

/* ------------------------------------------------------------------ request.c */

/* Milvus's name of an index state: "IndexStateNone", "InProgress", "Finished", "Failed". */
const char *sx__index_state_name(sx_index_state s);

/* The request helpers the handler files share (no handlers_*.c calls into another one).
 * Resolves rq->body.collectionName (1802 with `struct_name` when missing) in rq->db_name: 800
 * when the database is missing, 100 when the collection is. On true, *meta is an owned copy
 * (free with sx__req_coll_done) and *h an open handle (when h is non-NULL). */
bool sx__req_coll(
    sx__req *rq, sx__resp *rs, const char *struct_name, sx_collection **h, sx__coll_meta **meta);
void sx__req_coll_done(sx_collection *h, sx__coll_meta *meta); /* either may be NULL */
/* Fields of a collection's metadata: by name, its (first) vector field, its primary key.
 * Borrowed from meta; NULL when there is none. */
const sx__field_meta *sx__meta_field(const sx__coll_meta *meta, const char *name);
const sx__field_meta *sx__meta_vector_field(const sx__coll_meta *meta);
const sx__field_meta *sx__meta_primary_field(const sx__coll_meta *meta);
/* Checks a new collection name or alias (what = "name" or "alias") with Milvus's rules and texts
 * (1100: empty, longer than SX_MAX_NAME bytes, a first character other than a letter or '_',
 * another character other than a letter, digit or '_'), before anything reaches the file system.
 * False with rs set. */
bool sx__check_coll_name(sx__resp *rs, const char *name, const char *what);
/* Partitions, whatever the mode: their number, the i-th name (written into buf, which is
 * returned; i < sx__meta_n_parts), the position of a name (-1: none). In partition key mode they
 * are the generated "_default_<i>"; otherwise parts[]. */
size_t sx__meta_n_parts(const sx__coll_meta *meta);
const char *sx__meta_part_name(const sx__coll_meta *meta, size_t i, char buf[SX_MAX_NAME + 1]);
int sx__meta_part_find(const sx__coll_meta *meta, const char *name);
/* The partition key field (NULL: none, or a collection from before routing: key_parts == 0). */
const sx__field_meta *sx__meta_key_field(const sx__coll_meta *meta);
/* The partition (index below key_parts) of a row whose partition key is the integer v or the
 * string s (s non-NULL), as Milvus routes it: MurmurHash3 x86_32 (seed 0, masked to 31 bits) of
 * v's 8 little-endian bytes, or the CRC-32 (IEEE) of s's first 100 bytes, modulo key_parts. */
uint32_t sx__meta_key_part(const sx__coll_meta *meta, int64_t v, const char *s);
/* A sparse vector as the SDKs send it in JSON: an object of index -> value ({"3": 0.5, "17":
 * 1.25}, keys decimal) or {"indices": [..], "values": [..]}; indexes in [0, 2^32 - 2], values
 * finite and >= 0 (Milvus's rules). Into the engine's text (sx__malloc'd, *out) or why[] set.
 * sx__sparse_to_json: the engine's text back into the object form (NULL on bad text or OOM). */
bool sx__sparse_from_json(const json_t *v, char **out, char *why, size_t why_cap);
json_t *sx__sparse_to_json(const char *text);
/* Dense vector values on the wire (vecval.c has the encodings): sx__vec_from_json reads one JSON
 * value of a vector field of type t into dst (the stored encoding, sx_vector_row_bytes bytes) or
 * sets why; sx__vec_query_from_json reads a search vector into q, as the engine searches the
 * field (sx__vec_query_bytes bytes: float32 values, the 16-bit types widened; packed bytes for
 * binary); sx__vec_row_to_query turns a stored value into that form; sx__vec_to_json answers a
 * stored value as Milvus's REST does (a number array for FloatVector, else base64 of the bytes;
 * NULL on OOM). sx__b64_encode writes the base64 of n bytes and a NUL into out
 * ((n + 2) / 3 * 4 + 1 bytes) and returns the length. */
size_t sx__vec_query_bytes(sx_field_type t, uint32_t dim);
bool sx__vec_from_json(
    const json_t *v, sx_field_type t, uint32_t dim, void *dst, char *why, size_t cap);
bool sx__vec_query_from_json(
    const json_t *v, sx_field_type t, uint32_t dim, void *q, char *why, size_t cap);
void sx__vec_row_to_query(sx_field_type t, uint32_t dim, const void *row, void *q);
json_t *sx__vec_to_json(sx_field_type t, uint32_t dim, const void *src);
size_t sx__b64_encode(const void *src, size_t n, char *out);
/* Sparse vector fields: whether f is one; the sparse[] entry of field name (-1: none); the
 * sparse[] entry whose index is index_name (-1: none). */
bool sx__field_is_sparse(const sx__field_meta *f);
int sx__meta_sparse_at(const sx__coll_meta *meta, const char *field);
int sx__meta_sparse_index_at(const sx__coll_meta *meta, const char *index_name);
/* The vecs[] entry of a vector field by its name (NULL or "": the first vector field), or of the
 * vector index named index_name: its position in meta->vecs, -1 when there is none. */
int sx__meta_vec_at(const sx__coll_meta *meta, const char *field);
int sx__meta_index_at(const sx__coll_meta *meta, const char *index_name);
/* Marks the collection loaded (persisted). 700 "index not found[collection=NAME]" when no vector
 * field has an index, 65535 "there is no vector index on field: [F], please create index
 * firstly" (Milvus's code and text) when one of several has none. */
bool sx__coll_load(sx__req *rq, sx__resp *rs, sx_collection *h, sx__coll_meta *meta);
/* Collection and database properties: a JSON object of strings. props_to_kv returns
 * [{"key":k,"value":v}] (new reference); props_merge sets every member of src in dst with its
 * value turned into a string (numbers as digits, bools as true/false, objects as JSON text). */
json_t *sx__props_to_kv(const json_t *props);
void sx__props_merge(json_t *dst, const json_t *src);
/* Creates the index one indexParams entry describes (vector field: the engine index; scalar
 * field: accepted, nothing built) and records it in *meta (persisted). Used by indexes/create
 * and collections/create. On false, rs holds the error. */
bool sx__index_apply(
    sx__req *rq, sx__resp *rs, sx_collection *h, sx__coll_meta *meta, const json_t *index_param);
/* Frees text jansson allocated (json_dumps) with jansson's allocator (http.c installs a budgeted
 * one); NULL is fine. */
void sx__jansson_free(void *p);
/* Whether v fits an Int8 / Int16 / Int32 (by the declared type name; other names: true). */
bool sx__int_fits(const char *type, int64_t v);
/* Checks a declared default value v against field f (its type, range, max_length; not allowed
 * on the primary key, vectors, JSON and Array fields) and stores its JSON text in
 * f->default_json. On false, rs holds 1100 naming the field. */
bool sx__field_set_default(sx__resp *rs, sx__field_meta *f, const json_t *v);

/* ------------------------------------------------------------------ merge.c */

/* Merging is keyed by a canonical string of everything but the query vectors (collection
 * identity, field, metric, params, filter, limit, offset, output fields). While all search slots
 * are busy, queued calls with equal keys are run as one sx_search of the concatenated queries
 * (at most merge_max_nq; a queued batch waits at most merge_wait_us), then the rowset is split
 * back per caller. */
SX_NODISCARD sx_status sx__merger_new(const sx_server_options *o, sx__merger **out);
void sx__merger_free(sx__merger *m);
/* Like sx_search(c, req, out), possibly merged with concurrent calls of the same key. A failure
 * of the merged batch is retried alone, so a caller never gets another caller's error. */
SX_NODISCARD sx_status sx__merger_search(
    sx__merger *m, sx_collection *c, const char *key, const sx_search_req *req, sx_rowset **out);
/* Counters for /metrics. */
void sx__merger_stats(sx__merger *m, uint64_t *batches, uint64_t *merged_requests);

/* ------------------------------------------------------------------ metrics.c */

SX_NODISCARD sx_status sx__metrics_new(sx__metrics **out);
void sx__metrics_free(sx__metrics *m);
/* Seconds since the server started (since sx__metrics_new). */
double sx__metrics_uptime_s(const sx__metrics *m);
/* Records one finished request (route path or "other", Milvus code, HTTP status, seconds). */
void sx__metrics_request(sx__metrics *m, const char *route, int http_status, int code, double secs);
/* Counts rows accepted by insert/upsert, deleted, and search query vectors. */
void sx__metrics_rows(sx__metrics *m, uint64_t inserted, uint64_t deleted, uint64_t searched_nq);
/* Renders the Prometheus text exposition (engine gauges read through the catalog). Owned: free
 * with free(). */
SX_NODISCARD sx_status
sx__metrics_render(sx__metrics *m, sx__catalog *cat, sx__merger *mg, char **text, size_t *len);

/* ------------------------------------------------------------------ gRPC (grpc.c, grpc_milvus.c)
 */

#include <sys/socket.h>

#define SX__GRPC_MSG_MAX 512  /* grpc-message text */
#define CRED_B64_MAX     1400 /* authorization metadata kept */

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum {
    SX__GRPC_OK = 0,
    SX__GRPC_CANCELLED = 1,
    SX__GRPC_UNKNOWN = 2,
    SX__GRPC_INVALID_ARGUMENT = 3,
    SX__GRPC_DEADLINE_EXCEEDED = 4,
    SX__GRPC_NOT_FOUND = 5,
    SX__GRPC_PERMISSION_DENIED = 7,
    SX__GRPC_RESOURCE_EXHAUSTED = 8,
    SX__GRPC_UNIMPLEMENTED = 12,
    SX__GRPC_INTERNAL = 13,
    SX__GRPC_UNAVAILABLE = 14,
    SX__GRPC_UNAUTHENTICATED = 16
};

typedef struct sx__grpc sx__grpc;

/* One unary call as grpc_milvus.c gets it (everything borrowed for the call). */
typedef struct sx__grpc_call {
    const char *method; /* the RPC name: "Search" of /milvus.proto.milvus.MilvusService/Search */
    const uint8_t *msg; /* the request message, decompressed */
    size_t len;
    const char *db;   /* dbname metadata, "default" when absent */
    bool read_only;   /* authenticated with read-only credentials */
    double timeout_s; /* what is left of grpc-timeout; 0: none (the server's default) */
    const char
        *user; /* an API user (rbac.c) the call comes from, checked by its roles; else NULL */
    const char *authz; /* the authorization metadata as sent ("" when none): the cluster proxy
                          passes it on to the nodes, which check it */
} sx__grpc_call;

/* Its answer: grpc_status 0 and a packed response message (sx__malloc'ed, the transport frees
 * it), or a non-zero status with message. Business errors are answered with status 0 and the
 * error inside the response's Status, as Milvus does. */
typedef struct sx__grpc_reply {
    int grpc_status;
    char message[SX__GRPC_MSG_MAX];
    uint8_t *body;
    size_t len;
} sx__grpc_reply;

/* The service a gRPC front end runs on: what grpc.c (the port, the transport) and grpc_milvus.c
 * (the RPCs) need from the process that serves them. Two implement it: the single-node server
 * (http.c: the route handlers and the catalog) and the cluster proxy (cluster/proxy.c: the same
 * REST routes forwarded to the nodes, metadata read from them). Every function may be called
 * from any worker thread at once. */
struct sx__principal; /* rbac.h */

typedef struct sx__svc_ops {
    /* Runs a REST route (its path, "/v2/vectordb/entities/search") on a JSON request (borrowed)
     * in database db, as principal who (authz: the call's authorization metadata); returns the
     * route's answer ({"code":0,"data":...} or {"code":N,"message":...}), owned by the caller;
     * NULL only when out of memory. */
    json_t *(*call)(void *ctx,
                    const char *route,
                    const json_t *body,
                    const char *db,
                    const struct sx__principal *who,
                    const char *authz,
                    double timeout_s,
                    const char *log_name);
    /* The metadata reads (authz as for call). A collection's metadata by name or alias (into
     * *meta); errors: SX_ENOTFOUND, others. */
    sx_status (*coll_get)(
        void *ctx, const char *authz, const char *db, const char *name, sx__coll_meta *meta);
    /* The collection names of db, sorted (free with sx_strings_free). */
    sx_status (*coll_list)(void *ctx, const char *authz, const char *db, char ***names, size_t *n);
    sx_status (*db_list)(void *ctx, const char *authz, char ***names, size_t *n);
    /* *props: a new reference (json_decref it). */
    sx_status (*db_describe)(
        void *ctx, const char *authz, const char *db, json_t **props, int64_t *db_id);
    bool (*db_exists)(void *ctx, const char *authz, const char *db);
    bool (*stopping)(void *ctx);
    /* Checks the authorization metadata: 0 and *who, or -1 (UNAUTHENTICATED). */
    int (*auth)(void *ctx, const char *authz, struct sx__principal *who);
    /* Takes an accepted HTTP/1 socket (owns it from then on). */
    void (*add_http)(void *ctx, int fd, const struct sockaddr *addr, socklen_t len);
} sx__svc_ops;

typedef struct sx__svc {
    const sx__svc_ops *ops;
    void *ctx;
    /* the transport's limits (sx_server_options' meaning) */
    uint32_t header_timeout_s, idle_timeout_s, max_connections, max_connections_per_ip;
    uint32_t threads;
    uint64_t max_body_bytes;
} sx__svc;

/* The front door and the transport (grpc.c): takes the listening socket (the caller closes it
 * after sx__grpc_stop) and serves svc (copied; svc->ctx must outlive the transport). quiesce:
 * GOAWAY to every gRPC connection, new calls are answered UNAVAILABLE, REST keeps being
 * accepted. stop: the loop ends once the calls out have finished (at most 5 s more for
 * connections the clients keep open), then the workers. */
SX_NODISCARD sx_status sx__grpc_start(const sx__svc *svc, int listen_fd, sx__grpc **out);
void sx__grpc_quiesce(sx__grpc *g);
void sx__grpc_stop(sx__grpc *g);
/* Runs one MilvusService RPC (grpc_milvus.c), on a worker thread. served: whether an RPC has
 * its own implementation (the others declared answer a Status error). */
bool sx__grpc_rpc_served(const char *method);
void sx__grpc_milvus(const sx__svc *service, const sx__grpc_call *call, sx__grpc_reply *out);

/* What http.c lends the gRPC side. */
const sx__svc *sx__server_svc(const sx_server *s); /* the server as a gRPC service */
sx__catalog *sx__server_catalog(sx_server *s);
bool sx__server_stopping(const sx_server *s);
/* Hands an accepted HTTP/1 socket to libmicrohttpd (which owns it from then on). */
void sx__server_add_http(sx_server *s, int fd, const struct sockaddr *addr, socklen_t len);
/* The service layer's entry: runs the route's handler on a JSON request (borrowed) in database
 * db, with the request deadline, the read-only check, metrics and the access log (log_name:
 * the RPC), and returns its answer as a JSON tree ({"code":0,"data":...} or {"code":N,
 * "message":...}; owned by the caller). NULL only when out of memory. */
json_t *sx__server_call(sx_server *s,
                        const char *route,
                        const json_t *body,
                        const char *db,
                        bool read_only,
                        double timeout_s,
                        const char *log_name);

#endif /* SX_SERVER_INTERNAL_H */
