/*
 * test_heap.c: bounded top-k (src/util/heap.c) against sorting.
 *
 * For random streams (with many duplicate distances, so the id tie-break is exercised) the heap's
 * sorted contents must equal the first k of the whole stream sorted by (dist, id); the bound must
 * be +inf until k entries are held and then the worst kept distance. Seeded: the seed is printed.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/alloc.h"
#include "util/heap.h"

static uint64_t seed;

static int cmp_hit(const void *pa, const void *pb)
{
    const sx__hit *a = pa, *b = pb;
    if (a->dist != b->dist)
        return a->dist < b->dist ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static void check_stream(uint64_t *s, size_t n, size_t k, uint32_t n_values)
{
    sx__hit *all = sx__malloc((n ? n : 1) * sizeof *all);
    sx__hit *store = sx__malloc((k ? k : 1) * sizeof *store);
    ASSERT(all && store);
    sx__topk t;
    sx__topk_init(&t, store, k);
    ASSERT(k == 0 || isinf(sx__topk_bound(&t)));

    /* distinct ids, random distances, shuffled so ids arrive in no particular order */
    for (size_t i = 0; i < n; i++) {
        all[i].id = (uint32_t)(i * 7 + 3);
        all[i].dist = (float)(test_rand(s) % n_values) - 0.5f * (float)n_values;
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(test_rand(s) % i);
        sx__hit tmp = all[i - 1];
        all[i - 1] = all[j];
        all[j] = tmp;
    }
    for (size_t i = 0; i < n; i++) {
        sx__topk_push(&t, all[i].dist, all[i].id);
        size_t held = i + 1 < k ? i + 1 : k;
        ASSERT_EQ(t.n, held);
        if (k > 0 && t.n < k)
            ASSERT(isinf(sx__topk_bound(&t)));
    }
    qsort(all, n, sizeof *all, cmp_hit);
    size_t want = n < k ? n : k;
    if (k > 0 && n >= k)
        ASSERT(sx__topk_bound(&t) == all[k - 1].dist);
    ASSERT_EQ(sx__topk_sort(&t), want);
    for (size_t i = 0; i < want; i++) {
        if (t.h[i].id != all[i].id || t.h[i].dist != all[i].dist)
            FAILF("n=%zu k=%zu: rank %zu is (%g, %u), want (%g, %u)", n, k, i, (double)t.h[i].dist,
                  t.h[i].id, (double)all[i].dist, all[i].id);
    }
    sx__free(all);
    sx__free(store);
}

static void test_random_vs_sort(void)
{
    uint64_t s = seed;
    static const size_t ks[] = { 0, 1, 2, 3, 10, 100, 1000 };
    static const size_t ns[] = { 0, 1, 5, 99, 100, 101, 2000 };
    for (size_t a = 0; a < sizeof ks / sizeof ks[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            check_stream(&s, ns[b], ks[a], 1u << 30); /* nearly distinct */
            check_stream(&s, ns[b], ks[a], 7);        /* mostly ties */
        }
    for (int rep = 0; rep < 200; rep++) {
        size_t n = (size_t)(test_rand(&s) % 3000);
        size_t k = 1 + (size_t)(test_rand(&s) % 300);
        check_stream(&s, n, k, 1 + (uint32_t)(test_rand(&s) % 1000));
    }
}

static void test_ties_prefer_smaller_id(void)
{
    sx__hit store[3];
    sx__topk t;
    sx__topk_init(&t, store, 3);
    for (uint32_t id = 10; id > 0; id--)
        sx__topk_push(&t, 1.0f, id);
    ASSERT_EQ(sx__topk_sort(&t), 3);
    ASSERT_EQ(t.h[0].id, 1);
    ASSERT_EQ(t.h[1].id, 2);
    ASSERT_EQ(t.h[2].id, 3);
}

static void test_infinities(void)
{
    sx__hit store[2];
    sx__topk t;
    sx__topk_init(&t, store, 2);
    sx__topk_push(&t, INFINITY, 1);
    sx__topk_push(&t, -INFINITY, 2);
    sx__topk_push(&t, 0.0f, 3);
    ASSERT_EQ(sx__topk_sort(&t), 2);
    ASSERT_EQ(t.h[0].id, 2);
    ASSERT_EQ(t.h[1].id, 3);
}

int main(void)
{
    seed = test_seed();
    RUN(test_random_vs_sort);
    RUN(test_ties_prefer_smaller_id);
    RUN(test_infinities);
    return TEST_DONE();
}
