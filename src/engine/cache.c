/*
 * cache.c: the local cache of store-backed files (sx_db_options.cache_limit_bytes; design in
 * docs/internals/STORAGE.md, "Cache").
 *
 * Two mechanisms share the limit's name but not its bytes:
 *   1. the block cache (storage/blockcache.h), in memory, limit = cache_limit_bytes: DISKANN files
 *      of collections opened from the store are not downloaded; their header and slots are read
 *      with ranged GETs through it (sx__store_load_files);
 *   2. local copies, on disk: after every successful sync, index files (.idx) that the committed
 *      store manifest names are removed locally, least recently used first, while the
 *      collection's store-backed local bytes exceed cache_limit_bytes (store.c, trim_local); they
 *      come back on demand (sx__store_fetch) when the index is loaded again.
 *
 * Remote stubs. A file that lives only in the store is represented locally by <name>.remote:
 *     "SXRMT001" | u64 size | u32 crc32c of the object (0 = not recorded) | str key (u32 len +
 *     bytes, relative to <collection>/) | u32 crc32c of everything before
 * written atomically (sx__fs_write_atomic). The sync (store.c, local_objects) names the stub's
 * object in the store manifest without uploading anything; a real file of the same name wins
 * over its stub (a rebuild wrote it), and the stub is then removed. Stubs go with their files:
 * <prefix>.diskann.remote by the DISKANN remove_files (it removes <prefix>.diskann.*), and
 * seg-<id>.idx.remote wherever seg-<id>.idx is removed (sx__store_forget_local).
 *
 * Threads: the block cache is thread-safe; stubs and fetches run on the thread that opens or
 * syncs the collection. Counters are relaxed atomics in sx_db.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "index/diskann/diskann.h"
#include "storage/blockcache.h"
#include "storage/objstore.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"

#define STUB_MAGIC "SXRMT001"
#define STUB_MAX   4096u
#define CRC_CHUNK  (1u << 20)

/* ---------------------------------------------------------------- stubs */

sx_status sx__stub_write(const char *file_path, const char *key, uint64_t size, uint32_t crc)
{
    char path[4096];
    (void)snprintf(path, sizeof path, "%s.remote", file_path);
    sx__wbuf w;
    sx__wbuf_init(&w);
    sx__wbuf_put(&w, STUB_MAGIC, 8);
    sx__wbuf_u64(&w, size);
    sx__wbuf_u32(&w, crc);
    sx__wbuf_str(&w, key);
    if (sx__wbuf_ok(&w))
        sx__wbuf_u32(&w, sx__crc32c(0, w.data, w.len));
    sx_status st = sx__wbuf_ok(&w) ? sx__fs_write_atomic(path, w.data, w.len)
                                   : sx__err(SX_ENOMEM, "remote stub %s", path);
    sx__wbuf_fini(&w);
    return st;
}

sx_status
sx__stub_read(const char *file_path, char *key, size_t keycap, uint64_t *size, uint32_t *crc)
{
    char path[4096];
    (void)snprintf(path, sizeof path, "%s.remote", file_path);
    if (!sx__fs_exists(path))
        return SX_ENOTFOUND;
    void *data = NULL;
    size_t len = 0;
    sx_status st = sx__fs_read_all(path, STUB_MAX, &data, &len);
    if (st != SX_OK)
        return st;
    const uint8_t *p = data;
    st = SX_ECORRUPT;
    if (len >= 8 + 8 + 4 + 4 + 4 && memcmp(p, STUB_MAGIC, 8) == 0 &&
        sx__crc32c(0, p, len - 4) == sx__le32(p + len - 4)) {
        sx__rbuf r;
        sx__rbuf_init(&r, p + 8, len - 12);
        *size = sx__rbuf_u64(&r);
        *crc = sx__rbuf_u32(&r);
        bool oom = false;
        char *k = sx__rbuf_str(&r, 1024, &oom);
        if (k && sx__rbuf_ok(&r) && sx__rbuf_left(&r) == 0 && strlen(k) < keycap && *k &&
            !strchr(k, '/') && !strstr(k, "..")) {
            (void)snprintf(key, keycap, "%s", k);
            st = SX_OK;
        } else if (oom) {
            st = SX_ENOMEM;
        }
        sx__free(k);
    }
    sx__free(data);
    if (st == SX_ECORRUPT)
        return sx__err(SX_ECORRUPT, "%s: not a valid remote stub", path);
    if (st == SX_ENOMEM)
        return sx__err(SX_ENOMEM, "%s", path);
    return st;
}

void sx__store_forget_local(const sx_collection *c, uint64_t seg_id, size_t v)
{
    char path[4096];
    sx__coll_path(c, path, sizeof path, sx__idx_ext(v, true), seg_id);
    sx__ignore(sx__fs_unlink(path));
}

/* ---------------------------------------------------------------- life cycle */

sx_status sx__cache_open(sx_db *db)
{
    if (!db->store || db->opts.cache_limit_bytes == 0)
        return SX_OK;
    sx_status st = sx__blockcache_new(db->store, db->opts.cache_limit_bytes, 0, &db->bcache);
    if (st == SX_OK)
        sx__blockcache_set_budget(db->bcache, db->budget);
    return st;
}

void sx__cache_close(sx_db *db)
{
    /* a leaked index handle may keep the cache alive past the budget: detach it first */
    if (db->bcache)
        sx__blockcache_set_budget(db->bcache, NULL);
    sx__blockcache_release(db->bcache);
    db->bcache = NULL;
}

/* ---------------------------------------------------------------- on-demand fetch */

static sx_status crc_of(const char *path, uint64_t *size, uint32_t *crc)
{
    sx__file *f = NULL;
    void *buf = sx__malloc(CRC_CHUNK);
    sx_status st = buf ? sx__file_open(path, SX__F_READ, &f) : sx__err(SX_ENOMEM, "crc");
    uint64_t off = 0;
    uint32_t cr = 0;
    while (st == SX_OK) {
        size_t got = 0;
        st = sx__file_pread(f, buf, CRC_CHUNK, off, &got);
        if (st != SX_OK || got == 0)
            break;
        cr = sx__crc32c(cr, buf, got);
        off += got;
    }
    sx__ignore(sx__file_close(f));
    sx__free(buf);
    *size = off;
    *crc = cr;
    return st;
}

sx_status sx__store_fetch(sx_collection *c, const char *name)
{
    sx_db *db = c->db;
    char path[4096], key[1100], rel[1024];
    (void)snprintf(path, sizeof path, "%s/%s", c->dir, name);
    if (sx__fs_exists(path))
        return SX_OK;
    uint64_t size = 0;
    uint32_t crc = 0;
    sx_status st = sx__stub_read(path, rel, sizeof rel, &size, &crc);
    if (st != SX_OK)
        return st;
    if (!db->store)
        return sx__err(SX_ENOTFOUND, "%s is in the object store and no store is configured", path);
    (void)snprintf(key, sizeof key, "%s/%s", c->name, rel);
    st = sx__objstore_get_file(db->store, key, path);
    if (st == SX_OK) {
        uint64_t got = 0;
        uint32_t gcrc = 0;
        st = crc_of(path, &got, &gcrc);
        if (st == SX_OK && (got != size || (crc && gcrc != crc))) {
            sx__ignore(sx__fs_unlink(path));
            st = sx__err(SX_ECORRUPT, "%s: size or CRC differs from the store manifest", key);
        }
    }
    if (st != SX_OK)
        return st;
    atomic_fetch_add_explicit(&db->local_fetches, 1, memory_order_relaxed);
    char stub[4200];
    (void)snprintf(stub, sizeof stub, "%s.remote", path);
    sx__ignore(sx__fs_unlink(stub));
    return SX_OK;
}

/* ---------------------------------------------------------------- DISKANN through the cache */

static sx_status rd_read(void *ctx, uint64_t off, size_t len, void *buf)
{
    return sx__blockcache_read(ctx, off, len, buf);
}

static void rd_invalidate(void *ctx, uint64_t off, size_t len)
{
    sx__blockcache_invalidate(ctx, off, len);
}

static void rd_close(void *ctx)
{
    sx__blockcache_close(ctx);
}

sx_status sx__store_load_files(sx_collection *c,
                               size_t v,
                               const sx__index_ops *ops,
                               void *payload,
                               size_t len,
                               const char *prefix,
                               const float *vecs,
                               size_t n,
                               sx__index **out)
{
    sx__rwlock_rdlock(&c->seg_lock);
    const uint32_t dim = c->vfs[v].dim;
    const sx_metric metric = c->vfs[v].metric;
    sx__rwlock_unlock(&c->seg_lock);
    if (ops != &sx__diskann_index_ops) {
        sx_status st = ops->load_files(payload, len, prefix, vecs, n, dim, metric, out);
        sx__free(payload);
        return st;
    }
    (void)vecs; /* DISKANN reads its vectors from its own file */
    char file[4096], rel[1024], key[1100], name[1400];
    (void)snprintf(file, sizeof file, "%s%s", prefix, SX__DISKANN_EXT);
    uint64_t size = 0;
    uint32_t crc = 0;
    sx_status st = SX_ENOTFOUND;
    if (!sx__fs_exists(file))
        st = sx__stub_read(file, rel, sizeof rel, &size, &crc);
    if (st == SX_ENOTFOUND) /* a local file (or neither: load_files reports it) */
        return sx__diskann_load_files_owned(payload, len, prefix, n, dim, metric, out);
    if (st != SX_OK) {
        sx__free(payload);
        return st;
    }
    sx_db *db = c->db;
    if (!db->bcache) {
        /* no limit (any more): download it whole and use it as a local file */
        const char *slash = strrchr(file, '/');
        st = sx__store_fetch(c, slash ? slash + 1 : file);
        if (st != SX_OK) {
            sx__free(payload);
            return st;
        }
        return sx__diskann_load_files_owned(payload, len, prefix, n, dim, metric, out);
    }
    (void)snprintf(key, sizeof key, "%s/%s", c->name, rel);
    sx__bc_object *ob = NULL;
    st = sx__blockcache_open(db->bcache, key, size, &ob);
    if (st != SX_OK) {
        sx__free(payload);
        return st;
    }
    (void)snprintf(name, sizeof name, "%s/%s", db->store->url, key);
    sx__diskann_reader rd = { .ctx = ob,
                              .read = rd_read,
                              .invalidate = rd_invalidate,
                              .close = rd_close,
                              .size = size,
                              .name = name };
    st = sx__diskann_load_reader_owned(payload, len, &rd, n, dim, metric, out);
    if (st != SX_OK)
        sx__blockcache_close(ob);
    return st;
}

/* ---------------------------------------------------------------- statistics */

uint64_t sx_db_remote_builds(sx_db *db)
{
    return db ? atomic_load_explicit(&db->remote_builds, memory_order_relaxed) : 0;
}

void sx_db_cache_stats(sx_db *db, sx_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!db)
        return;
    out->limit_bytes = db->opts.cache_limit_bytes;
    out->local_evictions = atomic_load_explicit(&db->local_evictions, memory_order_relaxed);
    out->local_evicted_bytes = atomic_load_explicit(&db->local_evicted_bytes, memory_order_relaxed);
    out->local_fetches = atomic_load_explicit(&db->local_fetches, memory_order_relaxed);
    if (!db->bcache)
        return;
    sx__blockcache_stats s;
    sx__blockcache_stats_get(db->bcache, &s);
    out->block_bytes = s.block_bytes;
    out->hits = s.hits;
    out->misses = s.misses;
    out->waits = s.waits;
    out->evictions = s.evictions;
    out->fetches = s.fetches;
    out->fetch_errors = s.fetch_errors;
    out->bytes_fetched = s.bytes_fetched;
    out->resident_bytes = s.resident_bytes;
}
