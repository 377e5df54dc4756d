/*
 * objstore.h: the object-store interface behind `--storage URL` (docs/internals/STORAGE.md).
 * A flat namespace of immutable-once-written objects addressed by key, with two implementations:
 *
 *   file:///abs/path        objstore_fs.c: one file per object under a local directory (the
 *                           "local filesystem" backend: tests, NFS mounts, a second disk)
 *   s3://BUCKET[/PREFIX]    objstore_s3.c: over the S3 client (storage/s3.h): AWS S3, MinIO,
 *                           Ceph RGW, s3rver. Endpoint and region from sx__objstore_config.
 *
 * Keys are relative to the store's root (the URL's path or PREFIX); the implementation prepends
 * the prefix, so callers never see it. Keys are '/'-separated ASCII without "..", "//" or a
 * leading '/'.
 *
 * Contract every backend keeps (the engine's durability argument relies on it):
 *   1. put / put_file are atomic: after SX_OK the whole object is durably stored and a reader sees
 *      either the previous object under the key or the new one, never a prefix of it;
 *   2. after a failed put the key holds the previous object, or (response lost) the new one;
 *   3. del of an absent key is success; head / get of an absent key is SX_ENOTFOUND;
 *   4. list returns every key that a completed put created and no completed del removed.
 *
 * Errors: SX_EREMOTE (the store failed; message names the operation and key), SX_ENOTFOUND,
 * SX_ETIMEDOUT, SX_EINVAL (bad URL), SX_ENOMEM; the fs backend also SX_EIO / SX_ENOSPC.
 *
 * Fault injection (tests): sx__objstore_fault_set arms a fault in the dispatch layer, so it
 * applies to every backend alike: the countdown-th call of the operation class fails with
 * SX_EREMOTE, either before the operation (nothing happens) or, with `after`, after it (the
 * object is stored or deleted but the caller sees a failure: a lost response).
 *
 * Thread-safety: an sx__objstore may be used from many threads at once; the fault controls are
 * process-global atomics.
 */
#ifndef SX_STORAGE_OBJSTORE_H
#define SX_STORAGE_OBJSTORE_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__objstore sx__objstore;

typedef struct sx__objstore_ops {
    const char *scheme; /* "file" or "s3" */
    sx_status (*put)(sx__objstore *o, const char *key, const void *data, size_t len);
    sx_status (*put_file)(sx__objstore *o, const char *key, const char *path);
    /* Whole object; *data owned (sx__free). */
    sx_status (*get)(sx__objstore *o, const char *key, void **data, size_t *len);
    /* Downloads to `path` atomically (tmp, fsync, rename, fsync dir). */
    sx_status (*get_file)(sx__objstore *o, const char *key, const char *path);
    /* Exactly len bytes at off (a short object is SX_EREMOTE / SX_ECORRUPT). */
    sx_status (*get_range)(sx__objstore *o, const char *key, uint64_t off, size_t len, void *buf);
    sx_status (*head)(sx__objstore *o, const char *key, uint64_t *size);
    sx_status (*del)(sx__objstore *o, const char *key);
    /* Keys starting with prefix (relative to the root), sorted; sizes optional. Owned:
     * sx_strings_free(keys, n), sx__free(sizes). */
    sx_status (*list)(
        sx__objstore *o, const char *prefix, char ***keys, uint64_t **sizes, size_t *n);
    void (*free)(sx__objstore *o);
} sx__objstore_ops;

/* Base of every backend's object (the backend's struct starts with it). */
struct sx__objstore {
    const sx__objstore_ops *ops;
    char *url; /* owned, as given */
};

typedef struct sx__objstore_config {
    const char *s3_endpoint; /* s3:// only; NULL: $SEXTANT_S3_ENDPOINT, else AWS for the region */
    const char *s3_region;   /* NULL: $AWS_REGION, else "us-east-1" */
    bool create_bucket;      /* s3:// only: create the bucket if missing (tests, s3rver) */
} sx__objstore_config;

/* Opens a store from its URL ("file:///abs/dir" or "s3://bucket[/prefix]"). The fs backend
 * creates its directory. Errors: SX_EINVAL (unknown scheme, relative path, empty bucket), the
 * backend's. Ownership: free with sx__objstore_free. */
SX_NODISCARD sx_status sx__objstore_open(const char *url,
                                         const sx__objstore_config *cfg,
                                         sx__objstore **out);
void sx__objstore_free(sx__objstore *o);

/* Dispatch (with fault injection and key validation). See the ops for the contracts. */
SX_NODISCARD sx_status sx__objstore_put(sx__objstore *o, const char *key, const void *d, size_t n);
SX_NODISCARD sx_status sx__objstore_put_file(sx__objstore *o, const char *key, const char *path);
SX_NODISCARD sx_status sx__objstore_get(sx__objstore *o, const char *key, void **d, size_t *n);
SX_NODISCARD sx_status sx__objstore_get_file(sx__objstore *o, const char *key, const char *path);
SX_NODISCARD sx_status
sx__objstore_get_range(sx__objstore *o, const char *key, uint64_t off, size_t len, void *buf);
SX_NODISCARD sx_status sx__objstore_head(sx__objstore *o, const char *key, uint64_t *size);
SX_NODISCARD sx_status sx__objstore_del(sx__objstore *o, const char *key);
SX_NODISCARD sx_status
sx__objstore_list(sx__objstore *o, const char *prefix, char ***keys, uint64_t **sizes, size_t *n);

/* Backend constructors (sx__objstore_open dispatches on the scheme). */
SX_NODISCARD sx_status sx__objstore_fs_open(const char *url, const char *root, sx__objstore **out);
SX_NODISCARD sx_status sx__objstore_s3_open(const char *url,
                                            const sx__objstore_config *cfg,
                                            sx__objstore **out);

/* ---- fault injection (tests) ---- */
typedef enum sx__objstore_fault_op {
    SX__OBJ_FAULT_PUT = 0, /* put, put_file */
    SX__OBJ_FAULT_GET,     /* get, get_file, get_range, head */
    SX__OBJ_FAULT_DEL,
    SX__OBJ_FAULT_LIST,
    SX__OBJ_FAULT_OP_COUNT
} sx__objstore_fault_op;

/* The countdown-th call (1 = the next) of op fails with SX_EREMOTE; persistent: every later call
 * too; after: the operation is performed first (lost response). countdown 0 disarms op. */
void sx__objstore_fault_set(sx__objstore_fault_op op, long countdown, bool persistent, bool after);
void sx__objstore_fault_clear_all(void);
/* Calls of op since start (counted before the fault check). */
long sx__objstore_fault_calls(sx__objstore_fault_op op);

#endif
