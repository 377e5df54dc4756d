/*
 * segfile.h: sealed segment files, delete-bitmap files and index files. Byte formats:
 * docs/internals/FORMAT-SEGMENT.md. The storage layer knows columns (name, type, dim, bytes), not
 * the engine's structures.
 *
 * Segment file "seg-<id>.sxs": header block + one block per column, each with a CRC32C; columns
 * are stored in schema order; VARCHAR columns as u64 offsets[n+1] + bytes; BOOL as one byte per
 * row; INT64/DOUBLE/FLOAT_VECTOR as little-endian arrays; version 3 adds a flags byte per column
 * and, for a nullable column, its NULL bitmap before the values. Version 2 adds a key block: the
 * rows in primary-key order (and the INT64 keys in that order) plus a Bloom filter of the keys, so
 * a sealed segment answers "which row holds key k" from its mapped file, with no per-row entry in
 * RAM (version 1 files are still read: the caller builds the same structure in the heap).
 * Opening (mapped mode) verifies every CRC by streaming the file through a bounded buffer with
 * pread (nothing is read whole into the heap, and no page of the mapping is touched for it); the
 * fixed-width columns are then used in place from the mapping.
 * Delete file "seg-<id>.del.<gen>": the segment's delete bitmap at a checkpoint.
 * Index file "seg-<id>.idx": type, params string, n, dim, the index's serialized bytes.
 * All are written to a temporary name, fsynced, renamed and the directory fsynced.
 * Readers never trust a length or count: every check failure is SX_ECORRUPT naming the file.
 * Thread-safety: pure functions over caller-owned data.
 */
#ifndef SX_STORAGE_SEGFILE_H
#define SX_STORAGE_SEGFILE_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/fs.h"

typedef struct sx__segcol {
    char *name; /* owned by whoever filled it */
    sx_field_type type;
    uint32_t dim; /* vectors only */
    /* Data, n rows: int64_t*, double*, bool*, float* (n*dim, 64-byte aligned on read), char ** */
    void *data;
    bool borrowed;     /* data points into a file mapping (not freed with the column) */
    bool is_primary;   /* the primary key (INT64 or VARCHAR): the writer adds its key block; the
                        * reader checks the file's key block names this column */
    size_t chunk_rows; /* writer only: 0 = data is one array of n rows; else data is a void *[]
                        * of chunks of chunk_rows rows each (a growing segment's layout) */
    const uint64_t *chunk_ends; /* writer only, with chunk_rows 0: data is a void *[] of chunks
                                 * of unequal sizes, chunk j ending before row chunk_ends[j]
                                 * (ascending; the last >= n): sealed segments being merged */
    /* A nullable column (version 3): `nulls` holds its NULL bits (bit r: row r is NULL) laid out
     * as `data` is (one uint64_t array, or a void *[] of per-chunk arrays, each starting at its
     * chunk's first row; a NULL chunk pointer = no NULL there). Reader: the file's flag must
     * equal `nullable` of expect; nulls (sx__bits_words(n) words) is borrowed from the mapping
     * (nulls_borrowed) or owned (sx__calloc); NULL when no row is NULL. */
    bool nullable;
    void *nulls;
    bool nulls_borrowed;
} sx__segcol;

/* Key block of a segment (version 2) or the same structure built in the heap (sx__segpk_build).
 * Borrowed from the mapping (sx__segmap.pk) unless `owned` is set. Lookups: sx__segpk_find_*. */
typedef struct sx__segpk {
    uint32_t col; /* primary-key column; UINT32_MAX: none (a version 1 file) */
    sx_field_type type;
    uint64_t n;
    bool sorted;           /* the key column itself is non-decreasing: rows and keys are NULL */
    const uint32_t *rows;  /* rows in key order (equal keys by row) */
    const int64_t *keys;   /* INT64 and !sorted: keys[i] is the key of rows[i] */
    const uint64_t *bloom; /* bloom_words words */
    uint64_t bloom_words;  /* a power of two */
    uint32_t bloom_k;
    int64_t min, max; /* INT64 with n > 0 */
    void *owned;      /* sx__segpk_build's one allocation (freed by sx__segpk_fini) */
    size_t owned_bytes;
} sx__segpk;

/* A read-only file mapping that borrowed columns point into. */
typedef struct sx__segmap {
    void *addr;
    size_t len;
    sx__segpk pk; /* the key block (col == UINT32_MAX: the file has none) */
} sx__segmap;

/* Writes the segment file atomically. cols[i].data hold n_rows values. */
SX_NODISCARD sx_status sx__segfile_write(
    const char *path, uint64_t seg_id, uint64_t n_rows, const sx__segcol *cols, size_t n_cols);
/* Reads a segment file: *cols (owned; free with sx__segcols_free) gets n_cols columns whose names,
 * types and dims must equal `expect` (same order). The file is mapped; with map != NULL the
 * fixed-width columns (INT64, DOUBLE, BOOL, FLOAT_VECTOR) are left in the mapping (borrowed,
 * 64-byte aligned, zero copy), map->pk describes the key block, and *map must be unmapped by the
 * caller after the columns are freed; every CRC is verified by streaming reads (bounded heap);
 * map->pk.col is UINT32_MAX for a version 1 file and for one written with no column flagged
 * is_primary (the caller then builds the key index itself, as sx__seg_open_file does).
 * With map == NULL everything is copied (vectors with sx__malloc_aligned), the key block is
 * verified in full (order, permutation, keys, Bloom filter: the offline check) and the mapping is
 * released. */
SX_NODISCARD sx_status sx__segfile_read(const char *path,
                                        uint64_t seg_id,
                                        const sx__segcol *expect,
                                        size_t n_cols,
                                        uint64_t *n_rows,
                                        sx__segcol **cols,
                                        sx__segmap *map);
void sx__segcols_free(sx__segcol *cols, size_t n_cols, uint64_t n_rows);
/* The columns a segment file holds (name, type, dim, nullable; no data) as its headers say, for a
 * reader without the schema (an index worker): *cols (n_out entries) can be passed as
 * sx__segfile_read's `expect`; free with sx__segcols_free(cols, n, 0). Only the headers are
 * checked (the header CRC, lengths within the file); sx__segfile_read verifies the rest. */
SX_NODISCARD sx_status sx__segfile_columns(
    const char *path, uint64_t *seg_id, uint64_t *n_rows, sx__segcol **cols, size_t *n_out);

/* Builds a key block in the heap for n keys of `type` (data: int64_t* or char**), as the writer
 * does; out->owned holds it (sx__segpk_fini). Errors: SX_ENOMEM. */
SX_NODISCARD sx_status
sx__segpk_build(sx_field_type type, uint32_t col, const void *data, uint64_t n, sx__segpk *out);
void sx__segpk_fini(sx__segpk *pk);
/* The positions [*lo, *lo + return) in key order holding key k (0: absent; the Bloom filter
 * answers most absent keys without touching the keys); the row of position i is
 * sx__segpk_row(pk, i). col: the segment's key column (int64_t[n] or char *[n]). A row number
 * out of range (a damaged file) ends the search with 0. */
size_t sx__segpk_find_i(const sx__segpk *pk, const int64_t *col, int64_t k, size_t *lo);
size_t sx__segpk_find_s(const sx__segpk *pk, const char *const *col, const char *k, size_t *lo);

static inline uint32_t sx__segpk_row(const sx__segpk *pk, size_t i)
{
    return pk->rows ? pk->rows[i] : (uint32_t)i;
}

SX_NODISCARD sx_status sx__delfile_write(const char *path,
                                         uint64_t seg_id,
                                         uint64_t n_rows,
                                         const uint64_t *bits);
/* bits: caller-allocated sx__bits_words(n_rows) words. */
SX_NODISCARD sx_status sx__delfile_read(const char *path,
                                        uint64_t seg_id,
                                        uint64_t n_rows,
                                        uint64_t *bits);

SX_NODISCARD sx_status sx__idxfile_write(const char *path,
                                         const char *type,
                                         const char *params,
                                         uint64_t n_rows,
                                         uint32_t dim,
                                         const void *payload,
                                         size_t len);
/* sx__idxfile_write of the payload parts[0] || parts[1] || ... (borrowed), never joined in RAM:
 * an index whose bulk it already holds (DISKANN's PQ codes) is written without a second copy. */
SX_NODISCARD sx_status sx__idxfile_write_parts(const char *path,
                                               const char *type,
                                               const char *params,
                                               uint64_t n_rows,
                                               uint32_t dim,
                                               const sx__iov *parts,
                                               size_t nparts);
/* Reads an index file; *payload owned (sx__free). type/params must match or SX_ENOTFOUND-like
 * SX_EINVAL is returned (stale index: rebuild). */
SX_NODISCARD sx_status sx__idxfile_read(const char *path,
                                        const char *type,
                                        const char *params,
                                        uint64_t n_rows,
                                        uint32_t dim,
                                        void **payload,
                                        size_t *len);

#endif
