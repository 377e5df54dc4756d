/*
 * ivf_build.c: IVF construction (IVF_FLAT, IVF_SQ8, IVF_PQ; layout and invariants in ivf.h),
 * build parameters, the memory estimate and the three vtables.
 *
 * Build, in order:
 *   1. parameters and shape; the peak-memory estimate against ctx->memory_limit_bytes (fails
 *      with SX_ENOMEM naming the limit before anything is allocated);
 *   2. coarse quantizer: k-means (kmeans.h) with k = nlist = min(nlist param, n) on a sample of
 *      at most nlist * 256 rows, seed ctx->seed (0: a fixed default);
 *   3. assignment of every row to its nearest centroid (SGEMM, blocks of 64k rows between
 *      cancel checks), then a counting sort into CSR lists (off, ids; ids ascending per list);
 *   4. SQ8: per-dimension ranges of the residuals x - c(x) over all rows (one pass), then
 *      parallel encoding of the residuals in list order;
 *      PQ: codebooks trained on the residuals of min(n, 16384) sampled rows (quant_pq.h, m
 *      sub-spaces of dim/m, 256 centroids each), parallel encoding in list order, transposition
 *      into 32-vector blocks, the per-row L2 terms (ivf.h).
 *
 * Residuals. SQ8 and PQ code x - c(x), not x (as FAISS does by default): the residuals of one
 * list are concentrated around 0, so the same 8 bits per dimension (SQ8) or per sub-space (PQ)
 * resolve finer detail. The price is small: SQ8 subtracts the centroid from the query once per
 * probed list; PQ stores one float per row for L2 and still uses one ADC table per query
 * (ivf.h).
 *
 * IVF_FLAT storage: the vectors are copied in list order (ivf.h has the measurements that chose
 * the copy over reading the borrowed rows in place).
 *
 * Threading. k-means and the assignment run their SGEMMs on OpenBLAS's threads; encoding uses
 * ctx->threads workers (the caller is one) taking SX__IVF_ENCODE_CHUNK list positions at a time
 * from an atomic counter, each with its own residual buffer and writing a disjoint slice of the
 * codes. Cancel (relaxed loads) is checked per k-means iteration, per assignment block and per
 * encoding chunk; progress counts assigned (FLAT) or encoded (SQ8, PQ) rows, relaxed adds.
 *
 * GPU_IVF_FLAT / GPU_IVF_PQ (issue 7): the same indexes (same build, record and search; the
 * record's kind is FLAT / PQ) under Milvus's GPU type names, with one difference: when
 * sx__gpu_available() the coarse quantizer's Lloyd iterations run on the GPU (sx__gpu_kmeans,
 * gpu.h) over a training sample of the size the CPU k-means draws (at most nlist * 256 rows,
 * sx__kmeans_sample_rows), from nlist distinct sample rows, IVF_KMEANS_ITERS iterations; a GPU
 * error falls back to the CPU k-means. Without a GPU they build exactly as IVF_FLAT / IVF_PQ, after
 * one note per process (sx__gpu_note_once). The PQ codebooks and the assignment stay on the CPU.
 * The GPU kinds also accept cache_dataset_on_device (true|false, recorded nowhere: the CPU keeps
 * the vectors in RAM anyway).
 *
 * Thread-safety: build allocates a new index and reads only the borrowed vectors.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"
#include "index/cagra/cagra.h"
#include "index/ivf/ivf.h"
#include "util/alloc.h"
#include "util/err.h"
#include "vector/kmeans.h"
#include "vector/range.h"

#define DEFAULT_SEED     0x1F5EED5Eull
#define ASSIGN_BLOCK     ((size_t)65536)
/* Lloyd iterations of the coarse quantizer: FAISS's IVF default. Measured on Fashion-MNIST
 * (nlist 256): 20 iterations lower the inertia by 0.5% and change recall at a given nprobe by
 * under 0.01, for twice the build time. */
#define IVF_KMEANS_ITERS 10u

/* ---------------------------------------------------------------- names, params */

const char *sx__ivf_kind_name(sx__ivf_kind kind)
{
    switch (kind) {
    case SX__IVF_KIND_FLAT:
        return "IVF_FLAT";
    case SX__IVF_KIND_SQ8:
        return "IVF_SQ8";
    case SX__IVF_KIND_PQ:
        return "IVF_PQ";
    }
    return "IVF";
}

typedef struct build_params {
    long nlist;
    long m; /* PQ: 0 = default (chosen from dim at build) */
} build_params;

static bool tolerated_key(const char *k)
{
    return strcmp(k, "index_type") == 0 || strcmp(k, "metric_type") == 0 ||
           strcmp(k, "metricType") == 0;
}

/* Milvus's names of the GPU variants (messages). */
static const char *gpu_kind_name(sx__ivf_kind kind)
{
    return kind == SX__IVF_KIND_PQ ? "GPU_IVF_PQ" : "GPU_IVF_FLAT";
}

static sx_status
parse_build(sx__ivf_kind kind, bool gpu, const sx_param *p, size_t np, build_params *bp)
{
    const char *name = gpu ? gpu_kind_name(kind) : sx__ivf_kind_name(kind);
    bool pq = kind == SX__IVF_KIND_PQ;
    for (size_t i = 0; i < np; i++) {
        const char *k = p[i].key;
        if (!k)
            return sx__err(SX_EINVAL, "%s build parameter %zu has no key", name, i);
        if (strcmp(k, "nlist") == 0 || tolerated_key(k))
            continue;
        if (pq && (strcmp(k, "m") == 0 || strcmp(k, "nbits") == 0))
            continue;
        if (gpu && strcmp(k, "cache_dataset_on_device") == 0) {
            const char *v = p[i].value ? p[i].value : "";
            if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
                return sx__err(SX_EINVAL,
                               "cache_dataset_on_device must be true or false, got "
                               "\"%s\"",
                               v);
            continue;
        }
        return sx__err(SX_EINVAL, "unknown %s build parameter \"%s\" (allowed: %s%s)", name, k,
                       pq ? "nlist, m, nbits" : "nlist", gpu ? ", cache_dataset_on_device" : "");
    }
    sx_status rc = sx__param_int(p, np, "nlist", SX__IVF_NLIST_MIN, SX__IVF_NLIST_MAX,
                                 SX__IVF_NLIST_DEF, &bp->nlist);
    if (rc != SX_OK)
        return rc;
    bp->m = 0;
    if (!pq)
        return SX_OK;
    rc = sx__param_int(p, np, "m", 1, SX_MAX_DIM, 0, &bp->m);
    if (rc != SX_OK)
        return rc;
    for (size_t i = 0; i < np; i++) {
        if (strcmp(p[i].key, "nbits") != 0)
            continue;
        const char *v = p[i].value ? p[i].value : "";
        if (strcmp(v, "8") != 0)
            return sx__err(SX_EINVAL,
                           "nbits must be 8 (IVF_PQ supports 8-bit codes only), got "
                           "\"%s\"",
                           v);
    }
    return SX_OK;
}

/* The default m: the largest divisor of dim not above max(1, dim / 4), i.e. sub-spaces of at
 * least 4 dimensions (m = 32 for dim 128, 196 for 784). */
static size_t default_m(size_t dim)
{
    size_t cap = dim / 4 ? dim / 4 : 1;
    for (size_t m = cap; m > 1; m--)
        if (dim % m == 0)
            return m;
    return 1;
}

/* m for dim: the parameter or the default; SX_EINVAL when it does not divide dim. */
static sx_status resolve_m(const build_params *bp, size_t dim, size_t *m)
{
    if (bp->m == 0) {
        *m = default_m(dim);
        return SX_OK;
    }
    if ((size_t)bp->m > dim || dim % (size_t)bp->m != 0) {
        char divs[256];
        size_t off = 0;
        for (size_t d = 1; d <= dim && off + 24 < sizeof divs; d++)
            if (dim % d == 0)
                off += (size_t)snprintf(divs + off, sizeof divs - off, "%s%zu", off ? ", " : "", d);
        return sx__err(SX_EINVAL, "m (%ld) must divide dim (%zu): one of %s", bp->m, dim, divs);
    }
    *m = (size_t)bp->m;
    return SX_OK;
}

static sx_status check_shape(sx__ivf_kind kind, size_t n, size_t dim, sx_metric metric)
{
    const char *name = sx__ivf_kind_name(kind);
    if (dim == 0 || dim > SX_MAX_DIM)
        return sx__err(SX_EINVAL, "%s: dim %zu out of range 1..%u", name, dim, SX_MAX_DIM);
    if (metric != SX_METRIC_L2 && metric != SX_METRIC_IP && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL, "%s: unknown metric %d", name, (int)metric);
    if ((uint64_t)n > UINT32_MAX)
        return sx__err(SX_EINVAL, "%s: %zu rows exceed the 32-bit id space", name, n);
    return SX_OK;
}

/* ---------------------------------------------------------------- memory estimate */

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Peak bytes of a build (the maximum over its phases of what is live at once). OpenBLAS's own
 * buffers are not counted (they are allocated by the library, once per process). */
static uint64_t estimate(sx__ivf_kind kind, size_t nlist_param, size_t m, size_t n, size_t dim)
{
    if (n == 0)
        return sizeof(sx__ivf) + 64;
    uint64_t nl = nlist_param < n ? nlist_param : n;
    uint64_t cent = nl * dim * 4 + 64;
    uint64_t lists = (nl + 1) * 4 + (uint64_t)n * 4; /* off, ids */
    uint64_t assign = (uint64_t)n * 4;
    uint64_t tile = (uint64_t)((1u << 18) + 16) * 4 + nl * 8 + 4096;
    uint64_t base = sizeof(sx__ivf) + cent;
    uint64_t peak = base + sx__kmeans_train_bytes(n, dim, (size_t)nl, 0);
    peak = max_u64(peak, base + assign + tile);
    uint64_t built = base + assign + lists;
    peak = max_u64(peak, built);
    if (kind == SX__IVF_KIND_FLAT)
        return max_u64(peak, built + (uint64_t)n * dim * 4 + 64);
    size_t enc_rows = (size_t)SX__IVF_MAX_THREADS * SX__IVF_ENCODE_CHUNK;
    uint64_t scratch = (uint64_t)(n < enc_rows ? n : enc_rows) * dim * 4;
    if (kind == SX__IVF_KIND_SQ8) {
        /* training the robust ranges (range.h) on the residuals, then codes and their flags */
        uint64_t ranges = (uint64_t)dim * 8 + 128;
        peak = max_u64(peak, built + ranges + sx__range_train_bytes(n, dim) +
                                 (uint64_t)SX__IVF_ENCODE_CHUNK * dim * 4 + 64);
        uint64_t codes = (uint64_t)n * dim + ranges + ((uint64_t)n + 63) / 64 * 8 + dim * 4;
        return max_u64(peak, built + codes + scratch);
    }
    /* PQ */
    uint64_t ksub = SX__IVF_PQ_KSUB, dsub = dim / (m ? m : 1);
    uint64_t ns = n < SX__IVF_PQ_TRAIN_ROWS ? n : SX__IVF_PQ_TRAIN_ROWS;
    uint64_t books = 2 * ((uint64_t)m * ksub * dsub * 4 + 64); /* both codebook layouts */
    uint64_t train = ns * 4 + ns * dim * 4 + ns * dsub * 4 +
                     sx__kmeans_train_bytes((size_t)ns, (size_t)dsub, (size_t)ksub, 0);
    peak = max_u64(peak, built + books + train);
    uint64_t rowcodes = (uint64_t)n * m;
    peak = max_u64(peak, built + books + rowcodes + scratch);
    uint64_t blocks = ((uint64_t)n + SX__IVF_PQ_BLOCK * nl) * m + (nl + 1) * 4 + 64;
    uint64_t term = ((uint64_t)n + SX__IVF_PQ_BLOCK * nl) * 4 + dim * 4 + 64;
    /* after the build the assignment is freed; the row-major codes live until the blocks exist */
    return max_u64(peak, built + books + rowcodes + blocks + term + 64);
}

/* The GPU variants allocate on the host only the training sample and its row numbers
 * (gpu_coarse), both within sx__kmeans_train_bytes, so one estimate serves both. */
static uint64_t
estimate_params(sx__ivf_kind kind, bool gpu, const sx_param *p, size_t np, size_t n, size_t dim)
{
    build_params bp;
    if (parse_build(kind, gpu, p, np, &bp) != SX_OK) {
        sx__err_clear();
        bp.nlist = SX__IVF_NLIST_DEF;
        bp.m = 0;
    }
    size_t m = 0;
    if (kind == SX__IVF_KIND_PQ && dim > 0 && resolve_m(&bp, dim, &m) != SX_OK) {
        sx__err_clear();
        m = default_m(dim);
    }
    return estimate(kind, (size_t)bp.nlist, m, n, dim);
}

/* ---------------------------------------------------------------- allocation */

sx_status sx__ivf_new(
    sx__ivf_kind kind, const float *vecs, size_t n, size_t dim, sx_metric metric, sx__ivf **out)
{
    sx__ivf *v = sx__calloc(1, sizeof *v);
    if (!v)
        return sx__err(SX_ENOMEM, "%s: out of memory", sx__ivf_kind_name(kind));
    v->kind = kind;
    v->vecs = vecs;
    v->n = n;
    v->dim = dim;
    v->metric = metric;
    v->dist = sx__dist_for_metric(metric);
    v->chunk = 0;
    *out = v;
    return SX_OK;
}

void sx__ivf_free(sx__index *idx)
{
    sx__ivf *v = (sx__ivf *)(void *)idx;
    if (!v)
        return;
    sx__free_aligned(v->centroids);
    sx__free_aligned(v->lvecs);
    sx__free(v->off);
    sx__free(v->ids);
    sx__sq8_fini(&v->sq);
    sx__free(v->sq_codes);
    sx__free(v->sq_exact);
    if (v->pq.centroids)
        sx__pq_fini(&v->pq);
    sx__free(v->blk);
    sx__free_aligned(v->pq_codes);
    sx__free_aligned(v->term);
    sx__free(v);
}

size_t sx__ivf_memory_bytes(const sx__index *idx)
{
    const sx__ivf *v = sx__ivf_of(idx);
    size_t b = sizeof *v;
    b += (size_t)v->nlist * v->dim * sizeof(float);
    if (v->off)
        b += ((size_t)v->nlist + 1) * sizeof(uint32_t);
    b += v->n * sizeof(uint32_t);
    if (v->lvecs)
        b += v->n * v->dim * sizeof(float);
    if (v->kind == SX__IVF_KIND_SQ8)
        b += v->n * v->dim + (size_t)v->sq.dim * 2 * sizeof(float);
    if (v->sq_exact)
        b += (v->n + 63) / 64 * sizeof(uint64_t);
    if (v->kind == SX__IVF_KIND_PQ) {
        b += sx__pq_memory_bytes(&v->pq);
        if (v->blk) {
            b += ((size_t)v->nlist + 1) * sizeof(uint32_t) +
                 (size_t)v->blk[v->nlist] * v->m * SX__IVF_PQ_BLOCK;
            if (v->term) /* laid out by blk (sx__ivf_finish_pq) */
                b += (size_t)v->blk[v->nlist] * SX__IVF_PQ_BLOCK * sizeof(float);
        }
    }
    return b;
}

/* ---------------------------------------------------------------- FLAT, PQ layout */

sx_status sx__ivf_finish_flat(sx__ivf *v)
{
    size_t row = v->dim * sizeof(float);
    v->lvecs = sx__malloc_aligned(v->n * row + 1);
    if (!v->lvecs)
        return sx__err(SX_ENOMEM, "IVF_FLAT: cannot allocate %zu bytes for the list vectors",
                       v->n * row);
    for (size_t p = 0; p < v->n; p++)
        memcpy(v->lvecs + p * v->dim, v->vecs + (size_t)v->ids[p] * v->dim, row);
    return SX_OK;
}

sx_status sx__ivf_finish_pq(sx__ivf *v, const uint8_t *rowcodes)
{
    size_t m = v->m, nl = v->nlist;
    v->blk = sx__malloc((nl + 1) * sizeof *v->blk);
    if (!v->blk)
        return sx__err(SX_ENOMEM, "IVF_PQ: out of memory");
    size_t nb = 0;
    for (size_t l = 0; l < nl; l++) {
        v->blk[l] = (uint32_t)nb;
        nb += (sx__ivf_list_size(v, (uint32_t)l) + SX__IVF_PQ_BLOCK - 1) / SX__IVF_PQ_BLOCK;
    }
    v->blk[nl] = (uint32_t)nb;
    size_t bytes = nb * m * SX__IVF_PQ_BLOCK;
    v->pq_codes = sx__malloc_aligned(bytes ? bytes : 1);
    if (!v->pq_codes)
        return sx__err(SX_ENOMEM, "IVF_PQ: cannot allocate %zu bytes of codes", bytes);
    memset(v->pq_codes, 0, bytes);
    for (size_t l = 0; l < nl; l++) {
        size_t cnt = sx__ivf_list_size(v, (uint32_t)l);
        const uint8_t *src = rowcodes + (size_t)v->off[l] * m;
        uint8_t *dst = v->pq_codes + (size_t)v->blk[l] * m * SX__IVF_PQ_BLOCK;
        for (size_t t = 0; t < cnt; t++) {
            uint8_t *b = dst + (t / SX__IVF_PQ_BLOCK) * m * SX__IVF_PQ_BLOCK;
            size_t lane = t % SX__IVF_PQ_BLOCK;
            for (size_t j = 0; j < m; j++)
                b[j * SX__IVF_PQ_BLOCK + lane] = src[t * m + j];
        }
    }
    if (v->metric != SX_METRIC_L2 || nb == 0)
        return SX_OK;
    /* the L2 terms ||r'||^2 + 2 <c, r'> (ivf.h) */
    v->term = sx__malloc_aligned(nb * SX__IVF_PQ_BLOCK * sizeof(float));
    float *r = sx__malloc_aligned(v->dim * sizeof(float));
    if (!v->term || !r) {
        sx__free_aligned(r);
        return sx__err(SX_ENOMEM, "IVF_PQ: out of memory");
    }
    memset(v->term, 0, nb * SX__IVF_PQ_BLOCK * sizeof(float));
    for (size_t l = 0; l < nl; l++) {
        const float *c = v->centroids + l * v->dim;
        size_t cnt = sx__ivf_list_size(v, (uint32_t)l);
        const uint8_t *src = rowcodes + (size_t)v->off[l] * m;
        float *t = v->term + (size_t)v->blk[l] * SX__IVF_PQ_BLOCK;
        for (size_t p = 0; p < cnt; p++) {
            sx__pq_decode(&v->pq, src + p * m, r);
            float s = 0.0f;
            for (size_t d = 0; d < v->dim; d++)
                s += r[d] * (r[d] + 2.0f * c[d]);
            t[p] = s;
        }
    }
    sx__free_aligned(r);
    return SX_OK;
}

void sx__ivf_pq_code_at(const sx__ivf *v, uint32_t list, size_t p, uint8_t *out)
{
    const uint8_t *b =
        v->pq_codes + ((size_t)v->blk[list] + p / SX__IVF_PQ_BLOCK) * v->m * SX__IVF_PQ_BLOCK;
    size_t lane = p % SX__IVF_PQ_BLOCK;
    for (size_t j = 0; j < v->m; j++)
        out[j] = b[j * SX__IVF_PQ_BLOCK + lane];
}

/* ---------------------------------------------------------------- parallel encoding */

typedef struct enc_job {
    sx__ivf *v;
    const uint32_t *assign; /* row -> list */
    uint8_t *codes;         /* list order, code_size bytes per row */
    size_t code_size;
    const sx__build_ctx *ctx;
    atomic_size_t next; /* next chunk; relaxed: work distribution only */
    atomic_bool stop;   /* relaxed: set on error or cancel, polled per chunk */
    pthread_mutex_t mu;
    sx_status rc; /* guarded by: mu (first failure) */
} enc_job;

static void job_fail(enc_job *j, sx_status rc)
{
    pthread_mutex_lock(&j->mu);
    if (j->rc == SX_OK)
        j->rc = rc;
    pthread_mutex_unlock(&j->mu);
    atomic_store_explicit(&j->stop, true, memory_order_relaxed);
}

/* Residuals of list positions [p0, p1) into buf ((p1-p0) x dim). */
static void residuals(const sx__ivf *v, const uint32_t *assign, size_t p0, size_t p1, float *buf)
{
    size_t dim = v->dim;
    for (size_t p = p0; p < p1; p++) {
        uint32_t id = v->ids[p];
        const float *x = v->vecs + (size_t)id * dim;
        const float *c = v->centroids + (size_t)assign[id] * dim;
        float *r = buf + (p - p0) * dim;
        for (size_t d = 0; d < dim; d++)
            r[d] = x[d] - c[d];
    }
}

static void *enc_worker(void *arg)
{
    enc_job *j = arg;
    sx__ivf *v = j->v;
    float *buf = sx__malloc_aligned((size_t)SX__IVF_ENCODE_CHUNK * v->dim * sizeof(float));
    if (!buf) {
        job_fail(j, sx__err(SX_ENOMEM, "%s: cannot allocate an encoding buffer",
                            sx__ivf_kind_name(v->kind)));
        return NULL;
    }
    for (;;) {
        if (atomic_load_explicit(&j->stop, memory_order_relaxed))
            break;
        if (j->ctx && j->ctx->cancel &&
            atomic_load_explicit(j->ctx->cancel, memory_order_relaxed)) {
            job_fail(j, sx__err(SX_ECANCELED, "%s: build cancelled", sx__ivf_kind_name(v->kind)));
            break;
        }
        size_t c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        size_t p0 = c * SX__IVF_ENCODE_CHUNK;
        if (p0 >= v->n)
            break;
        size_t p1 = p0 + SX__IVF_ENCODE_CHUNK < v->n ? p0 + SX__IVF_ENCODE_CHUNK : v->n;
        residuals(v, j->assign, p0, p1, buf);
        uint8_t *dst = j->codes + p0 * j->code_size;
        if (v->kind == SX__IVF_KIND_SQ8)
            sx__sq8_encode(&v->sq, buf, p1 - p0, v->dim, dst);
        else
            sx__pq_encode(&v->pq, buf, p1 - p0, dst);
        if (j->ctx && j->ctx->progress)
            atomic_fetch_add_explicit(j->ctx->progress, p1 - p0, memory_order_relaxed);
    }
    sx__free_aligned(buf);
    return NULL;
}

static sx_status encode_all(
    sx__ivf *v, const uint32_t *assign, uint8_t *codes, size_t code_size, const sx__build_ctx *ctx)
{
    enc_job j;
    j.v = v;
    j.assign = assign;
    j.codes = codes;
    j.code_size = code_size;
    j.ctx = ctx;
    atomic_init(&j.next, 0);
    atomic_init(&j.stop, false);
    j.rc = SX_OK;
    if (pthread_mutex_init(&j.mu, NULL) != 0)
        return sx__err(SX_ENOMEM, "%s: cannot create a mutex", sx__ivf_kind_name(v->kind));
    size_t chunks = (v->n + SX__IVF_ENCODE_CHUNK - 1) / SX__IVF_ENCODE_CHUNK;
    size_t nt = ctx && ctx->threads > 1 ? ctx->threads : 1;
    if (nt > SX__IVF_MAX_THREADS)
        nt = SX__IVF_MAX_THREADS;
    if (nt > chunks)
        nt = chunks ? chunks : 1;
    pthread_t th[SX__IVF_MAX_THREADS];
    size_t started = 0;
    for (size_t t = 1; t < nt; t++) {
        if (pthread_create(&th[started], NULL, enc_worker, &j) != 0)
            break; /* fewer workers: the remaining ones take the chunks */
        started++;
    }
    enc_worker(&j);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.mu);
    return j.rc;
}

/* ---------------------------------------------------------------- build */

static bool is_cancelled(const sx__build_ctx *ctx)
{
    /* relaxed: a stop request needs no ordering with other memory */
    return ctx && ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed);
}

/* Assigns all rows (blocks between cancel checks) and sorts them into lists. */
static sx_status make_lists(sx__ivf *v, uint32_t *assign, const sx__build_ctx *ctx)
{
    const char *name = sx__ivf_kind_name(v->kind);
    for (size_t i0 = 0; i0 < v->n; i0 += ASSIGN_BLOCK) {
        if (is_cancelled(ctx))
            return sx__err(SX_ECANCELED, "%s: build cancelled", name);
        size_t rows = v->n - i0 < ASSIGN_BLOCK ? v->n - i0 : ASSIGN_BLOCK;
        sx_status rc = sx__kmeans_assign(v->vecs + i0 * v->dim, rows, v->dim, v->dim, v->centroids,
                                         v->nlist, assign + i0, NULL);
        if (rc != SX_OK)
            return rc;
        if (v->kind == SX__IVF_KIND_FLAT && ctx && ctx->progress)
            atomic_fetch_add_explicit(ctx->progress, rows, memory_order_relaxed);
    }
    v->off = sx__calloc((size_t)v->nlist + 1, sizeof *v->off);
    v->ids = sx__malloc(v->n * sizeof *v->ids);
    if (!v->off || !v->ids)
        return sx__err(SX_ENOMEM, "%s: cannot allocate the lists of %zu rows", name, v->n);
    for (size_t i = 0; i < v->n; i++)
        v->off[assign[i] + 1]++;
    for (size_t l = 0; l < v->nlist; l++)
        v->off[l + 1] += v->off[l];
    /* fill with a running cursor per list (off[l] shifted down by one slot, restored after) */
    for (size_t i = 0; i < v->n; i++)
        v->ids[v->off[assign[i]]++] = (uint32_t)i;
    for (size_t l = v->nlist; l > 0; l--)
        v->off[l] = v->off[l - 1];
    v->off[0] = 0;
    return SX_OK;
}

sx_status sx__ivf_sq8_flag(sx__ivf *v)
{
    sx__free(v->sq_exact);
    v->sq_exact = NULL;
    v->sq_n_exact = 0;
    size_t dim = v->dim, words = (v->n + 63) / 64;
    if (v->n == 0)
        return SX_OK;
    uint64_t *bits = sx__calloc(words, sizeof *bits);
    float *r = sx__malloc(dim * sizeof *r);
    if (!bits || !r) {
        sx__free(bits);
        sx__free(r);
        return sx__err(SX_ENOMEM, "IVF_SQ8: out of memory");
    }
    size_t cnt = 0;
    for (uint32_t l = 0; l < v->nlist; l++) {
        const float *c = v->centroids + (size_t)l * dim;
        for (size_t p = v->off[l]; p < v->off[l + 1]; p++) {
            const float *x = v->vecs + (size_t)v->ids[p] * dim;
            for (size_t d = 0; d < dim; d++)
                r[d] = x[d] - c[d]; /* as residuals() computes it */
            if (sx__sq8_clipped(&v->sq, r, v->sq_codes + p * dim)) {
                bits[p >> 6] |= (uint64_t)1 << (p & 63);
                cnt++;
            }
        }
    }
    sx__free(r);
    if (cnt == 0) {
        sx__free(bits);
        bits = NULL;
    }
    v->sq_exact = bits;
    v->sq_n_exact = cnt;
    return SX_OK;
}

static sx_status build_sq8(sx__ivf *v, const uint32_t *assign, const sx__build_ctx *ctx)
{
    sx_status rc = sx__sq8_init(&v->sq, v->dim);
    if (rc != SX_OK)
        return rc;
    /* fences from evenly spaced list positions (every list contributes) */
    size_t ns = sx__range_sample_rows(v->n, v->dim);
    float *smp = sx__malloc_aligned((ns ? ns : 1) * v->dim * sizeof(float));
    if (!smp)
        return sx__err(SX_ENOMEM, "IVF_SQ8: out of memory");
    for (size_t i = 0; i < ns; i++) {
        size_t p = (size_t)((unsigned __int128)i * v->n / ns);
        residuals(v, assign, p, p + 1, smp + i * v->dim);
    }
    rc = sx__sq8_fence(&v->sq, smp, ns, v->dim);
    sx__free_aligned(smp);
    if (rc != SX_OK)
        return rc;
    float *buf = sx__malloc_aligned((size_t)SX__IVF_ENCODE_CHUNK * v->dim * sizeof(float));
    if (!buf)
        return sx__err(SX_ENOMEM, "IVF_SQ8: out of memory");
    for (size_t p0 = 0; p0 < v->n; p0 += SX__IVF_ENCODE_CHUNK) {
        size_t p1 = p0 + SX__IVF_ENCODE_CHUNK < v->n ? p0 + SX__IVF_ENCODE_CHUNK : v->n;
        residuals(v, assign, p0, p1, buf);
        sx__sq8_observe(&v->sq, buf, p1 - p0, v->dim);
    }
    sx__free_aligned(buf);
    sx__sq8_finish(&v->sq);
    if (is_cancelled(ctx))
        return sx__err(SX_ECANCELED, "IVF_SQ8: build cancelled");
    v->sq_codes = sx__malloc(v->n * v->dim);
    if (!v->sq_codes)
        return sx__err(SX_ENOMEM, "IVF_SQ8: cannot allocate %zu bytes of codes", v->n * v->dim);
    rc = encode_all(v, assign, v->sq_codes, v->dim, ctx);
    return rc == SX_OK ? sx__ivf_sq8_flag(v) : rc;
}

static sx_status
build_pq(sx__ivf *v, const uint32_t *assign, uint64_t seed, const sx__build_ctx *ctx)
{
    size_t ns = v->n < SX__IVF_PQ_TRAIN_ROWS ? v->n : SX__IVF_PQ_TRAIN_ROWS;
    uint32_t *rows = sx__malloc(ns * sizeof *rows);
    float *train = sx__malloc_aligned(ns * v->dim * sizeof(float));
    if (!rows || !train) {
        sx__free(rows);
        sx__free_aligned(train);
        return sx__err(SX_ENOMEM, "IVF_PQ: cannot allocate %zu training rows", ns);
    }
    sx__kmeans_sample_rows(v->n, ns, seed ^ 0x5051ull, rows);
    for (size_t i = 0; i < ns; i++) {
        const float *x = v->vecs + (size_t)rows[i] * v->dim;
        const float *c = v->centroids + (size_t)assign[rows[i]] * v->dim;
        float *r = train + i * v->dim;
        for (size_t d = 0; d < v->dim; d++)
            r[d] = x[d] - c[d];
    }
    sx__free(rows);
    uint32_t threads = ctx && ctx->threads ? ctx->threads : 1;
    sx_status rc = sx__pq_train(&v->pq, train, ns, v->dim, v->m, seed, threads);
    sx__free_aligned(train);
    if (rc != SX_OK)
        return rc;
    if (v->pq.dim != v->dim || v->pq.m != v->m || v->pq.ksub == 0 || v->pq.ksub > SX__IVF_PQ_KSUB ||
        (size_t)v->pq.dsub * v->m != v->dim)
        return sx__err(SX_EFATAL, "IVF_PQ: the PQ codec returned an unexpected shape");
    if (is_cancelled(ctx))
        return sx__err(SX_ECANCELED, "IVF_PQ: build cancelled");
    uint8_t *rowcodes = sx__malloc(v->n * v->m);
    if (!rowcodes)
        return sx__err(SX_ENOMEM, "IVF_PQ: cannot allocate %zu bytes of codes",
                       v->n * (size_t)v->m);
    rc = encode_all(v, assign, rowcodes, v->m, ctx);
    if (rc == SX_OK)
        rc = sx__ivf_finish_pq(v, rowcodes);
    sx__free(rowcodes);
    return rc;
}

/* Coarse k-means on the GPU: a training sample of the CPU k-means' size (drawn with the seed),
 * nlist distinct sample rows as the initial centroids, IVF_KMEANS_ITERS Lloyd iterations of
 * sx__gpu_kmeans. centroids may be partly written on failure. Errors: sx__gpu_kmeans's,
 * SX_ENOMEM. */
static sx_status
gpu_coarse(const float *vecs, size_t n, size_t dim, size_t k, uint64_t seed, float *centroids)
{
    size_t ns = k * SX__KMEANS_SAMPLE_PER_CENTROID;
    if (ns > n)
        ns = n;
    uint32_t *rows = sx__malloc(ns * sizeof *rows);
    float *sample = ns < n ? sx__malloc_aligned(ns * dim * sizeof *sample) : NULL;
    if (!rows || (ns < n && !sample)) {
        sx__free(rows);
        sx__free_aligned(sample);
        return sx__err(SX_ENOMEM, "GPU k-means: cannot allocate the training sample");
    }
    const float *x = vecs;
    if (ns < n) {
        sx__kmeans_sample_rows(n, ns, seed, rows);
        for (size_t i = 0; i < ns; i++)
            memcpy(sample + i * dim, vecs + (size_t)rows[i] * dim, dim * sizeof *sample);
        x = sample;
    }
    sx__kmeans_sample_rows(ns, k, seed ^ 0xC3E7A01Dull, rows);
    for (size_t c = 0; c < k; c++)
        memcpy(centroids + c * dim, x + (size_t)rows[c] * dim, dim * sizeof *centroids);
    sx_status rc = sx__gpu_kmeans(x, ns, dim, (uint32_t)k, IVF_KMEANS_ITERS, centroids, NULL, NULL);
    sx__free(rows);
    sx__free_aligned(sample);
    return rc;
}

/* The coarse quantizer: on the GPU for the GPU kinds when one is usable, else (and after a GPU
 * error) the CPU k-means exactly as IVF_FLAT / IVF_PQ run it. */
static sx_status train_coarse(sx__ivf_kind kind,
                              bool gpu,
                              const float *vecs,
                              size_t n,
                              size_t dim,
                              size_t k,
                              uint64_t seed,
                              const sx__build_ctx *ctx,
                              float *centroids)
{
    if (gpu) {
        const char *name = gpu_kind_name(kind);
        if (sx__gpu_available()) {
            sx__gpu_note_once(SX__GPU_NOTE_KMEANS_GPU, "%s: coarse k-means on the GPU (%s)", name,
                              sx__gpu_describe());
            sx_status rc = gpu_coarse(vecs, n, dim, k, seed, centroids);
            if (rc == SX_OK)
                return SX_OK;
            sx__gpu_note_once(SX__GPU_NOTE_KMEANS_FAIL,
                              "%s: GPU k-means failed (%s): using the CPU k-means", name,
                              sx_errmsg());
        } else {
            sx__gpu_note_once(SX__GPU_NOTE_KMEANS_CPU, "%s: coarse k-means on the CPU; GPU: %s",
                              name, sx__gpu_describe());
        }
    }
    sx__kmeans_opts ko = {
        .k = k, .iters = IVF_KMEANS_ITERS, .seed = seed, .cancel = ctx ? ctx->cancel : NULL
    };
    return sx__kmeans_train(vecs, n, dim, dim, &ko, centroids);
}

static sx_status ivf_build(sx__ivf_kind kind,
                           bool gpu,
                           const sx_param *p,
                           size_t np,
                           const float *vecs,
                           size_t n,
                           size_t dim,
                           sx_metric metric,
                           const sx__build_ctx *ctx,
                           sx__index **out)
{
    const char *name = gpu ? gpu_kind_name(kind) : sx__ivf_kind_name(kind);
    build_params bp;
    sx_status rc = parse_build(kind, gpu, p, np, &bp);
    if (rc != SX_OK)
        return rc;
    rc = check_shape(kind, n, dim, metric);
    if (rc != SX_OK)
        return rc;
    if (n > 0 && !vecs)
        return sx__err(SX_EINVAL, "%s: no vectors for %zu rows", name, n);
    size_t m = 0;
    if (kind == SX__IVF_KIND_PQ) {
        rc = resolve_m(&bp, dim, &m);
        if (rc != SX_OK)
            return rc;
    }
    uint64_t need = estimate(kind, (size_t)bp.nlist, m, n, dim);
    if (ctx && ctx->memory_limit_bytes && need > ctx->memory_limit_bytes)
        return sx__err(SX_ENOMEM,
                       "%s: building %zu x %zu needs about %llu bytes, above the memory limit "
                       "of %llu bytes (index_build_memory_limit)",
                       name, n, dim, (unsigned long long)need,
                       (unsigned long long)ctx->memory_limit_bytes);
    if (is_cancelled(ctx))
        return sx__err(SX_ECANCELED, "%s: build cancelled", name);

    sx__ivf *v = NULL;
    rc = sx__ivf_new(kind, vecs, n, dim, metric, &v);
    if (rc != SX_OK)
        return rc;
    uint32_t *assign = NULL;
    v->nlist_param = (uint32_t)bp.nlist;
    v->nlist = (uint32_t)((size_t)bp.nlist < n ? (size_t)bp.nlist : n);
    v->m = (uint32_t)m;
    if (n == 0) {
        v->off = sx__calloc(1, sizeof *v->off);
        if (!v->off) {
            rc = sx__err(SX_ENOMEM, "%s: out of memory", name);
            goto fail;
        }
        goto done;
    }
    uint64_t seed = ctx && ctx->seed ? ctx->seed : DEFAULT_SEED;
    v->centroids = sx__malloc_aligned((size_t)v->nlist * dim * sizeof(float));
    assign = sx__malloc(n * sizeof *assign);
    if (!v->centroids || !assign) {
        rc = sx__err(SX_ENOMEM, "%s: out of memory", name);
        goto fail;
    }
    rc = train_coarse(kind, gpu, vecs, n, dim, v->nlist, seed, ctx, v->centroids);
    if (rc == SX_ECANCELED)
        rc = sx__err(SX_ECANCELED, "%s: build cancelled", name);
    if (rc != SX_OK)
        goto fail;
    rc = make_lists(v, assign, ctx);
    if (rc != SX_OK)
        goto fail;
    if (kind == SX__IVF_KIND_FLAT)
        rc = sx__ivf_finish_flat(v);
    else if (kind == SX__IVF_KIND_SQ8)
        rc = build_sq8(v, assign, ctx);
    else if (kind == SX__IVF_KIND_PQ)
        rc = build_pq(v, assign, seed, ctx);
    if (rc != SX_OK)
        goto fail;
done:
    sx__free(assign);
    if (ctx && ctx->progress)
        atomic_store_explicit(ctx->progress, n, memory_order_relaxed);
    *out = (sx__index *)(void *)v;
    return SX_OK;
fail:
    sx__free(assign);
    sx__ivf_free((sx__index *)(void *)v);
    return rc;
}

/* ---------------------------------------------------------------- vtables */

/* One vtable per (kind, GPU k-means or not): the entries only bind the kind and the flag to the
 * shared implementation above, so they are generated. The GPU_* variants differ from their CPU
 * twins only in the coarse k-means (sx__gpu_kmeans when a GPU is available): same file format,
 * same search, same deserializer. */
#define IVF_VTABLE(sym, NAME, prefix, KIND, GPU)                                                   \
 static sx_status prefix##_check_build(const sx_param *p, size_t np)                               \
 {                                                                                                 \
  build_params bp;                                                                                 \
  return parse_build(KIND, GPU, p, np, &bp);                                                       \
 }                                                                                                 \
 static sx_status prefix##_check_shape(const sx_param *p, size_t np, size_t dim, sx_metric metric) \
 {                                                                                                 \
  build_params bp;                                                                                 \
  size_t m;                                                                                        \
  (void)metric;                                                                                    \
  sx_status rc = parse_build(KIND, GPU, p, np, &bp);                                               \
  if (rc == SX_OK && (KIND) == SX__IVF_KIND_PQ)                                                    \
   rc = resolve_m(&bp, dim, &m);                                                                   \
  return rc;                                                                                       \
 }                                                                                                 \
 static sx_status prefix##_check_search(const sx_param *p, size_t np, size_t k)                    \
 {                                                                                                 \
  return sx__ivf_check_search_params(KIND, p, np, k);                                              \
 }                                                                                                 \
 static sx_status prefix##_build(const sx_param *p, size_t np, const float *vecs, size_t n,        \
                                 size_t dim, sx_metric metric, const sx__build_ctx *ctx,           \
                                 sx__index **out)                                                  \
 {                                                                                                 \
  return ivf_build(KIND, GPU, p, np, vecs, n, dim, metric, ctx, out);                              \
 }                                                                                                 \
 static sx_status prefix##_deserialize(const void *data, size_t len, const float *vecs, size_t n,  \
                                       size_t dim, sx_metric metric, sx__index **out)              \
 {                                                                                                 \
  return sx__ivf_deserialize(KIND, data, len, vecs, n, dim, metric, out);                          \
 }                                                                                                 \
 static uint64_t prefix##_estimate(const sx_param *p, size_t np, size_t n, size_t dim)             \
 {                                                                                                 \
  return estimate_params(KIND, GPU, p, np, n, dim);                                                \
 }                                                                                                 \
 const sx__index_ops sym = {                                                                       \
     .name = (NAME),                                                                               \
     .check_build_params = prefix##_check_build,                                                   \
     .check_build_shape = prefix##_check_shape,                                                    \
     .check_search_params = prefix##_check_search,                                                 \
     .build = prefix##_build,                                                                      \
     .search = sx__ivf_search,                                                                     \
     .serialize = sx__ivf_serialize,                                                               \
     .deserialize = prefix##_deserialize,                                                          \
     .memory_bytes = sx__ivf_memory_bytes,                                                         \
     .free = sx__ivf_free,                                                                         \
     .estimate_build_bytes = prefix##_estimate,                                                    \
 }

IVF_VTABLE(sx__ivf_flat_index_ops, "IVF_FLAT", flat, SX__IVF_KIND_FLAT, false);
IVF_VTABLE(sx__ivf_sq8_index_ops, "IVF_SQ8", sq8, SX__IVF_KIND_SQ8, false);
IVF_VTABLE(sx__ivf_pq_index_ops, "IVF_PQ", pq, SX__IVF_KIND_PQ, false);
IVF_VTABLE(sx__gpu_ivf_flat_index_ops, "GPU_IVF_FLAT", gpu_flat, SX__IVF_KIND_FLAT, true);
IVF_VTABLE(sx__gpu_ivf_pq_index_ops, "GPU_IVF_PQ", gpu_pq, SX__IVF_KIND_PQ, true);

const sx__index_ops *sx__ivf_ops(sx__ivf_kind kind)
{
    switch (kind) {
    case SX__IVF_KIND_FLAT:
        return &sx__ivf_flat_index_ops;
    case SX__IVF_KIND_SQ8:
        return &sx__ivf_sq8_index_ops;
    case SX__IVF_KIND_PQ:
        return &sx__ivf_pq_index_ops;
    }
    return NULL;
}
