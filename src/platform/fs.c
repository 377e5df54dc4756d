/*
 * fs.c: the I/O seam over POSIX (see fs.h). Every byte the storage layer reads or writes, every
 * fsync, rename and directory operation goes through here, so one file decides how system call
 * quirks are handled and where faults are injected.
 *
 * Format: none of its own. sx__fs_write_atomic writes `<path>.tmp` next to the target.
 *
 * Invariants:
 *  1. A sx__file's append position (`append_off`) equals the byte offset just past the last byte
 *     this handle appended, or the file size at open / after sx__file_truncate. It only moves by
 *     bytes the kernel reported written, so after a partial failure it still matches the file.
 *  2. Writes loop over short counts and EINTR until all bytes are written or a real error occurs;
 *     a zero-byte write for a non-empty request is reported as EIO, never spun on.
 *  3. fdatasync/fsync are called at most once per sx__file_sync / sx__fs_sync_dir call: a failure
 *     (EINTR included) is reported, never retried. After a failed fsync the kernel may already
 *     have dropped the dirty pages and marked them clean, so a retry that "succeeds" would lie.
 *     The caller (WAL, segment writer) turns the failure into its sticky FATAL state.
 *  4. Every error message names the path (and the operation); errno is mapped by sx__err_errno
 *     and never escapes this file.
 *  5. sx__fs_write_atomic: tmp written and fdatasynced before the rename, the directory fsynced
 *     after it. A crash leaves the old or the new contents at `path` (plus maybe a stale .tmp).
 *     On failure before the rename the tmp file is removed and `path` is untouched.
 *  6. Fault injection: each faultable call first counts itself (calls[op]) and then consults the
 *     op's countdown. A fault fires before the system call, so nothing reaches the disk; the
 *     errno set with sx__fault_set is reported exactly as a real failure would be.
 *
 * Fault state machine per op: DISARMED (countdown <= 0, sticky false) --sx__fault_set(n>0)-->
 * ARMED --n-th call (fault_hit)--> DISARMED, or STICKY when persistent (every later call fails)
 * --sx__fault_set/sx__fault_clear_all--> DISARMED.
 *
 * Threading: a sx__file is used by one thread at a time (the WAL's flush leader, a segment
 * writer). The fault controls are process-global atomics so tests may arm them while WAL threads
 * run; the counters use relaxed order (pure counts), the arm/fire handshake release/acquire so a
 * thread that sees the countdown also sees its errno and persistent flag.
 * Rejected: an LD_PRELOAD shim or libfiu (global, needs an extra package, cannot target only the
 * storage layer's calls); a function-pointer VFS (an indirection on every call for tests only).
 */
#include "platform/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/err.h"

struct sx__file {
    int fd;
    char *path;          /* owned */
    uint64_t append_off; /* invariant 1 */
};

/* Hard cap on the entries sx__fs_list returns (a growing buffer carries a cap). */
#define LIST_MAX_ENTRIES (1u << 24)

/* ------------------------------------------------------------------ fault injection */

typedef struct fault_state {
    atomic_long countdown; /* > 0: armed; the call that takes it from 1 to 0 fails */
    atomic_int err;        /* errno to report */
    atomic_bool persistent;
    atomic_bool sticky; /* a persistent fault fired: every call fails */
    atomic_long calls;  /* calls of this op since start */
} fault_state;

static fault_state faults[SX__FAULT_OP_COUNT];

void sx__fault_set(sx__fault_op op, long countdown, int err, bool persistent)
{
    if ((unsigned)op >= SX__FAULT_OP_COUNT)
        return;
    fault_state *f = &faults[op];
    /* Disarm first so a concurrent call never sees the new countdown with the old errno. */
    atomic_store_explicit(&f->countdown, 0, memory_order_release);
    atomic_store_explicit(&f->sticky, false, memory_order_release);
    atomic_store_explicit(&f->err, err ? err : EIO, memory_order_relaxed);
    atomic_store_explicit(&f->persistent, persistent, memory_order_relaxed);
    /* release: publishes err/persistent to the thread that acquires the countdown */
    atomic_store_explicit(&f->countdown, countdown > 0 ? countdown : 0, memory_order_release);
}

void sx__fault_clear_all(void)
{
    for (int op = 0; op < SX__FAULT_OP_COUNT; op++)
        sx__fault_set((sx__fault_op)op, 0, EIO, false);
}

long sx__fault_calls(sx__fault_op op)
{
    if ((unsigned)op >= SX__FAULT_OP_COUNT)
        return 0;
    return atomic_load_explicit(&faults[op].calls, memory_order_relaxed);
}

/* Counts the call and returns the errno to fail it with, or 0 (invariant 6). */
static int fault_hit(sx__fault_op op)
{
    fault_state *f = &faults[op];
    atomic_fetch_add_explicit(&f->calls, 1, memory_order_relaxed);
    if (atomic_load_explicit(&f->sticky, memory_order_acquire))
        return atomic_load_explicit(&f->err, memory_order_relaxed);
    if (atomic_load_explicit(&f->countdown, memory_order_acquire) <= 0)
        return 0;
    /* acq_rel: exactly one caller sees 1, and it sees the err/persistent stored before arming */
    long prev = atomic_fetch_sub_explicit(&f->countdown, 1, memory_order_acq_rel);
    if (prev != 1) {
        if (prev <= 0) /* lost a race with another caller or a disarm: undo, stay disarmed */
            atomic_fetch_add_explicit(&f->countdown, 1, memory_order_relaxed);
        return 0;
    }
    if (atomic_load_explicit(&f->persistent, memory_order_relaxed))
        atomic_store_explicit(&f->sticky, true, memory_order_release);
    return atomic_load_explicit(&f->err, memory_order_relaxed);
}

/* ------------------------------------------------------------------ files */

static int open_flags(int flags)
{
    int o = O_CLOEXEC;
    o |= (flags & SX__F_WRITE) ? O_RDWR : O_RDONLY;
    if (flags & SX__F_CREATE)
        o |= O_CREAT;
    if (flags & SX__F_TRUNC)
        o |= O_TRUNC;
    if (flags & SX__F_EXCL)
        o |= O_EXCL;
    return o;
}

sx_status sx__file_open(const char *path, int flags, sx__file **out)
{
    if (!path || !out || (flags & (SX__F_READ | SX__F_WRITE)) == 0)
        return sx__err(SX_EINVAL, "sx__file_open: bad arguments");
    if ((flags & (SX__F_CREATE | SX__F_TRUNC)) && !(flags & SX__F_WRITE))
        return sx__err(SX_EINVAL, "open %s: create/truncate needs write access", path);
    int e = fault_hit(SX__FAULT_OPEN);
    if (e)
        return sx__err_errno(e, "open %s", path);
    sx__file *f = sx__malloc(sizeof *f);
    char *p = sx__strdup(path);
    if (!f || !p) {
        sx__free(f);
        sx__free(p);
        return sx__err(SX_ENOMEM, "open %s: out of memory", path);
    }
    int fd;
    do {
        fd = open(path, open_flags(flags), 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        e = errno;
        sx__free(f);
        sx__free(p);
        return sx__err_errno(e, "open %s", path);
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        e = errno;
        (void)close(fd);
        sx__free(f);
        sx__free(p);
        return sx__err_errno(e, "fstat %s", path);
    }
    f->fd = fd;
    f->path = p;
    f->append_off = (uint64_t)sb.st_size;
    *out = f;
    return SX_OK;
}

const char *sx__file_path(const sx__file *f)
{
    return f ? f->path : "(null)";
}

/* I/O accounting: relaxed, statistics only (no ordering with the data they count). */
static _Atomic uint64_t io_read_ops, io_read_bytes, io_write_ops, io_write_bytes, io_fsyncs;

/* ------------------------------------------------------------------ I/O profile
 *
 * The profile (sx_io_profile_get) splits the same operations by phase and backend. The phase is
 * a thread-local set by the engine at its entry points (sx_io_phase_set), so attribution costs
 * one TLS read per operation and no lock. Each cell is a set of independent relaxed atomics: a
 * snapshot may be mid-update by one operation (ops counted, histogram not yet), which is fine for
 * statistics. Invariants: for every cell, sum(hist) == ops once quiescent; the LOCAL backend
 * summed over phases equals sx_io_stats (both are updated by sx__io_note_read/write only).
 * Rejected: per-thread counter blocks merged on read (needs a registry of live threads and their
 * exit; the relaxed fetch_add on a shared line is cheap beside a system call or an HTTP request).
 */
typedef struct prof_dir {
    _Atomic uint64_t ops, bytes;
    _Atomic uint64_t hist[SX_IO_SIZE_BUCKETS];
} prof_dir;

static prof_dir prof[SX_IO_PHASES][SX_IO_BACKENDS][2]; /* [phase][backend][is_write] */

static _Thread_local sx_io_phase cur_phase = SX_IO_PHASE_OTHER;

/* Bucket of one operation of `bytes`: 0 for <= 4 KiB, i for <= 4 KiB << i, the last for larger. */
static unsigned size_bucket(uint64_t bytes)
{
    unsigned b = 0;
    uint64_t lim = 4096;
    while (b < SX_IO_SIZE_BUCKETS - 1 && bytes > lim) {
        lim <<= 1;
        b++;
    }
    return b;
}

/* `ops` operations totalling `bytes` (equal sizes) on backend b, in the calling thread's phase. */
static void profile_add(sx__io_backend b, bool is_write, uint64_t ops, uint64_t bytes)
{
    if ((unsigned)b >= SX_IO_BACKENDS || (ops == 0 && bytes == 0))
        return;
    prof_dir *d = &prof[cur_phase][b][is_write ? 1 : 0];
    atomic_fetch_add_explicit(&d->ops, ops, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->bytes, bytes, memory_order_relaxed);
    if (ops > 0)
        atomic_fetch_add_explicit(&d->hist[size_bucket(bytes / ops)], ops, memory_order_relaxed);
}

sx_io_phase sx_io_phase_set(sx_io_phase p)
{
    sx_io_phase prev = cur_phase;
    cur_phase = (unsigned)p < SX_IO_PHASES ? p : SX_IO_PHASE_OTHER;
    return prev;
}

void sx_io_profile_get(sx_io_profile *out)
{
    if (!out)
        return;
    for (int ph = 0; ph < SX_IO_PHASES; ph++) {
        for (int b = 0; b < SX_IO_BACKENDS; b++) {
            sx_io_counter *c = &out->c[ph][b];
            const prof_dir *r = &prof[ph][b][0], *w = &prof[ph][b][1];
            c->read_ops = atomic_load_explicit(&r->ops, memory_order_relaxed);
            c->read_bytes = atomic_load_explicit(&r->bytes, memory_order_relaxed);
            c->write_ops = atomic_load_explicit(&w->ops, memory_order_relaxed);
            c->write_bytes = atomic_load_explicit(&w->bytes, memory_order_relaxed);
            for (int i = 0; i < SX_IO_SIZE_BUCKETS; i++) {
                c->read_hist[i] = atomic_load_explicit(&r->hist[i], memory_order_relaxed);
                c->write_hist[i] = atomic_load_explicit(&w->hist[i], memory_order_relaxed);
            }
        }
    }
}

void sx__io_note_read(uint64_t ops, uint64_t bytes)
{
    atomic_fetch_add_explicit(&io_read_ops, ops, memory_order_relaxed);
    atomic_fetch_add_explicit(&io_read_bytes, bytes, memory_order_relaxed);
    profile_add(SX__IO_LOCAL, false, ops, bytes);
}

void sx__io_note_write(uint64_t ops, uint64_t bytes)
{
    atomic_fetch_add_explicit(&io_write_ops, ops, memory_order_relaxed);
    atomic_fetch_add_explicit(&io_write_bytes, bytes, memory_order_relaxed);
    profile_add(SX__IO_LOCAL, true, ops, bytes);
}

void sx__io_record(sx__io_backend b, bool is_write, uint64_t bytes)
{
    /* A LOCAL record goes through the note functions so sx_io_stats keeps matching the profile's
     * local column; object-store requests are in the profile only (sx_io_stats is local files). */
    if (b == SX__IO_LOCAL) {
        if (is_write)
            sx__io_note_write(1, bytes);
        else
            sx__io_note_read(1, bytes);
        return;
    }
    profile_add(b, is_write, 1, bytes);
}

void sx_io_stats_get(sx_io_stats *out)
{
    if (!out)
        return;
    out->read_ops = atomic_load_explicit(&io_read_ops, memory_order_relaxed);
    out->read_bytes = atomic_load_explicit(&io_read_bytes, memory_order_relaxed);
    out->write_ops = atomic_load_explicit(&io_write_ops, memory_order_relaxed);
    out->write_bytes = atomic_load_explicit(&io_write_bytes, memory_order_relaxed);
    out->fsyncs = atomic_load_explicit(&io_fsyncs, memory_order_relaxed);
}

/* ------------------------------------------------------------------ simulated power loss */

/* One unsynced change of a file: the bytes [off, off + n_old) it overwrote (old), the file size
 * before it (old_size), and the extent it wrote [off, end). A truncate is a record with
 * end == off == the new size and the cut bytes in old. */
typedef struct pl_rec {
    char *path;
    uint64_t off, end, old_size;
    uint8_t *old;
    size_t n_old;
    struct pl_rec *next;
} pl_rec;

static pthread_mutex_t pl_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool pl_on;
static pl_rec *pl_head, *pl_tail;       /* guarded by pl_mu; oldest first */
static uint64_t pl_rng;                 /* guarded by pl_mu */
static uint64_t pl_writes, pl_crash_at; /* guarded by pl_mu */

void sx__powerloss_enable(uint64_t seed, uint64_t crash_after_writes)
{
    pthread_mutex_lock(&pl_mu);
    pl_rng = seed | 1;
    pl_writes = 0;
    pl_crash_at = crash_after_writes;
    atomic_store(&pl_on, true);
    pthread_mutex_unlock(&pl_mu);
}

static uint64_t pl_rand(void)
{
    pl_rng ^= pl_rng >> 12;
    pl_rng ^= pl_rng << 25;
    pl_rng ^= pl_rng >> 27;
    return pl_rng * 2685821657736338717ull;
}

/* Records what a change of [off, end) (or a truncate to `off` when truncate) is about to
 * replace. Caller holds pl_mu. Best effort: an allocation failure records nothing (the test
 * would then be weaker, never wrong). */
static void pl_record(int fd, const char *path, uint64_t off, uint64_t end, bool truncate)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return;
    uint64_t size = (uint64_t)sb.st_size;
    pl_rec *r = calloc(1, sizeof *r); /* test-only bookkeeping: libc, outside the fault countdown */
    if (!r)
        return;
    r->path = strdup(path);
    r->off = off;
    r->end = end;
    r->old_size = size;
    uint64_t lo = off, hi = truncate ? size : (end < size ? end : size);
    if (hi > lo) {
        r->n_old = (size_t)(hi - lo);
        r->old = malloc(r->n_old);
        if (r->old && pread(fd, r->old, r->n_old, (off_t)lo) != (ssize_t)r->n_old) {
            free(r->old);
            r->old = NULL;
        }
    }
    if (!r->path || (r->n_old && !r->old)) {
        free(r->path);
        free(r->old);
        free(r);
        return;
    }
    if (pl_tail)
        pl_tail->next = r;
    else
        pl_head = r;
    pl_tail = r;
}

/* fsync of path: its records are durable now. Caller holds pl_mu. */
static void pl_synced(const char *path)
{
    pl_rec **pp = &pl_head;
    pl_tail = NULL;
    while (*pp) {
        pl_rec *r = *pp;
        if (strcmp(r->path, path) == 0) {
            *pp = r->next;
            free(r->path);
            free(r->old);
            free(r);
            continue;
        }
        pl_tail = r;
        pp = &r->next;
    }
}

/* rename: pending records follow the file; unlink (to == NULL): they go with it. Caller holds
 * pl_mu. */
static void pl_moved(const char *from, const char *to)
{
    if (!to) {
        pl_synced(from);
        return;
    }
    for (pl_rec *r = pl_head; r; r = r->next) {
        if (strcmp(r->path, from) == 0) {
            char *np = strdup(to);
            if (np) {
                free(r->path);
                r->path = np;
            }
        }
    }
}

/* Applies the loss to one file: recs[0..n) are its pending records, oldest first. */
static void pl_apply(const char *path, pl_rec **recs, size_t n)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    /* Decide per record: dropped, kept, or (the newest kept write) torn at a 512 B boundary. */
    bool *drop = calloc(n, sizeof *drop);
    uint64_t *cut = calloc(n, sizeof *cut); /* surviving end of each write */
    if (!drop || !cut) {
        free(drop);
        free(cut);
        close(fd);
        return;
    }
    bool torn = false;
    for (size_t i = n; i-- > 0;) {
        pl_rec *r = recs[i];
        drop[i] = pl_rand() & 1;
        cut[i] = r->end;
        if (!drop[i] && !torn && r->end > r->off) {
            torn = true;
            cut[i] = r->off + (pl_rand() % ((r->end - r->off) / 512 + 1)) * 512;
            if (cut[i] > r->end)
                cut[i] = r->end;
        }
    }
    /* Bytes: newest first, put back what dropped (or torn-off) parts replaced. */
    for (size_t i = n; i-- > 0;) {
        pl_rec *r = recs[i];
        uint64_t from = drop[i] ? r->off : cut[i];
        uint64_t old_end = r->off + r->n_old;
        if (from < old_end)
            (void)!pwrite(fd, r->old + (from - r->off), (size_t)(old_end - from), (off_t)from);
    }
    /* Size: replay the surviving operations in order. */
    uint64_t size = recs[0]->old_size;
    for (size_t i = 0; i < n; i++) {
        pl_rec *r = recs[i];
        if (drop[i])
            continue;
        if (r->end == r->off && r->n_old) /* a truncate */
            size = r->off;
        else if (cut[i] > size)
            size = cut[i];
    }
    (void)!ftruncate(fd, (off_t)size);
    /* Lost extensions inside the surviving size read as zeros (unwritten blocks). */
    static const uint8_t zeros[4096];
    for (size_t i = 0; i < n; i++) {
        pl_rec *r = recs[i];
        uint64_t z0 = drop[i] ? r->off : cut[i];
        if (z0 < r->off + r->n_old)
            z0 = r->off + r->n_old;
        uint64_t z1 = r->end < size ? r->end : size;
        for (uint64_t at = z0; at < z1;) {
            size_t chunk = z1 - at > sizeof zeros ? sizeof zeros : (size_t)(z1 - at);
            (void)!pwrite(fd, zeros, chunk, (off_t)at);
            at += chunk;
        }
    }
    free(drop);
    free(cut);
    close(fd);
}

_Noreturn void sx__powerloss_crash(void)
{
    pthread_mutex_lock(&pl_mu); /* never released: every later write blocks until _exit */
    for (pl_rec *a = pl_head; a; a = a->next) {
        bool first = true; /* each file once, at its oldest record */
        for (pl_rec *b = pl_head; b != a; b = b->next)
            if (strcmp(b->path, a->path) == 0)
                first = false;
        if (!first)
            continue;
        size_t n = 0;
        for (pl_rec *r = a; r; r = r->next)
            n += strcmp(r->path, a->path) == 0;
        pl_rec **recs = calloc(n, sizeof *recs);
        if (!recs)
            continue;
        size_t k = 0;
        for (pl_rec *r = a; r && k < n; r = r->next)
            if (strcmp(r->path, a->path) == 0)
                recs[k++] = r;
        pl_apply(a->path, recs, k); /* k == n: the records just counted */
        free(recs);
    }
    _exit(0);
}

static sx_status write_raw(sx__file *f, const void *p, size_t n, uint64_t off, size_t *done);

/* pwrite all n bytes at off (invariant 2); *done receives the bytes written even on failure.
 * With simulated power loss on, the write is recorded and done under pl_mu, so a crash never
 * races a write in progress. */
static sx_status write_all(sx__file *f, const void *p, size_t n, uint64_t off, size_t *done)
{
    *done = 0;
    int e = fault_hit(SX__FAULT_WRITE);
    if (e)
        return sx__err_errno(e, "write %s at offset %llu", f->path, (unsigned long long)off);
    if (!atomic_load_explicit(&pl_on, memory_order_acquire))
        return write_raw(f, p, n, off, done);
    pthread_mutex_lock(&pl_mu);
    pl_writes++;
    if (pl_crash_at && pl_writes >= pl_crash_at) {
        pthread_mutex_unlock(&pl_mu);
        sx__powerloss_crash();
    }
    pl_record(f->fd, f->path, off, off + n, false);
    sx_status st = write_raw(f, p, n, off, done);
    pthread_mutex_unlock(&pl_mu);
    return st;
}

static sx_status write_raw(sx__file *f, const void *p, size_t n, uint64_t off, size_t *done)
{
    const uint8_t *b = p;
    size_t left = n;
    while (left > 0) {
        size_t chunk = left > (size_t)1 << 30 ? (size_t)1 << 30 : left;
        ssize_t w = pwrite(f->fd, b, chunk, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return sx__err_errno(errno, "write %s at offset %llu", f->path,
                                 (unsigned long long)off);
        }
        if (w == 0)
            return sx__err_errno(EIO, "write %s at offset %llu wrote nothing", f->path,
                                 (unsigned long long)off);
        b += w;
        off += (uint64_t)w;
        left -= (size_t)w;
        *done += (size_t)w;
    }
    sx__io_note_write(1, n);
    return SX_OK;
}

sx_status sx__file_append(sx__file *f, const void *p, size_t n)
{
    size_t done = 0;
    sx_status st = write_all(f, p, n, f->append_off, &done);
    f->append_off += done;
    return st;
}

sx_status sx__file_pwrite(sx__file *f, const void *p, size_t n, uint64_t off)
{
    size_t done = 0;
    sx_status st = write_all(f, p, n, off, &done);
    if (off + done > f->append_off)
        f->append_off = off + done;
    return st;
}

sx_status sx__file_pread(sx__file *f, void *p, size_t n, uint64_t off, size_t *got)
{
    uint8_t *b = p;
    size_t total = 0;
    while (total < n) {
        size_t chunk = n - total > (size_t)1 << 30 ? (size_t)1 << 30 : n - total;
        uint64_t at = off + (uint64_t)total;
        ssize_t r = pread(f->fd, b + total, chunk, (off_t)at);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return sx__err_errno(errno, "read %s at offset %llu", f->path, (unsigned long long)at);
        }
        if (r == 0)
            break; /* end of file */
        total += (size_t)r;
    }
    sx__io_note_read(1, total);
    *got = total;
    return SX_OK;
}

sx_status sx__file_sync(sx__file *f)
{
    int e = fault_hit(SX__FAULT_SYNC);
    if (e)
        return sx__err_errno(e, "fdatasync %s", f->path);
    atomic_fetch_add_explicit(&io_fsyncs, 1, memory_order_relaxed);
    if (fdatasync(f->fd) != 0) /* invariant 3: never retried, not even on EINTR */
        return sx__err_errno(errno, "fdatasync %s", f->path);
    if (atomic_load_explicit(&pl_on, memory_order_acquire)) {
        pthread_mutex_lock(&pl_mu);
        pl_synced(f->path);
        pthread_mutex_unlock(&pl_mu);
    }
    return SX_OK;
}

sx_status sx__file_size(sx__file *f, uint64_t *out)
{
    struct stat sb;
    if (fstat(f->fd, &sb) != 0)
        return sx__err_errno(errno, "fstat %s", f->path);
    *out = (uint64_t)sb.st_size;
    return SX_OK;
}

sx_status sx__file_truncate(sx__file *f, uint64_t size)
{
    if (atomic_load_explicit(&pl_on, memory_order_acquire)) {
        pthread_mutex_lock(&pl_mu);
        pl_record(f->fd, f->path, size, size, true);
        pthread_mutex_unlock(&pl_mu);
    }
    int r;
    do {
        r = ftruncate(f->fd, (off_t)size);
    } while (r != 0 && errno == EINTR);
    if (r != 0)
        return sx__err_errno(errno, "truncate %s to %llu bytes", f->path, (unsigned long long)size);
    f->append_off = size;
    return SX_OK;
}

sx_status sx__file_close(sx__file *f)
{
    if (!f)
        return SX_OK;
    sx_status st = SX_OK;
    /* Linux releases the descriptor even when close fails (EINTR included): never retry. */
    if (close(f->fd) != 0)
        st = sx__err_errno(errno, "close %s", f->path);
    sx__free(f->path);
    sx__free(f);
    return st;
}

/* ------------------------------------------------------------------ directories */

sx_status sx__fs_mkdir(const char *path)
{
    if (mkdir(path, 0755) == 0)
        return SX_OK;
    int e = errno;
    if (e == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
            return SX_OK;
        return sx__err_errno(ENOTDIR, "mkdir %s", path);
    }
    return sx__err_errno(e, "mkdir %s", path);
}

sx_status sx__fs_mkdir_p(const char *path)
{
    if (!path || !*path)
        return sx__err(SX_EINVAL, "mkdir_p: empty path");
    char *p = sx__strdup(path);
    if (!p)
        return sx__err(SX_ENOMEM, "mkdir_p %s: out of memory", path);
    sx_status st = SX_OK;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/' || s[-1] == '/')
            continue;
        *s = '\0';
        st = sx__fs_mkdir(p);
        *s = '/';
        if (st != SX_OK)
            goto out;
    }
    st = sx__fs_mkdir(p);
out:
    sx__free(p);
    return st;
}

sx_status sx__fs_sync_dir(const char *dir)
{
    int e = fault_hit(SX__FAULT_SYNC);
    if (e)
        return sx__err_errno(e, "fsync directory %s", dir);
    int fd;
    do {
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return sx__err_errno(errno, "open directory %s", dir);
    sx_status st = SX_OK;
    atomic_fetch_add_explicit(&io_fsyncs, 1, memory_order_relaxed);
    if (fsync(fd) != 0) /* invariant 3 */
        st = sx__err_errno(errno, "fsync directory %s", dir);
    if (close(fd) != 0 && st == SX_OK)
        st = sx__err_errno(errno, "close directory %s", dir);
    return st;
}

sx_status sx__fs_rename(const char *from, const char *to)
{
    int e = fault_hit(SX__FAULT_RENAME);
    if (e)
        return sx__err_errno(e, "rename %s to %s", from, to);
    if (atomic_load_explicit(&pl_on, memory_order_acquire)) {
        pthread_mutex_lock(&pl_mu);
        pl_moved(to, NULL); /* the replaced file's pending writes are gone with it */
        pl_moved(from, to);
        pthread_mutex_unlock(&pl_mu);
    }
    if (rename(from, to) != 0)
        return sx__err_errno(errno, "rename %s to %s", from, to);
    return SX_OK;
}

sx_status sx__fs_unlink(const char *path)
{
    if (atomic_load_explicit(&pl_on, memory_order_acquire)) {
        pthread_mutex_lock(&pl_mu);
        pl_moved(path, NULL);
        pthread_mutex_unlock(&pl_mu);
    }
    if (unlink(path) != 0 && errno != ENOENT)
        return sx__err_errno(errno, "unlink %s", path);
    return SX_OK;
}

/* "<a>/<b>", owned (sx__free), or NULL on ENOMEM. */
static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + 1 + strlen(b) + 1;
    char *p = sx__malloc(n);
    if (!p)
        return NULL;
    (void)snprintf(p, n, "%s/%s", a, b);
    return p;
}

sx_status sx__fs_rmtree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT)
            return SX_OK;
        return sx__err_errno(errno, "stat %s", path);
    }
    if (!S_ISDIR(sb.st_mode))
        return sx__fs_unlink(path);
    DIR *d = opendir(path);
    if (!d)
        return sx__err_errno(errno, "opendir %s", path);
    sx_status st = SX_OK;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0)
                st = sx__err_errno(errno, "readdir %s", path);
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *child = join(path, de->d_name);
        if (!child) {
            st = sx__err(SX_ENOMEM, "rmtree %s: out of memory", path);
            break;
        }
        st = sx__fs_rmtree(child);
        sx__free(child);
        if (st != SX_OK)
            break;
    }
    (void)closedir(d);
    if (st != SX_OK)
        return st;
    if (rmdir(path) != 0 && errno != ENOENT)
        return sx__err_errno(errno, "rmdir %s", path);
    return SX_OK;
}

bool sx__fs_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

sx_status sx__fs_read_all(const char *path, uint64_t max_bytes, void **data, size_t *len)
{
    sx__file *f = NULL;
    uint8_t *buf = NULL;
    uint64_t size = 0;
    size_t got = 0;
    sx_status st = sx__file_open(path, SX__F_READ, &f);
    if (st != SX_OK)
        return st;
    st = sx__file_size(f, &size);
    if (st != SX_OK)
        goto fail;
    if (size > max_bytes || size >= SIZE_MAX) {
        st = sx__err(SX_EINVAL, "%s is %llu bytes, over the limit of %llu", path,
                     (unsigned long long)size, (unsigned long long)max_bytes);
        goto fail;
    }
    /* One spare byte: the data is NUL-terminated for text parsers (not counted in *len). */
    buf = sx__malloc((size_t)size + 1);
    if (!buf) {
        st = sx__err(SX_ENOMEM, "read %s: out of memory for %llu bytes", path,
                     (unsigned long long)size);
        goto fail;
    }
    st = sx__file_pread(f, buf, (size_t)size, 0, &got);
    if (st != SX_OK)
        goto fail;
    buf[got] = '\0';
    st = sx__file_close(f);
    f = NULL;
    if (st != SX_OK)
        goto fail;
    *data = buf;
    *len = got;
    return SX_OK;
fail:
    sx__free(buf);
    if (f) {
        sx_status cst = sx__file_close(f);
        (void)cst; /* the first error is the one reported */
    }
    return st;
}

/* Directory part of path ("." when none). Owned (sx__free) or NULL on ENOMEM. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return sx__strdup(".");
    if (slash == path)
        return sx__strdup("/");
    return sx__strndup(path, (size_t)(slash - path));
}

sx_status sx__fs_write_atomic(const char *path, const void *data, size_t len)
{
    sx__iov one = { data, len };
    return sx__fs_write_atomic_parts(path, &one, 1);
}

sx_status sx__fs_write_atomic_parts(const char *path, const sx__iov *parts, size_t nparts)
{
    size_t tmp_size = strlen(path) + sizeof ".tmp";
    char *tmp = sx__malloc(tmp_size);
    char *dir = dir_of(path);
    sx__file *f = NULL;
    bool made_tmp = false;
    sx_status st = SX_OK, cst = SX_OK;
    if (!tmp || !dir) {
        st = sx__err(SX_ENOMEM, "write %s: out of memory", path);
        goto out;
    }
    (void)snprintf(tmp, tmp_size, "%s.tmp", path);
    st = sx__file_open(tmp, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &f);
    if (st != SX_OK)
        goto out;
    made_tmp = true;
    for (size_t i = 0; st == SX_OK && i < nparts; i++)
        if (parts[i].n)
            st = sx__file_append(f, parts[i].p, parts[i].n);
    if (st == SX_OK)
        st = sx__file_sync(f);
    cst = sx__file_close(f);
    f = NULL;
    if (st == SX_OK)
        st = cst;
    if (st != SX_OK)
        goto out;
    st = sx__fs_rename(tmp, path);
    if (st != SX_OK)
        goto out;
    made_tmp = false;
    /* The rename is done; a failed directory fsync means it may not survive a crash. */
    st = sx__fs_sync_dir(dir);
out:
    if (made_tmp)
        (void)unlink(tmp); /* best effort: a stale tmp is truncated by the next write */
    sx__free(tmp);
    sx__free(dir);
    return st;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

sx_status sx__fs_list(const char *dir, char ***names, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return sx__err_errno(errno, "opendir %s", dir);
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    sx_status st = SX_OK;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0)
                st = sx__err_errno(errno, "readdir %s", dir);
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (cnt == cap) {
            if (cap >= LIST_MAX_ENTRIES) {
                st = sx__err(SX_EINVAL, "list %s: more than %u entries", dir, LIST_MAX_ENTRIES);
                break;
            }
            size_t ncap = cap ? cap * 2 : 16;
            char **nv = sx__realloc(v, ncap * sizeof *nv);
            if (!nv) {
                st = sx__err(SX_ENOMEM, "list %s: out of memory", dir);
                break;
            }
            v = nv;
            cap = ncap;
        }
        v[cnt] = sx__strdup(de->d_name);
        if (!v[cnt]) {
            st = sx__err(SX_ENOMEM, "list %s: out of memory", dir);
            break;
        }
        cnt++;
    }
    (void)closedir(d);
    if (st != SX_OK) {
        for (size_t i = 0; i < cnt; i++)
            sx__free(v[i]);
        sx__free(v);
        return st;
    }
    if (cnt > 1)
        qsort(v, cnt, sizeof *v, cmp_names);
    *names = v;
    *n = cnt;
    return SX_OK;
}

sx_status sx__fs_lock(const char *path, sx__file **out)
{
    sx__file *f = NULL;
    sx_status st = sx__file_open(path, SX__F_WRITE | SX__F_CREATE, &f);
    if (st != SX_OK)
        return st;
    int r;
    do {
        r = flock(f->fd, LOCK_EX | LOCK_NB);
    } while (r != 0 && errno == EINTR);
    if (r != 0) {
        int e = errno;
        sx_status cst = sx__file_close(f);
        (void)cst;
        if (e == EWOULDBLOCK)
            return sx__err(SX_EBUSY, "%s is locked by another process", path);
        return sx__err_errno(e, "flock %s", path);
    }
    *out = f;
    return SX_OK;
}

sx_status sx__fs_map(const char *path, void **addr, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sx__err_errno(errno, "open %s", path);
    struct stat stt;
    if (fstat(fd, &stt) != 0) {
        int e = errno;
        close(fd);
        return sx__err_errno(e, "stat %s", path);
    }
    if (stt.st_size == 0) {
        close(fd);
        *addr = NULL;
        *len = 0;
        return SX_OK;
    }
    void *p = mmap(NULL, (size_t)stt.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return sx__err_errno(e, "mmap %s", path);
    *addr = p;
    *len = (size_t)stt.st_size;
    return SX_OK;
}

void sx__fs_unmap(void *addr, size_t len)
{
    if (addr && len)
        munmap(addr, len);
}

void sx__fs_advise_random(void *addr, size_t len, bool random)
{
    if (!addr || !len)
        return;
    uintptr_t start = (uintptr_t)addr & ~(uintptr_t)4095; /* madvise wants a page start */
    uintptr_t end = (uintptr_t)addr + len;
    (void)madvise((char *)addr - ((uintptr_t)addr - start), end - start,
                  random ? MADV_RANDOM : MADV_NORMAL);
}

void sx__fs_unneeded(void *addr, size_t len)
{
    if (!addr || !len)
        return;
    /* the whole pages inside [addr, addr + len), addressed from addr (no integer-made pointer) */
    uintptr_t start = ((uintptr_t)addr + 4095) & ~(uintptr_t)4095;
    uintptr_t end = ((uintptr_t)addr + len) & ~(uintptr_t)4095;
    if (end > start)
        (void)madvise((char *)addr + (start - (uintptr_t)addr), end - start, MADV_DONTNEED);
}
