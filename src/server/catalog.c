/*
 * catalog.c: the databases of the REST server and the Milvus-level metadata of their collections.
 *
 * Layout on disk.
 *   <dir>/                          the "default" database (an sx_db)
 *   <dir>/databases/DIR/            a database (an sx_db); DIR is its name when that has at most
 *                                   DISK_NAME_MAX (200) bytes and was free, else a prefix of the
 *                                   name and a number: the name is in db.properties.json
 *   <dbdir>/rest/<engine_name>.json metadata of one collection (sx__coll_meta as JSON)
 *   <dbdir>/rest/db.properties.json {"id":N,"name":"...","properties":{...}} of the database
 *                                   (no "name" in directories of older versions: DIR is the name)
 * Every file is replaced atomically (sx__fs_write_atomic). The engine keeps its collections under
 * <dbdir>/collections/, so the two never collide. "db.properties" is not a valid collection name
 * (it has a dot), so it never collides with a metadata file either. Names may have SX_MAX_NAME
 * (255) bytes, as Milvus documents; a component of a path may too, but ".json.tmp", ".tmp-" and
 * ".drop-" would push a long one over: an engine name (and so the metadata file's name) and a
 * database directory have at most DISK_NAME_MAX bytes.
 *
 * DDL on disk. Database create prepares databases/.tmp-DIR (rest/db.properties.json, fsynced),
 * renames it to DIR and fsyncs databases/; drop renames DIR to .drop-DIR and fsyncs databases/
 * before it answers; open deletes .tmp- and .drop- directories. So a crash leaves a database
 * whole or absent, and an acknowledged drop stays dropped. A create that fails after the rename
 * renames DIR to .drop-DIR (no descriptor needed: it works at EMFILE) and deletes it.
 *
 * Invariants.
 *  1. A collection exists for clients iff the engine has it. Create writes the metadata first,
 *     then creates the engine collection; drop drops the engine collection first, then unlinks
 *     the metadata. So after a crash, metadata without an engine collection may remain: open
 *     removes it. An engine collection without metadata (made by the CLI or the C API) gets
 *     metadata derived from its engine schema (and written, unless the db is read-only).
 *  2. Client names are unique within a database; engine names too. Rename changes only the client
 *     name (the engine cannot rename), so the file name (<engine_name>.json) never changes. A new
 *     collection whose client name is some other collection's engine name gets the engine name
 *     NAME_<collection_id>.
 *  3. The cached metadata (cdb.metas) equals the files on disk whenever `mu` is free.
 *
 * Threads and locks. Handlers call in from the HTTP thread pool, any number at once.
 *   ddl_mu  serialises every change (create, drop, rename, update, database create/drop,
 *           properties): it is held across the engine's create/drop and the fsyncs of metadata
 *           writes, so two creates of one name cannot both pass the existence check. DDL is rare,
 *           and Milvus serialises it as well (one DDL queue in rootcoord).
 *   mu      guards the database list and every database's metadata cache; it is held only for
 *           lookups and copies, never across I/O or engine calls, so readers (every search and
 *           insert does a lookup) never wait for a slow DDL.
 *   Order: ddl_mu before mu. Engine calls are made holding at most ddl_mu.
 * Database lifetime. A cdb has a reference count (refs, under mu): 1 while it is listed, plus 1
 * per caller that uses it after unlocking mu without ddl_mu (sx__cat_coll_get, sx__cat_foreach;
 * every DDL holds ddl_mu, which excludes a drop). Drop unlists it and puts the list's reference;
 * the last put closes the sx_db (builder thread, LOCK file) and deletes the .drop- directory. A
 * collection handle taken before the drop keeps what it needs of the engine db (sx__db_unref),
 * so requests in flight finish safely.
 * Metadata changes are read-modify-write under ddl_mu (sx__cat_coll_modify): two concurrent
 * changes of one collection (say load and create partition) both land. sx__cat_coll_update writes
 * what its caller read earlier and would lose one of them; handlers do not use it.
 *
 * Metric. A collection has one to SX_MAX_VECTOR_FIELDS (4) FloatVector fields, each with its own
 * metric and index (meta.vecs[], in schema order). vecs[i].metric mirrors the engine field's
 * metric. A vector field of a custom-schema collection created without an index on it has
 * metric_pending set and is L2 in the engine (raw vectors); the field's first index changes its
 * engine metric (sx_collection_set_metric_on, under ddl_mu through sx__cat_coll_modify) and
 * clears the flag. If the process dies between the engine change and the metadata write, open
 * takes the engine's metric of each field (and clears its flag once the engine has an index on
 * it): the engine is the truth for the metric.
 *
 * Metadata file versions. Version 1 (single vector field) keeps the vector state at the top
 * level: "metric", "metric_pending", "index_name", "index_field", "index_type". Version 2 adds
 * "vectors": [{"field","metric","metric_pending","index_name","index_type"}, ...], one per
 * FloatVector field, and still writes the version 1 keys from the first vector field, so a
 * server of version 1 reads a single-vector collection of version 2 unchanged. A file without
 * "vectors" is read as version 1: its state goes to the field index_field names (or the first
 * vector field).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform/fs.h"
#include "server/server.h"
#include "util/alloc.h"
#include "util/err.h"
#include "util/lock.h"

#define META_MAX_BYTES (16u << 20)
/* Longest name used as is on disk (a directory or a file stem). Names may have SX_MAX_NAME (255)
 * bytes, but the file system allows 255 per component and the atomic-write and staging names add
 * up to 9 (".json.tmp", ".tmp-", ".drop-"): longer names get a short on-disk name. */
#define DISK_NAME_MAX  200u

typedef struct cdb {
    char name[SX_MAX_NAME + 1]; /* immutable */
    char *dir;                  /* immutable */
    sx_db *db;                  /* immutable; closed when refs reaches 0 */
    sx__coll_meta **metas;      /* guarded by: cat->mu */
    size_t n_metas, cap_metas;  /* guarded by: cat->mu */
    json_t *props;              /* guarded by: cat->mu */
    int64_t db_id;              /* immutable */
    size_t refs;                /* guarded by: cat->mu; 1 while listed + 1 per borrower */
    char *gone_dir;             /* set by drop before it unlists d: removed at the last release */
} cdb;

struct sx__catalog {
    sx__mutex ddl_mu;
    sx__mutex mu;
    char *root;
    sx_db_options opts;
    char *storage_url, *s3_endpoint, *s3_region; /* owned copies behind opts' pointers */
    /* The process's memory budget, shared by every database (opts.memory_budget points at it):
     * made from opts.memory_limit_bytes unless the caller passed one; freed after the last
     * database closed (sx__cat_close). */
    sx_memory_budget *budget_owned;
    cdb **dbs; /* guarded by: mu; [0] is "default" */
    size_t n_dbs;
    int64_t last_id; /* guarded by: mu */
};

/* ---------------------------------------------------------------- small helpers */

static bool valid_name(const char *s)
{
    if (!s || !*s || strlen(s) > SX_MAX_NAME)
        return false;
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Unique, increasing ids shaped like Milvus's (hybrid timestamps: ms << 18 | counter). */
static int64_t new_id(sx__catalog *cat)
{
    int64_t id = now_ms() << 18;
    sx__mutex_lock(&cat->mu);
    if (id <= cat->last_id)
        id = cat->last_id + 1;
    cat->last_id = id;
    sx__mutex_unlock(&cat->mu);
    return id;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    (void)snprintf(dst, cap, "%s", src ? src : "");
}

/* Cuts s before its first byte that does not start a complete UTF-8 character. Descriptions are
 * kept in fixed arrays (server.h): a longer text is cut by bytes, possibly inside a character,
 * and jansson refuses such a string (json_string gives NULL: the key would vanish from answers
 * and from the metadata file). Input texts come from JSON, so they are valid up to the cut. */
static void utf8_cut(char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (p[i]) {
        size_t n = p[i] < 0x80             ? 1
                   : (p[i] & 0xE0) == 0xC0 ? 2
                   : (p[i] & 0xF0) == 0xE0 ? 3
                   : (p[i] & 0xF8) == 0xF0 ? 4
                                           : 0;
        size_t k = 1;
        while (n && k < n && (p[i + k] & 0xC0) == 0x80)
            k++;
        if (n == 0 || k < n)
            break;
        i += n;
    }
    s[i] = '\0';
}

static void meta_utf8_cut(sx__coll_meta *m)
{
    utf8_cut(m->description);
    for (size_t i = 0; i < m->n_fields && i < SX_MAX_FIELDS; i++)
        utf8_cut(m->fields[i].description);
}

/* JSON text owned by sx__malloc (so no bare free of jansson's buffer is needed). */
static char *dump_json(const json_t *j, size_t *len)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (n == 0)
        return NULL;
    char *buf = sx__malloc(n + 1);
    if (!buf)
        return NULL;
    if (json_dumpb(j, buf, n, JSON_INDENT(1) | JSON_SORT_KEYS) != n) {
        sx__free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static json_t *load_json_file(const char *path)
{
    void *data = NULL;
    size_t len = 0;
    if (sx__fs_read_all(path, META_MAX_BYTES, &data, &len) != SX_OK)
        return NULL;
    json_t *j = json_loadb(data, len, 0, NULL);
    sx__free(data);
    return j;
}

static sx_status write_json_file(const char *dir, const char *file, const json_t *j)
{
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/rest", dir);
    sx_status st = sx__fs_mkdir_p(path);
    if (st != SX_OK)
        return st;
    size_t len = 0;
    char *text = dump_json(j, &len);
    if (!text)
        return sx__err(SX_ENOMEM, "catalog: cannot serialise %s", file);
    (void)snprintf(path, sizeof path, "%s/rest/%s", dir, file);
    st = sx__fs_write_atomic(path, text, len);
    sx__free(text);
    return st;
}

static const char *type_name_of(sx_field_type t)
{
    switch (t) {
    case SX_FIELD_INT64:
        return "Int64";
    case SX_FIELD_DOUBLE:
        return "Double";
    case SX_FIELD_BOOL:
        return "Bool";
    case SX_FIELD_VARCHAR:
        return "VarChar";
    case SX_FIELD_FLOAT_VECTOR:
        return "FloatVector";
    case SX_FIELD_FLOAT16_VECTOR:
        return "Float16Vector";
    case SX_FIELD_BFLOAT16_VECTOR:
        return "BFloat16Vector";
    case SX_FIELD_BINARY_VECTOR:
        return "BinaryVector";
    }
    return "Int64";
}

/* Declared Milvus type -> engine type (0 if the engine cannot store it). */
static sx_field_type engine_type_of(const char *t)
{
    static const struct {
        const char *name;
        sx_field_type type;
    } map[] = {
        { "Int8", SX_FIELD_INT64 },
        { "Int16", SX_FIELD_INT64 },
        { "Int32", SX_FIELD_INT64 },
        { "Int64", SX_FIELD_INT64 },
        { "Float", SX_FIELD_DOUBLE },
        { "Double", SX_FIELD_DOUBLE },
        { "Bool", SX_FIELD_BOOL },
        { "VarChar", SX_FIELD_VARCHAR },
        { "String", SX_FIELD_VARCHAR },
        { "JSON", SX_FIELD_VARCHAR },
        { "Array", SX_FIELD_VARCHAR },
        { "FloatVector", SX_FIELD_FLOAT_VECTOR },
        { "Float16Vector", SX_FIELD_FLOAT16_VECTOR },
        { "BFloat16Vector", SX_FIELD_BFLOAT16_VECTOR },
        { "BinaryVector", SX_FIELD_BINARY_VECTOR },
        { SX__SPARSE_TYPE, SX_FIELD_VARCHAR },
    };

    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(map[i].name, t) == 0)
            return map[i].type;
    return (sx_field_type)0;
}

/* ---------------------------------------------------------------- vector fields */

/* Lays m->vecs out as the schema's FloatVector fields in order, each named after its field.
 * by_name: an entry takes the state of the entry of the same name in m->vecs as it was (a
 * file's "vectors"; none: L2, no index); else the state of the entry at the same position (the
 * caller of sx__cat_coll_create fills metric / metric_pending by position). Returns false when
 * the schema has more than SX_MAX_VECTOR_FIELDS vector fields. */
static bool vecs_layout(sx__coll_meta *m, bool by_name)
{
    sx__vec_meta old[SX_MAX_VECTOR_FIELDS];
    size_t n_old = m->n_vecs < SX_MAX_VECTOR_FIELDS ? m->n_vecs : SX_MAX_VECTOR_FIELDS;
    memcpy(old, m->vecs, sizeof old);
    size_t k = 0;
    for (size_t i = 0; i < m->n_fields; i++) {
        const sx__field_meta *f = &m->fields[i];
        if (!sx_field_is_vector(f->engine_type))
            continue;
        if (k == SX_MAX_VECTOR_FIELDS)
            return false;
        sx__vec_meta *v = &m->vecs[k];
        memset(v, 0, sizeof *v);
        if (!by_name) {
            *v = old[k];
        } else {
            for (size_t j = 0; j < n_old; j++)
                if (strcmp(old[j].field, f->name) == 0)
                    *v = old[j];
        }
        copy_str(v->field, sizeof v->field, f->name);
        k++;
    }
    for (size_t j = k; j < SX_MAX_VECTOR_FIELDS; j++)
        memset(&m->vecs[j], 0, sizeof m->vecs[j]);
    m->n_vecs = k;
    return true;
}

/* Lays m->sparse out as the schema's SparseFloatVector fields in order; an entry keeps the index
 * state of the entry of the same name in m->sparse as it was (a file's "sparse"; none: no
 * index). False when dense and sparse vector fields together are over SX_MAX_VECTOR_FIELDS. */
static bool sparse_layout(sx__coll_meta *m)
{
    sx__sparse_meta old[SX_MAX_VECTOR_FIELDS];
    size_t n_old = m->n_sparse < SX_MAX_VECTOR_FIELDS ? m->n_sparse : SX_MAX_VECTOR_FIELDS;
    memcpy(old, m->sparse, sizeof old);
    size_t k = 0;
    for (size_t i = 0; i < m->n_fields; i++) {
        const sx__field_meta *f = &m->fields[i];
        if (!sx__field_is_sparse(f))
            continue;
        if (k + m->n_vecs >= SX_MAX_VECTOR_FIELDS)
            return false;
        sx__sparse_meta *s = &m->sparse[k];
        memset(s, 0, sizeof *s);
        for (size_t j = 0; j < n_old; j++)
            if (strcmp(old[j].field, f->name) == 0)
                *s = old[j];
        copy_str(s->field, sizeof s->field, f->name);
        k++;
    }
    for (size_t j = k; j < SX_MAX_VECTOR_FIELDS; j++)
        memset(&m->sparse[j], 0, sizeof m->sparse[j]);
    m->n_sparse = k;
    return true;
}

/* ---------------------------------------------------------------- metadata <-> JSON */

static json_t *meta_to_json(const sx__coll_meta *m)
{
    json_t *j = json_object();
    json_t *fields = json_array();
    json_t *parts = json_array();
    if (!j || !fields || !parts) {
        json_decref(j);
        json_decref(fields);
        json_decref(parts);
        return NULL;
    }
    json_object_set_new(j, "version", json_integer(2));
    json_object_set_new(j, "name", json_string(m->name));
    json_object_set_new(j, "engine_name", json_string(m->engine_name));
    json_object_set_new(j, "collection_id", json_integer(m->collection_id));
    json_object_set_new(j, "created_ms", json_integer(m->created_ms));
    json_object_set_new(j, "description", json_string(m->description));
    /* version 1 keys: the first vector field's state (see the file's comment) */
    const sx__vec_meta *v0 = m->n_vecs ? &m->vecs[0] : NULL;
    json_object_set_new(j, "metric", json_string(sx__metric_name(v0 ? v0->metric : SX_METRIC_L2)));
    json_object_set_new(j, "metric_pending", json_boolean(v0 && v0->metric_pending));
    json_t *vecs = json_array();
    for (size_t i = 0; vecs && i < m->n_vecs; i++) {
        const sx__vec_meta *v = &m->vecs[i];
        json_array_append_new(vecs, json_pack("{s:s,s:s,s:b,s:s,s:s}", "field", v->field, "metric",
                                              sx__metric_name(v->metric), "metric_pending",
                                              v->metric_pending, "index_name", v->index_name,
                                              "index_type", v->index_type));
    }
    json_object_set_new(j, "vectors", vecs ? vecs : json_array());
    if (m->n_sparse) {
        json_t *sp = json_array();
        for (size_t i = 0; sp && i < m->n_sparse; i++) {
            const sx__sparse_meta *s = &m->sparse[i];
            json_array_append_new(sp, json_pack("{s:s,s:s,s:s,s:s,s:f,s:s,s:s,s:f,s:f}", "field",
                                                s->field, "index_name", s->index_name, "index_type",
                                                s->index_type, "algo", s->algo, "drop_ratio_build",
                                                (double)s->drop_ratio_build, "function",
                                                s->function, "bm25_input", s->bm25_input, "bm25_k1",
                                                (double)s->bm25_k1, "bm25_b", (double)s->bm25_b));
        }
        json_object_set_new(j, "sparse", sp ? sp : json_array());
    }
    for (size_t i = 0; i < m->n_fields; i++) {
        const sx__field_meta *f = &m->fields[i];
        json_t *o = json_object();
        if (!o)
            continue;
        json_object_set_new(o, "name", json_string(f->name));
        json_object_set_new(o, "type", json_string(f->type));
        json_object_set_new(o, "engine_type", json_integer((json_int_t)f->engine_type));
        json_object_set_new(o, "field_id", json_integer(f->field_id));
        json_object_set_new(o, "is_primary", json_boolean(f->is_primary));
        json_object_set_new(o, "auto_id", json_boolean(f->auto_id));
        json_object_set_new(o, "is_partition_key", json_boolean(f->is_partition_key));
        json_object_set_new(o, "dim", json_integer(f->dim));
        json_object_set_new(o, "max_length", json_integer(f->max_length));
        if (f->default_json[0])
            json_object_set_new(o, "default", json_string(f->default_json));
        if (f->nullable)
            json_object_set_new(o, "nullable", json_true());
        if (f->enable_analyzer) { /* absent before 2026-12-06 */
            json_object_set_new(o, "enable_analyzer", json_true());
            json_object_set_new(o, "analyzer", json_string(f->analyzer));
        }
        if (f->elem_type[0]) {
            json_object_set_new(o, "element_type", json_string(f->elem_type));
            json_object_set_new(o, "max_capacity", json_integer(f->max_capacity));
            json_object_set_new(o, "element_max_length", json_integer(f->elem_max_length));
        }
        json_object_set_new(o, "description", json_string(f->description));
        json_array_append_new(fields, o);
    }
    json_object_set_new(j, "fields", fields);
    json_object_set_new(j, "enable_dynamic", json_boolean(m->enable_dynamic));
    json_object_set_new(j, "has_partitions", json_boolean(m->has_partitions));
    if (m->n_aliases) {
        json_t *al = json_array();
        for (size_t i = 0; i < m->n_aliases; i++)
            json_array_append_new(al, json_string(m->aliases[i]));
        json_object_set_new(j, "aliases", al);
    }
    json_object_set_new(j, "consistency", json_string(m->consistency));
    if (m->shards > 1)
        json_object_set_new(j, "shards", json_integer((json_int_t)m->shards));
    json_object_set_new(j, "loaded", json_boolean(m->loaded));
    bool v0_index = v0 && v0->index_name[0];
    json_object_set_new(j, "index_name", json_string(v0_index ? v0->index_name : ""));
    json_object_set_new(j, "index_field", json_string(v0_index ? v0->field : ""));
    json_object_set_new(j, "index_type", json_string(v0_index ? v0->index_type : ""));
    for (size_t i = 0; i < m->n_parts; i++)
        json_array_append_new(parts, json_string(m->parts[i]));
    json_object_set_new(j, "partitions", parts);
    if (m->key_parts)
        json_object_set_new(j, "key_partitions", json_integer((json_int_t)m->key_parts));
    json_t *props = json_loads(m->properties[0] ? m->properties : "{}", 0, NULL);
    if (!json_is_object(props)) {
        json_decref(props);
        props = json_object();
    }
    json_object_set_new(j, "properties", props);
    return j;
}

static const char *jstr_or(const json_t *o, const char *k, const char *def)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : def;
}

static int64_t jint_or(const json_t *o, const char *k, int64_t def)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

static bool jbool_or(const json_t *o, const char *k, bool def)
{
    const json_t *v = json_object_get(o, k);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

/* The vector fields' state of a metadata file (version 2 "vectors", else the version 1 keys) into
 * m->vecs; m->fields are read. False when the schema has too many vector fields. */
static bool vecs_from_json(const json_t *j, sx__coll_meta *m)
{
    memset(m->vecs, 0, sizeof m->vecs);
    m->n_vecs = 0;
    const json_t *vecs = json_object_get(j, "vectors");
    size_t i;
    const json_t *vo;
    if (json_is_array(vecs)) {
        json_array_foreach(vecs, i, vo) {
            if (m->n_vecs == SX_MAX_VECTOR_FIELDS)
                break;
            sx__vec_meta *v = &m->vecs[m->n_vecs++];
            copy_str(v->field, sizeof v->field, jstr_or(vo, "field", ""));
            if (!sx__metric_parse(jstr_or(vo, "metric", "L2"), &v->metric))
                v->metric = SX_METRIC_L2;
            v->metric_pending = jbool_or(vo, "metric_pending", false);
            copy_str(v->index_name, sizeof v->index_name, jstr_or(vo, "index_name", ""));
            copy_str(v->index_type, sizeof v->index_type, jstr_or(vo, "index_type", ""));
        }
        return vecs_layout(m, true);
    }
    /* version 1: one vector field */
    if (!vecs_layout(m, true))
        return false;
    if (m->n_vecs == 0)
        return true;
    sx__vec_meta *v = &m->vecs[0];
    if (!sx__metric_parse(jstr_or(j, "metric", "L2"), &v->metric))
        v->metric = SX_METRIC_L2;
    v->metric_pending = jbool_or(j, "metric_pending", false);
    const char *ifield = jstr_or(j, "index_field", "");
    for (size_t k = 0; k < m->n_vecs; k++)
        if (strcmp(m->vecs[k].field, ifield) == 0)
            v = &m->vecs[k];
    copy_str(v->index_name, sizeof v->index_name, jstr_or(j, "index_name", ""));
    copy_str(v->index_type, sizeof v->index_type, jstr_or(j, "index_type", ""));
    return true;
}

/* The sparse fields' index state of a metadata file ("sparse", absent before 2026-12-06: no
 * sparse fields then) into m->sparse; m->fields and m->vecs are read. */
static bool sparse_from_json(const json_t *j, sx__coll_meta *m)
{
    memset(m->sparse, 0, sizeof m->sparse);
    m->n_sparse = 0;
    const json_t *arr = json_object_get(j, "sparse");
    size_t i;
    const json_t *so;
    json_array_foreach(arr, i, so) {
        if (m->n_sparse == SX_MAX_VECTOR_FIELDS)
            break;
        sx__sparse_meta *s = &m->sparse[m->n_sparse++];
        copy_str(s->field, sizeof s->field, jstr_or(so, "field", ""));
        copy_str(s->index_name, sizeof s->index_name, jstr_or(so, "index_name", ""));
        copy_str(s->index_type, sizeof s->index_type, jstr_or(so, "index_type", ""));
        copy_str(s->algo, sizeof s->algo, jstr_or(so, "algo", ""));
        const json_t *d = json_object_get(so, "drop_ratio_build");
        double dr = json_is_number(d) ? json_number_value(d) : 0;
        s->drop_ratio_build = dr >= 0 && dr < 1 ? (float)dr : 0.0f;
        copy_str(s->function, sizeof s->function, jstr_or(so, "function", ""));
        copy_str(s->bm25_input, sizeof s->bm25_input, jstr_or(so, "bm25_input", ""));
        const json_t *k1 = json_object_get(so, "bm25_k1"), *b = json_object_get(so, "bm25_b");
        s->bm25_k1 = json_is_number(k1) ? (float)json_number_value(k1) : 1.2f;
        s->bm25_b = json_is_number(b) ? (float)json_number_value(b) : 0.75f;
    }
    return sparse_layout(m);
}

/* Returns false when the file is not a usable metadata object. */
static bool meta_from_json(const json_t *j, sx__coll_meta *m)
{
    memset(m, 0, sizeof *m);
    if (!json_is_object(j))
        return false;
    const char *name = jstr_or(j, "name", NULL), *ename = jstr_or(j, "engine_name", NULL);
    if (!valid_name(name) || !valid_name(ename))
        return false;
    copy_str(m->name, sizeof m->name, name);
    copy_str(m->engine_name, sizeof m->engine_name, ename);
    m->collection_id = jint_or(j, "collection_id", 0);
    m->created_ms = jint_or(j, "created_ms", 0);
    copy_str(m->description, sizeof m->description, jstr_or(j, "description", ""));
    utf8_cut(m->description);
    const json_t *fields = json_object_get(j, "fields");
    if (!json_is_array(fields) || json_array_size(fields) == 0 ||
        json_array_size(fields) > SX_MAX_FIELDS)
        return false;
    size_t i;
    const json_t *fo;
    json_array_foreach(fields, i, fo) {
        sx__field_meta *f = &m->fields[i];
        const char *fname = jstr_or(fo, "name", NULL);
        if (!valid_name(fname))
            return false;
        copy_str(f->name, sizeof f->name, fname);
        copy_str(f->type, sizeof f->type, jstr_or(fo, "type", ""));
        f->engine_type = (sx_field_type)jint_or(fo, "engine_type", 0);
        if (f->engine_type < SX_FIELD_INT64 || f->engine_type > SX_FIELD_BINARY_VECTOR)
            return false;
        if (!f->type[0])
            copy_str(f->type, sizeof f->type, type_name_of(f->engine_type));
        f->field_id = jint_or(fo, "field_id", 100 + (int64_t)i);
        f->is_primary = jbool_or(fo, "is_primary", false);
        f->auto_id = jbool_or(fo, "auto_id", false);
        f->is_partition_key = jbool_or(fo, "is_partition_key", false);
        f->dim = (uint32_t)jint_or(fo, "dim", 0);
        f->max_length = (uint32_t)jint_or(fo, "max_length", 0);
        copy_str(f->elem_type, sizeof f->elem_type, jstr_or(fo, "element_type", ""));
        f->max_capacity = (uint32_t)jint_or(fo, "max_capacity", 0);
        f->elem_max_length = (uint32_t)jint_or(fo, "element_max_length", 0);
        copy_str(f->default_json, sizeof f->default_json, jstr_or(fo, "default", ""));
        f->nullable = jbool_or(fo, "nullable", false); /* absent in files before 2026-12-04 */
        f->enable_analyzer = jbool_or(fo, "enable_analyzer", false);
        copy_str(f->analyzer, sizeof f->analyzer, jstr_or(fo, "analyzer", ""));
        copy_str(f->description, sizeof f->description, jstr_or(fo, "description", ""));
        utf8_cut(f->description);
    }
    m->n_fields = json_array_size(fields);
    m->enable_dynamic = jbool_or(j, "enable_dynamic", false);
    m->has_partitions = jbool_or(j, "has_partitions", false);
    copy_str(m->consistency, sizeof m->consistency, jstr_or(j, "consistency", "Bounded"));
    m->loaded = jbool_or(j, "loaded", false);
    if (!vecs_from_json(j, m) || !sparse_from_json(j, m))
        return false;
    const json_t *al = json_object_get(j, "aliases"); /* absent before 2026-12-04 */
    m->n_aliases = 0;
    if (json_is_array(al)) {
        const json_t *a;
        json_array_foreach(al, i, a) {
            if (json_is_string(a) && m->n_aliases < SX__MAX_ALIASES &&
                valid_name(json_string_value(a)))
                copy_str(m->aliases[m->n_aliases++], sizeof m->aliases[0], json_string_value(a));
        }
    }
    const json_t *parts = json_object_get(j, "partitions");
    m->n_parts = 0;
    if (json_is_array(parts)) {
        const json_t *p;
        json_array_foreach(parts, i, p) {
            if (json_is_string(p) && m->n_parts < SX__MAX_PARTS)
                copy_str(m->parts[m->n_parts++], sizeof m->parts[0], json_string_value(p));
        }
    }
    if (m->n_parts == 0 || strcmp(m->parts[0], "_default") != 0) {
        if (m->n_parts == SX__MAX_PARTS)
            m->n_parts--;
        memmove(m->parts[1], m->parts[0], m->n_parts * sizeof m->parts[0]);
        copy_str(m->parts[0], sizeof m->parts[0], "_default");
        m->n_parts++;
    }
    int64_t shards = jint_or(j, "shards", 1); /* absent before 2026-12-06 and when 1 */
    m->shards = shards >= 1 && shards <= SX__MAX_SHARDS ? (uint32_t)shards : 1;
    /* partition key mode (absent before 2026-12-06: 0, the rows stay in "_default") */
    int64_t kp = jint_or(j, "key_partitions", 0);
    m->key_parts = 0;
    if (kp > 0 && kp <= (int64_t)SX__MAX_KEY_PARTS) {
        for (size_t f = 0; f < m->n_fields; f++)
            if (m->fields[f].is_partition_key)
                m->key_parts = (uint32_t)kp;
    }
    const json_t *props = json_object_get(j, "properties");
    size_t plen = 0;
    char *ptext = json_is_object(props) ? dump_json(props, &plen) : NULL;
    if (ptext && plen < sizeof m->properties)
        copy_str(m->properties, sizeof m->properties, ptext);
    else
        copy_str(m->properties, sizeof m->properties, "{}");
    sx__free(ptext);
    return true;
}

json_t *sx__cat_meta_json(const sx__coll_meta *m)
{
    return meta_to_json(m);
}

bool sx__cat_meta_parse(const json_t *j, sx__coll_meta *m)
{
    return meta_from_json(j, m);
}

static sx_status write_meta(const cdb *d, const sx__coll_meta *m)
{
    json_t *j = meta_to_json(m);
    if (!j)
        return sx__err(SX_ENOMEM, "catalog: metadata of %s", m->name);
    char file[SX_MAX_NAME + 16];
    (void)snprintf(file, sizeof file, "%s.json", m->engine_name);
    sx_status st = write_json_file(d->dir, file, j);
    json_decref(j);
    return st;
}

static void unlink_meta(const cdb *d, const char *engine_name)
{
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/rest/%s.json", d->dir, engine_name);
    sx__ignore(sx__fs_unlink(path));
}

/* Metadata for an engine collection that has none (made by the CLI or the C API). */
static sx_status derive_meta(sx_db *db, const char *ename, sx__coll_meta *m)
{
    sx_collection *h = NULL;
    sx_status st = sx_collection_open(db, ename, &h);
    if (st != SX_OK)
        return st;
    sx_collection_info *info = sx__malloc(sizeof *info);
    if (!info) {
        sx_collection_release(h);
        return sx__err(SX_ENOMEM, "catalog: derive %s", ename);
    }
    st = sx_collection_describe(h, info);
    if (st != SX_OK)
        goto out;
    memset(m, 0, sizeof *m);
    copy_str(m->name, sizeof m->name, ename);
    copy_str(m->engine_name, sizeof m->engine_name, ename);
    for (size_t i = 0; i < info->n_fields; i++) {
        const sx_field_def *f = &info->fields[i];
        if (strcmp(f->name, SX__META_FIELD) == 0 && f->type == SX_FIELD_VARCHAR) {
            m->enable_dynamic = true;
            continue;
        }
        if (strcmp(f->name, SX__PART_FIELD) == 0 && f->type == SX_FIELD_VARCHAR) {
            m->has_partitions = true;
            continue;
        }
        sx__field_meta *fm = &m->fields[m->n_fields];
        copy_str(fm->name, sizeof fm->name, f->name);
        copy_str(fm->type, sizeof fm->type, type_name_of(f->type));
        fm->engine_type = f->type;
        fm->field_id = 100 + (int64_t)m->n_fields;
        fm->is_primary = f->is_primary;
        fm->auto_id = f->auto_id;
        fm->dim = f->dim;
        fm->max_length =
            f->type == SX_FIELD_VARCHAR ? (f->max_length ? f->max_length : SX_MAX_VARCHAR) : 0;
        m->n_fields++;
    }
    copy_str(m->consistency, sizeof m->consistency, "Bounded");
    m->shards = 1;
    m->loaded = true;
    if (!vecs_layout(m, false)) {
        st = sx__err(SX_EINVAL, "catalog: %s has more than %u vector fields", ename,
                     SX_MAX_VECTOR_FIELDS);
        goto out;
    }
    /* each vector field's metric and index, named after its field (as Milvus names them) */
    for (size_t i = 0; i < m->n_vecs; i++) {
        sx__vec_meta *v = &m->vecs[i];
        sx_index_info ii;
        st = sx_index_describe_on(h, v->field, &ii);
        if (st != SX_OK)
            goto out;
        v->metric = ii.metric;
        if (ii.state != SX_INDEX_NONE) {
            copy_str(v->index_name, sizeof v->index_name, v->field);
            copy_str(v->index_type, sizeof v->index_type, ii.type);
        }
    }
    m->n_parts = 1;
    copy_str(m->parts[0], sizeof m->parts[0], "_default");
    copy_str(m->properties, sizeof m->properties, "{}");
out:
    sx__free(info);
    sx_collection_release(h);
    return st;
}

/* The engine is the truth for the metric: a crash between sx_collection_set_metric_on and the
 * metadata write leaves the metadata behind. Returns true when *m changed. */
static bool reconcile_metric(sx_db *db, sx__coll_meta *m)
{
    sx_collection *h = NULL;
    if (sx_collection_open(db, m->engine_name, &h) != SX_OK)
        return false;
    bool changed = false;
    for (size_t i = 0; i < m->n_vecs; i++) {
        sx__vec_meta *v = &m->vecs[i];
        sx_index_info ii;
        if (sx_index_describe_on(h, v->field, &ii) != SX_OK)
            continue;
        if (ii.metric != v->metric) {
            v->metric = ii.metric;
            changed = true;
        }
        if (v->metric_pending && ii.state != SX_INDEX_NONE) {
            v->metric_pending = false;
            changed = true;
        }
    }
    sx_collection_release(h);
    return changed;
}

/* ---------------------------------------------------------------- databases */

static void cdb_free(cdb *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_metas; i++)
        sx__free(d->metas[i]);
    sx__free(d->metas);
    json_decref(d->props);
    sx__free(d->dir);
    sx__free(d->gone_dir);
    sx__free(d);
}

/* The last reference of a database is gone: closes its sx_db (builder thread, LOCK file, ...) and,
 * when it was dropped, deletes its directory (already renamed to databases/.drop-DIR). */
static void cdb_destroy(cdb *d)
{
    sx_db_close(d->db);
    d->db = NULL;
    if (d->gone_dir)
        sx__ignore(sx__fs_rmtree(d->gone_dir));
    cdb_free(d);
}

/* Drops one reference (taken by cdb_ref, or the list's own at drop). */
static void cdb_put(sx__catalog *cat, cdb *d)
{
    if (!d)
        return;
    sx__mutex_lock(&cat->mu);
    bool last = --d->refs == 0;
    sx__mutex_unlock(&cat->mu);
    if (last)
        cdb_destroy(d);
}

/* Requires cat->mu, or exclusive use of d (while it is being opened). */
static sx_status cdb_add_meta(cdb *d, const sx__coll_meta *m)
{
    if (d->n_metas == d->cap_metas) {
        size_t cap = d->cap_metas ? d->cap_metas * 2 : 8;
        sx__coll_meta **nm = sx__realloc(d->metas, cap * sizeof *nm);
        if (!nm)
            return sx__err(SX_ENOMEM, "catalog");
        d->metas = nm;
        d->cap_metas = cap;
    }
    sx__coll_meta *c = sx__malloc(sizeof *c);
    if (!c)
        return sx__err(SX_ENOMEM, "catalog");
    memcpy(c, m, sizeof *c);
    d->metas[d->n_metas++] = c;
    return SX_OK;
}

/* The collection named `name`, or holding it as an alias. Requires cat->mu. */
static sx__coll_meta *find_meta(const cdb *d, const char *name, size_t *idx)
{
    for (size_t i = 0; i < d->n_metas; i++) {
        bool hit = strcmp(d->metas[i]->name, name) == 0;
        for (size_t a = 0; !hit && a < d->metas[i]->n_aliases; a++)
            hit = strcmp(d->metas[i]->aliases[a], name) == 0;
        if (hit) {
            if (idx)
                *idx = i;
            return d->metas[i];
        }
    }
    return NULL;
}

static sx__coll_meta *find_meta_engine(const cdb *d, const char *ename)
{
    for (size_t i = 0; i < d->n_metas; i++)
        if (strcmp(d->metas[i]->engine_name, ename) == 0)
            return d->metas[i];
    return NULL;
}

/* Requires cat->mu. */
static cdb *find_db(sx__catalog *cat, const char *name)
{
    if (!name || !*name)
        name = "default";
    for (size_t i = 0; i < cat->n_dbs; i++)
        if (strcmp(cat->dbs[i]->name, name) == 0)
            return cat->dbs[i];
    return NULL;
}

/* Requires cat->mu: a reference on d (cdb_put releases it), for callers that use d->db after
 * unlocking without holding ddl_mu (a drop may unlist d meanwhile; it is closed at the last put).
 */
static cdb *cdb_ref(cdb *d)
{
    if (d)
        d->refs++;
    return d;
}

/* The name of the database in directory `path` (entry: the directory's name): the "name" of its
 * rest/db.properties.json, or for directories made before names were stored there, the
 * directory's name. False when neither is a valid name. */
static bool db_name_of(const char *path, const char *entry, char *out)
{
    char file[4096];
    (void)snprintf(file, sizeof file, "%s/rest/db.properties.json", path);
    json_t *j = sx__fs_exists(file) ? load_json_file(file) : NULL;
    const char *n = jstr_or(j, "name", NULL);
    bool ok = valid_name(n);
    if (ok)
        copy_str(out, SX_MAX_NAME + 1, n);
    json_decref(j);
    if (ok)
        return true;
    if (!valid_name(entry))
        return false;
    copy_str(out, SX_MAX_NAME + 1, entry);
    return true;
}

static sx_status coll_not_found(const char *db, const char *name)
{
    return sx__err(SX_ENOTFOUND, SX__COLL_NOT_FOUND, db && *db ? db : "default", name ? name : "");
}

static sx_status db_not_found(const char *db)
{
    return sx__err(SX_ENOTFOUND, "database not found[database=%s]", db && *db ? db : "default");
}

/* Opens one database and reconciles its metadata with the engine (invariant 1). */
static sx_status
cdb_open(sx__catalog *cat, const char *name, const char *dir, int64_t id_if_new, cdb **out)
{
    cdb *d = sx__calloc(1, sizeof *d);
    if (!d)
        return sx__err(SX_ENOMEM, "catalog");
    copy_str(d->name, sizeof d->name, name);
    d->dir = sx__strdup(dir);
    char **enames = NULL, **files = NULL;
    size_t n_en = 0, n_files = 0;
    sx__coll_meta *m = sx__malloc(sizeof *m);
    sx_status st = d->dir && m ? SX_OK : sx__err(SX_ENOMEM, "catalog");
    /* With object storage, database NAME keeps its objects under <url>/databases/NAME, the
     * default database directly under <url> (the same layout as the local directories). */
    sx_db_options dbo = cat->opts;
    /* One thread per engine batch unless the options name more: the merger (merge.c) already
     * runs one search per CPU at once, and merged batches form exactly when every CPU is busy,
     * so splitting each batch again would only oversubscribe them. */
    if (!dbo.search_threads)
        dbo.search_threads = 1;
    char url[4096];
    if (st == SX_OK && dbo.storage_url && *dbo.storage_url && strcmp(name, "default") != 0) {
        size_t ul = strlen(dbo.storage_url);
        while (ul > 0 && dbo.storage_url[ul - 1] == '/')
            ul--;
        const char *base = strrchr(dir, '/');
        base = base ? base + 1 : dir; /* the directory's name: the database's name if short */
        (void)snprintf(url, sizeof url, "%.*s/databases/%s", (int)ul, dbo.storage_url, base);
        dbo.storage_url = url;
    }
    if (st == SX_OK)
        st = sx_db_open(dir, &dbo, &d->db);
    if (st == SX_OK)
        st = sx_collection_list(d->db, &enames, &n_en);
    char path[4096];
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/rest", dir);
        if (sx__fs_exists(path))
            st = sx__fs_list(path, &files, &n_files);
    }
    bool ro = cat->opts.read_only;
    /* metadata files first */
    for (size_t i = 0; st == SX_OK && i < n_files; i++) {
        size_t len = strlen(files[i]);
        if (len <= 5 || strcmp(files[i] + len - 5, ".json") != 0)
            continue;
        char stem[SX_MAX_NAME + 1];
        if (len - 5 > SX_MAX_NAME)
            continue;
        memcpy(stem, files[i], len - 5);
        stem[len - 5] = '\0';
        if (!valid_name(stem))
            continue; /* db.properties.json, *.tmp leftovers */
        bool in_engine = bsearch(&(const char *){ stem }, enames, n_en, sizeof(char *), cmp_str);
        (void)snprintf(path, sizeof path, "%s/rest/%s", dir, files[i]);
        json_t *j = in_engine ? load_json_file(path) : NULL;
        bool ok = j && meta_from_json(j, m) && strcmp(m->engine_name, stem) == 0 &&
                  !find_meta(d, m->name, NULL);
        json_decref(j);
        if (!in_engine) {
            if (!ro)
                sx__ignore(sx__fs_unlink(path)); /* half-created or half-dropped */
            continue;
        }
        if (ok && reconcile_metric(d->db, m) && !ro)
            sx__ignore(write_meta(d, m));
        if (ok)
            st = cdb_add_meta(d, m);
        /* else: unusable file, the engine collection gets derived metadata below */
    }
    /* engine collections without metadata */
    for (size_t i = 0; st == SX_OK && i < n_en; i++) {
        if (find_meta_engine(d, enames[i]))
            continue;
        sx_status dst = derive_meta(d->db, enames[i], m);
        if (dst != SX_OK || find_meta(d, m->name, NULL))
            continue; /* XXX unusable or its name is taken by a renamed collection: hidden */
        m->collection_id = new_id(cat);
        m->created_ms = now_ms();
        if (!ro)
            sx__ignore(write_meta(d, m));
        st = cdb_add_meta(d, m);
    }
    /* properties */
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/rest/db.properties.json", dir);
        json_t *j = sx__fs_exists(path) ? load_json_file(path) : NULL;
        json_t *p = json_object_get(j, "properties");
        d->props = json_is_object(p) ? json_deep_copy(p) : json_object();
        d->db_id = json_is_integer(json_object_get(j, "id"))
                       ? (int64_t)json_integer_value(json_object_get(j, "id"))
                       : id_if_new;
        bool fresh = !j;
        json_decref(j);
        if (!d->props)
            st = sx__err(SX_ENOMEM, "catalog");
        else if (fresh && !ro) {
            json_t *o = json_pack("{s:I,s:s,s:O}", "id", (json_int_t)d->db_id, "name", d->name,
                                  "properties", d->props);
            st = o ? write_json_file(dir, "db.properties.json", o) : sx__err(SX_ENOMEM, "catalog");
            json_decref(o);
        }
    }
    sx_strings_free(enames, n_en);
    sx_strings_free(files, n_files);
    sx__free(m);
    if (st != SX_OK) {
        sx_db_close(d->db);
        cdb_free(d);
        return st;
    }
    d->refs = 1; /* the list's */
    *out = d;
    return SX_OK;
}

static sx_status flush_and_close(cdb *d, bool read_only)
{
    sx_status first = SX_OK;
    char **names = NULL;
    size_t n = 0;
    if (d->db && !read_only && sx_collection_list(d->db, &names, &n) == SX_OK) {
        for (size_t i = 0; i < n; i++) {
            sx_collection *h = NULL;
            if (sx_collection_open(d->db, names[i], &h) != SX_OK)
                continue;
            sx_status st = sx_flush(h);
            if (st != SX_OK && first == SX_OK)
                first = st;
            sx_collection_release(h);
        }
        sx_strings_free(names, n);
    }
    sx_db_close(d->db);
    d->db = NULL;
    return first;
}

sx_status sx__cat_open(const char *dir, const sx_db_options *opts, sx__catalog **out)
{
    if (!dir || !*dir || !out)
        return sx__err(SX_EINVAL, "catalog: data directory required");
    sx__catalog *cat = sx__calloc(1, sizeof *cat);
    if (!cat)
        return sx__err(SX_ENOMEM, "catalog");
    (void)sx__mutex_init(&cat->mu, SX__RANK_CATALOG, "catalog.mu");
    (void)sx__mutex_init(&cat->ddl_mu, SX__RANK_CATALOG_DDL, "catalog.ddl_mu");
    if (opts)
        cat->opts = *opts;
    /* Databases are opened later (create): own copies of the option strings. */
    if (cat->opts.storage_url)
        cat->opts.storage_url = cat->storage_url = sx__strdup(cat->opts.storage_url);
    if (cat->opts.s3_endpoint)
        cat->opts.s3_endpoint = cat->s3_endpoint = sx__strdup(cat->opts.s3_endpoint);
    if (cat->opts.s3_region)
        cat->opts.s3_region = cat->s3_region = sx__strdup(cat->opts.s3_region);
    cat->root = sx__strdup(dir);
    if (!cat->opts.memory_budget) {
        sx_status bst = sx_memory_budget_new(cat->opts.memory_limit_bytes, &cat->budget_owned);
        if (bst != SX_OK) {
            sx__ignore(sx__cat_close(cat));
            return bst;
        }
        cat->opts.memory_budget = cat->budget_owned;
    }
    char **names = NULL;
    size_t n = 0;
    char path[4096];
    sx_status st = cat->root ? SX_OK : sx__err(SX_ENOMEM, "catalog");
    if (st == SX_OK && !cat->opts.read_only)
        st = sx__fs_mkdir_p(dir);
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/databases", dir);
        if (sx__fs_exists(path))
            st = sx__fs_list(path, &names, &n);
    }
    size_t cap = n + 1;
    if (st == SX_OK) {
        cat->dbs = sx__calloc(cap, sizeof *cat->dbs);
        if (!cat->dbs)
            st = sx__err(SX_ENOMEM, "catalog");
    }
    cdb *d = NULL;
    if (st == SX_OK)
        st = cdb_open(cat, "default", dir, 1, &d);
    if (st == SX_OK)
        cat->dbs[cat->n_dbs++] = d;
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        (void)snprintf(path, sizeof path, "%s/databases/%s", dir, names[i]);
        if (names[i][0] == '.') { /* .tmp-DIR: a create that did not finish; .drop-DIR: a drop */
            bool staged = strncmp(names[i], ".tmp-", 5) == 0 || strncmp(names[i], ".drop-", 6) == 0;
            if (staged && !cat->opts.read_only)
                sx__ignore(sx__fs_rmtree(path));
            continue;
        }
        char dbname[SX_MAX_NAME + 1];
        if (!db_name_of(path, names[i], dbname) || strcmp(dbname, "default") == 0 ||
            find_db(cat, dbname))
            continue;
        st = cdb_open(cat, dbname, path, new_id(cat), &d);
        if (st == SX_OK)
            cat->dbs[cat->n_dbs++] = d;
    }
    sx_strings_free(names, n);
    if (st != SX_OK) {
        char msg[512];
        copy_str(msg, sizeof msg, sx_errmsg());
        sx__ignore(sx__cat_close(cat));
        return sx__err(st, "%s", msg);
    }
    *out = cat;
    return SX_OK;
}

sx_status sx__cat_close(sx__catalog *cat)
{
    if (!cat)
        return SX_OK;
    sx_status first = SX_OK;
    for (size_t i = 0; i < cat->n_dbs; i++) {
        sx_status st = flush_and_close(cat->dbs[i], cat->opts.read_only);
        if (st != SX_OK && first == SX_OK)
            first = st;
        cdb_free(cat->dbs[i]);
    }
    sx__free(cat->dbs);
    sx__free(cat->root);
    sx__free(cat->storage_url);
    sx__free(cat->s3_endpoint);
    sx__free(cat->s3_region);
    sx_memory_budget_free(cat->budget_owned);
    sx__mutex_destroy(&cat->mu);
    sx__mutex_destroy(&cat->ddl_mu);
    sx__free(cat);
    return first;
}

void sx__cat_memory_stats(sx__catalog *cat, sx_memory_stats *out)
{
    sx_memory_budget_stats(cat->opts.memory_budget, out);
}

uint64_t sx__cat_remote_builds(sx__catalog *cat)
{
    uint64_t n = 0;
    sx__mutex_lock(&cat->mu);
    for (size_t i = 0; i < cat->n_dbs; i++)
        n += sx_db_remote_builds(cat->dbs[i]->db);
    sx__mutex_unlock(&cat->mu);
    return n;
}

sx_status sx__cat_db_list(sx__catalog *cat, char ***names, size_t *n)
{
    sx__mutex_lock(&cat->mu);
    size_t count = cat->n_dbs;
    char **out = sx__calloc(count + 1, sizeof *out);
    sx_status st = out ? SX_OK : sx__err(SX_ENOMEM, "catalog");
    for (size_t i = 0; st == SX_OK && i < count; i++) {
        out[i] = sx__strdup(cat->dbs[i]->name);
        if (!out[i])
            st = sx__err(SX_ENOMEM, "catalog");
    }
    sx__mutex_unlock(&cat->mu);
    if (st != SX_OK) {
        sx_strings_free(out, count);
        return st;
    }
    if (count > 1)
        qsort(out + 1, count - 1, sizeof *out, cmp_str); /* "default" stays first */
    *names = out;
    *n = count;
    return SX_OK;
}

bool sx__cat_db_exists(sx__catalog *cat, const char *db)
{
    sx__mutex_lock(&cat->mu);
    bool ok = find_db(cat, db) != NULL;
    sx__mutex_unlock(&cat->mu);
    return ok;
}

/* The directory name of a new database: its name when short and free on disk, else a prefix of it
 * and a number (the name is in rest/db.properties.json either way). */
static void pick_db_dir(const char *dbs, const char *db, int64_t id, char *base, size_t cap)
{
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/%s", dbs, db);
    if (strlen(db) <= DISK_NAME_MAX && !sx__fs_exists(path)) {
        copy_str(base, cap, db);
        return;
    }
    for (int64_t k = id;; k++) {
        (void)snprintf(base, cap, "%.*s_%lld", (int)(DISK_NAME_MAX - 21), db, (long long)k);
        (void)snprintf(path, sizeof path, "%s/%s", dbs, base);
        if (!sx__fs_exists(path))
            return;
    }
}

/* Takes the directory dbs/base out of the namespace first (a rename needs no descriptor, so it
 * works when the process is out of them), then deletes it. Best effort: whatever is left is a
 * .drop- directory, removed at the next open. */
static void discard_db_dir(const char *dbs, const char *base)
{
    char fin[4096], gone[4096];
    (void)snprintf(fin, sizeof fin, "%s/%s", dbs, base);
    (void)snprintf(gone, sizeof gone, "%s/.drop-%s", dbs, base);
    sx__ignore(sx__fs_rmtree(gone));
    if (sx__fs_rename(fin, gone) == SX_OK) {
        sx__ignore(sx__fs_sync_dir(dbs));
        sx__ignore(sx__fs_rmtree(gone));
    } else {
        sx__ignore(sx__fs_rmtree(fin));
    }
}

/* Adds an opened database to the catalog; on failure closes and frees it (SX_ENOMEM). */
static sx_status cat_append_db(sx__catalog *cat, cdb *d)
{
    sx__mutex_lock(&cat->mu);
    cdb **nd = sx__realloc(cat->dbs, (cat->n_dbs + 1) * sizeof *nd);
    if (nd) {
        cat->dbs = nd;
        cat->dbs[cat->n_dbs++] = d;
    }
    sx__mutex_unlock(&cat->mu);
    if (nd)
        return SX_OK;
    sx_db_close(d->db);
    cdb_free(d);
    return sx__err(SX_ENOMEM, "catalog");
}

/* Creates database db (ddl_mu held). */
static sx_status db_create_locked(sx__catalog *cat, const char *db)
{
    sx__mutex_lock(&cat->mu);
    bool exists = find_db(cat, db) != NULL;
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    cdb *d = NULL;
    json_t *o = NULL;
    if (exists) {
        st = sx__err(SX_EEXIST, "database already exist: %s", db);
        goto out;
    }
    /* Atomic on disk: the directory is prepared as databases/.tmp-DIR (rest/db.properties.json
     * with the name and id, fsynced) and renamed into place, then databases/ is fsynced. A crash
     * before the rename leaves a .tmp- directory that open removes. */
    char dbs[4096], base[DISK_NAME_MAX + 1], tmp[4096], fin[4096];
    (void)snprintf(dbs, sizeof dbs, "%s/databases", cat->root);
    st = sx__fs_mkdir_p(dbs);
    if (st != SX_OK)
        goto out;
    int64_t id = new_id(cat);
    pick_db_dir(dbs, db, id, base, sizeof base);
    (void)snprintf(tmp, sizeof tmp, "%s/.tmp-%s", dbs, base);
    (void)snprintf(fin, sizeof fin, "%s/%s", dbs, base);
    sx__ignore(sx__fs_rmtree(tmp));
    o = json_pack("{s:I,s:s,s:{}}", "id", (json_int_t)id, "name", db, "properties");
    st = o ? sx__fs_mkdir_p(tmp) : sx__err(SX_ENOMEM, "catalog");
    if (st == SX_OK)
        st = write_json_file(tmp, "db.properties.json", o);
    if (st == SX_OK)
        st = sx__fs_sync_dir(tmp);
    if (st == SX_OK)
        st = sx__fs_rename(tmp, fin);
    if (st != SX_OK) {
        sx__ignore(sx__fs_rmtree(tmp));
        goto out;
    }
    st = sx__fs_sync_dir(dbs);
    if (st == SX_OK)
        st = cdb_open(cat, db, fin, id, &d);
    if (st != SX_OK) { /* the call fails: the directory goes (it would be back at the next open) */
        char msg[512];
        copy_str(msg, sizeof msg, sx_errmsg());
        discard_db_dir(dbs, base);
        st = sx__err(st, "%s", msg);
        goto out;
    }
    st = cat_append_db(cat, d);
    if (st != SX_OK)
        discard_db_dir(dbs, base);
out:
    json_decref(o);
    return st;
}

sx_status sx__cat_db_create(sx__catalog *cat, const char *db)
{
    if (!valid_name(db))
        return sx__err(SX_EINVAL, "invalid database name \"%s\": must match [A-Za-z_][A-Za-z0-9_]*",
                       db ? db : "");
    if (cat->opts.read_only)
        return sx__err(SX_EINVAL, "catalog is read-only");
    sx__mutex_lock(&cat->ddl_mu);
    sx_status st = db_create_locked(cat, db);
    sx__mutex_unlock(&cat->ddl_mu);
    return st;
}

sx_status sx__cat_db_follow(sx__catalog *cat, const char *db)
{
    if (!cat->opts.read_only)
        return sx__err(SX_EINVAL, "only a read-only server follows databases");
    if (!valid_name(db) || strcmp(db, "default") == 0 || strlen(db) > DISK_NAME_MAX)
        return SX_OK; /* a long name's directory (and store prefix) is not its name: not found */
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    bool have = find_db(cat, db) != NULL;
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    if (have)
        goto out;
    /* the directory is named as the writers name theirs (the name itself), so cdb_open derives
     * the same store prefix <url>/databases/<name>; its collections are restored from it */
    char dir[4096];
    (void)snprintf(dir, sizeof dir, "%s/databases/%s", cat->root, db);
    cdb *d = NULL;
    st = sx__fs_mkdir_p(dir);
    if (st == SX_OK)
        st = cdb_open(cat, db, dir, new_id(cat), &d);
    if (st != SX_OK)
        goto out;
    st = cat_append_db(cat, d);
out:
    sx__mutex_unlock(&cat->ddl_mu);
    return st;
}

sx_status sx__cat_db_drop(sx__catalog *cat, const char *db)
{
    if (!db || !*db || strcmp(db, "default") == 0)
        return sx__err(SX_EINVAL, "can not drop default database");
    if (cat->opts.read_only)
        return sx__err(SX_EINVAL, "catalog is read-only");
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    sx_status st = SX_OK;
    cdb *d = NULL;
    for (size_t i = 1; i < cat->n_dbs; i++)
        if (strcmp(cat->dbs[i]->name, db) == 0)
            d = cat->dbs[i];
    sx__mutex_unlock(&cat->mu);
    char **en = NULL;
    size_t n_en = 0;
    if (!d) {
        st = db_not_found(db);
        goto out;
    }
    /* non-empty: engine collections count too (ones without metadata are hidden, not absent) */
    st = sx_collection_list(d->db, &en, &n_en);
    sx_strings_free(en, n_en);
    if (st != SX_OK)
        goto out;
    if (n_en > 0 || d->n_metas > 0) {
        st = sx__err(SX_EBUSY,
                     "database:%s not empty, must drop all collections before drop database", db);
        goto out;
    }
    /* Atomic on disk: the drop is the rename of DIR to .drop-DIR and the fsync of databases/;
     * once that returned, the database does not come back (open deletes .drop- directories). */
    char dbs[4096], gone[4096];
    const char *base = strrchr(d->dir, '/');
    base = base ? base + 1 : d->dir;
    (void)snprintf(dbs, sizeof dbs, "%s/databases", cat->root);
    (void)snprintf(gone, sizeof gone, "%s/.drop-%s", dbs, base);
    char *gone_copy = sx__strdup(gone);
    if (!gone_copy) {
        st = sx__err(SX_ENOMEM, "catalog");
        goto out;
    }
    sx__ignore(sx__fs_rmtree(gone));
    st = sx__fs_rename(d->dir, gone);
    bool renamed = st == SX_OK;
    if (renamed) {
        st = sx__fs_sync_dir(dbs);
        if (st != SX_OK) { /* undo; when that fails too it is dropped, with the error */
            char msg[512];
            copy_str(msg, sizeof msg, sx_errmsg());
            renamed = sx__fs_rename(gone, d->dir) != SX_OK;
            st = sx__err(st, "%s", msg);
        }
    }
    if (!renamed) {
        sx__free(gone_copy);
        goto out;
    }
    sx__mutex_lock(&cat->mu);
    for (size_t i = 1; i < cat->n_dbs; i++)
        if (cat->dbs[i] == d) {
            memmove(&cat->dbs[i], &cat->dbs[i + 1], (cat->n_dbs - i - 1) * sizeof *cat->dbs);
            cat->n_dbs--;
            break;
        }
    d->gone_dir = gone_copy;
    sx__mutex_unlock(&cat->mu);
    /* The list's reference: the sx_db is closed (and the directory deleted) now, or by the last
     * request that still borrows it (cdb_ref). */
    cdb_put(cat, d);
out:
    sx__mutex_unlock(&cat->ddl_mu);
    return st;
}

sx_status sx__cat_db_describe(sx__catalog *cat, const char *db, json_t **props, int64_t *db_id)
{
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    json_t *p = d ? json_deep_copy(d->props) : NULL;
    int64_t id = d ? d->db_id : 0;
    sx__mutex_unlock(&cat->mu);
    if (!d)
        return db_not_found(db);
    if (!p)
        return sx__err(SX_ENOMEM, "catalog");
    if (props)
        *props = p;
    else
        json_decref(p);
    if (db_id)
        *db_id = id;
    return SX_OK;
}

sx_status sx__cat_db_set_props(sx__catalog *cat, const char *db, const json_t *props)
{
    if (!json_is_object(props))
        return sx__err(SX_EINVAL, "database properties must be an object");
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    int64_t id = d ? d->db_id : 0;
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    json_t *copy = json_deep_copy(props);
    json_t *o = NULL;
    if (!d) {
        st = db_not_found(db);
        goto out;
    }
    o = copy ? json_pack("{s:I,s:s,s:O}", "id", (json_int_t)id, "name", d->name, "properties", copy)
             : NULL;
    if (!o) {
        st = sx__err(SX_ENOMEM, "catalog");
        goto out;
    }
    st = cat->opts.read_only ? sx__err(SX_EINVAL, "catalog is read-only")
                             : write_json_file(d->dir, "db.properties.json", o);
    if (st == SX_OK) {
        sx__mutex_lock(&cat->mu);
        json_decref(d->props);
        d->props = copy;
        copy = NULL;
        sx__mutex_unlock(&cat->mu);
    }
out:
    json_decref(o);
    json_decref(copy);
    sx__mutex_unlock(&cat->ddl_mu);
    return st;
}

/* ---------------------------------------------------------------- collections */

sx_status sx__cat_coll_get(
    sx__catalog *cat, const char *db, const char *name, sx_collection **h, sx__coll_meta *meta)
{
    sx__coll_meta *tmp = sx__malloc(sizeof *tmp);
    if (!tmp)
        return sx__err(SX_ENOMEM, "catalog");
    sx__mutex_lock(&cat->mu);
    cdb *d = cdb_ref(find_db(cat, db));
    const sx__coll_meta *m = d && name ? find_meta(d, name, NULL) : NULL;
    if (m)
        memcpy(tmp, m, sizeof *tmp);
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    sx_collection *c = NULL;
    if (!d)
        st = db_not_found(db);
    else if (!m)
        st = coll_not_found(db, name ? name : "");
    else if (h) {
        st = sx_collection_open(d->db, tmp->engine_name, &c);
        if (st == SX_ENOTFOUND) /* dropped meanwhile */
            st = coll_not_found(db, name);
    }
    if (st == SX_OK) {
        if (meta)
            memcpy(meta, tmp, sizeof *meta);
        if (h)
            *h = c;
    }
    cdb_put(cat, d); /* the handle keeps what it needs of the engine db (sx__db_unref) */
    sx__free(tmp);
    return st;
}

bool sx__cat_engine_name(
    sx__catalog *cat, const char *db, const char *name, char *ename, size_t cap)
{
    bool found = false;
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    const sx__coll_meta *m = d && name ? find_meta(d, name, NULL) : NULL;
    if (m) {
        copy_str(ename, cap, m->engine_name);
        found = true;
    }
    sx__mutex_unlock(&cat->mu);
    return found;
}

bool sx__cat_has_coll(sx__catalog *cat, const char *db, const char *name)
{
    bool have = false;
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    for (size_t i = 0; d && name && !have && i < d->n_metas; i++)
        have = strcmp(d->metas[i]->engine_name, name) == 0 || strcmp(d->metas[i]->name, name) == 0;
    sx__mutex_unlock(&cat->mu);
    return have;
}

/* The engine collection is created with the first vector field's metric for every vector field
 * (sx_collection_def.metric): the others that differ are set on the new, empty collection. */
static sx_status other_metrics(sx_db *db, const sx__coll_meta *meta)
{
    bool differ = false;
    for (size_t i = 1; i < meta->n_vecs; i++)
        differ |= meta->vecs[i].metric != meta->vecs[0].metric;
    if (!differ)
        return SX_OK;
    sx_collection *h = NULL;
    sx_status st = sx_collection_open(db, meta->engine_name, &h);
    for (size_t i = 1; st == SX_OK && i < meta->n_vecs; i++)
        if (meta->vecs[i].metric != meta->vecs[0].metric)
            st = sx_collection_set_metric_on(h, meta->vecs[i].field, meta->vecs[i].metric);
    if (h)
        sx_collection_release(h);
    return st;
}

sx_status sx__cat_coll_create(sx__catalog *cat, const char *db, sx__coll_meta *meta)
{
    if (!meta || !valid_name(meta->name))
        return sx__err(SX_EINVAL,
                       "collection name must match [A-Za-z_][A-Za-z0-9_]* (at most %u bytes)",
                       SX_MAX_NAME);
    size_t n_hidden = (size_t)meta->enable_dynamic + (size_t)meta->has_partitions;
    if (meta->n_fields == 0 || meta->n_fields + n_hidden > SX_MAX_FIELDS)
        return sx__err(SX_EINVAL, "a collection has 1..%zu fields", SX_MAX_FIELDS - n_hidden);
    if (cat->opts.read_only)
        return sx__err(SX_EINVAL, "catalog is read-only");
    for (size_t i = 0; i < meta->n_fields; i++) {
        sx__field_meta *f = &meta->fields[i];
        if (!f->engine_type)
            f->engine_type = engine_type_of(f->type);
        if (!f->engine_type)
            return sx__err(SX_EINVAL, "field %s: type \"%s\" is not supported", f->name, f->type);
        if (strcmp(f->type, "Array") == 0 &&
            (!f->elem_type[0] || f->max_capacity == 0 || f->max_capacity > SX__MAX_ARRAY_CAPACITY))
            return sx__err(SX_EINVAL, "field %s: an Array needs an element type and max_capacity",
                           f->name);
        if (!f->type[0])
            copy_str(f->type, sizeof f->type, type_name_of(f->engine_type));
        if (f->nullable && (f->is_primary || sx_field_is_vector(f->engine_type)))
            return sx__err(SX_EINVAL, "field %s: the %s cannot be nullable", f->name,
                           f->is_primary ? "primary key" : "vector field");
        if (strcmp(f->name, SX__META_FIELD) == 0 || strcmp(f->name, SX__PART_FIELD) == 0)
            return sx__err(SX_EINVAL, "field name %s is reserved", f->name);
    }
    if (meta->key_parts) {
        size_t n_key = 0;
        for (size_t i = 0; i < meta->n_fields; i++)
            n_key += meta->fields[i].is_partition_key &&
                     (meta->fields[i].engine_type == SX_FIELD_INT64 ||
                      meta->fields[i].engine_type == SX_FIELD_VARCHAR) &&
                     !meta->fields[i].is_primary && !meta->fields[i].nullable;
        if (n_key != 1 || meta->key_parts > SX__MAX_KEY_PARTS || !meta->has_partitions)
            return sx__err(SX_EINVAL,
                           "partition key mode needs one non-primary, non-nullable Int64 or "
                           "VarChar partition key field and 1..%u partitions",
                           SX__MAX_KEY_PARTS);
    }
    if (!vecs_layout(meta, false) || !sparse_layout(meta))
        return sx__err(SX_EINVAL, "maximum vector field's number should be limited to %u",
                       SX_MAX_VECTOR_FIELDS);
    for (size_t i = 0; i < meta->n_vecs; i++) /* a new collection has no index */
        meta->vecs[i].index_name[0] = meta->vecs[i].index_type[0] = '\0';
    for (size_t i = 0; i < meta->n_sparse; i++) { /* its functions come from the caller */
        sx__sparse_meta *s = &meta->sparse[i];
        s->index_name[0] = s->index_type[0] = s->algo[0] = '\0';
        s->drop_ratio_build = 0;
        s->bm25_k1 = 1.2f;
        s->bm25_b = 0.75f;
    }
    sx_field_def *defs = sx__calloc(SX_MAX_FIELDS, sizeof *defs);
    char **en = NULL;
    size_t n_en = 0;
    if (!defs)
        return sx__err(SX_ENOMEM, "catalog");
    sx__mutex_lock(&cat->ddl_mu);
    sx_status st = SX_OK;
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    bool exists = d && find_meta(d, meta->name, NULL);
    bool name_used = d && find_meta_engine(d, meta->name);
    sx__mutex_unlock(&cat->mu);
    if (!d) {
        st = db_not_found(db);
        goto out;
    }
    if (exists) {
        st = sx__err(SX_EEXIST, "collection %s already exists", meta->name);
        goto out;
    }
    st = sx_collection_list(d->db, &en, &n_en);
    if (st != SX_OK)
        goto out;
    if (bsearch(&(const char *){ meta->name }, en, n_en, sizeof(char *), cmp_str))
        name_used = true; /* an engine collection hidden by a name clash */
    /* With object storage the other databases keep their objects under <url>/databases/<db>/,
     * and an engine collection's objects are <url>/<engine name>/...: a default-database engine
     * collection named "databases" would list, collect and (dropped) delete every other
     * database's objects as its own. Clients keep the name; the engine gets another one. */
    if (d && strcmp(d->name, "default") == 0 && cat->opts.storage_url && *cat->opts.storage_url &&
        strcmp(meta->name, "databases") == 0)
        name_used = true;
    meta->collection_id = new_id(cat);
    meta->created_ms = now_ms();
    /* invariant 2; and a long name gets a short engine name (it names a directory and a file) */
    copy_str(meta->engine_name, sizeof meta->engine_name, meta->name);
    for (int64_t k = meta->collection_id; name_used || strlen(meta->engine_name) > DISK_NAME_MAX;
         k++) {
        (void)snprintf(meta->engine_name, sizeof meta->engine_name, "%.*s_%lld",
                       (int)(DISK_NAME_MAX - 21), meta->name, (long long)k);
        sx__mutex_lock(&cat->mu);
        name_used = find_meta_engine(d, meta->engine_name) || find_meta(d, meta->engine_name, NULL);
        sx__mutex_unlock(&cat->mu);
        if (bsearch(&(const char *){ meta->engine_name }, en, n_en, sizeof(char *), cmp_str))
            name_used = true;
    }
    for (size_t i = 0; i < meta->n_fields; i++)
        meta->fields[i].field_id = 100 + (int64_t)i;
    if (meta->n_parts == 0 || strcmp(meta->parts[0], "_default") != 0) {
        meta->n_parts = 1;
        copy_str(meta->parts[0], sizeof meta->parts[0], "_default");
    }
    if (!meta->consistency[0])
        copy_str(meta->consistency, sizeof meta->consistency, "Bounded");
    if (!meta->shards)
        meta->shards = 1;
    if (!meta->properties[0])
        copy_str(meta->properties, sizeof meta->properties, "{}");
    meta_utf8_cut(meta);

    size_t nd = 0;
    for (size_t i = 0; i < meta->n_fields; i++) {
        const sx__field_meta *f = &meta->fields[i];
        defs[nd++] =
            (sx_field_def){ f->name,       f->engine_type,
                            f->is_primary, f->auto_id,
                            f->dim,        f->engine_type == SX_FIELD_VARCHAR ? f->max_length : 0,
                            f->nullable };
    }
    if (meta->enable_dynamic)
        defs[nd++] = (sx_field_def){
            SX__META_FIELD, SX_FIELD_VARCHAR, false, false, 0, SX_MAX_VARCHAR, false
        };
    if (meta->has_partitions)
        defs[nd++] =
            (sx_field_def){ SX__PART_FIELD, SX_FIELD_VARCHAR, false, false, 0, SX_MAX_NAME, false };
    sx_collection_def def = { meta->engine_name, defs, nd,
                              meta->n_vecs ? meta->vecs[0].metric : SX_METRIC_L2 };

    st = write_meta(d, meta); /* invariant 1: metadata first */
    if (st != SX_OK) {        /* a failed fsync after the rename may leave the file: it goes too */
        char msg[512];
        copy_str(msg, sizeof msg, sx_errmsg());
        unlink_meta(d, meta->engine_name);
        st = sx__err(st, "%s", msg);
        goto out;
    }
    st = sx_collection_create(d->db, &def);
    bool created = st == SX_OK;
    if (created)
        st = other_metrics(d->db, meta);
    if (st != SX_OK) {
        char msg[512];
        copy_str(msg, sizeof msg, sx_errmsg());
        if (created) /* other_metrics failed: the new engine collection goes too */
            sx__ignore(sx_collection_drop(d->db, meta->engine_name));
        unlink_meta(d, meta->engine_name);
        st = sx__err(st, "%s", msg);
        goto out;
    }
    sx__mutex_lock(&cat->mu);
    st = cdb_add_meta(d, meta);
    sx__mutex_unlock(&cat->mu);
    if (st != SX_OK) { /* the call fails: nothing of it stays (engine first: invariant 1) */
        sx__ignore(sx_collection_drop(d->db, meta->engine_name));
        unlink_meta(d, meta->engine_name);
        st = sx__err(SX_ENOMEM, "catalog");
    }
out:
    sx__mutex_unlock(&cat->ddl_mu);
    sx_strings_free(en, n_en);
    sx__free(defs);
    return st;
}

sx_status sx__cat_coll_drop(sx__catalog *cat, const char *db, const char *name)
{
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    sx_status st = SX_OK;
    cdb *d = find_db(cat, db);
    size_t idx = 0;
    sx__coll_meta *m = d && name ? find_meta(d, name, &idx) : NULL;
    if (m && (strcmp(m->name, name) != 0 || m->n_aliases)) {
        /* as Milvus: not through an alias, and not while aliases point at it */
        st = strcmp(m->name, name) != 0
                 ? sx__err(SX_EINVAL, "cannot drop the collection via alias = %s", name)
                 : sx__err(SX_EINVAL,
                           "unable to drop the collection [%s] because it has associated "
                           "aliases [%s%s], please remove all aliases before dropping the "
                           "collection",
                           m->name, m->aliases[0], m->n_aliases > 1 ? ", ..." : "");
        sx__mutex_unlock(&cat->mu);
        goto out;
    }
    if (m) { /* out of the cache first: new lookups fail from now on */
        memmove(&d->metas[idx], &d->metas[idx + 1], (d->n_metas - idx - 1) * sizeof *d->metas);
        d->n_metas--;
    }
    sx__mutex_unlock(&cat->mu);
    if (!d) {
        st = db_not_found(db);
        goto out;
    }
    if (!m) {
        st = coll_not_found(db, name ? name : "");
        goto out;
    }
    st = sx_collection_drop(d->db, m->engine_name);
    if (st == SX_ENOTFOUND)
        st = SX_OK;
    if (st == SX_OK) {
        unlink_meta(d, m->engine_name); /* invariant 1: engine first */
        sx__free(m);
    } else {
        sx__mutex_lock(&cat->mu);
        sx_status ast = cdb_add_meta(d, m); /* put it back */
        sx__mutex_unlock(&cat->mu);
        sx__ignore(ast);
        sx__free(m);
    }
out:
    sx__mutex_unlock(&cat->ddl_mu);
    return st;
}

sx_status sx__cat_coll_update(sx__catalog *cat, const char *db, const sx__coll_meta *meta)
{
    sx__coll_meta *tmp = sx__malloc(sizeof *tmp);
    if (!tmp)
        return sx__err(SX_ENOMEM, "catalog");
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    const sx__coll_meta *m = d ? find_meta_engine(d, meta->engine_name) : NULL;
    if (m) {
        /* the schema part and the identity come from the cache: a concurrent rename keeps its
         * name, and fields cannot change */
        memcpy(tmp, meta, sizeof *tmp);
        utf8_cut(tmp->description);
        copy_str(tmp->name, sizeof tmp->name, m->name);
        tmp->collection_id = m->collection_id;
        tmp->created_ms = m->created_ms;
        for (size_t i = 0; i < SX_MAX_VECTOR_FIELDS; i++) {
            copy_str(tmp->vecs[i].field, sizeof tmp->vecs[i].field, m->vecs[i].field);
            tmp->vecs[i].metric = m->vecs[i].metric;
            tmp->vecs[i].metric_pending = m->vecs[i].metric_pending;
        }
        tmp->n_vecs = m->n_vecs;
        tmp->n_sparse = m->n_sparse;
        for (size_t i = 0; i < SX_MAX_VECTOR_FIELDS; i++)
            copy_str(tmp->sparse[i].field, sizeof tmp->sparse[i].field, m->sparse[i].field);
        tmp->n_fields = m->n_fields;
        memcpy(tmp->fields, m->fields, sizeof tmp->fields);
        tmp->enable_dynamic = m->enable_dynamic;
        tmp->has_partitions = m->has_partitions;
        tmp->key_parts = m->key_parts;
    }
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    if (!d)
        st = db_not_found(db);
    else if (!m)
        st = coll_not_found(db, meta->name);
    else if (tmp->n_parts == 0 || tmp->n_parts > SX__MAX_PARTS)
        st = sx__err(SX_EINVAL, "a collection has 1..%d partitions", SX__MAX_PARTS);
    else if (cat->opts.read_only)
        st = sx__err(SX_EINVAL, "catalog is read-only");
    else
        st = write_meta(d, tmp);
    if (st == SX_OK) {
        sx__mutex_lock(&cat->mu);
        sx__coll_meta *c = find_meta_engine(d, tmp->engine_name); /* ddl_mu: still there */
        if (c)
            memcpy(c, tmp, sizeof *c);
        sx__mutex_unlock(&cat->mu);
    }
    sx__mutex_unlock(&cat->ddl_mu);
    sx__free(tmp);
    return st;
}

/* Whether fn changed the copy. Both started as byte copies of one entry, so a byte comparison
 * finds every change; padding or bytes past a string's NUL that fn rewrote can only make it
 * report one where there is none, which costs a write of the same metadata. */
static bool meta_changed(const sx__coll_meta *tmp, const sx__coll_meta *orig)
{
    /* NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): see above */
    return memcmp(tmp, orig, sizeof *tmp) != 0;
}

sx_status sx__cat_coll_modify(sx__catalog *cat,
                              const char *db,
                              const char *name,
                              sx_status (*fn)(void *ctx, sx__coll_meta *meta),
                              void *ctx)
{
    sx__coll_meta *tmp = sx__malloc(sizeof *tmp), *orig = sx__malloc(sizeof *orig);
    if (!tmp || !orig) {
        sx__free(tmp);
        sx__free(orig);
        return sx__err(SX_ENOMEM, "catalog");
    }
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    const sx__coll_meta *m = d && name ? find_meta(d, name, NULL) : NULL;
    if (m) {
        memcpy(tmp, m, sizeof *tmp);
        memcpy(orig, m, sizeof *orig);
    }
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    if (!d)
        st = db_not_found(db);
    else if (!m)
        st = coll_not_found(db, name ? name : "");
    else if (cat->opts.read_only)
        st = sx__err(SX_EINVAL, "catalog is read-only");
    else
        st = fn(ctx, tmp);
    if (st == SX_OK) {
        /* ddl_mu keeps the cached entry as it was: identity and schema come back from orig */
        copy_str(tmp->name, sizeof tmp->name, orig->name);
        copy_str(tmp->engine_name, sizeof tmp->engine_name, orig->engine_name);
        tmp->collection_id = orig->collection_id;
        tmp->created_ms = orig->created_ms;
        tmp->n_fields = orig->n_fields;
        memcpy(tmp->fields, orig->fields, sizeof tmp->fields);
        tmp->n_vecs = orig->n_vecs;
        for (size_t i = 0; i < SX_MAX_VECTOR_FIELDS; i++)
            copy_str(tmp->vecs[i].field, sizeof tmp->vecs[i].field, orig->vecs[i].field);
        tmp->n_sparse = orig->n_sparse;
        for (size_t i = 0; i < SX_MAX_VECTOR_FIELDS; i++)
            copy_str(tmp->sparse[i].field, sizeof tmp->sparse[i].field, orig->sparse[i].field);
        tmp->enable_dynamic = orig->enable_dynamic;
        tmp->has_partitions = orig->has_partitions;
        tmp->key_parts = orig->key_parts;
        utf8_cut(tmp->description);
        if (tmp->n_parts == 0 || tmp->n_parts > SX__MAX_PARTS)
            st = sx__err(SX_EINVAL, "a collection has 1..%d partitions", SX__MAX_PARTS);
        else if (meta_changed(tmp, orig))
            st = write_meta(d, tmp);
    }
    if (st == SX_OK) {
        sx__mutex_lock(&cat->mu);
        sx__coll_meta *c = find_meta_engine(d, tmp->engine_name); /* ddl_mu: still there */
        if (c)
            memcpy(c, tmp, sizeof *c);
        sx__mutex_unlock(&cat->mu);
    }
    sx__mutex_unlock(&cat->ddl_mu);
    sx__free(tmp);
    sx__free(orig);
    return st;
}

sx_status sx__cat_coll_rename(
    sx__catalog *cat, const char *db, const char *name, const char *new_db, const char *new_name)
{
    if (!db || !*db)
        db = "default";
    if (new_db && *new_db && strcmp(new_db, db) != 0)
        return sx__err(SX_EINVAL, "renaming a collection to another database is not supported "
                                  "by Sextant yet");
    if (!valid_name(new_name))
        return sx__err(SX_EINVAL,
                       "invalid collection name \"%s\": must match "
                       "[A-Za-z_][A-Za-z0-9_]*",
                       new_name ? new_name : "");
    sx__coll_meta *tmp = sx__malloc(sizeof *tmp);
    if (!tmp)
        return sx__err(SX_ENOMEM, "catalog");
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    const sx__coll_meta *m = d && name ? find_meta(d, name, NULL) : NULL;
    bool taken = d && find_meta(d, new_name, NULL) != NULL;
    if (m)
        memcpy(tmp, m, sizeof *tmp);
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    if (!d)
        st = db_not_found(db);
    else if (!m)
        st = coll_not_found(db, name ? name : "");
    else if (strcmp(name, new_name) == 0)
        st = SX_OK;
    else if (taken)
        st = sx__err(SX_EEXIST, "duplicated new collection name %s in database %s", new_name, db);
    else {
        copy_str(tmp->name, sizeof tmp->name, new_name);
        st = write_meta(d, tmp);
        if (st != SX_OK) { /* the file may have the new name (a failed fsync after the rename) */
            char msg[512];
            copy_str(msg, sizeof msg, sx_errmsg());
            copy_str(tmp->name, sizeof tmp->name, name);
            sx__ignore(write_meta(d, tmp));
            st = sx__err(st, "%s", msg);
        }
        if (st == SX_OK) {
            sx__mutex_lock(&cat->mu);
            sx__coll_meta *c = find_meta_engine(d, tmp->engine_name);
            if (c)
                copy_str(c->name, sizeof c->name, new_name);
            sx__mutex_unlock(&cat->mu);
        }
    }
    sx__mutex_unlock(&cat->ddl_mu);
    sx__free(tmp);
    return st;
}

/* ---------------------------------------------------------------- aliases */

/* Writes m (a copy of a cached entry, changed) and puts it into the cache. Caller holds ddl_mu. */
static sx_status alias_commit(sx__catalog *cat, cdb *d, const sx__coll_meta *m)
{
    sx_status st = write_meta(d, m);
    if (st != SX_OK)
        return st;
    sx__mutex_lock(&cat->mu);
    sx__coll_meta *c = find_meta_engine(d, m->engine_name); /* ddl_mu: still there */
    if (c)
        memcpy(c, m, sizeof *c);
    sx__mutex_unlock(&cat->mu);
    return SX_OK;
}

static void alias_remove(sx__coll_meta *m, const char *alias)
{
    for (size_t a = 0; a < m->n_aliases; a++)
        if (strcmp(m->aliases[a], alias) == 0) {
            memmove(m->aliases[a], m->aliases[a + 1],
                    (m->n_aliases - a - 1) * sizeof m->aliases[0]);
            m->n_aliases--;
            return;
        }
}

/* The alias operations under ddl_mu: op 'c' create, 'd' drop, 'a' alter. */
static sx_status
alias_op(sx__catalog *cat, const char *db, int op, const char *alias, const char *coll)
{
    if (!valid_name(alias))
        return sx__err(SX_EINVAL, "invalid alias name \"%s\": must match [A-Za-z_][A-Za-z0-9_]*",
                       alias ? alias : "");
    if (cat->opts.read_only)
        return sx__err(SX_EINVAL, "catalog is read-only");
    sx__coll_meta *from = sx__malloc(sizeof *from), *to = sx__malloc(sizeof *to);
    if (!from || !to) {
        sx__free(from);
        sx__free(to);
        return sx__err(SX_ENOMEM, "catalog");
    }
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    const sx__coll_meta *holder = d ? find_meta(d, alias, NULL) : NULL; /* name or alias */
    bool is_coll_name = holder && strcmp(holder->name, alias) == 0;
    const sx__coll_meta *target = d && coll ? find_meta(d, coll, NULL) : NULL;
    bool target_is_alias = target && strcmp(target->name, coll) != 0;
    if (holder)
        memcpy(from, holder, sizeof *from);
    if (target)
        memcpy(to, target, sizeof *to);
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    if (!d) {
        st = db_not_found(db);
    } else if (is_coll_name) {
        st = sx__err(SX_EEXIST, "alias %s is the name of a collection in database %s", alias,
                     db && *db ? db : "default");
    } else if (op == 'd') {
        if (holder) {
            alias_remove(from, alias);
            st = alias_commit(cat, d, from);
        }
    } else if (!target || target_is_alias) {
        st = coll_not_found(db, coll);
    } else if (op == 'c' && holder) {
        st = sx__err(SX_EEXIST, "alias %s already exists (it names collection %s)", alias,
                     from->name);
    } else if (op == 'a' && !holder) {
        st = sx__err(SX_ENOTFOUND, "alias not found[database=%s][alias=%s]",
                     db && *db ? db : "default", alias);
    } else if (holder && strcmp(from->engine_name, to->engine_name) == 0) {
        st = SX_OK; /* alter to the collection it already names */
    } else if (to->n_aliases == SX__MAX_ALIASES) {
        st = sx__err(SX_EINVAL, "collection %s has %d aliases already, the most Sextant keeps",
                     to->name, SX__MAX_ALIASES);
    } else {
        if (holder) { /* alter: off the old collection first (a crash loses it, never doubles it) */
            alias_remove(from, alias);
            st = alias_commit(cat, d, from);
        }
        if (st == SX_OK) {
            copy_str(to->aliases[to->n_aliases++], sizeof to->aliases[0], alias);
            st = alias_commit(cat, d, to);
        }
    }
    sx__mutex_unlock(&cat->ddl_mu);
    sx__free(from);
    sx__free(to);
    return st;
}

sx_status
sx__cat_alias_create(sx__catalog *cat, const char *db, const char *alias, const char *coll)
{
    return alias_op(cat, db, 'c', alias, coll);
}

sx_status sx__cat_alias_drop(sx__catalog *cat, const char *db, const char *alias)
{
    return alias_op(cat, db, 'd', alias, NULL);
}

sx_status sx__cat_alias_alter(sx__catalog *cat, const char *db, const char *alias, const char *coll)
{
    return alias_op(cat, db, 'a', alias, coll);
}

sx_status sx__cat_alias_describe(sx__catalog *cat,
                                 const char *db,
                                 const char *alias,
                                 char coll_out[SX_MAX_NAME + 1])
{
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    const sx__coll_meta *m = d && alias ? find_meta(d, alias, NULL) : NULL;
    bool ok = m && strcmp(m->name, alias) != 0;
    if (ok)
        copy_str(coll_out, SX_MAX_NAME + 1, m->name);
    sx__mutex_unlock(&cat->mu);
    if (!d)
        return db_not_found(db);
    if (!ok)
        return sx__err(SX_ENOTFOUND, "alias not found[database=%s][alias=%s]",
                       db && *db ? db : "default", alias ? alias : "");
    return SX_OK;
}

sx_status
sx__cat_alias_list(sx__catalog *cat, const char *db, const char *coll, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    const sx__coll_meta *only = d && coll && *coll ? find_meta(d, coll, NULL) : NULL;
    size_t count = 0;
    for (size_t i = 0; d && i < d->n_metas; i++)
        if (!only || d->metas[i] == only)
            count += d->metas[i]->n_aliases;
    char **out = d ? sx__calloc(count + 1, sizeof *out) : NULL;
    sx_status st = !d                         ? SX_ENOTFOUND
                   : (coll && *coll && !only) ? SX_ENOTFOUND
                   : out                      ? SX_OK
                                              : SX_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; st == SX_OK && i < d->n_metas; i++) {
        if (only && d->metas[i] != only)
            continue;
        for (size_t a = 0; st == SX_OK && a < d->metas[i]->n_aliases; a++) {
            out[k] = sx__strdup(d->metas[i]->aliases[a]);
            st = out[k] ? SX_OK : SX_ENOMEM;
            k += out[k] != NULL;
        }
    }
    sx__mutex_unlock(&cat->mu);
    if (st != SX_OK) {
        sx_strings_free(out, k);
        if (!d)
            return db_not_found(db);
        if (st == SX_ENOTFOUND)
            return coll_not_found(db, coll);
        return sx__err(SX_ENOMEM, "catalog");
    }
    qsort(out, k, sizeof *out, cmp_str);
    *names = out;
    *n = k;
    return SX_OK;
}

sx_status sx__cat_coll_list(sx__catalog *cat, const char *db, char ***names, size_t *n)
{
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    size_t count = d ? d->n_metas : 0;
    char **out = d ? sx__calloc(count + 1, sizeof *out) : NULL;
    sx_status st = !d ? SX_ENOTFOUND : out ? SX_OK : SX_ENOMEM;
    for (size_t i = 0; st == SX_OK && i < count; i++) {
        out[i] = sx__strdup(d->metas[i]->name);
        if (!out[i])
            st = SX_ENOMEM;
    }
    sx__mutex_unlock(&cat->mu);
    if (st != SX_OK) {
        sx_strings_free(out, count);
        return st == SX_ENOTFOUND ? db_not_found(db) : sx__err(st, "catalog");
    }
    qsort(out, count, sizeof *out, cmp_str);
    *names = out;
    *n = count;
    return SX_OK;
}

sx_status sx__cat_foreach(sx__catalog *cat, sx__cat_visit_fn fn, void *ctx)
{
    typedef struct item {
        cdb *d;
        sx__coll_meta m;
    } item;

    sx__mutex_lock(&cat->mu);
    size_t count = 0;
    for (size_t i = 0; i < cat->n_dbs; i++)
        count += cat->dbs[i]->n_metas;
    item *items = sx__malloc((count + 1) * sizeof *items);
    size_t k = 0;
    for (size_t i = 0; items && i < cat->n_dbs; i++)
        for (size_t j = 0; j < cat->dbs[i]->n_metas; j++) {
            items[k].d = cdb_ref(cat->dbs[i]);
            memcpy(&items[k].m, cat->dbs[i]->metas[j], sizeof items[k].m);
            k++;
        }
    sx__mutex_unlock(&cat->mu);
    if (!items)
        return sx__err(SX_ENOMEM, "catalog");
    bool stop = false;
    for (size_t i = 0; i < k; i++) {
        sx_collection *h = NULL;
        if (!stop && sx_collection_open(items[i].d->db, items[i].m.engine_name, &h) == SX_OK) {
            stop = fn(ctx, items[i].d->name, &items[i].m, h) != 0;
            sx_collection_release(h);
        } /* else dropped meanwhile */
        cdb_put(cat, items[i].d);
    }
    sx__free(items);
    return SX_OK;
}

/* ---------------------------------------------------------------- import jobs */

/* The import jobs of a database are the engine's (sx_import_submit ... on its sx_db): these take a
 * reference on the database for the call (a drop meanwhile closes it after the put, cancelling its
 * jobs) and translate between client and engine collection names. */

static sx_status import_db(sx__catalog *cat, const char *db, cdb **out)
{
    sx__mutex_lock(&cat->mu);
    cdb *d = cdb_ref(find_db(cat, db));
    sx__mutex_unlock(&cat->mu);
    if (!d)
        return db_not_found(db);
    *out = d;
    return SX_OK;
}

/* The client name of engine collection ename (or ename itself when it has no metadata). */
static void import_client_name(sx__catalog *cat, const cdb *d, char *name, size_t cap)
{
    sx__mutex_lock(&cat->mu);
    const sx__coll_meta *m = find_meta_engine(d, name);
    if (m)
        copy_str(name, cap, m->name);
    sx__mutex_unlock(&cat->mu);
}

sx_status sx__cat_import_submit(sx__catalog *cat,
                                const char *db,
                                const char *name,
                                const sx_import_group *groups,
                                size_t n_groups,
                                const sx_import_opts *opts,
                                char job_id[SX_IMPORT_JOB_ID])
{
    cdb *d = NULL;
    sx_status st = import_db(cat, db, &d);
    if (st != SX_OK)
        return st;
    char ename[SX_MAX_NAME + 1] = "";
    sx__mutex_lock(&cat->mu);
    const sx__coll_meta *m = find_meta(d, name, NULL);
    if (m)
        copy_str(ename, sizeof ename, m->engine_name);
    sx__mutex_unlock(&cat->mu);
    if (!*ename)
        st = coll_not_found(db, name);
    else
        st = sx_import_submit(d->db, ename, groups, n_groups, opts, job_id);
    cdb_put(cat, d);
    return st;
}

sx_status
sx__cat_import_get(sx__catalog *cat, const char *db, const char *job_id, sx_import_job_info *out)
{
    cdb *d = NULL;
    sx_status st = import_db(cat, db, &d);
    if (st != SX_OK)
        return st;
    st = sx_import_job_get(d->db, job_id, out);
    if (st == SX_OK)
        import_client_name(cat, d, out->collection, sizeof out->collection);
    cdb_put(cat, d);
    return st;
}

sx_status sx__cat_import_list(
    sx__catalog *cat, const char *db, const char *name, sx_import_job_info **infos, size_t *n)
{
    cdb *d = NULL;
    sx_status st = import_db(cat, db, &d);
    if (st != SX_OK)
        return st;
    char ename[SX_MAX_NAME + 1] = "";
    if (name && *name) {
        sx__mutex_lock(&cat->mu);
        const sx__coll_meta *m = find_meta(d, name, NULL);
        copy_str(ename, sizeof ename, m ? m->engine_name : name);
        sx__mutex_unlock(&cat->mu);
    }
    st = sx_import_job_list(d->db, *ename ? ename : NULL, infos, n);
    for (size_t i = 0; st == SX_OK && i < *n; i++)
        import_client_name(cat, d, (*infos)[i].collection, sizeof(*infos)[i].collection);
    cdb_put(cat, d);
    return st;
}

/* ---------------------------------------------------------------- refresh (query nodes) */

/* A collection's index and metric state taken from metadata derived from the engine (the engine
 * is the truth for them; a writer that built an index the local metadata does not know). */
static void meta_follow_indexes(sx__coll_meta *old, const sx__coll_meta *m)
{
    for (size_t v = 0; v < old->n_vecs && v < m->n_vecs; v++) {
        if (strcmp(old->vecs[v].field, m->vecs[v].field) != 0)
            continue;
        old->vecs[v].metric = m->vecs[v].metric;
        copy_str(old->vecs[v].index_name, sizeof old->vecs[v].index_name, m->vecs[v].index_name);
        copy_str(old->vecs[v].index_type, sizeof old->vecs[v].index_type, m->vecs[v].index_type);
        if (m->vecs[v].index_name[0])
            old->vecs[v].metric_pending = false;
    }
}

sx_status
sx__cat_coll_adopt(sx__catalog *cat, const char *db, const char *ename, const char *keep_dir)
{
    if (cat->opts.read_only || !cat->opts.storage_url)
        return sx__err(SX_EINVAL, "only a writable server over a store adopts collections");
    if (!valid_name(db) || !valid_name(ename) || strlen(ename) > DISK_NAME_MAX)
        return sx__err(SX_EINVAL, "adopt: invalid database or collection name");
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    cdb *d = find_db(cat, db);
    if (d)
        d = cdb_ref(d);
    sx__mutex_unlock(&cat->mu);
    sx_status st = SX_OK;
    if (!d) {
        /* a database created before this writer joined the cluster: opening it restores its
         * committed collections (this one included) from <url>/databases/<db> */
        st = db_create_locked(cat, db);
        sx__mutex_lock(&cat->mu);
        d = st == SX_OK ? find_db(cat, db) : NULL;
        if (d)
            d = cdb_ref(d);
        sx__mutex_unlock(&cat->mu);
        if (st == SX_OK && !d)
            st = sx__err(SX_ENOTFOUND, "database %s", db);
    } else {
        st = sx_collection_reload(d->db, ename, keep_dir);
    }
    sx__coll_meta *m = st == SX_OK ? sx__malloc(sizeof *m) : NULL;
    sx__coll_meta *cur = m ? sx__malloc(sizeof *cur) : NULL;
    if (st == SX_OK && !cur)
        st = sx__err(SX_ENOMEM, "catalog: adopt %s", ename);
    if (st == SX_OK)
        st = derive_meta(d->db, ename, m);
    if (st == SX_OK) {
        int64_t id = new_id(cat); /* takes mu */
        sx__mutex_lock(&cat->mu);
        sx__coll_meta *old = find_meta_engine(d, ename);
        bool have = old != NULL;
        if (old) {
            memcpy(cur, old, sizeof *cur);
            meta_follow_indexes(cur, m);
        } else {
            memcpy(cur, m, sizeof *cur);
            cur->collection_id = id;
            cur->created_ms = now_ms();
        }
        bool clash = !have && find_meta(d, cur->name, NULL) != NULL;
        sx__mutex_unlock(&cat->mu);
        if (clash)
            st = sx__err(SX_EEXIST, "adopt: a collection named %s exists with another engine name",
                         cur->name);
        if (st == SX_OK)
            st = write_meta(d, cur);
        if (st == SX_OK) {
            sx__mutex_lock(&cat->mu);
            old = find_meta_engine(d, ename);
            if (old)
                memcpy(old, cur, sizeof *old);
            else
                st = cdb_add_meta(d, cur);
            sx__mutex_unlock(&cat->mu);
        }
    }
    sx__free(m);
    sx__free(cur);
    if (d)
        cdb_put(cat, d);
    sx__mutex_unlock(&cat->ddl_mu);
    return st;
}

sx_status sx__cat_refresh(sx__catalog *cat, size_t *changed)
{
    *changed = 0;
    sx__mutex_lock(&cat->ddl_mu);
    sx__mutex_lock(&cat->mu);
    size_t n = cat->n_dbs;
    cdb **ds = sx__calloc(n ? n : 1, sizeof *ds);
    for (size_t i = 0; ds && i < n; i++)
        ds[i] = cdb_ref(cat->dbs[i]);
    sx__mutex_unlock(&cat->mu);
    if (!ds) {
        sx__mutex_unlock(&cat->ddl_mu);
        return sx__err(SX_ENOMEM, "catalog refresh");
    }
    sx_status first = SX_OK;
    char msg[1024] = "";
    sx__coll_meta *m = sx__malloc(sizeof *m);
    for (size_t i = 0; i < n; i++) {
        cdb *d = ds[i];
        size_t ch = 0;
        sx_status st = sx_db_refresh(d->db, &ch);
        if (st != SX_OK && first == SX_OK) {
            first = st;
            (void)snprintf(msg, sizeof msg, "database %s: %s", d->name, sx_errmsg());
        }
        if (!ch || !m)
            continue;
        *changed += ch;
        char **names = NULL;
        size_t nn = 0;
        if (sx_collection_list(d->db, &names, &nn) != SX_OK)
            continue;
        /* collections new to this node: metadata derived from the engine's schema */
        for (size_t k = 0; k < nn; k++) {
            sx__mutex_lock(&cat->mu);
            bool have = find_meta_engine(d, names[k]) != NULL;
            sx__mutex_unlock(&cat->mu);
            if (derive_meta(d->db, names[k], m) != SX_OK)
                continue;
            if (have) {
                /* a collection this node has: its indexes and metrics follow the writer's (an
                 * index created or dropped there since this node first saw the collection) */
                sx__mutex_lock(&cat->mu);
                sx__coll_meta *old = find_meta_engine(d, names[k]);
                if (old)
                    meta_follow_indexes(old, m);
                sx__mutex_unlock(&cat->mu);
                continue;
            }
            m->collection_id = new_id(cat);
            m->created_ms = now_ms();
            sx__mutex_lock(&cat->mu);
            if (!find_meta(d, m->name, NULL))
                sx__ignore(cdb_add_meta(d, m));
            sx__mutex_unlock(&cat->mu);
        }
        /* collections gone from the store */
        sx__mutex_lock(&cat->mu);
        for (size_t k = 0; k < d->n_metas;) {
            bool listed = false;
            for (size_t j = 0; j < nn && !listed; j++)
                listed = strcmp(names[j], d->metas[k]->engine_name) == 0;
            if (listed) {
                k++;
                continue;
            }
            sx__free(d->metas[k]);
            memmove(&d->metas[k], &d->metas[k + 1], (d->n_metas - k - 1) * sizeof *d->metas);
            d->n_metas--;
        }
        sx__mutex_unlock(&cat->mu);
        sx_strings_free(names, nn);
    }
    sx__free(m);
    for (size_t i = 0; i < n; i++)
        cdb_put(cat, ds[i]);
    sx__free(ds);
    sx__mutex_unlock(&cat->ddl_mu);
    return first == SX_OK ? SX_OK : sx__err(first, "%s", msg);
}
