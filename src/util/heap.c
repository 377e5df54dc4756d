/*
 * heap.c: bounded max-heap for top-k (see heap.h).
 */
#include "util/heap.h"

#include <stdlib.h>

void sx__topk_init(sx__topk *t, sx__hit *storage, size_t k)
{
    t->h = storage;
    t->k = k;
    t->n = 0;
}

static void sift_down(sx__hit *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && sx__hit_better(h[m], h[l]))
            m = l;
        if (r < n && sx__hit_better(h[m], h[r]))
            m = r;
        if (m == i)
            return;
        sx__hit tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

void sx__topk_push(sx__topk *t, float dist, uint32_t id)
{
    sx__hit c = { dist, id };
    if (t->k == 0)
        return;
    if (t->n < t->k) {
        size_t i = t->n++;
        t->h[i] = c;
        while (i > 0) {
            size_t p = (i - 1) / 2;
            if (!sx__hit_better(t->h[p], t->h[i]))
                break;
            sx__hit tmp = t->h[p];
            t->h[p] = t->h[i];
            t->h[i] = tmp;
            i = p;
        }
        return;
    }
    if (!sx__hit_better(c, t->h[0]))
        return;
    t->h[0] = c;
    sift_down(t->h, t->n, 0);
}

static int cmp_hit(const void *a, const void *b)
{
    sx__hit x = *(const sx__hit *)a, y = *(const sx__hit *)b;
    if (sx__hit_better(x, y))
        return -1;
    if (sx__hit_better(y, x))
        return 1;
    return 0;
}

size_t sx__topk_sort(sx__topk *t)
{
    qsort(t->h, t->n, sizeof(sx__hit), cmp_hit);
    return t->n;
}
