/*
 * vecfile.h: header parsing of the vector file formats that both the bulk import (engine) and
 * the CLI's dataset readers (tools/sextant/datasets.c) read, so the checks live once:
 *
 *   NumPy .npy        0  6      "\x93NUMPY"
 *                     6  1+1    major (1, 2 or 3), minor
 *                     8  2 (v1) header length HLEN, LE (v2/v3: 4 bytes)
 *                     10/12 HLEN Python dict literal: 'descr', 'fortran_order', 'shape'
 *                     data_off  prod(shape) x itemsize bytes, C order
 *   TEXMEX .fvecs/.bvecs/.ivecs: records of (int32 LE d, d values of 4 / 1 / 4 bytes).
 *
 * Pure functions over caller-owned bytes (no I/O, no allocation): thread-safe. Errors are
 * SX_EINVAL with a message naming `name` (the file) and what is wrong (sx_errmsg).
 */
#ifndef SX_UTIL_VECFILE_H
#define SX_UTIL_VECFILE_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SX__NPY_MAX_NDIM   8
#define SX__NPY_MAX_HEADER 65536u /* bytes of the dict; NumPy writes far less */

typedef struct sx__npy {
    char descr[16];  /* as written: "<f4", "|b1", "<U12" */
    char order;      /* '<' little, '>' big, '|' not applicable, '=' native */
    char kind;       /* 'f', 'i', 'u', 'b', 'U', ... */
    size_t itemsize; /* bytes per element ('U': 4 x characters) */
    bool fortran;
    size_t ndim;
    uint64_t shape[SX__NPY_MAX_NDIM];
    uint64_t n_elems;  /* product of shape (checked for overflow) */
    uint64_t data_off; /* where the data starts */
} sx__npy;

/* Bytes to read from the start of a file for sx__npy_parse: the whole header fits in it. */
#define SX__NPY_PREFIX (12u + SX__NPY_MAX_HEADER)

/* Parses the header from the first `len` bytes of a file of file_size bytes (len may be less
 * than SX__NPY_PREFIX for a short file). Checks the magic, the version, that the header lies
 * within the file, the dict's three keys and the shape, and that the data size the header
 * promises is exactly what the file holds (a truncated or padded file is refused). */
SX_NODISCARD sx_status sx__npy_parse(
    const char *name, const unsigned char *buf, size_t len, uint64_t file_size, sx__npy *out);

/* TEXMEX (kind: "fvecs", "bvecs", "ivecs", for messages): from the first record's 4-byte
 * dimension and the file size, the dimension and the record count (every record has the same size:
 * 4 + d x elem). Refuses an empty or truncated file, a dimension outside 1..max_dim, and a size
 * that is not a whole number of records. */
SX_NODISCARD sx_status sx__vecs_shape(const char *name,
                                      const char *kind,
                                      const unsigned char first4[4],
                                      uint64_t file_size,
                                      size_t elem,
                                      uint32_t max_dim,
                                      uint32_t *dim,
                                      uint64_t *n);

#endif
