/*
 * flat.c: exact k-NN by scanning every row (see flat.h).
 *
 * Two paths, chosen by the number of queries.
 *
 * 1. nq < SX__FLAT_GEMM_MIN_NQ ("row path"). A single query does 2 flops per float read, far
 *    below what a core can do, so this path is bound by memory bandwidth and its job is to keep
 *    the memory system busy: rows are visited in address order (the hardware prefetcher streams
 *    them), each row is handed to the SIMD kernel once per query while it is in L1, and the next
 *    rows are software-prefetched a fixed distance ahead so more cache misses are in flight than
 *    the L2 streamer alone would issue (this matters on server cores whose single-thread
 *    bandwidth is limited by outstanding misses, not by DRAM). The kernel's result is compared
 *    with the heap's bound before sx__topk_push, so almost every row costs one compare.
 *    The allow bitset is consumed a 64-bit word at a time: the word is shifted to row i and
 *    walked with count-trailing-zeros, so a sparse filter skips disallowed rows without
 *    touching them (and without prefetching them).
 *
 * 2. nq >= SX__FLAT_GEMM_MIN_NQ ("GEMM path"). Many queries make the problem compute bound, and
 *    SGEMM does the inner products at near peak flops. Rows are taken in tiles of `rt` rows
 *    (rt*dim*4 bytes ~ TILE_BYTES, so a tile stays in L2 while every query tile uses it) and
 *    queries in tiles of `qt` (the qt*rt result block also fits in L2). Per row tile:
 *      xn[j] = ||x_j||^2 (L2 only);
 *      per query tile: C = alpha * Q X^T with alpha = -2 (L2) or -1 (IP/COSINE), then
 *        d = C + xn[j] + ||q||^2, clamped at 0 (L2), or d = C (IP/COSINE: -<q,x>);
 *        push d when it does not exceed the heap bound.
 *    With an allow bitset a tile is made of allowed rows only: when they are contiguous the
 *    base array is used in place, otherwise they are gathered into a scratch tile. So GEMM work
 *    is proportional to the allowed rows, and filtered rows can never be reported.
 *    Scratch (one 64-byte aligned block: C, norms, ids, gather tile) comes from sx__malloc_aligned
 *    per call; SX_ENOMEM when that fails, with the heaps untouched.
 *    XXX: the L2 expansion loses absolute precision ~1e-7 * (||q||^2 + ||x||^2) through
 *    cancellation, so near-duplicate rows of large norm may be ranked in a different order than
 *    the row path would rank them. Distances are clamped at 0 so they are never negative.
 *
 * Invariants.
 * 1. A row is offered to heaps only if allow == NULL or bit id_base + i of allow is set.
 * 2. Each (query, row) pair is offered at most once per call; ids are id_base + i.
 * 3. A NaN distance is never pushed (the bound compare is false for NaN).
 *
 * Thread-safety: pure; the allow words are read with relaxed atomic loads because a delete bitmap
 * may be updated by the writer during a scan (bitset.h): a row deleted concurrently may or may
 * not be reported, but a word is never torn. OpenBLAS may use its own threads inside sgemm.
 */
#include "index/flat/flat.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"
#include "vector/dist.h"

/* GEMM tiling: bytes of row data per tile, and floats in the qt x rt result block. Both well
 * inside a 1-2 MiB L2 so the post-processing and the next query tile find their data there. */
#ifndef TILE_BYTES
# define TILE_BYTES ((size_t)256 * 1024)
#endif
#ifndef RESULT_ELEMS
# define RESULT_ELEMS ((size_t)64 * 1024)
#endif
#define RT_MIN 16u
#define RT_MAX 2048u
#define QT_MAX 256u

/* Row path: prefetch this many bytes ahead of the row being scanned, into L2 (locality 2 =
 * prefetcht1). Measured on the 2-core AVX-512 dev VM (bench/flat_bw): no software prefetch
 * reached ~73% (128-d) / ~85% (768-d) of the read bandwidth, prefetcht1/t0 at 1-4 KiB ~85-90% /
 * ~90-95%, and prefetchnta only ~45%, as NTA lines skip L2 and defeat the L2 streamer. */
#ifndef PREFETCH_BYTES
# define PREFETCH_BYTES 2048
#endif
#ifndef PREFETCH_LOCALITY
# define PREFETCH_LOCALITY 2
#endif

/* A heap of capacity 0 takes nothing: a bound that no distance passes (avoids reading h[0]). */
static inline float heap_bound(const sx__topk *h)
{
    return h->k ? sx__topk_bound(h) : -__builtin_inff();
}

/* Bits [b, b+len) of allow as the low bits of a word (len in 1..64, b + len within the set). */
static inline uint64_t allow_bits(const uint64_t *allow, size_t b, size_t len)
{
    uint64_t m = len == 64 ? ~(uint64_t)0 : (((uint64_t)1 << len) - 1);
    if (!allow)
        return m;
    return (__atomic_load_n(&allow[b >> 6], __ATOMIC_RELAXED) >> (b & 63)) & m;
}

static inline void prefetch_row(const float *row, size_t row_bytes)
{
    const char *p = (const char *)row;
    for (size_t off = 0; off < row_bytes; off += 64)
        __builtin_prefetch(p + off, 0, PREFETCH_LOCALITY);
}

/* ---------------------------------------------------------------- row path */

/* Offers row j to every query (the row is in L1 after the first kernel call). */
static inline void visit_row(const float *row,
                             uint32_t id,
                             size_t dim,
                             sx__dist_fn fn,
                             const float *queries,
                             size_t nq,
                             sx__topk *heaps,
                             float *bound)
{
    for (size_t q = 0; q < nq; q++) {
        float d = fn(queries + q * dim, row, dim);
        if (d <= bound[q]) {
            sx__topk_push(&heaps[q], d, id);
            bound[q] = heap_bound(&heaps[q]);
        }
    }
}

static void scan_rows(const float *base,
                      size_t n,
                      size_t dim,
                      sx__dist_fn fn,
                      uint32_t id_base,
                      const uint64_t *allow,
                      const float *queries,
                      size_t nq,
                      sx__topk *heaps)
{
    float bound[SX__FLAT_GEMM_MIN_NQ];
    for (size_t q = 0; q < nq; q++)
        bound[q] = heap_bound(&heaps[q]);
    const size_t row_bytes = dim * sizeof(float);

    if (!allow) {
        /* Dense: a prefetch cursor (a byte offset) runs PREFETCH_BYTES ahead of the end of the
         * current row, one prefetch per cache line whatever the dim. */
        const char *p = (const char *)base;
        const size_t total = n * row_bytes;
        size_t pf = 0;
        for (size_t j = 0; j < n; j++) {
            size_t want = (j + 1) * row_bytes + PREFETCH_BYTES;
            if (want > total)
                want = total;
            for (; pf < want; pf += 64)
                __builtin_prefetch(p + pf, 0, PREFETCH_LOCALITY);
            visit_row(base + j * dim, id_base + (uint32_t)j, dim, fn, queries, nq, heaps, bound);
        }
        return;
    }

    size_t i = 0;
    while (i < n) {
        size_t b = (size_t)id_base + i;
        size_t len = 64 - (b & 63);
        if (len > n - i)
            len = n - i;
        uint64_t m = allow_bits(allow, b, len);
        while (m) {
            size_t j = i + (size_t)__builtin_ctzll(m);
            m &= m - 1;
            /* the next allowed row of this word is the one known to be needed next */
            if (m)
                prefetch_row(base + (i + (size_t)__builtin_ctzll(m)) * dim, row_bytes);
            visit_row(base + j * dim, id_base + (uint32_t)j, dim, fn, queries, nq, heaps, bound);
        }
        i += len;
    }
}

/* ---------------------------------------------------------------- GEMM path */

typedef struct gemm_scratch {
    float *c;      /* qt * rt results */
    float *qn;     /* nq query norms (L2) */
    float *xn;     /* rt row norms (L2) */
    uint32_t *loc; /* rt local row indices of the current tile */
    float *gather; /* rt * dim: allowed rows copied together (only with allow) */
} gemm_scratch;

static size_t round64(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Collects up to rt allowed rows starting at *pos into loc; advances *pos past the last row
 * examined. Returns the number collected (0 only at the end of the block). */
static size_t
next_tile(const uint64_t *allow, uint32_t id_base, size_t n, size_t rt, size_t *pos, uint32_t *loc)
{
    size_t cnt = 0, i = *pos;
    while (i < n && cnt < rt) {
        size_t b = (size_t)id_base + i;
        size_t len = 64 - (b & 63);
        if (len > n - i)
            len = n - i;
        uint64_t m = allow_bits(allow, b, len);
        while (m && cnt < rt) {
            size_t j = i + (size_t)__builtin_ctzll(m);
            m &= m - 1;
            loc[cnt++] = (uint32_t)j;
            if (cnt == rt) {
                *pos = j + 1;
                return cnt;
            }
        }
        i += len;
    }
    *pos = i;
    return cnt;
}

static sx_status scan_gemm(const float *base,
                           size_t n,
                           size_t dim,
                           sx_metric metric,
                           uint32_t id_base,
                           const uint64_t *allow,
                           const float *queries,
                           size_t nq,
                           sx__topk *heaps)
{
    const int is_l2 = metric == SX_METRIC_L2;
    size_t rt = TILE_BYTES / (dim * sizeof(float));
    rt = rt < RT_MIN ? RT_MIN : rt > RT_MAX ? RT_MAX : rt;
    if (rt > n)
        rt = n;
    size_t qt = RESULT_ELEMS / rt;
    qt = qt < 1 ? 1 : qt > QT_MAX ? QT_MAX : qt;
    if (qt > nq)
        qt = nq;

    size_t off_c = 0;
    size_t off_qn = off_c + round64(qt * rt * sizeof(float));
    size_t off_xn = off_qn + round64(nq * sizeof(float));
    size_t off_loc = off_xn + round64(rt * sizeof(float));
    size_t off_gather = off_loc + round64(rt * sizeof(uint32_t));
    size_t total = off_gather + (allow ? round64(rt * dim * sizeof(float)) : 0);
    char *blk = sx__malloc_aligned(total);
    if (!blk)
        return sx__err(SX_ENOMEM, "flat scan: cannot allocate %zu bytes of GEMM scratch", total);
    gemm_scratch s = {
        .c = (float *)(void *)(blk + off_c),
        .qn = (float *)(void *)(blk + off_qn),
        .xn = (float *)(void *)(blk + off_xn),
        .loc = (uint32_t *)(void *)(blk + off_loc),
        .gather = (float *)(void *)(blk + off_gather),
    };

    if (is_l2) {
        for (size_t q = 0; q < nq; q++)
            s.qn[q] = sx__norm2(queries + q * dim, dim);
    }
    const float alpha = is_l2 ? -2.0f : -1.0f;

    size_t pos = 0;
    while (pos < n) {
        /* the next tile: rows X (cnt x dim, row-major) and their ids */
        const float *x;
        size_t cnt;
        uint32_t first = 0; /* local index of row 0 when the tile is contiguous */
        const uint32_t *loc = NULL;
        if (!allow) {
            cnt = n - pos < rt ? n - pos : rt;
            first = (uint32_t)pos;
            x = base + pos * dim;
            pos += cnt;
        } else {
            cnt = next_tile(allow, id_base, n, rt, &pos, s.loc);
            if (cnt == 0)
                break;
            if (s.loc[cnt - 1] - s.loc[0] == cnt - 1) {
                first = s.loc[0];
                x = base + (size_t)first * dim;
            } else {
                for (size_t j = 0; j < cnt; j++)
                    memcpy(s.gather + j * dim, base + (size_t)s.loc[j] * dim, dim * sizeof(float));
                x = s.gather;
                loc = s.loc;
            }
        }
        if (is_l2) {
            for (size_t j = 0; j < cnt; j++)
                s.xn[j] = sx__norm2(x + j * dim, dim);
        }

        for (size_t q0 = 0; q0 < nq; q0 += qt) {
            size_t qc = nq - q0 < qt ? nq - q0 : qt;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qc, (int)cnt, (int)dim, alpha,
                        queries + q0 * dim, (int)dim, x, (int)dim, 0.0f, s.c, (int)cnt);
            for (size_t qi = 0; qi < qc; qi++) {
                sx__topk *h = &heaps[q0 + qi];
                const float *c = s.c + qi * cnt;
                float bound = heap_bound(h);
                float qn = is_l2 ? s.qn[q0 + qi] : 0.0f;
                for (size_t j = 0; j < cnt; j++) {
                    float d = c[j];
                    if (is_l2) {
                        d += s.xn[j] + qn;
                        d = d > 0.0f ? d : 0.0f;
                    }
                    if (d <= bound) {
                        uint32_t id = id_base + (loc ? loc[j] : first + (uint32_t)j);
                        sx__topk_push(h, d, id);
                        bound = heap_bound(h);
                    }
                }
            }
        }
    }
    sx__free_aligned(blk);
    return SX_OK;
}

/* ---------------------------------------------------------------- entry */

sx_status sx__flat_scan(const float *base,
                        size_t n,
                        size_t dim,
                        sx_metric metric,
                        uint32_t id_base,
                        const uint64_t *allow,
                        const float *queries,
                        size_t nq,
                        sx__topk *heaps)
{
    sx__dist_fn fn = sx__dist_for_metric(metric);
    if (!fn)
        return sx__err(SX_EINVAL, "flat scan: unknown metric %d", (int)metric);
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "flat scan: dim %zu out of range 1..%u", dim, SX_MAX_DIM);
    if ((uint64_t)id_base + n > (uint64_t)UINT32_MAX + 1)
        return sx__err(SX_EINVAL, "flat scan: ids %u + %zu rows exceed the 32-bit id space",
                       id_base, n);
    if (n == 0 || nq == 0)
        return SX_OK;
    if (nq < SX__FLAT_GEMM_MIN_NQ) {
        scan_rows(base, n, dim, fn, id_base, allow, queries, nq, heaps);
        return SX_OK;
    }
    return scan_gemm(base, n, dim, metric, id_base, allow, queries, nq, heaps);
}
