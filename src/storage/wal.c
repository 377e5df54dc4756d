/*
 * wal.c: the write-ahead log of one collection, with group commit and torn-tail recovery
 * (interface: wal.h; byte format, also for external tools: docs/internals/FORMAT-WAL.md).
 *
 * Files: <dir>/wal-<first LSN, 20 decimal digits>.log. Fixed-width names sort in LSN order.
 *
 * File header (32 bytes, little-endian):
 *   off size field
 *   0   8    magic "SXWAL001"
 *   8   4    version (1)
 *   12  4    flags (0; readers reject other values)
 *   16  8    first LSN (equals the LSN in the file name)
 *   24  4    reserved (0)
 *   28  4    CRC32C of bytes 0..27
 * Records follow back to back, no padding (20 + L bytes each):
 *   0   4    payload length L (<= SX__WAL_MAX_RECORD)
 *   4   1    type (defined by the engine)
 *   5   3    reserved (0)
 *   8   8    LSN
 *   16  L    payload
 *   16+L 4   CRC32C of bytes 0..16+L-1 (length through payload)
 *
 * Invariants:
 *  1. LSNs are consecutive from the first file's first LSN; each file's first LSN is one more
 *     than the previous file's last record, and the first file starts at or before
 *     after_lsn + 1 (records after the checkpoint are all present).
 *  2. Only the last file is ever appended to (`cur`); earlier files are immutable and were
 *     fdatasynced (when do_sync) before the next file was created.
 *  3. written_lsn <= next_lsn - 1 and durable_lsn <= written_lsn. With no flush in progress,
 *     records (written_lsn, next_lsn - 1] are exactly the bytes in `buf`, in LSN order; while a
 *     flush runs, its taken buffer holds (written_lsn, upto] and `buf` holds the rest.
 *  4. At most one flush leader at a time (`flushing`). Only the leader touches `cur` outside the
 *     mutex; rotate/close swap `cur` only while holding the mutex with no leader, so the file is
 *     never written concurrently and bytes land in the file in LSN order.
 *  5. Sticky failure: once a write or fsync of record data fails, `fatal` is set and never
 *     cleared; every later and every waiting append/sync/rotate returns SX_EFATAL. No fsync is
 *     retried (fs.c invariant 3). A waiter whose LSN was made durable before the failure still
 *     gets SX_OK: its record is on disk.
 *  6. A record is acknowledged (sync returns SX_OK) only after the fdatasync that covered its
 *     bytes returned (or with do_sync = false, after its bytes were written to the file).
 *  7. After open, every replayed record is durable: the last file was fdatasynced (after a
 *     torn-tail truncation, or just because it may hold unsynced writes of a crashed process).
 *
 * State machine: OPEN (sx__wal_open) --flush failure in lead_flush / rotate / truncate_before-->
 * FATAL --sx__wal_close--> closed. A FATAL WAL is recovered by closing and reopening it.
 *
 * Recovery (scan_dir / scan_file): files in LSN order; the header, then each record is checked
 * (length bound, reserved bytes, CRC, LSN = expected). At the first invalid record or header
 * the rest of the file is searched byte by byte for any valid record (header with a plausible LSN,
 * then its CRC): if one exists, or the file is not the last, it is SX_ECORRUPT with the path and
 * offset (a torn write cannot put valid data after garbage); otherwise it is a torn tail and open
 * truncates the file there (a bad header: rewrites it) and fdatasyncs. A valid record with the
 * wrong LSN, or a missing file, is an LSN gap: SX_ECORRUPT.
 * XXX: with do_sync the tail beyond the last fdatasync was never acknowledged, but the page cache
 * may have persisted its pages out of order; a hole there followed by a persisted later record
 * reads as mid-file corruption and blocks open. sx__wal_open_salvage (`sextant check --salvage`,
 * sx_db_options.wal_salvage) is the escape hatch: it cuts the log at the first invalid record,
 * keeping copies of everything it drops.
 *
 * Threading (group commit). append encodes the record into `buf` under `mu` and returns its LSN.
 * sync(lsn) waits on `cv` until durable_lsn >= lsn. A waiter that finds no flush in progress
 * becomes the leader: it takes `buf` (swapping in the spare buffer), releases `mu`, writes the
 * taken bytes and fdatasyncs, then re-takes `mu`, publishes written/durable LSN (or FATAL) and
 * broadcasts. Appenders keep filling `buf` during the fsync, so the next leader flushes all of
 * them with one fsync: N concurrent writers share fsyncs. append also flushes (write only, no
 * fsync) when `buf` would pass BUF_FLUSH_BYTES, bounding memory when nobody syncs.
 * Rejected: a dedicated flusher thread (one more thread per collection and a hand-off latency;
 * the leader scheme gives the same batching); a fixed commit delay (adds latency to lone writers);
 * writing under the mutex (appenders would stall for the whole fsync); io_uring (not in every
 * sandbox; pwrite + fdatasync is the portable floor).
 * The CRC is computed under the mutex because it covers the LSN, which is assigned there
 * (about 0.1 ms for a 1 MiB payload with SSE4.2).
 */
#include "storage/wal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/fs.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "util/lock.h"

static const uint8_t MAGIC[8] = { 'S', 'X', 'W', 'A', 'L', '0', '0', '1' }; /* no NUL on disk */
#define WAL_VERSION     1u
#define REC_HDR         16u
#define NAME_LEN        28u         /* "wal-" + 20 digits + ".log" */
#define BUF_FLUSH_BYTES (8u << 20)  /* append writes out `buf` past this (soft cap) */
#define BUF_KEEP_BYTES  (16u << 20) /* larger flush buffers are freed, not recycled */
#define READ_CHUNK      (1u << 20)  /* recovery reads this much at a time */
#define MAX_FILES       (1u << 20)

typedef struct walfile {
    uint64_t first_lsn;
    uint64_t bytes; /* valid bytes (header + records written) */
} walfile;

struct sx__wal {
    char *dir; /* owned */
    bool do_sync;
    bool read_only;
    sx__mutex mu;
    pthread_cond_t cv;    /* signalled (broadcast) when a flush ends */
    sx__wbuf buf;         /* guarded by: mu. records (written_lsn, next_lsn) not yet taken */
    sx__wbuf spare;       /* guarded by: mu. recycled flush buffer (empty while one is out) */
    uint64_t next_lsn;    /* guarded by: mu. LSN the next append gets */
    uint64_t written_lsn; /* guarded by: mu. records up to here are in the file */
    uint64_t durable_lsn; /* guarded by: mu. records up to here are acknowledged (inv. 6) */
    bool flushing;        /* guarded by: mu. a leader is writing (invariant 4) */
    bool fatal;           /* guarded by: mu. sticky (invariant 5) */
    char fatal_msg[256];  /* guarded by: mu. the failure that made the WAL fatal */
    walfile *files;       /* guarded by: mu. in LSN order; the last one is `cur` */
    size_t n_files;
    size_t cap_files;
    uint64_t file_bytes; /* guarded by: mu. sum of files[].bytes */
    uint64_t fsyncs;     /* guarded by: mu. fdatasync calls on record data */
    sx__file *cur;       /* guarded by: mu; used outside it only by the leader (invariant 4) */
};

/* ------------------------------------------------------------------ record codec */

void sx__wal_record_encode(
    sx__wbuf *wb, uint64_t lsn, uint8_t type, const void *payload, size_t len)
{
    if (len > SX__WAL_MAX_RECORD) {
        wb->failed = true;
        return;
    }
    if (!sx__wbuf_reserve(wb, SX__WAL_REC_OVERHEAD + len))
        return;
    size_t start = wb->len;
    sx__wbuf_u32(wb, (uint32_t)len);
    sx__wbuf_u8(wb, type);
    sx__wbuf_u8(wb, 0);
    sx__wbuf_u8(wb, 0);
    sx__wbuf_u8(wb, 0);
    sx__wbuf_u64(wb, lsn);
    sx__wbuf_put(wb, payload, len);
    sx__wbuf_u32(wb, sx__crc32c(0, wb->data + start, wb->len - start));
}

/* Decodes one record at p[0..n); returns NULL on success or the reason it is invalid. */
static const char *decode(const uint8_t *p, size_t n, sx__wal_rec *rec, size_t *rec_bytes)
{
    if (n < REC_HDR)
        return "truncated record header";
    uint32_t len = sx__le32(p);
    if (len > SX__WAL_MAX_RECORD)
        return "record length over the limit";
    if (p[5] != 0 || p[6] != 0 || p[7] != 0)
        return "reserved record bytes not zero";
    if (n - REC_HDR < (size_t)len + 4)
        return "truncated record";
    if (sx__le32(p + REC_HDR + len) != sx__crc32c(0, p, REC_HDR + (size_t)len))
        return "record checksum mismatch";
    rec->lsn = sx__le64(p + 8);
    rec->type = p[4];
    rec->payload = p + REC_HDR;
    rec->len = len;
    *rec_bytes = SX__WAL_REC_OVERHEAD + (size_t)len;
    return NULL;
}

sx_status sx__wal_record_decode(const void *p, size_t n, sx__wal_rec *rec, size_t *rec_bytes)
{
    sx__wal_rec r;
    size_t nb = 0;
    const char *why = decode(p, n, &r, &nb);
    if (why)
        return sx__err(SX_ECORRUPT, "WAL record: %s", why);
    *rec = r;
    *rec_bytes = nb;
    return SX_OK;
}

static void encode_header(uint8_t h[SX__WAL_HEADER_BYTES], uint64_t first_lsn)
{
    memset(h, 0, SX__WAL_HEADER_BYTES);
    memcpy(h, MAGIC, 8);
    sx__put_le32(h + 8, WAL_VERSION);
    sx__put_le32(h + 12, 0);
    sx__put_le64(h + 16, first_lsn);
    sx__put_le32(h + 24, 0);
    sx__put_le32(h + 28, sx__crc32c(0, h, 28));
}

/* NULL if the header is valid for a file named after first_lsn, else the reason. */
static const char *check_header(const uint8_t *h, uint64_t first_lsn)
{
    if (memcmp(h, MAGIC, 8) != 0)
        return "bad file magic";
    if (sx__le32(h + 28) != sx__crc32c(0, h, 28))
        return "file header checksum mismatch";
    if (sx__le32(h + 8) != WAL_VERSION)
        return "unsupported WAL version";
    if (sx__le32(h + 12) != 0 || sx__le32(h + 24) != 0)
        return "unknown file header flags";
    if (sx__le64(h + 16) != first_lsn)
        return "file header LSN does not match the file name";
    return NULL;
}

/* ------------------------------------------------------------------ names */

/* "<dir>/wal-<lsn>.log". Owned (sx__free). */
static sx_status file_path(const char *dir, uint64_t lsn, char **out)
{
    size_t n = strlen(dir) + 1 + NAME_LEN + 1;
    char *p = sx__malloc(n);
    if (!p)
        return sx__err(SX_ENOMEM, "WAL %s: out of memory", dir);
    int k = snprintf(p, n, "%s/wal-%020" PRIu64 ".log", dir, lsn);
    if (k < 0 || (size_t)k >= n) {
        sx__free(p);
        return sx__err(SX_EINVAL, "WAL %s: path too long", dir);
    }
    *out = p;
    return SX_OK;
}

/* Parses "wal-<20 digits>.log". Other names (tmp files, foreign files) are not WAL files. */
static bool parse_name(const char *name, uint64_t *lsn)
{
    if (strlen(name) != NAME_LEN || memcmp(name, "wal-", 4) != 0 ||
        memcmp(name + 24, ".log", 4) != 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 4; i < 24; i++) {
        if (name[i] < '0' || name[i] > '9')
            return false;
        uint64_t d = (uint64_t)(name[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *lsn = v;
    return true;
}

static int cmp_walfile(const void *a, const void *b)
{
    uint64_t x = ((const walfile *)a)->first_lsn, y = ((const walfile *)b)->first_lsn;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------ recovery scan */

/* A window over one file for sequential record reads. The returned pointers stay valid until the
 * next rd_get. */
typedef struct reader {
    sx__file *f;
    uint64_t size;
    uint8_t *buf; /* owned; reused across files */
    size_t cap;
    uint64_t win_off;
    size_t win_len;
} reader;

/* Makes [off, off + n) available; the caller guarantees off + n <= size. */
static sx_status rd_get(reader *r, uint64_t off, size_t n, const uint8_t **out)
{
    if (off >= r->win_off && off + n <= r->win_off + r->win_len) {
        *out = r->buf + (off - r->win_off);
        return SX_OK;
    }
    size_t want = n < READ_CHUNK ? READ_CHUNK : n;
    if (want > r->size - off)
        want = (size_t)(r->size - off);
    if (want > r->cap) {
        uint8_t *nb = sx__malloc(want);
        if (!nb)
            return sx__err(SX_ENOMEM, "WAL read %s: out of memory for %zu bytes",
                           sx__file_path(r->f), want);
        sx__free(r->buf);
        r->buf = nb;
        r->cap = want;
    }
    r->win_off = off;
    r->win_len = 0;
    size_t got = 0;
    sx_status st = sx__file_pread(r->f, r->buf, want, off, &got);
    if (st != SX_OK)
        return st;
    r->win_len = got;
    if (got < n)
        return sx__err(SX_EIO, "WAL %s: file shrank while reading at offset %" PRIu64,
                       sx__file_path(r->f), off);
    *out = r->buf;
    return SX_OK;
}

/* Searches (from, size) for any valid record whose LSN could follow `expect` (a torn write leaves
 * nothing valid after the tear). *found = offset, or UINT64_MAX. */
static sx_status
find_valid_after(reader *r, uint64_t from, uint64_t expect, uint64_t *found, uint64_t *found_lsn)
{
    *found = UINT64_MAX;
    uint64_t max_lsn = expect + (r->size - from) / SX__WAL_REC_OVERHEAD + 1;
    for (uint64_t off = from + 1; off + SX__WAL_REC_OVERHEAD <= r->size; off++) {
        const uint8_t *p = NULL;
        sx_status st = rd_get(r, off, REC_HDR, &p);
        if (st != SX_OK)
            return st;
        if (p[5] != 0 || p[6] != 0 || p[7] != 0)
            continue;
        uint64_t lsn = sx__le64(p + 8);
        uint32_t len = sx__le32(p);
        if (lsn < expect || lsn > max_lsn || len > SX__WAL_MAX_RECORD ||
            (uint64_t)len + SX__WAL_REC_OVERHEAD > r->size - off)
            continue;
        size_t need = SX__WAL_REC_OVERHEAD + (size_t)len;
        st = rd_get(r, off, need, &p);
        if (st != SX_OK)
            return st;
        sx__wal_rec rec;
        size_t nb;
        if (decode(p, need, &rec, &nb) == NULL) {
            *found = off;
            *found_lsn = lsn;
            return SX_OK;
        }
    }
    return SX_OK;
}

typedef struct scan_state {
    bool have_after; /* open: after_lsn is meaningful; check: no checkpoint */
    uint64_t after_lsn;
    sx__wal_replay_fn fn;
    void *ctx;
    uint64_t expect; /* LSN the next record must have */
    uint64_t n_records;
    reader rd;
    /* outcome for the last file */
    bool torn;       /* the last file ends in a torn record or header */
    bool header_bad; /* ... the torn part is the file header itself */
    uint64_t valid_end;
    /* salvage: corruption cuts the log instead of failing */
    bool salvage;
    bool salvaged;          /* a cut was made: the file it was made in is now the last */
    uint64_t salvage_bytes; /* bytes dropped from the cut file */
} scan_state;

/* Scans one file, replaying its records; sets wf->bytes to the valid length. */
static sx_status scan_file(scan_state *s, const char *path, walfile *wf, bool is_last)
{
    sx__file *f = NULL;
    const uint8_t *p;
    const char *why = NULL;
    uint64_t off = 0, size = 0, found = UINT64_MAX, found_lsn = 0;
    sx_status st = sx__file_open(path, SX__F_READ, &f);
    if (st != SX_OK)
        return st;
    s->rd.f = f;
    s->rd.win_off = 0;
    s->rd.win_len = 0;
    st = sx__file_size(f, &s->rd.size);
    if (st != SX_OK)
        goto out;
    size = s->rd.size;
    if (size < SX__WAL_HEADER_BYTES) {
        why = "truncated file header";
        goto invalid;
    }
    st = rd_get(&s->rd, 0, SX__WAL_HEADER_BYTES, &p);
    if (st != SX_OK)
        goto out;
    why = check_header(p, wf->first_lsn);
    if (why)
        goto invalid;
    off = SX__WAL_HEADER_BYTES;
    while (off < size) {
        uint64_t avail = size - off;
        if (avail < SX__WAL_REC_OVERHEAD) {
            why = "truncated record header";
            goto invalid;
        }
        st = rd_get(&s->rd, off, REC_HDR, &p);
        if (st != SX_OK)
            goto out;
        uint32_t len = sx__le32(p);
        if (len > SX__WAL_MAX_RECORD) {
            why = "record length over the limit";
            goto invalid;
        }
        if ((uint64_t)len + SX__WAL_REC_OVERHEAD > avail) {
            why = "truncated record";
            goto invalid;
        }
        size_t need = SX__WAL_REC_OVERHEAD + (size_t)len;
        st = rd_get(&s->rd, off, need, &p);
        if (st != SX_OK)
            goto out;
        sx__wal_rec rec;
        size_t nb;
        why = decode(p, need, &rec, &nb);
        if (why)
            goto invalid;
        if (rec.lsn != s->expect) {
            st = sx__err(SX_ECORRUPT,
                         "WAL %s: offset %" PRIu64 ": LSN gap: record has LSN %" PRIu64
                         ", expected %" PRIu64,
                         path, off, rec.lsn, s->expect);
            goto out;
        }
        if (s->fn && (!s->have_after || rec.lsn > s->after_lsn)) {
            st = s->fn(s->ctx, rec.lsn, rec.type, rec.payload, rec.len);
            if (st != SX_OK)
                goto out; /* the callback's status and message pass through */
        }
        s->expect++;
        s->n_records++;
        off += need;
    }
    wf->bytes = size;
    st = SX_OK;
    goto out;

invalid:
    st = find_valid_after(&s->rd, off, s->expect, &found, &found_lsn);
    if (st != SX_OK)
        goto out;
    if (s->salvage && (!is_last || found != UINT64_MAX)) {
        /* salvage: cut here as if it were a torn tail; scan_dir drops the later files */
        fprintf(stderr,
                "sextant: WAL salvage: %s: %s at offset %" PRIu64
                "; cutting the log there (%" PRIu64 " bytes%s dropped)\n",
                path, why, off, size - off, is_last ? "" : " and every later WAL file");
        s->salvaged = true;
        s->salvage_bytes = size - off;
        s->torn = true;
        s->header_bad = off == 0;
        s->valid_end = off;
        wf->bytes = off;
        st = SX_OK;
    } else if (!is_last) {
        st = sx__err(SX_ECORRUPT, "WAL %s: offset %" PRIu64 ": %s (not the last WAL file)", path,
                     off, why);
    } else if (found != UINT64_MAX) {
        st = sx__err(SX_ECORRUPT,
                     "WAL %s: offset %" PRIu64 ": %s, but a valid record (LSN %" PRIu64
                     ") follows at offset %" PRIu64,
                     path, off, why, found_lsn, found);
    } else {
        /* torn tail: everything from `off` on is dropped by open */
        s->torn = true;
        s->header_bad = off == 0;
        s->valid_end = off;
        wf->bytes = off;
        st = SX_OK;
    }
out:
    s->rd.f = NULL;
    sx_status cst = sx__file_close(f);
    (void)cst; /* read-only descriptor: a close error loses nothing */
    return st;
}

/* Lists and scans every WAL file of dir (invariant 1). On success *files (owned) lists them. */
static sx_status scan_dir(const char *dir, scan_state *s, walfile **files_out, size_t *n_out)
{
    char **names = NULL;
    size_t n_names = 0;
    walfile *files = NULL;
    size_t n = 0;
    char *path = NULL;
    sx_status st = sx__fs_list(dir, &names, &n_names);
    if (st != SX_OK)
        return st;
    if (n_names > MAX_FILES) {
        st = sx__err(SX_EINVAL, "WAL %s: too many files (%zu)", dir, n_names);
        goto out;
    }
    files = sx__calloc(n_names ? n_names : 1, sizeof *files);
    if (!files) {
        st = sx__err(SX_ENOMEM, "WAL %s: out of memory", dir);
        goto out;
    }
    for (size_t i = 0; i < n_names; i++) {
        uint64_t lsn;
        if (parse_name(names[i], &lsn))
            files[n++].first_lsn = lsn;
    }
    qsort(files, n, sizeof *files, cmp_walfile);
    if (n > 0) {
        if (files[0].first_lsn == 0) {
            st = sx__err(SX_ECORRUPT, "WAL %s: file with LSN 0 (LSNs start at 1)", dir);
            goto out;
        }
        if (s->have_after && files[0].first_lsn > s->after_lsn + 1) {
            st = sx__err(SX_ECORRUPT,
                         "WAL %s: LSN gap: the log starts at LSN %" PRIu64
                         " but records after the checkpoint LSN %" PRIu64 " are needed",
                         dir, files[0].first_lsn, s->after_lsn);
            goto out;
        }
        s->expect = files[0].first_lsn;
    }
    for (size_t i = 0; i < n; i++) {
        if (files[i].first_lsn != s->expect) {
            st = sx__err(SX_ECORRUPT,
                         "WAL %s: LSN gap: file wal-%020" PRIu64 ".log starts at LSN %" PRIu64
                         ", expected %" PRIu64,
                         dir, files[i].first_lsn, files[i].first_lsn, s->expect);
            goto out;
        }
        st = file_path(dir, files[i].first_lsn, &path);
        if (st != SX_OK)
            goto out;
        if (s->salvage) {
            /* keep a copy of the file before open may cut it */
            void *data = NULL;
            size_t len = 0;
            st = sx__fs_read_all(path, (uint64_t)1 << 40, &data, &len);
            char bak[4096];
            (void)snprintf(bak, sizeof bak, "%s.salvaged", path);
            if (st == SX_OK)
                st = sx__fs_write_atomic(bak, data, len);
            sx__free(data);
            if (st != SX_OK) {
                sx__free(path);
                goto out;
            }
        }
        st = scan_file(s, path, &files[i], i + 1 == n || s->salvage);
        if (st == SX_OK && s->salvage && !s->salvaged) {
            /* no cut in this file: its backup is not needed */
            char bak[4096];
            (void)snprintf(bak, sizeof bak, "%s.salvaged", path);
            sx__ignore(sx__fs_unlink(bak));
        }
        sx__free(path);
        path = NULL;
        if (st != SX_OK)
            goto out;
        if (s->salvaged) {
            /* the cut file is the new end of the log: set the later files aside */
            for (size_t j = i + 1; j < n; j++) {
                char *later = NULL, bak[4096];
                st = file_path(dir, files[j].first_lsn, &later);
                if (st != SX_OK)
                    goto out;
                (void)snprintf(bak, sizeof bak, "%s.salvaged", later);
                st = sx__fs_rename(later, bak);
                sx__free(later);
                if (st != SX_OK)
                    goto out;
            }
            n = i + 1;
            st = sx__fs_sync_dir(dir);
            if (st != SX_OK)
                goto out;
            break;
        }
    }
    *files_out = files;
    *n_out = n;
    files = NULL;
out:
    sx__free(files);
    for (size_t i = 0; i < n_names; i++)
        sx__free(names[i]);
    sx__free(names);
    return st;
}

/* ------------------------------------------------------------------ helpers (mu held) */

/* Makes the WAL fatal with the calling thread's current error message (invariant 5). */
static sx_status set_fatal_locked(sx__wal *w)
{
    if (!w->fatal) {
        w->fatal = true;
        (void)snprintf(w->fatal_msg, sizeof w->fatal_msg, "%s", sx_errmsg());
    }
    return sx__err(SX_EFATAL, "WAL %s failed earlier (%s): reopen the database", w->dir,
                   w->fatal_msg);
}

static sx_status fatal_err(sx__wal *w)
{
    return sx__err(SX_EFATAL, "WAL %s failed earlier (%s): reopen the database", w->dir,
                   w->fatal_msg);
}

static sx_status push_file(sx__wal *w, uint64_t first_lsn, uint64_t bytes)
{
    if (w->n_files == w->cap_files) {
        size_t ncap = w->cap_files ? w->cap_files * 2 : 8;
        walfile *nf = sx__realloc(w->files, ncap * sizeof *nf);
        if (!nf)
            return sx__err(SX_ENOMEM, "WAL %s: out of memory", w->dir);
        w->files = nf;
        w->cap_files = ncap;
    }
    w->files[w->n_files].first_lsn = first_lsn;
    w->files[w->n_files].bytes = bytes;
    w->n_files++;
    w->file_bytes += bytes;
    return SX_OK;
}

/* Creates wal-<first_lsn>.log with its header, synced with its directory entry; it becomes `cur`
 * (the caller has closed or will close the previous one). */
static sx_status create_file(sx__wal *w, uint64_t first_lsn, sx__file **out)
{
    char *path = NULL;
    sx__file *f = NULL;
    uint8_t h[SX__WAL_HEADER_BYTES];
    sx_status st = push_file(w, first_lsn, 0); /* reserve the slot first: no ENOMEM later */
    if (st != SX_OK)
        return st;
    w->n_files--;
    st = file_path(w->dir, first_lsn, &path);
    if (st != SX_OK)
        return st;
    st = sx__file_open(path, SX__F_WRITE | SX__F_CREATE | SX__F_EXCL, &f);
    if (st != SX_OK)
        goto out;
    encode_header(h, first_lsn);
    st = sx__file_append(f, h, sizeof h);
    if (st == SX_OK && w->do_sync)
        st = sx__file_sync(f);
    if (st == SX_OK && w->do_sync)
        st = sx__fs_sync_dir(w->dir);
    if (st != SX_OK) {
        /* Best effort cleanup keeping the original message; a leftover header-only file would
         * be recovered as an empty (or torn) last file. */
        char msg[256];
        (void)snprintf(msg, sizeof msg, "%s", sx_errmsg());
        (void)sx__file_close(f);
        f = NULL;
        sx_status ust = sx__fs_unlink(path);
        (void)ust;
        st = sx__err(st, "%s", msg);
        goto out;
    }
    st = push_file(w, first_lsn, SX__WAL_HEADER_BYTES);
    if (st != SX_OK)
        goto out; /* not reached: the slot was reserved above */
    *out = f;
    f = NULL;
out:
    if (f) {
        sx_status cst = sx__file_close(f);
        (void)cst;
    }
    sx__free(path);
    return st;
}

/*
 * The flush leader (invariant 4). Called and returns with mu held; drops it for the I/O.
 * want_durable: fdatasync after writing (when do_sync) and advance durable_lsn.
 */
static void lead_flush(sx__wal *w, bool want_durable)
{
    sx__wbuf taken = w->buf;
    w->buf = w->spare;
    sx__wbuf_init(&w->spare);
    uint64_t upto = w->next_lsn - 1;
    bool do_fsync = want_durable && w->do_sync;
    sx__file *f = w->cur;
    w->flushing = true;
    sx__mutex_unlock(&w->mu);

    sx_status st = SX_OK;
    bool synced = false;
    if (taken.len > 0)
        st = sx__file_append(f, taken.data, taken.len);
    if (st == SX_OK && do_fsync) {
        st = sx__file_sync(f);
        synced = true;
    }

    sx__mutex_lock(&w->mu);
    w->flushing = false;
    if (synced)
        w->fsyncs++;
    if (st == SX_OK) {
        w->written_lsn = upto;
        if (want_durable)
            w->durable_lsn = upto;
        w->files[w->n_files - 1].bytes += taken.len;
        w->file_bytes += taken.len;
    } else {
        (void)set_fatal_locked(w); /* message: the leader's I/O error */
    }
    if (taken.cap > BUF_KEEP_BYTES) {
        sx__wbuf_fini(&taken);
    } else {
        sx__wbuf_reset(&taken);
    }
    w->spare = taken;
    pthread_cond_broadcast(&w->cv);
}

/* Waits until records up to lsn are written (want_durable: durable), leading flushes as needed.
 * mu held. SX_OK or SX_EFATAL. */
static sx_status commit_locked(sx__wal *w, uint64_t lsn, bool want_durable)
{
    for (;;) {
        uint64_t have = want_durable ? w->durable_lsn : w->written_lsn;
        if (have >= lsn)
            return SX_OK;
        if (w->fatal)
            return fatal_err(w);
        if (w->flushing) {
            sx__cond_wait(&w->cv, &w->mu);
            continue;
        }
        lead_flush(w, want_durable);
    }
}

/* Returns (mu held) once no flush is in progress and every written record is durable, leading
 * at most one flush itself: records appended meanwhile may stay in `buf`, so a steady stream of
 * appends cannot starve the caller. SX_OK or SX_EFATAL. */
static sx_status quiesce_locked(sx__wal *w)
{
    bool led = false;
    for (;;) {
        if (w->fatal)
            return fatal_err(w);
        if (w->flushing) {
            sx__cond_wait(&w->cv, &w->mu);
            continue;
        }
        if (w->durable_lsn == w->written_lsn && (led || w->written_lsn == w->next_lsn - 1))
            return SX_OK;
        lead_flush(w, true);
        led = true;
    }
}

/* ------------------------------------------------------------------ open / close */

static sx_status wal_new(const char *dir, bool do_sync, bool read_only, sx__wal **out)
{
    sx__wal *w = sx__calloc(1, sizeof *w);
    if (!w)
        return sx__err(SX_ENOMEM, "WAL %s: out of memory", dir);
    w->dir = sx__strdup(dir);
    if (!w->dir) {
        sx__free(w);
        return sx__err(SX_ENOMEM, "WAL %s: out of memory", dir);
    }
    if (sx__mutex_init(&w->mu, SX__RANK_WAL, "wal.mu") != 0) {
        sx__free(w->dir);
        sx__free(w);
        return sx__err(SX_ENOMEM, "WAL %s: cannot create a mutex", dir);
    }
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        sx__mutex_destroy(&w->mu);
        sx__free(w->dir);
        sx__free(w);
        return sx__err(SX_ENOMEM, "WAL %s: cannot create a condition variable", dir);
    }
    sx__wbuf_init(&w->buf);
    sx__wbuf_init(&w->spare);
    w->do_sync = do_sync;
    w->read_only = read_only;
    *out = w;
    return SX_OK;
}

static void wal_free(sx__wal *w)
{
    sx__wbuf_fini(&w->buf);
    sx__wbuf_fini(&w->spare);
    sx__free(w->files);
    pthread_cond_destroy(&w->cv);
    sx__mutex_destroy(&w->mu);
    sx__free(w->dir);
    sx__free(w);
}

/* Removes every WAL file (all fully checkpointed) oldest first, so an interrupted run leaves a
 * contiguous suffix. */
static sx_status remove_all_files(sx__wal *w, const walfile *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *path = NULL;
        sx_status st = file_path(w->dir, files[i].first_lsn, &path);
        if (st != SX_OK)
            return st;
        st = sx__fs_unlink(path);
        sx__free(path);
        if (st != SX_OK)
            return st;
    }
    return w->do_sync && n > 0 ? sx__fs_sync_dir(w->dir) : SX_OK;
}

/* Opens the last scanned file for appending, repairing a torn tail (invariant 7). */
static sx_status open_last(sx__wal *w, const scan_state *s)
{
    walfile *last = &w->files[w->n_files - 1];
    char *path = NULL;
    sx__file *f = NULL;
    sx_status st = file_path(w->dir, last->first_lsn, &path);
    if (st != SX_OK)
        return st;
    st = sx__file_open(path, SX__F_WRITE, &f);
    if (st != SX_OK)
        goto out;
    if (s->torn && s->header_bad) {
        uint8_t h[SX__WAL_HEADER_BYTES];
        encode_header(h, last->first_lsn);
        st = sx__file_truncate(f, 0);
        if (st == SX_OK)
            st = sx__file_append(f, h, sizeof h);
        w->file_bytes += SX__WAL_HEADER_BYTES - last->bytes;
        last->bytes = SX__WAL_HEADER_BYTES;
    } else if (s->torn) {
        st = sx__file_truncate(f, s->valid_end);
    }
    if (st == SX_OK && w->do_sync)
        st = sx__file_sync(f);
    if (st != SX_OK)
        goto out;
    w->cur = f;
    f = NULL;
out:
    if (f) {
        sx_status cst = sx__file_close(f);
        (void)cst;
    }
    sx__free(path);
    return st;
}

static sx_status wal_open(const char *dir,
                          uint64_t after_lsn,
                          bool do_sync,
                          bool read_only,
                          bool salvage,
                          sx__wal_replay_fn fn,
                          void *ctx,
                          sx__wal **out,
                          uint64_t *dropped);

sx_status sx__wal_open(const char *dir,
                       uint64_t after_lsn,
                       bool do_sync,
                       bool read_only,
                       sx__wal_replay_fn fn,
                       void *ctx,
                       sx__wal **out)
{
    return wal_open(dir, after_lsn, do_sync, read_only, false, fn, ctx, out, NULL);
}

sx_status sx__wal_open_salvage(const char *dir,
                               uint64_t after_lsn,
                               bool do_sync,
                               sx__wal_replay_fn fn,
                               void *ctx,
                               sx__wal **out,
                               uint64_t *dropped_bytes)
{
    return wal_open(dir, after_lsn, do_sync, false, true, fn, ctx, out, dropped_bytes);
}

static sx_status wal_open(const char *dir,
                          uint64_t after_lsn,
                          bool do_sync,
                          bool read_only,
                          bool salvage,
                          sx__wal_replay_fn fn,
                          void *ctx,
                          sx__wal **out,
                          uint64_t *dropped)
{
    if (!dir || !out || after_lsn >= UINT64_MAX - 1)
        return sx__err(SX_EINVAL, "sx__wal_open: bad arguments");
    sx__wal *w = NULL;
    scan_state s;
    memset(&s, 0, sizeof s);
    walfile *files = NULL;
    size_t n = 0;
    sx_status st = wal_new(dir, do_sync, read_only, &w);
    if (st != SX_OK)
        return st;
    bool existed = sx__fs_exists(dir);
    if (!existed) {
        if (read_only)
            goto empty; /* nothing to replay, nothing may be created */
        st = sx__fs_mkdir_p(dir);
        if (st != SX_OK)
            goto fail;
    }
    s.have_after = true;
    s.after_lsn = after_lsn;
    s.fn = fn;
    s.ctx = ctx;
    s.expect = after_lsn + 1;
    s.salvage = salvage;
    st = scan_dir(dir, &s, &files, &n);
    if (dropped)
        *dropped = s.salvage_bytes;
    sx__free(s.rd.buf);
    s.rd.buf = NULL;
    if (st != SX_OK)
        goto fail;
    w->files = files;
    w->n_files = w->cap_files = n;
    files = NULL;
    for (size_t i = 0; i < n; i++)
        w->file_bytes += w->files[i].bytes;
    if (read_only) {
        w->next_lsn = s.expect > after_lsn ? s.expect : after_lsn + 1;
        goto done;
    }
    if (n > 0 && s.expect <= after_lsn) {
        /* The log ends before the checkpoint (e.g. SX_SYNC_NONE lost its tail but the manifest
         * survived): every record is checkpointed; start over at after_lsn + 1 (invariant 1). */
        st = remove_all_files(w, w->files, n);
        if (st != SX_OK)
            goto fail;
        w->n_files = 0;
        w->file_bytes = 0;
    }
    if (w->n_files == 0) {
        st = create_file(w, after_lsn + 1, &w->cur);
        if (st != SX_OK)
            goto fail;
        w->next_lsn = after_lsn + 1;
    } else {
        st = open_last(w, &s);
        if (st != SX_OK)
            goto fail;
        w->next_lsn = s.expect;
    }
    if (!existed && do_sync) {
        /* the new directory's own entry, so the WAL is found after a crash */
        char *parent = NULL;
        const char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            parent = sx__strndup(dir, (size_t)(slash - dir));
            if (!parent) {
                st = sx__err(SX_ENOMEM, "WAL %s: out of memory", dir);
                goto fail;
            }
            st = sx__fs_sync_dir(parent);
            sx__free(parent);
            if (st != SX_OK)
                goto fail;
        }
    }
    goto done;
empty:
    w->next_lsn = after_lsn + 1;
done:
    w->written_lsn = w->durable_lsn = w->next_lsn - 1;
    *out = w;
    return SX_OK;
fail:
    sx__free(files);
    if (w->cur) {
        sx_status cst = sx__file_close(w->cur);
        (void)cst;
    }
    wal_free(w);
    return st;
}

sx_status sx__wal_close(sx__wal *w)
{
    if (!w)
        return SX_OK;
    sx_status st = SX_OK;
    sx__mutex_lock(&w->mu);
    if (!w->read_only)
        st = w->fatal ? fatal_err(w) : commit_locked(w, w->next_lsn - 1, true);
    sx__mutex_unlock(&w->mu);
    if (w->cur) {
        sx_status cst = sx__file_close(w->cur);
        if (st == SX_OK)
            st = cst;
        w->cur = NULL;
    }
    wal_free(w);
    return st;
}

/* ------------------------------------------------------------------ append / sync */

sx_status sx__wal_append(sx__wal *w, uint8_t type, const void *payload, size_t len, uint64_t *lsn)
{
    if (len > SX__WAL_MAX_RECORD)
        return sx__err(SX_EINVAL, "WAL record of %zu bytes is over the limit of %u bytes", len,
                       SX__WAL_MAX_RECORD);
    if (len > 0 && !payload)
        return sx__err(SX_EINVAL, "WAL append: NULL payload");
    sx_status st = SX_OK;
    sx__mutex_lock(&w->mu);
    if (w->fatal) {
        st = fatal_err(w);
        goto out;
    }
    if (w->read_only) {
        st = sx__err(SX_EINVAL, "WAL %s is open read-only", w->dir);
        goto out;
    }
    size_t rec = SX__WAL_REC_OVERHEAD + len;
    while (w->buf.len > 0 && w->buf.len + rec > BUF_FLUSH_BYTES) {
        st = commit_locked(w, w->next_lsn - 1, false);
        if (st != SX_OK)
            goto out;
    }
    size_t start = w->buf.len;
    sx__wal_record_encode(&w->buf, w->next_lsn, type, payload, len);
    if (!sx__wbuf_ok(&w->buf)) {
        w->buf.len = start;
        w->buf.failed = false;
        st = sx__err(SX_ENOMEM, "WAL %s: out of memory for a %zu-byte record", w->dir, len);
        goto out;
    }
    *lsn = w->next_lsn++;
out:
    sx__mutex_unlock(&w->mu);
    return st;
}

sx_status sx__wal_sync(sx__wal *w, uint64_t lsn)
{
    sx_status st;
    sx__mutex_lock(&w->mu);
    if (w->fatal) {
        st = fatal_err(w);
    } else {
        if (lsn > w->next_lsn - 1)
            lsn = w->next_lsn - 1; /* nothing beyond the last append can be waited for */
        st = commit_locked(w, lsn, true);
    }
    sx__mutex_unlock(&w->mu);
    return st;
}

/* ------------------------------------------------------------------ files */

sx_status sx__wal_rotate(sx__wal *w, uint64_t *next_lsn)
{
    if (w->read_only)
        return sx__err(SX_EINVAL, "WAL %s is open read-only", w->dir);
    sx__mutex_lock(&w->mu);
    sx_status st = quiesce_locked(w);
    if (st != SX_OK)
        goto out;
    /* No leader runs and none can start while we hold mu (invariant 4); everything written is
     * durable. Records still in `buf` (appended during our flush) go to the new file. */
    uint64_t first = w->written_lsn + 1;
    if (w->files[w->n_files - 1].first_lsn == first) {
        *next_lsn = w->next_lsn; /* the current file holds no record: nothing to rotate */
        goto out;
    }
    sx__file *old = w->cur;
    sx__file *nf = NULL;
    st = create_file(w, first, &nf);
    if (st != SX_OK) {
        st = set_fatal_locked(w); /* the new file's state is unknown: stop writing */
        goto out;
    }
    w->cur = nf;
    /* The old file was fdatasynced above; a close error cannot lose its data. */
    sx_status cst = sx__file_close(old);
    (void)cst;
    *next_lsn = w->next_lsn;
out:
    sx__mutex_unlock(&w->mu);
    return st;
}

sx_status sx__wal_truncate_before(sx__wal *w, uint64_t lsn)
{
    if (w->read_only)
        return sx__err(SX_EINVAL, "WAL %s is open read-only", w->dir);
    sx_status st = SX_OK;
    sx__mutex_lock(&w->mu);
    if (w->fatal) {
        st = fatal_err(w);
        goto out;
    }
    /* File i holds LSNs [first_i, first_{i+1}); it can go when first_{i+1} <= lsn. The last
     * (current) file is never deleted. */
    size_t k = 0;
    while (k + 1 < w->n_files && w->files[k + 1].first_lsn <= lsn)
        k++;
    size_t removed = 0;
    for (; removed < k; removed++) {
        char *path = NULL;
        st = file_path(w->dir, w->files[removed].first_lsn, &path);
        if (st != SX_OK)
            break;
        st = sx__fs_unlink(path);
        sx__free(path);
        if (st != SX_OK)
            break;
        w->file_bytes -= w->files[removed].bytes;
    }
    if (removed > 0) {
        memmove(w->files, w->files + removed, (w->n_files - removed) * sizeof *w->files);
        w->n_files -= removed;
        if (w->do_sync) {
            sx_status sst = sx__fs_sync_dir(w->dir);
            if (sst != SX_OK)
                st = set_fatal_locked(w);
        }
    }
out:
    sx__mutex_unlock(&w->mu);
    return st;
}

/* ------------------------------------------------------------------ accessors */

uint64_t sx__wal_last_lsn(sx__wal *w)
{
    sx__mutex_lock(&w->mu);
    uint64_t v = w->next_lsn - 1;
    sx__mutex_unlock(&w->mu);
    return v;
}

uint64_t sx__wal_durable_lsn(sx__wal *w)
{
    sx__mutex_lock(&w->mu);
    uint64_t v = w->durable_lsn;
    sx__mutex_unlock(&w->mu);
    return v;
}

uint64_t sx__wal_bytes(sx__wal *w)
{
    sx__mutex_lock(&w->mu);
    uint64_t v = w->file_bytes + w->buf.len;
    sx__mutex_unlock(&w->mu);
    return v;
}

uint64_t sx__wal_fsync_count(sx__wal *w)
{
    sx__mutex_lock(&w->mu);
    uint64_t v = w->fsyncs;
    sx__mutex_unlock(&w->mu);
    return v;
}

bool sx__wal_is_fatal(sx__wal *w)
{
    sx__mutex_lock(&w->mu);
    bool v = w->fatal;
    sx__mutex_unlock(&w->mu);
    return v;
}

sx_status sx__wal_check(const char *dir, uint64_t *n_records)
{
    scan_state s;
    memset(&s, 0, sizeof s);
    s.expect = 1;
    walfile *files = NULL;
    size_t n = 0;
    sx_status st = scan_dir(dir, &s, &files, &n);
    sx__free(s.rd.buf);
    if (st != SX_OK)
        return st;
    sx__free(files);
    *n_records = s.n_records;
    return SX_OK;
}
