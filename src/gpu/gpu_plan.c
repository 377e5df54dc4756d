/*
 * gpu_plan.c: batch planning for the GPU kernels (see gpu_plan.h for the layouts and byte
 * formulas). Compiled in every build, with or without CUDA, and unit-tested without a GPU.
 *
 * Planner (kNN). Resident when the base and the on-device output take at most half the budget
 * (the other half is the workspace), else streamed. Within the workspace W the planner starts
 * from SX__GPU_QUERY_ROWS query rows (or nq) and gives the tile as many columns as W allows
 * (capped by the base size, SX__GPU_TILE_MAX and, when streamed, SX__GPU_CHUNK_BYTES per
 * chunk); while that leaves fewer than SX__GPU_MIN_COLS columns (and fewer than the base) it
 * halves the query rows. Why: a wide tile keeps the per-tile fixed costs (kernel launches, the
 * selection kernel's first fill) small, while 256+ query rows keep SGEMM compute-bound; with a
 * tiny budget the largest tile area found is used. SX_ENOMEM only when not even 1 x 1 fits.
 *
 * Invariants (tests/unit/test_gpu.c checks them over many shapes and budgets):
 *   1. Batches cover [0,nq) and tiles cover [0,n), each row exactly once, in order.
 *   2. device_bytes <= budget; device_bytes is what the CUDA code allocates.
 *   3. query_rows * tile_cols <= SX__GPU_TILE_MAX; tile_cols <= INT_MAX (cuBLAS sizes).
 *
 * Thread-safety: pure.
 */
#include "gpu/gpu_plan.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

size_t sx__gpu_budget(size_t free_bytes, size_t total_bytes, size_t limit_bytes)
{
    size_t margin = (size_t)512 << 20;
    if (total_bytes / 16 > margin)
        margin = total_bytes / 16;
    size_t b = free_bytes > margin ? free_bytes - margin : 0;
    if (limit_bytes != 0 && limit_bytes < b)
        b = limit_bytes;
    return b;
}

/* ---------------------------------------------------------------- kNN */

size_t sx__gpu_knn_plan_device_bytes(const sx__gpu_knn_plan *p)
{
    size_t row = (p->dim + 1) * 4;
    size_t base = p->resident ? p->n * row : 2 * p->tile_cols * row;
    return base + p->query_rows * row + p->query_rows * p->tile_cols * 4 +
           2 * p->query_rows * (size_t)p->k * 8 + p->out_dev_bytes;
}

size_t sx__gpu_knn_plan_pinned_bytes(const sx__gpu_knn_plan *p)
{
    size_t res = p->out_dev_bytes != 0 ? 0 : 2 * p->query_rows * (size_t)p->k * 8;
    return res + (p->resident ? 0 : 2 * p->tile_cols * p->dim * 4);
}

/* Chooses query_rows and tile_cols within workspace w (bytes for everything but a resident
 * base and the on-device output). per_col: bytes per tile column besides the tile itself
 * (streamed base slots). Returns false when not even 1 x 1 fits. */
static bool fit(sx__gpu_knn_plan *p, size_t w, size_t per_col, size_t colmax)
{
    size_t row = (p->dim + 1) * 4;
    size_t qb = min_sz(p->nq, SX__GPU_QUERY_ROWS);
    size_t best_q = 0, best_c = 0;
    for (;;) {
        size_t qfix = qb * row + 2 * qb * (size_t)p->k * 8;
        size_t cols = 0;
        if (qfix < w)
            cols = (w - qfix) / (qb * 4 + per_col);
        cols = min_sz(cols, colmax);
        cols = min_sz(cols, SX__GPU_TILE_MAX / qb);
        cols = min_sz(cols, (size_t)INT_MAX);
        if (cols >= 1 && (cols >= min_sz(colmax, SX__GPU_MIN_COLS))) {
            best_q = qb;
            best_c = cols;
            break;
        }
        if (cols >= 1 && qb * cols > best_q * best_c) {
            best_q = qb;
            best_c = cols;
        }
        if (qb == 1)
            break;
        qb = (qb + 1) / 2;
    }
    if (best_q == 0)
        return false;
    p->query_rows = best_q;
    p->tile_cols = best_c;
    return true;
}

sx_status sx__gpu_knn_plan_make(size_t n,
                                size_t nq,
                                size_t dim,
                                uint32_t k,
                                bool out_on_device,
                                size_t budget_bytes,
                                sx__gpu_knn_plan *out)
{
    if (dim == 0 || dim > SX__GPU_DIM_MAX)
        return sx__err(SX_EINVAL, "gpu knn: dim %zu out of range 1..%u", dim, SX__GPU_DIM_MAX);
    if (k == 0 || k > SX__GPU_TOPK_MAX)
        return sx__err(SX_EINVAL, "gpu knn: k %u out of range 1..%u", k, SX__GPU_TOPK_MAX);
    sx__gpu_knn_plan p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.nq = nq;
    p.dim = dim;
    p.k = k;
    p.out_dev_bytes = out_on_device ? nq * (size_t)k * 4 : 0;
    if (n == 0 || nq == 0) {
        p.resident = true;
        p.query_rows = nq == 0 ? 1 : min_sz(nq, SX__GPU_QUERY_ROWS);
        p.tile_cols = 1;
        p.n_batches = n == 0 ? 0 : ceil_div(nq, p.query_rows);
        p.n_tiles = 0;
        p.device_bytes = 0;
        p.pinned_bytes = 0;
        *out = p;
        return SX_OK;
    }
    size_t row = (dim + 1) * 4;
    size_t base = n * row;
    bool ok = false;
    if (p.out_dev_bytes <= budget_bytes / 2 && base <= budget_bytes / 2 - p.out_dev_bytes) {
        p.resident = true;
        ok = fit(&p, budget_bytes - base - p.out_dev_bytes, 0, n);
    }
    if (!ok && p.out_dev_bytes < budget_bytes) {
        p.resident = false;
        size_t chunk = SX__GPU_CHUNK_BYTES / (dim * 4);
        if (chunk == 0)
            chunk = 1;
        ok = fit(&p, budget_bytes - p.out_dev_bytes, 2 * row, min_sz(n, chunk));
    }
    if (!ok)
        return sx__err(SX_ENOMEM,
                       "gpu knn: a device budget of %zu bytes does not hold one query and one "
                       "base row of dim %zu with k %u (plus %zu output bytes)",
                       budget_bytes, dim, k, p.out_dev_bytes);
    p.n_batches = ceil_div(nq, p.query_rows);
    p.n_tiles = ceil_div(n, p.tile_cols);
    p.device_bytes = sx__gpu_knn_plan_device_bytes(&p);
    p.pinned_bytes = sx__gpu_knn_plan_pinned_bytes(&p);
    *out = p;
    return SX_OK;
}

void sx__gpu_knn_plan_batch(const sx__gpu_knn_plan *p, size_t b, size_t *row0, size_t *rows)
{
    *row0 = b * p->query_rows;
    *rows = min_sz(p->query_rows, p->nq - *row0);
}

void sx__gpu_knn_plan_tile(const sx__gpu_knn_plan *p, size_t t, size_t *row0, size_t *rows)
{
    *row0 = t * p->tile_cols;
    *rows = min_sz(p->tile_cols, p->n - *row0);
}

/* ---------------------------------------------------------------- k-means */

size_t sx__gpu_kmeans_plan_device_bytes(const sx__gpu_kmeans_plan *p)
{
    size_t rows = p->resident ? p->n * p->dim * 4 : 2 * p->batch_rows * p->dim * 4;
    return rows + p->batch_rows * p->k * 4 + p->n * 8 + p->k * (2 * p->dim + 2) * 4;
}

sx_status sx__gpu_kmeans_plan_make(
    size_t n, size_t dim, size_t k, size_t budget_bytes, sx__gpu_kmeans_plan *out)
{
    if (n == 0 || k == 0 || k > n)
        return sx__err(SX_EINVAL, "gpu kmeans: k %zu out of range 1..n (n = %zu)", k, n);
    if (dim == 0 || dim > SX__GPU_DIM_MAX)
        return sx__err(SX_EINVAL, "gpu kmeans: dim %zu out of range 1..%u", dim, SX__GPU_DIM_MAX);
    if (k > SX__GPU_TILE_MAX || k > (size_t)INT_MAX)
        return sx__err(SX_EINVAL, "gpu kmeans: k %zu too large", k);
    sx__gpu_kmeans_plan p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.dim = dim;
    p.k = k;
    size_t fixed = n * 8 + k * (2 * dim + 2) * 4;
    size_t rows_all = n * dim * 4;
    size_t cap_rows = SX__GPU_TILE_MAX / k; /* tile rows */
    if (fixed < budget_bytes && rows_all <= (budget_bytes - fixed) / 2) {
        p.resident = true;
        size_t w = budget_bytes - fixed - rows_all;
        p.batch_rows = min_sz(min_sz(n, cap_rows), w / (k * 4));
    }
    if (p.batch_rows == 0) {
        p.resident = false;
        size_t w = fixed < budget_bytes ? budget_bytes - fixed : 0;
        size_t chunk = SX__GPU_CHUNK_BYTES / (dim * 4);
        p.batch_rows = min_sz(min_sz(n, cap_rows), w / (k * 4 + 2 * dim * 4));
        p.batch_rows = min_sz(p.batch_rows, chunk == 0 ? 1 : chunk);
    }
    if (p.batch_rows == 0)
        return sx__err(SX_ENOMEM,
                       "gpu kmeans: a device budget of %zu bytes does not hold %zu centroids of "
                       "dim %zu, %zu per-row slots and one row",
                       budget_bytes, k, dim, n);
    p.n_batches = ceil_div(n, p.batch_rows);
    p.device_bytes = sx__gpu_kmeans_plan_device_bytes(&p);
    p.pinned_bytes = p.resident ? 0 : 2 * p.batch_rows * dim * 4;
    *out = p;
    return SX_OK;
}

void sx__gpu_kmeans_plan_batch(const sx__gpu_kmeans_plan *p, size_t b, size_t *row0, size_t *rows)
{
    *row0 = b * p->batch_rows;
    *rows = min_sz(p->batch_rows, p->n - *row0);
}

/* ---------------------------------------------------------------- farthest rows */

typedef struct far_ent {
    float d;
    uint32_t row;
} far_ent;

/* a is "farther" than b: larger distance, ties to the lower row; NaN is the nearest. */
static bool farther(far_ent a, far_ent b)
{
    bool an = isnan(a.d), bn = isnan(b.d);
    if (an != bn)
        return bn;
    if (!an && a.d != b.d)
        return a.d > b.d;
    return a.row < b.row;
}

/* Min-heap by "farther": the root is the least far kept entry. */
static void sift_down(far_ent *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && farther(h[m], h[l]))
            m = l;
        if (l + 1 < n && farther(h[m], h[l + 1]))
            m = l + 1;
        if (m == i)
            return;
        far_ent t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

sx_status
sx__gpu_pick_farthest(const float *dist, size_t n, size_t want, uint32_t *rows, size_t *written)
{
    size_t m = min_sz(want, n);
    *written = 0;
    if (m == 0)
        return SX_OK;
    far_ent *h = sx__malloc(m * sizeof *h);
    if (!h)
        return sx__err(SX_ENOMEM, "gpu kmeans: %zu farthest-row entries", m);
    for (size_t i = 0; i < m; i++) {
        h[i].d = dist[i];
        h[i].row = (uint32_t)i;
    }
    for (size_t i = m / 2; i-- > 0;)
        sift_down(h, m, i);
    for (size_t i = m; i < n; i++) {
        far_ent e = { dist[i], (uint32_t)i };
        if (farther(e, h[0])) {
            h[0] = e;
            sift_down(h, m, 0);
        }
    }
    /* Pop the least far first, filling rows[] from the back. */
    for (size_t left = m; left > 0; left--) {
        rows[left - 1] = h[0].row;
        h[0] = h[left - 1];
        sift_down(h, left - 1, 0);
    }
    sx__free(h);
    *written = m;
    return SX_OK;
}
