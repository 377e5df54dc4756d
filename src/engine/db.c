/*
 * db.c: the database: a directory with a LOCK file (flock: one process at a time) and
 * collections/<name>/ per collection. Collection create is atomic: the directory is prepared
 * under collections/.tmp-<name> (manifest + wal/) and renamed into place, then the parent
 * directory is fsynced. Drop renames to collections/.drop-<name> and deletes it (for names too
 * long to take a prefix, a hash replaces the name in both: stage_path). A create that fails after
 * its rename renames the directory to .drop-<name> before deleting it.
 * The db keeps every open collection in `colls` (guarded by mu) with one reference; handles add
 * their own, so a dropped collection is freed when its last handle is released.
 * Lifetime of the db itself: every collection object holds a reference on it (db->refs), so a
 * handle of a dropped collection may outlive sx_db_close (the REST server closes a dropped
 * database at once, while a request may still hold such a handle). sx_db_close releases the
 * builder thread, the collections, the cache, the store and the LOCK file; the struct, its mutex
 * and its options go with the last reference (sx__db_unref).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "platform/membudget.h"
#include "storage/manifest.h"
#include "storage/objstore.h"
#include "storage/segfile.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

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

/* A budget: the limit given, else the cgroup's limit less the headroom, else unlimited
 * (counted). $SX_CGROUP_ROOT (tests) points the probe at a fake /proc + /sys tree. The public
 * sx_memory_budget is the platform layer's sx__membudget. */
static sx_status budget_make(uint64_t want, const char *what, sx__membudget **out)
{
    char src[160] = "";
    uint64_t limit = 0;
    if (want == SX_MEMORY_UNLIMITED) {
        (void)snprintf(src, sizeof src, "unlimited (SX_MEMORY_UNLIMITED)");
    } else if (want) {
        limit = want;
        (void)snprintf(src, sizeof src, "%s", what);
    } else {
        uint64_t cg = 0;
        char cgsrc[128];
        const char *root = getenv("SX_CGROUP_ROOT");
        sx__cgroup_memory_limit(root ? root : "", &cg, cgsrc, sizeof cgsrc);
        limit = sx__mem_default_budget(cg);
        if (limit)
            (void)snprintf(src, sizeof src, "%s = %.0f MiB, less headroom", cgsrc,
                           (double)cg / 1048576.0);
        else if (cg)
            (void)snprintf(src, sizeof src, "%s = %.0f MiB: too small for a budget, unlimited",
                           cgsrc, (double)cg / 1048576.0);
        else
            (void)snprintf(src, sizeof src, "unlimited (no cgroup memory limit)");
    }
    return sx__membudget_new(limit, src, out);
}

static sx_status budget_open(sx_db *db)
{
    sx__mem_tune_malloc();
    if (db->opts.memory_budget) {
        db->budget = (sx__membudget *)db->opts.memory_budget;
        db->budget_shared = true;
        return SX_OK;
    }
    return budget_make(db->opts.memory_limit_bytes, "memory_limit_bytes", &db->budget);
}

sx_status sx_memory_budget_new(uint64_t limit_bytes, sx_memory_budget **out)
{
    sx__err_clear();
    sx__membudget *b = NULL;
    sx_status st = budget_make(limit_bytes, "memory_limit_bytes", &b);
    *out = (sx_memory_budget *)b;
    return st;
}

void sx_memory_budget_free(sx_memory_budget *b)
{
    sx__membudget_free((sx__membudget *)b);
}

void sx_memory_budget_stats(const sx_memory_budget *b, sx_memory_stats *out)
{
    sx__mem_stats((const sx__membudget *)b, out);
}

void sx_db_memory_stats(sx_db *db, sx_memory_stats *out)
{
    sx__mem_stats(db ? db->budget : NULL, out);
}

sx_status sx_db_open(const char *dir, const sx_db_options *opts, sx_db **out)
{
    sx__err_clear();
    if (!dir || !*dir || !out)
        return sx__err(SX_EINVAL, "sx_db_open: directory required");
    sx_db *db = sx__calloc(1, sizeof *db);
    if (!db)
        return sx__err(SX_ENOMEM, "open");
    atomic_init(&db->refs, 1);
    if (opts)
        db->opts = *opts;
    if (db->opts.search_threads == 0) { /* documented as all cores; query.c splits batches */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        db->opts.search_threads = cpus > 0 ? (uint32_t)cpus : 1u;
    }
    (void)sx__mutex_init(&db->mu, SX__RANK_DB, "db.mu");
    pthread_cond_init(&db->job_cv, NULL);
    pthread_cond_init(&db->rjob_cv, NULL);
    db->dir = sx__strdup(dir);
    char path[4096];
    char **names = NULL;
    size_t n = 0;
    sx_status st = db->dir ? SX_OK : sx__err(SX_ENOMEM, "open");
    /* the option strings are the caller's: keep copies (freed by sx_db_close) */
    const char **strs[3] = { &db->opts.storage_url, &db->opts.s3_endpoint, &db->opts.s3_region };
    for (size_t i = 0; i < 3; i++) {
        if (!*strs[i])
            continue;
        *strs[i] = sx__strdup(*strs[i]);
        if (!*strs[i] && st == SX_OK)
            st = sx__err(SX_ENOMEM, "open");
    }
    if (st == SX_OK)
        st = budget_open(db);
    if (st == SX_OK && !db->opts.read_only) {
        (void)snprintf(path, sizeof path, "%s/collections", dir);
        st = sx__fs_mkdir_p(path);
    }
    if (st == SX_OK && !db->opts.read_only) {
        (void)snprintf(path, sizeof path, "%s/LOCK", dir);
        st = sx__fs_lock(path, &db->lock);
    }
    if (st == SX_OK)
        st = sx__store_open(db);
    if (st == SX_OK)
        st = sx__cache_open(db);
    if (st == SX_OK && db->store) {
        /* open from the store: collections it has and this directory lacks are downloaded */
        (void)snprintf(path, sizeof path, "%s/collections", dir);
        st = sx__fs_mkdir_p(path);
        if (st == SX_OK)
            st = sx__store_restore(db);
    }
    if (st == SX_OK)
        st = sx__builder_start(db);
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/collections", dir);
        if (sx__fs_exists(path))
            st = sx__fs_list(path, &names, &n);
    }
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        char sub[4096];
        if (names[i][0] == '.') {
            if (!db->opts.read_only) {
                (void)snprintf(sub, sizeof sub, "%s/collections/%s", dir, names[i]);
                sx__ignore(sx__fs_rmtree(sub)); /* half-created or half-dropped */
            }
            continue;
        }
        sx_collection *c = NULL;
        st = sx__coll_open(db, names[i], &c);
        if (st != SX_OK)
            break;
        sx_collection **nc = sx__realloc(db->colls, (db->n_colls + 1) * sizeof *nc);
        if (!nc) {
            sx__coll_unref(c);
            st = sx__err(SX_ENOMEM, "open");
            break;
        }
        db->colls = nc;
        db->colls[db->n_colls++] = c;
    }
    sx_strings_free(names, n);
    if (st != SX_OK) {
        sx_db_close(db);
        return st;
    }
    /* indexes: load files or queue builds, after all collections are open */
    for (size_t i = 0; i < db->n_colls; i++) {
        sx_collection *c = db->colls[i];
        sx__mutex_lock(&c->flush_mu);
        for (size_t s = 0; s < c->n_segs; s++)
            if (c->segs[s]->persisted || db->opts.read_only)
                sx__seg_attach_index(c, c->segs[s]);
        sx__mutex_unlock(&c->flush_mu);
    }
    *out = db;
    return SX_OK;
}

void sx_db_close(sx_db *db)
{
    if (!db)
        return;
    sx__import_stop(db);
    sx__builder_stop(db);
    /* best effort: index files built since the last sync, or a sync that failed */
    for (size_t i = 0; db->store && !db->opts.read_only && i < db->n_colls; i++)
        if (sx__store_is_dirty(db->colls[i]))
            sx__ignore(sx__store_sync(db->colls[i]));
    for (size_t i = 0; i < db->n_colls; i++)
        sx__coll_unref(db->colls[i]);
    sx__free(db->colls);
    for (size_t i = 0; i < db->n_retired; i++)
        sx__coll_unref(db->retired[i]);
    sx__free(db->retired);
    db->retired = NULL;
    db->n_retired = 0;
    for (size_t i = 0; i < db->n_creating; i++)
        sx__free(db->creating[i]);
    sx__free(db->creating);
    db->colls = NULL;
    db->n_colls = 0;
    db->creating = NULL;
    db->n_creating = 0;
    sx__cache_close(db); /* an index still open (a leaked handle) keeps it alive */
    sx__objstore_free(db->store);
    db->store = NULL;
    (void)sx__file_close(db->lock); /* the directory is free for another process from here */
    db->lock = NULL;
    sx__db_unref(db); /* the owner's; a handle of a dropped collection may hold more */
}

void sx__db_unref(sx_db *db)
{
    if (!db || atomic_fetch_sub_explicit(&db->refs, 1, memory_order_acq_rel) != 1)
        return;
    sx__free((char *)db->opts.storage_url);
    sx__free((char *)db->opts.s3_endpoint);
    sx__free((char *)db->opts.s3_region);
    if (!db->budget_shared)
        sx__membudget_free(db->budget);
    sx__mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->job_cv);
    pthread_cond_destroy(&db->rjob_cv);
    sx__free(db->dir);
    sx__free(db);
}

/* A vector field's metric at create: the definition's when it applies to the field's type,
 * else the type's own default (L2 for the float types, HAMMING for binary), so one definition
 * can hold float and binary fields (sx_collection_set_metric_on sets each afterwards). */
static sx_metric field_metric(sx_field_type t, sx_metric m)
{
    bool bin = t == SX_FIELD_BINARY_VECTOR;
    bool bin_metric = m == SX_METRIC_HAMMING || m == SX_METRIC_JACCARD;
    if (bin == bin_metric)
        return m;
    return bin ? SX_METRIC_HAMMING : SX_METRIC_L2;
}

static sx_status validate_def(const sx_collection_def *def)
{
    if (!def || !valid_name(def->name))
        return sx__err(SX_EINVAL, "collection name must match [A-Za-z_][A-Za-z0-9_]* (max %u)",
                       SX_MAX_NAME);
    if (def->n_fields < 2 || def->n_fields > SX_MAX_FIELDS)
        return sx__err(SX_EINVAL,
                       "a collection needs a primary key and a vector field (2..%u "
                       "fields)",
                       SX_MAX_FIELDS);
    if ((unsigned)def->metric > SX_METRIC_JACCARD)
        return sx__err(SX_EINVAL, "metric must be L2, IP, COSINE, HAMMING or JACCARD");
    size_t n_pk = 0, n_vec = 0;
    for (size_t i = 0; i < def->n_fields; i++) {
        const sx_field_def *f = &def->fields[i];
        if (!valid_name(f->name))
            return sx__err(SX_EINVAL, "field %zu: name must match [A-Za-z_][A-Za-z0-9_]*", i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(def->fields[j].name, f->name) == 0)
                return sx__err(SX_EINVAL, "field \"%s\" defined twice", f->name);
        if (f->type < SX_FIELD_INT64 || f->type > SX_FIELD_BINARY_VECTOR)
            return sx__err(SX_EINVAL, "field \"%s\": unknown type", f->name);
        if (f->is_primary) {
            n_pk++;
            if (f->type != SX_FIELD_INT64 && f->type != SX_FIELD_VARCHAR)
                return sx__err(SX_EINVAL, "primary key \"%s\" must be INT64 or VARCHAR", f->name);
        }
        if (f->auto_id && (!f->is_primary || f->type != SX_FIELD_INT64))
            return sx__err(SX_EINVAL, "field \"%s\": auto_id needs an INT64 primary key", f->name);
        if (sx_field_is_vector(f->type)) {
            n_vec++;
            if (f->dim < 1 || f->dim > SX_MAX_DIM)
                return sx__err(SX_EINVAL, "field \"%s\": dim %u is out of range [1, %u]", f->name,
                               f->dim, SX_MAX_DIM);
            if (f->type == SX_FIELD_BINARY_VECTOR && f->dim % 8 != 0)
                return sx__err(SX_EINVAL,
                               "field \"%s\": the dim of a BINARY_VECTOR field (bits) must be a "
                               "multiple of 8, got %u",
                               f->name, f->dim);
        }
        if (f->type == SX_FIELD_VARCHAR && f->max_length > SX_MAX_VARCHAR)
            return sx__err(SX_EINVAL, "field \"%s\": max_length %u is over %u", f->name,
                           f->max_length, SX_MAX_VARCHAR);
        if (f->nullable && (f->is_primary || sx_field_is_vector(f->type)))
            return sx__err(SX_EINVAL, "field \"%s\": the %s cannot be nullable", f->name,
                           f->is_primary ? "primary key" : "vector field");
    }
    if (n_pk != 1)
        return sx__err(SX_EINVAL, "exactly one primary key field is required (got %zu)", n_pk);
    if (n_vec > SX_MAX_VECTOR_FIELDS) /* none is fine: sparse vectors and scalars only */
        return sx__err(SX_EINVAL, "a collection has at most %u vector fields (got %zu)",
                       SX_MAX_VECTOR_FIELDS, n_vec);
    return SX_OK;
}

static sx_collection *find_locked(sx_db *db, const char *name, size_t *pos)
{
    for (size_t i = 0; i < db->n_colls; i++) {
        if (strcmp(db->colls[i]->name, name) == 0) {
            if (pos)
                *pos = i;
            return db->colls[i];
        }
    }
    return NULL;
}

/* Under db.mu: whether `name` is being created by another call. */
static bool creating_locked(const sx_db *db, const char *name)
{
    for (size_t i = 0; i < db->n_creating; i++)
        if (strcmp(db->creating[i], name) == 0)
            return true;
    return false;
}

/* Adds name to the names being created (db.mu held): lookups miss it, creates of it fail. */
static sx_status reserve_locked(sx_db *db, const char *name)
{
    char **nr = sx__realloc(db->creating, (db->n_creating + 1) * sizeof *nr);
    char *copy = nr ? sx__strdup(name) : NULL;
    if (nr)
        db->creating = nr;
    if (!copy)
        return sx__err(SX_ENOMEM, "reserving %s", name);
    db->creating[db->n_creating++] = copy;
    return SX_OK;
}

/* Under db.mu: forgets the reservation of `name` (made by reserve_locked). */
static void unreserve_locked(sx_db *db, const char *name)
{
    for (size_t i = 0; i < db->n_creating; i++) {
        if (strcmp(db->creating[i], name) != 0)
            continue;
        sx__free(db->creating[i]);
        db->creating[i] = db->creating[--db->n_creating];
        return;
    }
}

/* <db>/collections/<prefix><name>: the staging name of a create (".tmp-") or a drop (".drop-").
 * A name may have SX_MAX_NAME (255) bytes, as many as a path component, so with the prefix a long
 * one would not fit: it is replaced by 16 hex digits of its FNV-1a hash. Open deletes every dot
 * entry, so staging names need only be distinct, not readable. */
static void stage_path(char *out, size_t cap, const sx_db *db, const char *prefix, const char *name)
{
    if (strlen(prefix) + strlen(name) <= 240) {
        (void)snprintf(out, cap, "%s/collections/%s%s", db->dir, prefix, name);
        return;
    }
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    (void)snprintf(out, cap, "%s/collections/%s%016" PRIx64, db->dir, prefix, h);
}

/* Takes collections/<name> of a create that failed out of the namespace: renamed to .drop-<name>
 * first (a rename needs no descriptor: this works at EMFILE), then deleted. What is left is a
 * dot directory, which open removes. */
static void discard_on_disk(sx_db *db, const char *name)
{
    char fin[4096], gone[4096], parent[4096];
    (void)snprintf(fin, sizeof fin, "%s/collections/%s", db->dir, name);
    stage_path(gone, sizeof gone, db, ".drop-", name);
    (void)snprintf(parent, sizeof parent, "%s/collections", db->dir);
    sx__ignore(sx__fs_rmtree(gone));
    if (sx__fs_rename(fin, gone) == SX_OK) {
        sx__ignore(sx__fs_sync_dir(parent));
        sx__ignore(sx__fs_rmtree(gone));
    } else {
        sx__ignore(sx__fs_rmtree(fin));
    }
}

/* Prepares collections/.tmp-<name> (manifest + wal/), renames it into place and fsyncs the
 * parent: the collection exists on disk exactly when the rename is durable. No lock held. */
static sx_status create_on_disk(sx_db *db, const sx_collection_def *def)
{
    char tmp[4096], fin[4096], path[4096];
    stage_path(tmp, sizeof tmp, db, ".tmp-", def->name);
    (void)snprintf(fin, sizeof fin, "%s/collections/%s", db->dir, def->name);
    sx__ignore(sx__fs_rmtree(tmp));
    sx_status st = sx__fs_mkdir_p(tmp);
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/wal", tmp);
        st = sx__fs_mkdir(path);
    }
    if (st == SX_OK) {
        sx__manifest m;
        memset(&m, 0, sizeof m);
        m.generation = 1;
        m.name = (char *)def->name;
        m.n_fields = def->n_fields;
        for (size_t i = 0; i < def->n_fields; i++)
            if (sx_field_is_vector(def->fields[i].type))
                m.vec[m.n_vec++].metric = field_metric(def->fields[i].type, def->metric);
        m.fields = sx__calloc(def->n_fields, sizeof(sx_field_def));
        if (!m.fields) {
            st = sx__err(SX_ENOMEM, "create");
        } else {
            memcpy(m.fields, def->fields, def->n_fields * sizeof(sx_field_def));
            for (size_t i = 0; i < def->n_fields; i++)
                if (m.fields[i].type == SX_FIELD_VARCHAR && m.fields[i].max_length == 0)
                    m.fields[i].max_length = SX_MAX_VARCHAR;
            m.next_auto_id = 1;
            m.next_seg_id = 1;
            (void)snprintf(path, sizeof path, "%s/MANIFEST", tmp);
            st = sx__manifest_write(path, &m);
            sx__free(m.fields);
        }
    }
    if (st == SX_OK)
        st = sx__fs_rename(tmp, fin);
    if (st != SX_OK) {
        sx__ignore(sx__fs_rmtree(tmp));
        return st;
    }
    (void)snprintf(path, sizeof path, "%s/collections", db->dir);
    st = sx__fs_sync_dir(path);
    if (st != SX_OK) { /* the call fails: the renamed directory must not stay */
        char msg[512];
        (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        discard_on_disk(db, def->name);
        st = sx__err(st, "%s", msg);
    }
    return st;
}

/* Creation reserves the name under db.mu (a concurrent create of the same name gets SX_EEXIST),
 * then does its I/O (directories, manifest, fsyncs, opening the collection) with no lock held,
 * and publishes the open collection under db.mu. Until then lookups do not see it. */
sx_status sx_collection_create(sx_db *db, const sx_collection_def *def)
{
    sx__err_clear();
    sx_status st = validate_def(def);
    if (st != SX_OK)
        return st;
    if (db->opts.read_only)
        return sx__err(SX_EINVAL, "database is open read-only");
    sx__mutex_lock(&db->mu);
    if (find_locked(db, def->name, NULL) || creating_locked(db, def->name)) {
        sx__mutex_unlock(&db->mu);
        return sx__err(SX_EEXIST, "collection %s already exists", def->name);
    }
    st = reserve_locked(db, def->name);
    sx__mutex_unlock(&db->mu);
    if (st != SX_OK)
        return st;

    st = create_on_disk(db, def);
    sx_collection *c = NULL;
    bool on_disk = st == SX_OK;
    if (st == SX_OK)
        st = sx__coll_open(db, def->name, &c);
    sx__mutex_lock(&db->mu);
    unreserve_locked(db, def->name);
    if (st == SX_OK) {
        sx_collection **nc = sx__realloc(db->colls, (db->n_colls + 1) * sizeof *nc);
        if (!nc) {
            st = sx__err(SX_ENOMEM, "create");
        } else {
            db->colls = nc;
            db->colls[db->n_colls++] = c;
            atomic_fetch_add(&c->refs, 1); /* ours, for the store sync below */
        }
    }
    sx__mutex_unlock(&db->mu);
    if (st != SX_OK) {
        /* created on disk but not opened or not published: the call failed, so the directory
         * goes too (it would otherwise reappear at the next open) */
        sx__coll_unref(c);
        if (on_disk)
            discard_on_disk(db, def->name);
        return st;
    }
    /* best effort: the empty collection appears in the store (a flush retries) */
    if (sx__store_sync(c) != SX_OK)
        sx__store_mark_dirty(c);
    sx__err_clear();
    sx__coll_unref(c);
    return SX_OK;
}

sx_status sx_collection_drop(sx_db *db, const char *name)
{
    sx__err_clear();
    if (db->opts.read_only)
        return sx__err(SX_EINVAL, "database is open read-only");
    if (db->store && name) {
        /* the store manifest goes first: if that fails nothing is dropped, and a collection
         * dropped here never comes back from the store at the next open */
        sx__mutex_lock(&db->mu);
        sx_collection *sc = find_locked(db, name, NULL);
        if (sc)
            atomic_fetch_add(&sc->refs, 1);
        sx__mutex_unlock(&db->mu);
        if (sc) {
            sx_status dst = sx__store_drop_begin(sc);
            sx__coll_unref(sc);
            if (dst != SX_OK)
                return dst;
        }
    }
    sx__mutex_lock(&db->mu);
    size_t pos = 0;
    sx_collection *c = name ? find_locked(db, name, &pos) : NULL;
    if (!c) {
        sx__mutex_unlock(&db->mu);
        return sx__err(SX_ENOTFOUND, "collection %s not found", name ? name : "(null)");
    }
    db->colls[pos] = db->colls[--db->n_colls];
    sx__mutex_unlock(&db->mu);
    atomic_store(&c->dropped, true);
    sx__build_cancel_coll(db, c);
    sx__mutex_lock(&c->flush_mu);
    sx__mutex_lock(&c->write_mu);
    atomic_store(&c->dropped, true);
    sx__mutex_unlock(&c->write_mu);
    char gone[4096], parent[4096];
    stage_path(gone, sizeof gone, db, ".drop-", name);
    (void)snprintf(parent, sizeof parent, "%s/collections", db->dir);
    sx__ignore(sx__fs_rmtree(gone));
    sx_status st = sx__fs_rename(c->dir, gone);
    if (st == SX_OK)
        st = sx__fs_sync_dir(parent);
    if (st == SX_OK)
        sx__ignore(sx__fs_rmtree(gone));
    sx__mutex_unlock(&c->flush_mu);
    sx__coll_unref(c);
    sx__store_drop_finish(db, name);
    return st;
}

/* Reload (cluster adoption): the name is reserved like a create's (lookups miss it meanwhile,
 * a create of it gets SX_EEXIST), the open copy is retired as a drop retires it but without
 * touching the store, its directory is moved to keep_dir, and the store's current manifest is
 * restored and opened as at sx_db_open. No db lock is held across I/O. */
sx_status sx_collection_reload(sx_db *db, const char *name, const char *keep_dir)
{
    sx__err_clear();
    if (!db || !name || !valid_name(name))
        return sx__err(SX_EINVAL, "sx_collection_reload: a database and a valid name");
    if (db->opts.read_only || !db->store)
        return sx__err(SX_EINVAL,
                       "sx_collection_reload: only a writable database with a store (%s)", name);
    sx__mutex_lock(&db->mu);
    if (creating_locked(db, name)) {
        sx__mutex_unlock(&db->mu);
        return sx__err(SX_EBUSY, "collection %s is being created or reloaded", name);
    }
    sx_status rs = reserve_locked(db, name);
    if (rs != SX_OK) {
        sx__mutex_unlock(&db->mu);
        return rs;
    }
    size_t pos = 0;
    sx_collection *old = find_locked(db, name, &pos);
    if (old)
        db->colls[pos] = db->colls[--db->n_colls];
    sx__mutex_unlock(&db->mu);

    char dir[4096], parent[4096];
    (void)snprintf(dir, sizeof dir, "%s/collections/%s", db->dir, name);
    (void)snprintf(parent, sizeof parent, "%s/collections", db->dir);
    sx_status st = SX_OK;
    if (old) {
        atomic_store(&old->dropped, true);
        sx__build_cancel_coll(db, old);
        sx__mutex_lock(&old->flush_mu);
        sx__mutex_lock(&old->write_mu);
        atomic_store(&old->dropped, true);
        sx__mutex_unlock(&old->write_mu);
    }
    if (sx__fs_exists(dir)) {
        if (keep_dir) {
            char kparent[4096];
            (void)snprintf(kparent, sizeof kparent, "%s", keep_dir);
            char *sl = strrchr(kparent, '/');
            if (sl && sl != kparent) {
                *sl = '\0';
                st = sx__fs_mkdir_p(kparent);
            }
            if (st == SX_OK)
                st = sx__fs_rename(dir, keep_dir);
        } else {
            char gone[4096];
            stage_path(gone, sizeof gone, db, ".drop-", name);
            sx__ignore(sx__fs_rmtree(gone));
            st = sx__fs_rename(dir, gone);
            if (st == SX_OK)
                sx__ignore(sx__fs_rmtree(gone));
        }
        if (st == SX_OK)
            st = sx__fs_sync_dir(parent);
    }
    if (old) {
        sx__mutex_unlock(&old->flush_mu);
        sx__coll_unref(old);
    }
    if (st == SX_OK)
        st = sx__store_restore_one(db, name);
    if (st == SX_OK && !sx__fs_exists(dir))
        st = sx__err(SX_ENOTFOUND, "collection %s: the store has no current manifest", name);
    sx_collection *c = NULL;
    if (st == SX_OK)
        st = sx__coll_open(db, name, &c);
    if (st == SX_OK) {
        sx__mutex_lock(&c->flush_mu);
        for (size_t s = 0; s < c->n_segs; s++)
            if (c->segs[s]->persisted)
                sx__seg_attach_index(c, c->segs[s]);
        sx__mutex_unlock(&c->flush_mu);
    }
    sx__mutex_lock(&db->mu);
    unreserve_locked(db, name);
    if (st == SX_OK) {
        sx_collection **nc = sx__realloc(db->colls, (db->n_colls + 1) * sizeof *nc);
        if (!nc) {
            st = sx__err(SX_ENOMEM, "reload");
        } else {
            db->colls = nc;
            db->colls[db->n_colls++] = c;
            c = NULL;
        }
    }
    sx__mutex_unlock(&db->mu);
    if (c)
        sx__coll_unref(c);
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

sx_status sx_collection_list(sx_db *db, char ***names, size_t *n)
{
    sx__mutex_lock(&db->mu);
    char **out = sx__calloc(db->n_colls + 1, sizeof(char *));
    sx_status st = out ? SX_OK : sx__err(SX_ENOMEM, "list");
    for (size_t i = 0; st == SX_OK && i < db->n_colls; i++) {
        out[i] = sx__strdup(db->colls[i]->name);
        if (!out[i])
            st = sx__err(SX_ENOMEM, "list");
    }
    size_t count = db->n_colls;
    sx__mutex_unlock(&db->mu);
    if (st != SX_OK) {
        sx_strings_free(out, count);
        return st;
    }
    qsort(out, count, sizeof(char *), cmp_str);
    *names = out;
    *n = count;
    return SX_OK;
}

sx_status sx_collection_open(sx_db *db, const char *name, sx_collection **out)
{
    sx__err_clear();
    sx__mutex_lock(&db->mu);
    sx_collection *c = name ? find_locked(db, name, NULL) : NULL;
    if (c)
        atomic_fetch_add(&c->refs, 1);
    sx__mutex_unlock(&db->mu);
    if (!c)
        return sx__err(SX_ENOTFOUND, "collection %s not found", name ? name : "(null)");
    *out = c;
    return SX_OK;
}

void sx_collection_release(sx_collection *c)
{
    sx__coll_unref(c);
}

sx_status sx_collection_describe(sx_collection *c, sx_collection_info *out)
{
    memset(out, 0, sizeof *out);
    (void)snprintf(out->name, sizeof out->name, "%s", c->name);
    sx__rwlock_rdlock(&c->seg_lock);
    out->metric = c->n_vf ? c->vfs[0].metric : SX_METRIC_L2;
    sx__rwlock_unlock(&c->seg_lock);
    out->n_fields = c->n_fields;
    memcpy(out->fields, c->fields, c->n_fields * sizeof(sx_field_def));
    sx__view v;
    sx_status st = sx__view_get(c, &v);
    if (st != SX_OK)
        return st;
    for (size_t i = 0; i < v.n; i++) {
        out->n_rows += v.rows[i] - sx__bits_count(v.segs[i]->deleted, v.rows[i]);
        out->memory_bytes += sx__seg_memory(c, v.segs[i]);
        for (size_t f = 0; f < c->n_vf; f++)
            if (v.idx[i][f])
                out->memory_bytes += v.idx[i][f]->ops->memory_bytes(v.idx[i][f]->idx);
    }
    out->n_segments = (uint32_t)(v.n - 1);
    out->growing_rows = v.rows[v.n - 1];
    sx__view_release(&v);
    sx__mutex_lock(&c->write_mu);
    out->wal_bytes = sx__wal_bytes(c->wal);
    out->memory_bytes += sx__pk_memory(c);
    sx__mutex_unlock(&c->write_mu);
    return SX_OK;
}

/* Files of segment id among the directory's sorted names (seg-<id>.<...>; a "<name>.remote" stub
 * is listed as <name>, remote, with the size the stub records). */
static void
segment_files(sx_collection *c, char **names, size_t n_names, uint64_t id, sx_segment_desc *d)
{
    char pre[48];
    int pl = snprintf(pre, sizeof pre, "seg-%020" PRIu64 ".", id);
    for (size_t i = 0; i < n_names && d->n_files < SX_SEGMENT_MAX_FILES; i++) {
        const char *nm = names[i];
        size_t nl = strlen(nm);
        if (strncmp(nm, pre, (size_t)pl) != 0 || nl >= sizeof d->files[0].name + 7)
            continue;
        if (nl > 4 && strcmp(nm + nl - 4, ".tmp") == 0)
            continue; /* a write in progress */
        sx_segment_file *f = &d->files[d->n_files];
        memset(f, 0, sizeof *f);
        char path[4096];
        bool stub = nl > 7 && strcmp(nm + nl - 7, ".remote") == 0;
        if (stub) {
            if ((size_t)snprintf(f->name, sizeof f->name, "%.*s", (int)(nl - 7), nm) >=
                sizeof f->name)
                continue;
            (void)snprintf(path, sizeof path, "%s/%s", c->dir, f->name);
            char key[1024];
            uint32_t crc = 0;
            if (sx__stub_read(path, key, sizeof key, &f->bytes, &crc) != SX_OK) {
                sx__err_clear();
                continue;
            }
            f->remote = true;
            f->in_store = true;
        } else {
            if ((size_t)snprintf(f->name, sizeof f->name, "%s", nm) >= sizeof f->name)
                continue;
            (void)snprintf(path, sizeof path, "%s/%s", c->dir, nm);
            struct stat sb;
            if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
                continue; /* removed since the listing (compaction) */
            f->bytes = (uint64_t)sb.st_size;
            f->in_store = sx__store_holds(c, f->name, f->bytes);
        }
        d->n_files++;
    }
}

sx_status sx_collection_segments(sx_collection *c, sx_segment_desc **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sx__err_clear();
    char **names = NULL;
    size_t n_names = 0;
    sx_status st = sx__fs_list(c->dir, &names, &n_names);
    if (st != SX_OK)
        return st;
    sx__view v;
    st = sx__view_get(c, &v);
    if (st != SX_OK) {
        sx_strings_free(names, n_names);
        return st;
    }
    sx_segment_desc *d = sx__calloc(v.n, sizeof *d);
    if (!d) {
        sx__view_release(&v);
        sx_strings_free(names, n_names);
        return sx__err(SX_ENOMEM, "segments of %s", c->name);
    }
    bool has_index[SX_MAX_VECTOR_FIELDS] = { false };
    sx__rwlock_rdlock(&c->seg_lock);
    for (size_t f = 0; f < c->n_vf; f++)
        has_index[f] = c->vfs[f].iops != NULL;
    sx__rwlock_unlock(&c->seg_lock);
    sx__mutex_lock(&c->write_mu);
    for (size_t i = 0; i < v.n; i++)
        d[i].persisted = v.segs[i]->persisted;
    sx__mutex_unlock(&c->write_mu);
    for (size_t i = 0; i < v.n; i++) {
        const sx__segment *s = v.segs[i];
        d[i].id = s->id;
        d[i].sealed = i + 1 < v.n; /* the view's last segment is the growing one */
        d[i].rows = v.rows[i];
        d[i].deleted_rows = sx__bits_count(s->deleted, v.rows[i]);
        for (size_t f = 0; f < c->n_vf; f++) {
            const sx__idxref *r = v.idx[i][f];
            if (r) {
                d[i].index_state[f] = SX_SEGIDX_BUILT;
                d[i].index_memory_bytes += r->ops->memory_bytes(r->idx);
            } else {
                d[i].index_state[f] =
                    d[i].sealed && has_index[f] ? SX_SEGIDX_PENDING : SX_SEGIDX_NONE;
            }
        }
        if (d[i].sealed)
            segment_files(c, names, n_names, s->id, &d[i]);
    }
    *n = v.n;
    *out = d;
    sx__view_release(&v);
    sx_strings_free(names, n_names);
    return SX_OK;
}

void sx_segments_free(sx_segment_desc *segs)
{
    sx__free(segs);
}

sx_status sx_flush(sx_collection *c)
{
    sx__err_clear();
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_INSERT); /* the I/O profile: ingest */
    sx_status st = sx__coll_flush(c, false);
    sx_io_phase_set(prev);
    return st;
}

bool sx_collection_unsynced(sx_collection *c)
{
    if (!c || c->db->opts.read_only || atomic_load(&c->dropped))
        return false;
    sx__mutex_lock(&c->flush_mu);
    sx__mutex_lock(&c->write_mu);
    bool u = sx__wal_last_lsn(c->wal) > c->checkpoint_lsn;
    sx__rwlock_rdlock(&c->seg_lock);
    for (size_t i = 0; !u && i < c->n_segs; i++)
        u = !c->segs[i]->persisted ||
            atomic_load(&c->segs[i]->n_deleted) != c->segs[i]->persisted_deleted;
    sx__rwlock_unlock(&c->seg_lock);
    sx__mutex_unlock(&c->write_mu);
    sx__mutex_unlock(&c->flush_mu);
    return u || (c->cs && sx__store_is_dirty(c));
}

/* ---------------------------------------------------------------- check */

/* The open collections, each with a reference held (sx__coll_unref each, sx__free the array).
 * db.mu is held only for the copy, so callers can do long work on them. */
static sx_status snapshot_colls(sx_db *db, sx_collection ***out, size_t *n)
{
    sx__mutex_lock(&db->mu);
    sx_collection **cs = sx__calloc(db->n_colls + 1, sizeof *cs);
    size_t k = 0;
    for (size_t i = 0; cs && i < db->n_colls; i++) {
        cs[k] = db->colls[i];
        atomic_fetch_add(&cs[k]->refs, 1);
        k++;
    }
    sx__mutex_unlock(&db->mu);
    if (!cs)
        return sx__err(SX_ENOMEM, "out of memory listing collections");
    *out = cs;
    *n = k;
    return SX_OK;
}

/* Checks every collection open at the call, one at a time, without db.mu: the checksum run is
 * long I/O, and each collection's check takes its flush_mu (ranked above db.mu). A collection
 * dropped meanwhile is skipped (its files are gone; there is nothing left to check). */
sx_status sx_db_check(sx_db *db)
{
    sx__err_clear();
    sx_collection **cs = NULL;
    size_t n = 0;
    sx_status st = snapshot_colls(db, &cs, &n);
    for (size_t i = 0; st == SX_OK && i < n; i++)
        st = sx__coll_check(cs[i]);
    for (size_t i = 0; i < n; i++)
        sx__coll_unref(cs[i]);
    sx__free(cs);
    return st;
}

/* ---------------------------------------------------------------- refresh (read-only) */

/* Frees the retired versions no handle uses any more (db->mu held); true when none of `name`
 * is left. */
static bool reap_retired_locked(sx_db *db, const char *name)
{
    bool left = false;
    for (size_t i = 0; i < db->n_retired;) {
        sx_collection *r = db->retired[i];
        if (atomic_load(&r->refs) == 1) {
            db->retired[i] = db->retired[--db->n_retired];
            sx__coll_unref(r);
            continue;
        }
        left = left || (name && strcmp(r->name, name) == 0);
        i++;
    }
    return !left;
}

static sx_status refresh_one(sx_db *db, const char *name, bool *changed)
{
    *changed = false;
    sx_status st = sx__store_refresh_files(db, name, changed);
    if (st != SX_OK || !*changed)
        return st;
    sx_collection *c = NULL;
    st = sx__coll_open(db, name, &c);
    if (st != SX_OK)
        return st;
    sx__mutex_lock(&c->flush_mu);
    for (size_t s = 0; s < c->n_segs; s++)
        sx__seg_attach_index(c, c->segs[s]);
    sx__mutex_unlock(&c->flush_mu);
    sx__mutex_lock(&db->mu);
    size_t pos = 0;
    sx_collection *old = find_locked(db, name, &pos);
    if (old) {
        sx_collection **r = sx__realloc(db->retired, (db->n_retired + 1) * sizeof *r);
        if (!r) {
            sx__mutex_unlock(&db->mu);
            sx__coll_unref(c);
            return sx__err(SX_ENOMEM, "refresh");
        }
        db->retired = r;
        db->retired[db->n_retired++] = old; /* the db's reference moves with it */
        db->colls[pos] = c;
    } else {
        sx_collection **nc = sx__realloc(db->colls, (db->n_colls + 1) * sizeof *nc);
        if (!nc) {
            sx__mutex_unlock(&db->mu);
            sx__coll_unref(c);
            return sx__err(SX_ENOMEM, "refresh");
        }
        db->colls = nc;
        db->colls[db->n_colls++] = c;
    }
    sx__mutex_unlock(&db->mu);
    return SX_OK;
}

sx_status sx_db_refresh(sx_db *db, size_t *changed)
{
    sx__err_clear();
    if (changed)
        *changed = 0;
    if (!db || !db->store || !db->opts.read_only)
        return sx__err(SX_EINVAL, "sx_db_refresh: only a read-only database with a store");
    char **names = NULL;
    size_t n = 0;
    sx_status st = sx__store_names(db, &names, &n);
    if (st != SX_OK)
        return st;
    sx_status first = SX_OK;
    char msg[1024] = "";
    for (size_t i = 0; i < n; i++) {
        bool ch = false;
        sx_status one = refresh_one(db, names[i], &ch);
        if (one == SX_ENOTFOUND) {
            /* the store has no current manifest for it: dropped; retire the local version */
            sx__mutex_lock(&db->mu);
            size_t pos = 0;
            sx_collection *old = find_locked(db, names[i], &pos);
            if (old) {
                sx_collection **r = sx__realloc(db->retired, (db->n_retired + 1) * sizeof *r);
                if (r) {
                    db->retired = r;
                    db->retired[db->n_retired++] = old;
                    db->colls[pos] = db->colls[--db->n_colls];
                    ch = true;
                }
            }
            sx__mutex_unlock(&db->mu);
            one = SX_OK;
        }
        if (one != SX_OK && first == SX_OK) {
            first = one;
            (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        }
        if (ch && changed)
            (*changed)++;
    }
    /* collections gone from the store's listing altogether */
    sx__mutex_lock(&db->mu);
    for (size_t i = 0; i < db->n_colls;) {
        bool listed = false;
        for (size_t k = 0; k < n && !listed; k++)
            listed = strcmp(names[k], db->colls[i]->name) == 0;
        sx_collection **r =
            listed ? NULL : sx__realloc(db->retired, (db->n_retired + 1) * sizeof *r);
        if (!r) {
            i++;
            continue;
        }
        db->retired = r;
        db->retired[db->n_retired++] = db->colls[i];
        db->colls[i] = db->colls[--db->n_colls];
        if (changed)
            (*changed)++;
    }
    /* older versions nobody uses: freed; then their files the current version does not name */
    for (size_t i = 0; i < db->n_colls; i++)
        if (reap_retired_locked(db, db->colls[i]->name))
            sx__store_gc_local(db, db->colls[i]->name);
    (void)reap_retired_locked(db, NULL);
    /* directories of collections gone from the store, once no version of them is open */
    char **dirs = NULL;
    size_t nd = 0;
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/collections", db->dir);
    if (sx__fs_list(path, &dirs, &nd) == SX_OK) {
        for (size_t i = 0; i < nd; i++) {
            bool used = dirs[i][0] == '.';
            for (size_t k = 0; k < db->n_colls && !used; k++)
                used = strcmp(db->colls[k]->name, dirs[i]) == 0;
            for (size_t k = 0; k < db->n_retired && !used; k++)
                used = strcmp(db->retired[k]->name, dirs[i]) == 0;
            if (!used) {
                (void)snprintf(path, sizeof path, "%s/collections/%s", db->dir, dirs[i]);
                sx__ignore(sx__fs_rmtree(path));
            }
        }
        sx_strings_free(dirs, nd);
    }
    sx__mutex_unlock(&db->mu);
    sx_strings_free(names, n);
    return first == SX_OK ? SX_OK : sx__err(first, "%s", msg);
}
