/*
 * import.c: bulk import (sx_import_run) and import jobs (sx_import_submit ...), Milvus's
 * /v2/vectordb/jobs/import API underneath. Formats: import_fmt.c. Design: IMPORT.md.
 *
 * One import, on the calling thread:
 *   1. open every group (import_fmt.c checks each header against the schema): a bad file fails
 *      the job before a row is written;
 *   2. read rows into one batch of at most a segment's rows (the collection's growing-segment
 *      size, or opts.batch_rows), charged to the memory budget twice over (the segment writer
 *      encodes a copy) as SX__MEM_IMPORT, halved while the budget refuses, down to
 *      IMP_MIN_ROWS; a batch may span groups;
 *   3. per full batch: check the values as an insert would (finite floats, norms under
 *      SX_MAX_SQNORM for L2/IP, no NaN doubles, string lengths), then under write_mu only long
 *      enough to see the pk map and take ids: refuse keys already stored, reserve a segment id
 *      and (auto_id) a run of row ids; then, with no lock, normalise (COSINE) and write the
 *      sealed segment file seg-<id>.sxs with the flush path's writer (sx__segfile_write). No
 *      WAL record is written: the segment file is the only copy;
 *   4. commit, once, inside a flush (sx__coll_flush_extra): load the new files as sealed
 *      segments (vectors mapped, as at open); under write_mu check every key again (rows
 *      inserted meanwhile, duplicates within the job) and put them in the pk map; the flush
 *      rotates the WAL and seals the growing rows, the segments are published at that
 *      checkpoint, and the flush's ONE manifest names the old segments, the sealed growing rows
 *      and all new ones. Then the index builds are queued and, with an object store, the
 *      collection is synced. Why inside a flush: WAL records past the manifest's checkpoint are
 *      replayed after its segments load, so a delete of a key logged before the commit (a no-op
 *      then) would otherwise hit the imported row after a crash.
 * Atomicity: nothing names an import's segment files until the one manifest write, so a crash
 * (or an error, or a cancel) before it leaves files no manifest names, which the next open
 * deletes (collection.c collect_garbage) and which this code deletes on its own failures.
 * Locks: write_mu is held for short checks per batch; the commit is a flush (flush_mu throughout,
 * write_mu for the key puts, the WAL rotation and the seal, as any flush), so inserts and
 * searches continue during an import.
 * Rejected: inserting through sx_insert (a WAL record per row doubles the bytes written and the
 * rows become visible batch by batch), and committing a manifest per segment (not atomic).
 *
 * Jobs: one sx__importer per database (created by the first submit, under db->mu) holds the
 * jobs and one thread that runs pending jobs in order, one at a time. Its mutex (leaf rank)
 * guards the job list, each job's state and progress, and `stopping`; the import itself runs
 * without it (its progress callback takes it briefly). sx_db_close calls sx__import_stop first:
 * the running job is cancelled at its next batch (nothing visible), the thread joined, the jobs
 * freed. Jobs are not persisted: a restart forgets them (the data of completed jobs stays).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "engine/import_fmt.h"
#include "platform/membudget.h"
#include "storage/segfile.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"
#include "vector/dist.h"

#define IMP_MIN_ROWS 256u

typedef struct written {
    uint64_t *ids;
    uint64_t *rows;
    size_t n, cap;
    /* the manifest write failed: it may still have reached the disk (a failed directory fsync
     * after the rename), so the files stay; the next open removes them if it did not */
    bool keep;
} written;

/* Heap bytes of a batch of `rows` (VARCHAR: the pointers and an estimate of the strings). */
static uint64_t batch_bytes(const sx_collection *c, uint64_t rows)
{
    uint64_t b = 0;
    for (size_t f = 0; f < c->n_fields; f++) {
        b += rows * sx__field_width(c, f);
        if (c->types[f] == SX_FIELD_VARCHAR) {
            uint32_t ml = c->fields[f].max_length ? c->fields[f].max_length : 64;
            b += rows * ((ml < 64 ? ml : 64) + 16);
        }
    }
    return b;
}

static void batch_free(const sx_collection *c, sx__imp_batch *b)
{
    sx__imp_batch_clear(c, b);
    for (size_t f = 0; f < c->n_fields; f++) {
        if (sx_field_is_vector(c->types[f]))
            sx__free_aligned(b->col[f]);
        else
            sx__free(b->col[f]);
        b->col[f] = NULL;
        sx__free(b->nulls[f]);
        b->nulls[f] = NULL;
    }
}

static sx_status batch_alloc(const sx_collection *c, sx__imp_batch *b, size_t rows)
{
    memset(b, 0, sizeof *b);
    b->cap = rows;
    for (size_t f = 0; f < c->n_fields; f++) {
        size_t w = sx__field_width(c, f);
        if (sx_field_is_vector(c->types[f]))
            b->col[f] = sx__malloc_aligned(rows * w);
        else
            b->col[f] = sx__calloc(rows, w);
        if (c->fields[f].nullable)
            b->nulls[f] = sx__calloc(sx__bits_words(rows) + 1, sizeof(uint64_t));
        if (!b->col[f] || (c->fields[f].nullable && !b->nulls[f])) {
            batch_free(c, b);
            return sx__err(SX_ENOMEM, "import: a batch of %zu rows", rows);
        }
    }
    return SX_OK;
}

/* The checks sx_insert makes on values (ingest.c map_batch, check_sqnorm). */
static sx_status check_values(const sx_collection *c, const sx__imp_batch *b, uint64_t first_row)
{
    for (size_t f = 0; f < c->n_fields; f++) {
        if (f == c->pk && c->fields[f].auto_id)
            continue;
        if (c->types[f] == SX_FIELD_FLOAT_VECTOR) {
            const float *v = b->col[f];
            const size_t dim = c->fields[f].dim;
            size_t total = b->n * dim;
            for (size_t i = 0; i < total; i++)
                if (!isfinite(v[i]))
                    return sx__err(SX_EINVAL,
                                   "import: field \"%s\": row %llu has a NaN or infinite value",
                                   c->names[f], (unsigned long long)(first_row + i / dim));
            double n2 = 0;
            size_t over = sx__first_over_sqnorm(v, b->n, dim, &n2);
            if (over < b->n && c->vfs[sx__vslot(c, f)].metric != SX_METRIC_COSINE)
                return sx__err(SX_EINVAL,
                               "import: field \"%s\": row %llu has squared norm %.3g, above the "
                               "limit 2^125 (SX_MAX_SQNORM) of L2 and IP collections",
                               c->names[f], (unsigned long long)(first_row + over), n2);
        } else if (c->types[f] == SX_FIELD_VARCHAR) {
            char *const *s = b->col[f];
            uint32_t ml = c->fields[f].max_length ? c->fields[f].max_length : SX_MAX_VARCHAR;
            for (size_t i = 0; i < b->n; i++) {
                if (!s[i])
                    return sx__err(SX_EINVAL, "import: field \"%s\": row %llu is NULL", c->names[f],
                                   (unsigned long long)(first_row + i));
                if (strlen(s[i]) > ml)
                    return sx__err(SX_EINVAL,
                                   "import: field \"%s\": row %llu is longer than %u bytes",
                                   c->names[f], (unsigned long long)(first_row + i), ml);
            }
        } else if (c->types[f] == SX_FIELD_DOUBLE) {
            const double *d = b->col[f];
            for (size_t i = 0; i < b->n; i++)
                if (isnan(d[i]))
                    return sx__err(SX_EINVAL, "import: field \"%s\": row %llu is NaN", c->names[f],
                                   (unsigned long long)(first_row + i));
        }
    }
    return SX_OK;
}

static sx_status key_exists_err(const sx_collection *c, const void *keys, size_t i)
{
    if (c->types[c->pk] == SX_FIELD_INT64)
        return sx__err(SX_EEXIST, "import: primary key %lld already exists in %s or the job",
                       (long long)((const int64_t *)keys)[i], c->name);
    return sx__err(SX_EEXIST, "import: primary key \"%s\" already exists in %s or the job",
                   ((char *const *)keys)[i], c->name);
}

static bool key_stored(const sx_collection *c, const void *keys, size_t i)
{
    uint64_t sg;
    uint32_t rw;
    if (c->types[c->pk] == SX_FIELD_INT64)
        return sx__pk_get_i(c, ((const int64_t *)keys)[i], &sg, &rw);
    return sx__pk_get_s(c, ((char *const *)keys)[i], &sg, &rw);
}

static void unlink_written(sx_collection *c, const written *w)
{
    char path[4096];
    if (w->keep)
        return;
    for (size_t i = 0; i < w->n; i++) {
        sx__coll_path(c, path, sizeof path, "sxs", w->ids[i]);
        sx__ignore(sx__fs_unlink(path));
    }
}

/* Step 3: checks the batch, takes its ids and writes its segment file. */
static sx_status write_batch(sx_collection *c, sx__imp_batch *b, uint64_t first_row, written *w)
{
    sx_status st = check_values(c, b, first_row);
    if (st != SX_OK)
        return st;
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 16;
        uint64_t *ni = sx__realloc(w->ids, nc * sizeof *ni);
        if (ni)
            w->ids = ni;
        uint64_t *nr = ni ? sx__realloc(w->rows, nc * sizeof *nr) : NULL;
        if (!nr)
            return sx__err(SX_ENOMEM, "import");
        w->rows = nr;
        w->cap = nc;
    }
    bool auto_id = c->fields[c->pk].auto_id;
    uint64_t id = 0, base = 0;
    sx__mutex_lock(&c->write_mu);
    st = sx__coll_check_writable(c);
    for (size_t i = 0; st == SX_OK && !auto_id && i < b->n; i++)
        if (key_stored(c, b->col[c->pk], i))
            st = key_exists_err(c, b->col[c->pk], i);
    if (st == SX_OK) {
        id = c->next_seg_id++;
        if (auto_id) {
            base = c->next_auto_id;
            c->next_auto_id += b->n;
        }
    }
    sx__mutex_unlock(&c->write_mu);
    if (st != SX_OK)
        return st;
    if (auto_id)
        for (size_t i = 0; i < b->n; i++)
            ((int64_t *)b->col[c->pk])[i] = (int64_t)(base + i);
    for (size_t v = 0; v < c->n_vf; v++)
        if (c->vfs[v].metric == SX_METRIC_COSINE)
            for (size_t i = 0; i < b->n; i++)
                sx__normalize((float *)b->col[c->vfs[v].field] + i * c->vfs[v].dim, c->vfs[v].dim);
    sx__segcol cols[SX_MAX_FIELDS];
    memset(cols, 0, sizeof cols);
    for (size_t f = 0; f < c->n_fields; f++) {
        cols[f].name = (char *)c->names[f];
        cols[f].type = c->types[f];
        cols[f].dim = sx_field_is_vector(c->types[f]) ? c->fields[f].dim : 0;
        cols[f].data = b->col[f];
        cols[f].is_primary = f == c->pk; /* the key block (segment format 2) */
        cols[f].nullable = c->fields[f].nullable;
        cols[f].nulls = b->nulls[f];
    }
    char path[4096];
    sx__coll_path(c, path, sizeof path, "sxs", id);
    w->ids[w->n] = id; /* before the write: a failed write's partial file is removed too */
    w->rows[w->n] = b->n;
    w->n++;
    return sx__segfile_write(path, id, b->n, cols, c->n_fields);
}

/* Loads a written segment file as a sealed segment, as a reopen does (sx__seg_open_file: the
 * columns and the key block stay in the mapping). */
static sx_status load_written(sx_collection *c, uint64_t id, uint64_t rows, sx__segment **out)
{
    sx__segment *s = NULL;
    sx_status st = sx__seg_open_file(c, id, rows, &s);
    if (st != SX_OK)
        return st;
    s->persisted = true;
    *out = s;
    return SX_OK;
}

static const void *seg_keys(const sx_collection *c, const sx__segment *s)
{
    return s->chunks[c->pk][0];
}

/* Checks every key of segs against the collection (its growing hash map and the sealed
 * segments' key indexes, sx__pk_get_*) and against the job's own earlier keys (a job-local map,
 * freed on return). The segments' keys need no map entry of their own: once they are in the
 * segment list their key blocks answer lookups. Caller holds write_mu. */
static sx_status check_keys(sx_collection *c, sx__segment **segs, size_t n_segs, uint64_t total)
{
    bool str = c->types[c->pk] != SX_FIELD_INT64;
    sx__pkmap *jm = NULL;
    sx_status st = sx__pkmap_new(str, &jm);
    if (st == SX_OK)
        st = sx__pkmap_reserve(jm, (size_t)total);
    for (size_t k = 0; st == SX_OK && k < n_segs; k++) {
        sx__segment *s = segs[k];
        size_t rows = atomic_load(&s->n_rows);
        const void *keys = seg_keys(c, s);
        for (size_t i = 0; st == SX_OK && i < rows; i++) {
            uint64_t sg;
            uint32_t rw;
            bool dup = key_stored(c, keys, i) ||
                       (str ? sx__pkmap_get_s(jm, ((char *const *)keys)[i], &sg, &rw)
                            : sx__pkmap_get_i(jm, ((const int64_t *)keys)[i], &sg, &rw));
            if (dup)
                st = key_exists_err(c, keys, i);
            else if (str)
                st = sx__pkmap_put_s(jm, ((char *const *)keys)[i], s->id, (uint32_t)i);
            else
                st = sx__pkmap_put_i(jm, ((const int64_t *)keys)[i], s->id, (uint32_t)i);
        }
    }
    sx__pkmap_free(jm);
    return st;
}

/* Step 4 runs inside a flush (sx__coll_flush_extra): the WAL records past the checkpoint are
 * replayed after the manifest's segments load, so the imported segments must become visible
 * exactly at a checkpoint, or a delete logged before the commit (a no-op then: the key was not
 * there) would hit an imported row at replay. */
typedef struct commit_ctx {
    written *w;
    sx__segment **segs; /* loaded; owned until published */
    uint64_t total;     /* rows */
    bool published;     /* the segments are in c->segs (owned there) */
    bool committed;     /* the manifest naming them is durable */
} commit_ctx;

/* Under write_mu, before the flush changes anything: room in the segment list, and every key
 * checked (check_keys: none may be stored already or appear twice in the job; once published,
 * the segments' key blocks answer lookups, so nothing enters the hash map). */
static sx_status cx_prepare(void *ctx, sx_collection *c)
{
    commit_ctx *x = ctx;
    sx_status st = sx__coll_check_writable(c);
    if (st == SX_OK) {
        sx__rwlock_wrlock(&c->seg_lock);
        sx__segment **ns = sx__realloc(c->segs, (c->n_segs + x->w->n + 2) * sizeof *ns);
        if (ns)
            c->segs = ns;
        else
            st = sx__err(SX_ENOMEM, "import: the segment list");
        sx__rwlock_unlock(&c->seg_lock);
    }
    if (st == SX_OK)
        st = check_keys(c, x->segs, x->w->n, x->total);
    return st;
}

/* Under write_mu and seg_lock, at the checkpoint: cannot fail (room reserved). */
static void cx_publish(void *ctx, sx_collection *c)
{
    commit_ctx *x = ctx;
    for (size_t i = 0; i < x->w->n; i++)
        c->segs[c->n_segs++] = x->segs[i];
    x->published = true;
}

static void cx_committed(void *ctx, sx_collection *c)
{
    commit_ctx *x = ctx;
    for (size_t i = 0; i < x->w->n; i++)
        sx__seg_attach_index(c, x->segs[i]);
    x->committed = true;
}

/* Step 4. On error nothing is visible (the caller removes the files unless w->keep), except
 * after a failed manifest write of the flush (the rows are then visible and become durable
 * with the next flush: w->keep, and the message says so). */
static sx_status commit(sx_collection *c, written *w)
{
    if (w->n == 0)
        return SX_OK;
    commit_ctx x;
    memset(&x, 0, sizeof x);
    x.w = w;
    x.segs = sx__calloc(w->n, sizeof *x.segs);
    if (!x.segs)
        return sx__err(SX_ENOMEM, "import");
    sx_status st = SX_OK;
    for (size_t i = 0; st == SX_OK && i < w->n; i++) {
        st = load_written(c, w->ids[i], w->rows[i], &x.segs[i]);
        x.total += w->rows[i];
    }
    if (st == SX_OK) {
        sx__flush_extra fx = { cx_prepare, cx_publish, cx_committed, &x, w->n };
        /* from_insert: a store failure after the local commit is not the import's (the next
         * sync retries) */
        st = sx__coll_flush_extra(c, true, &fx);
    }
    if (x.committed) {
        sx__err_clear();
        st = SX_OK; /* durable and visible; a later step's error (WAL truncation) is not ours */
    } else if (x.published) {
        char msg[512];
        (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        w->keep = true;
        st = sx__err(st,
                     "import: the rows are visible but the manifest write failed (%s): they "
                     "become durable with the next successful flush",
                     msg);
    }
    for (size_t i = 0; !x.published && i < w->n; i++)
        sx__seg_unref(x.segs[i]);
    sx__free(x.segs);
    return st;
}

typedef struct run {
    sx_collection *c;
    const sx_import_opts *opts;
    sx_import_progress prog;
    sx__imp_batch b;
    uint64_t batch_first; /* job row number of the batch's first row */
    written w;
} run;

static sx_status report(run *r)
{
    if (r->opts && r->opts->progress && !r->opts->progress(r->opts->progress_ctx, &r->prog))
        return sx__err(SX_ECANCELED, "import cancelled");
    return SX_OK;
}

static sx_status flush_batch(run *r)
{
    if (r->b.n == 0)
        return SX_OK;
    sx_status st = write_batch(r->c, &r->b, r->batch_first, &r->w);
    r->batch_first += r->b.n;
    sx__imp_batch_clear(r->c, &r->b);
    return st;
}

static sx_status import_groups(run *r, sx__imp_group **gs, size_t n_groups)
{
    sx_status st = SX_OK;
    uint64_t bytes_before = 0;
    for (size_t g = 0; st == SX_OK && g < n_groups; g++) {
        r->prog.group = g;
        r->prog.group_rows_done = 0;
        r->prog.group_bytes_done = 0;
        r->prog.group_bytes_total = sx__imp_group_bytes(gs[g]);
        for (;;) {
            size_t got = 0;
            st = sx__imp_group_read(gs[g], &r->b, &got);
            if (st != SX_OK)
                break;
            r->b.n += got;
            r->prog.rows_done += got;
            r->prog.group_rows_done += got;
            r->prog.group_bytes_done = sx__imp_group_bytes_read(gs[g]);
            r->prog.bytes_done = bytes_before + r->prog.group_bytes_done;
            if (got == 0)
                break;
            if (r->b.n == r->b.cap) {
                st = flush_batch(r);
                if (st == SX_OK)
                    st = report(r);
                if (st != SX_OK)
                    break;
            }
        }
        r->prog.group_bytes_done = sx__imp_group_bytes(gs[g]);
        bytes_before += sx__imp_group_bytes(gs[g]);
        r->prog.bytes_done = bytes_before;
        sx__imp_group_close(gs[g]);
        gs[g] = NULL;
    }
    if (st == SX_OK)
        st = flush_batch(r);
    return st;
}

sx_status sx_import_run(sx_collection *c,
                        const sx_import_group *groups,
                        size_t n_groups,
                        const sx_import_opts *opts,
                        sx_import_result *out)
{
    if (!c || (!groups && n_groups))
        return sx__err(SX_EINVAL, "import: no collection or no groups");
    if (n_groups == 0)
        return sx__err(SX_EINVAL, "import: no files");
    sx_status st = sx__coll_check_writable(c);
    if (st != SX_OK)
        return st;
    for (size_t v = 0; v < c->n_vf; v++)
        if (c->vfs[v].vt != SX__VT_F32)
            return sx__err(SX_EINVAL,
                           "import: field \"%s\" is a %s field, and bulk import reads float32 "
                           "vectors only: insert its rows instead",
                           c->names[c->vfs[v].field], sx__vtype_name(c->vfs[v].vt));
    run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.opts = opts;
    r.prog.n_groups = n_groups;
    sx__imp_group **gs = sx__calloc(n_groups, sizeof *gs);
    if (!gs)
        return sx__err(SX_ENOMEM, "import");
    uint64_t charged = 0;
    /* 1. every header first */
    for (size_t g = 0; st == SX_OK && g < n_groups; g++) {
        st = sx__imp_group_open(c, &groups[g], opts, &gs[g]);
        if (st == SX_OK) {
            r.prog.rows_total += sx__imp_group_rows(gs[g]);
            r.prog.bytes_total += sx__imp_group_bytes(gs[g]);
        }
    }
    /* a JSON group's rows are known at its end only: bound them by its bytes (a row holds at
     * least dim numbers and dim - 1 commas), so a small file gets a small batch */
    uint64_t bound = 0;
    bool json = false;
    for (size_t g = 0; st == SX_OK && g < n_groups; g++) {
        uint64_t gr = sx__imp_group_rows(gs[g]);
        if (gr == 0 && sx__imp_group_bytes(gs[g]) > 0) {
            json = true;
            /* no vector: a row is at least "{}" */
            gr = sx__imp_group_bytes(gs[g]) / (2 * (uint64_t)(c->n_vf ? c->vfs[0].dim : 1)) + 1;
        }
        bound += gr;
    }
    if (json)
        r.prog.rows_total = 0;
    /* 2. the batch, within the budget */
    uint64_t rows = opts && opts->batch_rows ? opts->batch_rows : c->max_growing_rows;
    if (rows > c->max_growing_rows)
        rows = c->max_growing_rows;
    if (rows > bound)
        rows = bound;
    if (rows == 0)
        rows = 1;
    /* charged: the batch and the segment writer's encoded copy of it (segfile.c builds the
     * whole file in memory before it writes it) */
    while (st == SX_OK) {
        st = sx__mem_take(c->db->budget, SX__MEM_IMPORT, 2 * batch_bytes(c, rows), "bulk import");
        if (st == SX_OK) {
            charged = 2 * batch_bytes(c, rows);
            break;
        }
        if (rows / 2 < IMP_MIN_ROWS)
            break;
        sx__err_clear();
        st = SX_OK;
        rows /= 2;
    }
    if (st == SX_OK)
        st = batch_alloc(c, &r.b, (size_t)rows);
    /* 3. the rows */
    if (st == SX_OK)
        st = import_groups(&r, gs, n_groups);
    /* the batch goes before the commit loads the segments (a lower peak) */
    batch_free(c, &r.b);
    sx__mem_give(c->db->budget, SX__MEM_IMPORT, charged);
    charged = 0;
    if (st == SX_OK) {
        r.prog.committing = true;
        r.prog.rows_total = r.prog.rows_done;
        st = report(&r);
    }
    /* 4. one commit */
    if (st == SX_OK)
        st = commit(c, &r.w);
    if (st != SX_OK) {
        char msg[1024];
        (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        unlink_written(c, &r.w);
        st = sx__err(st, "%s", msg);
    } else {
        r.prog.committing = false;
        sx__ignore(report(&r));
        if (out) {
            out->rows = r.prog.rows_done;
            out->bytes = r.prog.bytes_total;
            out->segments = (uint32_t)r.w.n;
        }
    }
    batch_free(c, &r.b);
    sx__mem_give(c->db->budget, SX__MEM_IMPORT, charged);
    for (size_t g = 0; g < n_groups; g++)
        sx__imp_group_close(gs[g]);
    sx__free(gs);
    sx__free(r.w.ids);
    sx__free(r.w.rows);
    return st;
}

/* ---------------------------------------------------------------- jobs */

typedef struct ijob {
    char id[SX_IMPORT_JOB_ID];
    char *coll;
    sx_import_group *groups; /* paths owned */
    size_t n_groups;
    char *dynamic_field; /* owned, or NULL */
    sx_param *consts;    /* keys and values owned */
    size_t n_consts;
    char *route_field, *route_key, *route_prefix; /* owned, or NULL */
    uint32_t route_parts;
    /* guarded by the importer's mu */
    sx_import_state state;
    sx_import_progress prog;
    uint64_t *g_rows, *g_bytes, *g_total;
    char reason[512];
    sx_status status;
    int64_t create_ms, complete_ms;
    uint64_t rows;
} ijob;

typedef struct sx__importer {
    sx__mutex mu;
    pthread_cond_t cv; /* a job was queued or changed state, or stopping */
    pthread_t thr;
    bool has_thr;
    bool stopping; /* guarded by mu */
    ijob **jobs;   /* guarded by mu, in submit order */
    size_t n_jobs, cap_jobs;
    size_t next; /* guarded by mu: the first job not started */
    uint64_t seq;
    sx_db *db;
} sx__importer;

static int64_t wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void job_free(ijob *j)
{
    if (!j)
        return;
    for (size_t g = 0; g < j->n_groups; g++) {
        for (size_t i = 0; i < j->groups[g].n_paths; i++)
            sx__free((char *)j->groups[g].paths[i]);
        sx__free((void *)j->groups[g].paths);
    }
    sx__free(j->groups);
    for (size_t i = 0; i < j->n_consts; i++) {
        sx__free((char *)j->consts[i].key);
        sx__free((char *)j->consts[i].value);
    }
    sx__free(j->consts);
    sx__free(j->dynamic_field);
    sx__free(j->route_field);
    sx__free(j->route_key);
    sx__free(j->route_prefix);
    sx__free(j->g_rows);
    sx__free(j->g_bytes);
    sx__free(j->g_total);
    sx__free(j->coll);
    sx__free(j);
}

typedef struct jctx {
    sx__importer *im;
    ijob *j;
} jctx;

static bool job_progress(void *ctx, const sx_import_progress *p)
{
    jctx *x = ctx;
    sx__mutex_lock(&x->im->mu);
    x->j->prog = *p;
    if (p->group < x->j->n_groups) {
        x->j->g_rows[p->group] = p->group_rows_done;
        x->j->g_bytes[p->group] = p->group_bytes_done;
        x->j->g_total[p->group] = p->group_bytes_total;
    }
    bool go = !x->im->stopping;
    sx__mutex_unlock(&x->im->mu);
    return go;
}

static void run_job(sx__importer *im, ijob *j)
{
    sx_collection *c = NULL;
    sx_import_result res;
    memset(&res, 0, sizeof res);
    jctx x = { im, j };
    sx_import_opts o = { .progress = job_progress,
                         .progress_ctx = &x,
                         .dynamic_field = j->dynamic_field,
                         .consts = j->consts,
                         .n_consts = j->n_consts,
                         .route_field = j->route_field,
                         .route_key = j->route_key,
                         .route_prefix = j->route_prefix,
                         .route_parts = j->route_parts };
    sx_status st = sx_collection_open(im->db, j->coll, &c);
    if (st == SX_OK) {
        st = sx_import_run(c, j->groups, j->n_groups, &o, &res);
        /* as Milvus's import ends with its compaction stage: the job's segments (one per batch)
         * are merged with each other and with small neighbours up to the merge target, so a
         * DISKANN collection is not left with a graph per 256 MiB. Best effort: the rows are
         * committed and visible already; a failed merge only leaves more segments. */
        bool merged = false;
        if (st == SX_OK && res.segments > 1 && sx__merge_segments(c, &merged) != SX_OK)
            sx__err_clear();
        sx_collection_release(c);
    }
    sx__mutex_lock(&im->mu);
    j->complete_ms = wall_ms();
    j->status = st;
    if (st == SX_OK) {
        j->state = SX_IMPORT_COMPLETED;
        j->rows = res.rows;
    } else {
        j->state = SX_IMPORT_FAILED;
        (void)snprintf(j->reason, sizeof j->reason, "%s", sx_errmsg());
    }
    pthread_cond_broadcast(&im->cv);
    sx__mutex_unlock(&im->mu);
}

static void *import_thread(void *arg)
{
    sx__importer *im = arg;
    sx__mutex_lock(&im->mu);
    for (;;) {
        while (!im->stopping && im->next == im->n_jobs)
            sx__cond_wait(&im->cv, &im->mu);
        if (im->stopping)
            break;
        ijob *j = im->jobs[im->next++];
        j->state = SX_IMPORT_IMPORTING;
        pthread_cond_broadcast(&im->cv);
        sx__mutex_unlock(&im->mu);
        run_job(im, j);
        sx__mutex_lock(&im->mu);
    }
    /* jobs never started fail with the reason */
    for (size_t i = im->next; i < im->n_jobs; i++) {
        im->jobs[i]->state = SX_IMPORT_FAILED;
        im->jobs[i]->status = SX_ECANCELED;
        (void)snprintf(im->jobs[i]->reason, sizeof im->jobs[i]->reason,
                       "the database was closed before the job started");
    }
    sx__mutex_unlock(&im->mu);
    return NULL;
}

static sx_status importer_get(sx_db *db, bool create, sx__importer **out)
{
    sx_status st = SX_OK;
    sx__mutex_lock(&db->mu);
    sx__importer *im = db->importer;
    if (!im && create) {
        im = sx__calloc(1, sizeof *im);
        if (!im) {
            st = sx__err(SX_ENOMEM, "import");
        } else {
            (void)sx__mutex_init(&im->mu, SX__RANK_LEAF, "importer.mu");
            pthread_cond_init(&im->cv, NULL);
            im->db = db;
            im->seq = (uint64_t)wall_ms() << 10;
            if (pthread_create(&im->thr, NULL, import_thread, im) != 0) {
                sx__mutex_destroy(&im->mu);
                pthread_cond_destroy(&im->cv);
                sx__free(im);
                im = NULL;
                st = sx__err(SX_ENOMEM, "import: cannot start the import thread");
            } else {
                im->has_thr = true;
                db->importer = im;
            }
        }
    }
    sx__mutex_unlock(&db->mu);
    if (st == SX_OK && !im)
        st = SX_ENOTFOUND;
    if (st == SX_OK)
        *out = im;
    return st;
}

void sx__import_stop(sx_db *db)
{
    sx__mutex_lock(&db->mu);
    sx__importer *im = db->importer;
    db->importer = NULL;
    sx__mutex_unlock(&db->mu);
    if (!im)
        return;
    sx__mutex_lock(&im->mu);
    im->stopping = true;
    pthread_cond_broadcast(&im->cv);
    sx__mutex_unlock(&im->mu);
    if (im->has_thr)
        (void)pthread_join(im->thr, NULL);
    for (size_t i = 0; i < im->n_jobs; i++)
        job_free(im->jobs[i]);
    sx__free(im->jobs);
    sx__mutex_destroy(&im->mu);
    pthread_cond_destroy(&im->cv);
    sx__free(im);
}

static ijob *job_copy(const char *name,
                      const sx_import_group *groups,
                      size_t n_groups,
                      const sx_import_opts *opts)
{
    ijob *j = sx__calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->coll = sx__strdup(name);
    j->groups = sx__calloc(n_groups, sizeof *j->groups);
    j->g_rows = sx__calloc(n_groups, sizeof *j->g_rows);
    j->g_bytes = sx__calloc(n_groups, sizeof *j->g_bytes);
    j->g_total = sx__calloc(n_groups, sizeof *j->g_total);
    if (!j->coll || !j->groups || !j->g_rows || !j->g_bytes || !j->g_total) {
        job_free(j);
        return NULL;
    }
    j->n_groups = n_groups;
    if (opts && opts->dynamic_field) {
        j->dynamic_field = sx__strdup(opts->dynamic_field);
        if (!j->dynamic_field) {
            job_free(j);
            return NULL;
        }
    }
    if (opts && opts->route_field) {
        j->route_field = sx__strdup(opts->route_field);
        j->route_key = sx__strdup(opts->route_key ? opts->route_key : "");
        j->route_prefix = sx__strdup(opts->route_prefix ? opts->route_prefix : "");
        j->route_parts = opts->route_parts;
        if (!j->route_field || !j->route_key || !j->route_prefix) {
            job_free(j);
            return NULL;
        }
    }
    if (opts && opts->n_consts) {
        j->consts = sx__calloc(opts->n_consts, sizeof *j->consts);
        if (!j->consts) {
            job_free(j);
            return NULL;
        }
        for (size_t i = 0; i < opts->n_consts; i++) {
            j->consts[i].key = sx__strdup(opts->consts[i].key ? opts->consts[i].key : "");
            j->consts[i].value = sx__strdup(opts->consts[i].value ? opts->consts[i].value : "");
            j->n_consts = i + 1;
            if (!j->consts[i].key || !j->consts[i].value) {
                job_free(j);
                return NULL;
            }
        }
    }
    for (size_t g = 0; g < n_groups; g++) {
        const char **ps = sx__calloc(groups[g].n_paths + 1, sizeof *ps);
        if (!ps) {
            job_free(j);
            return NULL;
        }
        j->groups[g].paths = ps;
        for (size_t i = 0; i < groups[g].n_paths; i++) {
            ps[i] = sx__strdup(groups[g].paths[i]);
            if (!ps[i]) {
                job_free(j);
                return NULL;
            }
            j->groups[g].n_paths = i + 1;
        }
    }
    return j;
}

sx_status sx_import_submit(sx_db *db,
                           const char *name,
                           const sx_import_group *groups,
                           size_t n_groups,
                           const sx_import_opts *opts,
                           char job_id[SX_IMPORT_JOB_ID])
{
    if (!db || !name || !job_id)
        return sx__err(SX_EINVAL, "import: no database, collection or job id buffer");
    if (n_groups == 0 || !groups)
        return sx__err(SX_EINVAL, "import: no files");
    for (size_t g = 0; g < n_groups; g++) {
        if (groups[g].n_paths == 0 || !groups[g].paths)
            return sx__err(SX_EINVAL, "import: group %zu has no files", g);
        for (size_t i = 0; i < groups[g].n_paths; i++)
            if (!groups[g].paths[i] || !*groups[g].paths[i])
                return sx__err(SX_EINVAL, "import: group %zu has an empty file name", g);
    }
    sx_collection *c = NULL;
    sx_status st = sx_collection_open(db, name, &c);
    if (st != SX_OK)
        return st;
    sx_collection_release(c);
    sx__importer *im = NULL;
    st = importer_get(db, true, &im);
    if (st != SX_OK)
        return st;
    ijob *j = job_copy(name, groups, n_groups, opts);
    if (!j)
        return sx__err(SX_ENOMEM, "import");
    j->create_ms = wall_ms();
    sx__mutex_lock(&im->mu);
    if (im->n_jobs == im->cap_jobs) {
        size_t nc = im->cap_jobs ? im->cap_jobs * 2 : 16;
        ijob **nj = sx__realloc(im->jobs, nc * sizeof *nj);
        if (!nj) {
            sx__mutex_unlock(&im->mu);
            job_free(j);
            return sx__err(SX_ENOMEM, "import");
        }
        im->jobs = nj;
        im->cap_jobs = nc;
    }
    (void)snprintf(j->id, sizeof j->id, "%" PRIu64, ++im->seq);
    im->jobs[im->n_jobs++] = j;
    (void)snprintf(job_id, SX_IMPORT_JOB_ID, "%s", j->id);
    pthread_cond_broadcast(&im->cv);
    sx__mutex_unlock(&im->mu);
    return SX_OK;
}

/* Caller holds im->mu. */
static sx_status job_info(const ijob *j, sx_import_job_info *out)
{
    memset(out, 0, sizeof *out);
    (void)snprintf(out->job_id, sizeof out->job_id, "%s", j->id);
    (void)snprintf(out->collection, sizeof out->collection, "%s", j->coll);
    out->state = j->state;
    out->progress = j->prog;
    out->progress.n_groups = j->n_groups;
    if (j->state == SX_IMPORT_COMPLETED) {
        out->percent = 100;
    } else if (j->prog.bytes_total) {
        uint64_t p = j->prog.bytes_done * 100 / j->prog.bytes_total;
        out->percent = (uint32_t)(p > 99 ? 99 : p);
    }
    (void)snprintf(out->reason, sizeof out->reason, "%s", j->reason);
    out->status = j->status;
    out->create_time_ms = j->create_ms;
    out->complete_time_ms = j->complete_ms;
    out->rows_imported = j->rows;
    out->n_groups = j->n_groups;
    out->groups = sx__calloc(j->n_groups + 1, sizeof *out->groups);
    if (!out->groups)
        return sx__err(SX_ENOMEM, "import");
    for (size_t g = 0; g < j->n_groups; g++) {
        size_t len = 1;
        for (size_t i = 0; i < j->groups[g].n_paths; i++)
            len += strlen(j->groups[g].paths[i]) + 1;
        char *s = sx__malloc(len);
        if (!s) {
            sx_import_job_info_fini(out);
            return sx__err(SX_ENOMEM, "import");
        }
        size_t o = 0;
        for (size_t i = 0; i < j->groups[g].n_paths; i++)
            o += (size_t)snprintf(s + o, len - o, "%s%s", i ? "," : "", j->groups[g].paths[i]);
        out->groups[g].files = s;
        out->groups[g].rows = j->g_rows[g];
        out->groups[g].bytes = j->g_bytes[g];
        out->groups[g].total_bytes = j->g_total[g];
        if (j->state == SX_IMPORT_COMPLETED)
            out->groups[g].state = SX_IMPORT_COMPLETED;
        else if (j->state == SX_IMPORT_FAILED)
            out->groups[g].state = SX_IMPORT_FAILED;
        else if (j->state == SX_IMPORT_IMPORTING && g <= j->prog.group)
            out->groups[g].state = SX_IMPORT_IMPORTING;
        else
            out->groups[g].state = SX_IMPORT_PENDING;
    }
    return SX_OK;
}

sx_status sx_import_job_get(sx_db *db, const char *job_id, sx_import_job_info *out)
{
    if (!db || !job_id || !out)
        return sx__err(SX_EINVAL, "import: no database, job id or output");
    sx__importer *im = NULL;
    if (importer_get(db, false, &im) != SX_OK)
        return sx__err(SX_ENOTFOUND, "import job %s not found", job_id);
    sx_status st = sx__err(SX_ENOTFOUND, "import job %s not found", job_id);
    sx__mutex_lock(&im->mu);
    for (size_t i = 0; i < im->n_jobs; i++)
        if (strcmp(im->jobs[i]->id, job_id) == 0) {
            st = job_info(im->jobs[i], out);
            break;
        }
    sx__mutex_unlock(&im->mu);
    return st;
}

sx_status sx_import_job_list(sx_db *db, const char *name, sx_import_job_info **infos, size_t *n)
{
    if (!db || !infos || !n)
        return sx__err(SX_EINVAL, "import: no database or output");
    *infos = NULL;
    *n = 0;
    sx__importer *im = NULL;
    if (importer_get(db, false, &im) != SX_OK)
        return SX_OK;
    sx_status st = SX_OK;
    sx__mutex_lock(&im->mu);
    sx_import_job_info *out = sx__calloc(im->n_jobs + 1, sizeof *out);
    size_t k = 0;
    if (!out)
        st = sx__err(SX_ENOMEM, "import");
    for (size_t i = 0; st == SX_OK && i < im->n_jobs; i++) {
        if (name && *name && strcmp(name, im->jobs[i]->coll) != 0)
            continue;
        st = job_info(im->jobs[i], &out[k]);
        if (st == SX_OK)
            k++;
    }
    sx__mutex_unlock(&im->mu);
    if (st != SX_OK) {
        sx_import_jobs_free(out, k);
        return st;
    }
    *infos = out;
    *n = k;
    return SX_OK;
}

void sx_import_job_info_fini(sx_import_job_info *info)
{
    if (!info)
        return;
    for (size_t g = 0; info->groups && g < info->n_groups; g++)
        sx__free(info->groups[g].files);
    sx__free(info->groups);
    info->groups = NULL;
}

void sx_import_jobs_free(sx_import_job_info *infos, size_t n)
{
    for (size_t i = 0; infos && i < n; i++)
        sx_import_job_info_fini(&infos[i]);
    sx__free(infos);
}

sx_status sx_import_job_wait(sx_db *db, const char *job_id, int64_t timeout_ms)
{
    sx__importer *im = NULL;
    if (!db || !job_id || importer_get(db, false, &im) != SX_OK)
        return sx__err(SX_ENOTFOUND, "import job %s not found", job_id ? job_id : "(null)");
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    if (timeout_ms >= 0) {
        dl.tv_sec += timeout_ms / 1000;
        dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
    }
    sx_status st = SX_OK;
    sx__mutex_lock(&im->mu);
    for (;;) {
        ijob *j = NULL;
        for (size_t i = 0; i < im->n_jobs; i++)
            if (strcmp(im->jobs[i]->id, job_id) == 0)
                j = im->jobs[i];
        if (!j) {
            st = sx__err(SX_ENOTFOUND, "import job %s not found", job_id);
            break;
        }
        if (j->state == SX_IMPORT_COMPLETED || j->state == SX_IMPORT_FAILED)
            break;
        if (im->stopping) {
            st = sx__err(SX_ECANCELED, "the database is closing");
            break;
        }
        if (timeout_ms < 0) {
            sx__cond_wait(&im->cv, &im->mu);
        } else if (sx__cond_timedwait(&im->cv, &im->mu, &dl) != 0) {
            st = sx__err(SX_ETIMEDOUT, "import job %s not finished after %lld ms", job_id,
                         (long long)timeout_ms);
            break;
        }
    }
    sx__mutex_unlock(&im->mu);
    return st;
}

const char *sx_import_state_str(sx_import_state st)
{
    switch (st) {
    case SX_IMPORT_PENDING:
        return "Pending";
    case SX_IMPORT_IMPORTING:
        return "Importing";
    case SX_IMPORT_COMPLETED:
        return "Completed";
    case SX_IMPORT_FAILED:
        return "Failed";
    }
    return "Unknown";
}
