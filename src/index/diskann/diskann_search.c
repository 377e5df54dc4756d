/*
 * diskann_search.c: DiskANN beam search (Subramanya et al., NeurIPS 2019, Section 3.3 "Beam
 * search" over Alg. 1 GreedySearch) with PQ distances in RAM and full-precision re-ranking from
 * the slots read.
 *
 * One query:
 *   1. ADC table of the query (vector/quant_pq.h); the pool (a sorted array of at most L =
 *      search_list entries, HNSW's "pool" form of Alg. 1: the top id bit marks an expanded node)
 *      starts with the medoid at its PQ distance.
 *   2. A hop takes the W = beam_width best unexpanded pool entries, reads their slots with one
 *      batch of W reads (io_uring: W SQEs, one submit-and-wait; pread: W calls), verifies each
 *      slot's CRC and decodes the nodes. Each node's exact distance goes to the results (when the
 *      allow bitset lets it), its unvisited neighbours get PQ distances (one ADC scan over all of
 *      the hop's new neighbours) and enter the pool.
 *   3. Stop when every pool entry is expanded. The answer is the k best exact distances among
 *      the expanded nodes: every expanded node was read from disk anyway, so the re-rank costs
 *      no I/O (the paper's "implicit re-ranking").
 * I/Os per query ~ expanded nodes ~ L + (hops * W overshoot); W trades latency (fewer round
 * trips) for a few extra reads. Two picked nodes in the same slot cost one read, and a slot in
 * the node cache (diskann_cache.c: the medoid's neighbourhood) costs none.
 *
 * Filters. A row not in `allow` is traversed (it keeps the graph connected) but never returned.
 * With a fraction f of the rows allowed, the pool is widened to L/f (capped at 65536 and n) so
 * that about L allowed rows are seen; with very few allowed rows this approaches a traversal of
 * the whole graph (n reads), which is correct and bounded; the engine should use exact search
 * for such filters.
 *
 * I/O paths. io_uring (liburing; SX_HAVE_URING builds) with one ring per thread, created on the
 * thread's first search (queue depth SX__DISKANN_W_MAX) and freed at thread exit; pread when the
 * index was opened with SX_DISKANN_IO=pread, when liburing is absent, or when this thread cannot
 * create a ring. Both read the same bytes, so results are identical. Slot buffers are 4 KiB
 * aligned (O_DIRECT). A remote file (io_mode READER, sx__diskann_load_reader) reads each slot
 * through the reader hook (the engine's block cache: memory on a hit, a ranged GET on a miss);
 * the bytes are the file's, so results are identical, and a bad slot CRC also drops the slot from
 * the cache (invalidate) so a transient corruption in transit does not stick.
 *
 * Scratch. Per thread (graph.h's TLS, freed at thread exit): the pool (graph.h's sorted pool with
 * the expanded bit), a visited hash set (open addressing, sized per query from L*R and doubled
 * when half full, so it costs O(visited) per query and nothing per row of the index: RAM stays
 * independent of n, which is why it is not graph.h's n-sized epoch tags), the ADC table, W slot
 * buffers, the hop's neighbour list.
 *
 * Every node is reachable from the medoid (invariant 5 of diskann.h), so with search_list = n
 * every node is expanded and the answer is the exact top-k.
 *
 * Thread-safety: any number of threads may search one index; the I/O counters are relaxed
 * atomics (statistics only, no ordering needed).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "index/diskann/diskann.h"
#include "index/graph/graph.h"
#if defined(SX_HAVE_URING) && SX_HAVE_URING
# include <liburing.h>
#endif

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

#define VIS_EMPTY UINT32_MAX
#define VIS_MIN   1024u

/* ---------------------------------------------------------------- params */

static sx_status parse_search(const sx_param *p, size_t np, size_t k, long *L, long *W)
{
    long def = k > SX__DISKANN_SL_MIN_DEF ? (long)k : SX__DISKANN_SL_MIN_DEF;
    if (k > SX__DISKANN_SL_MAX)
        return sx__err(SX_EINVAL, "DISKANN: k (%zu) exceeds the largest search_list %d", k,
                       SX__DISKANN_SL_MAX);
    sx_status rc = sx__param_int(p, np, "search_list", 1, SX__DISKANN_SL_MAX, def, L);
    if (rc != SX_OK)
        return rc;
    if ((size_t)*L < k)
        return sx__err(SX_EINVAL, "search_list (%ld) must be in [k, %d] (k = %zu)", *L,
                       SX__DISKANN_SL_MAX, k);
    return sx__param_int(p, np, "beam_width", 1, SX__DISKANN_W_MAX, SX__DISKANN_W_DEF, W);
}

sx_status sx__diskann_check_search_params(const sx_param *p, size_t np, size_t k)
{
    long L, W;
    return parse_search(p, np, k, &L, &W);
}

/* ---------------------------------------------------------------- scratch */

typedef struct scratch {
    sx__hit *pool;
    size_t pool_cap;
    uint32_t *vis; /* visited hash set; vis_mask + 1 active entries */
    size_t vis_cap, vis_mask, vis_n;
    float *table;
    size_t table_cap;
    uint32_t *nbr; /* the hop's new neighbours (W * R) */
    float *nd;
    size_t nbr_cap;
    uint32_t *tmp; /* one node's neighbour list (R) */
    size_t tmp_cap;
    float *vec; /* decoded vector (dim) */
    size_t vec_cap;
    void *buf_raw; /* W slot buffers, 4096-aligned */
    uint8_t *buf;
    size_t buf_bytes;
    uint8_t *bufp[SX__DISKANN_W_MAX];
    uint64_t slots[SX__DISKANN_W_MAX];
    uint64_t miss[SX__DISKANN_W_MAX]; /* the slots of a step not in the node cache */
    uint8_t *missp[SX__DISKANN_W_MAX];
    uint32_t picked[SX__DISKANN_W_MAX];
    uint32_t picked_slot[SX__DISKANN_W_MAX];
#if defined(SX_HAVE_URING) && SX_HAVE_URING
    struct io_uring ring;
    bool ring_ok, ring_tried;
#endif
} scratch;

static void scratch_fini(void *p)
{
    scratch *s = p;
    sx__free(s->pool);
    sx__free(s->vis);
    sx__free_aligned(s->table);
    sx__free(s->nbr);
    sx__free(s->nd);
    sx__free(s->tmp);
    sx__free_aligned(s->vec);
    sx__free(s->buf_raw);
#if defined(SX_HAVE_URING) && SX_HAVE_URING
    if (s->ring_ok)
        io_uring_queue_exit(&s->ring);
#endif
}

static const sx__graph_tls_class tls_class = { SX__GRAPH_TLS_DISKANN, sizeof(scratch),
                                               scratch_fini };

static bool grow(void **p, size_t *cap, size_t need, size_t elem, bool aligned)
{
    if (need <= *cap)
        return true;
    void *q = aligned ? sx__malloc_aligned(need * elem) : sx__malloc(need * elem);
    if (!q)
        return false;
    if (aligned)
        sx__free_aligned(*p);
    else
        sx__free(*p);
    *p = q;
    *cap = need;
    return true;
}

static sx_status scratch_reserve(scratch *s, const sx__diskann *d, size_t L, size_t W)
{
    size_t R = d->R, tcap = (size_t)d->pq.m * d->pq.ksub;
    size_t bytes = W * d->lay.slot_bytes;
    bool ok = grow((void **)&s->pool, &s->pool_cap, L + 1, sizeof *s->pool, false) &&
              grow((void **)&s->table, &s->table_cap, tcap, sizeof(float), true) &&
              grow((void **)&s->tmp, &s->tmp_cap, R, sizeof(uint32_t), false) &&
              grow((void **)&s->vec, &s->vec_cap, d->dim, sizeof(float), true);
    if (ok && W * R > s->nbr_cap) {
        size_t c = W * R;
        uint32_t *a = sx__malloc(c * sizeof *a);
        float *b = sx__malloc(c * sizeof *b);
        if (!a || !b) {
            sx__free(a);
            sx__free(b);
            ok = false;
        } else {
            sx__free(s->nbr);
            sx__free(s->nd);
            s->nbr = a;
            s->nd = b;
            s->nbr_cap = c;
        }
    }
    if (ok && bytes > s->buf_bytes) {
        void *raw;
        uint8_t *b = sx__diskann_sector_alloc(bytes, &raw);
        if (!b) {
            ok = false;
        } else {
            sx__free(s->buf_raw);
            s->buf_raw = raw;
            s->buf = b;
            s->buf_bytes = bytes;
        }
    }
    if (!ok)
        return sx__err(SX_ENOMEM, "DISKANN: cannot allocate search scratch (L=%zu, W=%zu)", L, W);
    return SX_OK;
}

/* ---------------------------------------------------------------- visited set */

static inline size_t vis_hash(uint32_t id, size_t mask)
{
    return (size_t)((id * 0x9E3779B1u) ^ (id >> 16)) & mask;
}

static sx_status vis_reset(scratch *s, size_t want)
{
    size_t cap = VIS_MIN;
    while (cap < want)
        cap *= 2;
    if (!grow((void **)&s->vis, &s->vis_cap, cap, sizeof *s->vis, false))
        return sx__err(SX_ENOMEM, "DISKANN: cannot allocate a visited set of %zu", cap);
    memset(s->vis, 0xFF, cap * sizeof *s->vis);
    s->vis_mask = cap - 1;
    s->vis_n = 0;
    return SX_OK;
}

/* Doubles the active table and reinserts. */
static sx_status vis_grow(scratch *s)
{
    size_t old = s->vis_mask + 1, cap = old * 2;
    uint32_t *t = sx__malloc(cap * sizeof *t);
    if (!t)
        return sx__err(SX_ENOMEM, "DISKANN: cannot grow the visited set to %zu", cap);
    memset(t, 0xFF, cap * sizeof *t);
    for (size_t i = 0; i < old; i++) {
        uint32_t id = s->vis[i];
        if (id == VIS_EMPTY)
            continue;
        size_t h = vis_hash(id, cap - 1);
        while (t[h] != VIS_EMPTY)
            h = (h + 1) & (cap - 1);
        t[h] = id;
    }
    sx__free(s->vis);
    s->vis = t;
    s->vis_cap = cap;
    s->vis_mask = cap - 1;
    return SX_OK;
}

/* Inserts id; *added tells whether it was new. */
static inline sx_status vis_add(scratch *s, uint32_t id, bool *added)
{
    if (2 * (s->vis_n + 1) > s->vis_mask + 1) {
        sx_status rc = vis_grow(s);
        if (rc != SX_OK)
            return rc;
    }
    size_t h = vis_hash(id, s->vis_mask);
    for (;;) {
        uint32_t v = s->vis[h];
        if (v == id) {
            *added = false;
            return SX_OK;
        }
        if (v == VIS_EMPTY) {
            s->vis[h] = id;
            s->vis_n++;
            *added = true;
            return SX_OK;
        }
        h = (h + 1) & s->vis_mask;
    }
}

/* ---------------------------------------------------------------- slot reads */

static sx_status pread_slot(const sx__diskann *d, uint64_t slot, uint8_t *buf)
{
    uint64_t off = sx__diskann_slot_offset(&d->lay, slot);
    size_t want = d->lay.slot_bytes, got = 0;
    while (got < want) {
        ssize_t r = pread(d->fd, buf + got, want - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return sx__err_errno(errno, "DISKANN: read %s at %llu", d->path,
                                 (unsigned long long)off + got);
        }
        if (r == 0)
            return sx__err(SX_ECORRUPT, "DISKANN %s: truncated at slot %llu", d->path,
                           (unsigned long long)slot);
        got += (size_t)r;
    }
    return SX_OK;
}

#if defined(SX_HAVE_URING) && SX_HAVE_URING
/* The thread's ring, created on first use; NULL when io_uring is unavailable to this thread. */
static struct io_uring *thread_ring(scratch *s)
{
    if (!s->ring_tried) {
        s->ring_tried = true;
        s->ring_ok = io_uring_queue_init(SX__DISKANN_W_MAX, &s->ring, 0) == 0;
    }
    return s->ring_ok ? &s->ring : NULL;
}

static sx_status uring_read(const sx__diskann *d,
                            struct io_uring *ring,
                            const uint64_t *slots,
                            size_t count,
                            uint8_t *const *bufs)
{
    unsigned want = d->lay.slot_bytes;
    for (size_t i = 0; i < count; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        if (!sqe) /* cannot happen: depth >= W_MAX >= count and every batch is reaped */
            return sx__err(SX_EIO, "DISKANN: io_uring submission queue full");
        io_uring_prep_read(sqe, d->fd, bufs[i], want, sx__diskann_slot_offset(&d->lay, slots[i]));
        io_uring_sqe_set_data64(sqe, i);
    }
    int r;
    do {
        r = io_uring_submit_and_wait(ring, (unsigned)count);
    } while (r == -EINTR);
    if (r < 0)
        return sx__err_errno(-r, "DISKANN: io_uring submit on %s", d->path);
    sx_status rc = SX_OK;
    for (size_t done = 0; done < count; done++) {
        struct io_uring_cqe *cqe;
        do {
            r = io_uring_wait_cqe(ring, &cqe);
        } while (r == -EINTR);
        if (r < 0)
            return sx__err_errno(-r, "DISKANN: io_uring wait on %s", d->path);
        size_t i = (size_t)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(ring, cqe);
        if (rc != SX_OK || i >= count)
            continue;
        if (res == (int)want)
            continue;
        if (res >= 0 || res == -EAGAIN || res == -EINTR) {
            /* short or transient: finish this slot synchronously */
            rc = pread_slot(d, slots[i], bufs[i]);
        } else {
            rc = sx__err_errno(-res, "DISKANN: read %s slot %llu", d->path,
                               (unsigned long long)slots[i]);
        }
    }
    return rc;
}
#endif

static sx_status read_slots(
    const sx__diskann *d, scratch *s, const uint64_t *slots, size_t count, uint8_t *const *bufs)
{
    sx_status rc = SX_OK;
    bool done = false;
    bool remote = d->io_mode == SX__DISKANN_IO_READER;
    if (remote) {
        /* a remote file: the reader (block cache, ranged GETs on a miss) records its own
         * object-store I/O in the profile; no local read happens here */
        for (size_t i = 0; i < count && rc == SX_OK; i++)
            rc = d->rd.read(d->rd.ctx, sx__diskann_slot_offset(&d->lay, slots[i]),
                            d->lay.slot_bytes, bufs[i]);
        done = true;
    }
#if defined(SX_HAVE_URING) && SX_HAVE_URING
    if (d->io_mode == SX__DISKANN_IO_URING && count > 0) {
        struct io_uring *ring = s ? thread_ring(s) : NULL;
        if (ring) {
            rc = uring_read(d, ring, slots, count, bufs);
            done = true;
        }
    }
#else
    (void)s;
#endif
    for (size_t i = 0; !done && i < count && rc == SX_OK; i++)
        rc = pread_slot(d, slots[i], bufs[i]);
    if (rc != SX_OK)
        return rc;
    /* relaxed: statistics only */
    atomic_fetch_add_explicit((atomic_uint_fast64_t *)&d->ios, count, memory_order_relaxed);
    atomic_fetch_add_explicit((atomic_uint_fast64_t *)&d->bytes_read,
                              (uint64_t)count * d->lay.slot_bytes, memory_order_relaxed);
    if (!remote) /* io_uring and pread read the file directly: count them as local reads */
        sx__io_note_read(count, (uint64_t)count * d->lay.slot_bytes);
    for (size_t i = 0; i < count; i++) {
        if (sx__diskann_slot_ok(&d->lay, bufs[i]))
            continue;
        if (remote && d->rd.invalidate) /* the next read fetches it again */
            d->rd.invalidate(d->rd.ctx, sx__diskann_slot_offset(&d->lay, slots[i]),
                             d->lay.slot_bytes);
        return sx__err(SX_ECORRUPT,
                       "DISKANN %s: checksum mismatch in slot %llu (nodes "
                       "%llu..%llu)",
                       d->path, (unsigned long long)slots[i],
                       (unsigned long long)slots[i] * d->lay.nodes_per_slot,
                       ((unsigned long long)slots[i] + 1) * d->lay.nodes_per_slot - 1);
    }
    return SX_OK;
}

/* ---------------------------------------------------------------- search */

/* Pool width for a filter letting `allowed` of n rows through (see the header). */
static size_t filtered_width(size_t L, size_t n, size_t allowed)
{
    double w = (double)L * (double)n / (double)allowed;
    double cap = SX__DISKANN_SL_MAX > n ? (double)n : (double)SX__DISKANN_SL_MAX;
    if (w > cap)
        w = cap;
    return w < (double)L ? L : (size_t)w;
}

sx_status sx__diskann_search(const sx__index *idx,
                             const float *query,
                             size_t k,
                             const sx_param *sp,
                             size_t nsp,
                             const uint64_t *allow,
                             sx__topk *out)
{
    const sx__diskann *d = (const sx__diskann *)idx;
    long Ll, Wl;
    sx_status rc = parse_search(sp, nsp, k, &Ll, &Wl);
    if (rc != SX_OK)
        return rc;
    if (k == 0 || d->n == 0)
        return SX_OK;
    size_t L = (size_t)Ll, W = (size_t)Wl, n = d->n;
    if (allow) {
        size_t allowed = sx__bits_count(allow, n);
        if (allowed == 0)
            return SX_OK;
        if (allowed < n)
            L = filtered_width(L, n, allowed);
    }
    if (L > n)
        L = n;
    scratch *s = sx__graph_tls_get(&tls_class);
    if (!s)
        return sx__err(SX_ENOMEM, "DISKANN: cannot allocate search scratch");
    rc = scratch_reserve(s, d, L, W);
    if (rc != SX_OK)
        return rc;
    size_t R = d->R;
    rc = vis_reset(s, 2 * L * (R < 32 ? R : 32));
    if (rc != SX_OK)
        return rc;

    sx__pq_table(&d->pq, query, d->metric, s->table);
    sx__hit *pool = s->pool;
    size_t size = 0, cur = 0;
    bool added;
    uint32_t med = d->medoid;
    rc = vis_add(s, med, &added);
    if (rc != SX_OK)
        return rc;
    float md;
    sx__pq_scan_ids(&d->pq, s->table, d->codes, &med, 1, &md);
    (void)sx__pool_insert(pool, &size, L, md, med);

    for (;;) {
        /* the W best unexpanded entries */
        size_t np = 0;
        for (size_t i = cur; i < size && np < W; i++) {
            if (pool[i].id & SX__GRAPH_FLAG)
                continue;
            s->picked[np++] = pool[i].id;
            pool[i].id |= SX__GRAPH_FLAG;
        }
        if (np == 0)
            break;
        size_t nslots = 0;
        for (size_t i = 0; i < np; i++) {
            uint64_t sl = sx__diskann_slot_of(&d->lay, s->picked[i]);
            size_t j = 0;
            while (j < nslots && s->slots[j] != sl)
                j++;
            if (j == nslots) {
                s->slots[nslots] = sl;
                s->bufp[nslots] = s->buf + nslots * d->lay.slot_bytes;
                nslots++;
            }
            s->picked_slot[i] = (uint32_t)j;
        }
        /* slots in the node cache are used in place (read-only), the rest read in one batch */
        size_t nmiss = 0;
        for (size_t j = 0; j < nslots; j++) {
            const uint8_t *hit = d->cache_n ? sx__diskann_cache_get(d, s->slots[j]) : NULL;
            if (hit) {
                s->bufp[j] = (uint8_t *)hit; /* only read below */
                continue;
            }
            s->miss[nmiss] = s->slots[j];
            s->missp[nmiss++] = s->bufp[j];
        }
        if (nmiss < nslots) /* relaxed: statistics only */
            atomic_fetch_add_explicit((atomic_uint_fast64_t *)&d->cache_hits, nslots - nmiss,
                                      memory_order_relaxed);
        rc = read_slots(d, s, s->miss, nmiss, s->missp);
        if (rc != SX_OK)
            return rc;

        size_t nn = 0;
        for (size_t i = 0; i < np; i++) {
            uint32_t id = s->picked[i], deg;
            rc = sx__diskann_node_decode(&d->lay, s->bufp[s->picked_slot[i]], id, n, s->vec, s->tmp,
                                         &deg);
            if (rc != SX_OK)
                return rc;
            if (!allow || sx__bits_test(allow, id))
                sx__topk_push(out, d->dist(query, s->vec, d->dim), id);
            for (uint32_t j = 0; j < deg; j++) {
                rc = vis_add(s, s->tmp[j], &added);
                if (rc != SX_OK)
                    return rc;
                if (added)
                    s->nbr[nn++] = s->tmp[j];
            }
        }
        sx__pq_scan_ids(&d->pq, s->table, d->codes, s->nbr, nn, s->nd);
        size_t lowest = SIZE_MAX;
        for (size_t j = 0; j < nn; j++) {
            size_t p = sx__pool_insert(pool, &size, L, s->nd[j], s->nbr[j]);
            if (p < lowest)
                lowest = p;
        }
        cur = sx__pool_next(pool, size, lowest < cur ? lowest : cur);
    }
    return SX_OK;
}
