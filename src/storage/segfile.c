/*
 * segfile.c: segment, delete and index file encoding (see segfile.h and FORMAT-SEGMENT.md).
 *
 * Segment file layout (little-endian):
 *   header: "SXSEG001" | u32 version(1) | u32 n_cols | u64 seg_id | u64 n_rows | u32 crc(header)
 *   per column: u32 name_len | name | u8 type | u32 dim | u64 data_len | u32 crc(data) |
 *               zero padding to the next 64-byte file offset | data
 * The padding lets a reader map the file and use the vector column in place (aligned floats).
 * Invariants: (1) data_len equals the size implied by type, dim and n_rows (VARCHAR: offsets must
 * be non-decreasing and end at the byte length); (2) the file ends right after the last column.
 */
#include "storage/segfile.h"

#include <string.h>

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"

#define SEG_MAGIC "SXSEG001"
#define DEL_MAGIC "SXDEL001"
#define IDX_MAGIC "SXIDX001"
#define MAX_FILE  ((uint64_t)1 << 40)

static size_t fixed_width(sx_field_type t, uint32_t dim)
{
    switch (t) {
    case SX_FIELD_INT64:
    case SX_FIELD_DOUBLE:
        return 8;
    case SX_FIELD_BOOL:
        return 1;
    case SX_FIELD_FLOAT_VECTOR:
        return (size_t)dim * 4;
    default:
        return 0;
    }
}

static void put_header(sx__wbuf *w, const char *magic, uint64_t a, uint64_t b, uint32_t c)
{
    size_t start = w->len;
    sx__wbuf_put(w, magic, 8);
    sx__wbuf_u32(w, 1);
    sx__wbuf_u32(w, c);
    sx__wbuf_u64(w, a);
    sx__wbuf_u64(w, b);
    if (sx__wbuf_ok(w))
        sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
}

static sx_status
get_header(sx__rbuf *r, const char *path, const char *magic, uint64_t *a, uint64_t *b, uint32_t *c)
{
    if (sx__rbuf_left(r) < 36) /* also an empty file, mapped as NULL: no pointer arithmetic */
        return sx__err(SX_ECORRUPT, "%s: bad magic or short header", path);
    const uint8_t *start = r->p + r->off;
    const void *m = sx__rbuf_bytes(r, 8);
    uint32_t version = sx__rbuf_u32(r);
    *c = sx__rbuf_u32(r);
    *a = sx__rbuf_u64(r);
    *b = sx__rbuf_u64(r);
    uint32_t crc = sx__rbuf_u32(r);
    if (!sx__rbuf_ok(r) || memcmp(m, magic, 8) != 0)
        return sx__err(SX_ECORRUPT, "%s: bad magic or short header", path);
    if (crc != sx__crc32c(0, start, 32))
        return sx__err(SX_ECORRUPT, "%s: header checksum mismatch", path);
    if (version != 1)
        return sx__err(SX_ECORRUPT, "%s: unsupported version %u", path, version);
    return SX_OK;
}

sx_status sx__segfile_write(
    const char *path, uint64_t seg_id, uint64_t n_rows, const sx__segcol *cols, size_t n_cols)
{
    sx__wbuf w;
    sx__wbuf_init(&w);
    put_header(&w, SEG_MAGIC, seg_id, n_rows, (uint32_t)n_cols);
    for (size_t i = 0; i < n_cols; i++) {
        const sx__segcol *c = &cols[i];
        sx__wbuf_str(&w, c->name);
        sx__wbuf_u8(&w, (uint8_t)c->type);
        sx__wbuf_u32(&w, c->dim);
        size_t len_off = w.len;
        sx__wbuf_u64(&w, 0);
        sx__wbuf_u32(&w, 0);
        static const uint8_t zeros[64];
        sx__wbuf_put(&w, zeros, (64 - w.len % 64) % 64);
        size_t data_off = w.len;
        if (c->type == SX_FIELD_VARCHAR) {
            char *const *s = c->data;
            uint64_t off = 0;
            sx__wbuf_u64(&w, 0);
            for (uint64_t r = 0; r < n_rows; r++) {
                off += strlen(s[r]);
                sx__wbuf_u64(&w, off);
            }
            for (uint64_t r = 0; r < n_rows; r++)
                sx__wbuf_put(&w, s[r], strlen(s[r]));
        } else if (c->type == SX_FIELD_BOOL) {
            const bool *b = c->data;
            for (uint64_t r = 0; r < n_rows; r++)
                sx__wbuf_u8(&w, b[r] ? 1 : 0);
        } else if (c->type == SX_FIELD_INT64) {
            const int64_t *v = c->data;
            for (uint64_t r = 0; r < n_rows; r++)
                sx__wbuf_i64(&w, v[r]);
        } else if (c->type == SX_FIELD_DOUBLE) {
            const double *v = c->data;
            for (uint64_t r = 0; r < n_rows; r++)
                sx__wbuf_f64(&w, v[r]);
        } else {
            sx__wbuf_f32s(&w, c->data, n_rows * c->dim);
        }
        if (!sx__wbuf_ok(&w))
            break;
        uint64_t dlen = w.len - data_off;
        sx__put_le64(w.data + len_off, dlen);
        sx__put_le32(w.data + len_off + 8, sx__crc32c(0, w.data + data_off, dlen));
    }
    sx_status st;
    if (!sx__wbuf_ok(&w))
        st = sx__err(SX_ENOMEM, "encoding segment %s", path);
    else
        st = sx__fs_write_atomic(path, w.data, w.len);
    sx__wbuf_fini(&w);
    return st;
}

void sx__segcols_free(sx__segcol *cols, size_t n_cols, uint64_t n_rows)
{
    if (!cols)
        return;
    for (size_t i = 0; i < n_cols; i++) {
        sx__free(cols[i].name);
        if (cols[i].type == SX_FIELD_VARCHAR && cols[i].data) {
            char **s = cols[i].data;
            for (uint64_t r = 0; r < n_rows; r++)
                sx__free(s[r]);
            sx__free(s);
        } else if (cols[i].borrowed) {
            /* in a mapping owned by the caller */
        } else if (cols[i].type == SX_FIELD_FLOAT_VECTOR) {
            sx__free_aligned(cols[i].data);
        } else {
            sx__free(cols[i].data);
        }
    }
    sx__free(cols);
}

static sx_status decode_col(
    const char *path, sx__segcol *c, const uint8_t *d, uint64_t dlen, uint64_t n, bool borrow)
{
    if (c->type == SX_FIELD_VARCHAR) {
        if (dlen < (n + 1) * 8 || n > dlen / 8)
            return sx__err(SX_ECORRUPT, "%s: column %s too short", path, c->name);
        uint64_t bytes = dlen - (n + 1) * 8;
        const uint8_t *base = d + (n + 1) * 8;
        char **s = sx__calloc(n ? n : 1, sizeof(char *));
        if (!s)
            return sx__err(SX_ENOMEM, "loading %s", path);
        c->data = s;
        uint64_t prev = sx__le64(d);
        if (prev != 0)
            return sx__err(SX_ECORRUPT, "%s: column %s bad offsets", path, c->name);
        for (uint64_t r = 0; r < n; r++) {
            uint64_t next = sx__le64(d + (r + 1) * 8);
            if (next < prev || next > bytes || next - prev > SX_MAX_VARCHAR)
                return sx__err(SX_ECORRUPT, "%s: column %s bad offsets", path, c->name);
            s[r] = sx__strndup((const char *)base + prev, next - prev);
            if (!s[r])
                return sx__err(SX_ENOMEM, "loading %s", path);
            prev = next;
        }
        if (prev != bytes)
            return sx__err(SX_ECORRUPT, "%s: column %s length mismatch", path, c->name);
        return SX_OK;
    }
    size_t width = fixed_width(c->type, c->dim);
    if (width == 0 || dlen != n * width)
        return sx__err(SX_ECORRUPT, "%s: column %s length mismatch", path, c->name);
    if (borrow && c->type == SX_FIELD_FLOAT_VECTOR && ((uintptr_t)d & 63) == 0) {
        c->data = (void *)d; /* borrowed: read only, like the mapping */
        c->borrowed = true;
        return SX_OK;
    }
    void *out = c->type == SX_FIELD_FLOAT_VECTOR ? sx__malloc_aligned(dlen) : sx__malloc(dlen);
    if (!out)
        return sx__err(SX_ENOMEM, "loading %s", path);
    c->data = out;
    if (c->type == SX_FIELD_BOOL) {
        bool *b = out;
        for (uint64_t r = 0; r < n; r++) {
            if (d[r] > 1)
                return sx__err(SX_ECORRUPT, "%s: column %s bad bool", path, c->name);
            b[r] = d[r] != 0;
        }
    } else {
        memcpy(out, d, dlen); /* little-endian host (buf.c checks) */
    }
    return SX_OK;
}

sx_status sx__segfile_read(const char *path,
                           uint64_t seg_id,
                           const sx__segcol *expect,
                           size_t n_cols,
                           uint64_t *n_rows_out,
                           sx__segcol **cols_out,
                           sx__segmap *map)
{
    void *data = NULL;
    size_t len = 0;
    sx__segcol *cols = NULL;
    uint64_t n_rows = 0;
    sx_status st = sx__fs_map(path, &data, &len);
    if (st != SX_OK)
        return st;
    sx__rbuf r;
    sx__rbuf_init(&r, data, len);
    uint64_t id;
    uint32_t nc;
    st = get_header(&r, path, SEG_MAGIC, &id, &n_rows, &nc);
    if (st != SX_OK)
        goto fail;
    if (id != seg_id || nc != n_cols || n_rows > UINT32_MAX) {
        st = sx__err(SX_ECORRUPT, "%s: header does not match the manifest", path);
        goto fail;
    }
    cols = sx__calloc(n_cols ? n_cols : 1, sizeof *cols);
    if (!cols) {
        st = sx__err(SX_ENOMEM, "loading %s", path);
        goto fail;
    }
    for (size_t i = 0; i < n_cols; i++) {
        bool oom = false;
        cols[i].name = sx__rbuf_str(&r, SX_MAX_NAME, &oom);
        cols[i].type = (sx_field_type)sx__rbuf_u8(&r);
        cols[i].dim = sx__rbuf_u32(&r);
        uint64_t dlen = sx__rbuf_u64(&r);
        uint32_t crc = sx__rbuf_u32(&r);
        if (oom) {
            st = sx__err(SX_ENOMEM, "loading %s", path);
            goto fail;
        }
        size_t pad = (64 - r.off % 64) % 64;
        const uint8_t *padding = sx__rbuf_bytes(&r, pad);
        if (!sx__rbuf_ok(&r) || dlen > sx__rbuf_left(&r)) {
            st = sx__err(SX_ECORRUPT, "%s: truncated column %zu", path, i);
            goto fail;
        }
        for (size_t q = 0; q < pad; q++) {
            if (padding[q] != 0) {
                st = sx__err(SX_ECORRUPT, "%s: column %zu has non-zero padding", path, i);
                goto fail;
            }
        }
        if (strcmp(cols[i].name, expect[i].name) != 0 || cols[i].type != expect[i].type ||
            cols[i].dim != expect[i].dim) {
            st = sx__err(SX_ECORRUPT, "%s: column %zu does not match the schema", path, i);
            goto fail;
        }
        const uint8_t *d = sx__rbuf_bytes(&r, dlen);
        if (sx__crc32c(0, d, dlen) != crc) {
            st = sx__err(SX_ECORRUPT, "%s: column %s checksum mismatch", path, cols[i].name);
            goto fail;
        }
        st = decode_col(path, &cols[i], d, dlen, n_rows, map != NULL);
        if (st != SX_OK)
            goto fail;
    }
    if (sx__rbuf_left(&r) != 0) {
        st = sx__err(SX_ECORRUPT, "%s: trailing bytes", path);
        goto fail;
    }
    bool any_borrowed = false;
    for (size_t i = 0; i < n_cols; i++)
        any_borrowed |= cols[i].borrowed;
    if (map && any_borrowed) {
        map->addr = data;
        map->len = len;
    } else {
        if (map)
            map->addr = NULL, map->len = 0;
        sx__fs_unmap(data, len);
    }
    *n_rows_out = n_rows;
    *cols_out = cols;
    return SX_OK;
fail:
    sx__segcols_free(cols, n_cols, n_rows);
    sx__fs_unmap(data, len);
    return st;
}

sx_status
sx__delfile_write(const char *path, uint64_t seg_id, uint64_t n_rows, const uint64_t *bits)
{
    sx__wbuf w;
    sx__wbuf_init(&w);
    put_header(&w, DEL_MAGIC, seg_id, n_rows, 0);
    size_t start = w.len, words = sx__bits_words(n_rows);
    for (size_t i = 0; i < words; i++)
        sx__wbuf_u64(&w, __atomic_load_n(&bits[i], __ATOMIC_RELAXED));
    if (sx__wbuf_ok(&w))
        sx__wbuf_u32(&w, sx__crc32c(0, w.data + start, w.len - start));
    sx_status st = sx__wbuf_ok(&w) ? sx__fs_write_atomic(path, w.data, w.len)
                                   : sx__err(SX_ENOMEM, "encoding %s", path);
    sx__wbuf_fini(&w);
    return st;
}

sx_status sx__delfile_read(const char *path, uint64_t seg_id, uint64_t n_rows, uint64_t *bits)
{
    void *data = NULL;
    size_t len = 0;
    sx_status st = sx__fs_read_all(path, MAX_FILE, &data, &len);
    if (st != SX_OK)
        return st;
    sx__rbuf r;
    sx__rbuf_init(&r, data, len);
    uint64_t id, n;
    uint32_t c;
    st = get_header(&r, path, DEL_MAGIC, &id, &n, &c);
    if (st == SX_OK && (id != seg_id || n != n_rows))
        st = sx__err(SX_ECORRUPT, "%s: header does not match the segment", path);
    if (st == SX_OK) {
        size_t words = sx__bits_words(n_rows);
        const uint8_t *p = sx__rbuf_bytes(&r, words * 8);
        uint32_t crc = sx__rbuf_u32(&r);
        if (!sx__rbuf_ok(&r) || sx__rbuf_left(&r) != 0 || crc != sx__crc32c(0, p, words * 8)) {
            st = sx__err(SX_ECORRUPT, "%s: truncated or checksum mismatch", path);
        } else {
            for (size_t i = 0; i < words; i++)
                bits[i] = sx__le64(p + i * 8);
            if (n_rows & 63)
                bits[words - 1] &= ((uint64_t)1 << (n_rows & 63)) - 1;
        }
    }
    sx__free(data);
    return st;
}

sx_status sx__idxfile_write(const char *path,
                            const char *type,
                            const char *params,
                            uint64_t n_rows,
                            uint32_t dim,
                            const void *payload,
                            size_t len)
{
    sx__wbuf w;
    sx__wbuf_init(&w);
    put_header(&w, IDX_MAGIC, n_rows, len, dim);
    sx__wbuf_str(&w, type);
    sx__wbuf_str(&w, params);
    sx__wbuf_u32(&w, sx__crc32c(0, payload, len));
    sx__wbuf_put(&w, payload, len);
    sx_status st = sx__wbuf_ok(&w) ? sx__fs_write_atomic(path, w.data, w.len)
                                   : sx__err(SX_ENOMEM, "encoding %s", path);
    sx__wbuf_fini(&w);
    return st;
}

sx_status sx__idxfile_read(const char *path,
                           const char *type,
                           const char *params,
                           uint64_t n_rows,
                           uint32_t dim,
                           void **payload,
                           size_t *len_out)
{
    void *data = NULL;
    size_t len = 0;
    char *t = NULL, *p = NULL;
    sx_status st = sx__fs_read_all(path, MAX_FILE, &data, &len);
    if (st != SX_OK)
        return st;
    sx__rbuf r;
    sx__rbuf_init(&r, data, len);
    uint64_t n, plen;
    uint32_t d;
    st = get_header(&r, path, IDX_MAGIC, &n, &plen, &d);
    if (st != SX_OK)
        goto out;
    t = sx__rbuf_str(&r, 64, NULL);
    p = sx__rbuf_str(&r, 4096, NULL);
    uint32_t crc = sx__rbuf_u32(&r);
    if (!sx__rbuf_ok(&r) || plen != sx__rbuf_left(&r)) {
        st = sx__err(SX_ECORRUPT, "%s: truncated", path);
        goto out;
    }
    const void *body = sx__rbuf_bytes(&r, plen);
    if (crc != sx__crc32c(0, body, plen)) {
        st = sx__err(SX_ECORRUPT, "%s: checksum mismatch", path);
        goto out;
    }
    if (n != n_rows || d != dim || strcmp(t, type) != 0 || strcmp(p, params) != 0) {
        st = sx__err(SX_EINVAL, "%s: index file is for other parameters", path);
        goto out;
    }
    void *copy = sx__malloc(plen);
    if (!copy) {
        st = sx__err(SX_ENOMEM, "loading %s", path);
        goto out;
    }
    memcpy(copy, body, plen);
    *payload = copy;
    *len_out = plen;
out:
    sx__free(t);
    sx__free(p);
    sx__free(data);
    return st;
}
