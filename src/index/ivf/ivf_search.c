/*
 * ivf_search.c: IVF search (IVF_FLAT, IVF_SQ8, IVF_PQ; layout in ivf.h).
 *
 * One query:
 *   1. coarse: the distance from q to every centroid under the index metric (L2: ||q - c||^2;
 *      IP/COSINE: -<q, c>, FAISS's inner-product quantizer), the nprobe best lists (a bounded
 *      heap, ties to the lower list id);
 *   2. scan those lists nearest first, pushing (distance, row id) into a top-k heap; rows whose
 *      bit is clear in `allow` are skipped before any distance is computed (FLAT, SQ8) or before
 *      they are pushed (PQ, which scores 32 codes at a time);
 *   3. when fewer than k rows were found (a selective filter, or tiny lists), more lists are
 *      scanned in centroid order until k are found or every list was scanned, so a filtered
 *      query returns k rows whenever k allowed rows exist (worst case: all lists, i.e. a full
 *      scan, the same bound as FLAT);
 *   4. refine (IVF_SQ8 / IVF_PQ, refine=true): step 2 keeps ceil(k * refine_k) candidates by
 *      their code distance, which are then re-scored exactly from the borrowed vectors and the
 *      k best returned (FAISS IndexRefineFlat's k_factor; Milvus's refine_k "magnification").
 *
 * Distances per kind, for a row x = c + r in list c (r the residual, r' its decoded code):
 *   FLAT  dist(q, x) with the vector/dist.h kernel: identical to FLAT's values, so nprobe =
 *         nlist returns exactly FLAT's result;
 *   SQ8   L2: ||(q - c) - r'||^2 (quant_sq8.h prepares q - c - vmin once per list);
 *         IP: -<q, c> - <q, r'> (the first term is the coarse distance); rows whose code is
 *         clipped (sq_exact: an outlier beyond the robust ranges) get dist(q, x) from the
 *         vectors instead, so an outlier is never reported at its clamped code's distance;
 *   PQ    asymmetric distance computation (ADC) with ONE table per query: dist = base + term +
 *         sum_j T[j][code_j]. L2: T = -2 <q_j, p_js>, base = ||q - c||^2, term = ||r'||^2 +
 *         2 <c, r'> stored per row (ivf.h); IP: T = -<q_j, p_js>, base = -<q, c>, no term.
 * The ADC scan reads one 32-code block at a time (transposed, ivf.h) and sums the table
 * entries with gathers: 16 lanes (AVX-512) or 8 (AVX2) per instruction. Each lane adds the m
 * terms in the same order as the scalar loop, so every ISA returns bit-identical distances.
 *
 * Parameters (Milvus names). nprobe: integer in [1, 65536], default 8; values above the lists
 * the segment has are clamped (a small segment gets nlist = min(nlist, rows)). refine: "true" or
 * "false" (default false), refine_k: a number in [1, 65536] (default 1: re-score only the k
 * returned rows, i.e. exact distances and order but the same set), IVF_SQ8 and IVF_PQ only.
 * "ef" is tolerated and ignored (generic parameters, as FLAT does). check_search_params rejects
 * any other key; search() itself ignores unknown keys and rejects bad values of known ones.
 *
 * Scratch. Each thread keeps one buffer (centroid distances, probe order, the ADC table, the
 * prepared SQ8 query, refine candidates) in a pthread key, grown on demand, freed at thread
 * exit, so steady-state queries do not allocate.
 *
 * Thread-safety: read-only on the index; any number of threads may search at once.
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "index/ivf/ivf.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

/* FLAT list scan: the first PF_LINES cache lines of the row PF_AHEAD rows ahead are prefetched
 * (the hardware prefetcher follows the rest of a contiguous list). Measured on 1M x 128: 8/8
 * beat 4/4 by 10% and no prefetch by 16%; more rows ahead gained nothing. */
#define PF_AHEAD     8u
#define PF_LINES     8u
/* refine: candidates whose whole row is prefetched ahead of the one being re-scored (~5% QPS on
 * Fashion-MNIST at refine_k 4, where a row is 49 cache lines) */
#define REFINE_AHEAD 4u

/* ---------------------------------------------------------------- params */

typedef struct search_params {
    long nprobe;
    bool refine;
    double refine_k;
} search_params;

static sx_status
parse_search(sx__ivf_kind kind, const sx_param *p, size_t np, bool strict, search_params *sp)
{
    const char *name = sx__ivf_kind_name(kind);
    bool quant = kind != SX__IVF_KIND_FLAT;
    sp->refine = false;
    sp->refine_k = 1.0;
    for (size_t i = 0; i < np; i++) {
        const char *k = p[i].key ? p[i].key : "";
        const char *val = p[i].value ? p[i].value : "";
        if (strcmp(k, "refine") == 0 || strcmp(k, "refine_k") == 0) {
            if (!quant) {
                if (strict)
                    return sx__err(SX_EINVAL,
                                   "%s does not take \"%s\" (its distances are exact; refine "
                                   "is for IVF_SQ8 and IVF_PQ)",
                                   name, k);
                continue;
            }
            if (strcmp(k, "refine") == 0) {
                if (strcasecmp(val, "true") == 0)
                    sp->refine = true;
                else if (strcasecmp(val, "false") == 0)
                    sp->refine = false;
                else
                    return sx__err(SX_EINVAL, "refine must be \"true\" or \"false\", got \"%s\"",
                                   val);
            } else {
                char *end = NULL;
                double v = strtod(val, &end);
                if (end == val || *end != '\0' || !(v >= 1.0) || !(v <= SX__IVF_REFINE_K_MAX))
                    return sx__err(SX_EINVAL, "refine_k must be a number in [1, %.0f], got \"%s\"",
                                   SX__IVF_REFINE_K_MAX, val);
                sp->refine_k = v;
            }
            continue;
        }
        if (strict && strcmp(k, "nprobe") != 0 && strcmp(k, "ef") != 0)
            return sx__err(SX_EINVAL, "unknown %s search parameter \"%s\" (allowed: %s)", name, k,
                           quant ? "nprobe, refine, refine_k" : "nprobe");
    }
    return sx__param_int(p, np, "nprobe", 1, SX__IVF_NLIST_MAX, SX__IVF_NPROBE_DEF, &sp->nprobe);
}

sx_status sx__ivf_check_search_params(sx__ivf_kind kind, const sx_param *p, size_t np, size_t k)
{
    (void)k;
    search_params sp;
    return parse_search(kind, p, np, true, &sp);
}

/* ---------------------------------------------------------------- scratch */

typedef struct scratch {
    void *buf;
    size_t cap;
} scratch;

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
static _Thread_local scratch *tls_scratch;

static void tls_destroy(void *p)
{
    scratch *s = p;
    sx__free_aligned(s->buf);
    sx__free(s);
    tls_scratch = NULL;
}

static void tls_init(void)
{
    tls_ok = pthread_key_create(&tls_key, tls_destroy) == 0;
}

/* The calling thread's scratch with at least `bytes`, or NULL on allocation failure. */
static void *thread_buf(size_t bytes)
{
    scratch *s = tls_scratch;
    if (!s) {
        if (pthread_once(&tls_once, tls_init) != 0 || !tls_ok)
            return NULL;
        s = sx__calloc(1, sizeof *s);
        if (!s)
            return NULL;
        if (pthread_setspecific(tls_key, s) != 0) {
            sx__free(s);
            return NULL;
        }
        tls_scratch = s;
    }
    if (bytes > s->cap) {
        void *b = sx__malloc_aligned(bytes);
        if (!b)
            return NULL;
        sx__free_aligned(s->buf);
        s->buf = b;
        s->cap = bytes;
    }
    return s->buf;
}

static size_t align64(size_t b)
{
    return (b + 63) & ~(size_t)63;
}

/* ---------------------------------------------------------------- ADC block kernels */

static void adc_scalar(const float *tab,
                       size_t ksub,
                       const uint8_t *blk,
                       size_t m,
                       float base,
                       const float *term,
                       float *out)
{
    for (size_t t = 0; t < SX__IVF_PQ_BLOCK; t++)
        out[t] = term ? base + term[t] : base;
    for (size_t j = 0; j < m; j++) {
        const float *tj = tab + j * ksub;
        const uint8_t *c = blk + j * SX__IVF_PQ_BLOCK;
        for (size_t t = 0; t < SX__IVF_PQ_BLOCK; t++)
            out[t] += tj[c[t]];
    }
}

__attribute__((target("avx2,fma"))) static void adc_avx2(const float *tab,
                                                         size_t ksub,
                                                         const uint8_t *blk,
                                                         size_t m,
                                                         float base,
                                                         const float *term,
                                                         float *out)
{
    __m256 b = _mm256_set1_ps(base), a0 = b, a1 = b, a2 = b, a3 = b;
    if (term) {
        a0 = _mm256_add_ps(b, _mm256_loadu_ps(term));
        a1 = _mm256_add_ps(b, _mm256_loadu_ps(term + 8));
        a2 = _mm256_add_ps(b, _mm256_loadu_ps(term + 16));
        a3 = _mm256_add_ps(b, _mm256_loadu_ps(term + 24));
    }
    for (size_t j = 0; j < m; j++) {
        const float *tj = tab + j * ksub;
        const uint8_t *c = blk + j * SX__IVF_PQ_BLOCK;
        __m256i i0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)c));
        __m256i i1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(c + 8)));
        __m256i i2 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(c + 16)));
        __m256i i3 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(c + 24)));
        a0 = _mm256_add_ps(a0, _mm256_i32gather_ps(tj, i0, 4));
        a1 = _mm256_add_ps(a1, _mm256_i32gather_ps(tj, i1, 4));
        a2 = _mm256_add_ps(a2, _mm256_i32gather_ps(tj, i2, 4));
        a3 = _mm256_add_ps(a3, _mm256_i32gather_ps(tj, i3, 4));
    }
    _mm256_storeu_ps(out, a0);
    _mm256_storeu_ps(out + 8, a1);
    _mm256_storeu_ps(out + 16, a2);
    _mm256_storeu_ps(out + 24, a3);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) static void
adc_avx512(const float *tab,
           size_t ksub,
           const uint8_t *blk,
           size_t m,
           float base,
           const float *term,
           float *out)
{
    __m512 b = _mm512_set1_ps(base), a0 = b, a1 = b;
    if (term) {
        a0 = _mm512_add_ps(b, _mm512_loadu_ps(term));
        a1 = _mm512_add_ps(b, _mm512_loadu_ps(term + 16));
    }
    for (size_t j = 0; j < m; j++) {
        const float *tj = tab + j * ksub;
        const uint8_t *c = blk + j * SX__IVF_PQ_BLOCK;
        __m512i i0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)c));
        __m512i i1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(c + 16)));
        a0 = _mm512_add_ps(a0, _mm512_i32gather_ps(i0, tj, 4));
        a1 = _mm512_add_ps(a1, _mm512_i32gather_ps(i1, tj, 4));
    }
    _mm512_storeu_ps(out, a0);
    _mm512_storeu_ps(out + 16, a1);
}

sx__ivf_adc_fn sx__ivf_adc_for(const char *isa)
{
    if (!isa)
        isa = sx__dist()->isa;
    /* the distance module checked CPU and OS support for its tables */
    if (strcmp(isa, "avx512") == 0)
        return sx__dist_avx512() ? adc_avx512 : NULL;
    if (strcmp(isa, "avx2") == 0)
        return sx__dist_avx2() ? adc_avx2 : NULL;
    if (strcmp(isa, "scalar") == 0)
        return adc_scalar;
    return NULL;
}

/* ---------------------------------------------------------------- list scans */

typedef struct query {
    const sx__ivf *v;
    const float *q;
    const uint64_t *allow;
    sx__topk *h;   /* where the scan pushes: out, or the refine candidates */
    float *prep;   /* SQ8: dim floats */
    float sq_bias; /* SQ8 IP */
    float *qtab;   /* PQ: m*ksub (L2: -2<q_j,p>; IP: -<q_j,p>) */
    float *blockd; /* PQ: 32 */
    sx__ivf_adc_fn adc;
    const sx__sq8_kernels *sqk;
} query;

static void scan_flat(query *qy, uint32_t l)
{
    const sx__ivf *v = qy->v;
    size_t b = v->off[l], e = v->off[l + 1], dim = v->dim;
    size_t lines = (dim * sizeof(float) + 63) / 64;
    if (lines > PF_LINES)
        lines = PF_LINES;
    const uint32_t *ids = v->ids;
    const uint64_t *allow = qy->allow;
    const float *rows = v->lvecs;
    sx__dist_fn dist = v->dist;
    sx__topk *h = qy->h;
    float bound = sx__topk_bound(h);
    for (size_t p = b; p < e && p < b + PF_AHEAD; p++)
        for (size_t c = 0; c < lines; c++)
            __builtin_prefetch((const char *)(rows + p * dim) + 64 * c, 0, 3);
    for (size_t p = b; p < e; p++) {
        if (p + PF_AHEAD < e) {
            const char *nx = (const char *)(rows + (p + PF_AHEAD) * dim);
            for (size_t c = 0; c < lines; c++)
                __builtin_prefetch(nx + 64 * c, 0, 3);
        }
        uint32_t id = ids[p];
        if (allow && !sx__bits_test(allow, id))
            continue;
        float d = dist(qy->q, rows + p * dim, dim);
        if (d <= bound) {
            sx__topk_push(h, d, id);
            bound = sx__topk_bound(h);
        }
    }
}

static void scan_sq8(query *qy, uint32_t l, float cd)
{
    const sx__ivf *v = qy->v;
    size_t b = v->off[l], e = v->off[l + 1], dim = v->dim;
    const float *c = v->centroids + (size_t)l * dim;
    const float *scale = v->sq.scale;
    const uint32_t *ids = v->ids;
    const uint64_t *allow = qy->allow;
    sx__topk *h = qy->h;
    float bound = sx__topk_bound(h);
    const uint64_t *ex = v->sq_exact;
    if (v->metric == SX_METRIC_L2) {
        for (size_t d = 0; d < dim; d++)
            qy->prep[d] = qy->q[d] - c[d] - v->sq.vmin[d];
        sx__sq8_l2_fn l2 = qy->sqk->l2;
        for (size_t p = b; p < e; p++) {
            uint32_t id = ids[p];
            if (allow && !sx__bits_test(allow, id))
                continue;
            float d = ex && sx__bits_test(ex, p) ? v->dist(qy->q, v->vecs + (size_t)id * dim, dim)
                                                 : l2(qy->prep, scale, v->sq_codes + p * dim, dim);
            if (d <= bound) {
                sx__topk_push(h, d, id);
                bound = sx__topk_bound(h);
            }
        }
        return;
    }
    sx__sq8_dot_fn dot = qy->sqk->dot;
    float base = cd - qy->sq_bias;
    for (size_t p = b; p < e; p++) {
        uint32_t id = ids[p];
        if (allow && !sx__bits_test(allow, id))
            continue;
        float d = ex && sx__bits_test(ex, p) ? v->dist(qy->q, v->vecs + (size_t)id * dim, dim)
                                             : base - dot(qy->prep, v->sq_codes + p * dim, dim);
        if (d <= bound) {
            sx__topk_push(h, d, id);
            bound = sx__topk_bound(h);
        }
    }
}

static void scan_pq(query *qy, uint32_t l, float cd)
{
    const sx__ivf *v = qy->v;
    size_t m = v->m, ksub = v->pq.ksub;
    size_t cnt = sx__ivf_list_size(v, l), b0 = v->off[l];
    const uint8_t *blk = v->pq_codes + (size_t)v->blk[l] * m * SX__IVF_PQ_BLOCK;
    const float *term = v->term ? v->term + (size_t)v->blk[l] * SX__IVF_PQ_BLOCK : NULL;
    const uint32_t *ids = v->ids + b0;
    const uint64_t *allow = qy->allow;
    sx__topk *h = qy->h;
    float bound = sx__topk_bound(h);
    float *out = qy->blockd;
    for (size_t t0 = 0; t0 < cnt; t0 += SX__IVF_PQ_BLOCK, blk += m * SX__IVF_PQ_BLOCK) {
        qy->adc(qy->qtab, ksub, blk, m, cd, term ? term + t0 : NULL, out);
        size_t lanes = cnt - t0 < SX__IVF_PQ_BLOCK ? cnt - t0 : SX__IVF_PQ_BLOCK;
        for (size_t t = 0; t < lanes; t++) {
            if (out[t] > bound)
                continue;
            uint32_t id = ids[t0 + t];
            if (allow && !sx__bits_test(allow, id))
                continue;
            sx__topk_push(h, out[t], id);
            bound = sx__topk_bound(h);
        }
    }
}

static void scan_list(query *qy, uint32_t l, float cd)
{
    switch (qy->v->kind) {
    case SX__IVF_KIND_FLAT:
        scan_flat(qy, l);
        break;
    case SX__IVF_KIND_SQ8:
        scan_sq8(qy, l, cd);
        break;
    case SX__IVF_KIND_PQ:
        scan_pq(qy, l, cd);
        break;
    }
}

static int hit_cmp(const void *a, const void *b)
{
    const sx__hit *x = a, *y = b;
    if (sx__hit_better(*x, *y))
        return -1;
    if (sx__hit_better(*y, *x))
        return 1;
    return 0;
}

/* ---------------------------------------------------------------- search */

sx_status sx__ivf_search(const sx__index *idx,
                         const float *query_vec,
                         size_t k,
                         const sx_param *sp,
                         size_t nsp,
                         const uint64_t *allow,
                         sx__topk *out)
{
    const sx__ivf *v = sx__ivf_of(idx);
    search_params prm;
    sx_status rc = parse_search(v->kind, sp, nsp, false, &prm);
    if (rc != SX_OK)
        return rc;
    if (k == 0 || v->n == 0 || v->nlist == 0)
        return SX_OK;
    size_t nl = v->nlist, dim = v->dim;
    size_t nprobe = (size_t)prm.nprobe < nl ? (size_t)prm.nprobe : nl;
    bool refine = prm.refine && v->kind != SX__IVF_KIND_FLAT;
    size_t kr = 0;
    if (refine) {
        double want = ceil((double)k * prm.refine_k);
        kr = want >= (double)v->n ? v->n : (size_t)want;
        if (kr < k)
            kr = k;
    }
    size_t tn = v->kind == SX__IVF_KIND_PQ ? (size_t)v->m * v->pq.ksub : 0;

    /* carve the scratch */
    size_t o_cd = 0;
    size_t o_hits = o_cd + align64(nl * sizeof(float));
    size_t o_prep = o_hits + align64(nl * sizeof(sx__hit));
    size_t o_qtab = o_prep + align64(dim * sizeof(float));
    size_t o_blk = o_qtab + align64(tn * sizeof(float));
    size_t o_cand = o_blk + align64(SX__IVF_PQ_BLOCK * sizeof(float));
    size_t total = o_cand + align64(kr * sizeof(sx__hit));
    char *buf = thread_buf(total);
    if (!buf)
        return sx__err(SX_ENOMEM, "%s: cannot allocate %zu bytes of search scratch",
                       sx__ivf_kind_name(v->kind), total);
    float *cd = (float *)(void *)(buf + o_cd);
    sx__hit *hits = (sx__hit *)(void *)(buf + o_hits);

    query qy;
    memset(&qy, 0, sizeof qy);
    qy.v = v;
    qy.q = query_vec;
    qy.allow = allow;
    qy.prep = (float *)(void *)(buf + o_prep);
    qy.qtab = (float *)(void *)(buf + o_qtab);
    qy.blockd = (float *)(void *)(buf + o_blk);
    sx__topk cand;
    if (refine) {
        sx__topk_init(&cand, (sx__hit *)(void *)(buf + o_cand), kr);
        qy.h = &cand;
    } else {
        qy.h = out;
    }

    /* per-query preparation */
    if (v->kind == SX__IVF_KIND_SQ8) {
        qy.sqk = sx__sq8_kernels_get();
        if (v->metric != SX_METRIC_L2)
            sx__sq8_prepare(&v->sq, query_vec, v->metric, qy.prep, &qy.sq_bias);
    } else if (v->kind == SX__IVF_KIND_PQ) {
        qy.adc = sx__ivf_adc_for(NULL);
        /* -<q_j, p_js>, doubled for L2 (ivf.h) */
        sx__pq_table(&v->pq, query_vec, SX_METRIC_IP, qy.qtab);
        if (v->metric == SX_METRIC_L2)
            for (size_t i = 0; i < tn; i++)
                qy.qtab[i] *= 2.0f;
    }

    /* 1. coarse */
    for (size_t l = 0; l < nl; l++)
        cd[l] = v->dist(query_vec, v->centroids + l * dim, dim);
    size_t probed;
    if (nprobe * 4 >= nl) {
        for (size_t l = 0; l < nl; l++) {
            hits[l].dist = cd[l];
            hits[l].id = (uint32_t)l;
        }
        qsort(hits, nl, sizeof *hits, hit_cmp);
        probed = nl; /* fully ordered */
    } else {
        sx__topk t;
        sx__topk_init(&t, hits, nprobe);
        for (size_t l = 0; l < nl; l++)
            if (cd[l] <= sx__topk_bound(&t))
                sx__topk_push(&t, cd[l], (uint32_t)l);
        sx__topk_sort(&t);
        probed = nprobe; /* only the first nprobe are ordered */
    }

    /* 2. scan */
    for (size_t i = 0; i < nprobe; i++)
        scan_list(&qy, hits[i].id, hits[i].dist);

    /* 3. too few rows: continue in centroid order */
    if (qy.h->n < (refine ? kr : k) && nprobe < nl) {
        if (probed < nl) {
            for (size_t l = 0; l < nl; l++) {
                hits[l].dist = cd[l];
                hits[l].id = (uint32_t)l;
            }
            qsort(hits, nl, sizeof *hits, hit_cmp);
        }
        for (size_t i = nprobe; i < nl && qy.h->n < (refine ? kr : k); i++)
            scan_list(&qy, hits[i].id, hits[i].dist);
    }

    /* 4. refine: the candidates' rows are random accesses into the borrowed vectors, so each
     * one is prefetched whole REFINE_AHEAD candidates before its distance is computed */
    if (refine) {
        size_t lines = (dim * sizeof(float) + 63) / 64;
        if (lines > 64) /* a 4 KiB head is enough for the hardware prefetcher to follow */
            lines = 64;
        for (size_t i = 0; i < cand.n + REFINE_AHEAD; i++) {
            if (i < cand.n) {
                const char *r = (const char *)(v->vecs + (size_t)cand.h[i].id * dim);
                for (size_t c = 0; c < lines; c++)
                    __builtin_prefetch(r + 64 * c, 0, 3);
            }
            if (i < REFINE_AHEAD)
                continue;
            uint32_t id = cand.h[i - REFINE_AHEAD].id;
            float d = v->dist(query_vec, v->vecs + (size_t)id * dim, dim);
            if (d <= sx__topk_bound(out))
                sx__topk_push(out, d, id);
        }
    }
    return SX_OK;
}
