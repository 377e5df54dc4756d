/*
 * hnsw_io.c: HNSW graph (de)serialization. Only the graph is stored; the vectors belong to the
 * segment and are passed back in on load.
 *
 * Byte format (all integers little-endian, written through sx__wbuf):
 *   offset  size  field
 *   0       4     magic 0x4E485853 ("SXHN")
 *   4       4     version (1)
 *   8       8     n, number of nodes (must equal the segment's row count on load)
 *   16      4     dim (must match)
 *   20      4     metric: 0 L2, 1 IP, 2 COSINE, plus the rows' element type << 16 (0 float32,
 *                 1 float16, 2 bfloat16: a float32 index reads as before) (must match)
 *   24      4     M, in [2, 2048]
 *   28      4     M0, must be 2*M
 *   32      4     efConstruction used by the build (>= 1)
 *   36      4     entry point (0xFFFFFFFF iff n == 0)
 *   40      4     max level (== levels[entry])
 *   44      n     levels, one byte per node, each <= SX__HNSW_MAX_LEVEL
 *   ...           level-0 lists, nodes 0..n-1 in order: u32 count (<= M0), count u32 ids
 *   ...           upper lists, for each node with level > 0 in id order, levels 1..level:
 *                 u32 count (<= M), count u32 ids
 *   end-4   4     CRC-32C of every preceding byte of the record
 * Lists are stored compactly (count + used ids), so the record is ~4*(avg degree + 1) bytes per
 * node rather than the in-memory 4*(M0+1).
 *
 * Loading validates everything before the graph is used: the CRC, the header against the
 * caller's n/dim/metric, every count against its bound while decoding (so no write can overflow
 * a list), exact length, and finally the full structural check of hnsw_check.c (ids in range,
 * no self loops or duplicates, upper links to nodes that have that level, entry point, level-0
 * reachability). Any failure is SX_ECORRUPT with a message; nothing on this path asserts.
 * Allocation is bounded by the caller's n and the validated M, not by the input.
 *
 * Thread-safety: serialize only reads the index; deserialize builds a new one.
 */
#include <string.h>

#include "index/hnsw/hnsw.h"
#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/err.h"

#define HEADER_BYTES 44u

void sx__hnsw_put_list(sx__wbuf *w, const uint32_t *ll)
{
    sx__wbuf_u32(w, ll[0]);
    for (uint32_t j = 1; j <= ll[0]; j++)
        sx__wbuf_u32(w, ll[j]);
}

sx_status sx__hnsw_serialize(const sx__index *idx, sx__wbuf *w)
{
    const sx__hnsw *h = (const sx__hnsw *)idx;
    size_t start = w->len;
    sx__wbuf_u32(w, SX__HNSW_MAGIC);
    sx__wbuf_u32(w, SX__HNSW_VERSION);
    sx__wbuf_u64(w, h->n);
    sx__wbuf_u32(w, (uint32_t)h->dim);
    sx__wbuf_u32(w, (uint32_t)h->metric | (uint32_t)h->vt << 16);
    sx__wbuf_u32(w, h->M);
    sx__wbuf_u32(w, h->M0);
    sx__wbuf_u32(w, h->efc);
    sx__wbuf_u32(w, h->entry);
    sx__wbuf_u32(w, h->max_level);
    sx__wbuf_put(w, h->levels, h->n);
    for (size_t i = 0; i < h->n; i++)
        sx__hnsw_put_list(w, sx__hnsw_links(h, (uint32_t)i, 0));
    for (size_t i = 0; i < h->n; i++)
        for (uint32_t l = 1; l <= h->levels[i]; l++)
            sx__hnsw_put_list(w, sx__hnsw_links(h, (uint32_t)i, l));
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "HNSW: cannot grow the serialization buffer");
    sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "HNSW: cannot grow the serialization buffer");
    return SX_OK;
}

bool sx__hnsw_get_list(sx__rbuf *r, uint32_t *ll, uint32_t cap)
{
    uint32_t cnt = sx__rbuf_u32(r);
    if (!sx__rbuf_ok(r) || cnt > cap)
        return false;
    const uint8_t *p = sx__rbuf_bytes(r, (size_t)cnt * 4);
    if (!p)
        return false;
    ll[0] = cnt;
    for (uint32_t j = 0; j < cnt; j++)
        ll[1 + j] = sx__le32(p + 4 * (size_t)j);
    return true;
}

sx_status sx__hnsw_deserialize(const void *data,
                               size_t len,
                               const float *vecs,
                               size_t n,
                               size_t dim,
                               sx_metric metric,
                               sx__index **out)
{
    return sx__hnsw_deserialize_typed(data, len, vecs, SX__VT_F32, n, dim, metric, out);
}

sx_status sx__hnsw_deserialize_typed(const void *data,
                                     size_t len,
                                     const void *vecs,
                                     sx__vtype vt,
                                     size_t n,
                                     size_t dim,
                                     sx_metric metric,
                                     sx__index **out)
{
    if (!data || len < HEADER_BYTES + 4)
        return sx__err(SX_ECORRUPT, "HNSW index: %zu bytes is too short", len);
    const uint8_t *b = data;
    uint32_t want = sx__le32(b + len - 4);
    if (sx__crc32c(0, b, len - 4) != want)
        return sx__err(SX_ECORRUPT, "HNSW index: checksum mismatch");

    sx__rbuf r;
    sx__rbuf_init(&r, data, len - 4);
    uint32_t magic = sx__rbuf_u32(&r), version = sx__rbuf_u32(&r);
    uint64_t fn = sx__rbuf_u64(&r);
    uint32_t fdim = sx__rbuf_u32(&r), fmetric = sx__rbuf_u32(&r);
    uint32_t M = sx__rbuf_u32(&r), M0 = sx__rbuf_u32(&r), efc = sx__rbuf_u32(&r);
    uint32_t entry = sx__rbuf_u32(&r), max_level = sx__rbuf_u32(&r);
    if (magic != SX__HNSW_MAGIC)
        return sx__err(SX_ECORRUPT, "HNSW index: bad magic 0x%08x", magic);
    if (version != SX__HNSW_VERSION)
        return sx__err(SX_ECORRUPT, "HNSW index: unsupported version %u", version);
    if (fn != n || fdim != dim || fmetric != ((uint32_t)metric | (uint32_t)vt << 16))
        return sx__err(SX_ECORRUPT,
                       "HNSW index: built for n=%llu dim=%u metric=%u type=%u, segment has "
                       "n=%zu dim=%zu metric=%d type=%d",
                       (unsigned long long)fn, fdim, fmetric & 0xFFFFu, fmetric >> 16, n, dim,
                       (int)metric, (int)vt);
    if (vt == SX__VT_BIN || !sx__metric_fits(vt, metric))
        return sx__err(SX_EINVAL, "HNSW: metric %d on %s rows is not supported", (int)metric,
                       sx__vtype_name(vt));
    if (n > SX__HNSW_MAX_N || M < SX__HNSW_M_MIN || M > SX__HNSW_M_MAX || M0 != 2 * M || efc < 1 ||
        efc > (uint32_t)INT32_MAX || max_level > SX__HNSW_MAX_LEVEL)
        return sx__err(SX_ECORRUPT,
                       "HNSW index: bad header (M=%u M0=%u efConstruction=%u "
                       "max_level=%u)",
                       M, M0, efc, max_level);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "HNSW: no vectors");
    /* every node needs at least its level byte and a level-0 count */
    if (sx__rbuf_left(&r) / 5 < n)
        return sx__err(SX_ECORRUPT, "HNSW index: truncated (%zu nodes in %zu bytes)", n, len);

    const uint8_t *lv = sx__rbuf_bytes(&r, n);
    if (!lv)
        return sx__err(SX_ECORRUPT, "HNSW index: truncated levels");
    uint8_t *levels = sx__malloc(n ? n : 1);
    if (!levels)
        return sx__err(SX_ENOMEM, "HNSW: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (lv[i] > SX__HNSW_MAX_LEVEL) {
            sx__free(levels);
            return sx__err(SX_ECORRUPT, "HNSW index: node %zu has level %u > %u", i, lv[i],
                           SX__HNSW_MAX_LEVEL);
        }
        levels[i] = lv[i];
    }
    sx__hnsw *h;
    sx_status rc = sx__hnsw_alloc(vecs, vt, n, dim, metric, M, efc, levels, &h);
    if (rc != SX_OK)
        return rc == SX_ENOMEM ? rc : sx__err(SX_ECORRUPT, "HNSW index: too many upper levels");
    h->entry = entry;
    h->max_level = max_level;
    for (size_t i = 0; i < n; i++) {
        if (!sx__hnsw_get_list(&r, sx__hnsw_links(h, (uint32_t)i, 0), M0)) {
            rc = sx__err(SX_ECORRUPT, "HNSW index: bad level-0 list of node %zu", i);
            goto fail;
        }
    }
    for (size_t i = 0; i < n; i++) {
        for (uint32_t l = 1; l <= levels[i]; l++) {
            if (!sx__hnsw_get_list(&r, sx__hnsw_links(h, (uint32_t)i, l), M)) {
                rc = sx__err(SX_ECORRUPT, "HNSW index: bad level-%u list of node %zu", l, i);
                goto fail;
            }
        }
    }
    if (!sx__rbuf_ok(&r) || sx__rbuf_left(&r) != 0) {
        rc = sx__err(SX_ECORRUPT, "HNSW index: %zu unexpected trailing bytes", sx__rbuf_left(&r));
        goto fail;
    }
    rc = sx__hnsw_check((const sx__index *)h);
    if (rc != SX_OK)
        goto fail;
    *out = (sx__index *)h;
    return SX_OK;
fail:
    sx__hnsw_free((sx__index *)h);
    return rc;
}
