/*
 * cagra_io.c: GPU_CAGRA graph (de)serialization, allocation and the structural check. Only the
 * graph is stored; the vectors belong to the segment and are passed back in on load. A graph
 * built on the GPU (sx__gpu_cagra_build) is stored in exactly this format, which is what lets a
 * CPU-only machine load and serve it (cagra_search.c).
 *
 * Byte format (all integers little-endian, written through sx__wbuf):
 *   offset  size        field
 *   0       4           magic 0x47435853 ("SXCG")
 *   4       4           version (1)
 *   8       8           n, number of nodes (must equal the segment's row count on load)
 *   16      4           dim (must match)
 *   20      4           metric: 0 L2, 1 IP, 2 COSINE (must match)
 *   24      4           degree (graph_degree), in [1, 1024]
 *   28      4           intermediate degree used by the build, in (degree, 1024]
 *   32      4           build_algo: 0 IVF_PQ (exact kNN on the CPU), 1 NN_DESCENT
 *   36      4           flags: bit 0 = built on the GPU; other bits zero
 *   40      4           n_entries (0 iff n == 0; at most min(n, 16))
 *   44      4*n_entries entry points
 *   ...     4*n*degree  the graph, rows in node order, SX__CAGRA_NONE (0xFFFFFFFF) padding
 *   end-4   4           CRC-32C of every preceding byte of the record
 * The rows are stored at full width (fixed degree, as on the GPU): 4 * degree bytes per node.
 *
 * Loading validates everything before the graph is used: the CRC, the header against the
 * caller's n/dim/metric, the exact length (computed from the validated header, so nothing is
 * allocated from an unchecked size), then sx__cagra_check (invariants 1-4 of cagra.h: a stored
 * graph with a node unreachable from the entry points is SX_ECORRUPT too, so the engine rebuilds
 * it). Any failure is SX_ECORRUPT with a message; nothing on this path asserts.
 *
 * Thread-safety: serialize and check only read the index; deserialize builds a new one.
 */
#include <string.h>

#include "index/cagra/cagra.h"
#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/err.h"

#define HEADER_BYTES 44u

/* ---------------------------------------------------------------- allocation */

sx_status sx__cagra_alloc(const float *vecs,
                          size_t n,
                          size_t dim,
                          sx_metric metric,
                          uint32_t degree,
                          uint32_t inter_degree,
                          uint32_t n_entries,
                          sx__cagra **out)
{
    sx__cagra *g = sx__calloc(1, sizeof *g);
    if (!g) {
        (void)sx__err(SX_ENOMEM, "GPU_CAGRA: out of memory");
        return SX_ENOMEM;
    }
    g->vecs = vecs;
    g->n = n;
    g->dim = dim;
    g->metric = metric;
    g->dist = sx__dist_for_metric(metric);
    g->degree = degree;
    g->inter_degree = inter_degree;
    g->n_entries = n_entries;
    g->graph = sx__malloc_aligned(n * degree * sizeof *g->graph + 64);
    g->entries = sx__malloc((n_entries ? n_entries : 1) * sizeof *g->entries);
    if (!g->graph || !g->entries) {
        sx__cagra_free((sx__index *)(void *)g);
        (void)sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the graph of %zu x %u", n, degree);
        return SX_ENOMEM;
    }
    *out = g;
    return SX_OK;
}

void sx__cagra_free(sx__index *idx)
{
    sx__cagra *g = (sx__cagra *)(void *)idx;
    if (!g)
        return;
    sx__free_aligned(g->graph);
    sx__free(g->entries);
    sx__free(g);
}

size_t sx__cagra_memory_bytes(const sx__index *idx)
{
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    return sizeof *g + g->n * g->degree * sizeof(uint32_t) + g->n_entries * sizeof(uint32_t);
}

/* ---------------------------------------------------------------- check */

sx_status sx__cagra_check_rows(const sx__index *idx)
{
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    if (g->degree < 1 || g->degree >= g->inter_degree || g->inter_degree > SX__CAGRA_DEGREE_MAX)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: bad degrees (graph %u, intermediate %u)",
                       g->degree, g->inter_degree);
    if (g->build_algo > SX__CAGRA_ALGO_NN_DESCENT || (g->flags & ~SX__CAGRA_FLAG_GPU) != 0)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: unknown build_algo %u or flags 0x%x",
                       g->build_algo, g->flags);
    if (g->n >= SX__CAGRA_NONE)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: %zu nodes", g->n);
    size_t max_e = g->n < SX__CAGRA_MAX_ENTRIES ? g->n : SX__CAGRA_MAX_ENTRIES;
    if ((g->n == 0) != (g->n_entries == 0) || g->n_entries > max_e)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: %u entry points for %zu nodes", g->n_entries,
                       g->n);
    for (uint32_t e = 0; e < g->n_entries; e++)
        if (g->entries[e] >= g->n)
            return sx__err(SX_ECORRUPT, "GPU_CAGRA index: entry point %u out of range",
                           g->entries[e]);
    if (g->n == 0)
        return SX_OK;
    /* tag[id] == row + 1 <=> id seen in the current row */
    uint32_t *tag = sx__calloc(g->n, sizeof *tag);
    if (!tag)
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the check scratch");
    const uint32_t want = g->n - 1 < g->degree ? (uint32_t)(g->n - 1) : g->degree;
    sx_status rc = SX_OK;
    for (size_t i = 0; i < g->n && rc == SX_OK; i++) {
        const uint32_t *row = sx__cagra_row(g, (uint32_t)i);
        uint32_t valid = 0;
        bool padding = false;
        for (uint32_t j = 0; j < g->degree; j++) {
            uint32_t id = row[j];
            if (id == SX__CAGRA_NONE) {
                padding = true;
                continue;
            }
            if (padding || id >= g->n || id == (uint32_t)i || tag[id] == (uint32_t)i + 1) {
                rc = sx__err(SX_ECORRUPT,
                             "GPU_CAGRA index: node %zu slot %u: bad neighbour %u (out of range, "
                             "self, repeated or after padding)",
                             i, j, id);
                break;
            }
            tag[id] = (uint32_t)i + 1;
            valid++;
        }
        if (rc == SX_OK && valid > want)
            rc = sx__err(SX_ECORRUPT, "GPU_CAGRA index: node %zu has %u neighbours, at most %u", i,
                         valid, want);
    }
    sx__free(tag);
    return rc;
}

sx_status sx__cagra_check(const sx__index *idx)
{
    sx_status rc = sx__cagra_check_rows(idx);
    if (rc != SX_OK)
        return rc;
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    sx__graph_view v = sx__cagra_view(g);
    return sx__graph_check_reach(&v, g->entries, g->n_entries, "GPU_CAGRA index",
                                 "the entry points");
}

/* ---------------------------------------------------------------- serialize */

sx_status sx__cagra_serialize(const sx__index *idx, sx__wbuf *w)
{
    const sx__cagra *g = (const sx__cagra *)(const void *)idx;
    size_t start = w->len;
    size_t cells = g->n * g->degree;
    if (!sx__wbuf_reserve(w, HEADER_BYTES + 4 * ((size_t)g->n_entries + cells) + 4))
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot grow the serialization buffer");
    sx__wbuf_u32(w, SX__CAGRA_MAGIC);
    sx__wbuf_u32(w, SX__CAGRA_VERSION);
    sx__wbuf_u64(w, g->n);
    sx__wbuf_u32(w, (uint32_t)g->dim);
    sx__wbuf_u32(w, (uint32_t)g->metric);
    sx__wbuf_u32(w, g->degree);
    sx__wbuf_u32(w, g->inter_degree);
    sx__wbuf_u32(w, g->build_algo);
    sx__wbuf_u32(w, g->flags);
    sx__wbuf_u32(w, g->n_entries);
    for (uint32_t e = 0; e < g->n_entries; e++)
        sx__wbuf_u32(w, g->entries[e]);
    for (size_t i = 0; i < cells; i++)
        sx__wbuf_u32(w, g->graph[i]);
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot grow the serialization buffer");
    sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot grow the serialization buffer");
    return SX_OK;
}

sx_status sx__cagra_deserialize(const void *data,
                                size_t len,
                                const float *vecs,
                                size_t n,
                                size_t dim,
                                sx_metric metric,
                                sx__index **out)
{
    if (!data || len < HEADER_BYTES + 4)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: %zu bytes is too short", len);
    const uint8_t *b = data;
    if (sx__crc32c(0, b, len - 4) != sx__le32(b + len - 4))
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: checksum mismatch");
    sx__rbuf r;
    sx__rbuf_init(&r, data, len - 4);
    uint32_t magic = sx__rbuf_u32(&r), version = sx__rbuf_u32(&r);
    uint64_t fn = sx__rbuf_u64(&r);
    uint32_t fdim = sx__rbuf_u32(&r), fmetric = sx__rbuf_u32(&r);
    uint32_t degree = sx__rbuf_u32(&r), inter = sx__rbuf_u32(&r);
    uint32_t algo = sx__rbuf_u32(&r), flags = sx__rbuf_u32(&r), ne = sx__rbuf_u32(&r);
    if (magic != SX__CAGRA_MAGIC)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: bad magic 0x%08x", magic);
    if (version != SX__CAGRA_VERSION)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: unsupported version %u", version);
    if (fn != n || fdim != dim || fmetric != (uint32_t)metric)
        return sx__err(SX_ECORRUPT,
                       "GPU_CAGRA index: built for n=%llu dim=%u metric=%u, segment has n=%zu "
                       "dim=%zu metric=%d",
                       (unsigned long long)fn, fdim, fmetric, n, dim, (int)metric);
    if (degree < 1 || degree >= inter || inter > SX__CAGRA_DEGREE_MAX ||
        algo > SX__CAGRA_ALGO_NN_DESCENT || (flags & ~SX__CAGRA_FLAG_GPU) != 0 ||
        ne > SX__CAGRA_MAX_ENTRIES || n >= SX__CAGRA_NONE)
        return sx__err(SX_ECORRUPT,
                       "GPU_CAGRA index: bad header (degree %u, intermediate %u, build_algo %u, "
                       "flags 0x%x, %u entries)",
                       degree, inter, algo, flags, ne);
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "GPU_CAGRA: no vectors");
    /* exact length from the validated header; divisions so nothing overflows */
    size_t left = sx__rbuf_left(&r);
    if (left % 4 != 0 || left / 4 < ne || (left / 4 - ne) / degree != n ||
        (left / 4 - ne) % degree != 0)
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: %zu bytes do not hold %zu x %u + %u ids",
                       left, n, degree, ne);
    sx__cagra *g = NULL;
    sx_status rc = sx__cagra_alloc(vecs, n, dim, metric, degree, inter, ne, &g);
    if (rc != SX_OK)
        return rc;
    g->build_algo = algo;
    g->flags = flags;
    const uint8_t *p = sx__rbuf_bytes(&r, left);
    if (!p) {
        sx__cagra_free((sx__index *)(void *)g);
        return sx__err(SX_ECORRUPT, "GPU_CAGRA index: truncated");
    }
    for (uint32_t e = 0; e < ne; e++)
        g->entries[e] = sx__le32(p + 4 * (size_t)e);
    p += 4 * (size_t)ne;
    for (size_t i = 0; i < n * degree; i++)
        g->graph[i] = sx__le32(p + 4 * i);
    rc = sx__cagra_check((const sx__index *)(const void *)g);
    if (rc != SX_OK) {
        sx__cagra_free((sx__index *)(void *)g);
        return rc;
    }
    *out = (sx__index *)(void *)g;
    return SX_OK;
}
