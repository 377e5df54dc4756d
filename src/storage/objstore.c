/*
 * objstore.c: URL parsing, dispatch and fault injection of the object-store interface
 * (objstore.h). The backends live in objstore_fs.c and objstore_s3.c.
 *
 * Why a dispatch layer: one place validates keys (no "..", no leading '/', no "//": a key must
 * never escape the fs backend's root or alias another key) and injects faults for every backend,
 * so the engine's failure handling is tested the same way over a directory and over S3.
 *
 * Fault state machine per op class (as platform/fs.c): DISARMED --fault_set(n>0)--> ARMED
 * --n-th call--> DISARMED, or STICKY when persistent --fault_set/clear_all--> DISARMED.
 * Threading: relaxed counters; arming publishes with release, the firing call acquires.
 */
#include "storage/objstore.h"

#include <stdatomic.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"

typedef struct ofault {
    atomic_long countdown;
    atomic_bool persistent;
    atomic_bool after;
    atomic_bool sticky;
    atomic_long calls;
} ofault;

static ofault faults[SX__OBJ_FAULT_OP_COUNT];

void sx__objstore_fault_set(sx__objstore_fault_op op, long countdown, bool persistent, bool after)
{
    if ((unsigned)op >= SX__OBJ_FAULT_OP_COUNT)
        return;
    ofault *f = &faults[op];
    atomic_store_explicit(&f->countdown, 0, memory_order_release);
    atomic_store_explicit(&f->sticky, false, memory_order_release);
    atomic_store_explicit(&f->persistent, persistent, memory_order_relaxed);
    atomic_store_explicit(&f->after, after, memory_order_relaxed);
    atomic_store_explicit(&f->countdown, countdown > 0 ? countdown : 0, memory_order_release);
}

void sx__objstore_fault_clear_all(void)
{
    for (int i = 0; i < SX__OBJ_FAULT_OP_COUNT; i++)
        sx__objstore_fault_set((sx__objstore_fault_op)i, 0, false, false);
}

long sx__objstore_fault_calls(sx__objstore_fault_op op)
{
    if ((unsigned)op >= SX__OBJ_FAULT_OP_COUNT)
        return 0;
    return atomic_load_explicit(&faults[op].calls, memory_order_relaxed);
}

/* Counts the call; returns 1 if it must fail before the operation, 2 after it, 0 otherwise. */
static int fault_hit(sx__objstore_fault_op op)
{
    ofault *f = &faults[op];
    atomic_fetch_add_explicit(&f->calls, 1, memory_order_relaxed);
    bool hit = atomic_load_explicit(&f->sticky, memory_order_acquire);
    if (!hit) {
        long c = atomic_load_explicit(&f->countdown, memory_order_acquire);
        while (c > 0) {
            if (atomic_compare_exchange_weak_explicit(&f->countdown, &c, c - 1,
                                                      memory_order_acq_rel, memory_order_acquire)) {
                if (c == 1) {
                    hit = true;
                    if (atomic_load_explicit(&f->persistent, memory_order_relaxed))
                        atomic_store_explicit(&f->sticky, true, memory_order_release);
                }
                break;
            }
        }
    }
    if (!hit)
        return 0;
    return atomic_load_explicit(&f->after, memory_order_relaxed) ? 2 : 1;
}

static sx_status injected(const char *what, const char *key)
{
    return sx__err(SX_EREMOTE, "object store: %s %s: injected fault", what, key);
}

static bool valid_key(const char *key, bool allow_empty)
{
    if (!key)
        return false;
    if (!*key)
        return allow_empty;
    if (key[0] == '/' || strstr(key, "//") || strstr(key, ".."))
        return false;
    for (const char *p = key; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '\\')
            return false;
    return true;
}

#define CHECK_KEY(k, empty_ok)                                                          \
 do {                                                                                   \
  if (!valid_key((k), (empty_ok)))                                                      \
   return sx__err(SX_EINVAL, "object store: invalid key \"%s\"", (k) ? (k) : "(null)"); \
 } while (0)

sx_status sx__objstore_put(sx__objstore *o, const char *key, const void *d, size_t n)
{
    CHECK_KEY(key, false);
    int f = fault_hit(SX__OBJ_FAULT_PUT);
    if (f == 1)
        return injected("put", key);
    sx_status st = o->ops->put(o, key, d, n);
    return st == SX_OK && f == 2 ? injected("put", key) : st;
}

sx_status sx__objstore_put_file(sx__objstore *o, const char *key, const char *path)
{
    CHECK_KEY(key, false);
    int f = fault_hit(SX__OBJ_FAULT_PUT);
    if (f == 1)
        return injected("put", key);
    sx_status st = o->ops->put_file(o, key, path);
    return st == SX_OK && f == 2 ? injected("put", key) : st;
}

sx_status sx__objstore_get(sx__objstore *o, const char *key, void **d, size_t *n)
{
    CHECK_KEY(key, false);
    if (fault_hit(SX__OBJ_FAULT_GET))
        return injected("get", key);
    return o->ops->get(o, key, d, n);
}

sx_status sx__objstore_get_file(sx__objstore *o, const char *key, const char *path)
{
    CHECK_KEY(key, false);
    if (fault_hit(SX__OBJ_FAULT_GET))
        return injected("get", key);
    return o->ops->get_file(o, key, path);
}

sx_status
sx__objstore_get_range(sx__objstore *o, const char *key, uint64_t off, size_t len, void *buf)
{
    CHECK_KEY(key, false);
    if (fault_hit(SX__OBJ_FAULT_GET))
        return injected("get", key);
    return o->ops->get_range(o, key, off, len, buf);
}

sx_status sx__objstore_head(sx__objstore *o, const char *key, uint64_t *size)
{
    CHECK_KEY(key, false);
    if (fault_hit(SX__OBJ_FAULT_GET))
        return injected("head", key);
    return o->ops->head(o, key, size);
}

sx_status sx__objstore_del(sx__objstore *o, const char *key)
{
    CHECK_KEY(key, false);
    int f = fault_hit(SX__OBJ_FAULT_DEL);
    if (f == 1)
        return injected("delete", key);
    sx_status st = o->ops->del(o, key);
    return st == SX_OK && f == 2 ? injected("delete", key) : st;
}

sx_status
sx__objstore_list(sx__objstore *o, const char *prefix, char ***keys, uint64_t **sizes, size_t *n)
{
    CHECK_KEY(prefix, true);
    if (fault_hit(SX__OBJ_FAULT_LIST))
        return injected("list", prefix);
    return o->ops->list(o, prefix, keys, sizes, n);
}

sx_status sx__objstore_open(const char *url, const sx__objstore_config *cfg, sx__objstore **out)
{
    sx__objstore_config none;
    memset(&none, 0, sizeof none);
    if (!cfg)
        cfg = &none;
    if (!url || !*url)
        return sx__err(SX_EINVAL, "storage URL is empty");
    if (strncmp(url, "file://", 7) == 0) {
        const char *root = url + 7;
        if (root[0] != '/' || strstr(root, ".."))
            return sx__err(SX_EINVAL,
                           "storage URL %s: file:// needs an absolute path (file:///abs/dir)", url);
        return sx__objstore_fs_open(url, root, out);
    }
    if (strncmp(url, "s3://", 5) == 0)
        return sx__objstore_s3_open(url, cfg, out);
    return sx__err(SX_EINVAL, "storage URL %s: the scheme must be s3:// or file://", url);
}

void sx__objstore_free(sx__objstore *o)
{
    if (o)
        o->ops->free(o);
}
