/*
 * hnsw_build.c: HNSW construction (Malkov & Yashunin, arXiv 1603.09320): Alg. 1 INSERT with the
 * neighbour-selection heuristic of Alg. 4 (without extendCandidates / keepPrunedConnections, as
 * the paper recommends for most data), plus the vtable, parameter parsing and graph allocation.
 *
 * Levels. mL = 1/ln(M), a node's level is floor(-ln(U) * mL) with U uniform in (0,1], capped at
 * SX__HNSW_MAX_LEVEL. U comes from a hash of (seed, node id), so levels are drawn before the build
 * and do not depend on thread scheduling; knowing them up front lets every upper-level list be
 * allocated in one array (hnsw.h) and the per-node lists never move while threads read them.
 * Degrees: M per upper level, M0 = 2*M at level 0; a new node gets at most M neighbours at every
 * level (Alg. 1), existing nodes accept reverse links up to M (upper) / M0 (level 0) and are
 * shrunk with the same heuristic when full.
 *
 * Threading. ctx->threads workers (the calling thread is one of them) take nodes in chunks from an
 * atomic counter; node 0 is the initial entry point. Shared state and its protection:
 *   - a node's link list at any level: written only under the node's 1-byte spinlock `locks[i]`,
 *     ids with relaxed atomic stores, then the count with a release store. Searches in other
 *     threads read without the lock: count with acquire, ids with relaxed loads. A reader racing a
 *     rewrite may see a mix of old and new ids; all are valid node ids < n whose lists exist, so
 *     the worst case is a slightly different (still correct) traversal, which HNSW tolerates.
 *     Rejected: a pthread mutex per node (40 bytes/node, and hnswlib-style lock-while-reading
 *     costs an atomic RMW per expanded node on the hot path).
 *   - the entry point and top level, packed in one atomic uint64 (release on update, acquire on
 *     read). A node whose level exceeds the current top holds `ep_mu` for its whole insertion so
 *     two such nodes cannot race to become the entry point (they are ~n/M^L rare).
 *   - progress (relaxed adds per chunk) and the cancel flag (relaxed loads per chunk); the first
 *     worker to see cancel sets `stop`, the others stop at their next chunk.
 * Spinlock critical sections are short (append, or a heuristic over <= M0+1 candidates).
 *
 * Repair. Pruning by the heuristic can leave a node without in-links at level 0, i.e. unreachable
 * (hnswlib has the same defect). After the parallel phase sx__graph_repair (graph.h: one pass,
 * guaranteed to finish with every node reached; parents chosen by an efConstruction search for
 * the orphan, appending when the parent has room, else replacing one of its non-tree links) makes
 * every node reachable from the entry point at level 0, and sx__graph_check_reach verifies it, so
 * invariant 5 of hnsw.h holds for every built index.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "index/hnsw/hnsw.h"
#include "util/alloc.h"
#include "util/err.h"

#define LEVEL_SEED 0x5EC7A47ull
#define CHUNK      8u

/* ---------------------------------------------------------------- params */

static sx_status parse_build(const sx_param *p, size_t np, long *M, long *efc)
{
    for (size_t i = 0; i < np; i++) {
        const char *k = p[i].key;
        if (!k)
            return sx__err(SX_EINVAL, "HNSW build parameter %zu has no key", i);
        if (strcmp(k, "M") != 0 && strcmp(k, "efConstruction") != 0 &&
            strcmp(k, "index_type") != 0 && strcmp(k, "metric_type") != 0 &&
            strcmp(k, "metricType") != 0)
            return sx__err(SX_EINVAL,
                           "unknown HNSW build parameter \"%s\" (allowed: M, "
                           "efConstruction)",
                           k);
    }
    sx_status rc = sx__param_int(p, np, "M", SX__HNSW_M_MIN, SX__HNSW_M_MAX, SX__HNSW_M_DEF, M);
    if (rc != SX_OK)
        return rc;
    return sx__param_int(p, np, "efConstruction", 1, SX__HNSW_EFC_MAX, SX__HNSW_EFC_DEF, efc);
}

sx_status sx__hnsw_check_build_params(const sx_param *p, size_t np)
{
    long M, efc;
    return parse_build(p, np, &M, &efc);
}

/* ---------------------------------------------------------------- allocation */

sx_status sx__hnsw_alloc(const void *vecs,
                         sx__vtype vt,
                         size_t n,
                         size_t dim,
                         sx_metric metric,
                         uint32_t M,
                         uint32_t efc,
                         uint8_t *levels,
                         sx__hnsw **out)
{
    sx__hnsw *h = sx__calloc(1, sizeof *h);
    /* explicit status returns (not sx__err's) so static analysis sees *out set on SX_OK */
    if (!h) {
        sx__free(levels);
        (void)sx__err(SX_ENOMEM, "HNSW: out of memory");
        return SX_ENOMEM;
    }
    h->vecs = vecs;
    h->n = n;
    h->dim = dim;
    h->vt = vt;
    h->row_bytes = sx__vtype_row_bytes(vt, dim);
    h->metric = metric;
    h->dist = sx__dist_for(metric, vt);
    h->M = M;
    h->M0 = 2 * M;
    h->efc = efc;
    h->entry = SX__HNSW_NONE;
    h->levels = levels;
    size_t l0_bytes = n * (h->M0 + 1) * sizeof(uint32_t);
    h->l0 = sx__malloc_aligned(l0_bytes);
    h->up_off = sx__malloc(n * sizeof *h->up_off);
    if (!h->l0 || !h->up_off)
        goto nomem;
    memset(h->l0, 0, l0_bytes);
    sx_status rc = sx__hnsw_upper_alloc(levels, n, M, h->up_off, &h->up, &h->n_up);
    if (rc != SX_OK) {
        sx__hnsw_free((sx__index *)h);
        (void)sx__err(rc, rc == SX_ENOMEM ? "HNSW: cannot allocate the upper levels"
                                          : "HNSW: too many upper-level lists");
        return rc;
    }
    *out = h;
    return SX_OK;
nomem:
    sx__hnsw_free((sx__index *)h);
    (void)sx__err(SX_ENOMEM, "HNSW: cannot allocate the graph for %zu nodes", n);
    return SX_ENOMEM;
}

sx_status sx__hnsw_upper_alloc(
    const uint8_t *levels, size_t n, uint32_t M, uint32_t *up_off, uint32_t **up, size_t *n_up)
{
    size_t blocks = 0;
    *up = NULL;
    *n_up = 0;
    for (size_t i = 0; i < n; i++) {
        if (levels[i] == 0) {
            up_off[i] = SX__HNSW_NONE;
            continue;
        }
        up_off[i] = (uint32_t)blocks;
        blocks += levels[i];
        if (blocks >= SX__HNSW_NONE)
            return SX_EINVAL;
    }
    if (blocks) {
        *up = sx__calloc(blocks * ((size_t)M + 1), sizeof(uint32_t));
        if (!*up)
            return SX_ENOMEM;
    }
    *n_up = blocks;
    return SX_OK;
}

void sx__hnsw_free(sx__index *idx)
{
    sx__hnsw *h = (sx__hnsw *)idx;
    if (!h)
        return;
    sx__free_aligned(h->l0);
    sx__free(h->levels);
    sx__free(h->up_off);
    sx__free(h->up);
    sx__free(h);
}

size_t sx__hnsw_memory_bytes(const sx__index *idx)
{
    const sx__hnsw *h = (const sx__hnsw *)idx;
    return sizeof *h + h->n * (h->M0 + 1) * sizeof(uint32_t) + h->n * (1 + sizeof(uint32_t)) +
           h->n_up * (h->M + 1) * sizeof(uint32_t);
}

/* ---------------------------------------------------------------- build state */

typedef struct build {
    sx__hnsw *h;
    uint8_t *locks;        /* n spinlocks, one per node's lists */
    _Atomic uint64_t ep;   /* (top level << 32) | entry id */
    pthread_mutex_t ep_mu; /* held while inserting a node above the top level */
    atomic_size_t next;    /* next node id to insert */
    atomic_bool stop;      /* canceled: workers stop at their next chunk */
    const sx__build_ctx *ctx;
    size_t ef; /* efConstruction capped at n (no search returns more) */
} build;

typedef struct worker {
    build *b;
    sx__graph_scratch s;
    sx__hit *w;   /* result of the last layer search (b->ef) */
    sx__hit *sel; /* neighbours chosen for the new node (M) */
    /* rows widened to float32 (dim each; NULL for float32 rows, used in place): the inserted
     * row, the heuristic's candidate, the reverse link's owner */
    float *qbuf, *hbuf, *lbuf;
    sx__hit *cands; /* shrink candidates (M0 + 1) */
    sx__hit *sel2;  /* shrink result (M0) */
    uint32_t *ids;  /* merged list (M0) */
    pthread_t tid;
    bool started;
} worker;

/* Publishes ids[0..cnt) as the list ll (caller holds the owner's lock). */
static void publish(uint32_t *ll, /* NOLINT(readability-non-const-parameter): __atomic stores */
                    const uint32_t *ids,
                    uint32_t cnt)
{
    for (uint32_t j = 0; j < cnt; j++)
        __atomic_store_n(ll + 1 + j, ids[j], __ATOMIC_RELAXED);
    __atomic_store_n(ll, cnt, __ATOMIC_RELEASE);
}

/* Alg. 4 SELECT-NEIGHBORS-HEURISTIC: walks cands (sorted best first by distance to the base
 * point) and keeps a candidate only if it is closer to the base than to every kept one, until m
 * are kept. Fewer than m candidates are all kept. Returns the number written to sel. */
static size_t select_heuristic(
    const sx__hnsw *h, const sx__hit *cands, size_t nc, size_t m, sx__hit *sel, float *buf)
{
    if (nc <= m) {
        memcpy(sel, cands, nc * sizeof *sel);
        return nc;
    }
    size_t ns = 0;
    for (size_t i = 0; i < nc && ns < m; i++) {
        const float *v = sx__hnsw_qvec(h, cands[i].id, buf);
        bool good = true;
        for (size_t j = 0; j < ns; j++) {
            if (h->dist(v, sx__hnsw_vec(h, sel[j].id), h->dim) < cands[i].dist) {
                good = false;
                break;
            }
        }
        if (good)
            sel[ns++] = cands[i];
    }
    return ns;
}

/* Sets node q's list at `level` to sel (plus any links other threads added meanwhile, while room
 * remains). */
static void set_links(worker *wk, uint32_t q, uint32_t level, const sx__hit *sel, size_t nsel)
{
    build *b = wk->b;
    sx__hnsw *h = b->h;
    uint32_t cap = level ? h->M : h->M0;
    sx__spin_lock(&b->locks[q]);
    uint32_t *ll = sx__hnsw_links(h, q, level);
    uint32_t old = ll[0], cnt = 0;
    for (size_t i = 0; i < nsel; i++)
        wk->ids[cnt++] = sel[i].id;
    for (uint32_t j = 0; j < old && cnt < cap; j++) {
        uint32_t id = ll[1 + j];
        bool dup = false;
        for (size_t i = 0; i < nsel && !dup; i++)
            dup = sel[i].id == id;
        if (!dup)
            wk->ids[cnt++] = id;
    }
    publish(ll, wk->ids, cnt);
    sx__spin_unlock(&b->locks[q]);
}

/* Adds the reverse link nb -> q at `level` (dq = distance(nb, q)); when nb is full, its list
 * plus q is shrunk back to the cap with the heuristic. */
static void add_link(worker *wk, uint32_t nb, uint32_t level, uint32_t q, float dq)
{
    build *b = wk->b;
    const sx__hnsw *h = b->h;
    uint32_t cap = level ? h->M : h->M0;
    sx__spin_lock(&b->locks[nb]);
    uint32_t *ll = sx__hnsw_links(h, nb, level);
    uint32_t cnt = ll[0];
    for (uint32_t j = 0; j < cnt; j++) {
        if (ll[1 + j] == q) {
            sx__spin_unlock(&b->locks[nb]);
            return;
        }
    }
    if (cnt < cap) {
        __atomic_store_n(ll + 1 + cnt, q, __ATOMIC_RELAXED);
        __atomic_store_n(ll, cnt + 1, __ATOMIC_RELEASE);
        sx__spin_unlock(&b->locks[nb]);
        return;
    }
    const float *v = sx__hnsw_qvec(h, nb, wk->lbuf);
    sx__hit *c = wk->cands;
    size_t nc = 0;
    /* insertion sort by distance to nb: at most M0 + 1 entries */
    for (uint32_t j = 0; j <= cnt; j++) {
        sx__hit x;
        if (j < cnt) {
            x.id = ll[1 + j];
            x.dist = h->dist(v, sx__hnsw_vec(h, x.id), h->dim);
        } else {
            x.id = q;
            x.dist = dq;
        }
        size_t i = nc++;
        while (i > 0 && c[i - 1].dist > x.dist) {
            c[i] = c[i - 1];
            i--;
        }
        c[i] = x;
    }
    size_t ns = select_heuristic(h, c, nc, cap, wk->sel2, wk->hbuf);
    for (size_t i = 0; i < ns; i++)
        wk->ids[i] = wk->sel2[i].id;
    publish(ll, wk->ids, (uint32_t)ns);
    sx__spin_unlock(&b->locks[nb]);
}

/* Alg. 1 INSERT of node q (its level is levels[q]). */
static void insert(worker *wk, uint32_t q)
{
    build *b = wk->b;
    sx__hnsw *h = b->h;
    const float *qv = sx__hnsw_qvec(h, q, wk->qbuf);
    uint32_t L = h->levels[q];
    uint64_t ep = atomic_load_explicit(&b->ep, memory_order_acquire);
    bool locked = false;
    if (L > (uint32_t)(ep >> 32)) {
        pthread_mutex_lock(&b->ep_mu);
        locked = true;
        ep = atomic_load_explicit(&b->ep, memory_order_acquire);
        if (L <= (uint32_t)(ep >> 32)) {
            pthread_mutex_unlock(&b->ep_mu);
            locked = false;
        }
    }
    uint32_t top = (uint32_t)(ep >> 32), cur = (uint32_t)ep;
    float d = h->dist(qv, sx__hnsw_vec(h, cur), h->dim);
    if (top > L)
        cur = sx__hnsw_greedy(h, qv, cur, &d, top, L + 1, true);
    sx__hit seed = { d, cur };
    const sx__hit *seeds = &seed;
    size_t nseeds = 1;
    for (uint32_t l = L < top ? L : top;; l--) {
        size_t nw = sx__hnsw_search_level_build(h, &wk->s, qv, seeds, nseeds, b->ef, l, q);
        memcpy(wk->w, wk->s.pool, nw * sizeof *wk->w);
        size_t nsel = select_heuristic(h, wk->w, nw, h->M, wk->sel, wk->hbuf);
        set_links(wk, q, l, wk->sel, nsel);
        for (size_t i = 0; i < nsel; i++)
            add_link(wk, wk->sel[i].id, l, q, wk->sel[i].dist);
        seeds = wk->w;
        nseeds = nw;
        if (l == 0)
            break;
    }
    if (locked) {
        atomic_store_explicit(&b->ep, (uint64_t)L << 32 | q, memory_order_release);
        pthread_mutex_unlock(&b->ep_mu);
    }
}

static void *worker_main(void *arg)
{
    worker *wk = arg;
    build *b = wk->b;
    size_t n = b->h->n;
    const sx__build_ctx *ctx = b->ctx;
    for (;;) {
        if (atomic_load_explicit(&b->stop, memory_order_relaxed))
            break;
        if (ctx && ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed)) {
            atomic_store_explicit(&b->stop, true, memory_order_relaxed);
            break;
        }
        size_t i = atomic_fetch_add_explicit(&b->next, CHUNK, memory_order_relaxed);
        if (i >= n)
            break;
        size_t end = i + CHUNK < n ? i + CHUNK : n;
        for (size_t q = i; q < end; q++)
            insert(wk, (uint32_t)q);
        if (ctx && ctx->progress)
            atomic_fetch_add_explicit(ctx->progress, end - i, memory_order_relaxed);
    }
    return NULL;
}

static sx_status worker_init(worker *wk, build *b)
{
    const sx__hnsw *h = b->h;
    memset(wk, 0, sizeof *wk);
    wk->b = b;
    sx_status rc = sx__graph_scratch_reserve(&wk->s, h->n, b->ef, h->M0, "HNSW");
    if (rc != SX_OK)
        return rc;
    wk->w = sx__malloc(b->ef * sizeof *wk->w);
    wk->sel = sx__malloc((h->M0 + 1) * sizeof *wk->sel);
    wk->cands = sx__malloc((h->M0 + 1) * sizeof *wk->cands);
    wk->sel2 = sx__malloc((h->M0 + 1) * sizeof *wk->sel2);
    wk->ids = sx__malloc((h->M0 + 1) * sizeof *wk->ids);
    if (!wk->w || !wk->sel || !wk->cands || !wk->sel2 || !wk->ids)
        return sx__err(SX_ENOMEM, "HNSW: cannot allocate build scratch");
    if (h->vt != SX__VT_F32) {
        wk->qbuf = sx__malloc(3 * h->dim * sizeof(float));
        if (!wk->qbuf)
            return sx__err(SX_ENOMEM, "HNSW: cannot allocate build scratch");
        wk->hbuf = wk->qbuf + h->dim;
        wk->lbuf = wk->hbuf + h->dim;
    }
    return SX_OK;
}

static void worker_fini(worker *wk)
{
    sx__graph_scratch_fini(&wk->s);
    sx__free(wk->w);
    sx__free(wk->sel);
    sx__free(wk->cands);
    sx__free(wk->sel2);
    sx__free(wk->ids);
    sx__free(wk->qbuf);
}

/* ---------------------------------------------------------------- repair */

/* sx__graph_repair's distance: between the rows of nodes a and b (a widened into buf when the
 * rows are not float32). */
typedef struct repair_ctx {
    const sx__hnsw *h;
    float *buf;
} repair_ctx;

static float node_dist(const void *ctx, uint32_t a, uint32_t b)
{
    const repair_ctx *r = ctx;
    const sx__hnsw *h = r->h;
    return h->dist(sx__hnsw_qvec(h, a, r->buf), sx__hnsw_vec(h, b), h->dim);
}

/* Makes every node reachable from the entry point at level 0 and checks it (invariant 5).
 * Single-threaded, after the workers have joined; wk: the first worker (its scratch is free). */
static sx_status repair(const build *b, const worker *wk)
{
    const sx__hnsw *h = b->h;
    sx__graph_view v = sx__hnsw_l0_view(h);
    repair_ctx rctx = { h, wk->qbuf };
    sx__graph_repair_opts o = { node_dist, &rctx, b->ef };
    sx_status rc = sx__graph_repair(&v, &h->entry, 1, &o, NULL);
    if (rc == SX_OK)
        rc = sx__graph_check_reach(&v, &h->entry, 1, "HNSW build", "the entry point");
    return rc;
}

/* ---------------------------------------------------------------- build */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint8_t draw_level(uint64_t i, double mult)
{
    double u = (double)((splitmix64(LEVEL_SEED ^ splitmix64(i)) >> 11) + 1) * 0x1p-53;
    double l = -log(u) * mult;
    return l >= (double)SX__HNSW_MAX_LEVEL ? (uint8_t)SX__HNSW_MAX_LEVEL : (uint8_t)l;
}

sx_status sx__hnsw_build(const sx_param *p,
                         size_t np,
                         const float *vecs,
                         size_t n,
                         size_t dim,
                         sx_metric metric,
                         const sx__build_ctx *ctx,
                         sx__index **out)
{
    return sx__hnsw_build_typed(p, np, vecs, SX__VT_F32, n, dim, metric, ctx, out);
}

sx_status sx__hnsw_build_typed(const sx_param *p,
                               size_t np,
                               const void *vecs,
                               sx__vtype vt,
                               size_t n,
                               size_t dim,
                               sx_metric metric,
                               const sx__build_ctx *ctx,
                               sx__index **out)
{
    long M = SX__HNSW_M_DEF, efc = SX__HNSW_EFC_DEF;
    sx_status rc = parse_build(p, np, &M, &efc);
    if (rc != SX_OK)
        return rc;
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "HNSW: dim %zu out of range 1..%u", dim, SX_MAX_DIM);
    if (n > SX__HNSW_MAX_N)
        return sx__err(SX_EINVAL, "HNSW: %zu rows exceed the limit of %zu per index", n,
                       SX__HNSW_MAX_N);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "HNSW: no vectors");
    if (vt == SX__VT_BIN || !sx__metric_fits(vt, metric))
        return sx__err(SX_EINVAL, "HNSW: metric %d on %s rows is not supported", (int)metric,
                       sx__vtype_name(vt));

    uint8_t *levels = sx__malloc(n ? n : 1);
    if (!levels)
        return sx__err(SX_ENOMEM, "HNSW: out of memory");
    double mult = 1.0 / log((double)M);
    for (size_t i = 0; i < n; i++)
        levels[i] = draw_level(i, mult);
    sx__hnsw *h = NULL;
    rc = sx__hnsw_alloc(vecs, vt, n, dim, metric, (uint32_t)M, (uint32_t)efc, levels, &h);
    if (rc != SX_OK)
        return rc;
    if (n == 0) {
        *out = (sx__index *)h;
        return SX_OK;
    }

    size_t nthreads = ctx && ctx->threads > 0 ? ctx->threads : 1;
    if (nthreads > (n + CHUNK - 1) / CHUNK)
        nthreads = (n + CHUNK - 1) / CHUNK;
    build b;
    memset(&b, 0, sizeof b);
    b.h = h;
    b.ctx = ctx;
    b.ef = (size_t)efc < n ? (size_t)efc : n;
    atomic_init(&b.ep, (uint64_t)levels[0] << 32);
    atomic_init(&b.next, 1);
    atomic_init(&b.stop, false);
    b.locks = sx__calloc(n, 1);
    worker *wk = sx__calloc(nthreads, sizeof *wk);
    if (!b.locks || !wk) {
        sx__free(b.locks);
        sx__free(wk);
        sx__hnsw_free((sx__index *)h);
        return sx__err(SX_ENOMEM, "HNSW: cannot allocate build state");
    }
    if (pthread_mutex_init(&b.ep_mu, NULL) != 0) {
        sx__free(b.locks);
        sx__free(wk);
        sx__hnsw_free((sx__index *)h);
        return sx__err(SX_ENOMEM, "HNSW: cannot create a mutex");
    }
    for (size_t t = 0; t < nthreads && rc == SX_OK; t++)
        rc = worker_init(&wk[t], &b);
    if (rc == SX_OK) {
        if (ctx && ctx->progress)
            atomic_fetch_add_explicit(ctx->progress, 1, memory_order_relaxed);
        for (size_t t = 1; t < nthreads; t++)
            wk[t].started = pthread_create(&wk[t].tid, NULL, worker_main, &wk[t]) == 0;
        (void)worker_main(&wk[0]);
        for (size_t t = 1; t < nthreads; t++)
            if (wk[t].started)
                (void)pthread_join(wk[t].tid, NULL);
        if (atomic_load_explicit(&b.stop, memory_order_relaxed))
            rc = sx__err(SX_ECANCELED, "HNSW build canceled");
    }
    if (rc == SX_OK) {
        uint64_t ep = atomic_load_explicit(&b.ep, memory_order_acquire);
        h->entry = (uint32_t)ep;
        h->max_level = (uint32_t)(ep >> 32);
        rc = repair(&b, &wk[0]);
    }
    for (size_t t = 0; t < nthreads; t++)
        worker_fini(&wk[t]);
    (void)pthread_mutex_destroy(&b.ep_mu);
    sx__free(b.locks);
    sx__free(wk);
    if (rc != SX_OK) {
        sx__hnsw_free((sx__index *)h);
        return rc;
    }
    *out = (sx__index *)h;
    return SX_OK;
}

/* Peak bytes of a build (for index_build_memory_limit): the graph (level-0 lists of 2M+1 ids,
 * levels and upper-list offsets, upper lists for the expected n/(M-1) blocks), the build's
 * per-node locks (n bytes) and the repair's arrays (sx__graph_repair_bytes, ~14n), and per thread
 * a visited set of 4 bytes per node plus small candidate buffers; threads = online CPUs. */
static uint64_t estimate_build_bytes(const sx_param *p, size_t np, size_t n, size_t dim)
{
    long M = 16, efc = 200;
    (void)dim;
    if (sx__param_int(p, np, "M", 2, 2048, 16, &M) != SX_OK)
        M = 16;
    if (sx__param_int(p, np, "efConstruction", 1, SX__HNSW_EFC_MAX, 200, &efc) != SX_OK)
        efc = 200;
    uint64_t nn = n, m = (uint64_t)M;
    uint64_t graph = nn * (2 * m + 1) * 4 + nn * 5 + (nn / (m - 1) + 1) * (m + 1) * 4;
    size_t ef = (size_t)efc < n ? (size_t)efc : n;
    uint64_t temps = nn + sx__graph_repair_bytes(n, (uint32_t)(2 * m), ef);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t threads = cpus > 0 ? (uint64_t)cpus : 1;
    uint64_t per_thread = nn * 4 + ((uint64_t)efc + 5 * (2 * m + 1)) * 16;
    return graph + temps + threads * per_thread;
}

/* ---------------------------------------------------------------- vtable */

const sx__index_ops sx__hnsw_index_ops = {
    .name = "HNSW",
    .check_build_params = sx__hnsw_check_build_params,
    .check_search_params = sx__hnsw_check_search_params,
    .build = sx__hnsw_build,
    .search = sx__hnsw_search,
    .filter_cost = sx__hnsw_filter_cost,
    .serialize = sx__hnsw_serialize,
    .deserialize = sx__hnsw_deserialize,
    .memory_bytes = sx__hnsw_memory_bytes,
    .free = sx__hnsw_free,
    .estimate_build_bytes = estimate_build_bytes,
    .vtypes = 1u << SX__VT_F32 | 1u << SX__VT_F16 | 1u << SX__VT_BF16,
    .build_typed = sx__hnsw_build_typed,
    .deserialize_typed = sx__hnsw_deserialize_typed,
    .search_typed = sx__hnsw_search_typed,
};
