/*
 * view.c: read views. A view is the list of segments (sealed + growing) with their visible row
 * counts and attached indexes at one instant, each refcounted, so a search runs without holding
 * any collection lock while flushes, compactions and index builds swap segments underneath.
 */
#include <string.h>

#include "engine/engine.h"
#include "util/alloc.h"
#include "util/bitset.h"
#include "util/err.h"

sx_status sx__view_get(sx_collection *c, sx__view *v)
{
    memset(v, 0, sizeof *v);
    sx__rwlock_rdlock(&c->seg_lock);
    size_t n = c->n_segs + 1;
    v->segs = sx__calloc(n, sizeof(sx__segment *));
    v->rows = sx__calloc(n, sizeof(size_t));
    v->idx = sx__calloc(n, sizeof *v->idx);
    if (!v->segs || !v->rows || !v->idx) {
        sx__rwlock_unlock(&c->seg_lock);
        sx__view_release(v);
        return sx__err(SX_ENOMEM, "read view");
    }
    for (size_t i = 0; i < n; i++) {
        sx__segment *s = i < c->n_segs ? c->segs[i] : c->growing;
        sx__seg_ref(s);
        v->segs[i] = s;
        v->rows[i] = atomic_load_explicit(&s->n_rows, memory_order_acquire);
        sx__mutex_lock(&s->idx_mu);
        for (size_t f = 0; f < SX_MAX_VECTOR_FIELDS; f++)
            if (s->index[f]) {
                atomic_fetch_add(&s->index[f]->refs, 1);
                v->idx[i][f] = s->index[f];
            }
        sx__mutex_unlock(&s->idx_mu);
    }
    v->n = n;
    sx__rwlock_unlock(&c->seg_lock);
    return SX_OK;
}

void sx__view_release(sx__view *v)
{
    for (size_t i = 0; i < v->n; i++) {
        for (size_t f = 0; f < SX_MAX_VECTOR_FIELDS; f++)
            sx__idxref_unref(v->idx[i][f]);
        sx__seg_unref(v->segs[i]);
    }
    sx__free(v->segs);
    sx__free(v->rows);
    sx__free(v->idx);
    memset(v, 0, sizeof *v);
}

sx_status sx__view_allow(const sx_collection *c,
                         const sx__view *v,
                         size_t i,
                         const sx__expr *e,
                         uint64_t **bits_out,
                         size_t *n_allowed)
{
    const sx__segment *s = v->segs[i];
    size_t n = v->rows[i];
    size_t words = sx__bits_words(n);
    uint64_t *bits = sx__calloc(words + 1, sizeof(uint64_t));
    if (!bits)
        return sx__err(SX_ENOMEM, "filter bitset");
    sx__colref cols[SX_MAX_FIELDS];
    for (size_t base = 0; base < n; base += s->chunk_rows) {
        size_t m = n - base < s->chunk_rows ? n - base : s->chunk_rows;
        if (e) {
            sx__seg_colrefs(c, s, base / s->chunk_rows, cols);
            sx_status st = sx__expr_eval(e, cols, m, bits + base / 64);
            if (st != SX_OK) {
                sx__free(bits);
                return st;
            }
        } else {
            for (size_t w = 0; w < sx__bits_words(m); w++)
                bits[base / 64 + w] = ~(uint64_t)0;
        }
    }
    if (n & 63)
        bits[words - 1] &= ((uint64_t)1 << (n & 63)) - 1;
    for (size_t w = 0; w < words; w++)
        bits[w] &= ~__atomic_load_n(&s->deleted[w], __ATOMIC_RELAXED);
    *n_allowed = sx__bits_count(bits, n);
    *bits_out = bits;
    return SX_OK;
}
