/*
 * fs.h: the I/O seam. Every file operation the storage layer does goes through here, so tests can
 * inject faults (EIO, ENOSPC on write/fsync/rename, countdown to the N-th call) and simulate a
 * power loss (writes since the last fsync of a file dropped or torn).
 *
 * Errors map errno to SX_EIO / SX_ENOSPC / SX_ENOTFOUND with the path and strerror in sx_errmsg().
 * Thread-safety: distinct sx__file handles may be used from different threads; one handle is not
 * safe for concurrent writes. The fault-injection controls are global and atomic.
 */
#ifndef SX_PLATFORM_FS_H
#define SX_PLATFORM_FS_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__file sx__file;

enum {
    SX__F_READ = 1,
    SX__F_WRITE = 2, /* read-write */
    SX__F_CREATE = 4,
    SX__F_TRUNC = 8,
    SX__F_EXCL = 16
};

SX_NODISCARD sx_status sx__file_open(const char *path, int flags, sx__file **out);
/* Writes all n bytes at the current end-of-append position (sequential writer). */
SX_NODISCARD sx_status sx__file_append(sx__file *f, const void *p, size_t n);
SX_NODISCARD sx_status sx__file_pread(sx__file *f, void *p, size_t n, uint64_t off, size_t *got);
SX_NODISCARD sx_status sx__file_pwrite(sx__file *f, const void *p, size_t n, uint64_t off);
/* fdatasync. A failure is reported, never retried by callers (sticky error above). */
SX_NODISCARD sx_status sx__file_sync(sx__file *f);
SX_NODISCARD sx_status sx__file_size(sx__file *f, uint64_t *out);
/* Truncates and moves the append position to `size`. */
SX_NODISCARD sx_status sx__file_truncate(sx__file *f, uint64_t size);
/* Closes; reports a close error. NULL is a no-op returning SX_OK. */
sx_status sx__file_close(sx__file *f);
const char *sx__file_path(const sx__file *f);

SX_NODISCARD sx_status sx__fs_mkdir(const char *path); /* EEXIST is success */
SX_NODISCARD sx_status sx__fs_mkdir_p(const char *path);
SX_NODISCARD sx_status sx__fs_sync_dir(const char *dir);
SX_NODISCARD sx_status sx__fs_rename(const char *from, const char *to);
SX_NODISCARD sx_status sx__fs_unlink(const char *path); /* ENOENT is success */
SX_NODISCARD sx_status sx__fs_rmtree(const char *path); /* recursive; ENOENT is success */
bool sx__fs_exists(const char *path);
/* Reads a whole file. Ownership: *data owned, free with sx__free. max_bytes bounds it (EINVAL). */
SX_NODISCARD sx_status sx__fs_read_all(const char *path,
                                       uint64_t max_bytes,
                                       void **data,
                                       size_t *len);
/* Atomically replaces `path`: write path.tmp, fsync it, rename over path, fsync the directory.
 * After a crash, either the old or the new contents are there, never a mix. */
SX_NODISCARD sx_status sx__fs_write_atomic(const char *path, const void *data, size_t len);

/* One piece of a file written from several buffers (borrowed). */
typedef struct sx__iov {
    const void *p;
    size_t n;
} sx__iov;

/* sx__fs_write_atomic of the concatenation of parts[0..nparts), without joining them in RAM. */
SX_NODISCARD sx_status sx__fs_write_atomic_parts(const char *path,
                                                 const sx__iov *parts,
                                                 size_t nparts);
/* Lists the names (not paths) in a directory, sorted. Ownership: sx_strings_free(names, n). */
SX_NODISCARD sx_status sx__fs_list(const char *dir, char ***names, size_t *n);
/* Takes an exclusive advisory lock (flock) on path (created if needed); SX_EBUSY if held. */
SX_NODISCARD sx_status sx__fs_lock(const char *path, sx__file **out);

/* Maps a whole file read-only (MAP_PRIVATE). *addr is page aligned; unmap with sx__fs_unmap.
 * An empty file maps to addr NULL, len 0. Errors: SX_EIO, SX_ENOTFOUND. */
SX_NODISCARD sx_status sx__fs_map(const char *path, void **addr, size_t *len);
void sx__fs_unmap(void *addr, size_t len);
/* Tells the kernel the range will not be needed soon (drops it from this process's RSS; the
 * pages stay in the page cache). */
void sx__fs_unneeded(void *addr, size_t len);
/* Access pattern of a mapped range: random (no read-around on a fault: a build touching
 * scattered rows of a file larger than the memory left for the page cache reads only the pages
 * it uses, not 128 KiB around each) or back to the default. Best effort. */
void sx__fs_advise_random(void *addr, size_t len, bool random);

/* ---- fault injection (tests) ---- */
typedef enum sx__fault_op {
    SX__FAULT_WRITE = 0, /* append / pwrite */
    SX__FAULT_SYNC,      /* file sync and dir sync */
    SX__FAULT_RENAME,
    SX__FAULT_OPEN,
    SX__FAULT_OP_COUNT
} sx__fault_op;

/* The `countdown`-th call (1 = the next) of op fails with errno `err` (EIO, ENOSPC, ...);
 * persistent = every later call fails too. countdown 0 disables the fault for op. */
/* Process-wide I/O accounting (relaxed atomics: statistics only). Every read and write through
 * this layer is counted; index code that reads files itself (DISKANN's io_uring path) reports its
 * reads with sx__io_note_read. sx_io_stats_get (sextant.h) reads the totals. */
void sx__io_note_read(uint64_t ops, uint64_t bytes);
void sx__io_note_write(uint64_t ops, uint64_t bytes);

/* The I/O profile (sx_io_profile_get in sextant.h): one operation of `bytes` on a backend,
 * attributed to the calling thread's phase (sx_io_phase_set). The local file layer records
 * through sx__io_note_read/write (sx__io_note_read(count, bytes) = `count` operations of
 * bytes/count each, as DISKANN's batched sector reads report); the S3 client (storage/s3.c) calls
 * this once per request with the payload bytes. A LOCAL record also counts in sx_io_stats (it
 * goes through sx__io_note_*), an OBJSTORE one only in the profile. Thread-safety: any thread
 * (relaxed atomics; the phase is the caller's thread-local). */
typedef enum sx__io_backend { SX__IO_LOCAL = 0, SX__IO_OBJSTORE = 1 } sx__io_backend;

void sx__io_record(sx__io_backend b, bool is_write, uint64_t bytes);

void sx__fault_set(sx__fault_op op, long countdown, int err, bool persistent);
void sx__fault_clear_all(void);

/* Simulated power loss (reliability.md T2; tests only). Once enabled, every write and truncate
 * through this layer keeps an undo record (the bytes and size it replaced) until the file is
 * fsynced: those are the writes a power cut may lose. sx__powerloss_crash() then stops every
 * later write (they block), and for each file drops a random subset of its unsynced writes
 * (restoring the old bytes, zero-filling dropped extensions, truncating to the surviving size)
 * and tears the newest surviving one at a random 512-byte boundary, as a disk losing power
 * would; then the process exits (_exit(0)) without closing anything. crash_after_writes > 0
 * crashes automatically at that write (inside whatever operation issues it: a WAL append, a
 * segment flush, a manifest write). Directory operations (create, rename, unlink) are taken as
 * durable: the engine fsyncs the directory right after each of them. */
void sx__powerloss_enable(uint64_t seed, uint64_t crash_after_writes);
_Noreturn void sx__powerloss_crash(void);
/* Number of calls of op since start (for tests that walk every call site). */
long sx__fault_calls(sx__fault_op op);

#endif
