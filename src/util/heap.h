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

/* Comparison used everywhere for "better": smaller dist, then smaller id. */
static inline int sx__hit_better(sx__hit a, sx__hit b)
{
    return a.dist < b.dist || (a.dist == b.dist && a.id < b.id);
}

#endif
