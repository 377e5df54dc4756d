/*
 * hnsw_sq_search.c: HNSW_SQ search: HNSW's K-NN-SEARCH (Malkov & Yashunin, arXiv 1603.09320,
 * Alg. 5: greedy descent through the upper levels, Alg. 2 ef-search at level 0) on code
 * distances (hnsw_sq.h), then an exact re-rank of the best candidates from the float vectors.
 *
 * Steps of one query:
 *   1. prepare: quantize the query to int8 and fold the constants (hnsw_sq_quant.c);
 *   2. greedy descent from the entry point through levels max_level..1 on code distances;
 *   3. ef-search at level 0 on code distances with a pool of max(ef, refine candidates) entries.
 *      As in hnsw_search.c the candidate set C and result set W are one array sorted by distance
 *      (the "pool"), the top id bit marks an expanded entry, the search expands the best
 *      unexpanded entry and stops when all are expanded. Each expansion gathers the unvisited
 *      neighbours (uint16 epoch tags, no clearing between queries), then one batch kernel call
 *      computes all their dot products two records at a time while prefetching the next two;
 *   4. refine: the best ncand candidates of the pool by code distance (ncand below) get their
 *      exact distance from the borrowed float vectors (prefetch: refine()); the k best go to the
 *      caller's top-k with EXACT distances. With refine=false (build param) the k best code
 *      distances are returned as they are.
 *
 * Filtered search (`allow`): rows not allowed are traversed (they keep the graph connected) but
 * never enter the results: the two-heap form of Alg. 2 (candidates C, allowed results W with at
 * most `cap` entries, bound = worst of a full W), as in hnsw_search.c, on code distances; then W
 * is sorted and refined as above. A very selective filter degrades to a walk of the whole
 * connected graph (never a hang); the engine switches to exact search for those.
 *
 * Search parameters (Milvus names):
 *   ef        [1, INT_MAX], default max(k, 64); ef < k is SX_EINVAL (as HNSW);
 *   refine_k  a number in [1, 65536] (Milvus's magnification factor): ncand = ceil(k * refine_k)
 *             candidates are re-ranked and the pool holds cap = max(ef, ncand) entries.
 *             Default (absent): ncand = min(ef, 2k) and cap = ef, i.e. up to 2k candidates but
 *             never a larger pool than ef asks for. Ignored with refine=false.
 * Why that default. Measured single-thread on Fashion-MNIST (60k x 784, 2,000 queries, M=16,
 * efConstruction=200; bench/hnsw_sq_bench.c, QPS by CPU time on the shared 2-core VM):
 *     ef  refine_k=1        refine_k=1.5      refine_k=2        hnswlib
 *     10  0.929 / 47.7k     0.965 / 37.3k     0.979 / 28.6k     0.934 / 12.8k
 *     20  0.972 / 33.6k     0.979 / 29.2k     0.979 / 27.7k     0.979 /  8.8k
 *     40  0.987 / 23.6k     0.995 / 21.2k     0.995 / 19.8k     0.994 /  4.5k
 *     60  0.989 / 17.7k     0.997 / 17.1k     0.997 / 16.0k     0.997 /  3.1k
 *   (recall@10 / QPS). The code order is good enough that the true top 10 lies in the first ~2k
 *   candidates; re-ranking k only tops out near 0.99, because neighbours near rank 10 swap
 *   places in the code order. Each re-ranked candidate costs a float vector fetched from memory
 *   (3 KiB here), so re-ranking more than needed is the largest avoidable cost at small ef.
 *   min(ef, 2k) gives refine_k=1's speed at ef = k and refine_k=2's recall from ef = 2k on.
 *
 * Layout: codes next to the level-0 lists in one record per node (hnsw_sq.h). Measured against
 * codes (+ norm) and lists in two arrays, same bytes per node: equal within noise on
 * Fashion-MNIST (ef 20: 32.8k vs 32.3k QPS; lists padded to 64 bytes 32.7k) and BIGANN-10k
 * (ef 10: 236k-242k vs 229k-246k), so the simpler single array stays.
 *
 * Scratch. Each thread keeps one scratch (tags for n nodes, the pool, the gathered ids and their
 * dot products, the int8 query, the heaps of the filtered search) in a pthread key, freed at
 * thread exit; steady-state searches do not allocate.
 *
 * Thread-safety: read-only on the index; any number of threads may search it at once.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "index/hnsw_sq/hnsw_sq.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

#define ID_MASK        0x7FFFFFFFu
#define FLAG           0x80000000u
#define REFINE_K_MAX   65536.0
/* lines of each gathered neighbour's record prefetched at once (the batch kernel fetches the
 * rest two records ahead): 0, 1 and 2 measured equal within noise */
#define PF_FIRST_LINES 2u
/* lines of every re-rank candidate's vector prefetched up front (refine()) */
#define PF_VEC_FIRST   4u

/* ---------------------------------------------------------------- scratch */

typedef struct scratch {
    uint16_t *tags; /* visited <=> tags[id] == epoch */
    size_t tags_cap;
    uint16_t epoch;
    sx__hit *pool; /* sorted pool, pool_cap entries */
    size_t pool_cap;
    uint32_t *todo; /* gathered neighbour ids */
    int32_t *dots;  /* their dot products */
    size_t todo_cap;
    int8_t *q8; /* prepared query, 64-byte aligned */
    size_t q8_cap;
    sx__hit *cand; /* filtered: min-heap of candidates */
    size_t cand_cap;
    sx__hit *res; /* filtered: max-heap of allowed results */
    size_t res_cap;
} scratch;

static void scratch_fini(scratch *s)
{
    sx__free(s->tags);
    sx__free(s->pool);
    sx__free(s->todo);
    sx__free(s->dots);
    sx__free_aligned(s->q8);
    sx__free(s->cand);
    sx__free(s->res);
    memset(s, 0, sizeof *s);
}

static sx_status scratch_reserve(scratch *s, size_t n, size_t pool, size_t deg, size_t q8)
{
    if (n > s->tags_cap) {
        uint16_t *t = sx__calloc(n, sizeof *t);
        if (!t)
            return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate visited tags for %zu nodes", n);
        sx__free(s->tags);
        s->tags = t;
        s->tags_cap = n;
        s->epoch = 0;
    }
    if (pool + 1 > s->pool_cap) {
        sx__hit *p = sx__malloc((pool + 1) * sizeof *p);
        if (!p)
            return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate a search pool of %zu", pool);
        sx__free(s->pool);
        s->pool = p;
        s->pool_cap = pool + 1;
    }
    if (deg > s->todo_cap) {
        uint32_t *t = sx__malloc(deg * sizeof *t);
        int32_t *d = sx__malloc(deg * sizeof *d);
        if (!t || !d) {
            sx__free(t);
            sx__free(d);
            return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate search scratch");
        }
        sx__free(s->todo);
        sx__free(s->dots);
        s->todo = t;
        s->dots = d;
        s->todo_cap = deg;
    }
    if (q8 > s->q8_cap) {
        int8_t *b = sx__malloc_aligned(q8);
        if (!b)
            return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate search scratch");
        sx__free_aligned(s->q8);
        s->q8 = b;
        s->q8_cap = q8;
    }
    return SX_OK;
}

static void new_epoch(scratch *s)
{
    if (++s->epoch == 0) {
        memset(s->tags, 0, s->tags_cap * sizeof *s->tags);
        s->epoch = 1;
    }
}

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
static _Thread_local scratch *tls_scratch; /* cache of the key's value */

static void tls_destroy(void *p)
{
    scratch_fini(p);
    sx__free(p);
    tls_scratch = NULL;
}

static void tls_init(void)
{
    tls_ok = pthread_key_create(&tls_key, tls_destroy) == 0;
}

static scratch *thread_scratch(void)
{
    if (tls_scratch)
        return tls_scratch;
    if (pthread_once(&tls_once, tls_init) != 0 || !tls_ok)
        return NULL;
    scratch *s = sx__calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (pthread_setspecific(tls_key, s) != 0) {
        sx__free(s);
        return NULL;
    }
    tls_scratch = s;
    return s;
}

/* ---------------------------------------------------------------- helpers */

static inline void prefetch_links(const sx__hnsw_sq *h, uint32_t id)
{
    const char *p = (const char *)sx__hsq_links(h, id, 0);
    size_t bytes = ((size_t)h->M0 + 1) * sizeof(uint32_t);
    for (size_t o = 0; o < bytes; o += 64)
        __builtin_prefetch(p + o, 0, 3);
}

/* Inserts (d, id) into the sorted pool[0..*size) of capacity cap. Returns the position, or cap
 * when d does not beat the worst of a full pool. Ties go after the existing entries. */
static inline size_t pool_insert(sx__hit *pool, size_t *size, size_t cap, float d, uint32_t id)
{
    size_t n = *size;
    if (n == cap && !(d < pool[n - 1].dist))
        return cap;
    size_t lo = 0;
    if (n > 0) {
        const sx__hit *b = pool;
        size_t len = n;
        while (len > 1) {
            size_t half = len / 2;
            b = b[half].dist <= d ? b + half : b;
            len -= half;
        }
        lo = (size_t)(b - pool) + (b[0].dist <= d);
    }
    size_t last = n == cap ? n - 1 : n;
    memmove(pool + lo + 1, pool + lo, (last - lo) * sizeof *pool);
    pool[lo].dist = d;
    pool[lo].id = id;
    if (n < cap)
        *size = n + 1;
    return lo;
}

/* Collects the unvisited ids of list ll into s->todo (marking them visited) and prefetches the
 * first lines of their records. Returns how many. */
static inline size_t gather(const sx__hnsw_sq *h, scratch *s, const uint32_t *ll)
{
    uint32_t cnt = ll[0];
    uint16_t *tags = s->tags, ep = s->epoch;
    uint32_t *todo = s->todo;
    size_t nt = 0;
    for (uint32_t j = 1; j <= cnt; j++)
        __builtin_prefetch(tags + ll[j], 1, 3);
    for (uint32_t j = 1; j <= cnt; j++) {
        uint32_t id = ll[j];
        if (tags[id] == ep)
            continue;
        tags[id] = ep;
        todo[nt++] = id;
        const char *r = (const char *)sx__hsq_code(h, id);
        for (size_t l = 0; l < PF_FIRST_LINES; l++)
            __builtin_prefetch(r + 64 * l, 0, 3);
    }
    return nt;
}

/* Greedy descent on code distances through levels top..1: each step computes the distances of
 * the whole list with one batch call and moves to the best node if it beats the current one. */
static uint32_t greedy(const sx__hnsw_sq *h,
                       scratch *s,
                       const sx__hsq_query *q,
                       uint32_t cur,
                       float *cur_dist,
                       uint32_t top)
{
    float cd = *cur_dist;
    const uint8_t *base = h->rec;
    const size_t stride = h->rec_bytes, norm_off = h->norm_off;
    for (uint32_t l = top; l > 0; l--) {
        bool changed = true;
        while (changed) {
            changed = false;
            const uint32_t *ll = sx__hsq_links(h, cur, l);
            uint32_t cnt = ll[0];
            for (uint32_t j = 1; j <= cnt; j++)
                __builtin_prefetch(base + (size_t)ll[j] * stride, 0, 3);
            h->kern->dot_batch(base, stride, ll + 1, cnt, q->q8, h->dim, s->dots);
            uint32_t best = cur;
            for (uint32_t j = 0; j < cnt; j++) {
                float nv;
                memcpy(&nv, base + (size_t)ll[1 + j] * stride + norm_off, sizeof nv);
                float d = nv + q->c0 + q->c1 * (float)s->dots[j];
                if (d < cd) {
                    cd = d;
                    best = ll[1 + j];
                    changed = true;
                }
            }
            cur = best;
        }
    }
    *cur_dist = cd;
    return cur;
}

/* ---------------------------------------------------------------- pool search */

/* Level-0 ef-search over a pool holding `size` seeds (marked visited), capacity cap. Returns the
 * pool size; entries carry FLAG. */
static size_t
pool_search(const sx__hnsw_sq *h, scratch *s, const sx__hsq_query *q, size_t size, size_t cap)
{
    sx__hit *pool = s->pool;
    const uint32_t *todo = s->todo;
    const int32_t *dots = s->dots;
    const sx__hsq_dot_batch_fn batch = h->kern->dot_batch;
    const uint8_t *base = h->rec;
    const size_t stride = h->rec_bytes, dim = h->dim, norm_off = h->norm_off;
    const float c0 = q->c0, c1 = q->c1;
    size_t cur = 0;
    while (cur < size) {
        uint32_t c = pool[cur].id;
        pool[cur].id = c | FLAG;
        for (size_t nx = cur + 1; nx < size; nx++) {
            if (!(pool[nx].id & FLAG)) {
                prefetch_links(h, pool[nx].id);
                break;
            }
        }
        size_t nt = gather(h, s, sx__hsq_links(h, c, 0));
        batch(base, stride, todo, nt, q->q8, dim, s->dots);
        size_t lowest = SIZE_MAX;
        for (size_t t = 0; t < nt; t++) {
            uint32_t id = todo[t];
            float nv;
            memcpy(&nv, base + (size_t)id * stride + norm_off, sizeof nv);
            float d = nv + c0 + c1 * (float)dots[t];
            size_t p = pool_insert(pool, &size, cap, d, id);
            if (p < lowest && p < cap) {
                lowest = p;
                prefetch_links(h, id);
            }
        }
        if (lowest <= cur)
            cur = lowest;
        else
            cur++;
        while (cur < size && (pool[cur].id & FLAG))
            cur++;
    }
    return size;
}

/* ---------------------------------------------------------------- filtered search */

/* max-heap sift-down of x from the root over hp[0..m) */
static void res_sift(sx__hit *hp, size_t m, sx__hit x)
{
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, b = i;
        float bd = x.dist;
        if (l < m && hp[l].dist > bd) {
            b = l;
            bd = hp[l].dist;
        }
        if (l + 1 < m && hp[l + 1].dist > bd)
            b = l + 1;
        if (b == i)
            break;
        hp[i] = hp[b];
        i = b;
    }
    if (m > 0)
        hp[i] = x;
}

/* max-heap on dist (results); keeps at most cap entries */
static void res_push(sx__hit *hp, size_t *n, size_t cap, sx__hit x)
{
    if (*n == cap) {
        if (x.dist < hp[0].dist)
            res_sift(hp, *n, x);
        return;
    }
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!(x.dist > hp[p].dist))
            break;
        hp[i] = hp[p];
        i = p;
    }
    hp[i] = x;
}

/* Heap-sorts the max-heap hp[0..n) in place into ascending order. */
static void res_sort(sx__hit *hp, size_t n)
{
    for (size_t m = n; m > 1; m--) {
        sx__hit top = hp[0];
        res_sift(hp, m - 1, hp[m - 1]);
        hp[m - 1] = top;
    }
}

static sx_status grow_cand(scratch *s, size_t need)
{
    if (need <= s->cand_cap)
        return SX_OK;
    size_t cap = s->cand_cap ? s->cand_cap : 256;
    while (cap < need)
        cap *= 2;
    sx__hit *c = sx__realloc(s->cand, cap * sizeof *c);
    if (!c)
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot grow the candidate heap to %zu", cap);
    s->cand = c;
    s->cand_cap = cap;
    return SX_OK;
}

/* Two-heap level-0 search; on success s->res[0..*nres) holds the allowed results sorted best
 * first (code distances). */
static sx_status filtered_search(const sx__hnsw_sq *h,
                                 scratch *s,
                                 const sx__hsq_query *q,
                                 uint32_t ep,
                                 float ep_dist,
                                 size_t cap,
                                 const uint64_t *allow,
                                 size_t *nres)
{
    if (cap > s->res_cap) {
        sx__hit *r = sx__malloc(cap * sizeof *r);
        if (!r)
            return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate %zu results", cap);
        sx__free(s->res);
        s->res = r;
        s->res_cap = cap;
    }
    sx_status rc = grow_cand(s, (size_t)h->M0 + 1);
    if (rc != SX_OK)
        return rc;
    const uint8_t *base = h->rec;
    const size_t stride = h->rec_bytes, norm_off = h->norm_off;
    size_t nc = 0, nr = 0;
    float bound = __builtin_inff();

    new_epoch(s);
    s->tags[ep] = s->epoch;
    if (sx__bits_test_atomic(allow, ep)) {
        res_push(s->res, &nr, cap, (sx__hit){ ep_dist, ep });
        bound = nr == cap ? s->res[0].dist : bound;
    }
    sx__minheap_push(s->cand, &nc, (sx__hit){ ep_dist, ep });
    while (nc > 0) {
        if (nr == cap && s->cand[0].dist > bound)
            break;
        sx__hit c = sx__minheap_pop(s->cand, &nc);
        size_t nt = gather(h, s, sx__hsq_links(h, c.id, 0));
        rc = grow_cand(s, nc + nt);
        if (rc != SX_OK)
            return rc;
        h->kern->dot_batch(base, stride, s->todo, nt, q->q8, h->dim, s->dots);
        for (size_t t = 0; t < nt; t++) {
            uint32_t id = s->todo[t];
            float nv;
            memcpy(&nv, base + (size_t)id * stride + norm_off, sizeof nv);
            float d = nv + q->c0 + q->c1 * (float)s->dots[t];
            if (nr < cap || d < bound) {
                sx__minheap_push(s->cand, &nc, (sx__hit){ d, id });
                if (sx__bits_test_atomic(allow, id)) {
                    res_push(s->res, &nr, cap, (sx__hit){ d, id });
                    if (nr == cap)
                        bound = s->res[0].dist;
                }
            }
        }
    }
    res_sort(s->res, nr);
    *nres = nr;
    return SX_OK;
}

/* ---------------------------------------------------------------- refine */

/* Exact distances of cands[0..m) (ids without FLAG after masking) into out. */
/* Exact distances of cands[0..m) into out. The first PF_VEC_FIRST lines of every candidate's
 * vector are prefetched up front, the rest of a vector while the previous one is compared: of
 * the variants measured on Fashion-MNIST (ef 20, refine_k 2: 20 vectors of 49 lines), this was
 * ~15% faster than fetching each whole vector one ahead, and than fetching 8 lines two ahead
 * and leaving the rest to the hardware prefetcher. */
static void
refine(const sx__hnsw_sq *h, const float *query, const sx__hit *cands, size_t m, sx__topk *out)
{
    const size_t dim = h->dim;
    const size_t lines = (dim * sizeof(float) + 63) / 64;
    for (size_t i = 0; i < m; i++) {
        const char *v = (const char *)(h->vecs + (size_t)(cands[i].id & ID_MASK) * dim);
        for (size_t l = 0; l < PF_VEC_FIRST && l < lines; l++)
            __builtin_prefetch(v + 64 * l, 0, 3);
    }
    for (size_t i = 0; i < m; i++) {
        if (i + 1 < m) {
            const char *v = (const char *)(h->vecs + (size_t)(cands[i + 1].id & ID_MASK) * dim);
            for (size_t l = PF_VEC_FIRST; l < lines; l++)
                __builtin_prefetch(v + 64 * l, 0, 3);
        }
        uint32_t id = cands[i].id & ID_MASK;
        sx__topk_push(out, h->dist(query, h->vecs + (size_t)id * dim, dim), id);
    }
}

/* ---------------------------------------------------------------- params */

typedef struct search_params {
    long ef;
    double refine_k;
} search_params;

static sx_status parse_search(const sx_param *p, size_t np, size_t k, search_params *sp)
{
    long def = k > SX__HNSW_EF_DEF ? (long)k : SX__HNSW_EF_DEF;
    sx_status rc = sx__param_int(p, np, "ef", 1, INT_MAX, def, &sp->ef);
    if (rc != SX_OK)
        return rc;
    if ((size_t)sp->ef < k)
        return sx__err(SX_EINVAL, "ef(%ld) should be larger than or equal to k(%zu)", sp->ef, k);
    sp->refine_k = 0.0; /* absent: the default rule of the header */
    for (size_t i = 0; i < np; i++) {
        if (!p[i].key || strcmp(p[i].key, "refine_k") != 0)
            continue;
        const char *s = p[i].value ? p[i].value : "";
        char *end = NULL;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || *end != '\0' || errno != 0 || !(v >= 1.0) || v > REFINE_K_MAX)
            return sx__err(SX_EINVAL, "refine_k must be a number in [1, %.0f], got \"%s\"",
                           REFINE_K_MAX, s);
        sp->refine_k = v;
    }
    return SX_OK;
}

sx_status sx__hnsw_sq_check_search_params(const sx_param *p, size_t np, size_t k)
{
    search_params sp;
    return parse_search(p, np, k, &sp);
}

/* ---------------------------------------------------------------- vtable: search */

sx_status sx__hnsw_sq_search(const sx__index *idx,
                             const float *query,
                             size_t k,
                             const sx_param *sp,
                             size_t nsp,
                             const uint64_t *allow,
                             sx__topk *out)
{
    const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
    search_params prm;
    sx_status rc = parse_search(sp, nsp, k, &prm);
    if (rc != SX_OK)
        return rc;
    if (k == 0 || h->n == 0)
        return SX_OK;
    /* candidates to re-rank, and the pool that must hold them */
    size_t cap = (size_t)prm.ef < h->n ? (size_t)prm.ef : h->n;
    size_t ncand = k;
    if (h->refine && prm.refine_k > 0.0) {
        double want = ceil((double)k * prm.refine_k);
        ncand = want < (double)h->n ? (size_t)want : h->n;
        cap = ncand > cap ? ncand : cap;
    } else if (h->refine) {
        ncand = 2 * k < cap ? 2 * k : cap;
    }
    scratch *s = thread_scratch();
    if (!s)
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate search scratch");
    rc = scratch_reserve(s, h->n, cap, h->M0, sx__hsq_q8_bytes(h->dim));
    if (rc != SX_OK)
        return rc;

    sx__hsq_query q = { .q8 = s->q8 };
    sx__hsq_prepare(h, query, &q);
    uint32_t cur = h->entry;
    float d = sx__hsq_dist(h, &q, cur);
    if (h->max_level > 0)
        cur = greedy(h, s, &q, cur, &d, h->max_level);

    const sx__hit *cands;
    size_t size = 0;
    if (allow) {
        rc = filtered_search(h, s, &q, cur, d, cap, allow, &size);
        if (rc != SX_OK)
            return rc;
        cands = s->res;
    } else {
        new_epoch(s);
        s->tags[cur] = s->epoch;
        s->pool[0].dist = d;
        s->pool[0].id = cur;
        size = pool_search(h, s, &q, 1, cap);
        cands = s->pool;
    }
    size_t m = size < ncand ? size : ncand;
    if (h->refine) {
        refine(h, query, cands, m, out);
    } else {
        for (size_t i = 0; i < m; i++)
            sx__topk_push(out, cands[i].dist, cands[i].id & ID_MASK);
    }
    return SX_OK;
}
