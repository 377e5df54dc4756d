/*
 * graph_repair.c: invariant R of graph.h (every node reachable from the search's seed set): the
 * BFS check (sx__graph_reach, sx__graph_check_reach) and the guaranteed repair
 * (sx__graph_repair), over an adjacency view, so HNSW level 0, HNSW_SQ's records, Vamana's lists
 * (in memory and in DiskANN's file) and CAGRA's padded rows share one implementation.
 *
 * The repair, step by step (graph.h has the proof that it always succeeds in one pass):
 *   state     parent[x]  UNREACHED, SEED, or the node whose list slot first reached x (x's tree
 *                        edge); queue: the BFS queue; deg[p] / kids[p]: p's list length and
 *                        number of tree edges (u16: cap <= 65535), known for every reached node
 *                        once the BFS from it is done;
 *   1.        BFS from the seeds;
 *   2.        for u = 0..n-1 unreached: parent p = first of (a) the pool search's results for u
 *             with room, (b) those with a non-tree edge (deg > kids), (c) the nearest reached node
 *             with room by a scan, (d) the nearest with a non-tree edge by a scan; link p -> u
 *             (append, or overwrite p's LAST non-tree slot: lists are roughly best first, so the
 *             last is the least useful), parent[u] = p, BFS from u.
 * The pool search (ef > 0) starts from the seeds and follows the current lists, so everything it
 * visits is reached; it is the parent search HNSW's and Vamana's repairs always did. The scan is
 * O(reached) distances and only runs when the search found no usable node (a pool of nodes that
 * are full with tree edges only), which the counting argument makes rare and bounded.
 * Memory: 12 bytes per node, plus 2 per node and the pool for the search (sx__graph_repair_bytes).
 *
 * Thread-safety: single-threaded over the view; no global state.
 */
#include <string.h>

#include "index/graph/graph.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

#define UNREACHED UINT32_MAX
#define SEED      (UINT32_MAX - 1u)
#define DEG_MAX   65535u

/* ---------------------------------------------------------------- list access */

/* Node id's list: *ids (into the graph, the store, or buf) and *cnt. */
static sx_status
list_get(const sx__graph_view *v, uint32_t id, uint32_t *buf, const uint32_t **ids, uint32_t *cnt)
{
    if (v->store)
        return v->store->get(v->store->ctx, id, buf, ids, cnt);
    const uint32_t *l = (const uint32_t *)(const void *)(v->base + (size_t)id * v->stride);
    if (v->format == SX__GRAPH_COUNTED) {
        *cnt = l[0];
        *ids = l + 1;
    } else {
        uint32_t c = 0;
        while (c < v->cap && l[c] != SX__GRAPH_NONE)
            c++;
        *cnt = c;
        *ids = l;
    }
    return SX_OK;
}

/* Replaces node id's list by ids[0..cnt). */
static sx_status list_put(const sx__graph_view *v, uint32_t id, const uint32_t *ids, uint32_t cnt)
{
    if (v->store)
        return v->store->put(v->store->ctx, id, ids, cnt);
    uint32_t *l = (uint32_t *)(void *)(v->base + (size_t)id * v->stride);
    if (v->format == SX__GRAPH_COUNTED) {
        memmove(l + 1, ids, cnt * sizeof *ids);
        l[0] = cnt;
    } else {
        memmove(l, ids, cnt * sizeof *ids);
        for (uint32_t j = cnt; j < v->cap; j++)
            l[j] = SX__GRAPH_NONE;
    }
    return SX_OK;
}

static sx_status bad_list(uint32_t id, uint32_t cnt, uint32_t cap)
{
    return sx__err(SX_ECORRUPT, "graph: node %u has %u links, more than its capacity %u", id, cnt,
                   cap);
}

/* ---------------------------------------------------------------- check */

sx_status sx__graph_reach(const sx__graph_view *v,
                          const uint32_t *seeds,
                          size_t nseeds,
                          size_t *nreached,
                          uint32_t *first)
{
    size_t n = v->n;
    *nreached = 0;
    *first = n ? 0 : SX__GRAPH_NONE;
    if (n == 0)
        return SX_OK;
    uint64_t *seen = sx__calloc(sx__bits_words(n), sizeof *seen);
    uint32_t *queue = sx__malloc(n * sizeof *queue);
    uint32_t *buf = v->store ? sx__malloc((size_t)v->cap * sizeof *buf + 4) : NULL;
    sx_status rc = SX_OK;
    if (!seen || !queue || (v->store && !buf)) {
        rc = sx__err(SX_ENOMEM, "graph check: cannot allocate the reachability scan of %zu nodes",
                     n);
        goto out;
    }
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < nseeds; i++) {
        uint32_t s = seeds[i];
        if (s >= n) {
            rc = sx__err(SX_ECORRUPT, "graph: start node %u out of range (n=%zu)", s, n);
            goto out;
        }
        if (!sx__bits_test(seen, s)) {
            sx__bits_set(seen, s);
            queue[tail++] = s;
        }
    }
    while (head < tail) {
        uint32_t c = queue[head++], cnt;
        const uint32_t *ids;
        rc = list_get(v, c, buf, &ids, &cnt);
        if (rc != SX_OK)
            goto out;
        if (cnt > v->cap) {
            rc = bad_list(c, cnt, v->cap);
            goto out;
        }
        for (uint32_t j = 0; j < cnt; j++) {
            uint32_t x = ids[j];
            if (x >= n) {
                rc = sx__err(SX_ECORRUPT, "graph: node %u links to %u, out of range (n=%zu)", c, x,
                             n);
                goto out;
            }
            if (!sx__bits_test(seen, x)) {
                sx__bits_set(seen, x);
                queue[tail++] = x;
            }
        }
    }
    *nreached = tail;
    if (tail < n) {
        uint32_t u = 0;
        while (sx__bits_test(seen, u))
            u++;
        *first = u;
    } else {
        *first = SX__GRAPH_NONE;
    }
out:
    sx__free(seen);
    sx__free(queue);
    sx__free(buf);
    return rc;
}

sx_status sx__graph_check_reach(const sx__graph_view *v,
                                const uint32_t *seeds,
                                size_t nseeds,
                                const char *who,
                                const char *what)
{
    if (v->n > 0 && nseeds == 0)
        return sx__err(SX_ECORRUPT, "%s: %zu nodes and no start node", who, v->n);
    size_t reached;
    uint32_t first;
    sx_status rc = sx__graph_reach(v, seeds, nseeds, &reached, &first);
    if (rc != SX_OK)
        return rc;
    if (reached < v->n)
        return sx__err(SX_ECORRUPT, "%s: %zu of %zu nodes unreachable from %s (first: %u)", who,
                       v->n - reached, v->n, what, first);
    return SX_OK;
}

/* ---------------------------------------------------------------- repair */

typedef struct repair {
    const sx__graph_view *v;
    const sx__graph_repair_opts *o;
    const uint32_t *seeds;
    size_t nseeds;
    uint32_t *parent; /* n */
    uint32_t *queue;  /* n */
    uint16_t *deg;    /* n */
    uint16_t *kids;   /* n */
    size_t head, tail;
    sx__visited vis; /* parent search (ef > 0) */
    sx__hit *pool;   /* ef + 1 */
    uint32_t *buf;   /* cap: a list read through the store */
    uint32_t *buf2;  /* cap: a list being rewritten */
} repair;

/* Continues the BFS until the queue is empty: every node reachable from what is queued gets its
 * parent (tree edge), and every dequeued node its deg and kids. */
static sx_status bfs(repair *r)
{
    const sx__graph_view *v = r->v;
    while (r->head < r->tail) {
        uint32_t c = r->queue[r->head++], cnt;
        const uint32_t *ids;
        sx_status rc = list_get(v, c, r->buf, &ids, &cnt);
        if (rc != SX_OK)
            return rc;
        if (cnt > v->cap)
            return bad_list(c, cnt, v->cap);
        r->deg[c] = (uint16_t)cnt;
        for (uint32_t j = 0; j < cnt; j++) {
            uint32_t x = ids[j];
            if (x >= v->n || x == c)
                return sx__err(SX_ECORRUPT, "graph repair: node %u links to %u (n=%zu)", c, x,
                               v->n);
            if (r->parent[x] != UNREACHED)
                continue;
            r->parent[x] = c;
            r->kids[c]++;
            r->queue[r->tail++] = x;
        }
    }
    return SX_OK;
}

static bool usable(const repair *r, uint32_t p, bool want_room)
{
    return want_room ? r->deg[p] < r->v->cap : r->deg[p] > r->kids[p];
}

/* Pool search for u from the seeds over the current lists (everything it visits is reached).
 * Returns the pool size; r->pool sorted best first, ids without the flag. */
static sx_status search(repair *r, uint32_t u, size_t *out)
{
    const sx__graph_view *v = r->v;
    const sx__graph_repair_opts *o = r->o;
    size_t ef = o->ef, size = 0;
    sx__visited_next(&r->vis);
    (void)sx__visited_test_set(&r->vis, u); /* u is never its own parent */
    for (size_t i = 0; i < r->nseeds; i++)
        if (!sx__visited_test_set(&r->vis, r->seeds[i]))
            (void)sx__pool_insert(r->pool, &size, ef, o->dist(o->ctx, u, r->seeds[i]), r->seeds[i]);
    size_t cur = 0;
    while (cur < size) {
        uint32_t c = r->pool[cur].id, cnt;
        r->pool[cur].id = c | SX__GRAPH_FLAG;
        const uint32_t *ids;
        sx_status rc = list_get(v, c, r->buf, &ids, &cnt);
        if (rc != SX_OK)
            return rc;
        size_t lowest = SIZE_MAX;
        for (uint32_t j = 0; j < cnt && j < v->cap; j++) {
            uint32_t x = ids[j];
            if (x >= v->n || sx__visited_test_set(&r->vis, x))
                continue;
            size_t p = sx__pool_insert(r->pool, &size, ef, o->dist(o->ctx, u, x), x);
            if (p < lowest && p < ef)
                lowest = p;
        }
        cur = sx__pool_next(r->pool, size, lowest <= cur ? lowest : cur + 1);
    }
    sx__pool_unflag(r->pool, size);
    *out = size;
    return SX_OK;
}

/* The parent for u (see the file header); SX__GRAPH_NONE only if the counting argument failed,
 * i.e. a list broke the precondition. */
static sx_status pick_parent(repair *r, uint32_t u, uint32_t *out, bool *scanned)
{
    *out = SX__GRAPH_NONE;
    *scanned = false;
    if (r->o->ef > 0) {
        size_t size = 0;
        sx_status rc = search(r, u, &size);
        if (rc != SX_OK)
            return rc;
        for (int want_room = 1; want_room >= 0; want_room--) {
            for (size_t i = 0; i < size; i++) {
                uint32_t p = r->pool[i].id;
                if (r->parent[p] != UNREACHED && usable(r, p, want_room)) {
                    *out = p;
                    return SX_OK;
                }
            }
        }
    }
    *scanned = true;
    uint32_t best[2] = { SX__GRAPH_NONE, SX__GRAPH_NONE }; /* [0]: non-tree edge, [1]: room */
    float bd[2] = { __builtin_inff(), __builtin_inff() };
    for (size_t i = 0; i < r->tail; i++) {
        uint32_t p = r->queue[i];
        bool room = usable(r, p, true);
        if (!room && !usable(r, p, false))
            continue;
        float d = r->o->dist(r->o->ctx, u, p);
        if (best[room] == SX__GRAPH_NONE || d < bd[room]) {
            best[room] = p;
            bd[room] = d;
        }
    }
    *out = best[1] != SX__GRAPH_NONE ? best[1] : best[0];
    return SX_OK;
}

/* Links p -> u: append when p has room, else overwrite p's last non-tree slot. */
static sx_status link_node(repair *r, uint32_t p, uint32_t u, bool *replaced)
{
    const sx__graph_view *v = r->v;
    const uint32_t *ids;
    uint32_t cnt;
    sx_status rc = list_get(v, p, r->buf, &ids, &cnt);
    if (rc != SX_OK)
        return rc;
    if (cnt > v->cap)
        return bad_list(p, cnt, v->cap);
    memcpy(r->buf2, ids, cnt * sizeof *ids);
    *replaced = cnt >= v->cap;
    if (!*replaced) {
        r->buf2[cnt++] = u;
    } else {
        uint32_t j = cnt;
        while (j > 0 && r->parent[r->buf2[j - 1]] == p)
            j--;
        if (j == 0)
            return sx__err(SX_ECORRUPT, "graph repair: node %u has no non-tree link to give up", p);
        r->buf2[j - 1] = u;
    }
    rc = list_put(v, p, r->buf2, cnt);
    if (rc != SX_OK)
        return rc;
    r->deg[p] = (uint16_t)cnt;
    r->kids[p]++;
    r->parent[u] = p;
    r->queue[r->tail++] = u;
    return SX_OK;
}

uint64_t sx__graph_repair_bytes(size_t n, uint32_t cap, size_t ef)
{
    uint64_t b = (uint64_t)n * 12 + 2 * ((uint64_t)cap * 4 + 4) + 64;
    if (ef > 0)
        b += (uint64_t)n * 2 + (ef + 1) * sizeof(sx__hit);
    return b;
}

sx_status sx__graph_repair(const sx__graph_view *v,
                           const uint32_t *seeds,
                           size_t nseeds,
                           const sx__graph_repair_opts *o,
                           sx__graph_repair_stats *stats)
{
    sx__graph_repair_stats st;
    memset(&st, 0, sizeof st);
    size_t n = v->n;
    if (stats)
        *stats = st;
    if (n == 0)
        return SX_OK;
    if (nseeds == 0 || v->cap == 0 || v->cap > DEG_MAX)
        return sx__err(SX_EINVAL, "graph repair: %zu seeds, capacity %u", nseeds, v->cap);
    repair r;
    memset(&r, 0, sizeof r);
    r.v = v;
    r.o = o;
    r.seeds = seeds;
    r.nseeds = nseeds;
    r.parent = sx__malloc(n * sizeof *r.parent);
    r.queue = sx__malloc(n * sizeof *r.queue);
    r.deg = sx__calloc(n, sizeof *r.deg);
    r.kids = sx__calloc(n, sizeof *r.kids);
    r.buf = sx__malloc((size_t)v->cap * sizeof *r.buf);
    r.buf2 = sx__malloc((size_t)v->cap * sizeof *r.buf2);
    sx_status rc = SX_OK;
    if (!r.parent || !r.queue || !r.deg || !r.kids || !r.buf || !r.buf2) {
        rc = sx__err(SX_ENOMEM, "graph repair: cannot allocate the repair of %zu nodes", n);
        goto out;
    }
    if (o->ef > 0) {
        r.pool = sx__malloc((o->ef + 1) * sizeof *r.pool);
        rc = sx__visited_reserve(&r.vis, n);
        if (rc == SX_OK && !r.pool)
            rc = sx__err(SX_ENOMEM, "graph repair: cannot allocate the repair of %zu nodes", n);
        if (rc != SX_OK)
            goto out;
    }
    memset(r.parent, 0xFF, n * sizeof *r.parent);
    for (size_t i = 0; i < nseeds; i++) {
        if (seeds[i] >= n) {
            rc = sx__err(SX_EINVAL, "graph repair: seed %u out of range (n=%zu)", seeds[i], n);
            goto out;
        }
        if (r.parent[seeds[i]] == UNREACHED) {
            r.parent[seeds[i]] = SEED;
            r.queue[r.tail++] = seeds[i];
        }
    }
    rc = bfs(&r);
    st.unreached = n - r.tail;
    for (uint32_t u = 0; rc == SX_OK && r.tail < n && u < n; u++) {
        if (r.parent[u] != UNREACHED)
            continue;
        uint32_t p;
        bool scanned, replaced = false;
        rc = pick_parent(&r, u, &p, &scanned);
        if (rc == SX_OK && p == SX__GRAPH_NONE)
            rc = sx__err(SX_ECORRUPT, "graph repair: no reached node can link node %u", u);
        if (rc == SX_OK)
            rc = link_node(&r, p, u, &replaced);
        if (rc == SX_OK)
            rc = bfs(&r);
        st.linked++;
        st.replaced += replaced;
        st.scanned += scanned;
    }
    if (rc == SX_OK && r.tail != n)
        rc = sx__err(SX_ECORRUPT, "graph repair: %zu nodes left unreached", n - r.tail);
out:
    if (stats)
        *stats = st;
    sx__free(r.parent);
    sx__free(r.queue);
    sx__free(r.deg);
    sx__free(r.kids);
    sx__free(r.buf);
    sx__free(r.buf2);
    sx__free(r.pool);
    sx__visited_fini(&r.vis);
    return rc;
}
