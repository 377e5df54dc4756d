/*
 * range.c: outlier-robust per-dimension ranges (see range.h).
 *
 * Fences: per dimension the finite sample values are copied into one scratch array and the two
 * order statistics are found by quickselect (Hoare partition, median-of-three pivot: expected
 * O(m) per dimension), so training costs O(ns * dim) on top of the observation pass.
 * Observation: two compares per value against the fences, two for min/max; a value beyond a
 * fence (none in clean data) is inserted into that side's sorted tail of TAIL values.
 */
#include "vector/range.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"

size_t sx__range_sample_rows(size_t n, size_t dim)
{
    size_t ns = n < SX__RANGE_SAMPLE ? n : SX__RANGE_SAMPLE;
    size_t cap = dim ? SX__RANGE_SAMPLE_FLOATS / dim : ns;
    if (ns > cap)
        ns = cap;
    return ns || !n ? ns : 1;
}

uint64_t sx__range_train_bytes(size_t n, size_t dim)
{
    uint64_t ns = sx__range_sample_rows(n, dim);
    uint64_t ranges =
        (uint64_t)dim * (4u + 2u * SX__RANGE_TAIL) * sizeof(float) + (uint64_t)dim * 8;
    return ranges + ns * 4 + ns * dim * 4 + 512; /* + allocator alignment slack */
}

sx_status sx__range_init(sx__range *r, size_t dim)
{
    memset(r, 0, sizeof *r);
    r->dim = dim;
    r->flo = sx__malloc(dim * sizeof(float));
    r->fhi = sx__malloc(dim * sizeof(float));
    r->lo = sx__malloc(dim * sizeof(float));
    r->hi = sx__malloc(dim * sizeof(float));
    r->top = sx__malloc(dim * SX__RANGE_TAIL * sizeof(float));
    r->bot = sx__malloc(dim * SX__RANGE_TAIL * sizeof(float));
    r->ntop = sx__calloc(dim ? dim : 1, sizeof(uint32_t));
    r->nbot = sx__calloc(dim ? dim : 1, sizeof(uint32_t));
    if (!r->flo || !r->fhi || !r->lo || !r->hi || !r->top || !r->bot || !r->ntop || !r->nbot) {
        sx__range_fini(r);
        return sx__err(SX_ENOMEM, "quantizer ranges: out of memory (dim %zu)", dim);
    }
    for (size_t d = 0; d < dim; d++) {
        r->flo[d] = -INFINITY;
        r->fhi[d] = INFINITY;
        r->lo[d] = INFINITY;
        r->hi[d] = -INFINITY;
    }
    return SX_OK;
}

void sx__range_fini(sx__range *r)
{
    sx__free(r->flo);
    sx__free(r->fhi);
    sx__free(r->lo);
    sx__free(r->hi);
    sx__free(r->top);
    sx__free(r->bot);
    sx__free(r->ntop);
    sx__free(r->nbot);
    memset(r, 0, sizeof *r);
}

static inline void swapf(float *a, size_t i, size_t j)
{
    float t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* The k-th smallest of a[0..n) (0-based; no NaN), partially reordering a: afterwards a[k] holds
 * it, a[0..k) are <= it and a(k..n) >= it. Quickselect with a median-of-three pivot that also
 * places sentinels at both ends (Press et al., Numerical Recipes, "select"). */
static float select_k(float *a, size_t n, size_t k)
{
    size_t l = 0, ir = n - 1;
    for (;;) {
        if (ir <= l + 1) {
            if (ir == l + 1 && a[ir] < a[l])
                swapf(a, l, ir);
            return a[k];
        }
        size_t mid = l + (ir - l) / 2;
        swapf(a, mid, l + 1);
        if (a[l] > a[ir])
            swapf(a, l, ir);
        if (a[l + 1] > a[ir])
            swapf(a, l + 1, ir);
        if (a[l] > a[l + 1])
            swapf(a, l, l + 1);
        /* a[l] <= pivot a[l+1] <= a[ir]: the scans below stop at the sentinels */
        size_t i = l + 1, j = ir;
        float p = a[l + 1];
        for (;;) {
            do
                i++;
            while (a[i] < p);
            do
                j--;
            while (a[j] > p);
            if (j < i)
                break;
            swapf(a, i, j);
        }
        a[l + 1] = a[j];
        a[j] = p;
        if (j >= k)
            ir = j - 1;
        if (j <= k)
            l = i;
    }
}

sx_status sx__range_fence(sx__range *r, const float *x, size_t ns, size_t stride)
{
    if (ns < SX__RANGE_MIN_SAMPLE)
        return SX_OK;
    float *tmp = sx__malloc(ns * sizeof *tmp);
    if (!tmp)
        return sx__err(SX_ENOMEM, "quantizer ranges: cannot allocate a %zu-value sample", ns);
    for (size_t d = 0; d < r->dim; d++) {
        size_t m = 0;
        for (size_t i = 0; i < ns; i++) {
            float v = x[i * stride + d];
            if (isfinite(v))
                tmp[m++] = v;
        }
        if (m < SX__RANGE_MIN_SAMPLE)
            continue;
        size_t k = 1 + m / 256; /* values excluded on each side; k < m / 2 since m >= 64 */
        float lo = select_k(tmp, m, k);
        /* a[k..m) are >= lo: the k-th largest overall is among them */
        float hi = select_k(tmp + k, m - k, m - 1 - k - k);
        double w = (double)hi - (double)lo;
        double flo = (double)lo - w, fhi = (double)hi + w;
        /* beyond float: no fence on that side (only with values near FLT_MAX) */
        r->flo[d] = flo >= -(double)FLT_MAX ? (float)flo : -INFINITY;
        r->fhi[d] = fhi <= (double)FLT_MAX ? (float)fhi : INFINITY;
    }
    sx__free(tmp);
    return SX_OK;
}

/* Inserts v into a sorted tail of at most SX__RANGE_TAIL values; `desc`: the largest first. */
static void tail_insert(float *t, uint32_t *n, float v, int desc)
{
    uint32_t c = *n;
    if (c == SX__RANGE_TAIL) {
        if (desc ? !(v > t[c - 1]) : !(v < t[c - 1]))
            return;
        c--; /* the last one drops out */
    }
    uint32_t i = c;
    while (i > 0 && (desc ? v > t[i - 1] : v < t[i - 1])) {
        t[i] = t[i - 1];
        i--;
    }
    t[i] = v;
    *n = c + 1;
}

void sx__range_observe(sx__range *r, const float *x, size_t n, size_t stride)
{
    size_t dim = r->dim;
    for (size_t i = 0; i < n; i++) {
        const float *row = x + i * stride;
        for (size_t d = 0; d < dim; d++) {
            float v = row[d];
            if (!isfinite(v))
                continue;
            if (v < r->flo[d]) {
                tail_insert(r->bot + d * SX__RANGE_TAIL, &r->nbot[d], v, 0);
            } else if (v > r->fhi[d]) {
                tail_insert(r->top + d * SX__RANGE_TAIL, &r->ntop[d], v, 1);
            } else {
                r->lo[d] = v < r->lo[d] ? v : r->lo[d];
                r->hi[d] = v > r->hi[d] ? v : r->hi[d];
            }
        }
    }
}

void sx__range_finish(const sx__range *r, float *lo, float *hi)
{
    for (size_t d = 0; d < r->dim; d++) {
        float l = r->lo[d], h = r->hi[d];
        const float *top = r->top + d * SX__RANGE_TAIL, *bot = r->bot + d * SX__RANGE_TAIL;
        uint32_t nt = r->ntop[d], nb = r->nbot[d];
        if (!(l <= h)) {
            /* nothing inside the fences: the tails' extremes (none: lo > hi stays) */
            if (nt) {
                l = top[nt - 1];
                h = top[0];
            }
            if (nb) {
                l = bot[0];
                h = nt ? h : bot[nb - 1];
            }
        }
        /* a full tail is no handful of outliers: widen to its TAIL-th value */
        if (nt == SX__RANGE_TAIL && top[nt - 1] > h)
            h = top[nt - 1];
        if (nb == SX__RANGE_TAIL && bot[nb - 1] < l)
            l = bot[nb - 1];
        lo[d] = l;
        hi[d] = h;
    }
}
