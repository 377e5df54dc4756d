/*
 * diskann_io.c: the DISKANN file format, its sequential writer, opening a file for search, and the
 * serialized in-RAM part (what the engine stores as the index blob).
 *
 * File <prefix>.diskann (all integers little-endian):
 *   header sector, bytes [0, 4096):
 *     offset  size  field
 *     0       4     magic 0x41445853 ("SXDA")
 *     4       4     version (2; 1 is read too: no cache ratio, 0)
 *     8       8     n, nodes
 *     16      4     dim
 *     20      4     metric: 0 L2, 1 IP, 2 COSINE
 *     24      4     R, max_degree in [1, 512]
 *     28      4     node_bytes = 4*dim + 4 + 4*R
 *     32      4     nodes_per_slot (>= 1)
 *     36      4     slot_bytes (multiple of 4096)
 *     40      8     n_slots = ceil(n / nodes_per_slot)
 *     48      4     medoid (0xFFFFFFFF iff n == 0)
 *     52      4     reserved, 0
 *     56      8     build id (random per build; the RAM part carries the same value)
 *     64      4028  zero
 *     4092    4     CRC-32C of bytes [0, 4092)
 *   slot s (s in [0, n_slots)) at offset 4096 + s * slot_bytes, slot_bytes bytes:
 *     node s*nodes_per_slot + i at offset i * node_bytes, for i < nodes_per_slot:
 *       dim float32   the full-precision vector
 *       u32           degree (<= R)
 *       R u32         neighbour ids; the first `degree` are used, the rest are 0
 *     zero padding (also for the missing nodes of the last slot)
 *     last 4 bytes    CRC-32C of the slot's other bytes
 * Slots: when a node and the CRC fit in one 4 KiB sector, a slot is one sector holding
 * floor(4092 / node_bytes) nodes and no node straddles sectors; otherwise a slot is the smallest
 * multiple of 4 KiB holding one node and the CRC (dim > ~960 at R = 56). Every read is one whole
 * slot at a 4 KiB-aligned offset, which is what O_DIRECT requires, and carries its own checksum:
 * a flipped byte anywhere is SX_ECORRUPT the first time a search reads that slot.
 *
 * Writer: the file is written as <path>.tmp strictly sequentially (header, then slots in node-id
 * order, batched), fdatasynced, renamed over <path>, and the directory is fsynced: a crash leaves
 * either no file or a complete one, never a torn one under the final name.
 *
 * RAM part (sx__diskann_serialize; the "index bytes" the engine stores):
 *     offset  size  field
 *     0       4     magic 0x52445853 ("SXDR")
 *     4       4     version (1)
 *     8       8     n
 *     16      4     dim
 *     20      4     metric
 *     24      4     R
 *     28      4     search_list_size used by the build
 *     32      4     alpha, float32
 *     36      4     pq_code_budget_gb_ratio, float32
 *     40      4     medoid
 *     44      4     m, PQ bytes per vector (0 iff n == 0)
 *     48      8     build id
 *     56      8     n_slots
 *     64      4     search_cache_budget_gb_ratio, float32 (version 2 only)
 *     68      ...   PQ codebook record (quant_pq.c; absent iff n == 0)
 *     ...     n*m   PQ codes, row-major
 *     end     4     CRC-32C of every preceding byte
 * load_files checks the CRC, every field against the caller's n/dim/metric, every code byte
 * against ksub, then opens the file and checks its header against the RAM part (same layout,
 * medoid and build id). Anything else is SX_ECORRUPT; nothing on this path asserts.
 *
 * Reads bypass platform/fs.h: it has no O_DIRECT and no way to hand its descriptor to io_uring;
 * the writes (where fault injection matters) go through it.
 *
 * Thread-safety: the writer belongs to one thread; the rest is pure or only reads the index.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/diskann/diskann.h"
#if defined(SX_HAVE_URING) && SX_HAVE_URING
# include <liburing.h>
#endif

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/crc32c.h"
#include "util/err.h"

#define HDR_BYTES 64u

/* ---------------------------------------------------------------- layout */

sx_status sx__diskann_layout_init(sx__diskann_layout *lay, size_t n, size_t dim, uint32_t R)
{
    memset(lay, 0, sizeof *lay);
    if (dim == 0 || dim > SX_MAX_DIM || R == 0 || R > SX__DISKANN_R_MAX)
        return sx__err(SX_EINVAL, "DISKANN: bad layout dim=%zu R=%u", dim, R);
    uint64_t node = 4 * (uint64_t)dim + 4 + 4 * (uint64_t)R;
    lay->dim = (uint32_t)dim;
    lay->R = R;
    lay->node_bytes = (uint32_t)node;
    if (node + 4 <= SX__DISKANN_SECTOR) {
        lay->nodes_per_slot = (uint32_t)((SX__DISKANN_SECTOR - 4) / node);
        lay->slot_bytes = SX__DISKANN_SECTOR;
    } else {
        lay->nodes_per_slot = 1;
        lay->slot_bytes = (uint32_t)((node + 4 + SX__DISKANN_SECTOR - 1) / SX__DISKANN_SECTOR *
                                     SX__DISKANN_SECTOR);
    }
    lay->n_slots = (n + lay->nodes_per_slot - 1) / lay->nodes_per_slot;
    return SX_OK;
}

/* ---------------------------------------------------------------- slots and nodes */

bool sx__diskann_slot_ok(const sx__diskann_layout *lay, const uint8_t *slot)
{
    size_t body = lay->slot_bytes - 4;
    return sx__crc32c(0, slot, body) == sx__le32(slot + body);
}

void sx__diskann_slot_seal(const sx__diskann_layout *lay, uint8_t *slot)
{
    size_t body = lay->slot_bytes - 4;
    sx__put_le32(slot + body, sx__crc32c(0, slot, body));
}

void sx__diskann_node_encode(const sx__diskann_layout *lay,
                             uint8_t *slot,
                             uint32_t id,
                             const float *vec,
                             const uint32_t *nbrs,
                             uint32_t degree)
{
    uint8_t *p = slot + (size_t)(id % lay->nodes_per_slot) * lay->node_bytes;
    for (size_t i = 0; i < lay->dim; i++) {
        uint32_t u;
        memcpy(&u, vec + i, 4);
        sx__put_le32(p + 4 * i, u);
    }
    p += 4 * (size_t)lay->dim;
    sx__put_le32(p, degree);
    p += 4;
    for (uint32_t j = 0; j < lay->R; j++)
        sx__put_le32(p + 4 * (size_t)j, j < degree ? nbrs[j] : 0);
}

sx_status sx__diskann_node_decode(const sx__diskann_layout *lay,
                                  const uint8_t *slot,
                                  uint32_t id,
                                  size_t n,
                                  float *vec,
                                  uint32_t *nbrs,
                                  uint32_t *degree)
{
    const uint8_t *p = slot + (size_t)(id % lay->nodes_per_slot) * lay->node_bytes;
    if (vec) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(vec, p, 4 * (size_t)lay->dim);
#else
        for (size_t i = 0; i < lay->dim; i++) {
            uint32_t u = sx__le32(p + 4 * i);
            memcpy(vec + i, &u, 4);
        }
#endif
    }
    p += 4 * (size_t)lay->dim;
    uint32_t deg = sx__le32(p);
    p += 4;
    if (deg > lay->R)
        return sx__err(SX_ECORRUPT, "DISKANN: node %u has degree %u > max_degree %u", id, deg,
                       lay->R);
    for (uint32_t j = 0; j < deg; j++) {
        uint32_t nb = sx__le32(p + 4 * (size_t)j);
        if (nb >= n || nb == id)
            return sx__err(SX_ECORRUPT, "DISKANN: node %u lists bad neighbour %u (n=%zu)", id, nb,
                           n);
        nbrs[j] = nb;
    }
    *degree = deg;
    return SX_OK;
}

/* ---------------------------------------------------------------- header */

void sx__diskann_header_encode(const sx__diskann_layout *lay,
                               size_t n,
                               uint32_t medoid,
                               uint64_t build_id,
                               sx_metric metric,
                               uint8_t *buf)
{
    memset(buf, 0, SX__DISKANN_SECTOR);
    sx__put_le32(buf + 0, SX__DISKANN_MAGIC);
    sx__put_le32(buf + 4, SX__DISKANN_VERSION);
    sx__put_le64(buf + 8, n);
    sx__put_le32(buf + 16, lay->dim);
    sx__put_le32(buf + 20, (uint32_t)metric);
    sx__put_le32(buf + 24, lay->R);
    sx__put_le32(buf + 28, lay->node_bytes);
    sx__put_le32(buf + 32, lay->nodes_per_slot);
    sx__put_le32(buf + 36, lay->slot_bytes);
    sx__put_le64(buf + 40, lay->n_slots);
    sx__put_le32(buf + 48, medoid);
    sx__put_le64(buf + 56, build_id);
    sx__put_le32(buf + SX__DISKANN_SECTOR - 4, sx__crc32c(0, buf, SX__DISKANN_SECTOR - 4));
}

/* Checks a header sector against the index's expectations. */
static sx_status header_check(const sx__diskann *d, const uint8_t *buf)
{
    if (sx__crc32c(0, buf, SX__DISKANN_SECTOR - 4) != sx__le32(buf + SX__DISKANN_SECTOR - 4))
        return sx__err(SX_ECORRUPT, "DISKANN %s: header checksum mismatch", d->path);
    if (sx__le32(buf) != SX__DISKANN_MAGIC)
        return sx__err(SX_ECORRUPT, "DISKANN %s: bad magic 0x%08x", d->path, sx__le32(buf));
    if (sx__le32(buf + 4) != SX__DISKANN_VERSION)
        return sx__err(SX_ECORRUPT, "DISKANN %s: unsupported version %u", d->path,
                       sx__le32(buf + 4));
    const sx__diskann_layout *l = &d->lay;
    if (sx__le64(buf + 8) != d->n || sx__le32(buf + 16) != l->dim ||
        sx__le32(buf + 20) != (uint32_t)d->metric || sx__le32(buf + 24) != l->R ||
        sx__le32(buf + 28) != l->node_bytes || sx__le32(buf + 32) != l->nodes_per_slot ||
        sx__le32(buf + 36) != l->slot_bytes || sx__le64(buf + 40) != l->n_slots ||
        sx__le32(buf + 48) != d->medoid)
        return sx__err(SX_ECORRUPT,
                       "DISKANN %s: header does not match the index (n=%llu dim=%u "
                       "R=%u medoid=%u)",
                       d->path, (unsigned long long)sx__le64(buf + 8), sx__le32(buf + 16),
                       sx__le32(buf + 24), sx__le32(buf + 48));
    if (sx__le64(buf + 56) != d->build_id)
        return sx__err(SX_ECORRUPT, "DISKANN %s: file belongs to another build", d->path);
    return SX_OK;
}

/* ---------------------------------------------------------------- writer */

struct sx__diskann_writer {
    const sx__diskann_layout *lay;
    size_t n;
    sx__file *f;
    char *path, *tmp;     /* owned */
    uint8_t *buf;         /* batch of slots, owned */
    size_t batch_slots;   /* slots per batch */
    uint64_t batch_first; /* slot number of buf's first slot */
    uint64_t next_id;     /* nodes must come in id order */
};

void *sx__diskann_sector_alloc(size_t bytes, void **raw)
{
    uint8_t *p = sx__malloc(bytes + SX__DISKANN_SECTOR);
    *raw = p;
    if (!p)
        return NULL;
    size_t mis = (size_t)((uintptr_t)p & (SX__DISKANN_SECTOR - 1));
    return p + (mis ? SX__DISKANN_SECTOR - mis : 0);
}

static char *with_suffix(const char *path, const char *suf)
{
    size_t len = strlen(path) + strlen(suf) + 1;
    char *p = sx__malloc(len);
    if (p)
        (void)snprintf(p, len, "%s%s", path, suf);
    return p;
}

char *sx__diskann_path(const char *prefix)
{
    return with_suffix(prefix, SX__DISKANN_EXT);
}

size_t sx__diskann_writer_bytes(const sx__diskann_layout *lay, size_t batch_bytes)
{
    size_t slots = batch_bytes / lay->slot_bytes;
    if (slots == 0)
        slots = 1;
    return slots * lay->slot_bytes + SX__DISKANN_SECTOR + 256;
}

sx_status sx__diskann_writer_open(const char *path,
                                  const sx__diskann_layout *lay,
                                  size_t n,
                                  uint32_t medoid,
                                  uint64_t build_id,
                                  sx_metric metric,
                                  size_t batch_bytes,
                                  sx__diskann_writer **out)
{
    sx__diskann_writer *w = sx__calloc(1, sizeof *w);
    if (!w)
        return sx__err(SX_ENOMEM, "DISKANN: out of memory");
    sx_status rc = SX_OK;
    w->lay = lay;
    w->n = n;
    w->batch_slots = batch_bytes / lay->slot_bytes ? batch_bytes / lay->slot_bytes : 1;
    w->path = sx__strdup(path);
    w->tmp = with_suffix(path, ".tmp");
    w->buf = sx__malloc(w->batch_slots * lay->slot_bytes > SX__DISKANN_SECTOR
                            ? w->batch_slots * lay->slot_bytes
                            : SX__DISKANN_SECTOR);
    if (!w->path || !w->tmp || !w->buf) {
        rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
        goto fail;
    }
    rc = sx__file_open(w->tmp, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &w->f);
    if (rc != SX_OK)
        goto fail;
    sx__diskann_header_encode(lay, n, medoid, build_id, metric, w->buf);
    rc = sx__file_append(w->f, w->buf, SX__DISKANN_SECTOR);
    if (rc != SX_OK)
        goto fail;
    memset(w->buf, 0, w->batch_slots * lay->slot_bytes);
    *out = w;
    return SX_OK;
fail:
    sx__diskann_writer_abort(w);
    return rc;
}

static sx_status flush_batch(sx__diskann_writer *w, uint64_t upto_slot)
{
    size_t cnt = (size_t)(upto_slot - w->batch_first);
    if (cnt == 0)
        return SX_OK;
    for (size_t s = 0; s < cnt; s++)
        sx__diskann_slot_seal(w->lay, w->buf + s * w->lay->slot_bytes);
    sx_status rc = sx__file_append(w->f, w->buf, cnt * w->lay->slot_bytes);
    memset(w->buf, 0, w->batch_slots * w->lay->slot_bytes);
    w->batch_first = upto_slot;
    return rc;
}

sx_status sx__diskann_writer_put(
    sx__diskann_writer *w, uint32_t id, const float *vec, const uint32_t *nbrs, uint32_t degree)
{
    if (id != w->next_id || degree > w->lay->R)
        return sx__err(SX_EINVAL, "DISKANN writer: node %u out of order or degree %u", id, degree);
    uint64_t slot = sx__diskann_slot_of(w->lay, id);
    if (slot >= w->batch_first + w->batch_slots) {
        sx_status rc = flush_batch(w, slot);
        if (rc != SX_OK)
            return rc;
    }
    uint8_t *s = w->buf + (size_t)(slot - w->batch_first) * w->lay->slot_bytes;
    sx__diskann_node_encode(w->lay, s, id, vec, nbrs, degree);
    w->next_id++;
    return SX_OK;
}

sx_status sx__diskann_writer_flush(sx__diskann_writer *w)
{
    if (w->next_id != w->n)
        return sx__err(SX_EINVAL, "DISKANN writer: %llu of %zu nodes written",
                       (unsigned long long)w->next_id, w->n);
    return flush_batch(w, w->lay->n_slots);
}

sx__file *sx__diskann_writer_file(sx__diskann_writer *w)
{
    return w->f;
}

/* Directory of path (owned) for the fsync after the rename. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return sx__strdup(".");
    if (slash == path)
        return sx__strdup("/");
    return sx__strndup(path, (size_t)(slash - path));
}

sx_status sx__diskann_writer_finish(sx__diskann_writer *w)
{
    sx_status rc = SX_OK;
    if (w->next_id != w->n) {
        rc = sx__err(SX_EINVAL, "DISKANN writer: %llu of %zu nodes written",
                     (unsigned long long)w->next_id, w->n);
        goto fail;
    }
    rc = flush_batch(w, w->lay->n_slots);
    if (rc != SX_OK)
        goto fail;
    rc = sx__file_sync(w->f);
    if (rc != SX_OK)
        goto fail;
    rc = sx__file_close(w->f);
    w->f = NULL;
    if (rc != SX_OK)
        goto fail;
    rc = sx__fs_rename(w->tmp, w->path);
    if (rc != SX_OK)
        goto fail;
    char *dir = dir_of(w->path);
    if (!dir) {
        rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
        goto fail;
    }
    rc = sx__fs_sync_dir(dir);
    sx__free(dir);
    if (rc != SX_OK)
        goto fail;
    sx__free(w->buf);
    sx__free(w->path);
    sx__free(w->tmp);
    sx__free(w);
    return SX_OK;
fail:
    sx__diskann_writer_abort(w);
    return rc;
}

void sx__diskann_writer_abort(sx__diskann_writer *w)
{
    if (!w)
        return;
    if (w->f)
        sx__ignore(sx__file_close(w->f));
    if (w->tmp)
        sx__ignore(sx__fs_unlink(w->tmp));
    sx__free(w->buf);
    sx__free(w->path);
    sx__free(w->tmp);
    sx__free(w);
}

/* ---------------------------------------------------------------- open for search */

static bool env_is(const char *name, const char *val)
{
    const char *v = getenv(name);
    return v && strcmp(v, val) == 0;
}

static void note(sx__diskann *d, const char *msg, int e)
{
    size_t used = strlen(d->io_note);
    if (used + 2 >= sizeof d->io_note)
        return;
    (void)snprintf(d->io_note + used, sizeof d->io_note - used, "%s%s%s%s", used ? "; " : "", msg,
                   e ? ": " : "", e ? strerror(e) : "");
}

/* Reads the header sector through d->fd into an aligned buffer. */
static sx_status read_header(sx__diskann *d, uint8_t *hdr, int *err)
{
    ssize_t r;
    do {
        r = pread(d->fd, hdr, SX__DISKANN_SECTOR, 0);
    } while (r < 0 && errno == EINTR);
    *err = r < 0 ? errno : 0;
    if (r < 0)
        return sx__err_errno(errno, "read %s header", d->path);
    if (r != (ssize_t)SX__DISKANN_SECTOR)
        return sx__err(SX_ECORRUPT, "DISKANN %s: truncated header (%zd bytes)", d->path, r);
    return SX_OK;
}

static int open_ro(const char *path, bool direct)
{
    int fd;
    do {
        fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
    } while (fd < 0 && errno == EINTR);
    return fd;
}

sx_status sx__diskann_open_file(sx__diskann *d)
{
    bool direct = !env_is("SX_DISKANN_DIRECT", "0");
    if (!direct)
        note(d, "O_DIRECT disabled by SX_DISKANN_DIRECT=0", 0);
    d->fd = open_ro(d->path, direct);
    if (d->fd < 0 && direct && errno == EINVAL) {
        note(d, "O_DIRECT refused by the file system, buffered reads", EINVAL);
        direct = false;
        d->fd = open_ro(d->path, false);
    }
    if (d->fd < 0)
        return sx__err_errno(errno, "open %s", d->path);
    void *raw;
    uint8_t *hdr = sx__diskann_sector_alloc(SX__DISKANN_SECTOR, &raw);
    if (!hdr)
        return sx__err(SX_ENOMEM, "DISKANN: out of memory");
    int e = 0;
    sx_status rc = read_header(d, hdr, &e);
    if (rc != SX_OK && direct && e == EINVAL) {
        /* opened, but direct reads refused (some file systems): reopen buffered */
        note(d, "O_DIRECT reads refused, buffered reads", EINVAL);
        (void)close(d->fd);
        direct = false;
        d->fd = open_ro(d->path, false);
        if (d->fd < 0) {
            sx__free(raw);
            return sx__err_errno(errno, "open %s", d->path);
        }
        rc = read_header(d, hdr, &e);
    }
    if (rc == SX_OK)
        rc = header_check(d, hdr);
    sx__free(raw);
    if (rc != SX_OK)
        return rc;
    d->is_direct = direct;
    struct stat sb;
    if (fstat(d->fd, &sb) != 0)
        return sx__err_errno(errno, "fstat %s", d->path);
    if ((uint64_t)sb.st_size < sx__diskann_file_bytes(&d->lay))
        return sx__err(SX_ECORRUPT, "DISKANN %s: %llu bytes, the layout needs %llu", d->path,
                       (unsigned long long)sb.st_size,
                       (unsigned long long)sx__diskann_file_bytes(&d->lay));

    d->io_mode = SX__DISKANN_IO_PREAD;
#if defined(SX_HAVE_URING) && SX_HAVE_URING
    if (env_is("SX_DISKANN_IO", "pread")) {
        note(d, "io_uring disabled by SX_DISKANN_IO=pread", 0);
    } else {
        struct io_uring ring;
        int r = io_uring_queue_init(4, &ring, 0);
        if (r == 0) {
            io_uring_queue_exit(&ring);
            d->io_mode = SX__DISKANN_IO_URING;
        } else {
            note(d, "io_uring unavailable, pread", -r);
        }
    }
#else
    note(d, "built without liburing, pread", 0);
#endif
    return SX_OK;
}

sx_status sx__diskann_read_at(const sx__diskann *d, uint64_t off, size_t len, void *buf)
{
    if (d->io_mode == SX__DISKANN_IO_READER)
        return d->rd.read(d->rd.ctx, off, len, buf);
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(d->fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return sx__err_errno(errno, "DISKANN: read %s at %llu", d->path,
                                 (unsigned long long)(off + got));
        }
        if (r == 0)
            return sx__err(SX_ECORRUPT, "DISKANN %s: truncated at byte %llu", d->path,
                           (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return SX_OK;
}

/* ---------------------------------------------------------------- life cycle */

sx__diskann *sx__diskann_new(void)
{
    sx__diskann *d = sx__calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->fd = -1;
    d->medoid = SX__DISKANN_NONE;
    atomic_init(&d->ios, 0);
    atomic_init(&d->bytes_read, 0);
    return d;
}

void sx__diskann_free(sx__index *idx)
{
    sx__diskann *d = (sx__diskann *)idx;
    if (!d)
        return;
    if (d->fd >= 0)
        (void)close(d->fd);
    if (d->io_mode == SX__DISKANN_IO_READER && d->rd.close)
        d->rd.close(d->rd.ctx);
    if (d->remove_on_free && d->path)
        sx__ignore(sx__fs_unlink(d->path));
    sx__pq_fini(&d->pq);
    sx__free_aligned(d->codes);
    sx__diskann_cache_free(d);
    sx__free(d->path);
    sx__free(d);
}

size_t sx__diskann_memory_bytes(const sx__index *idx)
{
    const sx__diskann *d = (const sx__diskann *)idx;
    return sizeof *d + d->n * d->pq.m + sx__pq_memory_bytes(&d->pq) +
           (d->path ? strlen(d->path) + 1 : 0) + sx__diskann_cache_bytes(d);
}

uint64_t sx__diskann_disk_bytes(const sx__index *idx)
{
    const sx__diskann *d = (const sx__diskann *)idx;
    return sx__diskann_file_bytes(&d->lay);
}

void sx__diskann_io_stats(const sx__index *idx, uint64_t *ios, uint64_t *bytes)
{
    const sx__diskann *d = (const sx__diskann *)idx;
    if (ios)
        *ios = atomic_load_explicit(&d->ios, memory_order_relaxed);
    if (bytes)
        *bytes = atomic_load_explicit(&d->bytes_read, memory_order_relaxed);
}

void sx__diskann_remove_files(const char *file_prefix)
{
    if (!file_prefix)
        return;
    char *p = sx__diskann_path(file_prefix);
    char *dir = p ? dir_of(p) : NULL;
    if (!p || !dir) {
        sx__free(p);
        sx__free(dir);
        return;
    }
    /* <prefix>.diskann, and whatever an interrupted build left: <prefix>.diskann.tmp and
     * <prefix>.diskann.shard<i>.tmp */
    sx__ignore(sx__fs_unlink(p));
    const char *slash = strrchr(p, '/');
    const char *base = slash ? slash + 1 : p;
    size_t blen = strlen(base), dlen = strlen(dir);
    char **names = NULL;
    size_t nn = 0;
    if (sx__fs_list(dir, &names, &nn) == SX_OK) {
        for (size_t i = 0; i < nn; i++) {
            if (strncmp(names[i], base, blen) != 0 || names[i][blen] != '.')
                continue;
            size_t len = dlen + 1 + strlen(names[i]) + 1;
            char *full = sx__malloc(len);
            if (!full)
                continue;
            (void)snprintf(full, len, "%s/%s", dir, names[i]);
            sx__ignore(sx__fs_unlink(full));
            sx__free(full);
        }
        for (size_t i = 0; i < nn; i++)
            sx__free(names[i]);
        sx__free(names);
    }
    sx__free(dir);
    sx__free(p);
}

/* ---------------------------------------------------------------- RAM part */

sx_status sx__diskann_serialize_parts(
    const sx__index *idx, sx__wbuf *head, const void **big, size_t *big_len, sx__wbuf *tail)
{
    const sx__diskann *d = (const sx__diskann *)idx;
    sx__wbuf *w = head;
    sx__wbuf_u32(w, SX__DISKANN_RAM_MAGIC);
    sx__wbuf_u32(w, SX__DISKANN_RAM_VERSION);
    sx__wbuf_u64(w, d->n);
    sx__wbuf_u32(w, (uint32_t)d->dim);
    sx__wbuf_u32(w, (uint32_t)d->metric);
    sx__wbuf_u32(w, d->R);
    sx__wbuf_u32(w, d->L_build);
    sx__wbuf_f32(w, d->alpha);
    sx__wbuf_f32(w, d->pq_ratio);
    sx__wbuf_u32(w, d->medoid);
    sx__wbuf_u32(w, d->n ? d->pq.m : 0);
    sx__wbuf_u64(w, d->build_id);
    sx__wbuf_u64(w, d->lay.n_slots);
    sx__wbuf_f32(w, d->cache_ratio);
    if (d->n) {
        sx_status rc = sx__pq_serialize(&d->pq, w);
        if (rc != SX_OK)
            return rc;
    }
    if (!sx__wbuf_ok(w))
        return sx__err(SX_ENOMEM, "DISKANN: cannot grow the serialization buffer");
    *big = d->n ? d->codes : NULL;
    *big_len = d->n ? d->n * d->pq.m : 0;
    uint32_t crc = sx__crc32c(0, w->data, w->len);
    if (*big_len)
        crc = sx__crc32c(crc, *big, *big_len);
    sx__wbuf_u32(tail, crc);
    if (!sx__wbuf_ok(tail))
        return sx__err(SX_ENOMEM, "DISKANN: cannot grow the serialization buffer");
    return SX_OK;
}

sx_status sx__diskann_serialize(const sx__index *idx, sx__wbuf *w)
{
    sx__wbuf head, tail;
    sx__wbuf_init(&head);
    sx__wbuf_init(&tail);
    const void *big = NULL;
    size_t big_len = 0;
    sx_status rc = sx__diskann_serialize_parts(idx, &head, &big, &big_len, &tail);
    if (rc == SX_OK) {
        sx__wbuf_put(w, head.data, head.len);
        if (big_len)
            sx__wbuf_put(w, big, big_len);
        sx__wbuf_put(w, tail.data, tail.len);
        if (!sx__wbuf_ok(w))
            rc = sx__err(SX_ENOMEM, "DISKANN: cannot grow the serialization buffer");
    }
    sx__wbuf_fini(&head);
    sx__wbuf_fini(&tail);
    return rc;
}

/* Parses and validates the RAM part into d (which must be fresh). */
/* With `owned` (== data, sx__malloc'd), the codes are moved to its front and the buffer becomes
 * d->codes on SX_OK (the caller frees it on failure). */
static sx_status parse_ram(sx__diskann *d,
                           const void *data,
                           size_t len,
                           size_t n,
                           size_t dim,
                           sx_metric metric,
                           void *owned)
{
    if (!data || len < HDR_BYTES + 4)
        return sx__err(SX_ECORRUPT, "DISKANN index: %zu bytes is too short", len);
    const uint8_t *b = data;
    if (sx__crc32c(0, b, len - 4) != sx__le32(b + len - 4))
        return sx__err(SX_ECORRUPT, "DISKANN index: checksum mismatch");
    sx__rbuf r;
    sx__rbuf_init(&r, data, len - 4);
    uint32_t magic = sx__rbuf_u32(&r), version = sx__rbuf_u32(&r);
    uint64_t fn = sx__rbuf_u64(&r);
    uint32_t fdim = sx__rbuf_u32(&r), fmetric = sx__rbuf_u32(&r), R = sx__rbuf_u32(&r);
    uint32_t L = sx__rbuf_u32(&r);
    float alpha = sx__rbuf_f32(&r), ratio = sx__rbuf_f32(&r);
    uint32_t medoid = sx__rbuf_u32(&r), m = sx__rbuf_u32(&r);
    uint64_t build_id = sx__rbuf_u64(&r), n_slots = sx__rbuf_u64(&r);
    if (magic != SX__DISKANN_RAM_MAGIC)
        return sx__err(SX_ECORRUPT, "DISKANN index: bad magic 0x%08x", magic);
    if (version != 1 && version != SX__DISKANN_RAM_VERSION)
        return sx__err(SX_ECORRUPT, "DISKANN index: unsupported version %u", version);
    float cache_ratio = version >= 2 ? sx__rbuf_f32(&r) : 0.0f;
    if (!(cache_ratio >= 0.0f) || !(cache_ratio <= (float)SX__DISKANN_CACHE_RATIO_MAX))
        return sx__err(SX_ECORRUPT, "DISKANN index: bad cache ratio");
    if (fn != n || fdim != dim || fmetric != (uint32_t)metric)
        return sx__err(SX_ECORRUPT,
                       "DISKANN index: built for n=%llu dim=%u metric=%u, segment has n=%zu "
                       "dim=%zu metric=%d",
                       (unsigned long long)fn, fdim, fmetric, n, dim, (int)metric);
    if (n > SX__DISKANN_MAX_N || R < 1 || R > SX__DISKANN_R_MAX || L < 1 || L > SX__DISKANN_L_MAX ||
        !(alpha >= (float)SX__DISKANN_ALPHA_MIN) || !(alpha <= (float)SX__DISKANN_ALPHA_MAX) ||
        !(ratio > 0.0f) || !(ratio <= (float)SX__DISKANN_PQ_RATIO_MAX) ||
        (n == 0) != (medoid == SX__DISKANN_NONE) || (n > 0 && medoid >= n) || (n == 0) != (m == 0))
        return sx__err(SX_ECORRUPT, "DISKANN index: bad header (R=%u L=%u medoid=%u m=%u)", R, L,
                       medoid, m);
    d->n = n;
    d->dim = dim;
    d->metric = metric;
    d->dist = sx__dist_for_metric(metric);
    d->R = R;
    d->L_build = L;
    d->alpha = alpha;
    d->pq_ratio = ratio;
    d->cache_ratio = cache_ratio;
    d->medoid = medoid;
    d->build_id = build_id;
    sx_status rc = sx__diskann_layout_init(&d->lay, n, dim, R);
    if (rc != SX_OK)
        return sx__err(SX_ECORRUPT, "DISKANN index: bad layout");
    if (d->lay.n_slots != n_slots)
        return sx__err(SX_ECORRUPT, "DISKANN index: %llu slots, the layout has %llu",
                       (unsigned long long)n_slots, (unsigned long long)d->lay.n_slots);
    if (n == 0)
        return sx__rbuf_left(&r) == 0
                   ? SX_OK
                   : sx__err(SX_ECORRUPT, "DISKANN index: unexpected trailing bytes");
    rc = sx__pq_deserialize(&d->pq, &r);
    if (rc != SX_OK)
        return rc;
    if (d->pq.dim != dim || d->pq.m != m)
        return sx__err(SX_ECORRUPT, "DISKANN index: PQ codebook for dim=%u m=%u, want %zu/%u",
                       d->pq.dim, d->pq.m, dim, m);
    if (sx__rbuf_left(&r) != n * m)
        return sx__err(SX_ECORRUPT, "DISKANN index: %zu code bytes, want %zu", sx__rbuf_left(&r),
                       n * m);
    const uint8_t *codes = sx__rbuf_bytes(&r, n * m);
    if (!codes)
        return sx__err(SX_ECORRUPT, "DISKANN index: truncated codes");
    for (size_t i = 0; i < n * m; i++)
        if (codes[i] >= d->pq.ksub)
            return sx__err(SX_ECORRUPT, "DISKANN index: code byte %zu is %u >= ksub %u", i,
                           codes[i], d->pq.ksub);
    if (owned) {
        memmove(owned, codes, n * m);
        void *shrunk = sx__realloc(owned, n * m); /* in place, or mremap: no copy of the pages */
        d->codes = shrunk ? shrunk : owned;
        return SX_OK;
    }
    d->codes = sx__malloc_aligned(n * m);
    if (!d->codes)
        return sx__err(SX_ENOMEM, "DISKANN: cannot allocate %zu code bytes", n * m);
    memcpy(d->codes, codes, n * m);
    return SX_OK;
}

sx_status sx__diskann_deserialize(const void *data,
                                  size_t len,
                                  const float *vecs,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  sx__index **out)
{
    (void)data;
    (void)len;
    (void)vecs;
    (void)n;
    (void)dim;
    (void)metric;
    (void)out;
    return sx__err(SX_EINVAL, "DISKANN keeps its graph and vectors in files: load it with "
                              "load_files and the prefix it was built under");
}

/* A fresh index with the RAM part parsed into it. owned as parse_ram's, freed here on failure. */
static sx_status new_parsed(const void *data,
                            size_t len,
                            void *owned,
                            size_t n,
                            size_t dim,
                            sx_metric metric,
                            sx__diskann **out)
{
    sx__diskann *d = sx__diskann_new();
    if (!d) {
        sx__free(owned);
        return sx__err(SX_ENOMEM, "DISKANN: out of memory");
    }
    sx_status rc = parse_ram(d, data, len, n, dim, metric, owned);
    if (rc != SX_OK) {
        sx__free(owned);
        sx__diskann_free((sx__index *)d);
        return rc;
    }
    *out = d;
    return SX_OK;
}

static sx_status load_files(const void *data,
                            size_t len,
                            void *owned,
                            const char *file_prefix,
                            size_t n,
                            size_t dim,
                            sx_metric metric,
                            sx__index **out)
{
    if (!file_prefix) {
        sx__free(owned);
        return sx__err(SX_EINVAL, "DISKANN: load_files needs the file prefix");
    }
    sx__diskann *d = NULL;
    sx_status rc = new_parsed(data, len, owned, n, dim, metric, &d);
    if (rc != SX_OK)
        return rc;
    d->path = sx__diskann_path(file_prefix);
    if (!d->path) {
        rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
        goto fail;
    }
    rc = sx__diskann_open_file(d);
    if (rc != SX_OK)
        goto fail;
    d->build_shards = 0;
    rc = sx__diskann_cache_warm(d);
    if (rc != SX_OK)
        goto fail;
    *out = (sx__index *)d;
    return SX_OK;
fail:
    sx__diskann_free((sx__index *)d);
    return rc;
}

sx_status sx__diskann_load_files(const void *data,
                                 size_t len,
                                 const char *file_prefix,
                                 const float *vecs,
                                 size_t n,
                                 size_t dim,
                                 sx_metric metric,
                                 sx__index **out)
{
    (void)vecs; /* reads_own_vectors: the vectors come from the file */
    return load_files(data, len, NULL, file_prefix, n, dim, metric, out);
}

sx_status sx__diskann_load_files_owned(void *data,
                                       size_t len,
                                       const char *file_prefix,
                                       size_t n,
                                       size_t dim,
                                       sx_metric metric,
                                       sx__index **out)
{
    return load_files(data, len, data, file_prefix, n, dim, metric, out);
}

static sx_status load_reader(const void *data,
                             size_t len,
                             void *owned,
                             const sx__diskann_reader *rd,
                             size_t n,
                             size_t dim,
                             sx_metric metric,
                             sx__index **out)
{
    if (!rd || !rd->read || !rd->name) {
        sx__free(owned);
        return sx__err(SX_EINVAL, "DISKANN: load_reader needs a reader and a name");
    }
    sx__diskann *d = NULL;
    sx_status rc = new_parsed(data, len, owned, n, dim, metric, &d);
    if (rc != SX_OK)
        return rc;
    void *raw = NULL;
    uint8_t *hdr = NULL;
    d->path = sx__strdup(rd->name);
    hdr = sx__diskann_sector_alloc(SX__DISKANN_SECTOR, &raw);
    if (!d->path || !hdr) {
        rc = sx__err(SX_ENOMEM, "DISKANN: out of memory");
        goto fail;
    }
    if (rd->size < sx__diskann_file_bytes(&d->lay)) {
        rc = sx__err(SX_ECORRUPT, "DISKANN %s: %llu bytes, the layout needs %llu", d->path,
                     (unsigned long long)rd->size,
                     (unsigned long long)sx__diskann_file_bytes(&d->lay));
        goto fail;
    }
    rc = rd->read(rd->ctx, 0, SX__DISKANN_SECTOR, hdr);
    if (rc == SX_OK)
        rc = header_check(d, hdr);
    if (rc != SX_OK)
        goto fail;
    sx__free(raw);
    d->rd = *rd;
    d->rd.name = d->path;
    d->io_mode = SX__DISKANN_IO_READER;
    note(d, "remote file: slots read through the object-store block cache", 0);
    /* d owns rd now: a cache that cannot be filled (a GET failing) is left empty, and the
     * searches read those slots through the block cache as any other */
    if (sx__diskann_cache_warm(d) != SX_OK)
        sx__err_clear();
    *out = (sx__index *)d;
    return SX_OK;
fail:
    sx__free(raw);
    sx__diskann_free((sx__index *)d); /* io_mode is not READER yet: rd is not closed */
    return rc;
}

sx_status sx__diskann_load_reader(const void *data,
                                  size_t len,
                                  const sx__diskann_reader *rd,
                                  size_t n,
                                  size_t dim,
                                  sx_metric metric,
                                  sx__index **out)
{
    return load_reader(data, len, NULL, rd, n, dim, metric, out);
}

sx_status sx__diskann_load_reader_owned(void *data,
                                        size_t len,
                                        const sx__diskann_reader *rd,
                                        size_t n,
                                        size_t dim,
                                        sx_metric metric,
                                        sx__index **out)
{
    return load_reader(data, len, data, rd, n, dim, metric, out);
}
