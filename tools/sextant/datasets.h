/*
 * datasets.h: readers for the vector file formats `sextant` accepts, and a TEXMEX writer.
 *
 * Formats, chosen by the file name:
 *
 *   name ends in   format                                   loaded as
 *   .fvecs         TEXMEX, records (int32 d, d x float32)   float
 *   .bvecs         TEXMEX, records (int32 d, d x uint8)     float (0..255)
 *   .ivecs         TEXMEX, records (int32 d, d x int32)     int32 (ground-truth ids)
 *   .npy           NumPy v1/v2/v3, 2-D, C order;            float for <f4 and |u1,
 *                  dtype <f4, |u1 or <i4                    int32 for <i4
 *   .gz, -ubyte,   IDX (MNIST / Fashion-MNIST), optionally  float (0..255)
 *   .idx           gzip'd (zlib): big-endian magic
 *                  0x00000803 (uint8, 3 dims), N x dims
 *
 * Every reader validates the whole file before trusting it: TEXMEX files must be a whole number
 * of records and every record must carry the same d; NumPy files must be exactly header + data;
 * IDX files must hold N rows after the header and nothing after them. A limit (> 0) keeps only
 * the first `limit` rows: the file-size checks still cover the whole file, but the records past
 * the limit are not read (their TEXMEX d fields and a gzip stream's tail go unchecked).
 *
 * All multi-byte values are decoded explicitly (little-endian for TEXMEX/NumPy, big-endian for
 * IDX), never by casting the buffer.
 *
 * Errors: functions return 0 or -1 and write a message naming the file into err[err_len].
 * Ownership: a loaded ds_matrix owns its buffer; free it with ds_free.
 * Thread-safety: reentrant; no shared state.
 */
#ifndef SX_TOOLS_DATASETS_H
#define SX_TOOLS_DATASETS_H

#include <stddef.h>
#include <stdint.h>

/* Largest dimension (record length) the readers accept. */
#define DS_MAX_DIM (1u << 20)

typedef enum ds_type { DS_F32 = 0, DS_I32 = 1 } ds_type;

typedef struct ds_matrix {
    size_t n;   /* rows */
    size_t dim; /* values per row */
    ds_type type;
    float *f;   /* n*dim values, row-major, when type == DS_F32 (else NULL) */
    int32_t *i; /* n*dim values, row-major, when type == DS_I32 (else NULL) */
} ds_matrix;

/* Loads `path` (format from its name, table above), keeping at most `limit` rows (0 = all).
 * Returns 0 and fills *out, or -1 with a message in err. */
int ds_load(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len);

/* Like ds_load, and converts int32 data to float so the result is always DS_F32. */
int ds_load_float(const char *path, size_t limit, ds_matrix *out, char *err, size_t err_len);

/* Frees the buffer; the matrix is zeroed. NULL is a no-op. */
void ds_free(ds_matrix *m);

/* Writes n rows of dim values as TEXMEX: `.ivecs` from ints, `.fvecs` from floats (exactly one
 * of f / i non-NULL, matching the extension). Writes PATH.tmp.PID and renames it over path, so
 * an interrupted write never leaves a truncated cache file. Returns 0 or -1 with a message. */
int ds_write_vecs(const char *path,
                  size_t n,
                  size_t dim,
                  const float *f,
                  const int32_t *i,
                  char *err,
                  size_t err_len);

/* Returns the last path component (borrowed from path). */
const char *ds_basename(const char *path);

#endif /* SX_TOOLS_DATASETS_H */
