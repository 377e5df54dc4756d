/*
 * blockcache.h: a bounded in-memory LRU cache of fixed-size blocks of remote objects, filled with
 * ranged GETs (sx__objstore_get_range). It lets a reader use an object that stays in the store as
 * if it were a local file read with pread: DISKANN reads its header and its 4 KiB-aligned slots
 * through it when `cache_limit_bytes` is set (docs/internals/STORAGE.md, "Block cache").
 *
 * Model. An object is opened with its key and size (known from the store manifest: no HEAD);
 * its bytes are split into blocks of block_bytes (the last one short). A block is identified by
 * (object, block index); objects opened twice under one key share their blocks. The cache holds
 * at most limit_bytes of block data (the per-block bookkeeping, about 100 bytes, is not counted);
 * beyond it the least recently used blocks are evicted. A limit below one block is allowed: every
 * read then fetches (nothing stays cached), which is correct, just slow.
 *
 * Reads. sx__blockcache_read copies [off, off+len) into the caller's buffer. Blocks present are
 * hits; a run of consecutive absent blocks is fetched with ONE ranged GET (so a read spanning
 * several blocks costs one request); a block another thread is fetching is waited for, not
 * fetched again (concurrent misses coalesce: one GET serves every waiter). A failed GET is
 * returned to the fetcher and to every waiter and nothing is cached, so the next read retries.
 * The cache does not know the content's format: a block that arrives corrupted is cached like
 * any other, and the reader that validates it (DISKANN's slot CRC) drops it with
 * sx__blockcache_invalidate so the next read fetches it again.
 *
 * Thread-safety: every function may be called from any thread. One mutex guards the hash table,
 * the LRU list and the counters; it is never held across a GET (the fetching thread marks the
 * blocks LOADING, unlocks, fetches, relocks). Waiters sleep on one condition variable broadcast
 * when any fetch completes. Rejected: sharding by hash (the critical section is a lookup and a
 * copy of at most a few blocks, far below the cost of one GET; revisit if profiles say so);
 * a cache per object (one global limit is what the operator sets).
 *
 * Ownership: the cache is reference counted: sx__blockcache_new returns one reference, every
 * open object holds one, so an object closed after sx__blockcache_release stays valid. The store
 * must outlive every read (the engine frees it after closing every collection).
 */
#ifndef SX_STORAGE_BLOCKCACHE_H
#define SX_STORAGE_BLOCKCACHE_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/objstore.h"

/* Default block: one DISKANN sector. DISKANN reads whole slots (one or more 4 KiB sectors at
 * 4 KiB-aligned offsets) at random places of the file: a larger block would multiply the bytes
 * fetched and the memory each hot slot pins without saving requests (neighbours are not stored
 * near each other), and a slot of several sectors is still one GET (runs coalesce). */
#define SX__BLOCKCACHE_BLOCK_DEF 4096u
#define SX__BLOCKCACHE_RUN_BYTES (1u << 20) /* at most this many bytes per ranged GET */

typedef struct sx__blockcache sx__blockcache;
typedef struct sx__bc_object sx__bc_object;

typedef struct sx__blockcache_stats {
    uint64_t hits;           /* blocks served from memory */
    uint64_t misses;         /* blocks fetched from the store */
    uint64_t waits;          /* blocks another thread was fetching: waited for, not fetched */
    uint64_t evictions;      /* blocks evicted to stay under the limit */
    uint64_t fetches;        /* ranged GETs issued */
    uint64_t fetch_errors;   /* of which failed */
    uint64_t bytes_fetched;  /* bytes of successful GETs */
    uint64_t invalidations;  /* blocks dropped by sx__blockcache_invalidate */
    uint64_t resident_bytes; /* block bytes held now (loading blocks included) */
    uint64_t limit_bytes;
    uint32_t block_bytes;
} sx__blockcache_stats;

/* A cache over `store` of at most limit_bytes, in blocks of block_bytes (0: the default; must
 * be a power of two >= 512). Errors: SX_EINVAL, SX_ENOMEM. */
SX_NODISCARD sx_status sx__blockcache_new(sx__objstore *store,
                                          uint64_t limit_bytes,
                                          uint32_t block_bytes,
                                          sx__blockcache **out);
/* Charges the cache's resident bytes to `budget` (SX__MEM_CACHE; NULL: none) from now on, and
 * evicts while the budget is over its limit. The budget must outlive the cache. */
struct sx__membudget;
void sx__blockcache_set_budget(sx__blockcache *bc, struct sx__membudget *budget);
/* Drops the caller's reference (the cache goes when no object is open either). NULL: no-op. */
void sx__blockcache_release(sx__blockcache *bc);

/* Opens object `key` of `size` bytes (the caller knows it, e.g. from a manifest; a read past the
 * object's real end fails with the store's error). Errors: SX_ENOMEM. */
SX_NODISCARD sx_status sx__blockcache_open(sx__blockcache *bc,
                                           const char *key,
                                           uint64_t size,
                                           sx__bc_object **out);
/* Closes an object; its blocks are dropped when no handle of the key is left. NULL: no-op. Must
 * not race with reads of the same handle. */
void sx__blockcache_close(sx__bc_object *ob);
uint64_t sx__bc_object_size(const sx__bc_object *ob);
const char *sx__bc_object_key(const sx__bc_object *ob);

/* Copies [off, off+len) of the object into buf. Errors: SX_EINVAL (past the object's size), the
 * store's (SX_EREMOTE, SX_ENOTFOUND, SX_ETIMEDOUT), SX_ENOMEM. */
SX_NODISCARD sx_status sx__blockcache_read(sx__bc_object *ob, uint64_t off, size_t len, void *buf);
/* Drops the cached blocks overlapping [off, off+len) (content found bad by the reader). */
void sx__blockcache_invalidate(sx__bc_object *ob, uint64_t off, size_t len);

void sx__blockcache_stats_get(sx__blockcache *bc, sx__blockcache_stats *out);

#endif
