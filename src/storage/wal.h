/*
 * wal.h: write-ahead log of one collection, with group commit. Byte format: docs/internals/
 * FORMAT-WAL.md. Records are (lsn, type, payload) with a CRC32C each; the engine defines the
 * payloads. LSNs are consecutive integers starting at 1.
 *
 * Files: <dir>/wal-<first_lsn as 20 digits>.log. Rotation starts a new file; files whose records
 * are all checkpointed are deleted by sx__wal_truncate_before.
 *
 * Group commit: append copies the record into the in-memory tail buffer under the WAL mutex and
 * returns its LSN; sync(lsn) waits until the record is durable. The first waiter with no flush in
 * progress becomes the leader: it takes the whole buffer, writes it and fdatasyncs outside the
 * mutex, then publishes the durable LSN and wakes every waiter whose LSN it covered. So N
 * concurrent small inserts share one fsync.
 *
 * Sticky failure: if a write or fsync fails, the WAL enters a FATAL state: that sync and every
 * later append/sync returns SX_EFATAL (never retry fsync: the page cache may have dropped the
 * data).
 *
 * Recovery (open): files are scanned in order; each record's header and CRC are checked. The first
 * invalid record in the LAST file is a torn tail: the file is truncated there (and synced).
 * An invalid record followed by valid data elsewhere is SX_ECORRUPT (with the file and offset).
 * Thread-safety: all functions are thread-safe except open/close.
 */
#ifndef SX_STORAGE_WAL_H
#define SX_STORAGE_WAL_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef struct sx__wal sx__wal;

#define SX__WAL_MAX_RECORD (1u << 30) /* payload bytes */

/* Called for each valid record with lsn > after_lsn, in LSN order. A non-OK return aborts open. */
typedef sx_status (*sx__wal_replay_fn)(
    void *ctx, uint64_t lsn, uint8_t type, const void *payload, size_t len);

/* Opens (creating) the WAL in `dir`, replays records after `after_lsn` to fn, truncates a torn
 * tail, and positions for appending after the last valid record (or after after_lsn if the log
 * is empty; a log that ends before after_lsn is fully checkpointed and is started over at
 * after_lsn + 1). do_sync=false never fsyncs (SX_SYNC_NONE). read_only: never modifies files (a
 * missing dir is an empty log). The payload passed to fn is borrowed for the call only.
 * Errors: SX_ECORRUPT (mid-log corruption, an LSN gap, or a log starting after after_lsn + 1:
 * the message names file and offset), SX_EIO/SX_ENOSPC, SX_ENOMEM, or fn's status. */
SX_NODISCARD sx_status sx__wal_open(const char *dir,
                                    uint64_t after_lsn,
                                    bool do_sync,
                                    bool read_only,
                                    sx__wal_replay_fn fn,
                                    void *ctx,
                                    sx__wal **out);
/* Like sx__wal_open; with salvage, mid-log corruption is not an error: the log is cut at the
 * first invalid record (every later record and file is dropped), the damaged file is copied to
 * "<file>.salvaged" and later files are renamed to "<file>.salvaged" (kept for forensics, ignored
 * by later opens), and one line on stderr says what was dropped. *dropped_bytes (optional)
 * receives the bytes cut (0: nothing was corrupt). */
SX_NODISCARD sx_status sx__wal_open_salvage(const char *dir,
                                            uint64_t after_lsn,
                                            bool do_sync,
                                            sx__wal_replay_fn fn,
                                            void *ctx,
                                            sx__wal **out,
                                            uint64_t *dropped_bytes);
/* Buffers a record; returns its LSN. Not durable until sx__wal_sync covers it. */
SX_NODISCARD sx_status
sx__wal_append(sx__wal *w, uint8_t type, const void *payload, size_t len, uint64_t *lsn);
/* Blocks until every record with LSN <= lsn is durable (lsn past the last append is clamped).
 * Errors: SX_EFATAL (this or an earlier flush failed; sticky). */
SX_NODISCARD sx_status sx__wal_sync(sx__wal *w, uint64_t lsn);
/* Flushes and starts a new file; *next_lsn = LSN the next record will get. No-op when the current
 * file holds no record. A failure makes the WAL fatal. Errors: SX_EFATAL, SX_EINVAL (read-only). */
SX_NODISCARD sx_status sx__wal_rotate(sx__wal *w, uint64_t *next_lsn);
/* Deletes whole files whose records all have LSN < lsn. */
SX_NODISCARD sx_status sx__wal_truncate_before(sx__wal *w, uint64_t lsn);
uint64_t sx__wal_last_lsn(sx__wal *w);
uint64_t sx__wal_bytes(sx__wal *w);
bool sx__wal_is_fatal(sx__wal *w);
/* Closes (flushes and syncs buffered records first; returns the first error). NULL: SX_OK. */
sx_status sx__wal_close(sx__wal *w);

/* Records up to this LSN are durable (written and, with do_sync, fdatasynced). */
uint64_t sx__wal_durable_lsn(sx__wal *w);
/* Number of fdatasync calls this WAL made on record data (not headers or directories); for tests
 * of group commit. */
uint64_t sx__wal_fsync_count(sx__wal *w);

/* ---- record codec (also used by the offline checker and the fuzz harness) ---- */
#define SX__WAL_HEADER_BYTES 32u /* file header */
#define SX__WAL_REC_OVERHEAD 20u /* record header (16) + CRC (4) */

typedef struct sx__wal_rec {
    uint64_t lsn;
    uint8_t type;
    const void *payload; /* borrowed: points into the decoded bytes */
    size_t len;
} sx__wal_rec;

/* Appends the encoded record to wb (check sx__wbuf_ok). */
void sx__wal_record_encode(
    sx__wbuf *wb, uint64_t lsn, uint8_t type, const void *payload, size_t len);
/* Decodes the record at the start of p[0..n): SX_OK with *rec (payload borrowed from p) and
 * *rec_bytes (encoded size), or SX_ECORRUPT (truncated, bad length, reserved bits, CRC). Does not
 * check the LSN sequence. Never reads outside p[0..n). Thread-safety: pure. */
SX_NODISCARD sx_status sx__wal_record_decode(const void *p,
                                             size_t n,
                                             sx__wal_rec *rec,
                                             size_t *rec_bytes);

/* Offline check of a WAL directory (sextant info / sx_db_check): every record's CRC and LSN order,
 * a torn tail allowed in the last file. Sets *n_records. Errors: SX_ECORRUPT. */
SX_NODISCARD sx_status sx__wal_check(const char *dir, uint64_t *n_records);

#endif
