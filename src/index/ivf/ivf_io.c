/*
 * ivf_io.c: IVF (de)serialization. Only the index's own data is stored; the vectors belong to
 * the segment and are passed back in on load.
 *
 * Byte format (all integers little-endian, floats IEEE-754 binary32 little-endian, written
 * through sx__wbuf):
 *   offset  size        field
 *   0       4           magic 0x56495853 ("SXIV")
 *   4       4           version (1)
 *   8       4           kind: 0 IVF_FLAT, 1 IVF_SQ8, 2 IVF_PQ (must match the loading vtable)
 *   12      8           n, rows (must equal the segment's row count)
 *   20      4           dim (must match)
 *   24      4           metric: 0 L2, 1 IP, 2 COSINE (must match)
 *   28      4           nlist requested, in [1, 65536]
 *   32      4           nlist built: min(requested, n)
 *   36      4           m: PQ sub-quantizers (divides dim); 0 for FLAT and SQ8
 *   40      4*nlist*dim centroids, list-major
 *   ...     4*nlist     list sizes (sum = n)
 *   ...     4*n         row ids in list order (a permutation of [0, n))
 *   SQ8 (only when n > 0):
 *           4+8*dim     ranges (quant_sq8.h: u32 dim, dim f32 vmin, dim f32 scale)
 *           n*dim       codes in list order, dim bytes each
 *   PQ (only when n > 0):
 *           ...         codebooks (sx__pq_serialize; dim and m must match the header)
 *           n*m         codes in list order, m bytes each (row-major; the blocked in-memory
 *                       layout of ivf.h is rebuilt on load, as is the precomputed table)
 *   end-4   4           CRC-32C of every preceding byte of the record
 *
 * Loading validates everything before the index is used: the CRC, the header against the
 * caller's kind/n/dim/metric, every length against the bytes left before allocating (so
 * allocation is bounded by the input length and the caller's n), exact length at the end, and
 * the structural check of ivf_check.c (lists partition [0, n), ids a permutation, finite
 * centroids and ranges, PQ codes < ksub). Any failure is SX_ECORRUPT with a message; nothing
 * on this path asserts.
 *
 * Thread-safety: serialize only reads the index; deserialize builds a new one.
 */
#include <string.h>

#include "index/ivf/ivf.h"
#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/err.h"

#define HEADER_BYTES 40u

sx_status sx__ivf_serialize(const sx__index *idx, sx__wbuf *w)
{
    const sx__ivf *v = sx__ivf_of(idx);
    const char *name = sx__ivf_kind_name(v->kind);
    size_t start = w->len;
    sx__wbuf_u32(w, SX__IVF_MAGIC);
    sx__wbuf_u32(w, SX__IVF_VERSION);
    sx__wbuf_u32(w, (uint32_t)v->kind);
    sx__wbuf_u64(w, v->n);
    sx__wbuf_u32(w, (uint32_t)v->dim);
    sx__wbuf_u32(w, (uint32_t)v->metric);
    sx__wbuf_u32(w, v->nlist_param);
    sx__wbuf_u32(w, v->nlist);
    sx__wbuf_u32(w, v->m);
    sx__wbuf_f32s(w, v->centroids, (size_t)v->nlist * v->dim);
    for (uint32_t l = 0; l < v->nlist; l++)
        sx__wbuf_u32(w, (uint32_t)sx__ivf_list_size(v, l));
    for (size_t i = 0; i < v->n; i++)
        sx__wbuf_u32(w, v->ids[i]);
    sx_status rc = SX_OK;
    if (v->kind == SX__IVF_KIND_SQ8 && v->n > 0) {
        rc = sx__sq8_serialize(&v->sq, w);
        sx__wbuf_put(w, v->sq_codes, v->n * v->dim);
    } else if (v->kind == SX__IVF_KIND_PQ && v->n > 0) {
        rc = sx__pq_serialize(&v->pq, w);
        uint8_t code[SX_MAX_DIM];
        for (uint32_t l = 0; l < v->nlist && sx__wbuf_ok(w); l++) {
            size_t cnt = sx__ivf_list_size(v, l);
            for (size_t p = 0; p < cnt; p++) {
                sx__ivf_pq_code_at(v, l, p, code);
                sx__wbuf_put(w, code, v->m);
            }
        }
    }
    if (rc != SX_OK)
        return rc;
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "%s: cannot grow the serialization buffer", name);
    sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "%s: cannot grow the serialization buffer", name);
    return SX_OK;
}

sx_status sx__ivf_deserialize(sx__ivf_kind kind,
                              const void *data,
                              size_t len,
                              const float *vecs,
                              size_t n,
                              size_t dim,
                              sx_metric metric,
                              sx__index **out)
{
    const char *name = sx__ivf_kind_name(kind);
    if (!data || len < HEADER_BYTES + 4)
        return sx__err(SX_ECORRUPT, "%s index: %zu bytes is too short", name, len);
    const uint8_t *b = data;
    if (sx__crc32c(0, b, len - 4) != sx__le32(b + len - 4))
        return sx__err(SX_ECORRUPT, "%s index: checksum mismatch", name);

    sx__rbuf r;
    sx__rbuf_init(&r, data, len - 4);
    uint32_t magic = sx__rbuf_u32(&r), version = sx__rbuf_u32(&r), fkind = sx__rbuf_u32(&r);
    uint64_t fn = sx__rbuf_u64(&r);
    uint32_t fdim = sx__rbuf_u32(&r), fmetric = sx__rbuf_u32(&r);
    uint32_t nlist_param = sx__rbuf_u32(&r), nlist = sx__rbuf_u32(&r), m = sx__rbuf_u32(&r);
    if (magic != SX__IVF_MAGIC)
        return sx__err(SX_ECORRUPT, "%s index: bad magic 0x%08x", name, magic);
    if (version != SX__IVF_VERSION)
        return sx__err(SX_ECORRUPT, "%s index: unsupported version %u", name, version);
    if (fkind != (uint32_t)kind)
        return sx__err(SX_ECORRUPT, "%s index: the record holds index kind %u", name, fkind);
    if (fn != n || fdim != dim || fmetric != (uint32_t)metric)
        return sx__err(SX_ECORRUPT,
                       "%s index: built for n=%llu dim=%u metric=%u, segment has n=%zu dim=%zu "
                       "metric=%d",
                       name, (unsigned long long)fn, fdim, fmetric, n, dim, (int)metric);
    if (dim == 0 || dim > SX_MAX_DIM || n > UINT32_MAX ||
        (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE))
        return sx__err(SX_ECORRUPT, "%s index: bad shape n=%zu dim=%zu", name, n, dim);
    if (nlist_param < SX__IVF_NLIST_MIN || nlist_param > SX__IVF_NLIST_MAX ||
        nlist != (n < nlist_param ? (uint32_t)n : nlist_param))
        return sx__err(SX_ECORRUPT, "%s index: bad nlist %u (requested %u, n=%zu)", name, nlist,
                       nlist_param, n);
    bool pq = kind == SX__IVF_KIND_PQ;
    if (pq ? (m == 0 || m > dim || dim % m != 0) : m != 0)
        return sx__err(SX_ECORRUPT, "%s index: bad m %u for dim %zu", name, m, dim);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "%s: no vectors", name);
    /* fixed-size sections must fit in what is left before anything is allocated */
    uint64_t need = (uint64_t)nlist * dim * 4 + (uint64_t)nlist * 4 + (uint64_t)n * 4;
    if (kind == SX__IVF_KIND_SQ8 && n > 0)
        need += 4 + (uint64_t)dim * 8 + (uint64_t)n * dim;
    if (pq && n > 0)
        need += (uint64_t)n * m;
    if (need > sx__rbuf_left(&r))
        return sx__err(SX_ECORRUPT, "%s index: truncated (%llu bytes needed, %zu left)", name,
                       (unsigned long long)need, sx__rbuf_left(&r));

    sx__ivf *v = NULL;
    sx_status rc = sx__ivf_new(kind, vecs, n, dim, metric, &v);
    if (rc != SX_OK)
        return rc;
    v->nlist_param = nlist_param;
    v->nlist = nlist;
    v->m = m;
    v->off = sx__malloc(((size_t)nlist + 1) * sizeof *v->off);
    v->ids = sx__malloc((n ? n : 1) * sizeof *v->ids);
    v->centroids = sx__malloc_aligned(((size_t)nlist * dim + 1) * sizeof(float));
    if (!v->off || !v->ids || !v->centroids) {
        rc = sx__err(SX_ENOMEM, "%s: out of memory loading %zu rows", name, n);
        goto fail;
    }
    sx__rbuf_f32s(&r, v->centroids, (size_t)nlist * dim);
    v->off[0] = 0;
    uint64_t acc = 0;
    for (uint32_t l = 0; l < nlist; l++) {
        acc += sx__rbuf_u32(&r);
        if (acc > n) {
            rc = sx__err(SX_ECORRUPT, "%s index: list sizes exceed n=%zu", name, n);
            goto fail;
        }
        v->off[l + 1] = (uint32_t)acc;
    }
    if (acc != n) {
        rc = sx__err(SX_ECORRUPT, "%s index: list sizes sum to %llu, want %zu", name,
                     (unsigned long long)acc, n);
        goto fail;
    }
    const uint8_t *idb = sx__rbuf_bytes(&r, n * 4);
    if (!idb && n > 0) {
        rc = sx__err(SX_ECORRUPT, "%s index: truncated ids", name);
        goto fail;
    }
    for (size_t i = 0; i < n; i++)
        v->ids[i] = sx__le32(idb + 4 * i);
    if (kind == SX__IVF_KIND_SQ8 && n > 0) {
        rc = sx__sq8_deserialize(&v->sq, &r, dim);
        if (rc != SX_OK)
            goto fail;
        const uint8_t *cb = sx__rbuf_bytes(&r, n * dim);
        v->sq_codes = sx__malloc(n * dim + 1);
        if (!v->sq_codes) {
            rc = sx__err(SX_ENOMEM, "%s: out of memory", name);
            goto fail;
        }
        if (!cb && n > 0) {
            rc = sx__err(SX_ECORRUPT, "%s index: truncated codes", name);
            goto fail;
        }
        if (n > 0)
            memcpy(v->sq_codes, cb, n * dim);
    } else if (kind == SX__IVF_KIND_FLAT && n > 0) {
        /* ids are checked below; the copy must not read vecs out of range before that */
        for (size_t i = 0; i < n; i++) {
            if (v->ids[i] >= n) {
                rc = sx__err(SX_ECORRUPT, "%s index: row id %u out of range", name, v->ids[i]);
                goto fail;
            }
        }
        rc = sx__ivf_finish_flat(v);
        if (rc != SX_OK)
            goto fail;
    } else if (pq && n > 0) {
        sx__pq pqd;
        memset(&pqd, 0, sizeof pqd);
        rc = sx__pq_deserialize(&pqd, &r);
        if (rc != SX_OK) {
            rc = rc == SX_ENOMEM ? rc : sx__err(SX_ECORRUPT, "%s index: bad codebooks", name);
            goto fail;
        }
        v->pq = pqd;
        if (v->pq.dim != dim || v->pq.m != m || v->pq.ksub == 0 || v->pq.ksub > SX__IVF_PQ_KSUB ||
            (size_t)v->pq.dsub * m != dim) {
            rc = sx__err(SX_ECORRUPT,
                         "%s index: codebooks of shape dim=%u m=%u ksub=%u do not "
                         "match dim=%zu m=%u",
                         name, v->pq.dim, v->pq.m, v->pq.ksub, dim, m);
            goto fail;
        }
        const uint8_t *cb = sx__rbuf_bytes(&r, n * m);
        if (!cb) {
            rc = sx__err(SX_ECORRUPT, "%s index: truncated codes", name);
            goto fail;
        }
        for (size_t i = 0; i < n * m; i++) {
            if (cb[i] >= v->pq.ksub) {
                rc = sx__err(SX_ECORRUPT, "%s index: code %u >= ksub %u", name, cb[i], v->pq.ksub);
                goto fail;
            }
        }
        rc = sx__ivf_finish_pq(v, cb);
        if (rc != SX_OK)
            goto fail;
    }
    if (!sx__rbuf_ok(&r) || sx__rbuf_left(&r) != 0) {
        rc = sx__err(SX_ECORRUPT, "%s index: %zu unexpected trailing bytes", name,
                     sx__rbuf_left(&r));
        goto fail;
    }
    rc = sx__ivf_check((const sx__index *)(void *)v);
    if (rc == SX_OK && kind == SX__IVF_KIND_SQ8)
        rc = sx__ivf_sq8_flag(v);
    if (rc != SX_OK)
        goto fail;
    *out = (sx__index *)(void *)v;
    return SX_OK;
fail:
    sx__ivf_free((sx__index *)(void *)v);
    return rc;
}
