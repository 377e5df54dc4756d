/*
 * cagra_search.c: search of a CAGRA graph on the CPU (the path by which a GPU-built graph is
 * served by CPU-only machines: the graph is stored in this family's own format, cagra_io.c, and
 * searched here; cuVS instead converts to hnswlib's format, Milvus's adapt_for_cpu).
 *
 * Algorithm (CAGRA's single-CTA search, arXiv 2308.15136 section 4.2, done by one thread): an
 * "itopk" buffer of L = max(itopk_size, k) candidates sorted by distance (capped at n), seeded
 * with the index's entry points (the node nearest the mean and rows drawn at build time, cagra.h);
 * each iteration takes the search_width best not yet expanded candidates as parents and offers
 * all their unvisited neighbours to the buffer; the search stops when every candidate in the
 * buffer has been expanded (or after max_iterations, when set). The buffer is the sorted "pool"
 * of hnsw_search.c (the top id bit marks "expanded"), so search_width = 1 is exactly HNSW's
 * ef-search at level 0 with ef = L. The visited set is a per-thread array of 16-bit epoch tags
 * (one store per visit, cleared only when the epoch wraps), not CAGRA's forgettable hash: on a
 * CPU the n * 2 bytes cost nothing and there are no false re-visits.
 *
 * Parameters (Milvus / cuVS names): itopk_size [1, 65536] (default 64; "ef" is accepted as its
 * alias, as Milvus searches an adapt_for_cpu index with ef), search_width [1, 1024] = 1,
 * max_iterations >= 0 (0 = until converged), min_iterations >= 0 (<= max_iterations when that
 * is set; on one CPU thread the search only stops when no candidate is left to expand, so it has
 * no further effect), team_size 0 | 2 | 4 | 8 | 16 | 32 (GPU warp split; ignored here). Other
 * keys are ignored, as HNSW does (generic search params reach every index type).
 *
 * Filtered search (allow bitset): as HNSW's (hnsw_search.c): disallowed rows are traversed but
 * never returned; a min-heap of candidates and a max-heap of L allowed results, stopping when
 * the nearest candidate is farther than the worst of L allowed results. search_width does not
 * apply (one parent at a time). A very selective filter degrades to a traversal of everything
 * reachable from the entry points, never a hang; the engine switches to exact search for those.
 *
 * Thread-safety: read-only on the index; scratch is per thread (pthread key, freed at thread
 * exit), so any number of threads may search at once.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "index/cagra/cagra.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

#define FLAG    0x80000000u
#define ID_MASK 0x7FFFFFFFu

/* ---------------------------------------------------------------- scratch */

typedef struct scratch {
    uint16_t *tags; /* visited <=> tags[id] == epoch */
    size_t tags_cap;
    uint16_t epoch;
    sx__hit *pool; /* L + 1 */
    size_t pool_cap;
    sx__hit *cand; /* filtered: min-heap */
    size_t cand_cap;
    sx__hit *res; /* filtered: max-heap of L */
    size_t res_cap;
    uint32_t *todo; /* unvisited neighbours of the current parents */
    size_t todo_cap;
    uint32_t *parents;
    size_t parents_cap;
} scratch;

static void scratch_fini(scratch *s)
{
    sx__free(s->tags);
    sx__free(s->pool);
    sx__free(s->cand);
    sx__free(s->res);
    sx__free(s->todo);
    sx__free(s->parents);
    memset(s, 0, sizeof *s);
}

/* Grows *buf (of *cap elements of size `elem`) to at least need. */
static bool grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *p = sx__realloc(*buf, c * elem);
    if (!p)
        return false;
    *buf = p;
    *cap = c;
    return true;
}

static sx_status scratch_reserve(scratch *s, size_t n, size_t L, size_t todo, size_t width)
{
    if (n > s->tags_cap) {
        uint16_t *t = sx__calloc(n, sizeof *t);
        if (!t)
            return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate visited tags for %zu nodes", n);
        sx__free(s->tags);
        s->tags = t;
        s->tags_cap = n;
        s->epoch = 0;
    }
    if (!grow((void **)&s->pool, &s->pool_cap, L + 1, sizeof *s->pool) ||
        !grow((void **)&s->todo, &s->todo_cap, todo, sizeof *s->todo) ||
        !grow((void **)&s->parents, &s->parents_cap, width, sizeof *s->parents))
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate search scratch");
    return SX_OK;
}

static inline void new_epoch(scratch *s)
{
    if (++s->epoch == 0) {
        memset(s->tags, 0, s->tags_cap * sizeof *s->tags);
        s->epoch = 1;
    }
}

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
static _Thread_local scratch *tls_scratch;

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

/* ---------------------------------------------------------------- params */

typedef struct sparams {
    long itopk, width, min_it, max_it, team;
} sparams;

static sx_status parse_search(const sx_param *p, size_t np, size_t k, sparams *o)
{
    long def = SX__CAGRA_ITOPK_DEF;
    sx_status rc = sx__param_int(p, np, "ef", 1, SX__CAGRA_ITOPK_MAX, def, &def);
    if (rc != SX_OK)
        return rc;
    rc = sx__param_int(p, np, "itopk_size", 1, SX__CAGRA_ITOPK_MAX, def, &o->itopk);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "search_width", 1, SX__CAGRA_WIDTH_MAX, SX__CAGRA_WIDTH_DEF,
                           &o->width);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "min_iterations", 0, INT_MAX, 0, &o->min_it);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "max_iterations", 0, INT_MAX, 0, &o->max_it);
    if (rc == SX_OK)
        rc = sx__param_int(p, np, "team_size", 0, 32, 0, &o->team);
    if (rc != SX_OK)
        return rc;
    if (o->team != 0 && o->team != 2 && o->team != 4 && o->team != 8 && o->team != 16 &&
        o->team != 32)
        return sx__err(SX_EINVAL, "team_size must be 0, 2, 4, 8, 16 or 32, got %ld", o->team);
    if (o->max_it > 0 && o->min_it > o->max_it)
        return sx__err(SX_EINVAL, "min_iterations (%ld) must not exceed max_iterations (%ld)",
                       o->min_it, o->max_it);
    if (k > (size_t)SX__CAGRA_ITOPK_MAX)
        return sx__err(SX_EINVAL, "GPU_CAGRA: k (%zu) above %u", k, SX__CAGRA_ITOPK_MAX);
    return SX_OK;
}

sx_status sx__cagra_check_search_params(const sx_param *p, size_t np, size_t k)
{
    sparams o;
    return parse_search(p, np, k, &o);
}

/* ---------------------------------------------------------------- search */

/* Inserts (d, id) into the sorted pool[0..*size) of capacity cap. Returns the position, or cap
 * when d does not beat the worst of a full pool. Ties go after the existing entries. */
static inline size_t pool_insert(sx__hit *pool, size_t *size, size_t cap, float d, uint32_t id)
{
    size_t n = *size;
    if (n == cap && !(d < pool[n - 1].dist))
        return cap;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pool[mid].dist <= d)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t last = n == cap ? n - 1 : n;
    memmove(pool + lo + 1, pool + lo, (last - lo) * sizeof *pool);
    pool[lo].dist = d;
    pool[lo].id = id;
    if (n < cap)
        *size = n + 1;
    return lo;
}

/* Collects the unvisited neighbours of `parent` into todo[nt..] (marking them visited) and
 * prefetches their vectors. Returns the new count. */
static inline size_t gather(const sx__cagra *g, scratch *s, uint32_t parent, size_t nt)
{
    const uint32_t *row = sx__cagra_row(g, parent);
    uint16_t *tags = s->tags, ep = s->epoch;
    for (uint32_t j = 0; j < g->degree; j++) {
        uint32_t id = row[j];
        if (id == SX__CAGRA_NONE)
            break;
        if (tags[id] == ep)
            continue;
        tags[id] = ep;
        s->todo[nt++] = id;
        __builtin_prefetch(sx__cagra_vec(g, id), 0, 3);
    }
    return nt;
}

static void search_plain(const sx__cagra *g,
                         scratch *s,
                         const float *q,
                         size_t L,
                         const sparams *o,
                         size_t k,
                         sx__topk *out)
{
    sx__hit *pool = s->pool;
    size_t size = 0;
    new_epoch(s);
    for (uint32_t e = 0; e < g->n_entries; e++) {
        uint32_t id = g->entries[e];
        if (s->tags[id] == s->epoch)
            continue;
        s->tags[id] = s->epoch;
        (void)pool_insert(pool, &size, L, g->dist(q, sx__cagra_vec(g, id), g->dim), id);
    }
    size_t cur = 0;
    long it = 0;
    for (;;) {
        while (cur < size && (pool[cur].id & FLAG))
            cur++;
        if (cur >= size)
            break;
        size_t np = 0;
        for (size_t i = cur; i < size && np < (size_t)o->width; i++) {
            if (pool[i].id & FLAG)
                continue;
            s->parents[np++] = pool[i].id;
            pool[i].id |= FLAG;
        }
        size_t nt = 0;
        for (size_t i = 0; i < np; i++)
            nt = gather(g, s, s->parents[i], nt);
        size_t lowest = SIZE_MAX;
        for (size_t t = 0; t < nt; t++) {
            if (t + 1 < nt)
                __builtin_prefetch(sx__cagra_vec(g, s->todo[t + 1]) + 16, 0, 3);
            uint32_t id = s->todo[t];
            size_t p = pool_insert(pool, &size, L, g->dist(q, sx__cagra_vec(g, id), g->dim), id);
            if (p < lowest)
                lowest = p;
        }
        if (lowest < cur)
            cur = lowest;
        if (o->max_it > 0 && ++it >= o->max_it)
            break;
    }
    size_t m = size < k ? size : k;
    for (size_t i = 0; i < m; i++)
        sx__topk_push(out, pool[i].dist, pool[i].id & ID_MASK);
}

/* max-heap on dist (results); keeps at most cap entries */
static void res_push(sx__hit *hp, size_t *n, size_t cap, sx__hit x)
{
    if (*n == cap) {
        if (!(x.dist < hp[0].dist))
            return;
        size_t i = 0, m = *n;
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
        hp[i] = x;
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

static sx_status search_filtered(
    const sx__cagra *g, scratch *s, const float *q, size_t L, const uint64_t *allow, sx__topk *out)
{
    if (!grow((void **)&s->res, &s->res_cap, L, sizeof *s->res) ||
        !grow((void **)&s->cand, &s->cand_cap, (size_t)g->n_entries + g->degree, sizeof *s->cand))
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate filtered-search scratch");
    size_t nc = 0, nr = 0;
    float bound = __builtin_inff();
    new_epoch(s);
    for (uint32_t e = 0; e < g->n_entries; e++) {
        uint32_t id = g->entries[e];
        if (s->tags[id] == s->epoch)
            continue;
        s->tags[id] = s->epoch;
        float d = g->dist(q, sx__cagra_vec(g, id), g->dim);
        sx__minheap_push(s->cand, &nc, (sx__hit){ d, id });
        if (sx__bits_test_atomic(allow, id)) {
            res_push(s->res, &nr, L, (sx__hit){ d, id });
            bound = nr == L ? s->res[0].dist : __builtin_inff();
        }
    }
    while (nc > 0) {
        if (nr == L && s->cand[0].dist > bound)
            break;
        sx__hit c = sx__minheap_pop(s->cand, &nc);
        size_t nt = gather(g, s, c.id, 0);
        if (!grow((void **)&s->cand, &s->cand_cap, nc + nt, sizeof *s->cand))
            return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot grow the candidate heap");
        for (size_t t = 0; t < nt; t++) {
            uint32_t id = s->todo[t];
            float d = g->dist(q, sx__cagra_vec(g, id), g->dim);
            if (nr < L || d < bound) {
                sx__minheap_push(s->cand, &nc, (sx__hit){ d, id });
                if (sx__bits_test_atomic(allow, id)) {
                    res_push(s->res, &nr, L, (sx__hit){ d, id });
                    bound = nr == L ? s->res[0].dist : __builtin_inff();
                }
            }
        }
    }
    for (size_t i = 0; i < nr; i++)
        sx__topk_push(out, s->res[i].dist, s->res[i].id);
    return SX_OK;
}

sx_status sx__cagra_search(const sx__index *idx,
                           const float *query,
                           size_t k,
                           const sx_param *sp,
                           size_t nsp,
                           const uint64_t *allow,
                           sx__topk *out)
{
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    sparams o;
    sx_status rc = parse_search(sp, nsp, k, &o);
    if (rc != SX_OK)
        return rc;
    if (k == 0 || g->n == 0)
        return SX_OK;
    size_t L = (size_t)o.itopk > k ? (size_t)o.itopk : k;
    if (L > g->n)
        L = g->n;
    scratch *s = thread_scratch();
    if (!s)
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate search scratch");
    rc = scratch_reserve(s, g->n, L, (size_t)g->degree * (size_t)o.width, (size_t)o.width);
    if (rc != SX_OK)
        return rc;
    if (allow)
        return search_filtered(g, s, query, L, allow, out);
    search_plain(g, s, query, L, &o, k, out);
    return SX_OK;
}
