/*
 * heap.h: bounded top-k selection. All internal distances are "smaller is better" (squared L2,
 * or the negated inner product), so top-k keeps the k smallest in a max-heap whose root is the
 * worst kept candidate. Ties are broken by the smaller id so results are deterministic.
 *
 * Ownership: the caller provides storage for k entries (sx__topk_init) — usually from a per-query
 * scratch buffer. Not thread-safe: one heap per query.
 */
#ifndef SX_UTIL_HEAP_H
#define SX_UTIL_HEAP_H
#include <stddef.h>
#include <stdint.h>

typedef struct sx__hit {
    float dist;
    uint32_t id;
} sx__hit;

typedef struct sx__topk {
    sx__hit *h; /* borrowed storage for k entries */
    size_t k;
    size_t n;
} sx__topk;

void sx__topk_init(sx__topk *t, sx__hit *storage, size_t k);

/* Distance a candidate must beat to enter (INFINITY while not full). */
static inline float sx__topk_bound(const sx__topk *t)
{
    return t->n < t->k ? __builtin_inff() : t->h[0].dist;
}

/* Offers a candidate; keeps it if among the k best so far. */
void sx__topk_push(sx__topk *t, float dist, uint32_t id);
/* Sorts the kept entries best first (in place, destroys the heap order); returns n. */
size_t sx__topk_sort(sx__topk *t);

/* Unbounded binary min-heap on dist over caller-owned storage (graph-search candidate queues).
 * The caller guarantees capacity for the push. Inline: these sit on the graph indexes' hot path. */
static inline void sx__minheap_push(sx__hit *hp, size_t *n, sx__hit x)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!(x.dist < hp[p].dist))
            break;
        hp[i] = hp[p];
        i = p;
    }
    hp[i] = x;
}

/* Removes and returns the smallest entry; *n must be > 0. */
static inline sx__hit sx__minheap_pop(sx__hit *hp, size_t *n)
{
    sx__hit top = hp[0], x = hp[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1, b = i;
        sx__hit bx = x;
        if (l < m && hp[l].dist < bx.dist) {
            b = l;
            bx = hp[l];
        }
        if (l + 1 < m && hp[l + 1].dist < bx.dist)
            b = l + 1;
        if (b == i)
            break;
        hp[i] = hp[b];
        i = b;
    }
    if (m > 0)
        hp[i] = x;
    return top;
}

/* Bounded binary max-heap on dist over caller-owned storage of cap >= 1 entries: the "results"
 * of a two-heap graph search (the root is the worst kept). While fewer than cap are held x is
 * always kept; then only if it is closer than the root, which it replaces. Inline: graph-search
 * hot path. */
static inline void sx__maxheap_sift(sx__hit *hp, size_t m, sx__hit x)
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

static inline void sx__maxheap_push(sx__hit *hp, size_t *n, size_t cap, sx__hit x)
{
    if (*n == cap) {
        if (x.dist < hp[0].dist)
            sx__maxheap_sift(hp, *n, x);
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

/* Heap-sorts the max-heap hp[0..n) in place into ascending distance order. */
static inline void sx__maxheap_sort(sx__hit *hp, size_t n)
{
    for (size_t m = n; m > 1; m--) {
        sx__hit top = hp[0];
        sx__maxheap_sift(hp, m - 1, hp[m - 1]);
        hp[m - 1] = top;
    }
}

/* Comparison used everywhere for "better": smaller dist, then smaller id. */
static inline int sx__hit_better(sx__hit a, sx__hit b)
{
    return a.dist < b.dist || (a.dist == b.dist && a.id < b.id);
}

#endif
