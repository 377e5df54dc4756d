/*
 * segfile.c: segment, delete and index file encoding (see segfile.h and FORMAT-SEGMENT.md).
 *
 * Segment file layout (little-endian):
 *   header: "SXSEG001" | u32 version(3; 1 and 2 are still read) | u32 n_cols | u64 seg_id |
 *           u64 n_rows | u32 crc(header)
 *   per column: u32 name_len | name | u8 type | u8 flags (version 3 only; 1 = nullable) |
 *               u32 dim | u64 data_len | u32 crc(data) | zero padding to the next 64-byte file
 *               offset | data. A nullable column's data starts with its NULL bitmap:
 *               ceil(n_rows / 64) u64 words (bit r of word r / 64: row r is NULL; bits past
 *               n_rows zero), zero padding to a multiple of 64 bytes, then the values as for
 *               any column (a NULL row's value is 0, 0.0, false or "").
 *   version 2 only, the key block: zero padding to a 64-byte offset | 64-byte meta:
 *               "SXPK" | u32 pk_col (UINT32_MAX: none) | u32 flags (1: sorted) | u32 bloom_k |
 *               u64 n_keys | u64 bloom_words | i64 min | i64 max | u32 crc(rows) |
 *               u32 crc(keys) | u32 crc(bloom) | u32 crc(the 60 bytes before)
 *               then each present array at the next 64-byte offset (zero padding between):
 *               rows u32[n_keys] (absent when sorted), keys i64[n_keys] (INT64, not sorted),
 *               bloom u64[bloom_words]
 * The padding lets a reader map the file and use the columns in place (aligned arrays).
 * Invariants: (1) data_len equals the size implied by type, dim and n_rows, plus the padded bitmap
 * of a nullable column (VARCHAR: offsets must
 * be non-decreasing and end at the byte length); (2) the file ends right after the last column
 * (version 1) or the key block (version 2); (3) the key block's rows are a permutation of
 * [0, n_rows) in key order, equal keys by ascending row, keys[i] is the key of rows[i], and every
 * key is in the Bloom filter (checked in full by the copying read, i.e. `sextant check`; the
 * mapped read checks CRCs and sizes, and lookups bound every row number they use).
 * Bloom filter: bit b of word b/64; key hash h (mix64 of the INT64, or of FNV-1a 64 of the
 * string bytes), h2 = sx__mix64(h ^ 0x9e3779b97f4a7c15) | 1, probe i sets bit (h + i*h2) mod bits.
 * Writing streams (swriter): a bounded buffer, each column's length and CRC patched into its
 * header after its data; tmp file fsynced, renamed, directory fsynced (as sx__fs_write_atomic).
 * Rejected: a separate key file per segment (one more object to upload, GC and keep consistent
 * with the segment; the key block is written and renamed with the segment atomically).
 */
#include "storage/segfile.h"

#include <stdio.h>
#include <string.h>

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "util/hash.h"

#define SEG_MAGIC   "SXSEG001"
#define DEL_MAGIC   "SXDEL001"
#define IDX_MAGIC   "SXIDX001"
#define PK_MAGIC    "SXPK"
#define SEG_VERSION 3
#define MAX_FILE    ((uint64_t)1 << 40)
#define CRC_CHUNK   ((size_t)256 << 10) /* streaming verification buffer */
#define BLOOM_K     7
#define NO_PK       UINT32_MAX

static size_t fixed_width(sx_field_type t, uint32_t dim)
{
    switch (t) {
    case SX_FIELD_INT64:
    case SX_FIELD_DOUBLE:
        return 8;
    case SX_FIELD_BOOL:
        return 1;
    case SX_FIELD_FLOAT_VECTOR:
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR:
        return sx_vector_row_bytes(t, dim);
    default:
        return 0;
    }
}

static void
put_header_v(sx__wbuf *w, const char *magic, uint32_t version, uint64_t a, uint64_t b, uint32_t c)
{
    size_t start = w->len;
    sx__wbuf_put(w, magic, 8);
    sx__wbuf_u32(w, version);
    sx__wbuf_u32(w, c);
    sx__wbuf_u64(w, a);
    sx__wbuf_u64(w, b);
    if (sx__wbuf_ok(w))
        sx__wbuf_u32(w, sx__crc32c(0, w->data + start, w->len - start));
}

static void put_header(sx__wbuf *w, const char *magic, uint64_t a, uint64_t b, uint32_t c)
{
    put_header_v(w, magic, 1, a, b, c);
}

static sx_status get_header_v(sx__rbuf *r,
                              const char *path,
                              const char *magic,
                              uint32_t max_version,
                              uint32_t *version_out,
                              uint64_t *a,
                              uint64_t *b,
                              uint32_t *c)
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
    if (version < 1 || version > max_version)
        return sx__err(SX_ECORRUPT, "%s: unsupported version %u (this build reads 1 to %u)", path,
                       version, max_version);
    *version_out = version;
    return SX_OK;
}

static sx_status
get_header(sx__rbuf *r, const char *path, const char *magic, uint64_t *a, uint64_t *b, uint32_t *c)
{
    uint32_t v;
    return get_header_v(r, path, magic, 1, &v, a, b, c);
}

/* ---------------------------------------------------------------- key block */

static void bloom_add(uint64_t *bits, uint64_t words, uint32_t k, uint64_t h)
{
    uint64_t h2 = sx__mix64(h ^ 0x9e3779b97f4a7c15ull) | 1, mask = words * 64 - 1;
    for (uint32_t i = 0; i < k; i++) {
        uint64_t b = (h + i * h2) & mask;
        bits[b / 64] |= (uint64_t)1 << (b % 64);
    }
}

static bool bloom_has(const sx__segpk *pk, uint64_t h)
{
    if (!pk->bloom || pk->bloom_words == 0)
        return true;
    uint64_t h2 = sx__mix64(h ^ 0x9e3779b97f4a7c15ull) | 1, mask = pk->bloom_words * 64 - 1;
    for (uint32_t i = 0; i < pk->bloom_k; i++) {
        uint64_t b = (h + i * h2) & mask;
        if (!(pk->bloom[b / 64] & ((uint64_t)1 << (b % 64))))
            return false;
    }
    return true;
}

static uint64_t bloom_words_for(uint64_t n)
{
    uint64_t want = (n * 10 + 63) / 64, w = 8;
    while (w < want)
        w *= 2;
    return w;
}

/* Stable merge sort of rows[0, n) by key (ints or strs), tmp of n entries. */
static bool row_less(const int64_t *ints, char *const *strs, uint32_t a, uint32_t b)
{
    if (ints)
        return ints[a] < ints[b];
    if (!strs)
        return false;
    return strcmp(strs[a], strs[b]) < 0;
}

static void
sort_rows(const int64_t *ints, char *const *strs, uint32_t *rows, uint32_t *tmp, size_t n)
{
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = row_less(ints, strs, rows[j], rows[i]) ? rows[j++] : rows[i++];
            while (i < mid)
                tmp[o++] = rows[i++];
            while (j < hi)
                tmp[o++] = rows[j++];
        }
        memcpy(rows, tmp, n * sizeof *rows);
    }
}

sx_status
sx__segpk_build(sx_field_type type, uint32_t col, const void *data, uint64_t n, sx__segpk *out)
{
    memset(out, 0, sizeof *out);
    if ((type != SX_FIELD_INT64 && type != SX_FIELD_VARCHAR) || n > UINT32_MAX)
        return sx__err(SX_EINVAL, "key block: unsupported key type or too many rows");
    const int64_t *ints = type == SX_FIELD_INT64 ? data : NULL;
    char *const *strs = type == SX_FIELD_VARCHAR ? data : NULL;
    if (n && !ints && !strs)
        return sx__err(SX_EINVAL, "key block: no key column");
    bool sorted = true;
    for (uint64_t r = 1; sorted && r < n; r++)
        sorted = !row_less(ints, strs, (uint32_t)r, (uint32_t)(r - 1));
    uint64_t words = bloom_words_for(n);
    size_t rows_bytes = sorted ? 0 : (size_t)n * 4,
           keys_bytes = sorted || !ints ? 0 : (size_t)n * 8;
    size_t rows_at = 0, keys_at = (rows_bytes + 7) & ~(size_t)7, bloom_at = keys_at + keys_bytes;
    size_t total = bloom_at + (size_t)words * 8;
    uint8_t *mem = sx__calloc(1, total);
    uint32_t *tmp = sorted ? NULL : sx__malloc((size_t)n * 4 + 4);
    if (!mem || (!sorted && !tmp)) {
        sx__free(mem);
        sx__free(tmp);
        return sx__err(SX_ENOMEM, "building a segment's key index");
    }
    uint64_t *bloom = (uint64_t *)(void *)(mem + bloom_at);
    for (uint64_t r = 0; r < n; r++)
        bloom_add(bloom, words, BLOOM_K,
                  ints   ? sx__mix64((uint64_t)ints[r])
                  : strs ? sx__hash_str(strs[r])
                         : 0);
    if (!sorted) {
        uint32_t *rows = (uint32_t *)(void *)(mem + rows_at);
        for (uint64_t r = 0; r < n; r++)
            rows[r] = (uint32_t)r;
        sort_rows(ints, strs, rows, tmp, (size_t)n);
        out->rows = rows;
        if (ints) {
            int64_t *keys = (int64_t *)(void *)(mem + keys_at);
            for (uint64_t i = 0; i < n; i++)
                keys[i] = ints[rows[i]];
            out->keys = keys;
        }
    }
    sx__free(tmp);
    out->col = col;
    out->type = type;
    out->n = n;
    out->sorted = sorted;
    out->bloom = bloom;
    out->bloom_words = words;
    out->bloom_k = BLOOM_K;
    if (ints && n) {
        int64_t lo = ints[0], hi = ints[0];
        for (uint64_t r = 1; r < n; r++) {
            lo = ints[r] < lo ? ints[r] : lo;
            hi = ints[r] > hi ? ints[r] : hi;
        }
        out->min = lo;
        out->max = hi;
    }
    out->owned = mem;
    out->owned_bytes = total;
    return SX_OK;
}

void sx__segpk_fini(sx__segpk *pk)
{
    if (!pk)
        return;
    sx__free(pk->owned);
    memset(pk, 0, sizeof *pk);
    pk->col = NO_PK;
}

size_t sx__segpk_find_i(const sx__segpk *pk, const int64_t *col, int64_t k, size_t *lo_out)
{
    if (pk->col == NO_PK || pk->n == 0 || k < pk->min || k > pk->max ||
        !bloom_has(pk, sx__mix64((uint64_t)k)))
        return 0;
    const int64_t *keys = pk->sorted ? col : pk->keys;
    size_t lo = 0, hi = (size_t)pk->n;
    while (lo < hi) { /* first position with key >= k */
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < pk->n && keys[end] == k) {
        if (sx__segpk_row(pk, end) >= pk->n)
            return 0;
        end++;
    }
    *lo_out = lo;
    return end - lo;
}

size_t sx__segpk_find_s(const sx__segpk *pk, const char *const *col, const char *k, size_t *lo_out)
{
    if (pk->col == NO_PK || pk->n == 0 || !bloom_has(pk, sx__hash_str(k)))
        return 0;
    size_t lo = 0, hi = (size_t)pk->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t r = sx__segpk_row(pk, mid);
        if (r >= pk->n)
            return 0;
        if (strcmp(col[r], k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    for (; end < pk->n; end++) {
        uint32_t r = sx__segpk_row(pk, end);
        if (r >= pk->n)
            return 0;
        if (strcmp(col[r], k) != 0)
            break;
    }
    *lo_out = lo;
    return end - lo;
}

static void put_pad(sx__wbuf *w)
{
    static const uint8_t zeros[64];
    sx__wbuf_put(w, zeros, (64 - w->len % 64) % 64);
}

/* The key block of version 2 (see the file comment); pk NULL: a block naming no column. */
static void put_keyblock(sx__wbuf *w, const sx__segpk *pk)
{
    put_pad(w);
    size_t meta = w->len;
    uint64_t n = pk ? pk->n : 0;
    sx__wbuf_put(w, PK_MAGIC, 4);
    sx__wbuf_u32(w, pk ? pk->col : NO_PK);
    sx__wbuf_u32(w, pk && pk->sorted ? 1 : 0);
    sx__wbuf_u32(w, pk ? pk->bloom_k : 0);
    sx__wbuf_u64(w, n);
    sx__wbuf_u64(w, pk ? pk->bloom_words : 0);
    sx__wbuf_i64(w, pk ? pk->min : 0);
    sx__wbuf_i64(w, pk ? pk->max : 0);
    size_t crcs = w->len;
    for (int i = 0; i < 4; i++)
        sx__wbuf_u32(w, 0);
    if (!sx__wbuf_ok(w))
        return;
    uint32_t c[3] = { 0, 0, 0 };
    const void *arr[3] = { pk ? pk->rows : NULL, pk ? pk->keys : NULL, pk ? pk->bloom : NULL };
    size_t len[3] = { (size_t)n * 4, (size_t)n * 8, pk ? (size_t)pk->bloom_words * 8 : 0 };
    for (int i = 0; i < 3; i++) {
        if (!arr[i])
            continue;
        put_pad(w);
        size_t at = w->len;
        if (i == 0)
            for (uint64_t j = 0; j < n; j++)
                sx__wbuf_u32(w, pk->rows[j]);
        else if (i == 1)
            for (uint64_t j = 0; j < n; j++)
                sx__wbuf_i64(w, pk->keys[j]);
        else
            for (uint64_t j = 0; j < pk->bloom_words; j++)
                sx__wbuf_u64(w, pk->bloom[j]);
        if (!sx__wbuf_ok(w))
            return;
        c[i] = sx__crc32c(0, w->data + at, len[i]);
    }
    sx__put_le32(w->data + crcs, c[0]);
    sx__put_le32(w->data + crcs + 4, c[1]);
    sx__put_le32(w->data + crcs + 8, c[2]);
    sx__put_le32(w->data + crcs + 12, sx__crc32c(0, w->data + meta, 60));
}

/* ---------------------------------------------------------------- segment files */

/* A streaming writer of `<path>.tmp`: bytes gather in a bounded buffer (WCHUNK) and are appended
 * to the file, so a segment is never encoded whole in the heap; a column's length and CRC, known
 * only after its data, are patched into its header (in the buffer, or with pwrite when that part
 * is already written). The first error sticks. */
#define WCHUNK ((size_t)1 << 20)

typedef struct swriter {
    sx__file *f;
    sx__wbuf w;
    uint64_t off; /* file offset of w.data[0] */
    sx_status st;
    const char *path;
} swriter;

static uint64_t sw_pos(const swriter *s)
{
    return s->off + s->w.len;
}

static void sw_flush(swriter *s)
{
    if (s->st != SX_OK)
        return;
    if (!sx__wbuf_ok(&s->w)) {
        s->st = sx__err(SX_ENOMEM, "encoding segment %s", s->path);
        return;
    }
    if (s->w.len == 0)
        return;
    s->st = sx__file_append(s->f, s->w.data, s->w.len);
    s->off += s->w.len;
    sx__wbuf_reset(&s->w);
}

/* Appends n bytes, folding them into *crc when crc != NULL. */
static void sw_put(swriter *s, const void *p, size_t n, uint32_t *crc)
{
    const uint8_t *b = p;
    while (n > 0 && s->st == SX_OK) {
        size_t room = WCHUNK - (s->w.len < WCHUNK ? s->w.len : WCHUNK);
        size_t k = n < room ? n : room;
        if (crc)
            *crc = sx__crc32c(*crc, b, k);
        sx__wbuf_put(&s->w, b, k);
        b += k;
        n -= k;
        if (s->w.len >= WCHUNK)
            sw_flush(s);
    }
}

static void sw_pad(swriter *s)
{
    static const uint8_t zeros[64];
    sw_put(s, zeros, (size_t)((64 - sw_pos(s) % 64) % 64), NULL);
}

/* Writes 12 bytes (u64 len, u32 crc) at file offset at, which may still be in the buffer. */
static void sw_patch(swriter *s, uint64_t at, uint64_t len, uint32_t crc)
{
    uint8_t b[12];
    sx__put_le64(b, len);
    sx__put_le32(b + 8, crc);
    if (s->st != SX_OK)
        return;
    if (at >= s->off && sx__wbuf_ok(&s->w)) {
        memcpy(s->w.data + (at - s->off), b, 12);
        return;
    }
    sw_flush(s); /* the field may straddle the buffer's start: all of it in the file first */
    if (s->st == SX_OK)
        s->st = sx__file_pwrite(s->f, b, 12, at);
}

/* Rows [r, r + *m) of column c are contiguous at the returned address (*m: up to the end of the
 * chunk holding row r). */
static const char *col_rows(const sx__segcol *c, uint64_t r, uint64_t n_rows, size_t w, uint64_t *m)
{
    if (c->chunk_ends) {
        void *const *ch = c->data;
        size_t j = 0;
        while (c->chunk_ends[j] <= r) /* few chunks: a linear scan */
            j++;
        uint64_t first = j ? c->chunk_ends[j - 1] : 0;
        uint64_t end = c->chunk_ends[j] < n_rows ? c->chunk_ends[j] : n_rows;
        *m = end - r;
        return (const char *)ch[j] + (r - first) * w;
    }
    if (!c->chunk_rows) {
        *m = n_rows - r;
        return (const char *)c->data + r * w;
    }
    void *const *ch = c->data;
    uint64_t in = r % c->chunk_rows;
    *m = c->chunk_rows - in < n_rows - r ? c->chunk_rows - in : n_rows - r;
    return (const char *)ch[r / c->chunk_rows] + in * w;
}

/* Bytes of a nullable column's bitmap, padding included. */
static uint64_t nulls_bytes(uint64_t n_rows)
{
    return (sx__bits_words(n_rows) * 8 + 63) & ~(uint64_t)63;
}

/* Bit r of a nullable column's NULL bits, in the layout of its data (see sx__segcol). */
static bool null_bit(const sx__segcol *c, uint64_t r, uint64_t n_rows)
{
    if (!c->nulls)
        return false;
    const uint64_t *w;
    uint64_t i;
    if (c->chunk_ends) {
        size_t j = 0;
        while (c->chunk_ends[j] <= r)
            j++;
        w = ((const uint64_t *const *)c->nulls)[j];
        i = r - (j ? c->chunk_ends[j - 1] : 0);
    } else if (c->chunk_rows) {
        w = ((const uint64_t *const *)c->nulls)[r / c->chunk_rows];
        i = r % c->chunk_rows;
    } else {
        w = c->nulls;
        i = r;
    }
    (void)n_rows;
    return w && (w[i / 64] >> (i % 64) & 1);
}

/* A nullable column's bitmap with its padding. */
static void sw_nulls(swriter *s, const sx__segcol *c, uint64_t n_rows, uint32_t *crc)
{
    uint64_t words = sx__bits_words(n_rows);
    for (uint64_t wi = 0; wi < words; wi++) {
        uint64_t word = 0;
        for (uint64_t b = 0; b < 64 && wi * 64 + b < n_rows; b++)
            if (null_bit(c, wi * 64 + b, n_rows))
                word |= (uint64_t)1 << b;
        uint8_t le[8];
        sx__put_le64(le, word);
        sw_put(s, le, 8, crc);
    }
    static const uint8_t zeros[64];
    sw_put(s, zeros, (size_t)(nulls_bytes(n_rows) - words * 8), crc);
}

/* One column's data, encoded as FORMAT-SEGMENT.md says, in bounded pieces. */
static void sw_column(swriter *s, const sx__segcol *c, uint64_t n_rows, uint32_t *crc)
{
    uint8_t tmp[4096];
    size_t k = 0;
    uint64_t m = 0;
    if (c->nullable)
        sw_nulls(s, c, n_rows, crc);
    if (c->type == SX_FIELD_VARCHAR) {
        uint64_t off = 0;
        sx__put_le64(tmp, 0);
        k = 8;
        for (uint64_t r = 0; r < n_rows; r += m) {
            char *const *str =
                (char *const *)(const void *)col_rows(c, r, n_rows, sizeof(char *), &m);
            for (uint64_t j = 0; j < m; j++) {
                off += strlen(str[j]);
                sx__put_le64(tmp + k, off);
                k += 8;
                if (k == sizeof tmp) {
                    sw_put(s, tmp, k, crc);
                    k = 0;
                }
            }
        }
        sw_put(s, tmp, k, crc);
        for (uint64_t r = 0; r < n_rows; r += m) {
            char *const *str =
                (char *const *)(const void *)col_rows(c, r, n_rows, sizeof(char *), &m);
            for (uint64_t j = 0; j < m; j++)
                sw_put(s, str[j], strlen(str[j]), crc);
        }
    } else if (c->type == SX_FIELD_BOOL) {
        for (uint64_t r = 0; r < n_rows; r += m) {
            const bool *bo = (const bool *)(const void *)col_rows(c, r, n_rows, sizeof(bool), &m);
            for (uint64_t j = 0; j < m; j++) {
                tmp[k++] = bo[j] ? 1 : 0;
                if (k == sizeof tmp) {
                    sw_put(s, tmp, k, crc);
                    k = 0;
                }
            }
        }
        sw_put(s, tmp, k, crc);
    } else {
        /* INT64, DOUBLE, FLOAT_VECTOR: the host is little-endian (buf.c checks), so the arrays'
         * bytes are their encoding */
        size_t w = fixed_width(c->type, c->dim);
        for (uint64_t r = 0; r < n_rows; r += m) {
            const char *p = col_rows(c, r, n_rows, w, &m);
            sw_put(s, p, (size_t)m * w, crc);
        }
    }
}

sx_status sx__segfile_write(
    const char *path, uint64_t seg_id, uint64_t n_rows, const sx__segcol *cols, size_t n_cols)
{
    sx__segpk pk;
    memset(&pk, 0, sizeof pk);
    bool has_pk = false;
    for (size_t i = 0; i < n_cols && !has_pk; i++) {
        if (!cols[i].is_primary)
            continue;
        const void *keys = cols[i].data;
        void *gathered = NULL; /* a chunked key column, made contiguous for the sort */
        if (cols[i].chunk_rows || cols[i].chunk_ends) {
            size_t w = cols[i].type == SX_FIELD_INT64 ? sizeof(int64_t) : sizeof(char *);
            gathered = sx__malloc(n_rows ? (size_t)n_rows * w : 1);
            if (!gathered)
                return sx__err(SX_ENOMEM, "encoding segment %s", path);
            uint64_t m = 0;
            for (uint64_t r = 0; r < n_rows; r += m) {
                const char *p = col_rows(&cols[i], r, n_rows, w, &m);
                memcpy((char *)gathered + r * w, p, (size_t)m * w);
            }
            keys = gathered;
        }
        sx_status st = sx__segpk_build(cols[i].type, (uint32_t)i, keys, n_rows, &pk);
        sx__free(gathered);
        if (st != SX_OK)
            return st;
        has_pk = true;
    }
    size_t plen = strlen(path);
    char *tmp = sx__malloc(plen + sizeof ".tmp"), *dir = sx__strdup(path);
    swriter s = { NULL, { 0 }, 0, SX_OK, path };
    sx__wbuf_init(&s.w);
    bool made_tmp = false;
    if (!tmp || !dir) {
        s.st = sx__err(SX_ENOMEM, "write %s: out of memory", path);
        goto out;
    }
    (void)snprintf(tmp, plen + sizeof ".tmp", "%s.tmp", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    else
        (void)snprintf(dir, plen + 1, "%s", slash ? "/" : ".");
    s.st = sx__file_open(tmp, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &s.f);
    if (s.st != SX_OK)
        goto out;
    made_tmp = true;
    put_header_v(&s.w, SEG_MAGIC, SEG_VERSION, seg_id, n_rows, (uint32_t)n_cols);
    for (size_t i = 0; i < n_cols && s.st == SX_OK; i++) {
        const sx__segcol *c = &cols[i];
        sx__wbuf_str(&s.w, c->name);
        sx__wbuf_u8(&s.w, (uint8_t)c->type);
        sx__wbuf_u8(&s.w, c->nullable ? 1 : 0);
        sx__wbuf_u32(&s.w, c->dim);
        uint64_t len_at = sw_pos(&s);
        static const uint8_t zeros[12];
        sw_put(&s, zeros, 12, NULL);
        sw_pad(&s);
        uint64_t data_at = sw_pos(&s);
        uint32_t crc = 0;
        sw_column(&s, c, n_rows, &crc);
        sw_patch(&s, len_at, sw_pos(&s) - data_at, crc);
    }
    if (s.st == SX_OK) {
        sw_pad(&s); /* the key block's own padding is then relative to an aligned start */
        sx__wbuf kb;
        sx__wbuf_init(&kb);
        put_keyblock(&kb, has_pk ? &pk : NULL);
        if (!sx__wbuf_ok(&kb))
            s.st = sx__err(SX_ENOMEM, "encoding segment %s", path);
        else
            sw_put(&s, kb.data, kb.len, NULL);
        sx__wbuf_fini(&kb);
    }
    sw_flush(&s);
    if (s.st == SX_OK)
        s.st = sx__file_sync(s.f);
    sx_status cst = sx__file_close(s.f);
    s.f = NULL;
    if (s.st == SX_OK)
        s.st = cst;
    if (s.st != SX_OK)
        goto out;
    s.st = sx__fs_rename(tmp, path);
    if (s.st != SX_OK)
        goto out;
    made_tmp = false;
    /* The rename is done; a failed directory fsync means it may not survive a crash. */
    s.st = sx__fs_sync_dir(dir);
out:
    if (s.f)
        sx__ignore(sx__file_close(s.f));
    if (made_tmp)
        sx__ignore(sx__fs_unlink(tmp)); /* best effort: a stale tmp is truncated next time */
    sx__wbuf_fini(&s.w);
    sx__segpk_fini(&pk);
    sx__free(tmp);
    sx__free(dir);
    return s.st;
}

void sx__segcols_free(sx__segcol *cols, size_t n_cols, uint64_t n_rows)
{
    if (!cols)
        return;
    for (size_t i = 0; i < n_cols; i++) {
        sx__free(cols[i].name);
        if (!cols[i].nulls_borrowed)
            sx__free(cols[i].nulls);
        if (cols[i].type == SX_FIELD_VARCHAR && cols[i].data) {
            char **s = cols[i].data;
            for (uint64_t r = 0; r < n_rows; r++)
                sx__free(s[r]);
            sx__free(s);
        } else if (cols[i].borrowed) {
            /* in a mapping owned by the caller */
        } else if (sx_field_is_vector(cols[i].type)) {
            sx__free_aligned(cols[i].data);
        } else {
            sx__free(cols[i].data);
        }
    }
    sx__free(cols);
}

/* Where the CRCs are computed: from the mapping (copying read) or by streaming pread through a
 * bounded buffer (mapped read: the mapping's pages stay untouched, the heap holds CRC_CHUNK). */
typedef struct verifier {
    const char *path;
    sx__file *f;  /* NULL: compute from the mapping */
    uint8_t *buf; /* CRC_CHUNK bytes when f */
} verifier;

/* CRC of [off, off + len) of the file at `base` (the mapping), continuing *out; with bools, also
 * every byte <= 1. */
static sx_status crc_range(
    const verifier *v, const uint8_t *base, uint64_t off, uint64_t len, bool bools, uint32_t *out)
{
    uint32_t c = *out; /* the CRC so far: a range may continue an earlier one */
    if (!v->f) {
        const uint8_t *d = base + off;
        for (uint64_t i = 0; bools && i < len; i++)
            if (d[i] > 1)
                return sx__err(SX_ECORRUPT, "%s: bad bool", v->path);
        *out = sx__crc32c(c, d, len);
        return SX_OK;
    }
    for (uint64_t done = 0; done < len;) {
        size_t want = len - done < CRC_CHUNK ? (size_t)(len - done) : CRC_CHUNK, got = 0;
        sx_status st = sx__file_pread(v->f, v->buf, want, off + done, &got);
        if (st != SX_OK)
            return st;
        if (got != want)
            return sx__err(SX_ECORRUPT, "%s: truncated while verifying", v->path);
        for (size_t i = 0; bools && i < got; i++)
            if (v->buf[i] > 1)
                return sx__err(SX_ECORRUPT, "%s: bad bool", v->path);
        c = sx__crc32c(c, v->buf, got);
        done += got;
    }
    *out = c;
    return SX_OK;
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
    if (borrow && ((uintptr_t)d & 63) == 0) {
        /* borrowed: read only, like the mapping; BOOL bytes were checked (0/1) while verifying */
        c->data = (void *)d;
        c->borrowed = true;
        return SX_OK;
    }
    void *out = sx_field_is_vector(c->type) ? sx__malloc_aligned(dlen) : sx__malloc(dlen);
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

/* A nullable column's bitmap at d (64-byte aligned in the file): borrowed from the mapping
 * (untouched: the CRC was verified by streaming; readers mask bits past the rows), or copied,
 * checking that bits past n_rows and the padding are zero (the offline check). */
static sx_status
decode_nulls(const char *path, sx__segcol *c, const uint8_t *d, uint64_t n, bool borrow)
{
    uint64_t words = sx__bits_words(n);
    if (borrow && ((uintptr_t)d & 63) == 0) {
        c->nulls = (void *)d;
        c->nulls_borrowed = true;
        return SX_OK;
    }
    uint64_t *w = sx__calloc(words + 1, sizeof(uint64_t));
    if (!w)
        return sx__err(SX_ENOMEM, "loading %s", path);
    for (uint64_t i = 0; i < words; i++)
        w[i] = sx__le64(d + i * 8);
    if (words && (n % 64) && (w[words - 1] >> (n % 64)) != 0) {
        sx__free(w);
        return sx__err(SX_ECORRUPT, "%s: column %s has NULL bits past its rows", path, c->name);
    }
    for (uint64_t b = words * 8; b < nulls_bytes(n); b++)
        if (d[b] != 0) {
            sx__free(w);
            return sx__err(SX_ECORRUPT, "%s: column %s has a bad NULL bitmap", path, c->name);
        }
    c->nulls = w;
    return SX_OK;
}

/* Reads the file's structure (headers, padding, key block meta) at an offset: with a verifier
 * that streams (mapped read) through pread into tmp, so no page of the mapping is touched (a
 * touched page may map a whole large folio of page cache, megabytes, into the process); else from
 * the mapping. The pointer returned is valid until the next cur_get. */
typedef struct cursor {
    const verifier *v;
    const uint8_t *base; /* the mapping */
    uint64_t off, len;
    uint8_t tmp[SX_MAX_NAME + 64];
} cursor;

/* n bytes at the cursor, moving it; NULL with *st = SX_ECORRUPT (past the end) or the read's
 * error. */
static const uint8_t *cur_get(cursor *c, uint64_t n, const char *what, sx_status *st)
{
    if (n > c->len - c->off) {
        *st = sx__err(SX_ECORRUPT, "%s: truncated %s", c->v->path, what);
        return NULL;
    }
    const uint8_t *p = c->base + c->off;
    if (c->v->f) {
        size_t got = 0;
        if (n > sizeof c->tmp) {
            *st = sx__err(SX_ECORRUPT, "%s: bad %s", c->v->path, what);
            return NULL;
        }
        *st = sx__file_pread(c->v->f, c->tmp, (size_t)n, c->off, &got);
        if (*st != SX_OK)
            return NULL;
        if (got != n) {
            *st = sx__err(SX_ECORRUPT, "%s: truncated %s", c->v->path, what);
            return NULL;
        }
        p = c->tmp;
    }
    c->off += n;
    *st = SX_OK;
    return p;
}

static sx_status skip_pad(cursor *c, const char *what)
{
    sx_status st = SX_OK;
    size_t pad = (size_t)((64 - c->off % 64) % 64);
    const uint8_t *p = cur_get(c, pad, what, &st);
    if (!p)
        return st;
    for (size_t q = 0; q < pad; q++)
        if (p[q] != 0)
            return sx__err(SX_ECORRUPT, "%s: %s has non-zero padding", c->v->path, what);
    return SX_OK;
}

/* Parses and verifies (CRCs, sizes) the key block at the cursor into *pk, pointing into the
 * mapping. */
static sx_status read_keyblock(cursor *cur,
                               const sx__segcol *cols,
                               const sx__segcol *expect,
                               size_t n_cols,
                               uint64_t n_rows,
                               sx__segpk *pk)
{
    const char *path = cur->v->path;
    sx_status st = skip_pad(cur, "key block");
    if (st != SX_OK)
        return st;
    uint8_t meta[64];
    const uint8_t *mp = cur_get(cur, 64, "key block", &st);
    if (!mp)
        return st;
    memcpy(meta, mp, 64);
    if (memcmp(meta, PK_MAGIC, 4) != 0 || sx__le32(meta + 60) != sx__crc32c(0, meta, 60))
        return sx__err(SX_ECORRUPT, "%s: key block header is damaged", path);
    uint32_t col = sx__le32(meta + 4), flags = sx__le32(meta + 8), k = sx__le32(meta + 12);
    uint64_t n = sx__le64(meta + 16), words = sx__le64(meta + 24);
    size_t want_pk = NO_PK;
    for (size_t i = 0; i < n_cols; i++)
        if (expect[i].is_primary)
            want_pk = i;
    if (col == NO_PK) { /* written without a key column flagged: the caller builds one */
        if (n || words || flags)
            return sx__err(SX_ECORRUPT, "%s: key block does not match the schema", path);
        pk->col = NO_PK;
        return SX_OK;
    }
    if (col >= n_cols || (want_pk != NO_PK && col != want_pk) || n != n_rows || flags > 1 ||
        (cols[col].type != SX_FIELD_INT64 && cols[col].type != SX_FIELD_VARCHAR) || k == 0 ||
        k > 32 || words == 0 || (words & (words - 1)) != 0 || words > ((uint64_t)1 << 34))
        return sx__err(SX_ECORRUPT, "%s: key block does not match the schema", path);
    bool sorted = flags & 1;
    bool ints = cols[col].type == SX_FIELD_INT64;
    uint64_t len[3] = { sorted ? 0 : n * 4, sorted || !ints ? 0 : n * 8, words * 8 };
    const uint8_t *arr[3] = { NULL, NULL, NULL };
    for (int i = 0; i < 3; i++) {
        if (len[i] == 0 && i < 2)
            continue;
        st = skip_pad(cur, "key block");
        if (st != SX_OK)
            return st;
        if (len[i] > cur->len - cur->off)
            return sx__err(SX_ECORRUPT, "%s: truncated key block", path);
        arr[i] = cur->base + cur->off;
        uint32_t c = 0;
        st = crc_range(cur->v, cur->base, cur->off, len[i], false, &c);
        if (st != SX_OK)
            return st;
        if (c != sx__le32(meta + 48 + (size_t)i * 4))
            return sx__err(SX_ECORRUPT, "%s: key block checksum mismatch", path);
        cur->off += len[i];
    }
    memset(pk, 0, sizeof *pk);
    pk->col = col;
    pk->type = cols[col].type;
    pk->n = n;
    pk->sorted = sorted;
    pk->rows = (const uint32_t *)(const void *)arr[0];
    pk->keys = (const int64_t *)(const void *)arr[1];
    pk->bloom = (const uint64_t *)(const void *)arr[2];
    pk->bloom_words = words;
    pk->bloom_k = k;
    pk->min = (int64_t)sx__le64(meta + 32);
    pk->max = (int64_t)sx__le64(meta + 40);
    return SX_OK;
}

/* The full check of a key block against the decoded key column (invariant 3). */
static sx_status verify_keyblock(const char *path, const sx__segpk *pk, const void *data)
{
    const int64_t *ints = pk->type == SX_FIELD_INT64 ? data : NULL;
    char *const *strs = pk->type == SX_FIELD_VARCHAR ? data : NULL;
    uint64_t n = pk->n;
    if (n && !ints && !strs)
        return sx__err(SX_ECORRUPT, "%s: key block has no key column", path);
    uint64_t *seen = sx__calloc(sx__bits_words(n) + 1, 8);
    if (!seen)
        return sx__err(SX_ENOMEM, "checking %s", path);
    sx_status st = SX_OK;
    for (uint64_t i = 0; st == SX_OK && i < n; i++) {
        uint32_t r = sx__segpk_row(pk, i);
        if (r >= n || sx__bits_test(seen, r)) {
            st = sx__err(SX_ECORRUPT, "%s: key block rows are not a permutation", path);
            break;
        }
        sx__bits_set(seen, r);
        if (pk->keys && ints && pk->keys[i] != ints[r])
            st = sx__err(SX_ECORRUPT, "%s: key block keys differ from the key column", path);
        else if (ints && (ints[r] < pk->min || ints[r] > pk->max))
            st = sx__err(SX_ECORRUPT, "%s: key block key range is wrong", path);
        else if (!bloom_has(pk, ints   ? sx__mix64((uint64_t)ints[r])
                                : strs ? sx__hash_str(strs[r])
                                       : 0))
            st = sx__err(SX_ECORRUPT, "%s: key block Bloom filter misses a key", path);
        if (st == SX_OK && i > 0) {
            uint32_t p = sx__segpk_row(pk, i - 1);
            if (row_less(ints, strs, r, p) || (!row_less(ints, strs, p, r) && p > r))
                st = sx__err(SX_ECORRUPT, "%s: key block is not in key order", path);
        }
    }
    sx__free(seen);
    return st;
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
    verifier v = { path, NULL, NULL };
    sx__segpk pk;
    memset(&pk, 0, sizeof pk);
    pk.col = NO_PK;
    cursor *cur = NULL;
    sx_status st = sx__fs_map(path, &data, &len);
    if (st != SX_OK)
        return st;
    cur = sx__calloc(1, sizeof *cur);
    if (!cur) {
        st = sx__err(SX_ENOMEM, "loading %s", path);
        goto fail;
    }
    if (map) {
        v.buf = sx__malloc(CRC_CHUNK);
        st = v.buf ? sx__file_open(path, SX__F_READ, &v.f) : sx__err(SX_ENOMEM, "loading %s", path);
        if (st != SX_OK)
            goto fail;
    }
    cur->v = &v;
    cur->base = data;
    cur->len = len;
    if (len < 36) { /* also an empty file, mapped as NULL: no pointer arithmetic */
        st = sx__err(SX_ECORRUPT, "%s: bad magic or short header", path);
        goto fail;
    }
    const uint8_t *hp = cur_get(cur, 36, "header", &st);
    if (!hp)
        goto fail;
    sx__rbuf r;
    sx__rbuf_init(&r, hp, 36);
    uint64_t id;
    uint32_t nc, version = 0;
    st = get_header_v(&r, path, SEG_MAGIC, SEG_VERSION, &version, &id, &n_rows, &nc);
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
        const uint8_t *p = cur_get(cur, 4, "column header", &st);
        if (!p)
            goto fail;
        uint32_t nl = sx__le32(p);
        if (nl > SX_MAX_NAME) {
            st = sx__err(SX_ECORRUPT, "%s: truncated column %zu", path, i);
            goto fail;
        }
        size_t fl = version >= 3 ? 1 : 0; /* the flags byte */
        p = cur_get(cur, (uint64_t)nl + 17 + fl, "column header", &st);
        if (!p)
            goto fail;
        cols[i].name = sx__strndup((const char *)p, nl);
        if (!cols[i].name) {
            st = sx__err(SX_ENOMEM, "loading %s", path);
            goto fail;
        }
        cols[i].type = (sx_field_type)p[nl];
        uint8_t cflags = fl ? p[nl + 1] : 0;
        cols[i].nullable = (cflags & 1) != 0;
        cols[i].dim = sx__le32(p + nl + 1 + fl);
        uint64_t dlen = sx__le64(p + nl + 5 + fl);
        uint32_t crc = sx__le32(p + nl + 13 + fl);
        if (cflags & ~1u) {
            st = sx__err(SX_ECORRUPT, "%s: column %zu has unknown flags 0x%x", path, i, cflags);
            goto fail;
        }
        st = skip_pad(cur, "column");
        if (st != SX_OK)
            goto fail;
        if (dlen > cur->len - cur->off) {
            st = sx__err(SX_ECORRUPT, "%s: truncated column %zu", path, i);
            goto fail;
        }
        if (strcmp(cols[i].name, expect[i].name) != 0 || cols[i].type != expect[i].type ||
            cols[i].dim != expect[i].dim || cols[i].nullable != expect[i].nullable) {
            st = sx__err(SX_ECORRUPT, "%s: column %zu does not match the schema", path, i);
            goto fail;
        }
        uint64_t off = cur->off;
        const uint8_t *d = cur->base + off;
        uint32_t got = 0;
        uint64_t nb = cols[i].nullable ? nulls_bytes(n_rows) : 0;
        if (nb > dlen) {
            st = sx__err(SX_ECORRUPT, "%s: column %s too short", path, cols[i].name);
            goto fail;
        }
        /* VARCHAR is decoded from the mapping (its strings go to the heap), so its CRC is too */
        verifier cv = v;
        if (cols[i].type == SX_FIELD_VARCHAR)
            cv.f = NULL;
        st = crc_range(&cv, cur->base, off, nb, false, &got);
        if (st == SX_OK)
            st =
                crc_range(&cv, cur->base, off + nb, dlen - nb, cols[i].type == SX_FIELD_BOOL, &got);
        if (st != SX_OK)
            goto fail;
        if (got != crc) {
            st = sx__err(SX_ECORRUPT, "%s: column %s checksum mismatch", path, cols[i].name);
            goto fail;
        }
        if (cols[i].nullable) {
            st = decode_nulls(path, &cols[i], d, n_rows, map != NULL);
            if (st != SX_OK)
                goto fail;
        }
        st = decode_col(path, &cols[i], d + nb, dlen - nb, n_rows, map != NULL);
        if (st != SX_OK)
            goto fail;
        cur->off += dlen;
    }
    if (version >= 2) {
        st = read_keyblock(cur, cols, expect, n_cols, n_rows, &pk);
        if (st != SX_OK)
            goto fail;
        if (!map && pk.col != NO_PK) {
            st = verify_keyblock(path, &pk, cols[pk.col].data);
            if (st != SX_OK)
                goto fail;
        }
    }
    if (cur->off != cur->len) {
        st = sx__err(SX_ECORRUPT, "%s: trailing bytes", path);
        goto fail;
    }
    if (v.f)
        sx__ignore(sx__file_close(v.f));
    sx__free(v.buf);
    sx__free(cur);
    if (map) {
        map->addr = data;
        map->len = len;
        map->pk = pk;
    } else {
        sx__fs_unmap(data, len);
    }
    *n_rows_out = n_rows;
    *cols_out = cols;
    return SX_OK;
fail:
    if (v.f)
        sx__ignore(sx__file_close(v.f));
    sx__free(v.buf);
    sx__free(cur);
    sx__segcols_free(cols, n_cols, n_rows);
    sx__fs_unmap(data, len);
    return st;
}

sx_status sx__segfile_columns(
    const char *path, uint64_t *seg_id, uint64_t *n_rows, sx__segcol **cols_out, size_t *n_out)
{
    *cols_out = NULL;
    *n_out = 0;
    void *data = NULL;
    size_t len = 0;
    sx__segcol *cols = NULL;
    uint32_t nc = 0;
    sx_status st = sx__fs_map(path, &data, &len);
    if (st != SX_OK)
        return st;
    /* only the headers are read: a few pages of the mapping; the CRCs are sx__segfile_read's */
    cursor *cur = sx__calloc(1, sizeof *cur);
    verifier v = { path, NULL, NULL };
    if (!cur) {
        st = sx__err(SX_ENOMEM, "reading %s", path);
        goto out;
    }
    cur->v = &v;
    cur->base = data;
    cur->len = len;
    const uint8_t *hp = len >= 36 ? cur_get(cur, 36, "header", &st) : NULL;
    if (!hp) {
        st = st != SX_OK ? st : sx__err(SX_ECORRUPT, "%s: bad magic or short header", path);
        goto out;
    }
    sx__rbuf r;
    sx__rbuf_init(&r, hp, 36);
    uint32_t version = 0;
    st = get_header_v(&r, path, SEG_MAGIC, SEG_VERSION, &version, seg_id, n_rows, &nc);
    if (st != SX_OK)
        goto out;
    if (nc == 0 || nc > 4096) {
        st = sx__err(SX_ECORRUPT, "%s: %u columns", path, nc);
        goto out;
    }
    cols = sx__calloc(nc, sizeof *cols);
    if (!cols) {
        st = sx__err(SX_ENOMEM, "reading %s", path);
        goto out;
    }
    size_t fl = version >= 3 ? 1 : 0;
    for (uint32_t i = 0; i < nc; i++) {
        const uint8_t *p = cur_get(cur, 4, "column header", &st);
        if (!p)
            goto out;
        uint32_t nl = sx__le32(p);
        if (nl > SX_MAX_NAME) {
            st = sx__err(SX_ECORRUPT, "%s: truncated column %u", path, i);
            goto out;
        }
        p = cur_get(cur, (uint64_t)nl + 17 + fl, "column header", &st);
        if (!p)
            goto out;
        cols[i].name = sx__strndup((const char *)p, nl);
        if (!cols[i].name) {
            st = sx__err(SX_ENOMEM, "reading %s", path);
            goto out;
        }
        cols[i].type = (sx_field_type)p[nl];
        cols[i].nullable = fl && (p[nl + 1] & 1);
        cols[i].dim = sx__le32(p + nl + 1 + fl);
        uint64_t dlen = sx__le64(p + nl + 5 + fl);
        st = skip_pad(cur, "column");
        if (st != SX_OK)
            goto out;
        if (dlen > cur->len - cur->off) {
            st = sx__err(SX_ECORRUPT, "%s: truncated column %u", path, i);
            goto out;
        }
        cur->off += dlen;
    }
out:
    sx__free(cur);
    sx__fs_unmap(data, len);
    if (st != SX_OK) {
        sx__segcols_free(cols, nc, 0);
        return st;
    }
    *cols_out = cols;
    *n_out = nc;
    return SX_OK;
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
    sx__iov one = { payload, len };
    return sx__idxfile_write_parts(path, type, params, n_rows, dim, &one, 1);
}

sx_status sx__idxfile_write_parts(const char *path,
                                  const char *type,
                                  const char *params,
                                  uint64_t n_rows,
                                  uint32_t dim,
                                  const sx__iov *parts,
                                  size_t nparts)
{
    enum { MAX_PARTS = 8 };

    if (nparts > MAX_PARTS)
        return sx__err(SX_EINVAL, "%s: %zu payload parts, at most %d", path, nparts, MAX_PARTS);
    size_t len = 0;
    uint32_t crc = 0;
    for (size_t i = 0; i < nparts; i++) {
        len += parts[i].n;
        crc = sx__crc32c(crc, parts[i].p, parts[i].n);
    }
    sx__wbuf w;
    sx__wbuf_init(&w);
    put_header(&w, IDX_MAGIC, n_rows, len, dim);
    sx__wbuf_str(&w, type);
    sx__wbuf_str(&w, params);
    sx__wbuf_u32(&w, crc);
    sx__iov all[MAX_PARTS + 1];
    all[0] = (sx__iov){ w.data, w.len };
    for (size_t i = 0; i < nparts; i++)
        all[i + 1] = parts[i];
    sx_status st = sx__wbuf_ok(&w) ? sx__fs_write_atomic_parts(path, all, nparts + 1)
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
    /* The header and the two strings are read into a small buffer, the payload straight into
     * its own allocation (CRC computed over it there): the file is never held twice. */
    enum { HEAD_MAX = 36 + 4 + 64 + 4 + 4096 + 4 };

    sx__file *f = NULL;
    uint8_t *head = NULL, *body = NULL;
    char *t = NULL, *p = NULL;
    uint64_t fsize = 0;
    sx_status st = sx__file_open(path, SX__F_READ, &f);
    if (st == SX_OK)
        st = sx__file_size(f, &fsize);
    if (st != SX_OK)
        goto out;
    size_t hlen = fsize < HEAD_MAX ? (size_t)fsize : HEAD_MAX, got = 0;
    head = sx__malloc(hlen + 1);
    if (!head) {
        st = sx__err(SX_ENOMEM, "loading %s", path);
        goto out;
    }
    st = sx__file_pread(f, head, hlen, 0, &got);
    if (st != SX_OK)
        goto out;
    sx__rbuf r;
    sx__rbuf_init(&r, head, got);
    uint64_t n, plen;
    uint32_t d;
    st = get_header(&r, path, IDX_MAGIC, &n, &plen, &d);
    if (st != SX_OK)
        goto out;
    t = sx__rbuf_str(&r, 64, NULL);
    p = sx__rbuf_str(&r, 4096, NULL);
    uint32_t crc = sx__rbuf_u32(&r);
    if (!sx__rbuf_ok(&r) || !t || !p || plen != fsize - r.off || plen > MAX_FILE) {
        st = sx__err(SX_ECORRUPT, "%s: truncated", path);
        goto out;
    }
    body = sx__malloc(plen ? (size_t)plen : 1);
    if (!body) {
        st = sx__err(SX_ENOMEM, "loading %s", path);
        goto out;
    }
    st = sx__file_pread(f, body, (size_t)plen, r.off, &got);
    if (st != SX_OK)
        goto out;
    if (got != plen) {
        st = sx__err(SX_ECORRUPT, "%s: truncated", path);
        goto out;
    }
    if (crc != sx__crc32c(0, body, (size_t)plen)) {
        st = sx__err(SX_ECORRUPT, "%s: checksum mismatch", path);
        goto out;
    }
    if (n != n_rows || d != dim || strcmp(t, type) != 0 || strcmp(p, params) != 0) {
        st = sx__err(SX_EINVAL, "%s: index file is for other parameters", path);
        goto out;
    }
    *payload = body;
    *len_out = (size_t)plen;
    body = NULL;
out:
    if (f)
        sx__ignore(sx__file_close(f));
    sx__free(body);
    sx__free(head);
    sx__free(t);
    sx__free(p);
    return st;
}
