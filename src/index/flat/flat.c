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
 *        d = C + xn[j] + ||q||^2 (L2), or d = C (IP/COSINE: -<q,x>);
 *        push d when it does not exceed the heap bound (L2: recomputed by the row kernel where
 *        the expansion is unsafe, see below).
 *    With an allow bitset a tile is made of allowed rows only: when they are contiguous the
 *    base array is used in place, otherwise they are gathered into a scratch tile. So GEMM work
 *    is proportional to the allowed rows, and filtered rows can never be reported.
 *    Scratch (one 64-byte aligned block: C, norms, ids, gather tile) comes from sx__malloc_aligned
 *    per call; SX_ENOMEM when that fails, with the heaps untouched.
 *
 * Numerical safety of the L2 expansion (issue 13). In float the expansion cancels: its value d~
 * differs from the exact d by at most
 *      e = tau (||q||^2 + ||x||^2) + dim 2^-140,   tau = 1.01 (2 dim + 16) 2^-24
 * (the inner product and both norms each err by at most gamma_dim = dim u / (1 - dim u) times
 * ||q|| ||x|| <= (||q||^2 + ||x||^2) / 2, or times the norm; the two additions by u each on values
 * below 2 (||q||^2 + ||x||^2), 8 u more for the rearranged compare below; gradual underflow adds
 * at most 2^-150 per product). That error is tiny against d for most pairs but not for rows near
 * the query relative to their norm (data far from the origin, near duplicates of large norm),
 * where d~ can be any value in [d - e, d + e], 0 or negative included. So per pair:
 *   - d~ - e > bound: the pair cannot enter the heap (its exact value is above the bound); most
 *     pairs end here, after one add and one compare as before (push_l2 rearranges the test);
 *   - d~ >= 2^10 e (and finite): d~ is used, relative error below 2^-10 (in practice ~1e-7);
 *   - otherwise (cancellation, or a non-finite value) the pair is recomputed with the row
 *     kernel, i.e. it gets exactly the row path's value.
 * IP/COSINE have no expansion (d = -<q,x> from SGEMM, which errs like the kernel); a non-finite
 * value is recomputed with the kernel too. Within SX_MAX_SQNORM (sextant.h: every stored and
 * query vector of an L2 or IP collection) no value is ever non-finite; the recomputation keeps
 * rows stored before that bound existed (e.g. [3e38, ...], whose norm is +inf in float and whose
 * expansion gave inf - inf = NaN, clamped to 0: top-1 for every query) at the row path's value.
 * So a batched search returns what one-at-a-time searches return, up to rounding of 2^-10.
 *
 * Invariants.
 * 1. A row is offered to heaps only if allow == NULL or bit id_base + i of allow is set.
 * 2. Each (query, row) pair is offered at most once per call; ids are id_base + i.
 * 3. A NaN distance is never pushed (the bound compare is false for NaN).
 * 4. Every pushed distance is the row kernel's value for the pair, or (GEMM path, L2) within
 *    2^-10 of the exact value, or (GEMM path, IP/COSINE) SGEMM's inner product (same error bound
 *    as the kernel's); never a negative L2 value.
 *
 * Thread-safety: pure; the allow words are read with relaxed atomic loads because a delete bitmap
 * may be updated by the writer during a scan (bitset.h): a row deleted concurrently may or may
 * not be reported, but a word is never torn. OpenBLAS may use its own threads inside sgemm.
 */
#include "index/flat/flat.h"

#include <cblas.h>
#include <float.h>
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

static inline void prefetch_row(const char *p, size_t row_bytes)
{
    for (size_t off = 0; off < row_bytes; off += 64)
        __builtin_prefetch(p + off, 0, PREFETCH_LOCALITY);
}

/* ---------------------------------------------------------------- row path */

/* What the row path compares a row with: nq float32 queries and the kernel of the rows' element
 * type (float32, float16, bfloat16), rows of row_bytes. */
typedef struct rowq {
    sx__dist_fn fn;
    const float *queries;
    size_t nq, dim, row_bytes;
} rowq;

/* Offers row j to every query (the row is in L1 after the first kernel call). */
static inline void
visit_row(const char *row, uint32_t id, const rowq *r, sx__topk *heaps, float *bound)
{
    for (size_t q = 0; q < r->nq; q++) {
        float d = r->fn(r->queries + q * r->dim, row, r->dim);
        if (d <= bound[q]) {
            sx__topk_push(&heaps[q], d, id);
            bound[q] = heap_bound(&heaps[q]);
        }
    }
}

static void scan_rows(const char *base,
                      size_t n,
                      uint32_t id_base,
                      const uint64_t *allow,
                      const rowq *r,
                      sx__topk *heaps)
{
    float bound[SX__FLAT_GEMM_MIN_NQ];
    for (size_t q = 0; q < r->nq; q++)
        bound[q] = heap_bound(&heaps[q]);
    const size_t row_bytes = r->row_bytes;

    if (!allow) {
        /* Dense: a prefetch cursor (a byte offset) runs PREFETCH_BYTES ahead of the end of the
         * current row, one prefetch per cache line whatever the dim. */
        const size_t total = n * row_bytes;
        size_t pf = 0;
        for (size_t j = 0; j < n; j++) {
            size_t want = (j + 1) * row_bytes + PREFETCH_BYTES;
            if (want > total)
                want = total;
            for (; pf < want; pf += 64)
                __builtin_prefetch(base + pf, 0, PREFETCH_LOCALITY);
            visit_row(base + j * row_bytes, id_base + (uint32_t)j, r, heaps, bound);
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
                prefetch_row(base + (i + (size_t)__builtin_ctzll(m)) * row_bytes, row_bytes);
            visit_row(base + j * row_bytes, id_base + (uint32_t)j, r, heaps, bound);
        }
        i += len;
    }
}

/* ---------------------------------------------------------------- GEMM path */

/* L2 expansion safety (see the header): tau of the error bound, its underflow floor, and the
 * ratio above which the expansion's value is used. */
#define EXP_FLOOR 0x1p-140f
#define EXP_SAFE  1024.0f

static float expansion_tau(size_t dim)
{
    return (float)(1.01 * (2.0 * (double)dim + 16.0) * 0x1p-24);
}

typedef struct gemm_scratch {
    float *c;      /* qt * rt results */
    float *qn;     /* nq query norms (L2) */
    float *xn;     /* rt row norms (L2) */
    float *xm;     /* rt: (1 - tau) * xn (L2) */
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

/* Pushes one query's row of a result tile into its heap (L2: the expansion's value, or the
 * kernel's where it is unsafe; see the header). c = -2 <q, x_j>; xm[j] = (1 - tau) ||x_j||^2, so
 * that c + xm[j] > bound + qe - qn is d~ - e > bound rearranged: one add and one compare per pair
 * that cannot enter the heap (tau's slack of 8 u covers the rounding of the rearrangement). `x` is
 * the tile, `loc`/`first` map tile rows to local row indices. */
static void push_l2(sx__topk *h,
                    const float *c,
                    const float *xn,
                    const float *xm,
                    float qn,
                    float tau,
                    float floor_e,
                    const float *q,
                    const float *x,
                    size_t cnt,
                    size_t dim,
                    sx__dist_fn fn,
                    uint32_t id_base,
                    const uint32_t *loc,
                    uint32_t first)
{
    const float qe = tau * qn + floor_e;
    float bound = heap_bound(h);
    float thr = bound + qe - qn;
    for (size_t j = 0; j < cnt; j++) {
        if (c[j] + xm[j] > thr)
            continue; /* NaN goes on */
        float d = c[j] + xn[j] + qn;
        float e = tau * xn[j] + qe;
        if (!(d >= EXP_SAFE * e && d <= FLT_MAX))
            d = fn(q, x + j * dim, dim);
        if (d <= bound) {
            sx__topk_push(h, d, id_base + (loc ? loc[j] : first + (uint32_t)j));
            bound = heap_bound(h);
            thr = bound + qe - qn;
        }
    }
}

static void push_ip(sx__topk *h,
                    const float *c,
                    const float *q,
                    const float *x,
                    size_t cnt,
                    size_t dim,
                    sx__dist_fn fn,
                    uint32_t id_base,
                    const uint32_t *loc,
                    uint32_t first)
{
    float bound = heap_bound(h);
    for (size_t j = 0; j < cnt; j++) {
        float d = c[j];
        if (d > bound)
            continue; /* NaN goes on */
        if (!(fabsf(d) <= FLT_MAX))
            d = fn(q, x + j * dim, dim);
        if (d <= bound) {
            sx__topk_push(h, d, id_base + (loc ? loc[j] : first + (uint32_t)j));
            bound = heap_bound(h);
        }
    }
}

static sx_status scan_gemm(const float *base,
                           size_t n,
                           size_t dim,
                           sx_metric metric,
                           sx__dist_fn fn,
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
    size_t off_xm = off_xn + round64(rt * sizeof(float));
    size_t off_loc = off_xm + round64(rt * sizeof(float));
    size_t off_gather = off_loc + round64(rt * sizeof(uint32_t));
    size_t total = off_gather + (allow ? round64(rt * dim * sizeof(float)) : 0);
    char *blk = sx__malloc_aligned(total);
    if (!blk)
        return sx__err(SX_ENOMEM, "flat scan: cannot allocate %zu bytes of GEMM scratch", total);
    gemm_scratch s = {
        .c = (float *)(void *)(blk + off_c),
        .qn = (float *)(void *)(blk + off_qn),
        .xn = (float *)(void *)(blk + off_xn),
        .xm = (float *)(void *)(blk + off_xm),
        .loc = (uint32_t *)(void *)(blk + off_loc),
        .gather = (float *)(void *)(blk + off_gather),
    };

    if (is_l2) {
        for (size_t q = 0; q < nq; q++)
            s.qn[q] = sx__norm2(queries + q * dim, dim);
    }
    const float alpha = is_l2 ? -2.0f : -1.0f;
    const float tau = expansion_tau(dim), floor_e = (float)dim * EXP_FLOOR;

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
            for (size_t j = 0; j < cnt; j++) {
                s.xn[j] = sx__norm2(x + j * dim, dim);
                s.xm[j] = s.xn[j] - tau * s.xn[j];
            }
        }

        for (size_t q0 = 0; q0 < nq; q0 += qt) {
            size_t qc = nq - q0 < qt ? nq - q0 : qt;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qc, (int)cnt, (int)dim, alpha,
                        queries + q0 * dim, (int)dim, x, (int)dim, 0.0f, s.c, (int)cnt);
            for (size_t qi = 0; qi < qc; qi++) {
                size_t qq = q0 + qi;
                const float *c = s.c + qi * cnt, *qv = queries + qq * dim;
                if (is_l2)
                    push_l2(&heaps[qq], c, s.xn, s.xm, s.qn[qq], tau, floor_e, qv, x, cnt, dim, fn,
                            id_base, loc, first);
                else
                    push_ip(&heaps[qq], c, qv, x, cnt, dim, fn, id_base, loc, first);
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
        rowq r = { fn, queries, nq, dim, dim * sizeof(float) };
        scan_rows((const char *)base, n, id_base, allow, &r, heaps);
        return SX_OK;
    }
    return scan_gemm(base, n, dim, metric, fn, id_base, allow, queries, nq, heaps);
}

/* Rows widened per GEMM tile of the 16-bit types: ~1 MiB of float32. Binary rows per call of
 * the block kernel. */
#define BIN_BLOCK        256
#define WIDEN_TILE_BYTES ((size_t)1 << 20)

sx_status sx__flat_scan_typed(const void *base,
                              sx__vtype vt,
                              size_t n,
                              size_t dim,
                              sx_metric metric,
                              uint32_t id_base,
                              const uint64_t *allow,
                              const void *queries,
                              size_t nq,
                              sx__topk *heaps)
{
    if (vt == SX__VT_F32)
        return sx__flat_scan(base, n, dim, metric, id_base, allow, queries, nq, heaps);
    if (!sx__metric_fits(vt, metric))
        return sx__err(SX_EINVAL, "flat scan: metric %d does not apply to %s rows", (int)metric,
                       sx__vtype_name(vt));
    if (dim == 0 || dim > SX_MAX_DIM || (vt == SX__VT_BIN && dim % 8 != 0))
        return sx__err(SX_EINVAL, "flat scan: dim %zu out of range for %s", dim,
                       sx__vtype_name(vt));
    if ((uint64_t)id_base + n > (uint64_t)UINT32_MAX + 1)
        return sx__err(SX_EINVAL, "flat scan: ids %u + %zu rows exceed the 32-bit id space",
                       id_base, n);
    if (n == 0 || nq == 0)
        return SX_OK;
    const size_t row_bytes = sx__vtype_row_bytes(vt, dim);
    sx__dist_fn fn = sx__dist_for(metric, vt);
    sx__bdist_n_fn nfn = sx__bdist_n_for(metric);
    if (vt == SX__VT_BIN ? !nfn : !fn)
        return sx__err(SX_EINVAL, "flat scan: no kernel for metric %d on %s rows", (int)metric,
                       sx__vtype_name(vt));
    if (vt == SX__VT_BIN) {
        /* binary: per query, blocks of BIN_BLOCK rows through the block kernel (one call per
         * block: a popcount of a short code costs less than a call), then the block's
         * distances against the heap's bound and the allow bits. The rows are small (a 128-bit
         * code is 16 bytes), so a batch re-reading them per query stays in cache. */
        float d[BIN_BLOCK];
        for (size_t q = 0; q < nq; q++) {
            const uint8_t *qv = (const uint8_t *)queries + q * row_bytes;
            sx__topk *h = &heaps[q];
            float bound = heap_bound(h);
            for (size_t r0 = 0; r0 < n; r0 += BIN_BLOCK) {
                size_t m = n - r0 < BIN_BLOCK ? n - r0 : BIN_BLOCK;
                nfn(qv, (const uint8_t *)base + r0 * row_bytes, m, row_bytes, d);
                for (size_t j = 0; j < m; j++) {
                    if (!(d[j] <= bound))
                        continue;
                    uint32_t id = id_base + (uint32_t)(r0 + j);
                    if (allow && !(allow_bits(allow, id, 1) & 1u))
                        continue;
                    sx__topk_push(h, d[j], id);
                    bound = heap_bound(h);
                }
            }
        }
        return SX_OK;
    }
    if (nq < SX__FLAT_GEMM_MIN_NQ) {
        /* few queries: memory bound, so the rows are read at 2 bytes per value and widened in
         * the kernel */
        rowq r = { fn, queries, nq, dim, row_bytes };
        scan_rows(base, n, id_base, allow, &r, heaps);
        return SX_OK;
    }
    /* many queries: compute bound; tiles of rows widened to float32 take the float32 path
     * (GEMM), with the same ids and allow bits */
    size_t tile = WIDEN_TILE_BYTES / (dim * sizeof(float));
    tile = tile < 64 ? 64 : tile;
    float *wide = sx__malloc_aligned(tile * dim * sizeof(float));
    if (!wide)
        return sx__err(SX_ENOMEM, "flat scan: cannot allocate %zu bytes to widen rows",
                       tile * dim * sizeof(float));
    sx_status st = SX_OK;
    for (size_t r0 = 0; st == SX_OK && r0 < n; r0 += tile) {
        size_t m = n - r0 < tile ? n - r0 : tile;
        const char *rows = (const char *)base + r0 * row_bytes;
        for (size_t j = 0; j < m; j++)
            sx__widen(vt, rows + j * row_bytes, wide + j * dim, dim);
        st = sx__flat_scan(wide, m, dim, metric, id_base + (uint32_t)r0, allow, queries, nq, heaps);
    }
    sx__free_aligned(wide);
    return st;
}
