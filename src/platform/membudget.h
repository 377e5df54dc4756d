/*
 * membudget.h: the process's memory budget (sx_db_options.memory_limit_bytes, issue 14), and the
 * memory limit of the cgroup the process runs in.
 *
 * Model. One budget per database: a limit (0: unlimited) and, per kind of holder, the bytes
 * currently charged. A component charges memory before it allocates it (sx__mem_take) and gives
 * it back when it frees it (sx__mem_give). A charge that would take the total above the limit is
 * refused with SX_ENOMEM and a message naming the request, the budget, where it comes from and
 * what holds it, so the caller can flush, evict, shrink or refuse; nothing is OOM-killed for
 * going over the budget. Memory a component must hold to stay correct (the state of an opened
 * collection) is charged with sx__mem_force, which never fails but counts, so the figures stay
 * true and later optional holders (caches, builds, growing rows) see less room.
 * Charges are estimates of what the holder allocates (its arrays), not malloc's bookkeeping; the
 * headroom between the cgroup's limit and the default budget covers the rest (code, stacks,
 * allocator slack).
 *
 * A NULL budget is valid everywhere: unlimited, nothing counted (components built outside a
 * database, tests of one component).
 *
 * Thread-safety: all functions are thread-safe (lock-free counters; a take is a CAS loop on the
 * total, so two takes never both pass on the last free bytes).
 */
#ifndef SX_PLATFORM_MEMBUDGET_H
#define SX_PLATFORM_MEMBUDGET_H
#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sx__memkind {
    SX__MEM_GROWING = 0, /* rows of growing segments (vectors, scalars, strings) */
    SX__MEM_SEALED,      /* heap columns of sealed segments (mapped vectors are not heap) */
    SX__MEM_PKMAP,       /* primary-key lookup structures */
    SX__MEM_INDEX,       /* built indexes held in RAM (graphs, PQ codes, node caches) */
    SX__MEM_BUILD,       /* index builds in progress */
    SX__MEM_CACHE,       /* the block cache of store-backed files */
    SX__MEM_IMPORT,      /* bulk-import buffers */
    SX__MEM_SCRATCH,     /* search and query scratch, answers being assembled */
    SX__MEM_KINDS
} sx__memkind;

typedef struct sx__membudget sx__membudget;

/* limit 0: unlimited (counts only). source: where the limit comes from, copied ("--memory-limit",
 * "cgroup v2 memory.max 1.0 GiB less headroom", ...). */
SX_NODISCARD sx_status sx__membudget_new(uint64_t limit, const char *source, sx__membudget **out);
void sx__membudget_free(sx__membudget *b);

/* Charges `bytes` to kind k, or refuses with SX_ENOMEM ("memory budget exhausted: <what> needs
 * ...") when the total would exceed the limit. */
SX_NODISCARD sx_status sx__mem_take(sx__membudget *b,
                                    sx__memkind k,
                                    uint64_t bytes,
                                    const char *what);
/* Charges without a check (memory that must be held); may take the total above the limit. */
void sx__mem_force(sx__membudget *b, sx__memkind k, uint64_t bytes);
void sx__mem_give(sx__membudget *b, sx__memkind k, uint64_t bytes);
/* 0: unlimited */
uint64_t sx__mem_limit(const sx__membudget *b);
uint64_t sx__mem_used(const sx__membudget *b);
uint64_t sx__mem_used_kind(const sx__membudget *b, sx__memkind k);
/* Bytes that may still be taken: UINT64_MAX when unlimited, 0 when at or over the limit. */
uint64_t sx__mem_avail(const sx__membudget *b);
/* Fills out (public struct, include/sextant.h). */
void sx__mem_stats(const sx__membudget *b, sx_memory_stats *out);
const char *sx__memkind_name(sx__memkind k);
/* Writes "growing 12.0 MiB, index 3.1 MiB, ..." (kinds holding memory, largest first). */
void sx__mem_describe(const sx__membudget *b, char *buf, size_t len);

/* Once per process (the first database opened): glibc's mmap threshold is fixed at 1 MiB, so
 * that large blocks (segment chunks, index arrays, batches) are mapped and unmapped on their own
 * and a freed one goes back to the system. With glibc's default dynamic threshold, freeing one
 * mapped block raises the threshold to its size, later blocks come from the heap and stay
 * resident after free (measured: `sextant import` of 322 MiB under a 32 MiB budget peaked at
 * 67 MB RSS, 43 MB with the fixed threshold). Skipped when $MALLOC_MMAP_THRESHOLD_ is set (the
 * user's choice) or outside glibc. Thread-safe. */
void sx__mem_tune_malloc(void);

/* The memory limit of this process's cgroup: v2 memory.max, else v1 memory.limit_in_bytes, the
 * smallest along the path from the process's cgroup to the root (a parent's limit binds too).
 * *limit = 0 when there is none (or "max", or v1's "unlimited" page-counter maximum); src (may be
 * NULL) gets a description ("cgroup v1 /sys/fs/cgroup/memory/x/memory.limit_in_bytes").
 * root: "" for the real filesystem, or a directory holding a fake /proc/self/cgroup and
 * /sys/fs/cgroup tree (tests). Never fails: an unreadable file counts as no limit. */
void sx__cgroup_memory_limit(const char *root, uint64_t *limit, char *src, size_t src_len);
/* The default budget under a cgroup limit: the limit less a headroom of max(32 MiB, limit / 8)
 * for what the budget does not count; 0 when the limit is 0 or too small to leave 16 MiB. */
uint64_t sx__mem_default_budget(uint64_t cgroup_limit);

#endif
