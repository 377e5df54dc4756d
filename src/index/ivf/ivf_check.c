/*
 * ivf_check.c: sx__ivf_check, the structural oracle of an IVF index (invariants 1-5 of ivf.h):
 *   1. n == 0 <=> nlist == 0, else 1 <= nlist <= min(n, 65536);
 *   2. off[0] == 0, off non-decreasing, off[nlist] == n;
 *   3. ids is a permutation of [0, n);
 *   4. centroids finite (SQ8: ranges finite, scales >= 0 — quant_sq8.h also checks on load);
 *   5. PQ: codebook shape matches (dim, m, 1 <= ksub <= 256), block offsets match the list
 *      sizes, every code (padding included) < ksub.
 * Run in tests after every build and on every deserialize (ivf_io.c), so a loaded index is
 * always safe to search. Cost: O(n * (1 + code bytes)) time, n/8 bytes of scratch.
 * Thread-safety: read-only on the index.
 */
#include <math.h>
#include <string.h>

#include "index/ivf/ivf.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

static sx_status check_lists(const sx__ivf *v, const char *name)
{
    if ((v->n == 0) != (v->nlist == 0) || v->nlist > SX__IVF_NLIST_MAX || v->nlist > v->n)
        return sx__err(SX_ECORRUPT, "%s: nlist %u invalid for n=%zu", name, v->nlist, v->n);
    if (!v->off || v->off[0] != 0 || v->off[v->nlist] != v->n)
        return sx__err(SX_ECORRUPT, "%s: list offsets do not cover [0, %zu)", name, v->n);
    for (uint32_t l = 0; l < v->nlist; l++)
        if (v->off[l + 1] < v->off[l])
            return sx__err(SX_ECORRUPT, "%s: list %u has a negative size", name, l);
    if (v->n == 0)
        return SX_OK;
    uint64_t *seen = sx__calloc(sx__bits_words(v->n), sizeof *seen);
    if (!seen)
        return sx__err(SX_ENOMEM, "%s: out of memory checking %zu ids", name, v->n);
    sx_status rc = SX_OK;
    for (size_t i = 0; i < v->n; i++) {
        uint32_t id = v->ids[i];
        if (id >= v->n || sx__bits_test(seen, id)) {
            rc = sx__err(SX_ECORRUPT, "%s: row id %u at list position %zu is %s", name, id, i,
                         id >= v->n ? "out of range" : "listed twice");
            break;
        }
        sx__bits_set(seen, id);
    }
    sx__free(seen);
    return rc;
}

static sx_status check_pq(const sx__ivf *v, const char *name)
{
    if (v->n == 0)
        return SX_OK;
    const sx__pq *pq = &v->pq;
    if (!pq->centroids || pq->dim != v->dim || pq->m != v->m || v->m == 0 || pq->ksub == 0 ||
        pq->ksub > SX__IVF_PQ_KSUB || (size_t)pq->dsub * v->m != v->dim)
        return sx__err(SX_ECORRUPT, "%s: codebook shape does not match the index", name);
    if (!v->blk || !v->pq_codes || v->blk[0] != 0)
        return sx__err(SX_ECORRUPT, "%s: missing code blocks", name);
    for (uint32_t l = 0; l < v->nlist; l++) {
        size_t want = (sx__ivf_list_size(v, l) + SX__IVF_PQ_BLOCK - 1) / SX__IVF_PQ_BLOCK;
        if (v->blk[l + 1] < v->blk[l] || v->blk[l + 1] - v->blk[l] != want)
            return sx__err(SX_ECORRUPT, "%s: list %u has a wrong number of code blocks", name, l);
    }
    size_t bytes = (size_t)v->blk[v->nlist] * v->m * SX__IVF_PQ_BLOCK;
    for (size_t i = 0; i < bytes; i++)
        if (v->pq_codes[i] >= pq->ksub)
            return sx__err(SX_ECORRUPT, "%s: code %u >= ksub %u", name, v->pq_codes[i], pq->ksub);
    return SX_OK;
}

sx_status sx__ivf_check(const sx__index *idx)
{
    const sx__ivf *v = sx__ivf_of(idx);
    const char *name = sx__ivf_kind_name(v->kind);
    sx_status rc = check_lists(v, name);
    if (rc != SX_OK)
        return rc;
    for (size_t i = 0; i < (size_t)v->nlist * v->dim; i++)
        if (!isfinite(v->centroids[i]))
            return sx__err(SX_ECORRUPT, "%s: centroid %zu is not finite", name, i / v->dim);
    if (v->kind == SX__IVF_KIND_SQ8 && v->n > 0) {
        if (!v->sq_codes || v->sq.dim != v->dim)
            return sx__err(SX_ECORRUPT, "%s: missing scalar quantizer", name);
        for (size_t d = 0; d < v->dim; d++)
            if (!isfinite(v->sq.vmin[d]) || !isfinite(v->sq.scale[d]) || v->sq.scale[d] < 0.0f)
                return sx__err(SX_ECORRUPT, "%s: bad range in dimension %zu", name, d);
    }
    if (v->kind == SX__IVF_KIND_PQ)
        return check_pq(v, name);
    return SX_OK;
}
