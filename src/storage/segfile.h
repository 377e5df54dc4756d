/*
 * segfile.h: sealed segment files, delete-bitmap files and index files. Byte formats:
 * docs/internals/FORMAT-SEGMENT.md. The storage layer knows columns (name, type, dim, bytes), not
 * the engine's structures.
 *
 * Segment file "seg-<id>.sxs": header block + one block per column, each with a CRC32C; columns
 * are stored in schema order; VARCHAR columns as u64 offsets[n+1] + bytes; BOOL as one byte per
 * row; INT64/DOUBLE/FLOAT_VECTOR as little-endian arrays.
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

typedef struct sx__segcol {
    char *name; /* owned by whoever filled it */
    sx_field_type type;
    uint32_t dim; /* vectors only */
    /* Data, n rows: int64_t*, double*, bool*, float* (n*dim, 64-byte aligned on read), char ** */
    void *data;
    bool borrowed; /* data points into a file mapping (not freed with the column) */
} sx__segcol;

/* A read-only file mapping that borrowed columns point into. */
typedef struct sx__segmap {
    void *addr;
    size_t len;
} sx__segmap;

/* Writes the segment file atomically. cols[i].data hold n_rows values. */
SX_NODISCARD sx_status sx__segfile_write(
    const char *path, uint64_t seg_id, uint64_t n_rows, const sx__segcol *cols, size_t n_cols);
/* Reads a segment file: *cols (owned; free with sx__segcols_free) gets n_cols columns whose names,
 * types and dims must equal `expect` (same order). The file is mapped; with map != NULL the
 * vector column is left in the mapping (borrowed, 64-byte aligned, zero copy) and *map must be
 * unmapped by the caller after the columns are freed; with map == NULL everything is copied
 * (vectors with sx__malloc_aligned) and the mapping is released. Every CRC is verified. */
SX_NODISCARD sx_status sx__segfile_read(const char *path,
                                        uint64_t seg_id,
                                        const sx__segcol *expect,
                                        size_t n_cols,
                                        uint64_t *n_rows,
                                        sx__segcol **cols,
                                        sx__segmap *map);
void sx__segcols_free(sx__segcol *cols, size_t n_cols, uint64_t n_rows);

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
