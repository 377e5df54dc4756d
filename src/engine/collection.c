/*
 * collection.c: collection life cycle: create, open (recovery), flush (seal + checkpoint),
 * compaction, manifest, offline check.
 *
 * Recovery (sx__coll_open), in order:
 *   1. read MANIFEST (SX_ECORRUPT if it fails its checksum: never guess);
 *   2. open every segment file it names (mapped; checksums verified by streaming reads,
 *      sx__seg_open_file) and its delete file;
 *   3. nothing to rebuild for primary keys: each sealed segment's key index (the file's key
 *      block) answers lookups; the hash map starts empty and gets the replayed rows' keys;
 *   4. open the WAL, replaying records with LSN > checkpoint_lsn into a fresh growing segment
 *      (a torn tail is truncated by the WAL);
 *   5. delete files the manifest does not name (left by a crash between a file write and the
 *      manifest commit), then load or queue index builds.
 * Flush (sx__coll_flush): under write_mu, rotate the WAL (checkpoint = last LSN), move the growing
 * segment into the sealed list as it is (sealed in place: no row is copied), snapshot dirty
 * delete bitmaps and install a new growing segment; then, outside write_mu, write the segment
 * files (from the chunks) and delete files, open each segment just written from its file
 * (prepare_mapped: columns mapped, key index from the file), write the manifest (checkpoint),
 * swap the mapped segments in (swap_seg: the hash map's entries for them dropped), drop WAL files
 * before the checkpoint, and attach or queue the indexes. A failure before the manifest commit
 * leaves the old manifest + old WAL files, which still recover everything.
 * sx__coll_flush_extra: the same flush also publishing segments written elsewhere (a bulk
 * import's, import.c) at its checkpoint, so that no WAL record before their commit is replayed
 * after them.
 * Metric change (sx_collection_set_metric, no index): the metric lives in the manifest and is
 * changed under flush_mu + write_mu (+ seg_lock for the store). WAL records hold raw vectors and
 * replay normalises them when the manifest says COSINE, so a change to COSINE with rows first
 * flushes the growing rows, then rewrites every sealed segment normalised (compact_copy) and
 * commits segments and metric with one manifest write.
 * Invariants: (1) the manifest never names a file that is not durable; (2) every record with
 * LSN <= checkpoint_lsn is reflected in the named files; (3) WAL files are deleted only after the
 * manifest that covers them is durable.
 */
#include <ctype.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "storage/manifest.h"
#include "storage/segfile.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"
#include "vector/dist.h"

void sx__coll_path(const sx_collection *c, char *buf, size_t n, const char *ext, uint64_t id)
{
    (void)snprintf(buf, n, "%s/seg-%020" PRIu64 ".%s", c->dir, id, ext);
}

static void del_path(const sx_collection *c, char *buf, size_t n, uint64_t id, uint64_t gen)
{
    (void)snprintf(buf, n, "%s/seg-%020" PRIu64 ".del.%" PRIu64, c->dir, id, gen);
}

sx__segment *sx__find_seg(sx_collection *c, uint64_t id)
{
    if (c->growing && c->growing->id == id)
        return c->growing;
    for (size_t i = 0; i < c->n_segs; i++) /* few segments: compaction breaks id order */
        if (c->segs[i]->id == id)
            return c->segs[i];
    return NULL;
}

/* Writes the manifest from the current state: persisted sealed segments (and those flagged to be
 * committed by the caller through persisted=true), with del_gens[i] overriding segs[i]->del_gen
 * when non-NULL. Caller holds flush_mu. */
sx_status sx__write_manifest(sx_collection *c, const uint64_t *del_gens)
{
    sx__manifest m;
    memset(&m, 0, sizeof m);
    m.generation = c->manifest_gen + 1;
    m.name = c->name;
    m.n_fields = c->n_fields;
    m.fields = c->fields;
    sx__rwlock_rdlock(&c->seg_lock);
    m.n_vec = c->n_vf;
    for (size_t v = 0; v < c->n_vf; v++) {
        m.vec[v].metric = c->vfs[v].metric;
        m.vec[v].index_type = c->vfs[v].index_type;
        m.vec[v].n_index_params = c->vfs[v].n_index_params;
        m.vec[v].index_params = c->vfs[v].index_params;
    }
    m.checkpoint_lsn = c->checkpoint_lsn;
    m.next_auto_id = c->next_auto_id;
    m.next_seg_id = c->next_seg_id;
    m.segs = sx__calloc(c->n_segs + 1, sizeof(sx__mseg));
    sx_status st = SX_OK;
    if (!m.segs) {
        sx__rwlock_unlock(&c->seg_lock);
        return sx__err(SX_ENOMEM, "manifest");
    }
    for (size_t i = 0; i < c->n_segs; i++) {
        sx__segment *s = c->segs[i];
        if (!s->persisted)
            continue;
        m.segs[m.n_segs].id = s->id;
        m.segs[m.n_segs].n_rows = atomic_load(&s->n_rows);
        m.segs[m.n_segs].del_gen = del_gens ? del_gens[i] : s->del_gen;
        m.n_segs++;
    }
    sx__rwlock_unlock(&c->seg_lock);
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/MANIFEST", c->dir);
    st = sx__manifest_write(path, &m);
    if (st == SX_OK)
        c->manifest_gen++;
    sx__free(m.segs);
    return st;
}

/* ---------------------------------------------------------------- open */

static sx_status load_schema(sx_collection *c, sx__manifest *m)
{
    c->n_fields = m->n_fields;
    c->fields = m->fields;
    m->fields = NULL;
    m->n_fields = 0;
    c->types = sx__calloc(c->n_fields, sizeof(sx_field_type));
    c->names = sx__calloc(c->n_fields, sizeof(char *));
    if (!c->types || !c->names)
        return sx__err(SX_ENOMEM, "schema");
    bool has_pk = false;
    c->n_vf = 0;
    for (size_t f = 0; f < c->n_fields; f++) {
        c->types[f] = c->fields[f].type;
        c->names[f] = c->fields[f].name;
        if (c->fields[f].is_primary) {
            c->pk = f;
            has_pk = true;
        }
        if (sx_field_is_vector(c->fields[f].type)) {
            uint32_t dim = c->fields[f].dim;
            sx__vtype vt = sx__vtype_of(c->fields[f].type);
            if (c->n_vf == SX_MAX_VECTOR_FIELDS || c->n_vf == m->n_vec || dim == 0 ||
                dim > SX_MAX_DIM || (vt == SX__VT_BIN && dim % 8 != 0) ||
                !sx__metric_fits(vt, m->vec[c->n_vf].metric))
                return sx__err(SX_ECORRUPT, "%s: manifest schema is invalid", c->dir);
            sx__vfield *vf = &c->vfs[c->n_vf];
            vf->field = f;
            vf->dim = dim;
            vf->vt = vt;
            vf->row_bytes = sx__vtype_row_bytes(vt, dim);
            vf->metric = m->vec[c->n_vf].metric;
            c->n_vf++;
        }
        if (c->types[f] < SX_FIELD_INT64 || c->types[f] > SX_FIELD_BINARY_VECTOR)
            return sx__err(SX_ECORRUPT, "%s: manifest has a bad field type", c->dir);
    }
    if (!has_pk || c->n_vf != m->n_vec)
        return sx__err(SX_ECORRUPT, "%s: manifest schema is invalid", c->dir);
    c->nullable = sx__calloc(c->n_fields, sizeof(bool));
    if (!c->nullable)
        return sx__err(SX_ENOMEM, "schema");
    for (size_t f = 0; f < c->n_fields; f++) {
        c->nullable[f] = c->fields[f].nullable;
        if (c->nullable[f] && (f == c->pk || sx_field_is_vector(c->types[f])))
            return sx__err(SX_ECORRUPT, "%s: manifest has a nullable key or vector", c->dir);
    }
    c->xschema.n_fields = c->n_fields;
    c->xschema.names = c->names;
    c->xschema.types = c->types;
    c->xschema.nullable = c->nullable;
    return SX_OK;
}

static sx_status index_params_str(sx__vfield *vf)
{
    size_t off = 0;
    vf->index_params_str[0] = '\0';
    for (size_t i = 0; i < vf->n_index_params; i++) {
        int w = snprintf(vf->index_params_str + off, sizeof vf->index_params_str - off, "%s%s=%s",
                         i ? "," : "", vf->index_params[i].key, vf->index_params[i].value);
        if (w < 0 || (size_t)w >= sizeof vf->index_params_str - off)
            return sx__err(SX_EINVAL, "index parameters too long");
        off += (size_t)w;
    }
    return SX_OK;
}

/* Bytes of one row's vectors (every vector field). */
static uint64_t vec_row_bytes(const sx_collection *c)
{
    uint64_t b = 0;
    for (size_t v = 0; v < c->n_vf; v++)
        b += c->vfs[v].row_bytes;
    return b;
}

static sx_status load_segments(sx_collection *c, const sx__manifest *m)
{
    c->segs = sx__calloc(m->n_segs + 1, sizeof(sx__segment *));
    sx_status st = c->segs ? SX_OK : sx__err(SX_ENOMEM, "open");
    for (size_t i = 0; st == SX_OK && i < m->n_segs; i++) {
        char path[4096];
        sx__segment *s = NULL;
        st = sx__seg_open_file(c, m->segs[i].id, m->segs[i].n_rows, &s);
        if (st != SX_OK)
            break;
        size_t n = atomic_load(&s->n_rows);
        s->persisted = true;
        c->segs[c->n_segs++] = s;
        if (m->segs[i].del_gen) {
            del_path(c, path, sizeof path, s->id, m->segs[i].del_gen);
            st = sx__delfile_read(path, s->id, n, s->deleted);
            if (st != SX_OK)
                break;
            s->del_gen = m->segs[i].del_gen;
            size_t nd = sx__bits_count(s->deleted, n);
            atomic_store(&s->n_deleted, nd);
            s->persisted_deleted = nd;
        }
        /* primary keys: the segment's key index answers for them (pkmap.c) */
    }
    return st;
}

/* The decimal number of 1..max_digits digits at *p (no sign, no blanks), *p moved past it; a
 * value past 64 bits reads as UINT64_MAX (as strtoull). False when there is no digit. */
static bool take_u64(const char **p, size_t max_digits, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    size_t n = 0;
    for (; n < max_digits && s[n] >= '0' && s[n] <= '9'; n++) {
        unsigned d = (unsigned)(s[n] - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
    }
    if (n == 0)
        return false;
    *p = s + n;
    *out = v;
    return true;
}

/* Removes files of this collection that the manifest does not name. */
static void collect_garbage(sx_collection *c)
{
    char **names = NULL;
    size_t n = 0;
    if (sx__fs_list(c->dir, &names, &n) != SX_OK)
        return;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = 0, gen = 0;
        bool keep = true;
        /* seg-ID.del.GEN: a delete file; seg-ID.EXT: segment, index and file-backed index files.
         * ID has up to 20 digits (written %020), GEN up to 20; other seg-* names are kept. */
        bool is_seg = strncmp(names[i], "seg-", 4) == 0;
        const char *p = is_seg ? names[i] + 4 : names[i], *g = NULL, *ext = NULL;
        bool has_id = is_seg && take_u64(&p, 20, &id);
        if (has_id && strncmp(p, ".del.", 5) == 0)
            g = p + 5;
        if (has_id && *p == '.') {
            ext = p + 1;
            while (isspace((unsigned char)*ext))
                ext++;
        }
        if (!is_seg) {
            keep = strstr(names[i], ".tmp") == NULL;
        } else if (g && take_u64(&g, 20, &gen)) {
            sx__segment *s = sx__find_seg(c, id);
            keep = s && s != c->growing && s->del_gen == gen;
        } else if (ext && *ext) {
            /* segment, index and file-backed index files of live sealed segments */
            sx__segment *s = sx__find_seg(c, id);
            keep = s && s != c->growing && strstr(names[i], ".tmp") == NULL;
        }
        if (!keep) {
            char path[4096];
            (void)snprintf(path, sizeof path, "%s/%s", c->dir, names[i]);
            sx__ignore(sx__fs_unlink(path));
        }
    }
    sx_strings_free(names, n);
}

static void coll_free(sx_collection *c)
{
    if (!c)
        return;
    if (c->wal)
        (void)sx__wal_close(c->wal);
    for (size_t i = 0; i < c->n_segs; i++)
        sx__seg_unref(c->segs[i]);
    sx__free(c->segs);
    sx__seg_unref(c->growing);
    sx__pkmap_free(c->pkmap);
    for (size_t f = 0; f < c->n_fields; f++)
        sx__free((char *)c->fields[f].name);
    sx__free(c->fields);
    sx__free(c->types);
    sx__free(c->nullable);
    sx__free(c->names);
    for (size_t v = 0; v < c->n_vf; v++) {
        sx__vfield *vf = &c->vfs[v];
        sx__free(vf->index_type);
        for (size_t i = 0; i < vf->n_index_params; i++) {
            sx__free((char *)vf->index_params[i].key);
            sx__free((char *)vf->index_params[i].value);
        }
        sx__free(vf->index_params);
    }
    sx__free(c->name);
    sx__free(c->dir);
    sx__mutex_destroy(&c->write_mu);
    sx__mutex_destroy(&c->flush_mu);
    sx__rwlock_destroy(&c->seg_lock);
    pthread_cond_destroy(&c->index_cv);
    sx__mutex_destroy(&c->idx_wait_mu);
    sx__store_coll_fini(c);
    sx__mutex_destroy(&c->store_mu);
    sx_db *db = c->db;
    sx__free(c);
    sx__db_unref(db); /* taken in sx__coll_open */
}

void sx__coll_unref(sx_collection *c)
{
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        coll_free(c);
}

sx_status sx__coll_open(sx_db *db, const char *name, sx_collection **out)
{
    sx__manifest m;
    memset(&m, 0, sizeof m);
    sx_collection *c = sx__calloc(1, sizeof *c);
    if (!c)
        return sx__err(SX_ENOMEM, "open collection");
    c->db = db;
    atomic_fetch_add(&db->refs, 1); /* the db's memory outlives sx_db_close while c lives */
    atomic_init(&c->refs, 1);
    atomic_init(&c->flush_waiters, 0);
    (void)sx__mutex_init(&c->write_mu, SX__RANK_WRITE, "collection.write_mu");
    (void)sx__mutex_init(&c->flush_mu, SX__RANK_FLUSH, "collection.flush_mu");
    (void)sx__rwlock_init(&c->seg_lock, SX__RANK_SEG, "collection.seg_lock");
    pthread_cond_init(&c->index_cv, NULL);
    (void)sx__mutex_init(&c->idx_wait_mu, SX__RANK_IDX_WAIT, "collection.idx_wait_mu");
    (void)sx__mutex_init(&c->store_mu, SX__RANK_STORE, "collection.store_mu");
    char path[4096];
    (void)snprintf(path, sizeof path, "%s/collections/%s", db->dir, name);
    c->dir = sx__strdup(path);
    c->name = sx__strdup(name);
    sx_status st = c->dir && c->name ? SX_OK : sx__err(SX_ENOMEM, "open collection");
    if (st == SX_OK)
        st = sx__store_coll_init(c);
    if (st != SX_OK)
        goto fail;
    (void)snprintf(path, sizeof path, "%s/MANIFEST", c->dir);
    st = sx__manifest_read(path, &m);
    if (st != SX_OK)
        goto fail;
    st = load_schema(c, &m);
    if (st != SX_OK)
        goto fail;
    c->checkpoint_lsn = m.checkpoint_lsn;
    c->next_auto_id = m.next_auto_id;
    c->next_seg_id = m.next_seg_id;
    c->manifest_gen = m.generation;
    for (size_t v = 0; v < c->n_vf; v++) {
        sx__vfield *vf = &c->vfs[v];
        sx__mvec *mv = &m.vec[v];
        if (!mv->index_type)
            continue;
        vf->index_type = mv->index_type;
        mv->index_type = NULL;
        vf->index_params = mv->index_params;
        vf->n_index_params = mv->n_index_params;
        mv->index_params = NULL;
        mv->n_index_params = 0;
        vf->iops = sx__index_lookup_vt(vf->index_type, vf->vt);
        if (!vf->iops) {
            st = sx__err(SX_ECORRUPT, "%s: unknown index type %s", c->dir, vf->index_type);
            goto fail;
        }
        st = index_params_str(vf);
        if (st != SX_OK)
            goto fail;
    }
    st = sx__pkmap_new(c->types[c->pk] == SX_FIELD_VARCHAR, &c->pkmap);
    if (st != SX_OK)
        goto fail;
    sx__pkmap_set_budget(c->pkmap, db->budget);
    st = load_segments(c, &m);
    if (st != SX_OK)
        goto fail;
    uint64_t max_bytes = db->opts.segment_max_bytes ? db->opts.segment_max_bytes : 256u << 20;
    /* without vectors (a collection of sparse or scalar fields only), rows are sized as if each
     * held 1 KiB: 262,144 rows in 256 MiB */
    uint64_t rb = vec_row_bytes(c);
    uint64_t rows = max_bytes / (rb ? rb : 1024);
    if (rows < 64)
        rows = 64;
    if (rows > (1u << 30))
        rows = 1u << 30;
    c->max_growing_rows = (size_t)rows;
    st = sx__seg_new_growing(c, c->next_seg_id++, c->max_growing_rows, &c->growing);
    if (st != SX_OK)
        goto fail;
    (void)snprintf(path, sizeof path, "%s/wal", c->dir);
    if (db->opts.wal_salvage && !db->opts.read_only)
        st = sx__wal_open_salvage(path, c->checkpoint_lsn, db->opts.sync_mode == SX_SYNC_FULL,
                                  sx__replay_record, c, &c->wal, NULL);
    else
        st = sx__wal_open(path, c->checkpoint_lsn, db->opts.sync_mode == SX_SYNC_FULL,
                          db->opts.read_only, sx__replay_record, c, &c->wal);
    if (st != SX_OK)
        goto fail;
    if (!db->opts.read_only)
        collect_garbage(c);
    sx__manifest_fini(&m);
    *out = c;
    return SX_OK;
fail:
    sx__manifest_fini(&m);
    coll_free(c);
    return st;
}

/* ---------------------------------------------------------------- flush */

typedef struct delsnap {
    sx__segment *s;
    uint64_t *bits;
    size_t n_deleted;
    uint64_t gen;
} delsnap;

/* The file writes of a flush, outside write_mu: the segment file of each of to_write[] and the
 * delete file of each snapshot with deletes. Nothing refers to these files until the manifest
 * written after them does. */
static sx_status write_flush_files(sx_collection *c,
                                   sx__segment *const *to_write,
                                   size_t n_to_write,
                                   const delsnap *snaps,
                                   size_t n_snaps)
{
    char path[4096];
    for (size_t w = 0; w < n_to_write; w++) {
        sx__segment *ws = to_write[w];
        sx__segcol *cols = sx__calloc(c->n_fields, sizeof *cols);
        if (!cols)
            return sx__err(SX_ENOMEM, "flush");
        /* a segment sealed in place keeps the growing segment's chunks */
        bool chunked = ws->chunk_rows < atomic_load(&ws->n_rows);
        for (size_t f = 0; f < c->n_fields; f++) {
            cols[f].name = (char *)c->names[f];
            cols[f].type = c->types[f];
            cols[f].dim = sx_field_is_vector(c->types[f]) ? c->fields[f].dim : 0;
            cols[f].data = chunked ? (void *)ws->chunks[f] : ws->chunks[f][0];
            cols[f].chunk_rows = chunked ? ws->chunk_rows : 0;
            cols[f].is_primary = f == c->pk;
            cols[f].nullable = c->fields[f].nullable;
            if (ws->nulls[f])
                cols[f].nulls = chunked ? (void *)ws->nulls[f] : ws->nulls[f][0];
        }
        sx__coll_path(c, path, sizeof path, "sxs", ws->id);
        sx_status st = sx__segfile_write(path, ws->id, atomic_load(&ws->n_rows), cols, c->n_fields);
        sx__free(cols);
        if (st != SX_OK)
            return st;
    }
    for (size_t i = 0; i < n_snaps; i++) {
        if (snaps[i].n_deleted == 0)
            continue;
        del_path(c, path, sizeof path, snaps[i].s->id, snaps[i].gen);
        sx_status st = sx__delfile_write(path, snaps[i].s->id, atomic_load(&snaps[i].s->n_rows),
                                         snaps[i].bits);
        if (st != SX_OK)
            return st;
    }
    return SX_OK;
}

/* Puts ns in the place of s in the sealed list: the delete bits and their persistence state are
 * carried over under write_mu (deletes set bits under it), the swap is made under seg_lock, and
 * the hash map's entries for s go when ns has a key index. False (ns dropped) when s is no
 * longer listed. Caller holds flush_mu, not write_mu. */
static bool swap_seg(sx_collection *c, sx__segment *s, sx__segment *ns)
{
    sx__mutex_lock(&c->write_mu);
    size_t pos = c->n_segs;
    for (size_t i = 0; i < c->n_segs; i++)
        if (c->segs[i] == s)
            pos = i;
    if (pos == c->n_segs) {
        sx__mutex_unlock(&c->write_mu);
        sx__seg_unref(ns);
        return false;
    }
    size_t words = sx__bits_words(atomic_load(&s->n_rows));
    for (size_t w = 0; w < words; w++)
        ns->deleted[w] = __atomic_load_n(&s->deleted[w], __ATOMIC_RELAXED);
    atomic_store(&ns->n_deleted, atomic_load(&s->n_deleted));
    ns->del_gen = s->del_gen;
    ns->persisted_deleted = s->persisted_deleted;
    ns->persisted = s->persisted;
    sx__rwlock_wrlock(&c->seg_lock);
    c->segs[pos] = ns;
    sx__rwlock_unlock(&c->seg_lock);
    if (ns->pk.col != UINT32_MAX)
        sx__pkmap_drop_seg(c->pkmap, s->id);
    sx__mutex_unlock(&c->write_mu);
    sx__seg_unref(s); /* the list's reference; views may still hold theirs */
    return true;
}

/* The replacement of s, a segment sealed in memory whose file was just written: the same segment
 * opened from that file (mapped columns and key index), so its heap (the growing segment's
 * chunks, for a segment sealed in place) goes once swap_seg has put it in the list and the views
 * using s are released. NULL when an index job already holds s, or when the file cannot be
 * mapped and s is contiguous (best effort: s keeps working). A segment sealed in place that
 * cannot be mapped gets a contiguous heap copy (an index build needs one); when that fails too,
 * *st is the error and the flush must fail before its commit (the next flush retries). Caller
 * holds flush_mu, not write_mu. */
static sx__segment *prepare_mapped(sx_collection *c, sx__segment *s, sx_status *st)
{
    *st = SX_OK;
    bool chunked = s->chunk_rows < atomic_load(&s->n_rows);
    sx__mutex_lock(&s->idx_mu);
    bool busy = false;
    for (size_t v = 0; v < c->n_vf; v++)
        busy = busy || s->index[v] != NULL || s->build_pending[v];
    sx__mutex_unlock(&s->idx_mu);
    if (busy && !chunked)
        return NULL;
    sx__segment *ms = NULL;
    if (sx__seg_open_file(c, s->id, atomic_load(&s->n_rows), &ms) == SX_OK)
        return ms;
    if (!chunked) {
        sx__err_clear();
        return NULL;
    }
    /* the rows of a segment sealed in place no longer change: copying needs no write_mu (its
     * delete bits are copied again by swap_seg, under it) */
    *st = sx__seg_seal_copy(c, s, &ms);
    return *st == SX_OK ? ms : NULL;
}

/* prepare_mapped for each of to_write[n]: *repl (owned; NULL entries: none) is set even on
 * failure, for the caller to release. */
static sx_status
prepare_all(sx_collection *c, sx__segment *const *to_write, size_t n, sx__segment ***repl)
{
    *repl = sx__calloc(n + 1, sizeof **repl);
    if (!*repl)
        return sx__err(SX_ENOMEM, "flush");
    sx_status st = SX_OK;
    for (size_t w = 0; w < n && st == SX_OK; w++)
        (*repl)[w] = prepare_mapped(c, to_write[w], &st);
    return st;
}

/* The flush's commit: the manifest naming the segments just written (to_write) and the delete
 * generations of the snapshots, each segment's persistence state set for it tentatively and
 * restored when the write fails; on success the delete generations advance and superseded delete
 * files go. Caller holds flush_mu, not write_mu. */
static sx_status commit_manifest(sx_collection *c,
                                 sx__segment *const *to_write,
                                 size_t n_to_write,
                                 const delsnap *snaps,
                                 size_t n_snaps)
{
    sx_status st;
    char path[4096];
    sx__mutex_lock(&c->write_mu);
    uint64_t *gens = sx__calloc(c->n_segs + 1, sizeof *gens);
    bool *was_persisted = sx__calloc(c->n_segs + 1, sizeof(bool));
    if (!gens || !was_persisted) {
        sx__mutex_unlock(&c->write_mu);
        sx__free(gens);
        sx__free(was_persisted);
        return sx__err(SX_ENOMEM, "flush");
    }
    for (size_t i = 0; i < c->n_segs; i++) {
        sx__segment *s = c->segs[i];
        gens[i] = s->del_gen;
        was_persisted[i] = s->persisted;
        for (size_t j = 0; j < n_snaps; j++)
            if (snaps[j].s == s)
                gens[i] = snaps[j].n_deleted ? snaps[j].gen : 0;
        for (size_t w = 0; w < n_to_write; w++)
            if (to_write[w] == s)
                s->persisted = true; /* tentatively, for the manifest */
    }
    sx__mutex_unlock(&c->write_mu);
    st = sx__write_manifest(c, gens);
    sx__mutex_lock(&c->write_mu);
    for (size_t i = 0; i < c->n_segs; i++) {
        sx__segment *s = c->segs[i];
        if (st != SX_OK) {
            s->persisted = was_persisted[i];
            continue;
        }
        for (size_t j = 0; j < n_snaps; j++) {
            if (snaps[j].s != s)
                continue;
            uint64_t old = s->del_gen;
            s->del_gen = gens[i];
            s->persisted_deleted = snaps[j].n_deleted;
            if (old && old != s->del_gen) {
                del_path(c, path, sizeof path, s->id, old);
                sx__ignore(sx__fs_unlink(path));
            }
        }
    }
    sx__mutex_unlock(&c->write_mu);
    sx__free(was_persisted);
    sx__free(gens);
    return st;
}

sx_status sx__coll_flush(sx_collection *c, bool from_insert)
{
    return sx__coll_flush_extra(c, from_insert, NULL);
}

static void maybe_auto_merge(sx_collection *c);

sx_status sx__coll_flush_extra(sx_collection *c, bool from_insert, const sx__flush_extra *x)
{
    sx_status st = SX_OK;
    delsnap *snaps = NULL;
    size_t n_snaps = 0;
    sx__segment *sealed = NULL, *old_growing = NULL;
    sx__segment **to_write = NULL, **repl = NULL;
    size_t n_to_write = 0;
    atomic_fetch_add_explicit(&c->flush_waiters, 1, memory_order_relaxed);
    sx__mutex_lock(&c->flush_mu);
    atomic_fetch_sub_explicit(&c->flush_waiters, 1, memory_order_relaxed);
    sx__mutex_lock(&c->write_mu);
    if (atomic_load(&c->dropped)) {
        st = sx__err(SX_ENOTFOUND, "collection %s was dropped", c->name);
        goto unlock_write;
    }
    if (c->db->opts.read_only) {
        st = sx__err(SX_EINVAL, "database is open read-only");
        goto unlock_write;
    }
    if (x) {
        st = x->prepare(x->ctx, c); /* nothing changed yet: an error ends the flush here */
        if (st != SX_OK)
            goto unlock_write;
    }
    size_t grows = atomic_load(&c->growing->n_rows);
    /* Sealed by someone else already (the growing segment is new and empty). Sealing whenever
     * rows are there guarantees progress to an insert whose batch does not fit the room left:
     * comparing with max_growing_rows spun forever on a batch that did not divide it. */
    if (from_insert && grows == 0 && !x)
        goto unlock_write;
    uint64_t next_lsn = 0;
    st = sx__wal_rotate(c->wal, &next_lsn);
    if (st != SX_OK)
        goto unlock_write;
    snaps = sx__calloc(c->n_segs + 1, sizeof *snaps);
    if (!snaps) {
        st = sx__err(SX_ENOMEM, "flush");
        goto unlock_write;
    }
    sx__segment *ng = NULL;
    if (grows > 0) {
        /* sealed in place: the growing segment itself joins the sealed list (its rows no longer
         * change; readers already handle its chunks), written from its chunks and replaced by
         * its mapped file after the commit, so a seal copies no row. The reference taken here
         * is the list's; c->growing's goes with old_growing. */
        sealed = c->growing;
        sx__seg_ref(sealed);
        st = sx__seg_new_growing(c, c->next_seg_id++, c->max_growing_rows, &ng);
        if (st != SX_OK) {
            sx__seg_unref(sealed);
            sealed = NULL;
            goto unlock_write;
        }
    }
    /* the sealed segments, then the one just sealed (if any) */
    for (size_t i = 0; i < c->n_segs + (sealed != NULL); i++) {
        sx__segment *s = i < c->n_segs ? c->segs[i] : sealed;
        size_t nd = atomic_load(&s->n_deleted);
        if (s->persisted && nd == s->persisted_deleted)
            continue;
        if (nd == 0 && !s->persisted)
            continue;
        size_t words = sx__bits_words(atomic_load(&s->n_rows));
        snaps[n_snaps].bits = sx__malloc(words * 8 + 8);
        if (!snaps[n_snaps].bits) {
            st = sx__err(SX_ENOMEM, "flush");
            sx__seg_unref(sealed);
            sx__seg_unref(ng);
            sealed = NULL;
            goto unlock_write;
        }
        for (size_t w = 0; w < words; w++)
            snaps[n_snaps].bits[w] = __atomic_load_n(&s->deleted[w], __ATOMIC_RELAXED);
        snaps[n_snaps].s = s;
        snaps[n_snaps].n_deleted = nd;
        snaps[n_snaps].gen = s->del_gen + 1;
        n_snaps++;
    }
    if (sealed) {
        sx__rwlock_wrlock(&c->seg_lock);
        sx__segment **ns = sx__realloc(c->segs, (c->n_segs + 2 + (x ? x->n_segs : 0)) * sizeof *ns);
        if (!ns) {
            sx__rwlock_unlock(&c->seg_lock);
            st = sx__err(SX_ENOMEM, "flush");
            sx__seg_unref(sealed);
            sx__seg_unref(ng);
            sealed = NULL;
            goto unlock_write;
        }
        c->segs = ns;
        c->segs[c->n_segs++] = sealed;
        old_growing = c->growing;
        c->growing = ng;
        sx__rwlock_unlock(&c->seg_lock);
    }
    if (x) {
        /* the extra segments become visible at the checkpoint: every WAL record before it is
         * in the files this flush writes, every record after it follows them */
        sx__rwlock_wrlock(&c->seg_lock);
        x->publish(x->ctx, c);
        sx__rwlock_unlock(&c->seg_lock);
    }
    /* every sealed segment not yet durable (this one, or one a failed flush left behind) */
    to_write = sx__calloc(c->n_segs + 1, sizeof *to_write);
    if (!to_write) {
        st = sx__err(SX_ENOMEM, "flush");
        goto unlock_write;
    }
    for (size_t i = 0; i < c->n_segs; i++)
        if (!c->segs[i]->persisted)
            to_write[n_to_write++] = c->segs[i];
    c->checkpoint_lsn = next_lsn - 1;
    sx__mutex_unlock(&c->write_mu);

    /* I/O outside write_mu: inserts continue into the new growing segment. */
    st = write_flush_files(c, to_write, n_to_write, snaps, n_snaps);
    if (st != SX_OK)
        goto unlock_flush;
    /* their replacements (mapped from the files just written), before the commit: a segment
     * sealed in place must not be committed without one */
    st = prepare_all(c, to_write, n_to_write, &repl);
    if (st != SX_OK)
        goto unlock_flush;
    st = commit_manifest(c, to_write, n_to_write, snaps, n_snaps);
    if (st != SX_OK)
        goto unlock_flush;
    st = sx__wal_truncate_before(c->wal, c->checkpoint_lsn + 1);
    for (size_t w = 0; w < n_to_write; w++) {
        if (repl[w] && swap_seg(c, to_write[w], repl[w]))
            to_write[w] = repl[w];
        repl[w] = NULL;
        sx__seg_attach_index(c, to_write[w]);
    }
    if (x)
        x->committed(x->ctx, c);
    if (st == SX_OK && n_to_write > 0)
        maybe_auto_merge(c);
    if (st == SX_OK && c->cs) {
        /* after the local commit: a store failure loses nothing (local MANIFEST + WAL). A seal
         * forced by an insert does not fail the insert: the next flush or sync retries. */
        sx_status sst = sx__store_sync_locked(c);
        if (sst != SX_OK && !from_insert)
            st = sst;
        else if (sst != SX_OK)
            sx__err_clear();
    }
    goto unlock_flush;

unlock_write:
    sx__mutex_unlock(&c->write_mu);
unlock_flush:
    sx__mutex_unlock(&c->flush_mu);
    for (size_t i = 0; i < n_snaps; i++)
        sx__free(snaps[i].bits);
    sx__free(snaps);
    for (size_t w = 0; repl && w < n_to_write; w++)
        sx__seg_unref(repl[w]); /* not swapped in (a failure before or at the commit) */
    sx__free(repl);
    sx__free(to_write);
    sx__seg_unref(old_growing);
    return st;
}

/* ---------------------------------------------------------------- check */

sx_status sx__coll_check(sx_collection *c)
{
    char path[4096];
    sx__manifest m;
    (void)snprintf(path, sizeof path, "%s/MANIFEST", c->dir);
    sx__mutex_lock(&c->flush_mu);
    if (atomic_load(&c->dropped)) { /* a drop sets it before it takes flush_mu */
        sx__mutex_unlock(&c->flush_mu);
        return SX_OK;
    }
    sx_status st = sx__manifest_read(path, &m);
    sx__segcol *expect = st == SX_OK ? sx__calloc(c->n_fields, sizeof *expect) : NULL;
    if (st == SX_OK && !expect)
        st = sx__err(SX_ENOMEM, "check");
    for (size_t f = 0; st == SX_OK && f < c->n_fields; f++) {
        expect[f].name = (char *)c->names[f];
        expect[f].type = c->types[f];
        expect[f].dim = sx_field_is_vector(c->types[f]) ? c->fields[f].dim : 0;
        expect[f].is_primary = f == c->pk;
        expect[f].nullable = c->fields[f].nullable;
    }
    for (size_t i = 0; st == SX_OK && i < m.n_segs; i++) {
        uint64_t n = 0;
        sx__segcol *cols = NULL;
        sx__coll_path(c, path, sizeof path, "sxs", m.segs[i].id);
        st = sx__segfile_read(path, m.segs[i].id, expect, c->n_fields, &n, &cols, NULL);
        sx__segcols_free(cols, c->n_fields, n);
        if (st != SX_OK)
            break;
        if (m.segs[i].del_gen) {
            uint64_t *bits = sx__calloc(sx__bits_words(n) + 1, 8);
            del_path(c, path, sizeof path, m.segs[i].id, m.segs[i].del_gen);
            st = bits ? sx__delfile_read(path, m.segs[i].id, n, bits) : sx__err(SX_ENOMEM, "check");
            sx__free(bits);
            if (st != SX_OK)
                break;
        }
        for (size_t v = 0; st == SX_OK && v < c->n_vf && v < m.n_vec; v++) {
            sx__coll_path(c, path, sizeof path, sx__idx_ext(v, false), m.segs[i].id);
            if (!m.vec[v].index_type || !sx__fs_exists(path))
                continue;
            void *payload = NULL;
            size_t len = 0;
            sx__rwlock_rdlock(&c->seg_lock);
            const sx__vfield *vf = &c->vfs[v];
            char iname[64], pstr[256];
            (void)snprintf(iname, sizeof iname, "%s", vf->iops ? vf->iops->name : "");
            (void)snprintf(pstr, sizeof pstr, "%s", vf->index_params_str);
            sx__rwlock_unlock(&c->seg_lock);
            sx_status ist = sx__idxfile_read(path, iname, pstr, n, vf->dim, &payload, &len);
            sx__free(payload);
            if (ist == SX_ECORRUPT || ist == SX_EIO)
                st = ist;
        }
        if (st != SX_OK)
            break;
    }
    if (st == SX_OK) {
        uint64_t records = 0;
        (void)snprintf(path, sizeof path, "%s/wal", c->dir);
        st = sx__wal_check(path, &records);
    }
    sx__free(expect);
    sx__manifest_fini(&m);
    sx__mutex_unlock(&c->flush_mu);
    return st;
}

/* ---------------------------------------------------------------- compaction */

/* Rewrites sealed segment s without the rows set in `gone` (a delete bitmap: the segment's own,
 * or a snapshot of it), as a new segment `id`, and writes its file (durable, not yet named by the
 * manifest). `norm_field` (SIZE_MAX: none): scale that vector field's vectors to unit length (a
 * change of its metric to COSINE).
 * Reads only s's rows, which never change once sealed, so it needs no lock of its own; the
 * caller holds flush_mu (nothing else replaces s meanwhile). */
static sx_status compact_copy(sx_collection *c,
                              const sx__segment *s,
                              const uint64_t *gone,
                              uint64_t id,
                              size_t norm_field,
                              sx__segment **out_new)
{
    size_t n = atomic_load(&s->n_rows);
    size_t live = n - sx__bits_count(gone, n);
    void **cols = sx__calloc(c->n_fields, sizeof(void *));
    uint64_t **nulls = sx__calloc(c->n_fields, sizeof(uint64_t *));
    if (!cols || !nulls) {
        sx__free(cols);
        sx__free(nulls);
        return sx__err(SX_ENOMEM, "compaction");
    }
    sx_status st = SX_OK;
    for (size_t f = 0; f < c->n_fields && st == SX_OK; f++) {
        size_t w = sx__field_width(c, f);
        cols[f] = sx__malloc_aligned(live * w + 64);
        if (c->fields[f].nullable)
            nulls[f] = sx__calloc(sx__bits_words(live) + 1, sizeof(uint64_t));
        if (!cols[f] || (c->fields[f].nullable && !nulls[f])) {
            st = sx__err(SX_ENOMEM, "compaction");
            break;
        }
        size_t k = 0;
        for (size_t r = 0; r < n; r++) {
            if (sx__bits_test(gone, r))
                continue;
            if (nulls[f] && sx__seg_is_null(s, f, r))
                sx__bits_set(nulls[f], k);
            const void *cell = sx__seg_cell(s, f, r, w);
            if (c->types[f] == SX_FIELD_VARCHAR) {
                char *copy = sx__strdup(*(char *const *)cell);
                ((char **)cols[f])[k] = copy;
                if (!copy) {
                    for (size_t q = 0; q < k; q++)
                        sx__free(((char **)cols[f])[q]);
                    sx__free_aligned(cols[f]);
                    cols[f] = NULL;
                    st = sx__err(SX_ENOMEM, "compaction");
                    break;
                }
            } else {
                memcpy((char *)cols[f] + k * w, cell, w);
            }
            k++;
        }
        if (f == norm_field)
            for (size_t r = 0; r < live; r++)
                sx__normalize_row(sx__vtype_of(c->types[f]), (char *)cols[f] + r * w,
                                  c->fields[f].dim);
    }
    sx__segment *ns = NULL;
    if (st == SX_OK)
        st = sx__seg_new_sealed(c, id, live, cols, nulls, &ns);
    if (st != SX_OK) {
        for (size_t f = 0; f < c->n_fields; f++) {
            if (cols[f] && c->types[f] == SX_FIELD_VARCHAR)
                for (size_t q = 0; q < live; q++)
                    sx__free(((char **)cols[f])[q]);
            sx__free_aligned(cols[f]);
            sx__free(nulls[f]);
        }
        sx__free(cols);
        sx__free(nulls);
        return st;
    }
    sx__free(cols);
    sx__free(nulls);
    sx__segcol *sc = sx__calloc(c->n_fields, sizeof *sc);
    if (!sc) {
        sx__seg_unref(ns);
        return sx__err(SX_ENOMEM, "compaction");
    }
    for (size_t f = 0; f < c->n_fields; f++) {
        sc[f].name = (char *)c->names[f];
        sc[f].type = c->types[f];
        sc[f].dim = sx_field_is_vector(c->types[f]) ? c->fields[f].dim : 0;
        sc[f].data = ns->chunks[f][0];
        sc[f].is_primary = f == c->pk;
        sc[f].nullable = c->fields[f].nullable;
        sc[f].nulls = ns->nulls[f] ? ns->nulls[f][0] : NULL;
    }
    char path[4096];
    sx__coll_path(c, path, sizeof path, "sxs", ns->id);
    st = sx__segfile_write(path, ns->id, live, sc, c->n_fields);
    sx__free(sc);
    if (st != SX_OK) {
        sx__ignore(sx__fs_unlink(path));
        sx__seg_unref(ns);
        return st;
    }
    /* the rows were written: serve them from the file, not from the heap copy (best effort: a
     * failure to map keeps the copy, whose keys the caller then puts into the hash map) */
    sx__segment *ms = NULL;
    if (sx__seg_open_file(c, ns->id, live, &ms) == SX_OK) {
        sx__seg_unref(ns);
        ns = ms;
    } else {
        sx__err_clear();
    }
    ns->persisted = true;
    *out_new = ns;
    return SX_OK;
}

/* The old segment's files, once a manifest no longer names it. Caller holds flush_mu. */
static void remove_seg_files(sx_collection *c, const sx__segment *old)
{
    char path[4096];
    sx__coll_path(c, path, sizeof path, "sxs", old->id);
    sx__ignore(sx__fs_unlink(path));
    sx__seg_remove_index_files(c, old->id);
    if (old->del_gen) {
        del_path(c, path, sizeof path, old->id, old->del_gen);
        sx__ignore(sx__fs_unlink(path));
    }
}

void (*sx__compact_hook)(sx_collection *c, uint64_t seg_id);

/* Compacts the sealed segment with id `seg_id`, in three steps, so writers wait only for the
 * first and the last (both O(rows) bit and map work, no I/O):
 *   1. under write_mu: snapshot the segment's delete bits, take a new segment id;
 *   2. no lock but flush_mu: copy the rows live in the snapshot into a new segment and write its
 *      file (compact_copy): inserts, upserts and deletes go on meanwhile, deletes and upserts of
 *      its rows still mark the old segment (lookups find them there);
 *   3. under write_mu: replay onto the new segment the deletes that arrived during step 2 (rows
 *      live in the snapshot and deleted now), re-point the primary keys of the rows still live,
 *      swap the segment in (under seg_lock). The new segment's delete bits are persisted by the
 *      next flush; until then those deletes are in the WAL after the checkpoint, and recovery
 *      replays them against the new segment (its key index finds them).
 * Then the manifest names the new segment and the old one's files go. *done = true when the
 * segment was rewritten. Caller holds flush_mu. */
static sx_status compact_seg(sx_collection *c, uint64_t seg_id, bool *done)
{
    *done = false;
    sx__mutex_lock(&c->write_mu);
    sx__segment *old = NULL;
    for (size_t i = 0; i < c->n_segs; i++)
        if (c->segs[i]->id == seg_id)
            old = c->segs[i];
    if (sx__wal_is_fatal(c->wal)) {
        sx__mutex_unlock(&c->write_mu);
        return sx__err(SX_EFATAL, "database is in the error state");
    }
    if (!old || !old->persisted || atomic_load(&old->n_deleted) == 0) {
        sx__mutex_unlock(&c->write_mu);
        return SX_OK;
    }
    size_t n = atomic_load(&old->n_rows), words = sx__bits_words(n);
    uint64_t *snap = sx__malloc(words * 8 + 8);
    if (!snap) {
        sx__mutex_unlock(&c->write_mu);
        return sx__err(SX_ENOMEM, "compaction");
    }
    for (size_t w = 0; w < words; w++)
        snap[w] = __atomic_load_n(&old->deleted[w], __ATOMIC_RELAXED);
    uint64_t new_id = c->next_seg_id++;
    sx__seg_ref(old);
    sx__mutex_unlock(&c->write_mu);

    if (sx__compact_hook)
        sx__compact_hook(c, seg_id); /* tests: writes that race with the copy */
    sx__segment *ns = NULL;
    sx_status st = compact_copy(c, old, snap, new_id, SIZE_MAX, &ns);
    if (st != SX_OK) {
        sx__free(snap);
        sx__seg_unref(old);
        return st;
    }

    sx__mutex_lock(&c->write_mu);
    size_t pos = c->n_segs;
    for (size_t i = 0; i < c->n_segs; i++)
        if (c->segs[i] == old)
            pos = i;
    size_t k = 0, raced = 0;
    size_t pkw = sx__field_width(c, c->pk);
    for (size_t r = 0; pos < c->n_segs && r < n; r++) {
        if (sx__bits_test(snap, r))
            continue;
        if (sx__bits_test_atomic(old->deleted, r)) {
            sx__bits_set_atomic(ns->deleted, k); /* deleted during the copy */
            raced++;
        } else if (ns->pk.col == UINT32_MAX) { /* else ns's key index answers */
            const void *pk = sx__seg_cell(old, c->pk, r, pkw);
            sx_status pst =
                c->types[c->pk] == SX_FIELD_INT64
                    ? sx__pkmap_put_i(c->pkmap, *(const int64_t *)pk, ns->id, (uint32_t)k)
                    : sx__pkmap_put_s(c->pkmap, *(char *const *)pk, ns->id, (uint32_t)k);
            if (pst != SX_OK && st == SX_OK)
                st = pst;
        }
        k++;
    }
    if (pos < c->n_segs) {
        if (ns->pk.col != UINT32_MAX)
            sx__pkmap_drop_seg(c->pkmap, old->id);
        atomic_store(&ns->n_deleted, raced);
        ns->persisted_deleted = 0; /* the next flush writes its delete file */
        sx__rwlock_wrlock(&c->seg_lock);
        c->segs[pos] = ns;
        sx__rwlock_unlock(&c->seg_lock);
    }
    sx__mutex_unlock(&c->write_mu);
    sx__free(snap);
    if (pos == c->n_segs) { /* cannot happen under flush_mu; refuse to guess */
        char path[4096];
        sx__coll_path(c, path, sizeof path, "sxs", ns->id);
        sx__ignore(sx__fs_unlink(path));
        sx__seg_unref(ns);
        sx__seg_unref(old);
        return sx__err(SX_EIO, "compaction: segment %" PRIu64 " vanished", seg_id);
    }
    sx_status mst = sx__write_manifest(c, NULL);
    if (st == SX_OK)
        st = mst;
    if (mst == SX_OK)
        remove_seg_files(c, old);
    sx__seg_unref(old); /* the list's reference; views may still hold theirs */
    sx__seg_unref(old); /* ours */
    sx__seg_attach_index(c, ns);
    *done = true;
    return st;
}

/* Merges the sealed segments segs[at .. at + n - 1] (consecutive, persisted, no deleted rows at
 * the start) into one new segment, streaming: the new file is written from the old segments'
 * columns as they are (their vectors and keys are file mappings, so the rows pass through the
 * page cache, not the heap; the writer's only heap is its key block, O(rows) keys). Steps as
 * compact_seg: (1) under write_mu take references and a new id; (2) with no lock but flush_mu
 * write and open the new file; (3) under write_mu replay the deletes that arrived meanwhile onto
 * the new segment (old segment i's row r is row base_i + r), drop the old segments' entries from
 * the key map (the new file's key block answers for them) and swap the new segment in at the
 * place of the first. Then the manifest, the old files go, and the new segment gets its index
 * (a build when the collection has one). *done = true when merged. Caller holds flush_mu. */
void (*sx__merge_hook)(sx_collection *c, uint64_t first_seg_id, size_t n);

static sx_status merge_run(sx_collection *c, size_t at, size_t n, bool *done)
{
    *done = false;
    sx__segment **old = sx__calloc(n, sizeof *old);
    uint64_t *ends = sx__calloc(n, sizeof *ends);
    void **ptrs = sx__calloc(n * c->n_fields, sizeof *ptrs);
    void **nptrs = sx__calloc(n * c->n_fields, sizeof *nptrs);
    sx__segcol *sc = sx__calloc(c->n_fields, sizeof *sc);
    sx_status st = SX_OK;
    if (!old || !ends || !ptrs || !nptrs || !sc) {
        st = sx__err(SX_ENOMEM, "merging segments");
        goto out;
    }
    sx__mutex_lock(&c->write_mu);
    bool ok = at + n <= c->n_segs && !sx__wal_is_fatal(c->wal);
    uint64_t rows = 0;
    for (size_t i = 0; ok && i < n; i++) {
        old[i] = c->segs[at + i];
        ok = old[i]->persisted && atomic_load(&old[i]->n_deleted) == 0;
        rows += atomic_load(&old[i]->n_rows);
        ends[i] = rows;
    }
    uint64_t new_id = ok ? c->next_seg_id++ : 0;
    for (size_t i = 0; ok && i < n; i++)
        sx__seg_ref(old[i]);
    sx__mutex_unlock(&c->write_mu);
    if (!ok) {
        sx__free(old);
        old = NULL; /* no references taken */
        goto out;
    }
    if (sx__merge_hook)
        sx__merge_hook(c, old[0]->id, n); /* tests: writes that race with the merge */
    for (size_t f = 0; f < c->n_fields; f++) {
        for (size_t i = 0; i < n; i++) {
            ptrs[f * n + i] = old[i]->chunks[f][0];
            nptrs[f * n + i] = old[i]->nulls[f] ? old[i]->nulls[f][0] : NULL;
        }
        sc[f].name = (char *)c->names[f];
        sc[f].type = c->types[f];
        sc[f].dim = sx_field_is_vector(c->types[f]) ? c->fields[f].dim : 0;
        sc[f].data = &ptrs[f * n];
        sc[f].chunk_ends = ends;
        sc[f].is_primary = f == c->pk;
        sc[f].nullable = c->fields[f].nullable;
        sc[f].nulls = c->fields[f].nullable ? (void *)&nptrs[f * n] : NULL;
    }
    char path[4096];
    sx__coll_path(c, path, sizeof path, "sxs", new_id);
    st = sx__segfile_write(path, new_id, rows, sc, c->n_fields);
    sx__segment *ns = NULL;
    if (st == SX_OK)
        st = sx__seg_open_file(c, new_id, (size_t)rows, &ns);
    if (st != SX_OK) {
        sx__ignore(sx__fs_unlink(path));
        goto out;
    }
    ns->persisted = true;

    sx__mutex_lock(&c->write_mu);
    size_t pos = c->n_segs;
    for (size_t i = 0; i < c->n_segs; i++)
        if (c->segs[i] == old[0])
            pos = i;
    for (size_t i = 0; pos < c->n_segs && i < n; i++)
        if (pos + i >= c->n_segs || c->segs[pos + i] != old[i])
            pos = c->n_segs; /* the run changed: cannot happen under flush_mu */
    if (pos < c->n_segs) {
        size_t raced = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t base = i ? ends[i - 1] : 0, nr = ends[i] - base;
            for (uint64_t r = 0; atomic_load(&old[i]->n_deleted) > 0 && r < nr; r++) {
                if (sx__bits_test_atomic(old[i]->deleted, r)) {
                    sx__bits_set_atomic(ns->deleted, base + r); /* deleted during the copy */
                    raced++;
                }
            }
            sx__pkmap_drop_seg(c->pkmap, old[i]->id);
        }
        atomic_store(&ns->n_deleted, raced);
        ns->persisted_deleted = 0;
        sx__rwlock_wrlock(&c->seg_lock);
        c->segs[pos] = ns;
        memmove(&c->segs[pos + 1], &c->segs[pos + n], (c->n_segs - pos - n) * sizeof *c->segs);
        c->n_segs -= n - 1;
        sx__rwlock_unlock(&c->seg_lock);
    }
    sx__mutex_unlock(&c->write_mu);
    if (pos == c->n_segs) {
        sx__ignore(sx__fs_unlink(path));
        sx__seg_unref(ns);
        st = sx__err(SX_EIO, "merging segments: the run of %zu segments changed", n);
        goto out;
    }
    st = sx__write_manifest(c, NULL);
    for (size_t i = 0; i < n; i++) {
        if (st == SX_OK)
            remove_seg_files(c, old[i]);
        sx__seg_unref(old[i]); /* the list's reference; views may still hold theirs */
    }
    sx__seg_attach_index(c, ns);
    *done = true;
out:
    for (size_t i = 0; old && i < n; i++)
        sx__seg_unref(old[i]); /* ours */
    sx__free(old);
    sx__free(ends);
    sx__free(ptrs);
    sx__free(nptrs);
    sx__free(sc);
    return st;
}

/* The merge target: sx_db_options.merge_max_bytes (see there). */
static uint64_t merge_target(sx_collection *c)
{
    const sx_db_options *o = &c->db->opts;
    if (o->merge_max_bytes)
        return o->merge_max_bytes;
    uint64_t seg = o->segment_max_bytes ? o->segment_max_bytes : 256u << 20;
    sx__rwlock_rdlock(&c->seg_lock);
    bool disk = false;
    for (size_t v = 0; v < c->n_vf; v++)
        disk = disk || (c->vfs[v].iops && c->vfs[v].iops->reads_own_vectors);
    sx__rwlock_unlock(&c->seg_lock);
    return disk && seg < (2ull << 30) ? 2ull << 30 : seg;
}

/* Small mergeable sealed segments of c now (as merge_small picks them). */
static size_t count_small(sx_collection *c, uint64_t target)
{
    uint64_t row_bytes = vec_row_bytes(c);
    size_t small = 0;
    sx__rwlock_rdlock(&c->seg_lock);
    for (size_t i = 0; i < c->n_segs; i++) {
        sx__segment *s = c->segs[i];
        uint64_t b = (uint64_t)atomic_load(&s->n_rows) * row_bytes;
        small += s->persisted && atomic_load(&s->n_deleted) == 0 && b < target / 2;
    }
    sx__rwlock_unlock(&c->seg_lock);
    return small;
}

/* Merges runs of small sealed segments (vectors under half of the merge target, no deleted
 * rows: compaction has just rewritten those that had some) into segments of up to the target
 * (merge_target: sx_db_options.merge_max_bytes, see there), one run at a time (merge_run), so that
 * a collection filled under a small memory budget, whose growing segments were sealed small, is
 * searched and indexed as a few large segments. Runs are consecutive in the segment list (the order
 * queries return rows in). Caller holds flush_mu. *any |= a run was merged.
 * background: stop between runs once the database is closing (cancel_build; a background merge
 * is never the db->building job, so only sx__builder_stop sets it while one runs). */
static sx_status merge_small_ex(sx_collection *c, bool *any, bool background)
{
    uint64_t max_bytes = merge_target(c);
    uint64_t row_bytes = vec_row_bytes(c);
    sx_status st = SX_OK;
    for (size_t at = 0; st == SX_OK;) {
        sx__mutex_lock(&c->write_mu);
        size_t n_segs = c->n_segs, n = 0;
        uint64_t bytes = 0;
        while (at < n_segs) { /* the next run starts at the first small segment from `at` */
            sx__segment *s = c->segs[at];
            uint64_t b = (uint64_t)atomic_load(&s->n_rows) * row_bytes;
            if (s->persisted && atomic_load(&s->n_deleted) == 0 && b < max_bytes / 2)
                break;
            at++;
        }
        while (at + n < n_segs) {
            sx__segment *s = c->segs[at + n];
            uint64_t b = (uint64_t)atomic_load(&s->n_rows) * row_bytes;
            if (!s->persisted || atomic_load(&s->n_deleted) != 0 || b >= max_bytes / 2 ||
                (n > 0 && bytes + b > max_bytes))
                break;
            bytes += b;
            n++;
        }
        sx__mutex_unlock(&c->write_mu);
        if (at >= n_segs)
            break;
        if (n < 2) {
            at += n ? n : 1;
            continue;
        }
        bool done = false;
        st = merge_run(c, at, n, &done);
        *any |= done;
        at++; /* the merged segment (or the first of an unchanged run) */
        /* let a waiting flush in between two runs, as sx_compact does between segments */
        sx__mutex_unlock(&c->flush_mu);
        for (int spin = 0;
             spin < 20000 && atomic_load_explicit(&c->flush_waiters, memory_order_relaxed) > 0;
             spin++)
            sched_yield();
        sx__mutex_lock(&c->flush_mu);
        if (st == SX_OK && atomic_load(&c->dropped))
            st = sx__err(SX_ENOTFOUND, "collection %s was dropped", c->name);
        if (st == SX_OK && background && atomic_load(&c->db->cancel_build))
            break;
    }
    return st;
}

/* Compaction: rewrites every sealed segment that has deleted rows (compact_seg), one at a time,
 * then merges runs of small segments (merge_small).
 * Holds flush_mu for each segment's rewrite and releases it between segments, waiting there
 * until the flushes waiting for it (flush_waiters) have taken it, so a flush (an insert that has
 * filled the growing segment seals it) waits for one segment's rewrite, not the whole compaction;
 * write_mu only around the snapshot and the swap of each segment, so inserts and deletes go on
 * during the rewrites. Between segments the list may change (a flush adds one, another compaction
 * or a metric change replaces some): compact_seg looks each id up again and skips one that is gone.
 */
sx_status sx_compact(sx_collection *c)
{
    sx__err_clear();
    /* persist pending deletes first so every segment's bitmap is on disk */
    sx_status st = sx__coll_flush(c, false);
    if (st != SX_OK)
        return st;
    sx__mutex_lock(&c->flush_mu);
    if (atomic_load(&c->dropped)) {
        sx__mutex_unlock(&c->flush_mu);
        return sx__err(SX_ENOTFOUND, "collection %s was dropped", c->name);
    }
    /* the ids to visit: the sealed segments now (those a later flush adds have nothing deleted
     * that this compaction was asked to drop) */
    sx__mutex_lock(&c->write_mu);
    size_t n = c->n_segs;
    uint64_t *ids = sx__calloc(n + 1, sizeof *ids);
    for (size_t i = 0; ids && i < n; i++)
        ids[i] = c->segs[i]->id;
    sx__mutex_unlock(&c->write_mu);
    if (!ids) {
        sx__mutex_unlock(&c->flush_mu);
        return sx__err(SX_ENOMEM, "compaction");
    }
    bool any = false;
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        if (i > 0) { /* let a waiting flush in between two rewrites */
            sx__mutex_unlock(&c->flush_mu);
            /* an unlock wakes a waiter but the relock would usually win: wait until the waiters
             * have the lock (each takes it within a scheduling delay; bounded, so a stream of
             * flushes delays the compaction without stopping it) */
            for (int spin = 0;
                 spin < 20000 && atomic_load_explicit(&c->flush_waiters, memory_order_relaxed) > 0;
                 spin++)
                sched_yield();
            sx__mutex_lock(&c->flush_mu);
            if (atomic_load(&c->dropped)) {
                st = sx__err(SX_ENOTFOUND, "collection %s was dropped", c->name);
                break;
            }
        }
        bool done = false;
        st = compact_seg(c, ids[i], &done);
        any |= done;
    }
    sx__free(ids);
    if (st == SX_OK)
        st = merge_small_ex(c, &any, false);
    if (st == SX_OK && any)
        st = sx__store_sync_locked(c); /* the compacted segments, then GC of the old ones */
    sx__mutex_unlock(&c->flush_mu);
    return st;
}

static sx_status merge_segments(sx_collection *c, bool *any, bool background)
{
    sx__err_clear();
    *any = false;
    sx__mutex_lock(&c->flush_mu);
    sx_status st = atomic_load(&c->dropped)
                       ? sx__err(SX_ENOTFOUND, "collection %s was dropped", c->name)
                       : merge_small_ex(c, any, background);
    if (st == SX_OK && *any)
        st = sx__store_sync_locked(c);
    sx__mutex_unlock(&c->flush_mu);
    return st;
}

sx_status sx__merge_segments(sx_collection *c, bool *any)
{
    return merge_segments(c, any, false);
}

void sx__merge_background(sx_collection *c)
{
    atomic_store(&c->merge_queued, false); /* a flush from now on may queue the next one */
    bool any = false;
    if (merge_segments(c, &any, true) != SX_OK)
        sx__err_clear(); /* best effort: the segments stay as they were; the next flush retries */
}

/* After a flush that sealed segments: a background merge once auto_merge small ones exist. */
static void maybe_auto_merge(sx_collection *c)
{
    uint32_t min = c->db->opts.auto_merge;
    if (min < 2 || atomic_load(&c->merge_queued) || atomic_load(&c->dropped))
        return;
    if (count_small(c, merge_target(c)) >= min)
        sx__merge_enqueue(c->db, c);
}

/* ---------------------------------------------------------------- metric change */

/* Re-points the primary keys of the live rows of `old` to their rows in `ns` (old's live rows in
 * order, as compact_copy copies them). Caller holds write_mu. */
static sx_status repoint_keys(sx_collection *c, const sx__segment *old, const sx__segment *ns)
{
    sx_status st = SX_OK;
    size_t n = atomic_load(&old->n_rows), k = 0;
    size_t w = sx__field_width(c, c->pk);
    if (ns->pk.col != UINT32_MAX) { /* ns's key index answers for its keys */
        sx__pkmap_drop_seg(c->pkmap, old->id);
        return SX_OK;
    }
    for (size_t r = 0; r < n; r++) {
        if (sx__bits_test(old->deleted, r))
            continue;
        const void *pk = sx__seg_cell(old, c->pk, r, w);
        sx_status pst = c->types[c->pk] == SX_FIELD_INT64
                            ? sx__pkmap_put_i(c->pkmap, *(const int64_t *)pk, ns->id, (uint32_t)k)
                            : sx__pkmap_put_s(c->pkmap, *(char *const *)pk, ns->id, (uint32_t)k);
        if (pst != SX_OK && st == SX_OK)
            st = pst;
        k++;
    }
    return st;
}

/* Changes the metric with no stored vector to convert. Caller holds flush_mu and write_mu. */
static sx_status set_metric_only(sx_collection *c, size_t v, sx_metric m)
{
    sx_metric old = c->vfs[v].metric;
    sx__rwlock_wrlock(&c->seg_lock);
    c->vfs[v].metric = m;
    sx__rwlock_unlock(&c->seg_lock);
    sx_status st = sx__write_manifest(c, NULL);
    if (st != SX_OK) {
        sx__rwlock_wrlock(&c->seg_lock);
        c->vfs[v].metric = old;
        sx__rwlock_unlock(&c->seg_lock);
    }
    return st;
}

/* Changes the metric to COSINE when sealed segments hold raw vectors (the growing segment is
 * empty): every sealed segment is rewritten, normalised and without its deleted rows, under a new
 * id; one manifest write commits the new segments and the metric together. Before it, the new
 * files are unnamed (removed at the next open) and the old state stands; after it, the old files
 * are unnamed. The other vector fields' indexes are built again for the new segments (the
 * segment ids change). Caller holds flush_mu and write_mu. */
static sx_status normalise_all(sx_collection *c, size_t v, sx_metric m)
{
    size_t n = c->n_segs;
    sx__segment **olds = sx__calloc(n + 1, sizeof *olds);
    sx__segment **news = sx__calloc(n + 1, sizeof *news);
    sx_status st = olds && news ? SX_OK : sx__err(SX_ENOMEM, "set metric");
    char path[4096];
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        olds[i] = c->segs[i];
        st =
            compact_copy(c, olds[i], olds[i]->deleted, c->next_seg_id++, c->vfs[v].field, &news[i]);
    }
    sx_metric old_metric = c->vfs[v].metric;
    if (st == SX_OK) {
        sx__rwlock_wrlock(&c->seg_lock);
        for (size_t i = 0; i < n; i++)
            c->segs[i] = news[i];
        c->vfs[v].metric = m;
        sx__rwlock_unlock(&c->seg_lock);
        st = sx__write_manifest(c, NULL);
        if (st != SX_OK) {
            sx__rwlock_wrlock(&c->seg_lock);
            for (size_t i = 0; i < n; i++)
                c->segs[i] = olds[i];
            c->vfs[v].metric = old_metric;
            sx__rwlock_unlock(&c->seg_lock);
        }
    }
    if (st != SX_OK) {
        for (size_t i = 0; news && i < n; i++) {
            if (!news[i])
                continue;
            sx__coll_path(c, path, sizeof path, "sxs", news[i]->id);
            sx__ignore(sx__fs_unlink(path));
            sx__seg_unref(news[i]);
        }
        sx__free(olds);
        sx__free(news);
        return st;
    }
    /* committed: the pk map follows the rows, the old files go */
    sx_status kst = SX_OK;
    for (size_t i = 0; i < n; i++) {
        sx_status rst = repoint_keys(c, olds[i], news[i]);
        if (rst != SX_OK && kst == SX_OK)
            kst = rst;
        remove_seg_files(c, olds[i]);
        sx__seg_unref(olds[i]);
        sx__seg_attach_index(c, news[i]); /* the other vector fields' indexes */
    }
    sx__free(olds);
    sx__free(news);
    return kst;
}

sx_status sx_collection_set_metric(sx_collection *c, sx_metric m)
{
    return sx_collection_set_metric_on(c, NULL, m);
}

sx_status sx_collection_set_metric_on(sx_collection *c, const char *field, sx_metric m)
{
    sx__err_clear();
    if (!c || (unsigned)m > SX_METRIC_JACCARD)
        return sx__err(SX_EINVAL, "metric must be L2, IP, COSINE, HAMMING or JACCARD");
    size_t v = 0;
    sx_status st = sx__vfield_find(c, field, &v);
    if (st != SX_OK)
        return st;
    sx__vfield *vf = &c->vfs[v];
    if (!sx__metric_fits(vf->vt, m))
        return sx__err(SX_EINVAL,
                       "metric type %s is not supported on the %s field %s, supported: [%s]",
                       sx_metric_str(m), sx__vtype_name(vf->vt), c->names[vf->field],
                       vf->vt == SX__VT_BIN ? "HAMMING JACCARD" : "L2 IP COSINE");
    char who[600];
    if (c->n_vf > 1)
        (void)snprintf(who, sizeof who, "%s (field %s)", c->name, c->names[vf->field]);
    else
        (void)snprintf(who, sizeof who, "%s", c->name);
    for (int attempt = 0;; attempt++) {
        sx__mutex_lock(&c->flush_mu);
        sx__mutex_lock(&c->write_mu);
        bool flush_first = false;
        if (atomic_load(&c->dropped))
            st = sx__err(SX_ENOTFOUND, "collection %s was dropped", c->name);
        else if (c->db->opts.read_only)
            st = sx__err(SX_EINVAL, "database is open read-only");
        else if (sx__wal_is_fatal(c->wal))
            st = sx__err(SX_EFATAL, "database is in the error state after a failed write; reopen");
        else if (vf->metric == m)
            st = SX_OK;
        else if (vf->iops)
            st = sx__err(SX_EBUSY,
                         "collection %s has a %s index built for %s: the metric belongs to the "
                         "index, drop it before changing the metric",
                         who, vf->iops->name, sx_metric_str(vf->metric));
        else {
            bool stored = c->n_segs > 0 || atomic_load(&c->growing->n_rows) > 0;
            if (!stored || (m != SX_METRIC_COSINE && vf->metric != SX_METRIC_COSINE))
                st = set_metric_only(c, v, m); /* raw vectors serve L2 and IP alike */
            else if (vf->metric == SX_METRIC_COSINE)
                st = sx__err(SX_EINVAL,
                             "collection %s has rows stored normalised for COSINE: their original "
                             "vectors are gone, so the metric cannot become %s",
                             who, sx_metric_str(m));
            else if (atomic_load(&c->growing->n_rows) == 0)
                st = normalise_all(c, v, m);
            else if (attempt < 8)
                flush_first = true;
            else
                st = sx__err(SX_EBUSY,
                             "collection %s: inserts keep arriving while its vectors are being "
                             "normalised for COSINE; retry",
                             c->name);
        }
        sx__mutex_unlock(&c->write_mu);
        if (!flush_first && st == SX_OK)
            st = sx__store_sync_locked(c);
        sx__mutex_unlock(&c->flush_mu);
        if (!flush_first)
            return st;
        /* seal the growing rows so that every stored vector sits in a sealed segment */
        st = sx__coll_flush(c, false);
        if (st != SX_OK)
            return st;
    }
}
