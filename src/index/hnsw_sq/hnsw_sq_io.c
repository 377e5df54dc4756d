/*
 * hnsw_sq_io.c: HNSW_SQ (de)serialization and the structural check. The float vectors belong to
 * the segment and are passed back in on load; the codes are stored (re-encoding on load would
 * tie the result to the float rounding of the machine that loads).
 *
 * Byte format (all integers little-endian, written through sx__wbuf):
 *   offset  size     field
 *   0       4        magic 0x51485853 ("SXHQ")
 *   4       4        version (1)
 *   8       8        n, number of nodes (must equal the segment's row count on load)
 *   16      4        dim (must match)
 *   20      4        metric: 0 L2, 1 IP, 2 COSINE (must match)
 *   24      4        M, in [2, 2048]
 *   28      4        M0, must be 2*M
 *   32      4        efConstruction used by the build (>= 1)
 *   36      4        sq_type: 8 (SQ8)
 *   40      4        flags: bit 0 = refine; other bits must be 0
 *   44      4        entry point (0xFFFFFFFF iff n == 0)
 *   48      4        max level (== levels[entry])
 *   52      4*dim    quantizer offsets a_d (f32, finite)
 *   ...     4*dim    quantizer steps s_d (f32, finite, >= 0)
 *   ...     n        levels, one byte per node, each <= SX__HNSW_MAX_LEVEL
 *   ...              level-0 lists, nodes 0..n-1: u32 count (<= M0), count u32 ids
 *   ...              upper lists, for each node with level > 0 in id order, levels 1..level:
 *                    u32 count (<= M), count u32 ids
 *   ...     n*dim    codes, node order
 *   end-4   4        CRC-32C of every preceding byte of the record
 * The per-node norms of L2 are not stored: load recomputes them from the codes with the same
 * function as the build, and the clipped flag (NaN norm, hnsw_sq.h) from the codes and the
 * borrowed vectors, so a loaded index returns bit-identical results. (Files written before the
 * robust ranges load as they were: their min/max ranges clip nothing.)
 *
 * Loading validates everything before the index is used: the CRC, the header against the
 * caller's n/dim/metric, the quantizer, every count against its bound while decoding (no write
 * can overflow a record), the exact length, then sx__hnsw_sq_check (invariants 1-5 of
 * hnsw_sq.h). Any failure is SX_ECORRUPT with a message; nothing on this path asserts.
 * Allocation is bounded by the caller's n and dim and the validated M, not by the input.
 *
 * Thread-safety: serialize only reads the index; deserialize builds a new one; check is
 * read-only.
 */
#include <math.h>
#include <string.h>

#include "index/hnsw_sq/hnsw_sq.h"
#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/err.h"

#define HEADER_BYTES 52u
#define FLAG_REFINE  1u

sx_status sx__hnsw_sq_serialize(const sx__index *idx, sx__wbuf *w)
{
    const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
    size_t start = w->len;
    sx__wbuf_u32(w, SX__HNSW_SQ_MAGIC);
    sx__wbuf_u32(w, SX__HNSW_SQ_VERSION);
    sx__wbuf_u64(w, h->n);
    sx__wbuf_u32(w, (uint32_t)h->dim);
    sx__wbuf_u32(w, (uint32_t)h->metric);
    sx__wbuf_u32(w, h->M);
    sx__wbuf_u32(w, h->M0);
    sx__wbuf_u32(w, h->efc);
    sx__wbuf_u32(w, h->sq_type);
    sx__wbuf_u32(w, h->refine ? FLAG_REFINE : 0u);
    sx__wbuf_u32(w, h->entry);
    sx__wbuf_u32(w, h->max_level);
    sx__wbuf_f32s(w, h->qmin, h->dim);
    sx__wbuf_f32s(w, h->qscale, h->dim);
    sx__wbuf_put(w, h->levels, h->n);
    for (size_t i = 0; i < h->n; i++)
        sx__hnsw_put_list(w, sx__hsq_links(h, (uint32_t)i, 0));
    for (size_t i = 0; i < h->n; i++)
        for (uint32_t l = 1; l <= h->levels[i]; l++)
            sx__hnsw_put_list(w, sx__hsq_links(h, (uint32_t)i, l));
    if (sx__wbuf_reserve(w, h->n * h->dim))
        for (size_t i = 0; i < h->n; i++)
            sx__wbuf_put(w, sx__hsq_code(h, (uint32_t)i), h->dim);
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot grow the serialization buffer");
    sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot grow the serialization buffer");
    return SX_OK;
}

/* Header fields after magic/version. */
typedef struct header {
    uint64_t n;
    uint32_t dim, metric, M, M0, efc, sq_type, flags, entry, max_level;
} header;

static sx_status check_header(const header *hd, size_t n, size_t dim, sx_metric metric)
{
    if (hd->n != n || hd->dim != dim || hd->metric != (uint32_t)metric)
        return sx__err(SX_ECORRUPT,
                       "HNSW_SQ index: built for n=%llu dim=%u metric=%u, segment has n=%zu "
                       "dim=%zu metric=%d",
                       (unsigned long long)hd->n, hd->dim, hd->metric, n, dim, (int)metric);
    if (n > SX__HNSW_MAX_N || dim == 0 || dim > SX_MAX_DIM || hd->M < SX__HNSW_M_MIN ||
        hd->M > SX__HNSW_M_MAX || hd->M0 != 2 * hd->M || hd->efc < 1 ||
        hd->efc > (uint32_t)INT32_MAX || hd->max_level > SX__HNSW_MAX_LEVEL)
        return sx__err(SX_ECORRUPT,
                       "HNSW_SQ index: bad header (M=%u M0=%u efConstruction=%u max_level=%u)",
                       hd->M, hd->M0, hd->efc, hd->max_level);
    if (hd->sq_type != SX__HNSW_SQ_SQ8)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: unknown sq_type %u", hd->sq_type);
    if (hd->flags & ~FLAG_REFINE)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: unknown flags 0x%x", hd->flags);
    return SX_OK;
}

static sx_status decode_body(sx__hnsw_sq *h, sx__rbuf *r)
{
    size_t n = h->n, dim = h->dim;
    sx__rbuf_f32s(r, h->qmin, dim);
    sx__rbuf_f32s(r, h->qscale, dim);
    if (!sx__rbuf_ok(r))
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: truncated quantizer");
    for (size_t d = 0; d < dim; d++)
        if (!isfinite(h->qmin[d]) || !isfinite(h->qscale[d]) || !(h->qscale[d] >= 0.0f))
            return sx__err(SX_ECORRUPT, "HNSW_SQ index: bad quantizer range in dimension %zu", d);
    sx__hsq_derive(h);
    const uint8_t *lv = sx__rbuf_bytes(r, n);
    if (!lv)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: truncated levels");
    for (size_t i = 0; i < n; i++) {
        if (lv[i] > SX__HNSW_MAX_LEVEL)
            return sx__err(SX_ECORRUPT, "HNSW_SQ index: node %zu has level %u > %u", i, lv[i],
                           SX__HNSW_MAX_LEVEL);
        h->levels[i] = lv[i];
    }
    sx_status rc = sx__hnsw_sq_alloc_up(h);
    if (rc != SX_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (!sx__hnsw_get_list(r, sx__hsq_links(h, (uint32_t)i, 0), h->M0))
            return sx__err(SX_ECORRUPT, "HNSW_SQ index: bad level-0 list of node %zu", i);
    for (size_t i = 0; i < n; i++)
        for (uint32_t l = 1; l <= h->levels[i]; l++)
            if (!sx__hnsw_get_list(r, sx__hsq_links(h, (uint32_t)i, l), h->M))
                return sx__err(SX_ECORRUPT, "HNSW_SQ index: bad level-%u list of node %zu", l, i);
    if (sx__rbuf_left(r) != n * dim)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: %zu bytes of codes, want %zu", sx__rbuf_left(r),
                       n * dim);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *c = sx__rbuf_bytes(r, dim);
        if (!c)
            return sx__err(SX_ECORRUPT, "HNSW_SQ index: truncated codes");
        memcpy(h->rec + i * h->rec_bytes, c, dim);
        sx__hsq_set_norm(h, (uint32_t)i, h->vecs + i * dim);
    }
    return SX_OK;
}

sx_status sx__hnsw_sq_deserialize(const void *data,
                                  size_t len,
                                  const float *vecs,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  sx__index **out)
{
    if (!data || len < HEADER_BYTES + 4)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: %zu bytes is too short", len);
    const uint8_t *b = data;
    if (sx__crc32c(0, b, len - 4) != sx__le32(b + len - 4))
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: checksum mismatch");
    sx__rbuf r;
    sx__rbuf_init(&r, data, len - 4);
    uint32_t magic = sx__rbuf_u32(&r), version = sx__rbuf_u32(&r);
    header hd;
    hd.n = sx__rbuf_u64(&r);
    hd.dim = sx__rbuf_u32(&r);
    hd.metric = sx__rbuf_u32(&r);
    hd.M = sx__rbuf_u32(&r);
    hd.M0 = sx__rbuf_u32(&r);
    hd.efc = sx__rbuf_u32(&r);
    hd.sq_type = sx__rbuf_u32(&r);
    hd.flags = sx__rbuf_u32(&r);
    hd.entry = sx__rbuf_u32(&r);
    hd.max_level = sx__rbuf_u32(&r);
    if (magic != SX__HNSW_SQ_MAGIC)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: bad magic 0x%08x", magic);
    if (version != SX__HNSW_SQ_VERSION)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: unsupported version %u", version);
    sx_status rc = check_header(&hd, n, dim, metric);
    if (rc != SX_OK)
        return rc;
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "HNSW_SQ: no vectors");
    /* every node needs its level byte, a level-0 count and its code */
    if (sx__rbuf_left(&r) / (5 + dim) < n || sx__rbuf_left(&r) < 8 * dim)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: truncated (%zu nodes in %zu bytes)", n, len);

    sx__hnsw_sq *h = NULL;
    rc = sx__hnsw_sq_alloc(vecs, n, dim, metric, hd.M, &h);
    if (rc != SX_OK)
        return rc;
    h->efc = hd.efc;
    h->sq_type = hd.sq_type;
    h->refine = (hd.flags & FLAG_REFINE) != 0;
    h->entry = hd.entry;
    h->max_level = hd.max_level;
    rc = decode_body(h, &r);
    if (rc == SX_OK && (!sx__rbuf_ok(&r) || sx__rbuf_left(&r) != 0))
        rc =
            sx__err(SX_ECORRUPT, "HNSW_SQ index: %zu unexpected trailing bytes", sx__rbuf_left(&r));
    if (rc == SX_OK)
        rc = sx__hnsw_sq_check((const sx__index *)h);
    if (rc != SX_OK) {
        sx__hnsw_sq_free((sx__index *)h);
        return rc;
    }
    *out = (sx__index *)h;
    return SX_OK;
}

/* ---------------------------------------------------------------- check */

sx_status sx__hnsw_sq_check(const sx__index *idx)
{
    const sx__hnsw_sq *h = (const sx__hnsw_sq *)idx;
    size_t n = h->n;
    if (h->M0 != 2 * h->M || h->M < SX__HNSW_M_MIN || h->M > SX__HNSW_M_MAX)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: bad degrees M=%u M0=%u", h->M, h->M0);
    for (size_t d = 0; d < h->dim; d++)
        if (!isfinite(h->qmin[d]) || !isfinite(h->qscale[d]) || !(h->qscale[d] >= 0.0f) ||
            !isfinite(h->qmu[d]))
            return sx__err(SX_ECORRUPT, "HNSW_SQ index: bad quantizer range in dimension %zu", d);
    if (n == 0) {
        if (h->entry != SX__HNSW_NONE || h->max_level != 0)
            return sx__err(SX_ECORRUPT, "HNSW_SQ index: empty index with an entry point");
        return SX_OK;
    }
    if (h->entry >= n || h->levels[h->entry] != h->max_level)
        return sx__err(SX_ECORRUPT, "HNSW_SQ index: bad entry point %u (max level %u)", h->entry,
                       h->max_level);
    for (size_t i = 0; i < n; i++)
        if (h->levels[i] > h->max_level)
            return sx__err(SX_ECORRUPT, "HNSW_SQ index: node %zu above the entry point's level", i);
    uint32_t *stamp = sx__calloc(n, sizeof *stamp);
    if (!stamp)
        return sx__err(SX_ENOMEM, "HNSW_SQ: cannot allocate the index check");
    sx_status rc = SX_OK;
    uint32_t mark = 0;
    for (size_t i = 0; i < n && rc == SX_OK; i++) {
        for (uint32_t l = 0; l <= h->levels[i] && rc == SX_OK; l++) {
            if (++mark == 0) { /* wrapped: restart the stamps */
                memset(stamp, 0, n * sizeof *stamp);
                mark = 1;
            }
            rc = sx__hnsw_check_list(sx__hsq_links(h, (uint32_t)i, l), (uint32_t)i, l,
                                     l ? h->M : h->M0, h->levels, n, stamp, mark, "HNSW_SQ index");
        }
    }
    sx__free(stamp);
    if (rc != SX_OK)
        return rc;
    /* invariant 5 */
    sx__graph_view v = sx__hsq_l0_view(h);
    return sx__graph_check_reach(&v, &h->entry, 1, "HNSW_SQ index", "the entry point at level 0");
}
