/*
 * segment.c: in-memory segments.
 *
 * A growing segment stores rows in fixed chunks of SX__CHUNK_ROWS per column so that appends never
 * move rows that readers may be scanning (no realloc under readers). The only writer appends under
 * the collection's write_mu and publishes n_rows with a release store; readers scan [0, n_rows)
 * after an acquire load. A sealed segment has one contiguous chunk per column; the vector column
 * is 64-byte aligned and is borrowed by the segment's index.
 * A sealed segment opened from its file (sx__seg_open_file: at open, and right after a flush or a
 * compaction wrote the file) keeps its fixed-width columns and its key index in the file's
 * read-only mapping: page cache, not heap, so a collection larger than RAM can be opened. Only
 * the delete bitset, VARCHAR strings (XXX: still decoded into the heap) and the pointer arrays
 * stay in the heap; they are charged to the budget as SX__MEM_SEALED (a heap key index of a
 * version 1 file as SX__MEM_PKMAP), given back when the last reference goes.
 * Rejected: a single realloc'd array per column (would need readers to take a lock per scan).
 */
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "platform/fs.h"
#include "platform/membudget.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"
#include "util/half.h"
#include "vector/dist.h"

size_t sx__field_width(const sx_collection *c, size_t f)
{
    switch (c->types[f]) {
    case SX_FIELD_INT64:
        return sizeof(int64_t);
    case SX_FIELD_DOUBLE:
        return sizeof(double);
    case SX_FIELD_BOOL:
        return sizeof(bool);
    case SX_FIELD_VARCHAR:
        return sizeof(char *);
    case SX_FIELD_FLOAT_VECTOR:
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR:
        return sx_vector_row_bytes(c->types[f], c->fields[f].dim);
    }
    return 0;
}

void sx__normalize_row(sx__vtype vt, void *row, size_t dim)
{
    if (vt == SX__VT_F32) {
        sx__normalize(row, dim);
        return;
    }
    if (vt == SX__VT_BIN)
        return;
    /* 16-bit rows: widen, normalise in float32 (double sums, dist.c), round back */
    float buf[256];
    uint16_t *h = row;
    double n2 = 0.0;
    for (size_t i = 0; i < dim; i += 256) {
        size_t m = dim - i < 256 ? dim - i : 256;
        sx__widen(vt, h + i, buf, m);
        n2 += sx__norm2_f64(buf, m);
    }
    double norm = sqrt(n2);
    if (!(norm > 0.0) || !isfinite(norm))
        return;
    double inv = 1.0 / norm;
    for (size_t i = 0; i < dim; i += 256) {
        size_t m = dim - i < 256 ? dim - i : 256;
        sx__widen(vt, h + i, buf, m);
        for (size_t j = 0; j < m; j++) {
            float x = (float)((double)buf[j] * inv);
            h[i + j] = vt == SX__VT_F16 ? sx__f32_to_f16(x) : sx__f32_to_bf16(x);
        }
    }
}

static sx_status
seg_alloc(const sx_collection *c, uint64_t id, size_t cap, size_t chunk_rows, sx__segment **out)
{
    sx__segment *s = sx__calloc(1, sizeof *s);
    if (!s)
        return sx__err(SX_ENOMEM, "allocating segment");
    s->id = id;
    atomic_init(&s->refs, 1);
    s->cap_rows = cap;
    s->chunk_rows = chunk_rows;
    s->n_chunks = (cap + chunk_rows - 1) / chunk_rows;
    if (s->n_chunks == 0)
        s->n_chunks = 1;
    s->n_fields = c->n_fields;
    s->pk.col = UINT32_MAX;
    s->budget = c->db ? c->db->budget : NULL;
    s->charge_kind = SX__MEM_GROWING;
    s->chunks = sx__calloc(c->n_fields, sizeof(void **));
    s->nulls = sx__calloc(c->n_fields, sizeof(uint64_t **));
    s->types_is_str = sx__calloc(c->n_fields, sizeof(bool));
    s->deleted = sx__calloc(sx__bits_words(cap) + 1, sizeof(uint64_t));
    if (!s->chunks || !s->nulls || !s->deleted || !s->types_is_str)
        goto nomem;
    for (size_t f = 0; f < c->n_fields; f++) {
        s->chunks[f] = sx__calloc(s->n_chunks, sizeof(void *));
        if (!s->chunks[f])
            goto nomem;
        if (c->fields[f].nullable) {
            s->nulls[f] = sx__calloc(s->n_chunks, sizeof(uint64_t *));
            if (!s->nulls[f])
                goto nomem;
        }
        s->types_is_str[f] = c->types[f] == SX_FIELD_VARCHAR;
    }
    (void)sx__mutex_init(&s->idx_mu, SX__RANK_SEG_IDX, "segment.idx_mu");
    *out = s;
    return SX_OK;
nomem:
    for (size_t f = 0; f < c->n_fields; f++) {
        if (s->chunks)
            sx__free(s->chunks[f]);
        if (s->nulls)
            sx__free(s->nulls[f]);
    }
    sx__free(s->chunks);
    sx__free(s->nulls);
    sx__free(s->types_is_str);
    sx__free(s->deleted);
    sx__free(s);
    return sx__err(SX_ENOMEM, "allocating segment");
}

sx_status sx__seg_new_growing(const sx_collection *c, uint64_t id, size_t cap, sx__segment **out)
{
    return seg_alloc(c, id, cap, SX__CHUNK_ROWS, out);
}

sx_status sx__seg_new_sealed(
    const sx_collection *c, uint64_t id, size_t n, void **cols, uint64_t **nulls, sx__segment **out)
{
    sx__segment *s;
    sx_status st = seg_alloc(c, id, n, n ? n : 1, &s);
    if (st != SX_OK)
        return st;
    s->sealed = true;
    for (size_t f = 0; f < c->n_fields; f++) {
        s->chunks[f][0] = cols[f];
        if (s->nulls[f] && nulls)
            s->nulls[f][0] = nulls[f];
    }
    atomic_store_explicit(&s->n_rows, n, memory_order_release);
    s->charge_kind = SX__MEM_SEALED;
    s->charged = sx__seg_memory(c, s);
    sx__mem_force(s->budget, SX__MEM_SEALED, s->charged);
    *out = s;
    return SX_OK;
}

sx_status
sx__seg_open_file(const sx_collection *c, uint64_t id, uint64_t n_expect, sx__segment **out)
{
    char path[4096];
    sx__coll_path(c, path, sizeof path, "sxs", id);
    sx__segcol *expect = sx__calloc(c->n_fields, sizeof *expect);
    if (!expect)
        return sx__err(SX_ENOMEM, "opening %s", path);
    for (size_t f = 0; f < c->n_fields; f++) {
        expect[f].name = (char *)c->names[f];
        expect[f].type = c->types[f];
        expect[f].dim = sx_field_is_vector(c->types[f]) ? c->fields[f].dim : 0;
        expect[f].is_primary = f == c->pk;
        expect[f].nullable = c->fields[f].nullable;
    }
    uint64_t n = 0;
    sx__segcol *cols = NULL;
    sx__segmap map;
    memset(&map, 0, sizeof map);
    sx_status st = sx__segfile_read(path, id, expect, c->n_fields, &n, &cols, &map);
    sx__free(expect);
    if (st != SX_OK)
        return st;
    sx__segment *s = NULL;
    if (n != n_expect) {
        st = sx__err(SX_ECORRUPT, "%s: row count differs from the manifest", path);
        goto fail;
    }
    st = seg_alloc(c, id, n, n ? n : 1, &s);
    if (st != SX_OK)
        goto fail;
    s->sealed = true;
    s->charge_kind = SX__MEM_SEALED;
    s->map = map.addr;
    s->map_len = map.len;
    map.addr = NULL;
    for (size_t f = 0; f < c->n_fields; f++) {
        s->chunks[f][0] = cols[f].data;
        cols[f].data = NULL;
        if (cols[f].borrowed)
            s->mapped_mask |= (uint64_t)1 << f;
        if (s->nulls[f]) {
            s->nulls[f][0] = cols[f].nulls;
            cols[f].nulls = NULL;
            if (cols[f].nulls_borrowed)
                s->nulls_mapped |= (uint64_t)1 << f;
        }
    }
    sx__segcols_free(cols, c->n_fields, n);
    cols = NULL;
    atomic_store_explicit(&s->n_rows, n, memory_order_release);
    if (map.pk.col != UINT32_MAX) {
        s->pk = map.pk;
    } else { /* a version 1 file: the same index, in the heap */
        st = sx__segpk_build(c->types[c->pk], (uint32_t)c->pk, s->chunks[c->pk][0], n, &s->pk);
        if (st != SX_OK)
            goto fail;
        s->pk_charged = s->pk.owned_bytes;
        sx__mem_force(s->budget, SX__MEM_PKMAP, s->pk_charged);
    }
    s->charged = sx__seg_memory(c, s);
    sx__mem_force(s->budget, SX__MEM_SEALED, s->charged);
    *out = s;
    return SX_OK;
fail:
    sx__segcols_free(cols, c->n_fields, n);
    sx__fs_unmap(map.addr, map.len);
    sx__seg_unref(s);
    return st;
}

void sx__seg_ref(sx__segment *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

static void seg_free(sx__segment *s)
{
    sx__mem_give(s->budget, (sx__memkind)s->charge_kind, s->charged);
    sx__mem_give(s->budget, SX__MEM_PKMAP, s->pk_charged);
    sx__segpk_fini(&s->pk);
    size_t n = atomic_load_explicit(&s->n_rows, memory_order_relaxed);
    for (size_t f = 0; f < s->n_fields; f++) {
        for (size_t ch = 0; ch < s->n_chunks; ch++) {
            void *p = s->chunks[f][ch];
            if (!p || (s->mapped_mask & ((uint64_t)1 << f)))
                continue;
            if (s->types_is_str && s->types_is_str[f]) {
                char **strs = p;
                size_t base = ch * s->chunk_rows;
                size_t m = n > base ? n - base : 0;
                if (m > s->chunk_rows)
                    m = s->chunk_rows;
                for (size_t r = 0; r < m; r++)
                    sx__free(strs[r]);
            }
            sx__free_aligned(p);
        }
        sx__free(s->chunks[f]);
        if (s->nulls[f] && !(s->nulls_mapped & ((uint64_t)1 << f)))
            for (size_t ch = 0; ch < s->n_chunks; ch++)
                sx__free(s->nulls[f][ch]);
        sx__free(s->nulls[f]);
    }
    sx__free(s->chunks);
    sx__free(s->nulls);
    sx__free(s->types_is_str);
    sx__free(s->deleted);
    sx__fs_unmap(s->map, s->map_len);
    for (size_t v = 0; v < SX_MAX_VECTOR_FIELDS; v++)
        sx__idxref_unref(s->index[v]);
    for (size_t f = 0; f < SX_MAX_FIELDS; f++)
        sx__sparse_ix_free(s->sparse[f]);
    sx__mutex_destroy(&s->idx_mu);
    sx__free(s);
}

void sx__seg_unref(sx__segment *s)
{
    if (!s)
        return;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        seg_free(s);
}

void sx__idxref_unref(sx__idxref *r)
{
    if (!r)
        return;
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        sx__mem_give(r->budget, SX__MEM_INDEX, r->charged);
        sx__mem_give(r->budget, SX__MEM_CACHE, r->cache_charged);
        r->ops->free(r->idx);
        sx__free(r);
    }
}

sx_status sx__seg_seal_copy(const sx_collection *c, sx__segment *g, sx__segment **out)
{
    size_t n = atomic_load_explicit(&g->n_rows, memory_order_acquire);
    void **cols = sx__calloc(c->n_fields, sizeof(void *));
    uint64_t **nulls = sx__calloc(c->n_fields, sizeof(uint64_t *));
    sx_status st = SX_OK;
    if (!cols || !nulls) {
        st = sx__err(SX_ENOMEM, "sealing segment");
        goto fail;
    }
    for (size_t f = 0; f < c->n_fields; f++) {
        size_t w = sx__field_width(c, f);
        cols[f] = sx__malloc_aligned(n * w + 64);
        if (!cols[f]) {
            st = sx__err(SX_ENOMEM, "sealing segment");
            goto fail;
        }
        if (!g->nulls[f])
            continue;
        nulls[f] = sx__calloc(sx__bits_words(n) + 1, sizeof(uint64_t));
        if (!nulls[f]) {
            st = sx__err(SX_ENOMEM, "sealing segment");
            goto fail;
        }
        for (size_t r = 0; r < n; r++)
            if (sx__seg_is_null(g, f, r))
                sx__bits_set(nulls[f], r);
    }
    for (size_t f = 0; f < c->n_fields; f++) {
        size_t w = sx__field_width(c, f);
        for (size_t base = 0; base < n; base += g->chunk_rows) {
            size_t m = n - base < g->chunk_rows ? n - base : g->chunk_rows;
            memcpy((char *)cols[f] + base * w, g->chunks[f][base / g->chunk_rows], m * w);
        }
        if (c->types[f] != SX_FIELD_VARCHAR)
            continue;
        /* strings are copied, not moved: readers of the growing segment may still use them */
        char **strs = cols[f];
        for (size_t r = 0; r < n; r++) {
            strs[r] = sx__strdup(strs[r]);
            if (!strs[r]) {
                for (size_t q = 0; q < r; q++)
                    sx__free(strs[q]);
                memset(strs, 0, n * sizeof(char *));
                st = sx__err(SX_ENOMEM, "sealing segment");
                goto fail;
            }
        }
    }
    sx__segment *s;
    st = sx__seg_new_sealed(c, g->id, n, cols, nulls, &s);
    if (st != SX_OK)
        goto fail;
    sx__free(cols);
    sx__free(nulls);
    memcpy(s->deleted, g->deleted, sx__bits_words(n) * sizeof(uint64_t));
    atomic_store(&s->n_deleted, atomic_load(&g->n_deleted));
    *out = s;
    return SX_OK;
fail:
    /* varchar columns hold no owned strings here: a failed copy freed its own */
    for (size_t f = 0; f < c->n_fields; f++) {
        if (cols)
            sx__free_aligned(cols[f]);
        if (nulls)
            sx__free(nulls[f]);
    }
    sx__free(cols);
    sx__free(nulls);
    return st;
}

void sx__seg_colrefs(const sx_collection *c, const sx__segment *s, size_t ch, sx__colref *out)
{
    for (size_t f = 0; f < c->n_fields; f++) {
        void *p = s->chunks[f][ch];
        out[f].type = c->types[f];
        out[f].i64 = c->types[f] == SX_FIELD_INT64 ? p : NULL;
        out[f].f64 = c->types[f] == SX_FIELD_DOUBLE ? p : NULL;
        out[f].b = c->types[f] == SX_FIELD_BOOL ? p : NULL;
        out[f].str = c->types[f] == SX_FIELD_VARCHAR ? (const char *const *)p : NULL;
        out[f].nulls = s->nulls[f] ? s->nulls[f][ch] : NULL;
    }
}

size_t sx__seg_memory(const sx_collection *c, const sx__segment *s)
{
    /* Only the chunks holding published rows: their pointers were stored before n_rows was
     * released (a writer may be storing the pointer of the next chunk right now; reading it
     * would race). Up to one chunk per field allocated ahead of the rows is not counted. */
    size_t n = atomic_load_explicit(&s->n_rows, memory_order_acquire);
    size_t bytes = sizeof *s + sx__bits_words(s->cap_rows) * 8;
    size_t used = (n + s->chunk_rows - 1) / s->chunk_rows;
    if (used > s->n_chunks)
        used = s->n_chunks;
    for (size_t f = 0; f < c->n_fields; f++) {
        size_t allocated = 0;
        for (size_t ch = 0; ch < used; ch++)
            if (s->chunks[f][ch])
                allocated++;
        if (s->nulls[f] && !(s->nulls_mapped & ((uint64_t)1 << f)))
            bytes += allocated * sx__bits_words(s->chunk_rows) * 8;
        if (s->mapped_mask & ((uint64_t)1 << f))
            continue; /* file-backed pages: reclaimable page cache, not heap */
        bytes += allocated * s->chunk_rows * sx__field_width(c, f);
        if (c->types[f] == SX_FIELD_VARCHAR)
            for (size_t r = 0; r < n; r++)
                bytes += strlen(*(char **)sx__seg_cell(s, f, r, sizeof(char *))) + 1;
    }
    return bytes;
}
