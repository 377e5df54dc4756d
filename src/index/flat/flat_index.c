/*
 * flat_index.c: the FLAT index: the sx__index_ops vtable over sx__flat_scan (see flat.h, index.h).
 *
 * FLAT has no structure of its own: build records the borrowed vector array, search scans it.
 * Its serialized form exists only so that a segment's "index file" looks the same for every
 * family and a FLAT index is checked against the segment it is loaded with.
 *
 * Format (all little-endian, 28 bytes, nothing after it):
 *   off size field
 *     0    4 magic "SXFL"
 *     4    4 u32 version (1)
 *     8    8 u64 n      rows the index covers
 *    16    4 u32 dim
 *    20    4 u32 metric (sx_metric), plus the rows' element type << 16 (dist.h's sx__vtype: 0
 *              float32, so a float32 index reads as before)
 *    24    4 u32 CRC32C of bytes [0, 24)
 * deserialize returns SX_ECORRUPT on a wrong length, magic, version or CRC, and when n, dim or
 * metric differ from the segment it is loaded with.
 *
 * Parameters. Build: none; any key is SX_EINVAL naming it. Search: "ef" and "nprobe" are
 * tolerated and ignored (callers pass generic params whatever the index type); any other key is
 * SX_EINVAL naming it. search() itself does not look at its params: the engine checks them once
 * per request with check_search_params.
 *
 * Element types. FLAT takes float32, float16, bfloat16 and binary rows (index.h's typed members);
 * BIN_FLAT is the same index under Milvus's name for binary fields, and takes binary rows only.
 *
 * Thread-safety: a built index is immutable; search may run concurrently (the scan allocates
 * nothing for one query).
 */
#include <stdint.h>
#include <string.h>

#include "index/flat/flat.h"
#include "index/index.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"

#define FLAT_VERSION 1u
#define FLAT_HDR_LEN 28u

static const uint8_t flat_magic[4] = { 'S', 'X', 'F', 'L' };

/* The index object: handed out as an sx__index * (an opaque type each family defines for
 * itself) and converted back on entry to every op. */
typedef struct flat_index {
    const void *vecs; /* borrowed: n rows of dim values of type vt, owned by the segment */
    sx__vtype vt;
    size_t n;
    size_t dim;
    sx_metric metric;
} flat_index;

static const flat_index *as_flat(const sx__index *idx)
{
    return (const flat_index *)(const void *)idx;
}

static sx_status check_shape(sx__vtype vt, size_t n, size_t dim, sx_metric metric)
{
    if (dim == 0 || dim > SX_MAX_DIM || (vt == SX__VT_BIN && dim % 8 != 0))
        return sx__err(SX_EINVAL, "FLAT: dim %zu out of range 1..%u", dim, SX_MAX_DIM);
    if (!sx__metric_fits(vt, metric))
        return sx__err(SX_EINVAL, "FLAT: metric %d does not apply to %s rows", (int)metric,
                       sx__vtype_name(vt));
    if ((uint64_t)n > (uint64_t)UINT32_MAX + 1)
        return sx__err(SX_EINVAL, "FLAT: %zu rows exceed the 32-bit id space", n);
    return SX_OK;
}

static sx_status flat_check_build_params(const sx_param *p, size_t np)
{
    if (np > 0)
        return sx__err(SX_EINVAL, "FLAT takes no build parameters, got \"%s\"",
                       p[0].key ? p[0].key : "");
    return SX_OK;
}

static sx_status flat_check_search_params(const sx_param *p, size_t np, size_t k)
{
    (void)k;
    for (size_t i = 0; i < np; i++) {
        const char *key = p[i].key ? p[i].key : "";
        if (strcmp(key, "ef") != 0 && strcmp(key, "nprobe") != 0)
            return sx__err(SX_EINVAL, "FLAT: unknown search parameter \"%s\"", key);
    }
    return SX_OK;
}

static sx_status
make(const void *vecs, sx__vtype vt, size_t n, size_t dim, sx_metric metric, sx__index **out)
{
    flat_index *f = sx__malloc(sizeof *f);
    if (!f)
        return sx__err(SX_ENOMEM, "FLAT: out of memory");
    f->vecs = vecs;
    f->vt = vt;
    f->n = n;
    f->dim = dim;
    f->metric = metric;
    *out = (sx__index *)(void *)f;
    return SX_OK;
}

static sx_status flat_build_typed(const sx_param *p,
                                  size_t np,
                                  const void *vecs,
                                  sx__vtype vt,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  const sx__build_ctx *ctx,
                                  sx__index **out)
{
    sx_status rc = flat_check_build_params(p, np);
    if (rc != SX_OK)
        return rc;
    rc = check_shape(vt, n, dim, metric);
    if (rc != SX_OK)
        return rc;
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "FLAT: no vectors for %zu rows", n);
    if (ctx && ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed))
        return sx__err(SX_ECANCELED, "FLAT: build cancelled");
    rc = make(vecs, vt, n, dim, metric, out);
    /* relaxed: progress is a monitoring counter with no ordering role (index.h) */
    if (rc == SX_OK && ctx && ctx->progress)
        atomic_store_explicit(ctx->progress, n, memory_order_relaxed);
    return rc;
}

static sx_status flat_build(const sx_param *p,
                            size_t np,
                            const float *vecs,
                            size_t n,
                            size_t dim,
                            sx_metric metric,
                            const sx__build_ctx *ctx,
                            sx__index **out)
{
    return flat_build_typed(p, np, vecs, SX__VT_F32, n, dim, metric, ctx, out);
}

static sx_status flat_search_typed(const sx__index *idx,
                                   const void *query,
                                   size_t k,
                                   const sx_param *sp,
                                   size_t nsp,
                                   const uint64_t *allow,
                                   sx__topk *out)
{
    (void)k; /* out was initialised with capacity k */
    (void)sp;
    (void)nsp;
    const flat_index *f = as_flat(idx);
    return sx__flat_scan_typed(f->vecs, f->vt, f->n, f->dim, f->metric, 0, allow, query, 1, out);
}

static sx_status flat_search(const sx__index *idx,
                             const float *query,
                             size_t k,
                             const sx_param *sp,
                             size_t nsp,
                             const uint64_t *allow,
                             sx__topk *out)
{
    return flat_search_typed(idx, query, k, sp, nsp, allow, out);
}

static void encode_header(uint8_t *h, uint64_t n, uint32_t dim, uint32_t metric)
{
    memcpy(h, flat_magic, sizeof flat_magic);
    sx__put_le32(h + 4, FLAT_VERSION);
    sx__put_le64(h + 8, n);
    sx__put_le32(h + 16, dim);
    sx__put_le32(h + 20, metric);
    sx__put_le32(h + 24, sx__crc32c(0, h, 24));
}

static sx_status flat_serialize(const sx__index *idx, sx__wbuf *w)
{
    const flat_index *f = as_flat(idx);
    uint8_t h[FLAT_HDR_LEN];
    encode_header(h, f->n, (uint32_t)f->dim, (uint32_t)f->metric | (uint32_t)f->vt << 16);
    sx__wbuf_put(w, h, sizeof h);
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "FLAT: out of memory serializing");
    return SX_OK;
}

static sx_status flat_deserialize_typed(const void *data,
                                        size_t len,
                                        const void *vecs,
                                        sx__vtype vt,
                                        size_t n,
                                        size_t dim,
                                        sx_metric metric,
                                        sx__index **out)
{
    const uint8_t *h = data;
    if (!h || len != FLAT_HDR_LEN)
        return sx__err(SX_ECORRUPT, "FLAT: header is %zu bytes, want %u", len, FLAT_HDR_LEN);
    if (memcmp(h, flat_magic, sizeof flat_magic) != 0)
        return sx__err(SX_ECORRUPT, "FLAT: bad magic");
    if (sx__le32(h + 24) != sx__crc32c(0, h, 24))
        return sx__err(SX_ECORRUPT, "FLAT: header checksum mismatch");
    uint32_t version = sx__le32(h + 4);
    if (version != FLAT_VERSION)
        return sx__err(SX_ECORRUPT, "FLAT: unsupported version %u", version);
    uint64_t hn = sx__le64(h + 8);
    uint32_t hdim = sx__le32(h + 16), hmetric = sx__le32(h + 20);
    if (hn != (uint64_t)n || (size_t)hdim != dim ||
        hmetric != ((uint32_t)metric | (uint32_t)vt << 16))
        return sx__err(SX_ECORRUPT,
                       "FLAT: header says n=%llu dim=%u metric=%u type=%u, segment has n=%zu "
                       "dim=%zu metric=%d type=%d",
                       (unsigned long long)hn, hdim, hmetric & 0xFFFFu, hmetric >> 16, n, dim,
                       (int)metric, (int)vt);
    sx_status rc = check_shape(vt, n, dim, metric);
    if (rc != SX_OK)
        return rc;
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "FLAT: no vectors for %zu rows", n);
    return make(vecs, vt, n, dim, metric, out);
}

static sx_status flat_deserialize(const void *data,
                                  size_t len,
                                  const float *vecs,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  sx__index **out)
{
    return flat_deserialize_typed(data, len, vecs, SX__VT_F32, n, dim, metric, out);
}

static size_t flat_memory_bytes(const sx__index *idx)
{
    (void)idx;
    return sizeof(flat_index);
}

static void flat_free(sx__index *idx)
{
    sx__free(idx);
}

const sx__index_ops sx__flat_index_ops = {
    .name = "FLAT",
    .check_build_params = flat_check_build_params,
    .check_search_params = flat_check_search_params,
    .build = flat_build,
    .search = flat_search,
    .serialize = flat_serialize,
    .deserialize = flat_deserialize,
    .memory_bytes = flat_memory_bytes,
    .free = flat_free,
    .vtypes = 1u << SX__VT_F32 | 1u << SX__VT_F16 | 1u << SX__VT_BF16 | 1u << SX__VT_BIN,
    .build_typed = flat_build_typed,
    .deserialize_typed = flat_deserialize_typed,
    .search_typed = flat_search_typed,
};

/* BIN_FLAT: FLAT for binary fields only (its float32 members refuse: the engine never calls
 * them, since sx__index_check_build refuses BIN_FLAT on a float field first) */
static sx_status bin_flat_build(const sx_param *p,
                                size_t np,
                                const float *vecs,
                                size_t n,
                                size_t dim,
                                sx_metric metric,
                                const sx__build_ctx *ctx,
                                sx__index **out)
{
    (void)p, (void)np, (void)vecs, (void)n, (void)dim, (void)metric, (void)ctx, (void)out;
    return sx__err(SX_EINVAL, "BIN_FLAT needs a BINARY_VECTOR field");
}

static sx_status bin_flat_deserialize(const void *data,
                                      size_t len,
                                      const float *vecs,
                                      size_t n,
                                      size_t dim,
                                      sx_metric metric,
                                      sx__index **out)
{
    (void)data, (void)len, (void)vecs, (void)n, (void)dim, (void)metric, (void)out;
    return sx__err(SX_EINVAL, "BIN_FLAT needs a BINARY_VECTOR field");
}

const sx__index_ops sx__bin_flat_index_ops = {
    .name = "BIN_FLAT",
    .check_build_params = flat_check_build_params,
    .check_search_params = flat_check_search_params,
    .build = bin_flat_build,
    .search = flat_search,
    .serialize = flat_serialize,
    .deserialize = bin_flat_deserialize,
    .memory_bytes = flat_memory_bytes,
    .free = flat_free,
    .vtypes = 1u << SX__VT_BIN,
    .build_typed = flat_build_typed,
    .deserialize_typed = flat_deserialize_typed,
    .search_typed = flat_search_typed,
};
