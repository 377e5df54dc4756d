/*
 * objstore_fs.c: the local-filesystem object store (`--storage file:///abs/dir`): object `key`
 * is the file <root>/<key>; '/' in keys are directories, created on demand.
 *
 * Why: a second, dependency-free implementation of objstore.h so the engine's store protocol
 * (upload, manifest last, GC, open from the store) is tested without a network, and a usable
 * backend for a mounted shared filesystem.
 *
 * Contract (objstore.h 1-4) over POSIX: every write goes to "<file>.tmp", is fsynced, renamed over
 * the object and the directory fsynced (platform/fs.h sx__fs_write_atomic for buffers, the same
 * sequence for file copies), so an object is whole or absent; list skips "*.tmp" (writes in
 * progress or left by a crash). All I/O goes through platform/fs.h, so it is counted in the
 * LOCAL I/O profile and its faults can be injected there too.
 * Thread-safety: stateless apart from the root; concurrent puts of one key, from threads or from
 * processes sharing the directory (cluster mode's writers), are last-rename-wins: each write has
 * its own "<file>.<pid>.<n>.tmp".
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/fs.h"
#include "storage/objstore.h"
#include "util/alloc.h"
#include "util/err.h"

#define COPY_CHUNK (1u << 20)
#define LIST_MAX   (1u << 22) /* hard cap on listed keys */

typedef struct fsstore {
    sx__objstore base;
    char *root; /* owned, no trailing '/' */
} fsstore;

static sx_status obj_path(const fsstore *s, const char *key, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s/%s", s->root, key);
    if (w < 0 || (size_t)w >= n)
        return sx__err(SX_EINVAL, "object store: key too long: %s", key);
    return SX_OK;
}

/* mkdir -p of the directory part of path. */
static sx_status make_parent(const char *path)
{
    char dir[4096];
    (void)snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return SX_OK;
    *slash = '\0';
    return sx__fs_mkdir_p(dir);
}

/* A temporary name beside dst no other write (thread or process) uses. */
static void unique_tmp(const char *dst, char *tmp, size_t n)
{
    static atomic_ulong seq;
    (void)snprintf(tmp, n, "%s.%ld.%lu.tmp", dst, (long)getpid(),
                   (unsigned long)atomic_fetch_add(&seq, 1));
}

/* Writes src (a file, or len bytes at data when src is NULL) to dst atomically: a unique tmp
 * written, fsynced, renamed, directory fsynced. */
static sx_status write_atomic(const char *src, const void *data, size_t len, const char *dst)
{
    char tmp[4200], dir[4096];
    unique_tmp(dst, tmp, sizeof tmp);
    (void)snprintf(dir, sizeof dir, "%s", dst);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    sx__file *in = NULL, *out = NULL;
    void *buf = src ? sx__malloc(COPY_CHUNK) : NULL;
    sx_status st = buf || !src ? SX_OK : sx__err(SX_ENOMEM, "copy %s", src);
    if (st == SX_OK && src)
        st = sx__file_open(src, SX__F_READ, &in);
    if (st == SX_OK)
        st = make_parent(dst);
    if (st == SX_OK)
        st = sx__file_open(tmp, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &out);
    if (st == SX_OK && !src && len)
        st = sx__file_append(out, data, len);
    uint64_t off = 0;
    while (st == SX_OK && src) {
        size_t got = 0;
        st = sx__file_pread(in, buf, COPY_CHUNK, off, &got);
        if (st != SX_OK || got == 0)
            break;
        st = sx__file_append(out, buf, got);
        off += got;
    }
    if (st == SX_OK)
        st = sx__file_sync(out);
    sx_status cst = sx__file_close(out);
    if (st == SX_OK)
        st = cst;
    if (in)
        sx__ignore(sx__file_close(in));
    sx__free(buf);
    if (st == SX_OK)
        st = sx__fs_rename(tmp, dst);
    if (st == SX_OK)
        return sx__fs_sync_dir(dir);
    if (out)
        sx__ignore(sx__fs_unlink(tmp));
    return st;
}

static sx_status fs_put(sx__objstore *o, const char *key, const void *data, size_t len)
{
    fsstore *s = (fsstore *)o;
    char path[4096];
    sx_status st = obj_path(s, key, path, sizeof path);
    return st == SX_OK ? write_atomic(NULL, data, len, path) : st;
}

static sx_status fs_put_file(sx__objstore *o, const char *key, const char *src)
{
    fsstore *s = (fsstore *)o;
    char path[4096];
    sx_status st = obj_path(s, key, path, sizeof path);
    return st == SX_OK ? write_atomic(src, NULL, 0, path) : st;
}

static sx_status fs_get(sx__objstore *o, const char *key, void **data, size_t *len)
{
    fsstore *s = (fsstore *)o;
    char path[4096];
    sx_status st = obj_path(s, key, path, sizeof path);
    if (st != SX_OK)
        return st;
    return sx__fs_read_all(path, UINT64_MAX, data, len);
}

static sx_status fs_get_file(sx__objstore *o, const char *key, const char *dst)
{
    fsstore *s = (fsstore *)o;
    char path[4096];
    sx_status st = obj_path(s, key, path, sizeof path);
    return st == SX_OK ? write_atomic(path, NULL, 0, dst) : st;
}

static sx_status fs_get_range(sx__objstore *o, const char *key, uint64_t off, size_t len, void *buf)
{
    fsstore *s = (fsstore *)o;
    char path[4096];
    sx__file *f = NULL;
    sx_status st = obj_path(s, key, path, sizeof path);
    if (st == SX_OK)
        st = sx__file_open(path, SX__F_READ, &f);
    size_t done = 0;
    while (st == SX_OK && done < len) {
        size_t got = 0;
        st = sx__file_pread(f, (char *)buf + done, len - done, off + done, &got);
        if (st == SX_OK && got == 0)
            st = sx__err(SX_EREMOTE, "object store: %s: range %" PRIu64 "+%zu past the end", key,
                         off, len);
        done += got;
    }
    sx__ignore(sx__file_close(f));
    return st;
}

static sx_status fs_head(sx__objstore *o, const char *key, uint64_t *size)
{
    fsstore *s = (fsstore *)o;
    char path[4096];
    sx_status st = obj_path(s, key, path, sizeof path);
    if (st != SX_OK)
        return st;
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return sx__err(SX_ENOTFOUND, "object store: %s: no such object", key);
    *size = (uint64_t)sb.st_size;
    return SX_OK;
}

static sx_status fs_del(sx__objstore *o, const char *key)
{
    fsstore *s = (fsstore *)o;
    char path[4096];
    sx_status st = obj_path(s, key, path, sizeof path);
    return st == SX_OK ? sx__fs_unlink(path) : st;
}

typedef struct klist {
    char **keys;
    uint64_t *sizes;
    size_t n, cap;
} klist;

static sx_status klist_add(klist *l, const char *key, uint64_t size)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        if (cap > LIST_MAX)
            return sx__err(SX_EINVAL, "object store: more than %u keys", LIST_MAX);
        char **k = sx__realloc(l->keys, cap * sizeof *k);
        if (!k)
            return sx__err(SX_ENOMEM, "list");
        l->keys = k;
        uint64_t *z = sx__realloc(l->sizes, cap * sizeof *z);
        if (!z)
            return sx__err(SX_ENOMEM, "list");
        l->sizes = z;
        l->cap = cap;
    }
    l->keys[l->n] = sx__strdup(key);
    if (!l->keys[l->n])
        return sx__err(SX_ENOMEM, "list");
    l->sizes[l->n++] = size;
    return SX_OK;
}

/* Walks <root>/<rel> collecting files whose key starts with prefix. */
static sx_status walk(const fsstore *s, const char *rel, const char *prefix, klist *l, int depth)
{
    if (depth > 32)
        return SX_OK;
    char dir[4096];
    (void)snprintf(dir, sizeof dir, "%s%s%s", s->root, *rel ? "/" : "", rel);
    char **names = NULL;
    size_t n = 0;
    sx_status st = sx__fs_list(dir, &names, &n);
    if (st != SX_OK)
        return st == SX_ENOTFOUND ? SX_OK : st;
    for (size_t i = 0; st == SX_OK && i < n; i++) {
        char key[4096], path[4096];
        (void)snprintf(key, sizeof key, "%s%s%s", rel, *rel ? "/" : "", names[i]);
        (void)snprintf(path, sizeof path, "%s/%s", s->root, key);
        struct stat sb;
        if (stat(path, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode)) {
            /* descend only where the prefix can still match */
            size_t kl = strlen(key);
            if (strncmp(key, prefix, kl < strlen(prefix) ? kl : strlen(prefix)) == 0)
                st = walk(s, key, prefix, l, depth + 1);
            continue;
        }
        size_t nl = strlen(names[i]);
        if (nl >= 4 && strcmp(names[i] + nl - 4, ".tmp") == 0)
            continue;
        if (strncmp(key, prefix, strlen(prefix)) == 0)
            st = klist_add(l, key, (uint64_t)sb.st_size);
    }
    sx_strings_free(names, n);
    return st;
}

static int cmp_idx_keys(const void *a, const void *b, void *keys)
{
    char **k = keys;
    return strcmp(k[*(const size_t *)a], k[*(const size_t *)b]);
}

static sx_status
fs_list(sx__objstore *o, const char *prefix, char ***keys, uint64_t **sizes, size_t *n)
{
    fsstore *s = (fsstore *)o;
    klist l;
    memset(&l, 0, sizeof l);
    sx_status st = walk(s, "", prefix, &l, 0);
    if (st != SX_OK) {
        sx_strings_free(l.keys, l.n);
        sx__free(l.sizes);
        return st;
    }
    /* sorted by key (directory walk order is per directory) */
    size_t *ord = sx__calloc(l.n + 1, sizeof *ord);
    char **k2 = sx__calloc(l.n + 1, sizeof *k2);
    uint64_t *z2 = sx__calloc(l.n + 1, sizeof *z2);
    if (!ord || !k2 || !z2) {
        sx__free(ord);
        sx__free(k2);
        sx__free(z2);
        sx_strings_free(l.keys, l.n);
        sx__free(l.sizes);
        return sx__err(SX_ENOMEM, "list");
    }
    for (size_t i = 0; i < l.n; i++)
        ord[i] = i;
    qsort_r(ord, l.n, sizeof *ord, cmp_idx_keys, l.keys);
    for (size_t i = 0; i < l.n; i++) {
        k2[i] = l.keys[ord[i]];
        z2[i] = l.sizes[ord[i]];
    }
    sx__free(ord);
    sx__free(l.keys);
    sx__free(l.sizes);
    *keys = k2;
    *n = l.n;
    if (sizes)
        *sizes = z2;
    else
        sx__free(z2);
    return SX_OK;
}

static void fs_free(sx__objstore *o)
{
    fsstore *s = (fsstore *)o;
    sx__free(s->root);
    sx__free(s->base.url);
    sx__free(s);
}

static const sx__objstore_ops fs_ops = {
    .scheme = "file",
    .put = fs_put,
    .put_file = fs_put_file,
    .get = fs_get,
    .get_file = fs_get_file,
    .get_range = fs_get_range,
    .head = fs_head,
    .del = fs_del,
    .list = fs_list,
    .free = fs_free,
};

sx_status sx__objstore_fs_open(const char *url, const char *root, sx__objstore **out)
{
    fsstore *s = sx__calloc(1, sizeof *s);
    if (!s)
        return sx__err(SX_ENOMEM, "object store");
    s->base.ops = &fs_ops;
    s->base.url = sx__strdup(url);
    s->root = sx__strdup(root);
    if (!s->base.url || !s->root) {
        fs_free(&s->base);
        return sx__err(SX_ENOMEM, "object store");
    }
    size_t n = strlen(s->root);
    while (n > 1 && s->root[n - 1] == '/')
        s->root[--n] = '\0';
    sx_status st = sx__fs_mkdir_p(s->root);
    if (st != SX_OK) {
        fs_free(&s->base);
        return st;
    }
    *out = &s->base;
    return SX_OK;
}
