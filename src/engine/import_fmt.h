/*
 * import_fmt.h: the file readers of the bulk import (import.c). A group (sx_import_group) is
 * opened as a set of providers, each giving some of the collection's fields: a row-based JSON
 * file gives all of them, a NumPy file the field it is named after, a .fvecs/.bvecs file the
 * vector field, an HDF5 file the vector field and the scalar fields it has datasets for.
 * sx__imp_group_open checks every header against the schema before a row is read; reading
 * then fills a caller-owned batch (sx__imp_batch, schema order) in rows, streaming: a provider
 * holds a bounded read buffer (IMP_BUF_BYTES) and never the whole file.
 * Ownership: a group is owned by its opener (sx__imp_group_close); VARCHAR cells of a batch are
 * sx__malloc'd strings owned by the batch (sx__imp_batch_clear frees them).
 * Thread-safety: a group and a batch are used by one thread at a time.
 */
#ifndef SX_ENGINE_IMPORT_FMT_H
#define SX_ENGINE_IMPORT_FMT_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__imp_batch {
    size_t cap;               /* rows the columns hold */
    size_t n;                 /* rows filled */
    void *col[SX_MAX_FIELDS]; /* int64_t*, double*, bool*, char ** (owned), float* (aligned) */
    uint64_t
        *nulls[SX_MAX_FIELDS]; /* nullable fields: cap bits (bit i: row i is NULL), else NULL */
} sx__imp_batch;

typedef struct sx__imp_group sx__imp_group;

/* Opens the group's files and checks them against c's schema. Errors (SX_EINVAL naming file and
 * field, SX_ENOTFOUND for a missing file, SX_EREMOTE, SX_EIO, SX_ENOMEM): nothing is left open. */
/* opts (may be NULL): its dynamic_field and consts name fields the group fills itself (checked
 * here: VARCHAR fields of the schema, not the key); borrowed until sx__imp_group_close. */
SX_NODISCARD sx_status sx__imp_group_open(sx_collection *c,
                                          const sx_import_group *g,
                                          const sx_import_opts *opts,
                                          sx__imp_group **out);
/* Reads up to b->cap - b->n rows into b at b->n; *got = 0 at the end of the group. On error the
 * rows of this call are not counted in b->n (their strings are freed by sx__imp_batch_clear). */
SX_NODISCARD sx_status sx__imp_group_read(sx__imp_group *g, sx__imp_batch *b, size_t *got);
uint64_t sx__imp_group_rows(const sx__imp_group *g);  /* 0: unknown until read (JSON) */
uint64_t sx__imp_group_bytes(const sx__imp_group *g); /* the files' sizes */
uint64_t sx__imp_group_bytes_read(const sx__imp_group *g);
void sx__imp_group_close(sx__imp_group *g);

/* Frees the VARCHAR strings of rows [0, cap) (unset cells are NULL), clears the NULL bits and
 * sets n = 0. */
void sx__imp_batch_clear(const sx_collection *c, sx__imp_batch *b);

#endif
