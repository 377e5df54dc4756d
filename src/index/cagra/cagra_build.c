/*
 * cagra_build.c: the CPU twin of the CAGRA graph build (cagra.h lists the four steps; the GPU
 * implementation in src/gpu follows the same recipe). Pure C over pthreads: no insertion order,
 * no per-edge locks outside NN-descent, so every step is a parallel loop over nodes.
 *
 * Step 1a, exact kNN graph. Workers take blocks of KNN_BLOCK rows and call sx__flat_scan with the
 * block as the queries (SGEMM tiles, flat.c) into per-row heaps of K + 1 (the row itself comes
 * back at distance ~0 and is dropped; with more than K + 1 exact duplicates the row may not be in
 * its heap, and then the first K are kept). O(n^2 d) flops: the route for n <=
 * SX__CAGRA_EXACT_MAX_N.
 *
 * Step 1b, NN-descent (Dong, Charikar, Li, "Efficient K-nearest neighbor graph construction for
 * generic similarity measures", WWW 2011, with the sampling of its section 2.4 and the new/old
 * flags of section 2.3). State per node: K (dist, id) sorted ascending (ties by id) and a stamp
 * byte per entry: 0 = old (already used as a join source), s > 0 = new (inserted in iteration
 * s - 1; the random initial lists carry stamp 1). One iteration:
 *   A (parallel) sampling: each node takes up to S old entries and then up to S new entries,
 *     closest first, into its forward old/new lists, and stamps those new ones old;
 *   B (serial, O(n S)) reverse sampling: for v in order, v joins rev_new[u] for each u in
 *     new[v] (rev_old likewise) by reservoir sampling with a hash of (seed, iteration, u, count),
 *     capped at S;
 *   C (parallel) local join: for each v, N = new[v] U rev_new[v], O = old[v] U rev_old[v] \ N;
 *     every pair (a, b) of N x N (a < b in position) and N x O gets d(a, b) once and is offered to
 *     both lists (insert under the target's 1-byte spinlock; new entries get stamp it + 1);
 *   D (parallel) count the entries stamped it + 1; stop when that is <= NND_DELTA * n * K or
 *     after `iters` iterations.
 * Determinism: A and D are per node, B is serial, and the outcome of C is the K best (by dist, then
 * id) of the old list and everything offered to it, whatever the order of offers (an offer is
 * rejected only when K better entries are present, and those never leave); the kernels are
 * symmetric, so d(a, b) == d(b, a) bit for bit. The graph therefore depends on the seed only, not
 * on the thread count or scheduling. Rejected: counting updates as successful inserts (that number
 * depends on the order of offers, and with it the iteration count).
 *
 * Step 2, rank-based pruning (per node, parallel): the row's ids go into a small open-addressing
 * table id -> rank; for each D at rank kAD and each B' in D's row, B' found at rank kAB > kAD adds
 * a detour to kAB (cuVS kern_prune, without the commented-out kDB < kAB condition). A stable
 * counting sort by detours (invalid ids and self last) gives the kept `degree` in (detours, rank)
 * order, as cuVS writes them.
 *
 * Step 3, reverse graph: serial over (rank, node), O(n * degree) stores, so the lists are in a
 * fixed order. Step 4, merge: per node, parallel, with sx__cagra_merge_row (src/gpu/cagra_rows.h,
 * shared verbatim with the GPU kernel). The pruning order is the one of sx__cagra_prune_key
 * (detours, then rank; invalid last), computed here by a counting sort instead of a key sort.
 *
 * Threading: a chunked parallel-for (atomic cursor; the caller is worker 0) for every parallel
 * phase; cancel is read (relaxed) before each chunk, progress is raised (CAS max, relaxed) after
 * each; all per-thread scratch is allocated before the workers start, so workers cannot fail.
 *
 * Thread-safety: the functions are pure apart from their output buffers.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "index/cagra/cagra.h"
#include "index/flat/flat.h"
#include "util/alloc.h"
#include "util/err.h"

#define KNN_BLOCK   256u
#define NODE_CHUNK  64u
#define MAX_THREADS 256u
/* NN-descent: stop when fewer than NND_DELTA * n * K entries changed in an iteration (pynndescent
 * and the paper use 0.001) */
#define NND_DELTA   0.001
/* Sample size S per list and direction: K / 4 in [8, 32]. Measured on BIGANN-10k, K = 64, 2
 * threads (graph recall vs the exact kNN graph / time): K/2 0.9997 / 2.7-3.1 s (4 iterations),
 * K/3 0.9991 / 1.8 s, K/4 0.9984 / 1.75 s (6 iterations), K/6 0.9954 / 1.6 s (9 iterations);
 * Fashion-MNIST 10k: K/2 0.9999 / 6.2 s, K/4 0.9996 / 4.0 s. */
#define NND_S_MIN   8u
#define NND_S_MAX   32u
#define NND_SEED    0xCA62A5EEDull

/* ---------------------------------------------------------------- helpers */

static uint32_t resolve_threads(uint32_t t)
{
    if (t == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        t = c > 0 ? (uint32_t)c : 1;
    }
    return t > MAX_THREADS ? MAX_THREADS : t;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline bool cancelled(const sx__build_ctx *ctx)
{
    return ctx && ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed);
}

/* Raises ctx->progress to v (never lowers it). */
static void progress_raise(const sx__build_ctx *ctx, size_t v)
{
    if (!ctx || !ctx->progress)
        return;
    size_t cur = atomic_load_explicit(ctx->progress, memory_order_relaxed);
    while (cur < v && !atomic_compare_exchange_weak_explicit(
                          ctx->progress, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* ---------------------------------------------------------------- parallel for */

/* fn(arg, thread, lo, hi) handles items [lo, hi). */
typedef void (*par_fn)(void *arg, uint32_t t, size_t lo, size_t hi);

typedef struct par {
    size_t n, chunk;
    atomic_size_t next;
    atomic_size_t done;
    atomic_bool stop;
    const sx__build_ctx *ctx;
    size_t prog_base, prog_span; /* progress = prog_base + prog_span * done / n */
    par_fn fn;
    void *arg;
} par;

typedef struct par_worker {
    par *p;
    uint32_t t;
    pthread_t tid;
    bool started;
} par_worker;

static void *par_main(void *a)
{
    par_worker *w = a;
    par *p = w->p;
    for (;;) {
        if (atomic_load_explicit(&p->stop, memory_order_relaxed))
            break;
        if (cancelled(p->ctx)) {
            atomic_store_explicit(&p->stop, true, memory_order_relaxed);
            break;
        }
        size_t lo = atomic_fetch_add_explicit(&p->next, p->chunk, memory_order_relaxed);
        if (lo >= p->n)
            break;
        size_t hi = lo + p->chunk < p->n ? lo + p->chunk : p->n;
        p->fn(p->arg, w->t, lo, hi);
        size_t d = atomic_fetch_add_explicit(&p->done, hi - lo, memory_order_relaxed) + hi - lo;
        if (p->prog_span)
            progress_raise(p->ctx, p->prog_base +
                                       (size_t)((double)p->prog_span * (double)d / (double)p->n));
    }
    return NULL;
}

/* Runs fn over [0, n) in chunks on `threads` workers (the caller is worker 0; a thread that
 * cannot be created leaves its share to the others). Returns SX_ECANCELED when ctx->cancel was
 * seen (some chunks then did not run). */
static sx_status par_run(uint32_t threads,
                         size_t n,
                         size_t chunk,
                         const sx__build_ctx *ctx,
                         size_t prog_base,
                         size_t prog_span,
                         par_fn fn,
                         void *arg)
{
    par p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.chunk = chunk ? chunk : 1;
    atomic_init(&p.next, 0);
    atomic_init(&p.done, 0);
    atomic_init(&p.stop, false);
    p.ctx = ctx;
    p.prog_base = prog_base;
    p.prog_span = prog_span;
    p.fn = fn;
    p.arg = arg;
    size_t maxt = (n + p.chunk - 1) / p.chunk;
    uint32_t nt = threads ? threads : 1;
    if (nt > maxt)
        nt = maxt ? (uint32_t)maxt : 1;
    par_worker ws[MAX_THREADS];
    for (uint32_t t = 0; t < nt; t++) {
        ws[t].p = &p;
        ws[t].t = t;
        ws[t].started = false;
    }
    for (uint32_t t = 1; t < nt; t++)
        ws[t].started = pthread_create(&ws[t].tid, NULL, par_main, &ws[t]) == 0;
    (void)par_main(&ws[0]);
    for (uint32_t t = 1; t < nt; t++)
        if (ws[t].started)
            (void)pthread_join(ws[t].tid, NULL);
    if (atomic_load_explicit(&p.stop, memory_order_relaxed) || cancelled(ctx))
        return sx__err(SX_ECANCELED, "GPU_CAGRA build canceled");
    return SX_OK;
}

/* ---------------------------------------------------------------- step 1a: exact kNN */

typedef struct knn_job {
    const float *x;
    size_t n, dim;
    sx_metric metric;
    uint32_t K;
    uint32_t *knn;
    sx__hit *store;  /* threads * KNN_BLOCK * (K + 1) */
    sx__topk *heaps; /* threads * KNN_BLOCK */
    atomic_int err;  /* first sx_status != OK of a scan */
} knn_job;

static void knn_block(void *arg, uint32_t t, size_t lo, size_t hi)
{
    knn_job *j = arg;
    size_t kk = (size_t)j->K + 1;
    sx__hit *store = j->store + (size_t)t * KNN_BLOCK * kk;
    sx__topk *heaps = j->heaps + (size_t)t * KNN_BLOCK;
    size_t nq = hi - lo;
    for (size_t q = 0; q < nq; q++)
        sx__topk_init(&heaps[q], store + q * kk, kk);
    sx_status rc =
        sx__flat_scan(j->x, j->n, j->dim, j->metric, 0, NULL, j->x + lo * j->dim, nq, heaps);
    if (rc != SX_OK) {
        int expect = SX_OK;
        (void)atomic_compare_exchange_strong(&j->err, &expect, (int)rc);
        return;
    }
    for (size_t q = 0; q < nq; q++) {
        size_t got = sx__topk_sort(&heaps[q]);
        uint32_t *row = j->knn + (lo + q) * j->K;
        uint32_t c = 0;
        for (size_t i = 0; i < got && c < j->K; i++)
            if (heaps[q].h[i].id != (uint32_t)(lo + q))
                row[c++] = heaps[q].h[i].id;
        while (c < j->K)
            row[c++] = SX__CAGRA_NONE;
    }
}

sx_status sx__cagra_knn_exact(const float *x,
                              size_t n,
                              size_t dim,
                              sx_metric metric,
                              uint32_t K,
                              uint32_t threads,
                              const sx__build_ctx *ctx,
                              uint32_t *knn)
{
    if (K == 0 || (size_t)K >= n || dim == 0 || (uint64_t)n >= SX__CAGRA_NONE)
        return sx__err(SX_EINVAL, "GPU_CAGRA: exact kNN of degree %u needs more than %zu rows", K,
                       n);
    uint32_t nt = resolve_threads(threads);
    knn_job j;
    memset(&j, 0, sizeof j);
    j.x = x;
    j.n = n;
    j.dim = dim;
    j.metric = metric;
    j.K = K;
    j.knn = knn;
    atomic_init(&j.err, SX_OK);
    j.store = sx__malloc((size_t)nt * KNN_BLOCK * ((size_t)K + 1) * sizeof *j.store);
    j.heaps = sx__malloc((size_t)nt * KNN_BLOCK * sizeof *j.heaps);
    if (!j.store || !j.heaps) {
        sx__free(j.store);
        sx__free(j.heaps);
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the kNN heaps");
    }
    sx_status rc = par_run(nt, n, KNN_BLOCK, ctx, 0, n / 2, knn_block, &j);
    sx__free(j.store);
    sx__free(j.heaps);
    if (rc == SX_OK && atomic_load(&j.err) != SX_OK)
        rc = sx__err((sx_status)atomic_load(&j.err), "GPU_CAGRA: exact kNN scan failed");
    return rc;
}

/* ---------------------------------------------------------------- step 1b: NN-descent */

typedef struct nnd {
    const float *x;
    size_t n, dim;
    sx__dist_fn dist;
    uint32_t K, S;
    uint64_t seed;
    uint32_t it;     /* current iteration (1-based) */
    float *ld;       /* n*K distances */
    uint32_t *li;    /* n*K ids */
    uint8_t *ls;     /* n*K stamps */
    uint8_t *locks;  /* n */
    uint32_t *fnew;  /* n*S forward new samples */
    uint32_t *fold;  /* n*S forward old samples */
    uint32_t *rnew;  /* n*S reverse new samples */
    uint32_t *rold;  /* n*S reverse old samples */
    uint16_t *cnt;   /* 4*n: fnew, fold, rnew, rold counts */
    uint32_t *seen;  /* 2*n: reservoir counters of rnew, rold */
    uint32_t *scr;   /* threads * 4S: join lists */
    size_t *updates; /* per thread */
} nnd;

static inline const float *nvec(const nnd *s, uint32_t id)
{
    return s->x + (size_t)id * s->dim;
}

static inline bool better(float da, uint32_t ia, float db, uint32_t ib)
{
    return da < db || (da == db && ia < ib);
}

/* Offers (d, c) to node u's list under u's lock. */
static void nnd_offer(nnd *s, uint32_t u, uint32_t c, float d)
{
    const uint32_t K = s->K;
    float *ld = s->ld + (size_t)u * K;
    uint32_t *li = s->li + (size_t)u * K;
    uint8_t *ls = s->ls + (size_t)u * K;
    sx__spin_lock(&s->locks[u]);
    if (!better(d, c, ld[K - 1], li[K - 1])) {
        sx__spin_unlock(&s->locks[u]);
        return;
    }
    for (uint32_t j = 0; j < K; j++) {
        if (li[j] == c) {
            sx__spin_unlock(&s->locks[u]);
            return;
        }
    }
    uint32_t pos = K - 1;
    while (pos > 0 && better(d, c, ld[pos - 1], li[pos - 1])) {
        ld[pos] = ld[pos - 1];
        li[pos] = li[pos - 1];
        ls[pos] = ls[pos - 1];
        pos--;
    }
    ld[pos] = d;
    li[pos] = c;
    ls[pos] = (uint8_t)(s->it + 1);
    sx__spin_unlock(&s->locks[u]);
}

/* Random initial lists: K distinct ids != v drawn from a per-node generator, sorted. */
static void nnd_init_rows(void *arg, uint32_t t, size_t lo, size_t hi)
{
    nnd *s = arg;
    (void)t;
    const uint32_t K = s->K;
    for (size_t v = lo; v < hi; v++) {
        float *ld = s->ld + v * K;
        uint32_t *li = s->li + v * K;
        uint8_t *ls = s->ls + v * K;
        uint64_t r = splitmix64(s->seed ^ splitmix64(v));
        uint32_t c = 0;
        while (c < K) {
            r = splitmix64(r);
            uint32_t id = (uint32_t)(r % s->n);
            if (id == (uint32_t)v)
                continue;
            bool dup = false;
            for (uint32_t j = 0; j < c && !dup; j++)
                dup = li[j] == id;
            if (dup)
                continue;
            float d = s->dist(nvec(s, (uint32_t)v), nvec(s, id), s->dim);
            uint32_t pos = c++;
            while (pos > 0 && better(d, id, ld[pos - 1], li[pos - 1])) {
                ld[pos] = ld[pos - 1];
                li[pos] = li[pos - 1];
                pos--;
            }
            ld[pos] = d;
            li[pos] = id;
        }
        memset(ls, 1, K);
    }
}

/* Phase A: forward samples. */
static void nnd_sample(void *arg, uint32_t t, size_t lo, size_t hi)
{
    nnd *s = arg;
    (void)t;
    const uint32_t K = s->K, S = s->S;
    for (size_t v = lo; v < hi; v++) {
        const uint32_t *li = s->li + v * K;
        uint8_t *ls = s->ls + v * K;
        uint32_t *fo = s->fold + v * S, *fn = s->fnew + v * S;
        uint16_t no = 0, nn = 0;
        for (uint32_t j = 0; j < K && no < S; j++)
            if (ls[j] == 0)
                fo[no++] = li[j];
        for (uint32_t j = 0; j < K && nn < S; j++) {
            if (ls[j] != 0) {
                fn[nn++] = li[j];
                ls[j] = 0;
            }
        }
        s->cnt[4 * v + 0] = nn;
        s->cnt[4 * v + 1] = no;
        s->cnt[4 * v + 2] = 0;
        s->cnt[4 * v + 3] = 0;
    }
}

/* Reservoir step: v joins the reverse list (lst, slot 2 or 3 of cnt) of u. */
static void rev_add(nnd *s, uint32_t u, uint32_t v, int which)
{
    const uint32_t S = s->S;
    uint32_t *lst = (which ? s->rold : s->rnew) + (size_t)u * S;
    uint16_t *c = &s->cnt[4 * (size_t)u + 2 + (size_t)which];
    uint32_t *seen = &s->seen[2 * (size_t)u + (size_t)which];
    uint32_t k = (*seen)++;
    if (*c < S) {
        lst[(*c)++] = v;
        return;
    }
    uint64_t r = splitmix64(
        s->seed ^ splitmix64(((uint64_t)s->it << 40) ^ ((uint64_t)u << 1) ^ (uint64_t)which) ^ k);
    uint64_t j = r % ((uint64_t)k + 1);
    if (j < S)
        lst[j] = v;
}

/* Phase B: reverse samples, serial (fixed order). */
static void nnd_reverse(nnd *s)
{
    const uint32_t S = s->S;
    memset(s->seen, 0, 2 * s->n * sizeof *s->seen);
    for (size_t v = 0; v < s->n; v++) {
        const uint32_t *fn = s->fnew + v * S, *fo = s->fold + v * S;
        for (uint16_t j = 0; j < s->cnt[4 * v + 0]; j++)
            rev_add(s, fn[j], (uint32_t)v, 0);
        for (uint16_t j = 0; j < s->cnt[4 * v + 1]; j++)
            rev_add(s, fo[j], (uint32_t)v, 1);
    }
}

static inline bool in_list(const uint32_t *l, uint32_t n, uint32_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (l[i] == id)
            return true;
    return false;
}

/* Phase C: local joins around nodes [lo, hi). */
static void nnd_join(void *arg, uint32_t t, size_t lo, size_t hi)
{
    nnd *s = arg;
    const uint32_t S = s->S;
    uint32_t *N = s->scr + (size_t)t * 4 * S, *O = N + (size_t)2 * S;
    for (size_t v = lo; v < hi; v++) {
        uint32_t nn = 0, no = 0;
        const uint16_t *c = &s->cnt[4 * v];
        const uint32_t *fn = s->fnew + v * S, *rn = s->rnew + v * S;
        const uint32_t *fo = s->fold + v * S, *ro = s->rold + v * S;
        for (uint16_t j = 0; j < c[0]; j++)
            N[nn++] = fn[j];
        for (uint16_t j = 0; j < c[2]; j++)
            if (!in_list(N, nn, rn[j]))
                N[nn++] = rn[j];
        for (uint16_t j = 0; j < c[1]; j++)
            if (!in_list(N, nn, fo[j]) && !in_list(O, no, fo[j]))
                O[no++] = fo[j];
        for (uint16_t j = 0; j < c[3]; j++)
            if (!in_list(N, nn, ro[j]) && !in_list(O, no, ro[j]))
                O[no++] = ro[j];
        for (uint32_t a = 0; a < nn; a++) {
            const float *va = nvec(s, N[a]);
            if (a + 1 < nn)
                __builtin_prefetch(nvec(s, N[a + 1]), 0, 3);
            for (uint32_t b = a + 1; b < nn; b++) {
                float d = s->dist(va, nvec(s, N[b]), s->dim);
                nnd_offer(s, N[a], N[b], d);
                nnd_offer(s, N[b], N[a], d);
            }
            for (uint32_t b = 0; b < no; b++) {
                float d = s->dist(va, nvec(s, O[b]), s->dim);
                nnd_offer(s, N[a], O[b], d);
                nnd_offer(s, O[b], N[a], d);
            }
        }
    }
}

/* Phase D: entries inserted in this iteration. */
static void nnd_count(void *arg, uint32_t t, size_t lo, size_t hi)
{
    nnd *s = arg;
    const uint8_t stamp = (uint8_t)(s->it + 1);
    size_t c = 0;
    for (size_t i = lo * s->K; i < hi * s->K; i++)
        c += s->ls[i] == stamp;
    s->updates[t] += c;
}

static uint32_t nnd_sample_size(uint32_t K)
{
    uint32_t S = K / 4;
    if (S < NND_S_MIN)
        S = NND_S_MIN;
    if (S > NND_S_MAX)
        S = NND_S_MAX;
    return S > K ? K : S;
}

static void nnd_fini(nnd *s)
{
    sx__free(s->ld);
    sx__free(s->li);
    sx__free(s->ls);
    sx__free(s->locks);
    sx__free(s->fnew);
    sx__free(s->fold);
    sx__free(s->rnew);
    sx__free(s->rold);
    sx__free(s->cnt);
    sx__free(s->seen);
    sx__free(s->scr);
    sx__free(s->updates);
}

sx_status sx__cagra_knn_nn_descent(const float *x,
                                   size_t n,
                                   size_t dim,
                                   sx_metric metric,
                                   uint32_t K,
                                   uint32_t iters,
                                   uint64_t seed,
                                   uint32_t threads,
                                   const sx__build_ctx *ctx,
                                   uint32_t *knn,
                                   uint32_t *iters_done)
{
    if (K == 0 || (size_t)K >= n || dim == 0 || (uint64_t)n >= SX__CAGRA_NONE)
        return sx__err(SX_EINVAL, "GPU_CAGRA: NN-descent of degree %u needs more than %zu rows", K,
                       n);
    if (iters == 0 || iters > SX__CAGRA_NND_ITERS_MAX)
        return sx__err(SX_EINVAL, "GPU_CAGRA: NN-descent iterations must be in [1, %u]",
                       SX__CAGRA_NND_ITERS_MAX);
    sx__dist_fn dist = sx__dist_for_metric(metric);
    if (!dist)
        return sx__err(SX_EINVAL, "GPU_CAGRA: unknown metric %d", (int)metric);
    uint32_t nt = resolve_threads(threads);
    nnd s;
    memset(&s, 0, sizeof s);
    s.x = x;
    s.n = n;
    s.dim = dim;
    s.dist = dist;
    s.K = K;
    s.S = nnd_sample_size(K);
    s.seed = seed ? seed : NND_SEED;
    size_t nk = n * K, ns = n * s.S;
    s.ld = sx__malloc(nk * sizeof *s.ld);
    s.li = sx__malloc(nk * sizeof *s.li);
    s.ls = sx__malloc(nk);
    s.locks = sx__calloc(n, 1);
    s.fnew = sx__malloc(ns * sizeof(uint32_t));
    s.fold = sx__malloc(ns * sizeof(uint32_t));
    s.rnew = sx__malloc(ns * sizeof(uint32_t));
    s.rold = sx__malloc(ns * sizeof(uint32_t));
    s.cnt = sx__calloc(4 * n, sizeof *s.cnt);
    s.seen = sx__malloc(2 * n * sizeof *s.seen);
    s.scr = sx__malloc((size_t)nt * 4 * s.S * sizeof *s.scr);
    s.updates = sx__calloc(nt, sizeof *s.updates);
    if (!s.ld || !s.li || !s.ls || !s.locks || !s.fnew || !s.fold || !s.rnew || !s.rold || !s.cnt ||
        !s.seen || !s.scr || !s.updates) {
        nnd_fini(&s);
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the NN-descent state (%zu x %u)", n,
                       K);
    }
    sx_status rc = par_run(nt, n, NODE_CHUNK, ctx, 0, 0, nnd_init_rows, &s);
    uint32_t it = 0;
    double stop_at = NND_DELTA * (double)n * (double)K;
    while (rc == SX_OK && it < iters) {
        s.it = ++it;
        rc = par_run(nt, n, NODE_CHUNK, ctx, 0, 0, nnd_sample, &s);
        if (rc != SX_OK)
            break;
        nnd_reverse(&s);
        rc = par_run(nt, n, NODE_CHUNK, ctx, 0, 0, nnd_join, &s);
        if (rc != SX_OK)
            break;
        memset(s.updates, 0, nt * sizeof *s.updates);
        rc = par_run(nt, n, (size_t)4 * NODE_CHUNK, ctx, 0, 0, nnd_count, &s);
        if (rc != SX_OK)
            break;
        size_t upd = 0;
        for (uint32_t t = 0; t < nt; t++)
            upd += s.updates[t];
        progress_raise(ctx, (size_t)((double)n / 2 * (double)it / (double)iters));
        if ((double)upd <= stop_at)
            break;
    }
    if (rc == SX_OK)
        memcpy(knn, s.li, nk * sizeof *knn);
    if (iters_done)
        *iters_done = it;
    nnd_fini(&s);
    return rc;
}

/* ---------------------------------------------------------------- step 2: pruning */

typedef struct prune_job {
    const uint32_t *knn;
    size_t n;
    uint32_t K, degree;
    uint32_t hcap;    /* power of two >= 4K */
    uint64_t *hent;   /* threads * hcap: id << 32 | rank, UINT64_MAX = empty */
    uint32_t *det;    /* threads * K */
    uint32_t *bucket; /* threads * (K + 2) */
    uint32_t *order;  /* threads * K */
    uint32_t *pruned;
} prune_job;

static inline uint32_t hslot(uint32_t id, uint32_t mask)
{
    return (id * 0x9E3779B1u) & mask;
}

/* Slot of id in the table (linear probing): holds id or is empty. */
static inline uint32_t hfind(const uint64_t *h, uint32_t mask, uint32_t id)
{
    uint32_t i = hslot(id, mask);
    while (h[i] != UINT64_MAX && (uint32_t)(h[i] >> 32) != id)
        i = (i + 1) & mask;
    return i;
}

static void prune_rows(void *arg, uint32_t t, size_t lo, size_t hi)
{
    prune_job *j = arg;
    const uint32_t K = j->K, D = j->degree, mask = j->hcap - 1;
    uint64_t *h = j->hent + (size_t)t * j->hcap;
    uint32_t *det = j->det + (size_t)t * K;
    uint32_t *bucket = j->bucket + (size_t)t * (K + 2);
    uint32_t *order = j->order + (size_t)t * K;
    for (size_t a = lo; a < hi; a++) {
        const uint32_t *row = j->knn + a * K;
        memset(h, 0xFF, j->hcap * sizeof *h);
        for (uint32_t r = 0; r < K; r++) {
            uint32_t id = row[r];
            det[r] = K; /* invalid (out of range, self, repeated): after every valid candidate */
            if (id >= j->n || id == (uint32_t)a)
                continue;
            uint32_t s = hfind(h, mask, id);
            if (h[s] != UINT64_MAX) /* repeated id: the first rank only */
                continue;
            h[s] = (uint64_t)id << 32 | r;
            det[r] = 0;
        }
        for (uint32_t kad = 0; kad + 1 < K; kad++) {
            uint32_t d = row[kad];
            if (d >= j->n || det[kad] == K)
                continue;
            if (kad + 2 < K && row[kad + 1] < j->n)
                __builtin_prefetch(j->knn + (size_t)row[kad + 1] * K, 0, 3);
            const uint32_t *drow = j->knn + (size_t)d * K;
            for (uint32_t kdb = 0; kdb < K; kdb++) {
                uint32_t b = drow[kdb];
                if (b >= j->n)
                    continue;
                uint64_t e = h[hfind(h, mask, b)];
                if (e != UINT64_MAX && (uint32_t)e > kad)
                    det[(uint32_t)e]++;
            }
        }
        /* stable counting sort of the ranks by detours (0..K-1 valid, K invalid) */
        memset(bucket, 0, (K + 2) * sizeof *bucket);
        for (uint32_t r = 0; r < K; r++)
            bucket[det[r] + 1]++;
        for (uint32_t b = 1; b < K + 2; b++)
            bucket[b] += bucket[b - 1];
        for (uint32_t r = 0; r < K; r++)
            order[bucket[det[r]]++] = r;
        uint32_t *out = j->pruned + a * D;
        for (uint32_t c = 0; c < D; c++) {
            if (c < K && det[order[c]] < K)
                out[c] = row[order[c]];
            else
                out[c] = SX__CAGRA_NONE;
        }
    }
}

sx_status sx__cagra_prune(const uint32_t *knn,
                          size_t n,
                          uint32_t K,
                          uint32_t degree,
                          uint32_t threads,
                          const sx__build_ctx *ctx,
                          uint32_t *pruned)
{
    if (K == 0 || degree == 0 || K > SX__CAGRA_DEGREE_MAX || (uint64_t)n >= SX__CAGRA_NONE)
        return sx__err(SX_EINVAL, "GPU_CAGRA: bad pruning shape (K %u, degree %u)", K, degree);
    uint32_t nt = resolve_threads(threads);
    prune_job j;
    memset(&j, 0, sizeof j);
    j.knn = knn;
    j.n = n;
    j.K = K;
    j.degree = degree;
    j.pruned = pruned;
    j.hcap = 16;
    while (j.hcap < 4 * K)
        j.hcap *= 2;
    j.hent = sx__malloc((size_t)nt * j.hcap * sizeof *j.hent);
    j.det = sx__malloc((size_t)nt * K * sizeof *j.det);
    j.bucket = sx__malloc((size_t)nt * (K + 2) * sizeof *j.bucket);
    j.order = sx__malloc((size_t)nt * K * sizeof *j.order);
    sx_status rc = SX_OK;
    if (!j.hent || !j.det || !j.bucket || !j.order)
        rc = sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the pruning scratch");
    else
        rc = par_run(nt, n, NODE_CHUNK, ctx, n / 2, n / 4, prune_rows, &j);
    sx__free(j.hent);
    sx__free(j.det);
    sx__free(j.bucket);
    sx__free(j.order);
    return rc;
}

/* ---------------------------------------------------------------- steps 3-4: reverse, merge */

typedef struct merge_job {
    const uint32_t *pruned, *rev, *rev_cnt;
    uint32_t degree;
    uint32_t *graph;
} merge_job;

static void merge_rows(void *arg, uint32_t t, size_t lo, size_t hi)
{
    merge_job *j = arg;
    (void)t;
    const size_t D = j->degree;
    for (size_t a = lo; a < hi; a++)
        sx__cagra_merge_row(j->pruned + a * D, j->degree, j->rev + a * D, j->rev_cnt[a],
                            j->graph + a * D);
}

sx_status
sx__cagra_merge(const uint32_t *pruned,
                size_t n,
                uint32_t degree,
                uint32_t threads,
                const sx__build_ctx *ctx,
                uint32_t *graph) /* NOLINT(readability-non-const-parameter): merge_rows writes it */
{
    if (degree == 0 || (uint64_t)n >= SX__CAGRA_NONE)
        return sx__err(SX_EINVAL, "GPU_CAGRA: bad merge shape (degree %u)", degree);
    uint32_t *rev = sx__malloc(n * degree * sizeof *rev + 1);
    uint32_t *rev_cnt = sx__calloc(n ? n : 1, sizeof *rev_cnt);
    if (!rev || !rev_cnt) {
        sx__free(rev);
        sx__free(rev_cnt);
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the reverse graph");
    }
    /* step 3: serial, lower ranks first */
    for (uint32_t r = 0; r < degree; r++) {
        for (size_t a = 0; a < n; a++) {
            uint32_t b = pruned[a * degree + r];
            if (b >= n || b == (uint32_t)a || rev_cnt[b] >= degree)
                continue;
            rev[(size_t)b * degree + rev_cnt[b]++] = (uint32_t)a;
        }
    }
    if (cancelled(ctx)) {
        sx__free(rev);
        sx__free(rev_cnt);
        return sx__err(SX_ECANCELED, "GPU_CAGRA build canceled");
    }
    merge_job j = {
        .pruned = pruned, .rev = rev, .rev_cnt = rev_cnt, .degree = degree, .graph = graph
    };
    sx_status rc =
        par_run(resolve_threads(threads), n, NODE_CHUNK, ctx, n / 2 + n / 4, n / 4, merge_rows, &j);
    sx__free(rev);
    sx__free(rev_cnt);
    return rc;
}

/* ---------------------------------------------------------------- the whole build */

bool sx__cagra_uses_nn_descent(size_t n, uint32_t K, int algo)
{
    size_t small = SX__CAGRA_SMALL_N > 4 * (size_t)K ? SX__CAGRA_SMALL_N : 4 * (size_t)K;
    if (n <= small)
        return false;
    return algo == SX__CAGRA_ALGO_NN_DESCENT || n > SX__CAGRA_EXACT_MAX_N;
}

uint64_t
sx__cagra_build_graph_bytes(size_t n, uint32_t K, uint32_t degree, int algo, uint32_t threads)
{
    uint64_t nn = n, k = K, d = degree, t = resolve_threads(threads);
    uint64_t knn = nn * k * 4;
    uint64_t step1;
    if (sx__cagra_uses_nn_descent(n, K, algo)) {
        uint64_t s = nnd_sample_size(K);
        step1 = nn * k * 9 + nn + 4 * nn * s * 4 + nn * 8 + nn * 8 + t * (4 * s * 4 + 8);
    } else {
        /* heaps + sx__flat_scan's GEMM tiles (~1.5 MiB per call) */
        step1 = t * ((uint64_t)KNN_BLOCK * (k + 1) * 8 + (uint64_t)KNN_BLOCK * 32 +
                     ((uint64_t)3 << 19));
    }
    uint64_t hcap = 16;
    while (hcap < 4 * k)
        hcap *= 2;
    uint64_t step2 = nn * d * 4 + t * (hcap * 8 + k * 12 + 8);
    uint64_t step34 = nn * d * 4 + nn * d * 4 + nn * 4;
    uint64_t later = step2 > step34 ? step2 : step34;
    return knn + (step1 > later ? step1 : later);
}

sx_status sx__cagra_build_graph(const float *x,
                                size_t n,
                                size_t dim,
                                sx_metric metric,
                                const sx__cagra_build_params *p,
                                const sx__build_ctx *ctx,
                                uint32_t *graph)
{
    if (!p || p->graph_degree == 0 || p->intermediate_degree <= p->graph_degree ||
        p->intermediate_degree > SX__CAGRA_DEGREE_MAX)
        return sx__err(SX_EINVAL, "GPU_CAGRA: graph_degree must be in [1, "
                                  "intermediate_graph_degree)");
    if (dim == 0 || (uint64_t)n >= SX__CAGRA_NONE)
        return sx__err(SX_EINVAL, "GPU_CAGRA: bad shape %zu x %zu", n, dim);
    const uint32_t D = p->graph_degree;
    if (n <= 1) {
        for (size_t i = 0; i < n * D; i++)
            graph[i] = SX__CAGRA_NONE;
        progress_raise(ctx, n);
        return SX_OK;
    }
    uint32_t threads = ctx ? ctx->threads : p->threads;
    uint32_t K = p->intermediate_degree;
    if ((size_t)K > n - 1)
        K = (uint32_t)(n - 1);
    uint32_t *knn = sx__malloc(n * K * sizeof *knn);
    uint32_t *pruned = NULL;
    if (!knn)
        return sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the %zu x %u kNN graph", n, K);
    sx_status rc;
    if (sx__cagra_uses_nn_descent(n, K, p->build_algo))
        rc = sx__cagra_knn_nn_descent(
            x, n, dim, metric, K, p->nn_descent_iters ? p->nn_descent_iters : SX__CAGRA_NND_ITERS,
            p->seed, threads, ctx, knn, NULL);
    else
        rc = sx__cagra_knn_exact(x, n, dim, metric, K, threads, ctx, knn);
    if (rc != SX_OK)
        goto out;
    progress_raise(ctx, n / 2);
    pruned = sx__malloc(n * D * sizeof *pruned);
    if (!pruned) {
        rc = sx__err(SX_ENOMEM, "GPU_CAGRA: cannot allocate the pruned graph");
        goto out;
    }
    rc = sx__cagra_prune(knn, n, K, D, threads, ctx, pruned);
    if (rc != SX_OK)
        goto out;
    rc = sx__cagra_merge(pruned, n, D, threads, ctx, graph);
out:
    sx__free(knn);
    sx__free(pruned);
    return rc;
}
