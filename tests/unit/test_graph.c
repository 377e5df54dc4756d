/*
 * test_graph.c: unit tests of the graph-index core (src/index/graph) and the max-heap of
 * util/heap.h, against naive references.
 *
 *   - sx__pool_insert: random streams into pools of every capacity equal the first cap entries
 *     of a stable sort by distance (ties after existing entries), duplicates included;
 *     sx__pool_next / sx__pool_unflag;
 *   - sx__maxheap_push / sx__maxheap_sort: the cap smallest distances, sorted;
 *   - sx__graph_pool_search with width 1 and width 3 on a random graph with a pool as large as
 *     the graph: every node reachable from the seeds is in the pool, each once (exact distances);
 *   - sx__graph_check_reach: SX_OK / SX_ECORRUPT naming the unreachable count; an id >= n and a
 *     count above cap are SX_ECORRUPT (never a crash);
 *   - sx__graph_repair, counted and padded lists and a store-backed view, on random graphs
 *     (cap 1..4, some lists full, some empty, 1..3 seeds, ef 0 = scan only and ef > 0) and on
 *     adversarial ones (every reached list full with only tree edges but one; all lists empty):
 *     afterwards every node is reachable from the seeds, lists stay valid (distinct ids, not the
 *     owner, count <= cap, padding after the ids), every node reachable before is still, and
 *     stats.linked <= stats.unreached;
 *   - sx__graph_tls_get: one object per thread and class, the same on every call of a thread,
 *     fini run for each at thread exit.
 * Seeded: the seed is printed (SX_SEED replays).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "index/graph/graph.h"
#include "util/alloc.h"
#include "util/err.h"
#include "util/heap.h"

#define MAXN 80

static uint64_t seed;

static int cmp_dist_stable(const void *pa, const void *pb)
{
    const sx__hit *a = pa, *b = pb;
    if (a->dist != b->dist)
        return a->dist < b->dist ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id; /* ids = arrival order: stable */
}

/* ---------------------------------------------------------------- pool and heaps */

static void test_pool_insert(void)
{
    uint64_t s = seed;
    sx__hit pool[65], all[200];
    for (int round = 0; round < 300; round++) {
        size_t cap = 1 + test_rand(&s) % 64, n = test_rand(&s) % 200, size = 0;
        uint32_t vals = 1 + (uint32_t)(test_rand(&s) % 20);
        for (size_t i = 0; i < n; i++) {
            all[i].dist = (float)(test_rand(&s) % vals);
            all[i].id = (uint32_t)i;
            size_t before = size;
            float worst = size ? pool[size - 1].dist : 0.0f;
            size_t p = sx__pool_insert(pool, &size, cap, all[i].dist, all[i].id);
            if (before == cap && !(all[i].dist < worst))
                ASSERT_EQ(p, cap);
            else
                ASSERT(p < cap && pool[p].id == all[i].id);
        }
        qsort(all, n, sizeof *all, cmp_dist_stable);
        ASSERT_EQ(size, n < cap ? n : cap);
        for (size_t i = 0; i < size; i++) {
            ASSERT(pool[i].dist == all[i].dist);
            ASSERT_EQ(pool[i].id, all[i].id);
        }
    }
    ASSERT_EQ(sx__pool_insert(pool, &(size_t){ 0 }, 0, 1.0f, 1), 0); /* cap 0: nothing enters */
    size_t size = 0;
    for (uint32_t i = 0; i < 5; i++)
        (void)sx__pool_insert(pool, &size, 8, (float)i, i);
    pool[0].id |= SX__GRAPH_FLAG;
    pool[1].id |= SX__GRAPH_FLAG;
    pool[3].id |= SX__GRAPH_FLAG;
    ASSERT_EQ(sx__pool_next(pool, size, 0), 2);
    ASSERT_EQ(sx__pool_next(pool, size, 3), 4);
    ASSERT_EQ(sx__pool_next(pool, 4, 3), 4);
    sx__pool_unflag(pool, size);
    for (uint32_t i = 0; i < 5; i++)
        ASSERT_EQ(pool[i].id, i);
}

static void test_maxheap(void)
{
    uint64_t s = seed ^ 1;
    sx__hit hp[40], all[300];
    for (int round = 0; round < 300; round++) {
        size_t cap = 1 + test_rand(&s) % 40, n = test_rand(&s) % 300, nh = 0;
        for (size_t i = 0; i < n; i++) {
            all[i].dist = (float)(test_rand(&s) % 50) - 25.0f;
            all[i].id = (uint32_t)i;
            sx__maxheap_push(hp, &nh, cap, all[i]);
            ASSERT(nh <= cap);
            for (size_t j = 1; j < nh; j++)
                ASSERT(!(hp[j].dist > hp[(j - 1) / 2].dist));
        }
        qsort(all, n, sizeof *all, cmp_dist_stable);
        sx__maxheap_sort(hp, nh);
        ASSERT_EQ(nh, n < cap ? n : cap);
        for (size_t i = 0; i < nh; i++)
            ASSERT(hp[i].dist == all[i].dist);
    }
}

/* ---------------------------------------------------------------- graphs */

typedef struct graph {
    size_t n;
    uint32_t cap;
    sx__graph_format fmt;
    uint32_t cells[MAXN * 5]; /* counted: count + cap ids; padded: cap ids */
    float pos[MAXN];          /* 1-d coordinates: the distance */
} graph;

static size_t stride_cells(const graph *g)
{
    return g->fmt == SX__GRAPH_COUNTED ? (size_t)g->cap + 1 : g->cap;
}

static uint32_t *list_at(graph *g, size_t i, uint32_t *cnt)
{
    uint32_t *l = g->cells + i * stride_cells(g);
    if (g->fmt == SX__GRAPH_COUNTED) {
        *cnt = l[0];
        return l + 1;
    }
    uint32_t c = 0;
    while (c < g->cap && l[c] != SX__GRAPH_NONE)
        c++;
    *cnt = c;
    return l;
}

static void set_list(graph *g, size_t i, const uint32_t *ids, uint32_t cnt)
{
    uint32_t *l = g->cells + i * stride_cells(g);
    if (g->fmt == SX__GRAPH_COUNTED) {
        l[0] = cnt;
        for (uint32_t j = 0; j < cnt; j++)
            l[1 + j] = ids[j];
    } else {
        for (uint32_t j = 0; j < cnt; j++)
            l[j] = ids[j];
        for (uint32_t j = cnt; j < g->cap; j++)
            l[j] = SX__GRAPH_NONE;
    }
}

static sx__graph_view view_of(graph *g)
{
    sx__graph_view v = { .n = g->n,
                         .cap = g->cap,
                         .format = g->fmt,
                         .base = (uint8_t *)g->cells,
                         .stride = stride_cells(g) * sizeof(uint32_t) };
    return v;
}

/* Random valid graph: distinct ids, never the owner, counts 0..cap (biased to full). */
static void random_graph(graph *g, uint64_t *s, size_t n, uint32_t cap, sx__graph_format fmt)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    g->cap = cap;
    g->fmt = fmt;
    for (size_t i = 0; i < n; i++) {
        g->pos[i] = test_randf(s) * 10.0f;
        uint32_t want = (uint32_t)(test_rand(s) % (cap + 2));
        if (want > cap)
            want = cap;
        uint32_t ids[8], c = 0;
        for (uint32_t t = 0; t < 4 * want && c < want && n > 1; t++) {
            uint32_t x = (uint32_t)(test_rand(s) % n);
            bool dup = x == i;
            for (uint32_t j = 0; j < c && !dup; j++)
                dup = ids[j] == x;
            if (!dup)
                ids[c++] = x;
        }
        set_list(g, i, ids, c);
    }
}

/* Naive reachability: reach[i] = 1 for every node reachable from the seeds. */
static size_t reach_naive(graph *g, const uint32_t *seeds, size_t ns, uint8_t *reach)
{
    memset(reach, 0, g->n);
    uint32_t q[MAXN];
    size_t h = 0, t = 0;
    for (size_t i = 0; i < ns; i++)
        if (!reach[seeds[i]]) {
            reach[seeds[i]] = 1;
            q[t++] = seeds[i];
        }
    while (h < t) {
        uint32_t c = q[h++], cnt;
        const uint32_t *ids = list_at(g, c, &cnt);
        for (uint32_t j = 0; j < cnt; j++)
            if (!reach[ids[j]]) {
                reach[ids[j]] = 1;
                q[t++] = ids[j];
            }
    }
    return t;
}

static void check_valid(graph *g)
{
    for (size_t i = 0; i < g->n; i++) {
        uint32_t cnt;
        const uint32_t *ids = list_at(g, i, &cnt);
        ASSERT(cnt <= g->cap);
        for (uint32_t j = 0; j < cnt; j++) {
            ASSERT(ids[j] < g->n && ids[j] != i);
            for (uint32_t k = 0; k < j; k++)
                ASSERT(ids[k] != ids[j]);
        }
        if (g->fmt == SX__GRAPH_PADDED)
            for (uint32_t j = cnt; j < g->cap; j++)
                ASSERT_EQ(ids[j], SX__GRAPH_NONE);
    }
}

static float pos_dist(const void *ctx, uint32_t a, uint32_t b)
{
    const graph *g = ctx;
    float d = g->pos[a] - g->pos[b];
    return d * d;
}

/* The same graph as a store (get/put callbacks), counting the calls. */
typedef struct store_ctx {
    graph *g;
    long gets, puts;
} store_ctx;

static sx_status st_get(void *ctx, uint32_t id, uint32_t *buf, const uint32_t **ids, uint32_t *cnt)
{
    store_ctx *s = ctx;
    s->gets++;
    const uint32_t *l = list_at(s->g, id, cnt);
    memcpy(buf, l, *cnt * sizeof *l);
    *ids = buf;
    return SX_OK;
}

static sx_status st_put(void *ctx, uint32_t id, const uint32_t *ids, uint32_t cnt)
{
    store_ctx *s = ctx;
    s->puts++;
    set_list(s->g, id, ids, cnt);
    return SX_OK;
}

/* Repairs g through a view (or a store) and checks everything the header promises. */
static void repair_and_check(graph *g, const uint32_t *seeds, size_t ns, size_t ef, bool store)
{
    uint8_t before[MAXN], after[MAXN];
    size_t r0 = reach_naive(g, seeds, ns, before);
    sx__graph_view v = view_of(g);
    store_ctx sc = { g, 0, 0 };
    sx__graph_store st = { &sc, st_get, st_put };
    if (store)
        v.store = &st;
    size_t reached;
    uint32_t first;
    ASSERT_OK(sx__graph_reach(&v, seeds, ns, &reached, &first));
    ASSERT_EQ(reached, r0);
    sx_status crc = sx__graph_check_reach(&v, seeds, ns, "test", "the seeds");
    ASSERT_EQ(crc, r0 == g->n ? SX_OK : SX_ECORRUPT);
    if (r0 < g->n) {
        ASSERT(strstr(sx_errmsg(), "unreachable") != NULL);
        ASSERT(!before[first]);
    }
    sx__graph_repair_opts o = { pos_dist, g, ef };
    sx__graph_repair_stats stats;
    ASSERT_OK(sx__graph_repair(&v, seeds, ns, &o, &stats));
    ASSERT_EQ(stats.unreached, g->n - r0);
    ASSERT(stats.linked <= stats.unreached);
    ASSERT(stats.replaced <= stats.linked && stats.scanned <= stats.linked);
    if (store)
        ASSERT_EQ(sc.puts, (long)stats.linked);
    check_valid(g);
    ASSERT_EQ(reach_naive(g, seeds, ns, after), g->n);
    for (size_t i = 0; i < g->n; i++)
        ASSERT(after[i] || !before[i]);
    ASSERT_OK(sx__graph_check_reach(&v, seeds, ns, "test", "the seeds"));
}

static void test_repair_random(void)
{
    uint64_t s = seed ^ 2;
    long repaired = 0;
    for (int round = 0; round < 3000; round++) {
        static graph g;
        size_t n = 1 + test_rand(&s) % MAXN;
        uint32_t cap = 1 + (uint32_t)(test_rand(&s) % 4);
        sx__graph_format fmt = test_rand(&s) % 2 ? SX__GRAPH_COUNTED : SX__GRAPH_PADDED;
        random_graph(&g, &s, n, cap, fmt);
        uint32_t seeds[3];
        size_t ns = 1 + test_rand(&s) % 3;
        for (size_t i = 0; i < ns; i++)
            seeds[i] = (uint32_t)(test_rand(&s) % n);
        size_t ef = test_rand(&s) % 3 == 0 ? 0 : 1 + test_rand(&s) % 16;
        uint8_t r[MAXN];
        repaired += reach_naive(&g, seeds, ns, r) < n;
        repair_and_check(&g, seeds, ns, ef, round % 5 == 0);
    }
    fprintf(stderr, "  %ld of 3000 random graphs needed a repair\n", repaired);
    ASSERT(repaired > 100);
}

/* Adversarial: a ring 0 -> 1 -> ... -> m-1 -> 0 of full cap-1 lists (only the closing edge
 * m-1 -> 0 is a non-tree edge), the other nodes unlinked: the first orphan can only replace the
 * closing edge (everything else is full of tree edges), each later one the previous orphan's
 * room or the edge that orphan's link freed up. */
static void test_repair_adversarial(void)
{
    static graph g;
    for (int fmt = 0; fmt < 2; fmt++) {
        for (size_t m = 1; m <= 6; m++) {
            for (size_t n = m; n <= 40; n += 13) {
                memset(&g, 0, sizeof g);
                g.n = n;
                g.cap = 1;
                g.fmt = fmt ? SX__GRAPH_PADDED : SX__GRAPH_COUNTED;
                for (size_t i = 0; i < n; i++) {
                    g.pos[i] = (float)i;
                    uint32_t nx = (uint32_t)((i + 1) % m);
                    set_list(&g, i, &nx, i < m && m > 1 ? 1 : 0);
                }
                uint32_t seed0 = 0;
                repair_and_check(&g, &seed0, 1, 0, false);
                repair_and_check(&g, &seed0, 1, 4, false);
            }
        }
    }
    /* all lists empty, cap 3, several seeds */
    memset(&g, 0, sizeof g);
    g.n = 50;
    g.cap = 3;
    g.fmt = SX__GRAPH_COUNTED;
    for (size_t i = 0; i < g.n; i++)
        g.pos[i] = (float)(i % 7);
    uint32_t seeds[2] = { 10, 10 };
    repair_and_check(&g, seeds, 2, 8, true);
}

static void test_check_corrupt(void)
{
    static graph g;
    uint64_t s = seed ^ 3;
    random_graph(&g, &s, 10, 3, SX__GRAPH_COUNTED);
    sx__graph_view v = view_of(&g);
    uint32_t seed0 = 0;
    size_t r;
    uint32_t f;
    uint32_t *l = g.cells; /* node 0: count, ids */
    l[0] = 1;
    l[1] = 10; /* out of range */
    ASSERT_STATUS(sx__graph_reach(&v, &seed0, 1, &r, &f), SX_ECORRUPT);
    l[0] = 4; /* above cap */
    ASSERT_STATUS(sx__graph_reach(&v, &seed0, 1, &r, &f), SX_ECORRUPT);
    l[0] = 0;
    uint32_t bad = 10;
    ASSERT_STATUS(sx__graph_reach(&v, &bad, 1, &r, &f), SX_ECORRUPT);
    ASSERT_STATUS(sx__graph_check_reach(&v, NULL, 0, "test", "nothing"), SX_ECORRUPT);
    sx__graph_repair_opts o = { pos_dist, &g, 4 };
    ASSERT_STATUS(sx__graph_repair(&v, &bad, 1, &o, NULL), SX_EINVAL);
    ASSERT_STATUS(sx__graph_repair(&v, NULL, 0, &o, NULL), SX_EINVAL);
    /* an empty graph needs no seed */
    v.n = 0;
    ASSERT_OK(sx__graph_check_reach(&v, NULL, 0, "test", "nothing"));
    ASSERT_OK(sx__graph_repair(&v, NULL, 0, &o, NULL));
}

/* ---------------------------------------------------------------- the pool search driver */

typedef struct dctx {
    graph *g;
    sx__visited *vis;
    sx__hit *pool;
    float q;
    size_t cap;
} dctx;

static size_t d_expand(void *vx, uint32_t c, float cd, size_t *size)
{
    dctx *x = vx;
    (void)cd;
    uint32_t cnt;
    const uint32_t *ids = list_at(x->g, c, &cnt);
    size_t lowest = SIZE_MAX;
    for (uint32_t j = 0; j < cnt; j++) {
        if (sx__visited_test_set(x->vis, ids[j]))
            continue;
        float d = x->g->pos[ids[j]] - x->q;
        size_t p = sx__pool_insert(x->pool, size, x->cap, d * d, ids[j]);
        if (p < lowest)
            lowest = p;
    }
    return lowest;
}

static void d_prefetch(void *vx, uint32_t id)
{
    (void)vx;
    (void)id;
}

static void test_pool_search(void)
{
    uint64_t s = seed ^ 4;
    static graph g;
    sx__visited vis = { 0 };
    sx__hit pool[MAXN + 1], parents[3];
    ASSERT_OK(sx__visited_reserve(&vis, MAXN));
    for (int round = 0; round < 500; round++) {
        size_t n = 1 + test_rand(&s) % MAXN;
        random_graph(&g, &s, n, 1 + (uint32_t)(test_rand(&s) % 4), SX__GRAPH_COUNTED);
        uint32_t sd = (uint32_t)(test_rand(&s) % n);
        uint8_t reach[MAXN];
        size_t want = reach_naive(&g, &sd, 1, reach);
        for (size_t width = 1; width <= 3; width += 2) {
            dctx x = { &g, &vis, pool, test_randf(&s) * 10.0f, n };
            sx__visited_next(&vis);
            size_t size = 0;
            float d = g.pos[sd] - x.q;
            sx__pool_seed(&vis, pool, &size, n, d * d, sd);
            size = sx__graph_pool_search(pool, size, width, 0, parents, d_expand, d_prefetch, &x);
            ASSERT_EQ(size, want);
            for (size_t i = 0; i < size; i++) {
                ASSERT(pool[i].id & SX__GRAPH_FLAG); /* all expanded */
                uint32_t id = pool[i].id & SX__GRAPH_ID_MASK;
                ASSERT(reach[id]);
                reach[id] = 2; /* seen once */
                if (i > 0)
                    ASSERT(pool[i - 1].dist <= pool[i].dist);
            }
            for (size_t i = 0; i < n; i++)
                if (reach[i] == 2)
                    reach[i] = 1;
        }
    }
    sx__visited_fini(&vis);
}

/* ---------------------------------------------------------------- TLS */

static atomic_int finis, bad_finis;

/* runs in the exiting thread: no ASSERT (it would longjmp across threads) */
static void count_fini(void *p)
{
    atomic_fetch_add(*(int *)p == 42 ? &finis : &bad_finis, 1);
}

static const sx__graph_tls_class cls_a = { SX__GRAPH_TLS_HNSW, sizeof(int), count_fini };
static const sx__graph_tls_class cls_b = { SX__GRAPH_TLS_CAGRA, 64, count_fini };

static void *tls_thread(void *arg)
{
    void **out = arg;
    int *a = sx__graph_tls_get(&cls_a), *b = sx__graph_tls_get(&cls_b);
    if (!a || !b || a == b || sx__graph_tls_get(&cls_a) != a || *a != 0)
        return NULL;
    *a = 42;
    *b = 42;
    out[0] = a;
    return a;
}

static void test_tls(void)
{
    void *got[4][1] = { { NULL } };
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(pthread_create(&t[i], NULL, tls_thread, got[i]), 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        ASSERT_EQ(pthread_join(t[i], &r), 0);
        ASSERT(r != NULL);
    }
    ASSERT_EQ(atomic_load(&finis), 8); /* two objects per thread, freed at its exit */
    ASSERT_EQ(atomic_load(&bad_finis), 0);
    sx__graph_tls_class bad = { SX__GRAPH_TLS_SLOTS, 8, NULL };
    ASSERT(sx__graph_tls_get(&bad) == NULL);
}

int main(void)
{
    seed = test_seed();
    RUN(test_pool_insert);
    RUN(test_maxheap);
    RUN(test_pool_search);
    RUN(test_check_corrupt);
    RUN(test_repair_random);
    RUN(test_repair_adversarial);
    RUN(test_tls);
    return TEST_DONE();
}
