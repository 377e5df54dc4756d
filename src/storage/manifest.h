/*
 * manifest.h: a collection's manifest, the root of its durable state (FORMAT-SEGMENT.md).
 * It names the schema, the index spec, the sealed segments with their delete-file generations, the
 * WAL checkpoint LSN (every record <= it is reflected in the files named) and id counters.
 * Replaced atomically (sx__fs_write_atomic): write tmp, fsync, rename, fsync dir. A manifest is
 * never written before every file it names is durable.
 * Thread-safety: pure encode/decode of caller-owned structs.
 */
#ifndef SX_STORAGE_MANIFEST_H
#define SX_STORAGE_MANIFEST_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__mseg {
    uint64_t id;
    uint64_t n_rows;
    uint64_t del_gen; /* 0: no delete file */
} sx__mseg;

/* One vector field's metric and index spec. */
typedef struct sx__mvec {
    sx_metric metric;
    char *index_type; /* NULL: no index */
    size_t n_index_params;
    sx_param *index_params; /* keys/values owned */
} sx__mvec;

typedef struct sx__manifest {
    uint64_t generation;
    char *name;
    size_t n_fields;
    sx_field_def *fields; /* names owned */
    /* vec[v]: the v-th FLOAT_VECTOR field of `fields` in schema order (n_vec of them; the reader
     * checks n_vec against the schema) */
    size_t n_vec;
    sx__mvec vec[SX_MAX_VECTOR_FIELDS];
    uint64_t checkpoint_lsn;
    uint64_t next_auto_id;
    uint64_t next_seg_id;
    size_t n_segs;
    sx__mseg *segs;
} sx__manifest;

SX_NODISCARD sx_status sx__manifest_write(const char *path, const sx__manifest *m);
/* *m is filled (owned strings; release with sx__manifest_fini). */
SX_NODISCARD sx_status sx__manifest_read(const char *path, sx__manifest *m);
void sx__manifest_fini(sx__manifest *m);

#endif
