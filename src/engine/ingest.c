/*
 * ingest.c: insert, upsert, delete and WAL replay.
 *
 * Write path (one writer per collection at a time, under write_mu):
 *   validate the batch (schema, dims, finite floats, squared norms within SX_MAX_SQNORM for L2
 *   and IP, varchar lengths, duplicate keys) ->
 *   assign auto ids -> encode the record -> sx__wal_append (LSN order = apply order) ->
 *   apply to the growing segment and pk map -> unlock -> sx__wal_sync(lsn) (group commit: many
 *   writers' records share one fdatasync) -> acknowledge.
 * Rows are visible to searches from the apply step, slightly before they are durable.
 * XXX: if the fsync then fails the database turns FATAL (no later write is acknowledged) but
 * readers of this process may have seen the unacknowledged rows; after reopen they are gone.
 * Replay applies records through the same apply functions, so recovery equals the live path.
 *
 * Record payloads (little-endian):
 *   INSERT/UPSERT: u64 n_rows, then per schema field in order: [nullable fields only:
 *                  ceil(n/8) bytes of NULL bits, bit i % 8 of byte i / 8 set = row i is NULL]
 *                  INT64 n x i64 | DOUBLE n x f64 | BOOL n x u8 | VARCHAR n x (u32 len, bytes) |
 *                  VECTOR n x dim x f32 (a NULL row's value is 0, 0.0, false or "")
 *                  The layout follows the schema, so records of collections without nullable
 *                  fields are byte for byte those of the WAL before nullable fields existed.
 *   DELETE:        u8 kind (1 int, 2 str), u64 n, n x (i64 | u32 len, bytes)
 */
#include <math.h>
#include <string.h>
#include <sys/statvfs.h>

#include "engine/engine.h"
#include "platform/membudget.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/bitset.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/half.h"
#include "vector/dist.h"

/* A decoded batch in schema order (pointers borrowed from the caller or from a WAL payload). */
typedef struct rows {
    size_t n;
    const void *col[SX_MAX_FIELDS];
    const char **strs[SX_MAX_FIELDS]; /* decoded varchar pointers (owned by rows_fini) */
    const bool *valid[SX_MAX_FIELDS]; /* nullable fields: false = NULL (borrowed or scratch) */
    bool owns_strs;
    /* [v]: a vector of vector field v has a squared norm over SX_MAX_SQNORM (refused unless the
     * field is COSINE), the first such row and its squared norm */
    bool over[SX_MAX_VECTOR_FIELDS];
    size_t over_row[SX_MAX_VECTOR_FIELDS];
    double over_norm2[SX_MAX_VECTOR_FIELDS];
} rows;

static void rows_fini(rows *r, size_t n_fields)
{
    for (size_t f = 0; f < n_fields; f++) {
        if (r->owns_strs && r->strs[f]) {
            for (size_t i = 0; i < r->n; i++)
                sx__free((char *)r->strs[f][i]);
        }
        sx__free(r->strs[f]);
    }
}

sx_status sx__coll_check_writable(sx_collection *c)
{
    if (atomic_load(&c->dropped))
        return sx__err(SX_ENOTFOUND, "collection %s was dropped", c->name);
    if (c->db->opts.read_only)
        return sx__err(SX_EINVAL, "database is open read-only");
    if (sx__wal_is_fatal(c->wal))
        return sx__err(SX_EFATAL, "database is in the error state after a failed write; reopen");
    return sx__store_may_ack(c, false);
}

/* Disk-full guard (reliability.md T4). A failed WAL write makes the WAL fatal (rows are applied
 * in memory before their fsync, so a record that could not be written cannot be taken back),
 * which would need a reopen. So a write is refused with SX_ENOSPC *before* its WAL append when
 * the collection's filesystem could not also hold the segment its growing rows will become:
 * free space must cover the record, the growing segment (~ the WAL since the checkpoint, which
 * holds the same rows) and a reserve for manifests and delete files. Nothing is changed by a
 * refused write, reads keep working, and writes resume as soon as space is freed (statvfs is
 * asked again on every write: ~1 us). Caller holds write_mu. */
#define DISK_RESERVE_BYTES ((uint64_t)4 << 20)

static sx_status check_space(sx_collection *c, uint64_t record_bytes)
{
    struct statvfs sv;
    if (statvfs(c->dir, &sv) != 0)
        return SX_OK; /* cannot tell: let the write find out */
    uint64_t avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    uint64_t need = record_bytes + sx__wal_bytes(c->wal) + DISK_RESERVE_BYTES;
    if (avail < need)
        return sx__err(SX_ENOSPC,
                       "disk full: %llu bytes free under %s, a write needs %llu (the record, room "
                       "to seal the %llu bytes of unsealed rows, and a %llu-byte reserve); "
                       "nothing was written: free space and retry (no restart needed)",
                       (unsigned long long)avail, c->dir, (unsigned long long)need,
                       (unsigned long long)sx__wal_bytes(c->wal),
                       (unsigned long long)DISK_RESERVE_BYTES);
    return SX_OK;
}

/* engine.h */
sx_status sx__check_half_rows(
    sx_collection *c, size_t f, const uint16_t *v, size_t n, size_t *over_row, double *norm2)
{
    const size_t dim = c->fields[f].dim;
    const bool bf = c->types[f] == SX_FIELD_BFLOAT16_VECTOR;
    *over_row = n;
    *norm2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        const uint16_t *row = v + i * dim;
        double s = 0.0;
        for (size_t j = 0; j < dim; j++) {
            if (bf ? !sx__bf16_finite(row[j]) : !sx__f16_finite(row[j]))
                return sx__err(SX_EINVAL, "field \"%s\": row %zu has a NaN or infinite value",
                               c->names[f], i);
            double x = (double)(bf ? sx__bf16_to_f32(row[j]) : sx__f16_to_f32(row[j]));
            s += x * x;
        }
        if (*over_row == n && !(s <= SX_MAX_SQNORM)) {
            *over_row = i;
            *norm2 = s;
        }
    }
    return SX_OK;
}

/* Maps the caller's columns onto schema order and validates every value. */
static sx_status map_batch(sx_collection *c, const sx_batch *b, rows *r)
{
    memset(r, 0, sizeof *r);
    if (!b || b->n_rows == 0)
        return sx__err(SX_EINVAL, "empty batch");
    if (b->n_rows > (64u << 20))
        return sx__err(SX_EINVAL, "batch of %zu rows is over the limit of %u", b->n_rows,
                       64u << 20);
    r->n = b->n_rows;
    for (size_t i = 0; i < b->n_cols; i++) {
        const sx_column *col = &b->cols[i];
        size_t f = 0;
        while (f < c->n_fields && (!col->name || strcmp(col->name, c->names[f]) != 0))
            f++;
        if (f == c->n_fields)
            return sx__err(SX_EINVAL, "field \"%s\" is not in the schema of %s",
                           col->name ? col->name : "(null)", c->name);
        if (col->type != c->types[f])
            return sx__err(SX_EINVAL, "field \"%s\" has the wrong type", col->name);
        if (r->col[f])
            return sx__err(SX_EINVAL, "field \"%s\" given twice", col->name);
        if (f == c->pk && c->fields[f].auto_id)
            return sx__err(SX_EINVAL, "primary key \"%s\" is auto-generated: omit it", col->name);
        if (!col->data)
            return sx__err(SX_EINVAL, "field \"%s\" has no data", col->name);
        r->col[f] = col->data;
        if (col->valid && !c->fields[f].nullable) {
            for (size_t row = 0; row < b->n_rows; row++)
                if (!col->valid[row])
                    return sx__err(SX_EINVAL,
                                   "field \"%s\": row %zu is NULL, but the field is not nullable",
                                   col->name, row);
        } else if (col->valid) {
            r->valid[f] = col->valid;
        }
    }
    for (size_t f = 0; f < c->n_fields; f++) {
        if (!r->col[f] && !(f == c->pk && c->fields[f].auto_id))
            return sx__err(SX_EINVAL, "field \"%s\" is missing", c->names[f]);
        if (!r->col[f])
            continue;
        if (c->types[f] == SX_FIELD_FLOAT_VECTOR) {
            const float *v = r->col[f];
            const size_t dim = c->fields[f].dim, vs = sx__vslot(c, f);
            size_t total = r->n * dim;
            for (size_t i = 0; i < total; i++)
                if (!isfinite(v[i]))
                    return sx__err(SX_EINVAL, "field \"%s\": row %zu has a NaN or infinite value",
                                   c->names[f], i / dim);
            r->over_row[vs] = sx__first_over_sqnorm(v, r->n, dim, &r->over_norm2[vs]);
            r->over[vs] = r->over_row[vs] < r->n;
        } else if (c->types[f] == SX_FIELD_FLOAT16_VECTOR ||
                   c->types[f] == SX_FIELD_BFLOAT16_VECTOR) {
            /* float16 cannot reach SX_MAX_SQNORM (65504^2 * SX_MAX_DIM < 2^47); bfloat16 can */
            const size_t vs = sx__vslot(c, f);
            sx_status st =
                sx__check_half_rows(c, f, r->col[f], r->n, &r->over_row[vs], &r->over_norm2[vs]);
            if (st != SX_OK)
                return st;
            r->over[vs] = r->over_row[vs] < r->n;
        } else if (c->types[f] == SX_FIELD_VARCHAR) {
            const char *const *s = r->col[f];
            uint32_t maxlen = c->fields[f].max_length ? c->fields[f].max_length : SX_MAX_VARCHAR;
            for (size_t i = 0; i < r->n; i++) {
                if (r->valid[f] && !r->valid[f][i])
                    continue;
                if (!s[i])
                    return sx__err(SX_EINVAL, "field \"%s\": row %zu is NULL", c->names[f], i);
                if (strlen(s[i]) > maxlen)
                    return sx__err(SX_EINVAL, "field \"%s\": row %zu is longer than %u bytes",
                                   c->names[f], i, maxlen);
            }
        } else if (c->types[f] == SX_FIELD_DOUBLE) {
            const double *d = r->col[f];
            for (size_t i = 0; i < r->n; i++)
                if (isnan(d[i]) && !(r->valid[f] && !r->valid[f][i]))
                    return sx__err(SX_EINVAL, "field \"%s\": row %zu is NaN", c->names[f], i);
        }
    }
    return SX_OK;
}

static inline bool row_null(const rows *r, size_t f, size_t i)
{
    return r->valid[f] && !r->valid[f][i];
}

static void encode_rows(sx_collection *c, const rows *r, sx__wbuf *w)
{
    sx__wbuf_u64(w, r->n);
    for (size_t f = 0; f < c->n_fields; f++) {
        const void *d = r->col[f];
        SX_ASSERT(d != NULL); /* map_batch checked every column; an auto id is filled in */
        if (c->fields[f].nullable) {
            for (size_t i = 0; i < r->n; i += 8) {
                uint8_t byte = 0;
                for (size_t j = 0; j < 8 && i + j < r->n; j++)
                    if (row_null(r, f, i + j))
                        byte |= (uint8_t)(1u << j);
                sx__wbuf_u8(w, byte);
            }
        }
        for (size_t i = 0; i < r->n; i++) {
            if (row_null(r, f, i)) {
                if (c->types[f] == SX_FIELD_VARCHAR)
                    sx__wbuf_str(w, "");
                else if (c->types[f] == SX_FIELD_BOOL)
                    sx__wbuf_u8(w, 0);
                else
                    sx__wbuf_u64(w, 0); /* INT64 0, DOUBLE +0.0 */
                continue;
            }
            switch (c->types[f]) {
            case SX_FIELD_INT64:
                sx__wbuf_i64(w, ((const int64_t *)d)[i]);
                break;
            case SX_FIELD_DOUBLE:
                sx__wbuf_f64(w, ((const double *)d)[i]);
                break;
            case SX_FIELD_BOOL:
                sx__wbuf_u8(w, ((const bool *)d)[i] ? 1 : 0);
                break;
            case SX_FIELD_VARCHAR:
                sx__wbuf_str(w, ((const char *const *)d)[i]);
                break;
            case SX_FIELD_FLOAT_VECTOR:
                sx__wbuf_f32s(w, (const float *)d + i * c->fields[f].dim, c->fields[f].dim);
                break;
            case SX_FIELD_FLOAT16_VECTOR:
            case SX_FIELD_BFLOAT16_VECTOR:
            case SX_FIELD_BINARY_VECTOR: {
                /* the values as stored (little-endian host, buf.c) */
                size_t rb = sx__field_width(c, f);
                sx__wbuf_put(w, (const char *)d + i * rb, rb);
                break;
            }
            }
        }
    }
}

static sx_status decode_rows(sx_collection *c, const void *p, size_t len, rows *r, void **scratch)
{
    memset(r, 0, sizeof *r);
    r->owns_strs = true;
    sx__rbuf b;
    sx__rbuf_init(&b, p, len);
    uint64_t n = sx__rbuf_u64(&b);
    if (!sx__rbuf_ok(&b) || n == 0 || n > len)
        return sx__err(SX_ECORRUPT, "WAL insert record: bad row count");
    r->n = (size_t)n;
    /* fixed-width columns are copied out to aligned scratch (payload offsets are unaligned) */
    size_t total = 0;
    for (size_t f = 0; f < c->n_fields; f++) {
        if (c->types[f] != SX_FIELD_VARCHAR)
            total += r->n * sx__field_width(c, f) + 64;
        if (c->fields[f].nullable)
            total += r->n + 64;
    }
    char *buf = sx__malloc_aligned(total);
    if (!buf)
        return sx__err(SX_ENOMEM, "replay");
    *scratch = buf;
    size_t off = 0;
    for (size_t f = 0; f < c->n_fields; f++) {
        if (c->fields[f].nullable) {
            const uint8_t *bits = sx__rbuf_bytes(&b, (r->n + 7) / 8);
            if (!bits)
                return sx__err(SX_ECORRUPT, "WAL insert record: truncated NULL bits");
            if (r->n % 8 && (bits[r->n / 8] >> (r->n % 8)) != 0)
                return sx__err(SX_ECORRUPT, "WAL insert record: NULL bits past the rows");
            bool *valid = (bool *)(buf + off);
            off += (r->n + 63) & ~(size_t)63;
            for (size_t i = 0; i < r->n; i++)
                valid[i] = !(bits[i / 8] >> (i % 8) & 1);
            r->valid[f] = valid;
        }
        if (c->types[f] == SX_FIELD_VARCHAR) {
            r->strs[f] = sx__calloc(r->n, sizeof(char *));
            if (!r->strs[f])
                return sx__err(SX_ENOMEM, "replay");
            for (size_t i = 0; i < r->n; i++) {
                bool oom = false;
                r->strs[f][i] = sx__rbuf_str(&b, SX_MAX_VARCHAR, &oom);
                if (!r->strs[f][i])
                    return oom ? sx__err(SX_ENOMEM, "replay")
                               : sx__err(SX_ECORRUPT, "WAL insert record: bad string");
            }
            r->col[f] = r->strs[f];
            continue;
        }
        size_t wdt = sx__field_width(c, f);
        const void *src = sx__rbuf_bytes(&b, r->n * wdt);
        if (!src)
            return sx__err(SX_ECORRUPT, "WAL insert record: truncated column");
        void *dst = buf + off;
        off += (r->n * wdt + 63) & ~(size_t)63;
        if (c->types[f] == SX_FIELD_BOOL) {
            const uint8_t *u = src;
            bool *bo = dst;
            for (size_t i = 0; i < r->n; i++)
                bo[i] = u[i] != 0;
        } else {
            memcpy(dst, src, r->n * wdt);
        }
        r->col[f] = dst;
    }
    if (sx__rbuf_left(&b) != 0)
        return sx__err(SX_ECORRUPT, "WAL insert record: trailing bytes");
    return SX_OK;
}

static bool pk_lookup(sx_collection *c, const rows *r, size_t i, uint64_t *seg, uint32_t *row)
{
    if (c->types[c->pk] == SX_FIELD_INT64)
        return sx__pk_get_i(c, ((const int64_t *)r->col[c->pk])[i], seg, row);
    return sx__pk_get_s(c, ((const char *const *)r->col[c->pk])[i], seg, row);
}

static void mark_deleted(sx_collection *c, uint64_t seg_id, uint32_t row)
{
    sx__segment *s = sx__find_seg(c, seg_id);
    if (s && !sx__bits_test_atomic(s->deleted, row)) {
        sx__bits_set_atomic(s->deleted, row);
        atomic_fetch_add(&s->n_deleted, 1);
    }
}

/* Step 1 of applying rows (caller holds write_mu, capacity checked): every allocation the apply
 * needs — chunks, string copies in the (still invisible) cells past n_rows, primary-key copies
 * and pk-map room — so that commit_rows cannot fail. On error nothing is visible and
 * rollback_rows has been done. */
typedef struct prepared {
    char **keys; /* VARCHAR primary keys, owned until commit hands them to the pk map */
} prepared;

static void rollback_rows(sx_collection *c, const rows *r, prepared *p)
{
    sx__segment *g = c->growing;
    size_t base = atomic_load_explicit(&g->n_rows, memory_order_relaxed);
    for (size_t f = 0; f < c->n_fields; f++) {
        if (c->types[f] != SX_FIELD_VARCHAR)
            continue;
        for (size_t i = 0; i < r->n; i++) {
            size_t ch = (base + i) / g->chunk_rows;
            if (!g->chunks[f][ch])
                break;
            char **cell = sx__seg_cell(g, f, base + i, sizeof(char *));
            sx__free(*cell);
            *cell = NULL;
        }
    }
    if (p->keys)
        for (size_t i = 0; i < r->n; i++)
            sx__free(p->keys[i]);
    sx__free(p->keys);
    p->keys = NULL;
}

static sx_status prepare_rows(sx_collection *c, const rows *r, prepared *p)
{
    sx__segment *g = c->growing;
    size_t base = atomic_load_explicit(&g->n_rows, memory_order_relaxed);
    p->keys = NULL;
    for (size_t f = 0; f < c->n_fields; f++) {
        for (size_t ch = base / g->chunk_rows; ch <= (base + r->n - 1) / g->chunk_rows; ch++) {
            if (g->chunks[f][ch])
                continue;
            if (g->nulls[f] && !g->nulls[f][ch]) {
                g->nulls[f][ch] = sx__calloc(sx__bits_words(g->chunk_rows), sizeof(uint64_t));
                if (!g->nulls[f][ch])
                    return sx__err(SX_ENOMEM, "growing segment");
            }
            g->chunks[f][ch] = sx__malloc_aligned(g->chunk_rows * sx__field_width(c, f));
            if (!g->chunks[f][ch])
                return sx__err(SX_ENOMEM, "growing segment");
            if (c->types[f] == SX_FIELD_VARCHAR)
                memset(g->chunks[f][ch], 0, g->chunk_rows * sizeof(char *));
        }
    }
    sx_status st = sx__pkmap_reserve(c->pkmap, r->n);
    if (st != SX_OK)
        return st;
    const bool str_pk = c->types[c->pk] == SX_FIELD_VARCHAR;
    if (str_pk) {
        p->keys = sx__calloc(r->n, sizeof(char *));
        if (!p->keys)
            return sx__err(SX_ENOMEM, "insert");
    }
    for (size_t f = 0; f < c->n_fields; f++) {
        if (c->types[f] != SX_FIELD_VARCHAR)
            continue;
        for (size_t i = 0; i < r->n; i++) {
            const char *src = row_null(r, f, i) ? "" : ((const char *const *)r->col[f])[i];
            char **cell = sx__seg_cell(g, f, base + i, sizeof(char *));
            *cell = sx__strdup(src);
            if (!*cell) {
                rollback_rows(c, r, p);
                return sx__err(SX_ENOMEM, "growing segment");
            }
            if (str_pk && f == c->pk) {
                p->keys[i] = sx__strdup(src);
                if (!p->keys[i]) {
                    rollback_rows(c, r, p);
                    return sx__err(SX_ENOMEM, "insert");
                }
            }
        }
    }
    return SX_OK;
}

/* Step 2: copies fixed-width values, updates the pk map (replacing = marking the old row
 * deleted), publishes n_rows. Cannot fail after prepare_rows. */
static void commit_rows(sx_collection *c, const rows *r, prepared *p, bool upsert)
{
    sx__segment *g = c->growing;
    size_t base = atomic_load_explicit(&g->n_rows, memory_order_relaxed);
    for (size_t f = 0; f < c->n_fields; f++) {
        if (c->types[f] == SX_FIELD_VARCHAR)
            continue;
        size_t w = sx__field_width(c, f);
        const char *src = r->col[f];
        SX_ASSERT(src != NULL); /* every column is set (map_batch, decode_rows) */
        for (size_t i = 0; i < r->n; i++) {
            if (row_null(r, f, i))
                memset(sx__seg_cell(g, f, base + i, w), 0, w);
            else
                memcpy(sx__seg_cell(g, f, base + i, w), src + i * w, w);
        }
        size_t vs = sx__vslot(c, f);
        if (vs != SIZE_MAX && c->vfs[vs].metric == SX_METRIC_COSINE)
            for (size_t i = 0; i < r->n; i++)
                sx__normalize_row(c->vfs[vs].vt, sx__seg_cell(g, f, base + i, w), c->fields[f].dim);
    }
    for (size_t f = 0; f < c->n_fields; f++) {
        if (!g->nulls[f] || !r->valid[f])
            continue;
        for (size_t i = 0; i < r->n; i++) {
            if (r->valid[f][i])
                continue;
            size_t row = base + i, in = row % g->chunk_rows;
            uint64_t *w = &g->nulls[f][row / g->chunk_rows][in / 64];
            __atomic_fetch_or(w, (uint64_t)1 << (in % 64), __ATOMIC_RELAXED);
        }
    }
    for (size_t i = 0; i < r->n; i++) {
        uint64_t seg;
        uint32_t row;
        if (pk_lookup(c, r, i, &seg, &row)) {
            if (!upsert) { /* validated before logging; only a damaged log gets here */
                if (p->keys)
                    sx__free(p->keys[i]);
                continue;
            }
            mark_deleted(c, seg, row);
        }
        if (c->types[c->pk] == SX_FIELD_INT64) {
            int64_t k = ((const int64_t *)r->col[c->pk])[i];
            sx__ignore(sx__pkmap_put_i(c->pkmap, k, g->id, (uint32_t)(base + i)));
            if (c->fields[c->pk].auto_id && k >= 0 && (uint64_t)k >= c->next_auto_id)
                c->next_auto_id = (uint64_t)k + 1;
        } else {
            SX_ASSERT(p->keys != NULL); /* prepare_rows copied the string keys */
            sx__ignore(sx__pkmap_put_s_take(c->pkmap, p->keys[i], g->id, (uint32_t)(base + i)));
        }
    }
    sx__free(p->keys);
    p->keys = NULL;
    atomic_store_explicit(&g->n_rows, base + r->n, memory_order_release);
}

/* Heap bytes the growing segment will allocate for r's rows: the chunks not allocated yet and
 * the VARCHAR copies (with the allocator's per-block header). Caller holds write_mu. */
static uint64_t grow_need(const sx_collection *c, const sx__segment *g, const rows *r)
{
    size_t base = atomic_load_explicit(&g->n_rows, memory_order_relaxed);
    uint64_t need = 0;
    if (r->n == 0)
        return 0;
    for (size_t f = 0; f < c->n_fields; f++) {
        for (size_t ch = base / g->chunk_rows; ch <= (base + r->n - 1) / g->chunk_rows; ch++)
            if (!g->chunks[f][ch])
                need += (uint64_t)g->chunk_rows * sx__field_width(c, f) +
                        (g->nulls[f] ? sx__bits_words(g->chunk_rows) * 8 : 0);
        if (c->types[f] != SX_FIELD_VARCHAR)
            continue;
        for (size_t i = 0; i < r->n; i++)
            need += (row_null(r, f, i) ? 0 : strlen(((const char *const *)r->col[f])[i])) + 1 + 16;
    }
    return need;
}

/* Charges r's rows to the budget (SX__MEM_GROWING). Replayed rows must be held (they are
 * acknowledged writes): forced. Caller holds write_mu. Sealing copies no row (the segment is
 * sealed in place, its file written from the chunks, then replaced by its mapping), so the
 * rows are charged once. Growing segments (all of the database's) may hold at most a quarter of
 * a limited budget: the rest stays for the index builds sealing starts, the indexes and the
 * caches. A DISKANN build squeezed into what ingest leaves partitions into so many small shards
 * that its graph loses recall (test_beyond_ram_slow, 330k x 256 in 64 MiB: recall@10 0.64 with
 * no cap, 0.93 at a half, 1.0 at a quarter). Over the cap the write seals its growing segment
 * and retries, as on a refusal. */
static sx_status grow_charge(sx_collection *c, const rows *r, bool must, uint64_t *took)
{
    sx__segment *g = c->growing;
    uint64_t need = grow_need(c, g, r);
    if (took)
        *took = 0;
    if (must) {
        sx__mem_force(g->budget, SX__MEM_GROWING, need);
    } else {
        uint64_t lim = sx__mem_limit(g->budget);
        /* (an empty growing segment takes its first batch whatever the cap: only the budget
         * itself may refuse it, or writes with chunks larger than the cap could never start) */
        if (lim && atomic_load_explicit(&g->n_rows, memory_order_relaxed) > 0 &&
            sx__mem_used_kind(g->budget, SX__MEM_GROWING) + need > lim / 4)
            return sx__err(SX_ENOMEM,
                           "memory budget: growing segments would hold more than a quarter of "
                           "the budget of %llu bytes",
                           (unsigned long long)lim);
        sx_status st = sx__mem_take(g->budget, SX__MEM_GROWING, need, "the growing segment");
        if (st != SX_OK)
            return st;
    }
    g->charged += need;
    if (took)
        *took = need;
    return SX_OK;
}

/* Gives back a charge grow_charge took for a write that failed before its rows were prepared
 * (nothing allocated for them). Caller holds write_mu. */
static void grow_uncharge(sx_collection *c, uint64_t took)
{
    sx__segment *g = c->growing;
    if (!took || took > g->charged)
        return;
    g->charged -= took;
    sx__mem_give(g->budget, SX__MEM_GROWING, took);
}

static sx_status apply_rows(sx_collection *c, const rows *r, bool upsert)
{
    sx__ignore(grow_charge(c, r, true, NULL));
    prepared p;
    sx_status st = prepare_rows(c, r, &p);
    if (st == SX_OK)
        commit_rows(c, r, &p, upsert);
    return st;
}

/* The squared-norm bound of sextant.h (SX_MAX_SQNORM) for L2 and IP; by the metric read under
 * write_mu, which a metric change holds. */
static sx_status check_sqnorm(const sx_collection *c, const rows *r)
{
    for (size_t v = 0; v < c->n_vf; v++) {
        if (!r->over[v] || c->vfs[v].metric == SX_METRIC_COSINE)
            continue;
        return sx__err(SX_EINVAL,
                       "field \"%s\": row %zu has squared norm %.3g, above the limit 2^125 (%.3g, "
                       "SX_MAX_SQNORM) of L2 and IP collections, where larger vectors would "
                       "overflow float32 distances",
                       c->names[c->vfs[v].field], r->over_row[v], r->over_norm2[v], SX_MAX_SQNORM);
    }
    return SX_OK;
}

static sx_status write_rows(sx_collection *c, const sx_batch *b, int64_t *ids_out, bool upsert)
{
    rows r;
    int64_t *auto_ids = NULL;
    uint64_t took = 0; /* charged to the budget for this batch, until its rows are prepared */
    sx__wbuf w;
    sx__wbuf_init(&w);
    sx_status st = map_batch(c, b, &r);
    if (st != SX_OK)
        return st;
    if (r.n > c->max_growing_rows)
        return sx__err(SX_EINVAL, "batch of %zu rows is larger than a segment (%zu rows)", r.n,
                       c->max_growing_rows);
    for (;;) {
        sx__mutex_lock(&c->write_mu);
        st = sx__coll_check_writable(c);
        if (st == SX_OK)
            st = check_sqnorm(c, &r);
        if (st != SX_OK)
            goto unlock;
        if (atomic_load(&c->growing->n_rows) + r.n <= c->max_growing_rows) {
            /* the memory budget: over it, seal the growing segment (its rows leave the heap) and
             * try again; with nothing to seal the batch is refused (SX_ENOMEM naming it) */
            st = grow_charge(c, &r, false, &took);
            if (st == SX_OK)
                break;
            if (atomic_load(&c->growing->n_rows) == 0)
                goto unlock;
        }
        sx__mutex_unlock(&c->write_mu);
        st = sx__coll_flush(c, true);
        if (st != SX_OK)
            return st;
    }
    if (c->fields[c->pk].auto_id) {
        auto_ids = sx__malloc(r.n * sizeof(int64_t));
        if (!auto_ids) {
            st = sx__err(SX_ENOMEM, "insert");
            goto unlock;
        }
        for (size_t i = 0; i < r.n; i++)
            auto_ids[i] = (int64_t)(c->next_auto_id + i);
        r.col[c->pk] = auto_ids;
    } else {
        /* duplicates: inside the batch, and (insert only) against stored rows */
        sx__pkmap *seen = NULL;
        st = sx__pkmap_new(c->types[c->pk] == SX_FIELD_VARCHAR, &seen);
        for (size_t i = 0; st == SX_OK && i < r.n; i++) {
            uint64_t sg;
            uint32_t rw;
            bool dup_batch, dup_store = false;
            if (c->types[c->pk] == SX_FIELD_INT64) {
                int64_t k = ((const int64_t *)r.col[c->pk])[i];
                dup_batch = sx__pkmap_get_i(seen, k, &sg, &rw);
                if (!upsert)
                    dup_store = sx__pk_get_i(c, k, &sg, &rw);
                if (dup_batch || dup_store)
                    st = sx__err(SX_EEXIST, "primary key %lld %s", (long long)k,
                                 dup_batch ? "appears twice in the batch" : "already exists");
                else
                    st = sx__pkmap_put_i(seen, k, 0, 0);
            } else {
                const char *k = ((const char *const *)r.col[c->pk])[i];
                dup_batch = sx__pkmap_get_s(seen, k, &sg, &rw);
                if (!upsert)
                    dup_store = sx__pk_get_s(c, k, &sg, &rw);
                if (dup_batch || dup_store)
                    st = sx__err(SX_EEXIST, "primary key \"%s\" %s", k,
                                 dup_batch ? "appears twice in the batch" : "already exists");
                else
                    st = sx__pkmap_put_s(seen, k, 0, 0);
            }
        }
        sx__pkmap_free(seen);
        if (st != SX_OK)
            goto unlock;
    }
    encode_rows(c, &r, &w);
    if (!sx__wbuf_ok(&w)) {
        st = sx__err(SX_ENOMEM, "insert");
        goto unlock;
    }
    st = check_space(c, w.len);
    if (st != SX_OK)
        goto unlock;
    /* allocate everything first: once the record is in the WAL the apply must not fail, or a
     * failed insert would come back at replay */
    prepared prep;
    st = prepare_rows(c, &r, &prep);
    if (st != SX_OK)
        goto unlock;
    took = 0; /* the chunks are allocated now: the charge stays with the segment */
    uint64_t lsn;
    st = sx__wal_append(c->wal, upsert ? SX__REC_UPSERT : SX__REC_INSERT, w.data, w.len, &lsn);
    if (st != SX_OK) {
        rollback_rows(c, &r, &prep);
        goto unlock;
    }
    commit_rows(c, &r, &prep, upsert); /* also advances next_auto_id past the ids used */
    sx__mutex_unlock(&c->write_mu);
    sx__wbuf_fini(&w);
    if (st == SX_OK)
        st = sx__wal_sync(c->wal, lsn);
    if (st == SX_OK)
        st = sx__store_may_ack(c, true); /* a lease that lapsed during the sync: outcome unknown */
    if (st == SX_OK && ids_out) {
        if (c->types[c->pk] == SX_FIELD_INT64)
            memcpy(ids_out, r.col[c->pk], r.n * sizeof(int64_t));
    }
    sx__free(auto_ids);
    return st;
unlock:
    grow_uncharge(c, took);
    sx__mutex_unlock(&c->write_mu);
    sx__wbuf_fini(&w);
    sx__free(auto_ids);
    return st;
}

/* The public write entry points tag the calling thread's I/O phase INSERT for their duration
 * (WAL appends and syncs, and the flushes a full growing segment triggers) and restore the
 * caller's phase on return; the bodies return from many places, so the tag wraps them. */
sx_status sx_insert(sx_collection *c, const sx_batch *b, int64_t *ids_out)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_INSERT);
    sx_status st = write_rows(c, b, ids_out, false);
    sx_io_phase_set(prev);
    return st;
}

sx_status sx_upsert(sx_collection *c, const sx_batch *b)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_INSERT);
    sx_status st = write_rows(c, b, NULL, true);
    sx_io_phase_set(prev);
    return st;
}

/* ---------------------------------------------------------------- delete */

static void encode_keys(const sx_keys *k, sx__wbuf *w)
{
    sx__wbuf_u8(w, k->ints ? 1 : 2);
    sx__wbuf_u64(w, k->n);
    for (size_t i = 0; i < k->n; i++) {
        if (k->ints)
            sx__wbuf_i64(w, k->ints[i]);
        else
            sx__wbuf_str(w, k->strs[i]);
    }
}

/* Caller holds write_mu. Returns rows deleted. */
static uint64_t apply_delete(sx_collection *c, const sx_keys *k)
{
    uint64_t n = 0;
    for (size_t i = 0; i < k->n; i++) {
        uint64_t seg;
        uint32_t row;
        bool hit = k->ints ? sx__pk_get_i(c, k->ints[i], &seg, &row)
                           : sx__pk_get_s(c, k->strs[i], &seg, &row);
        if (!hit)
            continue;
        mark_deleted(c, seg, row);
        if (k->ints)
            sx__pkmap_del_i(c->pkmap, k->ints[i]);
        else
            sx__pkmap_del_s(c->pkmap, k->strs[i]);
        n++;
    }
    return n;
}

static sx_status delete_keys(sx_collection *c, const sx_keys *keys, uint64_t *n_deleted)
{
    if (!keys || (!keys->ints == !keys->strs && keys->n))
        return sx__err(SX_EINVAL, "keys: exactly one of ints/strs must be set");
    if (keys->n == 0) {
        if (n_deleted)
            *n_deleted = 0;
        return SX_OK;
    }
    bool want_int = c->types[c->pk] == SX_FIELD_INT64;
    if (want_int != (keys->ints != NULL))
        return sx__err(SX_EINVAL, "primary key \"%s\" is %s", c->names[c->pk],
                       want_int ? "int64" : "varchar");
    if (keys->strs)
        for (size_t i = 0; i < keys->n; i++)
            if (!keys->strs[i])
                return sx__err(SX_EINVAL, "key %zu is NULL", i);
    sx__wbuf w;
    sx__wbuf_init(&w);
    encode_keys(keys, &w);
    if (!sx__wbuf_ok(&w))
        return sx__err(SX_ENOMEM, "delete");
    sx__mutex_lock(&c->write_mu);
    sx_status st = sx__coll_check_writable(c);
    uint64_t lsn = 0, n = 0;
    if (st == SX_OK)
        st = check_space(c, w.len);
    if (st == SX_OK)
        st = sx__wal_append(c->wal, SX__REC_DELETE, w.data, w.len, &lsn);
    if (st == SX_OK)
        n = apply_delete(c, keys);
    sx__mutex_unlock(&c->write_mu);
    sx__wbuf_fini(&w);
    if (st == SX_OK)
        st = sx__wal_sync(c->wal, lsn);
    if (st == SX_OK)
        st = sx__store_may_ack(c, true);
    if (st == SX_OK && n_deleted)
        *n_deleted = n;
    return st;
}

sx_status sx_delete(sx_collection *c, const sx_keys *keys, uint64_t *n_deleted)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_INSERT);
    sx_status st = delete_keys(c, keys, n_deleted);
    sx_io_phase_set(prev);
    return st;
}

/* ---------------------------------------------------------------- replay */

sx_status sx__replay_record(void *ctx, uint64_t lsn, uint8_t type, const void *payload, size_t len)
{
    sx_collection *c = ctx;
    (void)lsn;
    if (type == SX__REC_INSERT || type == SX__REC_UPSERT) {
        rows r;
        void *scratch = NULL;
        sx_status st = decode_rows(c, payload, len, &r, &scratch);
        if (st == SX_OK && atomic_load(&c->growing->n_rows) + r.n > c->max_growing_rows) {
            /* the log outgrew one segment (e.g. segment size lowered): seal in memory */
            sx__segment *sealed = NULL, *ng = NULL;
            st = sx__seg_seal_copy(c, c->growing, &sealed);
            if (st == SX_OK)
                st = sx__seg_new_growing(c, c->next_seg_id++, c->max_growing_rows, &ng);
            sx__segment **ns =
                st == SX_OK ? sx__realloc(c->segs, (c->n_segs + 2) * sizeof *ns) : NULL;
            if (st == SX_OK && !ns)
                st = sx__err(SX_ENOMEM, "replay");
            if (st == SX_OK) {
                c->segs = ns;
                c->segs[c->n_segs++] = sealed;
                sx__seg_unref(c->growing);
                c->growing = ng;
            } else {
                sx__seg_unref(sealed);
                sx__seg_unref(ng);
            }
        }
        if (st == SX_OK)
            st = apply_rows(c, &r, true);
        rows_fini(&r, c->n_fields);
        sx__free_aligned(scratch);
        return st;
    }
    if (type == SX__REC_DELETE) {
        sx__rbuf b;
        sx__rbuf_init(&b, payload, len);
        uint8_t kind = sx__rbuf_u8(&b);
        uint64_t n = sx__rbuf_u64(&b);
        if (!sx__rbuf_ok(&b) || (kind != 1 && kind != 2) || n > len)
            return sx__err(SX_ECORRUPT, "WAL delete record: bad header");
        for (uint64_t i = 0; i < n; i++) {
            sx_keys k = { 1, NULL, NULL };
            int64_t ik;
            char *sk = NULL;
            if (kind == 1) {
                ik = sx__rbuf_i64(&b);
                k.ints = &ik;
            } else {
                bool oom = false;
                sk = sx__rbuf_str(&b, SX_MAX_VARCHAR, &oom);
                if (!sk)
                    return oom ? sx__err(SX_ENOMEM, "replay")
                               : sx__err(SX_ECORRUPT, "WAL delete record: bad key");
                k.strs = (const char *const *)&sk;
            }
            if (!sx__rbuf_ok(&b)) {
                sx__free(sk);
                return sx__err(SX_ECORRUPT, "WAL delete record: truncated");
            }
            if ((kind == 1) == (c->types[c->pk] == SX_FIELD_INT64))
                (void)apply_delete(c, &k);
            sx__free(sk);
        }
        return SX_OK;
    }
    return sx__err(SX_ECORRUPT, "WAL record of unknown type %u", type);
}
