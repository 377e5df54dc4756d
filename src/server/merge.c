/*
 * merge.c: merging of concurrent small searches into one engine batch.
 *
 * Why. A search of one query vector pays fixed costs (read view, filter bitmaps, per-segment
 * setup, result assembly) that a batch of many queries pays once; the FLAT and IVF scans switch
 * to BLAS GEMM for batches of >= 16 queries, and a batch of >= 16 on an indexed segment is split
 * across the search threads. Under many concurrent REST clients that each send nq = 1, running
 * requests with the same parameters as one sx_search of the concatenated queries raises
 * throughput, as Milvus's own concurrent benchmark showed.
 *
 * Policy: group commit, not a timer. A fixed linger ("wait 500 us for company") adds that much
 * latency to every request and, on a machine with few cores, loses more than batching gains (we
 * measured it: bench/serve_merge.sh). Instead the merger has `slots` search slots (the number of
 * CPUs, or search_threads): a request that finds a free slot and no queue runs at once, alone, so
 * merging never adds latency at low load. When every slot is busy, requests queue, and queued
 * requests with the same key join one batch; when a slot frees, the oldest queued batch runs. So
 * batches form exactly while the CPUs are saturated, and their size adapts to the load. A queued
 * batch runs anyway after merge_wait_us (default 50 ms) even without a free slot: the wait is
 * bounded.
 *
 * Keys. Requests are keyed by a canonical string the caller builds from everything but the
 * query vectors (database, collection, field, metric, params, filter, limit, offset, output
 * fields), plus the collection handle pointer (handles of one collection are one object, and a
 * handle cannot be freed while its holder is inside sx__merger_search).
 *
 *   1. A caller whose nq alone exceeds merge_max_nq searches alone (it takes a slot if one is
 *      free, else it runs oversubscribed: big batches need no merging).
 *   2. A free slot and an empty queue: run alone now.
 *   3. Otherwise join the open (still accepting) queued batch of the key, or start one and lead
 *      it. A batch closes to new members when it holds merge_max_nq queries.
 *   4. A leader waits until its batch is the oldest queued one and a slot is free, or until its
 *      deadline (enqueue time + merge_wait_us). It then takes a slot, runs one sx_search of the
 *      concatenated queries, splits the rowset per member (deep copies: each member gets an
 *      independent sx_rowset freed with sx_rowset_free) and wakes them.
 *   5. A batch of one runs the caller's request unchanged. If the merged search or a split
 *      fails, every member retries alone on its own thread, so errors (and the thread-local
 *      sx_errmsg()) are per request: a NaN query fails its own request only.
 *
 * Invariants (all under mu).
 *   I1. `queue` holds the batches not yet started, oldest first; `open` flags the ones that
 *       still accept members; at most one open batch per (collection, key).
 *   I2. A batch's nq (sum of its members' nq) is <= max_nq.
 *   I3. b->refs = members that have not yet taken their result; the last one frees b.
 *   I4. running = engine searches started through the merger and not finished; a started
 *       search releases its slot (running--) and broadcasts slot_cv.
 *
 * Locking. One mutex `mu` guards the queue, every batch's fields, every member's result slots
 * and the counters. No engine call is made under mu (the search, the describe for dim and the
 * split run unlocked: a started batch's member list is immutable, and only the leader touches
 * it until `done` is set). Leaders wait on the merger-wide slot_cv (CLOCK_MONOTONIC), followers
 * on their batch's cv (broadcast when done).
 *
 * Thread-safety: all functions but sx__merger_free may be called from any number of threads.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/err.h"

typedef struct member {
    const sx_search_req *req;
    size_t q0;         /* first query of this member in the batch's concatenation */
    sx_rowset *result; /* set by the leader when the batch succeeded; taken by the member */
    bool ok;           /* result valid; false: retry alone */
    struct member *next;
} member;

typedef struct batch {
    sx_collection *c;
    char *key;
    member *head, *tail;
    size_t n_members;
    size_t nq;
    bool closed;          /* no longer accepts members (I1) */
    bool started;         /* left the queue: its leader runs it */
    bool done;            /* results are in the members */
    size_t refs;          /* I3 */
    uint64_t deadline_ns; /* run even without a free slot after this (CLOCK_MONOTONIC) */
    pthread_cond_t cv;    /* followers wait here for done */
    struct batch *next;   /* in the queue, oldest first */
} batch;

struct sx__merger {
    pthread_mutex_t mu;
    pthread_cond_t slot_cv; /* leaders wait here for a slot or their turn (CLOCK_MONOTONIC) */
    uint32_t wait_us;
    uint32_t max_nq;
    uint32_t slots;
    batch *queue;       /* guarded by mu (I1) */
    batch *queue_tail;  /* guarded by mu */
    uint32_t running;   /* guarded by mu (I4) */
    uint64_t n_batches; /* guarded by mu: engine searches run for batches (any size) */
    uint64_t n_merged;  /* guarded by mu: requests answered by those searches */
};

sx_status sx__merger_new(const sx_server_options *o, sx__merger **out)
{
    sx__merger *m = sx__calloc(1, sizeof *m);
    if (!m)
        return sx__err(SX_ENOMEM, "merger");
    pthread_condattr_t ca;
    bool cv_ok = false;
    if (pthread_condattr_init(&ca) == 0) {
        cv_ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                pthread_cond_init(&m->slot_cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!cv_ok || pthread_mutex_init(&m->mu, NULL) != 0) {
        if (cv_ok)
            pthread_cond_destroy(&m->slot_cv);
        sx__free(m);
        return sx__err(SX_ENOMEM, "merger mutex");
    }
    m->wait_us = (o && o->merge_wait_us) ? o->merge_wait_us : 50000;
    m->max_nq = (o && o->merge_max_nq) ? o->merge_max_nq : 256;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    m->slots = (o && o->merge_slots)         ? o->merge_slots
               : (o && o->db.search_threads) ? o->db.search_threads
                                             : (cpus > 0 ? (uint32_t)cpus : 1u);
    *out = m;
    return SX_OK;
}

void sx__merger_free(sx__merger *m)
{
    if (!m)
        return;
    /* No call may be in progress, hence no batch exists. */
    pthread_cond_destroy(&m->slot_cv);
    pthread_mutex_destroy(&m->mu);
    sx__free(m);
}

void sx__merger_stats(sx__merger *m, uint64_t *batches, uint64_t *merged_requests)
{
    if (!m) {
        *batches = 0;
        *merged_requests = 0;
        return;
    }
    pthread_mutex_lock(&m->mu);
    *batches = m->n_batches;
    *merged_requests = m->n_merged;
    pthread_mutex_unlock(&m->mu);
}

/* ---------------------------------------------------------------- rowset slicing */

static size_t col_width(const sx_rowset *rs, size_t i)
{
    switch (rs->cols[i].type) {
    case SX_FIELD_INT64:
        return sizeof(int64_t);
    case SX_FIELD_DOUBLE:
        return sizeof(double);
    case SX_FIELD_BOOL:
        return sizeof(bool);
    case SX_FIELD_VARCHAR:
        return sizeof(char *);
    case SX_FIELD_FLOAT_VECTOR:
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR:
        return sx_vector_row_bytes(rs->cols[i].type, rs->dims[i]);
    }
    return 0;
}

/* Copies queries [q0, q0+nq) of `all` into a new rowset laid out as sx_search builds them
 * (allocations through util/alloc.h, as sx_rowset_free expects). Owned: sx_rowset_free. */
static sx_status slice_rowset(const sx_rowset *all, size_t q0, size_t nq, sx_rowset **out)
{
    size_t r0 = 0, n = 0;
    for (size_t q = 0; q < q0; q++)
        r0 += all->topks[q];
    for (size_t q = q0; q < q0 + nq; q++)
        n += all->topks[q];
    sx_rowset *rs = sx__calloc(1, sizeof *rs);
    if (!rs)
        return sx__err(SX_ENOMEM, "merge: result slice");
    rs->n_rows = n;
    rs->nq = nq;
    rs->cols = sx__calloc(all->n_cols ? all->n_cols : 1, sizeof(sx_column));
    rs->dims = sx__calloc(all->n_cols ? all->n_cols : 1, sizeof(uint32_t));
    rs->topks = sx__calloc(nq, sizeof(size_t));
    rs->distances = sx__malloc((n ? n : 1) * sizeof(float));
    if (!rs->cols || !rs->dims || !rs->topks || !rs->distances)
        goto nomem;
    memcpy(rs->topks, all->topks + q0, nq * sizeof(size_t));
    if (n)
        memcpy(rs->distances, all->distances + r0, n * sizeof(float));
    for (size_t i = 0; i < all->n_cols; i++) {
        size_t w = col_width(all, i);
        rs->cols[i].type = all->cols[i].type;
        rs->dims[i] = all->dims[i];
        rs->cols[i].name = sx__strdup(all->cols[i].name);
        char *data = sx__calloc(n ? n : 1, w ? w : 1);
        rs->cols[i].data = data;
        rs->n_cols = i + 1;
        if (!data || !rs->cols[i].name)
            goto nomem;
        if (all->cols[i].type == SX_FIELD_VARCHAR) {
            char *const *src = (char *const *)all->cols[i].data + r0;
            for (size_t r = 0; r < n; r++) {
                ((char **)data)[r] = sx__strdup(src[r]);
                if (!((char **)data)[r])
                    goto nomem;
            }
        } else if (n) {
            memcpy(data, (const char *)all->cols[i].data + r0 * w, n * w);
        }
        if (all->cols[i].valid) { /* NULL marks of a nullable field */
            bool *valid = sx__malloc(n ? n : 1);
            if (!valid)
                goto nomem;
            if (n)
                memcpy(valid, all->cols[i].valid + r0, n);
            rs->cols[i].valid = valid;
        }
    }
    *out = rs;
    return SX_OK;
nomem:
    sx_rowset_free(rs);
    return sx__err(SX_ENOMEM, "merge: result slice");
}

/* ---------------------------------------------------------------- batches */

/* Wakes every waiting leader so it re-checks its stop condition. Caller holds mu. */
/* Removes b from the queue and marks it started (I1). Caller holds mu. */
static void dequeue(sx__merger *m, batch *b)
{
    batch *prev = NULL;
    for (batch *x = m->queue; x; prev = x, x = x->next) {
        if (x == b) {
            if (prev)
                prev->next = b->next;
            else
                m->queue = b->next;
            if (m->queue_tail == b)
                m->queue_tail = prev;
            break;
        }
    }
    b->next = NULL;
    b->closed = true;
    b->started = true;
}

static void enqueue(sx__merger *m, batch *b)
{
    b->next = NULL;
    if (m->queue_tail)
        m->queue_tail->next = b;
    else
        m->queue = b;
    m->queue_tail = b;
}

static void batch_free(batch *b)
{
    pthread_cond_destroy(&b->cv);
    sx__free(b->key);
    sx__free(b);
}

static void add_member(batch *b, member *w)
{
    w->q0 = b->nq;
    w->next = NULL;
    if (b->tail)
        b->tail->next = w;
    else
        b->head = w;
    b->tail = w;
    b->n_members++;
    b->nq += w->req->nq;
    b->refs++;
}

static batch *batch_new(sx_collection *c, const char *key)
{
    batch *b = sx__calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->key = sx__strdup(key);
    pthread_condattr_t ca;
    bool cv_ok = false;
    if (pthread_condattr_init(&ca) == 0) {
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&b->cv, &ca) == 0)
            cv_ok = true;
        pthread_condattr_destroy(&ca);
    }
    if (!b->key || !cv_ok) {
        if (cv_ok)
            pthread_cond_destroy(&b->cv);
        sx__free(b->key);
        sx__free(b);
        return NULL;
    }
    b->c = c;
    return b;
}

static batch *find_open(sx__merger *m, sx_collection *c, const char *key)
{
    for (batch *b = m->queue; b; b = b->next)
        if (!b->closed && b->c == c && strcmp(b->key, key) == 0)
            return b;
    return NULL;
}

/* Leader, unlocked: runs the closed batch b and fills every member's result. Members whose
 * slice could not be made (or all, if the search failed) keep ok == false. */
static void run_batch(sx__merger *m, batch *b)
{
    (void)m;
    if (b->n_members == 1) {
        member *w = b->head;
        sx_rowset *rs = NULL;
        if (sx_search(b->c, w->req, &rs) == SX_OK) {
            w->result = rs;
            w->ok = true;
        }
        return;
    }
    sx_collection_info *info = sx__malloc(sizeof *info);
    if (!info)
        return;
    if (sx_collection_describe(b->c, info) != SX_OK) {
        sx__free(info);
        return;
    }
    /* the searched field (the request's anns_field, else the first vector field): its queries
     * are dim floats, or dim / 8 packed bytes on a binary field */
    SX_ASSERT(b->head != NULL); /* the leader is a member */
    const char *anns = b->head->req->anns_field;
    size_t qbytes = 0;
    bool bin = false;
    for (size_t f = 0; f < info->n_fields && !qbytes; f++) {
        if (!sx_field_is_vector(info->fields[f].type) ||
            (anns && *anns && strcmp(anns, info->fields[f].name) != 0))
            continue;
        bin = info->fields[f].type == SX_FIELD_BINARY_VECTOR;
        qbytes = bin ? info->fields[f].dim / 8 : (size_t)info->fields[f].dim * sizeof(float);
    }
    sx__free(info);
    if (qbytes == 0)
        return;
    char *q = sx__malloc(b->nq * qbytes);
    if (!q)
        return;
    for (member *w = b->head; w; w = w->next)
        memcpy(q + w->q0 * qbytes, bin ? (const void *)w->req->bqueries : w->req->queries,
               w->req->nq * qbytes);
    sx_search_req r = *b->head->req;
    r.queries = bin ? NULL : (const float *)(const void *)q;
    r.bqueries = bin ? (const uint8_t *)q : NULL;
    r.nq = b->nq;
    sx_rowset *all = NULL;
    sx_status st = sx_search(b->c, &r, &all);
    sx__free(q);
    if (st != SX_OK)
        return;
    for (member *w = b->head; w; w = w->next) {
        sx_rowset *part = NULL;
        if (slice_rowset(all, w->q0, w->req->nq, &part) == SX_OK) {
            w->result = part;
            w->ok = true;
        }
    }
    sx_rowset_free(all);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Leader, holding mu: waits until b is the oldest queued batch and a slot is free, or until
 * its deadline (4. above). */
static void leader_wait(sx__merger *m, batch *b)
{
    struct timespec ts = { (time_t)(b->deadline_ns / 1000000000ull),
                           (long)(b->deadline_ns % 1000000000ull) };
    while (!(m->queue == b && m->running < m->slots)) {
        if (pthread_cond_timedwait(&m->slot_cv, &m->mu, &ts) != 0 && now_ns() >= b->deadline_ns)
            break;
    }
}

/* Holding mu: gives a slot back and lets the next leader check its turn (I4). */
static void release_slot(sx__merger *m)
{
    m->running--;
    pthread_cond_broadcast(&m->slot_cv);
}

sx_status sx__merger_search(
    sx__merger *m, sx_collection *c, const char *key, const sx_search_req *req, sx_rowset **out)
{
    if (!m || !key || !req || req->nq == 0 || !req->queries)
        return sx_search(c, req, out);
    pthread_mutex_lock(&m->mu);
    if (req->nq > m->max_nq || (m->running < m->slots && !m->queue)) {
        m->running++; /* 1. and 2.: alone, now */
        pthread_mutex_unlock(&m->mu);
        sx_status st = sx_search(c, req, out);
        pthread_mutex_lock(&m->mu);
        m->n_batches++;
        m->n_merged++;
        release_slot(m);
        pthread_mutex_unlock(&m->mu);
        return st;
    }
    member w = { .req = req };
    batch *b = find_open(m, c, key);
    if (b && b->nq + req->nq > m->max_nq) {
        b->closed = true; /* full: stays queued, takes no more members */
        b = NULL;
    }
    if (b) {
        add_member(b, &w);
        if (b->nq >= m->max_nq)
            b->closed = true;
        while (!b->done)
            pthread_cond_wait(&b->cv, &m->mu);
    } else {
        b = batch_new(c, key);
        if (!b) {
            pthread_mutex_unlock(&m->mu);
            return sx_search(c, req, out);
        }
        add_member(b, &w);
        b->deadline_ns = now_ns() + (uint64_t)m->wait_us * 1000ull;
        enqueue(m, b);
        leader_wait(m, b);
        dequeue(m, b);
        m->running++;
        pthread_cond_broadcast(&m->slot_cv); /* the next batch may now be the oldest */
        pthread_mutex_unlock(&m->mu);
        run_batch(m, b);
        pthread_mutex_lock(&m->mu);
        m->n_batches++;
        m->n_merged += b->n_members;
        release_slot(m);
        b->done = true;
        pthread_cond_broadcast(&b->cv);
    }
    /* Take this member's result; the last member out frees the batch (I3). */
    bool ok = w.ok;
    sx_rowset *rs = w.result;
    if (--b->refs == 0)
        batch_free(b);
    pthread_mutex_unlock(&m->mu);
    if (ok) {
        *out = rs;
        return SX_OK;
    }
    return sx_search(c, req, out); /* alone: the error, if any, is this request's own */
}
