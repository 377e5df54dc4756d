/*
 * store.c: a collection's files in an object store (sx_db_options.storage_url;
 * docs/internals/STORAGE.md has the whole design).
 *
 * What goes where. The WAL stays local (fsynced: low-latency acknowledgement). Sealed segment
 * files, delete files and index files go to the store, then the collection's store manifest:
 *
 *   <root>/<collection>/seg-<id>.sxs                 segment file (immutable: ids never reused)
 *   <root>/<collection>/seg-<id>.del.<gen>           delete file (immutable: generations grow)
 *   <root>/<collection>/seg-<id>.<ext>.<crc8>        index files (seg-<id>.idx, seg-<id>.diskann):
 *                                                    rewritten in place locally by a rebuild, so
 *                                                    the object key carries the file's CRC-32C
 *   <root>/<collection>/MANIFEST                     store manifest, written last (format below)
 *
 * Store manifest (little-endian): "SXSTM001" | u32 version=1 | u64 generation (the local
 * manifest's) | u32 len + the local MANIFEST file's bytes | u32 n | n x (str local_name,
 * str key (relative to <collection>/), u64 size, u32 crc32c (index files; 0 = not recorded),
 * u8 kind (0 segment, 1 delete file, 2 index file)) | u32 crc32c(everything before).
 *
 * Sync (sx__store_sync_locked, caller holds flush_mu, so no manifest is written meanwhile):
 *   1. first time: list <collection>/ and read the store manifest; an object is "trusted"
 *      (known stored, not re-uploaded) only if that manifest names it with the listed size:
 *      objects it does not name may be leftovers of a failed sync from another history;
 *   2. read the local MANIFEST; every file it names that is not trusted is uploaded (put_file);
 *   3. put <collection>/MANIFEST (skipped when byte-identical to the last one put);
 *   4. delete every object of the collection the new store manifest does not name (GC).
 * Invariants: (1) the store manifest never names an object that is not durably stored (uploads
 * complete before step 3; GC runs only after it; an object named by the previous store manifest
 * is deleted only after a newer manifest that does not name it is stored); (2) the local state
 * is never changed by a sync: a failed sync leaves the local MANIFEST and WAL, which hold every
 * acknowledged row, and the next sync uploads whatever is missing; (3) a key names one content
 * forever within one history (segment ids and delete generations are never reused once named by
 * a committed manifest; index keys carry their CRC).
 *
 * Open from the store (sx__store_restore): for each <name>/MANIFEST in the store whose collection
 * is missing locally: download every object it names into collections/.tmp-<name>/ (index objects
 * are optional: a missing or mismatching one only means a rebuild), write the embedded MANIFEST
 * last, rename the directory into place, fsync the parent. Then the normal open runs.
 *
 * Fenced stores (sx_db_options.store_fence, cluster mode; docs/internals/CLUSTER.md): uploads go
 * under <collection>/<prefix> (the writer's epoch, "e<R>/"), content a manifest already named
 * keeps its key, and step 3 becomes: put <collection>/<prefix>MANIFEST.<gen>.<n> (a new object),
 * then fence->commit makes it current (a refused commit leaves everything as it was; GC runs
 * only after a commit and never collects the current manifest). Opens and first syncs read the
 * fence's pointer instead of <collection>/MANIFEST. Writes ask fence->may_ack before and after
 * their WAL sync (ingest.c).
 *
 * Refresh (sx_db_refresh, read-only databases: query nodes): sx__store_refresh_files brings
 * collections/<name> to the current manifest in place (files whose key the previous one named,
 * recorded in STORE-MANIFEST / STORE-MANIFEST.key, are kept; MANIFEST written last) and db.c
 * swaps a new collection object in; sx__store_gc_local removes segment files the current manifest
 * does not name once no older version is open.
 *
 * Threads and locks. Syncs run on the flushing thread (sx_flush, sx_compact, metric change: the
 * error is returned; a seal triggered by an insert: best effort, the insert succeeds, the failure
 * is recorded and retried at the next sync) and on the index builder and its remote-build slots
 * (after an index file is written or received, and a slot's sx__store_segment_key when the
 * segment it hands out is not uploaded yet; they only try-lock flush_mu, since an index drop
 * holding flush_mu waits for them).
 * store_mu (order: flush_mu -> store_mu) guards the struct below and is held by the builder
 * around writing an index file, so a sync never CRCs a half-replaced index file.
 * Rejected: syncing in a separate uploader thread (the issue wants flush to return only once the
 * objects are stored, and a thread adds a second writer of the store manifest); listing the store
 * at every sync (one LIST per collection at first sync, then the in-memory set is exact because
 * this process is the only writer of its prefix).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "storage/manifest.h"
#include "storage/objstore.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"

#define STM_MAGIC            "SXSTM001"
#define STM_MAX              (256u << 20)
#define KIND_SEG             0
#define KIND_DEL             1
#define KIND_IDX             2
#define CRC_CHUNK            (1u << 20)
#define SX__DISKANN_FILE_EXT ".diskann" /* index/diskann/diskann.h SX__DISKANN_EXT */

typedef struct robj {
    char *key; /* relative to <collection>/ */
    uint64_t size;
    bool trusted;
} robj;

typedef struct crcent {
    char *name;
    uint64_t size;
    uint32_t crc;
} crcent;

typedef struct useent {
    char *name;
    uint64_t use; /* value of the collection's use clock at the last use */
} useent;

struct sx__cstore {
    /* guarded by the collection's store_mu */
    bool loaded;
    robj *objs;
    size_t n_objs, cap_objs;
    uint8_t *last; /* the last store manifest put */
    size_t last_len;
    crcent *crcs;
    size_t n_crcs;
    bool dropping;
    bool dirty; /* a background sync could not run or failed */
    char last_error[256];
    useent *uses; /* last use of local copies (trim_local evicts the least recent first) */
    size_t n_uses;
    uint64_t clock;
    /* fenced stores (sx_store_fence): the current manifest's key relative to <collection>/
     * (never collected), and the sequence of this process's manifest objects */
    char *cur_mkey;
    uint64_t mseq;
};

typedef struct stm_ent {
    char *name;
    char *key;
    uint64_t size;
    uint32_t crc;
    uint8_t kind;
    bool remote; /* not encoded: the local file is a stub (<name>.remote, cache.c) */
} stm_ent;

typedef struct stm {
    uint64_t generation;
    uint8_t *manifest; /* owned */
    size_t manifest_len;
    stm_ent *ents;
    size_t n;
} stm;

static void stm_fini(stm *m)
{
    for (size_t i = 0; i < m->n; i++) {
        sx__free(m->ents[i].name);
        sx__free(m->ents[i].key);
    }
    sx__free(m->ents);
    sx__free(m->manifest);
    memset(m, 0, sizeof *m);
}

static void stm_encode(const stm *m, sx__wbuf *w)
{
    sx__wbuf_put(w, STM_MAGIC, 8);
    sx__wbuf_u32(w, 1);
    sx__wbuf_u64(w, m->generation);
    sx__wbuf_u32(w, (uint32_t)m->manifest_len);
    sx__wbuf_put(w, m->manifest, m->manifest_len);
    sx__wbuf_u32(w, (uint32_t)m->n);
    for (size_t i = 0; i < m->n; i++) {
        sx__wbuf_str(w, m->ents[i].name);
        sx__wbuf_str(w, m->ents[i].key);
        sx__wbuf_u64(w, m->ents[i].size);
        sx__wbuf_u32(w, m->ents[i].crc);
        sx__wbuf_u8(w, m->ents[i].kind);
    }
    if (sx__wbuf_ok(w))
        sx__wbuf_u32(w, sx__crc32c(0, w->data, w->len));
}

/* A name safe as a local file name and key part: no '/', no "..", not empty. */
static bool safe_name(const char *s)
{
    return s && *s && !strchr(s, '/') && !strstr(s, "..") && strncmp(s, "seg-", 4) == 0;
}

/* An object key relative to <collection>/: a safe name, or one directory of [A-Za-z0-9_-] (a
 * fenced writer's epoch, "e123") and a safe name. */
static bool safe_key(const char *s)
{
    const char *sl = s ? strchr(s, '/') : NULL;
    if (!sl)
        return safe_name(s);
    if (sl == s)
        return false;
    for (const char *p = s; p < sl; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return false;
    return safe_name(sl + 1);
}

static sx_status stm_decode(const void *data, size_t len, const char *what, stm *m)
{
    memset(m, 0, sizeof *m);
    if (len < 8 + 4 + 4 || memcmp(data, STM_MAGIC, 8) != 0)
        return sx__err(SX_ECORRUPT, "%s: not a store manifest", what);
    const uint8_t *p = data;
    if (sx__crc32c(0, p, len - 4) != sx__le32(p + len - 4))
        return sx__err(SX_ECORRUPT, "%s: store manifest checksum mismatch", what);
    sx__rbuf r;
    sx__rbuf_init(&r, p + 8, len - 12);
    if (sx__rbuf_u32(&r) != 1)
        return sx__err(SX_ECORRUPT, "%s: unknown store manifest version", what);
    m->generation = sx__rbuf_u64(&r);
    uint32_t ml = sx__rbuf_u32(&r);
    const void *mb = sx__rbuf_bytes(&r, ml);
    uint32_t n = sx__rbuf_u32(&r);
    if (!sx__rbuf_ok(&r) || !mb || n > (1u << 24) || (size_t)n * 21 > sx__rbuf_left(&r))
        return sx__err(SX_ECORRUPT, "%s: store manifest is truncated", what);
    m->manifest = sx__malloc(ml + 1);
    m->ents = sx__calloc((size_t)n + 1, sizeof *m->ents);
    if (!m->manifest || !m->ents) {
        stm_fini(m);
        return sx__err(SX_ENOMEM, "store manifest");
    }
    memcpy(m->manifest, mb, ml);
    m->manifest_len = ml;
    for (uint32_t i = 0; i < n; i++) {
        bool oom = false;
        stm_ent *e = &m->ents[i];
        e->name = sx__rbuf_str(&r, 1024, &oom);
        e->key = e->name ? sx__rbuf_str(&r, 1024, &oom) : NULL;
        e->size = sx__rbuf_u64(&r);
        e->crc = sx__rbuf_u32(&r);
        e->kind = sx__rbuf_u8(&r);
        m->n = i + 1;
        if (oom) {
            stm_fini(m);
            return sx__err(SX_ENOMEM, "store manifest");
        }
        if (!sx__rbuf_ok(&r) || !e->name || !e->key || !safe_name(e->name) || !safe_key(e->key) ||
            e->kind > KIND_IDX) {
            stm_fini(m);
            return sx__err(SX_ECORRUPT, "%s: store manifest entry %u is invalid", what, i);
        }
    }
    if (sx__rbuf_left(&r) != 0) {
        stm_fini(m);
        return sx__err(SX_ECORRUPT, "%s: trailing bytes in the store manifest", what);
    }
    return SX_OK;
}

/* ---------------------------------------------------------------- helpers */

static sx_status file_size(const char *path, uint64_t *out)
{
    sx__file *f = NULL;
    sx_status st = sx__file_open(path, SX__F_READ, &f);
    if (st == SX_OK)
        st = sx__file_size(f, out);
    sx__ignore(sx__file_close(f));
    return st;
}

static sx_status file_crc(const char *path, uint64_t *size, uint32_t *crc)
{
    sx__file *f = NULL;
    void *buf = sx__malloc(CRC_CHUNK);
    sx_status st = buf ? sx__file_open(path, SX__F_READ, &f) : sx__err(SX_ENOMEM, "crc");
    uint64_t off = 0;
    uint32_t c = 0;
    while (st == SX_OK) {
        size_t got = 0;
        st = sx__file_pread(f, buf, CRC_CHUNK, off, &got);
        if (st != SX_OK || got == 0)
            break;
        c = sx__crc32c(c, buf, got);
        off += got;
    }
    sx__ignore(sx__file_close(f));
    sx__free(buf);
    if (st == SX_OK) {
        *size = off;
        *crc = c;
    }
    return st;
}

/* Copies the current thread's error message (sx__err overwrites the buffer it would read). */
static void save_msg(char *buf, size_t n)
{
    (void)snprintf(buf, n, "%s", sx_errmsg());
}

static robj *find_obj(struct sx__cstore *cs, const char *key)
{
    for (size_t i = 0; i < cs->n_objs; i++)
        if (strcmp(cs->objs[i].key, key) == 0)
            return &cs->objs[i];
    return NULL;
}

/* A key without its epoch directory ("e12/seg-1.sxs" -> "seg-1.sxs"): the name the key has
 * without a fence. */
static const char *key_base(const char *key)
{
    const char *sl = strrchr(key, '/');
    return sl ? sl + 1 : key;
}

/* The trusted object holding the content an unfenced key names (any epoch). */
static robj *find_base(struct sx__cstore *cs, const char *base, uint64_t size)
{
    for (size_t i = 0; i < cs->n_objs; i++)
        if (cs->objs[i].trusted && cs->objs[i].size == size &&
            strcmp(key_base(cs->objs[i].key), base) == 0)
            return &cs->objs[i];
    return NULL;
}

static const sx_store_fence *fence_of(const sx_db *db)
{
    return db->opts.store_fence;
}

/* The key of the collection's current store manifest (from the store root): <name>/MANIFEST, or
 * the fence's pointer. SX_ENOTFOUND: the fence knows none. */
static sx_status current_mkey(const sx_db *db, const char *name, char *buf, size_t cap)
{
    const sx_store_fence *f = fence_of(db);
    if (!f) {
        (void)snprintf(buf, cap, "%s/MANIFEST", name);
        return SX_OK;
    }
    buf[0] = '\0';
    sx_status st = f->current(f->ctx, db->opts.storage_url, name, buf, cap);
    if (st == SX_OK && strncmp(buf, name, strlen(name)) != 0)
        return sx__err(SX_ECORRUPT, "the fence's manifest key '%s' is not under %s/", buf, name);
    return st;
}

sx_status sx__store_may_ack(sx_collection *c, bool after_write)
{
    const sx_store_fence *f = fence_of(c->db);
    if (!f || !f->may_ack)
        return SX_OK;
    sx_status st = f->may_ack(f->ctx, c->db->opts.storage_url, c->name);
    if (st == SX_OK)
        return SX_OK;
    char msg[512];
    save_msg(msg, sizeof msg);
    if (after_write)
        return sx__err(SX_EFENCED,
                       "collection %s: the write is in this writer's WAL but it may not "
                       "acknowledge it (outcome unknown): %s",
                       c->name, *msg ? msg : sx_status_str(st));
    return sx__err(SX_EFENCED, "collection %s: write refused: %s", c->name,
                   *msg ? msg : sx_status_str(st));
}

/* The store manifest just made current (its bytes are w's: taken, w left empty). */
static void keep_last(struct sx__cstore *cs, sx__wbuf *w)
{
    sx__free(cs->last);
    cs->last = w->data;
    cs->last_len = w->len;
    w->data = NULL;
    w->len = w->cap = 0;
}

/* A manifest put or commit failed: which one is current is unknown, so it is put again next time.
 * Returns the error for the caller (message names the store and the key). */
static sx_status
manifest_failed(struct sx__cstore *cs, sx__objstore *o, const char *key, sx_status st)
{
    char msg[512];
    save_msg(msg, sizeof msg);
    sx__free(cs->last);
    cs->last = NULL;
    cs->last_len = 0;
    return sx__err(st == SX_ENOMEM ? SX_ENOMEM : SX_EREMOTE,
                   "object store %s: writing %s failed: %s; the store keeps the previous "
                   "manifest, the data is safe locally and the next flush retries",
                   o->url, key, msg);
}

static sx_status add_obj(struct sx__cstore *cs, const char *key, uint64_t size, bool trusted)
{
    robj *o = find_obj(cs, key);
    if (o) {
        o->size = size;
        o->trusted = trusted;
        return SX_OK;
    }
    if (cs->n_objs == cs->cap_objs) {
        size_t cap = cs->cap_objs ? cs->cap_objs * 2 : 32;
        robj *v = sx__realloc(cs->objs, cap * sizeof *v);
        if (!v)
            return sx__err(SX_ENOMEM, "store sync");
        cs->objs = v;
        cs->cap_objs = cap;
    }
    char *k = sx__strdup(key);
    if (!k)
        return sx__err(SX_ENOMEM, "store sync");
    cs->objs[cs->n_objs].key = k;
    cs->objs[cs->n_objs].size = size;
    cs->objs[cs->n_objs].trusted = trusted;
    cs->n_objs++;
    return SX_OK;
}

static void remove_obj(struct sx__cstore *cs, size_t i)
{
    sx__free(cs->objs[i].key);
    cs->objs[i] = cs->objs[--cs->n_objs];
}

static void clear_objs(struct sx__cstore *cs)
{
    for (size_t i = 0; i < cs->n_objs; i++)
        sx__free(cs->objs[i].key);
    cs->n_objs = 0;
    sx__free(cs->cur_mkey);
    cs->cur_mkey = NULL;
    cs->loaded = false;
    sx__free(cs->last);
    cs->last = NULL;
    cs->last_len = 0;
}

/* CRC of a local index file, cached by name and size (the builder invalidates a segment's
 * entries when it rewrites its files). */
static sx_status
cached_crc(struct sx__cstore *cs, const char *dir, const char *name, uint64_t *size, uint32_t *crc)
{
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    uint64_t sz = 0;
    sx_status st = file_size(path, &sz);
    if (st != SX_OK)
        return st;
    for (size_t i = 0; i < cs->n_crcs; i++) {
        if (strcmp(cs->crcs[i].name, name) == 0 && cs->crcs[i].size == sz) {
            *size = sz;
            *crc = cs->crcs[i].crc;
            return SX_OK;
        }
    }
    st = file_crc(path, size, crc);
    if (st != SX_OK)
        return st;
    crcent *v = sx__realloc(cs->crcs, (cs->n_crcs + 1) * sizeof *v);
    char *nm = sx__strdup(name);
    if (!v || !nm) {
        if (v)
            cs->crcs = v;
        sx__free(nm);
        return SX_OK; /* not cached: recomputed next time */
    }
    cs->crcs = v;
    cs->crcs[cs->n_crcs].name = nm;
    cs->crcs[cs->n_crcs].size = *size;
    cs->crcs[cs->n_crcs].crc = *crc;
    cs->n_crcs++;
    return SX_OK;
}

static void forget_crcs(struct sx__cstore *cs, uint64_t seg_id)
{
    char pre[64];
    (void)snprintf(pre, sizeof pre, "seg-%020" PRIu64 ".", seg_id);
    for (size_t i = 0; i < cs->n_crcs;) {
        if (seg_id == UINT64_MAX || strncmp(cs->crcs[i].name, pre, strlen(pre)) == 0) {
            sx__free(cs->crcs[i].name);
            cs->crcs[i] = cs->crcs[--cs->n_crcs];
        } else {
            i++;
        }
    }
}

/* ---------------------------------------------------------------- life cycle */

sx_status sx__store_open(sx_db *db)
{
    if (!db->opts.storage_url || !*db->opts.storage_url)
        return db->opts.store_fence
                   ? sx__err(SX_EINVAL, "a store fence (cluster mode) needs a storage_url")
                   : SX_OK;
    sx__objstore_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.s3_endpoint = db->opts.s3_endpoint;
    cfg.s3_region = db->opts.s3_region;
    return sx__objstore_open(db->opts.storage_url, &cfg, &db->store);
}

sx_status sx__store_coll_init(sx_collection *c)
{
    if (!c->db->store)
        return SX_OK;
    c->cs = sx__calloc(1, sizeof *c->cs);
    return c->cs ? SX_OK : sx__err(SX_ENOMEM, "open collection");
}

void sx__store_coll_fini(sx_collection *c)
{
    struct sx__cstore *cs = c->cs;
    if (!cs)
        return;
    clear_objs(cs);
    sx__free(cs->objs);
    forget_crcs(cs, UINT64_MAX);
    sx__free(cs->crcs);
    for (size_t i = 0; i < cs->n_uses; i++)
        sx__free(cs->uses[i].name);
    sx__free(cs->uses);
    sx__free(cs);
    c->cs = NULL;
}

/* ---------------------------------------------------------------- sync */

/* Step 1: the objects stored under <name>/ and which of them the store manifest vouches for. */
static sx_status load_remote(sx_collection *c)
{
    struct sx__cstore *cs = c->cs;
    sx__objstore *o = c->db->store;
    char pre[512];
    (void)snprintf(pre, sizeof pre, "%s/", c->name);
    char **keys = NULL;
    uint64_t *sizes = NULL;
    size_t n = 0;
    sx_status st = sx__objstore_list(o, pre, &keys, &sizes, &n);
    if (st != SX_OK)
        return st;
    void *data = NULL;
    size_t len = 0;
    stm m;
    memset(&m, 0, sizeof m);
    char mkey[600];
    bool have_m = false;
    if (fence_of(c->db)) {
        st = current_mkey(c->db, c->name, mkey, sizeof mkey);
        have_m = st == SX_OK;
        if (st == SX_ENOTFOUND)
            st = SX_OK;
        if (have_m && strncmp(mkey, pre, strlen(pre)) == 0) {
            cs->cur_mkey = sx__strdup(mkey + strlen(pre));
            if (!cs->cur_mkey)
                st = sx__err(SX_ENOMEM, "store sync");
        }
    } else {
        (void)snprintf(mkey, sizeof mkey, "%sMANIFEST", pre);
        for (size_t i = 0; i < n; i++)
            have_m = have_m || strcmp(keys[i], mkey) == 0;
    }
    if (have_m && st == SX_OK) {
        st = sx__objstore_get(o, mkey, &data, &len);
        if (st == SX_OK && stm_decode(data, len, mkey, &m) != SX_OK) {
            memset(&m, 0, sizeof m); /* unreadable: trust nothing, the next put replaces it */
            st = SX_OK;
        } else if (st == SX_ENOTFOUND) {
            st = SX_OK;
        }
    }
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        const char *rel = keys[i] + strlen(pre);
        if (!*rel || (!fence_of(c->db) && strcmp(rel, "MANIFEST") == 0))
            continue; /* fenced: manifests are objects (the current one is never collected) */
        bool trusted = false;
        for (size_t j = 0; j < m.n; j++)
            if (strcmp(m.ents[j].key, rel) == 0 && m.ents[j].size == sizes[i])
                trusted = true;
        st = add_obj(cs, rel, sizes[i], trusted);
    }
    if (st == SX_OK && have_m && data) {
        cs->last = data; /* byte-identical manifests are not put again */
        cs->last_len = len;
        data = NULL;
    }
    if (st == SX_OK)
        cs->loaded = true;
    sx__free(data);
    stm_fini(&m);
    sx_strings_free(keys, n);
    sx__free(sizes);
    return st;
}

static sx_status ent_add(stm *m,
                         size_t *cap,
                         const char *name,
                         const char *key,
                         uint64_t size,
                         uint32_t crc,
                         uint8_t kind)
{
    if (m->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        stm_ent *v = sx__realloc(m->ents, nc * sizeof *v);
        if (!v)
            return sx__err(SX_ENOMEM, "store sync");
        m->ents = v;
        *cap = nc;
    }
    stm_ent *e = &m->ents[m->n];
    e->name = sx__strdup(name);
    e->key = sx__strdup(key);
    e->size = size;
    e->crc = crc;
    e->kind = kind;
    e->remote = false;
    m->n++;
    return e->name && e->key ? SX_OK : sx__err(SX_ENOMEM, "store sync");
}

/* Step 2's list: the files the local manifest names (and the index files of its segments). */
static sx_status local_objects(sx_collection *c, stm *out)
{
    struct sx__cstore *cs = c->cs;
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/MANIFEST", c->dir);
    void *mbytes = NULL;
    size_t mlen = 0;
    sx_status st = sx__fs_read_all(path, STM_MAX, &mbytes, &mlen);
    if (st != SX_OK)
        return st;
    sx__manifest man;
    memset(&man, 0, sizeof man);
    st = sx__manifest_read(path, &man);
    if (st != SX_OK) {
        sx__free(mbytes);
        return st;
    }
    out->generation = man.generation;
    out->manifest = mbytes;
    out->manifest_len = mlen;
    size_t cap = 0;
    char **names = NULL;
    size_t n_names = 0;
    bool any_index = false;
    for (size_t v = 0; v < man.n_vec; v++)
        any_index = any_index || man.vec[v].index_type;
    if (any_index)
        st = sx__fs_list(c->dir, &names, &n_names);
    for (size_t i = 0; st == SX_OK && i < man.n_segs; i++) {
        uint64_t id = man.segs[i].id, sz = 0;
        char name[128];
        (void)snprintf(name, sizeof name, "seg-%020" PRIu64 ".sxs", id);
        (void)snprintf(path, sizeof path, "%s/%s", c->dir, name);
        st = file_size(path, &sz);
        if (st == SX_OK)
            st = ent_add(out, &cap, name, name, sz, 0, KIND_SEG);
        if (st == SX_OK && man.segs[i].del_gen) {
            (void)snprintf(name, sizeof name, "seg-%020" PRIu64 ".del.%" PRIu64, id,
                           man.segs[i].del_gen);
            (void)snprintf(path, sizeof path, "%s/%s", c->dir, name);
            st = file_size(path, &sz);
            if (st == SX_OK)
                st = ent_add(out, &cap, name, name, sz, 0, KIND_DEL);
        }
        char pre[64];
        (void)snprintf(pre, sizeof pre, "seg-%020" PRIu64 ".", id);
        for (size_t k = 0; st == SX_OK && k < n_names; k++) {
            const char *nm = names[k];
            if (strncmp(nm, pre, strlen(pre)) != 0)
                continue;
            const char *ext = nm + strlen(pre);
            if (strcmp(ext, "sxs") == 0 || strncmp(ext, "del.", 4) == 0 || strstr(ext, ".tmp") ||
                strstr(ext, "tmp"))
                continue;
            size_t nl = strlen(nm);
            if (nl > 7 && strcmp(nm + nl - 7, ".remote") == 0) {
                /* a file kept only in the store (cache.c): named, never uploaded; a real file
                 * of the same name (a rebuild wrote it) wins and the stub goes */
                char real[256], rel[1024];
                (void)snprintf(real, sizeof real, "%.*s", (int)(nl - 7), nm);
                (void)snprintf(path, sizeof path, "%s/%s", c->dir, real);
                if (sx__fs_exists(path)) {
                    (void)snprintf(path, sizeof path, "%s/%s", c->dir, nm);
                    sx__ignore(sx__fs_unlink(path));
                    continue;
                }
                uint32_t crc = 0;
                sx_status sst = sx__stub_read(path, rel, sizeof rel, &sz, &crc);
                if (sst == SX_ENOTFOUND)
                    continue; /* removed meanwhile */
                st = sst;
                if (st == SX_OK)
                    st = ent_add(out, &cap, real, rel, sz, crc, KIND_IDX);
                if (st == SX_OK)
                    out->ents[out->n - 1].remote = true;
                continue;
            }
            uint32_t crc = 0;
            sx_status cst = cached_crc(cs, c->dir, nm, &sz, &crc);
            if (cst == SX_ENOTFOUND)
                continue; /* removed meanwhile */
            st = cst;
            if (st != SX_OK)
                break;
            char key[192];
            (void)snprintf(key, sizeof key, "%s.%08" PRIx32, nm, crc);
            st = ent_add(out, &cap, nm, key, sz, crc, KIND_IDX);
        }
    }
    sx_strings_free(names, n_names);
    sx__manifest_fini(&man);
    return st;
}

/* The use clock value of a local copy (0: not used by this process). store_mu held. */
static uint64_t use_of(const struct sx__cstore *cs, const char *name)
{
    for (size_t i = 0; i < cs->n_uses; i++)
        if (strcmp(cs->uses[i].name, name) == 0)
            return cs->uses[i].use;
    return 0;
}

static void touch_locked(struct sx__cstore *cs, const char *name)
{
    cs->clock++;
    for (size_t i = 0; i < cs->n_uses; i++) {
        if (strcmp(cs->uses[i].name, name) == 0) {
            cs->uses[i].use = cs->clock;
            return;
        }
    }
    useent *v = sx__realloc(cs->uses, (cs->n_uses + 1) * sizeof *v);
    char *nm = sx__strdup(name);
    if (!v || !nm) { /* order only: an untracked file counts as least recently used */
        if (v)
            cs->uses = v;
        sx__free(nm);
        return;
    }
    cs->uses = v;
    cs->uses[cs->n_uses].name = nm;
    cs->uses[cs->n_uses].use = cs->clock;
    cs->n_uses++;
}

bool sx__store_holds(sx_collection *c, const char *name, uint64_t size)
{
    if (!c->cs)
        return false;
    /* segment and delete files are stored under their names, index files under
     * "<name>.<crc32c as 8 hex digits>" (local_objects) */
    size_t nl = strlen(name);
    bool held = false;
    sx__mutex_lock(&c->store_mu);
    for (size_t i = 0; c->cs->loaded && !held && i < c->cs->n_objs; i++) {
        const robj *r = &c->cs->objs[i];
        if (r->size != size || strncmp(r->key, name, nl) != 0)
            continue;
        held = r->key[nl] == '\0' || (r->key[nl] == '.' && strlen(r->key + nl + 1) == 8 &&
                                      strspn(r->key + nl + 1, "0123456789abcdef") == 8);
    }
    sx__mutex_unlock(&c->store_mu);
    return held;
}

void sx__store_touch(sx_collection *c, const char *name)
{
    if (!c->cs)
        return;
    sx__mutex_lock(&c->store_mu);
    touch_locked(c->cs, name);
    sx__mutex_unlock(&c->store_mu);
}

/* After a successful sync (flush_mu and store_mu held, m = the committed store manifest): while
 * the store-backed local bytes exceed cache_limit_bytes, replace local index files (.idx: their
 * indexes are deserialized into RAM, so the file is only read again at the next load) by stubs,
 * least recently used first. Segment and delete files stay (the segment's columns are mapped);
 * a local .diskann file stays (its index reads it through a descriptor). Best effort: a failure
 * keeps the file. */
static void trim_local(sx_collection *c, const stm *m)
{
    struct sx__cstore *cs = c->cs;
    sx_db *db = c->db;
    uint64_t limit = db->opts.cache_limit_bytes;
    if (!limit)
        return;
    uint64_t total = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!m->ents[i].remote)
            total += m->ents[i].size;
    while (total > limit) {
        const stm_ent *best = NULL;
        uint64_t best_use = 0;
        for (size_t i = 0; i < m->n; i++) {
            const stm_ent *e = &m->ents[i];
            size_t nl = strlen(e->name);
            if (e->remote || e->kind != KIND_IDX || nl < 4 || strcmp(e->name + nl - 4, ".idx") != 0)
                continue;
            uint64_t u = use_of(cs, e->name);
            if (!best || u < best_use || (u == best_use && strcmp(e->name, best->name) < 0)) {
                best = e;
                best_use = u;
            }
        }
        if (!best)
            break;
        char path[4096];
        (void)snprintf(path, sizeof path, "%s/%s", c->dir, best->name);
        /* stub first, then the file: a crash between leaves both, and the file wins */
        if (sx__stub_write(path, best->key, best->size, best->crc) != SX_OK ||
            sx__fs_unlink(path) != SX_OK)
            break;
        total -= best->size;
        atomic_fetch_add_explicit(&db->local_evictions, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&db->local_evicted_bytes, best->size, memory_order_relaxed);
        ((stm_ent *)best)->remote = true;
    }
}

sx_status sx__store_sync_locked(sx_collection *c)
{
    struct sx__cstore *cs = c->cs;
    sx__objstore *o = c->db->store;
    if (!cs || !o)
        return SX_OK;
    if (atomic_load(&c->dropped))
        return SX_OK;
    sx__mutex_lock(&c->store_mu);
    if (cs->dropping) {
        sx__mutex_unlock(&c->store_mu);
        return SX_OK;
    }
    char msg[512];
    sx_status st = SX_OK;
    stm m;
    memset(&m, 0, sizeof m);
    sx__wbuf w;
    sx__wbuf_init(&w);
    if (!cs->loaded) {
        st = load_remote(c);
        if (st != SX_OK) {
            save_msg(msg, sizeof msg);
            clear_objs(cs);
            st = sx__err(st == SX_ENOMEM ? SX_ENOMEM : SX_EREMOTE,
                         "object store %s: listing collection %s failed: %s; the data is safe "
                         "locally and the next flush retries",
                         o->url, c->name, msg);
            goto out;
        }
    }
    st = local_objects(c, &m);
    if (st != SX_OK)
        goto out;
    char key[1024], path[4096], epoch[256] = "";
    const sx_store_fence *fence = fence_of(c->db);
    if (fence) {
        /* new content goes under this writer's epoch; content a manifest already named (any
         * epoch) keeps its key */
        st = fence->prefix(fence->ctx, c->db->opts.storage_url, c->name, epoch, sizeof epoch);
        if (st != SX_OK) {
            save_msg(msg, sizeof msg);
            st = sx__err(st, "collection %s: this process may not write it to the store: %s",
                         c->name, *msg ? msg : sx_status_str(st));
            goto out;
        }
        for (size_t i = 0; i < m.n; i++) {
            if (m.ents[i].remote)
                continue; /* the stub names the stored key */
            robj *r = find_base(cs, m.ents[i].key, m.ents[i].size);
            char *k = NULL;
            if (r) {
                k = sx__strdup(r->key);
            } else {
                (void)snprintf(key, sizeof key, "%s%s", epoch, m.ents[i].key);
                k = sx__strdup(key);
            }
            if (!k) {
                st = sx__err(SX_ENOMEM, "store sync");
                goto out;
            }
            sx__free(m.ents[i].key);
            m.ents[i].key = k;
        }
    }
    for (size_t i = 0; i < m.n; i++) {
        robj *r = find_obj(cs, m.ents[i].key);
        if (r && r->trusted && r->size == m.ents[i].size)
            continue;
        (void)snprintf(key, sizeof key, "%s/%s", c->name, m.ents[i].key);
        if (m.ents[i].remote) {
            st = sx__err(SX_EREMOTE,
                         "object store %s: %s is missing from the store and has no local copy "
                         "(%s/%s.remote names it); drop and re-create the index to rebuild it",
                         o->url, key, c->dir, m.ents[i].name);
            goto out;
        }
        (void)snprintf(path, sizeof path, "%s/%s", c->dir, m.ents[i].name);
        st = sx__objstore_put_file(o, key, path);
        if (st != SX_OK) {
            save_msg(msg, sizeof msg);
            /* a lost response may have stored it: untrusted, so GC or a re-upload settles it */
            sx__ignore(add_obj(cs, m.ents[i].key, m.ents[i].size, false));
            st = sx__err(st == SX_ENOMEM ? SX_ENOMEM : SX_EREMOTE,
                         "object store %s: uploading %s failed: %s; the data is safe locally "
                         "(MANIFEST and WAL) and the next flush retries",
                         o->url, key, msg);
            goto out;
        }
        st = add_obj(cs, m.ents[i].key, m.ents[i].size, true);
        if (st != SX_OK)
            goto out;
    }
    stm_encode(&m, &w);
    if (!sx__wbuf_ok(&w)) {
        st = sx__err(SX_ENOMEM, "store manifest");
        goto out;
    }
    if (fence && (!cs->last || cs->last_len != w.len || memcmp(cs->last, w.data, w.len) != 0)) {
        /* a new manifest object, then the fenced pointer update */
        char rel[600];
        (void)snprintf(rel, sizeof rel, "%sMANIFEST.%" PRIu64 ".%" PRIu64, epoch, m.generation,
                       ++cs->mseq);
        (void)snprintf(key, sizeof key, "%s/%s", c->name, rel);
        st = add_obj(cs, rel, w.len, false); /* collected if the commit never happens */
        if (st == SX_OK)
            st = sx__objstore_put(o, key, w.data, w.len);
        if (st == SX_OK) {
            st = fence->commit(fence->ctx, c->db->opts.storage_url, c->name, key);
            if (st != SX_OK) {
                save_msg(msg, sizeof msg);
                sx__free(cs->last);
                cs->last = NULL;
                cs->last_len = 0;
                st = sx__err(st == SX_EFENCED || st == SX_ESTALE ? st : SX_EREMOTE,
                             "collection %s: committing store manifest %s failed: %s; nothing "
                             "is deleted from the store",
                             c->name, key, msg);
                goto out;
            }
            char *cur = sx__strdup(rel);
            if (!cur) {
                st = sx__err(SX_ENOMEM, "store sync");
                goto out;
            }
            sx__free(cs->cur_mkey);
            cs->cur_mkey = cur;
            st = add_obj(cs, rel, w.len, true);
        }
        if (st != SX_OK) {
            st = manifest_failed(cs, o, key, st);
            goto out;
        }
        keep_last(cs, &w);
    } else if (!cs->last || cs->last_len != w.len || memcmp(cs->last, w.data, w.len) != 0) {
        (void)snprintf(key, sizeof key, "%s/MANIFEST", c->name);
        st = sx__objstore_put(o, key, w.data, w.len);
        if (st != SX_OK) {
            st = manifest_failed(cs, o, key, st);
            goto out;
        }
        keep_last(cs, &w);
    }
    /* GC: only now may objects the previous manifest named go */
    for (size_t i = 0; i < cs->n_objs;) {
        bool named = cs->cur_mkey && strcmp(cs->cur_mkey, cs->objs[i].key) == 0;
        for (size_t j = 0; j < m.n && !named; j++)
            named = strcmp(m.ents[j].key, cs->objs[i].key) == 0;
        if (named) {
            i++;
            continue;
        }
        (void)snprintf(key, sizeof key, "%s/%s", c->name, cs->objs[i].key);
        if (sx__objstore_del(o, key) == SX_OK)
            remove_obj(cs, i);
        else
            i++; /* garbage only: retried at the next sync */
    }
    cs->dirty = false;
    cs->last_error[0] = '\0';
    trim_local(c, &m);
out:
    if (st != SX_OK) {
        cs->dirty = true;
        (void)snprintf(cs->last_error, sizeof cs->last_error, "%s", sx_errmsg());
    }
    sx__wbuf_fini(&w);
    stm_fini(&m);
    sx__mutex_unlock(&c->store_mu);
    return st;
}

sx_status sx__store_sync(sx_collection *c)
{
    if (!c->cs)
        return SX_OK;
    sx__mutex_lock(&c->flush_mu);
    sx_status st = sx__store_sync_locked(c);
    sx__mutex_unlock(&c->flush_mu);
    return st;
}

void sx__store_mark_dirty(sx_collection *c)
{
    if (!c->cs)
        return;
    sx__mutex_lock(&c->store_mu);
    c->cs->dirty = true;
    sx__mutex_unlock(&c->store_mu);
}

bool sx__store_is_dirty(sx_collection *c)
{
    if (!c->cs)
        return false;
    sx__mutex_lock(&c->store_mu);
    bool d = c->cs->dirty;
    sx__mutex_unlock(&c->store_mu);
    return d;
}

void sx__store_index_begin(sx_collection *c)
{
    if (c->cs)
        sx__mutex_lock(&c->store_mu);
}

void sx__store_index_end(sx_collection *c, uint64_t seg_id, size_t v)
{
    if (!c->cs)
        return;
    forget_crcs(c->cs, seg_id);
    char name[64];
    (void)snprintf(name, sizeof name, "seg-%020" PRIu64 ".%s", seg_id, sx__idx_ext(v, false));
    touch_locked(c->cs, name); /* just written: the most recently used */
    c->cs->dirty = true;
    sx__mutex_unlock(&c->store_mu);
}

void sx__store_after_build(sx_collection *c, const atomic_bool *cancel)
{
    if (!c->cs)
        return;
    /* flush_mu may be held for long (an upload) or by an index drop waiting for this very
     * builder: try for a while, then leave it dirty for the next flush / sx_db_sync / close */
    for (int i = 0; i < 400; i++) {
        if (atomic_load(&c->dropped) || atomic_load(cancel))
            return;
        if (sx__mutex_trylock(&c->flush_mu)) {
            sx__ignore(sx__store_sync_locked(c));
            sx__mutex_unlock(&c->flush_mu);
            return;
        }
        struct timespec ts = { 0, 5000000L };
        nanosleep(&ts, NULL);
    }
}

sx_status sx__store_segment_key(
    sx_collection *c, uint64_t seg_id, char *buf, size_t cap, const atomic_bool *cancel)
{
    if (!c->cs)
        return sx__err(SX_ENOTFOUND, "collection %s has no object store", c->name);
    char name[64], path[4096];
    (void)snprintf(name, sizeof name, "seg-%020" PRIu64 ".sxs", seg_id);
    (void)snprintf(path, sizeof path, "%s/%s", c->dir, name);
    uint64_t size = 0;
    sx_status st = file_size(path, &size);
    if (st != SX_OK)
        return st;
    /* a segment just sealed may be waiting for its sync (a flush holds flush_mu while it
     * uploads): look again every 50 ms, and sync ourselves when nobody is, for up to 60 s */
    for (int i = 0; i < 1200; i++) {
        if (atomic_load(&c->dropped) || (cancel && atomic_load(cancel)))
            return SX_ECANCELED;
        bool found = false;
        sx__mutex_lock(&c->store_mu);
        robj *o = c->cs->loaded ? find_base(c->cs, name, size) : NULL;
        if (o) {
            int w = snprintf(buf, cap, "%s/%s", c->name, o->key);
            found = w > 0 && (size_t)w < cap;
        }
        sx__mutex_unlock(&c->store_mu);
        if (found)
            return SX_OK;
        if (i % 20 == 0 && sx__mutex_trylock(&c->flush_mu)) {
            if (sx__store_sync_locked(c) != SX_OK)
                sx__err_clear();
            sx__mutex_unlock(&c->flush_mu);
            continue;
        }
        struct timespec ts = { 0, 50000000L };
        nanosleep(&ts, NULL);
    }
    return sx__err(SX_ETIMEDOUT, "%s: segment %" PRIu64 " is not in the store", c->name, seg_id);
}

/* ---------------------------------------------------------------- drop */

sx_status sx__store_drop_begin(sx_collection *c)
{
    if (!c->cs)
        return SX_OK;
    sx__mutex_lock(&c->flush_mu);
    sx__mutex_lock(&c->store_mu);
    char key[1024], msg[512];
    const sx_store_fence *fence = fence_of(c->db);
    sx_status st;
    if (fence) {
        (void)snprintf(key, sizeof key, "the manifest pointer of %s", c->name);
        st = fence->commit(fence->ctx, c->db->opts.storage_url, c->name, NULL);
    } else {
        (void)snprintf(key, sizeof key, "%s/MANIFEST", c->name);
        st = sx__objstore_del(c->db->store, key);
    }
    if (st == SX_OK) {
        c->cs->dropping = true;
    } else {
        save_msg(msg, sizeof msg);
        clear_objs(c->cs); /* state unknown: reload at the next sync */
        st = sx__err(st == SX_EFENCED || st == SX_ESTALE ? st : SX_EREMOTE,
                     "object store %s: deleting %s failed: %s; collection %s was not dropped",
                     c->db->store->url, key, msg, c->name);
    }
    sx__mutex_unlock(&c->store_mu);
    sx__mutex_unlock(&c->flush_mu);
    return st;
}

void sx__store_drop_finish(sx_db *db, const char *name)
{
    if (!db->store)
        return;
    char pre[512];
    (void)snprintf(pre, sizeof pre, "%s/", name);
    char **keys = NULL;
    size_t n = 0;
    if (sx__objstore_list(db->store, pre, &keys, NULL, &n) != SX_OK)
        return; /* leftovers are collected when a collection of that name syncs again */
    for (size_t i = 0; i < n; i++)
        sx__ignore(sx__objstore_del(db->store, keys[i]));
    sx_strings_free(keys, n);
}

/* ---------------------------------------------------------------- restore */

static bool valid_coll_name(const char *s, size_t n)
{
    if (n == 0 || n > SX_MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' ||
                  (i > 0 && ch >= '0' && ch <= '9');
        if (!ok)
            return false;
    }
    return true;
}

#define SRC_KEY_FILE "STORE-MANIFEST.key" /* the store manifest a restored copy came from */
#define SRC_STM_FILE "STORE-MANIFEST"     /* and its bytes (refreshes link what is unchanged) */

/* The store manifest the collection `name` currently has (key into key, decoded into m).
 * SX_ENOTFOUND: none (dropped, or never synced). */
static sx_status
fetch_stm(sx_db *db, const char *name, char *key, size_t cap, stm *m, void **raw, size_t *raw_len)
{
    memset(m, 0, sizeof *m);
    *raw = NULL;
    *raw_len = 0;
    sx_status st = current_mkey(db, name, key, cap);
    if (st != SX_OK)
        return st;
    st = sx__objstore_get(db->store, key, raw, raw_len);
    if (st == SX_OK)
        st = stm_decode(*raw, *raw_len, key, m);
    if (st != SX_OK && st != SX_ENOTFOUND && st != SX_ECORRUPT && st != SX_ENOMEM) {
        char msg[512];
        save_msg(msg, sizeof msg);
        st =
            sx__err(SX_EREMOTE, "object store %s: reading %s failed: %s", db->store->url, key, msg);
    }
    if (st != SX_OK) {
        sx__free(*raw);
        *raw = NULL;
    }
    return st;
}

/* Puts the files m names into dir (which exists, with wal/): an entry the previous store
 * manifest `old` (NULL: none) named with the same key and whose local file is there is kept
 * (keys name one content); the others are downloaded (atomically, over an older file of the same
 * name). Then the source files and, last, the MANIFEST. */
static sx_status fetch_entries(sx_db *db,
                               const char *name,
                               const char *mkey,
                               const stm *m,
                               const void *raw,
                               size_t raw_len,
                               const stm *old,
                               const char *dir)
{
    sx__objstore *o = db->store;
    char key[1024], path[4096], msg[512];
    sx_status st = SX_OK;
    for (size_t i = 0; st == SX_OK && i < m->n; i++) {
        const stm_ent *e = &m->ents[i];
        (void)snprintf(key, sizeof key, "%s/%s", name, e->key);
        (void)snprintf(path, sizeof path, "%s/%s", dir, e->name);
        bool same = false;
        for (size_t j = 0; old && j < old->n && !same; j++)
            same = strcmp(old->ents[j].key, e->key) == 0 && strcmp(old->ents[j].name, e->name) == 0;
        if (same) {
            char stub[4200];
            (void)snprintf(stub, sizeof stub, "%s.remote", path);
            if (sx__fs_exists(path) || sx__fs_exists(stub))
                continue;
        }
        size_t nl = strlen(e->name), el = strlen(SX__DISKANN_FILE_EXT);
        if (db->opts.cache_limit_bytes && e->kind == KIND_IDX && nl > el &&
            strcmp(e->name + nl - el, SX__DISKANN_FILE_EXT) == 0) {
            /* read through the block cache (ranged GETs), never downloaded whole */
            st = sx__stub_write(path, e->key, e->size, e->crc);
            continue;
        }
        st = sx__objstore_get_file(o, key, path);
        uint64_t sz = 0;
        uint32_t crc = 0;
        if (st == SX_OK && e->kind == KIND_IDX) {
            st = file_crc(path, &sz, &crc);
            if (st == SX_OK && (sz != e->size || crc != e->crc))
                st = sx__err(SX_ECORRUPT, "%s: size or CRC differs from the store manifest", key);
        } else if (st == SX_OK) {
            st = file_size(path, &sz);
            if (st == SX_OK && sz != e->size)
                st = sx__err(SX_ECORRUPT, "%s: %" PRIu64 " bytes, the store manifest says %" PRIu64,
                             key, sz, e->size);
        }
        if (st != SX_OK && e->kind == KIND_IDX && st != SX_ENOMEM) {
            sx__ignore(sx__fs_unlink(path)); /* optional: the index is rebuilt */
            st = SX_OK;
        }
        if (st != SX_OK && st != SX_ENOMEM && st != SX_ECORRUPT) {
            save_msg(msg, sizeof msg);
            st =
                sx__err(SX_EREMOTE, "object store %s: downloading %s failed: %s", o->url, key, msg);
        }
    }
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/%s", dir, SRC_STM_FILE);
        st = sx__fs_write_atomic(path, raw, raw_len);
    }
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/%s", dir, SRC_KEY_FILE);
        st = sx__fs_write_atomic(path, mkey, strlen(mkey));
    }
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/MANIFEST", dir);
        st = sx__fs_write_atomic(path, m->manifest, m->manifest_len);
    }
    return st;
}

sx_status sx__store_restore_one(sx_db *db, const char *name)
{
    char key[1024], tmp[4096], path[4096], fin[4096];
    stm m;
    void *raw = NULL;
    size_t raw_len = 0;
    sx_status st = fetch_stm(db, name, key, sizeof key, &m, &raw, &raw_len);
    if (st == SX_ENOTFOUND)
        return SX_OK; /* dropped meanwhile, or (fenced) the coordinator knows no manifest */
    if (st != SX_OK)
        return st;
    (void)snprintf(tmp, sizeof tmp, "%s/collections/.tmp-%s", db->dir, name);
    (void)snprintf(fin, sizeof fin, "%s/collections/%s", db->dir, name);
    sx__ignore(sx__fs_rmtree(tmp));
    (void)snprintf(path, sizeof path, "%s/wal", tmp);
    st = sx__fs_mkdir_p(path);
    if (st == SX_OK)
        st = fetch_entries(db, name, key, &m, raw, raw_len, NULL, tmp);
    if (st == SX_OK)
        st = sx__fs_rename(tmp, fin);
    if (st == SX_OK) {
        (void)snprintf(path, sizeof path, "%s/collections", db->dir);
        st = sx__fs_sync_dir(path);
    } else {
        sx__ignore(sx__fs_rmtree(tmp));
    }
    stm_fini(&m);
    sx__free(raw);
    return st;
}

sx_status sx__store_refresh_files(sx_db *db, const char *name, bool *changed)
{
    *changed = false;
    char key[1024], dir[4096], path[4096];
    (void)snprintf(dir, sizeof dir, "%s/collections/%s", db->dir, name);
    if (!sx__fs_exists(dir)) { /* new here: restored whole (tmp, then renamed into place) */
        sx_status st = sx__store_restore_one(db, name);
        *changed = st == SX_OK && sx__fs_exists(dir);
        return st == SX_OK && !*changed ? sx__err(SX_ENOTFOUND, "%s: not in the store", name) : st;
    }
    (void)snprintf(path, sizeof path, "%s/%s", dir, SRC_KEY_FILE);
    void *had = NULL;
    size_t had_len = 0;
    if (sx__fs_exists(path) && sx__fs_read_all(path, 4096, &had, &had_len) != SX_OK)
        had = NULL;
    sx_status st = current_mkey(db, name, key, sizeof key);
    if (st == SX_OK && fence_of(db) && had && had_len == strlen(key) &&
        memcmp(had, key, had_len) == 0) {
        sx__free(had);
        return SX_OK; /* fenced: every manifest is a new key, so an equal key is no change */
    }
    sx__free(had);
    if (st != SX_OK)
        return st;
    stm m, old;
    memset(&old, 0, sizeof old);
    void *raw = NULL, *oraw = NULL;
    size_t raw_len = 0, oraw_len = 0;
    st = fetch_stm(db, name, key, sizeof key, &m, &raw, &raw_len);
    if (st != SX_OK)
        return st;
    (void)snprintf(path, sizeof path, "%s/%s", dir, SRC_STM_FILE);
    bool have_old = sx__fs_exists(path) &&
                    sx__fs_read_all(path, STM_MAX, &oraw, &oraw_len) == SX_OK &&
                    stm_decode(oraw, oraw_len, path, &old) == SX_OK;
    if (have_old && oraw_len == raw_len && memcmp(oraw, raw, raw_len) == 0) {
        /* unfenced (<name>/MANIFEST is rewritten in place): the same bytes are no change */
        stm_fini(&m);
        stm_fini(&old);
        sx__free(raw);
        sx__free(oraw);
        return SX_OK;
    }
    (void)snprintf(path, sizeof path, "%s/wal", dir);
    st = sx__fs_mkdir_p(path);
    if (st == SX_OK)
        st = fetch_entries(db, name, key, &m, raw, raw_len, have_old ? &old : NULL, dir);
    if (st == SX_OK)
        *changed = true;
    stm_fini(&m);
    stm_fini(&old);
    sx__free(raw);
    sx__free(oraw);
    return st;
}

void sx__store_gc_local(sx_db *db, const char *name)
{
    char dir[4096], path[4096];
    (void)snprintf(dir, sizeof dir, "%s/collections/%s", db->dir, name);
    (void)snprintf(path, sizeof path, "%s/%s", dir, SRC_STM_FILE);
    void *raw = NULL;
    size_t len = 0;
    stm m;
    if (sx__fs_read_all(path, STM_MAX, &raw, &len) != SX_OK)
        return;
    if (stm_decode(raw, len, path, &m) != SX_OK) {
        sx__free(raw);
        return;
    }
    char **names = NULL;
    size_t n = 0;
    if (sx__fs_list(dir, &names, &n) == SX_OK) {
        for (size_t i = 0; i < n; i++) {
            if (strncmp(names[i], "seg-", 4) != 0)
                continue; /* MANIFEST, the source files, wal/ */
            bool named = false;
            for (size_t j = 0; j < m.n && !named; j++) {
                size_t el = strlen(m.ents[j].name);
                named = strncmp(names[i], m.ents[j].name, el) == 0 &&
                        (names[i][el] == '\0' || strcmp(names[i] + el, ".remote") == 0);
            }
            if (!named) {
                (void)snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                sx__ignore(sx__fs_unlink(path));
            }
        }
        sx_strings_free(names, n);
    }
    stm_fini(&m);
    sx__free(raw);
}

sx_status sx__store_names(sx_db *db, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    char **keys = NULL;
    size_t nk = 0;
    sx_status st = sx__objstore_list(db->store, "", &keys, NULL, &nk);
    if (st != SX_OK) {
        char msg[512];
        save_msg(msg, sizeof msg);
        return sx__err(st == SX_ENOMEM ? SX_ENOMEM : SX_EREMOTE,
                       "object store %s: listing failed: %s", db->store->url, msg);
    }
    char **out = sx__calloc(nk + 1, sizeof *out);
    size_t m = 0;
    char skipped[SX_MAX_NAME + 64] = "";
    for (size_t i = 0; out && i < nk; i++) {
        const char *slash = strchr(keys[i], '/');
        if (!slash || !valid_coll_name(keys[i], (size_t)(slash - keys[i])))
            continue;
        if (fence_of(db) ? m > 0 && strncmp(out[m - 1], keys[i], (size_t)(slash - keys[i])) == 0 &&
                               out[m - 1][slash - keys[i]] == '\0'
                         : strcmp(slash, "/MANIFEST") != 0)
            continue;
        out[m] = sx__strndup(keys[i], (size_t)(slash - keys[i]));
        if (!out[m])
            break;
        /* a query node serves its replicas only (sx_store_fence.serves); keys come sorted, so
         * the other keys of a collection it does not serve follow at once */
        const sx_store_fence *f = fence_of(db);
        if (f && f->serves) {
            if (strcmp(out[m], skipped) == 0 || !f->serves(f->ctx, db->opts.storage_url, out[m])) {
                (void)snprintf(skipped, sizeof skipped, "%s", out[m]);
                sx__free(out[m]);
                out[m] = NULL;
                continue;
            }
        }
        m++;
    }
    sx_strings_free(keys, nk);
    if (!out)
        return sx__err(SX_ENOMEM, "store listing");
    *names = out;
    *n = m;
    return SX_OK;
}

sx_status sx__store_restore(sx_db *db)
{
    if (!db->store)
        return SX_OK;
    char **names = NULL;
    size_t n = 0;
    sx_status st = sx__store_names(db, &names, &n);
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        char path[4096];
        (void)snprintf(path, sizeof path, "%s/collections/%s", db->dir, names[i]);
        if (sx__fs_exists(path))
            continue; /* the local copy is the same or newer (one writer per prefix) */
        st = sx__store_restore_one(db, names[i]);
    }
    sx_strings_free(names, n);
    return st;
}

/* ---------------------------------------------------------------- API */

sx_status sx_db_sync(sx_db *db)
{
    sx__err_clear();
    if (!db)
        return sx__err(SX_EINVAL, "sx_db_sync: no database");
    if (!db->store || db->opts.read_only)
        return SX_OK;
    sx__mutex_lock(&db->mu);
    sx_collection **cs = sx__calloc(db->n_colls + 1, sizeof *cs);
    size_t n = 0;
    for (size_t i = 0; cs && i < db->n_colls; i++) {
        cs[n] = db->colls[i];
        atomic_fetch_add(&cs[n]->refs, 1);
        n++;
    }
    sx__mutex_unlock(&db->mu);
    if (!cs)
        return sx__err(SX_ENOMEM, "sync");
    sx_status first = SX_OK;
    char msg[1024] = "";
    for (size_t i = 0; i < n; i++) {
        sx_status st = sx__store_sync(cs[i]);
        if (st != SX_OK && first == SX_OK) {
            first = st;
            save_msg(msg, sizeof msg);
        }
        sx__coll_unref(cs[i]);
    }
    sx__free(cs);
    return first == SX_OK ? SX_OK : sx__err(first, "%s", msg);
}

/* ---------------------------------------------------------------- root objects */

static sx_status
root_object_open(const char *url, const char *endpoint, const char *key, sx__objstore **o)
{
    if (!url || !*url)
        return sx__err(SX_EINVAL, "no storage URL");
    if (!key || !*key || strlen(key) > 200)
        return sx__err(SX_EINVAL, "store object key: 1 to 200 characters");
    for (const char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return sx__err(SX_EINVAL, "store object key '%s': only [A-Za-z0-9._-]", key);
    sx__objstore_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.s3_endpoint = endpoint;
    return sx__objstore_open(url, &cfg, o);
}

sx_status sx_store_object_get(
    const char *storage_url, const char *s3_endpoint, const char *key, char **data, size_t *len)
{
    sx__err_clear();
    *data = NULL;
    *len = 0;
    sx__objstore *o = NULL;
    sx_status st = root_object_open(storage_url, s3_endpoint, key, &o);
    if (st != SX_OK)
        return st;
    void *buf = NULL;
    size_t n = 0;
    st = sx__objstore_get(o, key, &buf, &n);
    if (st == SX_OK && n > (1u << 20)) {
        st = sx__err(SX_EINVAL, "store object %s is %zu bytes (at most 1 MiB)", key, n);
    } else if (st == SX_OK) {
        char *z = sx__realloc(buf, n + 1);
        if (!z) {
            st = sx__err(SX_ENOMEM, "store object");
        } else {
            z[n] = '\0';
            *data = z;
            *len = n;
            buf = NULL;
        }
    }
    sx__free(buf);
    sx__objstore_free(o);
    return st;
}

sx_status sx_store_object_put(
    const char *storage_url, const char *s3_endpoint, const char *key, const void *data, size_t len)
{
    sx__err_clear();
    if (len > (1u << 20))
        return sx__err(SX_EINVAL, "store object %s: %zu bytes (at most 1 MiB)", key ? key : "",
                       len);
    sx__objstore *o = NULL;
    sx_status st = root_object_open(storage_url, s3_endpoint, key, &o);
    if (st != SX_OK)
        return st;
    st = sx__objstore_put(o, key, data, len);
    sx__objstore_free(o);
    return st;
}

void sx_free_bytes(void *p)
{
    sx__free(p);
}

/* sx_store_file_get/put, sx_store_object_delete: an object anywhere under the store root */
static sx_status any_object_open(const char *url, const char *endpoint, sx__objstore **o)
{
    if (!url || !*url)
        return sx__err(SX_EINVAL, "no storage URL");
    sx__objstore_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.s3_endpoint = endpoint;
    return sx__objstore_open(url, &cfg, o);
}

/* One whole-file transfer between path and key (put: upload, else download). */
static sx_status file_xfer(
    const char *storage_url, const char *s3_endpoint, const char *key, const char *path, bool put)
{
    sx__err_clear();
    sx__objstore *o = NULL;
    sx_status st = any_object_open(storage_url, s3_endpoint, &o);
    if (st == SX_OK)
        st = put ? sx__objstore_put_file(o, key, path) : sx__objstore_get_file(o, key, path);
    sx__objstore_free(o);
    return st;
}

sx_status sx_store_file_get(const char *storage_url,
                            const char *s3_endpoint,
                            const char *key,
                            const char *path)
{
    return file_xfer(storage_url, s3_endpoint, key, path, false);
}

sx_status sx_store_file_put(const char *storage_url,
                            const char *s3_endpoint,
                            const char *key,
                            const char *path)
{
    return file_xfer(storage_url, s3_endpoint, key, path, true);
}

sx_status sx_store_object_delete(const char *storage_url, const char *s3_endpoint, const char *key)
{
    sx__err_clear();
    sx__objstore *o = NULL;
    sx_status st = any_object_open(storage_url, s3_endpoint, &o);
    if (st == SX_OK)
        st = sx__objstore_del(o, key);
    sx__objstore_free(o);
    return st;
}
