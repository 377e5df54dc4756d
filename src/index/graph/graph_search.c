/*
 * graph_search.c: the allocation side of the graph-search helpers of graph.h: visited tags, the
 * per-thread search scratch, and the one TLS mechanism every graph family's search uses.
 *
 * TLS. Each thread that searches keeps one object per family (HNSW, HNSW_SQ, GPU_CAGRA, DISKANN
 * scratch) in a _Thread_local array, so a query finds its scratch with one TLS load; one
 * process-wide pthread key, set to a non-NULL marker on a thread's first use, has a destructor
 * that runs each object's class fini and frees it when the thread exits. Key destructors run in
 * the exiting thread, so the destructor still sees that thread's _Thread_local array.
 * Rejected: one pthread key per family (four copies of this code, the state before), and
 * _Thread_local objects alone (C has no thread-exit destructors, so a pool of search threads
 * that come and go would leak their scratch).
 *
 * Thread-safety: sx__graph_tls_get is thread-safe (pthread_once for the key, then only the
 * calling thread's own slots). The reserve functions touch only the caller's scratch.
 */
#include <pthread.h>
#include <string.h>

#include "index/graph/graph.h"
#include "util/alloc.h"
#include "util/err.h"

/* ---------------------------------------------------------------- visited tags */

sx_status sx__visited_reserve(sx__visited *v, size_t n)
{
    if (n <= v->cap)
        return SX_OK;
    uint16_t *t = sx__calloc(n, sizeof *t);
    if (!t)
        return sx__err(SX_ENOMEM, "graph search: cannot allocate visited tags for %zu nodes", n);
    sx__free(v->tags);
    v->tags = t;
    v->cap = n;
    v->epoch = 0;
    return SX_OK;
}

void sx__visited_fini(sx__visited *v)
{
    sx__free(v->tags);
    memset(v, 0, sizeof *v);
}

/* ---------------------------------------------------------------- scratch */

bool sx__graph_grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *p = sx__realloc(*buf, c * elem);
    if (!p)
        return false;
    *buf = p;
    *cap = c;
    return true;
}

sx_status
sx__graph_scratch_reserve(sx__graph_scratch *s, size_t n, size_t pool, size_t todo, const char *who)
{
    sx_status rc = sx__visited_reserve(&s->vis, n);
    if (rc != SX_OK)
        return sx__err(rc, "%s: cannot allocate visited tags for %zu nodes", who, n);
    if (!sx__graph_grow((void **)&s->pool, &s->pool_cap, pool + 1, sizeof *s->pool))
        return sx__err(SX_ENOMEM, "%s: cannot allocate a search pool of %zu", who, pool);
    if (todo > s->todo_cap) {
        uint32_t *t = sx__realloc(s->todo, todo * sizeof *t);
        if (!t)
            return sx__err(SX_ENOMEM, "%s: cannot allocate search scratch", who);
        s->todo = t;
        float *d = sx__realloc(s->dists, todo * sizeof *d);
        if (!d)
            return sx__err(SX_ENOMEM, "%s: cannot allocate search scratch", who);
        s->dists = d;
        s->todo_cap = todo;
    }
    return SX_OK;
}

sx_status sx__graph_scratch_filtered(sx__graph_scratch *s, size_t res, size_t cand, const char *who)
{
    if (!sx__graph_grow((void **)&s->res, &s->res_cap, res, sizeof *s->res))
        return sx__err(SX_ENOMEM, "%s: cannot allocate %zu results", who, res);
    if (!sx__graph_grow((void **)&s->cand, &s->cand_cap, cand, sizeof *s->cand))
        return sx__err(SX_ENOMEM, "%s: cannot grow the candidate heap to %zu", who, cand);
    return SX_OK;
}

void sx__graph_scratch_fini(sx__graph_scratch *s)
{
    sx__visited_fini(&s->vis);
    sx__free(s->pool);
    sx__free(s->todo);
    sx__free(s->dists);
    sx__free(s->cand);
    sx__free(s->res);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- TLS */

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
static _Thread_local void *tls_obj[SX__GRAPH_TLS_SLOTS];
static _Thread_local const sx__graph_tls_class *tls_cls[SX__GRAPH_TLS_SLOTS];

/* Thread exit: every object of this thread, fini then free. */
static void tls_destroy(void *marker)
{
    (void)marker;
    for (unsigned i = 0; i < SX__GRAPH_TLS_SLOTS; i++) {
        void *p = tls_obj[i];
        if (!p)
            continue;
        tls_obj[i] = NULL;
        if (tls_cls[i]->fini)
            tls_cls[i]->fini(p);
        sx__free(p);
    }
}

static void tls_init(void)
{
    tls_ok = pthread_key_create(&tls_key, tls_destroy) == 0;
}

void *sx__graph_tls_get(const sx__graph_tls_class *c)
{
    if (c->slot >= SX__GRAPH_TLS_SLOTS)
        return NULL;
    void *p = tls_obj[c->slot];
    if (p)
        return p;
    if (pthread_once(&tls_once, tls_init) != 0 || !tls_ok)
        return NULL;
    /* the key's value only has to be non-NULL for the destructor to run */
    if (!pthread_getspecific(tls_key) && pthread_setspecific(tls_key, &tls_key) != 0)
        return NULL;
    p = sx__calloc(1, c->bytes);
    if (!p)
        return NULL;
    tls_obj[c->slot] = p;
    tls_cls[c->slot] = c;
    return p;
}
