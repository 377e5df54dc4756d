/*
 * build.c: background index builds and the index API.
 *
 * One builder thread per database takes jobs (collection, sealed segment, vector field) from a FIFO
 * queue; each build itself uses build_threads workers. A finished index is saved to seg-<id>.idx
 * (seg-<id>.v<v>.idx for the collection's further vector fields; atomic replace) and published on
 * the segment under idx_mu; searches pick it up in their next view. Until then the segment is
 * searched exactly, so results are always correct. A failed build sets the vector field's
 * fail_reason (state FAILED). sx_index_wait sleeps on index_cv.
 * Each vector field has its own index spec (sx__vfield), built, described and dropped on its own;
 * the functions without a field act on the first vector field.
 * On open, an index file whose type/params/rows match the spec is loaded instead of rebuilt; a
 * corrupt or stale one is rebuilt.
 * With sx_db_options.index_builder (cluster mode's index workers), the builder thread hands each
 * segment's build to one of the database's slot threads instead, which offers it to the builder
 * and publishes the file it gets back exactly as an open would load it; a build the builder did
 * not do comes back to the builder thread's queue (see "builds elsewhere" below). Locks: db.mu
 * guards both queues, `building` and the slots' `c`; idx_mu (below db.mu) is never taken under
 * it, so pending flags are cleared outside db.mu but before a thread lets go of the collection
 * (sx__build_cancel_coll waits on `building` and the slots).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "index/diskann/diskann.h"
#include "platform/membudget.h"
#include "storage/segfile.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/err.h"

static void notify(sx_collection *c)
{
    sx__mutex_lock(&c->idx_wait_mu);
    pthread_cond_broadcast(&c->index_cv);
    sx__mutex_unlock(&c->idx_wait_mu);
}

/* Appends j to the builder's FIFO and wakes it. Caller holds db->mu. */
static void queue_push_locked(sx_db *db, sx__job *j)
{
    if (db->jobs_tail)
        db->jobs_tail->next = j;
    else
        db->jobs_head = j;
    db->jobs_tail = j;
    pthread_cond_signal(&db->job_cv);
}

void sx__build_enqueue(sx_db *db, sx_collection *c, sx__segment *s, size_t v)
{
    if (db->opts.read_only)
        return;
    sx__job *j = sx__calloc(1, sizeof *j);
    if (!j) {
        sx__rwlock_wrlock(&c->seg_lock);
        sx__vfield *vf = &c->vfs[v];
        (void)snprintf(vf->fail_reason, sizeof vf->fail_reason, "out of memory queueing a build");
        vf->fail_status = SX_ENOMEM;
        sx__rwlock_unlock(&c->seg_lock);
        return;
    }
    atomic_fetch_add(&c->refs, 1);
    sx__seg_ref(s);
    j->c = c;
    j->s = s;
    j->v = v;
    sx__mutex_lock(&s->idx_mu);
    s->build_pending[v] = true;
    sx__mutex_unlock(&s->idx_mu);
    sx__mutex_lock(&db->mu);
    queue_push_locked(db, j);
    sx__mutex_unlock(&db->mu);
}

/* An index loaded from its files with an optional RAM cache its parameters left empty (DISKANN's
 * node cache) gets one from a limited memory budget: at most a tenth of the segment's raw vector
 * bytes (Milvus's search_cache_budget_gb_ratio default), a quarter of what is free once the index
 * itself is counted, and all caches together (SX__MEM_CACHE: these and the block cache) at most a
 * sixteenth of the limit, so that a collection of many segments does not hand the room builds,
 * growing rows and searches need to caches. Not right after a build (more builds may follow and
 * need the room: the next open sizes it), none without a limit (the parameter decides) or when
 * under 64 KiB would be left for it. Charged as SX__MEM_CACHE (r->cache_charged); best effort: a
 * failed warm-up leaves no cache. */
static void size_cache(const sx_collection *c, sx__segment *s, size_t v, sx__idxref *r)
{
    sx__membudget *b = s->budget;
    uint64_t limit = sx__mem_limit(b);
    if (!r->ops->set_cache_bytes || limit == 0)
        return;
    uint64_t avail = sx__mem_avail(b);
    uint64_t own = r->ops->memory_bytes ? r->ops->memory_bytes(r->idx) : 0;
    avail = avail > own ? avail - own : 0; /* the index is charged only when published */
    uint64_t caches = sx__mem_used_kind(b, SX__MEM_CACHE);
    uint64_t share = limit / 16 > caches ? limit / 16 - caches : 0;
    uint64_t raw = (uint64_t)atomic_load(&s->n_rows) * c->vfs[v].row_bytes;
    uint64_t want = avail / 4 < raw / 10 ? avail / 4 : raw / 10;
    want = want < share ? want : share;
    if (want < (64u << 10))
        return;
    if (r->ops->set_cache_bytes(r->idx, want) != SX_OK) {
        sx__err_clear();
        return;
    }
    uint64_t now = r->ops->memory_bytes ? r->ops->memory_bytes(r->idx) : own;
    r->cache_charged = now > own ? now - own : 0;
    sx__mem_force(b, SX__MEM_CACHE, r->cache_charged);
}

static void publish(sx__segment *s, size_t v, sx__idxref *r)
{
    /* the in-RAM part is held for as long as the index serves: forced, not refusable */
    r->budget = s->budget;
    r->charged = r->ops->memory_bytes ? r->ops->memory_bytes(r->idx) : 0;
    r->charged = r->charged > r->cache_charged ? r->charged - r->cache_charged : 0;
    sx__mem_force(r->budget, SX__MEM_INDEX, r->charged);
    sx__mutex_lock(&s->idx_mu);
    sx__idxref *old = s->index[v];
    s->index[v] = r;
    s->build_pending[v] = false;
    sx__mutex_unlock(&s->idx_mu);
    sx__idxref_unref(old);
}

/* A file-backed index reads its own copy of the vectors: drop the segment's mapped vectors from
 * this process's resident set (they come back on demand, e.g. for an exact filtered scan). */
static void
release_vectors(const sx_collection *c, sx__segment *s, size_t v, const sx__index_ops *ops)
{
    size_t f = c->vfs[v].field;
    if (ops->reads_own_vectors && s->map && (s->mapped_mask >> f & 1))
        sx__fs_unneeded(s->chunks[f][0], atomic_load(&s->n_rows) * c->vfs[v].row_bytes);
}

static void clear_pending(sx__segment *s, size_t v)
{
    sx__mutex_lock(&s->idx_mu);
    s->build_pending[v] = false;
    sx__mutex_unlock(&s->idx_mu);
}

/* A private copy of vector field v's index spec, taken under seg_lock's read side: the spec may
 * be dropped or replaced (sx_index_drop frees its strings under the write side) during a build.
 * ops NULL: no index. ok false: out of memory. Free with spec_fini. */
typedef struct spec {
    const sx__index_ops *ops;
    sx_metric metric;
    sx_param params[64];
    char *keys[64], *vals[64];
    size_t np;
    char type[64], pstr[256];
    bool ok;
} spec;

static void spec_take(sx_collection *c, size_t v, spec *sp)
{
    sx__vfield *vf = &c->vfs[v];
    memset(sp, 0, sizeof *sp);
    sp->ok = true;
    sx__rwlock_rdlock(&c->seg_lock);
    sp->ops = vf->iops;
    sp->metric = vf->metric;
    if (sp->ops) {
        sp->np = vf->n_index_params < 64 ? vf->n_index_params : 64;
        for (size_t i = 0; i < sp->np; i++) {
            sp->keys[i] = sx__strdup(vf->index_params[i].key);
            sp->vals[i] = sx__strdup(vf->index_params[i].value);
            sp->ok = sp->ok && sp->keys[i] && sp->vals[i];
            sp->params[i].key = sp->keys[i];
            sp->params[i].value = sp->vals[i];
        }
        (void)snprintf(sp->type, sizeof sp->type, "%s", sp->ops->name);
        (void)snprintf(sp->pstr, sizeof sp->pstr, "%s", vf->index_params_str);
    }
    sx__rwlock_unlock(&c->seg_lock);
}

static void spec_fini(spec *sp)
{
    for (size_t i = 0; i < sp->np; i++) {
        sx__free(sp->keys[i]);
        sx__free(sp->vals[i]);
    }
}

/* Whether v's spec is still the one sp copied (a build is published only then). */
static bool spec_same(sx_collection *c, size_t v, const spec *sp)
{
    sx__rwlock_rdlock(&c->seg_lock);
    bool same = c->vfs[v].iops == sp->ops && strcmp(c->vfs[v].index_params_str, sp->pstr) == 0;
    sx__rwlock_unlock(&c->seg_lock);
    return same;
}

/* Serializes a built index into its index file at path (atomic replace). */
static sx_status write_index_file(const sx__index_ops *ops,
                                  void *idx,
                                  const char *path,
                                  const char *type,
                                  const char *pstr,
                                  size_t n,
                                  uint32_t dim)
{
    /* serialize_parts, where the index has it, writes its bulk from where it lies (no second
     * copy of DISKANN's PQ codes at the end of a build under a budget) */
    sx__wbuf w, tail;
    sx__wbuf_init(&w);
    sx__wbuf_init(&tail);
    sx__iov parts[3] = { { NULL, 0 }, { NULL, 0 }, { NULL, 0 } };
    sx_status st = ops->serialize_parts
                       ? ops->serialize_parts(idx, &w, &parts[1].p, &parts[1].n, &tail)
                       : ops->serialize(idx, &w);
    if (st == SX_OK && (!sx__wbuf_ok(&w) || !sx__wbuf_ok(&tail)))
        st = sx__err(SX_ENOMEM, "serializing a %s index", type);
    parts[0] = (sx__iov){ w.data, w.len };
    parts[2] = (sx__iov){ tail.data, tail.len };
    if (st == SX_OK)
        st = sx__idxfile_write_parts(path, type, pstr, n, dim, parts, 3);
    sx__wbuf_fini(&w);
    sx__wbuf_fini(&tail);
    return st;
}

static void run_job(sx_db *db, sx__job *j)
{
    sx_collection *c = j->c;
    sx__segment *s = j->s;
    size_t v = j->v;
    sx__vfield *vf = &c->vfs[v];
    const size_t dim = vf->dim, fv = vf->field;
    spec sp;
    spec_take(c, v, &sp);
    const sx__index_ops *ops = sp.ops;
    const sx_metric metric = sp.metric;
    if (!ops || atomic_load(&c->dropped)) {
        spec_fini(&sp);
        clear_pending(s, v);
        return;
    }
    sx__idxref *r = sx__calloc(1, sizeof *r);
    sx_status st = sp.ok && r ? SX_OK : sx__err(SX_ENOMEM, "index build");
    size_t n = atomic_load(&s->n_rows);
    char prefix[4096];
    sx__idx_prefix(c, prefix, sizeof prefix, s->id, v);
    atomic_store(&db->build_progress, 0);
    /* The build's limit: index_build_memory_limit, and within the memory budget what is free
     * when the build starts (a partitioning build such as DISKANN's plans within it; the others
     * are refused when their estimate is over it). The build is charged as SX__MEM_BUILD for its
     * duration: its estimate, capped by the limit (the limit itself without an estimate). */
    uint64_t blimit = db->opts.index_build_memory_limit;
    const char *bsrc = "index_build_memory_limit";
    uint64_t avail = sx__mem_avail(db->budget);
    if (avail != UINT64_MAX && (blimit == 0 || avail < blimit)) {
        blimit = avail ? avail : 1;
        bsrc = "the memory budget's free part";
    }
    uint64_t need = ops->estimate_build_bytes
                        ? ops->estimate_build_bytes(sp.params, sp.np, n, (uint32_t)dim)
                        : 0;
    uint64_t bcharge = need && (blimit == 0 || need < blimit) ? need : blimit;
    sx__build_ctx ctx = { db->opts.build_threads ? db->opts.build_threads
                                                 : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN),
                          &db->build_progress,
                          &db->cancel_build,
                          blimit,
                          prefix,
                          s->id };
    if (st == SX_OK && blimit && need && !ops->reads_own_vectors && need > blimit)
        st = sx__err(SX_ENOMEM, "building %s on %zu rows needs about %llu bytes, over %s=%llu",
                     ops->name, n, (unsigned long long)need, bsrc, (unsigned long long)blimit);
    if (st == SX_OK) {
        sx__mem_force(db->budget, SX__MEM_BUILD, bcharge);
        /* graph builds touch rows in a random order: on a mapped file, no read-around (under a
         * small budget the kernel's 128 KiB per fault re-read a 250 MB segment ~1000 times) */
        bool advise = s->map && (s->mapped_mask >> fv & 1);
        size_t vbytes = n * vf->row_bytes;
        if (advise)
            sx__fs_advise_random(s->chunks[fv][0], vbytes, true);
        if (vf->vt == SX__VT_F32)
            st = ops->build(sp.params, sp.np, s->chunks[fv][0], n, (uint32_t)dim, metric, &ctx,
                            &r->idx);
        else
            st = ops->build_typed(sp.params, sp.np, s->chunks[fv][0], vf->vt, n, (uint32_t)dim,
                                  metric, &ctx, &r->idx);
        if (advise)
            sx__fs_advise_random(s->chunks[fv][0], vbytes, false);
        sx__mem_give(db->budget, SX__MEM_BUILD, bcharge);
    }
    if (st == SX_OK) {
        r->ops = ops;
        atomic_init(&r->refs, 1);
        if (!atomic_load(&c->dropped)) {
            char path[4096];
            sx__coll_path(c, path, sizeof path, sx__idx_ext(v, false), s->id);
            /* best effort: a missing index file only means a rebuild after reopen. With an
             * object store the write is bracketed so a sync never reads it half-replaced. */
            sx__store_index_begin(c);
            sx__ignore(write_index_file(ops, r->idx, path, sp.type, sp.pstr, n, (uint32_t)dim));
            sx__store_index_end(c, s->id, v);
        }
        /* publish only if the spec is still the one we built for */
        if (spec_same(c, v, &sp)) {
            publish(s, v, r); /* no cache from the budget here: the next builds need that room */
            release_vectors(c, s, v, ops);
            r = NULL;
            sx__store_after_build(c, &db->cancel_build); /* upload the index files */
        } else {
            clear_pending(s, v);
        }
        if (r) {
            ops->free(r->idx);
            sx__free(r);
        }
    } else {
        sx__free(r);
        clear_pending(s, v);
        if (st != SX_ECANCELED) {
            sx__rwlock_wrlock(&c->seg_lock);
            (void)snprintf(vf->fail_reason, sizeof vf->fail_reason, "segment %" PRIu64 ": %s (%s)",
                           s->id, sx_errmsg(), sx_status_str(st));
            vf->fail_status = st;
            sx__rwlock_unlock(&c->seg_lock);
        }
    }
    spec_fini(&sp);
}

void sx__merge_enqueue(sx_db *db, sx_collection *c)
{
    if (db->opts.read_only || atomic_exchange(&c->merge_queued, true))
        return;
    sx__job *j = sx__calloc(1, sizeof *j);
    if (!j) { /* best effort: the next flush asks again */
        atomic_store(&c->merge_queued, false);
        return;
    }
    sx__mutex_lock(&db->mu);
    if (db->stopping || !db->has_builder) { /* closing: nobody would run it */
        sx__mutex_unlock(&db->mu);
        atomic_store(&c->merge_queued, false);
        sx__free(j);
        return;
    }
    atomic_fetch_add(&c->refs, 1);
    j->c = c;
    queue_push_locked(db, j);
    sx__mutex_unlock(&db->mu);
}

/* Takes the first job off a non-empty queue. Caller holds db->mu. */
static sx__job *queue_pop(sx__job **head, sx__job **tail)
{
    sx__job *j = *head;
    *head = j->next;
    if (!*head)
        *tail = NULL;
    j->next = NULL;
    return j;
}

/* Ends a segment job whose pending flag is already cleared: wakes the waiters, drops the refs. */
static void job_done(sx__job *j)
{
    notify(j->c);
    sx__seg_unref(j->s);
    sx__coll_unref(j->c);
    sx__free(j);
}

/* Frees a job taken off the queue without running it. */
static void job_drop(sx__job *j)
{
    if (j->s) {
        clear_pending(j->s, j->v);
        sx__seg_unref(j->s);
    } else {
        atomic_store(&j->c->merge_queued, false);
    }
    sx__coll_unref(j->c);
    sx__free(j);
}

/* ---------------------------------------------------------------- builds elsewhere
 * (sx_db_options.index_builder). The builder thread moves each job it may hand out (an index
 * kept whole in its index file, a store to find the segment in) to rjobs; a slot's thread
 * offers it to the builder and, once the file is back, renames it into place, loads it as an open
 * would (load_index_file: the spec, rows and dim are checked) and syncs it to the store. A job
 * the builder did not build goes back to the builder thread's queue marked local. */

static bool load_index_file(sx_collection *c,
                            sx__segment *s,
                            size_t v,
                            const sx__index_ops *ops,
                            sx_metric metric,
                            const char *pstr,
                            const char *path);

static bool remote_eligible(sx_db *db, const sx__job *j)
{
    if (!db->n_rslots || j->local || !j->s || !j->c->cs)
        return false;
    sx__rwlock_rdlock(&j->c->seg_lock);
    const sx__index_ops *ops = j->c->vfs[j->v].iops;
    /* files beside the index file: only DISKANN's one (<prefix>.diskann) is known here */
    bool ok = ops && ((!ops->load_files && !ops->remove_files) || ops == &sx__diskann_index_ops);
    sx__rwlock_unlock(&j->c->seg_lock);
    return ok;
}

static int job_cancelled(const sx_index_build_job *job)
{
    const sx__rslot *sl = job->engine_private;
    return atomic_load(&sl->cancel) || atomic_load(&sl->j->c->dropped);
}

/* Offers j to the builder. true: its index is published. */
static bool run_remote(sx_db *db, sx__rslot *sl, sx__job *j)
{
    sx_collection *c = j->c;
    sx__segment *s = j->s;
    const size_t v = j->v;
    sx__vfield *vf = &c->vfs[v];
    spec sp;
    spec_take(c, v, &sp);
    const sx__index_ops *ops = sp.ops;
    const sx_metric metric = sp.metric;
    bool done = false;
    char key[1024], tmp[4096], path[4096], ext[32], prefix[4096], tprefix[4200];
    char side[4300], tside[4300];
    (void)snprintf(ext, sizeof ext, "%s.job", sx__idx_ext(v, false));
    sx__coll_path(c, tmp, sizeof tmp, ext, s->id);
    sx__coll_path(c, path, sizeof path, sx__idx_ext(v, false), s->id);
    sx__idx_prefix(c, prefix, sizeof prefix, s->id, v);
    (void)snprintf(tprefix, sizeof tprefix, "%s.job", prefix);
    const bool has_side = ops == &sx__diskann_index_ops;
    (void)snprintf(side, sizeof side, "%s%s", prefix, SX__DISKANN_EXT);
    (void)snprintf(tside, sizeof tside, "%s%s", tprefix, SX__DISKANN_EXT);
    if (!sp.ok || !ops || sx__store_segment_key(c, s->id, key, sizeof key, &sl->cancel) != SX_OK)
        goto out;
    sx_index_build_job job = { db->opts.storage_url,
                               c->name,
                               s->id,
                               key,
                               c->names[vf->field],
                               atomic_load(&s->n_rows),
                               (uint32_t)vf->dim,
                               metric,
                               ops->name,
                               sp.params,
                               sp.np,
                               has_side ? tprefix : NULL,
                               job_cancelled,
                               sl };
    const sx_index_builder *b = db->opts.index_builder;
    sx_status st = b->build(b->ctx, &job, tmp);
    /* a file that is not for this spec, these rows and this dimension never takes the index
     * file's place (nor reaches the store): checked before the rename, loaded after it */
    if (st == SX_OK) {
        void *payload = NULL;
        size_t plen = 0;
        st = sx__idxfile_read(tmp, ops->name, sp.pstr, job.rows, job.dim, &payload, &plen);
        sx__free(payload);
    }
    /* publish only if the spec is still the one it was built for */
    if (st != SX_OK || !spec_same(c, v, &sp) || atomic_load(&sl->cancel) ||
        atomic_load(&c->dropped)) {
        sx__err_clear();
        sx__ignore(sx__fs_unlink(tmp));
        sx__ignore(sx__fs_unlink(tside));
        goto out;
    }
    sx__store_index_begin(c);
    st = has_side ? sx__fs_rename(tside, side) : SX_OK;
    if (st == SX_OK)
        st = sx__fs_rename(tmp, path);
    sx__store_index_end(c, s->id, v);
    if (st != SX_OK) {
        sx__err_clear();
        sx__ignore(sx__fs_unlink(tmp));
        sx__ignore(sx__fs_unlink(tside));
        goto out;
    }
    /* a file that does not match the spec (rows, dim, type, parameters) or does not load is not
     * published: the local build replaces it */
    done = load_index_file(c, s, v, ops, metric, sp.pstr, path);
    if (done) {
        atomic_fetch_add(&db->remote_builds, 1);
        sx__store_after_build(c, &sl->cancel); /* upload the index file through the fence */
    }
out:
    spec_fini(&sp);
    return done;
}

static void *rslot_main(void *arg)
{
    sx__rslot *sl = arg;
    sx_db *db = sl->db;
    sx_io_phase_set(SX_IO_PHASE_BUILD);
    sx__mutex_lock(&db->mu);
    for (;;) {
        while (!db->rjobs_head && !db->stopping)
            sx__cond_wait(&db->rjob_cv, &db->mu);
        if (db->stopping)
            break;
        sx__job *j = queue_pop(&db->rjobs_head, &db->rjobs_tail);
        sl->c = j->c;
        sl->j = j;
        atomic_store(&sl->cancel, false);
        sx__mutex_unlock(&db->mu);
        bool done = run_remote(db, sl, j);
        sx__mutex_lock(&db->mu);
        bool wanted = !db->stopping && !atomic_load(&sl->cancel) && !atomic_load(&j->c->dropped);
        if (!done && wanted && db->has_builder) {
            /* nobody built it elsewhere: the builder thread does (still pending, now queued,
             * so a cancel finds it there) */
            sl->c = NULL;
            sl->j = NULL;
            j->local = true;
            queue_push_locked(db, j);
            continue;
        }
        sx__mutex_unlock(&db->mu);
        /* pending is cleared (by publish, or here) before the slot lets go of the collection:
         * an index drop's cancel waits for the slot and then re-queues segments not pending */
        if (!done)
            clear_pending(j->s, j->v);
        sx__mutex_lock(&db->mu);
        sl->c = NULL;
        sl->j = NULL;
        sx__mutex_unlock(&db->mu);
        job_done(j);
        sx__mutex_lock(&db->mu);
    }
    sx__mutex_unlock(&db->mu);
    return NULL;
}

static void *builder_main(void *arg)
{
    sx_db *db = arg;
    /* everything this thread reads and writes (segments in, index files out) is BUILD I/O */
    sx_io_phase_set(SX_IO_PHASE_BUILD);
    sx__mutex_lock(&db->mu);
    for (;;) {
        while (!db->jobs_head && !db->stopping)
            sx__cond_wait(&db->job_cv, &db->mu);
        if (db->stopping)
            break;
        sx__job *j = queue_pop(&db->jobs_head, &db->jobs_tail);
        if (!j->s) {
            /* a background merge is not db->building: sx__build_cancel_coll, which callers run
             * holding flush_mu, must not wait for it (it waits for flush_mu between runs) */
            sx__mutex_unlock(&db->mu);
            sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_INSERT);
            sx__merge_background(j->c);
            sx_io_phase_set(prev);
            sx__coll_unref(j->c);
            sx__free(j);
            sx__mutex_lock(&db->mu);
            continue;
        }
        /* building is set while the job is decided (seg_lock is taken for it, outside db.mu), so
         * a cancel of its collection meanwhile is seen (cancel_build) and waited for */
        db->building = j->c;
        db->building_v = j->v;
        sx__mutex_unlock(&db->mu);
        if (remote_eligible(db, j)) {
            sx__mutex_lock(&db->mu);
            if (db->stopping || atomic_load(&db->cancel_build)) {
                /* cancelled meanwhile: pending cleared while building still names it (the
                 * cancel waits for that), then let go */
                sx__mutex_unlock(&db->mu);
                clear_pending(j->s, j->v);
                sx__mutex_lock(&db->mu);
                db->building = NULL;
                if (!db->stopping)
                    atomic_store(&db->cancel_build, false);
                sx__mutex_unlock(&db->mu);
                job_done(j);
                sx__mutex_lock(&db->mu);
                continue;
            }
            db->building = NULL;
            j->next = NULL;
            if (db->rjobs_tail)
                db->rjobs_tail->next = j;
            else
                db->rjobs_head = j;
            db->rjobs_tail = j;
            pthread_cond_signal(&db->rjob_cv);
            continue;
        }
        run_job(db, j);
        sx__mutex_lock(&db->mu);
        db->building = NULL;
        if (!db->stopping)
            atomic_store(&db->cancel_build, false); /* a drop's cancel ends with its job */
        sx__mutex_unlock(&db->mu);
        job_done(j);
        sx__mutex_lock(&db->mu);
    }
    /* drain: detach the queue under db.mu, then clear each job outside it (idx_mu ranks
     * below db.mu) */
    sx__job *rest = db->jobs_head;
    db->jobs_head = NULL;
    db->jobs_tail = NULL;
    sx__mutex_unlock(&db->mu);
    while (rest) {
        sx__job *j = rest;
        rest = j->next;
        job_drop(j);
    }
    return NULL;
}

sx_status sx__builder_start(sx_db *db)
{
    if (db->opts.read_only)
        return SX_OK;
    if (pthread_create(&db->builder, NULL, builder_main, db) != 0)
        return sx__err(SX_ENOMEM, "cannot start the index builder thread");
    db->has_builder = true;
    const sx_index_builder *b = db->opts.index_builder;
    if (!b || !b->build || !db->opts.storage_url || !*db->opts.storage_url)
        return SX_OK;
    size_t n = b->slots ? b->slots : 4;
    db->rslots = sx__calloc(n, sizeof *db->rslots);
    if (!db->rslots) /* best effort: every build runs here */
        return SX_OK;
    for (size_t i = 0; i < n; i++) {
        db->rslots[i].db = db;
        atomic_init(&db->rslots[i].cancel, false);
        if (pthread_create(&db->rslots[i].thr, NULL, rslot_main, &db->rslots[i]) != 0)
            break;
        db->n_rslots = i + 1;
    }
    if (!db->n_rslots) {
        sx__free(db->rslots);
        db->rslots = NULL;
    }
    return SX_OK;
}

void sx__builder_stop(sx_db *db)
{
    if (!db->has_builder)
        return;
    sx__mutex_lock(&db->mu);
    db->stopping = true;
    atomic_store(&db->cancel_build, true);
    for (size_t i = 0; i < db->n_rslots; i++)
        atomic_store(&db->rslots[i].cancel, true);
    pthread_cond_broadcast(&db->job_cv);
    pthread_cond_broadcast(&db->rjob_cv);
    sx__mutex_unlock(&db->mu);
    for (size_t i = 0; i < db->n_rslots; i++)
        pthread_join(db->rslots[i].thr, NULL);
    pthread_join(db->builder, NULL);
    /* jobs still waiting for a slot */
    sx__mutex_lock(&db->mu);
    sx__job *rest = db->rjobs_head;
    db->rjobs_head = NULL;
    db->rjobs_tail = NULL;
    sx__mutex_unlock(&db->mu);
    while (rest) {
        sx__job *j = rest;
        rest = j->next;
        job_drop(j);
    }
    sx__free(db->rslots);
    db->rslots = NULL;
    db->n_rslots = 0;
    db->has_builder = false;
}

void sx__idx_prefix(const sx_collection *c, char *buf, size_t n, uint64_t id, size_t v)
{
    if (v == 0)
        (void)snprintf(buf, n, "%s/seg-%020" PRIu64, c->dir, id);
    else
        (void)snprintf(buf, n, "%s/seg-%020" PRIu64 ".v%zu", c->dir, id, v);
}

const char *sx__idx_ext(size_t v, bool remote)
{
    static const char *const ext[SX_MAX_VECTOR_FIELDS][2] = {
        { "idx", "idx.remote" },
        { "v1.idx", "v1.idx.remote" },
        { "v2.idx", "v2.idx.remote" },
        { "v3.idx", "v3.idx.remote" },
    };
    SX_ASSERT(v < SX_MAX_VECTOR_FIELDS);
    return ext[v][remote ? 1 : 0];
}

sx_status sx__vfield_find(const sx_collection *c, const char *field, size_t *v)
{
    if (c->n_vf == 0)
        return sx__err(SX_EINVAL, "collection %s has no FLOAT_VECTOR field", c->name);
    if (!field || !*field) {
        *v = 0;
        return SX_OK;
    }
    for (size_t i = 0; i < c->n_vf; i++)
        if (strcmp(c->names[c->vfs[i].field], field) == 0) {
            *v = i;
            return SX_OK;
        }
    for (size_t f = 0; f < c->n_fields; f++)
        if (strcmp(c->names[f], field) == 0)
            return sx__err(SX_EINVAL, "field %s of collection %s is not a vector field", field,
                           c->name);
    return sx__err(SX_EINVAL, "collection %s has no field named %s", c->name, field);
}

/* Takes c's jobs out of queue *head (tail *tail) onto *drop. Caller holds db->mu. */
static void take_coll_jobs(sx__job **head, sx__job **tail, sx_collection *c, sx__job **drop)
{
    sx__job **pp = head;
    *tail = NULL;
    while (*pp) {
        sx__job *j = *pp;
        if (j->c == c) {
            *pp = j->next;
            j->next = *drop;
            *drop = j;
        } else {
            *tail = j;
            pp = &j->next;
        }
    }
}

static bool coll_busy_locked(const sx_db *db, const sx_collection *c)
{
    if (db->building == c)
        return true;
    for (size_t i = 0; i < db->n_rslots; i++)
        if (db->rslots[i].c == c)
            return true;
    return false;
}

void sx__build_cancel_coll(sx_db *db, sx_collection *c)
{
    sx__job *drop = NULL;
    sx__mutex_lock(&db->mu);
    take_coll_jobs(&db->jobs_head, &db->jobs_tail, c, &drop);
    take_coll_jobs(&db->rjobs_head, &db->rjobs_tail, c, &drop);
    if (db->building == c)
        atomic_store(&db->cancel_build, true);
    for (size_t i = 0; i < db->n_rslots; i++)
        if (db->rslots[i].c == c)
            atomic_store(&db->rslots[i].cancel, true);
    sx__mutex_unlock(&db->mu);
    while (drop) {
        sx__job *j = drop;
        drop = j->next;
        job_drop(j);
    }
    /* wait for a running build of c to notice */
    for (;;) {
        sx__mutex_lock(&db->mu);
        bool busy = coll_busy_locked(db, c);
        sx__mutex_unlock(&db->mu);
        if (!busy)
            break;
        struct timespec ts = { 0, 2000000L };
        nanosleep(&ts, NULL);
    }
}

/* Loads segment s's index file of field v (path) if it matches the spec (ops, pstr) and
 * publishes it. false: absent, stale or unreadable (nothing changed). */
static bool load_index_file(sx_collection *c,
                            sx__segment *s,
                            size_t v,
                            const sx__index_ops *ops,
                            sx_metric metric,
                            const char *pstr,
                            const char *path)
{
    sx__vfield *vf = &c->vfs[v];
    const size_t fv = vf->field;
    const uint32_t dim = vf->dim;
    void *payload = NULL;
    size_t len = 0;
    size_t n = atomic_load(&s->n_rows);
    char prefix[4096];
    sx__idx_prefix(c, prefix, sizeof prefix, s->id, v);
    const char *slash = strrchr(path, '/');
    if (!sx__fs_exists(path) ||
        sx__idxfile_read(path, ops->name, pstr, n, dim, &payload, &len) != SX_OK) {
        sx__free(payload);
        return false;
    }
    sx__store_touch(c, slash ? slash + 1 : path);
    sx__idxref *r = sx__calloc(1, sizeof *r);
    sx_status lst = SX_ENOMEM;
    if (r && ops->load_files) {
        /* payload is handed over: DISKANN keeps its codes where they were read */
        lst = sx__store_load_files(c, v, ops, payload, len, prefix, s->chunks[fv][0], n, &r->idx);
        payload = NULL;
    } else if (r && vf->vt == SX__VT_F32) {
        lst = ops->deserialize(payload, len, s->chunks[fv][0], n, dim, metric, &r->idx);
    } else if (r) {
        lst =
            ops->deserialize_typed(payload, len, s->chunks[fv][0], vf->vt, n, dim, metric, &r->idx);
    }
    sx__free(payload);
    if (lst != SX_OK) {
        sx__free(r);
        return false;
    }
    r->ops = ops;
    atomic_init(&r->refs, 1);
    size_cache(c, s, v, r);
    publish(s, v, r);
    release_vectors(c, s, v, ops);
    return true;
}

void sx__seg_attach_one(sx_collection *c, sx__segment *s, size_t v)
{
    sx__vfield *vf = &c->vfs[v];
    sx__rwlock_rdlock(&c->seg_lock);
    const sx__index_ops *ops = vf->iops;
    const sx_metric metric = vf->metric;
    char pstr[256];
    (void)snprintf(pstr, sizeof pstr, "%s", vf->index_params_str);
    sx__rwlock_unlock(&c->seg_lock);
    if (!ops)
        return;
    char path[4096];
    sx__coll_path(c, path, sizeof path, sx__idx_ext(v, false), s->id);
    const char *slash = strrchr(path, '/');
    if (!sx__fs_exists(path) && c->cs) /* evicted by the cache limit: download it again */
        sx__ignore(sx__store_fetch(c, slash ? slash + 1 : path));
    if (!load_index_file(c, s, v, ops, metric, pstr, path))
        sx__build_enqueue(c->db, c, s, v);
}

void sx__seg_attach_index(sx_collection *c, sx__segment *s)
{
    for (size_t v = 0; v < c->n_vf; v++)
        sx__seg_attach_one(c, s, v);
}

void sx__seg_remove_index_files(sx_collection *c, uint64_t id)
{
    for (size_t v = 0; v < c->n_vf; v++) {
        char path[4096];
        sx__coll_path(c, path, sizeof path, sx__idx_ext(v, false), id);
        sx__ignore(sx__fs_unlink(path));
        sx__store_forget_local(c, id, v);
        const sx__index_ops *ops = c->vfs[v].iops;
        if (ops && ops->remove_files) {
            sx__idx_prefix(c, path, sizeof path, id, v);
            ops->remove_files(path);
        }
    }
}

/* ---------------------------------------------------------------- API */

static void free_spec(sx__vfield *vf)
{
    sx__free(vf->index_type);
    for (size_t i = 0; i < vf->n_index_params; i++) {
        sx__free((char *)vf->index_params[i].key);
        sx__free((char *)vf->index_params[i].value);
    }
    sx__free(vf->index_params);
    vf->index_type = NULL;
    vf->index_params = NULL;
    vf->n_index_params = 0;
    vf->iops = NULL;
    vf->index_params_str[0] = '\0';
    vf->fail_reason[0] = '\0';
    vf->fail_status = SX_OK;
}

static bool ignored_param(const char *k)
{
    return strcasecmp(k, "index_type") == 0 || strcasecmp(k, "metric_type") == 0 ||
           strcasecmp(k, "metricType") == 0;
}

/* The parameters string an index file and the manifest record ("k=v,k=v", the ignored keys
 * left out); *kept: how many it holds. */
static sx_status
params_join(const sx_param *params, size_t n_params, char *pstr, size_t cap, size_t *kept)
{
    size_t off = 0;
    *kept = 0;
    pstr[0] = '\0';
    for (size_t i = 0; i < n_params; i++) {
        if (ignored_param(params[i].key))
            continue;
        int w = snprintf(pstr + off, cap - off, "%s%s=%s", *kept ? "," : "", params[i].key,
                         params[i].value);
        if (w < 0 || (size_t)w >= cap - off)
            return sx__err(SX_EINVAL, "index parameters too long");
        off += (size_t)w;
        (*kept)++;
    }
    return SX_OK;
}

static sx_status check_params(const char *index_type,
                              sx__vtype vt,
                              const sx_param *params,
                              size_t n_params,
                              uint32_t dim,
                              sx_metric metric,
                              const sx__index_ops **out)
{
    const sx__index_ops *ops = sx__index_lookup_vt(index_type, vt);
    if (!ops)
        return sx__err(SX_EINVAL, "index type \"%s\" is not supported (one of %s)",
                       index_type ? index_type : "", sx__index_type_list());
    if (n_params > 32)
        return sx__err(SX_EINVAL, "too many index parameters (%zu, at most 32)", n_params);
    if (n_params && !params)
        return sx__err(SX_EINVAL, "%zu index parameters but no array", n_params);
    sx_status st = sx__index_check_build(ops, vt, params, n_params, dim, metric);
    if (st == SX_OK)
        *out = ops;
    return st;
}

sx_status sx_index_check_params(
    const char *index_type, const sx_param *params, size_t n_params, uint32_t dim, sx_metric metric)
{
    sx__err_clear();
    const sx__index_ops *ops = NULL;
    return check_params(index_type, SX__VT_F32, params, n_params, dim, metric, &ops);
}

sx_status sx_index_check_params_for(const char *index_type,
                                    sx_field_type field_type,
                                    const sx_param *params,
                                    size_t n_params,
                                    uint32_t dim,
                                    sx_metric metric)
{
    sx__err_clear();
    if (!sx_field_is_vector(field_type))
        return sx__err(SX_EINVAL, "an index needs a vector field");
    const sx__index_ops *ops = NULL;
    return check_params(index_type, sx__vtype_of(field_type), params, n_params, dim, metric, &ops);
}

sx_status sx_index_check_search_params(const char *index_type,
                                       const sx_param *params,
                                       size_t n_params,
                                       uint32_t k)
{
    sx__err_clear();
    const sx__index_ops *ops = sx__index_lookup(index_type);
    if (!ops)
        return sx__err(SX_EINVAL, "index type \"%s\" is not supported (one of %s)",
                       index_type ? index_type : "", sx__index_type_list());
    for (size_t i = 0; i < n_params; i++)
        if (!params || !params[i].key || !params[i].value)
            return sx__err(SX_EINVAL, "search parameter %zu has no key or value", i);
    return ops->check_search_params(params, n_params, k);
}

/* The name the messages give vector field v: the collection's, and the field's when there are
 * several vector fields. */
static void vname(const sx_collection *c, size_t v, char *buf, size_t n)
{
    if (c->n_vf > 1)
        (void)snprintf(buf, n, "%s (field %s)", c->name, c->names[c->vfs[v].field]);
    else
        (void)snprintf(buf, n, "%s", c->name);
}

static sx_status index_create(
    sx_collection *c, size_t v, const char *index_type, const sx_param *params, size_t n_params)
{
    sx__vfield *vf = &c->vfs[v];
    const sx__index_ops *ops = NULL;
    sx__rwlock_rdlock(&c->seg_lock);
    sx_metric metric = vf->metric;
    sx__rwlock_unlock(&c->seg_lock);
    sx_status st = check_params(index_type, vf->vt, params, n_params, vf->dim, metric, &ops);
    if (st != SX_OK)
        return st;
    char pstr[256] = "", who[600];
    vname(c, v, who, sizeof who);
    size_t kept = 0;
    st = params_join(params, n_params, pstr, sizeof pstr, &kept);
    if (st != SX_OK)
        return st;
    sx__mutex_lock(&c->flush_mu);
    sx__mutex_lock(&c->write_mu);
    if (vf->iops) {
        bool same = vf->iops == ops && strcmp(vf->index_params_str, pstr) == 0;
        sx__mutex_unlock(&c->write_mu);
        sx__mutex_unlock(&c->flush_mu);
        return same ? SX_OK
                    : sx__err(SX_EEXIST, "collection %s already has a %s index (%s): drop it first",
                              who, vf->iops->name, vf->index_params_str);
    }
    sx_param *copy = sx__calloc(kept + 1, sizeof *copy);
    char *tname = sx__strdup(ops->name);
    bool ok = copy && tname;
    size_t j = 0;
    for (size_t i = 0; ok && i < n_params; i++) {
        if (ignored_param(params[i].key))
            continue;
        copy[j].key = sx__strdup(params[i].key);
        copy[j].value = sx__strdup(params[i].value);
        ok = copy[j].key && copy[j].value;
        j++;
    }
    if (!ok) {
        for (size_t i = 0; i < j; i++) {
            sx__free((char *)copy[i].key);
            sx__free((char *)copy[i].value);
        }
        sx__free(copy);
        sx__free(tname);
        sx__mutex_unlock(&c->write_mu);
        sx__mutex_unlock(&c->flush_mu);
        return sx__err(SX_ENOMEM, "index create");
    }
    sx__rwlock_wrlock(&c->seg_lock);
    vf->index_type = tname;
    vf->index_params = copy;
    vf->n_index_params = kept;
    vf->iops = ops;
    (void)snprintf(vf->index_params_str, sizeof vf->index_params_str, "%s", pstr);
    vf->fail_reason[0] = '\0';
    vf->fail_status = SX_OK;
    sx__rwlock_unlock(&c->seg_lock);
    sx__mutex_unlock(&c->write_mu);
    st = sx__write_manifest(c, NULL);
    if (st != SX_OK) {
        sx__rwlock_wrlock(&c->seg_lock);
        free_spec(vf);
        sx__rwlock_unlock(&c->seg_lock);
    } else {
        for (size_t i = 0; i < c->n_segs; i++)
            if (c->segs[i]->persisted)
                sx__seg_attach_one(c, c->segs[i], v);
        /* best effort: the store manifest gets the spec (a failure is retried by the next sync) */
        if (sx__store_sync_locked(c) != SX_OK)
            sx__err_clear();
    }
    sx__mutex_unlock(&c->flush_mu);
    return st;
}

/* Creating an index (its manifest update, loading index files found for sealed segments) is
 * optimize I/O: the calling thread is tagged BUILD for the call, its phase restored after. */
sx_status sx_index_create_on(sx_collection *c,
                             const char *field,
                             const char *index_type,
                             const sx_param *params,
                             size_t n_params)
{
    size_t v = 0;
    sx_status st = sx__vfield_find(c, field, &v);
    if (st != SX_OK)
        return st;
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_BUILD);
    st = index_create(c, v, index_type, params, n_params);
    sx_io_phase_set(prev);
    return st;
}

sx_status
sx_index_create(sx_collection *c, const char *index_type, const sx_param *params, size_t n_params)
{
    return sx_index_create_on(c, NULL, index_type, params, n_params);
}

sx_status sx_index_drop_on(sx_collection *c, const char *field)
{
    size_t v = 0;
    sx_status st = sx__vfield_find(c, field, &v);
    if (st != SX_OK)
        return st;
    sx__vfield *vf = &c->vfs[v];
    sx__mutex_lock(&c->flush_mu);
    if (!vf->iops) {
        sx__mutex_unlock(&c->flush_mu);
        char who[600];
        vname(c, v, who, sizeof who);
        return sx__err(SX_ENOTFOUND, "collection %s has no index", who);
    }
    const sx__index_ops *old_ops = vf->iops;
    sx__mutex_lock(&c->write_mu);
    sx__rwlock_wrlock(&c->seg_lock);
    free_spec(vf);
    sx__rwlock_unlock(&c->seg_lock);
    sx__mutex_unlock(&c->write_mu);
    /* cancels the builds of every field; the others' are queued again below */
    sx__build_cancel_coll(c->db, c);
    st = sx__write_manifest(c, NULL);
    sx__coll_drop_indexes(c, v, old_ops);
    /* the segment list only changes under flush_mu, which is held: no lock needed to walk it
     * (and sx__build_enqueue may take seg_lock's write side) */
    for (size_t w = 0; w < c->n_vf; w++) {
        if (w == v)
            continue;
        sx__rwlock_rdlock(&c->seg_lock);
        bool indexed = c->vfs[w].iops != NULL;
        sx__rwlock_unlock(&c->seg_lock);
        for (size_t i = 0; indexed && i < c->n_segs; i++) {
            sx__segment *s = c->segs[i];
            sx__mutex_lock(&s->idx_mu);
            bool need = s->persisted && !s->index[w] && !s->build_pending[w];
            sx__mutex_unlock(&s->idx_mu);
            if (need)
                sx__build_enqueue(c->db, c, s, w);
        }
    }
    /* best effort: the store drops the index objects after its new manifest */
    if (st == SX_OK && sx__store_sync_locked(c) != SX_OK)
        sx__err_clear();
    sx__mutex_unlock(&c->flush_mu);
    notify(c);
    return st;
}

sx_status sx_index_drop(sx_collection *c)
{
    return sx_index_drop_on(c, NULL);
}

void sx__coll_drop_indexes(sx_collection *c, size_t v, const sx__index_ops *ops)
{
    sx__rwlock_rdlock(&c->seg_lock);
    for (size_t i = 0; i < c->n_segs; i++) {
        sx__segment *s = c->segs[i];
        sx__mutex_lock(&s->idx_mu);
        sx__idxref *old = s->index[v];
        s->index[v] = NULL;
        sx__mutex_unlock(&s->idx_mu);
        sx__idxref_unref(old);
        char path[4096];
        sx__coll_path(c, path, sizeof path, sx__idx_ext(v, false), s->id);
        sx__ignore(sx__fs_unlink(path));
        sx__store_forget_local(c, s->id, v);
        if (ops && ops->remove_files) {
            sx__idx_prefix(c, path, sizeof path, s->id, v);
            ops->remove_files(path);
        }
    }
    sx__rwlock_unlock(&c->seg_lock);
}

static void describe_one(sx_collection *c, size_t v, sx_index_info *out)
{
    const sx__vfield *vf = &c->vfs[v];
    memset(out, 0, sizeof *out);
    sx__rwlock_rdlock(&c->seg_lock);
    out->metric = vf->metric;
    bool all = true;
    for (size_t i = 0; i <= c->n_segs; i++) {
        sx__segment *s = i < c->n_segs ? c->segs[i] : c->growing;
        size_t n = atomic_load(&s->n_rows);
        out->total_rows += n;
        if (s == c->growing) {
            out->growing_rows = n;
            continue;
        }
        sx__mutex_lock(&s->idx_mu);
        const sx__idxref *r = s->index[v];
        if (r) {
            const sx__index_ops *o = r->ops;
            out->indexed_rows += n;
            out->memory_bytes += o->memory_bytes(r->idx);
            if (o->disk_bytes)
                out->disk_bytes += o->disk_bytes(r->idx);
            if (o->io_stats) {
                uint64_t ios = 0, bytes = 0;
                o->io_stats(r->idx, &ios, &bytes);
                out->read_ios += ios;
                out->read_bytes += bytes;
            }
        } else {
            all = false;
        }
        sx__mutex_unlock(&s->idx_mu);
    }
    out->pending_rows = out->total_rows - out->indexed_rows;
    sx__mutex_lock(&c->db->mu);
    /* the running job's progress counts for the field it builds only */
    if (c->db->building == c && c->db->building_v == v)
        out->building_rows = atomic_load_explicit(&c->db->build_progress, memory_order_relaxed);
    sx__mutex_unlock(&c->db->mu);
    if (!vf->iops)
        out->state = SX_INDEX_NONE;
    else if (vf->fail_reason[0])
        out->state = SX_INDEX_FAILED;
    else
        out->state = all ? SX_INDEX_FINISHED : SX_INDEX_IN_PROGRESS;
    if (vf->iops)
        (void)snprintf(out->type, sizeof out->type, "%s", vf->iops->name);
    (void)snprintf(out->params, sizeof out->params, "%s", vf->index_params_str);
    (void)snprintf(out->fail_reason, sizeof out->fail_reason, "%s", vf->fail_reason);
    sx__rwlock_unlock(&c->seg_lock);
}

sx_status sx_index_describe_on(sx_collection *c, const char *field, sx_index_info *out)
{
    size_t v = 0;
    sx_status st = sx__vfield_find(c, field, &v);
    if (st == SX_OK)
        describe_one(c, v, out);
    return st;
}

sx_status sx_index_describe(sx_collection *c, sx_index_info *out)
{
    describe_one(c, 0, out);
    return SX_OK;
}

/* Waits for the fields of mask (bit v: c->vfs[v]); any_none: SX_ENOTFOUND only when none of them
 * has an index (else when one lacks it). */
static sx_status wait_fields(sx_collection *c, unsigned mask, bool any_none, uint64_t timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)(timeout_ms / 1000);
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    sx__mutex_lock(&c->idx_wait_mu);
    for (;;) {
        size_t indexed = 0, finished = 0;
        for (size_t v = 0; v < c->n_vf; v++) {
            if (!(mask >> v & 1))
                continue;
            sx_index_info info;
            describe_one(c, v, &info);
            if (info.state == SX_INDEX_NONE)
                continue;
            indexed++;
            if (info.state == SX_INDEX_FAILED) {
                sx__rwlock_rdlock(&c->seg_lock);
                sx_status fst = c->vfs[v].fail_status != SX_OK ? c->vfs[v].fail_status : SX_EIO;
                sx__rwlock_unlock(&c->seg_lock);
                sx__mutex_unlock(&c->idx_wait_mu);
                return sx__err(fst, "index build failed: %s", info.fail_reason);
            }
            if (info.state == SX_INDEX_FINISHED)
                finished++;
        }
        if (indexed == 0 || (!any_none && indexed < (size_t)__builtin_popcount(mask))) {
            sx__mutex_unlock(&c->idx_wait_mu);
            return sx__err(SX_ENOTFOUND, "collection %s has no index", c->name);
        }
        if (finished == indexed) {
            sx__mutex_unlock(&c->idx_wait_mu);
            return SX_OK;
        }
        /* wake periodically as well: a notify may race with the describe above */
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 50 * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        if (timeout_ms && (t.tv_sec > deadline.tv_sec ||
                           (t.tv_sec == deadline.tv_sec && t.tv_nsec > deadline.tv_nsec))) {
            t = deadline;
            if (sx__cond_timedwait(&c->index_cv, &c->idx_wait_mu, &t) != 0) {
                sx__mutex_unlock(&c->idx_wait_mu);
                return sx__err(SX_ETIMEDOUT, "index build not finished after %llu ms",
                               (unsigned long long)timeout_ms);
            }
            continue;
        }
        (void)sx__cond_timedwait(&c->index_cv, &c->idx_wait_mu, &t);
    }
}

sx_status sx_index_wait(sx_collection *c, uint64_t timeout_ms)
{
    return wait_fields(c, (1u << c->n_vf) - 1, true, timeout_ms);
}

sx_status sx_index_wait_on(sx_collection *c, const char *field, uint64_t timeout_ms)
{
    size_t v = 0;
    sx_status st = sx__vfield_find(c, field, &v);
    if (st != SX_OK)
        return st;
    return wait_fields(c, 1u << v, false, timeout_ms);
}

/* sx_index_build_segment_file's cancel: a thread asking opts->cancelled every 100 ms */
typedef struct canceller {
    const sx_segment_build_options *opts;
    atomic_bool cancel, done;
    pthread_t thr;
} canceller;

static void *cancel_poll(void *arg)
{
    canceller *cw = arg;
    while (!atomic_load(&cw->done)) {
        if (cw->opts->cancelled(cw->opts->ud)) {
            atomic_store(&cw->cancel, true);
            break;
        }
        struct timespec ts = { 0, 100000000L };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

sx_status sx_index_build_segment_file(const char *segment_path,
                                      const char *field,
                                      const char *index_type,
                                      const sx_param *params,
                                      size_t n_params,
                                      sx_metric metric,
                                      const sx_segment_build_options *opts,
                                      const char *out_path,
                                      uint64_t *rows_out)
{
    sx_segment_build_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opts)
        opts = &defaults;
    const char *side_prefix = opts->side_prefix;
    const uint32_t threads = opts->threads;
    sx__err_clear();
    if (!segment_path || !field || !index_type || !out_path)
        return sx__err(SX_EINVAL,
                       "sx_index_build_segment_file: paths, field and type are required");
    sx__segcol *hdr = NULL, *cols = NULL;
    size_t nc = 0;
    uint64_t seg_id = 0, n = 0, n2 = 0;
    sx__segmap map;
    memset(&map, 0, sizeof map);
    sx_status st = sx__segfile_columns(segment_path, &seg_id, &n, &hdr, &nc);
    if (st != SX_OK)
        return st;
    size_t f = nc;
    for (size_t i = 0; i < nc; i++)
        if (strcmp(hdr[i].name, field) == 0)
            f = i;
    const sx__index_ops *ops = NULL;
    char pstr[256];
    size_t kept = 0;
    if (f == nc)
        st = sx__err(SX_ENOTFOUND, "%s has no field named %s", segment_path, field);
    else if (!sx_field_is_vector(hdr[f].type) || hdr[f].nullable)
        st = sx__err(SX_EINVAL, "field %s of %s is not a vector field", field, segment_path);
    if (st == SX_OK)
        st = check_params(index_type, sx__vtype_of(hdr[f].type), params, n_params, hdr[f].dim,
                          metric, &ops);
    if (st == SX_OK && (ops->load_files || ops->remove_files) &&
        (ops != &sx__diskann_index_ops || !side_prefix))
        st = sx__err(SX_EINVAL, "%s keeps files beside its index file: %s", ops->name,
                     ops == &sx__diskann_index_ops ? "a side_prefix is needed"
                                                   : "it is built where it is served");
    if (st == SX_OK)
        st = params_join(params, n_params, pstr, sizeof pstr, &kept);
    if (st == SX_OK && opts->cancelled && opts->cancelled(opts->ud))
        st = sx__err(SX_ECANCELED, "the build of %s was cancelled", segment_path);
    if (st == SX_OK)
        st = sx__segfile_read(segment_path, seg_id, hdr, nc, &n2, &cols, &map);
    sx__index *idx = NULL;
    if (st == SX_OK) {
        const uint32_t dim = hdr[f].dim;
        atomic_size_t progress;
        atomic_init(&progress, 0);
        canceller cw;
        atomic_init(&cw.cancel, false);
        atomic_init(&cw.done, false);
        cw.opts = opts;
        bool polling = opts->cancelled && pthread_create(&cw.thr, NULL, cancel_poll, &cw) == 0;
        sx__build_ctx ctx = { threads ? threads : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN),
                              &progress,
                              &cw.cancel,
                              0,
                              side_prefix,
                              seg_id }; /* the seed a local build of the segment uses */
        sx__vtype vt = sx__vtype_of(hdr[f].type);
        if (vt == SX__VT_F32)
            st = ops->build(params, n_params, cols[f].data, (size_t)n2, dim, metric, &ctx, &idx);
        else
            st = ops->build_typed(params, n_params, cols[f].data, vt, (size_t)n2, dim, metric, &ctx,
                                  &idx);
        if (polling) {
            atomic_store(&cw.done, true);
            pthread_join(cw.thr, NULL);
        }
        if (st == SX_OK && atomic_load(&cw.cancel))
            st = sx__err(SX_ECANCELED, "the build of %s was cancelled", segment_path);
        if (st == SX_OK)
            st = write_index_file(ops, idx, out_path, ops->name, pstr, (size_t)n2, dim);
        if (idx)
            ops->free(idx);
        if (st != SX_OK && side_prefix && ops->remove_files)
            ops->remove_files(side_prefix); /* a cancelled or failed DISKANN build's file */
    }
    if (st == SX_OK && rows_out)
        *rows_out = n2;
    sx__segcols_free(cols, nc, n2);
    if (map.addr)
        sx__fs_unmap(map.addr, map.len);
    sx__segcols_free(hdr, nc, 0);
    return st;
}
