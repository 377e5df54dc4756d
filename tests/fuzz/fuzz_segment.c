/*
 * fuzz_segment.c: libFuzzer harness for the sealed-segment, delete-bitmap and index-file readers
 * (src/storage/segfile.h). The input is written as one file and given to every reader (each
 * rejects the other formats by magic, so one corpus holds all three):
 *   sx__segfile_read, copying (map == NULL: the key block verified in full) and zero-copy (mapped
 *     columns and key block), against the fixed schema of fuzz_common.h and segment id 1 (no
 *     primary key expected, so a key block on any INT64 or VARCHAR column is parsed); on success
 *     every value is read, and in the mapped case keys are looked up through the key block
 *     (every row's own key, and absent keys);
 *   sx__delfile_read for segment 1 with FZ_N rows and with the row count the header claims
 *     (capped at 1 << 20);
 *   sx__idxfile_read expecting type HNSW, params "M=8,efConstruction=40", FZ_N rows, FZ_DIM.
 * Segments are read twice more against the same schema with age, flag and name nullable (the
 * version 3 NULL bitmaps: borrowed from the mapping or copied and checked); on success every
 * NULL word is read.
 * gen_corpus.c writes the seeds with the same constants (segments of format version 3 with key
 * blocks on the INT64 and on the VARCHAR column, seed-seg-nullable with NULL bitmaps;
 * seed-seg-v2* and seed-seg-v1* are files of the older versions, still read).
 * Errors are normal outcomes. Each input runs twice: as is, and with every CRC recomputed
 * (fix_crcs, key block included), so mutations reach the decoders.
 */
#include "fuzz_common.h"
#include "platform/fs.h"
#include "storage/segfile.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/buf.h"
#include "util/err.h"

#define FZ_IDX_TYPE   "HNSW"
#define FZ_IDX_PARAMS "M=8,efConstruction=40"

static char g_path[600];
static volatile uint64_t g_sink;
static sx__segcol g_expect[FZ_N_FIELDS];
static sx__segcol g_expect_null[FZ_N_FIELDS]; /* age, flag, name nullable */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = fz_tmpdir("segment");
    snprintf(g_path, sizeof g_path, "%s/seg-00000000000000000001.sxs", tmp);
    for (size_t i = 0; i < FZ_N_FIELDS; i++) {
        g_expect[i].name = (char *)fz_fields[i].name;
        g_expect[i].type = fz_fields[i].type;
        g_expect[i].dim = fz_fields[i].dim;
        g_expect_null[i] = g_expect[i];
        g_expect_null[i].nullable = fz_fields[i].type == SX_FIELD_BOOL ||
                                    fz_fields[i].type == SX_FIELD_VARCHAR ||
                                    strcmp(fz_fields[i].name, "age") == 0;
    }
    return 0;
}

static void touch_cols(const sx__segcol *cols, uint64_t n)
{
    volatile uint64_t sink = 0;
    for (size_t c = 0; c < FZ_N_FIELDS; c++) {
        if (cols[c].nulls)
            for (uint64_t w = 0; w < sx__bits_words(n); w++)
                sink += ((const uint64_t *)cols[c].nulls)[w];
        for (uint64_t r = 0; r < n; r++) {
            switch (cols[c].type) {
            case SX_FIELD_INT64:
                sink += (uint64_t)((const int64_t *)cols[c].data)[r];
                break;
            case SX_FIELD_DOUBLE:
                sink += ((const double *)cols[c].data)[r] > 0;
                break;
            case SX_FIELD_BOOL:
                sink += ((const bool *)cols[c].data)[r];
                break;
            case SX_FIELD_VARCHAR:
                sink += strlen(((char *const *)cols[c].data)[r]);
                break;
            case SX_FIELD_FLOAT_VECTOR: {
                const float *v = (const float *)cols[c].data + r * cols[c].dim;
                sink += v[0] > 0 && v[cols[c].dim - 1] > 0;
                break;
            }
            case SX_FIELD_FLOAT16_VECTOR:
            case SX_FIELD_BFLOAT16_VECTOR:
            case SX_FIELD_BINARY_VECTOR: {
                size_t w = sx_vector_row_bytes(cols[c].type, cols[c].dim);
                const uint8_t *v = (const uint8_t *)cols[c].data + r * w;
                sink += w ? v[0] + v[w - 1] : 0;
                break;
            }
            }
        }
    }
    (void)sink;
}

/* Lookups through a mapped key block, for every row's key and a few absent ones. The mapped read
 * checks the key block's CRCs and sizes only (the copying read checks its content), so on a
 * crafted block the answers may be wrong; they must only stay in bounds. */
static void touch_keys(const sx__segcol *cols, uint64_t n, const sx__segpk *pk)
{
    if (pk->col == UINT32_MAX || pk->col >= FZ_N_FIELDS)
        return;
    const sx__segcol *kc = &cols[pk->col];
    for (uint64_t r = 0; r < n && r < 256; r++) {
        size_t lo = 0, cnt;
        if (kc->type == SX_FIELD_INT64) {
            const int64_t *col = kc->data;
            cnt = sx__segpk_find_i(pk, col, col[r], &lo);
            for (size_t j = 0; j < cnt; j++)
                g_sink += (uint64_t)col[sx__segpk_row(pk, lo + j)];
            /* a neighbour key, likely absent (wrapping: INT64_MAX's neighbour is INT64_MIN) */
            int64_t next = (int64_t)((uint64_t)col[r] + 1u);
            g_sink += sx__segpk_find_i(pk, col, next, &lo);
        } else {
            char *const *col = kc->data;
            cnt = sx__segpk_find_s(pk, (const char *const *)col, col[r], &lo);
            for (size_t j = 0; j < cnt; j++)
                g_sink += strlen(col[sx__segpk_row(pk, lo + j)]);
            g_sink += sx__segpk_find_s(pk, (const char *const *)col, "~absent", &lo);
        }
    }
}

static void del_read(uint64_t n_rows)
{
    uint64_t *bits = sx__calloc(sx__bits_words(n_rows) + 1, sizeof *bits);
    if (!bits)
        return;
    sx__ignore(sx__delfile_read(g_path, 1, n_rows, bits));
    sx__free(bits);
}

/* Recomputes every CRC of a segment / delete / index file in place, following the layout in
 * docs/internals/FORMAT-SEGMENT.md as far as the lengths stay inside the buffer. */
static void fix_crcs(uint8_t *p, size_t n)
{
    if (n < 36)
        return;
    fz_fix_crc(p, n, 0, 32, 32);
    size_t off = 36;
    if (memcmp(p, "SXSEG001", 8) == 0) {
        uint32_t nc = sx__le32(p + 12);
        size_t fl = sx__le32(p + 8) >= 3 ? 1 : 0; /* version 3: the flags byte */
        for (uint32_t i = 0; i < nc && i < 64; i++) {
            if (n - off < 4)
                return;
            uint32_t nl = sx__le32(p + off);
            if (nl > n - off - 4 || n - off - 4 - nl < 1 + fl + 4 + 8 + 4)
                return;
            off += 4 + nl + 1 + fl + 4;
            uint64_t dlen = sx__le64(p + off);
            off += 8;
            size_t crc_at = off;
            off += 4;
            off += (64 - off % 64) % 64;
            if (off > n || dlen > n - off)
                return;
            fz_fix_crc(p, n, off, off + (size_t)dlen, crc_at);
            off += (size_t)dlen;
        }
        /* version 2: the key block (64-byte meta, then rows, keys, Bloom words) */
        off += (64 - off % 64) % 64;
        if (sx__le32(p + 8) < 2 || off > n || n - off < 64 || memcmp(p + off, "SXPK", 4) != 0)
            return;
        size_t meta = off;
        uint32_t col = sx__le32(p + meta + 4), flags = sx__le32(p + meta + 8);
        uint64_t keys = sx__le64(p + meta + 16), words = sx__le64(p + meta + 24);
        bool ints = true; /* the arrays present: rows unless sorted, keys for an INT64 column */
        if (col < nc && col < 64) {
            /* the column's type: walk the column headers again */
            size_t o = 36;
            for (uint32_t i = 0; i <= col; i++) {
                if (o > n || n - o < 4)
                    return;
                uint32_t nl = sx__le32(p + o);
                if (nl > n - o - 4 || n - o - 4 - nl < 17 + fl)
                    return;
                uint8_t type = p[o + 4 + nl];
                uint64_t dlen = sx__le64(p + o + 4 + nl + 5 + fl);
                o += 4 + nl + 17 + fl;
                o += (64 - o % 64) % 64;
                if (o > n || dlen > n - o)
                    return;
                o += (size_t)dlen;
                ints = type == SX_FIELD_INT64;
            }
        }
        off += 64;
        uint64_t len[3] = { flags & 1 ? 0 : keys * 4, (flags & 1) || !ints ? 0 : keys * 8,
                            words * 8 };
        for (int i = 0; i < 3; i++) {
            if (len[i] == 0 && i < 2)
                continue;
            off += (64 - off % 64) % 64;
            if (off > n || len[i] > n - off)
                return;
            fz_fix_crc(p, n, off, off + (size_t)len[i], meta + 48 + (size_t)i * 4);
            off += (size_t)len[i];
        }
        fz_fix_crc(p, n, meta, meta + 60, meta + 60);
    } else if (memcmp(p, "SXDEL001", 8) == 0) {
        uint64_t rows = sx__le64(p + 24);
        uint64_t words = rows / 64 + (rows % 64 != 0);
        if (words <= (n - 36) / 8)
            fz_fix_crc(p, n, 36, 36 + (size_t)words * 8, 36 + (size_t)words * 8);
    } else if (memcmp(p, "SXIDX001", 8) == 0) {
        uint64_t plen = sx__le64(p + 24);
        for (int k = 0; k < 2; k++) { /* type, params */
            if (n - off < 4)
                return;
            uint32_t l = sx__le32(p + off);
            if (l > n - off - 4)
                return;
            off += 4 + l;
        }
        if (n - off < 4 || plen > n - off - 4)
            return;
        fz_fix_crc(p, n, off + 4, off + 4 + (size_t)plen, off);
    }
}

static void one(const uint8_t *data, size_t size)
{
    if (!fz_write_file(g_path, data, size))
        return;
    for (int nullable = 0; nullable < 2; nullable++) {
        const sx__segcol *expect = nullable ? g_expect_null : g_expect;
        uint64_t n = 0;
        sx__segcol *cols = NULL;
        if (sx__segfile_read(g_path, 1, expect, FZ_N_FIELDS, &n, &cols, NULL) == SX_OK) {
            touch_cols(cols, n);
            sx__segcols_free(cols, FZ_N_FIELDS, n);
        }
        cols = NULL;
        sx__segmap map = { 0 };
        if (sx__segfile_read(g_path, 1, expect, FZ_N_FIELDS, &n, &cols, &map) == SX_OK) {
            touch_cols(cols, n);
            touch_keys(cols, n, &map.pk);
            sx__segcols_free(cols, FZ_N_FIELDS, n);
            if (map.addr)
                sx__fs_unmap(map.addr, map.len);
        }
    }

    del_read(FZ_N);
    if (size >= 32) {
        uint64_t claimed = sx__le64(data + 24);
        if (claimed != FZ_N && claimed <= (1u << 20))
            del_read(claimed);
    }

    void *payload = NULL;
    size_t len = 0;
    if (sx__idxfile_read(g_path, FZ_IDX_TYPE, FZ_IDX_PARAMS, FZ_N, FZ_DIM, &payload, &len) ==
        SX_OK) {
        volatile uint8_t sink = len ? ((const uint8_t *)payload)[len - 1] : 0;
        (void)sink;
        sx__free(payload);
    }
}

/* The input as is, then with its CRCs recomputed. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    uint8_t *c = fz_dup(data, size);
    if (!c)
        return 0;
    fix_crcs(c, size);
    if (size && memcmp(c, data, size) != 0)
        one(c, size);
    free(c);
    return 0;
}
