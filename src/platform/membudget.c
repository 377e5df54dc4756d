/*
 * membudget.c: the memory budget's counters and the cgroup memory-limit probe (membudget.h).
 *
 * Counters: one atomic total, one atomic per kind, a peak and a refusal count. A take reserves on
 * the total with a CAS loop (never above the limit), then adds to its kind; stats read the kinds
 * one by one, so a snapshot taken during a take may be off by that take (figures, not checks).
 *
 * cgroup probe (Linux): /proc/self/cgroup gives the process's cgroup per hierarchy ("0::/path"
 * for v2, "N:memory,...:/path" for v1); /proc/self/mountinfo gives where that hierarchy is
 * mounted and which cgroup is the mount's root (inside a container the mount's root is the
 * container's cgroup). The limit files are read from the process's directory up to the mount
 * point, and the smallest limit wins. v2 prefers memory.max; v1 reads memory.limit_in_bytes.
 */
#include "platform/membudget.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
# include <malloc.h>
#endif

#include "util/alloc.h"
#include "util/err.h"

struct sx__membudget {
    uint64_t limit;
    char source[160];
    _Atomic uint64_t total; /* relaxed except the CAS (acq_rel is not needed: counters only) */
    _Atomic uint64_t kind[SX__MEM_KINDS];
    _Atomic uint64_t peak;
    _Atomic uint64_t refusals;
};

static const char *const kind_names[SX__MEM_KINDS] = { "growing", "sealed", "pkmap",  "index",
                                                       "build",   "cache",  "import", "scratch" };

const char *sx__memkind_name(sx__memkind k)
{
    return (unsigned)k < SX__MEM_KINDS ? kind_names[k] : "?";
}

sx_status sx__membudget_new(uint64_t limit, const char *source, sx__membudget **out)
{
    sx__membudget *b = sx__calloc(1, sizeof *b);
    if (!b)
        return sx__err(SX_ENOMEM, "memory budget: out of memory");
    b->limit = limit;
    snprintf(b->source, sizeof b->source, "%s", source ? source : "");
    *out = b;
    return SX_OK;
}

void sx__membudget_free(sx__membudget *b)
{
    sx__free(b);
}

static void raise_peak(sx__membudget *b, uint64_t total)
{
    uint64_t p = atomic_load_explicit(&b->peak, memory_order_relaxed);
    while (total > p && !atomic_compare_exchange_weak_explicit(
                            &b->peak, &p, total, memory_order_relaxed, memory_order_relaxed)) {
    }
}

static double mib(uint64_t v)
{
    return (double)v / (1024.0 * 1024.0);
}

sx_status sx__mem_take(sx__membudget *b, sx__memkind k, uint64_t bytes, const char *what)
{
    if (!b || bytes == 0)
        return SX_OK;
    uint64_t cur = atomic_load_explicit(&b->total, memory_order_relaxed);
    for (;;) {
        uint64_t next = cur + bytes;
        if (b->limit && (next < cur || next > b->limit)) {
            atomic_fetch_add_explicit(&b->refusals, 1, memory_order_relaxed);
            char held[256];
            sx__mem_describe(b, held, sizeof held);
            return sx__err(SX_ENOMEM,
                           "memory budget exhausted: %s needs %.1f MiB, %.1f MiB of the %.1f MiB "
                           "budget (%s) are in use (%s); raise --memory-limit "
                           "(sx_db_options.memory_limit_bytes) or give the process more memory",
                           what ? what : sx__memkind_name(k), mib(bytes), mib(cur), mib(b->limit),
                           b->source[0] ? b->source : "memory_limit_bytes", held);
        }
        if (atomic_compare_exchange_weak_explicit(&b->total, &cur, next, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            raise_peak(b, next);
            break;
        }
    }
    atomic_fetch_add_explicit(&b->kind[k], bytes, memory_order_relaxed);
    return SX_OK;
}

void sx__mem_force(sx__membudget *b, sx__memkind k, uint64_t bytes)
{
    if (!b || bytes == 0)
        return;
    uint64_t t = atomic_fetch_add_explicit(&b->total, bytes, memory_order_relaxed) + bytes;
    raise_peak(b, t);
    atomic_fetch_add_explicit(&b->kind[k], bytes, memory_order_relaxed);
}

/* Subtracts at most what is there (a give larger than the charges is a bug; in release it must
 * not wrap the counters into "everything is used"). */
static void sub_sat(_Atomic uint64_t *v, uint64_t bytes)
{
    uint64_t cur = atomic_load_explicit(v, memory_order_relaxed);
    for (;;) {
        uint64_t next = cur >= bytes ? cur - bytes : 0;
        if (atomic_compare_exchange_weak_explicit(v, &cur, next, memory_order_relaxed,
                                                  memory_order_relaxed))
            return;
    }
}

void sx__mem_give(sx__membudget *b, sx__memkind k, uint64_t bytes)
{
    if (!b || bytes == 0)
        return;
    sub_sat(&b->kind[k], bytes);
    sub_sat(&b->total, bytes);
}

uint64_t sx__mem_limit(const sx__membudget *b)
{
    return b ? b->limit : 0;
}

uint64_t sx__mem_used(const sx__membudget *b)
{
    return b ? atomic_load_explicit(&b->total, memory_order_relaxed) : 0;
}

uint64_t sx__mem_used_kind(const sx__membudget *b, sx__memkind k)
{
    return b && (unsigned)k < SX__MEM_KINDS
               ? atomic_load_explicit(&b->kind[k], memory_order_relaxed)
               : 0;
}

uint64_t sx__mem_avail(const sx__membudget *b)
{
    if (!b || !b->limit)
        return UINT64_MAX;
    uint64_t used = sx__mem_used(b);
    return used >= b->limit ? 0 : b->limit - used;
}

void sx__mem_stats(const sx__membudget *b, sx_memory_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!b)
        return;
    out->limit_bytes = b->limit;
    out->used_bytes = sx__mem_used(b);
    out->peak_bytes = atomic_load_explicit(&b->peak, memory_order_relaxed);
    out->growing_bytes = sx__mem_used_kind(b, SX__MEM_GROWING);
    out->sealed_bytes = sx__mem_used_kind(b, SX__MEM_SEALED);
    out->pkmap_bytes = sx__mem_used_kind(b, SX__MEM_PKMAP);
    out->index_bytes = sx__mem_used_kind(b, SX__MEM_INDEX);
    out->build_bytes = sx__mem_used_kind(b, SX__MEM_BUILD);
    out->cache_bytes = sx__mem_used_kind(b, SX__MEM_CACHE);
    out->import_bytes = sx__mem_used_kind(b, SX__MEM_IMPORT);
    out->scratch_bytes = sx__mem_used_kind(b, SX__MEM_SCRATCH);
    out->refusals = atomic_load_explicit(&b->refusals, memory_order_relaxed);
    snprintf(out->source, sizeof out->source, "%s", b->source);
}

void sx__mem_describe(const sx__membudget *b, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = '\0';
    if (!b)
        return;
    bool done[SX__MEM_KINDS] = { false };
    size_t at = 0;
    for (int round = 0; round < SX__MEM_KINDS; round++) {
        int best = -1;
        uint64_t best_v = 0;
        for (int k = 0; k < SX__MEM_KINDS; k++) {
            uint64_t v = sx__mem_used_kind(b, (sx__memkind)k);
            if (!done[k] && v > best_v) {
                best = k;
                best_v = v;
            }
        }
        if (best < 0)
            break;
        done[best] = true;
        int w = snprintf(buf + at, len - at, "%s%s %.1f MiB", at ? ", " : "", kind_names[best],
                         mib(best_v));
        if (w < 0 || (size_t)w >= len - at)
            break;
        at += (size_t)w;
    }
    if (!at)
        snprintf(buf, len, "nothing charged");
}

static void tune_once(void)
{
#if defined(__GLIBC__)
    if (!getenv("MALLOC_MMAP_THRESHOLD_"))
        (void)mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

void sx__mem_tune_malloc(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&once, tune_once);
}

uint64_t sx__mem_default_budget(uint64_t cgroup_limit)
{
    if (!cgroup_limit)
        return 0;
    uint64_t head = cgroup_limit / 8;
    if (head < 32ull << 20)
        head = 32ull << 20;
    if (cgroup_limit < head + (16ull << 20))
        return 0;
    return cgroup_limit - head;
}

/* ------------------------------------------------------------------ cgroup probe */

/* Reads one unsigned number (or "max") from a file; 0 for none/unreadable/"max". */
static uint64_t read_limit_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[64] = { 0 };
    uint64_t v = 0;
    if (fgets(line, sizeof line, f) && strncmp(line, "max", 3) != 0) {
        char *end = NULL;
        unsigned long long x = strtoull(line, &end, 10);
        /* v1 reports "no limit" as the page counter's maximum (about 2^63) */
        if (end != line && x < (1ull << 62))
            v = (uint64_t)x;
    }
    (void)fclose(f);
    return v;
}

/* From mountinfo, the mount point (prefixed with root) and the mount's root of the hierarchy:
 * v2 ("cgroup2") or v1 ("cgroup" with "memory" among its super options). */
static bool
find_mount(const char *root, bool v2, char *mnt, size_t mnt_len, char *mroot, size_t mroot_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/proc/self/mountinfo", root);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        /* id parent major:minor root mountpoint opts [optional...] - fstype source superopts */
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        char fstype[64] = { 0 }, source[256] = { 0 }, super[1024] = { 0 };
        if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, super) < 2)
            continue;
        bool match = v2 ? strcmp(fstype, "cgroup2") == 0
                        : strcmp(fstype, "cgroup") == 0 &&
                              (strstr(super, ",memory") || strncmp(super, "memory", 6) == 0);
        if (!match)
            continue;
        char r[2048] = { 0 }, m[2048] = { 0 };
        if (sscanf(line, "%*s %*s %*s %2047s %2047s", r, m) != 2)
            continue;
        snprintf(mnt, mnt_len, "%s%s", root, m);
        snprintf(mroot, mroot_len, "%s", r);
        found = true;
    }
    (void)fclose(f);
    return found;
}

/* The process's cgroup path in the v2 hierarchy or in v1's memory hierarchy. */
static bool find_cgroup(const char *root, bool v2, char *out, size_t out_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = '\0';
        *c2 = '\0';
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        if (v2) {
            if (strcmp(line, "0") == 0 && ctrls[0] == '\0')
                found = true;
        } else {
            /* "memory" as one of the comma-separated controllers */
            size_t n = strlen(ctrls);
            for (const char *p = ctrls; p < ctrls + n;) {
                size_t w = strcspn(p, ",");
                if (w == 6 && strncmp(p, "memory", 6) == 0)
                    found = true;
                p += w + 1;
            }
        }
        if (found)
            snprintf(out, out_len, "%s", cg);
    }
    (void)fclose(f);
    return found;
}

static bool probe(const char *root, bool v2, uint64_t *limit, char *src, size_t src_len)
{
    char mnt[2048], mroot[2048], cg[2048];
    if (!find_mount(root, v2, mnt, sizeof mnt, mroot, sizeof mroot) ||
        !find_cgroup(root, v2, cg, sizeof cg))
        return false;
    /* the cgroup relative to the mount's root (inside a container the root is the container's
     * own cgroup and /proc/self/cgroup may show the full path) */
    const char *rel = cg;
    size_t rl = strlen(mroot);
    if (strcmp(mroot, "/") != 0 && strncmp(cg, mroot, rl) == 0 && (cg[rl] == '/' || !cg[rl]))
        rel = cg + rl;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel);
    size_t mnt_len = strlen(mnt);
    uint64_t best = 0;
    char best_path[4200] = { 0 };
    for (;;) {
        char file[4200];
        snprintf(file, sizeof file, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
        uint64_t v = read_limit_file(file);
        if (v && (!best || v < best)) {
            best = v;
            snprintf(best_path, sizeof best_path, "%s", file);
        }
        size_t dl = strlen(dir);
        if (dl <= mnt_len)
            break;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < mnt_len)
            break;
        *slash = '\0';
    }
    if (!best)
        return false;
    *limit = best;
    if (src && src_len)
        snprintf(src, src_len, "cgroup %s %s", v2 ? "v2" : "v1", best_path + strlen(root));
    return true;
}

void sx__cgroup_memory_limit(const char *root, uint64_t *limit, char *src, size_t src_len)
{
    if (!root)
        root = "";
    *limit = 0;
    if (src && src_len)
        src[0] = '\0';
    if (probe(root, true, limit, src, src_len))
        return;
    (void)probe(root, false, limit, src, src_len);
}
