/*
 * vamana_build.c: DISKANN construction (Subramanya et al., "DiskANN", NeurIPS 2019): the Vamana
 * graph (Alg. 3, with GreedySearch = Alg. 1 and RobustPrune = Alg. 2), PQ codes for search, the
 * memory plan, the partitioned build of Section 4.2 ("build in overlapping partitions"), and the
 * vtable.
 *
 * Vamana. Two passes over a random permutation of the nodes, the first with alpha = 1, the second
 * with the user's alpha (Section 2.3: the first pass finds good short edges fast, the second adds
 * the long-range edges that bound the search's hop count). Inserting p: GreedySearch(medoid, p, L)
 * gives the set V of expanded nodes; N_out(p) = RobustPrune(p, V u N_out(p), alpha, R); for each
 * new neighbour j, p is added to N_out(j), and when that list would exceed its capacity it is
 * pruned with RobustPrune(j, N_out(j) u {p}, alpha, R). The graph starts empty (as the reference
 * implementation does; the first pass builds it, the paper's random initial graph is not needed).
 * Lists have a slack capacity of R + 30% (the reference's GRAPH_SLACK_FACTOR 1.3): a full list is
 * pruned back to R only when the slack is used up, which divides the pruning work; a final sweep
 * prunes every list longer than R, so the graph written has degree <= R.
 * RobustPrune compares alpha * d(p*, p') <= d(p, p') on squared L2 distances, as the reference
 * implementation does (so alpha = 1.2 here is sqrt(1.2) on plain Euclidean distances).
 * The medoid (entry point) is the node nearest to the mean vector.
 *
 * Metrics. The graph is built in L2 geometry. COSINE vectors are unit length, so L2 order is
 * cosine order. For IP each vector x gets an implicit extra coordinate sqrt(M^2 - |x|^2) (M the
 * largest norm; Bachrach et al., RecSys 2014): L2 order in that space between a query (extra
 * coordinate 0) and the points is inner-product order, so the graph suits IP searches.
 *
 * Memory plan (ctx->memory_limit_bytes; 0 = unlimited). Every allocation of the build is
 * accounted (struct budget) and the k-means phases are bounded with sx__kmeans_train_bytes;
 * the segment's vectors are borrowed, but under a limit the in-memory plan counts them (the
 * graph reads them in a random order, so they must be resident, page cache or not) and the
 * partitioned plan counts each shard's gathered copy. The
 * phases run one after the other and the plan checks each against the limit: PQ training   one
 * sub-space's k-means + the codebooks (2 * 256 * dim * 4 bytes); graph         codebooks + the
 * graph (n * (1.3R + 1) * 4 bytes + locks + permutation) + per-thread search scratch (n*2 visited
 * tags + pool + prune buffers) + repair arrays + the file writer's batch; codes         codebooks +
 * the n*m PQ codes, encoded only once the graph is on disk and freed: the codes are the index's
 * RAM, so a limit below them fails (SX_ENOMEM); partitioned   when the graph phase exceeds the
 * limit: S shards, each with at most C nodes, sized so that the shard assignments + one shard's
 * graph phase fits; the shards are k-means clusters of a sample (k = S, trained first of all),
 * every node joins its 2 nearest shards that still have room (capacity C >= 2.3n/S and (S-1)C > 2n,
 * so two shards always have room), each shard is built with Vamana (its own medoid) on a copy of
 * its vectors in RAM (gathered in one forward pass over the segment, counted in the shard's phase:
 * a shard's build then touches no page of a segment the page cache cannot hold) and written to
 *                 <path>.shard<i>.tmp as fixed-size neighbour lists in global-id order, and the
 *                 merge streams the S files in node order (read buffers and the write batch
 *                 shrink to fit): a node's lists from its two shards are united and, if longer
 *                 than R, shuffled and cut to R, as DiskANN's merge_shards does (a RobustPrune
 *                 there would read ~2R random rows per node). Then the connectivity repair
 *                 below runs on the file.
 * If no S <= 65535 fits (shards would be smaller than max(4R, 256) nodes) the build fails with
 * SX_ENOMEM naming the limit before allocating anything.
 *
 * Repair. RobustPrune can leave a node without in-links. After the graph is final,
 * sx__graph_repair (graph.h) makes every node reachable from the medoid, the node every search
 * starts from (invariant 5 of diskann.h): one BFS from the medoid, then each unreached node is
 * linked from a reached node near it (found by a search from the medoid with the node as query)
 * that has room, or else gives up one of its non-tree links; the proof in graph.h shows this
 * always succeeds in one pass, with every list still <= R. sx__graph_check_reach then verifies
 * it. In the partitioned build the same repair and check run on the written tmp file, through a
 * store that reads a node's slot, patches its list and re-seals the slot in place, before the
 * file is synced and renamed.
 *
 * Threading. ctx->threads workers (the calling thread is one of them) take chunks of the
 * permutation from an atomic counter. Each node's list is guarded by a 1-byte spinlock; readers
 * copy a list under its lock (so no torn reads, TSan-clean) and never hold two locks. Progress:
 * relaxed adds per chunk; cancel: relaxed loads per chunk (first seen -> every worker stops).
 */
#include <errno.h>
#if defined(__GLIBC__)
# include <malloc.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "index/diskann/diskann.h"
#include "index/graph/graph.h"
#include "platform/fs.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"
#include "vector/kmeans.h"

#define CHUNK           16u
#define SLACK_NUM       13u /* list capacity = R * 13 / 10 */
#define SLACK_DEN       10u
#define DEFAULT_SEED    0xD15CA22ull
#define WRITE_BATCH     ((size_t)1 << 20)
#define SHARD_SLACK     1.15
#define MIN_SHARD_NODES 256u
#define STREAM_BUF_MAX  ((size_t)64 << 10)
/* pool of the repair's parent search on the partitioned build's file (each expansion is a slot
 * read); the in-memory repair uses search_list_size */
#define FILE_REPAIR_EF  64u
/* The plan budgets (100 - HEADROOM_PCT)% of the limit: the rest absorbs what the accounting
 * cannot see (allocator slack between phases, OpenBLAS's packing buffers during k-means), so the
 * process's RSS growth stays under the limit too (measured with bench/diskann_bench). */
#define HEADROOM_PCT    10u

/* ---------------------------------------------------------------- params */

typedef struct params {
    long R, L;
    double alpha, ratio, cache_ratio;
} params;

static bool is_key(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, list[i]) == 0)
            return true;
    return false;
}

/* A float param in [lo, hi] (lo exclusive when lo_open); absent -> def. */
static sx_status param_double(const sx_param *p,
                              size_t np,
                              const char *key,
                              double lo,
                              bool lo_open,
                              double hi,
                              double def,
                              double *out)
{
    for (size_t i = 0; i < np; i++) {
        if (strcmp(p[i].key, key) != 0)
            continue;
        const char *s = p[i].value;
        char *end = NULL;
        errno = 0;
        double v = s ? strtod(s, &end) : 0.0;
        if (!s || end == s || *end != '\0' || errno != 0 || !isfinite(v) ||
            (lo_open ? !(v > lo) : !(v >= lo)) || !(v <= hi))
            return sx__err(SX_EINVAL, "%s must be a number in %c%g, %g], got \"%s\"", key,
                           lo_open ? '(' : '[', lo, hi, s ? s : "");
        *out = v;
        return SX_OK;
    }
    *out = def;
    return SX_OK;
}

static sx_status parse_build(const sx_param *p, size_t np, params *pp)
{
    static const char *const known[] = { "max_degree",
                                         "search_list_size",
                                         "alpha",
                                         "pq_code_budget_gb_ratio",
                                         "search_cache_budget_gb_ratio",
                                         "index_type",
                                         "metric_type",
                                         "metricType" };
    for (size_t i = 0; i < np; i++) {
        if (!p[i].key)
            return sx__err(SX_EINVAL, "DISKANN build parameter %zu has no key", i);
        if (!is_key(p[i].key, known, sizeof known / sizeof known[0]))
            return sx__err(SX_EINVAL,
                           "unknown DISKANN build parameter \"%s\" (allowed: "
                           "max_degree, search_list_size, alpha, pq_code_budget_gb_ratio, "
                           "search_cache_budget_gb_ratio)",
                           p[i].key);
    }
    sx_status rc =
        sx__param_int(p, np, "max_degree", 1, SX__DISKANN_R_MAX, SX__DISKANN_R_DEF, &pp->R);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "search_list_size", 1, SX__DISKANN_L_MAX, SX__DISKANN_L_DEF,
                           &pp->L);
    if (rc == SX_OK)
        rc = param_double(p, np, "alpha", SX__DISKANN_ALPHA_MIN, false, SX__DISKANN_ALPHA_MAX,
                          SX__DISKANN_ALPHA_DEF, &pp->alpha);
    if (rc == SX_OK)
        rc = param_double(p, np, "pq_code_budget_gb_ratio", 0.0, true, SX__DISKANN_PQ_RATIO_MAX,
                          SX__DISKANN_PQ_RATIO_DEF, &pp->ratio);
    /* Milvus's node-cache budget: the cached slots' bytes over the raw vector bytes */
    if (rc == SX_OK)
        rc = param_double(p, np, "search_cache_budget_gb_ratio", 0.0, false,
                          SX__DISKANN_CACHE_RATIO_MAX, 0.0, &pp->cache_ratio);
    return rc;
}

sx_status sx__diskann_check_build_params(const sx_param *p, size_t np)
{
    params pp;
    return parse_build(p, np, &pp);
}

uint32_t sx__diskann_choose_m(size_t dim, double ratio)
{
    double target = floor(ratio * (double)dim * 4.0);
    if (target < 1.0)
        return 1;
    if (target >= (double)dim)
        return (uint32_t)dim;
    for (size_t m = (size_t)target; m > 1; m--)
        if (dim % m == 0)
            return (uint32_t)m;
    return 1;
}

/* ---------------------------------------------------------------- accounting */

typedef struct budget {
    uint64_t cur, peak;
} budget;

static void *b_alloc(budget *b, size_t bytes)
{
    void *p = sx__malloc(bytes ? bytes : 1);
    if (p) {
        b->cur += bytes;
        if (b->cur > b->peak)
            b->peak = b->cur;
    }
    return p;
}

static void *b_calloc(budget *b, size_t bytes)
{
    void *p = b_alloc(b, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

static void b_free(budget *b, void *p, size_t bytes)
{
    if (!p)
        return;
    sx__free(p);
    b->cur -= bytes;
}

/* Returns freed heap pages to the system between phases (glibc keeps them otherwise, and the
 * next phase's RSS would add to the last one's). A no-op elsewhere. */
static void release_free_pages(void)
{
#if defined(__GLIBC__)
    (void)malloc_trim(0);
#endif
}

/* Records a transient peak that happened outside b_alloc (k-means, the PQ codebooks). */
static void b_note(budget *b, uint64_t extra)
{
    if (b->cur + extra > b->peak)
        b->peak = b->cur + extra;
}

/* ---------------------------------------------------------------- geometry */

typedef struct geom {
    const float *vecs;
    size_t dim;
    sx__dist_fn l2;
    const float *ext; /* IP: the extra coordinate per global id; NULL otherwise */
} geom;

static inline const float *gvec(const geom *g, uint32_t id)
{
    return g->vecs + (size_t)id * g->dim;
}

static inline float gdist(const geom *g, uint32_t a, uint32_t b)
{
    float d = g->l2(gvec(g, a), gvec(g, b), g->dim);
    if (g->ext) {
        float t = g->ext[a] - g->ext[b];
        d += t * t;
    }
    return d;
}

/* The node among ids[0..n) (or 0..n-1 when ids is NULL) nearest to their mean. */
static uint32_t medoid_of(const geom *g, const uint32_t *ids, size_t n, double *acc, float *mean)
{
    size_t dim = g->dim;
    memset(acc, 0, dim * sizeof *acc);
    for (size_t i = 0; i < n; i++) {
        const float *v = gvec(g, ids ? ids[i] : (uint32_t)i);
        for (size_t d = 0; d < dim; d++)
            acc[d] += (double)v[d];
    }
    for (size_t d = 0; d < dim; d++)
        mean[d] = (float)(acc[d] / (double)n);
    uint32_t best = 0;
    float bd = __builtin_inff();
    for (size_t i = 0; i < n; i++) {
        float dd = g->l2(mean, gvec(g, ids ? ids[i] : (uint32_t)i), dim);
        if (dd < bd) {
            bd = dd;
            best = (uint32_t)i;
        }
    }
    return best; /* local index */
}

/* ---------------------------------------------------------------- Vamana on a node set */

typedef struct vgraph {
    size_t n;            /* nodes (local ids 0..n-1) */
    const uint32_t *gid; /* local -> global id; NULL = identity */
    const geom *g;
    const geom *lg; /* a shard's vectors gathered in local order (build_partitioned), or NULL:
                     * distances read g at gid[] */
    uint32_t R, cap, stride; /* cap = slack capacity, stride = cap + 1 */
    uint32_t L;
    uint32_t *adj; /* n * stride: count, then ids (local) */
    uint8_t *locks;
    uint32_t medoid; /* local */
} vgraph;

static inline uint32_t *vlist(const vgraph *v, uint32_t id)
{
    return v->adj + (size_t)id * v->stride;
}

static inline uint32_t gl(const vgraph *v, uint32_t local)
{
    return v->gid ? v->gid[local] : local;
}

static inline float vdist(const vgraph *v, uint32_t a, uint32_t b)
{
    return v->lg ? gdist(v->lg, a, b) : gdist(v->g, gl(v, a), gl(v, b));
}

static inline const float *vvec(const vgraph *v, uint32_t local)
{
    return v->lg ? gvec(v->lg, local) : gvec(v->g, gl(v, local));
}

typedef struct vbuild vbuild;

typedef struct worker {
    vbuild *b;
    sx__visited vis; /* n tags, from the budget */
    sx__hit *pool;   /* L + 1 */
    sx__hit *exp;    /* expanded nodes, vcap */
    size_t nexp, vcap;
    sx__hit *cand;  /* prune candidates, vcap + cap + 1 */
    uint8_t *rm;    /* same */
    uint32_t *list; /* a copied list, cap */
    uint32_t *sel;  /* the new node's neighbours, R */
    uint32_t *sel2; /* a back-edge prune's result, R */
    pthread_t tid;
    bool started;
} worker;

struct vbuild {
    vgraph *v;
    const uint32_t *perm;
    float alpha;
    atomic_size_t next;
    atomic_bool stop;
    const sx__build_ctx *ctx;
    atomic_size_t *done; /* work units done (shared by all shards and passes) */
    size_t total_units;  /* for progress = done * n_total / total_units */
    size_t n_total;
    int pass; /* 0: insertion passes; 1: final prune */
};

static size_t worker_bytes(size_t n, size_t L, size_t cap, size_t R)
{
    size_t vcap = 2 * L + R;
    return n * sizeof(uint16_t) + (L + 1) * sizeof(sx__hit) + vcap * sizeof(sx__hit) +
           (vcap + cap + 1) * (sizeof(sx__hit) + 1) + cap * 4 + 2 * R * 4 + 64;
}

static void worker_fini(budget *bd, worker *w, size_t n, size_t L, size_t cap, size_t R)
{
    size_t vcap = 2 * L + R;
    b_free(bd, w->vis.tags, n * sizeof *w->vis.tags);
    b_free(bd, w->pool, (L + 1) * sizeof *w->pool);
    b_free(bd, w->exp, vcap * sizeof *w->exp);
    b_free(bd, w->cand, (vcap + cap + 1) * sizeof *w->cand);
    b_free(bd, w->rm, vcap + cap + 1);
    b_free(bd, w->list, cap * 4);
    b_free(bd, w->sel, R * 4);
    b_free(bd, w->sel2, R * 4);
    memset(w, 0, sizeof *w);
}

static bool worker_init(budget *bd, worker *w, size_t n, size_t L, size_t cap, size_t R)
{
    memset(w, 0, sizeof *w);
    size_t vcap = 2 * L + R;
    w->vcap = vcap;
    w->vis.tags = b_calloc(bd, n * sizeof *w->vis.tags);
    w->vis.cap = n;
    w->pool = b_alloc(bd, (L + 1) * sizeof *w->pool);
    w->exp = b_alloc(bd, vcap * sizeof *w->exp);
    w->cand = b_alloc(bd, (vcap + cap + 1) * sizeof *w->cand);
    w->rm = b_alloc(bd, vcap + cap + 1);
    w->list = b_alloc(bd, cap * 4);
    w->sel = b_alloc(bd, R * 4);
    w->sel2 = b_alloc(bd, R * 4);
    if (!w->vis.tags || !w->pool || !w->exp || !w->cand || !w->rm || !w->list || !w->sel ||
        !w->sel2) {
        worker_fini(bd, w, n, L, cap, R);
        return false;
    }
    w->vcap = vcap;
    return true;
}

/* Copies node id's list into buf under its lock; returns the count. */
static uint32_t copy_list(const vgraph *v, uint32_t id, uint32_t *buf)
{
    uint32_t *ll = vlist(v, id);
    sx__spin_lock(&v->locks[id]);
    uint32_t c = ll[0];
    memcpy(buf, ll + 1, c * sizeof *buf);
    sx__spin_unlock(&v->locks[id]);
    return c;
}

/* What greedy's expansion callback needs. */
typedef struct gctx {
    const vgraph *v;
    worker *w;
    uint32_t p; /* the query: node p */
    size_t L;
} gctx;

/* graph.h's sx__graph_expand_fn: records c as expanded (for RobustPrune's candidates), copies
 * its list under its lock and offers its unvisited neighbours. */
static size_t expand(void *vx, uint32_t c, float cd, size_t *size)
{
    const gctx *x = vx;
    const vgraph *v = x->v;
    worker *w = x->w;
    if (w->nexp < w->vcap) {
        w->exp[w->nexp].dist = cd;
        w->exp[w->nexp].id = c;
        w->nexp++;
    }
    uint32_t cnt = copy_list(v, c, w->list);
    size_t lowest = SIZE_MAX;
    for (uint32_t j = 0; j < cnt; j++) {
        uint32_t nb = w->list[j];
        if (sx__visited_test_set(&w->vis, nb))
            continue;
        if (j + 1 < cnt)
            __builtin_prefetch(vvec(v, w->list[j + 1]), 0, 3);
        size_t pos = sx__pool_insert(w->pool, size, x->L, vdist(v, x->p, nb), nb);
        if (pos < lowest)
            lowest = pos;
    }
    return lowest;
}

static void prefetch_none(void *vx, uint32_t id)
{
    (void)vx;
    (void)id;
}

/* Alg. 1 GreedySearch(medoid, q = node p, L): fills w->exp with the expanded nodes and their
 * distances to p (p itself excluded, at most vcap of them, the closest being expanded first).
 * Returns the pool size; w->pool is sorted best first. */
static size_t greedy(const vgraph *v, worker *w, uint32_t p, size_t L)
{
    w->nexp = 0;
    sx__hit med = { v->medoid != p ? vdist(v, p, v->medoid) : 0.0f, v->medoid };
    size_t size = sx__pool_start(&w->vis, w->pool, L, &med, 1, p);
    gctx x = { v, w, p, L };
    size = sx__graph_pool_search(w->pool, size, 1, 0, NULL, expand, prefetch_none, &x);
    sx__pool_unflag(w->pool, size);
    return size;
}

static int hit_cmp(const void *a, const void *b)
{
    const sx__hit *x = a, *y = b;
    if (x->dist < y->dist)
        return -1;
    if (x->dist > y->dist)
        return 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Alg. 2 RobustPrune(p, cand, alpha, R): cand[0..nc) hold distinct ids != p with their distances
 * to p. Writes at most R ids to out, returns the count. */
static uint32_t
robust_prune(const vgraph *v, worker *w, sx__hit *cand, size_t nc, float alpha, uint32_t *out)
{
    qsort(cand, nc, sizeof *cand, hit_cmp);
    memset(w->rm, 0, nc);
    uint32_t ns = 0;
    for (size_t i = 0; i < nc && ns < v->R; i++) {
        if (w->rm[i])
            continue;
        uint32_t pi = cand[i].id;
        out[ns++] = pi;
        if (ns == v->R)
            break;
        for (size_t j = i + 1; j < nc; j++) {
            if (w->rm[j])
                continue;
            float djk = vdist(v, pi, cand[j].id);
            if (alpha * djk <= cand[j].dist)
                w->rm[j] = 1;
        }
    }
    return ns;
}

/* Writes ids as node id's list (caller holds its lock or is alone). */
static void set_list(const vgraph *v, uint32_t id, const uint32_t *ids, uint32_t cnt)
{
    uint32_t *ll = vlist(v, id);
    memcpy(ll + 1, ids, cnt * sizeof *ids);
    ll[0] = cnt;
}

static void insert_node(const vgraph *v, worker *w, uint32_t p, float alpha)
{
    greedy(v, w, p, v->L);
    /* candidates: expanded nodes u current out-neighbours (deduplicated with a fresh epoch) */
    sx__visited_next(&w->vis);
    (void)sx__visited_test_set(&w->vis, p);
    size_t nc = 0;
    for (size_t i = 0; i < w->nexp; i++) {
        if (!sx__visited_test_set(&w->vis, w->exp[i].id))
            w->cand[nc++] = w->exp[i];
    }
    uint32_t cnt = copy_list(v, p, w->list);
    for (uint32_t j = 0; j < cnt; j++) {
        uint32_t id = w->list[j];
        if (sx__visited_test_set(&w->vis, id))
            continue;
        w->cand[nc].id = id;
        w->cand[nc].dist = vdist(v, p, id);
        nc++;
    }
    uint32_t ns = robust_prune(v, w, w->cand, nc, alpha, w->sel);
    sx__spin_lock(&v->locks[p]);
    set_list(v, p, w->sel, ns);
    sx__spin_unlock(&v->locks[p]);

    /* back edges */
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t j = w->sel[s];
        uint32_t *ll = vlist(v, j);
        sx__spin_lock(&v->locks[j]);
        uint32_t c = ll[0];
        bool present = false;
        for (uint32_t t = 1; t <= c; t++) {
            if (ll[t] == p) {
                present = true;
                break;
            }
        }
        if (!present) {
            if (c < v->cap) {
                ll[1 + c] = p;
                ll[0] = c + 1;
            } else {
                size_t m = 0;
                for (uint32_t t = 1; t <= c; t++) {
                    w->cand[m].id = ll[t];
                    w->cand[m].dist = vdist(v, j, ll[t]);
                    m++;
                }
                w->cand[m].id = p;
                w->cand[m].dist = vdist(v, j, p);
                m++;
                uint32_t n2 = robust_prune(v, w, w->cand, m, alpha, w->sel2);
                set_list(v, j, w->sel2, n2);
            }
        }
        sx__spin_unlock(&v->locks[j]);
    }
}

/* Final sweep: a list longer than R is pruned to R (no concurrent writers). */
static void shrink_node(const vgraph *v, worker *w, uint32_t p, float alpha)
{
    uint32_t *ll = vlist(v, p);
    uint32_t c = ll[0];
    if (c <= v->R)
        return;
    for (uint32_t t = 0; t < c; t++) {
        w->cand[t].id = ll[1 + t];
        w->cand[t].dist = vdist(v, p, ll[1 + t]);
    }
    uint32_t n2 = robust_prune(v, w, w->cand, c, alpha, w->sel2);
    set_list(v, p, w->sel2, n2);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    vbuild *b = w->b;
    const vgraph *v = b->v;
    size_t n = v->n;
    for (;;) {
        if (atomic_load_explicit(&b->stop, memory_order_relaxed))
            break;
        if (b->ctx && b->ctx->cancel &&
            atomic_load_explicit(b->ctx->cancel, memory_order_relaxed)) {
            atomic_store_explicit(&b->stop, true, memory_order_relaxed);
            break;
        }
        size_t start = atomic_fetch_add_explicit(&b->next, CHUNK, memory_order_relaxed);
        if (start >= n)
            break;
        size_t end = start + CHUNK < n ? start + CHUNK : n;
        for (size_t i = start; i < end; i++) {
            if (b->pass == 0)
                insert_node(v, w, b->perm[i], b->alpha);
            else
                shrink_node(v, w, (uint32_t)i, b->alpha);
        }
        if (b->pass == 0 && b->done) {
            size_t d = atomic_fetch_add_explicit(b->done, end - start, memory_order_relaxed) +
                       (end - start);
            if (b->ctx && b->ctx->progress && b->total_units) {
                /* raised, never lowered: a worker whose fetch_add came first may store after
                 * one whose came later */
                size_t p = (size_t)((double)d / (double)b->total_units * (double)b->n_total);
                size_t cur = atomic_load_explicit(b->ctx->progress, memory_order_relaxed);
                while (cur < p && !atomic_compare_exchange_weak_explicit(b->ctx->progress, &cur, p,
                                                                         memory_order_relaxed,
                                                                         memory_order_relaxed)) {
                }
            }
        }
    }
    return NULL;
}

/* Runs one parallel phase over v with the workers. Returns SX_ECANCELED when canceled. */
static sx_status run_phase(vbuild *b, worker *ws, uint32_t threads)
{
    atomic_store_explicit(&b->next, 0, memory_order_relaxed);
    for (uint32_t t = 1; t < threads; t++) {
        ws[t].b = b;
        ws[t].started = pthread_create(&ws[t].tid, NULL, worker_main, &ws[t]) == 0;
    }
    ws[0].b = b;
    worker_main(&ws[0]);
    for (uint32_t t = 1; t < threads; t++) {
        if (ws[t].started)
            (void)pthread_join(ws[t].tid, NULL);
        ws[t].started = false;
    }
    if (atomic_load_explicit(&b->stop, memory_order_relaxed))
        return sx__err(SX_ECANCELED, "DISKANN: build canceled");
    return SX_OK;
}

/* ---------------------------------------------------------------- repair (in memory) */

/* sx__graph_repair's distance: between local nodes a and b. */
static float vnode_dist(const void *ctx, uint32_t a, uint32_t b)
{
    return vdist(ctx, a, b);
}

/* Makes every node reachable from the medoid and checks it (see the header). Runs after the
 * final sweep, alone on v, with lists of at most R ids (the view's capacity, not the slack's).
 * Accounts sx__graph_repair_bytes in the budget. */
static sx_status repair_graph(const vgraph *v, budget *bd)
{
    if (v->n <= 1)
        return SX_OK;
    sx__graph_view gv = { .n = v->n,
                          .cap = v->R,
                          .format = SX__GRAPH_COUNTED,
                          .base = (uint8_t *)(void *)v->adj,
                          .stride = (size_t)v->stride * sizeof(uint32_t) };
    sx__graph_repair_opts o = { vnode_dist, v, v->L };
    b_note(bd, sx__graph_repair_bytes(v->n, v->R, v->L));
    sx_status rc = sx__graph_repair(&gv, &v->medoid, 1, &o, NULL);
    if (rc == SX_OK)
        rc = sx__graph_check_reach(&gv, &v->medoid, 1, "DISKANN build", "the medoid");
    return rc;
}

/* ---------------------------------------------------------------- one Vamana build */

static uint32_t slack_cap(uint32_t R)
{
    uint32_t c = (R * SLACK_NUM + SLACK_DEN - 1) / SLACK_DEN;
    return c > R ? c : R + 1;
}

static uint32_t threads_for(const sx__build_ctx *ctx, size_t n)
{
    uint32_t t = ctx && ctx->threads ? ctx->threads : 1;
    size_t chunks = n / CHUNK + 1;
    if (t > chunks)
        t = (uint32_t)chunks;
    if (t > 256)
        t = 256;
    return t ? t : 1;
}

/* Bytes of vamana() on ns nodes: the graph, then the larger of (permutation + workers) and the
 * repair that runs after them. */
static uint64_t vamana_bytes(size_t ns, const params *pp, uint32_t threads)
{
    size_t R = (size_t)pp->R, cap = slack_cap((uint32_t)pp->R);
    size_t L = (size_t)pp->L < ns ? (size_t)pp->L : ns;
    uint64_t work =
        (uint64_t)ns * 4 + (uint64_t)threads * (worker_bytes(ns, L, cap, R) + sizeof(worker));
    uint64_t rep = sx__graph_repair_bytes(ns, (uint32_t)R, L);
    return (uint64_t)ns * (cap + 1) * 4 + ns + (work > rep ? work : rep) + 4096;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct job {
    const sx__build_ctx *ctx;
    uint32_t threads;
    float alpha;
    uint64_t seed;
    budget *bd;
    atomic_size_t done;
    size_t total_units, n_total;
} job;

/* Builds v's graph (v->adj zeroed, v->locks zeroed, v->medoid set): pass alpha = 1, pass alpha,
 * the final sweep and the repair. */
static sx_status vamana(vgraph *v, job *jb)
{
    size_t n = v->n;
    if (n == 0)
        return SX_OK;
    uint32_t threads = threads_for(jb->ctx, n);
    size_t L = v->L < n ? v->L : n;
    budget *bd = jb->bd;
    sx_status rc = SX_OK;
    uint32_t *perm = b_alloc(bd, n * 4);
    worker *ws = b_calloc(bd, threads * sizeof *ws);
    uint32_t ready = 0;
    if (!perm || !ws) {
        rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate the build state for %zu nodes", n);
        goto out;
    }
    for (; ready < threads; ready++) {
        if (!worker_init(bd, &ws[ready], n, L, v->cap, v->R)) {
            rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate build scratch");
            goto out;
        }
    }
    uint64_t seed = jb->seed;
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rng_next(&seed) % (i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    vbuild b;
    memset(&b, 0, sizeof b);
    b.v = v;
    b.perm = perm;
    b.ctx = jb->ctx;
    b.done = &jb->done;
    b.total_units = jb->total_units;
    b.n_total = jb->n_total;
    atomic_init(&b.next, 0);
    atomic_init(&b.stop, false);
    v->L = (uint32_t)L;
    b.alpha = 1.0f;
    rc = run_phase(&b, ws, threads);
    if (rc == SX_OK) {
        b.alpha = jb->alpha;
        rc = run_phase(&b, ws, threads);
    }
    if (rc == SX_OK) {
        b.pass = 1;
        rc = run_phase(&b, ws, threads);
    }
out:
    for (uint32_t t = 0; t < ready; t++)
        worker_fini(bd, &ws[t], n, L, v->cap, v->R);
    b_free(bd, ws, ws ? threads * sizeof *ws : 0);
    b_free(bd, perm, perm ? n * 4 : 0);
    /* after the workers' scratch is freed: the repair allocates its own */
    if (rc == SX_OK)
        rc = repair_graph(v, bd);
    return rc;
}

static sx_status vgraph_alloc(vgraph *v, budget *bd, size_t n, const params *pp)
{
    v->n = n;
    v->R = (uint32_t)pp->R;
    v->cap = slack_cap(v->R);
    v->stride = v->cap + 1;
    v->L = (uint32_t)pp->L;
    v->adj = b_calloc(bd, n * v->stride * 4);
    v->locks = b_calloc(bd, n);
    if (!v->adj || !v->locks)
        return sx__err(SX_ENOMEM, "DISKANN: cannot allocate a graph of %zu nodes", n);
    return SX_OK;
}

static void vgraph_free(vgraph *v, budget *bd)
{
    b_free(bd, v->adj, v->adj ? v->n * v->stride * 4 : 0);
    b_free(bd, v->locks, v->locks ? v->n : 0);
    v->adj = NULL;
    v->locks = NULL;
}

/* ---------------------------------------------------------------- the plan */

typedef struct plan {
    uint32_t shards;     /* 1: in memory */
    size_t cap_nodes;    /* partitioned: nodes per shard at most */
    size_t sample;       /* partitioned: k-means sample rows */
    size_t stream_buf;   /* partitioned: merge read buffer per shard */
    size_t write_batch;  /* bytes per write of the final file */
    uint64_t peak;       /* estimated peak bytes */
    uint64_t inmem_peak; /* what the in-memory build would need */
} plan;

static uint64_t umax(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static size_t rec_bytes(const params *pp)
{
    return ((size_t)pp->R + 1) * 4;
}

/* Bytes of the PQ training phase: one sub-space's k-means plus both codebooks. */
static uint64_t pq_train_bytes(size_t n, size_t dim, uint32_t m)
{
    size_t ksub = n < 256 ? n : 256;
    return sx__kmeans_train_bytes(n, dim / m, ksub, ksub * SX__PQ_TRAIN_PER_CENTROID) +
           2 * (uint64_t)ksub * dim * 4;
}

/* Bytes repair_file allocates besides sx__graph_repair's. */
static uint64_t repair_file_bytes(const sx__diskann_layout *lay)
{
    return (uint64_t)lay->slot_bytes + (uint64_t)lay->dim * 4 + (uint64_t)lay->R * 4;
}

static uint64_t merge_bytes(
    size_t n, const params *pp, size_t S, size_t sbuf, size_t wb, const sx__diskann_layout *lay)
{
    size_t R = (size_t)pp->R;
    size_t ef = n < FILE_REPAIR_EF ? n : FILE_REPAIR_EF;
    return (uint64_t)S * (sbuf + 64) + sx__diskann_writer_bytes(lay, wb) +
           (uint64_t)(2 * R + 1) * (sizeof(sx__hit) + 1 + 8) + sizeof(worker) +
           sx__graph_repair_bytes(n, (uint32_t)R, ef) + repair_file_bytes(lay) + 4096;
}

static sx_status make_plan(size_t n,
                           size_t dim,
                           sx_metric metric,
                           const params *pp,
                           uint32_t threads,
                           uint64_t limit,
                           plan *pl)
{
    memset(pl, 0, sizeof *pl);
    sx__diskann_layout lay;
    sx_status rc = sx__diskann_layout_init(&lay, n, dim, (uint32_t)pp->R);
    if (rc != SX_OK)
        return rc;
    uint32_t m = sx__diskann_choose_m(dim, pp->ratio);
    uint64_t codebook = 2 * 256ull * dim * 4;
    /* resident while the graph is built and written: codebooks, IP's extra coordinate, the
     * medoid's mean; the codes come after (the final phase) */
    uint64_t fixed = codebook + (metric == SX_METRIC_IP ? (uint64_t)n * 4 : 0) + dim * 12 + 4096;
    uint64_t codes = (uint64_t)n * m + codebook + 4096;
    uint64_t pqb = pq_train_bytes(n, dim, m);
    /* the in-memory graph reads the vectors in a random order: under a limit they must be
     * resident too (page cache or not, a cgroup counts them), so they are in its peak */
    pl->inmem_peak = umax(umax(pqb, codes), fixed + vamana_bytes(n, pp, threads) +
                                                sx__diskann_writer_bytes(&lay, WRITE_BATCH) +
                                                (limit ? (uint64_t)n * dim * 4 : 0));
    pl->shards = 1;
    pl->write_batch = WRITE_BATCH;
    pl->peak = pl->inmem_peak;
    uint64_t user_limit = limit;
    limit -= limit / 100 * HEADROOM_PCT;
    if (user_limit == 0 || pl->inmem_peak <= limit)
        return SX_OK;
    if (codes > limit)
        return sx__err(SX_ENOMEM,
                       "DISKANN: index_build_memory_limit %llu bytes is below the "
                       "index's own RAM (%llu bytes of PQ codes and codebooks)",
                       (unsigned long long)user_limit, (unsigned long long)codes);
    size_t min_nodes = 4 * (size_t)pp->R > MIN_SHARD_NODES ? 4 * (size_t)pp->R : MIN_SHARD_NODES;
    size_t rec = rec_bytes(pp);
    for (size_t S = 2; S <= 65535; S++) {
        /* (S-1) * C > 2n: at most S-2 shards are ever full, so every node finds two shards
         * with room (assign_shards) */
        size_t C = (size_t)ceil(2.0 * (double)n * SHARD_SLACK / (double)S) + 1;
        if (C < 2 * n / (S - 1) + 1)
            C = 2 * n / (S - 1) + 1;
        if (C >= n)
            continue;
        if (C < min_nodes)
            break;
        /* phases in build order (see the header): partition k-means, PQ training, then with
         * the codes resident the shard builds and the merge */
        uint64_t cent = (uint64_t)S * dim * 4;
        if (cent + pqb > limit)
            continue;
        size_t sample = n < S * 64 ? n : S * 64;
        while (sample > S * 4 && cent + sx__kmeans_train_bytes(n, dim, S, sample) > limit)
            sample /= 2;
        if (sample < S || cent + sx__kmeans_train_bytes(n, dim, S, sample) > limit)
            continue;
        uint64_t fixed_p = fixed + cent + (uint64_t)n * 8 + (uint64_t)S * 8;
        /* + the shard's vectors (and IP coordinates), gathered into RAM: the shard's Vamana
         * then touches no page of the segment (build_partitioned) */
        uint64_t shard = fixed_p + (uint64_t)C * 4 + vamana_bytes(C, pp, threads) + STREAM_BUF_MAX +
                         rec + dim * 12 + (uint64_t)C * (dim + 1) * 4;
        if (shard > limit)
            continue;
        /* merge: the write batch and the read buffer per shard shrink to fit */
        uint64_t room = limit > fixed_p ? limit - fixed_p : 0;
        uint64_t base0 = merge_bytes(n, pp, S, 0, lay.slot_bytes, &lay);
        if (base0 + (uint64_t)S * rec > room)
            continue;
        uint64_t wb = (room - base0 - (uint64_t)S * rec) / 4;
        if (wb > WRITE_BATCH)
            wb = WRITE_BATCH;
        if (wb < lay.slot_bytes)
            wb = lay.slot_bytes;
        uint64_t base = merge_bytes(n, pp, S, 0, (size_t)wb, &lay);
        if (base + (uint64_t)S * rec > room)
            continue;
        size_t sbuf = (size_t)((room - base) / S);
        if (sbuf > STREAM_BUF_MAX)
            sbuf = STREAM_BUF_MAX;
        sbuf = sbuf / rec * rec;
        pl->shards = (uint32_t)S;
        pl->cap_nodes = C;
        pl->sample = sample;
        pl->stream_buf = sbuf;
        pl->write_batch = (size_t)wb;
        pl->peak = umax(umax(pqb + cent, shard),
                        umax(codes, fixed_p + merge_bytes(n, pp, S, sbuf, wb, &lay)));
        return SX_OK;
    }
    return sx__err(SX_ENOMEM,
                   "DISKANN: index_build_memory_limit %llu bytes is too small: the "
                   "in-memory build needs %llu and no partitioning into shards of at least %zu "
                   "nodes fits",
                   (unsigned long long)user_limit, (unsigned long long)pl->inmem_peak, min_nodes);
}

uint64_t sx__diskann_estimate_build_bytes(const sx_param *p, size_t np, size_t n, size_t dim)
{
    params pp;
    plan pl;
    if (parse_build(p, np, &pp) != SX_OK)
        return 0;
    if (make_plan(n, dim, SX_METRIC_IP, &pp, 1, 0, &pl) != SX_OK)
        return 0;
    return pl.inmem_peak;
}

/* ---------------------------------------------------------------- partitioned build */

typedef struct stream {
    sx__file *f;
    uint8_t *buf;
    size_t cap, len, pos;
    uint64_t off, size;
} stream;

static sx_status stream_next(stream *s, size_t rec, const uint8_t **out)
{
    if (s->pos + rec > s->len) {
        size_t want = s->cap;
        if (s->size - s->off < want)
            want = (size_t)(s->size - s->off);
        size_t got = 0;
        sx_status rc = sx__file_pread(s->f, s->buf, want, s->off, &got);
        if (rc != SX_OK)
            return rc;
        if (got < rec)
            return sx__err(SX_EIO, "DISKANN: shard file %s ended early", sx__file_path(s->f));
        s->off += got;
        s->len = got;
        s->pos = 0;
    }
    *out = s->buf + s->pos;
    s->pos += rec;
    return SX_OK;
}

static char *shard_path(const char *path, uint32_t s)
{
    size_t len = strlen(path) + 32;
    char *p = sx__malloc(len);
    if (p)
        (void)snprintf(p, len, "%s.shard%u.tmp", path, s);
    return p;
}

/* Writes shard v's lists (global ids) in local order, i.e. ascending global id. */
static sx_status write_shard(const vgraph *v, const char *spath, budget *bd)
{
    size_t rec = ((size_t)v->R + 1) * 4;
    size_t per = STREAM_BUF_MAX / rec ? STREAM_BUF_MAX / rec : 1;
    uint8_t *buf = b_alloc(bd, per * rec);
    if (!buf)
        return sx__err(SX_ENOMEM, "DISKANN: out of memory");
    sx__file *f = NULL;
    sx_status rc = sx__file_open(spath, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &f);
    size_t k = 0;
    for (size_t i = 0; rc == SX_OK && i < v->n; i++) {
        const uint32_t *ll = vlist(v, (uint32_t)i);
        uint8_t *r = buf + k * rec;
        memset(r, 0, rec);
        sx__put_le32(r, ll[0]);
        for (uint32_t j = 0; j < ll[0]; j++)
            sx__put_le32(r + 4 + 4 * (size_t)j, v->gid[ll[1 + j]]);
        if (++k == per || i + 1 == v->n) {
            rc = sx__file_append(f, buf, k * rec);
            k = 0;
        }
    }
    sx_status rc2 = sx__file_close(f);
    b_free(bd, buf, per * rec);
    return rc != SX_OK ? rc : rc2;
}

/* Exact distance scratch for merging and file repair. */
typedef struct merger {
    vgraph v; /* identity ids, for vdist / robust_prune */
    worker w;
    sx__hit cand_store[2 * SX__DISKANN_R_MAX + 1];
} merger;

/* Assigns every node to its 2 nearest shards with room. pairs: n*2 shard ids. */
static void assign_shards(const geom *g,
                          size_t n,
                          const float *cent,
                          uint32_t S,
                          size_t cap,
                          uint32_t *sizes,
                          uint32_t *pairs,
                          float *dscratch)
{
    for (size_t i = 0; i < n; i++) {
        const float *x = gvec(g, (uint32_t)i);
        for (uint32_t s = 0; s < S; s++)
            dscratch[s] = g->l2(x, cent + (size_t)s * g->dim, g->dim);
        uint32_t a = SX__DISKANN_NONE, b = SX__DISKANN_NONE;
        for (uint32_t s = 0; s < S; s++) {
            if (sizes[s] >= cap)
                continue;
            if (a == SX__DISKANN_NONE || dscratch[s] < dscratch[a]) {
                b = a;
                a = s;
            } else if (b == SX__DISKANN_NONE || dscratch[s] < dscratch[b]) {
                b = s;
            }
        }
        /* the plan's capacity, (S-1) * cap > 2n, leaves two shards with room */
        sizes[a]++;
        sizes[b]++;
        pairs[2 * i] = a < b ? a : b;
        pairs[2 * i + 1] = a < b ? b : a;
    }
}

/* The written tmp file as graph.h's list store: one slot buffered; a put re-encodes the node's
 * list in its slot, re-seals and writes the slot back. */
typedef struct fstore {
    sx__file *f;
    const sx__diskann_layout *lay;
    size_t n;
    uint8_t *slot;   /* slot_bytes */
    uint64_t cached; /* slot in `slot`, UINT64_MAX: none */
    float *vec;      /* dim: a node's vector while its list is rewritten */
    uint32_t *nb;    /* R: its old list */
} fstore;

static sx_status fs_load(fstore *fs, uint64_t sl)
{
    if (sl == fs->cached)
        return SX_OK;
    size_t got = 0;
    sx_status rc = sx__file_pread(fs->f, fs->slot, fs->lay->slot_bytes,
                                  sx__diskann_slot_offset(fs->lay, sl), &got);
    if (rc == SX_OK && got != fs->lay->slot_bytes)
        rc = sx__err(SX_EIO, "DISKANN: short read while repairing");
    fs->cached = rc == SX_OK ? sl : UINT64_MAX;
    return rc;
}

static sx_status
fs_get(void *ctx, uint32_t id, uint32_t *buf, const uint32_t **ids, uint32_t *count)
{
    fstore *fs = ctx;
    sx_status rc = fs_load(fs, sx__diskann_slot_of(fs->lay, id));
    if (rc == SX_OK)
        rc = sx__diskann_node_decode(fs->lay, fs->slot, id, fs->n, NULL, buf, count);
    *ids = buf;
    return rc;
}

static sx_status fs_put(void *ctx, uint32_t id, const uint32_t *ids, uint32_t count)
{
    fstore *fs = ctx;
    uint64_t sl = sx__diskann_slot_of(fs->lay, id);
    uint32_t d = 0;
    sx_status rc = fs_load(fs, sl);
    if (rc == SX_OK)
        rc = sx__diskann_node_decode(fs->lay, fs->slot, id, fs->n, fs->vec, fs->nb, &d);
    if (rc != SX_OK)
        return rc;
    sx__diskann_node_encode(fs->lay, fs->slot, id, fs->vec, ids, count);
    sx__diskann_slot_seal(fs->lay, fs->slot);
    rc =
        sx__file_pwrite(fs->f, fs->slot, fs->lay->slot_bytes, sx__diskann_slot_offset(fs->lay, sl));
    if (rc != SX_OK)
        fs->cached = UINT64_MAX;
    return rc;
}

static float gnode_dist(const void *ctx, uint32_t a, uint32_t b)
{
    return gdist(ctx, a, b);
}

/* File-level repair for the partitioned build (see the header): graph.h's repair and check over
 * the written tmp file, with the medoid as the seed and a search of FILE_REPAIR_EF slot reads
 * for each unreachable node's parent. */
static sx_status repair_file(sx__file *f,
                             const sx__diskann_layout *lay,
                             size_t n,
                             uint32_t medoid,
                             const geom *g,
                             budget *bd)
{
    if (n <= 1)
        return SX_OK;
    fstore fs = { .f = f, .lay = lay, .n = n, .cached = UINT64_MAX };
    fs.slot = b_alloc(bd, lay->slot_bytes);
    fs.vec = b_alloc(bd, (size_t)lay->dim * 4);
    fs.nb = b_alloc(bd, (size_t)lay->R * 4);
    sx_status rc = SX_OK;
    if (!fs.slot || !fs.vec || !fs.nb) {
        rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate the repair pass");
    } else {
        sx__graph_store st = { &fs, fs_get, fs_put };
        sx__graph_view gv = { .n = n, .cap = lay->R, .format = SX__GRAPH_COUNTED, .store = &st };
        size_t ef = n < FILE_REPAIR_EF ? n : FILE_REPAIR_EF;
        sx__graph_repair_opts o = { gnode_dist, g, ef };
        b_note(bd, sx__graph_repair_bytes(n, lay->R, ef));
        rc = sx__graph_repair(&gv, &medoid, 1, &o, NULL);
        if (rc == SX_OK)
            rc = sx__graph_check_reach(&gv, &medoid, 1, "DISKANN build", "the medoid");
    }
    b_free(bd, fs.slot, fs.slot ? lay->slot_bytes : 0);
    b_free(bd, fs.vec, fs.vec ? (size_t)lay->dim * 4 : 0);
    b_free(bd, fs.nb, fs.nb ? (size_t)lay->R * 4 : 0);
    return rc;
}

typedef struct bstate {
    const float *vecs;
    size_t n, dim;
    sx_metric metric;
    const params *pp;
    const plan *pl;
    geom g;
    const char *path;
    uint32_t medoid;
    uint64_t build_id;
    const sx__diskann_layout *lay;
    budget *bd;
    job *jb;
} bstate;

static sx_status merge_shards(bstate *st, char **spaths, const uint32_t *pairs)
{
    const params *pp = st->pp;
    size_t n = st->n, S = st->pl->shards, rec = rec_bytes(pp);
    budget *bd = st->bd;
    sx_status rc = SX_OK;
    stream *ss = b_calloc(bd, S * sizeof *ss);
    merger *mg = b_calloc(bd, sizeof *mg);
    uint32_t *list = b_alloc(bd, (2 * (size_t)pp->R + 1) * 4);
    sx__diskann_writer *w = NULL;
    if (!ss || !mg || !list) {
        rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate the merge");
        goto out;
    }
    for (size_t s = 0; s < S && rc == SX_OK; s++) {
        ss[s].cap = st->pl->stream_buf;
        ss[s].buf = b_alloc(bd, ss[s].cap);
        if (!ss[s].buf) {
            rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate the merge buffers");
            break;
        }
        rc = sx__file_open(spaths[s], SX__F_READ, &ss[s].f);
        if (rc == SX_OK)
            rc = sx__file_size(ss[s].f, &ss[s].size);
    }
    if (rc != SX_OK)
        goto out;
    mg->v.n = n;
    mg->v.g = &st->g;
    mg->v.R = (uint32_t)pp->R;
    mg->w.cand = mg->cand_store;
    mg->w.rm = b_alloc(bd, 2 * (size_t)pp->R + 1);
    mg->w.sel2 = b_alloc(bd, (size_t)pp->R * 4);
    if (!mg->w.rm || !mg->w.sel2) {
        rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate the merge");
        goto out;
    }
    rc = sx__diskann_writer_open(st->path, st->lay, n, st->medoid, st->build_id, st->metric,
                                 st->pl->write_batch, &w);
    if (rc != SX_OK)
        goto out;
    b_note(bd, sx__diskann_writer_bytes(st->lay, st->pl->write_batch));
    for (size_t i = 0; i < n && rc == SX_OK; i++) {
        size_t cnt = 0;
        for (int h = 0; h < 2 && rc == SX_OK; h++) {
            const uint8_t *r = NULL;
            rc = stream_next(&ss[pairs[2 * i + (size_t)h]], rec, &r);
            if (rc != SX_OK)
                break;
            uint32_t d = sx__le32(r);
            if (d > (uint32_t)pp->R) {
                rc = sx__err(SX_EIO, "DISKANN: shard record of node %zu is damaged", i);
                break;
            }
            for (uint32_t j = 0; j < d; j++) {
                uint32_t id = sx__le32(r + 4 + 4 * (size_t)j);
                bool dup = false;
                for (size_t t = 0; t < cnt && !dup; t++)
                    dup = list[t] == id;
                if (!dup && id != i && id < n)
                    list[cnt++] = id;
            }
        }
        if (rc != SX_OK)
            break;
        uint32_t deg = (uint32_t)cnt;
        const uint32_t *out = list;
        if (cnt > (size_t)pp->R) {
            /* as DiskANN's merge_shards: shuffle the union, keep R. A RobustPrune here needs
             * the distances between the candidates, i.e. ~2R random rows of a segment that a
             * limited build cannot keep in memory (a 1M x 192 merge in 146 MiB read the
             * segment's pages one fault at a time: over an hour); each list is already
             * RobustPruned within its shard, and a random half keeps their long edges. */
            uint64_t h = 0x5EED5EEDull ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull);
            for (size_t t = cnt - 1; t > 0; t--) {
                h = h * 6364136223846793005ull + 1442695040888963407ull;
                size_t u = (size_t)((h >> 33) % (t + 1));
                uint32_t tmp = list[t];
                list[t] = list[u];
                list[u] = tmp;
            }
            deg = (uint32_t)pp->R;
        }
        rc = sx__diskann_writer_put(w, (uint32_t)i, gvec(&st->g, (uint32_t)i), out, deg);
        if (rc == SX_OK && st->jb->ctx && st->jb->ctx->cancel &&
            atomic_load_explicit(st->jb->ctx->cancel, memory_order_relaxed))
            rc = sx__err(SX_ECANCELED, "DISKANN: build canceled");
    }
    for (size_t s = 0; ss && s < S; s++) {
        sx__ignore(sx__file_close(ss[s].f));
        ss[s].f = NULL;
        b_free(bd, ss[s].buf, ss[s].buf ? ss[s].cap : 0);
        ss[s].buf = NULL;
    }
    if (rc == SX_OK)
        rc = sx__diskann_writer_flush(w);
    if (rc == SX_OK)
        rc = repair_file(sx__diskann_writer_file(w), st->lay, n, st->medoid, &st->g, bd);
    if (rc == SX_OK) {
        rc = sx__diskann_writer_finish(w);
        w = NULL;
    }
out:
    sx__diskann_writer_abort(w);
    for (size_t s = 0; ss && s < S; s++) {
        sx__ignore(sx__file_close(ss[s].f));
        b_free(bd, ss[s].buf, ss[s].buf ? ss[s].cap : 0);
    }
    if (mg) {
        b_free(bd, mg->w.rm, mg->w.rm ? 2 * (size_t)pp->R + 1 : 0);
        b_free(bd, mg->w.sel2, mg->w.sel2 ? (size_t)pp->R * 4 : 0);
    }
    b_free(bd, list, list ? (2 * (size_t)pp->R + 1) * 4 : 0);
    b_free(bd, mg, mg ? sizeof *mg : 0);
    b_free(bd, ss, ss ? S * sizeof *ss : 0);
    return rc;
}

/* The shard centroids: k-means (k = S) on the plan's sample. Runs first, before the PQ codes
 * exist, so its transient memory does not add to theirs. */
static sx_status partition_train(
    const float *vecs, size_t n, size_t dim, const plan *pl, const job *jb, budget *bd, float *cent)
{
    sx__kmeans_opts o;
    memset(&o, 0, sizeof o);
    o.k = pl->shards;
    o.seed = jb->seed ^ 0x5A5A5A5Aull;
    o.max_sample = pl->sample;
    o.iters = 10;
    o.cancel = jb->ctx ? jb->ctx->cancel : NULL;
    b_note(bd, sx__kmeans_train_bytes(n, dim, pl->shards, pl->sample));
    return sx__kmeans_train(vecs, n, dim, dim, &o, cent);
}

static sx_status build_partitioned(bstate *st, const float *cent)
{
    const plan *pl = st->pl;
    size_t n = st->n, dim = st->dim, S = pl->shards;
    budget *bd = st->bd;
    sx_status rc = SX_OK;
    float *dscr = b_alloc(bd, S * 4);
    uint32_t *sizes = b_calloc(bd, S * 4);
    uint32_t *pairs = b_alloc(bd, n * 8);
    char **spaths = b_calloc(bd, S * sizeof *spaths);
    if (!dscr || !sizes || !pairs || !spaths) {
        rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate the partition");
        goto out;
    }
    assign_shards(&st->g, n, cent, (uint32_t)S, pl->cap_nodes, sizes, pairs, dscr);
    for (size_t s = 0; s < S && rc == SX_OK; s++) {
        spaths[s] = shard_path(st->path, (uint32_t)s);
        if (!spaths[s]) {
            rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
            break;
        }
        size_t ns = sizes[s];
        uint32_t *gid = b_alloc(bd, ns * 4 + 4);
        double *acc = b_alloc(bd, dim * 8);
        float *mean = b_alloc(bd, dim * 4);
        vgraph v;
        memset(&v, 0, sizeof v);
        float *lvec = NULL, *lext = NULL;
        geom lgeom;
        if (!gid || !acc || !mean) {
            rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
        } else {
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (pairs[2 * i] == s || pairs[2 * i + 1] == s)
                    gid[k++] = (uint32_t)i;
            v.gid = gid;
            v.g = &st->g;
            /* the shard's vectors, copied in ascending global id order (one forward pass over
             * the mapping) so its build reads RAM, not scattered pages of the segment file */
            lvec = b_alloc(bd, ns * dim * 4 + 4);
            lext = st->g.ext ? b_alloc(bd, ns * 4 + 4) : NULL;
            if (lvec && (lext || !st->g.ext)) {
                for (size_t j = 0; j < ns; j++) {
                    memcpy(lvec + j * dim, gvec(&st->g, gid[j]), dim * 4);
                    if (lext)
                        lext[j] = st->g.ext[gid[j]];
                }
                lgeom = (geom){ lvec, dim, st->g.l2, lext };
                v.lg = &lgeom;
            }
            rc = vgraph_alloc(&v, bd, ns, st->pp);
            if (rc == SX_OK && ns > 0) {
                v.medoid = v.lg ? medoid_of(v.lg, NULL, ns, acc, mean)
                                : medoid_of(&st->g, gid, ns, acc, mean);
                rc = vamana(&v, st->jb);
            }
            if (rc == SX_OK)
                rc = write_shard(&v, spaths[s], bd);
        }
        vgraph_free(&v, bd);
        b_free(bd, lvec, lvec ? ns * dim * 4 + 4 : 0);
        b_free(bd, lext, lext ? ns * 4 + 4 : 0);
        b_free(bd, mean, mean ? dim * 4 : 0);
        b_free(bd, acc, acc ? dim * 8 : 0);
        b_free(bd, gid, gid ? ns * 4 + 4 : 0);
        release_free_pages();
    }
    if (rc == SX_OK)
        rc = merge_shards(st, spaths, pairs);
out:
    for (size_t s = 0; spaths && s < S; s++) {
        if (spaths[s]) {
            sx__ignore(sx__fs_unlink(spaths[s]));
            sx__free(spaths[s]);
        }
    }
    b_free(bd, spaths, spaths ? S * sizeof *spaths : 0);
    b_free(bd, pairs, pairs ? n * 8 : 0);
    b_free(bd, sizes, sizes ? S * 4 : 0);
    b_free(bd, dscr, dscr ? S * 4 : 0);
    return rc;
}

static sx_status build_inmem(bstate *st)
{
    budget *bd = st->bd;
    vgraph v;
    memset(&v, 0, sizeof v);
    v.g = &st->g;
    sx_status rc = vgraph_alloc(&v, bd, st->n, st->pp);
    sx__diskann_writer *w = NULL;
    if (rc == SX_OK) {
        v.medoid = st->medoid;
        rc = vamana(&v, st->jb);
    }
    if (rc == SX_OK)
        rc = sx__diskann_writer_open(st->path, st->lay, st->n, st->medoid, st->build_id, st->metric,
                                     WRITE_BATCH, &w);
    b_note(bd, sx__diskann_writer_bytes(st->lay, WRITE_BATCH));
    for (size_t i = 0; rc == SX_OK && i < st->n; i++) {
        const uint32_t *ll = vlist(&v, (uint32_t)i);
        rc = sx__diskann_writer_put(w, (uint32_t)i, gvec(&st->g, (uint32_t)i), ll + 1, ll[0]);
    }
    if (rc == SX_OK) {
        rc = sx__diskann_writer_finish(w);
        w = NULL;
    }
    sx__diskann_writer_abort(w);
    vgraph_free(&v, bd);
    release_free_pages();
    return rc;
}

/* ---------------------------------------------------------------- build entry */

static uint64_t new_build_id(uint64_t seed)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    static atomic_uint_fast64_t counter;
    uint64_t s = seed ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^
                 ((uint64_t)getpid() << 16) ^
                 atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed) * 0x9E37ull;
    return rng_next(&s);
}

/* A private file prefix for builds without one: $SX_TMPDIR or /tmp. Owned. */
static char *temp_prefix(void)
{
    static atomic_uint counter;
    const char *base = getenv("SX_TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    size_t len = strlen(base) + 64;
    char *p = sx__malloc(len);
    if (p)
        (void)snprintf(p, len, "%s/sextant-diskann-%d-%u", base, (int)getpid(),
                       atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed));
    return p;
}

sx_status sx__diskann_build(const sx_param *p,
                            size_t np,
                            const float *vecs,
                            size_t n,
                            size_t dim,
                            sx_metric metric,
                            const sx__build_ctx *ctx,
                            sx__index **out)
{
    params pp;
    sx_status rc = parse_build(p, np, &pp);
    if (rc != SX_OK)
        return rc;
    if (n > SX__DISKANN_MAX_N)
        return sx__err(SX_EINVAL, "DISKANN: %zu rows exceed the limit %zu", n, SX__DISKANN_MAX_N);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "DISKANN: no vectors");
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "DISKANN: dim %zu out of range", dim);
    if (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL, "DISKANN: unknown metric %d", (int)metric);
    uint32_t threads = threads_for(ctx, n);
    uint64_t limit = ctx ? ctx->memory_limit_bytes : 0;
    plan pl;
    rc = make_plan(n, dim, metric, &pp, threads, limit, &pl);
    if (rc != SX_OK)
        return rc;

    budget bd = { 0, 0 };
    uint64_t seed = ctx && ctx->seed ? ctx->seed : DEFAULT_SEED;
    sx__diskann *d = sx__diskann_new();
    char *tmp_prefix = NULL;
    float *ext = NULL;
    double *acc = NULL;
    float *mean = NULL;
    bool file_done = false;
    float *cent = NULL;
    if (!d)
        return sx__err(SX_ENOMEM, "DISKANN: out of memory");
    d->n = n;
    d->dim = dim;
    d->metric = metric;
    d->dist = sx__dist_for_metric(metric);
    d->R = (uint32_t)pp.R;
    d->L_build = (uint32_t)pp.L;
    d->alpha = (float)pp.alpha;
    d->pq_ratio = (float)pp.ratio;
    d->cache_ratio = (float)pp.cache_ratio;
    d->build_id = new_build_id(seed);
    d->build_shards = pl.shards;
    const char *prefix = ctx ? ctx->file_prefix : NULL;
    if (!prefix) {
        tmp_prefix = temp_prefix();
        prefix = tmp_prefix;
        d->remove_on_free = true;
    }
    d->path = prefix ? sx__diskann_path(prefix) : NULL;
    if (!d->path) {
        rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
        goto fail;
    }
    rc = sx__diskann_layout_init(&d->lay, n, dim, d->R);
    if (rc != SX_OK)
        goto fail;

    job jb;
    memset(&jb, 0, sizeof jb);
    jb.ctx = ctx;
    jb.threads = threads;
    jb.alpha = (float)pp.alpha;
    jb.seed = seed;
    jb.bd = &bd;
    atomic_init(&jb.done, 0);
    jb.n_total = n;
    jb.total_units = 2 * n * (pl.shards > 1 ? 2 : 1);
    if (pl.shards > 1) {
        cent = b_alloc(&bd, (size_t)pl.shards * dim * 4);
        if (!cent) {
            rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
            goto fail;
        }
        rc = partition_train(vecs, n, dim, &pl, &jb, &bd, cent);
        if (rc != SX_OK)
            goto fail;
    }

    /* PQ codebooks now; the codes (the bulk of the RAM part) only after the graph is on disk,
     * so the two never share the memory budget */
    if (n > 0) {
        uint32_t m = sx__diskann_choose_m(dim, pp.ratio);
        b_note(&bd, pq_train_bytes(n, dim, m));
        rc = sx__pq_train(&d->pq, vecs, n, dim, m, seed, threads);
        if (rc != SX_OK)
            goto fail;
        bd.cur += sx__pq_memory_bytes(&d->pq);
        b_note(&bd, 0);
    }

    geom g = { vecs, dim, sx__dist()->l2sq, NULL };
    if (metric == SX_METRIC_IP && n > 0) {
        ext = b_alloc(&bd, n * 4);
        if (!ext) {
            rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
            goto fail;
        }
        float mx = 0.0f;
        for (size_t i = 0; i < n; i++) {
            ext[i] = sx__norm2(vecs + i * dim, dim);
            if (ext[i] > mx)
                mx = ext[i];
        }
        for (size_t i = 0; i < n; i++)
            ext[i] = sqrtf(mx - ext[i] > 0.0f ? mx - ext[i] : 0.0f);
        g.ext = ext;
    }
    if (n > 0) {
        acc = b_alloc(&bd, dim * 8);
        mean = b_alloc(&bd, dim * 4);
        if (!acc || !mean) {
            rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
            goto fail;
        }
        d->medoid = medoid_of(&g, NULL, n, acc, mean);
    }

    bstate st = { vecs,    n,         dim,         metric,  &pp, &pl, g,
                  d->path, d->medoid, d->build_id, &d->lay, &bd, &jb };
    if (n == 0) {
        sx__diskann_writer *w = NULL;
        rc = sx__diskann_writer_open(d->path, &d->lay, 0, d->medoid, d->build_id, metric,
                                     WRITE_BATCH, &w);
        if (rc == SX_OK)
            rc = sx__diskann_writer_finish(w);
    } else if (pl.shards > 1) {
        rc = build_partitioned(&st, cent);
    } else {
        rc = build_inmem(&st);
    }
    if (rc != SX_OK)
        goto fail;
    file_done = true;
    b_free(&bd, cent, cent ? (size_t)pl.shards * dim * 4 : 0);
    cent = NULL;
    b_free(&bd, ext, ext ? n * 4 : 0);
    ext = NULL;
    b_free(&bd, acc, acc ? dim * 8 : 0);
    acc = NULL;
    b_free(&bd, mean, mean ? dim * 4 : 0);
    mean = NULL;
    if (n > 0) {
        size_t m = d->pq.m;
        d->codes = sx__malloc_aligned(n * m);
        if (!d->codes) {
            rc = sx__err(SX_ENOMEM, "DISKANN: cannot allocate %zu code bytes", n * m);
            goto fail;
        }
        bd.cur += n * m;
        b_note(&bd, 0);
        for (size_t i = 0; i < n; i += 4096) {
            size_t cnt = n - i < 4096 ? n - i : 4096;
            sx__pq_encode(&d->pq, vecs + i * dim, cnt, d->codes + i * m);
        }
    }
    d->build_peak_bytes = bd.peak;
    rc = sx__diskann_open_file(d);
    if (rc == SX_OK)
        rc = sx__diskann_cache_warm(d);
    if (rc != SX_OK)
        goto fail;
    if (ctx && ctx->progress)
        atomic_store_explicit(ctx->progress, n, memory_order_relaxed);
    sx__free(tmp_prefix);
    *out = (sx__index *)d;
    return SX_OK;
fail:
    b_free(&bd, cent, cent ? (size_t)pl.shards * dim * 4 : 0);
    b_free(&bd, ext, ext ? n * 4 : 0);
    b_free(&bd, acc, acc ? dim * 8 : 0);
    b_free(&bd, mean, mean ? dim * 4 : 0);
    /* a failed build leaves no file of its own behind (an older file under the same prefix is
     * only replaced by a build that completes) */
    d->remove_on_free = file_done;
    sx__diskann_free((sx__index *)d);
    sx__free(tmp_prefix);
    return rc;
}

const sx__index_ops sx__diskann_index_ops = {
    .name = "DISKANN",
    .check_build_params = sx__diskann_check_build_params,
    .check_search_params = sx__diskann_check_search_params,
    .build = sx__diskann_build,
    .search = sx__diskann_search,
    .serialize = sx__diskann_serialize,
    .serialize_parts = sx__diskann_serialize_parts,
    .deserialize = sx__diskann_deserialize,
    .memory_bytes = sx__diskann_memory_bytes,
    .free = sx__diskann_free,
    .estimate_build_bytes = sx__diskann_estimate_build_bytes,
    .load_files = sx__diskann_load_files,
    .set_cache_bytes = sx__diskann_set_cache_bytes,
    .remove_files = sx__diskann_remove_files,
    .disk_bytes = sx__diskann_disk_bytes,
    .io_stats = sx__diskann_io_stats,
    .reads_own_vectors = true,
};
